//! Progress of the shm endpoint: the transport's events taken within
//! what the bound CQs can hold, arrivals matched against posted receives
//! (or queued as unexpected, or left in the ring while there is no room),
//! data placed into receive buffers, and the completions and counter
//! events of sends and receives, with the handoff of a receive completion
//! to the CQ read that drives progress.

use super::*;

impl EpState {
    pub(super) fn complete_tx(&self, t: TxInfo, res: Result<()>) {
        if let Some(c) = self.send_cntr.as_ref() {
            if res.is_ok() {
                c.c.add(1);
            } else {
                c.c.adderr(1);
            }
        }
        let Some(cq) = self.tx_cq.as_ref() else { return };
        let base = Completion { op_context: t.ctx, flags: t.flags, src_addr: FI_ADDR_NOTAVAIL, ..Completion::default() };
        match res {
            Ok(()) if t.complete => cq.write(base),
            Ok(()) => {}
            Err(e) => cq.write_err(ErrCompletion { base, err: e.0, prov_errno: e.0, ..ErrCompletion::default() }),
        }
    }

    /// `placed` bytes landed in the receive buffer (or the transfer failed).
    fn complete_rx(&mut self, r: RxInfo, res: Result<u64>) {
        if let Some(c) = self.recv_cntr.as_ref() {
            if res.is_ok() && r.msg_len <= r.cap as u64 {
                c.c.add(1);
            } else {
                c.c.adderr(1);
            }
        }
        let placed = *res.as_ref().unwrap_or(&0);
        if let (Some(sc), Ok(n)) = (r.scatter.as_ref(), res.as_ref()) {
            sc.spread((*n as usize).min(sc.tmp.len()));
        }
        let Some(cq) = self.rx_cq.as_ref() else { return };
        let base = Completion {
            op_context: r.ctx,
            flags: r.flags,
            len: placed as usize,
            buf: if r.flags & FI_MULTI_RECV != 0 || r.buf != 0 { r.buf } else { 0 },
            data: r.data,
            tag: r.tag,
            src_addr: self.av.as_ref().map_or(r.src, |av| av.reported(r.src)),
        };
        match res {
            Ok(_) if r.msg_len > r.cap as u64 => cq.write_err(ErrCompletion {
                base,
                err: FI_ETRUNC,
                olen: (r.msg_len - r.cap as u64) as usize,
                ..ErrCompletion::default()
            }),
            Ok(_) if r.unknown_src.is_some() => cq.write_err(ErrCompletion {
                base,
                err: FI_EADDRNOTAVAIL,
                err_data: source_err_data(r.unknown_src.unwrap_or(0)),
                ..ErrCompletion::default()
            }),
            Ok(_) if r.complete => {
                if let (Handoff::Wanted { only }, 0) = (self.handoff, cq.hints.ready.load(std::sync::atomic::Ordering::Relaxed)) {
                    self.handoff = Handoff::Got { c: base, only };
                } else {
                    cq.write(base);
                }
            }
            Ok(_) => {}
            Err(e) => cq.write_err(ErrCompletion { base, err: e.0, prov_errno: e.0, ..ErrCompletion::default() }),
        }
    }

    /// The receive buffer of `r` (the temporary one for several buffers).
    fn rx_target(r: &mut RxInfo) -> (usize, usize) {
        match r.scatter.as_mut() {
            Some(sc) => (sc.tmp.as_mut_ptr() as usize, sc.tmp.len()),
            None => (r.buf, r.cap),
        }
    }

    /// Places an incoming message into the buffer of `r`.
    fn deliver(&mut self, inc: &Incoming, mut r: RxInfo) {
        match inc.kind {
            Kind::Inline { .. } => {
                let (buf, cap) = Self::rx_target(&mut r);
                let dst: &mut [u8] = if cap == 0 || buf == 0 {
                    &mut []
                } else {
                    // SAFETY: the receive's buffer (or its temporary one) is
                    // writable for `cap` bytes until its completion
                    // (Endpoint::recv contract).
                    unsafe { std::slice::from_raw_parts_mut(buf as *mut u8, cap) }
                };
                let res = self.tp.recv_inline(inc, dst).map(|n| n as u64);
                self.complete_rx(r, res);
            }
            Kind::Rndv { .. } => self.start_rndv(inc, r),
        }
    }

