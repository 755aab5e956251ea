//! Test support: an engine on a device with its completion queues, and
//! the sends, receives and completion waits the engine tests share.

use crate::device::{Device, PeerId};
use crate::engine::{Engine, EngineConfig};
use rfabric_core::abi::*;
use rfabric_core::error::Result;
use rfabric_core::objects::cq::CqAttr;
use rfabric_core::objects::mr::MrRegistry;
use rfabric_core::objects::progress::ProgressCq;
use rfabric_core::objects::wait::Locked;
use rfabric_core::provider::{CompletionQueue, Descs, Iov, RxOp, TxOp};
use std::sync::Arc;

/// An engine on a device, with its send and receive completion queues.
pub struct Side<D: Device> {
    pub eng: Engine<D>,
    pub tx: Arc<ProgressCq>,
    pub rx: Arc<ProgressCq>,
    pub mr: Arc<Locked<MrRegistry>>,
}

impl<D: Device> Side<D> {
    pub fn new(d: D, cfg: EngineConfig) -> Side<D> {
        let mr = Arc::new(Locked::new(MrRegistry::new(0, 8).unwrap()));
        let mut eng = Engine::new(d, cfg, mr.clone()).unwrap();
        let cq = || Arc::new(ProgressCq::new(&CqAttr { size: 64, format: FI_CQ_FORMAT_TAGGED, wait_obj: FI_WAIT_NONE }).unwrap());
        let (tx, rx) = (cq(), cq());
        eng.out.tx_cq = Some(tx.clone());
        eng.out.rx_cq = Some(rx.clone());
        Side { eng, tx, rx, mr }
    }
}

/// (context, len, tag) of the next completion of `b`'s receives
/// (`rx_of_b`) or `a`'s sends, progressing both sides until there is one
/// (a bounded number of rounds); the error of an error completion.
pub fn next<D: Device, E: Device>(a: &mut Side<D>, b: &mut Side<E>, rx_of_b: bool) -> std::result::Result<(usize, usize, u64), i32> {
    for _ in 0..10_000 {
        a.eng.progress();
        b.eng.progress();
        let cq = if rx_of_b { &b.rx } else { &a.tx };
        let mut e = [0u8; 48];
        match cq.read(&mut e, 1, None) {
            Ok(1) => {
                let w = |i: usize| u64::from_ne_bytes(e[i * 8..i * 8 + 8].try_into().unwrap());
                return Ok((w(0) as usize, w(2) as usize, w(5)));
            }
            Err(err) if err.0 == FI_EAVAIL => return Err(cq.readerr(None, 0).unwrap().0.err),
            _ => {}
        }
        std::thread::yield_now();
    }
    panic!("no completion after 10000 rounds");
}

pub fn send<D: Device>(s: &mut Side<D>, peer: PeerId, data: &[u8], ctx: usize, tagged: Option<u64>) -> Result<()> {
    let iov = [Iov { base: data.as_ptr() as usize, len: data.len() }];
    let op = TxOp { iov: &iov, desc: Descs::NONE, dest: 0, context: ctx, tag: tagged.unwrap_or(0), data: 0, flags: 0, tagged: tagged.is_some(), no_completion: false };
    // SAFETY: the callers keep `data` until the send's completion.
    unsafe { s.eng.send(peer, &op) }
}

/// `fi_inject`: the engine may read `data` during this call only.
pub fn inject<D: Device>(s: &mut Side<D>, peer: PeerId, data: &[u8]) -> Result<()> {
    let iov = [Iov { base: data.as_ptr() as usize, len: data.len() }];
    let op = TxOp { iov: &iov, desc: Descs::NONE, dest: 0, context: 0, tag: 0, data: 0, flags: FI_INJECT, tagged: false, no_completion: true };
    // SAFETY: `data` is readable during the call, all an inject needs.
    unsafe { s.eng.send(peer, &op) }
}

/// `fi_injectdata`: `data` with remote CQ data `cq_data`.
pub fn inject_data<D: Device>(s: &mut Side<D>, peer: PeerId, data: &[u8], cq_data: u64) -> Result<()> {
    let iov = [Iov { base: data.as_ptr() as usize, len: data.len() }];
    let op = TxOp { iov: &iov, desc: Descs::NONE, dest: 0, context: 0, tag: 0, data: cq_data, flags: FI_INJECT | FI_REMOTE_CQ_DATA, tagged: false, no_completion: true };
    // SAFETY: `data` is readable during the call, all an inject needs.
    unsafe { s.eng.send(peer, &op) }
}

/// Posts a receive into the buffers `bufs` (one iov each).
pub fn post_recvv<D: Device>(s: &mut Side<D>, bufs: &mut [&mut [u8]], ctx: usize, tagged: Option<u64>) {
    let iov: Vec<Iov> = bufs.iter_mut().map(|b| Iov { base: b.as_mut_ptr() as usize, len: b.len() }).collect();
    let op = RxOp { iov: &iov, desc: Descs::NONE, src: FI_ADDR_UNSPEC, context: ctx, tag: tagged.unwrap_or(0), ignore: 0, flags: 0, tagged: tagged.is_some() };
    // SAFETY: the callers keep the buffers until the receive's completion.
    unsafe { s.eng.recv(&op) }.unwrap();
}

pub fn post_recv<D: Device>(s: &mut Side<D>, buf: &mut [u8], ctx: usize, tagged: Option<u64>) {
    post_recvv(s, &mut [buf], ctx, tagged);
}
