//! Libfabric atomic operations on typed buffers, shared by every provider
//! that executes atomics in software (the target side of shm today).
//!
//! Buffers are byte slices in native byte order; elements need not be
//! aligned. [`apply`] updates `count` elements of the target in place and
//! hands back the values they had before (for fetch and compare calls).
//! [`apply_shared`] does the same on memory that other threads update at
//! the same time (the target of remote atomics, which any endpoint of any
//! domain may serve): each element is updated atomically, with a hardware
//! atomic instruction where one exists for the element (naturally aligned
//! 1, 2, 4 and 8-byte types: integers, floats and `FI_FLOAT_COMPLEX`), and
//! otherwise under one of a fixed set of process-wide locks picked by the
//! element's address (`FI_DOUBLE_COMPLEX`, unaligned elements).
//! [`valid`] is the one answer to `fi_atomicvalid`, `fi_fetch_atomicvalid`,
//! `fi_compare_atomicvalid` and `fi_query_atomic`.
//!
//! Supported: every integer type and `FI_FLOAT` / `FI_DOUBLE` with the
//! arithmetic, logical and compare operations; bitwise operations and
//! `FI_MSWAP` on integers only; `FI_FLOAT_COMPLEX` / `FI_DOUBLE_COMPLEX` with
//! `FI_SUM`, `FI_PROD`, `FI_ATOMIC_READ`, `FI_ATOMIC_WRITE`, `FI_CSWAP` and
//! `FI_CSWAP_NE`. Long double and 128-bit types are not supported.

use crate::abi::*;
use crate::error::{Error, Result, EINVAL};

/// Which family of calls an operation is issued through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `fi_atomic*`: no result.
    Write,
    /// `fi_fetch_atomic*`: returns the previous values.
    Fetch,
    /// `fi_compare_atomic*`: compare operand, returns the previous values.
    Compare,
}

/// Bytes of one element of `dt`, when the datatype is supported.
pub fn type_size(dt: u32) -> Option<usize> {
    Some(match dt {
        FI_INT8 | FI_UINT8 => 1,
        FI_INT16 | FI_UINT16 => 2,
        FI_INT32 | FI_UINT32 | FI_FLOAT => 4,
        FI_INT64 | FI_UINT64 | FI_DOUBLE | FI_FLOAT_COMPLEX => 8,
        FI_DOUBLE_COMPLEX => 16,
        _ => return None,
    })
}

fn is_int(dt: u32) -> bool {
    dt <= FI_UINT64
}
fn is_complex(dt: u32) -> bool {
    dt == FI_FLOAT_COMPLEX || dt == FI_DOUBLE_COMPLEX
}

/// True if `op` on `dt` can be issued through the `kind` family.
pub fn supported(kind: Kind, op: u32, dt: u32) -> bool {
    if type_size(dt).is_none() {
        return false;
    }
    let family = match kind {
        Kind::Write => matches!(op, FI_MIN..=FI_BXOR | FI_ATOMIC_WRITE),
        Kind::Fetch => matches!(op, FI_MIN..=FI_ATOMIC_WRITE),
        Kind::Compare => matches!(op, FI_CSWAP..=FI_MSWAP),
    };
    if !family {
        return false;
    }
    if is_complex(dt) {
        return matches!(op, FI_SUM | FI_PROD | FI_ATOMIC_READ | FI_ATOMIC_WRITE | FI_CSWAP | FI_CSWAP_NE);
    }
    if matches!(op, FI_BOR | FI_BAND | FI_BXOR | FI_MSWAP) {
        return is_int(dt);
    }
    true
}

/// `fi_atomicvalid` and friends: the largest element count one operation
/// may carry when a provider moves at most `max_bytes` of operand per
/// operation, or `None` when the combination is not supported.
pub fn valid(kind: Kind, op: u32, dt: u32, max_bytes: usize) -> Option<usize> {
    if !supported(kind, op, dt) {
        return None;
    }
    let n = max_bytes / type_size(dt)?;
    (n > 0).then_some(n)
}

macro_rules! rd {
    ($t:ty, $b:expr, $i:expr) => {{
        const N: usize = std::mem::size_of::<$t>();
        <$t>::from_ne_bytes($b[$i * N..$i * N + N].try_into().unwrap_or([0; N]))
    }};
}
macro_rules! wr {
    ($t:ty, $b:expr, $i:expr, $v:expr) => {{
        const N: usize = std::mem::size_of::<$t>();
        $b[$i * N..$i * N + N].copy_from_slice(&<$t>::to_ne_bytes($v));
    }};
}

