//! The fabric handle (`fid_fabric`) of a built-in provider. Like every
//! handle it is a `#[repr(C)]` struct whose first member is the C handle
//! the application sees, followed by the Rust object. Ops-table trampolines
//! turn the pointer they receive back into the handle with
//! `Handle::from_fid` (its ops table compared, then a cast): one indirect
//! call, no lookup, no lock.

use crate::cntr::CntrHandle;
use crate::cq::CqHandle;
use crate::handle::{enosys_bind, enosys_control, enosys_ops_open, enosys_ops_set, put_cstr, rc, Handle, RefCount};
use libc::{c_char, c_int, c_void};
use rfabric_core::abi::*;
use rfabric_core::info::FabricAttr;
use rfabric_core::provider::Fabric;

#[repr(C)]
pub(crate) struct FabricHandle {
    pub(crate) fid: fid_fabric,
    pub(crate) obj: Box<dyn Fabric>,
    pub(crate) children: RefCount,
    pub(crate) prov_name: String,
}

// SAFETY: #[repr(C)] with the fid first (in fid_fabric); FABRIC_FI_OPS is
// used by fabric handles only.
unsafe impl Handle for FabricHandle {
    fn fi_ops() -> &'static fi_ops {
        &FABRIC_FI_OPS
    }
}

unsafe extern "C" fn fabric_close(f: *mut fid) -> c_int {
    guard!(-FI_EOTHER, {
        // SAFETY: checked conversion.
        let Some(h) = (unsafe { FabricHandle::from_fid(f) }) else { return -FI_EINVAL };
        if h.children.busy() {
            return -FI_EBUSY;
        }
        // SAFETY: made by publish_fabric; closed once (the application's contract).
        drop(unsafe { FabricHandle::from_raw(h) });
        0
    })
}

unsafe extern "C" fn fabric_tostr(f: *const fid, buf: *mut c_char, len: usize) -> c_int {
    guard!(-FI_EOTHER, {
        null_check!(buf);
        // SAFETY: checked conversion.
        let Some(h) = (unsafe { FabricHandle::from_fid(f) }) else { return -FI_EINVAL };
        // SAFETY: buf has `len` bytes.
        unsafe { put_cstr(buf, len, &format!("fabric {}", h.prov_name)) };
        0
    })
}

unsafe extern "C" fn fabric_domain(f: *mut fid_fabric, i: *mut fi_info, d: *mut *mut fid_domain, c: *mut c_void) -> c_int {
    guard!(-FI_EOTHER, {
        // SAFETY: checked conversion.
        let Some(fh) = (unsafe { FabricHandle::from_fid(f) }) else { return -FI_EINVAL };
        null_check!(i, d);
        // SAFETY: i is the caller's fi_info.
        let info = match unsafe { crate::info::info_from_c(i) } {
            Ok(x) => x,
            Err(e) => return e.to_c(),
        };
        // SAFETY: the threading model in `info` is the application's own
        // promise for the objects of this domain (fi_domain(3)): the
        // library passes it on, and only this entry point opens domains of
        // built-in providers.
        match unsafe { fh.obj.domain(&info) } {
            // SAFETY: d non-NULL; fh outlives the domain (refcount).
            Ok(obj) => unsafe { crate::domain::publish_domain(obj, &fh.children, fh.fid.api_version, c, d) },
            Err(e) => e.to_c(),
        }
    })
}
unsafe extern "C" fn fabric_domain2(f: *mut fid_fabric, i: *mut fi_info, d: *mut *mut fid_domain, fl: u64, c: *mut c_void) -> c_int {
    // SAFETY: checked conversion.
    if unsafe { FabricHandle::from_fid(f) }.is_none() {
        return -FI_EINVAL;
    }
    if fl != 0 {
        return -FI_EBADFLAGS;
    }
    // SAFETY: same contract as fi_domain.
    unsafe { fabric_domain(f, i, d, c) }
}
/// `fi_passive_ep`.
unsafe extern "C" fn fabric_passive_ep(f: *mut fid_fabric, i: *mut fi_info, p: *mut *mut fid_pep, c: *mut c_void) -> c_int {
    guard!(-FI_EOTHER, {
        // SAFETY: checked conversion.
        let Some(fh) = (unsafe { FabricHandle::from_fid(f) }) else { return -FI_EINVAL };
        null_check!(i, p);
        // SAFETY: i is the caller's fi_info.
        let info = match unsafe { crate::info::info_from_c(i) } {
            Ok(x) => x,
            Err(e) => return e.to_c(),
        };
        if info.ep_type() != FI_EP_MSG {
            rfabric_core::fi_warn!("core", FI_LOG_EP_CTRL, "fi_passive_ep: the info's endpoint type is {}, not FI_EP_MSG", info.ep_type());
            return -FI_EINVAL;
        }
        match fh.obj.passive_ep(&info) {
            // SAFETY: p non-NULL; the fabric outlives the pep (its count).
            Ok(obj) => unsafe { crate::pep::publish_pep(obj, &fh.children, c, p) },
            Err(e) => e.to_c(),
        }
    })
}
unsafe extern "C" fn fabric_eq_open(f: *mut fid_fabric, a: *mut fi_eq_attr, e: *mut *mut fid_eq, c: *mut c_void) -> c_int {
    guard!(-FI_EOTHER, {
        // SAFETY: checked conversion.
        let Some(fh) = (unsafe { FabricHandle::from_fid(f) }) else { return -FI_EINVAL };
        null_check!(a, e);
        // SAFETY: a and e non-NULL caller pointers.
        unsafe { crate::eq::eq_open(&fh.children, fh.fid.api_version, &*a, e, c) }
    })
}
enosys_fn!(fabric_wait_open<FabricHandle>(*mut fid_fabric, *mut fi_wait_attr, *mut *mut fid_wait) -> c_int);
/// `fi_trywait`: every fid must be one of our CQs or counters; the first
/// that is not ready to sleep answers (`-FI_EAGAIN`).
unsafe extern "C" fn fabric_trywait(f: *mut fid_fabric, fids: *mut *mut fid, n: c_int) -> c_int {
    guard!(-FI_EOTHER, {
        // SAFETY: checked conversion.
        if unsafe { FabricHandle::from_fid(f) }.is_none() {
            return -FI_EINVAL;
        }
        if n < 0 || (n > 0 && fids.is_null()) {
            return -FI_EINVAL;
        }
        for i in 0..n as usize {
            // SAFETY: fids holds n entries.
            let one = unsafe { *fids.add(i) };
            // SAFETY: one is NULL or a fid; trywait_one checks its ops table.
            match unsafe { trywait_one(one) } {
                Some(0) => {}
                Some(r) => return r,
                None => return -FI_EINVAL,
            }
        }
        0
    })
}

