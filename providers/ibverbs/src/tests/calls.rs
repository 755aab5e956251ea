//! The safe API over the recording stand-in: what reaches each function,
//! with which arguments, in which order.

use super::standin::{self, Call};
use crate::sys::*;
use crate::{Context, LinkLayer, Mtu, NodeType, PortState, Transport, Verbs, VerbsError};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};

fn verbs(efa: bool) -> Verbs {
    Verbs::from_fns(standin::verbs_fns(), efa.then(standin::efa_fns))
}

/// A stand-in `Verbs` with one device, opened.
fn opened(efa: bool) -> (Verbs, Context) {
    let v = verbs(efa);
    standin::add_device("fake0", IBV_NODE_CA, IBV_TRANSPORT_IB, "");
    let ctx = v.open_device("fake0").expect("open fake0");
    standin::take_calls();
    (v, ctx)
}

fn memfd(len: i64) -> OwnedFd {
    // SAFETY: a NUL-terminated name; the result is checked.
    let fd = unsafe { libc::memfd_create(c"rfabric-test-dmabuf".as_ptr(), libc::MFD_CLOEXEC) };
    assert!(fd >= 0, "memfd_create: {}", std::io::Error::last_os_error());
    // SAFETY: a descriptor we just opened and own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: a valid descriptor.
    assert_eq!(unsafe { libc::ftruncate(fd.as_raw_fd(), len) }, 0);
    fd
}

fn ino(fd: &OwnedFd) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(format!("/proc/self/fd/{}", fd.as_raw_fd())).unwrap().ino()
}

#[test]
fn reg_mr_takes_the_headers_run_time_branch_iova2_with_iova_addr() {
    let (_v, ctx) = opened(false);
    let pd = ctx.alloc_pd().unwrap();
    let mut buf = vec![0u8; 8192];
    let addr = buf.as_mut_ptr();
    let access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_RELAXED_ORDERING;
    standin::take_calls();
    // SAFETY: `buf` outlives the region (dropped below, before `buf`).
    let mr = unsafe { pd.reg_mr(addr.cast(), 8192, access) }.unwrap();
    assert_eq!(
        standin::take_calls(),
        vec![Call::RegMrIova2 { pd: pd.as_ptr() as usize, addr: addr as usize, length: 8192, iova: addr as u64, access }]
    );
    // SAFETY: the stand-in's live region.
    let raw = unsafe { *mr.as_ptr() };
    assert_eq!((mr.lkey(), mr.rkey(), mr.addr(), mr.length()), (raw.lkey, raw.rkey, addr as usize, 8192));
    let p = mr.as_ptr() as usize;
    drop(mr);
    assert_eq!(standin::take_calls(), vec![Call::DeregMr(p)]);
}

#[test]
fn reg_dmabuf_mr_reaches_libibverbs_exactly_as_asked() {
    let (_v, ctx) = opened(false);
    let pd = ctx.alloc_pd().unwrap();
    let fd = memfd(1 << 20);
    let access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    standin::take_calls();
    let mr = pd.reg_dmabuf_mr(0x3000, 0x10000, 0x7f00_dead_0000, fd.as_fd(), access).unwrap();
    assert_eq!(
        standin::take_calls(),
        vec![Call::RegDmabufMr {
            pd: pd.as_ptr() as usize,
            offset: 0x3000,
            length: 0x10000,
            iova: 0x7f00_dead_0000,
            fd: fd.as_raw_fd(),
            ino: ino(&fd),
            access: access as i32,
        }]
    );
    assert_eq!(mr.length(), 0x10000);
    // The region does not need the descriptor any more.
    drop(fd);
    let p = mr.as_ptr() as usize;
    drop(mr);
    assert_eq!(standin::take_calls(), vec![Call::DeregMr(p)]);
}

#[test]
fn reg_dmabuf_mr_without_the_function_is_eopnotsupp() {
    let mut fns = standin::verbs_fns();
    fns.reg_dmabuf_mr = None;
    let v = Verbs::from_fns(fns, None);
    assert!(!v.has_dmabuf());
    standin::add_device("fake0", IBV_NODE_CA, IBV_TRANSPORT_IB, "");
    let pd = v.open_device("fake0").unwrap().alloc_pd().unwrap();
    let fd = memfd(4096);
    standin::take_calls();
    let err = pd.reg_dmabuf_mr(0, 4096, 0, fd.as_fd(), IBV_ACCESS_LOCAL_WRITE).err().unwrap();
    assert_eq!(err, VerbsError::new("ibv_reg_dmabuf_mr", libc::EOPNOTSUPP));
    assert_eq!(standin::take_calls(), vec![]);
}

