//! `FI_EP_MSG` over TCP: connected endpoints with connection management
//! (fi_cm(3)), on the connected transport's TCP connections
//! (`crate::tcp::TcpConn`).
//!
//! - A passive endpoint (`MsgPep`) listens on a `TcpTransport`; a thread
//!   accepts connections, reads each one's request message and queues an
//!   `FI_CONNREQ` event whose info's handle is the connection (`MsgReq`).
//! - `fi_connect` opens a connection and queues the request message on it;
//!   the endpoint's thread waits for the answer: accept (`FI_CONNECTED`
//!   with the peer's data) or reject (an `FI_ECONNREFUSED` error event
//!   whose `err_data` is the peer's data).
//! - Data: a message goes out as segments of at most [`SEG`] bytes, each one
//!   transport message with a 16-byte header (kind, first/last, remote CQ
//!   data). Receives are matched in order; segments that arrive with no
//!   receive posted wait in an unexpected queue (at most [`UNEXP_MAX`], then
//!   the socket is left unread: TCP's flow control holds the sender).
//! - Progress: reading a bound CQ drives the endpoint (manual data
//!   progress); the endpoint's thread carries the handshake and notices a
//!   peer that went away (`FI_SHUTDOWN`) when the application reads no CQ.
//!
//! Lock order: the endpoint's state, then a CQ's or the EQ's.

use crate::conn::{Conn, Transport};
use crate::tcp::{TcpConn, TcpTransport};
use rfabric_core::abi::*;
use rfabric_core::error::{Error, Result, EINVAL, ENODATA, ENOSYS};
use rfabric_core::info::{EpAttr, FabricAttr, Info};
use rfabric_core::objects::cq::{Completion, CqAttr, ErrCompletion};
use rfabric_core::objects::mr::{MrRegion, MrRegistry};
use rfabric_core::objects::progress::{Progress, ProgressCntr, ProgressCq};
use rfabric_core::objects::wait::Locked;
use rfabric_core::provider::{
    Bind, CompletionQueue, ConnReq, Counter, Domain, Endpoint, EqBinding, Iov, MrReg, MrReq, PassiveEndpoint, Request, RmaOp, RxOp, TxOp,
};
use rfabric_rudp::sockaddr;
use rfabric_rudp::sys::IfAddr;
use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::provider::{NAME, VERSION};

/// Bytes of the header of every transport message.
const HDR: usize = 16;
/// Largest payload of one segment.
pub const SEG: usize = 64 << 10;
/// Largest message (`ep_attr->max_msg_size`).
pub const MAX_MSG: usize = 1 << 30;
/// Largest connection data (`FI_OPT_CM_DATA_SIZE`); more is truncated.
pub const CM_DATA_MAX: usize = 256;
pub const INJECT_SIZE: usize = 4096;
/// Most iovs of one operation.
const IOV_MAX: usize = 8;
/// Bytes a connection may hold unsent before new sends wait.
const TX_HIGH: usize = 4 << 20;
/// Unexpected segments an endpoint holds before it stops reading.
const UNEXP_MAX: usize = 256;
/// How long a connection request or answer may take.
const CM_TIMEOUT: Duration = Duration::from_secs(10);
const QUEUE_SIZE: usize = 1024;

const K_REQ: u8 = 1;
const K_ACCEPT: u8 = 2;
const K_REJECT: u8 = 3;
const K_DATA: u8 = 4;
/// RMA write segments: the header, then the target address and key.
const K_WRITE: u8 = 5;
/// The target's answer to a whole write: status in `data`.
const K_WACK: u8 = 6;
/// RMA read request: the header, then address, key and length.
const K_READ: u8 = 7;
/// Read response segments (first/last); an error is one last segment with
/// the status in `data`.
const K_RRESP: u8 = 8;
/// Bytes after the header of a write segment and of a read request.
const RMA_HDR: usize = 16;
/// The largest transport message: a write segment.
const WIRE_MAX: usize = HDR + RMA_HDR + SEG;
const F_FIRST: u8 = 1;
const F_LAST: u8 = 2;
const F_CQDATA: u8 = 4;
/// The version of this wire format, in the request header.
const WIRE_VERSION: u8 = 1;

const CAPS: u64 = FI_MSG | FI_RMA | FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_LOCAL_COMM | FI_REMOTE_COMM;

fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn hdr(kind: u8, flags: u8, data: u64) -> [u8; HDR] {
    let mut h = [0u8; HDR];
    h[0] = kind;
    h[1] = flags;
    h[8..16].copy_from_slice(&data.to_le_bytes());
    h
}

fn parse_hdr(m: &[u8]) -> Option<(u8, u8, u64)> {
    if m.len() < HDR {
        return None;
    }
    Some((m[0], m[1], u64::from_le_bytes(m[8..16].try_into().ok()?)))
}

/// Connection data of at most `FI_OPT_CM_DATA_SIZE` bytes; more is
/// `-FI_EINVAL` (fi_cm(3)).
fn cm_data<'a>(data: &'a [u8], call: &str) -> Result<&'a [u8]> {
    if data.len() > CM_DATA_MAX {
        rfabric_core::fi_warn!(NAME, FI_LOG_EP_CTRL, "{}: {} bytes of connection data, more than FI_OPT_CM_DATA_SIZE ({})", call, data.len(), CM_DATA_MAX);
        return Err(EINVAL);
    }
    Ok(data)
}

fn copy_out(bytes: &[u8], buf: &mut [u8]) -> usize {
    let n = bytes.len().min(buf.len());
    rfabric_core::copy::copy_slice(&mut buf[..n], &bytes[..n]);
    bytes.len()
}

/// Waits up to `ms` for `events` on `fd`; returns the events seen.
fn poll_fd(fd: RawFd, events: i16, ms: i32) -> i16 {
    let mut p = libc::pollfd { fd, events, revents: 0 };
    // SAFETY: one pollfd on the stack, valid for the call.
    let r = unsafe { libc::poll(&mut p, 1, ms) };
    if r > 0 {
        p.revents
    } else {
        0
    }
}

// ---------------------------------------------------------------- offers

/// The interfaces offered: the one `FI_TCP_IFACE` names, else all that
/// are up, non-loopback first (as for `FI_EP_RDM`).
fn interfaces() -> Vec<IfAddr> {
    rfabric_rudp::provider::interfaces_named(crate::settings::Settings::read().iface, NAME, "FI_TCP_IFACE")
}

