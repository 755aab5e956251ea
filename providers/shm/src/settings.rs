//! The provider's settings, kept by the core's parameters
//! (`rfabric_core::params`, behind `fi_param_define` / `fi_param_get`):
//! `fi_info -e` lists them with their help text, and a value that does not
//! parse for its type is logged as a warning and replaced by the default.
//!
//! | variable | type | default |
//! | --- | --- | --- |
//! | `FI_SHM_CMA` | bool | unset: cross-memory attach where the kernel permits it |
//! | `FI_SHM_EAGER_MAX` | size_t | unset: 8 KiB while a rendezvous with the peer is in flight, one cell otherwise |
//! | `FI_SHM_SHARED_COPY` | bool | 1 |
//! | `FI_SHM_PEER_CHECK_MS` | int | 2 |
//!
//! The variables carry the provider's name: loaded as the DL provider
//! `rfshm` they are `FI_RFSHM_CMA`, ... (the core maps the name).
//! Values are read when an endpoint is opened, not cached.

use crate::cma::CmaMode;
use crate::provider::NAME;
use rfabric_core::abi::FI_LOG_CORE;
use rfabric_core::error::{Result, ENODATA};
use rfabric_core::params::{self, fi_param_type, FI_PARAM_BOOL, FI_PARAM_INT, FI_PARAM_SIZE_T};

const CMA: &str = "cma";
const EAGER_MAX: &str = "eager_max";
const SHARED_COPY: &str = "shared_copy";
const PEER_CHECK_MS: &str = "peer_check_ms";

/// Default of `FI_SHM_PEER_CHECK_MS`, in milliseconds.
pub const DEFAULT_PEER_CHECK_MS: u64 = 2;

const DEFS: [(&str, fi_param_type, &str); 4] = [
    (
        CMA,
        FI_PARAM_BOOL,
        "Large transfers by cross-memory attach (process_vm_readv/writev): 1 only that way (a refusal by \
         the kernel is an error), 0 never (bounce buffers in shared memory) (default: cross-memory attach \
         where the kernel permits it, bounce buffers otherwise)",
    ),
    (
        EAGER_MAX,
        FI_PARAM_SIZE_T,
        "Largest message in bytes copied through the receiver's ring; larger ones go by rendezvous \
         (default: 8192 while a rendezvous with that peer is in flight, one cell otherwise)",
    ),
    (
        SHARED_COPY,
        FI_PARAM_BOOL,
        "From 256 KiB the sender helps the receiver copy a cross-memory attach transfer (default: 1)",
    ),
    (
        PEER_CHECK_MS,
        FI_PARAM_INT,
        "Milliseconds of progress between checks that the processes of peers with operations in flight \
         still exist; the operations of a peer that died fail with FI_ECONNRESET about this long after its \
         death, once what it wrote before is read; 0 checks at every 64th progress call (default: 2)",
    ),
];

/// Register the settings (once per process; later calls do nothing).
pub fn define() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| define_for(NAME));
}

fn define_for(prov: &str) {
    for (name, ty, help) in DEFS {
        if let Err(e) = params::define(prov, name, ty, help) {
            rfabric_core::fi_warn!(prov, FI_LOG_CORE, "cannot register setting {}: {}", name, e);
        }
    }
}

/// A setting's value: `None` when it is not set; a value that does not
/// parse is logged and read as not set, so the caller's default applies.
fn read<T>(prov: &str, name: &str, default: &str, get: fn(&str, &str) -> Result<T>) -> Option<T> {
    match get(prov, name) {
        Ok(v) => Some(v),
        Err(ENODATA) => None,
        Err(e) => {
            let var = params::lookup(prov, name).map(|(_, env)| env).unwrap_or_else(|_| params::env_name(prov, name));
            rfabric_core::fi_warn!(prov, FI_LOG_CORE, "{} is not valid ({}); using the default: {}", var, e, default);
            None
        }
    }
}

fn cma_mode_of(prov: &str) -> CmaMode {
    match read(prov, CMA, "automatic", params::get_bool) {
        Some(true) => CmaMode::Force,
        Some(false) => CmaMode::Off,
        None => CmaMode::Auto,
    }
}

fn eager_max_of(prov: &str) -> Option<usize> {
    read(prov, EAGER_MAX, "adaptive (8192 bytes while streaming, one cell otherwise)", params::get_size)
}

fn shared_copy_of(prov: &str) -> bool {
    read(prov, SHARED_COPY, "1", params::get_bool).unwrap_or(true)
}

fn peer_check_ms_of(prov: &str) -> u64 {
    match read(prov, PEER_CHECK_MS, "2", params::get_int) {
        Some(v) if v >= 0 => v as u64,
        Some(v) => {
            let var = params::lookup(prov, PEER_CHECK_MS).map(|(_, env)| env).unwrap_or_else(|_| params::env_name(prov, PEER_CHECK_MS));
            rfabric_core::fi_warn!(prov, FI_LOG_CORE, "{} is not valid ({} is negative); using the default: 2", var, v);
            DEFAULT_PEER_CHECK_MS
        }
        None => DEFAULT_PEER_CHECK_MS,
    }
}

