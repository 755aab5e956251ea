//! Peer addresses and the table of attached peers.

use crate::ring::Ring;
use crate::segment::{pid_alive, Segment};
use rfabric_core::error::{Result, EINVAL};

/// Size of an endpoint address (what `fi_getname` returns for shm).
pub const ADDR_LEN: usize = 32;
const ADDR_VERSION: u32 = 1;

/// An endpoint address: `[pid u32][version u32][nonce 16][start_time u64]`,
/// little endian. The nonce names the segment; pid + start time identify
/// the owning process.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Address {
    pub pid: u32,
    pub nonce: [u8; 16],
    pub start_time: u64,
}

impl Address {
    pub fn to_bytes(&self) -> [u8; ADDR_LEN] {
        let mut b = [0u8; ADDR_LEN];
        b[0..4].copy_from_slice(&self.pid.to_le_bytes());
        b[4..8].copy_from_slice(&ADDR_VERSION.to_le_bytes());
        b[8..24].copy_from_slice(&self.nonce);
        b[24..32].copy_from_slice(&self.start_time.to_le_bytes());
        b
    }
    pub fn from_bytes(b: &[u8]) -> Result<Address> {
        if b.len() < ADDR_LEN {
            return Err(EINVAL);
        }
        let pid = u32::from_le_bytes(b[0..4].try_into().unwrap_or_default());
        let ver = u32::from_le_bytes(b[4..8].try_into().unwrap_or_default());
        if ver != ADDR_VERSION || pid == 0 || pid > i32::MAX as u32 {
            return Err(EINVAL);
        }
        let mut nonce = [0u8; 16];
        nonce.copy_from_slice(&b[8..24]);
        let start_time = u64::from_le_bytes(b[24..32].try_into().unwrap_or_default());
        Ok(Address { pid, nonce, start_time })
    }
    /// 64-bit key carried in every message header to name the sender.
    pub fn key(&self) -> u64 {
        ((self.pid as u64) << 32) | u32::from_le_bytes([self.nonce[0], self.nonce[1], self.nonce[2], self.nonce[3]]) as u64
    }
    pub fn to_hex(&self) -> String {
        self.to_bytes().iter().map(|b| format!("{b:02x}")).collect()
    }
    pub fn from_hex(s: &str) -> Result<Address> {
        if s.len() != ADDR_LEN * 2 {
            return Err(EINVAL);
        }
        let mut b = [0u8; ADDR_LEN];
        for (i, out) in b.iter_mut().enumerate() {
            *out = u8::from_str_radix(s.get(2 * i..2 * i + 2).ok_or(EINVAL)?, 16).map_err(|_| EINVAL)?;
        }
        Address::from_bytes(&b)
    }
}

/// Index into the peer table.
pub type PeerId = u32;

/// An attached peer: its mapped segment and its ring as a producer.
pub struct Peer {
    pub addr: Address,
    pub key: u64,
    pub seg: Segment,
    pub ring: Ring,
    pub alive: bool,
    /// CMA result against this peer: None until tried.
    pub cma_ok: Option<bool>,
    /// Operations in flight with this peer (sends + receives).
    pub active: u32,
    /// Our `process_vm_writev` into this peer was refused: do not take
    /// part in its shared copies.
    pub no_help: bool,
}

impl Peer {
    pub fn check_alive(&mut self) -> bool {
        if self.alive && !pid_alive(self.addr.pid, self.addr.start_time) {
            self.alive = false;
        }
        self.alive
    }
}

#[derive(Default)]
pub struct PeerTable {
    peers: Vec<Peer>,
}

impl PeerTable {
    /// Attaches to the endpoint at `addr` (or returns the existing entry).
    pub fn insert(&mut self, addr: &Address) -> Result<PeerId> {
        if let Some(i) = self.peers.iter().position(|p| p.addr == *addr) {
            return Ok(i as PeerId);
        }
        let seg = Segment::attach(addr.pid, &addr.nonce)?;
        if addr.start_time != 0 && seg.header().start_time != addr.start_time {
            return Err(EINVAL);
        }
        let g = seg.geometry();
        // SAFETY: the geometry was validated against the mapping on attach.
        let ring = unsafe { Ring::from_raw(seg.ring_base(), g.ncells, g.cell_size as usize) };
        self.peers.push(Peer { addr: *addr, key: addr.key(), seg, ring, alive: true, cma_ok: None, active: 0, no_help: false });
        Ok((self.peers.len() - 1) as PeerId)
    }
    /// Enters the endpoint at `addr`, whose process died before we could
    /// attach its segment, as a dead peer over a stand-in segment
    /// ([`Segment::gone`]): what it posted can be handed up and fails with
    /// `ECONNRESET` (no CMA, no live bounce slot).
    pub fn insert_gone(&mut self, addr: &Address) -> Result<PeerId> {
        if let Some(i) = self.peers.iter().position(|p| p.addr == *addr) {
            return Ok(i as PeerId);
        }
        let seg = Segment::gone(addr.pid, &addr.nonce, addr.start_time)?;
        let g = seg.geometry();
        // SAFETY: Segment::gone laid out and initialised this ring.
        let ring = unsafe { Ring::from_raw(seg.ring_base(), g.ncells, g.cell_size as usize) };
        self.peers.push(Peer { addr: *addr, key: addr.key(), seg, ring, alive: false, cma_ok: Some(false), active: 0, no_help: true });
        Ok((self.peers.len() - 1) as PeerId)
    }
    pub fn find_key(&self, key: u64) -> Option<PeerId> {
        self.peers.iter().position(|p| p.key == key).map(|i| i as PeerId)
    }
    pub fn get(&self, id: PeerId) -> Option<&Peer> {
        self.peers.get(id as usize)
    }
    pub fn get_mut(&mut self, id: PeerId) -> Option<&mut Peer> {
        self.peers.get_mut(id as usize)
    }
    pub fn len(&self) -> usize {
        self.peers.len()
    }
    pub fn is_empty(&self) -> bool {
        self.peers.is_empty()
    }
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut Peer> {
        self.peers.iter_mut()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn address_roundtrip_and_rejects() {
        let a = Address { pid: 1234, nonce: [7; 16], start_time: 99 };
        assert_eq!(Address::from_bytes(&a.to_bytes()), Ok(a));
        assert_eq!(Address::from_hex(&a.to_hex()), Ok(a));
        assert_eq!(Address::from_bytes(&a.to_bytes()[..31]), Err(EINVAL));
        let mut b = a.to_bytes();
        b[4] = 9; // version
        assert_eq!(Address::from_bytes(&b), Err(EINVAL));
        assert_eq!(Address::from_hex("zz"), Err(EINVAL));
        let mut b = a.to_bytes();
        b[0..4].copy_from_slice(&0u32.to_le_bytes());
        assert_eq!(Address::from_bytes(&b), Err(EINVAL));
    }
}
