//! The endpoint handle (`fid_ep`) of built-in providers: every slot of
//! `fi_ops_ep`, `fi_ops_cm`, `fi_ops_msg`, `fi_ops_tagged`, `fi_ops_rma`,
//! `fi_ops_atomic` (in `endpoint/rma.rs`) and `fi_ops_collective` is filled; what the provider's
//! `Endpoint` does not implement answers `-FI_ENOSYS`.
//!
//! Data path of `fi_send`: the application's inline wrapper calls
//! `ep->msg->send`, i.e. [`ep_send`], which builds a `TxOp` on the stack
//! (one `Iov`) and makes one dynamic call into the provider's
//! `Endpoint::send`. No allocation, no lookup.

use crate::av::AvHandle;
use crate::cntr::CntrHandle;
use crate::cq::CqHandle;
use crate::handle::{put_cstr, rc, Handle, RefCount};
use libc::{c_char, c_int, c_void, iovec};
use rfabric_core::abi::*;
use rfabric_core::error::Error;
use rfabric_core::provider::{Bind, Descs, Endpoint, Iov, RxOp, TxOp};
use std::sync::Mutex;

#[repr(C)]
pub(crate) struct EpHandle {
    fid: fid_ep,
    pub(crate) obj: Box<dyn Endpoint>,
    /// The domain's count of children.
    parent: *const RefCount,
    /// Reference counts of the CQs/AVs this endpoint is bound to.
    bound: Mutex<Vec<*const RefCount>>,
    /// Endpoints bound to this one (a shared receive context): it does
    /// not close while there are any.
    refs: RefCount,
    /// `tx_attr->op_flags` / `rx_attr->op_flags` of the fi_info the endpoint
    /// was opened with: the flags of calls that take no flags argument.
    tx_op_flags: u64,
    rx_op_flags: u64,
    /// `tx_attr->iov_limit` / `rx_attr->iov_limit` of that fi_info (at most
    /// [`MAX_IOV`]): a vector operation with more iovs is `-FI_EINVAL`.
    tx_iov_limit: usize,
    rx_iov_limit: usize,
    /// The XPU state of an endpoint opened with an XPU context.
    xpu: Option<crate::xpu::XpuEp>,
    /// What connection management needs of the info it was opened with.
    cm: CmInit,
    /// `tx_attr->inject_size` of that fi_info: the `FI_OPT_INJECT_*_SIZE`
    /// options of a provider that does not answer them itself.
    inject_size: usize,
}

/// What `publish_ep` takes besides the provider's object and the limits.
pub(crate) struct EpInit {
    pub(crate) xpu: Option<crate::xpu::XpuEp>,
    pub(crate) connreq: *mut crate::pep::ConnReqHandle,
    pub(crate) addr_format: u32,
    pub(crate) inject_size: usize,
    /// `FI_CLASS_EP`, or `FI_CLASS_SRX_CTX` for `fi_srx_context`.
    pub(crate) class: usize,
}

/// What an endpoint's connection management keeps of its `fi_info`.
pub(crate) struct CmInit {
    /// The connection request (`info->handle` of an `FI_CONNREQ`) the
    /// endpoint was opened for, freed at its close; NULL if none.
    pub(crate) connreq: *mut crate::pep::ConnReqHandle,
    /// `info->addr_format`: how long the address of `fi_connect` is.
    pub(crate) addr_format: u32,
}

/// Marks a call without a flags argument (fi_send, fi_trecv, ...): its flags
/// are the endpoint's default op_flags. Bit 62 is no FI_* flag.
const OP_DEFAULTS: u64 = 1 << 62;

/// Most iovs a vector operation may carry.
const MAX_IOV: usize = 8;

fn ssz(r: Result<(), Error>) -> isize {
    match r {
        Ok(()) => 0,
        Err(e) => e.to_c() as isize,
    }
}

const EINVAL_S: isize = -(FI_EINVAL as isize);
const EOTHER_S: isize = -(FI_EOTHER as isize);

/// # Safety
/// `f` NULL or a fid.
unsafe fn ep<'a, P>(f: *const P) -> Option<&'a EpHandle> {
    // SAFETY: caller.
    unsafe { EpHandle::from_fid(f) }
}

/// Copies the caller's iovec array into `out`.
///
/// # Safety
/// `iov` holds `count` entries (or count is 0).
unsafe fn iovs(iov: *const iovec, count: usize, out: &mut [Iov; MAX_IOV]) -> Result<usize, Error> {
    if count > MAX_IOV || (count > 0 && iov.is_null()) {
        return Err(rfabric_core::error::EINVAL);
    }
    for (i, o) in out.iter_mut().enumerate().take(count) {
        // SAFETY: i < count.
        let v = unsafe { *iov.add(i) };
        if v.iov_base.is_null() && v.iov_len > 0 {
            return Err(rfabric_core::error::EINVAL);
        }
        *o = Iov { base: v.iov_base as usize, len: v.iov_len };
    }
    Ok(count)
}

