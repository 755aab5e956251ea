//! Handles for the objects below a fabric of a built-in provider: domain
//! (`fid_domain` with `fi_ops_domain` and `fi_ops_mr`), CQ, AV, MR and the
//! fabric-level EQ. Same pattern as `objects.rs`: `#[repr(C)]`, C handle
//! first, static ops tables, trampolines that cast the fid back after
//! checking that its ops table is ours.

use crate::objects::{FabricHandle, RefCount};
use libc::{c_char, c_int, c_void};
use rfabric_core::abi::*;
use rfabric_core::error::{Error, EINVAL};
use rfabric_core::objects::cq::{encode_err, CqAttr, ErrDataLoc, ERR_ENTRY_SIZE};
use rfabric_core::objects::eq::Eq;
use rfabric_core::objects::wait::Locked;
use rfabric_core::provider::{AddressVector, AvAttr, CompletionQueue, Counter, Domain, MrReq};
use std::sync::Arc;

pub(crate) fn rc(r: Result<(), Error>) -> c_int {
    match r {
        Ok(()) => 0,
        Err(e) => e.to_c(),
    }
}

/// Copies `s` into `buf` (NUL-terminated, truncated to `len`).
///
/// # Safety
/// `buf` is NULL or writable for `len` bytes.
pub(crate) unsafe fn put_cstr(buf: *mut c_char, len: usize, s: &str) {
    if buf.is_null() || len == 0 {
        return;
    }
    let n = s.len().min(len - 1);
    // SAFETY: buf holds len >= n + 1 bytes.
    unsafe {
        std::ptr::copy_nonoverlapping(s.as_ptr(), buf as *mut u8, n);
        *buf.add(n) = 0;
    }
}

/// The handle behind `f` if its ops table is `ops` (so a foreign or
/// mismatched fid is refused instead of being cast).
///
/// # Safety
/// `f` is NULL or points to a readable `struct fid`.
pub(crate) unsafe fn ours<'a, T>(f: *const fid, ops: &'static fi_ops) -> Option<&'a T> {
    if f.is_null() {
        return None;
    }
    // SAFETY: f points to a fid (caller).
    let o = unsafe { (*f).ops } as *const fi_ops;
    if !std::ptr::eq(o, ops) {
        return None;
    }
    // SAFETY: only our handles carry this ops table, and they start with
    // the fid.
    Some(unsafe { &*(f as *const T) })
}

enosys_fn!(enosys_bind(*mut fid, *mut fid, u64) -> c_int);
enosys_fn!(enosys_control(*mut fid, c_int, *mut c_void) -> c_int);
enosys_fn!(enosys_ops_open(*mut fid, *const c_char, u64, *mut *mut c_void, *mut c_void) -> c_int);
enosys_fn!(enosys_ops_set(*mut fid, *const c_char, u64, *mut c_void, *mut c_void) -> c_int);

// ------------------------------------------------------------------ domain

#[repr(C)]
pub(crate) struct DomainHandle {
    pub(crate) fid: fid_domain,
    pub(crate) obj: Box<dyn Domain>,
    pub(crate) fabric: *const FabricHandle,
    pub(crate) children: RefCount,
    pub(crate) api_version: u32,
    /// `domain_attr.mr_mode` of the info the domain was opened with.
    pub(crate) mr_mode: u64,
    /// Live `FI_MR_DMABUF` registrations: while there are any, data
    /// operations translate addresses through their descriptors.
    pub(crate) dmabuf_regs: std::sync::atomic::AtomicUsize,
}

impl DomainHandle {
    /// Whether data operations must look at their descriptors.
    #[inline]
    pub(crate) fn desc_checks(&self) -> bool {
        self.mr_mode & FI_MR_LOCAL != 0 || self.dmabuf_regs.load(std::sync::atomic::Ordering::Relaxed) > 0
    }
}

/// The descriptors passed with a data operation.
#[derive(Clone, Copy)]
pub(crate) enum Descs {
    One(*mut c_void),
    /// One per iov (the array may be NULL).
    Many(*mut *mut c_void),
}

/// Applies `descs` to `iov`: with `FI_MR_LOCAL` every non-empty buffer
/// needs a descriptor from `fi_mr_desc` of this domain (`need`: false for
/// injects); a descriptor of an `FI_MR_DMABUF` registration translates the
/// buffer from the registration's `base_addr` space to the provider's CPU
/// mapping of the dma-buf.
///
/// # Safety
/// `descs` holds `iov.len()` entries (Many) or one (One); each non-NULL
/// descriptor is a value from `fi_mr_desc` (read only while
/// [`DomainHandle::desc_checks`] holds).
pub(crate) unsafe fn apply_descs(d: &DomainHandle, iov: &mut [rfabric_core::provider::Iov], descs: Descs, need: bool) -> Result<(), Error> {
    let local = d.mr_mode & FI_MR_LOCAL != 0;
    for (i, v) in iov.iter_mut().enumerate() {
        let desc = match descs {
            Descs::One(p) if i == 0 => p,
            Descs::One(_) => std::ptr::null_mut(),
            Descs::Many(a) if a.is_null() => std::ptr::null_mut(),
            // SAFETY: the array holds iov.len() entries (caller).
            Descs::Many(a) => unsafe { *a.add(i) },
        };
        if desc.is_null() {
            if local && need && v.len > 0 {
                return Err(rfabric_core::error::EINVAL);
            }
            continue;
        }
        // SAFETY: desc is a descriptor value; ours() compares its ops table
        // before using it as an MrHandle.
        let Some(m) = (unsafe { ours::<MrHandle>(desc as *const fid, &MR_FI_OPS) }) else {
            if local {
                return Err(rfabric_core::error::EINVAL);
            }
            continue;
        };
        if local && !std::ptr::eq(m.domain, d) {
            return Err(rfabric_core::error::EINVAL);
        }
        if let Some(map) = m.dmabuf.as_ref() {
            let off = v.base.wrapping_sub(map.base_addr);
            if v.base >= map.base_addr && off <= map.len && v.len <= map.len - off {
                v.base = map.data + off;
            }
        }
    }
    Ok(())
}

unsafe extern "C" fn domain_close(f: *mut fid) -> c_int {
    guard!(-FI_EOTHER, {
        // SAFETY: f checked against our ops table.
        let Some(h) = (unsafe { ours::<DomainHandle>(f, &DOMAIN_FI_OPS) }) else { return -FI_EINVAL };
        if h.children.busy() {
            return -FI_EBUSY;
        }
        // SAFETY: the fabric outlives its domains (its refcount).
        unsafe { (*h.fabric).children.put() };
        // SAFETY: created by Box::into_raw in publish_domain; closed once.
        drop(unsafe { Box::from_raw(f as *mut DomainHandle) });
        0
    })
}

unsafe extern "C" fn obj_tostr(f: *const fid, buf: *mut c_char, len: usize) -> c_int {
    guard!(-FI_EOTHER, {
        null_check!(f, buf);
        // SAFETY: f is a fid.
        let class = unsafe { (*f).fclass };
        // SAFETY: buf holds len bytes.
        unsafe { put_cstr(buf, len, &format!("fid class {class}")) };
        0
    })
}

