//! `FI_EP_DGRAM` endpoints: one UDP datagram per message, unreliable and
//! unordered as the endpoint type promises, no header on the wire (the
//! payload is the datagram). Receives are filled in the order they were
//! posted; a datagram larger than its receive completes with `FI_ETRUNC`.

use crate::objects::RudpAv;
use rfabric_core::abi::*;
use rfabric_core::error::{Error, Result, EAGAIN, EINVAL};
use rfabric_core::objects::cq::{Completion, ErrCompletion};
use rfabric_core::objects::progress::{Progress, ProgressCntr, ProgressCq};
use rfabric_core::provider::{Bind, Endpoint, Iov, RxOp, TxOp};
use std::collections::VecDeque;
use std::net::{SocketAddr, UdpSocket};
use std::sync::{Arc, Mutex, MutexGuard};

const IOV_MAX: usize = crate::engine::IOV_MAX;

struct Posted {
    ctx: usize,
    iov: [Iov; IOV_MAX],
    niov: usize,
}

#[derive(Default)]
struct State {
    recvs: VecDeque<Posted>,
    av: Option<Arc<RudpAv>>,
    tx_cq: Option<Arc<ProgressCq>>,
    rx_cq: Option<Arc<ProgressCq>>,
    send_cntr: Option<Arc<ProgressCntr>>,
    recv_cntr: Option<Arc<ProgressCntr>>,
    enabled: bool,
    scratch: Vec<u8>,
}

pub struct DgramShared {
    sock: UdpSocket,
    max_msg: usize,
    rx_size: usize,
    st: Mutex<State>,
}

fn locked<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Progress for DgramShared {
    fn progress(&self) -> usize {
        let mut st = locked(&self.st);
        if !st.enabled {
            return 0;
        }
        let mut done = 0;
        while !st.recvs.is_empty() {
            let mut scratch = std::mem::take(&mut st.scratch);
            scratch.resize(self.max_msg.max(65536), 0);
            let r = self.sock.recv_from(&mut scratch);
            let (len, from) = match r {
                Ok(v) => v,
                Err(_) => {
                    st.scratch = scratch;
                    break;
                }
            };
            let p = st.recvs.pop_front().expect("a posted receive");
            let cap: usize = p.iov[..p.niov].iter().map(|v| v.len).sum();
            let mut off = 0;
            for v in &p.iov[..p.niov] {
                let take = v.len.min(len.min(cap) - off);
                if take == 0 {
                    break;
                }
                // SAFETY: the receive's buffers are writable until it
                // completes (the `Endpoint::recv` contract); it completes now.
                unsafe { rfabric_core::copy::copy_bytes(scratch[off..].as_ptr(), v.base as *mut u8, take) };
                off += take;
            }
            st.scratch = scratch;
            let src = st.av.as_ref().map_or(FI_ADDR_NOTAVAIL, |av| av.source_of(&from));
            let c = Completion { op_context: p.ctx, flags: FI_RECV | FI_MSG, len: len.min(cap), src_addr: src, ..Completion::default() };
            if len > cap {
                if let Some(k) = &st.recv_cntr {
                    k.c.adderr(1);
                }
                if let Some(cq) = &st.rx_cq {
                    cq.push_err(ErrCompletion { base: c, err: FI_ETRUNC, olen: len - cap, ..ErrCompletion::default() });
                }
            } else {
                if let Some(k) = &st.recv_cntr {
                    k.c.add(1);
                }
                if let Some(cq) = &st.rx_cq {
                    cq.push(c);
                }
            }
            done += 1;
        }
        done
    }
}

pub struct DgramEp {
    shared: Arc<DgramShared>,
    bound: Mutex<Vec<Arc<ProgressCq>>>,
    cntrs: Mutex<Vec<Arc<ProgressCntr>>>,
}

impl DgramEp {
    pub fn open(bind: SocketAddr, max_msg: usize, rx_size: usize) -> Result<DgramEp> {
        let sock = UdpSocket::bind(bind).map_err(|e| Error(e.raw_os_error().unwrap_or(FI_EIO)))?;
        sock.set_nonblocking(true).map_err(|_| Error(FI_EIO))?;
        Ok(DgramEp {
            shared: Arc::new(DgramShared { sock, max_msg, rx_size: rx_size.max(1), st: Mutex::new(State::default()) }),
            bound: Mutex::new(Vec::new()),
            cntrs: Mutex::new(Vec::new()),
        })
    }
    fn me(&self) -> Arc<dyn Progress> {
        self.shared.clone()
    }
}

