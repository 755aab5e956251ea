//! Per-endpoint shared-memory segment.
//!
//! A segment's memory is a sealed `memfd` (see [`crate::fdpass`]): it can
//! never be made shorter, so no other process can make a page of our
//! mapping lie beyond the end of the object, which would raise SIGBUS on
//! the next access. What lives in the file system is only a small locator
//! file, `/dev/shm/rfabric-shm.<pid>.<32 hex digits>` (the hex part is 128
//! random bits from `getrandom`, so another user can neither guess the name
//! nor create it in advance), created with `O_CREAT|O_EXCL|O_NOFOLLOW`,
//! mode 0600, removed when the owner drops the segment. It tells peers the
//! owner's descriptor number and the memory's identity; it is read with
//! `pread`, never mapped, so truncating it can only make it unreadable.
//!
//! Peers attach by address (pid and nonce, from the 32-byte
//! [`Address`](crate::peer::Address)): they obtain a descriptor of the
//! memory (through `/proc/<pid>/fd`, `pidfd_getfd` or the owner's handover
//! thread), require the shrink seal before mapping it, and validate
//! everything before trusting it: file type, owner uid, permission bits,
//! size, magic, layout version, geometry and the identity in the header.
//!
//! An endpoint named with `fi_setname` is also reachable through a hard
//! link of its locator, `rfabric-shm.n.<euid>.<name>` ([`Segment::link_name`],
//! [`resolve_name`]).
//!
//! Layout (offsets from the start of the mapping):
//! `[header page][ring control (2 lines)][cells...][announcement words...]
//! [bounce chunks...]`.

use crate::fdpass::{self, Handover};
use crate::{err_io, err_perm};
use rfabric_core::error::{Error, Result, EAGAIN, EINVAL};
use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

pub const MAGIC: u64 = u64::from_le_bytes(*b"RFSHMSEG");
pub const LAYOUT_VERSION: u32 = 3;
pub const HEADER_SIZE: usize = 4096;
pub const NAME_PREFIX: &str = "rfabric-shm.";
pub const SHM_DIR: &str = "/dev/shm";
/// Largest segment we agree to map when attaching.
pub const MAX_SEGMENT: u64 = 1 << 30;
/// Size of one bounce-chunk header (one cache line).
pub const CHUNK_HDR: usize = 64;
/// Size of the ring control block (tail line + spare line).
pub const RING_CTRL: usize = 128;

/// Geometry of a segment. Both ends must agree; a peer's header is checked
/// against the bounds below, not against our own configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// Ring cells (power of two).
    pub ncells: u32,
    /// Bytes per cell: 64-byte header + inline payload (multiple of 64).
    pub cell_size: u32,
    /// Bounce slots (one per concurrent bounce-path send).
    pub nslots: u32,
    /// Chunks per bounce slot (pipelining depth).
    pub nchunks: u32,
    /// Payload bytes per bounce chunk (multiple of 64).
    pub chunk_size: u32,
}

impl Default for Geometry {
    fn default() -> Self {
        Geometry { ncells: 128, cell_size: 64 + 4096, nslots: 8, nchunks: 4, chunk_size: 64 * 1024 }
    }
}

impl Geometry {
    pub fn ring_off(&self) -> u64 {
        HEADER_SIZE as u64
    }
    pub fn cells_off(&self) -> u64 {
        self.ring_off() + RING_CTRL as u64
    }
    pub fn bounce_off(&self) -> u64 {
        let end = self.ring_off() + crate::ring::Ring::bytes(self.ncells, self.cell_size as usize) as u64;
        (end + 4095) & !4095
    }
    pub fn chunk_stride(&self) -> u64 {
        CHUNK_HDR as u64 + self.chunk_size as u64
    }
    pub fn total_size(&self) -> u64 {
        let b = self.bounce_off() + self.nslots as u64 * self.nchunks as u64 * self.chunk_stride();
        (b + 4095) & !4095
    }
    /// Bounds every value a hostile header could use to push offsets out of
    /// the mapping or make arithmetic overflow.
    pub fn check(&self) -> Result<()> {
        let ok = self.ncells.is_power_of_two()
            && (2..=1 << 16).contains(&self.ncells)
            && self.cell_size & 63 == 0
            && (128..=1 << 20).contains(&self.cell_size)
            && (1..=64).contains(&self.nslots)
            && (1..=64).contains(&self.nchunks)
            && self.chunk_size & 63 == 0
            && (64..=1 << 24).contains(&self.chunk_size);
        if ok && self.total_size() <= MAX_SEGMENT {
            Ok(())
        } else {
            Err(EINVAL)
        }
    }
}

/// The first bytes of the header page. Written by the owner before `ready`
/// is set (release); readers copy it out after seeing `ready` (acquire).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct SegHeader {
    pub magic: u64,
    pub version: u32,
    pub header_size: u32,
    pub total_size: u64,
    pub pid: u32,
    pub uid: u32,
    /// Owner's process start time (clock ticks since boot, /proc stat field
    /// 22); with `pid` it identifies the process across pid reuse.
    pub start_time: u64,
    pub generation: u64,
    pub nonce: [u8; 16],
    /// Owner's virtual address of this header: a known location for the
    /// cross-memory-attach probe.
    pub probe_addr: u64,
    pub geom_ncells: u32,
    pub geom_cell_size: u32,
    pub geom_nslots: u32,
    pub geom_nchunks: u32,
    pub geom_chunk_size: u32,
    pub _pad: u32,
}

/// Offset of the readiness flag within the header page (own cache line).
const READY_OFF: usize = 256;

