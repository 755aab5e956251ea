//! The lock of the shm objects' per-message state (endpoint state, CQ
//! ring, a CQ's endpoint list), chosen once when the object is opened from
//! the domain's threading model:
//!
//! - `FI_THREAD_SAFE`, `FI_THREAD_FID`, `FI_THREAD_ENDPOINT`, `FI_THREAD_UNSPEC`
//!   and any domain with `FI_PROGRESS_AUTO` or `FI_XPU`: a real mutex. (Under
//!   `FI_THREAD_ENDPOINT` the application serializes each endpoint, but two
//!   endpoints sharing a CQ may be driven by two threads, and a CQ read
//!   progresses the endpoints bound to it; the progress thread of
//!   `FI_PROGRESS_AUTO` and the fi_xpu proxy thread run beside the
//!   application.)
//! - `FI_THREAD_DOMAIN` and `FI_THREAD_COMPLETION` with manual progress: no
//!   lock at all. The application serializes every call on the domain
//!   (DOMAIN), or on each set of endpoints, CQs and counters bound together
//!   (COMPLETION); every access to this state happens inside such a call on
//!   one of the objects bound together, so accesses never overlap.
//!
//! [`Lk::lock`] returns a guard in both cases, so the code that uses the
//! state is the same; lock order rules are those of the real mutex.

use std::cell::UnsafeCell;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::sync::{Mutex, MutexGuard};

/// Whether objects of a domain need real locks (see the module comment).
/// `helper_threads`: the provider itself runs threads on the domain's
/// objects (`FI_PROGRESS_AUTO`, fi_xpu proxies).
pub fn needs_lock(threading: u32, helper_threads: bool) -> bool {
    use rfabric_core::abi::{FI_THREAD_COMPLETION, FI_THREAD_DOMAIN};
    helper_threads || !(threading == FI_THREAD_DOMAIN || threading == FI_THREAD_COMPLETION)
}

pub struct Lk<T> {
    /// `None`: the application serializes all access (no-op lock).
    mutex: Option<Mutex<()>>,
    cell: UnsafeCell<T>,
    /// Debug builds check that the no-op lock is never entered twice at once
    /// (nested or from two threads), which would break the invariant.
    #[cfg(debug_assertions)]
    busy: std::sync::atomic::AtomicBool,
}

// SAFETY: the value moves between threads only with the Lk (T: Send).
unsafe impl<T: Send> Send for Lk<T> {}
// SAFETY: with a mutex, every access to the cell goes through a guard that
// holds it. Without one, the domain's threading model (FI_THREAD_DOMAIN or
// FI_THREAD_COMPLETION, manual progress: see `needs_lock`) makes the
// application serialize every call that reaches this object, so no two
// guards ever exist at the same time.
unsafe impl<T: Send> Sync for Lk<T> {}

impl<T> Lk<T> {
    /// `real`: from [`needs_lock`].
    pub fn new(v: T, real: bool) -> Lk<T> {
        Lk {
            mutex: real.then(|| Mutex::new(())),
            cell: UnsafeCell::new(v),
            #[cfg(debug_assertions)]
            busy: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Whether this is a real mutex.
    pub fn is_real(&self) -> bool {
        self.mutex.is_some()
    }

    #[inline]
    pub fn lock(&self) -> LkGuard<'_, T> {
        let held = self.mutex.as_ref().map(|m| m.lock().unwrap_or_else(|e| e.into_inner()));
        #[cfg(debug_assertions)]
        if held.is_none() {
            let was = self.busy.swap(true, std::sync::atomic::Ordering::Acquire);
            assert!(!was, "shm: unlocked object entered twice at once (threading model violated)");
        }
        LkGuard { lk: self, held, _not_send: PhantomData }
    }
}

pub struct LkGuard<'a, T> {
    lk: &'a Lk<T>,
    held: Option<MutexGuard<'a, ()>>,
    /// Like a MutexGuard, the guard stays on the thread that took it.
    _not_send: PhantomData<*const ()>,
}

impl<T> Deref for LkGuard<'_, T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: this guard is the only one alive for the cell (mutex held,
        // or serialization by the application: see the Sync impl).
        unsafe { &*self.lk.cell.get() }
    }
}

impl<T> DerefMut for LkGuard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in deref; `&mut self` keeps this reference unique.
        unsafe { &mut *self.lk.cell.get() }
    }
}

impl<T> Drop for LkGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        #[cfg(debug_assertions)]
        if self.held.is_none() {
            self.lk.busy.store(false, std::sync::atomic::Ordering::Release);
        }
        // The mutex guard (if any) is released after this.
        let _ = &self.held;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rfabric_core::abi::*;

    #[test]
    fn choice_follows_threading() {
        assert!(!needs_lock(FI_THREAD_DOMAIN, false));
        assert!(!needs_lock(FI_THREAD_COMPLETION, false));
        assert!(needs_lock(FI_THREAD_DOMAIN, true), "progress thread runs beside the application");
        for t in [FI_THREAD_SAFE, FI_THREAD_ENDPOINT, FI_THREAD_FID, FI_THREAD_UNSPEC] {
            assert!(needs_lock(t, false), "threading {t}");
        }
    }

    #[test]
    fn both_kinds_hold_the_value() {
        for real in [true, false] {
            let l = Lk::new(5u32, real);
            assert_eq!(l.is_real(), real);
            *l.lock() += 1;
            assert_eq!(*l.lock(), 6);
        }
    }

    #[test]
    fn real_lock_serializes_threads() {
        let l = std::sync::Arc::new(Lk::new(0u64, true));
        let ts: Vec<_> = (0..4)
            .map(|_| {
                let l = l.clone();
                std::thread::spawn(move || {
                    for _ in 0..10_000 {
                        *l.lock() += 1;
                    }
                })
            })
            .collect();
        for t in ts {
            t.join().unwrap();
        }
        assert_eq!(*l.lock(), 40_000);
    }

    #[cfg(debug_assertions)]
    #[test]
    fn nested_noop_lock_is_caught() {
        let l = Lk::new(0u8, false);
        let _g = l.lock();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(l.lock())));
        assert!(r.is_err());
    }
}
