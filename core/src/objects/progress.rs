//! A completion queue and a counter whose reads drive the progress of the
//! endpoints bound to them (`FI_PROGRESS_MANUAL`): the pieces a network
//! provider composes instead of writing its own. The provider's endpoint
//! implements [`Progress`]; its progress writes completions with
//! [`ProgressCq::push`] / [`ProgressCq::push_err`] and counts with the
//! counter's [`Cntr`].
//!
//! Lock order: an endpoint's own lock, then the queue's. A read takes the
//! queue's lock to read, releases it, and progresses the endpoints only
//! when it found nothing, so progress can write into the queue.

#![forbid(unsafe_code)]

use super::cntr::Cntr;
use super::cq::{Completion, Cq, CqAttr, CqErrInfo, ErrCompletion, ErrDataLoc};
use super::wait::{IdlePolls, Locked, WaitObj};
use crate::abi as c;
use crate::error::{Error, Result, EINVAL};
use crate::provider::{CompletionQueue, Counter};
use std::any::Any;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// An endpoint that a queue's reader can drive.
pub trait Progress: Send + Sync {
    /// Runs one round of progress; returns the work it did (0 for none).
    fn progress(&self) -> usize;
}

fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The endpoints bound to a queue or counter.
#[derive(Default)]
pub struct Bound {
    eps: Mutex<Vec<Arc<dyn Progress>>>,
    idle: IdlePolls,
}

impl Bound {
    pub fn attach(&self, ep: Arc<dyn Progress>) {
        let mut v = locked(&self.eps);
        if !v.iter().any(|e| Arc::ptr_eq(e, &ep)) {
            v.push(ep);
        }
    }
    pub fn detach(&self, ep: &Arc<dyn Progress>) {
        locked(&self.eps).retain(|e| !Arc::ptr_eq(e, ep));
    }
    /// Progresses every bound endpoint once; a long run of reads that find
    /// nothing yields the CPU now and then (see [`IdlePolls`]).
    ///
    /// The list stays locked for the round, so a read clones neither the
    /// list nor an endpoint's `Arc`. That is safe because no endpoint's
    /// progress attaches or detaches (they do so from bind and close, never
    /// with their own state locked), so the lock order is always this list,
    /// then an endpoint's state.
    pub fn progress(&self) -> usize {
        let eps = locked(&self.eps);
        let n = eps.iter().map(|e| e.progress()).sum();
        drop(eps);
        self.note(n);
        n
    }
    fn note(&self, n: usize) {
        if n > 0 {
            self.idle.found();
        } else {
            self.idle.empty();
        }
    }
}

enum Spill {
    Ok(Completion),
    Err(ErrCompletion),
}

struct CqState {
    cq: Cq,
    /// Completions produced while the ring was full, in order; never dropped.
    spill: VecDeque<Spill>,
}

impl CqState {
    fn refill(&mut self) {
        while let Some(front) = self.spill.pop_front() {
            let r = match front {
                Spill::Ok(c) => self.cq.write(c).map_err(|_| Spill::Ok(c)),
                Spill::Err(e) => self.cq.write_err(e.clone()).map_err(|_| Spill::Err(e)),
            };
            if let Err(back) = r {
                self.spill.push_front(back);
                break;
            }
        }
    }
}

/// A completion queue driven by its readers.
pub struct ProgressCq {
    state: Locked<CqState>,
    /// False only while the queue holds nothing at all (entries, error
    /// entries, spilled ones); written under `state`'s lock. A read that
    /// finds it false goes to progress without taking the lock first.
    queued: AtomicBool,
    format: u32,
    esize: usize,
    wait: Option<Arc<WaitObj>>,
    pub bound: Bound,
}