/// Shared-copy descriptors of rendezvous receives
/// (`endpoint/shared_copy.rs`): in the header page after the ready flag,
/// one cache line each. The owner (the receiver) sets them up; the sender
/// of the message claims chunks and reports copies through them.
pub const HELP_OFF: usize = 1024;
pub const HELP_SLOTS: usize = 32;
const HELP_STRIDE: usize = 64;

#[repr(C)]
pub struct HelpDesc {
    /// `tag << 32 | next unclaimed chunk`; a claim is a CAS that keeps the
    /// tag, so a sender holding a stale tag never claims a later message's
    /// chunk.
    pub claim: AtomicU64,
    /// Chunks copied by either side.
    pub done: AtomicU32,
    /// 1 + the chunk the sender claimed and could not copy (0: none).
    pub failed: AtomicU32,
}
const READY_MAGIC: u32 = 0x5245_4459;

/// How this process got its descriptor of a segment's memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FdSource {
    /// We created it.
    Created,
    /// `open("/proc/<pid>/fd/<n>")`.
    Proc,
    /// `pidfd_getfd`.
    Pidfd,
    /// The owner's handover thread (`SCM_RIGHTS`).
    Handover,
    /// None: [`Segment::gone`], private memory standing in for the segment
    /// of a process that died.
    Gone,
}

/// What only the owner of a segment holds.
struct Owned {
    /// The memory; kept open so that peers can fetch it.
    memfd: OwnedFd,
    /// Serves `memfd` to peers that may not read our `/proc` entries.
    /// Stopped before `memfd` is closed (`Segment::drop`).
    handover: Option<Handover>,
    /// The creating process: a forked child that drops an inherited
    /// segment must not remove its parent's locator nor clear its ready flag.
    pid: u32,
}

/// A mapped segment: ours (created, unlinked on drop) or a peer's (attached).
pub struct Segment {
    base: *mut u8,
    size: usize,
    name: String,
    header: SegHeader,
    source: FdSource,
    own: Option<Owned>,
}

// SAFETY: the mapping is process-wide memory; all shared accesses go
// through atomics or raw copies, so the handle may move between threads.
unsafe impl Send for Segment {}

fn random_bytes(buf: &mut [u8]) -> Result<()> {
    let mut off = 0;
    while off < buf.len() {
        // SAFETY: writes at most buf.len()-off bytes into buf[off..].
        let n = unsafe { libc::getrandom(buf[off..].as_mut_ptr().cast(), buf.len() - off, 0) };
        if n < 0 {
            let e = errno();
            if e == libc::EINTR {
                continue;
            }
            return Err(Error(e));
        }
        off += n as usize;
    }
    Ok(())
}

pub(crate) fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO)
}

