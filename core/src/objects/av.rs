//! Address vector: maps fixed-length provider addresses to `fi_addr_t`.
//!
//! Both `FI_AV_TABLE` and `FI_AV_MAP` hand out slot indices as `fi_addr_t`
//! values: for TABLE that is what fi_av(3) requires; for MAP the value is
//! documented as opaque, and an index is a valid opaque value that keeps the
//! data-path lookup O(1) (a bounds check and a slice). Removed slots are
//! reused. A reverse map from address bytes to slot serves `FI_SOURCE` (the
//! source of an incoming message) and duplicate insertion (the slot is shared
//! and reference-counted, so each insert needs its own remove).
#![forbid(unsafe_code)]

use super::c;
use crate::error::{Error, Result, EINVAL};
use std::collections::HashMap;

/// Renders one address for `fi_av_straddr` (no trailing NUL).
pub type AddrFormatter = Box<dyn Fn(&[u8]) -> String + Send + Sync>;
/// Checks one address at insert time; an `Err` is reported for that address.
pub type AddrValidator = Box<dyn Fn(&[u8]) -> Result<()> + Send + Sync>;

/// Largest slot count an AV grows to.
pub const MAX_AV_ENTRIES: usize = 1 << 24;

#[derive(Clone, Copy, Default)]
struct Slot {
    refs: u32,
    user_id: u64,
}

pub struct Av {
    kind: u32,
    addrlen: usize,
    bytes: Vec<u8>,
    slots: Vec<Slot>,
    free: Vec<u64>,
    by_addr: HashMap<Box<[u8]>, u64>,
    formatter: Option<AddrFormatter>,
    validator: Option<AddrValidator>,
}

impl Av {
    /// `kind` is `fi_av_attr.type` (UNSPEC picks TABLE), `count` its size
    /// hint, `addrlen` the provider's fixed address length.
    pub fn new(kind: u32, count: usize, addrlen: usize) -> Result<Av> {
        let kind = match kind {
            c::FI_AV_UNSPEC => c::FI_AV_TABLE,
            c::FI_AV_TABLE | c::FI_AV_MAP => kind,
            _ => return Err(EINVAL),
        };
        if addrlen == 0 || addrlen > 4096 || count > MAX_AV_ENTRIES {
            return Err(EINVAL);
        }
        Ok(Av {
            kind,
            addrlen,
            bytes: Vec::with_capacity(count.min(4096) * addrlen),
            slots: Vec::with_capacity(count.min(4096)),
            free: Vec::new(),
            by_addr: HashMap::new(),
            formatter: None,
            validator: None,
        })
    }
    pub fn set_formatter(&mut self, f: AddrFormatter) {
        self.formatter = Some(f);
    }
    pub fn set_validator(&mut self, v: AddrValidator) {
        self.validator = Some(v);
    }
    pub fn kind(&self) -> u32 {
        self.kind
    }
    pub fn addrlen(&self) -> usize {
        self.addrlen
    }
    /// Addresses currently inserted.
    pub fn len(&self) -> usize {
        self.by_addr.len()
    }
    pub fn is_empty(&self) -> bool {
        self.by_addr.is_empty()
    }

    /// Data path: the address bytes for `fi_addr`, O(1).
    #[inline]
    pub fn addr(&self, fi_addr: u64) -> Option<&[u8]> {
        let i = usize::try_from(fi_addr).ok()?;
        if self.slots.get(i)?.refs == 0 {
            return None;
        }
        Some(&self.bytes[i * self.addrlen..(i + 1) * self.addrlen])
    }

    /// `FI_SOURCE`: the fi_addr holding `addr`, if inserted.
    pub fn reverse(&self, addr: &[u8]) -> Option<u64> {
        self.by_addr.get(addr).copied()
    }

    /// The value a completion reports as source for `addr`: the user id when
    /// one was set with `FI_AV_USER_ID`, else the fi_addr, else
    /// `FI_ADDR_NOTAVAIL`.
    pub fn source_id(&self, addr: &[u8]) -> u64 {
        match self.reverse(addr) {
            Some(a) => self.slots[a as usize].user_id,
            None => c::FI_ADDR_NOTAVAIL,
        }
    }

    /// The id recorded for `fi_addr` (equal to `fi_addr` unless a user id was
    /// set).
    pub fn user_id(&self, fi_addr: u64) -> Option<u64> {
        self.addr(fi_addr)?;
        Some(self.slots[fi_addr as usize].user_id)
    }

