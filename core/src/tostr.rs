//! `fi_strerror` and `fi_tostr`: human-readable text for error numbers, enum
//! values, flag sets and the attribute structs.
//!
//! The output is byte-for-byte what libfabric 1.17 prints for everything 1.17
//! knows (the differential test `tests/c/tostr_diff.sh` checks this against
//! the system library). Values and members that 1.17 lacks are printed in the
//! same style, in the place upstream's newer releases put them.
//!
//! Text is built into a byte buffer with an optional capacity. With a
//! capacity, every piece is appended the way upstream's bounded `strncatf`
//! appends it (at most `cap - 2` bytes of text in all), so `fi_tostr_r`
//! truncates exactly where upstream does.

use std::ffi::{c_char, c_void, CStr};
use std::fmt::Write as _;
use std::sync::OnceLock;

use crate::abi::*;

/// Size of the buffer upstream's `fi_tostr` uses.
pub const UPSTREAM_BUFSIZ: usize = 8192;

const TAB: &str = "    ";

// Values that 1.x headers defined and the 2.x ones dropped (or turned into 0).
// They are still printed by name so that old values read as they used to.
const LEGACY_EP_SOCK_STREAM: u32 = 4;
const LEGACY_EP_SOCK_DGRAM: u32 = 5;
const LEGACY_VARIABLE_MSG: u64 = 1 << 48;
const LEGACY_BUFFERED_RECV: u64 = 1 << 51;
const LEGACY_RESTRICTED_COMP: u64 = 1 << 53;
const LEGACY_NOTIFY_FLAGS_ONLY: u64 = 1 << 54;
const PROV_SPECIFIC_BIT: u32 = 1 << 31;
const LOG_LEVEL_NAMES: [&str; 4] = ["warn", "trace", "info", "debug"];
const LOG_SUBSYS_NAMES: [&str; 10] =
    ["core", "fabric", "domain", "ep_ctrl", "ep_data", "av", "cq", "eq", "mr", "cntr"];

/// `[("NAME", value), ..]` from a list of constant names.
macro_rules! named {
    ($($name:ident),+ $(,)?) => { &[$((stringify!($name), $name as u64)),+] };
}

const CAPS: &[(&str, u64)] = &[
    ("FI_MSG", FI_MSG), ("FI_RMA", FI_RMA), ("FI_TAGGED", FI_TAGGED), ("FI_ATOMIC", FI_ATOMIC),
    ("FI_MULTICAST", FI_MULTICAST), ("FI_COLLECTIVE", FI_COLLECTIVE),
    ("FI_READ", FI_READ), ("FI_WRITE", FI_WRITE), ("FI_RECV", FI_RECV), ("FI_SEND", FI_SEND),
    ("FI_REMOTE_READ", FI_REMOTE_READ), ("FI_REMOTE_WRITE", FI_REMOTE_WRITE),
    ("FI_MULTI_RECV", FI_MULTI_RECV), ("FI_REMOTE_CQ_DATA", FI_REMOTE_CQ_DATA),
    ("FI_TRIGGER", FI_TRIGGER), ("FI_FENCE", FI_FENCE),
    ("FI_VARIABLE_MSG", LEGACY_VARIABLE_MSG),
    ("FI_RMA_PMEM", FI_RMA_PMEM), ("FI_SOURCE_ERR", FI_SOURCE_ERR),
    ("FI_LOCAL_COMM", FI_LOCAL_COMM), ("FI_REMOTE_COMM", FI_REMOTE_COMM),
    ("FI_SHARED_AV", FI_SHARED_AV), ("FI_RMA_EVENT", FI_RMA_EVENT), ("FI_SOURCE", FI_SOURCE),
    ("FI_NAMED_RX_CTX", FI_NAMED_RX_CTX), ("FI_DIRECTED_RECV", FI_DIRECTED_RECV),
    ("FI_AV_USER_ID", FI_AV_USER_ID), ("FI_PEER", FI_PEER), ("FI_HMEM", FI_HMEM),
    ("FI_XPU", FI_XPU),
];

const OP_FLAGS: &[(&str, u64)] = named![
    FI_MULTICAST, FI_MULTI_RECV, FI_REMOTE_CQ_DATA, FI_MORE, FI_PEEK, FI_TRIGGER, FI_FENCE,
    FI_COMPLETION, FI_INJECT, FI_INJECT_COMPLETE, FI_TRANSMIT_COMPLETE, FI_DELIVERY_COMPLETE,
    FI_MATCH_COMPLETE, FI_AFFINITY, FI_CLAIM, FI_DISCARD,
];

const MSG_ORDER: &[(&str, u64)] = named![
    FI_ORDER_RAR, FI_ORDER_RAW, FI_ORDER_RAS, FI_ORDER_WAR, FI_ORDER_WAW, FI_ORDER_WAS,
    FI_ORDER_SAR, FI_ORDER_SAW, FI_ORDER_SAS, FI_ORDER_RMA_RAR, FI_ORDER_RMA_RAW,
    FI_ORDER_RMA_WAR, FI_ORDER_RMA_WAW, FI_ORDER_ATOMIC_RAR, FI_ORDER_ATOMIC_RAW,
    FI_ORDER_ATOMIC_WAR, FI_ORDER_ATOMIC_WAW,
];

const MODE: &[(&str, u64)] = &[
    ("FI_CONTEXT", FI_CONTEXT), ("FI_MSG_PREFIX", FI_MSG_PREFIX), ("FI_ASYNC_IOV", FI_ASYNC_IOV),
    ("FI_RX_CQ_DATA", FI_RX_CQ_DATA), ("FI_LOCAL_MR", FI_LOCAL_MR),
    ("FI_NOTIFY_FLAGS_ONLY", LEGACY_NOTIFY_FLAGS_ONLY),
    ("FI_RESTRICTED_COMP", LEGACY_RESTRICTED_COMP), ("FI_CONTEXT2", FI_CONTEXT2),
    ("FI_BUFFERED_RECV", LEGACY_BUFFERED_RECV),
];

const MR_MODE: &[(&str, u64)] = named![
    FI_MR_BASIC, FI_MR_SCALABLE, FI_MR_LOCAL, FI_MR_RAW, FI_MR_VIRT_ADDR, FI_MR_ALLOCATED,
    FI_MR_PROV_KEY, FI_MR_MMU_NOTIFY, FI_MR_RMA_EVENT, FI_MR_ENDPOINT, FI_MR_HMEM,
    FI_MR_COLLECTIVE, FI_MR_XPU_DESC,
];

