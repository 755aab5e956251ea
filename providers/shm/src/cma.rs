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
