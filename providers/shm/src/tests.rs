//! Tests that run real peer processes: the test binary re-executes itself
//! with `RFSHM_ROLE` set, running only the `child_entry` test, which then
//! plays the requested role.

use crate::cma::{CmaMode, CMA_SLOW_NS};
use crate::endpoint::{
    default_eager_limits, eager_capacity, eager_cells, shared_chunk, Config, Endpoint, Event, Incoming, Kind, MsgHeader, SendStatus, Wire, DEFAULT_EAGER_MAX, SLOW_CMA_EAGER_MAX,
    OP_EAGER, OP_HELP, SHARED_COPY_MIN,
    OP_FIN, OP_RTS, TINY_MAX,
};
use crate::peer::{Address, PeerId};
use crate::segment::{self, Geometry, Segment};
use rfabric_core::error::{Error, EINVAL};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const ROLE: &str = "RFSHM_ROLE";
const PEER: &str = "RFSHM_PEER";
const ARG: &str = "RFSHM_ARG";

const F_HELLO: u8 = 0x40;
const F_QUIT: u8 = 0x41;

fn spawn(role: &str, peer: Option<&Address>, arg: &str, cma: &str, stdout: bool) -> Child {
    spawn_env(role, peer, arg, cma, stdout, &[])
}

fn spawn_env(role: &str, peer: Option<&Address>, arg: &str, cma: &str, stdout: bool, env: &[(&str, String)]) -> Child {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.envs(env.iter().map(|(k, v)| (*k, v.as_str())));
    c.args(["tests::child_entry", "--exact", "--nocapture", "--test-threads=1", "-q"])
        .env(ROLE, role)
        .env(ARG, arg);
    // "" leaves the choice to the provider (unset); an empty value would
    // be read as a bad boolean.
    if cma.is_empty() {
        c.env_remove("FI_SHM_CMA");
    } else {
        c.env("FI_SHM_CMA", cma);
    }
    if let Some(p) = peer {
        c.env(PEER, p.to_hex());
    }
    c.stdout(if stdout { Stdio::piped() } else { Stdio::null() });
    c.spawn().unwrap()
}

/// The tests' endpoints take the eager limits of a machine where CMA is
/// fast, whatever this one measures (`slow_cma_eager_limits` takes the
/// other's).
fn cfg(cma: CmaMode) -> Config {
    Config { cma, page_read_ns: || None, ..Config::default() }
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u32).wrapping_mul(2654435761).rotate_left(7) as u8 ^ seed).collect()
}

/// Polls until an event arrives or the deadline passes (test failure).
fn wait(ep: &mut Endpoint, secs: u64) -> Event {
    let end = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(e) = ep.poll() {
            return e;
        }
        assert!(Instant::now() < end, "timed out waiting for an event");
        std::thread::yield_now();
    }
}

/// Receives the payload of `inc` completely (bounded wait). Send
/// completions seen meanwhile are counted in `sends_done`.
fn take(ep: &mut Endpoint, inc: &Incoming, sends_done: &mut u32) -> Result<Vec<u8>, Error> {
    let mut buf = vec![0u8; inc.len as usize];
    match inc.kind {
        Kind::Inline { .. } => {
            let n = ep.recv_inline(inc, &mut buf)?;
            assert_eq!(n, buf.len());
        }
        Kind::Rndv { .. } => {
            // SAFETY: buf outlives the wait below.
            unsafe { ep.recv_rndv(inc, buf.as_mut_ptr(), buf.len(), 77) }?;
            loop {
                match wait(ep, 30) {
                    Event::RecvDone { ctx: 77, len } => {
                        assert_eq!(len, inc.len);
                        break;
                    }
                    Event::RecvError { ctx: 77, err } => return Err(err),
                    Event::SendDone { .. } => *sends_done += 1,
                    e => panic!("unexpected {e:?}"),
                }
            }
        }
    }
    Ok(buf)
}

/// Sends `data` and (for rendezvous) keeps polling until the completion;
/// an incoming message seen meanwhile is returned.
fn send_all(ep: &mut Endpoint, peer: PeerId, hdr: &MsgHeader, data: &[u8]) -> (Result<(), Error>, Option<Incoming>) {
    let end = Instant::now() + Duration::from_secs(30);
    let st = loop {
        // SAFETY: data stays alive until the completion we wait for below.
        match unsafe { ep.send(peer, hdr, data.as_ptr(), data.len(), 5) } {
            Ok(s) => break s,
            Err(e) if e == rfabric_core::error::EAGAIN => {
                assert!(Instant::now() < end, "send stuck");
                let _ = ep.poll();
                std::thread::yield_now();
            }
            Err(e) => return (Err(e), None),
        }
    };
    if st == SendStatus::Done {
        return (Ok(()), None);
    }
    let mut pending = None;
    loop {
        match wait(ep, 30) {
            Event::SendDone { ctx: 5 } => return (Ok(()), pending),
            Event::SendError { ctx: 5, err } => return (Err(err), pending),
            Event::Msg(m) if pending.is_none() => pending = Some(m),
            e => panic!("unexpected {e:?}"),
        }
    }
}

/// Child side: endpoint, attach to the parent, say hello with our address.
fn child_connect() -> (Endpoint, PeerId) {
    let parent = Address::from_hex(&std::env::var(PEER).unwrap()).unwrap();
    let mut ep = Endpoint::new(Config::default()).unwrap();
    let p = ep.attach(&parent).unwrap();
    let hello = MsgHeader { flags: F_HELLO, ..MsgHeader::default() };
    ep.send_inline(p, &hello, &ep.address().to_bytes()).unwrap();
    (ep, p)
}

/// Parent side: wait for the child's hello and attach to it.
fn parent_accept(ep: &mut Endpoint) -> PeerId {
    match wait(ep, 30) {
        Event::Msg(inc) if inc.hdr.flags == F_HELLO => {
            let mut b = [0u8; 32];
            ep.recv_inline(&inc, &mut b).unwrap();
            let a = Address::from_bytes(&b).unwrap();
            assert_eq!(a.key(), inc.src_key);
            ep.attach(&a).unwrap()
        }
        e => panic!("expected hello, got {e:?}"),
    }
}