/// New value for a real (non-complex) element; `None` leaves it unchanged.
macro_rules! real_op {
    ($op:expr, $a:expr, $b:expr, $c:expr, $zero:expr, $one:expr, $sum:expr, $prod:expr, $bits:expr) => {{
        let (a, b, c) = ($a, $b, $c);
        let t = |x: bool| if x { $one } else { $zero };
        match $op {
            FI_MIN => Some(if b < a { b } else { a }),
            FI_MAX => Some(if b > a { b } else { a }),
            FI_SUM => Some($sum(a, b)),
            FI_PROD => Some($prod(a, b)),
            FI_LOR => Some(t(a != $zero || b != $zero)),
            FI_LAND => Some(t(a != $zero && b != $zero)),
            FI_LXOR => Some(t((a != $zero) != (b != $zero))),
            FI_BOR | FI_BAND | FI_BXOR | FI_MSWAP => $bits(a, b, c),
            FI_ATOMIC_READ => None,
            FI_ATOMIC_WRITE => Some(b),
            FI_CSWAP => (c == a).then_some(b),
            FI_CSWAP_NE => (c != a).then_some(b),
            FI_CSWAP_LE => (c <= a).then_some(b),
            FI_CSWAP_LT => (c < a).then_some(b),
            FI_CSWAP_GE => (c >= a).then_some(b),
            FI_CSWAP_GT => (c > a).then_some(b),
            _ => None,
        }
    }};
}

macro_rules! run_int {
    ($t:ty, $op:expr, $count:expr, $tgt:expr, $opd:expr, $cmp:expr) => {{
        for i in 0..$count {
            let a = rd!($t, $tgt, i);
            let b = if $opd.is_empty() { 0 } else { rd!($t, $opd, i) };
            let c = if $cmp.is_empty() { 0 } else { rd!($t, $cmp, i) };
            let bits = |a: $t, b: $t, c: $t| match $op {
                FI_BOR => Some(a | b),
                FI_BAND => Some(a & b),
                FI_BXOR => Some(a ^ b),
                _ => Some((b & c) | (a & !c)),
            };
            if let Some(v) = real_op!($op, a, b, c, 0 as $t, 1 as $t, <$t>::wrapping_add, <$t>::wrapping_mul, bits) {
                wr!($t, $tgt, i, v);
            }
        }
    }};
}

macro_rules! run_float {
    ($t:ty, $op:expr, $count:expr, $tgt:expr, $opd:expr, $cmp:expr) => {{
        for i in 0..$count {
            let a = rd!($t, $tgt, i);
            let b = if $opd.is_empty() { 0.0 } else { rd!($t, $opd, i) };
            let c = if $cmp.is_empty() { 0.0 } else { rd!($t, $cmp, i) };
            let bits = |_: $t, _: $t, _: $t| None;
            let v = real_op!($op, a, b, c, 0.0 as $t, 1.0 as $t, |x: $t, y: $t| x + y, |x: $t, y: $t| x * y, bits);
            if let Some(v) = v {
                wr!($t, $tgt, i, v);
            }
        }
    }};
}

macro_rules! run_complex {
    ($t:ty, $op:expr, $count:expr, $tgt:expr, $opd:expr, $cmp:expr) => {{
        let ld = |b: &[u8], i: usize| -> ($t, $t) {
            if b.is_empty() {
                (0.0, 0.0)
            } else {
                (rd!($t, b, 2 * i), rd!($t, b, 2 * i + 1))
            }
        };
        for i in 0..$count {
            let a = ld(&*$tgt, i);
            let b = ld($opd, i);
            let c = ld($cmp, i);
            let v = match $op {
                FI_SUM => Some((a.0 + b.0, a.1 + b.1)),
                FI_PROD => Some((a.0 * b.0 - a.1 * b.1, a.0 * b.1 + a.1 * b.0)),
                FI_ATOMIC_WRITE => Some(b),
                FI_CSWAP => (c == a).then_some(b),
                FI_CSWAP_NE => (c != a).then_some(b),
                _ => None,
            };
            if let Some(v) = v {
                wr!($t, $tgt, 2 * i, v.0);
                wr!($t, $tgt, 2 * i + 1, v.1);
            }
        }
    }};
}

