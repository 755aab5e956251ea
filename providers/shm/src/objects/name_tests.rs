//! fi_setname / named addresses, in one process (the two-process and
//! killed-owner cases are in `tests/c/shm_setname.c`).

use super::*;
use rfabric_core::abi::*;
use rfabric_core::error::{Error, Result, EINVAL};
use rfabric_core::info::{DomainAttr, Info};
use rfabric_core::objects::cq::CqAttr;
use rfabric_core::provider::{AddressVector, AvAttr, Bind, CompletionQueue, Descs, Domain, Endpoint, RxOp, TxOp};
use std::sync::Arc;

struct Fix {
    d: ShmDomain,
    info: Info,
    cq: Arc<dyn CompletionQueue>,
    av: Arc<dyn AddressVector>,
}

fn fix() -> Fix {
    let mut info = Info { caps: FI_MSG | FI_TAGGED, ..Info::default() };
    info.domain_attr = Some(DomainAttr { mr_key_size: 8, threading: FI_THREAD_SAFE, ..DomainAttr::default() });
    let d = ShmDomain::new(&info).unwrap();
    let cq = d.cq_open(&CqAttr { size: 64, format: FI_CQ_FORMAT_TAGGED, wait_obj: FI_WAIT_NONE }).unwrap();
    let av = d.av_open(&AvAttr { kind: FI_AV_TABLE, count: 8, flags: 0 }).unwrap();
    Fix { d, info, cq, av }
}

impl Fix {
    fn ep(&self) -> Box<dyn Endpoint> {
        self.d.endpoint(&self.info).unwrap()
    }
    fn enable(&self, ep: &dyn Endpoint) {
        ep.bind(Bind::Av(&self.av), 0).unwrap();
        ep.bind(Bind::Cq(&self.cq), FI_TRANSMIT | FI_RECV).unwrap();
        ep.enable().unwrap();
    }
    fn insert(&self, s: &str) -> Result<u64> {
        let mut out = [0u64];
        let n = self.av.insert(&[s.as_bytes()], Some(&mut out), 0)?;
        if n != 1 {
            return Err(EINVAL);
        }
        Ok(out[0])
    }
    /// Next completion: (context, len, source).
    fn next(&self) -> (u64, u64, u64) {
        let mut raw = [0u8; 48];
        let mut src = [0u64];
        for _ in 0..1_000_000 {
            match self.cq.read(&mut raw, 1, Some(&mut src)) {
                Ok(1) => {
                    let w = |i: usize| u64::from_ne_bytes(raw[i * 8..i * 8 + 8].try_into().unwrap());
                    return (w(0), w(2), src[0]);
                }
                Err(e) if e.0 == FI_EAGAIN => continue,
                r => panic!("cq read: {r:?}"),
            }
        }
        panic!("no completion");
    }
}

fn name(ep: &dyn Endpoint) -> String {
    let mut b = [0u8; 80];
    let n = ep.getname(&mut b).unwrap();
    assert_eq!(b[n - 1], 0, "getname ends with a NUL");
    String::from_utf8(b[..n - 1].to_vec()).unwrap()
}

fn setname(ep: &dyn Endpoint, s: &str) -> Result<()> {
    let mut v = s.as_bytes().to_vec();
    v.push(0);
    ep.setname(&v)
}

fn send(ep: &dyn Endpoint, buf: &[u8], dest: u64, ctx: usize) -> Result<()> {
    let iov = [rfabric_core::provider::Iov { base: buf.as_ptr() as usize, len: buf.len() }];
    let op = TxOp { iov: &iov, desc: Descs::NONE, dest, context: ctx, tag: 0, data: 0, flags: 0, tagged: false, no_completion: false };
    // SAFETY: every buffer here is eager (copied before send returns).
    unsafe { ep.send(&op) }
}

fn recv(ep: &dyn Endpoint, buf: &mut [u8], ctx: usize) -> Result<()> {
    let iov = [rfabric_core::provider::Iov { base: buf.as_mut_ptr() as usize, len: buf.len() }];
    let op = RxOp { iov: &iov, desc: Descs::NONE, src: FI_ADDR_UNSPEC, context: ctx, tag: 0, ignore: 0, flags: 0, tagged: false };
    // SAFETY: buf outlives the completion read before it goes.
    unsafe { ep.recv(&op) }
}

fn shm_file(n: &str) -> std::path::PathBuf {
    std::path::Path::new(crate::segment::SHM_DIR).join(crate::segment::named_shm_name(n))
}

#[test]
fn bad_names_are_einval() {
    let f = fix();
    let ep = f.ep();
    let long = format!("fi_shm://{}", "x".repeat(41));
    for bad in ["fi_shm://", "fi_shm://a/b", "fi_shm://a b", "fi_shm://é", "fi_sockets://abc", "abc", long.as_str()] {
        assert_eq!(setname(&*ep, bad), Err(EINVAL), "{bad}");
        assert_eq!(f.insert(bad), Err(EINVAL), "{bad}");
    }
    // The NUL must lie inside addrlen.
    assert_eq!(ep.setname(b"fi_shm://nonul"), Err(EINVAL));
    assert_eq!(ep.setname(b""), Err(EINVAL));
    // 40 characters is the longest name.
    let n40 = format!("fi_shm://{}{}", std::process::id(), "y".repeat(40 - std::process::id().to_string().len()));
    assert_eq!(setname(&*ep, &n40), Ok(()));
    assert_eq!(name(&*ep), n40);
    // Nothing was named by the refused calls.
    assert!(!shm_file("a").exists());
}

