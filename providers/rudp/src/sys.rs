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

/// `UDP_GRO` (linux/udp.h): the socket option that lets the kernel hand
/// several datagrams of one flow to one receive, and the control message
/// (an int, the segment size) that says so.
const UDP_GRO: libc::c_int = 104;

/// Bytes of one receive slot that can hold a coalesced (GRO) receive: the
/// kernel coalesces up to a UDP length of 65535 (header included).
pub const GRO_SLOT: usize = 65536;

/// Asks the kernel to coalesce received datagrams of one flow (`UDP_GRO`,
/// Linux 5.0 and later); whether it took the option.
pub fn set_gro(sock: &UdpSocket) -> bool {
    let on: libc::c_int = 1;
    // SAFETY: the fd is an open socket owned by `sock`; the option value is
    // a c_int that lives across the call, with its size.
    let r = unsafe { libc::setsockopt(sock.as_raw_fd(), libc::SOL_UDP, UDP_GRO, (&on as *const libc::c_int).cast(), std::mem::size_of::<libc::c_int>() as libc::socklen_t) };
    r == 0
}

/// Control-message room of one received entry: a `UDP_GRO` message
/// (header and an int) needs `CMSG_SPACE(4)`, 24 bytes on 64-bit Linux;
/// u64s keep the buffer aligned for `cmsghdr`.
type RecvCtl = [u64; 8];
// SAFETY: CMSG_SPACE only computes a size from its argument.
const _: () = assert!(unsafe { libc::CMSG_SPACE(std::mem::size_of::<libc::c_int>() as u32) } as usize <= std::mem::size_of::<RecvCtl>());

/// Bytes of a `UDP_GRO` control message: its header and an int.
// SAFETY: CMSG_LEN only computes a size from its argument.
const GRO_CMSG_LEN: usize = unsafe { libc::CMSG_LEN(std::mem::size_of::<libc::c_int>() as u32) } as usize;

/// What `recv_many` keeps between calls: the headers, iovecs, source
/// addresses and control-message buffers of its entries, so that a call
/// (most of them find nothing) neither allocates nor clears 12 KiB of
/// stack. The pointers in `hdrs` and `iovs` are written afresh by every
/// call and mean nothing between calls.
pub struct RecvAddrs {
    addrs: [libc::sockaddr_storage; RECV_MANY],
    ctl: [RecvCtl; RECV_MANY],
    iovs: [libc::iovec; RECV_MANY],
    hdrs: [libc::mmsghdr; RECV_MANY],
}

// SAFETY: the raw pointers in `iovs` and `hdrs` are only read by the
// kernel during a `recv_many` call, which sets them first from its own
// borrows; between calls they are dead values, so moving the struct to
// another thread moves no access.
unsafe impl Send for RecvAddrs {}

impl Default for RecvAddrs {
    fn default() -> Self {
        // SAFETY: sockaddr_storage, iovec and mmsghdr are plain data; all
        // zeroes is a valid value (null pointers, lengths 0).
        unsafe { RecvAddrs { addrs: std::mem::zeroed(), ctl: [[0; 8]; RECV_MANY], iovs: std::mem::zeroed(), hdrs: std::mem::zeroed() } }
    }
}

