//! `FI_EP_MSG` on verbs: one RC queue pair per endpoint, its connection
//! made by librdmacm, its operations posted as work requests on the
//! application's registered buffers.
//!
//! - Connection management is driven from the EQ: binding an endpoint or a
//!   passive endpoint to an EQ makes every `fi_eq_read`/`fi_eq_sread` read
//!   its event channel (non-blocking) first (`EqBinding::drive`) and move
//!   the connection on one event at a time: `ADDR_RESOLVED` →
//!   `rdma_resolve_route`; `ROUTE_RESOLVED` → `rdma_create_qp`, the
//!   receives posted so far, `rdma_connect` with the CM data;
//!   `ESTABLISHED` → `FI_CONNECTED` (with the peer's data on the active
//!   side); `REJECTED` → an `FI_ECONNREFUSED` error event whose `err_data`
//!   is the peer's reject data; `DISCONNECTED` → `FI_SHUTDOWN`. No thread
//!   and no blocking wait.
//! - A passive endpoint's channel is shared with the endpoints accepted
//!   through it (librdmacm gives a request's id the listener's channel):
//!   whoever reads it hands each event to the id's owner (`Chan`).
//! - CM data is at most [`MAX_PRIVATE_DATA`] (56) bytes each way
//!   (`FI_OPT_CM_DATA_SIZE`); more is `-FI_EINVAL` with a log line.
//! - Data path: `fi_send*`/`fi_recv*` are `IBV_WR_SEND` /
//!   `ibv_post_recv` on the buffers as given, each buffer's local key read
//!   from its descriptor (`FI_MR_LOCAL`: a missing or foreign descriptor
//!   is `-FI_EINVAL`); `fi_senddata` is `SEND_WITH_IMM`; `fi_inject*` is
//!   an inline send (`IBV_SEND_INLINE`, at most [`INJECT_SIZE`] bytes, no
//!   descriptor needed); `fi_write`/`fi_writedata`/`fi_read` are
//!   `RDMA_WRITE`/`RDMA_WRITE_WITH_IMM`/`RDMA_READ`. A write with remote
//!   CQ data consumes a posted receive at the target (`FI_RX_CQ_DATA`),
//!   whose completion carries the data. The work request and its
//!   scatter list live on the stack; no lock and no allocation, except for
//!   receives posted before the QP exists (the active side before its
//!   route is resolved, an accepted endpoint before `fi_enable` or
//!   `fi_accept`), which wait in a list under the endpoint's lock.
//! - Completions: a read of a bound CQ or counter polls the endpoint's
//!   verbs CQ (`ibv_poll_cq`) and writes the core CQ (`ProgressCq`) and
//!   counters (`ProgressCntr`). Work requests carry the operation's
//!   context as `wr_id`; operations that ask for no completion carry
//!   [`NO_COMPLETION`].
//! - Shared receive contexts (`fi_srx_context`) are SRQs
//!   (`ibv_create_srq`): their `fi_recv*` are `ibv_post_srq_recv`. An
//!   endpoint bound to one (before its QP exists: an active endpoint
//!   before its route is resolved, an accepted one before `fi_enable` or
//!   `fi_accept`, which make its QP) creates its QP with the SRQ, so its
//!   receives come from the SRQ and complete on its own verbs CQ, into
//!   the CQ bound to it for `FI_RECV`; `fi_recv` on it is
//!   `-FI_EOPBADSTATE`.
//!
//! Nothing here has run on RDMA hardware: it is checked against the
//! recording stand-ins of libibverbs and librdmacm and their loopback
//! fabric (`tests_msg.rs`).

use crate::provider::{VerbsDomain, NAME};
use crate::rc::{conn_param, sockaddr, Cm, CmEvent, CmId, MAX_PRIVATE_DATA, RESOLVE_TIMEOUT_MS};
use crate::rc_transport::parse_addr;
use rfabric_core::abi::*;
use rfabric_core::error::{Error, Result, EINVAL, ENOSYS};
use rfabric_core::info::Info;
use rfabric_core::objects::cq::{Completion, CqAttr, CqErrInfo, ErrCompletion};
use rfabric_core::objects::local_mr::{Descs, LocalRegs};
use rfabric_core::objects::progress::{Progress, ProgressCntr, ProgressCq};
use rfabric_core::provider::{AtomicKind, AtomicOp, Bind, CompletionQueue, ConnReq, Counter, EqBinding, Iov, PassiveEndpoint, RmaOp, RxOp, TxOp};
use rfabric_core::provider::Endpoint;
use rfabric_ibverbs::sys::*;
use rfabric_ibverbs::{inline, CompChannel, Cq, Pd, RdmaCm, Srq, VerbsError};
use std::any::Any;
use std::collections::HashMap;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};
use std::net::SocketAddr;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};

/// Largest `fi_inject*` (inline data of the QP).
pub const INJECT_SIZE: usize = 64;
/// Most buffers of one operation (`iov_limit`).
pub const IOV_LIMIT: usize = 4;
/// Work requests of each queue of an endpoint's QP (`tx_attr.size`,
/// `rx_attr.size`).
pub const QUEUE_DEPTH: u32 = 384;
/// The `wr_id` of work requests that generate no CQ entry (injects,
/// `FI_SELECTIVE_COMPLETION` without `FI_COMPLETION`). An operation whose
/// context is this value gets no CQ entry either.
pub const NO_COMPLETION: u64 = u64::MAX;
/// `IBV_WC_COMP_SWAP`, `IBV_WC_FETCH_ADD`.
const WC_COMP_SWAP: u32 = 3;
const WC_FETCH_ADD: u32 = 4;

fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn verr(e: VerbsError) -> Error {
    rfabric_core::fi_warn!(NAME, FI_LOG_EP_CTRL, "{}", e);
    Error(e.errno)
}

fn copy_out(bytes: &[u8], buf: &mut [u8]) -> usize {
    let n = bytes.len().min(buf.len());
    buf[..n].copy_from_slice(&bytes[..n]);
    bytes.len()
}

fn check_cm_data(data: &[u8], call: &str) -> Result<()> {
    if data.len() > MAX_PRIVATE_DATA {
        rfabric_core::fi_warn!(NAME, FI_LOG_EP_CTRL, "{}: {} bytes of CM data, at most {} fit (FI_OPT_CM_DATA_SIZE)", call, data.len(), MAX_PRIVATE_DATA);
        return Err(EINVAL);
    }
    Ok(())
}

fn getopt(level: i32, name: i32, buf: &mut [u8]) -> Result<usize> {
    if level != FI_OPT_ENDPOINT || name != FI_OPT_CM_DATA_SIZE {
        return Err(Error(FI_ENOPROTOOPT));
    }
    let v = MAX_PRIVATE_DATA.to_ne_bytes();
    if buf.len() < v.len() {
        return Err(Error(FI_ETOOSMALL));
    }
    buf[..v.len()].copy_from_slice(&v);
    Ok(v.len())
}

fn set_nonblocking(fd: i32) {
    // SAFETY: fcntl on the channel's fd; failure leaves it as it was.
    unsafe {
        let fl = libc::fcntl(fd, libc::F_GETFL);
        if fl >= 0 {
            libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK);
        }
    }
}

/// The sockaddr bytes at `off` of an id's route (`struct rdma_addr`:
/// the source address at 0, the destination at 128), if they hold one.
fn route_addr(id: &CmId, off: usize) -> Option<Vec<u8>> {
    // SAFETY: a live id; `route` is plain bytes of it.
    let route = unsafe { (*id.as_ptr()).route };
    let bytes: Vec<u8> = route.iter().flat_map(|w| w.to_ne_bytes()).collect();
    let b = bytes.get(off..off + 28)?;
    let fam = i32::from(u16::from_ne_bytes([b[0], b[1]]));
    match fam {
        libc::AF_INET => Some(b[..16].to_vec()),
        libc::AF_INET6 => Some(b[..28].to_vec()),
        _ => None,
    }
}

