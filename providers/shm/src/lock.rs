//! The lock of the shm objects' per-message state (endpoint state, CQ
//! ring, a CQ's endpoint list), chosen once when the object is opened from
//! the domain's threading model:
//!
//! - `FI_THREAD_SAFE`, `FI_THREAD_FID`, `FI_THREAD_ENDPOINT`, `FI_THREAD_UNSPEC`
//!   and any domain with `FI_PROGRESS_AUTO` or `FI_XPU`: a real lock
//!   ([`TicketLock`]). (Under
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
//! state is the same; lock order rules are those of the real lock.
//!
//! The no-op form is a promise that only the application can make, so safe
//! code cannot build it: [`Lk::new`] always makes a real lock, and the
//! choice of the no-op one goes through a [`Locking`] value that only
//! `unsafe` code can create ([`Locking::serialized_by_caller`],
//! [`Locking::for_threading`]). The choice is made when the object is
//! opened; [`Lk::lock`] is the same either way.
//!
//! Safe code can no longer ask for a lock that takes no lock:
//!
//! ```compile_fail
//! use rfabric_shm::lock::Lk;
//! let l = Lk::new(0u32, false); // the former safe constructor of the no-op form
//! # drop(l);
//! ```
//!
//! ```compile_fail,E0133
//! use rfabric_shm::lock::{Lk, Locking};
//! let l = Lk::with(0u32, Locking::serialized_by_caller()); // needs `unsafe`
//! # drop(l);
//! ```
//!
//! ```compile_fail,E0133
//! use rfabric_shm::lock::Locking;
//! let l = Locking::for_threading(rfabric_core::abi::FI_THREAD_DOMAIN, false); // needs `unsafe`
//! # drop(l);
//! ```
//!
//! ```compile_fail,E0451
//! use rfabric_shm::lock::Locking;
//! let l = Locking { real: false }; // the field is private
//! # drop(l);
//! ```
//!
//! What safe code can build always locks:
//!
//! ```
//! use rfabric_shm::lock::{Lk, Locking};
//! assert!(Lk::new(0u32).is_real());
//! assert!(Lk::with(0u32, Locking::REAL).is_real());
//! // SAFETY: this example touches the value from one thread only.
//! let l = Lk::with(0u32, unsafe { Locking::serialized_by_caller() });
//! assert!(!l.is_real());
//! // SAFETY: as above.
//! let how = unsafe { Locking::for_threading(rfabric_core::abi::FI_THREAD_DOMAIN, false) };
//! assert!(!Lk::with(0u32, how).is_real());
//! ```

use std::cell::UnsafeCell;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU32, Ordering};

/// A ticket lock: each locker takes the next ticket with one atomic add
/// and waits (spinning briefly, then yielding the CPU) until the ticket is
/// served.
///
/// Its release is a plain store (only the holder writes `serving`). A
/// futex mutex releases with a locked read-modify-write (to learn whether
/// someone sleeps), and on x86 every locked instruction waits until the
/// stores before it are visible: after a message is written into a peer's
/// ring, that is a wait for the peer's core to give up the line. Tickets
/// also make it fair: a progress thread that releases and retakes the
/// lock at once cannot starve the application's thread. The sections it
/// guards are short (a poll, a send, a CQ copy) or, for a rendezvous copy,
/// bounded by one copy; a waiter yields instead of sleeping.
pub struct TicketLock {
    next: AtomicU32,
    serving: AtomicU32,
}

impl TicketLock {
    pub const fn new() -> TicketLock {
        TicketLock { next: AtomicU32::new(0), serving: AtomicU32::new(0) }
    }

    #[inline]
    pub fn lock(&self) {
        let t = self.next.fetch_add(1, Ordering::Relaxed);
        if self.serving.load(Ordering::Acquire) == t {
            return;
        }
        self.wait_for(t);
    }

    #[cold]
    fn wait_for(&self, t: u32) {
        let mut spins = 0u32;
        while self.serving.load(Ordering::Acquire) != t {
            if spins < 64 {
                spins += 1;
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }

    /// # Safety
    /// The caller holds the lock (took it with [`lock`](Self::lock) and has
    /// not released it since).
    #[inline]
    pub unsafe fn unlock(&self) {
        // Only the holder writes `serving`, so load and store lose nothing.
        let s = self.serving.load(Ordering::Relaxed);
        self.serving.store(s.wrapping_add(1), Ordering::Release);
    }
}

impl Default for TicketLock {
    fn default() -> Self {
        Self::new()
    }
}

/// Whether objects of a domain need real locks (see the module comment).
/// `helper_threads`: the provider itself runs threads on the domain's
/// objects (`FI_PROGRESS_AUTO`, fi_xpu proxies).
pub fn needs_lock(threading: u32, helper_threads: bool) -> bool {
    use rfabric_core::abi::{FI_THREAD_COMPLETION, FI_THREAD_DOMAIN};
    helper_threads || !(threading == FI_THREAD_DOMAIN || threading == FI_THREAD_COMPLETION)
}

/// Which form of [`Lk`] the objects of a domain get. [`Locking::REAL`] is
/// free to use; the form without a lock exists only through `unsafe`
/// constructors whose contract is the application's threading model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Locking {
    real: bool,
}

impl Locking {
    /// Every object gets a real lock.
    pub const REAL: Locking = Locking { real: true };

    /// No lock at all.
    ///
    /// # Safety
    /// Every [`Lk`] built with this value is only ever locked by one thread
    /// at a time, and never while a guard of it is alive: the caller
    /// serializes every access, as an application does under
    /// `FI_THREAD_DOMAIN` (every call on the domain's objects) or
    /// `FI_THREAD_COMPLETION` (every call on the objects bound together),
    /// with no thread of the provider's own (progress, proxies) touching
    /// them.
    pub const unsafe fn serialized_by_caller() -> Locking {
        Locking { real: false }
    }