unsafe extern "C" fn ep_close(f: *mut fid) -> c_int {
    guard!(-FI_EOTHER, {
        // SAFETY: checked against our ops table.
        let Some(h) = (unsafe { ep(f) }) else { return -FI_EINVAL };
        if h.refs.busy() {
            rfabric_core::fi_warn!("core", FI_LOG_EP_CTRL, "fi_close: endpoints are still bound to this shared receive context");
            return -FI_EBUSY;
        }
        if let Some(x) = h.xpu.as_ref() {
            x.closing();
        }
        let _ = h.obj.close();
        for r in h.bound.lock().unwrap_or_else(|e| e.into_inner()).drain(..) {
            // SAFETY: a bound CQ/AV cannot close while we hold its count.
            unsafe { (*r).put() };
        }
        // SAFETY: the domain outlives its endpoints.
        unsafe { (*h.parent).put() };
        if !h.cm.connreq.is_null() {
            // SAFETY: owned by this endpoint since fi_endpoint; freed once.
            unsafe { crate::pep::free_owned(h.cm.connreq) };
        }
        // SAFETY: created by Box::into_raw in publish_ep; closed once.
        drop(unsafe { EpHandle::from_raw(h) });
        0
    })
}

unsafe extern "C" fn ep_bind(f: *mut fid, b: *mut fid, flags: u64) -> c_int {
    guard!(-FI_EOTHER, {
        null_check!(b);
        // SAFETY: checked against our ops table.
        let Some(h) = (unsafe { ep(f) }) else { return -FI_EINVAL };
        // SAFETY: b non-NULL fid.
        let class = unsafe { (*b).fclass };
        let (r, refs) = if class == FI_CLASS_CQ {
            // SAFETY: checked against the CQ ops table.
            let Some(c) = (unsafe { CqHandle::from_fid(b) }) else { return -FI_EINVAL };
            let r = h.obj.bind(Bind::Cq(&c.obj), flags);
            if let (Ok(()), Some(x)) = (&r, h.xpu.as_ref()) {
                x.bound_cq(&c.obj, c.xpu.as_ref());
            }
            (r, &c.refs as *const RefCount)
        } else if class == FI_CLASS_AV {
            // SAFETY: checked against the AV ops table.
            let Some(a) = (unsafe { AvHandle::from_fid(b) }) else { return -FI_EINVAL };
            (h.obj.bind(Bind::Av(&a.obj), flags), &a.refs as *const RefCount)
        } else if class == FI_CLASS_EQ {
            // SAFETY: checked against the EQ ops table.
            let Some(eq) = (unsafe { crate::eq::EqHandle::from_fid(b) }) else { return -FI_EINVAL };
            let binding = rfabric_core::provider::EqBinding { eq: eq.shared(), fid: f as usize, context: h.fid.fid.context as usize };
            return rc(h.obj.bind(Bind::Eq(&binding), flags));
        } else if class == FI_CLASS_SRX_CTX {
            // SAFETY: checked against our ops table.
            let Some(s) = (unsafe { ep(b) }) else { return -FI_EINVAL };
            if std::ptr::eq(s, h) {
                return -FI_EINVAL;
            }
            (h.obj.bind(Bind::Srx(&*s.obj), flags), &s.refs as *const RefCount)
        } else if class == FI_CLASS_CNTR {
            // SAFETY: checked against the counter ops table.
            let Some(c) = (unsafe { CntrHandle::from_fid(b) }) else { return -FI_EINVAL };
            let r = h.obj.bind(Bind::Cntr(&c.obj), flags);
            if let (Ok(()), Some(x)) = (&r, h.xpu.as_ref()) {
                x.bound_cntr(&c.obj, c.xpu.as_ref());
            }
            (r, &c.refs as *const RefCount)
        } else {
            return -FI_EINVAL;
        };
        if r.is_ok() {
            // SAFETY: refs belongs to a live handle.
            unsafe { (*refs).get() };
            h.bound.lock().unwrap_or_else(|e| e.into_inner()).push(refs);
        }
        rc(r)
    })
}

unsafe extern "C" fn ep_control(f: *mut fid, cmd: c_int, _arg: *mut c_void) -> c_int {
    guard!(-FI_EOTHER, {
        // SAFETY: checked against our ops table.
        let Some(h) = (unsafe { ep(f) }) else { return -FI_EINVAL };
        if cmd == FI_ENABLE {
            let r = h.obj.enable();
            if let (Ok(()), Some(x)) = (&r, h.xpu.as_ref()) {
                x.enabled();
            }
            rc(r)
        } else {
            -FI_ENOSYS
        }
    })
}

unsafe extern "C" fn ep_tostr(f: *const fid, buf: *mut c_char, len: usize) -> c_int {
    guard!(-FI_EOTHER, {
        null_check!(buf);
        // SAFETY: checked conversion.
        if unsafe { ep(f) }.is_none() {
            return -FI_EINVAL;
        }
        // SAFETY: buf holds len bytes.
        unsafe { put_cstr(buf, len, "endpoint") };
        0
    })
}

