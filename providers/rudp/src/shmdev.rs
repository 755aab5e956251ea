//! The shared-memory device: the `Device` of peers on this host, built
//! from the shm provider's pieces (`rfabric_shm::segment`, `ring`).
//!
//! It runs beside another device (`LocalOr`: UDP, or EFA) and takes that
//! device's endpoint addresses as its own: an endpoint and its peers are
//! named by the other device's raw addresses (a `sockaddr` for UDP, the
//! 24-byte name for EFA), and [`ShmNames`] says how such an address names
//! a segment and how log lines show it.
//!
//! Each endpoint owns a segment (a sealed memfd with its locator in
//! `/dev/shm`) whose ring is its inbox: peers write packets into its cells
//! and publish them; the endpoint reads them. The segment is reachable
//! under a name made from the endpoint's address: for UDP, of the
//! endpoint's network namespace (the inode of `/proc/self/ns/net`:
//! namespaces share `/dev/shm`, so 127.0.0.1:port in two of them never
//! meet) and its UDP address ([`link_name`], [`UDP_NAMES`]); for EFA, of
//! its GID and QP number (`efadev`).
//!
//! A cell: the ring's sequence word, then this device's header
//! (`[8..12]` packet length, `[12..16]` sender pid, `[16..32]` the sender
//! segment's nonce, `[32..60]` the sender's address as the other device
//! has it, up to 28 bytes, `[60]` its length), then the packet from byte
//! 64. Cells hold the largest packet any UDP device sends (a 65507-byte
//! datagram less its device header), whatever this endpoint's datagram
//! size: the engine keeps one `max_packet` (the other device's; an EFA
//! device's is smaller), and local peers with other sizes (one bound on
//! loopback, one on an interface of MTU 1500) still reach each other. 128
//! such cells are 8 MiB of address space; only the pages that packets
//! touch become memory. A peer whose cells are smaller than our packets
//! (not one of ours) is not reached through shared memory.
//!
//! Shared memory loses nothing, so there are no retransmissions. A send's
//! token is acknowledged once the receiver has consumed its cell (the
//! cell's sequence moved a lap on), which is when a UDP receiver would
//! have acknowledged the datagram: an operation towards a stopped peer
//! does not complete. A packet the engine refuses (`reject`) is copied out
//! of its cell and offered again a millisecond later; while such
//! packets wait, at most one ring's worth, no new ones are read, and the
//! ring filling up holds the senders back (their `room` turns 0).
//!
//! A peer is lost when packets to it stay unconsumed and its process is
//! gone (pid and start time, checked every `CHECK_EVERY`), its segment was
//! closed, or nothing was consumed for the peer timeout; it is only
//! reported in a `recv` that found our ring empty, so what it sent before
//! it died is handed up first. A packet from a new process at a known
//! address (another pid or nonce) reports the old one lost first, as the
//! UDP device does for a new connection id. Sending to a lost peer looks
//! its name up again.
//!
//! Waiting: a ring has no file descriptor to poll. The endpoint's progress
//! thread polls the other device's descriptor (the UDP socket; the EFA
//! device has none, and the poll only sleeps) with a 1 ms timeout and runs
//! progress after each wait, so an arrival in the ring is found within
//! about 1 ms by an idle thread, at once by a busy one (see `LocalOr::fd`).

use crate::device::{Device, PeerId, Placement, Placer, RxBatch, RxItem, Stats};
use crate::wire::{Pkt, PROTO_HDR};
use rfabric_core::abi::*;
use rfabric_core::error::{Error, Result, EAGAIN, EINVAL};
use rfabric_core::provider::Iov;
use rfabric_shm::cma;
use rfabric_shm::ring::{DeadClaim, Ring, CELL_HDR};
use rfabric_shm::segment::{self, Geometry, NameLink, Segment};
use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

const PROV: &str = "rudp";
const H_LEN: usize = 8;
const H_PID: usize = 12;
const H_NONCE: usize = 16;
const H_ADDR: usize = 32;
const H_ADDRLEN: usize = 60;
/// The longest address a cell carries (a `sockaddr_in6`; an EFA name is 24).
const ADDR_MAX: usize = crate::sockaddr::SIN6_LEN;
const _: () = assert!(H_ADDR + ADDR_MAX <= H_ADDRLEN && H_ADDRLEN < CELL_HDR);
/// The largest packet a cell holds: the largest UDP datagram less the
/// UDP device's header.
pub const CELL_PACKET_MAX: usize = 65507 - crate::wire::DEV_HDR;
/// Cells of an inbox.
const NCELLS: u32 = 128;
/// Packets read from the ring per `recv`, at most.
const RECV_BATCH: usize = 64;
/// How often unconsumed packets make us look at their receiver's process,
/// and an unpublished cell at our ring's head at its writer's.
const CHECK_EVERY: Duration = Duration::from_millis(50);
/// How long refused packets wait before they are offered again (what a
/// retransmission timer would do: an engine short of room is not asked
/// again at every progress call).
const REOFFER_AFTER: Duration = Duration::from_millis(1);