// ---------------------------------------------------------------- channel

/// What gets the events of one id.
trait CmOwner: Send + Sync {
    fn on_event(&self, e: CmEvent);
}

/// An event channel and the owners of its ids. Reading it (`pump`, the
/// EQ's progress) hands each event to its id's owner, `CONNECT_REQUEST`s
/// to the listener's.
pub(crate) struct Chan {
    cm: Arc<Cm>,
    owners: Mutex<HashMap<usize, Weak<dyn CmOwner>>>,
    /// One reader at a time, so an owner sees its events in order.
    pumping: Mutex<()>,
}

impl Chan {
    fn new(cm: &RdmaCm) -> Result<Arc<Chan>> {
        let cm = Cm::new(cm).map_err(verr)?;
        set_nonblocking(cm.fd());
        Ok(Arc::new(Chan { cm, owners: Mutex::new(HashMap::new()), pumping: Mutex::new(()) }))
    }
    fn own(&self, id: &CmId, o: Weak<dyn CmOwner>) {
        locked(&self.owners).insert(id.as_ptr() as usize, o);
    }
    fn disown(&self, id: &CmId) {
        locked(&self.owners).remove(&(id.as_ptr() as usize));
    }
    fn pump(&self) -> usize {
        let Ok(_one) = self.pumping.try_lock() else { return 0 };
        let mut n = 0;
        while let Ok(e) = self.cm.next_event() {
            n += 1;
            let key = if e.event == RDMA_CM_EVENT_CONNECT_REQUEST { e.listen_id } else { e.id };
            let owner = locked(&self.owners).get(&key).and_then(Weak::upgrade);
            match owner {
                Some(o) => o.on_event(e),
                None if e.event == RDMA_CM_EVENT_CONNECT_REQUEST => {
                    // Nobody listens any more: destroying the id rejects it.
                    if let Some(id) = NonNull::new(e.id as *mut rdma_cm_id) {
                        // SAFETY: the request's new id, owned by nobody else.
                        drop(unsafe { CmId::from_request(&self.cm, id) });
                    }
                }
                None => rfabric_core::fi_dbg!(NAME, FI_LOG_EP_CTRL, "CM event {} for an id that is gone", e.event),
            }
        }
        n
    }
}

impl Progress for Chan {
    fn progress(&self) -> usize {
        self.pump()
    }
}

// ---------------------------------------------------------------- passive

/// A connection request: the request's id, on the listener's channel.
pub struct VerbsReq {
    chan: Arc<Chan>,
    id: CmId,
}

struct PepInner {
    chan: Arc<Chan>,
    info: Info,
    st: Mutex<PepSt>,
}

struct PepSt {
    eq: Option<EqBinding>,
    addr: Option<SocketAddr>,
    listener: Option<CmId>,
}

impl CmOwner for PepInner {
    fn on_event(&self, e: CmEvent) {
        if e.event != RDMA_CM_EVENT_CONNECT_REQUEST {
            rfabric_core::fi_dbg!(NAME, FI_LOG_EP_CTRL, "passive endpoint: CM event {} ignored", e.event);
            return;
        }
        let Some(id) = NonNull::new(e.id as *mut rdma_cm_id) else { return };
        // SAFETY: the request's new id, owned by nobody else.
        let id = unsafe { CmId::from_request(&self.chan.cm, id) };
        let eq = locked(&self.st).eq.clone();
        let Some(eq) = eq else { return };
        let mut info = self.info.clone();
        info.dest_addr = route_addr(&id, 128);
        let req: ConnReq = Box::new(VerbsReq { chan: self.chan.clone(), id });
        let _ = eq.cm(NAME, FI_CONNREQ, Some(info), Some(req), &e.private_data);
    }
}

/// A passive endpoint (`fi_passive_ep`).
pub struct VerbsPep {
    inner: Arc<PepInner>,
}

pub fn passive_ep(cm: Option<&RdmaCm>, info: &Info) -> Result<Box<dyn PassiveEndpoint>> {
    let Some(cm) = cm else {
        rfabric_core::fi_warn!(NAME, FI_LOG_EP_CTRL, "fi_passive_ep: librdmacm is not loaded");
        return Err(Error(FI_ENODEV));
    };
    let addr = info.src_addr.as_deref().and_then(parse_addr);
    let chan = Chan::new(cm)?;
    Ok(Box::new(VerbsPep { inner: Arc::new(PepInner { chan, info: info.clone(), st: Mutex::new(PepSt { eq: None, addr, listener: None }) }) }))
}

impl PassiveEndpoint for VerbsPep {
    fn bind_eq(&self, eq: &EqBinding, flags: u64) -> Result<()> {
        if flags != 0 {
            return Err(Error(FI_EBADFLAGS));
        }
        locked(&self.inner.st).eq = Some(eq.clone());
        let w: Weak<dyn Progress> = Arc::downgrade(&self.inner.chan) as Weak<dyn Progress>;
        eq.drive(w);
        Ok(())
    }
    fn listen(&self) -> Result<()> {
        let mut st = locked(&self.inner.st);
        if st.eq.is_none() {
            rfabric_core::fi_warn!(NAME, FI_LOG_EP_CTRL, "fi_listen: no EQ bound");
            return Err(Error(FI_ENOEQ));
        }
        if st.listener.is_some() {
            return Ok(());
        }
        let Some(addr) = st.addr else {
            rfabric_core::fi_warn!(NAME, FI_LOG_EP_CTRL, "fi_listen: no address to listen on");
            return Err(EINVAL);
        };
        let cm = &self.inner.chan.cm;
        let id = cm.create_id().map_err(verr)?;
        let mut a = sockaddr(&addr);
        // SAFETY: a live id; `a` is a sockaddr of its family.
        let rc = unsafe { (cm.cm.fns().bind_addr)(id.as_ptr(), (&mut a as *mut libc::sockaddr_in6).cast()) };
        VerbsError::check("rdma_bind_addr", rc).map_err(verr)?;
        // SAFETY: a live, bound id.
        let rc = unsafe { (cm.cm.fns().listen)(id.as_ptr(), 128) };
        VerbsError::check("rdma_listen", rc).map_err(verr)?;
        let w: Weak<dyn CmOwner> = Arc::downgrade(&self.inner) as Weak<dyn CmOwner>;
        self.inner.chan.own(&id, w);
        st.listener = Some(id);
        Ok(())
    }
    fn reject(&self, req: ConnReq, data: &[u8]) -> Result<()> {
        check_cm_data(data, "fi_reject")?;
        let req = req.downcast::<VerbsReq>().map_err(|_| EINVAL)?;
        let p = if data.is_empty() { std::ptr::null() } else { data.as_ptr().cast() };
        // SAFETY: the request's live id; `data` lives across the call.
        let rc = unsafe { (req.chan.cm.cm.fns().reject)(req.id.as_ptr(), p, data.len() as u8) };
        VerbsError::check("rdma_reject", rc).map_err(verr)
    }
    fn getname(&self, buf: &mut [u8]) -> Result<usize> {
        let st = locked(&self.inner.st);
        if let Some(b) = st.listener.as_ref().and_then(|l| route_addr(l, 0)) {
            return Ok(copy_out(&b, buf));
        }
        let a = st.addr.ok_or(Error(FI_EADDRNOTAVAIL))?;
        Ok(copy_out(&crate::rc_transport::addr_bytes(&a), buf))
    }
    fn setname(&self, addr: &[u8]) -> Result<()> {
        let mut st = locked(&self.inner.st);
        if st.listener.is_some() {
            return Err(Error(FI_EOPBADSTATE));
        }
        st.addr = Some(parse_addr(addr).ok_or(EINVAL)?);
        Ok(())
    }
    fn getopt(&self, level: i32, name: i32, buf: &mut [u8]) -> Result<usize> {
        getopt(level, name, buf)
    }
    fn setopt(&self, _level: i32, _name: i32, _val: &[u8]) -> Result<()> {
        Err(Error(FI_ENOPROTOOPT))
    }
    fn close(&self) -> Result<()> {
        let l = locked(&self.inner.st).listener.take();
        if let Some(l) = l {
            self.inner.chan.disown(&l);
        }
        Ok(())
    }
}

