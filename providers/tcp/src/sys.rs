//! The system calls std does not wrap: a non-blocking `connect` from a
//! chosen local address, and epoll (one descriptor that turns readable
//! when any connection of an endpoint does); and a connection's reads and
//! writes, made without the C library's wrappers.

use rfabric_core::error::{Error, Result};
use rfabric_core::abi::*;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

fn errno() -> i32 {
    // SAFETY: the C library's errno of this thread; read right after the
    // call that set it, as every caller here does.
    unsafe { *libc::__errno_location() }
}

// A connection's `recv`, `send` and `sendmsg` go to the kernel through
// syscall(2): the C library's wrappers of these calls are cancellation
// points, and in a process with threads each call then also costs two
// atomic operations (switching asynchronous cancellation on and off), on
// every poll of a connection. Nothing here is ever cancelled.

fn io_result(r: libc::c_long) -> std::io::Result<usize> {
    if r < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

/// recv(2) into `buf`, flags 0 (the socket is non-blocking).
pub fn recv(fd: RawFd, buf: &mut [u8]) -> std::io::Result<usize> {
    recv_errno(fd, buf).map_err(std::io::Error::from_raw_os_error)
}

/// As `recv`, with the bare errno: the call of every poll of a connection,
/// most often `EAGAIN`, which then builds and drops no `io::Error`.
#[inline]
pub fn recv_errno(fd: RawFd, buf: &mut [u8]) -> std::result::Result<usize, i32> {
    // SAFETY: `buf` is writable for its length during the call; no source
    // address is asked for.
    let r = unsafe { libc::syscall(libc::SYS_recvfrom, fd, buf.as_mut_ptr(), buf.len(), 0, std::ptr::null_mut::<libc::sockaddr>(), std::ptr::null_mut::<libc::socklen_t>()) };
    if r < 0 {
        Err(errno())
    } else {
        Ok(r as usize)
    }
}

/// send(2) of `buf`, without SIGPIPE.
pub fn send(fd: RawFd, buf: &[u8]) -> std::io::Result<usize> {
    // SAFETY: `buf` is readable for its length during the call; no
    // destination address is given (a connected socket).
    io_result(unsafe { libc::syscall(libc::SYS_sendto, fd, buf.as_ptr(), buf.len(), libc::MSG_NOSIGNAL, std::ptr::null::<libc::sockaddr>(), 0 as libc::socklen_t) })
}

/// sendmsg(2) of the buffers `bufs` (at most IOV_MAX of them), without
/// SIGPIPE; writev(2) would raise it on a closed connection.
pub fn send_vectored(fd: RawFd, bufs: &[std::io::IoSlice<'_>]) -> std::io::Result<usize> {
    // SAFETY: an all-zero msghdr is valid (no address, no control data).
    let mut m: libc::msghdr = unsafe { std::mem::zeroed() };
    // IoSlice is ABI-compatible with struct iovec (std's guarantee on Unix).
    m.msg_iov = bufs.as_ptr() as *mut libc::iovec;
    m.msg_iovlen = bufs.len() as _;
    // SAFETY: `m` names `bufs`, readable during the call.
    io_result(unsafe { libc::syscall(libc::SYS_sendmsg, fd, &m as *const libc::msghdr, libc::MSG_NOSIGNAL) })
}

/// Data segments the kernel has sent on TCP socket `fd` (TCP_INFO's
/// `tcpi_data_segs_out`): how tests see that parts went in one write.
#[cfg(test)]
pub fn tcp_data_segs_out(fd: RawFd) -> std::io::Result<u32> {
    // SAFETY: an all-zero tcp_info is valid (plain integers).
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: `info` is writable for `len` bytes and `len` is a valid
    // pointer the kernel updates; an older kernel fills less, leaving
    // zeros.
    let r = unsafe { libc::getsockopt(fd, libc::IPPROTO_TCP, libc::TCP_INFO, (&raw mut info).cast(), &mut len) };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(info.tcpi_data_segs_out)
}

/// An `FI_E*` error for an OS error number.
pub fn fi_err(e: i32) -> Error {
    Error(match e {
        libc::ECONNREFUSED => FI_ECONNREFUSED,
        libc::ETIMEDOUT => FI_ETIMEDOUT,
        libc::EHOSTUNREACH | libc::ENETUNREACH => FI_EHOSTUNREACH,
        libc::EADDRNOTAVAIL => FI_EADDRNOTAVAIL,
        libc::EADDRINUSE => FI_EADDRINUSE,
        libc::ECONNRESET | libc::EPIPE | libc::ECONNABORTED => FI_ECONNRESET,
        libc::EACCES | libc::EPERM => FI_EACCES,
        libc::ENOMEM | libc::ENOBUFS => FI_ENOMEM,
        libc::EMFILE | libc::ENFILE => FI_EMFILE,
        _ => FI_EIO,
    })
}

/// Starts a TCP connection from `local` (port 0) to `to` without waiting:
/// the socket is non-blocking, and the connection completes (or fails)
/// later (`SO_ERROR` once writable).
pub fn connect_from(local: &SocketAddr, to: &[u8]) -> Result<TcpStream> {
    let fam = if local.is_ipv6() { libc::AF_INET6 } else { libc::AF_INET };
    // SAFETY: plain socket(2) call; the result is checked.
    let fd = unsafe { libc::socket(fam, libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(fi_err(errno()));
    }
    // SAFETY: `fd` was just opened and is owned by nothing else.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    if local.port() != 0 {
        let one: libc::c_int = 1;
        // SAFETY: setsockopt with a c_int option value of its size.
        unsafe { libc::setsockopt(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, (&one as *const libc::c_int).cast(), std::mem::size_of::<libc::c_int>() as libc::socklen_t) };
    }
    let src = rfabric_rudp::sockaddr::to_bytes(local);
    // SAFETY: `src` holds a complete sockaddr_in / sockaddr_in6 of its
    // length, alive across the call.
    let r = unsafe { libc::bind(fd, src.as_ptr().cast(), src.len() as libc::socklen_t) };
    if r != 0 {
        return Err(fi_err(errno()));
    }
    // SAFETY: the caller checked `to` as a sockaddr of the socket's family;
    // the kernel reads at most `to.len()` bytes.
    let r = unsafe { libc::connect(fd, to.as_ptr().cast(), to.len() as libc::socklen_t) };
    if r != 0 {
        let e = errno();
        if e != libc::EINPROGRESS {
            return Err(fi_err(e));
        }
    }
    Ok(TcpStream::from(owned))
}

/// Whether `poll` reports any of `events` (or an error or hang-up) on
/// `fd` now, without waiting.
fn ready_now(fd: RawFd, events: libc::c_short) -> bool {
    let mut p = libc::pollfd { fd, events, revents: 0 };
    // SAFETY: one pollfd on the stack, valid for the call.
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    n > 0 && p.revents != 0
}

/// Whether `fd` is writable now (a connect under way has finished).
pub fn writable(fd: RawFd) -> bool {
    ready_now(fd, libc::POLLOUT)
}

/// Whether `fd` has bytes to read (or an end or error to report) now,
/// asked without taking the socket's lock as a failed `recv` does.
pub fn readable(fd: RawFd) -> bool {
    ready_now(fd, libc::POLLIN)
}

/// An epoll instance: level-triggered readability of registered
/// descriptors, each with a key.
pub struct Epoll {
    fd: OwnedFd,
    events: Vec<libc::epoll_event>,
    /// Descriptors registered.
    registered: usize,
}

impl Epoll {
    pub fn new() -> Result<Epoll> {
        // SAFETY: plain epoll_create1(2) call; the result is checked.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(fi_err(errno()));
        }
        // SAFETY: `fd` was just opened and is owned by nothing else.
        Ok(Epoll { fd: unsafe { OwnedFd::from_raw_fd(fd) }, events: vec![libc::epoll_event { events: 0, u64: 0 }; 256], registered: 0 })
    }

    fn ctl(&self, op: i32, fd: RawFd, key: u64, on: bool) -> Result<()> {
        let mut ev = libc::epoll_event { events: if on { libc::EPOLLIN as u32 } else { 0 }, u64: key };
        // SAFETY: `self.fd` is an epoll descriptor; `ev` lives across the
        // call; the kernel checks `fd`.
        let r = unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), op, fd, &mut ev) };
        if r != 0 {
            return Err(fi_err(errno()));
        }
        Ok(())
    }

    /// Watches `fd` for readability under `key`.
    pub fn add(&mut self, fd: RawFd, key: u64) -> Result<()> {
        self.ctl(libc::EPOLL_CTL_ADD, fd, key, true)?;
        self.registered += 1;
        Ok(())
    }

    /// Turns watching `fd` on or off (it stays registered).
    pub fn watch(&self, fd: RawFd, key: u64, on: bool) {
        let _ = self.ctl(libc::EPOLL_CTL_MOD, fd, key, on);
    }

    /// Stops watching `fd` (before it is closed).
    pub fn remove(&mut self, fd: RawFd) {
        if self.ctl(libc::EPOLL_CTL_DEL, fd, 0, false).is_ok() {
            self.registered -= 1;
        }
    }

    /// How many descriptors are registered.
    pub fn registered(&self) -> usize {
        self.registered
    }

    /// Keys of the descriptors readable now, without waiting.
    pub fn ready(&mut self, out: &mut Vec<u64>) {
        // SAFETY: `events` has `len` initialised entries the kernel may
        // overwrite; the count returned is at most `len`.
        let n = unsafe { libc::epoll_wait(self.fd.as_raw_fd(), self.events.as_mut_ptr(), self.events.len() as i32, 0) };
        for e in self.events.iter().take(n.max(0) as usize) {
            out.push(e.u64);
        }
    }

    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}
