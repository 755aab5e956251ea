//! Logging, configured the way libfabric users know it.
//!
//! Environment (read once, at the first log query):
//! - `FI_LOG_LEVEL`: `warn`, `trace`, `info` or `debug` (any case). Unset
//!   means no output at all; an unknown word means `warn`.
//! - `FI_LOG_PROV`: providers to log, comma separated; a leading `^` lists
//!   those not to log. The core's own lines are never filtered out by it.
//! - `FI_LOG_SUBSYS`: subsystems to log, same syntax.
//! - `FI_LOG_INTERVAL`: milliseconds between rate-limited lines (2000).
//! - `FI_LOG_LOCATION`: `stderr` (default), `stdout`, a file that must not
//!   exist yet, or a directory (a file `ofi_<pid>.log` is created in it), with
//!   mode `FI_LOG_LOCATION_MODE` (default 0600).
//!
//! A line reads
//! `libfabric:<pid>:<unix seconds>:<prefix>:<provider>:<subsystem>:<function>():<line><<level>> <message>`
//! where the prefix is usually empty (a layered provider may set it to its
//! own name while it works on behalf of a core provider).
//!
//! Query with [`enabled`] (one relaxed atomic load when logging is off) and
//! write with the macros [`fi_warn!`](crate::fi_warn), [`fi_trace!`](crate::fi_trace),
//! [`fi_info!`](crate::fi_info), [`fi_dbg!`](crate::fi_dbg), which capture the
//! calling function's name and line.
#![forbid(unsafe_code)]

#![allow(non_camel_case_types)]

use std::cell::RefCell;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

use crate::params::{self, Filter, CORE, FI_PARAM_INT, FI_PARAM_STRING};

pub use crate::abi::{
    fi_log_level, fi_log_subsys, FI_LOG_AV, FI_LOG_CNTR, FI_LOG_CORE, FI_LOG_CQ, FI_LOG_DEBUG, FI_LOG_DOMAIN,
    FI_LOG_EP_CTRL, FI_LOG_EP_DATA, FI_LOG_EQ, FI_LOG_FABRIC, FI_LOG_INFO, FI_LOG_MR, FI_LOG_TRACE, FI_LOG_WARN,
};

/// Flag of `fi_ops_log.enabled`/`ready`: the provider is excluded by `FI_LOG_PROV`.
pub const FI_LOG_PROV_FILTERED: u64 = 1;

/// Level names as printed in `<…>` and accepted by `FI_LOG_LEVEL`.
pub const LEVEL_NAMES: [&str; 4] = ["warn", "trace", "info", "debug"];
/// Subsystem names as printed and accepted by `FI_LOG_SUBSYS`.
pub const SUBSYS_NAMES: [&str; 10] =
    ["core", "fabric", "domain", "ep_ctrl", "ep_data", "av", "cq", "eq", "mr", "cntr"];

pub fn level_name(level: fi_log_level) -> Option<&'static str> {
    LEVEL_NAMES.get(level as usize).copied()
}

pub fn subsys_name(subsys: fi_log_subsys) -> Option<&'static str> {
    SUBSYS_NAMES.get(subsys as usize).copied()
}

// Mask bits: levels 0..4, subsystems 4..14, lines go to a host library,
// a provider filter is set, and "configuration has been read". Zero means
// "not read yet".
const SUBSYS_SHIFT: u32 = 4;
const HOST_BIT: u64 = 1 << 61;
const PROV_FILTER_BIT: u64 = 1 << 62;
const READY_BIT: u64 = 1 << 63;

static MASK: AtomicU64 = AtomicU64::new(0);
static CONFIG: OnceLock<Config> = OnceLock::new();
static HOST: OnceLock<Box<dyn Host>> = OnceLock::new();

/// The logging of another libfabric that has loaded this code as a DL
/// provider (its `fi_log_enabled` and `fi_log`): its `FI_LOG_*` settings
/// decide, and its lines name the provider as it knows it. Every line of
/// this library, the core's included, is the provider's there.
pub trait Host: Send + Sync {
    fn enabled(&self, level: fi_log_level, subsys: fi_log_subsys) -> bool;
    /// Write `msg` (which ends in a newline) as one line.
    fn emit(&self, level: fi_log_level, subsys: fi_log_subsys, func: &str, line: u32, msg: &str);
}

/// Send every line to `host` from now on. Once per process: false (and
/// nothing changes) when a host was set before.
pub fn set_host(host: Box<dyn Host>) -> bool {
    if HOST.set(host).is_err() {
        return false;
    }
    MASK.fetch_or(HOST_BIT, Ordering::AcqRel);
    true
}

