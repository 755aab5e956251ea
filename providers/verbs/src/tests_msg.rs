//! `FI_EP_MSG` endpoints through the provider traits (`Fabric`, `Domain`,
//! `Endpoint`, `PassiveEndpoint`) and the core's EQ and CQ, the objects
//! the C edge wraps, against the recording stand-ins and their loopback
//! fabric: connection management driven by EQ reads, CM data both ways,
//! reject, shutdown, sends and receives both ways, inject, remote CQ data,
//! RMA write/read/writedata, and bad inputs.

use crate::msg::{INJECT_SIZE, NO_COMPLETION};
use crate::provider::VerbsProvider;
use crate::rc_transport::addr_bytes;
use rfabric_core::abi::*;
use rfabric_core::error::Error;
use rfabric_core::info::Info;
use rfabric_core::objects::cq::CqAttr;
use rfabric_core::objects::eq::{Eq, InfoHooks};
use rfabric_core::objects::wait::Locked;
use rfabric_core::provider::{
    AtomicKind, AtomicOp, Bind, CompletionQueue, ConnReq, Descs, Domain, Endpoint, EqBinding, Fabric, Iov, MrReg, MrReq, PassiveEndpoint, Provider, RmaIov, RmaOp, RxOp, TxOp,
};
use rfabric_ibverbs::standin::{self, CmCall, PortCfg};
use rfabric_ibverbs::sys::*;
use rfabric_ibverbs::{RdmaCm, Verbs};
use std::sync::{Arc, Mutex};

/// Connection requests read from EQs, by the index their info stands for.
static REQS: Mutex<Vec<Option<ConnReq>>> = Mutex::new(Vec::new());

fn to_c(_: &Info, req: Option<ConnReq>) -> usize {
    let mut v = REQS.lock().unwrap();
    v.push(req);
    v.len()
}
fn free_c(_: usize) {}

fn take_req(handle: usize) -> ConnReq {
    REQS.lock().unwrap()[handle - 1].take().unwrap()
}

struct World {
    fabric: Box<dyn Fabric>,
    dom: Box<dyn Domain>,
    info: Info,
}

fn world() -> World {
    standin::add_device("mlx5_0", IBV_NODE_CA, IBV_TRANSPORT_IB, "");
    let gid = std::net::Ipv4Addr::new(10, 0, 0, 5).to_ipv6_mapped().octets();
    standin::set_port("mlx5_0", 1, PortCfg { state: IBV_PORT_ACTIVE, link_layer: IBV_LINK_LAYER_ETHERNET, lid: 0, gids: vec![gid] });
    standin::with(|w| {
        w.loopback = Some(Default::default());
        w.comp_events = true;
    });
    let p = VerbsProvider::with_verbs(Verbs::from_fns(standin::verbs_fns(), None), |_| Vec::new()).with_rdmacm(RdmaCm::from_fns(standin::rdmacm_fns()));
    let info = p.offers().into_iter().next().unwrap();
    assert_eq!(info.ep_type(), FI_EP_MSG);
    let fabric = p.fabric(info.fabric_attr.as_ref().unwrap()).unwrap();
    // SAFETY: FI_THREAD_SAFE (the offer's), kept.
    let dom = unsafe { fabric.domain(&info) }.unwrap();
    World { fabric, dom, info }
}

fn eq(fid: usize) -> EqBinding {
    let mut q = Eq::new(64, FI_WAIT_UNSPEC).unwrap();
    q.set_info_hooks(InfoHooks { to_c, free: free_c });
    EqBinding { eq: Arc::new(Locked::new(q)), fid, context: 0 }
}

/// One EQ read as `fi_eq_read` does it: the drivers' progress, then the
/// queue. `(event, fid, info handle, CM data)`, or the error code.
fn eq_read(b: &EqBinding) -> Result<(u32, usize, usize, Vec<u8>), i32> {
    b.eq.progress();
    let mut buf = [0u8; 256];
    match b.eq.lock().read(&mut buf, 0) {
        Ok((ev, n)) => {
            let fid = u64::from_ne_bytes(buf[0..8].try_into().unwrap()) as usize;
            let info = u64::from_ne_bytes(buf[8..16].try_into().unwrap()) as usize;
            Ok((ev, fid, info, buf[16..n].to_vec()))
        }
        Err(e) => Err(e.0),
    }
}

/// Reads until something other than `-FI_EAGAIN` (the stand-in queues
/// every event at once, so a few reads are enough).
fn eq_next(b: &EqBinding) -> Result<(u32, usize, usize, Vec<u8>), i32> {
    for _ in 0..16 {
        match eq_read(b) {
            Err(e) if e == FI_EAGAIN => continue,
            r => return r,
        }
    }
    Err(FI_EAGAIN)
}

fn cq(d: &dyn Domain) -> Arc<dyn CompletionQueue> {
    cq_wait(d, FI_WAIT_NONE)
}

fn cq_wait(d: &dyn Domain, wait_obj: u32) -> Arc<dyn CompletionQueue> {
    d.cq_open(&CqAttr { size: 64, format: FI_CQ_FORMAT_DATA, wait_obj }).unwrap()
}

/// `(op_context, flags, len, data)` of the next `fi_cq_data_entry`.
fn cq_next(cq: &Arc<dyn CompletionQueue>) -> Option<(usize, u64, usize, u64)> {
    let mut b = [0u8; 40];
    match cq.read(&mut b, 1, None) {
        Ok(1) => {
            let w = |i: usize| u64::from_ne_bytes(b[i * 8..i * 8 + 8].try_into().unwrap());
            Some((w(0) as usize, w(1), w(2) as usize, w(4)))
        }
        _ => None,
    }
}

fn reg(d: &dyn Domain, buf: &mut [u8]) -> MrReg {
    d.mr_reg(&MrReq { addr: buf.as_mut_ptr() as usize, len: buf.len(), access: FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE, ..Default::default() }).unwrap()
}

