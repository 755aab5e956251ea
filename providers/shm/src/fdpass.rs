//! Segment memory that cannot shrink, and the ways a peer obtains it.
//!
//! A segment's memory is a `memfd` sealed with `F_SEAL_SHRINK |
//! F_SEAL_GROW | F_SEAL_SEAL` after it is sized: no process, whatever its
//! rights, can make it shorter, so a page of a mapping can never lie beyond
//! the end of the object (the access that raises SIGBUS). A peer checks the
//! seals with `F_GET_SEALS` before it maps a descriptor.
//!
//! The memfd has no name in any file system; a peer gets its own descriptor
//! of it in one of three ways, tried in this order (`Segment::attach`):
//! 1. `open("/proc/<pid>/fd/<n>")`: the kernel requires
//!    `PTRACE_MODE_READ` on the owner, which Yama's `ptrace_scope` does not
//!    restrict (Yama only governs attaching); refused when the owner is not
//!    dumpable, when the two processes' uids or gids differ in any of
//!    real/effective/saved, or by an LSM policy.
//! 2. `pidfd_getfd`: needs `PTRACE_MODE_ATTACH` (stricter); kept for a
//!    process without a usable `/proc`.
//! 3. Handover: the owner runs one thread per segment that accepts
//!    connections on an abstract Unix socket named after the segment and
//!    sends the descriptor with `SCM_RIGHTS` to a connecting process whose
//!    uid (`SO_PEERCRED`) equals its own. Needs no ptrace permission, only
//!    that both processes share a network namespace (abstract socket names
//!    live there).
//!
//! Whichever way, the descriptor is checked the same way before it is
//! mapped, so every path gives the same guarantee.

use rfabric_core::error::{Error, Result, EAGAIN, EINVAL};
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// Seals every segment's memory carries. A peer requires `F_SEAL_SHRINK`.
pub const SEALS: i32 = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_SEAL;

/// How long a peer waits for the owner's handover thread (connect and
/// answer). Only the third way waits at all.
const HANDOVER_TIMEOUT_MS: i64 = 2000;

fn errno() -> i32 {
    crate::segment::errno()
}

fn owned(fd: i32) -> Result<OwnedFd> {
    if fd < 0 {
        return Err(Error(errno()));
    }
    // SAFETY: fd was just returned by the kernel and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Creates the memory of a segment: a memfd named `name` of `size` bytes,
/// mode 0600, sealed against any change of size.
pub fn create_sealed(name: &str, size: u64) -> Result<OwnedFd> {
    let cname = CString::new(name).map_err(|_| EINVAL)?;
    let base = libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING;
    // MFD_NOEXEC_SEAL (Linux 6.3) keeps kernels with vm.memfd_noexec=2 from
    // refusing the call; older kernels reject the flag with EINVAL.
    // SAFETY: cname is a valid C string.
    let mut fd = unsafe { libc::memfd_create(cname.as_ptr(), base | libc::MFD_NOEXEC_SEAL) };
    if fd < 0 && errno() == libc::EINVAL {
        // SAFETY: as above.
        fd = unsafe { libc::memfd_create(cname.as_ptr(), base) };
    }
    let fd = owned(fd)?;
    let raw = fd.as_raw_fd();
    // SAFETY: raw is our open memfd; fchmod/ftruncate/fcntl take no pointers.
    let ok = unsafe {
        libc::fchmod(raw, 0o600) == 0
            && libc::ftruncate(raw, size as libc::off_t) == 0
            && libc::fcntl(raw, libc::F_ADD_SEALS, SEALS) == 0
    };
    if !ok {
        return Err(Error(errno()));
    }
    Ok(fd)
}

/// `F_GET_SEALS` of `fd`; 0 for a file that cannot be sealed.
pub fn seals(fd: RawFd) -> i32 {
    // SAFETY: F_GET_SEALS takes no pointer.
    let s = unsafe { libc::fcntl(fd, libc::F_GET_SEALS) };
    s.max(0)
}

/// The first way: reopen the owner's descriptor through `/proc`. The link
/// is checked (`stat` follows it) to be a regular file with the identity
/// the owner published before anything is opened, and opened without
/// blocking or taking a controlling terminal.
pub fn from_proc(pid: u32, fd: i32, dev: u64, ino: u64) -> Result<OwnedFd> {
    if fd < 0 {
        return Err(EINVAL);
    }
    let path = CString::new(format!("/proc/{pid}/fd/{fd}")).map_err(|_| EINVAL)?;
    // SAFETY: zeroed stat is a valid out-parameter.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: path is a valid C string, st is writable.
    if unsafe { libc::stat(path.as_ptr(), &mut st) } != 0 {
        return Err(Error(errno()));
    }
    if st.st_mode & libc::S_IFMT != libc::S_IFREG || st.st_dev != dev || st.st_ino != ino {
        return Err(EINVAL);
    }
    let flags = libc::O_RDWR | libc::O_CLOEXEC | libc::O_NOCTTY | libc::O_NONBLOCK;
    // SAFETY: path is a valid C string.
    owned(unsafe { libc::open(path.as_ptr(), flags) })
}

/// The second way: `pidfd_getfd` (a duplicate of the owner's descriptor).
pub fn from_pidfd(pid: u32, fd: i32) -> Result<OwnedFd> {
    if fd < 0 || pid == 0 || pid > i32::MAX as u32 {
        return Err(EINVAL);
    }
    // SAFETY: pidfd_open(pid, flags) takes no pointers.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::c_long, 0 as libc::c_long) };
    let pidfd = owned(pidfd as i32)?;
    // SAFETY: pidfd_getfd(pidfd, targetfd, flags) takes no pointers; the new
    // descriptor is close-on-exec.
    let got = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd() as libc::c_long, fd as libc::c_long, 0 as libc::c_long) };
    owned(got as i32)
}

