//! Shared copy of large CMA rendezvous receives: the receiver cuts the
//! message into chunks, publishes a claim word in a descriptor of its
//! segment and sends `HELP`; it claims chunks from the front and reads
//! them with `process_vm_readv` while the sender, when it sees `HELP`,
//! claims chunks from the back and writes them with `process_vm_writev`.
//! The receiver sends `FIN` once every claimed chunk is done.

use super::*;

/// Smallest rendezvous receive whose copy both processes share.
pub const SHARED_COPY_MIN: u64 = 256 * 1024;

/// Smallest shared copy while more messages wait in our ring (streaming):
/// below it, one process copying lines it copied last time, from its own
/// cache, beats two processes splitting it. bench/fi_stream, window 64,
/// 5 alternating runs, medians: 256 KiB 30.0 GB/s alone, 25.9 shared;
/// 320, 384 and 448 KiB 29.8-30.1 alone, 34.4-34.8 shared.
pub const SHARED_COPY_QUEUED_MIN: u64 = 320 * 1024;

/// Chunk size of a shared copy of `n` bytes: about 8 chunks, whole pages,
/// between 64 KiB and 1 MiB (small enough that the second process joins
/// early, large enough that one syscall per chunk costs little).
pub fn shared_chunk(n: u64) -> u64 {
    let c = (n / 8).clamp(64 << 10, 1 << 20).next_multiple_of(4096);
    // The claim word counts chunks in 16 bits.
    c.max(n.div_ceil(MAX_SHARED_CHUNKS as u64).next_multiple_of(4096))
}

/// Most chunks one shared copy is cut into (16-bit ends in the claim word).
pub const MAX_SHARED_CHUNKS: u32 = 0xffff;

/// Claim word of a shared-copy descriptor: `tag << 32 | back << 16 |
/// front`. The receiver claims chunk `front` (front + 1), the sender chunk
/// `back - 1` (back - 1), while front < back. Taking the two ends keeps
/// each process on the same part of the buffer from one message to the
/// next: with buffers reused (streaming), a chunk's lines stay in the
/// cache of the core that copied them last time instead of moving to the
/// other one.
#[inline]
pub(crate) fn claim_word(tag: u32, front: u32, back: u32) -> u64 {
    (tag as u64) << 32 | ((back & 0xffff) as u64) << 16 | (front & 0xffff) as u64
}

/// `(tag, front, back)` of a claim word.
#[inline]
pub(crate) fn claim_parts(v: u64) -> (u32, u32, u32) {
    ((v >> 32) as u32, (v as u32) & 0xffff, ((v as u32) >> 16) & 0xffff)
}

/// Chunks handed out so far by claim word `v` of a copy of `nchunks`.
pub(crate) fn claimed_count(v: u64, nchunks: u32) -> u32 {
    let (_, front, back) = claim_parts(v);
    (front + nchunks.saturating_sub(back)).min(nchunks)
}

/// Closes descriptor `desc` to further claims for copy `tag` of `nchunks`
/// chunks. Returns whether it still held that copy, and how many chunks
/// its last claim word had handed out.
fn stop_claims(desc: &crate::segment::HelpDesc, tag: u32, nchunks: u32) -> (bool, u32) {
    let prev = desc.claim.swap(claim_word(tag, 0, 0), Ordering::AcqRel);
    (claim_parts(prev).0 == tag, claimed_count(prev, nchunks))
}

/// Test-only behaviour changes of the shared copy.
#[cfg(test)]
#[derive(Default)]
pub(crate) struct TestHooks {
    /// As receiver: claim no chunk while the sender reports no failure
    /// (so the sender must copy them all).
    pub idle_receiver: bool,
    /// As sender: fail the copy of this chunk as if the kernel refused it.
    pub fail_help_chunk: Option<u32>,
}

/// A CMA receive whose copy the sender shares (see `start_shared`).
#[derive(Clone, Copy)]
pub(super) struct Shared {
    /// Our descriptor (`Segment::help_desc`) and its tag for this message.
    desc: u32,
    tag: u32,
    /// The sender's buffer, the bytes to copy and the chunking.
    src: u64,
    n: u64,
    chunk: u64,
    nchunks: u32,
    /// Chunks handed out: `nchunks`, or fewer when claiming stopped early
    /// after an error.
    claimed: u32,
    /// Chunks that will never be reported done (our failed copies).
    lost: u32,
    /// We already re-copied the chunk the sender reported as failed.
    retried: bool,
    err: Option<Error>,
}

