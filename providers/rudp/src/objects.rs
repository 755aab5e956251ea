//! The objects behind the C handles of the RDM providers built on the
//! protocol engine: fabric, domain, address vector and endpoint.
//! Completion queues and counters are the core's (`ProgressCq`,
//! `ProgressCntr`): reading them drives the endpoints bound to them. An
//! endpoint is a protocol engine over a device behind one lock, with an
//! optional progress thread (`FI_PROGRESS_AUTO`). The domain and endpoint
//! are generic over the device (`RdmDevices` says how a provider opens
//! one): rudp opens a `LocalOrUdp` (UDP, and shared memory for local
//! peers, `local.rs`), the efa entry a `LocalOr<EfaDevice>` (the same with
//! the EFA device, `efadom.rs`), the tcp provider a `ConnDevice` over TCP.

use crate::device::Device;
use crate::engine::{AddrMap, Engine, EngineConfig, Outputs};
use crate::settings::Settings;
use crate::local::LocalOrUdp;
use crate::udp::UdpConfig;
use rfabric_core::abi::*;
use rfabric_core::error::{Error, Result, EINVAL};
use rfabric_core::info::Info;
use rfabric_core::objects::av::Av;
use rfabric_core::objects::cq::CqAttr;
use rfabric_core::objects::local_mr::{Checked, DmabufMap, LocalRegs};
use rfabric_core::objects::mr::{MrRegion, MrRegistry};
use rfabric_core::objects::progress::{Progress, ProgressCntr, ProgressCq};
use rfabric_core::objects::wait::Locked;
use rfabric_core::provider::{
    AddressVector, AtomicKind, AtomicOp, AvAttr, Bind, CompletionQueue, Counter, Domain, Endpoint, Fabric, MrReg, MrReq, RmaOp, RxOp, TxOp,
};
use std::any::Any;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::{Duration, Instant};

/// An endpoint address for log lines: `1.2.3.4:5`, `[::1]:5`; other
/// formats in hex.
fn addr_text(raw: &[u8]) -> String {
    crate::sockaddr::from_bytes(raw).map_or_else(|| hex(raw), |a| a.to_string())
}

/// Bytes as lowercase hex.
pub fn hex(raw: &[u8]) -> String {
    raw.iter().map(|b| format!("{b:02x}")).collect()
}

fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

pub struct RudpFabric;

impl Fabric for RudpFabric {
    fn as_any(&self) -> &dyn Any {
        self
    }
    unsafe fn domain(&self, info: &Info) -> Result<Box<dyn Domain>> {
        Ok(Box::new(RdmDomain::new(info, UdpDevices { settings: Settings::read() })?))
    }
}

/// Engine settings of an RDM provider.
#[derive(Clone, Copy, Debug)]
pub struct RdmLimits {
    /// Largest message sent without a clear-to-send.
    pub medium_max: usize,
    /// Unexpected messages an endpoint holds.
    pub unexpected_max: usize,
    /// `EngineConfig::lead` and `lead_above` (0: medium messages are not
    /// split).
    pub lead: usize,
    pub lead_above: usize,
    /// How long `fi_close` of an endpoint waits for its last packets.
    pub linger: Duration,
}

/// An endpoint address format other than `sockaddr_in` / `sockaddr_in6`
/// (`RdmDevices::raw_addr`): the AV holds such addresses as they are.
#[derive(Clone, Copy, Debug)]
pub struct RawAddr {
    /// `FI_ADDR_*`
    pub format: u32,
    /// Bytes of one address.
    pub len: usize,
    /// Whether bytes are a well-formed address.
    pub valid: fn(&[u8]) -> bool,
    /// The address as `fi_av_straddr` writes it.
    pub text: fn(&[u8]) -> String,
}

/// What an RDM provider on the engine contributes: its name and how an
/// endpoint's device opens.
pub trait RdmDevices: Send + Sync + 'static {
    type Dev: Device + 'static;
    /// The provider's name (logs, thread names).
    fn prov(&self) -> &'static str;
    fn limits(&self) -> RdmLimits;
    /// The device of an `FI_EP_RDM` endpoint bound to `bind` (for devices
    /// with their own address format, `raw_addr`, the unspecified IPv4
    /// address: they pick their own).
    fn open(&self, bind: SocketAddr) -> Result<Self::Dev>;
    /// The address format of the devices when it is not an IP socket
    /// address (the default).
    fn raw_addr(&self) -> Option<RawAddr> {
        None
    }
    /// Endpoints of another type (`FI_EP_RDM` and `FI_EP_UNSPEC` are the
    /// engine's): `EINVAL` unless the provider has them.
    fn other_endpoint(&self, _info: &Info, _bind: SocketAddr, _local: &Arc<LocalRegs>) -> Result<Box<dyn Endpoint>> {
        Err(EINVAL)
    }
}