enosys_fn!(ep_ops_open<EpHandle>(*mut fid, *const c_char, u64, *mut *mut c_void, *mut c_void) -> c_int);
enosys_fn!(ep_ops_set<EpHandle>(*mut fid, *const c_char, u64, *mut c_void, *mut c_void) -> c_int);

// SAFETY: #[repr(C)] with the fid first (in fid_ep); EP_FI_OPS is used by
// this handle type only.
unsafe impl Handle for EpHandle {
    fn fi_ops() -> &'static fi_ops {
        &EP_FI_OPS
    }
}

static EP_FI_OPS: fi_ops = fi_ops {
    size: std::mem::size_of::<fi_ops>(),
    close: Some(ep_close),
    bind: Some(ep_bind),
    control: Some(ep_control),
    ops_open: Some(ep_ops_open),
    tostr: Some(ep_tostr),
    ops_set: Some(ep_ops_set),
};

// ---- fi_ops_ep

unsafe extern "C" fn ep_cancel(f: fid_t, ctx: *mut c_void) -> isize {
    guard!(EOTHER_S, {
        // SAFETY: checked against our ops table.
        let Some(h) = (unsafe { ep(f) }) else { return EINVAL_S };
        ssz(h.obj.cancel(ctx as usize))
    })
}

unsafe extern "C" fn ep_getopt(f: fid_t, level: c_int, name: c_int, val: *mut c_void, len: *mut usize) -> c_int {
    guard!(-FI_EOTHER, {
        null_check!(val, len);
        // SAFETY: checked against our ops table.
        let Some(h) = (unsafe { ep(f) }) else { return -FI_EINVAL };
        // SAFETY: val holds *len bytes.
        let buf = unsafe { std::slice::from_raw_parts_mut(val as *mut u8, *len) };
        let inject = level == FI_OPT_ENDPOINT && matches!(name, FI_OPT_INJECT_MSG_SIZE | FI_OPT_INJECT_TAGGED_SIZE | FI_OPT_INJECT_RMA_SIZE | FI_OPT_INJECT_ATOMIC_SIZE);
        let r = match h.obj.getopt(level, name, buf) {
            // fi_endpoint(3): the inject sizes default to the info's
            // tx_attr->inject_size.
            Err(e) if inject && (e.0 == FI_ENOSYS || e.0 == FI_ENOPROTOOPT) => {
                let v = h.inject_size.to_ne_bytes();
                if buf.len() < v.len() {
                    Err(rfabric_core::error::Error(FI_ETOOSMALL))
                } else {
                    buf[..v.len()].copy_from_slice(&v);
                    Ok(v.len())
                }
            }
            r => r,
        };
        match r {
            Ok(n) => {
                // SAFETY: len non-NULL.
                unsafe { *len = n };
                0
            }
            Err(e) => e.to_c(),
        }
    })
}

unsafe extern "C" fn ep_setopt(f: fid_t, level: c_int, name: c_int, val: *const c_void, len: usize) -> c_int {
    guard!(-FI_EOTHER, {
        null_check!(val);
        // SAFETY: checked against our ops table.
        let Some(h) = (unsafe { ep(f) }) else { return -FI_EINVAL };
        // SAFETY: val holds len bytes.
        let v = unsafe { std::slice::from_raw_parts(val as *const u8, len) };
        rc(h.obj.setopt(level, name, v))
    })
}

enosys_fn!(ep_tx_ctx<EpHandle>(*mut fid_ep, c_int, *mut fi_tx_attr, *mut *mut fid_ep, *mut c_void) -> c_int);
enosys_fn!(ep_rx_ctx<EpHandle>(*mut fid_ep, c_int, *mut fi_rx_attr, *mut *mut fid_ep, *mut c_void) -> c_int);
enosys_fn!(ep_rx_size_left<EpHandle>(*mut fid_ep) -> isize);
enosys_fn!(ep_tx_size_left<EpHandle>(*mut fid_ep) -> isize);
/// `fi_ep_export_xpu`.
unsafe extern "C" fn ep_export_xpu(e: *mut fid_ep, flags: u64, out: *mut fid_xpu_ep) -> c_int {
    guard!(-FI_EOTHER, {
        // SAFETY: checked conversion.
        let Some(h) = (unsafe { ep(e) }) else { return -FI_EINVAL };
        null_check!(out);
        let Some(x) = h.xpu.as_ref() else { return crate::xpu::not_xpu("fi_ep_export_xpu", flags) };
        // SAFETY: the object lives in the handle until fi_close, which
        // stops the proxy (XpuEp::closing) before freeing it.
        match unsafe { x.export(&*h.obj as *const dyn Endpoint, flags) } {
            Ok(fid) => {
                // SAFETY: out non-NULL, a fid_xpu_ep.
                unsafe { out.write(fid_xpu_ep { fid }) };
                0
            }
            Err(err) => err,
        }
    })
}

static EP_OPS: fi_ops_ep = fi_ops_ep {
    size: std::mem::size_of::<fi_ops_ep>(),
    cancel: Some(ep_cancel),
    getopt: Some(ep_getopt),
    setopt: Some(ep_setopt),
    tx_ctx: Some(ep_tx_ctx),
    rx_ctx: Some(ep_rx_ctx),
    rx_size_left: Some(ep_rx_size_left),
    tx_size_left: Some(ep_tx_size_left),
    export_xpu: Some(ep_export_xpu),
};

