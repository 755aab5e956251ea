//! RMA and atomics of the shm endpoint (a child module of `objects::ep`,
//! so it works on `EpState` directly).
//!
//! Requests and replies are ordinary inline transport messages whose
//! `MsgHeader::flags` carry [`UF_RMA`]; `EpState::handle` hands them here
//! before any matching. One operation is cut into pieces; each piece is one
//! request and one reply:
//! - request payload: an 80-byte header (kind, mode, key, remote address,
//!   length, the initiator's buffer address and 32-byte transport address,
//!   atomic op/datatype/count, or on the last piece of a write with CQ data
//!   the whole write's length) followed by inline data (write data, atomic
//!   operand and compare values);
//! - the target checks key, range and access with `MrRegistry::verify`
//!   (unknown key `FI_EKEYREJECTED`, missing access `FI_EACCES`, out of
//!   range `FI_EINVAL`, the codes `MrRegistry::verify` documents), then moves
//!   the data: inline data is copied, a CMA piece is pulled with
//!   `cma::read_from` (write) or pushed with `cma::write_to` (read); atomics
//!   run with `core::objects::atomic::apply_shared`, atomic per element
//!   whichever endpoint or thread serves them (hardware atomics for aligned
//!   1/2/4/8-byte elements, address-striped locks for the rest);
//! - reply: `tag` = the initiator's token, `cq_data` = status (0 or a
//!   positive error code), payload = read data or fetched values. Every
//!   request is answered ([`EpState::post_reply`]): queued while the
//!   initiator's ring is full (in order per initiator: a full ring holds
//!   back that initiator's replies only), its status alone if the full
//!   reply is refused, dropped only when the initiator's process is gone.
//!
//! Without CMA (`FI_SHM_CMA=0`, or after the target reported that the
//! kernel refused it) a piece is at most one inline payload (4016 bytes),
//! so large transfers become many requests; at most [`WINDOW`] requests per
//! endpoint are in flight. The operation completes at the initiator when
//! every piece has been acknowledged (delivery complete; injects too, which
//! only copy their data first so the buffer is free on return).
//!
//! Progress is manual on both sides: a target serves requests only while
//! the application polls a CQ or counter bound to the target endpoint, and
//! the initiator issues queued pieces and sees replies while it polls its
//! own.

use super::*;
use crate::cma::{self, CmaFailure, CmaMode};
use crate::peer::Address;
use rfabric_core::objects::atomic::{self, Kind as AKind};
use rfabric_core::provider::{AtomicOp, Iov, RmaIov, RmaOp};

/// `MsgHeader::flags` bit of provider-internal RMA traffic.
pub(super) const UF_RMA: u8 = 0x80;
const UF_REPLY: u8 = 0x40;

const K_WRITE: u8 = 1;
const K_READ: u8 = 2;
const K_ATOMIC: u8 = 3;
const M_INLINE: u8 = 0;
const M_CMA: u8 = 1;
const RF_DATA: u8 = 1;
const RF_LAST: u8 = 2;

const REQ_HDR: usize = 80;
/// Status the target returns when the kernel refuses CMA.
const ST_REFUSED: u64 = 1 << 32;
/// Largest atomic operand per operation, in bytes.
pub(in crate::objects) const ATOMIC_MAX_BYTES: usize = 1024;
/// Local and remote iovs per operation (`rma_iov_limit`, `iov_limit`).
const IOV_LIMIT: usize = 4;
const MAX_OPS: usize = 64;
/// Longest an endpoint's close waits for peers to take its queued replies.
const CLOSE_FLUSH_NS: u64 = 1_000_000_000;
/// Requests in flight per endpoint.
const WINDOW: usize = 64;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OpKind {
    Write,
    Read,
    Atomic(AKind),
}

#[derive(Clone, Copy, Debug)]
struct Piece {
    /// Local address (RMA), or byte offset into the op's buffers (atomics).
    local: usize,
    len: usize,
    raddr: u64,
    key: u64,
    cma: bool,
    last: bool,
}

struct Op {
    gen: u32,
    peer: PeerId,
    peer_key: u64,
    /// pid and start time of the target, for liveness checks.
    peer_proc: (u32, u64),
    kind: OpKind,
    ctx: usize,
    complete: bool,
    data: u64,
    remote_data: bool,
    pieces: Vec<Piece>,
    next: usize,
    acked: usize,
    err: Option<Error>,
    /// Inject copy (RMA) or operand ++ compare values (atomics).
    owned: Vec<u8>,
    result: Vec<u8>,
    res_iov: Vec<Iov>,
    aop: u32,
    adt: u32,
}

#[derive(Default)]
pub(super) struct RmaState {
    pub(super) mr: Option<Arc<Locked<MrRegistry>>>,
    ops: Vec<Option<Op>>,
    gen: u32,
    queue: VecDeque<usize>,
    inflight: usize,
    replies: VecDeque<(PeerId, MsgHeader, Vec<u8>)>,
    by_key: HashMap<u64, PeerId>,
    no_cma: Vec<PeerId>,
    /// `FI_SHM_CMA=0`, read once.
    cma_off: bool,
    /// When targets were last checked for liveness (`coarse_ns`).
    last_check_ns: u64,
    write_cntr: Option<Arc<ShmCntr>>,
    read_cntr: Option<Arc<ShmCntr>>,
    rwrite_cntr: Option<Arc<ShmCntr>>,
    rread_cntr: Option<Arc<ShmCntr>>,
    /// Tests: errors the next reply sends meet instead of being sent.
    #[cfg(test)]
    pub(super) fail_replies: VecDeque<Error>,
}

impl RmaState {
    pub(super) fn new(mr: Arc<Locked<MrRegistry>>) -> RmaState {
        let mut ops = Vec::with_capacity(MAX_OPS);
        ops.resize_with(MAX_OPS, || None);
        RmaState { mr: Some(mr), ops, cma_off: CmaMode::from_env() == CmaMode::Off, ..RmaState::default() }
    }

    /// Counters bound with `FI_READ`, `FI_WRITE`, `FI_REMOTE_READ`, `FI_REMOTE_WRITE`.
    /// Queues a reply-like control message (sent by `rma_pump`, in order
    /// with the other replies to the same peer).
    pub(super) fn queue_reply(&mut self, peer: PeerId, hdr: MsgHeader) {
        self.replies.push_back((peer, hdr, Vec::new()));
    }

    pub(super) fn bind_cntr(&mut self, flags: u64, c: &Arc<ShmCntr>) -> Result<()> {
        let slots = [
            (FI_WRITE, &mut self.write_cntr),
            (FI_READ, &mut self.read_cntr),
            (FI_REMOTE_WRITE, &mut self.rwrite_cntr),
            (FI_REMOTE_READ, &mut self.rread_cntr),
        ];
        for (bit, slot) in slots {
            if flags & bit != 0 {
                if slot.is_some() {
                    return Err(EINVAL);
                }
                *slot = Some(c.clone());
            }
        }
        Ok(())
    }

