//! `fi_xpu_ctx` (the `xpu_ctx` slot of `fi_ops_domain`) and the
//! `fid_xpu_ctx` handle: validation of `struct fi_xpu_attr`, `query`,
//! `close`. The context itself is `rfabric_core::xpu::XpuCtx`.

use crate::av::AvHandle;
use crate::cntr::CntrHandle;
use crate::cq::CqHandle;
use crate::domain::DomainHandle;
use crate::handle::Handle;
use crate::endpoint::EpHandle;
use libc::{c_char, c_int, c_void};
use rfabric_core::abi::*;
use rfabric_core::provider::{CompletionQueue, Counter, Iov, RmaIov, RmaOp, TxOp};
use rfabric_core::xpu::{Callbacks, XpuAttr, Completion, CompletionRing, Proxy, WorkRequest, XpuCounter, XpuCtx, XpuTarget, OP_SEND, OP_TSEND, OP_WRITE};
use std::sync::{Arc, Mutex};

#[repr(C)]
pub(crate) struct XpuCtxHandle {
    fid: fid_xpu_ctx,
    pub(crate) ctx: Arc<XpuCtx>,
    domain: *const DomainHandle,
}

enosys_fn!(ctx_bind<XpuCtxHandle>(*mut fid, *mut fid, u64) -> c_int);
enosys_fn!(ctx_control<XpuCtxHandle>(*mut fid, c_int, *mut c_void) -> c_int);
enosys_fn!(ctx_ops_open<XpuCtxHandle>(*mut fid, *const c_char, u64, *mut *mut c_void, *mut c_void) -> c_int);
enosys_fn!(ctx_ops_set<XpuCtxHandle>(*mut fid, *const c_char, u64, *mut c_void, *mut c_void) -> c_int);

unsafe extern "C" fn ctx_tostr(f: *const fid, buf: *mut c_char, len: usize) -> c_int {
    guard!(-FI_EOTHER, {
        null_check!(f, buf);
        // SAFETY: checked against our ops table.
        let Some(h) = (unsafe { XpuCtxHandle::from_fid(f) }) else { return -FI_EINVAL };
        // SAFETY: buf holds len bytes.
        unsafe { crate::handle::put_cstr(buf, len, &format!("xpu_ctx {} device {}", h.ctx.provider.name, h.ctx.device)) };
        0
    })
}

unsafe extern "C" fn ctx_close(f: *mut fid) -> c_int {
    guard!(-FI_EOTHER, {
        // SAFETY: checked against our ops table.
        let Some(h) = (unsafe { XpuCtxHandle::from_fid(f) }) else { return -FI_EINVAL };
        // SAFETY: the domain outlives its children (its refcount).
        unsafe { (*h.domain).children.put() };
        // SAFETY: created by Box::into_raw in domain_xpu_ctx; closed once.
        // Exported objects keep their own reference to the context.
        drop(unsafe { XpuCtxHandle::from_raw(h) });
        0
    })
}

unsafe extern "C" fn ctx_query(c: *mut fid_xpu_ctx, attr: *mut fi_xpu_ctx_attr) -> c_int {
    guard!(-FI_EOTHER, {
        null_check!(c, attr);
        // SAFETY: checked against our ops table.
        let Some(h) = (unsafe { XpuCtxHandle::from_fid(c) }) else { return -FI_EINVAL };
        // SAFETY: attr non-NULL, a whole fi_xpu_ctx_attr (caller).
        unsafe { attr.write(h.ctx.query()) };
        0
    })
}

// SAFETY: #[repr(C)] with the fid first (in fid_xpu_ctx); XPU_CTX_FI_OPS is used by
// this handle type only.
unsafe impl Handle for XpuCtxHandle {
    fn fi_ops() -> &'static fi_ops {
        &XPU_CTX_FI_OPS
    }
}

pub(crate) static XPU_CTX_FI_OPS: fi_ops = fi_ops {
    size: std::mem::size_of::<fi_ops>(),
    close: Some(ctx_close),
    bind: Some(ctx_bind),
    control: Some(ctx_control),
    ops_open: Some(ctx_ops_open),
    tostr: Some(ctx_tostr),
    ops_set: Some(ctx_ops_set),
};

static XPU_CTX_OPS: fi_ops_xpu_ctx = fi_ops_xpu_ctx { size: std::mem::size_of::<fi_ops_xpu_ctx>(), query: Some(ctx_query) };

