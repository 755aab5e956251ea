//! rfabric's `tcp` provider: RDM endpoints over TCP connections, and
//! `FI_EP_MSG` endpoints with connection management (`msg`). The RDM
//! layer is rudp's protocol engine (`rfabric_rudp::engine`) on a device
//! made of connections (`device::ConnDevice`) of a reliable connected
//! transport (`conn`), here TCP (`tcp`). See `man/fi_tcp.7` and
//! `docs/ARCHITECTURE.md`.

#![deny(unsafe_op_in_unsafe_fn)]

pub mod conn;
pub mod device;
pub mod msg;
pub mod provider;
pub mod settings;
mod sys;
pub mod tcp;

pub use provider::providers;
