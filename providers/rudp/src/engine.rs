//! The protocol engine: RDM semantics over a [`Device`] that delivers
//! packets reliably but in any order. It owns
//! - message order (`FI_ORDER_SAS`): every message and atomic carries a
//!   per-peer message id; one that arrives early waits in a reorder window;
//! - matching, through the core's [`Matcher`] (posted and unexpected queues,
//!   wildcards, directed receive, peek/claim/discard, multi-receive);
//! - the message protocols: one packet (eager), several packets sent at
//!   once (medium, up to `medium_max`), and request-to-send / clear-to-send
//!   (long: the data moves once the receiver matched, into its buffer);
//! - emulated RMA and atomics: request and response packets, checked
//!   against the domain's registrations at the target;
//! - completions: a send completes once its packets are acknowledged (with
//!   `FI_DELIVERY_COMPLETE`, once the receiver's receipt arrived); RMA and
//!   atomics once the target answered.
//!
//! User memory is read and written here, through the addresses the
//! application passed: the `Endpoint` contract keeps it valid until the
//! operation completes.

use crate::device::{Device, PeerId, Placement, RxBatch, RxItem, TOKEN_ON_ACK};
use crate::wire::{Pkt, ProtoHdr, F_CQ_DATA, F_RECEIPT, F_TAGGED, PROTO_HDR};
use rfabric_core::abi::*;
use rfabric_core::error::{Error, Result, EAGAIN, EINVAL};
use rfabric_core::objects::atomic::{self, Kind as AtomicKind};
use rfabric_core::objects::cq::{Completion, ErrCompletion};
use rfabric_core::objects::matching::{Matched, Matcher, RecvSpec, Search, Unexp};
use rfabric_core::objects::mr::MrRegistry;
use rfabric_core::objects::progress::{ProgressCntr, ProgressCq};
use rfabric_core::objects::wait::Locked;
use rfabric_core::provider::{AtomicOp, Iov, RmaOp, RxOp, TxOp};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Local buffers of one operation, at most (`iov_limit`).
pub const IOV_MAX: usize = 4;
/// Largest message sent as packets without a clear-to-send, whatever the
/// setting says: a receiver buffers at most this much per unexpected one.
pub const MEDIUM_CAP: usize = 1 << 20;
/// Bytes of operands one atomic carries, at most (`fi_atomicvalid`'s
/// count times the type size); compare operands come on top, and the
/// smallest datagram the device allows fits both.
pub const ATOMIC_MAX_BYTES: usize = 256;
/// Messages a peer may run ahead of the next one in order.
const REORDER_WINDOW: u32 = 1 << 14;
/// How often peers that operations wait on are sent a `Nop` (see
/// `probe_awaited`).
const PROBE_EVERY: Duration = Duration::from_millis(200);
/// Bytes held in reorder windows and unexpected messages, at most; beyond
/// it packets are refused (and sent again by the peer).
const RX_BUFFER_CAP: usize = 512 << 20;

/// Settings the engine runs with.
#[derive(Clone, Copy, Debug)]
pub struct EngineConfig {
    pub medium_max: usize,
    pub tx_size: usize,
    pub rx_size: usize,
    pub unexp_max: usize,
    pub directed: bool,
    /// A medium message over `lead_above` bytes carries only its first
    /// `lead` bytes in its first packet (0: no such split). Its receive is
    /// matched when that packet is taken, so a device that reads packets
    /// in place (`Device::recv_placing`) can read the rest straight into
    /// the receive's buffers.
    pub lead: usize,
    pub lead_above: usize,
}

/// The phases of one round of progress.
#[derive(Clone, Copy, Debug, Default)]
pub struct RoundTimes {
    pub recv: Duration,
    pub acked: Duration,
    pub arrivals: Duration,
    pub pending: Duration,
    pub rest: Duration,
    pub packets: usize,
}

/// Where completions and counts go (what the endpoint is bound to).
#[derive(Default, Clone)]
pub struct Outputs {
    pub tx_cq: Option<Arc<ProgressCq>>,
    pub rx_cq: Option<Arc<ProgressCq>>,
    pub tx_selective: bool,
    pub rx_selective: bool,
    pub send: Option<Arc<ProgressCntr>>,
    pub recv: Option<Arc<ProgressCntr>>,
    pub read: Option<Arc<ProgressCntr>>,
    pub write: Option<Arc<ProgressCntr>>,
    pub remote_write: Option<Arc<ProgressCntr>>,
    pub remote_read: Option<Arc<ProgressCntr>>,
}