#[test]
fn child_entry() {
    let Ok(role) = std::env::var(ROLE) else { return };
    let arg = std::env::var(ARG).unwrap_or_default();
    match role.as_str() {
        "attach" => {
            // Exit status: how the memory was obtained (attach_code), else
            // the errno-style code.
            std::process::exit(attach_code(Segment::attach_name(&arg, None)));
        }
        "nodump_holder" => {
            // An owner whose /proc entries others may not read (and that
            // others may not ptrace): peers must come through the handover.
            // SAFETY: prctl with integer arguments only.
            assert_eq!(unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) }, 0);
            let mut ep = Endpoint::new(Config::default()).unwrap();
            println!("addr {}", ep.address().to_hex());
            match wait(&mut ep, 30) {
                Event::Msg(inc) if inc.hdr.flags == F_HELLO => {
                    let mut b = [0u8; 32];
                    ep.recv_inline(&inc, &mut b).unwrap();
                    let a = Address::from_bytes(&b).unwrap();
                    std::process::exit(if a.key() == inc.src_key { 0 } else { 1 });
                }
                e => panic!("expected hello, got {e:?}"),
            }
        }
        "hello_via" => {
            // Attaches to PEER, reports how (exit status, attach_code) after
            // saying hello through the ring.
            let peer = Address::from_hex(&std::env::var(PEER).unwrap()).unwrap();
            let code = attach_code(Segment::attach(peer.pid, &peer.nonce));
            let mut ep = Endpoint::new(Config { cma: CmaMode::Off, ..Config::default() }).unwrap();
            let p = ep.attach(&peer).unwrap();
            let hello = MsgHeader { flags: F_HELLO, ..MsgHeader::default() };
            ep.send_inline(p, &hello, &ep.address().to_bytes()).unwrap();
            std::process::exit(code);
        }
        "holder" => {
            let ep = Endpoint::new(Config::default()).unwrap();
            println!("{}", ep.segment().name());
            std::thread::sleep(Duration::from_secs(60));
        }
        "echo" => {
            let (mut ep, p) = child_connect();
            let mut sends = 0;
            loop {
                let Event::Msg(inc) = wait(&mut ep, 60) else { continue };
                if inc.hdr.flags == F_QUIT {
                    ep.discard(&inc);
                    std::process::exit(0);
                }
                let mut data = take(&mut ep, &inc, &mut sends).unwrap();
                for b in data.iter_mut() {
                    *b = b.wrapping_add(1);
                }
                let hdr = MsgHeader { tag: inc.hdr.tag + 1, ..inc.hdr };
                let (r, extra) = send_all(&mut ep, p, &hdr, &data);
                r.unwrap();
                assert!(extra.is_none());
            }
        }
        "die_on_rts" => {
            // Receives the announcement of a large message, then dies
            // without pulling it.
            let (mut ep, _p) = child_connect();
            loop {
                if let Event::Msg(inc) = wait(&mut ep, 60) {
                    assert!(matches!(inc.kind, Kind::Rndv { .. }));
                    // SAFETY: plain process exit.
                    unsafe { libc::_exit(3) };
                }
            }
        }
        "rts_then_die" => {
            // Posts a 16 MiB send without saying hello (the parent never
            // attaches us before we are gone), then exits.
            let parent = Address::from_hex(&std::env::var(PEER).unwrap()).unwrap();
            let mut ep = Endpoint::new(Config::default()).unwrap();
            let p = ep.attach(&parent).unwrap();
            let data = pattern(16 << 20, 2);
            // SAFETY: data outlives the process.
            let st = unsafe { ep.send(p, &MsgHeader::default(), data.as_ptr(), data.len(), 1) }.unwrap();
            assert_eq!(st, SendStatus::Pending);
            // SAFETY: plain process exit.
            unsafe { libc::_exit(5) };
        }
        "send_then_die" => {
            let (mut ep, p) = child_connect();
            let data = pattern(16 << 20, 1);
            // SAFETY: data outlives the process.
            let st = unsafe { ep.send(p, &MsgHeader::default(), data.as_ptr(), data.len(), 1) }.unwrap();
            assert_eq!(st, SendStatus::Pending);
            for _ in 0..10 {
                let _ = ep.poll();
            }
            std::thread::sleep(Duration::from_millis(200));
            // SAFETY: plain process exit.
            unsafe { libc::_exit(4) };
        }
        r => panic!("unknown role {r}"),
    }
}

/// Exit status of the "attach" roles: 0 through /proc, 250 pidfd_getfd,
/// 251 handover, 252 created, 253 a stand-in; an errno-style code on
/// failure.
fn attach_code(r: Result<Segment, Error>) -> i32 {
    match r.map(|s| s.fd_source()) {
        Ok(segment::FdSource::Proc) => 0,
        Ok(segment::FdSource::Pidfd) => 250,
        Ok(segment::FdSource::Handover) => 251,
        Ok(segment::FdSource::Created) => 252,
        Ok(segment::FdSource::Gone) => 253,
        Err(e) => e.0,
    }
}
const VIA_HANDOVER: i32 = 251;
/// linux/capability.h
const CAP_SYS_PTRACE: libc::c_ulong = 19;

fn fstat_fd(fd: i32) -> libc::stat {
    // SAFETY: zeroed stat is a valid out-parameter; fd is open.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        assert_eq!(libc::fstat(fd, &mut st), 0);
        st
    }
}

#[test]
fn segment_create_permissions_unlink() {
    let seg = Segment::create(Geometry::default()).unwrap();
    let path = format!("{}/{}", segment::SHM_DIR, seg.name());
    use std::os::unix::fs::MetadataExt;
    // The locator: 0600, ours, one record (never mapped by anyone).
    let md = std::fs::symlink_metadata(&path).unwrap();
    assert_eq!(md.mode() & 0o777, 0o600);
    // SAFETY: geteuid cannot fail.
    let uid = unsafe { libc::geteuid() };
    assert_eq!(md.uid(), uid);
    assert_eq!(md.len(), segment::LOCATOR_LEN as u64);
    // The memory: 0600, ours, sealed, so it cannot be truncated or grown.
    let fd = seg.owner_fd().unwrap();
    let st = fstat_fd(fd);
    assert_eq!((st.st_mode & 0o777, st.st_uid), (0o600, uid));
    assert_eq!(st.st_size as u64, Geometry::default().total_size());
    assert_eq!(crate::fdpass::seals(fd) & crate::fdpass::SEALS, crate::fdpass::SEALS);
    // SAFETY: our own descriptor; both calls must fail.
    unsafe {
        assert_ne!(libc::ftruncate(fd, 0), 0);
        assert_ne!(libc::ftruncate(fd, st.st_size + 4096), 0);
    }
    // The name carries 128 random bits: two segments never collide.
    let seg2 = Segment::create(Geometry::default()).unwrap();
    assert_ne!(seg.name(), seg2.name());
    assert_eq!(seg.name().len(), segment::NAME_PREFIX.len() + std::process::id().to_string().len() + 1 + 32);
    let name = seg.name().to_string();
    assert!(crate::fdpass::from_handover(&name, std::process::id()).is_ok());
    drop(seg);
    assert!(std::fs::symlink_metadata(&path).is_err(), "unlinked on close");
    assert_eq!(crate::fdpass::from_handover(&name, std::process::id()).err(), Some(Error(libc::ENOENT)), "handover stopped");
    drop(seg2);
    assert!(Segment::create(Geometry { ncells: 3, ..Geometry::default() }).is_err());
}

fn child_attach(name: &str) -> i32 {
    spawn("attach", None, name, "", false).wait().unwrap().code().unwrap()
}

