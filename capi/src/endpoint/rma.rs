//! `fi_ops_rma` and `fi_ops_atomic` of the endpoint handle: each trampoline
//! checks its arguments, builds an `RmaOp` / `AtomicOp` on the stack and
//! makes one call into the provider's `Endpoint`.
//!
//! Errors found here, before the provider is called:
//! - NULL message, or NULL buffer with a non-zero length/count: `-FI_EINVAL`;
//! - more local or remote iovs than [`MAX_IOV`]: `-FI_EINVAL` (the provider
//!   enforces its own, smaller `rma_iov_limit` the same way);
//! - atomic element count 0: `-FI_EINVAL`;
//! - unknown datatype (no element size): `-FI_EOPNOTSUPP`, the code
//!   fi_atomic(3) gives for an operation the endpoint does not support.

use super::ep_of;
use libc::{c_int, c_void, iovec};
use rfabric_core::abi::*;
use rfabric_core::error::{Error, EINVAL};
use rfabric_core::objects::atomic::type_size;
use rfabric_core::provider::{AtomicKind, AtomicOp, Descs, Iov, RmaIov, RmaOp};

/// Most local or remote iovs one call may carry.
pub(crate) const MAX_IOV: usize = 8;

const EOTHER_S: isize = -(FI_EOTHER as isize);

fn ssz(r: Result<(), Error>) -> isize {
    match r {
        Ok(()) => 0,
        Err(e) => e.to_c() as isize,
    }
}

/// # Safety
/// `iov` holds `count` entries (or count is 0).
unsafe fn local_iovs(iov: *const iovec, count: usize, out: &mut [Iov; MAX_IOV]) -> Result<usize, Error> {
    if count > MAX_IOV || (count > 0 && iov.is_null()) {
        return Err(EINVAL);
    }
    for (i, o) in out.iter_mut().enumerate().take(count) {
        // SAFETY: i < count.
        let v = unsafe { *iov.add(i) };
        if v.iov_base.is_null() && v.iov_len > 0 {
            return Err(EINVAL);
        }
        *o = Iov { base: v.iov_base as usize, len: v.iov_len };
    }
    Ok(count)
}

/// # Safety
/// `rma` holds `count` entries (or count is 0).
unsafe fn remote_iovs(rma: *const fi_rma_iov, count: usize, out: &mut [RmaIov; MAX_IOV]) -> Result<usize, Error> {
    if count > MAX_IOV || (count > 0 && rma.is_null()) {
        return Err(EINVAL);
    }
    for (i, o) in out.iter_mut().enumerate().take(count) {
        // SAFETY: i < count.
        let v = unsafe { *rma.add(i) };
        *o = RmaIov { addr: v.addr, len: v.len, key: v.key };
    }
    Ok(count)
}

/// # Safety
/// As `local_iovs`, for `fi_ioc` arrays of `dt` elements.
unsafe fn ioc_iovs(ioc: *const fi_ioc, count: usize, dt: u32, out: &mut [Iov; MAX_IOV]) -> Result<usize, Error> {
    let size = type_size(dt).ok_or(Error(FI_EOPNOTSUPP))?;
    if count > MAX_IOV || (count > 0 && ioc.is_null()) {
        return Err(EINVAL);
    }
    for (i, o) in out.iter_mut().enumerate().take(count) {
        // SAFETY: i < count.
        let v = unsafe { *ioc.add(i) };
        let len = v.count.checked_mul(size).ok_or(EINVAL)?;
        if v.addr.is_null() && len > 0 {
            return Err(EINVAL);
        }
        *o = Iov { base: v.addr as usize, len };
    }
    Ok(count)
}

/// # Safety
/// `rma` holds `count` entries (or count is 0).
unsafe fn remote_iocs(rma: *const fi_rma_ioc, count: usize, out: &mut [RmaIov; MAX_IOV]) -> Result<usize, Error> {
    if count > MAX_IOV || (count > 0 && rma.is_null()) {
        return Err(EINVAL);
    }
    for (i, o) in out.iter_mut().enumerate().take(count) {
        // SAFETY: i < count.
        let v = unsafe { *rma.add(i) };
        *o = RmaIov { addr: v.addr, len: v.count, key: v.key };
    }
    Ok(count)
}

