//! Receive matching shared by all providers: posted receives and unexpected
//! messages, tagged and untagged, with directed receive, `FI_PEEK` /
//! `FI_CLAIM` / `FI_DISCARD` (fi_tagged(3)), cancel, and `FI_MULTI_RECV`
//! buffers.
//!
//! Match rule for tags: `(recv_tag | ignore) == (msg_tag | ignore)`. Sources
//! are compared only when directed receive is enabled for that queue kind and
//! the receive names one (`FI_ADDR_UNSPEC` matches any source).
//!
//! Storage: both queues live in fixed pools sized at creation (slab + free
//! list, linked by `u32` indices), so no allocation happens per message; a
//! full pool answers `-FI_EAGAIN`. The payload handles `R` (a posted
//! receive's descriptors) and `U` (where an unexpected message's data sits)
//! are the provider's own types.
#![forbid(unsafe_code)]

use super::c;
use crate::error::{Error, Result, EINVAL};

const NIL: u32 = u32::MAX;

struct Node<T> {
    val: Option<T>,
    prev: u32,
    next: u32,
}

/// Fixed pool with intrusive doubly linked lists through it.
struct Slab<T> {
    nodes: Vec<Node<T>>,
    free: u32,
}

#[derive(Clone, Copy)]
struct List {
    head: u32,
    tail: u32,
}

impl List {
    const EMPTY: List = List { head: NIL, tail: NIL };
}

impl<T> Slab<T> {
    fn new(cap: usize) -> Result<Self> {
        if cap == 0 || cap >= NIL as usize {
            return Err(EINVAL);
        }
        let nodes = (0..cap)
            .map(|i| Node { val: None, prev: NIL, next: if i + 1 < cap { i as u32 + 1 } else { NIL } })
            .collect();
        Ok(Slab { nodes, free: 0 })
    }

    /// Appends `v` to `list`; gives `v` back when the pool is exhausted.
    /// Always inlined, as is `unlink`: a value built by the caller is then
    /// stored straight into its node (an out-of-line call copies it through
    /// memory with wide loads that wait on the caller's narrow stores).
    #[inline(always)]
    fn push_back(&mut self, list: &mut List, v: T) -> std::result::Result<u32, T> {
        let i = self.free;
        if i == NIL {
            return Err(v);
        }
        let n = &mut self.nodes[i as usize];
        self.free = n.next;
        *n = Node { val: Some(v), prev: list.tail, next: NIL };
        if list.tail != NIL {
            self.nodes[list.tail as usize].next = i;
        } else {
            list.head = i;
        }
        list.tail = i;
        Ok(i)
    }

    /// Takes a free node off the free list, to be filled by [`link_back`]
    /// or handed back by [`release`] (`None` when the pool is exhausted).
    ///
    /// [`link_back`]: Self::link_back
    /// [`release`]: Self::release
    fn alloc(&mut self) -> Option<u32> {
        let i = self.free;
        if i == NIL {
            return None;
        }
        self.free = self.nodes[i as usize].next;
        Some(i)
    }

    /// Appends node `i`, taken by [`alloc`](Self::alloc), holding `v`.
    fn link_back(&mut self, list: &mut List, i: u32, v: T) {
        self.nodes[i as usize] = Node { val: Some(v), prev: list.tail, next: NIL };
        if list.tail != NIL {
            self.nodes[list.tail as usize].next = i;
        } else {
            list.head = i;
        }
        list.tail = i;
    }

    /// Returns node `i`, taken by [`alloc`](Self::alloc) and never linked.
    fn release(&mut self, i: u32) {
        self.nodes[i as usize] = Node { val: None, prev: NIL, next: self.free };
        self.free = i;
    }

    #[inline(always)]
    fn unlink(&mut self, list: &mut List, i: u32) -> T {
        let (prev, next) = {
            let n = &self.nodes[i as usize];
            (n.prev, n.next)
        };
        if prev != NIL {
            self.nodes[prev as usize].next = next;
        } else {
            list.head = next;
        }
        if next != NIL {
            self.nodes[next as usize].prev = prev;
        } else {
            list.tail = prev;
        }
        let n = &mut self.nodes[i as usize];
        let v = n.val.take().expect("linked node holds a value");
        n.prev = NIL;
        n.next = self.free;
        self.free = i;
        v
    }

