//! RC queue pairs as a reliable connected transport
//! (`rfabric_tcp::conn::{Transport, Conn}`), so the RDM layer written over
//! that trait (one connection per peer, opened on demand) can run on
//! verbs as it runs on TCP.
//!
//! - Addresses are what the AV holds: `sockaddr_in` / `sockaddr_in6` of the
//!   peer's listening address; librdmacm resolves them (RoCE, IPoIB).
//! - Nothing blocks: the event channel and the completion channel are
//!   non-blocking; `established`, `flush`, `recv` and `accept` read what is
//!   there and move each connection's state on (address resolved, route
//!   resolved: QP created, receives posted, `rdma_connect`; `ESTABLISHED`).
//! - A message is one `IBV_WR_SEND` of at most `max_msg` bytes from a
//!   registered send slot into a pre-posted receive slot of `max_msg`
//!   bytes; RC delivers them whole and in order. A receiver that has no
//!   slot posted makes the sender's adapter retry (`rnr_retry_count` 7:
//!   without end), so nothing is lost; what finds no free send slot is
//!   queued in the connection (`queued`).
//! - Errors are final: a failed completion is `FI_ECONNRESET`, the peer's
//!   `rdma_disconnect` `FI_ESHUTDOWN` (after the messages that arrived
//!   before it), a rejected, unreachable or failed connect
//!   `FI_ECONNREFUSED`.
//! - `Conn::fd` is an epoll descriptor over the connection's completion
//!   channel and the event channel (which it shares with the transport and
//!   its other connections, so it may wake for another's event).
//!
//! Nothing here has run on RDMA hardware: the sequences are checked against
//! the recording stand-ins (`tests_rc.rs`).

use crate::rc::{conn_param, sockaddr, Cm, CmEvent, CmId};
use rfabric_core::abi::{FI_ECONNREFUSED, FI_ECONNRESET, FI_EIO, FI_EMSGSIZE, FI_ESHUTDOWN};
use rfabric_core::error::{Error, Result};
use rfabric_ibverbs::sys::*;
use rfabric_ibverbs::{CompChannel, Context, Cq, Mr, Pd, RdmaCm, VerbsError};
use rfabric_tcp::conn::{Conn, Transport};
use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::{Arc, Mutex};

/// Receive completions carry this bit in `wr_id`; the rest is the slot.
const RECV: u64 = 1 << 63;

fn verr(e: VerbsError) -> Error {
    rfabric_core::fi_warn!(crate::NAME, rfabric_core::abi::FI_LOG_EP_CTRL, "{}", e);
    Error(e.errno)
}

/// The sockaddr bytes of `a` (as an AV holds them).
pub fn addr_bytes(a: &SocketAddr) -> Vec<u8> {
    crate::addr::Addr::Ip(a.ip()).to_bytes().into_iter().enumerate().map(|(i, b)| if i == 2 { (a.port() >> 8) as u8 } else if i == 3 { a.port() as u8 } else { b }).collect()
}

/// The address of sockaddr bytes, if they are a well-formed
/// `sockaddr_in` / `sockaddr_in6`.
pub fn parse_addr(b: &[u8]) -> Option<SocketAddr> {
    let fam = i32::from(u16::from_ne_bytes([*b.first()?, *b.get(1)?]));
    let port = u16::from_be_bytes([*b.get(2)?, *b.get(3)?]);
    match fam {
        libc::AF_INET if b.len() == 16 => Some(SocketAddr::new(IpAddr::from(<[u8; 4]>::try_from(&b[4..8]).ok()?), port)),
        libc::AF_INET6 if b.len() == 28 => Some(SocketAddr::new(IpAddr::from(<[u8; 16]>::try_from(&b[8..24]).ok()?), port)),
        _ => None,
    }
}

/// What the transport and its connections share: the event channel, and
/// the events read from it that are not yet taken.
struct Shared {
    cm: Arc<Cm>,
    ctx: Context,
    pd: Pd,
    max_msg: usize,
    depth: usize,
    events: Mutex<Events>,
}

#[derive(Default)]
struct Events {
    by_id: HashMap<usize, VecDeque<CmEvent>>,
    requests: VecDeque<CmEvent>,
}

