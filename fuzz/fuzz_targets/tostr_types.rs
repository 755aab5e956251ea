//! `fi_tostr_r` (and `fi_tostr`) over every `FI_TYPE_*` value with fuzz
//! bytes as the data, plus type numbers outside the enum and output buffers
//! of every length, 0 and tiny ones included.
//!
//! The data is a 16-byte aligned block filled from the input. For types
//! whose struct holds pointers, every pointer member is then forced NULL,
//! except C strings (names), which are NULL or valid strings, and an
//! `fi_info`'s attribute structs, which are NULL or built the same way.
//! Addresses in an `fi_info` are NULL or zero-padded to well beyond the
//! longest format the printer reads.
//!
//! Checked on every call: the buffer is written only within `len` (guard
//! bytes after it), the text is NUL-terminated within `len`, `len == 0` and
//! NULL arguments return NULL, and when the whole text fits, `fi_tostr_r`
//! and `fi_tostr` agree (upstream's cut keeps spare bytes and
//! transient separators, so "fits" means `strlen + 16 <= len`).

#![no_main]

#[path = "common.rs"]
mod common;

use std::ffi::{c_char, c_void, CStr};
use std::ptr;

use common::*;
use libfuzzer_sys::arbitrary::{Result, Unstructured};
use libfuzzer_sys::fuzz_target;
use rfabric_core::abi::*;

extern crate rfabric_capi;

extern "C" {
    fn fi_tostr_r(buf: *mut c_char, len: usize, data: *const c_void, datatype: u32) -> *mut c_char;
    fn fi_tostr(data: *const c_void, datatype: u32) -> *mut c_char;
}

const BLOCK: usize = 1024;

/// Aligned storage big enough for every struct `fi_tostr` reads.
#[repr(C, align(16))]
struct Block([u8; BLOCK]);

/// Owns everything the data points to, released on drop.
#[derive(Default)]
struct Owned {
    blocks: Vec<Box<Block>>,
    strings: Vec<*mut c_char>,
    addrs: Vec<Vec<u8>>,
}

impl Drop for Owned {
    fn drop(&mut self) {
        for &s in &self.strings {
            // SAFETY: each was allocated by malloc_copy and is freed once.
            unsafe { libc::free(s as *mut c_void) };
        }
    }
}

impl Owned {
    /// A new block filled from the input (zero where it runs out).
    fn block(&mut self, u: &mut Unstructured) -> Result<*mut u8> {
        let mut b = Box::new(Block([0; BLOCK]));
        let n = u.int_in_range(0..=BLOCK)?.min(u.len());
        b.0[..n].copy_from_slice(u.bytes(n)?);
        let p = b.0.as_mut_ptr();
        self.blocks.push(b);
        Ok(p)
    }

    fn string(&mut self, u: &mut Unstructured) -> Result<*mut c_char> {
        let s = c_string(u)?;
        if !s.is_null() {
            self.strings.push(s);
        }
        Ok(s)
    }

    /// NULL or an address of fuzz bytes padded with zeros to 256 bytes, so
    /// any fixed-size format and an FI_ADDR_STR string stay in bounds.
    fn addr(&mut self, u: &mut Unstructured) -> Result<*mut c_void> {
        if u.ratio(1u8, 4u8)? {
            return Ok(ptr::null_mut());
        }
        let n = u.int_in_range(0usize..=128)?.min(u.len());
        let mut v = u.bytes(n)?.to_vec();
        v.resize(256, 0);
        let p = v.as_mut_ptr() as *mut c_void;
        self.addrs.push(v);
        Ok(p)
    }
}

/// # Safety
/// `p` points to a block of at least `size_of::<fi_ep_attr>()` bytes.
unsafe fn fix_ep(p: *mut u8) {
    // SAFETY: caller; any byte pattern is a valid fi_ep_attr.
    let a = unsafe { &mut *(p as *mut fi_ep_attr) };
    a.auth_key = ptr::null_mut();
    a.xpu_ctx = ptr::null_mut();
}

