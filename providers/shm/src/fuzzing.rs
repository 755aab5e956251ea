//! Entry points that feed untrusted bytes to the shm provider's decoders,
//! for the cargo-fuzz targets in `fuzz/` and for the stable replay of their
//! committed corpora (`providers/shm/tests/fuzz_corpus.rs`). Not part of
//! the API; nothing outside the fuzz targets and that test calls it.
//!
//! Four entries, one per fuzz target:
//! - [`ring_ops`]: the MPSC ring of `ring.rs` on private memory: any
//!   sequence of claims, publications, consumptions and hostile stores to
//!   the tail and sequence words. Without hostile stores the ring must
//!   behave as a FIFO model says; with them it must stay bounded.
//! - [`ring_entries`]: raw entries (any header words, payloads,
//!   continuation cells) written into a live transport endpoint's ring as a
//!   hostile producer would, then polled through `Endpoint::poll` (`parse`),
//!   received inline or by rendezvous, or discarded; also hostile stores to
//!   the shared-copy descriptors and bounce chunks the endpoint reads. Eager
//!   (tiny, one cell, multi-cell), RTS, FIN, NACK, BOUNCE, HELP and CONT.
//! - [`protocol_messages`]: messages with any provider header flags, tag,
//!   immediate data and payload sent to an enabled shm endpoint (domain,
//!   CQ, AV, registered memory): the RMA/atomic request and reply headers,
//!   `FI_DELIVERY_COMPLETE` requests and acks, tagged/untagged messages and
//!   rendezvous sends, with the live tokens of the endpoint's own RMA
//!   operations and delivery-complete sends available to forge replies.
//! - [`addr_strings`]: `addr_from_str`, the AV's `straddr`, `insert`
//!   (`fi_av_insert` of an `FI_ADDR_STR` string), `lookup`, `remove`, and
//!   `fi_setname` on an endpoint.
//!
//! Everything runs in this process: the peers are endpoints the harness
//! owns. Addresses that the protocol hands to cross-memory attach
//! (`process_vm_writev` targets of HELP and RMA reads) are pointed at
//! harness memory: a peer that may use CMA on us can write our memory
//! anyway, so those values are trusted by design, and a random one would
//! make the harness write into itself. Names given to `fi_setname` are
//! prefixed with this process's id so that they never collide with names
//! of other processes on the machine.
//!
//! [`shutdown`] drops the harness (its segments are unlinked); the fuzz
//! targets call it at exit.

use crate::cma::CmaMode;
use crate::endpoint::{Config, Endpoint, Event, Incoming, Kind, MsgHeader, SendStatus, OP_BOUNCE, OP_CONT, OP_EAGER, OP_FIN, OP_HELP, OP_NACK, OP_RTS};
use crate::objects::{addr_from_str, addr_to_str, ShmDomain, ADDR_PREFIX, ADDR_STR_LEN};
use crate::peer::{Address, PeerId, ADDR_LEN};
use crate::ring::{Ring, CELL_HDR};
use crate::segment::{Geometry, HELP_SLOTS};
use rfabric_core::abi::*;
use rfabric_core::error::{EAGAIN, EINVAL};
use rfabric_core::info::{DomainAttr, Info};
use rfabric_core::objects::cq::CqAttr;
use rfabric_core::objects::local_mr::Descs;
use rfabric_core::provider::{AddressVector, AtomicKind, AtomicOp, AvAttr, Bind, CompletionQueue, Domain, Iov, MrReq, RmaIov, RmaOp, RxOp, TxOp};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// The fuzz targets, by name: what `fuzz/fuzz_targets/<name>.rs` calls and
/// what the replay test runs over `fuzz/corpus/<name>/`.
/// One fuzz entry point.
pub type Target = fn(&[u8]);

pub const TARGETS: &[(&str, Target)] =
    &[("shm_ring", ring_ops), ("shm_entries", ring_entries), ("shm_protocol", protocol_messages), ("shm_addr", addr_strings)];

/// Drops every harness this process built (their segments are unlinked).
pub fn shutdown() {
    *lock(&TRANSPORT) = None;
    *lock(&OBJECTS) = None;
    *lock(&NAMES) = None;
}

fn fail<E: std::fmt::Debug>(e: E) -> String {
    format!("{e:?}")
}

/// A harness, or a panic saying why it could not be built (a fuzz run
/// that silently tested nothing would be worse).
fn build<T>(r: Result<T, String>) -> T {
    r.unwrap_or_else(|e| panic!("shm fuzz harness: {e}"))
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Reads the fuzz input front to back; past its end every read gives 0.
struct Input<'a> {
    b: &'a [u8],
}

impl<'a> Input<'a> {
    fn new(b: &'a [u8]) -> Self {
        Input { b }
    }
    fn is_empty(&self) -> bool {
        self.b.is_empty()
    }
    fn bytes(&mut self, n: usize) -> &'a [u8] {
        let n = n.min(self.b.len());
        let (h, t) = self.b.split_at(n);
        self.b = t;
        h
    }
    fn u8(&mut self) -> u8 {
        self.bytes(1).first().copied().unwrap_or(0)
    }
    fn u16(&mut self) -> u16 {
        let mut a = [0u8; 2];
        let s = self.bytes(2);
        a[..s.len()].copy_from_slice(s);
        u16::from_le_bytes(a)
    }
    fn u32(&mut self) -> u32 {
        let mut a = [0u8; 4];
        let s = self.bytes(4);
        a[..s.len()].copy_from_slice(s);
        u32::from_le_bytes(a)
    }
    fn u64(&mut self) -> u64 {
        let mut a = [0u8; 8];
        let s = self.bytes(8);
        a[..s.len()].copy_from_slice(s);
        u64::from_le_bytes(a)
    }
    /// A length below `max` (0 when `max` is 0).
    fn len(&mut self, max: usize) -> usize {
        if max == 0 {
            0
        } else {
            self.u16() as usize % max
        }
    }
}