    pub(super) fn has_cntr(&self) -> bool {
        self.write_cntr.is_some() || self.read_cntr.is_some() || self.rwrite_cntr.is_some() || self.rread_cntr.is_some()
    }

    pub(super) fn clear(&mut self) {
        self.write_cntr = None;
        self.read_cntr = None;
        self.rwrite_cntr = None;
        self.rread_cntr = None;
    }
}

fn put64(b: &mut [u8], at: usize, v: u64) {
    b[at..at + 8].copy_from_slice(&v.to_ne_bytes());
}
fn get64(b: &[u8], at: usize) -> u64 {
    u64::from_ne_bytes(b[at..at + 8].try_into().unwrap_or([0; 8]))
}
fn get32(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes(b[at..at + 4].try_into().unwrap_or([0; 4]))
}

fn akind_code(k: AKind) -> u8 {
    match k {
        AKind::Write => 0,
        AKind::Fetch => 1,
        AKind::Compare => 2,
    }
}
fn akind_from(c: u8) -> Option<AKind> {
    Some(match c {
        0 => AKind::Write,
        1 => AKind::Fetch,
        2 => AKind::Compare,
        _ => return None,
    })
}

fn cma_status(f: CmaFailure) -> u64 {
    match f {
        CmaFailure::Refused => ST_REFUSED,
        CmaFailure::PeerGone => libc::ECONNRESET as u64,
        CmaFailure::Fault(e) => e.max(1) as u64,
    }
}

fn token(gen: u32, idx: usize, piece: usize) -> u64 {
    ((gen as u64) & 0xff_ffff) << 40 | (idx as u64 & 0xff) << 32 | piece as u32 as u64
}

/// Cuts `len` bytes at `local`/`raddr` into pieces.
fn cut(out: &mut Vec<Piece>, local: usize, len: usize, raddr: u64, key: u64, cma: bool, chunk: usize) {
    if cma && len > chunk {
        out.push(Piece { local, len, raddr, key, cma: true, last: false });
        return;
    }
    let mut at = 0;
    loop {
        let n = (len - at).min(chunk);
        out.push(Piece { local: local + at, len: n, raddr: raddr.wrapping_add(at as u64), key, cma: false, last: false });
        at += n;
        if at >= len {
            break;
        }
    }
}

/// Pairs local and remote iovs into pieces (their totals are equal).
fn pieces_of(local: &[Iov], remote: &[RmaIov], cma: bool, chunk: usize) -> Vec<Piece> {
    let mut out = Vec::new();
    let (mut li, mut loff, mut ri, mut roff) = (0, 0, 0, 0);
    while li < local.len() && ri < remote.len() {
        let l = local[li];
        let r = remote[ri];
        let n = (l.len - loff).min(r.len - roff);
        if n > 0 {
            cut(&mut out, l.base + loff, n, r.addr.wrapping_add(roff as u64), r.key, cma, chunk);
        }
        loff += n;
        roff += n;
        if loff == l.len {
            li += 1;
            loff = 0;
        }
        if roff == r.len {
            ri += 1;
            roff = 0;
        }
    }
    if out.is_empty() {
        // A zero-length operation still reaches the target (remote CQ data).
        let r = remote.first().copied().unwrap_or_default();
        out.push(Piece { local: 0, len: 0, raddr: r.addr, key: r.key, cma: false, last: false });
    }
    if let Some(p) = out.last_mut() {
        p.last = true;
    }
    out
}

fn sum(v: &[Iov]) -> Option<usize> {
    v.iter().try_fold(0usize, |a, x| a.checked_add(x.len))
}

/// Copies the bytes named by `v` into one vector.
///
/// # Safety
/// Every iov is readable.
unsafe fn gather(v: &[Iov], out: &mut Vec<u8>) {
    for x in v {
        if x.len > 0 {
            // SAFETY: caller.
            out.extend_from_slice(unsafe { std::slice::from_raw_parts(x.base as *const u8, x.len) });
        }
    }
}

/// One ring cell's payload.
const CELL_PAYLOAD: usize = 4096;

impl EpState {
    fn cma_for(&self, peer: PeerId) -> bool {
        !self.rma.cma_off && !self.rma.no_cma.contains(&peer)
    }

    /// Payload bytes per request: what one ring cell carries, so that a
    /// compare atomic (operand and compare value) still fits the 8 KiB
    /// staging buffers even though the transport's eager limit is larger.
    fn chunk(&self, peer: PeerId) -> Result<usize> {
        Ok(self.tp.inline_max(peer)?.min(CELL_PAYLOAD).saturating_sub(REQ_HDR).max(16))
    }

    /// Common admission: enabled, peer, CQ room, a free op slot.
    fn admit(&mut self, dest: u64, complete: bool) -> Result<(PeerId, usize)> {
        if !self.enabled {
            return Err(Error(FI_EOPBADSTATE));
        }
        let peer = self.peer(dest)?;
        if complete && Self::room(&self.tx_cq) == 0 {
            self.progress();
            return Err(EAGAIN);
        }
        match self.rma.ops.iter().position(Option::is_none) {
            Some(i) => Ok((peer, i)),
            None => {
                self.progress();
                Err(EAGAIN)
            }
        }
    }

    fn peer_key(&self, dest: u64) -> u64 {
        self.av.as_ref().and_then(|av| av.addr(dest)).map_or(0, |a| a.key())
    }
    fn peer_proc(&self, dest: u64) -> (u32, u64) {
        self.av.as_ref().and_then(|av| av.addr(dest)).map_or((0, 0), |a| (a.pid, a.start_time))
    }

    /// At most every `FI_SHM_PEER_CHECK_MS` of pumping with requests
    /// outstanding: operations whose target process is gone fail with
    /// ECONNRESET instead of waiting forever.
    pub(super) fn check_targets(&mut self) {
        if self.rma.inflight == 0 {
            return;
        }
        let now = crate::endpoint::coarse_ns();
        if now.saturating_sub(self.rma.last_check_ns) <= self.tp.peer_check_ns() {
            return;
        }
        self.rma.last_check_ns = now;
        for idx in 0..self.rma.ops.len() {
            let dead = match self.rma.ops[idx].as_ref() {
                Some(op) if op.acked < op.next && op.peer_proc.0 != 0 => {
                    !crate::segment::pid_alive(op.peer_proc.0, op.peer_proc.1) && !self.tp.holds_entries_from(op.peer_key)
                }
                _ => false,
            };
            if dead {
                if let Some(key) = self.rma.ops[idx].as_ref().map(|op| op.peer_key) {
                    self.tp.mark_gone(key);
                }
                if let Some(op) = self.rma.ops[idx].as_mut() {
                    let issued = op.next - op.acked;
                    self.rma.inflight = self.rma.inflight.saturating_sub(issued);
                    op.next = op.pieces.len();
                    op.acked = op.pieces.len();
                    op.err.get_or_insert(crate::err_connreset());
                }
                self.rma.queue.retain(|&i| i != idx);
                self.maybe_finish(idx);
            }
        }
    }