/// `fi_xpu_ctx(domain, attr, &ctx, context)`.
pub(crate) unsafe extern "C" fn domain_xpu_ctx(d: *mut fid_domain, attr: *mut fi_xpu_attr, out: *mut *mut fid_xpu_ctx, context: *mut c_void) -> c_int {
    guard!(-FI_EOTHER, {
        null_check!(attr, out);
        // SAFETY: checked against our ops table.
        let Some(h) = (unsafe { DomainHandle::from_fid(d) }) else { return -FI_EINVAL };
        // SAFETY: attr non-NULL, a whole fi_xpu_attr (the caller's).
        let a = unsafe { attr.read() };
        // SAFETY: a.ops is NULL or the application's fi_xpu_ops, of which
        // Callbacks::from_c reads `size` first and no more than it covers.
        let callbacks = match unsafe { Callbacks::from_c(a.ops, h.api_version) } {
            Ok(c) => c,
            Err(e) => return e.to_c(),
        };
        let attr = XpuAttr { iface: a.iface, device: a.device, callbacks, api_version: h.api_version };
        let ctx = match h.obj.xpu_ctx(&attr) {
            Ok(c) => c,
            Err(e) => return e.to_c(),
        };
        h.children.get();
        let b = Box::new(XpuCtxHandle {
            fid: fid_xpu_ctx {
                fid: fid { fclass: FI_CLASS_XPU_CTX, context, ops: XpuCtxHandle::fi_ops_ptr() },
                ops: &XPU_CTX_OPS as *const fi_ops_xpu_ctx as *mut fi_ops_xpu_ctx,
            },
            ctx,
            domain: h,
        });
        // SAFETY: out non-NULL.
        unsafe { *out = Box::into_raw(b) as *mut fid_xpu_ctx };
        0
    })
}

/// The context behind an `xpu_ctx` member of an attribute struct: `None`
/// for NULL, `Err` for a pointer that is not one of our contexts.
///
/// # Safety
/// `p` is NULL or points to a readable `struct fid`.
pub(crate) unsafe fn ctx_of(p: *mut fid_xpu_ctx) -> Result<Option<Arc<XpuCtx>>, c_int> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: caller's contract; the ops table is compared before the cast.
    match unsafe { XpuCtxHandle::from_fid(p) } {
        Some(h) => Ok(Some(h.ctx.clone())),
        None => Err(-FI_EINVAL),
    }
}

// ---- exported CQs and counters ------------------------------------------
//
// Objects opened with an XPU context are recorded here, by handle address,
// with their device memory. That memory is made by the first export that
// needs it: the object's own, or that of an endpoint it is bound to, so the
// three exports may come in any order (an endpoint's proxy and the device
// then share one ring or one pair of counter words, whoever made it).
// `exported` says whether the object's own export has handed out its
// handle. Only control calls (open, export, close) look at this table.

enum XpuObj {
    Cq { ctx: Arc<XpuCtx>, entries: usize, ring: Option<Arc<CompletionRing>>, exported: bool },
    Cntr { ctx: Arc<XpuCtx>, words: Option<Arc<XpuCounter>>, exported: bool },
}

impl XpuObj {
    /// The CQ's ring, or a new one (`true`: not stored yet); `None` for a
    /// counter.
    fn ring(&self) -> rfabric_core::error::Result<Option<(Arc<CompletionRing>, bool)>> {
        match self {
            XpuObj::Cq { ring: Some(r), .. } => Ok(Some((r.clone(), false))),
            XpuObj::Cq { ctx, entries, ring: None, .. } => Ok(Some((Arc::new(ctx.completion_ring(*entries)?), true))),
            XpuObj::Cntr { .. } => Ok(None),
        }
    }

    /// The counter's words, or new ones (`true`: not stored yet); `None`
    /// for a CQ.
    fn words(&self) -> rfabric_core::error::Result<Option<(Arc<XpuCounter>, bool)>> {
        match self {
            XpuObj::Cntr { words: Some(w), .. } => Ok(Some((w.clone(), false))),
            XpuObj::Cntr { ctx, words: None, .. } => Ok(Some((Arc::new(ctx.counter()?), true))),
            XpuObj::Cq { .. } => Ok(None),
        }
    }
}

static OBJS: Mutex<Vec<(usize, XpuObj)>> = Mutex::new(Vec::new());

fn objs() -> std::sync::MutexGuard<'static, Vec<(usize, XpuObj)>> {
    OBJS.lock().unwrap_or_else(|e| e.into_inner())
}

