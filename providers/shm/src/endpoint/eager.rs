//! Eager messages: the payload is copied into the receiver's ring, in
//! the header line (tiny), one cell, or several consecutive cells
//! (medium), up to a limit per peer that depends on whether rendezvous
//! operations with it are in flight; and copied out of our ring by the
//! receive that takes it.

use super::*;

/// Payload bytes the first cell of an eager message carries.
fn first_cap(cell_size: usize) -> u64 {
    (cell_size - CELL_HDR) as u64
}

/// Cells an eager message of `len` bytes occupies in a ring of `cell_size`
/// cells (saturating; callers compare with [`max_eager_cells`]).
pub fn eager_cells(cell_size: usize, len: u64) -> u64 {
    let c0 = first_cap(cell_size);
    if len <= c0 {
        return 1;
    }
    let cc = (cell_size - CONT_OFF) as u64;
    1 + (len - c0).div_ceil(cc)
}

/// Most cells one eager message may take in a ring of `ncells` cells: a
/// quarter of the ring, so a multi-cell message never waits for a ring
/// that is almost empty and other senders keep room.
pub fn max_eager_cells(ncells: u64) -> u64 {
    (ncells / 4).max(1)
}

/// Largest eager payload a ring of this geometry accepts.
pub fn eager_capacity(ncells: u64, cell_size: usize) -> u64 {
    first_cap(cell_size) + (max_eager_cells(ncells) - 1) * (cell_size - CONT_OFF) as u64
}

/// Default largest message sent by copy through the receiver's ring
/// (single- or multi-cell eager) while rendezvous operations with that
/// peer are in flight (streaming). Larger messages use the rendezvous
/// protocol (CMA or bounce buffers). Chosen by measurement; see DESIGN.md.
pub const DEFAULT_EAGER_MAX: usize = 8 * 1024;

/// Default largest eager message when nothing else is in flight with the
/// peer (latency): one cell. Above that, one `process_vm_readv` beats two
/// copies through lines that move between cores. See DESIGN.md.
pub const DEFAULT_EAGER_IDLE_MAX: usize = 0;

/// The eager limit, streaming and idle, where CMA is slow
/// ([`cma::is_slow`]). There the ring was as fast as bounce slots or
/// faster up to this size (one-way 4.0-5.1 µs against 4.8-5.9 at 64 KiB);
/// a larger message would hold more than an eighth of the default ring.
pub const SLOW_CMA_EAGER_MAX: usize = 64 * 1024;

/// The default eager limits (streaming, idle): the adaptive ones, or one
/// limit of [`SLOW_CMA_EAGER_MAX`] where CMA is slow.
pub fn default_eager_limits(slow_cma: bool) -> (usize, usize) {
    if slow_cma {
        (SLOW_CMA_EAGER_MAX, SLOW_CMA_EAGER_MAX)
    } else {
        (DEFAULT_EAGER_MAX, DEFAULT_EAGER_IDLE_MAX)
    }
}

impl Endpoint {
    /// Largest payload an eager send to `peer` can carry now: what
    /// [`send_inline`](Self::send_inline) accepts and below which
    /// [`send`](Self::send) completes at once (single- or multi-cell eager).
    /// It depends on whether rendezvous operations with `peer` are in
    /// flight, so ask right before sending.
    pub fn inline_max(&self, peer: PeerId) -> Result<usize> {
        Ok(self.eager_limit(self.peers.get(peer).ok_or(EINVAL)?))
    }

    /// Sets one fixed largest message sent by copy through the receiver's
    /// ring, replacing the two defaults ([`DEFAULT_EAGER_MAX`] while
    /// streaming, [`DEFAULT_EAGER_IDLE_MAX`] otherwise) and
    /// `FI_SHM_EAGER_MAX`. Values below one cell's payload mean
    /// single-cell only; values above what a peer's ring holds are capped
    /// per peer.
    pub fn set_eager_max(&mut self, bytes: usize) {
        self.eager_max = bytes;
        self.eager_idle_max = bytes;
    }

    pub(super) fn eager_limit(&self, p: &Peer) -> usize {
        let ring = p.ring;
        let cap = eager_capacity(ring.ncells(), ring.cell_size());
        // A peer with rendezvous traffic in flight is being streamed to:
        // medium messages then go through the ring, which sustains more
        // messages per second than a syscall each. Otherwise latency
        // counts, and one copy by CMA is faster above one cell.
        let want = if p.active == 0 { self.eager_idle_max } else { self.eager_max };
        (want as u64).clamp(first_cap(ring.cell_size()), cap) as usize
    }

