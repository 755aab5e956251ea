//! One test, run as a sequence, so that memfd descriptors and mappings can
//! be counted before and after: nothing else in this process makes any.

use super::*;
use rfabric_core::abi::*;
use rfabric_core::error::{Error, Result};
use rfabric_core::xpu::*;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

const V28: u32 = fi_version(2, 8);
const PEER: u64 = 1;
const KEY: u64 = 0xabc;
const THREADS: usize = 4;
const PER_THREAD: usize = 64;
const LEN: usize = 100;

// ---- application callbacks, recording every call ------------------------

#[derive(Debug, Clone, PartialEq)]
enum Call {
    Alloc { addr: u64 },
    Import { flags: u64, fd: c_int },
    Free { addr: u64 },
}

static CALLS: Mutex<Vec<Call>> = Mutex::new(Vec::new());
/// addr -> (mapping base, mapping length, fd) of live allocations.
static LIVE: Mutex<Vec<(u64, u64, usize, c_int)>> = Mutex::new(Vec::new());
static IMPORTED: Mutex<Vec<(u64, usize)>> = Mutex::new(Vec::new());
static IMPORT_RC: Mutex<c_int> = Mutex::new(0);

fn page() -> usize {
    // SAFETY: no preconditions.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize }
}

unsafe extern "C" fn app_alloc(_dev: u64, size: u64, align: u64, flags: u64, addr: *mut *mut c_void, fd: *mut c_int, offset: *mut u64) -> c_int {
    assert!(align.is_power_of_two());
    // The allocation sits one page into its memfd, so the offset matters.
    let skip = page().max(align as usize);
    let len = (skip + size as usize).div_ceil(page()) * page();
    // SAFETY: plain system calls, results checked.
    unsafe {
        let mfd = libc::memfd_create(c"app-xpu-alloc".as_ptr(), libc::MFD_CLOEXEC);
        if mfd < 0 || libc::ftruncate(mfd, len as libc::off_t) != 0 {
            return -FI_ENOMEM;
        }
        let base = libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, mfd, 0);
        assert_ne!(base, libc::MAP_FAILED);
        let a = (base as *mut u8).add(skip);
        *addr = a as *mut c_void;
        *fd = if flags & FI_XPU_ALLOC_DMABUF != 0 { mfd } else { -1 };
        *offset = skip as u64;
        LIVE.lock().unwrap().push((a as u64, base as u64, len, mfd));
        CALLS.lock().unwrap().push(Call::Alloc { addr: a as u64 });
    }
    0
}

unsafe extern "C" fn app_free(_dev: u64, addr: *mut c_void) {
    CALLS.lock().unwrap().push(Call::Free { addr: addr as u64 });
    let mut l = LIVE.lock().unwrap();
    let i = l.iter().position(|e| e.0 == addr as u64).expect("free of an address alloc did not return");
    let (_, base, len, fd) = l.remove(i);
    // SAFETY: the mapping and descriptor app_alloc made.
    unsafe {
        libc::munmap(base as *mut c_void, len);
        libc::close(fd);
    }
}

unsafe extern "C" fn app_import(_dev: u64, host: *mut c_void, size: u64, flags: u64, fd: c_int, dev: *mut *mut c_void) -> c_int {
    CALLS.lock().unwrap().push(Call::Import { flags, fd });
    let rc = *IMPORT_RC.lock().unwrap();
    if rc != 0 {
        return rc;
    }
    if flags & FI_XPU_IMPORT_DMABUF == 0 {
        // SAFETY: out pointer.
        unsafe { *dev = host };
        return 0;
    }
    let off = host as usize % page();
    let len = (off + size as usize).div_ceil(page()) * page();
    // SAFETY: the DMA-BUF stand-in, mapped from its first page; the bytes at
    // the same offset must be those at host_addr.
    unsafe {
        let p = libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, 0);
        if p == libc::MAP_FAILED {
            return -FI_EINVAL;
        }
        let d = (p as *mut u8).add(off);
        assert_eq!(std::slice::from_raw_parts(d, size as usize), std::slice::from_raw_parts(host as *const u8, size as usize));
        IMPORTED.lock().unwrap().push((p as u64, len));
        *dev = d as *mut c_void;
    }
    0
}

