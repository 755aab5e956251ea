//! Completion queue: a fixed-capacity ring of successful completions plus a
//! bounded queue of error completions, formatted on read into the C layouts of
//! `FI_CQ_FORMAT_CONTEXT` / `MSG` / `DATA` / `TAGGED` (8 / 24 / 40 / 48 bytes).
//!
//! Ordering: an error keeps its place among the successful completions. Each
//! error remembers how many successful completions had been written before it;
//! `read` returns successful entries up to that point and then `-FI_EAVAIL`
//! until the application drains the error with `readerr`.
//!
//! Threading: [`Cq`] is single-owner (`&mut self`); under `FI_THREAD_DOMAIN`
//! and `FI_THREAD_COMPLETION` a provider calls it without any lock. For
//! `FI_THREAD_SAFE` wrap it in [`Locked`] and use [`Locked::<Cq>::sread`].
//!
//! Full queue: `write` returns `-FI_EAGAIN` and stores nothing, so the
//! producer can hold the completion back (or reserve with [`Cq::space`]
//! before starting an operation) instead of overrunning the CQ.

use super::c;
use super::wait::{block_until, timeout_ms, Locked, WaitObj};
use crate::error::{Error, Result, EINVAL, ENOMEM, ENOSYS};
use std::collections::VecDeque;
use std::sync::Arc;

/// Entries a CQ holds when `fi_cq_attr.size` is 0.
pub const DEFAULT_CQ_SIZE: usize = 1024;
/// Largest accepted `fi_cq_attr.size`.
pub const MAX_CQ_SIZE: usize = 1 << 24;

/// One completion, in the widest form (`fi_cq_tagged_entry` plus source).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Completion {
    pub op_context: usize,
    pub flags: u64,
    pub len: usize,
    pub buf: usize,
    pub data: u64,
    pub tag: u64,
    /// Source fi_addr for `fi_cq_readfrom` (`FI_ADDR_NOTAVAIL` if unknown).
    pub src_addr: u64,
}

/// An error completion (`fi_cq_err_entry` without the pointers).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ErrCompletion {
    pub base: Completion,
    /// Positive `FI_E*` code.
    pub err: i32,
    pub prov_errno: i32,
    /// Bytes that did not fit (truncation).
    pub olen: usize,
    pub err_data: Vec<u8>,
}

/// What `fi_cq_open` passes that the queue itself cares about.
#[derive(Clone, Copy, Debug)]
pub struct CqAttr {
    pub size: usize,
    pub format: u32,
    pub wait_obj: u32,
}

/// The fields of `fi_cq_err_entry` returned by [`Cq::readerr`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CqErrInfo {
    pub base: Completion,
    pub olen: usize,
    pub err: i32,
    pub prov_errno: i32,
    /// Value for the caller's `err_data_size` on output.
    pub err_data_size: usize,
    /// Where `err_data` must point on output.
    pub err_data: ErrDataLoc,
}

/// Where the error data went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrDataLoc {
    /// No error data: leave the caller's pointer as it is.
    None,
    /// Copied into the caller's buffer (`err_data` unchanged).
    Copied,
    /// Kept by the CQ: point `err_data` at [`Cq::last_err_data`], valid until
    /// the next `readerr` (the compatibility rule of fi_cq(3) for callers that
    /// pass `err_data_size == 0` or opened the fabric with API < 1.5).
    Provider,
}

/// `FI_VERSION(1, 5)`: from here the caller's err_data buffer is honoured.
pub const API_1_5: u32 = (1 << 16) | 5;

/// Size in bytes of one entry of `format` (`fi_cq_*_entry`).
pub fn entry_size(format: u32) -> Result<usize> {
    Ok(match format {
        c::FI_CQ_FORMAT_CONTEXT => 8,
        c::FI_CQ_FORMAT_MSG => 24,
        c::FI_CQ_FORMAT_DATA => 40,
        c::FI_CQ_FORMAT_TAGGED => 48,
        _ => return Err(EINVAL),
    })
}

/// Size of `struct fi_cq_err_entry`.
pub const ERR_ENTRY_SIZE: usize = 88;

