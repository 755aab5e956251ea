//! Every versioned symbol of the library lives here: the old (`@FABRIC_1.x`)
//! `fi_getinfo` / `fi_freeinfo` / `fi_dupinfo` / `fi_fabric` definitions that
//! programs linked long ago bind to, and the default (`@@`) ones that a new
//! link binds to. Both are thin: the work is done by the current
//! implementations (`getinfo.rs`, `info.rs`); the old shapes are converted
//! by `compat.rs`.
//!
//! How the versions are attached: each definition is a `#[no_mangle]`
//! function with an internal name (`rf_compat_*`), and a `.symver` directive
//! gives it its public versioned name. `capi/libfabric.map` declares the
//! version nodes and hides every other symbol (`local: *`).

use core::ffi::{c_char, c_int, c_void};
use core::ptr;

use crate::compat::{dup_info_old, free_info_old, narrow_info_list, widen_fabric_attr_1_0, widen_info, CompatVer};
use crate::getinfo::{fabric_current, getinfo_current};
use crate::info::{dupinfo_current, freeinfo_current};
use rfabric_core::abi::{fi_fabric_attr, fi_info, fid_fabric};

/// `fi_getinfo` for a program of ABI version `v`.
///
/// # Safety
/// C contract of `fi_getinfo`, with `hints`/`*info` of shape `v`.
unsafe fn getinfo_old(
    version: u32,
    node: *const c_char,
    service: *const c_char,
    flags: u64,
    hints: *const c_void,
    info: *mut *mut c_void,
    v: CompatVer,
) -> c_int {
    if info.is_null() {
        return rfabric_core::error::EINVAL.to_c();
    }
    let wide = if hints.is_null() {
        ptr::null_mut()
    } else {
        // SAFETY: `hints` is the program's tree of shape `v`.
        let w = unsafe { widen_info(hints, v) };
        if w.is_null() {
            return rfabric_core::error::ENOMEM.to_c();
        }
        w
    };
    let mut cur: *mut fi_info = ptr::null_mut();
    // SAFETY: arguments forwarded; `wide` is NULL or a valid current tree.
    let rc = unsafe { getinfo_current(version, node, service, flags, wide, &mut cur) };
    // SAFETY: `wide` is ours.
    unsafe { freeinfo_current(wide) };
    if rc != 0 {
        // SAFETY: `info` is non-NULL (checked above).
        unsafe { *info = ptr::null_mut() };
        return rc;
    }
    // SAFETY: `cur` is the list getinfo handed us.
    let old = unsafe { narrow_info_list(cur, v) };
    if old.is_null() && !cur.is_null() {
        // SAFETY: as above.
        unsafe { *info = ptr::null_mut() };
        return rfabric_core::error::ENOMEM.to_c();
    }
    // SAFETY: as above.
    unsafe { *info = old };
    0
}

/// Defines the three old-shape entry points of one ABI version and binds
/// them to their versioned public names.
macro_rules! compat_info_family {
    ($v:expr, $node:literal, $get:ident, $free:ident, $dup:ident) => {
        #[no_mangle]
        pub unsafe extern "C" fn $get(
            version: u32,
            node: *const c_char,
            service: *const c_char,
            flags: u64,
            hints: *const c_void,
            info: *mut *mut c_void,
        ) -> c_int {
            guard!(rfabric_core::error::EOTHER.to_c(), {
                // SAFETY: the program keeps the C contract of fi_getinfo for this ABI version.
                unsafe { getinfo_old(version, node, service, flags, hints, info, $v) }
            })
        }

        #[no_mangle]
        pub unsafe extern "C" fn $free(info: *mut c_void) {
            guard!((), {
                // SAFETY: the program hands back a list of this ABI version's shape.
                unsafe { free_info_old(info, $v) }
            })
        }

        #[no_mangle]
        pub unsafe extern "C" fn $dup(info: *const c_void) -> *mut c_void {
            guard!(ptr::null_mut(), {
                // SAFETY: `info` is NULL or an entry of this ABI version's shape.
                unsafe { dup_info_old(info, $v) }
            })
        }

        // A DL provider build exports fi_prov_ini alone: no versioned names.
        #[cfg(not(feature = "dl"))]
        core::arch::global_asm!(
            concat!(".symver ", stringify!($get), ", fi_getinfo@", $node),
            concat!(".symver ", stringify!($free), ", fi_freeinfo@", $node),
            concat!(".symver ", stringify!($dup), ", fi_dupinfo@", $node),
        );
    };
}

