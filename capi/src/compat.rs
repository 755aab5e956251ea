//! The old (`@FABRIC_1.x`) `fi_info` shapes and the conversions between
//! them and the current one: widening a program's old-shape hints or a DL
//! provider's old-shape list, narrowing a current list for an old program,
//! and freeing or duplicating an old-shape list. The versioned symbols that
//! use them are in `versioned.rs`.
//!
//! Memory rule: an old-shape struct may be exactly as long as its old size
//! (the program allocated it with the old `sizeof`), so nothing here reads or
//! writes past that size. Every old shape is a prefix of the current one, so
//! widening copies the old size and zero-fills the rest, and narrowing copies
//! the first old-size bytes into a block of exactly that size.

use core::ffi::c_void;
use core::mem::size_of;
use core::ptr;

use rfabric_core::abi::{
    fi_domain_attr, fi_ep_attr, fi_fabric_attr, fi_info, fi_rx_attr, fi_tx_attr,
    fid_nic,
};
use crate::compat_shapes::*;
use crate::info::{dupinfo_current, freeinfo_current};

/// One of the ABI versions whose `fi_info` shape differs from the current one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CompatVer {
    V1_0,
    V1_1,
    V1_2,
    V1_3,
    V1_7,
    V1_8,
    V1_9,
}

/// The byte sizes of one version's `fi_info` tree, and which owning pointer
/// members its shape has.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Shape {
    pub info: usize,
    pub tx: usize,
    pub rx: usize,
    pub ep: usize,
    pub domain: usize,
    pub fabric: usize,
    /// Bytes of the fabric attributes that hold members: the 1.0 shape ends
    /// in 4 bytes of padding where the current one has `api_version`.
    pub fabric_members: usize,
    /// `fi_info.nic` exists (ABI 1.2 and later).
    pub nic: bool,
    /// `fi_ep_attr.auth_key` / `fi_domain_attr.auth_key` exist (ABI 1.1 and later).
    pub auth_key: bool,
}

impl CompatVer {
    #[allow(dead_code)]
    pub(crate) const ALL: [CompatVer; 7] = [
        CompatVer::V1_0,
        CompatVer::V1_1,
        CompatVer::V1_2,
        CompatVer::V1_3,
        CompatVer::V1_7,
        CompatVer::V1_8,
        CompatVer::V1_9,
    ];

    pub(crate) const fn shape(self) -> Shape {
        use CompatVer::*;
        let tx = match self {
            V1_0 | V1_1 | V1_2 => size_of::<fi_tx_attr_1_0>(),
            _ => size_of::<fi_tx_attr>(),
        };
        let ep = match self {
            V1_0 => size_of::<fi_ep_attr_1_0>(),
            _ => size_of::<fi_ep_attr_1_9>(),
        };
        let domain = match self {
            V1_0 => size_of::<fi_domain_attr_1_0>(),
            V1_1 | V1_2 => size_of::<fi_domain_attr_1_1>(),
            V1_3 => size_of::<fi_domain_attr_1_3>(),
            V1_7 => size_of::<fi_domain_attr_1_7>(),
            V1_8 => size_of::<fi_domain_attr_1_8>(),
            V1_9 => size_of::<fi_domain_attr_1_9>(),
        };
        let (info, nic) = match self {
            V1_0 | V1_1 => (size_of::<fi_info_1_0>(), false),
            _ => (size_of::<fi_info_1_2>(), true),
        };
        let (fabric, fabric_members) = match self {
            V1_0 => (
                size_of::<fi_fabric_attr_1_0>(),
                core::mem::offset_of!(fi_fabric_attr_1_0, prov_version) + size_of::<u32>(),
            ),
            _ => (size_of::<fi_fabric_attr>(), size_of::<fi_fabric_attr>()),
        };
        Shape {
            info,
            tx,
            rx: size_of::<fi_rx_attr>(),
            ep,
            domain,
            fabric,
            fabric_members,
            nic,
            auth_key: !matches!(self, V1_0),
        }
    }
}

// The member offsets the conversions rely on lie inside every shape that has them.
const _: () = {
    assert!(size_of::<fi_info_1_0>() <= size_of::<fi_info>());
    assert!(core::mem::offset_of!(fi_info_1_2, nic) == core::mem::offset_of!(fi_info, nic));
    assert!(core::mem::offset_of!(fi_ep_attr_1_9, auth_key) == core::mem::offset_of!(fi_ep_attr, auth_key));
    assert!(
        core::mem::offset_of!(fi_domain_attr_1_1, auth_key)
            == core::mem::offset_of!(fi_domain_attr, auth_key)
    );
    assert!(size_of::<fi_domain_attr_1_9>() <= size_of::<fi_domain_attr>());
    assert!(size_of::<fi_tx_attr_1_0>() <= size_of::<fi_tx_attr>());
    assert!(size_of::<fi_ep_attr_1_9>() <= size_of::<fi_ep_attr>());
    assert!(size_of::<fi_fabric_attr_1_0>() <= size_of::<fi_fabric_attr>());
};

