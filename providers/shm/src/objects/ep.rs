//! The shm endpoint object. This module holds its state: `ShmEp`, the
//! handle the core holds (and its `FI_PROGRESS_AUTO` thread); `EpShared`,
//! what the CQs and counters that progress it hold; and `EpState`, behind
//! the endpoint's lock: the transport endpoint ([`crate::Endpoint`]), the
//! matcher, the bound CQs, counters and AV, and the tables of operations in
//! flight. What is done with that state is in the child modules, each
//! methods of `EpState` (and `ShmEp`):
//! - `ops`: the `Endpoint` calls of the application (send, receive, bind, ...);
//! - `progress`: transport events, arrivals matched and delivered, completions;
//! - `addressing`: fi_addr, sender keys, `FI_SOURCE_ERR` data, `fi_setname`;
//! - `delivery_complete`: `FI_DELIVERY_COMPLETE` of eager sends;
//! - `rma`: RMA and atomics.

use super::addr::{addr_to_str, parse_str_addr, StrAddr, ADDR_PREFIX};
use super::{locked, ShmAv, ShmCntr, ShmCq};
use crate::endpoint::{Config, Event, Incoming, Kind, MsgHeader, SendStatus};
use crate::lock::{Lk, Locking};
use crate::peer::PeerId;
use rfabric_core::abi::*;
use rfabric_core::error::{Error, Result, EAGAIN, EINVAL, ENOSYS};
use rfabric_core::info::Info;
use rfabric_core::objects::cntr::Cntr;
use rfabric_core::objects::cq::{Completion, ErrCompletion};
use rfabric_core::objects::matching::{Matcher, RecvSpec, Search, Unexp};
use rfabric_core::objects::mr::MrRegistry;
use rfabric_core::objects::wait::Locked;
use rfabric_core::provider::{Bind, Endpoint, Iov, RxOp, TxOp};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

mod addressing;
mod delivery_complete;
mod ops;
mod progress;
mod rma;

use addressing::source_err_data;
use delivery_complete::DcState;
pub(super) use rma::ATOMIC_MAX_BYTES;

/// Header flag bits carried in `MsgHeader::flags` (`rma::UF_RMA` marks
/// RMA/atomic traffic, dispatched before matching).
const UF_TAGGED: u8 = 1;
const UF_DATA: u8 = 2;
/// FI_DELIVERY_COMPLETE on an eager message: the receiver answers with an
/// `UF_ACK` message once it has processed it.
const UF_ACKREQ: u8 = 4;
/// The acknowledgement: no payload, `tag` = how many `UF_ACKREQ` messages
/// from this sender endpoint the receiver has processed so far.
const UF_ACK: u8 = 8;

/// Where an unexpected message's data waits (with the sender's key).
enum Stash {
    Data(Vec<u8>, u64),
    Rndv(Incoming),
}

impl Stash {
    fn key(&self) -> u64 {
        match self {
            Stash::Data(_, k) => *k,
            Stash::Rndv(inc) => inc.src_key,
        }
    }
}

/// A receive of several buffers: the data lands in `tmp` (one transport
/// transfer) and is spread over `iov` when the receive completes.
#[derive(Clone, Debug)]
struct Scatter {
    tmp: Vec<u8>,
    iov: Vec<Iov>,
}

impl Scatter {
    fn new(iov: &[Iov]) -> Result<Box<Scatter>> {
        let total = iov.iter().try_fold(0usize, |a, v| a.checked_add(v.len)).ok_or(EINVAL)?;
        Ok(Box::new(Scatter { tmp: vec![0u8; total], iov: iov.to_vec() }))
    }
    /// Copies the first `n` received bytes out to the application's buffers.
    fn spread(&self, n: usize) {
        let mut at = 0;
        for v in &self.iov {
            if at >= n {
                break;
            }
            let k = v.len.min(n - at);
            if k > 0 {
                // SAFETY: each iov is writable for its length until the
                // receive completes (Endpoint::recv contract); tmp holds n bytes.
                unsafe { std::ptr::copy_nonoverlapping(self.tmp.as_ptr().add(at), v.base as *mut u8, k) };
            }
            at += k;
        }
    }
}

/// What a receive completion needs once the data is in place.
#[derive(Clone, Debug)]
struct RxInfo {
    ctx: usize,
    buf: usize,
    cap: usize,
    msg_len: u64,
    flags: u64,
    tag: u64,
    data: u64,
    src: u64,
    complete: bool,
    /// FI_SOURCE_ERR: the sender is not in the AV; its key, resolved to its
    /// address string at completion, goes to err_data.
    unknown_src: Option<u64>,
    /// Several receive buffers: data goes through a temporary buffer.
    scatter: Option<Box<Scatter>>,
}