    /// `fi_av_set_user_id`.
    pub fn set_user_id(&mut self, fi_addr: u64, id: u64) -> Result<()> {
        self.addr(fi_addr).ok_or(EINVAL)?;
        self.slots[fi_addr as usize].user_id = id;
        Ok(())
    }

    /// `fi_av_insert`: `addrs` holds `count` addresses back to back. For each,
    /// `fi_addr` (if given) receives the new fi_addr or `FI_ADDR_NOTAVAIL`;
    /// with `FI_AV_USER_ID` it is also input: the ids to record. With
    /// `FI_SYNC_ERR`, `errors` receives 0 or the positive `FI_E*` per address.
    /// Returns how many were inserted.
    pub fn insert(
        &mut self,
        addrs: &[u8],
        count: usize,
        mut fi_addr: Option<&mut [u64]>,
        flags: u64,
        mut errors: Option<&mut [i32]>,
    ) -> Result<usize> {
        if flags & !(c::FI_AV_USER_ID | c::FI_MORE | c::FI_SYNC_ERR | c::FI_FIREWALL_ADDR) != 0 {
            return Err(Error(c::FI_EBADFLAGS));
        }
        let need = count.checked_mul(self.addrlen).ok_or(EINVAL)?;
        if addrs.len() < need
            || fi_addr.as_ref().is_some_and(|a| a.len() < count)
            || (flags & c::FI_AV_USER_ID != 0 && fi_addr.is_none())
        {
            return Err(EINVAL);
        }
        if flags & c::FI_SYNC_ERR != 0 && errors.as_ref().map_or(true, |e| e.len() < count) {
            return Err(EINVAL);
        }
        let mut done = 0;
        for i in 0..count {
            let a = &addrs[i * self.addrlen..(i + 1) * self.addrlen];
            let id = fi_addr.as_ref().filter(|_| flags & c::FI_AV_USER_ID != 0).map(|v| v[i]);
            let r = self.insert_one(a, id);
            if let Some(out) = fi_addr.as_deref_mut() {
                out[i] = *r.as_ref().unwrap_or(&c::FI_ADDR_NOTAVAIL);
            }
            if flags & c::FI_SYNC_ERR != 0 {
                if let Some(e) = errors.as_deref_mut() {
                    e[i] = r.map_or_else(|e| e.0, |_| 0);
                }
            }
            if r.is_ok() {
                done += 1;
            }
        }
        Ok(done)
    }

    fn insert_one(&mut self, a: &[u8], user_id: Option<u64>) -> Result<u64> {
        if let Some(v) = &self.validator {
            v(a)?;
        }
        if let Some(&i) = self.by_addr.get(a) {
            let s = &mut self.slots[i as usize];
            s.refs = s.refs.checked_add(1).ok_or(EINVAL)?;
            if let Some(id) = user_id {
                s.user_id = id;
            }
            return Ok(i);
        }
        let i = match self.free.pop() {
            Some(i) => i,
            None => {
                if self.slots.len() >= MAX_AV_ENTRIES {
                    return Err(Error(c::FI_ENOSPC));
                }
                self.slots.push(Slot::default());
                self.bytes.resize(self.slots.len() * self.addrlen, 0);
                (self.slots.len() - 1) as u64
            }
        };
        let at = i as usize * self.addrlen;
        self.bytes[at..at + self.addrlen].copy_from_slice(a);
        self.slots[i as usize] = Slot { refs: 1, user_id: user_id.unwrap_or(i) };
        self.by_addr.insert(a.into(), i);
        Ok(i)
    }

    /// `fi_av_remove`: all of `fi_addrs` must be inserted (else `-FI_EINVAL`
    /// and nothing is removed).
    pub fn remove(&mut self, fi_addrs: &[u64], flags: u64) -> Result<()> {
        if flags != 0 {
            return Err(Error(c::FI_EBADFLAGS));
        }
        let mut need: HashMap<u64, u32> = HashMap::new();
        for &a in fi_addrs {
            let n = need.entry(a).or_default();
            *n += 1;
            if self.addr(a).is_none() || self.slots[a as usize].refs < *n {
                return Err(EINVAL);
            }
        }
        for &a in fi_addrs {
            let s = &mut self.slots[a as usize];
            s.refs -= 1;
            if s.refs == 0 {
                let at = a as usize * self.addrlen;
                self.by_addr.remove(&self.bytes[at..at + self.addrlen]);
                self.free.push(a);
            }
        }
        Ok(())
    }

