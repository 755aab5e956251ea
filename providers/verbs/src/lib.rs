//! rfabric's verbs provider: InfiniBand and RoCE through rdma-core, which
//! is loaded at run time (`rfabric-ibverbs`, for libibverbs and
//! librdmacm), so the library loads and every other provider works
//! where rdma-core is absent.
//!
//! - `discovery`: every RDMA port whose link is active becomes a domain,
//!   with the address formats it supports; everything else is one log line
//!   at `FI_LOG_LEVEL=info`, never an error for the whole `fi_getinfo`;
//! - `provider`: the table entry, the fabric and the domain (protection
//!   domain and memory registration through the core's registration cache,
//!   `FI_MR_DMABUF` through `ibv_reg_dmabuf_mr`);
//! - `rc`: reliable-connected queue pairs whose connections librdmacm makes
//!   (`rfabric_ibverbs::RdmaCm`, loaded at run time), as a Rust API;
//!   `rc_transport`: the same queue pairs as the tcp crate's reliable
//!   connected transport;
//! - `msg`: `FI_EP_MSG` endpoints and passive endpoints on them
//!   (`fi_endpoint`, `fi_passive_ep`, connection management from the EQ,
//!   sends, receives, RMA and atomics as work requests on registered
//!   buffers);
//! - `rdm`: `FI_EP_RDM` endpoints, rudp's protocol engine over connections
//!   of `rc_transport` (upstream's `verbs;ofi_rxm`).
//!
//! Nothing here has run on RDMA hardware (`man/fi_verbs.7.md`).

pub mod addr;
pub mod discovery;
pub mod msg;
pub mod provider;
pub mod rc;
pub mod rc_transport;
pub mod rdm;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_msg;
#[cfg(test)]
mod tests_rc;
#[cfg(test)]
mod tests_rdm;

pub use provider::{providers, VerbsProvider, NAME};
