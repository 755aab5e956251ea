//! Bounded multi-producer single-consumer queue of fixed-size cells in
//! shared memory (per-cell sequence numbers, after Vyukov's bounded queue).
//!
//! Memory: `[tail: u64 | pad to 64][spare line][cell 0][cell 1]...
//! [announcement 0][announcement 1]...`. Each cell starts with its 8-byte
//! sequence word; the rest of the first line is the message header and the
//! remainder is inline payload. Only offsets are stored; every process
//! computes addresses from its own mapping.
//!
//! Cell `i` is free for the producer that claims position `p` (p % n == i)
//! when its sequence equals `p`; the producer publishes it by storing
//! `p + 1`; the consumer releases it by storing `p + n`. The consumer's head
//! is private to the owning process.
//!
//! Who holds a claim: a producer that finds the tail at `p` first takes
//! the announcement word of `p` for this lap, writing `(p, k, its pid)`
//! with a compare-and-swap from any older word, and only then moves the
//! tail from `p` to `p + k` (it writes `(q, 0, 0)` in the words of the
//! other positions of the claim after that, so no word is ever more than a
//! lap old). A producer that finds the word of `p` already of this lap
//! waits for the tail to move. So whenever the tail has passed `p`, the
//! word of `p` names the process that claimed it, and a consumer whose
//! head `h` stays claimed and unpublished knows which process holds it;
//! once that process is gone it steps over the claim
//! ([`Ring::dead_claim`]) instead of waiting for it forever. A producer
//! that died after taking the word but before moving the tail leaves a
//! word of this lap with the tail still at `h`: the consumer withdraws that
//! word, so other producers are not kept out of the ring.

use rfabric_core::error::{Result, EAGAIN, EINVAL};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Bytes of a cell before the inline payload (sequence word + header).
pub const CELL_HDR: usize = 64;

/// What the consumer found at its head ([`Ring::dead_claim`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeadClaim {
    /// Nothing to do: published, or held by a live process, or not
    /// recognised.
    None,
    /// `k` cells claimed by process `pid`, now gone, that can never be
    /// published: the consumer releases them and steps over.
    Skip(u64, u32),
    /// Process `pid` announced the position and died before claiming it;
    /// its announcement is withdrawn (nothing to step over).
    Withdrawn(u32),
}

#[derive(Clone, Copy)]
pub struct Ring {
    base: *mut u8,
    ncells: u64,
    cell_size: usize,
}

// SAFETY: a Ring is a view of shared memory accessed only through atomics
// and raw copies; it can move between and be shared by threads.
unsafe impl Send for Ring {}
// SAFETY: as above.
unsafe impl Sync for Ring {}

/// How many times a producer retries a lost race before reporting EAGAIN;
/// bounds the loop even when a hostile process scribbles on the ring.
const MAX_SPINS: u32 = 1024;

// Announcement word: position (low 27 bits) | cells claimed (15 bits) |
// pid (22 bits, Linux's largest pid_max; 0 names nobody).
const ANN_POS_BITS: u32 = 27;
const ANN_K_BITS: u32 = 15;
const ANN_PID_BITS: u32 = 22;
const ANN_POS_MASK: u64 = (1 << ANN_POS_BITS) - 1;
/// Most cells one claim can take.
pub const MAX_CLAIM: u64 = (1 << ANN_K_BITS) - 1;

fn ann_word(pos: u64, k: u64, pid: u32) -> u64 {
    (pos & ANN_POS_MASK) << (ANN_K_BITS + ANN_PID_BITS) | k << ANN_PID_BITS | pid as u64
}
fn ann_k(a: u64) -> u64 {
    (a >> ANN_PID_BITS) & MAX_CLAIM
}
fn ann_pid(a: u64) -> u32 {
    (a & ((1 << ANN_PID_BITS) - 1)) as u32
}
/// How far `pos` is past the position recorded in `a` (27-bit wrapping
/// arithmetic): 0 when `a` is `pos`'s record of this lap.
fn ann_dist(pos: u64, a: u64) -> i32 {
    let d = pos.wrapping_sub(a >> (ANN_K_BITS + ANN_PID_BITS)) & ANN_POS_MASK;
    ((d as u32) << (32 - ANN_POS_BITS)) as i32 >> (32 - ANN_POS_BITS)
}

