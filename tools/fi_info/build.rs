//! Link `fi_info` dynamically against `libfabric.so.1`.
//!
//! The library is looked for in `$RFABRIC_LIB_DIR` (the Makefile sets it),
//! else in `<workspace>/build/lib` where `capi/link.sh` puts it. The binary
//! gets the run path `$ORIGIN/../lib`, so `PREFIX/bin/fi_info` finds
//! `PREFIX/lib/libfabric.so.1`.
//!
//! When no library has been linked yet (a plain `cargo build` of a fresh
//! clone), the binary is linked against a stand-in made here: a shared
//! object with the same soname that exports every symbol at the version
//! node the real library makes its default (from `tests/abi/symbols.tsv`).
//! The result records the same needed library and symbol versions, so it
//! runs unchanged against the real `libfabric.so.1`.
#![forbid(unsafe_code)]

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let workspace = manifest.join("../..");
    let symbols = workspace.join("tests/abi/symbols.tsv");
    println!("cargo:rerun-if-env-changed=RFABRIC_LIB_DIR");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed={}", symbols.display());

    let lib_dir = env::var_os("RFABRIC_LIB_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace.join("build/lib"));

    let dir = if lib_dir.join("libfabric.so").exists() {
        lib_dir
    } else {
        let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
        make_stand_in(&symbols, &out);
        println!(
            "cargo:warning=no libfabric.so in {}: linking fi_info against a stand-in with the same symbol versions",
            lib_dir.display()
        );
        out
    };
    println!("cargo:rustc-link-search=native={}", dir.display());
    println!("cargo:rustc-link-arg-bins=-Wl,-rpath,$ORIGIN/../lib");
}

/// Build `out/libfabric.so` exporting each default symbol of `symbols`.
fn make_stand_in(symbols: &Path, out: &Path) {
    let table = fs::read_to_string(symbols).unwrap_or_else(|e| panic!("read {}: {e}", symbols.display()));
    // (node, symbols whose default definition lives there), nodes in the
    // order of the chain.
    let mut nodes: Vec<(String, Vec<String>)> = Vec::new();
    for line in table.lines().skip(1) {
        let cols: Vec<&str> = line.split('\t').collect();
        if cols.len() < 3 || cols[2] != "default" {
            continue;
        }
        let (sym, node) = (cols[0].to_string(), cols[1].to_string());
        match nodes.iter_mut().find(|(n, _)| *n == node) {
            Some((_, syms)) => syms.push(sym),
            None => nodes.push((node, vec![sym])),
        }
    }
    nodes.sort_by_key(|(n, _)| node_order(n));
    assert!(!nodes.is_empty(), "{}: no default symbols", symbols.display());

    let mut script = String::new();
    let mut source = String::from("/* Stand-in for linking only; never run. */\n");
    let mut prev: Option<&str> = None;
    for (i, (node, syms)) in nodes.iter().enumerate() {
        script.push_str(&format!("{node} {{\n\tglobal:\n"));
        for s in syms {
            script.push_str(&format!("\t\t{s};\n"));
            source.push_str(&format!("void {s}(void) {{}}\n"));
        }
        if i == 0 {
            script.push_str("\tlocal:\n\t\t*;\n");
        }
        match prev {
            Some(p) => script.push_str(&format!("}} {p};\n")),
            None => script.push_str("};\n"),
        }
        prev = Some(node);
    }
    let map = out.join("stand-in.map");
    let src = out.join("stand-in.c");
    fs::write(&map, script).expect("write stand-in.map");
    fs::write(&src, source).expect("write stand-in.c");

    let cc = env::var("CC").unwrap_or_else(|_| "cc".into());
    let status = Command::new(&cc)
        .arg("-shared")
        .arg("-fPIC")
        .arg("-o")
        .arg(out.join("libfabric.so"))
        .arg(&src)
        .arg(format!("-Wl,--version-script={}", map.display()))
        .arg("-Wl,-soname,libfabric.so.1")
        .status()
        .unwrap_or_else(|e| panic!("run {cc}: {e}"));
    assert!(status.success(), "{cc} failed to link the libfabric stand-in");
}

/// `FABRIC_1.10` -> (1, 10), so nodes sort as the chain runs.
fn node_order(node: &str) -> (u32, u32) {
    let v = node.trim_start_matches("FABRIC_");
    let mut parts = v.split('.').map(|p| p.parse().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}