/// How endpoints' addresses (the raw addresses of the device beside this
/// one) name their segments, and how log lines show them.
#[derive(Clone, Copy)]
pub struct ShmNames {
    /// The name of the segment of the endpoint at this address, in the name
    /// space of `Segment::link_name`; `None` for an address that is not
    /// one, or whose name would not fit (such an endpoint has no segment).
    pub segment: fn(&[u8]) -> Option<String>,
    /// The address for log lines.
    pub text: fn(&[u8]) -> String,
}

/// UDP endpoints' names: a `sockaddr`, named by [`link_name`].
pub const UDP_NAMES: ShmNames = ShmNames { segment: udp_segment, text: udp_text };

fn udp_segment(raw: &[u8]) -> Option<String> {
    link_name(&crate::sockaddr::from_bytes(raw)?)
}

fn udp_text(raw: &[u8]) -> String {
    crate::sockaddr::from_bytes(raw).map_or_else(|| format!("{raw:02x?}"), |a| a.to_string())
}

/// The name of the segment of the endpoint at `addr` in this network
/// namespace (`fi_setname`'s name space of the shm provider, so the same
/// checks and clean-up apply), or `None` when the address does not fit in
/// a name (long IPv6 addresses: such endpoints use UDP only).
pub fn link_name(addr: &SocketAddr) -> Option<String> {
    let n = format!("r.{:x}.{}.{:x}", netns(), addr.ip(), addr.port());
    segment::valid_ep_name(&n).then_some(n)
}

/// The inode of this process's network namespace (0 if unknown).
fn netns() -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self/ns/net").map_or(0, |m| m.ino())
}

/// The geometry of an endpoint's segment: a ring of [`NCELLS`] cells of
/// [`CELL_PACKET_MAX`], no bounce slots to speak of.
pub fn geometry() -> Geometry {
    let cell = (CELL_HDR + CELL_PACKET_MAX).next_multiple_of(64);
    Geometry { ncells: NCELLS, cell_size: cell as u32, nslots: 1, nchunks: 1, chunk_size: 64 }
}

/// One packet sent and not consumed yet.
struct Out {
    pos: u64,
    token: u64,
}

struct Peer {
    /// Its address (the key of `by_addr`).
    raw: Vec<u8>,
    /// The peer's segment and its ring, while attached.
    seg: Option<(Segment, Ring)>,
    /// The peer's process (pid, nonce of its segment), once known.
    ident: Option<(u32, [u8; 16])>,
    start_time: u64,
    lost: bool,
    out: VecDeque<Out>,
    /// When the oldest unconsumed packet was sent or the last one consumed.
    progress_at: Instant,
    busy: bool,
    /// Whether its memory can be read with `process_vm_readv` (probed
    /// once per process: the pid it gives names the process that maps its
    /// segment where it says).
    readable: Option<bool>,
}

/// Where a packet of the current batch came from.
enum Taken {
    Cell(u64),
    Held(Vec<u8>),
}

impl Peer {
    /// Drops the packets the peer consumed, from the oldest, handing their
    /// tokens to `acked`; whether any was.
    fn release_consumed(&mut self, acked: &mut Vec<u64>) -> bool {
        let Some((_, ring)) = &self.seg else { return false };
        let mut any = false;
        while let Some(o) = self.out.front() {
            if !ring.consumed(o.pos) {
                break;
            }
            if o.token != 0 {
                acked.push(o.token);
            }
            self.out.pop_front();
            any = true;
        }
        any
    }
}

pub struct ShmDevice {
    /// Our inbox (`ring` lies in it).
    _seg: Segment,
    _link: NameLink,
    ring: Ring,
    head: u64,
    name: String,
    names: ShmNames,
    local_raw: Vec<u8>,
    pid: u32,
    nonce: [u8; 16],
    max_packet: usize,
    peer_timeout: Duration,
    peers: Vec<Peer>,
    by_addr: HashMap<Vec<u8>, PeerId>,
    busy: Vec<PeerId>,
    /// The packets of the batch being handed up: source, peer, refused.
    taken: Vec<(Taken, PeerId, bool)>,
    /// Refused packets, offered again after `REOFFER_AFTER`.
    held: VecDeque<(PeerId, Vec<u8>)>,
    /// When a packet was last refused.
    refused_at: Instant,
    pool: Vec<Vec<u8>>,
    acked: Vec<u64>,
    lost: Vec<PeerId>,
    /// Losses held back one `recv`: acknowledgements of the same peers
    /// went up first (the engine reads losses before acknowledgements).
    lost_next: Vec<PeerId>,
    stats: Stats,
    last_check: Instant,
    /// Long messages are read from their senders' memory (`read_peer`;
    /// `FI_RUDP_SHM_READ`); a peer the kernel refuses is marked in its
    /// `readable`.
    reads: bool,
}

