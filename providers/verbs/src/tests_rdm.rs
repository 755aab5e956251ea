//! `FI_EP_RDM` on verbs against the stand-ins of libibverbs and librdmacm
//! with their loopback fabric: the offers, and two endpoints of the
//! provider's objects (fabric, domain, AV, CQs, endpoints) exchanging
//! messages over RC connections the stand-in moves within the process.

use crate::provider::VerbsProvider;
use rfabric_core::abi::*;
use rfabric_core::error::{Error, Result, EAGAIN};
use rfabric_core::info::{FabricAttr, Info};
use rfabric_core::objects::cq::CqAttr;
use rfabric_core::provider::{AddressVector, AvAttr, Bind, CompletionQueue, Descs, Domain, Endpoint, Iov, MrReq, Provider, RmaIov, RmaOp, RxOp, TxOp};
use rfabric_ibverbs::standin::{self, PortCfg};
use rfabric_ibverbs::sys::*;
use rfabric_ibverbs::{RdmaCm, Verbs};
use std::sync::Arc;

fn roce_device() {
    standin::add_device("mlx5_0", IBV_NODE_CA, IBV_TRANSPORT_IB, "");
    let gid = std::net::Ipv4Addr::new(10, 0, 0, 5).to_ipv6_mapped().octets();
    standin::set_port("mlx5_0", 1, PortCfg { state: IBV_PORT_ACTIVE, link_layer: IBV_LINK_LAYER_ETHERNET, lid: 0, gids: vec![gid] });
}

fn provider(with_cm: bool) -> VerbsProvider {
    let v = VerbsProvider::with_verbs(Verbs::from_fns(standin::verbs_fns(), None), |_| Vec::new());
    if with_cm {
        v.with_rdmacm(RdmaCm::from_fns(standin::rdmacm_fns()))
    } else {
        v
    }
}

fn rdm_offers(p: &VerbsProvider) -> Vec<Info> {
    p.offers().into_iter().filter(|o| o.ep_type() == FI_EP_RDM).collect()
}

#[test]
fn rdm_is_offered_per_ip_address_next_to_msg() {
    roce_device();
    let p = provider(true);
    let all = p.offers();
    let rdm = rdm_offers(&p);
    assert_eq!(rdm.len(), 2, "manual and automatic progress on 10.0.0.5: {all:?}");
    assert!(all.iter().any(|o| o.ep_type() == FI_EP_MSG), "the MSG offer stays");
    for o in &rdm {
        assert_eq!(o.fabric_attr.as_ref().and_then(|f| f.prov_name.as_deref()), Some("verbs"));
        assert_eq!(o.domain_attr.as_ref().and_then(|d| d.name.as_deref()), Some("mlx5_0"));
        assert_eq!(o.ep_attr.as_ref().map(|e| e.protocol), Some(FI_PROTO_RDMA_CM_IB_RC));
        assert_eq!(o.addr_format, FI_SOCKADDR_IN);
        assert_ne!(o.caps & FI_TAGGED, 0);
        assert_eq!(rfabric_rudp::sockaddr::from_bytes_any(o.src_addr.as_deref().unwrap()), Some("10.0.0.5:0".parse().unwrap()));
    }
    let progress: Vec<u32> = rdm.iter().map(|o| o.domain_attr.as_ref().unwrap().data_progress).collect();
    assert_eq!(progress, vec![FI_PROGRESS_MANUAL, FI_PROGRESS_AUTO]);
}

#[test]
fn without_librdmacm_or_a_device_there_is_no_rdm_offer() {
    roce_device();
    assert!(rdm_offers(&provider(false)).is_empty(), "no librdmacm: no RDM");
    assert!(!provider(false).offers().is_empty(), "the MSG offer stays");
}

#[test]
fn no_device_offers_nothing() {
    let p = provider(true);
    assert!(p.offers().is_empty());
    assert!(p.fabric(&FabricAttr::default()).is_err());
}

struct Side {
    ep: Box<dyn Endpoint>,
    cq: Arc<dyn CompletionQueue>,
    /// fi_addr of the other side.
    peer: u64,
}

struct Pair {
    _lend: standin::LendGuard,
    d: Box<dyn Domain>,
    a: Side,
    b: Side,
    _av: Arc<dyn AddressVector>,
}

