//! The static inline functions and macros of `<infiniband/verbs.h>` (rdma-core
//! 44) this crate uses, as Rust functions doing what the header does. They
//! have no symbol in libibverbs: the data path calls through the context's
//! `ibv_context_ops` table, `ibv_query_port` through `verbs_context` when the
//! provider fills its slot, `ibv_reg_mr` picks between two exported
//! functions.
//!
//! One departure: where the header calls a table slot without looking, a
//! NULL slot here returns `EOPNOTSUPP` instead of jumping to address 0.

use crate::fns::VerbsFns;
use crate::sys::*;
use libc::{c_int, c_void};
use std::mem::{offset_of, size_of};

/// `verbs_get_ctx(ctx)`: the `verbs_context` that holds `ctx`, or NULL when
/// `ctx->abi_compat` is not `__VERBS_ABI_IS_EXTENDED`.
///
/// # Safety
/// `ctx` must point to a live `ibv_context`.
pub unsafe fn verbs_get_ctx(ctx: *mut ibv_context) -> *mut verbs_context {
    // SAFETY: the caller promises `ctx` is a live context.
    if unsafe { (*ctx).abi_compat } != VERBS_ABI_IS_EXTENDED {
        return std::ptr::null_mut();
    }
    // The header's open-coded container_of. Computed with wrapping
    // arithmetic: a context marked extended is the last member of a
    // verbs_context (libibverbs' promise), so this is its start.
    ctx.cast::<u8>().wrapping_sub(offset_of!(verbs_context, context)).cast::<verbs_context>()
}

/// `verbs_get_ctx_op(ctx, query_port)`: the `verbs_context` of `ctx` if it is
/// extended, its provider's `sz` covers the `query_port` slot, and the slot
/// is set; else NULL (the header checks in that order).
///
/// # Safety
/// `ctx` must point to a live `ibv_context`.
pub unsafe fn verbs_get_ctx_op_query_port(ctx: *mut ibv_context) -> Option<VerbsQueryPortFn> {
    // SAFETY: the caller promises `ctx` is live.
    let vctx = unsafe { verbs_get_ctx(ctx) };
    if vctx.is_null() {
        return None;
    }
    // SAFETY: an extended context is the last member of a verbs_context,
    // whose `sz` sits immediately before it (the header's layout, checked by
    // `layout`), so `sz` is readable.
    let sz = unsafe { (*vctx).sz };
    if sz < size_of::<verbs_context>() - offset_of!(verbs_context, query_port) {
        return None;
    }
    // SAFETY: `sz` says the provider's verbs_context reaches down to the
    // `query_port` slot (it "grows up": slots below `sz` bytes before its
    // end are the provider's), so the slot is readable.
    unsafe { (*vctx).query_port }
}

/// `ibv_query_port(context, port_num, port_attr)`: the header's macro
/// (`___ibv_query_port`). Through `verbs_context.query_port` with
/// `sizeof(struct ibv_port_attr)` when the provider has it; else the whole
/// `*port_attr` is zeroed and the exported `ibv_query_port` (which fills the
/// `_compat_ibv_port_attr` prefix) is called.
///
/// # Safety
/// `ctx` must be a live context of the library `fns` came from (or of the
/// stand-in `fns` is); `port_attr` must be valid for writes.
pub unsafe fn ibv_query_port(fns: &VerbsFns, ctx: *mut ibv_context, port_num: u8, port_attr: *mut ibv_port_attr) -> c_int {
    // SAFETY: the caller promises `ctx` is live.
    match unsafe { verbs_get_ctx_op_query_port(ctx) } {
        // SAFETY: the slot is the provider's query_port for this context;
        // `port_attr` is writable for `size_of::<ibv_port_attr>()` bytes.
        Some(query_port) => unsafe { query_port(ctx, port_num, port_attr, size_of::<ibv_port_attr>()) },
        None => {
            // SAFETY: `port_attr` is valid for writes (caller); the exported
            // function writes a prefix of it.
            unsafe {
                std::ptr::write_bytes(port_attr, 0, 1);
                (fns.query_port)(ctx, port_num, port_attr)
            }
        }
    }
}

