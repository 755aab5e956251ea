//! Event queue: control-path events (`FI_NOTIFY`, `FI_CONNREQ`,
//! `FI_CONNECTED`, `FI_SHUTDOWN`, `FI_MR_COMPLETE`, `FI_AV_COMPLETE`,
//! `FI_JOIN_COMPLETE`) carrying the raw bytes of their `fi_eq_entry` or
//! `fi_eq_cm_entry` payload, plus error entries (`fi_eq_err_entry`).
//! Order is kept across both kinds: a read whose next item is an error fails
//! with `-FI_EAVAIL`. Control path only, so entries own heap buffers.
#![forbid(unsafe_code)]

use super::c;
use super::cq::{ErrDataLoc, API_1_5};
use super::wait::{block_until, timeout_ms, Locked, WaitObj};
use crate::error::{Error, Result, EINVAL, ENOMEM, ENOSYS};
use crate::info::Info;
use std::any::Any;
use std::collections::VecDeque;
use super::progress::Progress;
use std::sync::{Arc, Weak};

/// A provider's connection request (`FI_CONNREQ`): whatever it needs to
/// accept or reject it later. The C edge wraps it in the `fid_t handle` of
/// the event's `fi_info`; `fi_endpoint` and `fi_reject` hand it back.
pub type ConnReq = Box<dyn Any + Send + Sync>;

/// How the C edge turns a CM event's `Info` (and its connection request)
/// into the `struct fi_info *` of an `fi_eq_cm_entry`, and frees one it made
/// but never handed out (an unread event on a closing EQ). `to_c` returns 0
/// when it could not allocate.
#[derive(Clone, Copy)]
pub struct InfoHooks {
    pub to_c: fn(&Info, Option<ConnReq>) -> usize,
    pub free: fn(usize),
}

pub const DEFAULT_EQ_SIZE: usize = 1024;
pub const MAX_EQ_SIZE: usize = 1 << 20;
/// Largest payload accepted by `write` (an fi_eq_cm_entry with a large
/// connection-data blob fits).
pub const MAX_EQ_PAYLOAD: usize = 64 * 1024;

/// `sizeof(struct fi_eq_entry)` and `sizeof(struct fi_eq_cm_entry)`.
pub const EQ_ENTRY_SIZE: usize = 24;
pub const EQ_CM_ENTRY_SIZE: usize = 16;
pub const EQ_ERR_ENTRY_SIZE: usize = 48;

/// The bytes of a `struct fi_eq_entry`.
pub fn eq_entry(fid: usize, context: usize, data: u64) -> [u8; EQ_ENTRY_SIZE] {
    let mut b = [0u8; EQ_ENTRY_SIZE];
    b[0..8].copy_from_slice(&(fid as u64).to_ne_bytes());
    b[8..16].copy_from_slice(&(context as u64).to_ne_bytes());
    b[16..24].copy_from_slice(&data.to_ne_bytes());
    b
}

/// The bytes of a `struct fi_eq_cm_entry` followed by its connection data.
pub fn eq_cm_entry(fid: usize, info: usize, cm_data: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(EQ_CM_ENTRY_SIZE + cm_data.len());
    b.extend_from_slice(&(fid as u64).to_ne_bytes());
    b.extend_from_slice(&(info as u64).to_ne_bytes());
    b.extend_from_slice(cm_data);
    b
}

/// An error event (`fi_eq_err_entry` without pointers of ours).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EqErr {
    pub fid: usize,
    pub context: usize,
    pub data: u64,
    pub err: i32,
    pub prov_errno: i32,
    pub err_data: Vec<u8>,
}

/// What `readerr` returns: the entry plus where its err_data went, with the
/// same rules as [`super::cq::Cq::readerr`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EqErrInfo {
    pub fid: usize,
    pub context: usize,
    pub data: u64,
    pub err: i32,
    pub prov_errno: i32,
    pub err_data_size: usize,
    pub err_data: ErrDataLoc,
}