impl ShmDevice {
    /// Creates the inbox of the endpoint at `local` (the other device's
    /// address of it) and names it as `names` says (`EINVAL` when the
    /// address has no name: for UDP an unspecified address, port 0, or a
    /// long IPv6 address).
    pub fn open(local: &[u8], names: ShmNames, max_packet: usize, peer_timeout: Duration) -> Result<ShmDevice> {
        if local.is_empty() || local.len() > ADDR_MAX {
            return Err(EINVAL);
        }
        let name = (names.segment)(local).ok_or(EINVAL)?;
        if max_packet > CELL_PACKET_MAX {
            return Err(EINVAL);
        }
        let g = geometry();
        let seg = Segment::create(g)?;
        let link = seg.link_name(&name)?;
        // SAFETY: the geometry of our own segment, just created and checked.
        let ring = unsafe { Ring::from_raw(seg.ring_base(), g.ncells, g.cell_size as usize) };
        let h = *seg.header();
        let now = Instant::now();
        Ok(ShmDevice {
            _link: link,
            ring,
            head: 0,
            name,
            names,
            local_raw: local.to_vec(),
            pid: h.pid,
            nonce: h.nonce,
            max_packet,
            peer_timeout,
            _seg: seg,
            peers: Vec::new(),
            by_addr: HashMap::new(),
            busy: Vec::new(),
            taken: Vec::new(),
            held: VecDeque::new(),
            refused_at: now,
            pool: Vec::new(),
            acked: Vec::new(),
            lost: Vec::new(),
            lost_next: Vec::new(),
            stats: Stats::default(),
            last_check: now,
            reads: true,
        })
    }

    /// The name peers find this endpoint under.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Attaches the segment named for `addr`; checks that its cells take
    /// our packets.
    fn attach(&self, addr: &[u8]) -> Result<(Segment, Ring)> {
        let name = (self.names.segment)(addr).ok_or(EINVAL)?;
        let seg = Segment::attach_name(&segment::named_shm_name(&name), None)?;
        let g = seg.geometry();
        if (g.cell_size as usize) < CELL_HDR + self.max_packet {
            rfabric_core::fi_info!(PROV, FI_LOG_EP_CTRL, "{}: its cells ({} bytes) are smaller than our packets: not reached through shared memory", (self.names.text)(addr), g.cell_size);
            return Err(EINVAL);
        }
        // SAFETY: `attach_name` checked the geometry against the mapping,
        // which lives as long as `seg`, kept next to the ring.
        let ring = unsafe { Ring::from_raw(seg.ring_base(), g.ncells, g.cell_size as usize) };
        Ok((seg, ring))
    }

    /// The peer at `addr`, its segment attached: `ENOENT` (or another
    /// error) when no endpoint whose segment we can reach has that address
    /// and shared memory on.
    pub fn connect(&mut self, addr: &[u8]) -> Result<PeerId> {
        if let Some(&id) = self.by_addr.get(addr) {
            if self.peers[id as usize].seg.is_none() {
                self.reattach(id)?;
            }
            return Ok(id);
        }
        let (seg, ring) = self.attach(addr)?;
        let id = self.add_peer(addr);
        self.set_seg(id, seg, ring);
        Ok(id)
    }

    fn add_peer(&mut self, addr: &[u8]) -> PeerId {
        let id = self.peers.len() as PeerId;
        self.peers.push(Peer {
            raw: addr.to_vec(),
            seg: None,
            ident: None,
            start_time: 0,
            lost: false,
            out: VecDeque::new(),
            progress_at: Instant::now(),
            busy: false,
            readable: None,
        });
        self.by_addr.insert(addr.to_vec(), id);
        id
    }

    fn set_seg(&mut self, id: PeerId, seg: Segment, ring: Ring) {
        let h = *seg.header();
        let p = &mut self.peers[id as usize];
        p.ident = Some((h.pid, h.nonce));
        p.start_time = h.start_time;
        p.seg = Some((seg, ring));
        p.readable = None;
        p.lost = false;
    }

    /// Looks a peer's name up again (a lost peer, or one known from its
    /// packets only). A new process there was a new peer: the old one is
    /// reported lost.
    fn reattach(&mut self, id: PeerId) -> Result<()> {
        let (seg, ring) = self.attach(&self.peers[id as usize].raw)?;
        let h = seg.header();
        let p = &self.peers[id as usize];
        if p.ident.is_some_and(|i| i != (h.pid, h.nonce)) && !p.lost {
            self.lose(id);
        }
        self.set_seg(id, seg, ring);
        Ok(())
    }