// ---------------------------------------------------------------- endpoint

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Idle,
    Resolving,
    Routing,
    Connecting,
    /// An accepted request's endpoint, its QP made, before `fi_accept`.
    AcceptReady,
    Accepting,
    Connected,
    Down,
}

/// A receive waiting for the QP: `wr_id`, its scatter list.
type PendingRecv = (u64, [ibv_sge; IOV_LIMIT], usize);

struct Ctl {
    phase: Phase,
    eq: Option<EqBinding>,
    id: Option<CmId>,
    /// The SRQ of the shared receive context bound (dropped after `id`,
    /// whose QP uses it).
    srq: Option<Srq>,
    /// CM data of `fi_connect`, until `rdma_connect`.
    data: Vec<u8>,
    peer: Option<Vec<u8>>,
    pending: Vec<PendingRecv>,
}

#[derive(Default)]
struct Sinks {
    cq: Option<Arc<ProgressCq>>,
    selective: bool,
}

struct EpInner {
    /// Holds the id, whose QP is destroyed before the CQ below.
    ctl: Mutex<Ctl>,
    chan: Arc<Chan>,
    /// The QP once it exists; the data path reads it without a lock.
    qp: AtomicPtr<ibv_qp>,
    connected: AtomicBool,
    /// Bound to a shared receive context: receives are posted there.
    shared_rx: AtomicBool,
    vcq: Cq,
    pd: Pd,
    regs: Arc<LocalRegs>,
    cap: ibv_qp_cap,
    tx: OnceLock<Sinks>,
    rx: OnceLock<Sinks>,
    /// Counters: send, recv, read, write, remote write.
    cntrs: [OnceLock<Arc<ProgressCntr>>; 5],
}

const C_SEND: usize = 0;
const C_RECV: usize = 1;
const C_READ: usize = 2;
const C_WRITE: usize = 3;
const C_RWRITE: usize = 4;

/// A connected endpoint (`fi_endpoint` with `FI_EP_MSG`).
pub struct VerbsEp {
    inner: Arc<EpInner>,
    bound: Mutex<Vec<BoundTo>>,
}

enum BoundTo {
    Cq(Arc<VerbsCq>),
    Cntr(Arc<ProgressCntr>),
}

fn new_ep(d: &VerbsDomain, chan: Arc<Chan>, phase: Phase, id: Option<CmId>) -> Result<EpInner> {
    let vcq = d.context().create_cq_on((2 * QUEUE_DEPTH) as i32, Some(d.comp_channel()?), 0).map_err(verr)?;
    let cap = ibv_qp_cap { max_send_wr: QUEUE_DEPTH, max_recv_wr: QUEUE_DEPTH, max_send_sge: IOV_LIMIT as u32, max_recv_sge: IOV_LIMIT as u32, max_inline_data: INJECT_SIZE as u32 };
    Ok(EpInner {
        ctl: Mutex::new(Ctl { phase, eq: None, id, srq: None, data: Vec::new(), peer: None, pending: Vec::new() }),
        chan,
        qp: AtomicPtr::new(std::ptr::null_mut()),
        connected: AtomicBool::new(false),
        shared_rx: AtomicBool::new(false),
        vcq,
        pd: d.pd().clone(),
        regs: d.regs().clone(),
        cap,
        tx: OnceLock::new(),
        rx: OnceLock::new(),
        cntrs: Default::default(),
    })
}

/// `fi_endpoint` on a verbs domain.
pub fn endpoint(d: &VerbsDomain, info: &Info) -> Result<Box<dyn Endpoint>> {
    if info.ep_type() != FI_EP_MSG {
        return Err(ENOSYS);
    }
    let Some(cm) = d.rdmacm() else {
        rfabric_core::fi_warn!(NAME, FI_LOG_EP_CTRL, "fi_endpoint: librdmacm is not loaded");
        return Err(Error(FI_ENODEV));
    };
    let chan = Chan::new(cm)?;
    let inner = Arc::new(new_ep(d, chan, Phase::Idle, None)?);
    let mut peer = info.dest_addr.clone();
    peer.take_if(|p| parse_addr(p).is_none());
    locked(&inner.ctl).peer = peer;
    Ok(Box::new(VerbsEp { inner, bound: Mutex::new(Vec::new()) }))
}

/// `fi_srx_context` on a verbs domain: an SRQ of `attr.size` receives
/// (the endpoint default when 0) of at most `attr.iov_limit` buffers.
pub fn srx_context(d: &VerbsDomain, attr: &fi_rx_attr) -> Result<Box<dyn Endpoint>> {
    if attr.size > QUEUE_DEPTH as usize || attr.iov_limit > IOV_LIMIT {
        rfabric_core::fi_warn!(NAME, FI_LOG_EP_CTRL, "fi_srx_context: size {} (at most {}), iov_limit {} (at most {})", attr.size, QUEUE_DEPTH, attr.iov_limit, IOV_LIMIT);
        return Err(EINVAL);
    }
    if attr.caps & !(FI_MSG | FI_RECV) != 0 {
        rfabric_core::fi_warn!(NAME, FI_LOG_EP_CTRL, "fi_srx_context: caps {:#x} beyond FI_MSG | FI_RECV", attr.caps);
        return Err(Error(FI_EOPNOTSUPP));
    }
    let max_wr = if attr.size == 0 { QUEUE_DEPTH } else { attr.size as u32 };
    let sge = if attr.iov_limit == 0 { IOV_LIMIT } else { attr.iov_limit };
    let srq = d.pd().create_srq(max_wr, sge as u32).map_err(verr)?;
    Ok(Box::new(VerbsSrx { srq, regs: d.regs().clone(), iov_limit: sge }))
}

/// A shared receive context: an SRQ whose receives serve the QPs of every
/// endpoint bound to it.
pub struct VerbsSrx {
    srq: Srq,
    regs: Arc<LocalRegs>,
    iov_limit: usize,
}

impl Endpoint for VerbsSrx {
    fn as_any(&self) -> Option<&dyn Any> {
        Some(self)
    }

    unsafe fn recv(&self, op: &RxOp<'_>) -> Result<()> {
        if op.tagged {
            return Err(ENOSYS);
        }
        if op.iov.len() > self.iov_limit {
            rfabric_core::fi_warn!(NAME, FI_LOG_EP_DATA, "fi_recv: {} buffers, at most {} on this shared receive context", op.iov.len(), self.iov_limit);
            return Err(EINVAL);
        }
        // SAFETY: `op.desc` holds a value per buffer or is NULL (capi).
        let (sge, n) = unsafe { sges(&self.regs, op.iov, op.desc, true, "fi_recv")? };
        let mut wr = ibv_recv_wr { wr_id: op.context as u64, sg_list: sge.as_ptr().cast_mut(), num_sge: n as i32, ..Default::default() };
        // SAFETY: a live SRQ; `wr` and `sge` live across the call; the
        // application's buffers stay valid until their completions (the
        // trait's contract).
        match unsafe { self.srq.post_recv(&mut wr) } {
            Ok(()) => Ok(()),
            Err(e) => post_rc("ibv_post_srq_recv", e.error.errno),
        }
    }

