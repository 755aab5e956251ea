//! The datagram device the protocol engine runs on: reliable but unordered
//! delivery of packets to peers named by index, with a completion (the
//! token) once a packet is acknowledged. EFA's SRD gives this in hardware;
//! the UDP device (`udp.rs`) builds it in software.

use rfabric_core::error::Result;
use rfabric_core::provider::Iov;
use std::cell::Cell;
use std::marker::PhantomData;
use std::os::fd::RawFd;
use std::time::Instant;

use crate::engine::IOV_MAX as PLACE_IOV_MAX;

/// A peer of one endpoint, as the device numbers it.
pub type PeerId = u32;

/// A token with this bit comes back only once the peer has the packet,
/// also from a device that may hand tokens back earlier (over TCP, once
/// the bytes are written): the engine sets it for `FI_TRANSMIT_COMPLETE`
/// and `FI_DELIVERY_COMPLETE` operations. Devices return tokens unchanged.
pub const TOKEN_ON_ACK: u64 = 1 << 63;

/// One arrived packet: `data[start..start + len]` of the batch is the
/// protocol header and payload, or, when `start` has [`RxBatch::OWNED`]
/// set, bytes of one of the batch's own buffers ([`RxBatch::owned_start`]).
#[derive(Clone, Copy, Debug)]
pub struct RxItem {
    pub peer: PeerId,
    pub seq: u32,
    pub start: usize,
    pub len: usize,
    /// Bytes of payload the device already wrote where a [`Placement`]
    /// said; the packet's bytes are then its protocol header only.
    pub placed: usize,
}

/// What one `Device::recv` returns: arrived packets (each handed over
/// once), tokens of sent packets now acknowledged, peers given up on.
#[derive(Default)]
pub struct RxBatch {
    pub data: Vec<u8>,
    pub items: Vec<RxItem>,
    pub acked: Vec<u64>,
    pub lost: Vec<PeerId>,
    /// Buffers a device handed over whole (a large packet read straight
    /// into one, so it is not copied into `data`); the device takes them
    /// back at its next `recv`.
    pub owned: Vec<Vec<u8>>,
    /// Bytes of packets in `owned`.
    pub owned_bytes: usize,
}

impl RxBatch {
    /// Flag of an item's `start` that names a buffer of `owned`.
    pub const OWNED: usize = 1 << (usize::BITS - 1);

    /// The `start` of an item at byte `off` of `owned[idx]`.
    pub fn owned_start(idx: usize, off: usize) -> usize {
        debug_assert!(off < 1 << 32 && idx < 1 << (usize::BITS - 33));
        Self::OWNED | idx << 32 | off
    }

    /// Hands `buf` over with one packet at `buf[off..off + len]`.
    pub fn push_owned(&mut self, peer: PeerId, seq: u32, buf: Vec<u8>, off: usize, len: usize) {
        let start = Self::owned_start(self.owned.len(), off);
        self.owned.push(buf);
        self.owned_bytes += len;
        self.items.push(RxItem { peer, seq, start, len, placed: 0 });
    }

    #[inline]
    pub fn packet(&self, it: &RxItem) -> &[u8] {
        if it.start & Self::OWNED == 0 {
            return &self.data[it.start..it.start + it.len];
        }
        let (idx, off) = ((it.start & !Self::OWNED) >> 32, it.start & 0xffff_ffff);
        &self.owned[idx][off..off + it.len]
    }
    #[inline]
    pub fn clear(&mut self) {
        self.items.clear();
        self.acked.clear();
        self.lost.clear();
        self.owned.clear();
        self.owned_bytes = 0;
    }
}

/// Where the payload of one arriving packet goes: bytes `off..off + len`
/// of a posted receive's buffers. A device that reads a packet's protocol
/// header before its payload asks the engine for one
/// ([`Device::recv_placing`]) and reads the payload straight into place,
/// instead of into a buffer of its own that the engine then copies from.
/// It lives as long as the engine's borrow (`'a`): a device that reads a
/// packet over several calls asks again at each.
pub struct Placement<'a> {
    iov: [Iov; PLACE_IOV_MAX],
    niov: usize,
    off: usize,
    len: usize,
    engine: PhantomData<&'a mut [u8]>,
}

