//! The provider's settings (`fi_param_define`; `fi_info -e` lists them).
//!
//! | variable | type | default |
//! | --- | --- | --- |
//! | `FI_TCP_IFACE` | string | every interface that is up, non-loopback first |
//! | `FI_TCP_MAX_PACKET` | size_t | 1048641 |
//! | `FI_TCP_PEER_TIMEOUT_MS` | int | 10000 |
//! | `FI_TCP_MEDIUM_MAX` | size_t | 1048576 |
//! | `FI_TCP_INFLIGHT` | size_t | 4 MiB |
//! | `FI_TCP_UNEXPECTED_MAX` | size_t | 4096 |
//! | `FI_TCP_LINGER_MS` | int | 2000 |
//!
//! As the DL provider `rftcp` the variables are `FI_RFTCP_*`.

#![forbid(unsafe_code)]

use crate::provider::NAME;
use rfabric_core::abi::FI_LOG_CORE;
use rfabric_core::params::{self, fi_param_type, FI_PARAM_INT, FI_PARAM_SIZE_T, FI_PARAM_STRING};

/// Smallest and largest packet (one message on a connection): an atomic
/// with its compare operands must fit, and a frame's length is 32 bits.
pub const PACKET_MIN: usize = 1024;
pub const PACKET_MAX: usize = 1 << 24;
/// 1 MiB of payload plus the packet's kind byte and protocol header: a
/// message of a power-of-two size goes in whole packets. Streams of 512 KiB
/// and larger messages moved up to 1.5 times faster on loopback than with
/// 256 KiB packets (fewer writes, reads and acknowledgements per byte).
pub const DEFAULT_PACKET: usize = (1 << 20) + 1 + rfabric_rudp::wire::PROTO_HDR;

const DEFS: [(&str, fi_param_type, &str); 7] = [
    ("iface", FI_PARAM_STRING, "Network interface (name, or address) endpoints listen and connect on; sockets bind only to its address (default: every interface that is up, one domain each, non-loopback first)"),
    ("max_packet", FI_PARAM_SIZE_T, "Largest packet (one framed message on a connection), in bytes (default: 1048641, 1 MiB of payload and 65 bytes of headers; from 1024 to 16777216)"),
    ("peer_timeout_ms", FI_PARAM_INT, "Milliseconds a peer may leave packets unacknowledged (while sending nothing), or a connection unestablished, before it is given up on and its operations complete with FI_ECONNRESET (default: 10000)"),
    ("medium_max", FI_PARAM_SIZE_T, "Largest message sent without waiting for the receiver's clear-to-send (default: 1048576, at most 1048576)"),
    ("inflight", FI_PARAM_SIZE_T, "Bytes sent to one peer and not yet acknowledged, at most (default: 4194304)"),
    ("unexpected_max", FI_PARAM_SIZE_T, "Unexpected messages one endpoint holds before it refuses more (they wait in the connection) (default: 4096)"),
    ("linger_ms", FI_PARAM_INT, "Milliseconds fi_close of an endpoint waits for its last packets to be acknowledged (default: 2000)"),
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
    pub max_packet: usize,
    pub peer_timeout_ms: u64,
    pub medium_max: usize,
    pub inflight_bytes: usize,
    pub unexpected_max: usize,
    pub linger_ms: u64,
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
            max_packet: size("max_packet").unwrap_or(DEFAULT_PACKET).clamp(PACKET_MIN, PACKET_MAX),
            peer_timeout_ms: int("peer_timeout_ms").filter(|&v| v > 0).map_or(10_000, |v| v as u64),
            // Larger messages wait a round trip for their clear-to-send and
            // then go straight into the receive's buffers (one copy of ours
            // fewer): 64 KiB streams (window 16, loopback) moved 3.03 GB/s
            // so against 2.15 eager (medians of 8 alternating runs), and
            // 32 KiB ones 0.65 times as fast, which is why it is not lower.
            medium_max: size("medium_max").unwrap_or(rfabric_rudp::engine::MEDIUM_CAP).min(rfabric_rudp::engine::MEDIUM_CAP),
            inflight_bytes: size("inflight").filter(|&v| v > 0).unwrap_or(4 << 20),
            unexpected_max: size("unexpected_max").filter(|&v| v > 0).unwrap_or(4096),
            linger_ms: int("linger_ms").filter(|&v| v >= 0).map_or(2000, |v| v as u64),
        }
    }
}