#[inline]
fn put(out: &mut [u8], off: usize, v: u64) {
    out[off..off + 8].copy_from_slice(&v.to_ne_bytes());
}

/// Writes `c` in the C layout of `format` into `out` (at least
/// `entry_size(format)` bytes).
pub fn encode(format: u32, c: &Completion, out: &mut [u8]) -> Result<()> {
    let n = entry_size(format)?;
    if out.len() < n {
        return Err(EINVAL);
    }
    put(out, 0, c.op_context as u64);
    if n >= 24 {
        put(out, 8, c.flags);
        put(out, 16, c.len as u64);
    }
    if n >= 40 {
        put(out, 24, c.buf as u64);
        put(out, 32, c.data);
    }
    if n >= 48 {
        put(out, 40, c.tag);
    }
    Ok(())
}

/// Writes `e` as a `struct fi_cq_err_entry` (88 bytes), with `err_data_ptr`
/// as the `err_data` pointer value.
pub fn encode_err(e: &CqErrInfo, err_data_ptr: usize, out: &mut [u8]) -> Result<()> {
    if out.len() < ERR_ENTRY_SIZE {
        return Err(EINVAL);
    }
    encode(c::FI_CQ_FORMAT_TAGGED, &e.base, out)?;
    put(out, 48, e.olen as u64);
    out[56..60].copy_from_slice(&e.err.to_ne_bytes());
    out[60..64].copy_from_slice(&e.prov_errno.to_ne_bytes());
    put(out, 64, err_data_ptr as u64);
    put(out, 72, e.err_data_size as u64);
    put(out, 80, e.base.src_addr);
    Ok(())
}

struct PendingErr {
    /// Successful completions written before this error.
    after: u64,
    entry: ErrCompletion,
}

pub struct Cq {
    format: u32,
    esize: usize,
    ring: Box<[Completion]>,
    head: usize,
    len: usize,
    /// Successful completions written / read since creation.
    written: u64,
    consumed: u64,
    errs: VecDeque<PendingErr>,
    last_err_data: Vec<u8>,
    wait: Option<Arc<WaitObj>>,
}

impl Cq {
    pub fn new(attr: &CqAttr) -> Result<Cq> {
        let format = if attr.format == c::FI_CQ_FORMAT_UNSPEC { c::FI_CQ_FORMAT_CONTEXT } else { attr.format };
        let esize = entry_size(format)?;
        let cap = if attr.size == 0 { DEFAULT_CQ_SIZE } else { attr.size };
        if cap > MAX_CQ_SIZE {
            return Err(EINVAL);
        }
        let mut v = Vec::new();
        v.try_reserve_exact(cap).map_err(|_| ENOMEM)?;
        v.resize(cap, Completion::default());
        let mut errs = VecDeque::new();
        errs.try_reserve(cap.min(64)).map_err(|_| ENOMEM)?;
        Ok(Cq {
            format,
            esize,
            ring: v.into_boxed_slice(),
            head: 0,
            len: 0,
            written: 0,
            consumed: 0,
            errs,
            last_err_data: Vec::new(),
            wait: WaitObj::new(attr.wait_obj)?.map(Arc::new),
        })
    }

