//! fi_getinfo / fi_fabric / fi_open in the current struct shapes: the walk
//! over the provider table. The conversion between C `fi_info` trees and
//! the core's `Info` is in `info.rs`; the exported, versioned symbols are
//! thin wrappers in `compat.rs`.

use crate::info::{freeinfo_current, info_from_c_current, list_to_c, opt_str, MAX_STR};
use crate::fabric;
use libc::{c_char, c_int, c_void};
use rfabric_core::abi::*;
use rfabric_core::error::{Error, EINVAL, ENODATA, ENOSYS};
use rfabric_core::info::{FabricAttr, Info};
use rfabric_core::provider::{self, Entry, Request};
use std::ffi::CStr;
use std::ptr;

/// The API version this library implements.
pub(crate) const OUR_VERSION: u32 = rfabric_core::abi::fi_version(FI_MAJOR_VERSION, FI_MINOR_VERSION);

pub(crate) fn table() -> &'static provider::Table {
    provider::table(crate::builtin_providers)
}

/// Check the version an application asked for.
pub(crate) fn check_version(version: u32) -> Result<(), Error> {
    let major = version >> 16;
    if !(1..=FI_MAJOR_VERSION).contains(&major) || version > OUR_VERSION {
        rfabric_core::fi_warn!(
            "core",
            FI_LOG_CORE,
            "requested API version {}.{} is not supported (this library implements up to {}.{})",
            major,
            version & 0xffff,
            FI_MAJOR_VERSION,
            FI_MINOR_VERSION
        );
        return Err(ENOSYS);
    }
    Ok(())
}

/// Flags fi_getinfo(3) defines, plus the three bits (57..59) upstream's
/// layered providers pass to the core's fi_getinfo for their own lookups;
/// they are accepted and have no effect here.
const GETINFO_FLAGS: u64 = FI_NUMERICHOST | FI_SOURCE | FI_PROV_ATTR_ONLY | FI_RESCAN | (7u64 << 57);

/// # Safety
/// Arguments as fi_getinfo(3); `hints` in the current shape.
pub(crate) unsafe fn getinfo_current(
    version: u32,
    node: *const c_char,
    service: *const c_char,
    flags: u64,
    hints: *const fi_info,
    info: *mut *mut fi_info,
) -> c_int {
    null_check!(info);
    // SAFETY: info is non-NULL.
    unsafe { *info = ptr::null_mut() };
    if let Err(e) = check_version(version) {
        return e.to_c();
    }
    if flags & !GETINFO_FLAGS != 0 {
        rfabric_core::fi_warn!("core", FI_LOG_CORE, "fi_getinfo: unsupported flags {:#x}", flags & !GETINFO_FLAGS);
        return -FI_EBADFLAGS;
    }
    // SAFETY: caller's strings.
    let (node_s, service_s) = match unsafe { (opt_str(node), opt_str(service)) } {
        (Ok(n), Ok(s)) => (n, s),
        _ => {
            rfabric_core::fi_warn!("core", FI_LOG_CORE, "node or service is not a terminated string");
            return EINVAL.to_c();
        }
    };
    let hints_r = if hints.is_null() {
        None
    } else {
        // SAFETY: caller's hints.
        match unsafe { info_from_c_current(hints) } {
            Ok(h) => Some(h),
            Err(e) => {
                rfabric_core::fi_warn!("core", FI_LOG_CORE, "hints hold an unterminated string or oversized address");
                return e.to_c();
            }
        }
    };
    if let Some(h) = &hints_r {
        if let Err(e) = validate_hints(h) {
            return e.to_c();
        }
    }
    let req = Request { version, node: node_s.as_deref(), service: service_s.as_deref(), flags, hints: hints_r.as_ref() };

    let mut head: *mut fi_info = ptr::null_mut();
    let mut tail: *mut fi_info = ptr::null_mut();
    let mut append = |list: *mut fi_info| {
        if list.is_null() {
            return;
        }
        if tail.is_null() {
            head = list;
        } else {
            // SAFETY: tail is the last node of our list.
            unsafe { (*tail).next = list };
        }
        tail = list;
        // SAFETY: walking a well-formed list to its end.
        unsafe {
            while !(*tail).next.is_null() {
                tail = (*tail).next;
            }
        }
    };
    let wanted_prov = hints_r.as_ref().and_then(|h| h.prov_name()).map(str::to_string);
    for entry in &table().entries {
        if let Some(w) = &wanted_prov {
            if !rfabric_core::getinfo::prov_name_matches(w, entry.name()) {
                continue;
            }
        }
        if flags & FI_PROV_ATTR_ONLY != 0 {
            let api = match entry {
                Entry::Builtin(_) => OUR_VERSION,
                Entry::Dl(d) => d.fi_version(),
            };
            let i = rfabric_core::getinfo::prov_attr_only(entry.name(), entry.version(), api);
            match list_to_c(&[i]) {
                Ok(l) => append(l),
                Err(e) => return e.to_c(),
            }
            continue;
        }
        match entry {
            Entry::Builtin(p) => {
                let infos = rfabric_core::getinfo::match_provider(p.as_ref(), &req);
                match list_to_c(&infos) {
                    Ok(l) => append(l),
                    Err(e) => {
                        // SAFETY: our list.
                        unsafe { freeinfo_current(head) };
                        return e.to_c();
                    }
                }
            }
            Entry::Dl(d) => {
                // SAFETY: arguments are the caller's, already checked.
                let l = unsafe { crate::dl_calls::dl_getinfo(d, version, node, service, flags, hints) };
                append(l);
            }
        }
    }
    if head.is_null() {
        return ENODATA.to_c();
    }
    // SAFETY: info is non-NULL.
    unsafe { *info = head };
    0
}