/// The `FI_EP_MSG` offer for one interface address.
pub fn offer(ifa: &IfAddr) -> Info {
    let order = FI_ORDER_SAS | FI_ORDER_RAW | FI_ORDER_WAW | FI_ORDER_WAR | FI_ORDER_RAR;
    let tx = fi_tx_attr {
        caps: FI_MSG | FI_RMA | FI_SEND | FI_READ | FI_WRITE,
        rma_iov_limit: 1,
        msg_order: order,
        comp_order: FI_ORDER_NONE,
        inject_size: INJECT_SIZE,
        size: QUEUE_SIZE,
        iov_limit: IOV_MAX,
        ..fi_tx_attr::default()
    };
    let rx = fi_rx_attr { caps: FI_MSG | FI_RMA | FI_RECV | FI_REMOTE_READ | FI_REMOTE_WRITE, msg_order: order, comp_order: FI_ORDER_NONE, size: QUEUE_SIZE, iov_limit: IOV_MAX, ..fi_rx_attr::default() };
    let v6 = ifa.addr.is_ipv6();
    Info {
        caps: CAPS,
        addr_format: if v6 { FI_SOCKADDR_IN6 } else { FI_SOCKADDR_IN },
        src_addr: Some(sockaddr::to_bytes(&SocketAddr::new(ifa.addr, 0))),
        tx_attr: Some(tx),
        rx_attr: Some(rx),
        ep_attr: Some(EpAttr {
            ep_type: FI_EP_MSG,
            protocol: FI_PROTO_SOCK_TCP,
            protocol_version: WIRE_VERSION as u32,
            max_msg_size: MAX_MSG,
            // One stream carries everything in order: RMA is ordered at
            // any size.
            max_order_raw_size: MAX_MSG,
            max_order_war_size: MAX_MSG,
            max_order_waw_size: MAX_MSG,
            tx_ctx_cnt: 1,
            rx_ctx_cnt: 1,
            ..EpAttr::default()
        }),
        domain_attr: Some(rfabric_rudp::provider::ip_domain_attr(&ifa.name, FI_PROGRESS_AUTO, FI_PROGRESS_MANUAL)),
        fabric_attr: Some(FabricAttr { name: Some(NAME.to_string()), prov_name: Some(NAME.to_string()), prov_version: VERSION, api_version: VERSION, fabric: 0 }),
        ..Info::default()
    }
}

pub fn offers() -> Vec<Info> {
    interfaces().iter().map(offer).collect()
}

fn parse_port(service: Option<&str>) -> Result<u16> {
    match service {
        None => Ok(0),
        Some(s) => s.parse::<u16>().map_err(|_| {
            rfabric_core::fi_info!(NAME, FI_LOG_CORE, "service {:?} is not a port number", s);
            ENODATA
        }),
    }
}

/// Node and service as fi_getinfo(3) gives them for IP providers: with
/// `FI_SOURCE` (or without a node) the local address, else the
/// destination; addresses in the hints are kept when they fit the offer.
pub fn resolve(mut offer: Info, req: &Request<'_>) -> Result<Info> {
    if let Some(f) = offer.fabric_attr.as_mut() {
        f.api_version = req.version;
    }
    let v6 = offer.addr_format == FI_SOCKADDR_IN6;
    let ours = offer.src_addr.as_deref().and_then(sockaddr::from_bytes_any).ok_or(ENODATA)?;
    if let Some(h) = req.hints {
        if let Some(src) = h.src_addr.as_deref() {
            let a = sockaddr::from_bytes_any(src).ok_or(ENODATA)?;
            if a.ip() != ours.ip() && !a.ip().is_unspecified() {
                return Err(ENODATA);
            }
            offer.src_addr = Some(sockaddr::to_bytes(&SocketAddr::new(ours.ip(), a.port())));
        }
        if let Some(dst) = h.dest_addr.as_deref() {
            let a = sockaddr::from_bytes(dst).ok_or(ENODATA)?;
            if a.is_ipv6() != v6 {
                return Err(ENODATA);
            }
            offer.dest_addr = Some(dst.to_vec());
        }
    }
    if req.version >= fi_version(1, 5) {
        // The registration modes asked for that this provider can follow.
        let asked = req.hints.and_then(|h| h.domain_attr.as_ref()).map_or(0, |d| d.mr_mode);
        let keep = (FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED) as i32;
        if let Some(d) = offer.domain_attr.as_mut() {
            if asked == FI_MR_BASIC as i32 {
                d.mr_mode = asked;
            } else if asked != FI_MR_SCALABLE as i32 {
                d.mr_mode |= asked & keep;
            }
        }
    }
    let port = parse_port(req.service)?;
    if req.flags & FI_SOURCE != 0 || req.node.is_none() {
        if let Some(node) = req.node {
            let host = node.trim_start_matches('[').trim_end_matches(']');
            let matches = (host, port).to_socket_addrs().map(|mut it| it.any(|a| a.ip() == ours.ip())).unwrap_or(false);
            if !matches {
                return Err(ENODATA);
            }
        }
        if req.service.is_some() {
            offer.src_addr = Some(sockaddr::to_bytes(&SocketAddr::new(ours.ip(), port)));
        }
    } else if let Some(node) = req.node {
        let host = node.trim_start_matches('[').trim_end_matches(']');
        let a = (host, port).to_socket_addrs().ok().and_then(|mut it| it.find(|a| a.is_ipv6() == v6)).ok_or(ENODATA)?;
        offer.dest_addr = Some(sockaddr::to_bytes(&a));
    }
    Ok(offer)
}

// ---------------------------------------------------------------- fabric, domain

/// `fi_passive_ep` of the tcp fabric.
pub fn passive_ep(info: &Info) -> Result<Box<dyn PassiveEndpoint>> {
    Ok(Box::new(MsgPep::open(info)?))
}

/// The local address of an info: its `src_addr`, else its domain's
/// interface.
fn local_of(info: &Info) -> Result<SocketAddr> {
    if let Some(a) = info.src_addr.as_deref().and_then(sockaddr::from_bytes_any) {
        return Ok(a);
    }
    let name = info.domain_attr.as_ref().and_then(|d| d.name.clone());
    let v6 = info.addr_format == FI_SOCKADDR_IN6;
    interfaces()
        .into_iter()
        .find(|i| name.as_ref().map_or(true, |n| &i.name == n) && i.addr.is_ipv6() == v6)
        .map(|i| SocketAddr::new(i.addr, 0))
        .ok_or_else(|| {
            rfabric_core::fi_warn!(NAME, FI_LOG_DOMAIN, "no interface address for domain {:?}", name);
            EINVAL
        })
}

pub struct MsgDomain {
    ip: IpAddr,
    /// Shared with the endpoints, which check incoming RMA against it.
    mr: Arc<Locked<MrRegistry>>,
}

impl MsgDomain {
    pub fn new(info: &Info) -> Result<MsgDomain> {
        let d = info.domain_attr.as_ref();
        let mode = rfabric_core::getinfo::mr_mode_bits(d.map_or(0, |d| d.mr_mode), fi_version(1, 5));
        let key_size = d.map_or(8, |d| if d.mr_key_size == 0 { 8 } else { d.mr_key_size });
        Ok(MsgDomain { ip: local_of(info)?.ip(), mr: Arc::new(Locked::new(MrRegistry::new(mode, key_size)?)) })
    }
}

impl Domain for MsgDomain {
    fn endpoint(&self, info: &Info) -> Result<Box<dyn Endpoint>> {
        if info.ep_type() != FI_EP_MSG {
            return Err(EINVAL);
        }
        Ok(Box::new(MsgEp::new(info, self.ip, self.mr.clone(), None)))
    }
    fn accept_endpoint(&self, info: &Info, req: ConnReq) -> Result<Box<dyn Endpoint>> {
        let req = req.downcast::<MsgReq>().map_err(|_| {
            rfabric_core::fi_warn!(NAME, FI_LOG_EP_CTRL, "fi_endpoint: the connection request is not one of this provider");
            EINVAL
        })?;
        Ok(Box::new(MsgEp::new(info, self.ip, self.mr.clone(), Some(*req))))
    }
    fn cq_open(&self, attr: &CqAttr) -> Result<Arc<dyn CompletionQueue>> {
        Ok(Arc::new(ProgressCq::new(attr)?))
    }
    fn cntr_open(&self, events: u32, wait_obj: u32) -> Result<Arc<dyn Counter>> {
        Ok(Arc::new(ProgressCntr::new(events, wait_obj)?))
    }
    fn mr_reg(&self, req: &MrReq) -> Result<MrReg> {
        if req.dmabuf.is_some() {
            return Err(Error(FI_EOPNOTSUPP));
        }
        let r = MrRegion { base: req.addr, len: req.len, access: req.access, ..MrRegion::default() };
        let key = self.mr.lock().register(r, req.requested_key)?;
        Ok(MrReg { key, local: None })
    }
    fn mr_close(&self, key: u64) -> Result<()> {
        self.mr.lock().remove(key).map(|_| ())
    }
}