    fn start_rndv(&mut self, inc: &Incoming, mut r: RxInfo) {
        let Some(tok) = self.rx_pending.iter().position(|p| p.is_none()) else {
            self.deferred.push_back((*inc, r));
            return;
        };
        let (buf, cap) = Self::rx_target(&mut r);
        // SAFETY: as in deliver; the buffer stays valid until the RecvDone
        // or RecvError event for `tok` (a temporary buffer lives in `r`,
        // on the heap, which is kept in rx_pending until then).
        match unsafe { self.tp.recv_rndv(inc, buf as *mut u8, cap, tok as u64) } {
            Ok(()) => self.rx_pending[tok] = Some(r),
            Err(e) if e == EAGAIN => self.deferred.push_back((*inc, r)),
            Err(e) => self.complete_rx(r, Err(e)),
        }
    }

    pub(super) fn on_arrival(&mut self, inc: Incoming) {
        let tagged = inc.hdr.flags & UF_TAGGED != 0;
        let remote_data = inc.hdr.flags & UF_DATA != 0;
        let src = self.src_of(inc.src_key);
        match self.matcher.match_arrival(tagged, src, inc.hdr.tag, inc.len as usize) {
            Some(m) => {
                let scatter = match m.entry {
                    Ok(p) => p.desc,
                    Err(_) => None,
                };
                let r = RxInfo {
                    ctx: m.ctx,
                    buf: m.buf,
                    cap: m.cap,
                    msg_len: inc.len,
                    flags: rx_flags(tagged, remote_data) | (m.flags & FI_MULTI_RECV),
                    tag: inc.hdr.tag,
                    data: if remote_data { inc.hdr.cq_data } else { 0 },
                    src,
                    complete: !self.rx_selective || m.flags & FI_COMPLETION != 0,
                    unknown_src: self.unknown(src, inc.src_key),
                    scatter,
                };
                self.deliver(&inc, r);
            }
            None => self.queue_unexpected(inc, tagged, src, remote_data),
        }
    }

    /// An arrival that matched no receive. Out of line: the matched path
    /// of `on_arrival` (every message that meets a posted receive) stays
    /// small.
    #[inline(never)]
    fn queue_unexpected(&mut self, inc: Incoming, tagged: bool, src: u64, remote_data: bool) {
        // The message is taken out of the ring only once the queue
        // holds a place for it and its copy has memory; otherwise it
        // stays in its ring cell (back-pressure: the sender sees
        // -FI_EAGAIN once the ring is full) until a receive or room
        // appears. Nothing is dropped for want of resources.
        let tp = &mut self.tp;
        let r: std::result::Result<(), Option<Option<Error>>> = self.matcher.push_unexpected_with(|| {
            let stash = match inc.kind {
                Kind::Inline { .. } => {
                    let n = inc.len as usize;
                    let mut v = Vec::new();
                    v.try_reserve_exact(n).map_err(|_| None)?;
                    v.resize(n, 0);
                    tp.recv_inline(&inc, &mut v).map_err(Some)?;
                    Stash::Data(v, inc.src_key)
                }
                Kind::Rndv { .. } => Stash::Rndv(inc),
            };
            let mut u = Unexp::new(tagged, src, inc.hdr.tag, inc.len as usize, stash);
            u.data = if remote_data { inc.hdr.cq_data } else { 0 };
            u.flags = if remote_data { FI_REMOTE_CQ_DATA } else { 0 };
            Ok(u)
        });
        match r {
            Ok(()) => {}
            // Queue full, or no memory for the copy.
            Err(None) | Err(Some(None)) => self.stalled = Some(inc),
            // The ring entry changed under us (recv_inline checks
            // it again): a misbehaving sender, like a malformed
            // entry.
            Err(Some(Some(e))) => {
                rfabric_core::fi_warn!("shm", FI_LOG_EP_DATA, "shm: unreadable unexpected message dropped ({})", e);
            }
        }
    }

    /// Completes receive `r` with an unexpected message taken from the queue.
    pub(super) fn deliver_unexp(&mut self, u: Unexp<Stash>, mut r: RxInfo) {
        r.unknown_src = self.unknown(u.src, u.payload.key());
        match u.payload {
            Stash::Data(v, _) => {
                let (buf, cap) = Self::rx_target(&mut r);
                let n = v.len().min(cap);
                if n > 0 {
                    // SAFETY: the receive buffer (or its temporary one) is
                    // writable for `cap` bytes.
                    unsafe { rfabric_core::copy::copy_bytes(v.as_ptr(), buf as *mut u8, n) };
                }
                self.complete_rx(r, Ok(n as u64));
            }
            Stash::Rndv(inc) => self.start_rndv(&inc, r),
        }
    }

