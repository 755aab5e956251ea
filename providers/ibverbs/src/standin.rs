//! A recording stand-in for libibverbs, libefa and librdmacm: `VerbsFns`/`EfaFns`
//! tables of Rust functions that record every call with its arguments and
//! hand out fake objects (boxed C structs, freed by their destroy call).
//! State is per thread (each test runs on its own).
//!
//! Built for this crate's unit tests and, with the `standin` feature, for
//! the tests of providers built on it (`rfabric-verbs` enables it as a
//! dev-dependency only); never part of a library that ships.

use crate::fns::{EfaFns, VerbsFns};
use crate::sys::*;
use libc::{c_char, c_int, c_uint, c_void};
use std::collections::HashMap;
use std::mem::size_of;
use std::ptr::{addr_of_mut, null_mut};

/// One recorded call; pointers as addresses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Call {
    GetDeviceList,
    FreeDeviceList(usize),
    GetDeviceName(usize),
    OpenDevice(usize),
    CloseDevice(usize),
    QueryDevice(usize),
    /// The exported `ibv_query_port` (compat path), and whether `*attr` was
    /// all zeros when it was called.
    QueryPortExported { ctx: usize, port: u8, zeroed: bool },
    /// `verbs_context.query_port`
    QueryPortVctx { ctx: usize, port: u8, len: usize },
    QueryGid { ctx: usize, port: u8, index: c_int },
    AllocPd(usize),
    DeallocPd(usize),
    RegMr { pd: usize, addr: usize, length: usize, access: c_int },
    RegMrIova2 { pd: usize, addr: usize, length: usize, iova: u64, access: c_uint },
    RegDmabufMr { pd: usize, offset: u64, length: usize, iova: u64, fd: c_int, ino: u64, access: c_int },
    DeregMr(usize),
    CreateCq { ctx: usize, cqe: c_int, cq_context: usize, channel: usize, comp_vector: c_int },
    DestroyCq(usize),
    CreateQp { pd: usize, send_cq: usize, recv_cq: usize, qp_type: u32, max_send_wr: u32, sq_sig_all: c_int },
    DestroyQp(usize),
    /// `ibv_create_ah`: the PD, and the attributes' GID, `is_global` and port.
    CreateAh { pd: usize, dgid: [u8; 16], is_global: u8, port_num: u8 },
    DestroyAh(usize),
    ModifyQp { qp: usize, qp_state: u32, mask: c_int },
    EfaQueryDevice { ctx: usize, inlen: u32 },
    EfaCreateQpEx {
        ctx: usize,
        pd: usize,
        send_cq: usize,
        qp_type: u32,
        comp_mask: u32,
        send_ops_flags: u64,
        driver_qp_type: u32,
        inlen: u32,
    },
    EfaCreateDriverQp { pd: usize, driver_qp_type: u32 },
    PollCq { cq: usize, n: c_int, wc: usize },
    ReqNotifyCq { cq: usize, solicited_only: c_int },
    /// `ibv_get_cq_event` that handed out an event of `cq`.
    GetCqEvent { channel: usize, cq: usize },
    AckCqEvents { cq: usize, n: c_uint },
    PostSend { qp: usize, wr: usize, bad: usize },
    PostRecv { qp: usize, wr: usize, bad: usize },
    PostSrqRecv { srq: usize, wr: usize, bad: usize },
    /// `ibv_create_srq`: the PD and the requested `max_wr`, `max_sge`.
    CreateSrq { pd: usize, max_wr: u32, max_sge: u32 },
    DestroySrq(usize),
    /// A slot of `ibv_context_ops` nothing should call.
    Trap,
}

/// What one port of a fake device answers (`set_port`); ports without one
/// answer as the slots below describe.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PortCfg {
    /// `IBV_PORT_*`
    pub state: u32,
    /// `IBV_LINK_LAYER_*`
    pub link_layer: u8,
    pub lid: u16,
    /// The GID table, index by index (all-zero entries are unused ones).
    pub gids: Vec<[u8; 16]>,
}

/// What one `post_send` work request carried (its first entry only).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SentWr {
    pub qp: usize,
    pub wr_id: u64,
    pub opcode: u32,
    pub send_flags: u32,
    pub num_sge: i32,
    /// The first scatter/gather entry: address, length, lkey.
    pub sge0: (u64, u32, u32),
    /// `wr.rdma` (RDMA operations).
    pub remote_addr: u64,
    pub rkey: u32,
    /// `imm_data` as posted (big-endian).
    pub imm_data: u32,
    /// `wr.ud` (sends on UD and SRD QPs only; `remote_addr` and `rkey`
    /// are 0 for those).
    pub ah: usize,
    pub remote_qpn: u32,
    pub remote_qkey: u32,
}

/// An address handle of `ibv_create_ah`, as `World::ahs` keeps it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AhRec {
    pub ctx: usize,
    pub dgid: [u8; 16],
    /// The handle's number, which a receive completion reports as `slid`
    /// for a packet from this GID (as EFA does).
    pub ahn: u16,
}

/// One librdmacm call of the stand-in (`rdmacm_fns`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CmCall {
    CreateChannel,
    DestroyChannel,
    CreateId { ps: u32 },
    DestroyId(usize),
    BindAddr { family: i32 },
    ResolveAddr { family: i32, timeout_ms: c_int },
    ResolveRoute { timeout_ms: c_int },
    CreateQp { id: usize, pd: usize, qp_type: u32, send_cq: usize, recv_cq: usize },
    DestroyQp(usize),
    Connect { id: usize, private_data: Vec<u8>, rnr_retry_count: u8 },
    Listen { backlog: c_int },
    Accept { id: usize, private_data: Vec<u8> },
    Reject { id: usize, private_data: Vec<u8> },
    Disconnect(usize),
    GetEvent,
    AckEvent,
}

pub struct World {
    pub calls: Vec<Call>,
    /// Every work request `post_send` saw.
    pub sent: Vec<SentWr>,
    /// `(qp, wr_id, num_sge, first entry's address and length)` of every
    /// `post_recv`.
    pub posted_recvs: Vec<(usize, u64, c_int, u64, u32)>,
    /// `(srq, wr_id, num_sge, first entry's address and length)` of every
    /// `post_srq_recv`.
    pub posted_srq_recvs: Vec<(usize, u64, c_int, u64, u32)>,
    /// QP -> the SRQ it was created with (`ibv_create_qp`, `rdma_create_qp`).
    pub qp_srq: HashMap<usize, usize>,
    /// With `Some`, `poll_cq` hands out these completions (and nothing
    /// when it is empty) instead of its one fixed receive completion.
    pub wcs: Option<std::collections::VecDeque<ibv_wc>>,
    /// With `Some`, a loopback fabric between the QPs of this thread
    /// (`Loopback`), in place of the scripted answers.
    pub loopback: Option<Loopback>,
    /// The channel of every id made (`rdma_create_id`, requests), so
    /// events go to their id's channel.
    id_channel: HashMap<usize, usize>,
    /// librdmacm calls, and its script (`cm_*` functions).
    pub cm_calls: Vec<CmCall>,
    pub cm: CmScript,
    /// `(device name, port)` -> what that port answers; a device with
    /// configured ports reports the highest of them as `phys_port_cnt`.
    pub port_cfg: HashMap<(String, u8), PortCfg>,
    /// Contexts are the last member of a `verbs_context` with `query_port`.
    pub extended: bool,
    pub ports: u8,
    /// Live address handles by address.
    pub ahs: HashMap<usize, AhRec>,
    /// Live UD and SRD QPs (their sends record `wr.ud`).
    dgram_qps: std::collections::HashSet<usize>,
    /// `max_msg_sz` every configured port reports (0 unless set).
    pub max_msg_sz: u32,
    /// `efadv_query_device` accepts the devices.
    pub efa_device: bool,
    /// Function name -> the errno it fails with.
    pub fail: HashMap<&'static str, c_int>,
    /// What the data-path slots return.
    pub post_rc: c_int,
    /// Completion channels as a device's: with the loopback, a completion
    /// queued on a CQ armed by `ibv_req_notify_cq` becomes an event on its
    /// channel, whose fd is readable until `ibv_get_cq_event` has taken
    /// every event (off: the fd is always readable under the loopback).
    pub comp_events: bool,
    /// CQs armed by `ibv_req_notify_cq` (`comp_events`).
    armed: std::collections::HashSet<usize>,
    /// Channel -> CQs with an event waiting.
    cq_events: HashMap<usize, std::collections::VecDeque<usize>>,
    // Boxed: device lists point at them while the Vec grows.
    #[allow(clippy::vec_box)]
    devices: Vec<Box<ibv_device>>,
    lists: HashMap<usize, Vec<*mut ibv_device>>,
    next_handle: u32,
}

fn new_world() -> World {
    World {
    calls: Vec::new(),
    sent: Vec::new(),
    posted_recvs: Vec::new(),
    posted_srq_recvs: Vec::new(),
    qp_srq: HashMap::new(),
    wcs: None,
    loopback: None,
    id_channel: HashMap::new(),
    cm_calls: Vec::new(),
    cm: CmScript::default(),
    port_cfg: HashMap::new(),
    extended: true,
    ports: 1,
    ahs: HashMap::new(),
    dgram_qps: std::collections::HashSet::new(),
    max_msg_sz: 0,
    efa_device: false,
    fail: HashMap::new(),
    post_rc: 0,
    comp_events: false,
    armed: std::collections::HashSet::new(),
    cq_events: HashMap::new(),
    devices: Vec::new(),
    lists: HashMap::new(),
    next_handle: 1,
}
}

