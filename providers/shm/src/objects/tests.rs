//! Unit tests of the shm objects: pairs of endpoints in one process,
//! through the core traits.

use super::ep::DEFAULT_MIN_MULTI_RECV;
use super::*;
use crate::peer::Address;
use rfabric_core::abi::*;
use rfabric_core::error::{Error, Result, EAGAIN, EINVAL};
use rfabric_core::info::{DomainAttr, Info};
use rfabric_core::objects::cq::CqAttr;
use rfabric_core::provider::{AddressVector, AvAttr, Bind, CompletionQueue, Descs, Domain, Endpoint, RxOp, TxOp};
use std::sync::Arc;

struct Pair {
    cq: Arc<dyn CompletionQueue>,
    a: Box<dyn Endpoint>,
    b: Box<dyn Endpoint>,
    /// fi_addr of b and of a (one AV shared by both).
    to_b: u64,
    to_a: u64,
    av: Arc<dyn AddressVector>,
}

fn pair(directed: bool) -> Pair {
    pair_with(directed, FI_THREAD_SAFE)
}

fn pair_with(directed: bool, threading: u32) -> Pair {
    let mut info = Info { caps: FI_MSG | FI_TAGGED | if directed { FI_DIRECTED_RECV } else { 0 }, ..Info::default() };
    info.domain_attr = Some(DomainAttr { mr_key_size: 8, threading, ..DomainAttr::default() });
    // SAFETY: the tests that ask for FI_THREAD_DOMAIN or
    // FI_THREAD_COMPLETION use the pair from one thread.
    let d = unsafe { ShmDomain::with_app_threading(&info) }.unwrap();
    let cq = d.cq_open(&CqAttr { size: 64, format: FI_CQ_FORMAT_TAGGED, wait_obj: FI_WAIT_NONE }).unwrap();
    let av = d.av_open(&AvAttr { kind: FI_AV_TABLE, count: 4, flags: 0 }).unwrap();
    let a = d.endpoint(&info).unwrap();
    let b = d.endpoint(&info).unwrap();
    for ep in [&a, &b] {
        assert_eq!(ep.enable(), Err(Error(FI_ENOAV)));
        ep.bind(Bind::Av(&av), 0).unwrap();
        assert_eq!(ep.bind(Bind::Cq(&cq), 0), Err(Error(FI_EBADFLAGS)));
        ep.bind(Bind::Cq(&cq), FI_TRANSMIT | FI_RECV).unwrap();
        ep.enable().unwrap();
    }
    let mut na = [0u8; 64];
    let mut nb = [0u8; 64];
    let la = a.getname(&mut na).unwrap();
    let lb = b.getname(&mut nb).unwrap();
    let mut out = [0u64; 2];
    assert_eq!(av.insert(&[&na[..la], &nb[..lb]], Some(&mut out), 0).unwrap(), 2);
    Pair { cq, a, b, to_b: out[1], to_a: out[0], av }
}

fn next(cq: &Arc<dyn CompletionQueue>) -> Result<[u64; 6]> {
    let mut raw = [0u8; 48];
    for _ in 0..1_000_000 {
        match cq.read(&mut raw, 1, None) {
            Ok(1) => {
                let mut v = [0u64; 6];
                for (i, w) in v.iter_mut().enumerate() {
                    *w = u64::from_ne_bytes(raw[i * 8..i * 8 + 8].try_into().unwrap());
                }
                return Ok(v);
            }
            Err(e) if e.0 == FI_EAGAIN => continue,
            Err(e) => return Err(e),
            Ok(_) => unreachable!(),
        }
    }
    Err(EAGAIN)
}

fn send(ep: &dyn Endpoint, buf: &[u8], dest: u64, ctx: usize, tag: Option<u64>) -> Result<()> {
    let iov = [rfabric_core::provider::Iov { base: buf.as_ptr() as usize, len: buf.len() }];
    let op = TxOp { iov: &iov, desc: Descs::NONE, dest, context: ctx, tag: tag.unwrap_or(0), data: 0, flags: 0, tagged: tag.is_some(), no_completion: false };
    // SAFETY: buf outlives the send's completion in every test.
    unsafe { ep.send(&op) }
}

