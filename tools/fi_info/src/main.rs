//! `fi_info`: list the fabric interfaces, providers and parameters that
//! `libfabric.so.1` offers. Same options, output and exit codes as the
//! upstream tool; it reaches the library only through its C ABI (linked
//! dynamically), so it can be run against any `libfabric.so.1`.
//!
//! Options are read with the C library's `getopt_long`, so abbreviations,
//! clustered short options, `--opt=value` and the error lines for bad
//! options are exactly the ones users know from the C tool.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::io::Write;
use std::ptr;

use rfabric_core::abi::*;
use rfabric_fi_info::{
    contains_ignore_case, format_param, parse_list, short_options, usage, version_str, Arg, Table, OPTIONS,
};

#[link(name = "fabric")]
extern "C" {
    fn fi_getinfo(
        version: u32,
        node: *const c_char,
        service: *const c_char,
        flags: u64,
        hints: *const fi_info,
        info: *mut *mut fi_info,
    ) -> c_int;
    fn fi_freeinfo(info: *mut fi_info);
    fn fi_dupinfo(info: *const fi_info) -> *mut fi_info;
    fn fi_tostr(data: *const c_void, datatype: fi_type) -> *mut c_char;
    fn fi_tostr_r(buf: *mut c_char, len: usize, data: *const c_void, datatype: fi_type) -> *mut c_char;
    fn fi_getparams(params: *mut *mut fi_param, count: *mut c_int) -> c_int;
    fn fi_freeparams(params: *mut fi_param);
}

// getopt's state, from the C library (the libc crate does not declare it).
extern "C" {
    static mut optarg: *mut c_char;
}

/// `has_arg` values of `struct option` (<getopt.h>).
const NO_ARGUMENT: c_int = 0;
const REQUIRED_ARGUMENT: c_int = 1;

/// Size of the buffer each `fi_info` is formatted into for `-v`; a longer
/// description is cut there, as upstream's is.
const LONG_INFO_BUF: usize = 8192;

/// What the options asked for.
#[derive(Default)]
struct Request {
    node: Option<CString>,
    port: Option<CString>,
    flags: u64,
    use_hints: bool,
    list: bool,
    verbose: bool,
    env: bool,
    /// The `-g` / `-i` filter.
    filter: Option<Vec<u8>>,
}

/// Bytes of a C string, or `(null)` like C's printf.
///
/// # Safety
/// `s` is NULL or a NUL-terminated string that outlives the result.
unsafe fn c_bytes<'a>(s: *const c_char) -> &'a [u8] {
    if s.is_null() {
        b"(null)"
    } else {
        // SAFETY: non-NULL and NUL-terminated per this function's contract.
        unsafe { CStr::from_ptr(s) }.to_bytes()
    }
}

/// A C string the library may free or replace (hints are freed with
/// `fi_freeinfo`, so their strings come from the C allocator).
fn c_strdup(s: &CStr) -> *mut c_char {
    // SAFETY: `s` is a valid NUL-terminated string.
    unsafe { libc::strdup(s.as_ptr()) }
}

/// Replace a string member of the hints, freeing the old one.
///
/// # Safety
/// `slot` points to a string member that is NULL or C-allocated.
unsafe fn set_string(slot: *mut *mut c_char, value: &CStr) {
    // SAFETY: `slot` is a valid member per this function's contract; the
    // old string came from the C allocator.
    unsafe {
        libc::free((*slot).cast());
        *slot = c_strdup(value);
    }
}

fn main() {
    let code = real_main();
    std::process::exit(code);
}

fn real_main() -> i32 {
    // argv as C strings (an argument with an interior NUL cannot come from
    // exec, so dropping at it loses nothing).
    let args: Vec<CString> = std::env::args_os()
        .map(|a| {
            use std::os::unix::ffi::OsStringExt;
            let mut v = a.into_vec();
            if let Some(p) = v.iter().position(|&b| b == 0) {
                v.truncate(p);
            }
            CString::new(v).unwrap_or_default()
        })
        .collect();
    let argv0 = args.first().map(|a| a.to_string_lossy().into_owned()).unwrap_or_else(|| "fi_info".into());
    let mut argv: Vec<*mut c_char> = args.iter().map(|a| a.as_ptr() as *mut c_char).collect();
    argv.push(ptr::null_mut());
    let argc = (argv.len() - 1) as c_int;

    // fi_allocinfo() is fi_dupinfo(NULL).
    // SAFETY: NULL asks for a fresh, zeroed fi_info with its attributes.
    let hints = unsafe { fi_dupinfo(ptr::null()) };
    if hints.is_null() {
        return 1;
    }
    // SAFETY: fi_dupinfo(NULL) allocates every attribute struct.
    unsafe {
        (*hints).mode = !0;
        (*(*hints).domain_attr).mode = !0;
        (*(*hints).domain_attr).mr_mode = !((FI_MR_BASIC | FI_MR_SCALABLE) as c_int);
    }

    let ret = match parse_args(argc, &argv, &argv0, hints) {
        Ok(Parsed::Run(req)) => run(&req, hints),
        Ok(Parsed::Exit(code)) => {
            // SAFETY: hints came from fi_dupinfo and are freed once.
            unsafe { fi_freeinfo(hints) };
            return code;
        }
        Err(ret) => ret,
    };
    // SAFETY: as above.
    unsafe { fi_freeinfo(hints) };
    -ret
}