/// Copy the first `n` bytes of `src` over `dst`.
///
/// # Safety
/// `src` is readable and `dst` writable for `n` bytes; they do not overlap.
unsafe fn copy_prefix<S, D>(src: *const S, dst: *mut D, n: usize) {
    debug_assert!(n <= size_of::<D>());
    // SAFETY: the caller guarantees both ranges.
    unsafe { ptr::copy_nonoverlapping(src as *const u8, dst as *mut u8, n) }
}

/// The largest current-shape struct an old-shape block can stand for.
const PADDED: usize = {
    let a = [
        size_of::<fi_info>(),
        size_of::<fi_tx_attr>(),
        size_of::<fi_rx_attr>(),
        size_of::<fi_ep_attr>(),
        size_of::<fi_domain_attr>(),
        size_of::<fi_fabric_attr>(),
    ];
    let mut m = 0;
    let mut i = 0;
    while i < a.len() {
        if a[i] > m {
            m = a[i];
        }
        i += 1;
    }
    m
};

/// A C-allocated block holding the first `size` bytes of `src`, zero-filled
/// up to the largest current struct; NULL when out of memory. The shape is
/// the old one, but an old program that hands the block to a reader of the
/// current shape (`fi_tostr(info, FI_TYPE_INFO)` does exactly that) makes it
/// read zeros, not past the end of the block.
///
/// # Safety
/// `src` is readable for `size` bytes.
unsafe fn c_dup_prefix(src: *const c_void, size: usize) -> *mut c_void {
    // SAFETY: plain C allocation.
    let p = unsafe { libc::calloc(1, size.max(PADDED)) };
    if !p.is_null() {
        // SAFETY: `p` is a fresh block of `size` bytes; the caller vouches for `src`.
        unsafe { ptr::copy_nonoverlapping(src as *const u8, p as *mut u8, size) };
    }
    p
}

/// Deep copy of one old-shape `fi_info` (hints) into a current-shape one,
/// allocated with the C allocator. Members that did not exist in `v` are 0;
/// `next` is not followed (hints are one entry). NULL in, NULL out; NULL
/// also when out of memory.
///
/// # Safety
/// `old` is NULL or a valid `fi_info` tree of shape `v`.
pub(crate) unsafe fn widen_info(old: *const c_void, v: CompatVer) -> *mut fi_info {
    if old.is_null() {
        return ptr::null_mut();
    }
    let s = v.shape();
    // A current-shape view of `old` on the stack: its attribute structs are
    // zeroed current-size copies of the old ones, its pointers to strings,
    // addresses, keys and the nic are borrowed. The current dupinfo then
    // makes the deep, C-allocated copy.
    // SAFETY: all these are plain C structs for which all-zero is valid.
    let (mut info, mut tx, mut rx, mut ep, mut dom, mut fab) = unsafe {
        (
            core::mem::zeroed::<fi_info>(),
            core::mem::zeroed::<fi_tx_attr>(),
            core::mem::zeroed::<fi_rx_attr>(),
            core::mem::zeroed::<fi_ep_attr>(),
            core::mem::zeroed::<fi_domain_attr>(),
            core::mem::zeroed::<fi_fabric_attr>(),
        )
    };
    let head = old as *const fi_info_1_0;
    // SAFETY: `old` points to at least `s.info` readable bytes (its shape),
    // and every attribute pointer it holds to at least that attribute's old size.
    unsafe {
        copy_prefix(head, &mut info, s.info);
        info.next = ptr::null_mut();
        info.tx_attr = ptr::null_mut();
        info.rx_attr = ptr::null_mut();
        info.ep_attr = ptr::null_mut();
        info.domain_attr = ptr::null_mut();
        info.fabric_attr = ptr::null_mut();
        if !(*head).tx_attr.is_null() {
            copy_prefix((*head).tx_attr, &mut tx, s.tx);
            info.tx_attr = &mut tx;
        }
        if !(*head).rx_attr.is_null() {
            copy_prefix((*head).rx_attr, &mut rx, s.rx);
            info.rx_attr = &mut rx;
        }
        if !(*head).ep_attr.is_null() {
            copy_prefix((*head).ep_attr, &mut ep, s.ep);
            info.ep_attr = &mut ep;
        }
        if !(*head).domain_attr.is_null() {
            copy_prefix((*head).domain_attr, &mut dom, s.domain);
            info.domain_attr = &mut dom;
        }
        if !(*head).fabric_attr.is_null() {
            copy_prefix((*head).fabric_attr, &mut fab, s.fabric_members);
            info.fabric_attr = &mut fab;
        }
    }
    // SAFETY: `info` is a valid current-shape tree for the duration of the
    // call; dupinfo only reads it.
    unsafe { dupinfo_current(&info) }
}