    fn start(&mut self, idx: usize, mut op: Op) {
        self.rma.gen = self.rma.gen.wrapping_add(1);
        op.gen = self.rma.gen;
        self.rma.ops[idx] = Some(op);
        self.rma.queue.push_back(idx);
        self.rma_pump();
    }

    /// # Safety
    /// `Endpoint::rma_write` / `rma_read` contract.
    pub(super) unsafe fn rma_submit(&mut self, write: bool, o: &RmaOp<'_>) -> Result<()> {
        if o.iov.len() > IOV_LIMIT || o.rma.len() > IOV_LIMIT || o.rma.is_empty() {
            return Err(EINVAL);
        }
        let len = sum(o.iov).ok_or(EINVAL)?;
        if o.rma.iter().try_fold(0usize, |a, x| a.checked_add(x.len)) != Some(len) {
            return Err(EINVAL);
        }
        let inject = write && (o.no_completion || o.flags & FI_INJECT != 0);
        if inject && len > crate::provider::INJECT_SIZE {
            return Err(EINVAL);
        }
        let complete = !o.no_completion && (!self.tx_selective || o.flags & FI_COMPLETION != 0);
        let (peer, idx) = self.admit(o.dest, complete)?;
        let chunk = self.chunk(peer)?;
        let cma = self.cma_for(peer);
        let mut owned = Vec::new();
        let pieces = if inject {
            // SAFETY: the iovs are readable during this call.
            unsafe { gather(o.iov, &mut owned) };
            let one = [Iov { base: owned.as_ptr() as usize, len: owned.len() }];
            pieces_of(&one, o.rma, cma, chunk)
        } else {
            pieces_of(o.iov, o.rma, cma, chunk)
        };
        let op = Op {
            gen: 0,
            peer,
            peer_key: self.peer_key(o.dest),
            peer_proc: self.peer_proc(o.dest),
            kind: if write { OpKind::Write } else { OpKind::Read },
            ctx: o.context,
            complete,
            data: o.data,
            remote_data: write && o.flags & FI_REMOTE_CQ_DATA != 0,
            pieces,
            next: 0,
            acked: 0,
            err: None,
            owned,
            result: Vec::new(),
            res_iov: Vec::new(),
            aop: 0,
            adt: 0,
        };
        self.start(idx, op);
        Ok(())
    }

    /// # Safety
    /// `Endpoint::atomic` contract.
    pub(super) unsafe fn atomic_submit(&mut self, a: &AtomicOp<'_>) -> Result<()> {
        let size = atomic::type_size(a.datatype).ok_or(Error(FI_EOPNOTSUPP))?;
        if !atomic::supported(a.kind, a.op, a.datatype) {
            return Err(Error(FI_EOPNOTSUPP));
        }
        if a.iov.len() > IOV_LIMIT || a.rma.len() > IOV_LIMIT || a.compare.len() > IOV_LIMIT || a.result.len() > IOV_LIMIT || a.rma.is_empty() {
            return Err(EINVAL);
        }
        let count = a.rma.iter().try_fold(0usize, |s, x| s.checked_add(x.len)).ok_or(EINVAL)?;
        if count == 0 {
            return Err(EINVAL);
        }
        if count > ATOMIC_MAX_BYTES / size {
            return Err(Error(FI_EMSGSIZE));
        }
        let bytes = count * size;
        if a.op != FI_ATOMIC_READ && sum(a.iov) != Some(bytes) {
            return Err(EINVAL);
        }
        if a.kind == AKind::Compare && sum(a.compare) != Some(bytes) {
            return Err(EINVAL);
        }
        if a.kind != AKind::Write && sum(a.result) != Some(bytes) {
            return Err(EINVAL);
        }
        let complete = !a.no_completion && (!self.tx_selective || a.flags & FI_COMPLETION != 0);
        let (peer, idx) = self.admit(a.dest, complete)?;
        let mut owned = Vec::with_capacity(2 * bytes);
        if a.op == FI_ATOMIC_READ {
            owned.resize(bytes, 0);
        } else {
            // SAFETY: operand buffers are readable (contract).
            unsafe { gather(a.iov, &mut owned) };
        }
        if a.kind == AKind::Compare {
            // SAFETY: compare buffers are readable (contract).
            unsafe { gather(a.compare, &mut owned) };
        }
        let mut pieces = Vec::with_capacity(a.rma.len());
        let mut off = 0;
        for r in a.rma {
            if r.len == 0 {
                continue;
            }
            pieces.push(Piece { local: off, len: r.len * size, raddr: r.addr, key: r.key, cma: false, last: false });
            off += r.len * size;
        }
        if let Some(p) = pieces.last_mut() {
            p.last = true;
        }
        let op = Op {
            gen: 0,
            peer,
            peer_key: self.peer_key(a.dest),
            peer_proc: self.peer_proc(a.dest),
            kind: OpKind::Atomic(a.kind),
            ctx: a.context,
            complete,
            data: a.data,
            remote_data: a.flags & FI_REMOTE_CQ_DATA != 0,
            pieces,
            next: 0,
            acked: 0,
            err: None,
            owned,
            result: if a.kind == AKind::Write { Vec::new() } else { vec![0u8; bytes] },
            res_iov: a.result.to_vec(),
            aop: a.op,
            adt: a.datatype,
        };
        self.start(idx, op);
        Ok(())
    }

