//! A registration cache any provider can put in front of an expensive
//! registration call (`ibv_reg_mr`): a second `fi_mr_reg` of memory that is
//! still registered gets the same registration, and a registration whose
//! memory has been unmapped, remapped or dropped is never handed out again.
//!
//! # How unmapped memory is noticed
//!
//! A registration pins the physical pages that were mapped when it was
//! made. After `munmap` + `mmap` at the same address, `mremap`, or
//! `madvise(MADV_DONTNEED)`, the same virtual range has other pages, and a
//! key handed out for it would let a peer read or write the old ones. The
//! cache must learn of every such change before it answers a lookup made
//! after the change. The candidates, and what was chosen:
//!
//! - **Intercepting `munmap`** (hooking the symbol or patching code, as
//!   upstream's memhooks do) misses the calls that do not go through it: a
//!   raw `syscall(SYS_munmap)`, `mremap`, `madvise`, `brk` shrinking, an
//!   allocator linked statically, another library's inlined syscall. A
//!   missed call is a stale key, so this is not correct. Not used.
//! - **userfaultfd events** (`UFFD_EVENT_UNMAP`, `UFFD_EVENT_REMAP`,
//!   `UFFD_EVENT_REMOVE`): the kernel reports every change of a registered
//!   range whatever made it, and the thread making it waits until the event
//!   is read. The range is registered in write-protect mode
//!   (`UFFDIO_REGISTER_MODE_WP`) and nothing is ever write-protected, so no
//!   page fault is ever delivered or has to be served: only the events.
//!   `UFFD_USER_MODE_ONLY` (Linux 5.11) lets an unprivileged process open
//!   one when `vm.unprivileged_userfaultfd` is 0. Ranges the kernel refuses
//!   (file-backed mappings, a range another userfaultfd holds) are
//!   registered uncached. **The default.**
//! - **Comparing `/proc/self/pagemap` page frame numbers** on every hit:
//!   exact for pinned memory (a pinned page cannot be reused by a new
//!   mapping, so the frames of a remapped range always differ), but the
//!   kernel shows frame numbers only to `CAP_SYS_ADMIN` (Linux 4.2), and a
//!   hit costs a read of 8 bytes per page. **The fallback** where
//!   userfaultfd is unavailable (an old kernel, a seccomp filter) and frame
//!   numbers are readable.
//! - Otherwise the cache is **disabled**: every registration is made fresh
//!   and released with its MR. Never stale, only slower.
//!
//! `FI_MR_CACHE_MONITOR=uffd|pagemap|disabled` picks one (an unavailable
//! choice falls to `disabled`; another value, such as upstream's
//! `memhooks`, is taken as unset); `FI_MR_CACHE_MAX_COUNT` bounds the entries
//! kept unused (default 1024, 0 disables). The choice is logged once at
//! `FI_LOG_LEVEL=info`.
//!
//! # The userfaultfd monitor
//!
//! One userfaultfd per process, shared by every cache, and one thread that
//! reads its events into a fixed ring (`Log`). That thread never allocates,
//! frees or takes a lock while events are pending: a thread that frees
//! memory can itself cause an event (a heap trimmed over a registered
//! range) and would then wait for itself. A lookup takes its cache's lock,
//! waits until the reader has published what it read (`pending` is raised
//! before each `read` and lowered after the ring is written: a `munmap`
//! that has returned had its event read, so it is either published or still
//! covered by `pending`), then drops every entry the new events overlap.
//! A cache that fell more than the ring's length behind drops everything.
//! A new entry's range is registered before the memory is, and the events
//! that arrive meanwhile are checked before it is kept.
//!
//! # fork
//!
//! The child of a `fork` inherits the caches but not the reader thread, and
//! its mappings lose their userfaultfd registration (the events would go
//! to the parent's monitor). A cache that finds itself in another process
//! than the one that made it is disabled there: its entries are forgotten
//! without being released (releasing a parent's verbs registration from
//! the child would release the parent's), and every registration in the
//! child is fresh. The parent's cache is unaffected.
//!
//! Not thread-local and not on the data path: lookups take a mutex and
//! search a list of at most `FI_MR_CACHE_MAX_COUNT` unused entries plus
//! the ones in use.

use crate::error::Result;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

const PROV: &str = "core";

