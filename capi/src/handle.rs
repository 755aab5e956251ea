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

/// A handle type of ours: a `#[repr(C)]` struct whose first member is the
/// C handle the application sees (which itself starts with `struct fid`),
/// tied to the one `fi_ops` table that every handle of the type carries and
/// no other object does. [`Handle::from_fid`] is the only way a trampoline
/// turns the pointer it was called with into a handle.
///
/// # Safety
/// An implementor is `#[repr(C)]` with its `struct fid` at offset 0, and
/// every fid whose `ops` is `Self::fi_ops()` is the first member of a live
/// `Self` (the table is used by no other type and by no freed handle the
/// application may still name, which the application's contract rules out).
pub(crate) unsafe trait Handle: Sized {
    /// The table in `fid.ops` of every handle of this type.
    fn fi_ops() -> &'static fi_ops;

    /// The handle behind `f`, if `f` is one of this type: its ops table is
    /// compared first, so a foreign fid, or one of another class or of
    /// another handle type, is refused instead of being cast.
    ///
    /// # Safety
    /// `f` is NULL or points to a readable `struct fid` (what an ops-table
    /// slot of libfabric is called with).
    #[inline(always)]
    unsafe fn from_fid<'a, P>(f: *const P) -> Option<&'a Self> {
        let f = f as *const fid;
        if f.is_null() {
            return None;
        }
        // SAFETY: f points to a readable fid (caller).
        let ops = unsafe { (*f).ops } as *const fi_ops;
        if !std::ptr::eq(ops, Self::fi_ops()) {
            return None;
        }
        // SAFETY: only handles of this type carry this table (the trait's
        // contract), and they start with the fid.
        Some(unsafe { &*(f as *const Self) })
    }

    /// The `fi_ops` pointer a new handle of this type is published with.
    fn fi_ops_ptr() -> *mut fi_ops {
        Self::fi_ops() as *const fi_ops as *mut fi_ops
    }

    /// Publishes `h`: the pointer the application gets.
    fn into_raw(h: Box<Self>) -> *mut Self {
        Box::into_raw(h)
    }

    /// Takes back a handle for `fi_close`.
    ///
    /// # Safety
    /// `h` came from [`Handle::from_fid`] on a handle made by
    /// [`Handle::into_raw`], and is not used after this call (the
    /// application closes a handle once).
    unsafe fn from_raw(h: &Self) -> Box<Self> {
        // SAFETY: made by Box::into_raw (caller); given back once.
        unsafe { Box::from_raw(h as *const Self as *mut Self) }
    }
}

/// `fi_close` and the other `fi_ops` slots a handle type does not support:
/// `-FI_EINVAL` for a fid that is not one of `H`, else `-FI_ENOSYS`.
///
/// # Safety
/// `f` is NULL or a readable fid.
pub(crate) unsafe extern "C" fn enosys_bind<H: Handle>(f: *mut fid, _b: *mut fid, _flags: u64) -> c_int {
    // SAFETY: checked conversion (caller: a fid).
    unsupported(unsafe { H::from_fid(f) }.is_some())
}
/// As [`enosys_bind`].
///
/// # Safety
/// As [`enosys_bind`].
pub(crate) unsafe extern "C" fn enosys_control<H: Handle>(f: *mut fid, _cmd: c_int, _arg: *mut c_void) -> c_int {
    // SAFETY: checked conversion (caller: a fid).
    unsupported(unsafe { H::from_fid(f) }.is_some())
}
/// As [`enosys_bind`].
///
/// # Safety
/// As [`enosys_bind`].
pub(crate) unsafe extern "C" fn enosys_ops_open<H: Handle>(f: *mut fid, _n: *const c_char, _fl: u64, _ops: *mut *mut c_void, _ctx: *mut c_void) -> c_int {
    // SAFETY: checked conversion (caller: a fid).
    unsupported(unsafe { H::from_fid(f) }.is_some())
}
/// As [`enosys_bind`].
///
/// # Safety
/// As [`enosys_bind`].
pub(crate) unsafe extern "C" fn enosys_ops_set<H: Handle>(f: *mut fid, _n: *const c_char, _fl: u64, _ops: *mut c_void, _ctx: *mut c_void) -> c_int {
    // SAFETY: checked conversion (caller: a fid).
    unsupported(unsafe { H::from_fid(f) }.is_some())
}

/// What an unsupported slot answers: `-FI_ENOSYS` for one of our handles,
/// `-FI_EINVAL` for anything else.
#[inline]
pub(crate) fn unsupported(ours: bool) -> c_int {
    if ours {
        -FI_ENOSYS
    } else {
        -FI_EINVAL
    }
}

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

/// `fi_tostr` of a handle without a name of its own: its class.
///
/// # Safety
/// `f` NULL or a readable fid; `buf` writable for `len` bytes.
pub(crate) unsafe extern "C" fn obj_tostr<H: Handle>(f: *const fid, buf: *mut c_char, len: usize) -> c_int {
    guard!(-FI_EOTHER, {
        null_check!(buf);
        // SAFETY: checked conversion (caller: a fid).
        if unsafe { H::from_fid(f) }.is_none() {
            return -FI_EINVAL;
        }
        // SAFETY: f is one of our handles, a fid.
        let class = unsafe { (*f).fclass };
        // SAFETY: buf holds len bytes.
        unsafe { put_cstr(buf, len, &format!("fid class {class}")) };
        0
    })
}
