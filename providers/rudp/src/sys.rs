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
/// lengths go to `lens` and their sources to `from` (`None` for a datagram
/// that did not fit its slot and was cut short). Returns how many (0 when
/// none is waiting).
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
        if hdrs[i].msg_hdr.msg_flags & libc::MSG_TRUNC != 0 {
            // Longer than a slot: cut short by the kernel, never passed on.
            from[i] = None;
            continue;
        }
        let len = (hdrs[i].msg_hdr.msg_namelen as usize).min(std::mem::size_of::<libc::sockaddr_storage>());
        // SAFETY: the kernel wrote `len` bytes of address into the slot.
        let raw = unsafe { std::slice::from_raw_parts((&addrs.0[i] as *const libc::sockaddr_storage).cast::<u8>(), len) };
        from[i] = crate::sockaddr::from_bytes(raw);
    }
    got
}

/// Datagrams one `sendmmsg` sends, at most.
pub const SEND_MANY: usize = 64;

/// Datagrams queued for one `sendmmsg`: copies of their bytes, one slot
/// each, and their destinations.
pub struct SendBatch {
    data: Vec<u8>,
    slot: usize,
    lens: [usize; SEND_MANY],
    names: [libc::sockaddr_storage; SEND_MANY],
    namelens: [libc::socklen_t; SEND_MANY],
    n: usize,
}

impl SendBatch {
    /// A batch of datagrams of up to `slot` bytes.
    pub fn new(slot: usize) -> Box<SendBatch> {
        Box::new(SendBatch {
            data: vec![0u8; slot * SEND_MANY],
            slot,
            lens: [0; SEND_MANY],
            // SAFETY: sockaddr_storage is plain data; zeroes are valid.
            names: unsafe { std::mem::zeroed() },
            namelens: [0; SEND_MANY],
            n: 0,
        })
    }

    /// Queues a copy of `buf` (at most the slot size) for `to`; true when
    /// the batch is now full (`send` it).
    pub fn push(&mut self, buf: &[u8], to: &std::net::SocketAddr) -> bool {
        let i = self.n;
        let len = buf.len().min(self.slot);
        self.data[i * self.slot..i * self.slot + len].copy_from_slice(&buf[..len]);
        self.lens[i] = len;
        self.namelens[i] = write_sockaddr(&mut self.names[i], to);
        self.n += 1;
        self.n == SEND_MANY
    }

    /// Sends what is queued with `sendmmsg` and empties the batch. A
    /// datagram the socket does not take (full buffer) is dropped as the
    /// network would drop it; returns how many were sent.
    pub fn send(&mut self, sock: &UdpSocket) -> usize {
        let n = self.n;
        self.n = 0;
        if n == 0 {
            return 0;
        }
        // SAFETY: plain C structs; zeroes are valid (null pointers, lengths 0).
        let mut iovs: [libc::iovec; SEND_MANY] = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let mut hdrs: [libc::mmsghdr; SEND_MANY] = unsafe { std::mem::zeroed() };
        let base = self.data.as_mut_ptr();
        for i in 0..n {
            // SAFETY: i < SEND_MANY, so the slot lies inside `data`.
            iovs[i] = libc::iovec { iov_base: unsafe { base.add(i * self.slot) }.cast(), iov_len: self.lens[i] };
            hdrs[i].msg_hdr.msg_iov = &mut iovs[i];
            hdrs[i].msg_hdr.msg_iovlen = 1;
            hdrs[i].msg_hdr.msg_name = (&mut self.names[i] as *mut libc::sockaddr_storage).cast();
            hdrs[i].msg_hdr.msg_namelen = self.namelens[i];
        }
        let mut done = 0;
        while done < n {
            // SAFETY: headers done..n name live iovecs into this batch's
            // own data and address slots; the kernel only reads them.
            let r = unsafe { libc::sendmmsg(sock.as_raw_fd(), hdrs[done..].as_mut_ptr(), (n - done) as libc::c_uint, libc::MSG_DONTWAIT) };
            if r <= 0 {
                // EAGAIN (full socket buffer) or an error of the first
                // datagram (e.g. an unreachable address): skip it.
                if r < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EAGAIN) {
                    break;
                }
                done += 1;
                continue;
            }
            done += r as usize;
        }
        done
    }
}

