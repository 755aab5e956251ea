//! `ConnDevice`: the device rudp's protocol engine runs on, made of
//! connections of a reliable connected transport (`crate::conn`). The
//! engine does not change: it gets packets to numbered peers, tokens of
//! packets the peer took, refusals (receiver-not-ready) and lost peers.
//!
//! How it is built:
//! - **Connections.** An endpoint that sends to a peer it has no
//!   connection with opens one (at the first packet, to the peer's address
//!   in the AV: its listening address). The opener's first message
//!   (`Hello`) names its listening address and an instance number (random
//!   per endpoint), so the accepting side maps the connection to the AV
//!   peer. A peer that has not sent yet answers on the connection it
//!   accepted: one connection then carries the packets of both, and each
//!   reply carries TCP's acknowledgement of the packet before it (with a
//!   connection per direction, the receiving kernel sends a bare TCP
//!   acknowledgement for every small packet, inside the `recv` that reads
//!   it: about 4 µs more per one-way message on loopback, measured with
//!   `bench/tcp_floor.c`). Two endpoints that start talking at once simply
//!   open one connection each and keep sending on their own: there is no
//!   crossing pair to resolve and nothing to tear down, and a reconnection
//!   after a loss cannot be mistaken for a crossing. An opener whose
//!   `Hello` is the older kind (`HELLO`, not `HELLO_BIDI`) is never
//!   answered on its connection.
//! - **Acknowledged tokens.** A packet's token comes back once the peer's
//!   engine took it: the receiver acknowledges on the reverse direction of
//!   the connection it arrived on, cumulatively (`Ack`: every packet before
//!   this number taken), at the end of each progress round that took any. So a send completes when the peer has the data
//!   (like rudp), the bytes in flight to a peer are bounded by
//!   `inflight` (`room`), and a peer that takes nothing is noticed.
//! - **Refusals.** A packet the engine refuses is kept by the receiving
//!   device and offered again (every `RETRY`) until taken; later packets
//!   of the connection are still delivered (the engine orders messages
//!   itself). While more than `hold_max` bytes are kept for one connection
//!   it is not read (backpressure: TCP's window stops the sender). Held
//!   packets hold back the acknowledgement, and a peer whose packets are
//!   held is sent an `Ack` at least every quarter timeout, so it knows we
//!   are alive.
//! - **Loss.** A connection that fails (refused, reset, closed by the
//!   peer, bad framing or an unknown message), a connect that does not
//!   finish within `peer_timeout`, a peer that acknowledges nothing for
//!   `peer_timeout` while packets wait (and sends nothing either), a peer
//!   that connects again (it gave us up) or comes back as another instance
//!   (a restarted process at the same address): the peer is reported lost
//!   once, all its connections are closed (so it notices too, and both
//!   engines start afresh with it), and the next packet to it connects
//!   again.

use crate::conn::{Conn, Msg, Transport};
use crate::sys::Epoll;
use rfabric_core::abi::*;
use rfabric_core::error::{Error, Result, EAGAIN, EINVAL};
use rfabric_rudp::device::{Device, PeerId, Placer, RxBatch, RxItem, Stats, TOKEN_ON_ACK};
use rfabric_rudp::wire::PROTO_HDR;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::{Duration, Instant};

/// Message kinds, the first byte of every message on a connection.
/// `HELLO`: the opener's first message; the acceptor sends nothing but
/// acknowledgements on the connection.
const HELLO: u8 = 1;
const DATA: u8 = 2;
const ACK: u8 = 3;
/// A packet whose sender waits for its acknowledgement to complete an
/// operation (`TOKEN_ON_ACK`): acknowledged at the end of the round, not
/// lazily.
const DATA_ACK: u8 = 4;
/// As `HELLO`, and the acceptor may send its own packets on the
/// connection (what this device's openers send).
const HELLO_BIDI: u8 = 5;

/// How often held packets are offered to the engine again.
const RETRY: Duration = Duration::from_micros(500);
/// How often timers (connect, stall) are looked at.
const TIMER_SCAN: Duration = Duration::from_millis(1);
/// Packets unacknowledged to one peer, at most.
const MAX_UNACKED: usize = 4096;
/// Packets and bytes one `recv` delivers, at most.
const RECV_ITEMS: usize = 256;
const RECV_BYTES: usize = 8 << 20;
/// Packets of at least this many bytes are handed to the engine in the
/// connection's own receive buffer rather than copied into the batch. At
/// 16 KiB the copy costs more than the swap of buffers (16 KiB ping-pongs
/// about 5% faster than with 32 KiB); a limit of 1 KiB was not clearly
/// better at 2 to 8 KiB (docs/PERFORMANCE.md, runs O and P), as a stream
/// of such packets is then read one by one (`WHOLE_MIN` spares that).
const OWN_MIN: usize = 16 << 10;
/// Packets of at least this many bytes that are the last ones a read
/// brought (a ping-pong's every packet) are handed over in the
/// connection's buffer too: nothing after them needs moving, and the copy
/// into the batch is saved (4 and 8 KiB ping-pongs on loopback 2-4%
/// faster in alternating rounds).
const WHOLE_MIN: usize = 1 << 10;
/// Receive buffers kept for reuse once the engine has read a batch, and
/// the most one batch holds.
const SPARE_MAX: usize = 16;
/// Accepted connections waiting for their `Hello`, at most.
const MAX_UNBOUND: usize = 1024;
/// While an endpoint has one connection, rounds read it directly instead
/// of asking epoll which descriptor is readable (one system call less
/// when a message has come); epoll is still asked every this many rounds,
/// for the listener. The connection then also leaves the epoll set (see
/// `ConnDevice::unwatched`).
const HOT_EPOLL_EVERY: u32 = 16;
/// With `complete_on_write`, how long an acknowledgement may wait.
const ACK_DELAY: Duration = Duration::from_millis(1);

/// Epoll keys: the kind in the low two bits, an index above.
const K_LISTEN: u64 = 0;
const K_OUT: u64 = 1;
const K_IN: u64 = 2;
const K_UNBOUND: u64 = 3;
/// What `i`'s connection may acknowledge: every packet before the first
/// one held, or refused in the batch just handed out (`rejected`).
fn ack_point_of<C>(i: &In<C>, id: PeerId, rejected: &[(PeerId, u32)]) -> u32 {
    let mut a = i.rx_seq;
    if let Some((&s, _)) = i.held.iter().next() {
        a = s;
    }
    for &(q, s) in rejected {
        if q == id && seq_lt(s, a) {
            a = s;
        }
    }
    // Held keys wrap: the oldest is the one furthest behind rx_seq.
    for &s in i.held.keys() {
        if seq_lt(s, a) {
            a = s;
        }
    }
    a
}

/// An `Ack` message: every packet before `a` taken.
fn ack_msg(a: u32) -> [u8; 5] {
    let b = a.to_le_bytes();
    [ACK, b[0], b[1], b[2], b[3]]
}

fn key(idx: usize, kind: u64) -> u64 {
    ((idx as u64) << 2) | kind
}

/// Settings of one device.
#[derive(Clone, Debug)]
pub struct ConnConfig {
    /// A peer that acknowledges nothing this long (or a connect that does
    /// not finish) is lost.
    pub peer_timeout: Duration,
    /// Bytes sent to one peer and not yet acknowledged, at most.
    pub max_inflight_bytes: usize,
    /// Peers one endpoint keeps, at most.
    pub max_peers: usize,
    /// Bytes of refused packets kept for one connection before it is no
    /// longer read.
    pub hold_max: usize,
    /// A packet's token comes back once its bytes are handed to the
    /// transport (TCP: written to the socket, whose kernel delivers or
    /// resets), not at the peer's acknowledgement. Acknowledgements then
    /// only bound the bytes in flight and show the peer alive, so they go
    /// out lazily (`ACK_DELAY`, or a quarter of the window owed).
    pub complete_on_write: bool,
    /// The only connection leaves the epoll set while rounds read it
    /// directly (`ConnDevice::unwatched`); off for transports whose
    /// descriptor needs arming again after events were missed.
    pub unwatch_hot: bool,
}

impl Default for ConnConfig {
    fn default() -> Self {
        ConnConfig { peer_timeout: Duration::from_secs(10), max_inflight_bytes: 4 << 20, max_peers: 1 << 16, hold_max: 8 << 20, complete_on_write: false, unwatch_hot: false }
    }
}

struct Sent {
    seq: u32,
    token: u64,
    bytes: usize,
    at: Instant,
}

/// What we send to a peer, and where.
struct Out<C> {
    /// The connection we opened; `None`: we answer on the peer's (`In::c`).
    c: Option<C>,
    since: Instant,
    up: bool,
    next_seq: u32,
    unacked: VecDeque<Sent>,
    unacked_bytes: usize,
    /// With `complete_on_write`: tokens of packets still queued in the
    /// connection (they come back once the queue is empty).
    unwritten: Vec<u64>,
}

/// What a peer sends us, and where from.
struct In<C> {
    /// The connection the peer opened; `None`: it answers on ours
    /// (`Out::c`).
    c: Option<C>,
    /// Its `Hello` said we may send on `c` (`HELLO_BIDI`).
    reply_ok: bool,
    /// Sequence number of the next packet to arrive.
    rx_seq: u32,
    /// What the last `Ack` said.
    acked: u32,
    last_ack: Instant,
    /// `last_ack + ACK_DELAY`: when a lazy acknowledgement is due.
    ack_due: Instant,
    /// `last_ack + ACK_DELAY / 2`: from when one rides with a packet sent
    /// on this connection (`ConnDevice`'s `Device::send`).
    carry_from: Instant,
    /// Bytes taken since the last `Ack`.
    owed_bytes: usize,
    /// A `DATA_ACK` packet was taken since the last `Ack`.
    ack_now: bool,
    held: BTreeMap<u32, Vec<u8>>,
    held_bytes: usize,
    last_retry: Instant,
    paused: bool,
}

