//! The reliable connected transport the RDM layer runs on: connections
//! that carry whole messages, in order, without loss, until they break.
//! TCP implements it here (`crate::tcp`); RC queue pairs can implement it
//! as well. The RDM layer (`crate::device::ConnDevice`) opens connections
//! on demand, frames its own packets inside the messages and decides what
//! a broken connection means; a transport only moves messages.
//!
//! Contract:
//! - addresses are raw bytes, as the address vector holds them (for TCP a
//!   `sockaddr_in` / `sockaddr_in6`: the peer's listening address);
//! - nothing blocks: `connect` returns at once with a connection that
//!   queues what is sent until it is established, `accept` and `recv`
//!   answer `None` when nothing waits;
//! - a message sent is received whole, once, in the order sent on that
//!   connection, or the connection reports an error on both sides (sooner
//!   or later: a peer that vanishes without a reset is only noticed by the
//!   layer above, which times it out);
//! - errors are final: after `Err` the connection is dropped. The codes:
//!   `FI_ECONNREFUSED` (nobody listens there), `FI_ECONNRESET` (reset, or a
//!   write failed), `FI_ESHUTDOWN` (the peer closed it), `FI_EIO` (the byte
//!   stream broke the framing: a message longer than `max_msg`);
//! - dropping a connection closes it; the peer sees `FI_ESHUTDOWN` or
//!   `FI_ECONNRESET`.

#![forbid(unsafe_code)]

use rfabric_core::error::{Result, EINVAL};
use rfabric_rudp::device::Placement;
use std::os::fd::RawFd;

/// A listening endpoint of a connected transport.
pub trait Transport: Send + 'static {
    type Conn: Conn;
    /// The address peers connect to, as they hold it in their AV.
    fn addr(&self) -> &[u8];
    /// Whether `addr` can name a peer of this transport (same address
    /// family, well formed). Checked before any use of an address.
    fn valid_addr(&self, addr: &[u8]) -> bool;
    /// Largest message `Conn::send` takes and `Conn::recv` accepts.
    fn max_msg(&self) -> usize;
    /// Starts a connection to the peer listening at `addr`; it is usable at
    /// once (what is sent waits until it is established).
    fn connect(&mut self, addr: &[u8]) -> Result<Self::Conn>;
    /// A connection a peer opened, if one waits.
    fn accept(&mut self) -> Result<Option<Self::Conn>>;
    /// A descriptor that turns readable when a connection waits.
    fn fd(&self) -> RawFd;
}

/// One connection. Messages go both ways.
/// A message from [`Conn::recv_msg`].
pub enum Msg<'a> {
    /// Valid until the next call.
    Slice(&'a [u8]),
    /// The message is `buf[off..off + len]`.
    Owned { buf: Vec<u8>, off: usize, len: usize },
    /// The message's first bytes (valid until the next call); the `len`
    /// bytes after them were read into the place `recv_placed`'s callback
    /// named for them.
    Placed { head: &'a [u8], len: usize },
}

/// Calls `f` with the list `kind`, `head`, `rest...` (`Conn::send_kind` as
/// parts of `Conn::send`); more than six `rest` parts: `EINVAL`.
pub fn with_kind_parts<R>(kind: u8, head: &[u8], rest: &[&[u8]], f: impl FnOnce(&[&[u8]]) -> Result<R>) -> Result<R> {
    if rest.len() > 6 {
        return Err(EINVAL);
    }
    let kind = [kind];
    let mut parts: [&[u8]; 8] = [&[]; 8];
    parts[0] = &kind;
    parts[1] = head;
    parts[2..2 + rest.len()].copy_from_slice(rest);
    f(&parts[..2 + rest.len()])
}

pub trait Conn: Send {
    /// Queues one message, the concatenation of `parts` (at most the
    /// transport's `max_msg` bytes), and sends what the peer takes now.
    /// The connection buffers what it cannot send yet: the caller bounds
    /// that (the RDM layer by its acknowledgements).
    fn send(&mut self, parts: &[&[u8]]) -> Result<()>;
    /// As `send`, of the byte `kind`, then `head`, then `rest` (at most six
    /// parts): the device's packets. A connection may frame these without
    /// gathering the parts into a list first.
    fn send_kind(&mut self, kind: u8, head: &[u8], rest: &[&[u8]]) -> Result<()> {
        with_kind_parts(kind, head, rest, |parts| self.send(parts))
    }
    /// As `send_kind`, after the whole message `first` (a short control
    /// message of the device, such as an acknowledgement that rides with
    /// a packet): a connection may write both at once.
    fn send_kind_after(&mut self, first: &[u8], kind: u8, head: &[u8], rest: &[&[u8]]) -> Result<()> {
        self.send(&[first])?;
        self.send_kind(kind, head, rest)
    }
    /// Sends queued bytes as far as the peer takes them; returns the bytes
    /// still queued.
    fn flush(&mut self) -> Result<usize>;
    /// Bytes queued and not yet handed to the network.
    fn queued(&self) -> usize;
    /// The next message that arrived, if any; valid until the next call.
    /// Until it answers `None` messages may wait in the connection without
    /// its descriptor turning readable: a caller that stops early comes
    /// back without waiting.
    fn recv(&mut self) -> Result<Option<&[u8]>>;
    /// As `recv`, but a message may come as a buffer of its own, the
    /// connection's receive buffer that it was read into, handed over
    /// instead of copied out (the connection goes on with one of `spare`,
    /// or a new one): one of at least `min` bytes, whose rest is read into
    /// that buffer and nothing after it, and one of at least `whole_min`
    /// bytes that is the last whole message buffered (nothing after it
    /// needs moving). Default: `recv`.
    fn recv_msg(&mut self, min: usize, whole_min: usize, spare: &mut Vec<Vec<u8>>) -> Result<Option<Msg<'_>>> {
        let _ = (min, whole_min, spare);
        Ok(self.recv()?.map(Msg::Slice))
    }
    /// As `recv_msg`, and the rest of a message of at least `min` bytes
    /// may be read straight into a place of the caller's: once its first
    /// `head` bytes are in, `place(first bytes, length of the rest)` names
    /// one or declines. A message read in place over several calls asks
    /// again at each (so a place that went away is not written); one whose
    /// place went away midway has its rest read and dropped. Default:
    /// `recv_msg`, nothing placed.
    fn recv_placed<'p>(&mut self, min: usize, whole_min: usize, spare: &mut Vec<Vec<u8>>, head: usize, place: &mut dyn FnMut(&[u8], usize) -> Option<Placement<'p>>) -> Result<Option<Msg<'_>>> {
        let _ = (head, place);
        self.recv_msg(min, whole_min, spare)
    }
    /// The next `recv` asks the transport even if the last one found
    /// nothing more to read (for a caller that polls this connection
    /// without waiting for its descriptor to turn readable). Default:
    /// nothing to forget.
    fn rearm(&mut self) {}
    /// True when another `recv_placed` now could only find nothing, and
    /// would not read (the last read emptied the socket and everything
    /// buffered has been handed out); what that call would have settled is
    /// settled, so the caller need not make it.
    fn settle_idle(&mut self) -> bool {
        false
    }
    /// Whether the connection is established (a `connect` may still be
    /// under way); an error when it failed.
    fn established(&mut self) -> Result<bool>;
    /// A descriptor that turns readable when messages (or an error) arrive.
    fn fd(&self) -> RawFd;
}
