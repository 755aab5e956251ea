//! Integer and string constants of the C API, named as in the headers.
//!
//! Types follow `docs/ARCHITECTURE.md`: bit flags are `u64`, error numbers
//! are positive `i32`, values of a C enum are typed by a `u32` alias named
//! after the enum. `tests/abi_layout.rs` checks every value against
//! `tests/abi/constants.tsv`.
#![forbid(unsafe_code)]

use super::types::fi_addr_t;

// ---- API version ----

/// Major version of the API this library implements.
pub const FI_MAJOR_VERSION: u32 = 2;
/// Minor version of the API this library implements (the reference header says 6).
pub const FI_MINOR_VERSION: u32 = 8;
/// Revision of the headers.
pub const FI_REVISION_VERSION: u32 = 0;

/// Packs a major and minor number the way `FI_VERSION(major, minor)` does.
pub const fn fi_version(major: u32, minor: u32) -> u32 {
    (major << 16) | minor
}
/// Major part of a packed version (`FI_MAJOR`).
pub const fn fi_major(version: u32) -> u32 {
    version >> 16
}
/// Minor part of a packed version (`FI_MINOR`).
pub const fn fi_minor(version: u32) -> u32 {
    version & 0xffff
}
/// The packed API version this library implements.
pub const FI_VERSION: u32 = fi_version(FI_MAJOR_VERSION, FI_MINOR_VERSION);

// ---- fi_av_type ----

/// Address vector types (`enum fi_av_type`).
pub type fi_av_type = u32;
pub const FI_AV_UNSPEC: fi_av_type = 0;
pub const FI_AV_MAP: fi_av_type = 1;
pub const FI_AV_TABLE: fi_av_type = 2;

// ---- fi_bus_type ----

/// NIC bus types (`enum fi_bus_type`).
pub type fi_bus_type = u32;
pub const FI_BUS_UNKNOWN: fi_bus_type = 0;
pub const FI_BUS_UNSPEC: fi_bus_type = 0;
pub const FI_BUS_PCI: fi_bus_type = 1;

// ---- fi_cntr_events ----

/// Counter event kinds (`enum fi_cntr_events`).
pub type fi_cntr_events = u32;
pub const FI_CNTR_EVENTS_COMP: fi_cntr_events = 0;
pub const FI_CNTR_EVENTS_BYTES: fi_cntr_events = 1;

// ---- fi_collective_op ----

/// Collective operations (`enum fi_collective_op`).
pub type fi_collective_op = u32;
pub const FI_BARRIER: fi_collective_op = 0;
pub const FI_BROADCAST: fi_collective_op = 1;
pub const FI_ALLTOALL: fi_collective_op = 2;
pub const FI_ALLREDUCE: fi_collective_op = 3;
pub const FI_ALLGATHER: fi_collective_op = 4;
pub const FI_REDUCE_SCATTER: fi_collective_op = 5;
pub const FI_REDUCE: fi_collective_op = 6;
pub const FI_SCATTER: fi_collective_op = 7;
pub const FI_GATHER: fi_collective_op = 8;

// ---- fi_cq_format ----

/// Completion entry formats (`enum fi_cq_format`).
pub type fi_cq_format = u32;
pub const FI_CQ_FORMAT_UNSPEC: fi_cq_format = 0;
pub const FI_CQ_FORMAT_CONTEXT: fi_cq_format = 1;
pub const FI_CQ_FORMAT_MSG: fi_cq_format = 2;
pub const FI_CQ_FORMAT_DATA: fi_cq_format = 3;
pub const FI_CQ_FORMAT_TAGGED: fi_cq_format = 4;

// ---- fi_cq_wait_cond ----

/// CQ wait conditions (`enum fi_cq_wait_cond`).
pub type fi_cq_wait_cond = u32;
pub const FI_CQ_COND_NONE: fi_cq_wait_cond = 0;
pub const FI_CQ_COND_THRESHOLD: fi_cq_wait_cond = 1;

// ---- fi_datatype ----

/// Atomic and collective data types (`enum fi_datatype`).
pub type fi_datatype = u32;
pub const FI_INT8: fi_datatype = 0;
pub const FI_UINT8: fi_datatype = 1;
pub const FI_INT16: fi_datatype = 2;
pub const FI_UINT16: fi_datatype = 3;
pub const FI_INT32: fi_datatype = 4;
pub const FI_UINT32: fi_datatype = 5;
pub const FI_INT64: fi_datatype = 6;
pub const FI_UINT64: fi_datatype = 7;
pub const FI_FLOAT: fi_datatype = 8;
pub const FI_DOUBLE: fi_datatype = 9;
pub const FI_FLOAT_COMPLEX: fi_datatype = 10;
pub const FI_DOUBLE_COMPLEX: fi_datatype = 11;
pub const FI_LONG_DOUBLE: fi_datatype = 12;
pub const FI_LONG_DOUBLE_COMPLEX: fi_datatype = 13;
pub const FI_DATATYPE_LAST: fi_datatype = 14;
pub const FI_INT128: fi_datatype = 14;
pub const FI_UINT128: fi_datatype = 15;
pub const FI_FLOAT16: fi_datatype = 16;
pub const FI_BFLOAT16: fi_datatype = 17;
pub const FI_FLOAT8_E4M3: fi_datatype = 18;
pub const FI_FLOAT8_E5M2: fi_datatype = 19;
pub const FI_VOID: fi_datatype = 256;