fn pair() -> Pair {
    let lend = standin::share_with_threads("verbs-");
    roce_device();
    standin::with(|w| w.loopback = Some(Default::default()));
    let p = provider(true);
    let offer = rdm_offers(&p).into_iter().next().expect("an RDM offer");
    let fabric = p.fabric(offer.fabric_attr.as_ref().unwrap()).unwrap();
    // SAFETY: the offer's own info.
    let d = unsafe { fabric.domain(&offer) }.unwrap();
    let av = d.av_open(&AvAttr { kind: FI_AV_TABLE, count: 4, flags: 0 }).unwrap();
    let mut eps = Vec::new();
    for port in [7471u16, 7472] {
        let mut info = offer.clone();
        info.src_addr = Some(rfabric_rudp::sockaddr::to_bytes(&std::net::SocketAddr::new([10, 0, 0, 5].into(), port)));
        let ep = d.endpoint(&info).unwrap();
        let cq = d.cq_open(&CqAttr { size: 64, format: FI_CQ_FORMAT_TAGGED, wait_obj: FI_WAIT_NONE }).unwrap();
        ep.bind(Bind::Av(&av), 0).unwrap();
        ep.bind(Bind::Cq(&cq), FI_TRANSMIT | FI_RECV).unwrap();
        ep.enable().unwrap();
        eps.push((ep, cq));
    }
    let mut names = Vec::new();
    for (ep, _) in &eps {
        let mut n = [0u8; 64];
        let l = ep.getname(&mut n).unwrap();
        names.push(n[..l].to_vec());
    }
    assert_eq!(rfabric_rudp::sockaddr::from_bytes(&names[1]), Some("10.0.0.5:7472".parse().unwrap()));
    let mut out = [0u64; 2];
    av.insert(&[&names[0], &names[1]], Some(&mut out), 0).unwrap();
    let (eb, ea) = (eps.pop().unwrap(), eps.pop().unwrap());
    Pair { _lend: lend, d, a: Side { ep: ea.0, cq: ea.1, peer: out[1] }, b: Side { ep: eb.0, cq: eb.1, peer: out[0] }, _av: av }
}

/// The next completion of `cq` (context, flags, len, buf, data, tag),
/// progressing both sides meanwhile; `Err` with an error completion's
/// `err`.
fn next(cq: &Arc<dyn CompletionQueue>, other: &Arc<dyn CompletionQueue>) -> Result<[u64; 6]> {
    let mut raw = [0u8; 48];
    for _ in 0..2_000_000 {
        match cq.read(&mut raw, 1, None) {
            Ok(1) => {
                let mut v = [0u64; 6];
                for (i, w) in v.iter_mut().enumerate() {
                    *w = u64::from_ne_bytes(raw[i * 8..i * 8 + 8].try_into().unwrap());
                }
                return Ok(v);
            }
            Err(e) if e.0 == FI_EAGAIN => {
                let _ = other.read(&mut [0u8; 0], 0, None);
            }
            Err(e) if e.0 == FI_EAVAIL => {
                let (info, _) = cq.readerr(None, fi_version(1, 18)).unwrap();
                return Err(Error(info.err));
            }
            Err(e) => return Err(e),
            Ok(_) => unreachable!(),
        }
    }
    Err(EAGAIN)
}

fn send(s: &Side, buf: &[u8], ctx: usize, tag: Option<u64>) {
    let iov = [Iov { base: buf.as_ptr() as usize, len: buf.len() }];
    let op = TxOp { iov: &iov, desc: Descs::NONE, dest: s.peer, context: ctx, tag: tag.unwrap_or(0), data: 0, flags: 0, tagged: tag.is_some(), no_completion: false };
    // SAFETY: every buffer outlives its completion in these tests.
    unsafe { s.ep.send(&op) }.unwrap();
}

fn recv(s: &Side, buf: &mut [u8], ctx: usize, tag: Option<u64>) {
    let iov = [Iov { base: buf.as_mut_ptr() as usize, len: buf.len() }];
    let op = RxOp { iov: &iov, desc: Descs::NONE, src: FI_ADDR_UNSPEC, context: ctx, tag: tag.unwrap_or(0), ignore: 0, flags: 0, tagged: tag.is_some() };
    // SAFETY: as above.
    unsafe { s.ep.recv(&op) }.unwrap();
}

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| (i as u8).wrapping_mul(7).wrapping_add(seed)).collect()
}