fn desc(m: &MrReg) -> *mut libc::c_void {
    m.local.as_ref().unwrap().desc()
}

const SRV: &str = "10.0.0.5:7471";

/// Both sides of one connection, connected.
struct Pair {
    w: World,
    pep: Box<dyn PassiveEndpoint>,
    peq: EqBinding,
    cli: Box<dyn Endpoint>,
    ceq: EqBinding,
    ccq: Arc<dyn CompletionQueue>,
    srv: Box<dyn Endpoint>,
    seq: EqBinding,
    scq: Arc<dyn CompletionQueue>,
}

fn listening(w: &World) -> (Box<dyn PassiveEndpoint>, EqBinding) {
    let mut pinfo = w.info.clone();
    pinfo.src_addr = Some(addr_bytes(&SRV.parse().unwrap()));
    let pep = w.fabric.passive_ep(&pinfo).unwrap();
    let peq = eq(0x100);
    pep.bind_eq(&peq, 0).unwrap();
    pep.listen().unwrap();
    (pep, peq)
}

fn client(w: &World) -> (Box<dyn Endpoint>, EqBinding, Arc<dyn CompletionQueue>) {
    let cli = w.dom.endpoint(&w.info).unwrap();
    let ceq = eq(0x200);
    let ccq = cq(&*w.dom);
    cli.bind(Bind::Eq(&ceq), 0).unwrap();
    cli.bind(Bind::Cq(&ccq), FI_TRANSMIT | FI_RECV).unwrap();
    cli.enable().unwrap();
    (cli, ceq, ccq)
}

fn pair() -> Pair {
    pair_with(FI_WAIT_NONE)
}

/// A connected pair whose server CQ has `wait_obj`.
fn pair_with(wait_obj: u32) -> Pair {
    let w = world();
    let (pep, peq) = listening(&w);
    let (cli, ceq, ccq) = client(&w);
    cli.connect(&addr_bytes(&SRV.parse().unwrap()), b"hello from cli").unwrap();
    // The client's channel: address and route resolved, QP made,
    // rdma_connect; nothing for the application yet.
    assert_eq!(eq_read(&ceq), Err(FI_EAGAIN));
    let (ev, fid, handle, data) = eq_next(&peq).unwrap();
    assert_eq!((ev, fid, data.as_slice()), (FI_CONNREQ, 0x100, &b"hello from cli"[..]));
    let srv = w.dom.accept_endpoint(&w.info, take_req(handle)).unwrap();
    let seq = eq(0x300);
    let scq = cq_wait(&*w.dom, wait_obj);
    srv.bind(Bind::Eq(&seq), 0).unwrap();
    srv.bind(Bind::Cq(&scq), FI_TRANSMIT | FI_RECV).unwrap();
    srv.enable().unwrap();
    srv.accept(b"welcome").unwrap();
    assert_eq!(eq_next(&seq), Ok((FI_CONNECTED, 0x300, 0, Vec::new())));
    assert_eq!(eq_next(&ceq), Ok((FI_CONNECTED, 0x200, 0, b"welcome".to_vec())));
    Pair { w, pep, peq, cli, ceq, ccq, srv, seq, scq }
}

unsafe fn send(ep: &dyn Endpoint, buf: &[u8], d: *mut libc::c_void, ctx: usize, flags: u64, data: u64, inject: bool) -> Result<(), Error> {
    let iov = [Iov { base: buf.as_ptr() as usize, len: buf.len() }];
    let desc = [d];
    let op = TxOp { iov: &iov, desc: Descs(desc.as_ptr()), dest: 0, context: ctx, tag: 0, data, flags, tagged: false, no_completion: inject };
    // SAFETY: the caller's buffers outlive the operation.
    unsafe { ep.send(&op) }
}

unsafe fn recv(ep: &dyn Endpoint, buf: &mut [u8], d: *mut libc::c_void, ctx: usize) -> Result<(), Error> {
    let iov = [Iov { base: buf.as_mut_ptr() as usize, len: buf.len() }];
    let desc = [d];
    let op = RxOp { iov: &iov, desc: Descs(desc.as_ptr()), src: 0, context: ctx, tag: 0, ignore: 0, flags: 0, tagged: false };
    // SAFETY: the caller's buffers outlive the operation.
    unsafe { ep.recv(&op) }
}

#[allow(clippy::too_many_arguments)]
unsafe fn rma(ep: &dyn Endpoint, write: bool, buf: &mut [u8], d: *mut libc::c_void, raddr: u64, key: u64, ctx: usize, flags: u64, data: u64) -> Result<(), Error> {
    let iov = [Iov { base: buf.as_mut_ptr() as usize, len: buf.len() }];
    let desc = [d];
    let r = [RmaIov { addr: raddr, len: buf.len(), key }];
    let op = RmaOp { iov: &iov, desc: Descs(desc.as_ptr()), rma: &r, dest: 0, context: ctx, data, flags, no_completion: false };
    // SAFETY: the caller's buffers outlive the operation.
    unsafe { if write { ep.rma_write(&op) } else { ep.rma_read(&op) } }
}

