//! Which domains the machine has: every port of an RDMA device (InfiniBand
//! or RoCE) whose link is active, with the addresses it is reached by.
//! Ports that are not active, devices this provider does not drive (EFA,
//! iWARP) and a missing libibverbs each give one line at
//! `FI_LOG_LEVEL=info` and no domain; nothing here fails `fi_getinfo`.
//!
//! `plan` is the decision, on plain data (`DeviceView`), so it is tested
//! without devices; `probe` gathers that data through libibverbs (or the
//! stand-in in tests).
#![forbid(unsafe_code)]

use crate::addr::{gid_ip, Addr, DEFAULT_PKEY};
use rfabric_ibverbs::{LinkLayer, Mtu, NodeType, PortState, Transport, Verbs};
use std::net::IpAddr;

/// One port, as discovery needs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortView {
    pub port: u8,
    pub state: PortState,
    pub link_layer: LinkLayer,
    pub lid: u16,
    pub active_mtu: Mtu,
    pub max_msg_sz: u32,
    /// The GID table (unused entries are all zeros).
    pub gids: Vec<[u8; 16]>,
}

/// One device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceView {
    pub name: String,
    pub node_type: NodeType,
    pub transport: Transport,
    pub efa: bool,
    pub phys_port_cnt: u8,
    /// Each port, or why it could not be queried.
    pub ports: Vec<Result<PortView, String>>,
}

/// A domain: one active port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DomainSpec {
    /// `mlx5_0`, or `mlx5_0-<port>` on a device with several ports.
    pub name: String,
    pub device: String,
    pub port: u8,
    pub link_layer: LinkLayer,
    pub mtu: Option<u32>,
    pub max_msg_sz: u32,
    /// In offer order: IPv4, IPv6, then InfiniBand.
    pub addrs: Vec<Addr>,
}

/// What a probe found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Probe {
    /// libibverbs could not be loaded.
    NoLibrary(String),
    /// The device list could not be read.
    Error(String),
    /// The domains (possibly none), and a line for everything left out.
    Found { domains: Vec<DomainSpec>, notes: Vec<String> },
}

impl Probe {
    pub fn domains(&self) -> &[DomainSpec] {
        match self {
            Probe::Found { domains, .. } => domains,
            _ => &[],
        }
    }

    /// The lines `fi_getinfo` logs at info level: what was left out and
    /// why, and what was found.
    pub fn lines(&self) -> Vec<String> {
        match self {
            Probe::NoLibrary(why) => vec![format!("no verbs domains: rdma-core's libibverbs is not available ({why})")],
            Probe::Error(e) => vec![format!("no verbs domains: the RDMA device list could not be read ({e})")],
            Probe::Found { domains, notes } => {
                // With nothing offered, one line says all of why.
                if domains.is_empty() && notes.is_empty() {
                    return vec!["no verbs domains: libibverbs found no RDMA device".into()];
                } else if domains.is_empty() {
                    return vec![format!("no verbs domains: {}", notes.join("; "))];
                }
                let mut v = notes.clone();
                for d in domains {
                    let formats: Vec<String> = d.addrs.iter().map(|a| format!("{a:?}")).collect();
                    v.push(format!("verbs domain {} (device {} port {}, {:?}): {}", d.name, d.device, d.port, d.link_layer, formats.join(", ")));
                }
                v
            }
        }
    }
}

