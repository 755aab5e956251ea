//! `fi_getinfo` with arbitrary hints, node, service, version and flags.
//!
//! The hints are a C-allocated `fi_info` tree built from the fuzz input the
//! way an application builds one (calloc'ed structs, malloc'ed strings and
//! addresses whose length matches the `*_addrlen` member); every attribute
//! struct is NULL or present. The library's current `fi_getinfo`
//! (`rf_fi_getinfo`, bound to `fi_getinfo@@FABRIC_1.10`) is called, every
//! returned entry is duplicated with `rf_fi_dupinfo` and compared with its
//! original, the hints are duplicated and compared too, and everything is
//! released with `rf_fi_freeinfo`.
//!
//! Pointers the library would dereference as objects (`handle`, `nic`,
//! `domain_attr->domain`, `fabric_attr->fabric`, `xpu_ctx`) stay NULL: an
//! application can only put live objects there.

#![no_main]

#[path = "common.rs"]
mod common;

use std::ffi::{c_char, c_int, c_void, CStr};
use std::mem::size_of;
use std::ptr;

use common::*;
use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use rfabric_core::abi::*;

// Links the library's rlib so the symbols below resolve.
extern crate rfabric_capi;

extern "C" {
    fn rf_fi_getinfo(
        version: u32,
        node: *const c_char,
        service: *const c_char,
        flags: u64,
        hints: *const fi_info,
        info: *mut *mut fi_info,
    ) -> c_int;
    fn rf_fi_freeinfo(info: *mut fi_info);
    fn rf_fi_dupinfo(info: *const fi_info) -> *mut fi_info;
}

const ADDR_FORMATS: &[u32] = &[
    FI_FORMAT_UNSPEC,
    FI_SOCKADDR,
    FI_SOCKADDR_IN,
    FI_SOCKADDR_IN6,
    FI_SOCKADDR_IB,
    FI_ADDR_STR,
    FI_ADDR_IB_UD,
    FI_ADDR_EFA,
    FI_ADDR_PSMX3,
    FI_ADDR_OPX,
    FI_ADDR_CXI,
    5,
    6,
    7,
    8,
    10,
    16,
    0x8000_0000,
];

/// `calloc`ed `T` whose bytes come from the fuzz input (zero where it runs out).
fn c_struct<T>(u: &mut Unstructured) -> Result<*mut T> {
    // SAFETY: calloc of one T; checked below.
    let p = unsafe { libc::calloc(1, size_of::<T>()) } as *mut u8;
    assert!(!p.is_null(), "calloc failed");
    let n = size_of::<T>().min(u.len());
    let src = u.bytes(n)?;
    // SAFETY: `p` is writable for size_of::<T>() >= n bytes.
    unsafe { ptr::copy_nonoverlapping(src.as_ptr(), p, n) };
    Ok(p as *mut T)
}

/// NULL (length 0) or a `malloc`ed blob of fuzz bytes and its exact length.
fn c_blob(u: &mut Unstructured, max: usize) -> Result<(*mut c_void, usize)> {
    if u.ratio(1u8, 4u8)? {
        return Ok((ptr::null_mut(), 0));
    }
    let n = if u.ratio(1u8, 16u8)? { u.int_in_range(0..=max * 16)? } else { u.int_in_range(0..=max)? };
    let mut v = u.bytes(n.min(u.len()))?.to_vec();
    v.resize(n, 0);
    if v.is_empty() {
        return Ok((ptr::null_mut(), 0));
    }
    Ok((malloc_copy(&v, false), n))
}

