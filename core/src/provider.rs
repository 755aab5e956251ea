//! The provider table: built-in Rust providers and DL providers
//! (`lib<name>-fi.so`, upstream's provider ABI), filtered by `FI_PROVIDER`.

use crate::dl::DlProvider;
use crate::error::Result;
use crate::info::{FabricAttr, Info};
use once_cell::sync::OnceCell;

/// What an application asked `fi_getinfo` for.
#[derive(Clone, Copy, Debug)]
pub struct Request<'a> {
    pub version: u32,
    pub node: Option<&'a str>,
    pub service: Option<&'a str>,
    pub flags: u64,
    pub hints: Option<&'a Info>,
}

/// A fabric object created by a built-in provider. Its operations are
/// reached through the ops tables that `capi` builds around it.
pub trait Fabric: Send + Sync + std::any::Any {
    fn as_any(&self) -> &dyn std::any::Any;
}

/// A built-in provider.
pub trait Provider: Send + Sync {
    fn name(&self) -> &'static str;
    /// `FI_VERSION(major, minor)` of the provider itself.
    fn version(&self) -> u32;
    /// Everything the provider offers, one `Info` per distinct
    /// configuration, fully filled in (the "provider info" list).
    fn offers(&self) -> Vec<Info>;
    /// Fit an offer that passed matching to the request: addresses from
    /// node/service, attributes the application asked for within what the
    /// provider can do. The default keeps the offer as it is.
    fn resolve(&self, offer: Info, _req: &Request<'_>) -> Result<Info> {
        Ok(offer)
    }
    /// Open a fabric for an `fi_fabric_attr` that this provider returned.
    fn fabric(&self, attr: &FabricAttr) -> Result<Box<dyn Fabric>>;
}

pub enum Entry {
    Builtin(Box<dyn Provider>),
    Dl(DlProvider),
}

impl Entry {
    pub fn name(&self) -> &str {
        match self {
            Entry::Builtin(p) => p.name(),
            Entry::Dl(d) => d.name(),
        }
    }
    pub fn version(&self) -> u32 {
        match self {
            Entry::Builtin(p) => p.version(),
            Entry::Dl(d) => d.version(),
        }
    }
}

/// The table, built once on first use.
pub struct Table {
    pub entries: Vec<Entry>,
}

static TABLE: OnceCell<Table> = OnceCell::new();

/// Build (once) and return the provider table. `builtins` is called only
/// the first time.
pub fn table(builtins: impl FnOnce() -> Vec<Box<dyn Provider>>) -> &'static Table {
    TABLE.get_or_init(|| {
        let filter = crate::params::provider_filter_from_env();
        let mut entries: Vec<Entry> = Vec::new();
        for p in builtins() {
            if !filter.excludes_at_init(p.name()) {
                entries.push(Entry::Builtin(p));
            } else {
                crate::fi_info!("core", crate::abi::FI_LOG_CORE, "provider {} excluded by FI_PROVIDER", p.name());
            }
        }
        for d in crate::dl::load_all(&crate::dl::search_path()) {
            if filter.excludes_at_init(d.name()) {
                crate::fi_info!("core", crate::abi::FI_LOG_CORE, "provider {} excluded by FI_PROVIDER", d.name());
                continue;
            }
            if let Some(i) = entries.iter().position(|e| e.name() == d.name()) {
                // Same name twice: the newer provider version wins, as users expect
                // when they drop a newer build into FI_PROVIDER_PATH.
                if d.version() > entries[i].version() {
                    crate::fi_info!("core", crate::abi::FI_LOG_CORE, "DL provider {} ({}) replaces the built-in one", d.name(), d.path().display());
                    entries[i] = Entry::Dl(d);
                } else {
                    crate::fi_info!("core", crate::abi::FI_LOG_CORE, "DL provider {} ({}) is not newer than the one loaded; skipped", d.name(), d.path().display());
                }
                continue;
            }
            entries.push(Entry::Dl(d));
        }
        Table { entries }
    })
}

/// The table if it has been built.
pub fn existing_table() -> Option<&'static Table> {
    TABLE.get()
}
