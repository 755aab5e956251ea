//! Wait objects shared by CQs, counters and EQs, the `Locked<T>` wrapper for
//! `FI_THREAD_SAFE` domains, and the busy-poll-then-block loop behind
//! `fi_cq_sread`, `fi_cntr_wait` and `fi_eq_sread`.
//!
//! Cost model: a producer calls [`WaitObj::notify`] after adding an entry.
//! That is one atomic load unless a consumer has armed the object (it is
//! blocked in a wait call, or the application asked for the fd through
//! `trywait`), so the fast path makes no system call and takes no lock.

use super::c;
use crate::error::{Error, Result, EINVAL};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// How many empty progress rounds a blocking call spins before it yields.
pub const BUSY_POLL_ROUNDS: u32 = 64;
/// How long a blocking call then polls with `sched_yield` between rounds
/// before it sleeps.
pub const YIELD_POLL: Duration = Duration::from_millis(2);
/// First and longest sleep of a blocking call between progress rounds.
const MIN_SLEEP_SLICE: Duration = Duration::from_micros(50);
const MAX_SLEEP_SLICE: Duration = Duration::from_millis(10);

enum Kind {
    /// Mutex + condition variable (`FI_WAIT_UNSPEC`, `FI_WAIT_MUTEX_COND`,
    /// `FI_WAIT_YIELD`).
    Cond { pending: Mutex<bool>, cv: Condvar },
    /// A Linux eventfd the application may poll (`FI_WAIT_FD`).
    Fd(OwnedFd),
}

/// A wait object. Shared between the owner of a queue and the threads that
/// block on it (hold it in an `Arc`).
pub struct WaitObj {
    kind: Kind,
    armed: AtomicBool,
    /// Set by an explicit `signal` (fi_cq_signal): wakes waiters even when
    /// nothing was queued.
    interrupted: AtomicBool,
}

impl WaitObj {
    /// Builds the wait object for an `enum fi_wait_obj` value. `FI_WAIT_NONE`
    /// gives `None` (blocking calls then fail); `FI_WAIT_SET` and
    /// `FI_WAIT_POLLFD` are not supported here.
    pub fn new(wait_obj: u32) -> Result<Option<WaitObj>> {
        let kind = match wait_obj {
            c::FI_WAIT_NONE => return Ok(None),
            c::FI_WAIT_UNSPEC | c::FI_WAIT_MUTEX_COND | c::FI_WAIT_YIELD => {
                Kind::Cond { pending: Mutex::new(false), cv: Condvar::new() }
            }
            c::FI_WAIT_FD => Kind::Fd(new_eventfd()?),
            c::FI_WAIT_SET | c::FI_WAIT_POLLFD => return Err(crate::error::ENOSYS),
            _ => return Err(EINVAL),
        };
        Ok(Some(WaitObj { kind, armed: AtomicBool::new(false), interrupted: AtomicBool::new(false) }))
    }

    /// The file descriptor for `FI_WAIT_FD` (for `fi_control(FI_GETWAIT)`).
    pub fn fd(&self) -> Option<RawFd> {
        match &self.kind {
            Kind::Fd(fd) => Some(fd.as_raw_fd()),
            Kind::Cond { .. } => None,
        }
    }

    /// Producer side: something was queued. Cheap when nobody waits.
    #[inline]
    pub fn notify(&self) {
        if self.armed.load(Ordering::SeqCst) {
            self.kick();
        }
    }

    /// `fi_*_signal`: wake any waiter even though nothing was queued.
    pub fn signal(&self) {
        self.interrupted.store(true, Ordering::SeqCst);
        self.kick();
    }

    /// Consumer side: announce that a wait is about to happen. After arming,
    /// the caller must re-check its queue before calling [`WaitObj::block`].
    pub fn arm(&self) {
        self.armed.store(true, Ordering::SeqCst);
    }

    /// Takes a pending explicit signal, if any.
    pub fn take_interrupt(&self) -> bool {
        self.interrupted.swap(false, Ordering::SeqCst)
    }

    fn kick(&self) {
        match &self.kind {
            Kind::Cond { pending, cv } => {
                *lock_ignore_poison(pending) = true;
                cv.notify_all();
            }
            Kind::Fd(fd) => {
                let one: u64 = 1;
                // SAFETY: writes 8 bytes from a live u64 to an eventfd we own.
                // A full counter (EAGAIN) already means "readable", so errors
                // are ignored.
                unsafe {
                    libc::write(fd.as_raw_fd(), (&one as *const u64).cast(), 8);
                }
            }
        }
    }

    /// Empties the eventfd (or the pending flag) so that a later poll blocks.
    pub fn drain(&self) {
        match &self.kind {
            Kind::Cond { pending, .. } => *lock_ignore_poison(pending) = false,
            Kind::Fd(fd) => {
                let mut v: u64 = 0;
                // SAFETY: reads at most 8 bytes into a live u64; the fd is
                // non-blocking so this never sleeps.
                unsafe {
                    libc::read(fd.as_raw_fd(), (&mut v as *mut u64).cast(), 8);
                }
            }
        }
    }