/// How a cache learns of unmapped memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MonitorKind {
    /// userfaultfd events.
    Uffd,
    /// Page frame numbers from `/proc/self/pagemap`, compared on each hit.
    Pagemap,
    /// No cache: every registration is fresh.
    Disabled,
}

impl MonitorKind {
    pub fn name(self) -> &'static str {
        match self {
            MonitorKind::Uffd => "uffd",
            MonitorKind::Pagemap => "pagemap",
            MonitorKind::Disabled => "disabled",
        }
    }
}

fn page_size() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(p).ok().filter(|&p| p > 0).unwrap_or(4096)
}

/// `[start, end)` rounded out to pages.
fn pages_of(addr: usize, len: usize) -> (usize, usize) {
    let p = page_size();
    let start = addr & !(p - 1);
    let end = addr.saturating_add(len).saturating_add(p - 1) & !(p - 1);
    (start, end)
}

// ---------- userfaultfd (<linux/userfaultfd.h>) ----------

mod uffd {
    pub const UFFD_API: u64 = 0xaa;
    pub const UFFD_USER_MODE_ONLY: libc::c_int = 1;
    pub const UFFDIO_API: libc::c_ulong = 0xc018_aa3f;
    pub const UFFDIO_REGISTER: libc::c_ulong = 0xc020_aa00;
    pub const UFFDIO_REGISTER_MODE_WP: u64 = 1 << 1;
    pub const UFFD_FEATURE_EVENT_REMAP: u64 = 1 << 2;
    pub const UFFD_FEATURE_EVENT_REMOVE: u64 = 1 << 3;
    pub const UFFD_FEATURE_EVENT_UNMAP: u64 = 1 << 6;
    pub const UFFD_EVENT_REMAP: u8 = 0x14;
    pub const UFFD_EVENT_REMOVE: u8 = 0x15;
    pub const UFFD_EVENT_UNMAP: u8 = 0x16;

    #[repr(C)]
    #[derive(Default)]
    pub struct Api {
        pub api: u64,
        pub features: u64,
        pub ioctls: u64,
    }

    #[repr(C)]
    #[derive(Default)]
    pub struct Register {
        pub start: u64,
        pub len: u64,
        pub mode: u64,
        pub ioctls: u64,
    }

    /// `struct uffd_msg`: the event, then three words of its argument
    /// (`remove`/`unmap`: start, end; `remap`: from, to, len).
    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    pub struct Msg {
        pub event: u8,
        pub reserved1: u8,
        pub reserved2: u16,
        pub reserved3: u32,
        pub arg: [u64; 3],
    }
}

/// Invalidated ranges, written by the reader thread only, read by every
/// cache: slot `i % LOG_LEN` holds the `i`th range.
const LOG_LEN: usize = 1024;

struct Log {
    /// How many ranges were ever written.
    written: AtomicU64,
    start: [AtomicUsize; LOG_LEN],
    end: [AtomicUsize; LOG_LEN],
}

struct Uffd {
    fd: libc::c_int,
    pid: u32,
    /// Raised while the reader holds events not yet in `log`.
    pending: AtomicUsize,
    log: Log,
}

static UFFD: OnceLock<std::result::Result<&'static Uffd, String>> = OnceLock::new();