const CQ_EVENT_FLAGS: &[(&str, u64)] = named![
    FI_SEND, FI_RECV, FI_RMA, FI_ATOMIC, FI_MSG, FI_TAGGED, FI_READ, FI_WRITE, FI_REMOTE_READ,
    FI_REMOTE_WRITE, FI_REMOTE_CQ_DATA, FI_MULTI_RECV, FI_MORE, FI_CLAIM,
];

const AV_FLAGS: &[(&str, u64)] = named![FI_EVENT, FI_READ, FI_SYMMETRIC];
const CQ_FLAGS: &[(&str, u64)] = named![FI_AFFINITY];
const MR_ACCESS: &[(&str, u64)] = named![
    FI_RECV, FI_SEND, FI_READ, FI_WRITE, FI_REMOTE_READ, FI_REMOTE_WRITE, FI_COLLECTIVE,
];

const EP_TYPE: &[(&str, u64)] = &[
    ("FI_EP_UNSPEC", FI_EP_UNSPEC as u64), ("FI_EP_MSG", FI_EP_MSG as u64),
    ("FI_EP_DGRAM", FI_EP_DGRAM as u64), ("FI_EP_RDM", FI_EP_RDM as u64),
    ("FI_EP_SOCK_STREAM", LEGACY_EP_SOCK_STREAM as u64),
    ("FI_EP_SOCK_DGRAM", LEGACY_EP_SOCK_DGRAM as u64),
];

const ADDR_FORMAT: &[(&str, u64)] = named![
    FI_FORMAT_UNSPEC, FI_SOCKADDR, FI_SOCKADDR_IN, FI_SOCKADDR_IN6, FI_SOCKADDR_IB,
    FI_ADDR_PSMX, FI_ADDR_PSMX2, FI_ADDR_GNI, FI_ADDR_BGQ, FI_ADDR_MLX, FI_ADDR_STR,
    FI_ADDR_IB_UD, FI_ADDR_EFA, FI_ADDR_PSMX3, FI_ADDR_OPX, FI_ADDR_CXI, FI_ADDR_UCX,
    FI_SOCKADDR_IP,
];

const PROGRESS: &[(&str, u64)] =
    named![FI_PROGRESS_UNSPEC, FI_PROGRESS_AUTO, FI_PROGRESS_MANUAL, FI_PROGRESS_CONTROL_UNIFIED];

const THREADING: &[(&str, u64)] = named![
    FI_THREAD_UNSPEC, FI_THREAD_SAFE, FI_THREAD_FID, FI_THREAD_DOMAIN, FI_THREAD_COMPLETION,
    FI_THREAD_ENDPOINT,
];

const PROTOCOL: &[(&str, u64)] = named![
    FI_PROTO_UNSPEC, FI_PROTO_RDMA_CM_IB_RC, FI_PROTO_IWARP, FI_PROTO_IB_UD, FI_PROTO_PSMX,
    FI_PROTO_PSMX2, FI_PROTO_UDP, FI_PROTO_SOCK_TCP, FI_PROTO_IB_RDM, FI_PROTO_IWARP_RDM,
    FI_PROTO_GNI, FI_PROTO_RXM, FI_PROTO_RXD, FI_PROTO_MLX, FI_PROTO_NETWORKDIRECT,
    FI_PROTO_SHM, FI_PROTO_RSTREAM, FI_PROTO_RDMA_CM_IB_XRC, FI_PROTO_EFA, FI_PROTO_PSMX3,
    FI_PROTO_RXM_TCP, FI_PROTO_OPX, FI_PROTO_CXI, FI_PROTO_XNET, FI_PROTO_UCX, FI_PROTO_SM2,
    FI_PROTO_CXI_RNR, FI_PROTO_LPP, FI_PROTO_LNX,
];

const RESOURCE_MGMT: &[(&str, u64)] = named![FI_RM_UNSPEC, FI_RM_DISABLED, FI_RM_ENABLED];
const AV_TYPE: &[(&str, u64)] = named![FI_AV_UNSPEC, FI_AV_MAP, FI_AV_TABLE];

const OP_TYPE: &[(&str, u64)] = named![
    FI_OP_RECV, FI_OP_SEND, FI_OP_TRECV, FI_OP_TSEND, FI_OP_READ, FI_OP_WRITE, FI_OP_ATOMIC,
    FI_OP_FETCH_ATOMIC, FI_OP_COMPARE_ATOMIC, FI_OP_CNTR_SET, FI_OP_CNTR_ADD,
];

const ATOMIC_TYPE: &[(&str, u64)] = named![
    FI_INT8, FI_UINT8, FI_INT16, FI_UINT16, FI_INT32, FI_UINT32, FI_INT64, FI_UINT64,
    FI_INT128, FI_UINT128, FI_FLOAT, FI_DOUBLE, FI_FLOAT_COMPLEX, FI_DOUBLE_COMPLEX,
    FI_LONG_DOUBLE, FI_LONG_DOUBLE_COMPLEX,
];

const ATOMIC_OP: &[(&str, u64)] = named![
    FI_MIN, FI_MAX, FI_SUM, FI_PROD, FI_LOR, FI_LAND, FI_BOR, FI_BAND, FI_LXOR, FI_BXOR,
    FI_ATOMIC_READ, FI_ATOMIC_WRITE, FI_CSWAP, FI_CSWAP_NE, FI_CSWAP_LE, FI_CSWAP_LT,
    FI_CSWAP_GE, FI_CSWAP_GT, FI_MSWAP,
];

const COLLECTIVE_OP: &[(&str, u64)] = named![
    FI_BARRIER, FI_BROADCAST, FI_ALLTOALL, FI_ALLREDUCE, FI_ALLGATHER, FI_REDUCE_SCATTER,
    FI_REDUCE, FI_SCATTER, FI_GATHER,
];

const EQ_EVENT: &[(&str, u64)] = named![
    FI_NOTIFY, FI_CONNREQ, FI_CONNECTED, FI_SHUTDOWN, FI_MR_COMPLETE, FI_AV_COMPLETE,
    FI_JOIN_COMPLETE,
];

