//! `#[repr(C)]` mirrors of the structs of the C API, one per `struct` of
//! `tests/abi/layout.tsv`, with the C names of types and members.
//!
//! Pointers stay raw pointers, function-pointer members are
//! `Option<unsafe extern "C" fn(..)>` (a null slot is `None`), and C enums are
//! the `u32` aliases of `consts.rs`. Anonymous unions become named union types
//! (`<struct>__anon<N>`, reached through a member `anon<N>`); named union
//! members get a type `<struct>__<member>`. A C member called `type` is
//! `r#type` here. `tests/abi_layout.rs` checks every size and offset.
//!
//! One deliberate difference from the reference table: `fi_xpu_ops.import`
//! takes an `fd: c_int` after `flags` (same slot, same size).

// Function-pointer members spell out their C prototypes on purpose.
#![allow(clippy::type_complexity)]

use core::ffi::{c_char, c_int, c_void};

use super::consts::*;

/// Fabric address handle (`fi_addr_t`).
pub type fi_addr_t = u64;
/// Generic object handle (`fid_t`).
pub type fid_t = *mut fid;

/// `struct fid`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fid {
    pub fclass: usize,
    pub context: *mut c_void,
    pub ops: *mut fi_ops,
}

/// `struct fi_ioc`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_ioc {
    pub addr: *mut c_void,
    pub count: usize,
}

/// `struct fi_tx_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_tx_attr {
    pub caps: u64,
    pub mode: u64,
    pub op_flags: u64,
    pub msg_order: u64,
    pub comp_order: u64,
    pub inject_size: usize,
    pub size: usize,
    pub iov_limit: usize,
    pub rma_iov_limit: usize,
    pub tclass: u32,
}

/// `struct fi_rx_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_rx_attr {
    pub caps: u64,
    pub mode: u64,
    pub op_flags: u64,
    pub msg_order: u64,
    pub comp_order: u64,
    pub total_buffered_recv: usize,
    pub size: usize,
    pub iov_limit: usize,
}

/// `struct fi_ep_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_ep_attr {
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
    pub xpu_ctx: *mut fid_xpu_ctx,
}

/// `struct fid_xpu_ctx`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fid_xpu_ctx {
    pub fid: fid,
    pub ops: *mut fi_ops_xpu_ctx,
}

/// `struct fi_domain_attr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct fi_domain_attr {
    pub domain: *mut fid_domain,
    pub name: *mut c_char,
    pub threading: fi_threading,
    pub control_progress: fi_progress,
    pub anon0: fi_domain_attr__anon0,
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
    pub max_xpu_ctx_cnt: usize,
}

/// `data_progress` and its newer name `progress` share one slot.
#[repr(C)]
#[derive(Clone, Copy)]
pub union fi_domain_attr__anon0 {
    pub data_progress: fi_progress,
    pub progress: fi_progress,
}

/// `struct fid_domain`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fid_domain {
    pub fid: fid,
    pub ops: *mut fi_ops_domain,
    pub mr: *mut fi_ops_mr,
}

/// `struct fi_fabric_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_fabric_attr {
    pub fabric: *mut fid_fabric,
    pub name: *mut c_char,
    pub prov_name: *mut c_char,
    pub prov_version: u32,
    pub api_version: u32,
}

/// `struct fid_fabric`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fid_fabric {
    pub fid: fid,
    pub ops: *mut fi_ops_fabric,
    pub api_version: u32,
}

/// `struct fi_info`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_info {
    pub next: *mut fi_info,
    pub caps: u64,
    pub mode: u64,
    pub addr_format: u32,
    pub src_addrlen: usize,
    pub dest_addrlen: usize,
    pub src_addr: *mut c_void,
    pub dest_addr: *mut c_void,
    pub handle: fid_t,
    pub tx_attr: *mut fi_tx_attr,
    pub rx_attr: *mut fi_rx_attr,
    pub ep_attr: *mut fi_ep_attr,
    pub domain_attr: *mut fi_domain_attr,
    pub fabric_attr: *mut fi_fabric_attr,
    pub nic: *mut fid_nic,
}

/// `struct fid_nic`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fid_nic {
    pub fid: fid,
    pub device_attr: *mut fi_device_attr,
    pub bus_attr: *mut fi_bus_attr,
    pub link_attr: *mut fi_link_attr,
    pub prov_attr: *mut c_void,
}

/// `struct fi_device_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_device_attr {
    pub name: *mut c_char,
    pub device_id: *mut c_char,
    pub device_version: *mut c_char,
    pub vendor_id: *mut c_char,
    pub driver: *mut c_char,
    pub firmware: *mut c_char,
}

/// `struct fi_pci_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_pci_attr {
    pub domain_id: u16,
    pub bus_id: u8,
    pub device_id: u8,
    pub function_id: u8,
}

/// `struct fi_bus_attr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct fi_bus_attr {
    pub bus_type: fi_bus_type,
    pub attr: fi_bus_attr__attr,
}

/// Bus-specific attributes, selected by `bus_type`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union fi_bus_attr__attr {
    pub pci: fi_pci_attr,
}

/// `struct fi_link_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_link_attr {
    pub address: *mut c_char,
    pub mtu: usize,
    pub speed: usize,
    pub state: fi_link_state,
    pub network_type: *mut c_char,
}

/// `struct fi_ops`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_ops {
    pub size: usize,
    pub close: Option<unsafe extern "C" fn(*mut fid) -> c_int>,
    pub bind: Option<unsafe extern "C" fn(*mut fid, *mut fid, u64) -> c_int>,
    pub control: Option<unsafe extern "C" fn(*mut fid, c_int, *mut c_void) -> c_int>,
    pub ops_open: Option<unsafe extern "C" fn(*mut fid, *const c_char, u64, *mut *mut c_void, *mut c_void) -> c_int>,
    pub tostr: Option<unsafe extern "C" fn(*const fid, *mut c_char, usize) -> c_int>,
    pub ops_set: Option<unsafe extern "C" fn(*mut fid, *const c_char, u64, *mut c_void, *mut c_void) -> c_int>,
}

/// `struct fi_ops_fabric`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_ops_fabric {
    pub size: usize,
    pub domain: Option<unsafe extern "C" fn(*mut fid_fabric, *mut fi_info, *mut *mut fid_domain, *mut c_void) -> c_int>,
    pub passive_ep: Option<unsafe extern "C" fn(*mut fid_fabric, *mut fi_info, *mut *mut fid_pep, *mut c_void) -> c_int>,
    pub eq_open: Option<unsafe extern "C" fn(*mut fid_fabric, *mut fi_eq_attr, *mut *mut fid_eq, *mut c_void) -> c_int>,
    pub wait_open: Option<unsafe extern "C" fn(*mut fid_fabric, *mut fi_wait_attr, *mut *mut fid_wait) -> c_int>,
    pub trywait: Option<unsafe extern "C" fn(*mut fid_fabric, *mut *mut fid, c_int) -> c_int>,
    pub domain2: Option<unsafe extern "C" fn(*mut fid_fabric, *mut fi_info, *mut *mut fid_domain, u64, *mut c_void) -> c_int>,
}

/// `struct fid_pep`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fid_pep {
    pub fid: fid,
    pub ops: *mut fi_ops_ep,
    pub cm: *mut fi_ops_cm,
}

/// `struct fi_eq_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_eq_attr {
    pub size: usize,
    pub flags: u64,
    pub wait_obj: fi_wait_obj,
    pub signaling_vector: c_int,
    pub wait_set: *mut fid_wait,
}

/// `struct fid_eq`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fid_eq {
    pub fid: fid,
    pub ops: *mut fi_ops_eq,
}

