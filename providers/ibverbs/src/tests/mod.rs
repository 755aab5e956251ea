//! Unit tests. `standin` is a recording stand-in for libibverbs and libefa
//! (the only way a `Verbs` over something other than the real libraries is
//! built); `load` uses this machine's real libraries (no RDMA device);
//! `layout` compares `sys` with rdma-core's headers.

mod calls;
mod inline_ops;
mod layout;
mod load;
pub(crate) use crate::standin;