enum Parsed {
    Run(Request),
    /// Help, version or a bad option: exit with this code.
    Exit(i32),
}

/// Read the options into `hints` and a [`Request`]; `Err` carries a
/// negative error code (a name that no table knows).
fn parse_args(argc: c_int, argv: &[*mut c_char], argv0: &str, hints: *mut fi_info) -> Result<Parsed, i32> {
    let mut version_flag: c_int = 0;
    let names: Vec<CString> = OPTIONS.iter().map(|o| CString::new(o.long).unwrap_or_default()).collect();
    let mut longopts: Vec<libc::option> = OPTIONS
        .iter()
        .zip(&names)
        .map(|(o, name)| libc::option {
            name: name.as_ptr(),
            has_arg: if o.arg == Arg::Required { REQUIRED_ARGUMENT } else { NO_ARGUMENT },
            flag: if o.arg == Arg::FlagOnly { &mut version_flag } else { ptr::null_mut() },
            val: if o.arg == Arg::FlagOnly { 1 } else { c_int::from(o.short) },
        })
        .collect();
    longopts.push(libc::option { name: ptr::null(), has_arg: 0, flag: ptr::null_mut(), val: 0 });
    let shortopts = CString::new(short_options()).unwrap_or_default();

    let mut req = Request::default();
    loop {
        let mut index: c_int = 0;
        // SAFETY: argv is NULL-terminated with argc entries, all valid C
        // strings that outlive the loop; longopts ends with a zero entry and
        // its flag pointer (version_flag) lives on this frame.
        let op = unsafe { libc::getopt_long(argc, argv.as_ptr(), shortopts.as_ptr(), longopts.as_ptr(), &mut index) };
        if op == -1 {
            break;
        }
        // SAFETY: getopt_long sets optarg for options that take a value;
        // it points into argv, which outlives this use.
        let arg: Option<&CStr> = unsafe {
            let p = *ptr::addr_of!(optarg);
            (!p.is_null()).then(|| CStr::from_ptr(p))
        };
        let arg_bytes = || arg.map(CStr::to_bytes).unwrap_or_default();
        let bad = |msg: String| {
            let _ = writeln!(std::io::stderr(), "{msg}");
            -libc::EINVAL
        };
        match u8::try_from(op).unwrap_or(b'?') {
            0 if version_flag != 0 => {
                print_version(argv0);
                return Ok(Parsed::Exit(0));
            }
            b's' => {
                req.node = arg.map(CStr::to_owned);
                req.flags |= FI_SOURCE;
            }
            b'n' => req.node = arg.map(CStr::to_owned),
            b'P' => req.port = arg.map(CStr::to_owned),
            b'c' => {
                let caps = parse_list(Table::Caps, arg_bytes()).map_err(bad)?;
                // SAFETY: hints is a live fi_info from fi_dupinfo.
                unsafe { (*hints).caps |= caps };
                req.use_hints = true;
            }
            b'm' => {
                // SAFETY: as above; -m replaces the default "all modes".
                unsafe { (*hints).mode = 0 };
                let mode = parse_list(Table::Mode, arg_bytes()).map_err(bad)?;
                // SAFETY: as above.
                unsafe { (*hints).mode |= mode };
                req.use_hints = true;
            }
            b't' => {
                let t = rfabric_fi_info::lookup(Table::EpType, arg_bytes()).map_err(bad)?;
                // SAFETY: fi_dupinfo(NULL) allocated ep_attr.
                unsafe { (*(*hints).ep_attr).r#type = t as fi_ep_type };
                req.use_hints = true;
            }
            b'a' => {
                let f = rfabric_fi_info::lookup(Table::AddrFormat, arg_bytes()).map_err(bad)?;
                // SAFETY: hints is a live fi_info.
                unsafe { (*hints).addr_format = f as u32 };
                req.use_hints = true;
            }
            c @ (b'p' | b'd' | b'f') => {
                if let Some(a) = arg {
                    // SAFETY: fi_dupinfo(NULL) allocated fabric_attr and
                    // domain_attr; their strings are NULL or C-allocated.
                    unsafe {
                        let slot = match c {
                            b'p' => ptr::addr_of_mut!((*(*hints).fabric_attr).prov_name),
                            b'd' => ptr::addr_of_mut!((*(*hints).domain_attr).name),
                            _ => ptr::addr_of_mut!((*(*hints).fabric_attr).name),
                        };
                        set_string(slot, a);
                    }
                }
                req.use_hints = true;
            }
            b'g' => {
                req.filter = Some(arg_bytes().to_vec());
                req.env = true;
            }
            b'e' => req.env = true,
            b'l' => {
                req.list = true;
                req.flags |= FI_PROV_ATTR_ONLY;
            }
            b'i' => {
                req.filter = Some(arg_bytes().to_vec());
                req.verbose = true;
            }
            b'v' => req.verbose = true,
            _ => {
                // -h, an unknown option or a missing value (getopt has
                // already said which on stderr).
                let mut out = std::io::stdout().lock();
                let _ = out.write_all(usage(argv0).as_bytes());
                let _ = out.flush();
                return Ok(Parsed::Exit(1));
            }
        }
    }
    Ok(Parsed::Run(req))
}

/// `--version`: the tool's release, the library's, and the API version the
/// tool was built for.
fn print_version(argv0: &str) {
    // SAFETY: FI_TYPE_VERSION ignores the data it is given beyond needing a
    // non-NULL pointer; the result is the library's buffer or NULL.
    let lib = unsafe { c_bytes(fi_tostr(c"1".as_ptr().cast(), FI_TYPE_VERSION)) };
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{argv0}: {}", env!("CARGO_PKG_VERSION"));
    let _ = out.write_all(b"libfabric: ");
    let _ = out.write_all(lib);
    let _ = writeln!(out, "\nlibfabric api: {}.{}", FI_MAJOR_VERSION, FI_MINOR_VERSION);
    let _ = out.flush();
}

/// Ask the library and print what was asked for. Returns 0 or a negative
/// error code.
fn run(req: &Request, hints: *mut fi_info) -> i32 {
    let node = req.node.as_ref().map_or(ptr::null(), |s| s.as_ptr());
    let port = req.port.as_ref().map_or(ptr::null(), |s| s.as_ptr());
    let hints = if req.use_hints { hints as *const fi_info } else { ptr::null() };
    let mut info: *mut fi_info = ptr::null_mut();
    // SAFETY: node/port are NULL or live C strings; hints is NULL or a
    // complete fi_info; info receives a list we free below.
    let ret = unsafe { fi_getinfo(fi_version(FI_MAJOR_VERSION, FI_MINOR_VERSION), node, port, req.flags, hints, &mut info) };
    if ret != 0 {
        let _ = writeln!(std::io::stderr(), "fi_getinfo: {ret}");
        return ret;
    }

    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let ret = if req.env {
        print_vars(&mut out, req.filter.as_deref())
    } else if req.verbose {
        print_long(&mut out, info, req.filter.as_deref());
        0
    } else if req.list {
        print_providers(&mut out, info);
        0
    } else {
        print_short(&mut out, info);
        0
    };
    let _ = out.flush();
    // SAFETY: the list fi_getinfo returned, freed once.
    unsafe { fi_freeinfo(info) };
    ret
}

/// Iterate a list returned by fi_getinfo.
///
/// # Safety
/// `cur` is NULL or the head of a live list that outlives `'a`.
unsafe fn entries<'a>(mut cur: *mut fi_info) -> impl Iterator<Item = &'a fi_info> {
    std::iter::from_fn(move || {
        // SAFETY: `cur` is NULL or an entry of the list, live per the
        // function's contract.
        let e = unsafe { cur.as_ref() }?;
        cur = e.next;
        Some(e)
    })
}

/// The provider name and version of an entry (fabric_attr may be missing
/// from a list built by a provider that does not fill it).
fn prov_of(e: &fi_info) -> (&[u8], String) {
    // SAFETY: fabric_attr is NULL or points into the live list.
    match unsafe { e.fabric_attr.as_ref() } {
        // SAFETY: its strings are NULL or NUL-terminated.
        Some(fa) => (unsafe { c_bytes(fa.prov_name) }, version_str(fa.prov_version)),
        None => (b"(null)", "0.0".into()),
    }
}

/// `-l`: one block per provider.
fn print_providers(out: &mut impl Write, info: *mut fi_info) {
    // SAFETY: info is the live list from fi_getinfo, freed after this.
    for e in unsafe { entries(info) } {
        let (name, version) = prov_of(e);
        let _ = out.write_all(name);
        let _ = writeln!(out, ":\n    version: {version}");
    }
}

/// The default listing: one short block per fi_info.
fn print_short(out: &mut impl Write, info: *mut fi_info) {
    // SAFETY: info is the live list from fi_getinfo, freed after this.
    for e in unsafe { entries(info) } {
        let (prov, version) = prov_of(e);
        // SAFETY: attribute pointers are NULL or point into the live list;
        // their strings are NULL or NUL-terminated.
        let (fabric, domain) = unsafe {
            (
                e.fabric_attr.as_ref().map_or(&b"(null)"[..], |fa| c_bytes(fa.name)),
                e.domain_attr.as_ref().map_or(&b"(null)"[..], |da| c_bytes(da.name)),
            )
        };
        // SAFETY: fi_tostr reads one enum value behind the pointer and
        // returns its buffer (valid until the next call) or NULL; each
        // result is copied before the next call.
        let (ep_type, protocol) = unsafe {
            match e.ep_attr.as_ref() {
                Some(ep) => (
                    c_bytes(fi_tostr(ptr::addr_of!(ep.r#type).cast(), FI_TYPE_EP_TYPE)).to_vec(),
                    c_bytes(fi_tostr(ptr::addr_of!(ep.protocol).cast(), FI_TYPE_PROTOCOL)).to_vec(),
                ),
                None => (b"(null)".to_vec(), b"(null)".to_vec()),
            }
        };
        let _ = out.write_all(b"provider: ");
        let _ = out.write_all(prov);
        let _ = out.write_all(b"\n    fabric: ");
        let _ = out.write_all(fabric);
        let _ = out.write_all(b"\n    domain: ");
        let _ = out.write_all(domain);
        let _ = write!(out, "\n    version: {version}\n    type: ");
        let _ = out.write_all(&ep_type);
        let _ = out.write_all(b"\n    protocol: ");
        let _ = out.write_all(&protocol);
        let _ = out.write_all(b"\n");
    }
}

/// `-v` / `-i SUBSTR`: the full description of each fi_info, each after a
/// `---` line; with a filter only those whose text contains it.
fn print_long(out: &mut impl Write, info: *mut fi_info, filter: Option<&[u8]>) {
    let mut buf = vec![0 as c_char; LONG_INFO_BUF];
    // SAFETY: info is the live list from fi_getinfo, freed after this.
    for e in unsafe { entries(info) } {
        buf[0] = 0;
        // SAFETY: buf has LONG_INFO_BUF bytes; e is a live fi_info.
        unsafe { fi_tostr_r(buf.as_mut_ptr(), buf.len(), (e as *const fi_info).cast(), FI_TYPE_INFO) };
        buf[LONG_INFO_BUF - 1] = 0;
        // SAFETY: buf is NUL-terminated (its last byte is forced to 0).
        let text = unsafe { CStr::from_ptr(buf.as_ptr()) }.to_bytes();
        let wanted = match filter {
            Some(f) => contains_ignore_case(text, f),
            None => true,
        };
        if wanted {
            let _ = out.write_all(b"---\n");
            let _ = out.write_all(text);
        }
    }
}

/// `-e` / `-g SUBSTR`: the library's parameters. Returns 0 or the negative
/// error of fi_getparams.
fn print_vars(out: &mut impl Write, filter: Option<&[u8]>) -> i32 {
    let mut params: *mut fi_param = ptr::null_mut();
    let mut count: c_int = 0;
    // SAFETY: both out-pointers are valid locals.
    let ret = unsafe { fi_getparams(&mut params, &mut count) };
    if ret != 0 {
        return ret;
    }
    let n = usize::try_from(count).unwrap_or(0);
    if !params.is_null() {
        // SAFETY: fi_getparams returned an array of `count` entries.
        let list = unsafe { std::slice::from_raw_parts(params, n) };
        for p in list {
            // SAFETY: the strings of each entry are NULL or NUL-terminated
            // and live until fi_freeparams.
            let name = unsafe { c_bytes(p.name) };
            if filter.is_some_and(|f| !contains_ignore_case(name, f)) {
                continue;
            }
            // SAFETY: as above.
            let (help, value) = unsafe {
                (
                    (!p.help_string.is_null()).then(|| c_bytes(p.help_string)),
                    (!p.value.is_null()).then(|| c_bytes(p.value)),
                )
            };
            let _ = out.write_all(&format_param(name, p.r#type, help, value));
        }
    }
    // SAFETY: the array fi_getparams returned, freed once.
    unsafe { fi_freeparams(params) };
    0
}