fn total(v: &[Iov]) -> Option<usize> {
    v.iter().try_fold(0usize, |a, x| a.checked_add(x.len))
}

// ---------------------------------------------------------------- RMA

/// # Safety
/// Buffers follow fi_rma(3)'s lifetime rules.
unsafe fn do_rma(e: *mut fid_ep, write: bool, op: &RmaOp<'_>) -> isize {
    // SAFETY: checked against the endpoint ops table.
    let Some(h) = (unsafe { ep_of(e as *const fid) }) else { return -(FI_EINVAL as isize) };
    // SAFETY: forwarded contract.
    ssz(unsafe { if write { h.rma_write(op) } else { h.rma_read(op) } })
}

#[allow(clippy::too_many_arguments)]
/// One local buffer, one remote buffer of the same length.
///
/// # Safety
/// Caller's buffer rules.
unsafe fn rma1(e: *mut fid_ep, write: bool, buf: *const c_void, len: usize, desc: *mut c_void, peer: u64, addr: u64, key: u64, ctx: *mut c_void, data: u64, flags: u64, inject: bool) -> isize {
    if buf.is_null() && len > 0 {
        return -(FI_EINVAL as isize);
    }
    let iov = [Iov { base: buf as usize, len }];
    let rma = [RmaIov { addr, len, key }];
    let op = RmaOp { iov: &iov, desc: Descs(&desc), rma: &rma, dest: peer, context: ctx as usize, data, flags, no_completion: inject };
    // SAFETY: forwarded.
    unsafe { do_rma(e, write, &op) }
}

#[allow(clippy::too_many_arguments)]
/// # Safety
/// Caller's buffer rules.
unsafe fn rmav(e: *mut fid_ep, write: bool, iov: *const iovec, desc: *mut *mut c_void, count: usize, peer: u64, addr: u64, key: u64, ctx: *mut c_void) -> isize {
    let mut v = [Iov::default(); MAX_IOV];
    // SAFETY: iov holds count entries.
    let n = match unsafe { local_iovs(iov, count, &mut v) } {
        Ok(n) => n,
        Err(err) => return err.to_c() as isize,
    };
    let Some(len) = total(&v[..n]) else { return -(FI_EINVAL as isize) };
    let rma = [RmaIov { addr, len, key }];
    let op = RmaOp { iov: &v[..n], desc: Descs(desc.cast_const()), rma: &rma, dest: peer, context: ctx as usize, data: 0, flags: 0, no_completion: false };
    // SAFETY: forwarded.
    unsafe { do_rma(e, write, &op) }
}

