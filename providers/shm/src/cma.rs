//! Single-copy transfers between processes with `process_vm_readv` /
//! `process_vm_writev` (cross-memory attach), plus the switch that selects
//! it or the bounce-buffer path.

use rfabric_core::error::{Error, Result};

/// Which path large messages take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CmaMode {
    /// Try CMA; if the kernel refuses (EPERM under ptrace restrictions,
    /// ENOSYS) fall back to bounce buffers.
    Auto,
    /// CMA only; a refusal is an error.
    Force,
    /// Bounce buffers only.
    Off,
}

impl CmaMode {
    /// `FI_SHM_CMA` (a boolean setting, see `settings`): false forces the
    /// bounce path, true forces CMA; unset means automatic, and so does a
    /// value that is not a boolean (with a warning).
    pub fn from_env() -> CmaMode {
        crate::settings::cma_mode()
    }
}

/// Outcome class of a failed CMA call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CmaFailure {
    /// Not permitted or not supported: use the bounce path.
    Refused,
    /// The peer process is gone.
    PeerGone,
    /// Bad remote address or other error: the transfer fails.
    Fault(i32),
}

fn classify(e: i32) -> CmaFailure {
    match e {
        libc::EPERM | libc::ENOSYS | libc::EACCES => CmaFailure::Refused,
        libc::ESRCH => CmaFailure::PeerGone,
        e => CmaFailure::Fault(e),
    }
}

/// Reads `len` bytes at `remote` in process `pid` into `local`. Loops over
/// partial transfers; a zero-progress result is a fault.
///
/// # Safety
/// `local` must be valid for writes of `len` bytes.
pub unsafe fn read_from(pid: u32, local: *mut u8, remote: u64, len: usize) -> std::result::Result<(), CmaFailure> {
    let mut done = 0usize;
    while done < len {
        let l = libc::iovec {
            // SAFETY: done < len, inside the caller's buffer.
            iov_base: unsafe { local.add(done) }.cast(),
            iov_len: len - done,
        };
        let r = libc::iovec { iov_base: (remote.wrapping_add(done as u64)) as *mut libc::c_void, iov_len: len - done };
        // SAFETY: the local iovec describes caller-owned writable memory;
        // the remote one is checked by the kernel.
        let n = unsafe { libc::process_vm_readv(pid as libc::pid_t, &l, 1, &r, 1, 0) };
        if n < 0 {
            let e = crate::segment::errno();
            if e == libc::EINTR {
                continue;
            }
            return Err(classify(e));
        }
        if n == 0 {
            return Err(CmaFailure::Fault(libc::EFAULT));
        }
        done += n as usize;
    }
    Ok(())
}

/// How many times [`page_read_ns`] times its call; the least counts.
const PROBES: usize = 16;

/// The cost of one `process_vm_readv` of a page (ns) from which CMA is
/// the slow way here, under `FI_SHM_CMA` unset: medium messages go
/// through the ring and large ones through bounce slots instead
/// ([`crate::endpoint::default_eager_limits`]). On an AMD EPYC guest whose
/// processes read 1.75 to 4.8 µs (1.7 µs in a long warm loop), both beat
/// CMA at every size measured, from 6 KiB to 4 MiB, latency and streaming
/// alike. On the Intel Xeon guest where the adaptive defaults were
/// measured, a whole 6 KiB CMA ping-pong took 1.2 µs one way, read
/// included. See DESIGN.md.
pub const CMA_SLOW_NS: u64 = 1200;

/// Whether CMA is the slow way on a machine where one `process_vm_readv`
/// of a page costs `page_read_ns` (`None`: not measured).
pub fn is_slow(page_read_ns: Option<u64>) -> bool {
    page_read_ns.is_some_and(|ns| ns >= CMA_SLOW_NS)
}

/// What one `process_vm_readv` of a page costs on this machine, in
/// nanoseconds: the least of [`PROBES`] reads from this process into
/// itself, measured once per process (24 calls, 50-110 µs here), at the first
/// endpoint. `None` when the kernel refuses the call. The cost is mostly
/// fixed (the system call, pinning the remote page) and differs severalfold
/// between machines ([`is_slow`]).
pub fn page_read_ns() -> Option<u64> {
    static COST: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
    *COST.get_or_init(|| {
        let cost = measure_page_read();
        match cost {
            Some(ns) if is_slow(cost) => rfabric_core::fi_info!(
                "shm",
                rfabric_core::abi::FI_LOG_CORE,
                "process_vm_readv of a page: {} ns (least of {}), at least {}: messages up to {} bytes go through the ring, larger ones through bounce slots",
                ns,
                PROBES,
                CMA_SLOW_NS,
                crate::endpoint::SLOW_CMA_EAGER_MAX
            ),
            Some(ns) => rfabric_core::fi_info!("shm", rfabric_core::abi::FI_LOG_CORE, "process_vm_readv of a page: {} ns (least of {}): rendezvous by CMA", ns, PROBES),
            None => rfabric_core::fi_info!("shm", rfabric_core::abi::FI_LOG_CORE, "process_vm_readv refused; its cost not measured"),
        }
        cost
    })
}

