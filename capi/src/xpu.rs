//! `fi_xpu_ctx` (the `xpu_ctx` slot of `fi_ops_domain`) and the
//! `fid_xpu_ctx` handle: validation of `struct fi_xpu_attr`, `query`,
//! `close`. The context itself is `rfabric_core::xpu::XpuCtx`.

use crate::domain::{cntr_fi_ops, cq_fi_ops, ours, CntrHandle, CqHandle, DomainHandle, DOMAIN_FI_OPS};
use libc::{c_char, c_int, c_void};
use rfabric_core::abi::*;
use rfabric_core::xpu::{CompletionRing, XpuCounter, XpuCtx};
use std::sync::{Arc, Mutex};

#[repr(C)]
pub(crate) struct XpuCtxHandle {
    fid: fid_xpu_ctx,
    pub(crate) ctx: Arc<XpuCtx>,
    domain: *const DomainHandle,
}

enosys_fn!(ctx_bind(*mut fid, *mut fid, u64) -> c_int);
enosys_fn!(ctx_control(*mut fid, c_int, *mut c_void) -> c_int);
enosys_fn!(ctx_ops_open(*mut fid, *const c_char, u64, *mut *mut c_void, *mut c_void) -> c_int);
enosys_fn!(ctx_ops_set(*mut fid, *const c_char, u64, *mut c_void, *mut c_void) -> c_int);

unsafe extern "C" fn ctx_tostr(f: *const fid, buf: *mut c_char, len: usize) -> c_int {
    guard!(-FI_EOTHER, {
        null_check!(f, buf);
        // SAFETY: checked against our ops table.
        let Some(h) = (unsafe { ours::<XpuCtxHandle>(f, &XPU_CTX_FI_OPS) }) else { return -FI_EINVAL };
        // SAFETY: buf holds len bytes.
        unsafe { crate::domain::put_cstr(buf, len, &format!("xpu_ctx shm device {}", h.ctx.device)) };
        0
    })
}

unsafe extern "C" fn ctx_close(f: *mut fid) -> c_int {
    guard!(-FI_EOTHER, {
        // SAFETY: checked against our ops table.
        let Some(h) = (unsafe { ours::<XpuCtxHandle>(f, &XPU_CTX_FI_OPS) }) else { return -FI_EINVAL };
        // SAFETY: the domain outlives its children (its refcount).
        unsafe { (*h.domain).children.put() };
        // SAFETY: created by Box::into_raw in domain_xpu_ctx; closed once.
        // Exported objects keep their own reference to the context.
        drop(unsafe { Box::from_raw(f as *mut XpuCtxHandle) });
        0
    })
}

unsafe extern "C" fn ctx_query(c: *mut fid_xpu_ctx, attr: *mut fi_xpu_ctx_attr) -> c_int {
    guard!(-FI_EOTHER, {
        null_check!(c, attr);
        // SAFETY: checked against our ops table.
        let Some(h) = (unsafe { ours::<XpuCtxHandle>(c as *const fid, &XPU_CTX_FI_OPS) }) else { return -FI_EINVAL };
        // SAFETY: attr non-NULL, a whole fi_xpu_ctx_attr (caller).
        unsafe { attr.write(h.ctx.query()) };
        0
    })
}

pub(crate) static XPU_CTX_FI_OPS: fi_ops = fi_ops {
    size: std::mem::size_of::<fi_ops>(),
    close: Some(ctx_close),
    bind: Some(ctx_bind),
    control: Some(ctx_control),
    ops_open: Some(ctx_ops_open),
    tostr: Some(ctx_tostr),
    ops_set: Some(ctx_ops_set),
};

static XPU_CTX_OPS: fi_ops_xpu_ctx = fi_ops_xpu_ctx { size: std::mem::size_of::<fi_ops_xpu_ctx>(), query: Some(ctx_query) };