    fn find(&self, list: &List, mut pred: impl FnMut(&T) -> bool) -> Option<u32> {
        let mut i = list.head;
        while i != NIL {
            let n = &self.nodes[i as usize];
            if pred(n.val.as_ref().expect("linked node holds a value")) {
                return Some(i);
            }
            i = n.next;
        }
        None
    }

    fn get(&self, i: u32) -> Option<&T> {
        self.nodes.get(i as usize)?.val.as_ref()
    }
    fn get_mut(&mut self, i: u32) -> Option<&mut T> {
        self.nodes.get_mut(i as usize)?.val.as_mut()
    }
}

/// What a posted receive asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecvSpec {
    pub ctx: usize,
    /// Start and size of the receive buffer (used for multi-receive slicing).
    pub buf: usize,
    pub len: usize,
    /// Source fi_addr, or `FI_ADDR_UNSPEC` for any.
    pub src: u64,
    pub tag: u64,
    pub ignore: u64,
    /// Operation flags; `FI_MULTI_RECV` makes this a multi-receive buffer.
    pub flags: u64,
    pub tagged: bool,
}

impl RecvSpec {
    pub fn untagged(ctx: usize, buf: usize, len: usize, src: u64, flags: u64) -> Self {
        RecvSpec { ctx, buf, len, src, tag: 0, ignore: 0, flags, tagged: false }
    }
    pub fn tagged(ctx: usize, buf: usize, len: usize, src: u64, tag: u64, ignore: u64, flags: u64) -> Self {
        RecvSpec { ctx, buf, len, src, tag, ignore, flags, tagged: true }
    }
}

/// A queued receive: its spec, the provider's descriptor, and for
/// multi-receive buffers the bytes already consumed.
#[derive(Debug, PartialEq, Eq)]
pub struct Posted<R> {
    pub spec: RecvSpec,
    pub desc: R,
    pub consumed: usize,
}

/// A message that arrived before a matching receive was posted.
#[derive(Debug, PartialEq, Eq)]
pub struct Unexp<U> {
    pub src: u64,
    pub tag: u64,
    pub tagged: bool,
    pub len: usize,
    /// Remote CQ data and `FI_REMOTE_CQ_DATA` when present.
    pub data: u64,
    pub flags: u64,
    pub payload: U,
    /// Context of the `FI_PEEK | FI_CLAIM` that reserved it.
    pub claimed_by: Option<usize>,
}

impl<U> Unexp<U> {
    pub fn new(tagged: bool, src: u64, tag: u64, len: usize, payload: U) -> Self {
        Unexp { src, tag, tagged, len, data: 0, flags: 0, payload, claimed_by: None }
    }
}

/// A message header summary returned by peek and claim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnexpInfo {
    pub src: u64,
    pub tag: u64,
    pub len: usize,
    pub data: u64,
    pub flags: u64,
}

/// How an arriving message matched a posted receive.
#[derive(Debug, PartialEq, Eq)]
pub struct Matched<R> {
    pub ctx: usize,
    /// Where to place the data and how many bytes fit there.
    pub buf: usize,
    pub cap: usize,
    /// Flags for the completion: the receive's flags, with `FI_MULTI_RECV`
    /// set only on the completion that releases a multi-receive buffer.
    pub flags: u64,
    /// The receive, when it left the queue (always for ordinary receives;
    /// for multi-receive only on release). Otherwise `Err(slot)` names the
    /// still-queued receive for [`Matcher::posted`].
    pub entry: std::result::Result<Posted<R>, u32>,
}

/// Result of [`Matcher::search`].
#[derive(Debug, PartialEq, Eq)]
pub enum Search<U> {
    /// `FI_PEEK`: a match exists; nothing changed.
    Peeked(UnexpInfo),
    /// `FI_PEEK | FI_CLAIM`: reserved for the given context.
    Claimed(UnexpInfo),
    /// `FI_CLAIM`: the claimed message, removed; deliver it.
    Taken(Unexp<U>),
    /// `FI_DISCARD` with `FI_PEEK` or `FI_CLAIM`: removed; drop its data.
    Discarded(Unexp<U>),
}