/// Build an old-shape copy of one current node, taking over its owning
/// pointers that the old shape has (they are set to NULL in `cur`, so freeing
/// `cur` afterwards frees only what the old shape could not hold). On out of
/// memory returns NULL and leaves `cur` untouched.
///
/// # Safety
/// `cur` is a valid, C-allocated current-shape node.
unsafe fn narrow_node(cur: *mut fi_info, s: &Shape) -> *mut c_void {
    // SAFETY: `cur` is valid; reading its pointer members.
    let c = unsafe { &mut *cur };
    // Allocate every block first, so that failure changes nothing.
    // SAFETY: each source is a current-size struct, longer than the old size.
    let blocks = unsafe {
        [
            c_dup_prefix(cur as *const c_void, s.info),
            dup_opt(c.tx_attr as *const c_void, s.tx),
            dup_opt(c.rx_attr as *const c_void, s.rx),
            dup_opt(c.ep_attr as *const c_void, s.ep),
            dup_opt(c.domain_attr as *const c_void, s.domain),
            dup_opt(c.fabric_attr as *const c_void, s.fabric),
        ]
    };
    let srcs = [
        cur as *const c_void,
        c.tx_attr as *const c_void,
        c.rx_attr as *const c_void,
        c.ep_attr as *const c_void,
        c.domain_attr as *const c_void,
        c.fabric_attr as *const c_void,
    ];
    if blocks.iter().zip(srcs.iter()).any(|(b, s)| b.is_null() && !s.is_null()) {
        for b in blocks {
            // SAFETY: each is NULL or a block from calloc above.
            unsafe { libc::free(b) };
        }
        return ptr::null_mut();
    }
    let old = blocks[0] as *mut fi_info_1_0;
    // SAFETY: `old` is a fresh block of `s.info` >= size_of::<fi_info_1_0>() bytes.
    unsafe {
        (*old).next = ptr::null_mut();
        (*old).tx_attr = blocks[1];
        (*old).rx_attr = blocks[2];
        (*old).ep_attr = blocks[3];
        (*old).domain_attr = blocks[4];
        (*old).fabric_attr = blocks[5];
    }
    // Ownership moves: what the old copy now points to is no longer `cur`'s.
    c.src_addr = ptr::null_mut();
    c.dest_addr = ptr::null_mut();
    if s.nic {
        c.nic = ptr::null_mut();
    }
    // SAFETY: attribute pointers of `cur` are valid when non-NULL.
    unsafe {
        if let Some(d) = c.domain_attr.as_mut() {
            d.name = ptr::null_mut();
            if s.auth_key {
                d.auth_key = ptr::null_mut();
            }
        }
        if let Some(e) = c.ep_attr.as_mut() {
            if s.auth_key {
                e.auth_key = ptr::null_mut();
            }
        }
        if let Some(f) = c.fabric_attr.as_mut() {
            f.name = ptr::null_mut();
            f.prov_name = ptr::null_mut();
        }
    }
    old as *mut c_void
}

/// `c_dup_prefix` that passes NULL through.
///
/// # Safety
/// As `c_dup_prefix` when `src` is not NULL.
unsafe fn dup_opt(src: *const c_void, size: usize) -> *mut c_void {
    if src.is_null() {
        ptr::null_mut()
    } else {
        // SAFETY: forwarded contract.
        unsafe { c_dup_prefix(src, size) }
    }
}

/// Turn a current-shape list into an old-shape list of version `v`,
/// freeing the current list. NULL when `cur` is NULL or out of memory (the
/// current list is freed in both cases).
///
/// # Safety
/// `cur` is NULL or a C-allocated current-shape list that the caller gives up.
pub(crate) unsafe fn narrow_info_list(cur: *mut fi_info, v: CompatVer) -> *mut c_void {
    let s = v.shape();
    let mut head: *mut c_void = ptr::null_mut();
    let mut tail: *mut *mut c_void = &mut head;
    let mut node = cur;
    while !node.is_null() {
        // SAFETY: `node` is a valid node of the list we own.
        let old = unsafe { narrow_node(node, &s) };
        if old.is_null() {
            // SAFETY: `head` is an old list we built; `cur` still owns the rest.
            unsafe {
                free_info_old(head, v);
                freeinfo_current(cur);
            }
            return ptr::null_mut();
        }
        // SAFETY: `tail` points to `head` or to the `next` member of the last
        // old node; `old` is a fresh old node; `node` is valid.
        unsafe {
            *tail = old;
            tail = &mut (*(old as *mut fi_info_1_0)).next;
            node = (*node).next;
        }
    }
    // SAFETY: every owning pointer now in the old list was cleared in `cur`.
    unsafe { freeinfo_current(cur) };
    head
}

