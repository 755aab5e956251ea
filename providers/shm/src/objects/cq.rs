//! The shm completion queue: `core::objects::cq::Cq` behind a lock
//! (`Lk`), a spill queue for completions that met a full ring, counts
//! readable without the lock (`CqHints`), and the progress a read drives
//! on the endpoints bound to it, with the handoff of a receive completion
//! straight to the reader (`Handoff`).

#![forbid(unsafe_code)]

use super::ep::{EpShared, Handoff};
use crate::lock::{Lk, Locking};
use rfabric_core::abi::*;
use rfabric_core::error::{Result, EAGAIN, ENOSYS};
use rfabric_core::objects::cq::{Completion, Cq, CqAttr, CqErrInfo, ErrCompletion, ErrDataLoc};
use rfabric_core::provider::CompletionQueue;
use std::any::Any;
use std::collections::VecDeque;
use std::sync::Arc;

/// A completion that did not fit the ring when it was produced.
enum Spill {
    Ok(Completion),
    Err(ErrCompletion),
}

/// The CQ ring plus completions produced while it was full (rare: sends
/// and progress hold back while a bound CQ has no room, but two endpoints
/// sharing a CQ can race for the last slot). Nothing is ever dropped, and
/// order is kept: once something spilled, later completions queue behind it.
pub(super) struct CqState {
    cq: Cq,
    spill: VecDeque<Spill>,
    hints: Arc<CqHints>,
}

/// What the ring holds, as of the last change under its lock, readable
/// without the lock: an empty CQ read and the room check of progress need
/// no lock (a locked instruction also waits for the stores before it, such
/// as a message just written into a peer's ring). A stale value costs at
/// most an early `FI_EAGAIN` or a smaller progress budget; completions that
/// do not fit spill and are never lost.
#[derive(Default)]
pub(super) struct CqHints {
    /// Completions queued (successful, error and spilled).
    pub(super) ready: std::sync::atomic::AtomicUsize,
    /// Free slots for successful completions (0 while anything spilled).
    pub(super) space: std::sync::atomic::AtomicUsize,
    /// Reads that found nothing, for yielding the CPU while they go on.
    pub(super) idle: rfabric_core::objects::wait::IdlePolls,
}

impl CqState {
    /// Publishes `ready` and `space`; every change to the ring ends with it.
    #[inline]
    fn sync(&self) {
        use std::sync::atomic::Ordering::Relaxed;
        self.hints.ready.store(self.cq.len() + self.cq.err_len() + self.spill.len(), Relaxed);
        self.hints.space.store(self.space(), Relaxed);
    }
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
    /// Queues a successful completion (behind anything spilled). Inlined
    /// into its callers, so the completion goes from registers into the
    /// ring instead of through a copy in memory: wide loads of a struct
    /// just written with narrow stores wait for those stores to retire.
    /// The spill path gets its own copy (boxed) so that it does not pin the
    /// completion to a stack slot on the common path.
    #[inline(always)]
    pub(super) fn push(&mut self, c: Completion) {
        if !self.spill.is_empty() || self.cq.write(c).is_err() {
            self.spill_ok(Box::new(c));
        }
        self.sync();
    }
    #[cold]
    #[allow(clippy::boxed_local)] // boxed on purpose: see `push`
    fn spill_ok(&mut self, c: Box<Completion>) {
        self.spill.push_back(Spill::Ok(*c));
    }
    /// Queues an error completion (behind anything spilled).
    fn push_err(&mut self, e: ErrCompletion) {
        if !self.spill.is_empty() || self.cq.write_err(e.clone()).is_err() {
            self.spill.push_back(Spill::Err(e));
        }
        self.sync();
    }
    pub(super) fn space(&self) -> usize {
        if self.spill.is_empty() {
            self.cq.space()
        } else {
            0
        }
    }
    fn read(&mut self, out: &mut [u8], count: usize, src: Option<&mut [u64]>) -> Result<usize> {
        if !self.spill.is_empty() {
            self.refill();
        }
        let r = match src {
            Some(s) => self.cq.readfrom(out, count, s),
            None => self.cq.read(out, count),
        };
        self.sync();
        r
    }
}

pub struct ShmCq {
    /// Lock order: `eps`, then an endpoint's state, then `ring`.
    pub(super) ring: Lk<CqState>,
    /// The ring's counts, read without its lock.
    pub(super) hints: Arc<CqHints>,
    /// The entry format and its size.
    format: u32,
    esize: usize,
    wait: Option<Arc<rfabric_core::objects::wait::WaitObj>>,
    pub(super) eps: Lk<Vec<Arc<EpShared>>>,
}