// ---- fi_ops_cm

unsafe extern "C" fn cm_getname(f: fid_t, addr: *mut c_void, addrlen: *mut usize) -> c_int {
    guard!(-FI_EOTHER, {
        null_check!(addrlen);
        // SAFETY: checked against our ops table.
        let Some(h) = (unsafe { ep(f) }) else { return -FI_EINVAL };
        // SAFETY: addrlen non-NULL; addr holds *addrlen bytes (caller).
        unsafe { crate::pep::addr_out(|b| h.obj.getname(b), addr, addrlen) }
    })
}

unsafe extern "C" fn cm_setname(f: fid_t, addr: *mut c_void, addrlen: usize) -> c_int {
    guard!(-FI_EOTHER, {
        null_check!(addr);
        // SAFETY: checked against our ops table.
        let Some(h) = (unsafe { ep(f) }) else { return -FI_EINVAL };
        // SAFETY: addr holds addrlen bytes.
        rc(h.obj.setname(unsafe { std::slice::from_raw_parts(addr as *const u8, addrlen) }))
    })
}

unsafe extern "C" fn cm_getpeer(e: *mut fid_ep, addr: *mut c_void, addrlen: *mut usize) -> c_int {
    guard!(-FI_EOTHER, {
        // SAFETY: checked against our ops table.
        let Some(h) = (unsafe { ep(e) }) else { return -FI_EINVAL };
        null_check!(addrlen);
        // SAFETY: addrlen non-NULL; addr holds *addrlen bytes (caller).
        unsafe { crate::pep::addr_out(|b| h.obj.getpeer(b), addr, addrlen) }
    })
}

/// `fi_connect`: `addr` in the endpoint's format (its length is the
/// provider's to check; up to 128 bytes, `struct sockaddr_storage`, are
/// read).
unsafe extern "C" fn cm_connect(e: *mut fid_ep, addr: *const c_void, param: *const c_void, len: usize) -> c_int {
    guard!(-FI_EOTHER, {
        // SAFETY: checked against our ops table.
        let Some(h) = (unsafe { ep(e) }) else { return -FI_EINVAL };
        null_check!(addr);
        // SAFETY: param holds len bytes (caller).
        let data = match unsafe { crate::pep::cm_param(param, len, "fi_connect") } {
            Ok(d) => d,
            Err(err) => return err.to_c(),
        };
        // SAFETY: addr is an address of the endpoint's format (caller).
        let Some(n) = (unsafe { addr_len(h.cm.addr_format, addr as *const u8) }) else {
            rfabric_core::fi_warn!("core", FI_LOG_EP_CTRL, "fi_connect: address format {} of the endpoint is not one fi_connect takes", h.cm.addr_format);
            return -FI_EINVAL;
        };
        // SAFETY: addr holds n bytes (its format's length).
        let a = unsafe { std::slice::from_raw_parts(addr as *const u8, n) };
        rc(h.obj.connect(a, data))
    })
}

/// The length of an address of `format` at `a`: fixed for the sockaddr
/// formats (`FI_SOCKADDR` by its family), up to the NUL for `FI_ADDR_STR`
/// (at most 4096 bytes); `None` for formats without a known length.
///
/// # Safety
/// `a` points to an address of `format`.
unsafe fn addr_len(format: u32, a: *const u8) -> Option<usize> {
    match format {
        FI_SOCKADDR_IN => Some(16),
        FI_SOCKADDR_IN6 => Some(28),
        FI_SOCKADDR_IB => Some(48),
        FI_SOCKADDR => {
            // SAFETY: a sockaddr starts with its family (caller).
            let fam = unsafe { (a as *const libc::sa_family_t).read_unaligned() } as i32;
            match fam {
                libc::AF_INET => Some(16),
                libc::AF_INET6 => Some(28),
                libc::AF_IB => Some(48),
                _ => None,
            }
        }
        FI_ADDR_STR => {
            // SAFETY: a NUL-terminated string (caller); at most 4096 bytes read.
            (0..4096).find(|&i| unsafe { *a.add(i) } == 0).map(|n| n + 1)
        }
        _ => None,
    }
}

unsafe extern "C" fn cm_accept(e: *mut fid_ep, param: *const c_void, len: usize) -> c_int {
    guard!(-FI_EOTHER, {
        // SAFETY: checked against our ops table.
        let Some(h) = (unsafe { ep(e) }) else { return -FI_EINVAL };
        // SAFETY: param holds len bytes (caller).
        let data = match unsafe { crate::pep::cm_param(param, len, "fi_accept") } {
            Ok(d) => d,
            Err(err) => return err.to_c(),
        };
        rc(h.obj.accept(data))
    })
}

