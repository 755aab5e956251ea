//! The domain handle (`fid_domain` with `fi_ops_domain` and `fi_ops_mr`)
//! of a built-in provider: `#[repr(C)]`, C handle first, static ops tables,
//! trampolines that take the handle back with `Handle::from_fid`. The
//! objects it opens have their own modules, below this one.

use crate::handle::{enosys_bind, enosys_control, enosys_ops_open, enosys_ops_set, obj_tostr, Handle, RefCount};
use libc::{c_int, c_void};
use rfabric_core::abi::*;
use rfabric_core::objects::cq::CqAttr;
use rfabric_core::objects::local_mr::Dmabuf;
use rfabric_core::provider::{AvAttr, Domain, MrReq};
use std::sync::Arc;

#[repr(C)]
pub(crate) struct DomainHandle {
    pub(crate) fid: fid_domain,
    pub(crate) obj: Box<dyn Domain>,
    /// The fabric's count of children.
    parent: *const RefCount,
    /// CQs, counters, AVs, MRs, endpoints and XPU contexts of the domain.
    pub(crate) children: RefCount,
    pub(crate) api_version: u32,
}

unsafe extern "C" fn domain_close(f: *mut fid) -> c_int {
    guard!(-FI_EOTHER, {
        // SAFETY: f checked against our ops table.
        let Some(h) = (unsafe { DomainHandle::from_fid(f) }) else { return -FI_EINVAL };
        if h.children.busy() {
            return -FI_EBUSY;
        }
        // SAFETY: the fabric outlives its domains (its count).
        unsafe { (*h.parent).put() };
        // SAFETY: made by publish_domain; closed once.
        drop(unsafe { DomainHandle::from_raw(h) });
        0
    })
}

unsafe extern "C" fn domain_cq_open(d: *mut fid_domain, a: *mut fi_cq_attr, cq: *mut *mut fid_cq, ctx: *mut c_void) -> c_int {
    guard!(-FI_EOTHER, {
        null_check!(a, cq);
        // SAFETY: checked against our ops table.
        let Some(h) = (unsafe { DomainHandle::from_fid(d) }) else { return -FI_EINVAL };
        // SAFETY: a non-NULL; fields read one by one (a 1.x caller's
        // struct ends before xpu_ctx).
        let (size, flags, format, wait_obj, wait_set) = unsafe {
            (
                std::ptr::addr_of!((*a).size).read(),
                std::ptr::addr_of!((*a).flags).read(),
                std::ptr::addr_of!((*a).format).read(),
                std::ptr::addr_of!((*a).wait_obj).read(),
                std::ptr::addr_of!((*a).wait_set).read(),
            )
        };
        if !wait_set.is_null() {
            return -FI_ENOSYS;
        }
        // FI_AFFINITY: signaling_vector is valid (and unused here).
        if flags & !(FI_AFFINITY | FI_XPU) != 0 {
            rfabric_core::fi_warn!("core", FI_LOG_CQ, "fi_cq_open: unknown flags {:#x} in fi_cq_attr", flags & !(FI_AFFINITY | FI_XPU));
            return -FI_EBADFLAGS;
        }
        // SAFETY: a is the caller's fi_cq_attr, of its API version's shape.
        let xctx = match crate::xpu::requested(flags, unsafe { crate::xpu::attr_ctx(std::ptr::addr_of!((*a).xpu_ctx), h.api_version) }, "fi_cq_open") {
            Ok(c) => c,
            Err(e) => return e,
        };
        let attr = CqAttr { size, format: format as u32, wait_obj: wait_obj as u32 };
        match h.obj.cq_open(&attr) {
            Ok(obj) => {
                let xpu = xctx.map(|c| Arc::new(crate::xpu::XpuCq::new(c, size)));
                // SAFETY: cq non-NULL; the domain outlives its CQs (its count).
                unsafe { crate::cq::publish(obj, &h.children, h.api_version, xpu, ctx, cq) }
            }
            Err(e) => e.to_c(),
        }
    })
}