/// rudp: a UDP device per endpoint, and `FI_EP_DGRAM` endpoints.
pub struct UdpDevices {
    pub settings: Settings,
}

impl RdmDevices for UdpDevices {
    type Dev = LocalOrUdp;
    fn prov(&self) -> &'static str {
        crate::provider::NAME
    }
    fn limits(&self) -> RdmLimits {
        let s = &self.settings;
        RdmLimits { medium_max: s.medium_max, unexpected_max: s.unexpected_max, lead: 0, lead_above: 0, linger: Duration::from_millis(s.linger_ms) }
    }
    fn open(&self, bind: SocketAddr) -> Result<LocalOrUdp> {
        let s = &self.settings;
        let ifmtu = crate::provider::mtu_for(&bind.ip());
        let cfg = UdpConfig {
            max_datagram: s.max_datagram(ifmtu, bind.is_ipv6()),
            peer_timeout: Duration::from_millis(s.peer_timeout_ms),
            max_inflight_bytes: s.inflight_bytes,
            max_peers: 1 << 16,
            sockbuf: s.sockbuf,
            gso: s.gso,
            gro: s.gro,
        };
        let mut dev = LocalOrUdp::open(bind, cfg, s.enable_shm)?;
        dev.set_shm_reads(s.shm_read);
        rfabric_core::fi_info!(crate::provider::NAME, FI_LOG_EP_CTRL, "endpoint bound to {} (datagrams up to {} bytes, UDP GSO {}, GRO {})", dev.local_addr(), dev.max_packet() + crate::wire::DEV_HDR, if dev.gso() { "on" } else { "off" }, if dev.gro() { "on" } else { "off" });
        Ok(dev)
    }
    fn other_endpoint(&self, info: &Info, bind: SocketAddr, local: &Arc<LocalRegs>) -> Result<Box<dyn Endpoint>> {
        if info.ep_type() != FI_EP_DGRAM {
            return Err(EINVAL);
        }
        let max = self.settings.max_datagram(crate::provider::mtu_for(&bind.ip()), bind.is_ipv6());
        let rx = info.rx_attr.as_ref().map_or(1024, |r| r.size.max(1));
        Ok(Box::new(Checked::new(crate::dgram::DgramEp::open(bind, max, rx)?, local.clone())))
    }
}

/// The domain of an RDM provider on the engine.
pub struct RdmDomain<M: RdmDevices> {
    devices: Arc<M>,
    mr: Arc<Locked<MrRegistry>>,
    local: Arc<LocalRegs>,
    auto_progress: bool,
    /// The interface address endpoints bind to when their info names none.
    bind: Option<SocketAddr>,
    addr_format: u32,
    raw: Option<RawAddr>,
}

/// rudp's domain.
pub type RudpDomain = RdmDomain<UdpDevices>;

impl<M: RdmDevices> RdmDomain<M> {
    pub fn new(info: &Info, devices: M) -> Result<RdmDomain<M>> {
        let d = info.domain_attr.as_ref();
        let mode = rfabric_core::getinfo::mr_mode_bits(d.map_or(0, |d| d.mr_mode), fi_version(1, 5));
        let key_size = d.map_or(8, |d| if d.mr_key_size == 0 { 8 } else { d.mr_key_size });
        let bind = info.src_addr.as_deref().and_then(crate::sockaddr::from_bytes_any);
        let raw = devices.raw_addr();
        Ok(RdmDomain {
            devices: Arc::new(devices),
            mr: Arc::new(Locked::new(MrRegistry::new(mode, key_size)?)),
            local: LocalRegs::new(mode),
            auto_progress: d.is_some_and(|d| d.data_progress == FI_PROGRESS_AUTO),
            bind,
            addr_format: match raw {
                Some(r) => r.format,
                None if info.addr_format == FI_SOCKADDR_IN6 => FI_SOCKADDR_IN6,
                None => FI_SOCKADDR_IN,
            },
            raw,
        })
    }
}