fn recv(ep: &dyn Endpoint, buf: &mut [u8], ctx: usize, tag: Option<u64>) -> Result<()> {
    let iov = [rfabric_core::provider::Iov { base: buf.as_mut_ptr() as usize, len: buf.len() }];
    let op = RxOp { iov: &iov, desc: Descs::NONE, src: FI_ADDR_UNSPEC, context: ctx, tag: tag.unwrap_or(0), ignore: 0, flags: 0, tagged: tag.is_some() };
    // SAFETY: buf outlives the receive's completion.
    unsafe { ep.recv(&op) }
}

/// A receiver whose unexpected queue is full leaves further messages
/// in its ring (back-pressure: the sender sees `-FI_EAGAIN` once that
/// is full too) and loses none: once receives are posted, every
/// message arrives, in order, with its data.
#[test]
fn endpoint_dropped_without_close_releases_its_cq_and_av() {
    let p = pair(false);
    let (cq, av) = (p.cq.clone(), p.av.clone());
    assert!(Arc::strong_count(&cq) > 2, "the endpoints hold the CQ while open");
    drop(p);
    assert_eq!(Arc::strong_count(&cq), 1, "dropped endpoints still hold the CQ");
    assert_eq!(Arc::strong_count(&av), 1, "dropped endpoints still hold the AV");
}

#[test]
fn full_unexpected_queue_pushes_back() {
    let info = Info { caps: FI_MSG | FI_TAGGED, ..Info::default() };
    let d = ShmDomain::new(&info).unwrap();
    let cq = d.cq_open(&CqAttr { size: 64, format: FI_CQ_FORMAT_TAGGED, wait_obj: FI_WAIT_NONE }).unwrap();
    let av = d.av_open(&AvAttr { kind: FI_AV_TABLE, count: 4, flags: 0 }).unwrap();
    let a = d.endpoint(&info).unwrap();
    let b: Box<dyn Endpoint> = Box::new(d.endpoint_with(&info, 2).unwrap());
    for ep in [&a, &b] {
        ep.bind(Bind::Av(&av), 0).unwrap();
        ep.bind(Bind::Cq(&cq), FI_TRANSMIT | FI_RECV).unwrap();
        ep.enable().unwrap();
    }
    let mut nb = [0u8; 64];
    let lb = b.getname(&mut nb).unwrap();
    let mut out = [0u64; 1];
    av.insert(&[&nb[..lb]], Some(&mut out), 0).unwrap();
    let to_b = out[0];
    // Eager, rendezvous and tagged messages; the queue holds two.
    let sizes = [8usize, 100, 5000, 40, 70_000, 3000, 9, 1];
    let msgs: Vec<Vec<u8>> = sizes.iter().enumerate().map(|(i, &n)| (0..n).map(|j| (j * 7 + i * 31) as u8).collect()).collect();
    let tagged = |i: usize| (i % 3 == 1).then_some(0x40 + i as u64);
    for (i, m) in msgs.iter().enumerate() {
        send(&*a, m, to_b, 100 + i, tagged(i)).unwrap();
    }
    // Progress with no receive posted: every eager send completes (its
    // bytes are in b's ring); b holds two messages, the rest wait.
    // The eager limit while nothing is in flight: one cell, or more where
    // CMA is slow (`default_eager_limits`).
    let idle_max = crate::endpoint::default_eager_limits(crate::cma::is_slow(crate::cma::page_read_ns())).1.max(4096);
    let eager = sizes.iter().filter(|&&n| n <= idle_max).count();
    let mut sent = 0;
    for _ in 0..eager {
        let c = next(&cq).unwrap();
        assert_eq!(c[1] & FI_SEND, FI_SEND, "only send completions before receives are posted");
        sent += 1;
    }
    for _ in 0..100 {
        assert_eq!(next_now(&cq), None, "nothing else completes yet");
    }
    let mut bufs: Vec<Vec<u8>> = sizes.iter().map(|&n| vec![0u8; n + 16]).collect();
    for (i, buf) in bufs.iter_mut().enumerate() {
        recv(&*b, buf, 200 + i, tagged(i)).unwrap();
    }
    let mut got = Vec::new();
    while got.len() < msgs.len() || sent < msgs.len() {
        let c = next(&cq).expect("a completion for every message");
        if c[1] & FI_RECV != 0 {
            got.push((c[0] as usize - 200, c[2] as usize));
        } else {
            sent += 1;
        }
    }
    got.sort_unstable();
    assert_eq!(got, sizes.iter().copied().enumerate().collect::<Vec<_>>(), "every receive completed with its length");
    for (i, m) in msgs.iter().enumerate() {
        assert_eq!(&bufs[i][..m.len()], &m[..], "message {i}");
    }
}