/// This process's pid for announcements (cached; reset in a forked child),
/// 0 if it does not fit.
fn my_pid() -> u32 {
    static PID: AtomicU32 = AtomicU32::new(0);
    extern "C" fn forked() {
        PID.store(0, Ordering::Relaxed);
    }
    let p = PID.load(Ordering::Relaxed);
    if p != 0 {
        return p;
    }
    static ATFORK: std::sync::Once = std::sync::Once::new();
    ATFORK.call_once(|| {
        // SAFETY: registers a handler that only stores to an atomic; it
        // runs in the child after fork, where the cached pid is the
        // parent's.
        unsafe { libc::pthread_atfork(None, None, Some(forked)) };
    });
    let p = std::process::id();
    let p = if p < 1 << ANN_PID_BITS { p } else { 0 };
    PID.store(p, Ordering::Relaxed);
    p
}

impl Ring {
    /// Writes the initial sequence numbers and announcements (each of the
    /// position one lap before the first).
    ///
    /// # Safety
    /// `base` must point to [`Ring::bytes`]`(ncells, cell_size)` writable
    /// bytes, 64-byte aligned, that nobody else uses yet.
    pub unsafe fn init(base: *mut u8, ncells: u32, cell_size: usize) {
        // SAFETY: caller guarantees the region.
        let r = unsafe { Ring::from_raw(base, ncells, cell_size) };
        r.tail().store(0, Ordering::Relaxed);
        for i in 0..ncells as u64 {
            r.seq(i).store(i, Ordering::Relaxed);
            r.ann(i).store(ann_word(i.wrapping_sub(ncells as u64), 0, 0), Ordering::Relaxed);
        }
        std::sync::atomic::fence(Ordering::Release);
    }

    /// # Safety
    /// `base` must point to a region laid out by [`Ring::init`] with the same
    /// `ncells` (a power of two) and `cell_size` (multiple of 64, >= 128),
    /// [`Ring::bytes`] long, that stays mapped while the Ring is used.
    pub unsafe fn from_raw(base: *mut u8, ncells: u32, cell_size: usize) -> Ring {
        Ring { base, ncells: ncells as u64, cell_size }
    }

    pub fn ncells(&self) -> u64 {
        self.ncells
    }
    pub fn cell_size(&self) -> usize {
        self.cell_size
    }
    pub fn inline_max(&self) -> usize {
        self.cell_size - CELL_HDR
    }

    /// Bytes of a ring of `ncells` cells of `cell_size` bytes: the control
    /// lines, the cells and the announcement words.
    pub const fn bytes(ncells: u32, cell_size: usize) -> usize {
        128 + ncells as usize * cell_size + ncells as usize * 8
    }

    /// Announcement word of position `pos`.
    fn ann(&self, pos: u64) -> &AtomicU64 {
        let i = (pos & (self.ncells - 1)) as usize;
        // SAFETY: the words follow the cells (`Ring::bytes`), 8-aligned.
        unsafe { &*self.base.add(128 + self.ncells as usize * self.cell_size + i * 8).cast::<AtomicU64>() }
    }

    fn tail(&self) -> &AtomicU64 {
        // SAFETY: offset 0 of the ring is the 8-aligned tail word.
        unsafe { &*self.base.cast::<AtomicU64>() }
    }

    /// Pointer to the cell that holds position `pos`.
    pub fn cell(&self, pos: u64) -> *mut u8 {
        let i = (pos & (self.ncells - 1)) as usize;
        // SAFETY: i < ncells, so the cell lies inside the region.
        unsafe { self.base.add(128 + i * self.cell_size) }
    }

    fn seq(&self, pos: u64) -> &AtomicU64 {
        // SAFETY: each cell begins with an 8-aligned sequence word.
        unsafe { &*self.cell(pos).cast::<AtomicU64>() }
    }

    /// Claims a cell; the caller fills it through [`Ring::cell`] and then
    /// calls [`Ring::publish`]. EAGAIN when full.
    #[inline]
    pub fn reserve(&self) -> Result<u64> {
        self.claim(1)
    }