unsafe extern "C" fn cm_shutdown(e: *mut fid_ep, flags: u64) -> c_int {
    guard!(-FI_EOTHER, {
        // SAFETY: checked against our ops table.
        let Some(h) = (unsafe { ep(e) }) else { return -FI_EINVAL };
        if flags != 0 {
            rfabric_core::fi_warn!("core", FI_LOG_EP_CTRL, "fi_shutdown: flags {:#x} (reserved, must be 0)", flags);
            return -FI_EBADFLAGS;
        }
        rc(h.obj.shutdown(flags))
    })
}

enosys_fn!(cm_listen<EpHandle>(*mut fid_pep) -> c_int);
enosys_fn!(cm_reject<EpHandle>(*mut fid_pep, fid_t, *const c_void, usize) -> c_int);
enosys_fn!(cm_join<EpHandle>(*mut fid_ep, *const c_void, u64, *mut *mut fid_mc, *mut c_void) -> c_int);

static CM_OPS: fi_ops_cm = fi_ops_cm {
    size: std::mem::size_of::<fi_ops_cm>(),
    setname: Some(cm_setname),
    getname: Some(cm_getname),
    getpeer: Some(cm_getpeer),
    connect: Some(cm_connect),
    listen: Some(cm_listen),
    accept: Some(cm_accept),
    reject: Some(cm_reject),
    shutdown: Some(cm_shutdown),
    join: Some(cm_join),
};

// ---- sends and receives (fi_ops_msg, fi_ops_tagged)

/// One send through the provider.
///
/// # Safety
/// Buffers named by `op` follow the libfabric lifetime rules.
/// Takes `op` by value and is inlined into each trampoline, so the
/// operation is built once, in place, not copied field by field (a copy
/// read back in wider loads than it was written stalls store forwarding).
#[inline(always)]
unsafe fn do_send(e: *mut fid_ep, mut op: TxOp<'_>) -> isize {
    // SAFETY: checked against our ops table.
    let Some(h) = (unsafe { ep(e) }) else { return EINVAL_S };
    if op.iov.len() > h.tx_iov_limit {
        return EINVAL_S;
    }
    if op.flags & OP_DEFAULTS != 0 {
        op.flags = (op.flags & !OP_DEFAULTS) | h.tx_op_flags;
    }
    // SAFETY: forwarded contract.
    ssz(unsafe { h.obj.send(&op) })
}

/// # Safety
/// As `do_send`.
/// By value and inlined, as `do_send`.
#[inline(always)]
unsafe fn do_recv(e: *mut fid_ep, mut op: RxOp<'_>) -> isize {
    // SAFETY: checked against our ops table.
    let Some(h) = (unsafe { ep(e) }) else { return EINVAL_S };
    if op.iov.len() > h.rx_iov_limit {
        return EINVAL_S;
    }
    if op.flags & OP_DEFAULTS != 0 {
        op.flags = (op.flags & !OP_DEFAULTS) | h.rx_op_flags;
    }
    // SAFETY: forwarded contract.
    ssz(unsafe { h.obj.recv(&op) })
}

#[allow(clippy::too_many_arguments)]
/// # Safety
/// Caller's buffer rules.
unsafe fn send1(e: *mut fid_ep, buf: *const c_void, len: usize, dest: u64, ctx: *mut c_void, tag: u64, data: u64, flags: u64, tagged: bool, no_completion: bool, desc: *mut c_void) -> isize {
    if buf.is_null() && len > 0 {
        return EINVAL_S;
    }
    let iov = [Iov { base: buf as usize, len }];
    // Only the calls without a flags argument come through here.
    let op = TxOp { iov: &iov, desc: Descs(&desc), dest, context: ctx as usize, tag, data, flags: flags | OP_DEFAULTS, tagged, no_completion };
    // SAFETY: forwarded.
    unsafe { do_send(e, op) }
}

#[allow(clippy::too_many_arguments)]
/// # Safety
/// Caller's buffer rules.
unsafe fn sendv(e: *mut fid_ep, iov: *const iovec, count: usize, dest: u64, ctx: *mut c_void, tag: u64, data: u64, flags: u64, tagged: bool, desc: *mut *mut c_void) -> isize {
    let mut v = [Iov::default(); MAX_IOV];
    // SAFETY: iov holds count entries.
    let n = match unsafe { iovs(iov, count, &mut v) } {
        Ok(n) => n,
        Err(err) => return err.to_c() as isize,
    };
    let op = TxOp { iov: &v[..n], desc: Descs(desc), dest, context: ctx as usize, tag, data, flags, tagged, no_completion: false };
    // SAFETY: forwarded.
    unsafe { do_send(e, op) }
}

#[allow(clippy::too_many_arguments)]
/// # Safety
/// Caller's buffer rules.
unsafe fn recvv(e: *mut fid_ep, iov: *const iovec, count: usize, src: u64, ctx: *mut c_void, tag: u64, ignore: u64, flags: u64, tagged: bool, desc: *mut *mut c_void) -> isize {
    let mut v = [Iov::default(); MAX_IOV];
    // SAFETY: iov holds count entries.
    let n = match unsafe { iovs(iov, count, &mut v) } {
        Ok(n) => n,
        Err(err) => return err.to_c() as isize,
    };
    let op = RxOp { iov: &v[..n], desc: Descs(desc), src, context: ctx as usize, tag, ignore, flags, tagged };
    // SAFETY: forwarded.
    unsafe { do_recv(e, op) }
}

