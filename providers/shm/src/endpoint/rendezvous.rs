//! Rendezvous: a message above the eager limit is announced by an `RTS`
//! naming the sender's buffer; the receiver pulls it with one
//! `process_vm_readv` (CMA), or, when CMA is off or refused (`NACK`,
//! `BOUNCE`), the sender streams it through a bounce slot of its segment
//! in chunks the receiver copies out. The receiver's `FIN` completes the
//! send. Large CMA receives may be shared with the sender (`shared_copy`).
//! [`Endpoint::send`] is here: it sends eagerly what fits the peer's
//! eager limit and starts a rendezvous for the rest.

use super::*;

const CHUNK_FREE: u32 = 0;
const CHUNK_FULL: u32 = 1;

impl Endpoint {
    /// Sends `len` bytes at `buf`: inline when they fit, otherwise by
    /// rendezvous (CMA or bounce buffers).
    ///
    /// # Safety
    /// `buf` must be readable for `len` bytes. When the result is
    /// `Pending`, the buffer must stay valid and unchanged until the
    /// SendDone/SendError event carrying `ctx` has been returned by `poll`
    /// (or the endpoint is dropped).
    pub unsafe fn send(&mut self, peer: PeerId, hdr: &MsgHeader, buf: *const u8, len: usize, ctx: u64) -> Result<SendStatus> {
        let p = self.peers.get(peer).ok_or(EINVAL)?;
        if len <= self.eager_limit(p) {
            let data = if len == 0 {
                &[][..]
            } else {
                // SAFETY: caller guarantees buf is readable for len bytes.
                unsafe { std::slice::from_raw_parts(buf, len) }
            };
            self.send_inline(peer, hdr, data)?;
            return Ok(SendStatus::Done);
        }
        if !p.alive {
            return Err(err_connreset());
        }
        let bounce = match self.cma {
            CmaMode::Off => true,
            CmaMode::Force => false,
            CmaMode::Auto => self.bounce_first || p.cma_ok != Some(true),
        };
        let idx = self.sends.iter().position(|s| s.state == SendState::Idle).ok_or(EAGAIN)?;
        let gen = self.sends[idx].gen.wrapping_add(1) & 0xffff_ffff_ffff;
        let msg_id = gen << 16 | idx as u64;
        let mut op = SendOp {
            state: SendState::Active,
            gen,
            peer,
            buf,
            len: len as u64,
            hdr: *hdr,
            ctx,
            bounce,
            slot: 0,
            pushed: 0,
            next_chunk: 0,
        };
        if bounce {
            match self.alloc_slot() {
                Some(s) => op.slot = s,
                None => op.state = SendState::WaitSlot { after_nack: false },
            }
        }
        if op.state == SendState::Active {
            let w = self.rts_wire(&op, msg_id);
            let payload = self.addr.to_bytes();
            if let Err(e) = self.post(peer, &w, &payload) {
                if bounce {
                    self.free_slot(op.slot);
                }
                return Err(e);
            }
        }
        self.sends[idx] = op;
        self.sends_busy += 1;
        if let Some(p) = self.peers.get_mut(peer) {
            p.active += 1;
        }
        Ok(SendStatus::Pending)
    }

    fn rts_wire(&self, op: &SendOp, msg_id: u64) -> Wire {
        Wire {
            op: OP_RTS,
            uflags: op.hdr.flags,
            pflags: if op.bounce { MODE_BOUNCE } else { MODE_CMA },
            aux: op.slot,
            src_key: self.key,
            tag: op.hdr.tag,
            cq_data: op.hdr.cq_data,
            len: op.len,
            msg_id,
            addr: op.buf as u64,
        }
    }

    fn alloc_slot(&mut self) -> Option<u32> {
        let n = self.seg.geometry().nslots;
        let s = (0..n).find(|s| self.slot_used & (1 << s) == 0)?;
        self.slot_used |= 1 << s;
        // Reset chunk states so a slot never carries stale data.
        for c in 0..self.seg.geometry().nchunks {
            if let Ok(ch) = self.seg.chunk_ptr(s, c) {
                chunk_state(ch).store(CHUNK_FREE, Ordering::Release);
            }
        }
        Some(s)
    }

    fn free_slot(&mut self, s: u32) {
        self.slot_used &= !(1u64 << s);
    }

