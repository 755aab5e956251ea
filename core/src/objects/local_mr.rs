//! The local side of memory registration, for providers to compose: what
//! `fi_mr_desc` hands out ([`LocalMr`]), the rules a domain applies to the
//! descriptors of its sends and receives ([`LocalRegs`]: `FI_MR_LOCAL`,
//! same-domain descriptors, `FI_MR_DMABUF` translation), the CPU mapping of
//! a dma-buf ([`DmabufMap`]), and an endpoint wrapper that applies the rules
//! ([`Checked`]).
//!
//! A descriptor is the address of a [`LocalMr`]. Its first word is the
//! address of a static of this module, which tells our descriptors from
//! any other value an application passes (another provider's descriptor,
//! say): nothing else of the memory behind a descriptor is read before that
//! word matched.

use crate::abi::{FI_CLAIM, FI_INJECT, FI_LOG_MR, FI_MR_LOCAL, FI_PEEK};
use crate::error::{Result, EINVAL};
use crate::provider::{AtomicKind, AtomicOp, Bind, Endpoint, Iov, RmaOp, RxOp, TxOp};
use libc::c_void;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Most buffers one send or receive may carry (what `capi` accepts).
pub const MAX_IOV: usize = 8;

/// The descriptors passed with a data operation: the application's
/// `fi_mr_desc` values, unread. One per buffer of the operation, in an
/// array the operation's caller keeps for the call; NULL when the call has
/// none (`fi_inject`, a NULL `desc` array, operations of the library's own
/// making). A single-buffer call passes the address of its one `desc`.
#[derive(Clone, Copy, Debug)]
pub struct Descs(pub *const *mut c_void);

impl Descs {
    /// No descriptors.
    pub const NONE: Descs = Descs(std::ptr::null());

    /// The descriptor of buffer `i`, or NULL.
    ///
    /// # Safety
    /// The array is NULL or holds more than `i` entries.
    #[inline]
    unsafe fn get(self, i: usize) -> *mut c_void {
        if self.0.is_null() {
            std::ptr::null_mut()
        } else {
            // SAFETY: i is inside the array (caller).
            unsafe { *self.0.add(i) }
        }
    }
}

/// `struct fi_mr_dmabuf`, as the provider sees it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Dmabuf {
    pub fd: i32,
    /// Where the registered bytes start in the dma-buf.
    pub offset: u64,
    pub len: usize,
    /// The application's address of the first byte.
    pub base_addr: usize,
}

/// A dma-buf fd mapped for CPU access (`mmap(MAP_SHARED)` at the fd's
/// offset, rounded down to a page); unmapped on drop.
#[derive(Debug)]
pub struct DmabufMap {
    map: usize,
    map_len: usize,
    /// Where the registered bytes start in our mapping.
    data: usize,
    len: usize,
    /// The application's address of the first byte.
    base_addr: usize,
}

impl DmabufMap {
    /// Maps `b`; a bad or unmappable fd is `EINVAL`, logged as `prov`'s.
    pub fn new(b: &Dmabuf, prov: &str) -> Result<DmabufMap> {
        // SAFETY: sysconf has no memory-safety preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as u64;
        let aligned = b.offset & !(page - 1);
        let delta = (b.offset - aligned) as usize;
        let map_len = b.len.checked_add(delta).ok_or(EINVAL)?;
        if b.fd < 0 || b.len == 0 || libc::off_t::try_from(aligned).is_err() {
            crate::fi_warn!(prov, FI_LOG_MR, "dma-buf registration refused: fd {} len {} offset {}", b.fd, b.len, b.offset);
            return Err(EINVAL);
        }
        // SAFETY: a fresh shared mapping chosen by the kernel; nothing of
        // ours is replaced. Failure is checked below.
        let p = unsafe { libc::mmap(std::ptr::null_mut(), map_len, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED, b.fd, aligned as libc::off_t) };
        if p == libc::MAP_FAILED {
            let errno = std::io::Error::last_os_error();
            crate::fi_warn!(prov, FI_LOG_MR, "dma-buf fd {} cannot be mapped for CPU access (offset {}, len {}): {}", b.fd, b.offset, b.len, errno);
            return Err(EINVAL);
        }
        Ok(DmabufMap { map: p as usize, map_len, data: p as usize + delta, len: b.len, base_addr: b.base_addr })
    }

