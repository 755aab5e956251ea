//! The parts of `fi_info` that need no library: the option table and its
//! help text, the name tables for `-c`/`-m`/`-t`/`-a`, and the text of the
//! `-e` listing. `main.rs` holds the calls into `libfabric.so.1`.
//!
//! Output formats follow the upstream tool byte for byte, so scripts that
//! parse it keep working; the one deliberate difference is in
//! [`format_param`].
#![forbid(unsafe_code)]

use rfabric_core::abi::*;

/// How an option takes its argument, as `getopt_long` counts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arg {
    /// `-x` alone.
    None,
    /// `-x VALUE` / `--name=VALUE`.
    Required,
    /// Long only; sets a flag variable instead of returning a letter.
    FlagOnly,
}

/// One command-line option.
#[derive(Clone, Copy, Debug)]
pub struct Opt {
    pub short: u8,
    pub long: &'static str,
    pub arg: Arg,
    /// The placeholder shown after `=` in the help text.
    pub metavar: &'static str,
    /// The explanation, including the tabs that align it.
    pub help: &'static str,
}

const fn opt(short: u8, long: &'static str, arg: Arg, metavar: &'static str, help: &'static str) -> Opt {
    Opt { short, long, arg, metavar, help }
}

/// Every option, in the order the help lists them.
pub const OPTIONS: &[Opt] = &[
    opt(b'h', "help", Arg::None, "", "\t\tdisplay this help and exit"),
    opt(b's', "src_addr", Arg::Required, "ADDR", "\t\tsource name or address"),
    opt(b'n', "node", Arg::Required, "NAME", "\t\tdest node name or address"),
    opt(b'P', "port", Arg::Required, "PNUM", "\t\tport number"),
    opt(b'c', "caps", Arg::Required, "CAP1|CAP2..", "\tone or more capabilities: FI_MSG|FI_RMA..."),
    opt(b'm', "mode", Arg::Required, "MOD1|MOD2..", "\tone or more modes, default all modes"),
    opt(b't', "ep_type", Arg::Required, "EPTYPE", "\t\tspecify single endpoint type: FI_EP_MSG, FI_EP_DGRAM..."),
    opt(b'd', "domain", Arg::Required, "DOMAIN", "\t\tspecify the domain name"),
    opt(b'f', "fabric", Arg::Required, "FABRIC", "\t\tspecify the fabric name"),
    opt(b'a', "addr_format", Arg::Required, "FMT", "\t\tspecify accepted address format: FI_FORMAT_UNSPEC, FI_SOCKADDR..."),
    opt(b'p', "provider", Arg::Required, "PROV", "\t\tspecify provider explicitly"),
    opt(b'e', "env", Arg::None, "", "\t\tprint libfabric environment variables"),
    opt(b'g', "getenv", Arg::Required, "SUBSTR", "\t\tprint libfabric environment variables with substr"),
    // The upstream help shows no placeholder for --info although it takes one.
    opt(b'i', "info", Arg::Required, "", "\t\tprint fi_info structures containing substr"),
    opt(b'l', "list", Arg::None, "", "\t\tlist available libfabric providers"),
    opt(b'v', "verbose", Arg::None, "", "\t\tverbose output"),
    opt(0, "version", Arg::FlagOnly, "", "\t\tprint version info and exit"),
];

/// The short-option string for `getopt_long`, built from [`OPTIONS`].
pub fn short_options() -> String {
    let mut s = String::new();
    for o in OPTIONS {
        if o.short == 0 {
            continue;
        }
        s.push(o.short as char);
        if o.arg == Arg::Required {
            s.push(':');
        }
    }
    s
}

/// The help text printed by `-h` and after a bad option.
pub fn usage(argv0: &str) -> String {
    let mut s = format!("Usage: {argv0}\n");
    for o in OPTIONS {
        let line = match o.arg {
            Arg::Required => format!("  -{}, --{}={}{}\n", o.short as char, o.long, o.metavar, o.help),
            Arg::FlagOnly => format!("  --{}\t{}\n", o.long, o.help),
            Arg::None => format!("  -{}, --{}\t{}\n", o.short as char, o.long, o.help),
        };
        s.push_str(&line);
    }
    s
}

