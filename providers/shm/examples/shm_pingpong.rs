//! Ping-pong latency and streaming bandwidth between two processes over
//! the shm transport, each pinned to one CPU.
//!
//! cargo run --release -p rfabric-shm --example shm_pingpong -- [--iters N]
//!     [--min SIZE] [--max SIZE] [--step N] [--sizes A,B,..] [--window N] [--cpus A,B]
//!
//! The program re-executes itself as the peer. `FI_SHM_CMA=0` forces the
//! bounce-buffer path for large messages; `FI_SHM_EAGER_MAX` sets the
//! eager/rendezvous switch.
//!
//! Columns: one-way latency as the median and the minimum over blocks of
//! round trips and as the plain mean; streaming bandwidth (up to `--window`
//! rendezvous sends in flight) as the median of 8 rounds.

use rfabric_shm::{Address, Config, Endpoint, Event, Incoming, Kind, MsgHeader, PeerId, SendStatus};
use std::time::{Duration, Instant};

const ROLE: &str = "SHM_PINGPONG_PEER";
const F_HELLO: u8 = 1;
const F_PING: u8 = 2;
const F_STREAM: u8 = 3;
const F_ACK: u8 = 4;
const F_QUIT: u8 = 5;

fn pin(cpu: usize) {
    // SAFETY: cpu_set_t is plain data; CPU_SET writes inside it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            eprintln!("warning: could not pin to cpu {cpu}");
        }
    }
}

fn die(msg: &str) -> ! {
    eprintln!("shm_pingpong: {msg}");
    std::process::exit(1)
}

fn next_event(ep: &mut Endpoint) -> Event {
    let end = Instant::now() + Duration::from_secs(30);
    let mut spins = 0u32;
    loop {
        if let Some(e) = ep.poll() {
            return e;
        }
        spins += 1;
        if spins & 4095 == 0 && Instant::now() > end {
            die("timed out");
        }
    }
}

/// Receives one message completely into `buf`.
fn recv_into(ep: &mut Endpoint, inc: &Incoming, buf: &mut [u8]) {
    match inc.kind {
        Kind::Inline { .. } => {
            ep.recv_inline(inc, buf).unwrap_or_else(|e| die(&format!("recv: {e:?}")));
        }
        Kind::Rndv { .. } => {
            // SAFETY: buf outlives the completion we wait for.
            unsafe { ep.recv_rndv(inc, buf.as_mut_ptr(), buf.len(), 1) }.unwrap_or_else(|e| die(&format!("{e:?}")));
            loop {
                match next_event(ep) {
                    Event::RecvDone { ctx: 1, .. } => break,
                    Event::SendDone { .. } => {}
                    e => die(&format!("unexpected {e:?}")),
                }
            }
        }
    }
}

/// Sends and waits for local completion.
fn send_wait(ep: &mut Endpoint, p: PeerId, flags: u8, buf: &[u8]) {
    let hdr = MsgHeader { flags, ..MsgHeader::default() };
    loop {
        // SAFETY: buf outlives the completion we wait for.
        match unsafe { ep.send(p, &hdr, buf.as_ptr(), buf.len(), 2) } {
            Ok(SendStatus::Done) => return,
            Ok(SendStatus::Pending) => break,
            Err(e) if e == rfabric_core_eagain() => {
                let _ = ep.poll();
            }
            Err(e) => die(&format!("send: {e:?}")),
        }
    }
    match next_event(ep) {
        Event::SendDone { ctx: 2 } => {}
        e => die(&format!("unexpected {e:?}")),
    }
}

fn rfabric_core_eagain() -> rfabric_core::error::Error {
    rfabric_core::error::EAGAIN
}

/// Waits for one completion while `pending` sends are in flight; an
/// acknowledgement cannot arrive before the round's last message.
fn reap(ep: &mut Endpoint, pending: usize) -> usize {
    if pending == 0 {
        let _ = ep.poll();
        return 0;
    }
    match next_event(ep) {
        Event::SendDone { ctx: 3 } => 1,
        e => die(&format!("unexpected {e:?}")),
    }
}

fn expect_msg(ep: &mut Endpoint) -> Incoming {
    match next_event(ep) {
        Event::Msg(m) => m,
        e => die(&format!("unexpected {e:?}")),
    }
}

