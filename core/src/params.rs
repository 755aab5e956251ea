//! Configuration parameters: the registry behind `fi_param_define` /
//! `fi_param_get` / `fi_getparams`, plus the list parsers for the
//! environment variables the core itself honours (`FI_PROVIDER`,
//! `FI_PROVIDER_PATH`, the `FI_LOG_*` filters).
//!
//! A parameter belongs to a provider (by name; [`CORE`] for the core) and is
//! read from the environment variable `FI_<PROV>_<NAME>` (core: `FI_<NAME>`),
//! upper-cased. Values are read at each `get`, never cached, so a test or a
//! program may change the environment between calls.
//!
//! Parsing follows fi_provider(3): a value that is not valid for the type is
//! `EINVAL`. Booleans take `0`/`1` and, in any case, `true`/`false`,
//! `yes`/`no`, `on`/`off`. Integers take C `strtol(…, 0)` syntax (decimal,
//! `0x` hex, leading-`0` octal, optional sign, surrounding blanks) but, unlike
//! a bare `strtol`, trailing garbage or a value out of range is `EINVAL`.
#![forbid(unsafe_code)]

#![allow(non_camel_case_types)]

use std::sync::Mutex;

use crate::error::{Result, EINVAL, ENODATA, ENOENT};

/// `enum fi_param_type`.
pub type fi_param_type = u32;
pub const FI_PARAM_STRING: fi_param_type = 0;
pub const FI_PARAM_INT: fi_param_type = 1;
pub const FI_PARAM_BOOL: fi_param_type = 2;
pub const FI_PARAM_SIZE_T: fi_param_type = 3;

/// The provider name under which core parameters are registered (and the
/// name the core prints in log lines).
pub const CORE: &str = "core";

/// A parameter's value, parsed for its type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    Str(String),
    Int(i32),
    Bool(bool),
    Size(usize),
}

#[derive(Clone, Debug)]
struct Entry {
    prov: String,
    name: String,
    ty: fi_param_type,
    help: String,
    env_name: String,
}

/// One row of [`getparams`]: what `fi_getparams` hands out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamInfo {
    /// The environment variable, e.g. `FI_SHM_TX_SIZE`.
    pub env_name: String,
    pub ty: fi_param_type,
    /// Help text; a provider's is prefixed with `<prov>: `.
    pub help: String,
    /// The environment's current value, if set.
    pub value: Option<String>,
}

static REGISTRY: Mutex<Vec<Entry>> = Mutex::new(Vec::new());
static HOST: std::sync::OnceLock<Box<dyn Host>> = std::sync::OnceLock::new();

/// The parameters of another libfabric that has loaded this code as a DL
/// provider (its `fi_param_define` / `fi_param_get`). Every provider
/// parameter of this library is then filed under the name the host knows
/// the provider by (so `FI_SHM_CMA` of a provider loaded as `rfshm` is
/// `FI_RFSHM_CMA`, as libfabric names every provider's variables), defined
/// with the host as well as here, so that the host's `fi_getparams` (`fi_info
/// -e`) lists it. Core parameters stay here.
pub trait Host: Send + Sync {
    /// The provider's name in the host.
    fn prov_name(&self) -> &str;
    fn define(&self, name: &str, ty: fi_param_type, help: &str) -> Result<()>;
    /// The value as the host reads it (`ENODATA` when unset, `EINVAL` when
    /// it does not parse), or `None` to read it here: upstream parses
    /// integers with a bare `strtol`, which takes `12k` as 12 and `abc` as
    /// 0, so integer types are read here, from the same variable.
    fn get(&self, name: &str, ty: fi_param_type) -> Option<Result<Value>>;
}

/// File provider parameters with `host` from now on (see [`Host`]). Once
/// per process: false (and nothing changes) when a host was set before.
pub fn set_host(host: Box<dyn Host>) -> bool {
    HOST.set(host).is_ok()
}

/// The host that keeps `prov`'s parameters, if any (never the core's).
fn host_of(prov: &str) -> Option<&'static dyn Host> {
    if prov == CORE {
        return None;
    }
    HOST.get().map(|h| h.as_ref())
}