// ---------------------------------------------------------------- passive endpoint

/// A connection request: the accepted connection, waiting for
/// `fi_accept` or `fi_reject`.
pub struct MsgReq {
    conn: TcpConn,
}

struct PepState {
    info: Info,
    transport: Option<TcpTransport>,
    local: SocketAddr,
    eq: Option<EqBinding>,
    thread: Option<std::thread::JoinHandle<()>>,
}

pub struct MsgPep {
    st: Mutex<PepState>,
    stop: Arc<AtomicBool>,
}

impl MsgPep {
    fn open(info: &Info) -> Result<MsgPep> {
        let bind = local_of(info)?;
        let t = TcpTransport::bind(bind, WIRE_MAX).inspect_err(|e| {
            rfabric_core::fi_warn!(NAME, FI_LOG_EP_CTRL, "fi_passive_ep: cannot listen on {}: {}", bind, e);
        })?;
        let local = t.local_addr();
        Ok(MsgPep { st: Mutex::new(PepState { info: info.clone(), transport: Some(t), local, eq: None, thread: None }), stop: Arc::new(AtomicBool::new(false)) })
    }
}

/// The listening thread: accepts connections and turns each one's request
/// message into an `FI_CONNREQ`.
fn listen_loop(mut t: TcpTransport, info: Info, eq: EqBinding, stop: Arc<AtomicBool>) {
    let mut pending: Vec<(TcpConn, Instant)> = Vec::new();
    while !stop.load(Ordering::Acquire) {
        poll_fd(t.fd(), libc::POLLIN, if pending.is_empty() { 20 } else { 1 });
        loop {
            match t.accept() {
                Ok(Some(c)) => pending.push((c, Instant::now())),
                Ok(None) => break,
                Err(e) => {
                    rfabric_core::fi_warn!(NAME, FI_LOG_EP_CTRL, "accept failed: {}", e);
                    break;
                }
            }
        }
        let mut i = 0;
        while i < pending.len() {
            let young = pending[i].1.elapsed() < CM_TIMEOUT;
            let got = match pending[i].0.recv() {
                Ok(Some(m)) => Some(m.to_vec()),
                Ok(None) if young => {
                    i += 1;
                    continue;
                }
                Ok(None) | Err(_) => None,
            };
            let (conn, _) = pending.swap_remove(i);
            let Some(m) = got else { continue };
            match parse_hdr(&m) {
                Some((K_REQ, WIRE_VERSION, _)) => {}
                _ => {
                    rfabric_core::fi_info!(NAME, FI_LOG_EP_CTRL, "dropped a connection from {:?}: not a connection request", conn.peer_addr());
                    continue;
                }
            }
            let mut ri = info.clone();
            ri.handle = 0;
            ri.src_addr = conn.local_addr().map(|a| sockaddr::to_bytes(&a));
            ri.dest_addr = conn.peer_addr().map(|a| sockaddr::to_bytes(&a));
            let data = &m[HDR..m.len().min(HDR + CM_DATA_MAX)];
            let _ = eq.cm(NAME, FI_CONNREQ, Some(ri), Some(Box::new(MsgReq { conn })), data);
        }
    }
}

impl PassiveEndpoint for MsgPep {
    fn bind_eq(&self, eq: &EqBinding, flags: u64) -> Result<()> {
        if flags != 0 {
            rfabric_core::fi_warn!(NAME, FI_LOG_EP_CTRL, "fi_pep_bind: flags {:#x} (none are known)", flags);
            return Err(Error(FI_EBADFLAGS));
        }
        let mut st = locked(&self.st);
        if st.thread.is_some() {
            return Err(Error(FI_EOPBADSTATE));
        }
        st.eq = Some(eq.clone());
        Ok(())
    }
    fn listen(&self) -> Result<()> {
        let mut st = locked(&self.st);
        let Some(eq) = st.eq.clone() else {
            rfabric_core::fi_warn!(NAME, FI_LOG_EP_CTRL, "fi_listen: no EQ bound to the passive endpoint");
            return Err(Error(FI_ENOEQ));
        };
        let Some(t) = st.transport.take() else {
            rfabric_core::fi_warn!(NAME, FI_LOG_EP_CTRL, "fi_listen: already listening");
            return Err(Error(FI_EOPBADSTATE));
        };
        let (info, stop) = (st.info.clone(), self.stop.clone());
        let h = std::thread::Builder::new().name("tcp-listen".into()).spawn(move || listen_loop(t, info, eq, stop)).map_err(|_| Error(FI_ENOMEM))?;
        st.thread = Some(h);
        rfabric_core::fi_info!(NAME, FI_LOG_EP_CTRL, "listening on {}", st.local);
        Ok(())
    }
    fn reject(&self, req: ConnReq, data: &[u8]) -> Result<()> {
        let mut req = req.downcast::<MsgReq>().map_err(|_| {
            rfabric_core::fi_warn!(NAME, FI_LOG_EP_CTRL, "fi_reject: the connection request is not one of this provider");
            EINVAL
        })?;
        let data = cm_data(data, "fi_reject")?;
        req.conn.send(&[&hdr(K_REJECT, 0, 0), data])?;
        let end = Instant::now() + Duration::from_secs(1);
        while req.conn.flush().is_ok_and(|q| q > 0) && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(1));
        }
        Ok(())
    }
    fn getname(&self, buf: &mut [u8]) -> Result<usize> {
        Ok(copy_out(&sockaddr::to_bytes(&locked(&self.st).local), buf))
    }
    fn setname(&self, addr: &[u8]) -> Result<()> {
        let mut st = locked(&self.st);
        if st.transport.is_none() {
            rfabric_core::fi_warn!(NAME, FI_LOG_EP_CTRL, "fi_setname: the passive endpoint already listens");
            return Err(Error(FI_EOPBADSTATE));
        }
        let a = sockaddr::from_bytes_any(addr).ok_or(EINVAL)?;
        let t = TcpTransport::bind(a, WIRE_MAX)?;
        st.local = t.local_addr();
        st.transport = Some(t);
        Ok(())
    }
    fn getopt(&self, level: i32, name: i32, buf: &mut [u8]) -> Result<usize> {
        getopt(level, name, buf)
    }
    fn setopt(&self, _level: i32, _name: i32, _val: &[u8]) -> Result<()> {
        Err(Error(FI_ENOPROTOOPT))
    }
    fn close(&self) -> Result<()> {
        self.stop.store(true, Ordering::Release);
        let h = locked(&self.st).thread.take();
        if let Some(h) = h {
            let _ = h.join();
        }
        Ok(())
    }
}

impl Drop for MsgPep {
    fn drop(&mut self) {
        let _ = PassiveEndpoint::close(self);
    }
}

fn getopt(level: i32, name: i32, buf: &mut [u8]) -> Result<usize> {
    if level != FI_OPT_ENDPOINT || name != FI_OPT_CM_DATA_SIZE {
        return Err(Error(FI_ENOPROTOOPT));
    }
    let v = CM_DATA_MAX.to_ne_bytes();
    if buf.len() < v.len() {
        return Err(Error(FI_ETOOSMALL));
    }
    buf[..v.len()].copy_from_slice(&v);
    Ok(v.len())
}

