//! The device an endpoint's engine runs on: peers on this host through
//! shared memory (`shmdev`), the others through a remote device (UDP for
//! rudp, `udp`; EFA for the efa entry, `efadev`), behind one peer
//! numbering, so the engine (matching, ordering, completions,
//! `FI_SOURCE`) does not know which path a peer takes. `LocalOr<R>` is
//! that composition over any remote device `R` that says, through
//! [`RemoteDevice`], how its addresses are keyed, which are on this host,
//! and how they name shared-memory segments; `LocalOrUdp` is rudp's.
//!
//! The rule, the same at both ends: a peer goes through shared memory when
//! shared memory is on here (`FI_RUDP_ENABLE_SHM`, `FI_EFA_ENABLE_SHM_TRANSFER`),
//! its address is one of this host's (UDP: loopback or one of this
//! namespace's interface addresses; EFA: its GID is one of this host's EFA
//! devices'), and the segment named after that address exists and takes
//! our packets, at the moment the device first meets the peer (the first
//! operation towards it, or its first packet: not the AV insertion). It
//! keeps that path until the peer is lost (on either path): the next packet
//! to it decides again, as for a new peer. A peer with shared memory off
//! has no segment, so both ends use the remote device. A peer that opens
//! only after we first sent to it is reached through the remote device,
//! while it may reach us through shared memory: each direction is one
//! path, and arrivals from both paths belong to the same peer (keyed by its
//! remote device's address), which the engine tolerates as it tolerates
//! any order. A peer lost on either path is lost.

#![forbid(unsafe_code)]

use crate::device::{Device, PeerId, Placement, Placer, RxBatch, Stats};
use crate::shmdev::{ShmDevice, ShmNames};
use crate::udp::{UdpConfig, UdpDevice};
use rfabric_core::abi::*;
use rfabric_core::error::{Error, Result, EINVAL};
use rfabric_core::provider::Iov;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

const PROV: &str = "rudp";
const NONE: PeerId = PeerId::MAX;

/// What `LocalOr` asks of the device that reaches the peers of other
/// hosts: its addresses (the raw addresses of the AV, which the
/// shared-memory path also names endpoints by, `Device::name` its own)
/// and how it reports what it received.
pub trait RemoteDevice: Device {
    /// What tells this host's peers from the others (UDP: this
    /// namespace's interface addresses; EFA: this host's EFA GIDs).
    type Here: Default + Send;
    /// The device, as log lines name the path (`UDP`).
    const PATH: &'static str;
    /// How the shared-memory path names endpoints by these addresses.
    const NAMES: ShmNames;
    /// `addr` as peers are keyed: the same bytes for the same endpoint,
    /// however the AV spelled it; `None` when it is not an address of
    /// this device.
    fn key(addr: &[u8]) -> Option<Vec<u8>>;
    /// Whether the endpoint at `addr` (a key) is on this host.
    fn is_local(here: &Self::Here, addr: &[u8]) -> bool;
    /// Bytes at the start of `batch.data` that its last `recv` wrote into
    /// (the shared-memory path's packets go after them).
    fn rx_used(&self, batch: &RxBatch) -> usize;
}