/// A connection-management event a provider queues (`FI_CONNREQ`,
/// `FI_CONNECTED`, `FI_SHUTDOWN`): read as an `fi_eq_cm_entry` followed by
/// its connection data. Only `FI_CONNREQ` carries an `Info`.
struct CmEvent {
    event: u32,
    fid: usize,
    info: Option<Box<Info>>,
    req: Option<ConnReq>,
    data: Vec<u8>,
    /// The C `fi_info` made for it by [`InfoHooks::to_c`] (at the first
    /// read or peek), 0 before.
    c_info: usize,
}

enum Entry {
    Event { event: u32, payload: Vec<u8> },
    Cm(CmEvent),
    Err(EqErr),
}

pub struct Eq {
    q: VecDeque<Entry>,
    cap: usize,
    last_err_data: Vec<u8>,
    wait: Option<Arc<WaitObj>>,
    hooks: Option<InfoHooks>,
    /// Endpoints whose connection management is driven by reads of this
    /// queue ([`EqBinding::drive`]): a read runs each once before it looks.
    drivers: Vec<Weak<dyn Progress>>,
}

impl Drop for Eq {
    fn drop(&mut self) {
        for e in self.q.drain(..) {
            if let (Entry::Cm(c), Some(h)) = (e, self.hooks) {
                if c.c_info != 0 {
                    (h.free)(c.c_info);
                }
            }
        }
    }
}

impl Eq {
    /// `size` is `fi_eq_attr.size` (0: default), `wait_obj` its `wait_obj`.
    pub fn new(size: usize, wait_obj: u32) -> Result<Eq> {
        let cap = if size == 0 { DEFAULT_EQ_SIZE } else { size };
        if cap > MAX_EQ_SIZE {
            return Err(EINVAL);
        }
        Ok(Eq {
            q: VecDeque::new(),
            cap,
            last_err_data: Vec::new(),
            wait: WaitObj::new(wait_obj)?.map(Arc::new),
            hooks: None,
            drivers: Vec::new(),
        })
    }
    /// Set by the C edge before the EQ is handed to anyone: without hooks a
    /// `FI_CONNREQ` is read with a NULL info.
    pub fn set_info_hooks(&mut self, h: InfoHooks) {
        self.hooks = Some(h);
    }
    pub fn len(&self) -> usize {
        self.q.len()
    }
    pub fn is_empty(&self) -> bool {
        self.q.is_empty()
    }
    pub fn wait_obj(&self) -> Option<&Arc<WaitObj>> {
        self.wait.as_ref()
    }
    pub fn wait_fd(&self) -> Option<i32> {
        self.wait.as_ref().and_then(|w| w.fd())
    }

    fn push(&mut self, e: Entry) -> Result<()> {
        if self.q.len() >= self.cap {
            return Err(Error(c::FI_EAGAIN));
        }
        self.q.push_back(e);
        if let Some(w) = &self.wait {
            w.notify();
        }
        Ok(())
    }

    /// `fi_eq_write` (and the provider's own events): queues `payload` as the
    /// data of `event`. Returns the number of bytes queued.
    pub fn write(&mut self, event: u32, payload: &[u8]) -> Result<usize> {
        if event > c::FI_JOIN_COMPLETE || payload.is_empty() || payload.len() > MAX_EQ_PAYLOAD {
            return Err(EINVAL);
        }
        self.push(Entry::Event { event, payload: payload.to_vec() })?;
        Ok(payload.len())
    }

    /// Queues a provider's CM event: `fid` is the endpoint's (the passive
    /// endpoint's for `FI_CONNREQ`), `info` and `req` are given with
    /// `FI_CONNREQ` only.
    pub fn write_cm(&mut self, event: u32, fid: usize, info: Option<Info>, req: Option<ConnReq>, data: &[u8]) -> Result<()> {
        if !matches!(event, c::FI_CONNREQ | c::FI_CONNECTED | c::FI_SHUTDOWN) || data.len() > MAX_EQ_PAYLOAD {
            return Err(EINVAL);
        }
        let info = info.map(Box::new);
        self.push(Entry::Cm(CmEvent { event, fid, info, req, data: data.to_vec(), c_info: 0 }))
    }