unsafe extern "C" fn domain_cq_open(d: *mut fid_domain, a: *mut fi_cq_attr, cq: *mut *mut fid_cq, ctx: *mut c_void) -> c_int {
    guard!(-FI_EOTHER, {
        null_check!(a, cq);
        // SAFETY: checked against our ops table.
        let Some(h) = (unsafe { ours::<DomainHandle>(d as *const fid, &DOMAIN_FI_OPS) }) else { return -FI_EINVAL };
        // SAFETY: a non-NULL; fields read one by one (a 1.x caller's
        // struct ends before xpu_ctx).
        let (size, flags, format, wait_obj, wait_set) = unsafe {
            (
                std::ptr::addr_of!((*a).size).read(),
                std::ptr::addr_of!((*a).flags).read(),
                std::ptr::addr_of!((*a).format).read(),
                std::ptr::addr_of!((*a).wait_obj).read(),
                std::ptr::addr_of!((*a).wait_set).read(),
            )
        };
        if !wait_set.is_null() {
            return -FI_ENOSYS;
        }
        // FI_AFFINITY: signaling_vector is valid (and unused here).
        if flags & !(FI_AFFINITY | FI_XPU) != 0 {
            rfabric_core::fi_warn!("shm", FI_LOG_CQ, "fi_cq_open: unknown flags {:#x} in fi_cq_attr", flags & !(FI_AFFINITY | FI_XPU));
            return -FI_EBADFLAGS;
        }
        // SAFETY: a is the caller's fi_cq_attr, of its API version's shape.
        let xctx = match crate::xpu::requested(flags, unsafe { crate::xpu::attr_ctx(std::ptr::addr_of!((*a).xpu_ctx), h.api_version) }, "fi_cq_open") {
            Ok(c) => c,
            Err(e) => return e,
        };
        let attr = CqAttr { size, format: format as u32, wait_obj: wait_obj as u32 };
        match h.obj.cq_open(&attr) {
            Ok(obj) => {
                h.children.get();
                let ch = Box::new(CqHandle {
                    fid: fid_cq {
                        fid: fid { fclass: FI_CLASS_CQ, context: ctx, ops: &CQ_FI_OPS as *const fi_ops as *mut fi_ops },
                        ops: &CQ_OPS as *const fi_ops_cq as *mut fi_ops_cq,
                    },
                    obj,
                    domain: h,
                    refs: RefCount::default(),
                    api_version: h.api_version,
                });
                let p = Box::into_raw(ch);
                crate::xpu::cq_opened(p as usize, xctx, size);
                // SAFETY: out pointer non-NULL.
                unsafe { *cq = p as *mut fid_cq };
                0
            }
            Err(e) => e.to_c(),
        }
    })
}