impl Uffd {
    fn get() -> std::result::Result<&'static Uffd, String> {
        UFFD.get_or_init(Uffd::open).clone()
    }

    fn open() -> std::result::Result<&'static Uffd, String> {
        let flags = libc::O_CLOEXEC | libc::O_NONBLOCK;
        // SAFETY: userfaultfd(2) takes flags only; the result is checked.
        let mut fd = unsafe { libc::syscall(libc::SYS_userfaultfd, flags | uffd::UFFD_USER_MODE_ONLY) } as libc::c_int;
        if fd < 0 {
            // Before Linux 5.11 the flag is unknown; privileged callers
            // can do without it.
            // SAFETY: as above.
            fd = unsafe { libc::syscall(libc::SYS_userfaultfd, flags) } as libc::c_int;
        }
        if fd < 0 {
            return Err(format!("userfaultfd: {}", std::io::Error::last_os_error()));
        }
        let want = uffd::UFFD_FEATURE_EVENT_UNMAP | uffd::UFFD_FEATURE_EVENT_REMOVE | uffd::UFFD_FEATURE_EVENT_REMAP;
        let mut api = uffd::Api { api: uffd::UFFD_API, features: want, ioctls: 0 };
        // SAFETY: UFFDIO_API reads and writes a `struct uffdio_api`.
        let rc = unsafe { libc::ioctl(fd, uffd::UFFDIO_API, &mut api) };
        if rc != 0 || api.features & want != want {
            let e = std::io::Error::last_os_error();
            // SAFETY: our fd, closed once.
            unsafe { libc::close(fd) };
            return Err(format!("UFFDIO_API without unmap/remap/remove events: {e}"));
        }
        let u: &'static Uffd = Box::leak(Box::new(Uffd {
            fd,
            pid: std::process::id(),
            pending: AtomicUsize::new(0),
            log: Log {
                written: AtomicU64::new(0),
                start: std::array::from_fn(|_| AtomicUsize::new(0)),
                end: std::array::from_fn(|_| AtomicUsize::new(0)),
            },
        }));
        std::thread::Builder::new()
            .name("rf-mr-monitor".into())
            .spawn(move || u.reader())
            .map_err(|e| format!("monitor thread: {e}"))?;
        Ok(u)
    }

    /// The reader thread: no allocation, no lock (module documentation).
    fn reader(&self) {
        let mut msgs = [uffd::Msg::default(); 16];
        loop {
            let mut p = libc::pollfd { fd: self.fd, events: libc::POLLIN, revents: 0 };
            // SAFETY: one valid pollfd.
            if unsafe { libc::poll(&mut p, 1, -1) } < 0 {
                continue;
            }
            self.pending.fetch_add(1, Ordering::SeqCst);
            loop {
                let size = std::mem::size_of_val(&msgs);
                // SAFETY: `msgs` is writable for `size` bytes; the kernel
                // writes whole `uffd_msg`s.
                let n = unsafe { libc::read(self.fd, msgs.as_mut_ptr().cast(), size) };
                let Ok(n) = usize::try_from(n) else { break };
                if n == 0 {
                    break;
                }
                for m in &msgs[..n / std::mem::size_of::<uffd::Msg>()] {
                    match m.event {
                        uffd::UFFD_EVENT_UNMAP | uffd::UFFD_EVENT_REMOVE => self.push(m.arg[0] as usize, m.arg[1] as usize),
                        uffd::UFFD_EVENT_REMAP => self.push(m.arg[0] as usize, m.arg[0].saturating_add(m.arg[2]) as usize),
                        _ => {}
                    }
                }
            }
            self.pending.fetch_sub(1, Ordering::SeqCst);
        }
    }

    fn push(&self, start: usize, end: usize) {
        let i = self.log.written.load(Ordering::Relaxed);
        let slot = (i % LOG_LEN as u64) as usize;
        self.log.start[slot].store(start, Ordering::Relaxed);
        self.log.end[slot].store(end, Ordering::Relaxed);
        self.log.written.store(i + 1, Ordering::SeqCst);
    }

    /// Registers `[start, end)` (page-aligned) for events.
    fn register(&self, start: usize, end: usize) -> std::io::Result<()> {
        let mut r = uffd::Register { start: start as u64, len: (end - start) as u64, mode: uffd::UFFDIO_REGISTER_MODE_WP, ioctls: 0 };
        // SAFETY: UFFDIO_REGISTER reads and writes a `struct uffdio_register`.
        if unsafe { libc::ioctl(self.fd, uffd::UFFDIO_REGISTER, &mut r) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }

    /// The ranges invalidated since `seen` (which is advanced); `None` when
    /// some were overwritten before they were read (drop everything).
    fn since(&self, seen: &mut u64, out: &mut Vec<(usize, usize)>) -> Option<()> {
        while self.pending.load(Ordering::SeqCst) != 0 {
            std::thread::yield_now();
        }
        let w = self.log.written.load(Ordering::SeqCst);
        if w - *seen > LOG_LEN as u64 {
            *seen = w;
            return None;
        }
        for i in *seen..w {
            let slot = (i % LOG_LEN as u64) as usize;
            out.push((self.log.start[slot].load(Ordering::Relaxed), self.log.end[slot].load(Ordering::Relaxed)));
        }
        let after = self.log.written.load(Ordering::SeqCst);
        let lapped = after >= *seen + LOG_LEN as u64;
        *seen = w;
        if lapped {
            None
        } else {
            Some(())
        }
    }
}