/// Which name table a list argument is read with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Table {
    Caps,
    Mode,
    EpType,
    AddrFormat,
}

impl Table {
    fn entries(self) -> &'static [(&'static str, u64)] {
        match self {
            Table::Caps => CAPS,
            Table::Mode => MODES,
            Table::EpType => EP_TYPES,
            Table::AddrFormat => ADDR_FORMATS,
        }
    }

    /// What the error line calls a name of this table.
    fn what(self) -> &'static str {
        match self {
            Table::Caps => "capability",
            Table::Mode => "mode",
            Table::EpType => "endpoint type",
            Table::AddrFormat => "address format",
        }
    }
}

/// Capability names `-c` accepts: the primary and secondary capabilities.
const CAPS: &[(&str, u64)] = &[
    ("FI_MSG", FI_MSG),
    ("FI_RMA", FI_RMA),
    ("FI_TAGGED", FI_TAGGED),
    ("FI_ATOMIC", FI_ATOMIC),
    ("FI_MULTICAST", FI_MULTICAST),
    ("FI_COLLECTIVE", FI_COLLECTIVE),
    ("FI_READ", FI_READ),
    ("FI_WRITE", FI_WRITE),
    ("FI_RECV", FI_RECV),
    ("FI_SEND", FI_SEND),
    ("FI_REMOTE_READ", FI_REMOTE_READ),
    ("FI_REMOTE_WRITE", FI_REMOTE_WRITE),
    ("FI_MULTI_RECV", FI_MULTI_RECV),
    ("FI_REMOTE_CQ_DATA", FI_REMOTE_CQ_DATA),
    ("FI_MORE", FI_MORE),
    ("FI_PEEK", FI_PEEK),
    ("FI_TRIGGER", FI_TRIGGER),
    ("FI_FENCE", FI_FENCE),
    ("FI_SOURCE_ERR", FI_SOURCE_ERR),
    ("FI_LOCAL_COMM", FI_LOCAL_COMM),
    ("FI_REMOTE_COMM", FI_REMOTE_COMM),
    ("FI_SHARED_AV", FI_SHARED_AV),
    ("FI_RMA_EVENT", FI_RMA_EVENT),
    ("FI_SOURCE", FI_SOURCE),
    ("FI_NAMED_RX_CTX", FI_NAMED_RX_CTX),
    ("FI_DIRECTED_RECV", FI_DIRECTED_RECV),
    ("FI_HMEM", FI_HMEM),
    // Capabilities of API 1.18 and later that the 1.17 tool does not know.
    ("FI_RMA_PMEM", FI_RMA_PMEM),
    ("FI_AV_USER_ID", FI_AV_USER_ID),
    ("FI_PEER", FI_PEER),
    ("FI_XPU", FI_XPU),
    ("FI_TAGGED_DIRECTED_RECV", FI_TAGGED_DIRECTED_RECV),
    ("FI_TAGGED_MULTI_RECV", FI_TAGGED_MULTI_RECV),
    ("FI_EXACT_DIRECTED_RECV", FI_EXACT_DIRECTED_RECV),
];

/// Mode bits `-m` accepts.
const MODES: &[(&str, u64)] = &[
    ("FI_CONTEXT", FI_CONTEXT),
    ("FI_MSG_PREFIX", FI_MSG_PREFIX),
    ("FI_ASYNC_IOV", FI_ASYNC_IOV),
    ("FI_RX_CQ_DATA", FI_RX_CQ_DATA),
    ("FI_LOCAL_MR", FI_LOCAL_MR),
    ("FI_NOTIFY_FLAGS_ONLY", FI_NOTIFY_FLAGS_ONLY),
    ("FI_RESTRICTED_COMP", FI_RESTRICTED_COMP),
    ("FI_CONTEXT2", FI_CONTEXT2),
];

/// Endpoint types `-t` accepts. FI_EP_SOCK_DGRAM is gone from API 2.x.
const EP_TYPES: &[(&str, u64)] = &[
    ("FI_EP_UNSPEC", FI_EP_UNSPEC as u64),
    ("FI_EP_MSG", FI_EP_MSG as u64),
    ("FI_EP_DGRAM", FI_EP_DGRAM as u64),
    ("FI_EP_RDM", FI_EP_RDM as u64),
    ("FI_EP_SOCK_STREAM", FI_EP_SOCK_STREAM as u64),
];

