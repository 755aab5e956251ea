//! C entry points for logging and parameters: `fi_log_enabled`,
//! `fi_log_ready`, `fi_param_get`, `fi_getparams`, `fi_freeparams`, and the
//! Rust halves (`rf_log_emit`, `rf_param_define`) of the variadic `fi_log` /
//! `fi_param_define` in `csrc/fi_log.c`.
//!
//! A NULL provider means the core. Providers are told apart by name.
//!
//! Not done: `fi_open(…, "logging", …)` / `fi_import` of a `fid_logging`
//! (replacing the logging ops) and reading `libfabric.conf`.

use std::borrow::Cow;
use std::ffi::{c_char, c_int, c_void, CStr, CString};

use rfabric_core::error::{EINVAL, ENODATA, ENOMEM};
use rfabric_core::log::{self, fi_log_level, fi_log_subsys};
use rfabric_core::params::{self, Value, CORE};

use rfabric_core::abi::{fi_param, fi_provider};

/// The provider's name: the core for NULL, `None` for a provider without one.
///
/// # Safety
/// `prov` is NULL or points to a readable `fi_provider` whose `name` is NULL
/// or a NUL-terminated string that outlives the returned value.
unsafe fn prov_name<'a>(prov: *const fi_provider) -> Option<Cow<'a, str>> {
    if prov.is_null() {
        return Some(Cow::Borrowed(CORE));
    }
    // SAFETY: non-NULL and readable per this function's contract.
    let name = unsafe { (*prov).name };
    if name.is_null() {
        return None;
    }
    // SAFETY: NUL-terminated per this function's contract.
    Some(unsafe { CStr::from_ptr(name) }.to_string_lossy())
}

/// # Safety
/// `s` is NULL or a NUL-terminated string.
unsafe fn opt_str<'a>(s: *const c_char) -> Option<Cow<'a, str>> {
    if s.is_null() {
        None
    } else {
        // SAFETY: NUL-terminated per this function's contract.
        Some(unsafe { CStr::from_ptr(s) }.to_string_lossy())
    }
}