impl ProgressCq {
    pub fn new(attr: &CqAttr) -> Result<ProgressCq> {
        let cq = Cq::new(attr)?;
        let (format, esize, wait) = (cq.format(), cq.entry_size(), cq.wait_obj().cloned());
        Ok(ProgressCq { state: Locked::new(CqState { cq, spill: VecDeque::new() }), queued: AtomicBool::new(false), format, esize, wait, bound: Bound::default() })
    }
    pub fn format(&self) -> u32 {
        self.format
    }
    /// Queues a successful completion (behind anything spilled).
    pub fn push(&self, c: Completion) {
        let mut s = self.state.lock();
        if !s.spill.is_empty() || s.cq.write(c).is_err() {
            s.spill.push_back(Spill::Ok(c));
        }
        self.queued.store(true, Ordering::Release);
    }
    /// Queues an error completion (behind anything spilled).
    pub fn push_err(&self, e: ErrCompletion) {
        let mut s = self.state.lock();
        if !s.spill.is_empty() || s.cq.write_err(e.clone()).is_err() {
            s.spill.push_back(Spill::Err(e));
        }
        self.queued.store(true, Ordering::Release);
    }
    fn read_once(&self, out: &mut [u8], count: usize, src: Option<&mut [u64]>) -> Result<usize> {
        let mut s = self.state.lock();
        if !s.spill.is_empty() {
            s.refill();
        }
        let r = match src {
            Some(v) => s.cq.readfrom(out, count, v),
            None => s.cq.read(out, count),
        };
        if s.spill.is_empty() && s.cq.is_empty() {
            self.queued.store(false, Ordering::Relaxed);
        }
        r
    }
}

fn is_again(r: &Result<usize>) -> bool {
    matches!(r, Err(e) if e.0 == c::FI_EAGAIN)
}

impl CompletionQueue for ProgressCq {
    fn entry_size(&self) -> usize {
        self.esize
    }
    fn read(&self, out: &mut [u8], count: usize, mut src: Option<&mut [u64]>) -> Result<usize> {
        if count.checked_mul(self.esize).map_or(true, |need| need > out.len()) || src.as_ref().is_some_and(|s| s.len() < count) {
            return Err(EINVAL);
        }
        if self.queued.load(Ordering::Acquire) {
            let r = self.read_once(out, count, src.as_deref_mut());
            if !is_again(&r) {
                return r;
            }
        }
        if self.bound.progress() == 0 {
            return Err(Error(c::FI_EAGAIN));
        }
        self.read_once(out, count, src)
    }
    fn readerr(&self, user_buf: Option<&mut [u8]>, api_version: u32) -> Result<(CqErrInfo, usize)> {
        let mut s = self.state.lock();
        if !s.spill.is_empty() {
            s.refill();
        }
        let info = s.cq.readerr(user_buf, api_version)?;
        let at = if info.err_data == ErrDataLoc::Provider { s.cq.last_err_data().as_ptr() as usize } else { 0 };
        Ok((info, at))
    }
    fn sread(&self, out: &mut [u8], count: usize, mut src: Option<&mut [u64]>, timeout: i32) -> Result<usize> {
        let w = self.wait.clone().ok_or(crate::error::ENOSYS)?;
        super::wait::block_until(&w, super::wait::timeout_ms(timeout), Error(c::FI_EAGAIN), || {
            let r = self.read(out, count, src.as_deref_mut());
            if is_again(&r) {
                Ok(None)
            } else {
                r.map(Some)
            }
        })
    }
    fn signal(&self) -> Result<()> {
        self.state.lock().cq.signal()
    }
    fn wait_fd(&self) -> Option<i32> {
        self.wait.as_ref().and_then(|w| w.fd())
    }
    fn trywait(&self) -> Result<()> {
        self.bound.progress();
        let mut s = self.state.lock();
        if !s.spill.is_empty() {
            return Err(Error(c::FI_EAGAIN));
        }
        s.cq.trywait()
    }
    fn as_any_arc(self: Arc<Self>) -> Arc<dyn Any + Send + Sync> {
        self
    }
}

/// A completion counter driven by its readers.
pub struct ProgressCntr {
    pub c: Cntr,
    pub bound: Bound,
}

impl ProgressCntr {
    pub fn new(events: u32, wait_obj: u32) -> Result<ProgressCntr> {
        Ok(ProgressCntr { c: Cntr::new(events, wait_obj)?, bound: Bound::default() })
    }
}

