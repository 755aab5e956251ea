//! rfabric-ibverbs: the thin FFI layer over rdma-core that rfabric's RDMA
//! providers build on.
//!
//! - `sys`: hand-written `#[repr(C)]` types and constants of the headers,
//!   checked against them by `layout` (`tests/ibverbs/layout.sh`).

#[doc(hidden)]
pub mod layout;
pub mod sys;

#[cfg(test)]
mod tests;
