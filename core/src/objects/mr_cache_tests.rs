//! The registration cache against real mappings: mmap, munmap, a new
//! mapping at the same address, mremap, madvise(MADV_DONTNEED), fork (child
//! and parent), with each monitor this machine has. A test whose monitor is
//! unavailable fails (set `RFABRIC_TEST_MR_CACHE_NO_PAGEMAP=1` where frame
//! numbers are known to be hidden: an unprivileged run;
//! `RFABRIC_TEST_MR_CACHE_NO_UFFD=1` where a seccomp filter is known to
//! refuse userfaultfd: those tests then say so and pass).

use super::*;
use std::sync::atomic::AtomicUsize;

/// The cache tests fork: one at a time, so no other test's thread holds a
/// lock the child needs.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// A registration that counts its releases.
struct Reg {
    id: usize,
    released: Arc<AtomicUsize>,
}

impl Drop for Reg {
    fn drop(&mut self) {
        self.released.fetch_add(1, Ordering::SeqCst);
    }
}

struct Fixture {
    cache: MrCache<Reg>,
    made: AtomicUsize,
    released: Arc<AtomicUsize>,
}

impl Fixture {
    fn new(kind: MonitorKind) -> Fixture {
        let cache = MrCache::with_monitor("test", kind, 16);
        assert_eq!(cache.monitor(), kind, "monitor {kind:?} unavailable here");
        Fixture { cache, made: AtomicUsize::new(0), released: Arc::new(AtomicUsize::new(0)) }
    }

    fn get(&self, addr: usize, len: usize) -> Arc<Reg> {
        self.cache
            .get(addr, len, 1, |_, _| Ok(Reg { id: self.made.fetch_add(1, Ordering::SeqCst) + 1, released: self.released.clone() }))
            .unwrap()
    }
}

/// A fresh mapping, where the kernel likes or at `at`, an address this
/// test unmapped or moved away: never with MAP_FIXED there, which would
/// replace whatever another thread mapped since (a test thread's signal
/// stack, once); taken, the map fails here.
fn map(len: usize, at: Option<usize>) -> usize {
    map_with(len, at, if at.is_some() { libc::MAP_FIXED_NOREPLACE } else { 0 })
}

/// Another test thread mapped at the address this test released before
/// the test could map it again.
struct Taken;

/// As `map(len, Some(at))`, but a taken address is `Err(Taken)`: other
/// tests run in threads of the same process, and the kernel may hand the
/// range this test just released to one of them.
fn map_again(len: usize, at: usize) -> std::result::Result<usize, Taken> {
    match try_map_with(len, Some(at), libc::MAP_FIXED_NOREPLACE) {
        Ok(p) => {
            assert_eq!(p, at, "mmap at {at:x} placed elsewhere");
            Ok(p)
        }
        Err(e) if e.raw_os_error() == Some(libc::EEXIST) => Err(Taken),
        Err(e) => panic!("mmap at {at:x}: {e}"),
    }
}

/// Runs `attempt` again while it finds the address it released taken
/// (each attempt cleans up after itself first).
fn retried(what: &str, mut attempt: impl FnMut() -> std::result::Result<(), Taken>) {
    for _ in 0..50 {
        if attempt().is_ok() {
            return;
        }
    }
    panic!("{what}: the address released was taken 50 times over");
}

/// A fresh mapping that replaces this test's own live mapping at `at`.
fn map_over(len: usize, at: usize) -> usize {
    map_with(len, Some(at), libc::MAP_FIXED)
}

fn map_with(len: usize, at: Option<usize>, fixed: libc::c_int) -> usize {
    try_map_with(len, at, fixed).unwrap_or_else(|e| panic!("mmap at {at:x?}: {e}"))
}

fn try_map_with(len: usize, at: Option<usize>, fixed: libc::c_int) -> std::io::Result<usize> {
    // SAFETY: a fresh anonymous mapping, over nothing that is mapped or
    // (`map_over`) over the caller's own mapping.
    let p = unsafe {
        libc::mmap(
            at.unwrap_or(0) as *mut libc::c_void,
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | fixed,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error());
    }
    // Touched, as a registration would (it faults every page in).
    // SAFETY: the mapping just made is writable for `len` bytes.
    unsafe { std::ptr::write_bytes(p as *mut u8, 0x5a, len) };
    Ok(p as usize)
}

