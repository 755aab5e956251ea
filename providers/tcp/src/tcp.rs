//! The TCP implementation of the connected transport (`crate::conn`):
//! non-blocking sockets with `TCP_NODELAY`, bound to one interface
//! address (listener and outgoing connections alike), IPv4 or IPv6.
//! A message is framed on the stream as a 4-byte little-endian length and
//! the bytes; a length beyond `max_msg` breaks the connection (`FI_EIO`).

#![forbid(unsafe_code)]

use crate::conn::{Conn, Msg, Transport};
use crate::sys;
use rfabric_core::abi::*;
use rfabric_core::error::{Error, Result, EINVAL};
use rfabric_rudp::device::Placement;
use rfabric_rudp::sockaddr;
use std::io::{ErrorKind, IoSlice};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, RawFd};

/// Bytes of the length in front of each message.
pub const FRAME_HDR: usize = 4;
/// Bytes asked of the socket per read, at least.
const READ_CHUNK: usize = 256 << 10;
/// Bytes asked of the socket by the read after a message read in place:
/// the next message's start, so that the rest of a large one can go in
/// place as well rather than through this connection's buffer.
const PEEK_READ: usize = 16 << 10;
/// Payload of the first packet of a medium message over `LEAD_ABOVE`
/// bytes (`EngineConfig::lead`): with its headers and the next packet's
/// it fits one `PEEK_READ`, so little of the next packet is read before
/// its place is known.
pub const LEAD: usize = PEEK_READ / 2;
/// Medium messages up to this size go whole in one packet: one copy out
/// of the connection's buffer costs less than a second packet.
pub const LEAD_ABOVE: usize = 32 << 10;
/// Frames up to this size are copied together and written in one piece
/// rather than written from their parts: 8 KiB of payload and its headers
/// (69 bytes on the RDM device). 8 KiB ping-pongs on loopback were 2-3%
/// faster copied whole than written from their parts (four sets of 10-30
/// alternating rounds); 12 KiB streams were 2.5% slower, so larger frames
/// are not copied.
const SMALL_FRAME: usize = 8192 + 256;
/// Largest message `send_kind_after` frames together with a packet.
const FIRST_MAX: usize = 16;

/// A listening TCP socket on one interface address.
pub struct TcpTransport {
    listener: TcpListener,
    local: SocketAddr,
    raw: Vec<u8>,
    max_msg: usize,
}

impl TcpTransport {
    /// Listens on `bind` (port 0: any); messages up to `max_msg` bytes.
    pub fn bind(bind: SocketAddr, max_msg: usize) -> Result<TcpTransport> {
        let listener = TcpListener::bind(bind).map_err(|e| sys::fi_err(e.raw_os_error().unwrap_or(libc::EIO)))?;
        listener.set_nonblocking(true).map_err(|_| Error(FI_EIO))?;
        let mut local = listener.local_addr().map_err(|_| Error(FI_EIO))?;
        if let (SocketAddr::V6(l), SocketAddr::V6(b)) = (&mut local, &bind) {
            l.set_scope_id(b.scope_id());
        }
        Ok(TcpTransport { listener, raw: sockaddr::to_bytes(&local), local, max_msg })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    fn wrap(&self, s: TcpStream, connecting: bool) -> Result<TcpConn> {
        s.set_nonblocking(true).map_err(|_| Error(FI_EIO))?;
        let _ = s.set_nodelay(true);
        Ok(TcpConn::new(s, connecting, self.max_msg))
    }
}

impl Transport for TcpTransport {
    type Conn = TcpConn;

    fn addr(&self) -> &[u8] {
        &self.raw
    }

    fn valid_addr(&self, addr: &[u8]) -> bool {
        let want = if self.local.is_ipv6() { sockaddr::SIN6_LEN } else { sockaddr::SIN_LEN };
        addr.len() == want && sockaddr::from_bytes(addr).is_some_and(|a| a.is_ipv6() == self.local.is_ipv6())
    }

    fn max_msg(&self) -> usize {
        self.max_msg
    }

    fn connect(&mut self, addr: &[u8]) -> Result<TcpConn> {
        if !self.valid_addr(addr) {
            return Err(EINVAL);
        }
        let s = sys::connect_from(&SocketAddr::new(self.local.ip(), 0), addr)?;
        self.wrap(s, true)
    }

    fn accept(&mut self) -> Result<Option<TcpConn>> {
        match self.listener.accept() {
            Ok((s, _)) => self.wrap(s, false).map(Some),
            Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::Interrupted => Ok(None),
            // A connection reset before it was accepted, or out of
            // descriptors: nothing to hand out now.
            Err(e) => match e.raw_os_error() {
                Some(libc::ECONNABORTED) | Some(libc::EPROTO) => Ok(None),
                Some(c) => Err(sys::fi_err(c)),
                None => Err(Error(FI_EIO)),
            },
        }
    }

