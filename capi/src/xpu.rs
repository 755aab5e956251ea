//! The XPU side of the handles (`fi_xpu(3)`): the `fid_xpu_ctx` handle
//! (`query`, `close`), the context an open call names, and the XPU state of
//! CQs, counters and endpoints opened with a context, which those handles
//! keep as fields ([`XpuCq`], [`XpuCntr`], [`XpuEp`]). The context, queues
//! and proxy are `rfabric_core::xpu`; contexts are opened by the domain's
//! provider (`Domain::xpu_ctx`).
//!
//! Device memory of an XPU CQ or counter is made by the first export that
//! needs it: the object's own, or that of an endpoint bound to it, so the
//! three exports may come in any order (an endpoint's proxy and the device
//! then share one ring or one pair of counter words, whoever made it).
//! Lock order: an endpoint's XPU state, then its CQ's, then its counter's.

use crate::handle::{put_cstr, Handle, RefCount};
use libc::{c_char, c_int, c_void};
use rfabric_core::abi::*;
use rfabric_core::provider::{CompletionQueue, Counter, Descs, Endpoint, Iov, RmaIov, RmaOp, TxOp};
use rfabric_core::xpu::{Completion, CompletionRing, Proxy, WorkRequest, XpuCounter, XpuCtx, XpuTarget, OP_SEND, OP_TSEND, OP_WRITE};
use std::sync::{Arc, Mutex, MutexGuard};

fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

// ---- the context handle -------------------------------------------------

#[repr(C)]
pub(crate) struct XpuCtxHandle {
    fid: fid_xpu_ctx,
    pub(crate) ctx: Arc<XpuCtx>,
    /// The domain's count of children.
    parent: *const RefCount,
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
        unsafe { put_cstr(buf, len, &format!("xpu_ctx {} device {}", h.ctx.provider.name, h.ctx.device)) };
        0
    })
}

