//! The event-queue handle (`fid_eq`), opened on a fabric.

use crate::handle::{enosys_bind, enosys_control, enosys_ops_open, enosys_ops_set, obj_tostr, ssz_n as ssz, Handle, RefCount};
use libc::{c_char, c_int, c_void};
use rfabric_core::abi::*;
use rfabric_core::objects::cq::ErrDataLoc;
use rfabric_core::objects::eq::Eq;
use rfabric_core::objects::wait::Locked;
use std::sync::Arc;

#[repr(C)]
pub(crate) struct EqHandle {
    fid: fid_eq,
    /// Shared with the providers' endpoints bound to it (they queue CM
    /// events from their own threads).
    eq: Arc<Locked<Eq>>,
    /// The fabric's count of children.
    parent: *const RefCount,
    api_version: u32,
}

unsafe extern "C" fn eq_close(f: *mut fid) -> c_int {
    guard!(-FI_EOTHER, {
        // SAFETY: checked against our ops table.
        let Some(h) = (unsafe { EqHandle::from_fid(f) }) else { return -FI_EINVAL };
        // SAFETY: the fabric outlives its EQs (its count).
        unsafe { (*h.parent).put() };
        // SAFETY: created by Box::into_raw in eq_open; closed once.
        drop(unsafe { EqHandle::from_raw(h) });
        0
    })
}

impl EqHandle {
    pub(crate) fn shared(&self) -> Arc<Locked<Eq>> {
        self.eq.clone()
    }
}

// SAFETY: #[repr(C)] with the fid first (in fid_eq); EQ_FI_OPS is used by
// this handle type only.
unsafe impl Handle for EqHandle {
    fn fi_ops() -> &'static fi_ops {
        &EQ_FI_OPS
    }
}

static EQ_FI_OPS: fi_ops = fi_ops {
    size: std::mem::size_of::<fi_ops>(),
    close: Some(eq_close),
    bind: Some(enosys_bind::<EqHandle>),
    control: Some(enosys_control::<EqHandle>),
    ops_open: Some(enosys_ops_open::<EqHandle>),
    tostr: Some(obj_tostr::<EqHandle>),
    ops_set: Some(enosys_ops_set::<EqHandle>),
};

/// # Safety
/// `buf` NULL or writable for `len` bytes.
unsafe fn eq_buf<'a>(buf: *mut c_void, len: usize) -> &'a mut [u8] {
    if buf.is_null() || len == 0 {
        &mut []
    } else {
        // SAFETY: caller.
        unsafe { std::slice::from_raw_parts_mut(buf as *mut u8, len) }
    }
}

unsafe extern "C" fn eq_read(e: *mut fid_eq, event: *mut u32, buf: *mut c_void, len: usize, flags: u64) -> isize {
    guard!(-(FI_EOTHER as isize), {
        null_check_ssize!(event);
        // SAFETY: checked against our ops table.
        let Some(h) = (unsafe { EqHandle::from_fid(e) }) else { return -(FI_EINVAL as isize) };
        // SAFETY: buf holds len bytes.
        let b = unsafe { eq_buf(buf, len) };
        h.eq.progress();
        match h.eq.lock().read(b, flags) {
            Ok((ev, n)) => {
                // SAFETY: event non-NULL.
                unsafe { *event = ev };
                n as isize
            }
            Err(err) => err.to_c() as isize,
        }
    })
}

unsafe extern "C" fn eq_sread(e: *mut fid_eq, event: *mut u32, buf: *mut c_void, len: usize, timeout: c_int, flags: u64) -> isize {
    guard!(-(FI_EOTHER as isize), {
        null_check_ssize!(event);
        // SAFETY: checked against our ops table.
        let Some(h) = (unsafe { EqHandle::from_fid(e) }) else { return -(FI_EINVAL as isize) };
        // SAFETY: buf holds len bytes.
        let b = unsafe { eq_buf(buf, len) };
        match h.eq.sread(b, timeout, flags, &mut || {
            h.eq.progress();
        }) {
            Ok((ev, n)) => {
                // SAFETY: event non-NULL.
                unsafe { *event = ev };
                n as isize
            }
            Err(err) => err.to_c() as isize,
        }
    })
}

