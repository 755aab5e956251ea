//! The shm address vector: `core::objects::av::Av` with 32-byte entries,
//! the map from sender keys (carried in every message) to fi_addr, and the
//! names inserted as `fi_shm://<name>`, resolved when first used if their
//! endpoint did not exist yet.

#![forbid(unsafe_code)]

use super::addr::{addr_to_str, parse_str_addr, StrAddr, ADDR_PREFIX};
use crate::peer::{Address, ADDR_LEN};
use rfabric_core::abi::*;
use rfabric_core::error::{Result, EINVAL};
use rfabric_core::objects::av::Av;
use rfabric_core::provider::{AddressVector, AvAttr};
use std::any::Any;
use std::collections::HashMap;
use std::sync::{Arc, RwLock};

struct AvInner {
    av: Av,
    /// Sender key (carried in every message) -> fi_addr, for `FI_SOURCE`
    /// and directed receive.
    keys: HashMap<u64, u64>,
    /// fi_addr -> the `fi_shm://<name>` string an application inserted
    /// (what `fi_av_lookup` reports for that fi_addr).
    names: HashMap<u64, String>,
    /// fi_addr of a name that had no live segment at insert time -> its
    /// address once a later use resolved it.
    pending: HashMap<u64, Option<Address>>,
    /// Placeholder entry of each unresolved name, so inserting it twice
    /// shares one slot (as inserting one address twice does).
    placeholders: HashMap<String, [u8; ADDR_LEN]>,
    next_placeholder: u64,
}

impl AvInner {
    /// Inserts one address entry; returns its fi_addr.
    fn insert_bytes(&mut self, bytes: &[u8; ADDR_LEN], user_id: u64, flags: u64) -> Result<u64> {
        let mut one = [user_id];
        self.av.insert(bytes, 1, Some(&mut one), flags & !FI_SYNC_ERR, None)?;
        if one[0] == FI_ADDR_NOTAVAIL {
            return Err(EINVAL);
        }
        Ok(one[0])
    }

