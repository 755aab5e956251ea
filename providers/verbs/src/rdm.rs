//! `FI_EP_RDM` on verbs: rudp's protocol engine (`rfabric_rudp::engine`)
//! over a `ConnDevice` (`rfabric_tcp::device`) whose connections are RC
//! queue pairs made by librdmacm (`crate::rc_transport::RcTransport`).
//! Upstream offers this as the layered provider `verbs;ofi_rxm`; here it is
//! the `verbs` entry itself (`fi_info -p verbs` lists `FI_EP_RDM` offers
//! next to the `FI_EP_MSG` ones, provider name `verbs`; hints naming
//! `verbs;ofi_rxm` match it, as layered names match each of their parts).
//!
//! - Offers: per verbs domain, per IP address of its port (RoCE GIDs,
//!   IPoIB), one with manual and one with automatic progress, as the tcp
//!   provider's RDM offers (`rfabric_rudp::provider::rdm_offer`), protocol
//!   `FI_PROTO_RDMA_CM_IB_RC`; none where librdmacm does not load (one
//!   info line). InfiniBand-only addresses (`FI_SOCKADDR_IB`) are not
//!   offered for RDM: the engine's address vector holds IP socket
//!   addresses.
//! - Endpoints: each listens on its own `rdma_cm_id` at its address; a
//!   connection is opened to a peer at the first packet, and the peer
//!   answers on it (`ConnDevice`'s rule; two that start at once open one
//!   each). Every
//!   packet is one `IBV_WR_SEND` from a registered send slot into a
//!   pre-posted receive slot (`PACKET` bytes, `DEPTH` slots each way per
//!   connection); larger messages are the engine's (rendezvous), RMA and
//!   atomics are emulated by the engine in messages.
//! - Memory registration: the RDM domain's (`RdmDomain`: the core's key
//!   registry, `FI_MR_DMABUF` mapped for CPU access). The application's
//!   buffers never meet the adapter: the engine copies them into and out of
//!   the connections' registered slots, so `ibv_reg_mr` of them would pin
//!   memory nothing uses. (The verbs `FI_EP_MSG` domain keeps its own
//!   `ibv_reg_mr` / `ibv_reg_dmabuf_mr` path.)
//!
//! Nothing here has run on RDMA hardware: the tests run two endpoints on
//! `rfabric-ibverbs`' stand-in, whose loopback moves sends between the
//! QPs of one process (`tests_rdm.rs`).

use crate::discovery::{DomainSpec, Probe};
use crate::provider::{VerbsDomain, NAME};
use crate::rc_transport::RcTransport;
use rfabric_core::abi::*;
use rfabric_core::error::{Result, ENODATA};
use rfabric_core::info::Info;
use rfabric_core::net::IfAddr;
use rfabric_core::provider::Domain;
use rfabric_ibverbs::{RdmaCm, Verbs};
use rfabric_rudp::device::Device;
use rfabric_rudp::objects::{RdmDevices, RdmDomain, RdmLimits};
use rfabric_tcp::device::{ConnConfig, ConnDevice};
use std::net::SocketAddr;
use std::sync::OnceLock;
use std::time::Duration;

/// Bytes of one packet (one RC send): engine header and payload.
pub const PACKET: usize = 16384;
/// Send and receive slots of each connection.
pub const DEPTH: usize = 32;
/// Largest message sent without the receiver's clear-to-send.
pub const MEDIUM_MAX: usize = 65536;
/// The transport protocol the offers name.
pub const PROTOCOL: u32 = FI_PROTO_RDMA_CM_IB_RC;

/// librdmacm, loaded once per process (`None` where it is absent).
pub fn system_rdmacm() -> Option<RdmaCm> {
    static CM: OnceLock<Option<RdmaCm>> = OnceLock::new();
    CM.get_or_init(|| match RdmaCm::load() {
        Ok(c) => Some(c),
        Err(e) => {
            rfabric_core::fi_info!(NAME, FI_LOG_CORE, "no FI_EP_RDM offers: librdmacm is not available ({})", e);
            None
        }
    })
    .clone()
}

/// The `FI_EP_RDM` offers of the probed domains.
pub fn offers(p: &Probe) -> Vec<Info> {
    let mut v = Vec::new();
    for d in p.domains() {
        for a in &d.addrs {
            let crate::addr::Addr::Ip(ip) = a else { continue };
            let ifa = IfAddr { name: d.name.clone(), addr: *ip, loopback: false, mtu: None };
            for progress in [FI_PROGRESS_MANUAL, FI_PROGRESS_AUTO] {
                v.push(rfabric_rudp::provider::rdm_offer(&ifa, progress, NAME, PROTOCOL));
            }
        }
    }
    v
}

/// The domain of an `FI_EP_RDM` offer on `spec`.
pub fn domain(verbs: &Verbs, cm: Option<RdmaCm>, spec: &DomainSpec, info: &Info) -> Result<Box<dyn Domain>> {
    let Some(cm) = cm else {
        rfabric_core::fi_warn!(NAME, FI_LOG_DOMAIN, "fi_domain: FI_EP_RDM needs librdmacm, which is not available");
        return Err(ENODATA);
    };
    let dom = VerbsDomain::open(verbs, spec)?;
    Ok(Box::new(RdmDomain::new(info, RcDevices { dom, cm })?))
}

/// An RC transport per endpoint, on the domain's device and protection
/// domain.
pub struct RcDevices {
    dom: VerbsDomain,
    cm: RdmaCm,
}

impl RdmDevices for RcDevices {
    type Dev = ConnDevice<RcTransport>;
    fn prov(&self) -> &'static str {
        NAME
    }
    fn limits(&self) -> RdmLimits {
        RdmLimits { medium_max: MEDIUM_MAX, unexpected_max: 4096, lead: 0, lead_above: 0, linger: Duration::from_secs(2) }
    }
    fn open(&self, bind: SocketAddr) -> Result<Self::Dev> {
        let t = RcTransport::bind(&self.cm, self.dom.context(), self.dom.pd(), bind, PACKET, DEPTH)?;
        // Tokens come back at the peer's acknowledgement: a send slot
        // handed to the adapter is not yet delivered.
        let cfg = ConnConfig { peer_timeout: Duration::from_secs(10), max_inflight_bytes: 4 << 20, complete_on_write: false, ..ConnConfig::default() };
        let dev = ConnDevice::new(t, cfg)?;
        let at = crate::rc_transport::parse_addr(rfabric_tcp::conn::Transport::addr(dev.transport()));
        rfabric_core::fi_info!(NAME, FI_LOG_EP_CTRL, "RDM endpoint listening on {:?} of {} (packets up to {} bytes)", at, self.dom.spec().name, dev.max_packet());
        Ok(dev)
    }
}
