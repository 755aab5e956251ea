//! rfabric's `tcp` provider: RDM endpoints over TCP connections. The RDM
//! layer is rudp's protocol engine on a device made of connections
//! (`device::ConnDevice`) over a reliable connected transport (`conn`),
//! here TCP (`tcp`). See `man/fi_tcp.7` and `docs/ARCHITECTURE.md`.

#![deny(unsafe_op_in_unsafe_fn)]

pub mod conn;
#[allow(dead_code)] // the epoll half serves the RDM device
mod sys;
pub mod tcp;
