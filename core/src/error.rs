//! One error type inside the library; the boundary turns it into `-FI_E*`.
#![forbid(unsafe_code)]

use std::fmt;

/// A libfabric error code, stored as the positive `FI_E*` value.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Error(pub i32);

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// The value a C caller sees: `-FI_E*`.
    pub fn to_c(self) -> i32 {
        -self.0
    }
    /// From a return value of a C function (negative `FI_E*`).
    pub fn from_c(rc: i32) -> Self {
        Error(rc.saturating_abs())
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Error({} {})", self.0, crate::tostr::strerror(self.0))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(crate::tostr::strerror(self.0))
    }
}

impl std::error::Error for Error {}

/// Shorthands for the codes the core returns most often.
pub const EINVAL: Error = Error(libc::EINVAL);
pub const ENOMEM: Error = Error(libc::ENOMEM);
pub const ENOSYS: Error = Error(libc::ENOSYS);
pub const ENODATA: Error = Error(libc::ENODATA);
pub const EBUSY: Error = Error(libc::EBUSY);
pub const EAGAIN: Error = Error(libc::EAGAIN);
pub const EOPNOTSUPP: Error = Error(libc::EOPNOTSUPP);
pub const ENOENT: Error = Error(libc::ENOENT);
pub const EBADF: Error = Error(libc::EBADF);
pub const ETOOSMALL: Error = Error(crate::abi::FI_ETOOSMALL);
pub const EOTHER: Error = Error(crate::abi::FI_EOTHER);