// ---- fi_ep_type ----

/// Endpoint types (`enum fi_ep_type`).
pub type fi_ep_type = u32;
pub const FI_EP_SOCK_STREAM: fi_ep_type = 0;
pub const FI_EP_UNSPEC: fi_ep_type = 0;
pub const FI_EP_MSG: fi_ep_type = 1;
pub const FI_EP_DGRAM: fi_ep_type = 2;
pub const FI_EP_RDM: fi_ep_type = 3;

// ---- fi_hmem_iface ----

/// Device memory interfaces (`enum fi_hmem_iface`).
pub type fi_hmem_iface = u32;
pub const FI_HMEM_SYSTEM: fi_hmem_iface = 0;
pub const FI_HMEM_CUDA: fi_hmem_iface = 1;
pub const FI_HMEM_ROCR: fi_hmem_iface = 2;
pub const FI_HMEM_ZE: fi_hmem_iface = 3;
pub const FI_HMEM_NEURON: fi_hmem_iface = 4;
pub const FI_HMEM_SYNAPSEAI: fi_hmem_iface = 5;

// ---- fi_link_state ----

/// NIC link states (`enum fi_link_state`).
pub type fi_link_state = u32;
pub const FI_LINK_UNKNOWN: fi_link_state = 0;
pub const FI_LINK_DOWN: fi_link_state = 1;
pub const FI_LINK_UP: fi_link_state = 2;

// ---- fi_log_level ----

/// Log levels (`enum fi_log_level`).
pub type fi_log_level = u32;
pub const FI_LOG_WARN: fi_log_level = 0;
pub const FI_LOG_TRACE: fi_log_level = 1;
pub const FI_LOG_INFO: fi_log_level = 2;
pub const FI_LOG_DEBUG: fi_log_level = 3;

// ---- fi_log_subsys ----

/// Log subsystems (`enum fi_log_subsys`).
pub type fi_log_subsys = u32;
pub const FI_LOG_CORE: fi_log_subsys = 0;
pub const FI_LOG_FABRIC: fi_log_subsys = 1;
pub const FI_LOG_DOMAIN: fi_log_subsys = 2;
pub const FI_LOG_EP_CTRL: fi_log_subsys = 3;
pub const FI_LOG_EP_DATA: fi_log_subsys = 4;
pub const FI_LOG_AV: fi_log_subsys = 5;
pub const FI_LOG_CQ: fi_log_subsys = 6;
pub const FI_LOG_EQ: fi_log_subsys = 7;
pub const FI_LOG_MR: fi_log_subsys = 8;
pub const FI_LOG_CNTR: fi_log_subsys = 9;

// ---- fi_mr_mode ----

/// The old memory-registration mode enum (`enum fi_mr_mode`); the current bit flags are the `u64` `FI_MR_*` constants.
pub type fi_mr_mode = u32;
pub const FI_MR_UNSPEC: fi_mr_mode = 0;
pub const FI_MR_BASIC: fi_mr_mode = 1;
pub const FI_MR_SCALABLE: fi_mr_mode = 2;

// ---- fi_op ----

/// Atomic operations (`enum fi_op`).
pub type fi_op = u32;
pub const FI_MIN: fi_op = 0;
pub const FI_MAX: fi_op = 1;
pub const FI_SUM: fi_op = 2;
pub const FI_PROD: fi_op = 3;
pub const FI_LOR: fi_op = 4;
pub const FI_LAND: fi_op = 5;
pub const FI_BOR: fi_op = 6;
pub const FI_BAND: fi_op = 7;
pub const FI_LXOR: fi_op = 8;
pub const FI_BXOR: fi_op = 9;
pub const FI_ATOMIC_READ: fi_op = 10;
pub const FI_ATOMIC_WRITE: fi_op = 11;
pub const FI_CSWAP: fi_op = 12;
pub const FI_CSWAP_NE: fi_op = 13;
pub const FI_CSWAP_LE: fi_op = 14;
pub const FI_CSWAP_LT: fi_op = 15;
pub const FI_CSWAP_GE: fi_op = 16;
pub const FI_CSWAP_GT: fi_op = 17;
pub const FI_MSWAP: fi_op = 18;
pub const FI_ATOMIC_OP_LAST: fi_op = 19;
pub const FI_DIFF: fi_op = 19;
pub const FI_NOOP: fi_op = 256;

// ---- fi_op_type ----

/// Deferred work operation kinds (`enum fi_op_type`).
pub type fi_op_type = u32;
pub const FI_OP_RECV: fi_op_type = 0;
pub const FI_OP_SEND: fi_op_type = 1;
pub const FI_OP_TRECV: fi_op_type = 2;
pub const FI_OP_TSEND: fi_op_type = 3;
pub const FI_OP_READ: fi_op_type = 4;
pub const FI_OP_WRITE: fi_op_type = 5;
pub const FI_OP_ATOMIC: fi_op_type = 6;
pub const FI_OP_FETCH_ATOMIC: fi_op_type = 7;
pub const FI_OP_COMPARE_ATOMIC: fi_op_type = 8;
pub const FI_OP_CNTR_SET: fi_op_type = 9;
pub const FI_OP_CNTR_ADD: fi_op_type = 10;

