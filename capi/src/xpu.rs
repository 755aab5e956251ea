//! `fi_xpu_ctx` (the `xpu_ctx` slot of `fi_ops_domain`) and the
//! `fid_xpu_ctx` handle: validation of `struct fi_xpu_attr`, `query`,
//! `close`. The context itself is `rfabric_core::xpu::XpuCtx`.

use crate::domain::{ours, DomainHandle, DOMAIN_FI_OPS};
use libc::{c_char, c_int, c_void};
use rfabric_core::abi::*;
use rfabric_core::xpu::XpuCtx;
use std::sync::Arc;

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
#[allow(dead_code)] // used by the CQ, counter and endpoint exports
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