    /// Builds the request of piece `pi` of op `idx` into `buf`; returns its length.
    fn request(&self, idx: usize, pi: usize, buf: &mut [u8]) -> usize {
        let Some(op) = self.rma.ops[idx].as_ref() else { return 0 };
        let p = op.pieces[pi];
        buf[..REQ_HDR].fill(0);
        let (kind, akind) = match op.kind {
            OpKind::Write => (K_WRITE, 0),
            OpKind::Read => (K_READ, 0),
            OpKind::Atomic(k) => (K_ATOMIC, akind_code(k)),
        };
        buf[0] = kind;
        buf[1] = if p.cma { M_CMA } else { M_INLINE };
        buf[2] = akind;
        buf[3] = if op.remote_data { RF_DATA } else { 0 } | if p.last { RF_LAST } else { 0 };
        buf[4..8].copy_from_slice(&op.aop.to_ne_bytes());
        buf[8..12].copy_from_slice(&op.adt.to_ne_bytes());
        if kind == K_WRITE && p.last && op.remote_data {
            // The whole write's length, for the target's CQ data completion.
            put64(buf, 4, op.pieces.iter().map(|x| x.len as u64).sum());
        }
        let size = atomic::type_size(op.adt).unwrap_or(1);
        buf[12..16].copy_from_slice(&((p.len / size) as u32).to_ne_bytes());
        put64(buf, 16, p.key);
        put64(buf, 24, p.raddr);
        put64(buf, 32, p.len as u64);
        put64(buf, 40, p.local as u64);
        buf[48..80].copy_from_slice(&self.tp.address().to_bytes());
        let mut n = REQ_HDR;
        match op.kind {
            OpKind::Write if !p.cma && p.len > 0 => {
                // SAFETY: the op's local buffer is readable until it
                // completes (or is our own inject copy).
                let src = unsafe { std::slice::from_raw_parts(p.local as *const u8, p.len) };
                rfabric_core::copy::copy_slice(&mut buf[n..n + p.len], src);
                n += p.len;
            }
            OpKind::Atomic(k) => {
                let total = op.pieces.iter().map(|x| x.len).sum::<usize>();
                rfabric_core::copy::copy_slice(&mut buf[n..n + p.len], &op.owned[p.local..p.local + p.len]);
                n += p.len;
                if k == AKind::Compare {
                    rfabric_core::copy::copy_slice(&mut buf[n..n + p.len], &op.owned[total + p.local..total + p.local + p.len]);
                    n += p.len;
                }
            }
            _ => {}
        }
        n
    }

    /// At close: posts the replies and delivery-complete acks still queued
    /// behind full rings, so initiators and senders that are waiting for
    /// them get them. Bounded: a peer that does not drain its ring within
    /// `CLOSE_FLUSH_NS` keeps waiting until it sees us gone (ECONNRESET).
    pub(super) fn flush_replies(&mut self) {
        let end = crate::endpoint::coarse_ns() + CLOSE_FLUSH_NS;
        while !self.rma.replies.is_empty() && crate::endpoint::coarse_ns() < end {
            let before = self.rma.replies.len();
            self.rma_pump_busy();
            if self.rma.replies.len() == before {
                std::thread::yield_now();
            }
        }
    }

    /// Issues queued pieces while the window allows; posts queued replies.
    /// Every progress call comes here, so the test for "no RMA at all" is
    /// inlined and the work (with its 8 KiB buffer) is not.
    #[inline]
    pub(super) fn rma_pump(&mut self) {
        if self.rma.inflight > 0 || !self.rma.replies.is_empty() || !self.rma.queue.is_empty() {
            self.rma_pump_busy();
        }
    }

    #[inline(never)]
    fn rma_pump_busy(&mut self) {
        if self.rma.replies.is_empty() && self.rma.queue.is_empty() {
            return;
        }
        // In order per initiator: one whose ring is full holds back its
        // own later replies, not those of other initiators.
        let mut full: Vec<PeerId> = Vec::new();
        let mut i = 0;
        while i < self.rma.replies.len() {
            if full.contains(&self.rma.replies[i].0) {
                i += 1;
                continue;
            }
            let Some((peer, hdr, mut data)) = self.rma.replies.remove(i) else { break };
            if let Some((hdr, keep)) = self.post_reply(peer, hdr, &data) {
                if !keep {
                    data = Vec::new();
                }
                self.rma.replies.insert(i, (peer, hdr, data));
                full.push(peer);
                i += 1;
            }
        }
        let mut buf = [0u8; 8192];
        while self.rma.inflight < WINDOW {
            let Some(&idx) = self.rma.queue.front() else { break };
            let Some(op) = self.rma.ops[idx].as_ref() else {
                self.rma.queue.pop_front();
                continue;
            };
            if op.next >= op.pieces.len() {
                self.rma.queue.pop_front();
                continue;
            }
            let (pi, peer, gen, data) = (op.next, op.peer, op.gen, op.data);
            let n = self.request(idx, pi, &mut buf);
            let hdr = MsgHeader { flags: UF_RMA, tag: token(gen, idx, pi), cq_data: data };
            match self.tp.send_inline(peer, &hdr, &buf[..n]) {
                Ok(()) => {
                    self.rma.inflight += 1;
                    if let Some(op) = self.rma.ops[idx].as_mut() {
                        op.next += 1;
                    }
                }
                Err(e) if e == EAGAIN => break,
                Err(e) => {
                    // The peer is gone (or the request is malformed): every
                    // piece not yet issued fails now.
                    if let Some(op) = self.rma.ops[idx].as_mut() {
                        let left = op.pieces.len() - op.next;
                        op.next = op.pieces.len();
                        op.acked += left;
                        op.err.get_or_insert(e);
                    }
                    self.rma.queue.pop_front();
                    self.maybe_finish(idx);
                }
            }
        }
    }

    fn maybe_finish(&mut self, idx: usize) {
        let done = self.rma.ops[idx].as_ref().is_some_and(|o| o.acked >= o.pieces.len());
        if !done {
            return;
        }
        let Some(op) = self.rma.ops[idx].take() else { return };
        let res = match op.err {
            Some(e) => Err(e),
            None => Ok(()),
        };
        if res.is_ok() && !op.result.is_empty() {
            let mut at = 0;
            for v in &op.res_iov {
                let n = v.len.min(op.result.len() - at);
                if n > 0 {
                    // SAFETY: result buffers are writable until completion.
                    unsafe { rfabric_core::copy::copy_bytes(op.result.as_ptr().add(at), v.base as *mut u8, n) };
                }
                at += n;
            }
        }
        let (flags, cntr) = match op.kind {
            OpKind::Write => (FI_RMA | FI_WRITE, self.rma.write_cntr.as_ref()),
            OpKind::Read => (FI_RMA | FI_READ, self.rma.read_cntr.as_ref()),
            OpKind::Atomic(AKind::Write) => (FI_ATOMIC | FI_WRITE, self.rma.write_cntr.as_ref()),
            OpKind::Atomic(_) => (FI_ATOMIC | FI_READ, self.rma.read_cntr.as_ref()),
        };
        if let Some(c) = cntr {
            if res.is_ok() {
                c.c.add(1);
            } else {
                c.c.adderr(1);
            }
        }
        let Some(cq) = self.tx_cq.as_ref() else { return };
        let base = Completion { op_context: op.ctx, flags, src_addr: FI_ADDR_NOTAVAIL, ..Completion::default() };
        match res {
            Ok(()) if op.complete => cq.write(base),
            Ok(()) => {}
            Err(e) => cq.write_err(ErrCompletion { base, err: e.0, prov_errno: e.0, ..ErrCompletion::default() }),
        }
    }