    fn fd(&self) -> RawFd {
        self.listener.as_raw_fd()
    }
}

/// One TCP connection carrying length-prefixed messages.
pub struct TcpConn {
    s: TcpStream,
    connecting: bool,
    /// Bytes queued to send: `tx[tx_head..]`.
    tx: Vec<u8>,
    tx_head: usize,
    /// Bytes read: `rx[rx_start..rx_end]`.
    rx: Vec<u8>,
    rx_start: usize,
    rx_end: usize,
    /// Bytes of the message last returned, dropped at the next `recv`.
    consume: usize,
    max_msg: usize,
    /// The last read took less than it had room for (the socket had no
    /// more then) and completed a message: the next `recv` that finds no
    /// whole message answers `None` without another read, which would only
    /// say `EAGAIN`. Bytes that arrive later turn the descriptor readable.
    drained: bool,
    /// A message being read in place (`recv_placed`).
    placing: Option<Placing>,
    /// The last message was read in place: the next read asks for
    /// `PEEK_READ` bytes only.
    peek_next: bool,
}

/// A message whose rest is read in place: `len` bytes, of which the first
/// `head` wait in the buffer at `rx_start + FRAME_HDR` and `done` of the
/// rest are in place.
#[derive(Clone, Copy)]
struct Placing {
    len: usize,
    head: usize,
    done: usize,
    /// The socket had nothing more at the last read: the next round asks
    /// `poll` first (see `place_rest`).
    starved: bool,
}

/// How far `TcpConn::place_rest` got.
enum Rest {
    /// The socket has no more now.
    Waiting,
    /// All in place: the message's first `head` bytes wait in the
    /// buffer, the `len` after them are in place.
    Placed { head: usize, len: usize },
    /// Its place went away midway: the rest was read and dropped.
    Dropped,
}

fn io_err(e: &std::io::Error) -> Error {
    match e.kind() {
        ErrorKind::UnexpectedEof => Error(FI_ESHUTDOWN),
        _ => sys::fi_err(e.raw_os_error().unwrap_or(libc::ECONNRESET)),
    }
}

impl TcpConn {
    /// Writes queued bytes; Ok even when the socket takes none.
    fn write_queued(&mut self) -> Result<()> {
        while self.tx_head < self.tx.len() {
            match sys::send(self.s.as_raw_fd(), &self.tx[self.tx_head..]) {
                Ok(0) => return Err(Error(FI_ECONNRESET)),
                Ok(n) => self.tx_head += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(io_err(&e)),
            }
        }
        if self.tx_head == self.tx.len() {
            self.tx.clear();
            self.tx_head = 0;
        } else if self.tx_head > (1 << 20) && self.tx_head * 2 > self.tx.len() {
            self.tx.drain(..self.tx_head);
            self.tx_head = 0;
        }
        Ok(())
    }

    /// Whether a message of `len` bytes is framed in the send queue and
    /// written from there in one piece: nothing waits and it is small. A
    /// writev of four parts cost about 0.2 µs more one-way than one send
    /// of the same 73 bytes on loopback; a copy of up to 8 KiB costs less.
    fn frames_whole(&self, len: usize) -> bool {
        self.tx_head == self.tx.len() && !self.connecting && FRAME_HDR + len <= SMALL_FRAME
    }

    /// Frames `lead`, `head` and `rest` in the (empty) send queue, after
    /// `framed` (whole frames already), and writes them (`frames_whole`).
    fn write_whole(&mut self, framed: &[u8], lead: &[u8], head: &[u8], rest: &[&[u8]]) -> Result<()> {
        self.tx.clear();
        self.tx.extend_from_slice(framed);
        self.tx.extend_from_slice(lead);
        self.tx.extend_from_slice(head);
        for p in rest {
            rfabric_core::copy::extend_vec(&mut self.tx, p);
        }
        self.tx_head = 0;
        self.write_queued()
    }