pub fn segment_name(pid: u32, nonce: &[u8; 16]) -> String {
    let mut s = format!("{NAME_PREFIX}{pid}.");
    for b in nonce {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// Start time of a process (field 22 of /proc/<pid>/stat) and whether it is
/// still running (not a zombie). `None` when the process does not exist.
pub fn proc_state(pid: u32) -> Option<(bool, u64)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &s[s.rfind(')')? + 1..];
    let mut it = rest.split_whitespace();
    let state = it.next()?;
    let start: u64 = it.nth(18)?.parse().ok()?;
    let running = !matches!(state, "Z" | "X" | "x");
    Some((running, start))
}

/// True while process `pid` that started at `start_time` is alive. A pid
/// reused by another process counts as dead; a zombie counts as dead.
pub fn pid_alive(pid: u32, start_time: u64) -> bool {
    if pid == 0 || pid > i32::MAX as u32 {
        return false;
    }
    match proc_state(pid) {
        Some((running, st)) => running && (start_time == 0 || st == start_time),
        None => {
            // No /proc: fall back to signal 0.
            // SAFETY: kill with signal 0 only checks for existence.
            let r = unsafe { libc::kill(pid as i32, 0) };
            r == 0 || errno() == libc::EPERM
        }
    }
}

pub fn self_start_time() -> u64 {
    proc_state(std::process::id()).map(|s| s.1).unwrap_or(0)
}

fn shm_path(name: &str) -> String {
    format!("{SHM_DIR}/{name}")
}

impl Segment {
    /// Creates and initialises a new segment owned by this process: the
    /// sealed memory, its header and ring, the handover thread, and last the
    /// locator file, so a peer that finds the name finds a ready segment.
    pub fn create(geom: Geometry) -> Result<Segment> {
        geom.check()?;
        let pid = std::process::id();
        let mut nonce = [0u8; 16];
        random_bytes(&mut nonce)?;
        let name = segment_name(pid, &nonce);
        let size = geom.total_size();
        let memfd = fdpass::create_sealed(&name, size)?;
        let st = fstat(memfd.as_raw_fd())?;
        let base = map(memfd.as_raw_fd(), size as usize)?;
        let header = SegHeader {
            magic: MAGIC,
            version: LAYOUT_VERSION,
            header_size: HEADER_SIZE as u32,
            total_size: size,
            pid,
            // SAFETY: geteuid cannot fail.
            uid: unsafe { libc::geteuid() },
            start_time: self_start_time(),
            generation: 1,
            nonce,
            probe_addr: base as u64,
            geom_ncells: geom.ncells,
            geom_cell_size: geom.cell_size,
            geom_nslots: geom.nslots,
            geom_nchunks: geom.nchunks,
            geom_chunk_size: geom.chunk_size,
            _pad: 0,
        };
        // From here on, dropping `seg` unmaps (and, once the locator exists,
        // removes it).
        let mut seg = Segment { base, size: size as usize, name, header, source: FdSource::Created, own: None };
        // SAFETY: the mapping is at least HEADER_SIZE bytes and page aligned.
        unsafe { std::ptr::write_volatile(base.cast::<SegHeader>(), header) };
        // SAFETY: ring region lies within the mapping; nobody else knows the name yet.
        unsafe { crate::ring::Ring::init(seg.ring_base(), geom.ncells, geom.cell_size as usize) };
        seg.ready_flag().store(READY_MAGIC, Ordering::Release);
        let handover = match Handover::start(&seg.name, memfd.as_raw_fd()) {
            Ok(h) => Some(h),
            Err(e) => {
                rfabric_core::fi_warn!(
                    "shm",
                    rfabric_core::abi::FI_LOG_EP_CTRL,
                    "segment handover thread not started ({}): peers that may not read /proc/{}/fd cannot attach",
                    e,
                    pid
                );
                None
            }
        };
        let loc = Locator {
            pid,
            uid: header.uid,
            start_time: header.start_time,
            nonce,
            fd: memfd.as_raw_fd(),
            dev: st.st_dev,
            ino: st.st_ino,
            size,
        };
        write_locator(&seg.name, &loc)?;
        seg.own = Some(Owned { memfd, handover, pid });
        Ok(seg)
    }

    /// Attaches to a peer's segment and validates it. `pid` and `nonce`
    /// come from the peer's address and must match the header.
    pub fn attach(pid: u32, nonce: &[u8; 16]) -> Result<Segment> {
        Self::attach_name(&segment_name(pid, nonce), Some((pid, *nonce)))
    }

    /// Attaches to the segment whose locator is `/dev/shm/<name>`: a
    /// per-process name (identity from the name, or `expect`) or a name given
    /// with `fi_setname` (identity from the locator). The locator only
    /// hints where the memory is: when it is missing or damaged, the
    /// owner's handover thread, found by the segment's own name, still
    /// answers. `ENOENT` when the segment or its owner is gone.
    pub fn attach_name(name: &str, expect: Option<(u32, [u8; 16])>) -> Result<Segment> {
        if name.contains('/') || !name.starts_with(NAME_PREFIX) {
            return Err(EINVAL);
        }
        let loc = read_locator(name);
        let ident = match (expect.or_else(|| parse_segment_name(name)), &loc) {
            (Some(id), _) => id,
            (None, Ok(l)) => (l.pid, l.nonce),
            (None, Err(e)) => return Err(*e),
        };
        // A locator that names another segment is no hint at all.
        let loc = loc.ok().filter(|l| (l.pid, l.nonce) == ident);
        if let Some(l) = &loc {
            if !pid_alive(l.pid, l.start_time) {
                return Err(Error(libc::ENOENT));
            }
        }
        let seg_name = segment_name(ident.0, &ident.1);
        // Errors, most telling first: a descriptor we got failed the checks;
        // the owner did not answer in time; a live owner (per its locator)
        // refused us everywhere; what the handover said (ENOENT: gone).
        let mut invalid = None;
        let mut refused = None;
        let mut handover_err = Error(libc::ENOENT);
        for source in [FdSource::Proc, FdSource::Pidfd, FdSource::Handover] {
            let fd = match (source, &loc) {
                (FdSource::Proc, Some(l)) => fdpass::from_proc(l.pid, l.fd, l.dev, l.ino),
                (FdSource::Pidfd, Some(l)) => fdpass::from_pidfd(l.pid, l.fd),
                (FdSource::Handover, _) => fdpass::from_handover(&seg_name, ident.0),
                _ => continue,
            };
            match fd {
                Ok(fd) => match Self::map_checked(name, fd, ident, source) {
                    Ok(seg) => return Ok(seg),
                    Err(e) => invalid = invalid.or(Some(e)),
                },
                Err(e) if source == FdSource::Handover => handover_err = e,
                Err(e) => refused = refused.or(Some(e)),
            }
        }
        Err(match (invalid, refused) {
            (Some(e), _) => e,
            (None, _) if handover_err == EAGAIN => EAGAIN,
            (None, Some(e)) if handover_err.0 == libc::ENOENT => e,
            _ => handover_err,
        })
    }

    /// A stand-in for the segment of process `pid` (nonce `nonce`) that
    /// died before we attached it, so a message it posted can still be
    /// handed up and fail its receive with `ECONNRESET`: 16 KiB of private
    /// anonymous memory with a valid header, an empty ring (writes to it
    /// reach nobody) and 64 one-chunk bounce slots (any slot a sender may
    /// name; every chunk stays free).
    pub fn gone(pid: u32, nonce: &[u8; 16], start_time: u64) -> Result<Segment> {
        let g = Geometry { ncells: 2, cell_size: 128, nslots: 64, nchunks: 1, chunk_size: 64 };
        g.check()?;
        let size = g.total_size() as usize;
        // SAFETY: a fresh private anonymous mapping; no file involved.
        let p = unsafe {
            libc::mmap(std::ptr::null_mut(), size, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0)
        };
        if p == libc::MAP_FAILED {
            return Err(Error(errno()));
        }
        let base: *mut u8 = p.cast();
        let header = SegHeader {
            magic: MAGIC,
            version: LAYOUT_VERSION,
            header_size: HEADER_SIZE as u32,
            total_size: size as u64,
            pid,
            // SAFETY: geteuid cannot fail.
            uid: unsafe { libc::geteuid() },
            start_time,
            generation: 0,
            nonce: *nonce,
            probe_addr: 0,
            geom_ncells: g.ncells,
            geom_cell_size: g.cell_size,
            geom_nslots: g.nslots,
            geom_nchunks: g.nchunks,
            geom_chunk_size: g.chunk_size,
            _pad: 0,
        };
        let seg = Segment { base, size, name: segment_name(pid, nonce), header, source: FdSource::Gone, own: None };
        // SAFETY: the mapping holds the header page and the ring region and
        // is ours alone.
        unsafe {
            std::ptr::write_volatile(base.cast::<SegHeader>(), header);
            crate::ring::Ring::init(seg.ring_base(), g.ncells, g.cell_size as usize);
        }
        Ok(seg)
    }

    /// Validates a descriptor of a peer's memory and maps it: a regular
    /// file of our uid with no group/other bits, sealed against shrinking
    /// (checked before mapping: from then on its size cannot drop below
    /// what we map), of a size within bounds, whose header is complete,
    /// ready and names `ident`, with a geometry that fits the mapping.
    fn map_checked(name: &str, fd: OwnedFd, ident: (u32, [u8; 16]), source: FdSource) -> Result<Segment> {
        let st = fstat(fd.as_raw_fd())?;
        // SAFETY: geteuid cannot fail.
        let uid = unsafe { libc::geteuid() };
        if st.st_mode & libc::S_IFMT != libc::S_IFREG || st.st_uid != uid || st.st_mode & 0o077 != 0 {
            return Err(err_perm());
        }
        if fdpass::seals(fd.as_raw_fd()) & libc::F_SEAL_SHRINK == 0 {
            return Err(err_perm());
        }
        let size = st.st_size as u64;
        if size < HEADER_SIZE as u64 || size > MAX_SEGMENT {
            return Err(EINVAL);
        }
        let base = map(fd.as_raw_fd(), size as usize)?;
        drop(fd);
        let mut seg = Segment { base, size: size as usize, name: name.to_string(), header: unsafe_zero_header(), source, own: None };
        if seg.ready_flag().load(Ordering::Acquire) != READY_MAGIC {
            return Err(EAGAIN);
        }
        // SAFETY: mapping holds at least HEADER_SIZE bytes; SegHeader is plain data.
        let h: SegHeader = unsafe { std::ptr::read_volatile(base.cast::<SegHeader>()) };
        if h.magic != MAGIC || h.version != LAYOUT_VERSION || h.header_size != HEADER_SIZE as u32 {
            return Err(EINVAL);
        }
        if h.total_size != size || h.uid != uid || h.pid != ident.0 || h.nonce != ident.1 {
            return Err(EINVAL);
        }
        let g = geometry_of(&h);
        g.check()?;
        if g.total_size() != size {
            return Err(EINVAL);
        }
        seg.header = h;
        Ok(seg)
    }

    pub fn base(&self) -> *mut u8 {
        self.base
    }
    pub fn size(&self) -> usize {
        self.size
    }
    pub fn name(&self) -> &str {
        &self.name
    }
    pub fn header(&self) -> &SegHeader {
        &self.header
    }
    pub fn geometry(&self) -> Geometry {
        geometry_of(&self.header)
    }
    pub fn ring_base(&self) -> *mut u8 {
        // SAFETY: geometry was validated against the mapping size.
        unsafe { self.base.add(self.geometry().ring_off() as usize) }
    }
    /// Header of chunk `chunk` of bounce slot `slot`, or an error if out of range.
    pub fn chunk_ptr(&self, slot: u32, chunk: u32) -> Result<*mut u8> {
        let g = self.geometry();
        if slot >= g.nslots || chunk >= g.nchunks {
            return Err(err_io());
        }
        let off = g.bounce_off() + (slot as u64 * g.nchunks as u64 + chunk as u64) * g.chunk_stride();
        if off + g.chunk_stride() > self.size as u64 {
            return Err(err_io());
        }
        // SAFETY: bounds checked just above.
        Ok(unsafe { self.base.add(off as usize) })
    }
    /// Shared-copy descriptor `i` of this segment, if in range.
    pub fn help_desc(&self, i: usize) -> Option<&HelpDesc> {
        if i >= HELP_SLOTS {
            return None;
        }
        // SAFETY: HELP_OFF + HELP_SLOTS * HELP_STRIDE <= HEADER_SIZE (checked
        // at compile time below), inside every validated mapping; 64-aligned;
        // the fields are atomics, which may alias memory other processes
        // write.
        Some(unsafe { &*self.base.add(HELP_OFF + i * HELP_STRIDE).cast::<HelpDesc>() })
    }
    fn ready_flag(&self) -> &AtomicU32 {
        // SAFETY: READY_OFF is inside the header page, 4-aligned; AtomicU32
        // may alias shared memory written by other processes.
        unsafe { &*self.base.add(READY_OFF).cast::<AtomicU32>() }
    }
    pub fn is_owner(&self) -> bool {
        self.own.is_some()
    }
    /// Whether the owner still keeps the segment (its ready flag, cleared
    /// when the owner drops it; a killed owner leaves it set).
    pub fn is_ready(&self) -> bool {
        self.ready_flag().load(Ordering::Acquire) == READY_MAGIC
    }
    /// How this process got its descriptor of the memory.
    pub fn fd_source(&self) -> FdSource {
        self.source
    }
    /// The owner's descriptor of the memory (`None` in peers, which close
    /// theirs once mapped).
    pub fn owner_fd(&self) -> Option<RawFd> {
        self.own.as_ref().map(|o| o.memfd.as_raw_fd())
    }
}

const _: () = assert!(HELP_OFF >= READY_OFF + 64 && HELP_OFF + HELP_SLOTS * HELP_STRIDE <= HEADER_SIZE);
const _: () = assert!(std::mem::size_of::<HelpDesc>() <= HELP_STRIDE);

fn unsafe_zero_header() -> SegHeader {
    SegHeader {
        magic: 0,
        version: 0,
        header_size: 0,
        total_size: 0,
        pid: 0,
        uid: 0,
        start_time: 0,
        generation: 0,
        nonce: [0; 16],
        probe_addr: 0,
        geom_ncells: 0,
        geom_cell_size: 0,
        geom_nslots: 0,
        geom_nchunks: 0,
        geom_chunk_size: 0,
        _pad: 0,
    }
}

fn geometry_of(h: &SegHeader) -> Geometry {
    Geometry {
        ncells: h.geom_ncells,
        cell_size: h.geom_cell_size,
        nslots: h.geom_nslots,
        nchunks: h.geom_nchunks,
        chunk_size: h.geom_chunk_size,
    }
}

fn map(fd: RawFd, size: usize) -> Result<*mut u8> {
    // SAFETY: fd is open for read/write; the kernel picks the address.
    let p = unsafe {
        libc::mmap(std::ptr::null_mut(), size, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, 0)
    };
    if p == libc::MAP_FAILED {
        return Err(Error(errno()));
    }
    Ok(p.cast())
}

fn fstat(fd: RawFd) -> Result<libc::stat> {
    // SAFETY: zeroed stat is a valid out-parameter.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: fd is open; st is writable.
    if unsafe { libc::fstat(fd, &mut st) } != 0 {
        return Err(Error(errno()));
    }
    Ok(st)
}

impl Drop for Segment {
    fn drop(&mut self) {
        if let Some(mut own) = self.own.take() {
            if own.pid == std::process::id() {
                self.ready_flag().store(0, Ordering::Release);
                unlink_shm(&self.name);
                // And the locators and names of processes that died
                // meanwhile (a peer killed while we talked to it could not
                // remove its own): they would stay until the next process
                // opens its first endpoint.
                reclaim_stale();
            }
            // The handover thread uses the descriptor: stop it first.
            drop(own.handover.take());
            drop(own.memfd);
        }
        // SAFETY: base/size describe our own mapping.
        unsafe { libc::munmap(self.base.cast(), self.size) };
    }
}

// ------------------------------------------------------------ locator files

const LOCATOR_MAGIC: u64 = u64::from_le_bytes(*b"RFSHMLOC");
const LOCATOR_VERSION: u32 = 1;
/// Bytes of a locator file: magic, version, length, pid, uid, start time,
/// nonce, descriptor, device, inode, size (little endian).
pub const LOCATOR_LEN: usize = 80;

/// Contents of a locator file: who owns the segment and where a peer can
/// find its memory. Every field is untrusted: a locator only picks which
/// descriptor to try, and the descriptor is checked on its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Locator {
    pid: u32,
    uid: u32,
    start_time: u64,
    nonce: [u8; 16],
    /// The owner's descriptor number of the memory.
    fd: i32,
    /// Device and inode of the memory (checked before a `/proc` open).
    dev: u64,
    ino: u64,
    size: u64,
}

