//! `rfabric_shm::fuzzing::protocol_messages`: see that function and the module comment
//! of `providers/shm/src/fuzzing.rs` for what the input drives and what is
//! checked. The committed corpus (`seeds/shm_protocol/`) is replayed by
//! `providers/shm/tests/fuzz_corpus.rs` on the stable toolchain.

#![no_main]

use libfuzzer_sys::fuzz_target;

extern "C" fn at_exit() {
    rfabric_shm::fuzzing::shutdown();
}

fuzz_target!(
    init: {
        // SAFETY: registers a plain function; it runs once at exit.
        unsafe { libc::atexit(at_exit) };
    },
    |data: &[u8]| rfabric_shm::fuzzing::protocol_messages(data)
);
