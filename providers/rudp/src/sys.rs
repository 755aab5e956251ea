//! The system calls std does not wrap: socket buffer sizes (and, from the
//! core, the list of network interfaces).

use std::net::UdpSocket;
use std::os::fd::AsRawFd;

/// Asks for `bytes` of socket buffer each way: `SO_*BUFFORCE` (allowed to
/// privileged processes, beyond `net.core.[rw]mem_max`), else the plain
/// option (capped by the kernel).
pub fn set_sockbufs(sock: &UdpSocket, bytes: usize) {
    let v = bytes.min(i32::MAX as usize) as libc::c_int;
    for (force, plain) in [(libc::SO_RCVBUFFORCE, libc::SO_RCVBUF), (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF)] {
        for opt in [force, plain] {
            // SAFETY: the fd is an open socket owned by `sock`; the option
            // value is a c_int that lives across the call, with its size.
            let r = unsafe {
                libc::setsockopt(
                    sock.as_raw_fd(),
                    libc::SOL_SOCKET,
                    opt,
                    (&v as *const libc::c_int).cast(),
                    std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                )
            };
            if r == 0 {
                break;
            }
        }
    }
}

/// Waits up to `ms` milliseconds for `fd` to turn readable.
pub fn wait_readable(fd: i32, ms: i32) {
    let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    // SAFETY: one pollfd on the stack, valid for the call.
    unsafe { libc::poll(&mut p, 1, ms) };
}

/// The interface list lives in the core (`rfabric_core::net`), shared
/// with the verbs provider.
pub use rfabric_core::net::{interfaces, IfAddr};

/// Datagrams `recvmmsg` takes in one call, at most.
pub const RECV_MANY: usize = 64;

/// Source addresses of the datagrams one `recv_many` received.
pub struct RecvAddrs([libc::sockaddr_storage; RECV_MANY]);

impl Default for RecvAddrs {
    fn default() -> Self {
        // SAFETY: sockaddr_storage is plain data; all zeroes is a valid value.
        RecvAddrs(unsafe { std::mem::zeroed() })
    }
}

/// Receives up to `lens.len()` (at most `RECV_MANY`) datagrams with one
/// `recvmmsg`, datagram i into `data[i * slot..(i + 1) * slot]`; their
/// lengths go to `lens` and their sources to `from`. Returns how many
/// (0 when none is waiting).
pub fn recv_many(sock: &UdpSocket, data: &mut [u8], slot: usize, lens: &mut [usize], from: &mut [Option<std::net::SocketAddr>], addrs: &mut RecvAddrs) -> usize {
    let n = lens.len().min(from.len()).min(RECV_MANY).min(data.len() / slot.max(1));
    if n == 0 {
        return 0;
    }
    // SAFETY: plain C structs; zeroes are valid (null pointers, lengths 0).
    let mut iovs: [libc::iovec; RECV_MANY] = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let mut hdrs: [libc::mmsghdr; RECV_MANY] = unsafe { std::mem::zeroed() };
    let base = data.as_mut_ptr();
    for i in 0..n {
        // SAFETY: i * slot + slot <= data.len() (n bounded above), so the
        // pointer stays inside `data`.
        iovs[i] = libc::iovec { iov_base: unsafe { base.add(i * slot) }.cast(), iov_len: slot };
        hdrs[i].msg_hdr.msg_iov = &mut iovs[i];
        hdrs[i].msg_hdr.msg_iovlen = 1;
        hdrs[i].msg_hdr.msg_name = (&mut addrs.0[i] as *mut libc::sockaddr_storage).cast();
        hdrs[i].msg_hdr.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    }
    // SAFETY: n headers, each naming one iovec into `data` and one address
    // slot, all live and exclusively borrowed for the call.
    let r = unsafe { libc::recvmmsg(sock.as_raw_fd(), hdrs.as_mut_ptr(), n as libc::c_uint, libc::MSG_DONTWAIT, std::ptr::null_mut()) };
    if r <= 0 {
        return 0;
    }
    let got = r as usize;
    for i in 0..got {
        lens[i] = (hdrs[i].msg_len as usize).min(slot);
        let len = (hdrs[i].msg_hdr.msg_namelen as usize).min(std::mem::size_of::<libc::sockaddr_storage>());
        // SAFETY: the kernel wrote `len` bytes of address into the slot.
        let raw = unsafe { std::slice::from_raw_parts((&addrs.0[i] as *const libc::sockaddr_storage).cast::<u8>(), len) };
        from[i] = crate::sockaddr::from_bytes(raw);
    }
    got
}

#[cfg(test)]
mod tests {
    #[test]
    fn loopback_is_listed() {
        let v = super::interfaces();
        assert!(v.iter().any(|i| i.loopback && i.addr == std::net::IpAddr::from([127, 0, 0, 1])), "{v:?}");
    }
}
