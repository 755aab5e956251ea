//! The shm counter: `core::objects::cntr::Cntr` and the endpoints bound
//! to it, which reading or waiting on it progresses.

#![forbid(unsafe_code)]

use super::ep::EpShared;
use super::locked;
use rfabric_core::error::{Result, EINVAL};
use rfabric_core::objects::cntr::Cntr;
use rfabric_core::objects::wait::IdlePolls;
use rfabric_core::provider::Counter;
use std::any::Any;
use std::sync::{Arc, Mutex};

pub struct ShmCntr {
    pub(super) c: Cntr,
    eps: Mutex<Vec<Arc<EpShared>>>,
    /// Reads whose progress found nothing, for yielding the CPU while
    /// they go on (as a CQ's readers do).
    idle: IdlePolls,
}

impl ShmCntr {
    pub(super) fn new(events: u32, wait_obj: u32) -> Result<ShmCntr> {
        Ok(ShmCntr { c: Cntr::new(events, wait_obj)?, eps: Mutex::new(Vec::new()), idle: IdlePolls::default() })
    }
    fn progress(&self) {
        let mut done = 0;
        for ep in locked(&self.eps).iter() {
            done += ep.st.lock().progress();
        }
        if done > 0 {
            self.idle.found();
        } else {
            self.idle.empty();
        }
    }
    pub(super) fn attach(&self, ep: &Arc<EpShared>) {
        let mut v = locked(&self.eps);
        if !v.iter().any(|e| Arc::ptr_eq(e, ep)) {
            v.push(ep.clone());
        }
    }
    pub(super) fn detach(&self, ep: &Arc<EpShared>) {
        locked(&self.eps).retain(|e| !Arc::ptr_eq(e, ep));
    }
}

impl Counter for ShmCntr {
    fn read(&self) -> u64 {
        self.progress();
        self.c.read()
    }
    fn readerr(&self) -> u64 {
        self.progress();
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
        self.c.wait(threshold, timeout, &mut || self.progress())
    }
    fn wait_fd(&self) -> Option<i32> {
        self.c.wait_fd()
    }
    fn trywait(&self) -> Result<()> {
        self.progress();
        let w = self.c.wait_obj().ok_or(EINVAL)?;
        w.drain();
        w.arm();
        Ok(())
    }
    fn as_any_arc(self: Arc<Self>) -> Arc<dyn Any + Send + Sync> {
        self
    }
}
