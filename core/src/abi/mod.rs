//! C-visible types and constants, named exactly as in the C headers so that
//! the layout tests can check them row by row against `tests/abi/`.
#![allow(non_camel_case_types, non_upper_case_globals, non_snake_case, dead_code)]

mod consts;
mod types;
mod compat;

pub use compat::*;
pub use consts::*;
pub use types::*;