unsafe extern "C" fn domain_av_open(d: *mut fid_domain, a: *mut fi_av_attr, av: *mut *mut fid_av, ctx: *mut c_void) -> c_int {
    guard!(-FI_EOTHER, {
        null_check!(a, av);
        // SAFETY: checked against our ops table.
        let Some(h) = (unsafe { ours::<DomainHandle>(d as *const fid, &DOMAIN_FI_OPS) }) else { return -FI_EINVAL };
        // SAFETY: a non-NULL.
        let a = unsafe { &*a };
        if !a.name.is_null() {
            // Named (shared) AVs are not supported.
            return -FI_ENOSYS;
        }
        let attr = AvAttr { kind: a.r#type as u32, count: a.count, flags: a.flags };
        match h.obj.av_open(&attr) {
            Ok(obj) => {
                h.children.get();
                let ah = Box::new(AvHandle {
                    fid: fid_av {
                        fid: fid { fclass: FI_CLASS_AV, context: ctx, ops: &AV_FI_OPS as *const fi_ops as *mut fi_ops },
                        ops: &AV_OPS as *const fi_ops_av as *mut fi_ops_av,
                    },
                    obj,
                    domain: h,
                    refs: RefCount::default(),
                });
                // SAFETY: out pointer non-NULL.
                unsafe { *av = Box::into_raw(ah) as *mut fid_av };
                0
            }
            Err(e) => e.to_c(),
        }
    })
}

unsafe extern "C" fn domain_endpoint(d: *mut fid_domain, i: *mut fi_info, ep: *mut *mut fid_ep, ctx: *mut c_void) -> c_int {
    // SAFETY: the same contract.
    unsafe { open_endpoint(d, i, ep, 0, ctx) }
}

/// `fi_endpoint` (`flags` 0) and `fi_endpoint2`. The one flag known is
/// `FI_XPU`: an XPU endpoint of the context in `info->ep_attr->xpu_ctx`
/// (which alone asks for one too, see `rfabric_core::xpu::requested`).
///
/// # Safety
/// As `fi_endpoint`: `i` a valid `fi_info`, `ep` writable.
unsafe fn open_endpoint(d: *mut fid_domain, i: *mut fi_info, ep: *mut *mut fid_ep, flags: u64, ctx: *mut c_void) -> c_int {
    guard!(-FI_EOTHER, {
        if flags & !FI_XPU != 0 {
            rfabric_core::fi_warn!("shm", FI_LOG_EP_CTRL, "fi_endpoint2: unknown flags {:#x}", flags & !FI_XPU);
            return -FI_EBADFLAGS;
        }
        null_check!(i, ep);
        // SAFETY: checked against our ops table.
        let Some(h) = (unsafe { ours::<DomainHandle>(d as *const fid, &DOMAIN_FI_OPS) }) else { return -FI_EINVAL };
        // SAFETY: i is the caller's fi_info.
        let info = match unsafe { crate::getinfo::info_from_c(i) } {
            Ok(x) => x,
            Err(e) => return e.to_c(),
        };
        let xctx = match crate::xpu::requested(flags, crate::xpu::info_ctx(&info), "fi_endpoint2") {
            Ok(c) => c,
            Err(e) => return e,
        };
        match h.obj.endpoint(&info) {
            Ok(obj) => {
                // SAFETY: ep non-NULL; h outlives the endpoint (refcount).
                let op_flags = (info.tx_attr.map_or(0, |t| t.op_flags), info.rx_attr.map_or(0, |r| r.op_flags));
                let iov_limits = (info.tx_attr.map_or(0, |t| t.iov_limit), info.rx_attr.map_or(0, |r| r.iov_limit));
                let r = unsafe { crate::endpoint::publish_ep(obj, h, op_flags, iov_limits, ctx, ep) };
                if r == 0 {
                    // SAFETY: ep was just written.
                    crate::xpu::ep_opened(unsafe { *ep } as usize, xctx);
                }
                r
            }
            Err(e) => e.to_c(),
        }
    })
}

unsafe extern "C" fn domain_endpoint2(d: *mut fid_domain, i: *mut fi_info, ep: *mut *mut fid_ep, fl: u64, ctx: *mut c_void) -> c_int {
    // SAFETY: same contract as fi_endpoint.
    unsafe { open_endpoint(d, i, ep, fl, ctx) }
}

enosys_fn!(domain_scalable_ep(*mut fid_domain, *mut fi_info, *mut *mut fid_ep, *mut c_void) -> c_int);
enosys_fn!(domain_poll_open(*mut fid_domain, *mut fi_poll_attr, *mut *mut fid_poll) -> c_int);
enosys_fn!(domain_stx_ctx(*mut fid_domain, *mut fi_tx_attr, *mut *mut fid_stx, *mut c_void) -> c_int);
enosys_fn!(domain_srx_ctx(*mut fid_domain, *mut fi_rx_attr, *mut *mut fid_ep, *mut c_void) -> c_int);
/// `fi_query_atomic`: flags `FI_FETCH_ATOMIC` or `FI_COMPARE_ATOMIC` (not
/// both) select the call family; none means the base atomics. Unknown flags
/// `-FI_EBADFLAGS`; an unsupported combination `-FI_EOPNOTSUPP`.
unsafe extern "C" fn domain_query_atomic(f: *mut fid_domain, dt: fi_datatype, op: fi_op, attr: *mut fi_atomic_attr, flags: u64) -> c_int {
    guard!(-FI_EOTHER, {
        null_check!(attr);
        // SAFETY: checked against our ops table.
        let Some(d) = (unsafe { ours::<DomainHandle>(f as *const fid, &DOMAIN_FI_OPS) }) else { return -FI_EINVAL };
        let kind = match flags {
            0 => rfabric_core::provider::AtomicKind::Write,
            FI_FETCH_ATOMIC => rfabric_core::provider::AtomicKind::Fetch,
            FI_COMPARE_ATOMIC => rfabric_core::provider::AtomicKind::Compare,
            x if x & FI_FETCH_ATOMIC != 0 && x & FI_COMPARE_ATOMIC != 0 => return -FI_EINVAL,
            _ => return -FI_EBADFLAGS,
        };
        match d.obj.query_atomic(kind, op, dt) {
            Ok((count, size)) => {
                // SAFETY: attr non-NULL.
                unsafe { *attr = fi_atomic_attr { count, size } };
                0
            }
            Err(e) => e.to_c(),
        }
    })
}
enosys_fn!(domain_query_collective(*mut fid_domain, fi_collective_op, *mut fi_collective_attr, u64) -> c_int);
use crate::xpu::domain_xpu_ctx;

pub(crate) static DOMAIN_FI_OPS: fi_ops = fi_ops {
    size: std::mem::size_of::<fi_ops>(),
    close: Some(domain_close),
    bind: Some(enosys_bind),
    control: Some(enosys_control),
    ops_open: Some(enosys_ops_open),
    tostr: Some(obj_tostr),
    ops_set: Some(enosys_ops_set),
};

static DOMAIN_OPS: fi_ops_domain = fi_ops_domain {
    size: std::mem::size_of::<fi_ops_domain>(),
    av_open: Some(domain_av_open),
    cq_open: Some(domain_cq_open),
    endpoint: Some(domain_endpoint),
    scalable_ep: Some(domain_scalable_ep),
    cntr_open: Some(domain_cntr_open),
    poll_open: Some(domain_poll_open),
    stx_ctx: Some(domain_stx_ctx),
    srx_ctx: Some(domain_srx_ctx),
    query_atomic: Some(domain_query_atomic),
    query_collective: Some(domain_query_collective),
    endpoint2: Some(domain_endpoint2),
    xpu_ctx: Some(domain_xpu_ctx),
};

/// # Safety
/// `out` is writable; `fabric` stays alive while the domain lives.
pub(crate) unsafe fn publish_domain(obj: Box<dyn Domain>, fabric: &FabricHandle, mr_mode: u64, context: *mut c_void, out: *mut *mut fid_domain) -> c_int {
    fabric.children.get();
    let h = Box::new(DomainHandle {
        fid: fid_domain {
            fid: fid { fclass: FI_CLASS_DOMAIN, context, ops: &DOMAIN_FI_OPS as *const fi_ops as *mut fi_ops },
            ops: &DOMAIN_OPS as *const fi_ops_domain as *mut fi_ops_domain,
            mr: &MR_OPS as *const fi_ops_mr as *mut fi_ops_mr,
        },
        obj,
        fabric,
        children: RefCount::default(),
        api_version: fabric.fid.api_version,
        mr_mode,
        dmabuf_regs: std::sync::atomic::AtomicUsize::new(0),
    });
    // SAFETY: caller's out pointer.
    unsafe { *out = Box::into_raw(h) as *mut fid_domain };
    0
}

// ------------------------------------------------------------------ MR

#[repr(C)]
pub(crate) struct MrHandle {
    fid: fid_mr,
    domain: *const DomainHandle,
    /// The CPU mapping of an `FI_MR_DMABUF` registration.
    dmabuf: Option<DmabufMap>,
}

/// A dma-buf fd mapped for CPU access (`mmap(MAP_SHARED)` at the fd's
/// offset, rounded down to a page); unmapped when the MR closes.
pub(crate) struct DmabufMap {
    map: usize,
    map_len: usize,
    /// Where the registered bytes start in our mapping.
    data: usize,
    len: usize,
    /// The application's address of the first byte (`fi_mr_dmabuf.base_addr`).
    base_addr: usize,
}

impl DmabufMap {
    fn new(b: &fi_mr_dmabuf) -> Result<DmabufMap, Error> {
        // SAFETY: sysconf has no memory-safety preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as u64;
        let aligned = b.offset & !(page - 1);
        let delta = (b.offset - aligned) as usize;
        let map_len = b.len.checked_add(delta).ok_or(rfabric_core::error::EINVAL)?;
        if b.fd < 0 || b.len == 0 || libc::off_t::try_from(aligned).is_err() {
            rfabric_core::fi_warn!("core", FI_LOG_MR, "dma-buf registration refused: fd {} len {} offset {}", b.fd, b.len, b.offset);
            return Err(rfabric_core::error::EINVAL);
        }
        // SAFETY: a fresh shared mapping chosen by the kernel; nothing of
        // ours is replaced. Failure is checked below.
        let p = unsafe {
            libc::mmap(std::ptr::null_mut(), map_len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, b.fd, aligned as libc::off_t)
        };
        if p == libc::MAP_FAILED {
            let errno = std::io::Error::last_os_error();
            rfabric_core::fi_warn!("core", FI_LOG_MR, "dma-buf fd {} cannot be mapped for CPU access (offset {}, len {}): {}", b.fd, b.offset, b.len, errno);
            return Err(rfabric_core::error::EINVAL);
        }
        Ok(DmabufMap { map: p as usize, map_len, data: p as usize + delta, len: b.len, base_addr: b.base_addr as usize })
    }
}

impl Drop for DmabufMap {
    fn drop(&mut self) {
        // SAFETY: the mapping was made by DmabufMap::new and is unmapped once.
        unsafe { libc::munmap(self.map as *mut c_void, self.map_len) };
    }
}

unsafe extern "C" fn mr_close(f: *mut fid) -> c_int {
    guard!(-FI_EOTHER, {
        // SAFETY: checked against our ops table.
        let Some(h) = (unsafe { ours::<MrHandle>(f, &MR_FI_OPS) }) else { return -FI_EINVAL };
        // SAFETY: the domain outlives its MRs (refcount).
        let d = unsafe { &*h.domain };
        let _ = d.obj.mr_close(h.fid.key);
        if h.dmabuf.is_some() {
            d.dmabuf_regs.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
        }
        d.children.put();
        // SAFETY: created by Box::into_raw in mr_publish; closed once.
        drop(unsafe { Box::from_raw(f as *mut MrHandle) });
        0
    })
}

pub(crate) fn mr_fi_ops() -> &'static fi_ops {
    &MR_FI_OPS
}

static MR_FI_OPS: fi_ops = fi_ops {
    size: std::mem::size_of::<fi_ops>(),
    close: Some(mr_close),
    bind: Some(enosys_bind),
    control: Some(crate::xpu::mr_control),
    ops_open: Some(enosys_ops_open),
    tostr: Some(obj_tostr),
    ops_set: Some(enosys_ops_set),
};

