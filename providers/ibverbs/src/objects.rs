//! Thin RAII wrappers: an opened device (`Context`), protection domain
//! (`Pd`), memory region (`Mr`), completion queue (`Cq`) and queue pair
//! (`Qp`). Each holds what it was created from (a QP its PD and CQs, a PD
//! and a CQ their context, an MR its PD), so its `Drop` destroys it before
//! its parents: `ibv_destroy_qp`, `ibv_dereg_mr`, `ibv_destroy_cq`,
//! `ibv_dealloc_pd`, `ibv_close_device`. A destroy that fails in `Drop` is
//! ignored (there is no one to tell; rdma-core then keeps the object).
//!
//! libibverbs is thread safe (every verb may be called from any thread), so
//! these are `Send` and `Sync`.

use crate::error::VerbsError;
use crate::info::EfaInfo;
use crate::inline;
use crate::sys::*;
use crate::verbs::Lib;
use libc::{c_int, c_void};
use std::os::fd::{AsRawFd, BorrowedFd};
use std::ptr::NonNull;
use std::sync::Arc;

pub(crate) struct CtxInner {
    lib: Arc<Lib>,
    ctx: NonNull<ibv_context>,
    name: String,
}

// SAFETY: libibverbs contexts may be used from any thread; the pointer is
// only handed to libibverbs.
unsafe impl Send for CtxInner {}
// SAFETY: as above.
unsafe impl Sync for CtxInner {}

impl Drop for CtxInner {
    fn drop(&mut self) {
        // SAFETY: `ctx` came from ibv_open_device of this library and is
        // closed once; everything created on it holds this `CtxInner`, so it
        // is gone.
        unsafe { (self.lib.fns.close_device)(self.ctx.as_ptr()) };
    }
}

/// An opened device (`ibv_open_device`); closed when the last of it and
/// everything created on it is dropped.
#[derive(Clone)]
pub struct Context {
    inner: Arc<CtxInner>,
}

impl Context {
    pub(crate) fn new(lib: Arc<Lib>, ctx: NonNull<ibv_context>, name: String) -> Context {
        Context { inner: Arc::new(CtxInner { lib, ctx, name }) }
    }

    /// The device's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The `struct ibv_context *`, valid while `self` lives.
    pub fn as_ptr(&self) -> *mut ibv_context {
        self.inner.ctx.as_ptr()
    }

    fn lib(&self) -> &Lib {
        &self.inner.lib
    }

    /// `ibv_query_device`
    pub fn query_device(&self) -> Result<ibv_device_attr, VerbsError> {
        let mut attr = ibv_device_attr::default();
        // SAFETY: a live context of this library; `attr` is writable.
        let rc = unsafe { (self.lib().fns.query_device)(self.as_ptr(), &mut attr) };
        VerbsError::check("ibv_query_device", rc).map(|()| attr)
    }

    /// `ibv_query_port`, as the header's macro does it (`inline::ibv_query_port`).
    pub fn query_port(&self, port: u8) -> Result<ibv_port_attr, VerbsError> {
        let mut attr = ibv_port_attr::default();
        // SAFETY: a live context of this library; `attr` is writable.
        let rc = unsafe { inline::ibv_query_port(&self.lib().fns, self.as_ptr(), port, &mut attr) };
        VerbsError::check("ibv_query_port", rc).map(|()| attr)
    }

    /// `ibv_query_gid`
    pub fn query_gid(&self, port: u8, index: i32) -> Result<ibv_gid, VerbsError> {
        let mut gid = ibv_gid::default();
        // SAFETY: a live context of this library; `gid` is writable.
        let rc = unsafe { (self.lib().fns.query_gid)(self.as_ptr(), port, index, &mut gid) };
        VerbsError::check("ibv_query_gid", rc).map(|()| gid)
    }

    /// `efadv_query_device` (`EOPNOTSUPP` without libefa; libefa answers
    /// `EOPNOTSUPP` for a device that is not EFA).
    pub fn efa_query_device(&self) -> Result<EfaInfo, VerbsError> {
        let efa = self.lib().efa.as_ref().ok_or(VerbsError::unsupported("efadv_query_device"))?;
        let mut attr = efadv_device_attr::default();
        let inlen = std::mem::size_of::<efadv_device_attr>() as u32;
        // SAFETY: a live context; `attr` is writable for `inlen` bytes.
        let rc = unsafe { (efa.query_device)(self.as_ptr(), &mut attr, inlen) };
        VerbsError::check("efadv_query_device", rc).map(|()| EfaInfo::from(&attr))
    }