// ---------- pagemap ----------

/// `/proc/self/pagemap`, when it shows page frame numbers.
fn pagemap() -> std::result::Result<&'static File, String> {
    static PM: OnceLock<std::result::Result<File, String>> = OnceLock::new();
    PM.get_or_init(|| {
        let f = File::open("/proc/self/pagemap").map_err(|e| format!("/proc/self/pagemap: {e}"))?;
        let probe = Box::new(1u64);
        let addr = &*probe as *const u64 as usize;
        let frames = read_frames(&f, addr, 8).map_err(|e| format!("/proc/self/pagemap: {e}"))?;
        if frames.first().is_some_and(|&f| f & PFN_MASK != 0) {
            Ok(f)
        } else {
            Err("/proc/self/pagemap shows no page frame numbers (they need CAP_SYS_ADMIN)".into())
        }
    })
    .as_ref()
    .map_err(|e| e.clone())
}

const PFN_MASK: u64 = (1 << 55) - 1;
const PRESENT: u64 = 1 << 63;

/// One word per page of `[addr, addr + len)`: the frame number, with bit 63
/// when present (0 for a page not present).
fn read_frames(f: &File, addr: usize, len: usize) -> std::io::Result<Vec<u64>> {
    let (start, end) = pages_of(addr, len);
    let p = page_size();
    let n = (end - start) / p;
    let mut buf = vec![0u8; n * 8];
    f.read_exact_at(&mut buf, (start / p * 8) as u64)?;
    Ok(buf
        .chunks_exact(8)
        .map(|c| {
            let v = u64::from_ne_bytes(c.try_into().unwrap_or([0; 8]));
            if v & PRESENT != 0 {
                PRESENT | (v & PFN_MASK)
            } else {
                0
            }
        })
        .collect())
}

// ---------- the cache ----------

/// The monitor `FI_MR_CACHE_MONITOR` asks for (or the best available), and
/// why it is what it is.
pub fn default_monitor() -> (MonitorKind, String) {
    static CHOICE: OnceLock<(MonitorKind, String)> = OnceLock::new();
    CHOICE
        .get_or_init(|| {
            let asked = std::env::var("FI_MR_CACHE_MONITOR").ok();
            let try_uffd = || Uffd::get().map(|_| (MonitorKind::Uffd, "userfaultfd events".to_string()));
            let try_pm = || pagemap().map(|_| (MonitorKind::Pagemap, "page frame numbers of /proc/self/pagemap".to_string()));
            let c = match asked.as_deref() {
                Some("disabled") => Ok((MonitorKind::Disabled, "FI_MR_CACHE_MONITOR=disabled".to_string())),
                Some("uffd") => try_uffd(),
                Some("pagemap") => try_pm(),
                _ => try_uffd().or_else(|e1| try_pm().map_err(|e2| format!("{e1}; {e2}"))),
            };
            let c = c.unwrap_or_else(|why| (MonitorKind::Disabled, why));
            crate::fi_info!(PROV, crate::abi::FI_LOG_MR, "registration cache monitor: {} ({})", c.0.name(), c.1);
            c
        })
        .clone()
}

struct Entry<V> {
    start: usize,
    len: usize,
    access: u64,
    value: Arc<V>,
    /// Pagemap monitor: the frames at registration.
    frames: Vec<u64>,
    last_use: u64,
}

impl<V> Entry<V> {
    fn covers(&self, addr: usize, len: usize, access: u64) -> bool {
        addr >= self.start && addr.saturating_add(len) <= self.start + self.len && self.access & access == access
    }

    fn overlaps(&self, start: usize, end: usize) -> bool {
        let (s, e) = pages_of(self.start, self.len);
        s < end && start < e
    }
}

struct Inner<V> {
    entries: Vec<Entry<V>>,
    /// Log position read so far (uffd).
    seen: u64,
    clock: u64,
    /// Ranges read from the log (kept to avoid allocating per lookup).
    scratch: Vec<(usize, usize)>,
    stats: Stats,
}