// SAFETY: the raw pointers a world holds (device lists) point at boxed
// objects the world owns; a world is only reached under its mutex.
unsafe impl Send for World {}

type SharedWorld = std::sync::Arc<std::sync::Mutex<World>>;

/// Worlds lent to threads by name prefix (`share_with_threads`).
static LENT: std::sync::Mutex<Vec<(String, SharedWorld)>> = std::sync::Mutex::new(Vec::new());
/// Held while a world is lent: one lending test at a time.
static LENDING: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn lent_world() -> Option<SharedWorld> {
    let name = std::thread::current().name()?.to_string();
    let lent = LENT.lock().unwrap_or_else(|p| p.into_inner());
    lent.iter().find(|(prefix, _)| name.starts_with(prefix.as_str())).map(|(_, w)| w.clone())
}

thread_local! {
    static WORLD: SharedWorld = lent_world().unwrap_or_else(|| std::sync::Arc::new(std::sync::Mutex::new(new_world())));
}

/// While the guard lives, threads whose name starts with `prefix` that
/// first touch the stand-in use this thread's world (a provider's
/// progress threads, which drive the same fake objects). Lending tests
/// run one at a time (the guard holds a process-wide lock).
pub fn share_with_threads(prefix: &str) -> LendGuard {
    let serial = LENDING.lock().unwrap_or_else(|p| p.into_inner());
    let w = WORLD.with(|w| w.clone());
    LENT.lock().unwrap_or_else(|p| p.into_inner()).push((prefix.to_string(), w));
    LendGuard { prefix: prefix.to_string(), _serial: serial }
}

/// Ends a `share_with_threads` when dropped.
pub struct LendGuard {
    prefix: String,
    _serial: std::sync::MutexGuard<'static, ()>,
}

impl Drop for LendGuard {
    fn drop(&mut self) {
        LENT.lock().unwrap_or_else(|p| p.into_inner()).retain(|(p, _)| *p != self.prefix);
    }
}

pub fn with<R>(f: impl FnOnce(&mut World) -> R) -> R {
    WORLD.with(|w| f(&mut w.lock().unwrap_or_else(|p| p.into_inner())))
}

fn record(c: Call) {
    with(|w| w.calls.push(c));
}

/// The calls recorded so far, and forgets them.
pub fn take_calls() -> Vec<Call> {
    with(|w| std::mem::take(&mut w.calls))
}

fn handle() -> u32 {
    with(|w| {
        w.next_handle += 1;
        w.next_handle
    })
}

/// Makes `name` fail with `errno` (NULL or -1 with errno set, or the errno
/// value returned, as the real function does).
pub fn fail(name: &'static str, errno: c_int) {
    with(|w| w.fail.insert(name, errno));
}

fn failing(name: &'static str) -> Option<c_int> {
    with(|w| w.fail.get(name).copied())
}

fn set_errno(e: c_int) {
    // SAFETY: __errno_location returns the calling thread's errno slot.
    unsafe { *libc::__errno_location() = e };
}

fn fill(dst: &mut [c_char], s: &str) {
    for (d, b) in dst.iter_mut().zip(s.bytes()) {
        *d = b as c_char;
    }
}

/// Makes `port` of the device `dev` answer `cfg` (both query paths, and
/// `ibv_query_gid`).
pub fn set_port(dev: &str, port: u8, cfg: PortCfg) {
    with(|w| w.port_cfg.insert((dev.to_string(), port), cfg));
}

