//! The transport endpoint: one owned segment (its ring is our receive
//! queue), a peer table, and fixed tables of in-flight large transfers.
//!
//! Protocol (one 64-byte line per message header, after the cell's
//! sequence word):
//! - `EAGER`: payload in the receiver's ring: at most 24 bytes in the
//!   header line, up to one cell, or several consecutive cells (up to the
//!   eager limit: 8 KiB while a rendezvous with the peer is in flight, one
//!   cell otherwise, or `FI_SHM_EAGER_MAX`; see DESIGN.md for why).
//! - `RTS`: large message. Carries the sender's address (inline), the total
//!   length, a message id, the sender's buffer address (for CMA) and/or a
//!   bounce slot in the sender's segment. The receiver, once it has a
//!   buffer, pulls the data and answers `FIN`.
//! - `NACK`: the receiver could not use CMA; the sender switches the
//!   message to a bounce slot and sends `BOUNCE` naming it.
//! - `FIN`: the receiver is done (or gave up: error flag); the sender
//!   completes the send.
//!
//! The fast path (eager send, poll, inline receive) performs no
//! allocation, takes no lock and makes no system call.
//!
//! This module holds the endpoint's state (its segment and ring, the peer
//! table, the send and receive tables of rendezvous transfers), its
//! creation, attaching peers and posting entries into their rings. The rest
//! are methods of [`Endpoint`] too, by what they do:
//! - `wire`: the op codes and the header words of a ring entry;
//! - `eager`: eager messages, copied into the peer's ring and out of ours;
//! - `rendezvous`: [`Endpoint::send`], `RTS`, CMA and bounce transfers, `FIN`;
//! - `shared_copy`: large CMA receives copied by both processes;
//! - `poll`: our ring read and validated, transfers and liveness checks run.

use crate::cma::{self, CmaFailure, CmaMode};
use crate::peer::{Address, Peer, PeerId, PeerTable, ADDR_LEN};
use crate::ring::{DeadClaim, Ring, CELL_HDR};
use crate::segment::{Geometry, Segment, CHUNK_HDR};
use crate::{err_connreset, err_io};
use rfabric_core::error::{Error, Result, EAGAIN, EINVAL};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, Ordering};

mod eager;
mod poll;
mod rendezvous;
mod shared_copy;
mod wire;

pub use eager::{default_eager_limits, eager_capacity, eager_cells, max_eager_cells, DEFAULT_EAGER_IDLE_MAX, DEFAULT_EAGER_MAX, SLOW_CMA_EAGER_MAX};
pub use shared_copy::{shared_chunk, MAX_SHARED_CHUNKS, SHARED_COPY_MIN, SHARED_COPY_QUEUED_MIN};
#[cfg(test)]
pub(crate) use shared_copy::{claim_parts, claim_word, claimed_count, TestHooks};
use shared_copy::Shared;
pub use wire::{payload_off, tiny_max, MsgHeader, Wire, CONT_OFF, OP_BOUNCE, OP_CONT, OP_EAGER, OP_FIN, OP_HELP, OP_NACK, OP_RTS, PF_NO_DATA, PF_NO_TAG, TINY_MAX};
use wire::{MODE_BOUNCE, MODE_CMA, PF_ERR};

/// How the payload of an incoming message is obtained.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// In our ring cell; call [`Endpoint::recv_inline`] or [`Endpoint::discard`].
    Inline { pos: u64 },
    /// Rendezvous: call [`Endpoint::recv_rndv`] or [`Endpoint::discard`].
    Rndv { peer: PeerId, msg_id: u64, addr: u64, mode: u8, slot: u32 },
}

/// A message that arrived and waits for a destination buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Incoming {
    pub hdr: MsgHeader,
    /// Sender's [`Address::key`].
    pub src_key: u64,
    pub len: u64,
    pub kind: Kind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    Msg(Incoming),
    SendDone { ctx: u64 },
    SendError { ctx: u64, err: Error },
    RecvDone { ctx: u64, len: u64 },
    RecvError { ctx: u64, err: Error },
    /// A malformed entry was dropped.
    Error { src_key: u64, err: Error },
}

/// What [`Endpoint::send`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendStatus {
    /// Delivered into the peer's ring; no completion event follows.
    Done,
    /// A SendDone/SendError event with the caller's `ctx` follows.
    Pending,
}