/// Fills the calloc'ed entry `info`. Every member is set as soon as it is
/// allocated, so a reader error half way still leaves a freeable tree.
fn build_hints(u: &mut Unstructured, info: *mut fi_info) -> Result<()> {
    // SAFETY: `info` is a valid, zeroed entry owned by the caller.
    let h = unsafe { &mut *info };
    h.caps = flag_word(u)?;
    h.mode = flag_word(u)?;
    h.addr_format = if u.ratio(1u8, 8u8)? { u.arbitrary()? } else { *u.choose(ADDR_FORMATS)? };
    let (src, src_len) = c_blob(u, 128)?;
    h.src_addr = src;
    h.src_addrlen = src_len;
    let (dst, dst_len) = c_blob(u, 128)?;
    h.dest_addr = dst;
    h.dest_addrlen = dst_len;

    if u.arbitrary()? {
        h.tx_attr = c_struct::<fi_tx_attr>(u)?;
    }
    if u.arbitrary()? {
        h.rx_attr = c_struct::<fi_rx_attr>(u)?;
    }
    if u.arbitrary()? {
        let p = c_struct::<fi_ep_attr>(u)?;
        // SAFETY: freshly allocated and initialised above.
        let a = unsafe { &mut *p };
        a.auth_key = ptr::null_mut();
        a.auth_key_size = 0;
        a.xpu_ctx = ptr::null_mut();
        h.ep_attr = p;
        if u.ratio(3u8, 4u8)? {
            a.r#type = enum_val(u, 4)?;
            a.protocol = enum_val(u, 40)?;
        }
        let (k, n) = c_blob(u, 64)?;
        a.auth_key = k as *mut u8;
        a.auth_key_size = n;
    }
    if u.arbitrary()? {
        let p = c_struct::<fi_domain_attr>(u)?;
        // SAFETY: freshly allocated and initialised above.
        let a = unsafe { &mut *p };
        a.domain = ptr::null_mut();
        a.name = ptr::null_mut();
        a.auth_key = ptr::null_mut();
        a.auth_key_size = 0;
        h.domain_attr = p;
        if u.ratio(3u8, 4u8)? {
            a.threading = enum_val(u, 8)?;
            a.control_progress = enum_val(u, 4)?;
            a.anon0.data_progress = enum_val(u, 4)?;
            a.resource_mgmt = enum_val(u, 3)?;
            a.av_type = enum_val(u, 3)?;
            a.mr_mode = enum_val(u, 0x7fff)? as c_int;
        }
        a.name = c_string(u)?;
        let (k, n) = c_blob(u, 64)?;
        a.auth_key = k as *mut u8;
        a.auth_key_size = n;
    }
    if u.arbitrary()? {
        let p = c_struct::<fi_fabric_attr>(u)?;
        // SAFETY: freshly allocated and initialised above.
        let a = unsafe { &mut *p };
        a.fabric = ptr::null_mut();
        a.name = ptr::null_mut();
        a.prov_name = ptr::null_mut();
        h.fabric_attr = p;
        a.name = c_string(u)?;
        a.prov_name = c_string(u)?;
        if u.ratio(1u8, 2u8)? {
            a.prov_version = fi_version(u.int_in_range(0..=3)?, u.int_in_range(0..=30)?);
            a.api_version = fi_version(u.int_in_range(0..=3)?, u.int_in_range(0..=30)?);
        }
    }
    Ok(())
}

fn pick_version(u: &mut Unstructured) -> Result<u32> {
    Ok(match u.int_in_range(0u8..=3)? {
        0 => fi_version(1, u.int_in_range(0..=21)?),
        1 => fi_version(2, u.int_in_range(0..=9)?),
        2 => fi_version(FI_MAJOR_VERSION, FI_MINOR_VERSION),
        _ => u.arbitrary()?,
    })
}

fn pick_flags(u: &mut Unstructured) -> Result<u64> {
    Ok(match u.int_in_range(0u8..=2)? {
        0 => 0,
        1 => {
            let mut f = 0;
            for bit in [FI_SOURCE, FI_NUMERICHOST, FI_PROV_ATTR_ONLY] {
                if u.arbitrary()? {
                    f |= bit;
                }
            }
            f
        }
        _ => u.arbitrary()?,
    })
}

/// Bytes of a C blob, or None for NULL.
///
/// # Safety
/// `p` is NULL or readable for `n` bytes.
unsafe fn blob<'a>(p: *const c_void, n: usize) -> Option<&'a [u8]> {
    if p.is_null() {
        None
    } else {
        // SAFETY: caller.
        Some(unsafe { std::slice::from_raw_parts(p as *const u8, n) })
    }
}