#[test]
fn connect_accept_with_cm_data_both_ways_then_send_recv_both_ways() {
    let p = pair();
    let calls = standin::take_cm_calls();
    assert!(calls.iter().any(|c| matches!(c, CmCall::Connect { private_data, rnr_retry_count: 7, .. } if private_data == b"hello from cli")), "{calls:?}");
    assert!(calls.iter().any(|c| matches!(c, CmCall::Accept { private_data, .. } if private_data == b"welcome")), "{calls:?}");
    assert!(calls.iter().any(|c| matches!(c, CmCall::Listen { .. })), "{calls:?}");
    let d = &*p.w.dom;
    let mut sbuf = *b"ping from client";
    let mut rbuf = [0u8; 64];
    let (smr, rmr) = (reg(d, &mut sbuf), reg(d, &mut rbuf));
    let mut sbuf2 = *b"pong from server!";
    let mut rbuf2 = [0u8; 64];
    let (smr2, rmr2) = (reg(d, &mut sbuf2), reg(d, &mut rbuf2));
    // SAFETY: the buffers live to the end of the test.
    unsafe {
        recv(&*p.srv, &mut rbuf, desc(&rmr), 11).unwrap();
        recv(&*p.cli, &mut rbuf2, desc(&rmr2), 12).unwrap();
        send(&*p.cli, &sbuf, desc(&smr), 21, 0, 0, false).unwrap();
        send(&*p.srv, &sbuf2, desc(&smr2), 22, 0, 0, false).unwrap();
    }
    assert_eq!(cq_next(&p.scq), Some((11, FI_MSG | FI_RECV, 16, 0)));
    assert_eq!(&rbuf[..16], b"ping from client");
    assert_eq!(cq_next(&p.scq), Some((22, FI_MSG | FI_SEND, 0, 0)));
    assert_eq!(cq_next(&p.ccq), Some((21, FI_MSG | FI_SEND, 0, 0)));
    assert_eq!(cq_next(&p.ccq), Some((12, FI_MSG | FI_RECV, 17, 0)));
    assert_eq!(&rbuf2[..17], b"pong from server!");
    assert_eq!(cq_next(&p.ccq), None);
    // The work requests: the buffers as given, with their MRs' local keys
    // (the stand-in's are 0x1000 below its remote keys).
    let sent = standin::with(|w| std::mem::take(&mut w.sent));
    assert_eq!(sent[0].opcode, IBV_WR_SEND);
    assert_eq!(sent[0].sge0, (sbuf.as_ptr() as u64, 16, smr.key as u32 - 0x1000));
    assert_eq!(sent[0].wr_id, 21);
    assert_eq!(sent[0].send_flags, IBV_SEND_SIGNALED);
    drop(p.pep);
    drop(p.peq);
}

#[test]
fn a_receive_posted_before_the_connection_waits_for_the_qp() {
    let w = world();
    let (_pep, peq) = listening(&w);
    let (cli, ceq, ccq) = client(&w);
    let mut rbuf = [0u8; 32];
    let rmr = reg(&*w.dom, &mut rbuf);
    // SAFETY: the buffer outlives the test.
    unsafe { recv(&*cli, &mut rbuf, desc(&rmr), 5).unwrap() };
    assert!(standin::with(|w| w.posted_recvs.is_empty()));
    cli.connect(&addr_bytes(&SRV.parse().unwrap()), b"").unwrap();
    // The client's connection moves on as its EQ is read.
    assert_eq!(standin::with(|w| w.posted_recvs.len()), 0);
    assert_eq!(eq_read(&ceq), Err(FI_EAGAIN));
    let (_, _, h, _) = eq_next(&peq).unwrap();
    assert_eq!(standin::with(|w| w.posted_recvs.len()), 1, "posted when the route was resolved");
    let srv = w.dom.accept_endpoint(&w.info, take_req(h)).unwrap();
    let seq = eq(3);
    let scq = cq(&*w.dom);
    srv.bind(Bind::Eq(&seq), 0).unwrap();
    srv.bind(Bind::Cq(&scq), FI_TRANSMIT | FI_RECV).unwrap();
    srv.accept(b"").unwrap();
    assert_eq!(eq_next(&ceq).map(|e| e.0), Ok(FI_CONNECTED));
    assert_eq!(eq_next(&seq).map(|e| e.0), Ok(FI_CONNECTED));
    let msg = *b"early";
    // An inject needs no descriptor.
    // SAFETY: inline: copied during the call.
    unsafe { send(&*srv, &msg, std::ptr::null_mut(), 0, FI_INJECT, 0, true).unwrap() };
    assert_eq!(cq_next(&ccq), Some((5, FI_MSG | FI_RECV, 5, 0)));
    assert_eq!(&rbuf[..5], b"early");
    // The inject's completion is not reported.
    assert_eq!(cq_next(&scq), None);
    let sent = standin::with(|w| std::mem::take(&mut w.sent));
    assert_eq!((sent[0].opcode, sent[0].send_flags, sent[0].wr_id), (IBV_WR_SEND, IBV_SEND_SIGNALED | IBV_SEND_INLINE, NO_COMPLETION));
}