struct Peer<C> {
    raw: Vec<u8>,
    out: Option<Out<C>>,
    inn: Option<In<C>>,
    /// The peer's instance, from its `Hello` (0: not heard yet).
    instance: u64,
    last_heard: Instant,
    /// Lost, not yet reported to the engine: nothing is sent meanwhile.
    failed: bool,
}

impl<C> In<C> {
    fn new(c: Option<C>, reply_ok: bool, now: Instant) -> In<C> {
        In { c, reply_ok, rx_seq: 0, acked: 0, last_ack: now, ack_due: now + ACK_DELAY, carry_from: now + ACK_DELAY / 2, owed_bytes: 0, ack_now: false, held: BTreeMap::new(), held_bytes: 0, last_retry: now, paused: false }
    }
    /// An `Ack` of every packet before `a` went out at `now`.
    fn acked_at(&mut self, a: u32, now: Instant) {
        self.acked = a;
        self.last_ack = now;
        self.ack_due = now + ACK_DELAY;
        self.carry_from = now + ACK_DELAY / 2;
        self.owed_bytes = 0;
        self.ack_now = false;
    }
}

/// One of a peer's connections: the one we opened or the one it opened.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Side {
    Out,
    In,
}

impl Side {
    /// The side a connection's epoll key (`K_OUT` or `K_IN`) names.
    fn of_key(k: u64) -> Side {
        if k & 3 == K_OUT {
            Side::Out
        } else {
            Side::In
        }
    }

    fn kind(self) -> u64 {
        match self {
            Side::Out => K_OUT,
            Side::In => K_IN,
        }
    }
}

impl<C: Conn> Peer<C> {
    fn conn_mut(&mut self, side: Side) -> Option<&mut C> {
        match side {
            Side::Out => self.out.as_mut()?.c.as_mut(),
            Side::In => self.inn.as_mut()?.c.as_mut(),
        }
    }

    fn conn(&self, side: Side) -> Option<&C> {
        match side {
            Side::Out => self.out.as_ref()?.c.as_ref(),
            Side::In => self.inn.as_ref()?.c.as_ref(),
        }
    }

    /// The connection our packets go on (and its acknowledgements come).
    fn tx_side(&self) -> Side {
        if self.out.as_ref().is_some_and(|o| o.c.is_none()) {
            Side::In
        } else {
            Side::Out
        }
    }

    /// The connection its packets come on (and our acknowledgements go).
    fn rx_side(&self) -> Side {
        if self.inn.as_ref().is_some_and(|i| i.c.is_none()) {
            Side::Out
        } else {
            Side::In
        }
    }

    /// Bytes queued on its connections.
    fn queued(&self) -> usize {
        self.conn(Side::Out).map_or(0, |c| c.queued()) + self.conn(Side::In).map_or(0, |c| c.queued())
    }
}

/// What one read from a connection found.
enum Got {
    None,
    Ack(u32),
    /// A packet: its kind and length with the kind byte; `start` in the
    /// batch's data when copied there, or the buffer it came in; `placed`:
    /// bytes of payload after those `len`, read in place.
    Data { kind: u8, len: usize, start: usize, owned: Option<(Vec<u8>, usize)>, placed: usize },
    /// A message that has no place on this connection, of this length.
    Bad(usize),
    Failed(Error),
}

fn is_data(kind: u8) -> bool {
    kind == DATA || kind == DATA_ACK
}

struct Unbound<C> {
    c: Option<C>,
    since: Instant,
}

/// The engine's device over connections of transport `T`.
pub struct ConnDevice<T: Transport> {
    t: T,
    cfg: ConnConfig,
    instance: u64,
    hello: Vec<u8>,
    peers: Vec<Peer<T::Conn>>,
    by_addr: HashMap<Vec<u8>, PeerId>,
    unbound: Vec<Unbound<T::Conn>>,
    ep: Epoll,
    ready: Vec<u64>,
    /// Keys to read at the next `recv` whatever epoll says (bytes buffered,
    /// or the last read stopped at the batch limit).
    again: Vec<u64>,
    /// Peers with queued bytes to push out.
    backlog: Vec<PeerId>,
    /// Peers owed an `Ack`.
    owed: Vec<PeerId>,
    /// With `complete_on_write`: no `Ack` of `owed` is due before this
    /// time, so `flush` does not look at them (it did in every round).
    acks_check_at: Instant,
    /// A batch is out with the engine (from `recv` to the next `flush`):
    /// which of its packets it refuses is not known yet, so no `Ack` rides
    /// with a packet sent meanwhile.
    batch_out: bool,
    /// Refused in the batch just handed out: (peer, seq).
    rejected: Vec<(PeerId, u32)>,
    /// Lost, to report at the next `recv`.
    failed: Vec<PeerId>,
    /// Peers whose refused packets are held.
    holding: Vec<PeerId>,
    /// With `complete_on_write`: tokens of packets written, to hand back at
    /// the next `recv`.
    written: Vec<u64>,
    /// When timers are next looked at (`TIMER_SCAN` after the last time).
    next_scan: Instant,
    /// The time of the last `recv` or `flush`: what a send records, with no
    /// clock reading of its own (the keeper's rounds keep it within a few
    /// milliseconds, far below the peer timeout it serves).
    clock: Instant,
    stats: Stats,
    /// Receive buffers back from the engine, for connections that handed
    /// theirs over (`Conn::recv_msg`).
    spare: Vec<Vec<u8>>,
    /// The key of the only connection, read every round while it is the
    /// only one (`HOT_EPOLL_EVERY`).
    hot: Option<u64>,
    /// That connection's descriptor and key while it is out of the epoll
    /// set: a descriptor in an epoll set costs the kernel a wake-up
    /// callback for every segment that arrives (in the sender's system
    /// call, on loopback), about 0.15 µs of an 8-byte one-way trip (a bare
    /// TCP ping-pong: 3.97 against 4.14 µs). It goes back in before any
    /// other connection is added, and for good once someone waits on the
    /// epoll descriptor (`Device::keep_watching`).
    unwatched: Option<(i32, u64)>,
    /// `Device::keep_watching` was called: every connection stays in the
    /// epoll set.
    keep_watching: bool,
    /// Rounds since epoll was last asked.
    hot_rounds: u32,
}

fn seq_lt(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

fn fresh_instance() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
    h.write_u32(std::process::id());
    h.finish() | 1
}

impl<T: Transport> ConnDevice<T> {
    pub fn new(t: T, cfg: ConnConfig) -> Result<ConnDevice<T>> {
        let mut ep = Epoll::new()?;
        ep.add(t.fd(), K_LISTEN)?;
        let instance = fresh_instance();
        let mut hello = vec![HELLO_BIDI];
        hello.extend_from_slice(&instance.to_le_bytes());
        hello.extend_from_slice(t.addr());
        let now = Instant::now();
        Ok(ConnDevice {
            t,
            cfg,
            instance,
            hello,
            peers: Vec::new(),
            by_addr: HashMap::new(),
            unbound: Vec::new(),
            ep,
            ready: Vec::new(),
            again: Vec::new(),
            backlog: Vec::new(),
            owed: Vec::new(),
            acks_check_at: Instant::now(),
            batch_out: false,
            rejected: Vec::new(),
            failed: Vec::new(),
            holding: Vec::new(),
            written: Vec::new(),
            next_scan: now + TIMER_SCAN,
            clock: now,
            stats: Stats::default(),
            spare: Vec::new(),
            hot: None,
            unwatched: None,
            keep_watching: false,
            hot_rounds: 0,
        })
    }

    pub fn transport(&self) -> &T {
        &self.t
    }

    pub fn instance(&self) -> u64 {
        self.instance
    }

    fn addr_str(&self, id: PeerId) -> String {
        rfabric_rudp::sockaddr::to_string(&self.peers[id as usize].raw)
    }

    /// Gives a peer up: closes its connections, drops what it owed and was
    /// owed, and reports it (now into `batch`, or at the next `recv`).
    fn lose(&mut self, id: PeerId, why: &str, batch: Option<&mut RxBatch>) {
        let p = &mut self.peers[id as usize];
        let had = p.out.is_some() || p.inn.is_some();
        if let Some(c) = p.out.take().and_then(|o| o.c) {
            self.ep.remove(c.fd());
        }
        if let Some(c) = p.inn.take().and_then(|i| i.c) {
            self.ep.remove(c.fd());
        }
        // Its descriptor was out of the set: nothing to remove.
        if self.unwatched.is_some_and(|(_, k)| (k >> 2) as PeerId == id) {
            self.unwatched = None;
        }
        if had {
            rfabric_core::fi_info!(crate::provider::NAME, FI_LOG_EP_DATA, "peer {} lost: {}", self.addr_str(id), why);
        }
        self.rejected.retain(|&(q, _)| q != id);
        match batch {
            Some(b) => {
                b.items.retain(|it| it.peer != id);
                if !b.lost.contains(&id) {
                    b.lost.push(id);
                }
                let p = &mut self.peers[id as usize];
                if p.failed {
                    p.failed = false;
                    self.failed.retain(|&q| q != id);
                }
            }
            None => {
                let p = &mut self.peers[id as usize];
                if !p.failed {
                    p.failed = true;
                    self.failed.push(id);
                }
            }
        }
    }

    /// Opens our connection to `id` (its first message is our `Hello`).
    fn open_out(&mut self, id: PeerId) -> Result<()> {
        self.rewatch();
        let raw = self.peers[id as usize].raw.clone();
        let mut c = self.t.connect(&raw)?;
        c.send(&[&self.hello])?;
        self.ep.add(c.fd(), key(id as usize, K_OUT))?;
        let now = Instant::now();
        self.peers[id as usize].out = Some(Out { c: Some(c), since: now, up: false, next_seq: 0, unacked: VecDeque::new(), unacked_bytes: 0, unwritten: Vec::new() });
        if !self.backlog.contains(&id) {
            self.backlog.push(id);
        }
        Ok(())
    }