    /// Starts pulling a rendezvous message into `dst`. Completion (with the
    /// number of bytes placed, at most `dst_len`) comes as RecvDone/RecvError
    /// with `ctx`. EAGAIN when the receive table is full (retry later).
    ///
    /// # Safety
    /// `dst` must be writable for `dst_len` bytes until that event.
    pub unsafe fn recv_rndv(&mut self, inc: &Incoming, dst: *mut u8, dst_len: usize, ctx: u64) -> Result<()> {
        let Kind::Rndv { peer, msg_id, addr, mode, slot } = inc.kind else { return Err(EINVAL) };
        let idx = self.recvs.iter().position(|r| !r.active).ok_or(EAGAIN)?;
        let p = self.peers.get_mut(peer).ok_or(EINVAL)?;
        let n = inc.len.min(dst_len as u64);
        let fin_ok = Wire { op: OP_FIN, src_key: self.key, msg_id, ..Wire::default() };
        let fin_err = Wire { pflags: PF_ERR, ..fin_ok };
        // Large copies from a peer whose memory CMA has reached before are
        // shared with the sender: both cores copy, each at full speed.
        let share = n >= SHARED_COPY_QUEUED_MIN || (n >= SHARED_COPY_MIN && self.ring.peek(self.head).is_none());
        if mode == MODE_CMA && self.shared_copy && share && p.cma_ok == Some(true) && self.cma != CmaMode::Off {
            if let Some(d) = (0..crate::segment::HELP_SLOTS as u32).find(|d| self.help_used & (1 << d) == 0) {
                // SAFETY: forwarded contract (dst writable for dst_len >= n).
                unsafe { self.start_shared(idx, d, inc, dst, dst_len, ctx) };
                return Ok(());
            }
        }
        if mode == MODE_CMA {
            let r = if self.cma == CmaMode::Off {
                Err(CmaFailure::Refused)
            } else {
                // SAFETY: caller guarantees dst for dst_len >= n bytes.
                unsafe { cma::read_from(p.addr.pid, dst, addr, n as usize) }
            };
            match r {
                Ok(()) => {
                    p.cma_ok = Some(true);
                    self.post_ctl(peer, fin_ok);
                    self.push_event(Event::RecvDone { ctx, len: n });
                }
                Err(CmaFailure::Refused) if self.cma != CmaMode::Force => {
                    p.cma_ok = Some(false);
                    p.active += 1;
                    self.recvs_busy += 1;
                    self.recvs[idx] = RecvOp::started(peer, msg_id, dst, dst_len, inc.len, ctx, None, None);
                    let w = Wire { op: OP_NACK, src_key: self.key, msg_id, ..Wire::default() };
                    self.post_ctl(peer, w);
                }
                Err(CmaFailure::PeerGone) => {
                    p.alive = false;
                    self.push_event(Event::RecvError { ctx, err: err_connreset() });
                }
                Err(CmaFailure::Refused) => {
                    self.post_ctl(peer, fin_err);
                    self.push_event(Event::RecvError { ctx, err: Error(libc::EPERM) });
                }
                Err(CmaFailure::Fault(_)) => {
                    self.post_ctl(peer, fin_err);
                    self.push_event(Event::RecvError { ctx, err: err_io() });
                }
            }
            return Ok(());
        }
        // Bounce path: the slot index was range-checked when parsed.
        p.active += 1;
        self.recvs_busy += 1;
        self.recvs[idx] = RecvOp::started(peer, msg_id, dst, dst_len, inc.len, ctx, Some(slot), None);
        Ok(())
    }

    pub(super) fn finish_send(&mut self, idx: usize, res: Result<()>) {
        let op = self.sends[idx];
        if op.state == SendState::Active && op.bounce {
            self.free_slot(op.slot);
        }
        if op.state != SendState::Idle {
            self.sends_busy = self.sends_busy.saturating_sub(1);
        }
        self.sends[idx].state = SendState::Idle;
        if let Some(p) = self.peers.get_mut(op.peer) {
            p.active = p.active.saturating_sub(1);
        }
        let e = match res {
            Ok(()) => Event::SendDone { ctx: op.ctx },
            Err(err) => Event::SendError { ctx: op.ctx, err },
        };
        self.push_event(e);
    }

    pub(super) fn finish_recv(&mut self, idx: usize, res: Result<u64>) {
        self.retire_shared(idx);
        let r = self.recvs[idx];
        if r.active {
            self.recvs_busy = self.recvs_busy.saturating_sub(1);
        }
        self.recvs[idx].active = false;
        if let Some(p) = self.peers.get_mut(r.peer) {
            p.active = p.active.saturating_sub(1);
        }
        let e = match res {
            Ok(len) => Event::RecvDone { ctx: r.ctx, len },
            Err(err) => Event::RecvError { ctx: r.ctx, err },
        };
        self.push_event(e);
    }

