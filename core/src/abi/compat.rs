//! The older shapes of `fi_info` and its attribute structs, which the
//! versioned compat symbols (`fi_getinfo@FABRIC_1.0` ... `@FABRIC_1.9`) hand
//! out and take back. Shapes listed in `tests/abi/layout-compat.tsv` are
//! structs here; a version whose struct did not change from an earlier (or
//! from the current) shape is a type alias to that shape, following the
//! history of the ABI:
//!
//! - `fi_tx_attr`: 1.0 shape up to 1.2 (no `tclass`), current from 1.3;
//! - `fi_rx_attr`: unchanged since 1.0;
//! - `fi_ep_attr`: 1.0 shape, then the 1.9 shape (with the auth key) from 1.1
//!   to 1.9; the current one adds `xpu_ctx`;
//! - `fi_domain_attr`: 1.0, 1.1 (= 1.2), 1.3 (to 1.6), 1.7, 1.8, 1.9;
//! - `fi_fabric_attr`: 1.0 shape, current from 1.1 (`api_version`);
//! - `fid_nic`: unchanged since it appeared in 1.2.
//!
//! The `next` member of every old `fi_info` is typed `*mut fi_info` as in C:
//! a list is of one shape throughout, and the caller casts.

use core::ffi::{c_char, c_int, c_void};

use super::consts::*;
use super::types::*;

pub type fi_tx_attr_1_1 = fi_tx_attr_1_0;
pub type fi_tx_attr_1_2 = fi_tx_attr_1_0;
pub type fi_tx_attr_1_3 = fi_tx_attr;
pub type fi_tx_attr_1_7 = fi_tx_attr;
pub type fi_tx_attr_1_8 = fi_tx_attr;
pub type fi_tx_attr_1_9 = fi_tx_attr;

pub type fi_rx_attr_1_0 = fi_rx_attr;
pub type fi_rx_attr_1_1 = fi_rx_attr;
pub type fi_rx_attr_1_2 = fi_rx_attr;
pub type fi_rx_attr_1_3 = fi_rx_attr;
pub type fi_rx_attr_1_7 = fi_rx_attr;
pub type fi_rx_attr_1_8 = fi_rx_attr;
pub type fi_rx_attr_1_9 = fi_rx_attr;

pub type fi_ep_attr_1_1 = fi_ep_attr_1_9;
pub type fi_ep_attr_1_2 = fi_ep_attr_1_9;
pub type fi_ep_attr_1_3 = fi_ep_attr_1_9;
pub type fi_ep_attr_1_7 = fi_ep_attr_1_9;
pub type fi_ep_attr_1_8 = fi_ep_attr_1_9;

pub type fi_domain_attr_1_2 = fi_domain_attr_1_1;

pub type fi_fabric_attr_1_1 = fi_fabric_attr;
pub type fi_fabric_attr_1_2 = fi_fabric_attr;
pub type fi_fabric_attr_1_3 = fi_fabric_attr;
pub type fi_fabric_attr_1_7 = fi_fabric_attr;
pub type fi_fabric_attr_1_8 = fi_fabric_attr;
pub type fi_fabric_attr_1_9 = fi_fabric_attr;

pub type fid_nic_1_2 = fid_nic;
pub type fid_nic_1_3 = fid_nic;
pub type fid_nic_1_7 = fid_nic;
pub type fid_nic_1_8 = fid_nic;
pub type fid_nic_1_9 = fid_nic;

/// `struct fi_fabric_attr_1_0`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_fabric_attr_1_0 {
    pub fabric: *mut fid_fabric,
    pub name: *mut c_char,
    pub prov_name: *mut c_char,
    pub prov_version: u32,
}

/// `struct fi_domain_attr_1_0`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_domain_attr_1_0 {
    pub domain: *mut fid_domain,
    pub name: *mut c_char,
    pub threading: fi_threading,
    pub control_progress: fi_progress,
    pub data_progress: fi_progress,
    pub resource_mgmt: fi_resource_mgmt,
    pub av_type: fi_av_type,
    pub mr_mode: c_int,
    pub mr_key_size: usize,
    pub cq_data_size: usize,
    pub cq_cnt: usize,
    pub ep_cnt: usize,
    pub tx_ctx_cnt: usize,
    pub rx_ctx_cnt: usize,
    pub max_ep_tx_ctx: usize,
    pub max_ep_rx_ctx: usize,
    pub max_ep_stx_ctx: usize,
    pub max_ep_srx_ctx: usize,
}

