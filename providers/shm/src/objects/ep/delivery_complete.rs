//! `FI_DELIVERY_COMPLETE` of eager sends: the sender marks the message
//! with `UF_ACKREQ` and waits; the receiver, once it has placed or queued
//! the message, answers with a cumulative `UF_ACK` count; targets whose
//! process is gone fail the sends waiting on them. Also the dispatch of
//! every message with a special flag (RMA, ack requests, acks).

use super::*;

/// An eager FI_DELIVERY_COMPLETE send waiting for the receiver's ack.
#[derive(Clone, Copy, Debug)]
struct DcWait {
    /// The target's sender key (what its acks carry as `src_key`).
    key: u64,
    /// Its number among our delivery-complete messages to that target.
    seq: u64,
    /// Its `tx_pending` slot.
    tok: usize,
    /// The target process (pid, start time), for the liveness check.
    proc_: (u32, u64),
}

/// Delivery-complete bookkeeping. A sender endpoint's messages reach one
/// receiver in order (one ring, one consumer), so both sides count them:
/// the receiver's count after processing message n is n, and an ack with
/// count n completes every waiting send to that receiver up to n.
#[derive(Default)]
pub(super) struct DcState {
    /// Target key -> delivery-complete messages sent to it.
    sent: HashMap<u64, u64>,
    /// Sender key -> delivery-complete messages from it processed here.
    seen: HashMap<u64, u64>,
    /// Sender key -> transport peer the acks go to.
    ack_peers: HashMap<u64, PeerId>,
    wait: VecDeque<DcWait>,
    /// When targets were last checked for liveness (`coarse_ns`).
    last_check_ns: u64,
}

impl EpState {
    /// RMA traffic, delivery-complete requests and their acks.
    pub(super) fn special_arrival(&mut self, inc: Incoming) {
        if inc.hdr.flags & rma::UF_RMA != 0 {
            self.rma_arrival(inc);
        } else if inc.hdr.flags & UF_ACK != 0 {
            self.tp.discard(&inc);
            self.on_ack(inc.src_key, inc.hdr.tag);
        } else {
            // UF_ACKREQ: processed means placed into a matched receive or
            // buffered as unexpected (fi_cq(3), FI_DELIVERY_COMPLETE). A
            // rendezvous message completes at its FIN instead.
            let inline = matches!(inc.kind, Kind::Inline { .. });
            self.on_arrival(inc);
            if inline && self.stalled.is_none() {
                self.send_ack(inc.src_key);
            }
        }
    }

    /// Tells the sender named by `key` that one more of its
    /// delivery-complete messages was processed.
    pub(super) fn send_ack(&mut self, key: u64) {
        let n = self.dc.seen.entry(key).or_insert(0);
        *n += 1;
        let seq = *n;
        let Some(peer) = self.ack_peer(key) else {
            rfabric_core::fi_warn!("shm", FI_LOG_EP_DATA, "shm: sender {:#x} of a delivery-complete message not found; no ack", key);
            return;
        };
        let hdr = MsgHeader { flags: UF_ACK, tag: seq, cq_data: 0 };
        // The sender's ring is full: sent from progress, in order with
        // RMA replies (acks are cumulative, so order does not matter).
        // Another failure is logged there (a sender that is gone needs none).
        if let Some((hdr, _)) = self.post_reply(peer, hdr, &[]) {
            self.rma.queue_reply(peer, hdr);
        }
    }

    /// The transport peer of the sender `key`: through the AV when it is
    /// there, else by finding its segment (slow path, once per sender).
    fn ack_peer(&mut self, key: u64) -> Option<PeerId> {
        if let Some(&p) = self.dc.ack_peers.get(&key) {
            return Some(p);
        }
        let from_av = self.av.as_ref().and_then(|av| av.by_key(key).and_then(|a| av.addr(a)));
        let addr = from_av.or_else(|| crate::segment::find_by_key(key))?;
        let p = self.tp.attach(&addr).ok()?;
        self.dc.ack_peers.insert(key, p);
        Some(p)
    }