/// Reject hint combinations fi_getinfo(3) calls invalid.
fn validate_hints(h: &Info) -> Result<(), Error> {
    let bad = |why: &str| {
        rfabric_core::fi_warn!("core", FI_LOG_CORE, "invalid hints: {}", why);
        Err(EINVAL)
    };
    if h.src_addr.is_some() && h.addr_format == FI_FORMAT_UNSPEC {
        return bad("src_addr given without addr_format");
    }
    if h.dest_addr.is_some() && h.addr_format == FI_FORMAT_UNSPEC {
        return bad("dest_addr given without addr_format");
    }
    if let Some(d) = &h.domain_attr {
        if d.threading > FI_THREAD_ENDPOINT + 8 {
            return bad("unknown threading model");
        }
        if d.av_type > FI_AV_TABLE + 8 {
            return bad("unknown av_type");
        }
    }
    Ok(())
}

/// # Safety
/// Arguments as fi_fabric(3), current-shape attr.
pub(crate) unsafe fn fabric_current(attr: *mut fi_fabric_attr, fabric: *mut *mut fid_fabric, context: *mut c_void) -> c_int {
    null_check!(attr, fabric);
    // SAFETY: attr non-NULL.
    let a = unsafe { &*attr };
    // SAFETY: names are NULL or strings.
    let prov_name = match unsafe { opt_str(a.prov_name) } {
        Ok(Some(n)) => n,
        Ok(None) => {
            rfabric_core::fi_warn!("core", FI_LOG_FABRIC, "fi_fabric: attr->prov_name is NULL; pass a fabric_attr returned by fi_getinfo");
            return EINVAL.to_c();
        }
        Err(e) => {
            rfabric_core::fi_warn!("core", FI_LOG_FABRIC, "fi_fabric: attr->prov_name is not a terminated UTF-8 string of under {} bytes", MAX_STR);
            return e.to_c();
        }
    };
    // SAFETY: a.name is NULL or the caller's string (bounded read).
    let name = match unsafe { opt_str(a.name) } {
        Ok(n) => n,
        Err(e) => {
            rfabric_core::fi_warn!("core", FI_LOG_FABRIC, "fi_fabric: attr->name is not a terminated UTF-8 string of under {} bytes", MAX_STR);
            return e.to_c();
        }
    };
    // A layered name (`tcp;ofi_rxm`) is opened by its top provider.
    let top = prov_name.rsplit(';').next().unwrap_or(&prov_name).to_string();
    for entry in &table().entries {
        if !entry.name().eq_ignore_ascii_case(&top) {
            continue;
        }
        return match entry {
            Entry::Builtin(p) => {
                let fa = FabricAttr {
                    fabric: 0,
                    name: name.clone(),
                    prov_name: Some(prov_name.clone()),
                    prov_version: a.prov_version,
                    api_version: a.api_version,
                };
                match p.fabric(&fa) {
                    // SAFETY: fabric non-NULL.
                    Ok(obj) => unsafe { fabric::publish_fabric(obj, &fa, context, fabric) },
                    Err(e) => e.to_c(),
                }
            }
            Entry::Dl(d) => {
                // SAFETY: the provider's fabric entry with the caller's args.
                unsafe { crate::dl_calls::dl_fabric(d, attr, fabric, context) }
            }
        };
    }
    rfabric_core::fi_warn!("core", FI_LOG_FABRIC, "fi_fabric: no provider named {}", prov_name);
    ENODATA.to_c()
}