    fn close(&self) -> Result<()> {
        Ok(())
    }
}

/// `fi_endpoint` with the info of an `FI_CONNREQ`: the QP is made on the
/// request's id by `fi_enable` or `fi_accept` (after a shared receive
/// context may be bound); receives posted before wait for it.
pub fn accept_endpoint(d: &VerbsDomain, _info: &Info, req: ConnReq) -> Result<Box<dyn Endpoint>> {
    let req = req.downcast::<VerbsReq>().map_err(|_| {
        rfabric_core::fi_warn!(NAME, FI_LOG_EP_CTRL, "fi_endpoint: the info's handle is not a verbs connection request");
        EINVAL
    })?;
    let VerbsReq { chan, id } = *req;
    let inner = new_ep(d, chan.clone(), Phase::AcceptReady, None)?;
    let peer = route_addr(&id, 128);
    let inner = Arc::new(inner);
    let w: Weak<dyn CmOwner> = Arc::downgrade(&inner) as Weak<dyn CmOwner>;
    chan.own(&id, w);
    {
        let mut c = locked(&inner.ctl);
        c.id = Some(id);
        c.peer = peer;
    }
    Ok(Box::new(VerbsEp { inner, bound: Mutex::new(Vec::new()) }))
}

/// A CQ: the core's (`ProgressCq`), and with `FI_WAIT_FD` the domain's
/// completion channel. Its `FI_GETWAIT` fd is an epoll descriptor over the
/// channel's fd and the core CQ's eventfd (`fi_cq_signal`): `fi_trywait`
/// acknowledges the channel's events, arms every bound endpoint's verbs CQ
/// (`ibv_req_notify_cq`) and polls once more, so the fd turns readable
/// when the adapter reports the next completion. The channel is the
/// domain's, so a completion of another CQ's endpoint wakes it too (the
/// read then finds nothing and `fi_cq_sread` sleeps again).
pub struct VerbsCq {
    cq: Arc<ProgressCq>,
    wait: Option<CqWait>,
    /// `fi_cq_signal` came (`FI_WAIT_FD`): the next `sread` returns.
    signaled: AtomicBool,
}

struct CqWait {
    chan: CompChannel,
    epfd: OwnedFd,
    /// The verbs CQs of the endpoints bound to this CQ.
    vcqs: Mutex<Vec<Cq>>,
}

/// epoll data of the core CQ's eventfd (`fi_cq_signal`, entries queued
/// while the CQ is armed).
const EP_SIGNAL: u64 = 1;

pub fn cq_open(d: &VerbsDomain, attr: &CqAttr) -> Result<Arc<dyn CompletionQueue>> {
    let cq = Arc::new(ProgressCq::new(attr)?);
    let wait = if attr.wait_obj == FI_WAIT_FD {
        let chan = d.comp_channel()?.clone();
        // SAFETY: plain system call; the result is checked.
        let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if ep < 0 {
            return Err(Error(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EMFILE)));
        }
        // SAFETY: a fresh descriptor nobody else owns.
        let epfd = unsafe { OwnedFd::from_raw_fd(ep) };
        for (fd, data) in [(chan.fd(), 0), (cq.wait_fd().ok_or(EINVAL)?, EP_SIGNAL)] {
            let mut ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: data };
            // SAFETY: both fds are open; `ev` is readable.
            if unsafe { libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, fd, &mut ev) } != 0 {
                return Err(Error(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EINVAL)));
            }
        }
        Some(CqWait { chan, epfd, vcqs: Mutex::new(Vec::new()) })
    } else {
        None
    };
    Ok(Arc::new(VerbsCq { cq, wait, signaled: AtomicBool::new(false) }))
}

impl VerbsCq {
    /// Waits on the epoll fd (until something is readable or `ms`).
    fn block(w: &CqWait, ms: i32) {
        let mut ev = [libc::epoll_event { events: 0, u64: 0 }; 2];
        // SAFETY: `ev` is writable for 2 entries.
        unsafe { libc::epoll_wait(w.epfd.as_raw_fd(), ev.as_mut_ptr(), 2, ms) };
    }
}

impl CompletionQueue for VerbsCq {
    fn entry_size(&self) -> usize {
        self.cq.entry_size()
    }
    fn read(&self, out: &mut [u8], count: usize, src: Option<&mut [u64]>) -> Result<usize> {
        self.cq.read(out, count, src)
    }
    fn readerr(&self, user_buf: Option<&mut [u8]>, api_version: u32) -> Result<(CqErrInfo, usize)> {
        self.cq.readerr(user_buf, api_version)
    }
    fn sread(&self, out: &mut [u8], count: usize, mut src: Option<&mut [u64]>, timeout: i32) -> Result<usize> {
        let Some(w) = &self.wait else { return self.cq.sread(out, count, src, timeout) };
        let deadline = (timeout >= 0).then(|| Instant::now() + Duration::from_millis(timeout as u64));
        loop {
            match self.cq.read(out, count, src.as_deref_mut()) {
                Err(e) if e.0 == FI_EAGAIN => {}
                r => return r,
            }
            match self.trywait() {
                Err(e) if e.0 == FI_EAGAIN => continue,
                Err(e) => return Err(e),
                Ok(()) => {}
            }
            if self.signaled.swap(false, Ordering::AcqRel) {
                return Err(Error(FI_EAGAIN));
            }
            let ms = match deadline {
                None => -1,
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Err(Error(FI_EAGAIN));
                    }
                    left.as_millis().min(i32::MAX as u128) as i32
                }
            };
            Self::block(w, ms);
            if self.signaled.swap(false, Ordering::AcqRel) {
                // fi_cq_signal: back without an entry, unless one came.
                return self.cq.read(out, count, src);
            }
        }
    }
    fn signal(&self) -> Result<()> {
        self.signaled.store(true, Ordering::Release);
        self.cq.signal()
    }
    fn wait_fd(&self) -> Option<i32> {
        match &self.wait {
            Some(w) => Some(w.epfd.as_raw_fd()),
            None => self.cq.wait_fd(),
        }
    }
    fn trywait(&self) -> Result<()> {
        let Some(w) = &self.wait else { return self.cq.trywait() };
        w.chan.drain();
        for c in locked(&w.vcqs).iter() {
            c.req_notify(false).map_err(verr)?;
        }
        // Polls once more: what came before the arming raised no event.
        self.cq.trywait()
    }
    fn as_any_arc(self: Arc<Self>) -> Arc<dyn Any + Send + Sync> {
        self
    }
}

/// The atomics of InfiniBand RC: 8-byte compare-and-swap
/// (`fi_compare_atomic` with `FI_CSWAP`) and fetch-and-add
/// (`fi_fetch_atomic` with `FI_SUM`) on `FI_UINT64`/`FI_INT64`, one element
/// per operation: `(count, size)` = `(1, 8)`. Everything else is
/// `-FI_EOPNOTSUPP` (fi_atomic(3)); an unknown type `-FI_EINVAL`. `fi_query_atomic` and `fi_atomicvalid` answer this.
pub fn atomic_valid(kind: AtomicKind, op: u32, datatype: u32) -> Result<(usize, usize)> {
    if rfabric_core::objects::atomic::type_size(datatype).is_none() {
        return Err(EINVAL);
    }
    match (kind, op, datatype) {
        (AtomicKind::Fetch, FI_SUM, FI_UINT64 | FI_INT64) | (AtomicKind::Compare, FI_CSWAP, FI_UINT64 | FI_INT64) => Ok((1, 8)),
        _ => Err(Error(FI_EOPNOTSUPP)),
    }
}