fn unmap(addr: usize, len: usize) {
    // SAFETY: a range this test mapped.
    assert_eq!(unsafe { libc::munmap(addr as *mut libc::c_void, len) }, 0);
}

/// Whether the userfaultfd tests run (see the module documentation).
fn uffd() -> bool {
    let skip = std::env::var_os("RFABRIC_TEST_MR_CACHE_NO_UFFD").is_some();
    if skip {
        eprintln!("RFABRIC_TEST_MR_CACHE_NO_UFFD: userfaultfd monitor not tested");
    }
    !skip
}

fn kinds() -> Vec<MonitorKind> {
    let mut v = if uffd() { vec![MonitorKind::Uffd] } else { Vec::new() };
    if std::env::var_os("RFABRIC_TEST_MR_CACHE_NO_PAGEMAP").is_none() {
        v.push(MonitorKind::Pagemap);
    }
    v
}

const LEN: usize = 64 * 1024;

#[test]
fn a_second_registration_of_mapped_memory_is_a_hit() {
    let _s = serial();
    for kind in kinds() {
        let f = Fixture::new(kind);
        let a = map(LEN, None);
        let r1 = f.get(a, LEN);
        let r2 = f.get(a + 4096, 100);
        assert_eq!((r1.id, r2.id), (1, 1), "{kind:?}: a sub-range is served by the entry");
        assert_eq!(f.cache.stats().hits, 1);
        // More access than the entry has: a new registration.
        let r3 = f.cache.get(a, LEN, 3, |_, _| Ok(Reg { id: 99, released: f.released.clone() })).unwrap();
        assert_eq!(r3.id, 99);
        drop((r1, r2, r3));
        unmap(a, LEN);
    }
}

#[test]
fn munmap_invalidates() {
    let _s = serial();
    for kind in kinds() {
        let f = Fixture::new(kind);
        let a = map(LEN, None);
        drop(f.get(a, LEN));
        unmap(a, LEN);
        // Something else mapped, so the address may come back.
        let b = map(LEN, None);
        let r = f.get(b, LEN);
        assert_eq!(r.id, 2, "{kind:?}: a fresh registration after munmap");
        if kind == MonitorKind::Uffd {
            // The event released the first one before any lookup of it.
            assert_eq!(f.released.load(Ordering::SeqCst), 1);
        }
        drop(r);
        unmap(b, LEN);
    }
}

#[test]
fn a_new_mapping_at_the_same_address_is_never_served_the_old_key() {
    let _s = serial();
    for kind in kinds() {
        retried("remap", || {
            let f = Fixture::new(kind);
            let a = map(LEN, None);
            let old = f.get(a, LEN);
            // Keep the old pages alive elsewhere, as a registration's pin does,
            // so the new mapping cannot get the same frames back.
            // SAFETY: moves this test's mapping to a place the kernel picks.
            let kept = unsafe { libc::mremap(a as *mut libc::c_void, LEN, LEN, libc::MREMAP_MAYMOVE) };
            assert_ne!(kept, libc::MAP_FAILED);
            // The kernel may have left it where it was.
            let again = if kept as usize == a {
                map_over(LEN, a)
            } else {
                match map_again(LEN, a) {
                    Ok(again) => again,
                    Err(taken) => {
                        drop(old);
                        unmap(kept as usize, LEN);
                        return Err(taken);
                    }
                }
            };
            assert_eq!(again, a);
            let new = f.get(a, LEN);
            assert_ne!(new.id, old.id, "{kind:?}: remapped memory got the stale registration");
            // The old one is still held by its MR (not released under it) but
            // never handed out again.
            assert_eq!(f.get(a, 64).id, new.id);
            drop((old, new));
            unmap(a, LEN);
            unmap(kept as usize, LEN);
            Ok(())
        });
    }
}

#[test]
fn munmap_and_mmap_fixed_at_the_same_address() {
    let _s = serial();
    if !uffd() {
        return;
    }
    retried("munmap, then mmap", || {
        let f = Fixture::new(MonitorKind::Uffd);
        let a = map(LEN, None);
        drop(f.get(a, LEN));
        unmap(a, LEN);
        map_again(LEN, a)?;
        assert_eq!(f.get(a, LEN).id, 2);
        assert_eq!(f.cache.stats().invalidated, 1);
        unmap(a, LEN);
        Ok(())
    });
}

