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
use crate::error::{Error, Result, EINVAL, ENOSYS};
use std::collections::VecDeque;
use std::sync::Arc;

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

enum Entry {
    Event { event: u32, payload: Vec<u8> },
    Err(EqErr),
}

pub struct Eq {
    q: VecDeque<Entry>,
    cap: usize,
    last_err_data: Vec<u8>,
    wait: Option<Arc<WaitObj>>,
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
        })
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
        let (event, n) = match self.q.front() {
            None => return Err(Error(c::FI_EAGAIN)),
            Some(Entry::Err(_)) => return Err(Error(c::FI_EAVAIL)),
            Some(Entry::Event { event, payload }) => {
                if buf.len() < payload.len() {
                    return Err(Error(c::FI_ETOOSMALL));
                }
                buf[..payload.len()].copy_from_slice(payload);
                (*event, payload.len())
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

fn attempt(r: Result<(u32, usize)>) -> Result<Option<(u32, usize)>> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(e) if e.0 == c::FI_EAGAIN => Ok(None),
        Err(e) => Err(e),
    }
}

impl Locked<Eq> {
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