impl Shared {
    /// Reads every queued event into `events`.
    fn pump(&self) {
        let mut ev = self.events.lock().unwrap_or_else(|p| p.into_inner());
        while let Ok(e) = self.cm.next_event() {
            if e.event == RDMA_CM_EVENT_CONNECT_REQUEST {
                ev.requests.push_back(e);
            } else {
                ev.by_id.entry(e.id).or_default().push_back(e);
            }
        }
    }

    fn take(&self, id: usize) -> Option<CmEvent> {
        self.pump();
        let mut ev = self.events.lock().unwrap_or_else(|p| p.into_inner());
        let q = ev.by_id.get_mut(&id)?;
        let e = q.pop_front();
        if q.is_empty() {
            ev.by_id.remove(&id);
        }
        e
    }
}

fn set_nonblocking(fd: RawFd) {
    // SAFETY: fcntl on an fd we were handed; failure leaves it as it was.
    unsafe {
        let fl = libc::fcntl(fd, libc::F_GETFL);
        if fl >= 0 {
            libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK);
        }
    }
}

/// A listening RC endpoint.
pub struct RcTransport {
    shared: Arc<Shared>,
    listener: CmId,
    addr: Vec<u8>,
}

impl RcTransport {
    /// Listens at `bind` (its port, or one librdmacm picks for port 0, is
    /// the address peers connect to) on the device of `ctx`, registering
    /// in `pd`. Each connection has `depth` receive and send slots of
    /// `max_msg` bytes.
    pub fn bind(rdmacm: &RdmaCm, ctx: &Context, pd: &Pd, bind: SocketAddr, max_msg: usize, depth: usize) -> Result<RcTransport> {
        if max_msg == 0 || max_msg > u32::MAX as usize || depth == 0 {
            return Err(Error(libc::EINVAL));
        }
        let cm = Cm::new(rdmacm).map_err(verr)?;
        set_nonblocking(cm.fd());
        let listener = cm.create_id().map_err(verr)?;
        let mut a = sockaddr(&bind);
        let f = cm.cm.fns();
        // SAFETY: a live id; `a` is a sockaddr of its family.
        let rc = unsafe { (f.bind_addr)(listener.as_ptr(), (&mut a as *mut libc::sockaddr_in6).cast()) };
        VerbsError::check("rdma_bind_addr", rc).map_err(verr)?;
        // SAFETY: a live, bound id.
        let rc = unsafe { (f.listen)(listener.as_ptr(), 64) };
        VerbsError::check("rdma_listen", rc).map_err(verr)?;
        // The bound address (with the port librdmacm picked) is the route's
        // source address, the first member of `rdma_cm_id.route`.
        // SAFETY: a live id; `route` is plain bytes.
        let route = unsafe { (*listener.as_ptr()).route };
        let bytes: Vec<u8> = route.iter().flat_map(|w| w.to_ne_bytes()).collect();
        let bound = match bind {
            SocketAddr::V4(_) => parse_addr(&bytes[..16]),
            SocketAddr::V6(_) => parse_addr(&bytes[..28]),
        };
        let at = match bound {
            Some(b) if b.port() != 0 => SocketAddr::new(bind.ip(), b.port()),
            _ => bind,
        };
        let shared = Arc::new(Shared { cm, ctx: ctx.clone(), pd: pd.clone(), max_msg, depth, events: Mutex::new(Events::default()) });
        Ok(RcTransport { shared, listener, addr: addr_bytes(&at) })
    }

    pub fn listen_id(&self) -> *mut rdma_cm_id {
        self.listener.as_ptr()
    }
}

impl Transport for RcTransport {
    type Conn = RcConnection;

    fn addr(&self) -> &[u8] {
        &self.addr
    }

    fn valid_addr(&self, addr: &[u8]) -> bool {
        let mine = parse_addr(&self.addr);
        matches!((parse_addr(addr), mine), (Some(a), Some(m)) if a.is_ipv4() == m.is_ipv4() && a.port() != 0)
    }

    fn max_msg(&self) -> usize {
        self.shared.max_msg
    }