#[derive(Clone, Copy, Debug)]
pub struct Config {
    pub geometry: Geometry,
    pub max_sends: usize,
    pub max_recvs: usize,
    pub cma: CmaMode,
    /// Share large CMA copies with the sender (`FI_SHM_SHARED_COPY=0`
    /// turns it off; see `settings`).
    pub shared_copy: bool,
    /// What one `process_vm_readv` of a page costs here, in ns, or `None`:
    /// under `CmaMode::Auto` it picks the default eager limits
    /// ([`default_eager_limits`]) and whether rendezvous sends take bounce
    /// slots ([`cma::is_slow`]). [`cma::page_read_ns`] measures it; tests
    /// pin it.
    pub page_read_ns: fn() -> Option<u64>,
}

impl Default for Config {
    fn default() -> Self {
        let shared_copy = crate::settings::shared_copy();
        Config { geometry: Geometry::default(), max_sends: 64, max_recvs: 64, cma: CmaMode::from_env(), shared_copy, page_read_ns: cma::page_read_ns }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum SendState {
    Idle,
    /// Needs a bounce slot; RTS (or BOUNCE after a NACK) not yet sent.
    WaitSlot { after_nack: bool },
    Active,
}

#[derive(Clone, Copy)]
struct SendOp {
    state: SendState,
    gen: u64,
    peer: PeerId,
    buf: *const u8,
    len: u64,
    hdr: MsgHeader,
    ctx: u64,
    bounce: bool,
    slot: u32,
    pushed: u64,
    next_chunk: u64,
}

#[derive(Clone, Copy)]
struct RecvOp {
    active: bool,
    peer: PeerId,
    msg_id: u64,
    dst: *mut u8,
    dst_len: u64,
    len: u64,
    got: u64,
    next_chunk: u64,
    slot: Option<u32>,
    ctx: u64,
    shared: Option<Shared>,
}

impl RecvOp {
    /// A rendezvous receive of `len` bytes into `dst` that has just begun:
    /// by a NACK (`slot` and `shared` both `None`), into a bounce slot, or
    /// by a shared copy.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn started(peer: PeerId, msg_id: u64, dst: *mut u8, dst_len: usize, len: u64, ctx: u64, slot: Option<u32>, shared: Option<Shared>) -> RecvOp {
        RecvOp { active: true, peer, msg_id, dst, dst_len: dst_len as u64, len, got: 0, next_chunk: 0, slot, ctx, shared }
    }
}

pub struct Endpoint {
    seg: Segment,
    ring: Ring,
    head: u64,
    /// Cells in `rel..head` are consumed but not yet handed back.
    rel: u64,
    rel_batch: u64,
    /// Position and cell count of the eager message handed out by `poll`
    /// and not yet received or discarded.
    held: Option<(u64, u64)>,
    /// Cell count of the entry `parse` accepted last.
    parsed_cells: u64,
    /// Payload lines after the header line of the last eager message when
    /// it had one or two (0 otherwise): what an empty poll prefetches.
    spin_lines: u8,
    /// Largest message we send eagerly while rendezvous operations with
    /// the peer are in flight, and while none are (both capped by each
    /// peer's ring, and at least one cell).
    eager_max: usize,
    eager_idle_max: usize,
    /// Rendezvous sends through bounce slots, not CMA, although the
    /// mode is automatic: CMA measured slow here (`cma::is_slow`).
    bounce_first: bool,
    /// Send-table entries not idle / receive-table entries active; when
    /// both are 0 `progress` has nothing to scan.
    sends_busy: u32,
    recvs_busy: u32,
    addr: Address,
    key: u64,
    peers: PeerTable,
    sends: Box<[SendOp]>,
    recvs: Box<[RecvOp]>,
    slot_used: u64,
    ctl: VecDeque<(PeerId, Wire)>,
    events: VecDeque<Event>,
    cma: CmaMode,
    shared_copy: bool,
    /// Shared-copy descriptors in use (bit i: `Segment::help_desc(i)`) and
    /// the last tag handed out.
    help_used: u32,
    help_tag: u32,
    /// Chunks this endpoint copied into receivers as a sender.
    helped_chunks: u64,
    #[cfg(test)]
    pub(crate) hooks: TestHooks,
    polls: u32,
    /// Empty polls, and the head seen at the last look for a dead claim
    /// with the time of that look (`skip_dead_claim`).
    empty_polls: u32,
    stuck: (u64, u64),
    last_check_ns: u64,
    /// Interval between liveness checks (`FI_SHM_PEER_CHECK_MS`), ns.
    check_ns: u64,
    /// Events dropped because the internal queue was full (should stay 0).
    pub dropped_events: u64,
}

// SAFETY: raw pointers in the op tables refer to caller buffers whose
// validity the unsafe send/recv contracts guarantee; the endpoint itself
// is used by one thread at a time (&mut self).
unsafe impl Send for Endpoint {}

static RECLAIM: std::sync::Once = std::sync::Once::new();

pub(crate) fn coarse_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: ts is a valid out-parameter.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// `FI_SHM_EAGER_MAX` (bytes, a size_t setting, see `settings`) replaces
/// both defaults with one fixed limit.
fn eager_max_from_env() -> Option<usize> {
    crate::settings::eager_max()
}

impl Endpoint {
    pub fn new(cfg: Config) -> Result<Endpoint> {
        // Only an automatic choice measures CMA: `FI_SHM_CMA` set either
        // way keeps its word (and 0 keeps the process from calling it).
        let slow_cma = cfg.cma == CmaMode::Auto && cma::is_slow((cfg.page_read_ns)());
        let (eager_max, eager_idle_max) = match eager_max_from_env() {
            Some(fixed) => (fixed, fixed),
            None => default_eager_limits(slow_cma),
        };
        RECLAIM.call_once(|| {
            crate::segment::reclaim_stale();
        });
        if cfg.max_sends == 0 || cfg.max_sends > 0xffff || cfg.max_recvs == 0 || cfg.geometry.nslots > 64 {
            return Err(EINVAL);
        }
        let seg = Segment::create(cfg.geometry)?;
        let g = seg.geometry();
        // SAFETY: the ring region was initialised by Segment::create.
        let ring = unsafe { Ring::from_raw(seg.ring_base(), g.ncells, g.cell_size as usize) };
        let h = seg.header();
        let addr = Address { pid: h.pid, nonce: h.nonce, start_time: h.start_time };
        let idle_send = SendOp {
            state: SendState::Idle,
            gen: 0,
            peer: 0,
            buf: std::ptr::null(),
            len: 0,
            hdr: MsgHeader::default(),
            ctx: 0,
            bounce: false,
            slot: 0,
            pushed: 0,
            next_chunk: 0,
        };
        let idle_recv = RecvOp {
            active: false,
            peer: 0,
            msg_id: 0,
            dst: std::ptr::null_mut(),
            dst_len: 0,
            len: 0,
            got: 0,
            next_chunk: 0,
            slot: None,
            ctx: 0,
            shared: None,
        };
        let cap = cfg.max_sends + cfg.max_recvs + 16;
        Ok(Endpoint {
            ring,
            head: 0,
            rel: 0,
            rel_batch: (g.ncells as u64 / 8).clamp(1, 16),
            held: None,
            parsed_cells: 1,
            spin_lines: 0,
            eager_max,
            eager_idle_max,
            bounce_first: slow_cma,
            sends_busy: 0,
            recvs_busy: 0,
            key: addr.key(),
            addr,
            seg,
            peers: PeerTable::default(),
            sends: vec![idle_send; cfg.max_sends].into_boxed_slice(),
            recvs: vec![idle_recv; cfg.max_recvs].into_boxed_slice(),
            slot_used: 0,
            ctl: VecDeque::with_capacity(cap),
            events: VecDeque::with_capacity(cap),
            cma: cfg.cma,
            shared_copy: cfg.shared_copy,
            help_used: 0,
            help_tag: 0,
            helped_chunks: 0,
            #[cfg(test)]
            hooks: TestHooks::default(),
            polls: 0,
            empty_polls: 0,
            stuck: (u64::MAX, 0),
            last_check_ns: coarse_ns(),
            check_ns: crate::settings::peer_check_ns(),
            dropped_events: 0,
        })
    }