#[test]
fn failures_carry_the_call_and_its_errno() {
    let (_v, ctx) = opened(false);
    standin::fail("ibv_alloc_pd", libc::ENOMEM);
    assert_eq!(ctx.alloc_pd().err(), Some(VerbsError::new("ibv_alloc_pd", libc::ENOMEM)));
    standin::fail("ibv_create_cq", libc::EINVAL);
    assert_eq!(ctx.create_cq(16, 0).err(), Some(VerbsError::new("ibv_create_cq", libc::EINVAL)));
    standin::fail("ibv_query_device", libc::EIO);
    assert_eq!(ctx.query_device().err(), Some(VerbsError::new("ibv_query_device", libc::EIO)));
    // ibv_query_gid returns -1 and sets errno.
    assert_eq!(ctx.query_gid(1, 5).err(), Some(VerbsError::new("ibv_query_gid", libc::EINVAL)));
    standin::with(|w| w.fail.clear());
    let pd = ctx.alloc_pd().unwrap();
    standin::fail("reg_mr", libc::EFAULT);
    let mut b = [0u8; 64];
    // SAFETY: the registration fails; nothing is registered.
    let err = unsafe { pd.reg_mr(b.as_mut_ptr().cast(), 64, IBV_ACCESS_LOCAL_WRITE) }.err();
    assert_eq!(err, Some(VerbsError::new("ibv_reg_mr", libc::EFAULT)));
    let cq = ctx.create_cq(16, 0).unwrap();
    standin::fail("ibv_create_qp", libc::ENOSPC);
    let err = pd.create_qp(&cq, &cq, IBV_QPT_RC, ibv_qp_cap::default(), false).err();
    assert_eq!(err, Some(VerbsError::new("ibv_create_qp", libc::ENOSPC)));
    assert_eq!(err.unwrap().to_string(), format!("ibv_create_qp: {}", std::io::Error::from_raw_os_error(libc::ENOSPC)));
}

#[test]
fn objects_are_destroyed_children_first_whatever_order_they_are_dropped_in() {
    let (v, ctx) = opened(false);
    let pd = ctx.alloc_pd().unwrap();
    let scq = ctx.create_cq(64, 0).unwrap();
    let rcq = ctx.create_cq(128, 1).unwrap();
    let cap = ibv_qp_cap { max_send_wr: 32, max_recv_wr: 32, max_send_sge: 1, max_recv_sge: 1, max_inline_data: 0 };
    let qp = pd.create_qp(&scq, &rcq, IBV_QPT_RC, cap, true).unwrap();
    let mut buf = vec![0u8; 64];
    // SAFETY: `buf` outlives the region.
    let mr = unsafe { pd.reg_mr(buf.as_mut_ptr().cast(), 64, IBV_ACCESS_LOCAL_WRITE) }.unwrap();
    let (c, p, s, r, q, m) = (
        ctx.as_ptr() as usize,
        pd.as_ptr() as usize,
        scq.as_ptr() as usize,
        rcq.as_ptr() as usize,
        qp.as_ptr() as usize,
        mr.as_ptr() as usize,
    );
    let calls = standin::take_calls();
    assert_eq!(calls[0], Call::AllocPd(c));
    assert_eq!(calls[1], Call::CreateCq { ctx: c, cqe: 64, cq_context: 0, channel: 0, comp_vector: 0 });
    assert_eq!(calls[2], Call::CreateCq { ctx: c, cqe: 128, cq_context: 0, channel: 0, comp_vector: 1 });
    assert_eq!(
        calls[3],
        Call::CreateQp { pd: p, send_cq: s, recv_cq: r, qp_type: IBV_QPT_RC, max_send_wr: 32, sq_sig_all: 1 }
    );
    // What libibverbs wrote back into the init attributes.
    assert_eq!(qp.cap().max_inline_data, 64);
    // SAFETY: the stand-in's live QP.
    assert_eq!(qp.qp_num(), unsafe { (*qp.as_ptr()).qp_num });

    drop((v, ctx, pd, scq, rcq));
    assert_eq!(standin::take_calls(), vec![], "parents destroyed while children live");
    drop(qp);
    assert_eq!(standin::take_calls(), vec![Call::DestroyQp(q), Call::DestroyCq(s), Call::DestroyCq(r)]);
    drop(mr);
    assert_eq!(standin::take_calls(), vec![Call::DeregMr(m), Call::DeallocPd(p), Call::CloseDevice(c)]);
}

