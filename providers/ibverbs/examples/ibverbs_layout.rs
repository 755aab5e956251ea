//! Prints the layout report of rfabric-ibverbs' `sys` types: `rust` (as
//! Rust lays them out) or `c` (the C program that prints the same report
//! from rdma-core's headers). Used by tests/ibverbs/layout.sh.
#![forbid(unsafe_code)]

fn main() {
    match std::env::args().nth(1).as_deref() {
        Some("rust") => print!("{}", rfabric_ibverbs::layout::rust_report()),
        Some("c") => print!("{}", rfabric_ibverbs::layout::c_program()),
        _ => {
            eprintln!("usage: ibverbs_layout rust|c");
            std::process::exit(2);
        }
    }
}