fn find(t: &mut [(usize, XpuObj)], handle: usize) -> Option<&mut XpuObj> {
    t.iter_mut().find(|(h, _)| *h == handle).map(|(_, o)| o)
}

/// The `xpu_ctx` member of a CQ or counter attribute struct, read only from
/// callers of API 2.0 or later (a 1.x struct ends before it).
///
/// # Safety
/// `p` points to the member inside the caller's attribute struct when
/// `api_version` is 2.0 or later.
pub(crate) unsafe fn attr_ctx(p: *const *mut fid_xpu_ctx, api_version: u32) -> Result<Option<Arc<XpuCtx>>, c_int> {
    if api_version < fi_version(2, 0) {
        return Ok(None);
    }
    // SAFETY: caller's contract.
    let c = unsafe { p.read() };
    // SAFETY: c is NULL or the application's context handle.
    unsafe { ctx_of(c) }
}

/// The context of an object being opened, from its `FI_XPU` flag (in
/// `flags`) and the context its `xpu_ctx` member named (`ctx`, as read by
/// [`attr_ctx`] or [`info_ctx`]): see `rfabric_core::xpu::requested`.
pub(crate) fn requested(flags: u64, ctx: Result<Option<Arc<XpuCtx>>, c_int>, what: &str) -> Result<Option<Arc<XpuCtx>>, c_int> {
    rfabric_core::xpu::requested(flags & FI_XPU != 0, ctx?, what).map_err(|e| e.to_c())
}

/// Record a CQ opened with an XPU context (`size`: its `fi_cq_attr.size`).
pub(crate) fn cq_opened(handle: usize, ctx: Option<Arc<XpuCtx>>, size: usize) {
    if let Some(ctx) = ctx {
        let entries = if size == 0 { 1024 } else { size.clamp(2, 1 << 20).next_power_of_two() };
        objs().push((handle, XpuObj::Cq { ctx, entries, ring: None, exported: false }));
    }
}

/// Record a counter opened with an XPU context.
pub(crate) fn cntr_opened(handle: usize, ctx: Option<Arc<XpuCtx>>) {
    if let Some(ctx) = ctx {
        objs().push((handle, XpuObj::Cntr { ctx, words: None, exported: false }));
    }
}

/// Forget a closed object; its device memory goes back to the application
/// when the last user (an endpoint's proxy, for instance) lets go.
pub(crate) fn closed(handle: usize) {
    objs().retain(|(h, _)| *h != handle);
}

/// The export of a CQ or counter: its device memory (made now unless an
/// endpoint's export made it first) and the handle to it.
fn export_common(handle: usize, flags: u64) -> Result<fid_xpu, c_int> {
    if flags != 0 {
        return Err(-FI_EBADFLAGS);
    }
    let mut t = objs();
    let Some(obj) = find(&mut t, handle) else {
        rfabric_core::fi_warn!("shm", FI_LOG_DOMAIN, "export: object was opened without an XPU context");
        return Err(-FI_EINVAL);
    };
    let h = match obj {
        XpuObj::Cq { exported: true, .. } | XpuObj::Cntr { exported: true, .. } => return Err(-FI_EALREADY),
        XpuObj::Cq { ctx, entries, ring, exported } => {
            let r = match ring.take() {
                Some(r) => r,
                None => Arc::new(ctx.completion_ring(*entries).map_err(|e| e.to_c())?),
            };
            *exported = true;
            ring.insert(r).handle()
        }
        XpuObj::Cntr { ctx, words, exported } => {
            let w = match words.take() {
                Some(w) => w,
                None => Arc::new(ctx.counter().map_err(|e| e.to_c())?),
            };
            *exported = true;
            words.insert(w).handle()
        }
    };
    Ok(h)
}

/// `fi_cq_export_xpu`.
pub(crate) unsafe extern "C" fn cq_export_xpu(cq: *mut fid_cq, flags: u64, out: *mut fid_xpu_cq) -> c_int {
    guard!(-FI_EOTHER, {
        null_check!(out);
        // SAFETY: checked against the CQ ops table before any use.
        if unsafe { CqHandle::from_fid(cq) }.is_none() {
            return -FI_EINVAL;
        }
        match export_common(cq as usize, flags) {
            Ok(h) => {
                // SAFETY: out non-NULL, a fid_xpu_cq.
                unsafe { out.write(fid_xpu_cq { fid: h }) };
                0
            }
            Err(e) => e,
        }
    })
}

