//! Host side of accelerator-initiated communication (`fi_xpu(3)`) for
//! providers whose XPU is the host itself (`FI_HMEM_SYSTEM`). A provider
//! composes it: its `Domain::xpu_ctx` opens an [`XpuCtx`] naming itself
//! ([`XpuProvider`]: the name in log lines, the `fid_xpu.prov_id` device
//! code dispatches on).
//!
//! An XPU context owns the application's memory callbacks
//! (`struct fi_xpu_ops`) and the doorbell page. Exported objects are plain
//! memory queues whose layout is `<rdma/fi_xpu_device.h>`'s:
//! - [`WorkQueue`]: device threads produce work requests, the host proxy
//!   consumes them ([`WorkQueue::pop`]);
//! - [`CompletionRing`]: the host proxy produces completions, device threads
//!   consume them;
//! - [`XpuCounter`]: two words the host raises.
//!
//! (The header spells the structs of this layout `fi_xpu_shm_*`; the
//! layout itself belongs to no provider.)
//!
//! Memory comes from the application's `alloc` (mapped through the fd it
//! returns with `FI_XPU_ALLOC_DMABUF`, else used at the address it returns)
//! or, without one, from a memfd mapping of our own. The doorbell page is a
//! memfd handed to the application's `import` as a DMA-BUF stand-in; with
//! an `import` of the pre-2.8 shape it cannot be imported, and exporting an
//! endpoint fails with `EOPNOTSUPP`.

use crate::abi::*;
use crate::error::{Error, Result, EAGAIN, EINVAL, ENOMEM, EOPNOTSUPP};
use libc::{c_int, c_void};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

// ---- layout shared with fi_xpu_device.h --------------------------------

pub const EP_MAGIC: u64 = 0x3170_655f_7570_7866;
pub const CQ_MAGIC: u64 = 0x3171_635f_7570_7866;
pub const CNTR_MAGIC: u64 = 0x3163_635f_7570_7866;

pub const OP_SEND: u32 = 1;
pub const OP_TSEND: u32 = 2;
pub const OP_WRITE: u32 = 3;

/// A work-queue entry (the header's `struct fi_xpu_shm_wqe`).
#[repr(C)]
pub struct Wqe {
    pub seq: AtomicU64,
    pub op: u32,
    pub flags: u32,
    pub buf: u64,
    pub len: u64,
    pub dest: u64,
    pub tag: u64,
    pub raddr: u64,
    pub key: u64,
    pub context: u64,
    pub desc: u64,
}

/// A completion-ring entry (the header's `struct fi_xpu_shm_cqe`).
#[repr(C)]
pub struct Cqe {
    pub seq: AtomicU64,
    pub op_context: u64,
    pub flags: u64,
    pub len: u64,
    pub buf: u64,
    pub data: u64,
    pub tag: u64,
    pub err: i32,
    pub prov_errno: i32,
}

/// The header of a work queue or completion ring (the header's
/// `struct fi_xpu_shm_queue`); entries follow at [`ENTRIES_OFFSET`].
#[repr(C)]
pub struct QueueHdr {
    pub magic: u64,
    pub mask: u64,
    pub doorbell: u64,
    pub reserved: [u64; 5],
    pub tail: AtomicU64,
    pub pad0: [u64; 7],
    pub head: AtomicU64,
    pub pad1: [u64; 7],
}

pub const ENTRIES_OFFSET: usize = 192;

/// The words of a counter (the header's `struct fi_xpu_shm_cntr`).
#[repr(C)]
pub struct CntrWords {
    pub magic: u64,
    pub reserved: [u64; 7],
    pub value: AtomicU64,
    pub err: AtomicU64,
}

/// Where the doorbell word sits in its page: not at 0, so that importers
/// must keep the in-page offset.
pub const DOORBELL_OFFSET: usize = 64;

// ---- callbacks ----------------------------------------------------------