impl<M: RdmDevices> Domain for RdmDomain<M> {
    fn endpoint(&self, info: &Info) -> Result<Box<dyn Endpoint>> {
        let ep_type = info.ep_type();
        let bind = match self.raw {
            // Devices with their own addresses pick them.
            Some(_) => SocketAddr::from(([0, 0, 0, 0], 0)),
            None => info.src_addr.as_deref().and_then(crate::sockaddr::from_bytes_any).or(self.bind).ok_or(EINVAL)?,
        };
        if ep_type != FI_EP_RDM && ep_type != FI_EP_UNSPEC {
            return self.devices.other_endpoint(info, bind, &self.local);
        }
        let ep = RdmEp::open(info, bind, &*self.devices, self.mr.clone(), self.auto_progress)?;
        Ok(Box::new(Checked::new(ep, self.local.clone())))
    }
    fn cq_open(&self, attr: &CqAttr) -> Result<Arc<dyn CompletionQueue>> {
        Ok(Arc::new(ProgressCq::new(attr)?))
    }
    fn av_open(&self, attr: &AvAttr) -> Result<Arc<dyn AddressVector>> {
        if attr.flags & !(FI_EVENT | FI_READ | FI_SYMMETRIC) != 0 || attr.flags & FI_EVENT != 0 {
            return Err(Error(FI_EBADFLAGS));
        }
        Ok(Arc::new(RudpAv::new(attr, self.addr_format, self.raw)?))
    }
    fn cntr_open(&self, events: u32, wait_obj: u32) -> Result<Arc<dyn Counter>> {
        Ok(Arc::new(ProgressCntr::new(events, wait_obj)?))
    }
    fn mr_reg(&self, req: &MrReq) -> Result<MrReg> {
        // A dma-buf is mapped for CPU access: the UDP device copies through
        // the CPU. The mapping is what gets registered.
        let map = req.dmabuf.as_ref().map(|b| DmabufMap::new(b, self.devices.prov())).transpose()?;
        let (base, len) = map.as_ref().map_or((req.addr, req.len), |m| (m.data(), m.len()));
        let r = MrRegion { base, len, access: req.access, dmabuf: req.dmabuf.map(|b| (b.fd, b.offset)), ..MrRegion::default() };
        let key = self.mr.lock().register(r, req.requested_key)?;
        Ok(MrReg { key, local: Some(self.local.register(map)) })
    }
    fn mr_close(&self, key: u64) -> Result<()> {
        self.mr.lock().remove(key).map(|_| ())
    }
    fn query_atomic(&self, kind: AtomicKind, op: u32, datatype: u32) -> Result<(usize, usize)> {
        let max = crate::engine::ATOMIC_MAX_BYTES;
        let count = rfabric_core::objects::atomic::valid(kind, op, datatype, max).ok_or(Error(FI_EOPNOTSUPP))?;
        Ok((count, rfabric_core::objects::atomic::type_size(datatype).unwrap_or(0)))
    }
}

/// The address vector: the core's `Av` of `sockaddr_in` / `sockaddr_in6`
/// entries, or of the devices' raw addresses (`RawAddr`).
pub struct RudpAv {
    av: RwLock<Av>,
    gen: AtomicU64,
    addrlen: usize,
    text: fn(&[u8]) -> String,
}

