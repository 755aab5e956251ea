//! Reliable-connected queue pairs with their connections made by
//! librdmacm: the thin layer an `FI_EP_MSG` endpoint (and an RDM layer over
//! connected transports) is built on. Nothing here has run on RDMA
//! hardware; the call sequences are checked against recording stand-ins
//! of libibverbs and librdmacm (`tests_rc.rs`).
//!
//! - `Cm`: an event channel (`rdma_create_event_channel`), whose fd turns
//!   readable when an event is queued; `Cm::next_event` copies an event
//!   (with its private data) and acknowledges it.
//! - Active side: `connect` (`rdma_create_id`, `rdma_resolve_addr`,
//!   `ADDR_RESOLVED`, `rdma_resolve_route`, `ROUTE_RESOLVED`,
//!   `rdma_create_qp`, `rdma_connect` with private data, `ESTABLISHED`).
//! - Passive side: `Listener` (`rdma_bind_addr`, `rdma_listen`), its
//!   `CONNECT_REQUEST`s as `ConnRequest`s, which `accept` (`rdma_create_qp`,
//!   `rdma_accept`, `ESTABLISHED`) or `reject` (`rdma_reject` with private
//!   data).
//! - `RcConn`: the connected QP. Sends, receives, RDMA writes (with or
//!   without immediate data) and reads go through the header's inline
//!   `ibv_post_send`/`ibv_post_recv`, i.e. the context's ops table; a
//!   `disconnect` is `rdma_disconnect`.
//!
//! One `Cm` per connection or listener: its events are waited for in
//! order, blocking on the channel. An `FI_EP_MSG` endpoint would instead
//! poll the channel fd from its EQ and drive the same steps one event at a
//! time.

use rfabric_ibverbs::inline;
use rfabric_ibverbs::sys::*;
use rfabric_ibverbs::{Cq, Pd, RdmaCm, VerbsError};
use std::net::SocketAddr;
use std::ptr::NonNull;
use std::sync::Arc;

/// How long address and route resolution may take (ms).
pub const RESOLVE_TIMEOUT_MS: i32 = 2000;
/// The most private data `rdma_connect`/`rdma_accept` carry on RC over
/// InfiniBand (`rdma_connect(3)`: 56 bytes; RoCE the same).
pub const MAX_PRIVATE_DATA: usize = 56;

/// An event channel.
pub struct Cm {
    pub(crate) cm: RdmaCm,
    ch: NonNull<rdma_event_channel>,
}

// SAFETY: librdmacm's channels and ids may be used from any thread; the
// pointer is only handed to librdmacm.
unsafe impl Send for Cm {}
// SAFETY: as above.
unsafe impl Sync for Cm {}

/// One connection-manager event, copied out of librdmacm's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CmEvent {
    /// `RDMA_CM_EVENT_*`
    pub event: u32,
    pub status: i32,
    pub id: usize,
    pub listen_id: usize,
    /// The peer's private data (`CONNECT_REQUEST`, `ESTABLISHED` on the
    /// active side, `REJECTED`).
    pub private_data: Vec<u8>,
}

impl Drop for Cm {
    fn drop(&mut self) {
        // SAFETY: from rdma_create_event_channel, destroyed once, after
        // every id on it (each `CmId` holds the `Cm`).
        unsafe { (self.cm.fns().destroy_event_channel)(self.ch.as_ptr()) };
    }
}

impl Cm {
    pub fn new(cm: &RdmaCm) -> Result<Arc<Cm>, VerbsError> {
        // SAFETY: no arguments; the result is checked.
        let ch = unsafe { (cm.fns().create_event_channel)() };
        let ch = NonNull::new(ch).ok_or_else(|| VerbsError::last("rdma_create_event_channel"))?;
        Ok(Arc::new(Cm { cm: cm.clone(), ch }))
    }

    /// The channel's fd (readable when an event is queued).
    pub fn fd(&self) -> i32 {
        // SAFETY: a live channel.
        unsafe { (*self.ch.as_ptr()).fd }
    }

