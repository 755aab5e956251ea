//! Calls into DL providers (upstream's provider ABI), with the `fi_info`
//! shape conversions their build needs.
//!
//! A provider built against an older libfabric allocates the lists it
//! returns with the `fi_dupinfo` of its ABI node (say FABRIC_1.9), so those
//! lists have that node's shape and are widened here. Hints are passed in
//! the current shape: every older shape is a prefix of it, member by member,
//! so an older provider reads exactly the fields it knows.

use crate::compat::{free_info_old, widen_info, CompatVer};
use crate::info::freeinfo_current;
use libc::{c_char, c_int, c_void};
use rfabric_core::abi::*;
use rfabric_core::dl::{AbiNode, DlProvider};
use std::ptr;

pub(crate) fn compat_of(node: AbiNode) -> Option<CompatVer> {
    Some(match node.0 {
        0 => CompatVer::V1_0,
        1 => CompatVer::V1_1,
        2 => CompatVer::V1_2,
        3..=6 => CompatVer::V1_3,
        7 => CompatVer::V1_7,
        8 => CompatVer::V1_8,
        9 => CompatVer::V1_9,
        _ => return None,
    })
}

/// Ask one DL provider; returns a current-shape list (NULL for none).
///
/// # Safety
/// Arguments as fi_getinfo(3), hints in the current shape.
pub(crate) unsafe fn dl_getinfo(
    d: &DlProvider,
    version: u32,
    node: *const c_char,
    service: *const c_char,
    flags: u64,
    hints: *const fi_info,
) -> *mut fi_info {
    // SAFETY: the provider struct stays valid while its library is open.
    let prov = unsafe { &*d.raw() };
    let Some(getinfo) = prov.getinfo else { return ptr::null_mut() };
    let mut list: *mut fi_info = ptr::null_mut();
    // The provider sees at most the version it was built for.
    let ver = version.min(d.fi_version());
    // SAFETY: the provider's own entry point with the caller's arguments.
    let rc = unsafe { getinfo(ver, node, service, flags, hints, &mut list) };
    if rc != 0 || list.is_null() {
        rfabric_core::fi_info!(d.name(), FI_LOG_CORE, "fi_getinfo: provider returned {} ({})", rc, rfabric_core::tostr::strerror(rc.saturating_abs()));
        return ptr::null_mut();
    }
    let list = match compat_of(d.abi()) {
        None => list,
        // SAFETY: the provider built `list` in shape `v`.
        Some(v) => unsafe { widen_list(list as *mut c_void, v) },
    };
    // Name the provider where it left the name out, as the upstream core does.
    let mut cur = list;
    while !cur.is_null() {
        // SAFETY: walking our current-shape list.
        unsafe {
            let fa = (*cur).fabric_attr;
            if !fa.is_null() && (*fa).prov_name.is_null() {
                let mut name = d.name().as_bytes().to_vec();
                name.push(0);
                (*fa).prov_name = libc::strdup(name.as_ptr() as *const c_char);
            }
            cur = (*cur).next;
        }
    }
    list
}

/// Widen an old-shape list node by node, then free the old list.
///
/// # Safety
/// `old` is a list in shape `v`.
unsafe fn widen_list(old: *mut c_void, v: CompatVer) -> *mut fi_info {
    let mut head: *mut fi_info = ptr::null_mut();
    let mut tail: *mut fi_info = ptr::null_mut();
    let mut cur = old;
    while !cur.is_null() {
        // SAFETY: `next` is the first member in every shape.
        let next = unsafe { *(cur as *const *mut c_void) };
        // SAFETY: cur is a node in shape v.
        let w = unsafe { widen_info(cur, v) };
        if w.is_null() {
            // SAFETY: our partial list / the provider's old list.
            unsafe {
                freeinfo_current(head);
                free_info_old(old, v);
            }
            return ptr::null_mut();
        }
        // SAFETY: w is a fresh single node.
        unsafe { (*w).next = ptr::null_mut() };
        if tail.is_null() {
            head = w;
        } else {
            // SAFETY: tail is our last node.
            unsafe { (*tail).next = w };
        }
        tail = w;
        cur = next;
    }
    // SAFETY: the old list is no longer referenced.
    unsafe { free_info_old(old, v) };
    head
}

/// # Safety
/// Arguments as fi_fabric(3).
pub(crate) unsafe fn dl_fabric(d: &DlProvider, attr: *mut fi_fabric_attr, fabric: *mut *mut fid_fabric, context: *mut c_void) -> c_int {
    // SAFETY: provider struct valid while loaded.
    let prov = unsafe { &*d.raw() };
    match prov.fabric {
        // SAFETY: the provider's entry point with the caller's arguments;
        // fi_fabric_attr has had the same shape since ABI 1.1.
        Some(f) => unsafe { f(attr, fabric, context) },
        None => -(FI_ENOSYS),
    }
}