/// # Safety
/// `p` points to a block of at least `size_of::<fi_domain_attr>()` bytes.
unsafe fn fix_domain(p: *mut u8, o: &mut Owned, u: &mut Unstructured) -> Result<()> {
    // SAFETY: caller; any byte pattern is a valid fi_domain_attr.
    let a = unsafe { &mut *(p as *mut fi_domain_attr) };
    a.domain = ptr::null_mut();
    a.auth_key = ptr::null_mut();
    a.name = ptr::null_mut();
    a.name = o.string(u)?;
    Ok(())
}

/// # Safety
/// `p` points to a block of at least `size_of::<fi_fabric_attr>()` bytes.
unsafe fn fix_fabric(p: *mut u8, o: &mut Owned, u: &mut Unstructured) -> Result<()> {
    // SAFETY: caller; any byte pattern is a valid fi_fabric_attr.
    let a = unsafe { &mut *(p as *mut fi_fabric_attr) };
    a.fabric = ptr::null_mut();
    a.name = ptr::null_mut();
    a.prov_name = ptr::null_mut();
    a.name = o.string(u)?;
    a.prov_name = o.string(u)?;
    Ok(())
}

/// Makes the block at `p` a valid value of type `ty`: pointer members NULL
/// or pointing at data owned by `o`.
///
/// # Safety
/// `p` points to a BLOCK-sized, 16-byte aligned block.
unsafe fn fix_up(ty: u32, p: *mut u8, o: &mut Owned, u: &mut Unstructured) -> Result<()> {
    // SAFETY (every cast below): the block is large and aligned enough for
    // each struct, and any byte pattern is a valid value of it.
    unsafe {
        match ty {
            FI_TYPE_INFO => {
                let i = &mut *(p as *mut fi_info);
                i.next = ptr::null_mut();
                i.handle = ptr::null_mut();
                i.nic = ptr::null_mut();
                i.src_addr = ptr::null_mut();
                i.dest_addr = ptr::null_mut();
                i.tx_attr = ptr::null_mut();
                i.rx_attr = ptr::null_mut();
                i.ep_attr = ptr::null_mut();
                i.domain_attr = ptr::null_mut();
                i.fabric_attr = ptr::null_mut();
                i.src_addr = o.addr(u)?;
                i.dest_addr = o.addr(u)?;
                if u.arbitrary()? {
                    i.tx_attr = o.block(u)? as *mut fi_tx_attr;
                }
                if u.arbitrary()? {
                    i.rx_attr = o.block(u)? as *mut fi_rx_attr;
                }
                if u.arbitrary()? {
                    let b = o.block(u)?;
                    fix_ep(b);
                    i.ep_attr = b as *mut fi_ep_attr;
                }
                if u.arbitrary()? {
                    let b = o.block(u)?;
                    fix_domain(b, o, u)?;
                    i.domain_attr = b as *mut fi_domain_attr;
                }
                if u.arbitrary()? {
                    let b = o.block(u)?;
                    fix_fabric(b, o, u)?;
                    i.fabric_attr = b as *mut fi_fabric_attr;
                }
            }
            FI_TYPE_EP_ATTR => fix_ep(p),
            FI_TYPE_DOMAIN_ATTR => fix_domain(p, o, u)?,
            FI_TYPE_FABRIC_ATTR => fix_fabric(p, o, u)?,
            FI_TYPE_FID => {
                let f = &mut *(p as *mut fid);
                f.context = ptr::null_mut();
                f.ops = ptr::null_mut();
            }
            FI_TYPE_AV_ATTR => {
                let a = &mut *(p as *mut fi_av_attr);
                a.map_addr = ptr::null_mut();
                a.name = ptr::null();
                a.name = o.string(u)?;
            }
            FI_TYPE_CQ_ATTR => {
                let a = &mut *(p as *mut fi_cq_attr);
                a.wait_set = ptr::null_mut();
                a.xpu_ctx = ptr::null_mut();
            }
            FI_TYPE_MR_ATTR => {
                let a = &mut *(p as *mut fi_mr_attr);
                a.anon0.mr_iov = ptr::null();
                a.context = ptr::null_mut();
                a.auth_key = ptr::null_mut();
                a.hmem_data = ptr::null_mut();
                a.base_mr = ptr::null();
            }
            FI_TYPE_CNTR_ATTR => {
                let a = &mut *(p as *mut fi_cntr_attr);
                a.wait_set = ptr::null_mut();
                a.xpu_ctx = ptr::null_mut();
            }
            FI_TYPE_CQ_ERR_ENTRY => {
                let e = &mut *(p as *mut fi_cq_err_entry);
                e.op_context = ptr::null_mut();
                e.buf = ptr::null_mut();
                e.err_data = ptr::null_mut();
            }
            // Flag words, enums, fi_tx_attr, fi_rx_attr, FI_TYPE_VERSION and
            // unknown types: no pointers, the raw bytes are the value.
            _ => {}
        }
    }
    Ok(())
}