    /// `ibv_alloc_pd`
    pub fn alloc_pd(&self) -> Result<Pd, VerbsError> {
        // SAFETY: a live context of this library.
        let pd = unsafe { (self.lib().fns.alloc_pd)(self.as_ptr()) };
        let pd = NonNull::new(pd).ok_or_else(|| VerbsError::last("ibv_alloc_pd"))?;
        Ok(Pd { inner: Arc::new(PdInner { ctx: self.inner.clone(), pd }) })
    }

    /// `ibv_create_cq(context, cqe, NULL, NULL, comp_vector)`: a CQ of at
    /// least `cqe` entries, without a completion channel.
    pub fn create_cq(&self, cqe: i32, comp_vector: i32) -> Result<Cq, VerbsError> {
        self.create_cq_on(cqe, None, comp_vector)
    }

    /// `ibv_create_cq` with completions notified on `channel` (after
    /// `Cq::req_notify`).
    pub fn create_cq_on(&self, cqe: i32, channel: Option<&CompChannel>, comp_vector: i32) -> Result<Cq, VerbsError> {
        let ch = channel.map_or(std::ptr::null_mut(), |c| c.ch.as_ptr());
        // SAFETY: a live context of this library, and a live channel of it
        // (held by the CQ below); no user context.
        let cq = unsafe { (self.lib().fns.create_cq)(self.as_ptr(), cqe, std::ptr::null_mut(), ch, comp_vector) };
        let cq = NonNull::new(cq).ok_or_else(|| VerbsError::last("ibv_create_cq"))?;
        Ok(Cq { inner: Arc::new(CqInner { ctx: self.inner.clone(), cq, _channel: channel.map(|c| c.inner.clone()) }) })
    }

    /// `ibv_create_comp_channel`
    pub fn create_comp_channel(&self) -> Result<CompChannel, VerbsError> {
        // SAFETY: a live context of this library.
        let ch = unsafe { (self.lib().fns.create_comp_channel)(self.as_ptr()) };
        let ch = NonNull::new(ch).ok_or_else(|| VerbsError::last("ibv_create_comp_channel"))?;
        Ok(CompChannel { ch, inner: Arc::new(ChanInner { ctx: self.inner.clone(), ch }) })
    }
}

pub(crate) struct PdInner {
    ctx: Arc<CtxInner>,
    pd: NonNull<ibv_pd>,
}

// SAFETY: as for `CtxInner`.
unsafe impl Send for PdInner {}
// SAFETY: as for `CtxInner`.
unsafe impl Sync for PdInner {}

impl Drop for PdInner {
    fn drop(&mut self) {
        // SAFETY: from ibv_alloc_pd, deallocated once; its MRs and QPs hold
        // this `PdInner`, so they are gone.
        unsafe { (self.ctx.lib.fns.dealloc_pd)(self.pd.as_ptr()) };
    }
}

/// A protection domain (`ibv_alloc_pd`).
#[derive(Clone)]
pub struct Pd {
    inner: Arc<PdInner>,
}

impl Pd {
    /// The `struct ibv_pd *`, valid while `self` lives.
    pub fn as_ptr(&self) -> *mut ibv_pd {
        self.inner.pd.as_ptr()
    }

    fn lib(&self) -> &Lib {
        &self.inner.ctx.lib
    }

    fn mr(&self, call: &'static str, mr: *mut ibv_mr) -> Result<Mr, VerbsError> {
        let mr = NonNull::new(mr).ok_or_else(|| VerbsError::last(call))?;
        // SAFETY: a region libibverbs just returned; its fields are set.
        let m = unsafe { *mr.as_ptr() };
        Ok(Mr { pd: self.inner.clone(), mr, lkey: m.lkey, rkey: m.rkey, addr: m.addr as usize, length: m.length })
    }

    /// `ibv_reg_mr(pd, addr, length, access)` (`IBV_ACCESS_*`), the way the
    /// header's macro does it for a run-time mask: `ibv_reg_mr_iova2` with
    /// `iova = addr`.
    ///
    /// # Safety
    /// `addr..addr + length` must stay mapped, and hold nothing Rust code
    /// relies on not changing where `access` lets the device or peers
    /// write, until the returned `Mr` is dropped.
    pub unsafe fn reg_mr(&self, addr: *mut c_void, length: usize, access: u32) -> Result<Mr, VerbsError> {
        // SAFETY: a live PD of this library; the memory promise is the caller's.
        let mr = unsafe { inline::ibv_reg_mr(&self.lib().fns, self.as_ptr(), addr, length, access) };
        self.mr("ibv_reg_mr", mr)
    }