    /// The next event, acknowledged.
    pub fn next_event(&self) -> Result<CmEvent, VerbsError> {
        let mut ev: *mut rdma_cm_event = std::ptr::null_mut();
        // SAFETY: a live channel; `ev` is writable.
        let rc = unsafe { (self.cm.fns().get_cm_event)(self.ch.as_ptr(), &mut ev) };
        if rc != 0 || ev.is_null() {
            return Err(VerbsError::last("rdma_get_cm_event"));
        }
        // SAFETY: librdmacm's event, valid until acknowledged below.
        let e = unsafe { &*ev };
        // SAFETY: `conn` is the member for RC events; its private data is
        // NULL or `private_data_len` readable bytes, valid until the ack.
        let private_data = unsafe {
            let c = e.param.conn;
            if c.private_data.is_null() {
                Vec::new()
            } else {
                std::slice::from_raw_parts(c.private_data.cast::<u8>(), usize::from(c.private_data_len)).to_vec()
            }
        };
        let out = CmEvent { event: e.event, status: e.status, id: e.id as usize, listen_id: e.listen_id as usize, private_data };
        // SAFETY: the event of get_cm_event, acknowledged once.
        unsafe { (self.cm.fns().ack_cm_event)(ev) };
        Ok(out)
    }

    /// The next event, which must be `want` for `id`; anything else is
    /// the error it stands for.
    fn expect(&self, id: &CmId, want: u32, call: &'static str) -> Result<CmEvent, VerbsError> {
        let e = self.next_event()?;
        if e.event == want && e.id == id.as_ptr() as usize {
            return Ok(e);
        }
        let errno = match e.event {
            RDMA_CM_EVENT_REJECTED => libc::ECONNREFUSED,
            RDMA_CM_EVENT_UNREACHABLE | RDMA_CM_EVENT_ADDR_ERROR | RDMA_CM_EVENT_ROUTE_ERROR => libc::EHOSTUNREACH,
            _ if e.status < 0 => -e.status,
            _ => libc::EPROTO,
        };
        Err(VerbsError::new(call, errno))
    }

    pub(crate) fn create_id(self: &Arc<Self>) -> Result<CmId, VerbsError> {
        let mut id: *mut rdma_cm_id = std::ptr::null_mut();
        // SAFETY: a live channel; `id` is writable; no user context.
        let rc = unsafe { (self.cm.fns().create_id)(self.ch.as_ptr(), &mut id, std::ptr::null_mut(), RDMA_PS_TCP) };
        VerbsError::check("rdma_create_id", rc)?;
        let id = NonNull::new(id).ok_or(VerbsError::new("rdma_create_id", libc::EIO))?;
        Ok(CmId { cm: self.clone(), id, qp: false })
    }
}

/// A connection-manager id (`rdma_create_id`, or a connection request's);
/// `rdma_destroy_qp` (if it has one) and `rdma_destroy_id` on drop.
pub struct CmId {
    pub(crate) cm: Arc<Cm>,
    id: NonNull<rdma_cm_id>,
    qp: bool,
}

// SAFETY: as for `Cm`.
unsafe impl Send for CmId {}
// SAFETY: as for `Cm`.
unsafe impl Sync for CmId {}

impl Drop for CmId {
    fn drop(&mut self) {
        let f = self.cm.cm.fns();
        // SAFETY: a live id of this library, its QP destroyed before it,
        // each once.
        unsafe {
            if self.qp {
                (f.destroy_qp)(self.id.as_ptr());
            }
            (f.destroy_id)(self.id.as_ptr());
        }
    }
}

impl CmId {
    /// An id librdmacm handed out with a `CONNECT_REQUEST` on `cm`.
    ///
    /// # Safety
    /// `id` is that live id, owned by nobody else.
    pub(crate) unsafe fn from_request(cm: &Arc<Cm>, id: NonNull<rdma_cm_id>) -> CmId {
        CmId { cm: cm.clone(), id, qp: false }
    }

    pub fn as_ptr(&self) -> *mut rdma_cm_id {
        self.id.as_ptr()
    }

    /// `rdma_create_qp`: an RC QP on the id's device, in `pd`.
    pub(crate) fn create_qp(&mut self, pd: &Pd, send_cq: &Cq, recv_cq: &Cq, cap: ibv_qp_cap) -> Result<(), VerbsError> {
        self.create_qp_srq(pd, send_cq, recv_cq, cap, None)
    }

    /// `rdma_create_qp` with the receives of `srq` when given (the caller
    /// keeps `srq` alive until the QP is destroyed).
    pub(crate) fn create_qp_srq(&mut self, pd: &Pd, send_cq: &Cq, recv_cq: &Cq, cap: ibv_qp_cap, srq: Option<&rfabric_ibverbs::Srq>) -> Result<(), VerbsError> {
        let srq = srq.map_or(std::ptr::null_mut(), |s| s.as_ptr());
        let mut attr = ibv_qp_init_attr { send_cq: send_cq.as_ptr(), recv_cq: recv_cq.as_ptr(), srq, cap, qp_type: IBV_QPT_RC, ..Default::default() };
        // SAFETY: a live id, PD and CQs of one device; `attr` readable and
        // writable (librdmacm writes the capabilities back).
        let rc = unsafe { (self.cm.cm.fns().create_qp)(self.as_ptr(), pd.as_ptr(), &mut attr) };
        VerbsError::check("rdma_create_qp", rc)?;
        self.qp = true;
        Ok(())
    }
}