impl RudpAv {
    fn new(attr: &AvAttr, format: u32, raw: Option<RawAddr>) -> Result<RudpAv> {
        if let Some(r) = raw {
            let mut av = Av::new(attr.kind, attr.count, r.len)?;
            let valid = r.valid;
            av.set_validator(Box::new(move |b| if valid(b) { Ok(()) } else { Err(EINVAL) }));
            av.set_formatter(Box::new(r.text));
            return Ok(RudpAv { av: RwLock::new(av), gen: AtomicU64::new(1), addrlen: r.len, text: r.text });
        }
        let addrlen = if format == FI_SOCKADDR_IN6 { crate::sockaddr::SIN6_LEN } else { crate::sockaddr::SIN_LEN };
        let mut av = Av::new(attr.kind, attr.count, addrlen)?;
        av.set_validator(Box::new(|b| crate::sockaddr::from_bytes(b).map(|_| ()).ok_or(EINVAL)));
        av.set_formatter(Box::new(crate::sockaddr::to_string));
        Ok(RudpAv { av: RwLock::new(av), gen: AtomicU64::new(1), addrlen, text: crate::sockaddr::to_string })
    }
    fn addr(&self, fi_addr: u64) -> Option<Vec<u8>> {
        self.av.read().unwrap_or_else(|e| e.into_inner()).addr(fi_addr).map(|b| b.to_vec())
    }
    /// The socket address of `fi_addr`.
    pub(crate) fn sockaddr(&self, fi_addr: u64) -> Option<SocketAddr> {
        crate::sockaddr::from_bytes(&self.addr(fi_addr)?)
    }
    /// What a completion reports as the source of a datagram from `from`.
    pub(crate) fn source_of(&self, from: &SocketAddr) -> u64 {
        let (b, n) = crate::sockaddr::to_array(from);
        self.fi_addr_of(&b[..n])
    }
}

impl AddrMap for RudpAv {
    fn fi_addr_of(&self, raw: &[u8]) -> u64 {
        let g = self.av.read().unwrap_or_else(|e| e.into_inner());
        // The key on the stack (addresses are short), padded to the AV's
        // length: no allocation per lookup.
        let mut key = [0u8; 64];
        if self.addrlen <= key.len() {
            let n = raw.len().min(self.addrlen);
            key[..n].copy_from_slice(&raw[..n]);
            return g.source_id(&key[..self.addrlen]);
        }
        let mut key = raw.to_vec();
        key.resize(self.addrlen, 0);
        g.source_id(&key)
    }
    fn generation(&self) -> u64 {
        self.gen.load(Ordering::Acquire)
    }
}

impl AddressVector for RudpAv {
    fn addr_len(&self) -> Option<usize> {
        Some(self.addrlen)
    }
    fn insert(&self, addrs: &[&[u8]], fi_addr: Option<&mut [u64]>, flags: u64) -> Result<usize> {
        let mut flat = Vec::with_capacity(addrs.len() * self.addrlen);
        for a in addrs {
            if a.len() != self.addrlen {
                return Err(EINVAL);
            }
            flat.extend_from_slice(a);
        }
        let n = self.av.write().unwrap_or_else(|e| e.into_inner()).insert(&flat, addrs.len(), fi_addr, flags, None)?;
        self.gen.fetch_add(1, Ordering::AcqRel);
        Ok(n)
    }
    fn remove(&self, fi_addrs: &[u64], flags: u64) -> Result<()> {
        self.av.write().unwrap_or_else(|e| e.into_inner()).remove(fi_addrs, flags)?;
        self.gen.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }
    fn lookup(&self, fi_addr: u64, buf: &mut [u8]) -> Result<usize> {
        self.av.read().unwrap_or_else(|e| e.into_inner()).lookup(fi_addr, buf)
    }
    fn straddr(&self, addr: &[u8]) -> String {
        (self.text)(addr)
    }
    fn as_any_arc(self: Arc<Self>) -> Arc<dyn Any + Send + Sync> {
        self
    }
}

/// What the progress of an endpoint needs, shared with the CQs and counters
/// it is bound to and with its progress thread.
pub struct EpShared<D: Device> {
    pub(crate) st: Mutex<EpState<D>>,
    stop: AtomicBool,
    prov: &'static str,
}

pub(crate) struct EpState<D: Device> {
    pub(crate) engine: Engine<D>,
    av: Option<Arc<RudpAv>>,
    /// fi_addr -> device peer, valid for one AV generation.
    peers: Vec<u32>,
    peers_gen: u64,
    enabled: bool,
    /// When progress last ran.
    last_progress: Instant,
}

const NO_PEER: u32 = u32::MAX;

impl<D: Device> EpState<D> {
    /// The device peer of `fi_addr`.
    fn peer(&mut self, fi_addr: u64) -> Result<u32> {
        let av = self.av.as_ref().ok_or(Error(FI_ENOAV))?;
        let g = av.gen.load(Ordering::Acquire);
        if g != self.peers_gen {
            self.peers.clear();
            self.peers_gen = g;
        }
        let i = usize::try_from(fi_addr).map_err(|_| EINVAL)?;
        if let Some(&p) = self.peers.get(i) {
            if p != NO_PEER {
                return Ok(p);
            }
        }
        let raw = av.addr(fi_addr).ok_or(EINVAL)?;
        let p = self.engine.dev.peer(&raw)?;
        if self.peers.len() <= i {
            self.peers.resize(i + 1, NO_PEER);
        }
        self.peers[i] = p;
        Ok(p)
    }
}