#[derive(Clone, Debug)]
struct TxInfo {
    ctx: usize,
    flags: u64,
    complete: bool,
    /// A rendezvous send of several buffers, gathered here until it completes
    /// (never read: it only keeps the memory alive).
    #[allow(dead_code)]
    gather: Option<Vec<u8>>,
}

const MAX_PENDING: usize = 64;
const MAX_POSTED: usize = 1024;
pub(super) const MAX_UNEXPECTED: usize = 1024;
/// Default FI_OPT_MIN_MULTI_RECV: one inline message.
pub(super) const DEFAULT_MIN_MULTI_RECV: usize = crate::provider::INJECT_SIZE;

pub(super) struct EpState {
    tp: crate::Endpoint,
    matcher: Matcher<Option<Box<Scatter>>, Stash>,
    /// FI_SOURCE_ERR: messages from senders outside the AV complete with
    /// FI_EADDRNOTAVAIL.
    source_err: bool,
    tx_cq: Option<Arc<ShmCq>>,
    pub(super) rx_cq: Option<Arc<ShmCq>>,
    av: Option<Arc<ShmAv>>,
    send_cntr: Option<Arc<ShmCntr>>,
    recv_cntr: Option<Arc<ShmCntr>>,
    /// Counters bound for events this provider never generates (RMA).
    other_cntrs: Vec<Arc<ShmCntr>>,
    tx_selective: bool,
    rx_selective: bool,
    enabled: bool,
    /// fi_addr -> attached peer + 1 (0: not attached yet).
    peers: Vec<u32>,
    /// Sender key -> fi_addr, filled as senders become known.
    by_key: HashMap<u64, u64>,
    /// The last sender resolved by `src_of` (key, fi_addr): a run of
    /// messages from one peer skips the hash lookup.
    last_src: Option<(u64, u64)>,
    /// The AV generation `peers` and `by_key` were filled under.
    av_gen: u64,
    tx_pending: Box<[Option<TxInfo>]>,
    rx_pending: Box<[Option<RxInfo>]>,
    /// Matched rendezvous receives waiting for room in the transport's table.
    deferred: VecDeque<(Incoming, RxInfo)>,
    /// FI_OPT_MIN_MULTI_RECV.
    min_multi_recv: usize,
    /// An arrival that found no receive and no room in the unexpected
    /// queue (or no memory for its copy): it stays in the ring and is
    /// matched again before the ring is read further.
    stalled: Option<Incoming>,
    /// RMA and atomics (`rma.rs`).
    rma: rma::RmaState,
    /// The name given with fi_setname (without `fi_shm://`) and the link
    /// that makes the segment reachable under it.
    name: Option<(String, crate::segment::NameLink)>,
    /// FI_DELIVERY_COMPLETE of eager sends.
    dc: DcState,
    /// A receive completion on its way straight to the CQ read that is
    /// progressing this endpoint (see `ShmCq::progress`).
    pub(super) handoff: Handoff,
    /// Whether a read of several entries goes on polling the ring after
    /// its handed-off entry. Polling an empty ring there costs the reply
    /// that the application is about to send a line transfer (the sender
    /// has just fetched the next cell); so after a read that found nothing
    /// behind its entry (a ping-pong) reads stop at the entry, until one
    /// finds the next message already waiting (a stream).
    drain_after_handoff: bool,
    /// The last progress stopped at a handed-off entry.
    after_handoff: bool,
}

/// While a `fi_cq_read` on the receive CQ progresses the endpoint, the
/// first receive completion goes to the reader instead of through the CQ
/// ring (it would be pushed and popped at once, under the ring's lock
/// each time). Only when the ring is empty, so order is kept.
#[derive(Clone, Copy, Default)]
pub(super) enum Handoff {
    #[default]
    Off,
    /// `only`: the reader takes one entry, so progress stops once it has
    /// it (the rest of the ring waits for the next read, and the reply the
    /// application is about to send does not wait for it).
    Wanted { only: bool },
    Got { c: Completion, only: bool },
}

pub struct EpShared {
    pub(super) st: Lk<EpState>,
}

