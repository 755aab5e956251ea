//! Connection management at the C edge: the passive-endpoint handle
//! (`fid_pep`, opened by `fi_passive_ep` on a fabric), the
//! connection-request handle that an `FI_CONNREQ` event's `fi_info` carries
//! in `handle`, and the hooks that turn a provider's CM event into the
//! `struct fi_eq_cm_entry` an application reads.
//!
//! A connection request (`ConnReqHandle`) is created when its `FI_CONNREQ`
//! event is first read. The application passes it back in the info given
//! to `fi_endpoint` (the endpoint then owns it and frees it at its
//! `fi_close`) or to `fi_reject` (which frees it). The `fi_info` itself is
//! the application's, freed by `fi_freeinfo`, which leaves `handle` alone.

use crate::handle::{enosys_ops_open, enosys_ops_set, obj_tostr, rc, Handle, RefCount};
use libc::{c_int, c_void};
use rfabric_core::abi::*;
use rfabric_core::error::{Error, EINVAL};
use rfabric_core::info::Info;
use rfabric_core::objects::eq::{ConnReq, InfoHooks};
use rfabric_core::provider::{EqBinding, PassiveEndpoint};
use std::sync::Mutex;

// ---- connection requests

pub(crate) enum ReqState {
    /// Not answered yet.
    Pending(ConnReq),
    /// Given to an endpoint by `fi_endpoint`; that endpoint frees the handle.
    Owned,
    /// `fi_endpoint` failed after taking the request (the provider dropped
    /// it, which refused the peer); `fi_reject` or `fi_close` frees the
    /// handle.
    Dropped,
}

/// `fid_t handle` of an `FI_CONNREQ` event's info (`FI_CLASS_CONNREQ`).
#[repr(C)]
pub(crate) struct ConnReqHandle {
    fid: fid,
    state: Mutex<ReqState>,
}

// SAFETY: #[repr(C)] with the fid first; CONNREQ_FI_OPS is used by this
// handle type only.
unsafe impl Handle for ConnReqHandle {
    fn fi_ops() -> &'static fi_ops {
        &CONNREQ_FI_OPS
    }
}

impl ConnReqHandle {
    fn state(&self) -> std::sync::MutexGuard<'_, ReqState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
    /// Takes the pending request for `fi_endpoint`, marking the handle as
    /// owned by the endpoint about to be made (`Dropped` if that fails,
    /// see [`ConnReqHandle::failed`]).
    pub(crate) fn take_for_endpoint(&self) -> Option<ConnReq> {
        let mut s = self.state();
        match std::mem::replace(&mut *s, ReqState::Owned) {
            ReqState::Pending(r) => Some(r),
            other => {
                *s = other;
                None
            }
        }
    }
    pub(crate) fn failed(&self) {
        *self.state() = ReqState::Dropped;
    }
}

unsafe extern "C" fn connreq_close(f: *mut fid) -> c_int {
    guard!(-FI_EOTHER, {
        // SAFETY: checked conversion.
        let Some(h) = (unsafe { ConnReqHandle::from_fid(f) }) else { return -FI_EINVAL };
        if matches!(*h.state(), ReqState::Owned) {
            rfabric_core::fi_warn!("core", FI_LOG_EP_CTRL, "fi_close: connection request belongs to an endpoint");
            return -FI_EBUSY;
        }
        // SAFETY: made by new_connreq; freed once (Pending/Dropped are freed
        // only here, by fi_reject or with an unread event).
        drop(unsafe { ConnReqHandle::from_raw(h) });
        0
    })
}

enosys_fn!(connreq_bind<ConnReqHandle>(*mut fid, *mut fid, u64) -> c_int);
enosys_fn!(connreq_control<ConnReqHandle>(*mut fid, c_int, *mut c_void) -> c_int);

static CONNREQ_FI_OPS: fi_ops = fi_ops {
    size: std::mem::size_of::<fi_ops>(),
    close: Some(connreq_close),
    bind: Some(connreq_bind),
    control: Some(connreq_control),
    ops_open: Some(enosys_ops_open::<ConnReqHandle>),
    tostr: Some(obj_tostr::<ConnReqHandle>),
    ops_set: Some(enosys_ops_set::<ConnReqHandle>),
};

/// Frees a connection-request handle that an endpoint owned (at that
/// endpoint's `fi_close`).
///
/// # Safety
/// `h` came from `Box::into_raw` here, is in the `Owned` state, and is
/// freed once.
pub(crate) unsafe fn free_owned(h: *mut ConnReqHandle) {
    // SAFETY: caller.
    drop(unsafe { Box::from_raw(h) });
}