type AllocFn = unsafe extern "C" fn(u64, u64, u64, u64, *mut *mut c_void, *mut c_int, *mut u64) -> c_int;
type ImportFn = unsafe extern "C" fn(u64, *mut c_void, u64, u64, c_int, *mut *mut c_void) -> c_int;
/// The `import` member before API 2.8: no `fd`.
type ImportFnOld = unsafe extern "C" fn(u64, *mut c_void, u64, u64, *mut *mut c_void) -> c_int;
type FreeFn = unsafe extern "C" fn(u64, *mut c_void);

/// The application's callbacks, read once from `struct fi_xpu_ops`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Callbacks {
    pub alloc: Option<AllocFn>,
    pub import: Option<ImportFn>,
    pub free: Option<FreeFn>,
    /// `import` has the 2.8 shape (takes `fd`).
    pub import_takes_fd: bool,
}

impl Callbacks {
    /// Read `ops` as an application of `api_version` filled it (the C
    /// boundary's conversion: refusals are logged as the core's).
    ///
    /// # Safety
    /// `ops` is NULL or points to at least `size_of::<usize>()` readable
    /// bytes, and to `(*ops).size` bytes when that is smaller than ours.
    pub unsafe fn from_c(ops: *const fi_xpu_ops, api_version: u32) -> Result<Option<Callbacks>> {
        if ops.is_null() {
            return Ok(None);
        }
        // SAFETY: the caller guarantees `size` is readable.
        let size = unsafe { std::ptr::addr_of!((*ops).size).read_unaligned() };
        if size < std::mem::size_of::<fi_xpu_ops>() {
            crate::fi_warn!("core", FI_LOG_DOMAIN, "fi_xpu_ops.size {} is smaller than the {} bytes of alloc, import and free", size, std::mem::size_of::<fi_xpu_ops>());
            return Err(EINVAL);
        }
        // SAFETY: size covers the whole struct we know.
        let o = unsafe { ops.read_unaligned() };
        if o.alloc.is_some() != o.free.is_some() {
            crate::fi_warn!("core", FI_LOG_DOMAIN, "fi_xpu_ops: alloc and free must be given together");
            return Err(EINVAL);
        }
        Ok(Some(Callbacks {
            alloc: o.alloc,
            import: o.import,
            free: o.free,
            import_takes_fd: api_version >= fi_version(2, 8),
        }))
    }

    /// Call `import` in the shape the application was built for. With the
    /// old shape `fd` is not passed and `FI_XPU_IMPORT_DMABUF` never set;
    /// the caller must not ask for it.
    fn import(&self, device: u64, host: *mut c_void, size: u64, flags: u64, fd: c_int) -> Result<u64> {
        let f = self.import.ok_or(EINVAL)?;
        let mut dev: *mut c_void = std::ptr::null_mut();
        let rc = if self.import_takes_fd {
            // SAFETY: an application callback with the prototype of fi_xpu.h;
            // `dev` is a valid out pointer.
            unsafe { f(device, host, size, flags, fd, &mut dev) }
        } else {
            debug_assert!(flags & FI_XPU_IMPORT_DMABUF == 0);
            // SAFETY: an application built before API 2.8 stored a pointer
            // to a function of the older five-argument prototype in this
            // slot (same size and place); we call it through that type.
            let old: ImportFnOld = unsafe { std::mem::transmute::<ImportFn, ImportFnOld>(f) };
            // SAFETY: as above, with the prototype it was compiled with.
            unsafe { old(device, host, size, flags, &mut dev) }
        };
        if rc != 0 {
            return Err(Error::from_c(if rc < 0 { rc } else { -FI_EOTHER }));
        }
        if dev.is_null() {
            return Err(EINVAL);
        }
        Ok(dev as u64)
    }
}

// ---- memory -------------------------------------------------------------

fn page_size() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 { p as usize } else { 4096 }
}

fn round_up(n: usize, to: usize) -> usize {
    n.div_ceil(to) * to
}

