//! The `shm` provider's entry in the provider table: what it offers to
//! `fi_getinfo` and how a fabric is opened.

use rfabric_core::abi::*;
use rfabric_core::error::Result;
use rfabric_core::info::{DomainAttr, EpAttr, FabricAttr, Info};
use rfabric_core::provider::{Fabric, Provider, Request};

pub const NAME: &str = "shm";
/// Provider version: follows the library's API version.
pub const VERSION: u32 = fi_version(FI_MAJOR_VERSION, FI_MINOR_VERSION);
/// Largest payload carried inside a queue entry.
pub const INJECT_SIZE: usize = 4096;

/// Capabilities shm offers. `FI_REMOTE_COMM` is never among them: shm only
/// reaches processes on the same node.
pub const CAPS: u64 = FI_MSG
    | FI_TAGGED
    | FI_RMA
    | FI_ATOMIC
    | FI_SEND
    | FI_RECV
    | FI_READ
    | FI_WRITE
    | FI_REMOTE_READ
    | FI_REMOTE_WRITE
    | FI_MULTI_RECV
    | FI_SOURCE
    | FI_SOURCE_ERR
    | FI_DIRECTED_RECV
    | FI_RMA_EVENT
    | FI_LOCAL_COMM;

const MSG_ORDER: u64 = FI_ORDER_SAS | FI_ORDER_RAR | FI_ORDER_RAW | FI_ORDER_WAR | FI_ORDER_WAW | FI_ORDER_SAR | FI_ORDER_SAW;
/// Atomics from one initiator run at the target in the order they were
/// sent (one ring per peer, executed under the target's lock).
const ATOMIC_ORDER: u64 = FI_ORDER_ATOMIC_RAR | FI_ORDER_ATOMIC_RAW | FI_ORDER_ATOMIC_WAR | FI_ORDER_ATOMIC_WAW;

pub struct ShmProvider;