#[test]
fn segment_attach_validation_in_other_process() {
    let seg = Segment::create(Geometry::default()).unwrap();
    let name = seg.name().to_string();
    assert_eq!(child_attach(&name), 0);
    let base = seg.base();
    let poke = |off: usize, v: u32| {
        // SAFETY: offsets inside our own header page.
        unsafe {
            let p = base.add(off).cast::<u32>();
            let old = p.read_volatile();
            p.write_volatile(v);
            old
        }
    };
    // Wrong magic.
    let old = poke(0, 0xdead_beef);
    assert_eq!(child_attach(&name), libc::EINVAL);
    poke(0, old);
    // Wrong layout version (offset 8).
    let old = poke(8, 99);
    assert_eq!(child_attach(&name), libc::EINVAL);
    poke(8, old);
    // Wrong size recorded (total_size at offset 16).
    let old = poke(16, 12345);
    assert_eq!(child_attach(&name), libc::EINVAL);
    poke(16, old);
    // Geometry out of bounds (ncells at offset 72).
    let old = poke(72, 3);
    assert_eq!(child_attach(&name), libc::EINVAL);
    poke(72, old);
    assert_eq!(child_attach(&name), 0);
    // Group/other permission bits on the memory are refused, whichever
    // way it is reached.
    let fd = seg.owner_fd().unwrap();
    // SAFETY: our own descriptor.
    assert_eq!(unsafe { libc::fchmod(fd, 0o644) }, 0);
    assert_eq!(child_attach(&name), libc::EPERM);
    // SAFETY: as above.
    assert_eq!(unsafe { libc::fchmod(fd, 0o600) }, 0);
    assert_eq!(child_attach(&name), 0);
    // The locator only says where to look: damaged, wrong or missing, the
    // owner's handover thread still hands over the (checked) memory.
    let path = format!("{}/{}", segment::SHM_DIR, name);
    let saved = std::fs::read(&path).unwrap();
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    for len in [0, 1, segment::LOCATOR_LEN as u64 + 4096] {
        f.set_len(len).unwrap();
        assert_eq!(child_attach(&name), VIA_HANDOVER, "locator of {len} bytes");
    }
    // Another descriptor number (48: the fd field): stdin of the owner
    // fails the identity check before it is opened.
    let mut bad = saved.clone();
    bad[48..52].copy_from_slice(&0i32.to_le_bytes());
    std::fs::write(&path, &bad).unwrap();
    assert_eq!(child_attach(&name), VIA_HANDOVER);
    std::fs::write(&path, &saved).unwrap();
    assert_eq!(child_attach(&name), 0);
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    assert_eq!(child_attach(&name), VIA_HANDOVER);
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::rename(&path, format!("{path}.away")).unwrap();
    assert_eq!(child_attach(&name), VIA_HANDOVER);
    std::fs::rename(format!("{path}.away"), &path).unwrap();
    assert_eq!(child_attach(&name), 0);
    // Names outside our namespace and missing segments.
    assert_eq!(child_attach("rfabric-shm.1.00"), libc::ENOENT);
    assert_eq!(Segment::attach_name("../etc/passwd", None).err(), Some(EINVAL));
    // Identity must match the address.
    let h = *seg.header();
    assert!(Segment::attach(h.pid, &h.nonce).is_ok());
    let mut n2 = h.nonce;
    n2[0] ^= 1;
    assert_eq!(Segment::attach(h.pid, &n2).err(), Some(Error(libc::ENOENT)));
}

/// A peer that may neither read the owner's /proc entries nor ptrace it
/// (the owner is not dumpable; the peer runs without CAP_SYS_PTRACE) gets
/// the memory from the owner's handover thread, and messages flow.
#[test]
fn attach_without_ptrace_rights_uses_handover() {
    let mut owner = spawn("nodump_holder", None, "", "", true);
    let mut rd = BufReader::new(owner.stdout.take().unwrap());
    let addr = loop {
        let mut line = String::new();
        assert!(rd.read_line(&mut line).unwrap() > 0, "owner ended early");
        if let Some(hex) = line.trim().strip_prefix("addr ") {
            break Address::from_hex(hex).unwrap();
        }
    };
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args(["tests::child_entry", "--exact", "--nocapture", "--test-threads=1", "-q"])
        .env(ROLE, "hello_via")
        .env(PEER, addr.to_hex())
        .stdout(Stdio::null());
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure only makes a system call (async-signal-safe).
    unsafe {
        c.pre_exec(|| {
            // Root keeps CAP_SYS_PTRACE across exec unless it leaves the
            // bounding set; for other users this fails and changes nothing.
            libc::prctl(libc::PR_CAPBSET_DROP, CAP_SYS_PTRACE, 0, 0, 0);
            Ok(())
        })
    };
    let code = c.status().unwrap().code();
    assert_eq!(code, Some(VIA_HANDOVER));
    assert_eq!(owner.wait().unwrap().code(), Some(0), "the owner got the hello");
}

#[test]
fn stale_segment_reclaimed_after_kill() {
    // Our own endpoint first: runs the once-per-process reclaim now.
    let mine = Endpoint::new(Config::default()).unwrap();
    let mut child = spawn("holder", None, "", "", true);
    // The harness prints its own lines too; ours is the segment name.
    let mut rd = BufReader::new(child.stdout.take().unwrap());
    let name = loop {
        let mut line = String::new();
        assert!(rd.read_line(&mut line).unwrap() > 0, "child ended early");
        if line.starts_with(segment::NAME_PREFIX) {
            break line.trim().to_string();
        }
    };
    let path = format!("{}/{}", segment::SHM_DIR, name);
    assert!(std::path::Path::new(&path).exists());
    segment::reclaim_stale();
    assert!(std::path::Path::new(&path).exists(), "live owner keeps its segment");
    child.kill().unwrap();
    child.wait().unwrap();
    // SIGKILL leaves the locator behind; a process of another test that
    // opens its first endpoint now may reclaim it before we do.
    if std::path::Path::new(&path).exists() {
        assert!(segment::reclaim_stale() >= 1);
    }
    assert!(!std::path::Path::new(&path).exists(), "the dead holder's segment is reclaimed");
    let own = format!("{}/{}", segment::SHM_DIR, mine.segment().name());
    assert!(std::path::Path::new(&own).exists(), "our own segment survives");
}

fn echo_sizes(parent_cma: CmaMode, child_cma: &str, sizes: &[usize]) {
    echo_sizes_eager(parent_cma, child_cma, sizes, None)
}

