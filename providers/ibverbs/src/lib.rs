//! rfabric-ibverbs: the thin FFI layer over rdma-core that rfabric's RDMA
//! providers build on. libibverbs (and libefa's `efadv_*`, optionally) are
//! loaded at run time; nothing links rdma-core at build time, and a machine
//! without it loads `Err(LoadError::NoLibrary)`, never a panic.
//!
//! - `sys`: hand-written `#[repr(C)]` types and constants of the headers,
//!   checked against them by `layout` (`tests/ibverbs/layout.sh`);
//! - `fns`: the exported functions, as tables of function pointers;
//! - `inline`: the header's static inline functions and macros (the data
//!   path through `ibv_context_ops`, `ibv_query_port` through
//!   `verbs_context`, `ibv_reg_mr`'s choice of function);
//! - `Verbs`, `Context`, `Pd`, `Mr`, `Cq`, `Qp`, `Srq`, `Ah`: a small safe API of RAII
//!   wrappers, and `Verbs::devices` for what the machine has.
//!
//! See `README.md` for what has run where (nothing on RDMA hardware yet).

pub mod error;
pub mod fns;
pub mod info;
pub mod inline;
#[doc(hidden)]
pub mod layout;
pub mod objects;
pub mod rdmacm;
pub mod sys;
pub mod verbs;
#[cfg(any(test, feature = "standin"))]
#[doc(hidden)]
pub mod standin;

#[cfg(test)]
mod tests;

pub use error::{LoadError, VerbsError};
pub use fns::{EfaFns, LibNames, VerbsFns};
pub use info::{DeviceDetail, DeviceInfo, EfaInfo, LinkLayer, Mtu, NodeType, PortInfo, PortState, Transport};
pub use objects::{Ah, CompChannel, Context, Cq, Mr, Pd, PostError, Qp, Srq};
pub use rdmacm::{RdmaCm, RdmaCmFns};
pub use verbs::Verbs;