/// Receives up to `lens.len()` (at most `RECV_MANY`) entries with one
/// `recvmmsg`, entry i into `data[i * slot..(i + 1) * slot]`; their
/// lengths go to `lens` and their sources to `from` (`None` for an entry
/// that did not fit its slot and was cut short). An entry is one datagram,
/// or, on a socket with `set_gro`, several datagrams of one source that the
/// kernel coalesced: then `segs[i]` is their size (all but the last, which
/// may be shorter; see `split`), else 0. Returns how many entries (0 when
/// none is waiting).
pub fn recv_many(sock: &UdpSocket, data: &mut [u8], slot: usize, lens: &mut [usize], from: &mut [Option<std::net::SocketAddr>], segs: &mut [usize], addrs: &mut RecvAddrs) -> usize {
    let n = lens.len().min(from.len()).min(segs.len()).min(RECV_MANY).min(data.len() / slot.max(1));
    if n == 0 {
        return 0;
    }
    let base = data.as_mut_ptr();
    let RecvAddrs { addrs: names, ctl, iovs, hdrs } = addrs;
    for i in 0..n {
        // SAFETY: i * slot + slot <= data.len() (n bounded above), so the
        // pointer stays inside `data`.
        iovs[i] = libc::iovec { iov_base: unsafe { base.add(i * slot) }.cast(), iov_len: slot };
        let h = &mut hdrs[i].msg_hdr;
        h.msg_iov = &mut iovs[i];
        h.msg_iovlen = 1;
        h.msg_name = (&mut names[i] as *mut libc::sockaddr_storage).cast();
        h.msg_namelen = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        h.msg_control = ctl[i].as_mut_ptr().cast();
        h.msg_controllen = std::mem::size_of::<RecvCtl>() as _;
        h.msg_flags = 0;
        hdrs[i].msg_len = 0;
    }
    // SAFETY: the first n headers were just set, each naming one iovec
    // into `data`, one address slot and one control buffer, all live and
    // exclusively borrowed for the call.
    let r = unsafe { libc::recvmmsg(sock.as_raw_fd(), hdrs.as_mut_ptr(), n as libc::c_uint, libc::MSG_DONTWAIT, std::ptr::null_mut()) };
    if r <= 0 {
        return 0;
    }
    let got = r as usize;
    for i in 0..got {
        lens[i] = (hdrs[i].msg_len as usize).min(slot);
        segs[i] = 0;
        if hdrs[i].msg_hdr.msg_flags & libc::MSG_TRUNC != 0 {
            // Longer than a slot: cut short by the kernel, never passed on.
            from[i] = None;
            continue;
        }
        let g = gro_size(&hdrs[i].msg_hdr);
        if g > 0 && g < lens[i] {
            segs[i] = g;
        }
        let len = (hdrs[i].msg_hdr.msg_namelen as usize).min(std::mem::size_of::<libc::sockaddr_storage>());
        // SAFETY: the kernel wrote `len` bytes of address into the slot.
        let raw = unsafe { std::slice::from_raw_parts((&names[i] as *const libc::sockaddr_storage).cast::<u8>(), len) };
        from[i] = crate::sockaddr::from_bytes(raw);
    }
    got
}

/// The segment size of a `UDP_GRO` control message among those `recvmmsg`
/// wrote for `msg`; 0 when there is none.
fn gro_size(msg: &libc::msghdr) -> usize {
    // SAFETY: `msg` was filled by recvmmsg: msg_control points to our
    // buffer, of which msg_controllen bytes are control messages the
    // kernel wrote; CMSG_FIRSTHDR/CMSG_NXTHDR stay within that length.
    let mut c = unsafe { libc::CMSG_FIRSTHDR(msg) };
    while !c.is_null() {
        // SAFETY: `c` is a control message header inside the buffer (above).
        let h = unsafe { &*c };
        if h.cmsg_level == libc::SOL_UDP && h.cmsg_type == UDP_GRO && h.cmsg_len as usize >= GRO_CMSG_LEN {
            // SAFETY: the message is long enough for an int after its
            // header (checked); it may be unaligned, so read it so.
            let v = unsafe { std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<libc::c_int>()) };
            return usize::try_from(v).unwrap_or(0);
        }
        // SAFETY: as for CMSG_FIRSTHDR.
        c = unsafe { libc::CMSG_NXTHDR(msg, c) };
    }
    0
}

/// The datagrams of one received entry of `len` bytes whose segment size
/// is `seg` (0: not coalesced, one datagram): (offset, length) of each,
/// `seg` bytes each but the last, which may be shorter. An empty entry
/// is one empty datagram.
pub fn split(len: usize, seg: usize) -> impl Iterator<Item = (usize, usize)> {
    let (step, count) = if seg == 0 || len == 0 { (len, 1) } else { (seg, len.div_ceil(seg)) };
    (0..count).map(move |k| (k * step, step.min(len - k * step)))
}

