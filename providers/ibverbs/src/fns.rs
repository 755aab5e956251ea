//! The exported functions of libibverbs and libefa this crate calls, as
//! tables of function pointers resolved at run time (`dlopen` through
//! `libloading`, then `dlvsym` with the version node each function was
//! declared in, the binding a program linked against Debian's
//! `libibverbs.so` would record). Nothing links rdma-core at build time.
//!
//! The real tables come only from `load`; the crate's unit tests build
//! recording stand-ins of the same types.

use crate::error::LoadError;
use crate::sys::*;
use libc::{c_char, c_int, c_uint, c_void};
use std::ffi::CString;
use std::ptr::NonNull;

/// The library file names to load. Tests point these at names that do not
/// exist, or at libraries of the wrong kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LibNames {
    /// libibverbs (required).
    pub verbs: String,
    /// libefa, for `efadv_*` (optional: `None`, or a library that fails to
    /// load, leaves the EFA functions out).
    pub efa: Option<String>,
}

impl Default for LibNames {
    fn default() -> Self {
        LibNames { verbs: "libibverbs.so.1".into(), efa: Some("libefa.so.1".into()) }
    }
}

/// libibverbs' exported functions (`<infiniband/verbs.h>` prototypes).
#[derive(Clone, Copy)]
pub struct VerbsFns {
    pub get_device_list: unsafe extern "C" fn(num_devices: *mut c_int) -> *mut *mut ibv_device,
    pub free_device_list: unsafe extern "C" fn(list: *mut *mut ibv_device),
    pub get_device_name: unsafe extern "C" fn(device: *mut ibv_device) -> *const c_char,
    pub open_device: unsafe extern "C" fn(device: *mut ibv_device) -> *mut ibv_context,
    pub close_device: unsafe extern "C" fn(context: *mut ibv_context) -> c_int,
    pub query_device: unsafe extern "C" fn(context: *mut ibv_context, attr: *mut ibv_device_attr) -> c_int,
    /// The exported `ibv_query_port`, whose third argument is a
    /// `struct _compat_ibv_port_attr` (a prefix of `ibv_port_attr`): call
    /// `inline::ibv_query_port`, which does what the header's macro does.
    pub query_port: unsafe extern "C" fn(context: *mut ibv_context, port_num: u8, attr: *mut ibv_port_attr) -> c_int,
    pub query_gid:
        unsafe extern "C" fn(context: *mut ibv_context, port_num: u8, index: c_int, gid: *mut ibv_gid) -> c_int,
    pub alloc_pd: unsafe extern "C" fn(context: *mut ibv_context) -> *mut ibv_pd,
    pub dealloc_pd: unsafe extern "C" fn(pd: *mut ibv_pd) -> c_int,
    /// The exported `ibv_reg_mr` (the header's macro calls it only for an
    /// access mask known at compile time; `inline::ibv_reg_mr` otherwise
    /// calls `reg_mr_iova2`).
    pub reg_mr: unsafe extern "C" fn(pd: *mut ibv_pd, addr: *mut c_void, length: usize, access: c_int) -> *mut ibv_mr,
    pub reg_mr_iova2: unsafe extern "C" fn(
        pd: *mut ibv_pd,
        addr: *mut c_void,
        length: usize,
        iova: u64,
        access: c_uint,
    ) -> *mut ibv_mr,
    /// Since rdma-core 34 (`IBVERBS_1.12`).
    pub reg_dmabuf_mr: Option<
        unsafe extern "C" fn(
            pd: *mut ibv_pd,
            offset: u64,
            length: usize,
            iova: u64,
            fd: c_int,
            access: c_int,
        ) -> *mut ibv_mr,
    >,
    pub dereg_mr: unsafe extern "C" fn(mr: *mut ibv_mr) -> c_int,
    pub create_cq: unsafe extern "C" fn(
        context: *mut ibv_context,
        cqe: c_int,
        cq_context: *mut c_void,
        channel: *mut ibv_comp_channel,
        comp_vector: c_int,
    ) -> *mut ibv_cq,
    pub destroy_cq: unsafe extern "C" fn(cq: *mut ibv_cq) -> c_int,
    pub create_comp_channel: unsafe extern "C" fn(context: *mut ibv_context) -> *mut ibv_comp_channel,
    pub destroy_comp_channel: unsafe extern "C" fn(channel: *mut ibv_comp_channel) -> c_int,
    pub get_cq_event:
        unsafe extern "C" fn(channel: *mut ibv_comp_channel, cq: *mut *mut ibv_cq, cq_context: *mut *mut c_void) -> c_int,
    pub ack_cq_events: unsafe extern "C" fn(cq: *mut ibv_cq, nevents: c_uint),
    pub create_qp: unsafe extern "C" fn(pd: *mut ibv_pd, attr: *mut ibv_qp_init_attr) -> *mut ibv_qp,
    pub destroy_qp: unsafe extern "C" fn(qp: *mut ibv_qp) -> c_int,
    pub modify_qp: unsafe extern "C" fn(qp: *mut ibv_qp, attr: *mut ibv_qp_attr, attr_mask: c_int) -> c_int,
    pub create_srq: unsafe extern "C" fn(pd: *mut ibv_pd, attr: *mut ibv_srq_init_attr) -> *mut ibv_srq,
    pub destroy_srq: unsafe extern "C" fn(srq: *mut ibv_srq) -> c_int,
    /// An address handle for UD and SRD sends (`wr.ud.ah`).
    pub create_ah: unsafe extern "C" fn(pd: *mut ibv_pd, attr: *mut ibv_ah_attr) -> *mut ibv_ah,
    pub destroy_ah: unsafe extern "C" fn(ah: *mut ibv_ah) -> c_int,
}