/// # Safety
/// `d` is ours; `out` writable.
unsafe fn mr_publish(d: &DomainHandle, req: &MrReq, dmabuf: Option<DmabufMap>, context: *mut c_void, out: *mut *mut fid_mr) -> c_int {
    match d.obj.mr_reg(req) {
        Ok(key) => {
            d.children.get();
            if dmabuf.is_some() {
                d.dmabuf_regs.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
            let h = Box::into_raw(Box::new(MrHandle {
                fid: fid_mr {
                    fid: fid { fclass: FI_CLASS_MR, context, ops: &MR_FI_OPS as *const fi_ops as *mut fi_ops },
                    mem_desc: std::ptr::null_mut(),
                    key,
                },
                domain: d,
                dmabuf,
            }));
            // SAFETY: h is a fresh allocation; its address serves as the
            // local descriptor (providers of ours need no other).
            unsafe {
                (*h).fid.mem_desc = h as *mut c_void;
                *out = h as *mut fid_mr;
            }
            0
        }
        Err(e) => e.to_c(),
    }
}

/// Registration flags of fi_mr(3) the built-in providers support (plus
/// `FI_MR_DMABUF` through `fi_mr_regattr`): the others (persistent or device
/// memory, single use, authorization keys, undefined bits) are
/// `-FI_EBADFLAGS`, as fi_mr(3) says for flags a provider does not support.
const MR_FLAGS: u64 = FI_RMA_EVENT;

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn mr_reg(f: *mut fid, buf: *const c_void, len: usize, access: u64, offset: u64, key: u64, flags: u64, mr: *mut *mut fid_mr, ctx: *mut c_void) -> c_int {
    guard!(-FI_EOTHER, {
        null_check!(mr);
        // SAFETY: checked against our ops table.
        let Some(d) = (unsafe { ours::<DomainHandle>(f, &DOMAIN_FI_OPS) }) else { return -FI_EINVAL };
        if buf.is_null() && len > 0 {
            return -FI_EINVAL;
        }
        if flags & !MR_FLAGS != 0 {
            rfabric_core::fi_warn!("shm", FI_LOG_MR, "fi_mr_reg: unsupported flags {:#x}", flags & !MR_FLAGS);
            return -FI_EBADFLAGS;
        }
        let req = MrReq { addr: buf as usize, len, access, offset, requested_key: key, flags };
        // SAFETY: d ours, mr non-NULL.
        unsafe { mr_publish(d, &req, None, ctx, mr) }
    })
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn mr_regv(f: *mut fid, iov: *const libc::iovec, count: usize, access: u64, offset: u64, key: u64, flags: u64, mr: *mut *mut fid_mr, ctx: *mut c_void) -> c_int {
    guard!(-FI_EOTHER, {
        null_check!(iov, mr);
        if count != 1 {
            return -FI_EINVAL;
        }
        // SAFETY: iov has count (1) entries.
        let v = unsafe { *iov };
        // SAFETY: forwarded with the caller's arguments.
        unsafe { mr_reg(f, v.iov_base, v.iov_len, access, offset, key, flags, mr, ctx) }
    })
}

unsafe extern "C" fn mr_regattr(f: *mut fid, attr: *const fi_mr_attr, flags: u64, mr: *mut *mut fid_mr) -> c_int {
    guard!(-FI_EOTHER, {
        null_check!(attr, mr);
        // SAFETY: attr non-NULL; only fields present since 1.x are read, one
        // by one (older callers' structs are shorter).
        let (iov_count, access, offset, key, context, iov) = unsafe {
            (
                std::ptr::addr_of!((*attr).iov_count).read(),
                std::ptr::addr_of!((*attr).access).read(),
                std::ptr::addr_of!((*attr).offset).read(),
                std::ptr::addr_of!((*attr).requested_key).read(),
                std::ptr::addr_of!((*attr).context).read(),
                std::ptr::addr_of!((*attr).anon0).read(),
            )
        };
        if flags & !(MR_FLAGS | FI_MR_DMABUF) != 0 {
            rfabric_core::fi_warn!("shm", FI_LOG_MR, "fi_mr_regattr: unsupported flags {:#x}", flags & !(MR_FLAGS | FI_MR_DMABUF));
            return -FI_EBADFLAGS;
        }
        if flags & FI_MR_DMABUF != 0 {
            // SAFETY: with FI_MR_DMABUF the union holds dmabuf.
            let b = unsafe { iov.dmabuf };
            if b.is_null() || iov_count != 1 {
                return -FI_EINVAL;
            }
            // SAFETY: non-NULL caller struct.
            let b = unsafe { *b };
            // SAFETY: checked against our ops table.
            let Some(d) = (unsafe { ours::<DomainHandle>(f, &DOMAIN_FI_OPS) }) else { return -FI_EINVAL };
            let map = match DmabufMap::new(&b) {
                Ok(m) => m,
                Err(e) => return e.to_c(),
            };
            let req = MrReq { addr: map.data, len: map.len, access, offset, requested_key: key, flags: flags & !FI_MR_DMABUF };
            // SAFETY: d ours, mr non-NULL.
            return unsafe { mr_publish(d, &req, Some(map), context, mr) };
        }
        if iov_count != 1 {
            return -FI_EINVAL;
        }
        // SAFETY: without FI_MR_DMABUF the union holds mr_iov.
        let iov = unsafe { iov.mr_iov };
        // SAFETY: forwarded.
        unsafe { mr_regv(f, iov, 1, access, offset, key, flags, mr, context) }
    })
}

static MR_OPS: fi_ops_mr = fi_ops_mr {
    size: std::mem::size_of::<fi_ops_mr>(),
    reg: Some(mr_reg),
    regv: Some(mr_regv),
    regattr: Some(mr_regattr),
};

// ------------------------------------------------------------------ CQ

#[repr(C)]
pub(crate) struct CqHandle {
    pub(crate) fid: fid_cq,
    pub(crate) obj: Arc<dyn CompletionQueue>,
    domain: *const DomainHandle,
    /// Endpoints bound to this CQ.
    pub(crate) refs: RefCount,
    api_version: u32,
}

pub(crate) fn cq_fi_ops() -> &'static fi_ops {
    &CQ_FI_OPS
}

unsafe extern "C" fn cq_close(f: *mut fid) -> c_int {
    guard!(-FI_EOTHER, {
        // SAFETY: checked against our ops table.
        let Some(h) = (unsafe { ours::<CqHandle>(f, &CQ_FI_OPS) }) else { return -FI_EINVAL };
        if h.refs.busy() {
            return -FI_EBUSY;
        }
        // SAFETY: the domain outlives its CQs.
        unsafe { (*h.domain).children.put() };
        crate::xpu::closed(f as usize);
        // SAFETY: created by Box::into_raw in domain_cq_open; closed once.
        drop(unsafe { Box::from_raw(f as *mut CqHandle) });
        0
    })
}

/// `FI_GETWAIT` (`arg`: `int *`, the fd) and `FI_GETWAITOBJ` (`arg`:
/// `enum fi_wait_obj *`) for a CQ or counter whose wait fd is `fd`.
/// Objects without an fd answer `-FI_ENODATA` to `FI_GETWAIT`.
///
/// # Safety
/// `arg` NULL or pointing to the type `cmd` names.
unsafe fn wait_control(fd: Option<i32>, cmd: c_int, arg: *mut c_void) -> c_int {
    if cmd != FI_GETWAIT && cmd != FI_GETWAITOBJ {
        return -FI_ENOSYS;
    }
    if arg.is_null() {
        return -FI_EINVAL;
    }
    let Some(fd) = fd else { return if cmd == FI_GETWAIT { -FI_ENODATA } else { -FI_ENOSYS } };
    if cmd == FI_GETWAIT {
        // SAFETY: FI_GETWAIT on an FI_WAIT_FD object takes an int *.
        unsafe { *(arg as *mut c_int) = fd };
    } else {
        // SAFETY: FI_GETWAITOBJ takes an enum fi_wait_obj * (a C int).
        unsafe { *(arg as *mut u32) = FI_WAIT_FD };
    }
    0
}

unsafe extern "C" fn cq_control(f: *mut fid, cmd: c_int, arg: *mut c_void) -> c_int {
    guard!(-FI_EOTHER, {
        // SAFETY: checked against our ops table.
        let Some(h) = (unsafe { ours::<CqHandle>(f, &CQ_FI_OPS) }) else { return -FI_EINVAL };
        // SAFETY: caller's arg for cmd.
        unsafe { wait_control(h.obj.wait_fd(), cmd, arg) }
    })
}

/// `fi_trywait` for one of our CQs or counters; `None` for other fids.
///
/// # Safety
/// `f` NULL or a fid.
pub(crate) unsafe fn trywait_one(f: *mut fid) -> Option<c_int> {
    // SAFETY: caller; each check compares the ops table first.
    if let Some(h) = unsafe { ours::<CqHandle>(f, &CQ_FI_OPS) } {
        return Some(rc(h.obj.trywait()));
    }
    // SAFETY: as above.
    if let Some(h) = unsafe { ours::<CntrHandle>(f, &CNTR_FI_OPS) } {
        return Some(rc(h.obj.trywait()));
    }
    None
}

unsafe extern "C" fn cntr_control(f: *mut fid, cmd: c_int, arg: *mut c_void) -> c_int {
    guard!(-FI_EOTHER, {
        // SAFETY: checked against our ops table.
        let Some(h) = (unsafe { ours::<CntrHandle>(f, &CNTR_FI_OPS) }) else { return -FI_EINVAL };
        // SAFETY: caller's arg for cmd.
        unsafe { wait_control(h.obj.wait_fd(), cmd, arg) }
    })
}

static CQ_FI_OPS: fi_ops = fi_ops {
    size: std::mem::size_of::<fi_ops>(),
    close: Some(cq_close),
    bind: Some(enosys_bind),
    control: Some(cq_control),
    ops_open: Some(enosys_ops_open),
    tostr: Some(obj_tostr),
    ops_set: Some(enosys_ops_set),
};

fn ssz(r: Result<usize, Error>) -> isize {
    match r {
        Ok(n) => n as isize,
        Err(e) => e.to_c() as isize,
    }
}

/// # Safety
/// `buf` NULL or writable for `count` entries; `src` NULL or writable for
/// `count` values.
unsafe fn cq_read_common(cq: *mut fid_cq, buf: *mut c_void, count: usize, src: *mut fi_addr_t, blocking: Option<c_int>) -> isize {
    // SAFETY: checked against our ops table.
    let Some(h) = (unsafe { ours::<CqHandle>(cq as *const fid, &CQ_FI_OPS) }) else { return -(FI_EINVAL as isize) };
    if count == 0 {
        return 0;
    }
    if buf.is_null() {
        return -(FI_EINVAL as isize);
    }
    let Some(bytes) = count.checked_mul(h.obj.entry_size()) else { return -(FI_EINVAL as isize) };
    // SAFETY: the caller's buffer holds count entries of the CQ's format.
    let out = unsafe { std::slice::from_raw_parts_mut(buf as *mut u8, bytes) };
    let srcs = if src.is_null() {
        None
    } else {
        // SAFETY: src holds count values.
        Some(unsafe { std::slice::from_raw_parts_mut(src, count) })
    };
    match blocking {
        None => ssz(h.obj.read(out, count, srcs)),
        Some(t) => ssz(h.obj.sread(out, count, srcs, t)),
    }
}

unsafe extern "C" fn cq_read(cq: *mut fid_cq, buf: *mut c_void, count: usize) -> isize {
    // SAFETY: the caller's buffers (fi_cq_read contract).
    guard!(-(FI_EOTHER as isize), unsafe { cq_read_common(cq, buf, count, std::ptr::null_mut(), None) })
}
unsafe extern "C" fn cq_readfrom(cq: *mut fid_cq, buf: *mut c_void, count: usize, src: *mut fi_addr_t) -> isize {
    // SAFETY: the caller's buffers.
    guard!(-(FI_EOTHER as isize), unsafe { cq_read_common(cq, buf, count, src, None) })
}
unsafe extern "C" fn cq_sread(cq: *mut fid_cq, buf: *mut c_void, count: usize, _cond: *const c_void, timeout: c_int) -> isize {
    // SAFETY: the caller's buffers.
    guard!(-(FI_EOTHER as isize), unsafe { cq_read_common(cq, buf, count, std::ptr::null_mut(), Some(timeout)) })
}
unsafe extern "C" fn cq_sreadfrom(cq: *mut fid_cq, buf: *mut c_void, count: usize, src: *mut fi_addr_t, _cond: *const c_void, timeout: c_int) -> isize {
    // SAFETY: the caller's buffers.
    guard!(-(FI_EOTHER as isize), unsafe { cq_read_common(cq, buf, count, src, Some(timeout)) })
}

/// Size of `struct fi_cq_err_entry` for a fabric opened with `api`:
/// `src_addr` came with 2.0, `err_data_size` with 1.5.
pub(crate) fn err_entry_size(api: u32) -> usize {
    if api >= fi_version(2, 0) {
        ERR_ENTRY_SIZE
    } else if api >= fi_version(1, 5) {
        ERR_ENTRY_SIZE - 8
    } else {
        ERR_ENTRY_SIZE - 16
    }
}

unsafe extern "C" fn cq_readerr(cq: *mut fid_cq, e: *mut fi_cq_err_entry, flags: u64) -> isize {
    guard!(-(FI_EOTHER as isize), {
        null_check_ssize!(e);
        // SAFETY: checked against our ops table.
        let Some(h) = (unsafe { ours::<CqHandle>(cq as *const fid, &CQ_FI_OPS) }) else { return -(FI_EINVAL as isize) };
        if flags != 0 {
            return -(FI_EBADFLAGS as isize);
        }
        // SAFETY: e non-NULL, the caller's entry; err_data_size exists
        // from API 1.5 on.
        let (ud, us) = unsafe {
            let ud = std::ptr::addr_of!((*e).err_data).read();
            let us = if h.api_version >= fi_version(1, 5) { std::ptr::addr_of!((*e).err_data_size).read() } else { 0 };
            (ud, us)
        };
        let user = if ud.is_null() || us == 0 {
            None
        } else {
            // SAFETY: err_data holds err_data_size bytes (fi_cq(3)).
            Some(unsafe { std::slice::from_raw_parts_mut(ud as *mut u8, us) })
        };
        match h.obj.readerr(user, h.api_version) {
            Ok((info, p)) => {
                let ptr = if info.err_data == ErrDataLoc::Provider { p } else { ud as usize };
                let mut full = [0u8; ERR_ENTRY_SIZE];
                if let Err(err) = encode_err(&info, ptr, &mut full) {
                    return err.to_c() as isize;
                }
                let n = err_entry_size(h.api_version);
                // SAFETY: the caller's fi_cq_err_entry has the size of the
                // API version it opened the fabric with (n bytes).
                unsafe { std::ptr::copy_nonoverlapping(full.as_ptr(), e as *mut u8, n) };
                1
            }
            Err(err) => err.to_c() as isize,
        }
    })
}

unsafe extern "C" fn cq_signal(cq: *mut fid_cq) -> c_int {
    guard!(-FI_EOTHER, {
        // SAFETY: checked against our ops table.
        let Some(h) = (unsafe { ours::<CqHandle>(cq as *const fid, &CQ_FI_OPS) }) else { return -FI_EINVAL };
        rc(h.obj.signal())
    })
}

unsafe extern "C" fn cq_strerror(_cq: *mut fid_cq, prov_errno: c_int, _d: *const c_void, buf: *mut c_char, len: usize) -> *const c_char {
    guard!(std::ptr::null(), {
        let s = crate::tostr::fi_strerror(prov_errno.saturating_abs());
        if buf.is_null() || len == 0 {
            return s;
        }
        // SAFETY: s is a static C string; buf holds len bytes.
        let text = unsafe { std::ffi::CStr::from_ptr(s) }.to_string_lossy();
        // SAFETY: buf holds len bytes.
        unsafe { put_cstr(buf, len, &text) };
        buf as *const c_char
    })
}

use crate::xpu::cq_export_xpu;

static CQ_OPS: fi_ops_cq = fi_ops_cq {
    size: std::mem::size_of::<fi_ops_cq>(),
    read: Some(cq_read),
    readfrom: Some(cq_readfrom),
    readerr: Some(cq_readerr),
    sread: Some(cq_sread),
    sreadfrom: Some(cq_sreadfrom),
    signal: Some(cq_signal),
    strerror: Some(cq_strerror),
    export_xpu: Some(cq_export_xpu),
};

// ------------------------------------------------------------------ counter

#[repr(C)]
pub(crate) struct CntrHandle {
    pub(crate) fid: fid_cntr,
    pub(crate) obj: Arc<dyn Counter>,
    domain: *const DomainHandle,
    /// Endpoints bound to this counter.
    pub(crate) refs: RefCount,
}

pub(crate) fn cntr_fi_ops() -> &'static fi_ops {
    &CNTR_FI_OPS
}

