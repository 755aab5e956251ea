//! rfabric's `rudp` provider: EFA's reliable-datagram RDM design over
//! UDP/IP. A protocol engine (`engine`) owns the RDM semantics and runs on
//! a datagram device (`device`); the UDP device (`udp`) adds what EFA's
//! SRD gives in hardware; peers on the same host go through shared memory
//! (`shmdev`) instead, the two joined in `local` (which also joins shared
//! memory to the EFA device, `efadev`, for the `efa` entry, `efa`,
//! `efadom`). See `man/fi_rudp.7` and `docs/ARCHITECTURE.md`.

#![deny(unsafe_op_in_unsafe_fn)]

pub mod device;
mod dgram;
pub mod efa;
pub mod efadev;
pub mod efadom;
pub mod engine;
pub mod fuzzing;
pub mod local;
pub mod objects;
pub mod provider;
pub mod settings;
pub mod shmdev;
pub mod sockaddr;
pub mod sys;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
pub mod udp;
pub mod wire;

pub use provider::providers;
