//! `Verbs`: the loaded libraries, the device list, opening a device.

use crate::error::{LoadError, VerbsError};
use crate::fns::{EfaFns, LibNames, Library, VerbsFns};
use crate::info::{DeviceDetail, DeviceInfo, NodeType, PortInfo, Transport};
use crate::objects::Context;
use crate::sys::*;
use libc::{c_char, c_int};
use std::ffi::CStr;
use std::path::Path;
use std::sync::Arc;

/// The function tables and the libraries that back them.
pub(crate) struct Lib {
    pub(crate) fns: VerbsFns,
    pub(crate) efa: Option<EfaFns>,
    pub(crate) efa_error: Option<LoadError>,
    _libs: Vec<Library>,
}

/// libibverbs (and libefa, if it loads), loaded at run time.
#[derive(Clone)]
pub struct Verbs {
    pub(crate) lib: Arc<Lib>,
}

impl Verbs {
    /// `libibverbs.so.1`, and `libefa.so.1` if it loads.
    pub fn load() -> Result<Verbs, LoadError> {
        Verbs::load_from(&LibNames::default())
    }

    /// The libraries `names` gives. libibverbs must load and have every
    /// function of `VerbsFns` (`reg_dmabuf_mr` is optional); libefa failing
    /// to load, or lacking a function, only leaves EFA out (`efa_error`).
    pub fn load_from(names: &LibNames) -> Result<Verbs, LoadError> {
        let verbs = Library::open(&names.verbs)?;
        let fns = VerbsFns::resolve(&verbs)?;
        let mut libs = vec![verbs];
        let (efa, efa_error) = match &names.efa {
            None => (None, None),
            Some(name) => match Library::open(name).and_then(|l| EfaFns::resolve(&l).map(|f| (l, f))) {
                Ok((l, f)) => {
                    libs.push(l);
                    (Some(f), None)
                }
                Err(e) => (None, Some(e)),
            },
        };
        Ok(Verbs { lib: Arc::new(Lib { fns, efa, efa_error, _libs: libs }) })
    }

    /// A `Verbs` over stand-in tables (tests only: this crate's, and with
    /// the `standin` feature those of providers built on it).
    #[cfg(any(test, feature = "standin"))]
    pub fn from_fns(fns: VerbsFns, efa: Option<EfaFns>) -> Verbs {
        Verbs { lib: Arc::new(Lib { fns, efa, efa_error: None, _libs: Vec::new() }) }
    }

    /// The file name libibverbs was loaded from (`None` for a stand-in).
    pub fn library_name(&self) -> Option<&str> {
        self.lib._libs.first().map(Library::name)
    }

    /// libibverbs' functions.
    pub fn fns(&self) -> &VerbsFns {
        &self.lib.fns
    }

    /// libefa's functions, if it loaded.
    pub fn efa_fns(&self) -> Option<&EfaFns> {
        self.lib.efa.as_ref()
    }

    /// Why libefa was not loaded (`None` when it was, or was not asked for).
    pub fn efa_error(&self) -> Option<&LoadError> {
        self.lib.efa_error.as_ref()
    }

    /// Whether libibverbs has `ibv_reg_dmabuf_mr` (rdma-core 34 and later).
    pub fn has_dmabuf(&self) -> bool {
        self.lib.fns.reg_dmabuf_mr.is_some()
    }

    /// Every device `ibv_get_device_list` reports, each opened and queried
    /// (device attributes, every port, GID 0, efadv). No kernel RDMA support
    /// (`ENOSYS`) is an empty list; a device that fails to open or answer is
    /// listed with the error in its `detail`.
    pub fn devices(&self) -> Result<Vec<DeviceInfo>, VerbsError> {
        let Some(list) = DeviceList::get(&self.lib)? else {
            return Ok(Vec::new());
        };
        let mut out = Vec::with_capacity(list.devices.len());
        for &dev in &list.devices {
            // SAFETY: `dev` is an entry of the list `list` holds (entries stay
            // valid until it is freed).
            let (node_type, transport, ibdev_path) =
                unsafe { ((*dev).node_type, (*dev).transport_type, c_chars(&(*dev).ibdev_path)) };
            // SAFETY: as above.
            let name = unsafe { list.name(dev) };
            let detail = self.open_raw(dev, &name).and_then(|ctx| ctx.detail());
            out.push(DeviceInfo {
                name,
                node_type: NodeType::from_raw(node_type),
                transport: Transport::from_raw(transport),
                driver: driver_of(Path::new(&ibdev_path)),
                detail,
            });
        }
        Ok(out)
    }

