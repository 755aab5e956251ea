//! Shared object machinery that every provider composes: completion queues,
//! counters, event queues, address vectors, memory registration and tag
//! matching. Written once here, never copied per provider.
//!
//! Threading: the queue types (`Cq`, `Eq`, `Av`, `MrRegistry`, `Matcher`)
//! take `&mut self` and are owned by one thread of control; under
//! `FI_THREAD_DOMAIN` / `FI_THREAD_COMPLETION` the provider calls them with no
//! lock. `FI_THREAD_SAFE` domains wrap them in [`wait::Locked`]. `Cntr` is
//! atomic and shared by reference.

mod c;
pub mod wait;
pub mod cq;
pub mod cntr;
pub mod eq;
pub mod av;
pub mod mr;
pub mod local_mr;
pub mod mr_cache;
pub mod matching;
pub mod atomic;
pub mod progress;
