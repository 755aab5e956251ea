//! The RC layer against the recording stand-ins of libibverbs and
//! librdmacm: the connection-manager call sequences of both sides, the
//! private data each way, the failures, and the work requests that reach
//! the QP's `post_send`/`post_recv` slots.

use crate::discovery::probe;
use crate::provider::VerbsDomain;
use crate::rc::{connect, Cm, Listener, QpRes, Remote, MAX_PRIVATE_DATA};
use rfabric_ibverbs::standin::{self, CmCall, PortCfg, SentWr};
use rfabric_ibverbs::sys::*;
use rfabric_ibverbs::{RdmaCm, Verbs};
use std::sync::Arc;

struct Setup {
    _d: VerbsDomain,
    res: QpRes,
    cm: Arc<Cm>,
}

fn setup() -> Setup {
    standin::add_device("mlx5_0", IBV_NODE_CA, IBV_TRANSPORT_IB, "");
    let gid = std::net::Ipv4Addr::new(10, 0, 0, 5).to_ipv6_mapped().octets();
    standin::set_port("mlx5_0", 1, PortCfg { state: IBV_PORT_ACTIVE, link_layer: IBV_LINK_LAYER_ETHERNET, lid: 0, gids: vec![gid] });
    let v = Verbs::from_fns(standin::verbs_fns(), None);
    let p = probe(Ok(&v), &|_| Vec::new());
    let d = VerbsDomain::open(&v, &p.domains()[0]).unwrap();
    let cq = d.context().create_cq(64, 0).unwrap();
    let cap = ibv_qp_cap { max_send_wr: 32, max_recv_wr: 32, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 64 };
    let res = QpRes { pd: d.pd().clone(), send_cq: cq.clone(), recv_cq: cq, cap };
    let cm = Cm::new(&RdmaCm::from_fns(standin::rdmacm_fns())).unwrap();
    standin::take_calls();
    standin::take_cm_calls();
    Setup { _d: d, res, cm }
}

fn without_events(v: Vec<CmCall>) -> Vec<CmCall> {
    v.into_iter().filter(|c| !matches!(c, CmCall::GetEvent | CmCall::AckEvent)).collect()
}

#[test]
fn the_active_side_resolves_creates_the_qp_and_connects_with_private_data() {
    let s = setup();
    standin::with(|w| w.cm.accept_data = b"srv-hello".to_vec());
    let (conn, answer) = connect(&s.cm, &"10.0.0.7:7471".parse().unwrap(), &s.res, b"cli-hello").unwrap();
    assert_eq!(answer, b"srv-hello");
    let calls = standin::take_cm_calls();
    let id = match &calls[..] {
        [CmCall::CreateId { ps: RDMA_PS_TCP }, CmCall::ResolveAddr { family, timeout_ms: 2000 }, CmCall::GetEvent, CmCall::AckEvent, CmCall::ResolveRoute { timeout_ms: 2000 }, CmCall::GetEvent, CmCall::AckEvent, CmCall::CreateQp { id, pd, qp_type: IBV_QPT_RC, .. }, CmCall::Connect { id: cid, private_data, rnr_retry_count: 7 }, CmCall::GetEvent, CmCall::AckEvent]
            if *family == libc::AF_INET && *pd == s.res.pd.as_ptr() as usize && cid == id && private_data == b"cli-hello" =>
        {
            *id
        }
        other => panic!("unexpected sequence: {other:?}"),
    };
    // The data path through the QP's context ops.
    let sge = ibv_sge { addr: 0x1000, length: 256, lkey: 0x42 };
    // SAFETY: the stand-in only records the requests.
    unsafe {
        conn.send(1, &[sge], None, true).unwrap();
        conn.write(2, &[sge], Remote { addr: 0xdead_0000, rkey: 0x77 }, Some(9)).unwrap();
        conn.read(3, &[sge], Remote { addr: 0xbeef_0000, rkey: 0x78 }).unwrap();
        conn.recv(4, &[sge]).unwrap();
    }
    let qp = conn.qp() as usize;
    let sent = standin::with(|w| std::mem::take(&mut w.sent));
    let base = SentWr { qp, num_sge: 1, sge0: (0x1000, 256, 0x42), ..Default::default() };
    assert_eq!(
        sent,
        vec![
            SentWr { wr_id: 1, opcode: IBV_WR_SEND, send_flags: IBV_SEND_SIGNALED | IBV_SEND_INLINE, ..base.clone() },
            SentWr { wr_id: 2, opcode: IBV_WR_RDMA_WRITE_WITH_IMM, send_flags: IBV_SEND_SIGNALED, remote_addr: 0xdead_0000, rkey: 0x77, imm_data: 9u32.to_be(), ..base.clone() },
            SentWr { wr_id: 3, opcode: IBV_WR_RDMA_READ, send_flags: IBV_SEND_SIGNALED, remote_addr: 0xbeef_0000, rkey: 0x78, ..base },
        ]
    );
    assert_eq!(standin::with(|w| w.posted_recvs.clone()), vec![(qp, 4, 1, 0x1000, 256)]);
    conn.disconnect().unwrap();
    drop(conn);
    let calls = without_events(standin::take_cm_calls());
    assert_eq!(calls, vec![CmCall::Disconnect(id), CmCall::DestroyQp(id), CmCall::DestroyId(id)]);
    drop(s);
    assert_eq!(standin::take_cm_calls(), vec![CmCall::DestroyChannel]);
}