impl RemoteDevice for UdpDevice {
    type Here = Vec<IpAddr>;
    const PATH: &'static str = "UDP";
    const NAMES: ShmNames = crate::shmdev::UDP_NAMES;
    fn key(addr: &[u8]) -> Option<Vec<u8>> {
        crate::sockaddr::from_bytes(addr).map(|a| crate::sockaddr::to_bytes(&a))
    }
    /// Loopback or one of this namespace's interface addresses.
    fn is_local(own: &Vec<IpAddr>, addr: &[u8]) -> bool {
        crate::sockaddr::from_bytes(addr).is_some_and(|a| crate::shmdev::is_local(&a.ip(), own))
    }
    fn rx_used(&self, _batch: &RxBatch) -> usize {
        self.rx_area()
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Path {
    Remote,
    Shm,
    /// Lost: decided again at the next packet to it.
    Undecided,
}

struct Peer {
    /// Its address, as `RemoteDevice::key` makes it.
    raw: Vec<u8>,
    /// The peer in each device, once it has one.
    remote: PeerId,
    shm: PeerId,
    /// Where packets to it go.
    path: Path,
}

/// Peers on this host through shared memory, the others through `R`.
pub struct LocalOr<R: RemoteDevice> {
    remote: R,
    shm: Option<ShmDevice>,
    /// This host's addresses, as `R` tells them.
    here: R::Here,
    peers: Vec<Peer>,
    by_addr: HashMap<Vec<u8>, PeerId>,
    /// Device peer -> our peer.
    of_remote: Vec<PeerId>,
    of_shm: Vec<PeerId>,
    /// Items of the current batch: the device and its sequence.
    origin: Vec<(Path, u32)>,
}

/// rudp's device: UDP, and shared memory for local peers.
pub type LocalOrUdp = LocalOr<UdpDevice>;

impl LocalOr<UdpDevice> {
    /// The UDP device bound to `bind`, and with `shm` the shared-memory
    /// inbox named after its address (without it, when it cannot be made:
    /// logged, and local peers use UDP).
    pub fn open(bind: SocketAddr, cfg: UdpConfig, shm: bool) -> Result<LocalOrUdp> {
        let timeout = cfg.peer_timeout;
        let udp = UdpDevice::open(bind, cfg)?;
        Ok(LocalOr::new(udp, shm, timeout, || rfabric_core::net::interfaces().into_iter().map(|i| i.addr).collect()))
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.remote.local_addr()
    }

    /// Whether datagram runs go as UDP GSO sends (see `UdpDevice::gso`).
    pub fn gso(&self) -> bool {
        self.remote.gso()
    }

    /// Whether received datagrams may come coalesced (see `UdpDevice::gro`).
    pub fn gro(&self) -> bool {
        self.remote.gro()
    }
}

impl<R: RemoteDevice> LocalOr<R> {
    /// `remote`, and with `shm` the shared-memory inbox named after its
    /// address (without it, when it cannot be made: logged, and local
    /// peers use `remote`); `here` gives this host's addresses, asked only
    /// when the inbox exists. `peer_timeout`: how long packets to a local
    /// peer stay unconsumed before it is given up on.
    pub fn new(remote: R, shm: bool, peer_timeout: Duration, here: impl FnOnce() -> R::Here) -> LocalOr<R> {
        let shm = if shm {
            let local = remote.name();
            match ShmDevice::open(&local, R::NAMES, remote.max_packet(), peer_timeout) {
                Ok(d) => Some(d),
                Err(e) => {
                    rfabric_core::fi_info!(PROV, FI_LOG_EP_CTRL, "endpoint {}: no shared-memory path ({}): local peers go through {}", (R::NAMES.text)(&local), e, R::PATH);
                    None
                }
            }
        } else {
            None
        };
        let here = if shm.is_some() { here() } else { R::Here::default() };
        LocalOr { remote, shm, here, peers: Vec::new(), by_addr: HashMap::new(), of_remote: Vec::new(), of_shm: Vec::new(), origin: Vec::new() }
    }

    /// The device that reaches the other hosts.
    pub fn remote(&self) -> &R {
        &self.remote
    }

    /// Whether this endpoint has the shared-memory path.
    pub fn has_shm(&self) -> bool {
        self.shm.is_some()
    }

    /// Counters of the shared-memory path (zero without it).
    pub fn shm_stats(&self) -> Stats {
        self.shm.as_ref().map(|s| s.counters()).unwrap_or_default()
    }

    /// Peers that go through shared memory.
    pub fn shm_peers(&self) -> usize {
        self.peers.iter().filter(|p| p.path == Path::Shm).count()
    }

    pub fn describe(&self) -> String {
        let mut s = self.remote.describe();
        if let Some(d) = &self.shm {
            s += &d.describe();
        }
        s
    }

    /// The shared-memory peer for `addr` when the rule says so.
    fn shm_route(&mut self, addr: &[u8]) -> Option<PeerId> {
        let d = self.shm.as_mut()?;
        if !R::is_local(&self.here, addr) {
            return None;
        }
        d.connect(addr).ok()
    }

    /// A new peer, first met through `remote` or `shm` (its packet) or
    /// neither (our first packet to it); the rule decides its path even
    /// when its packet came through shared memory (its packets may fit
    /// our cells while ours do not fit its).
    fn add(&mut self, addr: Vec<u8>, remote: PeerId, shm: PeerId) -> PeerId {
        let id = self.peers.len() as PeerId;
        let (shm, path) = match self.shm_route(&addr) {
            Some(s) => (s, Path::Shm),
            None => (shm, Path::Remote),
        };
        rfabric_core::fi_dbg!(PROV, FI_LOG_EP_CTRL, "peer {} through {}", (R::NAMES.text)(&addr), if path == Path::Shm { "shared memory" } else { R::PATH });
        self.by_addr.insert(addr.clone(), id);
        self.peers.push(Peer { raw: addr, remote, shm, path });
        if shm != NONE {
            set(&mut self.of_shm, shm, id);
        }
        if remote != NONE {
            set(&mut self.of_remote, remote, id);
        }
        id
    }

    /// Our peer for device peer `dp` of `path`, made on first sight.
    fn ours(&mut self, path: Path, dp: PeerId) -> PeerId {
        let map = if path == Path::Remote { &self.of_remote } else { &self.of_shm };
        if let Some(&id) = map.get(dp as usize) {
            if id != NONE {
                return id;
            }
        }
        let raw = match (path, &self.shm) {
            (Path::Remote, _) => self.remote.peer_addr(dp),
            (Path::Shm, Some(s)) => s.peer_addr(dp),
            _ => return NONE,
        };
        // Both devices keep addresses of the remote device's kind.
        let Some(addr) = R::key(raw) else { return NONE };
        match self.by_addr.get(&addr) {
            Some(&id) => {
                let p = &mut self.peers[id as usize];
                if path == Path::Remote {
                    p.remote = dp;
                    set(&mut self.of_remote, dp, id);
                } else {
                    p.shm = dp;
                    set(&mut self.of_shm, dp, id);
                }
                id
            }
            None if path == Path::Remote => self.add(addr, dp, NONE),
            None => self.add(addr, NONE, dp),
        }
    }

    /// Applies the rule again to a peer that was lost.
    fn decide(&mut self, id: PeerId) -> Result<()> {
        let addr = std::mem::take(&mut self.peers[id as usize].raw);
        let route = self.shm_route(&addr);
        self.peers[id as usize].raw = addr;
        match route {
            Some(s) => {
                let p = &mut self.peers[id as usize];
                p.shm = s;
                p.path = Path::Shm;
                set(&mut self.of_shm, s, id);
            }
            None => {
                self.peers[id as usize].path = Path::Remote;
                self.remote_peer(id)?;
            }
        }
        Ok(())
    }

    /// The remote device's peer of `id`, made on first use.
    fn remote_peer(&mut self, id: PeerId) -> Result<PeerId> {
        let p = &self.peers[id as usize];
        if p.remote != NONE {
            return Ok(p.remote);
        }
        let u = self.remote.peer(&p.raw)?;
        self.peers[id as usize].remote = u;
        set(&mut self.of_remote, u, id);
        Ok(u)
    }

    /// Maps the device's items `from..`, and its losses `lost_from..`, to
    /// our peers; numbers the items' sequences in `origin`.
    fn adopt(&mut self, batch: &mut RxBatch, path: Path, from: usize, lost_from: usize) {
        let mut unknown = false;
        for k in from..batch.items.len() {
            let it = batch.items[k];
            let id = self.ours(path, it.peer);
            unknown |= id == NONE;
            self.origin.push((path, it.seq));
            let it = &mut batch.items[k];
            it.peer = id;
            it.seq = (self.origin.len() - 1) as u32;
        }
        for k in lost_from..batch.lost.len() {
            let dp = batch.lost[k];
            let id = self.ours(path, dp);
            batch.lost[k] = id;
            unknown |= id == NONE;
            if id != NONE {
                self.peers[id as usize].path = Path::Undecided;
            }
        }
        if unknown {
            // Not expected (devices hand out addresses they made), but
            // the engine must never see a peer that does not exist.
            batch.items.retain(|it| it.peer != NONE);
            batch.lost.retain(|&p| p != NONE);
        }
    }
}

fn set(map: &mut Vec<PeerId>, k: PeerId, v: PeerId) {
    if map.len() <= k as usize {
        map.resize(k as usize + 1, NONE);
    }
    map[k as usize] = v;
}

impl<R: RemoteDevice> LocalOr<R> {
    /// Whether long messages from peers in shared memory are read from
    /// their senders' memory (`FI_RUDP_SHM_READ`).
    pub fn set_shm_reads(&mut self, on: bool) {
        if let Some(s) = self.shm.as_mut() {
            s.set_reads(on);
        }
    }
}

impl<R: RemoteDevice> Device for LocalOr<R> {
    fn max_packet(&self) -> usize {
        self.remote.max_packet()
    }

    fn peer(&mut self, addr: &[u8]) -> Result<PeerId> {
        let a = R::key(addr).ok_or(EINVAL)?;
        let id = match self.by_addr.get(&a) {
            Some(&id) => id,
            None => self.add(a, NONE, NONE),
        };
        if self.peers[id as usize].path == Path::Remote {
            self.remote_peer(id)?;
        }
        Ok(id)
    }

    fn peer_addr(&self, p: PeerId) -> &[u8] {
        &self.peers[p as usize].raw
    }

    fn room(&self, id: PeerId) -> usize {
        let p = &self.peers[id as usize];
        match (p.path, &self.shm) {
            (Path::Shm, Some(s)) => s.room(p.shm),
            // `send` decides.
            (Path::Undecided, _) => 1,
            _ if p.remote != NONE => self.remote.room(p.remote),
            _ => 0,
        }
    }

    fn send(&mut self, id: PeerId, proto: &[u8], payload: &[&[u8]], token: u64) -> Result<()> {
        if self.peers[id as usize].path == Path::Undecided {
            self.decide(id)?;
        }
        let p = &self.peers[id as usize];
        match (p.path, &mut self.shm) {
            (Path::Shm, Some(s)) => s.send(p.shm, proto, payload, token),
            _ => {
                let u = self.remote_peer(id)?;
                self.remote.send(u, proto, payload, token)
            }
        }
    }

    fn recv(&mut self, batch: &mut RxBatch, now: Instant) -> usize {
        self.recv_placing(batch, now, &mut |_, _, _| None)
    }

    fn recv_placing(&mut self, batch: &mut RxBatch, now: Instant, place: Placer<'_, '_>) -> usize {
        self.origin.clear();
        let mut n = self.remote.recv(batch, now);
        self.adopt(batch, Path::Remote, 0, 0);
        if self.shm.is_some() {
            let (from, lost_from, off) = (batch.items.len(), batch.lost.len(), self.remote.rx_used(batch));
            // Placed only for peers the engine knows by this device already.
            let of_shm = &self.of_shm;
            let mut place_known = |dp: PeerId, head: &[u8], len: usize| match of_shm.get(dp as usize) {
                Some(&id) if id != NONE => place(id, head, len),
                _ => None,
            };
            if let Some(s) = self.shm.as_mut() {
                n += s.recv_at(batch, off, now, &mut place_known);
            }
            self.adopt(batch, Path::Shm, from, lost_from);
        }
        n
    }

    fn reads_peer(&self, id: PeerId) -> bool {
        let p = &self.peers[id as usize];
        match (p.path, &self.shm) {
            (Path::Shm, Some(s)) => s.reads_peer(p.shm),
            _ => false,
        }
    }

    fn read_peer(&mut self, id: PeerId, remote: &[Iov], place: &Placement<'_>) -> Result<()> {
        // Its packets may come through shared memory while ours go by the
        // remote device: the shared-memory side knows its process.
        let p = &self.peers[id as usize];
        match &mut self.shm {
            Some(s) if p.shm != NONE => s.read_peer(p.shm, remote, place),
            _ => Err(Error(FI_ENOSYS)),
        }
    }

    fn reject(&mut self, p: PeerId, seq: u32) {
        let Some(&(path, dseq)) = self.origin.get(seq as usize) else { return };
        let peer = &self.peers[p as usize];
        match (path, &mut self.shm) {
            (Path::Shm, Some(s)) => s.reject(peer.shm, dseq),
            (Path::Remote, _) => self.remote.reject(peer.remote, dseq),
            _ => {}
        }
    }

    fn flush(&mut self, now: Instant, all: bool) {
        self.remote.flush(now, all);
        if let Some(s) = self.shm.as_mut() {
            s.flush(now, all);
        }
    }

    fn push_out(&mut self) {
        self.remote.push_out();
    }

    fn unacked(&self) -> bool {
        self.remote.unacked() || self.shm.as_ref().is_some_and(|s| s.unacked())
    }

    /// The remote device's counters (those of shared memory: `shm_stats`).
    fn stats(&self) -> Stats {
        self.remote.stats()
    }

    /// The remote device's: for UDP its socket, which the progress thread
    /// polls with a 1 ms timeout, bounding how late it finds a packet in
    /// the ring (`shmdev`); -1 for EFA (polled).
    fn fd(&self) -> i32 {
        self.remote.fd()
    }

    fn name(&self) -> Vec<u8> {
        self.remote.name()
    }

    fn describe(&self) -> String {
        LocalOr::describe(self)
    }

    /// The shared-memory path's counters (`shm_stats`).
    fn close_note(&self) -> Option<String> {
        let m = self.shm.as_ref()?.counters();
        Some(format!(
            "shared memory: {} packets sent, {} received, {} refused for lack of room, {} malformed; {} local peers",
            m.sent,
            m.received,
            m.rejected,
            m.malformed,
            self.shm_peers()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn open(addr: SocketAddr, shm: bool) -> LocalOrUdp {
        LocalOrUdp::open(addr, UdpConfig::default(), shm).unwrap()
    }

    /// Runs both devices until `b` has a packet; returns its peer and bytes.
    #[track_caller]
    fn exchange(a: &mut LocalOrUdp, b: &mut LocalOrUdp) -> (PeerId, Vec<u8>) {
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut batch = RxBatch::default();
        loop {
            assert!(Instant::now() < deadline, "no packet arrived: {:?} {}\n{:?} {}", a.stats(), a.describe(), b.stats(), b.describe());
            let now = Instant::now();
            a.recv(&mut batch, now);
            a.flush(now, true);
            b.recv(&mut batch, now);
            if let Some(it) = batch.items.first() {
                let got = (it.peer, batch.packet(it).to_vec());
                b.flush(now, true);
                return got;
            }
            b.flush(now, true);
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// A packet as long as the engine's header at least (the UDP device
    /// drops shorter data packets).
    fn pkt(s: &[u8]) -> Vec<u8> {
        let mut v = s.to_vec();
        v.resize(crate::wire::PROTO_HDR.max(s.len()), 0);
        v
    }

    fn free_port() -> SocketAddr {
        std::net::UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap()
    }

    #[test]
    fn local_peers_take_shared_memory() {
        let mut a = open("127.0.0.1:0".parse().unwrap(), true);
        let mut b = open("127.0.0.1:0".parse().unwrap(), true);
        let pb = a.peer(&crate::sockaddr::to_bytes(&b.local_addr())).unwrap();
        a.send(pb, &pkt(b"hi"), &[], 0).unwrap();
        let (pa, data) = exchange(&mut a, &mut b);
        assert_eq!(data, pkt(b"hi"));
        assert_eq!(b.peer_addr(pa), &crate::sockaddr::to_bytes(&a.local_addr())[..]);
        b.send(pa, &pkt(b"back"), &[], 0).unwrap();
        let (p, data) = exchange(&mut b, &mut a);
        assert_eq!((p, data), (pb, pkt(b"back")));
        assert_eq!((a.shm_stats().sent, a.shm_stats().received), (1, 1));
        assert_eq!(a.stats().sent + b.stats().sent, 0, "no datagram");
    }

    #[test]
    fn path_rule_late_peer_and_shm_off() {
        // The peer opens after the first packet to it: UDP from a to b;
        // b finds a's segment, so b to a goes through shared memory, and
        // both directions meet in one peer at each end.
        let mut a = open("127.0.0.1:0".parse().unwrap(), true);
        let baddr = free_port();
        let pb = a.peer(&crate::sockaddr::to_bytes(&baddr)).unwrap();
        a.send(pb, &pkt(b"early"), &[], 0).unwrap();
        let mut b = open(baddr, true);
        let (pa, data) = exchange(&mut a, &mut b);
        assert_eq!(data, pkt(b"early"));
        assert_eq!(a.shm_stats().sent, 0);
        assert!(a.stats().sent > 0);
        b.send(pa, &pkt(b"late"), &[], 0).unwrap();
        let (p, data) = exchange(&mut b, &mut a);
        assert_eq!((p, data), (pb, pkt(b"late")));
        assert_eq!((b.shm_stats().sent, a.shm_stats().received), (1, 1));
        assert_eq!(a.shm_peers() + b.shm_peers(), 1);

        // Shared memory off at c: no segment, so a uses UDP to it as well.
        let mut c = open("127.0.0.1:0".parse().unwrap(), false);
        assert!(!c.has_shm());
        let pc = a.peer(&crate::sockaddr::to_bytes(&c.local_addr())).unwrap();
        a.send(pc, &pkt(b"udp"), &[], 0).unwrap();
        let (pa_c, data) = exchange(&mut a, &mut c);
        assert_eq!(data, pkt(b"udp"));
        c.send(pa_c, &pkt(b"udp too"), &[], 0).unwrap();
        let (p, _) = exchange(&mut c, &mut a);
        assert_eq!(p, pc);
        assert_eq!(a.shm_stats().sent, 0);
        assert_eq!(a.shm_stats().received, 1, "only b's packet");
    }

    #[test]
    fn local_peers_of_other_datagram_sizes() {
        // One endpoint as on loopback (64 KiB datagrams), one as on an
        // interface of MTU 1500: cells take the larger packets, so both
        // directions go through shared memory.
        let large = UdpConfig { max_datagram: 65507, ..UdpConfig::default() };
        let mut a = LocalOrUdp::open("127.0.0.1:0".parse().unwrap(), large, true).unwrap();
        let small = UdpConfig { max_datagram: 1472, ..UdpConfig::default() };
        let mut b = LocalOrUdp::open("127.0.0.1:0".parse().unwrap(), small, true).unwrap();
        assert!(a.max_packet() > 60000 && b.max_packet() < 1472);
        let pb = a.peer(&crate::sockaddr::to_bytes(&b.local_addr())).unwrap();
        let big = vec![7u8; a.max_packet()];
        a.send(pb, &big, &[], 0).unwrap();
        let (pa, data) = exchange(&mut a, &mut b);
        assert_eq!(data, big);
        b.send(pa, &pkt(b"small"), &[], 0).unwrap();
        let (p, _) = exchange(&mut b, &mut a);
        assert_eq!(p, pb);
        assert_eq!(a.shm_peers() + b.shm_peers(), 2);
        assert_eq!(a.stats().sent + b.stats().sent, 0);
    }

    #[test]
    fn lost_peer_is_decided_again() {
        // A local peer on shared memory closes; a process with shared
        // memory off takes its address: after the loss, UDP.
        let mut a = open("127.0.0.1:0".parse().unwrap(), true);
        let mut b = open("127.0.0.1:0".parse().unwrap(), true);
        let baddr = b.local_addr();
        let pb = a.peer(&crate::sockaddr::to_bytes(&baddr)).unwrap();
        a.send(pb, &pkt(b"one"), &[], 5).unwrap();
        exchange(&mut a, &mut b);
        drop(b);
        a.send(pb, &pkt(b"two"), &[], 6).unwrap();
        let mut batch = RxBatch::default();
        let mut acked = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            assert!(Instant::now() < deadline, "the closed peer was not given up on");
            a.recv(&mut batch, Instant::now());
            acked.extend_from_slice(&batch.acked);
            if !batch.lost.is_empty() {
                assert_eq!(batch.lost, vec![pb]);
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(acked, vec![5], "the packet to the closed peer is not acknowledged");
        let mut c = open(baddr, false);
        a.send(pb, &pkt(b"three"), &[], 0).unwrap();
        let (_, data) = exchange(&mut a, &mut c);
        assert_eq!(data, pkt(b"three"));
        assert_eq!(a.shm_stats().sent, 1, "the packet to the closed peer was dropped");
        assert_eq!(a.shm_peers(), 0);
    }

    // ---------- long messages between engines on this host ----------

    use crate::engine::EngineConfig;
    use crate::testing::{inject, next, post_recv, post_recvv, send, Side};

    fn engine(shm_reads: bool) -> Side<LocalOrUdp> {
        let mut d = open(free_port(), true);
        d.set_shm_reads(shm_reads);
        Side::new(d, EngineConfig { medium_max: 8192, tx_size: 64, rx_size: 64, unexp_max: 64, directed: false, lead: 0, lead_above: 0 })
    }

    fn bytes(n: usize, k: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 31 + k) as u8).collect()
    }

    #[test]
    fn long_messages_of_local_peers_are_read_from_the_senders_memory() {
        for reads in [true, false] {
            let (mut a, mut b) = (engine(reads), engine(reads));
            let pb = a.eng.dev.peer(&b.eng.dev.name()).unwrap();

            // Into one buffer (before `b` ever sent to `a`: it mapped
            // `a`'s segment when `a`'s first packet came), and into three.
            let one = bytes(200_000, 1);
            let mut got = vec![0u8; 200_000];
            post_recv(&mut b, &mut got, 10, None);
            send(&mut a, pb, &one, 11, None).unwrap();
            assert_eq!(next(&mut a, &mut b, true), Ok((10, 200_000, 0)));
            assert_eq!(next(&mut a, &mut b, false).map(|c| c.0), Ok(11));
            assert!(got == one, "one buffer");
            let three = bytes(300_000, 2);
            let (mut x, mut y, mut z) = (vec![0u8; 100_000], vec![0u8; 7], vec![0u8; 199_993]);
            post_recvv(&mut b, &mut [&mut x, &mut y, &mut z], 20, Some(5));
            send(&mut a, pb, &three, 21, Some(5)).unwrap();
            assert_eq!(next(&mut a, &mut b, true), Ok((20, 300_000, 5)));
            assert_eq!(next(&mut a, &mut b, false).map(|c| c.0), Ok(21));
            assert!([x, y, z].concat() == three, "three buffers");

            // Unexpected: the receive comes after the request to send.
            let late = bytes(150_000, 3);
            send(&mut a, pb, &late, 31, None).unwrap();
            for _ in 0..200 {
                a.eng.progress();
                b.eng.progress();
            }
            let mut got = vec![0u8; 150_000];
            post_recv(&mut b, &mut got, 30, None);
            assert_eq!(next(&mut a, &mut b, true), Ok((30, 150_000, 0)));
            assert_eq!(next(&mut a, &mut b, false).map(|c| c.0), Ok(31));
            assert!(got == late, "unexpected");

            // Truncated: what fits, and the error.
            let long = bytes(100_000, 4);
            let mut got = vec![0u8; 50_001];
            post_recv(&mut b, &mut got[..50_000], 40, None);
            send(&mut a, pb, &long, 41, None).unwrap();
            assert_eq!(next(&mut a, &mut b, true), Err(FI_ETRUNC));
            assert_eq!(next(&mut a, &mut b, false).map(|c| c.0), Ok(41));
            assert!(got[..50_000] == long[..50_000] && got[50_000] == 0, "truncated");

            assert_eq!(b.eng.peer_reads, if reads { 4 } else { 0 }, "messages read from the sender (reads {reads})");
        }
    }

    /// A device that refuses the next `refuse` sends (as a full queue
    /// would), and is `LocalOrUdp` otherwise.
    struct Refusing {
        d: LocalOrUdp,
        refuse: usize,
    }

    impl Device for Refusing {
        fn max_packet(&self) -> usize {
            self.d.max_packet()
        }
        fn peer(&mut self, addr: &[u8]) -> Result<PeerId> {
            self.d.peer(addr)
        }
        fn peer_addr(&self, p: PeerId) -> &[u8] {
            self.d.peer_addr(p)
        }
        fn room(&self, p: PeerId) -> usize {
            self.d.room(p)
        }
        fn send(&mut self, p: PeerId, proto: &[u8], payload: &[&[u8]], token: u64) -> Result<()> {
            if self.refuse > 0 {
                self.refuse -= 1;
                return Err(rfabric_core::error::EAGAIN);
            }
            self.d.send(p, proto, payload, token)
        }
        fn recv(&mut self, batch: &mut RxBatch, now: Instant) -> usize {
            self.d.recv(batch, now)
        }
        fn reject(&mut self, p: PeerId, seq: u32) {
            self.d.reject(p, seq)
        }
        fn flush(&mut self, now: Instant, all: bool) {
            self.d.flush(now, all)
        }
        fn push_out(&mut self) {
            self.d.push_out()
        }
        fn unacked(&self) -> bool {
            self.d.unacked()
        }
        fn stats(&self) -> Stats {
            self.d.stats()
        }
        fn fd(&self) -> i32 {
            self.d.fd()
        }
        fn name(&self) -> Vec<u8> {
            self.d.name()
        }
    }

    #[test]
    fn a_message_whole_in_its_first_packet_completes_at_once_with_data_truncation_and_order() {
        // Such messages (and one-packet injects) skip the engine's
        // operation tables: what they report must not change.
        use crate::testing::inject_data;
        use rfabric_core::provider::CompletionQueue;
        let (mut a, mut b) = (engine(true), engine(true));
        let pb = a.eng.dev.peer(&b.eng.dev.name()).unwrap();
        let mut got = vec![0u8; 64];
        post_recv(&mut b, &mut got, 1, None);
        inject_data(&mut a, pb, &bytes(40, 3), 0x5eed).unwrap();
        // The completion's data word (FI_CQ_FORMAT_TAGGED: context,
        // flags, len, buf, data, tag).
        let mut e = [0u8; 48];
        let mut n = 0;
        for _ in 0..10_000 {
            a.eng.progress();
            b.eng.progress();
            if let Ok(k) = b.rx.read(&mut e, 1, None) {
                n = k;
                break;
            }
        }
        assert_eq!(n, 1, "a completion");
        let w = |i: usize| u64::from_ne_bytes(e[i * 8..i * 8 + 8].try_into().unwrap());
        assert_eq!((w(0), w(2), w(4)), (1, 40, 0x5eed));
        assert_ne!(w(1) & FI_REMOTE_CQ_DATA, 0);
        assert!(got[..40] == bytes(40, 3)[..] && got[40..].iter().all(|&x| x == 0), "the bytes, and nothing past them");
        // Into a smaller buffer: what fits, and FI_ETRUNC.
        let mut small = vec![0u8; 8];
        post_recv(&mut b, &mut small, 2, None);
        send(&mut a, pb, &bytes(30, 4), 3, None).unwrap();
        assert_eq!(next(&mut a, &mut b, true), Err(FI_ETRUNC));
        assert!(small == bytes(30, 4)[..8], "what fits");
        assert_eq!(next(&mut a, &mut b, false).map(|c| c.0), Ok(3));
        // Injects back to back arrive in order, each into its receive.
        let mut bufs = [[0u8; 4]; 5];
        for (i, buf) in bufs.iter_mut().enumerate() {
            post_recv(&mut b, buf, 10 + i, None);
        }
        for i in 0..5 {
            inject(&mut a, pb, &[i as u8; 4]).unwrap();
        }
        for i in 0..5 {
            assert_eq!(next(&mut a, &mut b, true), Ok((10 + i, 4, 0)));
        }
        assert!(bufs.iter().enumerate().all(|(i, b)| *b == [i as u8; 4]));
    }

    #[test]
    fn an_inject_that_could_not_go_at_once_keeps_its_own_copy() {
        let cfg = EngineConfig { medium_max: 8192, tx_size: 64, rx_size: 64, unexp_max: 64, directed: false, lead: 0, lead_above: 0 };
        let mut a = Side::new(Refusing { d: open(free_port(), true), refuse: 1 }, cfg);
        let mut b = engine(true);
        let pb = a.eng.dev.peer(&b.eng.dev.name()).unwrap();
        let mut got = vec![0u8; 600];
        post_recv(&mut b, &mut got, 1, None);
        // The first packet is refused: the inject waits, and its caller
        // reuses the buffer at once (fi_inject's contract).
        let mut data = bytes(600, 7);
        inject(&mut a, pb, &data).unwrap();
        assert_eq!(a.eng.dev.refuse, 0, "the send was refused once");
        data.fill(0xee);
        assert_eq!(next(&mut a, &mut b, true), Ok((1, 600, 0)));
        assert!(got == bytes(600, 7), "the inject's bytes as they were at the call");
    }
}
