//! Compiles the few entry points that must be C: the variadic ones
//! (`fi_log`, `fi_param_define`), which stable Rust cannot define.
#![forbid(unsafe_code)]

fn main() {
    println!("cargo:rerun-if-changed=csrc/fi_log.c");
    cc::Build::new()
        .file("csrc/fi_log.c")
        .flag_if_supported("-std=gnu11")
        .warnings(true)
        .extra_warnings(true)
        .compile("rfabric_cvar");
}
