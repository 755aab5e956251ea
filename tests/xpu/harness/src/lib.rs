//! The device functions of `<rdma/fi_xpu_device.h>`, compiled from C
//! (`tests/xpu/kernels.c`), run in host threads against the host side of
//! `rfabric_core::xpu`: work queue drained by a proxy thread into a loopback
//! peer, completion ring, counter, application callbacks.

use libc::{c_int, c_void};
use rfabric_core::abi::{fid_xpu, fid_xpu_cntr, fid_xpu_cq, fid_xpu_ep};

extern "C" {
    pub fn xk_tsend_n(ep: *const fid_xpu_ep, dest: *const u64, bufs: *const u8, len: usize, n: usize, tag_base: u64, ctx_base: usize, scope: c_int) -> c_int;
    pub fn xk_send(ep: *const fid_xpu_ep, dest: *const u64, buf: *const c_void, len: usize, ctx: usize, scope: c_int) -> c_int;
    pub fn xk_write_n(ep: *const fid_xpu_ep, dest: *const u64, src: *const u8, len: usize, n: usize, raddr: u64, key: u64, ctx_base: usize, scope: c_int) -> c_int;
    pub fn xk_cq_read_n(cq: *const fid_xpu_cq, ctxs: *mut u64, tags: *mut u64, n: usize, scope: c_int) -> c_int;
    pub fn xk_cq_readerr(cq: *const fid_xpu_cq, ctx: *mut u64, scope: c_int) -> c_int;
    pub fn xk_cntr_wait(c: *const fid_xpu_cntr, threshold: u64, timeout: c_int, scope: c_int) -> c_int;
    pub fn xk_cntr_read(c: *const fid_xpu_cntr, scope: c_int) -> u64;
    pub fn xk_cntr_readerr(c: *const fid_xpu_cntr, scope: c_int) -> u64;
    pub fn xk_bad_input(ep: *const fid_xpu_ep, cq: *const fid_xpu_cq, cntr: *const fid_xpu_cntr) -> c_int;
}

pub fn ep(h: fid_xpu) -> fid_xpu_ep {
    fid_xpu_ep { fid: h }
}
pub fn cq(h: fid_xpu) -> fid_xpu_cq {
    fid_xpu_cq { fid: h }
}
pub fn cntr(h: fid_xpu) -> fid_xpu_cntr {
    fid_xpu_cntr { fid: h }
}

#[cfg(test)]
mod tests;
