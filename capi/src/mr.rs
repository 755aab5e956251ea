//! The memory-region handle (`fid_mr`); the `fi_ops_mr` slots that make
//! one are the domain's. What a registration means for data operations (its descriptor,
//! `FI_MR_LOCAL`, a dma-buf's CPU mapping) is the provider's: capi passes
//! the request on and hands out the descriptor the provider made.

use crate::handle::{enosys_bind, enosys_ops_open, enosys_ops_set, obj_tostr, Handle, RefCount};
use libc::{c_int, c_void};
use rfabric_core::abi::*;
use rfabric_core::objects::local_mr::LocalMr;
use rfabric_core::provider::{Domain, MrReg, MrReq};

#[repr(C)]
pub(crate) struct MrHandle {
    pub(crate) fid: fid_mr,
    /// The provider's domain, which releases the registration.
    domain: *const dyn Domain,
    /// The domain's count of children.
    parent: *const RefCount,
    /// The local side of the registration (the provider's), whose address
    /// is `mem_desc`.
    local: Option<Box<LocalMr>>,
}

unsafe extern "C" fn mr_close(f: *mut fid) -> c_int {
    guard!(-FI_EOTHER, {
        // SAFETY: checked against our ops table.
        let Some(h) = (unsafe { MrHandle::from_fid(f) }) else { return -FI_EINVAL };
        // SAFETY: the domain outlives its MRs (its count).
        let (d, parent) = unsafe { (&*h.domain, &*h.parent) };
        if let Err(e) = d.mr_close(h.fid.key) {
            // As upstream: the MR stays open (its handle valid, the domain
            // busy), so the application sees the failure and may retry.
            rfabric_core::fi_warn!("core", FI_LOG_MR, "fi_close: MR with key {:#x} not released by the provider: {}", h.fid.key, e);
            return e.to_c();
        }
        parent.put();
        // SAFETY: made by publish; closed once.
        drop(unsafe { MrHandle::from_raw(h) });
        0
    })
}

/// `fi_control` on a memory region: `FI_GET_MR_XPU_DESC` (what
/// `fi_mr_get_xpu_desc` sends). The raw descriptor is the region's 8-byte
/// key; anything else is `-FI_ENOSYS`.
unsafe extern "C" fn mr_control(f: *mut fid, cmd: c_int, arg: *mut c_void) -> c_int {
    guard!(-FI_EOTHER, {
        // SAFETY: checked against the MR ops table.
        let Some(mr) = (unsafe { MrHandle::from_fid(f) }) else { return -FI_EINVAL };
        if cmd != FI_GET_MR_XPU_DESC {
            return -FI_ENOSYS;
        }
        null_check!(arg);
        // SAFETY: arg is the caller's struct fi_mr_xpu_desc.
        let d = unsafe { (arg as *const fi_mr_xpu_desc).read() };
        let len = d.len;
        null_check!(len);
        if d.flags & !FI_XPU != 0 || d.flags & FI_XPU == 0 {
            return -FI_EINVAL;
        }
        // SAFETY: NULL or the application's handle, checked before use.
        match unsafe { crate::xpu::ctx_of(d.ctx) } {
            Ok(Some(_)) => {}
            _ => return -FI_EINVAL,
        }
        // SAFETY: d.len non-NULL (checked above).
        let have = unsafe { *d.len };
        // SAFETY: as above.
        unsafe { *d.len = rfabric_core::xpu::MR_DESC_SIZE };
        if have < rfabric_core::xpu::MR_DESC_SIZE || d.buf.is_null() {
            return -FI_ETOOSMALL;
        }
        // SAFETY: buf holds at least 8 bytes (the caller's *len).
        unsafe { (d.buf as *mut u64).write_unaligned(mr.fid.key) };
        0
    })
}

// SAFETY: #[repr(C)] with the fid first (in fid_mr); MR_FI_OPS is used by
// this handle type only.
unsafe impl Handle for MrHandle {
    fn fi_ops() -> &'static fi_ops {
        &MR_FI_OPS
    }
}

pub(crate) static MR_FI_OPS: fi_ops = fi_ops {
    size: std::mem::size_of::<fi_ops>(),
    close: Some(mr_close),
    bind: Some(enosys_bind::<MrHandle>),
    control: Some(mr_control),
    ops_open: Some(enosys_ops_open::<MrHandle>),
    tostr: Some(obj_tostr::<MrHandle>),
    ops_set: Some(enosys_ops_set::<MrHandle>),
};

/// Registers `req` with the provider's domain `d` and hands the region to
/// the application.
///
/// # Safety
/// `out` is writable; `d` and `parent` (the domain's count of children)
/// outlive the MR.
pub(crate) unsafe fn publish(d: &(dyn Domain + 'static), parent: &RefCount, req: &MrReq, context: *mut c_void, out: *mut *mut fid_mr) -> c_int {
    match d.mr_reg(req) {
        Ok(MrReg { key, local }) => {
            parent.get();
            let h = Box::new(MrHandle {
                fid: fid_mr {
                    fid: fid { fclass: FI_CLASS_MR, context, ops: MrHandle::fi_ops_ptr() },
                    mem_desc: local.as_ref().map_or(std::ptr::null_mut(), |l| l.desc()),
                    key,
                },
                domain: d,
                parent,
                local,
            });
            // SAFETY: out writable (caller).
            unsafe { *out = MrHandle::into_raw(h) as *mut fid_mr };
            0
        }
        Err(e) => e.to_c(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rfabric_core::error::Error;
    use rfabric_core::provider::Domain;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A domain whose MR close fails until `fail` runs out.
    struct FailingMr {
        fail: AtomicUsize,
    }

    impl Domain for FailingMr {
        fn mr_reg(&self, _req: &MrReq) -> Result<MrReg, Error> {
            Ok(MrReg { key: 0x77, local: None })
        }
        fn mr_close(&self, _key: u64) -> Result<(), Error> {
            if self.fail.load(Ordering::Relaxed) > 0 {
                self.fail.fetch_sub(1, Ordering::Relaxed);
                return Err(Error(FI_ENOKEY));
            }
            Ok(())
        }
    }

    /// fi_close of an MR reports the provider's failure and keeps the MR
    /// (and the domain's count of it); a later close that succeeds frees it.
    #[test]
    fn mr_close_reports_provider_failure() {
        let d = FailingMr { fail: AtomicUsize::new(1) };
        let children = RefCount::default();
        let buf = [0u8; 64];
        let req = MrReq { addr: buf.as_ptr() as usize, len: buf.len(), access: FI_REMOTE_READ, ..MrReq::default() };
        let mut mr: *mut fid_mr = std::ptr::null_mut();
        // SAFETY: `d` outlives the MR; `mr` is writable.
        assert_eq!(unsafe { publish(&d, &children, &req, std::ptr::null_mut(), &mut mr) }, 0);
        assert!(!mr.is_null() && children.busy());
        // SAFETY: `mr` is the handle just published (still open after a failed close).
        unsafe {
            assert_eq!(mr_close(mr as *mut fid), -FI_ENOKEY);
            assert!(children.busy(), "the MR is still open");
            assert_eq!((*mr).key, 0x77, "its handle is still valid");
            assert_eq!(mr_close(mr as *mut fid), 0);
        }
        assert!(!children.busy());
    }
}