/// `struct fi_wait_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_wait_attr {
    pub wait_obj: fi_wait_obj,
    pub flags: u64,
}

/// `struct fid_wait`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fid_wait {
    pub fid: fid,
    pub ops: *mut fi_ops_wait,
}

/// `struct fi_alias`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_alias {
    pub fid: *mut *mut fid,
    pub flags: u64,
}

/// `struct fi_fid_var`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_fid_var {
    pub name: c_int,
    pub val: *mut c_void,
}

/// `struct fi_mr_raw_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_mr_raw_attr {
    pub flags: u64,
    pub base_addr: *mut u64,
    pub raw_key: *mut u8,
    pub key_size: *mut usize,
}

/// `struct fi_mr_xpu_desc`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_mr_xpu_desc {
    pub buf: *mut c_void,
    pub len: *mut usize,
    pub flags: u64,
    pub ctx: *mut fid_xpu_ctx,
}

/// `struct fi_mr_map_raw`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_mr_map_raw {
    pub flags: u64,
    pub base_addr: u64,
    pub raw_key: *mut u8,
    pub key_size: usize,
    pub key: *mut u64,
}

/// `struct fi_param`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_param {
    pub name: *const c_char,
    pub r#type: fi_param_type,
    pub help_string: *const c_char,
    pub value: *const c_char,
}

/// `struct fi_context`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_context {
    pub internal: [*mut c_void; 4],
}

/// `struct fi_context2`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_context2 {
    pub internal: [*mut c_void; 8],
}

/// `struct fi_recv_context`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_recv_context {
    pub ep: *mut fid_ep,
    pub context: *mut c_void,
}

/// `struct fid_ep`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fid_ep {
    pub fid: fid,
    pub ops: *mut fi_ops_ep,
    pub cm: *mut fi_ops_cm,
    pub msg: *mut fi_ops_msg,
    pub rma: *mut fi_ops_rma,
    pub tagged: *mut fi_ops_tagged,
    pub atomic: *mut fi_ops_atomic,
    pub collective: *mut fi_ops_collective,
}

/// `struct fi_ops_wait`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_ops_wait {
    pub size: usize,
    pub wait: Option<unsafe extern "C" fn(*mut fid_wait, c_int) -> c_int>,
}

/// `struct fi_mutex_cond`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_mutex_cond {
    pub mutex: *mut libc::pthread_mutex_t,
    pub cond: *mut libc::pthread_cond_t,
}

/// `struct fi_wait_pollfd`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_wait_pollfd {
    pub change_index: u64,
    pub nfds: usize,
    pub fd: *mut libc::pollfd,
}

/// `struct fi_poll_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_poll_attr {
    pub flags: u64,
}

/// `struct fi_ops_poll`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_ops_poll {
    pub size: usize,
    pub poll: Option<unsafe extern "C" fn(*mut fid_poll, *mut *mut c_void, c_int) -> c_int>,
    pub poll_add: Option<unsafe extern "C" fn(*mut fid_poll, *mut fid, u64) -> c_int>,
    pub poll_del: Option<unsafe extern "C" fn(*mut fid_poll, *mut fid, u64) -> c_int>,
}

/// `struct fid_poll`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fid_poll {
    pub fid: fid,
    pub ops: *mut fi_ops_poll,
}

/// `struct fi_eq_entry`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_eq_entry {
    pub fid: fid_t,
    pub context: *mut c_void,
    pub data: u64,
}

/// `struct fi_eq_err_entry`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_eq_err_entry {
    pub fid: fid_t,
    pub context: *mut c_void,
    pub data: u64,
    pub err: c_int,
    pub prov_errno: c_int,
    pub err_data: *mut c_void,
    pub err_data_size: usize,
}

/// `struct fi_eq_cm_entry`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_eq_cm_entry {
    pub fid: fid_t,
    pub info: *mut fi_info,
    pub data: [u8; 0],
}

/// `struct fi_ops_eq`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_ops_eq {
    pub size: usize,
    pub read: Option<unsafe extern "C" fn(*mut fid_eq, *mut u32, *mut c_void, usize, u64) -> isize>,
    pub readerr: Option<unsafe extern "C" fn(*mut fid_eq, *mut fi_eq_err_entry, u64) -> isize>,
    pub write: Option<unsafe extern "C" fn(*mut fid_eq, u32, *const c_void, usize, u64) -> isize>,
    pub sread: Option<unsafe extern "C" fn(*mut fid_eq, *mut u32, *mut c_void, usize, c_int, u64) -> isize>,
    pub strerror: Option<unsafe extern "C" fn(*mut fid_eq, c_int, *const c_void, *mut c_char, usize) -> *const c_char>,
}

/// `struct fi_cq_entry`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_cq_entry {
    pub op_context: *mut c_void,
}

/// `struct fi_cq_msg_entry`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_cq_msg_entry {
    pub op_context: *mut c_void,
    pub flags: u64,
    pub len: usize,
}

/// `struct fi_cq_data_entry`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_cq_data_entry {
    pub op_context: *mut c_void,
    pub flags: u64,
    pub len: usize,
    pub buf: *mut c_void,
    pub data: u64,
}

/// `struct fi_cq_tagged_entry`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_cq_tagged_entry {
    pub op_context: *mut c_void,
    pub flags: u64,
    pub len: usize,
    pub buf: *mut c_void,
    pub data: u64,
    pub tag: u64,
}

/// `struct fi_cq_err_entry`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_cq_err_entry {
    pub op_context: *mut c_void,
    pub flags: u64,
    pub len: usize,
    pub buf: *mut c_void,
    pub data: u64,
    pub tag: u64,
    pub olen: usize,
    pub err: c_int,
    pub prov_errno: c_int,
    pub err_data: *mut c_void,
    pub err_data_size: usize,
    pub src_addr: fi_addr_t,
}

/// `struct fi_cq_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_cq_attr {
    pub size: usize,
    pub flags: u64,
    pub format: fi_cq_format,
    pub wait_obj: fi_wait_obj,
    pub signaling_vector: c_int,
    pub wait_cond: fi_cq_wait_cond,
    pub wait_set: *mut fid_wait,
    pub xpu_ctx: *mut fid_xpu_ctx,
}

/// `struct fi_ops_cq`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_ops_cq {
    pub size: usize,
    pub read: Option<unsafe extern "C" fn(*mut fid_cq, *mut c_void, usize) -> isize>,
    pub readfrom: Option<unsafe extern "C" fn(*mut fid_cq, *mut c_void, usize, *mut fi_addr_t) -> isize>,
    pub readerr: Option<unsafe extern "C" fn(*mut fid_cq, *mut fi_cq_err_entry, u64) -> isize>,
    pub sread: Option<unsafe extern "C" fn(*mut fid_cq, *mut c_void, usize, *const c_void, c_int) -> isize>,
    pub sreadfrom: Option<unsafe extern "C" fn(*mut fid_cq, *mut c_void, usize, *mut fi_addr_t, *const c_void, c_int) -> isize>,
    pub signal: Option<unsafe extern "C" fn(*mut fid_cq) -> c_int>,
    pub strerror: Option<unsafe extern "C" fn(*mut fid_cq, c_int, *const c_void, *mut c_char, usize) -> *const c_char>,
    pub export_xpu: Option<unsafe extern "C" fn(*mut fid_cq, u64, *mut fid_xpu_cq) -> c_int>,
}

/// `struct fid_cq`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fid_cq {
    pub fid: fid,
    pub ops: *mut fi_ops_cq,
}

/// `struct fid_xpu_cq`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fid_xpu_cq {
    pub fid: fid_xpu,
}

