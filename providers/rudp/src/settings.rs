//! The provider's settings (`fi_param_define`; `fi_info -e` lists them).
//!
//! | variable | type | default |
//! | --- | --- | --- |
//! | `FI_RUDP_IFACE` | string | every interface that is up, non-loopback first |
//! | `FI_RUDP_MTU` | size_t | the interface's MTU less the IP and UDP headers (at most 65507) |
//! | `FI_RUDP_GSO` | bool | 1 |
//! | `FI_RUDP_PEER_TIMEOUT_MS` | int | 10000 |
//! | `FI_RUDP_MEDIUM_MAX` | size_t | 65536 |
//! | `FI_RUDP_INFLIGHT` | size_t | 4 MiB |
//! | `FI_RUDP_SOCKBUF` | size_t | 8 MiB |
//! | `FI_RUDP_UNEXPECTED_MAX` | size_t | 4096 |
//! | `FI_RUDP_LINGER_MS` | int | 2000 |
//! | `FI_RUDP_ENABLE_SHM` | bool | 1 |
//! | `FI_RUDP_SHM_READ` | bool | 1 |
//!
//! As the DL provider `rfrudp` the variables are `FI_RFRUDP_*`.
//!
//! The `efa` entry's ([`EfaSettings`]), read when a fabric opens:
//!
//! | variable | type | default |
//! | --- | --- | --- |
//! | `FI_EFA_ENABLE_SHM_TRANSFER` | bool | 1 |

#![forbid(unsafe_code)]

use crate::provider::NAME;
use rfabric_core::abi::FI_LOG_CORE;
use rfabric_core::params::{self, fi_param_type, FI_PARAM_BOOL, FI_PARAM_INT, FI_PARAM_SIZE_T, FI_PARAM_STRING};

const DEFS: [(&str, fi_param_type, &str); 12] = [
    ("iface", FI_PARAM_STRING, "Network interface (name, or address) endpoints bind to; sockets bind only to its address (default: every interface that is up, one domain each, non-loopback first)"),
    ("mtu", FI_PARAM_SIZE_T, "Largest UDP datagram sent, in bytes (default: the interface's MTU less the IP and UDP headers, at most 65507)"),
    ("gso", FI_PARAM_BOOL, "Runs of full-size datagrams to one peer go to the kernel as one UDP GSO send (UDP_SEGMENT) where it has it; 0: one send per datagram (default: 1)"),
    ("gro", FI_PARAM_BOOL, "The kernel may hand several datagrams of one peer to one receive (UDP_GRO), which are split again; 0: one receive per datagram (default: 1)"),
    ("peer_timeout_ms", FI_PARAM_INT, "Milliseconds without an acknowledgement after which a peer is given up on and its operations complete with FI_ECONNRESET (default: 10000)"),
    ("medium_max", FI_PARAM_SIZE_T, "Largest message sent without waiting for the receiver's clear-to-send (default: 65536, at most 1048576)"),
    ("inflight", FI_PARAM_SIZE_T, "Bytes in flight to one peer, at most (default: 4194304)"),
    ("sockbuf", FI_PARAM_SIZE_T, "Socket buffer size asked for, each direction (default: 8388608)"),
    ("unexpected_max", FI_PARAM_SIZE_T, "Unexpected messages one endpoint holds before it refuses more (they are sent again) (default: 4096)"),
    ("linger_ms", FI_PARAM_INT, "Milliseconds fi_close of an endpoint waits for its last packets to be acknowledged (default: 2000)"),
    ("enable_shm", FI_PARAM_BOOL, "Peers on the same host (same network namespace) go through shared memory; 0: through UDP like the others (default: 1)"),
    ("shm_read", FI_PARAM_BOOL, "A long message between peers in shared memory is copied by the receiver straight from the sender's buffer (process_vm_readv) where the kernel allows it; 0: its data goes through shared memory in packets (default: 1)"),
];