unsafe extern "C" fn domain_cntr_open(d: *mut fid_domain, a: *mut fi_cntr_attr, out: *mut *mut fid_cntr, ctx: *mut c_void) -> c_int {
    guard!(-FI_EOTHER, {
        null_check!(a, out);
        // SAFETY: checked against our ops table.
        let Some(h) = (unsafe { ours::<DomainHandle>(d as *const fid, &DOMAIN_FI_OPS) }) else { return -FI_EINVAL };
        // SAFETY: a non-NULL; fields read one by one (1.x structs are shorter).
        let (events, wait_obj, wait_set, flags) = unsafe {
            (
                std::ptr::addr_of!((*a).events).read(),
                std::ptr::addr_of!((*a).wait_obj).read(),
                std::ptr::addr_of!((*a).wait_set).read(),
                std::ptr::addr_of!((*a).flags).read(),
            )
        };
        if !wait_set.is_null() {
            return -FI_ENOSYS;
        }
        if flags & !FI_XPU != 0 {
            rfabric_core::fi_warn!("shm", FI_LOG_CNTR, "fi_cntr_open: unknown flags {:#x} in fi_cntr_attr", flags & !FI_XPU);
            return -FI_EBADFLAGS;
        }
        // SAFETY: a is the caller's fi_cntr_attr, of its API version's shape.
        let xctx = match crate::xpu::requested(flags, unsafe { crate::xpu::attr_ctx(std::ptr::addr_of!((*a).xpu_ctx), h.api_version) }, "fi_cntr_open") {
            Ok(c) => c,
            Err(e) => return e,
        };
        match h.obj.cntr_open(events as u32, wait_obj as u32) {
            Ok(obj) => {
                h.children.get();
                let ch = Box::new(CntrHandle {
                    fid: fid_cntr {
                        fid: fid { fclass: FI_CLASS_CNTR, context: ctx, ops: &CNTR_FI_OPS as *const fi_ops as *mut fi_ops },
                        ops: &CNTR_OPS as *const fi_ops_cntr as *mut fi_ops_cntr,
                    },
                    obj,
                    domain: h,
                    refs: RefCount::default(),
                });
                let p = Box::into_raw(ch);
                crate::xpu::cntr_opened(p as usize, xctx);
                // SAFETY: out non-NULL.
                unsafe { *out = p as *mut fid_cntr };
                0
            }
            Err(e) => e.to_c(),
        }
    })
}