/// `mmap(MAP_FIXED)` straight over a registered mapping (no munmap
/// first): the kernel unmaps the old pages inside the call, and says so.
#[test]
fn mmap_fixed_over_a_live_mapping_invalidates() {
    let _s = serial();
    if !uffd() {
        return;
    }
    let f = Fixture::new(MonitorKind::Uffd);
    let a = map(LEN, None);
    drop(f.get(a, LEN));
    assert_eq!(map_over(LEN, a), a);
    assert_eq!(f.get(a, LEN).id, 2);
    assert_eq!(f.cache.stats().invalidated, 1);
    unmap(a, LEN);
}

#[test]
fn a_partial_munmap_invalidates_the_whole_entry() {
    let _s = serial();
    if !uffd() {
        return;
    }
    retried("partial munmap", || {
        let f = Fixture::new(MonitorKind::Uffd);
        let a = map(LEN, None);
        drop(f.get(a, LEN));
        unmap(a + 8192, 4096);
        if let Err(taken) = map_again(4096, a + 8192) {
            unmap(a, 8192);
            unmap(a + 12288, LEN - 12288);
            return Err(taken);
        }
        assert_eq!(f.get(a, LEN).id, 2);
        unmap(a, LEN);
        Ok(())
    });
}

#[test]
fn mremap_invalidates() {
    let _s = serial();
    for kind in kinds() {
        retried("mremap", || {
            let f = Fixture::new(kind);
            let a = map(LEN, None);
            drop(f.get(a, LEN));
            // Grow and move; then map fresh memory at the old address.
            // SAFETY: this test's mapping, moved where the kernel likes.
            let moved = unsafe { libc::mremap(a as *mut libc::c_void, LEN, 2 * LEN, libc::MREMAP_MAYMOVE) };
            assert_ne!(moved, libc::MAP_FAILED);
            let moved = moved as usize;
            if moved != a {
                if let Err(taken) = map_again(LEN, a) {
                    unmap(moved, 2 * LEN);
                    return Err(taken);
                }
            }
            assert_eq!(f.get(a, LEN).id, 2, "{kind:?}: mremap");
            if moved != a {
                unmap(a, LEN);
            }
            unmap(moved, 2 * LEN);
            Ok(())
        });
    }
}

#[test]
fn madvise_dontneed_invalidates() {
    let _s = serial();
    for kind in kinds() {
        let f = Fixture::new(kind);
        let a = map(LEN, None);
        let held = f.get(a, LEN);
        // SAFETY: this test's mapping; its contents are not needed.
        assert_eq!(unsafe { libc::madvise(a as *mut libc::c_void, 4096, libc::MADV_DONTNEED) }, 0);
        if kind == MonitorKind::Uffd {
            // The page comes back as a new zero page when touched. (Left
            // untouched for pagemap: without a registration's pin the freed
            // frame may come straight back; a pinned one cannot.)
            // SAFETY: mapped and writable.
            unsafe { (a as *mut u8).write(1) };
        }
        assert_eq!(f.get(a, LEN).id, 2, "{kind:?}: MADV_DONTNEED");
        drop(held);
        unmap(a, LEN);
    }
}

#[test]
fn an_invalidated_registration_in_use_lives_until_its_last_holder_lets_go() {
    let _s = serial();
    if !uffd() {
        return;
    }
    let f = Fixture::new(MonitorKind::Uffd);
    let a = map(LEN, None);
    let held = f.get(a, LEN);
    unmap(a, LEN);
    let b = map(LEN, None);
    drop(f.get(b, LEN));
    assert_eq!(f.released.load(Ordering::SeqCst), 0, "released while an MR holds it");
    drop(held);
    assert_eq!(f.released.load(Ordering::SeqCst), 1);
    unmap(b, LEN);
}