    /// `ibv_reg_dmabuf_mr(pd, offset, length, iova, fd, access)`: registers
    /// `length` bytes at `offset` of the dma-buf `fd` (the kernel takes its
    /// own reference: `fd` may be closed afterwards), addressed by peers as
    /// `iova`. `EOPNOTSUPP` when libibverbs predates it.
    pub fn reg_dmabuf_mr(
        &self,
        offset: u64,
        length: usize,
        iova: u64,
        fd: BorrowedFd<'_>,
        access: u32,
    ) -> Result<Mr, VerbsError> {
        let f = self.lib().fns.reg_dmabuf_mr.ok_or(VerbsError::unsupported("ibv_reg_dmabuf_mr"))?;
        // SAFETY: a live PD of this library; the region is the dma-buf's
        // memory, not this process's, and `fd` is open for the call.
        let mr = unsafe { f(self.as_ptr(), offset, length, iova, fd.as_raw_fd(), access as c_int) };
        self.mr("ibv_reg_dmabuf_mr", mr)
    }

    /// `ibv_create_qp`: a QP of `qp_type` (`IBV_QPT_RC`, ...) on this PD.
    /// The capabilities it got are `Qp::cap`.
    pub fn create_qp(&self, send_cq: &Cq, recv_cq: &Cq, qp_type: u32, cap: ibv_qp_cap, sq_sig_all: bool) -> Result<Qp, VerbsError> {
        let mut attr = ibv_qp_init_attr {
            send_cq: send_cq.as_ptr(),
            recv_cq: recv_cq.as_ptr(),
            cap,
            qp_type,
            sq_sig_all: sq_sig_all as c_int,
            ..Default::default()
        };
        // SAFETY: a live PD and live CQs of one context of this library;
        // `attr` is readable and writable (libibverbs writes the caps back).
        let qp = unsafe { (self.lib().fns.create_qp)(self.as_ptr(), &mut attr) };
        self.qp("ibv_create_qp", qp, send_cq, recv_cq, attr.cap)
    }

    /// `efadv_create_qp_ex` for an SRD QP (`IBV_QPT_DRIVER`,
    /// `EFADV_QP_DRIVER_TYPE_SRD`) on this PD, with `send_ops_flags` 0: it is
    /// driven with `Qp::post_send`, not the `ibv_wr_*` API (not wrapped
    /// here). `EOPNOTSUPP` without libefa.
    pub fn create_efa_srd_qp(&self, send_cq: &Cq, recv_cq: &Cq, cap: ibv_qp_cap, sq_sig_all: bool) -> Result<Qp, VerbsError> {
        let efa = self.lib().efa.as_ref().ok_or(VerbsError::unsupported("efadv_create_qp_ex"))?;
        let mut attr = ibv_qp_init_attr_ex {
            send_cq: send_cq.as_ptr(),
            recv_cq: recv_cq.as_ptr(),
            cap,
            qp_type: IBV_QPT_DRIVER,
            sq_sig_all: sq_sig_all as c_int,
            comp_mask: IBV_QP_INIT_ATTR_PD,
            pd: self.as_ptr(),
            ..Default::default()
        };
        let mut efa_attr = efadv_qp_init_attr { driver_qp_type: EFADV_QP_DRIVER_TYPE_SRD, ..Default::default() };
        let inlen = std::mem::size_of::<efadv_qp_init_attr>() as u32;
        let ctx = self.inner.ctx.ctx.as_ptr();
        // SAFETY: a live context, PD and CQs of this library; both attribute
        // structs are readable and writable, `inlen` is the size of the one
        // libefa reads.
        let qp = unsafe { (efa.create_qp_ex)(ctx, &mut attr, &mut efa_attr, inlen) };
        self.qp("efadv_create_qp_ex", qp, send_cq, recv_cq, attr.cap)
    }