/// `fi_cntr_export_xpu`.
pub(crate) unsafe extern "C" fn cntr_export_xpu(c: *mut fid_cntr, flags: u64, out: *mut fid_xpu_cntr) -> c_int {
    guard!(-FI_EOTHER, {
        null_check!(out);
        // SAFETY: checked against the counter ops table before any use.
        if unsafe { CntrHandle::from_fid(c) }.is_none() {
            return -FI_EINVAL;
        }
        match export_common(c as usize, flags) {
            Ok(h) => {
                // SAFETY: out non-NULL, a fid_xpu_cntr.
                unsafe { out.write(fid_xpu_cntr { fid: h }) };
                0
            }
            Err(e) => e,
        }
    })
}

// ---- exported endpoints --------------------------------------------------

/// What an endpoint opened with an XPU context needs for its export.
pub(crate) struct XpuEp {
    ctx: Arc<XpuCtx>,
    enabled: bool,
    /// Bound CQ (handle address, object) and counter.
    cq: Option<(usize, Arc<dyn CompletionQueue>)>,
    cntr: Option<(usize, Arc<dyn Counter>)>,
    proxy: Option<Proxy>,
}

static EPS: Mutex<Vec<(usize, XpuEp)>> = Mutex::new(Vec::new());

fn eps() -> std::sync::MutexGuard<'static, Vec<(usize, XpuEp)>> {
    EPS.lock().unwrap_or_else(|e| e.into_inner())
}

/// The context named by `fi_info.ep_attr.xpu_ctx`, checked.
pub(crate) fn info_ctx(info: &rfabric_core::info::Info) -> Result<Option<Arc<XpuCtx>>, c_int> {
    let p = info.ep_attr.as_ref().map_or(0, |e| e.xpu_ctx) as *mut fid_xpu_ctx;
    // SAFETY: NULL or the application's context handle (compared against
    // our ops table before use).
    unsafe { ctx_of(p) }
}

pub(crate) fn ep_opened(handle: usize, ctx: Option<Arc<XpuCtx>>) {
    if let Some(ctx) = ctx {
        eps().push((handle, XpuEp { ctx, enabled: false, cq: None, cntr: None, proxy: None }));
    }
}

/// After a successful `fi_ep_bind` of a CQ or counter.
///
/// # Safety
/// `b` is a live handle of ours of the class it says.
pub(crate) unsafe fn ep_bound(handle: usize, b: *mut fid) {
    let mut t = eps();
    let Some((_, e)) = t.iter_mut().find(|(h, _)| *h == handle) else { return };
    // SAFETY: caller: checked handles.
    unsafe {
        if let Some(c) = CqHandle::from_fid(b) {
            e.cq = Some((b as usize, c.obj.clone()));
        } else if let Some(c) = CntrHandle::from_fid(b) {
            e.cntr = Some((b as usize, c.obj.clone()));
        }
    }
}

pub(crate) fn ep_enabled(handle: usize) {
    if let Some((_, e)) = eps().iter_mut().find(|(h, _)| *h == handle) {
        e.enabled = true;
    }
}

/// Called first thing by `fi_close` on an endpoint: stops its proxy.
pub(crate) fn ep_closing(handle: usize) {
    let gone: Vec<XpuEp> = {
        let mut t = eps();
        let mut out = Vec::new();
        while let Some(i) = t.iter().position(|(h, _)| *h == handle) {
            out.push(t.remove(i).1);
        }
        out
    };
    drop(gone); // joins the proxy thread outside the table lock
}

/// The proxy's view of the real endpoint.
struct EpTarget {
    ep: *const EpHandle,
    cq: Option<Arc<dyn CompletionQueue>>,
    cntr: Option<(Arc<dyn Counter>, Arc<XpuCounter>)>,
    seen: Mutex<(u64, u64)>,
    api_version: u32,
}

// SAFETY: the endpoint is Sync (trait bound) and outlives the proxy:
// ep_closing stops the proxy before the handle is freed.
unsafe impl Send for EpTarget {}
// SAFETY: as above.
unsafe impl Sync for EpTarget {}

fn decode(e: &[u8]) -> Completion {
    let w = |i: usize| e.get(i * 8..i * 8 + 8).map_or(0, |b| u64::from_ne_bytes(b.try_into().unwrap_or([0; 8])));
    Completion { op_context: w(0), flags: w(1), len: w(2), buf: w(3), data: w(4), tag: w(5), err: 0, prov_errno: 0 }
}