unsafe extern "C" fn cntr_close(f: *mut fid) -> c_int {
    guard!(-FI_EOTHER, {
        // SAFETY: checked against our ops table.
        let Some(h) = (unsafe { ours::<CntrHandle>(f, &CNTR_FI_OPS) }) else { return -FI_EINVAL };
        if h.refs.busy() {
            return -FI_EBUSY;
        }
        // SAFETY: the domain outlives its counters.
        unsafe { (*h.domain).children.put() };
        crate::xpu::closed(f as usize);
        // SAFETY: created by Box::into_raw in domain_cntr_open; closed once.
        drop(unsafe { Box::from_raw(f as *mut CntrHandle) });
        0
    })
}

static CNTR_FI_OPS: fi_ops = fi_ops {
    size: std::mem::size_of::<fi_ops>(),
    close: Some(cntr_close),
    bind: Some(enosys_bind),
    control: Some(cntr_control),
    ops_open: Some(enosys_ops_open),
    tostr: Some(obj_tostr),
    ops_set: Some(enosys_ops_set),
};

/// # Safety
/// `c` NULL or a fid.
unsafe fn cntr<'a>(c: *mut fid_cntr) -> Option<&'a CntrHandle> {
    // SAFETY: caller.
    unsafe { ours::<CntrHandle>(c as *const fid, &CNTR_FI_OPS) }
}

unsafe extern "C" fn cntr_read(c: *mut fid_cntr) -> u64 {
    // SAFETY: checked against our ops table; a bad fid reads as 0.
    guard!(0, unsafe { cntr(c) }.map_or(0, |h| h.obj.read()))
}
unsafe extern "C" fn cntr_readerr(c: *mut fid_cntr) -> u64 {
    // SAFETY: as cntr_read.
    guard!(0, unsafe { cntr(c) }.map_or(0, |h| h.obj.readerr()))
}
unsafe extern "C" fn cntr_add(c: *mut fid_cntr, v: u64) -> c_int {
    // SAFETY: checked against our ops table.
    guard!(-FI_EOTHER, unsafe { cntr(c) }.map_or(-FI_EINVAL, |h| rc(h.obj.add(v))))
}
unsafe extern "C" fn cntr_set(c: *mut fid_cntr, v: u64) -> c_int {
    // SAFETY: checked against our ops table.
    guard!(-FI_EOTHER, unsafe { cntr(c) }.map_or(-FI_EINVAL, |h| rc(h.obj.set(v))))
}
unsafe extern "C" fn cntr_adderr(c: *mut fid_cntr, v: u64) -> c_int {
    // SAFETY: checked against our ops table.
    guard!(-FI_EOTHER, unsafe { cntr(c) }.map_or(-FI_EINVAL, |h| rc(h.obj.adderr(v))))
}
unsafe extern "C" fn cntr_seterr(c: *mut fid_cntr, v: u64) -> c_int {
    // SAFETY: checked against our ops table.
    guard!(-FI_EOTHER, unsafe { cntr(c) }.map_or(-FI_EINVAL, |h| rc(h.obj.seterr(v))))
}
unsafe extern "C" fn cntr_wait(c: *mut fid_cntr, threshold: u64, timeout: c_int) -> c_int {
    // SAFETY: checked against our ops table.
    guard!(-FI_EOTHER, unsafe { cntr(c) }.map_or(-FI_EINVAL, |h| rc(h.obj.wait(threshold, timeout))))
}
use crate::xpu::cntr_export_xpu;

static CNTR_OPS: fi_ops_cntr = fi_ops_cntr {
    size: std::mem::size_of::<fi_ops_cntr>(),
    read: Some(cntr_read),
    readerr: Some(cntr_readerr),
    add: Some(cntr_add),
    set: Some(cntr_set),
    wait: Some(cntr_wait),
    adderr: Some(cntr_adderr),
    seterr: Some(cntr_seterr),
    export_xpu: Some(cntr_export_xpu),
};

// ------------------------------------------------------------------ AV

#[repr(C)]
pub(crate) struct AvHandle {
    pub(crate) fid: fid_av,
    pub(crate) obj: Arc<dyn AddressVector>,
    domain: *const DomainHandle,
    pub(crate) refs: RefCount,
}

pub(crate) fn av_fi_ops() -> &'static fi_ops {
    &AV_FI_OPS
}

