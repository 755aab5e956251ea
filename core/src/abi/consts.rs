//! (placeholder until the ABI constants land)
pub const FI_EINVAL: i32 = 22;
pub const FI_EOTHER: i32 = 256;
pub const FI_ETOOSMALL: i32 = 257;
