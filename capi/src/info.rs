//! C `fi_info` trees <-> the core's `Info`, in the current struct shape:
//! reading a caller's tree (bounded strings and blobs), building one with
//! the C allocator, and the current-shape `fi_freeinfo` / `fi_dupinfo`.

use libc::{c_char, c_int, c_void};
use rfabric_core::abi::*;
use rfabric_core::error::{Error, EINVAL, ENOMEM};
use rfabric_core::info::{DomainAttr, EpAttr, FabricAttr, Info};
use std::ptr;

/// Longest string we accept from a caller-built `fi_info` (names, node,
/// service): anything longer is treated as unterminated.
pub(crate) const MAX_STR: usize = 4096;
/// Largest address or auth key we copy out of a caller-built `fi_info`.
const MAX_BLOB: usize = 1 << 16;

// ---------- C -> Rust ----------

/// # Safety
/// `p` is NULL or a NUL-terminated string (checked up to `MAX_STR`).
pub(crate) unsafe fn opt_str(p: *const c_char) -> Result<Option<String>, Error> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: caller promises a string; bounded_cstr stops at MAX_STR.
    match unsafe { rfabric_core::dl::bounded_cstr(p, MAX_STR) } {
        Some(s) => Ok(Some(s)),
        None => Err(EINVAL),
    }
}

/// # Safety
/// `p` is NULL or points to `len` readable bytes.
unsafe fn opt_blob(p: *const c_void, len: usize) -> Result<Option<Vec<u8>>, Error> {
    if p.is_null() || len == 0 {
        return Ok(None);
    }
    if len > MAX_BLOB {
        return Err(EINVAL);
    }
    // SAFETY: caller promises `len` readable bytes at `p`.
    Ok(Some(unsafe { std::slice::from_raw_parts(p as *const u8, len) }.to_vec()))
}

/// Read one `fi_info` that an application handed to an object
/// (`fi_domain`, `fi_endpoint`) into the core model. In a DL provider that
/// is the shape of the libfabric that loaded it (`prov_ini`), which may be
/// older than ours; otherwise the current one.
///
/// # Safety
/// `i` points to an `fi_info` of that shape whose pointer members are NULL
/// or valid.
pub(crate) unsafe fn info_from_c(i: *const fi_info) -> Result<Info, Error> {
    #[cfg(feature = "dl")]
    if let Some(v) = crate::prov_ini::host_shape() {
        // SAFETY: `i` has the host's shape, per this function's contract.
        return unsafe { crate::prov_ini::info_from_host(i, v) };
    }
    // SAFETY: the current shape, per this function's contract.
    unsafe { info_from_c_current(i) }
}

