//! The EFA device: `Device` on one SRD queue pair (rdma-core through
//! `rfabric-ibverbs`). SRD delivers reliably but unordered, which is what
//! the engine asks of a device, so this layer only moves packets:
//!
//! - the endpoint name is the raw address `GID (16) | QPN (4, LE) | QKEY
//!   (4, LE)`; `peer` makes an address handle for the GID;
//! - each packet is that 24-byte name of its sender, then the engine's
//!   header and payload, copied into a slot of one registered bounce
//!   buffer; the send completion is SRD's acknowledgement, so it returns
//!   the token; a send completion in error loses the peer;
//! - receives are pre-posted slots of the same buffer; a packet stays in
//!   its slot until the engine took it (re-posted at `flush`), and a
//!   rejected one is offered again at the next `recv`. A receive is
//!   matched to its sender by the name it carries, checked against the
//!   completion's `src_qp` only (the GID is taken on trust: the
//!   completion's `slid`, the address handle number, is not compared,
//!   since that needs `efadv_query_ah`, not wrapped).
//!
//! Polled (no completion channel: `fd` is -1). Nothing here has run on
//! EFA hardware; the tests run it on `rfabric-ibverbs`' stand-in.
//!
//! As the remote device of `LocalOr` (`RemoteDevice`, for the efa entry's
//! shared-memory path): a peer is on this host when its GID is one of this
//! host's EFA devices' GIDs, and an endpoint's segment is named
//! `e<GID in hex>.<QPN in hex>` ([`segment_name`]).

use crate::device::{Device, PeerId, RxBatch, RxItem, Stats};
use crate::local::RemoteDevice;
use crate::shmdev::ShmNames;
use rfabric_core::error::{Error, Result, EAGAIN, EINVAL};
use rfabric_ibverbs::sys::*;
use rfabric_ibverbs::{Ah, Context, Cq, Mr, Pd, Qp, Verbs, VerbsError};
use std::collections::HashMap;
use std::time::Instant;

/// Bytes of a raw EFA address (and of the header each packet carries).
pub const NAME_LEN: usize = 24;
/// The queue key every endpoint of this provider uses.
pub const QKEY: u32 = 0x1a2b_3c4d;
/// `wr_id` bit of receive slots.
const RX: u64 = 1 << 63;

/// Sizes of one device.
#[derive(Clone, Copy, Debug)]
pub struct EfaConfig {
    /// Largest packet (engine header and payload) wanted; less when the
    /// port's message size is smaller.
    pub max_packet: usize,
    pub tx_slots: u32,
    pub rx_slots: u32,
}

impl Default for EfaConfig {
    fn default() -> Self {
        EfaConfig { max_packet: 8192, tx_slots: 64, rx_slots: 64 }
    }
}

struct Peer {
    raw: Vec<u8>,
    ah: Ah,
    qpn: u32,
    qkey: u32,
    lost: bool,
}

pub struct EfaDevice {
    // Field order is drop order: QP before CQ, region before PD, PD before
    // the context.
    qp: Qp,
    cq: Cq,
    peers: Vec<Peer>,
    by_name: HashMap<[u8; NAME_LEN], PeerId>,
    mr: Mr,
    pd: Pd,
    _ctx: Context,
    /// Bounce buffer: `tx_slots` send slots, then `rx_slots` receive slots.
    buf: Box<[u8]>,
    slot: usize,
    max_packet: usize,
    name: [u8; NAME_LEN],
    tx_slots: u32,
    free_tx: Vec<u32>,
    /// Per send slot: (token, peer).
    tx_owner: Vec<(u64, PeerId)>,
    /// Receive slots handed to the engine this batch: (slot, peer, len,
    /// rejected).
    taken: Vec<(u32, PeerId, usize, bool)>,
    /// Rejected packets, offered again: (slot, peer, len).
    held: Vec<(u32, PeerId, usize)>,
    lost: Vec<PeerId>,
    wc: Vec<ibv_wc>,
    stats: Stats,
}

fn verr(e: VerbsError) -> Error {
    rfabric_core::fi_warn!("efa", rfabric_core::abi::FI_LOG_EP_DATA, "{e}");
    Error(if e.errno > 0 { e.errno } else { libc::EIO })
}