// ------------------------------------------------------------- ring ops

/// The ring on private memory (8-aligned words; 64-byte alignment only
/// matters for speed).
struct PrivRing {
    mem: Vec<u64>,
    ring: Ring,
    ncells: usize,
}

impl PrivRing {
    fn new(ncells: u32, cell_size: usize) -> PrivRing {
        let mut mem = vec![0u64; Ring::bytes(ncells, cell_size) / 8];
        let p = mem.as_mut_ptr().cast::<u8>();
        // SAFETY: `mem` holds Ring::bytes(ncells, cell_size) bytes, 8-aligned,
        // used by nobody else; it lives as long as `ring` (same struct,
        // never reallocated).
        let ring = unsafe {
            Ring::init(p, ncells, cell_size);
            Ring::from_raw(p, ncells, cell_size)
        };
        PrivRing { mem, ring, ncells: ncells as usize }
    }
    fn in_bounds(&self, cell: *mut u8, cell_size: usize) -> bool {
        let lo = self.mem.as_ptr() as usize + 128;
        let hi = lo + self.ncells * cell_size;
        let c = cell as usize;
        c >= lo && c + cell_size <= hi && (c - lo) / cell_size * cell_size == c - lo
    }
    /// A hostile store to the word at byte `off` of the ring's memory.
    fn scribble(&mut self, off: usize, v: u64) {
        let i = (off / 8) % self.mem.len();
        // SAFETY: i is inside `mem`; the ring reads this word only through
        // atomics, and a plain store from the thread that owns `mem` is
        // what a hostile process would do.
        unsafe { AtomicU64::from_ptr(self.mem.as_mut_ptr().add(i)) }.store(v, Ordering::Release);
    }
}

/// Any sequence of ring operations on a private ring of 2..16 cells.
/// Checks: every cell handed out lies inside the ring, a claim never
/// spins without bound, and, until a hostile store happens, the ring is
/// exactly the bounded FIFO of the model (claims succeed iff there is
/// room, positions are consecutive, entries come out in position order
/// with the value written, and only when published).
pub fn ring_ops(data: &[u8]) {
    let mut inp = Input::new(data);
    let ncells = 2u32 << (inp.u8() % 4);
    let cs = 128usize;
    let mut r = PrivRing::new(ncells, cs);
    let n = ncells as u64;
    // Model: positions head..tail are claimed; `published[p % n]`.
    let (mut head, mut tail) = (0u64, 0u64);
    let mut published = vec![false; ncells as usize];
    let mut hostile = false;
    let mut steps = 0;
    while !inp.is_empty() && steps < 4096 {
        steps += 1;
        match inp.u8() % 8 {
            0 | 1 => {
                let k = inp.u8() as u64 % (n + 2);
                let res = if k == 1 { r.ring.reserve() } else { r.ring.reserve_n(k) };
                match res {
                    Ok(pos) => {
                        for j in 0..k.max(1) {
                            let c = r.ring.cell(pos.wrapping_add(j));
                            assert!(r.in_bounds(c, cs), "cell outside the ring");
                            // SAFETY: a claimed cell of our private ring;
                            // word 1 is inside it.
                            unsafe { std::ptr::write_volatile(c.add(8).cast::<u64>(), pos.wrapping_add(j) ^ 0x5a5a) };
                        }
                        if !hostile {
                            assert!(k >= 1 && k <= n, "reserve_n({k}) must fail");
                            assert_eq!(pos, tail, "claims are consecutive");
                            assert!(tail + k - head <= n, "claimed without room");
                            tail += k;
                        }
                    }
                    Err(e) => {
                        if !hostile {
                            if k == 0 || k > n {
                                assert_eq!(e, EINVAL);
                            } else {
                                assert_eq!(e, EAGAIN);
                                assert!(tail + k - head > n, "refused with room");
                            }
                        }
                    }
                }
            }
            2 | 3 => {
                // Publish a claimed, unpublished position (model), or any
                // position once the ring is hostile.
                let pick = inp.u8() as u64;
                if hostile {
                    r.ring.publish(pick);
                } else if tail > head {
                    let p = head + pick % (tail - head);
                    r.ring.publish(p);
                    published[(p % n) as usize] = true;
                }
            }
            4 | 5 => {
                let got = r.ring.peek(head);
                if let Some(c) = got {
                    assert!(r.in_bounds(c, cs), "peeked cell outside the ring");
                }
                if !hostile {
                    let ready = tail > head && published[(head % n) as usize];
                    assert_eq!(got.is_some(), ready, "peek disagrees with the model");
                }
                if let Some(c) = got {
                    // SAFETY: a published cell of our private ring.
                    let v = unsafe { std::ptr::read_volatile(c.add(8).cast::<u64>()) };
                    if !hostile {
                        assert_eq!(v, head ^ 0x5a5a, "entry out of order");
                        published[(head % n) as usize] = false;
                    }
                    r.ring.release(head);
                    head = head.wrapping_add(1);
                }
            }
            6 => {
                // Hostile store to the tail word (offset 0) or a spare word.
                let off = inp.u8() as usize % 128;
                r.scribble(off, inp.u64());
                hostile = true;
            }
            _ => {
                // Hostile store to a cell's sequence word, or (high bit)
                // to a position's announcement word.
                let b = inp.u8() as usize;
                let i = b % ncells as usize;
                let off = if b & 0x80 != 0 { 128 + ncells as usize * cs + i * 8 } else { 128 + i * cs };
                r.scribble(off, inp.u64());
                hostile = true;
            }
        }
    }
}

// ---------------------------------------------------------- ring entries

/// Geometry of the harness's transport endpoints: small, so that the
/// fuzzer reaches ring wrap, multi-cell limits and bounce chunks quickly.
fn small_geometry() -> Geometry {
    Geometry { ncells: 16, cell_size: 256, nslots: 2, nchunks: 2, chunk_size: 4096 }
}