#[test]
fn senddata_and_rma_write_read_writedata() {
    let p = pair();
    let d = &*p.w.dom;
    let mut target = [0u8; 64];
    let tmr = reg(d, &mut target);
    let mut rx = [0u8; 64];
    let rxmr = reg(d, &mut rx);
    let mut src = *b"written by rdma!";
    let smr = reg(d, &mut src);
    let mut back = [0u8; 16];
    let bmr = reg(d, &mut back);
    let taddr = target.as_ptr() as u64;
    // SAFETY: the buffers live to the end of the test.
    unsafe {
        // fi_senddata: SEND_WITH_IMM; the receive reports the data.
        recv(&*p.srv, &mut rx, desc(&rxmr), 1).unwrap();
        send(&*p.cli, &src, desc(&smr), 2, FI_REMOTE_CQ_DATA, 0xabcd_1234, false).unwrap();
        assert_eq!(cq_next(&p.scq), Some((1, FI_MSG | FI_RECV | FI_REMOTE_CQ_DATA, 16, 0xabcd_1234)));
        assert_eq!(cq_next(&p.ccq), Some((2, FI_MSG | FI_SEND, 0, 0)));
        // fi_write
        rma(&*p.cli, true, &mut src, desc(&smr), taddr + 8, tmr.key, 3, 0, 0).unwrap();
        assert_eq!(cq_next(&p.ccq), Some((3, FI_RMA | FI_WRITE, 0, 0)));
        assert_eq!(&target[8..24], b"written by rdma!");
        // fi_read
        rma(&*p.cli, false, &mut back, desc(&bmr), taddr + 8, tmr.key, 4, 0, 0).unwrap();
        assert_eq!(cq_next(&p.ccq), Some((4, FI_RMA | FI_READ, 0, 0)));
        assert_eq!(&back, b"written by rdma!");
        // fi_writedata: consumes a posted receive at the target.
        recv(&*p.srv, &mut rx, desc(&rxmr), 5).unwrap();
        rma(&*p.cli, true, &mut src, desc(&smr), taddr + 32, tmr.key, 6, FI_REMOTE_CQ_DATA, 77).unwrap();
        assert_eq!(cq_next(&p.ccq), Some((6, FI_RMA | FI_WRITE, 0, 0)));
        assert_eq!(cq_next(&p.scq), Some((5, FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA, 16, 77)));
        assert_eq!(&target[32..48], b"written by rdma!");
    }
    let sent = standin::with(|w| std::mem::take(&mut w.sent));
    let ops: Vec<_> = sent.iter().map(|s| (s.opcode, s.rkey, s.imm_data)).collect();
    let k = tmr.key as u32;
    assert_eq!(
        ops,
        vec![(IBV_WR_SEND_WITH_IMM, 0, 0xabcd_1234u32.to_be()), (IBV_WR_RDMA_WRITE, k, 0), (IBV_WR_RDMA_READ, k, 0), (IBV_WR_RDMA_WRITE_WITH_IMM, k, 77u32.to_be())]
    );
    assert_eq!(sent[1].remote_addr, taddr + 8);
}

#[test]
fn shutdown_gives_the_peer_fi_shutdown() {
    let p = pair();
    p.cli.shutdown(0).unwrap();
    assert_eq!(eq_next(&p.seq), Ok((FI_SHUTDOWN, 0x300, 0, Vec::new())));
    // Nothing for the side that shut down, and it can no longer send.
    assert_eq!(eq_read(&p.ceq), Err(FI_EAGAIN));
    let b = [0u8; 4];
    // SAFETY: inline.
    assert_eq!(unsafe { send(&*p.cli, &b, std::ptr::null_mut(), 0, FI_INJECT, 0, true) }, Err(Error(FI_ENOTCONN)));
    assert_eq!(p.cli.shutdown(0), Err(Error(FI_ENOTCONN)));
    assert!(standin::take_cm_calls().iter().any(|c| matches!(c, CmCall::Disconnect(_))));
    // Closing the server destroys its QP and id.
    p.srv.close().unwrap();
    let calls = standin::take_cm_calls();
    assert!(calls.iter().any(|c| matches!(c, CmCall::DestroyQp(_))) && calls.iter().any(|c| matches!(c, CmCall::DestroyId(_))), "{calls:?}");
    let _ = (&p.pep, &p.peq, &p.ccq, &p.scq);
}

#[test]
fn reject_reaches_the_client_as_econnrefused_with_the_data() {
    let w = world();
    let (pep, peq) = listening(&w);
    let (cli, ceq, _ccq) = client(&w);
    cli.connect(&addr_bytes(&SRV.parse().unwrap()), b"let me in").unwrap();
    // Nothing reaches the listener before the client's EQ is read.
    assert_eq!(eq_read(&peq), Err(FI_EAGAIN));
    assert_eq!(eq_read(&ceq), Err(FI_EAGAIN));
    let (ev, _, h, data) = eq_next(&peq).unwrap();
    assert_eq!((ev, data.as_slice()), (FI_CONNREQ, &b"let me in"[..]));
    assert_eq!(pep.reject(take_req(h), &[0; 57]).err(), Some(Error(FI_EINVAL)));
    // The failed reject consumed the request; a second request is rejected
    // with data.
    let (cli2, ceq2, _ccq2) = client(&w);
    cli2.connect(&addr_bytes(&SRV.parse().unwrap()), b"again").unwrap();
    assert_eq!(eq_read(&ceq2), Err(FI_EAGAIN));
    let (_, _, h2, _) = eq_next(&peq).unwrap();
    pep.reject(take_req(h2), b"go away").unwrap();
    assert_eq!(eq_next(&ceq2), Err(FI_EAVAIL));
    let e = ceq2.eq.lock().readerr(None, fi_version(1, 20), 0).unwrap();
    assert_eq!(e.err, FI_ECONNREFUSED);
    assert_eq!(ceq2.eq.lock().last_err_data(), b"go away");
    assert!(standin::take_cm_calls().iter().any(|c| matches!(c, CmCall::Reject { private_data, .. } if private_data == b"go away")));
    let _ = ceq;
}