    /// Claims `k` consecutive positions `pos..pos+k` with one update of the
    /// tail (a multi-cell message). The consumer releases cells strictly in
    /// position order, so if the first and the last cell are free for this
    /// lap, all between are too. EAGAIN when the ring has no room for all `k`
    /// cells now; EINVAL when it never will.
    pub fn reserve_n(&self, k: u64) -> Result<u64> {
        if k == 0 || k > self.ncells || k > MAX_CLAIM {
            return Err(EINVAL);
        }
        self.claim(k)
    }

    /// The claim protocol (see the module comment): the announcement word
    /// of the tail's position first, then the tail.
    #[inline]
    fn claim(&self, k: u64) -> Result<u64> {
        let mut pos = self.tail().load(Ordering::Relaxed);
        for _ in 0..MAX_SPINS {
            let dif = self.seq(pos).load(Ordering::Acquire).wrapping_sub(pos) as i64;
            if dif < 0 {
                return Err(EAGAIN);
            }
            if dif == 0 {
                if k > 1 {
                    let last = pos.wrapping_add(k - 1);
                    let dl = self.seq(last).load(Ordering::Acquire).wrapping_sub(last) as i64;
                    if dl < 0 {
                        return Err(EAGAIN);
                    }
                    if dl > 0 {
                        pos = self.tail().load(Ordering::Relaxed);
                        std::hint::spin_loop();
                        continue;
                    }
                }
                // Free for this lap. Take its announcement word, unless a
                // word of this lap is there: another producer is between
                // its announcement and its tail update (or pos is inside a
                // claim already made and our tail is stale).
                let ann = self.ann(pos);
                let a = ann.load(Ordering::Relaxed);
                if ann_dist(pos, a) != 0 && ann.compare_exchange(a, ann_word(pos, k, my_pid()), Ordering::Relaxed, Ordering::Relaxed).is_ok() {
                    #[cfg(test)]
                    if tests::DIE_AFTER_ANNOUNCEMENT.load(Ordering::Relaxed) {
                        // SAFETY: a forked test child ends here, between
                        // the two updates, as a process killed there would.
                        unsafe { libc::_exit(0) };
                    }
                    // Release: a consumer that sees the new tail sees the
                    // announcement.
                    match self.tail().compare_exchange(pos, pos.wrapping_add(k), Ordering::Release, Ordering::Relaxed) {
                        Ok(_) => {
                            for j in 1..k {
                                let q = pos.wrapping_add(j);
                                self.ann(q).store(ann_word(q, 0, 0), Ordering::Relaxed);
                            }
                            return Ok(pos);
                        }
                        // Our tail was stale: pos lies inside a claim made
                        // meanwhile, whose own words do not need ours.
                        Err(cur) => pos = cur,
                    }
                    std::hint::spin_loop();
                    continue;
                }
            }
            pos = self.tail().load(Ordering::Relaxed);
            std::hint::spin_loop();
        }
        Err(EAGAIN)
    }

    /// Consumer, its head at `head` and not published: what to do about a
    /// claim or an announcement of that position by a process that `dead`
    /// says is gone (see [`DeadClaim`]).
    pub fn dead_claim(&self, head: u64, dead: impl Fn(u32) -> bool) -> DeadClaim {
        if self.peek(head).is_some() {
            return DeadClaim::None;
        }
        let ann = self.ann(head);
        let a = ann.load(Ordering::Acquire);
        let (k, pid) = (ann_k(a), ann_pid(a));
        if ann_dist(head, a) != 0 || k == 0 || pid == 0 || !dead(pid) {
            return DeadClaim::None;
        }
        // The process is gone, so its stores are all visible: if the tail
        // has not moved past `head` now, it never will for this claim.
        let claimed = self.claimed_until().wrapping_sub(head);
        if claimed == 0 {
            let old = ann_word(head.wrapping_sub(self.ncells), 0, 0);
            return match ann.compare_exchange(a, old, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => DeadClaim::Withdrawn(pid),
                Err(_) => DeadClaim::None,
            };
        }
        if claimed > self.ncells || k > claimed {
            return DeadClaim::None;
        }
        // It may have published just before it died, after we looked.
        if self.peek(head).is_some() {
            return DeadClaim::None;
        }
        DeadClaim::Skip(k, pid)
    }