/// `(GID, QPN, QKEY)` of a raw address.
pub fn parse_name(raw: &[u8]) -> Option<([u8; 16], u32, u32)> {
    if raw.len() != NAME_LEN {
        return None;
    }
    let gid: [u8; 16] = raw[..16].try_into().ok()?;
    let qpn = u32::from_le_bytes(raw[16..20].try_into().ok()?);
    let qkey = u32::from_le_bytes(raw[20..24].try_into().ok()?);
    Some((gid, qpn, qkey))
}

/// The GID of an open device: port 1's, index 0 (what its endpoints'
/// names carry).
pub fn device_gid(ctx: &Context) -> std::result::Result<[u8; 16], VerbsError> {
    let gid = ctx.query_gid(1, 0)?;
    // SAFETY: every bit pattern of the GID union is a byte array.
    Ok(unsafe { gid.raw })
}

/// The name of the shared-memory segment of the endpoint named `raw`:
/// `e`, its GID in hex, `.`, its QP number in hex (at most 40 characters
/// for QP numbers of 24 bits, as InfiniBand's are; `None` for a longer one
/// or a malformed name). Not the network namespace's: a GID and QP number
/// name one endpoint of one device, wherever it is seen from.
pub fn segment_name(raw: &[u8]) -> Option<String> {
    use std::fmt::Write;
    let (gid, qpn, _) = parse_name(raw)?;
    let mut n = String::with_capacity(40);
    n.push('e');
    for b in gid {
        let _ = write!(n, "{b:02x}");
    }
    let _ = write!(n, ".{qpn:x}");
    rfabric_shm::segment::valid_ep_name(&n).then_some(n)
}

impl RemoteDevice for EfaDevice {
    /// The GIDs of this host's EFA devices.
    type Here = Vec<[u8; 16]>;
    const PATH: &'static str = "the EFA device";
    const NAMES: ShmNames = ShmNames { segment: segment_name, text: crate::efadom::addr_text };
    fn key(addr: &[u8]) -> Option<Vec<u8>> {
        parse_name(addr).map(|_| addr.to_vec())
    }
    /// Its GID is one of this host's EFA devices' (the same device, or
    /// another one of this host).
    fn is_local(gids: &Vec<[u8; 16]>, addr: &[u8]) -> bool {
        parse_name(addr).is_some_and(|(gid, _, _)| gids.contains(&gid))
    }
    /// `recv` clears `batch.data` and appends.
    fn rx_used(&self, batch: &RxBatch) -> usize {
        batch.data.len()
    }
}