    /// An RMA request or reply arrived. Not inlined: its buffers would
    /// otherwise enlarge the stack frame of every progress call.
    #[inline(never)]
    pub(super) fn rma_arrival(&mut self, inc: Incoming) {
        let mut buf = [0u8; 8192];
        if !matches!(inc.kind, Kind::Inline { .. }) || inc.len as usize > buf.len() {
            self.tp.discard(&inc);
            return;
        }
        let n = match self.tp.recv_inline(&inc, &mut buf) {
            Ok(n) => n,
            Err(_) => return,
        };
        if inc.hdr.flags & UF_REPLY != 0 {
            self.on_reply(&inc, &buf[..n]);
        } else {
            self.on_request(&inc, &buf[..n]);
        }
    }

    fn on_reply(&mut self, inc: &Incoming, payload: &[u8]) {
        let t = inc.hdr.tag;
        let (gen, idx, pi) = ((t >> 40) as u32, ((t >> 32) & 0xff) as usize, t as u32 as usize);
        let (p, peer, kind) = match self.rma.ops.get(idx) {
            Some(Some(op)) if op.gen & 0xff_ffff == gen && pi < op.next && (op.peer_key == 0 || op.peer_key == inc.src_key) => (op.pieces[pi], op.peer, op.kind),
            _ => {
                rfabric_core::fi_warn!("shm", FI_LOG_EP_DATA, "shm: stray RMA reply dropped");
                return;
            }
        };
        self.rma.inflight = self.rma.inflight.saturating_sub(1);
        let status = inc.hdr.cq_data;
        if status == ST_REFUSED && p.cma {
            // The target cannot use CMA with us: send this piece inline.
            let chunk = self.chunk(peer).unwrap_or(1024);
            let mut more = Vec::new();
            cut(&mut more, p.local, p.len, p.raddr, p.key, false, chunk);
            if let Some(l) = more.last_mut() {
                l.last = p.last;
            }
            if let Some(Some(op)) = self.rma.ops.get_mut(idx) {
                op.acked += 1;
                op.pieces.extend(more);
            }
            if !self.rma.no_cma.contains(&peer) {
                self.rma.no_cma.push(peer);
            }
            if !self.rma.queue.contains(&idx) {
                self.rma.queue.push_back(idx);
            }
            self.rma_pump();
            return;
        }
        let Some(Some(op)) = self.rma.ops.get_mut(idx) else { return };
        if status != 0 {
            let code = if status > i32::MAX as u64 { libc::EIO } else { status as i32 };
            op.err.get_or_insert(Error(code));
        } else {
            match kind {
                OpKind::Read if !p.cma => {
                    if payload.len() == p.len {
                        if p.len > 0 {
                            // SAFETY: the read's local buffer is writable until completion.
                            unsafe { rfabric_core::copy::copy_bytes(payload.as_ptr(), p.local as *mut u8, p.len) };
                        }
                    } else {
                        op.err.get_or_insert(crate::err_io());
                    }
                }
                OpKind::Atomic(k) if k != AKind::Write => {
                    if payload.len() == p.len && p.local + p.len <= op.result.len() {
                        rfabric_core::copy::copy_slice(&mut op.result[p.local..p.local + p.len], payload);
                    } else {
                        op.err.get_or_insert(crate::err_io());
                    }
                }
                _ => {}
            }
        }
        op.acked += 1;
        self.maybe_finish(idx);
        self.rma_pump();
    }

    /// Sends a reply (or a delivery-complete ack queued with them) now.
    /// `None`: sent, or nobody is left to receive it. `Some((hdr, keep))`:
    /// the initiator's ring is full; send `hdr` later, with the payload if
    /// `keep`. A reply refused for another reason (its payload no longer
    /// fits what the initiator's ring takes, say) is not lost: its status
    /// goes alone (the error code when the status was success), so the
    /// initiator's operation ends with an error completion instead of
    /// waiting forever.
    pub(super) fn post_reply(&mut self, peer: PeerId, hdr: MsgHeader, data: &[u8]) -> Option<(MsgHeader, bool)> {
        let e = match self.reply_send(peer, &hdr, data) {
            Ok(()) => return None,
            Err(e) if e == EAGAIN => return Some((hdr, true)),
            Err(e) => e,
        };
        if e.0 == libc::ECONNRESET {
            rfabric_core::fi_warn!("shm", FI_LOG_EP_DATA, "shm: RMA reply or ack not sent: the initiator's process is gone");
            return None;
        }
        if hdr.flags & UF_REPLY == 0 {
            // A delivery-complete ack: it has no payload to leave out.
            rfabric_core::fi_warn!("shm", FI_LOG_EP_DATA, "shm: delivery-complete ack not sent ({})", e);
            return None;
        }
        let bare = MsgHeader { cq_data: if hdr.cq_data != 0 { hdr.cq_data } else { e.0.max(1) as u64 }, ..hdr };
        rfabric_core::fi_warn!("shm", FI_LOG_EP_DATA, "shm: RMA reply not sent ({}); sending its status {} alone", e, bare.cq_data);
        match self.reply_send(peer, &bare, &[]) {
            Ok(()) => None,
            Err(e) if e == EAGAIN => Some((bare, false)),
            Err(e) => {
                rfabric_core::fi_warn!("shm", FI_LOG_EP_DATA, "shm: RMA reply status not sent either ({}); the initiator's operation is left to its target check", e);
                None
            }
        }
    }

    /// Sends a reply or a queued ack (tests can make it fail first).
    fn reply_send(&mut self, peer: PeerId, hdr: &MsgHeader, data: &[u8]) -> Result<()> {
        #[cfg(test)]
        if hdr.flags & UF_REPLY != 0 {
            if let Some(e) = self.rma.fail_replies.pop_front() {
                return Err(e);
            }
        }
        self.tp.send_inline(peer, hdr, data)
    }

    /// The peer to answer a request from, attaching on first contact.
    fn reply_peer(&mut self, inc: &Incoming, addr_bytes: &[u8]) -> Option<PeerId> {
        if let Some(&p) = self.rma.by_key.get(&inc.src_key) {
            return Some(p);
        }
        let a = Address::from_bytes(addr_bytes).ok()?;
        if a.key() != inc.src_key {
            return None;
        }
        let p = self.tp.attach(&a).ok()?;
        self.rma.by_key.insert(inc.src_key, p);
        Some(p)
    }