static FABRIC_FI_OPS: fi_ops = fi_ops {
    size: std::mem::size_of::<fi_ops>(),
    close: Some(fabric_close),
    bind: Some(enosys_bind::<FabricHandle>),
    control: Some(enosys_control::<FabricHandle>),
    ops_open: Some(enosys_ops_open::<FabricHandle>),
    tostr: Some(fabric_tostr),
    ops_set: Some(enosys_ops_set::<FabricHandle>),
};

static FABRIC_OPS: fi_ops_fabric = fi_ops_fabric {
    size: std::mem::size_of::<fi_ops_fabric>(),
    domain: Some(fabric_domain),
    passive_ep: Some(fabric_passive_ep),
    eq_open: Some(fabric_eq_open),
    wait_open: Some(fabric_wait_open),
    trywait: Some(fabric_trywait),
    domain2: Some(fabric_domain2),
};

/// Hand a provider's fabric object to the application as a `fid_fabric`.
///
/// # Safety
/// `out` is a valid pointer to write the handle to.
pub(crate) unsafe fn publish_fabric(obj: Box<dyn Fabric>, attr: &FabricAttr, context: *mut c_void, out: *mut *mut fid_fabric) -> c_int {
    let h = Box::new(FabricHandle {
        fid: fid_fabric {
            fid: fid {
                fclass: FI_CLASS_FABRIC as usize,
                context,
                ops: FabricHandle::fi_ops_ptr(),
            },
            ops: &FABRIC_OPS as *const fi_ops_fabric as *mut fi_ops_fabric,
            api_version: attr.api_version,
        },
        obj,
        children: RefCount::default(),
        prov_name: attr.prov_name.clone().unwrap_or_default(),
    });
    // SAFETY: caller's out pointer.
    unsafe { *out = FabricHandle::into_raw(h) as *mut fid_fabric };
    0
}

/// `fi_trywait` for one of our CQs or counters; `None` for other fids.
///
/// # Safety
/// `f` NULL or a fid.
unsafe fn trywait_one(f: *mut fid) -> Option<c_int> {
    // SAFETY: caller; each check compares the ops table first.
    if let Some(h) = unsafe { CqHandle::from_fid(f) } {
        return Some(rc(h.obj.trywait()));
    }
    // SAFETY: as above.
    if let Some(h) = unsafe { CntrHandle::from_fid(f) } {
        return Some(rc(h.obj.trywait()));
    }
    None
}