    /// Sleeps until kicked or until `timeout` passes (`None`: forever).
    /// Returns true when woken by a kick. Disarms before returning.
    pub fn block(&self, timeout: Option<Duration>) -> bool {
        let woke = match &self.kind {
            Kind::Cond { pending, cv } => {
                let mut g = lock_ignore_poison(pending);
                let deadline = timeout.map(|t| Instant::now() + t);
                while !*g {
                    match deadline {
                        None => g = cv.wait(g).unwrap_or_else(|e| e.into_inner()),
                        Some(d) => {
                            let now = Instant::now();
                            if now >= d {
                                break;
                            }
                            g = cv.wait_timeout(g, d - now).unwrap_or_else(|e| e.into_inner()).0;
                        }
                    }
                }
                std::mem::replace(&mut *g, false)
            }
            Kind::Fd(fd) => {
                let ms = match timeout {
                    None => -1,
                    Some(t) => t.as_millis().min(i32::MAX as u128) as i32,
                };
                let mut p = libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
                // SAFETY: one valid pollfd on the stack, count 1.
                let n = unsafe { libc::poll(&mut p, 1, ms) };
                if n > 0 {
                    self.drain();
                    true
                } else {
                    false
                }
            }
        };
        self.armed.store(false, Ordering::SeqCst);
        woke
    }
}

fn new_eventfd() -> Result<OwnedFd> {
    // SAFETY: plain system call with constant flags; the result is checked.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    if fd < 0 {
        return Err(Error(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EMFILE)));
    }
    // SAFETY: `fd` is a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn lock_ignore_poison<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Empty non-blocking reads (`fi_cq_read`, `fi_cntr_read`) in a row
/// after which a reader gives up the CPU once.
pub const IDLE_READS_BEFORE_YIELD: u32 = 512;

/// Counts a reader's empty polls and yields the CPU (`sched_yield`) after
/// [`IDLE_READS_BEFORE_YIELD`] in a row. Applications such as MPI spin on
/// non-blocking reads; with more processes than cores, the peer such a
/// reader waits for may be runnable on this very core and never get it.
/// A ping-pong between two running processes finds its reply within a few
/// dozen reads and never yields, and the yield of a process alone on its
/// core returns at once. Relaxed counts: a reader shared by threads only
/// yields at a slightly different moment.
#[derive(Default)]
pub struct IdlePolls(std::sync::atomic::AtomicU32);