/// The domains `devs` give. `ipoib` answers the IP addresses of the IPoIB
/// interfaces over an InfiniBand port, by its GID 0.
pub fn plan(devs: &[DeviceView], ipoib: &dyn Fn(&[u8; 16]) -> Vec<IpAddr>) -> (Vec<DomainSpec>, Vec<String>) {
    let mut domains = Vec::new();
    let mut notes = Vec::new();
    for d in devs {
        if d.efa {
            notes.push(format!("{}: an EFA device (no reliable-connected queue pairs), left to the efa entry", d.name));
            continue;
        }
        if d.transport != Transport::Ib {
            notes.push(format!("{}: transport {:?} is not driven by this provider (InfiniBand and RoCE only)", d.name, d.transport));
            continue;
        }
        for p in &d.ports {
            let p = match p {
                Ok(p) => p,
                Err(e) => {
                    notes.push(format!("{}: a port could not be queried ({e})", d.name));
                    continue;
                }
            };
            if p.state != PortState::Active {
                notes.push(format!("{} port {}: link not active ({:?}), no domain", d.name, p.port, p.state));
                continue;
            }
            let mut addrs: Vec<Addr> = Vec::new();
            let mut push = |a: Addr| {
                if !addrs.contains(&a) {
                    addrs.push(a);
                }
            };
            match p.link_layer {
                LinkLayer::Ethernet => {
                    for g in &p.gids {
                        if let Some(ip) = gid_ip(g) {
                            push(Addr::Ip(ip));
                        }
                    }
                }
                LinkLayer::InfiniBand | LinkLayer::Unspecified => {
                    if let Some(g0) = p.gids.first().filter(|g| g.iter().any(|&b| b != 0)) {
                        for ip in ipoib(g0) {
                            push(Addr::Ip(ip));
                        }
                        push(Addr::Ib { gid: *g0, pkey: DEFAULT_PKEY });
                    }
                }
                LinkLayer::Other(_) => {}
            }
            if addrs.is_empty() {
                notes.push(format!("{} port {}: active, but no address (no IP-based GID or IPoIB address, no GID 0), no domain", d.name, p.port));
                continue;
            }
            addrs.sort_by_key(|a| a.format());
            let name = if d.phys_port_cnt > 1 { format!("{}-{}", d.name, p.port) } else { d.name.clone() };
            domains.push(DomainSpec {
                name,
                device: d.name.clone(),
                port: p.port,
                link_layer: p.link_layer,
                mtu: p.active_mtu.bytes(),
                max_msg_sz: p.max_msg_sz,
                addrs,
            });
        }
    }
    (domains, notes)
}

/// Every device through `verbs`: opened, every port queried with its GID
/// table.
pub fn views(verbs: &Verbs) -> Result<Vec<DeviceView>, String> {
    let devs = verbs.devices().map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for d in devs {
        let efa = d.is_efa();
        let mut view = DeviceView { name: d.name.clone(), node_type: d.node_type, transport: d.transport, efa, phys_port_cnt: 0, ports: Vec::new() };
        if efa || d.transport != Transport::Ib {
            out.push(view);
            continue;
        }
        let ctx = match verbs.open_device(&d.name) {
            Ok(c) => c,
            Err(e) => {
                view.ports.push(Err(e.to_string()));
                out.push(view);
                continue;
            }
        };
        let attr = match ctx.query_device() {
            Ok(a) => a,
            Err(e) => {
                view.ports.push(Err(e.to_string()));
                out.push(view);
                continue;
            }
        };
        view.phys_port_cnt = attr.phys_port_cnt;
        for port in 1..=attr.phys_port_cnt {
            view.ports.push(ctx.query_port(port).map_err(|e| e.to_string()).map(|a| {
                // The GID table of an active port only (the others get no domain).
                let active = PortState::from_raw(a.state) == PortState::Active;
                let n = if active { u32::try_from(a.gid_tbl_len).unwrap_or(0).min(256) } else { 0 };
                let gids = (0..n).map(|i| ctx.query_gid(port, i as i32).map(|g| g.bytes()).unwrap_or([0; 16])).collect();
                PortView {
                    port,
                    state: PortState::from_raw(a.state),
                    link_layer: LinkLayer::from_raw(a.link_layer),
                    lid: a.lid,
                    active_mtu: Mtu::from_raw(a.active_mtu),
                    max_msg_sz: a.max_msg_sz,
                    gids,
                }
            }));
        }
        out.push(view);
    }
    Ok(out)
}

/// Probes through `verbs` (or says why there is no libibverbs).
pub fn probe(verbs: Result<&Verbs, String>, ipoib: &dyn Fn(&[u8; 16]) -> Vec<IpAddr>) -> Probe {
    let verbs = match verbs {
        Ok(v) => v,
        Err(why) => return Probe::NoLibrary(why),
    };
    match views(verbs) {
        Ok(v) => {
            let (domains, notes) = plan(&v, ipoib);
            Probe::Found { domains, notes }
        }
        Err(e) => Probe::Error(e),
    }
}