/// `eager`: one fixed eager limit for both sides instead of the adaptive
/// default (which sends medium sizes by rendezvous in a ping-pong).
fn echo_sizes_eager(parent_cma: CmaMode, child_cma: &str, sizes: &[usize], eager: Option<usize>) {
    let mut ep = Endpoint::new(cfg(parent_cma)).unwrap();
    let env: Vec<(&str, String)> = eager.iter().map(|e| ("FI_SHM_EAGER_MAX", e.to_string())).collect();
    if let Some(e) = eager {
        ep.set_eager_max(e);
    }
    let mut child = spawn_env("echo", Some(&ep.address()), "", child_cma, false, &env);
    let p = parent_accept(&mut ep);
    let mut sends = 0;
    for (i, &n) in sizes.iter().enumerate() {
        let data = pattern(n, i as u8);
        let hdr = MsgHeader { flags: 1, tag: 1000 + i as u64, cq_data: n as u64 };
        let (r, got) = send_all(&mut ep, p, &hdr, &data);
        r.unwrap_or_else(|e| panic!("send {n}: {e:?}"));
        let inc = match got {
            Some(m) => m,
            None => match wait(&mut ep, 30) {
                Event::Msg(m) => m,
                e => panic!("unexpected {e:?}"),
            },
        };
        assert_eq!(inc.hdr.tag, 1001 + i as u64);
        assert_eq!(inc.hdr.cq_data, n as u64);
        assert_eq!(inc.len, n as u64);
        let back = take(&mut ep, &inc, &mut sends).unwrap();
        let ok = back.iter().zip(&data).all(|(b, d)| *b == d.wrapping_add(1));
        assert!(ok && back.len() == n, "data mismatch at size {n}");
    }
    ep.send_inline(p, &MsgHeader { flags: F_QUIT, ..MsgHeader::default() }, &[]).unwrap();
    assert!(child.wait().unwrap().success());
    assert_eq!(ep.in_flight(), 0);
}

const CELL: usize = 64 + 4096;
/// Payload per cell with the default geometry.
const CP: usize = 4096;
const LARGE: &[usize] = &[1, CELL - 1, CELL, CELL + 1, 4095, 4096, 4097, 6144, 65536, 65537, 1 << 20, 16 << 20];

#[test]
fn small_pingpong_two_processes() {
    let sizes: Vec<usize> = [0usize, 1, 7, 8, 55, 56, 63, 64, 65, 100, 1000, 4000, 4096].iter().cycle().take(200).copied().collect();
    echo_sizes(CmaMode::Auto, "", &sizes);
}

/// Sizes around every protocol switch: tiny (one line), one cell, each
/// multi-cell step up to the eager limit, and the first rendezvous size.
fn boundary_sizes() -> Vec<usize> {
    let mut v = vec![0, 1, 23, 24, 25, 31, 32, 33, TINY_MAX - 1, TINY_MAX, TINY_MAX + 1, 64, CP - 1, CP, CP + 1];
    for k in 2..=DEFAULT_EAGER_MAX / CP {
        v.extend([k * CP - 1, k * CP, k * CP + 1]);
    }
    v.extend([DEFAULT_EAGER_MAX - 1, DEFAULT_EAGER_MAX, DEFAULT_EAGER_MAX + 1, 2 * DEFAULT_EAGER_MAX + 1]);
    v
}

#[test]
fn eager_cell_counts() {
    assert_eq!(eager_cells(CELL, 0), 1);
    assert_eq!(eager_cells(CELL, CP as u64), 1);
    assert_eq!(eager_cells(CELL, CP as u64 + 1), 2);
    assert_eq!(eager_cells(CELL, 2 * CP as u64), 2);
    assert_eq!(eager_cells(CELL, 2 * CP as u64 + 1), 3);
    assert_eq!(eager_cells(CELL, u64::MAX), u64::MAX / CP as u64 + 1);
    assert_eq!(eager_capacity(128, CELL), 32 * CP as u64);
    assert_eq!(eager_capacity(2, CELL), CP as u64);
}

#[test]
fn medium_boundaries_cma() {
    // Medium messages do not depend on CMA, but the first size above the
    // limit does: both modes, every switch point, with data checks.
    echo_sizes_eager(CmaMode::Force, "1", &boundary_sizes(), Some(DEFAULT_EAGER_MAX));
}

#[test]
fn medium_boundaries_bounce() {
    echo_sizes_eager(CmaMode::Off, "0", &boundary_sizes(), Some(DEFAULT_EAGER_MAX));
}

#[test]
fn boundaries_adaptive_eager() {
    // The default policy: in a ping-pong nothing else is in flight, so
    // everything above one cell goes by rendezvous.
    echo_sizes(CmaMode::Auto, "", &boundary_sizes());
}

#[test]
fn medium_stream_wraps_ring() {
    // Many multi-cell messages back to back: claims wrap around the ring
    // end and wait for cells to come back.
    let sizes: Vec<usize> = [3 * CP + 5, DEFAULT_EAGER_MAX, 7, CP + 1, 5 * CP - 3].iter().cycle().take(150).copied().collect();
    echo_sizes_eager(CmaMode::Auto, "", &sizes, Some(5 * CP));
}

#[test]
fn eager_limit_setting_and_truncation() {
    let mut a = Endpoint::new(cfg(CmaMode::Auto)).unwrap();
    let mut b = Endpoint::new(cfg(CmaMode::Auto)).unwrap();
    let pb = a.attach(&b.address()).unwrap();
    // Adaptive default: one cell while nothing is in flight with b, the
    // streaming limit while a rendezvous send to b is pending.
    assert_eq!(a.inline_max(pb), Ok(CP));
    let big = pattern(DEFAULT_EAGER_MAX * 4, 3);
    // SAFETY: big outlives the transfer (completed below).
    assert_eq!(unsafe { a.send(pb, &MsgHeader::default(), big.as_ptr(), big.len(), 9) }, Ok(SendStatus::Pending));
    assert_eq!(a.inline_max(pb), Ok(DEFAULT_EAGER_MAX));
    let Some(Event::Msg(inc)) = b.poll() else { panic!() };
    let mut sends = 0;
    assert_eq!(take(&mut b, &inc, &mut sends).unwrap(), big);
    assert_eq!(wait(&mut a, 5), Event::SendDone { ctx: 9 });
    assert_eq!(a.inline_max(pb), Ok(CP));
    a.set_eager_max(4 * CP);
    assert_eq!(a.inline_max(pb), Ok(4 * CP));
    assert_eq!(a.inline_max(99), Err(EINVAL));
    let data = pattern(3 * CP + 100, 8);
    // Medium: completes at once, the receiver may take fewer bytes.
    // SAFETY: data outlives the call (Done means copied).
    assert_eq!(unsafe { a.send(pb, &MsgHeader::default(), data.as_ptr(), data.len(), 1) }, Ok(SendStatus::Done));
    let Some(Event::Msg(inc)) = b.poll() else { panic!() };
    assert!(matches!(inc.kind, Kind::Inline { .. }));
    assert_eq!(inc.len, data.len() as u64);
    let mut small = vec![0u8; CP + 10];
    assert_eq!(b.recv_inline(&inc, &mut small), Ok(CP + 10));
    assert_eq!(&small[..], &data[..CP + 10]);
    assert_eq!(b.recv_inline(&inc, &mut small), Err(EINVAL), "already received");
    // Discarding a medium message frees all its cells: the ring takes
    // far more than its size in such messages afterwards.
    for round in 0..100u8 {
        a.send_inline(pb, &MsgHeader { tag: round as u64, ..MsgHeader::default() }, &data).unwrap();
        let Some(Event::Msg(inc)) = b.poll() else { panic!() };
        assert_eq!(inc.hdr.tag, round as u64);
        b.discard(&inc);
    }
    // Single cell only: the next size goes by rendezvous.
    a.set_eager_max(0);
    assert_eq!(a.inline_max(pb), Ok(CP));
    // SAFETY: data outlives the transfer below.
    assert_eq!(unsafe { a.send(pb, &MsgHeader::default(), data.as_ptr(), CP + 1, 2) }, Ok(SendStatus::Pending));
    let Some(Event::Msg(inc)) = b.poll() else { panic!() };
    assert!(matches!(inc.kind, Kind::Rndv { .. }));
    b.discard(&inc);
    assert_eq!(wait(&mut a, 5), Event::SendError { ctx: 2, err: Error(libc::ECANCELED) });
    // Above the ring's capacity: capped; send_inline refuses bigger.
    a.set_eager_max(usize::MAX);
    let cap = eager_capacity(128, CELL) as usize;
    assert_eq!(a.inline_max(pb), Ok(cap));
    let big = pattern(cap + 1, 9);
    assert_eq!(a.send_inline(pb, &MsgHeader::default(), &big), Err(EINVAL));
    a.send_inline(pb, &MsgHeader::default(), &big[..cap]).unwrap();
    let Some(Event::Msg(inc)) = b.poll() else { panic!() };
    let mut out = vec![0u8; cap + 100];
    assert_eq!(b.recv_inline(&inc, &mut out), Ok(cap));
    assert_eq!(&out[..cap], &big[..cap]);
}