/// Maps a peer to the `fi_addr` completions report (`FI_SOURCE`) and back.
pub trait AddrMap: Send + Sync {
    fn fi_addr_of(&self, raw: &[u8]) -> u64;
    fn generation(&self) -> u64;
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TxKind {
    Msg,
    Long,
    Write,
    Read,
    Atomic,
    /// Target side of a read: streams `ReadResp` packets, completes nothing.
    ReadResp,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Counter {
    None,
    Send,
    Read,
    Write,
}

struct TxOp_ {
    kind: TxKind,
    peer: PeerId,
    gen: u32,
    ctx: usize,
    /// Completion flags.
    cflags: u64,
    comp: bool,
    cntr: Counter,
    iov: [Iov; IOV_MAX],
    niov: usize,
    /// Result buffers of fetching atomics.
    res: [Iov; IOV_MAX],
    nres: usize,
    len: usize,
    hdr: ProtoHdr,
    /// Bytes put into packets so far, and how many to put.
    next: usize,
    end: usize,
    /// Packets sent and not yet acknowledged.
    unacked: u32,
    /// Its packets' tokens carry `TOKEN_ON_ACK`.
    on_ack: bool,
    wait_cts: bool,
    wait_receipt: bool,
    wait_resp: bool,
    /// Bytes of a read that arrived.
    got: usize,
    err: i32,
    /// Copy of an injected payload (or of atomic operands).
    owned: Vec<u8>,
    /// The first packet went out.
    started: bool,
}

enum RxState {
    /// Not matched yet: the data so far (empty for a long message).
    Unexpected(Vec<u8>),
    /// Matched: where the data goes.
    Matched { ctx: usize, iov: [Iov; IOV_MAX], niov: usize, cap: usize, flags: u64, buf: usize, multi: bool },
    /// Discarded (`FI_DISCARD`): the rest is dropped.
    Discarding,
}

struct RxMsg {
    peer: PeerId,
    msg_id: u32,
    src: u64,
    tagged: bool,
    tag: u64,
    data: u64,
    hflags: u8,
    send_op: u32,
    total: usize,
    long: bool,
    /// Bytes that arrived (of `total`, or of the granted part for long).
    got: usize,
    /// Bytes expected: `total`, or what a CTS granted.
    want: usize,
    state: RxState,
    /// Unexpected and unfinished when its sender was lost: the rest never
    /// comes, so a receive that takes it fails (`FI_ECONNRESET`).
    orphan: bool,
    /// In its peer's `active` map: a message of several packets (one that
    /// fits its first packet is complete at once and never looked up).
    tracked: bool,
    /// A long message's buffers in its sender's process, when the sender
    /// offered them to be read (`Device::read_peer`); `nremote` 0: not.
    remote: [Iov; IOV_MAX],
    nremote: usize,
}

#[derive(Default)]
struct PeerSt {
    tx_msg: u32,
    next_msg: u32,
    /// Packets of messages that arrived ahead of their turn.
    early: BTreeMap<u32, Vec<Vec<u8>>>,
    /// Message id -> receive slot, for messages started and not complete.
    active: HashMap<u32, u32>,
    /// Writes in several packets: op id -> (bytes, total).
    writes: HashMap<u32, (usize, usize)>,
    fi_addr: u64,
    av_gen: u64,
}

/// Posted receive: the application's buffers.
#[derive(Clone, Copy, Debug)]
pub struct Posted {
    iov: [Iov; IOV_MAX],
    niov: usize,
}

struct Slab<T> {
    v: Vec<Option<T>>,
    free: Vec<u32>,
    cap: usize,
}

impl<T> Slab<T> {
    fn new(cap: usize) -> Slab<T> {
        Slab { v: Vec::new(), free: Vec::new(), cap }
    }
    #[inline]
    fn insert(&mut self, t: T) -> Option<u32> {
        if let Some(i) = self.free.pop() {
            self.v[i as usize] = Some(t);
            return Some(i);
        }
        if self.v.len() >= self.cap {
            return None;
        }
        self.v.push(Some(t));
        Some(self.v.len() as u32 - 1)
    }
    fn get(&self, i: u32) -> Option<&T> {
        self.v.get(i as usize)?.as_ref()
    }
    fn get_mut(&mut self, i: u32) -> Option<&mut T> {
        self.v.get_mut(i as usize)?.as_mut()
    }
    fn remove(&mut self, i: u32) -> Option<T> {
        let t = self.v.get_mut(i as usize)?.take()?;
        self.free.push(i);
        Some(t)
    }
    /// Drops the entry in `i` where it lies: `remove` without moving it
    /// out (entries are a few hundred bytes).
    fn free(&mut self, i: u32) {
        if let Some(e) = self.v.get_mut(i as usize) {
            if e.is_some() {
                *e = None;
                self.free.push(i);
            }
        }
    }
    fn is_full(&self) -> bool {
        self.free.is_empty() && self.v.len() >= self.cap
    }
    fn len(&self) -> usize {
        self.v.len() - self.free.len()
    }
}

/// Op id on the wire: slot in the low 20 bits, a generation above.
const SLOT_BITS: u32 = 20;
fn op_id(slot: u32, gen: u32) -> u32 {
    slot | (gen << SLOT_BITS)
}
fn token(slot: u32, gen: u32) -> u64 {
    ((gen as u64) << 32) | (slot as u64 + 1)
}

/// Bytes of `iov` from `off`, up to `max`, as at most `IOV_MAX` slices.
///
/// # Safety
/// The iovs name readable memory (the operation's contract).
unsafe fn gather(iov: &[Iov], off: usize, max: usize, out: &mut [&[u8]; IOV_MAX]) -> usize {
    if let [one] = iov {
        // One buffer (most sends).
        let len = max.min(one.len.saturating_sub(off));
        if len == 0 {
            return 0;
        }
        // SAFETY: inside a buffer the application keeps readable (caller).
        out[0] = unsafe { std::slice::from_raw_parts((one.base + off) as *const u8, len) };
        return 1;
    }
    let mut n = 0;
    for p in rfabric_core::provider::iov_pieces(iov, off, max).take(IOV_MAX) {
        // SAFETY: inside a buffer the application keeps readable (caller).
        out[n] = unsafe { std::slice::from_raw_parts(p.base as *const u8, p.len) };
        n += 1;
    }
    n
}

/// Copies `src` into `iov` at byte offset `off`, within `cap` bytes; returns
/// the bytes written.
///
/// # Safety
/// The iovs name writable memory (the operation's contract).
unsafe fn scatter(iov: &[Iov], cap: usize, off: usize, src: &[u8]) -> usize {
    let len = src.len().min(cap.saturating_sub(off));
    if let [one] = iov {
        // One buffer (most receives): a plain copy.
        let len = len.min(one.len.saturating_sub(off));
        if len > 0 {
            // SAFETY: the caller's contract: `one` is writable for its
            // length, and `off + len` lies inside it; `src` is never that
            // memory.
            unsafe { rfabric_core::copy::copy_bytes(src.as_ptr(), (one.base + off) as *mut u8, len) };
        }
        return len;
    }
    // SAFETY: the caller's contract; `src` is packet or buffered data,
    // never that memory.
    unsafe { Placement::new(iov, off, len) }.put(0, src)
}

/// What the completion of a matched receive needs (`Engine::finish_rx`).
struct RxDone {
    peer: PeerId,
    hflags: u8,
    send_op: u32,
    tagged: bool,
    data: u64,
    tag: u64,
    src: u64,
    total: usize,
    ctx: usize,
    cap: usize,
    flags: u64,
    buf: usize,
    multi: bool,
}

/// Bytes per buffer a request to send names for reading: address, length.
const REMOTE_IOV: usize = 16;

/// The sender's buffers a request to send names (`total` bytes in all), or
/// none when the payload is not such a list.
fn decode_remote(payload: &[u8], total: usize) -> ([Iov; IOV_MAX], usize) {
    let mut v = [Iov::default(); IOV_MAX];
    let n = payload.len() / REMOTE_IOV;
    if payload.is_empty() || payload.len() % REMOTE_IOV != 0 || n > IOV_MAX {
        return (v, 0);
    }
    let mut sum = 0usize;
    for (k, c) in payload.chunks_exact(REMOTE_IOV).enumerate() {
        let base = u64::from_le_bytes(c[..8].try_into().unwrap_or_default());
        let len = u64::from_le_bytes(c[8..].try_into().unwrap_or_default());
        let (Ok(base), Ok(len)) = (usize::try_from(base), usize::try_from(len)) else { return (v, 0) };
        v[k] = Iov { base, len };
        sum = sum.saturating_add(len);
    }
    if sum != total {
        return (v, 0);
    }
    (v, n)
}

#[inline]
fn iov_len(iov: &[Iov]) -> usize {
    match iov {
        [one] => one.len,
        _ => iov.iter().map(|v| v.len).sum(),
    }
}

fn copy_iov(src: &[Iov]) -> Result<([Iov; IOV_MAX], usize)> {
    let mut a = [Iov::default(); IOV_MAX];
    match src {
        // One buffer (most operations): stored, not copied by `memcpy`.
        [one] => a[0] = *one,
        _ if src.len() > IOV_MAX => return Err(EINVAL),
        _ => a[..src.len()].copy_from_slice(src),
    }
    Ok((a, src.len()))
}

pub struct Engine<D: Device> {
    pub dev: D,
    cfg: EngineConfig,
    /// The arrivals buffer, out of its place during a round (boxed: taking it
    /// out and putting it back moves a pointer, not its 128 bytes, in every
    /// round, empty polls included).
    batch: Option<Box<RxBatch>>,
    peers: Vec<PeerSt>,
    tx: Slab<TxOp_>,
    tx_gen: u32,
    rx: Slab<RxMsg>,
    matcher: Matcher<Posted, u32>,
    pending: VecDeque<u32>,
    /// Control packets that met a full window.
    ctl_backlog: VecDeque<(PeerId, Vec<u8>, Vec<u8>)>,
    /// Peers whose next message waits in the reorder window for room.
    stalled: Vec<PeerId>,
    pub out: Outputs,
    mr: Arc<Locked<MrRegistry>>,
    av: Option<Arc<dyn AddrMap>>,
    held_bytes: usize,
    min_multi_recv: usize,
    /// Unexpected messages whose sender was not in the AV when they arrived,
    /// and the AV generation they were last looked up in.
    unknown_sources: usize,
    sources_gen: u64,
    /// Packets refused for lack of room (receiver-not-ready), for tests.
    pub refused: u64,
    /// Packets that failed protocol checks, dropped.
    pub bad_packets: u64,
    /// Segments of medium messages the device read straight into their
    /// receive.
    pub placed_segments: u64,
    /// Long messages whose data was read from the sender's memory.
    pub peer_reads: u64,
    /// When peers are next probed (a deadline, so that a round compares
    /// two instants instead of subtracting them).
    next_probe: Instant,
    last_round: RoundTimes,
    /// Whether rounds record `last_round` (set when slow rounds are logged).
    pub round_timing: bool,
    /// Buffers of finished injects and atomics, for the next ones: no heap
    /// allocation per operation once warm.
    spare: Vec<Vec<u8>>,
}

/// Spare buffers kept, and the largest kept.
const SPARE_BUFS: usize = 64;
const SPARE_BUF_MAX: usize = 64 << 10;

impl<D: Device> Engine<D> {
    pub fn new(dev: D, cfg: EngineConfig, mr: Arc<Locked<MrRegistry>>) -> Result<Engine<D>> {
        Ok(Engine {
            dev,
            batch: Some(Box::default()),
            peers: Vec::new(),
            tx: Slab::new(cfg.tx_size.max(16)),
            tx_gen: 1,
            rx: Slab::new((cfg.rx_size + cfg.unexp_max).max(16)),
            matcher: Matcher::new(cfg.rx_size.max(16), cfg.unexp_max.max(16), cfg.directed, cfg.directed, 0)?,
            pending: VecDeque::new(),
            ctl_backlog: VecDeque::new(),
            stalled: Vec::new(),
            out: Outputs::default(),
            mr,
            av: None,
            held_bytes: 0,
            min_multi_recv: 0,
            unknown_sources: 0,
            sources_gen: 0,
            refused: 0,
            bad_packets: 0,
            placed_segments: 0,
            peer_reads: 0,
            next_probe: Instant::now() + PROBE_EVERY,
            last_round: RoundTimes::default(),
            round_timing: false,
            spare: Vec::new(),
            cfg,
        })
    }

    pub fn set_av(&mut self, av: Arc<dyn AddrMap>) {
        self.av = Some(av);
    }

    pub fn set_min_multi_recv(&mut self, v: usize) {
        self.min_multi_recv = v;
        self.matcher.set_min_multi_recv(v);
    }

    #[inline]
    fn peer_st(&mut self, p: PeerId) -> &mut PeerSt {
        let i = p as usize;
        if self.peers.len() <= i {
            self.grow_peers(i + 1);
        }
        &mut self.peers[i]
    }

    /// The next message id to `peer` (they order its matching).
    fn take_msg_id(&mut self, peer: PeerId) -> u32 {
        let st = self.peer_st(peer);
        let m = st.tx_msg;
        st.tx_msg = m.wrapping_add(1);
        m
    }

    /// Gives back the id just taken: nothing was sent with it.
    fn give_back_msg_id(&mut self, peer: PeerId) {
        let st = self.peer_st(peer);
        st.tx_msg = st.tx_msg.wrapping_sub(1);
    }

    #[cold]
    fn grow_peers(&mut self, n: usize) {
        self.peers.resize_with(n, || PeerSt { fi_addr: FI_ADDR_NOTAVAIL, av_gen: u64::MAX, ..PeerSt::default() });
    }

    /// The fi_addr completions report for `p`.
    fn src_of(&mut self, p: PeerId) -> u64 {
        // No Arc clone per arrival: only when the AV changed since.
        let Some(g) = self.av.as_ref().map(|av| av.generation()) else { return FI_ADDR_NOTAVAIL };
        let st = self.peer_st(p);
        if st.av_gen != g {
            let Some(av) = self.av.clone() else { return FI_ADDR_NOTAVAIL };
            let f = av.fi_addr_of(self.dev.peer_addr(p));
            let st = self.peer_st(p);
            st.fi_addr = f;
            st.av_gen = g;
        }
        self.peers[p as usize].fi_addr
    }

    fn max_payload(&self) -> usize {
        self.dev.max_packet() - PROTO_HDR
    }

    /// Largest message that goes in one packet.
    pub fn eager_max(&self) -> usize {
        self.max_payload()
    }

    #[inline]
    fn new_op(&mut self, op: TxOp_) -> Result<u32> {
        let slot = self.tx.insert(op).ok_or(EAGAIN)?;
        self.tx_gen = (self.tx_gen + 1) & ((1 << (32 - SLOT_BITS)) - 1);
        if self.tx_gen == 0 {
            self.tx_gen = 1;
        }
        let gen = self.tx_gen;
        if let Some(o) = self.tx.get_mut(slot) {
            o.gen = gen;
        }
        Ok(slot)
    }

    fn blank_op(kind: TxKind, peer: PeerId, ctx: usize) -> TxOp_ {
        TxOp_ {
            kind,
            peer,
            gen: 0,
            ctx,
            cflags: 0,
            comp: false,
            cntr: Counter::None,
            iov: [Iov::default(); IOV_MAX],
            niov: 0,
            res: [Iov::default(); IOV_MAX],
            nres: 0,
            len: 0,
            hdr: ProtoHdr::default(),
            next: 0,
            end: 0,
            unacked: 0,
            on_ack: false,
            wait_cts: false,
            wait_receipt: false,
            wait_resp: false,
            got: 0,
            err: 0,
            owned: Vec::new(),
            started: false,
        }
    }

    /// `fi_send` and friends to `peer`.
    ///
    /// # Safety
    /// The buffers of `op` stay readable until the send completes (for
    /// injects: until this call returns).
    pub unsafe fn send(&mut self, peer: PeerId, op: &TxOp<'_>) -> Result<()> {
        // SAFETY: forwarded contract.
        let r = unsafe { self.send_op(peer, op) };
        self.dev.push_out();
        r
    }

    unsafe fn send_op(&mut self, peer: PeerId, op: &TxOp<'_>) -> Result<()> {
        let len = iov_len(op.iov);
        let inject = op.no_completion || op.flags & FI_INJECT != 0;
        let long = len > self.cfg.medium_max.min(MEDIUM_CAP);
        if inject && (long || len > self.cfg.medium_max || len > crate::provider::INJECT_SIZE) {
            return Err(Error(FI_EMSGSIZE));
        }
        let comp = !op.no_completion && (!self.out.tx_selective || op.flags & FI_COMPLETION != 0);
        let mut hflags = if op.tagged { F_TAGGED } else { 0 };
        if op.flags & FI_REMOTE_CQ_DATA != 0 {
            hflags |= F_CQ_DATA;
        }
        if inject && !comp && len <= self.max_payload() && op.iov.len() <= IOV_MAX && self.out.send.is_none() && self.dev.has_room(peer) {
            // An inject of one packet with nothing to report when it is
            // out (no completion, no counter): straight to the device,
            // which copies what it takes; no operation is kept. (A kept one
            // would report only an error, and an inject's has no context.)
            let msg_id = self.take_msg_id(peer);
            let h = ProtoHdr { pkt: Pkt::Msg as u8, flags: hflags, msg_id, tag: op.tag, data: op.data, total: len as u64, ..ProtoHdr::default() };
            let mut hb = [0u8; PROTO_HDR];
            h.encode(&mut hb);
            let mut parts: [&[u8]; IOV_MAX] = [&[]; IOV_MAX];
            // SAFETY: an inject's buffers are readable during this call.
            let n = unsafe { gather(op.iov, 0, len, &mut parts) };
            if self.dev.send(peer, &hb, &parts[..n], 0).is_ok() {
                return Ok(());
            }
            // Not taken now: the operation below keeps a copy and waits.
            self.give_back_msg_id(peer);
        }
        let (iov, niov) = copy_iov(op.iov)?;
        let mut o = Self::blank_op(if long { TxKind::Long } else { TxKind::Msg }, peer, op.context);
        o.cflags = FI_SEND | if op.tagged { FI_TAGGED } else { FI_MSG };
        o.comp = comp;
        o.cntr = Counter::Send;
        o.len = len;
        if op.flags & FI_DELIVERY_COMPLETE != 0 && !inject {
            hflags |= F_RECEIPT;
            o.wait_receipt = true;
        }
        o.on_ack = op.flags & (FI_TRANSMIT_COMPLETE | FI_DELIVERY_COMPLETE) != 0 && !inject;
        let pkts = if long { 1 } else { len.div_ceil(self.max_payload()).max(1) };
        if inject && self.dev.room(peer) < pkts {
            return Err(EAGAIN);
        }
        // An inject's buffer is the caller's during this call only: what
        // is not sent by its end is copied (`keep_inject`).
        o.iov = iov;
        o.niov = niov;
        if long && self.dev.reads_peer(peer) {
            // The receiver may read the data from here: the request names
            // the buffers.
            let mut buf = self.buffer(niov * REMOTE_IOV);
            for v in &iov[..niov] {
                buf.extend_from_slice(&(v.base as u64).to_le_bytes());
                buf.extend_from_slice(&(v.len as u64).to_le_bytes());
            }
            o.owned = buf;
        }
        let msg_id = self.take_msg_id(peer);
        o.hdr = ProtoHdr {
            pkt: if long { Pkt::Rts } else { Pkt::Msg } as u8,
            flags: hflags,
            msg_id,
            tag: op.tag,
            data: op.data,
            total: len as u64,
            ..ProtoHdr::default()
        };
        if long {
            o.wait_cts = true;
            o.end = 0;
        } else {
            o.end = len;
        }
        let slot = match self.new_op(o) {
            Ok(s) => s,
            Err(e) => {
                // Give the message id back: nothing was sent with it.
                self.give_back_msg_id(peer);
                return Err(e);
            }
        };
        self.start(slot);
        if inject {
            self.keep_inject(slot);
        }
        Ok(())
    }

    /// An inject that is not all sent yet keeps a copy of its data (the
    /// devices copy what they are given, so a sent packet needs none).
    fn keep_inject(&mut self, slot: u32) {
        let Some(o) = self.tx.get_mut(slot) else { return };
        if o.started && o.next >= o.end {
            return;
        }
        let (iov, niov, len) = (o.iov, o.niov, o.len);
        let mut buf = self.buffer(len);
        let mut parts: [&[u8]; IOV_MAX] = [&[]; IOV_MAX];
        // SAFETY: the caller's buffers are readable during its call, which
        // this is part of.
        let n = unsafe { gather(&iov[..niov], 0, len, &mut parts) };
        for p in &parts[..n] {
            buf.extend_from_slice(p);
        }
        let o = self.tx.get_mut(slot).expect("op present");
        o.iov[0] = Iov { base: buf.as_ptr() as usize, len };
        o.niov = 1;
        o.owned = buf;
    }

    /// Sends the first packets of a new operation, or queues it.
    fn start(&mut self, slot: u32) {
        let Some(o) = self.tx.get_mut(slot) else { return };
        if o.kind == TxKind::Long || o.kind == TxKind::Read || o.kind == TxKind::Atomic {
            // One request packet; what follows waits for the answer.
            let peer = o.peer;
            if self.dev.room(peer) == 0 {
                self.pending.push_back(slot);
                return;
            }
            self.send_request(slot);
            return;
        }
        if !self.pump(slot) {
            self.pending.push_back(slot);
        }
    }

    fn send_request(&mut self, slot: u32) {
        let Some(o) = self.tx.get_mut(slot) else { return };
        let mut h = o.hdr;
        h.op_id = op_id(slot, o.gen);
        let mut hb = [0u8; PROTO_HDR];
        h.encode(&mut hb);
        let (peer, tok) = (o.peer, token(slot, o.gen) | if o.on_ack { TOKEN_ON_ACK } else { 0 });
        let owned_ptr = (o.owned.as_ptr(), o.owned.len());
        // SAFETY: `owned` lives in the op, which outlives this call.
        let payload: &[u8] = unsafe { std::slice::from_raw_parts(owned_ptr.0, owned_ptr.1) };
        if self.dev.send(peer, &hb, &[payload], tok).is_ok() {
            if let Some(o) = self.tx.get_mut(slot) {
                o.unacked += 1;
                o.hdr.op_id = h.op_id;
                o.started = true;
            }
        } else {
            self.pending.push_back(slot);
        }
    }

    /// Puts as much of an operation's data into packets as the device takes
    /// (a message of 0 bytes is one packet). True when all of it is out.
    fn pump(&mut self, slot: u32) -> bool {
        let maxp = self.max_payload();
        loop {
            let Some(o) = self.tx.get_mut(slot) else { return true };
            if o.next >= o.end && o.started {
                return true;
            }
            let peer = o.peer;
            if self.dev.room(peer) == 0 {
                return false;
            }
            let Some(o) = self.tx.get_mut(slot) else { return true };
            let mut take = (o.end - o.next).min(maxp);
            if !o.started && o.kind == TxKind::Msg && self.cfg.lead > 0 && o.end > self.cfg.lead_above.max(self.cfg.lead) {
                take = take.min(self.cfg.lead);
            }
            let mut h = o.hdr;
            if o.kind != TxKind::ReadResp {
                h.op_id = op_id(slot, o.gen);
            }
            h.offset = o.next as u64;
            if o.kind == TxKind::Write {
                h.addr = o.hdr.addr.wrapping_add(o.next as u64);
            }
            let mut hb = [0u8; PROTO_HDR];
            h.encode(&mut hb);
            let mut parts: [&[u8]; IOV_MAX] = [&[]; IOV_MAX];
            // SAFETY: the op's buffers are readable until it completes (the
            // operation's contract), or are its own `owned` copy, or (read
            // responses) registered memory checked by `verify`.
            let n = unsafe { gather(&o.iov[..o.niov], o.next, take, &mut parts) };
            let tok = if o.kind == TxKind::ReadResp {
                0
            } else {
                token(slot, o.gen) | if o.on_ack { TOKEN_ON_ACK } else { 0 }
            };
            if self.dev.send(peer, &hb, &parts[..n], tok).is_err() {
                return false;
            }
            let o = self.tx.get_mut(slot).expect("op present");
            o.next += take;
            o.started = true;
            if tok != 0 {
                o.unacked += 1;
            }
        }
    }

    /// Completes or frees a transmit-side operation whose waits are over.
    fn maybe_done(&mut self, slot: u32) {
        let Some(o) = self.tx.get_mut(slot) else { return };
        if o.unacked > 0 {
            return;
        }
        let waiting = o.next < o.end || !o.started || o.wait_cts || o.wait_receipt || o.wait_resp;
        if waiting && o.err == 0 {
            return;
        }
        if o.kind != TxKind::ReadResp {
            Self::complete_tx(&self.out, o);
        }
        let owned = std::mem::take(&mut o.owned);
        self.tx.free(slot);
        self.recycle(owned);
    }

    /// An empty buffer with room for `len` bytes, from the spares if one fits.
    fn buffer(&mut self, len: usize) -> Vec<u8> {
        match self.spare.pop() {
            Some(mut b) => {
                b.reserve(len);
                b
            }
            None => Vec::with_capacity(len.max(256)),
        }
    }

    fn recycle(&mut self, mut b: Vec<u8>) {
        if b.capacity() > 0 && b.capacity() <= SPARE_BUF_MAX && self.spare.len() < SPARE_BUFS {
            b.clear();
            self.spare.push(b);
        }
    }

    fn complete_tx(out: &Outputs, o: &TxOp_) {
        let cntr = match o.cntr {
            Counter::Send => out.send.as_ref(),
            Counter::Read => out.read.as_ref(),
            Counter::Write => out.write.as_ref(),
            Counter::None => None,
        };
        if o.err != 0 {
            if let Some(c) = cntr {
                c.c.adderr(1);
            }
            if let Some(cq) = &out.tx_cq {
                cq.push_err(ErrCompletion {
                    base: Completion { op_context: o.ctx, flags: o.cflags, ..Completion::default() },
                    err: o.err,
                    prov_errno: o.err,
                    ..ErrCompletion::default()
                });
            }
            return;
        }
        if let Some(c) = cntr {
            c.c.add(1);
        }
        if o.comp {
            if let Some(cq) = &out.tx_cq {
                cq.push(Completion { op_context: o.ctx, flags: o.cflags, ..Completion::default() });
            }
        }
    }

    /// `fi_recv` and friends.
    ///
    /// # Safety
    /// The buffers of `op` stay writable until the receive completes.
    pub unsafe fn recv(&mut self, op: &RxOp<'_>) -> Result<()> {
        // SAFETY: forwarded contract.
        let r = unsafe { self.recv_op(op) };
        self.dev.push_out();
        r
    }

    unsafe fn recv_op(&mut self, op: &RxOp<'_>) -> Result<()> {
        self.refresh_sources();
        let (iov, niov) = copy_iov(op.iov)?;
        let len = iov_len(&iov[..niov]);
        let base = if niov > 0 { iov[0].base } else { 0 };
        let flags = op.flags;
        let spec = if op.tagged {
            RecvSpec::tagged(op.context, base, len, op.src, op.tag, op.ignore, flags & (FI_MULTI_RECV | FI_COMPLETION))
        } else {
            RecvSpec::untagged(op.context, base, len, op.src, flags & (FI_MULTI_RECV | FI_COMPLETION))
        };
        let kind = if op.tagged { FI_TAGGED } else { FI_MSG };
        if flags & (FI_PEEK | FI_CLAIM) != 0 {
            return self.search(&spec, flags, Posted { iov, niov }, kind);
        }
        if flags & FI_MULTI_RECV != 0 {
            if niov != 1 {
                return Err(EINVAL);
            }
            self.matcher.post(spec, Posted { iov, niov })?;
            while let Some((u, m)) = self.matcher.take_unexpected_matched(&spec) {
                self.deliver_unexpected(u.payload, m);
            }
            return Ok(());
        }
        if let Some(u) = self.matcher.take_unexpected(&spec) {
            let m = Matched { ctx: op.context, buf: base, cap: len, flags: spec.flags, entry: Ok(rfabric_core::objects::matching::Posted { spec, desc: Posted { iov, niov }, consumed: 0 }) };
            self.deliver_unexpected(u.payload, m);
            return Ok(());
        }
        self.matcher.post(spec, Posted { iov, niov })
    }

    /// Unexpected messages from senders the AV did not hold when they
    /// arrived get their source once the AV holds them (MPI inserts its
    /// peers' addresses while the first messages may already be arriving):
    /// a directed receive must find them.
    fn refresh_sources(&mut self) {
        if self.unknown_sources == 0 {
            return;
        }
        let Some(av) = self.av.clone() else { return };
        let g = av.generation();
        if g == self.sources_gen {
            return;
        }
        self.sources_gen = g;
        let mut slots = Vec::new();
        self.matcher.for_each_unexpected(|u| {
            if u.src == FI_ADDR_NOTAVAIL {
                slots.push(u.payload);
            }
        });
        let mut found = std::collections::HashMap::new();
        for slot in slots {
            let Some(peer) = self.rx.get_mut(slot).map(|m| m.peer) else { continue };
            let src = self.src_of(peer);
            if src != FI_ADDR_NOTAVAIL {
                found.insert(slot, src);
                if let Some(m) = self.rx.get_mut(slot) {
                    m.src = src;
                }
            }
        }
        let mut left = 0;
        self.matcher.for_each_unexpected(|u| {
            if let Some(&src) = found.get(&u.payload) {
                u.src = src;
            } else if u.src == FI_ADDR_NOTAVAIL {
                left += 1;
            }
        });
        self.unknown_sources = left;
    }

    fn search(&mut self, spec: &RecvSpec, flags: u64, posted: Posted, kind: u64) -> Result<()> {
        let rx_cq = self.out.rx_cq.clone();
        match self.matcher.search(spec, flags) {
            Ok(Search::Peeked(i)) | Ok(Search::Claimed(i)) => {
                if let Some(cq) = rx_cq {
                    cq.push(Completion {
                        op_context: spec.ctx,
                        flags: FI_RECV | kind | (i.flags & FI_REMOTE_CQ_DATA),
                        len: i.len,
                        data: i.data,
                        tag: i.tag,
                        src_addr: i.src,
                        buf: 0,
                    });
                }
                Ok(())
            }
            Ok(Search::Taken(u)) => {
                let m = Matched { ctx: spec.ctx, buf: spec.buf, cap: spec.len, flags: spec.flags, entry: Ok(rfabric_core::objects::matching::Posted { spec: *spec, desc: posted, consumed: 0 }) };
                self.deliver_unexpected(u.payload, m);
                Ok(())
            }
            Ok(Search::Discarded(u)) => {
                let slot = u.payload;
                self.discard(slot);
                if let Some(cq) = rx_cq {
                    cq.push(Completion { op_context: spec.ctx, flags: FI_RECV | kind, len: 0, tag: u.tag, ..Completion::default() });
                }
                Ok(())
            }
            Err(e) if e.0 == FI_ENOMSG => {
                if let Some(cq) = rx_cq {
                    cq.push_err(ErrCompletion {
                        base: Completion { op_context: spec.ctx, flags: FI_RECV | kind, tag: spec.tag, ..Completion::default() },
                        err: FI_ENOMSG,
                        ..ErrCompletion::default()
                    });
                }
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    fn discard(&mut self, slot: u32) {
        let Some(m) = self.rx.get_mut(slot) else { return };
        if let RxState::Unexpected(b) = &m.state {
            self.held_bytes -= b.capacity();
        }
        m.state = RxState::Discarding;
        if m.orphan {
            m.want = m.got;
        }
        let (long, peer, send_op) = (m.long && !m.orphan, m.peer, m.send_op);
        if long {
            m.want = 0;
            self.send_cts(peer, send_op, slot, 0);
        }
        self.rx_maybe_done(slot);
    }

    /// Cancels the posted receive with this context.
    pub fn cancel(&mut self, ctx: usize) -> Result<()> {
        let p = self.matcher.cancel(ctx).ok_or(Error(FI_ENOENT))?;
        if let Some(k) = &self.out.recv {
            k.c.adderr(1);
        }
        if let Some(cq) = &self.out.rx_cq {
            let kind = if p.spec.tagged { FI_TAGGED } else { FI_MSG };
            cq.push_err(ErrCompletion {
                base: Completion { op_context: ctx, flags: FI_RECV | kind | (p.spec.flags & FI_MULTI_RECV), tag: p.spec.tag, ..Completion::default() },
                err: FI_ECANCELED,
                ..ErrCompletion::default()
            });
        }
        Ok(())
    }

    /// Where a matched receive's data goes: its buffers, how many, and
    /// whether they are a multi-receive buffer's rest.
    fn matched_buffers(m: &Matched<Posted>) -> ([Iov; IOV_MAX], usize, bool) {
        match &m.entry {
            Ok(p) if p.spec.flags & FI_MULTI_RECV == 0 => (p.desc.iov, p.desc.niov, false),
            _ => {
                let mut a = [Iov::default(); IOV_MAX];
                a[0] = Iov { base: m.buf, len: m.cap };
                (a, 1, true)
            }
        }
    }

    fn matched_state(m: &Matched<Posted>) -> RxState {
        let (iov, niov, multi) = Self::matched_buffers(m);
        RxState::Matched { ctx: m.ctx, iov, niov, cap: m.cap, flags: m.flags, buf: m.buf, multi }
    }

    /// A message that waited in the unexpected queue meets its receive.
    fn deliver_unexpected(&mut self, slot: u32, m: Matched<Posted>) {
        let st = Self::matched_state(&m);
        let Some(msg) = self.rx.get_mut(slot) else { return };
        let old = std::mem::replace(&mut msg.state, st);
        if let RxState::Unexpected(buf) = old {
            self.held_bytes -= buf.capacity();
            let msg = self.rx.get_mut(slot).expect("slot");
            if msg.orphan {
                // No clear-to-send to a peer that is not the sender any more.
                self.fail_rx(slot);
                return;
            }
            if msg.long {
                let cap = match msg.state {
                    RxState::Matched { cap, .. } => cap,
                    _ => 0,
                };
                msg.want = msg.total.min(cap);
                let (peer, send_op, want) = (msg.peer, msg.send_op, msg.want);
                self.grant(peer, send_op, slot, want);
            } else if let RxState::Matched { iov, niov, cap, .. } = msg.state {
                // SAFETY: the receive's buffers are writable until it completes.
                unsafe { scatter(&iov[..niov], cap, 0, &buf[..msg.total.min(buf.len())]) };
            }
        }
        self.rx_maybe_done(slot);
    }

    /// Lets a long message's sender know that `want` bytes are awaited:
    /// read from its memory when it offered that and the device can
    /// (a clear-to-send for nothing more then tells it the data is here),
    /// else a clear-to-send for them.
    fn grant(&mut self, peer: PeerId, send_op: u32, slot: u32, want: usize) {
        if want > 0 && self.read_long(peer, slot, want) {
            self.send_cts(peer, send_op, slot, 0);
        } else {
            self.send_cts(peer, send_op, slot, want);
        }
    }

    /// Copies the first `want` bytes of a long message from its sender's
    /// memory into the matched receive; true when all of them are there.
    fn read_long(&mut self, peer: PeerId, slot: u32, want: usize) -> bool {
        let Some(m) = self.rx.get_mut(slot) else { return false };
        let RxState::Matched { iov, niov, cap, .. } = m.state else { return false };
        if m.nremote == 0 || want > cap {
            return false;
        }
        // SAFETY: a matched receive's buffers are writable until it
        // completes, which is after this call.
        let place = unsafe { Placement::new(&iov[..niov], 0, want) };
        if self.dev.read_peer(peer, &m.remote[..m.nremote], &place).is_err() {
            return false;
        }
        m.got = want;
        self.peer_reads += 1;
        true
    }

    fn send_cts(&mut self, peer: PeerId, send_op: u32, rx_slot: u32, granted: usize) {
        let h = ProtoHdr { pkt: Pkt::Cts as u8, op_id: send_op, aux: rx_slot, total: granted as u64, ..ProtoHdr::default() };
        self.send_ctl(peer, &h, &[]);
    }

    /// A control packet (no operation waits for its acknowledgement).
    fn send_ctl(&mut self, peer: PeerId, h: &ProtoHdr, payload: &[&[u8]]) {
        let mut hb = [0u8; PROTO_HDR];
        h.encode(&mut hb);
        // Control packets may exceed the window by a little: they answer
        // what the peer sent and must not wait behind our own data.
        if self.dev.send(peer, &hb, payload, 0).is_err() {
            self.ctl_backlog.push_back((peer, hb.to_vec(), payload.concat()));
        }
    }

    fn rx_maybe_done(&mut self, slot: u32) {
        let Some(m) = self.rx.get_mut(slot) else { return };
        let done = match m.state {
            RxState::Unexpected(_) => false,
            RxState::Discarding => m.got >= m.want,
            RxState::Matched { .. } => m.got >= m.want,
        };
        if !done {
            return;
        }
        // The fields the completion needs, then the entry is dropped in
        // place.
        let (peer, msg_id, tracked, hflags, send_op) = (m.peer, m.msg_id, m.tracked, m.hflags, m.send_op);
        let (tagged, data, tag, src, total) = (m.tagged, m.data, m.tag, m.src, m.total);
        let matched = match m.state {
            RxState::Matched { ctx, cap, flags, buf, multi, .. } => Some((ctx, cap, flags, buf, multi)),
            _ => None,
        };
        self.rx.free(slot);
        if tracked {
            if let Some(st) = self.peers.get_mut(peer as usize) {
                st.active.remove(&msg_id);
            }
        }
        let Some((ctx, cap, flags, buf, multi)) = matched else { return };
        self.finish_rx(RxDone { peer, hflags, send_op, tagged, data, tag, src, total, ctx, cap, flags, buf, multi });
    }

    /// The receipt, counter and completion of a matched receive whose data
    /// is all in place.
    fn finish_rx(&mut self, d: RxDone) {
        let RxDone { peer, hflags, send_op, tagged, data, tag, src, total, ctx, cap, flags, buf, multi } = d;
        if hflags & F_RECEIPT != 0 {
            let h = ProtoHdr { pkt: Pkt::Receipt as u8, op_id: send_op, ..ProtoHdr::default() };
            self.send_ctl(peer, &h, &[]);
        }
        let kind = if tagged { FI_TAGGED } else { FI_MSG };
        let cqd = if hflags & F_CQ_DATA != 0 { FI_REMOTE_CQ_DATA } else { 0 };
        let c = Completion {
            op_context: ctx,
            flags: FI_RECV | kind | cqd | (flags & FI_MULTI_RECV),
            len: total.min(cap),
            buf: if multi { buf } else { 0 },
            data,
            tag,
            src_addr: src,
        };
        if total > cap {
            if let Some(k) = &self.out.recv {
                k.c.adderr(1);
            }
            if let Some(cq) = &self.out.rx_cq {
                cq.push_err(ErrCompletion { base: c, err: FI_ETRUNC, olen: total - cap, ..ErrCompletion::default() });
            }
            return;
        }
        if let Some(k) = &self.out.recv {
            k.c.add(1);
        }
        if let Some(cq) = &self.out.rx_cq {
            if !self.out.rx_selective || flags & FI_COMPLETION != 0 {
                cq.push(c);
            }
        }
    }

    // ---------- the arrival side ----------

    /// One round of progress: acknowledgements owed, arrivals, timers,
    /// queued packets. Returns the work done.
    pub fn progress(&mut self) -> usize {
        self.progress_at(Instant::now())
    }

    /// A round of progress at `now` (the caller's clock reading: one
    /// reading per round serves the device's timers and the engine's).
    pub fn progress_at(&mut self, now: Instant) -> usize {
        // The breakdown of a round costs five clock readings; it is taken
        // only when someone will log it.
        let stamp = |on: bool| if on { Some(Instant::now()) } else { None };
        let timing = self.round_timing;
        self.dev.flush(now, true);
        let mut batch = self.batch.take().unwrap_or_default();
        let (rx, peers) = (&self.rx, &self.peers);
        let n = self.dev.recv_placing(&mut batch, now, &mut |p, head, len| Self::placement(rx, peers, p, head, len));
        let t_recv = stamp(timing);
        let mut work = n + batch.acked.len() + batch.lost.len();
        for k in 0..batch.lost.len() {
            let p = batch.lost[k];
            self.peer_lost(p);
        }
        for k in 0..batch.acked.len() {
            let t = batch.acked[k];
            self.on_acked(t);
        }
        let t_acked = stamp(timing);
        for k in 0..batch.items.len() {
            let it = batch.items[k];
            if !self.on_packet(&batch, &it) {
                self.refused += 1;
                self.dev.reject(it.peer, it.seq);
            }
        }
        let items = batch.items.len();
        self.batch = Some(batch);
        if !self.stalled.is_empty() {
            for p in std::mem::take(&mut self.stalled) {
                self.drain_early(p);
            }
        }
        let t_arrivals = stamp(timing);
        self.dev.flush(now, false);
        work += self.run_pending();
        let t_pending = stamp(timing);
        if now >= self.next_probe {
            self.next_probe = now + PROBE_EVERY;
            self.probe_awaited();
        }
        self.dev.push_out();
        if !timing {
            return work;
        }
        if let (Some(t_recv), Some(t_acked), Some(t_arrivals), Some(t_pending)) = (t_recv, t_acked, t_arrivals, t_pending) {
            self.last_round = RoundTimes {
                recv: t_recv - now,
                acked: t_acked - t_recv,
                arrivals: t_arrivals - t_acked,
                pending: t_pending - t_arrivals,
                rest: t_pending.elapsed(),
                packets: items,
            };
        }
        work
    }

    /// Where the last round of `progress` spent its time (logged when a
    /// round is slow).
    pub fn last_round(&self) -> RoundTimes {
        self.last_round
    }

    /// Sends a `Nop` to each peer that an operation waits on for an answer
    /// (a clear-to-send, a receipt, an RMA or atomic response, the rest of
    /// a matched message). The device gives a peer up only when packets to
    /// it stay unacknowledged: without these, a peer that died after
    /// acknowledging everything it was sent would leave those operations
    /// waiting for ever.
    fn probe_awaited(&mut self) {
        let mut peers: Vec<PeerId> = Vec::new();
        for o in self.tx.v.iter().flatten() {
            if o.wait_cts || o.wait_receipt || o.wait_resp {
                peers.push(o.peer);
            }
        }
        for m in self.rx.v.iter().flatten() {
            if matches!(m.state, RxState::Matched { .. }) && m.got < m.want {
                peers.push(m.peer);
            }
        }
        peers.sort_unstable();
        peers.dedup();
        let mut hb = [0u8; PROTO_HDR];
        ProtoHdr { pkt: Pkt::Nop as u8, ..ProtoHdr::default() }.encode(&mut hb);
        for p in peers {
            // A full window refuses it: packets to that peer are in flight
            // then, and they time out as well.
            let _ = self.dev.send(p, &hb, &[], 0);
        }
    }

    fn run_pending(&mut self) -> usize {
        let mut work = 0;
        while let Some((peer, hb, payload)) = self.ctl_backlog.pop_front() {
            if self.dev.send(peer, &hb, &[&payload], 0).is_err() {
                self.ctl_backlog.push_front((peer, hb, payload));
                break;
            }
            work += 1;
        }
        for _ in 0..self.pending.len() {
            let Some(slot) = self.pending.pop_front() else { break };
            let Some(o) = self.tx.get_mut(slot) else { continue };
            let needs_request = matches!(o.kind, TxKind::Long | TxKind::Read | TxKind::Atomic) && !o.started;
            if needs_request {
                if self.dev.room(o.peer) == 0 {
                    self.pending.push_back(slot);
                    continue;
                }
                self.send_request(slot);
                work += 1;
                continue;
            }
            if self.pump(slot) {
                work += 1;
                if self.tx.get_mut(slot).is_some_and(|o| o.kind == TxKind::ReadResp) {
                    self.tx.remove(slot);
                } else {
                    self.maybe_done(slot);
                }
            } else {
                self.pending.push_back(slot);
            }
        }
        work
    }

    fn on_acked(&mut self, t: u64) {
        let t = t & !TOKEN_ON_ACK;
        let slot = ((t & 0xffff_ffff) as u32).wrapping_sub(1);
        let gen = (t >> 32) as u32;
        let Some(o) = self.tx.get_mut(slot) else { return };
        if o.gen != gen {
            return;
        }
        o.unacked = o.unacked.saturating_sub(1);
        self.maybe_done(slot);
    }

    fn peer_lost(&mut self, p: PeerId) {
        let slots: Vec<u32> = (0..self.tx.v.len() as u32).filter(|&i| self.tx.v[i as usize].as_ref().is_some_and(|o| o.peer == p)).collect();
        for s in slots {
            if let Some(o) = self.tx.get_mut(s) {
                o.err = FI_ECONNRESET;
                o.unacked = 0;
            }
            self.maybe_done(s);
        }
        let rslots: Vec<u32> = (0..self.rx.v.len() as u32).filter(|&i| self.rx.v[i as usize].as_ref().is_some_and(|m| m.peer == p)).collect();
        for s in rslots {
            let Some(m) = self.rx.get_mut(s) else { continue };
            match m.state {
                RxState::Matched { .. } => self.fail_rx(s),
                // What arrived whole is still received (it was sent before
                // the loss); the rest of an unfinished one never comes.
                RxState::Unexpected(_) => m.orphan = m.long || m.got < m.total,
                RxState::Discarding => {}
            }
        }
        let st = self.peer_st(p);
        let dropped: usize = st.early.values().flatten().map(|v| v.capacity()).sum();
        *st = PeerSt { fi_addr: FI_ADDR_NOTAVAIL, av_gen: u64::MAX, ..PeerSt::default() };
        self.held_bytes = self.held_bytes.saturating_sub(dropped);
    }

    /// Ends the matched receive in `slot` with `FI_ECONNRESET` (its sender
    /// was lost).
    fn fail_rx(&mut self, slot: u32) {
        let Some(m) = self.rx.remove(slot) else { return };
        if let RxState::Matched { ctx, .. } = m.state {
            if let Some(k) = &self.out.recv {
                k.c.adderr(1);
            }
            if let Some(cq) = &self.out.rx_cq {
                cq.push_err(ErrCompletion {
                    base: Completion { op_context: ctx, flags: FI_RECV | if m.tagged { FI_TAGGED } else { FI_MSG }, tag: m.tag, ..Completion::default() },
                    err: FI_ECONNRESET,
                    ..ErrCompletion::default()
                });
            }
        }
    }

    /// Handles one arrived packet; false refuses it (it comes again).
    fn on_packet(&mut self, batch: &RxBatch, it: &RxItem) -> bool {
        let b = batch.packet(it);
        let Some((pkt, h)) = ProtoHdr::decode(b) else {
            self.bad_packets += 1;
            return true;
        };
        let payload = &b[PROTO_HDR..];
        let p = it.peer;
        match pkt {
            Pkt::Msg | Pkt::Rts | Pkt::Atomic => self.on_ordered(p, pkt, &h, payload, it.placed),
            Pkt::Data => {
                self.on_data(p, &h, payload, it.placed);
                true
            }
            Pkt::Cts => {
                self.on_cts(p, &h);
                true
            }
            Pkt::Receipt => {
                self.on_resp(p, &h, payload, Pkt::Receipt);
                true
            }
            Pkt::WriteResp | Pkt::ReadResp | Pkt::AtomicResp => {
                self.on_resp(p, &h, payload, pkt);
                true
            }
            Pkt::Write => {
                self.on_write(p, &h, payload);
                true
            }
            Pkt::ReadReq => self.on_read_req(p, &h),
            Pkt::Nop => true,
        }
    }

    /// Messages and atomics: in message-id order per peer.
    fn on_ordered(&mut self, p: PeerId, pkt: Pkt, h: &ProtoHdr, payload: &[u8], placed: usize) -> bool {
        let next = self.peer_st(p).next_msg;
        let ahead = h.msg_id.wrapping_sub(next);
        if placed > 0 {
            // Only a later segment of a started, matched message is placed.
            match self.peers[p as usize].active.get(&h.msg_id) {
                Some(&slot) if pkt == Pkt::Msg && (ahead as i32) < 0 => self.msg_segment(slot, h, payload, placed),
                _ => self.bad_packets += 1,
            }
            return true;
        }
        if ahead == 0 && self.peers[p as usize].early.contains_key(&next) {
            // Packets of this message wait already: it starts from there.
            self.hold_early(p, h, payload);
            self.drain_early(p);
            return true;
        }
        if ahead == 0 {
            if !self.start_msg(p, pkt, h, payload) {
                return false;
            }
            let st = &mut self.peers[p as usize];
            st.next_msg = next.wrapping_add(1);
            // Nothing held ahead (the usual case): no lookup.
            if !st.early.is_empty() {
                self.drain_early(p);
            }
            return true;
        }
        if (ahead as i32) < 0 {
            // A later segment of a message already started.
            if pkt == Pkt::Msg {
                if let Some(&slot) = self.peers[p as usize].active.get(&h.msg_id) {
                    self.msg_segment(slot, h, payload, 0);
                    return true;
                }
            }
            self.bad_packets += 1;
            return true;
        }
        if ahead >= REORDER_WINDOW || self.held_bytes + PROTO_HDR + payload.len() > RX_BUFFER_CAP {
            return false;
        }
        self.hold_early(p, h, payload);
        true
    }

    fn hold_early(&mut self, p: PeerId, h: &ProtoHdr, payload: &[u8]) {
        let mut v = Vec::with_capacity(PROTO_HDR + payload.len());
        let mut hb = [0u8; PROTO_HDR];
        h.encode(&mut hb);
        v.extend_from_slice(&hb);
        v.extend_from_slice(payload);
        self.held_bytes += v.capacity();
        self.peers[p as usize].early.entry(h.msg_id).or_default().push(v);
    }

    fn drain_early(&mut self, p: PeerId) {
        loop {
            let st = &mut self.peers[p as usize];
            let next = st.next_msg;
            let Some(list) = st.early.remove(&next) else { return };
            let mut started = false;
            let mut rest = Vec::new();
            for v in list {
                self.held_bytes -= v.capacity();
                let Some((pkt, h)) = ProtoHdr::decode(&v) else { continue };
                let payload = &v[PROTO_HDR..];
                if !started {
                    if self.start_msg(p, pkt, &h, payload) {
                        started = true;
                    } else {
                        rest.push(v);
                    }
                    continue;
                }
                if let Some(&slot) = self.peers[p as usize].active.get(&h.msg_id) {
                    self.msg_segment(slot, &h, payload, 0);
                }
            }
            if !started {
                // No room to start it yet: keep waiting.
                for v in &rest {
                    self.held_bytes += v.capacity();
                }
                self.peers[p as usize].early.insert(next, rest);
                if !self.stalled.contains(&p) {
                    self.stalled.push(p);
                }
                return;
            }
            let st = &mut self.peers[p as usize];
            st.next_msg = next.wrapping_add(1);
        }
    }

    /// The first packet of a message (or an atomic) in its turn. False:
    /// no room to take it now.
    fn start_msg(&mut self, p: PeerId, pkt: Pkt, h: &ProtoHdr, payload: &[u8]) -> bool {
        if pkt == Pkt::Atomic {
            self.on_atomic(p, h, payload);
            return true;
        }
        let total = h.total as usize;
        let long = pkt == Pkt::Rts;
        if !long && (total > MEDIUM_CAP || (h.offset as usize).saturating_add(payload.len()) > total) {
            self.bad_packets += 1;
            return true;
        }
        if self.rx.is_full() {
            return false;
        }
        let tagged = h.flags & F_TAGGED != 0;
        let src = self.src_of(p);
        let tag = if tagged { h.tag } else { 0 };
        let whole = !long && h.offset == 0 && payload.len() == total;
        let matched = self.matcher.match_arrival(tagged, src, tag, total);
        if whole {
            if let Some(m) = &matched {
                // All of it is here and its receive is known: into place and
                // completed at once, never an entry of `rx`.
                let (iov, niov, multi) = Self::matched_buffers(m);
                // SAFETY: the receive's buffers are writable until it completes.
                unsafe { scatter(&iov[..niov], m.cap, 0, payload) };
                let data = if h.flags & F_CQ_DATA != 0 { h.data } else { 0 };
                let (ctx, cap, flags, buf) = (m.ctx, m.cap, m.flags, m.buf);
                self.finish_rx(RxDone { peer: p, hflags: h.flags, send_op: h.op_id, tagged, data, tag, src, total, ctx, cap, flags, buf, multi });
                return true;
            }
        }
        let mut msg = RxMsg {
            peer: p,
            msg_id: h.msg_id,
            src,
            tagged,
            tag,
            data: if h.flags & F_CQ_DATA != 0 { h.data } else { 0 },
            hflags: h.flags,
            send_op: h.op_id,
            total,
            long,
            got: 0,
            want: if long { 0 } else { total },
            state: RxState::Discarding,
            orphan: false,
            tracked: !long && payload.len() < total,
            remote: [Iov::default(); IOV_MAX],
            nremote: 0,
        };
        if long {
            (msg.remote, msg.nremote) = decode_remote(payload, total);
        }
        let msg_tracked = msg.tracked;
        match matched {
            Some(m) => {
                let st = Self::matched_state(&m);
                let Some(slot) = self.rx.insert(RxMsg { state: st, ..msg }) else { return false };
                if long {
                    let cap = m.cap;
                    let want = total.min(cap);
                    let mm = self.rx.get_mut(slot).expect("slot");
                    mm.want = want;
                    self.grant(p, h.op_id, slot, want);
                } else {
                    if msg_tracked {
                        self.peers[p as usize].active.insert(h.msg_id, slot);
                    }
                    self.msg_segment(slot, h, payload, 0);
                }
                self.rx_maybe_done(slot);
                true
            }
            None => {
                if !self.matcher.unexpected_room() || self.held_bytes + total > RX_BUFFER_CAP {
                    return false;
                }
                let buf = if long { Vec::new() } else { vec![0u8; total] };
                self.held_bytes += buf.capacity();
                let (tag, data, hflags) = (msg.tag, msg.data, msg.hflags);
                let Some(slot) = self.rx.insert(RxMsg { state: RxState::Unexpected(buf), ..msg }) else { return false };
                if src == FI_ADDR_NOTAVAIL {
                    self.unknown_sources += 1;
                }
                let mut u = Unexp::new(tagged, src, tag, total, slot);
                u.data = data;
                u.flags = if hflags & F_CQ_DATA != 0 { FI_REMOTE_CQ_DATA } else { 0 };
                if self.matcher.push_unexpected(u).is_err() {
                    if let Some(RxMsg { state: RxState::Unexpected(b), .. }) = self.rx.remove(slot) {
                        self.held_bytes -= b.capacity();
                    }
                    return false;
                }
                if !long {
                    if msg_tracked {
                        self.peers[p as usize].active.insert(h.msg_id, slot);
                    }
                    self.msg_segment(slot, h, payload, 0);
                }
                true
            }
        }
    }

    /// A segment of a medium message; `placed`: its payload's length when
    /// the device already wrote it into the matched receive.
    fn msg_segment(&mut self, slot: u32, h: &ProtoHdr, payload: &[u8], placed: usize) {
        let Some(m) = self.rx.get_mut(slot) else { return };
        let off = h.offset as usize;
        let len = if placed > 0 { placed } else { payload.len() };
        if off.saturating_add(len) > m.total || (placed > 0 && !matches!(m.state, RxState::Matched { cap, .. } if off + len <= cap)) {
            self.bad_packets += 1;
            return;
        }
        m.got += len;
        if placed > 0 {
            self.placed_segments += 1;
            self.rx_maybe_done(slot);
            return;
        }
        match &mut m.state {
            RxState::Unexpected(buf) => {
                rfabric_core::copy::copy_slice(&mut buf[off..off + payload.len()], payload);
                return;
            }
            RxState::Matched { iov, niov, cap, .. } => {
                // SAFETY: the receive's buffers are writable until it completes.
                unsafe { scatter(&iov[..*niov], *cap, off, payload) };
            }
            RxState::Discarding => {}
        }
        self.rx_maybe_done(slot);
    }

    /// A data packet's receive, if the packet is one it expects: of a long
    /// message from `p`, within what its clear-to-send granted.
    fn data_target<'a>(rx: &'a Slab<RxMsg>, p: PeerId, h: &ProtoHdr, len: usize) -> Option<&'a RxMsg> {
        let m = rx.get(h.aux)?;
        (m.long && m.peer == p && (h.offset as usize).saturating_add(len) <= m.want).then_some(m)
    }

    /// Where the payload of the data packet with header `head` from `p`
    /// goes, when its receive is matched and takes all of it (the device
    /// then reads the payload there: see `Device::recv_placing`).
    fn placement<'a>(rx: &'a Slab<RxMsg>, peers: &[PeerSt], p: PeerId, head: &[u8], len: usize) -> Option<Placement<'a>> {
        let (pkt, h) = ProtoHdr::decode(head)?;
        let m = match pkt {
            Pkt::Data => Self::data_target(rx, p, &h, len)?,
            Pkt::Msg if h.offset > 0 => {
                // A peer the engine has not heard from yet has sent nothing
                // before.
                let st = peers.get(p as usize);
                match st.and_then(|st| st.active.get(&h.msg_id)) {
                    Some(&slot) => rx.get(slot).filter(|m| m.peer == p && (h.offset as usize).saturating_add(len) <= m.total)?,
                    // Its first packet has not been taken yet: once it is,
                    // this one may have a place.
                    None if (h.msg_id.wrapping_sub(st.map_or(0, |st| st.next_msg)) as i32) >= 0 => return Some(Placement::later()),
                    None => return None,
                }
            }
            _ => return None,
        };
        let RxState::Matched { iov, niov, cap, .. } = m.state else { return None };
        let off = h.offset as usize;
        if off + len > cap {
            return None;
        }
        // SAFETY: a matched receive's buffers are writable until it
        // completes, and it completes only in this engine's handling of
        // packets, which starts after the device's `recv` (the placement's
        // borrow of the receive table) ends.
        Some(unsafe { Placement::new(&iov[..niov], off, len) })
    }

    /// A data packet of a long message; `placed`: its payload's length when
    /// the device already wrote it in place (`payload` is then empty).
    fn on_data(&mut self, p: PeerId, h: &ProtoHdr, payload: &[u8], placed: usize) {
        let slot = h.aux;
        let len = if placed > 0 { placed } else { payload.len() };
        if Self::data_target(&self.rx, p, h, len).is_none() {
            self.bad_packets += 1;
            return;
        }
        let m = self.rx.get_mut(slot).expect("data_target");
        m.got += len;
        if let (RxState::Matched { iov, niov, cap, .. }, 0) = (&m.state, placed) {
            // SAFETY: the receive's buffers are writable until it completes.
            unsafe { scatter(&iov[..*niov], *cap, h.offset as usize, payload) };
        }
        self.rx_maybe_done(slot);
    }

    fn tx_by_id(&mut self, p: PeerId, id: u32) -> Option<u32> {
        let slot = id & ((1 << SLOT_BITS) - 1);
        let gen = id >> SLOT_BITS;
        let o = self.tx.get_mut(slot)?;
        (o.gen == gen && o.peer == p).then_some(slot)
    }

    fn on_cts(&mut self, p: PeerId, h: &ProtoHdr) {
        let Some(slot) = self.tx_by_id(p, h.op_id) else {
            self.bad_packets += 1;
            return;
        };
        let o = self.tx.get_mut(slot).expect("slot");
        if !o.wait_cts || o.kind != TxKind::Long {
            self.bad_packets += 1;
            return;
        }
        o.wait_cts = false;
        o.end = (h.total as usize).min(o.len);
        o.next = 0;
        o.hdr.pkt = Pkt::Data as u8;
        o.hdr.aux = h.aux;
        if o.end == 0 {
            self.maybe_done(slot);
            return;
        }
        if !self.pump(slot) {
            self.pending.push_back(slot);
        } else {
            self.maybe_done(slot);
        }
    }

    fn on_resp(&mut self, p: PeerId, h: &ProtoHdr, payload: &[u8], pkt: Pkt) {
        let Some(slot) = self.tx_by_id(p, h.op_id) else {
            self.bad_packets += 1;
            return;
        };
        let o = self.tx.get_mut(slot).expect("slot");
        match pkt {
            Pkt::Receipt => o.wait_receipt = false,
            Pkt::WriteResp if o.kind == TxKind::Write => {
                o.wait_resp = false;
                if h.aux != 0 {
                    o.err = h.aux as i32;
                }
            }
            Pkt::ReadResp if o.kind == TxKind::Read => {
                if h.aux != 0 {
                    o.err = h.aux as i32;
                    o.wait_resp = false;
                } else {
                    let off = h.offset as usize;
                    if off.saturating_add(payload.len()) > o.len {
                        self.bad_packets += 1;
                        return;
                    }
                    // SAFETY: the read's local buffers are writable until it completes.
                    unsafe { scatter(&o.iov[..o.niov], o.len, off, payload) };
                    o.got += payload.len();
                    if o.got >= o.len {
                        o.wait_resp = false;
                    }
                }
            }
            Pkt::AtomicResp if o.kind == TxKind::Atomic => {
                o.wait_resp = false;
                if h.aux != 0 {
                    o.err = h.aux as i32;
                } else if o.nres > 0 {
                    let cap = iov_len(&o.res[..o.nres]);
                    // SAFETY: result buffers are writable until the atomic completes.
                    unsafe { scatter(&o.res[..o.nres], cap, 0, payload) };
                }
            }
            _ => {
                self.bad_packets += 1;
                return;
            }
        }
        self.maybe_done(slot);
    }

    /// The address in this process of `len` bytes at `addr` under `key`.
    fn target(&self, key: u64, addr: u64, len: usize, access: u64) -> std::result::Result<usize, i32> {
        let reg = self.mr.lock();
        let off = reg.verify(key, addr, len, access).map_err(|e| e.0)?;
        let r = reg.get(key).ok_or(FI_EKEYREJECTED)?;
        Ok(r.base + off)
    }

    fn on_write(&mut self, p: PeerId, h: &ProtoHdr, payload: &[u8]) {
        let total = h.total as usize;
        let resp = |this: &mut Self, err: i32| {
            let r = ProtoHdr { pkt: Pkt::WriteResp as u8, op_id: h.op_id, aux: err as u32, ..ProtoHdr::default() };
            this.send_ctl(p, &r, &[]);
        };
        if (h.offset as usize).saturating_add(payload.len()) > total {
            self.bad_packets += 1;
            return;
        }
        match self.target(h.tag, h.addr, payload.len(), FI_REMOTE_WRITE) {
            Ok(dst) => {
                // SAFETY: the registration covers [dst, dst + len) (checked
                // by `verify`), memory the application registered for
                // remote writes.
                unsafe { rfabric_core::copy::copy_bytes(payload.as_ptr(), dst as *mut u8, payload.len()) };
            }
            Err(e) => {
                resp(self, e);
                return;
            }
        }
        let done = if payload.len() >= total {
            true
        } else {
            let st = self.peer_st(p);
            let e = st.writes.entry(h.op_id).or_insert((0, total));
            e.0 += payload.len();
            if e.0 >= e.1 {
                st.writes.remove(&h.op_id);
                true
            } else {
                false
            }
        };
        if done {
            resp(self, 0);
            if let Some(k) = &self.out.remote_write {
                k.c.add(1);
            }
            if h.flags & F_CQ_DATA != 0 {
                let src = self.src_of(p);
                if let Some(cq) = &self.out.rx_cq {
                    cq.push(Completion { flags: FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA, len: total, data: h.data, src_addr: src, ..Completion::default() });
                }
            }
        }
    }

    fn on_read_req(&mut self, p: PeerId, h: &ProtoHdr) -> bool {
        let total = h.total as usize;
        match self.target(h.tag, h.addr, total, FI_REMOTE_READ) {
            Ok(src) => {
                let mut o = Self::blank_op(TxKind::ReadResp, p, 0);
                o.iov[0] = Iov { base: src, len: total };
                o.niov = 1;
                o.len = total;
                o.end = total;
                o.hdr = ProtoHdr { pkt: Pkt::ReadResp as u8, ..ProtoHdr::default() };
                o.hdr.op_id = h.op_id;
                let Ok(slot) = self.new_op(o) else { return false };
                if self.pump(slot) {
                    self.tx.remove(slot);
                } else {
                    self.pending.push_back(slot);
                }
                if let Some(k) = &self.out.remote_read {
                    k.c.add(1);
                }
                true
            }
            Err(e) => {
                let r = ProtoHdr { pkt: Pkt::ReadResp as u8, op_id: h.op_id, aux: e as u32, ..ProtoHdr::default() };
                self.send_ctl(p, &r, &[]);
                true
            }
        }
    }

    fn on_atomic(&mut self, p: PeerId, h: &ProtoHdr, payload: &[u8]) {
        let kind = match h.akind {
            0 => AtomicKind::Write,
            1 => AtomicKind::Fetch,
            2 => AtomicKind::Compare,
            _ => {
                self.bad_packets += 1;
                return;
            }
        };
        let (op, dt, count) = (h.aop as u32, h.dtype as u32, h.total as usize);
        let r = (|| -> std::result::Result<Vec<u8>, i32> {
            let size = atomic::type_size(dt).ok_or(FI_EOPNOTSUPP)?;
            let bytes = count.checked_mul(size).ok_or(FI_EINVAL)?;
            let need = if kind == AtomicKind::Compare { 2 * bytes } else { bytes };
            if payload.len() < need && !(op == FI_ATOMIC_READ && kind == AtomicKind::Fetch) {
                return Err(FI_EINVAL);
            }
            let access = match (kind, op) {
                (AtomicKind::Fetch, FI_ATOMIC_READ) => FI_REMOTE_READ,
                (AtomicKind::Write, _) => FI_REMOTE_WRITE,
                _ => FI_REMOTE_READ | FI_REMOTE_WRITE,
            };
            let dst = self.target(h.tag, h.addr, bytes, access)?;
            // SAFETY: [dst, dst + bytes) is registered memory of this
            // process (checked by `verify`); atomics run under the endpoint's
            // lock, one at a time.
            let target = unsafe { std::slice::from_raw_parts_mut(dst as *mut u8, bytes) };
            let operand = &payload[..bytes.min(payload.len())];
            let compare = if kind == AtomicKind::Compare { &payload[bytes..2 * bytes] } else { &[][..] };
            let mut result = if kind == AtomicKind::Write { Vec::new() } else { vec![0u8; bytes] };
            let res = if kind == AtomicKind::Write { None } else { Some(&mut result[..]) };
            atomic::apply(kind, op, dt, count, target, operand, compare, res).map_err(|e| e.0)?;
            Ok(result)
        })();
        let (err, result) = match r {
            Ok(v) => (0, v),
            Err(e) => (e, Vec::new()),
        };
        let resp = ProtoHdr { pkt: Pkt::AtomicResp as u8, op_id: h.op_id, aux: err as u32, ..ProtoHdr::default() };
        self.send_ctl(p, &resp, &[&result]);
        if err == 0 {
            let k = if kind == AtomicKind::Write { &self.out.remote_write } else { &self.out.remote_read };
            if let Some(k) = k {
                k.c.add(1);
            }
        }
    }

    // ---------- RMA and atomics, initiator side ----------

    /// `fi_write*` / `fi_read*`.
    ///
    /// # Safety
    /// The local buffers stay valid until the operation completes.
    pub unsafe fn rma(&mut self, peer: PeerId, op: &RmaOp<'_>, write: bool) -> Result<()> {
        // SAFETY: forwarded contract.
        let r = unsafe { self.rma_op(peer, op, write) };
        self.dev.push_out();
        r
    }

    unsafe fn rma_op(&mut self, peer: PeerId, op: &RmaOp<'_>, write: bool) -> Result<()> {
        if op.rma.len() != 1 {
            return Err(EINVAL);
        }
        let r = op.rma[0];
        let len = iov_len(op.iov);
        if len != r.len {
            return Err(EINVAL);
        }
        let (iov, niov) = copy_iov(op.iov)?;
        let mut o = Self::blank_op(if write { TxKind::Write } else { TxKind::Read }, peer, op.context);
        o.cflags = FI_RMA | if write { FI_WRITE } else { FI_READ };
        o.comp = !op.no_completion && (!self.out.tx_selective || op.flags & FI_COMPLETION != 0);
        o.cntr = if write { Counter::Write } else { Counter::Read };
        o.len = len;
        o.wait_resp = true;
        let inject = write && (op.no_completion || op.flags & FI_INJECT != 0);
        if inject && len > crate::provider::INJECT_SIZE {
            return Err(Error(FI_EMSGSIZE));
        }
        if inject {
            let mut buf = self.buffer(len);
            let mut parts: [&[u8]; IOV_MAX] = [&[]; IOV_MAX];
            // SAFETY: readable during this call (caller).
            let n = unsafe { gather(&iov[..niov], 0, len, &mut parts) };
            for p in &parts[..n] {
                buf.extend_from_slice(p);
            }
            o.iov[0] = Iov { base: buf.as_ptr() as usize, len };
            o.niov = 1;
            o.owned = buf;
        } else {
            o.iov = iov;
            o.niov = niov;
        }
        let flags = if op.flags & FI_REMOTE_CQ_DATA != 0 { F_CQ_DATA } else { 0 };
        o.hdr = ProtoHdr {
            pkt: if write { Pkt::Write } else { Pkt::ReadReq } as u8,
            flags,
            tag: r.key,
            addr: r.addr,
            data: op.data,
            total: len as u64,
            ..ProtoHdr::default()
        };
        o.end = if write { len } else { 0 };
        let zero_write = write && len == 0;
        let slot = self.new_op(o)?;
        if zero_write {
            // One empty write packet still asks for the answer.
            self.send_request(slot);
            return Ok(());
        }
        self.start(slot);
        Ok(())
    }

    /// `fi_atomic*`, `fi_fetch_atomic*`, `fi_compare_atomic*`.
    ///
    /// # Safety
    /// Operand buffers are read here; result buffers stay writable until
    /// the operation completes.
    pub unsafe fn atomic(&mut self, peer: PeerId, op: &AtomicOp<'_>) -> Result<()> {
        // SAFETY: forwarded contract.
        let r = unsafe { self.atomic_op(peer, op) };
        self.dev.push_out();
        r
    }

    unsafe fn atomic_op(&mut self, peer: PeerId, op: &AtomicOp<'_>) -> Result<()> {
        if op.rma.len() != 1 {
            return Err(EINVAL);
        }
        let size = atomic::type_size(op.datatype).ok_or(Error(FI_EOPNOTSUPP))?;
        if !atomic::supported(op.kind, op.op, op.datatype) {
            return Err(Error(FI_EOPNOTSUPP));
        }
        let count = op.rma[0].len;
        let bytes = count.checked_mul(size).ok_or(EINVAL)?;
        let need = if op.kind == AtomicKind::Compare { 2 * bytes } else { bytes };
        if bytes > ATOMIC_MAX_BYTES || need > self.max_payload() {
            return Err(EINVAL);
        }
        let mut owned = self.buffer(need);
        let reads_only = op.kind == AtomicKind::Fetch && op.op == FI_ATOMIC_READ;
        for (src, want) in [(op.iov, bytes), (op.compare, if op.kind == AtomicKind::Compare { bytes } else { 0 })] {
            if want == 0 {
                continue;
            }
            let have = iov_len(src);
            if have < want && !reads_only {
                return Err(EINVAL);
            }
            let mut parts: [&[u8]; IOV_MAX] = [&[]; IOV_MAX];
            if src.len() > IOV_MAX {
                return Err(EINVAL);
            }
            // SAFETY: operand buffers are readable during this call (caller).
            let n = unsafe { gather(src, 0, want.min(have), &mut parts) };
            for p in &parts[..n] {
                owned.extend_from_slice(p);
            }
        }
        let mut o = Self::blank_op(TxKind::Atomic, peer, op.context);
        o.cflags = FI_ATOMIC | if op.kind == AtomicKind::Write { FI_WRITE } else { FI_READ };
        o.comp = !op.no_completion && (!self.out.tx_selective || op.flags & FI_COMPLETION != 0);
        o.cntr = if op.kind == AtomicKind::Write { Counter::Write } else { Counter::Read };
        let (res, nres) = copy_iov(op.result)?;
        o.res = res;
        o.nres = nres;
        o.owned = owned;
        o.wait_resp = true;
        let msg_id = self.take_msg_id(peer);
        o.hdr = ProtoHdr {
            pkt: Pkt::Atomic as u8,
            msg_id,
            aop: op.op as u8,
            dtype: op.datatype as u8,
            akind: match op.kind {
                AtomicKind::Write => 0,
                AtomicKind::Fetch => 1,
                AtomicKind::Compare => 2,
            },
            tag: op.rma[0].key,
            addr: op.rma[0].addr,
            total: count as u64,
            ..ProtoHdr::default()
        };
        let slot = match self.new_op(o) {
            Ok(s) => s,
            Err(e) => {
                self.give_back_msg_id(peer);
                return Err(e);
            }
        };
        self.start(slot);
        Ok(())
    }

    pub fn min_multi_recv(&self) -> usize {
        self.min_multi_recv
    }

    /// The engine's state, for `FI_LOG_LEVEL=debug`.
    pub fn describe(&self) -> String {
        let mut out = format!(
            "tx ops {} pending {} ctl_backlog {} rx slots {} posted {}/{} unexpected {}/{} held {} stalled {:?}",
            self.tx.len(),
            self.pending.len(),
            self.ctl_backlog.len(),
            self.rx.len(),
            self.matcher.posted_len(false),
            self.matcher.posted_len(true),
            self.matcher.unexpected_len(false),
            self.matcher.unexpected_len(true),
            self.held_bytes,
            self.stalled
        );
        for (i, st) in self.peers.iter().enumerate() {
            out += &format!("\n  peer {i}: tx_msg {} next_msg {} early {:?} active {}", st.tx_msg, st.next_msg, st.early.keys().collect::<Vec<_>>(), st.active.len());
        }
        out
    }

    /// Operations still in flight (sends, RMA, responses).
    pub fn busy(&self) -> bool {
        self.tx.len() > 0 || !self.ctl_backlog.is_empty() || self.dev.unacked()
    }
}

#[cfg(test)]
mod slab_tests {
    use super::Slab;

    #[test]
    fn a_freed_slot_is_handed_out_once_and_never_twice() {
        let mut s: Slab<Vec<u8>> = Slab::new(3);
        let a = s.insert(vec![1]).unwrap();
        let b = s.insert(vec![2]).unwrap();
        s.free(a);
        // Freeing again (or an empty or unknown slot) changes nothing: a
        // slot listed twice would go to two operations at once.
        s.free(a);
        s.free(99);
        assert_eq!(s.len(), 1);
        let c = s.insert(vec![3]).unwrap();
        assert_eq!(c, a, "the freed slot is reused");
        let d = s.insert(vec![4]).unwrap();
        assert_ne!(d, c);
        assert!(s.is_full());
        assert_eq!(s.insert(vec![5]), None);
        assert_eq!(s.get(b).map(|v| v[0]), Some(2));
        assert_eq!(s.get(c).map(|v| v[0]), Some(3));
        assert_eq!(s.remove(b), Some(vec![2]));
        assert_eq!(s.remove(b), None);
        assert_eq!(s.len(), 2);
    }
}