    fn connect(&mut self, addr: &[u8]) -> Result<RcConnection> {
        let dst = parse_addr(addr).ok_or(Error(libc::EINVAL))?;
        let id = self.shared.cm.create_id().map_err(verr)?;
        let mut d = sockaddr(&dst);
        // SAFETY: a live id; `d` is a sockaddr of its family; no source.
        let rc = unsafe {
            (self.shared.cm.cm.fns().resolve_addr)(id.as_ptr(), std::ptr::null_mut(), (&mut d as *mut libc::sockaddr_in6).cast(), crate::rc::RESOLVE_TIMEOUT_MS)
        };
        VerbsError::check("rdma_resolve_addr", rc).map_err(|_| Error(FI_ECONNREFUSED))?;
        RcConnection::new(self.shared.clone(), id, State::Resolving)
    }

    fn accept(&mut self) -> Result<Option<RcConnection>> {
        self.shared.pump();
        let req = self.shared.events.lock().unwrap_or_else(|p| p.into_inner()).requests.pop_front();
        let Some(req) = req else { return Ok(None) };
        let Some(id) = NonNull::new(req.id as *mut rdma_cm_id) else { return Err(Error(FI_EIO)) };
        // SAFETY: the request's id, owned by nobody else yet.
        let id = unsafe { CmId::from_request(&self.shared.cm, id) };
        let mut c = RcConnection::new(self.shared.clone(), id, State::Accepting)?;
        c.make_qp()?;
        let mut param = conn_param(&[]).map_err(verr)?;
        // SAFETY: the request's id with its QP; `param` lives across the call.
        let rc = unsafe { (self.shared.cm.cm.fns().accept)(c.id.as_ptr(), &mut param) };
        VerbsError::check("rdma_accept", rc).map_err(verr)?;
        Ok(Some(c))
    }

    fn fd(&self) -> RawFd {
        self.shared.cm.fd()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Resolving,
    Routing,
    Connecting,
    Accepting,
    Up,
    /// The peer disconnected: messages already received are still read.
    Closed,
    Failed(i32),
}

/// Registered slots: `n` buffers of `size` bytes.
struct Slots {
    mr: Mr,
    buf: Box<[u8]>,
    size: usize,
}

impl Slots {
    fn new(pd: &Pd, n: usize, size: usize) -> Result<Slots> {
        let mut buf = vec![0u8; n.checked_mul(size).ok_or(Error(libc::EINVAL))?].into_boxed_slice();
        let access = IBV_ACCESS_LOCAL_WRITE;
        // SAFETY: `buf` is ours, boxed (a fixed address) and dropped only
        // after `mr` (field order, and `RcConnection` destroys the QP
        // before either).
        let mr = unsafe { pd.reg_mr(buf.as_mut_ptr().cast(), buf.len(), access) }.map_err(verr)?;
        Ok(Slots { mr, buf, size })
    }

    fn sge(&self, slot: usize, len: usize) -> ibv_sge {
        ibv_sge { addr: self.buf.as_ptr() as u64 + (slot * self.size) as u64, length: len as u32, lkey: self.mr.lkey() }
    }
}

/// One connection: an RC QP with its own CQ and completion channel.
pub struct RcConnection {
    // Dropped in this order: the QP (with the id), then the CQ and its
    // channel, then the registrations, then their memory.
    id: CmId,
    cq: Cq,
    chan: CompChannel,
    epoll: OwnedFd,
    recv: Slots,
    send: Slots,
    shared: Arc<Shared>,
    state: State,
    free: Vec<usize>,
    /// Messages waiting for a free send slot (or for the connection).
    out: VecDeque<Vec<u8>>,
    queued: usize,
    /// Arrived messages, by slot and length, in order.
    arrived: VecDeque<(usize, usize)>,
    /// The slot of the message `recv` last returned, to post again.
    lent: Option<usize>,
}

impl RcConnection {
    fn new(shared: Arc<Shared>, id: CmId, state: State) -> Result<RcConnection> {
        let chan = shared.ctx.create_comp_channel().map_err(verr)?;
        set_nonblocking(chan.fd());
        let cqe = i32::try_from(2 * shared.depth).map_err(|_| Error(libc::EINVAL))?;
        let cq = shared.ctx.create_cq_on(cqe, Some(&chan), 0).map_err(verr)?;
        cq.req_notify(false).map_err(verr)?;
        // SAFETY: epoll_create1 has no memory preconditions; checked.
        let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if ep < 0 {
            return Err(Error(FI_EIO));
        }
        // SAFETY: a fresh fd we own.
        let epoll = unsafe { OwnedFd::from_raw_fd(ep) };
        for fd in [chan.fd(), shared.cm.fd()] {
            let mut e = libc::epoll_event { events: libc::EPOLLIN as u32, u64: fd as u64 };
            // SAFETY: our epoll fd, a live fd to watch, an event struct.
            if unsafe { libc::epoll_ctl(epoll.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut e) } != 0 {
                return Err(Error(FI_EIO));
            }
        }
        let recv = Slots::new(&shared.pd, shared.depth, shared.max_msg)?;
        let send = Slots::new(&shared.pd, shared.depth, shared.max_msg)?;
        Ok(RcConnection {
            id,
            cq,
            chan,
            epoll,
            recv,
            send,
            free: (0..shared.depth).rev().collect(),
            shared,
            state,
            out: VecDeque::new(),
            queued: 0,
            arrived: VecDeque::new(),
            lent: None,
        })
    }