    pub fn format(&self) -> u32 {
        self.format
    }
    /// Bytes of one entry in this CQ's format.
    pub fn entry_size(&self) -> usize {
        self.esize
    }
    pub fn capacity(&self) -> usize {
        self.ring.len()
    }
    /// Free slots for successful completions.
    pub fn space(&self) -> usize {
        self.ring.len() - self.len
    }
    /// Successful completions queued.
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0 && self.errs.is_empty()
    }
    /// Error completions queued.
    pub fn err_len(&self) -> usize {
        self.errs.len()
    }
    /// The wait object (shared so another thread can block or signal).
    pub fn wait_obj(&self) -> Option<&Arc<WaitObj>> {
        self.wait.as_ref()
    }
    /// The fd for `FI_WAIT_FD` CQs.
    pub fn wait_fd(&self) -> Option<i32> {
        self.wait.as_ref().and_then(|w| w.fd())
    }

    /// Queues a successful completion. `-FI_EAGAIN` when full (nothing stored).
    #[inline]
    pub fn write(&mut self, comp: Completion) -> Result<()> {
        if self.len == self.ring.len() {
            return Err(Error(c::FI_EAGAIN));
        }
        let mut idx = self.head + self.len;
        if idx >= self.ring.len() {
            idx -= self.ring.len();
        }
        self.ring[idx] = comp;
        self.len += 1;
        self.written += 1;
        if let Some(w) = &self.wait {
            w.notify();
        }
        Ok(())
    }

    /// Queues an error completion. `err` must be a positive `FI_E*` code.
    /// `-FI_EAGAIN` when the error queue is full.
    pub fn write_err(&mut self, e: ErrCompletion) -> Result<()> {
        if e.err <= 0 {
            return Err(EINVAL);
        }
        if self.errs.len() >= self.ring.len() {
            return Err(Error(c::FI_EAGAIN));
        }
        self.errs.push_back(PendingErr { after: self.written, entry: e });
        if let Some(w) = &self.wait {
            w.notify();
        }
        Ok(())
    }

    /// How many successful entries may be read before the next error.
    fn readable(&self) -> usize {
        match self.errs.front() {
            Some(e) => (e.after.saturating_sub(self.consumed) as usize).min(self.len),
            None => self.len,
        }
    }

    /// `fi_cq_read`: formats up to `count` entries into `out` (which must hold
    /// `count` entries of this CQ's format). Returns how many, `-FI_EAGAIN`
    /// when empty, `-FI_EAVAIL` when the next completion is an error.
    pub fn read(&mut self, out: &mut [u8], count: usize) -> Result<usize> {
        self.read_inner(out, count, None)
    }

    /// `fi_cq_readfrom`: as `read`, also storing each entry's source address
    /// into `src` (which must hold `count` values).
    pub fn readfrom(&mut self, out: &mut [u8], count: usize, src: &mut [u64]) -> Result<usize> {
        if src.len() < count {
            return Err(EINVAL);
        }
        self.read_inner(out, count, Some(src))
    }

    fn read_inner(&mut self, out: &mut [u8], count: usize, mut src: Option<&mut [u64]>) -> Result<usize> {
        if count.checked_mul(self.esize).map_or(true, |need| need > out.len()) {
            return Err(EINVAL);
        }
        let avail = self.readable();
        if avail == 0 {
            return Err(Error(if self.errs.is_empty() { c::FI_EAGAIN } else { c::FI_EAVAIL }));
        }
        let n = count.min(avail);
        for i in 0..n {
            let comp = &self.ring[self.head];
            encode(self.format, comp, &mut out[i * self.esize..(i + 1) * self.esize])?;
            if let Some(s) = src.as_deref_mut() {
                s[i] = comp.src_addr;
            }
            self.head += 1;
            if self.head == self.ring.len() {
                self.head = 0;
            }
        }
        self.len -= n;
        self.consumed += n as u64;
        Ok(n)
    }

    /// `fi_cq_readerr`: takes the oldest error entry. `user_buf` is the
    /// caller's `err_data` buffer (its length is the input `err_data_size`;
    /// `None` for a NULL pointer), `api_version` the version the fabric was
    /// opened with. `-FI_EAGAIN` when no error is queued.
    pub fn readerr(&mut self, user_buf: Option<&mut [u8]>, api_version: u32) -> Result<CqErrInfo> {
        let e = self.errs.pop_front().ok_or(Error(c::FI_EAGAIN))?.entry;
        let (size, loc) = if e.err_data.is_empty() {
            (0, ErrDataLoc::None)
        } else {
            match user_buf {
                Some(buf) if !buf.is_empty() && api_version >= API_1_5 => {
                    let n = buf.len().min(e.err_data.len());
                    buf[..n].copy_from_slice(&e.err_data[..n]);
                    (n, ErrDataLoc::Copied)
                }
                _ => (e.err_data.len(), ErrDataLoc::Provider),
            }
        };
        let info = CqErrInfo {
            base: e.base,
            olen: e.olen,
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

    /// Error data of the last `readerr` that returned [`ErrDataLoc::Provider`].
    pub fn last_err_data(&self) -> &[u8] {
        &self.last_err_data
    }

    /// `fi_trywait` for this CQ: `-FI_EAGAIN` if entries are queued, otherwise
    /// arms the wait object so that the next completion makes the fd readable.
    pub fn trywait(&mut self) -> Result<()> {
        let w = self.wait.as_ref().ok_or(EINVAL)?;
        if !self.is_empty() {
            return Err(Error(c::FI_EAGAIN));
        }
        w.drain();
        w.arm();
        Ok(())
    }

    /// `fi_cq_signal`: wakes a thread blocked in `sread`.
    pub fn signal(&self) -> Result<()> {
        self.wait.as_ref().ok_or(ENOSYS)?.signal();
        Ok(())
    }

    /// `fi_cq_sread` / `fi_cq_sreadfrom` for a single-owner CQ. `progress` is
    /// called with the CQ before every attempt (so the provider can push new
    /// completions); `timeout` in ms, negative = infinite. `-FI_EAGAIN` on
    /// timeout or `signal`, `-FI_EAVAIL` when an error is next.
    pub fn sread(
        &mut self,
        out: &mut [u8],
        count: usize,
        mut src: Option<&mut [u64]>,
        timeout: i32,
        progress: &mut dyn FnMut(&mut Cq),
    ) -> Result<usize> {
        let w = self.wait.clone().ok_or(ENOSYS)?;
        block_until(&w, timeout_ms(timeout), Error(c::FI_EAGAIN), || {
            progress(self);
            attempt(self.read_inner(out, count, src.as_deref_mut()))
        })
    }
}

fn attempt(r: Result<usize>) -> Result<Option<usize>> {
    match r {
        Ok(n) => Ok(Some(n)),
        Err(e) if e.0 == c::FI_EAGAIN => Ok(None),
        Err(e) => Err(e),
    }
}

impl Locked<Cq> {
    /// `fi_cq_sread` for a shared CQ: the lock is held only while reading, so
    /// other threads can write completions (and wake us) meanwhile.
    pub fn sread(
        &self,
        out: &mut [u8],
        count: usize,
        mut src: Option<&mut [u64]>,
        timeout: i32,
        progress: &mut dyn FnMut(),
    ) -> Result<usize> {
        let w = self.lock().wait.clone().ok_or(ENOSYS)?;
        block_until(&w, timeout_ms(timeout), Error(c::FI_EAGAIN), || {
            progress();
            attempt(self.lock().read_inner(out, count, src.as_deref_mut()))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn cq(size: usize, format: u32) -> Cq {
        Cq::new(&CqAttr { size, format, wait_obj: c::FI_WAIT_UNSPEC }).unwrap()
    }
    fn comp(i: u64) -> Completion {
        Completion {
            op_context: 0x1000 + i as usize,
            flags: c::FI_RECV,
            len: 10 + i as usize,
            buf: 0x2000 + i as usize,
            data: 0x30 + i,
            tag: 0x40 + i,
            src_addr: i,
        }
    }
    fn word(b: &[u8], off: usize) -> u64 {
        u64::from_ne_bytes(b[off..off + 8].try_into().unwrap())
    }
    fn eagain() -> Error {
        Error(c::FI_EAGAIN)
    }
    fn eavail() -> Error {
        Error(c::FI_EAVAIL)
    }

    #[test]
    fn bad_attrs() {
        let a = |size, format, wait_obj| Cq::new(&CqAttr { size, format, wait_obj }).err();
        assert_eq!(a(4, 9, c::FI_WAIT_NONE), Some(EINVAL));
        assert_eq!(a(MAX_CQ_SIZE + 1, 1, c::FI_WAIT_NONE), Some(EINVAL));
        assert_eq!(a(4, 1, 77), Some(EINVAL));
        let d = Cq::new(&CqAttr { size: 0, format: 0, wait_obj: 0 }).unwrap();
        assert_eq!(d.capacity(), DEFAULT_CQ_SIZE);
        assert_eq!(d.format(), c::FI_CQ_FORMAT_CONTEXT);
        assert_eq!(d.entry_size(), 8);
    }

    #[test]
    fn entry_sizes_match_layout_table() {
        let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/abi/layout.tsv")).unwrap();
        let size_of = |ty: &str| -> usize {
            text.lines()
                .find(|l| l.starts_with(&format!("struct {ty}\t(sizeof)")))
                .and_then(|l| l.split('\t').nth(3))
                .unwrap()
                .parse()
                .unwrap()
        };
        assert_eq!(entry_size(c::FI_CQ_FORMAT_CONTEXT).unwrap(), size_of("fi_cq_entry"));
        assert_eq!(entry_size(c::FI_CQ_FORMAT_MSG).unwrap(), size_of("fi_cq_msg_entry"));
        assert_eq!(entry_size(c::FI_CQ_FORMAT_DATA).unwrap(), size_of("fi_cq_data_entry"));
        assert_eq!(entry_size(c::FI_CQ_FORMAT_TAGGED).unwrap(), size_of("fi_cq_tagged_entry"));
        assert_eq!(ERR_ENTRY_SIZE, size_of("fi_cq_err_entry"));
        assert!(entry_size(0).is_err() && entry_size(5).is_err());
    }

    #[test]
    fn formats() {
        for (fmt, size) in [(1, 8), (2, 24), (3, 40), (4, 48)] {
            let mut q = cq(4, fmt);
            q.write(comp(1)).unwrap();
            let mut out = vec![0xeeu8; size + 8];
            assert_eq!(q.read(&mut out, 1), Ok(1));
            assert_eq!(word(&out, 0), 0x1001);
            if size >= 24 {
                assert_eq!(word(&out, 8), c::FI_RECV);
                assert_eq!(word(&out, 16), 11);
            }
            if size >= 40 {
                assert_eq!(word(&out, 24), 0x2001);
                assert_eq!(word(&out, 32), 0x31);
            }
            if size >= 48 {
                assert_eq!(word(&out, 40), 0x41);
            }
            // Nothing written past the entry.
            assert!(out[size..].iter().all(|&b| b == 0xee), "format {fmt}");
        }
    }

    #[test]
    fn empty_count_zero_and_short_buffers() {
        let mut q = cq(4, c::FI_CQ_FORMAT_MSG);
        let mut out = [0u8; 48];
        assert_eq!(q.read(&mut out, 2), Err(eagain()));
        q.write(comp(0)).unwrap();
        assert_eq!(q.read(&mut out, 0), Ok(0));
        assert_eq!(q.read(&mut out, 3), Err(EINVAL)); // 72 > 48 bytes
        assert_eq!(q.read(&mut out[..23], 1), Err(EINVAL));
        assert_eq!(q.read(&mut out, usize::MAX), Err(EINVAL)); // overflow
        let mut src = [0u64; 1];
        assert_eq!(q.readfrom(&mut out, 2, &mut src), Err(EINVAL));
        assert_eq!(q.len(), 1);
    }

    #[test]
    fn ring_wraps_and_full_backpressure() {
        let mut q = cq(3, c::FI_CQ_FORMAT_CONTEXT);
        let mut out = [0u8; 8 * 3];
        let mut next = 0u64;
        let mut expect = 0u64;
        for _round in 0..5 {
            while q.space() > 0 {
                q.write(comp(next)).unwrap();
                next += 1;
            }
            assert_eq!(q.write(comp(999)), Err(eagain()));
            let n = q.read(&mut out, 2).unwrap();
            assert_eq!(n, 2);
            for i in 0..n {
                assert_eq!(word(&out, i * 8), 0x1000 + expect);
                expect += 1;
            }
        }
        let n = q.read(&mut out, 3).unwrap();
        assert_eq!(n, 1);
        assert_eq!(word(&out, 0), 0x1000 + expect);
        assert_eq!(q.read(&mut out, 3), Err(eagain()));
    }

    #[test]
    fn readfrom_reports_sources() {
        let mut q = cq(8, c::FI_CQ_FORMAT_TAGGED);
        for i in 0..3 {
            q.write(comp(i + 5)).unwrap();
        }
        let mut out = [0u8; 48 * 4];
        let mut src = [0u64; 4];
        assert_eq!(q.readfrom(&mut out, 4, &mut src), Ok(3));
        assert_eq!(&src[..3], &[5, 6, 7]);
        assert_eq!(word(&out, 48 * 2 + 40), 0x47);
    }

    #[test]
    fn errors_keep_their_place() {
        let mut q = cq(8, c::FI_CQ_FORMAT_CONTEXT);
        let mut out = [0u8; 64];
        q.write(comp(0)).unwrap();
        q.write(comp(1)).unwrap();
        q.write_err(ErrCompletion { base: comp(2), err: c::FI_ECANCELED, ..Default::default() }).unwrap();
        q.write(comp(3)).unwrap();
        assert_eq!(q.read(&mut out, 8), Ok(2));
        assert_eq!(q.read(&mut out, 8), Err(eavail()));
        assert_eq!(q.read(&mut out, 8), Err(eavail()));
        let e = q.readerr(None, API_1_5).unwrap();
        assert_eq!(e.err, c::FI_ECANCELED);
        assert_eq!(e.base.op_context, 0x1002);
        assert_eq!(e.err_data, ErrDataLoc::None);
        assert_eq!(q.readerr(None, API_1_5).err(), Some(eagain()));
        assert_eq!(q.read(&mut out, 8), Ok(1));
        assert_eq!(word(&out, 0), 0x1003);
        assert!(q.is_empty());
        // Error first, then nothing else.
        q.write_err(ErrCompletion { base: comp(4), err: 5, ..Default::default() }).unwrap();
        assert_eq!(q.read(&mut out, 1), Err(eavail()));
        assert!(!q.is_empty());
        assert_eq!(q.write_err(ErrCompletion { err: 0, ..Default::default() }), Err(EINVAL));
        assert_eq!(q.write_err(ErrCompletion { err: -3, ..Default::default() }), Err(EINVAL));
    }

    #[test]
    fn error_queue_bounded() {
        let mut q = cq(2, c::FI_CQ_FORMAT_CONTEXT);
        let e = ErrCompletion { err: c::FI_ECANCELED, ..Default::default() };
        q.write_err(e.clone()).unwrap();
        q.write_err(e.clone()).unwrap();
        assert_eq!(q.write_err(e), Err(eagain()));
        assert_eq!(q.err_len(), 2);
    }

    #[test]
    fn readerr_err_data_rules() {
        let mut q = cq(8, c::FI_CQ_FORMAT_CONTEXT);
        let data: Vec<u8> = (1..=10).collect();
        let mk = || ErrCompletion {
            base: comp(0),
            err: c::FI_ETOOSMALL,
            prov_errno: -7,
            olen: 99,
            err_data: data.clone(),
        };
        for _ in 0..4 {
            q.write_err(mk()).unwrap();
        }
        // Caller buffer smaller than the data: truncated copy.
        let mut small = [0u8; 4];
        let e = q.readerr(Some(&mut small), API_1_5).unwrap();
        assert_eq!((e.err_data, e.err_data_size), (ErrDataLoc::Copied, 4));
        assert_eq!(small, [1, 2, 3, 4]);
        assert_eq!((e.olen, e.prov_errno), (99, -7));
        // Larger buffer: whole data, size is what was copied.
        let mut big = [0u8; 32];
        let e = q.readerr(Some(&mut big), API_1_5).unwrap();
        assert_eq!(e.err_data_size, 10);
        assert_eq!(&big[..10], &data[..]);
        assert!(big[10..].iter().all(|&b| b == 0));
        // err_data_size 0: provider buffer.
        let e = q.readerr(Some(&mut []), API_1_5).unwrap();
        assert_eq!((e.err_data, e.err_data_size), (ErrDataLoc::Provider, 10));
        assert_eq!(q.last_err_data(), &data[..]);
        // Old API: provider buffer even if the caller passed one.
        let mut buf = [0u8; 32];
        let e = q.readerr(Some(&mut buf), (1 << 16) | 4).unwrap();
        assert_eq!(e.err_data, ErrDataLoc::Provider);
        assert!(buf.iter().all(|&b| b == 0));

        let mut raw = [0u8; ERR_ENTRY_SIZE];
        encode_err(&e, 0xabcd, &mut raw).unwrap();
        assert_eq!(word(&raw, 48), 99);
        assert_eq!(i32::from_ne_bytes(raw[56..60].try_into().unwrap()), c::FI_ETOOSMALL);
        assert_eq!(i32::from_ne_bytes(raw[60..64].try_into().unwrap()), -7);
        assert_eq!(word(&raw, 64), 0xabcd);
        assert_eq!(word(&raw, 72), 10);
        assert_eq!(word(&raw, 80), 0);
        assert_eq!(encode_err(&e, 0, &mut raw[..87]), Err(EINVAL));
    }

    #[test]
    fn sread_single_owner_progress_produces() {
        let mut q = cq(4, c::FI_CQ_FORMAT_CONTEXT);
        let mut out = [0u8; 8];
        let mut calls = 0;
        let n = q
            .sread(&mut out, 1, None, -1, &mut |cq: &mut Cq| {
                calls += 1;
                if calls == 100 {
                    cq.write(comp(9)).unwrap();
                }
            })
            .unwrap();
        assert_eq!(n, 1);
        assert_eq!(word(&out, 0), 0x1009);
        assert!(calls >= 100);
        // Timeout with nothing produced.
        let t0 = Instant::now();
        assert_eq!(q.sread(&mut out, 1, None, 30, &mut |_: &mut Cq| {}), Err(eagain()));
        assert!(t0.elapsed() >= Duration::from_millis(30));
        // No wait object.
        let mut nw = Cq::new(&CqAttr { size: 2, format: 1, wait_obj: c::FI_WAIT_NONE }).unwrap();
        assert_eq!(nw.sread(&mut out, 1, None, 0, &mut |_: &mut Cq| {}), Err(ENOSYS));
        assert_eq!(nw.signal(), Err(ENOSYS));
    }

    #[test]
    fn sread_threads_write_and_signal() {
        for wait_obj in [c::FI_WAIT_UNSPEC, c::FI_WAIT_FD] {
            let q = Arc::new(Locked::new(Cq::new(&CqAttr { size: 4, format: 2, wait_obj }).unwrap()));
            let q2 = q.clone();
            let t = std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(40));
                q2.lock().write(comp(3)).unwrap();
                std::thread::sleep(Duration::from_millis(40));
                q2.lock().signal().unwrap();
            });
            let mut out = [0u8; 24];
            let mut src = [0u64; 1];
            assert_eq!(q.sread(&mut out, 1, Some(&mut src), -1, &mut || {}), Ok(1));
            assert_eq!((word(&out, 0), src[0]), (0x1003, 3));
            // Infinite wait ended by signal with nothing to read.
            assert_eq!(q.sread(&mut out, 1, None, -1, &mut || {}), Err(eagain()));
            t.join().unwrap();
        }
    }

    #[test]
    fn wait_fd_readable_after_trywait() {
        let mut q = Cq::new(&CqAttr { size: 4, format: 1, wait_obj: c::FI_WAIT_FD }).unwrap();
        let fd = q.wait_fd().unwrap();
        let poll = |ms| {
            let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
            // SAFETY: one valid pollfd.
            unsafe { libc::poll(&mut p, 1, ms) }
        };
        assert_eq!(q.trywait(), Ok(()));
        assert_eq!(poll(0), 0);
        q.write(comp(1)).unwrap();
        assert_eq!(poll(0), 1);
        assert_eq!(q.trywait(), Err(eagain()));
        let mut out = [0u8; 8];
        q.read(&mut out, 1).unwrap();
        assert_eq!(q.trywait(), Ok(()));
        assert_eq!(poll(0), 0);
        assert!(cq(1, 1).wait_fd().is_none());
    }
}