#[cold]
fn host_enabled(level: fi_log_level, subsys: fi_log_subsys) -> bool {
    HOST.get().is_some_and(|h| h.enabled(level, subsys))
}

enum Sink {
    Stderr,
    Stdout,
    File(std::fs::File),
}

struct Config {
    mask: u64,
    prov_filter: Filter,
    interval_ms: u64,
    sink: Sink,
    /// A problem met while reading the configuration, reported once it is in place.
    deferred_warning: Option<String>,
}

/// Compute the mask from the three filter variables.
fn compute_mask(level: Option<&str>, prov: &Filter, subsys: &Filter) -> u64 {
    let mut mask = READY_BIT;
    if let Some(l) = level {
        let lvl = LEVEL_NAMES.iter().position(|n| n.eq_ignore_ascii_case(l)).unwrap_or(0);
        mask |= (1u64 << (lvl + 1)) - 1;
    }
    for (i, name) in SUBSYS_NAMES.iter().enumerate() {
        if !subsys.excludes(name) {
            mask |= 1u64 << (SUBSYS_SHIFT + i as u32);
        }
    }
    if prov.is_active() {
        mask |= PROV_FILTER_BIT;
    }
    mask
}

fn open_location(loc: &str, mode_raw: Option<&str>) -> Result<Sink, String> {
    match loc {
        "" | "stderr" => return Ok(Sink::Stderr),
        "stdout" => return Ok(Sink::Stdout),
        _ => {}
    }
    let mode = mode_raw.and_then(params::parse_int).map(|m| m as u32).unwrap_or(0o600);
    let path = std::path::Path::new(loc);
    let path = if path.is_dir() {
        path.join(format!("ofi_{}.log", std::process::id()))
    } else {
        path.to_path_buf()
    };
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&path)
        .map(Sink::File)
        .map_err(|e| format!("Could not initialize log location at '{loc}': {e}. Will write log to stderr.\n"))
}

impl Config {
    fn from_env() -> Config {
        // Read the variables directly: going through params::get would log
        // and so re-enter this initialisation.
        let var = |n: &str| std::env::var(n).ok();
        let prov_filter = Filter::parse(var("FI_LOG_PROV").as_deref());
        let subsys_filter = Filter::parse(var("FI_LOG_SUBSYS").as_deref());
        let mask = compute_mask(var("FI_LOG_LEVEL").as_deref(), &prov_filter, &subsys_filter);
        let interval_ms = var("FI_LOG_INTERVAL")
            .as_deref()
            .and_then(params::parse_int)
            .and_then(|v| u64::try_from(v).ok())
            .unwrap_or(2000);
        let (sink, deferred_warning) = match var("FI_LOG_LOCATION") {
            None => (Sink::Stderr, None),
            Some(loc) => match open_location(&loc, var("FI_LOG_LOCATION_MODE").as_deref()) {
                Ok(s) => (s, None),
                Err(w) => (Sink::Stderr, Some(w)),
            },
        };
        Config { mask, prov_filter, interval_ms, sink, deferred_warning }
    }
}

#[cold]
fn config() -> &'static Config {
    let mut fresh = false;
    let c = CONFIG.get_or_init(|| {
        fresh = true;
        let c = Config::from_env();
        // OR, not store: a host set meanwhile keeps its bit.
        MASK.fetch_or(c.mask, Ordering::AcqRel);
        c
    });
    if fresh {
        if let Some(w) = &c.deferred_warning {
            if check(c.mask, CORE, FI_LOG_WARN, FI_LOG_CORE) {
                emit_raw(CORE, FI_LOG_WARN, FI_LOG_CORE, "log_init", line!(), w);
            }
        }
    }
    c
}

/// Read the logging configuration now (otherwise it happens at the first
/// query). Also defines the `FI_LOG_*` parameters.
pub fn init() {
    define_params();
    let _ = config();
}

/// Register the parameters this module honours, for `fi_getparams`.
pub fn define_params() {
    let defs: [(&str, u32, &str); 6] = [
        ("log_level", FI_PARAM_STRING, "Specify logging level: warn, trace, info, debug (default: none)"),
        ("log_prov", FI_PARAM_STRING, "Specify specific provider to log, ^ to exclude (default: all)"),
        ("log_subsys", FI_PARAM_STRING, "Specify specific subsystem to log, ^ to exclude (default: all)"),
        ("log_interval", FI_PARAM_INT, "Delay in ms between rate limited log messages (default 2000)"),
        ("log_location", FI_PARAM_STRING, "Specify log output: stderr, stdout, filepath, or dirpath (default: stderr)"),
        ("log_location_mode", FI_PARAM_INT, "Specify file mode for log output (default: 0600)"),
    ];
    for (name, ty, help) in defs {
        let _ = params::define(CORE, name, ty, help);
    }
}