#[test]
fn own_address_forms() {
    let f = fix();
    let (a, b) = (f.ep(), f.ep());
    let (na, nb) = (name(&*a), name(&*b));
    // Its own address: accepted, nothing changes.
    assert_eq!(setname(&*a, &na), Ok(()));
    assert_eq!(name(&*a), na);
    // Another endpoint of this process: in use. Another process: invalid.
    assert_eq!(setname(&*a, &nb), Err(Error(FI_EADDRINUSE)));
    let mut other = addr_from_str(nb.as_bytes()).unwrap();
    other.pid = if other.pid == 1 { 2 } else { 1 };
    assert_eq!(setname(&*a, &addr_to_str(&other)), Err(EINVAL));
    // Named, then its own address again: the name goes away.
    let n = format!("rft-own-{}", std::process::id());
    setname(&*a, &format!("fi_shm://{n}")).unwrap();
    assert!(shm_file(&n).exists());
    assert_eq!(setname(&*a, &na), Ok(()));
    assert_eq!(name(&*a), na);
    assert!(!shm_file(&n).exists());
}

#[test]
fn named_endpoint_is_reached_by_its_name() {
    let f = fix();
    let (a, b) = (f.ep(), f.ep());
    let n = format!("rft.{}_a", std::process::id());
    let full = format!("fi_shm://{n}");
    assert_eq!(setname(&*a, &full), Ok(()));
    assert_eq!(name(&*a), full);
    assert_eq!(setname(&*a, &full), Ok(()), "the same name again");
    assert!(shm_file(&n).exists());
    // One name, one endpoint.
    assert_eq!(setname(&*b, &full), Err(Error(FI_EADDRINUSE)));
    f.enable(&*a);
    f.enable(&*b);
    assert_eq!(setname(&*a, &format!("fi_shm://{n}x")), Err(Error(FI_EBUSY)));
    assert_eq!(setname(&*a, &full), Err(Error(FI_EBUSY)));

    let to_a = f.insert(&full).unwrap();
    let to_b = f.insert(&name(&*b)).unwrap();
    // lookup keeps the name; straddr prints it.
    let mut buf = [0u8; 80];
    let l = f.av.lookup(to_a, &mut buf).unwrap();
    assert_eq!(&buf[..l], format!("{full}\0").as_bytes());
    assert_eq!(f.av.straddr(full.as_bytes()), full);
    // Both directions, data and source checked.
    let msg: Vec<u8> = (0..3000).map(|i| (i * 7) as u8).collect();
    send(&*b, &msg, to_a, 1).unwrap();
    assert_eq!(f.next().0, 1);
    let mut got = vec![0u8; 4000];
    recv(&*a, &mut got, 2).unwrap();
    let (ctx, len, src) = f.next();
    assert_eq!((ctx, len as usize, src), (2, msg.len(), to_b));
    assert_eq!(&got[..msg.len()], &msg[..]);
    send(&*a, &msg[..100], to_b, 3).unwrap();
    assert_eq!(f.next().0, 3);
    recv(&*b, &mut got, 4).unwrap();
    let (ctx, len, src) = f.next();
    assert_eq!((ctx, len, src), (4, 100, to_a));
    assert_eq!(&got[..100], &msg[..100]);
    // Closing frees the name.
    a.close().unwrap();
    assert!(!shm_file(&n).exists());
    let c = f.ep();
    assert_eq!(setname(&*c, &full), Ok(()));
}

#[test]
fn name_inserted_before_its_endpoint_exists() {
    let f = fix();
    let n = format!("rft-late-{}", std::process::id());
    let full = format!("fi_shm://{n}");
    // Accepted like an address whose segment is gone; a send fails.
    let late = f.insert(&full).unwrap();
    assert_eq!(f.insert(&full), Ok(late), "the same pending name shares its slot");
    let x = f.ep();
    f.enable(&*x);
    let to_x = f.insert(&name(&*x)).unwrap();
    assert_eq!(send(&*x, b"hi", late, 1), Err(Error(libc::ENOENT)));
    let mut buf = [0u8; 80];
    let l = f.av.lookup(late, &mut buf).unwrap();
    assert_eq!(&buf[..l], format!("{full}\0").as_bytes());

    // The named endpoint appears and sends first: its messages carry the
    // resolved name's fi_addr as source.
    let y = f.ep();
    setname(&*y, &full).unwrap();
    f.enable(&*y);
    send(&*y, b"from y", to_x, 5).unwrap();
    assert_eq!(f.next().0, 5);
    let mut got = [0u8; 16];
    recv(&*x, &mut got, 6).unwrap();
    assert_eq!(f.next(), (6, 6, late));
    assert_eq!(&got[..6], b"from y");
    // And the name now reaches y.
    send(&*x, b"to y", late, 7).unwrap();
    assert_eq!(f.next().0, 7);
    recv(&*y, &mut got, 8).unwrap();
    assert_eq!(f.next(), (8, 4, to_x));
    assert_eq!(&got[..4], b"to y");
    // Removing the entry forgets the name.
    f.av.remove(&[late, late], 0).unwrap();
    assert_eq!(f.av.lookup(late, &mut buf), Err(EINVAL));
}