impl EfaDevice {
    /// An SRD QP on port 1 of device `dev`, in RTS, with every receive
    /// slot posted.
    pub fn open(verbs: &Verbs, dev: &str, cfg: EfaConfig) -> Result<EfaDevice> {
        let ctx = verbs.open_device(dev).map_err(verr)?;
        let port = ctx.query_port(1).map_err(verr)?;
        let gid = device_gid(&ctx).map_err(verr)?;
        let mut max_packet = cfg.max_packet;
        if port.max_msg_sz != 0 {
            max_packet = max_packet.min((port.max_msg_sz as usize).saturating_sub(NAME_LEN));
        }
        if max_packet < 256 || cfg.tx_slots == 0 || cfg.rx_slots == 0 {
            return Err(EINVAL);
        }
        let pd = ctx.alloc_pd().map_err(verr)?;
        let n = cfg.tx_slots + cfg.rx_slots;
        let cq = ctx.create_cq(n as i32, 0).map_err(verr)?;
        let cap = ibv_qp_cap { max_send_wr: cfg.tx_slots, max_recv_wr: cfg.rx_slots, max_send_sge: 1, max_recv_sge: 1, ..Default::default() };
        let qp = pd.create_efa_srd_qp(&cq, &cq, cap, true).map_err(verr)?;
        let init = ibv_qp_attr { qp_state: IBV_QPS_INIT, port_num: 1, qkey: QKEY, ..Default::default() };
        qp.modify(&init, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY).map_err(verr)?;
        qp.modify(&ibv_qp_attr { qp_state: IBV_QPS_RTR, ..Default::default() }, IBV_QP_STATE).map_err(verr)?;
        qp.modify(&ibv_qp_attr { qp_state: IBV_QPS_RTS, ..Default::default() }, IBV_QP_STATE | IBV_QP_SQ_PSN).map_err(verr)?;
        let slot = NAME_LEN + max_packet;
        let mut buf = vec![0u8; slot * n as usize].into_boxed_slice();
        // SAFETY: `buf` is owned by the device and outlives `mr` (dropped
        // before it: `mr` is deregistered first, see the field order).
        let mr = unsafe { pd.reg_mr(buf.as_mut_ptr().cast(), buf.len(), IBV_ACCESS_LOCAL_WRITE) }.map_err(verr)?;
        let mut name = [0u8; NAME_LEN];
        name[..16].copy_from_slice(&gid);
        name[16..20].copy_from_slice(&qp.qp_num().to_le_bytes());
        name[20..24].copy_from_slice(&QKEY.to_le_bytes());
        let mut d = EfaDevice {
            qp,
            cq,
            peers: Vec::new(),
            by_name: HashMap::new(),
            mr,
            pd,
            _ctx: ctx,
            buf,
            slot,
            max_packet,
            name,
            tx_slots: cfg.tx_slots,
            free_tx: (0..cfg.tx_slots).rev().collect(),
            tx_owner: vec![(0, 0); cfg.tx_slots as usize],
            taken: Vec::new(),
            held: Vec::new(),
            lost: Vec::new(),
            wc: vec![ibv_wc::default(); 32],
            stats: Stats::default(),
        };
        for i in 0..cfg.rx_slots {
            d.post_rx(i)?;
        }
        Ok(d)
    }

    fn slot_ptr(&mut self, index: usize) -> *mut u8 {
        self.buf[index * self.slot..].as_mut_ptr()
    }

    fn post_rx(&mut self, rx: u32) -> Result<()> {
        let addr = self.slot_ptr((self.tx_slots + rx) as usize) as u64;
        let mut sge = ibv_sge { addr, length: self.slot as u32, lkey: self.mr.lkey() };
        let mut wr = ibv_recv_wr { wr_id: RX | rx as u64, sg_list: &mut sge, num_sge: 1, ..Default::default() };
        // SAFETY: the slot lies in the registered buffer, which outlives
        // the QP's use of it (the QP is destroyed first); nothing else
        // touches the slot until its completion.
        unsafe { self.qp.post_recv(&mut wr) }.map_err(|e| verr(e.error))
    }

    fn lose(&mut self, p: PeerId) {
        let peer = &mut self.peers[p as usize];
        if !peer.lost {
            peer.lost = true;
            self.lost.push(p);
        }
    }

    /// Re-posts the slots the engine took; keeps the rejected ones.
    fn finish(&mut self) {
        let mut taken = std::mem::take(&mut self.taken);
        for &(rx, peer, len, rejected) in &taken {
            if rejected {
                self.held.push((rx, peer, len));
            } else {
                if let Err(e) = self.post_rx(rx) {
                    rfabric_core::fi_warn!("efa", rfabric_core::abi::FI_LOG_EP_DATA, "receive slot {rx} not re-posted: {e}");
                }
            }
        }
        taken.clear();
        self.taken = taken;
    }

    fn offer(&mut self, batch: &mut RxBatch, rx: u32, peer: PeerId, len: usize) {
        let off = (self.tx_slots + rx) as usize * self.slot + NAME_LEN;
        let start = batch.data.len();
        batch.data.extend_from_slice(&self.buf[off..off + len]);
        batch.items.push(RxItem { peer, seq: self.taken.len() as u32, start, len, placed: 0 });
        self.taken.push((rx, peer, len, false));
    }