    /// `ibv_create_srq`: a shared receive queue on this PD for `max_wr`
    /// receives of up to `max_sge` entries each; QPs made with it (their
    /// `srq` attribute) take their receives from it.
    pub fn create_srq(&self, max_wr: u32, max_sge: u32) -> Result<Srq, VerbsError> {
        let mut attr = ibv_srq_init_attr { attr: ibv_srq_attr { max_wr, max_sge, srq_limit: 0 }, ..Default::default() };
        // SAFETY: a live PD of this library; `attr` is readable and
        // writable (libibverbs writes the sizes it gave back).
        let srq = unsafe { (self.lib().fns.create_srq)(self.as_ptr(), &mut attr) };
        let srq = NonNull::new(srq).ok_or_else(|| VerbsError::last("ibv_create_srq"))?;
        Ok(Srq { inner: Arc::new(SrqInner { pd: self.inner.clone(), srq }) })
    }

    /// `ibv_create_ah`: an address handle for sends from a UD or SRD QP
    /// of this PD (`wr.ud.ah`).
    pub fn create_ah(&self, attr: &ibv_ah_attr) -> Result<Ah, VerbsError> {
        let mut attr = *attr;
        // SAFETY: a live PD of this library; `attr` is a valid attribute
        // struct the call only reads.
        let ah = unsafe { (self.lib().fns.create_ah)(self.as_ptr(), &mut attr) };
        let ah = NonNull::new(ah).ok_or_else(|| VerbsError::last("ibv_create_ah"))?;
        Ok(Ah { pd: self.inner.clone(), ah })
    }

    fn qp(&self, call: &'static str, qp: *mut ibv_qp, send_cq: &Cq, recv_cq: &Cq, cap: ibv_qp_cap) -> Result<Qp, VerbsError> {
        let qp = NonNull::new(qp).ok_or_else(|| VerbsError::last(call))?;
        // SAFETY: a QP libibverbs just returned; its fields are set.
        let qp_num = unsafe { (*qp.as_ptr()).qp_num };
        Ok(Qp {
            pd: self.inner.clone(),
            _send_cq: send_cq.inner.clone(),
            _recv_cq: recv_cq.inner.clone(),
            qp,
            qp_num,
            cap,
        })
    }
}

/// An address handle (`ibv_create_ah`); `ibv_destroy_ah` on drop, before
/// its PD.
pub struct Ah {
    pd: Arc<PdInner>,
    ah: NonNull<ibv_ah>,
}

// SAFETY: as for `CtxInner`.
unsafe impl Send for Ah {}
// SAFETY: as for `CtxInner`.
unsafe impl Sync for Ah {}

impl Ah {
    pub fn as_ptr(&self) -> *mut ibv_ah {
        self.ah.as_ptr()
    }
}

impl Drop for Ah {
    fn drop(&mut self) {
        // SAFETY: from ibv_create_ah, destroyed once, before its PD (held
        // by `self.pd`).
        unsafe { (self.pd.ctx.lib.fns.destroy_ah)(self.ah.as_ptr()) };
    }
}

/// A registered memory region (`ibv_reg_mr`, `ibv_reg_dmabuf_mr`);
/// `ibv_dereg_mr` on drop.
pub struct Mr {
    pd: Arc<PdInner>,
    mr: NonNull<ibv_mr>,
    lkey: u32,
    rkey: u32,
    addr: usize,
    length: usize,
}

// SAFETY: as for `CtxInner`; the cached fields are plain values.
unsafe impl Send for Mr {}
// SAFETY: as above.
unsafe impl Sync for Mr {}

impl Mr {
    pub fn as_ptr(&self) -> *mut ibv_mr {
        self.mr.as_ptr()
    }
    pub fn lkey(&self) -> u32 {
        self.lkey
    }
    pub fn rkey(&self) -> u32 {
        self.rkey
    }
    /// `ibv_mr.addr` (for a dma-buf region, what libibverbs reports).
    pub fn addr(&self) -> usize {
        self.addr
    }
    pub fn length(&self) -> usize {
        self.length
    }
}

impl Drop for Mr {
    fn drop(&mut self) {
        // SAFETY: from ibv_reg_mr*/ibv_reg_dmabuf_mr, deregistered once,
        // before its PD (held by `self.pd`).
        unsafe { (self.pd.ctx.lib.fns.dereg_mr)(self.mr.as_ptr()) };
    }
}

pub(crate) struct ChanInner {
    ctx: Arc<CtxInner>,
    ch: NonNull<ibv_comp_channel>,
}

// SAFETY: as for `CtxInner`.
unsafe impl Send for ChanInner {}
// SAFETY: as for `CtxInner`.
unsafe impl Sync for ChanInner {}