const HMEM_IFACE: &[(&str, u64)] = named![
    FI_HMEM_SYSTEM, FI_HMEM_CUDA, FI_HMEM_ROCR, FI_HMEM_ZE, FI_HMEM_NEURON, FI_HMEM_SYNAPSEAI,
];

const CQ_FORMAT: &[(&str, u64)] = named![
    FI_CQ_FORMAT_UNSPEC, FI_CQ_FORMAT_CONTEXT, FI_CQ_FORMAT_MSG, FI_CQ_FORMAT_DATA,
    FI_CQ_FORMAT_TAGGED,
];

const WAIT_OBJ: &[(&str, u64)] = named![
    FI_WAIT_NONE, FI_WAIT_UNSPEC, FI_WAIT_SET, FI_WAIT_FD, FI_WAIT_MUTEX_COND, FI_WAIT_YIELD,
    FI_WAIT_POLLFD,
];

const CQ_WAIT_COND: &[(&str, u64)] = named![FI_CQ_COND_NONE, FI_CQ_COND_THRESHOLD];
const CNTR_EVENTS: &[(&str, u64)] = named![FI_CNTR_EVENTS_COMP, FI_CNTR_EVENTS_BYTES];

/// Text being built, with upstream's truncation rule when `cap` is set.
struct Out {
    buf: Vec<u8>,
    /// Size of the C buffer being emulated (text plus NUL); `usize::MAX`
    /// when unbounded.
    cap: usize,
}

impl Out {
    /// Append like a bounded `vsnprintf` at the end of a `cap`-byte buffer
    /// that keeps one byte spare: at most `cap - 2` bytes of text in all.
    fn cat(&mut self, s: &[u8]) {
        let room = self.cap.saturating_sub(1).saturating_sub(self.buf.len());
        if room == 0 {
            return;
        }
        let take = s.len().min(room - 1);
        self.buf.extend_from_slice(&s[..take]);
    }

    fn cat_str(&mut self, s: &str) {
        self.cat(s.as_bytes());
    }

    fn catf(&mut self, args: std::fmt::Arguments<'_>) {
        let mut s = String::new();
        let _ = s.write_fmt(args);
        self.cat(s.as_bytes());
    }

    /// Append an address string the way the address printer writes it: up
    /// to the last byte before the buffer's terminating NUL.
    fn cat_addr(&mut self, s: &[u8]) {
        let room = self.cap.saturating_sub(self.buf.len());
        if room == 0 {
            return;
        }
        let take = s.len().min(room - 1);
        self.buf.extend_from_slice(&s[..take]);
    }

    /// Drop a trailing ", " left by the last flag name.
    fn remove_comma(&mut self) {
        if self.buf.ends_with(b", ") {
            self.buf.truncate(self.buf.len() - 2);
        }
    }

    fn flags(&mut self, value: u64, table: &[(&str, u64)]) {
        for &(name, bit) in table {
            if value & bit != 0 {
                self.cat_str(name);
                self.cat_str(", ");
            }
        }
        self.remove_comma();
    }

    fn enumval(&mut self, value: u64, table: &[(&str, u64)]) {
        match table.iter().find(|&&(_, v)| v == value) {
            Some(&(name, _)) => self.cat_str(name),
            None => self.cat_str("Unknown"),
        }
    }

    /// A `%s` of a C string: `(null)` for NULL.
    ///
    /// # Safety
    /// `s` is NULL or a NUL-terminated string.
    unsafe fn cstr(&mut self, s: *const c_char) {
        if s.is_null() {
            self.cat_str("(null)");
        } else {
            // SAFETY: the caller guarantees a NUL-terminated string.
            let bytes = unsafe { CStr::from_ptr(s) }.to_bytes();
            self.cat(bytes);
        }
    }
}

/// `%p` as glibc prints it.
fn ptr<T>(p: *const T) -> String {
    if p.is_null() {
        "(nil)".to_string()
    } else {
        format!("{:#x}", p as usize)
    }
}

/// Positive error number to upstream's message.
///
/// Numbers below `FI_ERRNO_OFFSET` are errno values and read as the C
/// library's `strerror` reads them; the libfabric-specific ones have their
/// own messages; anything beyond the last is "Unspecified error".
pub fn strerror(code: i32) -> &'static str {
    if (0..FI_ERRNO_OFFSET).contains(&code) {
        return libc_messages()[code as usize];
    }
    if code < 0 {
        // Only i32::MIN has no positive counterpart; the C library says
        // "Unknown error -2147483648" for it.
        static MIN_MSG: OnceLock<&'static str> = OnceLock::new();
        return MIN_MSG.get_or_init(|| leak_c_message(code));
    }
    match code {
        FI_EOTHER => "Unspecified error",
        FI_ETOOSMALL => "Provided buffer is too small",
        FI_EOPBADSTATE => "Operation not permitted in current state",
        FI_EAVAIL => "Error available",
        FI_EBADFLAGS => "Flags not supported",
        FI_ENOEQ => "Missing or unavailable event queue",
        FI_EDOMAIN => "Invalid resource domain",
        FI_ENOCQ => "Missing or unavailable completion queue",
        FI_ECRC => "CRC error",
        FI_ETRUNC => "Truncation error",
        FI_ENOKEY => "Required key not available",
        FI_ENOAV => "Missing or unavailable address vector",
        FI_EOVERRUN => "Queue has been overrun",
        FI_ENORX => "Receiver not ready, no receive buffers available",
        FI_ENOMR => "Memory registration limit exceeded",
        // Upstream's spelling, kept so that text matches.
        FI_EFIREWALLADDR => "Host unreacheable due to firewall",
        _ => "Unspecified error",
    }
}

/// The C library's messages for errno values 0..FI_ERRNO_OFFSET, read once
/// and kept for the life of the process.
fn libc_messages() -> &'static [&'static str] {
    static TABLE: OnceLock<Vec<&'static str>> = OnceLock::new();
    TABLE.get_or_init(|| (0..FI_ERRNO_OFFSET).map(leak_c_message).collect())
}

fn leak_c_message(code: i32) -> &'static str {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is writable for its whole length; the POSIX
    // variant leaves a NUL-terminated message in it (the C library writes
    // "Unknown error N" for numbers it has no text for).
    let rc = unsafe { libc::strerror_r(code, buf.as_mut_ptr() as *mut c_char, buf.len()) };
    let msg = match CStr::from_bytes_until_nul(&buf) {
        Ok(m) if rc == 0 || !m.is_empty() => m.to_string_lossy().into_owned(),
        _ => format!("Unknown error {code}"),
    };
    Box::leak(msg.into_boxed_str())
}

