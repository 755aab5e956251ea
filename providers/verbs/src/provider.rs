//! The `verbs` entry of the provider table, its fabric and its domains.
//!
//! `offers` probes once per process (`discovery`) and logs what it found
//! and left out at `FI_LOG_LEVEL=info`. A domain opens its device and a
//! protection domain; `fi_mr_reg` goes through the core's registration
//! cache (`rfabric_core::objects::mr_cache`) to `ibv_reg_mr`, and
//! `fi_mr_regattr` with `FI_MR_DMABUF` to `ibv_reg_dmabuf_mr`. `FI_EP_RDM`
//! offers, their domains and endpoints are `crate::rdm`'s; `FI_EP_MSG`
//! endpoints, passive endpoints, CQs and counters are `crate::msg`'s.
//!
//! Its unsafe code: the fabric's `domain` (the trait's), and the two
//! registration calls, which hand memory and a file descriptor to libibverbs.

use crate::discovery::{probe, DomainSpec, Probe};
use rfabric_core::abi::*;
use rfabric_core::error::{Error, Result, EINVAL, ENODATA};
use rfabric_core::info::{DomainAttr, EpAttr, FabricAttr, Info};
use rfabric_core::objects::cq::CqAttr;
use rfabric_core::objects::local_mr::LocalRegs;
use rfabric_core::objects::mr_cache::MrCache;
use rfabric_core::provider::{CompletionQueue, ConnReq, Counter, Domain, Endpoint, Fabric, MrReg, MrReq, PassiveEndpoint, Provider};
use rfabric_ibverbs::sys::*;
use rfabric_ibverbs::{CompChannel, Context, Mr, Pd, RdmaCm, Verbs};
use std::collections::HashMap;
use std::net::IpAddr;
use std::os::fd::BorrowedFd;
use std::sync::{Arc, Mutex, OnceLock};

pub const NAME: &str = "verbs";
pub const VERSION: u32 = fi_version(FI_MAJOR_VERSION, FI_MINOR_VERSION);

pub const CAPS: u64 = FI_MSG | FI_RMA | FI_ATOMIC | FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_LOCAL_COMM | FI_REMOTE_COMM;
/// `FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY`.
pub const MR_MODE: i32 = (FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY) as i32;

/// Where the provider's libibverbs comes from.
enum Source {
    /// The system's, probed once per process.
    System,
    /// A given one (tests: the stand-in), probed on every `offers`, with
    /// this answer for IPoIB interface addresses.
    Given(Verbs, fn(&[u8; 16]) -> Vec<IpAddr>),
}

pub struct VerbsProvider {
    source: Source,
    /// librdmacm for `FI_EP_RDM` (`crate::rdm`) with a given libibverbs.
    cm: Option<rfabric_ibverbs::RdmaCm>,
}

struct System {
    verbs: Option<Verbs>,
    probe: Probe,
}

static SYSTEM: OnceLock<System> = OnceLock::new();

fn system() -> &'static System {
    SYSTEM.get_or_init(|| {
        let loaded = Verbs::load();
        let p = probe(loaded.as_ref().map_err(|e| e.to_string()), &crate::addr::ipoib_addrs);
        for l in p.lines() {
            rfabric_core::fi_info!(NAME, FI_LOG_CORE, "{}", l);
        }
        System { verbs: loaded.ok(), probe: p }
    })
}

impl VerbsProvider {
    pub fn system() -> VerbsProvider {
        VerbsProvider { source: Source::System, cm: None }
    }

    /// A provider over the given libibverbs (tests: the stand-in).
    pub fn with_verbs(verbs: Verbs, ipoib: fn(&[u8; 16]) -> Vec<IpAddr>) -> VerbsProvider {
        VerbsProvider { source: Source::Given(verbs, ipoib), cm: None }
    }

    /// With this librdmacm (tests: the stand-in's) for `FI_EP_RDM`.
    pub fn with_rdmacm(self, cm: rfabric_ibverbs::RdmaCm) -> VerbsProvider {
        VerbsProvider { cm: Some(cm), ..self }
    }

    /// librdmacm: the system's, or the given one (none by default).
    fn rdmacm(&self) -> Option<rfabric_ibverbs::RdmaCm> {
        match &self.source {
            Source::System => crate::rdm::system_rdmacm(),
            Source::Given(..) => self.cm.clone(),
        }
    }