unsafe extern "C" fn msg_send(e: *mut fid_ep, buf: *const c_void, len: usize, desc: *mut c_void, dest: fi_addr_t, ctx: *mut c_void) -> isize {
    // SAFETY: fi_send contract.
    guard!(EOTHER_S, unsafe { send1(e, buf, len, dest, ctx, 0, 0, 0, false, false, desc) })
}
unsafe extern "C" fn msg_sendv(e: *mut fid_ep, iov: *const iovec, desc: *mut *mut c_void, count: usize, dest: fi_addr_t, ctx: *mut c_void) -> isize {
    // SAFETY: fi_sendv contract.
    guard!(EOTHER_S, unsafe { sendv(e, iov, count, dest, ctx, 0, 0, OP_DEFAULTS, false, desc) })
}
unsafe extern "C" fn msg_sendmsg(e: *mut fid_ep, m: *const fi_msg, flags: u64) -> isize {
    guard!(EOTHER_S, {
        null_check_ssize!(m);
        // SAFETY: m non-NULL.
        let m = unsafe { &*m };
        // SAFETY: fi_sendmsg contract.
        unsafe { sendv(e, m.msg_iov, m.iov_count, m.addr, m.context, 0, m.data, flags, false, m.desc) }
    })
}
unsafe extern "C" fn msg_inject(e: *mut fid_ep, buf: *const c_void, len: usize, dest: fi_addr_t) -> isize {
    // SAFETY: fi_inject contract.
    guard!(EOTHER_S, unsafe { send1(e, buf, len, dest, std::ptr::null_mut(), 0, 0, FI_INJECT, false, true, std::ptr::null_mut()) })
}
unsafe extern "C" fn msg_senddata(e: *mut fid_ep, buf: *const c_void, len: usize, desc: *mut c_void, data: u64, dest: fi_addr_t, ctx: *mut c_void) -> isize {
    // SAFETY: fi_senddata contract.
    guard!(EOTHER_S, unsafe { send1(e, buf, len, dest, ctx, 0, data, FI_REMOTE_CQ_DATA, false, false, desc) })
}
unsafe extern "C" fn msg_injectdata(e: *mut fid_ep, buf: *const c_void, len: usize, data: u64, dest: fi_addr_t) -> isize {
    // SAFETY: fi_injectdata contract.
    guard!(EOTHER_S, unsafe { send1(e, buf, len, dest, std::ptr::null_mut(), 0, data, FI_INJECT | FI_REMOTE_CQ_DATA, false, true, std::ptr::null_mut()) })
}
unsafe extern "C" fn msg_recv(e: *mut fid_ep, buf: *mut c_void, len: usize, desc: *mut c_void, src: fi_addr_t, ctx: *mut c_void) -> isize {
    guard!(EOTHER_S, {
        if buf.is_null() && len > 0 {
            return EINVAL_S;
        }
        let iov = [Iov { base: buf as usize, len }];
        let op = RxOp { iov: &iov, desc: Descs(&desc), src, context: ctx as usize, tag: 0, ignore: 0, flags: OP_DEFAULTS, tagged: false };
        // SAFETY: fi_recv contract.
        unsafe { do_recv(e, op) }
    })
}
unsafe extern "C" fn msg_recvv(e: *mut fid_ep, iov: *const iovec, desc: *mut *mut c_void, count: usize, src: fi_addr_t, ctx: *mut c_void) -> isize {
    // SAFETY: fi_recvv contract.
    guard!(EOTHER_S, unsafe { recvv(e, iov, count, src, ctx, 0, 0, OP_DEFAULTS, false, desc) })
}
unsafe extern "C" fn msg_recvmsg(e: *mut fid_ep, m: *const fi_msg, flags: u64) -> isize {
    guard!(EOTHER_S, {
        null_check_ssize!(m);
        // SAFETY: m non-NULL.
        let m = unsafe { &*m };
        // SAFETY: fi_recvmsg contract.
        unsafe { recvv(e, m.msg_iov, m.iov_count, m.addr, m.context, 0, 0, flags, false, m.desc) }
    })
}