/// `struct fi_cntr_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_cntr_attr {
    pub events: fi_cntr_events,
    pub wait_obj: fi_wait_obj,
    pub wait_set: *mut fid_wait,
    pub flags: u64,
    pub xpu_ctx: *mut fid_xpu_ctx,
}

/// `struct fi_ops_cntr`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_ops_cntr {
    pub size: usize,
    pub read: Option<unsafe extern "C" fn(*mut fid_cntr) -> u64>,
    pub readerr: Option<unsafe extern "C" fn(*mut fid_cntr) -> u64>,
    pub add: Option<unsafe extern "C" fn(*mut fid_cntr, u64) -> c_int>,
    pub set: Option<unsafe extern "C" fn(*mut fid_cntr, u64) -> c_int>,
    pub wait: Option<unsafe extern "C" fn(*mut fid_cntr, u64, c_int) -> c_int>,
    pub adderr: Option<unsafe extern "C" fn(*mut fid_cntr, u64) -> c_int>,
    pub seterr: Option<unsafe extern "C" fn(*mut fid_cntr, u64) -> c_int>,
    pub export_xpu: Option<unsafe extern "C" fn(*mut fid_cntr, u64, *mut fid_xpu_cntr) -> c_int>,
}

/// `struct fid_cntr`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fid_cntr {
    pub fid: fid,
    pub ops: *mut fi_ops_cntr,
}

/// `struct fid_xpu_cntr`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fid_xpu_cntr {
    pub fid: fid_xpu,
}

/// `struct fi_av_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_av_attr {
    pub r#type: fi_av_type,
    pub rx_ctx_bits: c_int,
    pub count: usize,
    pub ep_per_node: usize,
    pub name: *const c_char,
    pub map_addr: *mut c_void,
    pub flags: u64,
}

/// `struct fi_av_set_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_av_set_attr {
    pub count: usize,
    pub start_addr: fi_addr_t,
    pub end_addr: fi_addr_t,
    pub stride: u64,
    pub comm_key_size: usize,
    pub comm_key: *mut u8,
    pub flags: u64,
}

/// `struct fi_ops_av`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_ops_av {
    pub size: usize,
    pub insert: Option<unsafe extern "C" fn(*mut fid_av, *const c_void, usize, *mut fi_addr_t, u64, *mut c_void) -> c_int>,
    pub insertsvc: Option<unsafe extern "C" fn(*mut fid_av, *const c_char, *const c_char, *mut fi_addr_t, u64, *mut c_void) -> c_int>,
    pub insertsym: Option<unsafe extern "C" fn(*mut fid_av, *const c_char, usize, *const c_char, usize, *mut fi_addr_t, u64, *mut c_void) -> c_int>,
    pub remove: Option<unsafe extern "C" fn(*mut fid_av, *mut fi_addr_t, usize, u64) -> c_int>,
    pub lookup: Option<unsafe extern "C" fn(*mut fid_av, fi_addr_t, *mut c_void, *mut usize) -> c_int>,
    pub straddr: Option<unsafe extern "C" fn(*mut fid_av, *const c_void, *mut c_char, *mut usize) -> *const c_char>,
    pub av_set: Option<unsafe extern "C" fn(*mut fid_av, *mut fi_av_set_attr, *mut *mut fid_av_set, *mut c_void) -> c_int>,
    pub insert_auth_key: Option<unsafe extern "C" fn(*mut fid_av, *const c_void, usize, *mut fi_addr_t, u64) -> c_int>,
    pub lookup_auth_key: Option<unsafe extern "C" fn(*mut fid_av, fi_addr_t, *mut c_void, *mut usize) -> c_int>,
    pub set_user_id: Option<unsafe extern "C" fn(*mut fid_av, fi_addr_t, fi_addr_t, u64) -> c_int>,
    pub lookup2: Option<unsafe extern "C" fn(*mut fid_av, fi_addr_t, *mut c_void, *mut usize, u64, *mut fid_xpu_ctx) -> c_int>,
}

/// `struct fid_av`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fid_av {
    pub fid: fid,
    pub ops: *mut fi_ops_av,
}

/// `struct fid_av_set`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fid_av_set {
    pub fid: fid,
    pub ops: *mut fi_ops_av_set,
}

/// `struct fid_mr`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fid_mr {
    pub fid: fid,
    pub mem_desc: *mut c_void,
    pub key: u64,
}

/// `struct fi_mr_dmabuf`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_mr_dmabuf {
    pub fd: c_int,
    pub offset: u64,
    pub len: usize,
    pub base_addr: *mut c_void,
}

/// `struct fi_mr_auth_key`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_mr_auth_key {
    pub av: *mut fid_av,
    pub src_addr: fi_addr_t,
}

/// `struct fi_mr_attr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct fi_mr_attr {
    pub anon0: fi_mr_attr__anon0,
    pub iov_count: usize,
    pub access: u64,
    pub offset: u64,
    pub requested_key: u64,
    pub context: *mut c_void,
    pub auth_key_size: usize,
    pub auth_key: *mut u8,
    pub iface: fi_hmem_iface,
    pub device: fi_mr_attr__device,
    pub hmem_data: *mut c_void,
    pub page_size: usize,
    pub base_mr: *const fid_mr,
    pub sub_mr_cnt: usize,
}

/// The region: an iovec array, or a dma-buf description when `FI_MR_DMABUF` is set.
#[repr(C)]
#[derive(Clone, Copy)]
pub union fi_mr_attr__anon0 {
    pub mr_iov: *const libc::iovec,
    pub dmabuf: *const fi_mr_dmabuf,
}

/// Device id for the memory interface named by `iface`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union fi_mr_attr__device {
    pub reserved: u64,
    pub cuda: c_int,
    pub ze: c_int,
    pub neuron: c_int,
    pub synapseai: c_int,
    pub rocr: c_int,
}

/// `struct fi_mr_modify`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct fi_mr_modify {
    pub flags: u64,
    pub attr: fi_mr_attr,
}

/// `struct fi_hmem_override_ops`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_hmem_override_ops {
    pub size: usize,
    pub copy_from_hmem_iov: Option<unsafe extern "C" fn(*mut c_void, usize, fi_hmem_iface, u64, *const libc::iovec, usize, u64) -> isize>,
    pub copy_to_hmem_iov: Option<unsafe extern "C" fn(fi_hmem_iface, u64, *const libc::iovec, usize, u64, *const c_void, usize) -> isize>,
}

/// `struct fi_ops_domain`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_ops_domain {
    pub size: usize,
    pub av_open: Option<unsafe extern "C" fn(*mut fid_domain, *mut fi_av_attr, *mut *mut fid_av, *mut c_void) -> c_int>,
    pub cq_open: Option<unsafe extern "C" fn(*mut fid_domain, *mut fi_cq_attr, *mut *mut fid_cq, *mut c_void) -> c_int>,
    pub endpoint: Option<unsafe extern "C" fn(*mut fid_domain, *mut fi_info, *mut *mut fid_ep, *mut c_void) -> c_int>,
    pub scalable_ep: Option<unsafe extern "C" fn(*mut fid_domain, *mut fi_info, *mut *mut fid_ep, *mut c_void) -> c_int>,
    pub cntr_open: Option<unsafe extern "C" fn(*mut fid_domain, *mut fi_cntr_attr, *mut *mut fid_cntr, *mut c_void) -> c_int>,
    pub poll_open: Option<unsafe extern "C" fn(*mut fid_domain, *mut fi_poll_attr, *mut *mut fid_poll) -> c_int>,
    pub stx_ctx: Option<unsafe extern "C" fn(*mut fid_domain, *mut fi_tx_attr, *mut *mut fid_stx, *mut c_void) -> c_int>,
    pub srx_ctx: Option<unsafe extern "C" fn(*mut fid_domain, *mut fi_rx_attr, *mut *mut fid_ep, *mut c_void) -> c_int>,
    pub query_atomic: Option<unsafe extern "C" fn(*mut fid_domain, fi_datatype, fi_op, *mut fi_atomic_attr, u64) -> c_int>,
    pub query_collective: Option<unsafe extern "C" fn(*mut fid_domain, fi_collective_op, *mut fi_collective_attr, u64) -> c_int>,
    pub endpoint2: Option<unsafe extern "C" fn(*mut fid_domain, *mut fi_info, *mut *mut fid_ep, u64, *mut c_void) -> c_int>,
    pub xpu_ctx: Option<unsafe extern "C" fn(*mut fid_domain, *mut fi_xpu_attr, *mut *mut fid_xpu_ctx, *mut c_void) -> c_int>,
}