impl Endpoint for DgramEp {
    fn bind(&self, target: Bind<'_>, flags: u64) -> Result<()> {
        match target {
            Bind::Cq(cq) => {
                let cq = cq.clone().as_any_arc().downcast::<ProgressCq>().map_err(|_| EINVAL)?;
                if flags & !(FI_TRANSMIT | FI_RECV | FI_SELECTIVE_COMPLETION) != 0 {
                    return Err(Error(FI_EBADFLAGS));
                }
                let mut st = locked(&self.shared.st);
                if flags & FI_TRANSMIT != 0 {
                    st.tx_cq = Some(cq.clone());
                }
                if flags & FI_RECV != 0 {
                    st.rx_cq = Some(cq.clone());
                }
                drop(st);
                cq.bound.attach(self.me());
                locked(&self.bound).push(cq);
                Ok(())
            }
            Bind::Cntr(c) => {
                let c = c.clone().as_any_arc().downcast::<ProgressCntr>().map_err(|_| EINVAL)?;
                rfabric_core::objects::cntr::Cntr::check_bind_flags(flags)?;
                let mut st = locked(&self.shared.st);
                if flags == 0 || flags & FI_SEND != 0 {
                    st.send_cntr = Some(c.clone());
                }
                if flags == 0 || flags & FI_RECV != 0 {
                    st.recv_cntr = Some(c.clone());
                }
                drop(st);
                c.bound.attach(self.me());
                locked(&self.cntrs).push(c);
                Ok(())
            }
            Bind::Av(av) => {
                let av = av.clone().as_any_arc().downcast::<RudpAv>().map_err(|_| EINVAL)?;
                locked(&self.shared.st).av = Some(av);
                Ok(())
            }
            Bind::Eq(_) | Bind::Srx(_) => Err(rfabric_core::error::ENOSYS),
        }
    }
    fn enable(&self) -> Result<()> {
        let mut st = locked(&self.shared.st);
        if st.av.is_none() || (st.tx_cq.is_none() && st.rx_cq.is_none()) {
            return Err(Error(FI_ENOCQ));
        }
        st.enabled = true;
        Ok(())
    }
    fn getname(&self, buf: &mut [u8]) -> Result<usize> {
        let a = self.shared.sock.local_addr().map_err(|_| Error(FI_EIO))?;
        let b = crate::sockaddr::to_bytes(&a);
        let n = b.len().min(buf.len());
        buf[..n].copy_from_slice(&b[..n]);
        Ok(b.len())
    }
    unsafe fn send(&self, op: &TxOp<'_>) -> Result<()> {
        if op.tagged || op.iov.len() > IOV_MAX {
            return Err(EINVAL);
        }
        // FI_REMOTE_CQ_DATA is not refused: upstream's ofi_rxd sends with it
        // among its endpoint's default flags. The datagram carries the
        // payload alone, and the offer says so (cq_data_size 0).
        let len: usize = op.iov.iter().map(|v| v.len).sum();
        if len > self.shared.max_msg {
            return Err(Error(FI_EMSGSIZE));
        }
        let st = locked(&self.shared.st);
        let av = st.av.as_ref().ok_or(Error(FI_ENOAV))?;
        let to = av.sockaddr(op.dest).ok_or(EINVAL)?;
        let mut buf = Vec::with_capacity(len);
        for v in op.iov {
            // SAFETY: readable until the send completes, which is now
            // (`Endpoint::send` contract).
            rfabric_core::copy::extend_vec(&mut buf, unsafe { std::slice::from_raw_parts(v.base as *const u8, v.len) });
        }
        match self.shared.sock.send_to(&buf, to) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Err(EAGAIN),
            Err(e) => return Err(Error(e.raw_os_error().unwrap_or(FI_EIO))),
        }
        if let Some(k) = &st.send_cntr {
            k.c.add(1);
        }
        if !op.no_completion {
            if let Some(cq) = &st.tx_cq {
                cq.push(Completion { op_context: op.context, flags: FI_SEND | FI_MSG, ..Completion::default() });
            }
        }
        Ok(())
    }
    unsafe fn recv(&self, op: &RxOp<'_>) -> Result<()> {
        if op.tagged || op.iov.len() > IOV_MAX || op.flags & (FI_PEEK | FI_CLAIM | FI_MULTI_RECV) != 0 {
            return Err(EINVAL);
        }
        let mut st = locked(&self.shared.st);
        if st.recvs.len() >= self.shared.rx_size {
            return Err(EAGAIN);
        }
        let mut iov = [Iov::default(); IOV_MAX];
        iov[..op.iov.len()].copy_from_slice(op.iov);
        st.recvs.push_back(Posted { ctx: op.context, iov, niov: op.iov.len() });
        Ok(())
    }
    fn cancel(&self, context: usize) -> Result<()> {
        let mut st = locked(&self.shared.st);
        let i = st.recvs.iter().position(|p| p.ctx == context).ok_or(Error(FI_ENOENT))?;
        st.recvs.remove(i);
        if let Some(cq) = &st.rx_cq {
            cq.push_err(ErrCompletion { base: Completion { op_context: context, flags: FI_RECV | FI_MSG, ..Completion::default() }, err: FI_ECANCELED, ..ErrCompletion::default() });
        }
        Ok(())
    }
    fn close(&self) -> Result<()> {
        let me = self.me();
        for c in locked(&self.bound).drain(..) {
            c.bound.detach(&me);
        }
        for c in locked(&self.cntrs).drain(..) {
            c.bound.detach(&me);
        }
        let mut st = locked(&self.shared.st);
        st.enabled = false;
        st.tx_cq = None;
        st.rx_cq = None;
        st.av = None;
        Ok(())
    }
}

impl Drop for DgramEp {
    fn drop(&mut self) {
        let _ = self.close();
    }
}