/// `struct fi_ep_attr_1_0`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_ep_attr_1_0 {
    pub r#type: fi_ep_type,
    pub protocol: u32,
    pub protocol_version: u32,
    pub max_msg_size: usize,
    pub msg_prefix_size: usize,
    pub max_order_raw_size: usize,
    pub max_order_war_size: usize,
    pub max_order_waw_size: usize,
    pub mem_tag_format: u64,
    pub tx_ctx_cnt: usize,
    pub rx_ctx_cnt: usize,
}

/// `struct fi_tx_attr_1_0`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_tx_attr_1_0 {
    pub caps: u64,
    pub mode: u64,
    pub op_flags: u64,
    pub msg_order: u64,
    pub comp_order: u64,
    pub inject_size: usize,
    pub size: usize,
    pub iov_limit: usize,
    pub rma_iov_limit: usize,
}

/// `struct fi_info_1_0`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_info_1_0 {
    pub next: *mut fi_info,
    pub caps: u64,
    pub mode: u64,
    pub addr_format: u32,
    pub src_addrlen: usize,
    pub dest_addrlen: usize,
    pub src_addr: *mut c_void,
    pub dest_addr: *mut c_void,
    pub handle: fid_t,
    pub tx_attr: *mut fi_tx_attr_1_0,
    pub rx_attr: *mut fi_rx_attr_1_0,
    pub ep_attr: *mut fi_ep_attr_1_0,
    pub domain_attr: *mut fi_domain_attr_1_0,
    pub fabric_attr: *mut fi_fabric_attr_1_0,
}

/// `struct fi_domain_attr_1_1`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_domain_attr_1_1 {
    pub domain: *mut fid_domain,
    pub name: *mut c_char,
    pub threading: fi_threading,
    pub control_progress: fi_progress,
    pub data_progress: fi_progress,
    pub resource_mgmt: fi_resource_mgmt,
    pub av_type: fi_av_type,
    pub mr_mode: c_int,
    pub mr_key_size: usize,
    pub cq_data_size: usize,
    pub cq_cnt: usize,
    pub ep_cnt: usize,
    pub tx_ctx_cnt: usize,
    pub rx_ctx_cnt: usize,
    pub max_ep_tx_ctx: usize,
    pub max_ep_rx_ctx: usize,
    pub max_ep_stx_ctx: usize,
    pub max_ep_srx_ctx: usize,
    pub cntr_cnt: usize,
    pub mr_iov_limit: usize,
    pub caps: u64,
    pub mode: u64,
    pub auth_key: *mut u8,
    pub auth_key_size: usize,
    pub max_err_data: usize,
    pub mr_cnt: usize,
}

/// `struct fi_info_1_1`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_info_1_1 {
    pub next: *mut fi_info,
    pub caps: u64,
    pub mode: u64,
    pub addr_format: u32,
    pub src_addrlen: usize,
    pub dest_addrlen: usize,
    pub src_addr: *mut c_void,
    pub dest_addr: *mut c_void,
    pub handle: fid_t,
    pub tx_attr: *mut fi_tx_attr_1_1,
    pub rx_attr: *mut fi_rx_attr_1_1,
    pub ep_attr: *mut fi_ep_attr_1_1,
    pub domain_attr: *mut fi_domain_attr_1_1,
    pub fabric_attr: *mut fi_fabric_attr_1_1,
}

/// `struct fi_info_1_2`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_info_1_2 {
    pub next: *mut fi_info,
    pub caps: u64,
    pub mode: u64,
    pub addr_format: u32,
    pub src_addrlen: usize,
    pub dest_addrlen: usize,
    pub src_addr: *mut c_void,
    pub dest_addr: *mut c_void,
    pub handle: fid_t,
    pub tx_attr: *mut fi_tx_attr_1_2,
    pub rx_attr: *mut fi_rx_attr_1_2,
    pub ep_attr: *mut fi_ep_attr_1_2,
    pub domain_attr: *mut fi_domain_attr_1_2,
    pub fabric_attr: *mut fi_fabric_attr_1_2,
    pub nic: *mut fid_nic_1_2,
}