/// A duplicate must carry the same values as its original.
///
/// # Safety
/// Both are valid, current-shape `fi_info` entries.
unsafe fn check_dup(o: *const fi_info, d: *const fi_info) {
    // SAFETY: caller.
    let (o, d) = unsafe { (&*o, &*d) };
    assert_eq!(o.caps, d.caps, "dupinfo caps");
    assert_eq!(o.mode, d.mode, "dupinfo mode");
    assert_eq!(o.addr_format, d.addr_format, "dupinfo addr_format");
    assert_eq!(o.src_addrlen, d.src_addrlen, "dupinfo src_addrlen");
    assert_eq!(o.dest_addrlen, d.dest_addrlen, "dupinfo dest_addrlen");
    // SAFETY: addresses are readable for their lengths (valid entries).
    unsafe {
        assert_eq!(blob(o.src_addr, o.src_addrlen), blob(d.src_addr, d.src_addrlen), "dupinfo src_addr");
        assert_eq!(blob(o.dest_addr, o.dest_addrlen), blob(d.dest_addr, d.dest_addrlen), "dupinfo dest_addr");
    }
    // SAFETY (attribute reads): members of valid entries are NULL or valid.
    unsafe {
        if let (Some(a), Some(b)) = (o.tx_attr.as_ref(), d.tx_attr.as_ref()) {
            let f = |x: &fi_tx_attr| {
                (x.caps, x.mode, x.op_flags, x.msg_order, x.comp_order, x.inject_size, x.size, x.iov_limit, x.rma_iov_limit, x.tclass)
            };
            assert_eq!(f(a), f(b), "dupinfo tx_attr");
        }
        if let (Some(a), Some(b)) = (o.rx_attr.as_ref(), d.rx_attr.as_ref()) {
            let f = |x: &fi_rx_attr| {
                (x.caps, x.mode, x.op_flags, x.msg_order, x.comp_order, x.total_buffered_recv, x.size, x.iov_limit)
            };
            assert_eq!(f(a), f(b), "dupinfo rx_attr");
        }
        if let (Some(a), Some(b)) = (o.ep_attr.as_ref(), d.ep_attr.as_ref()) {
            let f = |x: &fi_ep_attr| {
                (x.r#type, x.protocol, x.protocol_version, x.max_msg_size, x.msg_prefix_size, x.max_order_raw_size,
                 x.max_order_war_size, x.max_order_waw_size, x.mem_tag_format, x.tx_ctx_cnt, x.rx_ctx_cnt, x.auth_key_size)
            };
            assert_eq!(f(a), f(b), "dupinfo ep_attr");
            assert_eq!(
                blob(a.auth_key as *const c_void, a.auth_key_size),
                blob(b.auth_key as *const c_void, b.auth_key_size),
                "dupinfo ep_attr auth_key"
            );
        }
        if let (Some(a), Some(b)) = (o.domain_attr.as_ref(), d.domain_attr.as_ref()) {
            let f = |x: &fi_domain_attr| {
                (x.threading, x.control_progress, x.anon0.data_progress, x.resource_mgmt, x.av_type, x.mr_mode,
                 x.mr_key_size, x.cq_data_size, x.cq_cnt, x.ep_cnt, x.tx_ctx_cnt, x.rx_ctx_cnt)
            };
            let g = |x: &fi_domain_attr| {
                (x.max_ep_tx_ctx, x.max_ep_rx_ctx, x.max_ep_stx_ctx, x.max_ep_srx_ctx, x.cntr_cnt, x.mr_iov_limit,
                 x.caps, x.mode, x.auth_key_size, x.max_err_data, x.mr_cnt, x.tclass)
            };
            let k = |x: &fi_domain_attr| (x.max_ep_auth_key, x.max_group_id, x.max_cntr_value, x.max_err_cntr_value, x.max_xpu_ctx_cnt);
            assert_eq!(f(a), f(b), "dupinfo domain_attr (1)");
            assert_eq!(g(a), g(b), "dupinfo domain_attr (2)");
            assert_eq!(k(a), k(b), "dupinfo domain_attr (3)");
            assert_eq!(c_bytes(a.name), c_bytes(b.name), "dupinfo domain name");
            assert_eq!(
                blob(a.auth_key as *const c_void, a.auth_key_size),
                blob(b.auth_key as *const c_void, b.auth_key_size),
                "dupinfo domain auth_key"
            );
        }
        if let (Some(a), Some(b)) = (o.fabric_attr.as_ref(), d.fabric_attr.as_ref()) {
            assert_eq!(c_bytes(a.name), c_bytes(b.name), "dupinfo fabric name");
            assert_eq!(c_bytes(a.prov_name), c_bytes(b.prov_name), "dupinfo prov_name");
            assert_eq!((a.prov_version, a.api_version), (b.prov_version, b.api_version), "dupinfo versions");
        }
    }
}