/// The name of the fake device a context was opened on.
fn ctx_dev_name(ctx: *mut ibv_context) -> String {
    // SAFETY: a context of `new_context` (or a test's own).
    let dev = unsafe { (*ctx).device };
    if dev.is_null() {
        return String::new();
    }
    // SAFETY: a non-NULL device is one of `World::devices` (or a test's
    // own, equally live).
    let name = unsafe { (*dev).name };
    let bytes: Vec<u8> = name.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

fn port_cfg(ctx: *mut ibv_context, port: u8) -> Option<PortCfg> {
    let dev = ctx_dev_name(ctx);
    with(|w| w.port_cfg.get(&(dev, port)).cloned())
}

fn port_count(ctx: *mut ibv_context) -> u8 {
    let dev = ctx_dev_name(ctx);
    with(|w| {
        let configured = w.port_cfg.keys().filter(|(d, _)| *d == dev).map(|&(_, p)| p).max();
        configured.unwrap_or(w.ports)
    })
}

/// Adds a device to what `get_device_list` reports.
pub fn add_device(name: &str, node_type: c_int, transport: c_int, ibdev_path: &str) {
    let mut d = Box::new(ibv_device { node_type, transport_type: transport, ..Default::default() });
    fill(&mut d.name, name);
    fill(&mut d.dev_name, "uverbs0");
    fill(&mut d.ibdev_path, ibdev_path);
    with(|w| w.devices.push(d));
}

/// The `ibv_context_ops` of every fake context: the data-path slots record,
/// every other slot traps.
pub fn ops() -> ibv_context_ops {
    let t: VoidFn = Some(trap);
    ibv_context_ops {
        _compat_query_device: t,
        _compat_query_port: t,
        _compat_alloc_pd: t,
        _compat_dealloc_pd: t,
        _compat_reg_mr: t,
        _compat_rereg_mr: t,
        _compat_dereg_mr: t,
        alloc_mw: t,
        bind_mw: t,
        dealloc_mw: t,
        _compat_create_cq: t,
        poll_cq: Some(poll_cq),
        req_notify_cq: Some(req_notify_cq),
        _compat_cq_event: t,
        _compat_resize_cq: t,
        _compat_destroy_cq: t,
        _compat_create_srq: t,
        _compat_modify_srq: t,
        _compat_query_srq: t,
        _compat_destroy_srq: t,
        post_srq_recv: Some(post_srq_recv),
        _compat_create_qp: t,
        _compat_query_qp: t,
        _compat_modify_qp: t,
        _compat_destroy_qp: t,
        post_send: Some(post_send),
        post_recv: Some(post_recv),
        _compat_create_ah: t,
        _compat_destroy_ah: t,
        _compat_attach_mcast: t,
        _compat_detach_mcast: t,
        _compat_async_event: t,
    }
}

/// A fake context on `dev`: inside a boxed `verbs_context` when `extended`.
pub fn new_context(dev: *mut ibv_device, extended: bool) -> *mut ibv_context {
    let context = ibv_context { device: dev, ops: ops(), ..Default::default() };
    if extended {
        let v = Box::new(verbs_context {
            query_port: Some(vctx_query_port),
            sz: size_of::<verbs_context>(),
            context: ibv_context { abi_compat: VERBS_ABI_IS_EXTENDED, ..context },
            ..Default::default()
        });
        let v = Box::into_raw(v);
        // SAFETY: `v` is a live box; a field's address.
        unsafe { addr_of_mut!((*v).context) }
    } else {
        Box::into_raw(Box::new(context))
    }
}

/// Frees a context of `new_context`.
pub(crate) fn free_context(ctx: *mut ibv_context) {
    // SAFETY: `ctx` came from `new_context`: a boxed verbs_context's member
    // when extended (then `verbs_get_ctx` is the box), else a box.
    unsafe {
        let v = crate::inline::verbs_get_ctx(ctx);
        if v.is_null() {
            drop(Box::from_raw(ctx));
        } else {
            drop(Box::from_raw(v));
        }
    }
}

unsafe extern "C" fn trap() {
    record(Call::Trap);
}

unsafe extern "C" fn get_device_list(n: *mut c_int) -> *mut *mut ibv_device {
    record(Call::GetDeviceList);
    if let Some(e) = failing("ibv_get_device_list") {
        // SAFETY: `n` is the caller's out-parameter.
        unsafe { *n = 0 };
        set_errno(e);
        return null_mut();
    }
    with(|w| {
        let mut list: Vec<*mut ibv_device> = w.devices.iter_mut().map(|d| &mut **d as *mut ibv_device).collect();
        let count = list.len() as c_int;
        list.push(null_mut());
        let p = list.as_mut_ptr();
        w.lists.insert(p as usize, list);
        // SAFETY: `n` is the caller's out-parameter.
        unsafe { *n = count };
        p
    })
}

unsafe extern "C" fn free_device_list(list: *mut *mut ibv_device) {
    record(Call::FreeDeviceList(list as usize));
    let freed = with(|w| w.lists.remove(&(list as usize)));
    assert!(freed.is_some(), "free_device_list of a list it did not hand out");
}

unsafe extern "C" fn get_device_name(dev: *mut ibv_device) -> *const c_char {
    record(Call::GetDeviceName(dev as usize));
    // SAFETY: `dev` is one of `World::devices`.
    unsafe { (*dev).name.as_ptr() }
}

unsafe extern "C" fn open_device(dev: *mut ibv_device) -> *mut ibv_context {
    record(Call::OpenDevice(dev as usize));
    if let Some(e) = failing("ibv_open_device") {
        set_errno(e);
        return null_mut();
    }
    new_context(dev, with(|w| w.extended))
}

unsafe extern "C" fn close_device(ctx: *mut ibv_context) -> c_int {
    record(Call::CloseDevice(ctx as usize));
    free_context(ctx);
    0
}

unsafe extern "C" fn query_device(ctx: *mut ibv_context, attr: *mut ibv_device_attr) -> c_int {
    record(Call::QueryDevice(ctx as usize));
    if let Some(e) = failing("ibv_query_device") {
        return e;
    }
    let mut a = ibv_device_attr {
        vendor_id: 0x1d0f,
        vendor_part_id: 0xefa1,
        phys_port_cnt: port_count(ctx),
        max_qp: 16,
        ..Default::default()
    };
    fill(&mut a.fw_ver, "1.2.3");
    // SAFETY: `attr` is the caller's writable struct.
    unsafe { *attr = a };
    0
}

unsafe extern "C" fn query_port(ctx: *mut ibv_context, port: u8, attr: *mut ibv_port_attr) -> c_int {
    // SAFETY: `attr` is the caller's struct; read as bytes.
    let bytes = unsafe { std::slice::from_raw_parts(attr.cast::<u8>(), size_of::<ibv_port_attr>()) };
    record(Call::QueryPortExported { ctx: ctx as usize, port, zeroed: bytes.iter().all(|&b| b == 0) });
    if let Some(c) = port_cfg(ctx, port) {
        // SAFETY: `attr` is the caller's writable struct.
        unsafe { set_attr(attr, &c) };
        return 0;
    }
    // The compat path answers "down, InfiniBand" (a prefix of the struct).
    // SAFETY: `attr` is the caller's writable struct.
    unsafe {
        (*attr).state = IBV_PORT_DOWN;
        (*attr).link_layer = IBV_LINK_LAYER_INFINIBAND;
        (*attr).active_mtu = IBV_MTU_1024;
        (*attr).lid = 7;
    }
    0
}

unsafe extern "C" fn vctx_query_port(ctx: *mut ibv_context, port: u8, attr: *mut ibv_port_attr, len: usize) -> c_int {
    record(Call::QueryPortVctx { ctx: ctx as usize, port, len });
    if let Some(e) = failing("ibv_query_port") {
        return e;
    }
    if let Some(c) = port_cfg(ctx, port) {
        // SAFETY: `attr` is the caller's writable struct.
        unsafe { set_attr(attr, &c) };
        return 0;
    }
    // SAFETY: `attr` is the caller's writable struct of `len` bytes.
    unsafe {
        *attr = ibv_port_attr {
            state: IBV_PORT_ACTIVE,
            link_layer: IBV_LINK_LAYER_ETHERNET,
            active_mtu: IBV_MTU_4096,
            max_mtu: IBV_MTU_4096,
            lid: port as u16 * 100,
            ..Default::default()
        }
    };
    0
}

/// Fills `*attr` from a configured port.
///
/// # Safety
/// `attr` must be valid for writes.
unsafe fn set_attr(attr: *mut ibv_port_attr, c: &PortCfg) {
    let max_msg_sz = with(|w| w.max_msg_sz);
    // SAFETY: the caller's promise.
    unsafe {
        *attr = ibv_port_attr {
            state: c.state,
            link_layer: c.link_layer,
            active_mtu: IBV_MTU_4096,
            max_mtu: IBV_MTU_4096,
            lid: c.lid,
            gid_tbl_len: c.gids.len() as c_int,
            max_msg_sz,
            ..Default::default()
        }
    };
}

unsafe extern "C" fn query_gid(ctx: *mut ibv_context, port: u8, index: c_int, gid: *mut ibv_gid) -> c_int {
    record(Call::QueryGid { ctx: ctx as usize, port, index });
    if let Some(c) = port_cfg(ctx, port) {
        let Some(raw) = usize::try_from(index).ok().and_then(|i| c.gids.get(i)).copied() else {
            set_errno(libc::EINVAL);
            return -1;
        };
        // SAFETY: `gid` is the caller's writable union.
        unsafe { *gid = ibv_gid { raw } };
        return 0;
    }
    if failing("ibv_query_gid").is_some() || index != 0 {
        set_errno(libc::EINVAL);
        return -1;
    }
    let mut raw = [0u8; 16];
    for (i, b) in raw.iter_mut().enumerate() {
        *b = port.wrapping_mul(16).wrapping_add(i as u8);
    }
    // SAFETY: `gid` is the caller's writable union.
    unsafe { *gid = ibv_gid { raw } };
    0
}

unsafe extern "C" fn alloc_pd(ctx: *mut ibv_context) -> *mut ibv_pd {
    record(Call::AllocPd(ctx as usize));
    if let Some(e) = failing("ibv_alloc_pd") {
        set_errno(e);
        return null_mut();
    }
    Box::into_raw(Box::new(ibv_pd { context: ctx, handle: handle() }))
}

unsafe extern "C" fn dealloc_pd(pd: *mut ibv_pd) -> c_int {
    record(Call::DeallocPd(pd as usize));
    // SAFETY: a PD of `alloc_pd`, freed once.
    drop(unsafe { Box::from_raw(pd) });
    0
}

fn new_mr(pd: *mut ibv_pd, addr: *mut c_void, length: usize) -> *mut ibv_mr {
    if let Some(e) = failing("reg_mr") {
        set_errno(e);
        return null_mut();
    }
    // SAFETY: `pd` is a live PD of `alloc_pd`.
    let context = unsafe { (*pd).context };
    let h = handle();
    Box::into_raw(Box::new(ibv_mr { context, pd, addr, length, handle: h, lkey: 0x1000 + h, rkey: 0x2000 + h }))
}

unsafe extern "C" fn reg_mr(pd: *mut ibv_pd, addr: *mut c_void, length: usize, access: c_int) -> *mut ibv_mr {
    record(Call::RegMr { pd: pd as usize, addr: addr as usize, length, access });
    new_mr(pd, addr, length)
}

unsafe extern "C" fn reg_mr_iova2(pd: *mut ibv_pd, addr: *mut c_void, length: usize, iova: u64, access: c_uint) -> *mut ibv_mr {
    record(Call::RegMrIova2 { pd: pd as usize, addr: addr as usize, length, iova, access });
    new_mr(pd, addr, length)
}

unsafe extern "C" fn reg_dmabuf_mr(pd: *mut ibv_pd, offset: u64, length: usize, iova: u64, fd: c_int, access: c_int) -> *mut ibv_mr {
    // The file behind `fd` at the time of the call (0: not an open fd).
    use std::os::unix::fs::MetadataExt;
    let ino = std::fs::metadata(format!("/proc/self/fd/{fd}")).map(|m| m.ino()).unwrap_or(0);
    record(Call::RegDmabufMr { pd: pd as usize, offset, length, iova, fd, ino, access });
    if let Some(e) = failing("ibv_reg_dmabuf_mr") {
        set_errno(e);
        return null_mut();
    }
    new_mr(pd, null_mut(), length)
}

unsafe extern "C" fn dereg_mr(mr: *mut ibv_mr) -> c_int {
    record(Call::DeregMr(mr as usize));
    // SAFETY: an MR of `new_mr`, freed once.
    drop(unsafe { Box::from_raw(mr) });
    0
}

unsafe extern "C" fn create_cq(
    ctx: *mut ibv_context,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut ibv_comp_channel,
    comp_vector: c_int,
) -> *mut ibv_cq {
    record(Call::CreateCq { ctx: ctx as usize, cqe, cq_context: cq_context as usize, channel: channel as usize, comp_vector });
    if let Some(e) = failing("ibv_create_cq") {
        set_errno(e);
        return null_mut();
    }
    Box::into_raw(Box::new(ibv_cq { context: ctx, channel, cq_context, cqe, handle: handle(), ..Default::default() }))
}

unsafe extern "C" fn create_comp_channel(ctx: *mut ibv_context) -> *mut ibv_comp_channel {
    // An fd that is never readable: the stand-in has no events; under
    // the loopback one that is always readable, so pollers look every time.
    // With `comp_events`, an eventfd written when an armed CQ of the
    // loopback gets a completion (`loop_complete`) and emptied when
    // `ibv_get_cq_event` has handed out every event.
    let init = u32::from(with(|w| w.loopback.is_some() && !w.comp_events));
    // SAFETY: no memory-safety preconditions; the fd is closed by destroy.
    let fd = unsafe { libc::eventfd(init, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    Box::into_raw(Box::new(ibv_comp_channel { context: ctx, fd, refcnt: 0 }))
}

unsafe extern "C" fn destroy_comp_channel(ch: *mut ibv_comp_channel) -> c_int {
    // SAFETY: from `create_comp_channel`, freed once.
    let ch = unsafe { Box::from_raw(ch) };
    // SAFETY: the channel's own fd.
    unsafe { libc::close(ch.fd) };
    0
}

unsafe extern "C" fn get_cq_event(ch: *mut ibv_comp_channel, cq: *mut *mut ibv_cq, ctx: *mut *mut c_void) -> c_int {
    let (next, empty) = with(|w| {
        let q = w.cq_events.entry(ch as usize).or_default();
        let n = q.pop_front();
        (n, q.is_empty())
    });
    if empty && with(|w| w.comp_events) {
        let mut v = 0u64;
        // SAFETY: the channel's own non-blocking eventfd; 8 bytes into `v`.
        unsafe { libc::read((*ch).fd, (&mut v as *mut u64).cast(), 8) };
    }
    let Some(c) = next else {
        set_errno(libc::EAGAIN);
        return -1;
    };
    record(Call::GetCqEvent { channel: ch as usize, cq: c });
    // SAFETY: the caller's out-parameters; `c` is a live CQ of `create_cq`
    // (an event keeps it, as the real library's does).
    unsafe {
        *cq = c as *mut ibv_cq;
        *ctx = (*(c as *mut ibv_cq)).cq_context;
    }
    0
}

unsafe extern "C" fn ack_cq_events(cq: *mut ibv_cq, n: c_uint) {
    record(Call::AckCqEvents { cq: cq as usize, n });
}

unsafe extern "C" fn destroy_cq(cq: *mut ibv_cq) -> c_int {
    record(Call::DestroyCq(cq as usize));
    // SAFETY: a CQ of `create_cq`, freed once.
    drop(unsafe { Box::from_raw(cq) });
    0
}

fn new_qp(pd: *mut ibv_pd, send_cq: *mut ibv_cq, recv_cq: *mut ibv_cq, qp_type: u32) -> *mut ibv_qp {
    // SAFETY: `pd` is a live PD of `alloc_pd`.
    let context = unsafe { (*pd).context };
    let h = handle();
    let qp = Box::into_raw(Box::new(ibv_qp { context, pd, send_cq, recv_cq, handle: h, qp_num: 0x100 + h, qp_type, ..Default::default() }));
    if qp_type == IBV_QPT_UD || qp_type == IBV_QPT_DRIVER {
        // Datagram QPs join the loopback as they are made (no connection).
        let gid = port_gid(context);
        with(|w| {
            w.dgram_qps.insert(qp as usize);
            if let Some(l) = w.loopback.as_mut() {
                l.cqs_of.insert(qp as usize, (send_cq as usize, recv_cq as usize));
                l.ud.insert(qp as usize, (0x100 + h, gid));
            }
        });
    }
    qp
}

/// The first GID of port 1 of the context's device (zeros without one).
fn port_gid(ctx: *mut ibv_context) -> [u8; 16] {
    port_cfg(ctx, 1).and_then(|c| c.gids.first().copied()).unwrap_or_default()
}

unsafe extern "C" fn create_ah(pd: *mut ibv_pd, attr: *mut ibv_ah_attr) -> *mut ibv_ah {
    // SAFETY: `attr` is the caller's struct; `pd` a live PD of `alloc_pd`;
    // every bit pattern of the GID union is a byte array.
    let (a, ctx) = unsafe { (*attr, (*pd).context) };
    // SAFETY: as above.
    let dgid = unsafe { a.grh.dgid.raw };
    record(Call::CreateAh { pd: pd as usize, dgid, is_global: a.is_global, port_num: a.port_num });
    if let Some(e) = failing("ibv_create_ah") {
        set_errno(e);
        return null_mut();
    }
    let ahn = handle() as u16;
    let ah = Box::into_raw(Box::new(0u64)) as *mut ibv_ah;
    with(|w| w.ahs.insert(ah as usize, AhRec { ctx: ctx as usize, dgid, ahn }));
    ah
}

unsafe extern "C" fn destroy_ah(ah: *mut ibv_ah) -> c_int {
    record(Call::DestroyAh(ah as usize));
    with(|w| w.ahs.remove(&(ah as usize)));
    // SAFETY: a box of `create_ah`, freed once.
    drop(unsafe { Box::from_raw(ah as *mut u64) });
    0
}

unsafe extern "C" fn create_qp(pd: *mut ibv_pd, attr: *mut ibv_qp_init_attr) -> *mut ibv_qp {
    // SAFETY: `attr` is the caller's struct.
    let a = unsafe { &mut *attr };
    record(Call::CreateQp {
        pd: pd as usize,
        send_cq: a.send_cq as usize,
        recv_cq: a.recv_cq as usize,
        qp_type: a.qp_type,
        max_send_wr: a.cap.max_send_wr,
        sq_sig_all: a.sq_sig_all,
    });
    if let Some(e) = failing("ibv_create_qp") {
        set_errno(e);
        return null_mut();
    }
    // libibverbs writes back the capabilities it gave.
    a.cap.max_inline_data = 64;
    let qp = new_qp(pd, a.send_cq, a.recv_cq, a.qp_type);
    // SAFETY: a QP `new_qp` just made.
    unsafe { (*qp).srq = a.srq };
    if !a.srq.is_null() {
        with(|w| w.qp_srq.insert(qp as usize, a.srq as usize));
    }
    qp
}

unsafe extern "C" fn create_srq(pd: *mut ibv_pd, attr: *mut ibv_srq_init_attr) -> *mut ibv_srq {
    // SAFETY: `attr` is the caller's struct; `pd` a live PD of `alloc_pd`.
    let (a, context) = unsafe { (*attr, (*pd).context) };
    record(Call::CreateSrq { pd: pd as usize, max_wr: a.attr.max_wr, max_sge: a.attr.max_sge });
    if let Some(e) = failing("ibv_create_srq") {
        set_errno(e);
        return null_mut();
    }
    Box::into_raw(Box::new(ibv_srq { context, pd, srq_context: a.srq_context, handle: handle(), ..Default::default() }))
}

unsafe extern "C" fn destroy_srq(srq: *mut ibv_srq) -> c_int {
    record(Call::DestroySrq(srq as usize));
    with(|w| {
        if let Some(l) = w.loopback.as_mut() {
            l.rq.remove(&(srq as usize));
        }
    });
    // SAFETY: an SRQ of `create_srq`, freed once.
    drop(unsafe { Box::from_raw(srq) });
    0
}

unsafe extern "C" fn destroy_qp(qp: *mut ibv_qp) -> c_int {
    record(Call::DestroyQp(qp as usize));
    with(|w| w.qp_srq.remove(&(qp as usize)));
    // Datagrams on their way to this (datagram) QP fail at their senders.
    let lost = with(|w| {
        w.dgram_qps.remove(&(qp as usize));
        let l = w.loopback.as_mut()?;
        l.ud.remove(&(qp as usize))?;
        l.rq.remove(&(qp as usize));
        l.waiting.remove(&(qp as usize))
    });
    for (src, wr_id, _, _, _) in lost.into_iter().flatten() {
        loop_complete(src, true, ibv_wc { wr_id, status: WC_RETRY_EXC_ERR, opcode: IBV_WC_SEND, ..Default::default() });
    }
    // SAFETY: a QP of `new_qp`, freed once.
    drop(unsafe { Box::from_raw(qp) });
    0
}

unsafe extern "C" fn modify_qp(qp: *mut ibv_qp, attr: *mut ibv_qp_attr, mask: c_int) -> c_int {
    // SAFETY: `attr` is the caller's struct.
    let qp_state = unsafe { (*attr).qp_state };
    record(Call::ModifyQp { qp: qp as usize, qp_state, mask });
    failing("ibv_modify_qp").unwrap_or(0)
}

unsafe extern "C" fn efa_query_device(ctx: *mut ibv_context, attr: *mut efadv_device_attr, inlen: u32) -> c_int {
    record(Call::EfaQueryDevice { ctx: ctx as usize, inlen });
    if !with(|w| w.efa_device) {
        return libc::EOPNOTSUPP;
    }
    // SAFETY: `attr` is the caller's writable struct.
    unsafe {
        *attr = efadv_device_attr {
            max_sq_wr: 4096,
            max_rq_wr: 32768,
            max_sq_sge: 2,
            max_rq_sge: 3,
            inline_buf_size: 32,
            device_caps: EFADV_DEVICE_ATTR_CAPS_RDMA_READ | EFADV_DEVICE_ATTR_CAPS_RNR_RETRY,
            max_rdma_size: 1 << 30,
            ..Default::default()
        }
    };
    0
}

unsafe extern "C" fn efa_create_driver_qp(pd: *mut ibv_pd, attr: *mut ibv_qp_init_attr, driver_qp_type: u32) -> *mut ibv_qp {
    record(Call::EfaCreateDriverQp { pd: pd as usize, driver_qp_type });
    // SAFETY: `attr` is the caller's struct.
    let a = unsafe { &*attr };
    new_qp(pd, a.send_cq, a.recv_cq, a.qp_type)
}

unsafe extern "C" fn efa_create_qp_ex(
    ctx: *mut ibv_context,
    attr: *mut ibv_qp_init_attr_ex,
    efa_attr: *mut efadv_qp_init_attr,
    inlen: u32,
) -> *mut ibv_qp {
    // SAFETY: both are the caller's structs.
    let (a, e) = unsafe { (&*attr, &*efa_attr) };
    record(Call::EfaCreateQpEx {
        ctx: ctx as usize,
        pd: a.pd as usize,
        send_cq: a.send_cq as usize,
        qp_type: a.qp_type,
        comp_mask: a.comp_mask,
        send_ops_flags: a.send_ops_flags,
        driver_qp_type: e.driver_qp_type,
        inlen,
    });
    new_qp(a.pd, a.send_cq, a.recv_cq, a.qp_type)
}

unsafe extern "C" fn poll_cq(cq: *mut ibv_cq, n: c_int, wc: *mut ibv_wc) -> c_int {
    record(Call::PollCq { cq: cq as usize, n, wc: wc as usize });
    let rc = with(|w| w.post_rc);
    if rc != 0 {
        return rc;
    }
    if with(|w| w.loopback.is_some()) {
        let mut got = 0;
        while got < n {
            let Some(c) = with(|w| w.loopback.as_mut().and_then(|l| l.cqs.get_mut(&(cq as usize)).and_then(|q| q.pop_front()))) else { break };
            // SAFETY: `wc` is writable for `n` entries.
            unsafe { *wc.add(got as usize) = c };
            got += 1;
        }
        return got;
    }
    if with(|w| w.wcs.is_some()) {
        let mut got = 0;
        while got < n {
            let Some(c) = with(|w| w.wcs.as_mut().and_then(|q| q.pop_front())) else { break };
            // SAFETY: `wc` is writable for `n` entries.
            unsafe { *wc.add(got as usize) = c };
            got += 1;
        }
        return got;
    }
    if n > 0 {
        // SAFETY: `wc` is writable for `n` entries.
        unsafe { *wc = ibv_wc { wr_id: 42, status: IBV_WC_SUCCESS, opcode: IBV_WC_RECV, byte_len: 9, ..Default::default() } };
    }
    n.min(1)
}

unsafe extern "C" fn req_notify_cq(cq: *mut ibv_cq, solicited_only: c_int) -> c_int {
    record(Call::ReqNotifyCq { cq: cq as usize, solicited_only });
    with(|w| {
        w.armed.insert(cq as usize);
        w.post_rc
    })
}

unsafe extern "C" fn post_send(qp: *mut ibv_qp, wr: *mut ibv_send_wr, bad: *mut *mut ibv_send_wr) -> c_int {
    record(Call::PostSend { qp: qp as usize, wr: wr as usize, bad: bad as usize });
    if !wr.is_null() {
        let dgram = with(|w| w.dgram_qps.contains(&(qp as usize)));
        // SAFETY: the caller's work request; its list has `num_sge` entries;
        // `wr.rdma`, `wr.ud` and `imm_data` are plain integers (and a
        // pointer only recorded) in any case.
        let mut s = unsafe {
            let w = &*wr;
            let sge0 = if w.num_sge > 0 && !w.sg_list.is_null() { let g = *w.sg_list; (g.addr, g.length, g.lkey) } else { (0, 0, 0) };
            SentWr {
                qp: qp as usize,
                wr_id: w.wr_id,
                opcode: w.opcode,
                send_flags: w.send_flags,
                num_sge: w.num_sge,
                sge0,
                remote_addr: w.wr.rdma.remote_addr,
                rkey: w.wr.rdma.rkey,
                imm_data: w.imm.imm_data,
                ..Default::default()
            }
        };
        if dgram {
            // SAFETY: as above.
            let ud = unsafe { (*wr).wr.ud };
            (s.ah, s.remote_qpn, s.remote_qkey) = (ud.ah as usize, ud.remote_qpn, ud.remote_qkey);
            (s.remote_addr, s.rkey) = (0, 0);
        }
        with(|w| w.sent.push(s));
        if with(|w| w.loopback.is_some()) {
            // SAFETY: the caller's work request and the memory its list names.
            unsafe { loop_send(qp as usize, &*wr) };
            return 0;
        }
    }
    let rc = with(|w| w.post_rc);
    if rc != 0 {
        // SAFETY: `bad` is the caller's out-parameter.
        unsafe { *bad = wr };
    }
    rc
}

unsafe extern "C" fn post_recv(qp: *mut ibv_qp, wr: *mut ibv_recv_wr, bad: *mut *mut ibv_recv_wr) -> c_int {
    record(Call::PostRecv { qp: qp as usize, wr: wr as usize, bad: bad as usize });
    if !wr.is_null() {
        // SAFETY: the caller's work request, with `num_sge` entries.
        let (id, n, a, l) = unsafe {
            let w = &*wr;
            let (a, l) = if w.num_sge > 0 && !w.sg_list.is_null() { ((*w.sg_list).addr, (*w.sg_list).length) } else { (0, 0) };
            (w.wr_id, w.num_sge, a, l)
        };
        with(|w| w.posted_recvs.push((qp as usize, id, n, a, l)));
        if with(|w| w.loopback.is_some()) {
            loop_recv(qp as usize, id, a, l);
            return 0;
        }
    }
    let rc = with(|w| w.post_rc);
    if rc != 0 {
        // SAFETY: `bad` is the caller's out-parameter.
        unsafe { *bad = wr };
    }
    rc
}

unsafe extern "C" fn post_srq_recv(srq: *mut ibv_srq, wr: *mut ibv_recv_wr, bad: *mut *mut ibv_recv_wr) -> c_int {
    record(Call::PostSrqRecv { srq: srq as usize, wr: wr as usize, bad: bad as usize });
    if !wr.is_null() {
        // SAFETY: the caller's work request, with `num_sge` entries.
        let (id, n, a, l) = unsafe {
            let w = &*wr;
            let (a, l) = if w.num_sge > 0 && !w.sg_list.is_null() { ((*w.sg_list).addr, (*w.sg_list).length) } else { (0, 0) };
            (w.wr_id, w.num_sge, a, l)
        };
        with(|w| w.posted_srq_recvs.push((srq as usize, id, n, a, l)));
        if with(|w| w.loopback.is_some()) {
            // Receives of an SRQ serve every QP made with it.
            loop_recv(srq as usize, id, a, l);
            let qps: Vec<usize> = with(|w| w.qp_srq.iter().filter(|(_, s)| **s == srq as usize).map(|(q, _)| *q).collect());
            for q in qps {
                loop_deliver(q);
            }
            return 0;
        }
    }
    let rc = with(|w| w.post_rc);
    if rc != 0 {
        // SAFETY: `bad` is the caller's out-parameter.
        unsafe { *bad = wr };
    }
    rc
}

/// The recording libibverbs.
pub fn verbs_fns() -> VerbsFns {
    VerbsFns {
        get_device_list,
        free_device_list,
        get_device_name,
        open_device,
        close_device,
        query_device,
        query_port,
        query_gid,
        alloc_pd,
        dealloc_pd,
        reg_mr,
        reg_mr_iova2,
        reg_dmabuf_mr: Some(reg_dmabuf_mr),
        dereg_mr,
        create_cq,
        destroy_cq,
        create_comp_channel,
        destroy_comp_channel,
        get_cq_event,
        ack_cq_events,
        create_qp,
        destroy_qp,
        modify_qp,
        create_ah,
        destroy_ah,
        create_srq,
        destroy_srq,
    }
}

/// The recording libefa.
pub fn efa_fns() -> EfaFns {
    EfaFns { query_device: efa_query_device, create_driver_qp: efa_create_driver_qp, create_qp_ex: efa_create_qp_ex }
}

// ---------- librdmacm ----------

/// How the librdmacm stand-in answers: each call that starts something
/// (`rdma_resolve_addr`, `rdma_resolve_route`, `rdma_connect`,
/// `rdma_accept`, `rdma_disconnect`) queues the event a working fabric
/// would, unless `fail` says otherwise.
#[derive(Default)]
pub struct CmScript {
    /// Events waiting on the channel: (event, id, listen id, status,
    /// private data).
    pub queue: std::collections::VecDeque<(u32, usize, usize, c_int, Vec<u8>)>,
    /// `rdma_resolve_addr` answers `ADDR_ERROR`.
    pub unreachable: bool,
    /// `rdma_connect` answers `REJECTED` with this private data.
    pub reject_with: Option<Vec<u8>>,
    /// What the peer's `ESTABLISHED` carries on the active side.
    pub accept_data: Vec<u8>,
    /// Events handed out, with the private data they point at (freed by
    /// `rdma_ack_cm_event`).
    #[allow(clippy::vec_box)]
    live: Vec<(usize, Box<[u8]>)>,
}

fn cm_record(c: CmCall) {
    with(|w| w.cm_calls.push(c));
}

fn cm_queue(event: u32, id: usize, listen_id: usize, data: Vec<u8>) {
    with(|w| w.cm.queue.push_back((event, id, listen_id, 0, data)));
}

/// The librdmacm calls recorded so far, and forgets them.
pub fn take_cm_calls() -> Vec<CmCall> {
    with(|w| std::mem::take(&mut w.cm_calls))
}

/// Queues a `CONNECT_REQUEST` on `listen_id` from a new id (returned),
/// carrying `data`, as a peer's `rdma_connect` would.
///
/// # Safety
/// `listen_id` is a live id of this stand-in (`rdma_create_id`).
pub unsafe fn cm_incoming(listen_id: *mut rdma_cm_id, data: &[u8]) -> *mut rdma_cm_id {
    // SAFETY: the caller's promise.
    let channel = unsafe { (*listen_id).channel };
    let id = Box::into_raw(Box::new(rdma_cm_id { channel, ps: RDMA_PS_TCP, ..Default::default() }));
    with(|w| w.id_channel.insert(id as usize, channel as usize));
    cm_queue(RDMA_CM_EVENT_CONNECT_REQUEST, id as usize, listen_id as usize, data.to_vec());
    id
}

fn family(a: *const libc::sockaddr) -> i32 {
    if a.is_null() {
        return -1;
    }
    // SAFETY: a caller's sockaddr, which starts with its family.
    i32::from(unsafe { (*a).sa_family })
}

unsafe extern "C" fn cm_create_channel() -> *mut rdma_event_channel {
    cm_record(CmCall::CreateChannel);
    // An fd that is never readable (events are handed out on request);
    // under the loopback always readable, so pollers look every time.
    let init = u32::from(with(|w| w.loopback.is_some()));
    // SAFETY: no memory-safety preconditions; closed by destroy.
    let fd = unsafe { libc::eventfd(init, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    Box::into_raw(Box::new(rdma_event_channel { fd }))
}

unsafe extern "C" fn cm_destroy_channel(ch: *mut rdma_event_channel) {
    cm_record(CmCall::DestroyChannel);
    // SAFETY: from `cm_create_channel`, freed once, with its fd.
    let ch = unsafe { Box::from_raw(ch) };
    // SAFETY: the channel's own fd.
    unsafe { libc::close(ch.fd) };
}

unsafe extern "C" fn cm_create_id(ch: *mut rdma_event_channel, id: *mut *mut rdma_cm_id, context: *mut c_void, ps: u32) -> c_int {
    cm_record(CmCall::CreateId { ps });
    let new = Box::into_raw(Box::new(rdma_cm_id { channel: ch, context, ps, ..Default::default() }));
    with(|w| w.id_channel.insert(new as usize, ch as usize));
    // SAFETY: the caller's out-parameter.
    unsafe { *id = new };
    0
}

unsafe extern "C" fn cm_destroy_id(id: *mut rdma_cm_id) -> c_int {
    cm_record(CmCall::DestroyId(id as usize));
    loop_hang_up(id as usize);
    with(|w| {
        if let Some(l) = w.loopback.as_mut() {
            l.listeners.retain(|&x| x != id as usize);
            l.bound.remove(&(id as usize));
            l.dst.remove(&(id as usize));
        }
    });
    // SAFETY: from `cm_create_id` or `cm_incoming`, freed once.
    drop(unsafe { Box::from_raw(id) });
    0
}

unsafe extern "C" fn cm_bind_addr(id: *mut rdma_cm_id, addr: *mut libc::sockaddr) -> c_int {
    cm_record(CmCall::BindAddr { family: family(addr) });
    // SAFETY: the caller's sockaddr of its family.
    let Some(mut b) = (unsafe { sockaddr_bytes(addr) }) else { return 0 };
    if b[2..4] == [0, 0] {
        // Port 0: pick one, as librdmacm does.
        let port = 20000 + (handle() % 20000) as u16;
        b[2..4].copy_from_slice(&port.to_be_bytes());
    }
    // The bound address is the route's source address (its first member).
    // SAFETY: the caller's live id; `route` is plain bytes of ample size.
    unsafe {
        let route = addr_of_mut!((*id).route).cast::<u8>();
        std::ptr::copy_nonoverlapping(b.as_ptr(), route, b.len());
    }
    with(|w| {
        if let Some(l) = w.loopback.as_mut() {
            l.bound.insert(id as usize, b);
        }
    });
    0
}

/// The bytes of a `sockaddr_in` / `sockaddr_in6`.
///
/// # Safety
/// `a` is NULL or a sockaddr of its family's size.
unsafe fn sockaddr_bytes(a: *const libc::sockaddr) -> Option<Vec<u8>> {
    let len = match family(a) {
        libc::AF_INET => 16,
        libc::AF_INET6 => 28,
        _ => return None,
    };
    // SAFETY: the caller's promise.
    Some(unsafe { std::slice::from_raw_parts(a.cast::<u8>(), len) }.to_vec())
}

/// Whether a listener bound at `bound` takes connections to `dst`: same
/// family and port, same address or bound to the unspecified one.
fn listens_at(bound: &[u8], dst: &[u8]) -> bool {
    let (a, p) = if bound.len() == 16 { (4..8, 0..4) } else { (8..24, 0..4) };
    bound.len() == dst.len() && bound[p.clone()] == dst[p] && (bound[a.clone()] == dst[a.clone()] || bound[a].iter().all(|&x| x == 0))
}

unsafe extern "C" fn cm_resolve_addr(id: *mut rdma_cm_id, _src: *mut libc::sockaddr, dst: *mut libc::sockaddr, timeout_ms: c_int) -> c_int {
    cm_record(CmCall::ResolveAddr { family: family(dst), timeout_ms });
    // SAFETY: the caller's sockaddr of its family.
    if let Some(b) = unsafe { sockaddr_bytes(dst) } {
        with(|w| {
            if let Some(l) = w.loopback.as_mut() {
                l.dst.insert(id as usize, b);
            }
        });
    }
    let ev = if with(|w| w.cm.unreachable) { RDMA_CM_EVENT_ADDR_ERROR } else { RDMA_CM_EVENT_ADDR_RESOLVED };
    cm_queue(ev, id as usize, 0, Vec::new());
    0
}

unsafe extern "C" fn cm_resolve_route(id: *mut rdma_cm_id, timeout_ms: c_int) -> c_int {
    cm_record(CmCall::ResolveRoute { timeout_ms });
    cm_queue(RDMA_CM_EVENT_ROUTE_RESOLVED, id as usize, 0, Vec::new());
    0
}

unsafe extern "C" fn cm_create_qp(id: *mut rdma_cm_id, pd: *mut ibv_pd, attr: *mut ibv_qp_init_attr) -> c_int {
    // SAFETY: the caller's id, PD (of `alloc_pd`) and attributes.
    unsafe {
        let a = &*attr;
        cm_record(CmCall::CreateQp { id: id as usize, pd: pd as usize, qp_type: a.qp_type, send_cq: a.send_cq as usize, recv_cq: a.recv_cq as usize });
        let context = (*pd).context;
        let h = handle();
        let qp = Box::into_raw(Box::new(ibv_qp { context, pd, send_cq: a.send_cq, recv_cq: a.recv_cq, srq: a.srq, handle: h, qp_num: 0x100 + h, qp_type: a.qp_type, ..Default::default() }));
        (*id).qp = qp;
        with(|w| {
            if !a.srq.is_null() {
                w.qp_srq.insert(qp as usize, a.srq as usize);
            }
            if let Some(l) = w.loopback.as_mut() {
                l.cqs_of.insert(qp as usize, (a.send_cq as usize, a.recv_cq as usize));
            }
        });
        (*id).verbs = context;
        (*id).pd = pd;
    }
    0
}

unsafe extern "C" fn cm_destroy_qp(id: *mut rdma_cm_id) {
    cm_record(CmCall::DestroyQp(id as usize));
    // SAFETY: the id's QP of `cm_create_qp`.
    let qp = unsafe { (*id).qp } as usize;
    with(|w| w.qp_srq.remove(&qp));
    // SAFETY: the id's QP of `cm_create_qp`, freed once.
    unsafe {
        drop(Box::from_raw((*id).qp));
        (*id).qp = null_mut();
    }
}

/// The private data of connection parameters.
///
/// # Safety
/// `p` is NULL or valid connection parameters.
unsafe fn param_data(p: *const rdma_conn_param) -> (Vec<u8>, u8) {
    if p.is_null() {
        return (Vec::new(), 0);
    }
    // SAFETY: the caller's promise; the data is `private_data_len` bytes.
    unsafe {
        let p = &*p;
        let d = if p.private_data.is_null() { Vec::new() } else { std::slice::from_raw_parts(p.private_data.cast::<u8>(), usize::from(p.private_data_len)).to_vec() };
        (d, p.rnr_retry_count)
    }
}

unsafe extern "C" fn cm_connect(id: *mut rdma_cm_id, param: *mut rdma_conn_param) -> c_int {
    // SAFETY: the caller's parameters.
    let (private_data, rnr_retry_count) = unsafe { param_data(param) };
    cm_record(CmCall::Connect { id: id as usize, private_data: private_data.clone(), rnr_retry_count });
    // The listener bound at the resolved address (the only one, for
    // callers that bound none).
    let target = with(|w| {
        w.loopback.as_ref().map(|l| match (l.dst.get(&(id as usize)), l.listeners.as_slice()) {
            (_, []) => Err(RDMA_CM_EVENT_UNREACHABLE),
            (Some(d), ls) if !l.bound.is_empty() => ls.iter().copied().find(|x| l.bound.get(x).is_some_and(|b| listens_at(b, d))).ok_or(RDMA_CM_EVENT_REJECTED),
            (_, ls) => Ok(ls[0]),
        })
    });
    if let Some(listener) = target {
        let listener = match listener {
            Ok(x) => x,
            Err(ev) => {
                cm_queue(ev, id as usize, 0, Vec::new());
                return 0;
            }
        };
        // SAFETY: a live listening id of this stand-in.
        let req = unsafe { cm_incoming(listener as *mut rdma_cm_id, &private_data) } as usize;
        with(|w| {
            if let Some(l) = w.loopback.as_mut() {
                l.cm_peer.insert(req, id as usize);
                l.cm_peer.insert(id as usize, req);
            }
        });
        return 0;
    }
    match with(|w| w.cm.reject_with.clone()) {
        Some(d) => cm_queue(RDMA_CM_EVENT_REJECTED, id as usize, 0, d),
        None => cm_queue(RDMA_CM_EVENT_ESTABLISHED, id as usize, 0, with(|w| w.cm.accept_data.clone())),
    }
    0
}

unsafe extern "C" fn cm_listen(id: *mut rdma_cm_id, backlog: c_int) -> c_int {
    cm_record(CmCall::Listen { backlog });
    with(|w| {
        if let Some(l) = w.loopback.as_mut() {
            l.listeners.push(id as usize);
        }
    });
    0
}

unsafe extern "C" fn cm_accept(id: *mut rdma_cm_id, param: *mut rdma_conn_param) -> c_int {
    // SAFETY: the caller's parameters.
    let (private_data, _) = unsafe { param_data(param) };
    cm_record(CmCall::Accept { id: id as usize, private_data: private_data.clone() });
    cm_queue(RDMA_CM_EVENT_ESTABLISHED, id as usize, 0, Vec::new());
    let peer = with(|w| w.loopback.as_ref().and_then(|l| l.cm_peer.get(&(id as usize)).copied()));
    if let Some(peer) = peer {
        // SAFETY: both ids are live (the active one waits for this).
        let (a, b) = unsafe { ((*id).qp as usize, (*(peer as *mut rdma_cm_id)).qp as usize) };
        with(|w| {
            if let Some(l) = w.loopback.as_mut() {
                l.qp_peer.insert(a, b);
                l.qp_peer.insert(b, a);
            }
        });
        cm_queue(RDMA_CM_EVENT_ESTABLISHED, peer, 0, private_data);
    }
    0
}

unsafe extern "C" fn cm_reject(id: *mut rdma_cm_id, data: *const c_void, len: u8) -> c_int {
    let private_data = if data.is_null() {
        Vec::new()
    } else {
        // SAFETY: `len` readable bytes (the caller's).
        unsafe { std::slice::from_raw_parts(data.cast::<u8>(), usize::from(len)) }.to_vec()
    };
    cm_record(CmCall::Reject { id: id as usize, private_data: private_data.clone() });
    // On the loopback the connecting id hears `REJECTED` with the data.
    let peer = with(|w| {
        let l = w.loopback.as_mut()?;
        let p = l.cm_peer.remove(&(id as usize))?;
        l.cm_peer.remove(&p);
        Some(p)
    });
    if let Some(p) = peer {
        cm_queue(RDMA_CM_EVENT_REJECTED, p, 0, private_data);
    }
    0
}

unsafe extern "C" fn cm_disconnect(id: *mut rdma_cm_id) -> c_int {
    cm_record(CmCall::Disconnect(id as usize));
    cm_queue(RDMA_CM_EVENT_DISCONNECTED, id as usize, 0, Vec::new());
    loop_hang_up(id as usize);
    0
}

unsafe extern "C" fn cm_get_event(ch: *mut rdma_event_channel, out: *mut *mut rdma_cm_event) -> c_int {
    cm_record(CmCall::GetEvent);
    // The first event of an id on this channel (ids of unknown channel:
    // any channel, as before ids were tracked).
    let next = with(|w| {
        let ch = ch as usize;
        let at = w.cm.queue.iter().position(|e| w.id_channel.get(&e.1).map_or(true, |&c| c == ch))?;
        w.cm.queue.remove(at)
    });
    let Some((event, id, listen_id, status, data)) = next else {
        set_errno(libc::EAGAIN);
        return -1;
    };
    let data: Box<[u8]> = data.into_boxed_slice();
    let conn = rdma_conn_param {
        private_data: if data.is_empty() { std::ptr::null() } else { data.as_ptr().cast() },
        private_data_len: data.len() as u8,
        ..Default::default()
    };
    let ev = Box::into_raw(Box::new(rdma_cm_event {
        id: id as *mut rdma_cm_id,
        listen_id: listen_id as *mut rdma_cm_id,
        event,
        status,
        param: rdma_cm_event_param { conn },
    }));
    with(|w| w.cm.live.push((ev as usize, data)));
    // SAFETY: the caller's out-parameter.
    unsafe { *out = ev };
    0
}

unsafe extern "C" fn cm_ack_event(ev: *mut rdma_cm_event) -> c_int {
    cm_record(CmCall::AckEvent);
    with(|w| w.cm.live.retain(|(e, _)| *e != ev as usize));
    // SAFETY: from `cm_get_event`, freed once.
    drop(unsafe { Box::from_raw(ev) });
    0
}

/// The recording librdmacm.
pub fn rdmacm_fns() -> crate::rdmacm::RdmaCmFns {
    crate::rdmacm::RdmaCmFns {
        create_event_channel: cm_create_channel,
        destroy_event_channel: cm_destroy_channel,
        create_id: cm_create_id,
        destroy_id: cm_destroy_id,
        bind_addr: cm_bind_addr,
        resolve_addr: cm_resolve_addr,
        resolve_route: cm_resolve_route,
        create_qp: cm_create_qp,
        destroy_qp: cm_destroy_qp,
        connect: cm_connect,
        listen: cm_listen,
        accept: cm_accept,
        reject: cm_reject,
        disconnect: cm_disconnect,
        get_cm_event: cm_get_event,
        ack_cm_event: cm_ack_event,
    }
}

// ---------- a loopback fabric ----------

/// RC queue pairs of this thread (and of threads it lends its world to,
/// `share_with_threads`) connected to each other through the librdmacm
/// stand-in (`rdma_connect` reaches the listening id bound at the address
/// it resolved as a `CONNECT_REQUEST`, or is rejected when none is bound
/// there; `rdma_accept` establishes both sides). Channels made while the
/// loopback is on have descriptors that are always readable, so callers
/// that wait for readiness look every time. A send is
/// copied into the peer's oldest posted receive, completing on both
/// sides; without one it waits, as an RC sender retries on
/// receiver-not-ready, until the peer posts one. `rdma_disconnect` or
/// destroying a connected id gives the peer `DISCONNECTED`. Between
/// connected RC QPs also: `SEND_WITH_IMM` (the receive completion carries
/// `IBV_WC_WITH_IMM` and the immediate), RDMA writes (copied to
/// `remote_addr` at once; `RDMA_WRITE_WITH_IMM` then consumes a posted
/// receive at the peer, completing it as `IBV_WC_RECV_RDMA_WITH_IMM` with
/// the length written), RDMA reads (copied from `remote_addr` at once), and
/// the 8-byte atomics (`ATOMIC_CMP_AND_SWP`, `ATOMIC_FETCH_AND_ADD`: the
/// old value into the local entry). Remote keys are recorded (`sent`), not
/// checked: the addresses are this process's. No loss; completions in
/// order.
///
/// UD and SRD QPs (`IBV_QPT_UD`, `IBV_QPT_DRIVER`) made while the loopback
/// is on join it at once: a send goes to the QP numbered `wr.ud.remote_qpn`
/// (a send completion with status 12, `IBV_WC_RETRY_EXC_ERR`, when there is
/// none, or when it is destroyed before the packet lands); its receive
/// completion carries the sender's QP number as `src_qp` and, as `slid`,
/// the number of the receiver's address handle for the sender's GID
/// (0xffff without one). Sends wait for a posted receive, as SRD retries
/// on receiver-not-ready.
#[derive(Default)]
pub struct Loopback {
    listeners: Vec<usize>,
    cm_peer: HashMap<usize, usize>,
    qp_peer: HashMap<usize, usize>,
    /// QP -> (send CQ, receive CQ)
    cqs_of: HashMap<usize, (usize, usize)>,
    /// CQ -> completions waiting to be polled.
    cqs: HashMap<usize, std::collections::VecDeque<ibv_wc>>,
    /// QP -> posted receives (wr_id, address, length).
    rq: HashMap<usize, std::collections::VecDeque<(u64, u64, u32)>>,
    /// QP -> sends waiting for a receive there (source QP, wr_id, bytes,
    /// and for datagram QPs the source's QP number and GID).
    waiting: HashMap<usize, std::collections::VecDeque<Datagram>>,
    /// Datagram QPs -> (QP number, GID).
    ud: HashMap<usize, (u32, [u8; 16])>,
    /// Bound ids -> their sockaddr bytes (`rdma_bind_addr`).
    bound: HashMap<usize, Vec<u8>>,
    /// Connecting ids -> the sockaddr bytes they resolved.
    dst: HashMap<usize, Vec<u8>>,
}

/// A send waiting for a receive: source QP, wr_id, bytes, and for a
/// datagram QP the source's QP number and GID.
/// Last: the immediate data (network order) and whether it came with an
/// RDMA write (whose bytes are already placed and whose sender has its
/// completion).
type Datagram = (usize, u64, Vec<u8>, Option<(u32, [u8; 16])>, Option<(u32, bool)>);

/// IBV_WC_COMP_SWAP, IBV_WC_FETCH_ADD
const WC_COMP_SWAP: u32 = 3;
const WC_FETCH_ADD: u32 = 4;

/// The RDMA and atomic operations of `wr` between connected RC QPs (see
/// `Loopback`); false for sends.
///
/// # Safety
/// The memory `wr`'s list and remote address name is this process's,
/// readable and writable.
unsafe fn loop_rdma(src: usize, wr: &ibv_send_wr, bytes: &[u8]) -> bool {
    // SAFETY: `wr.rdma` and `wr.atomic` are plain integers.
    let (raddr, atomic) = unsafe { (wr.wr.rdma.remote_addr, wr.wr.atomic) };
    let done = |opcode: u32, len: usize| loop_complete(src, true, ibv_wc { wr_id: wr.wr_id, status: IBV_WC_SUCCESS, opcode, byte_len: len as u32, ..Default::default() });
    match wr.opcode {
        IBV_WR_RDMA_WRITE | IBV_WR_RDMA_WRITE_WITH_IMM => {
            // SAFETY: the caller's promise.
            unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), raddr as *mut u8, bytes.len()) };
            done(IBV_WC_RDMA_WRITE, bytes.len());
            if wr.opcode == IBV_WR_RDMA_WRITE_WITH_IMM {
                let Some(dst) = with(|w| w.loopback.as_ref().and_then(|l| l.qp_peer.get(&src).copied())) else { return true };
                // SAFETY: `imm_data` is a plain integer.
                let imm = unsafe { wr.imm.imm_data };
                with(|w| {
                    if let Some(l) = w.loopback.as_mut() {
                        l.waiting.entry(dst).or_default().push_back((src, wr.wr_id, vec![0; bytes.len()], None, Some((imm, true))));
                    }
                });
                loop_deliver(dst);
            }
            true
        }
        IBV_WR_RDMA_READ => {
            let mut at = raddr;
            let mut n = 0;
            for i in 0..usize::try_from(wr.num_sge).unwrap_or(0) {
                // SAFETY: the caller's promise.
                unsafe {
                    let g = *wr.sg_list.add(i);
                    std::ptr::copy_nonoverlapping(at as *const u8, g.addr as *mut u8, g.length as usize);
                    at += u64::from(g.length);
                    n += g.length as usize;
                }
            }
            done(IBV_WC_RDMA_READ, n);
            true
        }
        IBV_WR_ATOMIC_CMP_AND_SWP | IBV_WR_ATOMIC_FETCH_AND_ADD => {
            // SAFETY: the caller's promise: 8 bytes at the remote address
            // and in the first entry.
            unsafe {
                let p = atomic.remote_addr as *mut u64;
                let old = p.read_unaligned();
                let new = if wr.opcode == IBV_WR_ATOMIC_CMP_AND_SWP {
                    if old == atomic.compare_add { atomic.swap } else { old }
                } else {
                    old.wrapping_add(atomic.compare_add)
                };
                p.write_unaligned(new);
                if wr.num_sge > 0 {
                    ((*wr.sg_list).addr as *mut u64).write_unaligned(old);
                }
            }
            done(if wr.opcode == IBV_WR_ATOMIC_CMP_AND_SWP { WC_COMP_SWAP } else { WC_FETCH_ADD }, 8);
            true
        }
        _ => false,
    }
}

/// IBV_WC_RETRY_EXC_ERR
const WC_RETRY_EXC_ERR: u32 = 12;

/// Sends `wr` (a `SEND`) from `src` across the loop.
///
/// # Safety
/// The memory `wr`'s list names is readable.
unsafe fn loop_send(src: usize, wr: &ibv_send_wr) {
    let mut bytes = Vec::new();
    for i in 0..usize::try_from(wr.num_sge).unwrap_or(0) {
        // SAFETY: the list has `num_sge` entries naming readable memory.
        unsafe {
            let g = *wr.sg_list.add(i);
            bytes.extend_from_slice(std::slice::from_raw_parts(g.addr as *const u8, g.length as usize));
        }
    }
    let ud = with(|w| w.loopback.as_ref().and_then(|l| l.ud.get(&src).copied()));
    if let Some(me) = ud {
        // SAFETY: `wr.ud` is what a datagram QP's send carries.
        let qpn = unsafe { wr.wr.ud.remote_qpn };
        let dst = with(|w| w.loopback.as_ref().and_then(|l| l.ud.iter().find(|(_, v)| v.0 == qpn).map(|(k, _)| *k)));
        let Some(dst) = dst else {
            loop_complete(src, true, ibv_wc { wr_id: wr.wr_id, status: WC_RETRY_EXC_ERR, opcode: IBV_WC_SEND, ..Default::default() });
            return;
        };
        with(|w| {
            if let Some(l) = w.loopback.as_mut() {
                l.waiting.entry(dst).or_default().push_back((src, wr.wr_id, bytes, Some(me), None));
            }
        });
        loop_deliver(dst);
        return;
    }
    let Some(dst) = with(|w| w.loopback.as_ref().and_then(|l| l.qp_peer.get(&src).copied())) else {
        // Not connected: the QP is in error.
        loop_complete(src, true, ibv_wc { wr_id: wr.wr_id, status: IBV_WC_WR_FLUSH_ERR, opcode: IBV_WC_SEND, ..Default::default() });
        return;
    };
    // SAFETY: the caller's promise.
    if unsafe { loop_rdma(src, wr, &bytes) } {
        return;
    }
    // SAFETY: `imm_data` is a plain integer.
    let imm_data = unsafe { wr.imm.imm_data };
    let imm = (wr.opcode == IBV_WR_SEND_WITH_IMM).then_some((imm_data, false));
    with(|w| {
        if let Some(l) = w.loopback.as_mut() {
            l.waiting.entry(dst).or_default().push_back((src, wr.wr_id, bytes, None, imm));
        }
    });
    loop_deliver(dst);
}

fn loop_recv(qp: usize, wr_id: u64, addr: u64, len: u32) {
    with(|w| {
        if let Some(l) = w.loopback.as_mut() {
            l.rq.entry(qp).or_default().push_back((wr_id, addr, len));
        }
    });
    loop_deliver(qp);
}

fn loop_complete(qp: usize, send: bool, wc: ibv_wc) {
    let cq = with(|w| {
        let l = w.loopback.as_mut()?;
        let &(s, r) = l.cqs_of.get(&qp)?;
        let cq = if send { s } else { r };
        l.cqs.entry(cq).or_default().push_back(wc);
        (w.comp_events && w.armed.remove(&cq)).then_some(cq)
    });
    // An armed CQ: one event on its channel.
    // SAFETY: a live CQ of `create_cq` (its QP completes into it).
    let Some((cq, ch)) = cq.map(|c| (c, unsafe { (*(c as *mut ibv_cq)).channel })) else { return };
    if ch.is_null() {
        return;
    }
    with(|w| w.cq_events.entry(ch as usize).or_default().push_back(cq));
    let one = 1u64;
    // SAFETY: the channel's own eventfd; 8 bytes from `one`.
    unsafe { libc::write((*ch).fd, (&one as *const u64).cast(), 8) };
}

/// Matches the sends waiting for `dst` with its posted receives.
fn loop_deliver(dst: usize) {
    // A QP made with an SRQ takes its receives from the SRQ.
    let rq = with(|w| w.qp_srq.get(&dst).copied()).unwrap_or(dst);
    loop {
        let next = with(|w| {
            let l = w.loopback.as_mut()?;
            if l.rq.get(&rq).map_or(true, |q| q.is_empty()) || l.waiting.get(&dst).map_or(true, |q| q.is_empty()) {
                return None;
            }
            let r = l.rq.get_mut(&rq)?.pop_front()?;
            let s = l.waiting.get_mut(&dst)?.pop_front()?;
            Some((r, s))
        });
        let Some(((rid, addr, len), (src, sid, bytes, from, imm))) = next else { return };
        let write = imm.is_some_and(|i| i.1);
        let fits = write || bytes.len() <= len as usize;
        if fits && !write {
            // SAFETY: a posted receive names writable memory of `len` bytes
            // (the poster's promise).
            unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), addr as *mut u8, bytes.len()) };
        }
        let (rs, ss) = if fits { (IBV_WC_SUCCESS, IBV_WC_SUCCESS) } else { (1, 9) };
        let mut wc = ibv_wc { wr_id: rid, status: rs, opcode: if write { IBV_WC_RECV_RDMA_WITH_IMM } else { IBV_WC_RECV }, byte_len: bytes.len() as u32, ..Default::default() };
        if let Some((data, _)) = imm {
            wc.wc_flags = IBV_WC_WITH_IMM;
            wc.imm = ibv_wc_imm { imm_data: data };
        }
        if let Some((qpn, gid)) = from {
            let dst_ctx = with(|w| w.loopback.as_ref().and_then(|l| l.ud.get(&dst).copied()));
            // The receiver's QP is live (it posted the receive); its context
            // is the one its address handles were made on.
            // SAFETY: a live QP of `new_qp`.
            let ctx = unsafe { (*(dst as *mut ibv_qp)).context } as usize;
            wc.src_qp = qpn;
            wc.qp_num = dst_ctx.map_or(0, |d| d.0);
            wc.slid = with(|w| w.ahs.values().find(|a| a.ctx == ctx && a.dgid == gid).map_or(0xffff, |a| a.ahn));
        }
        loop_complete(dst, false, wc);
        if !write {
            loop_complete(src, true, ibv_wc { wr_id: sid, status: ss, opcode: IBV_WC_SEND, ..Default::default() });
        }
    }
}

/// The connection of `id` ends: its peer gets `DISCONNECTED`.
fn loop_hang_up(id: usize) {
    let peer = with(|w| {
        let l = w.loopback.as_mut()?;
        let p = l.cm_peer.remove(&id)?;
        l.cm_peer.remove(&p);
        Some(p)
    });
    if let Some(p) = peer {
        cm_queue(RDMA_CM_EVENT_DISCONNECTED, p, 0, Vec::new());
    }
}
