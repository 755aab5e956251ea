//! Payload copies that stay fast where `rep movsb` is slow.
//!
//! glibc's `memcpy` copies with `rep movsb` above a threshold (2113 bytes
//! on CPUs with fast short `rep movsb`, `FSRM`). On the AMD EPYC guest this
//! project is measured on, `rep movsb` runs 10 to 35 times slower when the
//! destination lies 1 to 31 bytes past the source, modulo 4 KiB (8 KiB:
//! about 3.5 µs instead of 0.1; `docs/PERFORMANCE.md`, "A slow distance
//! for `rep movsb`"). Where a payload lands against where it comes from is
//! up to the application's buffers and the transport's headers, so every
//! payload copy of the providers goes through [`copy_bytes`] or
//! [`copy_slice`]: at such a distance they copy in pieces of [`PIECE`]
//! bytes, each below the threshold, which glibc copies with vector loads
//! and stores. At any other distance they are one `memcpy`.
//!
//! This module may use `unsafe` (`docs/ARCHITECTURE.md` lists where).

/// The largest piece copied at a slow distance: below the smallest
/// threshold at which glibc's `memcpy` turns to `rep movsb` on x86-64
/// (2048 × vector size / 16, or 2112 with `FSRM`).
pub const PIECE: usize = 2048;

/// Distances (destination minus source, modulo [`PAGE`]) from 1 up to
/// this one are copied in pieces: the slow ones measured (1 to 31) with a
/// margin, as another CPU's window may be wider.
pub const SLOW_DISTANCE_MAX: usize = 63;

/// The period of the slow distances.
pub const PAGE: usize = 4096;

/// Whether a copy of `n` bytes from `src` to `dst` is made in pieces.
#[inline]
pub fn in_pieces(src: usize, dst: usize, n: usize) -> bool {
    let d = dst.wrapping_sub(src) & (PAGE - 1);
    n > PIECE && d.wrapping_sub(1) < SLOW_DISTANCE_MAX
}

/// Copies `n` bytes from `src` to `dst`, as `ptr::copy_nonoverlapping`.
///
/// # Safety
/// As `ptr::copy_nonoverlapping`: `src` readable and `dst` writable for
/// `n` bytes, the two ranges not overlapping.
#[inline]
pub unsafe fn copy_bytes(src: *const u8, dst: *mut u8, n: usize) {
    if in_pieces(src as usize, dst as usize, n) {
        // SAFETY: the caller's contract, passed on.
        unsafe { copy_in_pieces(src, dst, n) };
    } else {
        // SAFETY: the caller's contract.
        unsafe { std::ptr::copy_nonoverlapping(src, dst, n) };
    }
}

/// Copies all of `src` into `dst`, as `dst.copy_from_slice(src)`.
///
/// # Panics
/// When the two lengths differ, as `copy_from_slice`.
#[inline]
pub fn copy_slice(dst: &mut [u8], src: &[u8]) {
    assert_eq!(dst.len(), src.len(), "copy_slice: lengths differ");
    // SAFETY: both slices are valid for their (equal) length, and a
    // mutable borrow never overlaps a shared one.
    unsafe { copy_bytes(src.as_ptr(), dst.as_mut_ptr(), src.len()) };
}

/// Appends `src` to `v`, as `v.extend_from_slice(src)`.
#[inline]
pub fn extend_vec(v: &mut Vec<u8>, src: &[u8]) {
    v.reserve(src.len());
    let len = v.len();
    // SAFETY: `reserve` left room for `src.len()` bytes after `len`; they
    // are written before `set_len` makes them part of `v`, and `src`, a
    // shared borrow, is not `v`'s memory (borrowed mutably).
    unsafe {
        copy_bytes(src.as_ptr(), v.as_mut_ptr().add(len), src.len());
        v.set_len(len + src.len());
    }
}