/// A shared memfd mapping of whole pages.
struct MemfdMap {
    fd: c_int,
    base: *mut u8,
    len: usize,
}

impl MemfdMap {
    fn new(name: &std::ffi::CStr, size: usize) -> Result<MemfdMap> {
        let len = round_up(size.max(1), page_size());
        // SAFETY: name is NUL-terminated.
        let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(ENOMEM);
        }
        // SAFETY: fd is ours.
        if unsafe { libc::ftruncate(fd, len as libc::off_t) } != 0 {
            // SAFETY: fd is ours and closed once.
            unsafe { libc::close(fd) };
            return Err(ENOMEM);
        }
        // SAFETY: a fresh shared mapping of our own fd.
        let base = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, 0) };
        if base == libc::MAP_FAILED {
            // SAFETY: as above.
            unsafe { libc::close(fd) };
            return Err(ENOMEM);
        }
        Ok(MemfdMap { fd, base: base as *mut u8, len })
    }

    fn close_fd(&mut self) {
        if self.fd >= 0 {
            // SAFETY: our fd, closed once.
            unsafe { libc::close(self.fd) };
            self.fd = -1;
        }
    }
}

impl Drop for MemfdMap {
    fn drop(&mut self) {
        self.close_fd();
        // SAFETY: the mapping made in new(), unmapped once.
        unsafe { libc::munmap(self.base as *mut c_void, self.len) };
    }
}

/// Memory device code reaches at `dev_addr` and the host at `host`.
pub struct XpuMem {
    host: *mut u8,
    len: usize,
    dev_addr: u64,
    /// `fid_xpu.prov_id` of handles to this memory.
    prov_id: u32,
    /// Our own mapping (the default allocator), if any.
    own: Option<MemfdMap>,
    /// Our view of an application allocation mapped through its fd.
    app_view: Option<(*mut c_void, usize)>,
    /// The application allocation to hand back to `free`.
    app: Option<(FreeFn, u64, *mut c_void)>,
}

// SAFETY: the memory is shared by design; every access goes through atomics
// or is ordered by them (see fi_xpu_device.h).
unsafe impl Send for XpuMem {}
// SAFETY: as above.
unsafe impl Sync for XpuMem {}

impl XpuMem {
    pub fn host_ptr(&self) -> *mut u8 {
        self.host
    }
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn dev_addr(&self) -> u64 {
        self.dev_addr
    }
}

impl Drop for XpuMem {
    fn drop(&mut self) {
        if let Some((p, l)) = self.app_view.take() {
            // SAFETY: the view mapped in XpuCtx::alloc, unmapped once.
            unsafe { libc::munmap(p, l) };
        }
        if let Some((free, device, addr)) = self.app.take() {
            // SAFETY: the application's free for the address its alloc gave;
            // called exactly once (take()).
            unsafe { free(device, addr) };
        }
        self.own.take();
    }
}

// ---- the context --------------------------------------------------------

/// The doorbell word: device code adds one per posted request.
pub struct Doorbell {
    map: MemfdMap,
    dev_addr: u64,
}

// SAFETY: the word is only touched atomically.
unsafe impl Send for Doorbell {}
// SAFETY: as above.
unsafe impl Sync for Doorbell {}

impl Doorbell {
    fn word(&self) -> &AtomicU64 {
        // SAFETY: DOORBELL_OFFSET is 8-aligned inside the mapped page, which
        // lives as long as self.
        unsafe { &*(self.map.base.add(DOORBELL_OFFSET) as *const AtomicU64) }
    }
    /// Requests rung so far (acquire).
    pub fn value(&self) -> u64 {
        self.word().load(Ordering::Acquire)
    }
    pub fn dev_addr(&self) -> u64 {
        self.dev_addr
    }
}

/// The provider an XPU context belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct XpuProvider {
    /// The provider's name, as its log lines give it.
    pub name: &'static str,
    /// `fid_xpu.prov_id` of the objects it exports (`enum fi_xpu_provider`).
    pub prov_id: u32,
}