    /// Our address of the first registered byte.
    pub fn data(&self) -> usize {
        self.data
    }

    /// Registered bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// `v` moved from the application's `base_addr` space into the mapping,
    /// when it lies inside the registration; otherwise unchanged.
    fn translate(&self, v: &mut Iov) {
        let off = v.base.wrapping_sub(self.base_addr);
        if v.base >= self.base_addr && off <= self.len && v.len <= self.len - off {
            v.base = self.data + off;
        }
    }
}

impl Drop for DmabufMap {
    fn drop(&mut self) {
        // SAFETY: the mapping was made by DmabufMap::new and is unmapped once.
        unsafe { libc::munmap(self.map as *mut c_void, self.map_len) };
    }
}

/// What tells a descriptor of ours from other values: its first word is
/// this static's address.
static DESC_TAG: u8 = 0;

fn tag() -> usize {
    &DESC_TAG as *const u8 as usize
}

/// The local side of one registration: what its descriptor names. Made by
/// [`LocalRegs::register`]; the caller keeps it (boxed, at a fixed address)
/// as long as the MR is open and hands out its address as the descriptor.
#[repr(C)]
#[derive(Debug)]
pub struct LocalMr {
    /// Must stay first (see the module's documentation).
    tag: usize,
    regs: Arc<LocalRegs>,
    dmabuf: Option<DmabufMap>,
    /// The provider's word for the registration (verbs: the local key).
    word: u64,
}

impl LocalMr {
    /// The descriptor value `fi_mr_desc` returns for this registration.
    pub fn desc(&self) -> *mut c_void {
        self as *const LocalMr as *mut c_void
    }

    /// The registration a descriptor names, if it is one of ours.
    ///
    /// # Safety
    /// `desc` is NULL or a value from `fi_mr_desc` (of any provider) whose
    /// first word is readable; a descriptor of ours names a live
    /// registration (the application's contract: it does not pass the
    /// descriptor of a closed MR).
    unsafe fn from_desc<'a>(desc: *mut c_void) -> Option<&'a LocalMr> {
        if desc.is_null() {
            return None;
        }
        // SAFETY: the first word is readable (caller).
        let first = unsafe { (desc as *const usize).read_unaligned() };
        if first != tag() {
            return None;
        }
        // SAFETY: only LocalMr values start with the tag, and they are
        // #[repr(C)] with the tag first; this one is live (caller).
        Some(unsafe { &*(desc as *const LocalMr) })
    }
}

