//! An RMA request names its initiator (pid and address); a CMA piece reads
//! from or writes into that process. The target must take it only from the
//! peer the request came from: a request naming another endpoint is
//! refused (`EINVAL` in the reply) and nothing is written.

use rfabric_core::abi::*;
use rfabric_core::info::{DomainAttr, Info};
use rfabric_core::objects::cq::CqAttr;
use rfabric_core::provider::{AvAttr, Bind, Domain, MrReq};
use rfabric_shm::endpoint::{Config, Endpoint, Event, Kind, MsgHeader};
use rfabric_shm::objects::{addr_from_str, ShmDomain};
use rfabric_shm::Address;

const UF_RMA: u8 = 0x80;
const UF_REPLY: u8 = 0x40;

/// A one-piece CMA read of 8 bytes at `raddr` into `laddr` of `initiator`.
fn read_request(key: u64, raddr: u64, laddr: u64, initiator: &Address) -> Vec<u8> {
    let mut r = vec![0u8; 80];
    r[0] = 2; // read
    r[1] = 1; // by CMA
    r[3] = 2; // last piece
    r[16..24].copy_from_slice(&key.to_ne_bytes());
    r[24..32].copy_from_slice(&raddr.to_ne_bytes());
    r[32..40].copy_from_slice(&8u64.to_ne_bytes());
    r[40..48].copy_from_slice(&laddr.to_ne_bytes());
    r[48..80].copy_from_slice(&initiator.to_bytes());
    r
}

#[test]
fn request_naming_another_initiator_is_refused() {
    let mut info = Info { caps: FI_MSG | FI_RMA, ..Info::default() };
    info.domain_attr = Some(DomainAttr { mr_key_size: 8, mr_mode: (FI_MR_VIRT_ADDR | FI_MR_PROV_KEY) as i32, ..DomainAttr::default() });
    let d = ShmDomain::new(&info).unwrap();
    let cq = d.cq_open(&CqAttr { size: 64, format: FI_CQ_FORMAT_DATA, wait_obj: FI_WAIT_NONE }).unwrap();
    let av = d.av_open(&AvAttr { kind: FI_AV_TABLE, count: 4, flags: 0 }).unwrap();
    let a = d.endpoint(&info).unwrap();
    a.bind(Bind::Av(&av), 0).unwrap();
    a.bind(Bind::Cq(&cq), FI_TRANSMIT | FI_RECV).unwrap();
    a.enable().unwrap();
    let mut name = [0u8; 64];
    let n = a.getname(&mut name).unwrap();
    let a_addr = addr_from_str(&name[..n]).unwrap();

    let mut target = 0x1122_3344_5566_7788u64.to_ne_bytes();
    let req = MrReq { addr: target.as_mut_ptr() as usize, len: 8, access: FI_REMOTE_READ, ..Default::default() };
    let key = d.mr_reg(&req).unwrap().key;

    let mut x = Endpoint::new(Config::default()).unwrap();
    let y = Endpoint::new(Config::default()).unwrap();
    let to_a = x.attach(&a_addr).unwrap();
    let mut mine = [0u8; 8];
    let mut theirs = [0u8; 8];
    let base = target.as_ptr() as u64;
    let cases = [(1u64, read_request(key, base, mine.as_mut_ptr() as u64, &x.address())), (2, read_request(key, base, theirs.as_mut_ptr() as u64, &y.address()))];
    let mut status = [None, None];
    for (tag, r) in &cases {
        x.send_inline(to_a, &MsgHeader { flags: UF_RMA, tag: *tag, cq_data: 0 }, r).unwrap();
    }
    let mut raw = [0u8; 64];
    for _ in 0..1_000_000 {
        let _ = cq.read(&mut raw, 1, None); // progress of A
        if let Some(Event::Msg(inc)) = x.poll() {
            assert!(matches!(inc.kind, Kind::Inline { .. }) && inc.hdr.flags == UF_RMA | UF_REPLY);
            let mut b = [0u8; 64];
            x.recv_inline(&inc, &mut b).unwrap();
            status[inc.hdr.tag as usize - 1] = Some(inc.hdr.cq_data);
        }
        if status.iter().all(Option::is_some) {
            break;
        }
    }
    // Our own request: done (0), or refused by the kernel (CMA not allowed
    // here: the target says so with its "refused" status).
    assert!(matches!(status[0], Some(0) | Some(0x1_0000_0000)), "{status:?}");
    if status[0] == Some(0) {
        assert_eq!(mine, target);
    }
    assert_eq!(status[1], Some(libc::EINVAL as u64), "a request naming another endpoint");
    assert_eq!(theirs, [0u8; 8]);
    a.close().unwrap();
}