    /// The probe and the library it ran on.
    fn state(&self) -> (Probe, Option<Verbs>) {
        match &self.source {
            Source::System => {
                let s = system();
                (s.probe.clone(), s.verbs.clone())
            }
            Source::Given(v, ipoib) => (probe(Ok(v), ipoib), Some(v.clone())),
        }
    }
}

/// The `fi_info` of one address of one domain.
pub fn offer(d: &DomainSpec, addr: &crate::addr::Addr) -> Info {
    let max_msg = if d.max_msg_sz == 0 { 1 << 31 } else { d.max_msg_sz as usize };
    let tx = fi_tx_attr {
        caps: CAPS & !(FI_RECV | FI_REMOTE_READ | FI_REMOTE_WRITE),
        mode: 0,
        op_flags: 0,
        msg_order: FI_ORDER_SAS | FI_ORDER_RAW | FI_ORDER_WAW | FI_ORDER_WAS | FI_ORDER_SAW,
        comp_order: FI_ORDER_STRICT,
        inject_size: 64,
        size: 384,
        iov_limit: 4,
        rma_iov_limit: 1,
        tclass: 0,
    };
    let rx = fi_rx_attr {
        caps: CAPS & !(FI_SEND | FI_READ | FI_WRITE),
        // A write with remote CQ data consumes a posted receive.
        mode: FI_RX_CQ_DATA,
        op_flags: 0,
        msg_order: tx.msg_order,
        comp_order: FI_ORDER_STRICT,
        total_buffered_recv: 0,
        size: 384,
        iov_limit: 4,
    };
    Info {
        caps: CAPS,
        mode: 0,
        addr_format: addr.format(),
        src_addr: Some(addr.to_bytes()),
        tx_attr: Some(tx),
        rx_attr: Some(rx),
        ep_attr: Some(EpAttr {
            ep_type: FI_EP_MSG,
            protocol: FI_PROTO_RDMA_CM_IB_RC,
            protocol_version: 1,
            max_msg_size: max_msg,
            tx_ctx_cnt: 1,
            rx_ctx_cnt: 1,
            ..EpAttr::default()
        }),
        domain_attr: Some(DomainAttr {
            name: Some(d.name.clone()),
            threading: FI_THREAD_SAFE,
            control_progress: FI_PROGRESS_AUTO,
            data_progress: FI_PROGRESS_AUTO,
            resource_mgmt: FI_RM_ENABLED,
            av_type: FI_AV_UNSPEC,
            mr_mode: MR_MODE,
            mr_key_size: 4,
            cq_data_size: 4,
            cq_cnt: 1024,
            ep_cnt: 1024,
            tx_ctx_cnt: 1024,
            rx_ctx_cnt: 1024,
            max_ep_tx_ctx: 1,
            max_ep_rx_ctx: 1,
            // One shared receive context (an SRQ) per endpoint.
            max_ep_srx_ctx: 1,
            mr_iov_limit: 1,
            caps: FI_LOCAL_COMM | FI_REMOTE_COMM,
            mr_cnt: 1 << 16,
            ..DomainAttr::default()
        }),
        fabric_attr: Some(FabricAttr {
            name: Some(NAME.to_string()),
            prov_name: Some(NAME.to_string()),
            prov_version: VERSION,
            api_version: VERSION,
            fabric: 0,
        }),
        ..Info::default()
    }
}

impl Provider for VerbsProvider {
    fn name(&self) -> &'static str {
        NAME
    }
    fn version(&self) -> u32 {
        VERSION
    }
    fn offers(&self) -> Vec<Info> {
        let (p, _) = self.state();
        let mut v: Vec<Info> = p.domains().iter().flat_map(|d| d.addrs.iter().map(move |a| offer(d, a))).collect();
        if !p.domains().is_empty() && self.rdmacm().is_some() {
            v.extend(crate::rdm::offers(&p));
        }
        v
    }
    fn resolve(&self, offer: Info, req: &rfabric_core::provider::Request<'_>) -> Result<Info> {
        if offer.ep_type() == FI_EP_RDM {
            return rfabric_rudp::provider::resolve_rdm(offer, req);
        }
        Ok(offer)
    }
    fn fabric(&self, attr: &FabricAttr) -> Result<Box<dyn Fabric>> {
        let (p, verbs) = self.state();
        let Some(verbs) = verbs.filter(|_| !p.domains().is_empty()) else {
            rfabric_core::fi_info!(NAME, FI_LOG_FABRIC, "fi_fabric: no verbs domains on this machine");
            return Err(ENODATA);
        };
        if attr.name.as_deref().is_some_and(|n| n != NAME) {
            return Err(EINVAL);
        }
        Ok(Box::new(VerbsFabric { verbs, domains: p.domains().to_vec(), cm: self.rdmacm() }))
    }
}