impl Drop for ChanInner {
    fn drop(&mut self) {
        // SAFETY: from ibv_create_comp_channel, destroyed once, after every
        // CQ on it (each holds this `ChanInner`).
        unsafe { (self.ctx.lib.fns.destroy_comp_channel)(self.ch.as_ptr()) };
    }
}

/// A completion channel (`ibv_create_comp_channel`); destroyed when it and
/// every CQ on it are dropped.
#[derive(Clone)]
pub struct CompChannel {
    ch: NonNull<ibv_comp_channel>,
    inner: Arc<ChanInner>,
}

// SAFETY: as for `CtxInner`.
unsafe impl Send for CompChannel {}
// SAFETY: as for `CtxInner`.
unsafe impl Sync for CompChannel {}

impl CompChannel {
    pub fn as_ptr(&self) -> *mut ibv_comp_channel {
        self.ch.as_ptr()
    }

    /// The fd that turns readable on a notified completion.
    pub fn fd(&self) -> i32 {
        // SAFETY: a live channel.
        unsafe { (*self.ch.as_ptr()).fd }
    }

    /// `ibv_get_cq_event` for every event queued (the fd should be
    /// non-blocking, else this waits for one), each acknowledged with
    /// `ibv_ack_cq_events`; how many there were.
    pub fn drain(&self) -> usize {
        let f = &self.inner.ctx.lib.fns;
        let mut n = 0;
        loop {
            let mut cq = std::ptr::null_mut();
            let mut cq_ctx = std::ptr::null_mut();
            // SAFETY: a live channel; both out-parameters writable.
            if unsafe { (f.get_cq_event)(self.as_ptr(), &mut cq, &mut cq_ctx) } != 0 || cq.is_null() {
                return n;
            }
            // SAFETY: the CQ the event came from, live (the event keeps it).
            unsafe { (f.ack_cq_events)(cq, 1) };
            n += 1;
        }
    }
}

pub(crate) struct CqInner {
    ctx: Arc<CtxInner>,
    cq: NonNull<ibv_cq>,
    _channel: Option<Arc<ChanInner>>,
}

// SAFETY: as for `CtxInner`.
unsafe impl Send for CqInner {}
// SAFETY: as for `CtxInner`.
unsafe impl Sync for CqInner {}

impl Drop for CqInner {
    fn drop(&mut self) {
        // SAFETY: from ibv_create_cq, destroyed once; QPs using it hold this
        // `CqInner`, so they are gone.
        unsafe { (self.ctx.lib.fns.destroy_cq)(self.cq.as_ptr()) };
    }
}

/// A completion queue (`ibv_create_cq`).
#[derive(Clone)]
pub struct Cq {
    inner: Arc<CqInner>,
}

impl Cq {
    pub fn as_ptr(&self) -> *mut ibv_cq {
        self.inner.cq.as_ptr()
    }

    /// `ibv_poll_cq` into `wc`: how many completions it wrote.
    pub fn poll(&self, wc: &mut [ibv_wc]) -> Result<usize, VerbsError> {
        let n = c_int::try_from(wc.len()).unwrap_or(c_int::MAX);
        // SAFETY: a live CQ; `wc` is writable for `n` entries.
        let rc = unsafe { inline::ibv_poll_cq(self.as_ptr(), n, wc.as_mut_ptr()) };
        // A negative return is an error; providers return -errno or -1.
        usize::try_from(rc).map_err(|_| VerbsError::new("ibv_poll_cq", if rc < -1 { -rc } else { libc::EIO }))
    }

    /// `ibv_req_notify_cq`
    pub fn req_notify(&self, solicited_only: bool) -> Result<(), VerbsError> {
        // SAFETY: a live CQ.
        let rc = unsafe { inline::ibv_req_notify_cq(self.as_ptr(), solicited_only as c_int) };
        VerbsError::check("ibv_req_notify_cq", rc)
    }
}

/// A queue pair (`ibv_create_qp`, `efadv_create_qp_ex`); `ibv_destroy_qp`
/// on drop, before its CQs and PD.
pub struct Qp {
    pd: Arc<PdInner>,
    _send_cq: Arc<CqInner>,
    _recv_cq: Arc<CqInner>,
    qp: NonNull<ibv_qp>,
    qp_num: u32,
    cap: ibv_qp_cap,
}

// SAFETY: as for `CtxInner`.
unsafe impl Send for Qp {}
// SAFETY: as for `CtxInner`.
unsafe impl Sync for Qp {}

/// A post that failed: the error, and the first work request not posted.
pub struct PostError<W> {
    pub error: VerbsError,
    pub bad_wr: *mut W,
}

