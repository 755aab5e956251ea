//! Stand-ins for the current `fi_getinfo` family until `getinfo.rs`
//! provides them (same names and signatures). They are real enough for
//! the compat conversions and their tests: `dupinfo_current` makes a deep,
//! C-allocated copy of one entry and `freeinfo_current` frees a list.
//! `getinfo_current` answers with a copy of the hints (or FI_ENODATA
//! without hints) and `fabric_current` with FI_ENOSYS.

use core::ffi::{c_char, c_int, c_void};
use core::ptr;

use crate::compat_shapes::current::{fi_fabric_attr, fi_info, fid_fabric};

/// Copy `len` bytes into a fresh C block (NULL for NULL or 0 bytes).
///
/// # Safety
/// `src` is NULL or readable for `len` bytes.
unsafe fn c_memdup(src: *const c_void, len: usize) -> *mut c_void {
    if src.is_null() || len == 0 {
        return ptr::null_mut();
    }
    // SAFETY: plain C allocation, then a copy of the caller-vouched bytes.
    unsafe {
        let p = libc::malloc(len);
        if !p.is_null() {
            ptr::copy_nonoverlapping(src as *const u8, p as *mut u8, len);
        }
        p
    }
}

/// # Safety
/// `s` is NULL or a NUL-terminated string.
unsafe fn c_strdup(s: *const c_char) -> *mut c_char {
    if s.is_null() {
        ptr::null_mut()
    } else {
        // SAFETY: `s` is a valid C string.
        unsafe { libc::strdup(s) }
    }
}

/// A zeroed C-allocated `T`, or a copy of `*src`.
///
/// # Safety
/// `src` is NULL or a valid `T`.
unsafe fn c_box<T>(src: *const T) -> *mut T {
    // SAFETY: plain C allocation of one T.
    let p = unsafe { libc::calloc(1, core::mem::size_of::<T>()) } as *mut T;
    if !p.is_null() && !src.is_null() {
        // SAFETY: both point to one T.
        unsafe { ptr::copy_nonoverlapping(src, p, 1) };
    }
    p
}

pub(crate) unsafe fn getinfo_current(
    _version: u32,
    _node: *const c_char,
    _service: *const c_char,
    _flags: u64,
    hints: *const fi_info,
    info: *mut *mut fi_info,
) -> c_int {
    if info.is_null() {
        return rfabric_core::error::EINVAL.to_c();
    }
    if hints.is_null() {
        return rfabric_core::error::ENODATA.to_c();
    }
    // SAFETY: `hints` is a valid current tree.
    let d = unsafe { dupinfo_current(hints) };
    if d.is_null() {
        return rfabric_core::error::ENOMEM.to_c();
    }
    // SAFETY: `info` is writable.
    unsafe { *info = d };
    0
}

pub(crate) unsafe fn freeinfo_current(mut info: *mut fi_info) {
    while !info.is_null() {
        // SAFETY: a valid C-allocated current node and its members.
        unsafe {
            let i = &*info;
            let next = i.next;
            libc::free(i.src_addr);
            libc::free(i.dest_addr);
            libc::free(i.tx_attr as *mut c_void);
            libc::free(i.rx_attr as *mut c_void);
            if let Some(e) = i.ep_attr.as_ref() {
                libc::free(e.auth_key as *mut c_void);
            }
            libc::free(i.ep_attr as *mut c_void);
            if let Some(d) = i.domain_attr.as_ref() {
                libc::free(d.name as *mut c_void);
                libc::free(d.auth_key as *mut c_void);
            }
            libc::free(i.domain_attr as *mut c_void);
            if let Some(f) = i.fabric_attr.as_ref() {
                libc::free(f.name as *mut c_void);
                libc::free(f.prov_name as *mut c_void);
            }
            libc::free(i.fabric_attr as *mut c_void);
            if let Some(n) = i.nic.as_mut() {
                if let Some(close) = n.fid.ops.as_ref().and_then(|o| o.close) {
                    close(&mut n.fid);
                }
            }
            libc::free(info as *mut c_void);
            info = next;
        }
    }
}

pub(crate) unsafe fn dupinfo_current(info: *const fi_info) -> *mut fi_info {
    // SAFETY: allocation of fresh zeroed structs; copies from a valid tree.
    unsafe {
        let d = c_box(info);
        if d.is_null() {
            return ptr::null_mut();
        }
        let o = &mut *d;
        o.next = ptr::null_mut();
        o.nic = ptr::null_mut();
        let src = info.as_ref();
        o.src_addr = src.map_or(ptr::null_mut(), |s| c_memdup(s.src_addr, s.src_addrlen));
        o.dest_addr = src.map_or(ptr::null_mut(), |s| c_memdup(s.dest_addr, s.dest_addrlen));
        let fresh = src.is_none();
        o.tx_attr = if fresh || !o.tx_attr.is_null() { c_box(src.map_or(ptr::null(), |s| s.tx_attr)) } else { ptr::null_mut() };
        o.rx_attr = if fresh || !o.rx_attr.is_null() { c_box(src.map_or(ptr::null(), |s| s.rx_attr)) } else { ptr::null_mut() };
        o.ep_attr = if fresh || !o.ep_attr.is_null() { c_box(src.map_or(ptr::null(), |s| s.ep_attr)) } else { ptr::null_mut() };
        o.domain_attr = if fresh || !o.domain_attr.is_null() { c_box(src.map_or(ptr::null(), |s| s.domain_attr)) } else { ptr::null_mut() };
        o.fabric_attr = if fresh || !o.fabric_attr.is_null() { c_box(src.map_or(ptr::null(), |s| s.fabric_attr)) } else { ptr::null_mut() };
        if let Some(e) = o.ep_attr.as_mut() {
            e.auth_key = c_memdup(e.auth_key as *const c_void, e.auth_key_size) as *mut u8;
        }
        if let Some(dm) = o.domain_attr.as_mut() {
            dm.name = c_strdup(dm.name);
            dm.auth_key = c_memdup(dm.auth_key as *const c_void, dm.auth_key_size) as *mut u8;
        }
        if let Some(f) = o.fabric_attr.as_mut() {
            f.name = c_strdup(f.name);
            f.prov_name = c_strdup(f.prov_name);
        }
        d
    }
}

pub(crate) unsafe fn fabric_current(
    _attr: *mut fi_fabric_attr,
    _fabric: *mut *mut fid_fabric,
    _context: *mut c_void,
) -> c_int {
    rfabric_core::error::ENOSYS.to_c()
}
