//! The entry point of a DL provider build: `fi_prov_ini`, upstream's
//! provider ABI (`struct fi_provider`, `<rdma/providers/fi_prov.h>`) around
//! this library's own copy of the core, the object layer and one provider.
//! Built with `--features dl,<provider>` and linked by `capi/link_dl.sh` as
//! `librf<provider>-fi.so`, which exports `fi_prov_ini` and nothing else
//! (every other symbol is local, so calls inside the library never bind to
//! the host's `fi_getinfo`, `fi_log`, ...).
//!
//! - Name: the provider is `rf<name>` (`rfshm`). Upstream's libfabric has a
//!   built-in `shm` (so has ours), and of two providers with one name
//!   upstream keeps one in sight and marks the other hidden (the higher
//!   provider version wins; 1.17's shm is version 117.0), and `fi_fabric`
//!   opens the first of that name: a DL `shm` could not be chosen. With its
//!   own name, ours is picked with `FI_PROVIDER=rfshm` or the hints'
//!   `prov_name` beside the built-in one, and its settings are `FI_RFSHM_*`.
//! - The host: the libfabric that loaded us, found as `fi_getinfo` in the
//!   global scope (`dlsym(RTLD_DEFAULT)`), or else as the loaded object named
//!   `libfabric.so.1` (`RTLD_NOLOAD`). Its newest `fi_getinfo` version node
//!   is the `fi_info` shape it reads and writes (Debian's 1.17: FABRIC_1.3,
//!   upstream 2.5: FABRIC_1.9, ours: FABRIC_1.10): hints are widened from it,
//!   the lists we return are narrowed to it (the host frees them with its
//!   `fi_freeinfo`: all C allocator), and an `fi_info` handed to `fi_domain`
//!   or `fi_endpoint` is widened from it. A host with a newer node than we
//!   know would read members our lists do not have: it is refused.
//! - Core services: log lines go to the host's `fi_log_enabled`/`fi_log`
//!   (its `FI_LOG_*` settings apply, its lines name `rfshm`), provider
//!   parameters to its `fi_param_define`/`fi_param_get` (its `fi_info -e`
//!   lists them). Without a host (no `fi_getinfo` found) our own logging and
//!   parameters serve and the current shape is assumed.
//! - The host names its providers' entries: we leave `prov_name` NULL
//!   (upstream appends its own name to one already there, as for a layered
//!   provider), and it writes `api_version` into the fabric we open and may
//!   wrap it with hooks; everything after `fi_fabric` goes through the
//!   ops tables of our handles.

use crate::compat::{narrow_info_list, widen_info, CompatVer};
use crate::getinfo::{fabric_current, getinfo_current};
use crate::info::{freeinfo_current, info_from_c_current};
use libc::{c_char, c_int, c_void};
use rfabric_core::abi::*;
use rfabric_core::dl::AbiNode;
use rfabric_core::error::{Error, Result, EINVAL, ENODATA, ENOMEM};
use rfabric_core::params::{self, fi_param_type, Value};
use rfabric_core::provider::{self, Provider, Renamed};
use std::cell::UnsafeCell;
use std::ffi::{CStr, CString};
use std::ptr;
use std::sync::OnceLock;

/// The provider's own name (checked against the provider at init).
#[cfg(all(feature = "shm", not(any(feature = "rudp", feature = "tcp", feature = "verbs"))))]
const BASE_NAME: &str = "shm";
/// The DL provider's name: `rf` and the provider's own.
#[cfg(all(feature = "shm", not(any(feature = "rudp", feature = "tcp", feature = "verbs"))))]
const DL_NAME: &CStr = c"rfshm";
#[cfg(all(feature = "rudp", not(any(feature = "shm", feature = "tcp", feature = "verbs"))))]
const BASE_NAME: &str = "rudp";
#[cfg(all(feature = "rudp", not(any(feature = "shm", feature = "tcp", feature = "verbs"))))]
const DL_NAME: &CStr = c"rfrudp";
#[cfg(all(feature = "tcp", not(any(feature = "shm", feature = "rudp", feature = "verbs"))))]
const BASE_NAME: &str = "tcp";
#[cfg(all(feature = "tcp", not(any(feature = "shm", feature = "rudp", feature = "verbs"))))]
const DL_NAME: &CStr = c"rftcp";
#[cfg(all(feature = "verbs", not(any(feature = "shm", feature = "rudp", feature = "tcp"))))]
const BASE_NAME: &str = "verbs";
#[cfg(all(feature = "verbs", not(any(feature = "shm", feature = "rudp", feature = "tcp"))))]
const DL_NAME: &CStr = c"rfverbs";

