//! `#[repr(C)]` mirrors of the C structs (being filled in).

/// Fabric address handle (`fi_addr_t`).
pub type fi_addr_t = u64;