/// Duplicates `info`, compares and frees the copy. A NULL copy is only
/// allowed where the library refuses the entry (documented failure).
///
/// # Safety
/// `info` is a valid current-shape entry.
unsafe fn dup_round_trip(info: *const fi_info) {
    // SAFETY: caller.
    let d = unsafe { rf_fi_dupinfo(info) };
    if d.is_null() {
        return;
    }
    // SAFETY: both valid; `d` is ours to free.
    unsafe {
        assert!((*d).next.is_null(), "dupinfo copies one entry only");
        check_dup(info, d);
        rf_fi_freeinfo(d);
    }
}

/// A node/service argument: NULL or a C string.
fn arg_string(u: &mut Unstructured) -> Result<Option<std::ffi::CString>> {
    let p = c_string(u)?;
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: `p` is a NUL-terminated string from malloc; copied, then freed.
    let s = unsafe { CStr::from_ptr(p) }.to_owned();
    // SAFETY: allocated by malloc_copy.
    unsafe { libc::free(p as *mut c_void) };
    Ok(Some(s))
}

fn run(data: &[u8]) -> Result<()> {
    let mut u = Unstructured::new(data);
    let version = pick_version(&mut u)?;
    let flags = pick_flags(&mut u)?;
    let node = arg_string(&mut u)?;
    let service = arg_string(&mut u)?;
    let with_hints = !u.ratio(1u8, 8u8)?;
    let hints = if with_hints {
        // SAFETY: calloc of one fi_info; all-zero is a valid empty entry.
        let h = unsafe { libc::calloc(1, size_of::<fi_info>()) } as *mut fi_info;
        assert!(!h.is_null(), "calloc failed");
        let _ = build_hints(&mut u, h);
        h
    } else {
        ptr::null_mut()
    };

    let mut out: *mut fi_info = ptr::dangling_mut();
    // SAFETY: every pointer is NULL or valid per fi_getinfo(3).
    let rc = unsafe {
        rf_fi_getinfo(
            version,
            node.as_ref().map_or(ptr::null(), |s| s.as_ptr()),
            service.as_ref().map_or(ptr::null(), |s| s.as_ptr()),
            flags,
            hints,
            &mut out,
        )
    };
    if rc == 0 {
        let mut e = out;
        while !e.is_null() {
            // SAFETY: `e` is an entry of the list the library returned.
            unsafe {
                dup_round_trip(e);
                e = (*e).next;
            }
        }
    } else {
        assert!(rc < 0, "fi_getinfo returned positive {rc}");
        assert!(out.is_null(), "fi_getinfo failed ({rc}) but set *info");
    }
    // SAFETY: `out` is NULL or the returned list; `hints` is ours, built
    // from the C allocator in the shape fi_freeinfo releases.
    unsafe {
        rf_fi_freeinfo(out);
        if !hints.is_null() {
            dup_round_trip(hints);
            rf_fi_freeinfo(hints);
        }
        // An empty entry: dupinfo(NULL) is fi_allocinfo.
        let empty = rf_fi_dupinfo(ptr::null());
        rf_fi_freeinfo(empty);
    }
    Ok(())
}

fuzz_target!(|data: &[u8]| {
    let _ = run(data);
});