impl ShmProvider {
    fn offer(&self, progress: fi_progress) -> Info {
        // Transmit and receive attributes carry only the capabilities of
        // their side; FI_LOCAL_COMM is a domain-wide capability.
        let tx = fi_tx_attr {
            caps: CAPS & !(FI_RECV | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_MULTI_RECV | FI_DIRECTED_RECV | FI_SOURCE | FI_SOURCE_ERR | FI_RMA_EVENT | FI_LOCAL_COMM),
            mode: 0,
            op_flags: 0,
            msg_order: MSG_ORDER | ATOMIC_ORDER,
            comp_order: FI_ORDER_NONE,
            inject_size: INJECT_SIZE,
            size: 1024,
            iov_limit: 4,
            rma_iov_limit: 4,
            tclass: 0,
        };
        let rx = fi_rx_attr {
            caps: CAPS & !(FI_SEND | FI_READ | FI_WRITE | FI_LOCAL_COMM),
            mode: 0,
            op_flags: 0,
            msg_order: MSG_ORDER,
            comp_order: FI_ORDER_NONE,
            total_buffered_recv: 0,
            size: 1024,
            iov_limit: 4,
        };
        Info {
            // FI_XPU: a host XPU (fi_xpu(3)); kept only when asked for.
            caps: CAPS | FI_XPU,
            mode: 0,
            addr_format: FI_ADDR_STR,
            tx_attr: Some(tx),
            rx_attr: Some(rx),
            ep_attr: Some(EpAttr {
                ep_type: FI_EP_RDM,
                protocol: FI_PROTO_SHM,
                protocol_version: 1,
                max_msg_size: usize::MAX >> 1,
                max_order_raw_size: usize::MAX >> 1,
                max_order_war_size: usize::MAX >> 1,
                max_order_waw_size: usize::MAX >> 1,
                mem_tag_format: 0xaaaa_aaaa_aaaa_aaaa, // upstream FI_TAG_GENERIC
                tx_ctx_cnt: 1,
                rx_ctx_cnt: 1,
                ..EpAttr::default()
            }),
            domain_attr: Some(DomainAttr {
                name: Some(NAME.to_string()),
                threading: FI_THREAD_SAFE,
                control_progress: progress,
                data_progress: progress,
                resource_mgmt: FI_RM_ENABLED,
                av_type: FI_AV_UNSPEC,
                mr_mode: 0,
                mr_key_size: 8,
                cq_data_size: 8,
                cq_cnt: 1024,
                ep_cnt: 256,
                tx_ctx_cnt: 256,
                rx_ctx_cnt: 256,
                max_ep_tx_ctx: 1,
                max_ep_rx_ctx: 1,
                cntr_cnt: 1024,
                mr_iov_limit: 1,
                caps: FI_LOCAL_COMM,
                // FI_SOURCE_ERR: the sender's address string, NUL included.
                max_err_data: crate::objects::ADDR_STR_LEN + 1,
                mr_cnt: 1 << 16,
                max_cntr_value: u64::MAX,
                max_err_cntr_value: u64::MAX,
                max_xpu_ctx_cnt: crate::xpu::MAX_XPU_CTX,
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
}

impl Provider for ShmProvider {
    fn name(&self) -> &'static str {
        NAME
    }
    fn version(&self) -> u32 {
        VERSION
    }
    fn offers(&self) -> Vec<Info> {
        vec![self.offer(FI_PROGRESS_MANUAL), self.offer(FI_PROGRESS_AUTO)]
    }
    fn resolve(&self, mut offer: Info, req: &Request<'_>) -> Result<Info> {
        if let Some(f) = offer.fabric_attr.as_mut() {
            f.api_version = req.version;
        }
        // A request without explicit progress gets one entry only: MANUAL.
        let asked_progress = req
            .hints
            .and_then(|h| h.domain_attr.as_ref())
            .map_or(FI_PROGRESS_UNSPEC, |d| d.data_progress);
        if asked_progress == FI_PROGRESS_UNSPEC
            && offer.domain_attr.as_ref().is_some_and(|d| d.data_progress == FI_PROGRESS_AUTO)
        {
            return Err(rfabric_core::error::ENODATA);
        }
        crate::xpu::resolve(&mut offer, req);
        resolve_addrs(&mut offer, req)?;
        // FI_SOURCE_ERR turns receives from senders outside the AV into error
        // completions: only when the application asked for it.
        if req.hints.map_or(0, |h| h.caps) & FI_SOURCE_ERR == 0 {
            offer.caps &= !FI_SOURCE_ERR;
            if let Some(rx) = offer.rx_attr.as_mut() {
                rx.caps &= !FI_SOURCE_ERR;
            }
        }
        // Registration modes the application asks for are honoured (the
        // provider needs none of them itself): FI_MR_LOCAL (descriptors are
        // required), FI_MR_VIRT_ADDR, FI_MR_PROV_KEY, FI_MR_ALLOCATED.
        if req.version >= fi_version(1, 5) {
            let asked = req.hints.and_then(|h| h.domain_attr.as_ref()).map_or(0, |d| d.mr_mode);
            let keep = (FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED) as i32;
            if asked == FI_MR_BASIC as i32 {
                // The old spelling: virtual addresses and provider keys.
                if let Some(d) = offer.domain_attr.as_mut() {
                    d.mr_mode = asked;
                }
            } else if asked != FI_MR_SCALABLE as i32 {
                if let Some(d) = offer.domain_attr.as_mut() {
                    d.mr_mode |= asked & keep;
                }
            }
        }
        Ok(offer)
    }
    fn fabric(&self, _attr: &FabricAttr) -> Result<Box<dyn Fabric>> {
        Ok(Box::new(ShmFabric))
    }
}

/// Addresses of a `fi_getinfo` answer, as fi_getinfo(3) gives them:
/// addresses from the hints are kept; `node`/`service` name the
/// destination, or the source with `FI_SOURCE`. A named shm endpoint is
/// `fi_shm://<node>:<service>` (or `<node>` or `<service>` alone), the name
/// an endpoint opened with that source address takes; a node that is a
/// `fi_shm://` address is used as it is. Without a named source, the source
/// is `fi_shm://` alone: the endpoint gets an address of its own when it is
/// opened.
fn resolve_addrs(offer: &mut Info, req: &Request<'_>) -> Result<()> {
    let hints = req.hints;
    offer.src_addr = hints.and_then(|h| h.src_addr.clone());
    offer.dest_addr = hints.and_then(|h| h.dest_addr.clone());
    let source = req.flags & FI_SOURCE != 0;
    let prefix = crate::objects::ADDR_PREFIX;
    let as_addr = |name: &str| format!("{prefix}{name}\0").into_bytes();
    // A node that is a shm address already is taken as it is.
    if let Some(addr) = req.node.filter(|n| n.starts_with(prefix)) {
        let slot = if source { &mut offer.src_addr } else { &mut offer.dest_addr };
        slot.get_or_insert_with(|| format!("{addr}\0").into_bytes());
        offer.src_addr.get_or_insert_with(|| as_addr(""));
        return Ok(());
    }
    let named = match (req.node, req.service) {
        (None, None) => None,
        // A source node alone is this host, not an endpoint on it (as an
        // IP address without a port): the endpoint gets its own address.
        (Some(_), None) if source => None,
        (Some(n), None) => Some(n.to_string()),
        (None, Some(s)) => Some(s.to_string()),
        (Some(n), Some(s)) => Some(format!("{n}:{s}")),
    };
    if let Some(name) = &named {
        if !crate::segment::valid_ep_name(name) {
            rfabric_core::fi_info!(
                NAME,
                FI_LOG_CORE,
                "node/service {:?} cannot name a shm endpoint (1-{} of A-Za-z0-9._:-)",
                name,
                crate::segment::EP_NAME_MAX
            );
            return Err(rfabric_core::error::ENODATA);
        }
    }
    match named {
        Some(name) if source => {
            offer.src_addr.get_or_insert_with(|| as_addr(&name));
        }
        Some(name) => {
            offer.dest_addr.get_or_insert_with(|| as_addr(&name));
        }
        None => {}
    }
    offer.src_addr.get_or_insert_with(|| as_addr(""));
    Ok(())
}

pub struct ShmFabric;

impl Fabric for ShmFabric {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
    unsafe fn domain(&self, info: &Info) -> Result<Box<dyn rfabric_core::provider::Domain>> {
        // SAFETY: the caller keeps the threading model of `info`
        // (`Fabric::domain` contract), which is what this constructor asks.
        Ok(Box::new(unsafe { crate::objects::ShmDomain::with_app_threading(info) }?))
    }
}

/// The providers this crate contributes to the table. Their settings are
/// registered here, so that `fi_getparams` lists them once the table exists.
pub fn providers() -> Vec<Box<dyn Provider>> {
    crate::settings::define();
    vec![Box::new(ShmProvider)]
}