impl XpuTarget for EpTarget {
    fn post(&self, w: &WorkRequest) -> rfabric_core::error::Result<()> {
        let iov = [Iov { base: w.buf as usize, len: w.len as usize }];
        let tagged = match w.op {
            OP_SEND => false,
            OP_TSEND => true,
            OP_WRITE => {
                let rma = [RmaIov { addr: w.raddr, len: w.len as usize, key: w.key }];
                let op = RmaOp { iov: &iov, rma: &rma, dest: w.dest, context: w.context as usize, data: 0, flags: 0, no_completion: false };
                // SAFETY: as for sends below: the endpoint is alive and the
                // device keeps the buffer until the completion.
                return unsafe { (*self.ep).obj.rma_write(&op) };
            }
            _ => return Err(rfabric_core::error::EINVAL),
        };
        let op = TxOp { iov: &iov, dest: w.dest, context: w.context as usize, tag: w.tag, data: 0, flags: 0, tagged, no_completion: false };
        // SAFETY: the endpoint is alive (see the Send impl); the buffer is
        // device memory the device keeps until the completion.
        unsafe { (*self.ep).obj.send(&op) }
    }

    fn poll(&self, out: &mut Vec<Completion>) {
        if let Some(cq) = self.cq.as_ref() {
            let sz = cq.entry_size();
            let mut buf = [0u8; 16 * 64];
            let n = (buf.len() / sz.max(1)).max(1);
            match cq.read(&mut buf, n, None) {
                Ok(k) => out.extend((0..k).map(|i| decode(&buf[i * sz..(i + 1) * sz]))),
                Err(e) if e.0 == FI_EAVAIL => {
                    if let Ok((info, _)) = cq.readerr(None, self.api_version) {
                        let b = &info.base;
                        out.push(Completion { op_context: b.op_context as u64, flags: b.flags, len: b.len as u64, buf: b.buf as u64, data: b.data, tag: b.tag, err: info.err, prov_errno: info.prov_errno });
                    }
                }
                Err(_) => {}
            }
        }
        if let Some((host, dev)) = self.cntr.as_ref() {
            let (v, e) = (host.read(), host.readerr());
            let mut s = self.seen.lock().unwrap_or_else(|e| e.into_inner());
            if v > s.0 {
                dev.add(v - s.0);
            }
            if e > s.1 {
                dev.add_err(e - s.1);
            }
            *s = (v.max(s.0), e.max(s.1));
        }
    }
}

/// `fi_ep_export_xpu`. The XPU CQ and counter bound to the endpoint may be
/// exported before or after it: whichever export comes first makes their
/// device memory, which is stored only once this export has succeeded.
pub(crate) unsafe extern "C" fn ep_export_xpu(e: *mut fid_ep, flags: u64, out: *mut fid_xpu_ep) -> c_int {
    guard!(-FI_EOTHER, {
        null_check!(out);
        // SAFETY: checked against the endpoint ops table.
        let Some(h) = (unsafe { ep_handle(e) }) else { return -FI_EINVAL };
        if flags != 0 {
            return -FI_EBADFLAGS;
        }
        let mut t = eps();
        let Some((_, x)) = t.iter_mut().find(|(k, _)| *k == e as usize) else {
            rfabric_core::fi_warn!("shm", FI_LOG_EP_CTRL, "fi_ep_export_xpu: endpoint opened without an XPU context");
            return -FI_EINVAL;
        };
        if x.proxy.is_some() {
            return -FI_EALREADY;
        }
        if !x.enabled {
            return -FI_EOPBADSTATE;
        }
        let wq = match x.ctx.work_queue(256) {
            Ok(q) => Arc::new(q),
            Err(err) => return err.to_c(),
        };
        let mut o = objs();
        // A bound host CQ or counter (not in the table) stays its owner's.
        let ring = match x.cq.as_ref().and_then(|(k, _)| find(&mut o, *k)).map(|c| c.ring()) {
            None | Some(Ok(None)) => None,
            Some(Ok(Some(r))) => Some(r),
            Some(Err(err)) => return err.to_c(),
        };
        let words = match x.cntr.as_ref().and_then(|(k, _)| find(&mut o, *k)).map(|c| c.words()) {
            None | Some(Ok(None)) => None,
            Some(Ok(Some(w))) => Some(w),
            Some(Err(err)) => return err.to_c(),
        };
        let target = EpTarget {
            ep: h,
            cq: if ring.is_some() { x.cq.as_ref().map(|c| c.1.clone()) } else { None },
            cntr: match (x.cntr.as_ref(), words.as_ref()) {
                (Some((_, host)), Some((w, _))) => Some((host.clone(), w.clone())),
                _ => None,
            },
            seen: Mutex::new((0, 0)),
            api_version: x.ctx.api_version,
        };
        if let Some((host, _)) = target.cntr.as_ref() {
            *target.seen.lock().unwrap_or_else(|e| e.into_inner()) = (host.read(), host.readerr());
        }
        let handle = wq.handle();
        match Proxy::spawn(wq, Arc::new(target), ring.as_ref().map(|r| r.0.clone()), None) {
            Ok(p) => x.proxy = Some(p),
            Err(err) => return err.to_c(),
        }
        // Memory made here is the objects' own from now on: their exports
        // hand it out.
        if let (Some((r, true)), Some((k, _))) = (ring, x.cq.as_ref()) {
            if let Some(XpuObj::Cq { ring, .. }) = find(&mut o, *k) {
                *ring = Some(r);
            }
        }
        if let (Some((w, true)), Some((k, _))) = (words, x.cntr.as_ref()) {
            if let Some(XpuObj::Cntr { words, .. }) = find(&mut o, *k) {
                *words = Some(w);
            }
        }
        // SAFETY: out non-NULL, a fid_xpu_ep.
        unsafe { out.write(fid_xpu_ep { fid: handle }) };
        0
    })
}