    /// Gives a peer up: what it was sent is dropped (never acknowledged),
    /// its segment detached.
    fn lose(&mut self, id: PeerId) {
        let p = &mut self.peers[id as usize];
        // What it took before is acknowledged still.
        p.release_consumed(&mut self.acked);
        if !p.lost {
            rfabric_core::fi_warn!(PROV, FI_LOG_EP_DATA, "local peer {} lost ({} packets unconsumed)", (self.names.text)(&p.raw), p.out.len());
            p.lost = true;
            self.lost.push(id);
        }
        p.out.clear();
        p.seg = None;
    }

    fn mark_busy(&mut self, id: PeerId) {
        let p = &mut self.peers[id as usize];
        if !p.busy {
            p.busy = true;
            self.busy.push(id);
        }
    }

    /// Acknowledges what peers consumed; gives up on peers whose packets
    /// wait on a dead process, a closed segment, or for the peer timeout.
    fn poll_out(&mut self, now: Instant, check: bool) {
        let mut i = 0;
        while i < self.busy.len() {
            let id = self.busy[i];
            let p = &mut self.peers[id as usize];
            if p.release_consumed(&mut self.acked) {
                p.progress_at = now;
            }
            let p = &self.peers[id as usize];
            if let (false, true, Some((seg, _))) = (p.out.is_empty(), check, &p.seg) {
                let dead = !seg.is_ready() || !segment::pid_alive(seg.header().pid, p.start_time);
                if dead || now.saturating_duration_since(p.progress_at) >= self.peer_timeout {
                    if !dead {
                        rfabric_core::fi_info!(PROV, FI_LOG_EP_DATA, "packets to {} unconsumed for {:?}", (self.names.text)(&p.raw), self.peer_timeout);
                    }
                    self.lose(id);
                }
            }
            let p = &mut self.peers[id as usize];
            if p.out.is_empty() {
                p.busy = false;
                self.busy.swap_remove(i);
            } else {
                i += 1;
            }
        }
    }

    /// Ends the batch handed up: cells go back to the writers; refused
    /// packets are kept, in order, to be offered again.
    fn finish(&mut self) {
        let mut taken = std::mem::take(&mut self.taken);
        let mut back = 0;
        for (src, peer, refused) in taken.drain(..) {
            match src {
                Taken::Cell(pos) => {
                    if refused {
                        self.refused_at = Instant::now();
                        let mut b = self.pool.pop().unwrap_or_default();
                        b.clear();
                        let c = self.ring.cell(pos);
                        // SAFETY: our ring; the cell at `pos` was published
                        // and is ours until released below.
                        let len = unsafe { std::ptr::read_unaligned(c.add(H_LEN).cast::<u32>()) } as usize;
                        // The length was checked when the cell was read;
                        // clamped again in case a writer changed it since.
                        let len = len.min(self.ring.inline_max());
                        // SAFETY: as above; CELL_HDR + len is inside the cell.
                        b.extend_from_slice(unsafe { std::slice::from_raw_parts(c.add(CELL_HDR), len) });
                        self.held.insert(back, (peer, b));
                        back += 1;
                    }
                    self.ring.release(pos);
                }
                Taken::Held(b) => {
                    if refused {
                        self.refused_at = Instant::now();
                        self.held.insert(back, (peer, b));
                        back += 1;
                    } else {
                        self.pool.push(b);
                    }
                }
            }
        }
        self.taken = taken;
    }

    /// The peer that sent the packet in `cell` (made on first sight), or
    /// `None` for a malformed header. A new process at a known address
    /// replaces the old one (reported lost, its packets of this batch from
    /// `first` on dropped).
    fn sender(&mut self, cell: *const u8, batch: &mut RxBatch, first: usize) -> Option<PeerId> {
        let mut raw = [0u8; ADDR_MAX];
        // SAFETY: the cell is published and ours until released; the
        // header lies in its first line.
        let (pid, nonce, alen) = unsafe {
            std::ptr::copy_nonoverlapping(cell.add(H_ADDR), raw.as_mut_ptr(), ADDR_MAX);
            let mut nonce = [0u8; 16];
            std::ptr::copy_nonoverlapping(cell.add(H_NONCE), nonce.as_mut_ptr(), 16);
            (std::ptr::read_unaligned(cell.add(H_PID).cast::<u32>()), nonce, std::ptr::read(cell.add(H_ADDRLEN)) as usize)
        };
        let addr = &raw[..alen.min(ADDR_MAX)];
        let id = match self.by_addr.get(addr) {
            Some(&id) => id,
            // A new sender: its address must name a segment, as ours does.
            None if (self.names.segment)(addr).is_some() => self.add_peer(addr),
            None => return None,
        };
        let p = &mut self.peers[id as usize];
        match p.ident {
            None => p.ident = Some((pid, nonce)),
            Some(i) if i == (pid, nonce) => {}
            Some(_) => {
                rfabric_core::fi_info!(PROV, FI_LOG_EP_DATA, "{} is a new process (pid {})", (self.names.text)(addr), pid);
                if p.lost {
                    // Reported when it was given up on.
                    p.out.clear();
                    p.seg = None;
                } else {
                    self.lose(id);
                }
                let p = &mut self.peers[id as usize];
                p.lost = false;
                p.ident = Some((pid, nonce));
                p.start_time = 0;
                let mut k = first;
                while k < batch.items.len() {
                    if batch.items[k].peer == id {
                        batch.items.remove(k);
                    } else {
                        k += 1;
                    }
                }
            }
        }
        Some(id)
    }