#[cfg(not(any(
    all(feature = "shm", not(any(feature = "rudp", feature = "tcp", feature = "verbs"))),
    all(feature = "rudp", not(any(feature = "shm", feature = "tcp", feature = "verbs"))),
    all(feature = "tcp", not(any(feature = "shm", feature = "rudp", feature = "verbs"))),
    all(feature = "verbs", not(any(feature = "shm", feature = "rudp", feature = "tcp")))
)))]
compile_error!("the `dl` feature builds one provider: enable exactly one provider feature (shm, rudp, tcp or verbs)");

/// The flags upstream's core passes to a provider's getinfo for its own
/// bookkeeping (`OFI_GETINFO_INTERNAL`, `OFI_CORE_PROV_ONLY`,
/// `OFI_GETINFO_HIDDEN`, `OFI_OFFLOAD_PROV_ONLY`: bits 58 to 61).
const HOST_FLAGS: u64 = 0xf << 58;

/// The newest version node of libfabric.so.1 this library knows.
const NEWEST_NODE: u32 = AbiNode::CURRENT.0;

/// The `struct fi_provider` handed to the host. The host keeps its own
/// bookkeeping in `context`, so it lives in writable memory.
struct ProvCell(UnsafeCell<fi_provider>);

// SAFETY: the struct is written once, inside `init` (under the OnceLock of
// `fi_prov_ini`), before its address is handed out; afterwards only the
// host writes `context`, which this library never reads.
unsafe impl Sync for ProvCell {}

static PROV: ProvCell = ProvCell(UnsafeCell::new(fi_provider {
    version: 0,
    fi_version: 0,
    context: fi_context { internal: [ptr::null_mut(); 4] },
    name: ptr::null(),
    getinfo: None,
    fabric: None,
    cleanup: None,
}));

fn prov_ptr() -> *mut fi_provider {
    PROV.0.get()
}

struct State {
    /// The host's `fi_info` shape, `None` when it is the current one.
    shape: Option<CompatVer>,
}

static STATE: OnceLock<Option<State>> = OnceLock::new();

/// The `fi_info` shape of the library that loaded us, when it is older
/// than ours.
pub(crate) fn host_shape() -> Option<CompatVer> {
    STATE.get().and_then(Option::as_ref).and_then(|s| s.shape)
}

/// Read an `fi_info` of the host's shape `v` into the core model.
///
/// # Safety
/// `i` is NULL or a valid `fi_info` tree of shape `v`.
pub(crate) unsafe fn info_from_host(i: *const fi_info, v: CompatVer) -> std::result::Result<rfabric_core::info::Info, Error> {
    if i.is_null() {
        return Err(EINVAL);
    }
    // SAFETY: `i` is a tree of shape `v`, per this function's contract.
    let w = unsafe { widen_info(i as *const c_void, v) };
    if w.is_null() {
        return Err(ENOMEM);
    }
    // SAFETY: `w` is a current-shape tree we own; freed right after.
    let r = unsafe { info_from_c_current(w) };
    // SAFETY: as above.
    unsafe { freeinfo_current(w) };
    r
}

// ---------- the host's entry points ----------

type FiLogEnabled = unsafe extern "C" fn(*const fi_provider, fi_log_level, fi_log_subsys) -> c_int;
type FiLog = unsafe extern "C" fn(*const fi_provider, fi_log_level, fi_log_subsys, *const c_char, c_int, *const c_char, ...);
type FiParamDefine = unsafe extern "C" fn(*const fi_provider, *const c_char, fi_param_type, *const c_char, ...) -> c_int;
type FiParamGet = unsafe extern "C" fn(*mut fi_provider, *const c_char, *mut c_void) -> c_int;