#[test]
fn unused_entries_are_bounded() {
    let _s = serial();
    if !uffd() {
        return;
    }
    let f: Fixture = Fixture { cache: MrCache::with_monitor("test", MonitorKind::Uffd, 2), made: AtomicUsize::new(0), released: Arc::new(AtomicUsize::new(0)) };
    let a = map(8 * 4096, None);
    for i in 0..5 {
        drop(f.get(a + i * 4096, 4096));
    }
    // Two unused ones, and the last, which its caller held at insertion.
    assert_eq!(f.cache.len(), 3);
    assert_eq!(f.released.load(Ordering::SeqCst), 2);
    f.cache.flush();
    assert_eq!(f.cache.len(), 0);
    unmap(a, 8 * 4096);
}

#[test]
fn a_file_mapping_the_monitor_refuses_is_registered_uncached() {
    let _s = serial();
    if !uffd() {
        return;
    }
    let f = Fixture::new(MonitorKind::Uffd);
    let file = std::fs::File::open("/proc/self/exe").unwrap();
    use std::os::fd::AsRawFd;
    // SAFETY: a fresh read-only private mapping of a file.
    let p = unsafe { libc::mmap(std::ptr::null_mut(), 4096, libc::PROT_READ, libc::MAP_PRIVATE, file.as_raw_fd(), 0) };
    assert_ne!(p, libc::MAP_FAILED);
    let (r1, r2) = (f.get(p as usize, 4096), f.get(p as usize, 4096));
    assert_ne!(r1.id, r2.id, "a range userfaultfd does not watch is never reused");
    assert_eq!(f.cache.stats().uncached, 2);
    drop((r1, r2));
    unmap(p as usize, 4096);
}

#[test]
fn disabled_never_reuses() {
    let _s = serial();
    let f = Fixture::new(MonitorKind::Disabled);
    let a = map(LEN, None);
    assert_ne!(f.get(a, LEN).id, f.get(a, LEN).id);
    assert_eq!(f.released.load(Ordering::SeqCst), 2);
    unmap(a, LEN);
}

/// Runs `child` in a forked child; its exit status (0: passed).
fn in_child(child: impl FnOnce() -> bool) -> i32 {
    // SAFETY: the child only runs `child` (no lock another thread of the
    // harness could hold: the cache tests run one at a time) and _exits.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(child)).unwrap_or(false);
        // SAFETY: ends the child without running the parent's exit handlers.
        unsafe { libc::_exit(if ok { 0 } else { 1 }) };
    }
    let mut status = 0;
    // SAFETY: our child; `status` is writable.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    assert!(libc::WIFEXITED(status), "child died: {status:#x}");
    libc::WEXITSTATUS(status)
}

#[test]
fn fork_child_gets_fresh_registrations_and_the_parent_keeps_its_own() {
    let _s = serial();
    if !uffd() {
        return;
    }
    let f = Fixture::new(MonitorKind::Uffd);
    let a = map(LEN, None);
    let held = f.get(a, LEN);
    assert_eq!(held.id, 1);
    let status = in_child(|| {
        // The cache is off here, and the parent's entry is not handed out.
        let fresh = f.get(a, LEN).id != 1 && f.cache.monitor() == MonitorKind::Disabled;
        // The child's munmap and remap neither block (no monitor reads
        // this process's events) nor reach the parent.
        unmap(a, LEN);
        let again = map(LEN, Some(a)) == a;
        let fresh2 = f.get(a, LEN).id != 1;
        // The parent's registration was forgotten, not released.
        fresh && again && fresh2 && f.released.load(Ordering::SeqCst) == 2
    });
    assert_eq!(status, 0, "child checks failed");
    // The parent: its memory is as it was, its entry still served.
    // SAFETY: still mapped in the parent.
    assert_eq!(unsafe { (a as *const u8).read() }, 0x5a);
    assert_eq!(f.get(a, LEN).id, 1);
    assert_eq!(f.released.load(Ordering::SeqCst), 0);
    drop(held);
    // And the parent's own munmap still reaches the parent's cache.
    unmap(a, LEN);
    match map_again(LEN, a) {
        Ok(b) => {
            assert_eq!(f.get(b, LEN).id, 2);
            unmap(b, LEN);
        }
        // Not this test's to map or register any more.
        Err(Taken) => eprintln!("fork test: {a:x} was taken by another thread; the last check needs it and is left out"),
    }
}