    /// Queues an error event (`err` a positive `FI_E*`).
    pub fn write_err(&mut self, e: EqErr) -> Result<()> {
        if e.err <= 0 {
            return Err(EINVAL);
        }
        self.push(Entry::Err(e))
    }

    /// `fi_eq_read`: copies the next event's payload into `buf` and returns
    /// `(event, bytes)`. With `FI_PEEK` the event stays queued. `-FI_EAGAIN`
    /// when empty, `-FI_EAVAIL` when the next item is an error,
    /// `-FI_ETOOSMALL` when `buf` cannot hold the payload (nothing removed).
    pub fn read(&mut self, buf: &mut [u8], flags: u64) -> Result<(u32, usize)> {
        if flags & !c::FI_PEEK != 0 {
            return Err(EINVAL);
        }
        let hooks = self.hooks;
        let (event, n) = match self.q.front_mut() {
            None => return Err(Error(c::FI_EAGAIN)),
            Some(Entry::Err(_)) => return Err(Error(c::FI_EAVAIL)),
            Some(Entry::Event { event, payload }) => {
                if buf.len() < payload.len() {
                    return Err(Error(c::FI_ETOOSMALL));
                }
                buf[..payload.len()].copy_from_slice(payload);
                (*event, payload.len())
            }
            Some(Entry::Cm(cm)) => {
                let n = EQ_CM_ENTRY_SIZE + cm.data.len();
                if buf.len() < n {
                    return Err(Error(c::FI_ETOOSMALL));
                }
                if cm.c_info == 0 {
                    if let (Some(info), Some(h)) = (cm.info.as_deref(), hooks) {
                        cm.c_info = (h.to_c)(info, cm.req.take());
                        if cm.c_info == 0 {
                            return Err(ENOMEM);
                        }
                    }
                }
                buf[..n].copy_from_slice(&eq_cm_entry(cm.fid, cm.c_info, &cm.data));
                (cm.event, n)
            }
        };
        if flags & c::FI_PEEK == 0 {
            self.q.pop_front();
        }
        Ok((event, n))
    }

    /// `fi_eq_readerr`: takes the next item if it is an error (`-FI_EAGAIN`
    /// otherwise). `user_buf`/`api_version` as for the CQ.
    pub fn readerr(&mut self, user_buf: Option<&mut [u8]>, api_version: u32, flags: u64) -> Result<EqErrInfo> {
        if flags & !c::FI_PEEK != 0 {
            return Err(EINVAL);
        }
        let e = match self.q.front() {
            Some(Entry::Err(e)) => e.clone(),
            _ => return Err(Error(c::FI_EAGAIN)),
        };
        if flags & c::FI_PEEK == 0 {
            self.q.pop_front();
        }
        let (size, loc) = if e.err_data.is_empty() {
            (0, ErrDataLoc::None)
        } else {
            match user_buf {
                Some(b) if !b.is_empty() && api_version >= API_1_5 => {
                    let n = b.len().min(e.err_data.len());
                    b[..n].copy_from_slice(&e.err_data[..n]);
                    (n, ErrDataLoc::Copied)
                }
                _ => (e.err_data.len(), ErrDataLoc::Provider),
            }
        };
        let info = EqErrInfo {
            fid: e.fid,
            context: e.context,
            data: e.data,
            err: e.err,
            prov_errno: e.prov_errno,
            err_data_size: size,
            err_data: loc,
        };
        if loc == ErrDataLoc::Provider {
            self.last_err_data = e.err_data;
        }
        Ok(info)
    }

    pub fn last_err_data(&self) -> &[u8] {
        &self.last_err_data
    }

    /// `fi_eq_sread` for a single-owner EQ (`timeout` ms, negative =
    /// infinite). `-FI_EAGAIN` on timeout or signal.
    pub fn sread(&mut self, buf: &mut [u8], timeout: i32, flags: u64, progress: &mut dyn FnMut(&mut Eq)) -> Result<(u32, usize)> {
        let w = self.wait.clone().ok_or(ENOSYS)?;
        block_until(&w, timeout_ms(timeout), Error(c::FI_EAGAIN), || {
            progress(self);
            attempt(self.read(buf, flags))
        })
    }

