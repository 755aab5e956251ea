//! The completion-queue handle (`fid_cq`).

use crate::handle::{enosys_bind, enosys_ops_open, enosys_ops_set, obj_tostr, rc, ssz_n as ssz, wait_control, Handle, RefCount};
use crate::xpu::XpuCq;
use libc::{c_char, c_int, c_void};
use rfabric_core::abi::*;
use rfabric_core::objects::cq::{encode_err, ErrDataLoc, ERR_ENTRY_SIZE};
use rfabric_core::provider::CompletionQueue;
use std::sync::Arc;

#[repr(C)]
pub(crate) struct CqHandle {
    pub(crate) fid: fid_cq,
    pub(crate) obj: Arc<dyn CompletionQueue>,
    /// The domain's count of children.
    parent: *const RefCount,
    /// Endpoints bound to this CQ.
    pub(crate) refs: RefCount,
    pub(crate) api_version: u32,
    /// The XPU state of a CQ opened with an XPU context.
    pub(crate) xpu: Option<Arc<XpuCq>>,
}

unsafe extern "C" fn cq_close(f: *mut fid) -> c_int {
    guard!(-FI_EOTHER, {
        // SAFETY: checked against our ops table.
        let Some(h) = (unsafe { CqHandle::from_fid(f) }) else { return -FI_EINVAL };
        if h.refs.busy() {
            return -FI_EBUSY;
        }
        // SAFETY: the domain outlives its CQs (its count).
        unsafe { (*h.parent).put() };
        // SAFETY: created by Box::into_raw in domain_cq_open; closed once.
        drop(unsafe { CqHandle::from_raw(h) });
        0
    })
}

unsafe extern "C" fn cq_control(f: *mut fid, cmd: c_int, arg: *mut c_void) -> c_int {
    guard!(-FI_EOTHER, {
        // SAFETY: checked against our ops table.
        let Some(h) = (unsafe { CqHandle::from_fid(f) }) else { return -FI_EINVAL };
        // SAFETY: caller's arg for cmd.
        unsafe { wait_control(h.obj.wait_fd(), cmd, arg) }
    })
}

// SAFETY: #[repr(C)] with the fid first (in fid_cq); CQ_FI_OPS is used by
// this handle type only.
unsafe impl Handle for CqHandle {
    fn fi_ops() -> &'static fi_ops {
        &CQ_FI_OPS
    }
}

pub(crate) static CQ_FI_OPS: fi_ops = fi_ops {
    size: std::mem::size_of::<fi_ops>(),
    close: Some(cq_close),
    bind: Some(enosys_bind::<CqHandle>),
    control: Some(cq_control),
    ops_open: Some(enosys_ops_open::<CqHandle>),
    tostr: Some(obj_tostr::<CqHandle>),
    ops_set: Some(enosys_ops_set::<CqHandle>),
};

/// # Safety
/// `buf` NULL or writable for `count` entries; `src` NULL or writable for
/// `count` values.
unsafe fn cq_read_common(cq: *mut fid_cq, buf: *mut c_void, count: usize, src: *mut fi_addr_t, blocking: Option<c_int>) -> isize {
    // SAFETY: checked against our ops table.
    let Some(h) = (unsafe { CqHandle::from_fid(cq) }) else { return -(FI_EINVAL as isize) };
    if count == 0 {
        return 0;
    }
    if buf.is_null() {
        return -(FI_EINVAL as isize);
    }
    let Some(bytes) = count.checked_mul(h.obj.entry_size()) else { return -(FI_EINVAL as isize) };
    // SAFETY: the caller's buffer holds count entries of the CQ's format.
    let out = unsafe { std::slice::from_raw_parts_mut(buf as *mut u8, bytes) };
    let srcs = if src.is_null() {
        None
    } else {
        // SAFETY: src holds count values.
        Some(unsafe { std::slice::from_raw_parts_mut(src, count) })
    };
    match blocking {
        None => ssz(h.obj.read(out, count, srcs)),
        Some(t) => ssz(h.obj.sread(out, count, srcs, t)),
    }
}

unsafe extern "C" fn cq_read(cq: *mut fid_cq, buf: *mut c_void, count: usize) -> isize {
    // SAFETY: the caller's buffers (fi_cq_read contract).
    guard!(-(FI_EOTHER as isize), unsafe { cq_read_common(cq, buf, count, std::ptr::null_mut(), None) })
}
unsafe extern "C" fn cq_readfrom(cq: *mut fid_cq, buf: *mut c_void, count: usize, src: *mut fi_addr_t) -> isize {
    // SAFETY: the caller's buffers.
    guard!(-(FI_EOTHER as isize), unsafe { cq_read_common(cq, buf, count, src, None) })
}
unsafe extern "C" fn cq_sread(cq: *mut fid_cq, buf: *mut c_void, count: usize, _cond: *const c_void, timeout: c_int) -> isize {
    // SAFETY: the caller's buffers.
    guard!(-(FI_EOTHER as isize), unsafe { cq_read_common(cq, buf, count, std::ptr::null_mut(), Some(timeout)) })
}
unsafe extern "C" fn cq_sreadfrom(cq: *mut fid_cq, buf: *mut c_void, count: usize, src: *mut fi_addr_t, _cond: *const c_void, timeout: c_int) -> isize {
    // SAFETY: the caller's buffers.
    guard!(-(FI_EOTHER as isize), unsafe { cq_read_common(cq, buf, count, src, Some(timeout)) })
}

