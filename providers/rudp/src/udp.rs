//! The UDP device: what SRD gives in hardware, in software over one UDP
//! socket per endpoint. A handshake (`Hello`/`HelloAck`) exchanges the
//! connection ids that guard against a reused address; data packets carry
//! sequence numbers, cumulative and selective acknowledgements, and are
//! sent again on timeout (with backoff) or when later packets were
//! acknowledged (fast retransmit); duplicates are suppressed; a congestion
//! window (halved on loss) bounds what is in flight; a packet the engine
//! cannot take is simply not acknowledged (receiver-not-ready); a peer that
//! acknowledges nothing for `peer_timeout` is given up on. Delivery is not
//! ordered: the engine orders messages itself.

#![forbid(unsafe_code)]

use crate::device::{Device, PeerId, RxBatch, RxItem, Stats};
use crate::wire::{DevHdr, DevKind, DEV_HDR};
use rfabric_core::abi::*;
use rfabric_core::error::{Error, Result, EAGAIN, EINVAL};
use std::collections::{HashMap, VecDeque};
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

const PROV: &str = "rudp";
/// Sequence numbers a receiver tracks ahead of the first missing one.
const RX_WINDOW: u32 = 4096;
const RX_WORDS: usize = (RX_WINDOW / 64) as usize;
/// Packets in flight to one peer, at most.
const MAX_CWND: usize = 2048;
const MIN_CWND: usize = 8;
const INITIAL_CWND: usize = 128;
/// Datagrams read per `recv` call.
const RECV_BATCH: usize = 64;
/// Acknowledge at once after this many unacknowledged arrivals.
const ACK_EVERY: u32 = 32;
const MIN_RTO: Duration = Duration::from_millis(2);
pub(crate) const MAX_RTO: Duration = Duration::from_millis(250);
/// Doublings of the retransmission timeout, at most.
const MAX_BACKOFF: u32 = 6;
const TIMER_SCAN: Duration = Duration::from_millis(1);
/// A pause between two `recv`s this long is not counted as peers' silence.
const STALL_CREDIT: Duration = Duration::from_millis(50);
/// Selective-ack bits an acknowledgement alone carries beyond its header.
const EXT_SACK_BITS: u32 = 2048;

/// Settings of one device.
#[derive(Clone, Debug)]
pub struct UdpConfig {
    /// Largest datagram (UDP payload) sent.
    pub max_datagram: usize,
    /// A peer that acknowledges nothing this long is lost.
    pub peer_timeout: Duration,
    /// Bytes in flight to one peer, at most.
    pub max_inflight_bytes: usize,
    /// Peers one endpoint keeps, at most.
    pub max_peers: usize,
    /// Socket buffer size asked for (each direction).
    pub sockbuf: usize,
    /// Runs of full datagrams to one peer go down as one UDP GSO send
    /// (`UDP_SEGMENT`) where the kernel has it.
    pub gso: bool,
    /// The kernel may hand several received datagrams of one peer to one
    /// receive (`UDP_GRO`), which `recv` splits again.
    pub gro: bool,
}

