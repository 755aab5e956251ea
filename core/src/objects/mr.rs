//! Memory registration registry: the regions a domain has registered, the
//! keys that name them, and the check every incoming RMA or atomic request
//! goes through before memory is touched.
//!
//! Keys: with `FI_MR_PROV_KEY` the registry picks them (a counter scrambled
//! by a per-registry secret, so keys are unique and hard to guess); otherwise
//! the application's `requested_key` is used and must not already be in use
//! (`-FI_ENOKEY`). Remote addresses are virtual addresses with
//! `FI_MR_VIRT_ADDR`, otherwise byte offsets into the region.
#![forbid(unsafe_code)]

use super::c;
use crate::error::{Error, Result, EINVAL};
use std::collections::HashMap;

/// Access bits that name remote operations.
const REMOTE: u64 = c::FI_REMOTE_READ | c::FI_REMOTE_WRITE;

/// One registered region (what `fi_mr_regattr` describes, flattened).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MrRegion {
    pub base: usize,
    pub len: usize,
    /// `FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | ...`
    pub access: u64,
    pub key: u64,
    /// `enum fi_hmem_iface` and its device id.
    pub iface: u32,
    pub device: u64,
    /// `(fd, offset)` when registered from a dma-buf.
    pub dmabuf: Option<(i32, u64)>,
    pub context: usize,
}

pub struct MrRegistry {
    mode: u64,
    key_mask: u64,
    map: HashMap<u64, MrRegion>,
    counter: u64,
    secret: u64,
}

/// A bijection on the low `bits` bits (odd multiplications and right
/// xor-shifts are each invertible modulo 2^bits), so distinct counters give
/// distinct keys in every key size.
fn mix(mut z: u64, bits: u32, mask: u64) -> u64 {
    let s = (bits / 2).max(1);
    z &= mask;
    z = (z ^ (z >> s)).wrapping_mul(0xbf58_476d_1ce4_e5b9) & mask;
    z = (z ^ (z >> s)).wrapping_mul(0x94d0_49bb_1331_11eb) & mask;
    z ^ (z >> s)
}

fn fresh_secret() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    // RandomState is seeded from the OS per process; mix in time and pid.
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
    h.write_u32(std::process::id());
    h.finish()
}

impl MrRegistry {
    /// `mode` is the domain's `mr_mode` bits, `key_size` its `mr_key_size`
    /// (1..=8 bytes; keys never exceed it).
    pub fn new(mode: u64, key_size: usize) -> Result<MrRegistry> {
        if !(1..=8).contains(&key_size) {
            return Err(EINVAL);
        }
        let key_mask = if key_size == 8 { u64::MAX } else { (1u64 << (key_size * 8)) - 1 };
        Ok(MrRegistry { mode, key_mask, map: HashMap::new(), counter: 0, secret: fresh_secret() })
    }
    pub fn len(&self) -> usize {
        self.map.len()
    }
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
    pub fn prov_key(&self) -> bool {
        self.mode & c::FI_MR_PROV_KEY != 0
    }
    pub fn virt_addr(&self) -> bool {
        self.mode & c::FI_MR_VIRT_ADDR != 0
    }

    fn next_key(&mut self) -> Result<u64> {
        // Bounded search: a collision needs the key space nearly full.
        for _ in 0..1024 {
            self.counter = self.counter.wrapping_add(1);
            let k = mix(self.counter.wrapping_add(self.secret), self.key_mask.count_ones(), self.key_mask);
            if k != c::FI_KEY_NOTAVAIL && !self.map.contains_key(&k) {
                return Ok(k);
            }
        }
        Err(Error(c::FI_ENOKEY))
    }

    /// Registers `r` (its `key` field is ignored) and returns the key.
    /// `base + len` must not overflow.
    pub fn register(&mut self, mut r: MrRegion, requested_key: u64) -> Result<u64> {
        if r.base.checked_add(r.len).is_none() {
            return Err(EINVAL);
        }
        let key = if self.prov_key() {
            self.next_key()?
        } else {
            if requested_key == c::FI_KEY_NOTAVAIL || requested_key & !self.key_mask != 0 {
                return Err(Error(c::FI_EKEYREJECTED));
            }
            if self.map.contains_key(&requested_key) {
                return Err(Error(c::FI_ENOKEY));
            }
            requested_key
        };
        r.key = key;
        self.map.insert(key, r);
        Ok(key)
    }

    pub fn get(&self, key: u64) -> Option<&MrRegion> {
        self.map.get(&key)
    }

    /// `fi_close` of an MR.
    pub fn remove(&mut self, key: u64) -> Result<MrRegion> {
        self.map.remove(&key).ok_or(EINVAL)
    }

    /// Checks an incoming request for `len` bytes at remote address `addr`
    /// under `key`, needing `access` (e.g. `FI_REMOTE_WRITE`). Returns the byte
    /// offset of the request inside the region. Errors: unknown key
    /// `-FI_EKEYREJECTED`; missing permission `-FI_EACCES`; out of bounds
    /// (including arithmetic overflow) `-FI_EINVAL`.
    pub fn verify(&self, key: u64, addr: u64, len: usize, access: u64) -> Result<usize> {
        let r = self.map.get(&key).ok_or(Error(c::FI_EKEYREJECTED))?;
        if access == 0 || r.access & access != access {
            return Err(Error(c::FI_EACCES));
        }
        let off = if self.virt_addr() {
            addr.checked_sub(r.base as u64).ok_or(EINVAL)?
        } else {
            addr
        };
        let off = usize::try_from(off).map_err(|_| EINVAL)?;
        let end = off.checked_add(len).ok_or(EINVAL)?;
        if end > r.len {
            return Err(EINVAL);
        }
        Ok(off)
    }

