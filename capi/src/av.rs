//! The address-vector handle (`fid_av`).

use crate::handle::{enosys_bind, enosys_control, enosys_ops_open, enosys_ops_set, obj_tostr, put_cstr, rc, Handle, RefCount};
use libc::{c_char, c_int, c_void};
use rfabric_core::abi::*;
use rfabric_core::error::{Error, EINVAL};
use rfabric_core::provider::AddressVector;
use std::sync::Arc;

#[repr(C)]
pub(crate) struct AvHandle {
    pub(crate) fid: fid_av,
    pub(crate) obj: Arc<dyn AddressVector>,
    /// The domain's count of children.
    parent: *const RefCount,
    pub(crate) refs: RefCount,
}

unsafe extern "C" fn av_close(f: *mut fid) -> c_int {
    guard!(-FI_EOTHER, {
        // SAFETY: checked against our ops table.
        let Some(h) = (unsafe { AvHandle::from_fid(f) }) else { return -FI_EINVAL };
        if h.refs.busy() {
            return -FI_EBUSY;
        }
        // SAFETY: the domain outlives its AVs (its count).
        unsafe { (*h.parent).put() };
        // SAFETY: created by Box::into_raw in domain_av_open; closed once.
        drop(unsafe { AvHandle::from_raw(h) });
        0
    })
}

// SAFETY: #[repr(C)] with the fid first (in fid_av); AV_FI_OPS is used by
// this handle type only.
unsafe impl Handle for AvHandle {
    fn fi_ops() -> &'static fi_ops {
        &AV_FI_OPS
    }
}

pub(crate) static AV_FI_OPS: fi_ops = fi_ops {
    size: std::mem::size_of::<fi_ops>(),
    close: Some(av_close),
    bind: Some(enosys_bind::<AvHandle>),
    control: Some(enosys_control::<AvHandle>),
    ops_open: Some(enosys_ops_open::<AvHandle>),
    tostr: Some(obj_tostr::<AvHandle>),
    ops_set: Some(enosys_ops_set::<AvHandle>),
};

/// Longest string address accepted (`FI_ADDR_STR`).
const MAX_STR_ADDR: usize = 4096;

/// # Safety
/// `p` points to a NUL-terminated string or at least MAX_STR_ADDR bytes.
unsafe fn str_addr<'a>(p: *const u8) -> Result<&'a [u8], Error> {
    for n in 0..MAX_STR_ADDR {
        // SAFETY: reading up to the NUL (caller).
        if unsafe { *p.add(n) } == 0 {
            // SAFETY: the n bytes before the NUL are readable.
            return Ok(unsafe { std::slice::from_raw_parts(p, n + 1) });
        }
    }
    Err(EINVAL)
}

unsafe extern "C" fn av_insert(av: *mut fid_av, addr: *const c_void, count: usize, fi_addr: *mut fi_addr_t, flags: u64, ctx: *mut c_void) -> c_int {
    guard!(-FI_EOTHER, {
        // SAFETY: checked against our ops table.
        let Some(h) = (unsafe { AvHandle::from_fid(av) }) else { return -FI_EINVAL };
        if count == 0 {
            return 0;
        }
        null_check!(addr);
        let mut list: Vec<&[u8]> = Vec::with_capacity(count.min(1 << 16));
        let mut p = addr as *const u8;
        for _ in 0..count {
            match h.obj.addr_len() {
                Some(n) => {
                    // SAFETY: the caller's array holds count addresses of n bytes.
                    list.push(unsafe { std::slice::from_raw_parts(p, n) });
                    // SAFETY: stays within (or one past) the caller's array.
                    p = unsafe { p.add(n) };
                }
                None => {
                    // SAFETY: string addresses follow each other, each NUL-terminated.
                    match unsafe { str_addr(p) } {
                        Ok(s) => {
                            list.push(s);
                            // SAFETY: next string starts after the NUL.
                            p = unsafe { p.add(s.len()) };
                        }
                        Err(e) => return e.to_c(),
                    }
                }
            }
        }
        let out = if fi_addr.is_null() {
            None
        } else {
            // SAFETY: fi_addr holds count values.
            Some(unsafe { std::slice::from_raw_parts_mut(fi_addr, count) })
        };
        if flags & FI_SYNC_ERR != 0 {
            // fi_av(3): `context` is an array of `count` ints that receives
            // 0 or the FI_E* code of each insertion.
            if ctx.is_null() {
                rfabric_core::fi_warn!("core", FI_LOG_AV, "fi_av_insert: FI_SYNC_ERR without an array of results in context");
                return -FI_EINVAL;
            }
            // SAFETY: with FI_SYNC_ERR the caller's context holds count ints.
            let errs = unsafe { std::slice::from_raw_parts_mut(ctx as *mut c_int, count) };
            let mut out = out;
            let mut done = 0;
            for (i, a) in list.iter().enumerate() {
                let one = out.as_deref_mut().map(|o| &mut o[i..i + 1]);
                match h.obj.insert(std::slice::from_ref(a), one, flags & !FI_SYNC_ERR) {
                    Ok(1) => {
                        errs[i] = 0;
                        done += 1;
                    }
                    Ok(_) => errs[i] = FI_EINVAL,
                    Err(e) => {
                        errs[i] = e.0;
                        if let Some(o) = out.as_deref_mut() {
                            o[i] = FI_ADDR_NOTAVAIL;
                        }
                    }
                }
            }
            return done;
        }
        match h.obj.insert(&list, out, flags) {
            Ok(n) => n as c_int,
            Err(e) => e.to_c(),
        }
    })
}

