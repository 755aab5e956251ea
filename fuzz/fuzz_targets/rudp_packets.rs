//! `rfabric_rudp::fuzzing::datagrams`: hostile UDP datagrams (any device
//! and protocol headers, with the option of passing the handshake) sent to a
//! live rudp engine with posted receives and a registered region; see
//! `providers/rudp/src/fuzzing.rs`. The committed corpus
//! (`seeds/rudp_packets/`) is replayed by `providers/rudp/tests/fuzz_corpus.rs`.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| rfabric_rudp::fuzzing::datagrams(data));