/// A completion already queued, without waiting.
fn next_now(cq: &Arc<dyn CompletionQueue>) -> Option<[u64; 6]> {
    let mut raw = [0u8; 48];
    match cq.read(&mut raw, 1, None) {
        Ok(1) => Some(std::array::from_fn(|i| u64::from_ne_bytes(raw[i * 8..i * 8 + 8].try_into().unwrap()))),
        _ => None,
    }
}

#[test]
fn unexpected_then_posted_eager_and_rendezvous() {
    let p = pair(false);
    for len in [0usize, 10, 4096, 4097, 300_000] {
        let data: Vec<u8> = (0..len).map(|i| (i * 13 + len) as u8).collect();
        // Send first: the message waits in the unexpected queue.
        send(&*p.a, &data, p.to_b, 7, None).unwrap();
        if len <= 4096 {
            let c = next(&p.cq).unwrap();
            assert_eq!((c[0], c[1] & FI_SEND), (7, FI_SEND));
        }
        let mut got = vec![0u8; len + 8];
        recv(&*p.b, &mut got, 9, None).unwrap();
        let mut seen_recv = false;
        let mut seen_send = len <= 4096;
        while !(seen_recv && seen_send) {
            let c = next(&p.cq).unwrap();
            if c[0] == 9 {
                assert_eq!(c[2] as usize, len);
                assert_ne!(c[1] & FI_RECV, 0);
                seen_recv = true;
            } else {
                assert_eq!(c[0], 7);
                seen_send = true;
            }
        }
        assert_eq!(&got[..len], &data[..]);
    }
}

/// FI_THREAD_DOMAIN / FI_THREAD_COMPLETION: the objects take no lock
/// (debug builds assert that no-op locks are never entered twice at
/// once), and the data path behaves as with locks.
#[test]
fn serialized_threading_uses_no_locks() {
    for threading in [FI_THREAD_DOMAIN, FI_THREAD_COMPLETION] {
        let p = pair_with(false, threading);
        let cq = p.cq.clone().as_any_arc().downcast::<ShmCq>().unwrap();
        assert!(!cq.ring.is_real() && !cq.eps.is_real());
        for len in [0usize, 8, 4096, 70_000] {
            let data: Vec<u8> = (0..len).map(|i| (i * 7 + len) as u8).collect();
            let mut got = vec![0u8; len];
            recv(&*p.b, &mut got, 9, Some(3)).unwrap();
            send(&*p.a, &data, p.to_b, 7, Some(3)).unwrap();
            let mut seen = 0;
            while seen < 2 {
                let c = next(&p.cq).unwrap();
                assert!(c[0] == 7 || (c[0] == 9 && c[2] as usize == len), "{c:?}");
                seen += 1;
            }
            assert_eq!(got, data);
        }
    }
    for threading in [FI_THREAD_SAFE, FI_THREAD_ENDPOINT, FI_THREAD_FID, FI_THREAD_UNSPEC] {
        let p = pair_with(false, threading);
        let cq = p.cq.clone().as_any_arc().downcast::<ShmCq>().unwrap();
        assert!(cq.ring.is_real() && cq.eps.is_real(), "threading {threading}");
    }
    // A progress thread runs beside the application: real locks.
    let mut info = Info { caps: FI_MSG, ..Info::default() };
    info.domain_attr = Some(DomainAttr { threading: FI_THREAD_DOMAIN, data_progress: FI_PROGRESS_AUTO, ..DomainAttr::default() });
    // SAFETY: the domain is opened, looked at and dropped here.
    assert!(unsafe { ShmDomain::with_app_threading(&info) }.unwrap().locking.is_real());
    info.domain_attr = Some(DomainAttr { threading: FI_THREAD_DOMAIN, ..DomainAttr::default() });
    // SAFETY: as above.
    assert!(!unsafe { ShmDomain::with_app_threading(&info) }.unwrap().locking.is_real());
    // Safe code gets locks whatever the threading model says.
    assert!(ShmDomain::new(&info).unwrap().locking.is_real());
    info.caps |= FI_XPU;
    // SAFETY: as above.
    assert!(unsafe { ShmDomain::with_app_threading(&info) }.unwrap().locking.is_real());
}

