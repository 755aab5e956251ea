//! The `efa` provider's `FI_EP_RDM` domain: the engine's domain
//! (`RdmDomain`) over one `EfaDevice` per endpoint, with addresses in
//! EFA's raw format (`FI_ADDR_EFA`: GID, QP number, queue key; 24 bytes).
//!
//! - Peers on this host go through shared memory, as upstream's efa
//!   provider hands them to its shm provider: each endpoint's device is a
//!   `LocalOr<EfaDevice>` (`local.rs`, the composition rudp runs over
//!   UDP), whose shared-memory inbox is named after the endpoint's GID and
//!   QP number (`efadev::segment_name`). A peer is local when its GID is
//!   one of this host's EFA devices' (read once per domain) and its inbox
//!   is there; the rule and its moments are `local.rs`'s.
//!   `FI_EFA_ENABLE_SHM_TRANSFER=0` (read when the fabric opens) sends
//!   them through the EFA device like the others. Packets to a local peer
//!   that stay unconsumed for [`SHM_PEER_TIMEOUT`] lose it.
//! - Memory registration is the engine domain's (the core's key registry;
//!   RMA and atomics are the engine's, in messages through the device's
//!   bounce buffer). `FI_MR_DMABUF` registrations are, in addition,
//!   registered with the device through `ibv_reg_dmabuf_mr` on the domain's
//!   protection domain, so the device holds the exporter's pages; where
//!   libibverbs lacks the call (`EOPNOTSUPP`) the registration stays a CPU
//!   mapping, said once at `FI_LOG_LEVEL=info`, and any other failure
//!   fails `fi_mr_regattr`.
//!
//! Nothing here has run on EFA hardware; the tests run it on
//! `rfabric-ibverbs`' stand-in.

use crate::efadev::{parse_name, EfaConfig, EfaDevice, NAME_LEN};
use crate::local::LocalOr;
use crate::objects::{RawAddr, RdmDevices, RdmDomain, RdmLimits};
use crate::settings::EfaSettings;
use rfabric_core::abi::*;
use rfabric_core::error::{Error, Result};
use rfabric_core::info::Info;
use rfabric_core::objects::cq::CqAttr;
use rfabric_core::error::ENODATA;
use rfabric_core::provider::{AddressVector, AtomicKind, AvAttr, CompletionQueue, Counter, Domain, Endpoint, Fabric, MrReg, MrReq};
use std::any::Any;
use rfabric_ibverbs::sys::*;
use rfabric_ibverbs::{Context, Mr, Pd, Verbs};
use std::collections::HashMap;
use std::net::{Ipv6Addr, SocketAddr};
use std::os::fd::BorrowedFd;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const NAME: &str = crate::efa::NAME;

/// How long packets to a local peer stay unconsumed before it is given up
/// on (rudp's default peer timeout; EFA's own peers are lost on a send
/// completion in error instead).
pub const SHM_PEER_TIMEOUT: Duration = Duration::from_secs(10);

/// `fi_addr_efa://[GID]:QPN:QKEY`
pub fn addr_text(raw: &[u8]) -> String {
    match parse_name(raw) {
        Some((gid, qpn, qkey)) => format!("fi_addr_efa://[{}]:{}:{}", Ipv6Addr::from(gid), qpn, qkey),
        None => "fi_addr_efa://?".to_string(),
    }
}

/// The AV's address format.
pub fn raw_addr() -> RawAddr {
    RawAddr { format: FI_ADDR_EFA, len: NAME_LEN, valid: |b| parse_name(b).is_some(), text: addr_text }
}

/// An `EfaDevice` per endpoint on one EFA device, and shared memory for
/// local peers when `shm`.
pub struct EfaDevices {
    verbs: Verbs,
    device: String,
    cfg: EfaConfig,
    shm: bool,
    /// The GIDs of this host's EFA devices (with `shm`).
    gids: Vec<[u8; 16]>,
}