/// Where the host's symbols are looked up.
#[derive(Clone, Copy)]
struct HostLib(*mut c_void);

impl HostLib {
    /// `fi_getinfo` in the global scope, else a loaded `libfabric.so.1`.
    fn find() -> Option<HostLib> {
        let global = HostLib(libc::RTLD_DEFAULT);
        if !global.sym(c"fi_getinfo").is_null() {
            return Some(global);
        }
        // SAFETY: RTLD_NOLOAD only looks up an object already loaded.
        let h = unsafe { libc::dlopen(c"libfabric.so.1".as_ptr(), libc::RTLD_NOLOAD | libc::RTLD_LAZY) };
        (!h.is_null()).then_some(HostLib(h))
    }

    fn sym(self, name: &CStr) -> *mut c_void {
        // SAFETY: dlsym with a valid handle (or RTLD_DEFAULT) and a C string.
        unsafe { libc::dlsym(self.0, name.as_ptr()) }
    }

    /// The newest `FABRIC_1.<n>` node that defines `fi_getinfo`.
    fn info_node(self) -> Option<u32> {
        (0..=NEWEST_NODE + 16).rev().find(|n| {
            let Ok(v) = CString::new(format!("FABRIC_1.{n}")) else { return false };
            // SAFETY: dlvsym with a valid handle and C strings.
            !unsafe { libc::dlvsym(self.0, c"fi_getinfo".as_ptr(), v.as_ptr()) }.is_null()
        })
    }
}

/// The host's `fi_log_enabled` / `fi_log`, called with our provider.
struct LogHost {
    enabled: FiLogEnabled,
    log: FiLog,
}

impl rfabric_core::log::Host for LogHost {
    fn enabled(&self, level: fi_log_level, subsys: fi_log_subsys) -> bool {
        // SAFETY: the host's fi_log_enabled with our provider struct.
        unsafe { (self.enabled)(prov_ptr(), level, subsys) != 0 }
    }
    fn emit(&self, level: fi_log_level, subsys: fi_log_subsys, func: &str, line: u32, msg: &str) {
        let func = c_lossy(func);
        let msg = c_lossy(msg);
        let line = c_int::try_from(line).unwrap_or(c_int::MAX);
        // SAFETY: the host's fi_log with our provider, a "%s" format and
        // one C string argument.
        unsafe { (self.log)(prov_ptr(), level, subsys, func.as_ptr(), line, c"%s".as_ptr(), msg.as_ptr()) };
    }
}

/// The host's `fi_param_define` / `fi_param_get`, called with our provider.
struct ParamHost {
    define: FiParamDefine,
    get: FiParamGet,
}

impl params::Host for ParamHost {
    fn prov_name(&self) -> &str {
        DL_NAME.to_str().unwrap_or("rf")
    }
    fn define(&self, name: &str, ty: fi_param_type, help: &str) -> Result<()> {
        let (name, help) = (c_lossy(name), c_lossy(help));
        // SAFETY: the host's fi_param_define with our provider, a "%s"
        // format and one C string argument.
        let rc = unsafe { (self.define)(prov_ptr(), name.as_ptr(), ty, c"%s".as_ptr(), help.as_ptr()) };
        if rc == 0 { Ok(()) } else { Err(Error(rc.saturating_abs())) }
    }
    fn get(&self, name: &str, ty: fi_param_type) -> Option<Result<Value>> {
        let cname = c_lossy(name);
        let (rc, v) = match ty {
            params::FI_PARAM_BOOL => {
                let mut b: c_int = 0;
                // SAFETY: for a boolean the host writes an int.
                let rc = unsafe { (self.get)(prov_ptr(), cname.as_ptr(), &mut b as *mut c_int as *mut c_void) };
                (rc, Value::Bool(b != 0))
            }
            params::FI_PARAM_STRING => {
                let mut s: *mut c_char = ptr::null_mut();
                // SAFETY: for a string the host writes a `char *` (its
                // environment's own string).
                let rc = unsafe { (self.get)(prov_ptr(), cname.as_ptr(), &mut s as *mut *mut c_char as *mut c_void) };
                if rc == 0 && s.is_null() {
                    return Some(Err(ENODATA));
                }
                // SAFETY: a NUL-terminated string from the environment when rc is 0.
                let v = if rc == 0 { unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned() } else { String::new() };
                (rc, Value::Str(v))
            }
            _ => return None,
        };
        match rc {
            0 => Some(Ok(v)),
            // The host does not know it (it refused the definition): read here.
            rc if rc == -FI_ENOENT => None,
            rc => Some(Err(Error(rc.saturating_abs()))),
        }
    }
}