    pub fn signal(&self) -> Result<()> {
        self.wait.as_ref().ok_or(ENOSYS)?.signal();
        Ok(())
    }
}

/// An EQ bound to an endpoint or a passive endpoint (`fi_ep_bind`,
/// `fi_pep_bind`), with what the events of that endpoint name: its fid and
/// the context it was opened with. The provider keeps it and queues the
/// endpoint's CM events through it, from any thread.
#[derive(Clone)]
pub struct EqBinding {
    pub eq: Arc<Locked<Eq>>,
    pub fid: usize,
    pub context: usize,
}

impl EqBinding {
    /// Queues a CM event (see [`Eq::write_cm`]); a full queue loses it with
    /// a warning from `prov`.
    pub fn cm(&self, prov: &str, event: u32, info: Option<Info>, req: Option<ConnReq>, data: &[u8]) -> Result<()> {
        let r = self.eq.lock().write_cm(event, self.fid, info, req, data);
        if let Err(e) = r {
            crate::fi_warn!(prov, c::FI_LOG_EQ, "event {} for fid {:#x} not queued: {}", event, self.fid, e);
        }
        r
    }
    /// Queues an error event for the endpoint (`err` a positive `FI_E*`),
    /// with `err_data` (a peer's reject data).
    pub fn error(&self, prov: &str, err: i32, prov_errno: i32, err_data: &[u8]) -> Result<()> {
        let e = EqErr { fid: self.fid, context: self.context, data: 0, err, prov_errno, err_data: err_data.to_vec() };
        let r = self.eq.lock().write_err(e);
        if let Err(x) = r {
            crate::fi_warn!(prov, c::FI_LOG_EQ, "error event {} for fid {:#x} not queued: {}", err, self.fid, x);
        }
        r
    }
    /// Makes reads of the EQ drive `ep` (one round of its progress before
    /// each read), for a provider whose connection events come from a
    /// channel it polls rather than from a thread of its own. The EQ holds
    /// it weakly: a closed endpoint drops out.
    pub fn drive(&self, ep: Weak<dyn Progress>) {
        let mut q = self.eq.lock();
        q.drivers.retain(|d| d.strong_count() > 0);
        if !q.drivers.iter().any(|d| Weak::ptr_eq(d, &ep)) {
            q.drivers.push(ep);
        }
    }
}

fn attempt(r: Result<(u32, usize)>) -> Result<Option<(u32, usize)>> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(e) if e.0 == c::FI_EAGAIN => Ok(None),
        Err(e) => Err(e),
    }
}

