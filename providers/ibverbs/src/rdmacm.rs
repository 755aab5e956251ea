//! librdmacm, loaded at run time like libibverbs: the connection manager
//! calls an RC endpoint needs (`<rdma/rdma_cma.h>`, version node
//! `RDMACM_1.0`). Where librdmacm is absent, `RdmaCm::load` says so and
//! nothing else is affected.
//!
//! Only `load` fills the table from the real library; tests fill it with a
//! stand-in of their own.

use crate::error::LoadError;
use crate::fns::Library;
use crate::sys::*;
use libc::{c_int, c_void, sockaddr};
use std::sync::Arc;

/// librdmacm's exported functions.
#[derive(Clone, Copy)]
pub struct RdmaCmFns {
    pub create_event_channel: unsafe extern "C" fn() -> *mut rdma_event_channel,
    pub destroy_event_channel: unsafe extern "C" fn(channel: *mut rdma_event_channel),
    pub create_id: unsafe extern "C" fn(
        channel: *mut rdma_event_channel,
        id: *mut *mut rdma_cm_id,
        context: *mut c_void,
        ps: u32,
    ) -> c_int,
    pub destroy_id: unsafe extern "C" fn(id: *mut rdma_cm_id) -> c_int,
    pub bind_addr: unsafe extern "C" fn(id: *mut rdma_cm_id, addr: *mut sockaddr) -> c_int,
    pub resolve_addr:
        unsafe extern "C" fn(id: *mut rdma_cm_id, src: *mut sockaddr, dst: *mut sockaddr, timeout_ms: c_int) -> c_int,
    pub resolve_route: unsafe extern "C" fn(id: *mut rdma_cm_id, timeout_ms: c_int) -> c_int,
    pub create_qp: unsafe extern "C" fn(id: *mut rdma_cm_id, pd: *mut ibv_pd, attr: *mut ibv_qp_init_attr) -> c_int,
    pub destroy_qp: unsafe extern "C" fn(id: *mut rdma_cm_id),
    pub connect: unsafe extern "C" fn(id: *mut rdma_cm_id, param: *mut rdma_conn_param) -> c_int,
    pub listen: unsafe extern "C" fn(id: *mut rdma_cm_id, backlog: c_int) -> c_int,
    pub accept: unsafe extern "C" fn(id: *mut rdma_cm_id, param: *mut rdma_conn_param) -> c_int,
    pub reject: unsafe extern "C" fn(id: *mut rdma_cm_id, private_data: *const c_void, len: u8) -> c_int,
    pub disconnect: unsafe extern "C" fn(id: *mut rdma_cm_id) -> c_int,
    pub get_cm_event: unsafe extern "C" fn(channel: *mut rdma_event_channel, event: *mut *mut rdma_cm_event) -> c_int,
    pub ack_cm_event: unsafe extern "C" fn(event: *mut rdma_cm_event) -> c_int,
}

impl RdmaCmFns {
    fn resolve(lib: &Library) -> Result<RdmaCmFns, LoadError> {
        const V: &str = "RDMACM_1.0";
        // SAFETY: each field's type is written from `<rdma/rdma_cma.h>`'s
        // prototype of the function it is resolved from.
        Ok(unsafe {
            RdmaCmFns {
                create_event_channel: lib.required("rdma_create_event_channel", V)?,
                destroy_event_channel: lib.required("rdma_destroy_event_channel", V)?,
                create_id: lib.required("rdma_create_id", V)?,
                destroy_id: lib.required("rdma_destroy_id", V)?,
                bind_addr: lib.required("rdma_bind_addr", V)?,
                resolve_addr: lib.required("rdma_resolve_addr", V)?,
                resolve_route: lib.required("rdma_resolve_route", V)?,
                create_qp: lib.required("rdma_create_qp", V)?,
                destroy_qp: lib.required("rdma_destroy_qp", V)?,
                connect: lib.required("rdma_connect", V)?,
                listen: lib.required("rdma_listen", V)?,
                accept: lib.required("rdma_accept", V)?,
                reject: lib.required("rdma_reject", V)?,
                disconnect: lib.required("rdma_disconnect", V)?,
                get_cm_event: lib.required("rdma_get_cm_event", V)?,
                ack_cm_event: lib.required("rdma_ack_cm_event", V)?,
            }
        })
    }
}

/// librdmacm, loaded (or a stand-in table, in tests).
#[derive(Clone)]
pub struct RdmaCm {
    fns: RdmaCmFns,
    _lib: Option<Arc<Library>>,
}

impl RdmaCm {
    /// `librdmacm.so.1`.
    pub fn load() -> Result<RdmaCm, LoadError> {
        RdmaCm::load_from("librdmacm.so.1")
    }

    /// The library of this file name.
    pub fn load_from(name: &str) -> Result<RdmaCm, LoadError> {
        let lib = Library::open(name)?;
        let fns = RdmaCmFns::resolve(&lib)?;
        Ok(RdmaCm { fns, _lib: Some(Arc::new(lib)) })
    }

    /// Over a table of the caller's (tests: a stand-in).
    pub fn from_fns(fns: RdmaCmFns) -> RdmaCm {
        RdmaCm { fns, _lib: None }
    }

    pub fn fns(&self) -> &RdmaCmFns {
        &self.fns
    }
}