    fn on_request(&mut self, inc: &Incoming, req: &[u8]) {
        if req.len() < REQ_HDR {
            rfabric_core::fi_warn!("shm", FI_LOG_EP_DATA, "shm: short RMA request dropped");
            return;
        }
        let Some(peer) = self.reply_peer(inc, &req[48..80]) else {
            rfabric_core::fi_warn!("shm", FI_LOG_EP_DATA, "shm: RMA request from an unknown sender dropped");
            return;
        };
        let mut out = [0u8; 8192];
        // The initiator named in the request is whose memory a CMA piece
        // reads or writes: it must be the peer the reply goes to, not any
        // process the request names.
        let named = Address::from_bytes(&req[48..80]).ok();
        let (status, out_len, event) =
            if named.is_some() && named == self.tp.peer_address(peer) { self.execute(inc, req, &mut out) } else { (libc::EINVAL as u64, 0, None) };
        let hdr = MsgHeader { flags: UF_RMA | UF_REPLY, tag: inc.hdr.tag, cq_data: status };
        let limit = self.tp.inline_max(peer).unwrap_or(0);
        let (hdr, out_len) = if out_len > limit { (MsgHeader { cq_data: libc::EMSGSIZE as u64, ..hdr }, 0) } else { (hdr, out_len) };
        if status == 0 {
            if let Some((remote_write, remote_data)) = event {
                self.target_event(inc, req, remote_write, remote_data);
            }
        }
        let payload = &out[..out_len];
        if self.rma.replies.iter().any(|r| r.0 == peer) {
            self.rma.replies.push_back((peer, hdr, payload.to_vec()));
            return;
        }
        if let Some((hdr, keep)) = self.post_reply(peer, hdr, payload) {
            self.rma.replies.push_back((peer, hdr, if keep { payload.to_vec() } else { Vec::new() }));
        }
    }

    /// Counters and the remote CQ data completion of a served request.
    fn target_event(&mut self, inc: &Incoming, req: &[u8], remote_write: bool, remote_data: bool) {
        let c = if remote_write { self.rma.rwrite_cntr.as_ref() } else { self.rma.rread_cntr.as_ref() };
        if let Some(c) = c {
            c.c.add(1);
        }
        if remote_data {
            let src = self.src_of(inc.src_key);
            let class = if req[0] == K_ATOMIC { FI_ATOMIC } else { FI_RMA };
            // fi_cq(3): len is the length written for a write with remote CQ data.
            let len = if req[0] == K_WRITE { get64(req, 4) as usize } else { 0 };
            if let Some(cq) = self.rx_cq.as_ref() {
                cq.write(Completion {
                    op_context: 0,
                    flags: FI_REMOTE_CQ_DATA | class | FI_REMOTE_WRITE,
                    len,
                    buf: 0,
                    data: inc.hdr.cq_data,
                    tag: 0,
                    src_addr: src,
                });
            }
        }
    }