pub struct Matcher<R, U> {
    recv: Slab<Posted<R>>,
    unexp: Slab<Unexp<U>>,
    /// Index 0: untagged, 1: tagged.
    posted: [List; 2],
    unexpected: [List; 2],
    directed: [bool; 2],
    min_multi_recv: usize,
}

#[inline]
fn tag_ok(tagged: bool, want: u64, ignore: u64, have: u64) -> bool {
    !tagged || (want | ignore) == (have | ignore)
}

impl<R, U> Matcher<R, U> {
    /// `recv_cap` / `unexp_cap`: pool sizes; `directed_msg` /
    /// `directed_tagged`: whether sources are compared (FI_DIRECTED_RECV,
    /// FI_TAGGED_DIRECTED_RECV); `min_multi_recv`: FI_OPT_MIN_MULTI_RECV.
    pub fn new(
        recv_cap: usize,
        unexp_cap: usize,
        directed_msg: bool,
        directed_tagged: bool,
        min_multi_recv: usize,
    ) -> Result<Self> {
        Ok(Matcher {
            recv: Slab::new(recv_cap)?,
            unexp: Slab::new(unexp_cap)?,
            posted: [List::EMPTY; 2],
            unexpected: [List::EMPTY; 2],
            directed: [directed_msg, directed_tagged],
            min_multi_recv,
        })
    }

    pub fn set_min_multi_recv(&mut self, v: usize) {
        self.min_multi_recv = v;
    }

    #[inline]
    fn src_ok(&self, tagged: bool, want: u64, have: u64) -> bool {
        !self.directed[tagged as usize] || want == c::FI_ADDR_UNSPEC || want == have
    }

    fn unexp_matches(&self, u: &Unexp<U>, tagged: bool, src: u64, tag: u64, ignore: u64) -> bool {
        u.claimed_by.is_none() && self.src_ok(tagged, src, u.src) && tag_ok(tagged, tag, ignore, u.tag)
    }

    /// Before posting: removes and returns the oldest unclaimed unexpected
    /// message that `spec` matches.
    #[inline(always)]
    pub fn take_unexpected(&mut self, spec: &RecvSpec) -> Option<Unexp<U>> {
        // The search gets the fields, not the reference: a reference would
        // keep the caller's spec in memory, to be copied from there (with
        // wide loads that wait on the narrow stores that built it) when the
        // caller then posts it.
        self.take_matching(spec.tagged, spec.src, spec.tag, spec.ignore)
    }

    fn take_matching(&mut self, tagged: bool, src: u64, tag: u64, ignore: u64) -> Option<Unexp<U>> {
        let q = tagged as usize;
        let i = self.unexp.find(&self.unexpected[q], |u| {
            u.claimed_by.is_none() && (!self.directed[q] || src == c::FI_ADDR_UNSPEC || src == u.src) && tag_ok(tagged, tag, ignore, u.tag)
        })?;
        Some(self.unexp.unlink(&mut self.unexpected[q], i))
    }

    /// Queues a receive. `-FI_EAGAIN` when the pool is full; `-FI_EINVAL`
    /// for a multi-receive buffer smaller than the minimum.
    #[inline(always)]
    pub fn post(&mut self, spec: RecvSpec, desc: R) -> Result<()> {
        if spec.flags & c::FI_MULTI_RECV != 0 && (spec.len == 0 || spec.len < self.min_multi_recv) {
            return Err(EINVAL);
        }
        let q = spec.tagged as usize;
        self.recv
            .push_back(&mut self.posted[q], Posted { spec, desc, consumed: 0 })
            .map(|_| ())
            .map_err(|_| Error(c::FI_EAGAIN))
    }

