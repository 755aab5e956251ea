//! The receive side of the transport: `poll` runs what is in flight
//! (queued control entries, bounce chunks, shared copies, liveness checks)
//! and reads our ring, where `parse` validates every entry before anything
//! in it is used: data messages go up as [`Event::Msg`], control messages
//! (`FIN`, `NACK`, `HELP`, `BOUNCE`) are applied here. Consumed cells go
//! back to the producers in batches.

use super::*;

impl Endpoint {
    /// Marks `k` cells from `pos` (the head) as consumed. They go back to
    /// the producers in batches, or as soon as the ring is found empty:
    /// the stores that hand a cell back are then off the path of the
    /// next message.
    pub(super) fn consume(&mut self, pos: u64, k: u64) {
        self.head = pos.wrapping_add(k);
        if self.head.wrapping_sub(self.rel) >= self.rel_batch {
            self.flush_releases();
        }
    }

    fn flush_releases(&mut self) {
        while self.rel != self.head {
            self.ring.release(self.rel);
            self.rel = self.rel.wrapping_add(1);
        }
    }

    /// Makes progress and returns the next event, if any.
    pub fn poll(&mut self) -> Option<Event> {
        if let Some(e) = self.events.pop_front() {
            return Some(e);
        }
        if self.sends_busy | self.recvs_busy != 0 || !self.ctl.is_empty() {
            self.progress();
            if let Some(e) = self.events.pop_front() {
                return Some(e);
            }
        }
        // Handle up to a few control entries per call; return the first
        // data message.
        for _ in 0..16 {
            if self.held.is_some() {
                break;
            }
            let Some(cell) = self.ring.peek(self.head) else {
                // A payload too large for the header line starts on the
                // cell's second line: when the last message had one of one
                // or two lines, pull those lines while we wait, so they
                // arrive with the header line and not after it. (Larger
                // payloads take longer to write; pulling their first lines
                // back and forth while the sender writes them costs more
                // than it saves.)
                for line in 1..=self.spin_lines as usize {
                    self.ring.prefetch_line(self.head, line);
                }
                if self.rel != self.head {
                    self.flush_releases();
                }
                // Claimed but not published? Now and then (the tail's line
                // is the producers'), see whether its producer died
                // holding it.
                self.empty_polls = self.empty_polls.wrapping_add(1);
                if self.empty_polls & 255 == 0 && self.skip_dead_claim() {
                    continue;
                }
                break;
            };
            // SAFETY: published cell, ours until release.
            let w = unsafe { Wire::load(cell) };
            let pos = self.head;
            match self.parse(pos, cell, &w) {
                Ok(Some(inc)) => {
                    if !matches!(inc.kind, Kind::Inline { .. }) {
                        self.consume(pos, 1);
                    } else {
                        self.held = Some((pos, self.parsed_cells));
                    }
                    return Some(Event::Msg(inc));
                }
                Ok(None) => {
                    self.consume(pos, 1);
                    // Completions come out in ring order.
                    if !self.events.is_empty() {
                        break;
                    }
                }
                // The sender of an RTS is alive but did not hand over its
                // segment in time: leave the entry, retry on a later poll.
                Err(err) if err == EAGAIN => break,
                Err(err) => {
                    self.consume(pos, 1);
                    return Some(Event::Error { src_key: w.src_key, err });
                }
            }
        }
        self.events.pop_front()
    }