/// # Safety
/// As [`copy_bytes`].
#[inline(never)]
unsafe fn copy_in_pieces(src: *const u8, dst: *mut u8, n: usize) {
    let mut at = 0;
    while at < n {
        let k = PIECE.min(n - at);
        // SAFETY: `at + k <= n`, inside both ranges (the caller's contract).
        unsafe { std::ptr::copy_nonoverlapping(src.add(at), dst.add(at), k) };
        at += k;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slow_distances_only_above_a_piece() {
        for d in 0..3 * PAGE {
            let want = matches!(d % PAGE, 1..=SLOW_DISTANCE_MAX);
            assert_eq!(in_pieces(1000, 1000 + d, PIECE + 1), want, "distance {d}");
            assert!(!in_pieces(1000, 1000 + d, PIECE), "distance {d}, one piece");
        }
        // The source past the destination: never a slow distance.
        for d in 1..PAGE - SLOW_DISTANCE_MAX {
            assert!(!in_pieces(1_000_000, 1_000_000 - d, 1 << 20), "distance -{d}");
        }
        // Addresses that wrap around.
        assert!(in_pieces(usize::MAX - 3, 4, 1 << 16));
    }

    /// Every size around the piece boundaries at every distance class,
    /// checked byte for byte against the pattern, with the bytes around
    /// the destination untouched.
    #[test]
    fn copies_exactly() {
        let src: Vec<u8> = (0..5 * PAGE).map(|i| (i * 7 + i / 251) as u8).collect();
        let mut dst = vec![0u8; 8 * PAGE];
        let sizes = [0, 1, 31, PIECE - 1, PIECE, PIECE + 1, 2 * PIECE, 2 * PIECE + 17, 3 * PAGE - 5, 4 * PAGE];
        for &n in &sizes {
            for s_off in [0usize, 5, 64] {
                for d in [0usize, 1, 8, 31, 32, 63, 64, 65, 100, PAGE - 1] {
                    dst.fill(0xAA);
                    let s = &src[s_off..s_off + n];
                    // Place the destination at distance `d` (mod PAGE) from `s`.
                    let base = dst.as_ptr() as usize;
                    let want = (s.as_ptr() as usize).wrapping_add(d) & (PAGE - 1);
                    let at = PAGE + ((want.wrapping_sub(base)) & (PAGE - 1));
                    copy_slice(&mut dst[at..at + n], s);
                    assert_eq!(&dst[at..at + n], s, "n {n}, source offset {s_off}, distance {d}");
                    assert_eq!(((dst[at..].as_ptr() as usize).wrapping_sub(s.as_ptr() as usize)) & (PAGE - 1), d % PAGE);
                    assert!(dst[..at].iter().all(|&b| b == 0xAA), "bytes before, n {n}, distance {d}");
                    assert!(dst[at + n..].iter().all(|&b| b == 0xAA), "bytes after, n {n}, distance {d}");
                }
            }
        }
    }

    #[test]
    fn extends_at_every_distance() {
        let src: Vec<u8> = (0..3 * PAGE).map(|i| (i % 253) as u8).collect();
        for d in [0usize, 1, 16, 31, 63, 64, 2000] {
            for n in [0, 5, PIECE + 1, 2 * PAGE + 3] {
                let mut v: Vec<u8> = Vec::with_capacity(8 * PAGE);
                v.extend(std::iter::repeat(9u8).take(PAGE));
                // The first byte appended lies `d` past the source (mod PAGE).
                let end = v.as_ptr() as usize + v.len();
                let s_at = end.wrapping_sub(d).wrapping_sub(src.as_ptr() as usize) & (PAGE - 1);
                let s = &src[s_at..s_at + n];
                extend_vec(&mut v, s);
                assert_eq!(v.len(), PAGE + n);
                assert!(v[..PAGE].iter().all(|&b| b == 9));
                assert_eq!(&v[PAGE..], s, "distance {d}, n {n}");
            }
        }
    }

    #[test]
    #[should_panic(expected = "lengths differ")]
    fn lengths_must_match() {
        let mut d = [0u8; 4];
        copy_slice(&mut d, &[1, 2, 3]);
    }
}