#[test]
fn a_rejection_is_econnrefused_and_frees_the_id() {
    let s = setup();
    standin::with(|w| w.cm.reject_with = Some(b"busy".to_vec()));
    let e = connect(&s.cm, &"[2001:db8::7]:7471".parse().unwrap(), &s.res, b"x").err().unwrap();
    assert_eq!(e.errno, libc::ECONNREFUSED);
    let calls = without_events(standin::take_cm_calls());
    assert!(matches!(calls[1], CmCall::ResolveAddr { family, .. } if family == libc::AF_INET6), "{calls:?}");
    assert!(matches!(calls[calls.len() - 2], CmCall::DestroyQp(_)), "{calls:?}");
    assert!(matches!(calls[calls.len() - 1], CmCall::DestroyId(_)), "{calls:?}");
}

#[test]
fn an_unreachable_peer_is_ehostunreach_before_any_qp() {
    let s = setup();
    standin::with(|w| w.cm.unreachable = true);
    let e = connect(&s.cm, &"10.9.9.9:1".parse().unwrap(), &s.res, b"").err().unwrap();
    assert_eq!(e.errno, libc::EHOSTUNREACH);
    assert!(!standin::take_cm_calls().iter().any(|c| matches!(c, CmCall::CreateQp { .. })));
}

#[test]
fn too_much_private_data_is_einval_before_any_call() {
    let s = setup();
    let e = connect(&s.cm, &"10.0.0.7:1".parse().unwrap(), &s.res, &[0; MAX_PRIVATE_DATA + 1]).err().unwrap();
    assert_eq!(e.errno, libc::EINVAL);
    assert_eq!(standin::take_cm_calls(), vec![]);
}

#[test]
fn the_passive_side_listens_accepts_and_rejects() {
    let s = setup();
    let l = Listener::listen(&s.cm, &"0.0.0.0:7471".parse().unwrap(), 16).unwrap();
    assert_eq!(
        standin::take_cm_calls(),
        vec![CmCall::CreateId { ps: RDMA_PS_TCP }, CmCall::BindAddr { family: libc::AF_INET }, CmCall::Listen { backlog: 16 }]
    );
    // SAFETY: the listener's live id.
    let peer = unsafe { standin::cm_incoming(l.id(), b"want-in") } as usize;
    let req = l.request().unwrap();
    assert_eq!(req.private_data, b"want-in");
    let conn = req.accept(&s.res, b"welcome").unwrap();
    let calls = without_events(standin::take_cm_calls());
    assert!(matches!(&calls[..], [CmCall::CreateQp { id, qp_type: IBV_QPT_RC, .. }, CmCall::Accept { id: aid, private_data }] if *id == peer && *aid == peer && private_data == b"welcome"), "{calls:?}");
    drop(conn);
    assert_eq!(without_events(standin::take_cm_calls()), vec![CmCall::DestroyQp(peer), CmCall::DestroyId(peer)]);

    // SAFETY: as above.
    let other = unsafe { standin::cm_incoming(l.id(), b"me too") } as usize;
    let req = l.request().unwrap();
    req.reject(b"full").unwrap();
    assert_eq!(
        without_events(standin::take_cm_calls()),
        vec![CmCall::Reject { id: other, private_data: b"full".to_vec() }, CmCall::DestroyId(other)]
    );
}

// ---------- RC queue pairs as the reliable connected transport ----------

mod transport {
    use super::*;
    use crate::rc_transport::{addr_bytes, parse_addr, RcTransport};
    use rfabric_core::abi::{FI_ECONNREFUSED, FI_ECONNRESET, FI_EMSGSIZE, FI_ESHUTDOWN};
    use rfabric_tcp::conn::{Conn, Transport};
    use std::collections::VecDeque;

    const RECV: u64 = 1 << 63;

    fn transport(s: &Setup) -> RcTransport {
        let cm = RdmaCm::from_fns(standin::rdmacm_fns());
        let t = RcTransport::bind(&cm, s._d.context(), s._d.pd(), "10.0.0.5:7471".parse().unwrap(), 256, 4).unwrap();
        standin::take_cm_calls();
        t
    }