/// The name `prov`'s parameters are filed under.
fn filed(prov: &str) -> &str {
    match host_of(prov) {
        Some(h) => h.prov_name(),
        None => prov,
    }
}

fn registry() -> std::sync::MutexGuard<'static, Vec<Entry>> {
    // A panic while holding the lock cannot leave the Vec half-edited in a
    // way that matters (push is the only mutation), so poison is ignored.
    REGISTRY.lock().unwrap_or_else(|p| p.into_inner())
}

/// The environment variable that holds parameter `name` of provider `prov`.
pub fn env_name(prov: &str, name: &str) -> String {
    let s = if prov == CORE { format!("FI_{name}") } else { format!("FI_{prov}_{name}") };
    s.to_ascii_uppercase()
}

/// Whether `ty` is one of the four `FI_PARAM_*` types.
pub fn valid_type(ty: fi_param_type) -> bool {
    ty <= FI_PARAM_SIZE_T
}

/// Register a parameter. `EINVAL` for an empty name or help text or an
/// unknown type. Defining the same (provider, name) again is accepted and
/// keeps the first definition, so a provider loaded twice lists once.
pub fn define(prov: &str, name: &str, ty: fi_param_type, help: &str) -> Result<()> {
    if prov.is_empty() || name.is_empty() || help.is_empty() || !valid_type(ty) {
        return Err(EINVAL);
    }
    let host = host_of(prov);
    let prov = filed(prov);
    if is_defined(prov, name) {
        return Ok(());
    }
    // Not under the registry's lock: the host may log, which may come back here.
    if let Some(h) = host {
        h.define(name, ty, help)?;
    }
    let mut reg = registry();
    if reg.iter().any(|e| e.prov == prov && e.name == name) {
        return Ok(());
    }
    let help = if prov == CORE { help.to_owned() } else { format!("{prov}: {help}") };
    reg.push(Entry {
        prov: prov.to_owned(),
        name: name.to_owned(),
        ty,
        help,
        env_name: env_name(prov, name),
    });
    Ok(())
}

/// Whether (`prov`, `name`) has been defined.
pub fn is_defined(prov: &str, name: &str) -> bool {
    let prov = filed(prov);
    registry().iter().any(|e| e.prov == prov && e.name == name)
}

/// The type and environment variable of a defined parameter, or `ENOENT`.
pub fn lookup(prov: &str, name: &str) -> Result<(fi_param_type, String)> {
    let prov = filed(prov);
    registry()
        .iter()
        .find(|e| e.prov == prov && e.name == name)
        .map(|e| (e.ty, e.env_name.clone()))
        .ok_or(ENOENT)
}

/// Read a parameter: `ENOENT` if not defined, `ENODATA` if defined but not
/// set, `EINVAL` if the value does not parse for its type.
pub fn get(prov: &str, name: &str) -> Result<Value> {
    let (ty, env) = lookup(prov, name)?;
    if let Some(v) = host_of(prov).and_then(|h| h.get(name, ty)) {
        return v;
    }
    let raw = match std::env::var_os(&env) {
        Some(v) => v.to_string_lossy().into_owned(),
        None => {
            crate::fi_info!(prov, crate::log::FI_LOG_CORE, "variable {name}=<not set>");
            return Err(ENODATA);
        }
    };
    let v = parse_value(ty, &raw);
    match &v {
        Ok(val) => crate::fi_info!(prov, crate::log::FI_LOG_CORE, "read var {name}={}", show(val)),
        Err(_) => crate::fi_warn!(prov, crate::log::FI_LOG_CORE, "failed to parse var {name}={raw}"),
    }
    v
}

fn show(v: &Value) -> String {
    match v {
        Value::Str(s) => s.clone(),
        Value::Int(i) => i.to_string(),
        Value::Bool(b) => (*b as i32).to_string(),
        Value::Size(s) => s.to_string(),
    }
}