static MSG_OPS: fi_ops_msg = fi_ops_msg {
    size: std::mem::size_of::<fi_ops_msg>(),
    recv: Some(msg_recv),
    recvv: Some(msg_recvv),
    recvmsg: Some(msg_recvmsg),
    send: Some(msg_send),
    sendv: Some(msg_sendv),
    sendmsg: Some(msg_sendmsg),
    inject: Some(msg_inject),
    senddata: Some(msg_senddata),
    injectdata: Some(msg_injectdata),
};

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn tag_recv(e: *mut fid_ep, buf: *mut c_void, len: usize, desc: *mut c_void, src: fi_addr_t, tag: u64, ignore: u64, ctx: *mut c_void) -> isize {
    guard!(EOTHER_S, {
        if buf.is_null() && len > 0 {
            return EINVAL_S;
        }
        let iov = [Iov { base: buf as usize, len }];
        let op = RxOp { iov: &iov, desc: Descs(&desc), src, context: ctx as usize, tag, ignore, flags: OP_DEFAULTS, tagged: true };
        // SAFETY: fi_trecv contract.
        unsafe { do_recv(e, op) }
    })
}
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn tag_recvv(e: *mut fid_ep, iov: *const iovec, desc: *mut *mut c_void, count: usize, src: fi_addr_t, tag: u64, ignore: u64, ctx: *mut c_void) -> isize {
    // SAFETY: fi_trecvv contract.
    guard!(EOTHER_S, unsafe { recvv(e, iov, count, src, ctx, tag, ignore, OP_DEFAULTS, true, desc) })
}
unsafe extern "C" fn tag_recvmsg(e: *mut fid_ep, m: *const fi_msg_tagged, flags: u64) -> isize {
    guard!(EOTHER_S, {
        null_check_ssize!(m);
        // SAFETY: m non-NULL.
        let m = unsafe { &*m };
        // FI_PEEK / FI_CLAIM / FI_DISCARD are handled by the provider.
        // SAFETY: fi_trecvmsg contract.
        unsafe { recvv(e, m.msg_iov, m.iov_count, m.addr, m.context, m.tag, m.ignore, flags, true, m.desc) }
    })
}
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn tag_send(e: *mut fid_ep, buf: *const c_void, len: usize, desc: *mut c_void, dest: fi_addr_t, tag: u64, ctx: *mut c_void) -> isize {
    // SAFETY: fi_tsend contract.
    guard!(EOTHER_S, unsafe { send1(e, buf, len, dest, ctx, tag, 0, 0, true, false, desc) })
}
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn tag_sendv(e: *mut fid_ep, iov: *const iovec, desc: *mut *mut c_void, count: usize, dest: fi_addr_t, tag: u64, ctx: *mut c_void) -> isize {
    // SAFETY: fi_tsendv contract.
    guard!(EOTHER_S, unsafe { sendv(e, iov, count, dest, ctx, tag, 0, OP_DEFAULTS, true, desc) })
}
unsafe extern "C" fn tag_sendmsg(e: *mut fid_ep, m: *const fi_msg_tagged, flags: u64) -> isize {
    guard!(EOTHER_S, {
        null_check_ssize!(m);
        // SAFETY: m non-NULL.
        let m = unsafe { &*m };
        // SAFETY: fi_tsendmsg contract.
        unsafe { sendv(e, m.msg_iov, m.iov_count, m.addr, m.context, m.tag, m.data, flags, true, m.desc) }
    })
}
unsafe extern "C" fn tag_inject(e: *mut fid_ep, buf: *const c_void, len: usize, dest: fi_addr_t, tag: u64) -> isize {
    // SAFETY: fi_tinject contract.
    guard!(EOTHER_S, unsafe { send1(e, buf, len, dest, std::ptr::null_mut(), tag, 0, FI_INJECT, true, true, std::ptr::null_mut()) })
}
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn tag_senddata(e: *mut fid_ep, buf: *const c_void, len: usize, desc: *mut c_void, data: u64, dest: fi_addr_t, tag: u64, ctx: *mut c_void) -> isize {
    // SAFETY: fi_tsenddata contract.
    guard!(EOTHER_S, unsafe { send1(e, buf, len, dest, ctx, tag, data, FI_REMOTE_CQ_DATA, true, false, desc) })
}
unsafe extern "C" fn tag_injectdata(e: *mut fid_ep, buf: *const c_void, len: usize, data: u64, dest: fi_addr_t, tag: u64) -> isize {
    // SAFETY: fi_tinjectdata contract.
    guard!(EOTHER_S, unsafe { send1(e, buf, len, dest, std::ptr::null_mut(), tag, data, FI_INJECT | FI_REMOTE_CQ_DATA, true, true, std::ptr::null_mut()) })
}

static TAGGED_OPS: fi_ops_tagged = fi_ops_tagged {
    size: std::mem::size_of::<fi_ops_tagged>(),
    recv: Some(tag_recv),
    recvv: Some(tag_recvv),
    recvmsg: Some(tag_recvmsg),
    send: Some(tag_send),
    sendv: Some(tag_sendv),
    sendmsg: Some(tag_sendmsg),
    inject: Some(tag_inject),
    senddata: Some(tag_senddata),
    injectdata: Some(tag_injectdata),
};

// ---- RMA and atomics: capi/src/endpoint/rma.rs. Collectives: not provided.

mod rma;
use rma::{ATOMIC_OPS, RMA_OPS};

/// The provider endpoint behind an endpoint fid of ours.
///
/// # Safety
/// `f` NULL or a fid.
pub(crate) unsafe fn ep_of<'a>(f: *const fid) -> Option<&'a dyn Endpoint> {
    // SAFETY: caller.
    unsafe { ep(f) }.map(|h| &*h.obj)
}