/// A C string of `s`, cut at an interior NUL.
fn c_lossy(s: &str) -> CString {
    let end = s.as_bytes().iter().position(|&b| b == 0).unwrap_or(s.len());
    CString::new(&s.as_bytes()[..end]).unwrap_or_default()
}

/// Find the host, hand it our logging and parameters, build the table
/// from our one provider, fill in the provider struct. `None` when this
/// library cannot serve the host.
fn init() -> Option<State> {
    // The host reads our name as we define parameters and log: first.
    // SAFETY: not yet handed out (see ProvCell); we are inside the OnceLock
    // initialiser, so no other thread writes it.
    unsafe { (*prov_ptr()).name = DL_NAME.as_ptr() };
    let host = HostLib::find();
    let mut shape = None;
    let mut node = NEWEST_NODE;
    if let Some(h) = host {
        let (enabled, log) = (h.sym(c"fi_log_enabled"), h.sym(c"fi_log"));
        if !enabled.is_null() && !log.is_null() {
            // SAFETY: upstream's prototypes of these two functions.
            let (enabled, log) = unsafe {
                (std::mem::transmute::<*mut c_void, FiLogEnabled>(enabled), std::mem::transmute::<*mut c_void, FiLog>(log))
            };
            rfabric_core::log::set_host(Box::new(LogHost { enabled, log }));
        }
        let (define, get) = (h.sym(c"fi_param_define"), h.sym(c"fi_param_get"));
        if !define.is_null() && !get.is_null() {
            // SAFETY: upstream's prototypes of these two functions.
            let (define, get) = unsafe {
                (std::mem::transmute::<*mut c_void, FiParamDefine>(define), std::mem::transmute::<*mut c_void, FiParamGet>(get))
            };
            params::set_host(Box::new(ParamHost { define, get }));
        }
        let found = h.info_node();
        node = found.unwrap_or(NEWEST_NODE);
        match found {
            Some(n) if n > NEWEST_NODE => {
                rfabric_core::fi_warn!(
                    "core",
                    FI_LOG_CORE,
                    "the loading libfabric's fi_info is of FABRIC_1.{}, newer than this provider knows (FABRIC_1.{}); not loaded",
                    n,
                    NEWEST_NODE
                );
                return None;
            }
            Some(n) if n < NEWEST_NODE => match crate::dl_calls::compat_of(AbiNode(n)) {
                Some(v) => shape = Some(v),
                None => {
                    rfabric_core::fi_warn!("core", FI_LOG_CORE, "unknown fi_info shape of FABRIC_1.{}; not loaded", n);
                    return None;
                }
            },
            Some(_) => {}
            None => rfabric_core::fi_warn!("core", FI_LOG_CORE, "the loading libfabric has no versioned fi_getinfo; assuming the current fi_info shape"),
        }
    } else {
        rfabric_core::fi_warn!("core", FI_LOG_CORE, "no libfabric.so.1 found in the process; assuming the current fi_info shape");
    }

    let mut provs = crate::builtin_providers();
    if provs.len() != 1 || provs[0].name() != BASE_NAME {
        rfabric_core::fi_warn!("core", FI_LOG_CORE, "a DL provider build holds exactly one provider ({})", BASE_NAME);
        return None;
    }
    let inner = provs.pop()?;
    let version = inner.version();
    let name: &'static str = DL_NAME.to_str().unwrap_or("rf");
    let renamed: Box<dyn Provider> = Box::new(Renamed::new(inner, name));
    if !provider::init_table_only(vec![renamed]) {
        rfabric_core::fi_warn!("core", FI_LOG_CORE, "the provider table was built before fi_prov_ini; not loaded");
        return None;
    }
    // SAFETY: not yet handed out (see ProvCell); we are inside the OnceLock
    // initialiser, so no other thread writes it.
    unsafe {
        let p = &mut *prov_ptr();
        p.version = version;
        p.fi_version = crate::getinfo::OUR_VERSION;
        p.getinfo = Some(prov_getinfo);
        p.fabric = Some(prov_fabric);
        p.cleanup = Some(prov_cleanup);
    }
    rfabric_core::fi_info!(
        "core",
        FI_LOG_CORE,
        "DL provider {} ready; the loading library's fi_info is of FABRIC_1.{}",
        name,
        node
    );
    Some(State { shape })
}