/// R is the endpoint under test; S is its peer (attached both ways): the
/// harness writes raw entries into R's ring through S's view of it, and
/// plays the hostile S when it stores into S's segment (the shared-copy
/// descriptors and bounce chunks R reads) or into R's descriptors.
struct Transport {
    r: Endpoint,
    s: Endpoint,
    r_to_s: PeerId,
    ring: Ring,
    /// R's send buffer, receive buffer, and where CMA writes that the
    /// protocol aims at R's memory land.
    src: Vec<u8>,
    dst: Vec<u8>,
    scratch: Vec<u8>,
    /// An RTS of R's that S holds (not yet received or discarded), and its
    /// message id, which fuzz entries may name.
    s_held: Vec<Incoming>,
    live_ids: Vec<u64>,
}

const SEND_MAX: usize = 512 * 1024;
const RECV_MAX: usize = 1024 * 1024;
/// HELP addresses land at `scratch + (addr % SCRATCH_WINDOW)`; a shared
/// copy writes at most SEND_MAX bytes from there.
const SCRATCH_WINDOW: u64 = 256 * 1024;

static TRANSPORT: Mutex<Option<Transport>> = Mutex::new(None);

impl Transport {
    fn new() -> Result<Transport, String> {
        let cfg = Config { geometry: small_geometry(), max_sends: 4, max_recvs: 4, cma: CmaMode::Auto, shared_copy: true, page_read_ns: crate::cma::page_read_ns };
        let mut r = Endpoint::new(cfg).map_err(fail)?;
        let mut s = Endpoint::new(cfg).map_err(fail)?;
        let s_to_r = s.attach(&r.address()).map_err(fail)?;
        let r_to_s = r.attach(&s.address()).map_err(fail)?;
        let ring = s.peer_ring(s_to_r).ok_or("no ring for the peer")?;
        let src = (0..SEND_MAX).map(|i| (i * 7) as u8).collect();
        Ok(Transport {
            r,
            s,
            r_to_s,
            ring,
            src,
            dst: vec![0; RECV_MAX],
            scratch: vec![0; SCRATCH_WINDOW as usize + SEND_MAX],
            s_held: Vec::new(),
            live_ids: Vec::new(),
        })
    }

    /// R sends `len` bytes to S; a rendezvous send's RTS is taken out of
    /// S's ring and held, so its message id is live.
    fn r_send(&mut self, len: usize, tag: u64) {
        let hdr = MsgHeader { tag, flags: 0, cq_data: 0 };
        let len = len.min(self.src.len());
        // SAFETY: `src` outlives R (fields drop in declaration order) and
        // is never written after creation: readable until the send's
        // completion event or the endpoint's drop.
        let st = unsafe { self.r.send(self.r_to_s, &hdr, self.src.as_ptr(), len, 0) };
        if st == Ok(SendStatus::Pending) {
            self.s_poll(8, true);
        }
    }

    /// S takes up to `n` events: with `hold`, RTS are held (their ids
    /// become live); everything else is discarded.
    fn s_poll(&mut self, n: usize, hold: bool) -> usize {
        for i in 0..n {
            match self.s.poll() {
                Some(Event::Msg(inc)) => match inc.kind {
                    Kind::Rndv { msg_id, .. } if hold && self.s_held.len() < 4 => {
                        self.live_ids.push(msg_id);
                        self.s_held.push(inc);
                    }
                    _ => self.s.discard(&inc),
                },
                Some(_) => {}
                None => return i,
            }
        }
        n
    }

    /// One event of R, handled as `act` says. Returns whether there was one.
    fn r_step(&mut self, act: u8, len: usize) -> bool {
        let Some(ev) = self.r.poll() else { return false };
        match ev {
            Event::Msg(inc) => match inc.kind {
                Kind::Inline { .. } if act & 1 == 0 => {
                    let n = len % (self.dst.len() + 1);
                    if let Ok(got) = self.r.recv_inline(&inc, &mut self.dst[..n]) {
                        assert!(got <= n && got as u64 <= inc.len, "recv_inline copied more than asked");
                    }
                }
                Kind::Rndv { .. } if act & 1 == 0 => {
                    let n = len % (self.dst.len() + 1);
                    // SAFETY: `dst` outlives R (fields drop in declaration
                    // order, R first), so it stays writable for n bytes
                    // until the receive's event.
                    if unsafe { self.r.recv_rndv(&inc, self.dst.as_mut_ptr(), n, n as u64) }.is_err() {
                        self.r.discard(&inc);
                    }
                }
                _ => self.r.discard(&inc),
            },
            Event::RecvDone { ctx, len } => assert!(len <= ctx, "a receive placed more than its buffer"),
            _ => {}
        }
        true
    }