impl Default for UdpConfig {
    fn default() -> Self {
        UdpConfig { max_datagram: 1472, peer_timeout: Duration::from_secs(10), max_inflight_bytes: 4 << 20, max_peers: 1 << 16, sockbuf: 8 << 20, gso: true, gro: true }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Connecting { since: Instant, next_hello: Instant, tries: u32 },
    Up,
    Lost,
}

struct TxPkt {
    seq: u32,
    buf: Vec<u8>,
    token: u64,
    first: Instant,
    last: Instant,
    tries: u32,
    sacked: bool,
}

struct Peer {
    addr: SocketAddr,
    raw: Vec<u8>,
    state: State,
    remote_conn: u32,
    next_seq: u32,
    unacked: VecDeque<TxPkt>,
    backlog: VecDeque<TxPkt>,
    cwnd: usize,
    srtt: Option<Duration>,
    rttvar: Duration,
    rx_next: u32,
    /// The highest `high` the peer reported (what it has seen of ours).
    last_high: u32,
    /// When `last_high` last moved: while it moves, the peer is taking new
    /// packets, and those beyond it are queued on the way, not lost.
    high_moved: Instant,
    /// When a datagram of the peer last passed the checks: a peer is lost
    /// only when it is silent, not when it refuses packets for lack of room.
    last_heard: Instant,
    /// One past the highest sequence received.
    rx_high: u32,
    rx_bits: [u64; RX_WORDS],
    /// Sequences listed in the batch `recv` is reading (moved to `rx_bits`
    /// once it has read them all): a duplicate within one batch is found
    /// without a walk over the batch, which with GRO holds thousands.
    rx_pend: [u64; RX_WORDS],
    /// In loss recovery until the cumulative ack passes this sequence (the
    /// window is halved once per episode).
    recover: Option<u32>,
    ack_owed: u32,
    busy: bool,
    /// Datagrams of this address dropped for the connection state since
    /// the last one accepted (logged once).
    refused_conn: u32,
}

impl Peer {
    fn new(addr: SocketAddr, state: State, remote_conn: u32) -> Peer {
        Peer {
            raw: crate::sockaddr::to_bytes(&addr),
            addr,
            state,
            remote_conn,
            next_seq: 0,
            unacked: VecDeque::new(),
            backlog: VecDeque::new(),
            cwnd: INITIAL_CWND,
            srtt: None,
            rttvar: Duration::ZERO,
            rx_next: 0,
            last_high: 0,
            high_moved: Instant::now(),
            last_heard: Instant::now(),
            rx_high: 0,
            rx_bits: [0; RX_WORDS],
            rx_pend: [0; RX_WORDS],
            recover: None,
            ack_owed: 0,
            busy: false,
            refused_conn: 0,
        }
    }
    fn bit(&self, seq: u32) -> bool {
        window_bit(&self.rx_bits, seq)
    }
    fn set_bit(&mut self, seq: u32, on: bool) {
        set_window_bit(&mut self.rx_bits, seq, on);
    }
    fn pending(&self, seq: u32) -> bool {
        window_bit(&self.rx_pend, seq)
    }
    fn set_pending(&mut self, seq: u32, on: bool) {
        set_window_bit(&mut self.rx_pend, seq, on);
    }
    /// Moves `rx_next` over everything that arrived in order.
    fn advance(&mut self) {
        while self.bit(self.rx_next) {
            self.set_bit(self.rx_next, false);
            self.rx_next = self.rx_next.wrapping_add(1);
        }
    }
    fn sack(&self) -> u64 {
        let mut s = 0u64;
        for i in 0..64 {
            if self.bit(self.rx_next.wrapping_add(1 + i)) {
                s |= 1 << i;
            }
        }
        s
    }
    fn rto(&self) -> Duration {
        match self.srtt {
            None => MIN_RTO * 2,
            Some(s) => (s + self.rttvar * 4).clamp(MIN_RTO, MAX_RTO),
        }
    }
}

/// Sequence `seq`'s bit in a receive-window bitmap.
fn window_bit(words: &[u64; RX_WORDS], seq: u32) -> bool {
    let i = (seq % RX_WINDOW) as usize;
    words[i / 64] & (1 << (i % 64)) != 0
}

fn set_window_bit(words: &mut [u64; RX_WORDS], seq: u32, on: bool) {
    let i = (seq % RX_WINDOW) as usize;
    if on {
        words[i / 64] |= 1 << (i % 64);
    } else {
        words[i / 64] &= !(1 << (i % 64));
    }
}

pub struct UdpDevice {
    sock: UdpSocket,
    local: SocketAddr,
    conn: u32,
    cfg: UdpConfig,
    peers: Vec<Peer>,
    by_addr: HashMap<SocketAddr, PeerId>,
    pool: Vec<Vec<u8>>,
    busy: Vec<PeerId>,
    /// When timers are next looked at (`TIMER_SCAN` after the last time).
    next_scan: Instant,
    stats: Stats,
    ctl: Vec<u8>,
    /// Between `recv` and `flush`: the engine may still reject packets of
    /// the batch, so `rx_next` must not move over them yet.
    hold: bool,
    /// What `recvmmsg` fills besides the data: headers, source addresses
    /// and control messages, and what `recv_many` makes of them.
    addrs: Box<crate::sys::RecvAddrs>,
    rx_out: Box<RecvOut>,
    /// The extended selective ack of the acknowledgement being read.
    ext_sack: Vec<u8>,
    /// When `recv` last ran.
    last_recv: Option<Instant>,
    /// Since when every `recv` read a full batch: the socket may hold more.
    backlogged: Option<Instant>,
    /// Data datagrams queued for one `sendmmsg` (sent by `push_out`,
    /// `flush` and on entry to and exit from `recv`).
    out: Box<crate::sys::SendBatch>,
    /// `UDP_GRO` is on: receive slots are `GRO_SLOT` bytes.
    gro: bool,
}

/// Per entry of the last `recv_many`: length, source, GRO segment size.
/// Kept in the device so a receive round does not clear them on the stack.
struct RecvOut {
    lens: [usize; RECV_BATCH],
    froms: [Option<SocketAddr>; RECV_BATCH],
    segs: [usize; RECV_BATCH],
}

/// A connection id: random, never 0.
fn fresh_conn() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
    h.write_u32(std::process::id());
    (h.finish() as u32).max(1)
}