impl<W> std::fmt::Debug for PostError<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostError").field("error", &self.error).field("bad_wr", &self.bad_wr).finish()
    }
}

impl Qp {
    pub fn as_ptr(&self) -> *mut ibv_qp {
        self.qp.as_ptr()
    }
    pub fn qp_num(&self) -> u32 {
        self.qp_num
    }
    /// The capabilities the QP was created with (libibverbs' answer).
    pub fn cap(&self) -> ibv_qp_cap {
        self.cap
    }

    /// `ibv_modify_qp(qp, attr, attr_mask)` (`IBV_QP_*` mask).
    pub fn modify(&self, attr: &ibv_qp_attr, attr_mask: c_int) -> Result<(), VerbsError> {
        let mut attr = *attr;
        // SAFETY: a live QP of this library; `attr` is a valid attribute struct.
        let rc = unsafe { (self.pd.ctx.lib.fns.modify_qp)(self.as_ptr(), &mut attr, attr_mask) };
        VerbsError::check("ibv_modify_qp", rc)
    }

    /// `ibv_post_send`
    ///
    /// # Safety
    /// `wr` must be a valid list of work requests; the memory their
    /// scatter/gather entries (and inline data) name must be registered
    /// and stay valid until their completions.
    pub unsafe fn post_send(&self, wr: *mut ibv_send_wr) -> Result<(), PostError<ibv_send_wr>> {
        let mut bad = std::ptr::null_mut();
        // SAFETY: a live QP; `wr` valid (caller); `bad` writable.
        let rc = unsafe { inline::ibv_post_send(self.as_ptr(), wr, &mut bad) };
        VerbsError::check("ibv_post_send", rc).map_err(|error| PostError { error, bad_wr: bad })
    }

    /// `ibv_post_recv`
    ///
    /// # Safety
    /// As for `post_send`.
    pub unsafe fn post_recv(&self, wr: *mut ibv_recv_wr) -> Result<(), PostError<ibv_recv_wr>> {
        let mut bad = std::ptr::null_mut();
        // SAFETY: a live QP; `wr` valid (caller); `bad` writable.
        let rc = unsafe { inline::ibv_post_recv(self.as_ptr(), wr, &mut bad) };
        VerbsError::check("ibv_post_recv", rc).map_err(|error| PostError { error, bad_wr: bad })
    }
}

impl Drop for Qp {
    fn drop(&mut self) {
        // SAFETY: from ibv_create_qp/efadv_create_qp_ex, destroyed once,
        // before the CQs and PD this struct holds.
        unsafe { (self.pd.ctx.lib.fns.destroy_qp)(self.qp.as_ptr()) };
    }
}

struct SrqInner {
    pd: Arc<PdInner>,
    srq: NonNull<ibv_srq>,
}

// SAFETY: as for `CtxInner`.
unsafe impl Send for SrqInner {}
// SAFETY: as for `CtxInner`.
unsafe impl Sync for SrqInner {}

impl Drop for SrqInner {
    fn drop(&mut self) {
        // SAFETY: from ibv_create_srq, destroyed once; the QPs made with it
        // are gone (their owners hold a `Srq` and destroy them first).
        unsafe { (self.pd.ctx.lib.fns.destroy_srq)(self.srq.as_ptr()) };
    }
}

/// A shared receive queue (`ibv_create_srq`); `ibv_destroy_srq` when the
/// last clone is dropped, before its PD. Whoever makes a QP with it keeps
/// a clone until the QP is destroyed.
#[derive(Clone)]
pub struct Srq {
    inner: Arc<SrqInner>,
}

impl Srq {
    /// The `struct ibv_srq *`, valid while `self` lives.
    pub fn as_ptr(&self) -> *mut ibv_srq {
        self.inner.srq.as_ptr()
    }

    /// `ibv_post_srq_recv`
    ///
    /// # Safety
    /// As for `Qp::post_send`.
    pub unsafe fn post_recv(&self, wr: *mut ibv_recv_wr) -> Result<(), PostError<ibv_recv_wr>> {
        let mut bad = std::ptr::null_mut();
        // SAFETY: a live SRQ; `wr` valid (caller); `bad` writable.
        let rc = unsafe { inline::ibv_post_srq_recv(self.as_ptr(), wr, &mut bad) };
        VerbsError::check("ibv_post_srq_recv", rc).map_err(|error| PostError { error, bad_wr: bad })
    }
}