    fn accept_all(&mut self, now: Instant) {
        self.rewatch();
        for _ in 0..64 {
            match self.t.accept() {
                Ok(Some(c)) => {
                    let live = self.unbound.iter().filter(|u| u.c.is_some()).count();
                    if live >= MAX_UNBOUND {
                        self.stats.malformed += 1;
                        continue;
                    }
                    let slot = match self.unbound.iter().position(|u| u.c.is_none()) {
                        Some(s) => s,
                        None => {
                            self.unbound.push(Unbound { c: None, since: now });
                            self.unbound.len() - 1
                        }
                    };
                    if self.ep.add(c.fd(), key(slot, K_UNBOUND)).is_ok() {
                        self.unbound[slot] = Unbound { c: Some(c), since: now };
                        self.again.push(key(slot, K_UNBOUND));
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    rfabric_core::fi_warn!(crate::provider::NAME, FI_LOG_EP_CTRL, "accept: {}", e);
                    break;
                }
            }
        }
    }

    /// An accepted connection's first message: who it is from.
    fn read_unbound(&mut self, slot: usize, now: Instant, batch: &mut RxBatch, place: Placer<'_, '_>) {
        let Some(mut c) = self.unbound.get_mut(slot).and_then(|u| u.c.take()) else { return };
        let hello = match c.recv() {
            Ok(None) => {
                self.unbound[slot].c = Some(c);
                return;
            }
            Ok(Some(m)) => m.to_vec(),
            Err(e) => {
                if e.0 == FI_EIO {
                    self.stats.malformed += 1;
                }
                self.ep.remove(c.fd());
                return;
            }
        };
        self.ep.remove(c.fd());
        if hello.len() < 9 || (hello[0] != HELLO && hello[0] != HELLO_BIDI) || !self.t.valid_addr(&hello[9..]) {
            self.stats.malformed += 1;
            rfabric_core::fi_info!(crate::provider::NAME, FI_LOG_EP_CTRL, "connection dropped: its first message is no valid hello ({} bytes)", hello.len());
            return;
        }
        let inst = u64::from_le_bytes(hello[1..9].try_into().unwrap_or_default());
        let Ok(id) = self.peer(&hello[9..]) else {
            self.stats.unknown_peer += 1;
            return;
        };
        // An old connection of this peer that failed already (its close
        // comes before the new one): learn it first.
        if self.peers[id as usize].conn(Side::Out).is_some() {
            self.read(id, Side::Out, now, batch, &mut |_, _, _| None);
        }
        let p = &self.peers[id as usize];
        if p.inn.is_some() {
            let why = if p.instance != inst { "it came back as another instance" } else { "it connected again" };
            self.lose(id, why, Some(batch));
        } else if p.instance != 0 && p.instance != inst && p.out.is_some() {
            self.lose(id, "it came back as another instance", Some(batch));
        }
        if self.ep.add(c.fd(), key(id as usize, K_IN)).is_err() {
            return;
        }
        let p = &mut self.peers[id as usize];
        p.instance = inst;
        p.last_heard = now;
        p.inn = Some(In::new(Some(c), hello[0] == HELLO_BIDI, now));
        self.read(id, Side::In, now, batch, place);
    }

    /// Messages on one of `id`'s connections: acknowledgements of what we
    /// sent on it, and packets the peer sent on it (into `batch`; the
    /// payload of a large data packet where `place` says, if it does).
    fn read(&mut self, id: PeerId, side: Side, now: Instant, batch: &mut RxBatch, place: Placer<'_, '_>) {
        let k = key(id as usize, side.kind());
        let mut pushed = 0usize;
        loop {
            if batch.items.len() >= RECV_ITEMS || batch.data.len() + batch.owned_bytes >= RECV_BYTES {
                self.again.push(k);
                return;
            }
            let hold_max = self.cfg.hold_max;
            let p = &mut self.peers[id as usize];
            // Its packets come here: on its connection, or on ours when it
            // has none (it answers on ours, or may start to).
            let rx_here = match side {
                Side::In => true,
                Side::Out => p.inn.as_ref().map_or(true, |i| i.c.is_none()),
            };
            let tx_here = p.out.is_some() && p.tx_side() == side;
            if rx_here {
                if let Some(i) = p.inn.as_mut() {
                    if i.held_bytes >= hold_max {
                        // Not read until the held packets are taken (the
                        // peer's window fills); on our own connection
                        // that holds back its acknowledgements too.
                        if !i.paused {
                            i.paused = true;
                            if let Some(fd) = p.conn(side).map(|c| c.fd()) {
                                self.ep.watch(fd, k, false);
                            }
                        }
                        return;
                    }
                }
            }
            // At most SPARE_MAX buffers handed over per batch, so that all
            // come back as spares and none is allocated in steady state.
            let (own_min, whole_min) = if batch.owned.len() < SPARE_MAX { (OWN_MIN, WHOLE_MIN) } else { (usize::MAX, usize::MAX) };
            let Some(c) = p.conn_mut(side) else { return };
            let deferred = std::cell::Cell::new(false);
            let mut place_here = |head: &[u8], len: usize| {
                if !rx_here || !is_data(head[0]) {
                    return None;
                }
                match place(id, &head[1..], len) {
                    // Left unread until the packets before it are taken,
                    // when there are any in this batch.
                    Some(pl) if pl.is_empty() && len > 0 => (pushed > 0).then(|| {
                        deferred.set(true);
                        pl
                    }),
                    r => r,
                }
            };
            let got = match c.recv_placed(own_min, whole_min, &mut self.spare, 1 + PROTO_HDR, &mut place_here) {
                Ok(None) if deferred.get() => {
                    self.again.push(k);
                    return;
                }
                Ok(None) => Got::None,
                Ok(Some(Msg::Slice(m))) if m.len() == 5 && m[0] == ACK && tx_here => Got::Ack(u32::from_le_bytes(m[1..5].try_into().unwrap_or_default())),
                Ok(Some(Msg::Slice(m))) if m.len() > 1 && is_data(m[0]) && rx_here => {
                    let start = batch.data.len();
                    rfabric_core::copy::extend_vec(&mut batch.data, &m[1..]);
                    Got::Data { kind: m[0], len: m.len(), start, owned: None, placed: 0 }
                }
                Ok(Some(Msg::Placed { head, len })) if head.len() > 1 && is_data(head[0]) && rx_here => {
                    let start = batch.data.len();
                    rfabric_core::copy::extend_vec(&mut batch.data, &head[1..]);
                    Got::Data { kind: head[0], len: head.len(), start, owned: None, placed: len }
                }
                Ok(Some(Msg::Owned { buf, off, len })) if len > 1 && is_data(buf[off]) && rx_here => Got::Data { kind: buf[off], len, start: 0, owned: Some((buf, off)), placed: 0 },
                Ok(Some(Msg::Slice(m))) => Got::Bad(m.len()),
                Ok(Some(Msg::Owned { len, .. })) => Got::Bad(len),
                Ok(Some(Msg::Placed { head, len })) => Got::Bad(head.len() + len),
                Err(e) => Got::Failed(e),
            };
            let whose = if side == Side::Out { "our" } else { "its" };
            match got {
                Got::None => return,
                Got::Bad(n) => {
                    self.stats.malformed += 1;
                    self.lose(id, &format!("unexpected message of {n} bytes on {whose} connection"), Some(batch));
                    return;
                }
                Got::Failed(e) => {
                    if e.0 == FI_EIO {
                        self.stats.malformed += 1;
                    }
                    self.lose(id, &format!("{whose} connection failed: {e}"), Some(batch));
                    return;
                }
                Got::Ack(ack) => {
                    let o = self.peers[id as usize].out.as_mut().expect("tx_here");
                    o.up = true;
                    if seq_lt(o.next_seq, ack) {
                        self.stats.malformed += 1;
                        self.lose(id, "acknowledgement of packets never sent", Some(batch));
                        return;
                    }
                    while o.unacked.front().is_some_and(|s| seq_lt(s.seq, ack)) {
                        let s = o.unacked.pop_front().expect("front");
                        o.unacked_bytes -= s.bytes;
                        if s.token != 0 {
                            batch.acked.push(s.token);
                        }
                    }
                }
                Got::Data { kind, len, start, owned, placed } => {
                    let p = &mut self.peers[id as usize];
                    if let Some(o) = p.out.as_mut().filter(|_| side == Side::Out) {
                        o.up = true;
                    }
                    // The first packet it answers on our connection.
                    let i = p.inn.get_or_insert_with(|| In::new(None, false, now));
                    match owned {
                        None => batch.items.push(RxItem { peer: id, seq: i.rx_seq, start, len: len - 1, placed }),
                        Some((buf, off)) => batch.push_owned(id, i.rx_seq, buf, off + 1, len - 1),
                    }
                    pushed += 1;
                    i.ack_now |= kind == DATA_ACK;
                    i.rx_seq = i.rx_seq.wrapping_add(1);
                    i.owed_bytes += len + placed;
                    let due = if i.ack_now || i.owed_bytes >= self.cfg.max_inflight_bytes / 4 { now } else { i.ack_due };
                    self.acks_check_at = self.acks_check_at.min(due);
                    self.stats.received += 1;
                    // Most often it is the last one listed (the only peer).
                    if self.owed.last() != Some(&id) && !self.owed.contains(&id) {
                        self.owed.push(id);
                    }
                }
            }
            let p = &mut self.peers[id as usize];
            p.last_heard = now;
            // One read took everything there was: done (a second would
            // only say so).
            if p.conn_mut(side).is_some_and(|c| c.settle_idle()) {
                return;
            }
        }
    }

    /// Buffers the engine has read come back for connections to reuse.
    #[inline(always)]
    fn take_back(&mut self, batch: &mut RxBatch) {
        if batch.owned.is_empty() {
            return;
        }
        for b in batch.owned.drain(..) {
            if self.spare.len() < SPARE_MAX {
                self.spare.push(b);
            }
        }
    }

    /// Takes the only connection, `k`, out of the epoll set (rounds read it
    /// directly), unless someone waits on that set.
    fn unwatch(&mut self, k: u64) {
        if !self.cfg.unwatch_hot || self.keep_watching || self.unwatched.is_some() {
            return;
        }
        let side = Side::of_key(k);
        let Some(fd) = self.peers.get((k >> 2) as usize).and_then(|p| p.conn(side)).map(|c| c.fd()) else { return };
        let before = self.ep.registered();
        self.ep.remove(fd);
        if self.ep.registered() < before {
            self.unwatched = Some((fd, k));
        }
    }

    /// The listener and one connection, whether or not that one is in the
    /// epoll set.
    fn lone_connection(&self) -> bool {
        self.ep.registered() + usize::from(self.unwatched.is_some()) == 2
    }

    /// Puts the connection `unwatch` took out back into the epoll set
    /// (watched, unless its reading is paused).
    fn rewatch(&mut self) {
        let Some((fd, k)) = self.unwatched.take() else { return };
        if let Err(e) = self.ep.add(fd, k) {
            // Kept out: every round still reads it (see recv_placing), and
            // the next rewatch tries again.
            rfabric_core::fi_warn!(crate::provider::NAME, FI_LOG_EP_DATA, "cannot watch a connection again: {}", e);
            self.unwatched = Some((fd, k));
            return;
        }
        let paused = self.peers.get((k >> 2) as usize).and_then(|p| p.inn.as_ref()).is_some_and(|i| i.paused);
        if paused {
            self.ep.watch(fd, k, false);
        }
    }

    /// Tells the connection `k` (`K_OUT` or `K_IN`) names to read at its
    /// next `recv` whatever its last read found; false when there is none.
    fn rearm(&mut self, k: u64) -> bool {
        let c = self.peers.get_mut((k >> 2) as usize).and_then(|p| p.conn_mut(Side::of_key(k)));
        c.map(|c| c.rearm()).is_some()
    }

    /// Acknowledgements owed to peers that are due (`Device::flush`).
    fn send_owed_acks(&mut self, now: Instant) {
        // The earliest time one of the peers left in `owed` is due.
        let mut next = now + Duration::from_secs(3600);
        let mut k = 0;
        while k < self.owed.len() {
            let id = self.owed[k];
            // When completions do not wait for acknowledgements, one waits
            // for enough bytes or `ACK_DELAY` (the timers), and stays off
            // the reply's path: nothing more to look at before that.
            if self.cfg.complete_on_write {
                let due = self.peers[id as usize].inn.as_ref().map_or(true, |i| i.ack_now || i.owed_bytes >= self.cfg.max_inflight_bytes / 4 || now >= i.ack_due);
                if !due {
                    if let Some(i) = self.peers[id as usize].inn.as_ref() {
                        next = next.min(i.ack_due);
                    }
                    k += 1;
                    continue;
                }
            }
            let Some(a) = self.ack_point(id) else {
                self.owed.swap_remove(k);
                continue;
            };
            let acked = self.peers[id as usize].inn.as_ref().map_or(a, |i| i.acked);
            let owed = a.wrapping_sub(acked);
            if owed == 0 {
                // Nothing new to acknowledge (held packets wait).
                let held = self.peers[id as usize].inn.as_ref().is_some_and(|i| !i.held.is_empty()) || self.rejected.iter().any(|&(q, _)| q == id);
                if !held {
                    self.owed.swap_remove(k);
                    continue;
                }
                // Looked at again in every round while they are held.
                next = now;
                k += 1;
                continue;
            }
            // One acknowledgement per round and peer costs little on a
            // stream: it goes at once, not only once many are owed.
            self.send_ack(id, now);
            if let Some(i) = self.peers[id as usize].inn.as_ref() {
                next = next.min(i.ack_due);
            }
            k += 1;
        }
        self.acks_check_at = next;
    }

    /// Writes what full sockets left queued (`Device::push_out`).
    fn push_queued(&mut self) {
        let mut k = 0;
        while k < self.backlog.len() {
            let id = self.backlog[k];
            let p = &mut self.peers[id as usize];
            let tx = p.tx_side();
            let r = p.conn_mut(tx).map_or(Ok(0), |c| c.flush());
            if matches!(r, Ok(0)) {
                if let Some(o) = p.out.as_mut() {
                    self.written.append(&mut o.unwritten);
                }
            }
            match r {
                Ok(0) if p.queued() == 0 => {
                    self.backlog.swap_remove(k);
                }
                Ok(_) => k += 1,
                Err(e) => {
                    self.backlog.swap_remove(k);
                    let whose = if tx == Side::Out { "our" } else { "its" };
                    self.lose(id, &format!("{whose} connection failed: {e}"), None);
                }
            }
        }
    }
    /// What we may acknowledge on `id`'s connection: every packet before
    /// the first one held (refused now or before).
    fn ack_point(&self, id: PeerId) -> Option<u32> {
        let i = self.peers[id as usize].inn.as_ref()?;
        Some(ack_point_of(i, id, &self.rejected))
    }

    fn send_ack(&mut self, id: PeerId, now: Instant) {
        let Some(a) = self.ack_point(id) else { return };
        let m = ack_msg(a);
        // On the connection its packets came on.
        let p = &mut self.peers[id as usize];
        let side = p.rx_side();
        let Some(c) = p.conn_mut(side) else { return };
        let r = c.send(&[&m]);
        let queued = c.queued() > 0;
        let Some(i) = p.inn.as_mut() else { return };
        i.acked_at(a, now);
        if let Err(e) = r {
            let whose = if side == Side::Out { "our" } else { "its" };
            self.lose(id, &format!("{whose} connection failed: {e}"), None);
        } else if queued && !self.backlog.contains(&id) {
            self.backlog.push(id);
        }
    }

    fn push_backlog(&mut self, batch: &mut RxBatch) {
        let mut k = 0;
        while k < self.backlog.len() {
            let id = self.backlog[k];
            let p = &mut self.peers[id as usize];
            let mut left = 0;
            let mut err = None;
            let tx = p.tx_side();
            for side in [Side::Out, Side::In] {
                let Some(c) = p.conn_mut(side) else { continue };
                match c.flush() {
                    Ok(n) => {
                        left += n;
                        if n == 0 && side == tx {
                            if let Some(o) = p.out.as_mut() {
                                self.written.append(&mut o.unwritten);
                            }
                        }
                    }
                    Err(e) => err = Some(format!("{} connection failed: {e}", if side == Side::Out { "our" } else { "its" })),
                }
            }
            if let Some(why) = err {
                self.lose(id, &why, Some(batch));
                left = 0;
            }
            if left == 0 {
                self.backlog.swap_remove(k);
            } else {
                k += 1;
            }
        }
    }

    fn timers(&mut self, now: Instant, batch: &mut RxBatch) {
        let t = self.cfg.peer_timeout;
        for id in 0..self.peers.len() as PeerId {
            let p = &self.peers[id as usize];
            let Some(o) = p.out.as_ref() else { continue };
            if !o.up && now.saturating_duration_since(o.since) >= t {
                // Established but silent is judged below, by its packets.
                // (Answering on its connection is up from the start.)
                let est = self.peers[id as usize].conn_mut(Side::Out).map(|c| c.established());
                let connected = matches!(est, Some(Ok(true)));
                if !connected {
                    self.lose(id, &format!("no connection within {t:?}"), Some(batch));
                    continue;
                }
                if let Some(o) = self.peers[id as usize].out.as_mut() {
                    o.up = true;
                }
            }
            let p = &self.peers[id as usize];
            let Some(o) = p.out.as_ref() else { continue };
            let holding = p.inn.as_ref().is_some_and(|i| !i.held.is_empty());
            if let Some(s) = o.unacked.front() {
                if now.saturating_duration_since(s.at) >= t && now.saturating_duration_since(p.last_heard) >= t && !holding {
                    self.lose(id, &format!("nothing acknowledged for {t:?}"), Some(batch));
                }
            }
        }
        // Peers whose packets we hold hear from us now and then.
        for id in 0..self.peers.len() as PeerId {
            let due = self.peers[id as usize].inn.as_ref().is_some_and(|i| !i.held.is_empty() && now.saturating_duration_since(i.last_ack) >= t / 4);
            if due {
                self.send_ack(id, now);
            }
        }
        // Accepted connections that never said hello.
        for u in &mut self.unbound {
            if u.c.is_some() && now.saturating_duration_since(u.since) >= t {
                if let Some(c) = u.c.take() {
                    self.ep.remove(c.fd());
                    self.stats.malformed += 1;
                }
            }
        }
    }

    /// The engine's state, for `FI_LOG_LEVEL=debug`.
    pub fn describe(&self) -> String {
        let mut out = String::new();
        for (i, p) in self.peers.iter().enumerate() {
            out += &format!(
                "\n  conn peer {i} {}: out {} in {}",
                rfabric_rudp::sockaddr::to_string(&p.raw),
                p.out.as_ref().map_or("-".to_string(), |o| format!("up {} next {} unacked {} ({} B) on {}", o.up, o.next_seq, o.unacked.len(), o.unacked_bytes, if o.c.is_some() { "ours" } else { "its" })),
                p.inn.as_ref().map_or("-".to_string(), |i| format!("rx {} acked {} held {} ({} B) paused {} on {}", i.rx_seq, i.acked, i.held.len(), i.held_bytes, i.paused, if i.c.is_some() { "its" } else { "ours" })),
            );
            out += &format!(" queued {}", p.queued());
        }
        out
    }
}

impl<T: Transport> Device for ConnDevice<T> {
    fn max_packet(&self) -> usize {
        self.t.max_msg() - 1
    }