/// Counters, for tests and debug logging.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub hits: u64,
    pub misses: u64,
    /// Entries dropped because their memory changed.
    pub invalidated: u64,
    /// Registrations not kept (range refused by the monitor, or disabled).
    pub uncached: u64,
}

/// A registration cache over values `V` (a provider's registration; its
/// `Drop` releases it). `get` hands out `Arc<V>`s: a registration lives
/// while the cache or any MR holds it.
pub struct MrCache<V> {
    prov: &'static str,
    kind: MonitorKind,
    max_unused: usize,
    pid: u32,
    inner: Mutex<Inner<V>>,
}

impl<V: Send + Sync> MrCache<V> {
    /// A cache with the process's monitor (`default_monitor`).
    pub fn new(prov: &'static str) -> MrCache<V> {
        let max = std::env::var("FI_MR_CACHE_MAX_COUNT").ok().and_then(|s| crate::params::parse_size(&s)).unwrap_or(1024);
        let kind = if max == 0 { MonitorKind::Disabled } else { default_monitor().0 };
        MrCache::with_monitor(prov, kind, max)
    }

    /// A cache with this monitor; an unavailable one is `Disabled`.
    pub fn with_monitor(prov: &'static str, kind: MonitorKind, max_unused: usize) -> MrCache<V> {
        let kind = match kind {
            MonitorKind::Uffd if Uffd::get().is_err() => MonitorKind::Disabled,
            MonitorKind::Pagemap if pagemap().is_err() => MonitorKind::Disabled,
            k => k,
        };
        let seen = match kind {
            MonitorKind::Uffd => Uffd::get().map(|u| u.log.written.load(Ordering::SeqCst)).unwrap_or(0),
            _ => 0,
        };
        MrCache {
            prov,
            kind,
            max_unused,
            pid: std::process::id(),
            inner: Mutex::new(Inner { entries: Vec::new(), seen, clock: 0, scratch: Vec::new(), stats: Stats::default() }),
        }
    }

    /// The monitor in effect in this process (`Disabled` in a forked child).
    pub fn monitor(&self) -> MonitorKind {
        if std::process::id() != self.pid {
            MonitorKind::Disabled
        } else {
            self.kind
        }
    }

    pub fn stats(&self) -> Stats {
        self.lock().stats
    }

