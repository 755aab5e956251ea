//! Hand-written `#[repr(C)]` mirrors of the rdma-core types this crate
//! uses, with the names and field order of `<infiniband/verbs.h>` and
//! `<infiniband/efadv.h>` and `<rdma/rdma_cma.h>` (rdma-core 44, Debian 12).
//!
//! Every struct and union here is declared through `c_types!`, which also
//! records its Rust layout (size, alignment, the offset and size of every
//! field) for `crate::layout`; every constant through `c_consts!`, which
//! records its value. `tests/ibverbs/layout.sh` (and the `layout` unit test)
//! compiles a C program from those records against the real headers and
//! fails on any difference, so nothing declared here goes unchecked.
//!
//! C enums are plain integers here (`c_int` where the enum has a negative
//! value, else `u32`): a library newer than these definitions may return a
//! value this crate does not name, which must not be undefined behaviour.
//! Function pointers inside structs are `Option`s (C lets them be NULL), and
//! every other field is an integer, a raw pointer, a `pthread_*_t` or an
//! array, struct or union of those: the all-zero bit pattern is a valid
//! value of every type here, which is what their `Default` is.
#![allow(non_camel_case_types)]

use libc::{c_char, c_int, c_uint, c_void, pthread_cond_t, pthread_mutex_t};

