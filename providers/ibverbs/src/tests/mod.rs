//! Unit tests. `layout` compares `sys` with rdma-core's headers.

mod layout;