impl ShmCq {
    /// `locking`: the domain's.
    pub fn new(attr: &CqAttr, locking: Locking) -> Result<ShmCq> {
        let cq = Cq::new(attr)?;
        let (format, esize) = (cq.format(), cq.entry_size());
        let wait = cq.wait_obj().cloned();
        let hints = Arc::new(CqHints::default());
        let st = CqState { cq, spill: VecDeque::new(), hints: hints.clone() };
        st.sync();
        Ok(ShmCq {
            hints,
            ring: Lk::with(st, locking),
            format,
            esize,
            wait,
            eps: Lk::with(Vec::new(), locking),
        })
    }
    /// Progresses the endpoints bound to this CQ. One bound endpoint (the
    /// common case) is progressed directly: no iteration, no reference
    /// count change. `handoff`: the caller reads this CQ and takes the
    /// first receive completion of that endpoint, returned here, instead
    /// of finding it in the ring (see [`Handoff`]).
    #[inline]
    fn progress(&self, handoff: Option<usize>) -> Option<Completion> {
        let eps = self.eps.lock();
        match eps.as_slice() {
            [] => None,
            [one] => {
                let mut st = one.st.lock();
                let Some(count) = handoff.filter(|_| st.rx_cq.as_ref().is_some_and(|c| std::ptr::eq(Arc::as_ptr(c), self))) else {
                    st.progress();
                    return None;
                };
                st.handoff = Handoff::Wanted { only: count == 1 };
                st.progress();
                match std::mem::take(&mut st.handoff) {
                    Handoff::Got { c, .. } => Some(c),
                    _ => None,
                }
            }
            many => {
                for ep in many {
                    ep.st.lock().progress();
                }
                None
            }
        }
    }
    #[inline(always)]
    pub(super) fn write(&self, c: Completion) {
        let mut r = self.ring.lock();
        r.push(c);
    }
    pub(super) fn write_err(&self, e: ErrCompletion) {
        self.ring.lock().push_err(e);
    }
    pub(super) fn attach(&self, ep: &Arc<EpShared>) {
        let mut v = self.eps.lock();
        if !v.iter().any(|e| Arc::ptr_eq(e, ep)) {
            v.push(ep.clone());
        }
    }
    pub(super) fn detach(&self, ep: &Arc<EpShared>) {
        self.eps.lock().retain(|e| !Arc::ptr_eq(e, ep));
    }
    fn try_read(&self, out: &mut [u8], count: usize, src: Option<&mut [u64]>) -> Result<usize> {
        self.ring.lock().read(out, count, src)
    }
}

impl CompletionQueue for ShmCq {
    fn entry_size(&self) -> usize {
        self.esize
    }
    fn read(&self, out: &mut [u8], count: usize, mut src: Option<&mut [u64]>) -> Result<usize> {
        use std::sync::atomic::Ordering::Relaxed;
        // The ring is looked at under its lock only when it holds
        // something (an entry another thread adds meanwhile is seen by the
        // next read).
        if self.hints.ready.load(Relaxed) != 0 {
            match self.try_read(out, count, src.as_deref_mut()) {
                Err(e) if e.0 == FI_EAGAIN => {}
                r => {
                    self.hints.idle.found();
                    return r;
                }
            }
        }
        // A handed-off completion must fit the caller's arrays: checked
        // first, as it leaves the ring behind.
        let fits = count > 0 && count.checked_mul(self.esize).is_some_and(|n| n <= out.len()) && src.as_ref().map_or(true, |s| s.len() >= count);
        if let Some(c) = self.progress(fits.then_some(count)) {
            self.hints.idle.found();
            rfabric_core::objects::cq::encode(self.format, &c, &mut out[..self.esize])?;
            let mut n = 1;
            if let Some(s) = src.as_deref_mut() {
                s[0] = c.src_addr;
            }
            // Completions queued behind it in the same progress call.
            if count > 1 && self.hints.ready.load(Relaxed) != 0 {
                if let Ok(m) = self.try_read(&mut out[self.esize..], count - 1, src.map(|s| &mut s[1..])) {
                    n += m;
                }
            }
            return Ok(n);
        }
        if self.hints.ready.load(Relaxed) == 0 {
            self.hints.idle.empty();
            return Err(EAGAIN);
        }
        self.hints.idle.found();
        self.try_read(out, count, src)
    }
    fn readerr(&self, user_buf: Option<&mut [u8]>, api_version: u32) -> Result<(CqErrInfo, usize)> {
        let mut r = self.ring.lock();
        r.refill();
        let info = r.cq.readerr(user_buf, api_version);
        r.sync();
        let info = info?;
        let p = if info.err_data == ErrDataLoc::Provider { r.cq.last_err_data().as_ptr() as usize } else { 0 };
        Ok((info, p))
    }
    fn sread(&self, out: &mut [u8], count: usize, mut src: Option<&mut [u64]>, timeout: i32) -> Result<usize> {
        let w = self.wait.as_ref().ok_or(ENOSYS)?;
        rfabric_core::objects::wait::block_until(w, rfabric_core::objects::wait::timeout_ms(timeout), EAGAIN, || {
            self.progress(None);
            match self.try_read(out, count, src.as_deref_mut()) {
                Ok(n) => Ok(Some(n)),
                Err(e) if e.0 == FI_EAGAIN => Ok(None),
                Err(e) => Err(e),
            }
        })
    }
    fn signal(&self) -> Result<()> {
        // Only the wait object (itself thread-safe): fi_cq_signal may come
        // from another thread while a reader blocks, under any threading
        // model, so the ring's lock (maybe a no-op one) is not taken.
        self.wait.as_ref().ok_or(ENOSYS)?.signal();
        Ok(())
    }
    fn wait_fd(&self) -> Option<i32> {
        self.wait.as_ref().and_then(|w| w.fd())
    }
    fn trywait(&self) -> Result<()> {
        self.progress(None);
        let mut r = self.ring.lock();
        r.refill();
        r.sync();
        if !r.spill.is_empty() || r.cq.err_len() > 0 {
            return Err(EAGAIN);
        }
        r.cq.trywait()
    }
    fn as_any_arc(self: Arc<Self>) -> Arc<dyn Any + Send + Sync> {
        self
    }
}