// ---- fi_param_type ----

/// Parameter value types (`enum fi_param_type`).
pub type fi_param_type = u32;
pub const FI_PARAM_STRING: fi_param_type = 0;
pub const FI_PARAM_INT: fi_param_type = 1;
pub const FI_PARAM_BOOL: fi_param_type = 2;
pub const FI_PARAM_SIZE_T: fi_param_type = 3;

// ---- fi_progress ----

/// Progress models (`enum fi_progress`).
pub type fi_progress = u32;
pub const FI_PROGRESS_UNSPEC: fi_progress = 0;
pub const FI_PROGRESS_AUTO: fi_progress = 1;
pub const FI_PROGRESS_MANUAL: fi_progress = 2;
pub const FI_PROGRESS_CONTROL_UNIFIED: fi_progress = 3;

// ---- fi_resource_mgmt ----

/// Resource management (`enum fi_resource_mgmt`).
pub type fi_resource_mgmt = u32;
pub const FI_RM_UNSPEC: fi_resource_mgmt = 0;
pub const FI_RM_DISABLED: fi_resource_mgmt = 1;
pub const FI_RM_ENABLED: fi_resource_mgmt = 2;

// ---- fi_threading ----

/// Threading models (`enum fi_threading`).
pub type fi_threading = u32;
pub const FI_THREAD_UNSPEC: fi_threading = 0;
pub const FI_THREAD_SAFE: fi_threading = 1;
pub const FI_THREAD_FID: fi_threading = 2;
pub const FI_THREAD_DOMAIN: fi_threading = 3;
pub const FI_THREAD_COMPLETION: fi_threading = 4;
pub const FI_THREAD_ENDPOINT: fi_threading = 5;

// ---- fi_trigger_event ----

/// Triggered-operation conditions (`enum fi_trigger_event`).
pub type fi_trigger_event = u32;
pub const FI_TRIGGER_THRESHOLD: fi_trigger_event = 0;
pub const FI_TRIGGER_XPU: fi_trigger_event = 1;

// ---- fi_type ----

/// Data kinds understood by `fi_tostr` (`enum fi_type`).
pub type fi_type = u32;
pub const FI_TYPE_INFO: fi_type = 0;
pub const FI_TYPE_EP_TYPE: fi_type = 1;
pub const FI_TYPE_CAPS: fi_type = 2;
pub const FI_TYPE_OP_FLAGS: fi_type = 3;
pub const FI_TYPE_ADDR_FORMAT: fi_type = 4;
pub const FI_TYPE_TX_ATTR: fi_type = 5;
pub const FI_TYPE_RX_ATTR: fi_type = 6;
pub const FI_TYPE_EP_ATTR: fi_type = 7;
pub const FI_TYPE_DOMAIN_ATTR: fi_type = 8;
pub const FI_TYPE_FABRIC_ATTR: fi_type = 9;
pub const FI_TYPE_THREADING: fi_type = 10;
pub const FI_TYPE_PROGRESS: fi_type = 11;
pub const FI_TYPE_PROTOCOL: fi_type = 12;
pub const FI_TYPE_MSG_ORDER: fi_type = 13;
pub const FI_TYPE_MODE: fi_type = 14;
pub const FI_TYPE_AV_TYPE: fi_type = 15;
pub const FI_TYPE_ATOMIC_TYPE: fi_type = 16;
pub const FI_TYPE_ATOMIC_OP: fi_type = 17;
pub const FI_TYPE_VERSION: fi_type = 18;
pub const FI_TYPE_EQ_EVENT: fi_type = 19;
pub const FI_TYPE_CQ_EVENT_FLAGS: fi_type = 20;
pub const FI_TYPE_MR_MODE: fi_type = 21;
pub const FI_TYPE_OP_TYPE: fi_type = 22;
pub const FI_TYPE_FID: fi_type = 23;
pub const FI_TYPE_COLLECTIVE_OP: fi_type = 24;
pub const FI_TYPE_HMEM_IFACE: fi_type = 25;
pub const FI_TYPE_CQ_FORMAT: fi_type = 26;
pub const FI_TYPE_LOG_LEVEL: fi_type = 27;
pub const FI_TYPE_LOG_SUBSYS: fi_type = 28;
pub const FI_TYPE_AV_ATTR: fi_type = 29;
pub const FI_TYPE_CQ_ATTR: fi_type = 30;
pub const FI_TYPE_MR_ATTR: fi_type = 31;
pub const FI_TYPE_CNTR_ATTR: fi_type = 32;
pub const FI_TYPE_CQ_ERR_ENTRY: fi_type = 33;
pub const FI_TYPE_CQ_WAIT_COND: fi_type = 34;
pub const FI_TYPE_WAIT_OBJ: fi_type = 35;

// ---- fi_wait_obj ----

/// Wait object kinds (`enum fi_wait_obj`).
pub type fi_wait_obj = u32;
pub const FI_WAIT_NONE: fi_wait_obj = 0;
pub const FI_WAIT_UNSPEC: fi_wait_obj = 1;
pub const FI_WAIT_SET: fi_wait_obj = 2;
pub const FI_WAIT_FD: fi_wait_obj = 3;
pub const FI_WAIT_MUTEX_COND: fi_wait_obj = 4;
pub const FI_WAIT_YIELD: fi_wait_obj = 5;
pub const FI_WAIT_POLLFD: fi_wait_obj = 6;

