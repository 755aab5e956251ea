//! The `rudp` provider's entry in the provider table: one domain per
//! interface address (or the one `FI_RUDP_IFACE` names), each offered
//! with manual and with automatic progress, and `fi_getinfo`'s node and
//! service resolved as IP providers do.

#![forbid(unsafe_code)]

use crate::sys::IfAddr;
use rfabric_core::abi::*;
use rfabric_core::error::{Result, ENODATA};
use rfabric_core::info::{DomainAttr, EpAttr, FabricAttr, Info};
use rfabric_core::provider::{Fabric, Provider, Request};
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};

/// The provider's name. Not prefixed by any name of Open MPI's default
/// exclude list (`shm,sockets,tcp,udp,rstream,usnic,net`, matched as
/// prefixes), so its ofi MTL selects it without `mtl_ofi_provider_include`.
pub const NAME: &str = "rudp";
pub const VERSION: u32 = fi_version(FI_MAJOR_VERSION, FI_MINOR_VERSION);
pub const INJECT_SIZE: usize = 4096;

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
    | FI_DIRECTED_RECV
    | FI_LOCAL_COMM
    | FI_REMOTE_COMM;

/// Messages keep their order per peer (message ids); atomics travel in the
/// same order and run one at a time at the target.
const MSG_ORDER: u64 = FI_ORDER_SAS;
const ATOMIC_ORDER: u64 = FI_ORDER_ATOMIC_RAR | FI_ORDER_ATOMIC_RAW | FI_ORDER_ATOMIC_WAR | FI_ORDER_ATOMIC_WAW;

/// The interfaces to offer: the one named by `FI_RUDP_IFACE` (by name or
/// address), else all that are up, non-loopback first.
pub fn chosen_interfaces() -> Vec<IfAddr> {
    interfaces_named(crate::settings::Settings::read().iface, NAME, "FI_RUDP_IFACE")
}

/// The interfaces named by `want` (a name or an address; `var` is the
/// setting it came from, for the log), else all that are up, non-loopback
/// first.
pub fn interfaces_named(want: Option<String>, prov: &str, var: &str) -> Vec<IfAddr> {
    let all = crate::sys::interfaces();
    let mut v: Vec<IfAddr> = match &want {
        Some(w) => all.into_iter().filter(|i| &i.name == w || i.addr.to_string() == *w).collect(),
        None => all,
    };
    if v.is_empty() {
        if let Some(w) = want {
            rfabric_core::fi_info!(prov, FI_LOG_CORE, "{}={} names no interface that is up", var, w);
        }
    }
    v.sort_by_key(|i| (i.loopback, i.addr.is_ipv6()));
    v
}

/// The MTU of the interface holding `ip`.
pub fn mtu_for(ip: &IpAddr) -> Option<usize> {
    crate::sys::interfaces().into_iter().find(|i| &i.addr == ip).and_then(|i| i.mtu)
}

pub struct RudpProvider;

fn offer(ifa: &IfAddr, progress: fi_progress) -> Info {
    rdm_offer(ifa, progress, NAME, FI_PROTO_UDP)
}

/// The `FI_EP_RDM` offer of a provider on the protocol engine, on one
/// interface address: what the engine gives (`CAPS`, its orders and limits).
pub fn rdm_offer(ifa: &IfAddr, progress: fi_progress, name: &str, protocol: u32) -> Info {
    let tx = fi_tx_attr {
        caps: CAPS & !(FI_RECV | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_MULTI_RECV | FI_DIRECTED_RECV | FI_SOURCE | FI_LOCAL_COMM | FI_REMOTE_COMM),
        mode: 0,
        op_flags: 0,
        msg_order: MSG_ORDER | ATOMIC_ORDER,
        comp_order: FI_ORDER_NONE,
        inject_size: INJECT_SIZE,
        size: 1024,
        iov_limit: crate::engine::IOV_MAX,
        rma_iov_limit: 1,
        tclass: 0,
    };
    let rx = fi_rx_attr {
        caps: CAPS & !(FI_SEND | FI_READ | FI_WRITE | FI_LOCAL_COMM | FI_REMOTE_COMM),
        mode: 0,
        op_flags: 0,
        msg_order: MSG_ORDER | ATOMIC_ORDER,
        comp_order: FI_ORDER_NONE,
        total_buffered_recv: 0,
        size: 1024,
        iov_limit: crate::engine::IOV_MAX,
    };
    let v6 = ifa.addr.is_ipv6();
    Info {
        caps: CAPS,
        mode: 0,
        addr_format: if v6 { FI_SOCKADDR_IN6 } else { FI_SOCKADDR_IN },
        src_addr: Some(crate::sockaddr::to_bytes(&SocketAddr::new(ifa.addr, 0))),
        tx_attr: Some(tx),
        rx_attr: Some(rx),
        ep_attr: Some(EpAttr {
            ep_type: FI_EP_RDM,
            protocol,
            protocol_version: 1,
            max_msg_size: usize::MAX >> 1,
            max_order_raw_size: 0,
            max_order_war_size: 0,
            max_order_waw_size: 0,
            mem_tag_format: 0xaaaa_aaaa_aaaa_aaaa,
            tx_ctx_cnt: 1,
            rx_ctx_cnt: 1,
            ..EpAttr::default()
        }),
        domain_attr: Some(ip_domain_attr(&ifa.name, progress, progress)),
        fabric_attr: Some(FabricAttr {
            name: Some(name.to_string()),
            prov_name: Some(name.to_string()),
            prov_version: VERSION,
            api_version: VERSION,
            fabric: 0,
        }),
        ..Info::default()
    }
}