    /// Writes one raw entry (first cell plus `extra` continuation cells)
    /// into R's ring. False when the ring has no room.
    fn write_entry(&mut self, inp: &mut Input<'_>) -> bool {
        let sel = inp.u8();
        let fx = inp.u8();
        let extra = (sel >> 3) as u64 % 4;
        let mut w = [0u64; 7];
        let present = inp.u8();
        for (i, x) in w.iter_mut().enumerate() {
            if present & (1 << i) != 0 {
                *x = inp.u64();
            }
        }
        const OPS: [u8; 7] = [OP_EAGER, OP_RTS, OP_FIN, OP_NACK, OP_BOUNCE, OP_HELP, OP_CONT];
        if let Some(&op) = OPS.get((sel & 7) as usize) {
            w[0] = w[0] & !0xff | op as u64;
        }
        if present & 0x80 != 0 {
            // Eager: a small length in aux (the high half of word 0).
            w[0] = w[0] & 0xffff_ffff | (inp.u16() as u64) << 32;
        }
        if fx & 1 != 0 {
            w[1] = self.s.address().key();
        } else if fx & 2 != 0 {
            w[1] = self.r.address().key();
        }
        if fx & 4 != 0 && !self.live_ids.is_empty() {
            w[5] = self.live_ids[inp.u8() as usize % self.live_ids.len()];
        }
        if fx & 8 != 0 {
            // A length the receive buffers can take (RTS, HELP).
            w[4] %= RECV_MAX as u64 + 1;
        }
        if w[0] as u8 == OP_HELP {
            // The receiver's buffer address, which the sender writes with
            // process_vm_writev: harness memory (see the module comment).
            w[6] = self.scratch.as_ptr() as u64 + w[6] % SCRATCH_WINDOW;
        }
        let inline = self.ring.inline_max();
        let mut payload = [0u8; 256];
        let plen = inp.len(inline + 1);
        let src = inp.bytes(plen);
        payload[..src.len()].copy_from_slice(src);
        if fx & 0x30 != 0 {
            let a = if fx & 0x10 != 0 { self.s.address() } else { self.r.address() };
            payload[..ADDR_LEN].copy_from_slice(&a.to_bytes());
        }
        let Ok(pos) = self.ring.reserve_n(1 + extra) else { return false };
        for j in 1..=extra {
            let c = self.ring.cell(pos.wrapping_add(j));
            let marker = if fx & 0x40 == 0 { OP_CONT as u64 | j << 32 } else { inp.u64() };
            let n = inp.len(inline + 1);
            let body = inp.bytes(n);
            // SAFETY: cell j of our claim (cell_size bytes); the marker is
            // word 1 and the payload fits after CELL_HDR (n <= inline_max).
            unsafe {
                std::ptr::write_volatile(c.add(8).cast::<u64>(), marker);
                std::ptr::copy_nonoverlapping(body.as_ptr(), c.add(CELL_HDR), body.len());
            }
            self.ring.publish(pos.wrapping_add(j));
        }
        let c = self.ring.cell(pos);
        // SAFETY: the first cell of our claim: header words 1..8 and
        // `inline` payload bytes after CELL_HDR.
        unsafe {
            std::ptr::copy_nonoverlapping(payload.as_ptr(), c.add(CELL_HDR), inline.min(payload.len()));
            for (i, v) in w.iter().enumerate() {
                std::ptr::write_volatile(c.add(8 + 8 * i).cast::<u64>(), *v);
            }
        }
        self.ring.publish(pos);
        true
    }

    /// A hostile store into a bounce chunk header of S's segment (R reads
    /// them for bounce-buffer receives from S), or of R's own (R reads
    /// them when a forged RTS made it its own peer).
    fn write_chunk(&self, own: bool, (slot, chunk): (u32, u32), state: u32, (n, off, id): (u32, u64, u64)) {
        let seg = if own { self.r.segment() } else { self.s.segment() };
        if let Ok(ch) = seg.chunk_ptr(slot, chunk) {
            // SAFETY: chunk_ptr checked the chunk header (CHUNK_HDR bytes,
            // 64-aligned) lies inside S's mapping; the state word is
            // accessed as an atomic by both sides, the rest as volatile
            // words, as the transport does.
            unsafe {
                std::ptr::write_volatile(ch.add(4).cast::<u32>(), n);
                std::ptr::write_volatile(ch.add(8).cast::<u64>(), off);
                std::ptr::write_volatile(ch.add(16).cast::<u64>(), id);
                AtomicU32::from_ptr(ch.cast::<u32>()).store(state, Ordering::Release);
            }
        }
    }

    /// Brings R back to no operation in flight and an empty ring. False
    /// when that did not work (the harness is then rebuilt).
    fn settle(&mut self) -> bool {
        for inc in std::mem::take(&mut self.s_held) {
            self.s.discard(&inc);
        }
        self.live_ids.clear();
        let g = small_geometry();
        for round in 0..64 {
            self.s_poll(64, false);
            while self.r_step(0, RECV_MAX) {}
            if round > 1 {
                // Receives still waiting for bounce chunks or for chunks
                // of a shared copy the "sender" claimed: end them.
                for own in [false, true] {
                    for slot in 0..g.nslots {
                        for c in 0..g.nchunks {
                            self.write_chunk(own, (slot, c), 1, (0, 0, 0));
                        }
                    }
                }
                for i in 0..HELP_SLOTS {
                    if let Some(d) = self.r.segment().help_desc(i) {
                        d.done.store(0x1_0000, Ordering::Release);
                    }
                }
            }
            if self.r.in_flight() == 0 && !self.r_step(0, RECV_MAX) && self.s_poll(1, false) == 0 {
                for own in [false, true] {
                    for slot in 0..g.nslots {
                        for c in 0..g.nchunks {
                            self.write_chunk(own, (slot, c), 0, (0, 0, 0));
                        }
                    }
                }
                for i in 0..HELP_SLOTS {
                    for seg in [self.r.segment(), self.s.segment()] {
                        if let Some(d) = seg.help_desc(i) {
                            d.claim.store(0, Ordering::Release);
                            d.done.store(0, Ordering::Release);
                            d.failed.store(0, Ordering::Release);
                        }
                    }
                }
                return true;
            }
        }
        false
    }
}