unsafe extern "C" fn ctx_close(f: *mut fid) -> c_int {
    guard!(-FI_EOTHER, {
        // SAFETY: checked against our ops table.
        let Some(h) = (unsafe { XpuCtxHandle::from_fid(f) }) else { return -FI_EINVAL };
        // SAFETY: the domain outlives its children (its refcount).
        unsafe { (*h.parent).put() };
        // SAFETY: made by publish_ctx; closed once.
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

/// Hand a context the domain's provider opened to the application.
///
/// # Safety
/// `out` is writable; `parent` (the domain's count of children) outlives
/// the context.
pub(crate) unsafe fn publish_ctx(ctx: Arc<XpuCtx>, parent: &RefCount, context: *mut c_void, out: *mut *mut fid_xpu_ctx) -> c_int {
    parent.get();
    let b = Box::new(XpuCtxHandle {
        fid: fid_xpu_ctx {
            fid: fid { fclass: FI_CLASS_XPU_CTX, context, ops: XpuCtxHandle::fi_ops_ptr() },
            ops: &XPU_CTX_OPS as *const fi_ops_xpu_ctx as *mut fi_ops_xpu_ctx,
        },
        ctx,
        parent,
    });
    // SAFETY: out writable (caller).
    unsafe { *out = XpuCtxHandle::into_raw(b) as *mut fid_xpu_ctx };
    0
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

/// The context named by `fi_info.ep_attr.xpu_ctx`, checked.
pub(crate) fn info_ctx(info: &rfabric_core::info::Info) -> Result<Option<Arc<XpuCtx>>, c_int> {
    let p = info.ep_attr.as_ref().map_or(0, |e| e.xpu_ctx) as *mut fid_xpu_ctx;
    // SAFETY: NULL or the application's context handle (compared against
    // our ops table before use).
    unsafe { ctx_of(p) }
}

// ---- CQs and counters ---------------------------------------------------

/// The XPU state of a CQ opened with an XPU context.
pub(crate) struct XpuCq {
    ctx: Arc<XpuCtx>,
    entries: usize,
    /// The ring (once made) and whether the CQ's own export handed it out.
    st: Mutex<(Option<Arc<CompletionRing>>, bool)>,
}

impl XpuCq {
    /// For a CQ of `fi_cq_attr.size` `size`.
    pub(crate) fn new(ctx: Arc<XpuCtx>, size: usize) -> XpuCq {
        let entries = if size == 0 { 1024 } else { size.clamp(2, 1 << 20).next_power_of_two() };
        XpuCq { ctx, entries, st: Mutex::new((None, false)) }
    }

    /// `fi_cq_export_xpu`: the ring (made now unless an endpoint's export
    /// made it first) and the handle to it.
    pub(crate) fn export(&self, flags: u64) -> Result<fid_xpu, c_int> {
        if flags != 0 {
            return Err(-FI_EBADFLAGS);
        }
        let mut st = locked(&self.st);
        if st.1 {
            return Err(-FI_EALREADY);
        }
        let ring = match st.0.take() {
            Some(r) => r,
            None => Arc::new(self.ctx.completion_ring(self.entries).map_err(|e| e.to_c())?),
        };
        st.1 = true;
        Ok(st.0.insert(ring).handle())
    }
}

/// The XPU state of a counter opened with an XPU context.
pub(crate) struct XpuCntr {
    ctx: Arc<XpuCtx>,
    /// The words (once made) and whether the counter's own export handed
    /// them out.
    st: Mutex<(Option<Arc<XpuCounter>>, bool)>,
}

impl XpuCntr {
    pub(crate) fn new(ctx: Arc<XpuCtx>) -> XpuCntr {
        XpuCntr { ctx, st: Mutex::new((None, false)) }
    }

    /// `fi_cntr_export_xpu`: as [`XpuCq::export`].
    pub(crate) fn export(&self, flags: u64) -> Result<fid_xpu, c_int> {
        if flags != 0 {
            return Err(-FI_EBADFLAGS);
        }
        let mut st = locked(&self.st);
        if st.1 {
            return Err(-FI_EALREADY);
        }
        let words = match st.0.take() {
            Some(w) => w,
            None => Arc::new(self.ctx.counter().map_err(|e| e.to_c())?),
        };
        st.1 = true;
        Ok(st.0.insert(words).handle())
    }
}

/// The export (`fi_cq_export_xpu`, ...) of an object opened without a
/// context: unknown flags first, as for one with a context.
pub(crate) fn not_xpu(what: &str, flags: u64) -> c_int {
    if flags != 0 {
        return -FI_EBADFLAGS;
    }
    rfabric_core::fi_warn!("core", FI_LOG_DOMAIN, "{}: object was opened without an XPU context", what);
    -FI_EINVAL
}

// ---- endpoints ----------------------------------------------------------

/// The XPU state of an endpoint opened with an XPU context.
pub(crate) struct XpuEp {
    st: Mutex<EpState>,
}

/// A bound CQ, with its XPU state when it has one (a bound host CQ stays
/// its owner's).
type BoundCq = (Arc<dyn CompletionQueue>, Option<Arc<XpuCq>>);
/// A bound counter, as [`BoundCq`].
type BoundCntr = (Arc<dyn Counter>, Option<Arc<XpuCntr>>);

struct EpState {
    ctx: Arc<XpuCtx>,
    enabled: bool,
    cq: Option<BoundCq>,
    cntr: Option<BoundCntr>,
    proxy: Option<Proxy>,
}

impl XpuEp {
    pub(crate) fn new(ctx: Arc<XpuCtx>) -> XpuEp {
        XpuEp { st: Mutex::new(EpState { ctx, enabled: false, cq: None, cntr: None, proxy: None }) }
    }

    /// After a successful `fi_ep_bind` of a CQ.
    pub(crate) fn bound_cq(&self, obj: &Arc<dyn CompletionQueue>, xpu: Option<&Arc<XpuCq>>) {
        locked(&self.st).cq = Some((obj.clone(), xpu.cloned()));
    }

    /// After a successful `fi_ep_bind` of a counter.
    pub(crate) fn bound_cntr(&self, obj: &Arc<dyn Counter>, xpu: Option<&Arc<XpuCntr>>) {
        locked(&self.st).cntr = Some((obj.clone(), xpu.cloned()));
    }

    /// After a successful `fi_enable`.
    pub(crate) fn enabled(&self) {
        locked(&self.st).enabled = true;
    }

    /// The first thing `fi_close` does to the endpoint: stops its proxy.
    pub(crate) fn closing(&self) {
        let proxy = locked(&self.st).proxy.take();
        drop(proxy); // joins the proxy thread outside the lock
    }

    /// `fi_ep_export_xpu`. The XPU CQ and counter bound to the endpoint may
    /// be exported before or after it: whichever export comes first makes
    /// their device memory, which is stored only once this export has
    /// succeeded.
    ///
    /// # Safety
    /// `ep` is the endpoint's provider object, which lives until
    /// [`XpuEp::closing`] has returned.
    pub(crate) unsafe fn export(&self, ep: *const dyn Endpoint, flags: u64) -> Result<fid_xpu, c_int> {
        if flags != 0 {
            return Err(-FI_EBADFLAGS);
        }
        let mut x = locked(&self.st);
        if x.proxy.is_some() {
            return Err(-FI_EALREADY);
        }
        if !x.enabled {
            return Err(-FI_EOPBADSTATE);
        }
        let wq = Arc::new(x.ctx.work_queue(256).map_err(|e| e.to_c())?);
        // The memory of a bound XPU CQ or counter: theirs, or made now
        // (true: not stored yet).
        let xcq = x.cq.as_ref().and_then(|(_, q)| q.clone());
        let mut cq_st = xcq.as_ref().map(|q| (q, locked(&q.st)));
        let ring = match cq_st.as_ref() {
            None => None,
            Some((_, st)) if st.0.is_some() => st.0.clone().map(|r| (r, false)),
            Some((q, _)) => Some((Arc::new(q.ctx.completion_ring(q.entries).map_err(|e| e.to_c())?), true)),
        };
        let xcntr = x.cntr.as_ref().and_then(|(_, c)| c.clone());
        let mut cntr_st = xcntr.as_ref().map(|c| (c, locked(&c.st)));
        let words = match cntr_st.as_ref() {
            None => None,
            Some((_, st)) if st.0.is_some() => st.0.clone().map(|w| (w, false)),
            Some((c, _)) => Some((Arc::new(c.ctx.counter().map_err(|e| e.to_c())?), true)),
        };
        let target = EpTarget {
            ep,
            cq: if ring.is_some() { x.cq.as_ref().map(|c| c.0.clone()) } else { None },
            cntr: match (x.cntr.as_ref(), words.as_ref()) {
                (Some((host, _)), Some((w, _))) => Some((host.clone(), w.clone())),
                _ => None,
            },
            seen: Mutex::new((0, 0)),
            api_version: x.ctx.api_version,
        };
        if let Some((host, _)) = target.cntr.as_ref() {
            *locked(&target.seen) = (host.read(), host.readerr());
        }
        let handle = wq.handle();
        x.proxy = Some(Proxy::spawn(wq, Arc::new(target), ring.as_ref().map(|r| r.0.clone()), None).map_err(|e| e.to_c())?);
        // Memory made here is the objects' own from now on: their exports
        // hand it out.
        if let (Some((r, true)), Some((_, st))) = (ring, cq_st.as_mut()) {
            st.0 = Some(r);
        }
        if let (Some((w, true)), Some((_, st))) = (words, cntr_st.as_mut()) {
            st.0 = Some(w);
        }
        Ok(handle)
    }
}

/// The proxy's view of the real endpoint.
struct EpTarget {
    ep: *const dyn Endpoint,
    cq: Option<Arc<dyn CompletionQueue>>,
    cntr: Option<(Arc<dyn Counter>, Arc<XpuCounter>)>,
    seen: Mutex<(u64, u64)>,
    api_version: u32,
}

// SAFETY: the endpoint object is Send + Sync (trait bound) and outlives the
// proxy: XpuEp::closing, the first thing fi_close does to an endpoint,
// stops the proxy before the handle and its object are freed.
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
                let op = RmaOp { iov: &iov, desc: rfabric_core::provider::Descs::NONE, rma: &rma, dest: w.dest, context: w.context as usize, data: 0, flags: 0, no_completion: false };
                // SAFETY: as for sends below: the endpoint is alive and the
                // device keeps the buffer until the completion.
                return unsafe { (*self.ep).rma_write(&op) };
            }
            _ => return Err(rfabric_core::error::EINVAL),
        };
        let op = TxOp { iov: &iov, desc: Descs::NONE, dest: w.dest, context: w.context as usize, tag: w.tag, data: 0, flags: 0, tagged, no_completion: false };
        // SAFETY: the endpoint is alive (see the Send impl); the buffer is
        // device memory the device keeps until the completion.
        unsafe { (*self.ep).send(&op) }
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