/// `struct sockaddr_in`/`sockaddr_in6` of `a`.
pub(crate) fn sockaddr(a: &SocketAddr) -> libc::sockaddr_in6 {
    // Big enough for both; the family says which.
    // SAFETY: all-zero is a valid sockaddr_in6.
    let mut s: libc::sockaddr_in6 = unsafe { std::mem::zeroed() };
    match a {
        SocketAddr::V4(v4) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: v4.port().to_be(),
                sin_addr: libc::in_addr { s_addr: u32::from(*v4.ip()).to_be() },
                sin_zero: [0; 8],
            };
            // SAFETY: a sockaddr_in fits in a sockaddr_in6 (16 <= 28 bytes).
            unsafe { std::ptr::write((&mut s as *mut libc::sockaddr_in6).cast::<libc::sockaddr_in>(), sin) };
        }
        SocketAddr::V6(v6) => {
            s.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            s.sin6_port = v6.port().to_be();
            s.sin6_addr.s6_addr = v6.ip().octets();
            s.sin6_scope_id = v6.scope_id();
        }
    }
    s
}

/// Connection parameters with `data` as private data (at most
/// `MAX_PRIVATE_DATA` bytes) and the usual RC retry settings.
pub(crate) fn conn_param(data: &[u8]) -> Result<rdma_conn_param, VerbsError> {
    if data.len() > MAX_PRIVATE_DATA {
        return Err(VerbsError::new("rdma_connect", libc::EINVAL));
    }
    Ok(rdma_conn_param {
        private_data: if data.is_empty() { std::ptr::null() } else { data.as_ptr().cast() },
        private_data_len: data.len() as u8,
        responder_resources: 1,
        initiator_depth: 1,
        flow_control: 1,
        retry_count: 7,
        // 7: retry forever on receiver-not-ready.
        rnr_retry_count: 7,
        ..Default::default()
    })
}

/// The resources a connection's QP is made in.
#[derive(Clone)]
pub struct QpRes {
    pub pd: Pd,
    pub send_cq: Cq,
    pub recv_cq: Cq,
    pub cap: ibv_qp_cap,
}

/// Connects to `dst`: resolves address and route, creates the QP, sends
/// `data` as private data, waits for `ESTABLISHED`. The returned event's
/// private data is the peer's answer.
pub fn connect(cm: &Arc<Cm>, dst: &SocketAddr, res: &QpRes, data: &[u8]) -> Result<(RcConn, Vec<u8>), VerbsError> {
    let mut param = conn_param(data)?;
    let mut id = cm.create_id()?;
    let mut dst = sockaddr(dst);
    // SAFETY: a live id; `dst` is a sockaddr of its family; no source.
    let rc = unsafe { (cm.cm.fns().resolve_addr)(id.as_ptr(), std::ptr::null_mut(), (&mut dst as *mut libc::sockaddr_in6).cast(), RESOLVE_TIMEOUT_MS) };
    VerbsError::check("rdma_resolve_addr", rc)?;
    cm.expect(&id, RDMA_CM_EVENT_ADDR_RESOLVED, "rdma_resolve_addr")?;
    // SAFETY: a live id whose address is resolved.
    let rc = unsafe { (cm.cm.fns().resolve_route)(id.as_ptr(), RESOLVE_TIMEOUT_MS) };
    VerbsError::check("rdma_resolve_route", rc)?;
    cm.expect(&id, RDMA_CM_EVENT_ROUTE_RESOLVED, "rdma_resolve_route")?;
    id.create_qp(&res.pd, &res.send_cq, &res.recv_cq, res.cap)?;
    // SAFETY: a live id with a QP; `param` and its private data live
    // across the call.
    let rc = unsafe { (cm.cm.fns().connect)(id.as_ptr(), &mut param) };
    VerbsError::check("rdma_connect", rc)?;
    let e = cm.expect(&id, RDMA_CM_EVENT_ESTABLISHED, "rdma_connect")?;
    Ok((RcConn::new(id, res.clone())?, e.private_data))
}

/// A listening id (`rdma_bind_addr`, `rdma_listen`).
pub struct Listener {
    cm: Arc<Cm>,
    id: CmId,
}