fn pick_type(u: &mut Unstructured) -> Result<u32> {
    Ok(match u.int_in_range(0u8..=7)? {
        0 => u.arbitrary()?,
        1 => *u.choose(&[FI_TYPE_WAIT_OBJ + 1, 64, 255, 0x7fff_ffff, 0x8000_0000, u32::MAX])?,
        _ => u.int_in_range(FI_TYPE_INFO..=FI_TYPE_WAIT_OBJ)?,
    })
}

fn pick_len(u: &mut Unstructured) -> Result<usize> {
    Ok(match u.int_in_range(0u8..=3)? {
        0 => *u.choose(&[0usize, 1, 2, 3, 4, 7, 8, 16])?,
        1 => u.int_in_range(0..=64)?,
        2 => u.int_in_range(0..=1024)?,
        _ => u.int_in_range(0..=16384)?,
    })
}

const GUARD: usize = 32;
const CANARY: u8 = 0xa5;

fn run(data: &[u8]) -> Result<()> {
    let mut u = Unstructured::new(data);
    let ty = pick_type(&mut u)?;
    let mut owned = Owned::default();
    let p = owned.block(&mut u)?;
    // SAFETY: `p` is a BLOCK-sized, aligned block owned by `owned`.
    unsafe { fix_up(ty, p, &mut owned, &mut u)? };
    let data = p as *const c_void;

    // The unbounded text, copied out of the library's per-thread buffer.
    // SAFETY: `data` is a valid value of `ty` (built above).
    let full = unsafe { fi_tostr(data, ty) };
    assert!(!full.is_null(), "fi_tostr returned NULL for type {ty}");
    // SAFETY: a non-NULL fi_tostr result is a C string.
    let full = unsafe { CStr::from_ptr(full) }.to_bytes().to_vec();

    for _ in 0..u.int_in_range(1u8..=4)? {
        let len = pick_len(&mut u)?;
        let mut buf = vec![CANARY; len + GUARD];
        let b = buf.as_mut_ptr() as *mut c_char;
        // SAFETY: `buf` is writable for `len` bytes; `data` is valid.
        let r = unsafe { fi_tostr_r(b, len, data, ty) };
        assert!(buf[len..].iter().all(|&x| x == CANARY), "fi_tostr_r wrote past len {len} (type {ty})");
        if len == 0 {
            assert!(r.is_null(), "fi_tostr_r with len 0 must return NULL");
            continue;
        }
        assert_eq!(r, b, "fi_tostr_r must return buf (type {ty}, len {len})");
        let end = buf[..len].iter().position(|&x| x == 0);
        let Some(end) = end else { panic!("fi_tostr_r left no NUL within len {len} (type {ty})") };
        // Upstream's appends leave the last two bytes of `buf` unused (each
        // piece is formatted into the room minus one), and a flag list is
        // written with a trailing ", " that is removed afterwards (at some
        // lengths upstream leaves a lone ","); the whole text is promised
        // only with room to spare.
        if full.len() + 16 <= len {
            assert_eq!(&buf[..end], &full[..], "fi_tostr_r and fi_tostr differ though the text fits (type {ty})");
        }
    }

    // NULL arguments: NULL back, nothing written.
    let mut one = [CANARY; 4];
    // SAFETY: NULL data / NULL buffer are allowed and return NULL.
    unsafe {
        assert!(fi_tostr_r(one.as_mut_ptr() as *mut c_char, one.len(), ptr::null(), ty).is_null());
        assert!(fi_tostr_r(ptr::null_mut(), 16, data, ty).is_null());
        assert!(fi_tostr(ptr::null(), ty).is_null());
    }
    assert_eq!(one, [CANARY; 4], "fi_tostr_r wrote with NULL data");
    Ok(())
}

fuzz_target!(|data: &[u8]| {
    let _ = run(data);
});