pub fn cntr_open(events: u32, wait_obj: u32) -> Result<Arc<dyn Counter>> {
    Ok(Arc::new(ProgressCntr::new(events, wait_obj)?))
}

impl EpInner {
    /// Moves the connection on after the event of `call` failed or an
    /// error event came: an error event on the EQ, the endpoint down.
    fn fail(&self, c: &mut Ctl, err: i32, data: &[u8], why: &str) {
        rfabric_core::fi_warn!(NAME, FI_LOG_EP_CTRL, "connection failed: {}", why);
        c.phase = Phase::Down;
        self.connected.store(false, Ordering::Release);
        if let Some(eq) = &c.eq {
            let _ = eq.error(NAME, err, 0, data);
        }
    }

    /// Makes the QP on the id (with the bound SRQ, if any) unless it
    /// exists, and posts the receives that waited for it.
    fn make_qp(&self, c: &mut Ctl) -> Result<()> {
        if !self.qp.load(Ordering::Acquire).is_null() {
            return Ok(());
        }
        let Some(mut id) = c.id.take() else { return Err(Error(FI_EOPBADSTATE)) };
        let made = id.create_qp_srq(&self.pd, &self.vcq, &self.vcq, self.cap, c.srq.as_ref());
        // SAFETY: a live id; its QP is NULL unless just made.
        let qp = unsafe { (*id.as_ptr()).qp };
        c.id = Some(id);
        if let Err(e) = made {
            return Err(verr(e));
        }
        if qp.is_null() {
            return Err(Error(FI_ENOMEM));
        }
        self.qp.store(qp, Ordering::Release);
        for (wr_id, sge, n) in std::mem::take(&mut c.pending) {
            // SAFETY: the application's receive buffers, as given
            // to fi_recv (valid until their completion).
            if let Err(e) = unsafe { Self::post_recv(qp, wr_id, &sge[..n]) } {
                rfabric_core::fi_warn!(NAME, FI_LOG_EP_DATA, "a receive posted before the connection was lost: {}", e);
            }
        }
        Ok(())
    }

    /// Posts a receive on `qp`.
    ///
    /// # Safety
    /// `sge` names registered, writable memory valid until the completion.
    unsafe fn post_recv(qp: *mut ibv_qp, wr_id: u64, sge: &[ibv_sge]) -> Result<()> {
        let mut wr = ibv_recv_wr { wr_id, sg_list: sge.as_ptr().cast_mut(), num_sge: sge.len() as i32, ..Default::default() };
        let mut bad = std::ptr::null_mut();
        // SAFETY: a live QP; `wr` and `sge` live across the call.
        let rc = unsafe { inline::ibv_post_recv(qp, &mut wr, &mut bad) };
        post_rc("ibv_post_recv", rc)
    }

    fn sink(&self, rx: bool) -> Option<&Arc<ProgressCq>> {
        if rx { self.rx.get() } else { self.tx.get() }.and_then(|s| s.cq.as_ref())
    }

    fn count(&self, which: usize, ok: bool) {
        if let Some(c) = self.cntrs[which].get() {
            if ok {
                c.c.add(1);
            } else {
                c.c.adderr(1);
            }
        }
    }

    fn complete(&self, w: &ibv_wc) {
        // SAFETY: `imm_data` is a plain integer.
        let imm = u64::from(u32::from_be(unsafe { w.imm.imm_data }));
        let with_imm = w.wc_flags & IBV_WC_WITH_IMM != 0;
        let (flags, rx, cntr) = match w.opcode {
            IBV_WC_SEND => (FI_MSG | FI_SEND, false, C_SEND),
            IBV_WC_RDMA_WRITE => (FI_RMA | FI_WRITE, false, C_WRITE),
            IBV_WC_RDMA_READ => (FI_RMA | FI_READ, false, C_READ),
            WC_COMP_SWAP | WC_FETCH_ADD => (FI_ATOMIC | FI_READ, false, C_READ),
            IBV_WC_RECV_RDMA_WITH_IMM => (FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA, true, C_RWRITE),
            _ => (FI_MSG | FI_RECV | if with_imm { FI_REMOTE_CQ_DATA } else { 0 }, true, C_RECV),
        };
        let ok = w.status == IBV_WC_SUCCESS;
        self.count(cntr, ok);
        if w.wr_id == NO_COMPLETION && ok {
            return;
        }
        let Some(cq) = self.sink(rx) else { return };
        // A send's length is not reported (fi_cq(3): receives only).
        let base = Completion {
            op_context: w.wr_id as usize,
            flags,
            len: if rx { w.byte_len as usize } else { 0 },
            buf: 0,
            data: if flags & FI_REMOTE_CQ_DATA != 0 { imm } else { 0 },
            tag: 0,
            src_addr: FI_ADDR_NOTAVAIL,
        };
        if ok {
            cq.push(base);
        } else {
            let err = if w.status == IBV_WC_WR_FLUSH_ERR { FI_ECANCELED } else { FI_EIO };
            cq.push_err(ErrCompletion { base, err, prov_errno: w.status as i32, olen: 0, err_data: Vec::new() });
        }
    }
}

/// An errno of a post call as the `-FI_E*` it stands for: a full queue is
/// `FI_EAGAIN`.
fn post_rc(call: &str, rc: i32) -> Result<()> {
    match rc {
        0 => Ok(()),
        libc::ENOMEM | libc::EAGAIN => Err(Error(FI_EAGAIN)),
        e => {
            rfabric_core::fi_warn!(NAME, FI_LOG_EP_DATA, "{} failed: errno {}", call, e);
            Err(Error(if e > 0 { e } else { FI_EIO }))
        }
    }
}

impl Progress for EpInner {
    fn progress(&self) -> usize {
        let mut wc = [ibv_wc::default(); 16];
        let n = self.vcq.poll(&mut wc).unwrap_or(0);
        for w in &wc[..n] {
            self.complete(w);
        }
        n
    }
}