/// Datagrams one `sendmmsg` sends, at most.
pub const SEND_MANY: usize = 64;

/// Bytes of one UDP GSO send, at most: under the 65507 of a UDP/IPv4
/// datagram and, with room to spare, what IPv6 takes.
const GSO_MAX_BYTES: usize = 65000;
/// Segments of one UDP GSO send, at most: the kernel's limit has been 64
/// (older kernels count the headers against `64 * segment size`, so a run
/// of 64 full segments could be refused).
const GSO_MAX_SEGS: usize = 63;

/// Whether runs of datagrams of `size` bytes fit one segmentation offload
/// send (at least two of them): not on loopback, whose datagrams are
/// already near the UDP maximum.
pub fn runs_fit(size: usize) -> bool {
    2 * size <= GSO_MAX_BYTES && size <= u16::MAX as usize
}

/// Whether the kernel takes `UDP_SEGMENT` on `sock` (Linux 4.18 and later).
pub fn gso_supported(sock: &UdpSocket) -> bool {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: the fd is an open socket owned by `sock`; the value and its
    // length are locals that live across the call.
    let r = unsafe { libc::getsockopt(sock.as_raw_fd(), libc::SOL_UDP, libc::UDP_SEGMENT, (&mut v as *mut libc::c_int).cast(), &mut len) };
    r == 0
}

/// One `UDP_SEGMENT` control message: the header, then the segment size
/// (a u16) in the data, which starts right after the header on Linux.
#[repr(C)]
struct SegCmsg {
    hdr: libc::cmsghdr,
    data: [u8; 8],
}

/// Bytes of the control message (header and the u16).
// SAFETY: CMSG_LEN only computes a size from its argument.
const SEG_CMSG_LEN: usize = unsafe { libc::CMSG_LEN(2) } as usize;
/// Bytes of the control message, padded as `msg_controllen` counts them.
// SAFETY: CMSG_SPACE only computes a size from its argument.
const SEG_CMSG_SPACE: usize = unsafe { libc::CMSG_SPACE(2) } as usize;
const _: () = assert!(std::mem::offset_of!(SegCmsg, data) == SEG_CMSG_LEN - 2);
const _: () = assert!(SEG_CMSG_SPACE <= std::mem::size_of::<SegCmsg>());

/// Datagrams queued for one `sendmmsg`: copies of their bytes, one slot
/// each, and their destinations. With UDP GSO on, a run of datagrams to
/// the same address, all but the last a full slot (so their bytes follow
/// each other in `data`), goes as one entry that the kernel cuts into
/// slot-size datagrams.
pub struct SendBatch {
    data: Vec<u8>,
    slot: usize,
    lens: [usize; SEND_MANY],
    dests: [std::net::SocketAddr; SEND_MANY],
    names: [libc::sockaddr_storage; SEND_MANY],
    namelens: [libc::socklen_t; SEND_MANY],
    n: usize,
    /// Runs to one address go as one GSO send.
    gso: bool,
    /// The control message of every GSO send (the segment size is the slot).
    cmsg: SegCmsg,
    /// GSO sends the kernel took.
    gso_sends: u64,
    /// Tests: the next GSO send carries a malformed control message, which
    /// the kernel refuses with EINVAL, as it refuses a GSO send it cannot
    /// do (EIO, EINVAL, EMSGSIZE).
    #[cfg(test)]
    spoil_gso: bool,
}