#[test]
fn bad_inputs_are_documented_codes() {
    let w = world();
    let (_pep, _peq) = listening(&w);
    let (cli, _ceq, _ccq) = client(&w);
    let mut buf = [0u8; 128];
    let mr = reg(&*w.dom, &mut buf);
    // SAFETY: the buffers outlive the calls, which fail.
    unsafe {
        // Unconnected.
        assert_eq!(send(&*cli, &buf[..8], desc(&mr), 1, 0, 0, false), Err(Error(FI_ENOTCONN)));
        assert_eq!(rma(&*cli, true, &mut buf[..8], desc(&mr), 0x1000, 1, 1, 0, 0), Err(Error(FI_ENOTCONN)));
    }
    // Oversize CM data.
    assert_eq!(cli.connect(&addr_bytes(&SRV.parse().unwrap()), &[0; 57]), Err(Error(FI_EINVAL)));
    // Not an address.
    assert_eq!(cli.connect(b"nonsense", b""), Err(Error(FI_EINVAL)));
    // Accept on an endpoint of no request.
    assert_eq!(cli.accept(b""), Err(Error(FI_EOPBADSTATE)));
    // An endpoint without EQ cannot connect or enable.
    let lone = w.dom.endpoint(&w.info).unwrap();
    assert_eq!(lone.connect(&addr_bytes(&SRV.parse().unwrap()), b""), Err(Error(FI_ENOEQ)));
    assert_eq!(lone.enable(), Err(Error(FI_ENOEQ)));
    // FI_OPT_CM_DATA_SIZE is 56.
    let mut v = [0u8; 8];
    assert_eq!(cli.getopt(FI_OPT_ENDPOINT, FI_OPT_CM_DATA_SIZE, &mut v), Ok(8));
    assert_eq!(usize::from_ne_bytes(v), 56);

    let p = pair();
    let mut b2 = [0u8; 128];
    let mr2 = reg(&*p.w.dom, &mut b2);
    // SAFETY: as above.
    unsafe {
        // FI_MR_LOCAL: a send or receive without a descriptor.
        assert_eq!(send(&*p.cli, &b2[..8], std::ptr::null_mut(), 1, 0, 0, false), Err(Error(FI_EINVAL)));
        assert_eq!(recv(&*p.cli, &mut b2[..8], std::ptr::null_mut(), 1), Err(Error(FI_EINVAL)));
        assert_eq!(rma(&*p.cli, false, &mut b2[..8], std::ptr::null_mut(), 0x1000, 1, 1, 0, 0), Err(Error(FI_EINVAL)));
        // A descriptor that is not one.
        let junk = [0u64; 4];
        assert_eq!(send(&*p.cli, &b2[..8], junk.as_ptr() as *mut libc::c_void, 1, 0, 0, false), Err(Error(FI_EINVAL)));
        // An inject over the inline size.
        assert_eq!(send(&*p.cli, &b2[..INJECT_SIZE + 1], std::ptr::null_mut(), 0, FI_INJECT, 0, true), Err(Error(FI_EINVAL)));
        // More local bytes than the remote buffer.
        let iov = [Iov { base: b2.as_ptr() as usize, len: 64 }];
        let dd = [desc(&mr2)];
        let r = [RmaIov { addr: 0x1000, len: 32, key: 1 }];
        let op = RmaOp { iov: &iov, desc: Descs(dd.as_ptr()), rma: &r, dest: 0, context: 0, data: 0, flags: 0, no_completion: false };
        assert_eq!(p.cli.rma_write(&op), Err(Error(FI_EINVAL)));
    }
    // Nothing was posted by any of them.
    assert!(standin::with(|w| w.sent.is_empty()));
    let _ = (&p.pep, &p.peq, &p.ceq, &p.seq, &p.ccq, &p.scq, &p.srv);
}

fn readable(fd: i32) -> bool {
    let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    // SAFETY: one pollfd, no wait.
    unsafe { libc::poll(&mut p, 1, 0) == 1 }
}

#[test]
fn the_wait_fd_turns_readable_on_a_completion_through_the_completion_channel() {
    let p = pair_with(FI_WAIT_FD);
    let fd = p.scq.wait_fd().expect("FI_WAIT_FD gives an fd");
    let d = &*p.w.dom;
    let mut rx = [0u8; 32];
    let rmr = reg(d, &mut rx);
    // SAFETY: the buffer outlives the test.
    unsafe { recv(&*p.srv, &mut rx, desc(&rmr), 9).unwrap() };
    standin::take_calls();
    // Nothing there: trywait arms the endpoint's verbs CQ.
    assert_eq!(p.scq.trywait(), Ok(()));
    let calls = standin::take_calls();
    let armed: Vec<usize> = calls.iter().filter_map(|c| if let standin::Call::ReqNotifyCq { cq, solicited_only: 0 } = c { Some(*cq) } else { None }).collect();
    assert_eq!(armed.len(), 1, "{calls:?}");
    assert!(!readable(fd));
    // With nothing to come, a timed sread comes back empty.
    let mut e = [0u8; 40];
    assert_eq!(p.scq.sread(&mut e, 1, None, 1), Err(Error(FI_EAGAIN)));
    assert_eq!(p.scq.trywait(), Ok(()));
    let msg = *b"wake up";
    // SAFETY: inline.
    unsafe { send(&*p.cli, &msg, std::ptr::null_mut(), 0, FI_INJECT, 0, true).unwrap() };
    // The receive completion on the armed CQ is an event on the channel.
    assert!(readable(fd));
    assert_eq!(p.scq.trywait(), Err(Error(FI_EAGAIN)));
    let calls = standin::take_calls();
    assert!(calls.iter().any(|c| matches!(c, standin::Call::GetCqEvent { cq, .. } if *cq == armed[0])), "{calls:?}");
    assert!(calls.iter().any(|c| matches!(c, standin::Call::AckCqEvents { cq, n: 1 } if *cq == armed[0])), "{calls:?}");
    assert_eq!(p.scq.sread(&mut e, 1, None, -1), Ok(1));
    assert_eq!(u64::from_ne_bytes(e[0..8].try_into().unwrap()), 9);
    // Read empty, a trywait leaves the fd quiet again.
    assert_eq!(p.scq.trywait(), Ok(()));
    assert!(!readable(fd));
    // fi_cq_signal wakes a waiter without an entry.
    p.scq.signal().unwrap();
    assert_eq!(p.scq.sread(&mut e, 1, None, -1), Err(Error(FI_EAGAIN)));
    let _ = (&p.pep, &p.peq, &p.ceq, &p.seq, &p.ccq);
}