#[no_mangle]
pub unsafe extern "C" fn fi_log_enabled(
    prov: *const fi_provider,
    level: fi_log_level,
    subsys: fi_log_subsys,
) -> c_int {
    guard!(0, {
        // SAFETY: the caller passes its provider (or NULL for the core).
        match unsafe { prov_name(prov) } {
            Some(name) => log::enabled(&name, level, subsys) as c_int,
            None => 0,
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn fi_log_ready(
    prov: *const fi_provider,
    level: fi_log_level,
    subsys: fi_log_subsys,
    showtime: *mut u64,
) -> c_int {
    guard!(0, {
        // SAFETY: as in fi_log_enabled.
        let on = match unsafe { prov_name(prov) } {
            Some(name) => log::enabled(&name, level, subsys),
            None => false,
        };
        if showtime.is_null() {
            return on as c_int;
        }
        // SAFETY: non-NULL; the caller's per-call-site timestamp.
        let t = unsafe { &mut *showtime };
        log::ready_if(on, t) as c_int
    })
}

/// The second half of `fi_log`: `msg` is already formatted.
#[no_mangle]
pub unsafe extern "C" fn rf_log_emit(
    prov: *const fi_provider,
    level: fi_log_level,
    subsys: fi_log_subsys,
    func: *const c_char,
    line: c_int,
    msg: *const c_char,
) {
    guard!((), {
        // SAFETY: fi_log's arguments, passed on unchanged by csrc/fi_log.c.
        let (name, func, msg) = unsafe { (prov_name(prov), opt_str(func), opt_str(msg)) };
        let Some(msg) = msg else { return };
        let name = name.unwrap_or(Cow::Borrowed("(null)"));
        let func = func.unwrap_or(Cow::Borrowed("(null)"));
        log::emit_raw(&name, level, subsys, &func, line.max(0) as u32, &msg);
    })
}

/// The second half of `fi_param_define`: `help` is already formatted.
#[no_mangle]
pub unsafe extern "C" fn rf_param_define(
    prov: *const fi_provider,
    param_name: *const c_char,
    ty: c_int,
    help: *const c_char,
) -> c_int {
    guard!(-EOTHER_C, {
        // SAFETY: the caller's provider and strings, checked non-NULL in C.
        let (p, name, help) = unsafe { (prov_name(prov), opt_str(param_name), opt_str(help)) };
        let (Some(p), Some(name), Some(help)) = (p, name, help) else {
            return EINVAL.to_c();
        };
        let Ok(ty) = u32::try_from(ty) else { return EINVAL.to_c() };
        match params::define(&p, &name, ty, &help) {
            Ok(()) => {
                rfabric_core::fi_dbg!(&p, log::FI_LOG_CORE, "registered var {name}");
                0
            }
            Err(e) => {
                rfabric_core::fi_dbg!(&p, log::FI_LOG_CORE, "Failed to register {name} variable: {e}");
                e.to_c()
            }
        }
    })
}

const EOTHER_C: c_int = rfabric_core::abi::FI_EOTHER;

#[no_mangle]
pub unsafe extern "C" fn fi_param_get(
    provider: *mut fi_provider,
    param_name: *const c_char,
    value: *mut c_void,
) -> c_int {
    guard!(-EOTHER_C, {
        null_check!(param_name, value);
        params::ensure_core_params();
        // SAFETY: the caller's provider and NUL-terminated name.
        let (p, name) = unsafe { (prov_name(provider), opt_str(param_name)) };
        let (Some(p), Some(name)) = (p, name) else { return EINVAL.to_c() };
        let v = match params::get(&p, &name) {
            Ok(v) => v,
            Err(e) => return e.to_c(),
        };
        match v {
            Value::Str(_) => {
                // Hand out the environment's own string, as upstream does:
                // the caller neither frees it nor expects it to outlive a
                // change to that variable.
                let Ok((_, env)) = params::lookup(&p, &name) else { return ENODATA.to_c() };
                let Ok(env) = CString::new(env) else { return EINVAL.to_c() };
                // SAFETY: getenv with a NUL-terminated name.
                let s = unsafe { libc::getenv(env.as_ptr()) };
                if s.is_null() {
                    return ENODATA.to_c();
                }
                // SAFETY: for FI_PARAM_STRING the caller passes a `char **`.
                unsafe { *(value as *mut *mut c_char) = s };
            }
            // SAFETY: for FI_PARAM_INT / FI_PARAM_BOOL the caller passes an
            // `int *`, for FI_PARAM_SIZE_T a `size_t *`.
            Value::Int(i) => unsafe { *(value as *mut c_int) = i },
            // SAFETY: as above.
            Value::Bool(b) => unsafe { *(value as *mut c_int) = b as c_int },
            // SAFETY: as above.
            Value::Size(s) => unsafe { *(value as *mut usize) = s },
        }
        0
    })
}

/// Free a `fi_param` array built by `fi_getparams` (NULL-name terminated).
///
/// # Safety
/// `params` is NULL or an array from `fi_getparams` not yet freed.
unsafe fn free_param_array(params: *mut fi_param) {
    if params.is_null() {
        return;
    }
    let mut i = 0;
    loop {
        // SAFETY: the array ends with an all-NULL entry, which stops the loop.
        let p = unsafe { &*params.add(i) };
        if p.name.is_null() {
            break;
        }
        // SAFETY: each string was strdup'ed (or is NULL).
        unsafe {
            libc::free(p.name as *mut c_void);
            libc::free(p.help_string as *mut c_void);
            libc::free(p.value as *mut c_void);
        }
        i += 1;
    }
    // SAFETY: the array was calloc'ed.
    unsafe { libc::free(params as *mut c_void) };
}

fn c_dup(s: &str) -> *mut c_char {
    // Interior NULs cannot come from the environment or a C string; the
    // Rust API could pass one, so cut there.
    let bytes = s.as_bytes();
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    // SAFETY: malloc'ed buffer of end+1 bytes, filled and NUL-terminated.
    unsafe {
        let p = libc::malloc(end + 1) as *mut u8;
        if !p.is_null() {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), p, end);
            *p.add(end) = 0;
        }
        p as *mut c_char
    }
}

#[no_mangle]
pub unsafe extern "C" fn fi_getparams(params: *mut *mut fi_param, count: *mut c_int) -> c_int {
    guard!(-EOTHER_C, {
        null_check!(params, count);
        params::ensure_core_params();
        // Providers register their settings as the table is built (as
        // upstream's fi_getparams runs fi_ini first).
        let _ = crate::getinfo::table();
        let list = params::getparams();
        let n = list.len();
        let Ok(cnt) = c_int::try_from(n) else { return ENOMEM.to_c() };
        let mut head: *mut fi_param = std::ptr::null_mut();
        if n > 0 {
            // SAFETY: calloc of n+1 zeroed entries; the last stays all NULL.
            head = unsafe { libc::calloc(n + 1, std::mem::size_of::<fi_param>()) } as *mut fi_param;
            if head.is_null() {
                return ENOMEM.to_c();
            }
            for (i, info) in list.iter().enumerate() {
                let name = c_dup(&info.env_name);
                let help = c_dup(&info.help);
                let value = info.value.as_deref().map_or(std::ptr::null_mut(), c_dup);
                // SAFETY: i < n, inside the calloc'ed array.
                let slot = unsafe { &mut *head.add(i) };
                slot.name = name;
                slot.r#type = info.ty;
                slot.help_string = help;
                slot.value = value;
                if name.is_null() || help.is_null() || (info.value.is_some() && value.is_null()) {
                    if name.is_null() {
                        // SAFETY: not yet reachable from the array walk; free by hand.
                        unsafe {
                            libc::free(help as *mut c_void);
                            libc::free(value as *mut c_void);
                        }
                    }
                    // SAFETY: the array is well formed up to its first NULL name.
                    unsafe { free_param_array(head) };
                    return ENOMEM.to_c();
                }
            }
        }
        // SAFETY: both checked non-NULL above.
        unsafe {
            *params = head;
            *count = cnt;
        }
        0
    })
}

#[no_mangle]
pub unsafe extern "C" fn fi_freeparams(params: *mut fi_param) {
    // SAFETY: the caller returns an array fi_getparams gave it (or NULL).
    guard!((), unsafe { free_param_array(params) })
}
