//! Host-side XPU tests: attribute validation, both `import` shapes, memory
//! from the application's `alloc` (mapped through its fd), and the queue
//! protocol driven from Rust in the device's role (the C device functions
//! are exercised by tests/xpu).

use super::*;
use std::cell::RefCell;

#[derive(Debug, Clone, PartialEq)]
enum Call {
    Alloc { size: u64, flags: u64, fd: c_int, addr: u64 },
    Import { size: u64, flags: u64, fd: Option<c_int>, host: u64 },
    Free { addr: u64 },
}

thread_local! {
    static CALLS: RefCell<Vec<Call>> = const { RefCell::new(Vec::new()) };
    static ALLOC_RC: RefCell<c_int> = const { RefCell::new(0) };
    static IMPORT_RC: RefCell<c_int> = const { RefCell::new(0) };
    /// (addr, len, fd) of live allocations made by `t_alloc`.
    static LIVE: RefCell<Vec<(u64, usize, c_int)>> = const { RefCell::new(Vec::new()) };
    /// Mappings the import callback made (unmapped by the test).
    static IMPORTED: RefCell<Vec<(u64, usize)>> = const { RefCell::new(Vec::new()) };
}

fn calls() -> Vec<Call> {
    CALLS.with(|c| c.borrow().clone())
}

unsafe extern "C" fn t_alloc(_dev: u64, size: u64, align: u64, flags: u64, addr: *mut *mut c_void, fd: *mut c_int, offset: *mut u64) -> c_int {
    let rc = ALLOC_RC.with(|r| *r.borrow());
    if rc != 0 {
        return rc;
    }
    assert_eq!(align % 8, 0);
    // The allocation is a memfd: "device" address = our own mapping, and the
    // fd the provider maps for its view. Placed at offset 0 of the memfd.
    let m = MemfdMap::new(c"t-alloc", size as usize).unwrap();
    let (base, len, mfd) = (m.base, m.len, m.fd);
    std::mem::forget(m);
    // SAFETY: out pointers from the provider.
    unsafe {
        *addr = base as *mut c_void;
        *fd = if flags & FI_XPU_ALLOC_DMABUF != 0 { mfd } else { -1 };
        *offset = 0;
    }
    LIVE.with(|l| l.borrow_mut().push((base as u64, len, mfd)));
    CALLS.with(|c| c.borrow_mut().push(Call::Alloc { size, flags, fd: mfd, addr: base as u64 }));
    0
}

unsafe extern "C" fn t_free(_dev: u64, addr: *mut c_void) {
    CALLS.with(|c| c.borrow_mut().push(Call::Free { addr: addr as u64 }));
    LIVE.with(|l| {
        let mut l = l.borrow_mut();
        let i = l.iter().position(|e| e.0 == addr as u64).expect("free of an unknown address");
        let (a, len, fd) = l.remove(i);
        // SAFETY: the mapping and fd t_alloc made.
        unsafe {
            libc::munmap(a as *mut c_void, len);
            libc::close(fd);
        }
    });
}

unsafe extern "C" fn t_import(_dev: u64, host: *mut c_void, size: u64, flags: u64, fd: c_int, dev: *mut *mut c_void) -> c_int {
    CALLS.with(|c| c.borrow_mut().push(Call::Import { size, flags, fd: Some(fd), host: host as u64 }));
    let rc = IMPORT_RC.with(|r| *r.borrow());
    if rc != 0 {
        return rc;
    }
    if flags & FI_XPU_IMPORT_DMABUF == 0 {
        // SAFETY: out pointer.
        unsafe { *dev = host };
        return 0;
    }
    let page = page_size();
    let off = host as usize % page;
    let len = round_up(off + size as usize, page);
    // SAFETY: map the DMA-BUF stand-in from its start.
    let p = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, 0) };
    assert_ne!(p, libc::MAP_FAILED);
    // The mapping shows the same bytes as host_addr.
    // SAFETY: both ranges are `size` readable bytes.
    unsafe {
        let a = std::slice::from_raw_parts((p as *const u8).add(off), size as usize);
        let b = std::slice::from_raw_parts(host as *const u8, size as usize);
        assert_eq!(a, b);
        *dev = (p as *mut u8).add(off) as *mut c_void;
    }
    IMPORTED.with(|i| i.borrow_mut().push((p as u64, len)));
    0
}

unsafe extern "C" fn t_import_old(_dev: u64, host: *mut c_void, size: u64, flags: u64, dev: *mut *mut c_void) -> c_int {
    CALLS.with(|c| c.borrow_mut().push(Call::Import { size, flags, fd: None, host: host as u64 }));
    // SAFETY: out pointer.
    unsafe { *dev = host };
    0
}