impl<D: Device + 'static> Progress for EpShared<D> {
    fn progress(&self) -> usize {
        let mut st = locked(&self.st);
        if !st.enabled {
            return 0;
        }
        let t0 = Instant::now();
        st.last_progress = t0;
        let n = st.engine.progress_at(t0);
        if st.engine.round_timing {
            slow_progress(self.prov, &st, t0);
        }
        n
    }
}

/// A round of progress that took long enough for peers to notice (each
/// round handles a bounded batch; this should not happen).
/// Called only when it would be logged (`round_timing`): the clock reading
/// costs a few percent of an idle polling loop.
#[cold]
fn slow_progress<D: Device>(prov: &str, st: &EpState<D>, t0: Instant) {
    let took = t0.elapsed();
    if took >= Duration::from_millis(100) {
        rfabric_core::fi_info!(prov, FI_LOG_EP_DATA, "endpoint {}: one round of progress took {:?} ({:?})", addr_text(&st.engine.dev.name()), took, st.engine.last_round());
    }
}

/// How long a closing endpoint waits for its peers to fall quiet.
/// A peer whose last acknowledgement from us was lost sends its packet
/// again within the largest retransmission timeout, so quiet is waited for
/// a little longer than that.
const CLOSE_QUIET: Duration = Duration::from_millis(crate::udp::MAX_RTO.as_millis() as u64 + 50);

/// How often the keeper of a manual-progress endpoint looks at it while
/// the application does not progress it.
const KEEPER_PERIOD: Duration = Duration::from_millis(1);
/// How rarely, at most, while the application progresses it itself (the
/// period doubles at each look that finds it progressed): each look wakes a
/// thread that shares the application's core. At 1 ms throughout, pinned
/// 8-byte tcp ping-pongs on loopback read about 0.25 µs slower one-way.
const KEEPER_PERIOD_BUSY: Duration = Duration::from_millis(8);

impl<D: Device + 'static> EpShared<D> {
    /// The keeper of a manual-progress endpoint: when the application has
    /// not progressed it for a while (it waits on something else, or has
    /// stopped after its last receive), acknowledgements and retransmissions
    /// still go out, so peers see their sends complete and do not give up on
    /// a live endpoint.
    fn keep(self: Arc<Self>) {
        let mut last_dump = Instant::now();
        let mut busy_since: Option<Instant> = None;
        let mut warned = false;
        let mut period = KEEPER_PERIOD;
        while !self.stop.load(Ordering::Acquire) {
            std::thread::sleep(period);
            // Progressed by the application (or its lock held): look again
            // later; otherwise progress it, and look again soon.
            period = (period * 2).min(KEEPER_PERIOD_BUSY);
            let Ok(mut st) = self.st.try_lock() else {
                // Nobody can progress an endpoint whose lock stays taken;
                // its peers give up on it after FI_RUDP_PEER_TIMEOUT_MS.
                if busy_since.get_or_insert_with(Instant::now).elapsed() >= Duration::from_secs(1) && !warned {
                    warned = true;
                    rfabric_core::fi_info!(self.prov, FI_LOG_EP_DATA, "the keeper could not take the endpoint lock for 1 s (held, or taken again at once, by another thread)");
                }
                continue;
            };
            if warned {
                rfabric_core::fi_info!(self.prov, FI_LOG_EP_DATA, "the keeper took the endpoint lock again after {:?}", busy_since.map(|t| t.elapsed()));
            }
            busy_since = None;
            warned = false;
            if last_dump.elapsed() >= Duration::from_secs(2) && rfabric_core::log::enabled(self.prov, rfabric_core::log::FI_LOG_DEBUG, FI_LOG_EP_DATA) {
                last_dump = Instant::now();
                let name = addr_text(&st.engine.dev.name());
                rfabric_core::fi_dbg!(self.prov, FI_LOG_EP_DATA, "endpoint {}: {}{}", name, st.engine.describe(), st.engine.dev.describe());
            }
            if st.enabled && st.last_progress.elapsed() >= KEEPER_PERIOD {
                period = KEEPER_PERIOD;
                let t0 = Instant::now();
                st.last_progress = t0;
                st.engine.progress_at(t0);
                if st.engine.round_timing {
                    slow_progress(self.prov, &st, t0);
                }
            }
        }
    }
}