impl RdmDevices for EfaDevices {
    type Dev = LocalOr<EfaDevice>;
    fn prov(&self) -> &'static str {
        NAME
    }
    fn limits(&self) -> RdmLimits {
        RdmLimits { medium_max: 65536, unexpected_max: 4096, lead: 0, lead_above: 0, linger: Duration::from_secs(2) }
    }
    fn open(&self, _bind: SocketAddr) -> Result<LocalOr<EfaDevice>> {
        let d = EfaDevice::open(&self.verbs, &self.device, self.cfg)?;
        let d = LocalOr::new(d, self.shm, SHM_PEER_TIMEOUT, || self.gids.clone());
        let shm = if d.has_shm() { "on" } else { "off" };
        rfabric_core::fi_info!(NAME, FI_LOG_EP_CTRL, "endpoint {} on {} (shared memory for local peers {})", addr_text(&crate::device::Device::name(&d)), self.device, shm);
        Ok(d)
    }
    fn raw_addr(&self) -> Option<RawAddr> {
        Some(raw_addr())
    }
}

/// `FI_*` access bits of a registration as `IBV_ACCESS_*`.
fn ibv_access(access: u64) -> u32 {
    let mut a = IBV_ACCESS_LOCAL_WRITE;
    if access & FI_REMOTE_READ != 0 {
        a |= IBV_ACCESS_REMOTE_READ;
    }
    if access & FI_REMOTE_WRITE != 0 {
        a |= IBV_ACCESS_REMOTE_WRITE;
    }
    a
}

/// The domain of one EFA device.
pub struct EfaDomain {
    rdm: RdmDomain<EfaDevices>,
    // Field order is drop order: registrations before the PD, the PD
    // before the context.
    dmabuf: Mutex<HashMap<u64, Mr>>,
    pd: Pd,
    _ctx: Context,
}

/// The GIDs of `devices` (this host's EFA devices); a device that does
/// not answer is left out (logged).
fn host_gids(verbs: &Verbs, devices: &[String]) -> Vec<[u8; 16]> {
    let mut v = Vec::new();
    for d in devices {
        match verbs.open_device(d).and_then(|ctx| crate::efadev::device_gid(&ctx)) {
            Ok(g) => v.push(g),
            Err(e) => rfabric_core::fi_info!(NAME, FI_LOG_DOMAIN, "GID of {}: {}: its endpoints are not taken for local peers", d, e),
        }
    }
    v
}

impl EfaDomain {
    /// The domain of `device`, one of this host's EFA devices `host`.
    pub fn open(verbs: &Verbs, device: &str, host: &[String], info: &Info, settings: EfaSettings) -> Result<EfaDomain> {
        let verr = |e: rfabric_ibverbs::VerbsError| {
            rfabric_core::fi_warn!(NAME, FI_LOG_DOMAIN, "fi_domain on {}: {}", device, e);
            Error(if e.errno > 0 { e.errno } else { libc::EIO })
        };
        let ctx = verbs.open_device(device).map_err(verr)?;
        let pd = ctx.alloc_pd().map_err(verr)?;
        let shm = settings.enable_shm_transfer;
        let gids = if shm { host_gids(verbs, host) } else { Vec::new() };
        let devices = EfaDevices { verbs: verbs.clone(), device: device.to_string(), cfg: EfaConfig::default(), shm, gids };
        Ok(EfaDomain { rdm: RdmDomain::new(info, devices)?, dmabuf: Mutex::new(HashMap::new()), pd, _ctx: ctx })
    }