/// `struct fid_stx`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fid_stx {
    pub fid: fid,
    pub ops: *mut fi_ops_ep,
}

/// `struct fi_atomic_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_atomic_attr {
    pub count: usize,
    pub size: usize,
}

/// `struct fi_collective_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_collective_attr {
    pub op: fi_op,
    pub datatype: fi_datatype,
    pub datatype_attr: fi_atomic_attr,
    pub max_members: usize,
    pub mode: u64,
}

/// `struct fi_xpu_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_xpu_attr {
    pub iface: fi_hmem_iface,
    pub device: u64,
    pub ops: *mut fi_xpu_ops,
}

/// `struct fi_ops_mr`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_ops_mr {
    pub size: usize,
    pub reg: Option<unsafe extern "C" fn(*mut fid, *const c_void, usize, u64, u64, u64, u64, *mut *mut fid_mr, *mut c_void) -> c_int>,
    pub regv: Option<unsafe extern "C" fn(*mut fid, *const libc::iovec, usize, u64, u64, u64, u64, *mut *mut fid_mr, *mut c_void) -> c_int>,
    pub regattr: Option<unsafe extern "C" fn(*mut fid, *const fi_mr_attr, u64, *mut *mut fid_mr) -> c_int>,
}

/// `struct fi_msg`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_msg {
    pub msg_iov: *const libc::iovec,
    pub desc: *mut *mut c_void,
    pub iov_count: usize,
    pub addr: fi_addr_t,
    pub context: *mut c_void,
    pub data: u64,
}

/// `struct fi_ops_ep`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_ops_ep {
    pub size: usize,
    pub cancel: Option<unsafe extern "C" fn(fid_t, *mut c_void) -> isize>,
    pub getopt: Option<unsafe extern "C" fn(fid_t, c_int, c_int, *mut c_void, *mut usize) -> c_int>,
    pub setopt: Option<unsafe extern "C" fn(fid_t, c_int, c_int, *const c_void, usize) -> c_int>,
    pub tx_ctx: Option<unsafe extern "C" fn(*mut fid_ep, c_int, *mut fi_tx_attr, *mut *mut fid_ep, *mut c_void) -> c_int>,
    pub rx_ctx: Option<unsafe extern "C" fn(*mut fid_ep, c_int, *mut fi_rx_attr, *mut *mut fid_ep, *mut c_void) -> c_int>,
    pub rx_size_left: Option<unsafe extern "C" fn(*mut fid_ep) -> isize>,
    pub tx_size_left: Option<unsafe extern "C" fn(*mut fid_ep) -> isize>,
    pub export_xpu: Option<unsafe extern "C" fn(*mut fid_ep, u64, *mut fid_xpu_ep) -> c_int>,
}

/// `struct fid_xpu_ep`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fid_xpu_ep {
    pub fid: fid_xpu,
}

/// `struct fi_ops_msg`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_ops_msg {
    pub size: usize,
    pub recv: Option<unsafe extern "C" fn(*mut fid_ep, *mut c_void, usize, *mut c_void, fi_addr_t, *mut c_void) -> isize>,
    pub recvv: Option<unsafe extern "C" fn(*mut fid_ep, *const libc::iovec, *mut *mut c_void, usize, fi_addr_t, *mut c_void) -> isize>,
    pub recvmsg: Option<unsafe extern "C" fn(*mut fid_ep, *const fi_msg, u64) -> isize>,
    pub send: Option<unsafe extern "C" fn(*mut fid_ep, *const c_void, usize, *mut c_void, fi_addr_t, *mut c_void) -> isize>,
    pub sendv: Option<unsafe extern "C" fn(*mut fid_ep, *const libc::iovec, *mut *mut c_void, usize, fi_addr_t, *mut c_void) -> isize>,
    pub sendmsg: Option<unsafe extern "C" fn(*mut fid_ep, *const fi_msg, u64) -> isize>,
    pub inject: Option<unsafe extern "C" fn(*mut fid_ep, *const c_void, usize, fi_addr_t) -> isize>,
    pub senddata: Option<unsafe extern "C" fn(*mut fid_ep, *const c_void, usize, *mut c_void, u64, fi_addr_t, *mut c_void) -> isize>,
    pub injectdata: Option<unsafe extern "C" fn(*mut fid_ep, *const c_void, usize, u64, fi_addr_t) -> isize>,
}

/// `struct fi_ops_cm`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_ops_cm {
    pub size: usize,
    pub setname: Option<unsafe extern "C" fn(fid_t, *mut c_void, usize) -> c_int>,
    pub getname: Option<unsafe extern "C" fn(fid_t, *mut c_void, *mut usize) -> c_int>,
    pub getpeer: Option<unsafe extern "C" fn(*mut fid_ep, *mut c_void, *mut usize) -> c_int>,
    pub connect: Option<unsafe extern "C" fn(*mut fid_ep, *const c_void, *const c_void, usize) -> c_int>,
    pub listen: Option<unsafe extern "C" fn(*mut fid_pep) -> c_int>,
    pub accept: Option<unsafe extern "C" fn(*mut fid_ep, *const c_void, usize) -> c_int>,
    pub reject: Option<unsafe extern "C" fn(*mut fid_pep, fid_t, *const c_void, usize) -> c_int>,
    pub shutdown: Option<unsafe extern "C" fn(*mut fid_ep, u64) -> c_int>,
    pub join: Option<unsafe extern "C" fn(*mut fid_ep, *const c_void, u64, *mut *mut fid_mc, *mut c_void) -> c_int>,
}

/// `struct fi_ops_rma`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_ops_rma {
    pub size: usize,
    pub read: Option<unsafe extern "C" fn(*mut fid_ep, *mut c_void, usize, *mut c_void, fi_addr_t, u64, u64, *mut c_void) -> isize>,
    pub readv: Option<unsafe extern "C" fn(*mut fid_ep, *const libc::iovec, *mut *mut c_void, usize, fi_addr_t, u64, u64, *mut c_void) -> isize>,
    pub readmsg: Option<unsafe extern "C" fn(*mut fid_ep, *const fi_msg_rma, u64) -> isize>,
    pub write: Option<unsafe extern "C" fn(*mut fid_ep, *const c_void, usize, *mut c_void, fi_addr_t, u64, u64, *mut c_void) -> isize>,
    pub writev: Option<unsafe extern "C" fn(*mut fid_ep, *const libc::iovec, *mut *mut c_void, usize, fi_addr_t, u64, u64, *mut c_void) -> isize>,
    pub writemsg: Option<unsafe extern "C" fn(*mut fid_ep, *const fi_msg_rma, u64) -> isize>,
    pub inject: Option<unsafe extern "C" fn(*mut fid_ep, *const c_void, usize, fi_addr_t, u64, u64) -> isize>,
    pub writedata: Option<unsafe extern "C" fn(*mut fid_ep, *const c_void, usize, *mut c_void, u64, fi_addr_t, u64, u64, *mut c_void) -> isize>,
    pub injectdata: Option<unsafe extern "C" fn(*mut fid_ep, *const c_void, usize, u64, fi_addr_t, u64, u64) -> isize>,
}