    /// True if `access` names only remote operations (a convenience for
    /// providers deciding whether a key is needed at all).
    pub fn is_remote(access: u64) -> bool {
        access & REMOTE != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn region(base: usize, len: usize, access: u64) -> MrRegion {
        MrRegion { base, len, access, ..Default::default() }
    }
    const RW: u64 = c::FI_REMOTE_READ | c::FI_REMOTE_WRITE;

    #[test]
    fn bad_key_sizes() {
        assert!(MrRegistry::new(0, 0).is_err());
        assert!(MrRegistry::new(0, 9).is_err());
    }

    #[test]
    fn requested_keys() {
        let mut m = MrRegistry::new(0, 8).unwrap();
        assert_eq!(m.register(region(0x1000, 64, RW), 7), Ok(7));
        assert_eq!(m.register(region(0x2000, 64, RW), 7), Err(Error(c::FI_ENOKEY)));
        assert_eq!(m.register(region(0x2000, 64, RW), u64::MAX), Err(Error(c::FI_EKEYREJECTED)));
        assert_eq!(m.register(region(usize::MAX, 2, RW), 8), Err(EINVAL));
        let mut small = MrRegistry::new(0, 2).unwrap();
        assert_eq!(small.register(region(0, 1, RW), 0x1_0000), Err(Error(c::FI_EKEYREJECTED)));
        assert_eq!(small.register(region(0, 1, RW), 0xffff), Ok(0xffff));
        assert_eq!(m.get(7).unwrap().base, 0x1000);
        assert_eq!(m.remove(7).unwrap().key, 7);
        assert_eq!(m.remove(7), Err(EINVAL));
        assert_eq!(m.register(region(0x2000, 64, RW), 7), Ok(7), "key free again after removal");
    }

    #[test]
    fn provider_keys_unique_and_bounded() {
        let mut m = MrRegistry::new(c::FI_MR_PROV_KEY, 8).unwrap();
        let keys: HashSet<u64> = (0..2000).map(|i| m.register(region(i * 16, 16, RW), 0).unwrap()).collect();
        assert_eq!(keys.len(), 2000);
        assert!(!keys.contains(&c::FI_KEY_NOTAVAIL));
        // Not simply sequential.
        let mut v: Vec<u64> = keys.into_iter().collect();
        v.sort();
        assert!(v.windows(2).filter(|w| w[1] - w[0] == 1).count() < 10);
        let mut m4 = MrRegistry::new(c::FI_MR_PROV_KEY, 1).unwrap();
        let mut got = 0;
        while m4.register(region(0, 1, RW), 0).is_ok() {
            got += 1;
            assert!(got <= 256);
        }
        assert_eq!(got, 256, "every one-byte key is handed out exactly once");
        assert!(m4.map.keys().all(|&k| k <= 0xff));
    }

    #[test]
    fn verify_virt_addr() {
        let mut m = MrRegistry::new(c::FI_MR_VIRT_ADDR | c::FI_MR_PROV_KEY, 8).unwrap();
        let k = m.register(region(0x1000, 0x100, c::FI_REMOTE_WRITE), 0).unwrap();
        assert_eq!(m.verify(k, 0x1000, 0x100, c::FI_REMOTE_WRITE), Ok(0));
        assert_eq!(m.verify(k, 0x1010, 0x10, c::FI_REMOTE_WRITE), Ok(0x10));
        assert_eq!(m.verify(k, 0x1100, 0, c::FI_REMOTE_WRITE), Ok(0x100));
        assert_eq!(m.verify(k, 0x1001, 0x100, c::FI_REMOTE_WRITE), Err(EINVAL));
        assert_eq!(m.verify(k, 0xfff, 1, c::FI_REMOTE_WRITE), Err(EINVAL));
        assert_eq!(m.verify(k, u64::MAX, 2, c::FI_REMOTE_WRITE), Err(EINVAL));
        assert_eq!(m.verify(k, 0x1000, usize::MAX, c::FI_REMOTE_WRITE), Err(EINVAL));
        assert_eq!(m.verify(k, 0x1000, 1, c::FI_REMOTE_READ), Err(Error(c::FI_EACCES)));
        assert_eq!(m.verify(k, 0x1000, 1, 0), Err(Error(c::FI_EACCES)));
        assert_eq!(m.verify(k ^ 1, 0x1000, 1, c::FI_REMOTE_WRITE), Err(Error(c::FI_EKEYREJECTED)));
    }

    #[test]
    fn verify_offsets() {
        let mut m = MrRegistry::new(0, 8).unwrap();
        let k = m.register(region(0x7000_0000, 64, RW), 1).unwrap();
        assert_eq!(m.verify(k, 0, 64, c::FI_REMOTE_READ), Ok(0));
        assert_eq!(m.verify(k, 60, 4, RW), Ok(60));
        assert_eq!(m.verify(k, 60, 5, RW), Err(EINVAL));
        assert_eq!(m.verify(k, 0x7000_0000, 1, RW), Err(EINVAL));
        assert_eq!(m.verify(k, u64::MAX, 1, RW), Err(EINVAL));
        assert!(MrRegistry::is_remote(c::FI_REMOTE_READ) && !MrRegistry::is_remote(c::FI_SEND));
    }
}