#[inline]
fn check(mask: u64, prov: &str, level: fi_log_level, subsys: fi_log_subsys) -> bool {
    if level > FI_LOG_DEBUG || subsys > FI_LOG_CNTR {
        return false;
    }
    if mask & (1u64 << level) == 0 || mask & (1u64 << (SUBSYS_SHIFT + subsys)) == 0 {
        return false;
    }
    if mask & PROV_FILTER_BIT != 0 && prov != CORE {
        return !config().prov_filter.excludes(prov);
    }
    true
}

/// Would a line from `prov` at `level` in `subsys` be written?
#[inline]
pub fn enabled(prov: &str, level: fi_log_level, subsys: fi_log_subsys) -> bool {
    let m = MASK.load(Ordering::Relaxed);
    if m & HOST_BIT != 0 {
        return host_enabled(level, subsys);
    }
    if m == 0 {
        return check(config().mask, prov, level, subsys);
    }
    check(m, prov, level, subsys)
}

/// Is `prov` excluded by `FI_LOG_PROV`? (What `FI_LOG_PROV_FILTERED` reports.)
pub fn prov_filtered(prov: &str) -> bool {
    prov != CORE && config().prov_filter.excludes(prov)
}

/// `enabled` with upstream's flag form: `FI_LOG_PROV_FILTERED` in `flags`
/// turns the line off; the provider name is not consulted.
pub fn enabled_flags(level: fi_log_level, subsys: fi_log_subsys, flags: u64) -> bool {
    flags & FI_LOG_PROV_FILTERED == 0 && enabled(CORE, level, subsys)
}

fn now_ms() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_millis() as u64
}

/// Rate limiting: true (and `*showtime` moved to now + `FI_LOG_INTERVAL`)
/// when the line is enabled and `*showtime` has passed. `*showtime` starts
/// at 0 and is owned by one call site.
pub fn ready(prov: &str, level: fi_log_level, subsys: fi_log_subsys, showtime: &mut u64) -> bool {
    ready_if(enabled(prov, level, subsys), showtime)
}

/// The timing half of [`ready`], for callers that decided enablement themselves.
pub fn ready_if(enabled: bool, showtime: &mut u64) -> bool {
    if !enabled {
        return false;
    }
    let now = now_ms();
    if now >= *showtime {
        *showtime = now + config().interval_ms;
        true
    } else {
        false
    }
}

thread_local! {
    static PREFIX: RefCell<String> = const { RefCell::new(String::new()) };
}

/// Set this thread's log prefix (the field before the provider name);
/// a layered provider names itself there while calling into a core one.
pub fn set_prefix(prefix: &str) {
    PREFIX.with(|p| {
        let mut p = p.borrow_mut();
        p.clear();
        p.push_str(prefix);
    });
}

/// One log line, without writing it.
#[allow(clippy::too_many_arguments)]
pub fn format_line(
    pid: u32,
    secs: u64,
    prefix: &str,
    prov: &str,
    level: fi_log_level,
    subsys: fi_log_subsys,
    func: &str,
    line: u32,
    msg: &str,
) -> String {
    format!(
        "libfabric:{pid}:{secs}:{prefix}:{prov}:{}:{func}():{line}<{}> {msg}",
        subsys_name(subsys).unwrap_or("unknown"),
        level_name(level).unwrap_or("unknown"),
    )
}

/// Write `msg` exactly as given (a C caller's message carries its own
/// newline). Does not check [`enabled`].
pub fn emit_raw(prov: &str, level: fi_log_level, subsys: fi_log_subsys, func: &str, line: u32, msg: &str) {
    if let Some(h) = HOST.get() {
        h.emit(level, subsys, func, line, msg);
        return;
    }
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let text = PREFIX.with(|p| {
        format_line(std::process::id(), secs, &p.borrow(), prov, level, subsys, func, line, msg)
    });
    let _ = match &config().sink {
        Sink::Stderr => std::io::stderr().lock().write_all(text.as_bytes()),
        Sink::Stdout => {
            let mut o = std::io::stdout().lock();
            o.write_all(text.as_bytes()).and_then(|_| o.flush())
        }
        Sink::File(f) => { let mut f: &std::fs::File = f; f.write_all(text.as_bytes()) }
    };
}