    fn handle(&mut self, ev: Event) {
        match ev {
            // One flag test keeps RMA, delivery-complete requests and acks
            // off the path of plain messages.
            Event::Msg(inc) if inc.hdr.flags & (rma::UF_RMA | UF_ACKREQ | UF_ACK) != 0 => self.special_arrival(inc),
            Event::Msg(inc) => self.on_arrival(inc),
            Event::SendDone { ctx } | Event::SendError { ctx, .. } => {
                let res = if let Event::SendError { err, .. } = ev { Err(err) } else { Ok(()) };
                if let Some(t) = self.tx_pending.get_mut(ctx as usize).and_then(Option::take) {
                    self.complete_tx(t, res);
                }
            }
            Event::RecvDone { ctx, .. } | Event::RecvError { ctx, .. } => {
                let res = match ev {
                    Event::RecvDone { len, .. } => Ok(len),
                    Event::RecvError { err, .. } => Err(err),
                    _ => Ok(0),
                };
                if let Some(r) = self.rx_pending.get_mut(ctx as usize).and_then(Option::take) {
                    self.complete_rx(r, res);
                }
            }
            Event::Error { err, .. } => {
                rfabric_core::fi_warn!("shm", FI_LOG_EP_DATA, "shm: malformed ring entry dropped ({})", err);
            }
        }
    }

    /// Room left in a CQ (unbounded when none is bound).
    pub(super) fn room(cq: &Option<Arc<ShmCq>>) -> usize {
        cq.as_ref().map_or(usize::MAX, |c| c.hints.space.load(std::sync::atomic::Ordering::Relaxed))
    }

    /// Drives the transport; returns the number of events handled.
    pub(in crate::objects) fn progress(&mut self) -> usize {
        if !self.enabled {
            return 0;
        }
        let mut done = 0;
        // Each event yields at most one completion: never take more events
        // than both CQs can hold, so no completion is ever dropped.
        self.rma_pump();
        let mut budget = match (&self.tx_cq, &self.rx_cq) {
            // One CQ for both directions (the common case): one look.
            (Some(t), Some(r)) if Arc::ptr_eq(t, r) => 64usize.min(Self::room(&self.tx_cq)),
            _ => 64usize.min(Self::room(&self.tx_cq)).min(Self::room(&self.rx_cq)),
        };
        for _ in 0..self.deferred.len() {
            let Some((inc, r)) = self.deferred.pop_front() else { break };
            self.start_rndv(&inc, r);
        }
        if let Some(inc) = self.stalled.take() {
            if budget == 0 {
                self.stalled = Some(inc);
                return 0;
            }
            budget -= 1;
            self.on_arrival(inc);
            if self.stalled.is_some() {
                // The arrival waits for room in the unexpected queue and
                // the ring stays where it is, but operations in flight
                // still complete, or fail when their peer died.
                while budget > 0 && !matches!(self.handoff, Handoff::Got { .. }) {
                    let Some(ev) = self.tp.poll_events() else { break };
                    budget -= 1;
                    done += 1;
                    self.handle(ev);
                }
                self.check_targets_gone();
                return done;
            }
            if inc.hdr.flags & UF_ACKREQ != 0 && matches!(inc.kind, Kind::Inline { .. }) {
                self.send_ack(inc.src_key);
            }
            done += 1;
        }
        let mut first = true;
        for _ in 0..budget {
            let ev = self.tp.poll();
            if std::mem::take(&mut first) && std::mem::take(&mut self.after_handoff) && ev.is_some() {
                // The ring held more right after a read stopped at its
                // handed-off entry: a stream, so reads drain again.
                self.drain_after_handoff = true;
            }
            let Some(ev) = ev else {
                if matches!(self.handoff, Handoff::Got { .. }) {
                    // Nothing behind the handed-off entry: a ping-pong.
                    self.drain_after_handoff = false;
                }
                break;
            };
            done += 1;
            self.handle(ev);
            if self.stalled.is_some() {
                break;
            }
            if let Handoff::Got { only, .. } = self.handoff {
                if only || !self.drain_after_handoff {
                    self.after_handoff = true;
                    break;
                }
            }
        }
        self.check_targets_gone();
        done
    }
}