/// A `CONNECT_REQUEST`: a new id, not yet accepted or rejected (dropping it
/// destroys the id, which rejects the request).
pub struct ConnRequest {
    cm: Arc<Cm>,
    id: CmId,
    /// The peer's private data.
    pub private_data: Vec<u8>,
}

impl Listener {
    pub fn listen(cm: &Arc<Cm>, addr: &SocketAddr, backlog: i32) -> Result<Listener, VerbsError> {
        let id = cm.create_id()?;
        let mut a = sockaddr(addr);
        // SAFETY: a live id; `a` is a sockaddr of its family.
        let rc = unsafe { (cm.cm.fns().bind_addr)(id.as_ptr(), (&mut a as *mut libc::sockaddr_in6).cast()) };
        VerbsError::check("rdma_bind_addr", rc)?;
        // SAFETY: a live, bound id.
        let rc = unsafe { (cm.cm.fns().listen)(id.as_ptr(), backlog) };
        VerbsError::check("rdma_listen", rc)?;
        Ok(Listener { cm: cm.clone(), id })
    }

    /// The listening `rdma_cm_id`.
    pub fn id(&self) -> *mut rdma_cm_id {
        self.id.as_ptr()
    }

    /// The next connection request (blocks on the channel).
    pub fn request(&self) -> Result<ConnRequest, VerbsError> {
        let e = self.cm.next_event()?;
        if e.event != RDMA_CM_EVENT_CONNECT_REQUEST || e.listen_id != self.id.as_ptr() as usize {
            return Err(VerbsError::new("rdma_get_cm_event", libc::EPROTO));
        }
        let id = NonNull::new(e.id as *mut rdma_cm_id).ok_or(VerbsError::new("rdma_get_cm_event", libc::EPROTO))?;
        Ok(ConnRequest { cm: self.cm.clone(), id: CmId { cm: self.cm.clone(), id, qp: false }, private_data: e.private_data })
    }
}

impl ConnRequest {
    /// Creates the QP and accepts with `data` as private data; waits for
    /// `ESTABLISHED`.
    pub fn accept(mut self, res: &QpRes, data: &[u8]) -> Result<RcConn, VerbsError> {
        let mut param = conn_param(data)?;
        self.id.create_qp(&res.pd, &res.send_cq, &res.recv_cq, res.cap)?;
        // SAFETY: the request's id with its QP; `param` lives across the call.
        let rc = unsafe { (self.cm.cm.fns().accept)(self.id.as_ptr(), &mut param) };
        VerbsError::check("rdma_accept", rc)?;
        self.cm.expect(&self.id, RDMA_CM_EVENT_ESTABLISHED, "rdma_accept")?;
        RcConn::new(self.id, res.clone())
    }

    /// `rdma_reject` with `data` as private data.
    pub fn reject(self, data: &[u8]) -> Result<(), VerbsError> {
        if data.len() > MAX_PRIVATE_DATA {
            return Err(VerbsError::new("rdma_reject", libc::EINVAL));
        }
        let p = if data.is_empty() { std::ptr::null() } else { data.as_ptr().cast() };
        // SAFETY: the request's id; `data` lives across the call.
        let rc = unsafe { (self.cm.cm.fns().reject)(self.id.as_ptr(), p, data.len() as u8) };
        VerbsError::check("rdma_reject", rc)
    }
}

/// A connected RC queue pair.
pub struct RcConn {
    id: CmId,
    _res: QpRes,
    qp: NonNull<ibv_qp>,
}

// SAFETY: as for `Cm`; posting to a QP from any thread is allowed.
unsafe impl Send for RcConn {}
// SAFETY: as above.
unsafe impl Sync for RcConn {}

/// A remote buffer: its address (`FI_MR_VIRT_ADDR`) and key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Remote {
    pub addr: u64,
    pub rkey: u32,
}

/// One signalled work request through `ibv_post_send` (the header's inline
/// call, through the context's ops table); its return code.
///
/// # Safety
/// `qp` is a live queue pair; `sge` names registered memory (by lkey) that
/// stays valid until the completion (inline sends: until the call returns).
#[allow(clippy::too_many_arguments)]
pub unsafe fn post_send(qp: *mut ibv_qp, wr_id: u64, sge: &[ibv_sge], opcode: u32, flags: u32, imm: Option<u32>, remote: Option<Remote>) -> i32 {
    let mut wr = ibv_send_wr {
        wr_id,
        // libibverbs only reads the list (the header's `sg_list` is not
        // const for history's sake).
        sg_list: sge.as_ptr().cast_mut(),
        num_sge: sge.len() as i32,
        opcode,
        send_flags: flags | IBV_SEND_SIGNALED,
        ..Default::default()
    };
    if let Some(imm) = imm {
        wr.imm = ibv_send_wr_imm { imm_data: imm.to_be() };
    }
    if let Some(r) = remote {
        wr.wr = ibv_send_wr_wr { rdma: ibv_send_wr_rdma { remote_addr: r.addr, rkey: r.rkey } };
    }
    let mut bad = std::ptr::null_mut();
    // SAFETY: a live QP (caller); `wr` and `sge` live across the call (the
    // provider copies them into its queue) and are only read; the memory
    // promise is the caller's.
    unsafe { inline::ibv_post_send(qp, &mut wr, &mut bad) }
}