/// The info of a provider's `FI_CONNREQ`, in C, with its request as
/// `handle`. 0 when allocation fails.
fn info_to_c_hook(info: &Info, req: Option<ConnReq>) -> usize {
    let ci = crate::info::info_to_c(info);
    if ci.is_null() {
        return 0;
    }
    if let Some(req) = req {
        let h = Box::new(ConnReqHandle {
            fid: fid { fclass: FI_CLASS_CONNREQ, context: std::ptr::null_mut(), ops: ConnReqHandle::fi_ops_ptr() },
            state: Mutex::new(ReqState::Pending(req)),
        });
        // SAFETY: ci is the fresh, non-NULL info built above.
        unsafe { (*ci).handle = Box::into_raw(h) as fid_t };
    }
    ci as usize
}

/// Frees what [`info_to_c_hook`] made for an event nobody read.
fn free_hook(p: usize) {
    let ci = p as *mut fi_info;
    // SAFETY: p came from info_to_c_hook and was never handed out.
    unsafe {
        let h = (*ci).handle;
        if let Some(r) = ConnReqHandle::from_fid(h) {
            drop(ConnReqHandle::from_raw(r));
        }
        (*ci).handle = std::ptr::null_mut();
        crate::info::freeinfo_current(ci);
    }
}

pub(crate) const INFO_HOOKS: InfoHooks = InfoHooks { to_c: info_to_c_hook, free: free_hook };

/// `param`/`paramlen` of fi_connect, fi_accept and fi_reject.
///
/// # Safety
/// `p` NULL or readable for `len` bytes.
pub(crate) unsafe fn cm_param<'a>(p: *const c_void, len: usize, call: &str) -> Result<&'a [u8], Error> {
    if len == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        rfabric_core::fi_warn!("core", FI_LOG_EP_CTRL, "{}: param is NULL with paramlen {}", call, len);
        return Err(EINVAL);
    }
    // SAFETY: caller.
    Ok(unsafe { std::slice::from_raw_parts(p as *const u8, len) })
}

/// `fi_getname` / `fi_getpeer`: the provider's answer copied to the
/// caller's buffer; `-FI_ETOOSMALL` (with the needed length) when it does
/// not fit.
///
/// # Safety
/// `addrlen` non-NULL; `addr` NULL or writable for `*addrlen` bytes.
pub(crate) unsafe fn addr_out(get: impl FnOnce(&mut [u8]) -> Result<usize, Error>, addr: *mut c_void, addrlen: *mut usize) -> c_int {
    let mut tmp = [0u8; 1024];
    let n = match get(&mut tmp) {
        Ok(n) if n <= tmp.len() => n,
        Ok(_) => return -FI_EOTHER,
        Err(e) => return e.to_c(),
    };
    // SAFETY: addrlen non-NULL (caller).
    let cap = unsafe { *addrlen };
    // SAFETY: as above.
    unsafe { *addrlen = n };
    if addr.is_null() || cap < n {
        return -FI_ETOOSMALL;
    }
    // SAFETY: addr holds cap >= n bytes.
    unsafe { std::ptr::copy_nonoverlapping(tmp.as_ptr(), addr as *mut u8, n) };
    0
}

// ---- the passive endpoint

#[repr(C)]
pub(crate) struct PepHandle {
    fid: fid_pep,
    obj: Box<dyn PassiveEndpoint>,
    /// The fabric's count of children.
    parent: *const RefCount,
}

// SAFETY: #[repr(C)] with the fid first (in fid_pep); PEP_FI_OPS is used by
// this handle type only.
unsafe impl Handle for PepHandle {
    fn fi_ops() -> &'static fi_ops {
        &PEP_FI_OPS
    }
}

/// The bound address of the passive endpoint `handle` names, if it is one
/// of ours: `fi_endpoint` with an info whose `handle` is a passive endpoint
/// opens the active endpoint on that address (fi_endpoint(3)).
///
/// # Safety
/// `handle` NULL or a readable fid.
pub(crate) unsafe fn pep_name(handle: usize) -> Option<Vec<u8>> {
    // SAFETY: caller; checked against the passive endpoint's ops table.
    let h = unsafe { PepHandle::from_fid(handle as *mut fid) }?;
    let mut buf = [0u8; 128];
    let n = h.obj.getname(&mut buf).ok()?;
    (n <= buf.len()).then(|| buf[..n].to_vec())
}

unsafe extern "C" fn pep_close(f: *mut fid) -> c_int {
    guard!(-FI_EOTHER, {
        // SAFETY: checked conversion.
        let Some(h) = (unsafe { PepHandle::from_fid(f) }) else { return -FI_EINVAL };
        let _ = h.obj.close();
        // SAFETY: the fabric outlives its passive endpoints (its count).
        unsafe { (*h.parent).put() };
        // SAFETY: made by fabric_passive_ep; closed once.
        drop(unsafe { PepHandle::from_raw(h) });
        0
    })
}