    pub fn address(&self) -> Address {
        self.addr
    }
    /// Interval between liveness checks of peers with work in flight, in
    /// nanoseconds (`FI_SHM_PEER_CHECK_MS`; each check reads `/proc`).
    pub fn peer_check_ns(&self) -> u64 {
        self.check_ns
    }
    pub fn segment(&self) -> &Segment {
        &self.seg
    }
    /// Attaches to the endpoint at `addr` (slow path: maps its segment and
    /// probes CMA once).
    pub fn attach(&mut self, addr: &Address) -> Result<PeerId> {
        let id = self.peers.insert(addr)?;
        let cma = self.cma;
        let p = self.peers.get_mut(id).ok_or(EINVAL)?;
        if p.cma_ok.is_none() && cma != CmaMode::Off {
            let h = p.seg.header();
            let mut expect = [0u8; 16];
            // SAFETY: the header page is mapped; we copy 16 plain bytes.
            unsafe { std::ptr::copy_nonoverlapping(p.seg.base(), expect.as_mut_ptr(), 16) };
            p.cma_ok = Some(cma::probe(h.pid, h.probe_addr, &expect)?);
        }
        Ok(id)
    }

    fn push_event(&mut self, e: Event) {
        if self.events.len() < self.events.capacity() {
            self.events.push_back(e);
        } else {
            self.dropped_events += 1;
        }
    }