/// libefa's exported functions (`<infiniband/efadv.h>` prototypes).
#[derive(Clone, Copy)]
pub struct EfaFns {
    pub query_device:
        unsafe extern "C" fn(context: *mut ibv_context, attr: *mut efadv_device_attr, inlen: u32) -> c_int,
    pub create_driver_qp:
        unsafe extern "C" fn(pd: *mut ibv_pd, attr: *mut ibv_qp_init_attr, driver_qp_type: u32) -> *mut ibv_qp,
    pub create_qp_ex: unsafe extern "C" fn(
        context: *mut ibv_context,
        attr_ex: *mut ibv_qp_init_attr_ex,
        efa_attr: *mut efadv_qp_init_attr,
        inlen: u32,
    ) -> *mut ibv_qp,
}

/// A library opened for the life of the process (`RTLD_NODELETE`: the
/// providers libibverbs loads, and every function pointer handed out, stay
/// valid even after the last `Verbs` is dropped).
pub(crate) struct Library {
    _lib: libloading::os::unix::Library,
    handle: *mut c_void,
    name: String,
}

// SAFETY: a dlopen handle may be used from any thread (dlvsym/dlclose are
// thread safe); `handle` is only read.
unsafe impl Send for Library {}
// SAFETY: as above.
unsafe impl Sync for Library {}

impl Library {
    pub(crate) fn open(name: &str) -> Result<Library, LoadError> {
        use libloading::os::unix::{Library as ULib, RTLD_LOCAL, RTLD_NOW};
        let flags = RTLD_NOW | RTLD_LOCAL | libc::RTLD_NODELETE;
        // SAFETY: loading runs the library's initialisers. The names this
        // crate loads are rdma-core's libibverbs and libefa, whose
        // constructors only set up their own state; a test name is either
        // absent or a system library of the same kind.
        let lib = unsafe { ULib::open(Some(name), flags) }
            .map_err(|e| LoadError::NoLibrary { name: name.to_string(), reason: e.to_string() })?;
        let handle = lib.into_raw();
        // SAFETY: `handle` came from `into_raw` just above and is not used
        // to build any other `Library`.
        let lib = unsafe { ULib::from_raw(handle) };
        Ok(Library { _lib: lib, handle, name: name.to_string() })
    }

    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// `dlvsym(handle, symbol, version)`.
    fn sym(&self, symbol: &'static str, version: &'static str) -> Option<NonNull<c_void>> {
        let s = CString::new(symbol).ok()?;
        let v = CString::new(version).ok()?;
        // SAFETY: `handle` is a live dlopen handle (`_lib` holds it open, and
        // RTLD_NODELETE keeps it mapped); both strings are NUL-terminated.
        NonNull::new(unsafe { libc::dlvsym(self.handle, s.as_ptr(), v.as_ptr()) })
    }