/// `struct fi_xpu_attr` as the provider sees it: the application's
/// callbacks already read ([`Callbacks::from_c`]), with the API version the
/// application's fabric was opened with.
#[derive(Clone, Copy, Debug)]
pub struct XpuAttr {
    pub iface: fi_hmem_iface,
    pub device: u64,
    pub callbacks: Option<Callbacks>,
    pub api_version: u32,
}

/// What `fi_xpu_ctx` validated.
#[derive(Debug)]
pub struct XpuCtx {
    pub provider: XpuProvider,
    pub device: u64,
    pub api_version: u32,
    cb: Option<Callbacks>,
    doorbell: Mutex<Option<Arc<Doorbell>>>,
}

impl std::fmt::Debug for Doorbell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Doorbell({:#x})", self.dev_addr)
    }
}

/// The object an open call asks for, from its `FI_XPU` flag (`flag`) and
/// the context named by its `xpu_ctx` member (`ctx`). `fi_xpu(3)` spells an
/// XPU object two ways: the flag together with a context, and (in its
/// EXAMPLE) the context alone; both give an XPU object of that context
/// (`Some`). With neither it is a host object (`None`). The flag without a
/// context names no device: `EINVAL`. `what` names the call in the log line
/// (the core's: no provider is named yet).
pub fn requested<T>(flag: bool, ctx: Option<T>, what: &str) -> Result<Option<T>> {
    if flag && ctx.is_none() {
        crate::fi_warn!("core", FI_LOG_DOMAIN, "{}: FI_XPU is set but xpu_ctx is NULL (or the caller's API version has no xpu_ctx)", what);
        return Err(EINVAL);
    }
    Ok(ctx)
}

/// Raw address and descriptor sizes device code uses (`fi_addr_t` and MR key).
pub const AV_ADDR_SIZE: usize = 8;
pub const MR_DESC_SIZE: usize = 8;

impl XpuCtx {
    /// Validate an `fi_xpu_attr` for `provider`'s host XPU.
    pub fn open(provider: XpuProvider, attr: &XpuAttr) -> Result<Arc<XpuCtx>> {
        let XpuAttr { iface, device, callbacks: cb, api_version } = *attr;
        if iface != FI_HMEM_SYSTEM {
            crate::fi_warn!(provider.name, FI_LOG_DOMAIN, "XPU iface {} not supported: the {} XPU is the host (FI_HMEM_SYSTEM)", iface, provider.name);
            return Err(EOPNOTSUPP);
        }
        if device != 0 {
            crate::fi_warn!(provider.name, FI_LOG_DOMAIN, "XPU device {} does not exist: the host XPU is device 0", device);
            return Err(EINVAL);
        }
        Ok(Arc::new(XpuCtx { provider, device, api_version, cb, doorbell: Mutex::new(None) }))
    }

    pub fn query(&self) -> fi_xpu_ctx_attr {
        fi_xpu_ctx_attr { caps: FI_XPU_CAP_EP | FI_XPU_CAP_CQ | FI_XPU_CAP_CNTR, av_addr_size: AV_ADDR_SIZE, mr_desc_size: MR_DESC_SIZE }
    }

    pub fn callbacks(&self) -> Option<&Callbacks> {
        self.cb.as_ref()
    }