// ---------------------------------------------------------------- endpoint

/// Address and key after the header of a write segment or read request.
fn rma_at(m: &[u8]) -> Result<(u64, u64)> {
    let b = m.get(HDR..HDR + RMA_HDR).ok_or(Error(FI_EIO))?;
    let word = |i: usize| b[i..i + 8].try_into().map(u64::from_le_bytes).map_err(|_| Error(FI_EIO));
    Ok((word(0)?, word(8)?))
}

/// Where `len` bytes at `addr` under `key` are in this process, if the
/// domain's registration allows `access`.
fn target(mr: &Locked<MrRegistry>, key: u64, addr: u64, len: usize, access: u64) -> Result<usize> {
    let reg = mr.lock();
    let off = reg.verify(key, addr, len, access)?;
    Ok(reg.get(key).map_or(0, |r| r.base) + off)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Opened, not connecting.
    Idle,
    /// Opened on a connection request, `fi_accept` not called yet.
    AcceptPending,
    /// `fi_connect` called; waiting for the connection and the answer.
    Connecting,
    Connected,
    /// Shut down (either side) or failed to connect.
    Down,
}

struct TxPend {
    /// `K_DATA`, `K_WRITE` or `K_READ`.
    kind: u8,
    /// The remote buffer of an RMA operation: address and key.
    rma: (u64, u64),
    iov: [Iov; IOV_MAX],
    n: usize,
    /// An inject's bytes, copied when they could not go at once.
    owned: Option<Vec<u8>>,
    total: usize,
    sent: usize,
    context: usize,
    flags: u64,
    data: u64,
    completion: bool,
}

struct RxPend {
    iov: [Iov; IOV_MAX],
    n: usize,
    context: usize,
    completion: bool,
    got: usize,
    olen: usize,
    data: Option<u64>,
}

impl RxPend {
    /// Copies `p` at the current offset; what does not fit is counted in
    /// `olen`.
    ///
    /// # Safety
    /// The iovs are writable (the receive's contract).
    unsafe fn absorb(&mut self, p: &[u8]) {
        let mut at = self.got;
        let mut src = p;
        for v in &self.iov[..self.n] {
            if src.is_empty() {
                break;
            }
            if at >= v.len {
                at -= v.len;
                continue;
            }
            let k = (v.len - at).min(src.len());
            // SAFETY: base..base+len is the application's writable buffer
            // (caller); at + k <= len.
            unsafe { rfabric_core::copy::copy_bytes(src.as_ptr(), (v.base + at) as *mut u8, k) };
            self.got += k;
            src = &src[k..];
            at = 0;
        }
        self.olen += src.len();
    }
}

struct Unexp {
    flags: u8,
    data: u64,
    bytes: Vec<u8>,
}

#[derive(Default)]
struct Rx {
    posted: VecDeque<RxPend>,
    cur: Option<RxPend>,
    unexp: VecDeque<Unexp>,
    cq: Option<Arc<ProgressCq>>,
    selective: bool,
}

impl Rx {
    fn complete(&mut self, r: RxPend) {
        let Some(cq) = &self.cq else { return };
        let base = Completion {
            op_context: r.context,
            flags: FI_RECV | FI_MSG | if r.data.is_some() { FI_REMOTE_CQ_DATA } else { 0 },
            len: r.got,
            buf: r.iov[0].base,
            data: r.data.unwrap_or(0),
            tag: 0,
            src_addr: FI_ADDR_NOTAVAIL,
        };
        if r.olen > 0 {
            rfabric_core::fi_dbg!(NAME, FI_LOG_EP_DATA, "receive of {} bytes truncated: {} more arrived", r.got, r.olen);
            cq.push_err(ErrCompletion { base, err: FI_ETRUNC, prov_errno: 0, olen: r.olen, err_data: Vec::new() });
        } else if r.completion || !self.selective {
            cq.push(base);
        }
    }

    /// One data segment: into the receive under way, a posted one, or the
    /// unexpected queue.
    ///
    /// # Safety
    /// Posted receive buffers are writable.
    unsafe fn segment(&mut self, flags: u8, data: u64, p: &[u8]) -> Result<()> {
        if self.unexp.is_empty() {
            if self.cur.is_none() && flags & F_FIRST != 0 {
                self.cur = self.posted.pop_front();
            }
            if let Some(cur) = self.cur.as_mut() {
                if flags & F_FIRST != 0 && cur.got + cur.olen > 0 {
                    return Err(Error(FI_EIO));
                }
                // SAFETY: forwarded.
                unsafe { cur.absorb(p) };
                if flags & F_CQDATA != 0 {
                    cur.data = Some(data);
                }
                if flags & F_LAST != 0 {
                    if let Some(r) = self.cur.take() {
                        self.complete(r);
                    }
                }
                return Ok(());
            }
        }
        self.unexp.push_back(Unexp { flags, data, bytes: p.to_vec() });
        Ok(())
    }