/// `struct fi_domain_attr_1_3`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_domain_attr_1_3 {
    pub domain: *mut fid_domain,
    pub name: *mut c_char,
    pub threading: fi_threading,
    pub control_progress: fi_progress,
    pub data_progress: fi_progress,
    pub resource_mgmt: fi_resource_mgmt,
    pub av_type: fi_av_type,
    pub mr_mode: c_int,
    pub mr_key_size: usize,
    pub cq_data_size: usize,
    pub cq_cnt: usize,
    pub ep_cnt: usize,
    pub tx_ctx_cnt: usize,
    pub rx_ctx_cnt: usize,
    pub max_ep_tx_ctx: usize,
    pub max_ep_rx_ctx: usize,
    pub max_ep_stx_ctx: usize,
    pub max_ep_srx_ctx: usize,
    pub cntr_cnt: usize,
    pub mr_iov_limit: usize,
    pub caps: u64,
    pub mode: u64,
    pub auth_key: *mut u8,
    pub auth_key_size: usize,
    pub max_err_data: usize,
    pub mr_cnt: usize,
    pub tclass: u32,
}

/// `struct fi_info_1_3`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_info_1_3 {
    pub next: *mut fi_info,
    pub caps: u64,
    pub mode: u64,
    pub addr_format: u32,
    pub src_addrlen: usize,
    pub dest_addrlen: usize,
    pub src_addr: *mut c_void,
    pub dest_addr: *mut c_void,
    pub handle: fid_t,
    pub tx_attr: *mut fi_tx_attr_1_3,
    pub rx_attr: *mut fi_rx_attr_1_3,
    pub ep_attr: *mut fi_ep_attr_1_3,
    pub domain_attr: *mut fi_domain_attr_1_3,
    pub fabric_attr: *mut fi_fabric_attr_1_3,
    pub nic: *mut fid_nic_1_3,
}

/// `struct fi_domain_attr_1_7`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_domain_attr_1_7 {
    pub domain: *mut fid_domain,
    pub name: *mut c_char,
    pub threading: fi_threading,
    pub control_progress: fi_progress,
    pub data_progress: fi_progress,
    pub resource_mgmt: fi_resource_mgmt,
    pub av_type: fi_av_type,
    pub mr_mode: c_int,
    pub mr_key_size: usize,
    pub cq_data_size: usize,
    pub cq_cnt: usize,
    pub ep_cnt: usize,
    pub tx_ctx_cnt: usize,
    pub rx_ctx_cnt: usize,
    pub max_ep_tx_ctx: usize,
    pub max_ep_rx_ctx: usize,
    pub max_ep_stx_ctx: usize,
    pub max_ep_srx_ctx: usize,
    pub cntr_cnt: usize,
    pub mr_iov_limit: usize,
    pub caps: u64,
    pub mode: u64,
    pub auth_key: *mut u8,
    pub auth_key_size: usize,
    pub max_err_data: usize,
    pub mr_cnt: usize,
    pub tclass: u32,
    pub max_ep_auth_key: usize,
}

/// `struct fi_info_1_7`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_info_1_7 {
    pub next: *mut fi_info,
    pub caps: u64,
    pub mode: u64,
    pub addr_format: u32,
    pub src_addrlen: usize,
    pub dest_addrlen: usize,
    pub src_addr: *mut c_void,
    pub dest_addr: *mut c_void,
    pub handle: fid_t,
    pub tx_attr: *mut fi_tx_attr_1_7,
    pub rx_attr: *mut fi_rx_attr_1_7,
    pub ep_attr: *mut fi_ep_attr_1_7,
    pub domain_attr: *mut fi_domain_attr_1_7,
    pub fabric_attr: *mut fi_fabric_attr_1_7,
    pub nic: *mut fid_nic_1_7,
}

/// `struct fi_domain_attr_1_8`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_domain_attr_1_8 {
    pub domain: *mut fid_domain,
    pub name: *mut c_char,
    pub threading: fi_threading,
    pub control_progress: fi_progress,
    pub data_progress: fi_progress,
    pub resource_mgmt: fi_resource_mgmt,
    pub av_type: fi_av_type,
    pub mr_mode: c_int,
    pub mr_key_size: usize,
    pub cq_data_size: usize,
    pub cq_cnt: usize,
    pub ep_cnt: usize,
    pub tx_ctx_cnt: usize,
    pub rx_ctx_cnt: usize,
    pub max_ep_tx_ctx: usize,
    pub max_ep_rx_ctx: usize,
    pub max_ep_stx_ctx: usize,
    pub max_ep_srx_ctx: usize,
    pub cntr_cnt: usize,
    pub mr_iov_limit: usize,
    pub caps: u64,
    pub mode: u64,
    pub auth_key: *mut u8,
    pub auth_key_size: usize,
    pub max_err_data: usize,
    pub mr_cnt: usize,
    pub tclass: u32,
    pub max_ep_auth_key: usize,
    pub max_group_id: u32,
}