/// Raw ring entries into a live endpoint (see the module comment).
///
/// Input: a sequence of steps, each a selector byte then its operands:
/// a raw entry (selector, fixups, mask of present header words, words,
/// payload, continuation cells), an event of R handled one way or another,
/// a send of R to S (so FIN/NACK/HELP name a live message), S taking its
/// events, or a hostile store to a descriptor or bounce chunk.
pub fn ring_entries(data: &[u8]) {
    let mut g = lock(&TRANSPORT);
    if g.is_none() {
        *g = Some(build(Transport::new()));
    }
    let Some(t) = g.as_mut() else { return };
    let mut inp = Input::new(data);
    let mut steps = 0;
    while !inp.is_empty() && steps < 64 {
        steps += 1;
        match inp.u8() % 8 {
            0..=2 => {
                if !t.write_entry(&mut inp) {
                    t.r_step(0, RECV_MAX);
                }
            }
            3 => {
                let act = inp.u8();
                let len = inp.u32() as usize;
                t.r_step(act, len);
            }
            4 => {
                let len = match inp.u8() % 4 {
                    0 => inp.u16() as usize,
                    1 => 300_000,
                    2 => 5000,
                    _ => inp.u32() as usize,
                };
                let tag = inp.u64();
                t.r_send(len, tag);
            }
            5 => {
                let n = inp.u8() as usize % 8;
                t.s_poll(n + 1, true);
            }
            6 => {
                // Shared-copy descriptor of S (R as a sender reads it) or
                // of R (R as a receiver reads it).
                let which = inp.u8();
                let i = which as usize % HELP_SLOTS;
                let seg = if which & 0x80 != 0 { t.r.segment() } else { t.s.segment() };
                if let Some(d) = seg.help_desc(i) {
                    let v = inp.u64();
                    match inp.u8() % 3 {
                        0 => d.claim.store(v, Ordering::Release),
                        1 => d.done.store(v as u32, Ordering::Release),
                        _ => d.failed.store(v as u32, Ordering::Release),
                    }
                }
            }
            _ => {
                let g = small_geometry();
                let own = inp.u8() & 1 != 0;
                let slot = inp.u8() as u32 % g.nslots;
                let chunk = inp.u8() as u32 % g.nchunks;
                let state = inp.u8() as u32 & 1;
                let n = inp.u32();
                let off = inp.u64();
                let id = inp.u64();
                t.write_chunk(own, (slot, chunk), state, (n, off, id));
            }
        }
    }
    if !t.settle() {
        *g = Some(build(Transport::new()));
    }
}

// ------------------------------------------------------ protocol messages

/// A is an enabled shm endpoint (domain, CQ, AV, registered memory); X is
/// a transport endpoint attached to it that sends whatever the input says.
struct Objects {
    _d: ShmDomain,
    cq: Arc<dyn CompletionQueue>,
    _av: Arc<dyn AddressVector>,
    a: Box<dyn rfabric_core::provider::Endpoint>,
    x: Endpoint,
    x_to_a: PeerId,
    /// X in A's AV.
    to_x: u64,
    /// Registered regions: read-write and read-only, their keys.
    mr: Vec<u8>,
    key: u64,
    ro: Vec<u8>,
    ro_key: u64,
    /// A's local buffers (RMA, atomics, receives) and where CMA writes
    /// aimed at A's memory land.
    local: Vec<u8>,
    result: Vec<u8>,
    rbuf: Vec<u8>,
    scratch: Vec<u8>,
    x_src: Vec<u8>,
    /// Tokens of A's RMA requests seen at X, and delivery-complete
    /// messages of A that X has seen (the next ack count).
    tokens: Vec<u64>,
    acks: u64,
    /// Contexts of receives A has posted.
    posted: Vec<usize>,
    next_ctx: usize,
    /// This input made X send to A (A may hold unexpected messages), and
    /// A made delivery-complete sends (they wait for an ack).
    x_sent: bool,
    dc_sent: bool,
}

const UF_ACKREQ: u8 = 4;
const UF_ACK: u8 = 8;
const UF_RMA: u8 = 0x80;
const UF_REPLY: u8 = 0x40;
const REQ_HDR: usize = 80;
const MR_LEN: usize = 64 * 1024;

static OBJECTS: Mutex<Option<Objects>> = Mutex::new(None);

fn shm_info() -> Info {
    let mut info = Info { caps: FI_MSG | FI_TAGGED | FI_RMA | FI_ATOMIC, ..Info::default() };
    info.domain_attr = Some(DomainAttr {
        mr_key_size: 8,
        mr_mode: (FI_MR_VIRT_ADDR | FI_MR_PROV_KEY) as i32,
        threading: FI_THREAD_DOMAIN,
        ..DomainAttr::default()
    });
    info
}

impl Objects {
    fn new() -> Result<Objects, String> {
        let info = shm_info();
        let d = ShmDomain::new(&info).map_err(fail)?;
        let cq = d.cq_open(&CqAttr { size: 1024, format: FI_CQ_FORMAT_TAGGED, wait_obj: FI_WAIT_NONE }).map_err(fail)?;
        let av = d.av_open(&AvAttr { kind: FI_AV_TABLE, count: 16, flags: 0 }).map_err(fail)?;
        let a = d.endpoint(&info).map_err(fail)?;
        a.bind(Bind::Av(&av), 0).map_err(fail)?;
        a.bind(Bind::Cq(&cq), FI_TRANSMIT | FI_RECV).map_err(fail)?;
        a.enable().map_err(fail)?;
        let mut name = [0u8; 64];
        let n = a.getname(&mut name).map_err(fail)?;
        let a_addr = addr_from_str(&name[..n]).map_err(fail)?;
        let cfg = Config { geometry: Geometry::default(), max_sends: 8, max_recvs: 8, cma: CmaMode::Auto, shared_copy: true, page_read_ns: crate::cma::page_read_ns };
        let mut x = Endpoint::new(cfg).map_err(fail)?;
        let x_to_a = x.attach(&a_addr).map_err(fail)?;
        let xs = addr_to_str(&x.address());
        let mut out = [0u64; 1];
        av.insert(&[xs.as_bytes()], Some(&mut out), 0).map_err(fail)?;
        let mut mr = vec![0u8; MR_LEN];
        let mut ro = vec![0u8; MR_LEN];
        let rw = MrReq { addr: mr.as_mut_ptr() as usize, len: mr.len(), access: FI_REMOTE_READ | FI_REMOTE_WRITE, ..Default::default() };
        let key = d.mr_reg(&rw).map_err(fail)?.key;
        let r = MrReq { addr: ro.as_mut_ptr() as usize, len: ro.len(), access: FI_REMOTE_READ, ..Default::default() };
        let ro_key = d.mr_reg(&r).map_err(fail)?.key;
        Ok(Objects {
            _d: d,
            cq,
            _av: av,
            a,
            x,
            x_to_a,
            to_x: out[0],
            mr,
            key,
            ro,
            ro_key,
            local: vec![0; MR_LEN],
            result: vec![0; MR_LEN],
            rbuf: vec![0; 1 << 20],
            scratch: vec![0; 2 * MR_LEN],
            x_src: (0..1usize << 20).map(|i| (i * 13) as u8).collect(),
            tokens: Vec::new(),
            acks: 0,
            posted: Vec::new(),
            next_ctx: 1,
            x_sent: false,
            dc_sent: false,
        })
    }