#[test]
fn large_messages_via_cma() {
    echo_sizes(CmaMode::Force, "1", LARGE);
}

#[test]
fn large_messages_via_bounce() {
    echo_sizes(CmaMode::Off, "0", LARGE);
}

#[test]
fn cma_refused_by_receiver_falls_back_to_bounce() {
    // Parent offers CMA; the child refuses it and NACKs; the parent then
    // streams through a bounce slot. The child's replies go bounce-only.
    echo_sizes(CmaMode::Auto, "0", &[6144, 1 << 20, 3 << 20]);
}

#[test]
fn receiver_death_fails_send() {
    for mode in [CmaMode::Off, CmaMode::Force] {
        let mut ep = Endpoint::new(cfg(mode)).unwrap();
        let mut child = spawn("die_on_rts", Some(&ep.address()), "", "", false);
        let p = parent_accept(&mut ep);
        let data = pattern(16 << 20, 9);
        let t = Instant::now();
        let (r, _) = send_all(&mut ep, p, &MsgHeader::default(), &data);
        assert_eq!(r, Err(Error(libc::ECONNRESET)), "mode {mode:?}");
        assert!(t.elapsed() < Duration::from_secs(10));
        assert_eq!(child.wait().unwrap().code(), Some(3));
        // Sending again fails at once.
        let err = ep.send_inline(p, &MsgHeader::default(), b"x");
        assert_eq!(err, Err(Error(libc::ECONNRESET)));
        segment::reclaim_stale();
    }
}

#[test]
fn sender_death_fails_receive() {
    for mode in ["0", "1"] {
        let mut ep = Endpoint::new(Config::default()).unwrap();
        let mut child = spawn("send_then_die", Some(&ep.address()), "", mode, false);
        let _p = parent_accept(&mut ep);
        let inc = match wait(&mut ep, 30) {
            Event::Msg(m) => m,
            e => panic!("unexpected {e:?}"),
        };
        assert_eq!(inc.len, 16 << 20);
        // Let the child exit before (CMA) or during (bounce) the pull. For
        // CMA, wait until it is gone: a fixed pause is too short where
        // everything runs slower (ThreadSanitizer).
        std::thread::sleep(Duration::from_millis(400));
        let end = Instant::now() + Duration::from_secs(30);
        while mode == "1" && child.try_wait().unwrap().is_none() {
            assert!(Instant::now() < end, "the sender did not exit");
            std::thread::sleep(Duration::from_millis(10));
        }
        let mut sends = 0;
        let r = take(&mut ep, &inc, &mut sends);
        assert_eq!(r.err(), Some(Error(libc::ECONNRESET)), "mode {mode}");
        assert_eq!(child.wait().unwrap().code(), Some(4));
        assert_eq!(ep.in_flight(), 0);
        segment::reclaim_stale();
    }
}

/// The sender of an RTS died (and its memory with it) before the receiver
/// ever attached it: the message is still handed up, and its receive fails
/// with ECONNRESET (over a stand-in segment), CMA allowed or not.
#[test]
fn rts_from_a_sender_gone_before_attach_fails_receive() {
    for (cma, mode) in [(CmaMode::Auto, ""), (CmaMode::Off, "0")] {
        let mut ep = Endpoint::new(cfg(cma)).unwrap();
        let mut child = spawn("rts_then_die", Some(&ep.address()), "", mode, false);
        assert_eq!(child.wait().unwrap().code(), Some(5));
        // Its locator is left behind (it never dropped its segment).
        let inc = match wait(&mut ep, 30) {
            Event::Msg(m) => m,
            e => panic!("unexpected {e:?}"),
        };
        assert_eq!(inc.len, 16 << 20);
        assert!(matches!(inc.kind, Kind::Rndv { .. }));
        let mut sends = 0;
        let r = take(&mut ep, &inc, &mut sends);
        assert_eq!(r.err(), Some(Error(libc::ECONNRESET)), "cma {cma:?}");
        assert_eq!(ep.in_flight(), 0);
        segment::reclaim_stale();
    }
}