impl CmOwner for EpInner {
    fn on_event(&self, e: CmEvent) {
        let mut c = locked(&self.ctl);
        let fns = self.chan.cm.cm.fns();
        match (c.phase, e.event) {
            (Phase::Resolving, RDMA_CM_EVENT_ADDR_RESOLVED) => {
                let Some(id) = c.id.as_ref() else { return };
                // SAFETY: a live id whose address is resolved.
                let rc = unsafe { (fns.resolve_route)(id.as_ptr(), RESOLVE_TIMEOUT_MS) };
                if rc != 0 {
                    return self.fail(&mut c, FI_EHOSTUNREACH, &[], "rdma_resolve_route");
                }
                c.phase = Phase::Routing;
            }
            (Phase::Routing, RDMA_CM_EVENT_ROUTE_RESOLVED) => {
                if self.make_qp(&mut c).is_err() {
                    return self.fail(&mut c, FI_ENOMEM, &[], "rdma_create_qp");
                }
                let data = std::mem::take(&mut c.data);
                let Ok(mut param) = conn_param(&data) else { return };
                let Some(id) = c.id.as_ref() else { return };
                // SAFETY: a live id with a QP; `param` and its data live
                // across the call.
                let rc = unsafe { (fns.connect)(id.as_ptr(), &mut param) };
                if rc != 0 {
                    return self.fail(&mut c, FI_ECONNREFUSED, &[], "rdma_connect");
                }
                c.phase = Phase::Connecting;
            }
            (Phase::Connecting | Phase::Accepting, RDMA_CM_EVENT_ESTABLISHED) => {
                c.phase = Phase::Connected;
                self.connected.store(true, Ordering::Release);
                // The active side hears the peer's accept data.
                let data: &[u8] = if e.private_data.is_empty() { &[] } else { &e.private_data };
                if let Some(eq) = &c.eq {
                    let _ = eq.cm(NAME, FI_CONNECTED, None, None, data);
                }
            }
            (_, RDMA_CM_EVENT_REJECTED) => self.fail(&mut c, FI_ECONNREFUSED, &e.private_data, "rejected by the peer"),
            (Phase::Resolving | Phase::Routing | Phase::Connecting | Phase::Accepting, RDMA_CM_EVENT_CONNECT_ERROR | RDMA_CM_EVENT_DISCONNECTED) => {
                self.fail(&mut c, FI_ECONNREFUSED, &[], "the peer went away before the connection was made")
            }
            (_, RDMA_CM_EVENT_ADDR_ERROR | RDMA_CM_EVENT_ROUTE_ERROR | RDMA_CM_EVENT_UNREACHABLE) => {
                self.fail(&mut c, FI_EHOSTUNREACH, &[], "peer unreachable")
            }
            (Phase::Connected, RDMA_CM_EVENT_DISCONNECTED) => {
                c.phase = Phase::Down;
                self.connected.store(false, Ordering::Release);
                if let Some(eq) = &c.eq {
                    let _ = eq.cm(NAME, FI_SHUTDOWN, None, None, &[]);
                }
            }
            (p, ev) => rfabric_core::fi_dbg!(NAME, FI_LOG_EP_CTRL, "CM event {} in phase {:?} ignored", ev, p),
        }
    }
}

/// Scatter list of `iov` with each buffer's local key from its
/// descriptor (`need`: a descriptor is required for non-empty buffers).
///
/// # Safety
/// `descs` is NULL or holds `iov.len()` descriptor values.
#[inline]
unsafe fn sges(regs: &LocalRegs, iov: &[Iov], descs: Descs, need: bool, call: &str) -> Result<([ibv_sge; IOV_LIMIT], usize)> {
    if iov.len() > IOV_LIMIT {
        rfabric_core::fi_warn!(NAME, FI_LOG_EP_DATA, "{}: {} buffers, at most {}", call, iov.len(), IOV_LIMIT);
        return Err(EINVAL);
    }
    let mut s = [ibv_sge::default(); IOV_LIMIT];
    for (i, v) in iov.iter().enumerate() {
        let len = u32::try_from(v.len).map_err(|_| EINVAL)?;
        // SAFETY: forwarded contract.
        let key = unsafe { regs.word(descs, i, v.len, need) }.inspect_err(|_| {
            rfabric_core::fi_warn!(NAME, FI_LOG_EP_DATA, "{}: buffer {} has no descriptor of this domain (FI_MR_LOCAL)", call, i);
        })?;
        s[i] = ibv_sge { addr: v.base as u64, length: len, lkey: key.unwrap_or(0) as u32 };
    }
    Ok((s, iov.len()))
}

impl VerbsEp {
    fn ctl(&self) -> MutexGuard<'_, Ctl> {
        locked(&self.inner.ctl)
    }

    /// The QP of a connected endpoint, or `-FI_ENOTCONN`.
    #[inline]
    fn connected_qp(&self, call: &str) -> Result<*mut ibv_qp> {
        let qp = self.inner.qp.load(Ordering::Acquire);
        if qp.is_null() || !self.inner.connected.load(Ordering::Acquire) {
            rfabric_core::fi_warn!(NAME, FI_LOG_EP_DATA, "{}: the endpoint is not connected", call);
            return Err(Error(FI_ENOTCONN));
        }
        Ok(qp)
    }

    #[inline]
    fn wr_id(&self, rx: bool, context: usize, flags: u64, no_completion: bool) -> u64 {
        let selective = if rx { self.inner.rx.get() } else { self.inner.tx.get() }.is_some_and(|s| s.selective);
        if no_completion || (selective && flags & FI_COMPLETION == 0) {
            NO_COMPLETION
        } else {
            context as u64
        }
    }

    /// One `ibv_post_send`.
    ///
    /// # Safety
    /// `sge` names registered memory valid until the completion (inline:
    /// until the call returns).
    #[allow(clippy::too_many_arguments)]
    unsafe fn post(qp: *mut ibv_qp, wr_id: u64, sge: &[ibv_sge], opcode: u32, flags: u32, imm: Option<u32>, remote: Option<(u64, u32)>) -> Result<()> {
        let remote = remote.map(|(addr, rkey)| crate::rc::Remote { addr, rkey });
        // SAFETY: forwarded (a live QP; the memory promise is the caller's).
        let rc = unsafe { crate::rc::post_send(qp, wr_id, sge, opcode, flags, imm, remote) };
        post_rc("ibv_post_send", rc)
    }

    unsafe fn rma(&self, op: &RmaOp<'_>, write: bool) -> Result<()> {
        let call = if write { "fi_write" } else { "fi_read" };
        let qp = self.connected_qp(call)?;
        let [r] = op.rma else {
            rfabric_core::fi_warn!(NAME, FI_LOG_EP_DATA, "{}: {} remote buffers, exactly 1 supported", call, op.rma.len());
            return Err(EINVAL);
        };
        let total: usize = op.iov.iter().map(|v| v.len).sum();
        if total > r.len {
            rfabric_core::fi_warn!(NAME, FI_LOG_EP_DATA, "{}: {} bytes into a remote buffer of {}", call, total, r.len);
            return Err(EINVAL);
        }
        let inject = write && (op.no_completion || op.flags & FI_INJECT != 0);
        if inject && total > INJECT_SIZE {
            rfabric_core::fi_warn!(NAME, FI_LOG_EP_DATA, "{}: inject of {} bytes, at most {}", call, total, INJECT_SIZE);
            return Err(EINVAL);
        }
        let rkey = u32::try_from(r.key).map_err(|_| EINVAL)?;
        // SAFETY: `op.desc` holds a value per buffer or is NULL (capi).
        let (sge, n) = unsafe { sges(&self.inner.regs, op.iov, op.desc, !inject, call)? };
        let imm = (write && op.flags & FI_REMOTE_CQ_DATA != 0).then_some(op.data as u32);
        let opcode = match (write, imm.is_some()) {
            (false, _) => IBV_WR_RDMA_READ,
            (true, false) => IBV_WR_RDMA_WRITE,
            (true, true) => IBV_WR_RDMA_WRITE_WITH_IMM,
        };
        let wr_id = self.wr_id(false, op.context, op.flags, op.no_completion);
        // SAFETY: the application's buffers (the trait's contract).
        unsafe { Self::post(qp, wr_id, &sge[..n], opcode, if inject { IBV_SEND_INLINE } else { 0 }, imm, Some((r.addr, rkey))) }
    }
}

impl Drop for VerbsEp {
    fn drop(&mut self) {
        // `fi_close` closed it before; a second close finds nothing to do.
        let _ = Endpoint::close(self);
    }
}

