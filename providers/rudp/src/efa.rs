//! The `efa` provider entry: domains for EFA hardware, found through
//! rdma-core loaded at run time (`rfabric-ibverbs`). Where libibverbs is
//! absent, or present with no EFA device (every machine this project has
//! run on), it offers nothing and says why once at `FI_LOG_LEVEL=info`;
//! `fi_getinfo` for other providers is unaffected.
//!
//! Where EFA devices are found, each is one `FI_EP_RDM` domain named
//! `<device>-rdm` (offered with manual and with automatic progress,
//! protocol `FI_PROTO_EFA`, addresses `FI_ADDR_EFA`), whose endpoints run
//! the protocol engine over the EFA device (`efadev`: one SRD queue pair
//! each), and over shared memory for peers on this host unless
//! `FI_EFA_ENABLE_SHM_TRANSFER=0` (`local`), through `efadom`. Node and
//! service of `fi_getinfo` name nothing here (EFA addresses have no
//! names): an application exchanges `fi_getname` addresses itself, or
//! passes them as `hints->dest_addr`.
//! Nothing of it has run on EFA hardware: it is tested on
//! `rfabric-ibverbs`' stand-in only.

#![forbid(unsafe_code)]

use rfabric_core::abi::*;
use rfabric_core::error::{Result, ENODATA};
use rfabric_core::info::{FabricAttr, Info};
use rfabric_core::net::IfAddr;
use rfabric_core::provider::{Fabric, Provider, Request};
use rfabric_ibverbs::{LibNames, Verbs};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::OnceLock;

pub const NAME: &str = "efa";

/// What a probe of the machine found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Probe {
    /// libibverbs could not be loaded.
    NoLibrary(String),
    /// libibverbs loaded; no device is an EFA device (names of the others).
    NoDevice(Vec<String>),
    /// EFA devices, by name.
    Devices(Vec<String>),
    /// The device list could not be read.
    Error(String),
}

/// Probes with the given library names (the product uses the defaults).
pub fn probe_with(names: Option<&LibNames>) -> Probe {
    let v = match names {
        Some(n) => Verbs::load_from(n),
        None => Verbs::load(),
    };
    match v {
        Ok(v) => probe_verbs(&v),
        Err(e) => Probe::NoLibrary(e.to_string()),
    }
}

/// Probes a loaded libibverbs (the real one, or a test's stand-in).
pub fn probe_verbs(verbs: &Verbs) -> Probe {
    match verbs.devices() {
        Ok(devs) => {
            let (efa, other): (Vec<_>, Vec<_>) = devs.into_iter().partition(|d| d.is_efa());
            if efa.is_empty() {
                Probe::NoDevice(other.into_iter().map(|d| d.name).collect())
            } else {
                Probe::Devices(efa.into_iter().map(|d| d.name).collect())
            }
        }
        Err(e) => Probe::Error(e.to_string()),
    }
}

/// The line `fi_getinfo` logs for a probe result.
pub fn describe(p: &Probe) -> String {
    match p {
        Probe::NoLibrary(why) => format!("no EFA domains: rdma-core's libibverbs is not available ({why})"),
        Probe::NoDevice(others) if others.is_empty() => "no EFA domains: libibverbs found no RDMA device".to_string(),
        Probe::NoDevice(others) => format!("no EFA domains: no EFA device among {}", others.join(", ")),
        Probe::Devices(d) => format!("EFA devices {} found: one FI_EP_RDM domain each (not yet run on EFA hardware; rudp carries the same protocol over UDP)", d.join(", ")),
        Probe::Error(e) => format!("no EFA domains: the device list could not be read ({e})"),
    }
}

/// The suffix of the domain name of a device (`efa_0-rdm`).
pub const DOMAIN_SUFFIX: &str = "-rdm";

/// The `FI_EP_RDM` offer of one EFA device.
pub fn offer(device: &str, progress: fi_progress) -> Info {
    let ifa = IfAddr { name: format!("{device}{DOMAIN_SUFFIX}"), addr: IpAddr::V4(Ipv4Addr::UNSPECIFIED), loopback: false, mtu: None };
    let mut o = crate::provider::rdm_offer(&ifa, progress, NAME, FI_PROTO_EFA);
    o.addr_format = FI_ADDR_EFA;
    o.src_addr = None;
    o
}

/// The probe of this process's libibverbs, and the library.
struct System {
    probe: Probe,
    verbs: Option<Verbs>,
}

static SYSTEM: OnceLock<System> = OnceLock::new();

/// The `efa` entry: the system's libibverbs, or a given one (tests: the
/// stand-in), probed at every `offers`.
pub struct EfaProvider {
    given: Option<Verbs>,
}

impl EfaProvider {
    pub fn system() -> EfaProvider {
        EfaProvider { given: None }
    }

    /// Over the given libibverbs (tests: the stand-in).
    pub fn with_verbs(verbs: Verbs) -> EfaProvider {
        EfaProvider { given: Some(verbs) }
    }

    fn state(&self) -> (Probe, Option<Verbs>) {
        if let Some(v) = &self.given {
            return (probe_verbs(v), Some(v.clone()));
        }
        let s = SYSTEM.get_or_init(|| {
            let verbs = Verbs::load();
            let probe = match &verbs {
                Ok(v) => probe_verbs(v),
                Err(e) => Probe::NoLibrary(e.to_string()),
            };
            rfabric_core::fi_info!(NAME, FI_LOG_CORE, "{}", describe(&probe));
            System { probe, verbs: verbs.ok() }
        });
        (s.probe.clone(), s.verbs.clone())
    }
}