fn measure_page_read() -> Option<u64> {
    // Both pages written first (a zeroed allocation may not be mapped
    // yet), and the first reads untimed: what is timed is the call, not
    // faults or cold caches.
    let src = vec![0x5au8; 4096];
    let mut dst = vec![0xa5u8; 4096];
    let pid = std::process::id();
    let mut best = u64::MAX;
    for _ in 0..PROBES / 2 {
        // SAFETY: as below.
        unsafe { read_from(pid, dst.as_mut_ptr(), src.as_ptr() as u64, src.len()) }.ok()?;
    }
    for _ in 0..PROBES {
        let t = std::time::Instant::now();
        // SAFETY: `dst` is ours and writable for its 4096 bytes; the
        // remote range is `src`, in this very process, readable.
        unsafe { read_from(pid, dst.as_mut_ptr(), src.as_ptr() as u64, src.len()) }.ok()?;
        best = best.min(t.elapsed().as_nanos() as u64);
    }
    (dst == src).then_some(best)
}

/// Writes `len` bytes from `local` to `remote` in process `pid`.
///
/// # Safety
/// `local` must be valid for reads of `len` bytes.
pub unsafe fn write_to(pid: u32, local: *const u8, remote: u64, len: usize) -> std::result::Result<(), CmaFailure> {
    let mut done = 0usize;
    while done < len {
        let l = libc::iovec {
            // SAFETY: done < len, inside the caller's buffer.
            iov_base: unsafe { local.add(done) } as *mut libc::c_void,
            iov_len: len - done,
        };
        let r = libc::iovec { iov_base: (remote.wrapping_add(done as u64)) as *mut libc::c_void, iov_len: len - done };
        // SAFETY: local iovec is readable caller memory; remote is checked by the kernel.
        let n = unsafe { libc::process_vm_writev(pid as libc::pid_t, &l, 1, &r, 1, 0) };
        if n < 0 {
            let e = crate::segment::errno();
            if e == libc::EINTR {
                continue;
            }
            return Err(classify(e));
        }
        if n == 0 {
            return Err(CmaFailure::Fault(libc::EFAULT));
        }
        done += n as usize;
    }
    Ok(())
}

/// Run-time detection: reads `expect.len()` bytes at `remote` in `pid` and
/// compares with what we see through the shared mapping. `Ok(true)` when
/// CMA works against that peer, `Ok(false)` when the kernel refuses.
pub fn probe(pid: u32, remote: u64, expect: &[u8]) -> Result<bool> {
    let mut buf = [0u8; 64];
    let n = expect.len().min(buf.len());
    // SAFETY: buf has n writable bytes.
    match unsafe { read_from(pid, buf.as_mut_ptr(), remote, n) } {
        Ok(()) => Ok(buf[..n] == expect[..n]),
        Err(CmaFailure::Refused) => Ok(false),
        Err(CmaFailure::PeerGone) => Err(Error(libc::ECONNRESET)),
        Err(CmaFailure::Fault(_)) => Ok(false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn self_read_write() {
        let src: Vec<u8> = (0..100_000u32).map(|i| (i * 7) as u8).collect();
        let mut dst = vec![0u8; src.len()];
        let pid = std::process::id();
        // SAFETY: dst has src.len() bytes.
        unsafe { read_from(pid, dst.as_mut_ptr(), src.as_ptr() as u64, src.len()) }.unwrap();
        assert_eq!(src, dst);
        let mut dst2 = vec![0u8; 5000];
        // SAFETY: reads 5000 bytes of src.
        unsafe { write_to(pid, src.as_ptr(), dst2.as_mut_ptr() as u64, 5000) }.unwrap();
        assert_eq!(&src[..5000], &dst2[..]);
    }

    #[test]
    fn bad_remote_address_is_fault() {
        let mut dst = [0u8; 16];
        // SAFETY: dst has 16 bytes.
        let r = unsafe { read_from(std::process::id(), dst.as_mut_ptr(), 8, 16) };
        assert!(matches!(r, Err(CmaFailure::Fault(_))), "{r:?}");
    }

    #[test]
    fn probe_self() {
        let v = *b"probe-bytes-1234";
        assert_eq!(probe(std::process::id(), v.as_ptr() as u64, &v), Ok(true));
    }
}
