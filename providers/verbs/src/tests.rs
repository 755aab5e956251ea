//! Discovery and memory registration against the recording stand-in for
//! libibverbs (`rfabric_ibverbs::standin`, thread-local: each test builds
//! its own devices), and the real machine (no RDMA device).

use crate::addr::{v4_gid, Addr};
use crate::discovery::{plan, probe, DeviceView, PortView, Probe};
use crate::provider::{offer, VerbsDomain, VerbsProvider, MR_MODE};
use rfabric_core::abi::*;
use rfabric_core::objects::local_mr::Dmabuf;
use rfabric_core::objects::mr_cache::MonitorKind;
use rfabric_core::provider::{Domain, MrReq, Provider};
use rfabric_ibverbs::standin::{self, Call, PortCfg};
use rfabric_ibverbs::sys::*;
use rfabric_ibverbs::{LinkLayer, Mtu, NodeType, PortState, Transport, Verbs};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

fn v6(s: &str) -> [u8; 16] {
    s.parse::<Ipv6Addr>().unwrap().octets()
}

/// A RoCE port's GID table: the MAC-based link-local GID (RoCE v1 and v2),
/// IPv4-mapped 10.0.0.5 (v1 and v2), an IPv6 address, and unused entries.
fn roce_gids() -> Vec<[u8; 16]> {
    let ll = v6("fe80::268a:7ff:fe11:2233");
    let v4 = v4_gid(Ipv4Addr::new(10, 0, 0, 5));
    vec![ll, ll, v4, v4, v6("2001:db8::5"), [0; 16], [0; 16]]
}

const IB_GID: [u8; 16] = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x0c, 0x42, 0xa1, 0x03, 0, 0x5e, 0x1a, 0x2b];

fn no_ipoib(_: &[u8; 16]) -> Vec<IpAddr> {
    Vec::new()
}

fn ipoib_one(g: &[u8; 16]) -> Vec<IpAddr> {
    if *g == IB_GID {
        vec!["192.168.7.5".parse().unwrap()]
    } else {
        Vec::new()
    }
}

fn port(port: u8, state: PortState, link_layer: LinkLayer, gids: Vec<[u8; 16]>) -> PortView {
    PortView { port, state, link_layer, lid: 0, active_mtu: Mtu::M4096, max_msg_sz: 1 << 30, gids }
}

#[test]
fn plan_one_active_and_one_inactive_port() {
    let dev = DeviceView {
        name: "mlx5_0".into(),
        node_type: NodeType::Ca,
        transport: Transport::Ib,
        efa: false,
        phys_port_cnt: 2,
        ports: vec![
            Ok(port(1, PortState::Active, LinkLayer::Ethernet, roce_gids())),
            Ok(port(2, PortState::Down, LinkLayer::Ethernet, roce_gids())),
        ],
    };
    let (domains, notes) = plan(&[dev], &no_ipoib);
    assert_eq!(domains.len(), 1);
    let d = &domains[0];
    assert_eq!((d.name.as_str(), d.device.as_str(), d.port), ("mlx5_0-1", "mlx5_0", 1));
    assert_eq!(d.addrs, vec![Addr::Ip("10.0.0.5".parse().unwrap()), Addr::Ip("2001:db8::5".parse().unwrap())]);
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(notes[0].contains("mlx5_0 port 2") && notes[0].contains("not active"), "{notes:?}");
}

#[test]
fn plan_an_infiniband_port_with_ipoib_and_devices_left_out() {
    let ib = DeviceView {
        name: "mlx5_1".into(),
        node_type: NodeType::Ca,
        transport: Transport::Ib,
        efa: false,
        phys_port_cnt: 1,
        ports: vec![Ok(port(1, PortState::Active, LinkLayer::InfiniBand, vec![IB_GID]))],
    };
    let efa = DeviceView { name: "efa_0".into(), efa: true, ports: Vec::new(), ..ib.clone() };
    let iwarp = DeviceView { name: "iw_0".into(), transport: Transport::Iwarp, ports: Vec::new(), ..ib.clone() };
    let (domains, notes) = plan(&[ib, efa, iwarp], &ipoib_one);
    assert_eq!(domains.len(), 1);
    assert_eq!(domains[0].name, "mlx5_1", "one port: the device's name");
    let formats: Vec<u32> = domains[0].addrs.iter().map(|a| a.format()).collect();
    assert_eq!(formats, vec![FI_SOCKADDR_IN, FI_SOCKADDR_IB]);
    assert_eq!(domains[0].addrs[1], Addr::Ib { gid: IB_GID, pkey: 0xffff });
    assert_eq!(notes.len(), 2, "{notes:?}");
}