    /// Whether long messages from local peers are read from their memory
    /// (`FI_RUDP_SHM_READ`).
    pub fn set_reads(&mut self, on: bool) {
        self.reads = on;
    }

    /// `recv` into `batch` after what is there: packets go to
    /// `batch.data[off..]` (grown as needed), items after the present ones;
    /// the payload of a data packet goes straight from its cell to where
    /// `place` says, if it names a place.
    pub fn recv_at(&mut self, batch: &mut RxBatch, off: usize, now: Instant, place: Placer<'_, '_>) -> usize {
        if !self.taken.is_empty() {
            self.finish();
        }
        let first = batch.items.len();
        self.poll_out(now, false);
        let mut w = off;
        let mut n = 0;
        let reoffer = now.saturating_duration_since(self.refused_at) >= REOFFER_AFTER;
        while reoffer && self.taken.len() < RECV_BATCH {
            let Some((peer, b)) = self.held.pop_front() else { break };
            if batch.data.len() < w + b.len() {
                batch.data.resize(w + b.len(), 0);
            }
            rfabric_core::copy::copy_slice(&mut batch.data[w..w + b.len()], &b);
            batch.items.push(RxItem { peer, seq: self.taken.len() as u32, start: w, len: b.len(), placed: 0 });
            w += b.len();
            self.taken.push((Taken::Held(b), peer, false));
            n += 1;
        }
        let limit = self.ring.ncells() as usize;
        let mut empty = false;
        while self.taken.len() < RECV_BATCH && self.held.len() < limit {
            let Some(cell) = self.ring.peek(self.head) else {
                empty = true;
                break;
            };
            let pos = self.head;
            self.head = self.head.wrapping_add(1);
            self.stats.received += 1;
            n += 1;
            // SAFETY: a published cell of our ring, ours until released.
            let len = unsafe { std::ptr::read_unaligned(cell.add(H_LEN).cast::<u32>()) } as usize;
            let from = if len <= self.ring.inline_max() { self.sender(cell, batch, first) } else { None };
            let Some(peer) = from else {
                self.stats.malformed += 1;
                self.ring.release(pos);
                continue;
            };
            // SAFETY: CELL_HDR + len <= cell_size (checked above), and the
            // cell is ours (its writer published it) until released.
            let packet = unsafe { std::slice::from_raw_parts(cell.add(CELL_HDR), len) };
            let pl = match packet.split_at_checked(PROTO_HDR) {
                Some((head, payload)) if head[0] == Pkt::Data as u8 && !payload.is_empty() => place(peer, head, payload.len()).filter(|p| p.len() == payload.len()),
                _ => None,
            };
            let keep = if pl.is_some() { PROTO_HDR } else { len };
            if batch.data.len() < w + keep {
                batch.data.resize(w + keep, 0);
            }
            rfabric_core::copy::copy_slice(&mut batch.data[w..w + keep], &packet[..keep]);
            let placed = pl.map_or(0, |pl| pl.put(0, &packet[PROTO_HDR..]));
            batch.items.push(RxItem { peer, seq: self.taken.len() as u32, start: w, len: keep, placed });
            w += keep;
            self.taken.push((Taken::Cell(pos), peer, false));
        }
        if empty && now.saturating_duration_since(self.last_check) >= CHECK_EVERY {
            self.last_check = now;
            // A writer that died between claiming a cell and publishing it
            // would hold the ring up for ever: step over its claim (or
            // withdraw its announcement, if it died before the claim).
            match self.ring.dead_claim(self.head, |pid| !segment::pid_alive(pid, 0)) {
                DeadClaim::None => {}
                DeadClaim::Withdrawn(pid) => rfabric_core::fi_warn!(
                    PROV,
                    FI_LOG_EP_DATA,
                    "local queue position {} announced by process {} that died before claiming it, withdrawn",
                    self.head,
                    pid
                ),
                DeadClaim::Skip(k, pid) => {
                    rfabric_core::fi_warn!(
                        PROV,
                        FI_LOG_EP_DATA,
                        "{} local queue cell(s) at position {} claimed by process {} that died before publishing them, skipped",
                        k,
                        self.head,
                        pid
                    );
                    for j in 0..k {
                        self.ring.release(self.head.wrapping_add(j));
                    }
                    self.head = self.head.wrapping_add(k);
                    self.stats.malformed += k;
                }
            }
            // Losses only once what the ring held was read (see the
            // module comment).
            self.poll_out(now, true);
        }
        batch.lost.append(&mut self.lost_next);
        if self.acked.is_empty() {
            batch.lost.append(&mut self.lost);
        } else {
            batch.acked.append(&mut self.acked);
            self.lost_next.append(&mut self.lost);
        }
        n
    }

