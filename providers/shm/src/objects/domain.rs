//! The shm domain: the MR registry and descriptor rules its endpoints
//! share, the locking its objects get from the threading model, and the
//! `Domain` calls that open endpoints, CQs, AVs, counters, MRs and XPU
//! contexts.

use super::ep::{ATOMIC_MAX_BYTES, MAX_UNEXPECTED};
use super::{ShmAv, ShmCntr, ShmCq, ShmEp};
use crate::lock::Locking;
use rfabric_core::abi::*;
use rfabric_core::error::{Error, Result, EINVAL};
use rfabric_core::info::Info;
use rfabric_core::objects::cq::CqAttr;
use rfabric_core::objects::local_mr::{Checked, DmabufMap, LocalRegs};
use rfabric_core::objects::mr::{MrRegion, MrRegistry};
use rfabric_core::objects::wait::Locked;
use rfabric_core::provider::{AddressVector, AvAttr, CompletionQueue, Counter, Domain, Endpoint, MrReg, MrReq};
use std::sync::Arc;

pub struct ShmDomain {
    mr: Arc<Locked<MrRegistry>>,
    /// The rules for the descriptors of sends and receives (`FI_MR_LOCAL`,
    /// `FI_MR_DMABUF`), applied by the `Checked` wrapper of every endpoint.
    local: Arc<LocalRegs>,
    /// `FI_PROGRESS_AUTO` was asked for: every endpoint gets a progress thread.
    auto_progress: bool,
    /// Whether endpoint states, CQ rings and CQ endpoint lists get real
    /// locks (from the domain's threading and progress, or always).
    pub(super) locking: Locking,
}

impl ShmDomain {
    /// A domain whose objects always take their locks, whatever threading
    /// model `info` names.
    pub fn new(info: &Info) -> Result<ShmDomain> {
        ShmDomain::build(info, |_, _| Locking::REAL)
    }

    /// A domain whose objects take no lock when `info` asks for
    /// `FI_THREAD_DOMAIN` or `FI_THREAD_COMPLETION` with manual progress and
    /// no fi_xpu (`lock::needs_lock`).
    ///
    /// # Safety
    /// The caller keeps the promise of that threading model for every
    /// object opened under this domain (`Locking::for_threading`): under
    /// `FI_THREAD_DOMAIN` no two calls on the domain's objects overlap;
    /// under `FI_THREAD_COMPLETION` no two calls on objects bound together
    /// (endpoints and the CQs and counters they share) overlap.
    pub unsafe fn with_app_threading(info: &Info) -> Result<ShmDomain> {
        // SAFETY: forwarded contract.
        ShmDomain::build(info, |t, h| unsafe { Locking::for_threading(t, h) })
    }

    fn build(info: &Info, choose: impl FnOnce(u32, bool) -> Locking) -> Result<ShmDomain> {
        let d = info.domain_attr.as_ref();
        let mode = rfabric_core::getinfo::mr_mode_bits(d.map_or(0, |d| d.mr_mode), fi_version(1, 5));
        let key_size = d.map_or(8, |d| if d.mr_key_size == 0 { 8 } else { d.mr_key_size });
        let auto_progress = d.is_some_and(|d| d.data_progress == FI_PROGRESS_AUTO);
        // An fi_xpu proxy thread (FI_XPU) posts on endpoints beside the
        // application, like the progress thread of FI_PROGRESS_AUTO.
        let helper_threads = auto_progress || info.caps & FI_XPU != 0;
        let threading = d.map_or(FI_THREAD_UNSPEC, |d| d.threading);
        let locking = choose(threading, helper_threads);
        rfabric_core::fi_info!(
            "shm",
            FI_LOG_DOMAIN,
            "shm: domain threading {}, {} on endpoints and CQs",
            threading,
            if locking.is_real() { "mutexes" } else { "no locks" }
        );
        Ok(ShmDomain { mr: Arc::new(Locked::new(MrRegistry::new(mode, key_size)?)), local: LocalRegs::new(mode), auto_progress, locking })
    }
}

impl ShmDomain {
    /// `fi_endpoint` with an unexpected-message queue of `unexp_cap`
    /// messages (`MAX_UNEXPECTED` from `fi_endpoint`; tests make it small).
    pub(crate) fn endpoint_with(&self, info: &Info, unexp_cap: usize) -> Result<ShmEp> {
        if info.ep_type() != FI_EP_RDM && info.ep_type() != FI_EP_UNSPEC {
            return Err(EINVAL);
        }
        ShmEp::open(info, self.locking, self.auto_progress, self.mr.clone(), unexp_cap)
    }
}

impl Domain for ShmDomain {
    fn endpoint(&self, info: &Info) -> Result<Box<dyn Endpoint>> {
        Ok(Box::new(Checked::new(self.endpoint_with(info, MAX_UNEXPECTED)?, self.local.clone())))
    }
    fn cq_open(&self, attr: &CqAttr) -> Result<Arc<dyn CompletionQueue>> {
        Ok(Arc::new(ShmCq::new(attr, self.locking)?))
    }
    fn av_open(&self, attr: &AvAttr) -> Result<Arc<dyn AddressVector>> {
        if attr.flags & !(FI_EVENT | FI_READ | FI_SYMMETRIC) != 0 || attr.flags & FI_EVENT != 0 {
            return Err(Error(FI_EBADFLAGS));
        }
        Ok(Arc::new(ShmAv::new(attr)?))
    }
    fn cntr_open(&self, events: u32, wait_obj: u32) -> Result<Arc<dyn Counter>> {
        Ok(Arc::new(ShmCntr::new(events, wait_obj)?))
    }
    fn mr_reg(&self, req: &MrReq) -> Result<MrReg> {
        // A dma-buf is reached through a CPU mapping of its own: that
        // mapping is what gets registered, and descriptors of the MR
        // translate the application's addresses into it.
        let map = req.dmabuf.as_ref().map(|b| DmabufMap::new(b, "shm")).transpose()?;
        let (base, len) = map.as_ref().map_or((req.addr, req.len), |m| (m.data(), m.len()));
        let r = MrRegion { base, len, access: req.access, dmabuf: req.dmabuf.map(|b| (b.fd, b.offset)), ..MrRegion::default() };
        let key = self.mr.lock().register(r, req.requested_key)?;
        Ok(MrReg { key, local: Some(self.local.register(map)) })
    }
    fn mr_close(&self, key: u64) -> Result<()> {
        self.mr.lock().remove(key).map(|_| ())
    }
    fn xpu_ctx(&self, attr: &rfabric_core::xpu::XpuAttr) -> Result<Arc<rfabric_core::xpu::XpuCtx>> {
        rfabric_core::xpu::XpuCtx::open(crate::xpu::PROVIDER, attr)
    }
    fn query_atomic(&self, kind: rfabric_core::provider::AtomicKind, op: u32, datatype: u32) -> Result<(usize, usize)> {
        let count = rfabric_core::objects::atomic::valid(kind, op, datatype, ATOMIC_MAX_BYTES).ok_or(Error(FI_EOPNOTSUPP))?;
        Ok((count, rfabric_core::objects::atomic::type_size(datatype).unwrap_or(0)))
    }
}