// ---- fi_xpu_provider ----

/// Device-side provider ids (`enum fi_xpu_provider`).
pub type fi_xpu_provider = u32;
pub const FI_XPU_PROV_EFA: fi_xpu_provider = 1;

// ---- fi_xpu_scope ----

/// Cooperation scope of device-side calls (an anonymous enum in C; named here).
pub type fi_xpu_scope = u32;
pub const FI_XPU_WORK_ITEM: fi_xpu_scope = 0;
pub const FI_XPU_SUBGROUP: fi_xpu_scope = 1;
pub const FI_XPU_WORK_GROUP: fi_xpu_scope = 2;
pub const FI_XPU_DEVICE: fi_xpu_scope = 3;

// ---- Error numbers ----

// Positive values; the C API returns them negated. Those below
// `FI_ERRNO_OFFSET` are the Linux errno values.
pub const FI_SUCCESS: i32 = 0;
pub const FI_EPERM: i32 = 1;
pub const FI_ENOENT: i32 = 2;
pub const FI_EINTR: i32 = 4;
pub const FI_EIO: i32 = 5;
pub const FI_E2BIG: i32 = 7;
pub const FI_EBADF: i32 = 9;
pub const FI_EAGAIN: i32 = 11;
pub const FI_EWOULDBLOCK: i32 = 11;
pub const FI_ENOMEM: i32 = 12;
pub const FI_EACCES: i32 = 13;
pub const FI_EFAULT: i32 = 14;
pub const FI_EBUSY: i32 = 16;
pub const FI_ENODEV: i32 = 19;
pub const FI_EINVAL: i32 = 22;
pub const FI_EMFILE: i32 = 24;
pub const FI_ENOSPC: i32 = 28;
pub const FI_ENOSYS: i32 = 38;
pub const FI_ENOMSG: i32 = 42;
pub const FI_ENODATA: i32 = 61;
pub const FI_EPROTO: i32 = 71;
pub const FI_EOVERFLOW: i32 = 75;
pub const FI_EMSGSIZE: i32 = 90;
pub const FI_ENOPROTOOPT: i32 = 92;
pub const FI_EOPNOTSUPP: i32 = 95;
pub const FI_EADDRINUSE: i32 = 98;
pub const FI_EADDRNOTAVAIL: i32 = 99;
pub const FI_ENETDOWN: i32 = 100;
pub const FI_ENETUNREACH: i32 = 101;
pub const FI_ECONNABORTED: i32 = 103;
pub const FI_ECONNRESET: i32 = 104;
pub const FI_ENOBUFS: i32 = 105;
pub const FI_EISCONN: i32 = 106;
pub const FI_ENOTCONN: i32 = 107;
pub const FI_ESHUTDOWN: i32 = 108;
pub const FI_ETIMEDOUT: i32 = 110;
pub const FI_ECONNREFUSED: i32 = 111;
pub const FI_EHOSTDOWN: i32 = 112;
pub const FI_EHOSTUNREACH: i32 = 113;
pub const FI_EALREADY: i32 = 114;
pub const FI_EINPROGRESS: i32 = 115;
pub const FI_EREMOTEIO: i32 = 121;
pub const FI_ECANCELED: i32 = 125;
pub const FI_EKEYREJECTED: i32 = 129;
pub const FI_EOTHER: i32 = 256;
pub const FI_ERRNO_OFFSET: i32 = 256;
pub const FI_ETOOSMALL: i32 = 257;
pub const FI_EOPBADSTATE: i32 = 258;
pub const FI_EAVAIL: i32 = 259;
pub const FI_EBADFLAGS: i32 = 260;
pub const FI_ENOEQ: i32 = 261;
pub const FI_EDOMAIN: i32 = 262;
pub const FI_ENOCQ: i32 = 263;
pub const FI_ECRC: i32 = 264;
pub const FI_ETRUNC: i32 = 265;
pub const FI_ENOKEY: i32 = 266;
pub const FI_ENOAV: i32 = 267;
pub const FI_EOVERRUN: i32 = 268;
pub const FI_ENORX: i32 = 269;
pub const FI_ENOMR: i32 = 270;
pub const FI_EFIREWALLADDR: i32 = 271;
pub const FI_ERRNO_MAX: i32 = 272;

// ---- `fi_control` commands ----

// `fi_control` commands (the `command` argument is an `int`).
pub const FI_GETFIDFLAG: i32 = 0;
pub const FI_SETFIDFLAG: i32 = 1;
pub const FI_GETOPSFLAG: i32 = 2;
pub const FI_SETOPSFLAG: i32 = 3;
pub const FI_ALIAS: i32 = 4;
pub const FI_GETWAIT: i32 = 5;
pub const FI_ENABLE: i32 = 6;
pub const FI_BACKLOG: i32 = 7;
pub const FI_GET_RAW_MR: i32 = 8;
pub const FI_MAP_RAW_MR: i32 = 9;
pub const FI_UNMAP_KEY: i32 = 10;
pub const FI_QUEUE_WORK: i32 = 11;
pub const FI_CANCEL_WORK: i32 = 12;
pub const FI_FLUSH_WORK: i32 = 13;
pub const FI_REFRESH: i32 = 14;
pub const FI_DUP: i32 = 15;
pub const FI_GETWAITOBJ: i32 = 16;
pub const FI_GET_VAL: i32 = 17;
pub const FI_SET_VAL: i32 = 18;
pub const FI_EXPORT_FID: i32 = 19;
pub const FI_GET_FD: i32 = 20;
pub const FI_GET_MR_XPU_DESC: i32 = 21;