    /// Runs one request against our registered memory. Returns the status,
    /// the reply payload length in `out`, and on the last piece of an
    /// operation which remote event it produces (remote write?, CQ data?).
    fn execute(&mut self, _inc: &Incoming, req: &[u8], out: &mut [u8]) -> (u64, usize, Option<(bool, bool)>) {
        let kind = req[0];
        let mode = req[1];
        let rflags = req[3];
        let key = get64(req, 16);
        let raddr = get64(req, 24);
        let Ok(len) = usize::try_from(get64(req, 32)) else { return (libc::EINVAL as u64, 0, None) };
        let laddr = get64(req, 40);
        let Ok(initiator) = Address::from_bytes(&req[48..80]) else { return (libc::EINVAL as u64, 0, None) };
        let pid = initiator.pid;
        let body = &req[REQ_HDR..];
        let (access, akind) = match kind {
            K_WRITE => (FI_REMOTE_WRITE, None),
            K_READ => (FI_REMOTE_READ, None),
            K_ATOMIC => {
                let Some(k) = akind_from(req[2]) else { return (libc::EINVAL as u64, 0, None) };
                let op = get32(req, 4);
                let a = match (k, op) {
                    (_, FI_ATOMIC_READ) => FI_REMOTE_READ,
                    (AKind::Write, _) => FI_REMOTE_WRITE,
                    _ => FI_REMOTE_READ | FI_REMOTE_WRITE,
                };
                (a, Some(k))
            }
            _ => return (libc::EINVAL as u64, 0, None),
        };
        let target = {
            let Some(mr) = self.rma.mr.as_ref() else { return (libc::EINVAL as u64, 0, None) };
            let reg = mr.lock();
            match reg.verify(key, raddr, len, access) {
                Ok(off) => reg.get(key).map_or(0, |r| r.base + off),
                Err(e) => return (e.0 as u64, 0, None),
            }
        };
        #[cfg(test)]
        if mode == M_CMA && tests::REFUSE.load(std::sync::atomic::Ordering::Relaxed) {
            tests::REFUSED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return (ST_REFUSED, 0, None);
        }
        let event_write = access & FI_REMOTE_WRITE != 0;
        let event = (rflags & RF_LAST != 0).then_some((event_write, rflags & RF_DATA != 0 && event_write));
        match kind {
            K_WRITE => {
                if mode == M_CMA {
                    if len > 0 {
                        // SAFETY: verify() placed [target, target+len) inside
                        // a region the application registered for remote
                        // writes; it stays valid while registered.
                        if let Err(f) = unsafe { cma::read_from(pid, target as *mut u8, laddr, len) } {
                            return (cma_status(f), 0, None);
                        }
                    }
                } else {
                    if body.len() != len {
                        return (libc::EINVAL as u64, 0, None);
                    }
                    if len > 0 {
                        // SAFETY: as above; body holds len bytes.
                        unsafe { rfabric_core::copy::copy_bytes(body.as_ptr(), target as *mut u8, len) };
                    }
                }
                (0, 0, event)
            }
            K_READ => {
                if mode == M_CMA {
                    if len > 0 {
                        // SAFETY: verify() placed the range inside a region
                        // registered for remote reads.
                        if let Err(f) = unsafe { cma::write_to(pid, target as *const u8, laddr, len) } {
                            return (cma_status(f), 0, None);
                        }
                    }
                    (0, 0, event)
                } else {
                    if len > out.len() {
                        return (libc::EMSGSIZE as u64, 0, None);
                    }
                    if len > 0 {
                        // SAFETY: as above; out holds len bytes.
                        unsafe { rfabric_core::copy::copy_bytes(target as *const u8, out.as_mut_ptr(), len) };
                    }
                    (0, len, event)
                }
            }
            _ => {
                let Some(k) = akind else { return (libc::EINVAL as u64, 0, None) };
                let op = get32(req, 4);
                let dt = get32(req, 8);
                let count = get32(req, 12) as usize;
                let Some(size) = atomic::type_size(dt) else { return (FI_EOPNOTSUPP as u64, 0, None) };
                if count.checked_mul(size) != Some(len) || len > ATOMIC_MAX_BYTES {
                    return (libc::EINVAL as u64, 0, None);
                }
                let need = if k == AKind::Compare { 2 * len } else { len };
                if body.len() != need {
                    return (libc::EINVAL as u64, 0, None);
                }
                let (operand, compare) = body.split_at(len);
                let fetch = k != AKind::Write;
                // SAFETY: verify() placed the range inside a registered
                // region, valid while registered. Other endpoints (of this
                // or another domain, served by other threads) may run
                // atomics on the same bytes now: apply_shared makes each
                // element one hardware atomic or takes the element's
                // address lock, never a plain read-modify-write.
                let r = unsafe { atomic::apply_shared(k, op, dt, count, target as *mut u8, operand, compare, if fetch { Some(&mut out[..len]) } else { None }) };
                match r {
                    Ok(()) => (0, if fetch { len } else { 0 }, event),
                    Err(e) => (e.0 as u64, 0, None),
                }
            }
        }
    }

}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::ShmDomain;
    use rfabric_core::info::DomainAttr;
    use rfabric_core::objects::cq::CqAttr;
    use rfabric_core::provider::{AtomicKind, AvAttr, CompletionQueue, Domain};

    /// Makes targets answer every CMA piece as if the kernel refused CMA.
    pub(super) static REFUSE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    pub(super) static REFUSED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

    struct Setup {
        d: ShmDomain,
        cq: Arc<dyn CompletionQueue>,
        a: Box<dyn Endpoint>,
        b: Box<dyn Endpoint>,
        to_b: u64,
    }

    fn setup(mr_mode: i32) -> Setup {
        let mut info = Info { caps: FI_MSG | FI_RMA | FI_ATOMIC, ..Info::default() };
        info.domain_attr = Some(DomainAttr { mr_key_size: 8, mr_mode, ..DomainAttr::default() });
        let d = ShmDomain::new(&info).unwrap();
        let cq = d.cq_open(&CqAttr { size: 64, format: FI_CQ_FORMAT_DATA, wait_obj: FI_WAIT_NONE }).unwrap();
        let av = d.av_open(&AvAttr { kind: FI_AV_TABLE, count: 4, flags: 0 }).unwrap();
        let a = d.endpoint(&info).unwrap();
        let b = d.endpoint(&info).unwrap();
        for ep in [&a, &b] {
            ep.bind(Bind::Av(&av), 0).unwrap();
            ep.bind(Bind::Cq(&cq), FI_TRANSMIT | FI_RECV).unwrap();
            ep.enable().unwrap();
        }
        let mut nb = [0u8; 64];
        let lb = b.getname(&mut nb).unwrap();
        let mut out = [0u64; 1];
        av.insert(&[&nb[..lb]], Some(&mut out), 0).unwrap();
        Setup { d, cq, a, b, to_b: out[0] }
    }

    /// Next completion: Ok((context, flags, data)) or Err(error code).
    fn next(cq: &Arc<dyn CompletionQueue>) -> std::result::Result<(usize, u64, u64), i32> {
        let mut raw = [0u8; 40];
        for _ in 0..2_000_000 {
            match cq.read(&mut raw, 1, None) {
                Ok(_) => {
                    let w = |i: usize| u64::from_ne_bytes(raw[i * 8..i * 8 + 8].try_into().unwrap());
                    return Ok((w(0) as usize, w(1), w(4)));
                }
                Err(e) if e.0 == FI_EAVAIL => {
                    let (e, _) = cq.readerr(None, fi_version(1, 17)).unwrap();
                    return Err(e.err);
                }
                Err(_) => {}
            }
        }
        panic!("no completion");
    }

    #[allow(clippy::too_many_arguments)] // one argument per field of the operation
    fn rma(ep: &dyn Endpoint, write: bool, buf: &mut [u8], dest: u64, addr: u64, key: u64, ctx: usize, flags: u64, data: u64) -> Result<()> {
        let iov = [Iov { base: buf.as_mut_ptr() as usize, len: buf.len() }];
        let r = [RmaIov { addr, len: buf.len(), key }];
        let op = RmaOp { iov: &iov, desc: rfabric_core::provider::Descs::NONE, rma: &r, dest, context: ctx, data, flags, no_completion: false };
        // SAFETY: buf outlives the completion in these tests.
        unsafe {
            if write {
                ep.rma_write(&op)
            } else {
                ep.rma_read(&op)
            }
        }
    }

    /// A reply that cannot be sent (for a reason other than a full ring)
    /// still ends the initiator's operation: its status goes alone, and the
    /// initiator gets an error completion instead of waiting forever.
    #[test]
    fn failed_reply_sends_still_complete() {
        let mut info = Info { caps: FI_MSG | FI_RMA | FI_ATOMIC, ..Info::default() };
        info.domain_attr = Some(DomainAttr { mr_key_size: 8, mr_mode: (FI_MR_VIRT_ADDR | FI_MR_PROV_KEY) as i32, ..DomainAttr::default() });
        let d = ShmDomain::new(&info).unwrap();
        let cq = d.cq_open(&CqAttr { size: 64, format: FI_CQ_FORMAT_DATA, wait_obj: FI_WAIT_NONE }).unwrap();
        let av = d.av_open(&AvAttr { kind: FI_AV_TABLE, count: 4, flags: 0 }).unwrap();
        let a = d.endpoint(&info).unwrap();
        let b = d.endpoint_with(&info, 16).unwrap();
        for ep in [&*a, &b as &dyn Endpoint] {
            ep.bind(Bind::Av(&av), 0).unwrap();
            ep.bind(Bind::Cq(&cq), FI_TRANSMIT | FI_RECV).unwrap();
            ep.enable().unwrap();
        }
        let mut nb = [0u8; 64];
        let lb = b.getname(&mut nb).unwrap();
        let mut out = [0u64; 1];
        av.insert(&[&nb[..lb]], Some(&mut out), 0).unwrap();
        let to_b = out[0];
        let mut target = vec![7u8; 4096];
        let req = rfabric_core::provider::MrReq { addr: target.as_mut_ptr() as usize, len: target.len(), access: FI_REMOTE_READ | FI_REMOTE_WRITE, ..Default::default() };
        let key = d.mr_reg(&req).unwrap().key;
        let base = target.as_ptr() as u64;
        let fail = |errs: &[i32]| b.shared.st.lock().rma.fail_replies.extend(errs.iter().map(|&e| Error(e)));
        let mut buf = [0u8; 100];
        // Sent at once: the refused reply goes again as its status alone.
        fail(&[libc::EINVAL]);
        rma(&*a, false, &mut buf, to_b, base, key, 21, 0, 0).unwrap();
        assert_eq!(next(&cq), Err(libc::EINVAL));
        // Queued behind a full ring, then refused.
        fail(&[libc::EAGAIN, libc::EINVAL]);
        rma(&*a, false, &mut buf, to_b, base, key, 22, 0, 0).unwrap();
        assert_eq!(next(&cq), Err(libc::EINVAL));
        // Refused, and the status alone meets a full ring: queued, then sent.
        fail(&[libc::EINVAL, libc::EAGAIN]);
        rma(&*a, true, &mut buf, to_b, base, key, 23, 0, 0).unwrap();
        assert_eq!(next(&cq), Err(libc::EINVAL));
        // An atomic's fetched value cannot come back: an error too.
        fail(&[libc::EINVAL]);
        let opd = 1u64.to_ne_bytes();
        let mut res = [0u8; 8];
        let iov = [Iov { base: opd.as_ptr() as usize, len: 8 }];
        let riov = [Iov { base: res.as_mut_ptr() as usize, len: 8 }];
        let r = [RmaIov { addr: base, len: 1, key }];
        let op = AtomicOp { kind: AtomicKind::Fetch, op: FI_SUM, datatype: FI_UINT64, iov: &iov, compare: &[], result: &riov, result_desc: rfabric_core::provider::Descs::NONE, rma: &r, dest: to_b, context: 24, data: 0, flags: 0, no_completion: false };
        // SAFETY: buffers live on this frame until the completion.
        unsafe { a.atomic(&op) }.unwrap();
        assert_eq!(next(&cq), Err(libc::EINVAL));
        // And the endpoint goes on working.
        rma(&*a, false, &mut buf, to_b, base + 200, key, 25, 0, 0).unwrap();
        assert_eq!(next(&cq).unwrap().0, 25);
        assert!(buf.iter().all(|&x| x == 7));
        // The write whose reply failed was applied; only its answer was lost.
        assert!(target[8..100].iter().all(|&x| x == 0));
        assert!(b.shared.st.lock().rma.fail_replies.is_empty());
        drop(target);
    }

    #[test]
    fn write_read_atomic_and_errors() {
        let s = setup((FI_MR_VIRT_ADDR | FI_MR_PROV_KEY) as i32);
        let mut target = vec![0u8; 300_000];
        let req = rfabric_core::provider::MrReq { addr: target.as_mut_ptr() as usize, len: target.len(), access: FI_REMOTE_READ | FI_REMOTE_WRITE, ..Default::default() };
        let key = s.d.mr_reg(&req).unwrap().key;
        let base = target.as_ptr() as u64;
        for len in [1usize, 100, 4016, 4017, 70_000, 300_000] {
            let mut src: Vec<u8> = (0..len).map(|i| (i * 7 + len) as u8).collect();
            rma(&*s.a, true, &mut src, s.to_b, base, key, 11, FI_REMOTE_CQ_DATA, 0xabc).unwrap();
            let mut seen = (false, false);
            while !(seen.0 && seen.1) {
                let c = next(&s.cq).unwrap();
                if c.0 == 11 {
                    assert_eq!(c.1, FI_RMA | FI_WRITE);
                    seen.0 = true;
                } else {
                    assert_eq!((c.1, c.2), (FI_REMOTE_CQ_DATA | FI_RMA | FI_REMOTE_WRITE, 0xabc));
                    seen.1 = true;
                }
            }
            assert_eq!(&target[..len], &src[..]);
            let mut back = vec![0u8; len];
            rma(&*s.a, false, &mut back, s.to_b, base, key, 12, 0, 0).unwrap();
            assert_eq!(next(&s.cq).unwrap().0, 12);
            assert_eq!(back, src);
        }
        let mut small = [0u8; 8];
        rma(&*s.a, true, &mut small, s.to_b, base, key ^ 0x55, 13, 0, 0).unwrap();
        assert_eq!(next(&s.cq), Err(FI_EKEYREJECTED));
        rma(&*s.a, true, &mut small, s.to_b, base + 299_999, key, 14, 0, 0).unwrap();
        assert_eq!(next(&s.cq), Err(libc::EINVAL));
        // Atomic fetch-add on u64.
        target[..8].copy_from_slice(&40u64.to_ne_bytes());
        let opd = 2u64.to_ne_bytes();
        let mut res = [0u8; 8];
        let iov = [Iov { base: opd.as_ptr() as usize, len: 8 }];
        let riov = [Iov { base: res.as_mut_ptr() as usize, len: 8 }];
        let r = [RmaIov { addr: base, len: 1, key }];
        let op = AtomicOp { kind: AtomicKind::Fetch, op: FI_SUM, datatype: FI_UINT64, iov: &iov, compare: &[], result: &riov, result_desc: rfabric_core::provider::Descs::NONE, rma: &r, dest: s.to_b, context: 15, data: 0, flags: 0, no_completion: false };
        // SAFETY: buffers live on this frame until the completion.
        unsafe { s.a.atomic(&op) }.unwrap();
        assert_eq!(next(&s.cq).unwrap(), (15, FI_ATOMIC | FI_READ, 0));
        assert_eq!((u64::from_ne_bytes(res), u64::from_ne_bytes(target[..8].try_into().unwrap())), (40, 42));
        let bad = AtomicOp { op: FI_BOR, datatype: FI_DOUBLE, ..op };
        // SAFETY: rejected before any buffer is used.
        assert_eq!(unsafe { s.a.atomic(&bad) }, Err(Error(FI_EOPNOTSUPP)));
        assert_eq!(s.b.atomic_valid(AtomicKind::Compare, FI_CSWAP, FI_INT32), Ok(256));
        // A target that cannot use CMA: the pieces are sent again inline.
        REFUSE.store(true, std::sync::atomic::Ordering::Relaxed);
        let mut src: Vec<u8> = (0..200_000).map(|i| (i * 3 + 1) as u8).collect();
        rma(&*s.a, true, &mut src, s.to_b, base + 7, key, 16, 0, 0).unwrap();
        assert_eq!(next(&s.cq).unwrap().0, 16);
        assert_eq!(&target[7..200_007], &src[..]);
        let mut back = vec![0u8; 200_000];
        rma(&*s.a, false, &mut back, s.to_b, base + 7, key, 17, 0, 0).unwrap();
        assert_eq!(next(&s.cq).unwrap().0, 17);
        assert_eq!(back, src);
        REFUSE.store(false, std::sync::atomic::Ordering::Relaxed);
        let cma = CmaMode::from_env() != CmaMode::Off;
        assert_eq!(REFUSED.load(std::sync::atomic::Ordering::Relaxed), cma as usize, "one refusal, then inline");
        drop(s.b);
    }
}