unsafe extern "C" fn av_close(f: *mut fid) -> c_int {
    guard!(-FI_EOTHER, {
        // SAFETY: checked against our ops table.
        let Some(h) = (unsafe { ours::<AvHandle>(f, &AV_FI_OPS) }) else { return -FI_EINVAL };
        if h.refs.busy() {
            return -FI_EBUSY;
        }
        // SAFETY: the domain outlives its AVs.
        unsafe { (*h.domain).children.put() };
        // SAFETY: created by Box::into_raw in domain_av_open; closed once.
        drop(unsafe { Box::from_raw(f as *mut AvHandle) });
        0
    })
}

static AV_FI_OPS: fi_ops = fi_ops {
    size: std::mem::size_of::<fi_ops>(),
    close: Some(av_close),
    bind: Some(enosys_bind),
    control: Some(enosys_control),
    ops_open: Some(enosys_ops_open),
    tostr: Some(obj_tostr),
    ops_set: Some(enosys_ops_set),
};

/// Longest string address accepted (`FI_ADDR_STR`).
const MAX_STR_ADDR: usize = 4096;

/// # Safety
/// `p` points to a NUL-terminated string or at least MAX_STR_ADDR bytes.
unsafe fn str_addr<'a>(p: *const u8) -> Result<&'a [u8], Error> {
    for n in 0..MAX_STR_ADDR {
        // SAFETY: reading up to the NUL (caller).
        if unsafe { *p.add(n) } == 0 {
            // SAFETY: the n bytes before the NUL are readable.
            return Ok(unsafe { std::slice::from_raw_parts(p, n + 1) });
        }
    }
    Err(EINVAL)
}

unsafe extern "C" fn av_insert(av: *mut fid_av, addr: *const c_void, count: usize, fi_addr: *mut fi_addr_t, flags: u64, _ctx: *mut c_void) -> c_int {
    guard!(-FI_EOTHER, {
        // SAFETY: checked against our ops table.
        let Some(h) = (unsafe { ours::<AvHandle>(av as *const fid, &AV_FI_OPS) }) else { return -FI_EINVAL };
        if count == 0 {
            return 0;
        }
        null_check!(addr);
        let mut list: Vec<&[u8]> = Vec::with_capacity(count.min(1 << 16));
        let mut p = addr as *const u8;
        for _ in 0..count {
            match h.obj.addr_len() {
                Some(n) => {
                    // SAFETY: the caller's array holds count addresses of n bytes.
                    list.push(unsafe { std::slice::from_raw_parts(p, n) });
                    // SAFETY: stays within (or one past) the caller's array.
                    p = unsafe { p.add(n) };
                }
                None => {
                    // SAFETY: string addresses follow each other, each NUL-terminated.
                    match unsafe { str_addr(p) } {
                        Ok(s) => {
                            list.push(s);
                            // SAFETY: next string starts after the NUL.
                            p = unsafe { p.add(s.len()) };
                        }
                        Err(e) => return e.to_c(),
                    }
                }
            }
        }
        let out = if fi_addr.is_null() {
            None
        } else {
            // SAFETY: fi_addr holds count values.
            Some(unsafe { std::slice::from_raw_parts_mut(fi_addr, count) })
        };
        match h.obj.insert(&list, out, flags) {
            Ok(n) => n as c_int,
            Err(e) => e.to_c(),
        }
    })
}

unsafe extern "C" fn av_remove(av: *mut fid_av, fi_addr: *mut fi_addr_t, count: usize, flags: u64) -> c_int {
    guard!(-FI_EOTHER, {
        // SAFETY: checked against our ops table.
        let Some(h) = (unsafe { ours::<AvHandle>(av as *const fid, &AV_FI_OPS) }) else { return -FI_EINVAL };
        if count == 0 {
            return 0;
        }
        null_check!(fi_addr);
        // SAFETY: fi_addr holds count values.
        let v = unsafe { std::slice::from_raw_parts(fi_addr, count) };
        rc(h.obj.remove(v, flags))
    })
}

unsafe extern "C" fn av_lookup(av: *mut fid_av, fi_addr: fi_addr_t, addr: *mut c_void, addrlen: *mut usize) -> c_int {
    guard!(-FI_EOTHER, {
        null_check!(addrlen);
        // SAFETY: checked against our ops table.
        let Some(h) = (unsafe { ours::<AvHandle>(av as *const fid, &AV_FI_OPS) }) else { return -FI_EINVAL };
        // SAFETY: addrlen non-NULL.
        let cap = if addr.is_null() { 0 } else { unsafe { *addrlen } };
        let buf: &mut [u8] = if cap == 0 {
            &mut []
        } else {
            // SAFETY: addr holds *addrlen bytes.
            unsafe { std::slice::from_raw_parts_mut(addr as *mut u8, cap) }
        };
        match h.obj.lookup(fi_addr, buf) {
            Ok(n) => {
                // SAFETY: addrlen non-NULL.
                unsafe { *addrlen = n };
                0
            }
            Err(e) => e.to_c(),
        }
    })
}

unsafe extern "C" fn av_straddr(av: *mut fid_av, addr: *const c_void, buf: *mut c_char, len: *mut usize) -> *const c_char {
    guard!(std::ptr::null(), {
        if addr.is_null() || len.is_null() {
            return std::ptr::null();
        }
        // SAFETY: checked against our ops table.
        let Some(h) = (unsafe { ours::<AvHandle>(av as *const fid, &AV_FI_OPS) }) else { return std::ptr::null() };
        let raw = match h.obj.addr_len() {
            // SAFETY: addr holds one address of n bytes.
            Some(n) => unsafe { std::slice::from_raw_parts(addr as *const u8, n) },
            // SAFETY: a NUL-terminated string address.
            None => match unsafe { str_addr(addr as *const u8) } {
                Ok(s) => s,
                Err(_) => return std::ptr::null(),
            },
        };
        let s = h.obj.straddr(raw);
        // SAFETY: len non-NULL; buf holds *len bytes.
        unsafe {
            put_cstr(buf, *len, &s);
            *len = s.len() + 1;
        }
        buf
    })
}

enosys_fn!(av_insertsvc(*mut fid_av, *const c_char, *const c_char, *mut fi_addr_t, u64, *mut c_void) -> c_int);
enosys_fn!(av_insertsym(*mut fid_av, *const c_char, usize, *const c_char, usize, *mut fi_addr_t, u64, *mut c_void) -> c_int);
enosys_fn!(av_av_set(*mut fid_av, *mut fi_av_set_attr, *mut *mut fid_av_set, *mut c_void) -> c_int);
enosys_fn!(av_insert_auth_key(*mut fid_av, *const c_void, usize, *mut fi_addr_t, u64) -> c_int);
enosys_fn!(av_lookup_auth_key(*mut fid_av, fi_addr_t, *mut c_void, *mut usize) -> c_int);
enosys_fn!(av_set_user_id(*mut fid_av, fi_addr_t, fi_addr_t, u64) -> c_int);
use crate::xpu::av_lookup2;

static AV_OPS: fi_ops_av = fi_ops_av {
    size: std::mem::size_of::<fi_ops_av>(),
    insert: Some(av_insert),
    insertsvc: Some(av_insertsvc),
    insertsym: Some(av_insertsym),
    remove: Some(av_remove),
    lookup: Some(av_lookup),
    straddr: Some(av_straddr),
    av_set: Some(av_av_set),
    insert_auth_key: Some(av_insert_auth_key),
    lookup_auth_key: Some(av_lookup_auth_key),
    set_user_id: Some(av_set_user_id),
    lookup2: Some(av_lookup2),
};

// ------------------------------------------------------------------ EQ

#[repr(C)]
pub(crate) struct EqHandle {
    fid: fid_eq,
    eq: Locked<Eq>,
    fabric: *const FabricHandle,
    api_version: u32,
}