    /// An arriving message of `len` bytes: finds the oldest posted receive
    /// that matches, or `None` (then queue it with [`Matcher::push_unexpected`]).
    /// Inlined (like `post`): the matched receive then reaches the
    /// provider in registers, not as a struct copied through memory.
    #[inline(always)]
    pub fn match_arrival(&mut self, tagged: bool, src: u64, tag: u64, len: usize) -> Option<Matched<R>> {
        let q = tagged as usize;
        let directed = self.directed[q];
        let i = self.recv.find(&self.posted[q], |p| {
            (!directed || p.spec.src == c::FI_ADDR_UNSPEC || p.spec.src == src)
                && tag_ok(tagged, p.spec.tag, p.spec.ignore, tag)
        })?;
        let p = self.recv.get_mut(i)?;
        if p.spec.flags & c::FI_MULTI_RECV == 0 {
            let p = self.recv.unlink(&mut self.posted[q], i);
            return Some(Matched { ctx: p.spec.ctx, buf: p.spec.buf, cap: p.spec.len, flags: p.spec.flags, entry: Ok(p) });
        }
        let remaining = p.spec.len - p.consumed;
        let take = len.min(remaining);
        let buf = p.spec.buf.wrapping_add(p.consumed);
        p.consumed += take;
        let ctx = p.spec.ctx;
        let flags = p.spec.flags & !c::FI_MULTI_RECV;
        if p.spec.len - p.consumed < self.min_multi_recv.max(1) {
            let p = self.recv.unlink(&mut self.posted[q], i);
            Some(Matched { ctx, buf, cap: take, flags: flags | c::FI_MULTI_RECV, entry: Ok(p) })
        } else {
            Some(Matched { ctx, buf, cap: take, flags, entry: Err(i) })
        }
    }

    /// A receive still queued (multi-receive buffers in use).
    pub fn posted(&self, slot: u32) -> Option<&Posted<R>> {
        self.recv.get(slot)
    }

    /// Queues an unexpected message. `-FI_EAGAIN` when the pool is full (the
    /// message is handed back so the provider can apply back-pressure).
    pub fn push_unexpected(&mut self, u: Unexp<U>) -> std::result::Result<(), Unexp<U>> {
        let q = u.tagged as usize;
        self.unexp.push_back(&mut self.unexpected[q], u).map(|_| ())
    }

    /// Queues an unexpected message that `make` builds only once a place
    /// in the pool is held for it, so whatever `make` consumes (a ring
    /// cell copied out, memory) is never lost to a full pool. `Err(None)`:
    /// the pool is full and `make` did not run (apply back-pressure);
    /// `Err(Some(e))`: `make` declined with `e` and the queue is unchanged.
    pub fn push_unexpected_with<E>(&mut self, make: impl FnOnce() -> std::result::Result<Unexp<U>, E>) -> std::result::Result<(), Option<E>> {
        let Some(i) = self.unexp.alloc() else { return Err(None) };
        match make() {
            Ok(u) => {
                let q = u.tagged as usize;
                self.unexp.link_back(&mut self.unexpected[q], i, u);
                Ok(())
            }
            Err(e) => {
                self.unexp.release(i);
                Err(Some(e))
            }
        }
    }

    /// After posting the multi-receive buffer `spec`: removes the oldest
    /// unclaimed unexpected message that `spec` matches and matches it
    /// against the posted receives in one step, so a message leaves the
    /// queue only together with the receive that takes it (see
    /// [`match_arrival`](Self::match_arrival)).
    pub fn take_unexpected_matched(&mut self, spec: &RecvSpec) -> Option<(Unexp<U>, Matched<R>)> {
        let q = spec.tagged as usize;
        let (tagged, src, tag, ignore) = (spec.tagged, spec.src, spec.tag, spec.ignore);
        let i = self.unexp.find(&self.unexpected[q], |u| {
            u.claimed_by.is_none() && (!self.directed[q] || src == c::FI_ADDR_UNSPEC || src == u.src) && tag_ok(tagged, tag, ignore, u.tag)
        })?;
        let (usrc, utag, ulen) = {
            let u = self.unexp.get(i)?;
            (u.src, u.tag, u.len)
        };
        let m = self.match_arrival(tagged, usrc, utag, ulen)?;
        Some((self.unexp.unlink(&mut self.unexpected[q], i), m))
    }

    /// Whether the unexpected pool has room for one more message.
    pub fn unexpected_room(&self) -> bool {
        self.unexp.free != NIL
    }

    /// Removes the posted receive with context `ctx` (fi_cancel). The caller
    /// reports it with an `FI_ECANCELED` error completion.
    pub fn cancel(&mut self, ctx: usize) -> Option<Posted<R>> {
        for q in 0..2 {
            if let Some(i) = self.recv.find(&self.posted[q], |p| p.spec.ctx == ctx) {
                return Some(self.recv.unlink(&mut self.posted[q], i));
            }
        }
        None
    }