    fn dmabufs(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Mr>> {
        self.dmabuf.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Domain for EfaDomain {
    fn endpoint(&self, info: &Info) -> Result<Box<dyn Endpoint>> {
        self.rdm.endpoint(info)
    }
    fn cq_open(&self, attr: &CqAttr) -> Result<Arc<dyn CompletionQueue>> {
        self.rdm.cq_open(attr)
    }
    fn av_open(&self, attr: &AvAttr) -> Result<Arc<dyn AddressVector>> {
        self.rdm.av_open(attr)
    }
    fn cntr_open(&self, events: u32, wait_obj: u32) -> Result<Arc<dyn Counter>> {
        self.rdm.cntr_open(events, wait_obj)
    }
    fn mr_reg(&self, req: &MrReq) -> Result<MrReg> {
        let reg = self.rdm.mr_reg(req)?;
        let Some(b) = req.dmabuf else { return Ok(reg) };
        // SAFETY: the fd is the application's, open for this call
        // (fi_mr_regattr's contract; the engine domain just mapped it); it
        // is only passed on, and the kernel takes its own reference.
        let fd = unsafe { BorrowedFd::borrow_raw(b.fd) };
        match self.pd.reg_dmabuf_mr(b.offset, b.len, b.base_addr as u64, fd, ibv_access(req.access)) {
            Ok(mr) => {
                self.dmabufs().insert(reg.key, mr);
                Ok(reg)
            }
            Err(e) if e.errno == libc::EOPNOTSUPP => {
                static ONCE: std::sync::Once = std::sync::Once::new();
                ONCE.call_once(|| rfabric_core::fi_info!(NAME, FI_LOG_MR, "{}: dma-buf registrations are CPU mappings only", e));
                Ok(reg)
            }
            Err(e) => {
                rfabric_core::fi_warn!(NAME, FI_LOG_MR, "fi_mr_regattr(FI_MR_DMABUF): {}", e);
                let _ = self.rdm.mr_close(reg.key);
                Err(Error(if e.errno > 0 { e.errno } else { libc::EIO }))
            }
        }
    }
    fn mr_close(&self, key: u64) -> Result<()> {
        self.rdm.mr_close(key)?;
        drop(self.dmabufs().remove(&key));
        Ok(())
    }
    fn query_atomic(&self, kind: AtomicKind, op: u32, datatype: u32) -> Result<(usize, usize)> {
        self.rdm.query_atomic(kind, op, datatype)
    }
}

/// The `efa` fabric: the EFA devices found, and the settings read when it
/// opened.
pub struct EfaFabric {
    pub verbs: Verbs,
    pub devices: Vec<String>,
    pub settings: EfaSettings,
}

impl Fabric for EfaFabric {
    fn as_any(&self) -> &dyn Any {
        self
    }
    unsafe fn domain(&self, info: &Info) -> Result<Box<dyn Domain>> {
        let name = info.domain_attr.as_ref().and_then(|d| d.name.as_deref());
        let dev = match name {
            None => self.devices.first(),
            Some(n) => self.devices.iter().find(|d| n.strip_suffix(crate::efa::DOMAIN_SUFFIX) == Some(d.as_str())),
        };
        let Some(dev) = dev else {
            rfabric_core::fi_warn!(NAME, FI_LOG_DOMAIN, "fi_domain: no EFA domain named {:?}", name);
            return Err(ENODATA);
        };
        Ok(Box::new(EfaDomain::open(&self.verbs, dev, &self.devices, info, self.settings)?))
    }
}


#[cfg(test)]
mod tests {
    use super::*;
    use crate::efa::EfaProvider;
    use rfabric_core::error::EAGAIN;
    use rfabric_core::info::FabricAttr;
    use rfabric_core::objects::local_mr::Dmabuf;
    use rfabric_core::provider::{Bind, Descs, Iov, Provider, RmaIov, RmaOp, RxOp, TxOp};
    use rfabric_ibverbs::standin::{self, Call, PortCfg};
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::os::unix::fs::MetadataExt;

    /// The stand-in with one EFA device, `efa0`, and its loopback.
    fn efa_verbs() -> Verbs {
        host(&[[0xfe; 16]])
    }

    /// The stand-in with EFA devices `efa0`, `efa1`... of these GIDs, and
    /// its loopback: one host.
    fn host(gids: &[[u8; 16]]) -> Verbs {
        standin::with(|w| {
            w.loopback = Some(Default::default());
            w.efa_device = true;
        });
        for (i, g) in gids.iter().enumerate() {
            let dev = format!("efa{i}");
            standin::add_device(&dev, IBV_NODE_UNSPECIFIED, IBV_TRANSPORT_UNSPECIFIED, "");
            standin::set_port(&dev, 1, PortCfg { state: IBV_PORT_ACTIVE, gids: vec![*g], ..Default::default() });
        }
        Verbs::from_fns(standin::verbs_fns(), Some(standin::efa_fns()))
    }

    /// A GID of device `dev` for test `test`, of this process only: the
    /// stand-in numbers QPs from the same start in every test (and every
    /// process), and shared-memory segments are named after GID and QPN
    /// in the one `/dev/shm`.
    fn gid(test: u8, dev: u8) -> [u8; 16] {
        let mut g = [0u8; 16];
        g[0] = 0xfe;
        g[1] = 0x80;
        g[8..12].copy_from_slice(&std::process::id().to_be_bytes());
        g[12] = test;
        g[13] = dev;
        g
    }

    fn names_of(verbs: &Verbs) -> Vec<String> {
        verbs.devices().unwrap().into_iter().map(|d| d.name).collect()
    }

    #[test]
    fn an_efa_device_is_one_rdm_domain_with_efa_addresses() {
        let p = EfaProvider::with_verbs(efa_verbs());
        let offers = p.offers();
        assert_eq!(offers.len(), 2, "manual and automatic progress");
        for o in &offers {
            assert_eq!(o.ep_type(), FI_EP_RDM);
            assert_eq!(o.addr_format, FI_ADDR_EFA);
            assert_eq!(o.domain_attr.as_ref().and_then(|d| d.name.as_deref()), Some("efa0-rdm"));
            assert_eq!(o.fabric_attr.as_ref().and_then(|f| f.prov_name.as_deref()), Some("efa"));
            assert_eq!(o.ep_attr.as_ref().map(|e| e.protocol), Some(FI_PROTO_EFA));
            assert_ne!(o.caps & FI_TAGGED, 0);
        }
        // No EFA device: nothing, and no fabric.
        let plain = EfaProvider::with_verbs(Verbs::from_fns(standin::verbs_fns(), None));
        assert!(plain.offers().is_empty());
        assert!(plain.fabric(&FabricAttr::default()).is_err());
    }

    struct Side {
        ep: Box<dyn Endpoint>,
        cq: Arc<dyn CompletionQueue>,
        peer: u64,
    }

    struct Pair {
        _lend: standin::LendGuard,
        d: Box<dyn Domain>,
        av: Arc<dyn AddressVector>,
        a: Side,
        b: Side,
    }

    /// Two endpoints of the first device's domain, with `settings`.
    fn pair(gids: &[[u8; 16]], settings: EfaSettings) -> Pair {
        let lend = standin::share_with_threads("efa-");
        let verbs = host(gids);
        let p = EfaProvider::with_verbs(verbs.clone());
        let offer = p.offers().into_iter().next().unwrap();
        let fabric = EfaFabric { devices: names_of(&verbs), verbs, settings };
        // SAFETY: the offer's own info.
        let d = unsafe { fabric.domain(&offer) }.unwrap();
        let av = d.av_open(&AvAttr { kind: FI_AV_TABLE, count: 4, flags: 0 }).unwrap();
        let mut sides = Vec::new();
        for _ in 0..2 {
            let ep = d.endpoint(&offer).unwrap();
            let cq = d.cq_open(&CqAttr { size: 64, format: FI_CQ_FORMAT_TAGGED, wait_obj: FI_WAIT_NONE }).unwrap();
            ep.bind(Bind::Av(&av), 0).unwrap();
            ep.bind(Bind::Cq(&cq), FI_TRANSMIT | FI_RECV).unwrap();
            ep.enable().unwrap();
            let mut n = [0u8; 64];
            let l = ep.getname(&mut n).unwrap();
            assert_eq!(l, NAME_LEN);
            sides.push((ep, cq, n[..l].to_vec()));
        }
        let names: Vec<&[u8]> = sides.iter().map(|s| &s.2[..]).collect();
        let mut out = [0u64; 2];
        av.insert(&names, Some(&mut out), 0).unwrap();
        let (b, a) = (sides.pop().unwrap(), sides.pop().unwrap());
        Pair { _lend: lend, d, av, a: Side { ep: a.0, cq: a.1, peer: out[1] }, b: Side { ep: b.0, cq: b.1, peer: out[0] } }
    }

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
                    let _ = other.read(&mut [0u8; 48], 0, None);
                }
                Err(e) if e.0 == FI_EAVAIL => return Err(Error(cq.readerr(None, fi_version(1, 18)).unwrap().0.err)),
                Err(e) => return Err(e),
                Ok(_) => unreachable!(),
            }
        }
        Err(EAGAIN)
    }

    fn pattern(n: usize, seed: u8) -> Vec<u8> {
        (0..n).map(|i| (i as u8).wrapping_mul(13).wrapping_add(seed)).collect()
    }

    #[test]
    fn two_endpoints_exchange_messages_over_srd() {
        // Shared memory off: the local peer goes through the EFA device.
        let p = pair(&[[0xfe; 16]], EfaSettings { enable_shm_transfer: false });
        assert!(p.av.straddr(&{
            let mut n = [0u8; 64];
            let l = p.a.ep.getname(&mut n).unwrap();
            n[..l].to_vec()
        })
        .starts_with("fi_addr_efa://[fefe:"));
        assert!(p.av.insert(&[&[0u8; 16][..]], None, 0).is_err(), "a sockaddr-sized address is not an EFA address");
        messages_and_a_write(&p);
        let sent = standin::with(|w| w.sent.len());
        assert!(sent >= 12, "every message went through the device ({sent} sends)");
    }

    #[test]
    fn two_endpoints_of_one_device_exchange_messages_through_shared_memory() {
        let g = gid(1, 0);
        let p = pair(&[g], EfaSettings::default());
        standin::take_calls();
        messages_and_a_write(&p);
        assert_eq!(standin::with(|w| w.sent.len()), 0, "nothing went through the EFA device");
        let calls = standin::take_calls();
        assert!(!calls.iter().any(|c| matches!(c, Call::CreateAh { .. } | Call::PostSend { .. })), "{calls:?}");
    }

    /// Messages of 64 bytes to 150 KB, untagged and tagged, from `a` to
    /// `b`, and an RMA write from `b` into `a`'s registration.
    fn messages_and_a_write(p: &Pair) {
        for (i, n) in [64usize, 20_000, 150_000].into_iter().enumerate() {
            for tagged in [false, true] {
                let data = pattern(n, i as u8 + u8::from(tagged));
                let mut got = vec![0u8; n];
                let tag = if tagged { 0x55 + i as u64 } else { 0 };
                let riov = [Iov { base: got.as_mut_ptr() as usize, len: n }];
                let rx = RxOp { iov: &riov, desc: Descs::NONE, src: FI_ADDR_UNSPEC, context: 10, tag, ignore: 0, flags: 0, tagged };
                // SAFETY: `got` outlives the completion.
                unsafe { p.b.ep.recv(&rx) }.unwrap();
                let tiov = [Iov { base: data.as_ptr() as usize, len: n }];
                let tx = TxOp { iov: &tiov, desc: Descs::NONE, dest: p.a.peer, context: 20, tag, data: 0, flags: 0, tagged, no_completion: false };
                // SAFETY: `data` outlives the completion.
                unsafe { p.a.ep.send(&tx) }.unwrap();
                let c = next(&p.b.cq, &p.a.cq).unwrap();
                assert_eq!((c[0], c[2] as usize), (10, n), "{n} bytes, tagged {tagged}");
                assert_eq!(next(&p.a.cq, &p.b.cq).unwrap()[0], 20);
                assert!(got == data, "{n} bytes arrived whole (tagged {tagged})");
            }
        }
        // An RMA write (the engine's, in messages) back from b into a's registration.
        let mut target = vec![0u8; 4096];
        let reg = p.d.mr_reg(&MrReq { addr: target.as_mut_ptr() as usize, len: 4096, access: FI_REMOTE_WRITE, requested_key: 3, ..MrReq::default() }).unwrap();
        let data = pattern(3000, 7);
        let iov = [Iov { base: data.as_ptr() as usize, len: data.len() }];
        let rma = [RmaIov { addr: 100, len: data.len(), key: reg.key }];
        // SAFETY: `data` outlives the completion.
        unsafe { p.b.ep.rma_write(&RmaOp { iov: &iov, desc: rfabric_core::provider::Descs::NONE, rma: &rma, dest: p.b.peer, context: 30, data: 0, flags: 0, no_completion: false }) }.unwrap();
        assert_eq!(next(&p.b.cq, &p.a.cq).unwrap()[0], 30);
        assert!(target[100..3100] == data[..]);
        p.d.mr_close(reg.key).unwrap();
    }

    // ---------- the device of local peers ----------

    use crate::device::{Device, PeerId, RxBatch};
    use std::time::Instant;

    fn cfg() -> EfaConfig {
        EfaConfig { max_packet: 1024, tx_slots: 8, rx_slots: 8 }
    }

    /// An endpoint's device on `dev` of `verbs`: shared memory with `shm`,
    /// taking peers of `here` for local ones.
    fn local_or(verbs: &Verbs, dev: &str, shm: bool, here: &[[u8; 16]]) -> LocalOr<EfaDevice> {
        LocalOr::new(EfaDevice::open(verbs, dev, cfg()).unwrap(), shm, SHM_PEER_TIMEOUT, || here.to_vec())
    }

    /// Runs both devices until `b` has a packet; its peer and bytes.
    #[track_caller]
    fn exchange(a: &mut LocalOr<EfaDevice>, b: &mut LocalOr<EfaDevice>) -> (PeerId, Vec<u8>) {
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut batch = RxBatch::default();
        loop {
            assert!(Instant::now() < deadline, "no packet arrived: {}\n{}", a.describe(), b.describe());
            let now = Instant::now();
            a.recv(&mut batch, now);
            a.flush(now, true);
            b.recv(&mut batch, now);
            let got = batch.items.first().map(|it| (it.peer, batch.packet(it).to_vec()));
            b.flush(now, true);
            if let Some(got) = got {
                return got;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// `a` sends `out` to `b` (whose name it resolves), `b` answers `back`:
    /// the first arrives whole, the answer from the right peer.
    #[track_caller]
    fn there_and_back(a: &mut LocalOr<EfaDevice>, b: &mut LocalOr<EfaDevice>, out: &[u8], back: &[u8]) {
        let pb = a.peer(&b.name()).unwrap();
        a.send(pb, out, &[], 0).unwrap();
        let (pa, data) = exchange(a, b);
        assert_eq!(data, out);
        b.send(pa, back, &[], 0).unwrap();
        assert_eq!(exchange(b, a).0, pb);
    }

    /// (packets through shared memory, through the EFA device) sent by `d`.
    fn sent(d: &LocalOr<EfaDevice>) -> (u64, u64) {
        (d.shm_stats().sent, d.stats().sent)
    }

    #[test]
    fn peers_of_this_hosts_efa_devices_go_through_shared_memory() {
        let (g0, g1) = (gid(2, 0), gid(2, 1));
        let v = host(&[g0, g1]);
        let mut a = local_or(&v, "efa0", true, &[g0, g1]);
        let mut b = local_or(&v, "efa0", true, &[g0, g1]);
        let mut c = local_or(&v, "efa1", true, &[g0, g1]);
        assert!(a.has_shm() && b.has_shm() && c.has_shm());
        let name = a.name();
        let seg = crate::efadev::segment_name(&name).unwrap();
        assert!(seg.starts_with("efe80") && seg.len() <= 40, "{seg}");

        // The same device, and another device of the host.
        let pb = a.peer(&b.name()).unwrap();
        let pc = a.peer(&c.name()).unwrap();
        a.send(pb, b"to b", &[], 1).unwrap();
        let (pa, data) = exchange(&mut a, &mut b);
        assert_eq!((data.as_slice(), b.peer_addr(pa)), (&b"to b"[..], &name[..]));
        a.send(pc, b"to c", &[b"!"], 2).unwrap();
        let (pa_c, data) = exchange(&mut a, &mut c);
        assert_eq!(data, b"to c!");
        b.send(pa, b"back", &[], 0).unwrap();
        let (p, data) = exchange(&mut b, &mut a);
        assert_eq!((p, data.as_slice()), (pb, &b"back"[..]));
        c.send(pa_c, b"back from c", &[], 0).unwrap();
        assert_eq!(exchange(&mut c, &mut a).0, pc);

        // All of it through shared memory, none through the device.
        assert_eq!((sent(&a), sent(&b), sent(&c)), ((2, 0), (1, 0), (1, 0)));
        assert_eq!((a.shm_stats().received, a.shm_peers()), (2, 2));
        assert_eq!(standin::with(|w| w.sent.len()), 0);
        // Consumed: nothing waits for an acknowledgement.
        a.recv(&mut RxBatch::default(), Instant::now());
        assert!(!a.unacked());
    }

    #[test]
    fn other_hosts_peers_and_shared_memory_off_go_through_the_efa_device() {
        let (g0, g1) = (gid(3, 0), gid(3, 1));
        let v = host(&[g0, g1]);
        // `efa1` stands for a device of another host: not in `here`.
        let mut a = local_or(&v, "efa0", true, &[g0]);
        let mut c = local_or(&v, "efa1", true, &[g1]);
        there_and_back(&mut a, &mut c, b"far", b"far back");
        assert_eq!((sent(&a), sent(&c)), ((0, 1), (0, 1)));

        // Shared memory off at `d` (same device as `a`): no inbox, so `a`
        // reaches it through the device too, and it `a`.
        let mut d = local_or(&v, "efa0", false, &[g0]);
        assert!(!d.has_shm());
        there_and_back(&mut a, &mut d, b"near", b"near back");
        assert_eq!((sent(&a), sent(&d)), ((0, 2), (0, 1)));
        assert_eq!((a.shm_peers(), a.shm_stats().received), (0, 0));
        assert_eq!(standin::with(|w| w.sent.len()), 4);
    }

    #[test]
    fn segment_names_of_efa_addresses() {
        let mut raw = [0u8; NAME_LEN];
        raw[..16].copy_from_slice(&[0xab; 16]);
        raw[16..20].copy_from_slice(&0xff_ffffu32.to_le_bytes());
        let n = crate::efadev::segment_name(&raw).unwrap();
        assert_eq!(n, format!("e{}.ffffff", "ab".repeat(16)));
        assert_eq!(n.len(), 40);
        // A QP number beyond 24 bits has no name; nor has a short address.
        raw[16..20].copy_from_slice(&0x100_0000u32.to_le_bytes());
        assert_eq!(crate::efadev::segment_name(&raw), None);
        assert_eq!(crate::efadev::segment_name(&raw[..20]), None);
    }

    fn memfd(len: i64) -> OwnedFd {
        // SAFETY: a name literal; the result is checked.
        let fd = unsafe { libc::memfd_create(c"rfabric-efa-dmabuf".as_ptr(), libc::MFD_CLOEXEC) };
        assert!(fd >= 0, "memfd_create: {}", std::io::Error::last_os_error());
        // SAFETY: a fresh fd we own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: our fd.
        assert_eq!(unsafe { libc::ftruncate(fd.as_raw_fd(), len) }, 0);
        fd
    }

    #[test]
    fn a_dmabuf_registration_reaches_ibv_reg_dmabuf_mr() {
        let p = EfaProvider::with_verbs(efa_verbs());
        let offer = p.offers().into_iter().next().unwrap();
        let fabric = p.fabric(offer.fabric_attr.as_ref().unwrap()).unwrap();
        // SAFETY: the offer's own info.
        let d = unsafe { fabric.domain(&offer) }.unwrap();
        let fd = memfd(1 << 20);
        let ino = std::fs::metadata(format!("/proc/self/fd/{}", fd.as_raw_fd())).unwrap().ino();
        standin::take_calls();
        let b = Dmabuf { fd: fd.as_raw_fd(), offset: 8192, len: 65536, base_addr: 0x7f00_0000_0000 };
        let r = d.mr_reg(&MrReq { access: FI_REMOTE_READ, dmabuf: Some(b), requested_key: 9, ..MrReq::default() }).unwrap();
        let calls: Vec<Call> = standin::take_calls().into_iter().filter(|c| matches!(c, Call::RegDmabufMr { .. } | Call::RegMr { .. } | Call::DeregMr(_))).collect();
        assert!(
            matches!(&calls[..], [Call::RegDmabufMr { offset: 8192, length: 65536, iova: 0x7f00_0000_0000, fd: f, ino: i, access, .. }]
                if *f == fd.as_raw_fd() && *i == ino && *access == (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ) as i32),
            "{calls:?}"
        );
        d.mr_close(r.key).unwrap();
        assert!(standin::take_calls().iter().any(|c| matches!(c, Call::DeregMr(_))), "closed with the registration");
        // Where the call fails, so does the registration.
        standin::fail("ibv_reg_dmabuf_mr", libc::EINVAL);
        assert!(d.mr_reg(&MrReq { dmabuf: Some(b), requested_key: 10, ..MrReq::default() }).is_err());
        // A plain registration never reaches the device.
        let mut buf = vec![0u8; 4096];
        standin::take_calls();
        d.mr_reg(&MrReq { addr: buf.as_mut_ptr() as usize, len: 4096, access: FI_RECV, requested_key: 11, ..MrReq::default() }).unwrap();
        assert!(!standin::take_calls().iter().any(|c| matches!(c, Call::RegMr { .. } | Call::RegMrIova2 { .. })));
    }
}