    /// Counters of the shared-memory path: `sent`, `received`, `rejected`,
    /// `malformed` (cells with a bad header, claims of dead writers).
    pub fn counters(&self) -> Stats {
        self.stats
    }

    /// One line per peer, for `FI_LOG_LEVEL=debug`.
    pub fn describe(&self) -> String {
        let mut s = format!("\n  shm {} head {} held {}", self.name, self.head, self.held.len());
        for (i, p) in self.peers.iter().enumerate() {
            s += &format!("\n  shm peer {i} {} {:?} lost {} attached {} unconsumed {}", (self.names.text)(&p.raw), p.ident.map(|i| i.0), p.lost, p.seg.is_some(), p.out.len());
        }
        s
    }
}

/// Whether `ip` is an address of this host in this namespace: loopback,
/// or one of `own` (the interfaces' addresses).
pub fn is_local(ip: &IpAddr, own: &[IpAddr]) -> bool {
    ip.is_loopback() || own.contains(ip)
}

impl Device for ShmDevice {
    fn max_packet(&self) -> usize {
        self.max_packet
    }

    fn peer(&mut self, addr: &[u8]) -> Result<PeerId> {
        self.connect(addr)
    }

    fn peer_addr(&self, p: PeerId) -> &[u8] {
        &self.peers[p as usize].raw
    }

    fn room(&self, id: PeerId) -> usize {
        let p = &self.peers[id as usize];
        match &p.seg {
            Some((_, ring)) => (ring.ncells() as usize / 2).saturating_sub(p.out.len()),
            // Lost or not attached: `send` looks it up (again).
            None => 1,
        }
    }

    fn send(&mut self, id: PeerId, proto: &[u8], payload: &[&[u8]], token: u64) -> Result<()> {
        let total = proto.len() + payload.iter().map(|s| s.len()).sum::<usize>();
        if total > self.max_packet {
            return Err(EINVAL);
        }
        if self.peers[id as usize].seg.is_none() && self.reattach(id).is_err() {
            // Nobody there: the packet is dropped and the peer reported
            // lost (again), so the operation fails instead of waiting.
            let p = &mut self.peers[id as usize];
            if !self.lost.contains(&id) && !self.lost_next.contains(&id) {
                p.lost = false;
                self.lose(id);
            }
            return Ok(());
        }
        let p = &self.peers[id as usize];
        let Some((seg, ring)) = &p.seg else { return Err(EAGAIN) };
        if !seg.is_ready() {
            self.lose(id);
            return Ok(());
        }
        if p.out.len() >= ring.ncells() as usize / 2 {
            return Err(EAGAIN);
        }
        let pos = ring.reserve()?;
        let c = ring.cell(pos);
        // SAFETY: the cell at `pos` is ours until published; the header
        // fits its first line and CELL_HDR + total <= cell_size (the
        // peer's cells take max_packet, checked at attach).
        unsafe {
            std::ptr::write_unaligned(c.add(H_LEN).cast::<u32>(), total as u32);
            std::ptr::write_unaligned(c.add(H_PID).cast::<u32>(), self.pid);
            std::ptr::copy_nonoverlapping(self.nonce.as_ptr(), c.add(H_NONCE), 16);
            std::ptr::write_bytes(c.add(H_ADDR), 0, ADDR_MAX);
            std::ptr::copy_nonoverlapping(self.local_raw.as_ptr(), c.add(H_ADDR), self.local_raw.len().min(ADDR_MAX));
            std::ptr::write(c.add(H_ADDRLEN), self.local_raw.len().min(ADDR_MAX) as u8);
            let mut o = CELL_HDR;
            for s in std::iter::once(&proto).chain(payload.iter()) {
                rfabric_core::copy::copy_bytes(s.as_ptr(), c.add(o), s.len());
                o += s.len();
            }
        }
        ring.publish(pos);
        let p = &mut self.peers[id as usize];
        if p.out.is_empty() {
            p.progress_at = Instant::now();
        }
        p.out.push_back(Out { pos, token });
        self.stats.sent += 1;
        self.mark_busy(id);
        Ok(())
    }

    fn recv(&mut self, batch: &mut RxBatch, now: Instant) -> usize {
        self.recv_placing(batch, now, &mut |_, _, _| None)
    }

    fn reads_peer(&self, id: PeerId) -> bool {
        self.reads && self.peers.get(id as usize).is_some_and(|p| !p.lost && p.readable != Some(false))
    }