/// Read one C `fi_info` (not its `next`) into the core model.
///
/// # Safety
/// `i` points to a current-shape `fi_info` whose pointer members are NULL or
/// valid.
pub(crate) unsafe fn info_from_c_current(i: *const fi_info) -> Result<Info, Error> {
    // SAFETY: caller guarantees a valid fi_info.
    let c = unsafe { &*i };
    let mut out = Info {
        caps: c.caps,
        mode: c.mode,
        addr_format: c.addr_format,
        handle: c.handle as usize,
        nic: c.nic as usize,
        ..Info::default()
    };
    // SAFETY: src/dest addresses are valid for their lengths per fi_info(3).
    unsafe {
        out.src_addr = opt_blob(c.src_addr, c.src_addrlen)?;
        out.dest_addr = opt_blob(c.dest_addr, c.dest_addrlen)?;
    }
    if !c.tx_attr.is_null() {
        // SAFETY: non-NULL attr pointer of a valid fi_info.
        out.tx_attr = Some(unsafe { *c.tx_attr });
    }
    if !c.rx_attr.is_null() {
        // SAFETY: as above.
        out.rx_attr = Some(unsafe { *c.rx_attr });
    }
    if !c.ep_attr.is_null() {
        // SAFETY: as above.
        let e = unsafe { &*c.ep_attr };
        out.ep_attr = Some(EpAttr {
            ep_type: e.r#type,
            protocol: e.protocol,
            protocol_version: e.protocol_version,
            max_msg_size: e.max_msg_size,
            msg_prefix_size: e.msg_prefix_size,
            max_order_raw_size: e.max_order_raw_size,
            max_order_war_size: e.max_order_war_size,
            max_order_waw_size: e.max_order_waw_size,
            mem_tag_format: e.mem_tag_format,
            tx_ctx_cnt: e.tx_ctx_cnt,
            rx_ctx_cnt: e.rx_ctx_cnt,
            // SAFETY: auth_key is valid for auth_key_size bytes.
            auth_key: unsafe { opt_blob(e.auth_key as *const c_void, e.auth_key_size)? },
            xpu_ctx: e.xpu_ctx as usize,
        });
    }
    if !c.domain_attr.is_null() {
        // SAFETY: as above.
        let d = unsafe { &*c.domain_attr };
        out.domain_attr = Some(DomainAttr {
            domain: d.domain as usize,
            // SAFETY: name is NULL or a string.
            name: unsafe { opt_str(d.name)? },
            threading: d.threading,
            control_progress: d.control_progress,
            // SAFETY: the union's two members are the same enum type.
            data_progress: unsafe { d.anon0.data_progress },
            resource_mgmt: d.resource_mgmt,
            av_type: d.av_type,
            mr_mode: d.mr_mode,
            mr_key_size: d.mr_key_size,
            cq_data_size: d.cq_data_size,
            cq_cnt: d.cq_cnt,
            ep_cnt: d.ep_cnt,
            tx_ctx_cnt: d.tx_ctx_cnt,
            rx_ctx_cnt: d.rx_ctx_cnt,
            max_ep_tx_ctx: d.max_ep_tx_ctx,
            max_ep_rx_ctx: d.max_ep_rx_ctx,
            max_ep_stx_ctx: d.max_ep_stx_ctx,
            max_ep_srx_ctx: d.max_ep_srx_ctx,
            cntr_cnt: d.cntr_cnt,
            mr_iov_limit: d.mr_iov_limit,
            caps: d.caps,
            mode: d.mode,
            // SAFETY: auth_key is valid for auth_key_size bytes.
            auth_key: unsafe { opt_blob(d.auth_key as *const c_void, d.auth_key_size)? },
            max_err_data: d.max_err_data,
            mr_cnt: d.mr_cnt,
            tclass: d.tclass,
            max_ep_auth_key: d.max_ep_auth_key,
            max_group_id: d.max_group_id,
            max_cntr_value: d.max_cntr_value,
            max_err_cntr_value: d.max_err_cntr_value,
            max_xpu_ctx_cnt: d.max_xpu_ctx_cnt,
        });
    }
    if !c.fabric_attr.is_null() {
        // SAFETY: as above.
        let f = unsafe { &*c.fabric_attr };
        out.fabric_attr = Some(FabricAttr {
            fabric: f.fabric as usize,
            // SAFETY: NULL or strings.
            name: unsafe { opt_str(f.name)? },
            // SAFETY: as above.
            prov_name: unsafe { opt_str(f.prov_name)? },
            prov_version: f.prov_version,
            api_version: f.api_version,
        });
    }
    Ok(out)
}

// ---------- Rust -> C (C allocator throughout) ----------

fn c_alloc<T>() -> *mut T {
    // SAFETY: calloc of one T; zeroed memory is a valid value for every C
    // struct we allocate (integers and NULL pointers).
    unsafe { libc::calloc(1, std::mem::size_of::<T>()) as *mut T }
}

fn c_strdup(s: &Option<String>) -> *mut c_char {
    match s {
        None => ptr::null_mut(),
        Some(s) => {
            let p = c_alloc_bytes(s.len() + 1) as *mut c_char;
            if !p.is_null() {
                // SAFETY: p has len+1 bytes; calloc left the last one NUL.
                unsafe { ptr::copy_nonoverlapping(s.as_ptr(), p as *mut u8, s.len()) };
            }
            p
        }
    }
}

fn c_alloc_bytes(n: usize) -> *mut c_void {
    // SAFETY: plain allocation.
    unsafe { libc::calloc(1, n.max(1)) }
}

fn c_blob(b: &Option<Vec<u8>>) -> (*mut c_void, usize) {
    match b {
        None => (ptr::null_mut(), 0),
        Some(v) => {
            let p = c_alloc_bytes(v.len());
            if p.is_null() {
                return (p, 0);
            }
            // SAFETY: p has v.len() bytes.
            unsafe { ptr::copy_nonoverlapping(v.as_ptr(), p as *mut u8, v.len()) };
            (p, v.len())
        }
    }
}