    /// Device-reachable memory of `size` bytes, zeroed.
    pub fn alloc(&self, size: usize) -> Result<XpuMem> {
        let page = page_size();
        if let Some(cb) = self.cb.as_ref() {
            if let (Some(alloc), Some(free)) = (cb.alloc, cb.free) {
                let mut addr: *mut c_void = std::ptr::null_mut();
                let mut fd: c_int = -1;
                let mut offset: u64 = 0;
                // SAFETY: the application's alloc with valid out pointers.
                let rc = unsafe { alloc(self.device, size as u64, page as u64, FI_XPU_ALLOC_DMABUF, &mut addr, &mut fd, &mut offset) };
                if rc != 0 {
                    return Err(Error::from_c(if rc < 0 { rc } else { -FI_EOTHER }));
                }
                if addr.is_null() {
                    return Err(ENOMEM);
                }
                let mut mem = XpuMem { host: addr as *mut u8, len: size, dev_addr: addr as u64, prov_id: self.provider.prov_id, own: None, app_view: None, app: Some((free, self.device, addr)) };
                if fd >= 0 {
                    let start = offset & !(page as u64 - 1);
                    let skip = (offset - start) as usize;
                    let len = round_up(skip + size, page);
                    // SAFETY: mapping the application's DMA-BUF stand-in at a
                    // page-aligned offset; failure is checked.
                    let p = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, start as libc::off_t) };
                    if p == libc::MAP_FAILED {
                        crate::fi_warn!(self.provider.name, FI_LOG_DOMAIN, "XPU alloc: cannot map the returned fd {} at offset {}", fd, offset);
                        return Err(ENOMEM); // drop(mem) calls free
                    }
                    mem.app_view = Some((p, len));
                    // SAFETY: skip < page <= len.
                    mem.host = unsafe { (p as *mut u8).add(skip) };
                }
                // SAFETY: `size` bytes at host are ours to initialise.
                unsafe { std::ptr::write_bytes(mem.host, 0, size) };
                return Ok(mem);
            }
        }
        let mut own = MemfdMap::new(c"rfabric-xpu", size)?;
        let mut dev = own.base as u64;
        if let Some(cb) = self.cb.as_ref().filter(|c| c.import.is_some()) {
            // Ordinary memory: importable with either shape.
            let (flags, fd) = if cb.import_takes_fd { (FI_XPU_IMPORT_DEVICEMAP | FI_XPU_IMPORT_DMABUF, own.fd) } else { (FI_XPU_IMPORT_DEVICEMAP, -1) };
            dev = cb.import(self.device, own.base as *mut c_void, own.len as u64, flags, fd)?;
        }
        own.close_fd();
        Ok(XpuMem { host: own.base, len: size, dev_addr: dev, prov_id: self.provider.prov_id, own: Some(own), app_view: None, app: None })
    }

    /// The context's doorbell, imported into the device on first use.
    pub fn doorbell(&self) -> Result<Arc<Doorbell>> {
        let mut slot = self.doorbell.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(d) = slot.as_ref() {
            return Ok(d.clone());
        }
        let mut map = MemfdMap::new(c"rfabric-xpu-doorbell", page_size())?;
        // SAFETY: DOORBELL_OFFSET is inside the page.
        let host = unsafe { map.base.add(DOORBELL_OFFSET) };
        let dev_addr = match self.cb.as_ref().filter(|c| c.import.is_some()) {
            None => host as u64,
            Some(cb) if !cb.import_takes_fd => {
                crate::fi_warn!(self.provider.name, FI_LOG_DOMAIN, "XPU doorbell page can only be imported as a DMA-BUF, and the import callback has the pre-2.8 shape (no fd): cannot export");
                return Err(EOPNOTSUPP);
            }
            Some(cb) => {
                let flags = FI_XPU_IMPORT_DMABUF | FI_XPU_IMPORT_DEVICEMAP;
                cb.import(self.device, host as *mut c_void, 8, flags, map.fd)?
            }
        };
        if dev_addr % 8 != 0 {
            crate::fi_warn!(self.provider.name, FI_LOG_DOMAIN, "XPU import returned a misaligned doorbell address {:#x}", dev_addr);
            return Err(EINVAL);
        }
        map.close_fd();
        let d = Arc::new(Doorbell { map, dev_addr });
        *slot = Some(d.clone());
        Ok(d)
    }

    fn queue(&self, entries: usize, entry_size: usize, magic: u64, doorbell: u64) -> Result<XpuMem> {
        if entries == 0 || !entries.is_power_of_two() {
            return Err(EINVAL);
        }
        let mem = self.alloc(ENTRIES_OFFSET + entries * entry_size)?;
        // SAFETY: the region starts page-aligned (or at the app's aligned
        // address) and holds a header plus `entries` entries.
        let hdr = unsafe { &mut *(mem.host as *mut QueueHdr) };
        hdr.magic = magic;
        hdr.mask = entries as u64 - 1;
        hdr.doorbell = doorbell;
        for i in 0..entries {
            // SAFETY: in bounds; seq is the first u64 of each entry.
            let seq = unsafe { &*(mem.host.add(ENTRIES_OFFSET + i * entry_size) as *const AtomicU64) };
            seq.store(i as u64, Ordering::Relaxed);
        }
        std::sync::atomic::fence(Ordering::Release);
        Ok(mem)
    }

    /// The work queue of an exported endpoint.
    pub fn work_queue(&self, entries: usize) -> Result<WorkQueue> {
        let doorbell = self.doorbell()?;
        let mem = self.queue(entries, std::mem::size_of::<Wqe>(), EP_MAGIC, doorbell.dev_addr)?;
        Ok(WorkQueue { mem, doorbell, head: Mutex::new(0) })
    }

    /// The completion ring of an exported CQ.
    pub fn completion_ring(&self, entries: usize) -> Result<CompletionRing> {
        let mem = self.queue(entries, std::mem::size_of::<Cqe>(), CQ_MAGIC, 0)?;
        Ok(CompletionRing { mem, tail: Mutex::new(0) })
    }

    /// The words of an exported counter.
    pub fn counter(&self) -> Result<XpuCounter> {
        let mem = self.alloc(std::mem::size_of::<CntrWords>())?;
        // SAFETY: zeroed, large enough, aligned.
        unsafe { (*(mem.host as *mut CntrWords)).magic = CNTR_MAGIC };
        std::sync::atomic::fence(Ordering::Release);
        Ok(XpuCounter { mem })
    }
}