fn app_ops() -> fi_xpu_ops {
    fi_xpu_ops { size: std::mem::size_of::<fi_xpu_ops>(), alloc: Some(app_alloc), import: Some(app_import), free: Some(app_free) }
}

// ---- the loopback peer ---------------------------------------------------

/// The other side of the exported endpoint: tagged receive buffers posted
/// by tag, an inbox for untagged messages, an RMA window under KEY.
struct Peer {
    recv: Mutex<HashMap<u64, Vec<u8>>>,
    inbox: Mutex<Vec<Vec<u8>>>,
    window: Mutex<Vec<u8>>,
    done: Mutex<Vec<Completion>>,
}

impl XpuTarget for Peer {
    fn post(&self, w: &WorkRequest) -> Result<()> {
        if w.dest != PEER {
            return Err(Error(FI_EADDRNOTAVAIL));
        }
        // SAFETY: device code keeps the source buffer until its completion.
        let src = unsafe { std::slice::from_raw_parts(w.buf as *const u8, w.len as usize) };
        let flags = match w.op {
            OP_TSEND => {
                let mut r = self.recv.lock().unwrap();
                let b = r.get_mut(&w.tag).ok_or(Error(FI_ENOMSG))?;
                assert!(b.is_empty(), "tag {} delivered twice", w.tag);
                b.extend_from_slice(src);
                FI_TAGGED | FI_SEND
            }
            OP_SEND => {
                self.inbox.lock().unwrap().push(src.to_vec());
                FI_MSG | FI_SEND
            }
            OP_WRITE => {
                let mut win = self.window.lock().unwrap();
                let end = w.raddr.checked_add(w.len).filter(|e| *e <= win.len() as u64);
                match end {
                    Some(end) if w.key == KEY && w.desc == KEY => win[w.raddr as usize..end as usize].copy_from_slice(src),
                    _ => return Err(Error(FI_EACCES)),
                }
                FI_RMA | FI_WRITE
            }
            _ => return Err(Error(FI_EINVAL)),
        };
        self.done.lock().unwrap().push(Completion { op_context: w.context, flags, len: w.len, tag: w.tag, ..Default::default() });
        Ok(())
    }
    fn poll(&self, out: &mut Vec<Completion>) {
        out.append(&mut self.done.lock().unwrap());
    }
}

fn pattern(t: usize, i: usize, k: usize) -> u8 {
    (t * 31 + i * 7 + k) as u8
}

fn ctx_of(t: usize, i: usize) -> u64 {
    ((t as u64 + 1) << 32) | i as u64
}

// ---- one full run --------------------------------------------------------

/// A host-XPU context for device code of `<rdma/fi_xpu_device.h>`, which
/// dispatches on `FI_XPU_PROV_SHM`.
fn open(ops: *const fi_xpu_ops) -> Arc<XpuCtx> {
    // SAFETY: NULL or a whole fi_xpu_ops.
    let callbacks = unsafe { Callbacks::from_c(ops, V28) }.unwrap();
    let prov = XpuProvider { name: "test", prov_id: FI_XPU_PROV_SHM };
    XpuCtx::open(prov, &XpuAttr { iface: FI_HMEM_SYSTEM, device: 0, callbacks, api_version: V28 }).unwrap()
}