/// `ibv_reg_mr(pd, addr, length, access)` with an access mask known only at
/// run time: the header's macro then takes `__ibv_reg_mr`'s second branch,
/// `ibv_reg_mr_iova2(pd, addr, length, (uintptr_t)addr, access)`.
///
/// # Safety
/// `pd` must be a live protection domain of `fns`' library; the memory must
/// stay mapped while the region is registered (the device reads and writes
/// it as `access` allows).
pub unsafe fn ibv_reg_mr(fns: &VerbsFns, pd: *mut ibv_pd, addr: *mut c_void, length: usize, access: u32) -> *mut ibv_mr {
    // SAFETY: forwarded from the caller.
    unsafe { (fns.reg_mr_iova2)(pd, addr, length, addr as usize as u64, access) }
}

/// `ibv_poll_cq(cq, num_entries, wc)`: `cq->context->ops.poll_cq(cq, num_entries, wc)`.
///
/// # Safety
/// `cq` must be a live CQ; `wc` must be valid for `num_entries` writes.
pub unsafe fn ibv_poll_cq(cq: *mut ibv_cq, num_entries: c_int, wc: *mut ibv_wc) -> c_int {
    // SAFETY: a live CQ points at its live context (the caller's promise).
    match unsafe { (*(*cq).context).ops.poll_cq } {
        // SAFETY: the provider's poll_cq for this CQ; arguments as promised.
        Some(f) => unsafe { f(cq, num_entries, wc) },
        None => -libc::EOPNOTSUPP,
    }
}

/// `ibv_req_notify_cq(cq, solicited_only)`: `cq->context->ops.req_notify_cq(cq, solicited_only)`.
///
/// # Safety
/// `cq` must be a live CQ.
pub unsafe fn ibv_req_notify_cq(cq: *mut ibv_cq, solicited_only: c_int) -> c_int {
    // SAFETY: a live CQ points at its live context (the caller's promise).
    match unsafe { (*(*cq).context).ops.req_notify_cq } {
        // SAFETY: the provider's req_notify_cq for this CQ.
        Some(f) => unsafe { f(cq, solicited_only) },
        None => libc::EOPNOTSUPP,
    }
}

/// `ibv_post_send(qp, wr, bad_wr)`: `qp->context->ops.post_send(qp, wr, bad_wr)`.
///
/// # Safety
/// `qp` must be a live QP; `wr` a valid list of work requests whose
/// scatter/gather entries name registered memory that stays valid until
/// their completions; `bad_wr` valid for a write.
pub unsafe fn ibv_post_send(qp: *mut ibv_qp, wr: *mut ibv_send_wr, bad_wr: *mut *mut ibv_send_wr) -> c_int {
    // SAFETY: a live QP points at its live context (the caller's promise).
    match unsafe { (*(*qp).context).ops.post_send } {
        // SAFETY: the provider's post_send for this QP; arguments as promised.
        Some(f) => unsafe { f(qp, wr, bad_wr) },
        None => libc::EOPNOTSUPP,
    }
}

/// `ibv_post_recv(qp, wr, bad_wr)`: `qp->context->ops.post_recv(qp, wr, bad_wr)`.
///
/// # Safety
/// As for `ibv_post_send`.
pub unsafe fn ibv_post_recv(qp: *mut ibv_qp, wr: *mut ibv_recv_wr, bad_wr: *mut *mut ibv_recv_wr) -> c_int {
    // SAFETY: a live QP points at its live context (the caller's promise).
    match unsafe { (*(*qp).context).ops.post_recv } {
        // SAFETY: the provider's post_recv for this QP; arguments as promised.
        Some(f) => unsafe { f(qp, wr, bad_wr) },
        None => libc::EOPNOTSUPP,
    }
}

/// `ibv_post_srq_recv(srq, wr, bad_wr)`: `srq->context->ops.post_srq_recv(srq, wr, bad_wr)`.
///
/// # Safety
/// `srq` must be a live SRQ; `wr` a valid list of work requests whose
/// scatter/gather entries name registered memory that stays valid until
/// their completions; `bad_wr` valid for a write.
pub unsafe fn ibv_post_srq_recv(srq: *mut ibv_srq, wr: *mut ibv_recv_wr, bad_wr: *mut *mut ibv_recv_wr) -> c_int {
    // SAFETY: a live SRQ points at its live context (the caller's promise).
    match unsafe { (*(*srq).context).ops.post_srq_recv } {
        // SAFETY: the provider's post_srq_recv for this SRQ; arguments as promised.
        Some(f) => unsafe { f(srq, wr, bad_wr) },
        None => libc::EOPNOTSUPP,
    }
}