impl SendBatch {
    /// A batch of datagrams of up to `slot` bytes; `gso`: runs of full
    /// datagrams to one address go as one send (the caller checked the
    /// socket with `gso_supported`).
    pub fn new(slot: usize, gso: bool) -> Box<SendBatch> {
        // SAFETY: cmsghdr is plain data; zeroes are valid.
        let mut cmsg = SegCmsg { hdr: unsafe { std::mem::zeroed() }, data: [0; 8] };
        cmsg.hdr.cmsg_len = SEG_CMSG_LEN as _;
        cmsg.hdr.cmsg_level = libc::SOL_UDP;
        cmsg.hdr.cmsg_type = libc::UDP_SEGMENT;
        cmsg.data[..2].copy_from_slice(&(slot.min(u16::MAX as usize) as u16).to_ne_bytes());
        Box::new(SendBatch {
            data: vec![0u8; slot * SEND_MANY],
            slot,
            lens: [0; SEND_MANY],
            dests: [std::net::SocketAddr::from(([0, 0, 0, 0], 0)); SEND_MANY],
            // SAFETY: sockaddr_storage is plain data; zeroes are valid.
            names: unsafe { std::mem::zeroed() },
            namelens: [0; SEND_MANY],
            n: 0,
            // Two full slots must fit one send for a run to form at all.
            gso: gso && runs_fit(slot),
            cmsg,
            gso_sends: 0,
            #[cfg(test)]
            spoil_gso: false,
        })
    }

    /// Whether runs go as GSO sends (off from the start, or since the
    /// kernel refused one).
    pub fn gso(&self) -> bool {
        self.gso
    }

    /// GSO sends the kernel took (each several datagrams).
    pub fn gso_sends(&self) -> u64 {
        self.gso_sends
    }

    /// Queues a copy of `buf` (at most the slot size) for `to`; true when
    /// the batch is now full (`send` it).
    pub fn push(&mut self, buf: &[u8], to: &std::net::SocketAddr) -> bool {
        let i = self.n;
        let len = buf.len().min(self.slot);
        rfabric_core::copy::copy_slice(&mut self.data[i * self.slot..i * self.slot + len], &buf[..len]);
        self.lens[i] = len;
        self.dests[i] = *to;
        self.namelens[i] = write_sockaddr(&mut self.names[i], to);
        self.n += 1;
        self.n == SEND_MANY
    }

    /// The datagrams from `i` on (of the first `n`) that go as one send:
    /// how many, and their bytes. One, unless GSO is on.
    fn run(&self, i: usize, n: usize) -> (usize, usize) {
        let (mut count, mut bytes) = (1, self.lens[i]);
        if !self.gso {
            return (count, bytes);
        }
        while i + count < n
            && count < GSO_MAX_SEGS
            && self.lens[i + count - 1] == self.slot
            && bytes + self.lens[i + count] <= GSO_MAX_BYTES
            && self.dests[i + count] == self.dests[i]
        {
            bytes += self.lens[i + count];
            count += 1;
        }
        (count, bytes)
    }

    /// Sends what is queued with `sendmmsg` and empties the batch. A
    /// datagram the socket does not take (full buffer) is dropped as the
    /// network would drop it; returns how many datagrams were sent (a GSO
    /// send counts each of its datagrams).
    pub fn send(&mut self, sock: &UdpSocket) -> usize {
        let n = self.n;
        self.n = 0;
        let mut from = 0;
        let mut sent = 0;
        // Once more from the datagram of a refused GSO send, one entry
        // per datagram, when the kernel refuses GSO.
        while from < n {
            match self.send_from(sock, from, n, &mut sent) {
                Some(again) => from = again,
                None => break,
            }
        }
        sent
    }