#[test]
fn tags_select_and_truncation_is_reported() {
    let p = pair(false);
    let mut other = [0u8; 8];
    let mut want = [0u8; 8];
    recv(&*p.b, &mut other, 1, Some(5)).unwrap();
    recv(&*p.b, &mut want, 2, Some(6)).unwrap();
    send(&*p.a, b"sixsixsixsix", p.to_b, 3, Some(6)).unwrap();
    let c = next(&p.cq).unwrap();
    assert_eq!(c[0], 3);
    assert_eq!(next(&p.cq), Err(Error(FI_EAVAIL)));
    let (e, _) = p.cq.readerr(None, fi_version(1, 17)).unwrap();
    assert_eq!((e.base.op_context, e.err, e.olen, e.base.tag), (2, FI_ETRUNC, 4, 6));
    assert_eq!(&want, b"sixsixsi");
    assert_eq!(p.b.cancel(1), Ok(()));
    assert_eq!(p.b.cancel(1), Err(Error(FI_ENOENT)));
}

fn recv_from(ep: &dyn Endpoint, buf: &mut [u8], ctx: usize, src: u64) -> Result<()> {
    let iov = [rfabric_core::provider::Iov { base: buf.as_mut_ptr() as usize, len: buf.len() }];
    let op = RxOp { iov: &iov, desc: Descs::NONE, src, context: ctx, tag: 0, ignore: 0, flags: 0, tagged: false };
    // SAFETY: buf outlives the receive's completion.
    unsafe { ep.recv(&op) }
}

#[test]
fn directed_receive_and_source() {
    let p = pair(true);
    let mut wrong = [0u8; 4];
    let mut right = [0u8; 4];
    // A receive naming b itself as source must not take a's message.
    recv_from(&*p.b, &mut wrong, 1, p.to_b).unwrap();
    send(&*p.a, b"abcd", p.to_b, 2, None).unwrap();
    assert_eq!(next(&p.cq).unwrap()[0], 2);
    assert_eq!(next(&p.cq), Err(EAGAIN));
    recv_from(&*p.b, &mut right, 3, p.to_a).unwrap();
    assert_eq!(next(&p.cq).unwrap()[0], 3);
    assert_eq!(&right, b"abcd");
    let mut raw = [0u8; 48];
    let mut src = [0u64; 1];
    send(&*p.a, b"efgh", p.to_b, 4, None).unwrap();
    recv_from(&*p.b, &mut right, 5, FI_ADDR_UNSPEC).unwrap();
    let mut seen = 0;
    for _ in 0..1_000_000 {
        if let Ok(1) = p.cq.read(&mut raw, 1, Some(&mut src)) {
            if u64::from_ne_bytes(raw[..8].try_into().unwrap()) == 5 {
                assert_eq!(src[0], p.to_a, "completion names the sender");
            }
            seen += 1;
            if seen == 2 {
                break;
            }
        }
    }
    assert_eq!(seen, 2);
    // After removal, sends to the old fi_addr fail.
    p.av.remove(&[p.to_b], 0).unwrap();
    assert_eq!(send(&*p.a, b"x", p.to_b, 6, None), Err(EINVAL));
    assert_eq!(p.b.cancel(1), Ok(()));
}

#[test]
fn options() {
    let p = pair(false);
    let mut b = [0u8; 8];
    assert_eq!(p.a.getopt(FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &mut b), Ok(8));
    assert_eq!(usize::from_ne_bytes(b), DEFAULT_MIN_MULTI_RECV);
    p.a.setopt(FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &100usize.to_ne_bytes()).unwrap();
    p.a.getopt(FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &mut b).unwrap();
    assert_eq!(usize::from_ne_bytes(b), 100);
    assert_eq!(p.a.setopt(FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &[1, 2]), Err(EINVAL));
    assert_eq!(p.a.getopt(FI_OPT_ENDPOINT, 999, &mut b), Err(Error(FI_ENOPROTOOPT)));
    assert_eq!(p.a.getopt(FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &mut b[..2]), Err(Error(FI_ETOOSMALL)));
}