#[test]
fn atomics_are_the_8_byte_cswap_and_fetch_add_of_infiniband() {
    let p = pair();
    let d = &*p.w.dom;
    // fi_query_atomic / fi_atomicvalid: exactly these.
    for dt in [FI_UINT64, FI_INT64] {
        assert_eq!(d.query_atomic(AtomicKind::Fetch, FI_SUM, dt), Ok((1, 8)));
        assert_eq!(d.query_atomic(AtomicKind::Compare, FI_CSWAP, dt), Ok((1, 8)));
        assert_eq!(p.cli.atomic_valid(AtomicKind::Fetch, FI_SUM, dt), Ok(1));
    }
    for (k, op, dt) in [(AtomicKind::Write, FI_SUM, FI_UINT64), (AtomicKind::Fetch, FI_SUM, FI_UINT32), (AtomicKind::Fetch, FI_BOR, FI_UINT64), (AtomicKind::Compare, FI_CSWAP_LE, FI_UINT64), (AtomicKind::Fetch, FI_ATOMIC_READ, FI_DOUBLE)] {
        assert_eq!(d.query_atomic(k, op, dt), Err(Error(FI_EOPNOTSUPP)), "{k:?} {op} {dt}");
    }
    let mut target = [0u64; 2];
    target[1] = 40;
    // SAFETY: a u64 array as bytes, for its registration.
    let tbytes = unsafe { std::slice::from_raw_parts_mut(target.as_mut_ptr().cast::<u8>(), 16) };
    let tmr = reg(d, tbytes);
    let taddr = target.as_ptr() as u64 + 8;
    let mut res = [0u64; 1];
    // SAFETY: as above.
    let rbytes = unsafe { std::slice::from_raw_parts_mut(res.as_mut_ptr().cast::<u8>(), 8) };
    let rmr = reg(d, rbytes);
    let two: u64 = 2;
    let forty_two: u64 = 42;
    let seven: u64 = 7;
    let operand = |v: &u64| [Iov { base: v as *const u64 as usize, len: 8 }];
    let resv = [Iov { base: res.as_mut_ptr() as usize, len: 8 }];
    let rd = [desc(&rmr)];
    let r = [RmaIov { addr: taddr, len: 1, key: tmr.key }];
    let add = operand(&two);
    let op = AtomicOp { kind: AtomicKind::Fetch, op: FI_SUM, datatype: FI_UINT64, iov: &add, compare: &[], result: &resv, result_desc: Descs(rd.as_ptr()), rma: &r, dest: 0, context: 31, data: 0, flags: 0, no_completion: false };
    // SAFETY: the buffers live to the end of the test.
    unsafe { p.cli.atomic(&op).unwrap() };
    assert_eq!(cq_next(&p.ccq), Some((31, FI_ATOMIC | FI_READ, 0, 0)));
    assert_eq!((target[1], res[0]), (42, 40));
    let swap = operand(&seven);
    let cmp = operand(&forty_two);
    let cs = AtomicOp { kind: AtomicKind::Compare, op: FI_CSWAP, iov: &swap, compare: &cmp, context: 32, ..op };
    // SAFETY: as above.
    unsafe { p.cli.atomic(&cs).unwrap() };
    assert_eq!(cq_next(&p.ccq), Some((32, FI_ATOMIC | FI_READ, 0, 0)));
    assert_eq!((target[1], res[0]), (7, 42));
    let sent = standin::with(|w| std::mem::take(&mut w.sent));
    assert_eq!(sent.iter().map(|s| (s.opcode, s.remote_addr)).collect::<Vec<_>>(), vec![(IBV_WR_ATOMIC_FETCH_AND_ADD, taddr), (IBV_WR_ATOMIC_CMP_AND_SWP, taddr)]);
    // Bad inputs: no result descriptor, an unaligned target, two elements,
    // an unsupported operation.
    // SAFETY: as above; all fail before posting.
    unsafe {
        assert_eq!(p.cli.atomic(&AtomicOp { result_desc: Descs::NONE, ..op }), Err(Error(FI_EINVAL)));
        let ur = [RmaIov { addr: taddr + 4, len: 1, key: tmr.key }];
        assert_eq!(p.cli.atomic(&AtomicOp { rma: &ur, ..op }), Err(Error(FI_EINVAL)));
        let tr = [RmaIov { addr: taddr, len: 2, key: tmr.key }];
        assert_eq!(p.cli.atomic(&AtomicOp { rma: &tr, ..op }), Err(Error(FI_EINVAL)));
        assert_eq!(p.cli.atomic(&AtomicOp { op: FI_PROD, ..op }), Err(Error(FI_EOPNOTSUPP)));
    }
    assert!(standin::with(|w| w.sent.is_empty()));
    let _ = (&p.pep, &p.peq, &p.ceq, &p.seq, &p.scq, &p.srv);
}

#[test]
fn a_peer_that_goes_away_before_the_accept_fails_the_connect() {
    let w = world();
    let (_pep, peq) = listening(&w);
    let (cli, ceq, _ccq) = client(&w);
    cli.connect(&addr_bytes(&SRV.parse().unwrap()), b"").unwrap();
    assert_eq!(eq_read(&ceq), Err(FI_EAGAIN));
    let (_, _, h, _) = eq_next(&peq).unwrap();
    // The request's endpoint is opened and closed without fi_accept.
    let srv = w.dom.accept_endpoint(&w.info, take_req(h)).unwrap();
    srv.close().unwrap();
    drop(srv);
    assert_eq!(eq_next(&ceq), Err(FI_EAVAIL));
    assert_eq!(ceq.eq.lock().readerr(None, fi_version(1, 20), 0).unwrap().err, FI_ECONNREFUSED);
    let b = [0u8; 4];
    // SAFETY: inline.
    assert_eq!(unsafe { send(&*cli, &b, std::ptr::null_mut(), 0, FI_INJECT, 0, true) }, Err(Error(FI_ENOTCONN)));
}