/// Executes `op` on `count` elements of type `dt` held in `target`.
/// `operand` holds `count` elements (may be empty for `FI_ATOMIC_READ`);
/// `compare` holds `count` elements for compare operations (the mask for
/// `FI_MSWAP`), otherwise it may be empty. When `result` is given it
/// receives the previous values. Errors: unsupported combination
/// `-FI_EOPNOTSUPP`; a buffer shorter than `count` elements `-FI_EINVAL`
/// (nothing is modified then).
#[allow(clippy::too_many_arguments)]
pub fn apply(kind: Kind, op: u32, dt: u32, count: usize, target: &mut [u8], operand: &[u8], compare: &[u8], result: Option<&mut [u8]>) -> Result<()> {
    if !supported(kind, op, dt) {
        return Err(Error(FI_EOPNOTSUPP));
    }
    let bytes = type_size(dt).ok_or(EINVAL)?.checked_mul(count).ok_or(EINVAL)?;
    if target.len() < bytes || (op != FI_ATOMIC_READ && operand.len() < bytes) {
        return Err(EINVAL);
    }
    if kind == Kind::Compare && compare.len() < bytes {
        return Err(EINVAL);
    }
    if let Some(r) = result {
        if r.len() < bytes {
            return Err(EINVAL);
        }
        r[..bytes].copy_from_slice(&target[..bytes]);
    }
    let operand = if op == FI_ATOMIC_READ { &[][..] } else { &operand[..bytes] };
    let compare = if kind == Kind::Compare { &compare[..bytes] } else { &[][..] };
    let tgt = &mut target[..bytes];
    match dt {
        FI_INT8 => run_int!(i8, op, count, tgt, operand, compare),
        FI_UINT8 => run_int!(u8, op, count, tgt, operand, compare),
        FI_INT16 => run_int!(i16, op, count, tgt, operand, compare),
        FI_UINT16 => run_int!(u16, op, count, tgt, operand, compare),
        FI_INT32 => run_int!(i32, op, count, tgt, operand, compare),
        FI_UINT32 => run_int!(u32, op, count, tgt, operand, compare),
        FI_INT64 => run_int!(i64, op, count, tgt, operand, compare),
        FI_UINT64 => run_int!(u64, op, count, tgt, operand, compare),
        FI_FLOAT => run_float!(f32, op, count, tgt, operand, compare),
        FI_DOUBLE => run_float!(f64, op, count, tgt, operand, compare),
        FI_FLOAT_COMPLEX => run_complex!(f32, op, count, tgt, operand, compare),
        FI_DOUBLE_COMPLEX => run_complex!(f64, op, count, tgt, operand, compare),
        _ => return Err(Error(FI_EOPNOTSUPP)),
    }
    Ok(())
}

/// Like [`apply`], on `count` elements at `target` that other threads may
/// update at the same time: every element is read, changed and written
/// atomically with respect to every other `apply_shared` on it with the
/// same datatype (fi_atomic(3): atomicity per datatype across initiators),
/// in this process.
///
/// How: a naturally aligned element of 1, 2, 4 or 8 bytes is one hardware
/// atomic operation (`fetch_add`, `fetch_and`/`or`/`xor`, `swap`,
/// `compare_exchange`, `fetch_min`/`max` for integers; a compare-exchange
/// loop around the value computed by [`apply`] for everything else, floats
/// and `FI_FLOAT_COMPLEX` included), so it is also atomic with respect to
/// the application's own atomic instructions on that word. Other elements
/// (16-byte `FI_DOUBLE_COMPLEX`, unaligned ones) are updated under one of
/// [`STRIPES`] locks chosen by the element's address: the same datatype at
/// the same address always takes the same path and the same lock.
///
/// Errors as [`apply`] (nothing is modified then).
///
/// # Safety
/// `target` is valid for reads and writes of `count` elements of `dt`
/// during the call. Other threads touch those bytes only through this
/// function or through atomic instructions; plain loads and stores that
/// the application makes into its registered memory at the same time are
/// its own choice, as fi_atomic(3) promises nothing about them.
#[allow(clippy::too_many_arguments)]
pub unsafe fn apply_shared(kind: Kind, op: u32, dt: u32, count: usize, target: *mut u8, operand: &[u8], compare: &[u8], mut result: Option<&mut [u8]>) -> Result<()> {
    if !supported(kind, op, dt) {
        return Err(Error(FI_EOPNOTSUPP));
    }
    let size = type_size(dt).ok_or(EINVAL)?;
    let bytes = size.checked_mul(count).ok_or(EINVAL)?;
    if op != FI_ATOMIC_READ && operand.len() < bytes {
        return Err(EINVAL);
    }
    if kind == Kind::Compare && compare.len() < bytes {
        return Err(EINVAL);
    }
    if result.as_ref().is_some_and(|r| r.len() < bytes) {
        return Err(EINVAL);
    }
    for i in 0..count {
        let at = i * size;
        let e = Elem {
            kind,
            op,
            dt,
            operand: if op == FI_ATOMIC_READ { &[] } else { &operand[at..at + size] },
            compare: if kind == Kind::Compare { &compare[at..at + size] } else { &[] },
        };
        // SAFETY: element i lies inside the caller's range (`bytes`).
        let p = unsafe { target.add(at) };
        let mut old = [0u8; 16];
        // SAFETY: p is valid for `size` bytes, shared only atomically (caller).
        unsafe { e.run(p, size, &mut old[..size]) };
        if let Some(r) = result.as_deref_mut() {
            r[at..at + size].copy_from_slice(&old[..size]);
        }
    }
    Ok(())
}