unsafe extern "C" fn av_remove(av: *mut fid_av, fi_addr: *mut fi_addr_t, count: usize, flags: u64) -> c_int {
    guard!(-FI_EOTHER, {
        // SAFETY: checked against our ops table.
        let Some(h) = (unsafe { AvHandle::from_fid(av) }) else { return -FI_EINVAL };
        if count == 0 {
            return 0;
        }
        null_check!(fi_addr);
        // SAFETY: fi_addr holds count values.
        let v = unsafe { std::slice::from_raw_parts(fi_addr, count) };
        rc(h.obj.remove(v, flags))
    })
}

unsafe extern "C" fn av_lookup(av: *mut fid_av, fi_addr: fi_addr_t, addr: *mut c_void, addrlen: *mut usize) -> c_int {
    guard!(-FI_EOTHER, {
        null_check!(addrlen);
        // SAFETY: checked against our ops table.
        let Some(h) = (unsafe { AvHandle::from_fid(av) }) else { return -FI_EINVAL };
        // SAFETY: addrlen non-NULL.
        let cap = if addr.is_null() { 0 } else { unsafe { *addrlen } };
        let buf: &mut [u8] = if cap == 0 {
            &mut []
        } else {
            // SAFETY: addr holds *addrlen bytes.
            unsafe { std::slice::from_raw_parts_mut(addr as *mut u8, cap) }
        };
        match h.obj.lookup(fi_addr, buf) {
            Ok(n) => {
                // SAFETY: addrlen non-NULL.
                unsafe { *addrlen = n };
                0
            }
            Err(e) => e.to_c(),
        }
    })
}

unsafe extern "C" fn av_straddr(av: *mut fid_av, addr: *const c_void, buf: *mut c_char, len: *mut usize) -> *const c_char {
    guard!(std::ptr::null(), {
        if addr.is_null() || len.is_null() {
            return std::ptr::null();
        }
        // SAFETY: checked against our ops table.
        let Some(h) = (unsafe { AvHandle::from_fid(av) }) else { return std::ptr::null() };
        let raw = match h.obj.addr_len() {
            // SAFETY: addr holds one address of n bytes.
            Some(n) => unsafe { std::slice::from_raw_parts(addr as *const u8, n) },
            // SAFETY: a NUL-terminated string address.
            None => match unsafe { str_addr(addr as *const u8) } {
                Ok(s) => s,
                Err(_) => return std::ptr::null(),
            },
        };
        let s = h.obj.straddr(raw);
        // SAFETY: len non-NULL; buf holds *len bytes.
        unsafe {
            put_cstr(buf, *len, &s);
            *len = s.len() + 1;
        }
        buf
    })
}