#[test]
fn the_stand_in_with_one_active_and_one_inactive_port() {
    standin::add_device("mlx5_0", IBV_NODE_CA, IBV_TRANSPORT_IB, "");
    standin::set_port("mlx5_0", 1, PortCfg { state: IBV_PORT_ACTIVE, link_layer: IBV_LINK_LAYER_ETHERNET, lid: 0, gids: roce_gids() });
    standin::set_port("mlx5_0", 2, PortCfg { state: IBV_PORT_DOWN, link_layer: IBV_LINK_LAYER_ETHERNET, lid: 0, gids: roce_gids() });
    let p = VerbsProvider::with_verbs(Verbs::from_fns(standin::verbs_fns(), None), no_ipoib);
    let infos = p.offers();
    assert_eq!(infos.len(), 2);
    for i in &infos {
        assert_eq!(i.domain_attr.as_ref().unwrap().name.as_deref(), Some("mlx5_0-1"));
        assert_eq!(i.ep_attr.as_ref().unwrap().ep_type, FI_EP_MSG);
        assert_eq!(i.domain_attr.as_ref().unwrap().mr_mode, MR_MODE);
    }
    assert_eq!(infos[0].addr_format, FI_SOCKADDR_IN);
    assert_eq!(&infos[0].src_addr.as_ref().unwrap()[4..8], &[10, 0, 0, 5]);
    assert_eq!(infos[1].addr_format, FI_SOCKADDR_IN6);
    // The whole GID table of the active port was read; port 2's was not.
    let calls = standin::take_calls();
    let gids: Vec<(u8, i32)> = calls.iter().filter_map(|c| match c {
        Call::QueryGid { port, index, .. } => Some((*port, *index)),
        _ => None,
    }).collect();
    // (`Verbs::devices` reads GID 0 of every port first.)
    assert!(gids.iter().filter(|g| g.0 == 1).count() > roce_gids().len(), "{gids:?}");
    assert!(gids.iter().filter(|g| g.0 == 2).count() <= 1, "{gids:?}");
    // Opened contexts were closed again.
    let opens = calls.iter().filter(|c| matches!(c, Call::OpenDevice(_))).count();
    let closes = calls.iter().filter(|c| matches!(c, Call::CloseDevice(_))).count();
    assert_eq!(opens, closes);
}

#[test]
fn the_stand_in_with_every_port_down_offers_nothing_and_says_why() {
    standin::add_device("mlx5_0", IBV_NODE_CA, IBV_TRANSPORT_IB, "");
    standin::set_port("mlx5_0", 1, PortCfg { state: IBV_PORT_DOWN, link_layer: IBV_LINK_LAYER_INFINIBAND, lid: 3, gids: vec![IB_GID] });
    let v = Verbs::from_fns(standin::verbs_fns(), None);
    let p = probe(Ok(&v), &no_ipoib);
    assert!(p.domains().is_empty());
    let lines = p.lines();
    assert_eq!(lines.len(), 1, "one line: {lines:?}");
    assert!(lines[0].starts_with("no verbs domains: mlx5_0 port 1: link not active (Down)"), "{lines:?}");
    assert!(VerbsProvider::with_verbs(v, no_ipoib).offers().is_empty());
}

#[test]
fn no_library_is_one_line_and_no_offer() {
    let names = rfabric_ibverbs::LibNames { verbs: "libibverbs-not-here.so.1".into(), efa: None };
    let loaded = Verbs::load_from(&names);
    let p = probe(loaded.as_ref().map_err(|e| e.to_string()), &no_ipoib);
    assert!(matches!(&p, Probe::NoLibrary(w) if w.contains("libibverbs-not-here.so.1")), "{p:?}");
    let lines = p.lines();
    assert_eq!(lines.len(), 1);
    assert!(lines[0].starts_with("no verbs domains: rdma-core's libibverbs is not available"));
}

#[test]
fn this_machine_has_no_verbs_domain() {
    // Debian's libibverbs is installed by the suite; the kernel here has
    // no RDMA device. Either way: no offer, no error.
    let p = VerbsProvider::system();
    assert!(p.offers().is_empty());
    assert!(p.fabric(&Default::default()).is_err());
}