/// `FI_EP_DGRAM`: a message is one datagram of the interface's size.
fn dgram_offer(ifa: &IfAddr) -> Info {
    let mut o = offer(ifa, FI_PROGRESS_MANUAL);
    let max = crate::settings::Settings::read().max_datagram(ifa.mtu, ifa.addr.is_ipv6());
    let caps = FI_MSG | FI_SEND | FI_RECV | FI_SOURCE | FI_LOCAL_COMM | FI_REMOTE_COMM;
    o.caps = caps;
    if let Some(t) = o.tx_attr.as_mut() {
        t.caps = FI_MSG | FI_SEND;
        t.msg_order = FI_ORDER_NONE;
        t.inject_size = max;
        t.rma_iov_limit = 0;
    }
    if let Some(r) = o.rx_attr.as_mut() {
        r.caps = FI_MSG | FI_RECV | FI_SOURCE;
        r.msg_order = FI_ORDER_NONE;
    }
    if let Some(e) = o.ep_attr.as_mut() {
        e.ep_type = FI_EP_DGRAM;
        e.max_msg_size = max;
        e.mem_tag_format = 0;
    }
    if let Some(d) = o.domain_attr.as_mut() {
        // No header on the wire: no remote CQ data.
        d.cq_data_size = 0;
    }
    o
}

/// The domain attributes of one interface's domain, as the IP providers
/// (rudp, and tcp's `FI_EP_MSG`) offer it.
pub fn ip_domain_attr(name: &str, control_progress: u32, data_progress: u32) -> DomainAttr {
    DomainAttr {
        name: Some(name.to_string()),
        threading: FI_THREAD_SAFE,
        control_progress,
        data_progress,
        resource_mgmt: FI_RM_ENABLED,
        av_type: FI_AV_UNSPEC,
        mr_mode: 0,
        mr_key_size: 8,
        cq_data_size: 8,
        cq_cnt: 1024,
        ep_cnt: 1024,
        tx_ctx_cnt: 1024,
        rx_ctx_cnt: 1024,
        max_ep_tx_ctx: 1,
        max_ep_rx_ctx: 1,
        cntr_cnt: 1024,
        mr_iov_limit: 1,
        caps: FI_LOCAL_COMM | FI_REMOTE_COMM,
        mr_cnt: 1 << 16,
        max_cntr_value: u64::MAX,
        max_err_cntr_value: u64::MAX,
        ..DomainAttr::default()
    }
}

impl Provider for RudpProvider {
    fn name(&self) -> &'static str {
        NAME
    }
    fn version(&self) -> u32 {
        VERSION
    }
    fn offers(&self) -> Vec<Info> {
        let mut v = Vec::new();
        let ifs = chosen_interfaces();
        for ifa in &ifs {
            v.push(offer(ifa, FI_PROGRESS_MANUAL));
            v.push(offer(ifa, FI_PROGRESS_AUTO));
        }
        for ifa in &ifs {
            v.push(dgram_offer(ifa));
        }
        v
    }
    fn resolve(&self, offer: Info, req: &Request<'_>) -> Result<Info> {
        resolve_rdm(offer, req)
    }
    fn fabric(&self, _attr: &FabricAttr) -> Result<Box<dyn Fabric>> {
        Ok(Box::new(crate::objects::RudpFabric))
    }
}

/// `Provider::resolve` of the engine's offers on IP addresses: the
/// attributes (`resolve_rdm_attrs`) and the addresses (`resolve_addrs`).
pub fn resolve_rdm(offer: Info, req: &Request<'_>) -> Result<Info> {
    let mut offer = resolve_rdm_attrs(offer, req)?;
    resolve_addrs(&mut offer, req)?;
    Ok(offer)
}