#[test]
fn hostile_ring_entries_are_errors() {
    let mut ep = Endpoint::new(cfg(CmaMode::Auto)).unwrap();
    let me = ep.address();
    let key = me.key();
    let bad = |ep: &mut Endpoint, w: Wire, payload: &[u8]| {
        ep.inject_raw(&w, payload);
        match ep.poll() {
            Some(Event::Error { err, .. }) => assert_eq!(err, Error(libc::EIO), "{w:?}"),
            e => panic!("expected error for {w:?}, got {e:?}"),
        }
    };
    // Inline length beyond the cell.
    bad(&mut ep, Wire { op: OP_EAGER, src_key: key, len: 1 << 40, ..Wire::default() }, &[]);
    // Two cells announced, the second never published.
    bad(&mut ep, Wire { op: OP_EAGER, src_key: key, len: 4097, ..Wire::default() }, &[]);
    // More cells than a message may take.
    let cap = eager_capacity(128, CELL);
    bad(&mut ep, Wire { op: OP_EAGER, src_key: key, len: cap + 1, ..Wire::default() }, &[]);
    bad(&mut ep, Wire { op: OP_EAGER, src_key: key, len: u32::MAX as u64, ..Wire::default() }, &[]);
    // Two cells announced; the next cell holds another entry, not a
    // continuation: the first is an error, the second still arrives.
    ep.inject_raw(&Wire { op: OP_EAGER, src_key: key, len: 5000, ..Wire::default() }, &[]);
    ep.inject_raw(&Wire { op: OP_EAGER, src_key: key, tag: 77, len: 3, ..Wire::default() }, b"abc");
    assert!(matches!(ep.poll(), Some(Event::Error { err: Error(libc::EIO), .. })));
    match ep.poll() {
        Some(Event::Msg(m)) => {
            assert_eq!((m.hdr.tag, m.len), (77, 3));
            let mut b = [0u8; 8];
            assert_eq!(ep.recv_inline(&m, &mut b), Ok(3));
            assert_eq!(&b[..3], b"abc");
        }
        e => panic!("{e:?}"),
    }
    // Unknown op.
    bad(&mut ep, Wire { op: 200, src_key: key, ..Wire::default() }, &[]);
    // RTS with garbage sender address, with mismatching key, with bad slot.
    bad(&mut ep, Wire { op: OP_RTS, src_key: key, len: 10, pflags: 1, ..Wire::default() }, &[0xff; 32]);
    bad(&mut ep, Wire { op: OP_RTS, src_key: key ^ 1, len: 10, pflags: 1, ..Wire::default() }, &me.to_bytes());
    bad(&mut ep, Wire { op: OP_RTS, src_key: key, len: 10, pflags: 2, aux: 1000, ..Wire::default() }, &me.to_bytes());
    bad(&mut ep, Wire { op: OP_RTS, src_key: key, len: 10, pflags: 9, ..Wire::default() }, &me.to_bytes());
    // FIN for a message that does not exist.
    bad(&mut ep, Wire { op: OP_FIN, src_key: key, msg_id: 0xffff_ffff, ..Wire::default() }, &[]);
    // RTS pointing CMA at an unmapped address: the pull fails cleanly.
    ep.inject_raw(&Wire { op: OP_RTS, src_key: key, len: 100_000, pflags: 1, addr: 8, msg_id: 3 << 16, ..Wire::default() }, &me.to_bytes());
    let inc = match ep.poll() {
        Some(Event::Msg(m)) => m,
        e => panic!("{e:?}"),
    };
    let mut buf = vec![0u8; 100_000];
    let mut sends = 0;
    let r = take(&mut ep, &inc, &mut sends);
    assert!(r.is_err());
    // The bogus FIN we sent ourselves comes back as an error entry.
    match wait(&mut ep, 5) {
        Event::Error { err, .. } => assert_eq!(err, Error(libc::EIO)),
        e => panic!("{e:?}"),
    }
    // Still healthy: a valid message goes through.
    let p = ep.attach(&me).unwrap();
    ep.send_inline(p, &MsgHeader { tag: 5, ..MsgHeader::default() }, b"ok").unwrap();
    match ep.poll() {
        Some(Event::Msg(m)) => {
            assert_eq!(ep.recv_inline(&m, &mut buf).unwrap(), 2);
            assert_eq!(&buf[..2], b"ok");
        }
        e => panic!("{e:?}"),
    }
    assert_eq!(ep.recv_inline(&inc, &mut buf), Err(EINVAL));
}

#[test]
fn corrupt_bounce_chunk_is_error() {
    let mut a = Endpoint::new(cfg(CmaMode::Off)).unwrap();
    let mut b = Endpoint::new(cfg(CmaMode::Off)).unwrap();
    let pb = a.attach(&b.address()).unwrap();
    let data = pattern(300_000, 3);
    // SAFETY: data outlives the transfer.
    assert_eq!(unsafe { a.send(pb, &MsgHeader::default(), data.as_ptr(), data.len(), 9) }, Ok(SendStatus::Pending));
    let _ = a.poll(); // fills the chunks
    let inc = match b.poll() {
        Some(Event::Msg(m)) => m,
        e => panic!("{e:?}"),
    };
    let Kind::Rndv { slot, .. } = inc.kind else { panic!() };
    // Corrupt the length of the first chunk in A's segment.
    let ch = a.segment().chunk_ptr(slot, 0).unwrap();
    // SAFETY: chunk header inside A's mapping.
    unsafe { ch.add(4).cast::<u32>().write_volatile(u32::MAX) };
    let mut buf = vec![0u8; data.len()];
    // SAFETY: buf outlives the wait.
    unsafe { b.recv_rndv(&inc, buf.as_mut_ptr(), buf.len(), 1) }.unwrap();
    assert_eq!(wait(&mut b, 5), Event::RecvError { ctx: 1, err: Error(libc::EIO) });
    assert_eq!(wait(&mut a, 5), Event::SendError { ctx: 9, err: Error(libc::ECANCELED) });
    assert_eq!(a.in_flight() + b.in_flight(), 0);
    // A second transfer between the same endpoints works.
    // SAFETY: as above.
    unsafe { a.send(pb, &MsgHeader::default(), data.as_ptr(), data.len(), 10) }.unwrap();
    let inc = loop {
        let _ = a.poll();
        if let Some(Event::Msg(m)) = b.poll() {
            break m;
        }
    };
    // SAFETY: as above.
    unsafe { b.recv_rndv(&inc, buf.as_mut_ptr(), buf.len(), 2) }.unwrap();
    let end = Instant::now() + Duration::from_secs(10);
    let (mut sd, mut rd) = (false, false);
    while !(sd && rd) {
        assert!(Instant::now() < end);
        match a.poll() {
            Some(Event::SendDone { ctx: 10 }) => sd = true,
            Some(e) => panic!("{e:?}"),
            None => {}
        }
        match b.poll() {
            Some(Event::RecvDone { ctx: 2, len }) => {
                assert_eq!(len, data.len() as u64);
                rd = true;
            }
            Some(e) => panic!("{e:?}"),
            None => {}
        }
    }
    assert_eq!(buf, data);
}

