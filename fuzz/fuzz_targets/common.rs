//! Helpers shared by the fuzz targets: turning fuzz bytes into C-allocated
//! strings, byte blobs and flag words. Everything handed to the library is
//! allocated with the C allocator, as an application would.

#![allow(dead_code)]

use std::ffi::{c_char, c_void};

use libfuzzer_sys::arbitrary::{Result, Unstructured};

/// Names the library knows, so that some inputs get past the name filters.
pub const KNOWN_NAMES: &[&[u8]] = &[
    b"shm",
    b"rfabric",
    b"shm;ofi_rxm",
    b"^shm",
    b"ofi_rxm;shm",
    b"sockets",
    b"tcp",
    b"",
    b"shm\xff\xfe",
    b"\xc3\x28",
];

/// A NULL pointer or a `malloc`ed, NUL-terminated copy of fuzz bytes
/// (cut at the first interior NUL, as C would read it). Some strings are
/// long (up to 64 KiB), some not valid UTF-8, some well-known names.
pub fn c_string(u: &mut Unstructured) -> Result<*mut c_char> {
    let bytes: Vec<u8> = match u.int_in_range(0u8..=4)? {
        0 => return Ok(std::ptr::null_mut()),
        1 => {
            let n = u.int_in_range(0usize..=64)?;
            u.bytes(n.min(u.len()))?.to_vec()
        }
        2 => {
            let b: u8 = u.arbitrary()?;
            let n = u.int_in_range(0usize..=(1 << 16))?;
            vec![b.max(1); n]
        }
        3 => u.choose(KNOWN_NAMES)?.to_vec(),
        _ => {
            // A known name with fuzz bytes appended.
            let mut v = u.choose(KNOWN_NAMES)?.to_vec();
            let n = u.int_in_range(0usize..=8)?;
            v.extend_from_slice(u.bytes(n.min(u.len()))?);
            v
        }
    };
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    Ok(malloc_copy(&bytes[..end], true) as *mut c_char)
}

/// `malloc`ed copy of `bytes`, NUL-terminated when `nul` is set. Never NULL
/// unless the allocator fails (then the process aborts: not a finding).
pub fn malloc_copy(bytes: &[u8], nul: bool) -> *mut c_void {
    let n = bytes.len() + usize::from(nul);
    // SAFETY: malloc of at least one byte; checked below.
    let p = unsafe { libc::malloc(n.max(1)) } as *mut u8;
    assert!(!p.is_null(), "malloc failed");
    // SAFETY: `p` is writable for `n` bytes and does not overlap `bytes`.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), p, bytes.len());
        if nul {
            *p.add(bytes.len()) = 0;
        }
    }
    p as *mut c_void
}

/// A 64-bit flag word: zero, all fuzz bits, or a few single bits.
pub fn flag_word(u: &mut Unstructured) -> Result<u64> {
    Ok(match u.int_in_range(0u8..=3)? {
        0 => 0,
        1 => u.arbitrary()?,
        _ => {
            let mut v = 0u64;
            for _ in 0..u.int_in_range(1u8..=4)? {
                v |= 1u64 << u.int_in_range(0u32..=63)?;
            }
            v
        }
    })
}

/// A small enum-like value: usually in a plausible range, sometimes any u32.
pub fn enum_val(u: &mut Unstructured, max: u32) -> Result<u32> {
    if u.ratio(1u8, 8u8)? {
        u.arbitrary()
    } else {
        u.int_in_range(0..=max)
    }
}

/// A size_t: small, boundary or any.
pub fn size_val(u: &mut Unstructured) -> Result<usize> {
    Ok(match u.int_in_range(0u8..=3)? {
        0 => u.int_in_range(0usize..=4096)?,
        1 => *u.choose(&[0usize, 1, usize::MAX, usize::MAX - 1, 1 << 31, 1 << 32])?,
        _ => u.arbitrary()?,
    })
}

/// The length of the C string at `p` and its bytes (NULL: None).
///
/// # Safety
/// `p` is NULL or a NUL-terminated string.
pub unsafe fn c_bytes<'a>(p: *const c_char) -> Option<&'a [u8]> {
    if p.is_null() {
        None
    } else {
        // SAFETY: caller.
        Some(unsafe { std::ffi::CStr::from_ptr(p) }.to_bytes())
    }
}
