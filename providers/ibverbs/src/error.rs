//! Errors: a library that cannot be loaded (`LoadError`) and a verb that
//! failed (`VerbsError`, an errno value as rdma-core reports it).
#![forbid(unsafe_code)]

use std::fmt;

/// Why a library (or a function of it) could not be loaded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LoadError {
    /// `dlopen` failed: no such library on the search path, or it failed
    /// to load (`reason` is the loader's message).
    NoLibrary { name: String, reason: String },
    /// The library loaded but lacks a function this crate needs, in the
    /// version node it was declared in.
    NoSymbol { library: String, symbol: &'static str, version: &'static str },
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadError::NoLibrary { name, reason } => write!(f, "cannot load {name}: {reason}"),
            LoadError::NoSymbol { library, symbol, version } => {
                write!(f, "{library} has no {symbol} (version {version})")
            }
        }
    }
}

impl std::error::Error for LoadError {}

/// A verb failed: which call, and its errno value. A function the loaded
/// libraries lack (`ibv_reg_dmabuf_mr` before rdma-core 34, every `efadv_*`
/// without libefa) fails with `EOPNOTSUPP`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VerbsError {
    pub call: &'static str,
    pub errno: i32,
}

impl VerbsError {
    pub fn new(call: &'static str, errno: i32) -> Self {
        VerbsError { call, errno }
    }

    /// The function is not in the loaded libraries.
    pub fn unsupported(call: &'static str) -> Self {
        VerbsError { call, errno: libc::EOPNOTSUPP }
    }

    /// The current thread's errno, for a call that returned NULL or -1
    /// (`EIO` if the library left errno at 0).
    pub fn last(call: &'static str) -> Self {
        let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        VerbsError { call, errno: if errno > 0 { errno } else { libc::EIO } }
    }

    /// The result of a call that returns 0 or an error: a positive errno
    /// value (most verbs), or -1 with errno set (`ibv_query_gid`).
    pub fn check(call: &'static str, rc: i32) -> Result<(), VerbsError> {
        match rc {
            0 => Ok(()),
            rc if rc > 0 => Err(VerbsError { call, errno: rc }),
            _ => Err(VerbsError::last(call)),
        }
    }
}

impl fmt::Display for VerbsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.call, std::io::Error::from_raw_os_error(self.errno))
    }
}

impl std::error::Error for VerbsError {}