    pub(super) fn start_bounce(&mut self, i: usize, after_nack: bool) {
        let Some(slot) = self.alloc_slot() else { return };
        let op = &mut self.sends[i];
        op.slot = slot;
        op.bounce = true;
        op.pushed = 0;
        op.next_chunk = 0;
        op.state = SendState::Active;
        let op = *op;
        let msg_id = op.gen << 16 | i as u64;
        if after_nack {
            let w = Wire { op: OP_BOUNCE, aux: slot, src_key: self.key, msg_id, ..Wire::default() };
            self.post_ctl(op.peer, w);
        } else {
            let w = self.rts_wire(&op, msg_id);
            let payload = self.addr.to_bytes();
            match self.post(op.peer, &w, &payload) {
                Ok(()) => {}
                Err(e) if e == EAGAIN => {
                    self.free_slot(slot);
                    self.sends[i].state = SendState::WaitSlot { after_nack: false };
                }
                Err(e) => self.finish_send(i, Err(e)),
            }
        }
    }

    /// Sender side of the bounce path: copy into free chunks of our slot.
    pub(super) fn fill_chunks(&mut self, i: usize) {
        let g = self.seg.geometry();
        let op = self.sends[i];
        let msg_id = op.gen << 16 | i as u64;
        let mut pushed = op.pushed;
        let mut next = op.next_chunk;
        while pushed < op.len {
            let Ok(ch) = self.seg.chunk_ptr(op.slot, (next % g.nchunks as u64) as u32) else { break };
            if chunk_state(ch).load(Ordering::Acquire) != CHUNK_FREE {
                break;
            }
            let n = (op.len - pushed).min(g.chunk_size as u64);
            // SAFETY: the chunk is free (the receiver is done with it) and
            // holds chunk_size bytes after its header; the send contract
            // keeps op.buf readable for op.len bytes.
            unsafe {
                std::ptr::copy_nonoverlapping(op.buf.add(pushed as usize), ch.add(CHUNK_HDR), n as usize);
                std::ptr::write_volatile(ch.add(4).cast::<u32>(), n as u32);
                std::ptr::write_volatile(ch.add(8).cast::<u64>(), pushed);
                std::ptr::write_volatile(ch.add(16).cast::<u64>(), msg_id);
            }
            chunk_state(ch).store(CHUNK_FULL, Ordering::Release);
            pushed += n;
            next += 1;
        }
        self.sends[i].pushed = pushed;
        self.sends[i].next_chunk = next;
    }

    /// Receiver side of the bounce path: copy full chunks out of the
    /// sender's slot. Every field is checked before use.
    pub(super) fn drain_chunks(&mut self, i: usize) {
        let r = self.recvs[i];
        let Some(slot) = r.slot else { return };
        let Some(p) = self.peers.get(r.peer) else { return };
        let g = p.seg.geometry();
        let mut got = r.got;
        let mut next = r.next_chunk;
        let mut bad = false;
        while got < r.len {
            let Ok(ch) = p.seg.chunk_ptr(slot, (next % g.nchunks as u64) as u32) else {
                bad = true;
                break;
            };
            if chunk_state(ch).load(Ordering::Acquire) != CHUNK_FULL {
                break;
            }
            // SAFETY: the chunk header lies inside the peer's mapping.
            let (n, off, id) = unsafe {
                (
                    std::ptr::read_volatile(ch.add(4).cast::<u32>()) as u64,
                    std::ptr::read_volatile(ch.add(8).cast::<u64>()),
                    std::ptr::read_volatile(ch.add(16).cast::<u64>()),
                )
            };
            if id != r.msg_id || off != got || n == 0 || n > g.chunk_size as u64 || n > r.len - got {
                bad = true;
                break;
            }
            if off < r.dst_len {
                let m = n.min(r.dst_len - off);
                // SAFETY: m bytes fit in the chunk (n <= chunk_size) and in
                // dst (off + m <= dst_len, the recv_rndv contract).
                unsafe { std::ptr::copy_nonoverlapping(ch.add(CHUNK_HDR), r.dst.add(off as usize), m as usize) };
            }
            chunk_state(ch).store(CHUNK_FREE, Ordering::Release);
            got += n;
            next += 1;
        }
        self.recvs[i].got = got;
        self.recvs[i].next_chunk = next;
        let fin = Wire { op: OP_FIN, src_key: self.key, msg_id: r.msg_id, ..Wire::default() };
        if bad {
            self.post_ctl(r.peer, Wire { pflags: PF_ERR, ..fin });
            self.finish_recv(i, Err(err_io()));
        } else if got == r.len {
            self.post_ctl(r.peer, fin);
            self.finish_recv(i, Ok(r.len.min(r.dst_len)));
        }
    }
}

fn chunk_state<'a>(ch: *mut u8) -> &'a AtomicU32 {
    // SAFETY: callers pass a chunk header from chunk_ptr (inside a live
    // mapping, 64-aligned); AtomicU32 may alias shared memory.
    unsafe { &*ch.cast::<AtomicU32>() }
}