    /// Reads A's CQ until it is empty (or `max` entries), errors included.
    fn drain_cq(&mut self, max: usize) {
        let mut raw = [0u8; 64];
        for _ in 0..max {
            match self.cq.read(&mut raw, 1, None) {
                Ok(_) => {
                    let ctx = usize::from_ne_bytes(raw[..8].try_into().unwrap_or_default());
                    self.posted.retain(|&c| c != ctx);
                }
                Err(e) if e.0 == FI_EAVAIL => {
                    let mut buf = [0u8; 64];
                    if let Ok((info, _)) = self.cq.readerr(Some(&mut buf), fi_version(1, 17)) {
                        self.posted.retain(|&c| c != info.base.op_context);
                    }
                }
                Err(_) => break,
            }
        }
    }

    /// X takes its events: RMA requests of A give live tokens,
    /// delivery-complete messages count towards the next ack.
    fn x_poll(&mut self, n: usize) {
        let mut buf = [0u8; 8192];
        for _ in 0..n {
            match self.x.poll() {
                Some(Event::Msg(inc)) => {
                    if inc.hdr.flags & UF_RMA != 0 && inc.hdr.flags & UF_REPLY == 0 && self.tokens.len() < 256 {
                        self.tokens.push(inc.hdr.tag);
                    }
                    if inc.hdr.flags & UF_ACKREQ != 0 {
                        self.acks += 1;
                    }
                    if matches!(inc.kind, Kind::Inline { .. }) && inc.len as usize <= buf.len() {
                        let _ = self.x.recv_inline(&inc, &mut buf);
                    } else {
                        self.x.discard(&inc);
                    }
                }
                Some(_) => {}
                None => break,
            }
        }
    }

    /// X sends one message to A, its header and payload from the input.
    fn x_send(&mut self, inp: &mut Input<'_>) {
        let fx = inp.u8();
        let flags = inp.u8();
        let mut tag = inp.u64();
        let cq_data = inp.u64();
        if fx & 1 != 0 && !self.tokens.is_empty() {
            tag = self.tokens[inp.u8() as usize % self.tokens.len()];
        }
        if fx & 2 != 0 {
            tag = self.acks.saturating_sub(inp.u8() as u64 % 2);
        }
        let limit = self.x.inline_max(self.x_to_a).unwrap_or(0);
        let mut payload = vec![0u8; inp.len(limit.min(8192) + 1)];
        let src = inp.bytes(payload.len());
        payload[..src.len()].copy_from_slice(src);
        if flags & UF_RMA != 0 && flags & UF_REPLY == 0 {
            self.fix_request(fx, &mut payload, inp);
        }
        let hdr = MsgHeader { flags, tag, cq_data };
        self.x_sent = true;
        if fx & 0x80 != 0 {
            // Larger than the eager limit: a rendezvous send (RTS).
            let len = limit + 1 + inp.u16() as usize;
            // SAFETY: `x_src` outlives X (fields drop in declaration
            // order) and is never written after creation.
            let _ = unsafe { self.x.send(self.x_to_a, &hdr, self.x_src.as_ptr(), len.min(self.x_src.len()), 0) };
        } else if self.x.send_inline(self.x_to_a, &hdr, &payload) == Err(EAGAIN) {
            self.progress(4);
            let _ = self.x.send_inline(self.x_to_a, &hdr, &payload);
        }
    }

    /// Makes an RMA request addressable: fixups the input chooses (our
    /// address as the initiator, a registered key, an address inside the
    /// region), and the CMA landing address always in harness memory.
    fn fix_request(&self, fx: u8, req: &mut Vec<u8>, inp: &mut Input<'_>) {
        if fx & 4 != 0 && req.len() < REQ_HDR {
            req.resize(REQ_HDR, 0);
        }
        if req.len() < REQ_HDR {
            return;
        }
        if fx & 8 != 0 {
            let (key, base) = if fx & 0x10 == 0 { (self.key, self.mr.as_ptr()) } else { (self.ro_key, self.ro.as_ptr()) };
            req[16..24].copy_from_slice(&key.to_ne_bytes());
            let off = u64::from_ne_bytes(req[24..32].try_into().unwrap_or_default()) % MR_LEN as u64;
            req[24..32].copy_from_slice(&(base as u64 + off).to_ne_bytes());
        }
        if fx & 0x20 != 0 {
            let len = inp.u16() as u64 % (MR_LEN as u64 + 1);
            req[32..40].copy_from_slice(&len.to_ne_bytes());
        }
        let cma = req[1] == 1;
        if fx & 0x40 != 0 || cma {
            req[48..80].copy_from_slice(&self.x.address().to_bytes());
        }
        if cma {
            // process_vm_readv/writev of our own process at this address.
            let off = u64::from_ne_bytes(req[40..48].try_into().unwrap_or_default()) % MR_LEN as u64;
            req[40..48].copy_from_slice(&(self.scratch.as_ptr() as u64 + off).to_ne_bytes());
        }
    }