impl Endpoint {
    /// Starts a shared copy of rendezvous message `inc` into `dst`, using
    /// receive-table entry `idx` and our descriptor `d`.
    ///
    /// The message is cut into chunks. Descriptor `d` in our segment holds
    /// the claim word ([`claim_word`]); we claim chunks from the front, the
    /// sender from the back, each with a CAS, and copy each with one
    /// syscall (we `process_vm_readv` from the sender, the sender
    /// `process_vm_writev`s into us), then count it in `done`. HELP tells
    /// the sender the tag, our buffer and the chunking.
    /// When every claimed chunk is done we retire the descriptor (tag 0)
    /// and send FIN, so the sender's buffer is no longer read after its
    /// send completes, and our buffer no longer written after our receive
    /// completes. If the sender never looks at HELP (busy, or not
    /// progressing), we copy every chunk ourselves: never slower than one
    /// plain read.
    ///
    /// # Safety
    /// `dst` must be writable for `dst_len` bytes until the receive's event.
    pub(super) unsafe fn start_shared(&mut self, idx: usize, d: u32, inc: &Incoming, dst: *mut u8, dst_len: usize, ctx: u64) {
        let Kind::Rndv { peer, msg_id, addr, .. } = inc.kind else { return };
        let n = inc.len.min(dst_len as u64);
        let chunk = shared_chunk(n);
        let nchunks = n.div_ceil(chunk) as u32;
        self.help_tag = self.help_tag.wrapping_add(1).max(1);
        let tag = self.help_tag;
        let Some(desc) = self.seg.help_desc(d as usize) else { return };
        desc.done.store(0, Ordering::Relaxed);
        desc.failed.store(0, Ordering::Relaxed);
        desc.claim.store(claim_word(tag, 0, nchunks), Ordering::Release);
        self.help_used |= 1 << d;
        let w = Wire { op: OP_HELP, src_key: self.key, msg_id, aux: d, tag: tag as u64, addr: dst as u64, len: n, cq_data: chunk, ..Wire::default() };
        self.post_ctl(peer, w);
        if let Some(p) = self.peers.get_mut(peer) {
            p.active += 1;
        }
        self.recvs_busy += 1;
        let shared = Shared { desc: d, tag, src: addr, n, chunk, nchunks, claimed: nchunks, lost: 0, retried: false, err: None };
        self.recvs[idx] = RecvOp::started(peer, msg_id, dst, dst_len, inc.len, ctx, None, Some(shared));
        self.pump_shared(idx);
    }

    /// Our side of shared copy `i`: claims and copies chunks until none is
    /// left, re-copies the chunk the sender could not, and completes the
    /// receive once every claimed chunk is accounted for.
    pub(super) fn pump_shared(&mut self, i: usize) {
        let r = self.recvs[i];
        let Some(mut sh) = r.shared else { return };
        let Some(pid) = self.peers.get(r.peer).map(|p| p.addr.pid) else { return };
        let Some(desc) = self.seg.help_desc(sh.desc as usize) else { return };
        let (chunk, n, src, dst) = (sh.chunk, sh.n, sh.src, r.dst);
        let copy = move |c: u32| -> std::result::Result<(), CmaFailure> {
            let off = c as u64 * chunk;
            let l = chunk.min(n - off);
            // SAFETY: off + l <= n <= dst_len: inside the receive buffer,
            // which stays valid until this receive's event.
            unsafe { cma::read_from(pid, dst.add(off as usize), src.wrapping_add(off), l as usize) }
        };
        let fail = |sh: &mut Shared, e: CmaFailure| {
            sh.err = Some(if e == CmaFailure::PeerGone { err_connreset() } else { err_io() });
            sh.lost += 1;
            // Stop all claiming; chunks the sender holds still finish.
            sh.claimed = stop_claims(desc, sh.tag, sh.nchunks).1;
        };
        #[cfg(test)]
        let idle = self.hooks.idle_receiver && desc.failed.load(Ordering::Acquire) == 0;
        #[cfg(not(test))]
        let idle = false;
        while sh.err.is_none() && !idle {
            let v = desc.claim.load(Ordering::Acquire);
            let (t, c, back) = claim_parts(v);
            if t != sh.tag || c >= back.min(sh.nchunks) {
                break;
            }
            if desc.claim.compare_exchange_weak(v, claim_word(t, c + 1, back), Ordering::AcqRel, Ordering::Relaxed).is_err() {
                continue;
            }
            match copy(c) {
                Ok(()) => {
                    desc.done.fetch_add(1, Ordering::Release);
                }
                Err(e) => fail(&mut sh, e),
            }
        }
        let failed = desc.failed.load(Ordering::Acquire);
        if failed != 0 && !sh.retried && sh.err.is_none() {
            sh.retried = true;
            if failed - 1 < sh.nchunks {
                match copy(failed - 1) {
                    Ok(()) => {
                        desc.done.fetch_add(1, Ordering::Release);
                    }
                    Err(e) => fail(&mut sh, e),
                }
            } else {
                sh.err = Some(err_io());
            }
        }
        let helper_pending = u32::from(failed != 0 && !sh.retried);
        // `done` lives in shared memory: the sender may have written any
        // value there, so the sum saturates.
        let accounted = desc.done.load(Ordering::Acquire).saturating_add(sh.lost).saturating_add(helper_pending);
        self.recvs[i].shared = Some(sh);
        if accounted < sh.claimed {
            return;
        }
        let fin = Wire { op: OP_FIN, src_key: self.key, msg_id: r.msg_id, ..Wire::default() };
        match sh.err {
            None => {
                self.post_ctl(r.peer, fin);
                self.finish_recv(i, Ok(sh.n));
            }
            Some(e) => {
                if e != err_connreset() {
                    self.post_ctl(r.peer, Wire { pflags: PF_ERR, ..fin });
                } else if let Some(p) = self.peers.get_mut(r.peer) {
                    p.alive = false;
                }
                self.finish_recv(i, Err(e));
            }
        }
    }

