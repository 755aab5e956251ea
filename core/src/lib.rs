//! rfabric core: the safe heart of the library.
//!
//! `abi` holds the C-visible types and constants (layouts checked against
//! `tests/abi/layout.tsv`); everything else works on Rust values and is
//! composed by providers. Entry points that C calls live in `capi/`.

pub mod abi;
pub mod error;
pub mod log;
pub mod params;
pub mod info;
pub mod getinfo;
pub mod provider;
pub mod dl;
pub mod tostr;
pub mod objects;
pub mod xpu;