#[test]
fn modify_post_and_poll_through_the_objects() {
    let (_v, ctx) = opened(false);
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(16, 0).unwrap();
    let qp = pd.create_qp(&cq, &cq, IBV_QPT_RC, ibv_qp_cap::default(), false).unwrap();
    standin::take_calls();

    let attr = ibv_qp_attr { qp_state: IBV_QPS_INIT, port_num: 1, ..Default::default() };
    qp.modify(&attr, IBV_QP_STATE | IBV_QP_PORT).unwrap();
    let q = qp.as_ptr() as usize;
    assert_eq!(standin::take_calls(), vec![Call::ModifyQp { qp: q, qp_state: IBV_QPS_INIT, mask: IBV_QP_STATE | IBV_QP_PORT }]);
    standin::fail("ibv_modify_qp", libc::EINVAL);
    assert_eq!(qp.modify(&attr, IBV_QP_STATE).err(), Some(VerbsError::new("ibv_modify_qp", libc::EINVAL)));
    standin::take_calls();

    let mut wr = ibv_send_wr { wr_id: 5, opcode: IBV_WR_SEND, ..Default::default() };
    // SAFETY: a work request without scatter/gather entries.
    unsafe { qp.post_send(&mut wr) }.unwrap();
    assert!(matches!(standin::take_calls()[..], [Call::PostSend { qp, wr: w, .. }] if qp == q && w == &mut wr as *mut _ as usize));
    standin::with(|w| w.post_rc = libc::ENOMEM);
    // SAFETY: as above.
    let err = unsafe { qp.post_send(&mut wr) }.err().unwrap();
    assert_eq!(err.error, VerbsError::new("ibv_post_send", libc::ENOMEM));
    assert_eq!(err.bad_wr, &mut wr as *mut ibv_send_wr);
    let mut rwr = ibv_recv_wr { wr_id: 6, ..Default::default() };
    // SAFETY: as above.
    let err = unsafe { qp.post_recv(&mut rwr) }.err().unwrap();
    assert_eq!((err.error.errno, err.bad_wr), (libc::ENOMEM, &mut rwr as *mut ibv_recv_wr));
    standin::with(|w| w.post_rc = 0);
    standin::take_calls();

    let mut wc = [ibv_wc::default(); 4];
    assert_eq!(cq.poll(&mut wc).unwrap(), 1);
    assert_eq!((wc[0].wr_id, wc[0].opcode, wc[0].byte_len), (42, IBV_WC_RECV, 9));
    cq.req_notify(true).unwrap();
    let c = cq.as_ptr() as usize;
    assert_eq!(
        standin::take_calls(),
        vec![
            Call::PollCq { cq: c, n: 4, wc: wc.as_ptr() as usize },
            Call::ReqNotifyCq { cq: c, solicited_only: 1 }
        ]
    );
    standin::with(|w| w.post_rc = -libc::EAGAIN);
    assert_eq!(cq.poll(&mut wc).err(), Some(VerbsError::new("ibv_poll_cq", libc::EAGAIN)));
}

#[test]
fn efa_srd_qp_through_efadv_create_qp_ex() {
    let (_v, ctx) = opened(true);
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(16, 0).unwrap();
    standin::take_calls();
    let qp = pd.create_efa_srd_qp(&cq, &cq, ibv_qp_cap { max_send_wr: 8, ..Default::default() }, true).unwrap();
    assert_eq!(
        standin::take_calls(),
        vec![Call::EfaCreateQpEx {
            ctx: ctx.as_ptr() as usize,
            pd: pd.as_ptr() as usize,
            send_cq: cq.as_ptr() as usize,
            qp_type: IBV_QPT_DRIVER,
            comp_mask: IBV_QP_INIT_ATTR_PD,
            send_ops_flags: 0,
            driver_qp_type: EFADV_QP_DRIVER_TYPE_SRD,
            inlen: std::mem::size_of::<efadv_qp_init_attr>() as u32,
        }]
    );
    let q = qp.as_ptr() as usize;
    drop(qp);
    assert_eq!(standin::take_calls(), vec![Call::DestroyQp(q)]);
}

