//! The header's static inline functions against fake contexts: each must
//! call the right slot of `ibv_context_ops` (every other slot traps) or of
//! `verbs_context`, with the caller's arguments, and hand back its result.

use super::standin::{self, Call};
use crate::inline;
use crate::sys::*;
use std::mem::{offset_of, size_of};
use std::ptr::null_mut;

/// A fake QP and CQ on a fake context (plain, or inside a verbs_context).
struct Fake {
    ctx: *mut ibv_context,
    qp: Box<ibv_qp>,
    cq: Box<ibv_cq>,
}

impl Fake {
    fn new(extended: bool) -> Fake {
        let ctx = standin::new_context(null_mut(), extended);
        Fake {
            ctx,
            qp: Box::new(ibv_qp { context: ctx, ..Default::default() }),
            cq: Box::new(ibv_cq { context: ctx, ..Default::default() }),
        }
    }
    fn qp(&mut self) -> *mut ibv_qp {
        &mut *self.qp
    }
    fn cq(&mut self) -> *mut ibv_cq {
        &mut *self.cq
    }
    fn ops(&mut self) -> &mut ibv_context_ops {
        // SAFETY: the context is live until `drop`; no other reference to it
        // is held while this one is used.
        unsafe { &mut (*self.ctx).ops }
    }
    fn vctx(&mut self) -> &mut verbs_context {
        // SAFETY: an extended fake context is the last member of a live
        // boxed verbs_context.
        unsafe { &mut *inline::verbs_get_ctx(self.ctx) }
    }
}

impl Drop for Fake {
    fn drop(&mut self) {
        standin::free_context(self.ctx);
    }
}

#[test]
fn post_send_calls_ops_post_send() {
    let mut f = Fake::new(false);
    let mut wr = ibv_send_wr::default();
    let mut bad: *mut ibv_send_wr = null_mut();
    let qp = f.qp();
    // SAFETY: a fake QP on a fake context whose slots record.
    let rc = unsafe { inline::ibv_post_send(qp, &mut wr, &mut bad) };
    assert_eq!(rc, 0);
    let (w, b) = (&mut wr as *mut _ as usize, &mut bad as *mut _ as usize);
    assert_eq!(standin::take_calls(), vec![Call::PostSend { qp: qp as usize, wr: w, bad: b }]);
    // Its result comes back unchanged, and so does bad_wr.
    standin::with(|w| w.post_rc = libc::EINVAL);
    // SAFETY: as above.
    let rc = unsafe { inline::ibv_post_send(qp, &mut wr, &mut bad) };
    assert_eq!((rc, bad), (libc::EINVAL, &mut wr as *mut _));
}

#[test]
fn post_recv_calls_ops_post_recv() {
    let mut f = Fake::new(false);
    let mut wr = ibv_recv_wr::default();
    let mut bad: *mut ibv_recv_wr = null_mut();
    let qp = f.qp();
    standin::with(|w| w.post_rc = libc::ENOMEM);
    // SAFETY: a fake QP on a fake context whose slots record.
    let rc = unsafe { inline::ibv_post_recv(qp, &mut wr, &mut bad) };
    assert_eq!((rc, bad), (libc::ENOMEM, &mut wr as *mut _));
    let (w, b) = (&mut wr as *mut _ as usize, &mut bad as *mut _ as usize);
    assert_eq!(standin::take_calls(), vec![Call::PostRecv { qp: qp as usize, wr: w, bad: b }]);
}

#[test]
fn poll_cq_and_req_notify_cq_call_their_slots() {
    let mut f = Fake::new(true);
    let cq = f.cq();
    let mut wc = [ibv_wc::default(); 8];
    // SAFETY: a fake CQ; `wc` holds 8 entries.
    let n = unsafe { inline::ibv_poll_cq(cq, 8, wc.as_mut_ptr()) };
    assert_eq!((n, wc[0].wr_id), (1, 42));
    // SAFETY: a fake CQ.
    assert_eq!(unsafe { inline::ibv_req_notify_cq(cq, 0) }, 0);
    assert_eq!(
        standin::take_calls(),
        vec![
            Call::PollCq { cq: cq as usize, n: 8, wc: wc.as_ptr() as usize },
            Call::ReqNotifyCq { cq: cq as usize, solicited_only: 0 },
        ]
    );
    standin::with(|w| w.post_rc = -libc::EIO);
    // SAFETY: as above.
    assert_eq!(unsafe { inline::ibv_poll_cq(cq, 8, wc.as_mut_ptr()) }, -libc::EIO);
}

