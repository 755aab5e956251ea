//! The verbs provider's `FI_EP_MSG` endpoints through the C entry points
//! and ops tables (`fi_getinfo`, `fi_fabric`, `fi_eq_open`, `fi_domain`,
//! `fi_passive_ep`, `fi_listen`, `fi_connect`, `fi_eq_read`, `fi_endpoint`
//! on the `FI_CONNREQ`'s info, `fi_accept`, `fi_mr_reg`, `fi_send`,
//! `fi_recv`, `fi_writedata`, `fi_cq_read`, `fi_control(FI_GETWAIT)`,
//! `fi_shutdown`, `fi_srx_context` shared by two accepted endpoints,
//! `fi_close`), with the provider table holding only a
//! verbs provider over the recording stand-ins (thread-local: everything
//! runs in one test, on one thread). Its own test binary, so no other
//! test builds the provider table first.
#![cfg(feature = "verbs")]

// Linked for its entry points, which are reached by symbol below.
extern crate rfabric_capi;

use libc::{c_char, c_int, c_void};
use rfabric_core::abi::*;
use rfabric_ibverbs::standin::{self, CmCall, PortCfg};
use rfabric_ibverbs::sys::*;
use rfabric_ibverbs::{RdmaCm, Verbs};
use rfabric_verbs::VerbsProvider;
use std::ptr::{null, null_mut};

// The library's current-version entry points (`fi_getinfo@@FABRIC_1.10`,
// `fi_freeinfo@@FABRIC_1.10`, `fi_fabric@@FABRIC_1.1`).
extern "C" {
    fn rf_fi_getinfo(version: u32, node: *const c_char, service: *const c_char, flags: u64, hints: *const fi_info, info: *mut *mut fi_info) -> c_int;
    fn rf_fi_freeinfo(info: *mut fi_info);
    fn rf_fi_fabric(attr: *mut fi_fabric_attr, fabric: *mut *mut fid_fabric, context: *mut c_void) -> c_int;
}

fn sin(ip: [u8; 4], port: u16) -> libc::sockaddr_in {
    libc::sockaddr_in { sin_family: libc::AF_INET as libc::sa_family_t, sin_port: port.to_be(), sin_addr: libc::in_addr { s_addr: u32::from_ne_bytes(ip) }, sin_zero: [0; 8] }
}

/// `fi_eq_read`: `(event, fid, info, CM data)` or the negative error.
///
/// # Safety
/// `eq` is a live EQ of the library.
unsafe fn eq_read(eq: *mut fid_eq) -> Result<(u32, usize, *mut fi_info, Vec<u8>), isize> {
    let mut ev = 0u32;
    let mut buf = [0u8; 128];
    // SAFETY: the caller's EQ; `buf` holds 128 bytes.
    let n = unsafe { ((*(*eq).ops).read.unwrap())(eq, &mut ev, buf.as_mut_ptr().cast(), buf.len(), 0) };
    if n < 0 {
        return Err(n);
    }
    let fid = u64::from_ne_bytes(buf[0..8].try_into().unwrap()) as usize;
    let info = u64::from_ne_bytes(buf[8..16].try_into().unwrap()) as usize as *mut fi_info;
    Ok((ev, fid, info, buf[16..n as usize].to_vec()))
}

/// Reads until something other than `-FI_EAGAIN` (at most 16 reads).
///
/// # Safety
/// As `eq_read`.
unsafe fn eq_next(eq: *mut fid_eq) -> Result<(u32, usize, *mut fi_info, Vec<u8>), isize> {
    for _ in 0..16 {
        // SAFETY: forwarded.
        match unsafe { eq_read(eq) } {
            Err(e) if e == -(FI_EAGAIN as isize) => continue,
            r => return r,
        }
    }
    Err(-(FI_EAGAIN as isize))
}

/// `fi_cq_read` of one `fi_cq_data_entry`.
///
/// # Safety
/// `cq` is a live CQ of the library.
unsafe fn cq_read(cq: *mut fid_cq) -> Option<fi_cq_data_entry> {
    let mut e = fi_cq_data_entry::default();
    // SAFETY: the caller's CQ; one entry's room.
    let n = unsafe { ((*(*cq).ops).read.unwrap())(cq, (&mut e as *mut fi_cq_data_entry).cast(), 1) };
    (n == 1).then_some(e)
}