fn handle(fclass: usize, mem: &XpuMem) -> fid_xpu {
    fid_xpu { fclass: fclass as u32, prov_id: mem.prov_id, prov_ctx: mem.dev_addr }
}

fn hdr(mem: &XpuMem) -> &QueueHdr {
    // SAFETY: set up by XpuCtx::queue; lives as long as mem.
    unsafe { &*(mem.host as *const QueueHdr) }
}

/// One request taken from a work queue.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WorkRequest {
    pub op: u32,
    pub buf: u64,
    pub len: u64,
    pub dest: u64,
    pub tag: u64,
    pub raddr: u64,
    pub key: u64,
    pub context: u64,
    pub desc: u64,
}

/// Host end (single consumer) of an exported endpoint's work queue.
pub struct WorkQueue {
    mem: XpuMem,
    doorbell: Arc<Doorbell>,
    head: Mutex<u64>,
}

impl WorkQueue {
    pub fn handle(&self) -> fid_xpu {
        handle(FI_CLASS_EP, &self.mem)
    }
    pub fn doorbell(&self) -> &Doorbell {
        &self.doorbell
    }
    /// Take the next published request, if any.
    pub fn pop(&self) -> Option<WorkRequest> {
        let h = hdr(&self.mem);
        let mut head = self.head.lock().unwrap_or_else(|e| e.into_inner());
        let pos = *head;
        let idx = (pos & h.mask) as usize;
        // SAFETY: idx <= mask, inside the region.
        let e = unsafe { &*(self.mem.host.add(ENTRIES_OFFSET + idx * std::mem::size_of::<Wqe>()) as *const Wqe) };
        if e.seq.load(Ordering::Acquire) != pos + 1 {
            return None;
        }
        // SAFETY: the acquire load above orders these plain reads after the
        // producer's writes; the slot is ours until we store seq.
        let w = unsafe {
            WorkRequest {
                op: std::ptr::addr_of!(e.op).read_volatile(),
                buf: std::ptr::addr_of!(e.buf).read_volatile(),
                len: std::ptr::addr_of!(e.len).read_volatile(),
                dest: std::ptr::addr_of!(e.dest).read_volatile(),
                tag: std::ptr::addr_of!(e.tag).read_volatile(),
                raddr: std::ptr::addr_of!(e.raddr).read_volatile(),
                key: std::ptr::addr_of!(e.key).read_volatile(),
                context: std::ptr::addr_of!(e.context).read_volatile(),
                desc: std::ptr::addr_of!(e.desc).read_volatile(),
            }
        };
        e.seq.store(pos + h.mask + 1, Ordering::Release);
        h.head.store(pos + 1, Ordering::Relaxed);
        *head = pos + 1;
        Some(w)
    }
}