unsafe extern "C" fn domain_av_open(d: *mut fid_domain, a: *mut fi_av_attr, av: *mut *mut fid_av, ctx: *mut c_void) -> c_int {
    guard!(-FI_EOTHER, {
        null_check!(a, av);
        // SAFETY: checked against our ops table.
        let Some(h) = (unsafe { DomainHandle::from_fid(d) }) else { return -FI_EINVAL };
        // SAFETY: a non-NULL.
        let a = unsafe { &*a };
        if !a.name.is_null() {
            // Named (shared) AVs are not supported.
            return -FI_ENOSYS;
        }
        let attr = AvAttr { kind: a.r#type as u32, count: a.count, flags: a.flags };
        match h.obj.av_open(&attr) {
            // SAFETY: av non-NULL; the domain outlives its AVs (its count).
            Ok(obj) => unsafe { crate::av::publish(obj, &h.children, ctx, av) },
            Err(e) => e.to_c(),
        }
    })
}

unsafe extern "C" fn domain_endpoint(d: *mut fid_domain, i: *mut fi_info, ep: *mut *mut fid_ep, ctx: *mut c_void) -> c_int {
    // SAFETY: the same contract.
    unsafe { open_endpoint(d, i, ep, 0, ctx) }
}

/// `fi_endpoint` (`flags` 0) and `fi_endpoint2`. The one flag known is
/// `FI_XPU`: an XPU endpoint of the context in `info->ep_attr->xpu_ctx`
/// (which alone asks for one too, see `rfabric_core::xpu::requested`).
///
/// # Safety
/// As `fi_endpoint`: `i` a valid `fi_info`, `ep` writable.
unsafe fn open_endpoint(d: *mut fid_domain, i: *mut fi_info, ep: *mut *mut fid_ep, flags: u64, ctx: *mut c_void) -> c_int {
    guard!(-FI_EOTHER, {
        if flags & !FI_XPU != 0 {
            rfabric_core::fi_warn!("core", FI_LOG_EP_CTRL, "fi_endpoint2: unknown flags {:#x}", flags & !FI_XPU);
            return -FI_EBADFLAGS;
        }
        null_check!(i, ep);
        // SAFETY: checked against our ops table.
        let Some(h) = (unsafe { DomainHandle::from_fid(d) }) else { return -FI_EINVAL };
        // SAFETY: i is the caller's fi_info.
        let mut info = match unsafe { crate::info::info_from_c(i) } {
            Ok(x) => x,
            Err(e) => return e.to_c(),
        };
        // SAFETY: handle is NULL or a fid (fi_info(3)).
        if let Some(name) = unsafe { crate::pep::pep_name(info.handle) } {
            info.src_addr = Some(name);
        }
        let xctx = match crate::xpu::requested(flags, crate::xpu::info_ctx(&info), "fi_endpoint2") {
            Ok(c) => c,
            Err(e) => return e,
        };
        // The info of an FI_CONNREQ event: the endpoint takes its request.
        // SAFETY: handle is NULL or a fid (fi_info(3)); checked below.
        let req = match unsafe { connreq_of(info.handle) } {
            Ok(r) => r,
            Err(e) => return e,
        };
        let made = match &req {
            // SAFETY: r is the live handle connreq_of checked.
            Some(r) => match unsafe { &**r }.take_for_endpoint() {
                Some(x) => h.obj.accept_endpoint(&info, x),
                None => {
                    rfabric_core::fi_warn!("core", FI_LOG_EP_CTRL, "fi_endpoint: the connection request was already answered");
                    return -FI_EINVAL;
                }
            },
            None => h.obj.endpoint(&info),
        };
        if let (Err(_), Some(r)) = (&made, req) {
            // SAFETY: as above.
            unsafe { &*r }.failed();
        }
        match made {
            Ok(obj) => {
                let op_flags = (info.tx_attr.map_or(0, |t| t.op_flags), info.rx_attr.map_or(0, |r| r.op_flags));
                let iov_limits = (info.tx_attr.map_or(0, |t| t.iov_limit), info.rx_attr.map_or(0, |r| r.iov_limit));
                let xpu = xctx.map(crate::xpu::XpuEp::new);
                let addr_format = info.addr_format;
                let inject_size = info.tx_attr.map_or(0, |t| t.inject_size);
                // SAFETY: ep non-NULL; the domain outlives its endpoints (its count).
                unsafe { crate::endpoint::publish_ep(obj, &h.children, op_flags, iov_limits, crate::endpoint::EpInit { xpu, connreq: req.unwrap_or(std::ptr::null_mut()), addr_format, inject_size, class: FI_CLASS_EP }, ctx, ep) }
            }
            Err(e) => e.to_c(),
        }
    })
}

/// The connection request named by an info's `handle`: `None` when the
/// handle is NULL or another object (a passive endpoint, as some
/// applications pass), `-FI_EINVAL` for a connection request that is not
/// ours.
///
/// # Safety
/// `handle` NULL or a readable fid.
unsafe fn connreq_of(handle: usize) -> Result<Option<*mut crate::pep::ConnReqHandle>, c_int> {
    let f = handle as *mut fid;
    // SAFETY: caller; checked against the connection-request ops table.
    if let Some(r) = unsafe { <crate::pep::ConnReqHandle as Handle>::from_fid(f) } {
        return Ok(Some(r as *const _ as *mut _));
    }
    // SAFETY: f non-NULL is a readable fid (caller).
    if !f.is_null() && unsafe { (*f).fclass } == FI_CLASS_CONNREQ {
        rfabric_core::fi_warn!("core", FI_LOG_EP_CTRL, "fi_endpoint: info->handle is a connection request of another library");
        return Err(-FI_EINVAL);
    }
    Ok(None)
}

unsafe extern "C" fn domain_endpoint2(d: *mut fid_domain, i: *mut fi_info, ep: *mut *mut fid_ep, fl: u64, ctx: *mut c_void) -> c_int {
    // SAFETY: same contract as fi_endpoint.
    unsafe { open_endpoint(d, i, ep, fl, ctx) }
}

enosys_fn!(domain_scalable_ep<DomainHandle>(*mut fid_domain, *mut fi_info, *mut *mut fid_ep, *mut c_void) -> c_int);
enosys_fn!(domain_poll_open<DomainHandle>(*mut fid_domain, *mut fi_poll_attr, *mut *mut fid_poll) -> c_int);
enosys_fn!(domain_stx_ctx<DomainHandle>(*mut fid_domain, *mut fi_tx_attr, *mut *mut fid_stx, *mut c_void) -> c_int);
/// `fi_srx_context`: the provider's shared receive context, published as
/// an endpoint handle of class `FI_CLASS_SRX_CTX` (`fi_recv*`, `fi_close`;
/// endpoints join it with `fi_ep_bind`). A NULL `attr` is the defaults.
unsafe extern "C" fn domain_srx_ctx(d: *mut fid_domain, attr: *mut fi_rx_attr, out: *mut *mut fid_ep, ctx: *mut c_void) -> c_int {
    guard!(-FI_EOTHER, {
        null_check!(out);
        // SAFETY: checked against our ops table.
        let Some(h) = (unsafe { DomainHandle::from_fid(d) }) else { return -FI_EINVAL };
        let a = if attr.is_null() {
            // SAFETY: fi_rx_attr is integers only; all zeros is its defaults.
            unsafe { std::mem::zeroed::<fi_rx_attr>() }
        } else {
            // SAFETY: the caller's readable fi_rx_attr.
            unsafe { *attr }
        };
        match h.obj.srx_context(&a) {
            Ok(obj) => {
                let init = crate::endpoint::EpInit { xpu: None, connreq: std::ptr::null_mut(), addr_format: 0, inject_size: 0, class: FI_CLASS_SRX_CTX };
                // SAFETY: out non-NULL; the domain outlives its children (its count).
                unsafe { crate::endpoint::publish_ep(obj, &h.children, (0, a.op_flags), (0, a.iov_limit), init, ctx, out) }
            }
            Err(e) => e.to_c(),
        }
    })
}
/// `fi_query_atomic`: flags `FI_FETCH_ATOMIC` or `FI_COMPARE_ATOMIC` (not
/// both) select the call family; none means the base atomics. Unknown flags
/// `-FI_EBADFLAGS`; an unsupported combination `-FI_EOPNOTSUPP`.
unsafe extern "C" fn domain_query_atomic(f: *mut fid_domain, dt: fi_datatype, op: fi_op, attr: *mut fi_atomic_attr, flags: u64) -> c_int {
    guard!(-FI_EOTHER, {
        null_check!(attr);
        // SAFETY: checked against our ops table.
        let Some(d) = (unsafe { DomainHandle::from_fid(f) }) else { return -FI_EINVAL };
        let kind = match flags {
            0 => rfabric_core::provider::AtomicKind::Write,
            FI_FETCH_ATOMIC => rfabric_core::provider::AtomicKind::Fetch,
            FI_COMPARE_ATOMIC => rfabric_core::provider::AtomicKind::Compare,
            x if x & FI_FETCH_ATOMIC != 0 && x & FI_COMPARE_ATOMIC != 0 => return -FI_EINVAL,
            _ => return -FI_EBADFLAGS,
        };
        match d.obj.query_atomic(kind, op, dt) {
            Ok((count, size)) => {
                // SAFETY: attr non-NULL.
                unsafe { *attr = fi_atomic_attr { count, size } };
                0
            }
            Err(e) => e.to_c(),
        }
    })
}
enosys_fn!(domain_query_collective<DomainHandle>(*mut fid_domain, fi_collective_op, *mut fi_collective_attr, u64) -> c_int);
unsafe extern "C" fn domain_cntr_open(d: *mut fid_domain, a: *mut fi_cntr_attr, out: *mut *mut fid_cntr, ctx: *mut c_void) -> c_int {
    guard!(-FI_EOTHER, {
        null_check!(a, out);
        // SAFETY: checked against our ops table.
        let Some(h) = (unsafe { DomainHandle::from_fid(d) }) else { return -FI_EINVAL };
        // SAFETY: a non-NULL; fields read one by one (1.x structs are shorter).
        let (events, wait_obj, wait_set, flags) = unsafe {
            (
                std::ptr::addr_of!((*a).events).read(),
                std::ptr::addr_of!((*a).wait_obj).read(),
                std::ptr::addr_of!((*a).wait_set).read(),
                std::ptr::addr_of!((*a).flags).read(),
            )
        };
        if !wait_set.is_null() {
            return -FI_ENOSYS;
        }
        if flags & !FI_XPU != 0 {
            rfabric_core::fi_warn!("core", FI_LOG_CNTR, "fi_cntr_open: unknown flags {:#x} in fi_cntr_attr", flags & !FI_XPU);
            return -FI_EBADFLAGS;
        }
        // SAFETY: a is the caller's fi_cntr_attr, of its API version's shape.
        let xctx = match crate::xpu::requested(flags, unsafe { crate::xpu::attr_ctx(std::ptr::addr_of!((*a).xpu_ctx), h.api_version) }, "fi_cntr_open") {
            Ok(c) => c,
            Err(e) => return e,
        };
        match h.obj.cntr_open(events as u32, wait_obj as u32) {
            Ok(obj) => {
                let xpu = xctx.map(|c| Arc::new(crate::xpu::XpuCntr::new(c)));
                // SAFETY: out non-NULL; the domain outlives its counters (its count).
                unsafe { crate::cntr::publish(obj, &h.children, xpu, ctx, out) }
            }
            Err(e) => e.to_c(),
        }
    })
}

/// Registration flags of fi_mr(3) the built-in providers support (plus
/// `FI_MR_DMABUF` through `fi_mr_regattr`): the others (persistent or device
/// memory, single use, authorization keys, undefined bits) are
/// `-FI_EBADFLAGS`, as fi_mr(3) says for flags a provider does not support.
/// Bit 60 is upstream libfabric's internal "do not cache this registration",
/// which its utility providers (ofi_rxd, ofi_rxm) pass to the core provider
/// under them: a DL provider of ours under an upstream libfabric gets it. We
/// keep no registration cache, so it asks for what already happens.
const HOST_MR_NOCACHE: u64 = 1 << 60;
const MR_FLAGS: u64 = FI_RMA_EVENT | HOST_MR_NOCACHE;

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn mr_reg(f: *mut fid, buf: *const c_void, len: usize, access: u64, offset: u64, key: u64, flags: u64, mr: *mut *mut fid_mr, ctx: *mut c_void) -> c_int {
    guard!(-FI_EOTHER, {
        null_check!(mr);
        // SAFETY: checked against our ops table.
        let Some(d) = (unsafe { DomainHandle::from_fid(f) }) else { return -FI_EINVAL };
        if buf.is_null() && len > 0 {
            return -FI_EINVAL;
        }
        if flags & !MR_FLAGS != 0 {
            rfabric_core::fi_warn!("core", FI_LOG_MR, "fi_mr_reg: unsupported flags {:#x}", flags & !MR_FLAGS);
            return -FI_EBADFLAGS;
        }
        let req = MrReq { addr: buf as usize, len, access, offset, requested_key: key, flags, dmabuf: None };
        // SAFETY: d ours, mr non-NULL.
        unsafe { crate::mr::publish(&*d.obj, &d.children, &req, ctx, mr) }
    })
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn mr_regv(f: *mut fid, iov: *const libc::iovec, count: usize, access: u64, offset: u64, key: u64, flags: u64, mr: *mut *mut fid_mr, ctx: *mut c_void) -> c_int {
    guard!(-FI_EOTHER, {
        null_check!(iov, mr);
        if count != 1 {
            return -FI_EINVAL;
        }
        // SAFETY: iov has count (1) entries.
        let v = unsafe { *iov };
        // SAFETY: forwarded with the caller's arguments.
        unsafe { mr_reg(f, v.iov_base, v.iov_len, access, offset, key, flags, mr, ctx) }
    })
}

unsafe extern "C" fn mr_regattr(f: *mut fid, attr: *const fi_mr_attr, flags: u64, mr: *mut *mut fid_mr) -> c_int {
    guard!(-FI_EOTHER, {
        null_check!(attr, mr);
        // SAFETY: attr non-NULL; only fields present since 1.x are read, one
        // by one (older callers' structs are shorter).
        let (iov_count, access, offset, key, context, iov) = unsafe {
            (
                std::ptr::addr_of!((*attr).iov_count).read(),
                std::ptr::addr_of!((*attr).access).read(),
                std::ptr::addr_of!((*attr).offset).read(),
                std::ptr::addr_of!((*attr).requested_key).read(),
                std::ptr::addr_of!((*attr).context).read(),
                std::ptr::addr_of!((*attr).anon0).read(),
            )
        };
        if flags & !(MR_FLAGS | FI_MR_DMABUF) != 0 {
            rfabric_core::fi_warn!("core", FI_LOG_MR, "fi_mr_regattr: unsupported flags {:#x}", flags & !(MR_FLAGS | FI_MR_DMABUF));
            return -FI_EBADFLAGS;
        }
        if flags & FI_MR_DMABUF != 0 {
            // SAFETY: with FI_MR_DMABUF the union holds dmabuf.
            let b = unsafe { iov.dmabuf };
            if b.is_null() || iov_count != 1 {
                return -FI_EINVAL;
            }
            // SAFETY: non-NULL caller struct.
            let b = unsafe { *b };
            // SAFETY: checked against our ops table.
            let Some(d) = (unsafe { DomainHandle::from_fid(f) }) else { return -FI_EINVAL };
            let dmabuf = Dmabuf { fd: b.fd, offset: b.offset, len: b.len, base_addr: b.base_addr as usize };
            let req = MrReq { access, offset, requested_key: key, flags: flags & !FI_MR_DMABUF, dmabuf: Some(dmabuf), ..MrReq::default() };
            // SAFETY: d ours, mr non-NULL.
            return unsafe { crate::mr::publish(&*d.obj, &d.children, &req, context, mr) };
        }
        if iov_count != 1 {
            return -FI_EINVAL;
        }
        // SAFETY: without FI_MR_DMABUF the union holds mr_iov.
        let iov = unsafe { iov.mr_iov };
        // SAFETY: forwarded.
        unsafe { mr_regv(f, iov, 1, access, offset, key, flags, mr, context) }
    })
}

static MR_OPS: fi_ops_mr = fi_ops_mr {
    size: std::mem::size_of::<fi_ops_mr>(),
    reg: Some(mr_reg),
    regv: Some(mr_regv),
    regattr: Some(mr_regattr),
};

/// `fi_xpu_ctx(domain, attr, &ctx, context)`.
unsafe extern "C" fn domain_xpu_ctx(d: *mut fid_domain, attr: *mut fi_xpu_attr, out: *mut *mut fid_xpu_ctx, context: *mut c_void) -> c_int {
    guard!(-FI_EOTHER, {
        null_check!(attr, out);
        // SAFETY: checked against our ops table.
        let Some(h) = (unsafe { DomainHandle::from_fid(d) }) else { return -FI_EINVAL };
        // SAFETY: attr non-NULL, a whole fi_xpu_attr (the caller's).
        let a = unsafe { attr.read() };
        // SAFETY: a.ops is NULL or the application's fi_xpu_ops, of which
        // rfabric_core::xpu::Callbacks::from_c reads `size` first and no more than it covers.
        let callbacks = match unsafe { rfabric_core::xpu::Callbacks::from_c(a.ops, h.api_version) } {
            Ok(c) => c,
            Err(e) => return e.to_c(),
        };
        let attr = rfabric_core::xpu::XpuAttr { iface: a.iface, device: a.device, callbacks, api_version: h.api_version };
        let ctx = match h.obj.xpu_ctx(&attr) {
            Ok(c) => c,
            Err(e) => return e.to_c(),
        };
        // SAFETY: out non-NULL; the domain outlives its contexts (its count).
        unsafe { crate::xpu::publish_ctx(ctx, &h.children, context, out) }
    })
}


// SAFETY: #[repr(C)] with the fid first (in fid_domain); DOMAIN_FI_OPS is used by
// this handle type only.
unsafe impl Handle for DomainHandle {
    fn fi_ops() -> &'static fi_ops {
        &DOMAIN_FI_OPS
    }
}

static DOMAIN_FI_OPS: fi_ops = fi_ops {
    size: std::mem::size_of::<fi_ops>(),
    close: Some(domain_close),
    bind: Some(enosys_bind::<DomainHandle>),
    control: Some(enosys_control::<DomainHandle>),
    ops_open: Some(enosys_ops_open::<DomainHandle>),
    tostr: Some(obj_tostr::<DomainHandle>),
    ops_set: Some(enosys_ops_set::<DomainHandle>),
};

static DOMAIN_OPS: fi_ops_domain = fi_ops_domain {
    size: std::mem::size_of::<fi_ops_domain>(),
    av_open: Some(domain_av_open),
    cq_open: Some(domain_cq_open),
    endpoint: Some(domain_endpoint),
    scalable_ep: Some(domain_scalable_ep),
    cntr_open: Some(domain_cntr_open),
    poll_open: Some(domain_poll_open),
    stx_ctx: Some(domain_stx_ctx),
    srx_ctx: Some(domain_srx_ctx),
    query_atomic: Some(domain_query_atomic),
    query_collective: Some(domain_query_collective),
    endpoint2: Some(domain_endpoint2),
    xpu_ctx: Some(domain_xpu_ctx),
};

/// Hand a domain the fabric's provider opened to the application.
///
/// # Safety
/// `out` is writable; `parent` (the fabric's count of children) outlives
/// the domain.
pub(crate) unsafe fn publish_domain(obj: Box<dyn Domain>, parent: &RefCount, api_version: u32, context: *mut c_void, out: *mut *mut fid_domain) -> c_int {
    parent.get();
    let h = Box::new(DomainHandle {
        fid: fid_domain {
            fid: fid { fclass: FI_CLASS_DOMAIN, context, ops: DomainHandle::fi_ops_ptr() },
            ops: &DOMAIN_OPS as *const fi_ops_domain as *mut fi_ops_domain,
            mr: &MR_OPS as *const fi_ops_mr as *mut fi_ops_mr,
        },
        obj,
        parent,
        children: RefCount::default(),
        api_version,
    });
    // SAFETY: caller's out pointer.
    unsafe { *out = DomainHandle::into_raw(h) as *mut fid_domain };
    0
}