/// Address formats `-a` accepts.
const ADDR_FORMATS: &[(&str, u64)] = &[
    ("FI_FORMAT_UNSPEC", FI_FORMAT_UNSPEC as u64),
    ("FI_SOCKADDR", FI_SOCKADDR as u64),
    ("FI_SOCKADDR_IN", FI_SOCKADDR_IN as u64),
    ("FI_SOCKADDR_IN6", FI_SOCKADDR_IN6 as u64),
    ("FI_SOCKADDR_IB", FI_SOCKADDR_IB as u64),
    ("FI_ADDR_PSMX", FI_ADDR_PSMX as u64),
    ("FI_ADDR_GNI", FI_ADDR_GNI as u64),
    ("FI_ADDR_BGQ", FI_ADDR_BGQ as u64),
    ("FI_ADDR_MLX", FI_ADDR_MLX as u64),
    ("FI_ADDR_STR", FI_ADDR_STR as u64),
    ("FI_ADDR_PSMX2", FI_ADDR_PSMX2 as u64),
    ("FI_ADDR_IB_UD", FI_ADDR_IB_UD as u64),
    ("FI_ADDR_EFA", FI_ADDR_EFA as u64),
    ("FI_ADDR_PSMX3", FI_ADDR_PSMX3 as u64),
    ("FI_ADDR_OPX", FI_ADDR_OPX as u64),
    ("FI_ADDR_CXI", FI_ADDR_CXI as u64),
    ("FI_ADDR_UCX", FI_ADDR_UCX as u64),
    ("FI_SOCKADDR_IP", FI_SOCKADDR_IP as u64),
];

/// One name looked up case-insensitively; on failure the error line the
/// tool prints (`error: Unrecognized capability: FI_FOO`).
pub fn lookup(table: Table, name: &[u8]) -> Result<u64, String> {
    table
        .entries()
        .iter()
        .find(|(n, _)| n.as_bytes().eq_ignore_ascii_case(name))
        .map(|&(_, v)| v)
        .ok_or_else(|| format!("error: Unrecognized {}: {}", table.what(), String::from_utf8_lossy(name)))
}

/// A `|`-separated list (`FI_MSG|FI_TAGGED`) OR-ed together. Empty pieces
/// are skipped, as a tokenizer on `|` would.
pub fn parse_list(table: Table, list: &[u8]) -> Result<u64, String> {
    let mut bits = 0;
    for name in list.split(|&b| b == b'|').filter(|n| !n.is_empty()) {
        bits |= lookup(table, name)?;
    }
    Ok(bits)
}

/// The description of a parameter type in the `-e` listing.
pub fn param_type_name(t: fi_param_type) -> &'static str {
    match t {
        FI_PARAM_STRING => "String",
        FI_PARAM_INT => "Integer",
        FI_PARAM_SIZE_T => "size_t",
        FI_PARAM_BOOL => "Boolean (0/1, on/off, true/false, yes/no)",
        _ => "Unknown",
    }
}

/// One parameter of the `-e` listing: a `#` line with name and type, a `#`
/// line with the help, the `NAME=value` line when it is set, a blank line.
/// A missing string prints as `(null)`, as C's printf does.
///
/// A value with a space is quoted. Upstream writes a NUL byte on each side
/// of a value without a space (its "no quote" character is `'\0'` printed
/// with `%c`); we write nothing there, so the listing stays plain text.
pub fn format_param(name: &[u8], t: fi_param_type, help: Option<&[u8]>, value: Option<&[u8]>) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(b"# ");
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(param_type_name(t).as_bytes());
    out.extend_from_slice(b"\n# ");
    out.extend_from_slice(help.unwrap_or(b"(null)"));
    out.push(b'\n');
    if let Some(v) = value {
        let quote: &[u8] = if v.contains(&b' ') { b"\"" } else { b"" };
        out.extend_from_slice(name);
        out.push(b'=');
        out.extend_from_slice(quote);
        out.extend_from_slice(v);
        out.extend_from_slice(quote);
        out.push(b'\n');
    }
    out.push(b'\n');
    out
}