impl IdlePolls {
    /// A poll that found something.
    #[inline]
    pub fn found(&self) {
        if self.0.load(Ordering::Relaxed) != 0 {
            self.0.store(0, Ordering::Relaxed);
        }
    }
    /// A poll that found nothing: yields when it ends a long enough run.
    #[inline]
    pub fn empty(&self) {
        let n = self.0.load(Ordering::Relaxed) + 1;
        if n >= IDLE_READS_BEFORE_YIELD {
            self.0.store(0, Ordering::Relaxed);
            std::thread::yield_now();
        } else {
            self.0.store(n, Ordering::Relaxed);
        }
    }
    /// Empty polls since the last one that found something or the last
    /// yield.
    pub fn count(&self) -> u32 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Converts a libfabric timeout in milliseconds (negative = infinite).
pub fn timeout_ms(ms: i32) -> Option<Duration> {
    (ms >= 0).then(|| Duration::from_millis(ms as u64))
}

/// The blocking loop: runs `attempt` (which should drive progress and try the
/// non-blocking operation) until it yields a value, spinning
/// [`BUSY_POLL_ROUNDS`] times, then polling with yields for [`YIELD_POLL`],
/// then sleeping on `wait` in slices from 50 us doubling up to 10 ms. Returns
/// `Err(on_timeout)` when the timeout passes or a `signal` arrives with
/// nothing to return.
pub fn block_until<T>(
    wait: &WaitObj,
    timeout: Option<Duration>,
    on_timeout: Error,
    mut attempt: impl FnMut() -> Result<Option<T>>,
) -> Result<T> {
    let deadline = timeout.map(|t| Instant::now() + t);
    let mut spins = 0u32;
    let mut yielding_since: Option<Instant> = None;
    let mut slice = MIN_SLEEP_SLICE;
    loop {
        if let Some(v) = attempt()? {
            return Ok(v);
        }
        if wait.take_interrupt() {
            return Err(on_timeout);
        }
        let left = match deadline {
            None => None,
            Some(d) => {
                let now = Instant::now();
                if now >= d {
                    return Err(on_timeout);
                }
                Some(d - now)
            }
        };
        if spins < BUSY_POLL_ROUNDS {
            spins += 1;
            std::hint::spin_loop();
            continue;
        }
        // A peer that answers within a scheduling slice (a ping-pong, or a
        // peer sharing our core) is caught here: poll, giving the core away
        // between polls, before any sleep.
        let now = Instant::now();
        let yield_until = *yielding_since.get_or_insert(now) + YIELD_POLL;
        if now < yield_until {
            std::thread::yield_now();
            continue;
        }
        wait.arm();
        // Re-check after arming so a producer that ran between the attempt
        // and the arm is not missed.
        if let Some(v) = attempt()? {
            wait.drain();
            return Ok(v);
        }
        if wait.take_interrupt() {
            return Err(on_timeout);
        }
        // Sleep in slices so progress that needs driving (no other thread
        // producing) still advances; short at first, longer the longer
        // nothing comes.
        wait.block(Some(left.map_or(slice, |l| l.min(slice))));
        slice = (slice * 2).min(MAX_SLEEP_SLICE);
    }
}

/// Lock wrapper used only when the domain's threading model is
/// `FI_THREAD_SAFE` (or `FI_THREAD_FID`/`FI_THREAD_ENDPOINT` where several
/// threads share the object). Under `FI_THREAD_DOMAIN` and
/// `FI_THREAD_COMPLETION` providers own the objects directly (`&mut`) and no
/// lock is taken on the fast path.
pub struct Locked<T> {
    inner: Mutex<T>,
}

impl<T> Locked<T> {
    pub fn new(v: T) -> Self {
        Locked { inner: Mutex::new(v) }
    }
    /// Locks; a panic in another holder does not poison it for us.
    pub fn lock(&self) -> MutexGuard<'_, T> {
        lock_ignore_poison(&self.inner)
    }
    pub fn into_inner(self) -> T {
        self.inner.into_inner().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn idle_polls_yield_after_a_run_of_empty_polls() {
        let idle = IdlePolls::default();
        for i in 1..IDLE_READS_BEFORE_YIELD {
            idle.empty();
            assert_eq!(idle.count(), i);
        }
        idle.empty();
        assert_eq!(idle.count(), 0, "the poll that ends the run yields and starts a new run");
        for _ in 0..10 {
            idle.empty();
        }
        idle.found();
        assert_eq!(idle.count(), 0, "a poll that finds something ends the run");
        idle.found();
        assert_eq!(idle.count(), 0);
    }

    #[test]
    fn kinds() {
        assert!(WaitObj::new(c::FI_WAIT_NONE).unwrap().is_none());
        assert!(WaitObj::new(99).is_err());
        assert!(WaitObj::new(c::FI_WAIT_SET).is_err());
        let w = WaitObj::new(c::FI_WAIT_UNSPEC).unwrap().unwrap();
        assert!(w.fd().is_none());
        let f = WaitObj::new(c::FI_WAIT_FD).unwrap().unwrap();
        assert!(f.fd().unwrap() >= 0);
    }

    #[test]
    fn notify_unarmed_does_not_wake() {
        for k in [c::FI_WAIT_UNSPEC, c::FI_WAIT_FD] {
            let w = WaitObj::new(k).unwrap().unwrap();
            w.notify();
            assert!(!w.block(Some(Duration::from_millis(5))), "kind {k}");
            w.arm();
            w.notify();
            assert!(w.block(Some(Duration::from_millis(1000))), "kind {k}");
        }
    }

    #[test]
    fn fd_is_pollable() {
        let w = WaitObj::new(c::FI_WAIT_FD).unwrap().unwrap();
        let fd = w.fd().unwrap();
        let poll = |ms| {
            let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
            // SAFETY: one valid pollfd.
            unsafe { libc::poll(&mut p, 1, ms) }
        };
        assert_eq!(poll(0), 0);
        w.signal();
        assert_eq!(poll(0), 1);
        w.drain();
        assert_eq!(poll(0), 0);
    }

    #[test]
    fn block_until_signal_from_thread() {
        for k in [c::FI_WAIT_UNSPEC, c::FI_WAIT_FD] {
            let w = Arc::new(WaitObj::new(k).unwrap().unwrap());
            let w2 = w.clone();
            let t = std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(30));
                w2.signal();
            });
            let r: Result<()> = block_until(&w, None, Error(c::FI_EAGAIN), || Ok(None));
            assert_eq!(r, Err(Error(c::FI_EAGAIN)));
            t.join().unwrap();
        }
    }

    #[test]
    fn block_until_timeout() {
        let w = WaitObj::new(c::FI_WAIT_UNSPEC).unwrap().unwrap();
        let t0 = Instant::now();
        let r: Result<()> =
            block_until(&w, timeout_ms(20), Error(c::FI_ETIMEDOUT), || Ok(None));
        assert_eq!(r, Err(Error(c::FI_ETIMEDOUT)));
        assert!(t0.elapsed() >= Duration::from_millis(20));
        let mut n = 0;
        let r = block_until(&w, timeout_ms(0), Error(c::FI_ETIMEDOUT), || {
            n += 1;
            Ok((n == 1).then_some(7))
        });
        assert_eq!(r, Ok(7));
    }
}