/// A completion to deliver to device code.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Completion {
    pub op_context: u64,
    pub flags: u64,
    pub len: u64,
    pub buf: u64,
    pub data: u64,
    pub tag: u64,
    /// 0, or a positive `FI_E*` value for an error completion.
    pub err: i32,
    pub prov_errno: i32,
}

/// Host end (single producer) of an exported CQ.
pub struct CompletionRing {
    mem: XpuMem,
    tail: Mutex<u64>,
}

impl CompletionRing {
    pub fn handle(&self) -> fid_xpu {
        handle(FI_CLASS_CQ, &self.mem)
    }
    /// Publish one completion; `EAGAIN` while device code has not made room.
    pub fn push(&self, c: &Completion) -> Result<()> {
        let h = hdr(&self.mem);
        let mut tail = self.tail.lock().unwrap_or_else(|e| e.into_inner());
        let pos = *tail;
        let idx = (pos & h.mask) as usize;
        // SAFETY: idx <= mask, inside the region.
        let e = unsafe { self.mem.host.add(ENTRIES_OFFSET + idx * std::mem::size_of::<Cqe>()) as *mut Cqe };
        // SAFETY: seq is an AtomicU64 at the head of the entry.
        let seq = unsafe { &(*e).seq };
        if seq.load(Ordering::Acquire) != pos {
            return Err(EAGAIN);
        }
        // SAFETY: the slot is ours until the release store below; device
        // readers look at it only after seeing that store.
        unsafe {
            std::ptr::addr_of_mut!((*e).op_context).write_volatile(c.op_context);
            std::ptr::addr_of_mut!((*e).flags).write_volatile(c.flags);
            std::ptr::addr_of_mut!((*e).len).write_volatile(c.len);
            std::ptr::addr_of_mut!((*e).buf).write_volatile(c.buf);
            std::ptr::addr_of_mut!((*e).data).write_volatile(c.data);
            std::ptr::addr_of_mut!((*e).tag).write_volatile(c.tag);
            std::ptr::addr_of_mut!((*e).err).write_volatile(c.err);
            std::ptr::addr_of_mut!((*e).prov_errno).write_volatile(c.prov_errno);
        }
        seq.store(pos + 1, Ordering::Release);
        h.tail.store(pos + 1, Ordering::Relaxed);
        *tail = pos + 1;
        Ok(())
    }
}

/// Host end of an exported counter.
pub struct XpuCounter {
    mem: XpuMem,
}

impl XpuCounter {
    fn words(&self) -> &CntrWords {
        // SAFETY: set up by XpuCtx::counter; lives as long as self.
        unsafe { &*(self.mem.host as *const CntrWords) }
    }
    pub fn handle(&self) -> fid_xpu {
        handle(FI_CLASS_CNTR, &self.mem)
    }
    pub fn add(&self, n: u64) {
        self.words().value.fetch_add(n, Ordering::Release);
    }
    pub fn add_err(&self, n: u64) {
        self.words().err.fetch_add(n, Ordering::Release);
    }
    pub fn set(&self, v: u64) {
        self.words().value.store(v, Ordering::Release);
    }
    pub fn read(&self) -> u64 {
        self.words().value.load(Ordering::Acquire)
    }
    pub fn read_err(&self) -> u64 {
        self.words().err.load(Ordering::Acquire)
    }
}