fn run(ops: Option<&fi_xpu_ops>) {
    let p = ops.map_or(std::ptr::null(), |o| o as *const fi_xpu_ops);
    let ctx = open(p);
    let wq = Arc::new(ctx.work_queue(16).unwrap());
    let ring = Arc::new(ctx.completion_ring(32).unwrap());
    let cn = Arc::new(ctx.counter().unwrap());
    let (hep, hcq, hcn) = (ep(wq.handle()), cq(ring.handle()), cntr(cn.handle()));

    let peer = Arc::new(Peer { recv: Mutex::new(HashMap::new()), inbox: Mutex::new(Vec::new()), window: Mutex::new(vec![0; 32 * 64]), done: Mutex::new(Vec::new()) });
    for t in 0..THREADS {
        for i in 0..PER_THREAD {
            peer.recv.lock().unwrap().insert((t * 1000 + i) as u64, Vec::new());
        }
    }
    let proxy = Proxy::spawn(wq.clone(), peer.clone(), Some(ring.clone()), Some(cn.clone())).unwrap();

    // Tagged sends from four device threads at once, each then reading 64
    // completions (whichever thread's they are).
    let scopes = [FI_XPU_WORK_ITEM, FI_XPU_SUBGROUP, FI_XPU_WORK_GROUP, FI_XPU_DEVICE];
    let got: Vec<(Vec<u64>, Vec<u64>)> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..THREADS)
            .map(|t| {
                s.spawn(move || {
                    let bufs: Vec<u8> = (0..PER_THREAD).flat_map(|i| (0..LEN).map(move |k| pattern(t, i, k))).collect();
                    let dest = PEER;
                    let scope = scopes[t] as c_int;
                    // SAFETY: handles copied by value; buffers live until the
                    // completions below are read.
                    let rc = unsafe { xk_tsend_n(&hep, &dest, bufs.as_ptr(), LEN, PER_THREAD, (t * 1000) as u64, ctx_of(t, 0) as usize, scope) };
                    assert_eq!(rc, 0);
                    let mut ctxs = vec![0u64; PER_THREAD];
                    let mut tags = vec![0u64; PER_THREAD];
                    // SAFETY: arrays of PER_THREAD entries.
                    assert_eq!(unsafe { xk_cq_read_n(&hcq, ctxs.as_mut_ptr(), tags.as_mut_ptr(), PER_THREAD, scope) }, 0);
                    (ctxs, tags)
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut seen = HashSet::new();
    for (ctxs, tags) in &got {
        for (c, tag) in ctxs.iter().zip(tags) {
            let (t, i) = ((c >> 32) as usize - 1, (c & 0xffff_ffff) as usize);
            assert_eq!(*tag, (t * 1000 + i) as u64, "completion tag matches its context");
            assert!(seen.insert(*c), "completion {c:#x} twice");
        }
    }
    assert_eq!(seen.len(), THREADS * PER_THREAD);
    for t in 0..THREADS {
        for i in 0..PER_THREAD {
            let r = peer.recv.lock().unwrap();
            let b = &r[&((t * 1000 + i) as u64)];
            assert!(b.iter().enumerate().all(|(k, v)| *v == pattern(t, i, k)) && b.len() == LEN, "data of tag {}", t * 1000 + i);
        }
    }
    let base = (THREADS * PER_THREAD) as u64;
    // SAFETY: valid handle.
    assert_eq!(unsafe { xk_cntr_read(&hcn, 0) }, base);

    // RMA writes: 32 chunks of 64 bytes; wait on the counter, then the CQ.
    let src: Vec<u8> = (0..32 * 64).map(|k| (k * 13 + 5) as u8).collect();
    let dest = PEER;
    // SAFETY: src lives until the counter says the writes are done.
    unsafe {
        assert_eq!(xk_write_n(&hep, &dest, src.as_ptr(), 64, 32, 0, KEY, 0x5000, 0), 0);
        assert_eq!(xk_cntr_wait(&hcn, base + 32, 5000, 0), 0);
        assert_eq!(xk_cntr_read(&hcn, 0), base + 32);
        let mut ctxs = vec![0u64; 32];
        assert_eq!(xk_cq_read_n(&hcq, ctxs.as_mut_ptr(), std::ptr::null_mut(), 32, 0), 0);
        ctxs.sort();
        assert_eq!(ctxs, (0x5000..0x5000 + 32).collect::<Vec<u64>>());
    }
    assert_eq!(*peer.window.lock().unwrap(), src);

    // An untagged send.
    let msg = *b"hello from the device";
    let mut c = 0u64;
    // SAFETY: msg outlives its completion.
    unsafe {
        assert_eq!(xk_send(&hep, &dest, msg.as_ptr() as *const c_void, msg.len(), 0x77, 0), 0);
        assert_eq!(xk_cq_read_n(&hcq, &mut c, std::ptr::null_mut(), 1, 0), 0);
    }
    assert_eq!(c, 0x77);
    assert_eq!(peer.inbox.lock().unwrap().as_slice(), &[msg.to_vec()]);

    // A write with a bad key: error completion, error count, a waiter woken
    // with -FI_EAVAIL; the success count is unchanged.
    // SAFETY: valid handles and buffers throughout.
    unsafe {
        let waiter = std::thread::spawn(move || xk_cntr_wait(&hcn, 1 << 40, 5000, 0));
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(xk_write_n(&hep, &dest, src.as_ptr(), 8, 1, 0, KEY + 1, 0x99, 0), 0);
        let mut ec = 0u64;
        assert_eq!(xk_cq_readerr(&hcq, &mut ec, 0), FI_EACCES);
        assert_eq!(ec, 0x99);
        assert_eq!(waiter.join().unwrap(), -FI_EAVAIL);
        assert_eq!(xk_cntr_readerr(&hcn, 0), 1);
        assert_eq!(xk_cntr_read(&hcn, 0), base + 33);
        assert_eq!(xk_cntr_wait(&hcn, 1 << 40, 10, 0), -FI_ETIMEDOUT);
        // An unknown destination is an error completion too.
        let bad = 42u64;
        assert_eq!(xk_send(&hep, &bad, msg.as_ptr() as *const c_void, 1, 0x100, 0), 0);
        assert_eq!(xk_cq_readerr(&hcq, &mut ec, 0), FI_EADDRNOTAVAIL);
        assert_eq!(ec, 0x100);
        assert_eq!(xk_bad_input(&hep, &hcq, &hcn), 0);
    }

    // Close in an unusual order: context first, then the objects.
    drop(ctx);
    drop(ring);
    drop(proxy);
    drop(cn);
    drop(wq);
}

fn memfd_counts() -> (usize, usize) {
    let fds = std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|l| l.to_string_lossy().starts_with("/memfd:"))
        .count();
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap().lines().filter(|l| l.contains("/memfd:")).count();
    (fds, maps)
}

#[test]
fn device_kernels_against_host_proxy() {
    let before = memfd_counts();

    // With the application's callbacks (alloc mapped through its fd,
    // doorbell imported as a DMA-BUF).
    let ops = app_ops();
    run(Some(&ops));
    let calls = CALLS.lock().unwrap().clone();
    let allocs: Vec<u64> = calls.iter().filter_map(|c| if let Call::Alloc { addr } = c { Some(*addr) } else { None }).collect();
    let mut frees: Vec<u64> = calls.iter().filter_map(|c| if let Call::Free { addr } = c { Some(*addr) } else { None }).collect();
    assert_eq!(allocs.len(), 3, "work queue, CQ, counter: {calls:?}");
    let mut a = allocs.clone();
    a.sort();
    frees.sort();
    assert_eq!(a, frees, "free once for every alloc");
    let imports: Vec<_> = calls.iter().filter(|c| matches!(c, Call::Import { .. })).collect();
    assert_eq!(imports.len(), 1, "only the doorbell is imported: {calls:?}");
    assert!(matches!(imports[0], Call::Import { flags, fd } if *flags & FI_XPU_IMPORT_DMABUF != 0 && *fd >= 0));

    // An import that fails: the endpoint cannot be exported, the code is
    // the callback's, and nothing stays allocated.
    *IMPORT_RC.lock().unwrap() = -FI_EACCES;
    let ctx = open(&ops);
    assert_eq!(ctx.work_queue(16).err(), Some(Error(FI_EACCES)));
    drop(ctx);
    *IMPORT_RC.lock().unwrap() = 0;
    assert!(LIVE.lock().unwrap().is_empty());

    // Without callbacks: the provider's own memory.
    CALLS.lock().unwrap().clear();
    run(None);
    assert!(CALLS.lock().unwrap().is_empty());

    // The application unmaps what its import mapped once the context and
    // every object are closed.
    for (p, l) in IMPORTED.lock().unwrap().drain(..) {
        // SAFETY: mappings app_import made.
        unsafe { libc::munmap(p as *mut c_void, l) };
    }
    assert_eq!(memfd_counts(), before, "(memfd descriptors, memfd mappings) leaked");
}