    /// Consumer, its ring empty (the tail at `head`): whether a producer
    /// has announced `head` without claiming it yet. True only for the few
    /// instructions between the two updates, or when that producer died
    /// there ([`Ring::dead_claim`] withdraws its announcement).
    pub fn announced_unclaimed(&self, head: u64) -> bool {
        ann_dist(head, self.ann(head).load(Ordering::Relaxed)) == 0 && self.claimed_until() == head
    }

    pub fn publish(&self, pos: u64) {
        self.seq(pos).store(pos.wrapping_add(1), Ordering::Release);
    }

    /// Hint: start loading the first line of the cell for `pos` into this
    /// core's cache (no effect on correctness).
    #[inline]
    pub fn prefetch(&self, pos: u64) {
        self.prefetch_line(pos, 0);
    }

    /// Hint: start loading line `line` of the cell for `pos` (no effect on
    /// correctness; `line` is taken modulo the cell's lines).
    #[inline]
    pub fn prefetch_line(&self, pos: u64, line: usize) {
        let off = (line * 64) % self.cell_size;
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a prefetch never faults and does not change memory; the
        // address is inside the ring anyway (off < cell_size).
        #[allow(unused_unsafe)]
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(self.cell(pos).wrapping_add(off).cast::<i8>().cast_const())
        };
        #[cfg(not(target_arch = "x86_64"))]
        let _ = off;
    }

    /// The next position producers will claim: positions before it are
    /// claimed (published or not yet).
    pub fn claimed_until(&self) -> u64 {
        self.tail().load(Ordering::Acquire)
    }

    /// Consumer: the cell at `head` if a producer has published it.
    pub fn peek(&self, head: u64) -> Option<*mut u8> {
        (self.seq(head).load(Ordering::Acquire) == head.wrapping_add(1)).then(|| self.cell(head))
    }

    /// Consumer: hands the cell at `head` back to producers.
    pub fn release(&self, head: u64) {
        self.seq(head).store(head.wrapping_add(self.ncells), Ordering::Release);
    }

    /// Producer: whether the consumer has released position `pos`, which
    /// this producer published (the cell's sequence has moved a lap on; it
    /// cannot move back until then).
    pub fn consumed(&self, pos: u64) -> bool {
        self.seq(pos).load(Ordering::Acquire).wrapping_sub(pos) as i64 >= self.ncells as i64
    }

    /// Writes a raw sequence value (tests use it to forge entries).
    #[cfg(test)]
    pub fn force_seq(&self, pos: u64, v: u64) {
        self.seq(pos).store(v, Ordering::Release);
    }

    /// Writes a raw announcement word (tests).
    #[cfg(test)]
    pub fn force_announce(&self, pos: u64, k: u64, pid: u32) {
        self.ann(pos).store(ann_word(pos, k, pid), Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    struct Mem(Vec<u64>);
    fn ring(ncells: u32, cell: usize) -> (Mem, Ring) {
        let mut m = Mem(vec![0u64; Ring::bytes(ncells, cell) / 8]);
        let p = m.0.as_mut_ptr().cast::<u8>();
        // SAFETY: the vector is large enough and 8-aligned (64-alignment is
        // a performance matter only).
        unsafe { Ring::init(p, ncells, cell) };
        // SAFETY: as above.
        (m, unsafe { Ring::from_raw(p, ncells, cell) })
    }

    fn put(r: &Ring, v: u64) -> Result<()> {
        let pos = r.reserve()?;
        // SAFETY: the cell is ours until publish.
        unsafe { std::ptr::write(r.cell(pos).add(8).cast::<u64>(), v) };
        r.publish(pos);
        Ok(())
    }
    fn get(r: &Ring, head: &mut u64) -> Option<u64> {
        let c = r.peek(*head)?;
        // SAFETY: published cell, consumer owns it until release.
        let v = unsafe { std::ptr::read(c.add(8).cast::<u64>()) };
        r.release(*head);
        *head += 1;
        Some(v)
    }

    #[test]
    fn fifo_full_empty_wrap() {
        let (_m, r) = ring(4, 128);
        let mut head = 0;
        assert!(get(&r, &mut head).is_none());
        for round in 0..10u64 {
            for i in 0..4 {
                put(&r, round * 10 + i).unwrap();
            }
            assert_eq!(put(&r, 99), Err(EAGAIN));
            for i in 0..4 {
                assert_eq!(get(&r, &mut head), Some(round * 10 + i));
            }
            assert!(get(&r, &mut head).is_none());
        }
    }

    #[test]
    fn consumed_follows_release_across_laps() {
        let (_m, r) = ring(4, 128);
        let mut head = 0;
        for lap in 0..5u64 {
            let pos = r.reserve().unwrap();
            assert_eq!(pos, lap * 4);
            assert!(!r.consumed(pos), "reserved");
            r.publish(pos);
            assert!(!r.consumed(pos), "published");
            put(&r, 1).unwrap();
            assert!(get(&r, &mut head).is_some());
            assert!(r.consumed(pos) && !r.consumed(pos + 1), "released in order");
            assert_eq!(get(&r, &mut head), Some(1));
            // Producers reusing the cells later do not make them look unread.
            put(&r, 2).unwrap();
            put(&r, 3).unwrap();
            assert!(r.consumed(pos) && r.consumed(pos + 1));
            assert!(get(&r, &mut head).is_some() && get(&r, &mut head).is_some());
        }
    }

    #[test]
    fn unpublished_cell_blocks_consumer() {
        let (_m, r) = ring(4, 128);
        let mut head = 0;
        let p0 = r.reserve().unwrap();
        put(&r, 7).unwrap();
        assert!(get(&r, &mut head).is_none(), "must wait for position 0");
        r.publish(p0);
        assert!(get(&r, &mut head).is_some());
        assert_eq!(get(&r, &mut head), Some(7));
    }

    #[test]
    fn multi_cell_reserve_wraps_and_waits_for_room() {
        let (_m, r) = ring(8, 128);
        let mut head = 0;
        assert_eq!(r.reserve_n(0), Err(EINVAL));
        assert_eq!(r.reserve_n(9), Err(EINVAL));
        for round in 0..20u64 {
            // 3 + 3 cells fit; a further 3 do not until the consumer frees.
            let a = r.reserve_n(3).unwrap();
            let b = r.reserve_n(3).unwrap();
            assert_eq!(b, a + 3);
            assert_eq!(r.reserve_n(3), Err(EAGAIN), "round {round}");
            for p in a..a + 6 {
                r.publish(p);
            }
            for _ in 0..6 {
                assert!(r.peek(head).is_some());
                r.release(head);
                head += 1;
            }
            // Leave the tail at an odd offset so later claims wrap.
            put(&r, round).unwrap();
            assert_eq!(get(&r, &mut head), Some(round));
        }
        // Only the last cell still held by the consumer: still no room.
        let a = r.reserve_n(8).unwrap();
        for p in a..a + 8 {
            r.publish(p);
        }
        assert!(r.peek(head).is_some());
        r.release(head);
        assert_eq!(r.reserve_n(2), Err(EAGAIN));
    }

    #[test]
    fn hostile_sequence_does_not_hang_producer() {
        let (_m, r) = ring(4, 128);
        r.force_seq(0, 12345);
        // Producer sees a sequence ahead of its position and retries a
        // bounded number of times.
        assert_eq!(put(&r, 1), Err(EAGAIN));
        assert_eq!(r.reserve_n(3), Err(EAGAIN));
    }

    #[test]
    fn claim_of_a_dead_producer_is_skipped() {
        let (_m, r) = ring(8, 128);
        let me = my_pid();
        let mut head = 0;
        // A three-cell claim that is never published (its producer died),
        // with one continuation cell published, then a message behind it.
        let p = r.reserve_n(3).unwrap();
        r.publish(p + 1);
        put(&r, 7).unwrap();
        assert!(get(&r, &mut head).is_none(), "blocked behind the claim");
        assert_eq!(r.dead_claim(head, |_| false), DeadClaim::None, "a live producer is waited for");
        assert_eq!(r.dead_claim(head, |pid| pid == me), DeadClaim::Skip(3, me));
        for _ in 0..3 {
            r.release(head);
            head += 1;
        }
        assert_eq!(get(&r, &mut head), Some(7));
        // A published claim is never skipped, nor an empty ring.
        put(&r, 8).unwrap();
        assert_eq!(r.dead_claim(head, |_| true), DeadClaim::None);
        assert_eq!(get(&r, &mut head), Some(8));
        assert_eq!(r.dead_claim(head, |_| true), DeadClaim::None);
        // The ring goes on, laps included.
        for i in 0..40 {
            put(&r, i).unwrap();
            assert_eq!(get(&r, &mut head), Some(i));
        }
    }

    #[test]
    fn claims_are_recognised_only_by_their_own_lap() {
        let (_m, r) = ring(4, 128);
        let mut head = 0;
        // Claimed, and its word is of the previous lap (a hostile store):
        // not recognised, waited for.
        let p = r.reserve().unwrap();
        r.force_announce(p.wrapping_sub(4), 1, 4_000_000);
        assert_eq!(r.dead_claim(p, |_| true), DeadClaim::None);
        // Recorded: recognised once its process is gone.
        r.force_announce(p, 1, 4_000_000);
        assert_eq!(r.dead_claim(p, |pid| pid == 4_000_000), DeadClaim::Skip(1, 4_000_000));
        // A length the claim cannot have (past the tail): not trusted.
        r.force_announce(p, 3, 4_000_000);
        assert_eq!(r.dead_claim(p, |_| true), DeadClaim::None);
        r.publish(p);
        assert!(get(&r, &mut head).is_some());
    }

    #[test]
    fn announcement_keeps_other_producers_out_until_the_claim() {
        let (_m, r) = ring(8, 128);
        let mut head = 0;
        put(&r, 1).unwrap();
        assert_eq!(get(&r, &mut head), Some(1));
        // A producer has taken the word of the tail's position and not yet
        // moved the tail: the others wait (a bounded spin, then EAGAIN).
        r.force_announce(1, 2, 4_000_000);
        assert!(r.announced_unclaimed(1));
        assert_eq!(r.reserve(), Err(EAGAIN));
        assert_eq!(r.reserve_n(3), Err(EAGAIN));
        // Alive: left alone.
        assert_eq!(r.dead_claim(head, |_| false), DeadClaim::None);
        assert!(r.announced_unclaimed(1));
        // Gone before it moved the tail: withdrawn, and the ring goes on
        // from the same position.
        assert_eq!(r.dead_claim(head, |pid| pid == 4_000_000), DeadClaim::Withdrawn(4_000_000));
        assert!(!r.announced_unclaimed(1));
        assert_eq!(r.dead_claim(head, |_| true), DeadClaim::None, "withdrawn once");
        assert_eq!(r.reserve_n(2), Ok(1));
        r.publish(1);
        r.publish(2);
        assert!(get(&r, &mut head).is_some() && get(&r, &mut head).is_some());
        for i in 0..20 {
            put(&r, i).unwrap();
            assert_eq!(get(&r, &mut head), Some(i));
        }
    }

    pub(super) static DIE_AFTER_ANNOUNCEMENT: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

    /// Forks a child that claims `k` cells of the ring in shared memory at
    /// `base` and exits (before moving the tail when `before_tail`, else
    /// holding the claim unpublished); returns its pid once it is reaped.
    fn child_claims_and_dies(r: &Ring, k: u64, before_tail: bool) -> u32 {
        let _ = my_pid(); // the fork handler is in place
        // SAFETY: the child only touches the shared ring with atomics and
        // leaves with _exit; the parent reaps it.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork");
        if pid == 0 {
            DIE_AFTER_ANNOUNCEMENT.store(before_tail, Ordering::Relaxed);
            let ok = r.reserve_n(k).is_ok();
            // SAFETY: as above.
            unsafe { libc::_exit(if ok { 1 } else { 2 }) };
        }
        let mut status = 0;
        // SAFETY: waits for our own child.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        let code = libc::WEXITSTATUS(status);
        assert_eq!(code, if before_tail { 0 } else { 1 }, "child exit status");
        pid as u32
    }

    #[test]
    fn a_producer_killed_between_its_two_updates_does_not_block_the_ring() {
        let bytes = Ring::bytes(8, 128);
        // SAFETY: a fresh shared anonymous mapping, unmapped at the end.
        let base = unsafe {
            libc::mmap(std::ptr::null_mut(), bytes, libc::PROT_READ | libc::PROT_WRITE, libc::MAP_SHARED | libc::MAP_ANONYMOUS, -1, 0)
        };
        assert_ne!(base, libc::MAP_FAILED);
        // SAFETY: the mapping is ours, page-aligned and large enough.
        let r = unsafe {
            Ring::init(base.cast(), 8, 128);
            Ring::from_raw(base.cast(), 8, 128)
        };
        let gone = |pid: u32| !crate::segment::pid_alive(pid, 0);
        let mut head = 0;
        // Dead after its announcement, before the tail: the ring looks
        // empty, producers are kept out until the consumer withdraws it.
        let pid = child_claims_and_dies(&r, 2, true);
        assert!(r.announced_unclaimed(head));
        assert_eq!(r.reserve(), Err(EAGAIN));
        assert_eq!(r.dead_claim(head, gone), DeadClaim::Withdrawn(pid));
        put(&r, 5).unwrap();
        assert_eq!(get(&r, &mut head), Some(5));
        // Dead holding a claim it never published: stepped over, and the
        // message behind it arrives.
        let pid = child_claims_and_dies(&r, 3, false);
        put(&r, 6).unwrap();
        assert!(get(&r, &mut head).is_none());
        assert_eq!(r.dead_claim(head, gone), DeadClaim::Skip(3, pid));
        for _ in 0..3 {
            r.release(head);
            head += 1;
        }
        assert_eq!(get(&r, &mut head), Some(6));
        // SAFETY: our mapping; nothing uses the ring any more.
        unsafe { libc::munmap(base, bytes) };
    }

    #[test]
    fn claims_announce_their_position_before_the_tail_moves() {
        let (_m, r) = ring(8, 128);
        let me = my_pid();
        // Every claim start names its claimer with its length; the other
        // positions of a claim carry words of this lap naming nobody.
        for lap in 0..4u64 {
            let mut head = lap * 8;
            let a = r.reserve_n(3).unwrap();
            let b = r.reserve().unwrap();
            let c = r.reserve_n(4).unwrap();
            assert_eq!((a, b, c), (head, head + 3, head + 4));
            for (pos, k) in [(a, 3), (b, 1), (c, 4)] {
                let w = r.ann(pos).load(Ordering::Relaxed);
                assert_eq!((ann_dist(pos, w), ann_k(w), ann_pid(w)), (0, k, me));
                for j in 1..k {
                    let w = r.ann(pos + j).load(Ordering::Relaxed);
                    assert_eq!((ann_dist(pos + j, w), ann_k(w), ann_pid(w)), (0, 0, 0));
                }
            }
            assert!(!r.announced_unclaimed(head + 8));
            for p in head..head + 8 {
                r.publish(p);
            }
            while get(&r, &mut head).is_some() {}
        }
    }

    #[test]
    fn concurrent_producers() {
        const P: u64 = 4;
        const N: u64 = 20_000;
        let (m, r) = ring(64, 128);
        let m = Arc::new(m);
        let mut hs = Vec::new();
        for t in 0..P {
            let _keep = m.clone();
            hs.push(std::thread::spawn(move || {
                let _k = _keep;
                for i in 0..N {
                    while put(&r, (t << 32) | i).is_err() {
                        std::thread::yield_now();
                    }
                }
            }));
        }
        let mut next = [0u64; P as usize];
        let mut head = 0;
        let mut got = 0;
        while got < P * N {
            match get(&r, &mut head) {
                Some(v) => {
                    let (t, i) = ((v >> 32) as usize, v & 0xffff_ffff);
                    assert_eq!(i, next[t], "per-producer order");
                    next[t] += 1;
                    got += 1;
                }
                None => std::thread::yield_now(),
            }
        }
        for h in hs {
            h.join().unwrap();
        }
        assert!(get(&r, &mut head).is_none());
        drop(m);
    }
}
