//! The operations of the shm endpoint (`impl Endpoint for ShmEp`): bind,
//! enable, names, send and receive (with `FI_PEEK` / `FI_CLAIM` /
//! `FI_DISCARD`), RMA and atomics (handed to `rma`), cancel, options and
//! close.

use super::*;

impl EpState {
    /// `FI_PEEK` / `FI_CLAIM` / `FI_DISCARD` (fi_trecvmsg, fi_recvmsg): looks
    /// in the unexpected queue only. Every outcome is reported on the receive
    /// CQ: a peek with the message's length, tag, data and source; a claim
    /// with the data; a discard with length 0; no match with FI_ENOMSG.
    fn search(&mut self, op: &RxOp<'_>, buf: usize, len: usize, scatter: Option<Box<Scatter>>) -> Result<()> {
        // Let arrivals reach the unexpected queue first.
        self.progress();
        let spec = if op.tagged {
            RecvSpec::tagged(op.context, buf, len, op.src, op.tag, op.ignore, op.flags)
        } else {
            RecvSpec::untagged(op.context, buf, len, op.src, op.flags)
        };
        let flags = rx_flags(op.tagged, false);
        let base = Completion { op_context: op.context, flags, src_addr: FI_ADDR_NOTAVAIL, ..Completion::default() };
        let report = |st: &EpState, c: std::result::Result<Completion, ErrCompletion>| {
            if let Some(cq) = st.rx_cq.as_ref() {
                match c {
                    Ok(c) => cq.write(c),
                    Err(e) => cq.write_err(e),
                }
            }
        };
        match self.matcher.search(&spec, op.flags) {
            Ok(Search::Peeked(i)) | Ok(Search::Claimed(i)) => {
                let c = Completion {
                    flags: rx_flags(op.tagged, i.flags & FI_REMOTE_CQ_DATA != 0),
                    len: i.len,
                    data: i.data,
                    tag: i.tag,
                    src_addr: self.av.as_ref().map_or(i.src, |av| av.reported(i.src)),
                    ..base
                };
                report(self, Ok(c));
            }
            Ok(Search::Taken(u)) => {
                let r = RxInfo {
                    ctx: op.context,
                    buf,
                    cap: len,
                    msg_len: u.len as u64,
                    flags: rx_flags(op.tagged, u.flags & FI_REMOTE_CQ_DATA != 0),
                    tag: u.tag,
                    data: u.data,
                    src: u.src,
                    complete: true,
                    unknown_src: None,
                    scatter,
                };
                self.deliver_unexp(u, r);
            }
            Ok(Search::Discarded(u)) => {
                if let Stash::Rndv(inc) = u.payload {
                    self.tp.discard(&inc);
                }
                report(self, Ok(Completion { tag: u.tag, src_addr: u.src, flags: flags | FI_DISCARD, ..base }));
            }
            Err(e) if e.0 == FI_ENOMSG => {
                report(self, Err(ErrCompletion { base, err: FI_ENOMSG, ..ErrCompletion::default() }));
            }
            Err(e) => return Err(e),
        }
        Ok(())
    }
}

impl Endpoint for ShmEp {
    fn bind(&self, target: Bind<'_>, flags: u64) -> Result<()> {
        let mut st = self.shared.st.lock();
        if st.enabled {
            return Err(Error(FI_EOPBADSTATE));
        }
        match target {
            Bind::Cq(cq) => {
                if flags & !(FI_TRANSMIT | FI_RECV | FI_SELECTIVE_COMPLETION) != 0 || flags & (FI_TRANSMIT | FI_RECV) == 0 {
                    return Err(Error(FI_EBADFLAGS));
                }
                let cq = cq.clone().as_any_arc().downcast::<ShmCq>().map_err(|_| EINVAL)?;
                if flags & FI_TRANSMIT != 0 {
                    if st.tx_cq.is_some() {
                        return Err(EINVAL);
                    }
                    st.tx_cq = Some(cq.clone());
                    st.tx_selective = flags & FI_SELECTIVE_COMPLETION != 0;
                }
                if flags & FI_RECV != 0 {
                    if st.rx_cq.is_some() {
                        return Err(EINVAL);
                    }
                    st.rx_cq = Some(cq.clone());
                    st.rx_selective = flags & FI_SELECTIVE_COMPLETION != 0;
                }
                drop(st);
                cq.attach(&self.shared);
                Ok(())
            }
            Bind::Av(av) => {
                if flags != 0 {
                    return Err(Error(FI_EBADFLAGS));
                }
                if st.av.is_some() {
                    return Err(EINVAL);
                }
                st.av = Some(av.clone().as_any_arc().downcast::<ShmAv>().map_err(|_| EINVAL)?);
                Ok(())
            }
            Bind::Cntr(c) => {
                Cntr::check_bind_flags(flags)?;
                let c = c.clone().as_any_arc().downcast::<ShmCntr>().map_err(|_| EINVAL)?;
                if flags & FI_SEND != 0 {
                    if st.send_cntr.is_some() {
                        return Err(EINVAL);
                    }
                    st.send_cntr = Some(c.clone());
                }
                if flags & FI_RECV != 0 {
                    if st.recv_cntr.is_some() {
                        return Err(EINVAL);
                    }
                    st.recv_cntr = Some(c.clone());
                }
                if flags & !(FI_SEND | FI_RECV) != 0 {
                    st.rma.bind_cntr(flags, &c)?;
                    st.other_cntrs.push(c.clone());
                }
                drop(st);
                c.attach(&self.shared);
                Ok(())
            }
            Bind::Eq(_) | Bind::Srx(_) => Err(ENOSYS),
        }
    }

