//! libfabric.so.1: every symbol a C program binds to, and the ops-table
//! trampolines that the inline wrappers in `<rdma/*.h>` call through.
//!
//! Each entry point goes through `guard!`, which contains panics and turns
//! them into `-FI_EOTHER` plus a log line. Should one still escape, the
//! language aborts at the `extern "C"` frame: unwinding into C cannot happen.
// Casts of C enum values (`as u32`, `as usize`) are kept even where the
// types match on x86-64 Linux: C enum and constant types differ by ABI.
#![allow(clippy::unnecessary_cast)]

#[macro_use]
mod guard;

mod compat;
mod compat_shapes;
mod versioned;
mod getinfo;
mod info;
mod log_params;
mod tostr;
mod handle;
mod fabric;
mod domain;
mod endpoint;
mod cq;
mod cntr;
mod av;
mod mr;
mod eq;
mod pep;
mod xpu;
mod dl_calls;
#[cfg(feature = "dl")]
mod prov_ini;

use rfabric_core::provider::Provider;

/// The providers built into this library, in preference order: one entry
/// per provider feature (`shm`, `rudp`, `efa`, `tcp` and `verbs`, the defaults). Without any, the table holds
/// only DL providers and `fi_getinfo` answers `-FI_ENODATA` until one loads.
pub(crate) fn builtin_providers() -> Vec<Box<dyn Provider>> {
    #[allow(unused_mut)]
    let mut v: Vec<Box<dyn Provider>> = Vec::new();
    #[cfg(feature = "shm")]
    v.extend(rfabric_shm::providers());
    #[cfg(feature = "rudp")]
    v.extend(rfabric_rudp::providers());
    #[cfg(feature = "efa")]
    v.extend(rfabric_rudp::efa::providers());
    #[cfg(feature = "tcp")]
    v.extend(rfabric_tcp::providers());
    #[cfg(feature = "verbs")]
    v.extend(rfabric_verbs::providers());
    v
}