    /// `fi_trecvmsg` / `fi_recvmsg` with `FI_PEEK`, `FI_CLAIM`, `FI_DISCARD`
    /// on the unexpected queue. No match: `-FI_ENOMSG` (reported to the
    /// application as an error completion). Flags without `FI_PEEK` or
    /// `FI_CLAIM`: `-FI_EINVAL`.
    pub fn search(&mut self, spec: &RecvSpec, flags: u64) -> Result<Search<U>> {
        let q = spec.tagged as usize;
        let peek = flags & c::FI_PEEK != 0;
        let claim = flags & c::FI_CLAIM != 0;
        let discard = flags & c::FI_DISCARD != 0;
        let nomsg = Error(c::FI_ENOMSG);
        if !peek && !claim {
            return Err(EINVAL);
        }
        if claim && !peek {
            let i = self.unexp.find(&self.unexpected[q], |u| u.claimed_by == Some(spec.ctx)).ok_or(nomsg)?;
            let u = self.unexp.unlink(&mut self.unexpected[q], i);
            return Ok(if discard { Search::Discarded(u) } else { Search::Taken(u) });
        }
        let i = self
            .unexp
            .find(&self.unexpected[q], |u| self.unexp_matches(u, spec.tagged, spec.src, spec.tag, spec.ignore))
            .ok_or(nomsg)?;
        if discard {
            return Ok(Search::Discarded(self.unexp.unlink(&mut self.unexpected[q], i)));
        }
        let u = self.unexp.get_mut(i).ok_or(nomsg)?;
        let info = UnexpInfo { src: u.src, tag: u.tag, len: u.len, data: u.data, flags: u.flags };
        if claim {
            u.claimed_by = Some(spec.ctx);
            Ok(Search::Claimed(info))
        } else {
            Ok(Search::Peeked(info))
        }
    }

    /// Visits every queued unexpected message, oldest first, with leave to
    /// change it: a provider whose address vector gained the sender after
    /// the message arrived sets its source here, so directed receives match.
    pub fn for_each_unexpected(&mut self, mut f: impl FnMut(&mut Unexp<U>)) {
        for q in 0..2 {
            let mut i = self.unexpected[q].head;
            while i != NIL {
                let n = &mut self.unexp.nodes[i as usize];
                if let Some(v) = n.val.as_mut() {
                    f(v);
                }
                i = n.next;
            }
        }
    }

    /// Number of queued receives / unexpected messages of one kind.
    pub fn posted_len(&self, tagged: bool) -> usize {
        count(&self.recv, &self.posted[tagged as usize])
    }
    pub fn unexpected_len(&self, tagged: bool) -> usize {
        count(&self.unexp, &self.unexpected[tagged as usize])
    }
}