// ---- `fi_setopt`/`fi_getopt` levels and option names ----

// `fi_setopt`/`fi_getopt` levels and option names (`int` arguments;
// negative names are provider specific).
pub const FI_OPT_EFA_RNR_RETRY: i32 = -251265024;
pub const FI_OPT_EFA_EMULATED_READ: i32 = -251265023;
pub const FI_OPT_EFA_EMULATED_WRITE: i32 = -251265022;
pub const FI_OPT_EFA_EMULATED_ATOMICS: i32 = -251265021;
pub const FI_OPT_EFA_USE_DEVICE_RDMA: i32 = -251265020;
pub const FI_OPT_EFA_SENDRECV_IN_ORDER_ALIGNED_128_BYTES: i32 = -251265019;
pub const FI_OPT_EFA_WRITE_IN_ORDER_ALIGNED_128_BYTES: i32 = -251265018;
pub const FI_OPT_EFA_HOMOGENEOUS_PEERS: i32 = -251265017;
pub const FI_OPT_EFA_USE_UNSOLICITED_WRITE_RECV: i32 = -251265016;
pub const FI_OPT_ENDPOINT: i32 = 0;
pub const FI_OPT_MIN_MULTI_RECV: i32 = 0;
pub const FI_OPT_CM_DATA_SIZE: i32 = 1;
pub const FI_OPT_BUFFERED_MIN: i32 = 2;
pub const FI_OPT_BUFFERED_LIMIT: i32 = 3;
pub const FI_OPT_SEND_BUF_SIZE: i32 = 4;
pub const FI_OPT_RECV_BUF_SIZE: i32 = 5;
pub const FI_OPT_TX_SIZE: i32 = 6;
pub const FI_OPT_RX_SIZE: i32 = 7;
pub const FI_OPT_FI_HMEM_P2P: i32 = 8;
pub const FI_OPT_XPU_TRIGGER: i32 = 9;
pub const FI_OPT_CUDA_API_PERMITTED: i32 = 10;
pub const FI_OPT_SHARED_MEMORY_PERMITTED: i32 = 11;
pub const FI_OPT_MAX_MSG_SIZE: i32 = 12;
pub const FI_OPT_MAX_TAGGED_SIZE: i32 = 13;
pub const FI_OPT_MAX_RMA_SIZE: i32 = 14;
pub const FI_OPT_MAX_ATOMIC_SIZE: i32 = 15;
pub const FI_OPT_INJECT_MSG_SIZE: i32 = 16;
pub const FI_OPT_INJECT_TAGGED_SIZE: i32 = 17;
pub const FI_OPT_INJECT_RMA_SIZE: i32 = 18;
pub const FI_OPT_INJECT_ATOMIC_SIZE: i32 = 19;
pub const FI_OPT_FIREWALL_ADDR: i32 = 20;
pub const FI_PROV_SPECIFIC_TCP: i32 = 130744320;
pub const FI_PROV_SPECIFIC_EFA: i32 = 251265024;

// ---- Values for the `FI_OPT_FI_HMEM_P2P` option ----

// Values for the `FI_OPT_FI_HMEM_P2P` option (an `int`).
pub const FI_HMEM_P2P_ENABLED: i32 = 0;
pub const FI_HMEM_P2P_REQUIRED: i32 = 1;
pub const FI_HMEM_P2P_PREFERRED: i32 = 2;
pub const FI_HMEM_P2P_DISABLED: i32 = 3;

// ---- Event numbers reported by `fi_eq_read` ----

// Event numbers reported by `fi_eq_read` (the `event` argument is a `uint32_t`).
pub const FI_NOTIFY: u32 = 0;
pub const FI_CONNREQ: u32 = 1;
pub const FI_CONNECTED: u32 = 2;
pub const FI_SHUTDOWN: u32 = 3;
pub const FI_MR_COMPLETE: u32 = 4;
pub const FI_AV_COMPLETE: u32 = 5;
pub const FI_JOIN_COMPLETE: u32 = 6;

// ---- Address formats ----

// Address formats (`addr_format` is a `uint32_t`).
pub const FI_FORMAT_UNSPEC: u32 = 0;
pub const FI_SOCKADDR: u32 = 1;
pub const FI_SOCKADDR_IN: u32 = 2;
pub const FI_SOCKADDR_IN6: u32 = 3;
pub const FI_SOCKADDR_IB: u32 = 4;
pub const FI_ADDR_PSMX: u32 = 5;
pub const FI_ADDR_GNI: u32 = 6;
pub const FI_ADDR_BGQ: u32 = 7;
pub const FI_ADDR_MLX: u32 = 8;
pub const FI_ADDR_STR: u32 = 9;
pub const FI_ADDR_PSMX2: u32 = 10;
pub const FI_ADDR_IB_UD: u32 = 11;
pub const FI_ADDR_EFA: u32 = 12;
pub const FI_ADDR_PSMX3: u32 = 13;
pub const FI_ADDR_OPX: u32 = 14;
pub const FI_ADDR_CXI: u32 = 15;
pub const FI_ADDR_UCX: u32 = 16;
pub const FI_SOCKADDR_IP: u32 = 17;

