//! rfabric core: the object model of the library and what every provider
//! composes.
//!
//! `abi` holds the C-visible types and constants (layouts checked against
//! `tests/abi/layout.tsv`); everything else works on Rust values and is
//! composed by providers. Entry points that C calls live in `capi/`.
//! `unsafe` is confined to the modules that must touch memory or calls
//! the compiler cannot check (`tostr`, `xpu`, `dl`, `copy`, `objects::local_mr`,
//! `objects::atomic`, `objects::wait`, the C unions of `abi`); the others
//! forbid it (`docs/ARCHITECTURE.md` lists where and why).

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
pub mod net;
pub mod copy;
