//! `tests/abi_layout.rs` is generated from the ABI tables; this test fails
//! when the committed file no longer matches what the generator produces
//! (a table or the generator changed without regenerating).
#![forbid(unsafe_code)]

use std::path::Path;
use std::process::Command;

#[test]
fn generated_layout_test_is_current() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/abi/gen_rust_check.py");
    assert!(script.is_file(), "missing {}", script.display());
    let out = match Command::new("python3").arg(&script).arg("--check").output() {
        Ok(out) => out,
        Err(e) => {
            // The check needs a Python interpreter; without one it cannot run.
            eprintln!("python3 not available ({e}); staleness check not run");
            return;
        }
    };
    assert!(
        out.status.success(),
        "core/tests/abi_layout.rs is stale; run python3 tests/abi/gen_rust_check.py\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