/// An RDM endpoint: the engine over device `D`.
pub struct RdmEp<D: Device + 'static> {
    shared: Arc<EpShared<D>>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    auto_progress: bool,
    bound: Mutex<Vec<Bound>>,
    linger: Duration,
}

/// rudp's RDM endpoint.
pub type RudpEp = RdmEp<LocalOrUdp>;

enum Bound {
    Cq(Arc<ProgressCq>),
    Cntr(Arc<ProgressCntr>),
}

impl<D: Device + 'static> RdmEp<D> {
    fn open<M: RdmDevices<Dev = D>>(info: &Info, bind: SocketAddr, m: &M, mr: Arc<Locked<MrRegistry>>, auto_progress: bool) -> Result<RdmEp<D>> {
        let s = m.limits();
        let dev = m.open(bind)?;
        let tx = info.tx_attr.as_ref();
        let rx = info.rx_attr.as_ref();
        let caps = info.caps;
        let ecfg = EngineConfig {
            medium_max: s.medium_max,
            tx_size: tx.map_or(1024, |t| t.size.max(1)) * 4,
            rx_size: rx.map_or(1024, |r| r.size.max(1)) * 4,
            unexp_max: s.unexpected_max,
            directed: caps & FI_DIRECTED_RECV != 0,
            lead: s.lead,
            lead_above: s.lead_above,
        };
        let mut engine = Engine::new(dev, ecfg, mr)?;
        engine.round_timing = rfabric_core::log::enabled(m.prov(), rfabric_core::log::FI_LOG_INFO, FI_LOG_EP_DATA);
        Ok(RdmEp {
            shared: Arc::new(EpShared {
                st: Mutex::new(EpState { engine, av: None, peers: Vec::new(), peers_gen: 0, enabled: false, last_progress: Instant::now() }),
                stop: AtomicBool::new(false),
                prov: m.prov(),
            }),
            thread: Mutex::new(None),
            auto_progress,
            bound: Mutex::new(Vec::new()),
            linger: s.linger,
        })
    }

    fn st(&self) -> MutexGuard<'_, EpState<D>> {
        locked(&self.shared.st)
    }

    fn start_progress(&self) {
        let sh = self.shared.clone();
        let h = std::thread::Builder::new().name(format!("{}-progress", self.shared.prov)).spawn(move || {
            let fd = {
                let mut st = locked(&sh.st);
                st.engine.dev.keep_watching();
                st.engine.dev.fd()
            };
            while !sh.stop.load(Ordering::Acquire) {
                let n = sh.progress();
                if n == 0 {
                    crate::sys::wait_readable(fd, 1);
                }
            }
        });
        if let Ok(h) = h {
            *locked(&self.thread) = Some(h);
        }
    }

    fn as_progress(&self) -> Arc<dyn Progress> {
        self.shared.clone()
    }
}