/// `struct fi_ops_tagged`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_ops_tagged {
    pub size: usize,
    pub recv: Option<unsafe extern "C" fn(*mut fid_ep, *mut c_void, usize, *mut c_void, fi_addr_t, u64, u64, *mut c_void) -> isize>,
    pub recvv: Option<unsafe extern "C" fn(*mut fid_ep, *const libc::iovec, *mut *mut c_void, usize, fi_addr_t, u64, u64, *mut c_void) -> isize>,
    pub recvmsg: Option<unsafe extern "C" fn(*mut fid_ep, *const fi_msg_tagged, u64) -> isize>,
    pub send: Option<unsafe extern "C" fn(*mut fid_ep, *const c_void, usize, *mut c_void, fi_addr_t, u64, *mut c_void) -> isize>,
    pub sendv: Option<unsafe extern "C" fn(*mut fid_ep, *const libc::iovec, *mut *mut c_void, usize, fi_addr_t, u64, *mut c_void) -> isize>,
    pub sendmsg: Option<unsafe extern "C" fn(*mut fid_ep, *const fi_msg_tagged, u64) -> isize>,
    pub inject: Option<unsafe extern "C" fn(*mut fid_ep, *const c_void, usize, fi_addr_t, u64) -> isize>,
    pub senddata: Option<unsafe extern "C" fn(*mut fid_ep, *const c_void, usize, *mut c_void, u64, fi_addr_t, u64, *mut c_void) -> isize>,
    pub injectdata: Option<unsafe extern "C" fn(*mut fid_ep, *const c_void, usize, u64, fi_addr_t, u64) -> isize>,
}

/// `struct fi_ops_atomic`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_ops_atomic {
    pub size: usize,
    pub write: Option<unsafe extern "C" fn(*mut fid_ep, *const c_void, usize, *mut c_void, fi_addr_t, u64, u64, fi_datatype, fi_op, *mut c_void) -> isize>,
    pub writev: Option<unsafe extern "C" fn(*mut fid_ep, *const fi_ioc, *mut *mut c_void, usize, fi_addr_t, u64, u64, fi_datatype, fi_op, *mut c_void) -> isize>,
    pub writemsg: Option<unsafe extern "C" fn(*mut fid_ep, *const fi_msg_atomic, u64) -> isize>,
    pub inject: Option<unsafe extern "C" fn(*mut fid_ep, *const c_void, usize, fi_addr_t, u64, u64, fi_datatype, fi_op) -> isize>,
    pub readwrite: Option<unsafe extern "C" fn(*mut fid_ep, *const c_void, usize, *mut c_void, *mut c_void, *mut c_void, fi_addr_t, u64, u64, fi_datatype, fi_op, *mut c_void) -> isize>,
    pub readwritev: Option<unsafe extern "C" fn(*mut fid_ep, *const fi_ioc, *mut *mut c_void, usize, *mut fi_ioc, *mut *mut c_void, usize, fi_addr_t, u64, u64, fi_datatype, fi_op, *mut c_void) -> isize>,
    pub readwritemsg: Option<unsafe extern "C" fn(*mut fid_ep, *const fi_msg_atomic, *mut fi_ioc, *mut *mut c_void, usize, u64) -> isize>,
    pub compwrite: Option<unsafe extern "C" fn(*mut fid_ep, *const c_void, usize, *mut c_void, *const c_void, *mut c_void, *mut c_void, *mut c_void, fi_addr_t, u64, u64, fi_datatype, fi_op, *mut c_void) -> isize>,
    pub compwritev: Option<unsafe extern "C" fn(*mut fid_ep, *const fi_ioc, *mut *mut c_void, usize, *const fi_ioc, *mut *mut c_void, usize, *mut fi_ioc, *mut *mut c_void, usize, fi_addr_t, u64, u64, fi_datatype, fi_op, *mut c_void) -> isize>,
    pub compwritemsg: Option<unsafe extern "C" fn(*mut fid_ep, *const fi_msg_atomic, *const fi_ioc, *mut *mut c_void, usize, *mut fi_ioc, *mut *mut c_void, usize, u64) -> isize>,
    pub writevalid: Option<unsafe extern "C" fn(*mut fid_ep, fi_datatype, fi_op, *mut usize) -> c_int>,
    pub readwritevalid: Option<unsafe extern "C" fn(*mut fid_ep, fi_datatype, fi_op, *mut usize) -> c_int>,
    pub compwritevalid: Option<unsafe extern "C" fn(*mut fid_ep, fi_datatype, fi_op, *mut usize) -> c_int>,
}

/// `struct fi_ops_collective`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_ops_collective {
    pub size: usize,
    pub barrier: Option<unsafe extern "C" fn(*mut fid_ep, fi_addr_t, *mut c_void) -> isize>,
    pub broadcast: Option<unsafe extern "C" fn(*mut fid_ep, *mut c_void, usize, *mut c_void, fi_addr_t, fi_addr_t, fi_datatype, u64, *mut c_void) -> isize>,
    pub alltoall: Option<unsafe extern "C" fn(*mut fid_ep, *const c_void, usize, *mut c_void, *mut c_void, *mut c_void, fi_addr_t, fi_datatype, u64, *mut c_void) -> isize>,
    pub allreduce: Option<unsafe extern "C" fn(*mut fid_ep, *const c_void, usize, *mut c_void, *mut c_void, *mut c_void, fi_addr_t, fi_datatype, fi_op, u64, *mut c_void) -> isize>,
    pub allgather: Option<unsafe extern "C" fn(*mut fid_ep, *const c_void, usize, *mut c_void, *mut c_void, *mut c_void, fi_addr_t, fi_datatype, u64, *mut c_void) -> isize>,
    pub reduce_scatter: Option<unsafe extern "C" fn(*mut fid_ep, *const c_void, usize, *mut c_void, *mut c_void, *mut c_void, fi_addr_t, fi_datatype, fi_op, u64, *mut c_void) -> isize>,
    pub reduce: Option<unsafe extern "C" fn(*mut fid_ep, *const c_void, usize, *mut c_void, *mut c_void, *mut c_void, fi_addr_t, fi_addr_t, fi_datatype, fi_op, u64, *mut c_void) -> isize>,
    pub scatter: Option<unsafe extern "C" fn(*mut fid_ep, *const c_void, usize, *mut c_void, *mut c_void, *mut c_void, fi_addr_t, fi_addr_t, fi_datatype, u64, *mut c_void) -> isize>,
    pub gather: Option<unsafe extern "C" fn(*mut fid_ep, *const c_void, usize, *mut c_void, *mut c_void, *mut c_void, fi_addr_t, fi_addr_t, fi_datatype, u64, *mut c_void) -> isize>,
    pub msg: Option<unsafe extern "C" fn(*mut fid_ep, *const fi_msg_collective, *mut fi_ioc, *mut *mut c_void, usize, u64) -> isize>,
    pub barrier2: Option<unsafe extern "C" fn(*mut fid_ep, fi_addr_t, u64, *mut c_void) -> isize>,
}

/// `struct fi_rma_iov`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_rma_iov {
    pub addr: u64,
    pub len: usize,
    pub key: u64,
}

/// `struct fi_rma_ioc`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_rma_ioc {
    pub addr: u64,
    pub count: usize,
    pub key: u64,
}

/// `struct fi_msg_rma`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_msg_rma {
    pub msg_iov: *const libc::iovec,
    pub desc: *mut *mut c_void,
    pub iov_count: usize,
    pub addr: fi_addr_t,
    pub rma_iov: *const fi_rma_iov,
    pub rma_iov_count: usize,
    pub context: *mut c_void,
    pub data: u64,
}

