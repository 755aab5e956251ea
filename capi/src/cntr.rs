//! The counter handle (`fid_cntr`).

use crate::handle::{enosys_bind, enosys_ops_open, enosys_ops_set, obj_tostr, rc, wait_control, Handle, RefCount};
use crate::xpu::XpuCntr;
use libc::{c_int, c_void};
use rfabric_core::abi::*;
use rfabric_core::provider::Counter;
use std::sync::Arc;

unsafe extern "C" fn cntr_control(f: *mut fid, cmd: c_int, arg: *mut c_void) -> c_int {
    guard!(-FI_EOTHER, {
        // SAFETY: checked against our ops table.
        let Some(h) = (unsafe { CntrHandle::from_fid(f) }) else { return -FI_EINVAL };
        // SAFETY: caller's arg for cmd.
        unsafe { wait_control(h.obj.wait_fd(), cmd, arg) }
    })
}

#[repr(C)]
pub(crate) struct CntrHandle {
    pub(crate) fid: fid_cntr,
    pub(crate) obj: Arc<dyn Counter>,
    /// The domain's count of children.
    parent: *const RefCount,
    /// Endpoints bound to this counter.
    pub(crate) refs: RefCount,
    /// The XPU state of a counter opened with an XPU context.
    pub(crate) xpu: Option<Arc<XpuCntr>>,
}

unsafe extern "C" fn cntr_close(f: *mut fid) -> c_int {
    guard!(-FI_EOTHER, {
        // SAFETY: checked against our ops table.
        let Some(h) = (unsafe { CntrHandle::from_fid(f) }) else { return -FI_EINVAL };
        if h.refs.busy() {
            return -FI_EBUSY;
        }
        // SAFETY: the domain outlives its counters (its count).
        unsafe { (*h.parent).put() };
        // SAFETY: created by Box::into_raw in domain_cntr_open; closed once.
        drop(unsafe { CntrHandle::from_raw(h) });
        0
    })
}

// SAFETY: #[repr(C)] with the fid first (in fid_cntr); CNTR_FI_OPS is used by
// this handle type only.
unsafe impl Handle for CntrHandle {
    fn fi_ops() -> &'static fi_ops {
        &CNTR_FI_OPS
    }
}

pub(crate) static CNTR_FI_OPS: fi_ops = fi_ops {
    size: std::mem::size_of::<fi_ops>(),
    close: Some(cntr_close),
    bind: Some(enosys_bind::<CntrHandle>),
    control: Some(cntr_control),
    ops_open: Some(enosys_ops_open::<CntrHandle>),
    tostr: Some(obj_tostr::<CntrHandle>),
    ops_set: Some(enosys_ops_set::<CntrHandle>),
};

/// # Safety
/// `c` NULL or a fid.
unsafe fn cntr<'a>(c: *mut fid_cntr) -> Option<&'a CntrHandle> {
    // SAFETY: caller.
    unsafe { CntrHandle::from_fid(c) }
}

unsafe extern "C" fn cntr_read(c: *mut fid_cntr) -> u64 {
    // SAFETY: checked against our ops table; a bad fid reads as 0.
    guard!(0, unsafe { cntr(c) }.map_or(0, |h| h.obj.read()))
}
unsafe extern "C" fn cntr_readerr(c: *mut fid_cntr) -> u64 {
    // SAFETY: as cntr_read.
    guard!(0, unsafe { cntr(c) }.map_or(0, |h| h.obj.readerr()))
}
unsafe extern "C" fn cntr_add(c: *mut fid_cntr, v: u64) -> c_int {
    // SAFETY: checked against our ops table.
    guard!(-FI_EOTHER, unsafe { cntr(c) }.map_or(-FI_EINVAL, |h| rc(h.obj.add(v))))
}
unsafe extern "C" fn cntr_set(c: *mut fid_cntr, v: u64) -> c_int {
    // SAFETY: checked against our ops table.
    guard!(-FI_EOTHER, unsafe { cntr(c) }.map_or(-FI_EINVAL, |h| rc(h.obj.set(v))))
}
unsafe extern "C" fn cntr_adderr(c: *mut fid_cntr, v: u64) -> c_int {
    // SAFETY: checked against our ops table.
    guard!(-FI_EOTHER, unsafe { cntr(c) }.map_or(-FI_EINVAL, |h| rc(h.obj.adderr(v))))
}
unsafe extern "C" fn cntr_seterr(c: *mut fid_cntr, v: u64) -> c_int {
    // SAFETY: checked against our ops table.
    guard!(-FI_EOTHER, unsafe { cntr(c) }.map_or(-FI_EINVAL, |h| rc(h.obj.seterr(v))))
}
unsafe extern "C" fn cntr_wait(c: *mut fid_cntr, threshold: u64, timeout: c_int) -> c_int {
    // SAFETY: checked against our ops table.
    guard!(-FI_EOTHER, unsafe { cntr(c) }.map_or(-FI_EINVAL, |h| rc(h.obj.wait(threshold, timeout))))
}
/// `fi_cntr_export_xpu`.
unsafe extern "C" fn cntr_export_xpu(c: *mut fid_cntr, flags: u64, out: *mut fid_xpu_cntr) -> c_int {
    guard!(-FI_EOTHER, {
        // SAFETY: checked conversion.
        let Some(h) = (unsafe { cntr(c) }) else { return -FI_EINVAL };
        null_check!(out);
        let Some(x) = h.xpu.as_ref() else { return crate::xpu::not_xpu("fi_cntr_export_xpu", flags) };
        match x.export(flags) {
            Ok(fid) => {
                // SAFETY: out non-NULL, a fid_xpu_cntr.
                unsafe { out.write(fid_xpu_cntr { fid }) };
                0
            }
            Err(e) => e,
        }
    })
}

static CNTR_OPS: fi_ops_cntr = fi_ops_cntr {
    size: std::mem::size_of::<fi_ops_cntr>(),
    read: Some(cntr_read),
    readerr: Some(cntr_readerr),
    add: Some(cntr_add),
    set: Some(cntr_set),
    wait: Some(cntr_wait),
    adderr: Some(cntr_adderr),
    seterr: Some(cntr_seterr),
    export_xpu: Some(cntr_export_xpu),
};

/// Hand a counter the domain's provider opened to the application.
///
/// # Safety
/// `out` is writable; `parent` (the domain's count of children) outlives
/// the counter.
pub(crate) unsafe fn publish(obj: Arc<dyn Counter>, parent: &RefCount, xpu: Option<Arc<XpuCntr>>, context: *mut c_void, out: *mut *mut fid_cntr) -> c_int {
    parent.get();
    let h = Box::new(CntrHandle {
        fid: fid_cntr {
            fid: fid { fclass: FI_CLASS_CNTR, context, ops: CntrHandle::fi_ops_ptr() },
            ops: &CNTR_OPS as *const fi_ops_cntr as *mut fi_ops_cntr,
        },
        obj,
        parent,
        refs: RefCount::default(),
        xpu,
    });
    // SAFETY: out writable (caller).
    unsafe { *out = CntrHandle::into_raw(h) as *mut fid_cntr };
    0
}
