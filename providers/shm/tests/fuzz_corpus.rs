//! Replays every committed input of the shm fuzz targets (the minimized
//! corpus `fuzz/seeds/<target>/` and `fuzz/regressions/<target>/`) through the entry points the targets
//! call (`rfabric_shm::fuzzing`), on the stable toolchain, so `cargo test`
//! keeps every input that once mattered passing. Then a few hundred
//! pseudo-random inputs per target, the same on every run.

use rfabric_shm::fuzzing::{shutdown, TARGETS};
use std::path::{Path, PathBuf};

fn inputs(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir).map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).filter(|p| p.is_file()).collect()).unwrap_or_default();
    v.sort();
    v
}

fn replay(target: &str, f: fn(&[u8])) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz");
    let mut n = 0;
    for sub in ["seeds", "regressions"] {
        for p in inputs(&root.join(sub).join(target)) {
            let data = std::fs::read(&p).unwrap();
            let r = std::panic::catch_unwind(|| f(&data));
            assert!(r.is_ok(), "{target}: {} fails", p.display());
            n += 1;
        }
    }
    // xorshift64*: inputs of 0..600 bytes, the same ones every run.
    let mut x = 0x9e37_79b9_7f4a_7c15u64 ^ target.len() as u64;
    let mut next = || {
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    };
    for _ in 0..300 {
        let len = (next() % 600) as usize;
        let data: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        f(&data);
    }
    eprintln!("{target}: {n} committed inputs and 300 generated ones");
}

#[test]
fn fuzz_inputs_replay() {
    // One test, so that the targets' harnesses never run concurrently
    // with each other (each is a process-wide singleton anyway).
    for &(name, f) in TARGETS {
        replay(name, f);
    }
    shutdown();
}