unsafe extern "C" fn eq_close(f: *mut fid) -> c_int {
    guard!(-FI_EOTHER, {
        // SAFETY: checked against our ops table.
        let Some(h) = (unsafe { ours::<EqHandle>(f, &EQ_FI_OPS) }) else { return -FI_EINVAL };
        // SAFETY: the fabric outlives its EQs.
        unsafe { (*h.fabric).children.put() };
        // SAFETY: created by Box::into_raw in eq_open; closed once.
        drop(unsafe { Box::from_raw(f as *mut EqHandle) });
        0
    })
}

static EQ_FI_OPS: fi_ops = fi_ops {
    size: std::mem::size_of::<fi_ops>(),
    close: Some(eq_close),
    bind: Some(enosys_bind),
    control: Some(enosys_control),
    ops_open: Some(enosys_ops_open),
    tostr: Some(obj_tostr),
    ops_set: Some(enosys_ops_set),
};

/// # Safety
/// `buf` NULL or writable for `len` bytes.
unsafe fn eq_buf<'a>(buf: *mut c_void, len: usize) -> &'a mut [u8] {
    if buf.is_null() || len == 0 {
        &mut []
    } else {
        // SAFETY: caller.
        unsafe { std::slice::from_raw_parts_mut(buf as *mut u8, len) }
    }
}

unsafe extern "C" fn eq_read(e: *mut fid_eq, event: *mut u32, buf: *mut c_void, len: usize, flags: u64) -> isize {
    guard!(-(FI_EOTHER as isize), {
        null_check_ssize!(event);
        // SAFETY: checked against our ops table.
        let Some(h) = (unsafe { ours::<EqHandle>(e as *const fid, &EQ_FI_OPS) }) else { return -(FI_EINVAL as isize) };
        // SAFETY: buf holds len bytes.
        let b = unsafe { eq_buf(buf, len) };
        match h.eq.lock().read(b, flags) {
            Ok((ev, n)) => {
                // SAFETY: event non-NULL.
                unsafe { *event = ev };
                n as isize
            }
            Err(err) => err.to_c() as isize,
        }
    })
}

unsafe extern "C" fn eq_sread(e: *mut fid_eq, event: *mut u32, buf: *mut c_void, len: usize, timeout: c_int, flags: u64) -> isize {
    guard!(-(FI_EOTHER as isize), {
        null_check_ssize!(event);
        // SAFETY: checked against our ops table.
        let Some(h) = (unsafe { ours::<EqHandle>(e as *const fid, &EQ_FI_OPS) }) else { return -(FI_EINVAL as isize) };
        // SAFETY: buf holds len bytes.
        let b = unsafe { eq_buf(buf, len) };
        match h.eq.sread(b, timeout, flags, &mut || {}) {
            Ok((ev, n)) => {
                // SAFETY: event non-NULL.
                unsafe { *event = ev };
                n as isize
            }
            Err(err) => err.to_c() as isize,
        }
    })
}

unsafe extern "C" fn eq_readerr(e: *mut fid_eq, out: *mut fi_eq_err_entry, flags: u64) -> isize {
    guard!(-(FI_EOTHER as isize), {
        null_check_ssize!(out);
        // SAFETY: checked against our ops table.
        let Some(h) = (unsafe { ours::<EqHandle>(e as *const fid, &EQ_FI_OPS) }) else { return -(FI_EINVAL as isize) };
        // err_data_size exists from API 1.5 on; older entries end before it.
        let has_size = h.api_version >= fi_version(1, 5);
        // SAFETY: out non-NULL; fields read and written one by one.
        let (ud, us) = unsafe {
            (
                std::ptr::addr_of!((*out).err_data).read(),
                if has_size { std::ptr::addr_of!((*out).err_data_size).read() } else { 0 },
            )
        };
        let user = if ud.is_null() || us == 0 {
            None
        } else {
            // SAFETY: err_data holds err_data_size bytes.
            Some(unsafe { std::slice::from_raw_parts_mut(ud as *mut u8, us) })
        };
        let mut q = h.eq.lock();
        match q.readerr(user, h.api_version, flags) {
            Ok(info) => {
                let ed = if info.err_data == ErrDataLoc::Provider { q.last_err_data().as_ptr() as *mut c_void } else { ud };
                // SAFETY: out non-NULL; err_data_size only where it exists.
                unsafe {
                    std::ptr::addr_of_mut!((*out).fid).write(info.fid as fid_t);
                    std::ptr::addr_of_mut!((*out).context).write(info.context as *mut c_void);
                    std::ptr::addr_of_mut!((*out).data).write(info.data);
                    std::ptr::addr_of_mut!((*out).err).write(info.err);
                    std::ptr::addr_of_mut!((*out).prov_errno).write(info.prov_errno);
                    std::ptr::addr_of_mut!((*out).err_data).write(ed);
                    if has_size {
                        std::ptr::addr_of_mut!((*out).err_data_size).write(info.err_data_size);
                    }
                }
                if has_size {
                    std::mem::size_of::<fi_eq_err_entry>() as isize
                } else {
                    (std::mem::size_of::<fi_eq_err_entry>() - 8) as isize
                }
            }
            Err(err) => err.to_c() as isize,
        }
    })
}

unsafe extern "C" fn eq_write(e: *mut fid_eq, event: u32, buf: *const c_void, len: usize, flags: u64) -> isize {
    guard!(-(FI_EOTHER as isize), {
        // SAFETY: checked against our ops table.
        let Some(h) = (unsafe { ours::<EqHandle>(e as *const fid, &EQ_FI_OPS) }) else { return -(FI_EINVAL as isize) };
        if flags & !FI_PEEK != 0 {
            return -(FI_EBADFLAGS as isize);
        }
        if buf.is_null() && len > 0 {
            return -(FI_EINVAL as isize);
        }
        // SAFETY: buf holds len bytes.
        let b = unsafe { eq_buf(buf as *mut c_void, len) };
        ssz(h.eq.lock().write(event, b))
    })
}

unsafe extern "C" fn eq_strerror(_e: *mut fid_eq, prov_errno: c_int, d: *const c_void, buf: *mut c_char, len: usize) -> *const c_char {
    // SAFETY: same contract as the CQ's.
    unsafe { cq_strerror(std::ptr::null_mut(), prov_errno, d, buf, len) }
}

static EQ_OPS: fi_ops_eq = fi_ops_eq {
    size: std::mem::size_of::<fi_ops_eq>(),
    read: Some(eq_read),
    readerr: Some(eq_readerr),
    write: Some(eq_write),
    sread: Some(eq_sread),
    strerror: Some(eq_strerror),
};

/// `fi_eq_open` on a fabric of a built-in provider.
///
/// # Safety
/// `out` writable; `fabric` outlives the EQ.
pub(crate) unsafe fn eq_open(fabric: &FabricHandle, a: &fi_eq_attr, out: *mut *mut fid_eq, context: *mut c_void) -> c_int {
    if !a.wait_set.is_null() {
        return -FI_ENOSYS;
    }
    let eq = match Eq::new(a.size, a.wait_obj as u32) {
        Ok(q) => q,
        Err(e) => return e.to_c(),
    };
    fabric.children.get();
    let h = Box::new(EqHandle {
        fid: fid_eq {
            fid: fid { fclass: FI_CLASS_EQ, context, ops: &EQ_FI_OPS as *const fi_ops as *mut fi_ops },
            ops: &EQ_OPS as *const fi_ops_eq as *mut fi_ops_eq,
        },
        eq: Locked::new(eq),
        fabric,
        api_version: fabric.fid.api_version,
    });
    // SAFETY: caller's out pointer.
    unsafe { *out = Box::into_raw(h) as *mut fid_eq };
    0
}