fn reset() {
    CALLS.with(|c| c.borrow_mut().clear());
    ALLOC_RC.with(|r| *r.borrow_mut() = 0);
    IMPORT_RC.with(|r| *r.borrow_mut() = 0);
}

fn unmap_imported() {
    IMPORTED.with(|i| {
        for (p, l) in i.borrow_mut().drain(..) {
            // SAFETY: mappings t_import made.
            unsafe { libc::munmap(p as *mut c_void, l) };
        }
    });
}

fn ops(alloc: bool, import: bool, old: bool) -> fi_xpu_ops {
    let imp: Option<ImportFn> = if !import {
        None
    } else if old {
        // SAFETY: stored the way an application built before 2.8 would.
        Some(unsafe { std::mem::transmute::<ImportFnOld, ImportFn>(t_import_old) })
    } else {
        Some(t_import)
    };
    fi_xpu_ops {
        size: std::mem::size_of::<fi_xpu_ops>(),
        alloc: if alloc { Some(t_alloc) } else { None },
        import: imp,
        free: if alloc { Some(t_free) } else { None },
    }
}

const V28: u32 = fi_version(2, 8);
const V27: u32 = fi_version(2, 7);

/// The provider the contexts of these tests belong to.
const PROV: XpuProvider = XpuProvider { name: "test", prov_id: FI_XPU_PROV_SHM };

fn attr(iface: fi_hmem_iface, device: u64, callbacks: Option<Callbacks>, api_version: u32) -> XpuAttr {
    XpuAttr { iface, device, callbacks, api_version }
}

fn open(o: Option<&fi_xpu_ops>, v: u32) -> Result<Arc<XpuCtx>> {
    let p = o.map_or(std::ptr::null(), |o| o as *const fi_xpu_ops);
    // SAFETY: p is NULL or a whole fi_xpu_ops.
    let cb = unsafe { Callbacks::from_c(p, v) }?;
    XpuCtx::open(PROV, &attr(FI_HMEM_SYSTEM, 0, cb, v))
}

#[test]
fn bad_attributes() {
    assert_eq!(XpuCtx::open(PROV, &attr(FI_HMEM_CUDA, 0, None, V28)).unwrap_err(), EOPNOTSUPP);
    assert_eq!(XpuCtx::open(PROV, &attr(FI_HMEM_SYSTEM, 1, None, V28)).unwrap_err(), EINVAL);
    let mut o = ops(true, true, false);
    o.size = 8;
    assert_eq!(open(Some(&o), V28).unwrap_err(), EINVAL);
    o.size = 0;
    assert_eq!(open(Some(&o), V28).unwrap_err(), EINVAL);
    // Larger (a newer application's struct): accepted.
    o.size = std::mem::size_of::<fi_xpu_ops>();
    assert!(open(Some(&o), V28).is_ok());
    let mut o = ops(true, false, false);
    o.free = None;
    assert_eq!(open(Some(&o), V28).unwrap_err(), EINVAL);
    let q = open(None, V28).unwrap().query();
    assert_eq!(q.caps, FI_XPU_CAP_EP | FI_XPU_CAP_CQ | FI_XPU_CAP_CNTR);
    assert_eq!((q.av_addr_size, q.mr_desc_size), (8, 8));
    assert_eq!(open(None, V28).unwrap().completion_ring(3).err(), Some(EINVAL));
}

/// Plays the device: posts one request the way fi_xpu_device.h does.
fn device_post(q: u64, op: u32, tag: u64) -> bool {
    // SAFETY: q is the dev address of a live work queue (= host address here).
    let h = unsafe { &*(q as *const QueueHdr) };
    let pos = h.tail.load(Ordering::Relaxed);
    // SAFETY: inside the queue.
    let e = unsafe { &mut *((q as usize + ENTRIES_OFFSET + (pos & h.mask) as usize * 80) as *mut Wqe) };
    if e.seq.load(Ordering::Acquire) != pos {
        return false;
    }
    h.tail.store(pos + 1, Ordering::Relaxed);
    e.op = op;
    e.tag = tag;
    e.len = tag * 2;
    e.seq.store(pos + 1, Ordering::Release);
    // SAFETY: the doorbell word's device address.
    unsafe { &*(h.doorbell as *const AtomicU64) }.fetch_add(1, Ordering::Release);
    true
}