    /// Frees shared-copy descriptor state of receive `i` (its tag is
    /// retired, so a late claim by the sender fails).
    pub(super) fn retire_shared(&mut self, i: usize) {
        if let Some(sh) = self.recvs[i].shared.take() {
            if let Some(desc) = self.seg.help_desc(sh.desc as usize) {
                desc.claim.store(0, Ordering::Release);
            }
            self.help_used &= !(1 << sh.desc);
        }
    }

    /// The sender's side of a shared copy: HELP for our send `idx`.
    /// Claims and writes chunks into the receiver until none is left.
    pub(super) fn help_copy(&mut self, idx: usize, w: &Wire) {
        let op = self.sends[idx];
        let Some(p) = self.peers.get_mut(op.peer) else { return };
        let chunk = w.cq_data;
        // Everything in HELP comes from the peer: stay inside our own
        // buffer whatever it says.
        if p.no_help || !p.alive || w.len > op.len || w.len == 0 || chunk < 4096 || w.len.div_ceil(chunk) > MAX_SHARED_CHUNKS as u64 {
            return;
        }
        let nchunks = w.len.div_ceil(chunk) as u32;
        let pid = p.addr.pid;
        let Some(desc) = p.seg.help_desc(w.aux as usize) else { return };
        let tag = w.tag & 0xffff_ffff;
        let mut refused = false;
        loop {
            let v = desc.claim.load(Ordering::Acquire);
            let (t, front, back) = claim_parts(v);
            if t as u64 != tag || back > nchunks || front >= back {
                break;
            }
            if desc.claim.compare_exchange_weak(v, claim_word(t, front, back - 1), Ordering::AcqRel, Ordering::Relaxed).is_err() {
                continue;
            }
            let c = back - 1;
            let off = c as u64 * chunk;
            let l = chunk.min(w.len - off);
            // SAFETY: off + l <= w.len <= op.len: inside our send buffer,
            // readable until the send completes (send contract), which is
            // after the receiver's FIN.
            let r = unsafe { cma::write_to(pid, op.buf.add(off as usize), w.addr.wrapping_add(off), l as usize) };
            #[cfg(test)]
            let r = if self.hooks.fail_help_chunk == Some(c) { Err(CmaFailure::Refused) } else { r };
            match r {
                Ok(()) => {
                    desc.done.fetch_add(1, Ordering::Release);
                    self.helped_chunks += 1;
                }
                Err(e) => {
                    desc.failed.store(c + 1, Ordering::Release);
                    refused = e == CmaFailure::Refused;
                    break;
                }
            }
        }
        if refused {
            p.no_help = true;
        }
    }

    /// Chunks of shared copies this endpoint wrote into its receivers.
    pub fn helped_chunks(&self) -> u64 {
        self.helped_chunks
    }
}

impl Drop for Endpoint {
    /// A sender may be writing a chunk it claimed into one of our receive
    /// buffers: stop all claiming and wait for those chunks, so nothing is
    /// written into memory the application gets back after this (bounded:
    /// a chunk is one syscall; a dead sender writes nothing).
    fn drop(&mut self) {
        for i in 0..self.recvs.len() {
            let Some(sh) = self.recvs[i].shared else { continue };
            let Some(desc) = self.seg.help_desc(sh.desc as usize) else { continue };
            let claimed = match stop_claims(desc, sh.tag, sh.nchunks) {
                (true, n) => n,
                (false, _) => sh.claimed,
            };
            let pid = self.peers.get(self.recvs[i].peer).map(|p| (p.addr.pid, p.addr.start_time));
            let end = coarse_ns() + 2_000_000_000;
            loop {
                let failed = desc.failed.load(Ordering::Acquire);
                let pending_retry = u32::from(failed != 0 && !sh.retried);
                if desc.done.load(Ordering::Acquire).saturating_add(sh.lost).saturating_add(pending_retry) >= claimed {
                    break;
                }
                if coarse_ns() > end || pid.is_some_and(|(p, t)| !crate::segment::pid_alive(p, t)) {
                    break;
                }
                std::thread::yield_now();
            }
            desc.claim.store(0, Ordering::Release);
        }
    }
}