    fn enable(&self) -> Result<()> {
        let mut st = self.shared.st.lock();
        if st.av.is_none() {
            return Err(Error(FI_ENOAV));
        }
        if st.tx_cq.is_none() && st.rx_cq.is_none() && st.send_cntr.is_none() && st.recv_cntr.is_none() && !st.rma.has_cntr() {
            return Err(Error(FI_ENOCQ));
        }
        st.enabled = true;
        drop(st);
        if self.auto_progress {
            self.start_progress()?;
        }
        Ok(())
    }

    fn setname(&self, addr: &[u8]) -> Result<()> {
        let r = self.shared.st.lock().set_name(addr, true);
        r.map_err(|(e, why)| {
            rfabric_core::fi_warn!("shm", FI_LOG_EP_CTRL, "fi_setname refused ({}): {}", e, why);
            e
        })
    }

    fn getname(&self, buf: &mut [u8]) -> Result<usize> {
        let st = self.shared.st.lock();
        let mut s = match st.name.as_ref() {
            Some((n, _)) => format!("{ADDR_PREFIX}{n}").into_bytes(),
            None => addr_to_str(&st.tp.address()).into_bytes(),
        };
        drop(st);
        s.push(0);
        let n = buf.len().min(s.len());
        buf[..n].copy_from_slice(&s[..n]);
        Ok(s.len())
    }