fn count<T>(s: &Slab<T>, l: &List) -> usize {
    let mut n = 0;
    s.find(l, |_| {
        n += 1;
        false
    });
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    const ANY: u64 = c::FI_ADDR_UNSPEC;

    #[test]
    fn a_source_set_after_arrival_lets_a_directed_receive_match() {
        let mut m: Matcher<u8, u8> = Matcher::new(4, 4, true, true, 0).unwrap();
        m.push_unexpected(Unexp::new(true, c::FI_ADDR_NOTAVAIL, 7, 1, 1)).unwrap();
        let spec = RecvSpec::tagged(1, 0, 8, 3, 7, 0, 0);
        assert!(m.take_unexpected(&spec).is_none(), "the sender is not known yet");
        m.for_each_unexpected(|u| {
            if u.src == c::FI_ADDR_NOTAVAIL {
                u.src = 3;
            }
        });
        assert_eq!(m.take_unexpected(&spec).map(|u| u.payload), Some(1));
    }
    type M = Matcher<u32, &'static str>;

    fn m(directed: bool) -> M {
        Matcher::new(4, 4, directed, directed, 16).unwrap()
    }

    #[test]
    fn bad_sizes() {
        assert!(M::new(0, 4, false, false, 0).is_err());
        assert!(M::new(4, 0, false, false, 0).is_err());
        assert!(M::new(NIL as usize, 4, false, false, 0).is_err());
    }

    #[test]
    fn tag_rule() {
        assert!(tag_ok(true, 0x12, 0, 0x12));
        assert!(!tag_ok(true, 0x12, 0, 0x13));
        assert!(tag_ok(true, 0x10, 0x0f, 0x1f));
        assert!(!tag_ok(true, 0x10, 0x0f, 0x2f));
        assert!(tag_ok(true, 0, u64::MAX, 12345));
        assert!(tag_ok(false, 1, 0, 2));
    }

    #[test]
    fn fifo_and_tags() {
        let mut x = m(false);
        x.post(RecvSpec::tagged(1, 0x100, 8, ANY, 5, 0, 0), 10).unwrap();
        x.post(RecvSpec::tagged(2, 0x200, 8, ANY, 0x50, 0x0f, 0), 20).unwrap();
        x.post(RecvSpec::tagged(3, 0x300, 8, ANY, 5, 0, 0), 30).unwrap();
        assert!(x.match_arrival(true, 0, 6, 4).is_none());
        assert!(x.match_arrival(false, 0, 5, 4).is_none(), "untagged never hits tagged receives");
        let a = x.match_arrival(true, 0, 5, 4).unwrap();
        assert_eq!((a.ctx, a.buf, a.cap), (1, 0x100, 8));
        assert_eq!(a.entry.unwrap().desc, 10);
        assert_eq!(x.match_arrival(true, 0, 0x5a, 4).unwrap().ctx, 2);
        assert_eq!(x.match_arrival(true, 0, 5, 4).unwrap().ctx, 3);
        assert!(x.match_arrival(true, 0, 5, 4).is_none());
    }

    #[test]
    fn directed_and_wildcard() {
        for directed in [false, true] {
            let mut x = m(directed);
            x.post(RecvSpec::untagged(1, 0, 8, 7, 0), 0).unwrap();
            x.post(RecvSpec::untagged(2, 0, 8, ANY, 0), 0).unwrap();
            let first = x.match_arrival(false, 3, 0, 1).unwrap().ctx;
            assert_eq!(first, if directed { 2 } else { 1 });
            let second = x.match_arrival(false, 7, 0, 1).unwrap().ctx;
            assert_eq!(second, if directed { 1 } else { 2 });
        }
    }

    #[test]
    fn unexpected_then_post() {
        let mut x = m(true);
        x.push_unexpected(Unexp::new(true, 4, 9, 100, "a")).unwrap();
        x.push_unexpected(Unexp::new(true, 5, 9, 200, "b")).unwrap();
        x.push_unexpected(Unexp::new(false, 5, 0, 300, "c")).unwrap();
        assert_eq!(x.unexpected_len(true), 2);
        assert!(x.take_unexpected(&RecvSpec::tagged(1, 0, 8, ANY, 8, 0, 0)).is_none());
        let u = x.take_unexpected(&RecvSpec::tagged(1, 0, 8, 5, 9, 0, 0)).unwrap();
        assert_eq!(u.payload, "b");
        let u = x.take_unexpected(&RecvSpec::untagged(1, 0, 8, ANY, 0)).unwrap();
        assert_eq!(u.payload, "c");
        let u = x.take_unexpected(&RecvSpec::tagged(1, 0, 8, ANY, 0, u64::MAX, 0)).unwrap();
        assert_eq!(u.payload, "a");
        assert_eq!(x.unexpected_len(true) + x.unexpected_len(false), 0);
    }

    #[test]
    fn pools_full_and_reused() {
        let mut x = m(false);
        for i in 0..4 {
            x.post(RecvSpec::untagged(i, 0, 1, ANY, 0), 0).unwrap();
        }
        assert_eq!(x.post(RecvSpec::untagged(9, 0, 1, ANY, 0), 0), Err(Error(c::FI_EAGAIN)));
        for i in 0..4 {
            x.push_unexpected(Unexp::new(true, 0, i, 1, "u")).unwrap();
        }
        let back = x.push_unexpected(Unexp::new(true, 0, 99, 1, "full")).unwrap_err();
        assert_eq!(back.payload, "full");
        // Many cycles through the same slots: no growth.
        for round in 0..1000usize {
            assert!(x.match_arrival(false, 0, 0, 1).is_some());
            x.post(RecvSpec::untagged(100 + round, 0, 1, ANY, 0), 0).unwrap();
        }
        assert_eq!(x.recv.nodes.len(), 4);
        assert_eq!(x.posted_len(false), 4);
    }

    /// The payload is built only when a place is held for it; a full pool
    /// or a declined build leaves everything as it was.
    #[test]
    fn push_unexpected_with_builds_only_with_room() {
        let mut x: M = Matcher::new(4, 2, false, false, 16).unwrap();
        let mut built = 0;
        for (i, name) in ["a", "b"].into_iter().enumerate() {
            assert!(x.unexpected_room());
            let r: std::result::Result<(), Option<()>> = x.push_unexpected_with(|| {
                built += 1;
                Ok(Unexp::new(i == 1, 0, 5, 1, name))
            });
            assert_eq!(r, Ok(()));
        }
        assert!(!x.unexpected_room());
        let r: std::result::Result<(), Option<()>> = x.push_unexpected_with(|| {
            built += 1;
            Ok(Unexp::new(false, 0, 5, 1, "c"))
        });
        assert_eq!((r, built), (Err(None), 2), "full: not built");
        assert_eq!(x.take_unexpected(&RecvSpec::untagged(1, 0, 1, ANY, 0)).unwrap().payload, "a");
        assert_eq!(x.push_unexpected_with(|| Err::<Unexp<&str>, _>(7)), Err(Some(7)));
        assert!(x.unexpected_room(), "a declined build gives its place back");
        x.push_unexpected_with(|| Ok::<_, ()>(Unexp::new(true, 0, 6, 1, "d"))).unwrap();
        assert!(!x.unexpected_room());
        let t = |ctx| RecvSpec::tagged(ctx, 0, 1, ANY, 0, !0, 0);
        assert_eq!(x.take_unexpected(&t(2)).unwrap().payload, "b", "order kept");
        assert_eq!(x.take_unexpected(&t(3)).unwrap().payload, "d");
        assert_eq!(x.unexpected_len(false) + x.unexpected_len(true), 0);
    }

    /// A message leaves the unexpected queue only with the receive that
    /// takes it.
    #[test]
    fn take_unexpected_matched_keeps_unmatched_messages() {
        let mut x: M = Matcher::new(4, 4, false, false, 16).unwrap();
        x.push_unexpected(Unexp::new(false, 0, 0, 20, "m1")).unwrap();
        x.push_unexpected(Unexp::new(false, 0, 0, 20, "m2")).unwrap();
        let spec = RecvSpec::untagged(1, 0x1000, 40, ANY, c::FI_MULTI_RECV);
        // Nothing posted yet: no match, nothing removed.
        assert!(x.take_unexpected_matched(&spec).is_none());
        assert_eq!(x.unexpected_len(false), 2);
        x.post(spec, 9).unwrap();
        let (u, m) = x.take_unexpected_matched(&spec).unwrap();
        assert_eq!((u.payload, m.buf, m.cap, m.flags & c::FI_MULTI_RECV), ("m1", 0x1000, 20, 0));
        // Nothing left after the second message: it releases the buffer.
        let (u, m) = x.take_unexpected_matched(&spec).unwrap();
        assert_eq!((u.payload, m.buf, m.cap, m.flags & c::FI_MULTI_RECV), ("m2", 0x1014, 20, c::FI_MULTI_RECV));
        assert!(x.take_unexpected_matched(&spec).is_none());
    }

    #[test]
    fn cancel() {
        let mut x = m(false);
        x.post(RecvSpec::untagged(1, 0, 1, ANY, 0), 11).unwrap();
        x.post(RecvSpec::tagged(2, 0, 1, ANY, 0, 0, 0), 22).unwrap();
        x.post(RecvSpec::untagged(3, 0, 1, ANY, 0), 33).unwrap();
        assert_eq!(x.cancel(2).unwrap().desc, 22);
        assert!(x.cancel(2).is_none());
        assert_eq!(x.cancel(1).unwrap().desc, 11);
        assert_eq!(x.match_arrival(false, 0, 0, 1).unwrap().ctx, 3);
        assert!(x.cancel(77).is_none());
    }

    #[test]
    fn peek_claim_discard() {
        let mut x = m(false);
        let mut u = Unexp::new(true, 2, 0x77, 64, "p");
        u.data = 5;
        u.flags = c::FI_REMOTE_CQ_DATA;
        x.push_unexpected(u).unwrap();
        x.push_unexpected(Unexp::new(true, 2, 0x78, 32, "q")).unwrap();
        let spec = |ctx, tag| RecvSpec::tagged(ctx, 0, 0, ANY, tag, 0, 0);
        assert_eq!(x.search(&spec(1, 0x99), c::FI_PEEK), Err(Error(c::FI_ENOMSG)));
        assert_eq!(x.search(&spec(1, 0x77), 0), Err(EINVAL));
        match x.search(&spec(1, 0x77), c::FI_PEEK).unwrap() {
            Search::Peeked(i) => assert_eq!((i.len, i.tag, i.data, i.flags), (64, 0x77, 5, c::FI_REMOTE_CQ_DATA)),
            o => panic!("{o:?}"),
        }
        assert_eq!(x.unexpected_len(true), 2);
        assert!(matches!(x.search(&spec(10, 0x77), c::FI_PEEK | c::FI_CLAIM), Ok(Search::Claimed(_))));
        // Claimed: invisible to peeks and ordinary receives.
        assert_eq!(x.search(&spec(1, 0x77), c::FI_PEEK), Err(Error(c::FI_ENOMSG)));
        assert!(x.take_unexpected(&spec(1, 0x77)).is_none());
        assert_eq!(x.search(&spec(11, 0), c::FI_CLAIM), Err(Error(c::FI_ENOMSG)));
        match x.search(&spec(10, 0), c::FI_CLAIM).unwrap() {
            Search::Taken(u) => assert_eq!(u.payload, "p"),
            o => panic!("{o:?}"),
        }
        match x.search(&spec(1, 0x78), c::FI_PEEK | c::FI_DISCARD).unwrap() {
            Search::Discarded(u) => assert_eq!(u.payload, "q"),
            o => panic!("{o:?}"),
        }
        assert_eq!(x.unexpected_len(true), 0);
        x.push_unexpected(Unexp::new(true, 2, 1, 8, "r")).unwrap();
        x.search(&spec(5, 1), c::FI_PEEK | c::FI_CLAIM).unwrap();
        assert!(matches!(x.search(&spec(5, 0), c::FI_CLAIM | c::FI_DISCARD), Ok(Search::Discarded(_))));
    }

    #[test]
    fn multi_recv() {
        let mut x: M = Matcher::new(4, 4, false, false, 16).unwrap();
        assert_eq!(x.post(RecvSpec::untagged(1, 0x1000, 8, ANY, c::FI_MULTI_RECV), 0), Err(EINVAL));
        x.post(RecvSpec::untagged(1, 0x1000, 64, ANY, c::FI_MULTI_RECV), 7).unwrap();
        let a = x.match_arrival(false, 0, 0, 20).unwrap();
        assert_eq!((a.buf, a.cap, a.flags & c::FI_MULTI_RECV), (0x1000, 20, 0));
        let slot = a.entry.unwrap_err();
        assert_eq!(x.posted(slot).unwrap().desc, 7);
        let b = x.match_arrival(false, 0, 0, 20).unwrap();
        assert_eq!((b.buf, b.cap, b.flags & c::FI_MULTI_RECV), (0x1014, 20, 0));
        // 24 left; a 10-byte message leaves 14 < 16: released.
        let d = x.match_arrival(false, 0, 0, 10).unwrap();
        assert_eq!((d.buf, d.cap, d.flags & c::FI_MULTI_RECV), (0x1028, 10, c::FI_MULTI_RECV));
        assert_eq!(d.entry.unwrap().consumed, 50);
        assert!(x.match_arrival(false, 0, 0, 1).is_none());
        // Truncation: a message larger than what is left takes the rest.
        x.post(RecvSpec::untagged(2, 0, 32, ANY, c::FI_MULTI_RECV), 0).unwrap();
        let t = x.match_arrival(false, 0, 0, 1000).unwrap();
        assert_eq!((t.cap, t.flags & c::FI_MULTI_RECV), (32, c::FI_MULTI_RECV));
    }
}