/// Free an old-shape list of version `v` with everything it owns.
///
/// # Safety
/// `p` is NULL or an old-shape list of version `v` whose members were
/// allocated with the C allocator (as ours are, or the program's own
/// `malloc`/`strdup`).
pub(crate) unsafe fn free_info_old(p: *mut c_void, v: CompatVer) {
    let s = v.shape();
    let mut node = p as *mut fi_info_1_0;
    while !node.is_null() {
        // SAFETY: `node` is a valid old node; each member read lies inside
        // the old shape (`nic` and `auth_key` only where the shape has them).
        unsafe {
            let n = &*node;
            let next = n.next as *mut fi_info_1_0;
            libc::free(n.src_addr);
            libc::free(n.dest_addr);
            libc::free(n.tx_attr);
            libc::free(n.rx_attr);
            if !n.ep_attr.is_null() {
                if s.auth_key {
                    libc::free((*(n.ep_attr as *mut fi_ep_attr_1_9)).auth_key as *mut c_void);
                }
                libc::free(n.ep_attr);
            }
            if !n.domain_attr.is_null() {
                libc::free((*(n.domain_attr as *mut fi_domain_attr_1_0)).name as *mut c_void);
                if s.auth_key {
                    libc::free((*(n.domain_attr as *mut fi_domain_attr_1_1)).auth_key as *mut c_void);
                }
                libc::free(n.domain_attr);
            }
            if !n.fabric_attr.is_null() {
                let f = n.fabric_attr as *mut fi_fabric_attr_1_0;
                libc::free((*f).name as *mut c_void);
                libc::free((*f).prov_name as *mut c_void);
                libc::free(n.fabric_attr);
            }
            if s.nic {
                close_nic((*(node as *mut fi_info_1_2)).nic as *mut fid_nic);
            }
            libc::free(node as *mut c_void);
            node = next;
        }
    }
}

/// Close a nic object through its own `close` operation, as `fi_close` does.
///
/// # Safety
/// `nic` is NULL or a valid `fid_nic` whose ops table is valid.
unsafe fn close_nic(nic: *mut fid_nic) {
    if nic.is_null() {
        return;
    }
    // SAFETY: the caller vouches for the object and its ops table.
    unsafe {
        let ops = (*nic).fid.ops;
        if let Some(close) = ops.as_ref().and_then(|o| o.close) {
            close(&mut (*nic).fid);
        }
    }
}

/// Duplicate one old-shape entry (not the list after it) into a fresh
/// old-shape entry of the same version. NULL gives a zeroed entry with all
/// attribute structs, as `fi_allocinfo` does. NULL when out of memory.
///
/// # Safety
/// `p` is NULL or a valid old-shape `fi_info` of version `v`.
pub(crate) unsafe fn dup_info_old(p: *const c_void, v: CompatVer) -> *mut c_void {
    let cur = if p.is_null() {
        // SAFETY: NULL asks dupinfo for a fresh, empty tree.
        unsafe { dupinfo_current(ptr::null()) }
    } else {
        // SAFETY: forwarded contract.
        unsafe { widen_info(p, v) }
    };
    if cur.is_null() {
        return ptr::null_mut();
    }
    // SAFETY: `cur` is a fresh single-entry list that we give up.
    unsafe { narrow_info_list(cur, v) }
}

/// The 1.0 `fi_fabric_attr` (no `api_version`) in the current shape. The
/// program's API version is somewhere in 1.0 … 1.4, so 1.0 is assumed.
///
/// # Safety
/// `attr` is readable for the 1.0 size of the struct.
pub(crate) unsafe fn widen_fabric_attr_1_0(attr: *const c_void) -> fi_fabric_attr {
    // SAFETY: all-zero is a valid fi_fabric_attr.
    let mut wide: fi_fabric_attr = unsafe { core::mem::zeroed() };
    // SAFETY: the program's struct is at least the 1.0 size (caller).
    unsafe { copy_prefix(attr, &mut wide, CompatVer::V1_0.shape().fabric_members) };
    wide.api_version = 1 << 16;
    wide
}

#[cfg(test)]
#[path = "compat_tests.rs"]
mod tests;