/// The background progress thread of an `FI_PROGRESS_AUTO` endpoint.
struct Progressor {
    stop: Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

pub struct ShmEp {
    shared: Arc<EpShared>,
    auto_progress: bool,
    progressor: Mutex<Option<Progressor>>,
}

impl ShmEp {
    fn start_progress(&self) -> Result<()> {
        let mut g = locked(&self.progressor);
        if g.is_some() {
            return Ok(());
        }
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (s2, ep) = (stop.clone(), self.shared.clone());
        let thread = std::thread::Builder::new()
            .name("rfabric-shm-progress".into())
            .spawn(move || {
                let mut idle = 0u32;
                while !s2.load(std::sync::atomic::Ordering::Acquire) {
                    let n = ep.st.lock().progress();
                    if n > 0 {
                        idle = 0;
                        continue;
                    }
                    idle = idle.saturating_add(1);
                    if idle < 64 {
                        std::thread::yield_now();
                    } else {
                        // Idle: poll every 100 us (latency bound of AUTO progress
                        // when nobody reads the CQ).
                        std::thread::sleep(std::time::Duration::from_micros(100));
                    }
                }
            })
            .map_err(|_| Error(FI_ENOMEM))?;
        *g = Some(Progressor { stop, thread });
        Ok(())
    }
    fn stop_progress(&self) {
        if let Some(p) = locked(&self.progressor).take() {
            p.stop.store(true, std::sync::atomic::Ordering::Release);
            let _ = p.thread.join();
        }
    }
}

impl Drop for ShmEp {
    fn drop(&mut self) {
        // fi_close closes first (closing twice is harmless). An endpoint
        // dropped without it is closed here: that also ends the reference
        // cycle with the CQs and counters bound to it, which would keep
        // both alive forever.
        let _ = rfabric_core::provider::Endpoint::close(self);
    }
}

impl ShmEp {
    /// `locking`: the domain's.
    pub fn new(directed: bool, locking: Locking) -> Result<ShmEp> {
        ShmEp::with_unexpected_cap(directed, locking, MAX_UNEXPECTED)
    }

    /// With room for `unexp_cap` unexpected messages (not `MAX_UNEXPECTED`).
    fn with_unexpected_cap(directed: bool, locking: Locking, unexp_cap: usize) -> Result<ShmEp> {
        let tp = crate::Endpoint::new(Config::default())?;
        let st = EpState {
            tp,
            matcher: Matcher::new(MAX_POSTED, unexp_cap, directed, directed, DEFAULT_MIN_MULTI_RECV)?,
            source_err: false,
            tx_cq: None,
            rx_cq: None,
            av: None,
            send_cntr: None,
            recv_cntr: None,
            other_cntrs: Vec::new(),
            tx_selective: false,
            rx_selective: false,
            enabled: false,
            peers: Vec::new(),
            by_key: HashMap::new(),
            last_src: None,
            av_gen: 0,
            tx_pending: vec![None; MAX_PENDING].into_boxed_slice(),
            rx_pending: vec![None; MAX_PENDING].into_boxed_slice(),
            deferred: VecDeque::with_capacity(MAX_PENDING),
            min_multi_recv: DEFAULT_MIN_MULTI_RECV,
            handoff: Handoff::Off,
            drain_after_handoff: true,
            after_handoff: false,
            stalled: None,
            rma: rma::RmaState::default(),
            name: None,
            dc: DcState::default(),
        };
        Ok(ShmEp { shared: Arc::new(EpShared { st: Lk::with(st, locking) }), auto_progress: false, progressor: Mutex::new(None) })
    }
}

impl ShmEp {
    /// The endpoint `fi_endpoint` opens for `info` (`ShmDomain::endpoint_with`),
    /// with the domain's locking, progress and MR registry and room for
    /// `unexp_cap` unexpected messages.
    pub(super) fn open(info: &Info, locking: Locking, auto_progress: bool, mr: Arc<Locked<MrRegistry>>, unexp_cap: usize) -> Result<ShmEp> {
        let directed = info.caps & FI_DIRECTED_RECV != 0;
        let mut ep = ShmEp::with_unexpected_cap(directed, locking, unexp_cap)?;
        ep.auto_progress = auto_progress;
        {
            let mut st = ep.shared.st.lock();
            st.source_err = info.caps & FI_SOURCE_ERR != 0;
            st.rma = rma::RmaState::new(mr);
            // A named source address (fi_getinfo's node/service with
            // FI_SOURCE, or the application's own) names the endpoint as
            // fi_setname would; `fi_shm://` alone asks for an address of
            // its own.
            if let Some(src) = info.src_addr.as_deref() {
                let end = src.iter().position(|&c| c == 0).unwrap_or(src.len());
                if &src[..end] != ADDR_PREFIX.as_bytes() {
                    st.set_name(src, false).map_err(|(e, why)| {
                        rfabric_core::fi_warn!("shm", FI_LOG_EP_CTRL, "source address refused ({}): {}", e, why);
                        e
                    })?;
                }
            }
        }
        Ok(ep)
    }
}

fn rx_flags(tagged: bool, remote_data: bool) -> u64 {
    FI_RECV | if tagged { FI_TAGGED } else { FI_MSG } | if remote_data { FI_REMOTE_CQ_DATA } else { 0 }
}