/// fi_open(3): named, provider-independent objects. None are offered yet
/// beyond what providers open through fi_open_ops.
#[no_mangle]
pub unsafe extern "C" fn fi_open(
    version: u32,
    name: *const c_char,
    attr: *mut c_void,
    attr_len: usize,
    flags: u64,
    fid: *mut *mut fid,
    context: *mut c_void,
) -> c_int {
    let _ = (attr, attr_len, flags, context);
    guard!(-(FI_EOTHER), {
        null_check!(name, fid);
        if let Err(e) = check_version(version) {
            return e.to_c();
        }
        // SAFETY: name is non-NULL; bounded read.
        let n = match unsafe { opt_str(name) } {
            Ok(n) => n.unwrap_or_default(),
            Err(e) => {
                rfabric_core::fi_warn!("core", FI_LOG_CORE, "fi_open: name is not a terminated UTF-8 string of under {} bytes", MAX_STR);
                return e.to_c();
            }
        };
        rfabric_core::fi_info!("core", FI_LOG_CORE, "fi_open: no object named {:?} is offered", n);
        ENOSYS.to_c()
    })
}

/// fi_version(3): the API version this library implements.
#[no_mangle]
pub extern "C" fn fi_version() -> u32 {
    OUR_VERSION
}

#[allow(dead_code)]
fn cstr_of(p: *const c_char) -> Option<&'static CStr> {
    if p.is_null() {
        None
    } else {
        // SAFETY: only used on library-owned static strings.
        Some(unsafe { CStr::from_ptr(p) })
    }
}

/// fi_fabric2(3): open the fabric an `fi_info` from fi_getinfo describes.
#[no_mangle]
pub unsafe extern "C" fn fi_fabric2(info: *mut fi_info, fabric: *mut *mut fid_fabric, flags: u64, context: *mut c_void) -> c_int {
    guard!(-(FI_EOTHER), {
        null_check!(info, fabric);
        if flags != 0 {
            rfabric_core::fi_warn!("core", FI_LOG_FABRIC, "fi_fabric2: unknown flags {:#x}", flags);
            return EINVAL.to_c();
        }
        // SAFETY: info is non-NULL; its fabric_attr is NULL or valid.
        let attr = unsafe { (*info).fabric_attr };
        if attr.is_null() {
            rfabric_core::fi_warn!("core", FI_LOG_FABRIC, "fi_fabric2: info->fabric_attr is NULL");
            return EINVAL.to_c();
        }
        // SAFETY: checked arguments, current-shape attr.
        unsafe { fabric_current(attr, fabric, context) }
    })
}