/// Build a C `fi_info` (with `next` NULL). NULL on allocation failure.
pub(crate) fn info_to_c(i: &Info) -> *mut fi_info {
    let c = c_alloc::<fi_info>();
    if c.is_null() {
        return c;
    }
    // SAFETY: freshly allocated, zeroed, exclusively ours until returned.
    let ci = unsafe { &mut *c };
    ci.caps = i.caps;
    ci.mode = i.mode;
    ci.addr_format = i.addr_format;
    ci.handle = i.handle as fid_t;
    ci.nic = i.nic as *mut fid_nic;
    (ci.src_addr, ci.src_addrlen) = c_blob(&i.src_addr);
    (ci.dest_addr, ci.dest_addrlen) = c_blob(&i.dest_addr);
    let mut ok = true;
    if let Some(t) = &i.tx_attr {
        ci.tx_attr = c_alloc();
        ok &= !ci.tx_attr.is_null();
        if ok {
            // SAFETY: just allocated.
            unsafe { *ci.tx_attr = *t };
        }
    }
    if let Some(r) = &i.rx_attr {
        ci.rx_attr = c_alloc();
        ok &= !ci.rx_attr.is_null();
        if ok {
            // SAFETY: just allocated.
            unsafe { *ci.rx_attr = *r };
        }
    }
    if let Some(e) = &i.ep_attr {
        let p = c_alloc::<fi_ep_attr>();
        ci.ep_attr = p;
        ok &= !p.is_null();
        if ok {
            // SAFETY: just allocated.
            let ce = unsafe { &mut *p };
            ce.r#type = e.ep_type;
            ce.protocol = e.protocol;
            ce.protocol_version = e.protocol_version;
            ce.max_msg_size = e.max_msg_size;
            ce.msg_prefix_size = e.msg_prefix_size;
            ce.max_order_raw_size = e.max_order_raw_size;
            ce.max_order_war_size = e.max_order_war_size;
            ce.max_order_waw_size = e.max_order_waw_size;
            ce.mem_tag_format = e.mem_tag_format;
            ce.tx_ctx_cnt = e.tx_ctx_cnt;
            ce.rx_ctx_cnt = e.rx_ctx_cnt;
            let (k, n) = c_blob(&e.auth_key);
            ce.auth_key = k as *mut u8;
            ce.auth_key_size = n;
            ce.xpu_ctx = e.xpu_ctx as *mut fid_xpu_ctx;
        }
    }
    if let Some(d) = &i.domain_attr {
        let p = c_alloc::<fi_domain_attr>();
        ci.domain_attr = p;
        ok &= !p.is_null();
        if ok {
            // SAFETY: just allocated.
            let cd = unsafe { &mut *p };
            cd.domain = d.domain as *mut fid_domain;
            cd.name = c_strdup(&d.name);
            cd.threading = d.threading;
            cd.control_progress = d.control_progress;
            cd.anon0.data_progress = d.data_progress;
            cd.resource_mgmt = d.resource_mgmt;
            cd.av_type = d.av_type;
            cd.mr_mode = d.mr_mode;
            cd.mr_key_size = d.mr_key_size;
            cd.cq_data_size = d.cq_data_size;
            cd.cq_cnt = d.cq_cnt;
            cd.ep_cnt = d.ep_cnt;
            cd.tx_ctx_cnt = d.tx_ctx_cnt;
            cd.rx_ctx_cnt = d.rx_ctx_cnt;
            cd.max_ep_tx_ctx = d.max_ep_tx_ctx;
            cd.max_ep_rx_ctx = d.max_ep_rx_ctx;
            cd.max_ep_stx_ctx = d.max_ep_stx_ctx;
            cd.max_ep_srx_ctx = d.max_ep_srx_ctx;
            cd.cntr_cnt = d.cntr_cnt;
            cd.mr_iov_limit = d.mr_iov_limit;
            cd.caps = d.caps;
            cd.mode = d.mode;
            let (k, n) = c_blob(&d.auth_key);
            cd.auth_key = k as *mut u8;
            cd.auth_key_size = n;
            cd.max_err_data = d.max_err_data;
            cd.mr_cnt = d.mr_cnt;
            cd.tclass = d.tclass;
            cd.max_ep_auth_key = d.max_ep_auth_key;
            cd.max_group_id = d.max_group_id;
            cd.max_cntr_value = d.max_cntr_value;
            cd.max_err_cntr_value = d.max_err_cntr_value;
            cd.max_xpu_ctx_cnt = d.max_xpu_ctx_cnt;
            ok &= d.name.is_none() || !cd.name.is_null();
        }
    }
    if let Some(f) = &i.fabric_attr {
        let p = c_alloc::<fi_fabric_attr>();
        ci.fabric_attr = p;
        ok &= !p.is_null();
        if ok {
            // SAFETY: just allocated.
            let cf = unsafe { &mut *p };
            cf.fabric = f.fabric as *mut fid_fabric;
            cf.name = c_strdup(&f.name);
            cf.prov_name = c_strdup(&f.prov_name);
            cf.prov_version = f.prov_version;
            cf.api_version = f.api_version;
        }
    }
    if !ok {
        // SAFETY: c is a tree we built; free what was allocated.
        unsafe { freeinfo_current(c) };
        return ptr::null_mut();
    }
    c
}