    /// Opens the device of this name (`ENODEV` if there is none).
    pub fn open_device(&self, name: &str) -> Result<Context, VerbsError> {
        let list = DeviceList::get(&self.lib)?.ok_or(VerbsError::new("ibv_get_device_list", libc::ENODEV))?;
        for &dev in &list.devices {
            // SAFETY: `dev` is an entry of the list `list` holds.
            if unsafe { list.name(dev) } == name {
                // An opened context outlives the list (ibv_get_device_list(3)).
                return self.open_raw(dev, name);
            }
        }
        Err(VerbsError::new("ibv_open_device", libc::ENODEV))
    }

    fn open_raw(&self, dev: *mut ibv_device, name: &str) -> Result<Context, VerbsError> {
        // SAFETY: `dev` is an entry of a device list the caller holds.
        let ctx = unsafe { (self.lib.fns.open_device)(dev) };
        match std::ptr::NonNull::new(ctx) {
            Some(ctx) => Ok(Context::new(self.lib.clone(), ctx, name.to_string())),
            None => Err(VerbsError::last("ibv_open_device")),
        }
    }
}

impl Context {
    /// Queries an opened device for `Verbs::devices`.
    pub fn detail(&self) -> Result<DeviceDetail, VerbsError> {
        let attr = self.query_device()?;
        Ok(DeviceDetail {
            vendor_id: attr.vendor_id,
            vendor_part_id: attr.vendor_part_id,
            fw_ver: c_chars(&attr.fw_ver),
            phys_port_cnt: attr.phys_port_cnt,
            efa: self.efa_query_device().ok(),
            ports: (1..=attr.phys_port_cnt).map(|p| self.port_info(p)).collect(),
        })
    }

    /// One port, as `Verbs::devices` reports it.
    pub fn port_info(&self, port: u8) -> Result<PortInfo, VerbsError> {
        use crate::info::{LinkLayer, Mtu, PortState};
        let a = self.query_port(port)?;
        Ok(PortInfo {
            port,
            state: PortState::from_raw(a.state),
            link_layer: LinkLayer::from_raw(a.link_layer),
            active_mtu: Mtu::from_raw(a.active_mtu),
            max_mtu: Mtu::from_raw(a.max_mtu),
            lid: a.lid,
            gid0: self.query_gid(port, 0).map(|g| g.bytes()),
        })
    }
}

/// A C `char` array up to its first NUL, as text.
fn c_chars(a: &[c_char]) -> String {
    let bytes: Vec<u8> = a.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The kernel driver of an RDMA device: the last component of the link
/// `<ibdev_path>/device/driver` (`/sys/class/infiniband/efa_0/device/driver`
/// -> `.../drivers/efa`).
fn driver_of(ibdev_path: &Path) -> Option<String> {
    if ibdev_path.as_os_str().is_empty() {
        return None;
    }
    let target = std::fs::read_link(ibdev_path.join("device/driver")).ok()?;
    Some(target.file_name()?.to_string_lossy().into_owned())
}

/// The list of `ibv_get_device_list`, freed on drop.
struct DeviceList<'a> {
    lib: &'a Lib,
    list: *mut *mut ibv_device,
    devices: Vec<*mut ibv_device>,
}

impl<'a> DeviceList<'a> {
    /// The list; `None` when the kernel has no RDMA support (`ENOSYS`).
    fn get(lib: &'a Lib) -> Result<Option<DeviceList<'a>>, VerbsError> {
        let mut n: c_int = 0;
        // SAFETY: `n` is a valid out-parameter.
        let list = unsafe { (lib.fns.get_device_list)(&mut n) };
        if list.is_null() {
            let e = VerbsError::last("ibv_get_device_list");
            return if e.errno == libc::ENOSYS { Ok(None) } else { Err(e) };
        }
        let mut devices = Vec::new();
        for i in 0..usize::try_from(n).unwrap_or(0) {
            // SAFETY: the list holds `n` entries and a NULL after them; we
            // stop at a NULL before `n` too.
            let dev = unsafe { *list.add(i) };
            if dev.is_null() {
                break;
            }
            devices.push(dev);
        }
        Ok(Some(DeviceList { lib, list, devices }))
    }

    /// `ibv_get_device_name(dev)`.
    ///
    /// # Safety
    /// `dev` must be an entry of this list.
    unsafe fn name(&self, dev: *mut ibv_device) -> String {
        // SAFETY: `dev` is live while the list is (caller's promise).
        let p = unsafe { (self.lib.fns.get_device_name)(dev) };
        if p.is_null() {
            return String::new();
        }
        // SAFETY: a non-NULL name is a NUL-terminated string inside `*dev`.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

impl Drop for DeviceList<'_> {
    fn drop(&mut self) {
        // SAFETY: `list` came from ibv_get_device_list and is freed once.
        unsafe { (self.lib.fns.free_device_list)(self.list) };
    }
}