// ---- Endpoint protocols ----

// Endpoint protocols (`fi_ep_attr.protocol` is a `uint32_t`).
pub const FI_PROTO_UNSPEC: u32 = 0;
pub const FI_PROTO_RDMA_CM_IB_RC: u32 = 1;
pub const FI_PROTO_IWARP: u32 = 2;
pub const FI_PROTO_IB_UD: u32 = 3;
pub const FI_PROTO_PSMX: u32 = 4;
pub const FI_PROTO_UDP: u32 = 5;
pub const FI_PROTO_SOCK_TCP: u32 = 6;
pub const FI_PROTO_MXM: u32 = 7;
pub const FI_PROTO_IWARP_RDM: u32 = 8;
pub const FI_PROTO_IB_RDM: u32 = 9;
pub const FI_PROTO_GNI: u32 = 10;
pub const FI_PROTO_RXM: u32 = 11;
pub const FI_PROTO_RXD: u32 = 12;
pub const FI_PROTO_MLX: u32 = 13;
pub const FI_PROTO_NETWORKDIRECT: u32 = 14;
pub const FI_PROTO_PSMX2: u32 = 15;
pub const FI_PROTO_SHM: u32 = 16;
pub const FI_PROTO_MRAIL: u32 = 17;
pub const FI_PROTO_RSTREAM: u32 = 18;
pub const FI_PROTO_RDMA_CM_IB_XRC: u32 = 19;
pub const FI_PROTO_EFA: u32 = 20;
pub const FI_PROTO_PSMX3: u32 = 21;
pub const FI_PROTO_RXM_TCP: u32 = 22;
pub const FI_PROTO_OPX: u32 = 23;
pub const FI_PROTO_CXI: u32 = 24;
pub const FI_PROTO_XNET: u32 = 25;
pub const FI_PROTO_COLL: u32 = 26;
pub const FI_PROTO_UCX: u32 = 27;
pub const FI_PROTO_SM2: u32 = 28;
pub const FI_PROTO_CXI_RNR: u32 = 29;
pub const FI_PROTO_LPP: u32 = 30;
pub const FI_PROTO_LNX: u32 = 31;

// ---- Traffic classes ----

// Traffic classes (`tclass` is a `uint32_t`).
pub const FI_TC_UNSPEC: u32 = 0;
pub const FI_TC_DSCP: u32 = 256;
pub const FI_TC_BEST_EFFORT: u32 = 512;
pub const FI_TC_LABEL: u32 = 512;
pub const FI_TC_LOW_LATENCY: u32 = 513;
pub const FI_TC_DEDICATED_ACCESS: u32 = 514;
pub const FI_TC_BULK_DATA: u32 = 515;
pub const FI_TC_SCAVENGER: u32 = 516;
pub const FI_TC_NETWORK_CTRL: u32 = 517;

// ---- Object classes, the value of `fid.fclass` ----

// Object classes, the value of `fid.fclass`.
pub const FI_CLASS_UNSPEC: usize = 0;
pub const FI_CLASS_FABRIC: usize = 1;
pub const FI_CLASS_DOMAIN: usize = 2;
pub const FI_CLASS_EP: usize = 3;
pub const FI_CLASS_SEP: usize = 4;
pub const FI_CLASS_RX_CTX: usize = 5;
pub const FI_CLASS_SRX_CTX: usize = 6;
pub const FI_CLASS_TX_CTX: usize = 7;
pub const FI_CLASS_STX_CTX: usize = 8;
pub const FI_CLASS_PEP: usize = 9;
pub const FI_CLASS_INTERFACE: usize = 10;
pub const FI_CLASS_AV: usize = 11;
pub const FI_CLASS_MR: usize = 12;
pub const FI_CLASS_EQ: usize = 13;
pub const FI_CLASS_CQ: usize = 14;
pub const FI_CLASS_CNTR: usize = 15;
pub const FI_CLASS_WAIT: usize = 16;
pub const FI_CLASS_POLL: usize = 17;
pub const FI_CLASS_CONNREQ: usize = 18;
pub const FI_CLASS_MC: usize = 19;
pub const FI_CLASS_NIC: usize = 20;
pub const FI_CLASS_AV_SET: usize = 21;
pub const FI_CLASS_MR_CACHE: usize = 22;
pub const FI_CLASS_MEM_MONITOR: usize = 23;
pub const FI_CLASS_PEER_CQ: usize = 24;
pub const FI_CLASS_PEER_SRX: usize = 25;
pub const FI_CLASS_LOG: usize = 26;
pub const FI_CLASS_PEER_AV: usize = 27;
pub const FI_CLASS_PEER_AV_SET: usize = 28;
pub const FI_CLASS_PEER_CNTR: usize = 29;
pub const FI_CLASS_PROFILE: usize = 30;
pub const FI_CLASS_XPU_CTX: usize = 31;

// ---- Special fabric addresses ----

// Special fabric addresses.
pub const FI_ADDR_NOTAVAIL: fi_addr_t = u64::MAX;
pub const FI_ADDR_UNSPEC: fi_addr_t = u64::MAX;

// ---- Memory key meaning "no key" ----