    fn on_recv(&mut self, batch: &mut RxBatch, wc: &ibv_wc) {
        let rx = (wc.wr_id & !RX) as u32;
        let len = wc.byte_len as usize;
        if wc.status == IBV_WC_WR_FLUSH_ERR {
            // The QP is going away: the slot is not posted again.
            return;
        }
        if wc.status != IBV_WC_SUCCESS || len < NAME_LEN || len > self.slot {
            self.stats.malformed += 1;
            let _ = self.post_rx(rx);
            return;
        }
        let off = (self.tx_slots + rx) as usize * self.slot;
        let mut from = [0u8; NAME_LEN];
        from.copy_from_slice(&self.buf[off..off + NAME_LEN]);
        let peer = match parse_name(&from) {
            Some((_, qpn, _)) if qpn == wc.src_qp => self.by_name.get(&from).copied().or_else(|| self.peer(&from).ok()),
            _ => None,
        };
        let Some(peer) = peer else {
            self.stats.unknown_peer += 1;
            let _ = self.post_rx(rx);
            return;
        };
        self.stats.received += 1;
        self.offer(batch, rx, peer, len - NAME_LEN);
    }

    fn on_send(&mut self, batch: &mut RxBatch, wc: &ibv_wc) {
        let tx = wc.wr_id as u32;
        let Some(&(token, peer)) = self.tx_owner.get(tx as usize) else { return };
        self.free_tx.push(tx);
        if wc.status == IBV_WC_SUCCESS {
            if token != 0 {
                batch.acked.push(token);
            }
        } else {
            rfabric_core::fi_warn!("efa", rfabric_core::abi::FI_LOG_EP_DATA, "send to peer {peer} failed (status {}): peer lost", wc.status);
            self.lose(peer);
        }
    }
}

impl Device for EfaDevice {
    fn max_packet(&self) -> usize {
        self.max_packet
    }

    fn peer(&mut self, addr: &[u8]) -> Result<PeerId> {
        let (gid, qpn, qkey) = parse_name(addr).ok_or(EINVAL)?;
        let key: [u8; NAME_LEN] = addr.try_into().map_err(|_| EINVAL)?;
        if let Some(&p) = self.by_name.get(&key) {
            return Ok(p);
        }
        let mut attr = ibv_ah_attr { is_global: 1, port_num: 1, ..Default::default() };
        attr.grh.dgid.raw = gid;
        let ah = self.pd.create_ah(&attr).map_err(verr)?;
        let id = self.peers.len() as PeerId;
        self.peers.push(Peer { raw: addr.to_vec(), ah, qpn, qkey, lost: false });
        self.by_name.insert(key, id);
        Ok(id)
    }

    fn peer_addr(&self, p: PeerId) -> &[u8] {
        &self.peers[p as usize].raw
    }

    fn room(&self, _p: PeerId) -> usize {
        self.free_tx.len()
    }

    fn send(&mut self, p: PeerId, proto: &[u8], payload: &[&[u8]], token: u64) -> Result<()> {
        let total = proto.len() + payload.iter().map(|s| s.len()).sum::<usize>();
        if total > self.max_packet {
            return Err(EINVAL);
        }
        if self.peers[p as usize].lost {
            // Reported again so the operation fails instead of waiting.
            if !self.lost.contains(&p) {
                self.lost.push(p);
            }
            return Ok(());
        }
        let tx = self.free_tx.pop().ok_or(EAGAIN)?;
        let off = tx as usize * self.slot;
        let s = &mut self.buf[off..off + NAME_LEN + total];
        s[..NAME_LEN].copy_from_slice(&self.name);
        let mut o = NAME_LEN;
        for part in std::iter::once(&proto).chain(payload.iter()) {
            s[o..o + part.len()].copy_from_slice(part);
            o += part.len();
        }
        let addr = s.as_ptr() as u64;
        let peer = &self.peers[p as usize];
        let mut sge = ibv_sge { addr, length: (NAME_LEN + total) as u32, lkey: self.mr.lkey() };
        let mut wr = ibv_send_wr { wr_id: tx as u64, opcode: IBV_WR_SEND, send_flags: IBV_SEND_SIGNALED, sg_list: &mut sge, num_sge: 1, ..Default::default() };
        wr.wr.ud = ibv_send_wr_ud { ah: peer.ah.as_ptr(), remote_qpn: peer.qpn, remote_qkey: peer.qkey };
        // SAFETY: the slot is in the registered buffer and is not touched
        // again until its completion returns it to `free_tx`; `wr` and
        // `sge` live across the call.
        match unsafe { self.qp.post_send(&mut wr) } {
            Ok(()) => {
                self.tx_owner[tx as usize] = (token, p);
                self.stats.sent += 1;
                Ok(())
            }
            Err(e) => {
                self.free_tx.push(tx);
                Err(if e.error.errno == libc::ENOMEM { EAGAIN } else { verr(e.error) })
            }
        }
    }