/// `struct fi_msg_atomic`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_msg_atomic {
    pub msg_iov: *const fi_ioc,
    pub desc: *mut *mut c_void,
    pub iov_count: usize,
    pub addr: fi_addr_t,
    pub rma_iov: *const fi_rma_ioc,
    pub rma_iov_count: usize,
    pub datatype: fi_datatype,
    pub op: fi_op,
    pub context: *mut c_void,
    pub data: u64,
}

/// `struct fi_msg_fetch`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_msg_fetch {
    pub msg_iov: *mut fi_ioc,
    pub desc: *mut *mut c_void,
    pub iov_count: usize,
}

/// `struct fi_msg_compare`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_msg_compare {
    pub msg_iov: *const fi_ioc,
    pub desc: *mut *mut c_void,
    pub iov_count: usize,
}

/// `struct fid_mc`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fid_mc {
    pub fid: fid,
    pub fi_addr: fi_addr_t,
}

/// `struct fi_ops_av_set`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_ops_av_set {
    pub size: usize,
    pub set_union: Option<unsafe extern "C" fn(*mut fid_av_set, *const fid_av_set) -> c_int>,
    pub intersect: Option<unsafe extern "C" fn(*mut fid_av_set, *const fid_av_set) -> c_int>,
    pub diff: Option<unsafe extern "C" fn(*mut fid_av_set, *const fid_av_set) -> c_int>,
    pub insert: Option<unsafe extern "C" fn(*mut fid_av_set, fi_addr_t) -> c_int>,
    pub remove: Option<unsafe extern "C" fn(*mut fid_av_set, fi_addr_t) -> c_int>,
    pub addr: Option<unsafe extern "C" fn(*mut fid_av_set, *mut fi_addr_t) -> c_int>,
}

/// `struct fi_collective_addr`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_collective_addr {
    pub set: *const fid_av_set,
    pub coll_addr: fi_addr_t,
}

/// `struct fi_msg_collective`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_msg_collective {
    pub msg_iov: *const fi_ioc,
    pub desc: *mut *mut c_void,
    pub iov_count: usize,
    pub coll_addr: fi_addr_t,
    pub root_addr: fi_addr_t,
    pub coll: fi_collective_op,
    pub datatype: fi_datatype,
    pub op: fi_op,
    pub context: *mut c_void,
}

/// `struct fi_provider`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_provider {
    pub version: u32,
    pub fi_version: u32,
    pub context: fi_context,
    pub name: *const c_char,
    pub getinfo: Option<unsafe extern "C" fn(u32, *const c_char, *const c_char, u64, *const fi_info, *mut *mut fi_info) -> c_int>,
    pub fabric: Option<unsafe extern "C" fn(*mut fi_fabric_attr, *mut *mut fid_fabric, *mut c_void) -> c_int>,
    pub cleanup: Option<unsafe extern "C" fn()>,
}

/// `struct fi_fid_export`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_fid_export {
    pub fid: *mut *mut fid,
    pub flags: u64,
    pub context: *mut c_void,
}

/// `struct fi_ops_mem_monitor`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_ops_mem_monitor {
    pub size: usize,
    pub start: Option<unsafe extern "C" fn(*mut fid_mem_monitor) -> c_int>,
    pub stop: Option<unsafe extern "C" fn(*mut fid_mem_monitor)>,
    pub subscribe: Option<unsafe extern "C" fn(*mut fid_mem_monitor, *const c_void, usize) -> c_int>,
    pub unsubscribe: Option<unsafe extern "C" fn(*mut fid_mem_monitor, *const c_void, usize)>,
    pub valid: Option<unsafe extern "C" fn(*mut fid_mem_monitor, *const c_void, usize) -> bool>,
}

/// `struct fid_mem_monitor`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fid_mem_monitor {
    pub fid: fid,
    pub export_ops: *mut fi_ops_mem_monitor,
    pub import_ops: *mut fi_ops_mem_notify,
}

/// `struct fi_ops_mem_notify`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_ops_mem_notify {
    pub size: usize,
    pub notify: Option<unsafe extern "C" fn(*mut fid_mem_monitor, *const c_void, usize)>,
}

/// `struct fi_ops_log`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_ops_log {
    pub size: usize,
    pub enabled: Option<unsafe extern "C" fn(*const fi_provider, fi_log_level, fi_log_subsys, u64) -> c_int>,
    pub ready: Option<unsafe extern "C" fn(*const fi_provider, fi_log_level, fi_log_subsys, u64, *mut u64) -> c_int>,
    pub log: Option<unsafe extern "C" fn(*const fi_provider, fi_log_level, fi_log_subsys, *const c_char, c_int, *const c_char)>,
}

/// `struct fid_logging`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fid_logging {
    pub fid: fid,
    pub ops: *mut fi_ops_log,
}

/// `struct fi_msg_tagged`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_msg_tagged {
    pub msg_iov: *const libc::iovec,
    pub desc: *mut *mut c_void,
    pub iov_count: usize,
    pub addr: fi_addr_t,
    pub tag: u64,
    pub ignore: u64,
    pub context: *mut c_void,
    pub data: u64,
}

/// `struct fi_trigger_threshold`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_trigger_threshold {
    pub cntr: *mut fid_cntr,
    pub threshold: usize,
}

/// `struct fi_trigger_var`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct fi_trigger_var {
    pub datatype: fi_datatype,
    pub count: c_int,
    pub addr: *mut c_void,
    pub value: fi_trigger_var__value,
}

/// Trigger value, read according to `datatype`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union fi_trigger_var__value {
    pub val8: u8,
    pub val16: u16,
    pub val32: u32,
    pub val64: u64,
    pub data: *mut u8,
}

/// `struct fi_trigger_xpu`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct fi_trigger_xpu {
    pub count: c_int,
    pub iface: fi_hmem_iface,
    pub device: fi_trigger_xpu__device,
    pub var: *mut fi_trigger_var,
}

/// Device id for the memory interface named by `iface`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union fi_trigger_xpu__device {
    pub reserved: u64,
    pub cuda: c_int,
    pub ze: c_int,
}

/// `struct fi_op_msg`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_op_msg {
    pub ep: *mut fid_ep,
    pub msg: fi_msg,
    pub flags: u64,
}

/// `struct fi_op_tagged`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_op_tagged {
    pub ep: *mut fid_ep,
    pub msg: fi_msg_tagged,
    pub flags: u64,
}

/// `struct fi_op_rma`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_op_rma {
    pub ep: *mut fid_ep,
    pub msg: fi_msg_rma,
    pub flags: u64,
}

/// `struct fi_op_atomic`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_op_atomic {
    pub ep: *mut fid_ep,
    pub msg: fi_msg_atomic,
    pub flags: u64,
}

/// `struct fi_op_fetch_atomic`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_op_fetch_atomic {
    pub ep: *mut fid_ep,
    pub msg: fi_msg_atomic,
    pub fetch: fi_msg_fetch,
    pub flags: u64,
}

/// `struct fi_op_compare_atomic`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_op_compare_atomic {
    pub ep: *mut fid_ep,
    pub msg: fi_msg_atomic,
    pub fetch: fi_msg_fetch,
    pub compare: fi_msg_compare,
    pub flags: u64,
}

/// `struct fi_op_cntr`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_op_cntr {
    pub cntr: *mut fid_cntr,
    pub value: u64,
}

/// `struct fi_triggered_context`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct fi_triggered_context {
    pub event_type: fi_trigger_event,
    pub trigger: fi_triggered_context__trigger,
}