impl Locator {
    fn encode(&self) -> [u8; LOCATOR_LEN] {
        let mut b = [0u8; LOCATOR_LEN];
        b[0..8].copy_from_slice(&LOCATOR_MAGIC.to_le_bytes());
        b[8..12].copy_from_slice(&LOCATOR_VERSION.to_le_bytes());
        b[12..16].copy_from_slice(&(LOCATOR_LEN as u32).to_le_bytes());
        b[16..20].copy_from_slice(&self.pid.to_le_bytes());
        b[20..24].copy_from_slice(&self.uid.to_le_bytes());
        b[24..32].copy_from_slice(&self.start_time.to_le_bytes());
        b[32..48].copy_from_slice(&self.nonce);
        b[48..52].copy_from_slice(&self.fd.to_le_bytes());
        b[56..64].copy_from_slice(&self.dev.to_le_bytes());
        b[64..72].copy_from_slice(&self.ino.to_le_bytes());
        b[72..80].copy_from_slice(&self.size.to_le_bytes());
        b
    }
    fn decode(b: &[u8; LOCATOR_LEN]) -> Option<Locator> {
        let u32_at = |o: usize| u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        let u64_at = |o: usize| u64::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3], b[o + 4], b[o + 5], b[o + 6], b[o + 7]]);
        if u64_at(0) != LOCATOR_MAGIC || u32_at(8) != LOCATOR_VERSION || u32_at(12) != LOCATOR_LEN as u32 {
            return None;
        }
        let mut nonce = [0u8; 16];
        nonce.copy_from_slice(&b[32..48]);
        Some(Locator {
            pid: u32_at(16),
            uid: u32_at(20),
            start_time: u64_at(24),
            nonce,
            fd: u32_at(48) as i32,
            dev: u64_at(56),
            ino: u64_at(64),
            size: u64_at(72),
        })
    }
}