unsafe extern "C" fn eq_readerr(e: *mut fid_eq, out: *mut fi_eq_err_entry, flags: u64) -> isize {
    guard!(-(FI_EOTHER as isize), {
        null_check_ssize!(out);
        // SAFETY: checked against our ops table.
        let Some(h) = (unsafe { EqHandle::from_fid(e) }) else { return -(FI_EINVAL as isize) };
        // err_data_size exists from API 1.5 on; older entries end before it.
        let has_size = h.api_version >= fi_version(1, 5);
        // SAFETY: out non-NULL; fields read and written one by one.
        let (ud, us) = unsafe {
            (
                std::ptr::addr_of!((*out).err_data).read(),
                if has_size { std::ptr::addr_of!((*out).err_data_size).read() } else { 0 },
            )
        };
        let user = if ud.is_null() || us == 0 {
            None
        } else {
            // SAFETY: err_data holds err_data_size bytes.
            Some(unsafe { std::slice::from_raw_parts_mut(ud as *mut u8, us) })
        };
        let mut q = h.eq.lock();
        match q.readerr(user, h.api_version, flags) {
            Ok(info) => {
                let ed = if info.err_data == ErrDataLoc::Provider { q.last_err_data().as_ptr() as *mut c_void } else { ud };
                // SAFETY: out non-NULL; err_data_size only where it exists.
                unsafe {
                    std::ptr::addr_of_mut!((*out).fid).write(info.fid as fid_t);
                    std::ptr::addr_of_mut!((*out).context).write(info.context as *mut c_void);
                    std::ptr::addr_of_mut!((*out).data).write(info.data);
                    std::ptr::addr_of_mut!((*out).err).write(info.err);
                    std::ptr::addr_of_mut!((*out).prov_errno).write(info.prov_errno);
                    std::ptr::addr_of_mut!((*out).err_data).write(ed);
                    if has_size {
                        std::ptr::addr_of_mut!((*out).err_data_size).write(info.err_data_size);
                    }
                }
                if has_size {
                    std::mem::size_of::<fi_eq_err_entry>() as isize
                } else {
                    (std::mem::size_of::<fi_eq_err_entry>() - 8) as isize
                }
            }
            Err(err) => err.to_c() as isize,
        }
    })
}

unsafe extern "C" fn eq_write(e: *mut fid_eq, event: u32, buf: *const c_void, len: usize, flags: u64) -> isize {
    guard!(-(FI_EOTHER as isize), {
        // SAFETY: checked against our ops table.
        let Some(h) = (unsafe { EqHandle::from_fid(e) }) else { return -(FI_EINVAL as isize) };
        if flags & !FI_PEEK != 0 {
            return -(FI_EBADFLAGS as isize);
        }
        if buf.is_null() && len > 0 {
            return -(FI_EINVAL as isize);
        }
        // SAFETY: buf holds len bytes.
        let b = unsafe { eq_buf(buf as *mut c_void, len) };
        ssz(h.eq.lock().write(event, b))
    })
}

unsafe extern "C" fn eq_strerror(e: *mut fid_eq, prov_errno: c_int, _d: *const c_void, buf: *mut c_char, len: usize) -> *const c_char {
    guard!(std::ptr::null(), {
        // SAFETY: checked conversion.
        if unsafe { EqHandle::from_fid(e) }.is_none() {
            return std::ptr::null();
        }
        // SAFETY: buf holds len bytes (caller).
        unsafe { crate::tostr::strerror_into(prov_errno, buf, len) }
    })
}

static EQ_OPS: fi_ops_eq = fi_ops_eq {
    size: std::mem::size_of::<fi_ops_eq>(),
    read: Some(eq_read),
    readerr: Some(eq_readerr),
    write: Some(eq_write),
    sread: Some(eq_sread),
    strerror: Some(eq_strerror),
};

/// `fi_eq_open` on a fabric of a built-in provider.
///
/// # Safety
/// `out` writable; `parent` (the fabric's count of children) outlives the
/// EQ.
pub(crate) unsafe fn eq_open(parent: &RefCount, api_version: u32, a: &fi_eq_attr, out: *mut *mut fid_eq, context: *mut c_void) -> c_int {
    if !a.wait_set.is_null() {
        return -FI_ENOSYS;
    }
    let mut eq = match Eq::new(a.size, a.wait_obj as u32) {
        Ok(q) => q,
        Err(e) => return e.to_c(),
    };
    eq.set_info_hooks(crate::pep::INFO_HOOKS);
    parent.get();
    let h = Box::new(EqHandle {
        fid: fid_eq {
            fid: fid { fclass: FI_CLASS_EQ, context, ops: EqHandle::fi_ops_ptr() },
            ops: &EQ_OPS as *const fi_ops_eq as *mut fi_ops_eq,
        },
        eq: Arc::new(Locked::new(eq)),
        parent,
        api_version,
    });
    // SAFETY: caller's out pointer.
    unsafe { *out = Box::into_raw(h) as *mut fid_eq };
    0
}