/// # Safety
/// Caller's buffer rules.
unsafe fn rmamsg(e: *mut fid_ep, write: bool, m: *const fi_msg_rma, flags: u64) -> isize {
    null_check_ssize!(m);
    // SAFETY: m non-NULL.
    let m = unsafe { &*m };
    let mut v = [Iov::default(); MAX_IOV];
    let mut r = [RmaIov::default(); MAX_IOV];
    // SAFETY: the message names its arrays and counts.
    let parsed = unsafe { local_iovs(m.msg_iov, m.iov_count, &mut v).and_then(|n| Ok((n, remote_iovs(m.rma_iov, m.rma_iov_count, &mut r)?))) };
    let (n, k) = match parsed {
        Ok(x) => x,
        Err(err) => return err.to_c() as isize,
    };
    let op = RmaOp { iov: &v[..n], desc: Descs(m.desc.cast_const()), rma: &r[..k], dest: m.addr, context: m.context as usize, data: m.data, flags, no_completion: false };
    // SAFETY: forwarded.
    unsafe { do_rma(e, write, &op) }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn rma_read(e: *mut fid_ep, buf: *mut c_void, len: usize, desc: *mut c_void, src: fi_addr_t, addr: u64, key: u64, ctx: *mut c_void) -> isize {
    // SAFETY: fi_read contract.
    guard!(EOTHER_S, unsafe { rma1(e, false, buf, len, desc, src, addr, key, ctx, 0, 0, false) })
}
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn rma_readv(e: *mut fid_ep, iov: *const iovec, desc: *mut *mut c_void, count: usize, src: fi_addr_t, addr: u64, key: u64, ctx: *mut c_void) -> isize {
    // SAFETY: fi_readv contract.
    guard!(EOTHER_S, unsafe { rmav(e, false, iov, desc, count, src, addr, key, ctx) })
}
unsafe extern "C" fn rma_readmsg(e: *mut fid_ep, m: *const fi_msg_rma, flags: u64) -> isize {
    // SAFETY: fi_readmsg contract.
    guard!(EOTHER_S, unsafe { rmamsg(e, false, m, flags) })
}
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn rma_write(e: *mut fid_ep, buf: *const c_void, len: usize, desc: *mut c_void, dest: fi_addr_t, addr: u64, key: u64, ctx: *mut c_void) -> isize {
    // SAFETY: fi_write contract.
    guard!(EOTHER_S, unsafe { rma1(e, true, buf, len, desc, dest, addr, key, ctx, 0, 0, false) })
}
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn rma_writev(e: *mut fid_ep, iov: *const iovec, desc: *mut *mut c_void, count: usize, dest: fi_addr_t, addr: u64, key: u64, ctx: *mut c_void) -> isize {
    // SAFETY: fi_writev contract.
    guard!(EOTHER_S, unsafe { rmav(e, true, iov, desc, count, dest, addr, key, ctx) })
}
unsafe extern "C" fn rma_writemsg(e: *mut fid_ep, m: *const fi_msg_rma, flags: u64) -> isize {
    // SAFETY: fi_writemsg contract.
    guard!(EOTHER_S, unsafe { rmamsg(e, true, m, flags) })
}
unsafe extern "C" fn rma_inject(e: *mut fid_ep, buf: *const c_void, len: usize, dest: fi_addr_t, addr: u64, key: u64) -> isize {
    // SAFETY: fi_inject_write contract.
    guard!(EOTHER_S, unsafe { rma1(e, true, buf, len, std::ptr::null_mut(), dest, addr, key, std::ptr::null_mut(), 0, FI_INJECT, true) })
}
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn rma_writedata(e: *mut fid_ep, buf: *const c_void, len: usize, desc: *mut c_void, data: u64, dest: fi_addr_t, addr: u64, key: u64, ctx: *mut c_void) -> isize {
    // SAFETY: fi_writedata contract.
    guard!(EOTHER_S, unsafe { rma1(e, true, buf, len, desc, dest, addr, key, ctx, data, FI_REMOTE_CQ_DATA, false) })
}
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn rma_injectdata(e: *mut fid_ep, buf: *const c_void, len: usize, data: u64, dest: fi_addr_t, addr: u64, key: u64) -> isize {
    // SAFETY: fi_inject_writedata contract.
    guard!(EOTHER_S, unsafe { rma1(e, true, buf, len, std::ptr::null_mut(), dest, addr, key, std::ptr::null_mut(), data, FI_INJECT | FI_REMOTE_CQ_DATA, true) })
}

pub(crate) static RMA_OPS: fi_ops_rma = fi_ops_rma {
    size: std::mem::size_of::<fi_ops_rma>(),
    read: Some(rma_read),
    readv: Some(rma_readv),
    readmsg: Some(rma_readmsg),
    write: Some(rma_write),
    writev: Some(rma_writev),
    writemsg: Some(rma_writemsg),
    inject: Some(rma_inject),
    writedata: Some(rma_writedata),
    injectdata: Some(rma_injectdata),
};

// ---------------------------------------------------------------- atomics

/// Local arrays of one atomic call, already converted.
struct AtLocal {
    iov: [Iov; MAX_IOV],
    n: usize,
    cmp: [Iov; MAX_IOV],
    nc: usize,
    res: [Iov; MAX_IOV],
    nr: usize,
    /// The result buffers' descriptors: an array (vector and message
    /// calls), or the one of a single-buffer call.
    rdesc: *const *mut c_void,
    rdesc1: *mut c_void,
}

impl AtLocal {
    fn new() -> AtLocal {
        AtLocal {
            iov: [Iov::default(); MAX_IOV],
            n: 0,
            cmp: [Iov::default(); MAX_IOV],
            nc: 0,
            res: [Iov::default(); MAX_IOV],
            nr: 0,
            rdesc: std::ptr::null(),
            rdesc1: std::ptr::null_mut(),
        }
    }
}

#[allow(clippy::too_many_arguments)]
/// # Safety
/// Caller's buffer rules.
unsafe fn do_atomic(e: *mut fid_ep, kind: AtomicKind, l: &AtLocal, rma: &[RmaIov], dest: u64, op: u32, dt: u32, ctx: *mut c_void, data: u64, flags: u64, inject: bool) -> isize {
    // SAFETY: checked against the endpoint ops table.
    let Some(h) = (unsafe { ep_of(e as *const fid) }) else { return -(FI_EINVAL as isize) };
    let Some(size) = type_size(dt) else { return -(FI_EOPNOTSUPP as isize) };
    let count: usize = rma.iter().map(|r| r.len).sum();
    if count == 0 || total(&l.iov[..l.n]).map(|t| t / size) == Some(0) && op != FI_ATOMIC_READ {
        return -(FI_EINVAL as isize);
    }
    let a = AtomicOp {
        kind,
        op,
        datatype: dt,
        iov: &l.iov[..l.n],
        compare: &l.cmp[..l.nc],
        result: &l.res[..l.nr],
        result_desc: if l.rdesc.is_null() { Descs(&l.rdesc1) } else { Descs(l.rdesc) },
        rma,
        dest,
        context: ctx as usize,
        data,
        flags,
        no_completion: inject,
    };
    // SAFETY: forwarded contract.
    ssz(unsafe { h.atomic(&a) })
}

/// # Safety
/// `p` NULL or `count` elements of `dt`.
unsafe fn one_ioc(p: *const c_void, count: usize, dt: u32, out: &mut [Iov; MAX_IOV]) -> Result<usize, Error> {
    let ioc = fi_ioc { addr: p as *mut c_void, count };
    // SAFETY: one entry on our stack.
    unsafe { ioc_iovs(&ioc, 1, dt, out) }
}

macro_rules! tryc {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(err) => return err.to_c() as isize,
        }
    };
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn at_write(e: *mut fid_ep, buf: *const c_void, count: usize, _desc: *mut c_void, dest: fi_addr_t, addr: u64, key: u64, dt: fi_datatype, op: fi_op, ctx: *mut c_void) -> isize {
    guard!(EOTHER_S, {
        let mut l = AtLocal::new();
        // SAFETY: fi_atomic contract.
        l.n = tryc!(unsafe { one_ioc(buf, count, dt, &mut l.iov) });
        let rma = [RmaIov { addr, len: count, key }];
        // SAFETY: fi_atomic contract.
        unsafe { do_atomic(e, AtomicKind::Write, &l, &rma, dest, op, dt, ctx, 0, 0, false) }
    })
}
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn at_writev(e: *mut fid_ep, iov: *const fi_ioc, _desc: *mut *mut c_void, count: usize, dest: fi_addr_t, addr: u64, key: u64, dt: fi_datatype, op: fi_op, ctx: *mut c_void) -> isize {
    guard!(EOTHER_S, {
        let mut l = AtLocal::new();
        // SAFETY: fi_atomicv contract.
        l.n = tryc!(unsafe { ioc_iovs(iov, count, dt, &mut l.iov) });
        let n = total(&l.iov[..l.n]).unwrap_or(0) / type_size(dt).unwrap_or(1);
        let rma = [RmaIov { addr, len: n, key }];
        // SAFETY: fi_atomicv contract.
        unsafe { do_atomic(e, AtomicKind::Write, &l, &rma, dest, op, dt, ctx, 0, 0, false) }
    })
}
unsafe extern "C" fn at_writemsg(e: *mut fid_ep, m: *const fi_msg_atomic, flags: u64) -> isize {
    guard!(EOTHER_S, {
        null_check_ssize!(m);
        // SAFETY: m non-NULL.
        let m = unsafe { &*m };
        let mut l = AtLocal::new();
        let mut r = [RmaIov::default(); MAX_IOV];
        // SAFETY: the message names its arrays.
        l.n = tryc!(unsafe { ioc_iovs(m.msg_iov, m.iov_count, m.datatype, &mut l.iov) });
        // SAFETY: as above.
        let k = tryc!(unsafe { remote_iocs(m.rma_iov, m.rma_iov_count, &mut r) });
        // SAFETY: fi_atomicmsg contract.
        unsafe { do_atomic(e, AtomicKind::Write, &l, &r[..k], m.addr, m.op, m.datatype, m.context, m.data, flags, false) }
    })
}
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn at_inject(e: *mut fid_ep, buf: *const c_void, count: usize, dest: fi_addr_t, addr: u64, key: u64, dt: fi_datatype, op: fi_op) -> isize {
    guard!(EOTHER_S, {
        let mut l = AtLocal::new();
        // SAFETY: fi_inject_atomic contract.
        l.n = tryc!(unsafe { one_ioc(buf, count, dt, &mut l.iov) });
        let rma = [RmaIov { addr, len: count, key }];
        // SAFETY: fi_inject_atomic contract.
        unsafe { do_atomic(e, AtomicKind::Write, &l, &rma, dest, op, dt, std::ptr::null_mut(), 0, FI_INJECT, true) }
    })
}
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn at_readwrite(e: *mut fid_ep, buf: *const c_void, count: usize, _desc: *mut c_void, result: *mut c_void, rdesc: *mut c_void, dest: fi_addr_t, addr: u64, key: u64, dt: fi_datatype, op: fi_op, ctx: *mut c_void) -> isize {
    guard!(EOTHER_S, {
        null_check_ssize!(result);
        let mut l = AtLocal::new();
        if op != FI_ATOMIC_READ {
            // SAFETY: fi_fetch_atomic contract.
            l.n = tryc!(unsafe { one_ioc(buf, count, dt, &mut l.iov) });
        }
        // SAFETY: as above.
        l.nr = tryc!(unsafe { one_ioc(result, count, dt, &mut l.res) });
        l.rdesc1 = rdesc;
        let rma = [RmaIov { addr, len: count, key }];
        // SAFETY: fi_fetch_atomic contract.
        unsafe { do_atomic(e, AtomicKind::Fetch, &l, &rma, dest, op, dt, ctx, 0, 0, false) }
    })
}
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn at_readwritev(e: *mut fid_ep, iov: *const fi_ioc, _desc: *mut *mut c_void, count: usize, resultv: *mut fi_ioc, rdesc: *mut *mut c_void, result_count: usize, dest: fi_addr_t, addr: u64, key: u64, dt: fi_datatype, op: fi_op, ctx: *mut c_void) -> isize {
    guard!(EOTHER_S, {
        let mut l = AtLocal::new();
        if op != FI_ATOMIC_READ {
            // SAFETY: fi_fetch_atomicv contract.
            l.n = tryc!(unsafe { ioc_iovs(iov, count, dt, &mut l.iov) });
        }
        // SAFETY: as above.
        l.nr = tryc!(unsafe { ioc_iovs(resultv, result_count, dt, &mut l.res) });
        l.rdesc = rdesc.cast_const();
        let n = total(&l.res[..l.nr]).unwrap_or(0) / type_size(dt).unwrap_or(1);
        let rma = [RmaIov { addr, len: n, key }];
        // SAFETY: fi_fetch_atomicv contract.
        unsafe { do_atomic(e, AtomicKind::Fetch, &l, &rma, dest, op, dt, ctx, 0, 0, false) }
    })
}
unsafe extern "C" fn at_readwritemsg(e: *mut fid_ep, m: *const fi_msg_atomic, resultv: *mut fi_ioc, rdesc: *mut *mut c_void, result_count: usize, flags: u64) -> isize {
    guard!(EOTHER_S, {
        null_check_ssize!(m);
        // SAFETY: m non-NULL.
        let m = unsafe { &*m };
        let mut l = AtLocal::new();
        let mut r = [RmaIov::default(); MAX_IOV];
        if m.op != FI_ATOMIC_READ {
            // SAFETY: the message names its arrays.
            l.n = tryc!(unsafe { ioc_iovs(m.msg_iov, m.iov_count, m.datatype, &mut l.iov) });
        }
        // SAFETY: as above.
        l.nr = tryc!(unsafe { ioc_iovs(resultv, result_count, m.datatype, &mut l.res) });
        l.rdesc = rdesc.cast_const();
        // SAFETY: as above.
        let k = tryc!(unsafe { remote_iocs(m.rma_iov, m.rma_iov_count, &mut r) });
        // SAFETY: fi_fetch_atomicmsg contract.
        unsafe { do_atomic(e, AtomicKind::Fetch, &l, &r[..k], m.addr, m.op, m.datatype, m.context, m.data, flags, false) }
    })
}
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn at_compwrite(e: *mut fid_ep, buf: *const c_void, count: usize, _desc: *mut c_void, compare: *const c_void, _cdesc: *mut c_void, result: *mut c_void, rdesc: *mut c_void, dest: fi_addr_t, addr: u64, key: u64, dt: fi_datatype, op: fi_op, ctx: *mut c_void) -> isize {
    guard!(EOTHER_S, {
        null_check_ssize!(compare, result);
        let mut l = AtLocal::new();
        // SAFETY: fi_compare_atomic contract.
        l.n = tryc!(unsafe { one_ioc(buf, count, dt, &mut l.iov) });
        // SAFETY: as above.
        l.nc = tryc!(unsafe { one_ioc(compare, count, dt, &mut l.cmp) });
        // SAFETY: as above.
        l.nr = tryc!(unsafe { one_ioc(result, count, dt, &mut l.res) });
        l.rdesc1 = rdesc;
        let rma = [RmaIov { addr, len: count, key }];
        // SAFETY: fi_compare_atomic contract.
        unsafe { do_atomic(e, AtomicKind::Compare, &l, &rma, dest, op, dt, ctx, 0, 0, false) }
    })
}
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn at_compwritev(e: *mut fid_ep, iov: *const fi_ioc, _desc: *mut *mut c_void, count: usize, comparev: *const fi_ioc, _cdesc: *mut *mut c_void, compare_count: usize, resultv: *mut fi_ioc, rdesc: *mut *mut c_void, result_count: usize, dest: fi_addr_t, addr: u64, key: u64, dt: fi_datatype, op: fi_op, ctx: *mut c_void) -> isize {
    guard!(EOTHER_S, {
        let mut l = AtLocal::new();
        // SAFETY: fi_compare_atomicv contract.
        l.n = tryc!(unsafe { ioc_iovs(iov, count, dt, &mut l.iov) });
        // SAFETY: as above.
        l.nc = tryc!(unsafe { ioc_iovs(comparev, compare_count, dt, &mut l.cmp) });
        // SAFETY: as above.
        l.nr = tryc!(unsafe { ioc_iovs(resultv, result_count, dt, &mut l.res) });
        l.rdesc = rdesc.cast_const();
        let n = total(&l.iov[..l.n]).unwrap_or(0) / type_size(dt).unwrap_or(1);
        let rma = [RmaIov { addr, len: n, key }];
        // SAFETY: fi_compare_atomicv contract.
        unsafe { do_atomic(e, AtomicKind::Compare, &l, &rma, dest, op, dt, ctx, 0, 0, false) }
    })
}
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn at_compwritemsg(e: *mut fid_ep, m: *const fi_msg_atomic, comparev: *const fi_ioc, _cdesc: *mut *mut c_void, compare_count: usize, resultv: *mut fi_ioc, rdesc: *mut *mut c_void, result_count: usize, flags: u64) -> isize {
    guard!(EOTHER_S, {
        null_check_ssize!(m);
        // SAFETY: m non-NULL.
        let m = unsafe { &*m };
        let mut l = AtLocal::new();
        let mut r = [RmaIov::default(); MAX_IOV];
        // SAFETY: the message names its arrays.
        l.n = tryc!(unsafe { ioc_iovs(m.msg_iov, m.iov_count, m.datatype, &mut l.iov) });
        // SAFETY: as above.
        l.nc = tryc!(unsafe { ioc_iovs(comparev, compare_count, m.datatype, &mut l.cmp) });
        // SAFETY: as above.
        l.nr = tryc!(unsafe { ioc_iovs(resultv, result_count, m.datatype, &mut l.res) });
        l.rdesc = rdesc.cast_const();
        // SAFETY: as above.
        let k = tryc!(unsafe { remote_iocs(m.rma_iov, m.rma_iov_count, &mut r) });
        // SAFETY: fi_compare_atomicmsg contract.
        unsafe { do_atomic(e, AtomicKind::Compare, &l, &r[..k], m.addr, m.op, m.datatype, m.context, m.data, flags, false) }
    })
}