/// `fi_xpu_ctx(domain, attr, &ctx, context)`.
pub(crate) unsafe extern "C" fn domain_xpu_ctx(d: *mut fid_domain, attr: *mut fi_xpu_attr, out: *mut *mut fid_xpu_ctx, context: *mut c_void) -> c_int {
    guard!(-FI_EOTHER, {
        null_check!(attr, out);
        // SAFETY: checked against our ops table.
        let Some(h) = (unsafe { ours::<DomainHandle>(d as *const fid, &DOMAIN_FI_OPS) }) else { return -FI_EINVAL };
        // SAFETY: attr non-NULL, a whole fi_xpu_attr (the caller's).
        let a = unsafe { attr.read() };
        // SAFETY: a.ops is NULL or the application's fi_xpu_ops, of which
        // Callbacks::from_c reads `size` first and no more than it covers.
        let ctx = match unsafe { XpuCtx::open(a.iface, a.device, a.ops, h.api_version) } {
            Ok(c) => c,
            Err(e) => return e.to_c(),
        };
        h.children.get();
        let b = Box::new(XpuCtxHandle {
            fid: fid_xpu_ctx {
                fid: fid { fclass: FI_CLASS_XPU_CTX, context, ops: &XPU_CTX_FI_OPS as *const fi_ops as *mut fi_ops },
                ops: &XPU_CTX_OPS as *const fi_ops_xpu_ctx as *mut fi_ops_xpu_ctx,
            },
            ctx,
            domain: h,
        });
        // SAFETY: out non-NULL.
        unsafe { *out = Box::into_raw(b) as *mut fid_xpu_ctx };
        0
    })
}

/// The context behind an `xpu_ctx` member of an attribute struct: `None`
/// for NULL, `Err` for a pointer that is not one of our contexts.
///
/// # Safety
/// `p` is NULL or points to a readable `struct fid`.
pub(crate) unsafe fn ctx_of(p: *mut fid_xpu_ctx) -> Result<Option<Arc<XpuCtx>>, c_int> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: caller's contract; the ops table is compared before the cast.
    match unsafe { ours::<XpuCtxHandle>(p as *const fid, &XPU_CTX_FI_OPS) } {
        Some(h) => Ok(Some(h.ctx.clone())),
        None => Err(-FI_EINVAL),
    }
}

// ---- exported CQs and counters ------------------------------------------
//
// Objects opened with an XPU context are recorded here, by handle address,
// with what their export created. Only control calls (open, export, close)
// look at this table.

enum XpuObj {
    Cq { ctx: Arc<XpuCtx>, entries: usize, ring: Option<Arc<CompletionRing>> },
    Cntr { ctx: Arc<XpuCtx>, words: Option<Arc<XpuCounter>> },
}

static OBJS: Mutex<Vec<(usize, XpuObj)>> = Mutex::new(Vec::new());

fn objs() -> std::sync::MutexGuard<'static, Vec<(usize, XpuObj)>> {
    OBJS.lock().unwrap_or_else(|e| e.into_inner())
}

/// The `xpu_ctx` member of a CQ or counter attribute struct, read only from
/// callers of API 2.0 or later (a 1.x struct ends before it).
///
/// # Safety
/// `p` points to the member inside the caller's attribute struct when
/// `api_version` is 2.0 or later.
pub(crate) unsafe fn attr_ctx(p: *const *mut fid_xpu_ctx, api_version: u32) -> Result<Option<Arc<XpuCtx>>, c_int> {
    if api_version < fi_version(2, 0) {
        return Ok(None);
    }
    // SAFETY: caller's contract.
    let c = unsafe { p.read() };
    // SAFETY: c is NULL or the application's context handle.
    unsafe { ctx_of(c) }
}

/// Record a CQ opened with an XPU context (`size`: its `fi_cq_attr.size`).
pub(crate) fn cq_opened(handle: usize, ctx: Option<Arc<XpuCtx>>, size: usize) {
    if let Some(ctx) = ctx {
        let entries = if size == 0 { 1024 } else { size.clamp(2, 1 << 20).next_power_of_two() };
        objs().push((handle, XpuObj::Cq { ctx, entries, ring: None }));
    }
}