impl Endpoint for VerbsEp {
    fn bind(&self, target: Bind<'_>, flags: u64) -> Result<()> {
        match target {
            Bind::Eq(eq) => {
                if flags != 0 {
                    return Err(Error(FI_EBADFLAGS));
                }
                self.ctl().eq = Some(eq.clone());
                let w: Weak<dyn Progress> = Arc::downgrade(&self.inner.chan) as Weak<dyn Progress>;
                eq.drive(w);
                Ok(())
            }
            Bind::Cq(cq) => {
                let vcq = cq.clone().as_any_arc().downcast::<VerbsCq>().map_err(|_| EINVAL)?;
                let cq = vcq.cq.clone();
                if flags & !(FI_TRANSMIT | FI_RECV | FI_SELECTIVE_COMPLETION) != 0 || flags & (FI_TRANSMIT | FI_RECV) == 0 {
                    return Err(Error(FI_EBADFLAGS));
                }
                let s = || Sinks { cq: Some(cq.clone()), selective: flags & FI_SELECTIVE_COMPLETION != 0 };
                if flags & FI_TRANSMIT != 0 && self.inner.tx.set(s()).is_err() {
                    return Err(EINVAL);
                }
                if flags & FI_RECV != 0 && self.inner.rx.set(s()).is_err() {
                    return Err(EINVAL);
                }
                let p: Arc<dyn Progress> = self.inner.clone();
                cq.bound.attach(p);
                if let Some(w) = &vcq.wait {
                    locked(&w.vcqs).push(self.inner.vcq.clone());
                }
                locked(&self.bound).push(BoundTo::Cq(vcq));
                Ok(())
            }
            Bind::Cntr(c) => {
                let c = c.clone().as_any_arc().downcast::<ProgressCntr>().map_err(|_| EINVAL)?;
                let map = [(FI_SEND, C_SEND), (FI_RECV, C_RECV), (FI_READ, C_READ), (FI_WRITE, C_WRITE), (FI_REMOTE_WRITE, C_RWRITE)];
                if flags & !map.iter().fold(0, |a, m| a | m.0) != 0 || flags == 0 {
                    return Err(Error(FI_EBADFLAGS));
                }
                for (f, i) in map {
                    if flags & f != 0 && self.inner.cntrs[i].set(c.clone()).is_err() {
                        return Err(EINVAL);
                    }
                }
                let p: Arc<dyn Progress> = self.inner.clone();
                c.bound.attach(p);
                locked(&self.bound).push(BoundTo::Cntr(c));
                Ok(())
            }
            Bind::Srx(s) => {
                let Some(srx) = s.as_any().and_then(|a| a.downcast_ref::<VerbsSrx>()) else {
                    rfabric_core::fi_warn!(NAME, FI_LOG_EP_CTRL, "fi_ep_bind: not a verbs shared receive context");
                    return Err(EINVAL);
                };
                if flags != 0 {
                    return Err(Error(FI_EBADFLAGS));
                }
                let mut c = self.ctl();
                if !self.inner.qp.load(Ordering::Acquire).is_null() || c.srq.is_some() || !c.pending.is_empty() {
                    rfabric_core::fi_warn!(NAME, FI_LOG_EP_CTRL, "fi_ep_bind: a shared receive context is bound before the endpoint's QP exists (fi_enable, fi_accept, connection) and before receives are posted, once");
                    return Err(Error(FI_EOPBADSTATE));
                }
                c.srq = Some(srx.srq.clone());
                self.inner.shared_rx.store(true, Ordering::Release);
                Ok(())
            }
            Bind::Av(_) => Err(ENOSYS),
        }
    }

    fn enable(&self) -> Result<()> {
        if self.ctl().eq.is_none() {
            rfabric_core::fi_warn!(NAME, FI_LOG_EP_CTRL, "fi_enable: no EQ bound");
            return Err(Error(FI_ENOEQ));
        }
        if self.inner.tx.get().is_none() && self.inner.rx.get().is_none() {
            rfabric_core::fi_warn!(NAME, FI_LOG_EP_CTRL, "fi_enable: no CQ bound");
            return Err(Error(FI_ENOCQ));
        }
        let mut c = self.ctl();
        if c.phase == Phase::AcceptReady {
            self.inner.make_qp(&mut c)?;
        }
        Ok(())
    }

    fn getname(&self, buf: &mut [u8]) -> Result<usize> {
        let c = self.ctl();
        let b = c.id.as_ref().and_then(|id| route_addr(id, 0)).ok_or(Error(FI_EADDRNOTAVAIL))?;
        Ok(copy_out(&b, buf))
    }

    fn getpeer(&self, buf: &mut [u8]) -> Result<usize> {
        let c = self.ctl();
        let b = c.id.as_ref().and_then(|id| route_addr(id, 128)).or_else(|| c.peer.clone()).ok_or(Error(FI_ENOTCONN))?;
        Ok(copy_out(&b, buf))
    }

    fn connect(&self, addr: &[u8], data: &[u8]) -> Result<()> {
        check_cm_data(data, "fi_connect")?;
        let Some(dst) = parse_addr(addr) else {
            rfabric_core::fi_warn!(NAME, FI_LOG_EP_CTRL, "fi_connect: not a sockaddr_in/sockaddr_in6 ({} bytes)", addr.len());
            return Err(EINVAL);
        };
        let mut c = self.ctl();
        if c.eq.is_none() {
            rfabric_core::fi_warn!(NAME, FI_LOG_EP_CTRL, "fi_connect: no EQ bound");
            return Err(Error(FI_ENOEQ));
        }
        if c.phase != Phase::Idle {
            return Err(Error(FI_EOPBADSTATE));
        }
        let cm = &self.inner.chan.cm;
        let id = cm.create_id().map_err(verr)?;
        let w: Weak<dyn CmOwner> = Arc::downgrade(&self.inner) as Weak<dyn CmOwner>;
        self.inner.chan.own(&id, w);
        let mut sa = sockaddr(&dst);
        // SAFETY: a live id; `sa` is a sockaddr of its family; no source.
        let rc = unsafe { (cm.cm.fns().resolve_addr)(id.as_ptr(), std::ptr::null_mut(), (&mut sa as *mut libc::sockaddr_in6).cast(), RESOLVE_TIMEOUT_MS) };
        if let Err(e) = VerbsError::check("rdma_resolve_addr", rc) {
            self.inner.chan.disown(&id);
            return Err(verr(e));
        }
        c.id = Some(id);
        c.data = data.to_vec();
        c.peer = Some(addr.to_vec());
        c.phase = Phase::Resolving;
        Ok(())
    }

    fn accept(&self, data: &[u8]) -> Result<()> {
        check_cm_data(data, "fi_accept")?;
        let mut c = self.ctl();
        if c.phase != Phase::AcceptReady {
            rfabric_core::fi_warn!(NAME, FI_LOG_EP_CTRL, "fi_accept: not an endpoint of a connection request, or accepted before");
            return Err(Error(FI_EOPBADSTATE));
        }
        if c.eq.is_none() {
            rfabric_core::fi_warn!(NAME, FI_LOG_EP_CTRL, "fi_accept: no EQ bound");
            return Err(Error(FI_ENOEQ));
        }
        let mut param = conn_param(data).map_err(verr)?;
        self.inner.make_qp(&mut c)?;
        let id = c.id.as_ref().ok_or(Error(FI_EOPBADSTATE))?;
        // SAFETY: the request's id with its QP; `param` lives across the call.
        let rc = unsafe { (self.inner.chan.cm.cm.fns().accept)(id.as_ptr(), &mut param) };
        VerbsError::check("rdma_accept", rc).map_err(verr)?;
        c.phase = Phase::Accepting;
        Ok(())
    }

    fn shutdown(&self, _flags: u64) -> Result<()> {
        let mut c = self.ctl();
        if c.phase != Phase::Connected {
            return Err(Error(FI_ENOTCONN));
        }
        self.inner.connected.store(false, Ordering::Release);
        c.phase = Phase::Down;
        let id = c.id.as_ref().ok_or(Error(FI_ENOTCONN))?;
        // SAFETY: a live, connected id.
        let rc = unsafe { (self.inner.chan.cm.cm.fns().disconnect)(id.as_ptr()) };
        VerbsError::check("rdma_disconnect", rc).map_err(verr)
    }