/// Upstream's text for `data` read as type `ty` (an `enum fi_type` value),
/// unbounded. Invalid UTF-8 in C strings is replaced.
///
/// # Safety
/// `data` is NULL or points to a valid value of the C type that `ty` names
/// (for structs, every pointer in it NULL or valid).
pub unsafe fn tostr(data: *const c_void, ty: u32) -> String {
    // SAFETY: forwarded from the caller.
    let bytes = unsafe { tostr_bytes(data, ty, None) };
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The bytes `fi_tostr_r` would leave in a buffer of `cap` bytes (without
/// the NUL), or the whole text for `None`. NULL `data` gives empty text
/// (the C entry points return NULL for it before calling this).
///
/// # Safety
/// As for [`tostr`].
pub unsafe fn tostr_bytes(data: *const c_void, ty: u32, cap: Option<usize>) -> Vec<u8> {
    let mut o = Out { buf: Vec::new(), cap: cap.unwrap_or(usize::MAX) };
    if data.is_null() || o.cap == 0 {
        return o.buf;
    }
    // SAFETY: (every read below) the caller guarantees `data` points to a
    // valid value of the type `ty` names; scalars are read unaligned-safe.
    unsafe {
        let u64v = || (data as *const u64).read_unaligned();
        let u32v = || (data as *const u32).read_unaligned() as u64;
        match ty {
            FI_TYPE_INFO => info(&mut o, &*(data as *const fi_info)),
            FI_TYPE_EP_TYPE => o.enumval(u32v(), EP_TYPE),
            FI_TYPE_CAPS => o.flags(u64v(), CAPS),
            FI_TYPE_OP_FLAGS => o.flags(u64v(), OP_FLAGS),
            FI_TYPE_ADDR_FORMAT => addr_format(&mut o, u32v() as u32),
            FI_TYPE_TX_ATTR => tx_attr(&mut o, data as *const fi_tx_attr, ""),
            FI_TYPE_RX_ATTR => rx_attr(&mut o, data as *const fi_rx_attr, ""),
            FI_TYPE_EP_ATTR => ep_attr(&mut o, data as *const fi_ep_attr, ""),
            FI_TYPE_DOMAIN_ATTR => domain_attr(&mut o, data as *const fi_domain_attr, ""),
            FI_TYPE_FABRIC_ATTR => fabric_attr(&mut o, data as *const fi_fabric_attr, ""),
            FI_TYPE_THREADING => o.enumval(u32v(), THREADING),
            FI_TYPE_PROGRESS => o.enumval(u32v(), PROGRESS),
            FI_TYPE_PROTOCOL => protocol(&mut o, u32v() as u32),
            FI_TYPE_MSG_ORDER => o.flags(u64v(), MSG_ORDER),
            FI_TYPE_MODE => o.flags(u64v(), MODE),
            FI_TYPE_AV_TYPE => o.enumval(u32v(), AV_TYPE),
            FI_TYPE_ATOMIC_TYPE => o.enumval(u32v(), ATOMIC_TYPE),
            FI_TYPE_ATOMIC_OP => o.enumval(u32v(), ATOMIC_OP),
            FI_TYPE_VERSION => o.cat_str(env!("CARGO_PKG_VERSION")),
            FI_TYPE_EQ_EVENT => o.enumval(u32v(), EQ_EVENT),
            FI_TYPE_CQ_EVENT_FLAGS => o.flags(u64v(), CQ_EVENT_FLAGS),
            // The value is an int; its sign bit is not a flag we name.
            FI_TYPE_MR_MODE => o.flags(u32v(), MR_MODE),
            FI_TYPE_OP_TYPE => o.enumval(u32v(), OP_TYPE),
            FI_TYPE_FID => fid_line(&mut o, "fid: ", data as *const fid),
            FI_TYPE_COLLECTIVE_OP => o.enumval(u32v(), COLLECTIVE_OP),
            FI_TYPE_HMEM_IFACE => o.enumval(u32v(), HMEM_IFACE),
            FI_TYPE_CQ_FORMAT => o.enumval(u32v(), CQ_FORMAT),
            FI_TYPE_LOG_LEVEL => named_index(&mut o, u32v(), &LOG_LEVEL_NAMES),
            FI_TYPE_LOG_SUBSYS => named_index(&mut o, u32v(), &LOG_SUBSYS_NAMES),
            FI_TYPE_AV_ATTR => av_attr(&mut o, &*(data as *const fi_av_attr)),
            FI_TYPE_CQ_ATTR => cq_attr(&mut o, &*(data as *const fi_cq_attr)),
            FI_TYPE_MR_ATTR => mr_attr(&mut o, &*(data as *const fi_mr_attr)),
            FI_TYPE_CNTR_ATTR => cntr_attr(&mut o, &*(data as *const fi_cntr_attr)),
            FI_TYPE_CQ_ERR_ENTRY => cq_err_entry(&mut o, &*(data as *const fi_cq_err_entry)),
            FI_TYPE_CQ_WAIT_COND => o.enumval(u32v(), CQ_WAIT_COND),
            FI_TYPE_WAIT_OBJ => o.enumval(u32v(), WAIT_OBJ),
            _ => o.cat_str("Unknown type"),
        }
    }
    o.buf
}

fn named_index(o: &mut Out, v: u64, names: &[&str]) {
    match names.get(v as usize) {
        Some(n) => o.cat_str(n),
        None => o.cat_str("Unknown"),
    }
}

fn addr_format(o: &mut Out, v: u32) {
    if ADDR_FORMAT.iter().any(|&(_, x)| x == v as u64) {
        o.enumval(v as u64, ADDR_FORMAT);
    } else if v & PROV_SPECIFIC_BIT != 0 {
        o.cat_str("Provider specific");
    } else {
        o.cat_str("Unknown");
    }
}

fn protocol(o: &mut Out, v: u32) {
    if PROTOCOL.iter().any(|&(_, x)| x == v as u64) {
        o.enumval(v as u64, PROTOCOL);
    } else if v & PROV_SPECIFIC_BIT != 0 {
        o.cat_str("Provider specific");
    } else {
        o.cat_str("Unknown");
    }
}

fn comp_order(o: &mut Out, v: u64) {
    if v & FI_ORDER_STRICT == FI_ORDER_NONE {
        o.cat_str("FI_ORDER_NONE, ");
    } else if v & FI_ORDER_STRICT == FI_ORDER_STRICT {
        o.cat_str("FI_ORDER_STRICT, ");
    }
    if v & FI_ORDER_DATA != 0 {
        o.cat_str("FI_ORDER_DATA, ");
    }
    o.remove_comma();
}

/// `label` and the pointer, or the object's own `tostr` when its ops table
/// has one (called the way upstream calls it: on the whole buffer, with the
/// room that is left).
///
/// # Safety
/// `f` is NULL or a valid fid whose `ops` is NULL or a valid `fi_ops`.
unsafe fn fid_line(o: &mut Out, label: &str, f: *const fid) {
    let op = if f.is_null() {
        None
    } else {
        // SAFETY: `f` is a valid fid (caller).
        let ops = unsafe { (*f).ops };
        if ops.is_null() {
            None
        } else {
            // SAFETY: a non-NULL ops pointer of a valid fid is a valid fi_ops;
            // `size` says which members it has.
            unsafe {
                if (*ops).size > std::mem::offset_of!(fi_ops, tostr) { (*ops).tostr } else { None }
            }
        }
    };
    let Some(op) = op else {
        o.catf(format_args!("{label}{}\n", ptr(f)));
        return;
    };
    let cap = if o.cap == usize::MAX { UPSTREAM_BUFSIZ.max(o.buf.len() + UPSTREAM_BUFSIZ) } else { o.cap };
    let mut tmp = vec![0u8; cap];
    let cur = o.buf.len().min(cap - 1);
    tmp[..cur].copy_from_slice(&o.buf[..cur]);
    // SAFETY: `tmp` is writable for `cap` bytes and NUL-terminated within
    // them; the callback may write up to `cap - cur` bytes from its start.
    unsafe { op(f, tmp.as_mut_ptr() as *mut c_char, cap - cur) };
    tmp[cap - 1] = 0;
    let end = tmp.iter().position(|&b| b == 0).unwrap_or(cap - 1);
    tmp.truncate(end);
    o.buf = tmp;
}

/// # Safety
/// `info`'s pointer members are NULL or valid.
unsafe fn info(o: &mut Out, info: &fi_info) {
    o.cat_str("fi_info:\n");
    o.catf(format_args!("{TAB}caps: [ "));
    o.flags(info.caps, CAPS);
    o.cat_str(" ]\n");
    o.catf(format_args!("{TAB}mode: [ "));
    o.flags(info.mode, MODE);
    o.cat_str(" ]\n");
    o.catf(format_args!("{TAB}addr_format: "));
    addr_format(o, info.addr_format);
    o.cat_str("\n");
    o.catf(format_args!("{TAB}src_addrlen: {}\n", info.src_addrlen));
    o.catf(format_args!("{TAB}dest_addrlen: {}\n", info.dest_addrlen));
    o.catf(format_args!("{TAB}src_addr: "));
    // SAFETY: address pointers of a valid fi_info (caller).
    unsafe { address(o, info.addr_format, info.src_addr) };
    o.cat_str("\n");
    o.catf(format_args!("{TAB}dest_addr: "));
    // SAFETY: as above.
    unsafe { address(o, info.addr_format, info.dest_addr) };
    o.cat_str("\n");
    // SAFETY: member pointers of a valid fi_info are NULL or valid (caller);
    // a nic's fid is its first member, so the nic pointer is its fid's.
    unsafe {
        fid_line(o, "    handle: ", info.handle);
        tx_attr(o, info.tx_attr, TAB);
        rx_attr(o, info.rx_attr, TAB);
        ep_attr(o, info.ep_attr, TAB);
        domain_attr(o, info.domain_attr, TAB);
        fabric_attr(o, info.fabric_attr, TAB);
        fid_line(o, "    nic: ", info.nic as *const fid);
    }
}

/// `(null)` for NULL, else the address text for its format (nothing for a
/// format without a printer).
///
/// # Safety
/// `addr` is NULL or points to an address of `format`.
unsafe fn address(o: &mut Out, format: u32, addr: *const c_void) {
    if addr.is_null() {
        o.cat_str("(null)");
        return;
    }
    // SAFETY: forwarded from the caller.
    if let Some(text) = unsafe { addr_text(format, addr) } {
        o.cat_addr(&text);
    }
}

/// # Safety
/// `addr` points to an address of `format` (of the size that format has).
unsafe fn addr_text(format: u32, addr: *const c_void) -> Option<Vec<u8>> {
    let b = addr as *const u8;
    // In all reads `addr` holds an address of `format` (caller), which is
    // at least as long as each read; reads are unaligned-safe.
    // SAFETY: as above, 8-byte words.
    let rd64 = |i: usize| unsafe { (b as *const u64).add(i).read_unaligned() };
    // SAFETY: as above, 4-byte words.
    let rd32 = |i: usize| unsafe { (b as *const u32).add(i).read_unaligned() };
    // SAFETY: as above, 2-byte words.
    let rd16 = |i: usize| unsafe { (b as *const u16).add(i).read_unaligned() };
    // SAFETY: as above, byte ranges.
    let bytes = |off: usize, n: usize| unsafe { std::slice::from_raw_parts(b.add(off), n) };
    let ip6 = |off: usize| {
        let a: [u8; 16] = bytes(off, 16).try_into().unwrap_or([0; 16]);
        std::net::Ipv6Addr::from(a)
    };
    let s = match format {
        FI_SOCKADDR | FI_SOCKADDR_IN | FI_SOCKADDR_IN6 => {
            // The text is chosen by the format, the address family read by
            // the family member (FI_SOCKADDR picks both from the family).
            let family = rd16(0) as i32;
            let (scheme, off) = match format {
                FI_SOCKADDR_IN => ("in", 4),
                FI_SOCKADDR_IN6 => ("in6", 8),
                _ if family == libc::AF_INET => ("in", 4),
                _ if family == libc::AF_INET6 => ("in6", 8),
                _ => return None,
            };
            let host = if family == libc::AF_INET {
                let a: [u8; 4] = bytes(off, 4).try_into().unwrap_or([0; 4]);
                std::net::Ipv4Addr::from(a).to_string()
            } else if family == libc::AF_INET6 {
                fmt_ip6(ip6(off))
            } else {
                return None;
            };
            let port = u16::from_be(rd16(1));
            if scheme == "in" {
                format!("fi_sockaddr_in://{host}:{port}")
            } else {
                format!("fi_sockaddr_in6://[{host}]:{port}")
            }
        }
        FI_ADDR_EFA => format!("fi_addr_efa://[{}]:{}:{}", fmt_ip6(ip6(0)), rd16(8), rd32(5)),
        FI_SOCKADDR_IB => {
            // sockaddr_ib: family, pkey, flowinfo, gid[16] at 8, then the
            // service id at 24, its mask and the scope id at 40.
            let pkey = u16::from_be(rd16(1));
            let sid = u64::from_be(rd64(3));
            let scope = u64::from_be(rd64(5));
            format!(
                "fi_sockaddr_ib://[{}]:0x{:x}:0x{:x}:0x{:x}",
                fmt_ip6(ip6(8)),
                pkey,
                ((sid >> 16) as u16) & 0xfff,
                scope as u8
            )
        }
        FI_ADDR_PSMX | FI_ADDR_GNI => {
            let scheme = if format == FI_ADDR_PSMX { "psmx" } else { "gni" };
            format!("fi_addr_{scheme}://{:x}", rd64(0))
        }
        FI_ADDR_PSMX2 => format!("fi_addr_psmx2://{:x}:{:x}", rd64(0), rd64(1)),
        FI_ADDR_PSMX3 => {
            format!("fi_addr_psmx3://{:x}:{:x}:{:x}:{:x}", rd64(0), rd64(1), rd64(2), rd64(3))
        }
        FI_ADDR_BGQ => format!("fi_addr_bgq://{}", ptr(addr)),
        FI_ADDR_MLX => format!("fi_addr_mlx://{}", ptr(addr)),
        FI_ADDR_OPX => format!("fi_addr_opx://{:016x}", rd64(0)),
        FI_ADDR_IB_UD => format!(
            "fi_addr_ib_ud://{}:{:x}/{:x}/{:x}/{:x}",
            fmt_ip6(ip6(0)),
            rd32(4),
            rd16(10),
            rd16(11),
            bytes(26, 1)[0]
        ),
        FI_ADDR_STR => {
            // SAFETY: an FI_ADDR_STR address is a NUL-terminated string.
            return Some(unsafe { CStr::from_ptr(addr as *const c_char) }.to_bytes().to_vec());
        }
        FI_ADDR_CXI => format!("fi_addr_cxi://0x{:08x}", rd32(0)),
        _ => return None,
    };
    Some(s.into_bytes())
}

/// IPv6 text as the C library's `inet_ntop` writes it: like Rust's
/// `Display`, except that an address whose first 96 bits are zero (and
/// whose next 16 are not) ends in dotted IPv4, as `::1.2.3.4`.
fn fmt_ip6(a: std::net::Ipv6Addr) -> String {
    let w = a.segments();
    if w[..6].iter().all(|&x| x == 0) && w[6] != 0 {
        let o = a.octets();
        return format!("::{}.{}.{}.{}", o[12], o[13], o[14], o[15]);
    }
    a.to_string()
}

/// # Safety
/// `a` is NULL or valid.
unsafe fn tx_attr(o: &mut Out, a: *const fi_tx_attr, p: &str) {
    // SAFETY: caller.
    let Some(a) = (unsafe { a.as_ref() }) else {
        return o.catf(format_args!("{p}fi_tx_attr: (null)\n"));
    };
    o.catf(format_args!("{p}fi_tx_attr:\n"));
    common_attr(o, p, a.caps, a.mode, a.op_flags, a.msg_order, a.comp_order);
    o.catf(format_args!("{p}{TAB}inject_size: {}\n", a.inject_size));
    o.catf(format_args!("{p}{TAB}size: {}\n", a.size));
    o.catf(format_args!("{p}{TAB}iov_limit: {}\n", a.iov_limit));
    o.catf(format_args!("{p}{TAB}rma_iov_limit: {}\n", a.rma_iov_limit));
    o.catf(format_args!("{p}{TAB}tclass: 0x{:x}\n", a.tclass));
}

fn common_attr(o: &mut Out, p: &str, caps: u64, mode: u64, op_flags: u64, msg: u64, comp: u64) {
    o.catf(format_args!("{p}{TAB}caps: [ "));
    o.flags(caps, CAPS);
    o.cat_str(" ]\n");
    o.catf(format_args!("{p}{TAB}mode: [ "));
    o.flags(mode, MODE);
    o.cat_str(" ]\n");
    o.catf(format_args!("{p}{TAB}op_flags: [ "));
    o.flags(op_flags, OP_FLAGS);
    o.cat_str(" ]\n");
    o.catf(format_args!("{p}{TAB}msg_order: [ "));
    o.flags(msg, MSG_ORDER);
    o.cat_str(" ]\n");
    o.catf(format_args!("{p}{TAB}comp_order: [ "));
    comp_order(o, comp);
    o.cat_str(" ]\n");
}

/// # Safety
/// `a` is NULL or valid.
unsafe fn rx_attr(o: &mut Out, a: *const fi_rx_attr, p: &str) {
    // SAFETY: caller.
    let Some(a) = (unsafe { a.as_ref() }) else {
        return o.catf(format_args!("{p}fi_rx_attr: (null)\n"));
    };
    o.catf(format_args!("{p}fi_rx_attr:\n"));
    common_attr(o, p, a.caps, a.mode, a.op_flags, a.msg_order, a.comp_order);
    o.catf(format_args!("{p}{TAB}total_buffered_recv: {}\n", a.total_buffered_recv));
    o.catf(format_args!("{p}{TAB}size: {}\n", a.size));
    o.catf(format_args!("{p}{TAB}iov_limit: {}\n", a.iov_limit));
}

fn ctx_cnt(v: usize) -> String {
    if v == FI_SHARED_CONTEXT { "FI_SHARED_CONTEXT".into() } else { v.to_string() }
}

/// # Safety
/// `a` is NULL or valid.
unsafe fn ep_attr(o: &mut Out, a: *const fi_ep_attr, p: &str) {
    // SAFETY: caller.
    let Some(a) = (unsafe { a.as_ref() }) else {
        return o.catf(format_args!("{p}fi_ep_attr: (null)\n"));
    };
    o.catf(format_args!("{p}fi_ep_attr:\n"));
    o.catf(format_args!("{p}{TAB}type: "));
    o.enumval(a.r#type as u64, EP_TYPE);
    o.cat_str("\n");
    o.catf(format_args!("{p}{TAB}protocol: "));
    protocol(o, a.protocol);
    o.cat_str("\n");
    o.catf(format_args!("{p}{TAB}protocol_version: {}\n", a.protocol_version as i32));
    o.catf(format_args!("{p}{TAB}max_msg_size: {}\n", a.max_msg_size));
    o.catf(format_args!("{p}{TAB}msg_prefix_size: {}\n", a.msg_prefix_size));
    o.catf(format_args!("{p}{TAB}max_order_raw_size: {}\n", a.max_order_raw_size));
    o.catf(format_args!("{p}{TAB}max_order_war_size: {}\n", a.max_order_war_size));
    o.catf(format_args!("{p}{TAB}max_order_waw_size: {}\n", a.max_order_waw_size));
    o.catf(format_args!("{p}{TAB}mem_tag_format: 0x{:016x}\n", a.mem_tag_format));
    o.catf(format_args!("{p}{TAB}tx_ctx_cnt: {}\n", ctx_cnt(a.tx_ctx_cnt)));
    o.catf(format_args!("{p}{TAB}rx_ctx_cnt: {}\n", ctx_cnt(a.rx_ctx_cnt)));
    o.catf(format_args!("{p}{TAB}auth_key_size: {}\n", a.auth_key_size));
    o.catf(format_args!("{p}{TAB}xpu_ctx: {}\n", ptr(a.xpu_ctx)));
}

/// # Safety
/// `a` is NULL or valid (its `name` NULL or a C string).
unsafe fn domain_attr(o: &mut Out, a: *const fi_domain_attr, p: &str) {
    // SAFETY: caller.
    let Some(a) = (unsafe { a.as_ref() }) else {
        return o.catf(format_args!("{p}fi_domain_attr: (null)\n"));
    };
    o.catf(format_args!("{p}fi_domain_attr:\n"));
    // Upstream prints the handle through "%x": its low 32 bits.
    o.catf(format_args!("{p}{TAB}domain: 0x{:x}\n", a.domain as usize as u32));
    o.catf(format_args!("{p}{TAB}name: "));
    // SAFETY: caller.
    unsafe { o.cstr(a.name) };
    o.cat_str("\n");
    o.catf(format_args!("{p}{TAB}threading: "));
    o.enumval(a.threading as u64, THREADING);
    o.cat_str("\n");
    o.catf(format_args!("{p}{TAB}control_progress: "));
    o.enumval(a.control_progress as u64, PROGRESS);
    o.cat_str("\n");
    o.catf(format_args!("{p}{TAB}data_progress: "));
    // SAFETY: both union members are the same enum in the same slot.
    o.enumval(unsafe { a.anon0.data_progress } as u64, PROGRESS);
    o.cat_str("\n");
    o.catf(format_args!("{p}{TAB}resource_mgmt: "));
    o.enumval(a.resource_mgmt as u64, RESOURCE_MGMT);
    o.cat_str("\n");
    o.catf(format_args!("{p}{TAB}av_type: "));
    o.enumval(a.av_type as u64, AV_TYPE);
    o.cat_str("\n");
    o.catf(format_args!("{p}{TAB}mr_mode: [ "));
    o.flags(a.mr_mode as u32 as u64, MR_MODE);
    o.cat_str(" ]\n");
    let sizes: [(&str, usize); 12] = [
        ("mr_key_size", a.mr_key_size),
        ("cq_data_size", a.cq_data_size),
        ("cq_cnt", a.cq_cnt),
        ("ep_cnt", a.ep_cnt),
        ("tx_ctx_cnt", a.tx_ctx_cnt),
        ("rx_ctx_cnt", a.rx_ctx_cnt),
        ("max_ep_tx_ctx", a.max_ep_tx_ctx),
        ("max_ep_rx_ctx", a.max_ep_rx_ctx),
        ("max_ep_stx_ctx", a.max_ep_stx_ctx),
        ("max_ep_srx_ctx", a.max_ep_srx_ctx),
        ("cntr_cnt", a.cntr_cnt),
        ("mr_iov_limit", a.mr_iov_limit),
    ];
    for (name, v) in sizes {
        o.catf(format_args!("{p}{TAB}{name}: {v}\n"));
    }
    o.catf(format_args!("{p}{TAB}caps: [ "));
    o.flags(a.caps, CAPS);
    o.cat_str(" ]\n");
    o.catf(format_args!("{p}{TAB}mode: [ "));
    o.flags(a.mode, MODE);
    o.cat_str(" ]\n");
    o.catf(format_args!("{p}{TAB}auth_key_size: {}\n", a.auth_key_size));
    o.catf(format_args!("{p}{TAB}max_err_data: {}\n", a.max_err_data));
    o.catf(format_args!("{p}{TAB}mr_cnt: {}\n", a.mr_cnt));
    o.catf(format_args!("{p}{TAB}tclass: 0x{:x}\n", a.tclass));
    o.catf(format_args!("{p}{TAB}max_ep_auth_key: {}\n", a.max_ep_auth_key));
    o.catf(format_args!("{p}{TAB}max_group_id: {}\n", a.max_group_id));
    o.catf(format_args!("{p}{TAB}max_cntr_value: {}\n", a.max_cntr_value));
    o.catf(format_args!("{p}{TAB}max_err_cntr_value: {}\n", a.max_err_cntr_value));
    o.catf(format_args!("{p}{TAB}max_xpu_ctx_cnt: {}\n", a.max_xpu_ctx_cnt));
}

/// # Safety
/// `a` is NULL or valid (its strings NULL or C strings).
unsafe fn fabric_attr(o: &mut Out, a: *const fi_fabric_attr, p: &str) {
    // SAFETY: caller.
    let Some(a) = (unsafe { a.as_ref() }) else {
        return o.catf(format_args!("{p}fi_fabric_attr: (null)\n"));
    };
    o.catf(format_args!("{p}fi_fabric_attr:\n"));
    o.catf(format_args!("{p}{TAB}name: "));
    // SAFETY: caller.
    unsafe { o.cstr(a.name) };
    o.cat_str("\n");
    o.catf(format_args!("{p}{TAB}prov_name: "));
    // SAFETY: caller.
    unsafe { o.cstr(a.prov_name) };
    o.cat_str("\n");
    let v = |x: u32| format!("{}.{}", fi_major(x), fi_minor(x));
    o.catf(format_args!("{p}{TAB}prov_version: {}\n", v(a.prov_version)));
    o.catf(format_args!("{p}{TAB}api_version: {}\n", v(a.api_version)));
}

/// # Safety
/// `a.name` is NULL or a C string.
unsafe fn av_attr(o: &mut Out, a: &fi_av_attr) {
    o.cat_str("fi_av_attr:\n");
    o.catf(format_args!("{TAB}type: "));
    o.enumval(a.r#type as u64, AV_TYPE);
    o.cat_str("\n");
    o.catf(format_args!("{TAB}count: {}\n", a.count));
    o.catf(format_args!("{TAB}ep_per_node: {}\n", a.ep_per_node));
    o.catf(format_args!("{TAB}name: "));
    // SAFETY: caller.
    unsafe { o.cstr(a.name) };
    o.cat_str("\n");
    o.catf(format_args!("{TAB}flags: [ "));
    o.flags(a.flags, AV_FLAGS);
    o.cat_str(" ]\n");
}

fn cq_attr(o: &mut Out, a: &fi_cq_attr) {
    o.cat_str("fi_cq_attr:\n");
    o.catf(format_args!("{TAB}size: {}\n", a.size));
    o.catf(format_args!("{TAB}flags: [ "));
    o.flags(a.flags, CQ_FLAGS);
    o.cat_str(" ]\n");
    o.catf(format_args!("{TAB}format: "));
    o.enumval(a.format as u64, CQ_FORMAT);
    o.cat_str("\n");
    o.catf(format_args!("{TAB}wait_obj: "));
    o.enumval(a.wait_obj as u64, WAIT_OBJ);
    o.cat_str("\n");
    o.catf(format_args!("{TAB}signaling_vector: {}\n", a.signaling_vector));
    o.catf(format_args!("{TAB}wait_cond: "));
    o.enumval(a.wait_cond as u64, CQ_WAIT_COND);
    o.cat_str("\n");
    o.catf(format_args!("{TAB}xpu_ctx: {}\n", ptr(a.xpu_ctx)));
}

fn mr_attr(o: &mut Out, a: &fi_mr_attr) {
    o.cat_str("fi_mr_attr:\n");
    // SAFETY: both union members are pointers; only the address is printed.
    o.catf(format_args!("{TAB}mr_iov: {}\n", ptr(unsafe { a.anon0.mr_iov })));
    o.catf(format_args!("{TAB}iov_count: {}\n", a.iov_count));
    o.catf(format_args!("{TAB}access: [ "));
    o.flags(a.access, MR_ACCESS);
    o.cat_str(" ]\n");
    o.catf(format_args!("{TAB}offset: 0x{:x}\n", a.offset));
    o.catf(format_args!("{TAB}requested_key: 0x{:x}\n", a.requested_key));
    o.catf(format_args!("{TAB}context: {}\n", ptr(a.context)));
    o.catf(format_args!("{TAB}auth_key_size: {}\n", a.auth_key_size));
    o.catf(format_args!("{TAB}iface: "));
    o.enumval(a.iface as u64, HMEM_IFACE);
    o.cat_str("\n");
}

fn cntr_attr(o: &mut Out, a: &fi_cntr_attr) {
    o.cat_str("fi_cntr_attr:\n");
    o.catf(format_args!("{TAB}events: "));
    o.enumval(a.events as u64, CNTR_EVENTS);
    o.cat_str("\n");
    o.catf(format_args!("{TAB}wait_obj: "));
    o.enumval(a.wait_obj as u64, WAIT_OBJ);
    o.cat_str("\n");
    o.catf(format_args!("{TAB}flags: 0x{:x}\n", a.flags));
    o.catf(format_args!("{TAB}xpu_ctx: {}\n", ptr(a.xpu_ctx)));
}

fn cq_err_entry(o: &mut Out, e: &fi_cq_err_entry) {
    o.cat_str("fi_cq_err_entry:\n");
    o.catf(format_args!("{TAB}op_context: {}\n", ptr(e.op_context)));
    o.catf(format_args!("{TAB}flags: 0x{:x}\n", e.flags));
    o.catf(format_args!("{TAB}len: {}\n", e.len));
    o.catf(format_args!("{TAB}buf: {}\n", ptr(e.buf)));
    o.catf(format_args!("{TAB}data: {}\n", e.data));
    o.catf(format_args!("{TAB}tag: 0x{:x}\n", e.tag));
    o.catf(format_args!("{TAB}olen: {}\n", e.olen));
    o.catf(format_args!("{TAB}err: {}\n", e.err));
    // Upstream prints `err` on this line; the member's own value is printed.
    o.catf(format_args!("{TAB}prov_errno: {}\n", e.prov_errno));
    o.catf(format_args!("{TAB}err_data: {}\n", ptr(e.err_data)));
    o.catf(format_args!("{TAB}err_data_size: {}\n", e.err_data_size));
}

#[cfg(test)]
mod tests;

/// `fi_tostr` of a plain value (a flag word or an enum), used in log lines.
/// Flag types read `v` whole; enum types read its low 32 bits.
pub fn tostr_value(v: u64, ty: u32) -> String {
    let narrow = v as u32;
    let data: *const c_void = match ty {
        FI_TYPE_CAPS | FI_TYPE_MODE | FI_TYPE_OP_FLAGS | FI_TYPE_MSG_ORDER | FI_TYPE_MR_MODE => &v as *const u64 as *const c_void,
        FI_TYPE_ADDR_FORMAT | FI_TYPE_EP_TYPE | FI_TYPE_THREADING | FI_TYPE_PROGRESS | FI_TYPE_PROTOCOL
        | FI_TYPE_AV_TYPE => &narrow as *const u32 as *const c_void,
        _ => return String::new(),
    };
    // SAFETY: data points to a local of the width this type expects (u64
    // for flag words, u32 for enums), alive for the call.
    unsafe { tostr(data, ty) }
}
