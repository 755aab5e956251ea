//! A library loaded as a DL provider hands its logging and its provider
//! parameters to the libfabric that loaded it (`log::set_host`,
//! `params::set_host`). Both are once per process, so they are tested in
//! this test binary of their own, in one test.

use rfabric_core::abi::*;
use rfabric_core::error::{Result, EINVAL, ENODATA, ENOENT};
use rfabric_core::info::{FabricAttr, Info};
use rfabric_core::params::{self, fi_param_type, Value, CORE, FI_PARAM_BOOL, FI_PARAM_INT, FI_PARAM_SIZE_T};
use rfabric_core::provider::{Fabric, Provider, Renamed};
use std::sync::{Arc, Mutex};

#[derive(Default)]
struct Seen {
    defined: Vec<(String, fi_param_type, String)>,
    lines: Vec<(u32, u32, String)>,
    level: u32,
}

struct ParamHost(Arc<Mutex<Seen>>);

impl params::Host for ParamHost {
    fn prov_name(&self) -> &str {
        "rfhost"
    }
    fn define(&self, name: &str, ty: fi_param_type, help: &str) -> Result<()> {
        self.0.lock().unwrap().defined.push((name.into(), ty, help.into()));
        Ok(())
    }
    fn get(&self, name: &str, ty: fi_param_type) -> Option<Result<Value>> {
        if ty != FI_PARAM_BOOL {
            return None;
        }
        let var = format!("FI_RFHOST_{}", name.to_ascii_uppercase());
        Some(match std::env::var(var) {
            Err(_) => Err(ENODATA),
            Ok(v) => params::parse_bool(&v).map(Value::Bool).ok_or(EINVAL),
        })
    }
}

struct LogHost(Arc<Mutex<Seen>>);

impl rfabric_core::log::Host for LogHost {
    fn enabled(&self, level: fi_log_level, _subsys: fi_log_subsys) -> bool {
        level <= self.0.lock().unwrap().level
    }
    fn emit(&self, level: fi_log_level, subsys: fi_log_subsys, _func: &str, _line: u32, msg: &str) {
        self.0.lock().unwrap().lines.push((level, subsys, msg.into()));
    }
}

struct Inner;
struct NoFabric;
impl Fabric for NoFabric {
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
impl Provider for Inner {
    fn name(&self) -> &'static str {
        "inner"
    }
    fn version(&self) -> u32 {
        7
    }
    fn offers(&self) -> Vec<Info> {
        vec![Info {
            fabric_attr: Some(FabricAttr { prov_name: Some("inner".into()), name: Some("fab".into()), ..FabricAttr::default() }),
            ..Info::default()
        }]
    }
    fn fabric(&self, _attr: &FabricAttr) -> Result<Box<dyn Fabric>> {
        Ok(Box::new(NoFabric))
    }
}

#[test]
fn host_takes_logging_and_provider_parameters() {
    let seen = Arc::new(Mutex::new(Seen { level: FI_LOG_WARN, ..Seen::default() }));

    // Parameters.
    assert!(params::set_host(Box::new(ParamHost(seen.clone()))));
    assert!(!params::set_host(Box::new(ParamHost(seen.clone()))), "a second host is refused");
    params::define("shm", "flag", FI_PARAM_BOOL, "a flag").unwrap();
    params::define("shm", "bytes", FI_PARAM_SIZE_T, "a size").unwrap();
    params::define("shm", "flag", FI_PARAM_BOOL, "again").unwrap();
    params::define(CORE, "corething", FI_PARAM_INT, "the core's").unwrap();
    {
        let s = seen.lock().unwrap();
        let names: Vec<_> = s.defined.iter().map(|d| d.0.as_str()).collect();
        assert_eq!(names, ["flag", "bytes"], "provider parameters go to the host once; core ones stay");
        assert_eq!(s.defined[0].2, "a flag");
    }
    assert_eq!(params::lookup("shm", "flag").unwrap().1, "FI_RFHOST_FLAG");
    assert_eq!(params::lookup("anyprov", "bytes").unwrap().1, "FI_RFHOST_BYTES");
    assert_eq!(params::lookup(CORE, "corething").unwrap().1, "FI_CORETHING");
    assert_eq!(params::get("shm", "nothere"), Err(ENOENT));
    assert_eq!(params::get("shm", "flag"), Err(ENODATA));
    std::env::set_var("FI_RFHOST_FLAG", "yes");
    assert_eq!(params::get_bool("shm", "flag"), Ok(true));
    std::env::set_var("FI_RFHOST_FLAG", "perhaps");
    assert_eq!(params::get_bool("shm", "flag"), Err(EINVAL));
    // Integers are read here, strictly, from the host's variable.
    std::env::set_var("FI_RFHOST_BYTES", "0x100");
    assert_eq!(params::get_size("shm", "bytes"), Ok(256));
    std::env::set_var("FI_RFHOST_BYTES", "12k");
    assert_eq!(params::get_size("shm", "bytes"), Err(EINVAL));
    std::env::set_var("FI_SHM_BYTES", "5");
    std::env::remove_var("FI_RFHOST_BYTES");
    assert_eq!(params::get_size("shm", "bytes"), Err(ENODATA), "the provider's own name is not read");

    // Logging: the host decides and writes, for every provider name.
    assert!(rfabric_core::log::set_host(Box::new(LogHost(seen.clone()))));
    assert!(rfabric_core::log::enabled("shm", FI_LOG_WARN, FI_LOG_CQ));
    assert!(rfabric_core::log::enabled(CORE, FI_LOG_WARN, FI_LOG_CORE));
    assert!(!rfabric_core::log::enabled("shm", FI_LOG_INFO, FI_LOG_CQ));
    rfabric_core::fi_warn!("shm", FI_LOG_CQ, "to the host {}", 1);
    rfabric_core::fi_info!("shm", FI_LOG_CQ, "not enabled");
    rfabric_core::log::internal_error("always");
    {
        let s = seen.lock().unwrap();
        assert_eq!(s.lines.len(), 2, "{:?}", s.lines);
        assert_eq!(s.lines[0], (FI_LOG_WARN, FI_LOG_CQ, "to the host 1\n".to_string()));
        assert_eq!(s.lines[1].2, "always\n");
    }
    seen.lock().unwrap().level = FI_LOG_DEBUG;
    assert!(rfabric_core::log::enabled("shm", FI_LOG_DEBUG, FI_LOG_CQ));

    // A renamed provider names its offers with the new name.
    let r = Renamed::new(Box::new(Inner), "rfinner");
    assert_eq!(r.name(), "rfinner");
    assert_eq!(r.version(), 7);
    let o = r.offers();
    let f = o[0].fabric_attr.as_ref().unwrap();
    assert_eq!(f.prov_name.as_deref(), Some("rfinner"));
    assert_eq!(f.name.as_deref(), Some("fab"), "the fabric keeps its name");
    assert!(r.fabric(f).is_ok());
}