/// `FI_SHM_CMA`: 1 forces cross-memory attach, 0 turns it off, unset (or
/// not a boolean) chooses automatically.
pub fn cma_mode() -> CmaMode {
    define();
    cma_mode_of(NAME)
}

/// `FI_SHM_EAGER_MAX`: one fixed eager limit in bytes instead of the
/// adaptive defaults.
pub fn eager_max() -> Option<usize> {
    define();
    eager_max_of(NAME)
}

/// `FI_SHM_SHARED_COPY`: whether large CMA copies are shared with the sender.
pub fn shared_copy() -> bool {
    define();
    shared_copy_of(NAME)
}

/// `FI_SHM_PEER_CHECK_MS`: the interval between liveness checks of peers
/// with operations in flight, in nanoseconds.
pub fn peer_check_ns() -> u64 {
    define();
    peer_check_ms_of(NAME).saturating_mul(1_000_000)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rfabric_core::params::getparams;

    #[test]
    fn settings_are_listed_with_help() {
        define();
        let listed: Vec<_> = getparams().into_iter().filter(|p| p.env_name.starts_with("FI_SHM_")).collect();
        for var in ["FI_SHM_CMA", "FI_SHM_EAGER_MAX", "FI_SHM_SHARED_COPY", "FI_SHM_PEER_CHECK_MS"] {
            let p = listed.iter().find(|p| p.env_name == var).unwrap_or_else(|| panic!("{var} not listed"));
            assert!(p.help.starts_with("shm: ") && p.help.len() > 40, "{var}: {}", p.help);
        }
    }

    // The same settings under a provider name of this test's own: other
    // tests of this process open endpoints that read FI_SHM_* meanwhile.
    #[test]
    fn settings_parse_or_fall_back_to_the_default() {
        let p = "shmsettingstest";
        define_for(p);
        type Check = &'static dyn Fn(&str);
        let cases: [(&str, Option<&str>, Check); 16] = [
            ("FI_SHMSETTINGSTEST_CMA", None, &|p| assert_eq!(cma_mode_of(p), CmaMode::Auto)),
            ("FI_SHMSETTINGSTEST_CMA", Some("0"), &|p| assert_eq!(cma_mode_of(p), CmaMode::Off)),
            ("FI_SHMSETTINGSTEST_CMA", Some("on"), &|p| assert_eq!(cma_mode_of(p), CmaMode::Force)),
            ("FI_SHMSETTINGSTEST_CMA", Some("sometimes"), &|p| assert_eq!(cma_mode_of(p), CmaMode::Auto)),
            ("FI_SHMSETTINGSTEST_CMA", Some(""), &|p| assert_eq!(cma_mode_of(p), CmaMode::Auto)),
            ("FI_SHMSETTINGSTEST_EAGER_MAX", None, &|p| assert_eq!(eager_max_of(p), None)),
            ("FI_SHMSETTINGSTEST_EAGER_MAX", Some("0x2000"), &|p| assert_eq!(eager_max_of(p), Some(8192))),
            ("FI_SHMSETTINGSTEST_EAGER_MAX", Some("4k"), &|p| assert_eq!(eager_max_of(p), None)),
            ("FI_SHMSETTINGSTEST_EAGER_MAX", Some("-1"), &|p| assert_eq!(eager_max_of(p), None)),
            ("FI_SHMSETTINGSTEST_SHARED_COPY", Some("no"), &|p| assert!(!shared_copy_of(p))),
            ("FI_SHMSETTINGSTEST_SHARED_COPY", Some("2"), &|p| assert!(shared_copy_of(p))),
            ("FI_SHMSETTINGSTEST_PEER_CHECK_MS", None, &|p| assert_eq!(peer_check_ms_of(p), 2)),
            ("FI_SHMSETTINGSTEST_PEER_CHECK_MS", Some("250"), &|p| assert_eq!(peer_check_ms_of(p), 250)),
            ("FI_SHMSETTINGSTEST_PEER_CHECK_MS", Some("0"), &|p| assert_eq!(peer_check_ms_of(p), 0)),
            ("FI_SHMSETTINGSTEST_PEER_CHECK_MS", Some("-5"), &|p| assert_eq!(peer_check_ms_of(p), 2)),
            ("FI_SHMSETTINGSTEST_PEER_CHECK_MS", Some("2s"), &|p| assert_eq!(peer_check_ms_of(p), 2)),
        ];
        for (var, val, check) in cases {
            match val {
                Some(v) => std::env::set_var(var, v),
                None => std::env::remove_var(var),
            }
            check(p);
            std::env::remove_var(var);
        }
        assert!(shared_copy_of(p));
    }
}