/// Number of locks for elements without a hardware atomic.
pub const STRIPES: usize = 64;

static STRIPE_LOCKS: [std::sync::Mutex<()>; STRIPES] = [const { std::sync::Mutex::new(()) }; STRIPES];

/// One element of an [`apply_shared`] call.
struct Elem<'a> {
    kind: Kind,
    op: u32,
    dt: u32,
    operand: &'a [u8],
    compare: &'a [u8],
}

macro_rules! hw_elem {
    ($name:ident, $au:ty, $u:ty, $as:ty, $s:ty) => {
        /// # Safety
        /// `p` is aligned for the type and valid for reads and writes,
        /// shared with other threads only through atomic operations.
        unsafe fn $name(&self, p: *mut u8, old: &mut [u8]) {
            use std::sync::atomic::Ordering::SeqCst;
            const N: usize = std::mem::size_of::<$u>();
            let word = |b: &[u8]| if b.len() == N { <$u>::from_ne_bytes(b.try_into().unwrap_or([0; N])) } else { 0 };
            let (b, c) = (word(self.operand), word(self.compare));
            // SAFETY: aligned, valid, accessed atomically by everyone (caller).
            let a = unsafe { <$au>::from_ptr(p as *mut $u) };
            let int = is_int(self.dt);
            let signed = int && self.dt % 2 == 0;
            let v: $u = match self.op {
                FI_ATOMIC_READ => a.load(SeqCst),
                FI_ATOMIC_WRITE => a.swap(b, SeqCst),
                FI_SUM if int => a.fetch_add(b, SeqCst),
                FI_BOR => a.fetch_or(b, SeqCst),
                FI_BAND => a.fetch_and(b, SeqCst),
                FI_BXOR => a.fetch_xor(b, SeqCst),
                FI_CSWAP if int => a.compare_exchange(c, b, SeqCst, SeqCst).unwrap_or_else(|x| x),
                FI_MIN | FI_MAX if signed => {
                    // SAFETY: as above; the same bytes seen as the signed type.
                    let s = unsafe { <$as>::from_ptr(p as *mut $s) };
                    let r = if self.op == FI_MIN { s.fetch_min(b as $s, SeqCst) } else { s.fetch_max(b as $s, SeqCst) };
                    r as $u
                }
                FI_MIN if int => a.fetch_min(b, SeqCst),
                FI_MAX if int => a.fetch_max(b, SeqCst),
                _ => {
                    // Everything else: compute the new value from the one
                    // read, store it only if nobody changed it meanwhile.
                    let mut cur = a.load(SeqCst);
                    loop {
                        let mut new = cur.to_ne_bytes();
                        if apply(self.kind, self.op, self.dt, 1, &mut new, self.operand, self.compare, None).is_err() {
                            break cur;
                        }
                        let new = <$u>::from_ne_bytes(new);
                        if new == cur {
                            break cur;
                        }
                        match a.compare_exchange_weak(cur, new, SeqCst, SeqCst) {
                            Ok(_) => break cur,
                            Err(x) => cur = x,
                        }
                    }
                }
            };
            old.copy_from_slice(&v.to_ne_bytes());
        }
    };
}