pub fn define() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        for (name, ty, help) in DEFS {
            if let Err(e) = params::define(NAME, name, ty, help) {
                rfabric_core::fi_warn!(NAME, FI_LOG_CORE, "cannot register setting {}: {}", name, e);
            }
        }
    });
}

/// The settings, read when a domain opens.
#[derive(Clone, Debug)]
pub struct Settings {
    pub iface: Option<String>,
    pub mtu: Option<usize>,
    pub gso: bool,
    pub gro: bool,
    pub peer_timeout_ms: u64,
    pub medium_max: usize,
    pub inflight_bytes: usize,
    pub sockbuf: usize,
    pub unexpected_max: usize,
    pub linger_ms: u64,
    pub enable_shm: bool,
    pub shm_read: bool,
}

fn size(name: &str) -> Option<usize> {
    params::get_size(NAME, name).ok()
}
fn int(name: &str) -> Option<i32> {
    params::get_int(NAME, name).ok()
}

impl Settings {
    pub fn read() -> Settings {
        define();
        Settings {
            iface: params::get_str(NAME, "iface").ok().filter(|s| !s.is_empty()),
            mtu: size("mtu").filter(|&v| v > 0),
            gso: params::get_bool(NAME, "gso").unwrap_or(true),
            gro: params::get_bool(NAME, "gro").unwrap_or(true),
            peer_timeout_ms: int("peer_timeout_ms").filter(|&v| v > 0).map_or(10_000, |v| v as u64),
            medium_max: size("medium_max").unwrap_or(65536).min(crate::engine::MEDIUM_CAP),
            inflight_bytes: size("inflight").filter(|&v| v > 0).unwrap_or(4 << 20),
            sockbuf: size("sockbuf").filter(|&v| v > 0).unwrap_or(8 << 20),
            unexpected_max: size("unexpected_max").filter(|&v| v > 0).unwrap_or(4096),
            linger_ms: int("linger_ms").filter(|&v| v >= 0).map_or(2000, |v| v as u64),
            enable_shm: params::get_bool(NAME, "enable_shm").unwrap_or(true),
            shm_read: params::get_bool(NAME, "shm_read").unwrap_or(true),
        }
    }

    /// The largest datagram for an interface of MTU `ifmtu`.
    pub fn max_datagram(&self, ifmtu: Option<usize>, v6: bool) -> usize {
        let hdrs = if v6 { 48 } else { 28 };
        let path = ifmtu.map_or(1500, |m| m.saturating_sub(hdrs)).min(65507);
        self.mtu.unwrap_or(path).clamp(crate::wire::HDRS + 2 * crate::engine::ATOMIC_MAX_BYTES, 65507)
    }
}

const EFA_DEFS: [(&str, fi_param_type, &str); 1] = [(
    "enable_shm_transfer",
    FI_PARAM_BOOL,
    "Peers on the same host (their GID is one of this host's EFA devices') go through shared memory; 0: through the EFA device like the others (default: 1)",
)];

/// Registers the `efa` entry's settings.
pub fn define_efa() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        for (name, ty, help) in EFA_DEFS {
            if let Err(e) = params::define(crate::efa::NAME, name, ty, help) {
                rfabric_core::fi_warn!(crate::efa::NAME, FI_LOG_CORE, "cannot register setting {}: {}", name, e);
            }
        }
    });
}

/// The `efa` entry's settings, read when a fabric opens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EfaSettings {
    /// Local peers through shared memory (`FI_EFA_ENABLE_SHM_TRANSFER`).
    pub enable_shm_transfer: bool,
}

impl Default for EfaSettings {
    fn default() -> Self {
        EfaSettings { enable_shm_transfer: true }
    }
}

impl EfaSettings {
    pub fn read() -> EfaSettings {
        define_efa();
        EfaSettings { enable_shm_transfer: params::get_bool(crate::efa::NAME, "enable_shm_transfer").unwrap_or(true) }
    }
}