/// # Safety
/// `count` NULL or writable.
unsafe fn valid(e: *mut fid_ep, kind: AtomicKind, dt: u32, op: u32, count: *mut usize) -> c_int {
    null_check!(count);
    // SAFETY: checked against the endpoint ops table.
    let Some(h) = (unsafe { ep_of(e as *const fid) }) else { return -FI_EINVAL };
    match h.atomic_valid(kind, op, dt) {
        Ok(n) => {
            // SAFETY: count non-NULL.
            unsafe { *count = n };
            0
        }
        Err(err) => err.to_c(),
    }
}

unsafe extern "C" fn at_writevalid(e: *mut fid_ep, dt: fi_datatype, op: fi_op, count: *mut usize) -> c_int {
    // SAFETY: fi_atomicvalid contract.
    guard!(-FI_EOTHER, unsafe { valid(e, AtomicKind::Write, dt, op, count) })
}
unsafe extern "C" fn at_readwritevalid(e: *mut fid_ep, dt: fi_datatype, op: fi_op, count: *mut usize) -> c_int {
    // SAFETY: fi_fetch_atomicvalid contract.
    guard!(-FI_EOTHER, unsafe { valid(e, AtomicKind::Fetch, dt, op, count) })
}
unsafe extern "C" fn at_compwritevalid(e: *mut fid_ep, dt: fi_datatype, op: fi_op, count: *mut usize) -> c_int {
    // SAFETY: fi_compare_atomicvalid contract.
    guard!(-FI_EOTHER, unsafe { valid(e, AtomicKind::Compare, dt, op, count) })
}

pub(crate) static ATOMIC_OPS: fi_ops_atomic = fi_ops_atomic {
    size: std::mem::size_of::<fi_ops_atomic>(),
    write: Some(at_write),
    writev: Some(at_writev),
    writemsg: Some(at_writemsg),
    inject: Some(at_inject),
    readwrite: Some(at_readwrite),
    readwritev: Some(at_readwritev),
    readwritemsg: Some(at_readwritemsg),
    compwrite: Some(at_compwrite),
    compwritev: Some(at_compwritev),
    compwritemsg: Some(at_compwritemsg),
    writevalid: Some(at_writevalid),
    readwritevalid: Some(at_readwritevalid),
    compwritevalid: Some(at_compwritevalid),
};