/// Abstract socket address of the handover service of the segment
/// `shm_name` (`@<shm_name>`), with its length.
fn handover_addr(shm_name: &str) -> Result<(libc::sockaddr_un, libc::socklen_t)> {
    // SAFETY: a zeroed sockaddr_un is valid.
    let mut a: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    a.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let b = shm_name.as_bytes();
    if b.is_empty() || b.len() + 1 > a.sun_path.len() {
        return Err(EINVAL);
    }
    // sun_path[0] stays 0: the abstract namespace.
    for (d, s) in a.sun_path[1..].iter_mut().zip(b) {
        *d = *s as libc::c_char;
    }
    let len = std::mem::size_of::<libc::sa_family_t>() + 1 + b.len();
    Ok((a, len as libc::socklen_t))
}

fn stream_socket() -> Result<OwnedFd> {
    // SAFETY: plain socket creation.
    owned(unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) })
}

fn peer_cred(fd: RawFd) -> Option<libc::ucred> {
    let mut c = libc::ucred { pid: 0, uid: 0, gid: 0 };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: c and len are valid out-parameters of the sizes given.
    let r = unsafe { libc::getsockopt(fd, libc::SOL_SOCKET, libc::SO_PEERCRED, (&mut c as *mut libc::ucred).cast(), &mut len) };
    (r == 0 && len as usize == std::mem::size_of::<libc::ucred>()).then_some(c)
}

/// Control buffer for one `SCM_RIGHTS` message of up to 4 descriptors
/// (aligned for `cmsghdr`).
#[repr(C, align(8))]
struct CmsgBuf([u8; 64]);

/// The owner's side of the third way: a thread that hands the segment's
/// descriptor to processes of its uid. Stopped and joined on drop.
pub struct Handover {
    listen: OwnedFd,
    thread: Option<std::thread::JoinHandle<()>>,
    /// The process that started it (a forked child must leave the thread
    /// and the socket, which it shares with its parent, alone).
    pid: u32,
}

impl Handover {
    /// Listens on `@<shm_name>` and starts the thread that serves `memfd`.
    /// `memfd` must stay open until the returned value is dropped.
    pub fn start(shm_name: &str, memfd: RawFd) -> Result<Handover> {
        let (addr, len) = handover_addr(shm_name)?;
        let listen = stream_socket()?;
        // SAFETY: addr/len describe a valid sockaddr_un.
        let r = unsafe { libc::bind(listen.as_raw_fd(), (&addr as *const libc::sockaddr_un).cast(), len) };
        // SAFETY: listen is our socket.
        if r != 0 || unsafe { libc::listen(listen.as_raw_fd(), 64) } != 0 {
            return Err(Error(errno()));
        }
        // SAFETY: geteuid cannot fail.
        let uid = unsafe { libc::geteuid() };
        let lfd = listen.as_raw_fd();
        // The thread must never run a signal handler of the application:
        // it starts with every signal blocked (the mask is inherited), and
        // this thread's mask is restored right after.
        // SAFETY: sigset_t values are plain data initialised by sigfillset;
        // pthread_sigmask only reads/writes them.
        let mut all: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: valid pointers to sigset_t.
        unsafe {
            libc::sigfillset(&mut all);
            libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        }
        let t = std::thread::Builder::new().name("rfabric-shm-fd".into()).stack_size(64 << 10).spawn(move || serve(lfd, memfd, uid));
        // SAFETY: restores the mask saved above.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) };
        let thread = t.map_err(|e| Error(e.raw_os_error().unwrap_or(libc::EAGAIN)))?;
        Ok(Handover { listen, thread: Some(thread), pid: std::process::id() })
    }
}