    /// Writes an eager message into `peer`'s ring: one cell, or several
    /// consecutive cells claimed at once. Continuation cells are published
    /// before the first, so the receiver sees the message whole or not at
    /// all.
    fn post_eager(&mut self, peer: PeerId, hdr: &MsgHeader, data: &[u8]) -> Result<()> {
        let limit = self.eager_limit(self.peers.get(peer).ok_or(EINVAL)?);
        let key = self.key;
        let p = self.peers.get_mut(peer).ok_or(EINVAL)?;
        if !p.alive {
            return Err(err_connreset());
        }
        if data.len() > limit {
            return Err(EINVAL);
        }
        let cs = p.ring.cell_size();
        let k = eager_cells(cs, data.len() as u64);
        let pos = match p.ring.reserve_n(k) {
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
        // Only a tiny message gains from leaving words out.
        let pflags = if data.len() <= TINY_MAX {
            (if hdr.tag == 0 { PF_NO_TAG } else { 0 }) | (if hdr.cq_data == 0 { PF_NO_DATA } else { 0 })
        } else {
            0
        };
        let w = Wire { op: OP_EAGER, uflags: hdr.flags, pflags, src_key: key, tag: hdr.tag, cq_data: hdr.cq_data, len: data.len() as u64, ..Wire::default() };
        let n0 = data.len().min(first_cap(cs) as usize);
        // Continuation cells first, published as they are filled.
        let mut off = n0;
        for j in 1..k {
            let c = p.ring.cell(pos.wrapping_add(j));
            let n = (data.len() - off).min(cs - CONT_OFF);
            // SAFETY: cell j of our claim; n bytes fit after CONT_OFF and
            // off + n <= data.len().
            unsafe {
                std::ptr::write_volatile(c.add(8).cast::<u64>(), OP_CONT as u64 | j << 32);
                rfabric_core::copy::copy_bytes(data.as_ptr().add(off), c.add(CONT_OFF), n);
            }
            off += n;
            p.ring.publish(pos.wrapping_add(j));
        }
        // Then the first cell, so that the line the receiver polls is
        // written in one burst (one ownership transfer, not two): a payload
        // on the following lines first, then the header words and the
        // sequence word; a tiny payload goes after the header words (it may
        // overwrite the ones left out), right before the sequence word.
        let cell = p.ring.cell(pos);
        let off0 = payload_off(data.len() as u64, pflags);
        // SAFETY: the reserved cells are ours until published; the first
        // holds n0 bytes at off0 (n0 <= tiny_max(pflags) at the tiny
        // offset, else n0 <= cell_size - CELL_HDR at CELL_HDR).
        unsafe {
            if off0 >= CELL_HDR {
                rfabric_core::copy::copy_bytes(data.as_ptr(), cell.add(off0), n0);
                w.store(cell);
            } else {
                w.store(cell);
                rfabric_core::copy::copy_bytes(data.as_ptr(), cell.add(off0), n0);
            }
        }
        p.ring.publish(pos);
        // Our next entry most likely goes to the following cell: start
        // fetching its line now, while we wait for the peer anyway.
        p.ring.prefetch(pos.wrapping_add(k));
        Ok(())
    }

    /// Sends a message of at most [`inline_max`](Self::inline_max) bytes
    /// by copy into the peer's ring (one cell, or several consecutive
    /// cells for medium sizes). EAGAIN when the peer's ring is full, EINVAL
    /// when `data` is larger than that limit.
    pub fn send_inline(&mut self, peer: PeerId, hdr: &MsgHeader, data: &[u8]) -> Result<()> {
        self.post_eager(peer, hdr, data)
    }

    /// Copies an inline message into `dst` and releases its cell. Returns
    /// the number of bytes copied (min of message and buffer length).
    pub fn recv_inline(&mut self, inc: &Incoming, dst: &mut [u8]) -> Result<usize> {
        let Kind::Inline { pos } = inc.kind else { return Err(EINVAL) };
        let Some((hpos, k)) = self.held else { return Err(EINVAL) };
        if hpos != pos {
            return Err(EINVAL);
        }
        let cs = self.ring.cell_size();
        // The length is the one `parse` validated, read again from our
        // own copy of the header rather than from the caller's `inc`.
        // SAFETY: the held cell is ours until release.
        let w = unsafe { Wire::load(self.ring.cell(pos)) };
        let len = w.len;
        if eager_cells(cs, len) != k {
            self.release_held();
            return Err(err_io());
        }
        let want = (len as usize).min(dst.len());
        let n0 = want.min(first_cap(cs) as usize);
        let off0 = payload_off(len, w.pflags);
        // SAFETY: n0 bytes at off0 lie inside the held first cell (see
        // post_eager) and fit in dst.
        unsafe { rfabric_core::copy::copy_bytes(self.ring.cell(pos).add(off0), dst.as_mut_ptr(), n0) };
        let mut off = n0;
        let mut j = 1;
        while off < want && j < k {
            let n = (want - off).min(cs - CONT_OFF);
            // SAFETY: continuation cell j (j < k) was checked as published
            // by `parse` and is held; n bytes fit after CONT_OFF and in
            // dst[off..want].
            unsafe {
                rfabric_core::copy::copy_bytes(self.ring.cell(pos.wrapping_add(j)).add(CONT_OFF), dst.as_mut_ptr().add(off), n)
            };
            off += n;
            j += 1;
        }
        self.release_held();
        Ok(off)
    }

    pub(super) fn release_held(&mut self) {
        if let Some((pos, k)) = self.held.take() {
            self.consume(pos, k);
        }
    }
}
