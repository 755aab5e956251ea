//! Per-endpoint shared-memory segment.
//!
//! A segment is a POSIX shared-memory object named
//! `rfabric-shm.<pid>.<32 hex digits>`; the hex part is 128 random bits from
//! `getrandom`, so another user can neither guess the name nor create it in
//! advance. It is created with `O_CREAT|O_EXCL|O_NOFOLLOW`, mode 0600, and
//! unlinked when the owner drops it. Peers attach by name (carried in the
//! 32-byte [`Address`](crate::peer::Address)) and validate everything before
//! trusting it: file type, owner uid, permission bits, size, magic, layout
//! version, geometry and the identity stored in the header.
//!
//! An endpoint named with `fi_setname` is also reachable through a hard
//! link `rfabric-shm.n.<euid>.<name>` ([`Segment::link_name`],
//! [`resolve_name`]).
//!
//! Layout (offsets from the start of the mapping):
//! `[header page][ring control (2 lines)][cells...][bounce chunks...]`.

use crate::{err_io, err_perm};
use rfabric_core::error::{Error, Result, EAGAIN, EINVAL};
use std::ffi::CString;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

pub const MAGIC: u64 = u64::from_le_bytes(*b"RFSHMSEG");
pub const LAYOUT_VERSION: u32 = 2;
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
        let end = self.cells_off() + self.ncells as u64 * self.cell_size as u64;
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

/// Shared-copy descriptors of rendezvous receives (`endpoint.rs`, "shared
/// copy"): in the header page after the ready flag, one cache line each.
/// The owner (the receiver) sets them up; the sender of the message claims
/// chunks and reports copies through them.
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

/// A mapped segment: ours (created, unlinked on drop) or a peer's (attached).
pub struct Segment {
    base: *mut u8,
    size: usize,
    name: String,
    owner: bool,
    header: SegHeader,
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
    /// Creates and initialises a new segment owned by this process.
    pub fn create(geom: Geometry) -> Result<Segment> {
        geom.check()?;
        let pid = std::process::id();
        let mut nonce = [0u8; 16];
        random_bytes(&mut nonce)?;
        let name = segment_name(pid, &nonce);
        let cname = CString::new(format!("/{name}")).map_err(|_| EINVAL)?;
        // SAFETY: cname is a valid NUL-terminated string.
        let fd = unsafe {
            libc::shm_open(
                cname.as_ptr(),
                libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                0o600,
            )
        };
        if fd < 0 {
            return Err(Error(errno()));
        }
        let size = geom.total_size();
        let unlink = || {
            // SAFETY: valid C string.
            unsafe { libc::shm_unlink(cname.as_ptr()) };
        };
        // SAFETY: fd is ours; fchmod pins the mode regardless of umask.
        let ok = unsafe { libc::fchmod(fd, 0o600) == 0 && libc::ftruncate(fd, size as libc::off_t) == 0 };
        if !ok {
            let e = errno();
            // SAFETY: fd is ours.
            unsafe { libc::close(fd) };
            unlink();
            return Err(Error(e));
        }
        let base = match map(fd, size as usize) {
            Ok(b) => b,
            Err(e) => {
                unlink();
                return Err(e);
            }
        };
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
        let seg = Segment { base, size: size as usize, name, owner: true, header };
        // SAFETY: the mapping is at least HEADER_SIZE bytes and page aligned.
        unsafe { std::ptr::write_volatile(base.cast::<SegHeader>(), header) };
        // SAFETY: ring region lies within the mapping; nobody else knows the name yet.
        unsafe { crate::ring::Ring::init(seg.ring_base(), geom.ncells, geom.cell_size as usize) };
        seg.ready_flag().store(READY_MAGIC, Ordering::Release);
        Ok(seg)
    }

    /// Attaches to a peer's segment and validates it. `pid` and `nonce`
    /// come from the peer's address and must match the header.
    pub fn attach(pid: u32, nonce: &[u8; 16]) -> Result<Segment> {
        Self::attach_name(&segment_name(pid, nonce), Some((pid, *nonce)))
    }