#[test]
fn counters_count_and_selective_completion_leaves_out_what_it_should() {
    let w = world();
    let (_pep, peq) = listening(&w);
    // The client: its CQ with FI_SELECTIVE_COMPLETION, a counter for sends
    // and receives.
    let cli = w.dom.endpoint(&w.info).unwrap();
    let ceq = eq(0x200);
    let ccq = cq(&*w.dom);
    let cntr = w.dom.cntr_open(FI_CNTR_EVENTS_COMP, FI_WAIT_NONE).unwrap();
    cli.bind(Bind::Eq(&ceq), 0).unwrap();
    cli.bind(Bind::Cq(&ccq), FI_TRANSMIT | FI_RECV | FI_SELECTIVE_COMPLETION).unwrap();
    cli.bind(Bind::Cntr(&cntr), FI_SEND | FI_RECV).unwrap();
    assert_eq!(cli.bind(Bind::Cntr(&cntr), FI_SEND), Err(Error(FI_EINVAL)), "bound for sends before");
    assert_eq!(cli.bind(Bind::Cq(&ccq), 0), Err(Error(FI_EBADFLAGS)));
    cli.enable().unwrap();
    cli.connect(&addr_bytes(&SRV.parse().unwrap()), b"").unwrap();
    assert_eq!(eq_read(&ceq), Err(FI_EAGAIN));
    let (_, _, h, _) = eq_next(&peq).unwrap();
    let srv = w.dom.accept_endpoint(&w.info, take_req(h)).unwrap();
    let seq = eq(3);
    let scq = cq(&*w.dom);
    srv.bind(Bind::Eq(&seq), 0).unwrap();
    srv.bind(Bind::Cq(&scq), FI_TRANSMIT | FI_RECV).unwrap();
    srv.accept(b"").unwrap();
    assert_eq!(eq_next(&seq).map(|e| e.0), Ok(FI_CONNECTED));
    assert_eq!(eq_next(&ceq).map(|e| e.0), Ok(FI_CONNECTED));
    let mut rx = [0u8; 16];
    let rmr = reg(&*w.dom, &mut rx);
    let mut tx = *b"0123456789";
    let tmr = reg(&*w.dom, &mut tx);
    // SAFETY: the buffers outlive the test.
    unsafe {
        recv(&*srv, &mut rx, desc(&rmr), 1).unwrap();
        recv(&*srv, &mut rx, desc(&rmr), 2).unwrap();
        // Without FI_COMPLETION: counted, not reported.
        send(&*cli, &tx, desc(&tmr), 10, 0, 0, false).unwrap();
        // With it: both.
        send(&*cli, &tx, desc(&tmr), 11, FI_COMPLETION, 0, false).unwrap();
    }
    assert_eq!(cq_next(&ccq), Some((11, FI_MSG | FI_SEND, 0, 0)));
    assert_eq!(cq_next(&ccq), None);
    assert_eq!(cntr.read(), 2);
    assert_eq!(cntr.readerr(), 0);
    assert_eq!(cq_next(&scq).map(|c| c.0), Some(1));
    assert_eq!(cq_next(&scq).map(|c| c.0), Some(2));
    let _ = (&cli, &srv);
}

fn rx_attr(size: usize, iov_limit: usize, caps: u64) -> fi_rx_attr {
    // SAFETY: fi_rx_attr is integers only.
    let mut a: fi_rx_attr = unsafe { std::mem::zeroed() };
    (a.size, a.iov_limit, a.caps) = (size, iov_limit, caps);
    a
}

type Shared = (Box<dyn Endpoint>, Arc<dyn CompletionQueue>, Box<dyn Endpoint>, Arc<dyn CompletionQueue>, EqBinding, EqBinding);

/// A client connected to an endpoint accepted on `pep` and bound to `srx`
/// (before `fi_enable`, which makes its QP): `(client, its CQ, server
/// endpoint, its CQ)`.
fn connect_shared(w: &World, peq: &EqBinding, srx: &dyn Endpoint, n: usize) -> Shared {
    let (cli, ceq, ccq) = client(w);
    cli.connect(&addr_bytes(&SRV.parse().unwrap()), b"").unwrap();
    assert_eq!(eq_read(&ceq), Err(FI_EAGAIN));
    let (ev, _, h, _) = eq_next(peq).unwrap();
    assert_eq!(ev, FI_CONNREQ);
    let srv = w.dom.accept_endpoint(&w.info, take_req(h)).unwrap();
    let seq = eq(0x300 + n);
    let scq = cq(&*w.dom);
    srv.bind(Bind::Srx(srx), 0).unwrap();
    srv.bind(Bind::Eq(&seq), 0).unwrap();
    srv.bind(Bind::Cq(&scq), FI_TRANSMIT | FI_RECV).unwrap();
    srv.enable().unwrap();
    srv.accept(b"").unwrap();
    assert_eq!(eq_next(&seq).map(|e| e.0), Ok(FI_CONNECTED));
    assert_eq!(eq_next(&ceq).map(|e| e.0), Ok(FI_CONNECTED));
    (cli, ccq, srv, scq, ceq, seq)
}

