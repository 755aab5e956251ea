//! shm provider

pub mod provider;
pub use provider::providers;