unsafe extern "C" fn pep_bind(f: *mut fid, b: *mut fid, flags: u64) -> c_int {
    guard!(-FI_EOTHER, {
        // SAFETY: checked conversion.
        let Some(h) = (unsafe { PepHandle::from_fid(f) }) else { return -FI_EINVAL };
        null_check!(b);
        // SAFETY: checked against the EQ ops table.
        let Some(eq) = (unsafe { crate::eq::EqHandle::from_fid(b) }) else {
            rfabric_core::fi_warn!("core", FI_LOG_EP_CTRL, "fi_pep_bind: a passive endpoint binds only an EQ of this library");
            return -FI_EINVAL;
        };
        let binding = EqBinding { eq: eq.shared(), fid: f as usize, context: h.fid.fid.context as usize };
        rc(h.obj.bind_eq(&binding, flags))
    })
}

enosys_fn!(pep_control<PepHandle>(*mut fid, c_int, *mut c_void) -> c_int);

static PEP_FI_OPS: fi_ops = fi_ops {
    size: std::mem::size_of::<fi_ops>(),
    close: Some(pep_close),
    bind: Some(pep_bind),
    control: Some(pep_control),
    ops_open: Some(enosys_ops_open::<PepHandle>),
    tostr: Some(obj_tostr::<PepHandle>),
    ops_set: Some(enosys_ops_set::<PepHandle>),
};

unsafe extern "C" fn pep_getopt(f: fid_t, level: c_int, name: c_int, val: *mut c_void, len: *mut usize) -> c_int {
    guard!(-FI_EOTHER, {
        // SAFETY: checked conversion.
        let Some(h) = (unsafe { PepHandle::from_fid(f) }) else { return -FI_EINVAL };
        null_check!(val, len);
        // SAFETY: val holds *len bytes.
        let buf = unsafe { std::slice::from_raw_parts_mut(val as *mut u8, *len) };
        match h.obj.getopt(level, name, buf) {
            Ok(n) => {
                // SAFETY: len non-NULL.
                unsafe { *len = n };
                0
            }
            Err(e) => e.to_c(),
        }
    })
}

unsafe extern "C" fn pep_setopt(f: fid_t, level: c_int, name: c_int, val: *const c_void, len: usize) -> c_int {
    guard!(-FI_EOTHER, {
        // SAFETY: checked conversion.
        let Some(h) = (unsafe { PepHandle::from_fid(f) }) else { return -FI_EINVAL };
        null_check!(val);
        // SAFETY: val holds len bytes.
        rc(h.obj.setopt(level, name, unsafe { std::slice::from_raw_parts(val as *const u8, len) }))
    })
}

enosys_fn!(pep_cancel<PepHandle>(fid_t, *mut c_void) -> isize);
enosys_fn!(pep_tx_ctx<PepHandle>(*mut fid_ep, c_int, *mut fi_tx_attr, *mut *mut fid_ep, *mut c_void) -> c_int);
enosys_fn!(pep_rx_ctx<PepHandle>(*mut fid_ep, c_int, *mut fi_rx_attr, *mut *mut fid_ep, *mut c_void) -> c_int);
enosys_fn!(pep_rx_size_left<PepHandle>(*mut fid_ep) -> isize);
enosys_fn!(pep_tx_size_left<PepHandle>(*mut fid_ep) -> isize);
enosys_fn!(pep_export_xpu<PepHandle>(*mut fid_ep, u64, *mut fid_xpu_ep) -> c_int);

static PEP_EP_OPS: fi_ops_ep = fi_ops_ep {
    size: std::mem::size_of::<fi_ops_ep>(),
    cancel: Some(pep_cancel),
    getopt: Some(pep_getopt),
    setopt: Some(pep_setopt),
    tx_ctx: Some(pep_tx_ctx),
    rx_ctx: Some(pep_rx_ctx),
    rx_size_left: Some(pep_rx_size_left),
    tx_size_left: Some(pep_tx_size_left),
    export_xpu: Some(pep_export_xpu),
};

unsafe extern "C" fn pep_getname(f: fid_t, addr: *mut c_void, addrlen: *mut usize) -> c_int {
    guard!(-FI_EOTHER, {
        // SAFETY: checked conversion.
        let Some(h) = (unsafe { PepHandle::from_fid(f) }) else { return -FI_EINVAL };
        null_check!(addrlen);
        // SAFETY: addrlen non-NULL, addr holds *addrlen bytes (caller).
        unsafe { addr_out(|b| h.obj.getname(b), addr, addrlen) }
    })
}