    fn peer(&mut self, addr: &[u8]) -> Result<PeerId> {
        if let Some(&id) = self.by_addr.get(addr) {
            return Ok(id);
        }
        if !self.t.valid_addr(addr) {
            return Err(EINVAL);
        }
        if self.peers.len() >= self.cfg.max_peers {
            return Err(Error(FI_ENOSPC));
        }
        let id = self.peers.len() as PeerId;
        self.peers.push(Peer { raw: addr.to_vec(), out: None, inn: None, instance: 0, last_heard: Instant::now(), failed: false });
        self.by_addr.insert(addr.to_vec(), id);
        Ok(id)
    }

    fn peer_addr(&self, p: PeerId) -> &[u8] {
        &self.peers[p as usize].raw
    }

    fn room(&self, id: PeerId) -> usize {
        let p = &self.peers[id as usize];
        if p.failed {
            return 0;
        }
        let Some(o) = p.out.as_ref() else { return MAX_UNACKED.min(self.cfg.max_inflight_bytes / self.max_packet().max(1)).max(1) };
        let by_bytes = self.cfg.max_inflight_bytes.saturating_sub(o.unacked_bytes) / self.max_packet().max(1);
        let by_bytes = if o.unacked_bytes < self.cfg.max_inflight_bytes { by_bytes.max(1) } else { 0 };
        by_bytes.min(MAX_UNACKED.saturating_sub(o.unacked.len()))
    }