    pub fn attach_name(name: &str, expect: Option<(u32, [u8; 16])>) -> Result<Segment> {
        if name.contains('/') || !name.starts_with(NAME_PREFIX) {
            return Err(EINVAL);
        }
        let cname = CString::new(format!("/{name}")).map_err(|_| EINVAL)?;
        // SAFETY: valid C string; O_NOFOLLOW refuses symlinks.
        let fd = unsafe { libc::shm_open(cname.as_ptr(), libc::O_RDWR | libc::O_NOFOLLOW | libc::O_CLOEXEC, 0) };
        if fd < 0 {
            return Err(Error(errno()));
        }
        // SAFETY: zeroed stat is a valid out-parameter.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: fd is open; st is writable.
        if unsafe { libc::fstat(fd, &mut st) } != 0 {
            let e = errno();
            // SAFETY: fd is ours.
            unsafe { libc::close(fd) };
            return Err(Error(e));
        }
        let close = || {
            // SAFETY: fd is ours.
            unsafe { libc::close(fd) };
        };
        // SAFETY: geteuid cannot fail.
        let uid = unsafe { libc::geteuid() };
        if st.st_mode & libc::S_IFMT != libc::S_IFREG || st.st_uid != uid || st.st_mode & 0o077 != 0 {
            close();
            return Err(err_perm());
        }
        let size = st.st_size as u64;
        if size < HEADER_SIZE as u64 || size > MAX_SEGMENT {
            close();
            return Err(EINVAL);
        }
        let base = map(fd, size as usize)?;
        let mut seg = Segment { base, size: size as usize, name: name.to_string(), owner: false, header: unsafe_zero_header() };
        if seg.ready_flag().load(Ordering::Acquire) != READY_MAGIC {
            return Err(EAGAIN);
        }
        // SAFETY: mapping holds at least HEADER_SIZE bytes; SegHeader is plain data.
        let h: SegHeader = unsafe { std::ptr::read_volatile(base.cast::<SegHeader>()) };
        if h.magic != MAGIC || h.version != LAYOUT_VERSION || h.header_size != HEADER_SIZE as u32 {
            return Err(EINVAL);
        }
        if h.total_size != size || h.uid != uid {
            return Err(EINVAL);
        }
        if let Some((pid, nonce)) = expect {
            if h.pid != pid || h.nonce != nonce {
                return Err(EINVAL);
            }
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
        self.owner
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

fn map(fd: i32, size: usize) -> Result<*mut u8> {
    // SAFETY: fd is open for read/write; the kernel picks the address.
    let p = unsafe {
        libc::mmap(std::ptr::null_mut(), size, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, fd, 0)
    };
    let e = errno();
    // SAFETY: the mapping keeps the object alive; the fd is no longer needed.
    unsafe { libc::close(fd) };
    if p == libc::MAP_FAILED {
        return Err(Error(e));
    }
    Ok(p.cast())
}

impl Drop for Segment {
    fn drop(&mut self) {
        if self.owner {
            self.ready_flag().store(0, Ordering::Release);
            if let Ok(c) = CString::new(format!("/{}", self.name)) {
                // SAFETY: valid C string.
                unsafe { libc::shm_unlink(c.as_ptr()) };
            }
        }
        // SAFETY: base/size describe our own mapping.
        unsafe { libc::munmap(self.base.cast(), self.size) };
    }
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
            // A name given with fi_setname: the owner is in the header.
            if let Some(h) = peek_header(name) {
                if !pid_alive(h.pid, h.start_time) && unlink_shm(name) {
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
        // Start time from the header when readable; 0 means "pid only".
        let start = read_start_time(name).unwrap_or(0);
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

fn read_start_time(name: &str) -> Option<u64> {
    use std::io::Read;
    let mut f = std::fs::File::open(shm_path(name)).ok()?;
    let mut buf = [0u8; std::mem::size_of::<SegHeader>()];
    f.read_exact(&mut buf).ok()?;
    // SAFETY: buf is exactly one SegHeader of plain data.
    let h: SegHeader = unsafe { std::ptr::read_unaligned(buf.as_ptr().cast()) };
    (h.magic == MAGIC).then_some(h.start_time)
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

/// Reads the header of the object at `/dev/shm/<shm_name>` without mapping
/// it: the file must be a regular file of our uid (symlinks are not
/// followed) and start with a complete header carrying our magic and uid.
fn peek_header(shm_name: &str) -> Option<SegHeader> {
    use std::io::Read;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    // SAFETY: geteuid cannot fail.
    let uid = unsafe { libc::geteuid() };
    let mut f = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW).open(shm_path(shm_name)).ok()?;
    let md = f.metadata().ok()?;
    if !md.file_type().is_file() || md.uid() != uid {
        return None;
    }
    let mut buf = [0u8; std::mem::size_of::<SegHeader>()];
    f.read_exact(&mut buf).ok()?;
    // SAFETY: buf is exactly one SegHeader of plain data.
    let h: SegHeader = unsafe { std::ptr::read_unaligned(buf.as_ptr().cast()) };
    (h.magic == MAGIC && h.uid == uid).then_some(h)
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
    /// the entry is the same inode, so it has the segment's mode (0600) and
    /// a complete header with the ready flag already set. An existing entry
    /// whose owner process is gone is removed (with that owner's own
    /// segment) and the link retried once; any other existing entry (a live
    /// owner, another user's file, something unreadable) is `EADDRINUSE`.
    pub fn link_name(&self, name: &str) -> Result<NameLink> {
        use std::os::unix::fs::MetadataExt;
        if !self.owner || !valid_ep_name(name) {
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
            match peek_header(&shm_name) {
                Some(h) if !pid_alive(h.pid, h.start_time) => {
                    unlink_shm(&shm_name);
                    unlink_shm(&segment_name(h.pid, &h.nonce));
                }
                _ => break,
            }
        }
        Err(Error(libc::EADDRINUSE))
    }
}

/// Identity of the endpoint currently named `name`: the owner's pid, the
/// segment nonce and the owner's start time, read from the segment header
/// after every check of [`Segment::attach_name`] (file type, owner uid,
/// mode, size, magic, version, geometry, ready flag). `ENOENT` when there is
/// no such segment or its owner process is gone, `EAGAIN` while it is not
/// ready.
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

    /// Makes `seg`'s header claim a process that does not exist.
    fn fake_dead_owner(seg: &Segment) {
        // SAFETY: the header page is ours and mapped; pid is a plain u32.
        unsafe { (*seg.base().cast::<SegHeader>()).pid = i32::MAX as u32 - 3 };
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