    /// The choice for a domain opened with `threading`, [`needs_lock`].
    ///
    /// # Safety
    /// When [`needs_lock`] answers false for these arguments, as
    /// [`serialized_by_caller`](Self::serialized_by_caller): the caller
    /// (in the end the application, through `fi_domain`) keeps the promise
    /// that `threading` makes for every object opened under the domain.
    pub unsafe fn for_threading(threading: u32, helper_threads: bool) -> Locking {
        Locking { real: needs_lock(threading, helper_threads) }
    }

    /// Whether objects get a real lock.
    pub fn is_real(self) -> bool {
        self.real
    }
}

pub struct Lk<T> {
    /// `None`: the application serializes all access (no-op lock).
    real: Option<TicketLock>,
    cell: UnsafeCell<T>,
    /// Debug builds check that the no-op lock is never entered twice at once
    /// (nested or from two threads), which would break the invariant.
    #[cfg(debug_assertions)]
    busy: std::sync::atomic::AtomicBool,
}

// SAFETY: the value moves between threads only with the Lk (T: Send).
unsafe impl<T: Send> Send for Lk<T> {}
// SAFETY: with a real lock, every access to the cell goes through a guard that
// holds it. The no-op form is built only from a `Locking` made by
// `Locking::serialized_by_caller` or `Locking::for_threading`, unsafe
// functions whose callers promise that accesses never overlap (the
// application's FI_THREAD_DOMAIN / FI_THREAD_COMPLETION serialization), so
// no two guards ever exist at the same time.
unsafe impl<T: Send> Sync for Lk<T> {}

impl<T> Lk<T> {
    /// A real lock.
    pub fn new(v: T) -> Lk<T> {
        Lk::with(v, Locking::REAL)
    }

    /// The form `how` names (no lock only when unsafe code chose it).
    pub fn with(v: T, how: Locking) -> Lk<T> {
        Lk {
            real: how.real.then(TicketLock::new),
            cell: UnsafeCell::new(v),
            #[cfg(debug_assertions)]
            busy: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Whether this is a real lock.
    pub fn is_real(&self) -> bool {
        self.real.is_some()
    }

    #[inline]
    pub fn lock(&self) -> LkGuard<'_, T> {
        let held = self.real.as_ref();
        if let Some(m) = held {
            m.lock();
        }
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
    /// The lock this guard holds and releases on drop (`None`: no-op lock).
    held: Option<&'a TicketLock>,
    /// Like a MutexGuard, the guard stays on the thread that took it.
    _not_send: PhantomData<*const ()>,
}

impl<T> Deref for LkGuard<'_, T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: this guard is the only one alive for the cell (lock held,
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
        if let Some(m) = self.held {
            // SAFETY: this guard took the lock in `Lk::lock` and is its
            // only holder; it is released exactly once, here.
            unsafe { m.unlock() };
        }
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
        // SAFETY: `l` is used by this thread only.
        for how in [Locking::REAL, unsafe { Locking::serialized_by_caller() }] {
            let l = Lk::with(5u32, how);
            assert_eq!(l.is_real(), how.is_real());
            *l.lock() += 1;
            assert_eq!(*l.lock(), 6);
        }
    }

    #[test]
    fn real_lock_serializes_threads() {
        let l = std::sync::Arc::new(Lk::new(0u64));
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

    #[test]
    fn waiter_enters_only_after_release() {
        use std::sync::atomic::AtomicU32;
        let l = std::sync::Arc::new(Lk::new(0u32));
        let entered = std::sync::Arc::new(AtomicU32::new(0));
        let g = l.lock();
        let t = {
            let (l, entered) = (l.clone(), entered.clone());
            std::thread::spawn(move || {
                let mut v = l.lock();
                *v += 1;
                entered.store(1, Ordering::SeqCst);
            })
        };
        // The waiter spins, then yields: it must still be outside.
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert_eq!(entered.load(Ordering::SeqCst), 0);
        drop(g);
        t.join().unwrap();
        assert_eq!(entered.load(Ordering::SeqCst), 1);
        assert_eq!(*l.lock(), 1);
    }

    #[test]
    fn waiter_goes_before_a_retaking_holder() {
        // Fairness: a holder that releases and locks again at once (the
        // progress thread under load) queues behind a thread already
        // waiting.
        use std::sync::atomic::AtomicU32;
        let l = std::sync::Arc::new(Lk::new(()));
        let entered = std::sync::Arc::new(AtomicU32::new(0));
        let g = l.lock();
        let t = {
            let (l, entered) = (l.clone(), entered.clone());
            std::thread::spawn(move || {
                let _g = l.lock();
                entered.store(1, Ordering::SeqCst);
            })
        };
        // Let the waiter take its ticket.
        std::thread::sleep(std::time::Duration::from_millis(50));
        drop(g);
        let g = l.lock();
        assert_eq!(entered.load(Ordering::SeqCst), 1, "the waiter was served first");
        drop(g);
        t.join().unwrap();
    }

    #[test]
    fn lock_released_by_unwinding_guard() {
        let l = Lk::new(0u8);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _g = l.lock();
            panic!("inside");
        }));
        assert!(r.is_err());
        *l.lock() = 3;
        assert_eq!(*l.lock(), 3);
    }

    #[cfg(debug_assertions)]
    #[test]
    fn nested_noop_lock_is_caught() {
        // SAFETY: one thread; the nested lock below is the violation that
        // debug builds catch before any second guard exists.
        let l = Lk::with(0u8, unsafe { Locking::serialized_by_caller() });
        let _g = l.lock();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(l.lock())));
        assert!(r.is_err());
    }
}