    // Inlined into the `Checked` wrapper of every endpoint (its only caller on
    // the data path), so a send stays one indirect call from the C API.
    #[inline(always)]
    unsafe fn send(&self, op: &TxOp<'_>) -> Result<()> {
        let mut st = self.shared.st.lock();
        if !st.enabled {
            return Err(Error(FI_EOPBADSTATE));
        }
        let peer = st.peer(op.dest)?;
        let inject = op.no_completion || op.flags & FI_INJECT != 0;
        let mut flags = 0;
        if op.tagged {
            flags |= UF_TAGGED;
        }
        if op.flags & FI_REMOTE_CQ_DATA != 0 {
            flags |= UF_DATA;
        }
        let hdr = MsgHeader { flags, tag: op.tag, cq_data: op.data };
        // Gather several buffers through the stack when they fit inline,
        // through the heap otherwise (kept until the send completes).
        // Not zeroed: only the `total` bytes copied in below are ever read.
        let mut gather = std::mem::MaybeUninit::<[u8; crate::provider::INJECT_SIZE]>::uninit();
        let mut heap: Option<Vec<u8>> = None;
        let (buf, len) = match op.iov {
            [] => (std::ptr::null::<u8>(), 0usize),
            [one] => (one.base as *const u8, one.len),
            many => {
                let total = many.iter().try_fold(0usize, |a, v| a.checked_add(v.len)).ok_or(EINVAL)?;
                if inject && total > crate::provider::INJECT_SIZE {
                    return Err(EINVAL);
                }
                let dst: *mut u8 = if total > crate::provider::INJECT_SIZE {
                    heap.insert(vec![0u8; total]).as_mut_ptr()
                } else {
                    gather.as_mut_ptr() as *mut u8
                };
                let mut at = 0;
                for v in many {
                    if v.len > 0 {
                        // SAFETY: each iov is readable (send contract); the
                        // total fits the destination chosen above.
                        unsafe { rfabric_core::copy::copy_bytes(v.base as *const u8, dst.add(at), v.len) };
                    }
                    at += v.len;
                }
                (dst as *const u8, total)
            }
        };
        if inject && len > crate::provider::INJECT_SIZE {
            return Err(EINVAL);
        }
        let cflags = FI_SEND | if op.tagged { FI_TAGGED } else { FI_MSG };
        let complete = !op.no_completion && (!st.tx_selective || op.flags & FI_COMPLETION != 0);
        let eager = len <= st.tp.inline_max(peer)?;
        let s: &mut EpState = &mut st;
        if op.flags & FI_DELIVERY_COMPLETE != 0 && eager && !inject {
            let info = TxInfo { ctx: op.context, flags: cflags, complete, gather: heap };
            // SAFETY: buf is readable for len bytes during this call.
            return unsafe { s.send_delivery(op.dest, peer, hdr, buf, len, info) };
        }
        if eager {
            // The common case: the send completes inside this call. The CQ
            // ring is locked once, for the room check and the completion
            // (order: endpoint, then ring, as everywhere).
            let mut ring = match (complete, s.tx_cq.as_ref()) {
                (true, Some(cq)) => Some(cq.ring.lock()),
                _ => None,
            };
            if ring.as_ref().is_some_and(|r| r.space() == 0) {
                // The completion would not fit: the application must read its CQ.
                drop(ring);
                s.progress();
                return Err(EAGAIN);
            }
            // SAFETY: buf is readable for len bytes during this call
            // (contract of this function; gathered data is on our stack).
            let r = unsafe { s.tp.send(peer, &hdr, buf, len, 0) };
            return match r {
                Ok(SendStatus::Done) => {
                    if let Some(c) = s.send_cntr.as_ref() {
                        c.c.add(1);
                    }
                    if let Some(r) = ring.as_mut() {
                        let c = Completion { op_context: op.context, flags: cflags, src_addr: FI_ADDR_NOTAVAIL, ..Completion::default() };
                        r.push(c);
                    }
                    Ok(())
                }
                Ok(SendStatus::Pending) => {
                    // Not expected for an inline send; keep it like a
                    // rendezvous one would be kept.
                    drop(ring);
                    let info = TxInfo { ctx: op.context, flags: cflags, complete, gather: heap };
                    s.tx_pending[0] = Some(info);
                    Ok(())
                }
                Err(e) => {
                    drop(ring);
                    if e == EAGAIN {
                        s.progress();
                    }
                    Err(e)
                }
            };
        }
        if complete && EpState::room(&s.tx_cq) == 0 {
            // The completion would not fit: the application must read its CQ.
            s.progress();
            return Err(EAGAIN);
        }
        let info = TxInfo { ctx: op.context, flags: cflags, complete, gather: heap };
        let tok = s.tx_pending.iter().position(|p| p.is_none()).ok_or(EAGAIN)?;
        // SAFETY: buf is readable for len bytes until the send completes
        // (contract of this function; gathered data lives on the heap in
        // `info.gather`, which tx_pending keeps until then).
        let r = unsafe { s.tp.send(peer, &hdr, buf, len, tok as u64) };
        let st = s;
        match r {
            Ok(SendStatus::Done) => {
                st.complete_tx(info, Ok(()));
                Ok(())
            }
            Ok(SendStatus::Pending) => {
                st.tx_pending[tok] = Some(info);
                Ok(())
            }
            Err(e) => {
                if e == EAGAIN {
                    st.progress();
                }
                Err(e)
            }
        }
    }

    // Inlined into the `Checked` wrapper of every endpoint (its only caller on
    // the data path), so a receive stays one indirect call from the C API.
    #[inline(always)]
    unsafe fn recv(&self, op: &RxOp<'_>) -> Result<()> {
        let multi = op.flags & FI_MULTI_RECV != 0;
        let mut scatter = None;
        let (buf, len) = match op.iov {
            [] => (0, 0),
            [one] => (one.base, one.len),
            _ if multi => return Err(EINVAL),
            many => {
                let sc = Scatter::new(many)?;
                let l = sc.tmp.len();
                scatter = Some(sc);
                (0, l)
            }
        };
        let mut st = self.shared.st.lock();
        if !st.enabled {
            return Err(Error(FI_EOPBADSTATE));
        }
        if op.flags & (FI_PEEK | FI_CLAIM) != 0 {
            return st.search(op, buf, len, scatter);
        }
        if op.flags & FI_DISCARD != 0 {
            return Err(EINVAL);
        }
        let spec = if op.tagged {
            RecvSpec::tagged(op.context, buf, len, op.src, op.tag, op.ignore, op.flags)
        } else {
            RecvSpec::untagged(op.context, buf, len, op.src, op.flags)
        };
        let complete = !st.rx_selective || op.flags & FI_COMPLETION != 0;
        if multi {
            // Post first, then feed queued messages to the buffer one slice
            // at a time (the matcher cuts the slices and says when the
            // buffer is released).
            st.matcher.post(spec, None)?;
            // A message leaves the queue only with the receive that takes
            // it (the buffer just posted, or an older one that matches).
            while let Some((u, m)) = st.matcher.take_unexpected_matched(&spec) {
                let released = m.flags & FI_MULTI_RECV != 0;
                let r = RxInfo {
                    ctx: m.ctx,
                    buf: m.buf,
                    cap: m.cap,
                    msg_len: u.len as u64,
                    flags: rx_flags(op.tagged, u.flags & FI_REMOTE_CQ_DATA != 0) | (m.flags & FI_MULTI_RECV),
                    tag: u.tag,
                    data: u.data,
                    src: u.src,
                    complete,
                    unknown_src: None,
                    scatter: None,
                };
                st.deliver_unexp(u, r);
                if released {
                    break;
                }
            }
            return Ok(());
        }
        if let Some(u) = st.matcher.take_unexpected(&spec) {
            let r = RxInfo {
                ctx: op.context,
                buf,
                cap: len,
                msg_len: u.len as u64,
                flags: rx_flags(op.tagged, u.flags & FI_REMOTE_CQ_DATA != 0),
                tag: u.tag,
                data: u.data,
                src: u.src,
                complete,
                unknown_src: None,
                scatter,
            };
            st.deliver_unexp(u, r);
            return Ok(());
        }
        st.matcher.post(spec, scatter)
    }

