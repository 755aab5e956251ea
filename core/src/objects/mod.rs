//! Shared object machinery that every provider composes: completion queues,
//! counters, event queues, address vectors, memory registration and tag
//! matching. Written once here, never copied per provider.

mod c;
pub mod wait;
pub mod cq;
pub mod cntr;
pub mod eq;
pub mod av;
pub mod mr;