impl<'a> Placement<'a> {
    /// # Safety
    /// `iov` names memory that is writable, and written by nothing else,
    /// for `'a`, and holds at least `off + len` bytes.
    pub unsafe fn new(iov: &[Iov], off: usize, len: usize) -> Placement<'a> {
        let mut a = [Iov::default(); PLACE_IOV_MAX];
        let niov = iov.len().min(PLACE_IOV_MAX);
        a[..niov].copy_from_slice(&iov[..niov]);
        Placement { iov: a, niov, off, len, engine: PhantomData }
    }

    /// A place in `buf`: its bytes `off..off + len`, which lie inside it.
    pub fn in_cells(buf: &'a [Cell<u8>], off: usize, len: usize) -> Placement<'a> {
        assert!(off.checked_add(len).is_some_and(|end| end <= buf.len()), "a placement inside its buffer");
        // SAFETY: cells may be written through a shared reference, and
        // the borrow of `buf` lasts for 'a; the bytes lie inside it.
        unsafe { Placement::new(&[Iov { base: buf.as_ptr() as usize, len: buf.len() }], off, len) }
    }

    /// No place yet, but perhaps once the engine has taken the packets
    /// delivered before this one: a device that can leave the packet
    /// unread until the next round does so (a `len` of 0).
    pub fn later() -> Placement<'a> {
        Placement { iov: [Iov::default(); PLACE_IOV_MAX], niov: 0, off: 0, len: 0, engine: PhantomData }
    }

    /// Payload bytes the packet carries.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The buffers' pieces that payload bytes `at..len` land in, as iovecs;
    /// how many.
    fn pieces(&self, at: usize, out: &mut [libc::iovec; PLACE_IOV_MAX]) -> usize {
        iovecs(&self.iov[..self.niov], self.off + at, self.len.saturating_sub(at), out).0
    }

    /// Copies `src` to payload bytes `at..` (as far as the packet goes);
    /// returns the bytes copied.
    pub fn put(&self, at: usize, src: &[u8]) -> usize {
        let mut io = [NO_IOVEC; PLACE_IOV_MAX];
        let n = self.pieces(at, &mut io);
        let mut done = 0;
        for v in &io[..n] {
            let take = v.iov_len.min(src.len() - done);
            // SAFETY: `v` lies inside memory writable for `'a` (`new`'s
            // contract); `src` is the device's own buffer, never that memory.
            unsafe { rfabric_core::copy::copy_bytes(src[done..].as_ptr(), v.iov_base.cast::<u8>(), take) };
            done += take;
            if done == src.len() {
                break;
            }
        }
        done
    }

    /// Copies the `len` bytes at `remote` (addresses in process `pid`,
    /// which may hold more) into place with `process_vm_readv`; an OS error
    /// number when the kernel refuses or the transfer stops short.
    pub fn read_process(&self, pid: u32, remote: &[Iov]) -> std::result::Result<(), i32> {
        let mut at = 0;
        while at < self.len {
            let mut local = [NO_IOVEC; PLACE_IOV_MAX];
            let nl = self.pieces(at, &mut local);
            let mut far = [NO_IOVEC; PLACE_IOV_MAX];
            let (nf, left) = iovecs(&remote[..remote.len().min(PLACE_IOV_MAX)], at, self.len - at, &mut far);
            if left > 0 {
                return Err(libc::EFAULT);
            }
            // SAFETY: the local iovecs lie inside memory writable for `'a`
            // (`new`'s contract); the remote ones are the other process's,
            // checked by the kernel.
            let n = unsafe { libc::process_vm_readv(pid as libc::pid_t, local.as_ptr(), nl as libc::c_ulong, far.as_ptr(), nf as libc::c_ulong, 0) };
            match n {
                n if n > 0 => at += n as usize,
                0 => return Err(libc::EFAULT),
                _ => {
                    let e = std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO);
                    if e != libc::EINTR {
                        return Err(e);
                    }
                }
            }
        }
        Ok(())
    }

    /// Reads from the stream socket `fd` into payload bytes `at..len`
    /// (one `readv`); as `read(2)`: the bytes read, 0 at the end of the
    /// stream.
    pub fn read_from(&self, fd: RawFd, at: usize) -> std::io::Result<usize> {
        let mut io = [NO_IOVEC; PLACE_IOV_MAX];
        let n = self.pieces(at, &mut io);
        if n == 0 {
            return Ok(0);
        }
        // SAFETY: the iovecs lie inside memory writable for `'a` (`new`'s
        // contract); readv writes only there.
        let r = unsafe { libc::readv(fd, io.as_ptr(), n as libc::c_int) };
        if r < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(r as usize)
    }
}

const NO_IOVEC: libc::iovec = libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 };

/// Bytes `skip..skip + len` of the buffers `iov` as iovecs in `out`: how
/// many, and the bytes that did not fit in `iov`.
fn iovecs(iov: &[Iov], skip: usize, len: usize, out: &mut [libc::iovec; PLACE_IOV_MAX]) -> (usize, usize) {
    let (mut n, mut left) = (0, len);
    for p in rfabric_core::provider::iov_pieces(iov, skip, len).take(PLACE_IOV_MAX) {
        out[n] = libc::iovec { iov_base: p.base as *mut libc::c_void, iov_len: p.len };
        n += 1;
        left -= p.len;
    }
    (n, left)
}

