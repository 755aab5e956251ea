//! What every handle module shares: the parent/child reference count, the
//! checked fid -> handle conversion, return-value helpers and the slots
//! that answer `-FI_ENOSYS`.

use libc::{c_char, c_int, c_void};
use rfabric_core::abi::*;
use rfabric_core::error::Error;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Children (domains, EQs, ...) keep their parent open: `fi_close` on a
/// parent with live children returns `-FI_EBUSY`.
#[derive(Default)]
pub(crate) struct RefCount(pub(crate) AtomicUsize);

impl RefCount {
    pub(crate) fn get(&self) {
        self.0.fetch_add(1, Ordering::AcqRel);
    }
    pub(crate) fn put(&self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
    pub(crate) fn busy(&self) -> bool {
        self.0.load(Ordering::Acquire) != 0
    }
}

pub(crate) fn rc(r: Result<(), Error>) -> c_int {
    match r {
        Ok(()) => 0,
        Err(e) => e.to_c(),
    }
}

/// Copies `s` into `buf` (NUL-terminated, truncated to `len`).
///
/// # Safety
/// `buf` is NULL or writable for `len` bytes.
pub(crate) unsafe fn put_cstr(buf: *mut c_char, len: usize, s: &str) {
    if buf.is_null() || len == 0 {
        return;
    }
    let n = s.len().min(len - 1);
    // SAFETY: buf holds len >= n + 1 bytes.
    unsafe {
        std::ptr::copy_nonoverlapping(s.as_ptr(), buf as *mut u8, n);
        *buf.add(n) = 0;
    }
}

/// The handle behind `f` if its ops table is `ops` (so a foreign or
/// mismatched fid is refused instead of being cast).
///
/// # Safety
/// `f` is NULL or points to a readable `struct fid`.
pub(crate) unsafe fn ours<'a, T>(f: *const fid, ops: &'static fi_ops) -> Option<&'a T> {
    if f.is_null() {
        return None;
    }
    // SAFETY: f points to a fid (caller).
    let o = unsafe { (*f).ops } as *const fi_ops;
    if !std::ptr::eq(o, ops) {
        return None;
    }
    // SAFETY: only our handles carry this ops table, and they start with
    // the fid.
    Some(unsafe { &*(f as *const T) })
}

enosys_fn!(pub(crate) enosys_bind(*mut fid, *mut fid, u64) -> c_int);
enosys_fn!(pub(crate) enosys_control(*mut fid, c_int, *mut c_void) -> c_int);
enosys_fn!(pub(crate) enosys_ops_open(*mut fid, *const c_char, u64, *mut *mut c_void, *mut c_void) -> c_int);
enosys_fn!(pub(crate) enosys_ops_set(*mut fid, *const c_char, u64, *mut c_void, *mut c_void) -> c_int);

pub(crate) fn ssz_n(r: Result<usize, Error>) -> isize {
    match r {
        Ok(n) => n as isize,
        Err(e) => e.to_c() as isize,
    }
}

/// `FI_GETWAIT` (`arg`: `int *`, the fd) and `FI_GETWAITOBJ` (`arg`:
/// `enum fi_wait_obj *`) for a CQ or counter whose wait fd is `fd`.
/// Objects without an fd answer `-FI_ENODATA` to `FI_GETWAIT`.
///
/// # Safety
/// `arg` NULL or pointing to the type `cmd` names.
pub(crate) unsafe fn wait_control(fd: Option<i32>, cmd: c_int, arg: *mut c_void) -> c_int {
    if cmd != FI_GETWAIT && cmd != FI_GETWAITOBJ {
        return -FI_ENOSYS;
    }
    if arg.is_null() {
        return -FI_EINVAL;
    }
    let Some(fd) = fd else { return if cmd == FI_GETWAIT { -FI_ENODATA } else { -FI_ENOSYS } };
    if cmd == FI_GETWAIT {
        // SAFETY: FI_GETWAIT on an FI_WAIT_FD object takes an int *.
        unsafe { *(arg as *mut c_int) = fd };
    } else {
        // SAFETY: FI_GETWAITOBJ takes an enum fi_wait_obj * (a C int).
        unsafe { *(arg as *mut u32) = FI_WAIT_FD };
    }
    0
}

pub(crate) unsafe extern "C" fn obj_tostr(f: *const fid, buf: *mut c_char, len: usize) -> c_int {
    guard!(-FI_EOTHER, {
        null_check!(f, buf);
        // SAFETY: f is a fid.
        let class = unsafe { (*f).fclass };
        // SAFETY: buf holds len bytes.
        unsafe { put_cstr(buf, len, &format!("fid class {class}")) };
        0
    })
}