    unsafe fn rma_read(&self, op: &rfabric_core::provider::RmaOp<'_>) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe { self.shared.st.lock().rma_submit(false, op) }
    }
    unsafe fn rma_write(&self, op: &rfabric_core::provider::RmaOp<'_>) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe { self.shared.st.lock().rma_submit(true, op) }
    }
    unsafe fn atomic(&self, op: &rfabric_core::provider::AtomicOp<'_>) -> Result<()> {
        // SAFETY: forwarded contract.
        unsafe { self.shared.st.lock().atomic_submit(op) }
    }
    fn atomic_valid(&self, kind: rfabric_core::provider::AtomicKind, op: u32, datatype: u32) -> Result<usize> {
        rfabric_core::objects::atomic::valid(kind, op, datatype, rma::ATOMIC_MAX_BYTES).ok_or(Error(FI_EOPNOTSUPP))
    }

    fn cancel(&self, context: usize) -> Result<()> {
        let st = self.shared.st.lock();
        let mut st = st;
        match st.matcher.cancel(context) {
            Some(p) => {
                if let Some(cq) = st.rx_cq.as_ref() {
                    let base = Completion {
                        op_context: context,
                        flags: rx_flags(p.spec.tagged, false),
                        buf: p.spec.buf,
                        src_addr: FI_ADDR_NOTAVAIL,
                        ..Completion::default()
                    };
                    cq.write_err(ErrCompletion { base, err: FI_ECANCELED, ..ErrCompletion::default() });
                }
                if let Some(c) = st.recv_cntr.as_ref() {
                    c.c.adderr(1);
                }
                Ok(())
            }
            None => Err(Error(FI_ENOENT)),
        }
    }

    fn getopt(&self, level: i32, name: i32, buf: &mut [u8]) -> Result<usize> {
        if level != FI_OPT_ENDPOINT {
            return Err(Error(FI_ENOPROTOOPT));
        }
        match name {
            FI_OPT_MIN_MULTI_RECV => {
                let v = self.shared.st.lock().min_multi_recv.to_ne_bytes();
                if buf.len() < v.len() {
                    return Err(Error(FI_ETOOSMALL));
                }
                buf[..v.len()].copy_from_slice(&v);
                Ok(v.len())
            }
            _ => Err(Error(FI_ENOPROTOOPT)),
        }
    }

    fn setopt(&self, level: i32, name: i32, val: &[u8]) -> Result<()> {
        if level != FI_OPT_ENDPOINT {
            return Err(Error(FI_ENOPROTOOPT));
        }
        match name {
            FI_OPT_MIN_MULTI_RECV => {
                let v = usize::from_ne_bytes(val.try_into().map_err(|_| EINVAL)?);
                let mut st = self.shared.st.lock();
                st.min_multi_recv = v;
                st.matcher.set_min_multi_recv(v);
                Ok(())
            }
            _ => Err(Error(FI_ENOPROTOOPT)),
        }
    }

    fn close(&self) -> Result<()> {
        self.stop_progress();
        let mut st = self.shared.st.lock();
        st.flush_replies();
        st.enabled = false;
        st.name = None;
        let tx = st.tx_cq.take();
        let rx = st.rx_cq.take();
        st.av = None;
        st.rma.clear();
        let mut cntrs: Vec<Arc<ShmCntr>> = std::mem::take(&mut st.other_cntrs);
        cntrs.extend(st.send_cntr.take());
        cntrs.extend(st.recv_cntr.take());
        drop(st);
        for cq in [tx, rx].into_iter().flatten() {
            cq.detach(&self.shared);
        }
        for c in cntrs {
            c.detach(&self.shared);
        }
        Ok(())
    }
}