compat_info_family!(CompatVer::V1_0, "FABRIC_1.0", rf_compat_fi_getinfo_1_0, rf_compat_fi_freeinfo_1_0, rf_compat_fi_dupinfo_1_0);
compat_info_family!(CompatVer::V1_1, "FABRIC_1.1", rf_compat_fi_getinfo_1_1, rf_compat_fi_freeinfo_1_1, rf_compat_fi_dupinfo_1_1);
compat_info_family!(CompatVer::V1_2, "FABRIC_1.2", rf_compat_fi_getinfo_1_2, rf_compat_fi_freeinfo_1_2, rf_compat_fi_dupinfo_1_2);
compat_info_family!(CompatVer::V1_3, "FABRIC_1.3", rf_compat_fi_getinfo_1_3, rf_compat_fi_freeinfo_1_3, rf_compat_fi_dupinfo_1_3);
compat_info_family!(CompatVer::V1_7, "FABRIC_1.7", rf_compat_fi_getinfo_1_7, rf_compat_fi_freeinfo_1_7, rf_compat_fi_dupinfo_1_7);
compat_info_family!(CompatVer::V1_8, "FABRIC_1.8", rf_compat_fi_getinfo_1_8, rf_compat_fi_freeinfo_1_8, rf_compat_fi_dupinfo_1_8);
compat_info_family!(CompatVer::V1_9, "FABRIC_1.9", rf_compat_fi_getinfo_1_9, rf_compat_fi_freeinfo_1_9, rf_compat_fi_dupinfo_1_9);

/// `fi_fabric@FABRIC_1.0`: the attribute struct has no `api_version`; the
/// program's API version is somewhere in 1.0 … 1.4, so 1.0 is assumed.
#[no_mangle]
pub unsafe extern "C" fn rf_compat_fi_fabric_1_0(
    attr: *const c_void,
    fabric: *mut *mut fid_fabric,
    context: *mut c_void,
) -> c_int {
    guard!(rfabric_core::error::EOTHER.to_c(), {
        if attr.is_null() {
            return rfabric_core::error::EINVAL.to_c();
        }
        // SAFETY: the program's struct is at least the 1.0 size.
        let mut wide = unsafe { widen_fabric_attr_1_0(attr) };
        // SAFETY: `wide` is valid for the call; the rest is the program's contract.
        unsafe { fabric_current(&mut wide, fabric, context) }
    })
}
#[cfg(not(feature = "dl"))]
core::arch::global_asm!(".symver rf_compat_fi_fabric_1_0, fi_fabric@FABRIC_1.0");

// ---- default (@@) definitions: the current shapes ----

#[no_mangle]
pub unsafe extern "C" fn rf_fi_getinfo(
    version: u32,
    node: *const c_char,
    service: *const c_char,
    flags: u64,
    hints: *const fi_info,
    info: *mut *mut fi_info,
) -> c_int {
    guard!(rfabric_core::error::EOTHER.to_c(), {
        // SAFETY: the program keeps the C contract of fi_getinfo.
        unsafe { getinfo_current(version, node, service, flags, hints, info) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn rf_fi_freeinfo(info: *mut fi_info) {
    guard!((), {
        // SAFETY: the program hands back a current-shape list.
        unsafe { freeinfo_current(info) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn rf_fi_dupinfo(info: *const fi_info) -> *mut fi_info {
    guard!(ptr::null_mut(), {
        // SAFETY: `info` is NULL or a current-shape entry.
        unsafe { dupinfo_current(info) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn rf_fi_fabric(
    attr: *mut fi_fabric_attr,
    fabric: *mut *mut fid_fabric,
    context: *mut c_void,
) -> c_int {
    guard!(rfabric_core::error::EOTHER.to_c(), {
        // SAFETY: the program keeps the C contract of fi_fabric.
        unsafe { fabric_current(attr, fabric, context) }
    })
}

#[cfg(not(feature = "dl"))]
core::arch::global_asm!(
    ".symver rf_fi_getinfo, fi_getinfo@@FABRIC_1.10",
    ".symver rf_fi_freeinfo, fi_freeinfo@@FABRIC_1.10",
    ".symver rf_fi_dupinfo, fi_dupinfo@@FABRIC_1.10",
    ".symver rf_fi_fabric, fi_fabric@@FABRIC_1.1",
);