impl Counter for ProgressCntr {
    fn read(&self) -> u64 {
        self.bound.progress();
        self.c.read()
    }
    fn readerr(&self) -> u64 {
        self.bound.progress();
        self.c.readerr()
    }
    fn add(&self, v: u64) -> Result<()> {
        self.c.add(v);
        Ok(())
    }
    fn set(&self, v: u64) -> Result<()> {
        self.c.set(v);
        Ok(())
    }
    fn adderr(&self, v: u64) -> Result<()> {
        self.c.adderr(v);
        Ok(())
    }
    fn seterr(&self, v: u64) -> Result<()> {
        self.c.seterr(v);
        Ok(())
    }
    fn wait(&self, threshold: u64, timeout: i32) -> Result<()> {
        self.c.wait(threshold, timeout, &mut || {
            self.bound.progress();
        })
    }
    fn wait_fd(&self) -> Option<i32> {
        self.c.wait_fd()
    }
    fn trywait(&self) -> Result<()> {
        self.bound.progress();
        let w = self.c.wait_obj().ok_or(EINVAL)?;
        w.drain();
        w.arm();
        Ok(())
    }
    fn as_any_arc(self: Arc<Self>) -> Arc<dyn Any + Send + Sync> {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// An endpoint whose progress produces one completion per call, up to `left`.
    struct Producer {
        cq: Arc<ProgressCq>,
        left: AtomicUsize,
    }
    impl Progress for Producer {
        fn progress(&self) -> usize {
            if self.left.load(Ordering::Relaxed) == 0 {
                return 0;
            }
            let n = self.left.fetch_sub(1, Ordering::Relaxed);
            self.cq.push(Completion { op_context: n, ..Completion::default() });
            1
        }
    }

    #[test]
    fn a_read_that_finds_nothing_drives_the_bound_endpoints() {
        let cq = Arc::new(ProgressCq::new(&CqAttr { size: 2, format: c::FI_CQ_FORMAT_CONTEXT, wait_obj: c::FI_WAIT_NONE }).unwrap());
        let p: Arc<dyn Progress> = Arc::new(Producer { cq: cq.clone(), left: AtomicUsize::new(3) });
        let mut out = [0u8; 8];
        assert!(is_again(&cq.read(&mut out, 1, None)));
        cq.bound.attach(p.clone());
        cq.bound.attach(p.clone());
        let mut seen = Vec::new();
        for _ in 0..5 {
            if cq.read(&mut out, 1, None) == Ok(1) {
                seen.push(usize::from_ne_bytes(out));
            }
        }
        assert_eq!(seen, [3, 2, 1], "one progress per empty read, attached once");
        cq.bound.detach(&p);
        assert!(is_again(&cq.read(&mut out, 1, None)));
    }

    #[test]
    fn a_read_skips_the_lock_only_while_nothing_at_all_is_queued() {
        // Reads that find the queue empty go straight to progress; every
        // kind of entry must end that.
        let cq = ProgressCq::new(&CqAttr { size: 2, format: c::FI_CQ_FORMAT_CONTEXT, wait_obj: c::FI_WAIT_NONE }).unwrap();
        let mut out = [0u8; 8];
        assert!(is_again(&cq.read(&mut out, 1, None)));
        cq.push_err(ErrCompletion { base: Completion { op_context: 9, ..Completion::default() }, err: c::FI_EIO, ..ErrCompletion::default() });
        assert_eq!(cq.read(&mut out, 1, None), Err(Error(c::FI_EAVAIL)), "an error entry alone");
        cq.readerr(None, crate::abi::fi_version(1, 18)).unwrap();
        assert!(is_again(&cq.read(&mut out, 1, None)));
        cq.push(Completion { op_context: 7, ..Completion::default() });
        assert_eq!(cq.read(&mut out, 1, None), Ok(1));
        assert_eq!(usize::from_ne_bytes(out), 7);
        assert!(is_again(&cq.read(&mut out, 1, None)));
        assert_eq!(cq.read(&mut out, 2, None), Err(EINVAL), "two entries do not fit 8 bytes");
    }

    #[test]
    fn completions_beyond_the_ring_spill_in_order() {
        let cq = ProgressCq::new(&CqAttr { size: 2, format: c::FI_CQ_FORMAT_CONTEXT, wait_obj: c::FI_WAIT_NONE }).unwrap();
        for i in 1..=5 {
            cq.push(Completion { op_context: i, ..Completion::default() });
        }
        cq.push_err(ErrCompletion { base: Completion { op_context: 6, ..Completion::default() }, err: c::FI_EIO, ..ErrCompletion::default() });
        let mut out = [0u8; 16];
        let mut got = Vec::new();
        while let Ok(n) = cq.read(&mut out, 2, None) {
            for k in 0..n {
                got.push(usize::from_ne_bytes(out[k * 8..k * 8 + 8].try_into().unwrap()));
            }
        }
        assert_eq!(got, [1, 2, 3, 4, 5]);
        let (e, _) = cq.readerr(None, crate::abi::fi_version(1, 18)).unwrap();
        assert_eq!((e.base.op_context, e.err), (6, c::FI_EIO));
    }
}