    fn wc(wr_id: u64, status: u32, byte_len: u32) -> ibv_wc {
        ibv_wc { wr_id, status, byte_len, ..Default::default() }
    }

    fn script(w: Vec<ibv_wc>) {
        standin::with(|x| x.wcs = Some(VecDeque::from(w)));
    }

    /// The id of the QP the last `rdma_create_qp` made.
    fn last_qp_id() -> usize {
        standin::take_cm_calls().into_iter().filter_map(|c| if let CmCall::CreateQp { id, .. } = c { Some(id) } else { None }).next_back().unwrap()
    }

    #[test]
    fn addresses() {
        let s = setup();
        let t = transport(&s);
        assert_eq!(parse_addr(t.addr()), Some("10.0.0.5:7471".parse().unwrap()));
        assert!(t.valid_addr(&addr_bytes(&"10.0.0.7:1".parse().unwrap())));
        assert!(!t.valid_addr(&addr_bytes(&"[2001:db8::1]:1".parse().unwrap())), "another family");
        assert!(!t.valid_addr(&[2, 0, 1]));
        assert_eq!(t.max_msg(), 256);
    }

    #[test]
    fn a_connection_queues_until_established_then_sends_and_receives_in_order() {
        let s = setup();
        let mut t = transport(&s);
        let mut c = t.connect(&addr_bytes(&"10.0.0.7:7471".parse().unwrap())).unwrap();
        // The address is still being resolved: hold back its event.
        let held = standin::with(|w| std::mem::take(&mut w.cm.queue));
        c.send(&[b"hel", b"lo"]).unwrap();
        assert_eq!(c.queued(), 5, "queued before the connection is up");
        assert!(!c.established().unwrap());
        standin::with(|w| w.cm.queue = held);
        assert!(c.established().unwrap());
        assert_eq!(c.queued(), 0);
        let calls = without_events(standin::take_cm_calls());
        assert!(matches!(&calls[..], [CmCall::CreateId { ps: RDMA_PS_TCP }, CmCall::ResolveAddr { .. }, CmCall::ResolveRoute { .. }, CmCall::CreateQp { qp_type: IBV_QPT_RC, .. }, CmCall::Connect { .. }]), "{calls:?}");
        // Every receive slot was posted before rdma_connect.
        let recvs = standin::with(|w| std::mem::take(&mut w.posted_recvs));
        assert_eq!(recvs.iter().map(|r| r.1).collect::<Vec<_>>(), vec![RECV, RECV | 1, RECV | 2, RECV | 3]);
        assert!(recvs.iter().all(|r| r.4 == 256));
        let sent = standin::with(|w| std::mem::take(&mut w.sent));
        assert_eq!(sent.len(), 1);
        assert_eq!((sent[0].opcode, sent[0].sge0.1), (IBV_WR_SEND, 5));
        // SAFETY: the send slot the stand-in saw, still the connection's.
        let bytes = unsafe { std::slice::from_raw_parts(sent[0].sge0.0 as *const u8, 5) };
        assert_eq!(bytes, b"hello");
        // Two messages arrive (slots 2, then 0); the send completes.
        for (slot, data) in [(2usize, b"abc"), (0, b"xyz")] {
            let addr = recvs[slot].3 as *mut u8;
            // SAFETY: the connection's receive slot, as the adapter would write it.
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), addr, 3) };
        }
        script(vec![wc(RECV | 2, IBV_WC_SUCCESS, 3), wc(0, IBV_WC_SUCCESS, 0), wc(RECV, IBV_WC_SUCCESS, 3)]);
        assert_eq!(c.recv().unwrap(), Some(&b"abc"[..]));
        assert_eq!(c.recv().unwrap(), Some(&b"xyz"[..]));
        assert_eq!(c.recv().unwrap(), None);
        // Each slot went back to the adapter after the next call.
        let again: Vec<u64> = standin::with(|w| w.posted_recvs.iter().map(|r| r.1).collect());
        assert_eq!(again, vec![RECV | 2, RECV]);
        // Too large; then a failed completion is the end.
        assert_eq!(c.send(&[&[0u8; 257]]).unwrap_err().0, FI_EMSGSIZE);
        script(vec![wc(1, 12, 0)]);
        assert_eq!(c.recv().unwrap_err().0, FI_ECONNRESET);
    }

    #[test]
    fn a_disconnect_is_eshutdown_after_what_arrived_before_it() {
        let s = setup();
        let mut t = transport(&s);
        let mut c = t.connect(&addr_bytes(&"10.0.0.7:7471".parse().unwrap())).unwrap();
        assert!(c.established().unwrap());
        let id = last_qp_id();
        script(vec![wc(RECV | 1, IBV_WC_SUCCESS, 1), wc(RECV | 2, IBV_WC_WR_FLUSH_ERR, 0)]);
        standin::with(|w| w.cm.queue.push_back((RDMA_CM_EVENT_DISCONNECTED, id, 0, 0, Vec::new())));
        assert_eq!(c.recv().unwrap().map(|m| m.len()), Some(1));
        assert_eq!(c.recv().unwrap_err().0, FI_ESHUTDOWN);
    }

    #[test]
    fn a_rejected_connection_is_econnrefused() {
        let s = setup();
        let mut t = transport(&s);
        standin::with(|w| w.cm.reject_with = Some(Vec::new()));
        let mut c = t.connect(&addr_bytes(&"10.0.0.7:7471".parse().unwrap())).unwrap();
        assert_eq!(c.established().unwrap_err().0, FI_ECONNREFUSED);
    }

    #[test]
    fn accept_posts_receives_then_accepts() {
        let s = setup();
        let mut t = transport(&s);
        assert!(t.accept().unwrap().is_none());
        // SAFETY: the transport's live listening id.
        let peer = unsafe { standin::cm_incoming(t.listen_id(), b"") } as usize;
        let mut c = t.accept().unwrap().expect("a connection request waits");
        let calls = without_events(standin::take_cm_calls());
        assert!(matches!(&calls[..], [CmCall::CreateQp { id, .. }, CmCall::Accept { id: a, .. }] if *id == peer && *a == peer), "{calls:?}");
        assert_eq!(standin::with(|w| w.posted_recvs.len()), 4);
        assert!(c.established().unwrap());
        drop(c);
        assert_eq!(without_events(standin::take_cm_calls()), vec![CmCall::DestroyQp(peer), CmCall::DestroyId(peer)]);
    }

    /// Two transports over the stand-in's loopback fabric: connect and
    /// accept, 200 messages of 1 to 64 bytes each way with 4 slots a side
    /// (so most wait in the connection and for the peer's receives), all
    /// arriving whole and in order; then one side goes away.
    #[test]
    fn two_transports_exchange_messages_in_order_over_the_loopback_stand_in() {
        const N: usize = 200;
        let s = setup();
        standin::with(|w| w.loopback = Some(Default::default()));
        let cm = RdmaCm::from_fns(standin::rdmacm_fns());
        let (ctx, pd) = (s._d.context(), s._d.pd());
        let mut srv = RcTransport::bind(&cm, ctx, pd, "10.0.0.5:7471".parse().unwrap(), 64, 4).unwrap();
        let mut cli = RcTransport::bind(&cm, ctx, pd, "10.0.0.5:7472".parse().unwrap(), 64, 4).unwrap();
        let mut c = cli.connect(srv.addr()).unwrap();
        let mut sc = None;
        for _ in 0..8 {
            let up = c.established().unwrap();
            if sc.is_none() {
                sc = srv.accept().unwrap();
            }
            if let Some(x) = sc.as_mut() {
                if x.established().unwrap() && up {
                    break;
                }
            }
        }
        let mut sc = sc.expect("the server accepted");
        assert!(c.established().unwrap() && sc.established().unwrap());

        let msg = |i: usize, dir: u8| -> Vec<u8> { (0..i % 64 + 1).map(|k| (i as u8).wrapping_mul(31).wrapping_add(k as u8) ^ dir).collect() };
        for i in 0..N {
            c.send(&[&msg(i, 1)]).unwrap();
            sc.send(&[&msg(i, 2)[..1], &msg(i, 2)[1..]]).unwrap();
        }
        assert!(c.queued() > 0 && sc.queued() > 0, "more messages than slots wait in the connection");
        let (mut got_c, mut got_s) = (Vec::new(), Vec::new());
        for _ in 0..4 * N {
            c.flush().unwrap();
            sc.flush().unwrap();
            while let Some(m) = sc.recv().unwrap() {
                got_s.push(m.to_vec());
            }
            while let Some(m) = c.recv().unwrap() {
                got_c.push(m.to_vec());
            }
            if got_s.len() == N && got_c.len() == N {
                break;
            }
        }
        assert_eq!(got_s.len(), N, "client to server");
        assert_eq!(got_c.len(), N, "server to client");
        assert!(got_s.iter().enumerate().all(|(i, m)| *m == msg(i, 1)), "client to server: whole and in order");
        assert!(got_c.iter().enumerate().all(|(i, m)| *m == msg(i, 2)), "server to client: whole and in order");
        assert_eq!((c.queued(), sc.queued()), (0, 0));

        // The client goes away: the server's connection ends with FI_ESHUTDOWN.
        drop(c);
        assert_eq!(sc.recv().unwrap_err().0, FI_ESHUTDOWN);
    }
}