/// FI_THREAD_SAFE: one thread sends while another posts receives and
/// reads the shared CQ (which drives progress of both endpoints).
#[test]
fn two_threads() {
    const N: usize = 2000;
    let p = Arc::new(pair(false));
    let q = p.clone();
    let t = std::thread::spawn(move || {
        let mut i = 0usize;
        while i < N {
            let v = (i as u64).to_ne_bytes();
            match send(&*q.a, &v, q.to_b, 0, Some(1)) {
                Ok(()) => i += 1,
                Err(e) if e == EAGAIN => std::thread::yield_now(),
                Err(e) => panic!("send: {e:?}"),
            }
        }
    });
    let mut got = 0usize;
    let mut buf = [0u8; 8];
    let mut sends = 0usize;
    while got < N {
        recv(&*p.b, &mut buf, 5, Some(1)).unwrap();
        loop {
            let c = match next(&p.cq) {
                Ok(c) => c,
                Err(e) => panic!("got {got} sends {sends}: {e:?}"),
            };
            if c[0] == 5 {
                assert_eq!(u64::from_ne_bytes(buf), got as u64, "in order");
                got += 1;
                break;
            }
            sends += 1;
        }
    }
    t.join().unwrap();
    while sends < N {
        next(&p.cq).unwrap();
        sends += 1;
    }
}

#[test]
fn bad_destinations_and_unbound() {
    let p = pair(true);
    assert_eq!(send(&*p.a, b"x", 99, 0, None), Err(EINVAL));
    let iov = [rfabric_core::provider::Iov { base: 0, len: 0 }];
    let big = vec![0u8; 8192];
    let op = TxOp { iov: &iov, desc: Descs::NONE, dest: p.to_b, context: 0, tag: 0, data: 0, flags: FI_INJECT, tagged: false, no_completion: true };
    // SAFETY: zero-length inject.
    assert_eq!(unsafe { p.a.send(&op) }, Ok(()));
    let iov = [rfabric_core::provider::Iov { base: big.as_ptr() as usize, len: big.len() }];
    let op = TxOp { iov: &iov, ..op };
    // SAFETY: big lives across the call.
    assert_eq!(unsafe { p.a.send(&op) }, Err(EINVAL));
    let eq = rfabric_core::objects::eq::Eq::new(0, FI_WAIT_NONE).unwrap();
    let eqb = rfabric_core::provider::EqBinding { eq: std::sync::Arc::new(rfabric_core::objects::wait::Locked::new(eq)), fid: 0, context: 0 };
    assert_eq!(p.a.bind(Bind::Eq(&eqb), 0), Err(Error(FI_EOPBADSTATE)));
    p.a.close().unwrap();
    assert_eq!(send(&*p.a, b"x", p.to_b, 0, None), Err(Error(FI_EOPBADSTATE)));
}

fn recvmsg(ep: &dyn Endpoint, iov: &[rfabric_core::provider::Iov], ctx: usize, tag: u64, flags: u64) -> Result<()> {
    let op = RxOp { iov, desc: Descs::NONE, src: FI_ADDR_UNSPEC, context: ctx, tag, ignore: 0, flags, tagged: true };
    // SAFETY: the buffers outlive the receive's completion.
    unsafe { ep.recv(&op) }
}

#[test]
fn peek_claim_discard_and_scatter() {
    let p = pair(false);
    send(&*p.a, b"hello", p.to_b, 1, Some(4)).unwrap();
    send(&*p.a, b"gone", p.to_b, 2, Some(5)).unwrap();
    assert_eq!(next(&p.cq).unwrap()[0], 1);
    assert_eq!(next(&p.cq).unwrap()[0], 2);
    recvmsg(&*p.b, &[], 10, 9, FI_PEEK).unwrap();
    assert_eq!(next(&p.cq), Err(Error(FI_EAVAIL)));
    let (e, _) = p.cq.readerr(None, fi_version(1, 17)).unwrap();
    assert_eq!((e.err, e.base.op_context), (FI_ENOMSG, 10));
    recvmsg(&*p.b, &[], 11, 4, FI_PEEK | FI_CLAIM).unwrap();
    let c = next(&p.cq).unwrap();
    assert_eq!((c[0], c[2], c[5]), (11, 5, 4));
    let mut x = [0u8; 2];
    let mut y = [0u8; 8];
    let iov = [
        rfabric_core::provider::Iov { base: x.as_mut_ptr() as usize, len: 2 },
        rfabric_core::provider::Iov { base: y.as_mut_ptr() as usize, len: 8 },
    ];
    recvmsg(&*p.b, &iov, 11, 0, FI_CLAIM).unwrap();
    let c = next(&p.cq).unwrap();
    assert_eq!((c[0], c[2]), (11, 5));
    assert_eq!((&x, &y[..3]), (b"he", &b"llo"[..]));
    recvmsg(&*p.b, &[], 12, 5, FI_PEEK | FI_DISCARD).unwrap();
    assert_eq!(next(&p.cq).unwrap()[0], 12);
    recvmsg(&*p.b, &[], 13, 5, FI_PEEK).unwrap();
    assert_eq!(next(&p.cq), Err(Error(FI_EAVAIL)));
    assert_eq!(recvmsg(&*p.b, &[], 14, 5, FI_DISCARD), Err(EINVAL));
}