/// Link a Vec of infos into one C list. NULL for an empty Vec.
pub(crate) fn list_to_c(infos: &[Info]) -> Result<*mut fi_info, Error> {
    let mut head: *mut fi_info = ptr::null_mut();
    let mut tail: *mut fi_info = ptr::null_mut();
    for i in infos {
        let c = info_to_c(i);
        if c.is_null() {
            // SAFETY: the list built so far is ours.
            unsafe { freeinfo_current(head) };
            return Err(ENOMEM);
        }
        if tail.is_null() {
            head = c;
        } else {
            // SAFETY: tail is the last node we built.
            unsafe { (*tail).next = c };
        }
        tail = c;
    }
    Ok(head)
}

// ---------- the current-shape implementations ----------

/// # Safety
/// `info` is NULL or a list built with the C allocator in the current shape.
pub(crate) unsafe fn freeinfo_current(mut info: *mut fi_info) {
    while !info.is_null() {
        // SAFETY: a valid node of the list.
        let c = unsafe { &mut *info };
        let next = c.next;
        // SAFETY: every pointer member was allocated with malloc/calloc/strdup
        // (by us or by the application) or is NULL; free(NULL) is a no-op.
        unsafe {
            libc::free(c.src_addr);
            libc::free(c.dest_addr);
            libc::free(c.tx_attr as *mut c_void);
            libc::free(c.rx_attr as *mut c_void);
            if !c.ep_attr.is_null() {
                libc::free((*c.ep_attr).auth_key as *mut c_void);
                libc::free(c.ep_attr as *mut c_void);
            }
            if !c.domain_attr.is_null() {
                libc::free((*c.domain_attr).name as *mut c_void);
                libc::free((*c.domain_attr).auth_key as *mut c_void);
                libc::free(c.domain_attr as *mut c_void);
            }
            if !c.fabric_attr.is_null() {
                libc::free((*c.fabric_attr).name as *mut c_void);
                libc::free((*c.fabric_attr).prov_name as *mut c_void);
                libc::free(c.fabric_attr as *mut c_void);
            }
            if !c.nic.is_null() {
                close_fid(c.nic as *mut fid);
            }
            libc::free(info as *mut c_void);
        }
        info = next;
    }
}

/// Close a fid through its own ops table (used for `nic`, which belongs to
/// whichever provider created it).
unsafe fn close_fid(f: *mut fid) {
    // SAFETY: caller passes a live fid.
    let ops = unsafe { (*f).ops };
    if ops.is_null() {
        return;
    }
    // SAFETY: ops is the fid's ops table.
    if let Some(close) = unsafe { (*ops).close } {
        // SAFETY: calling the object's own close.
        unsafe { close(f) };
    }
}

/// # Safety
/// `info` is NULL or a valid current-shape `fi_info`.
pub(crate) unsafe fn dupinfo_current(info: *const fi_info) -> *mut fi_info {
    if info.is_null() {
        return info_to_c(&Info::alloc());
    }
    // SAFETY: caller guarantees validity.
    match unsafe { info_from_c_current(info) } {
        Ok(mut i) => {
            // A nic belongs to its provider; the copy does not share it.
            i.nic = 0;
            let c = info_to_c(&i);
            if !c.is_null() {
                // SAFETY: `info` valid, `c` freshly built.
                unsafe { dup_nic(info, c) };
            }
            c
        }
        Err(_) => ptr::null_mut(),
    }
}

unsafe fn dup_nic(src: *const fi_info, dst: *mut fi_info) {
    // SAFETY: both valid.
    let nic = unsafe { (*src).nic };
    if nic.is_null() {
        return;
    }
    // Upstream duplicates a nic through its `control(FI_DUP)`.
    // SAFETY: nic is a live fid with an ops table.
    unsafe {
        let f = nic as *mut fid;
        let ops = (*f).ops;
        if ops.is_null() {
            return;
        }
        if let Some(control) = (*ops).control {
            let mut out: *mut fid = ptr::null_mut();
            if control(f, FI_DUP as c_int, &mut out as *mut _ as *mut c_void) == 0 {
                (*dst).nic = out as *mut fid_nic;
            }
        }
    }
}