    fn recv(&mut self, batch: &mut RxBatch, _now: Instant) -> usize {
        batch.clear();
        batch.data.clear();
        self.finish();
        for (rx, peer, len) in std::mem::take(&mut self.held) {
            self.offer(batch, rx, peer, len);
        }
        let mut wc = std::mem::take(&mut self.wc);
        loop {
            let n = match self.cq.poll(&mut wc) {
                Ok(n) => n,
                Err(e) => {
                    verr(e);
                    0
                }
            };
            for c in &wc[..n] {
                if c.wr_id & RX != 0 {
                    self.on_recv(batch, c);
                } else {
                    self.on_send(batch, c);
                }
            }
            if n < wc.len() {
                break;
            }
        }
        self.wc = wc;
        batch.lost.append(&mut self.lost);
        batch.items.len()
    }

    fn reject(&mut self, _p: PeerId, seq: u32) {
        if let Some(t) = self.taken.get_mut(seq as usize) {
            if !t.3 {
                t.3 = true;
                self.stats.rejected += 1;
            }
        }
    }

    fn flush(&mut self, _now: Instant, _all: bool) {
        self.finish();
    }

    /// Nothing waits: `send` posts each packet at once.
    fn push_out(&mut self) {}

    fn unacked(&self) -> bool {
        self.free_tx.len() < self.tx_slots as usize
    }

    fn stats(&self) -> Stats {
        self.stats
    }

    fn fd(&self) -> i32 {
        -1
    }

    fn name(&self) -> Vec<u8> {
        self.name.to_vec()
    }

    fn describe(&self) -> String {
        format!(
            "efa qpn {:#x} peers {} free send slots {}/{} held {}",
            self.qp.qp_num(),
            self.peers.len(),
            self.free_tx.len(),
            self.tx_slots,
            self.held.len()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rfabric_ibverbs::standin::{self, Call, PortCfg};

    fn gid(b: u8) -> [u8; 16] {
        [b; 16]
    }

    /// The stand-in with its loopback and two EFA-like devices, loaded.
    fn verbs() -> Verbs {
        standin::with(|w| w.loopback = Some(Default::default()));
        for (dev, g) in [("efa0", 1u8), ("efa1", 2u8)] {
            standin::add_device(dev, IBV_NODE_UNSPECIFIED, IBV_TRANSPORT_UNSPECIFIED, "");
            standin::set_port(dev, 1, PortCfg { state: IBV_PORT_ACTIVE, gids: vec![gid(g)], ..Default::default() });
        }
        Verbs::from_fns(standin::verbs_fns(), Some(standin::efa_fns()))
    }

    fn cfg() -> EfaConfig {
        EfaConfig { max_packet: 1024, tx_slots: 4, rx_slots: 4 }
    }

    fn recv(d: &mut EfaDevice) -> (Vec<(PeerId, Vec<u8>)>, RxBatch) {
        let mut b = RxBatch::default();
        d.recv(&mut b, Instant::now());
        let v = b.items.iter().map(|it| (it.peer, b.packet(it).to_vec())).collect();
        (v, b)
    }

    #[test]
    fn packets_cross_and_the_send_completion_returns_the_token() {
        let v = verbs();
        let mut a = EfaDevice::open(&v, "efa0", cfg()).unwrap();
        let mut b = EfaDevice::open(&v, "efa1", cfg()).unwrap();
        let name = b.name();
        assert_eq!(parse_name(&name), Some((gid(2), b.qp.qp_num(), QKEY)));
        standin::take_calls();
        let p = a.peer(&name).unwrap();
        assert_eq!(a.peer(&name).unwrap(), p, "one peer per address");
        let ah: Vec<_> = standin::take_calls().into_iter().filter(|c| matches!(c, Call::CreateAh { .. })).collect();
        assert_eq!(ah, vec![Call::CreateAh { pd: a.pd.as_ptr() as usize, dgid: gid(2), is_global: 1, port_num: 1 }]);

        a.send(p, b"hdr", &[b"pay", b"load"], 7).unwrap();
        let sent = standin::with(|w| w.sent.last().cloned()).unwrap();
        assert_eq!((sent.remote_qpn, sent.remote_qkey, sent.sge0.1), (b.qp.qp_num(), QKEY, (NAME_LEN + 10) as u32));
        assert!(a.unacked());
        let (got, _) = recv(&mut b);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].1, b"hdrpayload");
        assert_eq!(b.peer_addr(got[0].0), &a.name()[..], "the sender became a peer by its name");
        b.flush(Instant::now(), true);
        let (_, batch) = recv(&mut a);
        assert_eq!(batch.acked, vec![7]);
        assert!(!a.unacked());

        // And back, to the peer the receive made.
        b.send(got[0].0, b"re", &[], 0).unwrap();
        let (back, batch) = recv(&mut a);
        assert_eq!((back[0].0, &back[0].1[..]), (p, &b"re"[..]));
        assert!(batch.acked.is_empty());
        assert_eq!(b.stats().sent, 1);
    }