impl Elem<'_> {
    hw_elem!(run8, std::sync::atomic::AtomicU8, u8, std::sync::atomic::AtomicI8, i8);
    hw_elem!(run16, std::sync::atomic::AtomicU16, u16, std::sync::atomic::AtomicI16, i16);
    hw_elem!(run32, std::sync::atomic::AtomicU32, u32, std::sync::atomic::AtomicI32, i32);
    hw_elem!(run64, std::sync::atomic::AtomicU64, u64, std::sync::atomic::AtomicI64, i64);

    /// Updates the `size`-byte element at `p`; its previous value goes to `old`.
    ///
    /// # Safety
    /// As [`apply_shared`], for this one element.
    unsafe fn run(&self, p: *mut u8, size: usize, old: &mut [u8]) {
        if (p as usize) % size == 0 {
            // In each arm p is aligned for the width (just checked) and
            // valid, shared only atomically (caller).
            match size {
                // SAFETY: as above, one byte.
                1 => return unsafe { self.run8(p, old) },
                // SAFETY: as above, two bytes.
                2 => return unsafe { self.run16(p, old) },
                // SAFETY: as above, four bytes.
                4 => return unsafe { self.run32(p, old) },
                // SAFETY: as above, eight bytes.
                8 => return unsafe { self.run64(p, old) },
                _ => {}
            }
        }
        // No hardware atomic for this element: a lock picked by its address.
        let stripe = (p as usize >> 4 ^ p as usize >> 12) % STRIPES;
        let _g = STRIPE_LOCKS[stripe].lock().unwrap_or_else(|e| e.into_inner());
        let mut v = [0u8; 16];
        let v = &mut v[..size];
        // SAFETY: p is valid for `size` bytes; every other update of this
        // element (same datatype, same address) holds the same lock.
        unsafe { std::ptr::copy_nonoverlapping(p, v.as_mut_ptr(), size) };
        old.copy_from_slice(v);
        if apply(self.kind, self.op, self.dt, 1, v, self.operand, self.compare, None).is_ok() && *v != *old {
            // SAFETY: as above.
            unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), p, size) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b<T: Copy>(v: &[T]) -> Vec<u8> {
        let n = std::mem::size_of_val(v);
        // SAFETY: plain numeric values viewed as bytes.
        unsafe { std::slice::from_raw_parts(v.as_ptr() as *const u8, n) }.to_vec()
    }

    /// Runs one operation on i64 elements: (new target, fetched).
    fn i64op(kind: Kind, op: u32, t: &[i64], o: &[i64], c: &[i64]) -> (Vec<i64>, Vec<i64>) {
        let mut tb = b(t);
        let mut r = vec![0u8; tb.len()];
        apply(kind, op, FI_INT64, t.len(), &mut tb, &b(o), &b(c), Some(&mut r)).unwrap();
        let d = |v: &[u8]| v.chunks(8).map(|x| i64::from_ne_bytes(x.try_into().unwrap())).collect::<Vec<_>>();
        (d(&tb), d(&r))
    }

    #[test]
    fn integer_ops() {
        let t = [5i64, -3, 0, 7];
        let o = [2i64, -8, 4, 0];
        let w = Kind::Fetch;
        assert_eq!(i64op(w, FI_MIN, &t, &o, &[]).0, [2, -8, 0, 0]);
        assert_eq!(i64op(w, FI_MAX, &t, &o, &[]).0, [5, -3, 4, 7]);
        assert_eq!(i64op(w, FI_SUM, &t, &o, &[]).0, [7, -11, 4, 7]);
        assert_eq!(i64op(w, FI_PROD, &t, &o, &[]).0, [10, 24, 0, 0]);
        assert_eq!(i64op(w, FI_LOR, &t, &o, &[]).0, [1, 1, 1, 1]);
        assert_eq!(i64op(w, FI_LAND, &t, &o, &[]).0, [1, 1, 0, 0]);
        assert_eq!(i64op(w, FI_LXOR, &t, &o, &[]).0, [0, 0, 1, 1]);
        assert_eq!(i64op(w, FI_BOR, &t, &o, &[]).0, [7, -3 | -8, 4, 7]);
        assert_eq!(i64op(w, FI_BAND, &t, &o, &[]).0, [0, -3 & -8, 0, 0]);
        assert_eq!(i64op(w, FI_BXOR, &t, &o, &[]).0, [7, -3 ^ -8, 4, 7]);
        let (nt, f) = i64op(w, FI_ATOMIC_READ, &t, &[], &[]);
        assert_eq!((nt.as_slice(), f.as_slice()), (&t[..], &t[..]));
        let (nt, f) = i64op(w, FI_ATOMIC_WRITE, &t, &o, &[]);
        assert_eq!((nt.as_slice(), f.as_slice()), (&o[..], &t[..]));
        let c = [5i64, 0, -1, 8];
        let k = Kind::Compare;
        assert_eq!(i64op(k, FI_CSWAP, &t, &o, &c).0, [2, -3, 0, 7]);
        assert_eq!(i64op(k, FI_CSWAP_NE, &t, &o, &c).0, [5, -8, 4, 0]);
        assert_eq!(i64op(k, FI_CSWAP_LE, &t, &o, &c).0, [2, -3, 4, 7]);
        assert_eq!(i64op(k, FI_CSWAP_LT, &t, &o, &c).0, [5, -3, 4, 7]);
        assert_eq!(i64op(k, FI_CSWAP_GE, &t, &o, &c).0, [2, -8, 0, 0]);
        assert_eq!(i64op(k, FI_CSWAP_GT, &t, &o, &c).0, [5, -8, 0, 0]);
        let (nt, f) = i64op(k, FI_MSWAP, &[0b1100], &[0b1010], &[0b0110]);
        assert_eq!((nt[0], f[0]), (0b1010, 0b1100));
    }

    #[test]
    fn small_and_unsigned_types_wrap() {
        let mut t = b(&[250u8, 3]);
        apply(Kind::Write, FI_SUM, FI_UINT8, 2, &mut t, &b(&[10u8, 4]), &[], None).unwrap();
        assert_eq!(t, [4, 7]);
        let mut t = b(&[-128i8]);
        apply(Kind::Write, FI_SUM, FI_INT8, 1, &mut t, &b(&[-1i8]), &[], None).unwrap();
        assert_eq!(t, b(&[127i8]));
        let mut t = b(&[0xffffu16, 2]);
        apply(Kind::Write, FI_MAX, FI_UINT16, 2, &mut t, &b(&[1u16, 9]), &[], None).unwrap();
        assert_eq!(t, b(&[0xffffu16, 9]));
        let mut t = b(&[-5i32]);
        apply(Kind::Write, FI_MIN, FI_UINT32, 1, &mut t, &b(&[7u32]), &[], None).unwrap();
        assert_eq!(t, b(&[7u32]), "unsigned compare: 0xfffffffb > 7");
        let mut t = b(&[u64::MAX]);
        apply(Kind::Write, FI_PROD, FI_UINT64, 1, &mut t, &b(&[2u64]), &[], None).unwrap();
        assert_eq!(t, b(&[u64::MAX - 1]));
    }

    #[test]
    fn floats_and_complex() {
        let mut t = b(&[1.5f64, -2.0]);
        apply(Kind::Write, FI_PROD, FI_DOUBLE, 2, &mut t, &b(&[2.0f64, 0.25]), &[], None).unwrap();
        assert_eq!(t, b(&[3.0f64, -0.5]));
        let mut t = b(&[1.0f32, 0.0]);
        apply(Kind::Write, FI_LXOR, FI_FLOAT, 2, &mut t, &b(&[2.0f32, 0.0]), &[], None).unwrap();
        assert_eq!(t, b(&[0.0f32, 0.0]));
        let mut t = b(&[1.0f32, 5.0]);
        let mut r = vec![0u8; 8];
        apply(Kind::Compare, FI_CSWAP_LT, FI_FLOAT, 2, &mut t, &b(&[9.0f32, 9.0]), &b(&[0.5f32, 6.0]), Some(&mut r)).unwrap();
        assert_eq!((t, r), (b(&[9.0f32, 5.0]), b(&[1.0f32, 5.0])));
        // (1+2i)(3+4i) = -5+10i
        let mut t = b(&[1.0f64, 2.0]);
        apply(Kind::Write, FI_PROD, FI_DOUBLE_COMPLEX, 1, &mut t, &b(&[3.0f64, 4.0]), &[], None).unwrap();
        assert_eq!(t, b(&[-5.0f64, 10.0]));
        let mut t = b(&[1.0f32, 2.0]);
        apply(Kind::Write, FI_SUM, FI_FLOAT_COMPLEX, 1, &mut t, &b(&[0.5f32, -2.0]), &[], None).unwrap();
        assert_eq!(t, b(&[1.5f32, 0.0]));
        let mut t = b(&[1.0f32, 2.0]);
        apply(Kind::Compare, FI_CSWAP, FI_FLOAT_COMPLEX, 1, &mut t, &b(&[7.0f32, 7.0]), &b(&[1.0f32, 2.0]), None).unwrap();
        assert_eq!(t, b(&[7.0f32, 7.0]));
    }

    #[test]
    fn validity_table() {
        assert!(supported(Kind::Write, FI_SUM, FI_INT8));
        assert!(!supported(Kind::Write, FI_ATOMIC_READ, FI_INT8), "read only through fetch");
        assert!(supported(Kind::Fetch, FI_ATOMIC_READ, FI_DOUBLE_COMPLEX));
        assert!(!supported(Kind::Fetch, FI_CSWAP, FI_INT32));
        assert!(!supported(Kind::Compare, FI_SUM, FI_INT32));
        assert!(supported(Kind::Compare, FI_MSWAP, FI_UINT64));
        assert!(!supported(Kind::Compare, FI_MSWAP, FI_DOUBLE));
        assert!(!supported(Kind::Write, FI_BOR, FI_FLOAT));
        assert!(!supported(Kind::Write, FI_MIN, FI_FLOAT_COMPLEX));
        assert!(!supported(Kind::Write, FI_SUM, FI_LONG_DOUBLE));
        assert!(!supported(Kind::Write, 99, FI_INT8));
        assert_eq!(valid(Kind::Write, FI_SUM, FI_UINT32, 1024), Some(256));
        assert_eq!(valid(Kind::Write, FI_SUM, FI_DOUBLE_COMPLEX, 1024), Some(64));
        assert_eq!(valid(Kind::Write, FI_SUM, FI_DOUBLE_COMPLEX, 8), None);
        let mut n = 0;
        for k in [Kind::Write, Kind::Fetch, Kind::Compare] {
            for op in 0..FI_ATOMIC_OP_LAST {
                for dt in 0..FI_DATATYPE_LAST {
                    n += supported(k, op, dt) as usize;
                }
            }
        }
        // write: 8 int x 11 + 2 float x 8 + 2 complex x 3; fetch: + read on all 12;
        // compare: 8 int x 7 + 2 float x 6 + 2 complex x 2.
        assert_eq!(n, (88 + 16 + 6) + (88 + 16 + 6 + 12) + (56 + 12 + 4));
    }

    /// `apply_shared` computes what `apply` computes, for every supported
    /// combination, on aligned and unaligned elements.
    #[test]
    fn shared_agrees_with_plain() {
        let mut n = 0;
        for k in [Kind::Write, Kind::Fetch, Kind::Compare] {
            for op in 0..FI_ATOMIC_OP_LAST {
                for dt in 0..FI_DATATYPE_LAST {
                    if !supported(k, op, dt) {
                        continue;
                    }
                    let size = type_size(dt).unwrap();
                    for seed in 0..6u8 {
                        // Small values, so floats stay ordinary numbers; some
                        // compares equal, some not.
                        let val = |s: u8| -> Vec<u8> {
                            let mut v = vec![0u8; 3 * size];
                            for (i, x) in v.iter_mut().enumerate() {
                                *x = if i % size == size - 1 || i % 4 == 3 { 0x40 } else { (s.wrapping_mul(37) ^ i as u8) & 0x0f };
                            }
                            v
                        };
                        let (t0, o, c) = (val(seed), val(seed / 2 + 1), if seed % 2 == 0 { val(seed) } else { val(seed + 9) });
                        let mut want = t0.clone();
                        let mut want_old = vec![0u8; t0.len()];
                        apply(k, op, dt, 3, &mut want, &o, &c, Some(&mut want_old)).unwrap();
                        for shift in [0usize, 1] {
                            // 16-byte aligned storage, element at +shift.
                            let mut store = vec![0u128; 4];
                            // SAFETY: the u128 vector is 64 bytes of plain memory.
                            let raw = unsafe { std::slice::from_raw_parts_mut(store.as_mut_ptr() as *mut u8, 64) };
                            raw[shift..shift + t0.len()].copy_from_slice(&t0);
                            let mut old = vec![0u8; t0.len()];
                            // SAFETY: raw holds the elements; this thread only.
                            unsafe { apply_shared(k, op, dt, 3, raw[shift..].as_mut_ptr(), &o, &c, Some(&mut old)) }.unwrap();
                            assert_eq!(&raw[shift..shift + t0.len()], &want[..], "{k:?} op {op} dt {dt} seed {seed} shift {shift}");
                            assert_eq!(old, want_old, "old values: {k:?} op {op} dt {dt} seed {seed} shift {shift}");
                        }
                    }
                    n += 1;
                }
            }
        }
        assert_eq!(n, (88 + 16 + 6) + (88 + 16 + 6 + 12) + (56 + 12 + 4));
        let mut t = [0u8; 8];
        // SAFETY: rejected before the target is touched.
        assert_eq!(unsafe { apply_shared(Kind::Write, FI_SUM, FI_UINT64, 1, t.as_mut_ptr(), &[0; 4], &[], None) }, Err(EINVAL));
    }

    /// Threads updating the same elements at once lose nothing: aligned
    /// words (hardware atomics), an unaligned word and 16-byte complex
    /// values (address locks).
    #[test]
    fn shared_is_atomic_across_threads() {
        const THREADS: usize = 4;
        const ROUNDS: u64 = 20_000;
        let mut mem = vec![0u128; 8];
        let base = mem.as_mut_ptr() as usize;
        let ts: Vec<_> = (0..THREADS)
            .map(|_| {
                std::thread::spawn(move || {
                    let p = base as *mut u8;
                    let mut olds = Vec::with_capacity(ROUNDS as usize);
                    for _ in 0..ROUNDS {
                        let mut old = [0u8; 8];
                        // SAFETY: (every call) offsets inside the 128-byte
                        // buffer, which outlives the threads and is only
                        // touched through apply_shared while they run.
                        unsafe {
                            apply_shared(Kind::Fetch, FI_SUM, FI_UINT64, 1, p, &1u64.to_ne_bytes(), &[], Some(&mut old)).unwrap();
                            olds.push(u64::from_ne_bytes(old));
                            // Compare-swap increment of the word at 8.
                            let mut seen = [0u8; 8];
                            apply_shared(Kind::Fetch, FI_ATOMIC_READ, FI_UINT64, 1, p.add(8), &[], &[], Some(&mut seen)).unwrap();
                            loop {
                                let cur = u64::from_ne_bytes(seen);
                                let expect = seen;
                                apply_shared(Kind::Compare, FI_CSWAP, FI_UINT64, 1, p.add(8), &(cur + 1).to_ne_bytes(), &expect, Some(&mut seen)).unwrap();
                                if u64::from_ne_bytes(seen) == cur {
                                    break;
                                }
                            }
                            apply_shared(Kind::Write, FI_SUM, FI_UINT64, 1, p.add(17), &1u64.to_ne_bytes(), &[], None).unwrap();
                            apply_shared(Kind::Write, FI_SUM, FI_INT32, 1, p.add(28), &(-1i32).to_ne_bytes(), &[], None).unwrap();
                            let one = [1.0f64.to_ne_bytes(), 2.0f64.to_ne_bytes()].concat();
                            apply_shared(Kind::Write, FI_SUM, FI_DOUBLE_COMPLEX, 1, p.add(32), &one, &[], None).unwrap();
                            apply_shared(Kind::Write, FI_SUM, FI_DOUBLE, 1, p.add(48), &0.5f64.to_ne_bytes(), &[], None).unwrap();
                        }
                    }
                    olds
                })
            })
            .collect();
        let mut all: Vec<u64> = ts.into_iter().flat_map(|t| t.join().unwrap()).collect();
        all.sort_unstable();
        let total = THREADS as u64 * ROUNDS;
        assert!(all.iter().copied().eq(0..total), "every fetch-add saw a distinct old value");
        // SAFETY: the threads are done; mem holds 128 bytes.
        let raw = unsafe { std::slice::from_raw_parts(mem.as_ptr() as *const u8, 128) };
        let u64_at = |o: usize| u64::from_ne_bytes(raw[o..o + 8].try_into().unwrap());
        let f64_at = |o: usize| f64::from_ne_bytes(raw[o..o + 8].try_into().unwrap());
        assert_eq!(u64_at(0), total, "fetch-add");
        assert_eq!(u64_at(8), total, "compare-swap");
        assert_eq!(u64_at(17), total, "unaligned sum");
        assert_eq!(i32::from_ne_bytes(raw[28..32].try_into().unwrap()), -(total as i32), "i32 sum");
        assert_eq!((f64_at(32), f64_at(40)), (total as f64, 2.0 * total as f64), "double complex sum");
        assert_eq!(f64_at(48), total as f64 / 2.0, "double sum");
        drop(mem);
    }

    #[test]
    fn bad_inputs_leave_target_alone() {
        let mut t = b(&[1u32, 2]);
        assert_eq!(apply(Kind::Write, FI_SUM, FI_UINT32, 3, &mut t, &b(&[1u32, 1, 1]), &[], None), Err(EINVAL));
        assert_eq!(apply(Kind::Write, FI_SUM, FI_UINT32, 2, &mut t, &b(&[1u32]), &[], None), Err(EINVAL));
        assert_eq!(apply(Kind::Compare, FI_CSWAP, FI_UINT32, 2, &mut t, &b(&[1u32, 1]), &[], None), Err(EINVAL));
        let mut r = [0u8; 4];
        assert_eq!(apply(Kind::Fetch, FI_SUM, FI_UINT32, 2, &mut t, &b(&[1u32, 1]), &[], Some(&mut r)), Err(EINVAL));
        assert_eq!(apply(Kind::Write, FI_BOR, FI_FLOAT, 1, &mut t, &b(&[1u32]), &[], None), Err(Error(FI_EOPNOTSUPP)));
        assert_eq!(apply(Kind::Write, FI_SUM, 42, 1, &mut t, &b(&[1u32]), &[], None), Err(Error(FI_EOPNOTSUPP)));
        assert_eq!(t, b(&[1u32, 2]));
        // Unaligned target.
        let mut raw = [0u8; 9];
        raw[1..9].copy_from_slice(&41u64.to_ne_bytes());
        apply(Kind::Write, FI_SUM, FI_UINT64, 1, &mut raw[1..], &b(&[1u64]), &[], None).unwrap();
        assert_eq!(u64::from_ne_bytes(raw[1..9].try_into().unwrap()), 42);
    }
}
