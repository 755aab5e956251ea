//! How the shm endpoint names its peers: fi_addr -> transport peer
//! (attached on first use, forgotten when the AV changes), sender key ->
//! fi_addr (the source of completions and of directed receives), the
//! address of a sender outside the AV (`FI_SOURCE_ERR`), and the name
//! given with `fi_setname`.

#![forbid(unsafe_code)]

use super::*;

/// FI_SOURCE_ERR error data: the address of the sender named by `key` in
/// the endpoint's format (`FI_ADDR_STR`, NUL-terminated), ready for
/// `fi_av_insert`. Resolved from the key on this slow path only (a scan of
/// the shared-memory directory, see `segment::find_by_key`); empty when the
/// sender is already gone.
pub(super) fn source_err_data(key: u64) -> Vec<u8> {
    match crate::segment::find_by_key(key) {
        Some(a) => {
            let mut s = addr_to_str(&a).into_bytes();
            s.push(0);
            s
        }
        None => Vec::new(),
    }
}

impl EpState {
    /// The transport peer for `fi_addr`, attaching on first use.
    /// Forgets cached fi_addr mappings after an AV removal.
    fn check_av_gen(&mut self) {
        if let Some(av) = self.av.as_ref() {
            let g = av.gen.load(std::sync::atomic::Ordering::Acquire);
            if g != self.av_gen {
                self.av_gen = g;
                self.peers.iter_mut().for_each(|p| *p = 0);
                self.by_key.clear();
                self.last_src = None;
            }
        }
    }

    pub(super) fn peer(&mut self, fi_addr: u64) -> Result<PeerId> {
        self.check_av_gen();
        let i = usize::try_from(fi_addr).map_err(|_| EINVAL)?;
        if let Some(&p) = self.peers.get(i) {
            if p != 0 {
                return Ok(p - 1);
            }
        }
        let a = self.av.as_ref().ok_or(Error(FI_ENOAV))?.resolve(fi_addr)?;
        let id = self.tp.attach(&a)?;
        if self.peers.len() <= i {
            self.peers.resize(i + 1, 0);
        }
        self.peers[i] = id + 1;
        self.by_key.insert(a.key(), fi_addr);
        self.last_src = None;
        Ok(id)
    }

    /// fi_setname. Refused once the endpoint is enabled (`FI_EBUSY`): only
    /// then can no peer have used the address yet. A name links the
    /// endpoint's segment under `segment::named_shm_name`; our own address
    /// form is accepted only for this endpoint's own address and removes a
    /// name given before. The error carries the reason for the log line.
    pub(super) fn set_name(&mut self, raw: &[u8], need_nul: bool) -> std::result::Result<(), (Error, &'static str)> {
        if self.enabled {
            return Err((Error(FI_EBUSY), "the endpoint is already enabled"));
        }
        let parsed = parse_str_addr(raw, need_nul)
            .map_err(|e| (e, "expected a NUL-terminated fi_shm:// address or fi_shm://<1-40 of A-Za-z0-9._:->"))?;
        match parsed {
            StrAddr::Addr(a) => {
                let own = self.tp.address();
                if a == own {
                    self.name = None;
                    Ok(())
                } else if a.pid == own.pid && a.start_time == own.start_time {
                    Err((Error(FI_EADDRINUSE), "the address of another endpoint of this process"))
                } else {
                    Err((EINVAL, "the address of another process"))
                }
            }
            StrAddr::Name(n) => {
                if self.name.as_ref().is_some_and(|(cur, _)| *cur == n) {
                    return Ok(());
                }
                let link = self.tp.segment().link_name(&n).map_err(|e| {
                    (e, if e.0 == FI_EADDRINUSE { "the name is in use by a live endpoint" } else { "the name could not be created" })
                })?;
                self.name = Some((n, link));
                Ok(())
            }
        }
    }

    pub(super) fn src_of(&mut self, key: u64) -> u64 {
        self.check_av_gen();
        if let Some((k, a)) = self.last_src {
            if k == key {
                return a;
            }
        }
        if let Some(&a) = self.by_key.get(&key) {
            self.last_src = Some((key, a));
            return a;
        }
        match self.av.as_ref().and_then(|av| av.by_key(key)) {
            Some(a) => {
                self.by_key.insert(key, a);
                self.last_src = Some((key, a));
                a
            }
            None => FI_ADDR_NOTAVAIL,
        }
    }

    /// FI_SOURCE_ERR: the sender's key when it is not in the AV.
    pub(super) fn unknown(&self, src: u64, key: u64) -> Option<u64> {
        (self.source_err && src == FI_ADDR_NOTAVAIL).then_some(key)
    }
}