impl Drop for Handover {
    fn drop(&mut self) {
        let Some(t) = self.thread.take() else { return };
        if self.pid != std::process::id() {
            // A forked child: the thread exists only in the parent.
            std::mem::forget(t);
            return;
        }
        // shutdown() makes the blocked accept() return EINVAL.
        // SAFETY: our listening socket.
        unsafe { libc::shutdown(self.listen.as_raw_fd(), libc::SHUT_RDWR) };
        let _ = t.join();
    }
}

/// The handover thread: one connection at a time, never reads from the
/// client (so a client cannot hold it), answers a process of `uid` with
/// one byte and the descriptor, anyone else with nothing.
fn serve(lfd: RawFd, memfd: RawFd, uid: u32) {
    loop {
        // SAFETY: lfd stays open until this thread is joined.
        let c = unsafe { libc::accept4(lfd, std::ptr::null_mut(), std::ptr::null_mut(), libc::SOCK_CLOEXEC) };
        if c < 0 {
            match errno() {
                libc::EINTR | libc::ECONNABORTED | libc::EPROTO => continue,
                libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM => {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                    continue;
                }
                // EINVAL after shutdown(): the segment is going away.
                _ => return,
            }
        }
        // SAFETY: c was just accepted and is ours.
        let c = unsafe { OwnedFd::from_raw_fd(c) };
        if peer_cred(c.as_raw_fd()).is_some_and(|cr| cr.uid == uid) {
            send_fd(c.as_raw_fd(), memfd);
        }
    }
}

fn send_fd(sock: RawFd, fd: RawFd) {
    let mut byte = [b'F'];
    let mut iov = libc::iovec { iov_base: byte.as_mut_ptr().cast(), iov_len: 1 };
    let mut cbuf = CmsgBuf([0; 64]);
    // SAFETY: a zeroed msghdr is valid; the pointers set below outlive the
    // sendmsg call; CMSG_SPACE(4) fits in cbuf; CMSG_FIRSTHDR of a control
    // buffer that large is non-null and CMSG_DATA has room for one int.
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cbuf.0.as_mut_ptr().cast();
        msg.msg_controllen = libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) as _;
        let cm = libc::CMSG_FIRSTHDR(&msg);
        (*cm).cmsg_level = libc::SOL_SOCKET;
        (*cm).cmsg_type = libc::SCM_RIGHTS;
        (*cm).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(cm).cast::<RawFd>(), fd);
        libc::sendmsg(sock, &msg, libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT);
    }
}