/// # Safety
/// `e` NULL or a fid.
unsafe fn ep_handle<'a>(e: *mut fid_ep) -> Option<&'a EpHandle> {
    // SAFETY: caller.
    unsafe { EpHandle::from_fid(e) }
}

/// `fi_av_lookup2`: with `FI_XPU` and a context, the raw address device
/// code passes as a destination is the `fi_addr_t` itself (the host proxy
/// translates it); without `FI_XPU`, as `fi_av_lookup`.
pub(crate) unsafe extern "C" fn av_lookup2(av: *mut fid_av, fi_addr: fi_addr_t, addr: *mut c_void, addrlen: *mut usize, flags: u64, ctx: *mut fid_xpu_ctx) -> c_int {
    guard!(-FI_EOTHER, {
        null_check!(addrlen);
        // SAFETY: checked against the AV ops table.
        let Some(a) = (unsafe { AvHandle::from_fid(av) }) else { return -FI_EINVAL };
        // SAFETY: addrlen non-NULL.
        let len = unsafe { *addrlen };
        if flags & !FI_XPU != 0 {
            return -FI_EBADFLAGS;
        }
        if flags & FI_XPU == 0 {
            if !addr.is_null() || len == 0 {
                // SAFETY: addr holds len bytes (caller).
                let buf = unsafe { std::slice::from_raw_parts_mut(addr as *mut u8, if addr.is_null() { 0 } else { len }) };
                return match a.obj.lookup(fi_addr, buf) {
                    Ok(n) => {
                        // SAFETY: addrlen non-NULL.
                        unsafe { *addrlen = n };
                        0
                    }
                    Err(e) => e.to_c(),
                };
            }
            return -FI_EINVAL;
        }
        // SAFETY: NULL or the application's handle, checked before use.
        match unsafe { ctx_of(ctx) } {
            Ok(Some(_)) => {}
            _ => return -FI_EINVAL,
        }
        // The entry must exist.
        let mut probe = [0u8; 256];
        if let Err(e) = a.obj.lookup(fi_addr, &mut probe) {
            return e.to_c();
        }
        // SAFETY: addrlen non-NULL.
        unsafe { *addrlen = rfabric_core::xpu::AV_ADDR_SIZE };
        if len < rfabric_core::xpu::AV_ADDR_SIZE || addr.is_null() {
            return -FI_ETOOSMALL;
        }
        // SAFETY: addr holds at least 8 bytes.
        unsafe { (addr as *mut u64).write_unaligned(fi_addr) };
        0
    })
}

/// `fi_control` on a memory region: `FI_GET_MR_XPU_DESC` (what
/// `fi_mr_get_xpu_desc` sends). The raw descriptor is the region's 8-byte
/// key; anything else is `-FI_ENOSYS`.
pub(crate) unsafe extern "C" fn mr_control(f: *mut fid, cmd: c_int, arg: *mut c_void) -> c_int {
    guard!(-FI_EOTHER, {
        // SAFETY: checked against the MR ops table.
        let Some(mr) = (unsafe { crate::mr::MrHandle::from_fid(f) }) else { return -FI_EINVAL };
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
        match unsafe { ctx_of(d.ctx) } {
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