#[inline]
fn seq_lt(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

impl UdpDevice {
    /// Binds a socket to `bind` (an interface address; port 0 picks one).
    pub fn open(bind: SocketAddr, cfg: UdpConfig) -> Result<UdpDevice> {
        let sock = UdpSocket::bind(bind).map_err(|e| {
            rfabric_core::fi_warn!(PROV, FI_LOG_EP_CTRL, "cannot bind a UDP socket to {}: {}", bind, e);
            Error(e.raw_os_error().unwrap_or(FI_EIO))
        })?;
        sock.set_nonblocking(true).map_err(|_| Error(FI_EIO))?;
        crate::sys::set_sockbufs(&sock, cfg.sockbuf);
        let local = sock.local_addr().map_err(|_| Error(FI_EIO))?;
        if cfg.max_datagram < DEV_HDR + crate::wire::PROTO_HDR + 64 || cfg.max_datagram > 65507 {
            return Err(EINVAL);
        }
        let now = Instant::now();
        let max_datagram = cfg.max_datagram;
        let gso = cfg.gso && crate::sys::gso_supported(&sock);
        // Coalesced receives come from peers' segmentation offload runs,
        // which datagrams this large never form: GRO would only cost the
        // control message of every receive.
        let want_gro = cfg.gro && crate::sys::runs_fit(max_datagram);
        let gro = want_gro && crate::sys::set_gro(&sock);
        if want_gro && !gro {
            static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
            if !SAID.swap(true, std::sync::atomic::Ordering::Relaxed) {
                rfabric_core::fi_info!(PROV, FI_LOG_EP_CTRL, "the kernel does not take UDP_GRO; each datagram is received alone");
            }
        }
        Ok(UdpDevice {
            sock,
            local,
            conn: fresh_conn(),
            cfg,
            peers: Vec::new(),
            by_addr: HashMap::new(),
            pool: Vec::new(),
            busy: Vec::new(),
            next_scan: now + TIMER_SCAN,
            stats: Stats::default(),
            ctl: vec![0u8; DEV_HDR],
            hold: false,
            addrs: Box::default(),
            rx_out: Box::new(RecvOut { lens: [0; RECV_BATCH], froms: [None; RECV_BATCH], segs: [0; RECV_BATCH] }),
            ext_sack: Vec::new(),
            backlogged: None,
            last_recv: None,
            out: crate::sys::SendBatch::new(max_datagram, gso),
            gro,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Whether runs of datagrams to one peer go as UDP GSO sends (asked
    /// for, supported, and not refused by the kernel since).
    pub fn gso(&self) -> bool {
        self.out.gso()
    }

    /// One received datagram, `len` bytes at `off` in `batch.data`, from
    /// `from`: handshakes are answered, acknowledgements taken, data
    /// packets checked and listed in `batch.items`.
    fn on_datagram(&mut self, off: usize, len: usize, from: SocketAddr, now: Instant, batch: &mut RxBatch) {
        if len > self.cfg.max_datagram {
            // Longer than we ever send (possible only in a GRO slot).
            self.stats.malformed += 1;
            return;
        }
        let Some((kind, h)) = DevHdr::decode(&batch.data[off..off + len]) else {
            self.stats.malformed += 1;
            return;
        };
        match kind {
            DevKind::Hello => {
                self.on_hello(from, &h, now, batch);
                return;
            }
            DevKind::HelloAck => {
                self.on_hello_ack(from, &h, now);
                return;
            }
            DevKind::Data | DevKind::Ack => {}
        }
        let Some(&id) = self.by_addr.get(&from) else {
            self.stats.unknown_peer += 1;
            // Logged at the 1st, 2nd, 4th, 8th... such datagram.
            if self.stats.unknown_peer.is_power_of_two() {
                rfabric_core::fi_warn!(PROV, FI_LOG_EP_DATA, "{}: {} datagram(s) from unknown peers dropped (latest from {})", self.local, self.stats.unknown_peer, from);
            }
            return;
        };
        let p = &mut self.peers[id as usize];
        if p.state != State::Up || h.src_conn != p.remote_conn || h.dst_conn != self.conn {
            self.stats.bad_conn += 1;
            p.refused_conn += 1;
            if p.refused_conn == 1 {
                rfabric_core::fi_warn!(
                    PROV,
                    FI_LOG_EP_DATA,
                    "{}: dropping datagrams of {} (state {:?}, its connection id {:#x}, ours as it has it {:#x}; known {:#x}, ours {:#x})",
                    self.local,
                    from,
                    p.state,
                    h.src_conn,
                    h.dst_conn,
                    p.remote_conn,
                    self.conn
                );
            }
            return;
        }
        p.refused_conn = 0;
        let mut ext = std::mem::take(&mut self.ext_sack);
        ext.clear();
        if kind == DevKind::Ack {
            ext.extend_from_slice(&batch.data[off + DEV_HDR..off + len]);
        }
        self.peers[id as usize].last_heard = now;
        self.on_ack(id, h.ack, h.sack, &ext, h.high, now, batch);
        self.ext_sack = ext;
        if kind == DevKind::Ack {
            return;
        }
        let p = &mut self.peers[id as usize];
        let ahead = h.seq.wrapping_sub(p.rx_next);
        if ahead >= RX_WINDOW {
            if seq_lt(h.seq, p.rx_next) {
                // Arrived before; our acknowledgement must have been lost.
                self.stats.duplicate += 1;
                p.ack_owed += 1;
                self.mark_busy(id);
            } else {
                self.stats.bad_seq += 1;
            }
            return;
        }
        if p.bit(h.seq) || p.pending(h.seq) {
            self.stats.duplicate += 1;
            p.ack_owed += 1;
            self.mark_busy(id);
            return;
        }
        p.set_pending(h.seq, true);
        batch.items.push(RxItem { peer: id, seq: h.seq, start: off + DEV_HDR, len: len - DEV_HDR, placed: 0 });
    }

    /// Whether the kernel may coalesce received datagrams (`UDP_GRO`).
    pub fn gro(&self) -> bool {
        self.gro
    }

    /// Bytes of one receive slot: a datagram, or with GRO on, a coalesced
    /// receive of up to 64 KiB.
    fn rx_slot(&self) -> usize {
        if self.gro {
            crate::sys::GRO_SLOT
        } else {
            self.cfg.max_datagram
        }
    }

    /// Sends the queued data datagrams.
    fn send_out(&mut self) {
        self.out.send(&self.sock);
    }

    pub fn conn(&self) -> u32 {
        self.conn
    }

    /// Bytes at the start of `RxBatch::data` that `recv` writes into.
    pub fn rx_area(&self) -> usize {
        self.rx_slot() * RECV_BATCH
    }

    fn window(&self, p: &Peer) -> usize {
        let by_bytes = (self.cfg.max_inflight_bytes / self.cfg.max_datagram).max(1);
        p.cwnd.min(by_bytes).min(RX_WINDOW as usize / 2)
    }

    fn mark_busy(&mut self, id: PeerId) {
        let p = &mut self.peers[id as usize];
        if !p.busy {
            p.busy = true;
            self.busy.push(id);
        }
    }

    fn send_ctl(&mut self, id: PeerId, kind: DevKind) {
        let p = &mut self.peers[id as usize];
        if !self.hold {
            p.advance();
        }
        let h = DevHdr {
            kind: kind as u8,
            flags: 0,
            src_conn: self.conn,
            dst_conn: if kind == DevKind::Hello { 0 } else { p.remote_conn },
            seq: 0,
            ack: p.rx_next,
            sack: p.sack(),
            high: p.rx_high,
        };
        // An acknowledgement sent while a batch is held does not yet cover
        // that batch: what it owes stays owed.
        if (kind == DevKind::Ack || kind == DevKind::HelloAck) && !self.hold {
            p.ack_owed = 0;
        }
        self.ctl.clear();
        self.ctl.resize(DEV_HDR, 0);
        h.encode(&mut self.ctl);
        if kind == DevKind::Ack {
            // Beyond the header's 64 bits, an acknowledgement alone carries
            // the arrivals up to the highest sequence seen (at most
            // EXT_SACK_BITS more), so the sender finds every hole at once.
            let from = p.rx_next.wrapping_add(65);
            let bits = (p.rx_high.wrapping_sub(from) as i32).clamp(0, EXT_SACK_BITS as i32) as u32;
            for byte in 0..bits.div_ceil(8) {
                let mut v = 0u8;
                for b in 0..8 {
                    let i = byte * 8 + b;
                    if i < bits && p.bit(from.wrapping_add(i)) {
                        v |= 1 << b;
                    }
                }
                self.ctl.push(v);
            }
        }
        let _ = self.sock.send_to(&self.ctl, p.addr);
        self.stats.sent += 1;
    }

    /// (Re)sends one packet of the window, with fresh acknowledgement fields.
    #[allow(clippy::too_many_arguments)]
    fn transmit(sock: &UdpSocket, out: &mut crate::sys::SendBatch, conn: u32, hold: bool, p: &mut Peer, i: usize, now: Instant, stats: &mut Stats) {
        if !hold {
            p.advance();
        }
        let (ack, sack, high, remote, addr) = (p.rx_next, p.sack(), p.rx_high, p.remote_conn, p.addr);
        let pkt = &mut p.unacked[i];
        let h = DevHdr { kind: DevKind::Data as u8, flags: 0, src_conn: conn, dst_conn: remote, seq: pkt.seq, ack, sack, high };
        h.encode(&mut pkt.buf[..DEV_HDR]);
        if pkt.tries > 0 {
            stats.retransmitted += 1;
        }
        pkt.last = now;
        pkt.tries += 1;
        // Queued for one sendmmsg; a full socket buffer loses the datagram
        // like the network would: the timer sends it again.
        if out.push(&pkt.buf, &addr) {
            out.send(sock);
        }
        stats.sent += 1;
        if !hold {
            p.ack_owed = 0;
        }
    }

    /// Moves packets from the backlog into the window while it has room.
    fn pump(&mut self, id: PeerId, now: Instant) {
        let win = self.window(&self.peers[id as usize]);
        let p = &mut self.peers[id as usize];
        if p.state != State::Up {
            return;
        }
        while p.unacked.len() < win {
            let Some(mut pkt) = p.backlog.pop_front() else { break };
            pkt.first = now;
            p.unacked.push_back(pkt);
            let i = p.unacked.len() - 1;
            Self::transmit(&self.sock, &mut self.out, self.conn, self.hold, p, i, now, &mut self.stats);
        }
    }

    fn lose(&mut self, id: PeerId, batch: &mut RxBatch) {
        let now = Instant::now();
        let p = &mut self.peers[id as usize];
        rfabric_core::fi_warn!(
            PROV,
            FI_LOG_EP_DATA,
            "peer {} lost by {} ({} packets unacknowledged; heard from {:?} ago; oldest seq {} sent {} times, first {:?} ago; rx_next {} rx_high {} ack_owed {}; stats {:?})",
            p.addr,
            self.sock.local_addr().map_or_else(|_| "?".to_string(), |a| a.to_string()),
            p.unacked.len() + p.backlog.len(),
            now.saturating_duration_since(p.last_heard),
            p.unacked.front().map_or(0, |t| t.seq),
            p.unacked.front().map_or(0, |t| t.tries),
            p.unacked.front().map_or(Duration::ZERO, |t| now.saturating_duration_since(t.first)),
            p.rx_next,
            p.rx_high,
            p.ack_owed,
            self.stats
        );
        let p = &mut self.peers[id as usize];
        p.state = State::Lost;
        let bufs: Vec<Vec<u8>> = p.unacked.drain(..).chain(p.backlog.drain(..)).map(|t| t.buf).collect();
        p.ack_owed = 0;
        self.pool.extend(bufs);
        batch.lost.push(id);
    }

    /// Forgets everything about a peer's previous connection.
    fn reset(&mut self, id: PeerId, state: State, remote_conn: u32) {
        let p = &mut self.peers[id as usize];
        let bufs: Vec<Vec<u8>> = p.unacked.drain(..).chain(p.backlog.drain(..)).map(|t| t.buf).collect();
        let busy = p.busy;
        *p = Peer::new(p.addr, state, remote_conn);
        p.busy = busy;
        self.pool.extend(bufs);
    }

    #[allow(clippy::too_many_arguments)]
    fn on_ack(&mut self, id: PeerId, ack: u32, sack: u64, ext: &[u8], high: u32, now: Instant, batch: &mut RxBatch) {
        let p = &mut self.peers[id as usize];
        if seq_lt(p.last_high, high) && !seq_lt(p.next_seq, high) {
            p.last_high = high;
            p.high_moved = now;
        }
        while let Some(front) = p.unacked.front() {
            if !seq_lt(front.seq, ack) {
                break;
            }
            let Some(t) = p.unacked.pop_front() else { break };
            if t.tries == 1 {
                let sample = now.saturating_duration_since(t.last);
                match p.srtt {
                    None => {
                        p.srtt = Some(sample);
                        p.rttvar = sample / 2;
                    }
                    Some(s) => {
                        let diff = s.abs_diff(sample);
                        p.rttvar = (p.rttvar * 3 + diff) / 4;
                        p.srtt = Some((s * 7 + sample) / 8);
                    }
                }
            }
            if !t.sacked && t.token != 0 {
                batch.acked.push(t.token);
            }
            if p.cwnd < MAX_CWND {
                p.cwnd += 1;
            }
            self.pool.push(t.buf);
        }
        let p = &mut self.peers[id as usize];
        if let Some(r) = p.recover {
            if !seq_lt(ack, r) {
                p.recover = None;
            }
        }
        let Some(base) = p.unacked.front().map(|t| t.seq) else { return };
        for i in 0..64u32 {
            if sack & (1 << i) == 0 {
                continue;
            }
            let seq = ack.wrapping_add(1 + i);
            let k = seq.wrapping_sub(base) as usize;
            if let Some(t) = p.unacked.get_mut(k) {
                if !t.sacked {
                    t.sacked = true;
                    if t.token != 0 {
                        batch.acked.push(t.token);
                    }
                }
            }
        }
        for (j, byte) in ext.iter().enumerate() {
            for b in 0..8 {
                if byte & (1 << b) == 0 {
                    continue;
                }
                let seq = ack.wrapping_add(65 + (j * 8 + b) as u32);
                let k = seq.wrapping_sub(base) as usize;
                if let Some(t) = p.unacked.get_mut(k) {
                    if !t.sacked {
                        t.sacked = true;
                        if t.token != 0 {
                            batch.acked.push(t.token);
                        }
                    }
                }
            }
        }
        // Loss detection: a packet inside the selective-ack range that is
        // still missing while a later one arrived is taken as lost once it
        // has been out a quarter of a round trip (reordering allowance); a
        // packet sent again waits a whole round trip before the next try.
        let srtt = p.srtt.unwrap_or(MIN_RTO);
        let reorder = (srtt / 4).max(Duration::from_micros(50));
        let to_high = high.wrapping_sub(base) as i32;
        let to_sack_end = ack.wrapping_add(65 + 8 * ext.len() as u32).wrapping_sub(base) as i32;
        let span = to_high.min(to_sack_end).max(0) as usize;
        let mut lost_any = false;
        for k in 0..span.min(p.unacked.len()) {
            let t = &p.unacked[k];
            if t.sacked {
                continue;
            }
            let wait = if t.tries > 1 { srtt.max(MIN_RTO) } else { reorder };
            if now.saturating_duration_since(t.last) >= wait {
                Self::transmit(&self.sock, &mut self.out, self.conn, self.hold, p, k, now, &mut self.stats);
                lost_any = true;
            }
        }
        if lost_any && p.recover.is_none() {
            p.cwnd = (p.cwnd / 2).max(MIN_CWND);
            p.recover = Some(p.next_seq);
        }
    }

    fn timers(&mut self, now: Instant, batch: &mut RxBatch) {
        let may_lose = match self.backlogged {
            None => true,
            Some(t) => now.saturating_duration_since(t) >= self.cfg.peer_timeout,
        };
        let mut i = 0;
        while i < self.busy.len() {
            let id = self.busy[i];
            let idx = id as usize;
            match self.peers[idx].state {
                State::Connecting { since, next_hello, tries } => {
                    if may_lose && now.saturating_duration_since(since) >= self.cfg.peer_timeout {
                        self.lose(id, batch);
                    } else if now >= next_hello {
                        self.send_ctl(id, DevKind::Hello);
                        let back = (MIN_RTO * (1 << tries.min(6))).min(Duration::from_millis(250));
                        self.peers[idx].state = State::Connecting { since, next_hello: now + back, tries: tries + 1 };
                    }
                }
                State::Up => {
                    let rto = self.peers[idx].rto();
                    let timeout = self.cfg.peer_timeout;
                    let p = &mut self.peers[idx];
                    // The timer sends again the oldest packet, and those the
                    // peer cannot have acknowledged yet (beyond the highest it
                    // reported); packets in between most likely arrived and
                    // are taken care of by the selective acks once the hole
                    // is filled. Those beyond the highest wait while that
                    // highest still moves: they are queued behind it (a
                    // burst, a slow receiver), and sending them again would
                    // only lengthen the queue.
                    let high_k = p.unacked.front().map_or(0, |f| p.last_high.wrapping_sub(f.seq) as usize);
                    let since_high = now.saturating_duration_since(p.high_moved);
                    let mut dead = false;
                    let mut fired = false;
                    for k in 0..p.unacked.len() {
                        if k != 0 && k < high_k {
                            continue;
                        }
                        let t = &p.unacked[k];
                        if t.sacked {
                            continue;
                        }
                        if may_lose && now.saturating_duration_since(t.first) >= timeout && now.saturating_duration_since(p.last_heard) >= timeout {
                            rfabric_core::fi_info!(PROV, FI_LOG_EP_DATA, "packet {} to {} unacknowledged for {:?}", t.seq, p.addr, timeout);
                            dead = true;
                            break;
                        }
                        let wait = (rto * (1 << (t.tries - 1).min(MAX_BACKOFF))).min(MAX_RTO);
                        if k != 0 && since_high < wait {
                            continue;
                        }
                        if now.saturating_duration_since(t.last) >= wait {
                            Self::transmit(&self.sock, &mut self.out, self.conn, self.hold, p, k, now, &mut self.stats);
                            fired = true;
                        }
                    }
                    if fired && p.recover.is_none() {
                        p.cwnd = (p.cwnd / 2).max(MIN_CWND);
                        p.recover = Some(p.next_seq);
                    }
                    if dead {
                        self.lose(id, batch);
                    }
                }
                State::Lost => {}
            }
            let p = &mut self.peers[idx];
            if p.unacked.is_empty() && p.backlog.is_empty() && p.ack_owed == 0 && !matches!(p.state, State::Connecting { .. }) {
                p.busy = false;
                self.busy.swap_remove(i);
            } else {
                i += 1;
            }
        }
    }

    fn on_hello(&mut self, from: SocketAddr, h: &DevHdr, now: Instant, batch: &mut RxBatch) {
        let id = match self.by_addr.get(&from) {
            Some(&id) => {
                let p = &self.peers[id as usize];
                match p.state {
                    State::Up if p.remote_conn == h.src_conn => {}
                    State::Up => {
                        // The address has a new endpoint: the old one is gone.
                        rfabric_core::fi_info!(PROV, FI_LOG_EP_DATA, "{} has a new connection id ({:#x}, was {:#x})", from, h.src_conn, p.remote_conn);
                        self.lose(id, batch);
                        batch.items.retain(|it| it.peer != id);
                        self.reset(id, State::Up, h.src_conn);
                    }
                    State::Lost => self.reset(id, State::Up, h.src_conn),
                    State::Connecting { .. } => {
                        self.peers[id as usize].state = State::Up;
                        self.peers[id as usize].remote_conn = h.src_conn;
                        self.pump(id, now);
                    }
                }
                id
            }
            None => {
                if self.peers.len() >= self.cfg.max_peers {
                    self.stats.unknown_peer += 1;
                    return;
                }
                let id = self.peers.len() as PeerId;
                self.peers.push(Peer::new(from, State::Up, h.src_conn));
                self.by_addr.insert(from, id);
                id
            }
        };
        self.send_ctl(id, DevKind::HelloAck);
    }

    fn on_hello_ack(&mut self, from: SocketAddr, h: &DevHdr, now: Instant) {
        let Some(&id) = self.by_addr.get(&from) else {
            self.stats.unknown_peer += 1;
            return;
        };
        if h.dst_conn != self.conn {
            self.stats.bad_conn += 1;
            return;
        }
        let p = &mut self.peers[id as usize];
        if let State::Connecting { .. } = p.state {
            p.state = State::Up;
            p.remote_conn = h.src_conn;
            self.pump(id, now);
        } else if p.remote_conn != h.src_conn {
            self.stats.bad_conn += 1;
        }
    }

    fn take_buf(&mut self) -> Vec<u8> {
        let mut b = self.pool.pop().unwrap_or_else(|| Vec::with_capacity(self.cfg.max_datagram));
        b.clear();
        b
    }
}

impl UdpDevice {
    /// One line per peer, for `FI_LOG_LEVEL=debug`.
    pub fn describe(&self) -> String {
        let mut out = String::new();
        for (i, p) in self.peers.iter().enumerate() {
            let st = match p.state {
                State::Connecting { tries, .. } => format!("connecting({tries})"),
                State::Up => "up".to_string(),
                State::Lost => "lost".to_string(),
            };
            out += &format!(
                "\n  peer {i} {} {st} conn {:#x}: next_seq {} unacked {} backlog {} cwnd {} rx_next {} rx_high {} ack_owed {}",
                p.addr,
                p.remote_conn,
                p.next_seq,
                p.unacked.len(),
                p.backlog.len(),
                p.cwnd,
                p.rx_next,
                p.rx_high,
                p.ack_owed
            );
        }
        out
    }
}

impl Device for UdpDevice {
    fn max_packet(&self) -> usize {
        self.cfg.max_datagram - DEV_HDR
    }

    fn peer(&mut self, addr: &[u8]) -> Result<PeerId> {
        let a = crate::sockaddr::from_bytes(addr).ok_or(EINVAL)?;
        if let Some(&id) = self.by_addr.get(&a) {
            return Ok(id);
        }
        if self.peers.len() >= self.cfg.max_peers {
            return Err(Error(FI_ENOSPC));
        }
        let now = Instant::now();
        let id = self.peers.len() as PeerId;
        self.peers.push(Peer::new(a, State::Connecting { since: now, next_hello: now, tries: 0 }, 0));
        self.by_addr.insert(a, id);
        Ok(id)
    }

    fn peer_addr(&self, p: PeerId) -> &[u8] {
        &self.peers[p as usize].raw
    }

    fn room(&self, id: PeerId) -> usize {
        let p = &self.peers[id as usize];
        self.window(p).saturating_sub(p.unacked.len() + p.backlog.len())
    }

    fn send(&mut self, id: PeerId, proto: &[u8], payload: &[&[u8]], token: u64) -> Result<()> {
        let total = DEV_HDR + proto.len() + payload.iter().map(|s| s.len()).sum::<usize>();
        if total > self.cfg.max_datagram {
            return Err(EINVAL);
        }
        let now = Instant::now();
        if self.peers[id as usize].state == State::Lost {
            // Sending again to a peer given up on: connect anew.
            self.reset(id, State::Connecting { since: now, next_hello: now, tries: 0 }, 0);
        }
        if self.room(id) == 0 {
            return Err(EAGAIN);
        }
        let mut buf = self.take_buf();
        buf.resize(DEV_HDR, 0);
        buf.extend_from_slice(proto);
        for s in payload {
            rfabric_core::copy::extend_vec(&mut buf, s);
        }
        let p = &mut self.peers[id as usize];
        let seq = p.next_seq;
        p.next_seq = seq.wrapping_add(1);
        p.backlog.push_back(TxPkt { seq, buf, token, first: now, last: now, tries: 0, sacked: false });
        let connecting = matches!(p.state, State::Connecting { .. });
        self.mark_busy(id);
        if connecting {
            // The first packet to a new peer starts the handshake now.
            if let State::Connecting { tries: 0, .. } = self.peers[id as usize].state {
                self.send_ctl(id, DevKind::Hello);
                let p = &mut self.peers[id as usize];
                if let State::Connecting { since, .. } = p.state {
                    p.state = State::Connecting { since, next_hello: now + MIN_RTO, tries: 1 };
                }
            }
            return Ok(());
        }
        self.pump(id, now);
        Ok(())
    }

    fn recv(&mut self, batch: &mut RxBatch, now: Instant) -> usize {
        // Silence is judged by the time we were listening: when this
        // endpoint itself was not progressed for a while (the process was
        // not scheduled, or the application did not call in), its peers
        // are not blamed for that time.
        if let Some(prev) = self.last_recv {
            let gap = now.saturating_duration_since(prev);
            if gap >= STALL_CREDIT {
                for &id in &self.busy {
                    let p = &mut self.peers[id as usize];
                    p.last_heard = (p.last_heard + gap).min(now);
                }
            }
        }
        self.last_recv = Some(now);
        self.send_out();
        batch.clear();
        let slot = self.rx_slot();
        if batch.data.len() < slot * RECV_BATCH {
            batch.data.resize(slot * RECV_BATCH, 0);
        }
        let out = &mut *self.rx_out;
        let got = crate::sys::recv_many(&self.sock, &mut batch.data, slot, &mut out.lens, &mut out.froms, &mut out.segs, &mut self.addrs);
        // A full batch: more may be waiting behind it (an acknowledgement
        // of a peer among them). Peers are judged silent only once the
        // socket was read empty: under load a backlog of datagrams can take
        // longer to read than the peer timeout.
        // (A socket kept full for longer than the timeout again does not
        // keep peers from being judged.)
        if got == RECV_BATCH {
            self.backlogged.get_or_insert(now);
        } else {
            self.backlogged = None;
        }
        let mut n = 0;
        for k in 0..got {
            let (len, seg) = (self.rx_out.lens[k], self.rx_out.segs[k]);
            let Some(from) = self.rx_out.froms[k] else {
                self.stats.malformed += 1;
                continue;
            };
            if seg > 0 {
                self.stats.gro_recvs += 1;
            }
            // A coalesced entry: each of its datagrams as if it had come
            // alone, from the same source.
            for (o, len) in crate::sys::split(len, seg) {
                n += 1;
                self.stats.received += 1;
                self.on_datagram(k * slot + o, len, from, now, batch);
            }
        }
        for k in 0..batch.items.len() {
            let it = batch.items[k];
            let p = &mut self.peers[it.peer as usize];
            p.set_pending(it.seq, false);
            p.set_bit(it.seq, true);
            p.ack_owed += 1;
            if !seq_lt(it.seq, p.rx_high) {
                p.rx_high = it.seq.wrapping_add(1);
            }
            self.mark_busy(it.peer);
        }
        self.hold = !batch.items.is_empty();
        if now >= self.next_scan {
            self.next_scan = now + TIMER_SCAN;
            self.timers(now, batch);
        }
        self.send_out();
        n
    }

    fn reject(&mut self, id: PeerId, seq: u32) {
        let p = &mut self.peers[id as usize];
        if p.bit(seq) {
            p.set_bit(seq, false);
            // Still acknowledge what came before: the sender hears that we
            // are alive (a refusal is not a death) and sends this one again.
            self.stats.rejected += 1;
        }
    }

    fn flush(&mut self, _now: Instant, all: bool) {
        self.send_out();
        self.hold = false;
        for i in 0..self.busy.len() {
            let id = self.busy[i];
            let owed = self.peers[id as usize].ack_owed;
            if owed > 0 && (all || owed >= ACK_EVERY) && self.peers[id as usize].state == State::Up {
                self.send_ctl(id, DevKind::Ack);
            }
        }
    }

    fn stats(&self) -> Stats {
        Stats { gso_sends: self.out.gso_sends(), ..self.stats }
    }

    fn push_out(&mut self) {
        self.send_out();
    }

    fn unacked(&self) -> bool {
        self.busy.iter().any(|&id| {
            let p = &self.peers[id as usize];
            p.state != State::Lost && (!p.unacked.is_empty() || !p.backlog.is_empty())
        })
    }

    fn fd(&self) -> i32 {
        use std::os::fd::AsRawFd;
        self.sock.as_raw_fd()
    }

    fn name(&self) -> Vec<u8> {
        crate::sockaddr::to_bytes(&self.local_addr())
    }

    fn describe(&self) -> String {
        UdpDevice::describe(self)
    }
}


#[cfg(test)]
mod tests {
    use super::*;

    /// `n` full-size packets from one device to another over loopback
    /// (each its own bytes), `gro` on the receiver: returns the receiver's
    /// stats once every packet arrived, whole and once.
    fn bulk(ip: &str, n: usize, gro: bool) -> Option<Stats> {
        let bind = |gro| UdpDevice::open(SocketAddr::new(ip.parse().unwrap(), 0), UdpConfig { gro, ..UdpConfig::default() });
        let (Ok(mut a), Ok(mut b)) = (bind(true), bind(gro)) else { return None };
        assert_eq!(b.gro(), gro, "Linux has had UDP_GRO since 5.0");
        let to = b.local_addr();
        let pb = a.peer(&crate::sockaddr::to_bytes(&to)).unwrap();
        let size = a.max_packet();
        let pkt = |i: usize| {
            let mut v: Vec<u8> = (0..size).map(|k| (i * 31 + k) as u8).collect();
            v[..8].copy_from_slice(&(i as u64).to_le_bytes());
            v
        };
        let mut next = 0;
        let mut got = vec![None; n];
        let (mut arrived, mut ba, mut bb) = (0, RxBatch::default(), RxBatch::default());
        let deadline = Instant::now() + Duration::from_secs(20);
        while arrived < n {
            assert!(Instant::now() < deadline, "{ip}: {arrived} of {n} packets: {:?}", b.stats());
            while next < n {
                let p = pkt(next);
                match a.send(pb, &p[..crate::wire::PROTO_HDR], &[&p[crate::wire::PROTO_HDR..]], next as u64) {
                    Ok(()) => next += 1,
                    Err(e) if e == EAGAIN => break,
                    Err(e) => panic!("{ip}: send: {e:?}"),
                }
            }
            a.push_out();
            let now = Instant::now();
            a.recv(&mut ba, now);
            a.flush(now, true);
            b.recv(&mut bb, now);
            for it in &bb.items {
                let p = bb.packet(it);
                let i = u64::from_le_bytes(p[..8].try_into().unwrap()) as usize;
                assert!(i < n && got[i].is_none() && p == &pkt(i)[..], "{ip}: a packet that was not sent, or twice");
                got[i] = Some(());
                arrived += 1;
            }
            b.flush(now, true);
            std::thread::sleep(Duration::from_micros(200));
        }
        Some(b.stats())
    }

    #[test]
    fn coalesced_receives_are_split_into_their_datagrams() {
        for ip in ["127.0.0.1", "::1"] {
            let Some(on) = bulk(ip, 300, true) else { continue };
            assert!(on.gro_recvs > 0, "{ip}: {on:?}");
            assert!(on.received >= 300, "datagrams are counted, not receives: {on:?}");
            // (Duplicates are possible: one thread plays both ends, and an
            // unoptimized turn can outlast the retransmission timeout.)
            assert_eq!(on.malformed + on.bad_seq, 0, "{ip}: {on:?}");
            let off = bulk(ip, 300, false).unwrap();
            assert_eq!(off.gro_recvs, 0, "{ip}: {off:?}");
        }
    }
}