/// The third way: asks the handover thread of segment `shm_name`, which
/// must run in process `pid` under our uid, for the descriptor. `ENOENT`
/// when nothing listens there (the segment is gone), `EAGAIN` when the
/// owner does not answer in time.
pub fn from_handover(shm_name: &str, pid: u32) -> Result<OwnedFd> {
    let (addr, len) = handover_addr(shm_name)?;
    let s = stream_socket()?;
    let tv = libc::timeval { tv_sec: HANDOVER_TIMEOUT_MS / 1000, tv_usec: (HANDOVER_TIMEOUT_MS % 1000 * 1000) as libc::suseconds_t };
    for opt in [libc::SO_RCVTIMEO, libc::SO_SNDTIMEO] {
        // SAFETY: tv is a valid timeval of the size given.
        unsafe {
            libc::setsockopt(s.as_raw_fd(), libc::SOL_SOCKET, opt, (&tv as *const libc::timeval).cast(), std::mem::size_of::<libc::timeval>() as libc::socklen_t)
        };
    }
    loop {
        // SAFETY: addr/len describe a valid sockaddr_un.
        if unsafe { libc::connect(s.as_raw_fd(), (&addr as *const libc::sockaddr_un).cast(), len) } == 0 {
            break;
        }
        match errno() {
            libc::EINTR => continue,
            libc::ECONNREFUSED | libc::ENOENT => return Err(Error(libc::ENOENT)),
            libc::EAGAIN | libc::EINPROGRESS | libc::ETIMEDOUT => return Err(EAGAIN),
            e => return Err(Error(e)),
        }
    }
    // Anyone in the network namespace can bind an abstract name: the
    // listener must be the owner process, of our uid.
    // SAFETY: geteuid cannot fail.
    let uid = unsafe { libc::geteuid() };
    match peer_cred(s.as_raw_fd()) {
        Some(c) if c.uid == uid && c.pid as u32 == pid => {}
        _ => return Err(Error(libc::EPERM)),
    }
    let mut byte = [0u8];
    let mut iov = libc::iovec { iov_base: byte.as_mut_ptr().cast(), iov_len: 1 };
    let mut cbuf = CmsgBuf([0; 64]);
    // SAFETY: a zeroed msghdr is valid; iov and cbuf outlive the call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf.0.as_mut_ptr().cast();
    msg.msg_controllen = cbuf.0.len() as _;
    let n = loop {
        // SAFETY: msg describes writable buffers; received descriptors are
        // close-on-exec.
        let n = unsafe { libc::recvmsg(s.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
        if n < 0 && errno() == libc::EINTR {
            continue;
        }
        break n;
    };
    if n < 0 {
        let e = errno();
        return Err(if e == libc::EAGAIN || e == libc::EWOULDBLOCK { EAGAIN } else { Error(e) });
    }
    // Take ownership of every descriptor received (the others are closed
    // when dropped), then use the first.
    let mut fds: Vec<OwnedFd> = Vec::new();
    // SAFETY: CMSG_FIRSTHDR/NXTHDR walk the control data the kernel wrote
    // within msg_controllen; each SCM_RIGHTS payload holds
    // (cmsg_len - CMSG_LEN(0)) / 4 descriptors, read unaligned.
    unsafe {
        let mut cm = libc::CMSG_FIRSTHDR(&msg);
        while !cm.is_null() {
            if (*cm).cmsg_level == libc::SOL_SOCKET && (*cm).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(cm).cast::<RawFd>();
                let count = ((*cm).cmsg_len as usize).saturating_sub(libc::CMSG_LEN(0) as usize) / std::mem::size_of::<RawFd>();
                for i in 0..count {
                    let fd = std::ptr::read_unaligned(data.add(i));
                    if fd >= 0 {
                        fds.push(OwnedFd::from_raw_fd(fd));
                    }
                }
            }
            cm = libc::CMSG_NXTHDR(&msg, cm);
        }
    }
    if n != 1 || byte[0] != b'F' || fds.is_empty() {
        return Err(Error(libc::EPROTO));
    }
    Ok(fds.swap_remove(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_memory_cannot_shrink_or_grow() {
        let fd = create_sealed("rfabric-shm.test", 8192).unwrap();
        let raw = fd.as_raw_fd();
        assert_eq!(seals(raw) & SEALS, SEALS);
        // SAFETY: raw is our memfd.
        unsafe {
            assert_ne!(libc::ftruncate(raw, 0), 0);
            assert_eq!(errno(), libc::EPERM);
            assert_ne!(libc::ftruncate(raw, 16384), 0);
            assert_ne!(libc::fcntl(raw, libc::F_ADD_SEALS, libc::F_SEAL_WRITE), 0);
        }
        // A descriptor reopened through /proc shares the seals.
        // SAFETY: zeroed stat is valid; fstat fills it.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: raw is open, st writable.
        assert_eq!(unsafe { libc::fstat(raw, &mut st) }, 0);
        assert_eq!(st.st_mode & 0o777, 0o600);
        assert_eq!(st.st_size, 8192);
        let again = from_proc(std::process::id(), raw, st.st_dev, st.st_ino).unwrap();
        assert_eq!(seals(again.as_raw_fd()) & SEALS, SEALS);
        // SAFETY: our descriptor.
        assert_ne!(unsafe { libc::ftruncate(again.as_raw_fd(), 0) }, 0);
        // The identity published by the owner must match.
        assert_eq!(from_proc(std::process::id(), raw, st.st_dev, st.st_ino ^ 1).err(), Some(EINVAL));
        // A plain file cannot be sealed.
        let f = std::fs::File::open("/proc/self/exe").unwrap();
        assert_eq!(seals(f.as_raw_fd()) & libc::F_SEAL_SHRINK, 0);
        if let Ok(dup) = from_pidfd(std::process::id(), raw) {
            assert_eq!(seals(dup.as_raw_fd()) & SEALS, SEALS);
        }
    }

    #[test]
    fn handover_gives_the_descriptor_and_stops() {
        let name = format!("rfabric-shm.test-handover.{}", std::process::id());
        let fd = create_sealed(&name, 4096).unwrap();
        let h = Handover::start(&name, fd.as_raw_fd()).unwrap();
        // The same name cannot be served twice.
        assert!(Handover::start(&name, fd.as_raw_fd()).is_err());
        for _ in 0..3 {
            let got = from_handover(&name, std::process::id()).unwrap();
            assert_eq!(seals(got.as_raw_fd()) & SEALS, SEALS);
            // SAFETY: zeroed stats are valid; fstat fills them.
            let (mut a, mut b): (libc::stat, libc::stat) = unsafe { (std::mem::zeroed(), std::mem::zeroed()) };
            // SAFETY: both descriptors are open.
            unsafe { assert!(libc::fstat(fd.as_raw_fd(), &mut a) == 0 && libc::fstat(got.as_raw_fd(), &mut b) == 0) };
            assert_eq!((a.st_dev, a.st_ino), (b.st_dev, b.st_ino));
        }
        // The listener must be the process the address names.
        assert_eq!(from_handover(&name, 1).err(), Some(Error(libc::EPERM)));
        drop(h);
        assert_eq!(from_handover(&name, std::process::id()).err(), Some(Error(libc::ENOENT)));
    }
}