#[test]
fn two_accepted_endpoints_share_the_receives_of_one_srx() {
    let w = world();
    assert_eq!(w.info.domain_attr.as_ref().unwrap().max_ep_srx_ctx, 1);
    let (_pep, peq) = listening(&w);
    let srx = w.dom.srx_context(&rx_attr(0, 0, 0)).unwrap();
    let created = standin::take_calls();
    assert!(created.iter().any(|c| matches!(c, standin::Call::CreateSrq { max_wr: 384, max_sge: 4, .. })), "{created:?}");
    let (cli1, ccq1, srv1, scq1, _ceq1, _seq1) = connect_shared(&w, &peq, &*srx, 1);
    let (cli2, ccq2, srv2, scq2, _ceq2, _seq2) = connect_shared(&w, &peq, &*srx, 2);
    // Both server QPs were made with the one SRQ.
    let srqs: Vec<usize> = standin::with(|w| w.qp_srq.values().copied().collect());
    assert_eq!(srqs.len(), 2, "{srqs:?}");
    assert_eq!(srqs[0], srqs[1]);
    let d = &*w.dom;
    let mut rb1 = [0u8; 32];
    let mut rb2 = [0u8; 32];
    let (m1, m2) = (reg(d, &mut rb1), reg(d, &mut rb2));
    // SAFETY: the buffers live to the end of the test.
    unsafe {
        recv(&*srx, &mut rb1, desc(&m1), 101).unwrap();
        recv(&*srx, &mut rb2, desc(&m2), 102).unwrap();
    }
    assert_eq!(standin::with(|w| (w.posted_srq_recvs.len(), w.posted_recvs.len())), (2, 0));
    // A bound endpoint posts no receives of its own.
    let mut own = [0u8; 8];
    let om = reg(d, &mut own);
    // SAFETY: as above.
    assert_eq!(unsafe { recv(&*srv1, &mut own, desc(&om), 9) }, Err(Error(FI_EOPBADSTATE)));
    // Each client's message lands in a receive of the srx, and completes
    // on the CQ of the endpoint it arrived on.
    let (a, b) = (*b"from client two", *b"from client one!");
    // SAFETY: inline sends: copied during the calls.
    unsafe {
        send(&*cli2, &a, std::ptr::null_mut(), 0, FI_INJECT, 0, true).unwrap();
        send(&*cli1, &b, std::ptr::null_mut(), 0, FI_INJECT, 0, true).unwrap();
    }
    assert_eq!(cq_next(&scq2), Some((101, FI_MSG | FI_RECV, 15, 0)));
    assert_eq!(cq_next(&scq1), Some((102, FI_MSG | FI_RECV, 16, 0)));
    assert_eq!(&rb1[..15], b"from client two");
    assert_eq!(&rb2[..16], b"from client one!");
    assert_eq!((cq_next(&scq1), cq_next(&scq2), cq_next(&ccq1), cq_next(&ccq2)), (None, None, None, None));
    // Binding once the QP exists is refused: the client is connected.
    assert_eq!(cli1.bind(Bind::Srx(&*srx), 0), Err(Error(FI_EOPBADSTATE)));
    for e in [&cli1, &cli2, &srv1, &srv2] {
        e.close().unwrap();
    }
    drop((srv1, srv2));
    srx.close().unwrap();
    drop(srx);
    let calls = standin::take_calls();
    assert!(calls.iter().any(|c| matches!(c, standin::Call::DestroySrq(_))), "{calls:?}");
}

#[test]
fn srx_bad_inputs() {
    let w = world();
    assert_eq!(w.dom.srx_context(&rx_attr(0, 99, 0)).err(), Some(Error(FI_EINVAL)));
    assert_eq!(w.dom.srx_context(&rx_attr(1 << 20, 0, 0)).err(), Some(Error(FI_EINVAL)));
    assert_eq!(w.dom.srx_context(&rx_attr(0, 0, FI_TAGGED | FI_RECV)).err(), Some(Error(FI_EOPNOTSUPP)));
    let srx = w.dom.srx_context(&rx_attr(16, 2, FI_MSG | FI_RECV)).unwrap();
    // More buffers than the srx's iov_limit.
    let mut b = [0u8; 8];
    let m = reg(&*w.dom, &mut b);
    let iov = [Iov { base: b.as_mut_ptr() as usize, len: 4 }, Iov { base: b.as_mut_ptr() as usize + 4, len: 2 }, Iov { base: b.as_mut_ptr() as usize + 6, len: 2 }];
    let descs = [desc(&m); 3];
    let op = RxOp { iov: &iov, desc: Descs(descs.as_ptr()), src: 0, context: 1, tag: 0, ignore: 0, flags: 0, tagged: false };
    // SAFETY: the buffer outlives the call (it is refused).
    assert_eq!(unsafe { srx.recv(&op) }, Err(Error(FI_EINVAL)));
    // An endpoint with receives posted, or bound twice, is refused.
    let ep = w.dom.endpoint(&w.info).unwrap();
    // SAFETY: the buffer outlives the endpoint's pending receive.
    unsafe { recv(&*ep, &mut b, desc(&m), 3).unwrap() };
    assert_eq!(ep.bind(Bind::Srx(&*srx), 0), Err(Error(FI_EOPBADSTATE)));
    ep.close().unwrap();
    let ep2 = w.dom.endpoint(&w.info).unwrap();
    assert_eq!(ep2.bind(Bind::Srx(&*srx), 1), Err(Error(FI_EBADFLAGS)));
    ep2.bind(Bind::Srx(&*srx), 0).unwrap();
    assert_eq!(ep2.bind(Bind::Srx(&*srx), 0), Err(Error(FI_EOPBADSTATE)));
    // Not a verbs srx.
    assert_eq!(ep2.bind(Bind::Srx(&*ep2), 0), Err(Error(FI_EINVAL)));
    // An ibv_create_srq that fails.
    standin::fail("ibv_create_srq", libc::ENOMEM);
    assert!(w.dom.srx_context(&rx_attr(0, 0, 0)).is_err());
}

#[test]
fn hints_asking_for_a_shared_receive_context_match_the_msg_offer() {
    let w = world();
    let hints = Info { ep_attr: Some(rfabric_core::info::EpAttr { ep_type: FI_EP_MSG, rx_ctx_cnt: FI_SHARED_CONTEXT, ..Default::default() }), ..Default::default() };
    assert!(rfabric_core::getinfo::check("verbs", &w.info, &hints, fi_version(1, 20)).is_ok());
    let out = rfabric_core::getinfo::narrow(&w.info, &hints);
    assert_eq!(out.ep_attr.unwrap().rx_ctx_cnt, FI_SHARED_CONTEXT);
    // Without shared receive contexts the same hints match nothing.
    let mut none = w.info.clone();
    none.domain_attr.as_mut().unwrap().max_ep_srx_ctx = 0;
    assert!(rfabric_core::getinfo::check("verbs", &none, &hints, fi_version(1, 20)).is_err());
}