/// Parse `raw` as a value of type `ty`.
pub fn parse_value(ty: fi_param_type, raw: &str) -> Result<Value> {
    match ty {
        FI_PARAM_STRING => Ok(Value::Str(raw.to_owned())),
        FI_PARAM_INT => parse_int(raw).map(Value::Int).ok_or(EINVAL),
        FI_PARAM_BOOL => parse_bool(raw).map(Value::Bool).ok_or(EINVAL),
        FI_PARAM_SIZE_T => parse_size(raw).map(Value::Size).ok_or(EINVAL),
        _ => Err(EINVAL),
    }
}

/// Convenience readers; the error cases are those of [`get`].
pub fn get_str(prov: &str, name: &str) -> Result<String> {
    match get(prov, name)? {
        Value::Str(s) => Ok(s),
        _ => Err(EINVAL),
    }
}
pub fn get_int(prov: &str, name: &str) -> Result<i32> {
    match get(prov, name)? {
        Value::Int(i) => Ok(i),
        _ => Err(EINVAL),
    }
}
pub fn get_bool(prov: &str, name: &str) -> Result<bool> {
    match get(prov, name)? {
        Value::Bool(b) => Ok(b),
        _ => Err(EINVAL),
    }
}
pub fn get_size(prov: &str, name: &str) -> Result<usize> {
    match get(prov, name)? {
        Value::Size(s) => Ok(s),
        _ => Err(EINVAL),
    }
}

/// Every defined parameter, in definition order, with its current value.
pub fn getparams() -> Vec<ParamInfo> {
    registry()
        .iter()
        .map(|e| ParamInfo {
            env_name: e.env_name.clone(),
            ty: e.ty,
            help: e.help.clone(),
            value: std::env::var_os(&e.env_name).map(|v| v.to_string_lossy().into_owned()),
        })
        .collect()
}

/// Boolean spellings accepted by upstream libfabric.
pub fn parse_bool(s: &str) -> Option<bool> {
    const NO: [&str; 3] = ["false", "no", "off"];
    const YES: [&str; 3] = ["true", "yes", "on"];
    if s == "0" || NO.iter().any(|w| s.eq_ignore_ascii_case(w)) {
        Some(false)
    } else if s == "1" || YES.iter().any(|w| s.eq_ignore_ascii_case(w)) {
        Some(true)
    } else {
        None
    }
}

/// `strtol(s, &end, 0)` over the whole string (blanks allowed around it);
/// `None` when there is no number, something follows it, or it overflows.
pub fn parse_long(s: &str) -> Option<i64> {
    let t = s.trim_matches(|c: char| c.is_ascii_whitespace());
    let (neg, t) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let (radix, digits) = if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        (16, h)
    } else if t.len() > 1 && t.starts_with('0') {
        (8, &t[1..])
    } else {
        (10, t)
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let mag = u64::from_str_radix(digits, radix).ok()?;
    if neg {
        if mag > i64::MAX as u64 + 1 {
            None
        } else {
            Some((mag as i64).wrapping_neg())
        }
    } else {
        i64::try_from(mag).ok()
    }
}

/// An `FI_PARAM_INT` value: a C `int`.
pub fn parse_int(s: &str) -> Option<i32> {
    parse_long(s).and_then(|v| i32::try_from(v).ok())
}

/// An `FI_PARAM_SIZE_T` value: non-negative.
pub fn parse_size(s: &str) -> Option<usize> {
    parse_long(s).and_then(|v| usize::try_from(v).ok())
}

/// A comma-separated name list with an optional leading `^` that negates it,
/// as `FI_PROVIDER`, `FI_LOG_PROV` and `FI_LOG_SUBSYS` take. Names compare
/// without regard to case. An unset variable filters nothing; a set but
/// empty one (as upstream) lists the single name "" and so, when not
/// negated, lets nothing through.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Filter {
    names: Option<Vec<String>>,
    negated: bool,
}

impl Filter {
    pub fn parse(raw: Option<&str>) -> Filter {
        let Some(raw) = raw else { return Filter::default() };
        let (negated, body) = match raw.strip_prefix('^') {
            Some(rest) => (true, rest),
            None => (false, raw),
        };
        Filter { names: Some(body.split(',').map(str::to_owned).collect()), negated }
    }

    /// Whether the filter was given at all.
    pub fn is_active(&self) -> bool {
        self.names.is_some()
    }

    pub fn is_negated(&self) -> bool {
        self.negated
    }