/// Writes `a` as a C socket address; returns its length.
fn write_sockaddr(out: &mut libc::sockaddr_storage, a: &std::net::SocketAddr) -> libc::socklen_t {
    match a {
        std::net::SocketAddr::V4(v4) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: v4.port().to_be(),
                sin_addr: libc::in_addr { s_addr: u32::from_ne_bytes(v4.ip().octets()) },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than and aligned for
            // sockaddr_in.
            unsafe { std::ptr::write((out as *mut libc::sockaddr_storage).cast::<libc::sockaddr_in>(), sin) };
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t
        }
        std::net::SocketAddr::V6(v6) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: v6.port().to_be(),
                sin6_flowinfo: v6.flowinfo().to_be(),
                sin6_addr: libc::in6_addr { s6_addr: v6.ip().octets() },
                sin6_scope_id: v6.scope_id(),
            };
            // SAFETY: sockaddr_storage is larger than and aligned for
            // sockaddr_in6.
            unsafe { std::ptr::write((out as *mut libc::sockaddr_storage).cast::<libc::sockaddr_in6>(), sin6) };
            std::mem::size_of::<libc::sockaddr_in6>() as libc::socklen_t
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn send_batch_reaches_v4_and_v6() {
        use std::net::UdpSocket;
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let to = rx.local_addr().unwrap();
        let bufs: Vec<Vec<u8>> = (0..super::SEND_MANY + 3).map(|i| vec![i as u8; 10 + i]).collect();
        let mut b = super::SendBatch::new(256);
        let mut sent = 0;
        for (i, buf) in bufs.iter().enumerate() {
            if b.push(buf, &to) {
                assert_eq!(i + 1, super::SEND_MANY);
                sent += b.send(&tx);
            }
        }
        sent += b.send(&tx);
        assert_eq!(sent, bufs.len());
        let mut got = [0u8; 256];
        for buf in &bufs {
            let (n, from) = rx.recv_from(&mut got).unwrap();
            assert_eq!(&got[..n], &buf[..]);
            assert_eq!(from, tx.local_addr().unwrap());
        }
        if let (Ok(tx6), Ok(rx6)) = (UdpSocket::bind("[::1]:0"), UdpSocket::bind("[::1]:0")) {
            let one = [7u8; 33];
            b.push(&one, &rx6.local_addr().unwrap());
            assert_eq!(b.send(&tx6), 1);
            let (n, _) = rx6.recv_from(&mut got).unwrap();
            assert_eq!(&got[..n], &one[..]);
        }
    }

    #[test]
    fn a_datagram_longer_than_its_slot_is_not_passed_on() {
        use std::net::UdpSocket;
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        tx.send_to(&[1u8; 200], rx.local_addr().unwrap()).unwrap();
        tx.send_to(&[2u8; 100], rx.local_addr().unwrap()).unwrap();
        let mut data = vec![0u8; 2 * 100];
        let (mut lens, mut from) = ([0usize; 2], [None; 2]);
        let mut addrs = super::RecvAddrs::default();
        let mut got = 0;
        for _ in 0..1000 {
            got = super::recv_many(&rx, &mut data, 100, &mut lens, &mut from, &mut addrs);
            if got == 2 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert_eq!(got, 2);
        assert_eq!(from[0], None, "the 200-byte datagram was cut short and must be dropped");
        assert_eq!(from[1], Some(tx.local_addr().unwrap()));
        assert_eq!((lens[1], data[100]), (100, 2));
    }

    #[test]
    fn loopback_is_listed() {
        let v = super::interfaces();
        assert!(v.iter().any(|i| i.loopback && i.addr == std::net::IpAddr::from([127, 0, 0, 1])), "{v:?}");
    }
}
