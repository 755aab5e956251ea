//! Counter: a success value and an error value, both atomic so that any
//! thread may update or read them without a lock; `wait` blocks (after
//! busy-polling the provider's progress) until a threshold is reached.
#![forbid(unsafe_code)]

use super::c;
use super::wait::{block_until, timeout_ms, WaitObj};
use crate::error::{Error, Result, EINVAL, ENOSYS};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The operations whose completions may be bound to a counter.
pub const BIND_FLAGS: u64 =
    c::FI_SEND | c::FI_RECV | c::FI_READ | c::FI_WRITE | c::FI_REMOTE_READ | c::FI_REMOTE_WRITE;

/// `FI_CNTR_EVENTS_COMP`, the only `enum fi_cntr_events` value.
pub const FI_CNTR_EVENTS_COMP: u32 = 0;

pub struct Cntr {
    value: AtomicU64,
    err: AtomicU64,
    wait: Option<Arc<WaitObj>>,
}

impl Cntr {
    /// `events` is `fi_cntr_attr.events`, `wait_obj` its `wait_obj`.
    pub fn new(events: u32, wait_obj: u32) -> Result<Cntr> {
        if events != FI_CNTR_EVENTS_COMP {
            return Err(EINVAL);
        }
        Ok(Cntr {
            value: AtomicU64::new(0),
            err: AtomicU64::new(0),
            wait: WaitObj::new(wait_obj)?.map(Arc::new),
        })
    }

    /// Checks `fi_ep_bind` flags for a counter: only the bindable event bits.
    pub fn check_bind_flags(flags: u64) -> Result<()> {
        if flags == 0 || flags & !BIND_FLAGS != 0 {
            return Err(EINVAL);
        }
        Ok(())
    }

    #[inline]
    fn kick(&self) {
        if let Some(w) = &self.wait {
            w.notify();
        }
    }
    #[inline]
    pub fn read(&self) -> u64 {
        self.value.load(Ordering::Acquire)
    }
    pub fn readerr(&self) -> u64 {
        self.err.load(Ordering::Acquire)
    }
    /// Wrapping add, as a 64-bit hardware counter would.
    #[inline]
    pub fn add(&self, v: u64) {
        self.value.fetch_add(v, Ordering::AcqRel);
        self.kick();
    }
    pub fn set(&self, v: u64) {
        self.value.store(v, Ordering::Release);
        self.kick();
    }
    pub fn adderr(&self, v: u64) {
        self.err.fetch_add(v, Ordering::AcqRel);
        self.kick();
    }
    pub fn seterr(&self, v: u64) {
        self.err.store(v, Ordering::Release);
        self.kick();
    }
    pub fn wait_obj(&self) -> Option<&Arc<WaitObj>> {
        self.wait.as_ref()
    }
    pub fn wait_fd(&self) -> Option<i32> {
        self.wait.as_ref().and_then(|w| w.fd())
    }
    /// Wakes a thread in `wait`; it returns `-FI_ETIMEDOUT`, the only code
    /// fi_cntr(3) gives for a wait that ends without reaching the threshold.
    pub fn signal(&self) -> Result<()> {
        self.wait.as_ref().ok_or(ENOSYS)?.signal();
        Ok(())
    }

    /// `fi_cntr_wait`: returns when the value is at least `threshold`
    /// (`Ok`), when the error value changes (`-FI_EAVAIL`), or on timeout
    /// (`-FI_ETIMEDOUT`; `timeout` in ms, negative = infinite). `progress`
    /// is called before each check.
    pub fn wait(&self, threshold: u64, timeout: i32, progress: &mut dyn FnMut()) -> Result<()> {
        let w = self.wait.as_ref().ok_or(ENOSYS)?;
        let err0 = self.readerr();
        block_until(w, timeout_ms(timeout), Error(c::FI_ETIMEDOUT), || {
            progress();
            if self.read() >= threshold {
                Ok(Some(()))
            } else if self.readerr() != err0 {
                Err(Error(c::FI_EAVAIL))
            } else {
                Ok(None)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    fn cntr(w: u32) -> Arc<Cntr> {
        Arc::new(Cntr::new(FI_CNTR_EVENTS_COMP, w).unwrap())
    }

    #[test]
    fn values() {
        let k = cntr(c::FI_WAIT_NONE);
        assert_eq!((k.read(), k.readerr()), (0, 0));
        k.add(5);
        k.add(2);
        k.adderr(1);
        assert_eq!((k.read(), k.readerr()), (7, 1));
        k.set(u64::MAX);
        k.add(2);
        assert_eq!(k.read(), 1);
        k.seterr(0);
        assert_eq!(k.readerr(), 0);
        assert_eq!(k.wait(0, 0, &mut || {}), Err(ENOSYS));
        assert!(k.wait_fd().is_none());
    }

    #[test]
    fn bad_attrs_and_bind_flags() {
        assert!(Cntr::new(1, c::FI_WAIT_NONE).is_err());
        assert!(Cntr::new(0, 42).is_err());
        assert!(Cntr::check_bind_flags(c::FI_SEND | c::FI_REMOTE_WRITE).is_ok());
        assert!(Cntr::check_bind_flags(BIND_FLAGS).is_ok());
        assert_eq!(Cntr::check_bind_flags(0), Err(EINVAL));
        assert_eq!(Cntr::check_bind_flags(c::FI_SEND | c::FI_PEEK), Err(EINVAL));
    }

    #[test]
    fn wait_threshold_progress_and_timeout() {
        let k = cntr(c::FI_WAIT_UNSPEC);
        let mut n = 0;
        let kk = k.clone();
        assert_eq!(
            k.wait(3, -1, &mut || {
                n += 1;
                kk.add(1)
            }),
            Ok(())
        );
        assert!(k.read() >= 3 && n >= 3);
        let t0 = Instant::now();
        assert_eq!(k.wait(100, 25, &mut || {}), Err(Error(c::FI_ETIMEDOUT)));
        assert!(t0.elapsed() >= Duration::from_millis(25));
        assert_eq!(k.readerr(), 0);
    }

    #[test]
    fn wait_woken_by_other_thread() {
        for w in [c::FI_WAIT_UNSPEC, c::FI_WAIT_FD] {
            let k = cntr(w);
            let k2 = k.clone();
            let t = std::thread::spawn(move || {
                for _ in 0..5 {
                    std::thread::sleep(Duration::from_millis(5));
                    k2.add(1);
                }
                std::thread::sleep(Duration::from_millis(20));
                k2.adderr(1);
            });
            assert_eq!(k.wait(5, 5000, &mut || {}), Ok(()));
            assert_eq!(k.wait(6, 5000, &mut || {}), Err(Error(c::FI_EAVAIL)));
            t.join().unwrap();
        }
    }
}