fn stand_in_domain() -> VerbsDomain {
    standin::add_device("mlx5_0", IBV_NODE_CA, IBV_TRANSPORT_IB, "");
    standin::set_port("mlx5_0", 1, PortCfg { state: IBV_PORT_ACTIVE, link_layer: IBV_LINK_LAYER_ETHERNET, lid: 0, gids: roce_gids() });
    let v = Verbs::from_fns(standin::verbs_fns(), None);
    let p = probe(Ok(&v), &no_ipoib);
    let d = VerbsDomain::open(&v, &p.domains()[0]).unwrap();
    standin::take_calls();
    d
}

fn reg_calls() -> Vec<Call> {
    standin::take_calls().into_iter().filter(|c| matches!(c, Call::RegMrIova2 { .. } | Call::RegMr { .. } | Call::RegDmabufMr { .. } | Call::DeregMr(_))).collect()
}

#[test]
fn mr_reg_calls_ibv_reg_mr_once_per_mapped_range() {
    let d = stand_in_domain();
    let pd = d.pd().as_ptr() as usize;
    let buf = vec![7u8; 3 * 4096];
    let addr = buf.as_ptr() as usize;
    let req = MrReq { addr, len: buf.len(), access: FI_REMOTE_READ | FI_REMOTE_WRITE, ..MrReq::default() };
    let r1 = d.mr_reg(&req).unwrap();
    let access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
    assert_eq!(reg_calls(), vec![Call::RegMrIova2 { pd, addr, length: buf.len(), iova: addr as u64, access }]);
    assert!(r1.local.is_some(), "FI_MR_LOCAL: a descriptor");
    let cached = d.cache().monitor() != MonitorKind::Disabled;
    let r2 = d.mr_reg(&MrReq { addr: addr + 100, len: 200, access: FI_REMOTE_READ, ..MrReq::default() }).unwrap();
    if cached {
        assert_eq!(reg_calls(), vec![], "served by the cache");
        assert_eq!(r2.key, r1.key);
    }
    d.mr_close(r1.key).unwrap();
    d.mr_close(r2.key).unwrap();
    assert!(d.mr_close(r1.key).is_err(), "closed twice");
    drop(d);
    let deregs = reg_calls().into_iter().filter(|c| matches!(c, Call::DeregMr(_))).count();
    assert_eq!(deregs, if cached { 1 } else { 2 });
    drop(buf);
}

#[test]
fn mr_reg_refuses_an_empty_range() {
    let d = stand_in_domain();
    assert!(d.mr_reg(&MrReq { addr: 0x1000, len: 0, ..MrReq::default() }).is_err());
    assert_eq!(reg_calls(), vec![]);
}

fn memfd(len: i64) -> OwnedFd {
    // SAFETY: a name literal; the result is checked.
    let fd = unsafe { libc::memfd_create(c"rfabric-verbs-dmabuf".as_ptr(), libc::MFD_CLOEXEC) };
    assert!(fd >= 0, "memfd_create: {}", std::io::Error::last_os_error());
    // SAFETY: a fresh fd we own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: our fd.
    assert_eq!(unsafe { libc::ftruncate(fd.as_raw_fd(), len) }, 0);
    fd
}

#[test]
fn fi_mr_dmabuf_reaches_ibv_reg_dmabuf_mr_with_the_fd_offset_length_and_iova() {
    use std::os::unix::fs::MetadataExt;
    let d = stand_in_domain();
    let pd = d.pd().as_ptr() as usize;
    let fd = memfd(1 << 20);
    let ino = std::fs::metadata(format!("/proc/self/fd/{}", fd.as_raw_fd())).unwrap().ino();
    let b = Dmabuf { fd: fd.as_raw_fd(), offset: 8192, len: 65536, base_addr: 0x7f00_0000_0000 };
    let req = MrReq { access: FI_REMOTE_READ, dmabuf: Some(b), ..MrReq::default() };
    let r = d.mr_reg(&req).unwrap();
    assert_eq!(
        reg_calls(),
        vec![Call::RegDmabufMr {
            pd,
            offset: 8192,
            length: 65536,
            iova: 0x7f00_0000_0000,
            fd: fd.as_raw_fd(),
            ino,
            access: IBV_ACCESS_REMOTE_READ as i32,
        }]
    );
    // Not cached: a second one is a second registration.
    let r2 = d.mr_reg(&req).unwrap();
    assert_eq!(reg_calls().len(), 1);
    d.mr_close(r.key).unwrap();
    d.mr_close(r2.key).unwrap();
    assert_eq!(reg_calls().len(), 2, "both deregistered at close");
    // A bad fd is refused before any call.
    let bad = MrReq { dmabuf: Some(Dmabuf { fd: -1, offset: 0, len: 4096, base_addr: 0 }), ..MrReq::default() };
    assert!(d.mr_reg(&bad).is_err());
    assert_eq!(reg_calls(), vec![]);
}