    #[test]
    fn a_rejected_packet_is_offered_again_and_its_slot_reposted_once_taken() {
        let v = verbs();
        let mut a = EfaDevice::open(&v, "efa0", cfg()).unwrap();
        let mut b = EfaDevice::open(&v, "efa1", cfg()).unwrap();
        let p = a.peer(&b.name()).unwrap();
        a.send(p, b"one", &[], 1).unwrap();
        a.send(p, b"two", &[], 2).unwrap();
        let (got, batch) = recv(&mut b);
        assert_eq!(got.iter().map(|g| &g.1[..]).collect::<Vec<_>>(), vec![&b"one"[..], b"two"]);
        let posted = || standin::with(|w| w.posted_recvs.len());
        let before = posted();
        b.reject(got[1].0, batch.items[1].seq);
        b.flush(Instant::now(), true);
        assert_eq!(posted(), before + 1, "only the taken slot is posted again");
        assert_eq!(b.stats().rejected, 1);
        let (again, _) = recv(&mut b);
        assert_eq!(again.len(), 1);
        assert_eq!(again[0].1, b"two");
        b.flush(Instant::now(), true);
        assert_eq!(posted(), before + 2);
        let (none, _) = recv(&mut b);
        assert!(none.is_empty());
    }

    #[test]
    fn a_failed_send_loses_the_peer_and_later_sends_report_it_again() {
        let v = verbs();
        let mut a = EfaDevice::open(&v, "efa0", cfg()).unwrap();
        let b = EfaDevice::open(&v, "efa1", cfg()).unwrap();
        let p = a.peer(&b.name()).unwrap();
        drop(b);
        a.send(p, b"x", &[], 9).unwrap();
        let (_, batch) = recv(&mut a);
        assert!(batch.acked.is_empty());
        assert_eq!(batch.lost, vec![p]);
        assert!(!a.unacked(), "the failed send gave its slot back");
        a.send(p, b"y", &[], 10).unwrap();
        let (_, batch) = recv(&mut a);
        assert_eq!(batch.lost, vec![p]);
    }

    #[test]
    fn bad_addresses_sizes_and_a_full_send_queue() {
        let v = verbs();
        let mut a = EfaDevice::open(&v, "efa0", cfg()).unwrap();
        let b = EfaDevice::open(&v, "efa1", cfg()).unwrap();
        assert_eq!(a.peer(&[0u8; 7]), Err(EINVAL));
        let p = a.peer(&b.name()).unwrap();
        assert_eq!(a.send(p, &[0u8; 1025], &[], 0), Err(EINVAL));
        // `b` takes four (its posted receives) and never polls: the next
        // four wait in SRD (receiver not ready) and keep their slots.
        for t in 1..=4 {
            a.send(p, b"q", &[], t).unwrap();
        }
        let (_, batch) = recv(&mut a);
        assert_eq!(batch.acked, vec![1, 2, 3, 4]);
        for t in 5..=8 {
            a.send(p, b"q", &[], t).unwrap();
        }
        let (_, batch) = recv(&mut a);
        assert!(batch.acked.is_empty());
        assert_eq!(a.room(p), 0);
        assert_eq!(a.send(p, b"q", &[], 9), Err(EAGAIN));
        standin::fail("ibv_create_ah", libc::EINVAL);
        let mut other = b.name();
        other[0] ^= 0xff;
        assert_eq!(a.peer(&other), Err(EINVAL));
    }