    /// Creates the QP on the connection's CQ and posts every receive slot.
    fn make_qp(&mut self) -> Result<()> {
        let d = self.shared.depth as u32;
        let cap = ibv_qp_cap { max_send_wr: d, max_recv_wr: d, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
        self.id.create_qp(&self.shared.pd, &self.cq, &self.cq, cap).map_err(verr)?;
        for slot in 0..self.shared.depth {
            self.post_recv(slot)?;
        }
        Ok(())
    }

    fn qp(&self) -> *mut ibv_qp {
        // SAFETY: a live id.
        unsafe { (*self.id.as_ptr()).qp }
    }

    fn post_recv(&self, slot: usize) -> Result<()> {
        let sge = self.recv.sge(slot, self.recv.size);
        let mut wr = ibv_recv_wr { wr_id: RECV | slot as u64, sg_list: &sge as *const ibv_sge as *mut ibv_sge, num_sge: 1, ..Default::default() };
        let mut bad = std::ptr::null_mut();
        // SAFETY: a live QP; the slot is registered memory of ours that
        // stays valid while the QP lives; `wr` and `sge` are only read.
        let rc = unsafe { rfabric_ibverbs::inline::ibv_post_recv(self.qp(), &mut wr, &mut bad) };
        VerbsError::check("ibv_post_recv", rc).map_err(|_| Error(FI_ECONNRESET))
    }

    fn post_send(&mut self, msg_len: usize, slot: usize) -> Result<()> {
        let sge = self.send.sge(slot, msg_len);
        let mut wr = ibv_send_wr {
            wr_id: slot as u64,
            sg_list: &sge as *const ibv_sge as *mut ibv_sge,
            num_sge: 1,
            opcode: IBV_WR_SEND,
            send_flags: IBV_SEND_SIGNALED,
            ..Default::default()
        };
        let mut bad = std::ptr::null_mut();
        // SAFETY: a live QP; the slot is registered memory of ours, not
        // reused until its completion; `wr` and `sge` are only read.
        let rc = unsafe { rfabric_ibverbs::inline::ibv_post_send(self.qp(), &mut wr, &mut bad) };
        VerbsError::check("ibv_post_send", rc).map_err(|_| Error(FI_ECONNRESET))
    }

    /// Moves the connection on with the events that arrived for it.
    fn advance(&mut self) -> Result<()> {
        while let Some(e) = self.shared.take(self.id.as_ptr() as usize) {
            let f = *self.shared.cm.cm.fns();
            self.state = match (self.state, e.event) {
                (State::Resolving, RDMA_CM_EVENT_ADDR_RESOLVED) => {
                    // SAFETY: a live id whose address is resolved.
                    let rc = unsafe { (f.resolve_route)(self.id.as_ptr(), crate::rc::RESOLVE_TIMEOUT_MS) };
                    if rc == 0 { State::Routing } else { State::Failed(FI_ECONNREFUSED) }
                }
                (State::Routing, RDMA_CM_EVENT_ROUTE_RESOLVED) => {
                    self.make_qp()?;
                    let mut param = conn_param(&[]).map_err(verr)?;
                    // SAFETY: a live id with a QP; `param` lives across the call.
                    let rc = unsafe { (f.connect)(self.id.as_ptr(), &mut param) };
                    if rc == 0 { State::Connecting } else { State::Failed(FI_ECONNREFUSED) }
                }
                (State::Connecting | State::Accepting, RDMA_CM_EVENT_ESTABLISHED) => State::Up,
                (State::Up | State::Connecting | State::Accepting, RDMA_CM_EVENT_DISCONNECTED) => State::Closed,
                (State::Failed(e), _) => State::Failed(e),
                (State::Closed, _) => State::Closed,
                (State::Up, RDMA_CM_EVENT_DEVICE_REMOVAL) => State::Failed(FI_ECONNRESET),
                (State::Up, _) => State::Up,
                (_, _) => State::Failed(FI_ECONNREFUSED),
            };
        }
        if let State::Failed(e) = self.state {
            return Err(Error(e));
        }
        Ok(())
    }

    /// Reads the completions: arrived messages, freed send slots.
    fn reap(&mut self) -> Result<()> {
        if self.chan.drain() > 0 {
            self.cq.req_notify(false).map_err(verr)?;
        }
        let mut wc = [ibv_wc::default(); 16];
        loop {
            let n = self.cq.poll(&mut wc).map_err(|_| Error(FI_ECONNRESET))?;
            for c in &wc[..n] {
                if c.status != IBV_WC_SUCCESS {
                    // Flushed work after the peer's disconnect is the end of
                    // the connection, not a failure.
                    self.state = if self.state == State::Closed && c.status == IBV_WC_WR_FLUSH_ERR { State::Closed } else { State::Failed(FI_ECONNRESET) };
                    continue;
                }
                let slot = (c.wr_id & !RECV) as usize;
                if c.wr_id & RECV != 0 {
                    if slot < self.shared.depth && (c.byte_len as usize) <= self.recv.size {
                        self.arrived.push_back((slot, c.byte_len as usize));
                    } else {
                        self.state = State::Failed(FI_EIO);
                    }
                } else if slot < self.shared.depth {
                    self.free.push(slot);
                }
            }
            if n < wc.len() {
                break;
            }
        }
        if let State::Failed(e) = self.state {
            return Err(Error(e));
        }
        Ok(())
    }

    /// Posts queued messages into free slots.
    fn push_out(&mut self) -> Result<()> {
        if self.state != State::Up {
            return Ok(());
        }
        while let (Some(_), Some(&slot)) = (self.out.front(), self.free.last()) {
            let m = self.out.pop_front().unwrap_or_default();
            self.free.pop();
            let at = slot * self.send.size;
            self.send.buf[at..at + m.len()].copy_from_slice(&m);
            self.queued -= m.len();
            self.post_send(m.len(), slot)?;
        }
        Ok(())
    }
}

impl Conn for RcConnection {
    fn send(&mut self, parts: &[&[u8]]) -> Result<()> {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        if len > self.send.size {
            return Err(Error(FI_EMSGSIZE));
        }
        self.advance()?;
        if self.state == State::Closed {
            return Err(Error(FI_ESHUTDOWN));
        }
        if self.state == State::Up && self.out.is_empty() {
            self.reap()?;
            if let Some(slot) = self.free.pop() {
                let mut at = slot * self.send.size;
                for p in parts {
                    self.send.buf[at..at + p.len()].copy_from_slice(p);
                    at += p.len();
                }
                return self.post_send(len, slot);
            }
        }
        self.out.push_back(parts.concat());
        self.queued += len;
        Ok(())
    }

    fn flush(&mut self) -> Result<usize> {
        self.advance()?;
        self.reap()?;
        self.push_out()?;
        Ok(self.queued)
    }

    fn queued(&self) -> usize {
        self.queued
    }

    fn recv(&mut self) -> Result<Option<&[u8]>> {
        if let Some(slot) = self.lent.take() {
            if self.state == State::Up {
                self.post_recv(slot)?;
            }
        }
        self.advance()?;
        if matches!(self.state, State::Up | State::Closed) {
            self.reap()?;
            self.push_out()?;
        }
        match self.arrived.pop_front() {
            Some((slot, len)) => {
                self.lent = Some(slot);
                let at = slot * self.recv.size;
                Ok(Some(&self.recv.buf[at..at + len]))
            }
            None if self.state == State::Closed => Err(Error(FI_ESHUTDOWN)),
            None => Ok(None),
        }
    }

    fn established(&mut self) -> Result<bool> {
        self.advance()?;
        if self.state == State::Up {
            self.push_out()?;
        }
        Ok(self.state == State::Up)
    }

    fn fd(&self) -> RawFd {
        self.epoll.as_raw_fd()
    }
}