    /// Progress A (reading its CQ) and X.
    fn progress(&mut self, rounds: usize) {
        for _ in 0..rounds {
            self.drain_cq(64);
            self.x_poll(64);
        }
    }

    /// A starts an operation towards X: an RMA write or read, an atomic, or
    /// a delivery-complete send; X sees its request.
    fn a_op(&mut self, inp: &mut Input<'_>) {
        let sel = inp.u8();
        let len = inp.u16() as usize % 8192;
        let raddr = inp.u64();
        let key = inp.u64();
        let ctx = 0x1000 + (sel as usize);
        let iov = [Iov { base: self.local.as_mut_ptr() as usize, len }];
        let r = [RmaIov { addr: raddr, len, key }];
        match sel % 4 {
            0 | 1 => {
                let op = RmaOp { iov: &iov, desc: rfabric_core::provider::Descs::NONE, rma: &r, dest: self.to_x, context: ctx, data: raddr, flags: if sel & 4 != 0 { FI_REMOTE_CQ_DATA } else { 0 }, no_completion: false };
                // SAFETY: `local` outlives A (fields drop in declaration
                // order, A first), so it stays valid until completion.
                let _ = unsafe { if sel & 3 == 0 { self.a.rma_write(&op) } else { self.a.rma_read(&op) } };
            }
            2 => {
                let kind = match (sel >> 2) % 3 {
                    0 => AtomicKind::Write,
                    1 => AtomicKind::Fetch,
                    _ => AtomicKind::Compare,
                };
                let count = (len % 64).max(1);
                let iov = [Iov { base: self.local.as_ptr() as usize, len: count * 8 }];
                let cmp = [Iov { base: self.local.as_ptr() as usize + 1024, len: count * 8 }];
                let res = [Iov { base: self.result.as_mut_ptr() as usize, len: count * 8 }];
                let r = [RmaIov { addr: raddr, len: count, key }];
                let op = AtomicOp {
                    kind,
                    op: if kind == AtomicKind::Compare { FI_CSWAP } else { FI_SUM },
                    datatype: FI_UINT64,
                    iov: &iov,
                    compare: if kind == AtomicKind::Compare { &cmp } else { &[] },
                    result: if kind == AtomicKind::Write { &[] } else { &res },
                    result_desc: rfabric_core::provider::Descs::NONE,
                    rma: &r,
                    dest: self.to_x,
                    context: ctx,
                    data: 0,
                    flags: 0,
                    no_completion: false,
                };
                // SAFETY: as above (`local`, `result`).
                let _ = unsafe { self.a.atomic(&op) };
            }
            _ => {
                let iov = [Iov { base: self.local.as_ptr() as usize, len: len.min(4096) }];
                self.dc_sent = true;
                let op = TxOp { iov: &iov, desc: Descs::NONE, dest: self.to_x, context: ctx, tag: key, data: 0, flags: FI_DELIVERY_COMPLETE, tagged: sel & 4 != 0, no_completion: false };
                // SAFETY: as above.
                let _ = unsafe { self.a.send(&op) };
            }
        }
        self.x_poll(16);
    }

    /// A posts a receive.
    fn a_recv(&mut self, inp: &mut Input<'_>) {
        let sel = inp.u8();
        let len = inp.u32() as usize % (self.rbuf.len() + 1);
        let tag = inp.u64();
        let ctx = self.next_ctx;
        self.next_ctx += 1;
        let iov = [Iov { base: self.rbuf.as_mut_ptr() as usize, len }];
        let op = RxOp { iov: &iov, desc: Descs::NONE, src: FI_ADDR_UNSPEC, context: ctx, tag, ignore: if sel & 2 != 0 { !0 } else { 0 }, flags: 0, tagged: sel & 1 != 0 };
        // SAFETY: `rbuf` outlives A (fields drop in declaration order).
        if unsafe { self.a.recv(&op) }.is_ok() {
            self.posted.push(ctx);
        }
    }

    /// Back to no posted receive, no unexpected message, no operation of A
    /// waiting for X, an empty CQ and empty rings.
    fn settle(&mut self) -> bool {
        self.progress(1);
        for _ in 0..4 {
            if self.tokens.is_empty() && !self.dc_sent && self.posted.is_empty() {
                break;
            }
            // Every RMA piece of A not yet answered fails; every
            // delivery-complete send is acknowledged.
            for t in std::mem::take(&mut self.tokens) {
                let hdr = MsgHeader { flags: UF_RMA | UF_REPLY, tag: t, cq_data: libc::EIO as u64 };
                while self.x.send_inline(self.x_to_a, &hdr, &[]) == Err(EAGAIN) {
                    self.progress(1);
                }
            }
            if std::mem::take(&mut self.dc_sent) {
                let hdr = MsgHeader { flags: UF_ACK, tag: u64::MAX, cq_data: 0 };
                let _ = self.x.send_inline(self.x_to_a, &hdr, &[]);
            }
            for ctx in std::mem::take(&mut self.posted) {
                let _ = self.a.cancel(ctx);
            }
            self.progress(2);
        }
        // Unexpected messages: wildcard receives until one stays posted.
        if std::mem::take(&mut self.x_sent) {
            for tagged in [false, true] {
                for _ in 0..2048 {
                    let ctx = self.next_ctx;
                    self.next_ctx += 1;
                    let iov = [Iov { base: self.rbuf.as_mut_ptr() as usize, len: self.rbuf.len() }];
                    let op = RxOp { iov: &iov, desc: Descs::NONE, src: FI_ADDR_UNSPEC, context: ctx, tag: 0, ignore: !0, flags: 0, tagged };
                    // SAFETY: as in a_recv.
                    if unsafe { self.a.recv(&op) }.is_err() {
                        self.progress(1);
                        continue;
                    }
                    self.progress(1);
                    if self.a.cancel(ctx).is_ok() {
                        break;
                    }
                }
            }
            self.progress(2);
        }
        self.posted.clear();
        self.tokens.clear();
        self.x.in_flight() == 0
    }
}

