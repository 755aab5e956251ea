//! shm provider: intra-node messaging over shared memory.
//!
//! This crate holds the data path only (segments, rings, cross-memory
//! attach, peers, the eager/rendezvous protocol); `provider` is its entry in
//! the provider table; the object model it composes lives in `rfabric-core`. See `DESIGN.md`.

pub mod cma;
pub mod settings;
pub mod endpoint;
pub mod fdpass;
pub mod peer;
pub mod ring;
pub mod segment;
pub mod provider;
pub mod lock;
pub mod objects;
pub mod xpu;
#[doc(hidden)]
pub mod fuzzing;

#[cfg(test)]
mod tests;

pub use endpoint::{Config, Endpoint, Event, Incoming, Kind, MsgHeader, SendStatus};
pub use peer::{Address, PeerId, ADDR_LEN};
pub use provider::providers;

use rfabric_core::error::Error;

pub(crate) fn err_io() -> Error {
    Error(libc::EIO)
}
pub(crate) fn err_perm() -> Error {
    Error(libc::EPERM)
}
pub(crate) fn err_connreset() -> Error {
    Error(libc::ECONNRESET)
}