    /// Gives unexpected segments to posted receives.
    ///
    /// # Safety
    /// Posted receive buffers are writable.
    unsafe fn drain_unexp(&mut self) -> Result<()> {
        while !self.unexp.is_empty() && (self.cur.is_some() || !self.posted.is_empty()) {
            let mut q = std::mem::take(&mut self.unexp);
            while let Some(u) = q.pop_front() {
                // SAFETY: forwarded.
                unsafe { self.segment(u.flags, u.data, &u.bytes)? };
                if !self.unexp.is_empty() {
                    // No receive took it: the rest stays queued behind it.
                    self.unexp.extend(q.drain(..));
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    fn cancel_all(&mut self) {
        let rs: Vec<RxPend> = self.cur.take().into_iter().chain(self.posted.drain(..)).collect();
        if let Some(cq) = &self.cq {
            for r in rs {
                let base = Completion { op_context: r.context, flags: FI_RECV | FI_MSG, buf: r.iov[0].base, src_addr: FI_ADDR_NOTAVAIL, ..Completion::default() };
                cq.push_err(ErrCompletion { base, err: FI_ECANCELED, prov_errno: 0, olen: 0, err_data: Vec::new() });
            }
        }
    }
}

/// A send whose bytes were all handed to the connection, waiting for the
/// socket to take the last of them.
struct TxDone {
    /// `Tx::handed` after its last segment.
    end: u64,
    context: usize,
    flags: u64,
    completion: bool,
}

/// An RMA operation sent, waiting for the target's answer (answers come in
/// the order of the requests: one connection, served in order).
struct RmaWait {
    read: bool,
    iov: [Iov; IOV_MAX],
    n: usize,
    got: usize,
    context: usize,
    flags: u64,
    completion: bool,
}

#[derive(Default)]
struct Tx {
    q: VecDeque<TxPend>,
    /// RMA operations waiting for the target.
    rma: VecDeque<RmaWait>,
    /// Sends completed when the socket has taken all their bytes.
    done: VecDeque<TxDone>,
    /// Bytes handed to the connection so far (with its framing).
    handed: u64,
    cq: Option<Arc<ProgressCq>>,
    selective: bool,
}

impl Tx {
    fn complete(&self, context: usize, flags: u64, completion: bool, err: i32) {
        self.complete_as(FI_SEND | FI_MSG, context, flags, completion, err)
    }

    fn complete_as(&self, what: u64, context: usize, flags: u64, completion: bool, err: i32) {
        let Some(cq) = &self.cq else { return };
        let base = Completion { op_context: context, flags: what, src_addr: FI_ADDR_NOTAVAIL, ..Completion::default() };
        if err != 0 {
            cq.push_err(ErrCompletion { base, err, prov_errno: 0, olen: 0, err_data: Vec::new() });
        } else if completion && (!self.selective || flags & FI_COMPLETION != 0) {
            cq.push(base);
        }
    }

    /// Completes the sends whose bytes the socket took: a completion means
    /// the data left this process (as upstream's tcp provider), so an
    /// application that stops progressing after it loses nothing.
    fn retire(&mut self, conn: &TcpConn) -> usize {
        let written = self.handed - conn.queued() as u64;
        let mut n = 0;
        while self.done.front().is_some_and(|d| d.end <= written) {
            if let Some(d) = self.done.pop_front() {
                self.complete(d.context, d.flags, d.completion, 0);
                n += 1;
            }
        }
        n
    }

    /// Hands segments of queued sends to the connection while it holds
    /// less than [`TX_HIGH`] bytes; `force` sends the front one whole.
    fn pump(&mut self, conn: &mut TcpConn, mut force: bool) -> Result<usize> {
        let mut done = 0;
        conn.flush()?;
        while let Some(t) = self.q.front_mut() {
            if conn.queued() >= TX_HIGH && !force {
                break;
            }
            if t.kind == K_READ {
                let mut req = [0u8; RMA_HDR + 8];
                req[..8].copy_from_slice(&t.rma.0.to_le_bytes());
                req[8..16].copy_from_slice(&t.rma.1.to_le_bytes());
                req[16..24].copy_from_slice(&(t.total as u64).to_le_bytes());
                conn.send(&[&hdr(K_READ, F_FIRST | F_LAST, 0), &req])?;
                self.handed += (crate::tcp::FRAME_HDR + HDR + req.len()) as u64;
                if let Some(t) = self.q.pop_front() {
                    self.rma.push_back(RmaWait { read: true, iov: t.iov, n: t.n, got: 0, context: t.context, flags: t.flags, completion: t.completion });
                }
                done += 1;
                continue;
            }
            let len = (t.total - t.sent).min(SEG);
            let mut flags = 0;
            if t.sent == 0 {
                flags |= F_FIRST;
            }
            if t.sent + len == t.total {
                flags |= F_LAST;
            }
            if t.flags & FI_REMOTE_CQ_DATA != 0 {
                flags |= F_CQDATA;
            }
            let h = hdr(t.kind, flags, t.data);
            let mut at = [0u8; RMA_HDR];
            at[..8].copy_from_slice(&(t.rma.0.wrapping_add(t.sent as u64)).to_le_bytes());
            at[8..].copy_from_slice(&t.rma.1.to_le_bytes());
            let mut parts: [&[u8]; IOV_MAX + 2] = [&[]; IOV_MAX + 2];
            parts[0] = &h;
            let mut np = 1;
            if t.kind == K_WRITE {
                parts[1] = &at;
                np = 2;
            }
            if let Some(o) = &t.owned {
                parts[np] = &o[t.sent..t.sent + len];
                np += 1;
            } else {
                for p in rfabric_core::provider::iov_pieces(&t.iov[..t.n], t.sent, len) {
                    // SAFETY: the send's buffers stay readable until it
                    // completes (the contract of Endpoint::send); each
                    // piece lies inside one of them.
                    parts[np] = unsafe { std::slice::from_raw_parts(p.base as *const u8, p.len) };
                    np += 1;
                }
            }
            conn.send(&parts[..np])?;
            t.sent += len;
            self.handed += (crate::tcp::FRAME_HDR + HDR + if t.kind == K_WRITE { RMA_HDR } else { 0 } + len) as u64;
            done += 1;
            if flags & F_LAST != 0 {
                if let Some(t) = self.q.pop_front() {
                    if t.kind == K_WRITE {
                        self.rma.push_back(RmaWait { read: false, iov: t.iov, n: 0, got: 0, context: t.context, flags: t.flags, completion: t.completion });
                    } else {
                        self.done.push_back(TxDone { end: self.handed, context: t.context, flags: t.flags, completion: t.completion });
                    }
                }
                force = false;
            }
        }
        Ok(done + self.retire(conn))
    }

    /// One message of the endpoint's own (answers to the peer's RMA),
    /// counted with the rest.
    fn raw(&mut self, conn: &mut TcpConn, parts: &[&[u8]]) -> Result<()> {
        conn.send(parts)?;
        self.handed += (crate::tcp::FRAME_HDR + parts.iter().map(|p| p.len()).sum::<usize>()) as u64;
        Ok(())
    }

    fn complete_rma(&self, w: &RmaWait, err: i32) {
        let what = if w.read { FI_RMA | FI_READ } else { FI_RMA | FI_WRITE };
        self.complete_as(what, w.context, w.flags, w.completion, err);
    }

    fn cancel_all(&mut self) {
        while let Some(w) = self.rma.pop_front() {
            self.complete_rma(&w, FI_ECANCELED);
        }
        while let Some(d) = self.done.pop_front() {
            self.complete(d.context, d.flags, d.completion, FI_ECANCELED);
        }
        while let Some(t) = self.q.pop_front() {
            self.complete(t.context, t.flags, t.completion, FI_ECANCELED);
        }
    }
}

struct EpState {
    phase: Phase,
    conn: Option<TcpConn>,
    /// When `Connecting` began.
    since: Instant,
    eq: Option<EqBinding>,
    tx: Tx,
    rx: Rx,
    /// The address the connection is made from: the domain's interface
    /// and the port of the info's `src_addr` (0: any).
    local: SocketAddr,
    /// The domain's registrations, which incoming RMA must name.
    mr: Arc<Locked<MrRegistry>>,
    /// The first error of the incoming write under way (0: none).
    w_err: i32,
    /// Bytes of the RMA write arriving now (its completion's `len`).
    w_len: usize,
    v6: bool,
    tx_size: usize,
    rx_size: usize,
}

impl EpState {
    fn down(&mut self, event: bool) {
        let was = self.phase;
        self.phase = Phase::Down;
        self.conn = None;
        self.tx.cancel_all();
        self.rx.cancel_all();
        if event && was == Phase::Connected {
            if let Some(eq) = &self.eq {
                let _ = eq.cm(NAME, FI_SHUTDOWN, None, None, &[]);
            }
        }
    }

    fn fail_connect(&mut self, err: i32, data: &[u8]) {
        rfabric_core::fi_info!(NAME, FI_LOG_EP_CTRL, "connection failed: {}", Error(err));
        self.phase = Phase::Down;
        self.conn = None;
        if let Some(eq) = &self.eq {
            let _ = eq.error(NAME, err, 0, data);
        }
    }

    /// The active side's handshake: the answer to the request.
    fn handshake(&mut self) -> usize {
        let Some(conn) = self.conn.as_mut() else { return 0 };
        let r = conn.flush().and_then(|_| conn.recv().map(|m| m.map(|m| m.to_vec())));
        match r {
            Ok(None) if self.since.elapsed() < CM_TIMEOUT => 0,
            Ok(None) => {
                self.fail_connect(FI_ETIMEDOUT, &[]);
                1
            }
            Err(e) => {
                let e = if e.0 == FI_ESHUTDOWN || e.0 == FI_ECONNRESET { FI_ECONNREFUSED } else { e.0 };
                self.fail_connect(e, &[]);
                1
            }
            Ok(Some(m)) => {
                let data = m.get(HDR..).unwrap_or(&[]);
                match parse_hdr(&m).map(|h| h.0) {
                    Some(K_ACCEPT) => {
                        self.phase = Phase::Connected;
                        if let Some(eq) = &self.eq {
                            let _ = eq.cm(NAME, FI_CONNECTED, None, None, &data[..data.len().min(CM_DATA_MAX)]);
                        }
                    }
                    Some(K_REJECT) => self.fail_connect(FI_ECONNREFUSED, &data[..data.len().min(CM_DATA_MAX)]),
                    _ => self.fail_connect(FI_EIO, &[]),
                }
                1
            }
        }
    }

    /// Data progress of a connected endpoint.
    fn pump(&mut self) -> usize {
        let Some(conn) = self.conn.as_mut() else { return 0 };
        let r = (|| -> Result<usize> {
            let mut n = self.tx.pump(conn, false)?;
            for _ in 0..64 {
                if self.rx.cur.is_none() && self.rx.unexp.len() >= UNEXP_MAX {
                    break;
                }
                let Some(m) = conn.recv()? else { break };
                let (kind, flags, data) = parse_hdr(m).ok_or(Error(FI_EIO))?;
                n += 1;
                match kind {
                    // SAFETY: posted receive buffers stay writable until
                    // they complete (the contract of Endpoint::recv).
                    K_DATA => unsafe { self.rx.segment(flags, data, &m[HDR..])? },
                    K_WRITE => {
                        let (addr, key) = rma_at(m)?;
                        let p = &m[HDR + RMA_HDR..];
                        self.w_len += p.len();
                        if self.w_err == 0 {
                            match target(&self.mr, key, addr, p.len(), FI_REMOTE_WRITE) {
                                // SAFETY: `to` starts a registered region of
                                // at least p.len() bytes (checked), writable
                                // remotely (FI_REMOTE_WRITE): the application
                                // keeps it until fi_close of its MR.
                                Ok(to) => unsafe { rfabric_core::copy::copy_bytes(p.as_ptr(), to as *mut u8, p.len()) },
                                Err(e) => self.w_err = e.0,
                            }
                        }
                        if flags & F_LAST != 0 {
                            let err = std::mem::take(&mut self.w_err);
                            let len = std::mem::take(&mut self.w_len);
                            if err == 0 && flags & F_CQDATA != 0 {
                                if let Some(cq) = &self.rx.cq {
                                    // fi_cq(3): len is the length written.
                                    let flags = FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA;
                                    cq.push(Completion { flags, len, data, src_addr: FI_ADDR_NOTAVAIL, ..Completion::default() });
                                }
                            }
                            if err != 0 {
                                rfabric_core::fi_info!(NAME, FI_LOG_EP_DATA, "refused an RMA write: {}", Error(err));
                            }
                            self.tx.raw(conn, &[&hdr(K_WACK, F_FIRST | F_LAST, err as u64)])?;
                        }
                    }
                    K_READ => {
                        let (addr, key) = rma_at(m)?;
                        let len = m.get(HDR + RMA_HDR..HDR + RMA_HDR + 8).and_then(|b| b.try_into().ok()).map(u64::from_le_bytes).ok_or(Error(FI_EIO))?;
                        let len = usize::try_from(len).map_err(|_| Error(FI_EIO))?;
                        match target(&self.mr, key, addr, len, FI_REMOTE_READ) {
                            Ok(from) => {
                                let mut off = 0;
                                loop {
                                    let k = (len - off).min(SEG);
                                    let mut f = if off == 0 { F_FIRST } else { 0 };
                                    if off + k == len {
                                        f |= F_LAST;
                                    }
                                    // SAFETY: `from` starts a registered
                                    // region of at least len bytes (checked),
                                    // remotely readable; off + k <= len.
                                    let b = unsafe { std::slice::from_raw_parts((from + off) as *const u8, k) };
                                    self.tx.raw(conn, &[&hdr(K_RRESP, f, 0), b])?;
                                    off += k;
                                    if off == len {
                                        break;
                                    }
                                }
                            }
                            Err(e) => {
                                rfabric_core::fi_info!(NAME, FI_LOG_EP_DATA, "refused an RMA read: {}", e);
                                self.tx.raw(conn, &[&hdr(K_RRESP, F_FIRST | F_LAST, e.0 as u64)])?;
                            }
                        }
                    }
                    K_WACK => {
                        let w = self.tx.rma.pop_front().filter(|w| !w.read).ok_or(Error(FI_EIO))?;
                        self.tx.complete_rma(&w, data as i32);
                    }
                    K_RRESP => {
                        let w = self.tx.rma.front_mut().filter(|w| w.read).ok_or(Error(FI_EIO))?;
                        let p = &m[HDR..];
                        let mut rp = RxPend { iov: w.iov, n: w.n, context: 0, completion: false, got: w.got, olen: 0, data: None };
                        // SAFETY: a read's local buffers stay writable until
                        // it completes (the contract of Endpoint::rma_read).
                        unsafe { rp.absorb(p) };
                        w.got = rp.got;
                        if flags & F_LAST != 0 {
                            if let Some(w) = self.tx.rma.pop_front() {
                                let err = if data != 0 { data as i32 } else if rp.olen > 0 { FI_EIO } else { 0 };
                                self.tx.complete_rma(&w, err);
                            }
                        }
                    }
                    _ => return Err(Error(FI_EIO)),
                }
            }
            Ok(n)
        })();
        match r {
            Ok(n) => n,
            Err(e) => {
                if e.0 != FI_ESHUTDOWN {
                    rfabric_core::fi_info!(NAME, FI_LOG_EP_DATA, "connection broken: {}", e);
                }
                self.down(true);
                1
            }
        }
    }

    fn progress(&mut self) -> usize {
        match self.phase {
            Phase::Connected => self.pump(),
            Phase::Connecting => self.handshake(),
            _ => 0,
        }
    }
}

struct Shared {
    st: Mutex<EpState>,
    stop: AtomicBool,
}

impl Progress for Shared {
    fn progress(&self) -> usize {
        locked(&self.st).progress()
    }
}

impl Shared {
    /// The endpoint's thread: carries the handshake of `fi_connect` and
    /// notices a peer that went away while nobody reads a CQ.
    fn watch(self: Arc<Self>, fd: RawFd) {
        while !self.stop.load(Ordering::Acquire) {
            let (phase, waiting) = {
                let st = locked(&self.st);
                (st.phase, st.conn.as_ref().is_some_and(|c| c.queued() > 0))
            };
            let ev = match phase {
                Phase::Connecting => poll_fd(fd, libc::POLLIN | libc::POLLOUT | libc::POLLRDHUP, 10),
                // Bytes the application handed on still leave while it
                // progresses nothing.
                Phase::Connected if waiting => poll_fd(fd, libc::POLLOUT | libc::POLLRDHUP, 10),
                Phase::Connected => poll_fd(fd, libc::POLLRDHUP, 10),
                _ => return,
            };
            if ev == 0 && phase == Phase::Connected {
                continue;
            }
            let n = match self.st.try_lock() {
                Ok(mut st) => st.progress(),
                Err(_) => 0,
            };
            if n == 0 {
                std::thread::sleep(Duration::from_millis(if phase == Phase::Connecting { 1 } else { 10 }));
            }
        }
    }
}

pub struct MsgEp {
    sh: Arc<Shared>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    bound: Mutex<Vec<Arc<ProgressCq>>>,
}

impl MsgEp {
    fn new(info: &Info, local_ip: IpAddr, mr: Arc<Locked<MrRegistry>>, req: Option<MsgReq>) -> MsgEp {
        let port = info.src_addr.as_deref().and_then(sockaddr::from_bytes_any).map_or(0, |a| a.port());
        let phase = if req.is_some() { Phase::AcceptPending } else { Phase::Idle };
        let st = EpState {
            phase,
            conn: req.map(|r| r.conn),
            since: Instant::now(),
            eq: None,
            tx: Tx { q: VecDeque::with_capacity(QUEUE_SIZE), ..Tx::default() },
            rx: Rx { posted: VecDeque::with_capacity(QUEUE_SIZE), ..Rx::default() },
            local: SocketAddr::new(local_ip, port),
            mr,
            w_err: 0,
            w_len: 0,
            v6: info.addr_format == FI_SOCKADDR_IN6,
            tx_size: info.tx_attr.map_or(QUEUE_SIZE, |t| if t.size == 0 { QUEUE_SIZE } else { t.size }),
            rx_size: info.rx_attr.map_or(QUEUE_SIZE, |r| if r.size == 0 { QUEUE_SIZE } else { r.size }),
        };
        MsgEp { sh: Arc::new(Shared { st: Mutex::new(st), stop: AtomicBool::new(false) }), thread: Mutex::new(None), bound: Mutex::new(Vec::new()) }
    }

    fn st(&self) -> MutexGuard<'_, EpState> {
        locked(&self.sh.st)
    }

    fn start_thread(&self, fd: RawFd) {
        let sh = self.sh.clone();
        if let Ok(h) = std::thread::Builder::new().name("tcp-msg-cm".into()).spawn(move || sh.watch(fd)) {
            *locked(&self.thread) = Some(h);
        }
    }

    /// `fi_write*` (`K_WRITE`) and `fi_read*` (`K_READ`).
    ///
    /// # Safety
    /// The local buffers stay readable (write) or writable (read) until the
    /// operation completes; an inject's until the call returns.
    unsafe fn rma(&self, op: &RmaOp<'_>, kind: u8) -> Result<()> {
        let mut st = self.st();
        if st.phase != Phase::Connected {
            return Err(if st.phase == Phase::Down { Error(FI_ENOTCONN) } else { Error(FI_EOPBADSTATE) });
        }
        if op.iov.len() > IOV_MAX || op.rma.len() != 1 {
            return Err(EINVAL);
        }
        let total: usize = op.iov.iter().map(|v| v.len).sum();
        if total > MAX_MSG || total != op.rma[0].len {
            return Err(if total > MAX_MSG { Error(FI_EMSGSIZE) } else { EINVAL });
        }
        let inject = op.flags & FI_INJECT != 0 || op.no_completion;
        if inject && (kind == K_READ || total > INJECT_SIZE) {
            return Err(EINVAL);
        }
        if st.tx.q.len() + st.tx.rma.len() >= st.tx_size {
            st.pump();
            if st.tx.q.len() + st.tx.rma.len() >= st.tx_size {
                return Err(Error(FI_EAGAIN));
            }
        }
        let mut iov = [Iov::default(); IOV_MAX];
        iov[..op.iov.len()].copy_from_slice(op.iov);
        let flags = op.flags & !if kind == K_READ { FI_REMOTE_CQ_DATA } else { 0 };
        let mut t = TxPend { kind, rma: (op.rma[0].addr, op.rma[0].key), iov, n: op.iov.len(), owned: None, total, sent: 0, context: op.context, flags, data: op.data, completion: !op.no_completion };
        if inject {
            let mut o = Vec::with_capacity(total);
            for v in op.iov {
                // SAFETY: an inject's buffers are readable during the call.
                o.extend_from_slice(unsafe { std::slice::from_raw_parts(v.base as *const u8, v.len) });
            }
            t.owned = Some(o);
        }
        st.tx.q.push_back(t);
        let EpState { tx, conn, .. } = &mut *st;
        let r = match conn.as_mut() {
            Some(c) => tx.pump(c, false),
            None => Ok(0),
        };
        if let Err(e) = r {
            rfabric_core::fi_info!(NAME, FI_LOG_EP_DATA, "connection broken: {}", e);
            st.down(true);
        }
        Ok(())
    }

    fn need_eq(st: &EpState, call: &str) -> Result<()> {
        if st.eq.is_none() {
            rfabric_core::fi_warn!(NAME, FI_LOG_EP_CTRL, "{}: no EQ bound to the endpoint", call);
            return Err(Error(FI_ENOEQ));
        }
        Ok(())
    }
}

impl Endpoint for MsgEp {
    fn bind(&self, target: Bind<'_>, flags: u64) -> Result<()> {
        match target {
            Bind::Eq(eq) => {
                let mut st = self.st();
                if st.phase != Phase::Idle && st.phase != Phase::AcceptPending {
                    return Err(Error(FI_EOPBADSTATE));
                }
                st.eq = Some(eq.clone());
                Ok(())
            }
            Bind::Cq(cq) => {
                let cq = cq.clone().as_any_arc().downcast::<ProgressCq>().map_err(|_| EINVAL)?;
                if flags & !(FI_TRANSMIT | FI_RECV | FI_SELECTIVE_COMPLETION) != 0 {
                    return Err(Error(FI_EBADFLAGS));
                }
                let mut st = self.st();
                if flags & FI_TRANSMIT != 0 {
                    st.tx.cq = Some(cq.clone());
                    st.tx.selective = flags & FI_SELECTIVE_COMPLETION != 0;
                }
                if flags & FI_RECV != 0 {
                    st.rx.cq = Some(cq.clone());
                    st.rx.selective = flags & FI_SELECTIVE_COMPLETION != 0;
                }
                drop(st);
                cq.bound.attach(self.sh.clone());
                locked(&self.bound).push(cq);
                Ok(())
            }
            Bind::Cntr(_) | Bind::Av(_) | Bind::Srx(_) => Err(ENOSYS),
        }
    }

    fn enable(&self) -> Result<()> {
        let st = self.st();
        Self::need_eq(&st, "fi_enable")?;
        if st.tx.cq.is_none() && st.rx.cq.is_none() {
            rfabric_core::fi_warn!(NAME, FI_LOG_EP_CTRL, "fi_enable: no CQ bound to the endpoint");
            return Err(Error(FI_ENOCQ));
        }
        Ok(())
    }

    fn getname(&self, buf: &mut [u8]) -> Result<usize> {
        let st = self.st();
        let a = st.conn.as_ref().and_then(|c| c.local_addr()).unwrap_or(st.local);
        Ok(copy_out(&sockaddr::to_bytes(&a), buf))
    }

    fn getpeer(&self, buf: &mut [u8]) -> Result<usize> {
        let st = self.st();
        let a = if st.phase == Phase::Connected { st.conn.as_ref().and_then(|c| c.peer_addr()) } else { None };
        let Some(a) = a else {
            rfabric_core::fi_warn!(NAME, FI_LOG_EP_CTRL, "fi_getpeer: the endpoint is not connected");
            return Err(Error(FI_ENOTCONN));
        };
        Ok(copy_out(&sockaddr::to_bytes(&a), buf))
    }

    fn connect(&self, addr: &[u8], data: &[u8]) -> Result<()> {
        cm_data(data, "fi_connect")?;
        let mut st = self.st();
        Self::need_eq(&st, "fi_connect")?;
        if st.phase != Phase::Idle {
            rfabric_core::fi_warn!(NAME, FI_LOG_EP_CTRL, "fi_connect: the endpoint is not a new, unconnected one ({:?})", st.phase);
            return Err(Error(FI_EOPBADSTATE));
        }
        let to = match sockaddr::from_bytes(addr) {
            Some(a) if a.is_ipv6() == st.v6 => a,
            _ => {
                rfabric_core::fi_warn!(NAME, FI_LOG_EP_CTRL, "fi_connect: not a {} address with a port", if st.v6 { "sockaddr_in6" } else { "sockaddr_in" });
                return Err(EINVAL);
            }
        };
        let to_b = sockaddr::to_bytes(&to);
        let mut conn = match TcpConn::connect_from(&st.local, &to_b, WIRE_MAX) {
            Err(e) if e.0 == FI_EADDRINUSE && st.local.port() != 0 => {
                rfabric_core::fi_warn!(NAME, FI_LOG_EP_CTRL, "fi_connect: {} is in use (by a passive endpoint still open?); connecting from another port", st.local);
                TcpConn::connect_from(&SocketAddr::new(st.local.ip(), 0), &to_b, WIRE_MAX)?
            }
            r => r?,
        };
        conn.send(&[&hdr(K_REQ, WIRE_VERSION, 0), data])?;
        let fd = conn.fd();
        st.conn = Some(conn);
        st.phase = Phase::Connecting;
        st.since = Instant::now();
        drop(st);
        rfabric_core::fi_dbg!(NAME, FI_LOG_EP_CTRL, "connecting to {}", to);
        self.start_thread(fd);
        Ok(())
    }

    fn accept(&self, data: &[u8]) -> Result<()> {
        cm_data(data, "fi_accept")?;
        let mut st = self.st();
        Self::need_eq(&st, "fi_accept")?;
        if st.phase != Phase::AcceptPending {
            rfabric_core::fi_warn!(NAME, FI_LOG_EP_CTRL, "fi_accept: the endpoint was not opened on a pending connection request ({:?})", st.phase);
            return Err(if st.phase == Phase::Idle { EINVAL } else { Error(FI_EOPBADSTATE) });
        }
        let Some(conn) = st.conn.as_mut() else { return Err(Error(FI_EOPBADSTATE)) };
        let sent = conn.send(&[&hdr(K_ACCEPT, 0, 0), data]).and_then(|_| conn.flush());
        if let Err(e) = sent {
            st.fail_connect(e.0, &[]);
            return Err(e);
        }
        let fd = conn.fd();
        st.phase = Phase::Connected;
        if let Some(eq) = &st.eq {
            let _ = eq.cm(NAME, FI_CONNECTED, None, None, &[]);
        }
        drop(st);
        self.start_thread(fd);
        Ok(())
    }

    fn shutdown(&self, _flags: u64) -> Result<()> {
        let mut st = self.st();
        if st.phase == Phase::Down {
            // The peer shut the connection first: its FI_SHUTDOWN is on
            // the EQ already.
            return Ok(());
        }
        if st.phase != Phase::Connected {
            rfabric_core::fi_warn!(NAME, FI_LOG_EP_CTRL, "fi_shutdown: the endpoint is not connected ({:?})", st.phase);
            return Err(Error(FI_EOPBADSTATE));
        }
        // What was handed to the connection still goes out, for a while.
        let end = Instant::now() + Duration::from_secs(2);
        while let Some(c) = st.conn.as_mut() {
            if !c.flush().is_ok_and(|q| q > 0) || Instant::now() >= end {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        // FI_SHUTDOWN on our EQ too, as upstream's tcp reports it.
        st.down(true);
        Ok(())
    }

    unsafe fn send(&self, op: &TxOp<'_>) -> Result<()> {
        let mut st = self.st();
        if st.phase != Phase::Connected {
            return Err(if st.phase == Phase::Down { Error(FI_ENOTCONN) } else { Error(FI_EOPBADSTATE) });
        }
        if op.iov.len() > IOV_MAX {
            return Err(EINVAL);
        }
        let total: usize = op.iov.iter().map(|v| v.len).sum();
        if total > MAX_MSG {
            return Err(Error(FI_EMSGSIZE));
        }
        let inject = op.flags & FI_INJECT != 0 || op.no_completion;
        if inject && total > INJECT_SIZE {
            return Err(EINVAL);
        }
        if st.tx.q.len() >= st.tx_size {
            st.pump();
            if st.tx.q.len() >= st.tx_size {
                return Err(Error(FI_EAGAIN));
            }
        }
        let mut iov = [Iov::default(); IOV_MAX];
        iov[..op.iov.len()].copy_from_slice(op.iov);
        let mut t = TxPend { kind: K_DATA, rma: (0, 0), iov, n: op.iov.len(), owned: None, total, sent: 0, context: op.context, flags: op.flags, data: op.data, completion: !op.no_completion };
        let force = inject && st.tx.q.is_empty();
        if inject && !force {
            let mut o = Vec::with_capacity(total);
            for v in op.iov {
                // SAFETY: an inject's buffers are readable during the call.
                o.extend_from_slice(unsafe { std::slice::from_raw_parts(v.base as *const u8, v.len) });
            }
            t.owned = Some(o);
        }
        st.tx.q.push_back(t);
        let EpState { tx, conn, .. } = &mut *st;
        let r = match conn.as_mut() {
            Some(c) => tx.pump(c, force),
            None => Ok(0),
        };
        if let Err(e) = r {
            rfabric_core::fi_info!(NAME, FI_LOG_EP_DATA, "connection broken: {}", e);
            st.down(true);
        }
        Ok(())
    }

    unsafe fn rma_write(&self, op: &RmaOp<'_>) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe { self.rma(op, K_WRITE) }
    }

    unsafe fn rma_read(&self, op: &RmaOp<'_>) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe { self.rma(op, K_READ) }
    }

    unsafe fn recv(&self, op: &RxOp<'_>) -> Result<()> {
        let mut st = self.st();
        if st.phase == Phase::Down {
            return Err(Error(FI_ENOTCONN));
        }
        if op.iov.len() > IOV_MAX {
            return Err(EINVAL);
        }
        if st.rx.posted.len() >= st.rx_size {
            return Err(Error(FI_EAGAIN));
        }
        let mut iov = [Iov::default(); IOV_MAX];
        iov[..op.iov.len()].copy_from_slice(op.iov);
        let completion = op.flags & FI_COMPLETION != 0;
        st.rx.posted.push_back(RxPend { iov, n: op.iov.len(), context: op.context, completion, got: 0, olen: 0, data: None });
        // SAFETY: the buffers of posted receives are writable until they
        // complete (this function's contract).
        if unsafe { st.rx.drain_unexp() }.is_err() {
            st.down(true);
        }
        Ok(())
    }

    fn getopt(&self, level: i32, name: i32, buf: &mut [u8]) -> Result<usize> {
        getopt(level, name, buf)
    }

    fn setopt(&self, _level: i32, _name: i32, _val: &[u8]) -> Result<()> {
        Err(Error(FI_ENOPROTOOPT))
    }

    fn close(&self) -> Result<()> {
        self.sh.stop.store(true, Ordering::Release);
        if let Some(h) = locked(&self.thread).take() {
            let _ = h.join();
        }
        let me: Arc<dyn Progress> = self.sh.clone();
        for cq in locked(&self.bound).drain(..) {
            cq.bound.detach(&me);
        }
        let mut st = self.st();
        if let Some(c) = st.conn.as_mut() {
            let _ = c.flush();
        }
        st.conn = None;
        st.phase = Phase::Down;
        Ok(())
    }
}

impl Drop for MsgEp {
    fn drop(&mut self) {
        let _ = Endpoint::close(self);
    }
}