    /// Validates one ring entry. Data messages become `Incoming`; control
    /// messages are applied here.
    fn parse(&mut self, pos: u64, cell: *mut u8, w: &Wire) -> Result<Option<Incoming>> {
        let hdr = MsgHeader { flags: w.uflags, tag: w.tag, cq_data: w.cq_data };
        match w.op {
            OP_EAGER => {
                let k = eager_cells(self.ring.cell_size(), w.len);
                if k > max_eager_cells(self.ring.ncells()) {
                    return Err(err_io());
                }
                // Every continuation cell must be published and marked as
                // cell j of this message (the sender publishes them before
                // the first cell).
                for j in 1..k {
                    let c = self.ring.peek(pos.wrapping_add(j)).ok_or_else(err_io)?;
                    // SAFETY: a published cell of our ring; 8-aligned word.
                    let m = unsafe { std::ptr::read_volatile(c.add(8).cast::<u64>()) };
                    if m != OP_CONT as u64 | j << 32 {
                        return Err(err_io());
                    }
                }
                self.parsed_cells = k;
                self.spin_lines = if w.len as usize <= tiny_max(w.pflags) || w.len > 128 { 0 } else { w.len.div_ceil(64) as u8 };
                Ok(Some(Incoming { hdr, src_key: w.src_key, len: w.len, kind: Kind::Inline { pos } }))
            }
            OP_RTS => {
                let mut ab = [0u8; ADDR_LEN];
                // SAFETY: the inline area holds at least ADDR_LEN bytes.
                unsafe { std::ptr::copy_nonoverlapping(cell.add(CELL_HDR), ab.as_mut_ptr(), ADDR_LEN) };
                let a = Address::from_bytes(&ab).map_err(|_| err_io())?;
                if a.key() != w.src_key || w.len == 0 {
                    return Err(err_io());
                }
                let peer = match self.peers.find_key(w.src_key) {
                    Some(p) => p,
                    None => match self.attach(&a) {
                        Ok(p) => p,
                        // The sender died after posting (its segment is
                        // still mapped somewhere): hand the message up
                        // anyway, so the receive that takes it fails with
                        // ECONNRESET.
                        Err(e) if e == err_connreset() => {
                            let p = self.peers.find_key(w.src_key).ok_or(e)?;
                            if let Some(x) = self.peers.get_mut(p) {
                                x.alive = false;
                                x.cma_ok = Some(false);
                            }
                            p
                        }
                        // Its memory went with it: the same, over a
                        // stand-in segment.
                        Err(_) if !crate::segment::pid_alive(a.pid, a.start_time) => self.peers.insert_gone(&a)?,
                        Err(e) => return Err(e),
                    },
                };
                let g = self.peers.get(peer).ok_or(EINVAL)?.seg.geometry();
                let mode = w.pflags;
                if !(mode == MODE_CMA || (mode == MODE_BOUNCE && w.aux < g.nslots)) {
                    return Err(err_io());
                }
                let kind = Kind::Rndv { peer, msg_id: w.msg_id, addr: w.addr, mode, slot: w.aux };
                Ok(Some(Incoming { hdr, src_key: w.src_key, len: w.len, kind }))
            }
            OP_FIN | OP_NACK => {
                let idx = (w.msg_id & 0xffff) as usize;
                let op = *self.sends.get(idx).ok_or_else(err_io)?;
                let key_ok = self.peers.get(op.peer).map(|p| p.key) == Some(w.src_key);
                if op.state == SendState::Idle || op.gen != w.msg_id >> 16 || !key_ok {
                    return Err(err_io());
                }
                if w.op == OP_FIN {
                    let res = if w.pflags & PF_ERR != 0 { Err(Error(libc::ECANCELED)) } else { Ok(()) };
                    self.finish_send(idx, res);
                } else if self.cma == CmaMode::Force || op.bounce {
                    self.finish_send(idx, Err(Error(libc::EPERM)));
                } else {
                    if let Some(p) = self.peers.get_mut(op.peer) {
                        p.cma_ok = Some(false);
                    }
                    self.sends[idx].bounce = true;
                    self.sends[idx].state = SendState::WaitSlot { after_nack: true };
                }
                Ok(None)
            }
            OP_HELP => {
                let idx = (w.msg_id & 0xffff) as usize;
                let op = *self.sends.get(idx).ok_or_else(err_io)?;
                let key_ok = self.peers.get(op.peer).map(|p| p.key) == Some(w.src_key);
                // A HELP for a send that is no longer ours to share (or
                // never was) is ignored: the receiver copies alone.
                if op.state == SendState::Active && !op.bounce && op.gen == w.msg_id >> 16 && key_ok {
                    self.help_copy(idx, w);
                }
                Ok(None)
            }
            OP_BOUNCE => {
                let peer = self.peers.find_key(w.src_key).ok_or_else(err_io)?;
                let nslots = self.peers.get(peer).ok_or_else(err_io)?.seg.geometry().nslots;
                if w.aux >= nslots {
                    return Err(err_io());
                }
                let r = self
                    .recvs
                    .iter_mut()
                    .find(|r| r.active && r.peer == peer && r.msg_id == w.msg_id && r.slot.is_none())
                    .ok_or_else(err_io)?;
                r.slot = Some(w.aux);
                Ok(None)
            }
            _ => Err(err_io()),
        }
    }

    fn progress(&mut self) {
        // Retry queued control entries.
        for _ in 0..self.ctl.len() {
            let Some((peer, w)) = self.ctl.pop_front() else { break };
            match self.post(peer, &w, &[]) {
                Err(e) if e == EAGAIN => self.ctl.push_back((peer, w)),
                _ => {}
            }
        }
        for i in 0..if self.sends_busy > 0 { self.sends.len() } else { 0 } {
            match self.sends[i].state {
                SendState::Idle => {}
                SendState::WaitSlot { after_nack } => self.start_bounce(i, after_nack),
                SendState::Active => {
                    if self.sends[i].bounce {
                        self.fill_chunks(i);
                    }
                }
            }
        }
        for i in 0..if self.recvs_busy > 0 { self.recvs.len() } else { 0 } {
            if self.recvs[i].active && self.recvs[i].slot.is_some() {
                self.drain_chunks(i);
            } else if self.recvs[i].active && self.recvs[i].shared.is_some() {
                self.pump_shared(i);
            }
        }
        self.polls = self.polls.wrapping_add(1);
        if self.polls & 63 == 0 {
            let now = coarse_ns();
            if now.saturating_sub(self.last_check_ns) > self.check_ns {
                self.last_check_ns = now;
                self.check_peers();
            }
        }
    }