unsafe extern "C" fn pep_setname(f: fid_t, addr: *mut c_void, addrlen: usize) -> c_int {
    guard!(-FI_EOTHER, {
        // SAFETY: checked conversion.
        let Some(h) = (unsafe { PepHandle::from_fid(f) }) else { return -FI_EINVAL };
        null_check!(addr);
        // SAFETY: addr holds addrlen bytes.
        rc(h.obj.setname(unsafe { std::slice::from_raw_parts(addr as *const u8, addrlen) }))
    })
}

unsafe extern "C" fn pep_listen(p: *mut fid_pep) -> c_int {
    guard!(-FI_EOTHER, {
        // SAFETY: checked conversion.
        let Some(h) = (unsafe { PepHandle::from_fid(p) }) else { return -FI_EINVAL };
        rc(h.obj.listen())
    })
}

unsafe extern "C" fn pep_reject(p: *mut fid_pep, handle: fid_t, param: *const c_void, len: usize) -> c_int {
    guard!(-FI_EOTHER, {
        // SAFETY: checked conversion.
        let Some(h) = (unsafe { PepHandle::from_fid(p) }) else { return -FI_EINVAL };
        // SAFETY: param holds len bytes (caller).
        let data = match unsafe { cm_param(param, len, "fi_reject") } {
            Ok(d) => d,
            Err(e) => return e.to_c(),
        };
        // SAFETY: handle NULL or a fid; checked against our table.
        let Some(r) = (unsafe { ConnReqHandle::from_fid(handle) }) else {
            rfabric_core::fi_warn!("core", FI_LOG_EP_CTRL, "fi_reject: handle is not a connection request of this library");
            return -FI_EINVAL;
        };
        let st = std::mem::replace(&mut *r.state(), ReqState::Dropped);
        let ret = match st {
            ReqState::Pending(req) => rc(h.obj.reject(req, data)),
            ReqState::Dropped => 0,
            ReqState::Owned => {
                *r.state() = ReqState::Owned;
                rfabric_core::fi_warn!("core", FI_LOG_EP_CTRL, "fi_reject: the request was given to an endpoint by fi_endpoint");
                return -FI_EINVAL;
            }
        };
        // SAFETY: made by info_to_c_hook, not owned by an endpoint: freed
        // here, once (the application's contract: a request is answered once).
        drop(unsafe { ConnReqHandle::from_raw(r) });
        ret
    })
}

enosys_fn!(pep_getpeer<PepHandle>(*mut fid_ep, *mut c_void, *mut usize) -> c_int);
enosys_fn!(pep_connect<PepHandle>(*mut fid_ep, *const c_void, *const c_void, usize) -> c_int);
enosys_fn!(pep_accept<PepHandle>(*mut fid_ep, *const c_void, usize) -> c_int);
enosys_fn!(pep_shutdown<PepHandle>(*mut fid_ep, u64) -> c_int);
enosys_fn!(pep_join<PepHandle>(*mut fid_ep, *const c_void, u64, *mut *mut fid_mc, *mut c_void) -> c_int);

static PEP_CM_OPS: fi_ops_cm = fi_ops_cm {
    size: std::mem::size_of::<fi_ops_cm>(),
    setname: Some(pep_setname),
    getname: Some(pep_getname),
    getpeer: Some(pep_getpeer),
    connect: Some(pep_connect),
    listen: Some(pep_listen),
    accept: Some(pep_accept),
    reject: Some(pep_reject),
    shutdown: Some(pep_shutdown),
    join: Some(pep_join),
};

/// Hand a provider's passive endpoint to the application as a `fid_pep`.
///
/// # Safety
/// `out` writable; `parent` (the fabric's count of children) outlives the
/// passive endpoint.
pub(crate) unsafe fn publish_pep(obj: Box<dyn PassiveEndpoint>, parent: &RefCount, context: *mut c_void, out: *mut *mut fid_pep) -> c_int {
    parent.get();
    let h = Box::new(PepHandle {
        fid: fid_pep {
            fid: fid { fclass: FI_CLASS_PEP, context, ops: PepHandle::fi_ops_ptr() },
            ops: &PEP_EP_OPS as *const fi_ops_ep as *mut fi_ops_ep,
            cm: &PEP_CM_OPS as *const fi_ops_cm as *mut fi_ops_cm,
        },
        obj,
        parent,
    });
    // SAFETY: caller's out pointer.
    unsafe { *out = PepHandle::into_raw(h) as *mut fid_pep };
    0
}