// ---- the proxy ----------------------------------------------------------

/// What the proxy drives: the real endpoint behind an exported one.
pub trait XpuTarget: Send + Sync {
    /// Start one request. `EAGAIN` asks the proxy to offer it again later;
    /// any other error becomes an error completion for it.
    fn post(&self, w: &WorkRequest) -> Result<()>;
    /// Append the completions that finished since the last call.
    fn poll(&self, out: &mut Vec<Completion>);
}

/// A host thread that drains an exported endpoint's work queue into its
/// target and writes completions and counter updates back to device memory.
pub struct Proxy {
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

struct ProxyState {
    wq: Arc<WorkQueue>,
    target: Arc<dyn XpuTarget>,
    cq: Option<Arc<CompletionRing>>,
    cntr: Option<Arc<XpuCounter>>,
    pending: Option<WorkRequest>,
    backlog: std::collections::VecDeque<Completion>,
    fresh: Vec<Completion>,
}

impl ProxyState {
    /// One pass; true when anything moved.
    fn step(&mut self) -> bool {
        let mut moved = false;
        for _ in 0..64 {
            let Some(w) = self.pending.take().or_else(|| self.wq.pop()) else { break };
            match self.target.post(&w) {
                Ok(()) => moved = true,
                Err(e) if e == EAGAIN => {
                    self.pending = Some(w);
                    break;
                }
                Err(e) => {
                    moved = true;
                    self.fresh.push(Completion { op_context: w.context, len: w.len, buf: w.buf, tag: w.tag, err: e.0, ..Default::default() });
                }
            }
        }
        self.target.poll(&mut self.fresh);
        for c in self.fresh.drain(..) {
            moved = true;
            if let Some(n) = self.cntr.as_ref() {
                if c.err != 0 {
                    n.add_err(1)
                } else {
                    n.add(1)
                }
            }
            self.backlog.push_back(c);
        }
        match self.cq.as_ref() {
            None => self.backlog.clear(),
            Some(cq) => {
                while let Some(c) = self.backlog.front() {
                    if cq.push(c).is_err() {
                        break;
                    }
                    self.backlog.pop_front();
                    moved = true;
                }
            }
        }
        moved
    }
}

impl Proxy {
    /// Start draining `wq` into `target`. Completions go to `cq` (none: they
    /// are dropped), and each one raises `cntr` (or its error count).
    pub fn spawn(wq: Arc<WorkQueue>, target: Arc<dyn XpuTarget>, cq: Option<Arc<CompletionRing>>, cntr: Option<Arc<XpuCounter>>) -> Result<Proxy> {
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let s2 = stop.clone();
        let mut st = ProxyState { wq, target, cq, cntr, pending: None, backlog: Default::default(), fresh: Vec::new() };
        let thread = std::thread::Builder::new()
            .name("rfabric-xpu-proxy".into())
            .spawn(move || {
                let mut idle = 0u32;
                let mut rung = st.wq.doorbell().value();
                while !s2.load(Ordering::Acquire) {
                    if st.step() {
                        idle = 0;
                        continue;
                    }
                    // Busy-poll a while, then nap unless the doorbell moved.
                    idle = idle.saturating_add(1);
                    let now = st.wq.doorbell().value();
                    if now != rung {
                        rung = now;
                        idle = 0;
                    } else if idle > 1000 {
                        std::thread::sleep(std::time::Duration::from_micros(50));
                    } else {
                        std::hint::spin_loop();
                    }
                }
            })
            .map_err(|_| ENOMEM)?;
        Ok(Proxy { stop, thread: Some(thread) })
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
#[path = "xpu_tests.rs"]
mod tests;