    /// `symbol@version` as a function pointer, or `NoSymbol`.
    ///
    /// # Safety
    /// `F` must be the `unsafe extern "C" fn` type of `symbol`'s prototype.
    pub(crate) unsafe fn required<F: Copy>(&self, symbol: &'static str, version: &'static str) -> Result<F, LoadError> {
        let p = self.sym(symbol, version).ok_or_else(|| LoadError::NoSymbol {
            library: self.name.clone(),
            symbol,
            version,
        })?;
        // SAFETY: the caller promises `F` is the symbol's function type.
        Ok(unsafe { cast::<F>(p) })
    }

    /// `symbol@version` as a function pointer, if the library has it.
    ///
    /// # Safety
    /// As for `required`.
    pub(crate) unsafe fn optional<F: Copy>(&self, symbol: &'static str, version: &'static str) -> Option<F> {
        // SAFETY: the caller promises `F` is the symbol's function type.
        self.sym(symbol, version).map(|p| unsafe { cast::<F>(p) })
    }
}

/// A symbol's address as the function pointer type `F`.
///
/// # Safety
/// `F` must be an `unsafe extern "C" fn` type whose signature is the C
/// prototype of the function at `p`.
unsafe fn cast<F: Copy>(p: NonNull<c_void>) -> F {
    assert_eq!(std::mem::size_of::<F>(), std::mem::size_of::<NonNull<c_void>>());
    // SAFETY: same size (checked above); the caller promises `F` is the
    // function's type, and a non-null code address is a valid value of it.
    unsafe { std::mem::transmute_copy::<NonNull<c_void>, F>(&p) }
}

impl VerbsFns {
    pub(crate) fn resolve(lib: &Library) -> Result<VerbsFns, LoadError> {
        const V: &str = "IBVERBS_1.1";
        // SAFETY: each field's type is written from the header's prototype
        // of the function it is resolved from (the field names the function),
        // which is what `required`/`optional` ask.
        Ok(unsafe { VerbsFns {
            get_device_list: lib.required("ibv_get_device_list", V)?,
            free_device_list: lib.required("ibv_free_device_list", V)?,
            get_device_name: lib.required("ibv_get_device_name", V)?,
            open_device: lib.required("ibv_open_device", V)?,
            close_device: lib.required("ibv_close_device", V)?,
            query_device: lib.required("ibv_query_device", V)?,
            query_port: lib.required("ibv_query_port", V)?,
            query_gid: lib.required("ibv_query_gid", V)?,
            alloc_pd: lib.required("ibv_alloc_pd", V)?,
            dealloc_pd: lib.required("ibv_dealloc_pd", V)?,
            reg_mr: lib.required("ibv_reg_mr", V)?,
            reg_mr_iova2: lib.required("ibv_reg_mr_iova2", "IBVERBS_1.8")?,
            reg_dmabuf_mr: lib.optional("ibv_reg_dmabuf_mr", "IBVERBS_1.12"),
            dereg_mr: lib.required("ibv_dereg_mr", V)?,
            create_cq: lib.required("ibv_create_cq", V)?,
            destroy_cq: lib.required("ibv_destroy_cq", V)?,
            create_comp_channel: lib.required("ibv_create_comp_channel", "IBVERBS_1.0")?,
            destroy_comp_channel: lib.required("ibv_destroy_comp_channel", "IBVERBS_1.0")?,
            get_cq_event: lib.required("ibv_get_cq_event", V)?,
            ack_cq_events: lib.required("ibv_ack_cq_events", V)?,
            create_qp: lib.required("ibv_create_qp", V)?,
            destroy_qp: lib.required("ibv_destroy_qp", V)?,
            modify_qp: lib.required("ibv_modify_qp", V)?,
            create_srq: lib.required("ibv_create_srq", V)?,
            destroy_srq: lib.required("ibv_destroy_srq", V)?,
            create_ah: lib.required("ibv_create_ah", V)?,
            destroy_ah: lib.required("ibv_destroy_ah", V)?,
        } })
    }
}

impl EfaFns {
    pub(crate) fn resolve(lib: &Library) -> Result<EfaFns, LoadError> {
        // SAFETY: as in `VerbsFns::resolve`, from `<infiniband/efadv.h>`.
        Ok(unsafe { EfaFns {
            query_device: lib.required("efadv_query_device", "EFA_1.1")?,
            create_driver_qp: lib.required("efadv_create_driver_qp", "EFA_1.0")?,
            create_qp_ex: lib.required("efadv_create_qp_ex", "EFA_1.1")?,
        } })
    }
}