    /// Fails every operation whose peer has died, once no entry that peer
    /// wrote before it exited (a FIN, a NACK) is waiting in our ring: those
    /// come first. Entries of other peers do not hold the failure back, so
    /// a ring kept busy by live peers, or stopped behind an arrival that
    /// waits for room in the unexpected queue, does not delay it.
    fn check_peers(&mut self) {
        let mut any = false;
        for p in self.peers.iter_mut() {
            if p.active > 0 && !p.check_alive() {
                any = true;
            }
        }
        if !any {
            return;
        }
        let gone: Vec<PeerId> = (0..self.peers.len() as PeerId)
            .filter(|&id| self.peers.get(id).is_some_and(|p| !p.alive && p.active > 0 && !self.holds_entries_from(p.key)))
            .collect();
        if gone.is_empty() {
            return;
        }
        for i in 0..self.sends.len() {
            if self.sends[i].state != SendState::Idle && gone.contains(&self.sends[i].peer) {
                self.finish_send(i, Err(err_connreset()));
            }
        }
        for i in 0..self.recvs.len() {
            if self.recvs[i].active && gone.contains(&self.recvs[i].peer) {
                self.finish_recv(i, Err(err_connreset()));
            }
        }
    }

    /// Our ring looks empty. At most every `FI_SHM_PEER_CHECK_MS`: if the
    /// head has stood still since the last look and is claimed but not
    /// published, and the producer holding it died, steps over its claim
    /// (the cells go back with the others) rather than waiting for it
    /// forever: everything behind it, other peers' messages included,
    /// would wait too. A dead producer's announcement of the head without
    /// a claim is withdrawn (`Ring::dead_claim`), or no producer could
    /// claim the head again.
    #[cold]
    fn skip_dead_claim(&mut self) -> bool {
        let now = coarse_ns();
        if now.saturating_sub(self.stuck.1) <= self.check_ns {
            return false;
        }
        // Nothing claimed and nobody announced: an idle ring.
        let idle = self.ring.claimed_until() == self.head && !self.ring.announced_unclaimed(self.head);
        if self.stuck.0 != self.head || idle {
            self.stuck = (self.head, now);
            return false;
        }
        self.stuck.1 = now;
        let k = match self.ring.dead_claim(self.head, |pid| !crate::segment::pid_alive(pid, 0)) {
            DeadClaim::None => return false,
            DeadClaim::Withdrawn(pid) => {
                rfabric_core::fi_warn!(
                    "shm",
                    rfabric_core::abi::FI_LOG_EP_DATA,
                    "shm: queue position {} announced by process {} that died before claiming it, withdrawn",
                    self.head,
                    pid
                );
                return false;
            }
            DeadClaim::Skip(k, pid) => {
                rfabric_core::fi_warn!(
                    "shm",
                    rfabric_core::abi::FI_LOG_EP_DATA,
                    "shm: {} queue cell(s) at position {} claimed by process {} that died before publishing them, skipped",
                    k,
                    self.head,
                    pid
                );
                k
            }
        };
        self.consume(self.head, k);
        self.flush_releases();
        true
    }

    /// Records that the process of the peer whose sender key is `key` is
    /// gone, as found by a check above the transport (RMA targets,
    /// delivery-complete receivers): sends to it fail from now on, and its
    /// transfers in flight fail at the next liveness check.
    pub fn mark_gone(&mut self, key: u64) {
        if let Some(p) = self.peers.find_key(key).and_then(|id| self.peers.get_mut(id)) {
            p.alive = false;
        }
    }

    /// Whether an entry published by the peer whose sender key is `key` is
    /// still in our ring, between the head (held entries included) and the
    /// last claimed position. Continuation cells carry no key and are
    /// skipped; the scan is bounded by the ring's size.
    pub fn holds_entries_from(&self, key: u64) -> bool {
        let n = self.ring.claimed_until().wrapping_sub(self.head).min(self.ring.ncells());
        (0..n).any(|i| {
            self.ring.peek(self.head.wrapping_add(i)).is_some_and(|cell| {
                // SAFETY: a published cell of our ring (peek), read only.
                let w = unsafe { Wire::load(cell) };
                w.op != OP_CONT && w.src_key == key
            })
        })
    }

    /// Progress without reading the ring: the next completion of an
    /// operation in flight (a send or receive, or its failure after its
    /// peer died), if any. For a caller that cannot take a new arrival now.
    pub fn poll_events(&mut self) -> Option<Event> {
        if let Some(e) = self.events.pop_front() {
            return Some(e);
        }
        if self.sends_busy | self.recvs_busy != 0 || !self.ctl.is_empty() {
            self.progress();
        }
        self.events.pop_front()
    }
}