/// Record a counter opened with an XPU context.
pub(crate) fn cntr_opened(handle: usize, ctx: Option<Arc<XpuCtx>>) {
    if let Some(ctx) = ctx {
        objs().push((handle, XpuObj::Cntr { ctx, words: None }));
    }
}

/// Forget a closed object; its device memory goes back to the application
/// when the last user (an endpoint's proxy, for instance) lets go.
pub(crate) fn closed(handle: usize) {
    objs().retain(|(h, _)| *h != handle);
}

fn export_common(handle: usize, flags: u64) -> Result<fid_xpu, c_int> {
    if flags != 0 {
        return Err(-FI_EBADFLAGS);
    }
    let mut t = objs();
    let Some((_, obj)) = t.iter_mut().find(|(h, _)| *h == handle) else {
        rfabric_core::fi_warn!("shm", FI_LOG_DOMAIN, "export: object was opened without an XPU context");
        return Err(-FI_EINVAL);
    };
    let made = match obj {
        XpuObj::Cq { ring: Some(_), .. } | XpuObj::Cntr { words: Some(_), .. } => return Err(-FI_EALREADY),
        XpuObj::Cq { ctx, entries, ring } => ctx.completion_ring(*entries).map(|r| {
            let h = r.handle();
            *ring = Some(Arc::new(r));
            h
        }),
        XpuObj::Cntr { ctx, words } => ctx.counter().map(|c| {
            let h = c.handle();
            *words = Some(Arc::new(c));
            h
        }),
    };
    made.map_err(|e| e.to_c())
}

/// The exported ring of a CQ, for an endpoint's proxy.
#[allow(dead_code)] // used by the endpoint export
pub(crate) fn cq_ring(handle: usize) -> Option<Arc<CompletionRing>> {
    objs().iter().find_map(|(h, o)| match o {
        XpuObj::Cq { ring, .. } if *h == handle => ring.clone(),
        _ => None,
    })
}

/// The exported words of a counter, for an endpoint's proxy.
#[allow(dead_code)] // used by the endpoint export
pub(crate) fn cntr_words(handle: usize) -> Option<Arc<XpuCounter>> {
    objs().iter().find_map(|(h, o)| match o {
        XpuObj::Cntr { words, .. } if *h == handle => words.clone(),
        _ => None,
    })
}

/// `fi_cq_export_xpu`.
pub(crate) unsafe extern "C" fn cq_export_xpu(cq: *mut fid_cq, flags: u64, out: *mut fid_xpu_cq) -> c_int {
    guard!(-FI_EOTHER, {
        null_check!(out);
        // SAFETY: checked against the CQ ops table before any use.
        if unsafe { ours::<CqHandle>(cq as *const fid, cq_fi_ops()) }.is_none() {
            return -FI_EINVAL;
        }
        match export_common(cq as usize, flags) {
            Ok(h) => {
                // SAFETY: out non-NULL, a fid_xpu_cq.
                unsafe { out.write(fid_xpu_cq { fid: h }) };
                0
            }
            Err(e) => e,
        }
    })
}

/// `fi_cntr_export_xpu`.
pub(crate) unsafe extern "C" fn cntr_export_xpu(c: *mut fid_cntr, flags: u64, out: *mut fid_xpu_cntr) -> c_int {
    guard!(-FI_EOTHER, {
        null_check!(out);
        // SAFETY: checked against the counter ops table before any use.
        if unsafe { ours::<CntrHandle>(c as *const fid, cntr_fi_ops()) }.is_none() {
            return -FI_EINVAL;
        }
        match export_common(c as usize, flags) {
            Ok(h) => {
                // SAFETY: out non-NULL, a fid_xpu_cntr.
                unsafe { out.write(fid_xpu_cntr { fid: h }) };
                0
            }
            Err(e) => e,
        }
    })
}