#[test]
fn without_libefa_the_efa_calls_are_eopnotsupp() {
    let (_v, ctx) = opened(false);
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(16, 0).unwrap();
    standin::take_calls();
    assert_eq!(ctx.efa_query_device().err(), Some(VerbsError::new("efadv_query_device", libc::EOPNOTSUPP)));
    let err = pd.create_efa_srd_qp(&cq, &cq, ibv_qp_cap::default(), false).err();
    assert_eq!(err, Some(VerbsError::new("efadv_create_qp_ex", libc::EOPNOTSUPP)));
    assert_eq!(standin::take_calls(), vec![]);
}

#[test]
fn devices_opens_queries_and_closes_each_and_frees_the_list() {
    // One device whose sysfs entry says driver "efa", one without.
    let sys = std::env::temp_dir().join(format!("rfabric-ibverbs-test-{}", std::process::id()));
    let ibdev = sys.join("class/infiniband/efa_0");
    std::fs::create_dir_all(ibdev.join("device")).unwrap();
    std::fs::create_dir_all(sys.join("bus/pci/drivers/efa")).unwrap();
    let _ = std::fs::remove_file(ibdev.join("device/driver"));
    std::os::unix::fs::symlink(sys.join("bus/pci/drivers/efa"), ibdev.join("device/driver")).unwrap();

    let v = verbs(true);
    standin::with(|w| {
        w.ports = 2;
        w.efa_device = true;
    });
    standin::add_device("efa_0", IBV_NODE_UNSPECIFIED, IBV_TRANSPORT_UNSPECIFIED, ibdev.to_str().unwrap());
    standin::add_device("mlx5_0", IBV_NODE_CA, IBV_TRANSPORT_IB, "");
    let devices = v.devices().unwrap();
    std::fs::remove_dir_all(&sys).unwrap();

    assert_eq!(devices.len(), 2);
    let (efa, mlx) = (&devices[0], &devices[1]);
    assert_eq!(efa.name, "efa_0");
    assert_eq!((efa.node_type, efa.transport), (NodeType::Unspecified, Transport::Unspecified));
    assert_eq!(efa.driver.as_deref(), Some("efa"));
    assert!(efa.is_efa());
    let d = efa.detail.as_ref().unwrap();
    assert_eq!((d.vendor_id, d.vendor_part_id, d.fw_ver.as_str(), d.phys_port_cnt), (0x1d0f, 0xefa1, "1.2.3", 2));
    let e = d.efa.unwrap();
    assert_eq!((e.max_sq_wr, e.max_rq_sge, e.inline_buf_size, e.max_rdma_size), (4096, 3, 32, 1 << 30));
    assert_eq!(d.ports.len(), 2);
    for (i, p) in d.ports.iter().enumerate() {
        let p = p.as_ref().unwrap();
        let n = i as u8 + 1;
        assert_eq!(p.port, n);
        assert_eq!((p.state, p.link_layer, p.active_mtu, p.max_mtu), (PortState::Active, LinkLayer::Ethernet, Mtu::M4096, Mtu::M4096));
        assert_eq!(p.active_mtu.bytes(), Some(4096));
        assert_eq!(p.lid, n as u16 * 100);
        let gid = p.gid0.unwrap();
        assert_eq!((gid[0], gid[15]), (n * 16, n * 16 + 15));
    }
    assert_eq!(mlx.name, "mlx5_0");
    assert_eq!((mlx.node_type, mlx.transport, mlx.driver.as_deref()), (NodeType::Ca, Transport::Ib, None));
    // The stand-in's efadv accepts every device: is_efa follows it.
    assert!(mlx.is_efa());

    // Every context opened was closed; the list was freed last.
    let calls = standin::take_calls();
    let opened = calls.iter().filter(|c| matches!(c, Call::OpenDevice(_))).count();
    let closed = calls.iter().filter(|c| matches!(c, Call::CloseDevice(_))).count();
    assert_eq!((opened, closed), (2, 2));
    assert_eq!(calls.first(), Some(&Call::GetDeviceList));
    assert!(matches!(calls.last(), Some(Call::FreeDeviceList(_))), "{calls:?}");
    let port_queries: Vec<_> = calls.iter().filter(|c| matches!(c, Call::QueryPortVctx { .. })).collect();
    assert_eq!(port_queries.len(), 4);
    assert!(port_queries.iter().all(|c| matches!(c, Call::QueryPortVctx { len, .. } if *len == std::mem::size_of::<ibv_port_attr>())));
}