enosys_fn!(av_insertsvc<AvHandle>(*mut fid_av, *const c_char, *const c_char, *mut fi_addr_t, u64, *mut c_void) -> c_int);
enosys_fn!(av_insertsym<AvHandle>(*mut fid_av, *const c_char, usize, *const c_char, usize, *mut fi_addr_t, u64, *mut c_void) -> c_int);
enosys_fn!(av_av_set<AvHandle>(*mut fid_av, *mut fi_av_set_attr, *mut *mut fid_av_set, *mut c_void) -> c_int);
enosys_fn!(av_insert_auth_key<AvHandle>(*mut fid_av, *const c_void, usize, *mut fi_addr_t, u64) -> c_int);
enosys_fn!(av_lookup_auth_key<AvHandle>(*mut fid_av, fi_addr_t, *mut c_void, *mut usize) -> c_int);
enosys_fn!(av_set_user_id<AvHandle>(*mut fid_av, fi_addr_t, fi_addr_t, u64) -> c_int);
/// `fi_av_lookup2`: with `FI_XPU` and a context, the raw address device
/// code passes as a destination is the `fi_addr_t` itself (the host proxy
/// translates it); without `FI_XPU`, as `fi_av_lookup`.
unsafe extern "C" fn av_lookup2(av: *mut fid_av, fi_addr: fi_addr_t, addr: *mut c_void, addrlen: *mut usize, flags: u64, ctx: *mut fid_xpu_ctx) -> c_int {
    guard!(-FI_EOTHER, {
        null_check!(addrlen);
        // SAFETY: checked against the AV ops table.
        let Some(a) = (unsafe { AvHandle::from_fid(av) }) else { return -FI_EINVAL };
        // SAFETY: addrlen non-NULL.
        let len = unsafe { *addrlen };
        if flags & !FI_XPU != 0 {
            return -FI_EBADFLAGS;
        }
        if flags & FI_XPU == 0 {
            if !addr.is_null() || len == 0 {
                // SAFETY: addr holds len bytes (caller).
                let buf = unsafe { std::slice::from_raw_parts_mut(addr as *mut u8, if addr.is_null() { 0 } else { len }) };
                return match a.obj.lookup(fi_addr, buf) {
                    Ok(n) => {
                        // SAFETY: addrlen non-NULL.
                        unsafe { *addrlen = n };
                        0
                    }
                    Err(e) => e.to_c(),
                };
            }
            return -FI_EINVAL;
        }
        // SAFETY: NULL or the application's handle, checked before use.
        match unsafe { crate::xpu::ctx_of(ctx) } {
            Ok(Some(_)) => {}
            _ => return -FI_EINVAL,
        }
        // The entry must exist.
        let mut probe = [0u8; 256];
        if let Err(e) = a.obj.lookup(fi_addr, &mut probe) {
            return e.to_c();
        }
        // SAFETY: addrlen non-NULL.
        unsafe { *addrlen = rfabric_core::xpu::AV_ADDR_SIZE };
        if len < rfabric_core::xpu::AV_ADDR_SIZE || addr.is_null() {
            return -FI_ETOOSMALL;
        }
        // SAFETY: addr holds at least 8 bytes.
        unsafe { (addr as *mut u64).write_unaligned(fi_addr) };
        0
    })
}


static AV_OPS: fi_ops_av = fi_ops_av {
    size: std::mem::size_of::<fi_ops_av>(),
    insert: Some(av_insert),
    insertsvc: Some(av_insertsvc),
    insertsym: Some(av_insertsym),
    remove: Some(av_remove),
    lookup: Some(av_lookup),
    straddr: Some(av_straddr),
    av_set: Some(av_av_set),
    insert_auth_key: Some(av_insert_auth_key),
    lookup_auth_key: Some(av_lookup_auth_key),
    set_user_id: Some(av_set_user_id),
    lookup2: Some(av_lookup2),
};

/// Hand an AV the domain's provider opened to the application.
///
/// # Safety
/// `out` is writable; `parent` (the domain's count of children) outlives
/// the AV.
pub(crate) unsafe fn publish(obj: Arc<dyn AddressVector>, parent: &RefCount, context: *mut c_void, out: *mut *mut fid_av) -> c_int {
    parent.get();
    let h = Box::new(AvHandle {
        fid: fid_av {
            fid: fid { fclass: FI_CLASS_AV, context, ops: AvHandle::fi_ops_ptr() },
            ops: &AV_OPS as *const fi_ops_av as *mut fi_ops_av,
        },
        obj,
        parent,
        refs: RefCount::default(),
    });
    // SAFETY: out writable (caller).
    unsafe { *out = AvHandle::into_raw(h) as *mut fid_av };
    0
}
