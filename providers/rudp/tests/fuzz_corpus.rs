//! Replays the committed corpus of the `rudp_packets` fuzz target
//! (`fuzz/seeds/rudp_packets/`) through the same function on the stable
//! toolchain, and a few hand-made inputs that reach the engine.

use rfabric_rudp::fuzzing::datagrams;
use rfabric_rudp::wire::{DevHdr, DevKind, ProtoHdr, Pkt, DEV_HDR, PROTO_HDR};

fn record(flags: u8, dg: &[u8]) -> Vec<u8> {
    let mut v = vec![flags];
    v.extend_from_slice(&(dg.len() as u16).to_le_bytes());
    v.extend_from_slice(dg);
    v
}

fn data_packet(seq: u32, p: &ProtoHdr, payload: &[u8]) -> Vec<u8> {
    let mut b = vec![0u8; DEV_HDR + PROTO_HDR];
    DevHdr { kind: DevKind::Data as u8, src_conn: 7, dst_conn: 0, seq, ..DevHdr::default() }.encode(&mut b[..DEV_HDR]);
    p.encode(b[DEV_HDR..].first_chunk_mut().expect("room for the header"));
    b.extend_from_slice(payload);
    b
}

#[test]
fn committed_corpus_replays() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds/rudp_packets");
    let mut n = 0;
    if let Ok(rd) = std::fs::read_dir(&dir) {
        for e in rd.flatten() {
            datagrams(&std::fs::read(e.path()).unwrap());
            n += 1;
        }
    }
    assert!(n > 0, "no corpus in {}", dir.display());
}

#[test]
fn hostile_packets_past_the_handshake() {
    let mut input = Vec::new();
    let msg = ProtoHdr { pkt: Pkt::Msg as u8, total: 10, ..ProtoHdr::default() };
    // A message, a forged oversized total, a write to a bad key, a read of
    // the region beyond its end, an atomic with a bad type, a CTS for no send.
    input.extend(record(3, &data_packet(0, &msg, b"0123456789")));
    input.extend(record(1, &data_packet(1, &ProtoHdr { pkt: Pkt::Msg as u8, msg_id: 1, total: u64::MAX, ..ProtoHdr::default() }, b"x")));
    input.extend(record(1, &data_packet(2, &ProtoHdr { pkt: Pkt::Write as u8, tag: 99, total: 4, ..ProtoHdr::default() }, b"abcd")));
    input.extend(record(1, &data_packet(3, &ProtoHdr { pkt: Pkt::ReadReq as u8, tag: 1, addr: 4000, total: 200, ..ProtoHdr::default() }, b"")));
    input.extend(record(1, &data_packet(4, &ProtoHdr { pkt: Pkt::Atomic as u8, msg_id: 1, dtype: 200, total: 1, tag: 1, ..ProtoHdr::default() }, b"")));
    input.extend(record(1, &data_packet(5, &ProtoHdr { pkt: Pkt::Cts as u8, op_id: 12345, total: 1 << 40, ..ProtoHdr::default() }, b"")));
    input.extend(record(1, &data_packet(9999, &msg, b"0123456789")));
    input.extend(record(0, b"\xa7\x01\x09garbage"));
    datagrams(&input);
}