    /// Entries held (in use or not).
    pub fn len(&self) -> usize {
        self.lock().entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn lock(&self) -> MutexGuard<'_, Inner<V>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The registration of `[addr, addr + len)` with at least `access`: a
    /// cached one whose memory is unchanged, or `register(addr, len)`'s.
    pub fn get(&self, addr: usize, len: usize, access: u64, register: impl FnOnce(usize, usize) -> Result<V>) -> Result<Arc<V>> {
        let mut dropped: Vec<Arc<V>> = Vec::new();
        let r = self.get_locked(addr, len, access, register, &mut dropped);
        // Released outside the lock (a release may unmap memory).
        drop(dropped);
        r
    }

    fn get_locked(
        &self,
        addr: usize,
        len: usize,
        access: u64,
        register: impl FnOnce(usize, usize) -> Result<V>,
        dropped: &mut Vec<Arc<V>>,
    ) -> Result<Arc<V>> {
        let mut g = self.lock();
        let kind = self.monitor();
        if kind == MonitorKind::Disabled {
            if std::process::id() != self.pid && !g.entries.is_empty() {
                crate::fi_info!(self.prov, crate::abi::FI_LOG_MR, "registration cache: in a forked child, {} entries of the parent forgotten", g.entries.len());
                // The parent's registrations: not released from here.
                for e in g.entries.drain(..) {
                    std::mem::forget(e.value);
                }
            }
            g.stats.uncached += 1;
            drop(g);
            return register(addr, len).map(Arc::new);
        }
        self.sync(&mut g, dropped);
        g.clock += 1;
        let now = g.clock;
        let mut found = None;
        for (i, e) in g.entries.iter().enumerate() {
            if e.covers(addr, len, access) {
                found = Some(i);
                break;
            }
        }
        if let Some(i) = found {
            let fresh = kind != MonitorKind::Pagemap || self.frames_unchanged(&g.entries[i]);
            if fresh {
                let e = &mut g.entries[i];
                e.last_use = now;
                let v = e.value.clone();
                g.stats.hits += 1;
                return Ok(v);
            }
            let e = g.entries.swap_remove(i);
            g.stats.invalidated += 1;
            dropped.push(e.value);
        }
        g.stats.misses += 1;
        let (ps, pe) = pages_of(addr, len);
        let watched = match kind {
            MonitorKind::Uffd => match Uffd::get().map_err(std::io::Error::other).and_then(|u| u.register(ps, pe)) {
                Ok(()) => true,
                Err(e) => {
                    crate::fi_dbg!(self.prov, crate::abi::FI_LOG_MR, "registration cache: [{:#x}, {:#x}) not watched ({}), registered uncached", ps, pe, e);
                    false
                }
            },
            _ => true,
        };
        let value = Arc::new(register(addr, len)?);
        if !watched {
            g.stats.uncached += 1;
            return Ok(value);
        }
        // Changes between the watch and the registration: not kept.
        self.sync(&mut g, dropped);
        let frames = if kind == MonitorKind::Pagemap {
            match pagemap().ok().and_then(|f| read_frames(f, addr, len).ok()) {
                Some(f) if f.iter().all(|&x| x != 0) => f,
                _ => {
                    g.stats.uncached += 1;
                    return Ok(value);
                }
            }
        } else {
            Vec::new()
        };
        if g.scratch.iter().any(|&(s, e)| ps < e && s < pe) {
            g.stats.uncached += 1;
            return Ok(value);
        }
        g.entries.push(Entry { start: addr, len, access, value: value.clone(), frames, last_use: now });
        self.evict(&mut g, dropped);
        Ok(value)
    }

    /// Applies the events logged since the last look (uffd).
    fn sync(&self, g: &mut Inner<V>, dropped: &mut Vec<Arc<V>>) {
        g.scratch.clear();
        if self.kind != MonitorKind::Uffd {
            return;
        }
        let Ok(u) = Uffd::get() else { return };
        debug_assert_eq!(u.pid, self.pid);
        let mut seen = g.seen;
        let mut ranges = std::mem::take(&mut g.scratch);
        let all = u.since(&mut seen, &mut ranges).is_none();
        g.seen = seen;
        let mut i = 0;
        while i < g.entries.len() {
            let e = &g.entries[i];
            if all || ranges.iter().any(|&(s, end)| e.overlaps(s, end)) {
                let e = g.entries.swap_remove(i);
                g.stats.invalidated += 1;
                dropped.push(e.value);
            } else {
                i += 1;
            }
        }
        if all {
            // Everything since the watch is unknown: keep nothing new.
            ranges.push((0, usize::MAX));
        }
        g.scratch = ranges;
    }

    fn frames_unchanged(&self, e: &Entry<V>) -> bool {
        match pagemap().ok().and_then(|f| read_frames(f, e.start, e.len).ok()) {
            Some(now) => now == e.frames,
            None => false,
        }
    }

    /// Drops the least recently used entries nobody holds beyond `max_unused`.
    fn evict(&self, g: &mut Inner<V>, dropped: &mut Vec<Arc<V>>) {
        loop {
            let unused: Vec<usize> = (0..g.entries.len()).filter(|&i| Arc::strong_count(&g.entries[i].value) == 1).collect();
            if unused.len() <= self.max_unused {
                return;
            }
            let Some(&oldest) = unused.iter().min_by_key(|&&i| g.entries[i].last_use) else { return };
            dropped.push(g.entries.swap_remove(oldest).value);
        }
    }

    /// Drops every entry nobody holds (`fi_close` of the domain).
    pub fn flush(&self) {
        let mut dropped = Vec::new();
        {
            let mut g = self.lock();
            if std::process::id() != self.pid {
                return;
            }
            let mut i = 0;
            while i < g.entries.len() {
                if Arc::strong_count(&g.entries[i].value) == 1 {
                    dropped.push(g.entries.swap_remove(i).value);
                } else {
                    i += 1;
                }
            }
        }
        drop(dropped);
    }
}

impl<V> Drop for MrCache<V> {
    fn drop(&mut self) {
        if std::process::id() != self.pid {
            let g = self.inner.get_mut().unwrap_or_else(|p| p.into_inner());
            for e in g.entries.drain(..) {
                std::mem::forget(e.value);
            }
        }
    }
}

#[cfg(test)]
#[path = "mr_cache_tests.rs"]
mod tests;