#[test]
fn devices_through_the_compat_query_port() {
    // A provider without verbs_context: ports through the exported
    // ibv_query_port, on a zeroed struct.
    let v = verbs(false);
    standin::with(|w| w.extended = false);
    standin::add_device("old0", IBV_NODE_CA, IBV_TRANSPORT_IB, "");
    let devices = v.devices().unwrap();
    let port = devices[0].detail.as_ref().unwrap().ports[0].clone().unwrap();
    assert_eq!((port.state, port.link_layer, port.active_mtu, port.lid), (PortState::Down, LinkLayer::InfiniBand, Mtu::M1024, 7));
    assert!(!devices[0].is_efa());
    let calls = standin::take_calls();
    assert!(calls.iter().any(|c| matches!(c, Call::QueryPortExported { port: 1, zeroed: true, .. })), "{calls:?}");
    assert!(!calls.iter().any(|c| matches!(c, Call::QueryPortVctx { .. })));
    assert!(!calls.iter().any(|c| matches!(c, Call::EfaQueryDevice { .. })));
}

#[test]
fn a_device_that_fails_to_open_is_listed_with_its_error() {
    let v = verbs(false);
    standin::add_device("bad0", IBV_NODE_CA, IBV_TRANSPORT_IB, "");
    standin::fail("ibv_open_device", libc::EACCES);
    let devices = v.devices().unwrap();
    assert_eq!(devices.len(), 1);
    assert_eq!(devices[0].detail, Err(VerbsError::new("ibv_open_device", libc::EACCES)));
    assert!(matches!(standin::take_calls().last(), Some(Call::FreeDeviceList(_))));
}

#[test]
fn no_kernel_support_is_no_device_and_other_list_errors_are_errors() {
    let v = verbs(false);
    standin::add_device("x0", IBV_NODE_CA, IBV_TRANSPORT_IB, "");
    standin::fail("ibv_get_device_list", libc::ENOSYS);
    assert_eq!(v.devices(), Ok(vec![]));
    standin::fail("ibv_get_device_list", libc::EPERM);
    assert_eq!(v.devices(), Err(VerbsError::new("ibv_get_device_list", libc::EPERM)));
    // Nothing to free after a failed list.
    assert!(!standin::take_calls().iter().any(|c| matches!(c, Call::FreeDeviceList(_))));
}

#[test]
fn open_device_by_name() {
    let v = verbs(false);
    standin::add_device("a0", IBV_NODE_CA, IBV_TRANSPORT_IB, "");
    standin::add_device("b0", IBV_NODE_RNIC, IBV_TRANSPORT_IWARP, "");
    let ctx = v.open_device("b0").unwrap();
    assert_eq!(ctx.name(), "b0");
    // SAFETY: the stand-in's live context, on its device.
    let node_type = unsafe { (*(*ctx.as_ptr()).device).node_type };
    assert_eq!(node_type, IBV_NODE_RNIC);
    assert_eq!(v.open_device("c0").err(), Some(VerbsError::new("ibv_open_device", libc::ENODEV)));
    // The context outlives the list it came from.
    let calls = standin::take_calls();
    assert!(matches!(calls.last(), Some(Call::FreeDeviceList(_))));
    let c = ctx.as_ptr() as usize;
    drop(ctx);
    assert_eq!(standin::take_calls(), vec![Call::CloseDevice(c)]);
}