fn peer_main(parent: &str, cpu: usize) {
    pin(cpu);
    let parent = Address::from_hex(parent).unwrap_or_else(|_| die("bad address"));
    let mut ep = Endpoint::new(Config::default()).unwrap_or_else(|e| die(&format!("{e:?}")));
    let p = ep.attach(&parent).unwrap_or_else(|e| die(&format!("attach: {e:?}")));
    ep.send_inline(p, &MsgHeader { flags: F_HELLO, ..MsgHeader::default() }, &ep.address().to_bytes()).unwrap();
    let mut buf = vec![1u8; 64 << 20]; // touched now, not during timing
    loop {
        let m = expect_msg(&mut ep);
        let n = m.len as usize;
        recv_into(&mut ep, &m, &mut buf[..n]);
        match m.hdr.flags {
            F_PING => send_wait(&mut ep, p, F_PING, &buf[..n]),
            F_STREAM => {
                if m.hdr.tag == 1 {
                    send_wait(&mut ep, p, F_ACK, &[]);
                }
            }
            F_QUIT => return,
            _ => die("bad flags"),
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mut iters = 2000usize;
    let mut max = 1usize << 22;
    let mut cpus = (0usize, 1usize);
    let mut min = 1usize;
    let mut step = 4usize;
    let mut window = 8usize;
    let mut list: Vec<usize> = Vec::new();
    let mut i = 1;
    while i < args.len() {
        let v = args.get(i + 1).cloned().unwrap_or_default();
        match args[i].as_str() {
            "--iters" => iters = v.parse().unwrap_or_else(|_| die("--iters N")),
            "--max" => max = v.parse().unwrap_or_else(|_| die("--max BYTES")),
            "--min" => min = v.parse().unwrap_or_else(|_| die("--min BYTES")),
            "--step" => step = v.parse::<usize>().unwrap_or_else(|_| die("--step N")).max(2),
            "--window" => window = v.parse::<usize>().unwrap_or_else(|_| die("--window N")).max(1),
            "--sizes" => {
                list = v.split(',').map(|x| x.parse().unwrap_or_else(|_| die("--sizes A,B,..."))).collect();
                list.sort_unstable();
                min = *list.first().unwrap_or(&1);
                max = *list.last().unwrap_or(&1);
            }
            "--cpus" => {
                let mut it = v.split(',').map(|x| x.parse::<usize>().unwrap_or_else(|_| die("--cpus A,B")));
                cpus = (it.next().unwrap_or(0), it.next().unwrap_or(1));
            }
            _ => die("usage: shm_pingpong [--iters N] [--min BYTES] [--max BYTES] [--step N] [--sizes A,B,..] [--window N] [--cpus A,B]"),
        }
        i += 2;
    }
    if let Ok(parent) = std::env::var(ROLE) {
        return peer_main(&parent, cpus.1);
    }
    pin(cpus.0);
    let mut ep = Endpoint::new(Config::default()).unwrap_or_else(|e| die(&format!("{e:?}")));
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(&args[1..])
        .env(ROLE, ep.address().to_hex())
        .spawn()
        .unwrap_or_else(|e| die(&format!("spawn: {e}")));
    let hello = expect_msg(&mut ep);
    let mut ab = [0u8; 32];
    ep.recv_inline(&hello, &mut ab).unwrap();
    let p = ep.attach(&Address::from_bytes(&ab).unwrap()).unwrap();

    let mut sbuf = vec![0u8; max.max(1)];
    for (k, b) in sbuf.iter_mut().enumerate() {
        *b = k as u8;
    }
    let mut rbuf = vec![1u8; max.max(1)];
    println!(
        "{:>10} {:>12} {:>12} {:>12} {:>12}",
        "bytes", "lat_med_us", "lat_min_us", "lat_mean_us", "bw_med_MB/s"
    );
    let mut size = min;
    while size <= max {
        let it = (iters * 4096 / size.max(4096)).clamp(20, iters);
        // Ping-pong, timed in blocks: on a shared machine the median block
        // is the latency, the mean includes time the peer was descheduled.
        let block = (it / 32).clamp(1, 256);
        let warm = it / 10 + 1;
        for _ in 0..warm {
            send_wait(&mut ep, p, F_PING, &sbuf[..size]);
            let m = expect_msg(&mut ep);
            recv_into(&mut ep, &m, &mut rbuf[..size]);
        }
        let mut blocks = Vec::new();
        let t0 = Instant::now();
        let mut done = 0;
        while done < it {
            let tb = Instant::now();
            for _ in 0..block {
                send_wait(&mut ep, p, F_PING, &sbuf[..size]);
                let m = expect_msg(&mut ep);
                recv_into(&mut ep, &m, &mut rbuf[..size]);
            }
            blocks.push(tb.elapsed().as_secs_f64() / block as f64 / 2.0 * 1e6);
            done += block;
        }
        let mean = t0.elapsed().as_secs_f64() / done as f64 / 2.0 * 1e6;
        if rbuf[..size] != sbuf[..size] {
            die("data mismatch");
        }
        blocks.sort_by(|a, b| a.total_cmp(b));
        let (lmed, lmin) = (blocks[blocks.len() / 2], blocks[0]);
        // Streaming: rounds of messages with up to `window` sends in
        // flight, one acknowledgement per round; median round.
        let rounds = 8;
        let per = (it / rounds).max(4);
        let mut bws = Vec::new();
        for _ in 0..rounds {
            let t1 = Instant::now();
            let mut pending = 0usize;
            for j in 0..per {
                let hdr = MsgHeader { flags: F_STREAM, tag: (j + 1 == per) as u64, ..MsgHeader::default() };
                loop {
                    // SAFETY: sbuf is only read and outlives every send
                    // (all complete before the round ends).
                    match unsafe { ep.send(p, &hdr, sbuf.as_ptr(), size, 3) } {
                        Ok(SendStatus::Done) => break,
                        Ok(SendStatus::Pending) => {
                            pending += 1;
                            break;
                        }
                        Err(e) if e == rfabric_core_eagain() => pending -= reap(&mut ep, pending),
                        Err(e) => die(&format!("{e:?}")),
                    }
                }
                while pending >= window {
                    pending -= reap(&mut ep, pending);
                }
            }
            while pending > 0 {
                pending -= reap(&mut ep, pending);
            }
            let ack = expect_msg(&mut ep);
            ep.discard(&ack);
            bws.push((size * per) as f64 / t1.elapsed().as_secs_f64() / 1e6);
        }
        bws.sort_by(|a, b| a.total_cmp(b));
        let bw = bws[bws.len() / 2];
        println!("{size:>10} {lmed:>12.3} {lmin:>12.3} {mean:>12.3} {bw:>12.1}");
        size = if list.is_empty() { size * step } else { list.iter().copied().find(|&x| x > size).unwrap_or(usize::MAX) };
    }
    ep.send_inline(p, &MsgHeader { flags: F_QUIT, ..MsgHeader::default() }, &[]).unwrap();
    let _ = child.wait();
}
