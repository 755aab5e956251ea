//! `sys` against rdma-core's headers: the C program of `layout::c_program`,
//! compiled with `$CC` (default `cc`), must print `layout::rust_report`.
//! Without the headers (Debian: libibverbs-dev) this fails, unless
//! RFABRIC_TEST_IBVERBS_SKIP_LAYOUT=1 says skipping is fine.

#![forbid(unsafe_code)]

use crate::layout;
use std::process::Command;

#[test]
fn sys_matches_the_rdma_core_headers() {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let dir = std::env::temp_dir().join(format!("rfabric-ibverbs-layout-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let probe = dir.join("probe.c");
    std::fs::write(&probe, "#include <infiniband/verbs.h>\n#include <infiniband/efadv.h>\n#include <rdma/rdma_cma.h>\n").unwrap();
    // CC may carry flags ("cc -m64"): the first word is the program.
    let mut words = cc.split_whitespace();
    let prog = words.next().unwrap_or("cc").to_string();
    let flags: Vec<String> = words.map(String::from).collect();
    let compiler = || {
        let mut c = Command::new(&prog);
        c.args(&flags);
        c
    };
    let out = compiler().arg("-E").arg(&probe).output().unwrap_or_else(|e| panic!("no C compiler ({cc}): {e}"));
    if !out.status.success() {
        let why = String::from_utf8_lossy(&out.stderr).into_owned();
        std::fs::remove_dir_all(&dir).unwrap();
        // Skipping is for headers that are not there, not a broken compiler.
        let absent = why.contains("infiniband/") && why.contains("No such file");
        if absent && std::env::var("RFABRIC_TEST_IBVERBS_SKIP_LAYOUT").as_deref() == Ok("1") {
            eprintln!("SKIP layout check: no rdma-core headers");
            return;
        }
        panic!(
            "rdma-core's headers are missing (Debian: apt-get install libibverbs-dev; \
             RFABRIC_TEST_IBVERBS_SKIP_LAYOUT=1 skips instead): {}",
            why.trim()
        );
    }
    let src = dir.join("layout.c");
    let exe = dir.join("layout");
    std::fs::write(&src, layout::c_program()).unwrap();
    let built = compiler().args(["-std=gnu11", "-Wall", "-Werror", "-o"]).arg(&exe).arg(&src).output().unwrap();
    assert!(built.status.success(), "{}", String::from_utf8_lossy(&built.stderr));
    let run = Command::new(&exe).output().unwrap();
    assert!(run.status.success());
    std::fs::remove_dir_all(&dir).unwrap();
    let c = String::from_utf8(run.stdout).unwrap();
    let rust = layout::rust_report();
    let c_lines: Vec<&str> = c.lines().collect();
    let rust_lines: Vec<&str> = rust.lines().collect();
    let diff: Vec<String> = c_lines
        .iter()
        .zip(&rust_lines)
        .filter(|(a, b)| a != b)
        .map(|(a, b)| format!("  C:    {a}\n  Rust: {b}"))
        .collect();
    assert!(
        diff.is_empty() && c_lines.len() == rust_lines.len(),
        "layout differs ({} C lines, {} Rust lines):\n{}",
        c_lines.len(),
        rust_lines.len(),
        diff.join("\n")
    );
    // Every type, and every constant, was compared.
    assert_eq!(rust_lines.iter().filter(|l| l.starts_with("type ")).count(), layout::types().len());
    assert_eq!(rust_lines.iter().filter(|l| l.starts_with("const ")).count(), layout::consts().len());
}