    /// Sends datagrams `from..n`, adding those sent to `sent`. Returns the
    /// first datagram of a GSO send the kernel refused for want of GSO
    /// support (GSO is off now), else `None`.
    fn send_from(&mut self, sock: &UdpSocket, from: usize, n: usize, sent: &mut usize) -> Option<usize> {
        // SAFETY: plain C structs; zeroes are valid (null pointers, lengths 0).
        let mut iovs: [libc::iovec; SEND_MANY] = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let mut hdrs: [libc::mmsghdr; SEND_MANY] = unsafe { std::mem::zeroed() };
        // Entry h sends datagrams first[h]..first[h + 1].
        let mut first = [0usize; SEND_MANY + 1];
        #[cfg(test)]
        let spoil = std::mem::take(&mut self.spoil_gso);
        #[cfg(test)]
        if spoil {
            // One byte longer than a u16 needs: the kernel says EINVAL.
            self.cmsg.hdr.cmsg_len = (SEG_CMSG_LEN + 1) as _;
        }
        let base = self.data.as_mut_ptr();
        let cmsg = (&mut self.cmsg as *mut SegCmsg).cast::<libc::c_void>();
        let mut nh = 0;
        let mut i = from;
        while i < n {
            let (count, bytes) = self.run(i, n);
            // SAFETY: i < SEND_MANY and the run's datagrams are consecutive
            // slots (all but the last full), so the span lies inside `data`.
            iovs[nh] = libc::iovec { iov_base: unsafe { base.add(i * self.slot) }.cast(), iov_len: bytes };
            let h = &mut hdrs[nh].msg_hdr;
            h.msg_iov = &mut iovs[nh];
            h.msg_iovlen = 1;
            h.msg_name = (&mut self.names[i] as *mut libc::sockaddr_storage).cast();
            h.msg_namelen = self.namelens[i];
            if count > 1 {
                h.msg_control = cmsg;
                h.msg_controllen = SEG_CMSG_SPACE as _;
            }
            first[nh] = i;
            nh += 1;
            i += count;
        }
        first[nh] = n;
        let mut done = 0;
        let mut again = None;
        while done < nh {
            // SAFETY: headers done..nh name live iovecs into this batch's
            // own data, its address slots and its control message; the
            // kernel only reads them.
            let r = unsafe { libc::sendmmsg(sock.as_raw_fd(), hdrs[done..].as_mut_ptr(), (nh - done) as libc::c_uint, libc::MSG_DONTWAIT) };
            if r > 0 {
                for h in done..done + r as usize {
                    *sent += first[h + 1] - first[h];
                    if first[h + 1] - first[h] > 1 {
                        self.gso_sends += 1;
                    }
                }
                done += r as usize;
                continue;
            }
            let err = if r < 0 { std::io::Error::last_os_error().raw_os_error() } else { None };
            // EAGAIN (full socket buffer): the rest is dropped.
            if err == Some(libc::EAGAIN) {
                break;
            }
            let gso_refused = matches!(err, Some(libc::EIO | libc::EINVAL | libc::ENOPROTOOPT | libc::EMSGSIZE));
            if first[done + 1] - first[done] > 1 && gso_refused {
                // No checksum offload (EIO), a segment over the path's MTU
                // (EINVAL, EMSGSIZE), no GSO at all (ENOPROTOOPT): one
                // datagram per entry from now on, this run included.
                self.gso = false;
                rfabric_core::fi_warn!(
                    crate::provider::NAME,
                    rfabric_core::abi::FI_LOG_EP_DATA,
                    "UDP GSO send to {} refused ({}); sending one datagram per entry from now on",
                    self.dests[first[done]],
                    std::io::Error::from_raw_os_error(err.unwrap_or(0))
                );
                again = Some(first[done]);
                break;
            }
            // An error of the first entry (e.g. an unreachable address):
            // its datagrams are dropped.
            done += 1;
        }
        #[cfg(test)]
        if spoil {
            self.cmsg.hdr.cmsg_len = SEG_CMSG_LEN as _;
        }
        again
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
        let mut b = super::SendBatch::new(256, super::gso_supported(&tx));
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

    /// A socket on `ip` that waits at most 5 s for a datagram.
    fn sock(ip: &str) -> Option<std::net::UdpSocket> {
        let s = std::net::UdpSocket::bind((ip, 0)).ok()?;
        s.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
        super::set_sockbufs(&s, 4 << 20);
        Some(s)
    }

    /// Datagram `i` of a test: `len` bytes, each depending on `i` and its
    /// place.
    fn dgram(i: usize, len: usize) -> Vec<u8> {
        (0..len).map(|k| (i * 7 + k) as u8).collect()
    }

    /// Receives `want` on `rx`, one datagram each, in order.
    fn expect(rx: &std::net::UdpSocket, want: &[Vec<u8>]) {
        let mut got = vec![0u8; 65536];
        for (i, w) in want.iter().enumerate() {
            let n = rx.recv(&mut got).unwrap_or_else(|e| panic!("datagram {i} of {}: {e}", want.len()));
            assert_eq!(n, w.len(), "length of datagram {i}");
            assert!(got[..n] == w[..], "bytes of datagram {i}");
        }
        rx.set_nonblocking(true).unwrap();
        assert!(rx.recv(&mut got).is_err(), "no more datagrams");
        rx.set_nonblocking(false).unwrap();
    }

    /// Ten full datagrams and a short one to one address, on `ip` (v4 or
    /// v6): with GSO on, one send, received as eleven datagrams.
    fn run_to_one(ip: &str, gso: bool) {
        let (Some(tx), Some(rx)) = (sock(ip), sock(ip)) else { return };
        let to = rx.local_addr().unwrap();
        let supported = super::gso_supported(&tx);
        assert!(supported, "Linux has had UDP_SEGMENT since 4.18");
        let mut b = super::SendBatch::new(1200, gso && supported);
        assert_eq!(b.gso(), gso);
        let want: Vec<Vec<u8>> = (0..11).map(|i| dgram(i, if i < 10 { 1200 } else { 300 })).collect();
        for w in &want {
            assert!(!b.push(w, &to));
        }
        assert_eq!(b.send(&tx), 11, "datagrams, not sends, are counted");
        assert_eq!(b.gso_sends(), u64::from(gso));
        expect(&rx, &want);
    }

    #[test]
    fn a_gso_run_arrives_as_separate_datagrams() {
        run_to_one("127.0.0.1", true);
        run_to_one("::1", true);
    }

    #[test]
    fn without_gso_a_run_goes_one_datagram_each() {
        run_to_one("127.0.0.1", false);
        run_to_one("::1", false);
    }

    /// Runs to two addresses, interleaved: a run ends at another address
    /// and after a short datagram.
    fn interleaved(ip: &str, gso: bool) {
        let (Some(tx), Some(ra), Some(rb)) = (sock(ip), sock(ip), sock(ip)) else { return };
        let (a, b) = (ra.local_addr().unwrap(), rb.local_addr().unwrap());
        let plan: [(std::net::SocketAddr, usize); 11] =
            [(a, 1000), (a, 1000), (a, 1000), (b, 1000), (b, 1000), (a, 10), (a, 1000), (a, 1000), (b, 999), (b, 1000), (a, 1000)];
        let mut batch = super::SendBatch::new(1000, gso && super::gso_supported(&tx));
        let (mut to_a, mut to_b) = (Vec::new(), Vec::new());
        for (i, &(to, len)) in plan.iter().enumerate() {
            let d = dgram(i, len);
            batch.push(&d, &to);
            if to == a { to_a.push(d) } else { to_b.push(d) }
        }
        assert_eq!(batch.send(&tx), plan.len());
        // Runs: a a a | b b | a(10) | a a | b(999) | b | a.
        assert_eq!(batch.gso_sends(), if gso { 3 } else { 0 });
        expect(&ra, &to_a);
        expect(&rb, &to_b);
    }

    #[test]
    fn runs_end_at_another_address_and_after_a_short_datagram() {
        interleaved("127.0.0.1", true);
        interleaved("::1", true);
        interleaved("127.0.0.1", false);
        interleaved("::1", false);
    }

    #[test]
    fn a_full_batch_of_runs_stays_under_the_gso_limits() {
        for (slot, runs) in [(1200, 2), (500, 1), (30000, 32), (40000, 0)] {
            let (Some(tx), Some(rx)) = (sock("127.0.0.1"), sock("127.0.0.1")) else { return };
            let to = rx.local_addr().unwrap();
            let mut b = super::SendBatch::new(slot, true);
            let want: Vec<Vec<u8>> = (0..super::SEND_MANY).map(|i| dgram(i, slot)).collect();
            for (i, w) in want.iter().enumerate() {
                assert_eq!(b.push(w, &to), i + 1 == super::SEND_MANY);
            }
            assert_eq!(b.send(&tx), super::SEND_MANY, "slot {slot}");
            // 65000 bytes of 1200: runs of 54 and 10; 63 segments of 500,
            // then one datagram alone; 30000 in pairs; two slots of 40000
            // are over 65000 (GSO is off for them).
            assert_eq!((b.gso_sends(), b.gso()), (runs, slot < 40000), "slot {slot}");
            expect(&rx, &want);
        }
    }

    #[test]
    fn a_refused_gso_send_goes_again_one_datagram_each_and_gso_stays_off() {
        for ip in ["127.0.0.1", "::1"] {
            let (Some(tx), Some(ra), Some(rb)) = (sock(ip), sock(ip), sock(ip)) else { return };
            let (a, b) = (ra.local_addr().unwrap(), rb.local_addr().unwrap());
            let mut batch = super::SendBatch::new(1200, true);
            batch.spoil_gso = true;
            // A datagram before the run goes; the run is refused, and goes
            // again from its first datagram with what follows it.
            let plan: [(std::net::SocketAddr, usize); 6] = [(b, 100), (a, 1200), (a, 1200), (a, 1200), (a, 7), (b, 1200)];
            let (mut to_a, mut to_b) = (Vec::new(), Vec::new());
            for (i, &(to, len)) in plan.iter().enumerate() {
                let d = dgram(i, len);
                batch.push(&d, &to);
                if to == a { to_a.push(d) } else { to_b.push(d) }
            }
            assert_eq!(batch.send(&tx), plan.len(), "{ip}");
            assert_eq!((batch.gso(), batch.gso_sends()), (false, 0), "{ip}");
            expect(&ra, &to_a);
            expect(&rb, &to_b);
            // And later runs go one datagram each.
            for w in &to_a {
                batch.push(w, &a);
            }
            assert_eq!(batch.send(&tx), to_a.len());
            assert_eq!(batch.gso_sends(), 0);
            expect(&ra, &to_a);
        }
    }

    #[test]
    fn a_socket_without_udp_checksums_falls_back_from_gso() {
        // SO_NO_CHECK: UDP/IPv4 datagrams without a checksum, which GSO
        // does not do: the kernel refuses the GSO send (EINVAL).
        const SO_NO_CHECK: libc::c_int = 11;
        let (Some(tx), Some(rx)) = (sock("127.0.0.1"), sock("127.0.0.1")) else { return };
        let one: libc::c_int = 1;
        // SAFETY: an open socket; a c_int option value with its size.
        let r = unsafe {
            libc::setsockopt(
                std::os::fd::AsRawFd::as_raw_fd(&tx),
                libc::SOL_SOCKET,
                SO_NO_CHECK,
                (&one as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        assert_eq!(r, 0);
        let to = rx.local_addr().unwrap();
        let mut b = super::SendBatch::new(1200, true);
        let want: Vec<Vec<u8>> = (0..5).map(|i| dgram(i, 1200)).collect();
        for w in &want {
            b.push(w, &to);
        }
        assert_eq!(b.send(&tx), want.len());
        expect(&rx, &want);
        assert_eq!((b.gso(), b.gso_sends()), (false, 0), "the kernel took a GSO send without checksums");
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
            got = super::recv_many(&rx, &mut data, 100, &mut lens, &mut from, &mut [0; 2], &mut addrs);
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
    fn a_coalesced_entry_splits_into_its_datagrams() {
        let all = |len, seg| super::split(len, seg).collect::<Vec<_>>();
        assert_eq!(all(3600, 1200), [(0, 1200), (1200, 1200), (2400, 1200)]);
        assert_eq!(all(3700, 1200), [(0, 1200), (1200, 1200), (2400, 1200), (3600, 100)]);
        assert_eq!(all(2401, 1200), [(0, 1200), (1200, 1200), (2400, 1)]);
        assert_eq!(all(500, 0), [(0, 500)]);
        assert_eq!(all(0, 0), [(0, 0)], "an empty datagram is still one");
        // On a synthetic buffer: every piece is the datagram that was cut.
        let want: Vec<Vec<u8>> = (0..5).map(|i| dgram(i, if i < 4 { 1000 } else { 37 })).collect();
        let buf = want.concat();
        let got: Vec<&[u8]> = super::split(buf.len(), 1000).map(|(o, n)| &buf[o..o + n]).collect();
        assert_eq!(got, want.iter().map(|w| &w[..]).collect::<Vec<_>>());
    }

    /// Datagrams from `tx` (GSO runs, small ones, a full one alone) and one
    /// from `other` to `rx`, through `recv_many`: each arrives whole, in
    /// order, from its source, coalesced (`gro`) or not. Returns the
    /// entries that held several datagrams.
    fn gso_to(ip: &str, gro: bool) -> Option<usize> {
        let (Some(tx), Some(other), Some(rx)) = (sock(ip), sock(ip), sock(ip)) else { return None };
        let to = rx.local_addr().unwrap();
        if gro {
            assert!(super::set_gro(&rx), "Linux has had UDP_GRO since 5.0");
        }
        let mut b = super::SendBatch::new(1200, super::gso_supported(&tx));
        assert!(b.gso());
        let lens = [[1200; 10].as_slice(), &[50], &[1200; 5], &[300], &[20], &[1200; 40], &[7], &[1200]].concat();
        let want: Vec<Vec<u8>> = lens.iter().enumerate().map(|(i, &n)| dgram(i, n)).collect();
        for w in &want {
            b.push(w, &to);
        }
        assert_eq!(b.send(&tx), want.len());
        assert!(b.gso_sends() >= 3);
        other.send_to(&[9u8; 40], to).unwrap();
        let slot = if gro { super::GRO_SLOT } else { 1200 };
        let mut data = vec![0u8; 16 * slot];
        let (mut lens, mut from, mut segs) = ([0usize; 16], [None; 16], [0usize; 16]);
        let mut addrs = Box::<super::RecvAddrs>::default();
        let (mut mine, mut others, mut coalesced) = (Vec::new(), Vec::new(), 0);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while mine.len() < want.len() || others.is_empty() {
            assert!(std::time::Instant::now() < deadline, "{ip}: {} of {} datagrams, {} others", mine.len(), want.len(), others.len());
            let got = super::recv_many(&rx, &mut data, slot, &mut lens, &mut from, &mut segs, &mut addrs);
            if got == 0 {
                super::wait_readable(std::os::fd::AsRawFd::as_raw_fd(&rx), 10);
            }
            for k in 0..got {
                assert!(gro || segs[k] == 0, "coalesced without UDP_GRO");
                coalesced += usize::from(segs[k] > 0);
                for (o, n) in super::split(lens[k], segs[k]) {
                    let d = data[k * slot + o..k * slot + o + n].to_vec();
                    match from[k] {
                        Some(f) if f == tx.local_addr().unwrap() => mine.push(d),
                        Some(f) if f == other.local_addr().unwrap() => others.push(d),
                        f => panic!("a datagram from {f:?}"),
                    }
                }
            }
        }
        for (i, (g, w)) in mine.iter().zip(&want).enumerate() {
            assert_eq!(g.len(), w.len(), "{ip}: length of datagram {i}");
            assert!(g == w, "{ip}: bytes of datagram {i}");
        }
        assert_eq!(mine.len(), want.len());
        assert_eq!(others, [vec![9u8; 40]]);
        Some(coalesced)
    }

    #[test]
    fn gso_runs_arrive_whole_with_gro_on_and_off() {
        for ip in ["127.0.0.1", "::1"] {
            let Some(c) = gso_to(ip, true) else { continue };
            // Loopback hands a GSO send to a UDP_GRO socket whole.
            assert!(c > 0, "{ip}: no receive was coalesced");
            assert_eq!(gso_to(ip, false), Some(0));
        }
    }

    #[test]
    fn loopback_is_listed() {
        let v = super::interfaces();
        assert!(v.iter().any(|i| i.loopback && i.addr == std::net::IpAddr::from([127, 0, 0, 1])), "{v:?}");
    }
}