    /// Posts `bytes` as they are (no name put in front) from `a` to `p`.
    fn raw_send(a: &mut EfaDevice, p: PeerId, bytes: &[u8]) {
        let tx = a.free_tx.pop().unwrap();
        let off = tx as usize * a.slot;
        a.buf[off..off + bytes.len()].copy_from_slice(bytes);
        a.tx_owner[tx as usize] = (0, p);
        let peer = &a.peers[p as usize];
        let mut sge = ibv_sge { addr: a.buf[off..].as_ptr() as u64, length: bytes.len() as u32, lkey: a.mr.lkey() };
        let mut wr = ibv_send_wr { wr_id: tx as u64, opcode: IBV_WR_SEND, sg_list: &mut sge, num_sge: 1, ..Default::default() };
        wr.wr.ud = ibv_send_wr_ud { ah: peer.ah.as_ptr(), remote_qpn: peer.qpn, remote_qkey: peer.qkey };
        // SAFETY: a free slot of the registered buffer (the stand-in copies
        // it at once).
        unsafe { a.qp.post_send(&mut wr) }.unwrap();
    }

    #[test]
    fn short_packets_and_names_that_are_not_the_senders_are_dropped() {
        let v = verbs();
        let mut a = EfaDevice::open(&v, "efa0", cfg()).unwrap();
        let mut b = EfaDevice::open(&v, "efa1", cfg()).unwrap();
        let p = a.peer(&b.name()).unwrap();
        let posted = || standin::with(|w| w.posted_recvs.len());
        let before = posted();
        raw_send(&mut a, p, &[1u8; NAME_LEN - 1]);
        // A name whose QP number is not the completion's `src_qp`.
        let mut forged = a.name();
        forged[16] ^= 1;
        forged.extend_from_slice(b"payload");
        raw_send(&mut a, p, &forged);
        let (got, _) = recv(&mut b);
        assert!(got.is_empty());
        assert_eq!((b.stats().malformed, b.stats().unknown_peer), (1, 1));
        assert!(b.peers.is_empty(), "no peer made from a forged name");
        assert_eq!(posted(), before + 2, "both slots posted again");
    }

    #[test]
    fn the_ports_message_size_bounds_the_packet() {
        let v = verbs();
        standin::with(|w| w.max_msg_sz = 500 + NAME_LEN as u32);
        let mut a = EfaDevice::open(&v, "efa0", cfg()).unwrap();
        assert_eq!(a.max_packet(), 500);
        let b = EfaDevice::open(&v, "efa1", cfg()).unwrap();
        let p = a.peer(&b.name()).unwrap();
        assert_eq!(a.send(p, &[0u8; 501], &[], 0), Err(EINVAL));
        a.send(p, &[0u8; 500], &[], 0).unwrap();
        standin::with(|w| w.max_msg_sz = 200);
        assert_eq!(EfaDevice::open(&v, "efa0", cfg()).err(), Some(EINVAL));
    }

    #[test]
    fn no_device_and_no_efa_library_are_errors() {
        let v = verbs();
        assert!(EfaDevice::open(&v, "efa9", cfg()).is_err());
        let plain = Verbs::from_fns(standin::verbs_fns(), None);
        assert_eq!(EfaDevice::open(&plain, "efa0", cfg()).err(), Some(Error(libc::EOPNOTSUPP)));
    }

    // ---------- the engine on two EFA devices ----------

    use crate::engine::EngineConfig;
    use crate::testing::{next, post_recv, send, Side};
    use rfabric_core::abi::*;
    use rfabric_core::objects::mr::MrRegion;
    use rfabric_core::provider::{Iov, RmaIov, RmaOp};