    /// An ack from `key` with count `seq`: every waiting send to it up to
    /// that count completes.
    fn on_ack(&mut self, key: u64, seq: u64) {
        let mut i = 0;
        while i < self.dc.wait.len() {
            let w = self.dc.wait[i];
            if w.key == key && w.seq <= seq {
                self.dc.wait.remove(i);
                if let Some(t) = self.tx_pending.get_mut(w.tok).and_then(Option::take) {
                    self.complete_tx(t, Ok(()));
                }
            } else {
                i += 1;
            }
        }
    }

    /// Operations waiting on a target whose process is gone fail, once no
    /// entry of that target is left in our ring: the last replies and acks
    /// it sent before it exited are taken first. Entries of other peers do
    /// not delay it.
    #[inline]
    pub(super) fn check_targets_gone(&mut self) {
        if !self.dc.wait.is_empty() {
            self.check_dc_targets();
        }
        self.check_targets();
    }

    /// At most every `FI_SHM_PEER_CHECK_MS` of progress while acks are
    /// awaited: sends to a target whose process is gone fail with
    /// ECONNRESET instead of waiting forever.
    fn check_dc_targets(&mut self) {
        let now = crate::endpoint::coarse_ns();
        if now.saturating_sub(self.dc.last_check_ns) <= self.tp.peer_check_ns() {
            return;
        }
        self.dc.last_check_ns = now;
        let mut i = 0;
        while i < self.dc.wait.len() {
            let w = self.dc.wait[i];
            if w.proc_.0 != 0 && !crate::segment::pid_alive(w.proc_.0, w.proc_.1) && !self.tp.holds_entries_from(w.key) {
                self.tp.mark_gone(w.key);
                self.dc.wait.remove(i);
                if let Some(t) = self.tx_pending.get_mut(w.tok).and_then(Option::take) {
                    self.complete_tx(t, Err(crate::err_connreset()));
                }
            } else {
                i += 1;
            }
        }
    }

    /// An eager send with FI_DELIVERY_COMPLETE: sent with `UF_ACKREQ`, it
    /// completes when the receiver's ack arrives (or fails when the
    /// receiver dies first).
    ///
    /// # Safety
    /// `buf` is readable for `len` bytes during this call.
    pub(super) unsafe fn send_delivery(&mut self, dest: u64, peer: PeerId, hdr: MsgHeader, buf: *const u8, len: usize, info: TxInfo) -> Result<()> {
        if info.complete && Self::room(&self.tx_cq) == 0 {
            self.progress();
            return Err(EAGAIN);
        }
        let addr = self.av.as_ref().and_then(|av| av.addr(dest)).ok_or(EINVAL)?;
        let tok = self.tx_pending.iter().position(|p| p.is_none()).ok_or(EAGAIN)?;
        let hdr = MsgHeader { flags: hdr.flags | UF_ACKREQ, ..hdr };
        // SAFETY: forwarded contract; a send that turns out to be a
        // rendezvous one keeps `info` (and any gathered copy) in
        // tx_pending until its completion event.
        match unsafe { self.tp.send(peer, &hdr, buf, len, tok as u64) } {
            Ok(SendStatus::Done) => {
                let key = addr.key();
                let n = self.dc.sent.entry(key).or_insert(0);
                *n += 1;
                let seq = *n;
                self.dc.wait.push_back(DcWait { key, seq, tok, proc_: (addr.pid, addr.start_time) });
                self.tx_pending[tok] = Some(info);
                Ok(())
            }
            Ok(SendStatus::Pending) => {
                self.tx_pending[tok] = Some(info);
                Ok(())
            }
            Err(e) => {
                if e == EAGAIN {
                    self.progress();
                }
                Err(e)
            }
        }
    }
}
