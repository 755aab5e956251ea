//! `fi_tostr`, `fi_tostr_r` and `fi_strerror`: the text itself comes from
//! `rfabric_core::tostr`; this module owns the buffers handed to C.

use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_void, CString};
use std::sync::OnceLock;

use rfabric_core::abi::FI_ERRNO_MAX;
use rfabric_core::tostr;

thread_local! {
    /// The text `fi_tostr` last returned on this thread. It stays valid until
    /// the next `fi_tostr` call on the same thread (upstream keeps one buffer
    /// for the whole process).
    static TOSTR_BUF: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Text for `data` read as `datatype`, in a buffer the library keeps; NULL
/// for NULL `data`.
#[no_mangle]
pub unsafe extern "C" fn fi_tostr(data: *const c_void, datatype: u32) -> *mut c_char {
    guard!(std::ptr::null_mut(), {
        if data.is_null() {
            return std::ptr::null_mut();
        }
        // SAFETY: the caller passes a valid value of the type `datatype`
        // names, as fi_tostr(3) requires.
        let mut text = unsafe { tostr::tostr_bytes(data, datatype, None) };
        text.push(0);
        TOSTR_BUF.with(|b| {
            let mut b = b.borrow_mut();
            *b = text;
            b.as_mut_ptr() as *mut c_char
        })
    })
}

/// Text for `data` written into the caller's `buf` of `len` bytes, cut
/// where upstream cuts it and always NUL-terminated. Returns `buf`, or NULL
/// when `buf` or `data` is NULL or `len` is 0 (nothing is written then).
#[no_mangle]
pub unsafe extern "C" fn fi_tostr_r(
    buf: *mut c_char,
    len: usize,
    data: *const c_void,
    datatype: u32,
) -> *mut c_char {
    guard!(std::ptr::null_mut(), {
        if data.is_null() || buf.is_null() || len == 0 {
            return std::ptr::null_mut();
        }
        // SAFETY: `data` is a valid value of `datatype`'s type (caller).
        let text = unsafe { tostr::tostr_bytes(data, datatype, Some(len)) };
        let n = text.len().min(len - 1);
        // SAFETY: `buf` is writable for `len` bytes (caller) and `n < len`;
        // `text` is our own vector, so the two do not overlap.
        unsafe {
            std::ptr::copy_nonoverlapping(text.as_ptr(), buf as *mut u8, n);
            *buf.add(n) = 0;
        }
        buf
    })
}

/// Message for an error number (negative or positive). The string is static.
#[no_mangle]
pub extern "C" fn fi_strerror(errnum: c_int) -> *const c_char {
    guard!(unspecified().as_ptr(), {
        // i32::MIN has no positive counterpart and reads as an errno value.
        let code = errnum.wrapping_abs();
        match usize::try_from(code) {
            Ok(i) if i < table().len() => table()[i].as_ptr(),
            Ok(_) => unspecified().as_ptr(),
            Err(_) => {
                static MIN: OnceLock<CString> = OnceLock::new();
                MIN.get_or_init(|| c_string(tostr::strerror(code))).as_ptr()
            }
        }
    })
}

/// The text of `fi_cq_strerror` / `fi_eq_strerror`: the message for
/// `prov_errno`, copied into `buf` (NUL-terminated, truncated to `len`)
/// when the caller gives one, else the static string itself.
///
/// # Safety
/// `buf` is NULL or writable for `len` bytes.
pub(crate) unsafe fn strerror_into(prov_errno: c_int, buf: *mut c_char, len: usize) -> *const c_char {
    let s = fi_strerror(prov_errno.saturating_abs());
    if buf.is_null() || len == 0 {
        return s;
    }
    // SAFETY: s is one of our static C strings.
    let text = unsafe { std::ffi::CStr::from_ptr(s) }.to_string_lossy();
    // SAFETY: buf holds len bytes (caller).
    unsafe { crate::handle::put_cstr(buf, len, &text) };
    buf as *const c_char
}

fn c_string(s: &str) -> CString {
    CString::new(s.replace('\0', "")).unwrap_or_default()
}

/// NUL-terminated copies of the messages for 0..FI_ERRNO_MAX, made once.
fn table() -> &'static [CString] {
    static TABLE: OnceLock<Vec<CString>> = OnceLock::new();
    TABLE.get_or_init(|| (0..FI_ERRNO_MAX).map(|c| c_string(tostr::strerror(c))).collect())
}

fn unspecified() -> &'static CString {
    static MSG: OnceLock<CString> = OnceLock::new();
    MSG.get_or_init(|| c_string(tostr::strerror(FI_ERRNO_MAX)))
}