impl Drop for Objects {
    /// As an application's fi_close: the endpoint leaves its CQ (which
    /// holds it), so both are freed.
    fn drop(&mut self) {
        let _ = self.a.close();
    }
}

/// Protocol messages to a live endpoint (see the module comment).
pub fn protocol_messages(data: &[u8]) {
    let mut g = lock(&OBJECTS);
    if g.is_none() {
        *g = Some(build(Objects::new()));
    }
    let Some(o) = g.as_mut() else { return };
    let mut inp = Input::new(data);
    let mut steps = 0;
    while !inp.is_empty() && steps < 32 {
        steps += 1;
        match inp.u8() % 6 {
            0..=2 => o.x_send(&mut inp),
            3 => o.a_op(&mut inp),
            4 => o.a_recv(&mut inp),
            _ => {
                let n = inp.u8() as usize % 4 + 1;
                o.progress(n);
            }
        }
    }
    if !o.settle() {
        *g = None;
        *g = Some(build(Objects::new()));
    }
}

// ------------------------------------------------------- address strings

struct Names {
    _d: ShmDomain,
    av: Arc<dyn AddressVector>,
    ep: Box<dyn rfabric_core::provider::Endpoint>,
    /// The endpoint's own address string (NUL-terminated).
    own: Vec<u8>,
}

static NAMES: Mutex<Option<Names>> = Mutex::new(None);

impl Names {
    fn new() -> Result<Names, String> {
        let info = shm_info();
        let d = ShmDomain::new(&info).map_err(fail)?;
        let av = d.av_open(&AvAttr { kind: FI_AV_TABLE, count: 4, flags: 0 }).map_err(fail)?;
        let ep = d.endpoint(&info).map_err(fail)?;
        let mut b = [0u8; 64];
        let n = ep.getname(&mut b).map_err(fail)?;
        Ok(Names { _d: d, av, ep, own: b[..n].to_vec() })
    }
}

/// The string form up to its first NUL.
fn until_nul(s: &[u8]) -> &[u8] {
    &s[..s.iter().position(|&c| c == 0).unwrap_or(s.len())]
}

/// Address strings through every parser that takes them.
///
/// Input: a selector byte (AV insert flags, whether to call fi_setname),
/// then the string bytes (a NUL anywhere, or none).
pub fn addr_strings(data: &[u8]) {
    let mut inp = Input::new(data);
    let sel = inp.u8();
    let s = inp.bytes(usize::MAX);
    let body = until_nul(s);
    let parsed = addr_from_str(s);
    if let Ok(a) = parsed {
        let t = addr_to_str(&a);
        assert_eq!(t.len(), ADDR_STR_LEN);
        assert_eq!(addr_from_str(t.as_bytes()), Ok(a), "address string round trip");
        assert_eq!(Address::from_bytes(&a.to_bytes()), Ok(a));
    }
    let mut g = lock(&NAMES);
    if g.is_none() {
        *g = Some(build(Names::new()));
    }
    let Some(n) = g.as_mut() else { return };
    let shown = n.av.straddr(s);
    if let Ok(a) = parsed {
        assert_eq!(shown, addr_to_str(&a), "fi_av_straddr of an address");
    }
    // fi_av_insert of one string, then lookup and remove.
    let flags = match sel % 4 {
        0 => 0,
        1 => FI_AV_USER_ID,
        2 => FI_SYNC_ERR,
        _ => 1 << (sel >> 2),
    };
    let mut out = [0x77u64];
    if let Ok(k) = n.av.insert(&[s], Some(&mut out), flags) {
        assert!(k <= 1);
        if k == 1 {
            assert_ne!(out[0], FI_ADDR_NOTAVAIL);
            let mut b = [0u8; 128];
            let len = n.av.lookup(out[0], &mut b).expect("fi_av_lookup of an inserted address");
            assert!(len <= b.len() && len > 0 && b[len - 1] == 0);
            assert_eq!(&b[..len - 1], shown.as_bytes(), "fi_av_lookup reports what fi_av_straddr shows");
            n.av.remove(&out, 0).expect("fi_av_remove of an inserted address");
        } else {
            assert!(out[0] == FI_ADDR_NOTAVAIL);
        }
    }
    if sel & 0x40 == 0 {
        return;
    }
    // fi_setname. A well-formed name gets this process's prefix (module
    // comment); anything else goes in as it is.
    let name = body.strip_prefix(ADDR_PREFIX.as_bytes()).and_then(|r| std::str::from_utf8(r).ok());
    let named = name.is_some_and(|r| r.len() != ADDR_STR_LEN - ADDR_PREFIX.len() && crate::segment::valid_ep_name(r));
    let arg: Vec<u8> = match name {
        Some(r) if named => {
            let mut v = format!("{ADDR_PREFIX}fz{}.", std::process::id()).into_bytes();
            let room = crate::segment::EP_NAME_MAX + ADDR_PREFIX.len() - v.len();
            v.extend_from_slice(&r.as_bytes()[..r.len().min(room)]);
            v.extend_from_slice(&s[body.len()..]);
            v
        }
        _ => s.to_vec(),
    };
    let r = n.ep.setname(&arg);
    if named && arg.contains(&0) {
        assert_ne!(r, Err(EINVAL), "a well-formed name refused");
    }
    if r.is_ok() {
        let mut b = [0u8; 64];
        let len = n.ep.getname(&mut b).expect("fi_getname");
        assert_eq!(&b[..len - 1], until_nul(&arg), "fi_getname after fi_setname");
        // Back to the endpoint's own address (drops the name's link).
        n.ep.setname(&n.own).expect("fi_setname of the endpoint's own address");
    }
}