    pub fn names(&self) -> &[String] {
        self.names.as_deref().unwrap_or(&[])
    }

    fn lists(&self, name: &str) -> bool {
        self.names().iter().any(|n| n.eq_ignore_ascii_case(name))
    }

    /// True when `name` is filtered out (exact name match only).
    pub fn excludes(&self, name: &str) -> bool {
        if !self.is_active() {
            return false;
        }
        self.lists(name) == self.negated
    }
}

/// Does `a` start with `b` (ignoring case) followed directly by ';'?
fn is_layer_base(layered: &str, base: &str) -> bool {
    layered.len() > base.len()
        && layered.as_bytes()[base.len()] == b';'
        && layered[..base.len()].eq_ignore_ascii_case(base)
}

/// `FI_PROVIDER`. Layered names (`tcp;ofi_rxm`) are handled as upstream:
/// - when deciding whether to load/initialise a provider
///   ([`excludes_at_init`](Self::excludes_at_init)), a listed `tcp;ofi_rxm`
///   keeps the core provider `tcp` (unless the list is negated);
/// - when filtering `fi_info` results ([`excludes_info`](Self::excludes_info)),
///   a name must match the whole provider name, except that a listed `tcp`
///   also admits any stack built on it, `tcp;ofi_rxm`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProviderFilter(pub Filter);

impl ProviderFilter {
    pub fn parse(raw: Option<&str>) -> ProviderFilter {
        ProviderFilter(Filter::parse(raw))
    }

    pub fn is_active(&self) -> bool {
        self.0.is_active()
    }

    /// Should provider `name` be skipped when providers are set up?
    pub fn excludes_at_init(&self, name: &str) -> bool {
        let f = &self.0;
        if !f.is_active() {
            return false;
        }
        if f.lists(name) {
            return f.negated;
        }
        if f.negated {
            return false;
        }
        !f.names().iter().any(|n| is_layer_base(n, name))
    }

    /// Should an `fi_info` whose `prov_name` is `prov_name` be dropped?
    pub fn excludes_info(&self, prov_name: &str) -> bool {
        let f = &self.0;
        if !f.is_active() {
            return false;
        }
        let listed = f.lists(prov_name) || f.names().iter().any(|n| is_layer_base(prov_name, n));
        listed == f.negated
    }
}

/// `FI_PROVIDER` from the environment.
pub fn provider_filter_from_env() -> ProviderFilter {
    ProviderFilter::parse(std::env::var("FI_PROVIDER").ok().as_deref())
}

/// `FI_PROVIDER_PATH`: `dir1:dir2`, optionally led by `@` (providers are
/// then preferred in discovery order rather than by version); an entry
/// `+/path/libx-fi.so` names a preferred provider library instead of a
/// directory. With no directory given the default directories are searched.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProviderPath {
    pub dirs: Vec<String>,
    pub preferred_libs: Vec<String>,
    pub register_order: bool,
}

impl ProviderPath {
    pub fn parse(raw: Option<&str>, default_dirs: &str) -> ProviderPath {
        let mut register_order = false;
        let spec = match raw {
            None | Some("") => default_dirs,
            Some(r) => match r.strip_prefix('@') {
                Some("") => {
                    register_order = true;
                    default_dirs
                }
                Some(rest) => {
                    register_order = true;
                    rest
                }
                None => r,
            },
        };
        let mut dirs = Vec::new();
        let mut preferred_libs = Vec::new();
        for item in spec.split(':') {
            match item.strip_prefix('+') {
                Some(lib) => preferred_libs.push(lib.to_owned()),
                None => dirs.push(item.to_owned()),
            }
        }
        if dirs.is_empty() {
            dirs = default_dirs.split(':').map(str::to_owned).collect();
        }
        ProviderPath { dirs, preferred_libs, register_order }
    }
}

/// `FI_PROVIDER_PATH` from the environment.
pub fn provider_path_from_env(default_dirs: &str) -> ProviderPath {
    ProviderPath::parse(std::env::var("FI_PROVIDER_PATH").ok().as_deref(), default_dirs)
}

/// [`define_core_params`], once per process.
pub fn ensure_core_params() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(define_core_params);
}