fn device_take(q: u64) -> Option<(u64, i32)> {
    // SAFETY: dev address of a live completion ring.
    let h = unsafe { &*(q as *const QueueHdr) };
    let pos = h.head.load(Ordering::Relaxed);
    // SAFETY: inside the ring.
    let e = unsafe { &*((q as usize + ENTRIES_OFFSET + (pos & h.mask) as usize * 64) as *const Cqe) };
    if e.seq.load(Ordering::Acquire) != pos + 1 {
        return None;
    }
    h.head.store(pos + 1, Ordering::Relaxed);
    let r = (e.op_context, e.err);
    e.seq.store(pos + h.mask + 1, Ordering::Release);
    Some(r)
}

fn exercise(ctx: &XpuCtx) {
    let wq = ctx.work_queue(4).unwrap();
    let cq = ctx.completion_ring(2).unwrap();
    let cn = ctx.counter().unwrap();
    let (hw, hc, hn) = (wq.handle(), cq.handle(), cn.handle());
    assert_eq!((hw.fclass, hw.prov_id), (FI_CLASS_EP as u32, FI_XPU_PROV_SHM));
    assert_eq!(hc.fclass, FI_CLASS_CQ as u32);
    assert_eq!(hn.fclass, FI_CLASS_CNTR as u32);
    // Full after 4, in order, then room again.
    for t in 0..4 {
        assert!(device_post(hw.prov_ctx, OP_TSEND, t + 1));
    }
    assert!(!device_post(hw.prov_ctx, OP_TSEND, 9));
    assert_eq!(wq.doorbell().value(), 4);
    for t in 0..4 {
        let w = wq.pop().unwrap();
        assert_eq!((w.op, w.tag, w.len), (OP_TSEND, t + 1, 2 * (t + 1)));
    }
    assert!(wq.pop().is_none());
    assert!(device_post(hw.prov_ctx, OP_WRITE, 7));
    assert_eq!(wq.pop().unwrap().op, OP_WRITE);
    // Completion ring of two: third push waits for the device.
    cq.push(&Completion { op_context: 1, ..Default::default() }).unwrap();
    cq.push(&Completion { op_context: 2, err: 5, ..Default::default() }).unwrap();
    assert_eq!(cq.push(&Completion::default()), Err(EAGAIN));
    assert_eq!(device_take(hc.prov_ctx), Some((1, 0)));
    cq.push(&Completion { op_context: 3, ..Default::default() }).unwrap();
    assert_eq!(device_take(hc.prov_ctx), Some((2, 5)));
    assert_eq!(device_take(hc.prov_ctx), Some((3, 0)));
    assert_eq!(device_take(hc.prov_ctx), None);
    cn.add(3);
    cn.add_err(1);
    // SAFETY: dev address of the counter words.
    let w = unsafe { &*(hn.prov_ctx as *const CntrWords) };
    assert_eq!((w.magic, w.value.load(Ordering::Acquire), w.err.load(Ordering::Acquire)), (CNTR_MAGIC, 3, 1));
}

#[test]
fn default_memory_no_callbacks() {
    reset();
    let ctx = open(None, V28).unwrap();
    exercise(&ctx);
    assert!(calls().is_empty());
}

#[test]
fn app_alloc_mapped_through_fd_and_freed_once() {
    reset();
    let o = ops(true, true, false);
    let ctx = open(Some(&o), V28).unwrap();
    {
        let cq = ctx.completion_ring(2).unwrap();
        // Our view and the app's address are two mappings of one memfd.
        let c = calls();
        let Call::Alloc { addr, flags, .. } = c[0].clone() else { panic!("{c:?}") };
        assert_eq!(flags, FI_XPU_ALLOC_DMABUF);
        assert_eq!(cq.handle().prov_ctx, addr);
        assert_ne!(cq.mem.host_ptr() as u64, addr);
        cq.push(&Completion { op_context: 42, ..Default::default() }).unwrap();
        assert_eq!(device_take(addr), Some((42, 0)));
    }
    exercise(&ctx);
    drop(ctx);
    let c = calls();
    let allocs: Vec<u64> = c.iter().filter_map(|x| if let Call::Alloc { addr, .. } = x { Some(*addr) } else { None }).collect();
    let mut frees: Vec<u64> = c.iter().filter_map(|x| if let Call::Free { addr } = x { Some(*addr) } else { None }).collect();
    assert_eq!(allocs.len(), 4);
    frees.sort();
    let mut a = allocs.clone();
    a.sort();
    assert_eq!(a, frees, "free exactly once per alloc");
    assert!(LIVE.with(|l| l.borrow().is_empty()));
    unmap_imported();
}