impl Locked<Eq> {
    /// Runs the progress of the endpoints that drive this EQ
    /// ([`EqBinding::drive`]), with the EQ's lock released so they can
    /// queue events. Nothing to do (one lock, no allocation) when none do.
    pub fn progress(&self) -> usize {
        let drivers: Vec<Arc<dyn Progress>> = {
            let q = self.lock();
            if q.drivers.is_empty() {
                return 0;
            }
            q.drivers.iter().filter_map(Weak::upgrade).collect()
        };
        drivers.iter().map(|d| d.progress()).sum()
    }
    /// `fi_eq_sread` on a shared EQ; the lock is dropped while sleeping.
    pub fn sread(&self, buf: &mut [u8], timeout: i32, flags: u64, progress: &mut dyn FnMut()) -> Result<(u32, usize)> {
        let w = self.lock().wait.clone().ok_or(ENOSYS)?;
        block_until(&w, timeout_ms(timeout), Error(c::FI_EAGAIN), || {
            progress();
            attempt(self.lock().read(buf, flags))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn eq() -> Eq {
        Eq::new(4, c::FI_WAIT_UNSPEC).unwrap()
    }

    #[test]
    fn sizes_match_layout_table() {
        let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/abi/layout.tsv")).unwrap();
        let sz = |ty: &str| -> usize {
            let l = text.lines().find(|l| l.starts_with(&format!("struct {ty}\t(sizeof)"))).unwrap();
            l.split('\t').nth(3).unwrap().parse().unwrap()
        };
        assert_eq!(sz("fi_eq_entry"), EQ_ENTRY_SIZE);
        assert_eq!(sz("fi_eq_cm_entry"), EQ_CM_ENTRY_SIZE);
        assert_eq!(sz("fi_eq_err_entry"), EQ_ERR_ENTRY_SIZE);
    }

    #[test]
    fn write_read_peek() {
        let mut q = eq();
        let e = eq_entry(0x10, 0x20, 7);
        assert_eq!(q.write(c::FI_MR_COMPLETE, &e), Ok(24));
        let cm = eq_cm_entry(0x11, 0x99, b"hello");
        assert_eq!(cm.len(), 21);
        q.write(c::FI_CONNREQ, &cm).unwrap();
        let mut buf = [0u8; 64];
        assert_eq!(q.read(&mut buf, c::FI_PEEK), Ok((c::FI_MR_COMPLETE, 24)));
        assert_eq!(q.len(), 2);
        buf.fill(0);
        assert_eq!(q.read(&mut buf, 0), Ok((c::FI_MR_COMPLETE, 24)));
        assert_eq!(&buf[..24], &e);
        assert_eq!(q.read(&mut buf[..20], 0), Err(Error(c::FI_ETOOSMALL)));
        assert_eq!(q.len(), 1);
        assert_eq!(q.read(&mut buf, 0), Ok((c::FI_CONNREQ, 21)));
        assert_eq!(&buf[16..21], b"hello");
        assert_eq!(u64::from_ne_bytes(buf[8..16].try_into().unwrap()), 0x99);
        assert_eq!(q.read(&mut buf, 0), Err(Error(c::FI_EAGAIN)));
    }

    #[test]
    fn bad_inputs() {
        let mut q = eq();
        assert_eq!(q.write(7, b"x"), Err(EINVAL));
        assert_eq!(q.write(c::FI_NOTIFY, b""), Err(EINVAL));
        assert_eq!(q.write(c::FI_NOTIFY, &vec![0; MAX_EQ_PAYLOAD + 1]), Err(EINVAL));
        assert_eq!(q.write_err(EqErr { err: 0, ..Default::default() }), Err(EINVAL));
        assert_eq!(q.read(&mut [0; 8], 1), Err(EINVAL));
        for _ in 0..4 {
            q.write(c::FI_SHUTDOWN, &[1; 24]).unwrap();
        }
        assert_eq!(q.write(c::FI_SHUTDOWN, &[1; 24]), Err(Error(c::FI_EAGAIN)));
        assert!(Eq::new(MAX_EQ_SIZE + 1, 0).is_err());
        let mut n = Eq::new(0, c::FI_WAIT_NONE).unwrap();
        assert_eq!(n.sread(&mut [0; 8], 0, 0, &mut |_: &mut Eq| {}), Err(ENOSYS));
    }

    #[test]
    fn errors_in_order() {
        let mut q = eq();
        q.write(c::FI_CONNECTED, &[1; 16]).unwrap();
        q.write_err(EqErr { fid: 1, context: 2, data: 3, err: 111, prov_errno: 4, err_data: vec![9; 6] }).unwrap();
        q.write(c::FI_SHUTDOWN, &[2; 16]).unwrap();
        let mut buf = [0u8; 32];
        assert_eq!(q.readerr(None, API_1_5, 0).err(), Some(Error(c::FI_EAGAIN)));
        assert_eq!(q.read(&mut buf, 0), Ok((c::FI_CONNECTED, 16)));
        assert_eq!(q.read(&mut buf, 0), Err(Error(c::FI_EAVAIL)));
        let mut ed = [0u8; 4];
        let p = q.readerr(Some(&mut ed), API_1_5, c::FI_PEEK).unwrap();
        assert_eq!((p.err, p.err_data_size, p.err_data), (111, 4, ErrDataLoc::Copied));
        let e = q.readerr(None, API_1_5, 0).unwrap();
        assert_eq!((e.fid, e.context, e.data, e.prov_errno), (1, 2, 3, 4));
        assert_eq!((e.err_data, e.err_data_size), (ErrDataLoc::Provider, 6));
        assert_eq!(q.last_err_data(), &[9; 6]);
        assert_eq!(q.read(&mut buf, 0), Ok((c::FI_SHUTDOWN, 16)));
    }

    use std::sync::atomic::{AtomicUsize, Ordering};
    static MADE: AtomicUsize = AtomicUsize::new(0);
    static FREED: AtomicUsize = AtomicUsize::new(0);
    fn to_c(i: &Info, req: Option<ConnReq>) -> usize {
        assert_eq!(i.caps, 5);
        assert_eq!(req.and_then(|r| r.downcast::<u32>().ok()).map(|b| *b), Some(77));
        MADE.fetch_add(1, Ordering::SeqCst);
        0x1000 + MADE.load(Ordering::SeqCst)
    }
    fn free(p: usize) {
        assert!(p > 0x1000);
        FREED.fetch_add(1, Ordering::SeqCst);
    }

    #[test]
    fn cm_events() {
        let mut q = eq();
        q.set_info_hooks(InfoHooks { to_c, free });
        let info = Info { caps: 5, ..Info::default() };
        assert_eq!(q.write_cm(c::FI_NOTIFY, 1, None, None, b""), Err(EINVAL));
        q.write_cm(c::FI_CONNREQ, 0x50, Some(info.clone()), Some(Box::new(77u32)), b"abc").unwrap();
        q.write_cm(c::FI_CONNECTED, 0x60, None, None, b"").unwrap();
        let mut buf = [0u8; 64];
        assert_eq!(q.read(&mut buf[..18], 0), Err(Error(c::FI_ETOOSMALL)));
        // A peek makes the C info once; the read hands out the same one.
        assert_eq!(q.read(&mut buf, c::FI_PEEK), Ok((c::FI_CONNREQ, 19)));
        let p1 = u64::from_ne_bytes(buf[8..16].try_into().unwrap());
        assert_eq!(q.read(&mut buf, 0), Ok((c::FI_CONNREQ, 19)));
        assert_eq!(u64::from_ne_bytes(buf[8..16].try_into().unwrap()), p1);
        assert_eq!(u64::from_ne_bytes(buf[0..8].try_into().unwrap()), 0x50);
        assert_eq!(&buf[16..19], b"abc");
        assert_eq!(q.read(&mut buf, 0), Ok((c::FI_CONNECTED, 16)));
        assert_eq!(u64::from_ne_bytes(buf[8..16].try_into().unwrap()), 0);
        // An unread request whose info was made is freed with the queue.
        q.write_cm(c::FI_CONNREQ, 0x50, Some(info.clone()), Some(Box::new(77u32)), b"").unwrap();
        q.read(&mut buf, c::FI_PEEK).unwrap();
        q.write_cm(c::FI_CONNREQ, 0x50, Some(info), Some(Box::new(77u32)), b"").unwrap();
        let before = FREED.load(Ordering::SeqCst);
        drop(q);
        assert_eq!(FREED.load(Ordering::SeqCst), before + 1);
    }

    #[test]
    fn sread_across_threads() {
        for w in [c::FI_WAIT_UNSPEC, c::FI_WAIT_FD] {
            let q = Arc::new(Locked::new(Eq::new(8, w).unwrap()));
            let q2 = q.clone();
            let t = std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(30));
                q2.lock().write(c::FI_JOIN_COMPLETE, &eq_entry(1, 2, 3)).unwrap();
            });
            let mut buf = [0u8; 24];
            assert_eq!(q.sread(&mut buf, 5000, 0, &mut || {}), Ok((c::FI_JOIN_COMPLETE, 24)));
            t.join().unwrap();
            assert_eq!(q.sread(&mut buf, 10, 0, &mut || {}), Err(Error(c::FI_EAGAIN)));
        }
    }
}