    /// `Conn::send` of `parts`, after `framed` (whole frames already, such
    /// as an acknowledgement that rides with the message), both in one
    /// system call when nothing waits to be written.
    fn send_after(&mut self, framed: &[u8], parts: &[&[u8]]) -> Result<()> {
        let len: usize = parts.iter().map(|p| p.len()).sum();
        if len > self.max_msg {
            return Err(EINVAL);
        }
        let hdr = (len as u32).to_le_bytes();
        if self.frames_whole(framed.len() + len) {
            return self.write_whole(framed, &hdr, &[], parts);
        }
        let mut done = 0;
        if self.tx_head == self.tx.len() && !self.connecting {
            // Nothing waits: straight to the socket, in one writev.
            let mut io: [IoSlice<'_>; 10] = [IoSlice::new(&[]); 10];
            let hdr_at = usize::from(!framed.is_empty());
            let n = hdr_at + 1 + parts.len();
            if n <= io.len() {
                io[0] = IoSlice::new(framed);
                io[hdr_at] = IoSlice::new(&hdr);
                for (i, p) in parts.iter().enumerate() {
                    io[hdr_at + 1 + i] = IoSlice::new(p);
                }
                loop {
                    match sys::send_vectored(self.s.as_raw_fd(), &io[..n]) {
                        Ok(k) => done = k,
                        Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                        Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                        Err(e) => return Err(io_err(&e)),
                    }
                    break;
                }
            }
        }
        // Queue what did not go.
        let mut skip = done;
        for p in [framed, &hdr[..]].into_iter().chain(parts.iter().copied()) {
            if skip >= p.len() {
                skip -= p.len();
                continue;
            }
            self.tx.extend_from_slice(&p[skip..]);
            skip = 0;
        }
        Ok(())
    }

    /// Reads what the socket has, into room after `rx_end`.
    fn fill(&mut self) -> Result<bool> {
        if self.rx_start == self.rx_end {
            self.rx_start = 0;
            self.rx_end = 0;
        }
        // Room for the message whose start is buffered (up to `max_msg`:
        // a connection that carries only small ones keeps a small buffer),
        // and at least READ_CHUNK more.
        let whole = match self.rx[self.rx_start..self.rx_end].first_chunk::<FRAME_HDR>() {
            Some(h) => FRAME_HDR + (u32::from_le_bytes(*h) as usize).min(self.max_msg),
            None => 0,
        };
        if self.rx.len() - self.rx_end < READ_CHUNK || self.rx.len() - self.rx_start < whole {
            if self.rx_start > 0 {
                self.rx.copy_within(self.rx_start..self.rx_end, 0);
                self.rx_end -= self.rx_start;
                self.rx_start = 0;
            }
            let want = (self.rx_end + READ_CHUNK).max(whole);
            if self.rx.len() < want {
                self.rx.resize(want, 0);
            }
        }
        let mut room = self.rx.len() - self.rx_end;
        if std::mem::take(&mut self.peek_next) {
            room = room.min(PEEK_READ);
        }
        loop {
            match sys::recv_errno(self.s.as_raw_fd(), &mut self.rx[self.rx_end..self.rx_end + room]) {
                Ok(0) => return Err(Error(FI_ESHUTDOWN)),
                Ok(n) => {
                    self.rx_end += n;
                    self.drained = n < room;
                    return Ok(true);
                }
                Err(libc::EAGAIN) => return Ok(false),
                Err(libc::EINTR) => continue,
                Err(e) => return Err(sys::fi_err(e)),
            }
        }
    }

    /// The length of the whole message at `at`, if it is there.
    fn complete_at(&self, at: usize) -> Result<Option<usize>> {
        let have = self.rx_end - at;
        if have < FRAME_HDR {
            return Ok(None);
        }
        let h: [u8; 4] = self.rx[at..at + FRAME_HDR].try_into().map_err(|_| Error(FI_EIO))?;
        let len = u32::from_le_bytes(h) as usize;
        if len > self.max_msg {
            return Err(Error(FI_EIO));
        }
        Ok((have >= FRAME_HDR + len).then_some(len))
    }

    fn complete(&self) -> Result<Option<usize>> {
        self.complete_at(self.rx_start)
    }

    /// The length of the message at `rx_start` when its header is
    /// buffered and it has at least `min` bytes (and at most `max_msg`).
    fn large_at_start(&self, min: usize) -> Option<usize> {
        let h = self.rx[self.rx_start..self.rx_end].first_chunk::<FRAME_HDR>()?;
        let len = u32::from_le_bytes(*h) as usize;
        (len >= min && len <= self.max_msg).then_some(len)
    }

    /// Reads the rest of the `len`-byte message at `rx_start`, and nothing
    /// after it, straight into place; its length once it is whole.
    fn fill_message(&mut self, len: usize) -> Result<Option<usize>> {
        let end = self.rx_start + FRAME_HDR + len;
        if self.rx.len() < end {
            self.rx.resize(end, 0);
        }
        while self.rx_end < end {
            match sys::recv(self.s.as_raw_fd(), &mut self.rx[self.rx_end..end]) {
                Ok(0) => return Err(Error(FI_ESHUTDOWN)),
                Ok(n) => self.rx_end += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(None),
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(io_err(&e)),
            }
        }
        self.drained = false;
        Ok(Some(len))
    }

    /// Reads the rest of the message being placed into its place (asked of
    /// `place` again first), or, when the place went away, reads and drops it.
    fn place_rest<'p>(&mut self, place: &mut dyn FnMut(&[u8], usize) -> Option<Placement<'p>>) -> Result<Rest> {
        let Some(Placing { len, head, mut done, starved }) = self.placing else { return Ok(Rest::Dropped) };
        let at = self.rx_start + FRAME_HDR;
        let rest = len - head;
        let pl = place(&self.rx[at..at + head], rest).filter(|p| p.len() == rest);
        if pl.is_none() && self.rx.len() < at + head + READ_CHUNK {
            self.rx.resize(at + head + READ_CHUNK, 0);
        }
        // Waiting for the rest of a large message, ask whether bytes came
        // without taking the socket's lock, as a failed read would: while
        // the reader holds it, arriving segments wait in the socket's
        // backlog for the reader to process. 2 and 4 MiB streams (window
        // 16, loopback, 1 GiB rounds) moved 7-10% more this way.
        if starved && done < rest && !sys::readable(self.s.as_raw_fd()) {
            return Ok(Rest::Waiting);
        }
        while done < rest {
            let r = match &pl {
                Some(pl) => pl.read_from(self.s.as_raw_fd(), done),
                None => {
                    let n = (rest - done).min(self.rx.len() - at - head);
                    sys::recv(self.s.as_raw_fd(), &mut self.rx[at + head..at + head + n])
                }
            };
            match r {
                Ok(0) => return Err(Error(FI_ESHUTDOWN)),
                Ok(n) => done += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    self.placing = Some(Placing { len, head, done, starved: true });
                    return Ok(Rest::Waiting);
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(io_err(&e)),
            }
        }
        self.placing = None;
        self.drained = false;
        self.peek_next = true;
        self.consume = FRAME_HDR + head;
        Ok(if pl.is_some() { Rest::Placed { head, len: rest } } else { Rest::Dropped })
    }

    /// The message `place_rest` just finished placing.
    fn placed(&self, head: usize, len: usize) -> Msg<'_> {
        let at = self.rx_start + FRAME_HDR;
        Msg::Placed { head: &self.rx[at..at + head], len }
    }

    /// Hands the buffer holding the whole `len`-byte message at `rx_start`
    /// (the last bytes buffered) over, and goes on with one of `spare`.
    fn hand_over(&mut self, len: usize, spare: &mut Vec<Vec<u8>>) -> Msg<'_> {
        let off = self.rx_start + FRAME_HDR;
        debug_assert_eq!(off + len, self.rx_end);
        let buf = std::mem::replace(&mut self.rx, spare.pop().unwrap_or_default());
        self.rx_start = 0;
        self.rx_end = 0;
        Msg::Owned { buf, off, len }
    }
}

impl TcpConn {
    fn new(s: TcpStream, connecting: bool, max_msg: usize) -> TcpConn {
        TcpConn { s, connecting, tx: Vec::new(), tx_head: 0, rx: Vec::new(), rx_start: 0, rx_end: 0, consume: 0, max_msg, drained: false, placing: None, peek_next: false }
    }

    /// A connection from `local`'s address (any port) to `to`, made without
    /// a listener (an `FI_EP_MSG` endpoint's `fi_connect`); `to` is a
    /// sockaddr of `local`'s family.
    pub fn connect_from(local: &SocketAddr, to: &[u8], max_msg: usize) -> Result<TcpConn> {
        let s = sys::connect_from(local, to)?;
        let _ = s.set_nodelay(true);
        Ok(TcpConn::new(s, true, max_msg))
    }
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.s.local_addr().ok()
    }
    pub fn peer_addr(&self) -> Option<SocketAddr> {
        self.s.peer_addr().ok()
    }
}

impl Conn for TcpConn {
    fn send(&mut self, parts: &[&[u8]]) -> Result<()> {
        self.send_after(&[], parts)
    }