/// `struct fi_provider *fi_prov_ini(void)`: our provider, or NULL when it
/// cannot serve the library that loaded it (the reason is logged).
#[no_mangle]
pub unsafe extern "C" fn fi_prov_ini() -> *mut fi_provider {
    guard!(ptr::null_mut(), {
        match STATE.get_or_init(init) {
            Some(_) => prov_ptr(),
            None => ptr::null_mut(),
        }
    })
}

/// `fi_provider.getinfo`: hints and the returned list in the host's shape.
unsafe extern "C" fn prov_getinfo(
    version: u32,
    node: *const c_char,
    service: *const c_char,
    flags: u64,
    hints: *const fi_info,
    info: *mut *mut fi_info,
) -> c_int {
    guard!(-(FI_EOTHER), {
        null_check!(info);
        // SAFETY: checked non-NULL.
        unsafe { *info = ptr::null_mut() };
        let shape = host_shape();
        let mut owned: *mut fi_info = ptr::null_mut();
        let wide = match shape {
            Some(v) if !hints.is_null() => {
                // SAFETY: the host passes its application's hints, of its shape.
                owned = unsafe { widen_info(hints as *const c_void, v) };
                if owned.is_null() {
                    return ENOMEM.to_c();
                }
                owned as *const fi_info
            }
            _ => hints,
        };
        let mut list: *mut fi_info = ptr::null_mut();
        // SAFETY: the host's arguments; `wide` is NULL or a current-shape tree.
        let rc = unsafe { getinfo_current(version, node, service, flags & !HOST_FLAGS, wide, &mut list) };
        // SAFETY: our copy of the hints (or NULL).
        unsafe { freeinfo_current(owned) };
        if rc != 0 {
            return rc;
        }
        let mut cur = list;
        while !cur.is_null() {
            // SAFETY: walking the list getinfo_current built for us.
            unsafe {
                let fa = (*cur).fabric_attr;
                if !fa.is_null() {
                    libc::free((*fa).prov_name as *mut c_void);
                    (*fa).prov_name = ptr::null_mut();
                }
                cur = (*cur).next;
            }
        }
        let out = match shape {
            None => list,
            Some(v) => {
                // SAFETY: `list` is ours, current shape; narrow_info_list takes it.
                let o = unsafe { narrow_info_list(list, v) } as *mut fi_info;
                if o.is_null() {
                    return ENOMEM.to_c();
                }
                o
            }
        };
        // SAFETY: checked non-NULL.
        unsafe { *info = out };
        0
    })
}

/// `fi_provider.fabric`: `fi_fabric_attr` has had one shape since ABI 1.1.
unsafe extern "C" fn prov_fabric(attr: *mut fi_fabric_attr, fabric: *mut *mut fid_fabric, context: *mut c_void) -> c_int {
    // SAFETY: the host's arguments, as fi_fabric(3) describes them.
    guard!(-(FI_EOTHER), unsafe { fabric_current(attr, fabric, context) })
}

/// `fi_provider.cleanup`: nothing to release; the library is linked
/// `-z nodelete`, so a host's `dlclose` leaves its code mapped for threads
/// and handles that outlive it.
unsafe extern "C" fn prov_cleanup() {}