/// `struct fi_info_1_8`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_info_1_8 {
    pub next: *mut fi_info,
    pub caps: u64,
    pub mode: u64,
    pub addr_format: u32,
    pub src_addrlen: usize,
    pub dest_addrlen: usize,
    pub src_addr: *mut c_void,
    pub dest_addr: *mut c_void,
    pub handle: fid_t,
    pub tx_attr: *mut fi_tx_attr_1_8,
    pub rx_attr: *mut fi_rx_attr_1_8,
    pub ep_attr: *mut fi_ep_attr_1_8,
    pub domain_attr: *mut fi_domain_attr_1_8,
    pub fabric_attr: *mut fi_fabric_attr_1_8,
    pub nic: *mut fid_nic_1_8,
}

/// `struct fi_ep_attr_1_9`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_ep_attr_1_9 {
    pub r#type: fi_ep_type,
    pub protocol: u32,
    pub protocol_version: u32,
    pub max_msg_size: usize,
    pub msg_prefix_size: usize,
    pub max_order_raw_size: usize,
    pub max_order_war_size: usize,
    pub max_order_waw_size: usize,
    pub mem_tag_format: u64,
    pub tx_ctx_cnt: usize,
    pub rx_ctx_cnt: usize,
    pub auth_key_size: usize,
    pub auth_key: *mut u8,
}

/// `struct fi_domain_attr_1_9`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_domain_attr_1_9 {
    pub domain: *mut fid_domain,
    pub name: *mut c_char,
    pub threading: fi_threading,
    pub control_progress: fi_progress,
    pub data_progress: fi_progress,
    pub resource_mgmt: fi_resource_mgmt,
    pub av_type: fi_av_type,
    pub mr_mode: c_int,
    pub mr_key_size: usize,
    pub cq_data_size: usize,
    pub cq_cnt: usize,
    pub ep_cnt: usize,
    pub tx_ctx_cnt: usize,
    pub rx_ctx_cnt: usize,
    pub max_ep_tx_ctx: usize,
    pub max_ep_rx_ctx: usize,
    pub max_ep_stx_ctx: usize,
    pub max_ep_srx_ctx: usize,
    pub cntr_cnt: usize,
    pub mr_iov_limit: usize,
    pub caps: u64,
    pub mode: u64,
    pub auth_key: *mut u8,
    pub auth_key_size: usize,
    pub max_err_data: usize,
    pub mr_cnt: usize,
    pub tclass: u32,
    pub max_ep_auth_key: usize,
    pub max_group_id: u32,
    pub max_cntr_value: u64,
    pub max_err_cntr_value: u64,
}

/// `struct fi_info_1_9`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_info_1_9 {
    pub next: *mut fi_info,
    pub caps: u64,
    pub mode: u64,
    pub addr_format: u32,
    pub src_addrlen: usize,
    pub dest_addrlen: usize,
    pub src_addr: *mut c_void,
    pub dest_addr: *mut c_void,
    pub handle: fid_t,
    pub tx_attr: *mut fi_tx_attr_1_9,
    pub rx_attr: *mut fi_rx_attr_1_9,
    pub ep_attr: *mut fi_ep_attr_1_9,
    pub domain_attr: *mut fi_domain_attr_1_9,
    pub fabric_attr: *mut fi_fabric_attr_1_9,
    pub nic: *mut fid_nic_1_9,
}

/// Implements `Default` as the all-zero value.
macro_rules! zeroed_default {
    ($($t:ty),* $(,)?) => {$(
        impl Default for $t {
            fn default() -> Self {
                // SAFETY: every member is an integer, a C enum value or a raw
                // pointer, for which all-zero bits are valid (0 or null).
                unsafe { core::mem::zeroed() }
            }
        }
    )*};
}

zeroed_default!(
    fi_fabric_attr_1_0, fi_domain_attr_1_0, fi_ep_attr_1_0, fi_tx_attr_1_0,
    fi_info_1_0, fi_domain_attr_1_1, fi_info_1_1, fi_info_1_2,
    fi_domain_attr_1_3, fi_info_1_3, fi_domain_attr_1_7, fi_info_1_7,
    fi_domain_attr_1_8, fi_info_1_8, fi_ep_attr_1_9, fi_domain_attr_1_9,
    fi_info_1_9,
);
