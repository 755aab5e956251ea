//! The `tcp` provider's entry in the provider table: `FI_EP_RDM` on one
//! domain per interface address (or the one `FI_TCP_IFACE` names), each
//! offered with manual and with automatic progress; node and service are
//! resolved as for rudp (IP providers' rules). `FI_EP_MSG` offers, their
//! domains and passive endpoints are `crate::msg`'s. The offers, their
//! resolution and the objects are the engine's (`rfabric_rudp::provider`,
//! `rfabric_rudp::objects`); what is this provider's own is the device.

use crate::device::{ConnConfig, ConnDevice};
use crate::settings::Settings;
use crate::tcp::TcpTransport;
use rfabric_core::abi::*;
use rfabric_core::error::Result;
use rfabric_core::info::{FabricAttr, Info};
use rfabric_core::provider::{Domain, Fabric, PassiveEndpoint, Provider, Request};
use rfabric_rudp::device::Device;
use rfabric_rudp::objects::{RdmDevices, RdmDomain, RdmLimits};
use std::any::Any;
use std::net::SocketAddr;
use std::time::Duration;

pub const NAME: &str = "tcp";
pub const VERSION: u32 = fi_version(FI_MAJOR_VERSION, FI_MINOR_VERSION);

pub struct TcpProvider;

impl Provider for TcpProvider {
    fn name(&self) -> &'static str {
        NAME
    }
    fn version(&self) -> u32 {
        VERSION
    }
    fn offers(&self) -> Vec<Info> {
        let ifs = rfabric_rudp::provider::interfaces_named(Settings::read().iface, NAME, "FI_TCP_IFACE");
        let mut v = Vec::new();
        for ifa in &ifs {
            for progress in [FI_PROGRESS_MANUAL, FI_PROGRESS_AUTO] {
                v.push(rfabric_rudp::provider::rdm_offer(ifa, progress, NAME, FI_PROTO_SOCK_TCP));
            }
        }
        v.extend(ifs.iter().map(crate::msg::offer));
        v
    }
    fn resolve(&self, offer: Info, req: &Request<'_>) -> Result<Info> {
        if offer.ep_type() == FI_EP_MSG {
            return crate::msg::resolve(offer, req);
        }
        rfabric_rudp::provider::resolve_rdm(offer, req)
    }
    fn fabric(&self, _attr: &FabricAttr) -> Result<Box<dyn Fabric>> {
        Ok(Box::new(TcpFabric))
    }
}

pub struct TcpFabric;

impl Fabric for TcpFabric {
    fn as_any(&self) -> &dyn Any {
        self
    }
    unsafe fn domain(&self, info: &Info) -> Result<Box<dyn Domain>> {
        if info.ep_type() == FI_EP_MSG {
            return Ok(Box::new(crate::msg::MsgDomain::new(info)?));
        }
        Ok(Box::new(RdmDomain::new(info, TcpDevices { settings: Settings::read() })?))
    }
    fn passive_ep(&self, info: &Info) -> Result<Box<dyn PassiveEndpoint>> {
        crate::msg::passive_ep(info)
    }
}

/// A `ConnDevice` over a TCP listener per endpoint.
pub struct TcpDevices {
    pub settings: Settings,
}

impl RdmDevices for TcpDevices {
    type Dev = ConnDevice<TcpTransport>;
    fn prov(&self) -> &'static str {
        NAME
    }
    fn limits(&self) -> RdmLimits {
        let s = &self.settings;
        RdmLimits {
            medium_max: s.medium_max,
            unexpected_max: s.unexpected_max,
            // A medium message over 32 KiB leads with a packet the
            // receiver matches before it reads the rest, which then goes
            // straight into the receive (`crate::tcp::LEAD`).
            lead: crate::tcp::LEAD,
            lead_above: crate::tcp::LEAD_ABOVE,
            linger: Duration::from_millis(s.linger_ms),
        }
    }
    fn open(&self, bind: SocketAddr) -> Result<Self::Dev> {
        let s = &self.settings;
        let t = TcpTransport::bind(bind, s.max_packet)?;
        let cfg = ConnConfig { peer_timeout: Duration::from_millis(s.peer_timeout_ms), max_inflight_bytes: s.inflight_bytes.max(s.max_packet), complete_on_write: true, unwatch_hot: true, ..ConnConfig::default() };
        let dev = ConnDevice::new(t, cfg)?;
        rfabric_core::fi_info!(NAME, FI_LOG_EP_CTRL, "endpoint listening on {} (packets up to {} bytes)", dev.transport().local_addr(), dev.max_packet());
        Ok(dev)
    }
}

/// The providers this crate contributes to the table.
pub fn providers() -> Vec<Box<dyn Provider>> {
    crate::settings::define();
    vec![Box::new(TcpProvider)]
}