/// Write a line from Rust code: a newline is added when `msg` lacks one.
pub fn emit(prov: &str, level: fi_log_level, subsys: fi_log_subsys, func: &str, line: u32, msg: &str) {
    if msg.ends_with('\n') {
        emit_raw(prov, level, subsys, func, line, msg);
    } else {
        emit_raw(prov, level, subsys, func, line, &format!("{msg}\n"));
    }
}

/// The short name of the function enclosing a macro call, from the type
/// name of a local item (`crate::module::function::__here`).
pub fn short_fn_name(full: &'static str) -> &'static str {
    let mut s = full.strip_suffix("::__here").unwrap_or(full);
    while let Some(t) = s.strip_suffix("::{{closure}}") {
        s = t;
    }
    s.rsplit("::").next().unwrap_or(s)
}

#[doc(hidden)]
#[macro_export]
macro_rules! __rf_fn_name {
    () => {{
        fn __here() {}
        $crate::log::short_fn_name(::std::any::type_name_of_val(&__here))
    }};
}

/// Log at an explicit level: `fi_log_at!(prov, level, subsys, "fmt", args…)`;
/// `fi_log_at!(prov, level, subsys, func = "name"; "fmt", args…)` names the function.
#[macro_export]
macro_rules! fi_log_at {
    ($prov:expr, $level:expr, $subsys:expr, func = $func:expr; $($arg:tt)+) => {{
        let prov: &str = $prov;
        if $crate::log::enabled(prov, $level, $subsys) {
            $crate::log::emit(prov, $level, $subsys, $func, line!(), &::std::format!($($arg)+));
        }
    }};
    ($prov:expr, $level:expr, $subsys:expr, $($arg:tt)+) => {{
        let prov: &str = $prov;
        if $crate::log::enabled(prov, $level, $subsys) {
            $crate::log::emit(prov, $level, $subsys, $crate::__rf_fn_name!(), line!(),
                              &::std::format!($($arg)+));
        }
    }};
}

/// `fi_warn!(prov, subsys, "fmt", args…)`.
#[macro_export]
macro_rules! fi_warn {
    ($prov:expr, $subsys:expr, $($arg:tt)+) => { $crate::fi_log_at!($prov, $crate::log::FI_LOG_WARN, $subsys, $($arg)+) };
}
/// `fi_trace!(prov, subsys, "fmt", args…)`.
#[macro_export]
macro_rules! fi_trace {
    ($prov:expr, $subsys:expr, $($arg:tt)+) => { $crate::fi_log_at!($prov, $crate::log::FI_LOG_TRACE, $subsys, $($arg)+) };
}
/// `fi_info!(prov, subsys, "fmt", args…)`.
#[macro_export]
macro_rules! fi_info {
    ($prov:expr, $subsys:expr, $($arg:tt)+) => { $crate::fi_log_at!($prov, $crate::log::FI_LOG_INFO, $subsys, $($arg)+) };
}
/// `fi_dbg!(prov, subsys, "fmt", args…)`: compiled in every build, shown
/// only with `FI_LOG_LEVEL=debug`.
#[macro_export]
macro_rules! fi_dbg {
    ($prov:expr, $subsys:expr, $($arg:tt)+) => { $crate::fi_log_at!($prov, $crate::log::FI_LOG_DEBUG, $subsys, $($arg)+) };
}

/// A bug inside the library (for example a contained panic): always
/// written, whatever `FI_LOG_LEVEL` says.
pub fn internal_error(msg: &str) {
    emit(CORE, FI_LOG_WARN, FI_LOG_CORE, "internal_error", line!(), msg);
}

/// A core warning (for example a NULL argument at the boundary).
pub fn warn_core(msg: &str) {
    if enabled(CORE, FI_LOG_WARN, FI_LOG_CORE) {
        emit(CORE, FI_LOG_WARN, FI_LOG_CORE, "warn_core", line!(), msg);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_enum_values() {
        assert_eq!(level_name(FI_LOG_WARN), Some("warn"));
        assert_eq!(level_name(FI_LOG_DEBUG), Some("debug"));
        assert_eq!(level_name(4), None);
        assert_eq!(subsys_name(FI_LOG_EP_CTRL), Some("ep_ctrl"));
        assert_eq!(subsys_name(FI_LOG_CNTR), Some("cntr"));
        assert_eq!(subsys_name(10), None);
    }

    #[test]
    fn constants_agree_with_abi_table() {
        let tsv = include_str!("../../tests/abi/constants.tsv");
        let want: &[(&str, u32)] = &[
            ("FI_LOG_WARN", FI_LOG_WARN), ("FI_LOG_TRACE", FI_LOG_TRACE),
            ("FI_LOG_INFO", FI_LOG_INFO), ("FI_LOG_DEBUG", FI_LOG_DEBUG),
            ("FI_LOG_CORE", FI_LOG_CORE), ("FI_LOG_FABRIC", FI_LOG_FABRIC),
            ("FI_LOG_DOMAIN", FI_LOG_DOMAIN), ("FI_LOG_EP_CTRL", FI_LOG_EP_CTRL),
            ("FI_LOG_EP_DATA", FI_LOG_EP_DATA), ("FI_LOG_AV", FI_LOG_AV),
            ("FI_LOG_CQ", FI_LOG_CQ), ("FI_LOG_EQ", FI_LOG_EQ), ("FI_LOG_MR", FI_LOG_MR),
            ("FI_LOG_CNTR", FI_LOG_CNTR), ("FI_LOG_PROV_FILTERED", FI_LOG_PROV_FILTERED as u32),
            ("FI_PARAM_STRING", params::FI_PARAM_STRING), ("FI_PARAM_INT", params::FI_PARAM_INT),
            ("FI_PARAM_BOOL", params::FI_PARAM_BOOL), ("FI_PARAM_SIZE_T", params::FI_PARAM_SIZE_T),
        ];
        for (name, val) in want {
            let row = tsv
                .lines()
                .find(|l| l.split('\t').next() == Some(name))
                .unwrap_or_else(|| panic!("{name} missing from constants.tsv"));
            let v: i64 = row.split('\t').nth(1).unwrap().trim().parse().unwrap();
            assert_eq!(v, *val as i64, "{name}");
        }
    }

    #[test]
    fn line_format() {
        let l = format_line(22275, 1796205498, "", "shm", FI_LOG_INFO, FI_LOG_CORE, "ofi_check_info", 1174,
                            "Unsupported capabilities\n");
        assert_eq!(l, "libfabric:22275:1796205498::shm:core:ofi_check_info():1174<info> Unsupported capabilities\n");
        let l = format_line(1, 2, "ofi_rxm", "tcp", FI_LOG_WARN, FI_LOG_EP_DATA, "f", 3, "m");
        assert_eq!(l, "libfabric:1:2:ofi_rxm:tcp:ep_data:f():3<warn> m");
    }

    #[test]
    fn masks() {
        let none = Filter::parse(None);
        let m = compute_mask(None, &none, &none);
        assert!(!check(m, "shm", FI_LOG_WARN, FI_LOG_CORE), "unset level logs nothing");
        let m = compute_mask(Some("INFO"), &none, &none);
        assert!(check(m, "shm", FI_LOG_WARN, FI_LOG_CQ));
        assert!(check(m, "shm", FI_LOG_TRACE, FI_LOG_CQ));
        assert!(check(m, "shm", FI_LOG_INFO, FI_LOG_CNTR));
        assert!(!check(m, "shm", FI_LOG_DEBUG, FI_LOG_CQ));
        assert!(!check(m, "shm", 7, FI_LOG_CQ));
        assert!(!check(m, "shm", FI_LOG_WARN, 10));
        let m = compute_mask(Some("bogus"), &none, &none);
        assert!(check(m, "shm", FI_LOG_WARN, FI_LOG_CORE));
        assert!(!check(m, "shm", FI_LOG_TRACE, FI_LOG_CORE));
        let sub = Filter::parse(Some("^cq,av"));
        let m = compute_mask(Some("debug"), &none, &sub);
        assert!(!check(m, "shm", FI_LOG_WARN, FI_LOG_CQ));
        assert!(!check(m, "shm", FI_LOG_WARN, FI_LOG_AV));
        assert!(check(m, "shm", FI_LOG_DEBUG, FI_LOG_MR));
        let sub = Filter::parse(Some("ep_data"));
        let m = compute_mask(Some("warn"), &none, &sub);
        assert!(check(m, "x", FI_LOG_WARN, FI_LOG_EP_DATA));
        assert!(!check(m, "x", FI_LOG_WARN, FI_LOG_EP_CTRL));
    }

    #[test]
    fn fn_names() {
        assert_eq!(crate::__rf_fn_name!(), "fn_names");
        let c = || crate::__rf_fn_name!();
        assert_eq!(c(), "fn_names");
        assert_eq!(short_fn_name("a::b::c::__here"), "c");
    }

    #[test]
    fn rate_limit() {
        let mut t = 0u64;
        assert!(!ready_if(false, &mut t));
        assert_eq!(t, 0);
        assert!(ready_if(true, &mut t));
        assert!(t >= config().interval_ms);
        assert!(!ready_if(true, &mut t), "second line inside the interval is held back");
    }
}