#[test]
fn two_endpoints_exchange_tagged_and_untagged_eager_and_rendezvous_messages() {
    let p = pair();
    // Eager (one packet), several packets, and past MEDIUM_MAX (rendezvous).
    for (i, n) in [100usize, 40_000, 200_000].into_iter().enumerate() {
        for tagged in [false, true] {
            let tag = tagged.then_some(0x77 + i as u64);
            let data = pattern(n, i as u8 + u8::from(tagged));
            let mut got = vec![0u8; n];
            recv(&p.b, &mut got, 10 + i, tag);
            send(&p.a, &data, 20 + i, tag);
            let rx = next(&p.b.cq, &p.a.cq).unwrap();
            assert_eq!((rx[0], rx[2] as usize), (10 + i as u64, n), "receive completion of {n} bytes (tagged {tagged})");
            assert_ne!(rx[1] & if tagged { FI_TAGGED } else { FI_MSG }, 0);
            if tagged {
                assert_eq!(rx[5], tag.unwrap());
            }
            let tx = next(&p.a.cq, &p.b.cq).unwrap();
            assert_eq!(tx[0], 20 + i as u64);
            assert!(got == data, "{n} bytes arrived whole (tagged {tagged})");
        }
    }
    // And back.
    let data = pattern(5000, 9);
    let mut got = vec![0u8; 5000];
    recv(&p.a, &mut got, 1, None);
    send(&p.b, &data, 2, None);
    assert_eq!(next(&p.a.cq, &p.b.cq).unwrap()[0], 1);
    assert_eq!(next(&p.b.cq, &p.a.cq).unwrap()[0], 2);
    assert!(got == data);
}

#[test]
fn an_rma_write_is_emulated_into_the_rdm_domains_registration() {
    let p = pair();
    let mut target = vec![0u8; 100_000];
    let reg = p.d.mr_reg(&MrReq { addr: target.as_mut_ptr() as usize, len: target.len(), access: FI_REMOTE_WRITE, requested_key: 7, ..MrReq::default() }).unwrap();
    // No ibv_reg_mr of the application's memory: the RDM domain's registry.
    assert!(!standin::take_calls().iter().any(|c| matches!(c, standin::Call::RegMr { addr, .. } if *addr == target.as_ptr() as usize)));
    let data = pattern(70_000, 3);
    let iov = [Iov { base: data.as_ptr() as usize, len: data.len() }];
    let rma = [RmaIov { addr: 1000, len: data.len(), key: reg.key }];
    let op = RmaOp { iov: &iov, desc: rfabric_core::provider::Descs::NONE, rma: &rma, dest: p.a.peer, context: 5, data: 0, flags: 0, no_completion: false };
    // SAFETY: `data` outlives the completion.
    unsafe { p.a.ep.rma_write(&op) }.unwrap();
    let c = next(&p.a.cq, &p.b.cq).unwrap();
    assert_eq!(c[0], 5);
    assert!(target[1000..71_000] == data[..], "the write landed at offset 1000");
    assert!(target[..1000].iter().all(|&b| b == 0) && target[71_000..].iter().all(|&b| b == 0));
    p.d.mr_close(reg.key).unwrap();
}

#[test]
fn a_peer_that_goes_away_fails_pending_sends_with_an_error() {
    let p = pair();
    // Connect, and see one message through.
    let mut got = [0u8; 8];
    recv(&p.b, &mut got, 1, None);
    send(&p.a, b"hello!!!", 2, None);
    assert_eq!(next(&p.b.cq, &p.a.cq).unwrap()[0], 1);
    assert_eq!(next(&p.a.cq, &p.b.cq).unwrap()[0], 2);
    // A rendezvous send that B never takes: it waits for B's clear-to-send.
    let big = pattern(300_000, 1);
    send(&p.a, &big, 3, None);
    for _ in 0..100 {
        let _ = p.b.cq.read(&mut [0u8; 48], 1, None);
        let _ = p.a.cq.read(&mut [0u8; 48], 1, None);
    }
    // B goes away without a close: its connections are torn down.
    let Pair { _lend, d: _d, a, b, _av } = p;
    drop(b);
    let e = next(&a.cq, &a.cq).expect_err("the pending send fails");
    assert!(e.0 == FI_ECONNRESET || e.0 == FI_ESHUTDOWN || e.0 == FI_ECONNREFUSED, "{e:?}");
}