    fn send_kind(&mut self, kind: u8, head: &[u8], rest: &[&[u8]]) -> Result<()> {
        if rest.len() > 6 {
            return Err(EINVAL);
        }
        let len = 1 + head.len() + rest.iter().map(|p| p.len()).sum::<usize>();
        if len <= self.max_msg && self.frames_whole(len) {
            // The length and the kind stored together.
            let h = (len as u32).to_le_bytes();
            return self.write_whole(&[], &[h[0], h[1], h[2], h[3], kind], head, rest);
        }
        crate::conn::with_kind_parts(kind, head, rest, |parts| self.send(parts))
    }

    fn send_kind_after(&mut self, first: &[u8], kind: u8, head: &[u8], rest: &[&[u8]]) -> Result<()> {
        let len = 1 + head.len() + rest.iter().map(|p| p.len()).sum::<usize>();
        if first.len() > FIRST_MAX || len > self.max_msg || rest.len() > 6 {
            self.send(&[first])?;
            return self.send_kind(kind, head, rest);
        }
        // Both in one write: one segment, one system call.
        let mut framed = [0u8; FRAME_HDR + FIRST_MAX];
        framed[..FRAME_HDR].copy_from_slice(&(first.len() as u32).to_le_bytes());
        framed[FRAME_HDR..FRAME_HDR + first.len()].copy_from_slice(first);
        let framed = &framed[..FRAME_HDR + first.len()];
        if self.frames_whole(framed.len() + len) {
            let h = (len as u32).to_le_bytes();
            return self.write_whole(framed, &[h[0], h[1], h[2], h[3], kind], head, rest);
        }
        crate::conn::with_kind_parts(kind, head, rest, |parts| self.send_after(framed, parts))
    }

    fn flush(&mut self) -> Result<usize> {
        if self.connecting && !self.established()? {
            return Ok(self.queued());
        }
        self.write_queued()?;
        Ok(self.queued())
    }

    fn queued(&self) -> usize {
        self.tx.len() - self.tx_head
    }

    fn recv(&mut self) -> Result<Option<&[u8]>> {
        self.rx_start += self.consume;
        self.consume = 0;
        if self.connecting && !self.established()? {
            return Ok(None);
        }
        let len = match self.complete()? {
            Some(l) => l,
            None => {
                if std::mem::take(&mut self.drained) {
                    return Ok(None);
                }
                if !self.fill()? {
                    return Ok(None);
                }
                match self.complete()? {
                    Some(l) => l,
                    None => {
                        // Part of a message: read again as soon as asked.
                        self.drained = false;
                        return Ok(None);
                    }
                }
            }
        };
        let at = self.rx_start + FRAME_HDR;
        self.consume = FRAME_HDR + len;
        Ok(Some(&self.rx[at..at + len]))
    }