#[test]
fn doorbell_imported_as_dmabuf_with_offset() {
    reset();
    let o = ops(false, true, false);
    let ctx = open(Some(&o), V28).unwrap();
    let wq = ctx.work_queue(2).unwrap();
    let c = calls();
    // The doorbell page first, then the queue memory, both by fd.
    let imports: Vec<_> = c.iter().filter(|x| matches!(x, Call::Import { .. })).cloned().collect();
    assert_eq!(imports.len(), 2, "{c:?}");
    let Call::Import { size, flags, fd, host } = imports[0].clone() else { unreachable!() };
    assert_eq!(size, 8);
    assert_eq!(flags, FI_XPU_IMPORT_DMABUF | FI_XPU_IMPORT_DEVICEMAP);
    assert!(fd.unwrap() >= 0);
    assert_eq!(host as usize % page_size(), DOORBELL_OFFSET);
    let db = wq.doorbell();
    assert_ne!(db.dev_addr(), host);
    assert_eq!(db.dev_addr() as usize % page_size(), DOORBELL_OFFSET);
    // A ring through the device address is seen at the host address.
    assert!(device_post(wq.handle().prov_ctx, OP_SEND, 1));
    assert_eq!(db.value(), 1);
    // One doorbell per context.
    let wq2 = ctx.work_queue(2).unwrap();
    assert_eq!(wq2.doorbell().dev_addr(), db.dev_addr());
    drop((wq, wq2, ctx));
    unmap_imported();
}

#[test]
fn old_import_shape() {
    reset();
    let o = ops(false, true, true);
    let ctx = open(Some(&o), V27).unwrap();
    // Ordinary memory is imported by address, 5-argument shape, no DMA-BUF.
    let cq = ctx.completion_ring(2).unwrap();
    let cn = ctx.counter().unwrap();
    let c = calls();
    assert_eq!(c.len(), 2, "{c:?}");
    for x in &c {
        let Call::Import { flags, fd, .. } = x else { panic!("{x:?}") };
        assert_eq!(*flags, FI_XPU_IMPORT_DEVICEMAP);
        assert_eq!(*fd, None);
    }
    cq.push(&Completion { op_context: 9, ..Default::default() }).unwrap();
    assert_eq!(device_take(cq.handle().prov_ctx), Some((9, 0)));
    cn.add(1);
    // The doorbell can only go by fd: the endpoint cannot be exported.
    assert_eq!(ctx.work_queue(2).err(), Some(EOPNOTSUPP));
    assert_eq!(calls().len(), 2, "import not called for the doorbell");
    // The same application built for 2.8 gets the fd shape.
    reset();
    let o = ops(false, true, false);
    let ctx = open(Some(&o), V28).unwrap();
    assert!(ctx.work_queue(2).is_ok());
    assert!(calls().iter().all(|x| matches!(x, Call::Import { fd: Some(f), .. } if *f >= 0)));
    drop(ctx);
    unmap_imported();
}

#[test]
fn callback_errors_are_returned() {
    reset();
    let o = ops(true, true, false);
    let ctx = open(Some(&o), V28).unwrap();
    ALLOC_RC.with(|r| *r.borrow_mut() = -FI_ENOMEM);
    assert_eq!(ctx.counter().err(), Some(ENOMEM));
    ALLOC_RC.with(|r| *r.borrow_mut() = 0);
    IMPORT_RC.with(|r| *r.borrow_mut() = -FI_EACCES);
    assert_eq!(ctx.work_queue(2).err(), Some(Error(FI_EACCES)));
    // Nothing stays allocated after the failure; a later try works.
    IMPORT_RC.with(|r| *r.borrow_mut() = 0);
    let wq = ctx.work_queue(2).unwrap();
    drop((wq, ctx));
    assert!(LIVE.with(|l| l.borrow().is_empty()));
    unmap_imported();
}

#[test]
fn layout_matches_the_device_header() {
    use std::mem::{offset_of, size_of};
    assert_eq!(size_of::<Wqe>(), 80);
    assert_eq!(size_of::<Cqe>(), 64);
    assert_eq!(size_of::<QueueHdr>(), ENTRIES_OFFSET);
    assert_eq!((offset_of!(QueueHdr, tail), offset_of!(QueueHdr, head)), (64, 128));
    assert_eq!((offset_of!(CntrWords, value), size_of::<CntrWords>()), (64, 80));
    assert_eq!((offset_of!(Cqe, err), offset_of!(Wqe, desc)), (56, 72));
}

#[test]
fn both_spellings_of_an_xpu_object() {
    // FI_XPU with a context, or the context alone: an XPU object.
    assert_eq!(requested(true, Some(7), "cq"), Ok(Some(7)));
    assert_eq!(requested(false, Some(7), "cq"), Ok(Some(7)));
    // Neither: a host object. The flag alone names no device.
    assert_eq!(requested::<u32>(false, None, "cq"), Ok(None));
    assert_eq!(requested::<u32>(true, None, "cq"), Err(EINVAL));
}