    unsafe fn send(&self, op: &TxOp<'_>) -> Result<()> {
        if op.tagged {
            return Err(ENOSYS);
        }
        let qp = self.connected_qp("fi_send")?;
        let inject = op.no_completion || op.flags & FI_INJECT != 0;
        if inject {
            let total: usize = op.iov.iter().map(|v| v.len).sum();
            if total > INJECT_SIZE {
                rfabric_core::fi_warn!(NAME, FI_LOG_EP_DATA, "fi_inject: {} bytes, at most {}", total, INJECT_SIZE);
                return Err(EINVAL);
            }
        }
        // SAFETY: `op.desc` holds a value per buffer or is NULL (capi).
        let (sge, n) = unsafe { sges(&self.inner.regs, op.iov, op.desc, !inject, "fi_send")? };
        let imm = (op.flags & FI_REMOTE_CQ_DATA != 0).then_some(op.data as u32);
        let opcode = if imm.is_some() { IBV_WR_SEND_WITH_IMM } else { IBV_WR_SEND };
        let wr_id = self.wr_id(false, op.context, op.flags, op.no_completion);
        // SAFETY: the application's buffers (the trait's contract).
        unsafe { Self::post(qp, wr_id, &sge[..n], opcode, if inject { IBV_SEND_INLINE } else { 0 }, imm, None) }
    }

    unsafe fn recv(&self, op: &RxOp<'_>) -> Result<()> {
        if op.tagged {
            return Err(ENOSYS);
        }
        if self.inner.shared_rx.load(Ordering::Relaxed) {
            rfabric_core::fi_warn!(NAME, FI_LOG_EP_DATA, "fi_recv: the endpoint takes its receives from its shared receive context");
            return Err(Error(FI_EOPBADSTATE));
        }
        // SAFETY: `op.desc` holds a value per buffer or is NULL (capi).
        let (sge, n) = unsafe { sges(&self.inner.regs, op.iov, op.desc, true, "fi_recv")? };
        let wr_id = self.wr_id(true, op.context, op.flags, false);
        let qp = self.inner.qp.load(Ordering::Acquire);
        if !qp.is_null() {
            // SAFETY: the application's buffers (the trait's contract).
            return unsafe { EpInner::post_recv(qp, wr_id, &sge[..n]) };
        }
        let mut c = self.ctl();
        let qp = self.inner.qp.load(Ordering::Acquire);
        if !qp.is_null() {
            drop(c);
            // SAFETY: as above.
            return unsafe { EpInner::post_recv(qp, wr_id, &sge[..n]) };
        }
        if matches!(c.phase, Phase::Down) {
            return Err(Error(FI_ENOTCONN));
        }
        if c.pending.len() >= QUEUE_DEPTH as usize {
            return Err(Error(FI_EAGAIN));
        }
        c.pending.push((wr_id, sge, n));
        Ok(())
    }

    unsafe fn rma_write(&self, op: &RmaOp<'_>) -> Result<()> {
        // SAFETY: forwarded.
        unsafe { self.rma(op, true) }
    }

    unsafe fn rma_read(&self, op: &RmaOp<'_>) -> Result<()> {
        // SAFETY: forwarded.
        unsafe { self.rma(op, false) }
    }

    unsafe fn atomic(&self, op: &AtomicOp<'_>) -> Result<()> {
        atomic_valid(op.kind, op.op, op.datatype)?;
        let qp = self.connected_qp("fi_atomic")?;
        let ([r], [res]) = (op.rma, op.result) else {
            rfabric_core::fi_warn!(NAME, FI_LOG_EP_DATA, "fi_atomic: {} remote and {} result buffers, 1 each supported", op.rma.len(), op.result.len());
            return Err(EINVAL);
        };
        let operand = op.iov.first().filter(|v| v.len == 8 && op.iov.len() == 1).ok_or(EINVAL)?;
        if r.len != 1 || res.len != 8 || r.addr % 8 != 0 {
            rfabric_core::fi_warn!(NAME, FI_LOG_EP_DATA, "fi_atomic: one 8-byte element at an 8-byte aligned address only (count {}, address {:#x})", r.len, r.addr);
            return Err(EINVAL);
        }
        let rkey = u32::try_from(r.key).map_err(|_| EINVAL)?;
        // SAFETY: `op.result_desc` holds a value per result buffer or is
        // NULL (capi).
        let (sge, _) = unsafe { sges(&self.inner.regs, op.result, op.result_desc, true, "fi_atomic")? };
        // SAFETY: operand and compare buffers are 8 readable bytes (the
        // trait's contract and the checks above).
        let (add_or_compare, swap) = unsafe {
            let v = (operand.base as *const u64).read_unaligned();
            match op.kind {
                AtomicKind::Compare => {
                    let c = op.compare.first().filter(|c| c.len == 8).ok_or(EINVAL)?;
                    ((c.base as *const u64).read_unaligned(), v)
                }
                _ => (v, 0),
            }
        };
        let opcode = if op.kind == AtomicKind::Compare { IBV_WR_ATOMIC_CMP_AND_SWP } else { IBV_WR_ATOMIC_FETCH_AND_ADD };
        let mut wr = ibv_send_wr {
            wr_id: self.wr_id(false, op.context, op.flags, op.no_completion),
            sg_list: sge.as_ptr().cast_mut(),
            num_sge: 1,
            opcode,
            send_flags: IBV_SEND_SIGNALED,
            ..Default::default()
        };
        wr.wr = ibv_send_wr_wr { atomic: ibv_send_wr_atomic { remote_addr: r.addr, compare_add: add_or_compare, swap, rkey } };
        let mut bad = std::ptr::null_mut();
        // SAFETY: a live QP; `wr` and `sge` live across the call; the
        // result buffer is registered and writable until the completion.
        let rc = unsafe { inline::ibv_post_send(qp, &mut wr, &mut bad) };
        post_rc("ibv_post_send", rc)
    }

    fn atomic_valid(&self, kind: AtomicKind, op: u32, datatype: u32) -> Result<usize> {
        atomic_valid(kind, op, datatype).map(|(n, _)| n)
    }

    fn getopt(&self, level: i32, name: i32, buf: &mut [u8]) -> Result<usize> {
        getopt(level, name, buf)
    }

    fn setopt(&self, _level: i32, _name: i32, _val: &[u8]) -> Result<()> {
        Err(Error(FI_ENOPROTOOPT))
    }

    fn close(&self) -> Result<()> {
        let id = {
            let mut c = self.ctl();
            c.phase = Phase::Down;
            c.pending.clear();
            c.id.take()
        };
        self.inner.connected.store(false, Ordering::Release);
        self.inner.qp.store(std::ptr::null_mut(), Ordering::Release);
        if let Some(id) = id {
            self.inner.chan.disown(&id);
            // Destroys the QP and the id (the peer sees DISCONNECTED).
            drop(id);
        }
        let p: Arc<dyn Progress> = self.inner.clone();
        for b in locked(&self.bound).drain(..) {
            match b {
                BoundTo::Cq(c) => {
                    c.cq.bound.detach(&p);
                    if let Some(w) = &c.wait {
                        locked(&w.vcqs).retain(|v| v.as_ptr() != self.inner.vcq.as_ptr());
                    }
                }
                BoundTo::Cntr(c) => c.bound.detach(&p),
            }
        }
        Ok(())
    }
}