    /// Inserts `fi_shm://<name>`. A name with a live segment becomes that
    /// endpoint's address at once; otherwise (like an address whose segment
    /// is gone, which insert accepts too) the entry is a placeholder that
    /// the first use resolves, and a use before the name exists fails with
    /// the resolution's error (`ENOENT`, `EAGAIN` while not ready).
    fn insert_name(&mut self, name: &str, user_id: u64, flags: u64) -> Result<u64> {
        let fi_addr = match crate::segment::resolve_name(name) {
            Ok((pid, nonce, start_time)) => {
                let a = Address { pid, nonce, start_time };
                let f = self.insert_bytes(&a.to_bytes(), user_id, flags)?;
                self.keys.insert(a.key(), f);
                f
            }
            Err(_) => {
                let next = &mut self.next_placeholder;
                let bytes = *self.placeholders.entry(name.to_string()).or_insert_with(|| {
                    // pid 0: never a valid Address, so never mistaken for one.
                    let mut b = [0u8; ADDR_LEN];
                    b[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
                    b[8..16].copy_from_slice(&next.to_le_bytes());
                    *next += 1;
                    b
                });
                let f = self.insert_bytes(&bytes, user_id, flags)?;
                self.pending.entry(f).or_insert(None);
                f
            }
        };
        self.names.entry(fi_addr).or_insert_with(|| format!("{ADDR_PREFIX}{name}"));
        Ok(fi_addr)
    }

    /// The address of `fi_addr`, resolving a pending name now.
    fn resolve(&mut self, fi_addr: u64) -> Result<Address> {
        let b = self.av.addr(fi_addr).ok_or(EINVAL)?;
        if let Ok(a) = Address::from_bytes(b) {
            return Ok(a);
        }
        match self.pending.get(&fi_addr) {
            Some(Some(a)) => return Ok(*a),
            Some(None) => {}
            None => return Err(EINVAL),
        }
        let name = self.names.get(&fi_addr).and_then(|n| n.strip_prefix(ADDR_PREFIX)).ok_or(EINVAL)?;
        let (pid, nonce, start_time) = crate::segment::resolve_name(name)?;
        let a = Address { pid, nonce, start_time };
        self.pending.insert(fi_addr, Some(a));
        self.keys.insert(a.key(), fi_addr);
        Ok(a)
    }
}

pub struct ShmAv {
    inner: RwLock<AvInner>,
    /// Bumped by every removal: endpoints drop their cached peers when it
    /// changes (one atomic load per send).
    pub(super) gen: std::sync::atomic::AtomicU64,
    /// Some insert used `FI_AV_USER_ID`: completions report user ids.
    user_ids: std::sync::atomic::AtomicBool,
}

impl ShmAv {
    pub(super) fn new(attr: &AvAttr) -> Result<ShmAv> {
        Ok(ShmAv {
            inner: RwLock::new(AvInner {
                av: Av::new(attr.kind, attr.count, ADDR_LEN)?,
                keys: HashMap::new(),
                names: HashMap::new(),
                pending: HashMap::new(),
                placeholders: HashMap::new(),
                next_placeholder: 0,
            }),
            gen: std::sync::atomic::AtomicU64::new(0),
            user_ids: std::sync::atomic::AtomicBool::new(false),
        })
    }
    pub(super) fn addr(&self, fi_addr: u64) -> Option<Address> {
        self.resolve(fi_addr).ok()
    }
    /// The address of `fi_addr`; a name inserted before its endpoint
    /// existed is resolved here (write lock, once).
    pub(super) fn resolve(&self, fi_addr: u64) -> Result<Address> {
        {
            let g = self.inner.read().unwrap_or_else(|e| e.into_inner());
            if let Ok(a) = Address::from_bytes(g.av.addr(fi_addr).ok_or(EINVAL)?) {
                return Ok(a);
            }
            if let Some(Some(a)) = g.pending.get(&fi_addr) {
                return Ok(*a);
            }
        }
        self.inner.write().unwrap_or_else(|e| e.into_inner()).resolve(fi_addr)
    }
    /// What completions report as source for `fi_addr`: the user id given
    /// with `FI_AV_USER_ID`, else the fi_addr itself.
    pub(super) fn reported(&self, fi_addr: u64) -> u64 {
        if fi_addr == FI_ADDR_NOTAVAIL || !self.user_ids.load(std::sync::atomic::Ordering::Relaxed) {
            return fi_addr;
        }
        self.inner.read().unwrap_or_else(|e| e.into_inner()).av.user_id(fi_addr).unwrap_or(fi_addr)
    }
    pub(super) fn by_key(&self, key: u64) -> Option<u64> {
        {
            let g = self.inner.read().unwrap_or_else(|e| e.into_inner());
            if let Some(&a) = g.keys.get(&key) {
                return Some(a);
            }
            if !g.pending.values().any(|a| a.is_none()) {
                return None;
            }
        }
        // A sender unknown so far, with names still unresolved: it may be
        // one of them.
        let mut g = self.inner.write().unwrap_or_else(|e| e.into_inner());
        let open: Vec<u64> = g.pending.iter().filter(|(_, a)| a.is_none()).map(|(&f, _)| f).collect();
        for f in open {
            let _ = g.resolve(f);
        }
        g.keys.get(&key).copied()
    }
}

impl AddressVector for ShmAv {
    fn addr_len(&self) -> Option<usize> {
        None
    }
    fn insert(&self, addrs: &[&[u8]], mut fi_addr: Option<&mut [u64]>, flags: u64) -> Result<usize> {
        if fi_addr.as_ref().is_some_and(|a| a.len() < addrs.len()) {
            return Err(EINVAL);
        }
        if flags & FI_AV_USER_ID != 0 {
            if fi_addr.is_none() {
                return Err(EINVAL);
            }
            self.user_ids.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        let mut g = self.inner.write().unwrap_or_else(|e| e.into_inner());
        let mut done = 0;
        for (i, raw) in addrs.iter().enumerate() {
            let user_id = fi_addr.as_ref().map_or(0, |v| v[i]);
            let r = parse_str_addr(raw, false).and_then(|p| match p {
                StrAddr::Addr(a) => {
                    let f = g.insert_bytes(&a.to_bytes(), user_id, flags)?;
                    g.keys.insert(a.key(), f);
                    Ok(f)
                }
                StrAddr::Name(n) => g.insert_name(&n, user_id, flags),
            });
            if let Some(out) = fi_addr.as_deref_mut() {
                out[i] = *r.as_ref().unwrap_or(&FI_ADDR_NOTAVAIL);
            }
            if r.is_ok() {
                done += 1;
            }
        }
        Ok(done)
    }
    fn remove(&self, fi_addrs: &[u64], flags: u64) -> Result<()> {
        let mut g = self.inner.write().unwrap_or_else(|e| e.into_inner());
        let keys: Vec<u64> = fi_addrs
            .iter()
            .filter_map(|&a| {
                let b = g.av.addr(a)?;
                Address::from_bytes(b).ok().or_else(|| g.pending.get(&a).copied().flatten())
            })
            .map(|a| a.key())
            .collect();
        let old: Vec<(u64, Vec<u8>)> = fi_addrs.iter().filter_map(|&a| Some((a, g.av.addr(a)?.to_vec()))).collect();
        g.av.remove(fi_addrs, flags)?;
        for (a, bytes) in old {
            if g.av.addr(a).is_none() {
                g.names.remove(&a);
                g.pending.remove(&a);
                g.placeholders.retain(|_, b| b[..] != bytes[..]);
            }
        }
        self.gen.fetch_add(1, std::sync::atomic::Ordering::Release);
        for k in keys {
            let still = g.keys.get(&k).is_some_and(|&a| g.av.addr(a).is_some());
            if !still {
                g.keys.remove(&k);
            }
        }
        Ok(())
    }
    fn lookup(&self, fi_addr: u64, buf: &mut [u8]) -> Result<usize> {
        let named = self.inner.read().unwrap_or_else(|e| e.into_inner()).names.get(&fi_addr).cloned();
        let mut s = match named {
            Some(n) => n.into_bytes(),
            None => addr_to_str(&self.addr(fi_addr).ok_or(EINVAL)?).into_bytes(),
        };
        s.push(0);
        let n = buf.len().min(s.len());
        buf[..n].copy_from_slice(&s[..n]);
        Ok(s.len())
    }
    fn straddr(&self, addr: &[u8]) -> String {
        match parse_str_addr(addr, false) {
            Ok(StrAddr::Addr(a)) => addr_to_str(&a),
            Ok(StrAddr::Name(n)) => format!("{ADDR_PREFIX}{n}"),
            Err(_) => String::from_utf8_lossy(&addr[..addr.iter().position(|&c| c == 0).unwrap_or(addr.len()).min(256)]).into_owned(),
        }
    }
    fn as_any_arc(self: Arc<Self>) -> Arc<dyn Any + Send + Sync> {
        self
    }
}