/// An endpoint bound to a new EQ and CQ of its own, enabled.
///
/// # Safety
/// Live fabric and domain of the library; `info` one of theirs.
unsafe fn open_ep(fabric: *mut fid_fabric, dom: *mut fid_domain, info: *mut fi_info, wait_obj: u32) -> (*mut fid_ep, *mut fid_eq, *mut fid_cq) {
    // SAFETY: forwarded.
    unsafe { open_ep_srx(fabric, dom, info, wait_obj, null_mut()) }
}

/// `open_ep`, bound first to the shared receive context `srx` when not NULL.
///
/// # Safety
/// As `open_ep`; `srx` NULL or a live srx of the domain.
unsafe fn open_ep_srx(fabric: *mut fid_fabric, dom: *mut fid_domain, info: *mut fi_info, wait_obj: u32, srx: *mut fid_ep) -> (*mut fid_ep, *mut fid_eq, *mut fid_cq) {
    let (mut ep, mut eq, mut cq) = (null_mut(), null_mut(), null_mut());
    let mut eqa = fi_eq_attr { size: 16, wait_obj: FI_WAIT_UNSPEC, ..Default::default() };
    let mut cqa = fi_cq_attr { size: 64, format: FI_CQ_FORMAT_DATA, wait_obj, ..Default::default() };
    // SAFETY: the caller's objects; out-parameters on the stack.
    unsafe {
        assert_eq!(((*(*fabric).ops).eq_open.unwrap())(fabric, &mut eqa, &mut eq, null_mut()), 0);
        assert_eq!(((*(*dom).ops).cq_open.unwrap())(dom, &mut cqa, &mut cq, null_mut()), 0);
        assert_eq!(((*(*dom).ops).endpoint.unwrap())(dom, info, &mut ep, null_mut()), 0);
        let bind = (*(*ep).fid.ops).bind.unwrap();
        if !srx.is_null() {
            assert_eq!(bind(&mut (*ep).fid, &mut (*srx).fid, 0), 0);
        }
        assert_eq!(bind(&mut (*ep).fid, &mut (*eq).fid, 0), 0);
        assert_eq!(bind(&mut (*ep).fid, &mut (*cq).fid, FI_TRANSMIT | FI_RECV), 0);
        assert_eq!(((*(*ep).fid.ops).control.unwrap())(&mut (*ep).fid, FI_ENABLE, null_mut()), 0);
    }
    (ep, eq, cq)
}

/// `fi_close`.
///
/// # Safety
/// A live fid of the library.
unsafe fn close(f: *mut fid) {
    // SAFETY: the caller's fid.
    assert_eq!(unsafe { ((*(*f).ops).close.unwrap())(f) }, 0);
}