    fn side(v: &Verbs, dev: &str) -> Side<EfaDevice> {
        let d = EfaDevice::open(v, dev, EfaConfig { max_packet: 1024, tx_slots: 64, rx_slots: 64 }).unwrap();
        Side::new(d, EngineConfig { medium_max: 8192, tx_size: 64, rx_size: 64, unexp_max: 64, directed: false, lead: 0, lead_above: 0 })
    }

    #[test]
    fn the_engine_runs_over_two_efa_devices() {
        let v = verbs();
        let mut a = side(&v, "efa0");
        let mut b = side(&v, "efa1");
        let name = b.eng.dev.name();
        let p = a.eng.dev.peer(&name).unwrap();
        assert!(a.eng.eager_max() < 1024);

        // Eager, medium (several packets) and long (RTS/CTS) messages.
        for (i, len) in [1usize, 500, 3000, 8192, 20_000, 100_000].into_iter().enumerate() {
            let data: Vec<u8> = (0..len).map(|k| (k * 7 + i) as u8).collect();
            let mut buf = vec![0u8; len];
            post_recv(&mut b, &mut buf, 100 + i, None);
            send(&mut a, p, &data, 200 + i, None).unwrap();
            assert_eq!(next(&mut a, &mut b, true), Ok((100 + i, len, 0)), "receive of {len}");
            assert_eq!(next(&mut a, &mut b, false).map(|c| c.0), Ok(200 + i), "send of {len}");
            assert!(buf == data, "{len} bytes arrived intact");
        }

        // A tagged receive takes the message with its tag only.
        let mut buf = vec![0u8; 64];
        post_recv(&mut b, &mut buf, 300, Some(0xabc));
        send(&mut a, p, b"tagged", 301, Some(0xabc)).unwrap();
        assert_eq!(next(&mut a, &mut b, true), Ok((300, 6, 0xabc)));
        assert_eq!(next(&mut a, &mut b, false).map(|c| c.0), Ok(301));
        assert_eq!(&buf[..6], b"tagged");

        // An emulated RMA write into `b`'s registered region.
        let mut region = vec![0u8; 4096];
        let key = b.mr.lock().register(MrRegion { base: region.as_mut_ptr() as usize, len: region.len(), access: FI_REMOTE_WRITE, ..MrRegion::default() }, 5).unwrap();
        let src: Vec<u8> = (0..2000u32).map(|k| k as u8 ^ 0x5a).collect();
        let iov = [Iov { base: src.as_ptr() as usize, len: src.len() }];
        let rma = [RmaIov { addr: 16, len: src.len(), key }];
        let op = RmaOp { iov: &iov, desc: rfabric_core::provider::Descs::NONE, rma: &rma, dest: 0, context: 400, data: 0, flags: 0, no_completion: false };
        // SAFETY: `src` outlives the write (its completion is awaited).
        unsafe { a.eng.rma(p, &op, true) }.unwrap();
        assert_eq!(next(&mut a, &mut b, false).map(|c| c.0), Ok(400));
        assert!(region[16..2016] == src[..] && region[..16] == [0; 16]);
    }

    #[test]
    fn a_send_error_loses_the_peer_and_pending_operations_fail_with_econnreset() {
        let v = verbs();
        let mut a = side(&v, "efa0");
        let mut b = side(&v, "efa1");
        let p = a.eng.dev.peer(&b.eng.dev.name()).unwrap();
        let mut buf = [0u8; 8];
        post_recv(&mut b, &mut buf, 1, None);
        send(&mut a, p, b"hi", 2, None).unwrap();
        assert_eq!(next(&mut a, &mut b, true).map(|c| c.0), Ok(1));
        assert_eq!(next(&mut a, &mut b, false).map(|c| c.0), Ok(2));

        // `b` goes away (its QP with it): the next packet fails at `a`'s
        // send queue, the peer is lost and the long send pending on it
        // completes in error. `idle` only stands in `b`'s place for `next`.
        drop(b);
        let mut idle = side(&v, "efa0");
        let data = vec![1u8; 20_000];
        send(&mut a, p, &data, 3, None).unwrap();
        assert_eq!(next(&mut a, &mut idle, false), Err(FI_ECONNRESET));
        assert!(a.eng.dev.peers[p as usize].lost);
    }
}