    /// `fi_av_lookup`: copies as much of the address as fits in `buf` and
    /// returns the full length (the caller's new `*addrlen`).
    pub fn lookup(&self, fi_addr: u64, buf: &mut [u8]) -> Result<usize> {
        let a = self.addr(fi_addr).ok_or(EINVAL)?;
        let n = buf.len().min(a.len());
        buf[..n].copy_from_slice(&a[..n]);
        Ok(a.len())
    }

    /// `fi_av_straddr`: writes the printable form, truncated and
    /// NUL-terminated when `buf` is non-empty; returns the size needed
    /// including the NUL.
    pub fn straddr(&self, addr: &[u8], buf: &mut [u8]) -> usize {
        let s = match &self.formatter {
            Some(f) => f(addr),
            None => {
                let mut s = String::with_capacity(2 + addr.len() * 2);
                s.push_str("0x");
                for b in addr {
                    s.push_str(&format!("{b:02x}"));
                }
                s
            }
        };
        let bytes = s.as_bytes();
        if !buf.is_empty() {
            let n = bytes.len().min(buf.len() - 1);
            buf[..n].copy_from_slice(&bytes[..n]);
            buf[n] = 0;
        }
        bytes.len() + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addrs(ids: &[u8]) -> Vec<u8> {
        ids.iter().flat_map(|&i| [i, 0xaa, i ^ 0x55, 1]).collect()
    }

    #[test]
    fn bad_attrs() {
        assert!(Av::new(9, 0, 4).is_err());
        assert!(Av::new(c::FI_AV_TABLE, 0, 0).is_err());
        assert!(Av::new(c::FI_AV_TABLE, MAX_AV_ENTRIES + 1, 4).is_err());
        assert_eq!(Av::new(c::FI_AV_UNSPEC, 8, 4).unwrap().kind(), c::FI_AV_TABLE);
        assert_eq!(Av::new(c::FI_AV_MAP, 8, 4).unwrap().kind(), c::FI_AV_MAP);
    }

    #[test]
    fn insert_lookup_reverse() {
        for kind in [c::FI_AV_TABLE, c::FI_AV_MAP] {
            let mut av = Av::new(kind, 4, 4).unwrap();
            let a = addrs(&[1, 2, 3]);
            let mut out = [0u64; 3];
            assert_eq!(av.insert(&a, 3, Some(&mut out), 0, None), Ok(3));
            assert_eq!(out, [0, 1, 2]);
            for (i, &f) in out.iter().enumerate() {
                assert_eq!(av.addr(f), Some(&a[i * 4..i * 4 + 4]));
                assert_eq!(av.reverse(&a[i * 4..i * 4 + 4]), Some(f));
                assert_eq!(av.source_id(&a[i * 4..i * 4 + 4]), f);
            }
            assert_eq!(av.reverse(&[9, 9, 9, 9]), None);
            assert_eq!(av.source_id(&[9, 9, 9, 9]), c::FI_ADDR_NOTAVAIL);
            let mut big = [0u8; 8];
            assert_eq!(av.lookup(1, &mut big), Ok(4));
            assert_eq!(&big[..4], &a[4..8]);
            let mut small = [0u8; 2];
            assert_eq!(av.lookup(2, &mut small), Ok(4));
            assert_eq!(small, [3, 0xaa]);
            assert_eq!(av.lookup(3, &mut big), Err(EINVAL));
            assert_eq!(av.lookup(u64::MAX, &mut big), Err(EINVAL));
            assert_eq!(av.addr(u64::MAX), None);
        }
    }

    #[test]
    fn insert_bad_inputs() {
        let mut av = Av::new(c::FI_AV_TABLE, 4, 4).unwrap();
        let a = addrs(&[1, 2]);
        assert_eq!(av.insert(&a, 0, None, 0, None), Ok(0));
        assert_eq!(av.insert(&a, 3, None, 0, None), Err(EINVAL));
        assert_eq!(av.insert(&a, usize::MAX, None, 0, None), Err(EINVAL));
        let mut one = [0u64; 1];
        assert_eq!(av.insert(&a, 2, Some(&mut one), 0, None), Err(EINVAL));
        assert_eq!(av.insert(&a, 2, None, c::FI_AV_USER_ID, None), Err(EINVAL));
        assert_eq!(av.insert(&a, 2, None, 1 << 3, None), Err(Error(c::FI_EBADFLAGS)));
        assert_eq!(av.insert(&a, 2, None, c::FI_SYNC_ERR, None), Err(EINVAL));
        assert!(av.is_empty());
    }

    #[test]
    fn per_address_errors() {
        let mut av = Av::new(c::FI_AV_TABLE, 4, 4).unwrap();
        av.set_validator(Box::new(|a: &[u8]| if a[0] == 2 { Err(Error(c::FI_EADDRNOTAVAIL)) } else { Ok(()) }));
        let a = addrs(&[1, 2, 3]);
        let mut out = [7u64; 3];
        let mut errs = [-1i32; 3];
        assert_eq!(av.insert(&a, 3, Some(&mut out), c::FI_SYNC_ERR, Some(&mut errs)), Ok(2));
        assert_eq!(out, [0, c::FI_ADDR_NOTAVAIL, 1]);
        assert_eq!(errs, [0, c::FI_EADDRNOTAVAIL, 0]);
    }

    #[test]
    fn remove_reuse_and_duplicates() {
        let mut av = Av::new(c::FI_AV_TABLE, 4, 4).unwrap();
        let a = addrs(&[1, 2, 3]);
        av.insert(&a, 3, None, 0, None).unwrap();
        assert_eq!(av.remove(&[1, 5], 0), Err(EINVAL));
        assert!(av.addr(1).is_some(), "failed remove must not remove anything");
        assert_eq!(av.remove(&[1, 1], 0), Err(EINVAL));
        assert_eq!(av.remove(&[1], 1), Err(Error(c::FI_EBADFLAGS)));
        av.remove(&[1], 0).unwrap();
        assert_eq!(av.addr(1), None);
        assert_eq!(av.reverse(&a[4..8]), None);
        assert_eq!(av.remove(&[1], 0), Err(EINVAL));
        // Slot 1 is reused for a new address.
        let b = addrs(&[9]);
        let mut out = [0u64; 1];
        av.insert(&b, 1, Some(&mut out), 0, None).unwrap();
        assert_eq!(out[0], 1);
        assert_eq!(av.addr(1), Some(&b[..]));
        // Duplicate insert shares the slot; needs two removes.
        av.insert(&b, 1, Some(&mut out), 0, None).unwrap();
        assert_eq!(out[0], 1);
        assert_eq!(av.len(), 3);
        av.remove(&[1], 0).unwrap();
        assert!(av.addr(1).is_some());
        av.remove(&[1], 0).unwrap();
        assert!(av.addr(1).is_none());
    }

    #[test]
    fn user_ids() {
        let mut av = Av::new(c::FI_AV_MAP, 4, 4).unwrap();
        let a = addrs(&[1, 2]);
        let mut ids = [1000u64, 2000];
        assert_eq!(av.insert(&a, 2, Some(&mut ids), c::FI_AV_USER_ID, None), Ok(2));
        assert_eq!(ids, [0, 1], "output is still the fi_addr");
        assert_eq!(av.user_id(0), Some(1000));
        assert_eq!(av.source_id(&a[4..8]), 2000);
        av.set_user_id(0, 5).unwrap();
        assert_eq!(av.user_id(0), Some(5));
        assert_eq!(av.set_user_id(7, 5), Err(EINVAL));
        assert_eq!(av.user_id(7), None);
    }

    #[test]
    fn straddr_truncates() {
        let mut av = Av::new(c::FI_AV_TABLE, 1, 2).unwrap();
        let mut buf = [0xffu8; 16];
        assert_eq!(av.straddr(&[0xab, 0x01], &mut buf), 7);
        assert_eq!(&buf[..7], b"0xab01\0");
        let mut small = [0xffu8; 4];
        assert_eq!(av.straddr(&[0xab, 0x01], &mut small), 7);
        assert_eq!(&small, b"0xa\0");
        assert_eq!(av.straddr(&[1], &mut []), 5);
        av.set_formatter(Box::new(|a: &[u8]| format!("shm://{}", a.len())));
        assert_eq!(av.straddr(&[1, 2], &mut buf), 8);
        assert_eq!(&buf[..8], b"shm://2\0");
    }
}
