//! Compiles the device kernels with warnings as errors, against the
//! project's own headers.
#![forbid(unsafe_code)]

fn main() {
    println!("cargo:rerun-if-changed=../kernels.c");
    println!("cargo:rerun-if-changed=../../../include/rdma/fi_xpu_device.h");
    println!("cargo:rerun-if-changed=../../../include/rdma/fi_xpu.h");
    cc::Build::new()
        .file("../kernels.c")
        .include("../../../include")
        .flag("-std=c11")
        .flag("-pedantic")
        .flag("-Werror")
        .warnings(true)
        .extra_warnings(true)
        .compile("xpu_kernels");
}