#[test]
fn fi_ep_msg_on_verbs_through_the_c_api() {
    standin::add_device("mlx5_0", IBV_NODE_CA, IBV_TRANSPORT_IB, "");
    let gid = std::net::Ipv4Addr::new(10, 0, 0, 5).to_ipv6_mapped().octets();
    standin::set_port("mlx5_0", 1, PortCfg { state: IBV_PORT_ACTIVE, link_layer: IBV_LINK_LAYER_ETHERNET, lid: 0, gids: vec![gid] });
    standin::with(|w| {
        w.loopback = Some(Default::default());
        w.comp_events = true;
    });
    let p = VerbsProvider::with_verbs(Verbs::from_fns(standin::verbs_fns(), None), |_| Vec::new()).with_rdmacm(RdmaCm::from_fns(standin::rdmacm_fns()));
    assert!(rfabric_core::provider::init_table_only(vec![Box::new(p)]), "the table was built before");

    // SAFETY: the C API used as fi_*(3) say, on objects this test opened
    // and closes; buffers live to the end of the test.
    unsafe {
        let mut info: *mut fi_info = null_mut();
        assert_eq!(rf_fi_getinfo(fi_version(1, 20), null(), null(), 0, null(), &mut info), 0);
        assert!(!info.is_null());
        assert_eq!((*(*info).ep_attr).r#type, FI_EP_MSG);
        let mut fabric = null_mut();
        assert_eq!(rf_fi_fabric((*info).fabric_attr, &mut fabric, null_mut()), 0);
        let mut dom = null_mut();
        assert_eq!(((*(*fabric).ops).domain.unwrap())(fabric, info, &mut dom, null_mut()), 0);

        // The listener.
        let mut pep: *mut fid_pep = null_mut();
        assert_eq!(((*(*fabric).ops).passive_ep.unwrap())(fabric, info, &mut pep, null_mut()), 0);
        let mut peq = null_mut();
        let mut eqa = fi_eq_attr { size: 16, wait_obj: FI_WAIT_UNSPEC, ..Default::default() };
        assert_eq!(((*(*fabric).ops).eq_open.unwrap())(fabric, &mut eqa, &mut peq, null_mut()), 0);
        assert_eq!(((*(*pep).fid.ops).bind.unwrap())(&mut (*pep).fid, &mut (*peq).fid, 0), 0);
        let mut srv_addr = sin([10, 0, 0, 5], 7471);
        assert_eq!(((*(*pep).cm).setname.unwrap())(&mut (*pep).fid, (&mut srv_addr as *mut libc::sockaddr_in).cast(), 16), 0);
        assert_eq!(((*(*pep).cm).listen.unwrap())(pep), 0);
        let mut sz = 8usize;
        let mut cm_size = 0usize;
        assert_eq!(((*(*pep).ops).getopt.unwrap())(&mut (*pep).fid, FI_OPT_ENDPOINT, FI_OPT_CM_DATA_SIZE, (&mut cm_size as *mut usize).cast(), &mut sz), 0);
        assert_eq!(cm_size, 56);

        // The client connects with CM data; too much is refused first.
        let (cli, ceq, ccq) = open_ep(fabric, dom, info, FI_WAIT_NONE);
        let connect = (*(*cli).cm).connect.unwrap();
        let big = [7u8; 57];
        assert_eq!(connect(cli, (&srv_addr as *const libc::sockaddr_in).cast(), big.as_ptr().cast(), big.len()), -FI_EINVAL);
        let hello = b"hello";
        assert_eq!(connect(cli, (&srv_addr as *const libc::sockaddr_in).cast(), hello.as_ptr().cast(), hello.len()), 0);
        // Unconnected yet: a send is -FI_ENOTCONN.
        let msg = *b"ping over verbs";
        assert_eq!(((*(*cli).msg).inject.unwrap())(cli, msg.as_ptr().cast(), msg.len(), 0), -(FI_ENOTCONN as isize));
        assert_eq!(eq_read(ceq).err(), Some(-(FI_EAGAIN as isize)));

        // The request, its info's handle, the accepting endpoint.
        let (ev, fid, rinfo, data) = eq_next(peq).unwrap();
        assert_eq!((ev, fid, data.as_slice()), (FI_CONNREQ, pep as usize, &hello[..]));
        assert!(!rinfo.is_null() && !(*rinfo).handle.is_null());
        let (srv, seq, scq) = open_ep(fabric, dom, rinfo, FI_WAIT_FD);
        rf_fi_freeinfo(rinfo);
        let mut rbuf = [0u8; 64];
        let reg = (*(*dom).mr).reg.unwrap();
        let mut rmr: *mut fid_mr = null_mut();
        let acc = FI_SEND | FI_RECV | FI_WRITE | FI_REMOTE_WRITE;
        assert_eq!(reg(&mut (*dom).fid, rbuf.as_mut_ptr().cast(), rbuf.len(), acc, 0, 0, 0, &mut rmr, null_mut()), 0);
        // FI_MR_LOCAL: a receive without its descriptor is refused.
        let recv = (*(*srv).msg).recv.unwrap();
        assert_eq!(recv(srv, rbuf.as_mut_ptr().cast(), 32, null_mut(), 0, 0x51 as *mut c_void), -(FI_EINVAL as isize));
        assert_eq!(recv(srv, rbuf.as_mut_ptr().cast(), 32, (*rmr).mem_desc, 0, 0x51 as *mut c_void), 0);
        let welcome = b"welcome";
        assert_eq!(((*(*srv).cm).accept.unwrap())(srv, welcome.as_ptr().cast(), welcome.len()), 0);
        let (ev, fid, _, data) = eq_next(seq).unwrap();
        assert_eq!((ev, fid, data.len()), (FI_CONNECTED, srv as usize, 0));
        let (ev, fid, _, data) = eq_next(ceq).unwrap();
        assert_eq!((ev, fid, data.as_slice()), (FI_CONNECTED, cli as usize, &welcome[..]));

        // The server's CQ has a wait fd; it is quiet after fi_trywait.
        let mut fd: c_int = -1;
        assert_eq!(((*(*scq).fid.ops).control.unwrap())(&mut (*scq).fid, FI_GETWAIT, (&mut fd as *mut c_int).cast()), 0);
        assert!(fd >= 0);
        let mut fids = [&mut (*scq).fid as *mut fid];
        assert_eq!(((*(*fabric).ops).trywait.unwrap())(fabric, fids.as_mut_ptr(), 1), 0);
        let mut pfd = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
        assert_eq!(libc::poll(&mut pfd, 1, 0), 0);

        // A send and an inject from the client; the server's fd turns
        // readable, fi_cq_sread returns the receive.
        let mut smr: *mut fid_mr = null_mut();
        let mut sbuf = msg;
        assert_eq!(reg(&mut (*dom).fid, sbuf.as_mut_ptr().cast(), sbuf.len(), acc, 0, 0, 0, &mut smr, null_mut()), 0);
        assert_eq!(((*(*cli).msg).send.unwrap())(cli, sbuf.as_ptr().cast(), sbuf.len(), null_mut(), 0, 0x61 as *mut c_void), -(FI_EINVAL as isize));
        assert_eq!(((*(*cli).msg).send.unwrap())(cli, sbuf.as_ptr().cast(), sbuf.len(), (*smr).mem_desc, 0, 0x61 as *mut c_void), 0);
        assert_eq!(libc::poll(&mut pfd, 1, 0), 1);
        let mut e = fi_cq_data_entry::default();
        assert_eq!(((*(*scq).ops).sread.unwrap())(scq, (&mut e as *mut fi_cq_data_entry).cast(), 1, null(), -1), 1);
        assert_eq!((e.op_context as usize, e.flags, e.len), (0x51, FI_MSG | FI_RECV, msg.len()));
        assert_eq!(&rbuf[..msg.len()], &msg);
        let c = cq_read(ccq).unwrap();
        assert_eq!((c.op_context as usize, c.flags), (0x61, FI_MSG | FI_SEND));

        // fi_writedata into the server's buffer, reported by a receive.
        assert_eq!(recv(srv, rbuf.as_mut_ptr().cast(), 8, (*rmr).mem_desc, 0, 0x52 as *mut c_void), 0);
        let wd = (*(*cli).rma).writedata.unwrap();
        let raddr = rbuf.as_ptr() as u64 + 40;
        assert_eq!(wd(cli, sbuf.as_ptr().cast(), 8, (*smr).mem_desc, 0x77, 0, raddr, (*rmr).key, 0x62 as *mut c_void), 0);
        let c = cq_read(ccq).unwrap();
        assert_eq!((c.op_context as usize, c.flags), (0x62, FI_RMA | FI_WRITE));
        let s = cq_read(scq).unwrap();
        assert_eq!((s.op_context as usize, s.flags, s.data), (0x52, FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA, 0x77));
        assert_eq!(&rbuf[40..48], &msg[..8]);

        // fi_shutdown: the server reads FI_SHUTDOWN.
        assert_eq!(((*(*cli).cm).shutdown.unwrap())(cli, 0), 0);
        let (ev, fid, _, _) = eq_next(seq).unwrap();
        assert_eq!((ev, fid), (FI_SHUTDOWN, srv as usize));

        // fi_srx_context: two more clients, connected to two accepted
        // endpoints that share one shared receive context.
        let srx_ctx = (*(*dom).ops).srx_ctx.unwrap();
        let mut rxa: fi_rx_attr = std::mem::zeroed();
        rxa.iov_limit = 99;
        let mut srx: *mut fid_ep = null_mut();
        assert_eq!(srx_ctx(dom, &mut rxa, &mut srx, null_mut()), -FI_EINVAL);
        rxa.iov_limit = 0;
        assert_eq!(srx_ctx(dom, &mut rxa, &mut srx, 0x5a as *mut c_void), 0);
        assert_eq!((*srx).fid.fclass, FI_CLASS_SRX_CTX);
        let mut shared = Vec::new();
        for _ in 0..2 {
            let (c, ceq2, ccq2) = open_ep(fabric, dom, info, FI_WAIT_NONE);
            assert_eq!(((*(*c).cm).connect.unwrap())(c, (&srv_addr as *const libc::sockaddr_in).cast(), null(), 0), 0);
            // Its EQ read moves the connection on to the request.
            assert_eq!(eq_read(ceq2).err(), Some(-(FI_EAGAIN as isize)));
            let (ev, _, rinfo, _) = eq_next(peq).unwrap();
            assert_eq!(ev, FI_CONNREQ);
            let (s, seq2, scq2) = open_ep_srx(fabric, dom, rinfo, FI_WAIT_NONE, srx);
            rf_fi_freeinfo(rinfo);
            assert_eq!(((*(*s).cm).accept.unwrap())(s, null(), 0), 0);
            assert_eq!(eq_next(seq2).map(|e| e.0), Ok(FI_CONNECTED));
            assert_eq!(eq_next(ceq2).map(|e| e.0), Ok(FI_CONNECTED));
            shared.push((c, ceq2, ccq2, s, seq2, scq2));
        }
        // Receives posted once, on the srx.
        let srx_recv = (*(*srx).msg).recv.unwrap();
        assert_eq!(srx_recv(srx, rbuf.as_mut_ptr().cast(), 16, (*rmr).mem_desc, 0, 0x71 as *mut c_void), 0);
        assert_eq!(srx_recv(srx, rbuf.as_mut_ptr().add(32).cast(), 16, (*rmr).mem_desc, 0, 0x72 as *mut c_void), 0);
        // A bound endpoint posts none of its own; a connected one cannot
        // be bound; the srx does not close while endpoints are bound.
        let (c0, s0) = (shared[0].0, shared[0].3);
        assert_eq!(((*(*s0).msg).recv.unwrap())(s0, rbuf.as_mut_ptr().cast(), 8, (*rmr).mem_desc, 0, null_mut()), -(FI_EOPBADSTATE as isize));
        assert_eq!(((*(*c0).fid.ops).bind.unwrap())(&mut (*c0).fid, &mut (*srx).fid, 0), -FI_EOPBADSTATE);
        assert_eq!(((*(*srx).fid.ops).close.unwrap())(&mut (*srx).fid), -FI_EBUSY);
        let (one, two) = (*b"first client", *b"second client!");
        let inject = |ep: *mut fid_ep, m: &[u8]| ((*(*ep).msg).inject.unwrap())(ep, m.as_ptr().cast(), m.len(), 0);
        assert_eq!(inject(shared[1].0, &two), 0);
        assert_eq!(inject(c0, &one), 0);
        let e1 = cq_read(shared[1].5).unwrap();
        assert_eq!((e1.op_context as usize, e1.flags, e1.len), (0x71, FI_MSG | FI_RECV, two.len()));
        let e0 = cq_read(shared[0].5).unwrap();
        assert_eq!((e0.op_context as usize, e0.flags, e0.len), (0x72, FI_MSG | FI_RECV, one.len()));
        assert_eq!(&rbuf[..two.len()], &two);
        assert_eq!(&rbuf[32..32 + one.len()], &one);
        assert!(cq_read(shared[0].5).is_none() && cq_read(shared[1].5).is_none());
        for (c, ceq2, ccq2, s, seq2, scq2) in shared {
            for f in [&mut (*c).fid as *mut fid, &mut (*s).fid, &mut (*ccq2).fid, &mut (*scq2).fid, &mut (*ceq2).fid, &mut (*seq2).fid] {
                close(f);
            }
        }
        close(&mut (*srx).fid);

        for f in [&mut (*cli).fid as *mut fid, &mut (*srv).fid, &mut (*pep).fid, &mut (*smr).fid, &mut (*rmr).fid, &mut (*ccq).fid, &mut (*scq).fid, &mut (*ceq).fid, &mut (*seq).fid, &mut (*peq).fid, &mut (*dom).fid, &mut (*fabric).fid] {
            close(f);
        }
        rf_fi_freeinfo(info);
    }
    let calls = standin::take_cm_calls();
    assert!(calls.iter().any(|c| matches!(c, CmCall::Accept { private_data, .. } if private_data == b"welcome")), "{calls:?}");
    assert!(calls.iter().any(|c| matches!(c, CmCall::Disconnect(_))), "{calls:?}");
}