/// Declares `#[repr(C)]` types and records their layout.
///
/// `pub struct NAME = "C type" { ... }`: a type of its own in C.
/// `pub struct NAME = "C type" @ "path" { ... }`: the C type of the member
/// `path` (dotted) of "C type", for C's unnamed struct and union types.
/// `pub union NAME = "C type" @ anon { ... }`: an anonymous union of "C
/// type", whose members C names as if they were the container's own.
/// `pub field: Type => "c_name"`: the field's C name, when it differs.
macro_rules! c_types {
    (@place) => { crate::layout::Place::Root };
    (@place anon) => { crate::layout::Place::Anon };
    (@place $at:literal) => { crate::layout::Place::At($at) };
    (@cname $f:ident) => { stringify!($f) };
    (@cname $f:ident $cf:literal) => { $cf };
    ($(
        $(#[$m:meta])*
        pub $kind:tt $name:ident = $cty:literal $(@ $at:tt)? {
            $( $(#[$fm:meta])* pub $f:ident : $t:ty $(=> $cf:literal)? ),* $(,)?
        }
    )*) => {
        $(
            $(#[$m])*
            #[repr(C)]
            #[derive(Clone, Copy)]
            pub $kind $name { $( $(#[$fm])* pub $f: $t, )* }

            impl Default for $name {
                fn default() -> Self {
                    // SAFETY: every field type of this module admits the
                    // all-zero bit pattern (module documentation: integers,
                    // raw pointers, `Option`s of function pointers,
                    // `pthread_*_t`, and arrays, structs and unions of those).
                    unsafe { ::core::mem::zeroed() }
                }
            }
        )*

        /// The Rust layout of every type declared in this module.
        pub(crate) fn type_layouts() -> Vec<crate::layout::TypeLayout> {
            vec![$(
                crate::layout::TypeLayout {
                    rust: stringify!($name),
                    c_type: $cty,
                    place: c_types!(@place $($at)?),
                    size: ::core::mem::size_of::<$name>(),
                    align: ::core::mem::align_of::<$name>(),
                    fields: vec![$(
                        crate::layout::FieldLayout {
                            rust: stringify!($f),
                            c: c_types!(@cname $f $($cf)?),
                            offset: ::core::mem::offset_of!($name, $f),
                            size: ::core::mem::size_of::<$t>(),
                        },
                    )*],
                },
            )*]
        }
    };
}

/// Declares constants of the headers and records their values.
macro_rules! c_consts {
    ($( $(#[$m:meta])* pub const $name:ident : $t:ty = $v:expr; )*) => {
        $( $(#[$m])* pub const $name: $t = $v; )*

        /// The value of every constant declared in this module.
        pub(crate) fn const_values() -> Vec<(&'static str, i128)> {
            vec![$( (stringify!($name), $name as i128) ),*]
        }
    };
}

/// A type C only ever handles behind a pointer.
macro_rules! opaque {
    ($( $(#[$m:meta])* $name:ident ),* $(,)?) => {
        $(
            $(#[$m])*
            #[repr(C)]
            pub struct $name {
                _private: [u8; 0],
                _not_send_sync_unpin: ::core::marker::PhantomData<(*mut u8, ::core::marker::PhantomPinned)>,
            }
        )*
    };
}

opaque! {
    /// `struct ibv_ah`
    ibv_ah,
    /// `struct ibv_mw`
    ibv_mw,
    /// `struct ibv_xrcd`
    ibv_xrcd,
    /// `struct ibv_rwq_ind_table`
    ibv_rwq_ind_table,
}

/// A slot of a function table this crate never calls.
pub type VoidFn = Option<unsafe extern "C" fn()>;

/// `ibv_context_ops.poll_cq`
pub type PollCqFn = unsafe extern "C" fn(cq: *mut ibv_cq, num_entries: c_int, wc: *mut ibv_wc) -> c_int;
/// `ibv_context_ops.req_notify_cq`
pub type ReqNotifyCqFn = unsafe extern "C" fn(cq: *mut ibv_cq, solicited_only: c_int) -> c_int;
/// `ibv_context_ops.post_send`
pub type PostSendFn =
    unsafe extern "C" fn(qp: *mut ibv_qp, wr: *mut ibv_send_wr, bad_wr: *mut *mut ibv_send_wr) -> c_int;
/// `ibv_context_ops.post_recv`
pub type PostRecvFn =
    unsafe extern "C" fn(qp: *mut ibv_qp, wr: *mut ibv_recv_wr, bad_wr: *mut *mut ibv_recv_wr) -> c_int;
/// `ibv_context_ops.post_srq_recv`
pub type PostSrqRecvFn =
    unsafe extern "C" fn(srq: *mut ibv_srq, wr: *mut ibv_recv_wr, bad_wr: *mut *mut ibv_recv_wr) -> c_int;
/// `verbs_context.query_port`
pub type VerbsQueryPortFn = unsafe extern "C" fn(
    context: *mut ibv_context,
    port_num: u8,
    port_attr: *mut ibv_port_attr,
    port_attr_len: usize,
) -> c_int;

/// `IBV_SYSFS_NAME_MAX`
pub const IBV_SYSFS_NAME_MAX: usize = 64;
/// `IBV_SYSFS_PATH_MAX`
pub const IBV_SYSFS_PATH_MAX: usize = 256;

/// `__VERBS_ABI_IS_EXTENDED`: the `abi_compat` of an `ibv_context` that is
/// the last member of a `verbs_context`.
pub const VERBS_ABI_IS_EXTENDED: *mut c_void = usize::MAX as *mut c_void;

c_types! {
    /// `struct _ibv_device_ops` (unused compatibility slots)
    pub struct _ibv_device_ops = "struct _ibv_device_ops" {
        pub _dummy1: VoidFn,
        pub _dummy2: VoidFn,
    }

    /// `struct ibv_device`: applications read `node_type`, `transport_type`
    /// and `ibdev_path` directly (the header has no getters for them).
    pub struct ibv_device = "struct ibv_device" {
        pub _ops: _ibv_device_ops,
        /// `enum ibv_node_type`
        pub node_type: c_int,
        /// `enum ibv_transport_type`
        pub transport_type: c_int,
        pub name: [c_char; IBV_SYSFS_NAME_MAX],
        pub dev_name: [c_char; IBV_SYSFS_NAME_MAX],
        pub dev_path: [c_char; IBV_SYSFS_PATH_MAX],
        pub ibdev_path: [c_char; IBV_SYSFS_PATH_MAX],
    }

    /// `struct ibv_context_ops`: the slots the header's static inline
    /// functions call through (`ibv_post_send`, `ibv_poll_cq`, ...) are typed,
    /// the others are `VoidFn`.
    pub struct ibv_context_ops = "struct ibv_context_ops" {
        pub _compat_query_device: VoidFn,
        pub _compat_query_port: VoidFn,
        pub _compat_alloc_pd: VoidFn,
        pub _compat_dealloc_pd: VoidFn,
        pub _compat_reg_mr: VoidFn,
        pub _compat_rereg_mr: VoidFn,
        pub _compat_dereg_mr: VoidFn,
        pub alloc_mw: VoidFn,
        pub bind_mw: VoidFn,
        pub dealloc_mw: VoidFn,
        pub _compat_create_cq: VoidFn,
        pub poll_cq: Option<PollCqFn>,
        pub req_notify_cq: Option<ReqNotifyCqFn>,
        pub _compat_cq_event: VoidFn,
        pub _compat_resize_cq: VoidFn,
        pub _compat_destroy_cq: VoidFn,
        pub _compat_create_srq: VoidFn,
        pub _compat_modify_srq: VoidFn,
        pub _compat_query_srq: VoidFn,
        pub _compat_destroy_srq: VoidFn,
        pub post_srq_recv: Option<PostSrqRecvFn>,
        pub _compat_create_qp: VoidFn,
        pub _compat_query_qp: VoidFn,
        pub _compat_modify_qp: VoidFn,
        pub _compat_destroy_qp: VoidFn,
        pub post_send: Option<PostSendFn>,
        pub post_recv: Option<PostRecvFn>,
        pub _compat_create_ah: VoidFn,
        pub _compat_destroy_ah: VoidFn,
        pub _compat_attach_mcast: VoidFn,
        pub _compat_detach_mcast: VoidFn,
        pub _compat_async_event: VoidFn,
    }

    /// `struct ibv_context`
    pub struct ibv_context = "struct ibv_context" {
        pub device: *mut ibv_device,
        pub ops: ibv_context_ops,
        pub cmd_fd: c_int,
        pub async_fd: c_int,
        pub num_comp_vectors: c_int,
        pub mutex: pthread_mutex_t,
        /// `VERBS_ABI_IS_EXTENDED` when this context is the last member of
        /// a `verbs_context`.
        pub abi_compat: *mut c_void,
    }

    /// `struct verbs_context`: "grows up" (newer slots at lower addresses),
    /// `sz` says how much of it a provider filled; its `ibv_context` is its
    /// last member. Only `query_port` is called (by `ibv_query_port`).
    pub struct verbs_context = "struct verbs_context" {
        pub query_port: Option<VerbsQueryPortFn>,
        pub advise_mr: VoidFn,
        pub alloc_null_mr: VoidFn,
        pub read_counters: VoidFn,
        pub attach_counters_point_flow: VoidFn,
        pub create_counters: VoidFn,
        pub destroy_counters: VoidFn,
        pub reg_dm_mr: VoidFn,
        pub alloc_dm: VoidFn,
        pub free_dm: VoidFn,
        pub modify_flow_action_esp: VoidFn,
        pub destroy_flow_action: VoidFn,
        pub create_flow_action_esp: VoidFn,
        pub modify_qp_rate_limit: VoidFn,
        pub alloc_parent_domain: VoidFn,
        pub dealloc_td: VoidFn,
        pub alloc_td: VoidFn,
        pub modify_cq: VoidFn,
        pub post_srq_ops: VoidFn,
        pub destroy_rwq_ind_table: VoidFn,
        pub create_rwq_ind_table: VoidFn,
        pub destroy_wq: VoidFn,
        pub modify_wq: VoidFn,
        pub create_wq: VoidFn,
        pub query_rt_values: VoidFn,
        pub create_cq_ex: VoidFn,
        pub priv_: *mut c_void => "priv",
        pub query_device_ex: VoidFn,
        pub ibv_destroy_flow: VoidFn,
        pub abi_placeholder2: VoidFn => "ABI_placeholder2",
        pub ibv_create_flow: VoidFn,
        pub abi_placeholder1: VoidFn => "ABI_placeholder1",
        pub open_qp: VoidFn,
        pub create_qp_ex: VoidFn,
        pub get_srq_num: VoidFn,
        pub create_srq_ex: VoidFn,
        pub open_xrcd: VoidFn,
        pub close_xrcd: VoidFn,
        pub abi_placeholder3: u64 => "_ABI_placeholder3",
        pub sz: usize,
        pub context: ibv_context,
    }

    /// `struct ibv_device_attr`
    pub struct ibv_device_attr = "struct ibv_device_attr" {
        pub fw_ver: [c_char; 64],
        /// big-endian
        pub node_guid: u64,
        /// big-endian
        pub sys_image_guid: u64,
        pub max_mr_size: u64,
        pub page_size_cap: u64,
        pub vendor_id: u32,
        pub vendor_part_id: u32,
        pub hw_ver: u32,
        pub max_qp: c_int,
        pub max_qp_wr: c_int,
        pub device_cap_flags: c_uint,
        pub max_sge: c_int,
        pub max_sge_rd: c_int,
        pub max_cq: c_int,
        pub max_cqe: c_int,
        pub max_mr: c_int,
        pub max_pd: c_int,
        pub max_qp_rd_atom: c_int,
        pub max_ee_rd_atom: c_int,
        pub max_res_rd_atom: c_int,
        pub max_qp_init_rd_atom: c_int,
        pub max_ee_init_rd_atom: c_int,
        /// `enum ibv_atomic_cap`
        pub atomic_cap: u32,
        pub max_ee: c_int,
        pub max_rdd: c_int,
        pub max_mw: c_int,
        pub max_raw_ipv6_qp: c_int,
        pub max_raw_ethy_qp: c_int,
        pub max_mcast_grp: c_int,
        pub max_mcast_qp_attach: c_int,
        pub max_total_mcast_qp_attach: c_int,
        pub max_ah: c_int,
        pub max_fmr: c_int,
        pub max_map_per_fmr: c_int,
        pub max_srq: c_int,
        pub max_srq_wr: c_int,
        pub max_srq_sge: c_int,
        pub max_pkeys: u16,
        pub local_ca_ack_delay: u8,
        pub phys_port_cnt: u8,
    }

    /// `struct ibv_port_attr`
    pub struct ibv_port_attr = "struct ibv_port_attr" {
        /// `enum ibv_port_state`
        pub state: u32,
        /// `enum ibv_mtu`
        pub max_mtu: u32,
        /// `enum ibv_mtu`
        pub active_mtu: u32,
        pub gid_tbl_len: c_int,
        pub port_cap_flags: u32,
        pub max_msg_sz: u32,
        pub bad_pkey_cntr: u32,
        pub qkey_viol_cntr: u32,
        pub pkey_tbl_len: u16,
        pub lid: u16,
        pub sm_lid: u16,
        pub lmc: u8,
        pub max_vl_num: u8,
        pub sm_sl: u8,
        pub subnet_timeout: u8,
        pub init_type_reply: u8,
        pub active_width: u8,
        pub active_speed: u8,
        pub phys_state: u8,
        /// `IBV_LINK_LAYER_*`
        pub link_layer: u8,
        pub flags: u8,
        pub port_cap_flags2: u16,
    }

    /// `union ibv_gid`
    pub union ibv_gid = "union ibv_gid" {
        pub raw: [u8; 16],
        pub global: ibv_gid_global,
    }

    /// `union ibv_gid`'s `global` (both big-endian)
    pub struct ibv_gid_global = "union ibv_gid" @ "global" {
        pub subnet_prefix: u64,
        pub interface_id: u64,
    }

    /// `struct ibv_comp_channel`: its `fd` turns readable when a CQ armed
    /// with `ibv_req_notify_cq` gets a completion.
    pub struct ibv_comp_channel = "struct ibv_comp_channel" {
        pub context: *mut ibv_context,
        pub fd: c_int,
        pub refcnt: c_int,
    }

    /// `struct ibv_pd`
    pub struct ibv_pd = "struct ibv_pd" {
        pub context: *mut ibv_context,
        pub handle: u32,
    }

    /// `struct ibv_mr`
    pub struct ibv_mr = "struct ibv_mr" {
        pub context: *mut ibv_context,
        pub pd: *mut ibv_pd,
        pub addr: *mut c_void,
        pub length: usize,
        pub handle: u32,
        pub lkey: u32,
        pub rkey: u32,
    }

    /// `struct ibv_cq`
    pub struct ibv_cq = "struct ibv_cq" {
        pub context: *mut ibv_context,
        pub channel: *mut ibv_comp_channel,
        pub cq_context: *mut c_void,
        pub handle: u32,
        pub cqe: c_int,
        pub mutex: pthread_mutex_t,
        pub cond: pthread_cond_t,
        pub comp_events_completed: u32,
        pub async_events_completed: u32,
    }

    /// `struct ibv_qp`
    pub struct ibv_qp = "struct ibv_qp" {
        pub context: *mut ibv_context,
        pub qp_context: *mut c_void,
        pub pd: *mut ibv_pd,
        pub send_cq: *mut ibv_cq,
        pub recv_cq: *mut ibv_cq,
        pub srq: *mut ibv_srq,
        pub handle: u32,
        pub qp_num: u32,
        /// `enum ibv_qp_state`
        pub state: u32,
        /// `enum ibv_qp_type`
        pub qp_type: u32,
        pub mutex: pthread_mutex_t,
        pub cond: pthread_cond_t,
        pub events_completed: u32,
    }

    /// `struct ibv_srq`: `ibv_post_srq_recv` reads `context` (the header's
    /// static inline calls through `context->ops`).
    pub struct ibv_srq = "struct ibv_srq" {
        pub context: *mut ibv_context,
        pub srq_context: *mut c_void,
        pub pd: *mut ibv_pd,
        pub handle: u32,
        pub mutex: pthread_mutex_t,
        pub cond: pthread_cond_t,
        pub events_completed: u32,
    }

    /// `struct ibv_srq_attr`
    pub struct ibv_srq_attr = "struct ibv_srq_attr" {
        pub max_wr: u32,
        pub max_sge: u32,
        pub srq_limit: u32,
    }

    /// `struct ibv_srq_init_attr`
    pub struct ibv_srq_init_attr = "struct ibv_srq_init_attr" {
        pub srq_context: *mut c_void,
        pub attr: ibv_srq_attr,
    }

    /// `struct ibv_qp_cap`
    pub struct ibv_qp_cap = "struct ibv_qp_cap" {
        pub max_send_wr: u32,
        pub max_recv_wr: u32,
        pub max_send_sge: u32,
        pub max_recv_sge: u32,
        pub max_inline_data: u32,
    }

    /// `struct ibv_qp_init_attr`
    pub struct ibv_qp_init_attr = "struct ibv_qp_init_attr" {
        pub qp_context: *mut c_void,
        pub send_cq: *mut ibv_cq,
        pub recv_cq: *mut ibv_cq,
        pub srq: *mut ibv_srq,
        pub cap: ibv_qp_cap,
        /// `enum ibv_qp_type`
        pub qp_type: u32,
        pub sq_sig_all: c_int,
    }

    /// `struct ibv_rx_hash_conf`
    pub struct ibv_rx_hash_conf = "struct ibv_rx_hash_conf" {
        pub rx_hash_function: u8,
        pub rx_hash_key_len: u8,
        pub rx_hash_key: *mut u8,
        pub rx_hash_fields_mask: u64,
    }

    /// `struct ibv_qp_init_attr_ex` (for `efadv_create_qp_ex`)
    pub struct ibv_qp_init_attr_ex = "struct ibv_qp_init_attr_ex" {
        pub qp_context: *mut c_void,
        pub send_cq: *mut ibv_cq,
        pub recv_cq: *mut ibv_cq,
        pub srq: *mut ibv_srq,
        pub cap: ibv_qp_cap,
        /// `enum ibv_qp_type`
        pub qp_type: u32,
        pub sq_sig_all: c_int,
        /// `IBV_QP_INIT_ATTR_*`
        pub comp_mask: u32,
        pub pd: *mut ibv_pd,
        pub xrcd: *mut ibv_xrcd,
        pub create_flags: u32,
        pub max_tso_header: u16,
        pub rwq_ind_tbl: *mut ibv_rwq_ind_table,
        pub rx_hash_conf: ibv_rx_hash_conf,
        pub source_qpn: u32,
        pub send_ops_flags: u64,
    }

    /// `struct ibv_global_route`
    pub struct ibv_global_route = "struct ibv_global_route" {
        pub dgid: ibv_gid,
        pub flow_label: u32,
        pub sgid_index: u8,
        pub hop_limit: u8,
        pub traffic_class: u8,
    }

    /// `struct ibv_ah_attr`
    pub struct ibv_ah_attr = "struct ibv_ah_attr" {
        pub grh: ibv_global_route,
        pub dlid: u16,
        pub sl: u8,
        pub src_path_bits: u8,
        pub static_rate: u8,
        pub is_global: u8,
        pub port_num: u8,
    }

    /// `struct ibv_qp_attr` (for `ibv_modify_qp`)
    pub struct ibv_qp_attr = "struct ibv_qp_attr" {
        /// `enum ibv_qp_state`
        pub qp_state: u32,
        /// `enum ibv_qp_state`
        pub cur_qp_state: u32,
        /// `enum ibv_mtu`
        pub path_mtu: u32,
        /// `enum ibv_mig_state`
        pub path_mig_state: u32,
        pub qkey: u32,
        pub rq_psn: u32,
        pub sq_psn: u32,
        pub dest_qp_num: u32,
        pub qp_access_flags: c_uint,
        pub cap: ibv_qp_cap,
        pub ah_attr: ibv_ah_attr,
        pub alt_ah_attr: ibv_ah_attr,
        pub pkey_index: u16,
        pub alt_pkey_index: u16,
        pub en_sqd_async_notify: u8,
        pub sq_draining: u8,
        pub max_rd_atomic: u8,
        pub max_dest_rd_atomic: u8,
        pub min_rnr_timer: u8,
        pub port_num: u8,
        pub timeout: u8,
        pub retry_cnt: u8,
        pub rnr_retry: u8,
        pub alt_port_num: u8,
        pub alt_timeout: u8,
        pub rate_limit: u32,
    }

    /// `struct ibv_sge`
    pub struct ibv_sge = "struct ibv_sge" {
        pub addr: u64,
        pub length: u32,
        pub lkey: u32,
    }

    /// `struct ibv_mw_bind_info`
    pub struct ibv_mw_bind_info = "struct ibv_mw_bind_info" {
        pub mr: *mut ibv_mr,
        pub addr: u64,
        pub length: u64,
        pub mw_access_flags: c_uint,
    }

    /// `struct ibv_send_wr`
    pub struct ibv_send_wr = "struct ibv_send_wr" {
        pub wr_id: u64,
        pub next: *mut ibv_send_wr,
        pub sg_list: *mut ibv_sge,
        pub num_sge: c_int,
        /// `enum ibv_wr_opcode`
        pub opcode: u32,
        /// `IBV_SEND_*`
        pub send_flags: c_uint,
        /// C's anonymous union of `imm_data` and `invalidate_rkey`
        pub imm: ibv_send_wr_imm => "imm_data",
        pub wr: ibv_send_wr_wr,
        pub qp_type: ibv_send_wr_qp_type,
        /// C's anonymous union of `bind_mw` and `tso`
        pub ext: ibv_send_wr_ext => "bind_mw",
    }

    /// `ibv_send_wr`'s anonymous union of `imm_data` (big-endian) and
    /// `invalidate_rkey`
    pub union ibv_send_wr_imm = "struct ibv_send_wr" @ anon {
        pub imm_data: u32,
        pub invalidate_rkey: u32,
    }

    /// `ibv_send_wr.wr`
    pub union ibv_send_wr_wr = "struct ibv_send_wr" @ "wr" {
        pub rdma: ibv_send_wr_rdma,
        pub atomic: ibv_send_wr_atomic,
        pub ud: ibv_send_wr_ud,
    }

    /// `ibv_send_wr.wr.rdma`
    pub struct ibv_send_wr_rdma = "struct ibv_send_wr" @ "wr.rdma" {
        pub remote_addr: u64,
        pub rkey: u32,
    }

    /// `ibv_send_wr.wr.atomic`
    pub struct ibv_send_wr_atomic = "struct ibv_send_wr" @ "wr.atomic" {
        pub remote_addr: u64,
        pub compare_add: u64,
        pub swap: u64,
        pub rkey: u32,
    }

    /// `ibv_send_wr.wr.ud`
    pub struct ibv_send_wr_ud = "struct ibv_send_wr" @ "wr.ud" {
        pub ah: *mut ibv_ah,
        pub remote_qpn: u32,
        pub remote_qkey: u32,
    }

    /// `ibv_send_wr.qp_type`
    pub union ibv_send_wr_qp_type = "struct ibv_send_wr" @ "qp_type" {
        pub xrc: ibv_send_wr_xrc,
    }

    /// `ibv_send_wr.qp_type.xrc`
    pub struct ibv_send_wr_xrc = "struct ibv_send_wr" @ "qp_type.xrc" {
        pub remote_srqn: u32,
    }

    /// `ibv_send_wr`'s anonymous union of `bind_mw` and `tso`
    pub union ibv_send_wr_ext = "struct ibv_send_wr" @ anon {
        pub bind_mw: ibv_send_wr_bind_mw,
        pub tso: ibv_send_wr_tso,
    }

    /// `ibv_send_wr.bind_mw`
    pub struct ibv_send_wr_bind_mw = "struct ibv_send_wr" @ "bind_mw" {
        pub mw: *mut ibv_mw,
        pub rkey: u32,
        pub bind_info: ibv_mw_bind_info,
    }

    /// `ibv_send_wr.tso`
    pub struct ibv_send_wr_tso = "struct ibv_send_wr" @ "tso" {
        pub hdr: *mut c_void,
        pub hdr_sz: u16,
        pub mss: u16,
    }

    /// `struct ibv_recv_wr`
    pub struct ibv_recv_wr = "struct ibv_recv_wr" {
        pub wr_id: u64,
        pub next: *mut ibv_recv_wr,
        pub sg_list: *mut ibv_sge,
        pub num_sge: c_int,
    }

    /// `struct ibv_wc`
    pub struct ibv_wc = "struct ibv_wc" {
        pub wr_id: u64,
        /// `enum ibv_wc_status`
        pub status: u32,
        /// `enum ibv_wc_opcode`
        pub opcode: u32,
        pub vendor_err: u32,
        pub byte_len: u32,
        /// C's anonymous union of `imm_data` and `invalidated_rkey`
        pub imm: ibv_wc_imm => "imm_data",
        pub qp_num: u32,
        pub src_qp: u32,
        /// `IBV_WC_*` flags
        pub wc_flags: c_uint,
        pub pkey_index: u16,
        pub slid: u16,
        pub sl: u8,
        pub dlid_path_bits: u8,
    }

    /// `ibv_wc`'s anonymous union of `imm_data` (big-endian) and
    /// `invalidated_rkey`
    pub union ibv_wc_imm = "struct ibv_wc" @ anon {
        pub imm_data: u32,
        pub invalidated_rkey: u32,
    }

    /// `struct rdma_event_channel` (`<rdma/rdma_cma.h>`)
    pub struct rdma_event_channel = "struct rdma_event_channel" {
        pub fd: c_int,
    }

    /// `struct rdma_cm_id`: `route` (addresses and path records) is kept
    /// as bytes; this crate reads none of it.
    pub struct rdma_cm_id = "struct rdma_cm_id" {
        pub verbs: *mut ibv_context,
        pub channel: *mut rdma_event_channel,
        pub context: *mut c_void,
        pub qp: *mut ibv_qp,
        pub route: [u64; 39],
        /// `enum rdma_port_space`
        pub ps: u32,
        pub port_num: u8,
        pub event: *mut rdma_cm_event,
        pub send_cq_channel: *mut ibv_comp_channel,
        pub send_cq: *mut ibv_cq,
        pub recv_cq_channel: *mut ibv_comp_channel,
        pub recv_cq: *mut ibv_cq,
        pub srq: *mut ibv_srq,
        pub pd: *mut ibv_pd,
        /// `enum ibv_qp_type`
        pub qp_type: u32,
    }

    /// `struct rdma_conn_param`
    pub struct rdma_conn_param = "struct rdma_conn_param" {
        pub private_data: *const c_void,
        pub private_data_len: u8,
        pub responder_resources: u8,
        pub initiator_depth: u8,
        pub flow_control: u8,
        pub retry_count: u8,
        pub rnr_retry_count: u8,
        pub srq: u8,
        pub qp_num: u32,
    }

    /// `struct rdma_ud_param`
    pub struct rdma_ud_param = "struct rdma_ud_param" {
        pub private_data: *const c_void,
        pub private_data_len: u8,
        pub ah_attr: ibv_ah_attr,
        pub qp_num: u32,
        pub qkey: u32,
    }

    /// `rdma_cm_event.param`
    pub union rdma_cm_event_param = "struct rdma_cm_event" @ "param" {
        pub conn: rdma_conn_param,
        pub ud: rdma_ud_param,
    }

    /// `struct rdma_cm_event`
    pub struct rdma_cm_event = "struct rdma_cm_event" {
        pub id: *mut rdma_cm_id,
        pub listen_id: *mut rdma_cm_id,
        /// `enum rdma_cm_event_type`
        pub event: u32,
        pub status: c_int,
        pub param: rdma_cm_event_param,
    }

    /// `struct efadv_device_attr`
    pub struct efadv_device_attr = "struct efadv_device_attr" {
        pub comp_mask: u64,
        pub max_sq_wr: u32,
        pub max_rq_wr: u32,
        pub max_sq_sge: u16,
        pub max_rq_sge: u16,
        pub inline_buf_size: u16,
        pub reserved: [u8; 2],
        /// `EFADV_DEVICE_ATTR_CAPS_*`
        pub device_caps: u32,
        pub max_rdma_size: u32,
    }

    /// `struct efadv_qp_init_attr`
    pub struct efadv_qp_init_attr = "struct efadv_qp_init_attr" {
        pub comp_mask: u64,
        /// `EFADV_QP_DRIVER_TYPE_*`
        pub driver_qp_type: u32,
        pub reserved: [u8; 4],
    }
}

impl ibv_gid {
    /// The 16 bytes of the GID.
    pub fn bytes(&self) -> [u8; 16] {
        // SAFETY: both members are plain bytes of the same 16-byte storage;
        // every bit pattern is a valid `[u8; 16]`.
        unsafe { self.raw }
    }
}

c_consts! {
    pub const IBV_NODE_UNKNOWN: c_int = -1;
    pub const IBV_NODE_CA: c_int = 1;
    pub const IBV_NODE_SWITCH: c_int = 2;
    pub const IBV_NODE_ROUTER: c_int = 3;
    pub const IBV_NODE_RNIC: c_int = 4;
    pub const IBV_NODE_USNIC: c_int = 5;
    pub const IBV_NODE_USNIC_UDP: c_int = 6;
    pub const IBV_NODE_UNSPECIFIED: c_int = 7;

    pub const IBV_TRANSPORT_UNKNOWN: c_int = -1;
    pub const IBV_TRANSPORT_IB: c_int = 0;
    pub const IBV_TRANSPORT_IWARP: c_int = 1;
    pub const IBV_TRANSPORT_USNIC: c_int = 2;
    pub const IBV_TRANSPORT_USNIC_UDP: c_int = 3;
    pub const IBV_TRANSPORT_UNSPECIFIED: c_int = 4;

    pub const IBV_PORT_NOP: u32 = 0;
    pub const IBV_PORT_DOWN: u32 = 1;
    pub const IBV_PORT_INIT: u32 = 2;
    pub const IBV_PORT_ARMED: u32 = 3;
    pub const IBV_PORT_ACTIVE: u32 = 4;
    pub const IBV_PORT_ACTIVE_DEFER: u32 = 5;

    pub const IBV_MTU_256: u32 = 1;
    pub const IBV_MTU_512: u32 = 2;
    pub const IBV_MTU_1024: u32 = 3;
    pub const IBV_MTU_2048: u32 = 4;
    pub const IBV_MTU_4096: u32 = 5;

    pub const IBV_LINK_LAYER_UNSPECIFIED: u8 = 0;
    pub const IBV_LINK_LAYER_INFINIBAND: u8 = 1;
    pub const IBV_LINK_LAYER_ETHERNET: u8 = 2;

    pub const IBV_ACCESS_LOCAL_WRITE: u32 = 1;
    pub const IBV_ACCESS_REMOTE_WRITE: u32 = 1 << 1;
    pub const IBV_ACCESS_REMOTE_READ: u32 = 1 << 2;
    pub const IBV_ACCESS_REMOTE_ATOMIC: u32 = 1 << 3;
    pub const IBV_ACCESS_MW_BIND: u32 = 1 << 4;
    pub const IBV_ACCESS_ZERO_BASED: u32 = 1 << 5;
    pub const IBV_ACCESS_ON_DEMAND: u32 = 1 << 6;
    pub const IBV_ACCESS_HUGETLB: u32 = 1 << 7;
    pub const IBV_ACCESS_RELAXED_ORDERING: u32 = 1 << 20;
    pub const IBV_ACCESS_OPTIONAL_RANGE: u32 = 0x3ff0_0000;

    pub const IBV_QPT_RC: u32 = 2;
    pub const IBV_QPT_UC: u32 = 3;
    pub const IBV_QPT_UD: u32 = 4;
    pub const IBV_QPT_DRIVER: u32 = 0xff;

    pub const IBV_QPS_RESET: u32 = 0;
    pub const IBV_QPS_INIT: u32 = 1;
    pub const IBV_QPS_RTR: u32 = 2;
    pub const IBV_QPS_RTS: u32 = 3;
    pub const IBV_QPS_SQD: u32 = 4;
    pub const IBV_QPS_SQE: u32 = 5;
    pub const IBV_QPS_ERR: u32 = 6;

    pub const IBV_QP_STATE: c_int = 1 << 0;
    pub const IBV_QP_CUR_STATE: c_int = 1 << 1;
    pub const IBV_QP_ACCESS_FLAGS: c_int = 1 << 3;
    pub const IBV_QP_PKEY_INDEX: c_int = 1 << 4;
    pub const IBV_QP_PORT: c_int = 1 << 5;
    pub const IBV_QP_QKEY: c_int = 1 << 6;
    pub const IBV_QP_AV: c_int = 1 << 7;
    pub const IBV_QP_PATH_MTU: c_int = 1 << 8;
    pub const IBV_QP_TIMEOUT: c_int = 1 << 9;
    pub const IBV_QP_RETRY_CNT: c_int = 1 << 10;
    pub const IBV_QP_RNR_RETRY: c_int = 1 << 11;
    pub const IBV_QP_RQ_PSN: c_int = 1 << 12;
    pub const IBV_QP_MAX_QP_RD_ATOMIC: c_int = 1 << 13;
    pub const IBV_QP_MIN_RNR_TIMER: c_int = 1 << 15;
    pub const IBV_QP_SQ_PSN: c_int = 1 << 16;
    pub const IBV_QP_MAX_DEST_RD_ATOMIC: c_int = 1 << 17;
    pub const IBV_QP_CAP: c_int = 1 << 19;
    pub const IBV_QP_DEST_QPN: c_int = 1 << 20;

    pub const IBV_QP_INIT_ATTR_PD: u32 = 1 << 0;
    pub const IBV_QP_INIT_ATTR_SEND_OPS_FLAGS: u32 = 1 << 6;

    pub const IBV_WR_RDMA_WRITE: u32 = 0;
    pub const IBV_WR_RDMA_WRITE_WITH_IMM: u32 = 1;
    pub const IBV_WR_SEND: u32 = 2;
    pub const IBV_WR_SEND_WITH_IMM: u32 = 3;
    pub const IBV_WR_RDMA_READ: u32 = 4;
    pub const IBV_WR_ATOMIC_CMP_AND_SWP: u32 = 5;
    pub const IBV_WR_ATOMIC_FETCH_AND_ADD: u32 = 6;

    pub const IBV_SEND_FENCE: u32 = 1 << 0;
    pub const IBV_SEND_SIGNALED: u32 = 1 << 1;
    pub const IBV_SEND_SOLICITED: u32 = 1 << 2;
    pub const IBV_SEND_INLINE: u32 = 1 << 3;

    pub const IBV_WC_SUCCESS: u32 = 0;
    pub const IBV_WC_WR_FLUSH_ERR: u32 = 5;
    pub const IBV_WC_SEND: u32 = 0;
    pub const IBV_WC_RDMA_WRITE: u32 = 1;
    pub const IBV_WC_RDMA_READ: u32 = 2;
    pub const IBV_WC_RECV: u32 = 1 << 7;
    pub const IBV_WC_RECV_RDMA_WITH_IMM: u32 = (1 << 7) + 1;
    pub const IBV_WC_WITH_IMM: u32 = 1 << 1;

    pub const RDMA_PS_IPOIB: u32 = 0x0002;
    pub const RDMA_PS_TCP: u32 = 0x0106;
    pub const RDMA_PS_UDP: u32 = 0x0111;
    pub const RDMA_PS_IB: u32 = 0x013f;

    pub const RDMA_CM_EVENT_ADDR_RESOLVED: u32 = 0;
    pub const RDMA_CM_EVENT_ADDR_ERROR: u32 = 1;
    pub const RDMA_CM_EVENT_ROUTE_RESOLVED: u32 = 2;
    pub const RDMA_CM_EVENT_ROUTE_ERROR: u32 = 3;
    pub const RDMA_CM_EVENT_CONNECT_REQUEST: u32 = 4;
    pub const RDMA_CM_EVENT_CONNECT_RESPONSE: u32 = 5;
    pub const RDMA_CM_EVENT_CONNECT_ERROR: u32 = 6;
    pub const RDMA_CM_EVENT_UNREACHABLE: u32 = 7;
    pub const RDMA_CM_EVENT_REJECTED: u32 = 8;
    pub const RDMA_CM_EVENT_ESTABLISHED: u32 = 9;
    pub const RDMA_CM_EVENT_DISCONNECTED: u32 = 10;
    pub const RDMA_CM_EVENT_DEVICE_REMOVAL: u32 = 11;
    pub const RDMA_CM_EVENT_ADDR_CHANGE: u32 = 14;
    pub const RDMA_CM_EVENT_TIMEWAIT_EXIT: u32 = 15;

    pub const EFADV_QP_DRIVER_TYPE_SRD: u32 = 0;
    pub const EFADV_DEVICE_ATTR_CAPS_RDMA_READ: u32 = 1 << 0;
    pub const EFADV_DEVICE_ATTR_CAPS_RNR_RETRY: u32 = 1 << 1;
    pub const EFADV_DEVICE_ATTR_CAPS_CQ_WITH_SGID: u32 = 1 << 2;
}