/// Condition, read according to `event_type`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union fi_triggered_context__trigger {
    pub threshold: fi_trigger_threshold,
    pub xpu: fi_trigger_xpu,
    pub internal: [*mut c_void; 3],
}

/// `struct fi_triggered_context2`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct fi_triggered_context2 {
    pub event_type: fi_trigger_event,
    pub trigger: fi_triggered_context2__trigger,
}

/// Condition, read according to `event_type`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union fi_triggered_context2__trigger {
    pub threshold: fi_trigger_threshold,
    pub xpu: fi_trigger_xpu,
    pub internal: [*mut c_void; 7],
}

/// `struct fi_deferred_work`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct fi_deferred_work {
    pub context: fi_context2,
    pub threshold: u64,
    pub triggering_cntr: *mut fid_cntr,
    pub completion_cntr: *mut fid_cntr,
    pub op_type: fi_op_type,
    pub op: fi_deferred_work__op,
}

/// The operation, read according to `op_type`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union fi_deferred_work__op {
    pub msg: *mut fi_op_msg,
    pub tagged: *mut fi_op_tagged,
    pub rma: *mut fi_op_rma,
    pub atomic: *mut fi_op_atomic,
    pub fetch_atomic: *mut fi_op_fetch_atomic,
    pub compare_atomic: *mut fi_op_compare_atomic,
    pub cntr: *mut fi_op_cntr,
}

/// `struct fi_xpu_ops`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_xpu_ops {
    pub size: usize,
    pub alloc: Option<unsafe extern "C" fn(u64, u64, u64, u64, *mut *mut c_void, *mut c_int, *mut u64) -> c_int>,
    pub import: Option<unsafe extern "C" fn(u64, *mut c_void, u64, u64, c_int, *mut *mut c_void) -> c_int>,
    pub free: Option<unsafe extern "C" fn(u64, *mut c_void)>,
}

/// `struct fi_xpu_ctx_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_xpu_ctx_attr {
    pub caps: u64,
    pub av_addr_size: usize,
    pub mr_desc_size: usize,
}

/// `struct fi_ops_xpu_ctx`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_ops_xpu_ctx {
    pub size: usize,
    pub query: Option<unsafe extern "C" fn(*mut fid_xpu_ctx, *mut fi_xpu_ctx_attr) -> c_int>,
}

/// `struct fid_xpu`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fid_xpu {
    pub fclass: u32,
    pub prov_id: u32,
    pub prov_ctx: u64,
}

/// `struct fi_ops_av_owner`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_ops_av_owner {
    pub size: usize,
    pub query: Option<unsafe extern "C" fn(*mut fid_peer_av, *mut fi_av_attr) -> c_int>,
    pub ep_addr: Option<unsafe extern "C" fn(*mut fid_peer_av, *mut fid_ep) -> fi_addr_t>,
}

/// `struct fid_peer_av`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fid_peer_av {
    pub fid: fid,
    pub owner_ops: *mut fi_ops_av_owner,
}

/// `struct fi_peer_av_context`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_peer_av_context {
    pub size: usize,
    pub av: *mut fid_peer_av,
}

/// `struct fi_ops_av_set_owner`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_ops_av_set_owner {
    pub size: usize,
    pub members: Option<unsafe extern "C" fn(*mut fid_peer_av_set, *mut fi_addr_t, *mut usize) -> c_int>,
}

/// `struct fid_peer_av_set`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fid_peer_av_set {
    pub fid: fid,
    pub owner_ops: *mut fi_ops_av_set_owner,
}

/// `struct fi_peer_av_set`: the C header names this never-defined struct as
/// the pointee of `fi_peer_av_set_context.av_set` (the owner's set is in
/// practice a `fid_peer_av_set`); only pointers to it exist.
#[repr(C)]
pub struct fi_peer_av_set {
    _opaque: [u8; 0],
}

/// `struct fi_peer_av_set_context`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_peer_av_set_context {
    pub size: usize,
    pub av_set: *mut fi_peer_av_set,
}

/// `struct fi_ops_cq_owner`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_ops_cq_owner {
    pub size: usize,
    pub write: Option<unsafe extern "C" fn(*mut fid_peer_cq, *mut c_void, u64, usize, *mut c_void, u64, u64, fi_addr_t) -> isize>,
    pub writeerr: Option<unsafe extern "C" fn(*mut fid_peer_cq, *const fi_cq_err_entry) -> isize>,
}

/// `struct fid_peer_cq`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fid_peer_cq {
    pub fid: fid,
    pub owner_ops: *mut fi_ops_cq_owner,
}

/// `struct fi_peer_cq_context`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_peer_cq_context {
    pub size: usize,
    pub cq: *mut fid_peer_cq,
}

/// `struct fi_ops_cntr_owner`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_ops_cntr_owner {
    pub size: usize,
    pub inc: Option<unsafe extern "C" fn(*mut fid_peer_cntr)>,
    pub incerr: Option<unsafe extern "C" fn(*mut fid_peer_cntr)>,
}

/// `struct fid_peer_cntr`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fid_peer_cntr {
    pub fid: fid,
    pub owner_ops: *mut fi_ops_cntr_owner,
}

/// `struct fi_peer_cntr_context`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_peer_cntr_context {
    pub size: usize,
    pub cntr: *mut fid_peer_cntr,
}

/// `struct fi_peer_domain_context`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_peer_domain_context {
    pub size: usize,
    pub domain: *mut fid_domain,
}

/// `struct fi_peer_eq_context`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_peer_eq_context {
    pub size: usize,
    pub eq: *mut fid_eq,
}

/// `struct fi_peer_rx_entry`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_peer_rx_entry {
    pub srx: *mut fid_peer_srx,
    pub addr: fi_addr_t,
    pub msg_size: usize,
    pub tag: u64,
    pub cq_data: u64,
    pub flags: u64,
    pub context: *mut c_void,
    pub count: usize,
    pub desc: *mut *mut c_void,
    pub peer_context: *mut c_void,
    pub owner_context: *mut c_void,
    pub iov: *mut libc::iovec,
}

/// `struct fid_peer_srx`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fid_peer_srx {
    pub ep_fid: fid_ep,
    pub owner_ops: *mut fi_ops_srx_owner,
    pub peer_ops: *mut fi_ops_srx_peer,
}

/// `struct fi_peer_match_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_peer_match_attr {
    pub addr: fi_addr_t,
    pub msg_size: usize,
    pub tag: u64,
}

/// `struct fi_ops_srx_owner`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_ops_srx_owner {
    pub size: usize,
    pub get_msg: Option<unsafe extern "C" fn(*mut fid_peer_srx, *mut fi_peer_match_attr, *mut *mut fi_peer_rx_entry) -> c_int>,
    pub get_tag: Option<unsafe extern "C" fn(*mut fid_peer_srx, *mut fi_peer_match_attr, *mut *mut fi_peer_rx_entry) -> c_int>,
    pub queue_msg: Option<unsafe extern "C" fn(*mut fi_peer_rx_entry) -> c_int>,
    pub queue_tag: Option<unsafe extern "C" fn(*mut fi_peer_rx_entry) -> c_int>,
    pub foreach_unspec_addr: Option<unsafe extern "C" fn(*mut fid_peer_srx, Option<unsafe extern "C" fn(*mut fi_peer_rx_entry) -> fi_addr_t>)>,
    pub free_entry: Option<unsafe extern "C" fn(*mut fi_peer_rx_entry)>,
}

/// `struct fi_ops_srx_peer`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_ops_srx_peer {
    pub size: usize,
    pub start_msg: Option<unsafe extern "C" fn(*mut fi_peer_rx_entry) -> c_int>,
    pub start_tag: Option<unsafe extern "C" fn(*mut fi_peer_rx_entry) -> c_int>,
    pub discard_msg: Option<unsafe extern "C" fn(*mut fi_peer_rx_entry) -> c_int>,
    pub discard_tag: Option<unsafe extern "C" fn(*mut fi_peer_rx_entry) -> c_int>,
}