/// Creates the locator file `/dev/shm/<name>` (`O_EXCL`, no symlink
/// followed, mode 0600) holding `loc`.
fn write_locator(name: &str, loc: &Locator) -> Result<()> {
    let path = CString::new(shm_path(name)).map_err(|_| EINVAL)?;
    let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // SAFETY: path is a valid C string.
    let fd = unsafe { libc::open(path.as_ptr(), flags, 0o600 as libc::c_uint) };
    if fd < 0 {
        return Err(Error(errno()));
    }
    let b = loc.encode();
    // SAFETY: fd is ours; b is LOCATOR_LEN readable bytes. fchmod pins the
    // mode regardless of umask.
    let ok = unsafe {
        libc::fchmod(fd, 0o600) == 0 && libc::pwrite(fd, b.as_ptr().cast(), b.len(), 0) == b.len() as isize
    };
    let e = errno();
    // SAFETY: fd is ours.
    unsafe { libc::close(fd) };
    if !ok {
        unlink_shm(name);
        return Err(Error(e));
    }
    Ok(())
}

/// Reads the locator `/dev/shm/<name>` with `pread`: a regular file (no
/// symlink followed; opened without blocking, so a FIFO planted there
/// cannot hold us) of our uid with no group/other bits, exactly one record
/// long, with our magic, version and uid. `ENOENT` when missing, `EPERM`
/// for a file we do not trust, `EINVAL` for bad contents.
fn read_locator(name: &str) -> Result<Locator> {
    let path = CString::new(shm_path(name)).map_err(|_| EINVAL)?;
    let flags = libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK | libc::O_NOCTTY;
    // SAFETY: path is a valid C string.
    let fd = unsafe { libc::open(path.as_ptr(), flags) };
    if fd < 0 {
        let e = errno();
        return Err(if e == libc::ELOOP { err_perm() } else { Error(e) });
    }
    // SAFETY: fd was just opened and is ours.
    let fd: OwnedFd = unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) };
    let st = fstat(fd.as_raw_fd())?;
    // SAFETY: geteuid cannot fail.
    let uid = unsafe { libc::geteuid() };
    if st.st_mode & libc::S_IFMT != libc::S_IFREG || st.st_uid != uid || st.st_mode & 0o077 != 0 {
        return Err(err_perm());
    }
    if st.st_size != LOCATOR_LEN as i64 {
        return Err(EINVAL);
    }
    let mut b = [0u8; LOCATOR_LEN];
    // SAFETY: b has LOCATOR_LEN writable bytes.
    let n = unsafe { libc::pread(fd.as_raw_fd(), b.as_mut_ptr().cast(), b.len(), 0) };
    if n != LOCATOR_LEN as isize {
        return Err(EINVAL);
    }
    match Locator::decode(&b) {
        Some(l) if l.uid == uid => Ok(l),
        _ => Err(EINVAL),
    }
}