    fn read_peer(&mut self, id: PeerId, remote: &[Iov], place: &Placement<'_>) -> Result<()> {
        let Some(p) = self.peers.get_mut(id as usize).filter(|p| !p.lost && self.reads) else { return Err(Error(FI_ENOENT)) };
        // Its segment (mapped when `LocalOr` first met it) says which
        // process it is.
        let Some((seg, _)) = p.seg.as_ref().filter(|(seg, _)| p.ident == Some((seg.header().pid, seg.header().nonce))) else {
            return Err(Error(FI_EAGAIN));
        };
        let h = *seg.header();
        if p.readable.is_none() {
            let mut expect = [0u8; 16];
            // SAFETY: the segment's header page is mapped while `seg` lives;
            // 16 plain bytes are copied.
            unsafe { std::ptr::copy_nonoverlapping(seg.base(), expect.as_mut_ptr(), 16) };
            let ok = cma::probe(h.pid, h.probe_addr, &expect).unwrap_or(false);
            if !ok {
                rfabric_core::fi_info!(PROV, FI_LOG_EP_DATA, "{}: its memory cannot be read (process {}): its long messages come through shared memory", (self.names.text)(&p.raw), h.pid);
            }
            p.readable = Some(ok);
        }
        if p.readable != Some(true) {
            return Err(Error(FI_EPERM));
        }
        match place.read_process(h.pid, remote) {
            Ok(()) => Ok(()),
            Err(e) => {
                rfabric_core::fi_info!(PROV, FI_LOG_EP_DATA, "{}: reading {} bytes of its memory failed (errno {}): the message comes through shared memory", (self.names.text)(&p.raw), place.len(), e);
                if matches!(e, libc::EPERM | libc::EACCES | libc::ENOSYS) {
                    p.readable = Some(false);
                }
                Err(Error(FI_EIO))
            }
        }
    }

    fn recv_placing(&mut self, batch: &mut RxBatch, now: Instant, place: Placer<'_, '_>) -> usize {
        batch.clear();
        self.recv_at(batch, 0, now, place)
    }

    fn reject(&mut self, _p: PeerId, seq: u32) {
        if let Some(t) = self.taken.get_mut(seq as usize) {
            if !t.2 {
                t.2 = true;
                self.stats.rejected += 1;
            }
        }
    }

    fn flush(&mut self, _now: Instant, _all: bool) {
        if !self.taken.is_empty() {
            self.finish();
        }
    }

    /// Nothing waits: `send` publishes each packet at once.
    fn push_out(&mut self) {}

    fn unacked(&self) -> bool {
        self.busy.iter().any(|&id| !self.peers[id as usize].out.is_empty())
    }

    fn stats(&self) -> Stats {
        self.stats
    }

    fn fd(&self) -> i32 {
        -1
    }

    fn name(&self) -> Vec<u8> {
        self.local_raw.clone()
    }