    /// Writes one entry into `peer`'s ring.
    fn post(&mut self, peer: PeerId, w: &Wire, payload: &[u8]) -> Result<()> {
        let p = self.peers.get_mut(peer).ok_or(EINVAL)?;
        if !p.alive {
            return Err(err_connreset());
        }
        if payload.len() > p.ring.inline_max() {
            return Err(EINVAL);
        }
        let pos = match p.ring.reserve() {
            Ok(pos) => pos,
            Err(e) => {
                let now = coarse_ns();
                if now.saturating_sub(self.last_check_ns) > self.check_ns {
                    self.last_check_ns = now;
                    if !p.check_alive() {
                        return Err(err_connreset());
                    }
                }
                return Err(e);
            }
        };
        let cell = p.ring.cell(pos);
        // SAFETY: the reserved cell is ours until publish; payload fits the
        // inline area (checked above). Payload lines first, then the
        // header and the sequence word in one burst (see post_eager).
        unsafe {
            std::ptr::copy_nonoverlapping(payload.as_ptr(), cell.add(CELL_HDR), payload.len());
            w.store(cell);
        }
        p.ring.publish(pos);
        Ok(())
    }

    /// Posts a control entry now, or queues it for the next poll.
    fn post_ctl(&mut self, peer: PeerId, w: Wire) {
        match self.post(peer, &w, &[]) {
            Err(e) if e == EAGAIN && self.ctl.len() < self.ctl.capacity() => self.ctl.push_back((peer, w)),
            _ => {}
        }
    }

    /// Drops an incoming message; a rendezvous sender gets an error completion.
    pub fn discard(&mut self, inc: &Incoming) {
        match inc.kind {
            Kind::Inline { pos } => {
                if self.held.map(|h| h.0) == Some(pos) {
                    self.release_held();
                }
            }
            Kind::Rndv { peer, msg_id, .. } => {
                let w = Wire { op: OP_FIN, pflags: PF_ERR, src_key: self.key, msg_id, ..Wire::default() };
                self.post_ctl(peer, w);
            }
        }
    }

    /// Number of operations still in flight (sends + receives).
    pub fn in_flight(&self) -> usize {
        self.sends.iter().filter(|s| s.state != SendState::Idle).count() + self.recvs.iter().filter(|r| r.active).count()
    }

    /// The address of attached peer `peer`.
    pub fn peer_address(&self, peer: PeerId) -> Option<Address> {
        self.peers.get(peer).map(|p| p.addr)
    }

    /// The ring of attached peer `peer`, as its producers see it: the
    /// fuzzing harness (`crate::fuzzing`) writes raw entries through it.
    #[doc(hidden)]
    pub fn peer_ring(&self, peer: PeerId) -> Option<Ring> {
        self.peers.get(peer).map(|p| p.ring)
    }

    /// Test hook: writes a raw entry into our own ring as if a peer had.
    #[cfg(test)]
    pub(crate) fn inject_raw(&self, w: &Wire, payload: &[u8]) {
        let pos = self.ring.reserve().expect("ring space");
        let cell = self.ring.cell(pos);
        let off = if w.op == OP_EAGER { payload_off(w.len, w.pflags) } else { CELL_HDR };
        // SAFETY: reserved cell; payload cut to the space after `off`.
        unsafe {
            w.store(cell);
            std::ptr::copy_nonoverlapping(payload.as_ptr(), cell.add(off), payload.len().min(self.ring.cell_size() - off));
        }
        self.ring.publish(pos);
    }
}