#[test]
fn offers_carry_the_domain_and_address() {
    let (domains, _) = plan(
        &[DeviceView {
            name: "mlx5_1".into(),
            node_type: NodeType::Ca,
            transport: Transport::Ib,
            efa: false,
            phys_port_cnt: 1,
            ports: vec![Ok(port(1, PortState::Active, LinkLayer::InfiniBand, vec![IB_GID]))],
        }],
        &no_ipoib,
    );
    let i = offer(&domains[0], &domains[0].addrs[0]);
    assert_eq!(i.addr_format, FI_SOCKADDR_IB);
    assert_eq!(i.src_addr.as_ref().unwrap().len(), crate::addr::SOCKADDR_IB_LEN);
    assert_eq!(i.ep_attr.as_ref().unwrap().protocol, FI_PROTO_RDMA_CM_IB_RC);
    assert_eq!(i.ep_attr.as_ref().unwrap().max_msg_size, 1 << 30);
}

#[test]
fn access_bits() {
    use crate::provider::ibv_access;
    let lw = IBV_ACCESS_LOCAL_WRITE;
    assert_eq!(ibv_access(0), lw, "no access named: everything local");
    assert_eq!(ibv_access(FI_SEND), 0, "send-only memory may be read-only");
    assert_eq!(ibv_access(FI_SEND | FI_WRITE), 0);
    assert_eq!(ibv_access(FI_RECV), lw);
    assert_eq!(ibv_access(FI_READ), lw);
    assert_eq!(ibv_access(FI_REMOTE_READ), IBV_ACCESS_REMOTE_READ);
    assert_eq!(ibv_access(FI_REMOTE_WRITE), lw | IBV_ACCESS_REMOTE_WRITE);
}

#[test]
fn fi_fabric_and_fi_domain_open_the_device_of_the_domain_named() {
    standin::add_device("mlx5_0", IBV_NODE_CA, IBV_TRANSPORT_IB, "");
    standin::set_port("mlx5_0", 1, PortCfg { state: IBV_PORT_ACTIVE, link_layer: IBV_LINK_LAYER_ETHERNET, lid: 0, gids: roce_gids() });
    standin::set_port("mlx5_0", 2, PortCfg { state: IBV_PORT_DOWN, link_layer: IBV_LINK_LAYER_ETHERNET, lid: 0, gids: roce_gids() });
    let p = VerbsProvider::with_verbs(Verbs::from_fns(standin::verbs_fns(), None), no_ipoib);
    let info = p.offers().remove(0);
    let fabric = p.fabric(info.fabric_attr.as_ref().unwrap()).unwrap();
    standin::take_calls();
    // SAFETY: the test keeps the threading promise (one thread).
    let d = unsafe { fabric.domain(&info) }.unwrap();
    let calls = standin::take_calls();
    assert!(calls.iter().any(|c| matches!(c, Call::OpenDevice(_))) && calls.iter().any(|c| matches!(c, Call::AllocPd(_))), "{calls:?}");
    drop(d);
    let calls = standin::take_calls();
    assert!(calls.iter().any(|c| matches!(c, Call::DeallocPd(_))) && calls.iter().any(|c| matches!(c, Call::CloseDevice(_))), "{calls:?}");
    let mut other = info.clone();
    other.domain_attr.as_mut().unwrap().name = Some("mlx5_0-2".into());
    // SAFETY: as above.
    assert!(unsafe { fabric.domain(&other) }.is_err(), "port 2 is no domain");
    let mut bad = info.fabric_attr.clone().unwrap();
    bad.name = Some("other".into());
    assert!(p.fabric(&bad).is_err());
}
