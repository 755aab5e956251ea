//! The real libraries: Debian's `libibverbs1` and `ibverbs-providers`
//! (libefa.so.1), which the test suite installs, on a machine without an
//! RDMA device; and names that do not exist or name the wrong library.

use crate::{LibNames, LoadError, Verbs};
use std::path::Path;

const NEED: &str = "these tests need rdma-core's libraries (Debian: libibverbs1 ibverbs-providers)";

fn names(verbs: &str, efa: Option<&str>) -> LibNames {
    LibNames { verbs: verbs.into(), efa: efa.map(Into::into) }
}

fn real() -> Verbs {
    Verbs::load().unwrap_or_else(|e| panic!("{NEED}: {e}"))
}

#[test]
fn a_missing_libibverbs_is_an_error_value_that_names_it() {
    let name = "libibverbs-rfabric-test-missing.so.1";
    let err = Verbs::load_from(&names(name, Some("libefa.so.1"))).err().expect("a missing library loaded");
    match &err {
        LoadError::NoLibrary { name: n, reason } => {
            assert_eq!(n, name);
            assert!(!reason.is_empty());
        }
        e => panic!("expected NoLibrary, got {e:?}"),
    }
    assert!(err.to_string().contains(name), "{err}");
}

#[test]
fn a_library_without_the_verbs_is_no_symbol() {
    let err = Verbs::load_from(&names("libc.so.6", None)).err().expect("libc loaded as libibverbs");
    assert_eq!(
        err,
        LoadError::NoSymbol { library: "libc.so.6".into(), symbol: "ibv_get_device_list", version: "IBVERBS_1.1" }
    );
    assert!(err.to_string().contains("ibv_get_device_list"), "{err}");
}

#[test]
fn libibverbs_without_a_device_lists_none() {
    let v = real();
    assert_eq!(v.library_name(), Some("libibverbs.so.1"));
    assert!(v.has_dmabuf(), "rdma-core 34 and later has ibv_reg_dmabuf_mr");
    // Without kernel RDMA support ibv_get_device_list fails with ENOSYS:
    // that is an empty list, not an error.
    let devices = v.devices().expect("devices() without an RDMA device");
    if !Path::new("/sys/class/infiniband").exists() {
        assert!(devices.is_empty(), "{devices:?}");
        let err = v.open_device("rfabric-test-no-such-device").err().expect("opened a device that is not there");
        assert_eq!(err.errno, libc::ENODEV, "{err}");
    }
}

#[test]
fn the_table_binds_what_a_linked_program_binds() {
    // dlsym without a version finds a symbol's default version, the one a
    // program linked against the headers binds; the table's dlvsym with the
    // version nodes of `fns` must find the same functions.
    let v = real();
    // SAFETY: the library is already loaded (by `real`); opening it again
    // only takes a reference.
    let lib = unsafe { libloading::Library::new("libibverbs.so.1") }.expect(NEED);
    let f = v.fns();
    let table: &[(&str, usize)] = &[
        ("ibv_get_device_list", f.get_device_list as usize),
        ("ibv_free_device_list", f.free_device_list as usize),
        ("ibv_get_device_name", f.get_device_name as usize),
        ("ibv_open_device", f.open_device as usize),
        ("ibv_close_device", f.close_device as usize),
        ("ibv_query_device", f.query_device as usize),
        ("ibv_query_port", f.query_port as usize),
        ("ibv_query_gid", f.query_gid as usize),
        ("ibv_alloc_pd", f.alloc_pd as usize),
        ("ibv_dealloc_pd", f.dealloc_pd as usize),
        ("ibv_reg_mr", f.reg_mr as usize),
        ("ibv_reg_mr_iova2", f.reg_mr_iova2 as usize),
        ("ibv_reg_dmabuf_mr", f.reg_dmabuf_mr.map_or(0, |f| f as usize)),
        ("ibv_dereg_mr", f.dereg_mr as usize),
        ("ibv_create_cq", f.create_cq as usize),
        ("ibv_destroy_cq", f.destroy_cq as usize),
        ("ibv_create_qp", f.create_qp as usize),
        ("ibv_destroy_qp", f.destroy_qp as usize),
        ("ibv_modify_qp", f.modify_qp as usize),
        ("ibv_create_ah", f.create_ah as usize),
        ("ibv_destroy_ah", f.destroy_ah as usize),
    ];
    for &(name, ours) in table {
        // SAFETY: read as a plain address, never called.
        let sym = unsafe { lib.get::<*mut libc::c_void>(name.as_bytes()) }.unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(ours, *sym as usize, "{name}");
    }
}

#[test]
fn libefa_present() {
    let v = real();
    assert!(v.efa_fns().is_some(), "libefa.so.1 did not load: {:?}", v.efa_error());
    assert_eq!(v.efa_error(), None);
}

#[test]
fn libefa_missing_leaves_efa_out() {
    let name = "libefa-rfabric-test-missing.so.1";
    let v = Verbs::load_from(&names("libibverbs.so.1", Some(name))).unwrap_or_else(|e| panic!("{NEED}: {e}"));
    assert!(v.efa_fns().is_none());
    match v.efa_error() {
        Some(LoadError::NoLibrary { name: n, .. }) => assert_eq!(n, name),
        e => panic!("expected NoLibrary, got {e:?}"),
    }
    // The verbs themselves are all there.
    assert!(v.devices().is_ok());
}

#[test]
fn a_libefa_without_efadv_leaves_efa_out() {
    // libmlx5 (ibverbs-providers) loads but has no efadv_*.
    let v = Verbs::load_from(&names("libibverbs.so.1", Some("libmlx5.so.1"))).unwrap_or_else(|e| panic!("{NEED}: {e}"));
    assert!(v.efa_fns().is_none());
    assert_eq!(
        v.efa_error(),
        Some(&LoadError::NoSymbol { library: "libmlx5.so.1".into(), symbol: "efadv_query_device", version: "EFA_1.1" })
    );
}

#[test]
fn no_libefa_asked_for() {
    let v = Verbs::load_from(&names("libibverbs.so.1", None)).unwrap_or_else(|e| panic!("{NEED}: {e}"));
    assert!(v.efa_fns().is_none());
    assert_eq!(v.efa_error(), None);
}

/// Debian's librdmacm1 loads and has every function `RdmaCmFns` names in
/// `RDMACM_1.0`; a missing one is a clean `NoLibrary`.
#[test]
fn librdmacm_loads_or_is_cleanly_absent() {
    match crate::RdmaCm::load() {
        Ok(_) => {}
        Err(LoadError::NoLibrary { name, .. }) => assert_eq!(name, "librdmacm.so.1"),
        Err(e) => panic!("librdmacm.so.1 lacks a function: {e}"),
    }
    assert!(matches!(crate::RdmaCm::load_from("librdmacm-not-here.so.1"), Err(LoadError::NoLibrary { .. })));
}
