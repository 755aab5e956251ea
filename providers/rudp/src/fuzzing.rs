//! Entry points for the fuzz targets (`fuzz/fuzz_targets/rudp_packets.rs`)
//! and for the replay of their corpus by `cargo test`
//! (`tests/fuzz_corpus.rs`). Not part of the provider's API.
//!
//! [`datagrams`] sends hostile datagrams from a plain UDP socket on
//! loopback to a fresh endpoint engine (a real UDP device) that has
//! receives posted, an AV entry for the hostile socket and a registered
//! region open to remote reads and writes, then runs its progress. The
//! input is a list of records `[flags][len lo][len hi][bytes]`: flag 1
//! overwrites the record's destination connection id with the endpoint's
//! real one (so data reaches the engine past the handshake checks), flag 2
//! makes the record a `Hello` from the hostile side first. Nothing may
//! panic, hang or write outside the posted buffers and the region.

#![doc(hidden)]

use crate::engine::{Engine, EngineConfig};
use crate::udp::{UdpConfig, UdpDevice};
use crate::wire::{DevHdr, DevKind, ProtoHdr, DEV_HDR};
use rfabric_core::abi::*;
use rfabric_core::objects::mr::{MrRegion, MrRegistry};
use rfabric_core::objects::wait::Locked;
use rfabric_core::provider::{Iov, RxOp};
use std::net::UdpSocket;
use std::sync::Arc;
use std::time::Duration;

const REGION: usize = 4096;

/// Parsers alone.
pub fn headers(data: &[u8]) {
    // What parses re-encodes to a header that parses the same (the rest of
    // the datagram kept: a data packet needs its protocol header too).
    if let Some((_, h)) = DevHdr::decode(data) {
        let mut b = data.to_vec();
        h.encode(&mut b[..DEV_HDR]);
        assert_eq!(DevHdr::decode(&b).map(|x| x.1), Some(h));
    }
    if let Some((_, h)) = ProtoHdr::decode(data) {
        let mut b = data.to_vec();
        h.encode(b.first_chunk_mut().expect("decoded, so long enough"));
        assert_eq!(ProtoHdr::decode(&b).map(|x| x.1), Some(h));
    }
    let _ = crate::sockaddr::from_bytes(data);
    let _ = crate::sockaddr::from_bytes_any(data);
}

/// Hostile datagrams into a live engine (see the module comment).
pub fn datagrams(data: &[u8]) {
    headers(data);
    let cfg = UdpConfig { max_datagram: 9000, peer_timeout: Duration::from_secs(5), ..UdpConfig::default() };
    let Ok(dev) = UdpDevice::open("127.0.0.1:0".parse().expect("addr"), cfg) else { return };
    let me = dev.local_addr();
    let conn = dev.conn();
    let mr = Arc::new(Locked::new(MrRegistry::new(0, 8).expect("registry")));
    let mut region = vec![0u8; REGION];
    mr.lock()
        .register(MrRegion { base: region.as_mut_ptr() as usize, len: REGION, access: FI_REMOTE_READ | FI_REMOTE_WRITE, ..MrRegion::default() }, 1)
        .expect("register");
    let ecfg = EngineConfig { medium_max: 65536, tx_size: 64, rx_size: 64, unexp_max: 64, directed: true, lead: 0, lead_above: 0 };
    let Ok(mut eng) = Engine::new(dev, ecfg, mr) else { return };
    let Ok(hostile) = UdpSocket::bind("127.0.0.1:0") else { return };
    let mut bufs = vec![vec![0u8; 70_000]; 4];
    for (i, b) in bufs.iter_mut().enumerate() {
        let iov = [Iov { base: b.as_mut_ptr() as usize, len: b.len() >> i }];
        let op = RxOp { iov: &iov, desc: rfabric_core::provider::Descs::NONE, src: FI_ADDR_UNSPEC, context: i + 1, tag: 0, ignore: u64::MAX, flags: 0, tagged: i % 2 == 0 };
        // SAFETY: the buffers outlive the engine (dropped after it below).
        let _ = unsafe { eng.recv(&op) };
    }
    let mut rest = data;
    let mut hostile_conn = 0x5151u32;
    while rest.len() >= 3 {
        let flags = rest[0];
        let len = (u16::from_le_bytes([rest[1], rest[2]]) as usize).min(rest.len() - 3);
        let mut dg = rest[3..3 + len].to_vec();
        rest = &rest[3 + len..];
        if flags & 2 != 0 {
            if dg.len() >= 8 {
                hostile_conn = u32::from_le_bytes([dg[4], dg[5], dg[6], dg[7]]).max(1);
            }
            let h = DevHdr { kind: DevKind::Hello as u8, src_conn: hostile_conn, ..DevHdr::default() };
            let mut b = [0u8; DEV_HDR];
            h.encode(&mut b);
            let _ = hostile.send_to(&b, me);
        }
        if flags & 1 != 0 && dg.len() >= DEV_HDR {
            dg[4..8].copy_from_slice(&hostile_conn.to_le_bytes());
            dg[8..12].copy_from_slice(&conn.to_le_bytes());
        }
        let _ = hostile.send_to(&dg, me);
        eng.progress();
    }
    for _ in 0..4 {
        eng.progress();
    }
    drop(eng);
    drop(bufs);
    drop(region);
}