enosys_fn!(co_barrier<EpHandle>(*mut fid_ep, fi_addr_t, *mut c_void) -> isize);
enosys_fn!(co_broadcast<EpHandle>(*mut fid_ep, *mut c_void, usize, *mut c_void, fi_addr_t, fi_addr_t, fi_datatype, u64, *mut c_void) -> isize);
enosys_fn!(co_alltoall<EpHandle>(*mut fid_ep, *const c_void, usize, *mut c_void, *mut c_void, *mut c_void, fi_addr_t, fi_datatype, u64, *mut c_void) -> isize);
enosys_fn!(co_allreduce<EpHandle>(*mut fid_ep, *const c_void, usize, *mut c_void, *mut c_void, *mut c_void, fi_addr_t, fi_datatype, fi_op, u64, *mut c_void) -> isize);
enosys_fn!(co_allgather<EpHandle>(*mut fid_ep, *const c_void, usize, *mut c_void, *mut c_void, *mut c_void, fi_addr_t, fi_datatype, u64, *mut c_void) -> isize);
enosys_fn!(co_reduce_scatter<EpHandle>(*mut fid_ep, *const c_void, usize, *mut c_void, *mut c_void, *mut c_void, fi_addr_t, fi_datatype, fi_op, u64, *mut c_void) -> isize);
enosys_fn!(co_reduce<EpHandle>(*mut fid_ep, *const c_void, usize, *mut c_void, *mut c_void, *mut c_void, fi_addr_t, fi_addr_t, fi_datatype, fi_op, u64, *mut c_void) -> isize);
enosys_fn!(co_scatter<EpHandle>(*mut fid_ep, *const c_void, usize, *mut c_void, *mut c_void, *mut c_void, fi_addr_t, fi_addr_t, fi_datatype, u64, *mut c_void) -> isize);
enosys_fn!(co_gather<EpHandle>(*mut fid_ep, *const c_void, usize, *mut c_void, *mut c_void, *mut c_void, fi_addr_t, fi_addr_t, fi_datatype, u64, *mut c_void) -> isize);
enosys_fn!(co_msg<EpHandle>(*mut fid_ep, *const fi_msg_collective, *mut fi_ioc, *mut *mut c_void, usize, u64) -> isize);
enosys_fn!(co_barrier2<EpHandle>(*mut fid_ep, fi_addr_t, u64, *mut c_void) -> isize);

static COLLECTIVE_OPS: fi_ops_collective = fi_ops_collective {
    size: std::mem::size_of::<fi_ops_collective>(),
    barrier: Some(co_barrier),
    broadcast: Some(co_broadcast),
    alltoall: Some(co_alltoall),
    allreduce: Some(co_allreduce),
    allgather: Some(co_allgather),
    reduce_scatter: Some(co_reduce_scatter),
    reduce: Some(co_reduce),
    scatter: Some(co_scatter),
    gather: Some(co_gather),
    msg: Some(co_msg),
    barrier2: Some(co_barrier2),
};

/// Hand a provider endpoint to the application as a `fid_ep`.
///
/// `op_flags` and `iov_limits` are the tx and rx attributes' (a limit of 0
/// or above [`MAX_IOV`] means [`MAX_IOV`]).
///
/// # Safety
/// `out` writable; `parent` (the domain's count of children) outlives the
/// endpoint.
pub(crate) unsafe fn publish_ep(
    obj: Box<dyn Endpoint>,
    parent: &RefCount,
    op_flags: (u64, u64),
    iov_limits: (usize, usize),
    init: EpInit,
    context: *mut c_void,
    out: *mut *mut fid_ep,
) -> c_int {
    let limit = |l: usize| if l == 0 { MAX_IOV } else { l.min(MAX_IOV) };
    parent.get();
    let h = Box::new(EpHandle {
        fid: fid_ep {
            fid: fid { fclass: init.class, context, ops: EpHandle::fi_ops_ptr() },
            ops: &EP_OPS as *const fi_ops_ep as *mut fi_ops_ep,
            cm: &CM_OPS as *const fi_ops_cm as *mut fi_ops_cm,
            msg: &MSG_OPS as *const fi_ops_msg as *mut fi_ops_msg,
            rma: &RMA_OPS as *const fi_ops_rma as *mut fi_ops_rma,
            tagged: &TAGGED_OPS as *const fi_ops_tagged as *mut fi_ops_tagged,
            atomic: &ATOMIC_OPS as *const fi_ops_atomic as *mut fi_ops_atomic,
            collective: &COLLECTIVE_OPS as *const fi_ops_collective as *mut fi_ops_collective,
        },
        obj,
        parent,
        bound: Mutex::new(Vec::new()),
        refs: RefCount(std::sync::atomic::AtomicUsize::new(0)),
        tx_op_flags: op_flags.0 & !OP_DEFAULTS,
        rx_op_flags: op_flags.1 & !OP_DEFAULTS,
        tx_iov_limit: limit(iov_limits.0),
        rx_iov_limit: limit(iov_limits.1),
        xpu: init.xpu,
        cm: CmInit { connreq: init.connreq, addr_format: init.addr_format },
        inject_size: init.inject_size,
    });
    // SAFETY: caller's out pointer.
    unsafe { *out = Box::into_raw(h) as *mut fid_ep };
    0
}