/// Size of `struct fi_cq_err_entry` for a fabric opened with `api`:
/// `src_addr` came with 2.0, `err_data_size` with 1.5.
pub(crate) fn err_entry_size(api: u32) -> usize {
    if api >= fi_version(2, 0) {
        ERR_ENTRY_SIZE
    } else if api >= fi_version(1, 5) {
        ERR_ENTRY_SIZE - 8
    } else {
        ERR_ENTRY_SIZE - 16
    }
}

unsafe extern "C" fn cq_readerr(cq: *mut fid_cq, e: *mut fi_cq_err_entry, flags: u64) -> isize {
    guard!(-(FI_EOTHER as isize), {
        null_check_ssize!(e);
        // SAFETY: checked against our ops table.
        let Some(h) = (unsafe { CqHandle::from_fid(cq) }) else { return -(FI_EINVAL as isize) };
        if flags != 0 {
            return -(FI_EBADFLAGS as isize);
        }
        // SAFETY: e non-NULL, the caller's entry; err_data_size exists
        // from API 1.5 on.
        let (ud, us) = unsafe {
            let ud = std::ptr::addr_of!((*e).err_data).read();
            let us = if h.api_version >= fi_version(1, 5) { std::ptr::addr_of!((*e).err_data_size).read() } else { 0 };
            (ud, us)
        };
        let user = if ud.is_null() || us == 0 {
            None
        } else {
            // SAFETY: err_data holds err_data_size bytes (fi_cq(3)).
            Some(unsafe { std::slice::from_raw_parts_mut(ud as *mut u8, us) })
        };
        match h.obj.readerr(user, h.api_version) {
            Ok((info, p)) => {
                let ptr = if info.err_data == ErrDataLoc::Provider { p } else { ud as usize };
                let mut full = [0u8; ERR_ENTRY_SIZE];
                if let Err(err) = encode_err(&info, ptr, &mut full) {
                    return err.to_c() as isize;
                }
                let n = err_entry_size(h.api_version);
                // SAFETY: the caller's fi_cq_err_entry has the size of the
                // API version it opened the fabric with (n bytes).
                unsafe { std::ptr::copy_nonoverlapping(full.as_ptr(), e as *mut u8, n) };
                1
            }
            Err(err) => err.to_c() as isize,
        }
    })
}

unsafe extern "C" fn cq_signal(cq: *mut fid_cq) -> c_int {
    guard!(-FI_EOTHER, {
        // SAFETY: checked against our ops table.
        let Some(h) = (unsafe { CqHandle::from_fid(cq) }) else { return -FI_EINVAL };
        rc(h.obj.signal())
    })
}

unsafe extern "C" fn cq_strerror(cq: *mut fid_cq, prov_errno: c_int, _d: *const c_void, buf: *mut c_char, len: usize) -> *const c_char {
    guard!(std::ptr::null(), {
        // SAFETY: checked conversion.
        if unsafe { CqHandle::from_fid(cq) }.is_none() {
            return std::ptr::null();
        }
        // SAFETY: buf holds len bytes (caller).
        unsafe { crate::tostr::strerror_into(prov_errno, buf, len) }
    })
}

/// `fi_cq_export_xpu`.
unsafe extern "C" fn cq_export_xpu(cq: *mut fid_cq, flags: u64, out: *mut fid_xpu_cq) -> c_int {
    guard!(-FI_EOTHER, {
        // SAFETY: checked conversion.
        let Some(h) = (unsafe { CqHandle::from_fid(cq) }) else { return -FI_EINVAL };
        null_check!(out);
        let Some(x) = h.xpu.as_ref() else { return crate::xpu::not_xpu("fi_cq_export_xpu", flags) };
        match x.export(flags) {
            Ok(fid) => {
                // SAFETY: out non-NULL, a fid_xpu_cq.
                unsafe { out.write(fid_xpu_cq { fid }) };
                0
            }
            Err(e) => e,
        }
    })
}

static CQ_OPS: fi_ops_cq = fi_ops_cq {
    size: std::mem::size_of::<fi_ops_cq>(),
    read: Some(cq_read),
    readfrom: Some(cq_readfrom),
    readerr: Some(cq_readerr),
    sread: Some(cq_sread),
    sreadfrom: Some(cq_sreadfrom),
    signal: Some(cq_signal),
    strerror: Some(cq_strerror),
    export_xpu: Some(cq_export_xpu),
};

/// Hand a CQ the domain's provider opened to the application.
///
/// # Safety
/// `out` is writable; `parent` (the domain's count of children) outlives
/// the CQ.
pub(crate) unsafe fn publish(obj: Arc<dyn CompletionQueue>, parent: &RefCount, api_version: u32, xpu: Option<Arc<XpuCq>>, context: *mut c_void, out: *mut *mut fid_cq) -> c_int {
    parent.get();
    let h = Box::new(CqHandle {
        fid: fid_cq {
            fid: fid { fclass: FI_CLASS_CQ, context, ops: CqHandle::fi_ops_ptr() },
            ops: &CQ_OPS as *const fi_ops_cq as *mut fi_ops_cq,
        },
        obj,
        parent,
        refs: RefCount::default(),
        api_version,
        xpu,
    });
    // SAFETY: out writable (caller).
    unsafe { *out = CqHandle::into_raw(h) as *mut fid_cq };
    0
}
