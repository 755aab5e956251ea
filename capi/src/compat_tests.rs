//! Round trips between the old shapes and the current one. Program-owned
//! old structs are placed flush against a PROT_NONE page, so reading one
//! byte past an old size faults; run under valgrind as well to check the
//! blocks we allocate (see `make check`).

use super::*;
use crate::versioned::{rf_compat_fi_fabric_1_0, rf_compat_fi_freeinfo_1_0, rf_compat_fi_freeinfo_1_9, rf_compat_fi_getinfo_1_0, rf_compat_fi_getinfo_1_3};
use core::ffi::{c_char, c_int};
use rfabric_core::abi::{fi_ops, fid};
use std::collections::HashMap;
use std::ffi::CStr;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A block of `size` bytes ending exactly at a PROT_NONE page.
struct Guarded {
    map: *mut c_void,
    len: usize,
    p: *mut u8,
    size: usize,
}

impl Guarded {
    fn new(size: usize) -> Guarded {
        let page = 4096usize;
        let data_pages = size.div_ceil(page).max(1);
        let len = (data_pages + 1) * page;
        // SAFETY: anonymous private mapping; the last page is then made inaccessible.
        unsafe {
            let map = libc::mmap(
                ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            assert_ne!(map, libc::MAP_FAILED);
            let guard = (map as *mut u8).add(data_pages * page);
            assert_eq!(libc::mprotect(guard as *mut c_void, page, libc::PROT_NONE), 0);
            let p = guard.sub(size);
            Guarded { map, len, p, size }
        }
    }
    fn bytes(&self) -> Vec<u8> {
        // SAFETY: `p` is readable for `size` bytes.
        unsafe { std::slice::from_raw_parts(self.p, self.size).to_vec() }
    }
}

impl Drop for Guarded {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`.
        unsafe { libc::munmap(self.map, self.len) };
    }
}

fn fill(p: *mut u8, n: usize, seed: u8) {
    for i in 0..n {
        // SAFETY: callers pass blocks of at least `n` bytes.
        unsafe { *p.add(i) = seed.wrapping_add((i as u8).wrapping_mul(7)) | 1 };
    }
}

fn cstr(s: &str) -> *mut c_char {
    let c = std::ffi::CString::new(s).unwrap();
    // SAFETY: valid C string.
    unsafe { libc::strdup(c.as_ptr()) }
}

fn bytes_dup(b: &[u8]) -> *mut c_void {
    // SAFETY: fresh C block of b.len() bytes.
    unsafe {
        let p = libc::malloc(b.len());
        ptr::copy_nonoverlapping(b.as_ptr(), p as *mut u8, b.len());
        p
    }
}

/// Where each block of an old tree lives: guard pages (program-owned,
/// read-only use) or the C heap (to be freed by `free_info_old`).
enum Store {
    Guard(Vec<Guarded>),
    Heap,
}

impl Store {
    fn alloc(&mut self, size: usize) -> *mut u8 {
        match self {
            Store::Guard(v) => {
                let g = Guarded::new(size);
                let p = g.p;
                v.push(g);
                p
            }
            // SAFETY: exact-size C block.
            Store::Heap => unsafe { libc::calloc(1, size) as *mut u8 },
        }
    }
}

/// An old-shape entry of version `v` with every byte set to a pattern and
/// every owning pointer to a real C allocation.
fn make_old(v: CompatVer, store: &mut Store, nic: *mut fid_nic) -> *mut c_void {
    let s = v.shape();
    let info = store.alloc(s.info);
    fill(info, s.info, 11);
    let attrs = [
        (s.tx, 23u8),
        (s.rx, 37),
        (s.ep, 41),
        (s.domain, 53),
        (s.fabric, 67),
    ];
    let mut blocks = [ptr::null_mut::<u8>(); 5];
    for (i, (size, seed)) in attrs.iter().enumerate() {
        blocks[i] = store.alloc(*size);
        fill(blocks[i], *size, *seed);
    }
    // SAFETY: each block has its shape's size; members written lie inside it.
    unsafe {
        let h = info as *mut fi_info_1_0;
        (*h).next = ptr::null_mut();
        (*h).src_addrlen = 4;
        (*h).src_addr = bytes_dup(&[1, 2, 3, 4]);
        (*h).dest_addrlen = 6;
        (*h).dest_addr = bytes_dup(&[9, 8, 7, 6, 5, 4]);
        (*h).tx_attr = blocks[0] as *mut c_void;
        (*h).rx_attr = blocks[1] as *mut c_void;
        (*h).ep_attr = blocks[2] as *mut c_void;
        (*h).domain_attr = blocks[3] as *mut c_void;
        (*h).fabric_attr = blocks[4] as *mut c_void;
        if s.nic {
            (*(info as *mut fi_info_1_2)).nic = nic as *mut c_void;
        }
        if s.auth_key {
            let e = blocks[2] as *mut fi_ep_attr_1_9;
            (*e).auth_key_size = 3;
            (*e).auth_key = bytes_dup(&[0xa, 0xb, 0xc]) as *mut u8;
            let d = blocks[3] as *mut fi_domain_attr_1_1;
            (*d).auth_key_size = 5;
            (*d).auth_key = bytes_dup(&[1, 1, 2, 3, 5]) as *mut u8;
        }
        (*(blocks[3] as *mut fi_domain_attr_1_0)).name = cstr("dom0");
        let f = blocks[4] as *mut fi_fabric_attr_1_0;
        (*f).name = cstr("fab0");
        (*f).prov_name = cstr("shm");
    }
    info as *mut c_void
}

/// Frees what `make_old` allocated with malloc when the blocks themselves
/// live in guard pages.
fn free_old_members(p: *mut c_void, v: CompatVer) {
    let s = v.shape();
    // SAFETY: a tree from make_old.
    unsafe {
        let h = p as *mut fi_info_1_0;
        libc::free((*h).src_addr);
        libc::free((*h).dest_addr);
        if s.auth_key {
            libc::free((*((*h).ep_attr as *mut fi_ep_attr_1_9)).auth_key as *mut c_void);
            libc::free((*((*h).domain_attr as *mut fi_domain_attr_1_1)).auth_key as *mut c_void);
        }
        libc::free((*((*h).domain_attr as *mut fi_domain_attr_1_0)).name as *mut c_void);
        let f = (*h).fabric_attr as *mut fi_fabric_attr_1_0;
        libc::free((*f).name as *mut c_void);
        libc::free((*f).prov_name as *mut c_void);
    }
}

/// Offsets of pointer members that are deep-copied (so differ by value).
/// Also skipped: padding bytes, which a copy made member by member need not keep.
const INFO_PTRS: &[(usize, usize)] = &[(0, 8), (28, 4), (48, 8), (56, 8), (72, 8), (80, 8), (88, 8), (96, 8), (104, 8), (112, 8)];
const EP_PTRS: &[(usize, usize)] = &[(12, 4), (88, 8)];
const DOMAIN_PTRS: &[(usize, usize)] = &[(8, 8), (152, 8), (188, 4), (204, 4)];
const FABRIC_PTRS: &[(usize, usize)] = &[(8, 8), (16, 8)];

/// Compare `n` bytes, skipping 8-byte pointer words at `skip` offsets.
fn same_bytes(a: *const c_void, b: *const c_void, n: usize, skip: &[(usize, usize)], what: &str) {
    // SAFETY: both readable for n bytes (callers pass shape sizes).
    let (a, b) = unsafe {
        (
            std::slice::from_raw_parts(a as *const u8, n),
            std::slice::from_raw_parts(b as *const u8, n),
        )
    };
    for i in 0..n {
        if skip.iter().any(|&(o, l)| i >= o && i < o + l) {
            continue;
        }
        assert_eq!(a[i], b[i], "{what}: byte {i} differs");
    }
}

fn zero_tail(p: *const c_void, from: usize, to: usize, what: &str) {
    // SAFETY: p is a current-shape block of `to` bytes.
    let b = unsafe { std::slice::from_raw_parts(p as *const u8, to) };
    assert!(b[from..].iter().all(|&x| x == 0), "{what}: bytes {from}..{to} not zero");
}

fn str_at(p: *const c_char) -> String {
    assert!(!p.is_null());
    // SAFETY: a C string from our trees.
    unsafe { CStr::from_ptr(p) }.to_str().unwrap().to_owned()
}

/// Check a current-shape tree against the old one it was widened from.
fn check_widened(old: *const c_void, cur: *const fi_info, v: CompatVer) {
    let s = v.shape();
    // SAFETY: both valid trees.
    unsafe {
        let h = old as *const fi_info_1_0;
        let c = &*cur;
        same_bytes(old, cur as *const c_void, s.info, INFO_PTRS, "info");
        zero_tail(cur as *const c_void, s.info, size_of::<fi_info>(), "info");
        assert!(c.next.is_null());
        assert_eq!(std::slice::from_raw_parts(c.src_addr as *const u8, 4), &[1, 2, 3, 4]);
        assert_ne!(c.src_addr, (*h).src_addr, "src_addr must be a copy");
        same_bytes((*h).tx_attr, c.tx_attr as *const c_void, s.tx, &[], "tx");
        zero_tail(c.tx_attr as *const c_void, s.tx, size_of::<fi_tx_attr>(), "tx");
        same_bytes((*h).rx_attr, c.rx_attr as *const c_void, s.rx, &[], "rx");
        same_bytes((*h).ep_attr, c.ep_attr as *const c_void, s.ep, EP_PTRS, "ep");
        zero_tail(c.ep_attr as *const c_void, s.ep, size_of::<fi_ep_attr>(), "ep");
        same_bytes((*h).domain_attr, c.domain_attr as *const c_void, s.domain, DOMAIN_PTRS, "domain");
        zero_tail(c.domain_attr as *const c_void, s.domain, size_of::<fi_domain_attr>(), "domain");
        same_bytes((*h).fabric_attr, c.fabric_attr as *const c_void, s.fabric_members, FABRIC_PTRS, "fabric");
        zero_tail(c.fabric_attr as *const c_void, s.fabric_members, size_of::<fi_fabric_attr>(), "fabric");
        assert_eq!(str_at((*c.domain_attr).name), "dom0");
        assert_eq!(str_at((*c.fabric_attr).prov_name), "shm");
        if s.auth_key {
            assert_eq!(std::slice::from_raw_parts((*c.ep_attr).auth_key, 3), &[0xa, 0xb, 0xc]);
            assert_eq!(std::slice::from_raw_parts((*c.domain_attr).auth_key, 5), &[1, 1, 2, 3, 5]);
        } else {
            assert!((*c.ep_attr).auth_key.is_null());
            assert!((*c.domain_attr).auth_key.is_null());
        }
    }
}

/// Check an old-shape entry against another old one of the same version.
fn check_same_old(a: *const c_void, b: *const c_void, v: CompatVer) {
    let s = v.shape();
    // SAFETY: both valid old trees of shape v.
    unsafe {
        let (x, y) = (a as *const fi_info_1_0, b as *const fi_info_1_0);
        same_bytes(a, b, s.info, INFO_PTRS, "old info");
        same_bytes((*x).tx_attr, (*y).tx_attr, s.tx, &[], "old tx");
        same_bytes((*x).rx_attr, (*y).rx_attr, s.rx, &[], "old rx");
        same_bytes((*x).ep_attr, (*y).ep_attr, s.ep, EP_PTRS, "old ep");
        same_bytes((*x).domain_attr, (*y).domain_attr, s.domain, DOMAIN_PTRS, "old domain");
        same_bytes((*x).fabric_attr, (*y).fabric_attr, s.fabric_members, FABRIC_PTRS, "old fabric");
        let fy = (*y).fabric_attr as *const fi_fabric_attr_1_0;
        assert_eq!(str_at((*fy).name), "fab0");
        assert_eq!(str_at((*((*y).domain_attr as *const fi_domain_attr_1_0)).name), "dom0");
        assert_eq!(std::slice::from_raw_parts((*y).dest_addr as *const u8, 6), &[9, 8, 7, 6, 5, 4]);
        if s.auth_key {
            let e = (*y).ep_attr as *const fi_ep_attr_1_9;
            assert_eq!(std::slice::from_raw_parts((*e).auth_key, 3), &[0xa, 0xb, 0xc]);
        }
    }
}

#[test]
fn widen_then_narrow_round_trips_every_version() {
    for v in CompatVer::ALL {
        let mut store = Store::Guard(Vec::new());
        let old = make_old(v, &mut store, ptr::null_mut());
        let before: Vec<Vec<u8>> = match &store {
            Store::Guard(g) => g.iter().map(Guarded::bytes).collect(),
            Store::Heap => unreachable!(),
        };
        // SAFETY: `old` is a valid tree of shape v.
        let cur = unsafe { widen_info(old, v) };
        assert!(!cur.is_null(), "{v:?}");
        check_widened(old, cur, v);
        // SAFETY: `cur` is ours to give up.
        let back = unsafe { narrow_info_list(cur, v) };
        assert!(!back.is_null());
        check_same_old(old, back, v);
        // SAFETY: `back` is an old list we own.
        unsafe { free_info_old(back, v) };
        // The program's blocks were only read.
        if let Store::Guard(g) = &store {
            let after: Vec<Vec<u8>> = g.iter().map(Guarded::bytes).collect();
            assert_eq!(before, after, "{v:?}: program memory changed");
        }
        free_old_members(old, v);
    }
}

#[test]
fn dup_of_guarded_old_entry_matches_and_frees() {
    for v in CompatVer::ALL {
        let mut store = Store::Guard(Vec::new());
        let old = make_old(v, &mut store, ptr::null_mut());
        // SAFETY: valid old entry.
        let d = unsafe { dup_info_old(old, v) };
        assert!(!d.is_null());
        check_same_old(old, d, v);
        // SAFETY: ours.
        unsafe { free_info_old(d, v) };
        free_old_members(old, v);
    }
}

#[test]
fn dup_of_null_gives_empty_entry_with_attrs() {
    for v in CompatVer::ALL {
        // SAFETY: NULL is allowed.
        let d = unsafe { dup_info_old(ptr::null(), v) };
        assert!(!d.is_null());
        // SAFETY: a fresh old entry.
        unsafe {
            let h = d as *const fi_info_1_0;
            assert_eq!((*h).caps, 0);
            assert!(!(*h).tx_attr.is_null() && !(*h).domain_attr.is_null() && !(*h).fabric_attr.is_null());
            free_info_old(d, v);
        }
    }
}

#[test]
fn heap_old_tree_is_freed_by_free_info_old() {
    // Exact-size heap blocks: valgrind reports any read past them.
    for v in CompatVer::ALL {
        let old = make_old(v, &mut Store::Heap, ptr::null_mut());
        // SAFETY: a heap tree of shape v whose members are C allocations.
        unsafe { free_info_old(old, v) };
    }
    // SAFETY: NULL is a no-op.
    unsafe { free_info_old(ptr::null_mut(), CompatVer::V1_3) };
}

#[test]
fn narrow_keeps_list_order_and_length() {
    for v in CompatVer::ALL {
        let mut list: *mut fi_info = ptr::null_mut();
        for caps in [3u64, 2, 1] {
            // SAFETY: a fresh current entry; linking it to the list head.
            unsafe {
                let e = dupinfo_current(ptr::null());
                (*e).caps = caps;
                (*(*e).domain_attr).max_xpu_ctx_cnt = 99; // not in any old shape
                (*(*e).domain_attr).name = cstr("d");
                (*e).next = list;
                list = e;
            }
        }
        // SAFETY: ours to give up.
        let old = unsafe { narrow_info_list(list, v) };
        let mut seen = Vec::new();
        let mut n = old as *const fi_info_1_0;
        while !n.is_null() {
            // SAFETY: old list nodes.
            unsafe {
                seen.push((*n).caps);
                assert_eq!(str_at((*((*n).domain_attr as *const fi_domain_attr_1_0)).name), "d");
                n = (*n).next as *const fi_info_1_0;
            }
        }
        assert_eq!(seen, vec![1, 2, 3], "{v:?}");
        // SAFETY: ours.
        unsafe { free_info_old(old, v) };
    }
    // SAFETY: NULL in, NULL out.
    assert!(unsafe { narrow_info_list(ptr::null_mut(), CompatVer::V1_0) }.is_null());
}

static CLOSED: AtomicUsize = AtomicUsize::new(0);

unsafe extern "C" fn count_close(_f: *mut fid) -> c_int {
    CLOSED.fetch_add(1, Ordering::SeqCst);
    0
}

#[test]
fn nic_goes_with_the_shape_that_has_it() {
    // SAFETY: building a fake nic whose ops table has only `close`.
    let mut ops: fi_ops = unsafe { core::mem::zeroed() };
    ops.size = size_of::<fi_ops>();
    ops.close = Some(count_close);
    // SAFETY: fid_nic is plain pointers and integers; all zero is valid.
    let mut nic: fid_nic = unsafe { core::mem::zeroed() };
    nic.fid.ops = &mut ops;
    for (v, moved) in [(CompatVer::V1_1, false), (CompatVer::V1_2, true), (CompatVer::V1_9, true)] {
        CLOSED.store(0, Ordering::SeqCst);
        // SAFETY: a fresh current entry owning the fake nic.
        let old = unsafe {
            let e = dupinfo_current(ptr::null());
            (*e).nic = &mut nic;
            narrow_info_list(e, v)
        };
        // Without a nic member the current free closes it right away.
        assert_eq!(CLOSED.load(Ordering::SeqCst), usize::from(!moved), "{v:?}");
        if moved {
            // SAFETY: the old entry has a nic member.
            assert_eq!(unsafe { (*(old as *const fi_info_1_2)).nic }, &mut nic as *mut _ as *mut c_void);
        }
        // SAFETY: ours.
        unsafe { free_info_old(old, v) };
        assert_eq!(CLOSED.load(Ordering::SeqCst), 1, "{v:?}");
    }
}

#[test]
fn bad_arguments_are_refused() {
    let mut out: *mut c_void = ptr::dangling_mut();
    // SAFETY: NULL `info` must be refused without a write.
    let rc = unsafe { rf_compat_fi_getinfo_1_3(0x10003, ptr::null(), ptr::null(), 0, ptr::null(), ptr::null_mut()) };
    assert_eq!(rc, -libc::EINVAL);
    // SAFETY: NULL attr.
    let rc = unsafe { rf_compat_fi_fabric_1_0(ptr::null(), ptr::null_mut(), ptr::null_mut()) };
    assert_eq!(rc, -libc::EINVAL);
    // SAFETY: a valid out pointer; NULL hints.
    let rc = unsafe { rf_compat_fi_getinfo_1_0(0x10000, ptr::null(), ptr::null(), 0, ptr::null(), &mut out) };
    if rc != 0 {
        assert!(out.is_null(), "failed getinfo must clear *info");
    } else {
        // SAFETY: a list of the 1.0 shape.
        unsafe { rf_compat_fi_freeinfo_1_0(out) };
    }
    // SAFETY: NULL is a no-op for every version.
    unsafe { rf_compat_fi_freeinfo_1_9(ptr::null_mut()) };
    // SAFETY: NULL widens to NULL.
    assert!(unsafe { widen_info(ptr::null(), CompatVer::V1_7) }.is_null());
}

#[test]
fn fabric_1_0_reads_only_the_old_attr() {
    let g = Guarded::new(size_of::<fi_fabric_attr_1_0>());
    fill(g.p, g.size, 5);
    // SAFETY: the attr is exactly the 1.0 size, flush against the guard page.
    let rc = unsafe { rf_compat_fi_fabric_1_0(g.p as *const c_void, ptr::null_mut(), ptr::null_mut()) };
    assert!(rc <= 0);
}

/// Reads `tests/abi/<file>` as (type, member) -> (offset, size).
fn layout_table(file: &str) -> HashMap<(String, String), (usize, usize)> {
    let path = format!("{}/../tests/abi/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut m = HashMap::new();
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split('\t').collect();
        if f.len() < 4 {
            continue;
        }
        m.insert((f[0].to_owned(), f[1].to_owned()), (f[2].parse().unwrap(), f[3].parse().unwrap()));
    }
    m
}

fn check_layout(
    table: &HashMap<(String, String), (usize, usize)>,
    ty: &str,
    size: usize,
    members: &[(&str, usize, usize)],
) {
    let key = |m: &str| (format!("struct {ty}"), m.to_owned());
    assert_eq!(table.get(&key("(sizeof)")).map(|r| r.1), Some(size), "sizeof {ty}");
    let mut rows = 0;
    for (name, off, sz) in members {
        let name = name.trim_start_matches("r#");
        if let Some(&(o, s)) = table.get(&key(name)) {
            assert_eq!((o, s), (*off, *sz), "{ty}.{name}");
            rows += 1;
        } else {
            // Only the anonymous union member of fi_domain_attr is unnamed in the table.
            assert_eq!((ty, name), ("fi_domain_attr", "data_progress"), "{ty}.{name} not in table");
        }
    }
    let in_table = table.keys().filter(|(t, m)| *t == format!("struct {ty}") && m != "(sizeof)").count();
    let unnamed = usize::from(ty == "fi_domain_attr");
    assert_eq!(rows + unnamed, in_table, "{ty}: member count");
}

#[test]
fn shapes_match_the_abi_tables() {
    let compat = layout_table("layout-compat.tsv");
    macro_rules! chk {
        ($t:expr, $($ty:ident)::+, $name:literal) => {
            check_layout(&$t, $name, size_of::<$($ty)::+>(), $($ty)::+::MEMBERS)
        };
    }
    chk!(compat, fi_fabric_attr_1_0, "fi_fabric_attr_1_0");
    chk!(compat, fi_tx_attr_1_0, "fi_tx_attr_1_0");
    chk!(compat, fi_ep_attr_1_0, "fi_ep_attr_1_0");
    chk!(compat, fi_ep_attr_1_9, "fi_ep_attr_1_9");
    chk!(compat, fi_domain_attr_1_0, "fi_domain_attr_1_0");
    chk!(compat, fi_domain_attr_1_1, "fi_domain_attr_1_1");
    chk!(compat, fi_domain_attr_1_3, "fi_domain_attr_1_3");
    chk!(compat, fi_domain_attr_1_7, "fi_domain_attr_1_7");
    chk!(compat, fi_domain_attr_1_8, "fi_domain_attr_1_8");
    chk!(compat, fi_domain_attr_1_9, "fi_domain_attr_1_9");
    chk!(compat, fi_info_1_0, "fi_info_1_0");
    chk!(compat, fi_info_1_1, "fi_info_1_1");
    chk!(compat, fi_info_1_2, "fi_info_1_2");
    chk!(compat, fi_info_1_3, "fi_info_1_3");
    chk!(compat, fi_info_1_7, "fi_info_1_7");
    chk!(compat, fi_info_1_8, "fi_info_1_8");
    chk!(compat, fi_info_1_9, "fi_info_1_9");
}