    fn recv_msg(&mut self, min: usize, whole_min: usize, spare: &mut Vec<Vec<u8>>) -> Result<Option<Msg<'_>>> {
        self.recv_placed(min, whole_min, spare, 0, &mut |_, _| None)
    }

    fn recv_placed<'p>(&mut self, min: usize, whole_min: usize, spare: &mut Vec<Vec<u8>>, head: usize, place: &mut dyn FnMut(&[u8], usize) -> Option<Placement<'p>>) -> Result<Option<Msg<'_>>> {
        self.rx_start += self.consume;
        self.consume = 0;
        if self.placing.is_some() {
            match self.place_rest(place)? {
                Rest::Waiting => return Ok(None),
                Rest::Placed { head, len } => return Ok(Some(self.placed(head, len))),
                Rest::Dropped => {
                    self.rx_start += self.consume;
                    self.consume = 0;
                }
            }
        }
        if self.connecting && !self.established()? {
            return Ok(None);
        }
        let mut len = self.complete()?;
        if len.is_none() && self.large_at_start(min).is_none() {
            // As `recv`: read what the socket has.
            if std::mem::take(&mut self.drained) || !self.fill()? {
                return Ok(None);
            }
            len = self.complete()?;
        }
        if len.is_none() {
            let Some(l) = self.large_at_start(min) else {
                self.drained = false;
                return Ok(None);
            };
            // A large message whose first `head` bytes are buffered: the
            // rest goes where `place` says, if it names a place.
            let at = self.rx_start + FRAME_HDR;
            if head > 0 && head < l && self.rx_end >= at + head {
                let pl = place(&self.rx[at..at + head], l - head);
                if pl.as_ref().is_some_and(|p| p.is_empty()) {
                    // Asked again later: left as it is.
                    self.drained = false;
                    return Ok(None);
                }
                if let Some(pl) = pl.filter(|p| p.len() == l - head) {
                    let done = pl.put(0, &self.rx[at + head..self.rx_end]);
                    self.rx_end = at + head;
                    self.placing = Some(Placing { len: l, head, done, starved: false });
                    return match self.place_rest(place)? {
                        Rest::Placed { head, len } => Ok(Some(self.placed(head, len))),
                        Rest::Waiting | Rest::Dropped => Ok(None),
                    };
                }
            }
            // Otherwise its rest goes straight into this buffer, and the
            // buffer is handed over whole.
            let Some(l) = self.fill_message(l)? else { return Ok(None) };
            return Ok(Some(self.hand_over(l, spare)));
        }
        let Some(len) = len else { return Ok(None) };
        if len >= min.min(whole_min) && self.rx_start + FRAME_HDR + len == self.rx_end {
            return Ok(Some(self.hand_over(len, spare)));
        }
        let at = self.rx_start + FRAME_HDR;
        self.consume = FRAME_HDR + len;
        Ok(Some(Msg::Slice(&self.rx[at..at + len])))
    }

    fn rearm(&mut self) {
        self.drained = false;
    }

    fn settle_idle(&mut self) -> bool {
        if !self.drained || self.placing.is_some() || self.connecting || self.rx_start + self.consume != self.rx_end {
            return false;
        }
        // As `recv_placed` would: nothing whole is buffered, and a drained
        // socket is not read again until the next round.
        self.rx_start += self.consume;
        self.consume = 0;
        self.drained = false;
        true
    }

    fn established(&mut self) -> Result<bool> {
        if !self.connecting {
            return Ok(true);
        }
        if !sys::writable(self.s.as_raw_fd()) {
            return Ok(false);
        }
        match self.s.take_error() {
            Ok(None) => {}
            Ok(Some(e)) => return Err(io_err(&e)),
            Err(e) => return Err(io_err(&e)),
        }
        // Writable without an error can still be a refused connection
        // whose error was already taken: a connected socket has a peer.
        if self.s.peer_addr().is_err() {
            return Err(Error(FI_ECONNREFUSED));
        }
        self.connecting = false;
        self.write_queued()?;
        Ok(true)
    }

    fn fd(&self) -> RawFd {
        self.s.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::cell::Cell;
    use std::time::{Duration, Instant};

    fn pump_until<F: FnMut() -> bool>(mut f: F) {
        let end = Instant::now() + Duration::from_secs(10);
        while !f() {
            assert!(Instant::now() < end, "no progress");
            std::thread::sleep(Duration::from_micros(100));
        }
    }

    fn pair(max: usize) -> (TcpTransport, TcpTransport, TcpConn, TcpConn) {
        let mut a = TcpTransport::bind("127.0.0.1:0".parse().unwrap(), max).unwrap();
        let mut b = TcpTransport::bind("127.0.0.1:0".parse().unwrap(), max).unwrap();
        let baddr = b.addr().to_vec();
        let c = a.connect(&baddr).unwrap();
        let mut s = None;
        pump_until(|| {
            s = b.accept().unwrap();
            s.is_some()
        });
        (a, b, c, s.unwrap())
    }

    #[test]
    fn messages_in_order_both_ways_and_large_ones() {
        let (_a, _b, mut c, mut s) = pair(1 << 20);
        let big: Vec<u8> = (0..(1 << 20)).map(|i| (i * 7) as u8).collect();
        for i in 0..100u32 {
            // `send_kind` frames the same bytes as `send` of its parts.
            let n = i.to_le_bytes();
            if i % 2 == 0 {
                c.send(&[&n, b"hello"]).unwrap();
            } else {
                c.send_kind(n[0], &n[1..], &[b"hel", b"lo"]).unwrap();
            }
        }
        c.send(&[&big]).unwrap();
        c.send(&[]).unwrap();
        let mut got = Vec::new();
        pump_until(|| {
            c.flush().unwrap();
            while let Some(m) = s.recv().unwrap() {
                got.push(m.to_vec());
            }
            got.len() == 102
        });
        for (i, m) in got.iter().take(100).enumerate() {
            assert_eq!(&m[..4], &(i as u32).to_le_bytes());
            assert_eq!(&m[4..], b"hello");
        }
        assert_eq!(got[100], big);
        assert!(got[101].is_empty());
        s.send(&[b"back"]).unwrap();
        let mut back = None;
        pump_until(|| {
            back = c.recv().unwrap().map(|m| m.to_vec());
            back.is_some()
        });
        assert_eq!(back.unwrap(), b"back");
    }

    fn data_segs_out(c: &TcpConn) -> u32 {
        sys::tcp_data_segs_out(c.fd()).expect("TCP_INFO")
    }

    #[test]
    fn a_control_message_rides_with_a_packet_of_any_size_in_the_same_write() {
        let (_a, _b, mut c, mut s) = pair(1 << 20);
        pump_until(|| c.established().unwrap());
        let ack = [3u8, 1, 2, 3, 4];
        let body = |n: usize| -> Vec<u8> { (0..n).map(|i| (i * 13) as u8).collect() };
        let mut take = |want: usize| {
            let mut got = Vec::new();
            pump_until(|| {
                while let Some(m) = s.recv().unwrap() {
                    got.push(m.to_vec());
                }
                got.len() == want
            });
            got
        };
        // Sizes framed whole, and ones written from their parts (over
        // SMALL_FRAME). Each packet goes after the control message, then
        // again with the two written apart. The receiver takes all before
        // the next write, so its window is open and, with TCP_NODELAY,
        // the kernel sends each write at once in one segment (loopback's
        // hold 64 KiB).
        for n in [10, SMALL_FRAME / 2, SMALL_FRAME, 16 << 10, 32 << 10] {
            let b = body(n);
            let parts: [&[u8]; 2] = [&b[..n / 3], &b[n / 3..]];
            let mut want = vec![2u8];
            want.extend_from_slice(b"head");
            want.extend_from_slice(&b);
            let before = data_segs_out(&c);
            c.send_kind_after(&ack, 2, b"head", &parts).unwrap();
            assert_eq!(c.queued(), 0);
            let riding = data_segs_out(&c) - before;
            assert_eq!(take(2), vec![ack.to_vec(), want.clone()], "{n} bytes after the control message");
            let before = data_segs_out(&c);
            c.send(&[&ack]).unwrap();
            c.send_kind(2, b"head", &parts).unwrap();
            assert_eq!(c.queued(), 0);
            let apart = data_segs_out(&c) - before;
            assert_eq!(take(2), vec![ack.to_vec(), want], "{n} bytes apart");
            assert_eq!((riding, apart), (1, 2), "{n} bytes: one write, not two");
        }
    }

    #[test]
    fn small_messages_through_a_full_socket_arrive_whole_and_in_order() {
        let (_a, _b, mut c, mut s) = pair(1 << 20);
        pump_until(|| c.established().unwrap());
        // Framed whole (up to SMALL_FRAME) and written in one piece while
        // nothing waits, or written from their parts (the larger ones);
        // queued behind the rest once the socket is full. Some come after
        // a two-byte control message of their own (`send_kind_after`).
        let body = |i: u32| -> Vec<u8> { (0..(i as usize * 37) % (SMALL_FRAME + 200)).map(|k| (k as u32 ^ i) as u8).collect() };
        let n = 20_000u32;
        let mut queued_at_some_point = false;
        for i in 0..n {
            let b = body(i);
            let k = i.to_le_bytes();
            if i % 6 == 1 {
                c.send_kind_after(&[0xee, k[0]], k[0], &k[1..], &[&b[..b.len() / 2], &b[b.len() / 2..]]).unwrap();
            } else if i % 3 == 0 {
                c.send_kind(k[0], &k[1..], &[&b[..b.len() / 2], &b[b.len() / 2..]]).unwrap();
            } else {
                c.send(&[&k, &b[..b.len() / 2], &b[b.len() / 2..]]).unwrap();
            }
            queued_at_some_point |= c.queued() > 0;
        }
        assert!(queued_at_some_point, "the socket filled up");
        let (mut got, mut controls) = (0u32, 0u32);
        pump_until(|| {
            c.flush().unwrap();
            while let Some(m) = s.recv().unwrap() {
                if m.len() == 2 {
                    assert_eq!((m, got % 6), (&[0xee, got as u8][..], 1), "a control message before message {got}");
                    controls += 1;
                    continue;
                }
                assert_eq!(m[..4], got.to_le_bytes());
                assert_eq!(&m[4..], &body(got)[..]);
                assert_eq!(controls, got.div_ceil(6), "message {got}: its control message came before it");
                got += 1;
            }
            got == n
        });
        assert_eq!(c.queued(), 0);
    }

    /// Messages through `recv_msg` with bounds `min` and `whole_min`:
    /// (bytes, handed over whole).
    fn recv_all(s: &mut TcpConn, c: &mut TcpConn, want: usize, min: usize, whole_min: usize, spare: &mut Vec<Vec<u8>>) -> Vec<(Vec<u8>, bool)> {
        let mut got = Vec::new();
        pump_until(|| {
            c.flush().unwrap();
            while let Some(m) = s.recv_msg(min, whole_min, spare).unwrap() {
                match m {
                    Msg::Slice(b) => got.push((b.to_vec(), false)),
                    Msg::Owned { buf, off, len } => {
                        got.push((buf[off..off + len].to_vec(), true));
                        spare.push(buf);
                    }
                    Msg::Placed { .. } => unreachable!("recv_msg places nothing"),
                }
            }
            got.len() == want
        });
        got
    }

    #[test]
    fn large_messages_are_handed_over_in_their_buffer() {
        let (_a, _b, mut c, mut s) = pair(1 << 20);
        let msg = |n: usize, k: usize| -> Vec<u8> { (0..n).map(|i| (i * 7 + k) as u8).collect() };
        // Small and large interleaved, one large at the stream's end, and
        // a large one whose bytes arrive in two writes with a pause.
        let sizes = [10, 300_000, 20, 40_000, 1 << 20, 5, 100_000];
        let mut spare = Vec::new();
        for (k, &n) in sizes.iter().enumerate() {
            c.send(&[&msg(n, k)]).unwrap();
        }
        let got = recv_all(&mut s, &mut c, sizes.len(), 32 << 10, usize::MAX, &mut spare);
        for (k, (&n, (m, owned))) in sizes.iter().zip(&got).enumerate() {
            assert_eq!(m, &msg(n, k), "message {k}");
            if n < 32 << 10 {
                assert!(!owned, "small message {k} is copied out");
            }
        }
        assert!(got.iter().filter(|(_, o)| *o).count() >= 1, "some large message handed over");
        // The buffers come back and are used again, and a large message
        // split across arrivals is read straight into place.
        let big = msg(200_000, 9);
        let mut raw = (big.len() as u32).to_le_bytes().to_vec();
        raw.extend_from_slice(&big);
        c.s.write_all(&raw[..70_000]).unwrap();
        let mut none = 0;
        pump_until(|| {
            assert!(s.recv_msg(32 << 10, usize::MAX, &mut spare).unwrap().is_none());
            none += 1;
            none == 20
        });
        c.s.write_all(&raw[70_000..]).unwrap();
        c.send(&[b"after"]).unwrap();
        let got = recv_all(&mut s, &mut c, 2, 32 << 10, usize::MAX, &mut spare);
        assert_eq!(got[0], (big, true));
        assert_eq!(got[1].0, b"after");
        // Below the bound everything is copied out, as `recv` does.
        c.send(&[&msg(100_000, 3)]).unwrap();
        let got = recv_all(&mut s, &mut c, 1, usize::MAX, usize::MAX, &mut spare);
        assert_eq!(got[0], (msg(100_000, 3), false));
    }

    #[test]
    fn a_mid_sized_message_that_is_the_last_buffered_is_handed_over() {
        let (_a, _b, mut c, mut s) = pair(1 << 20);
        let msg = |n: usize, k: usize| -> Vec<u8> { (0..n).map(|i| (i * 5 + k) as u8).collect() };
        let mut spare = Vec::new();
        // Alone, as in a ping-pong: handed over; below `whole_min`: copied.
        for (k, n, owned) in [(0, 4096, true), (1, 1000, false), (2, 2048, true)] {
            c.send(&[&msg(n, k)]).unwrap();
            let got = recv_all(&mut s, &mut c, 1, 32 << 10, 2048, &mut spare);
            assert_eq!(got[0], (msg(n, k), owned), "message {k}");
        }
        // Several in one read: those before the last are copied out (the
        // bytes after them stay), the last one goes in its buffer.
        let sizes = [3000, 5000, 2500, 4000];
        let mut raw = Vec::new();
        for (k, &n) in sizes.iter().enumerate() {
            raw.extend_from_slice(&(n as u32).to_le_bytes());
            raw.extend_from_slice(&msg(n, k));
        }
        c.s.write_all(&raw).unwrap();
        let got = recv_all(&mut s, &mut c, sizes.len(), 32 << 10, 2048, &mut spare);
        for (k, (&n, (m, owned))) in sizes.iter().zip(&got).enumerate() {
            assert_eq!(m, &msg(n, k), "message {k}");
            assert_eq!(*owned, k == sizes.len() - 1, "message {k}");
        }
        // Its buffer came back as a spare and is read into again.
        c.send(&[&msg(6000, 7)]).unwrap();
        let got = recv_all(&mut s, &mut c, 1, 32 << 10, 2048, &mut spare);
        assert_eq!(got[0], (msg(6000, 7), true));
    }

    /// What `recv_placed` returned: a message's bytes (the head only when
    /// placed) and the length placed.
    fn recv_all_placing<'p>(s: &mut TcpConn, c: &mut TcpConn, want: usize, spare: &mut Vec<Vec<u8>>, place: &mut dyn FnMut(&[u8], usize) -> Option<Placement<'p>>) -> Vec<(Vec<u8>, Option<usize>)> {
        let mut got = Vec::new();
        pump_until(|| {
            c.flush().unwrap();
            while let Some(m) = s.recv_placed(32 << 10, usize::MAX, spare, 8, place).unwrap() {
                match m {
                    Msg::Slice(b) => got.push((b.to_vec(), None)),
                    Msg::Owned { buf, off, len } => {
                        got.push((buf[off..off + len].to_vec(), None));
                        spare.push(buf);
                    }
                    Msg::Placed { head, len } => got.push((head.to_vec(), Some(len))),
                }
            }
            got.len() >= want
        });
        got
    }

    /// Writes the first 70,000 bytes of `msg`'s frame alone and lets `s`
    /// read them (20 calls, none with a whole message); the frame's rest.
    fn write_first_part<'p>(s: &mut TcpConn, c: &mut TcpConn, msg: &[u8], spare: &mut Vec<Vec<u8>>, place: &mut dyn FnMut(&[u8], usize) -> Option<Placement<'p>>) -> Vec<u8> {
        let mut raw = (msg.len() as u32).to_le_bytes().to_vec();
        raw.extend_from_slice(msg);
        c.s.write_all(&raw[..70_000]).unwrap();
        let mut none = 0;
        pump_until(|| {
            assert!(s.recv_placed(32 << 10, usize::MAX, spare, 8, place).unwrap().is_none());
            none += 1;
            none == 20
        });
        raw.split_off(70_000)
    }

    #[test]
    fn a_message_whose_place_comes_later_stays_unread_until_asked_again() {
        let (_a, _b, mut c, mut s) = pair(2 << 20);
        let body: Vec<u8> = (0..300_000usize).map(|i| (i * 7 + 3) as u8).collect();
        let head = [b'L', 0, 0, 0, 0, 0, 0, 0];
        let mut dest = vec![0u8; 300_000];
        let cells = Cell::from_mut(&mut dest[..]).as_slice_of_cells();
        let later = Cell::new(true);
        let asked = Cell::new(0);
        let mut place = |h: &[u8], len: usize| {
            asked.set(asked.get() + 1);
            (h[0] == b'L').then(|| if later.get() { Placement::later() } else { Placement::in_cells(cells, 0, len) })
        };
        let mut spare = Vec::new();
        c.send(&[b"a small one first"]).unwrap();
        c.send(&[&head, &body]).unwrap();
        let got = recv_all_placing(&mut s, &mut c, 1, &mut spare, &mut place);
        assert_eq!(got, vec![(b"a small one first".to_vec(), None)]);
        // Its place is not known yet: nothing of it is taken, however
        // often the connection is read, and it is asked about each time.
        let before = asked.get();
        for _ in 0..20 {
            c.flush().unwrap();
            assert!(s.recv_placed(32 << 10, usize::MAX, &mut spare, 8, &mut place).unwrap().is_none());
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(asked.get(), before + 20, "asked again at every read");
        assert!(cells.iter().all(|c| c.get() == 0), "nothing written before a place is named");
        // Once it has a place, all of it goes there.
        later.set(false);
        c.send(&[b"after"]).unwrap();
        let got = recv_all_placing(&mut s, &mut c, 2, &mut spare, &mut place);
        assert_eq!(got, vec![(head.to_vec(), Some(300_000)), (b"after".to_vec(), None)]);
        assert!(cells.iter().map(Cell::get).eq(body.iter().copied()), "its bytes in place");
    }

    #[test]
    fn a_message_waiting_for_its_rest_sees_the_connection_end() {
        let body: Vec<u8> = (0..200_000usize).map(|i| (i * 5 + 1) as u8).collect();
        let head = [b'P', 0, 0, 0, 0, 0, 0, 0];
        let mut dest = vec![0u8; 200_000];
        let cells = Cell::from_mut(&mut dest[..]).as_slice_of_cells();
        let mut place = |h: &[u8], len: usize| (h[0] == b'P').then(|| Placement::in_cells(cells, 0, len));
        let mut spare = Vec::new();
        // The sender goes away in the middle of the message: closed, or
        // reset (unread bytes on its side make close send a reset).
        for reset in [false, true] {
            let (_a, _b, mut c, mut s) = pair(2 << 20);
            let rest = write_first_part(&mut s, &mut c, &[&head[..], &body].concat(), &mut spare, &mut place);
            // Starved: later rounds ask the socket whether bytes came
            // before reading it, and nothing came.
            for _ in 0..5 {
                assert!(s.recv_placed(32 << 10, usize::MAX, &mut spare, 8, &mut place).unwrap().is_none());
            }
            c.s.write_all(&rest[..1000]).unwrap();
            if reset {
                s.s.write_all(b"unread by c").unwrap();
                std::thread::sleep(Duration::from_millis(20));
            }
            drop(c);
            let mut end = None;
            pump_until(|| match s.recv_placed(32 << 10, usize::MAX, &mut spare, 8, &mut place) {
                Ok(None) => false,
                Ok(Some(_)) => panic!("a message from a connection that ended midway"),
                Err(e) => {
                    end = Some(e);
                    true
                }
            });
            let e = end.unwrap();
            assert!(e.0 == FI_ESHUTDOWN || e.0 == FI_ECONNRESET, "ended with {} (reset: {reset})", e.0);
        }
    }

    #[test]
    fn large_messages_go_where_their_place_is_named() {
        let (_a, _b, mut c, mut s) = pair(2 << 20);
        let body = |n: usize, k: usize| -> Vec<u8> { (0..n).map(|i| (i * 13 + k) as u8).collect() };
        // A message's 8-byte head asks for a place ('P') at an offset of
        // the destination, or not ('N').
        let head = |p: u8, off: u32| -> Vec<u8> { [&[p, 0, 0, 0][..], &off.to_le_bytes()].concat() };
        let mut dest = vec![0u8; 4 << 20];
        let cells = Cell::from_mut(&mut dest[..]).as_slice_of_cells();
        let allow = Cell::new(true);
        let asked = Cell::new(0);
        let mut place = |h: &[u8], len: usize| {
            asked.set(asked.get() + 1);
            let off = u32::from_le_bytes(h[4..8].try_into().unwrap()) as usize;
            (h[0] == b'P' && allow.get()).then(|| Placement::in_cells(cells, off, len))
        };
        let mut spare = Vec::new();
        let sends = [(b'P', 0u32, 300_000usize), (b'N', 0, 12), (b'N', 0, 100_000), (b'P', 1 << 20, 1 << 20), (b'P', 0, 40)];
        for (k, &(p, off, n)) in sends.iter().enumerate() {
            c.send(&[&head(p, off), &body(n, k)]).unwrap();
        }
        let got = recv_all_placing(&mut s, &mut c, sends.len(), &mut spare, &mut place);
        assert_eq!(got.len(), sends.len());
        for (k, (&(p, off, n), (m, placed))) in sends.iter().zip(&got).enumerate() {
            if p == b'P' && n + 8 >= 32 << 10 {
                assert_eq!((&m[..], *placed), (&head(p, off)[..], Some(n)), "message {k} placed");
                assert!(cells[off as usize..off as usize + n].iter().map(Cell::get).eq(body(n, k)), "message {k}'s bytes in place");
            } else {
                assert_eq!((&m[..], *placed), (&[head(p, off), body(n, k)].concat()[..], None), "message {k} delivered whole");
            }
        }
        // A message whose bytes arrive in two writes with a pause: the
        // place is asked for again at each read, and the rest goes there.
        let rest = write_first_part(&mut s, &mut c, &[head(b'P', 3 << 20), body(200_000, 9)].concat(), &mut spare, &mut place);
        let asked_before = asked.get();
        c.s.write_all(&rest).unwrap();
        c.send(&[b"after"]).unwrap();
        let got = recv_all_placing(&mut s, &mut c, 2, &mut spare, &mut place);
        assert!(asked.get() > asked_before, "asked again for the rest");
        assert_eq!(got[0], (head(b'P', 3 << 20), Some(200_000)));
        assert!(cells[3 << 20..(3 << 20) + 200_000].iter().map(Cell::get).eq(body(200_000, 9)));
        assert_eq!(got[1], (b"after".to_vec(), None));
        // A place that goes away midway: the rest is dropped, not written,
        // and the next message arrives whole.
        let rest = write_first_part(&mut s, &mut c, &[head(b'P', 0), body(200_000, 3)].concat(), &mut spare, &mut place);
        allow.set(false);
        let before: Vec<u8> = cells.iter().map(Cell::get).collect();
        c.s.write_all(&rest).unwrap();
        c.send(&[b"after the dropped one"]).unwrap();
        let got = recv_all_placing(&mut s, &mut c, 1, &mut spare, &mut place);
        assert_eq!(got, vec![(b"after the dropped one".to_vec(), None)]);
        assert!(cells.iter().map(Cell::get).eq(before), "nothing written after the place went away");
    }

    #[test]
    fn refused_closed_and_oversized() {
        let mut a = TcpTransport::bind("127.0.0.1:0".parse().unwrap(), 64).unwrap();
        // Nobody listens on a port just freed.
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let mut c = a.connect(&sockaddr::to_bytes(&port)).unwrap();
        let mut r = Ok(false);
        pump_until(|| {
            r = c.established();
            !matches!(r, Ok(false))
        });
        assert_eq!(r.unwrap_err().0, FI_ECONNREFUSED);
        assert_eq!(a.connect(&[1, 2, 3]).err(), Some(EINVAL));
        assert!(c.send(&[&[0u8; 65]]).is_err());
        // send_kind: too long, or more than six parts after the header.
        assert_eq!(c.send_kind(2, &[0u8; 60], &[&[0u8; 4]]).err(), Some(EINVAL));
        assert_eq!(c.send_kind(2, b"h", &[&b"p"[..]; 7]).err(), Some(EINVAL));
        assert_eq!(c.queued(), 0);

        let (_a, _b, mut c, mut s) = pair(64);
        // A length beyond max_msg breaks the framing.
        use std::io::Write as _;
        c.flush().unwrap();
        c.s.write_all(&1000u32.to_le_bytes()).unwrap();
        let mut r = Ok(None);
        pump_until(|| {
            r = s.recv().map(|m| m.map(|m| m.to_vec()));
            r.is_err()
        });
        assert_eq!(r.unwrap_err().0, FI_EIO);
        drop(s);
        let mut r = Ok(None);
        pump_until(|| {
            r = c.recv().map(|m| m.map(|m| m.to_vec()));
            r.is_err()
        });
        assert!(matches!(r.unwrap_err().0, FI_ESHUTDOWN | FI_ECONNRESET));
    }

    #[test]
    fn ipv6_loopback() {
        let Ok(mut a) = TcpTransport::bind("[::1]:0".parse().unwrap(), 1024) else { return };
        let mut b = TcpTransport::bind("[::1]:0".parse().unwrap(), 1024).unwrap();
        assert!(!a.valid_addr(&sockaddr::to_bytes(&"127.0.0.1:5".parse().unwrap())));
        let mut c = a.connect(b.addr()).unwrap();
        c.send(&[b"six"]).unwrap();
        let mut s = None;
        pump_until(|| {
            s = b.accept().unwrap();
            s.is_some()
        });
        let mut s = s.unwrap();
        let mut got = None;
        pump_until(|| {
            c.flush().unwrap();
            got = s.recv().unwrap().map(|m| m.to_vec());
            got.is_some()
        });
        assert_eq!(got.unwrap(), b"six");
    }
}
