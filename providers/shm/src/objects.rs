//! The libfabric objects of the shm provider: domain, endpoint, CQ and AV,
//! assembled from the transport [`crate::Endpoint`] and `rfabric_core::objects`.
//!
//! Progress is manual: reading a CQ polls every endpoint bound to it, which
//! drains the endpoint's ring, matches arrivals against posted receives
//! (`core::objects::matching`) and writes completions into the bound CQs.
//!
//! Locking: one [`Lk`](crate::lock::Lk) per endpoint state, per CQ ring and
//! per CQ endpoint list, each a real mutex or a no-op chosen at open time
//! from the domain's threading model (`lock::Locking`: no lock under
//! `FI_THREAD_DOMAIN` and `FI_THREAD_COMPLETION` with manual progress,
//! where the application serializes every call that reaches them; only the
//! `unsafe` [`ShmDomain::with_app_threading`] makes that choice, so a
//! domain built by safe code always locks). Order: a CQ's endpoint list,
//! then an endpoint, then a CQ ring; nothing holding an endpoint or a ring
//! takes an endpoint list. The endpoint holds its CQs and AV through `Arc`s
//! taken once at bind time, so an eager send costs the endpoint lock plus
//! one CQ ring lock (room check and completion together), no allocation and
//! no reference-count traffic.
//!
//! One module per object:
//! - `addr`: the printable address (`fi_shm://...`) and `fi_setname` names;
//! - `domain`: [`ShmDomain`], which opens everything else;
//! - `cq`: [`ShmCq`], its ring, spill queue and the progress a read drives;
//! - `cntr`: [`ShmCntr`];
//! - `av`: [`ShmAv`];
//! - `ep`: [`ShmEp`], its state and, in its child modules, its operations,
//!   progress, addressing, delivery-complete sends, RMA and atomics.

use std::sync::Mutex;

mod addr;
mod av;
mod cntr;
mod cq;
mod domain;
mod ep;

pub use addr::{addr_from_str, addr_to_str, ADDR_PREFIX, ADDR_STR_LEN};
pub use av::ShmAv;
pub use cntr::ShmCntr;
pub use cq::ShmCq;
pub use domain::ShmDomain;
pub use ep::{EpShared, ShmEp};

fn locked<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod name_tests;

#[cfg(test)]
mod tests;