impl<D: Device + 'static> Endpoint for RdmEp<D> {
    fn bind(&self, target: Bind<'_>, flags: u64) -> Result<()> {
        match target {
            Bind::Cq(cq) => {
                let cq = cq.clone().as_any_arc().downcast::<ProgressCq>().map_err(|_| EINVAL)?;
                if flags & !(FI_TRANSMIT | FI_RECV | FI_SELECTIVE_COMPLETION) != 0 {
                    return Err(Error(FI_EBADFLAGS));
                }
                let mut st = self.st();
                let out = &mut st.engine.out;
                if flags & FI_TRANSMIT != 0 {
                    out.tx_cq = Some(cq.clone());
                    out.tx_selective = flags & FI_SELECTIVE_COMPLETION != 0;
                }
                if flags & FI_RECV != 0 {
                    out.rx_cq = Some(cq.clone());
                    out.rx_selective = flags & FI_SELECTIVE_COMPLETION != 0;
                }
                drop(st);
                cq.bound.attach(self.as_progress());
                locked(&self.bound).push(Bound::Cq(cq));
                Ok(())
            }
            Bind::Cntr(c) => {
                let c = c.clone().as_any_arc().downcast::<ProgressCntr>().map_err(|_| EINVAL)?;
                rfabric_core::objects::cntr::Cntr::check_bind_flags(flags)?;
                let mut st = self.st();
                let out: &mut Outputs = &mut st.engine.out;
                let all = flags == 0;
                for (bit, slot) in [
                    (FI_SEND, &mut out.send),
                    (FI_RECV, &mut out.recv),
                    (FI_READ, &mut out.read),
                    (FI_WRITE, &mut out.write),
                    (FI_REMOTE_WRITE, &mut out.remote_write),
                    (FI_REMOTE_READ, &mut out.remote_read),
                ] {
                    if all || flags & bit != 0 {
                        *slot = Some(c.clone());
                    }
                }
                drop(st);
                c.bound.attach(self.as_progress());
                locked(&self.bound).push(Bound::Cntr(c));
                Ok(())
            }
            Bind::Av(av) => {
                let av = av.clone().as_any_arc().downcast::<RudpAv>().map_err(|_| EINVAL)?;
                let mut st = self.st();
                if st.av.is_some() {
                    return Err(EINVAL);
                }
                st.engine.set_av(av.clone());
                st.av = Some(av);
                Ok(())
            }
            Bind::Eq(_) | Bind::Srx(_) => Err(rfabric_core::error::ENOSYS),
        }
    }

    fn enable(&self) -> Result<()> {
        let mut st = self.st();
        if st.av.is_none() || (st.engine.out.tx_cq.is_none() && st.engine.out.rx_cq.is_none()) {
            return Err(Error(FI_ENOCQ));
        }
        if st.enabled {
            return Ok(());
        }
        st.enabled = true;
        drop(st);
        if self.auto_progress {
            self.start_progress();
        } else {
            let sh = self.shared.clone();
            if let Ok(h) = std::thread::Builder::new().name(format!("{}-keeper", self.shared.prov)).spawn(move || sh.keep()) {
                *locked(&self.thread) = Some(h);
            }
        }
        Ok(())
    }

    fn getname(&self, buf: &mut [u8]) -> Result<usize> {
        let b = self.st().engine.dev.name();
        let n = b.len().min(buf.len());
        buf[..n].copy_from_slice(&b[..n]);
        Ok(b.len())
    }

    unsafe fn send(&self, op: &TxOp<'_>) -> Result<()> {
        let mut st = self.st();
        let p = st.peer(op.dest)?;
        // SAFETY: forwarded contract (buffers readable until completion).
        let r = unsafe { st.engine.send(p, op) };
        if matches!(r, Err(e) if e.0 == FI_EAGAIN) {
            st.engine.progress();
        }
        r
    }

    unsafe fn recv(&self, op: &RxOp<'_>) -> Result<()> {
        let mut st = self.st();
        // SAFETY: forwarded contract (buffers writable until completion).
        unsafe { st.engine.recv(op) }
    }

    unsafe fn rma_read(&self, op: &RmaOp<'_>) -> Result<()> {
        let mut st = self.st();
        let p = st.peer(op.dest)?;
        // SAFETY: forwarded contract.
        unsafe { st.engine.rma(p, op, false) }
    }

    unsafe fn rma_write(&self, op: &RmaOp<'_>) -> Result<()> {
        let mut st = self.st();
        let p = st.peer(op.dest)?;
        // SAFETY: forwarded contract.
        unsafe { st.engine.rma(p, op, true) }
    }

    unsafe fn atomic(&self, op: &AtomicOp<'_>) -> Result<()> {
        let mut st = self.st();
        let p = st.peer(op.dest)?;
        // SAFETY: forwarded contract.
        unsafe { st.engine.atomic(p, op) }
    }

    fn atomic_valid(&self, kind: AtomicKind, op: u32, datatype: u32) -> Result<usize> {
        let max = crate::engine::ATOMIC_MAX_BYTES;
        rfabric_core::objects::atomic::valid(kind, op, datatype, max).ok_or(Error(FI_EOPNOTSUPP))
    }

    fn cancel(&self, context: usize) -> Result<()> {
        self.st().engine.cancel(context)
    }

    fn getopt(&self, level: i32, name: i32, buf: &mut [u8]) -> Result<usize> {
        if level != FI_OPT_ENDPOINT {
            return Err(Error(FI_ENOPROTOOPT));
        }
        match name {
            FI_OPT_MIN_MULTI_RECV => {
                let v = self.st().engine.min_multi_recv().to_ne_bytes();
                if buf.len() < v.len() {
                    return Err(Error(FI_ETOOSMALL));
                }
                buf[..v.len()].copy_from_slice(&v);
                Ok(v.len())
            }
            _ => Err(Error(FI_ENOPROTOOPT)),
        }
    }

    fn setopt(&self, level: i32, name: i32, val: &[u8]) -> Result<()> {
        if level != FI_OPT_ENDPOINT {
            return Err(Error(FI_ENOPROTOOPT));
        }
        match name {
            FI_OPT_MIN_MULTI_RECV => {
                let v = usize::from_ne_bytes(val.try_into().map_err(|_| EINVAL)?);
                self.st().engine.set_min_multi_recv(v);
                Ok(())
            }
            _ => Err(Error(FI_ENOPROTOOPT)),
        }
    }

    fn close(&self) -> Result<()> {
        // Linger: what we sent still gets its acknowledgements, and what we
        // received gets ours, so peers see the last messages complete.
        let deadline = Instant::now() + self.linger;
        loop {
            let busy = {
                let mut st = self.st();
                if !st.enabled {
                    break;
                }
                st.engine.progress();
                st.engine.busy()
            };
            if !busy || Instant::now() >= deadline {
                break;
            }
            std::thread::yield_now();
        }
        // Then stay until the peers are quiet for a while (within the same
        // linger): our last acknowledgement may have been lost, and a peer
        // that sends its packet again must get it, or its send fails once
        // it gives up on us.
        let mut quiet_until = Instant::now() + CLOSE_QUIET;
        loop {
            let now = Instant::now();
            if now >= quiet_until || now >= deadline {
                break;
            }
            let work = {
                let mut st = self.st();
                if !st.enabled {
                    break;
                }
                st.engine.progress()
            };
            if work > 0 {
                quiet_until = Instant::now() + CLOSE_QUIET;
            } else {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        {
            let mut st = self.st();
            st.engine.dev.flush(Instant::now(), true);
            let d = st.engine.dev.stats();
            rfabric_core::fi_info!(
                self.shared.prov,
                FI_LOG_EP_CTRL,
                "endpoint {} closed: {} datagrams sent ({} GSO sends), {} received ({} GRO receives), {} sent again; dropped: {} malformed, {} from unknown peers, {} with a wrong connection id, {} out of window, {} duplicates; {} refused for lack of room, {} failed protocol checks; {} long messages read from their senders' memory",
                addr_text(&st.engine.dev.name()),
                d.sent,
                d.gso_sends,
                d.received,
                d.gro_recvs,
                d.retransmitted,
                d.malformed,
                d.unknown_peer,
                d.bad_conn,
                d.bad_seq,
                d.duplicate,
                st.engine.refused,
                st.engine.bad_packets,
                st.engine.peer_reads
            );
            if let Some(more) = st.engine.dev.close_note() {
                rfabric_core::fi_info!(self.shared.prov, FI_LOG_EP_CTRL, "endpoint {} closed: {}", addr_text(&st.engine.dev.name()), more);
            }
        }
        self.shared.stop.store(true, Ordering::Release);
        if let Some(h) = locked(&self.thread).take() {
            let _ = h.join();
        }
        let me = self.as_progress();
        for b in locked(&self.bound).drain(..) {
            match b {
                Bound::Cq(c) => c.bound.detach(&me),
                Bound::Cntr(c) => c.bound.detach(&me),
            }
        }
        let mut st = self.st();
        st.enabled = false;
        st.engine.out = Outputs::default();
        st.av = None;
        Ok(())
    }
}

impl<D: Device + 'static> Drop for RdmEp<D> {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        if let Some(h) = locked(&self.thread).take() {
            let _ = h.join();
        }
        // CQs and counters hold the shared state: detach it so it is freed.
        let me = self.as_progress();
        for b in locked(&self.bound).drain(..) {
            match b {
                Bound::Cq(c) => c.bound.detach(&me),
                Bound::Cntr(c) => c.bound.detach(&me),
            }
        }
    }
}