pub fn providers() -> Vec<Box<dyn Provider>> {
    vec![Box::new(VerbsProvider::system())]
}

pub struct VerbsFabric {
    verbs: Verbs,
    domains: Vec<DomainSpec>,
    cm: Option<rfabric_ibverbs::RdmaCm>,
}

impl Fabric for VerbsFabric {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
    unsafe fn domain(&self, info: &Info) -> Result<Box<dyn Domain>> {
        let name = info.domain_attr.as_ref().and_then(|d| d.name.as_deref());
        let spec = self.domains.iter().find(|d| name.map_or(true, |n| n == d.name)).ok_or_else(|| {
            rfabric_core::fi_warn!(NAME, FI_LOG_DOMAIN, "fi_domain: no verbs domain named {:?}", name);
            ENODATA
        })?;
        if info.ep_type() == FI_EP_RDM {
            return crate::rdm::domain(&self.verbs, self.cm.clone(), spec, info);
        }
        let mut d = VerbsDomain::open(&self.verbs, spec)?;
        d.cm = self.cm.clone();
        Ok(Box::new(d))
    }
    fn passive_ep(&self, info: &Info) -> Result<Box<dyn PassiveEndpoint>> {
        crate::msg::passive_ep(self.cm.as_ref(), info)
    }
}

fn verr(e: rfabric_ibverbs::VerbsError) -> Error {
    rfabric_core::fi_warn!(NAME, FI_LOG_DOMAIN, "{}", e);
    Error(e.errno)
}

/// An opened device and protection domain, and the domain's registrations.
pub struct VerbsDomain {
    spec: DomainSpec,
    ctx: Context,
    pd: Pd,
    cache: MrCache<Mr>,
    /// Open MRs by key (one key may name several `fi_mr`s: the cache hands
    /// one registration to each registration of the same memory).
    mrs: Mutex<HashMap<u64, Vec<Arc<Mr>>>>,
    local: Arc<LocalRegs>,
    /// librdmacm, for `FI_EP_MSG` endpoints.
    cm: Option<RdmaCm>,
    /// The completion channel of the endpoints' CQs (made with the first).
    comp: OnceLock<CompChannel>,
}

/// `FI_*` access bits as `IBV_ACCESS_*`. Local write is asked for when
/// the adapter writes into the memory: receives (`FI_RECV`), RDMA reads
/// landing in it (`FI_READ`), peers' writes (`FI_REMOTE_WRITE`, which
/// requires it), or no access named (everything). Memory only sent from
/// or written from is registered without it, so read-only memory can be.
pub fn ibv_access(access: u64) -> u32 {
    let local_write = access & (FI_RECV | FI_READ | FI_REMOTE_WRITE) != 0
        || access & (FI_SEND | FI_WRITE | FI_REMOTE_READ | FI_RECV | FI_READ | FI_REMOTE_WRITE) == 0;
    let mut a = if local_write { IBV_ACCESS_LOCAL_WRITE } else { 0 };
    if access & FI_REMOTE_WRITE != 0 {
        a |= IBV_ACCESS_REMOTE_WRITE;
    }
    if access & FI_REMOTE_READ != 0 {
        a |= IBV_ACCESS_REMOTE_READ;
    }
    a
}

impl VerbsDomain {
    pub fn open(verbs: &Verbs, spec: &DomainSpec) -> Result<VerbsDomain> {
        let ctx = verbs.open_device(&spec.device).map_err(verr)?;
        let pd = ctx.alloc_pd().map_err(verr)?;
        Ok(VerbsDomain {
            spec: spec.clone(),
            ctx,
            pd,
            cache: MrCache::new(NAME),
            mrs: Mutex::new(HashMap::new()),
            local: LocalRegs::new(MR_MODE as u64),
            cm: None,
            comp: OnceLock::new(),
        })
    }