#[test]
fn multi_recv_takes_queued_messages() {
    let p = pair(false);
    p.b.setopt(FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &16usize.to_ne_bytes()).unwrap();
    for i in 0..3u8 {
        send(&*p.a, &[i; 10], p.to_b, 1, None).unwrap();
        next(&p.cq).unwrap();
    }
    let mut buf = [0u8; 40];
    let iov = [rfabric_core::provider::Iov { base: buf.as_mut_ptr() as usize, len: 40 }];
    let op = RxOp { iov: &iov, desc: Descs::NONE, src: FI_ADDR_UNSPEC, context: 7, tag: 0, ignore: 0, flags: FI_MULTI_RECV, tagged: false };
    // SAFETY: buf outlives the receive.
    unsafe { p.b.recv(&op) }.unwrap();
    for i in 0..3usize {
        let c = next(&p.cq).unwrap();
        assert_eq!((c[0], c[2], c[3]), (7, 10, buf.as_ptr() as u64 + 10 * i as u64));
        assert_eq!(c[1] & FI_MULTI_RECV != 0, i == 2, "released on the last slice");
    }
    assert_eq!(&buf[..30], &[[0u8; 10], [1; 10], [2; 10]].concat()[..]);
}

/// A CQ read that progresses the one endpoint bound to its CQ takes
/// the first receive completion straight from progress (`Handoff`):
/// completions still come out in order, behind queued errors, with
/// their source, several at once, and none is lost to a read that
/// cannot hold it.
#[test]
fn cq_read_takes_completions_in_order() {
    for threading in [FI_THREAD_SAFE, FI_THREAD_DOMAIN] {
        let mut info = Info { caps: FI_MSG | FI_TAGGED | FI_SOURCE, ..Info::default() };
        info.domain_attr = Some(DomainAttr { mr_key_size: 8, threading, ..DomainAttr::default() });
        // SAFETY: this test uses the domain from one thread.
        let d = unsafe { ShmDomain::with_app_threading(&info) }.unwrap();
        let av = d.av_open(&AvAttr { kind: FI_AV_TABLE, count: 4, flags: 0 }).unwrap();
        let attr = CqAttr { size: 64, format: FI_CQ_FORMAT_TAGGED, wait_obj: FI_WAIT_NONE };
        let (cqa, cqb) = (d.cq_open(&attr).unwrap(), d.cq_open(&attr).unwrap());
        let (a, b) = (d.endpoint(&info).unwrap(), d.endpoint(&info).unwrap());
        for (ep, cq) in [(&a, &cqa), (&b, &cqb)] {
            ep.bind(Bind::Av(&av), 0).unwrap();
            ep.bind(Bind::Cq(cq), FI_TRANSMIT | FI_RECV).unwrap();
            ep.enable().unwrap();
        }
        let (mut na, mut nb) = ([0u8; 64], [0u8; 64]);
        let (la, lb) = (a.getname(&mut na).unwrap(), b.getname(&mut nb).unwrap());
        let mut out = [0u64; 2];
        av.insert(&[&na[..la], &nb[..lb]], Some(&mut out), 0).unwrap();
        let (to_a, to_b) = (out[0], out[1]);
        let read = |count: usize, raw: &mut [u8], src: &mut [u64]| {
            for _ in 0..1_000_000 {
                match cqb.read(raw, count, Some(&mut *src)) {
                    Err(e) if e.0 == FI_EAGAIN => continue,
                    r => return r,
                }
            }
            Err(EAGAIN)
        };
        let ctx_of = |raw: &[u8], i: usize| u64::from_ne_bytes(raw[i * 48..i * 48 + 8].try_into().unwrap());
        let mut bufs = [[0u8; 16]; 3];
        let mut raw = [0u8; 4 * 48];
        let mut src = [0u64; 4];

        // Three messages wait in the ring when the read starts: one read
        // of one entry each, in order, each with its source.
        for (i, buf) in bufs.iter_mut().enumerate() {
            recv(&*b, buf, 1 + i, None).unwrap();
        }
        for i in 0..3u8 {
            send(&*a, &[i + 1; 8], to_b, 100, None).unwrap();
        }
        let ring_len = || cqb.clone().as_any_arc().downcast::<ShmCq>().unwrap().hints.ready.load(std::sync::atomic::Ordering::Relaxed);
        for (i, buf) in bufs.iter().enumerate() {
            src[0] = 0;
            assert_eq!(read(1, &mut raw[..48], &mut src[..1]), Ok(1));
            assert_eq!((ctx_of(&raw, 0), src[0]), (1 + i as u64, to_a), "threading {threading}");
            assert_eq!(buf[..8], [i as u8 + 1; 8]);
            // A one-entry read stops progress at its entry: the other
            // messages wait in the transport ring, not in the CQ.
            assert_eq!(ring_len(), 0);
        }
        // The same, read all at once.
        for (i, buf) in bufs.iter_mut().enumerate() {
            recv(&*b, buf, 11 + i, None).unwrap();
        }
        for _ in 0..3 {
            send(&*a, &[9; 8], to_b, 100, None).unwrap();
        }
        src = [0; 4];
        assert_eq!(read(4, &mut raw, &mut src), Ok(3));
        assert_eq!(ring_len(), 0);
        assert_eq!([ctx_of(&raw, 0), ctx_of(&raw, 1), ctx_of(&raw, 2)], [11, 12, 13]);
        assert_eq!(src, [to_a, to_a, to_a, 0]);

        // That read found nothing behind its entries (as in a
        // ping-pong), so the next one stops at its entry even with more
        // waiting; the one after finds the next message already there
        // (a stream) and drains the ring again.
        for (i, buf) in bufs.iter_mut().enumerate() {
            recv(&*b, buf, 41 + i, None).unwrap();
        }
        for _ in 0..3 {
            send(&*a, &[2; 8], to_b, 100, None).unwrap();
        }
        assert_eq!(read(4, &mut raw, &mut src), Ok(1));
        assert_eq!(ctx_of(&raw, 0), 41);
        assert_eq!(read(4, &mut raw, &mut src), Ok(2));
        assert_eq!([ctx_of(&raw, 0), ctx_of(&raw, 1)], [42, 43]);

        // A truncated message, then a good one: the error comes first.
        let mut small = [0u8; 4];
        let mut big = [0u8; 16];
        recv(&*b, &mut small, 21, None).unwrap();
        recv(&*b, &mut big, 22, None).unwrap();
        send(&*a, &[5; 8], to_b, 100, None).unwrap();
        send(&*a, &[6; 8], to_b, 100, None).unwrap();
        assert_eq!(read(1, &mut raw[..48], &mut src[..1]), Err(Error(FI_EAVAIL)));
        let (e, _) = cqb.readerr(None, fi_version(1, 17)).unwrap();
        assert_eq!((e.base.op_context, e.err), (21, FI_ETRUNC));
        assert_eq!(read(1, &mut raw[..48], &mut src[..1]), Ok(1));
        assert_eq!(ctx_of(&raw, 0), 22);

        // A read that could not hold an entry leaves it for the next.
        recv(&*b, &mut big, 31, None).unwrap();
        send(&*a, &[7; 8], to_b, 100, None).unwrap();
        assert!(cqb.read(&mut raw[..47], 1, None).is_err());
        assert!(cqb.read(&mut raw[..48], 1, Some(&mut [])).is_err());
        assert_eq!(read(1, &mut raw[..48], &mut src[..1]), Ok(1));
        assert_eq!(ctx_of(&raw, 0), 31);
        assert_eq!(cqb.read(&mut raw[..48], 1, None), Err(EAGAIN));
        drop((a, b));
    }
}

#[test]
fn address_string_round_trip() {
    let a = Address { pid: 1234, nonce: [7; 16], start_time: 99 };
    let s = addr_to_str(&a);
    assert_eq!(s.len(), ADDR_STR_LEN);
    assert!(s.len() < FI_NAME_MAX);
    let mut raw = s.clone().into_bytes();
    raw.push(0);
    assert_eq!(addr_from_str(&raw).unwrap(), a);
    assert!(addr_from_str(b"fi_shm://short").is_err());
    assert!(addr_from_str(b"fi_sockets://AAAA").is_err());
    let mut bad = s.into_bytes();
    bad[12] = b'*';
    assert!(addr_from_str(&bad).is_err());
}