    fn describe(&self) -> String {
        ShmDevice::describe(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Port `k` of this test process: names only (no socket is bound),
    /// apart from those of other processes running these tests.
    fn port(k: u16) -> u16 {
        10000 + (std::process::id() % 5000) as u16 * 10 + k
    }

    /// 127.0.0.1:`port` as a `sockaddr`.
    fn at(port: u16) -> Vec<u8> {
        crate::sockaddr::to_bytes(&SocketAddr::from(([127, 0, 0, 1], port)))
    }

    fn dev(port: u16) -> ShmDevice {
        ShmDevice::open(&at(port), UDP_NAMES, 2000, Duration::from_secs(10)).unwrap()
    }

    /// The endpoint's address (`Device::name`, not the segment's name).
    fn addr(d: &ShmDevice) -> Vec<u8> {
        Device::name(d)
    }

    fn drain(d: &mut ShmDevice) -> (Vec<(PeerId, Vec<u8>)>, RxBatch) {
        let mut b = RxBatch::default();
        d.recv(&mut b, Instant::now());
        let v = b.items.iter().map(|it| (it.peer, b.packet(it).to_vec())).collect();
        (v, b)
    }

    #[test]
    fn names_and_geometry() {
        let a = SocketAddr::from(([127, 0, 0, 1], 4791));
        let n = link_name(&a).unwrap();
        assert!(n.starts_with("r.") && n.ends_with(".127.0.0.1.12b7"), "{n}");
        assert!(link_name(&"[2001:db8:1234:5678:9abc:def0:1234:5678]:1".parse().unwrap()).is_none());
        assert!(link_name(&"[::1]:1".parse().unwrap()).is_some());
        assert_eq!((UDP_NAMES.segment)(&crate::sockaddr::to_bytes(&a)), Some(n));
        assert_eq!((UDP_NAMES.text)(&crate::sockaddr::to_bytes(&a)), "127.0.0.1:4791");
        // No name: the unspecified address, port 0, not a sockaddr.
        for bad in [at(0), crate::sockaddr::to_bytes(&"0.0.0.0:5".parse().unwrap()), vec![1, 2, 3]] {
            assert_eq!(ShmDevice::open(&bad, UDP_NAMES, 2000, Duration::from_secs(1)).err(), Some(EINVAL));
        }
        let g = geometry();
        g.check().unwrap();
        assert!(g.cell_size as usize >= CELL_HDR + CELL_PACKET_MAX);
    }

    #[test]
    fn send_recv_ack_reject() {
        let mut a = dev(port(1));
        let mut b = dev(port(2));
        let pb = a.connect(&addr(&b)).unwrap();
        assert_eq!(a.room(pb), NCELLS as usize / 2);
        a.send(pb, b"hd", &[b"one"], 7).unwrap();
        a.send(pb, b"hd", &[b"two", b"!"], 8).unwrap();
        // Not consumed: no acknowledgement.
        let (v, bt) = drain(&mut a);
        assert!(v.is_empty() && bt.acked.is_empty());
        assert!(a.unacked());
        let (v, _) = drain(&mut b);
        assert_eq!(v.len(), 2);
        assert_eq!(v[0].1, b"hdone");
        assert_eq!(v[1].1, b"hdtwo!");
        assert_eq!(b.peer_addr(v[0].0), &addr(&a)[..]);
        // Refuse the second: it comes again (a moment later), and is
        // consumed then.
        b.reject(v[1].0, 1);
        b.flush(Instant::now(), true);
        a.send(pb, b"hd", &[b"three"], 9).unwrap();
        let mut got = Vec::new();
        let t0 = Instant::now();
        while got.len() < 2 {
            assert!(t0.elapsed() < Duration::from_secs(20), "the refused packet did not come again");
            let (v2, _) = drain(&mut b);
            b.flush(Instant::now(), true);
            got.extend(v2.into_iter().map(|x| x.1));
            std::thread::sleep(Duration::from_millis(1));
        }
        got.sort();
        assert_eq!(got, vec![b"hdthree".to_vec(), b"hdtwo!".to_vec()]);
        let (_, bt) = drain(&mut a);
        assert_eq!(bt.acked, vec![7, 8, 9]);
        assert!(!a.unacked());
        assert_eq!(b.counters().rejected, 1);
        // Too large a packet.
        assert_eq!(a.send(pb, &[0u8; 2001], &[], 0), Err(EINVAL));
    }

    #[test]
    fn closed_peer_is_lost_and_looked_up_again() {
        let mut a = dev(port(3));
        let b = dev(port(4));
        let baddr = addr(&b);
        let pb = a.connect(&baddr).unwrap();
        drop(b);
        a.send(pb, b"x", &[], 1).unwrap();
        let (_, bt) = drain(&mut a);
        assert_eq!(bt.lost, vec![pb]);
        assert!(bt.acked.is_empty());
        // Nobody there: lost again at once.
        a.send(pb, b"x", &[], 2).unwrap();
        let (_, bt) = drain(&mut a);
        assert_eq!(bt.lost, vec![pb]);
        // A new endpoint at the address: reached again.
        let mut b2 = dev(port(4));
        a.send(pb, b"y", &[], 3).unwrap();
        let (v, _) = drain(&mut b2);
        assert_eq!(v.len(), 1);
        assert!(a.connect(&at(port(5))).is_err());
    }

    #[test]
    fn peer_that_takes_nothing_is_lost_after_the_timeout() {
        let mut a = ShmDevice::open(&at(port(6)), UDP_NAMES, 2000, Duration::from_millis(100)).unwrap();
        let b = dev(port(7));
        let pb = a.connect(&addr(&b)).unwrap();
        a.send(pb, b"x", &[], 1).unwrap();
        let t0 = Instant::now();
        loop {
            let (_, bt) = drain(&mut a);
            if !bt.lost.is_empty() {
                assert_eq!(bt.lost, vec![pb]);
                break;
            }
            assert!(t0.elapsed() < Duration::from_secs(20), "never given up on");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(t0.elapsed() >= Duration::from_millis(100), "not before the timeout");
        assert!(!a.unacked());
    }

    #[test]
    fn new_process_at_an_address_replaces_the_old_one() {
        let mut a = dev(port(8));
        let mut b = dev(port(9));
        let pa = b.connect(&addr(&a)).unwrap();
        b.send(pa, b"old", &[], 0).unwrap();
        let (v, bt) = drain(&mut a);
        assert_eq!(v.len(), 1);
        assert!(bt.lost.is_empty());
        let pb = v[0].0;
        drop(b);
        // Another endpoint (another segment nonce) at the same address.
        let mut b2 = dev(port(9));
        let pa2 = b2.connect(&addr(&a)).unwrap();
        b2.send(pa2, b"new", &[], 0).unwrap();
        let (v, bt) = drain(&mut a);
        assert_eq!(bt.lost, vec![pb], "the old one is lost first");
        assert_eq!(v, vec![(pb, b"new".to_vec())]);
        // Answers reach the new one.
        a.send(pb, b"hi", &[], 4).unwrap();
        let (v, _) = drain(&mut b2);
        assert_eq!(v.len(), 1);
    }
}