/// Where CMA is slow, the default eager limit is 64 KiB whether or not a
/// rendezvous is in flight (a 64 KiB message goes through the ring and
/// completes at once) and a rendezvous goes through a bounce slot;
/// `FI_SHM_CMA=1` (`Force`) is not measured and keeps the adaptive limits;
/// a fixed limit (`set_eager_max`, as `FI_SHM_EAGER_MAX`) still wins.
#[test]
fn slow_cma_eager_limits() {
    assert!(!crate::cma::is_slow(None));
    assert!(!crate::cma::is_slow(Some(CMA_SLOW_NS - 1)));
    assert!(crate::cma::is_slow(Some(CMA_SLOW_NS)));
    assert_eq!(default_eager_limits(false), (DEFAULT_EAGER_MAX, 0));
    assert_eq!(default_eager_limits(true), (SLOW_CMA_EAGER_MAX, SLOW_CMA_EAGER_MAX));
    let slow = |cma| Config { page_read_ns: || Some(5 * CMA_SLOW_NS), ..cfg(cma) };
    let mut forced = Endpoint::new(slow(CmaMode::Force)).unwrap();
    let mut a = Endpoint::new(slow(CmaMode::Auto)).unwrap();
    let mut b = Endpoint::new(slow(CmaMode::Auto)).unwrap();
    let pf = forced.attach(&b.address()).unwrap();
    assert_eq!(forced.inline_max(pf), Ok(CP), "FI_SHM_CMA=1: the adaptive limits");
    let pb = a.attach(&b.address()).unwrap();
    assert_eq!(a.inline_max(pb), Ok(SLOW_CMA_EAGER_MAX));
    let data = pattern(SLOW_CMA_EAGER_MAX, 5);
    // SAFETY: data outlives the call (Done means copied).
    assert_eq!(unsafe { a.send(pb, &MsgHeader::default(), data.as_ptr(), data.len(), 1) }, Ok(SendStatus::Done));
    let Some(Event::Msg(inc)) = b.poll() else { panic!() };
    assert!(matches!(inc.kind, Kind::Inline { .. }));
    let mut got = vec![0u8; data.len()];
    assert_eq!(b.recv_inline(&inc, &mut got), Ok(data.len()));
    assert_eq!(got, data);
    let big = pattern(SLOW_CMA_EAGER_MAX + 1, 6);
    // SAFETY: big outlives the transfer (completed below).
    assert_eq!(unsafe { a.send(pb, &MsgHeader::default(), big.as_ptr(), big.len(), 2) }, Ok(SendStatus::Pending));
    assert_eq!(a.inline_max(pb), Ok(SLOW_CMA_EAGER_MAX), "the same limit while streaming");
    let Some(Event::Msg(inc)) = b.poll() else { panic!() };
    assert!(matches!(inc.kind, Kind::Rndv { mode: 2, .. }), "a bounce slot (MODE_BOUNCE): {:?}", inc.kind);
    // The sender streams the slot's chunks as it progresses: both sides.
    let mut got = vec![0u8; big.len()];
    // SAFETY: got outlives the transfer (completed below).
    unsafe { b.recv_rndv(&inc, got.as_mut_ptr(), got.len(), 7) }.unwrap();
    let (mut sent, mut recvd) = (false, false);
    let end = Instant::now() + Duration::from_secs(30);
    while !(sent && recvd) {
        match a.poll() {
            Some(Event::SendDone { ctx: 2 }) => sent = true,
            None => {}
            Some(e) => panic!("{e:?}"),
        }
        match b.poll() {
            Some(Event::RecvDone { ctx: 7, len }) => recvd = len == big.len() as u64,
            None => {}
            Some(e) => panic!("{e:?}"),
        }
        assert!(Instant::now() < end, "timed out");
    }
    assert_eq!(got, big);
    a.set_eager_max(2 * CP);
    assert_eq!(a.inline_max(pb), Ok(2 * CP));
}

#[test]
fn truncating_receive_and_discard() {
    let mut a = Endpoint::new(cfg(CmaMode::Auto)).unwrap();
    let mut b = Endpoint::new(cfg(CmaMode::Auto)).unwrap();
    let pb = a.attach(&b.address()).unwrap();
    let data = pattern(50_000, 4);
    // SAFETY: data outlives the transfers.
    unsafe { a.send(pb, &MsgHeader::default(), data.as_ptr(), data.len(), 1) }.unwrap();
    let Some(Event::Msg(inc)) = b.poll() else { panic!() };
    let mut small = vec![0u8; 1000];
    // SAFETY: small outlives the wait.
    unsafe { b.recv_rndv(&inc, small.as_mut_ptr(), small.len(), 7) }.unwrap();
    assert_eq!(wait(&mut b, 5), Event::RecvDone { ctx: 7, len: 1000 });
    assert_eq!(&small[..], &data[..1000]);
    assert_eq!(wait(&mut a, 5), Event::SendDone { ctx: 1 });
    // SAFETY: as above.
    unsafe { a.send(pb, &MsgHeader::default(), data.as_ptr(), data.len(), 2) }.unwrap();
    let Some(Event::Msg(inc)) = b.poll() else { panic!() };
    b.discard(&inc);
    assert_eq!(wait(&mut a, 5), Event::SendError { ctx: 2, err: Error(libc::ECANCELED) });
}

/// One rendezvous message from `a` to `b` in this process (CMA to our own
/// pid works), both endpoints polled in turn until both sides complete.
/// Returns what `b` received.
fn shared_transfer(a: &mut Endpoint, b: &mut Endpoint, pb: PeerId, data: &[u8]) -> Vec<u8> {
    // SAFETY: data outlives the transfer, which completes below.
    assert_eq!(unsafe { a.send(pb, &MsgHeader::default(), data.as_ptr(), data.len(), 11) }, Ok(SendStatus::Pending));
    let inc = match wait(b, 5) {
        Event::Msg(m) => m,
        e => panic!("unexpected {e:?}"),
    };
    assert!(matches!(inc.kind, Kind::Rndv { .. }));
    let mut buf = vec![0u8; data.len()];
    // SAFETY: buf outlives the receive, which completes below.
    unsafe { b.recv_rndv(&inc, buf.as_mut_ptr(), buf.len(), 22) }.unwrap();
    let (mut sent, mut got) = (false, false);
    let end = Instant::now() + Duration::from_secs(10);
    while !(sent && got) {
        assert!(Instant::now() < end, "shared copy did not complete");
        match a.poll() {
            Some(Event::SendDone { ctx: 11 }) => sent = true,
            None => {}
            e => panic!("sender: unexpected {e:?}"),
        }
        match b.poll() {
            Some(Event::RecvDone { ctx: 22, len }) => {
                assert_eq!(len, data.len() as u64);
                got = true;
            }
            None => {}
            e => panic!("receiver: unexpected {e:?}"),
        }
    }
    assert_eq!(a.in_flight() + b.in_flight(), 0);
    buf
}

fn shared_pair() -> (Endpoint, Endpoint, PeerId) {
    let mut a = Endpoint::new(Config { shared_copy: true, ..cfg(CmaMode::Force) }).unwrap();
    let mut b = Endpoint::new(Config { shared_copy: true, ..cfg(CmaMode::Force) }).unwrap();
    let pb = a.attach(&b.address()).unwrap();
    b.attach(&a.address()).unwrap();
    (a, b, pb)
}

#[test]
fn shared_copy_done_by_sender_alone() {
    // The receiver claims nothing: every chunk must come from the sender's
    // process_vm_writev, at the offsets HELP names.
    let (mut a, mut b, pb) = shared_pair();
    b.hooks.idle_receiver = true;
    for (i, n) in [SHARED_COPY_MIN as usize, 3 << 20, (5 << 20) + 123].into_iter().enumerate() {
        let before = a.helped_chunks();
        let data = pattern(n, 40 + i as u8);
        let got = shared_transfer(&mut a, &mut b, pb, &data);
        assert!(got == data, "size {n}: data differs");
        assert_eq!(a.helped_chunks() - before, (n as u64).div_ceil(shared_chunk(n as u64)), "size {n}");
    }
}