// Memory key meaning "no key".
pub const FI_KEY_NOTAVAIL: u64 = u64::MAX;

// ---- Size sentinels ----

// A context count meaning "shared" and an `auth_key_size` meaning "keys come
// from the AV".
pub const FI_AV_AUTH_KEY: usize = usize::MAX;
pub const FI_SHARED_CONTEXT: usize = usize::MAX;

// ---- Name length limit ----

// Name length limit.
pub const FI_NAME_MAX: usize = 64;

// ---- Offset at which collective-only `fi_op`/`fi_datatype` values start ----

// Offset at which collective-only `fi_op`/`fi_datatype` values start.
pub const FI_COLLECTIVE_OFFSET: u32 = 256;

// ---- Tag formats and MPI tag-field masks ----

// Tag formats and MPI tag-field masks.
pub const FI_TAG_BITS: u64 = 0;
pub const FI_TAG_MPI: u64 = 1;
pub const FI_TAG_CCL: u64 = 2;
pub const FI_TAG_MAX_FORMAT: u64 = 1 << 16;
pub const FI_MPI_IGNORE_TAG: u64 = 4294967295;
pub const FI_MPI_IGNORE_PAYLOAD: u64 = 1095216660480;

// ---- Bit flags ----

// Capabilities, mode bits, operation and completion flags, `FI_MR_*` mode
// bits, message-order bits and other `uint64_t` flag words. Several names
// share a bit because they apply to different calls.
pub const FI_NOTIFY_FLAGS_ONLY: u64 = 0;
pub const FI_ORDER_NONE: u64 = 0;
pub const FI_RESTRICTED_COMP: u64 = 0;
pub const FI_VARIABLE_MSG: u64 = 0;
pub const FI_LOG_PROV_FILTERED: u64 = 1;
pub const FI_ORDER_RAR: u64 = 1;
pub const FI_XPU_ALLOC_DMABUF: u64 = 1;
pub const FI_XPU_CAP_EP: u64 = 1;
pub const FI_XPU_IMPORT_IOMEMORY: u64 = 1;
pub const FI_MSG: u64 = 2;
pub const FI_ORDER_RAW: u64 = 2;
pub const FI_XPU_CAP_CQ: u64 = 2;
pub const FI_XPU_IMPORT_DEVICEMAP: u64 = 2;
pub const FI_MR_LOCAL: u64 = 4;
pub const FI_ORDER_RAS: u64 = 4;
pub const FI_RMA: u64 = 4;
pub const FI_XPU_CAP_CNTR: u64 = 4;
pub const FI_MR_RAW: u64 = 8;
pub const FI_ORDER_WAR: u64 = 8;
pub const FI_TAGGED: u64 = 8;
pub const FI_ATOMIC: u64 = 16;
pub const FI_ATOMICS: u64 = 16;
pub const FI_MR_VIRT_ADDR: u64 = 16;
pub const FI_ORDER_WAW: u64 = 16;
pub const FI_MR_ALLOCATED: u64 = 32;
pub const FI_MULTICAST: u64 = 32;
pub const FI_ORDER_WAS: u64 = 32;
pub const FI_COLLECTIVE: u64 = 64;
pub const FI_MR_PROV_KEY: u64 = 64;
pub const FI_ORDER_SAR: u64 = 64;
pub const FI_MR_MMU_NOTIFY: u64 = 128;
pub const FI_ORDER_SAW: u64 = 128;
pub const FI_MR_RMA_EVENT: u64 = 1 << 8;
pub const FI_ORDER_SAS: u64 = 1 << 8;
pub const FI_READ: u64 = 1 << 8;
pub const FI_ORDER_STRICT: u64 = 511;
pub const FI_MR_ENDPOINT: u64 = 1 << 9;
pub const FI_WRITE: u64 = 1 << 9;
pub const FI_MR_HMEM: u64 = 1 << 10;
pub const FI_RECV: u64 = 1 << 10;
pub const FI_MR_COLLECTIVE: u64 = 1 << 11;
pub const FI_SEND: u64 = 1 << 11;
pub const FI_TRANSMIT: u64 = 1 << 11;
pub const FI_MR_XPU_DESC: u64 = 1 << 12;
pub const FI_REMOTE_READ: u64 = 1 << 12;
pub const FI_REMOTE_WRITE: u64 = 1 << 13;
pub const FI_MULTI_RECV: u64 = 1 << 16;
pub const FI_ORDER_DATA: u64 = 1 << 16;
pub const FI_REMOTE_CQ_DATA: u64 = 1 << 17;
pub const FI_MORE: u64 = 1 << 18;
pub const FI_PEEK: u64 = 1 << 19;
pub const FI_TRIGGER: u64 = 1 << 20;
pub const FI_FENCE: u64 = 1 << 21;
pub const FI_COMPLETION: u64 = 1 << 24;
pub const FI_EVENT: u64 = 1 << 24;
pub const FI_INJECT: u64 = 1 << 25;
pub const FI_INJECT_COMPLETE: u64 = 1 << 26;
pub const FI_TRANSMIT_COMPLETE: u64 = 1 << 27;
pub const FI_DELIVERY_COMPLETE: u64 = 1 << 28;
pub const FI_AFFINITY: u64 = 1 << 29;
pub const FI_COMMIT_COMPLETE: u64 = 1 << 30;
pub const FI_MATCH_COMPLETE: u64 = 1 << 31;
pub const FI_ORDER_RMA_RAR: u64 = 1 << 32;
pub const FI_ORDER_RMA_RAW: u64 = 1 << 33;
pub const FI_ORDER_RMA_WAR: u64 = 1 << 34;
pub const FI_ORDER_RMA_WAW: u64 = 1 << 35;
pub const FI_RESCAN: u64 = 1 << 35;
pub const FI_ORDER_ATOMIC_RAR: u64 = 1 << 36;
pub const FI_PEER_TRANSFER: u64 = 1 << 36;
pub const FI_ORDER_ATOMIC_RAW: u64 = 1 << 37;
pub const FI_ORDER_ATOMIC_WAR: u64 = 1 << 38;
pub const FI_ORDER_ATOMIC_WAW: u64 = 1 << 39;
pub const FI_BARRIER_SET: u64 = 1 << 40;
pub const FI_MR_DMABUF: u64 = 1 << 40;
pub const FI_AV_USER_ID: u64 = 1 << 41;
pub const FI_BROADCAST_SET: u64 = 1 << 41;
pub const FI_MR_SINGLE_USE: u64 = 1 << 41;
pub const FI_ALLTOALL_SET: u64 = 1 << 42;
pub const FI_FIREWALL_ADDR: u64 = 1 << 42;
pub const FI_ALLREDUCE_SET: u64 = 1 << 43;
pub const FI_PEER: u64 = 1 << 43;
pub const FI_ALLGATHER_SET: u64 = 1 << 44;
pub const FI_XPU: u64 = 1 << 44;
pub const FI_HMEM_HOST_ALLOC: u64 = 1 << 45;
pub const FI_REDUCE_SCATTER_SET: u64 = 1 << 45;
pub const FI_TAGGED_DIRECTED_RECV: u64 = 1 << 45;
pub const FI_HMEM_DEVICE_ONLY: u64 = 1 << 46;
pub const FI_REDUCE_SET: u64 = 1 << 46;
pub const FI_TAGGED_MULTI_RECV: u64 = 1 << 46;
pub const FI_HMEM: u64 = 1 << 47;
pub const FI_SCATTER_SET: u64 = 1 << 47;
pub const FI_EXACT_DIRECTED_RECV: u64 = 1 << 48;
pub const FI_GATHER_SET: u64 = 1 << 48;
pub const FI_RMA_PMEM: u64 = 1 << 49;
pub const FI_SOURCE_ERR: u64 = 1 << 50;
pub const FI_LOCAL_COMM: u64 = 1 << 51;
pub const FI_CONTEXT2: u64 = 1 << 52;
pub const FI_REMOTE_COMM: u64 = 1 << 52;
pub const FI_SHARED_AV: u64 = 1 << 53;
pub const FI_PROV_ATTR_ONLY: u64 = 1 << 54;
pub const FI_LOCAL_MR: u64 = 1 << 55;
pub const FI_NUMERICHOST: u64 = 1 << 55;
pub const FI_RMA_EVENT: u64 = 1 << 56;
pub const FI_RX_CQ_DATA: u64 = 1 << 56;
pub const FI_ASYNC_IOV: u64 = 1 << 57;
pub const FI_AUTH_KEY: u64 = 1 << 57;
pub const FI_SOURCE: u64 = 1 << 57;
pub const FI_UNIVERSE: u64 = 1 << 57;
pub const FI_DISCARD: u64 = 1 << 58;
pub const FI_FETCH_ATOMIC: u64 = 1 << 58;
pub const FI_MSG_PREFIX: u64 = 1 << 58;
pub const FI_NAMED_RX_CTX: u64 = 1 << 58;
pub const FI_SYNC_ERR: u64 = 1 << 58;
pub const FI_CLAIM: u64 = 1 << 59;
pub const FI_COMPARE_ATOMIC: u64 = 1 << 59;
pub const FI_CONTEXT: u64 = 1 << 59;
pub const FI_DIRECTED_RECV: u64 = 1 << 59;
pub const FI_REG_MR: u64 = 1 << 59;
pub const FI_SELECTIVE_COMPLETION: u64 = 1 << 59;
pub const FI_SYMMETRIC: u64 = 1 << 59;

// ---- Additions of this library ----

/// `fi_xpu_ops.import` flag: the memory is a dma-buf given by its file descriptor.
pub const FI_XPU_IMPORT_DMABUF: u64 = 1 << 2;
/// Device-side provider id of the shared-memory provider.
pub const FI_XPU_PROV_SHM: fi_xpu_provider = 2;

// ---- String constants ----

pub const FI_LIB_EXTENSION: &str = "fi";
/// `FI_LIB_EXTENSION` as a C string.
pub const FI_LIB_EXTENSION_C: &core::ffi::CStr = c"fi";
pub const FI_LIB_SUFFIX: &str = "fi.so";
/// `FI_LIB_SUFFIX` as a C string.
pub const FI_LIB_SUFFIX_C: &core::ffi::CStr = c"fi.so";
pub const FI_SET_OPS_HMEM_OVERRIDE: &str = "hmem_override_ops";
/// `FI_SET_OPS_HMEM_OVERRIDE` as a C string.
pub const FI_SET_OPS_HMEM_OVERRIDE_C: &core::ffi::CStr = c"hmem_override_ops";