/// `struct fi_peer_srx_context`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_peer_srx_context {
    pub size: usize,
    pub srx: *mut fid_peer_srx,
}

/// `struct fi_ops_transfer_peer`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_ops_transfer_peer {
    pub size: usize,
    pub complete: Option<unsafe extern "C" fn(*mut fid_ep, *mut fi_cq_tagged_entry, fi_addr_t) -> isize>,
    pub comperr: Option<unsafe extern "C" fn(*mut fid_ep, *mut fi_cq_err_entry) -> isize>,
}

/// `struct fi_peer_transfer_context`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct fi_peer_transfer_context {
    pub size: usize,
    pub info: *mut fi_info,
    pub ep: *mut fid_ep,
    pub peer_ops: *mut fi_ops_transfer_peer,
}

/// Implements `Default` as the all-zero value.
macro_rules! zeroed_default {
    ($($t:ty),* $(,)?) => {$(
        impl Default for $t {
            fn default() -> Self {
                // SAFETY: every member of this type is an integer, a raw
                // pointer, an `Option` of a function pointer, a `bool`, an
                // array or union of those, or a struct made only of those; for
                // all of them the all-zero bit pattern is a valid value (0,
                // null, `None`, `false`).
                unsafe { core::mem::zeroed() }
            }
        }
    )*};
}

zeroed_default!(
    fid, fi_ioc, fi_tx_attr, fi_rx_attr, fi_ep_attr, fid_xpu_ctx,
    fi_domain_attr, fi_domain_attr__anon0, fid_domain, fi_fabric_attr,
    fid_fabric, fi_info, fid_nic, fi_device_attr, fi_pci_attr, fi_bus_attr,
    fi_bus_attr__attr, fi_link_attr, fi_ops, fi_ops_fabric, fid_pep, fi_eq_attr,
    fid_eq, fi_wait_attr, fid_wait, fi_alias, fi_fid_var, fi_mr_raw_attr,
    fi_mr_xpu_desc, fi_mr_map_raw, fi_param, fi_context, fi_context2,
    fi_recv_context, fid_ep, fi_ops_wait, fi_mutex_cond, fi_wait_pollfd,
    fi_poll_attr, fi_ops_poll, fid_poll, fi_eq_entry, fi_eq_err_entry,
    fi_eq_cm_entry, fi_ops_eq, fi_cq_entry, fi_cq_msg_entry, fi_cq_data_entry,
    fi_cq_tagged_entry, fi_cq_err_entry, fi_cq_attr, fi_ops_cq, fid_cq,
    fid_xpu_cq, fi_cntr_attr, fi_ops_cntr, fid_cntr, fid_xpu_cntr, fi_av_attr,
    fi_av_set_attr, fi_ops_av, fid_av, fid_av_set, fid_mr, fi_mr_dmabuf,
    fi_mr_auth_key, fi_mr_attr, fi_mr_attr__anon0, fi_mr_attr__device,
    fi_mr_modify, fi_hmem_override_ops, fi_ops_domain, fid_stx, fi_atomic_attr,
    fi_collective_attr, fi_xpu_attr, fi_ops_mr, fi_msg, fi_ops_ep, fid_xpu_ep,
    fi_ops_msg, fi_ops_cm, fi_ops_rma, fi_ops_tagged, fi_ops_atomic,
    fi_ops_collective, fi_rma_iov, fi_rma_ioc, fi_msg_rma, fi_msg_atomic,
    fi_msg_fetch, fi_msg_compare, fid_mc, fi_ops_av_set, fi_collective_addr,
    fi_msg_collective, fi_provider, fi_fid_export, fi_ops_mem_monitor,
    fid_mem_monitor, fi_ops_mem_notify, fi_ops_log, fid_logging, fi_msg_tagged,
    fi_trigger_threshold, fi_trigger_var, fi_trigger_var__value, fi_trigger_xpu,
    fi_trigger_xpu__device, fi_op_msg, fi_op_tagged, fi_op_rma, fi_op_atomic,
    fi_op_fetch_atomic, fi_op_compare_atomic, fi_op_cntr, fi_triggered_context,
    fi_triggered_context__trigger, fi_triggered_context2,
    fi_triggered_context2__trigger, fi_deferred_work, fi_deferred_work__op,
    fi_xpu_ops, fi_xpu_ctx_attr, fi_ops_xpu_ctx, fid_xpu, fi_ops_av_owner,
    fid_peer_av, fi_peer_av_context, fi_ops_av_set_owner, fid_peer_av_set,
    fi_peer_av_set_context, fi_ops_cq_owner, fid_peer_cq, fi_peer_cq_context,
    fi_ops_cntr_owner, fid_peer_cntr, fi_peer_cntr_context,
    fi_peer_domain_context, fi_peer_eq_context, fi_peer_rx_entry, fid_peer_srx,
    fi_peer_match_attr, fi_ops_srx_owner, fi_ops_srx_peer, fi_peer_srx_context,
    fi_ops_transfer_peer, fi_peer_transfer_context,
);

impl fi_domain_attr {
    /// The data progress model (`data_progress`, also called `progress`).
    pub fn data_progress(&self) -> fi_progress {
        // SAFETY: both members of the union are `fi_progress` (a `u32`), so
        // whichever was written, the bits read are a valid `u32`.
        unsafe { self.anon0.data_progress }
    }

    /// Sets the data progress model.
    pub fn set_data_progress(&mut self, progress: fi_progress) {
        self.anon0.data_progress = progress;
    }
}

impl fi_mr_attr {
    /// The iovec array describing the region (`mr_iov`).
    pub fn mr_iov(&self) -> *const libc::iovec {
        // SAFETY: both members of the union are thin raw pointers of the same
        // size; reading either as a pointer value is always valid.
        unsafe { self.anon0.mr_iov }
    }

    /// The dma-buf description of the region (`dmabuf`, with `FI_MR_DMABUF`).
    pub fn dmabuf(&self) -> *const fi_mr_dmabuf {
        // SAFETY: as for `mr_iov`, both members are raw pointers.
        unsafe { self.anon0.dmabuf }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_attrs_are_all_zero() {
        let d = fi_domain_attr::default();
        assert!(d.domain.is_null() && d.name.is_null());
        assert_eq!(d.threading, FI_THREAD_UNSPEC);
        assert_eq!(d.data_progress(), FI_PROGRESS_UNSPEC);
        let ops = fi_ops_msg::default();
        assert!(ops.send.is_none() && ops.recv.is_none());
        let tx = fi_tx_attr::default();
        assert_eq!((tx.caps, tx.size, tx.tclass), (0, 0, 0));
    }

    #[test]
    fn progress_union_aliases() {
        let mut d = fi_domain_attr::default();
        d.set_data_progress(FI_PROGRESS_MANUAL);
        assert_eq!(d.data_progress(), FI_PROGRESS_MANUAL);
        // SAFETY: both union members are `u32`; reading the other name is valid.
        assert_eq!(unsafe { d.anon0.progress }, FI_PROGRESS_MANUAL);
        assert_ne!(d.data_progress(), FI_PROGRESS_AUTO);
    }

    #[test]
    fn version_packing() {
        assert_eq!(fi_version(1, 21), (1 << 16) | 21);
        assert_eq!(fi_major(fi_version(2, 8)), 2);
        assert_eq!(fi_minor(fi_version(2, 8)), 8);
        assert!(FI_VERSION >= fi_version(2, 6));
    }
}