#[test]
fn a_null_slot_is_eopnotsupp() {
    let mut f = Fake::new(false);
    let ops = f.ops();
    ops.post_send = None;
    ops.post_recv = None;
    ops.poll_cq = None;
    ops.req_notify_cq = None;
    let (qp, cq) = (f.qp(), f.cq());
    let mut bad = null_mut();
    let mut rbad = null_mut();
    // SAFETY: fake objects; the slots are NULL, so nothing is called.
    unsafe {
        assert_eq!(inline::ibv_post_send(qp, &mut ibv_send_wr::default(), &mut bad), libc::EOPNOTSUPP);
        assert_eq!(inline::ibv_post_recv(qp, &mut ibv_recv_wr::default(), &mut rbad), libc::EOPNOTSUPP);
        assert_eq!(inline::ibv_poll_cq(cq, 1, &mut ibv_wc::default()), -libc::EOPNOTSUPP);
        assert_eq!(inline::ibv_req_notify_cq(cq, 1), libc::EOPNOTSUPP);
    }
    assert_eq!(standin::take_calls(), vec![]);
}

#[test]
fn verbs_get_ctx_is_the_containing_verbs_context() {
    let mut f = Fake::new(true);
    let v = f.vctx() as *mut verbs_context;
    assert_eq!(f.ctx as usize - v as usize, offset_of!(verbs_context, context));
    let g = Fake::new(false);
    // SAFETY: a live fake context.
    assert!(unsafe { inline::verbs_get_ctx(g.ctx) }.is_null());
}

/// `inline::ibv_query_port` on `f` with a struct full of 0xff.
fn query_port(f: &Fake) -> ibv_port_attr {
    let fns = standin::verbs_fns();
    let mut attr = ibv_port_attr::default();
    // SAFETY: a plain C struct; any bytes are a valid value.
    unsafe { std::ptr::write_bytes(&mut attr, 0xff, 1) };
    // SAFETY: a live fake context; `attr` is writable.
    assert_eq!(unsafe { inline::ibv_query_port(&fns, f.ctx, 1, &mut attr) }, 0);
    attr
}

#[test]
fn query_port_through_verbs_context_with_the_struct_size() {
    let f = Fake::new(true);
    let a = query_port(&f);
    assert_eq!((a.state, a.link_layer), (IBV_PORT_ACTIVE, IBV_LINK_LAYER_ETHERNET));
    assert_eq!(
        standin::take_calls(),
        vec![Call::QueryPortVctx { ctx: f.ctx as usize, port: 1, len: size_of::<ibv_port_attr>() }]
    );
}

#[test]
fn query_port_of_a_plain_context_zeroes_then_calls_the_export() {
    let f = Fake::new(false);
    let a = query_port(&f);
    // The export fills a prefix; the rest was zeroed first.
    assert_eq!((a.state, a.link_layer, a.lid), (IBV_PORT_DOWN, IBV_LINK_LAYER_INFINIBAND, 7));
    assert_eq!((a.port_cap_flags2, a.flags, a.sm_lid), (0, 0, 0));
    assert_eq!(standin::take_calls(), vec![Call::QueryPortExported { ctx: f.ctx as usize, port: 1, zeroed: true }]);
}

#[test]
fn query_port_checks_sz_and_the_slot_as_the_header_does() {
    let full = size_of::<verbs_context>() - offset_of!(verbs_context, query_port);
    let exported = |f: &Fake| Call::QueryPortExported { ctx: f.ctx as usize, port: 1, zeroed: true };

    // A provider's verbs_context one byte short of the slot: compat path.
    let mut f = Fake::new(true);
    f.vctx().sz = full - 1;
    query_port(&f);
    assert_eq!(standin::take_calls(), vec![exported(&f)]);

    // Exactly reaching it: the slot.
    f.vctx().sz = full;
    query_port(&f);
    assert!(matches!(standin::take_calls()[..], [Call::QueryPortVctx { .. }]));

    // Large enough, but the provider left the slot NULL: compat path.
    f.vctx().query_port = None;
    query_port(&f);
    assert_eq!(standin::take_calls(), vec![exported(&f)]);
}

#[test]
fn reg_mr_never_calls_the_plain_export() {
    // With an access mask known only at run time, the header's
    // `ibv_reg_mr` macro calls ibv_reg_mr_iova2(pd, addr, len, addr, access),
    // even for masks without optional bits.
    let fns = standin::verbs_fns();
    let ctx = standin::new_context(null_mut(), false);
    let mut pd = ibv_pd { context: ctx, handle: 9 };
    let addr = 0x1000_0000usize as *mut libc::c_void;
    // SAFETY: the stand-in only records and boxes a fake region.
    let mr = unsafe { inline::ibv_reg_mr(&fns, &mut pd, addr, 4096, IBV_ACCESS_LOCAL_WRITE) };
    let p = &mut pd as *mut _ as usize;
    assert_eq!(
        standin::take_calls(),
        vec![Call::RegMrIova2 { pd: p, addr: 0x1000_0000, length: 4096, iova: 0x1000_0000, access: IBV_ACCESS_LOCAL_WRITE }]
    );
    // SAFETY: the fake region just made, freed once.
    unsafe { (fns.dereg_mr)(mr) };
    standin::free_context(ctx);
}