/// The attributes of an engine offer as asked for: the API version,
/// automatic progress only when asked for, the `FI_MR_*` bits the
/// application takes on.
pub fn resolve_rdm_attrs(mut offer: Info, req: &Request<'_>) -> Result<Info> {
    if let Some(f) = offer.fabric_attr.as_mut() {
        f.api_version = req.version;
    }
    let asked_progress = req.hints.and_then(|h| h.domain_attr.as_ref()).map_or(FI_PROGRESS_UNSPEC, |d| d.data_progress);
    if asked_progress == FI_PROGRESS_UNSPEC && offer.domain_attr.as_ref().is_some_and(|d| d.data_progress == FI_PROGRESS_AUTO) {
        return Err(ENODATA);
    }
    if req.version >= fi_version(1, 5) {
        let asked = req.hints.and_then(|h| h.domain_attr.as_ref()).map_or(0, |d| d.mr_mode);
        let keep = (FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_PROV_KEY | FI_MR_ALLOCATED) as i32;
        if let Some(d) = offer.domain_attr.as_mut() {
            if asked == FI_MR_BASIC as i32 {
                d.mr_mode = asked;
            } else if asked != FI_MR_SCALABLE as i32 {
                d.mr_mode |= asked & keep;
            }
        }
    }
    Ok(offer)
}

fn lookup(node: &str, port: u16, v6: bool) -> Vec<SocketAddr> {
    let host = node.trim_start_matches('[').trim_end_matches(']');
    (host, port).to_socket_addrs().map(|it| it.filter(|a| a.is_ipv6() == v6).collect()).unwrap_or_default()
}

fn parse_port(service: Option<&str>) -> Result<u16> {
    match service {
        None => Ok(0),
        Some(s) => s.parse::<u16>().map_err(|_| {
            rfabric_core::fi_info!(NAME, FI_LOG_CORE, "service {:?} is not a port number", s);
            ENODATA
        }),
    }
}

/// Addresses as fi_getinfo(3) gives them for IP providers: with
/// `FI_SOURCE`, node and service name the local address (the node must be
/// this offer's interface); otherwise they name the destination. An
/// address in the hints is kept when it fits the offer's interface.
pub fn resolve_addrs(offer: &mut Info, req: &Request<'_>) -> Result<()> {
    let v6 = offer.addr_format == FI_SOCKADDR_IN6;
    let ours = offer.src_addr.as_deref().and_then(crate::sockaddr::from_bytes_any).ok_or(ENODATA)?;
    if let Some(h) = req.hints {
        if let Some(src) = h.src_addr.as_deref() {
            let a = crate::sockaddr::from_bytes_any(src).ok_or(ENODATA)?;
            if a.ip() != ours.ip() && !a.ip().is_unspecified() {
                return Err(ENODATA);
            }
            offer.src_addr = Some(crate::sockaddr::to_bytes(&SocketAddr::new(ours.ip(), a.port())));
        }
        if let Some(dst) = h.dest_addr.as_deref() {
            let a = crate::sockaddr::from_bytes(dst).ok_or(ENODATA)?;
            if a.is_ipv6() != v6 {
                return Err(ENODATA);
            }
            offer.dest_addr = Some(dst.to_vec());
        }
    }
    let port = parse_port(req.service)?;
    let source = req.flags & FI_SOURCE != 0;
    match (req.node, source) {
        (Some(node), true) => {
            let ips = lookup(node, 1, v6);
            if !ips.iter().any(|a| a.ip() == ours.ip()) {
                return Err(ENODATA);
            }
            offer.src_addr = Some(crate::sockaddr::to_bytes(&SocketAddr::new(ours.ip(), port)));
        }
        (None, _) => {
            if req.service.is_some() {
                offer.src_addr = Some(crate::sockaddr::to_bytes(&SocketAddr::new(ours.ip(), port)));
            }
        }
        (Some(node), false) => {
            if port == 0 {
                rfabric_core::fi_info!(NAME, FI_LOG_CORE, "a destination node needs a service (port)");
                return Err(ENODATA);
            }
            let Some(a) = lookup(node, port, v6).into_iter().next() else { return Err(ENODATA) };
            offer.dest_addr = Some(crate::sockaddr::to_bytes(&a));
        }
    }
    Ok(())
}

/// The providers this crate contributes to the table.
pub fn providers() -> Vec<Box<dyn Provider>> {
    crate::settings::define();
    vec![Box::new(RudpProvider)]
}