#[test]
fn shared_copy_failed_chunk_is_copied_by_receiver() {
    // The sender claims from the back: its copy of the second-to-last
    // chunk fails; it stops helping, and the receiver copies that chunk
    // and the rest itself.
    let (mut a, mut b, pb) = shared_pair();
    b.hooks.idle_receiver = true;
    let n = 4usize << 20;
    let last = ((n as u64).div_ceil(shared_chunk(n as u64)) - 1) as u32;
    a.hooks.fail_help_chunk = Some(last - 1);
    let data = pattern(n, 7);
    let got = shared_transfer(&mut a, &mut b, pb, &data);
    assert!(got == data, "data differs");
    assert_eq!(a.helped_chunks(), 1, "the sender copied the last chunk only");
    // A refused write marks the peer: no more help, the receiver copies
    // everything (and must, since it is no longer idle).
    b.hooks.idle_receiver = false;
    let data = pattern(2 << 20, 8);
    assert!(shared_transfer(&mut a, &mut b, pb, &data) == data);
    assert_eq!(a.helped_chunks(), 1);
}

#[test]
fn shared_copy_below_threshold_and_when_off() {
    // Below the threshold, or with shared copy off, the sender never
    // copies, even when it polls during the transfer.
    let (mut a, mut b, pb) = shared_pair();
    let data = pattern(SHARED_COPY_MIN as usize - 1, 3);
    assert!(shared_transfer(&mut a, &mut b, pb, &data) == data);
    let mut c = Endpoint::new(Config { shared_copy: false, ..cfg(CmaMode::Force) }).unwrap();
    let pc = a.attach(&c.address()).unwrap();
    c.attach(&a.address()).unwrap();
    let data = pattern(8 << 20, 4);
    assert!(shared_transfer(&mut a, &mut c, pc, &data) == data);
    assert_eq!(a.helped_chunks(), 0);
}

#[test]
fn forged_help_claims_nothing() {
    // HELP entries with a wrong tag, an unknown message or out-of-range
    // fields change nothing and break nothing.
    let (mut a, mut b, pb) = shared_pair();
    b.hooks.idle_receiver = true;
    let data = pattern(1 << 20, 5);
    // SAFETY: data outlives the transfer, which completes below.
    assert_eq!(unsafe { a.send(pb, &MsgHeader::default(), data.as_ptr(), data.len(), 11) }, Ok(SendStatus::Pending));
    let Event::Msg(inc) = wait(&mut b, 5) else { panic!() };
    let Kind::Rndv { msg_id, .. } = inc.kind else { panic!() };
    let key = b.address().key();
    let mut buf = vec![0u8; data.len()];
    let base = Wire { op: OP_HELP, src_key: key, msg_id, aux: 0, tag: 1, addr: buf.as_mut_ptr() as u64, len: data.len() as u64, cq_data: 1 << 16, ..Wire::default() };
    // Before the receiver set up its descriptor: tag 0 there, nothing to claim.
    a.inject_raw(&base, &[]);
    a.inject_raw(&Wire { aux: 9999, ..base }, &[]);
    a.inject_raw(&Wire { cq_data: 1, ..base }, &[]);
    a.inject_raw(&Wire { len: u64::MAX, ..base }, &[]);
    a.inject_raw(&Wire { msg_id: msg_id ^ (1 << 16), ..base }, &[]);
    a.inject_raw(&Wire { src_key: 12345, ..base }, &[]);
    for _ in 0..10 {
        assert_eq!(a.poll(), None);
    }
    assert_eq!(a.helped_chunks(), 0);
    assert!(buf.iter().all(|&x| x == 0));
    // The real transfer still completes, with the sender's help.
    // SAFETY: buf outlives the receive, which completes below.
    unsafe { b.recv_rndv(&inc, buf.as_mut_ptr(), buf.len(), 22) }.unwrap();
    let end = Instant::now() + Duration::from_secs(10);
    let (mut sent, mut got) = (false, false);
    while !(sent && got) {
        assert!(Instant::now() < end);
        sent |= matches!(a.poll(), Some(Event::SendDone { ctx: 11 }));
        got |= matches!(b.poll(), Some(Event::RecvDone { ctx: 22, .. }));
    }
    assert!(buf == data);
    assert!(a.helped_chunks() > 0);
}

#[test]
fn tiny_layouts_leave_out_zero_words() {
    // Tag and immediate data of zero are not stored; the payload moves up
    // into their words. Every combination, every size around the line.
    let mut a = Endpoint::new(cfg(CmaMode::Auto)).unwrap();
    let mut b = Endpoint::new(cfg(CmaMode::Auto)).unwrap();
    let pb = a.attach(&b.address()).unwrap();
    for (tag, cq_data) in [(0u64, 0u64), (0xdead_beef_0000_0001, 0), (0, 0x1234_5678_9abc_def0), (u64::MAX, u64::MAX)] {
        let pf = if tag == 0 { crate::endpoint::PF_NO_TAG } else { 0 } | if cq_data == 0 { crate::endpoint::PF_NO_DATA } else { 0 };
        assert_eq!(crate::endpoint::tiny_max(pf), 64 - 24 - 8 * (tag != 0) as usize - 8 * (cq_data != 0) as usize);
        for n in 0..=72usize {
            let data = pattern(n, n as u8);
            let hdr = MsgHeader { flags: 3, tag, cq_data };
            a.send_inline(pb, &hdr, &data).unwrap();
            let Some(Event::Msg(inc)) = b.poll() else { panic!("no message") };
            assert_eq!((inc.hdr, inc.len), (hdr, n as u64), "size {n}");
            let mut out = vec![0u8; n];
            assert_eq!(b.recv_inline(&inc, &mut out), Ok(n));
            assert_eq!(out, data, "size {n} tag {tag:#x} data {cq_data:#x}");
        }
    }
}

#[test]
fn claim_word_ends() {
    use crate::endpoint::{claim_parts, claim_word, claimed_count, MAX_SHARED_CHUNKS};
    for (tag, f, b) in [(1u32, 0u32, 8u32), (u32::MAX, 3, 5), (7, MAX_SHARED_CHUNKS, MAX_SHARED_CHUNKS), (9, 0, 0)] {
        assert_eq!(claim_parts(claim_word(tag, f, b)), (tag, f, b));
    }
    // Nothing, some from each end, all, closed early.
    assert_eq!(claimed_count(claim_word(1, 0, 8), 8), 0);
    assert_eq!(claimed_count(claim_word(1, 2, 5), 8), 5);
    assert_eq!(claimed_count(claim_word(1, 4, 4), 8), 8);
    // A forged word never counts more than the copy has.
    assert_eq!(claimed_count(claim_word(1, 9, 0), 8), 8);
    // Huge messages are cut into at most MAX_SHARED_CHUNKS chunks.
    for n in [SHARED_COPY_MIN, 1 << 30, 1 << 40, u64::MAX / 2] {
        assert!(n.div_ceil(shared_chunk(n)) <= MAX_SHARED_CHUNKS as u64, "{n}");
    }
}