impl Provider for EfaProvider {
    fn name(&self) -> &'static str {
        NAME
    }
    fn version(&self) -> u32 {
        crate::provider::VERSION
    }
    fn offers(&self) -> Vec<Info> {
        let (Probe::Devices(devs), Some(_)) = self.state() else { return Vec::new() };
        devs.iter().flat_map(|d| [offer(d, FI_PROGRESS_MANUAL), offer(d, FI_PROGRESS_AUTO)]).collect()
    }
    fn resolve(&self, mut offer: Info, req: &Request<'_>) -> Result<Info> {
        offer = crate::provider::resolve_rdm_attrs(offer, req)?;
        if let Some(d) = req.hints.and_then(|h| h.dest_addr.as_deref()) {
            if crate::efadev::parse_name(d).is_none() {
                return Err(ENODATA);
            }
            offer.dest_addr = Some(d.to_vec());
        }
        Ok(offer)
    }
    fn fabric(&self, attr: &FabricAttr) -> Result<Box<dyn Fabric>> {
        let (Probe::Devices(devices), Some(verbs)) = self.state() else {
            rfabric_core::fi_info!(NAME, FI_LOG_FABRIC, "fi_fabric: no EFA domains on this machine");
            return Err(ENODATA);
        };
        if attr.name.as_deref().is_some_and(|n| n != NAME) {
            return Err(rfabric_core::error::EINVAL);
        }
        Ok(Box::new(crate::efadom::EfaFabric { verbs, devices, settings: crate::settings::EfaSettings::read() }))
    }
}

pub fn providers() -> Vec<Box<dyn Provider>> {
    crate::settings::define_efa();
    vec![Box::new(EfaProvider::system())]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_library_is_a_clean_no_library_probe() {
        let names = LibNames { verbs: "libibverbs-not-here.so.1".into(), efa: Some("libefa-not-here.so.1".into()) };
        let p = probe_with(Some(&names));
        assert!(matches!(&p, Probe::NoLibrary(why) if why.contains("libibverbs-not-here.so.1")), "{p:?}");
        assert!(describe(&p).starts_with("no EFA domains"));
        assert!(EfaProvider::with_verbs(rfabric_ibverbs::Verbs::from_fns(rfabric_ibverbs::standin::verbs_fns(), None)).fabric(&FabricAttr::default()).is_err());
    }

    #[test]
    fn without_libefa_the_probe_still_answers_and_nothing_is_offered() {
        // libibverbs (if installed) with libefa absent: no EFA device here
        // either way, and the reason is a no-domains line.
        let names = LibNames { verbs: "libibverbs.so.1".into(), efa: Some("libefa-not-here.so.1".into()) };
        let p = probe_with(Some(&names));
        assert!(matches!(p, Probe::NoDevice(_) | Probe::NoLibrary(_)), "{p:?}");
        assert!(describe(&p).starts_with("no EFA domains"), "{}", describe(&p));
    }

    #[test]
    fn stand_in_devices_probe_as_no_device_or_efa_devices() {
        use rfabric_ibverbs::standin;
        use rfabric_ibverbs::sys::*;
        // No device at all.
        let v = Verbs::from_fns(standin::verbs_fns(), Some(standin::efa_fns()));
        assert_eq!(probe_verbs(&v), Probe::NoDevice(Vec::new()));
        assert_eq!(describe(&Probe::NoDevice(Vec::new())), "no EFA domains: libibverbs found no RDMA device");
        // A device libefa does not accept is not an EFA device.
        standin::add_device("mlx0", IBV_NODE_CA, IBV_TRANSPORT_IB, "");
        assert_eq!(probe_verbs(&v), Probe::NoDevice(vec!["mlx0".into()]));
        // Once libefa accepts it, it is one.
        standin::with(|w| w.efa_device = true);
        let p = probe_verbs(&v);
        assert_eq!(p, Probe::Devices(vec!["mlx0".into()]));
        assert!(describe(&p).contains("one FI_EP_RDM domain each"), "{}", describe(&p));
        // Without libefa the same device is not recognised as EFA.
        let plain = Verbs::from_fns(standin::verbs_fns(), None);
        assert_eq!(probe_verbs(&plain), Probe::NoDevice(vec!["mlx0".into()]));
    }

    #[test]
    fn the_shared_memory_setting_is_fi_efa_enable_shm_transfer() {
        let _ = providers();
        assert!(rfabric_core::params::is_defined(NAME, "enable_shm_transfer"));
        assert_eq!(rfabric_core::params::env_name(NAME, "enable_shm_transfer"), "FI_EFA_ENABLE_SHM_TRANSFER");
        assert_eq!(crate::settings::EfaSettings::default(), crate::settings::EfaSettings { enable_shm_transfer: true });
    }

    #[test]
    fn this_machine_has_no_efa_device() {
        // Debian's libibverbs1 is installed by the suite; the kernel has no
        // RDMA devices here. With the library absent the probe says so.
        match probe_with(None) {
            Probe::NoDevice(_) | Probe::NoLibrary(_) => {}
            other => panic!("unexpected on a machine without EFA: {other:?}"),
        }
        assert!(EfaProvider::system().offers().is_empty());
    }
}