    #[inline]
    fn has_room(&self, id: PeerId) -> bool {
        // `room(id) > 0`, without its division.
        let p = &self.peers[id as usize];
        !p.failed && p.out.as_ref().map_or(true, |o| o.unacked_bytes < self.cfg.max_inflight_bytes && o.unacked.len() < MAX_UNACKED)
    }

    fn send(&mut self, id: PeerId, proto: &[u8], payload: &[&[u8]], token: u64) -> Result<()> {
        let bytes = 1 + proto.len() + payload.iter().map(|s| s.len()).sum::<usize>();
        if bytes > self.t.max_msg() || payload.len() > 6 {
            return Err(EINVAL);
        }
        if !self.has_room(id) {
            return Err(EAGAIN);
        }
        let now = self.clock;
        if self.peers[id as usize].out.is_none() {
            let p = &mut self.peers[id as usize];
            if p.inn.as_ref().is_some_and(|i| i.c.is_some() && i.reply_ok) {
                // It opened a connection to us: we answer on it.
                p.out = Some(Out { c: None, since: now, up: true, next_seq: 0, unacked: VecDeque::new(), unacked_bytes: 0, unwritten: Vec::new() });
            } else if let Err(e) = self.open_out(id) {
                self.lose(id, &format!("cannot connect: {e}"), None);
                return Err(EAGAIN);
            }
        }
        let kind = if token & TOKEN_ON_ACK != 0 && self.cfg.complete_on_write { DATA_ACK } else { DATA };
        let p = &mut self.peers[id as usize];
        let side = p.tx_side();
        // With `complete_on_write`, a lazy acknowledgement owed on this
        // connection rides with the packet from half `ACK_DELAY` after the
        // last one.
        // A ping-pong then never sends one on its own (each would cost both
        // sides a system call on the reply's path); a one-way stream still
        // gets them when due. Not while a batch is out with the engine:
        // which of its packets it refuses is not known yet.
        let carry = match p.inn.as_ref() {
            Some(i) if now >= i.carry_from && i.owed_bytes > 0 && self.cfg.complete_on_write && !self.batch_out && p.rx_side() == side => {
                Some(ack_point_of(i, id, &self.rejected)).filter(|&a| a != i.acked)
            }
            _ => None,
        };
        let Some(c) = p.conn_mut(side) else {
            // Not reached: answering on its connection ends with it.
            self.lose(id, "no connection to send on", None);
            return Err(EAGAIN);
        };
        let r = match carry {
            None => c.send_kind(kind, proto, payload),
            Some(a) => c.send_kind_after(&ack_msg(a), kind, proto, payload),
        };
        let queued = c.queued() > 0;
        if let (Some(a), Some(i)) = (carry, p.inn.as_mut()) {
            i.acked_at(a, now);
        }
        let o = p.out.as_mut().expect("out");
        let seq = o.next_seq;
        o.next_seq = seq.wrapping_add(1);
        let on_ack = if self.cfg.complete_on_write && token != 0 && token & TOKEN_ON_ACK == 0 {
            if queued || !o.unwritten.is_empty() {
                o.unwritten.push(token);
            } else {
                self.written.push(token);
            }
            0
        } else {
            token
        };
        o.unacked.push_back(Sent { seq, token: on_ack, bytes, at: now });
        o.unacked_bytes += bytes;
        self.stats.sent += 1;
        match r {
            Err(e) => self.lose(id, &format!("{} connection failed: {e}", if side == Side::Out { "our" } else { "its" }), None),
            Ok(()) if queued && !self.backlog.contains(&id) => self.backlog.push(id),
            Ok(()) => {}
        }
        Ok(())
    }

    fn recv(&mut self, batch: &mut RxBatch, now: Instant) -> usize {
        self.recv_placing(batch, now, &mut |_, _, _| None)
    }

    fn recv_placing(&mut self, batch: &mut RxBatch, now: Instant, place: Placer<'_, '_>) -> usize {
        self.clock = now;
        self.batch_out = true;
        // The round of a polling loop on one connection, most often empty:
        // nothing refused, written, lost, held, left to read or queued, and
        // no timer due (buffers handed over come back as below). Only that
        // connection is read, as the general path below would (about a
        // fifth of an empty round's instructions fewer).
        if let Some(k) = self.hot {
            let quiet = self.rejected.is_empty() && self.written.is_empty() && self.failed.is_empty() && self.holding.is_empty() && self.again.is_empty() && self.backlog.is_empty();
            let only_one = self.lone_connection();
            if quiet && self.hot_rounds < HOT_EPOLL_EVERY && now < self.next_scan && only_one && self.rearm(k) {
                self.take_back(batch);
                batch.clear();
                batch.data.clear();
                self.hot_rounds += 1;
                self.read((k >> 2) as PeerId, Side::of_key(k), now, batch, place);
                return batch.items.len();
            }
        }
        // Packets the engine refused in the last batch are kept.
        for (id, seq) in std::mem::take(&mut self.rejected) {
            let Some(it) = batch.items.iter().find(|it| it.peer == id && it.seq == seq).copied() else { continue };
            let pkt = batch.packet(&it).to_vec();
            if let Some(i) = self.peers[id as usize].inn.as_mut() {
                i.held_bytes += pkt.len();
                i.held.insert(seq, pkt);
                self.stats.rejected += 1;
                if !self.holding.contains(&id) {
                    self.holding.push(id);
                }
            }
        }
        self.take_back(batch);
        batch.clear();
        batch.data.clear();
        batch.acked.append(&mut self.written);
        for id in std::mem::take(&mut self.failed) {
            self.peers[id as usize].failed = false;
            if !batch.lost.contains(&id) {
                batch.lost.push(id);
            }
        }
        // Held packets, offered again now and then.
        let mut retried = 0;
        let mut k = 0;
        while k < self.holding.len() {
            let id = self.holding[k] as usize;
            let Some(i) = self.peers[id].inn.as_mut().filter(|i| !i.held.is_empty()) else {
                self.holding.swap_remove(k);
                continue;
            };
            k += 1;
            if now.saturating_duration_since(i.last_retry) < RETRY {
                continue;
            }
            i.last_retry = now;
            for (seq, pkt) in std::mem::take(&mut i.held) {
                let start = batch.data.len();
                rfabric_core::copy::extend_vec(&mut batch.data, &pkt);
                batch.items.push(RxItem { peer: id as PeerId, seq, start, len: pkt.len(), placed: 0 });
                retried += 1;
            }
            i.held_bytes = 0;
            if i.paused {
                i.paused = false;
                let side = self.peers[id].rx_side();
                if let Some(fd) = self.peers[id].conn(side).map(|c| c.fd()) {
                    self.ep.watch(fd, key(id, side.kind()), true);
                    self.again.push(key(id, side.kind()));
                }
            }
        }
        let mut ready = std::mem::take(&mut self.ready);
        ready.clear();
        ready.append(&mut self.again);
        // The listener and one connection: read the connection directly
        // (asking epoll now and then for the listener).
        let only_one = self.lone_connection();
        let hot = self.hot.filter(|&k| only_one && self.hot_rounds < HOT_EPOLL_EVERY && self.rearm(k));
        match hot {
            Some(k) => {
                self.hot_rounds += 1;
                ready.push(k);
            }
            None => {
                self.hot_rounds = 0;
                let had = ready.len();
                self.ep.ready(&mut ready);
                // Out of the set, so epoll does not name it: read it anyway.
                if let Some((_, k)) = self.unwatched {
                    if self.rearm(k) {
                        ready.push(k);
                    }
                }
                if !only_one {
                    self.hot = None;
                } else if let Some(&k) = ready[had..].iter().find(|&&k| k & 3 == K_OUT || k & 3 == K_IN) {
                    self.hot = Some(k);
                    self.unwatch(k);
                }
            }
        }
        ready.sort_unstable();
        ready.dedup();
        for &k in &ready {
            let idx = (k >> 2) as usize;
            match k & 3 {
                K_LISTEN => self.accept_all(now),
                K_UNBOUND => self.read_unbound(idx, now, batch, place),
                K_OUT => {
                    if idx < self.peers.len() {
                        self.read(idx as PeerId, Side::Out, now, batch, place);
                    }
                }
                _ => {
                    if idx < self.peers.len() {
                        self.read(idx as PeerId, Side::In, now, batch, place);
                    }
                }
            }
        }
        self.ready = ready;
        if !self.backlog.is_empty() {
            self.push_backlog(batch);
        }
        if now >= self.next_scan {
            self.next_scan = now + TIMER_SCAN;
            self.timers(now, batch);
        }
        batch.items.len() - retried.min(batch.items.len())
    }

    fn reject(&mut self, id: PeerId, seq: u32) {
        self.rejected.push((id, seq));
    }

    #[inline(always)]
    fn flush(&mut self, now: Instant, _all: bool) {
        self.clock = now;
        self.batch_out = false;
        if !self.owed.is_empty() && (now >= self.acks_check_at || !self.cfg.complete_on_write) {
            self.send_owed_acks(now);
        }
    }

    #[inline(always)]
    fn push_out(&mut self) {
        // `send` writes at once; only what a full socket left queued waits,
        // and goes out here (or at the next `recv`).
        if !self.backlog.is_empty() {
            self.push_queued();
        }
    }

    fn unacked(&self) -> bool {
        self.peers.iter().any(|p| p.out.as_ref().is_some_and(|o| !o.unacked.is_empty()) || p.queued() > 0)
    }

    fn stats(&self) -> Stats {
        self.stats
    }