impl Drop for LocalMr {
    fn drop(&mut self) {
        if self.dmabuf.is_some() {
            self.regs.dmabuf.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// One domain's rules for the descriptors of its sends and receives.
#[derive(Debug)]
pub struct LocalRegs {
    /// `FI_MR_LOCAL`: every non-empty buffer needs a descriptor of this
    /// domain.
    mr_local: bool,
    /// Live `FI_MR_DMABUF` registrations: while there are any, descriptors
    /// are looked at to translate addresses.
    dmabuf: AtomicUsize,
}

impl LocalRegs {
    /// For a domain whose `mr_mode` is `mr_mode`.
    pub fn new(mr_mode: u64) -> Arc<LocalRegs> {
        Arc::new(LocalRegs { mr_local: mr_mode & FI_MR_LOCAL != 0, dmabuf: AtomicUsize::new(0) })
    }

    /// The local side of a new registration (with the CPU mapping of its
    /// dma-buf, if it has one).
    pub fn register(self: &Arc<Self>, dmabuf: Option<DmabufMap>) -> Box<LocalMr> {
        self.register_word(dmabuf, 0)
    }

    /// As [`LocalRegs::register`], with a word of the provider's that
    /// [`LocalRegs::word`] gives back for the descriptor (verbs keeps the
    /// local key there, so a data operation finds it without a lookup).
    pub fn register_word(self: &Arc<Self>, dmabuf: Option<DmabufMap>, word: u64) -> Box<LocalMr> {
        if dmabuf.is_some() {
            self.dmabuf.fetch_add(1, Ordering::Relaxed);
        }
        Box::new(LocalMr { tag: tag(), regs: self.clone(), dmabuf, word })
    }

    /// The provider's word of buffer `i`'s descriptor, after the checks of
    /// [`LocalRegs::check`] (`None`: no descriptor of ours, allowed only
    /// where `need` is false or the buffer is empty, or without
    /// `FI_MR_LOCAL`).
    ///
    /// # Safety
    /// As [`LocalRegs::check`]; `descs` holds more than `i` entries.
    #[inline]
    pub unsafe fn word(&self, descs: Descs, i: usize, len: usize, need: bool) -> Result<Option<u64>> {
        // SAFETY: forwarded contract.
        Ok(unsafe { self.resolve(descs, i, len, need)? }.map(|m| m.word))
    }

    /// Whether data operations must look at their descriptors.
    #[inline]
    pub fn active(&self) -> bool {
        self.mr_local || self.dmabuf.load(Ordering::Relaxed) > 0
    }

    /// The registration buffer `i` (of `len` bytes) names, after the checks:
    /// with `FI_MR_LOCAL` a non-empty buffer needs a descriptor of this
    /// domain (`need`: false for injects and peeks). `None`: no descriptor
    /// (or, without `FI_MR_LOCAL`, one that is not ours).
    ///
    /// # Safety
    /// As [`LocalRegs::check`].
    #[inline(always)]
    unsafe fn resolve(&self, descs: Descs, i: usize, len: usize, need: bool) -> Result<Option<&LocalMr>> {
        // SAFETY: the array is NULL or holds more than i entries (caller).
        let desc = unsafe { descs.get(i) };
        if desc.is_null() {
            if self.mr_local && need && len > 0 {
                return Err(EINVAL);
            }
            return Ok(None);
        }
        // SAFETY: a descriptor value (caller); its tag is compared before
        // anything else is read.
        let Some(m) = (unsafe { LocalMr::from_desc(desc) }) else {
            return if self.mr_local { Err(EINVAL) } else { Ok(None) };
        };
        if self.mr_local && !std::ptr::eq(Arc::as_ptr(&m.regs), self) {
            return Err(EINVAL);
        }
        Ok(Some(m))
    }

    /// Checks `descs` for the buffers of `iov` (see `resolve`); true when a
    /// descriptor names a dma-buf registration, whose buffer must then be
    /// translated ([`LocalRegs::apply`]). Reads each buffer's length only:
    /// the common case passes the operation on as it is.
    ///
    /// # Safety
    /// `descs` is NULL or holds `iov.len()` entries; each non-NULL
    /// descriptor is as [`LocalMr::from_desc`] needs.
    #[inline]
    pub unsafe fn check(&self, iov: &[Iov], descs: Descs, need: bool) -> Result<bool> {
        let mut translate = false;
        for (i, v) in iov.iter().enumerate() {
            // SAFETY: forwarded contract.
            if let Some(m) = unsafe { self.resolve(descs, i, v.len, need)? } {
                translate |= m.dmabuf.is_some();
            }
        }
        Ok(translate)
    }

    /// As [`LocalRegs::check`], and moves each buffer whose descriptor
    /// names a dma-buf registration from the registration's `base_addr`
    /// space to its CPU mapping.
    ///
    /// # Safety
    /// As [`LocalRegs::check`].
    pub unsafe fn apply(&self, iov: &mut [Iov], descs: Descs, need: bool) -> Result<()> {
        for (i, v) in iov.iter_mut().enumerate() {
            // SAFETY: forwarded contract.
            if let Some(map) = unsafe { self.resolve(descs, i, v.len, need)? }.and_then(|m| m.dmabuf.as_ref()) {
                map.translate(v);
            }
        }
        Ok(())
    }
}

/// An endpoint whose sends and receives follow a domain's [`LocalRegs`]
/// before they reach `E`; everything else goes straight to `E`. A provider
/// that wants the rules returns its endpoints wrapped in it.
pub struct Checked<E> {
    ep: E,
    regs: Arc<LocalRegs>,
}

impl<E: Endpoint> Checked<E> {
    pub fn new(ep: E, regs: Arc<LocalRegs>) -> Checked<E> {
        Checked { ep, regs }
    }

    pub fn inner(&self) -> &E {
        &self.ep
    }
}

/// A copy of `iov` in `buf` (filled here: the common case does not pay for
/// it), translated by [`LocalRegs::apply`] (the dma-buf case).
///
/// # Safety
/// As [`LocalRegs::apply`].
#[inline(never)]
#[cold]
unsafe fn translated<'a>(regs: &LocalRegs, iov: &[Iov], descs: Descs, need: bool, buf: &'a mut MaybeUninit<[Iov; MAX_IOV]>) -> Result<&'a [Iov]> {
    let v = buf.write([Iov::default(); MAX_IOV]).get_mut(..iov.len()).ok_or(EINVAL)?;
    v.copy_from_slice(iov);
    // SAFETY: forwarded contract.
    unsafe { regs.apply(v, descs, need)? };
    Ok(v)
}

impl<E: Endpoint> Endpoint for Checked<E> {
    fn bind(&self, target: Bind<'_>, flags: u64) -> Result<()> {
        self.ep.bind(target, flags)
    }
    fn enable(&self) -> Result<()> {
        self.ep.enable()
    }
    fn getname(&self, buf: &mut [u8]) -> Result<usize> {
        self.ep.getname(buf)
    }
    fn setname(&self, addr: &[u8]) -> Result<()> {
        self.ep.setname(addr)
    }
    // `E`'s send and receive are called from one place each, so an `E`
    // that asks for it is inlined here once: one indirect call (into this
    // wrapper) from the C API to the provider's data path. Without a dma-buf
    // descriptor the operation goes on as it came (nothing copied).
    unsafe fn send(&self, op: &TxOp<'_>) -> Result<()> {
        let mut buf = MaybeUninit::uninit();
        let copy;
        let mut op = op;
        if self.regs.active() {
            let need = !op.no_completion && op.flags & FI_INJECT == 0;
            // SAFETY: the descriptors come with the op's buffers (send contract).
            if unsafe { self.regs.check(op.iov, op.desc, need)? } {
                // SAFETY: as above.
                copy = TxOp { iov: unsafe { translated(&self.regs, op.iov, op.desc, need, &mut buf)? }, ..*op };
                op = &copy;
            }
        }
        // SAFETY: forwarded contract (translated buffers are the same memory).
        unsafe { self.ep.send(op) }
    }
    unsafe fn recv(&self, op: &RxOp<'_>) -> Result<()> {
        let mut buf = MaybeUninit::uninit();
        let copy;
        let mut op = op;
        if self.regs.active() {
            // A peek carries no data.
            let need = op.flags & (FI_PEEK | FI_CLAIM) != FI_PEEK;
            // SAFETY: the descriptors come with the op's buffers (receive contract).
            if unsafe { self.regs.check(op.iov, op.desc, need)? } {
                // SAFETY: as above.
                copy = RxOp { iov: unsafe { translated(&self.regs, op.iov, op.desc, need, &mut buf)? }, ..*op };
                op = &copy;
            }
        }
        // SAFETY: forwarded contract (translated buffers are the same memory).
        unsafe { self.ep.recv(op) }
    }
    unsafe fn rma_read(&self, op: &RmaOp<'_>) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe { self.ep.rma_read(op) }
    }
    unsafe fn rma_write(&self, op: &RmaOp<'_>) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe { self.ep.rma_write(op) }
    }
    unsafe fn atomic(&self, op: &AtomicOp<'_>) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe { self.ep.atomic(op) }
    }
    fn atomic_valid(&self, kind: AtomicKind, op: u32, datatype: u32) -> Result<usize> {
        self.ep.atomic_valid(kind, op, datatype)
    }
    fn cancel(&self, context: usize) -> Result<()> {
        self.ep.cancel(context)
    }
    fn getopt(&self, level: i32, name: i32, buf: &mut [u8]) -> Result<usize> {
        self.ep.getopt(level, name, buf)
    }
    fn setopt(&self, level: i32, name: i32, val: &[u8]) -> Result<()> {
        self.ep.setopt(level, name, val)
    }
    fn close(&self) -> Result<()> {
        self.ep.close()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::FI_MR_VIRT_ADDR;

    fn iov(base: usize, len: usize) -> Iov {
        Iov { base, len }
    }

    #[test]
    fn mr_local_needs_descriptors_of_this_domain() {
        let regs = LocalRegs::new(FI_MR_LOCAL | FI_MR_VIRT_ADDR);
        let other = LocalRegs::new(FI_MR_LOCAL);
        assert!(regs.active());
        let mine = regs.register(None);
        let theirs = other.register(None);
        let mut v = [iov(0x1000, 8)];
        // SAFETY: descriptors of live registrations, or NULL.
        unsafe {
            assert_eq!(regs.apply(&mut v, Descs(&std::ptr::null_mut()), true), Err(EINVAL));
            assert_eq!(regs.apply(&mut v, Descs(&std::ptr::null_mut()), false), Ok(()), "injects need none");
            assert_eq!(regs.apply(&mut v, Descs(&mine.desc()), true), Ok(()));
            assert_eq!(regs.apply(&mut v, Descs(&theirs.desc()), true), Err(EINVAL), "another domain's");
            let mut empty = [iov(0, 0)];
            assert_eq!(regs.apply(&mut empty, Descs::NONE, true), Ok(()), "an empty buffer needs none");
            let arr = [mine.desc(), std::ptr::null_mut()];
            let mut two = [iov(0x1000, 8), iov(0x2000, 8)];
            assert_eq!(regs.apply(&mut two, Descs(arr.as_ptr()), true), Err(EINVAL));
            let arr = [mine.desc(), mine.desc()];
            assert_eq!(regs.apply(&mut two, Descs(arr.as_ptr()), true), Ok(()));
            // A value that is not a descriptor of ours.
            let mut junk = [0usize; 4];
            let p = junk.as_mut_ptr() as *mut c_void;
            assert_eq!(regs.apply(&mut v, Descs(&p), true), Err(EINVAL));
        }
    }

    #[test]
    fn without_mr_local_descriptors_are_ignored() {
        let regs = LocalRegs::new(0);
        assert!(!regs.active());
        let mut junk = [0usize; 4];
        let mut v = [iov(0x1000, 8)];
        // SAFETY: readable junk, not a descriptor of ours.
        unsafe {
            assert_eq!(regs.apply(&mut v, Descs(&(junk.as_mut_ptr() as *mut c_void)), true), Ok(()));
            assert_eq!(regs.apply(&mut v, Descs::NONE, true), Ok(()));
        }
        assert_eq!(v[0].base, 0x1000);
    }

    #[test]
    fn dmabuf_translates_and_counts() {
        // A memfd stands in for a dma-buf.
        // SAFETY: a NUL-terminated name.
        let fd = unsafe { libc::memfd_create(c"local-mr-test".as_ptr(), libc::MFD_CLOEXEC) };
        assert!(fd >= 0);
        // SAFETY: our fd.
        assert_eq!(unsafe { libc::ftruncate(fd, 3 * 4096) }, 0);
        let regs = LocalRegs::new(0);
        assert_eq!(DmabufMap::new(&Dmabuf { fd: -1, offset: 0, len: 8, base_addr: 0 }, "test").err(), Some(EINVAL));
        let map = DmabufMap::new(&Dmabuf { fd, offset: 4096 + 16, len: 100, base_addr: 0x10_0000 }, "test").unwrap();
        let data = map.data();
        assert_eq!(map.len(), 100);
        let m = regs.register(Some(map));
        assert!(regs.active(), "active while a dma-buf registration lives");
        let mut v = [iov(0x10_0000 + 10, 20)];
        // SAFETY: m is live.
        unsafe { regs.apply(&mut v, Descs(&m.desc()), true) }.unwrap();
        assert_eq!(v[0].base, data + 10);
        let mut out = [iov(0x10_0000 + 90, 20)];
        // SAFETY: as above.
        unsafe { regs.apply(&mut out, Descs(&m.desc()), true) }.unwrap();
        assert_eq!(out[0].base, 0x10_0000 + 90, "past the end: unchanged");
        drop(m);
        assert!(!regs.active());
        // SAFETY: our fd, closed once.
        unsafe { libc::close(fd) };
    }
}