/// Define the core parameters the library honours, so that `fi_getparams`
/// (and `fi_info -e`) lists them. Idempotent.
pub fn define_core_params() {
    crate::log::define_params();
    let defs: [(&str, fi_param_type, &str); 2] = [
        ("provider", FI_PARAM_STRING,
         "Only use the listed providers (comma separated; a leading ^ excludes them) (default: all available)"),
        ("provider_path", FI_PARAM_STRING,
         "Search for provider libraries in dir1:dir2:...; a leading @ orders providers by discovery \
          instead of version; an entry +/path/lib names a preferred provider library (default: the \
          library's provider directory)"),
    ];
    for (name, ty, help) in defs {
        let _ = define(CORE, name, ty, help);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bools() {
        for s in ["1", "true", "TRUE", "Yes", "on", "ON"] {
            assert_eq!(parse_bool(s), Some(true), "{s}");
        }
        for s in ["0", "false", "No", "off", "OFF"] {
            assert_eq!(parse_bool(s), Some(false), "{s}");
        }
        for s in ["", "2", "y", "n", "yess", " 1", "00"] {
            assert_eq!(parse_bool(s), None, "{s:?}");
        }
    }

    #[test]
    fn ints() {
        assert_eq!(parse_int("42"), Some(42));
        assert_eq!(parse_int(" -17 "), Some(-17));
        assert_eq!(parse_int("+5"), Some(5));
        assert_eq!(parse_int("0x1F"), Some(31));
        assert_eq!(parse_int("0X10"), Some(16));
        assert_eq!(parse_int("010"), Some(8));
        assert_eq!(parse_int("0"), Some(0));
        assert_eq!(parse_int("2147483647"), Some(i32::MAX));
        assert_eq!(parse_int("-2147483648"), Some(i32::MIN));
        for bad in ["", " ", "abc", "10abc", "0x", "08", "2147483648", "-", "1 2", "0x-1"] {
            assert_eq!(parse_int(bad), None, "{bad:?}");
        }
        assert_eq!(parse_long("-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_long("9223372036854775808"), None);
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("0x1000"), Some(4096));
        assert_eq!(parse_size("-1"), None);
        assert_eq!(parse_size("1k"), None);
    }

    #[test]
    fn env_names() {
        assert_eq!(env_name(CORE, "log_level"), "FI_LOG_LEVEL");
        assert_eq!(env_name("shm", "tx_size"), "FI_SHM_TX_SIZE");
        assert_eq!(env_name("ofi_rxm", "buffer_size"), "FI_OFI_RXM_BUFFER_SIZE");
    }

    #[test]
    fn registry_define_get() {
        // Names unique to this test: the registry and environment are shared
        // by the test threads.
        let p = "rfunit";
        assert_eq!(get(p, "nothere"), Err(ENOENT));
        assert_eq!(define(p, "", FI_PARAM_INT, "h"), Err(EINVAL));
        assert_eq!(define(p, "x", FI_PARAM_INT, ""), Err(EINVAL));
        assert_eq!(define(p, "x", 7, "h"), Err(EINVAL));
        assert!(!is_defined(p, "x"));

        define(p, "count", FI_PARAM_INT, "a count").unwrap();
        define(p, "flag", FI_PARAM_BOOL, "a flag").unwrap();
        define(p, "name", FI_PARAM_STRING, "a name").unwrap();
        define(p, "bytes", FI_PARAM_SIZE_T, "a size").unwrap();
        define(p, "count", FI_PARAM_STRING, "again").unwrap(); // first wins
        assert_eq!(get(p, "count"), Err(ENODATA));

        std::env::set_var("FI_RFUNIT_COUNT", "0x20");
        std::env::set_var("FI_RFUNIT_FLAG", "Off");
        std::env::set_var("FI_RFUNIT_NAME", "hello world");
        std::env::set_var("FI_RFUNIT_BYTES", "123456");
        assert_eq!(get(p, "count"), Ok(Value::Int(32)));
        assert_eq!(get_bool(p, "flag"), Ok(false));
        assert_eq!(get_str(p, "name").as_deref(), Ok("hello world"));
        assert_eq!(get_size(p, "bytes"), Ok(123456));
        std::env::set_var("FI_RFUNIT_FLAG", "maybe");
        assert_eq!(get(p, "flag"), Err(EINVAL));
        std::env::set_var("FI_RFUNIT_COUNT", "12x");
        assert_eq!(get_int(p, "count"), Err(EINVAL));

        let all = getparams();
        let mine: Vec<_> = all.iter().filter(|i| i.env_name.starts_with("FI_RFUNIT_")).collect();
        assert_eq!(mine.len(), 4);
        assert_eq!(mine[0].env_name, "FI_RFUNIT_COUNT");
        assert_eq!(mine[0].ty, FI_PARAM_INT);
        assert_eq!(mine[0].help, "rfunit: a count");
        assert_eq!(mine[0].value.as_deref(), Some("12x"));
        // A provider's parameter is not a core one.
        assert_eq!(get(CORE, "count"), Err(ENOENT));
    }

    #[test]
    fn filters() {
        let none = Filter::parse(None);
        assert!(!none.is_active() && !none.excludes("shm"));
        let inc = Filter::parse(Some("shm,TCP"));
        assert!(!inc.excludes("shm") && !inc.excludes("tcp") && inc.excludes("verbs"));
        let exc = Filter::parse(Some("^shm,tcp"));
        assert!(exc.excludes("SHM") && exc.excludes("tcp") && !exc.excludes("verbs"));
        let empty = Filter::parse(Some(""));
        assert!(empty.excludes("shm"));
        assert!(!Filter::parse(Some("^")).excludes("shm"));
    }

    #[test]
    fn provider_filter_layered() {
        let f = ProviderFilter::parse(Some("tcp;ofi_rxm"));
        assert!(!f.excludes_at_init("tcp"), "core provider under a listed stack is loaded");
        assert!(!f.excludes_at_init("tcp;ofi_rxm"));
        assert!(f.excludes_at_init("shm"));
        assert!(!f.excludes_info("tcp;ofi_rxm"));
        assert!(f.excludes_info("tcp"), "results need the whole name");

        let f = ProviderFilter::parse(Some("tcp"));
        assert!(!f.excludes_info("tcp;ofi_rxm"), "extra layering on a listed provider is allowed");
        assert!(!f.excludes_info("TCP"));
        assert!(f.excludes_info("tcpx"));
        assert!(f.excludes_info("shm"));

        let f = ProviderFilter::parse(Some("^tcp;ofi_rxm"));
        assert!(!f.excludes_at_init("tcp"), "negated stack must not drop its base");
        assert!(f.excludes_at_init("tcp;ofi_rxm"));
        assert!(f.excludes_info("tcp;ofi_rxm"));
        assert!(!f.excludes_info("tcp"));

        let f = ProviderFilter::parse(Some("^tcp"));
        assert!(f.excludes_info("tcp") && f.excludes_info("tcp;ofi_rxm"));
        assert!(!f.excludes_info("shm"));
        assert!(!ProviderFilter::parse(None).excludes_info("anything"));
    }

    #[test]
    fn provider_path() {
        let d = "/usr/lib/libfabric";
        let p = ProviderPath::parse(None, d);
        assert_eq!(p.dirs, vec![d.to_owned()]);
        assert!(!p.register_order && p.preferred_libs.is_empty());
        let p = ProviderPath::parse(Some("/a:/b"), d);
        assert_eq!(p.dirs, vec!["/a".to_owned(), "/b".to_owned()]);
        let p = ProviderPath::parse(Some("@/a:+/x/libfoo-fi.so"), d);
        assert!(p.register_order);
        assert_eq!(p.dirs, vec!["/a".to_owned()]);
        assert_eq!(p.preferred_libs, vec!["/x/libfoo-fi.so".to_owned()]);
        let p = ProviderPath::parse(Some("+/x/lib.so"), d);
        assert_eq!(p.dirs, vec![d.to_owned()], "only preferred libs: default dirs searched");
        let p = ProviderPath::parse(Some("@"), d);
        assert!(p.register_order);
        assert_eq!(p.dirs, vec![d.to_owned()]);
    }
}