#[test]
fn address_handles_and_srd_sends_across_the_loopback() {
    let v = verbs(true);
    standin::with(|w| w.loopback = Some(Default::default()));
    let gid = |b: u8| [b; 16];
    for (dev, g) in [("efa0", 1u8), ("efa1", 2u8)] {
        standin::add_device(dev, IBV_NODE_UNSPECIFIED, IBV_TRANSPORT_UNSPECIFIED, "");
        standin::set_port(dev, 1, standin::PortCfg { state: IBV_PORT_ACTIVE, gids: vec![gid(g)], ..Default::default() });
    }
    let side = |dev: &str| {
        let ctx = v.open_device(dev).unwrap();
        let pd = ctx.alloc_pd().unwrap();
        let cq = ctx.create_cq(16, 0).unwrap();
        let qp = pd.create_efa_srd_qp(&cq, &cq, ibv_qp_cap { max_send_wr: 4, max_recv_wr: 4, max_send_sge: 1, max_recv_sge: 1, ..Default::default() }, true).unwrap();
        (ctx, pd, cq, qp)
    };
    let (_c0, pd0, cq0, qp0) = side("efa0");
    let (_c1, pd1, cq1, qp1) = side("efa1");
    standin::take_calls();

    let attr = |g: [u8; 16]| {
        let mut a = ibv_ah_attr { is_global: 1, port_num: 1, ..Default::default() };
        a.grh.dgid.raw = g;
        a
    };
    let ah = pd0.create_ah(&attr(gid(2))).unwrap();
    assert_eq!(
        standin::take_calls(),
        vec![Call::CreateAh { pd: pd0.as_ptr() as usize, dgid: gid(2), is_global: 1, port_num: 1 }]
    );
    // The receiver knows the sender's GID: its completions name that handle.
    let back = pd1.create_ah(&attr(gid(1))).unwrap();
    let back_ahn = standin::with(|w| w.ahs[&(back.as_ptr() as usize)].ahn);

    let mut rbuf = [0u8; 32];
    let mut rsge = ibv_sge { addr: rbuf.as_mut_ptr() as u64, length: 32, lkey: 1 };
    let mut rwr = ibv_recv_wr { wr_id: 77, sg_list: &mut rsge, num_sge: 1, ..Default::default() };
    // SAFETY: `rbuf` outlives the receive (it completes below).
    unsafe { qp1.post_recv(&mut rwr) }.unwrap();

    let msg = *b"srd hello";
    let mut sge = ibv_sge { addr: msg.as_ptr() as u64, length: msg.len() as u32, lkey: 2 };
    let mut wr = ibv_send_wr { wr_id: 5, opcode: IBV_WR_SEND, send_flags: IBV_SEND_SIGNALED, sg_list: &mut sge, num_sge: 1, ..Default::default() };
    wr.wr.ud = ibv_send_wr_ud { ah: ah.as_ptr(), remote_qpn: qp1.qp_num(), remote_qkey: 0x1234 };
    // SAFETY: `msg` outlives the send (the loopback copies it at once).
    unsafe { qp0.post_send(&mut wr) }.unwrap();
    let sent = standin::with(|w| w.sent.last().cloned()).unwrap();
    assert_eq!((sent.ah, sent.remote_qpn, sent.remote_qkey), (ah.as_ptr() as usize, qp1.qp_num(), 0x1234));

    let mut wc = [ibv_wc::default(); 2];
    assert_eq!(cq1.poll(&mut wc).unwrap(), 1);
    assert_eq!((wc[0].wr_id, wc[0].status, wc[0].byte_len), (77, IBV_WC_SUCCESS, msg.len() as u32));
    assert_eq!((wc[0].src_qp, wc[0].slid), (qp0.qp_num(), back_ahn));
    assert_eq!(&rbuf[..msg.len()], &msg);
    assert_eq!(cq0.poll(&mut wc).unwrap(), 1);
    assert_eq!((wc[0].wr_id, wc[0].status, wc[0].opcode), (5, IBV_WC_SUCCESS, IBV_WC_SEND));

    // Without a handle for the sender's GID, `slid` is 0xffff.
    drop(back);
    // SAFETY: as above.
    unsafe { qp1.post_recv(&mut rwr) }.unwrap();
    // SAFETY: as above.
    unsafe { qp0.post_send(&mut wr) }.unwrap();
    assert_eq!(cq1.poll(&mut wc).unwrap(), 1);
    assert_eq!((wc[0].src_qp, wc[0].slid), (qp0.qp_num(), 0xffff));
    cq0.poll(&mut wc).unwrap();

    // A send waiting for a receive fails when the destination QP goes; so
    // does one to a QP number nobody has.
    // SAFETY: as above.
    unsafe { qp0.post_send(&mut wr) }.unwrap();
    assert_eq!(cq0.poll(&mut wc).unwrap(), 0);
    drop(qp1);
    assert_eq!(cq0.poll(&mut wc).unwrap(), 1);
    assert_eq!((wc[0].wr_id, wc[0].status), (5, 12));
    // SAFETY: as above.
    unsafe { qp0.post_send(&mut wr) }.unwrap();
    assert_eq!(cq0.poll(&mut wc).unwrap(), 1);
    assert_eq!(wc[0].status, 12);

    standin::take_calls();
    let a = ah.as_ptr() as usize;
    drop(ah);
    assert_eq!(standin::take_calls(), vec![Call::DestroyAh(a)]);
    standin::fail("ibv_create_ah", libc::EINVAL);
    assert_eq!(pd0.create_ah(&attr(gid(2))).err(), Some(VerbsError::new("ibv_create_ah", libc::EINVAL)));
}