    pub fn spec(&self) -> &DomainSpec {
        &self.spec
    }
    pub fn context(&self) -> &Context {
        &self.ctx
    }
    pub fn pd(&self) -> &Pd {
        &self.pd
    }
    pub fn cache(&self) -> &MrCache<Mr> {
        &self.cache
    }
    pub fn regs(&self) -> &Arc<LocalRegs> {
        &self.local
    }
    pub fn rdmacm(&self) -> Option<&RdmaCm> {
        self.cm.as_ref()
    }
    /// The domain's completion channel (non-blocking), made on first use.
    pub fn comp_channel(&self) -> Result<&CompChannel> {
        if let Some(c) = self.comp.get() {
            return Ok(c);
        }
        let c = self.ctx.create_comp_channel().map_err(verr)?;
        // SAFETY: fcntl on the channel's own fd; failure leaves it blocking
        // (and a drain would then wait), which F_SETFL does not do.
        unsafe {
            let fl = libc::fcntl(c.fd(), libc::F_GETFL);
            libc::fcntl(c.fd(), libc::F_SETFL, fl | libc::O_NONBLOCK);
        }
        Ok(self.comp.get_or_init(|| c))
    }
    /// With librdmacm (a domain opened outside a fabric: tests).
    pub fn set_rdmacm(&mut self, cm: RdmaCm) {
        self.cm = Some(cm);
    }

    fn register(&self, req: &MrReq) -> Result<Arc<Mr>> {
        let access = ibv_access(req.access);
        if let Some(b) = req.dmabuf {
            if b.fd < 0 || b.len == 0 {
                rfabric_core::fi_warn!(NAME, FI_LOG_MR, "fi_mr_regattr(FI_MR_DMABUF): fd {} len {} refused", b.fd, b.len);
                return Err(EINVAL);
            }
            // SAFETY: the fd is the application's, open for this call
            // (fi_mr_regattr's contract); it is only passed on.
            let fd = unsafe { BorrowedFd::borrow_raw(b.fd) };
            // Not cached: a dma-buf's pages are the exporter's, and nothing
            // tells when they change; peers address it from `base_addr`.
            return self.pd.reg_dmabuf_mr(b.offset, b.len, b.base_addr as u64, fd, access).map(Arc::new).map_err(verr);
        }
        if req.len == 0 || req.addr == 0 {
            rfabric_core::fi_warn!(NAME, FI_LOG_MR, "fi_mr_reg: empty range ({:#x}, {}) refused", req.addr, req.len);
            return Err(EINVAL);
        }
        self.cache.get(req.addr, req.len, u64::from(access), |addr, len| {
            // SAFETY: the kernel pins the pages for the registration's
            // life, so unmapping them later cannot make the device touch
            // another process's memory; what the device writes is what the
            // application asked peers to be allowed to write (`access`),
            // into memory no Rust code of ours relies on.
            unsafe { self.pd.reg_mr(addr as *mut libc::c_void, len, access) }.map_err(verr)
        })
    }
}

impl Domain for VerbsDomain {
    fn mr_reg(&self, req: &MrReq) -> Result<MrReg> {
        let mr = self.register(req)?;
        let key = u64::from(mr.rkey());
        // The descriptor carries the local key, for the work requests.
        let local = self.local.register_word(None, u64::from(mr.lkey()));
        self.mrs.lock().unwrap_or_else(|p| p.into_inner()).entry(key).or_default().push(mr);
        Ok(MrReg { key, local: Some(local) })
    }

    fn endpoint(&self, info: &Info) -> Result<Box<dyn Endpoint>> {
        crate::msg::endpoint(self, info)
    }
    fn accept_endpoint(&self, info: &Info, req: ConnReq) -> Result<Box<dyn Endpoint>> {
        crate::msg::accept_endpoint(self, info, req)
    }
    fn srx_context(&self, attr: &fi_rx_attr) -> Result<Box<dyn Endpoint>> {
        crate::msg::srx_context(self, attr)
    }
    fn cq_open(&self, attr: &CqAttr) -> Result<Arc<dyn CompletionQueue>> {
        crate::msg::cq_open(self, attr)
    }
    fn cntr_open(&self, events: u32, wait_obj: u32) -> Result<Arc<dyn Counter>> {
        crate::msg::cntr_open(events, wait_obj)
    }
    fn query_atomic(&self, kind: rfabric_core::provider::AtomicKind, op: u32, datatype: u32) -> Result<(usize, usize)> {
        crate::msg::atomic_valid(kind, op, datatype)
    }

    fn mr_close(&self, key: u64) -> Result<()> {
        let mut m = self.mrs.lock().unwrap_or_else(|p| p.into_inner());
        let Some(v) = m.get_mut(&key) else { return Err(Error(FI_ENOKEY)) };
        let mr = v.pop();
        if v.is_empty() {
            m.remove(&key);
        }
        drop(m);
        // The registration stays in the cache (if it is cached) until its
        // memory changes or the domain closes.
        drop(mr);
        Ok(())
    }
}

impl Drop for VerbsDomain {
    fn drop(&mut self) {
        self.cache.flush();
    }
}