/// The engine's answer to "where does this packet's payload go?": given
/// the peer, the packet's protocol header and its payload length, a
/// [`Placement`] or `None` (the device then delivers the packet whole);
/// an empty one ([`Placement::later`]) asks a device that can to leave
/// the packet unread until the engine has taken those before it.
pub type Placer<'a, 'p> = &'a mut dyn FnMut(PeerId, &[u8], usize) -> Option<Placement<'p>>;

pub trait Device: Send {
    /// Bytes of protocol header plus payload one packet carries.
    fn max_packet(&self) -> usize;
    /// The peer at this raw address (as the AV holds it), made on first use.
    fn peer(&mut self, addr: &[u8]) -> Result<PeerId>;
    /// The raw address of a peer (for `FI_SOURCE`).
    fn peer_addr(&self, p: PeerId) -> &[u8];
    /// Packets the device takes for `p` now.
    fn room(&self, p: PeerId) -> usize;
    /// Whether it takes one now (`room(p) > 0`, which a device may answer
    /// more cheaply).
    fn has_room(&self, p: PeerId) -> bool {
        self.room(p) > 0
    }
    /// Sends `proto` then `payload` to `p` as one packet; `token` comes back
    /// in `RxBatch::acked` once the peer has it (0: no token wanted).
    /// `-FI_EAGAIN` when `room(p)` is 0.
    fn send(&mut self, p: PeerId, proto: &[u8], payload: &[&[u8]], token: u64) -> Result<()>;
    /// Receives what has arrived and runs the timers (retransmission, peer
    /// loss). Packets in `batch.items` count as accepted unless rejected.
    fn recv(&mut self, batch: &mut RxBatch, now: Instant) -> usize;
    /// As `recv`, and a packet whose payload `place` names a place for may
    /// be read straight into it (its item then has `placed` set). Default:
    /// `recv`.
    fn recv_placing(&mut self, batch: &mut RxBatch, now: Instant, place: Placer<'_, '_>) -> usize {
        let _ = place;
        self.recv(batch, now)
    }
    /// Whether `read_peer` may work for `p`: a peer in another process on
    /// this host. Default: no.
    fn reads_peer(&self, p: PeerId) -> bool {
        let _ = p;
        false
    }
    /// Copies `place.len()` bytes at `remote` (addresses in `p`'s process)
    /// into `place`. An error means nothing in place can be relied on: the
    /// data must be sent instead.
    fn read_peer(&mut self, p: PeerId, remote: &[Iov], place: &Placement<'_>) -> Result<()> {
        let _ = (p, remote, place);
        Err(rfabric_core::error::Error(rfabric_core::abi::FI_ENOSYS))
    }
    /// The engine could not take this packet now: it is not acknowledged and
    /// the sender will send it again (receiver-not-ready).
    fn reject(&mut self, p: PeerId, seq: u32);
    /// Ends a batch (rejections are final) and sends acknowledgements: all
    /// that are owed, or (`all` false) only to peers owed many.
    fn flush(&mut self, now: Instant, all: bool);
    /// Sends what `send` may have queued (to batch system calls). The
    /// engine calls it after each operation and each progress round.
    fn push_out(&mut self);
    /// Whether packets sent are still unacknowledged.
    fn unacked(&self) -> bool;
    /// Counters of dropped and retransmitted datagrams, for logs and tests.
    fn stats(&self) -> Stats;
    /// A file descriptor that turns readable when packets arrive; for a
    /// device that reads a source directly in every round instead (tcp's
    /// only connection), only once `keep_watching` was called.
    fn fd(&self) -> i32;
    /// Someone will block on `fd` (an endpoint's progress thread): from now
    /// on it must turn readable for every packet.
    fn keep_watching(&mut self) {}
    /// The endpoint's own address, as peers hold it in their AV
    /// (`fi_getname`).
    fn name(&self) -> Vec<u8>;
    /// The device's state, for `FI_LOG_LEVEL=debug` dumps.
    fn describe(&self) -> String {
        String::new()
    }
    /// Counters beyond `stats` for the endpoint's close line (another
    /// path's), if the device has any.
    fn close_note(&self) -> Option<String> {
        None
    }
}

/// Datagrams the device dropped, by reason, and its retransmissions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub malformed: u64,
    pub unknown_peer: u64,
    pub bad_conn: u64,
    pub bad_seq: u64,
    pub duplicate: u64,
    pub retransmitted: u64,
    pub rejected: u64,
    pub sent: u64,
    pub received: u64,
    /// Sends that carried several of the datagrams counted in `sent` at
    /// once (UDP GSO).
    pub gso_sends: u64,
    /// Receives that brought several of the datagrams counted in
    /// `received` at once (UDP GRO).
    pub gro_recvs: u64,
}