    fn fd(&self) -> i32 {
        self.ep.fd()
    }

    fn keep_watching(&mut self) {
        self.keep_watching = true;
        self.rewatch();
    }

    fn name(&self) -> Vec<u8> {
        self.t.addr().to_vec()
    }

    fn describe(&self) -> String {
        ConnDevice::describe(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcp::TcpTransport;

    fn dev(timeout_ms: u64) -> ConnDevice<TcpTransport> {
        dev_max(timeout_ms, 4096)
    }
    fn dev_max(timeout_ms: u64, max_msg: usize) -> ConnDevice<TcpTransport> {
        dev_with(max_msg, ConnConfig { peer_timeout: Duration::from_millis(timeout_ms), ..ConnConfig::default() })
    }
    fn dev_with(max_msg: usize, cfg: ConnConfig) -> ConnDevice<TcpTransport> {
        let t = TcpTransport::bind("127.0.0.1:0".parse().unwrap(), max_msg).unwrap();
        ConnDevice::new(t, cfg).unwrap()
    }

    /// Runs `recv` and `flush` on `d` (refusing what `refuse` says) and
    /// collects what came.
    fn pump(d: &mut ConnDevice<TcpTransport>, b: &mut RxBatch, got: &mut Vec<Vec<u8>>, acked: &mut Vec<u64>, lost: &mut Vec<PeerId>, refuse: &mut dyn FnMut(&[u8]) -> bool) {
        let now = Instant::now();
        d.flush(now, true);
        d.recv(b, now);
        for k in 0..b.items.len() {
            let it = b.items[k];
            if refuse(b.packet(&it)) {
                d.reject(it.peer, it.seq);
            } else {
                got.push(b.packet(&it).to_vec());
            }
        }
        acked.extend_from_slice(&b.acked);
        lost.extend_from_slice(&b.lost);
        d.flush(now, false);
    }

    fn until(mut f: impl FnMut() -> bool) {
        let end = Instant::now() + Duration::from_secs(10);
        while !f() {
            assert!(Instant::now() < end, "no progress");
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    /// An engine on a tcp device with the provider's packet size and its
    /// split of medium messages.
    fn engine_side() -> rfabric_rudp::testing::Side<ConnDevice<TcpTransport>> {
        use rfabric_rudp::engine::{EngineConfig, MEDIUM_CAP};
        let cfg = EngineConfig { medium_max: MEDIUM_CAP, tx_size: 64, rx_size: 64, unexp_max: 64, directed: false, lead: crate::tcp::LEAD, lead_above: crate::tcp::LEAD_ABOVE };
        rfabric_rudp::testing::Side::new(dev_with(crate::settings::DEFAULT_PACKET, ConnConfig::default()), cfg)
    }

    fn pattern(n: usize, k: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 7 + k * 31 + i / 4093) as u8).collect()
    }

    #[test]
    fn medium_messages_lead_with_a_packet_and_their_rest_is_read_in_place() {
        use rfabric_rudp::testing::{next, post_recv, send};
        let mut a = engine_side();
        let mut b = engine_side();
        let pb = a.eng.dev.peer(&b.eng.dev.name()).unwrap();
        // The first message on the connection, posted for: its first packet
        // is taken before the rest is read, and the rest (more than a
        // read of the empty connection takes) goes straight into place.
        let first = pattern(1 << 20, 1);
        let mut g = vec![0u8; 1 << 20];
        post_recv(&mut b, &mut g, 10, Some(1));
        send(&mut a, pb, &first, 11, Some(1)).unwrap();
        assert_eq!(next(&mut a, &mut b, true), Ok((10, 1 << 20, 1)));
        assert!(g == first, "the first message's bytes");
        assert_eq!(b.eng.placed_segments, 1, "its rest read in place");
        assert_eq!(next(&mut a, &mut b, false).map(|c| c.0), Ok(11));
        // Several at once, of sizes on both sides of the split: whole and
        // in order, however the reads cut them.
        let sizes = [20_000usize, 100_000, 1 << 20, 40_000, (1 << 20) - 3];
        let data: Vec<Vec<u8>> = sizes.iter().enumerate().map(|(k, &n)| pattern(n, k)).collect();
        let mut got: Vec<Vec<u8>> = sizes.iter().map(|&n| vec![0u8; n]).collect();
        for (k, g) in got.iter_mut().enumerate() {
            post_recv(&mut b, g, 100 + k, Some(k as u64));
        }
        for (k, d) in data.iter().enumerate() {
            send(&mut a, pb, d, 200 + k, Some(k as u64)).unwrap();
        }
        for (k, &n) in sizes.iter().enumerate() {
            assert_eq!(next(&mut a, &mut b, true), Ok((100 + k, n, k as u64)));
        }
        for k in 0..sizes.len() {
            assert!(got[k] == data[k], "message {k}'s bytes");
            assert_eq!(next(&mut a, &mut b, false).map(|c| c.0), Ok(200 + k));
        }
        let placed = b.eng.placed_segments;
        assert_eq!(b.eng.bad_packets, 0);

        // Unexpected: buffered and copied once a receive takes it.
        let late = pattern(1 << 20, 9);
        send(&mut a, pb, &late, 300, Some(9)).unwrap();
        assert_eq!(next(&mut a, &mut b, false).map(|c| c.0), Ok(300));
        let mut g = vec![0u8; 1 << 20];
        post_recv(&mut b, &mut g, 301, Some(9));
        assert_eq!(next(&mut a, &mut b, true), Ok((301, 1 << 20, 9)));
        assert!(g == late, "the unexpected message's bytes");
        assert_eq!(b.eng.placed_segments, placed, "nothing placed for an unexpected message");

        // A receive shorter than the message: no place for the rest, which
        // is cut at the receive's end (FI_ETRUNC).
        let long = pattern(300_000, 4);
        let mut short = vec![0u8; 200_000];
        post_recv(&mut b, &mut short, 400, Some(4));
        send(&mut a, pb, &long, 401, Some(4)).unwrap();
        assert_eq!(next(&mut a, &mut b, true), Err(FI_ETRUNC));
        assert!(short[..] == long[..200_000], "the first bytes of the cut message");
        assert_eq!(b.eng.placed_segments, placed, "no place for a rest beyond the receive");
        assert_eq!(b.eng.bad_packets, 0);
    }

    #[test]
    fn both_send_at_once_tokens_come_back() {
        let (mut a, mut b) = (dev(10_000), dev(10_000));
        let (pa, pb) = (b.peer(a.transport().addr()).unwrap(), a.peer(b.transport().addr()).unwrap());
        for i in 0..200u32 {
            a.send(pb, &i.to_le_bytes(), &[b"from a"], u64::from(i) + 1).unwrap();
            b.send(pa, &i.to_le_bytes(), &[b"from b"], u64::from(i) + 1001).unwrap();
        }
        let (mut ba, mut bb) = (RxBatch::default(), RxBatch::default());
        let (mut ga, mut gb, mut aa, mut ab, mut la, mut lb) = (vec![], vec![], vec![], vec![], vec![], vec![]);
        until(|| {
            pump(&mut a, &mut ba, &mut ga, &mut aa, &mut la, &mut |_| false);
            pump(&mut b, &mut bb, &mut gb, &mut ab, &mut lb, &mut |_| false);
            ga.len() == 200 && gb.len() == 200 && aa.len() == 200 && ab.len() == 200
        });
        // One connection per direction: each side's packets arrive in order.
        for (i, m) in gb.iter().enumerate() {
            assert_eq!(m[..4], (i as u32).to_le_bytes());
            assert_eq!(&m[4..], b"from a");
        }
        assert!(ga.iter().all(|m| &m[4..] == b"from b"));
        assert_eq!(aa, (1..=200).collect::<Vec<u64>>());
        assert_eq!(ab, (1001..=1200).collect::<Vec<u64>>());
        assert!(la.is_empty() && lb.is_empty());
        assert!(!a.unacked() && !b.unacked());
        // FI_SOURCE: B knows A by its listening address.
        assert_eq!(b.peer_addr(pa), a.transport().addr());
    }

    /// A sends `n` packets, B answers each once it has it; A refuses each
    /// of B's first `refuse` answers three times. Returns both devices and
    /// B's id of A, once every packet arrived (in order) and every token
    /// came back.
    fn ping_pong(mut a: ConnDevice<TcpTransport>, mut b: ConnDevice<TcpTransport>, n: u32, refuse: u32) -> (ConnDevice<TcpTransport>, ConnDevice<TcpTransport>, PeerId) {
        let pb = a.peer(b.transport().addr()).unwrap();
        let (mut ba, mut bb) = (RxBatch::default(), RxBatch::default());
        let (mut ga, mut gb, mut aa, mut ab, mut la, mut lb) = (vec![], vec![], vec![], vec![], vec![], vec![]);
        let mut refused = std::collections::HashMap::new();
        let mut pa = None;
        for i in 0..n {
            a.send(pb, &i.to_le_bytes(), &[b"ping"], u64::from(i) + 1).unwrap();
            until(|| {
                pump(&mut a, &mut ba, &mut ga, &mut aa, &mut la, &mut |_| false);
                pump(&mut b, &mut bb, &mut gb, &mut ab, &mut lb, &mut |_| false);
                gb.len() > i as usize
            });
            let pa = *pa.get_or_insert_with(|| b.peer(a.transport().addr()).unwrap());
            b.send(pa, &i.to_le_bytes(), &[b"pong"], u64::from(i) + 1001).unwrap();
            until(|| {
                pump(&mut a, &mut ba, &mut ga, &mut aa, &mut la, &mut |p| {
                    let k = u32::from_le_bytes(p[..4].try_into().unwrap());
                    let r = refused.entry(k).or_insert(0);
                    let no = k < refuse && *r < 3;
                    *r += no as u32;
                    no
                });
                pump(&mut b, &mut bb, &mut gb, &mut ab, &mut lb, &mut |_| false);
                ga.len() > i as usize
            });
        }
        until(|| {
            pump(&mut a, &mut ba, &mut ga, &mut aa, &mut la, &mut |_| false);
            pump(&mut b, &mut bb, &mut gb, &mut ab, &mut lb, &mut |_| false);
            aa.len() == n as usize && ab.len() == n as usize
        });
        for (i, (p, q)) in gb.iter().zip(&ga).enumerate() {
            assert_eq!(p[..4], (i as u32).to_le_bytes());
            assert_eq!(&p[4..], b"ping");
            assert_eq!(q[..4], (i as u32).to_le_bytes());
            assert_eq!(&q[4..], b"pong");
        }
        assert_eq!(aa, (1..=u64::from(n)).collect::<Vec<u64>>());
        assert_eq!(ab, (1001..1001 + u64::from(n)).collect::<Vec<u64>>());
        assert_eq!(a.stats().rejected, 3 * u64::from(refuse.min(n)));
        assert!(la.is_empty() && lb.is_empty());
        (a, b, pa.unwrap())
    }

    /// `recv` and `flush` on `d` at the time `now`, collecting packets.
    fn pump_at(d: &mut ConnDevice<TcpTransport>, b: &mut RxBatch, got: &mut Vec<Vec<u8>>, now: Instant) {
        d.flush(now, true);
        d.recv(b, now);
        for k in 0..b.items.len() {
            got.push(b.packet(&b.items[k]).to_vec());
        }
        d.flush(now, false);
    }

    #[test]
    fn a_lazy_acknowledgement_rides_with_the_answer_and_only_then() {
        // The device's clock is the time given to it, so it moves only
        // where the test says.
        let cfg = ConnConfig { complete_on_write: true, ..ConnConfig::default() };
        let (mut a, mut b) = (dev_with(4096, cfg.clone()), dev_with(4096, cfg));
        let pb = a.peer(b.transport().addr()).unwrap();
        let (mut ba, mut bb, mut ga, mut gb) = (RxBatch::default(), RxBatch::default(), vec![], vec![]);
        let t0 = Instant::now();
        a.send(pb, b"p0", &[], 1).unwrap();
        until(|| {
            pump_at(&mut a, &mut ba, &mut ga, t0);
            pump_at(&mut b, &mut bb, &mut gb, t0);
            !gb.is_empty()
        });
        let pa = b.peer(a.transport().addr()).unwrap();
        // An answer at once: its acknowledgement is not due for ACK_DELAY,
        // so it goes without one.
        b.send(pa, b"q0", &[], 1).unwrap();
        until(|| {
            pump_at(&mut a, &mut ba, &mut ga, t0);
            !ga.is_empty()
        });
        assert_eq!(a.peers[pb as usize].out.as_ref().unwrap().unacked.len(), 1);
        assert_eq!(b.peers[pa as usize].inn.as_ref().unwrap().acked, 0);
        // Past half the delay (not yet the whole: no Ack goes alone), the
        // next answer carries it.
        a.send(pb, b"p1", &[], 2).unwrap();
        let t1 = t0 + ACK_DELAY * 3 / 4;
        until(|| {
            pump_at(&mut b, &mut bb, &mut gb, t1);
            gb.len() == 2
        });
        // Sent while B's batch is out with the engine: nothing rides.
        bb.clear();
        b.recv(&mut bb, t1);
        b.send(pa, b"x", &[], 0).unwrap();
        assert_eq!(b.peers[pa as usize].inn.as_ref().unwrap().acked, 0);
        b.flush(t1, false);
        b.send(pa, b"q1", &[], 2).unwrap();
        let i = b.peers[pa as usize].inn.as_ref().unwrap();
        assert_eq!((i.acked, i.owed_bytes, i.ack_due), (2, 0, t1 + ACK_DELAY));
        until(|| {
            pump_at(&mut a, &mut ba, &mut ga, t1);
            ga.len() == 3
        });
        assert_eq!(ga, vec![b"q0".to_vec(), b"x".to_vec(), b"q1".to_vec()]);
        assert!(a.peers[pb as usize].out.as_ref().unwrap().unacked.is_empty());
        assert!(!a.unacked());
        // B's packets are owed an Ack by A: none rode (A sent nothing
        // since), and one goes alone once due.
        assert_eq!(a.peers[pb as usize].inn.as_ref().unwrap().acked, 0);
        let t2 = t1 + ACK_DELAY * 2;
        until(|| {
            pump_at(&mut a, &mut ba, &mut ga, t2);
            pump_at(&mut b, &mut bb, &mut gb, t2);
            !b.unacked()
        });
        assert_eq!(a.peers[pb as usize].inn.as_ref().unwrap().acked, 3);
    }

    #[test]
    fn a_peer_answers_on_the_connection_it_accepted() {
        let (mut a, b, pa) = ping_pong(dev(10_000), dev(10_000), 100, 2);
        let pb = a.peer(b.transport().addr()).unwrap();
        // One connection, A's, carries both ways.
        assert!(b.peers[pa as usize].out.as_ref().unwrap().c.is_none());
        assert!(b.peers[pa as usize].inn.as_ref().unwrap().c.is_some());
        assert!(a.peers[pb as usize].out.as_ref().unwrap().c.is_some());
        assert!(a.peers[pb as usize].inn.as_ref().unwrap().c.is_none());
        assert!(!a.unacked() && !b.unacked());
        // B's going closes it: A loses B once, and connects afresh after.
        drop(b);
        let mut ba = RxBatch::default();
        let (mut ga, mut aa, mut la) = (vec![], vec![], vec![]);
        until(|| {
            pump(&mut a, &mut ba, &mut ga, &mut aa, &mut la, &mut |_| false);
            !la.is_empty()
        });
        assert_eq!(la, vec![pb]);
        assert!(a.peers[pb as usize].out.is_none() && a.peers[pb as usize].inn.is_none());
    }

    #[test]
    fn held_answers_stop_the_reading_of_our_connection_until_taken() {
        held_answers(false);
    }

    #[test]
    fn held_answers_stop_the_reading_of_a_connection_out_of_the_epoll_set_too() {
        held_answers(true);
    }

    fn held_answers(unwatch_hot: bool) {
        // A keeps at most 8 bytes of refused packets per connection: B's
        // first refused answer pauses the reading of A's own connection,
        // which carries B's answers.
        let mut a = dev_with(4096, ConnConfig { hold_max: 8, unwatch_hot, ..ConnConfig::default() });
        let mut b = dev_with(4096, ConnConfig { unwatch_hot, ..ConnConfig::default() });
        let pb = a.peer(b.transport().addr()).unwrap();
        let (mut ba, mut bb) = (RxBatch::default(), RxBatch::default());
        let (mut ga, mut gb, mut aa, mut ab, mut la, mut lb) = (vec![], vec![], vec![], vec![], vec![], vec![]);
        a.send(pb, &[0, 0, 0, 0], &[b"ping"], 1).unwrap();
        until(|| {
            pump(&mut a, &mut ba, &mut ga, &mut aa, &mut la, &mut |_| false);
            pump(&mut b, &mut bb, &mut gb, &mut ab, &mut lb, &mut |_| false);
            !gb.is_empty()
        });
        let pa = b.peer(a.transport().addr()).unwrap();
        // B's first answer, refused by A: A's next round holds it.
        b.send(pa, &0u32.to_le_bytes(), &[b"pong"], 1001).unwrap();
        b.flush(Instant::now(), true);
        let t0 = Instant::now();
        let mut refused_once = || {
            let end = Instant::now() + Duration::from_secs(10);
            loop {
                ba.items.clear();
                a.recv(&mut ba, t0);
                if let Some(it) = ba.items.iter().find(|it| ba.packet(it)[..4] == [0, 0, 0, 0]).copied() {
                    a.reject(it.peer, it.seq);
                    return;
                }
                assert!(Instant::now() < end, "no progress");
                std::thread::sleep(Duration::from_micros(200));
            }
        };
        refused_once();
        // The rest comes while it is held (the device's clock stands still,
        // so the held packet is not offered again): A stops reading.
        for i in 1..50u32 {
            b.send(pa, &i.to_le_bytes(), &[b"pong"], u64::from(i) + 1001).unwrap();
        }
        b.flush(Instant::now(), true);
        until(|| {
            a.recv(&mut ba, t0);
            assert!(ba.items.iter().all(|it| ba.packet(it)[..4] != [0, 0, 0, 0]), "a held packet offered again early");
            for it in ba.items.clone() {
                ga.push(ba.packet(&it).to_vec());
            }
            a.peers[pb as usize].inn.as_ref().is_some_and(|i| i.paused)
        });
        let mut refused = 1;
        until(|| {
            pump(&mut a, &mut ba, &mut ga, &mut aa, &mut la, &mut |p| {
                let no = p[..4] == [0, 0, 0, 0] && refused < 10;
                refused += no as u32;
                no
            });
            pump(&mut b, &mut bb, &mut gb, &mut ab, &mut lb, &mut |_| false);
            ab.len() == 50
        });
        // Watched again once the held packets were taken: later answers
        // are read when they come.
        for i in 50..100u32 {
            b.send(pa, &i.to_le_bytes(), &[b"pong"], u64::from(i) + 1001).unwrap();
        }
        until(|| {
            pump(&mut b, &mut bb, &mut gb, &mut ab, &mut lb, &mut |_| false);
            pump(&mut a, &mut ba, &mut ga, &mut aa, &mut la, &mut |_| false);
            ab.len() == 100
        });
        let mut got: Vec<u32> = ga.iter().map(|p| u32::from_le_bytes(p[..4].try_into().unwrap())).collect();
        got.sort_unstable();
        assert_eq!(got, (0..100).collect::<Vec<u32>>(), "every answer once");
        assert_eq!(refused, 10);
        assert!(b.peers[pa as usize].out.as_ref().unwrap().c.is_none());
        assert!(la.is_empty() && lb.is_empty());
    }

    #[test]
    fn a_lone_connection_is_read_directly_and_the_listener_still_heard() {
        // After a ping-pong A and B have one connection each side: rounds
        // read it without epoll.
        let (mut a, mut b, pa) = ping_pong(dev(10_000), dev(10_000), 20, 0);
        let pb = a.peer(b.transport().addr()).unwrap();
        assert_eq!(a.hot, Some(key(pb as usize, K_OUT)));
        assert_eq!(b.hot, Some(key(pa as usize, K_IN)));
        // A third endpoint connects to A meanwhile: A's listener is still
        // looked at, and A leaves the direct reads once it has two.
        let mut c = dev(10_000);
        let pac = c.peer(a.transport().addr()).unwrap();
        c.send(pac, &[7], &[b"from c"], 1).unwrap();
        b.send(pa, &[8], &[b"from b"], 2).unwrap();
        let (mut ba, mut bb, mut bc) = (RxBatch::default(), RxBatch::default(), RxBatch::default());
        let (mut ga, mut gb, mut gc, mut aa, mut ab, mut ac, mut la, mut lb, mut lc) = (vec![], vec![], vec![], vec![], vec![], vec![], vec![], vec![], vec![]);
        until(|| {
            pump(&mut b, &mut bb, &mut gb, &mut ab, &mut lb, &mut |_| false);
            pump(&mut c, &mut bc, &mut gc, &mut ac, &mut lc, &mut |_| false);
            pump(&mut a, &mut ba, &mut ga, &mut aa, &mut la, &mut |_| false);
            ga.len() == 2 && ab.len() == 1 && ac.len() == 1
        });
        ga.sort();
        assert_eq!(ga, vec![b"\x07from c".to_vec(), b"\x08from b".to_vec()]);
        pump(&mut a, &mut ba, &mut ga, &mut aa, &mut la, &mut |_| false);
        assert_eq!(a.hot, None);
        assert!(la.is_empty() && lb.is_empty() && lc.is_empty());
    }

    /// Whether `fd` is readable now.
    fn readable(fd: i32) -> bool {
        let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
        // SAFETY: one pollfd on the stack, valid for the call; no waiting.
        unsafe { libc::poll(&mut p, 1, 0) == 1 }
    }

    #[test]
    fn a_lone_connection_leaves_the_epoll_set_until_another_comes_or_someone_waits() {
        let unwatching = || dev_with(4096, ConnConfig { unwatch_hot: true, ..ConnConfig::default() });
        let (mut a, mut b, pa) = ping_pong(unwatching(), unwatching(), 20, 0);
        let pb = a.peer(b.transport().addr()).unwrap();
        // Each side reads its one connection directly; epoll holds the
        // listener only, so a packet does not make the descriptor readable.
        assert_eq!(a.unwatched.map(|(_, k)| k), Some(key(pb as usize, K_OUT)));
        assert_eq!(b.unwatched.map(|(_, k)| k), Some(key(pa as usize, K_IN)));
        assert_eq!((a.ep.registered(), b.ep.registered()), (1, 1));
        b.send(pa, &[8], &[b"from b"], 2).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        assert!(!readable(a.fd()));
        let (mut ba, mut bb, mut bc) = (RxBatch::default(), RxBatch::default(), RxBatch::default());
        let (mut ga, mut gb, mut gc, mut aa, mut ab, mut ac, mut la, mut lb, mut lc) = (vec![], vec![], vec![], vec![], vec![], vec![], vec![], vec![], vec![]);
        until(|| {
            pump(&mut a, &mut ba, &mut ga, &mut aa, &mut la, &mut |_| false);
            pump(&mut b, &mut bb, &mut gb, &mut ab, &mut lb, &mut |_| false);
            ga.len() == 1 && ab.len() == 1
        });
        // A third endpoint connects: A's connection goes back into the set
        // before the new one comes in, and A hears both.
        let mut c = unwatching();
        let pac = c.peer(a.transport().addr()).unwrap();
        c.send(pac, &[7], &[b"from c"], 1).unwrap();
        b.send(pa, &[9], &[b"again b"], 3).unwrap();
        until(|| {
            pump(&mut b, &mut bb, &mut gb, &mut ab, &mut lb, &mut |_| false);
            pump(&mut c, &mut bc, &mut gc, &mut ac, &mut lc, &mut |_| false);
            pump(&mut a, &mut ba, &mut ga, &mut aa, &mut la, &mut |_| false);
            ga.len() == 3 && ab.len() == 2 && ac.len() == 1
        });
        ga.sort();
        assert_eq!(ga, vec![b"\x07from c".to_vec(), b"\x08from b".to_vec(), b"\x09again b".to_vec()]);
        assert_eq!(a.unwatched, None);
        assert_eq!(a.ep.registered(), 3);
        // Someone waits on B's descriptor: its connection is watched again
        // for good, and a packet makes the descriptor readable.
        b.keep_watching();
        assert_eq!((b.unwatched, b.ep.registered()), (None, 2));
        a.send(pb, &[6], &[b"from a"], 4).unwrap();
        until(|| readable(b.fd()));
        until(|| {
            pump(&mut b, &mut bb, &mut gb, &mut ab, &mut lb, &mut |_| false);
            gb.iter().any(|m| m == b"\x06from a")
        });
        assert_eq!((b.unwatched, b.ep.registered()), (None, 2));
        assert!(la.is_empty() && lb.is_empty() && lc.is_empty());
    }

    #[test]
    fn an_opener_with_the_older_hello_is_answered_on_our_own_connection() {
        let mut a = dev(10_000);
        a.hello[0] = HELLO;
        let (mut a, b, pa) = ping_pong(a, dev(10_000), 10, 0);
        let pb = a.peer(b.transport().addr()).unwrap();
        assert!(b.peers[pa as usize].out.as_ref().unwrap().c.is_some());
        assert!(a.peers[pb as usize].inn.as_ref().unwrap().c.is_some());
    }

    #[test]
    fn refused_packet_is_offered_again_and_acknowledged_after() {
        let (mut a, mut b) = (dev(10_000), dev(10_000));
        let pb = a.peer(b.transport().addr()).unwrap();
        for i in 0..3u8 {
            a.send(pb, &[i], &[], u64::from(i) + 1).unwrap();
        }
        let (mut ba, mut bb) = (RxBatch::default(), RxBatch::default());
        let (mut ga, mut gb, mut aa, mut ab, mut la, mut lb) = (vec![], vec![], vec![], vec![], vec![], vec![]);
        let mut refusals = 0;
        until(|| {
            pump(&mut a, &mut ba, &mut ga, &mut aa, &mut la, &mut |_| false);
            // The first packet is refused five times.
            pump(&mut b, &mut bb, &mut gb, &mut ab, &mut lb, &mut |p| {
                let no = p == [0] && refusals < 5;
                refusals += no as usize;
                no
            });
            assert!(aa.is_empty() || refusals == 5, "acknowledged past a held packet");
            aa.len() == 3
        });
        assert_eq!(gb.len(), 3);
        assert_eq!(gb.last().unwrap(), &vec![0u8]);
        assert_eq!(b.stats().rejected, 5);
        assert!(la.is_empty() && lb.is_empty());
    }

    #[test]
    fn large_packets_come_in_their_own_buffers_refused_ones_too() {
        let (mut a, mut b) = (dev_max(10_000, 1 << 20), dev_max(10_000, 1 << 20));
        let pb = a.peer(b.transport().addr()).unwrap();
        let big = |k: u8, n: usize| -> Vec<u8> { (0..n).map(|i| (i as u8).wrapping_mul(3).wrapping_add(k)).collect() };
        let sent = [vec![1u8], big(2, 100_000), vec![3u8; 40], big(4, 300_000), big(5, OWN_MIN)];
        for (i, p) in sent.iter().enumerate() {
            a.send(pb, &p[..1], &[&p[1..]], i as u64 + 1).unwrap();
        }
        let (mut ba, mut bb) = (RxBatch::default(), RxBatch::default());
        let (mut ga, mut gb, mut aa, mut ab, mut la, mut lb) = (vec![], vec![], vec![], vec![], vec![], vec![]);
        let (mut refusals, mut owned) = (0, 0);
        until(|| {
            pump(&mut a, &mut ba, &mut ga, &mut aa, &mut la, &mut |_| false);
            owned += bb.owned.len();
            // The first large packet is refused three times: held, then
            // offered again whole.
            pump(&mut b, &mut bb, &mut gb, &mut ab, &mut lb, &mut |p| {
                let no = p.len() == 100_000 && refusals < 3;
                refusals += no as usize;
                no
            });
            aa.len() == sent.len()
        });
        owned += bb.owned.len();
        let mut got = gb.clone();
        got.sort_by_key(|p| p[0]);
        assert_eq!(got, sent.to_vec(), "every packet intact");
        assert_eq!(refusals, 3);
        assert_eq!(b.stats().rejected, 3);
        assert!(owned >= 1, "large packets handed over in their buffers");
        assert!(b.spare.len() <= SPARE_MAX);
        assert!(la.is_empty() && lb.is_empty());
    }

    #[test]
    fn closed_silent_and_unreachable_peers_are_lost_once() {
        let (mut a, b) = (dev(300), dev(300));
        let pb = a.peer(b.transport().addr()).unwrap();
        let mut ba = RxBatch::default();
        let (mut ga, mut aa, mut la) = (vec![], vec![], vec![]);
        // B never progresses: nothing is acknowledged, and B is silent.
        a.send(pb, &[1], &[], 7).unwrap();
        until(|| {
            pump(&mut a, &mut ba, &mut ga, &mut aa, &mut la, &mut |_| false);
            !la.is_empty()
        });
        assert_eq!(la, vec![pb]);
        assert!(aa.is_empty());
        // Sending again connects again; closing B is a loss at once.
        a.send(pb, &[2], &[], 8).unwrap();
        drop(b);
        la.clear();
        until(|| {
            pump(&mut a, &mut ba, &mut ga, &mut aa, &mut la, &mut |_| false);
            !la.is_empty()
        });
        assert_eq!(la, vec![pb]);
        // Nobody listens there now: refused, lost.
        a.send(pb, &[3], &[], 9).unwrap();
        la.clear();
        until(|| {
            pump(&mut a, &mut ba, &mut ga, &mut aa, &mut la, &mut |_| false);
            !la.is_empty()
        });
        assert_eq!(la, vec![pb]);
        assert!(a.peer(&[0u8; 3]).is_err());
    }
}