impl RcConn {
    fn new(id: CmId, res: QpRes) -> Result<RcConn, VerbsError> {
        // SAFETY: a live id with a QP (`create_qp` succeeded).
        let qp = unsafe { (*id.as_ptr()).qp };
        let qp = NonNull::new(qp).ok_or(VerbsError::new("rdma_create_qp", libc::EIO))?;
        Ok(RcConn { qp, id, _res: res })
    }

    pub fn qp(&self) -> *mut ibv_qp {
        self.qp.as_ptr()
    }

    /// One work request through `ibv_post_send`.
    ///
    /// # Safety
    /// `sge` names registered memory (by lkey) that stays valid until the
    /// completion (inline sends: until the call returns).
    unsafe fn post(&self, wr_id: u64, sge: &[ibv_sge], opcode: u32, flags: u32, imm: Option<u32>, remote: Option<Remote>) -> Result<(), VerbsError> {
        // SAFETY: a live connected QP; the memory promise is the caller's.
        let rc = unsafe { post_send(self.qp(), wr_id, sge, opcode, flags, imm, remote) };
        VerbsError::check("ibv_post_send", rc)
    }

    /// A send (`IBV_WR_SEND`, or `SEND_WITH_IMM` with `imm`); `inline_data`
    /// copies the bytes into the work request (`IBV_SEND_INLINE`).
    ///
    /// # Safety
    /// As `post`.
    pub unsafe fn send(&self, wr_id: u64, sge: &[ibv_sge], imm: Option<u32>, inline_data: bool) -> Result<(), VerbsError> {
        let op = if imm.is_some() { IBV_WR_SEND_WITH_IMM } else { IBV_WR_SEND };
        // SAFETY: forwarded.
        unsafe { self.post(wr_id, sge, op, if inline_data { IBV_SEND_INLINE } else { 0 }, imm, None) }
    }

    /// An RDMA write (`fi_write`; with `imm`, `fi_writedata`).
    ///
    /// # Safety
    /// As `post`.
    pub unsafe fn write(&self, wr_id: u64, sge: &[ibv_sge], remote: Remote, imm: Option<u32>) -> Result<(), VerbsError> {
        let op = if imm.is_some() { IBV_WR_RDMA_WRITE_WITH_IMM } else { IBV_WR_RDMA_WRITE };
        // SAFETY: forwarded.
        unsafe { self.post(wr_id, sge, op, 0, imm, Some(remote)) }
    }

    /// An RDMA read (`fi_read`).
    ///
    /// # Safety
    /// As `post`; the local memory is writable.
    pub unsafe fn read(&self, wr_id: u64, sge: &[ibv_sge], remote: Remote) -> Result<(), VerbsError> {
        // SAFETY: forwarded.
        unsafe { self.post(wr_id, sge, IBV_WR_RDMA_READ, 0, None, Some(remote)) }
    }

    /// A receive buffer (`ibv_post_recv`).
    ///
    /// # Safety
    /// `sge` names registered, writable memory that stays valid until the
    /// completion.
    pub unsafe fn recv(&self, wr_id: u64, sge: &[ibv_sge]) -> Result<(), VerbsError> {
        let mut wr = ibv_recv_wr { wr_id, sg_list: sge.as_ptr().cast_mut(), num_sge: sge.len() as i32, ..Default::default() };
        let mut bad = std::ptr::null_mut();
        // SAFETY: a live QP; `wr` and `sge` live across the call.
        let rc = unsafe { inline::ibv_post_recv(self.qp(), &mut wr, &mut bad) };
        VerbsError::check("ibv_post_recv", rc)
    }

    /// `rdma_disconnect`; the peer sees `DISCONNECTED`.
    pub fn disconnect(&self) -> Result<(), VerbsError> {
        // SAFETY: a live, connected id.
        let rc = unsafe { (self.id.cm.cm.fns().disconnect)(self.id.as_ptr()) };
        VerbsError::check("rdma_disconnect", rc)
    }
}