/// Case-insensitive substring test (what the `-g` and `-i` filters use).
pub fn contains_ignore_case(haystack: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || haystack.windows(needle.len()).any(|w| w.eq_ignore_ascii_case(needle))
}

/// `M.m` of a packed version.
pub fn version_str(v: u32) -> String {
    format!("{}.{}", fi_major(v), fi_minor(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_options_match_the_table() {
        assert_eq!(short_options(), "hs:n:P:c:m:t:d:f:a:p:eg:i:lv");
    }

    #[test]
    fn usage_lines() {
        let u = usage("fi_info");
        let lines: Vec<&str> = u.lines().collect();
        assert_eq!(lines[0], "Usage: fi_info");
        assert_eq!(lines[1], "  -h, --help\t\t\tdisplay this help and exit");
        assert_eq!(lines[5], "  -c, --caps=CAP1|CAP2..\tone or more capabilities: FI_MSG|FI_RMA...");
        assert_eq!(lines.last().copied(), Some("  --version\t\t\tprint version info and exit"));
        assert_eq!(lines.len(), OPTIONS.len() + 1);
    }

    #[test]
    fn caps_list() {
        assert_eq!(parse_list(Table::Caps, b"FI_MSG|FI_TAGGED"), Ok(FI_MSG | FI_TAGGED));
        assert_eq!(parse_list(Table::Caps, b"fi_msg||FI_Rma|"), Ok(FI_MSG | FI_RMA));
        assert_eq!(parse_list(Table::Caps, b""), Ok(0));
        assert_eq!(
            parse_list(Table::Caps, b"FI_MSG|FI_BOGUS"),
            Err("error: Unrecognized capability: FI_BOGUS".to_string())
        );
        // A mode name is not a capability.
        assert!(parse_list(Table::Caps, b"FI_CONTEXT").is_err());
    }

    #[test]
    fn single_names() {
        assert_eq!(lookup(Table::EpType, b"fi_ep_rdm"), Ok(FI_EP_RDM as u64));
        assert_eq!(lookup(Table::AddrFormat, b"FI_SOCKADDR_IN"), Ok(FI_SOCKADDR_IN as u64));
        assert_eq!(lookup(Table::Mode, b"FI_CONTEXT2"), Ok(FI_CONTEXT2));
        assert_eq!(lookup(Table::EpType, b"FI_EP_RDMX"), Err("error: Unrecognized endpoint type: FI_EP_RDMX".into()));
        assert_eq!(lookup(Table::AddrFormat, b"x"), Err("error: Unrecognized address format: x".into()));
        assert_eq!(lookup(Table::Mode, b"FI_MSG"), Err("error: Unrecognized mode: FI_MSG".into()));
    }

    #[test]
    fn param_lines() {
        let p = format_param(b"FI_A", FI_PARAM_INT, Some(b"help me"), None);
        assert_eq!(p, b"# FI_A: Integer\n# help me\n\n");
        let p = format_param(b"FI_B", FI_PARAM_STRING, None, Some(b"x y"));
        assert_eq!(p, b"# FI_B: String\n# (null)\nFI_B=\"x y\"\n\n");
        let p = format_param(b"FI_C", 99, Some(b"h"), Some(b"warn"));
        assert_eq!(p, b"# FI_C: Unknown\n# h\nFI_C=warn\n\n");
        assert_eq!(param_type_name(FI_PARAM_BOOL), "Boolean (0/1, on/off, true/false, yes/no)");
        assert_eq!(param_type_name(FI_PARAM_SIZE_T), "size_t");
    }

    #[test]
    fn substring_filter() {
        assert!(contains_ignore_case(b"FI_LOG_LEVEL", b"log"));
        assert!(!contains_ignore_case(b"FI_LOG_LEVEL", b"shm"));
        assert!(contains_ignore_case(b"x", b""));
        assert!(!contains_ignore_case(b"", b"a"));
    }

    #[test]
    fn versions() {
        assert_eq!(version_str(fi_version(117, 0)), "117.0");
        assert_eq!(version_str(fi_version(2, 8)), "2.8");
    }
}