/// `(pid, nonce)` of a per-process segment name, if `name` is one.
fn parse_segment_name(name: &str) -> Option<(u32, [u8; 16])> {
    let rest = name.strip_prefix(NAME_PREFIX)?;
    let (pid, hex) = rest.split_once('.')?;
    let pid: u32 = pid.parse().ok()?;
    if hex.len() != 32 || pid == 0 || pid > i32::MAX as u32 {
        return None;
    }
    let mut nonce = [0u8; 16];
    for (i, out) in nonce.iter_mut().enumerate() {
        *out = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    (segment_name(pid, &nonce) == name).then_some((pid, nonce))
}

/// Removes segments left behind by dead processes of our uid. Returns how
/// many were unlinked. Segments of live processes and of other users are
/// left alone.
pub fn reclaim_stale() -> usize {
    let Ok(dir) = std::fs::read_dir(SHM_DIR) else { return 0 };
    // SAFETY: geteuid cannot fail.
    let uid = unsafe { libc::geteuid() };
    let mut n = 0;
    for ent in dir.flatten() {
        let name = ent.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(rest) = name.strip_prefix(NAME_PREFIX) else { continue };
        if rest.starts_with("n.") {
            // A name given with fi_setname: the owner is in the locator.
            if let Ok(l) = read_locator(name) {
                if !pid_alive(l.pid, l.start_time) && unlink_shm(name) {
                    n += 1;
                }
            }
            continue;
        }
        let Some(pid) = rest.split('.').next().and_then(|p| p.parse::<u32>().ok()) else { continue };
        use std::os::unix::fs::MetadataExt;
        let Ok(md) = std::fs::symlink_metadata(shm_path(name)) else { continue };
        if md.uid() != uid || !md.file_type().is_file() {
            continue;
        }
        // Start time from the locator when readable; 0 means "pid only".
        let start = read_locator(name).map(|l| l.start_time).unwrap_or(0);
        if pid_alive(pid, start) {
            continue;
        }
        if let Ok(c) = CString::new(format!("/{name}")) {
            // SAFETY: valid C string.
            if unsafe { libc::shm_unlink(c.as_ptr()) } == 0 {
                n += 1;
            }
        }
    }
    n
}

// ------------------------------------------------------------ named segments

/// Longest endpoint name accepted by `fi_setname` (the part after `fi_shm://`).
pub const EP_NAME_MAX: usize = 40;

/// True for 1..=[`EP_NAME_MAX`] characters of `[A-Za-z0-9._:-]` (`:` for
/// the `<node>:<service>` names of `fi_getinfo`).
pub fn valid_ep_name(name: &str) -> bool {
    (1..=EP_NAME_MAX).contains(&name.len())
        && name.bytes().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-' | b':'))
}

/// Shared-memory object name under which an endpoint named `name` is
/// reachable: `rfabric-shm.n.<euid>.<name>`. The uid keeps two users' names
/// apart; the `n.` part keeps these entries apart from the per-process ones
/// (whose second field is a pid).
pub fn named_shm_name(name: &str) -> String {
    // SAFETY: geteuid cannot fail.
    let uid = unsafe { libc::geteuid() };
    format!("{NAME_PREFIX}n.{uid}.{name}")
}

fn unlink_shm(shm_name: &str) -> bool {
    match CString::new(format!("/{shm_name}")) {
        // SAFETY: valid C string.
        Ok(c) => unsafe { libc::shm_unlink(c.as_ptr()) == 0 },
        Err(_) => false,
    }
}

/// A second directory entry (hard link) for a segment this process owns,
/// under the name the application gave the endpoint. Removed on drop, but
/// only while it still refers to our segment.
pub struct NameLink {
    shm_name: String,
    dev: u64,
    ino: u64,
}

impl NameLink {
    pub fn shm_name(&self) -> &str {
        &self.shm_name
    }
}

impl Drop for NameLink {
    fn drop(&mut self) {
        use std::os::unix::fs::MetadataExt;
        if let Ok(md) = std::fs::symlink_metadata(shm_path(&self.shm_name)) {
            if md.dev() == self.dev && md.ino() == self.ino {
                unlink_shm(&self.shm_name);
            }
        }
    }
}

impl Segment {
    /// Makes this (owned, fully initialised) segment reachable under
    /// [`named_shm_name`]`(name)` as well as under its own name.
    ///
    /// `link(2)` creates the new entry atomically and fails if anything
    /// (even a dangling symlink) is there, like `O_CREAT|O_EXCL|O_NOFOLLOW`;
    /// the entry is the same inode as our locator, so it has its mode (0600)
    /// and complete contents, written after the segment was ready. An
    /// existing entry whose owner process is gone is removed (with that
    /// owner's own locator) and the link retried once; any other existing
    /// entry (a live owner, another user's file, something unreadable) is
    /// `EADDRINUSE`.
    pub fn link_name(&self, name: &str) -> Result<NameLink> {
        use std::os::unix::fs::MetadataExt;
        if !self.is_owner() || !valid_ep_name(name) {
            return Err(EINVAL);
        }
        let shm_name = named_shm_name(name);
        let from = CString::new(shm_path(&self.name)).map_err(|_| EINVAL)?;
        let to = CString::new(shm_path(&shm_name)).map_err(|_| EINVAL)?;
        for attempt in 0..2 {
            // SAFETY: both are valid C strings.
            if unsafe { libc::link(from.as_ptr(), to.as_ptr()) } == 0 {
                let md = std::fs::symlink_metadata(shm_path(&shm_name)).map_err(|e| Error(e.raw_os_error().unwrap_or(libc::EIO)))?;
                return Ok(NameLink { shm_name, dev: md.dev(), ino: md.ino() });
            }
            let e = errno();
            if e != libc::EEXIST {
                return Err(Error(e));
            }
            if attempt > 0 {
                break;
            }
            match read_locator(&shm_name) {
                Ok(l) if !pid_alive(l.pid, l.start_time) => {
                    unlink_shm(&shm_name);
                    unlink_shm(&segment_name(l.pid, &l.nonce));
                }
                _ => break,
            }
        }
        Err(Error(libc::EADDRINUSE))
    }
}

/// Identity of the endpoint currently named `name`: the owner's pid, the
/// segment nonce and the owner's start time, read from the segment header
/// after every check of [`Segment::attach_name`] (the locator's file type,
/// owner uid and mode; the memory's owner uid, mode and seals; size, magic,
/// version, geometry, ready flag, and a header naming the segment the
/// locator names). `ENOENT` when there is no such segment or its owner
/// process is gone, `EAGAIN` while it is not ready.
pub fn resolve_name(name: &str) -> Result<(u32, [u8; 16], u64)> {
    if !valid_ep_name(name) {
        return Err(EINVAL);
    }
    let seg = Segment::attach_name(&named_shm_name(name), None)?;
    let h = *seg.header();
    drop(seg);
    if !pid_alive(h.pid, h.start_time) {
        return Err(Error(libc::ENOENT));
    }
    Ok((h.pid, h.nonce, h.start_time))
}

#[cfg(test)]
mod name_tests {
    use super::*;

    fn exists(n: &str) -> bool {
        std::path::Path::new(&shm_path(&named_shm_name(n))).exists()
    }

    /// Makes `seg`'s locator (and so every name linked to it) claim a
    /// process that does not exist.
    fn fake_dead_owner(seg: &Segment) {
        let mut l = read_locator(seg.name()).unwrap();
        l.pid = i32::MAX as u32 - 3;
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new().write(true).open(shm_path(seg.name())).unwrap();
        f.write_all_at(&l.encode(), 0).unwrap();
    }

    #[test]
    fn names_checked() {
        assert!(valid_ep_name("a"));
        assert!(valid_ep_name("job42_rank3.x-y"));
        assert!(valid_ep_name(&"z".repeat(EP_NAME_MAX)));
        for bad in ["", "a/b", "..\u{e9}", "a b", "a\0", &"z".repeat(EP_NAME_MAX + 1)] {
            assert!(!valid_ep_name(bad), "{bad:?}");
        }
        // SAFETY: geteuid cannot fail.
        let uid = unsafe { libc::geteuid() };
        assert_eq!(named_shm_name("q"), format!("rfabric-shm.n.{uid}.q"));
    }

    #[test]
    fn link_resolve_and_release() {
        let n = format!("segtest-{}", std::process::id());
        assert_eq!(resolve_name(&n).map(|_| ()), Err(Error(libc::ENOENT)));
        let a = Segment::create(Geometry::default()).unwrap();
        let b = Segment::create(Geometry::default()).unwrap();
        let link = a.link_name(&n).unwrap();
        assert_eq!(link.shm_name(), named_shm_name(&n));
        let h = a.header();
        assert_eq!(resolve_name(&n), Ok((h.pid, h.nonce, h.start_time)));
        // A live owner keeps it.
        assert_eq!(b.link_name(&n).err(), Some(Error(libc::EADDRINUSE)));
        assert_eq!(b.link_name("bad/name").err(), Some(EINVAL));
        // An attached (not owned) segment cannot be named.
        let peer = Segment::attach(h.pid, &h.nonce).unwrap();
        assert_eq!(peer.link_name("x").err(), Some(EINVAL));
        drop(link);
        assert!(!exists(&n));
        assert_eq!(resolve_name(&n).map(|_| ()), Err(Error(libc::ENOENT)));
        let _l = b.link_name(&n).unwrap();
        assert_eq!(resolve_name(&n).map(|r| r.1), Ok(b.header().nonce));
    }

    #[test]
    fn dead_owner_name_is_reclaimed() {
        let n = format!("segtest-dead-{}", std::process::id());
        let a = Segment::create(Geometry::default()).unwrap();
        let link = a.link_name(&n).unwrap();
        fake_dead_owner(&a);
        // Left behind as after a crash.
        std::mem::forget(link);
        // Resolution refuses a dead owner.
        assert_eq!(resolve_name(&n).map(|_| ()), Err(Error(libc::ENOENT)));
        let b = Segment::create(Geometry::default()).unwrap();
        let _l = b.link_name(&n).unwrap();
        assert_eq!(resolve_name(&n).map(|r| r.1), Ok(b.header().nonce));

        // The scan at start-up removes such entries too.
        let n2 = format!("segtest-scan-{}", std::process::id());
        let c = Segment::create(Geometry::default()).unwrap();
        std::mem::forget(c.link_name(&n2).unwrap());
        assert!(exists(&n2));
        reclaim_stale();
        assert!(exists(&n2), "a live owner's name stays");
        fake_dead_owner(&c);
        reclaim_stale();
        assert!(!exists(&n2));
    }

    #[test]
    fn foreign_entry_is_in_use() {
        // Something that is not a segment under the name: never removed.
        let n = format!("segtest-junk-{}", std::process::id());
        let p = shm_path(&named_shm_name(&n));
        std::fs::write(&p, b"not a segment").unwrap();
        let a = Segment::create(Geometry::default()).unwrap();
        assert_eq!(a.link_name(&n).err(), Some(Error(libc::EADDRINUSE)));
        assert!(resolve_name(&n).is_err());
        reclaim_stale();
        assert!(std::path::Path::new(&p).exists());
        std::fs::remove_file(&p).unwrap();
        // A symlink there is not followed either.
        std::os::unix::fs::symlink("/nonexistent", &p).unwrap();
        assert_eq!(a.link_name(&n).err(), Some(Error(libc::EADDRINUSE)));
        std::fs::remove_file(&p).unwrap();
    }
}

/// The address of the live endpoint whose sender key is `key` (slow path:
/// a directory scan). The key names the process (`key >> 32`) and the first
/// 32 bits of the segment's nonce; every segment of that process whose name
/// starts with those bits is attached with the full checks of
/// [`Segment::attach`], and the first whose header agrees (pid, nonce, a
/// live owner with the header's start time) gives the address.
pub fn find_by_key(key: u64) -> Option<crate::peer::Address> {
    let pid = (key >> 32) as u32;
    if pid == 0 || pid > i32::MAX as u32 {
        return None;
    }
    let mut prefix = format!("{NAME_PREFIX}{pid}.");
    for b in (key as u32).to_le_bytes() {
        prefix.push_str(&format!("{b:02x}"));
    }
    let dir = std::fs::read_dir(SHM_DIR).ok()?;
    for ent in dir.flatten() {
        let name = ent.file_name();
        let Some(name) = name.to_str() else { continue };
        if !name.starts_with(&prefix) {
            continue;
        }
        let hex = &name[prefix.len() - 8..];
        if hex.len() != 32 {
            continue;
        }
        let mut nonce = [0u8; 16];
        let parsed = nonce.iter_mut().enumerate().all(|(i, out)| match hex.get(2 * i..2 * i + 2).and_then(|h| u8::from_str_radix(h, 16).ok()) {
            Some(v) => {
                *out = v;
                true
            }
            None => false,
        });
        if !parsed || segment_name(pid, &nonce) != name {
            continue;
        }
        let Ok(seg) = Segment::attach(pid, &nonce) else { continue };
        let h = seg.header();
        let a = crate::peer::Address { pid, nonce, start_time: h.start_time };
        if a.key() == key && pid_alive(pid, h.start_time) {
            return Some(a);
        }
    }
    None
}

#[cfg(test)]
mod key_tests {
    use super::*;

    #[test]
    fn find_by_key_resolves_live_segments_only() {
        let ep = crate::Endpoint::new(crate::endpoint::Config::default()).unwrap();
        let a = ep.address();
        assert_eq!(find_by_key(a.key()), Some(a));
        // Same process, other nonce bits: no segment has that name.
        assert_eq!(find_by_key(a.key() ^ 1), None);
        // Bad pids: none, out of range, one with no process.
        assert_eq!(find_by_key(a.key() & 0xffff_ffff), None);
        assert_eq!(find_by_key(u64::MAX), None);
        let dead = (i32::MAX as u64 - 7) << 32 | (a.key() & 0xffff_ffff);
        assert_eq!(find_by_key(dead), None);
        let k = a.key();
        drop(ep);
        // Unlinked with the endpoint: not found any more.
        assert_eq!(find_by_key(k), None);
    }
}
