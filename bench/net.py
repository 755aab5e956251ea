"""Network benchmark: our rudp and tcp providers against Debian's libfabric (tcp;ofi_rxm,
udp;ofi_rxd) and UCX over TCP, on loopback and between two network
namespaces, without and with 1% loss; and MPI between the namespaces.

Run by bench.py (`python3 bench/bench.py --net-only`, and `make bench` after
the shm tables). Three tables and an MPI section:

  loopback   every series on 127.0.0.1, server pinned to core 0, client to
             core 1 (as the shm table):
               ours     rudp from our libfabric.so.1, FI_RUDP_IFACE=lo
               ours UDP rudp with FI_RUDP_ENABLE_SHM=0 (through UDP, not shared memory)
               ours tcp our tcp provider (RDM over TCP connections), FI_TCP_IFACE=lo
               tcp;rxm  Debian's libfabric1, provider "tcp;ofi_rxm", FI_TCP_IFACE=lo
               udp;rxd  Debian's libfabric1, provider "udp;ofi_rxd", FI_UDP_IFACE=lo
               UCX tcp  ucx_perftest, UCX_TLS=tcp,self UCX_NET_DEVICES=lo
             ours and both Debian series run the same two programs (Debian's
             fi_pingpong -e rdm, and bench/fi_stream built against upstream's
             headers); only LD_LIBRARY_PATH and the provider name change.
  veth       the same programs between namespaces rfbn-a (client, 10.78.0.1)
             and rfbn-b (server, 10.78.0.2) joined by a veth pair rfbn0
             (bench/netns.sh: MTU 1500, tso/gso/gro off); ours
             (FI_RUDP_IFACE=rfbn0) against tcp;ofi_rxm (FI_TCP_IFACE=rfbn0),
             each without loss and with 1% of the packets arriving in rfbn-b
             dropped (netns.sh loss 1: UDP packets and TCP segments with
             payload alike; see that file). The four columns alternate size
             by size, so loss and no loss see the same machine.
  MPI        bench/mpi_net.c under the MPICH wheel (.venv), 2 ranks, one in
             each namespace (rank 0 in rfbn-a on core 0, rank 1 in rfbn-b on
             core 1), launched by hydra through bench/nsexec;
             MPIR_CVAR_CH4_NETMOD=ofi MPIR_CVAR_NOLOCAL=1; ours
             (LD_LIBRARY_PATH=ours, FI_PROVIDER=rudp) against the wheel's
             own libfabric with FI_PROVIDER=tcp; no loss. MPI_Send/MPI_Recv
             ping-pong one-way time, and MPI_Allreduce (MPI_SUM of doubles)
             time per call.

Latency is one-way (half the mean round trip), the mean over a run; the
tables show the median of runs. A ratio is paired: the best peer at a
size is the one whose median over the runs is best; in each run, ours ÷
that peer (their cases run one after the other), and the table shows the
median of those. (Ours ÷ the best peer of each run would compare ours
with the best of several noisy values, which sides with the peers; the
targets line says where that reading misses too.) The machine has phases
that slow every series for a while, by up to 50% (in one 7-run check at
8 B to 8 KiB, two of the runs read 30-50% slower for ours, UCX and
tcp;ofi_rxm alike); a ratio of medians of separate runs carries them, a
paired ratio cancels them. On loopback a phase gate also leaves them out:
a bare TCP stream reads the phase around each size's group of cases, and
a group after which it read slow is measured again (see PhaseProbe).
What the runs decide: a paired ratio of one run varies from run to run
(on this machine by 15-30% in a noisy stretch), so a median of 5 to 9
runs can land on either side of 1.0 when two libraries are within a few
percent. The targets line therefore also gives, per size, the sign
test's interval of the median paired ratio (median_interval: at 90% or
surer, from the runs' own order statistics, whatever their
distribution) and says where it lies wholly under or over 1.0 (decided)
and where it straddles 1.0 (undecided: more runs or a quieter machine
would be needed to tell).
What a run can show: under the loopback tables, how far our tcp's paired
ratios scattered from run to run, and the chance that a run as noisy
meets a target at every size if the true ratio were 1.0, 0.95, 0.9, 0.85
or 0.8 at every size (pass_chance, by resampling the run's own scatter).
`python3 bench/net.py decide|power bench/results/<name>.net.runs.csv`
work both out again from a finished run's file.
The floor comparison, `python3 bench/net.py floor [--reps N]
bench/results/<name>.floor.runs.csv`, runs our tcp, UCX tcp and
bench/tcp_floor.c's bare ping-pong (no library: the kernel's own path per
message) at 8 B to 16 KiB, latency only, and prints their paired ratios:
how much room the kernel leaves above it, beside the peer. `python3
bench/net.py turnaround` loads bench/turnaround.c into both sides of each
library's ping-pong (and the floor's) and reports how long each takes in
user space from a receive that returned data to its next send.
Streaming keeps NET_WINDOW sends in flight
(the receiver NET_WINDOW receives posted), one pair of processes per size,
and times STREAM_BYTES per case (LOSS_STREAM_BYTES with loss): at 32 MiB a
large size was timed for 5 to 10 ms, where one descheduling of either side
moved the result by tens of percent. Within a run the series take turns
size by size, and each run starts the turn at the next series, so that a
disturbance at a fixed point of a run (the one after the previous run's
largest streams, say) falls on a different series each time.

A case that fails (or runs past its timeout) is left out of that run and
listed with its error and a command that repeats it; a (series, size) that
failed is not run again in later runs, and a series with GIVE_UP_AFTER
failed sizes is given up. The veth tables and MPI need root, ip, ethtool
and nft (nftables); without them they say so and the loopback table runs.
"""

import contextlib
import os
import re
import shlex
import signal
import subprocess
import time

import bench

NET_WINDOW = 16
LAT_TIMEOUT = 60
STREAM_TIMEOUT = 90
LOSS_TIMEOUT = 120
MPI_TIMEOUT = 300
GIVE_UP_AFTER = 5
LOSS_PCT = 1
STREAM_BYTES = 256 << 20
LOSS_STREAM_BYTES = 32 << 20

LO_KEYS = ("ours", "ours_udp", "ours_tcp", "rxm", "rxd", "ucx")
VETH_KEYS = ("ours", "rxm", "ours_loss", "rxm_loss")
SHORT = {"ours": "ours", "ours_udp": "ours UDP", "ours_tcp": "ours tcp", "rxm": "tcp;rxm", "rxd": "udp;rxd", "ucx": "UCX tcp",
         "ours_loss": "ours 1% loss", "rxm_loss": "tcp;rxm 1% loss", "floor": "tcp floor"}
LABELS = {"ours": "ours (rfabric rudp)", "ours_udp": "ours (rudp, FI_RUDP_ENABLE_SHM=0)", "ours_tcp": "ours (rfabric tcp)", "rxm": "Debian 1.17 tcp;ofi_rxm",
          "rxd": "Debian 1.17 udp;ofi_rxd", "ucx": "UCX 1.13 tcp",
          "ours_loss": "ours, 1% loss", "rxm_loss": "tcp;ofi_rxm, 1% loss"}
COLORS = {"ours": "#d62728", "ours_udp": "#8c564b", "ours_tcp": "#9467bd", "rxm": "#1f77b4", "rxd": "#ff7f0e", "ucx": "#2ca02c",
          "ours_loss": "#d62728", "rxm_loss": "#1f77b4"}
MPI_PP_SIZES = [8, 64, 1024, 8192, 65536, 262144, 1 << 20, 4 << 20]
MPI_AR_SIZES = [8, 1024, 65536, 1 << 20]

HERE = os.path.dirname(os.path.abspath(__file__))
NETNS = os.path.join(HERE, "netns.sh")
NSEXEC = os.path.join(HERE, "nsexec")


def all_sizes():
    return [1 << k for k in range(3, 23)]  # 8 B .. 4 MiB


def quick_sizes():
    return [8, 4096, 65536, 1 << 20]


# Iterations: fewer than the shm table's (a network round trip costs 10 to
# 100 times more, udp;ofi_rxd moves tens of MB/s, and a drop costs TCP a
# retransmission timeout), so that the whole network part stays within
# half an hour on a 2-core machine.
def pp_iters(size, loss=False):
    """fi_pingpong's iterations (and ucx_perftest's timed ones). fi_pingpong
    times its first iterations too, and every library pays one-time costs
    there (connecting, first touches of the buffers, socket buffers
    growing): about 0.5 to 1 ms in all, which at 20 iterations added 20 to
    50% to a large size's latency, and at 2000 iterations of 8 bytes about
    2.5%. At least 200 iterations, and 20000 for small messages, keep that
    under a few percent, and under 0.5% up to 4 KiB; ucx_perftest leaves
    its own out with untimed warm-up iterations. Under loss (`loss`) at
    most 2000, as before 97e5cad: a ping-pong's dropped segment costs TCP a
    retransmission timeout (200 ms at least), so 20000 iterations at 1%
    loss spend about 40 s per case in timeouts, and the one-time costs are
    lost among the drops anyway."""
    return max(200, min(2000 if loss else 20000, (64 << 20) // size))


def stream_bytes(series):
    return LOSS_STREAM_BYTES if series.loss else STREAM_BYTES


def stream_count(size, nbytes=STREAM_BYTES):
    """fi_stream's count for -w NET_WINDOW -n 20000 -b nbytes."""
    return max(2 * NET_WINDOW, min(20000, nbytes // size))


class Path:
    """Where a case runs: namespaces of server and client (None: the
    caller's), the address the client dials, the interface to use."""

    def __init__(self, name, server_ns, client_ns, addr, iface):
        self.name, self.server_ns, self.client_ns = name, server_ns, client_ns
        self.addr, self.iface = addr, iface


# Loopback runs in a namespace of its own (netns.sh lo-fresh), made anew for
# each benchmark: see netns.sh.
LOOPBACK = Path("loopback", "rfbn-lo", "rfbn-lo", "127.0.0.1", "lo")
HOST_LOOPBACK = Path("loopback", None, None, "127.0.0.1", "lo")
VETH = Path("veth", "rfbn-b", "rfbn-a", "10.78.0.2", "rfbn0")


class Series:
    """One column: a provider of a library (or UCX) on a path, with loss."""

    def __init__(self, key, path, provider, libdir, loss=0, extra=None):
        self.key, self.path, self.provider, self.libdir, self.loss = key, path, provider, libdir, loss
        self.extra = extra or {}

    def env(self):
        i = self.path.iface
        if self.provider is None:
            return {"UCX_TLS": "tcp,self", "UCX_NET_DEVICES": i}
        env = {"LD_LIBRARY_PATH": self.libdir}
        env.update({"rudp": {"FI_RUDP_IFACE": i}, "tcp": {"FI_TCP_IFACE": i}, "tcp;ofi_rxm": {"FI_TCP_IFACE": i},
                    "udp;ofi_rxd": {"FI_UDP_IFACE": i}}[self.provider])
        env.update(self.extra)
        return env


def make_series(key, path, ours_lib):
    base = key.replace("_loss", "")
    loss = LOSS_PCT if key.endswith("_loss") else 0
    if base == "ours":
        return Series(key, path, "rudp", ours_lib, loss)
    if base == "ours_tcp":
        return Series(key, path, "tcp", ours_lib, loss)
    if base == "ours_udp":
        return Series(key, path, "rudp", ours_lib, loss, {"FI_RUDP_ENABLE_SHM": "0"})
    if base == "rxm":
        return Series(key, path, "tcp;ofi_rxm", bench.DEBIAN_LIBDIR, loss)
    if base == "rxd":
        return Series(key, path, "udp;ofi_rxd", bench.DEBIAN_LIBDIR, loss)
    return Series(key, path, None, None, loss)


# ---------------------------------------------------------------- commands

def pingpong_cmds(series, size, port):
    base = ["fi_pingpong", "-p", series.provider, "-e", "rdm", "-S", str(size), "-I", str(pp_iters(size, series.loss > 0))]
    return base + ["-B", str(port)], base + ["-P", str(port), series.path.addr]


def stream_cmds(binary, series, size, port):
    base = [binary, "-p", series.provider, "-w", str(NET_WINDOW), "-n", "20000",
            "-b", str(stream_bytes(series)), "-S", str(size), "-P", str(port)]
    two_hosts = series.path.server_ns != series.path.client_ns
    server = base + (["-s", series.path.addr] if two_hosts else [])
    return server, base + [series.path.addr]


def ucx_cmds(series, test, size, port):
    n = pp_iters(size) if test == "tag_lat" else stream_count(size, stream_bytes(series))
    args = ["-t", test, "-s", str(size), "-n", str(n), "-w", str(max(10, n // 10)), "-f", "-v"]
    if test == "tag_bw":
        args += ["-O", str(NET_WINDOW)]
    return ["ucx_perftest", "-p", str(port)], ["ucx_perftest", series.path.addr, "-p", str(port)] + args


def repro(series, server, client):
    """A shell line that runs one case by hand (port 23500)."""
    env = " ".join("%s=%s" % (k, shlex.quote(v)) for k, v in sorted(series.env().items()))

    def side(ns, core, cmd):
        return " ".join(bench.netns_prefix(ns) + ["env", env, "timeout", "120", "taskset", "-c", core]
                        + [shlex.quote(c) for c in cmd])

    line = "%s & sleep 1; %s; wait" % (side(series.path.server_ns, bench.SERVER_CORE, server),
                                       side(series.path.client_ns, bench.CLIENT_CORE, client))
    if series.loss:
        line = "bench/netns.sh up && bench/netns.sh loss %d && %s; bench/netns.sh loss off" % (series.loss, line)
    elif series.path.server_ns == LOOPBACK.server_ns:
        line = "bench/netns.sh lo-fresh && " + line
    elif series.path.server_ns:
        line = "bench/netns.sh up && bench/netns.sh loss off && " + line
    return line


def timeout_for(series, kind):
    if series.loss:
        return LOSS_TIMEOUT
    return LAT_TIMEOUT if kind == "latency" else STREAM_TIMEOUT


def run_case(series, kind, size, ports, binary):
    """One case: (value, None) or (None, (error, repro line)). value: µs
    for latency, (GB/s, Mmsg/s) for streaming."""
    if series.provider is None:
        test = "tag_lat" if kind == "latency" else "tag_bw"

        def cmds(port):
            return ucx_cmds(series, test, size, port)
    elif kind == "latency":
        def cmds(port):
            return pingpong_cmds(series, size, port)
    else:
        def cmds(port):
            return stream_cmds(binary, series, size, port)
    where = {"timeout": timeout_for(series, kind), "server_ns": series.path.server_ns,
             "client_ns": series.path.client_ns}
    ok, out, err = bench.run_pair_on_port(ports, cmds, series.env(), **where)
    line = repro(series, *cmds(23500))
    if not ok:
        return None, (err, line)
    try:
        if series.provider is None:
            r = bench.parse_ucx(out)
            if kind == "latency":
                return r["overall_lat"], None
            return (r["overall_bw"] * (1 << 20) / 1e9, r["overall_mr"] / 1e6), None
        if kind == "latency":
            return bench.parse_pingpong(out, size), None
        rows = bench.parse_stream(out)
        if size not in rows:
            return None, ("no result row for %d bytes: %s" % (size, bench.last_lines(out)), line)
        return rows[size], None
    except ValueError as e:
        return None, (str(e), line)


# ---------------------------------------------------------------- loss

def parse_counters(text):
    """netns.sh counters: 'udp_seen N udp_drop N tcp_seen N tcp_drop N'."""
    words = text.split()
    out = {}
    for i in range(0, len(words) - 1, 2):
        try:
            out[words[i]] = int(words[i + 1])
        except ValueError:
            pass
    return out


class Loss:
    """The loss rule in rfbn-b: set only when it changes; the counters of
    each period with loss on are added up."""

    def __init__(self, run=subprocess.run):
        self.pct = None
        self.run = run
        self.totals = {}

    def set(self, pct):
        if pct == self.pct:
            return
        if self.pct:
            self.collect()
        r = self.run([NETNS, "loss", str(pct) if pct else "off"], stdout=subprocess.PIPE,
                     stderr=subprocess.STDOUT, text=True)
        if r.returncode != 0:
            raise RuntimeError("netns.sh loss %s: %s" % (pct, bench.last_lines(r.stdout)))
        self.pct = pct

    def collect(self):
        r = self.run([NETNS, "counters"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for k, v in parse_counters(r.stdout).items():
            self.totals[k] = self.totals.get(k, 0) + v


def counters_line(totals):
    def rate(seen, drop):
        s, d = totals.get(seen, 0), totals.get(drop, 0)
        return "%d of %d (%.2f%%)" % (d, s, 100.0 * d / s if s else 0)
    return ("Dropped in rfbn-b while loss was on: UDP packets %s; TCP segments with payload %s."
            % (rate("udp_seen", "udp_drop"), rate("tcp_seen", "tcp_drop")))


# ---------------------------------------------------------------- phase gate

# This machine has periods, from seconds to minutes long, in which every
# loopback stream runs at about a third of its speed and latency is 30-50%
# worse, for every library and for a bare TCP stream alike (while memcpy
# and page faults keep their speed). A case measured in one compares the
# machine, not the libraries. The probe: a bare one-way TCP stream
# (bench/tcp_stream_floor.c) of PROBE_BYTES in PROBE_SIZE messages on the
# path's loopback, between groups of cases (all series at one size).
PROBE_SIZE = 1 << 20
PROBE_BYTES = 64 << 20
PROBE_TIMEOUT = 30
# A probe under PHASE_GATE times the best one of the benchmark reads slow:
# outside those periods the probe reads 0.65-1.0 of its best, in them
# about a third.
PHASE_GATE = 0.5
# A group with a slow probe after it is measured again, at most this many
# times in all; before a group, up to PHASE_WAIT probes wait for a fast one.
PHASE_TRIES = 2
PHASE_WAIT = 10
PROBE_CALIBRATE = 3


def build_probe(repo, outdir):
    """bench/tcp_stream_floor.c, built once: (binary, None) or (None, why)."""
    return bench.build_c(os.path.join(repo, "bench", "tcp_stream_floor.c"),
                         os.path.join(outdir, "tcp_stream_floor"), [])


class PhaseProbe:
    """Reads the machine's phase in namespace `ns` (None: the caller's).
    `readings` keeps each group's: (kind, size, run, try, before, after,
    kept), in GB/s, None where a probe failed."""

    def __init__(self, binary, ns, ports, run=subprocess.run):
        self.binary, self.ns, self.ports, self.run = binary, ns, ports, run
        self.best = 0.0
        self.readings = []

    def read(self):
        """GB/s of one probe, or None when it failed (a failed probe says
        nothing, and never holds a group back)."""
        cmd = bench.netns_prefix(self.ns) + [self.binary, str(PROBE_SIZE), str(PROBE_BYTES), "69",
                                             str(self.ports.take())]
        try:
            r = self.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=PROBE_TIMEOUT)
            v = float(r.stdout.split()[-1]) if r.returncode == 0 else None
        except (subprocess.TimeoutExpired, ValueError, IndexError):
            v = None
        if v is not None:
            self.best = max(self.best, v)
        return v

    def slow(self, v):
        return v is not None and v < PHASE_GATE * self.best

    def calibrate(self):
        for _ in range(PROBE_CALIBRATE):
            self.read()

    def wait_fast(self, last):
        """A reading that is not slow (`last`, when it is not), after at
        most PHASE_WAIT more probes."""
        for _ in range(PHASE_WAIT):
            if not self.slow(last):
                break
            last = self.read()
        return last

    def summary(self):
        """One line for the tables: how many groups were measured again."""
        groups = {(k, s, r) for k, s, r, *_ in self.readings}
        again = {(k, s, r) for k, s, r, t, *_ in self.readings if t > 0}
        slow_kept = [g for g in self.readings if g[6] and (self.slow(g[4]) or self.slow(g[5]))]
        return ("Phase gate: before and after each size's group of cases, a bare TCP stream "
                "(bench/tcp_stream_floor.c, %d MiB of 1 MiB messages) reads the machine's phase; a group whose "
                "probe after it read under %.2f of the best probe (%.2f GB/s) was measured again (%d tries at "
                "most): %d of %d groups were, and %d kept a slow reading before or after (every probe: "
                "bench/results/<date>.net.phase.csv)." % (PROBE_BYTES >> 20, PHASE_GATE, self.best, PHASE_TRIES,
                                                          len(again), len(groups), len(slow_kept)))


# ---------------------------------------------------------------- measuring

def rotated(items, rep):
    """The order of run `rep` (from 0): `items` started at rep mod len."""
    k = rep % len(items) if items else 0
    return list(items[k:]) + list(items[:k])


def measure(series_list, sizes, reps, binary, log, loss=None, run_case=run_case, by_run=None, probe=None,
            kinds=("latency", "streaming")):
    """Every (series, size) case for latency and streaming, `reps` times;
    the series alternate size by size. Returns lat {key: {size: [µs]}},
    stream {key: {size: [(GB/s, Mmsg/s)]}} and failures, a list of
    (key, kind, size, rep, error, repro). Run r takes the series in the
    order rotated(series_list, r). `by_run`, a dict, gets each value by
    run too: by_run[(key, kind, size)][r] (for paired_ratios). With a
    PhaseProbe `probe`, each size's group of cases first waits for a probe
    that does not read slow, and is measured again (its values replaced)
    while the probe after it reads slow, PHASE_TRIES times in all.
    `kinds`: which of latency and streaming to measure."""
    ports = bench.Ports()
    keys = [s.key for s in series_list]
    lat = {k: {s: [] for s in sizes} for k in keys}
    stream = {k: {s: [] for s in sizes} for k in keys}
    failures = []
    failed = set()  # (key, kind, size)

    def given_up(key, kind):
        return len([f for f in failed if f[0] == key and f[1] == kind]) >= GIVE_UP_AFTER

    def group(turn, kind, size, rep):
        got = []
        for se in turn:
            if (se.key, kind, size) in failed or given_up(se.key, kind):
                continue
            if loss is not None:
                loss.set(se.loss)
            v, err = run_case(se, kind, size, ports, binary)
            if err:
                failed.add((se.key, kind, size))
                failures.append((se.key, kind, size, rep + 1) + tuple(err))
            else:
                got.append((se.key, v))
        return got

    last = None
    if probe is not None:
        probe.calibrate()
        last = probe.read()
    for rep in range(reps):
        turn = rotated(series_list, rep)
        for kind, store in (("latency", lat), ("streaming", stream)):
            if kind not in kinds:
                continue
            log("  run %d/%d %s " % (rep + 1, reps, kind))
            for size in sizes:
                for attempt in range(PHASE_TRIES if probe is not None else 1):
                    if probe is not None:
                        last = before = probe.wait_fast(last)
                    got = group(turn, kind, size, rep)
                    if probe is None:
                        break
                    last = probe.read()
                    kept = not probe.slow(last) or attempt + 1 == PHASE_TRIES
                    probe.readings.append((kind, size, rep, attempt, before, last, kept))
                    if kept:
                        break
                    log("~")
                for key, v in got:
                    store[key][size].append(v)
                    if by_run is not None:
                        by_run.setdefault((key, kind, size), {})[rep] = v
                log(".")
            log("\n")
    if loss is not None:
        loss.set(0)
    return lat, stream, failures


def medians(sizes, lat, stream):
    """{key: {size: (lat, GB/s, Mmsg/s)}} of medians (None: no run)."""
    out = {}
    for k in lat:
        out[k] = {}
        for s in sizes:
            pairs = stream[k].get(s, [])
            out[k][s] = (bench.median_or_none(lat[k].get(s, [])),
                         bench.median_or_none([p[0] for p in pairs]),
                         bench.median_or_none([p[1] for p in pairs]))
    return out


def paired_runs(sizes, by_run, groups, each_run_best=False):
    """{(ours, size): (latency, GB/s, Mmsg/s) lists}: ours ÷ the best
    peer, the peer whose median over the runs is best at that size (lowest
    latency, highest rate), in each run where both have a value. With
    `each_run_best`, ours ÷ the best peer of each run instead: the best of
    several values that each carry the run's noise, so it sides with the
    peers (at a 5-run median it reads about 0.96 for a library level with
    two peers that vary by 8% from run to run, see docs/PERFORMANCE.md)."""
    out = {}
    for ours, peers in groups:
        for s in sizes:
            cells = []
            for kind, idx, lower in (("latency", None, True), ("streaming", 0, False), ("streaming", 1, False)):
                def val(v):
                    return v if idx is None else v[idx]
                mine = by_run.get((ours, kind, s), {})
                theirs = {p: {r: val(v) for r, v in by_run.get((p, kind, s), {}).items()} for p in peers}
                if not each_run_best:
                    shared = [p for p in peers if set(theirs[p]) & set(mine)]
                    if shared:
                        pick = min if lower else max
                        best = pick(shared, key=lambda p: bench.median_or_none(list(theirs[p].values())))
                        theirs = {best: theirs[best]}
                rs = []
                for r, v in sorted(mine.items()):
                    ratio = bench.ratio(val(v), [t[r] for t in theirs.values() if r in t], lower)
                    if ratio is not None:
                        rs.append(ratio)
                cells.append(rs)
            out[(ours, s)] = tuple(cells)
    return out


def paired_ratios(sizes, by_run, groups, each_run_best=False):
    """{(ours, size): (latency, GB/s, Mmsg/s) ratios}: the median over
    the runs of paired_runs' ratios (None: no run had both)."""
    runs = paired_runs(sizes, by_run, groups, each_run_best)
    return {k: tuple(bench.median_or_none(rs) for rs in v) for k, v in runs.items()}


# How sure the interval around a median of paired ratios is, at least.
INTERVAL_CONFIDENCE = 0.9


def median_interval(values, confidence=INTERVAL_CONFIDENCE):
    """(low, high, coverage): an interval that holds the median of the
    distribution the values were drawn from with probability `coverage`
    (at least `confidence`), whatever that distribution is (the sign
    test's): the k-th smallest and k-th largest value, for the largest k
    where fewer than k of n values fall on one side of the median with
    probability at most (1 - confidence) / 2. None when there are too few
    values for any k (n < 5 at 0.9)."""
    import math
    xs = sorted(values)
    n = len(xs)
    best = None
    for k in range(1, n // 2 + 1):
        coverage = 1 - 2 * sum(math.comb(n, i) for i in range(k)) / 2 ** n
        if coverage < confidence:
            break
        best = (xs[k - 1], xs[n - k], coverage)
    return best


def decided(sizes, runs, ours, idx, lower, from_size=0):
    """Sizes from `from_size` whose median_interval of the paired ratios
    (`runs`, from paired_runs; idx 0 latency, 1 GB/s) lies wholly on one
    side of 1.0: (for ours, against ours, undecided)."""
    good, bad, open_ = [], [], []
    for s in sizes:
        if s < from_size:
            continue
        iv = median_interval(runs.get((ours, s), ([], [], []))[idx])
        if iv is not None and (iv[1] < 1.0 if lower else iv[0] > 1.0):
            good.append(s)
        elif iv is not None and (iv[0] > 1.0 if lower else iv[1] < 1.0):
            bad.append(s)
        else:
            open_.append(s)
    return good, bad, open_


def ratio_of(ratios, med, ours, peers, s, idx):
    """The ratio cell: paired (`ratios`, from paired_ratios) when given,
    otherwise of the medians."""
    if ratios is not None:
        return ratios.get((ours, s), (None, None, None))[idx]
    return bench.ratio(med[ours][s][idx], [med[p][s][idx] for p in peers], idx == 0)


# ---------------------------------------------------------------- reporting

def md_table(head, rows):
    out = ["| " + " | ".join(head) + " |", "|" + "---:|" * len(head)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return out


def lat_table(sizes, med, groups, ratios=None):
    """groups: [(ours key, [peer keys])]; one ratio column per group
    (paired `ratios` when given, see ratio_of)."""
    head = ["size"]
    for ours, peers in groups:
        head += [SHORT[ours]] + [SHORT[p] for p in peers] + ["ours÷best" if len(peers) > 1 else "ours÷%s" % SHORT[peers[0]]]
    rows = []
    for s in sizes:
        cells = [bench.human(s)]
        for ours, peers in groups:
            cells += [bench.fmt(med[k][s][0]) for k in [ours] + peers]
            cells.append(bench.fmt(ratio_of(ratios, med, ours, peers, s, 0), 2))
        rows.append(cells)
    return md_table(head, rows)


def stream_table(sizes, med, groups, ratios=None):
    head = ["size"]
    for idx, unit in ((1, "GB/s"), (2, "Mmsg/s")):
        for ours, peers in groups:
            head += ["%s %s" % (SHORT[k], unit) for k in [ours] + peers]
            head.append("ours÷best" if len(peers) > 1 else "ours÷%s" % SHORT[peers[0]])
    rows = []
    for s in sizes:
        cells = [bench.human(s)]
        for idx in (1, 2):
            for ours, peers in groups:
                cells += [bench.fmt(med[k][s][idx]) for k in [ours] + peers]
                cells.append(bench.fmt(ratio_of(ratios, med, ours, peers, s, idx), 2))
        rows.append(cells)
    return md_table(head, rows)


def failures_md(failures):
    if not failures:
        return []
    out = ["", "Failed cases (left out of the medians; a failed (series, size) is not run again in "
           "later runs):", ""]
    for key, kind, size, rep, err, line in failures:
        out.append("- %s %s %s (run %d): %s  \n  repeat: `%s`" % (SHORT[key], kind, bench.human(size), rep, err, line))
    return out


def targets(sizes, med, ours, peers, from_size=65536, ratios=None, each_run=None, runs=None):
    """Which targets hold: latency ≤ 1.0× the best peer at every size,
    streaming GB/s ≥ 1.0× from 64 KiB (the ratios of the tables: paired
    when `ratios` is given). One line; `each_run`, paired ratios against
    the best peer of each run (paired_ratios' each_run_best), adds where
    those miss; `runs`, the run-by-run ratios (paired_runs), adds which
    sizes the runs decide (see decided)."""
    def missed(rs):
        lat_bad = [s for s in sizes if (r := ratio_of(rs, med, ours, peers, s, 0)) is None or r > 1.0]
        bw_bad = [s for s in sizes if s >= from_size and
                  ((r := ratio_of(rs, med, ours, peers, s, 1)) is None or r < 1.0)]
        return lat_bad, bw_bad

    def sz(lst):
        return ", ".join(bench.human(s) for s in lst) if lst else "none"
    lat_bad, bw_bad = missed(ratios)
    line = ("Targets (%s against %s): latency ≤ 1.0× at every size: %s (missed at: %s); streaming ≥ 1.0× "
            "from %s: %s (missed at: %s)." % (
                SHORT[ours], " / ".join(SHORT[p] for p in peers), "met" if not lat_bad else "not met",
                sz(lat_bad), bench.human(from_size), "met" if not bw_bad else "not met", sz(bw_bad)))
    if each_run is not None:
        lat_bad, bw_bad = missed(each_run)
        line += (" Against the best peer of each run instead: latency missed at %s; streaming missed at %s."
                 % (sz(lat_bad), sz(bw_bad)))
    if runs is not None:
        def spans(lst, idx):
            out = []
            for s in lst:
                iv = median_interval(runs.get((ours, s), ([], [], []))[idx])
                out.append("%s %s" % (bench.human(s), "%.2f-%.2f" % iv[:2] if iv else "too few runs"))
            return ", ".join(out) if out else "none"
        parts = []
        for what, idx, lower, lo_size, side in (("latency", 0, True, 0, "under"), ("streaming", 1, False, from_size, "over")):
            good, bad, open_ = decided(sizes, runs, ours, idx, lower, lo_size)
            parts.append("%s %s 1.0 at %d of %d sizes, on the wrong side at %s, undecided at %s" % (
                what, side, len(good), len(good) + len(bad) + len(open_), sz(bad), spans(open_, idx)))
        line += (" What the runs decide (the sign test's interval of the median paired ratio, %d%% or surer, "
                 "wholly on one side of 1.0): %s." % (round(100 * INTERVAL_CONFIDENCE), "; ".join(parts)))
    return line


def write_csv(path, sections):
    """Long format: table, series, size, lat_us, gbs, mmsgs. Ratio rows
    have series 'ratio:<ours>/<best of peers>'. sections: [(table, sizes,
    med, groups)] or [(table, sizes, med, groups, ratios)] with paired
    ratios (see ratio_of)."""
    import csv
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["table", "series", "size", "lat_us", "gbs", "mmsgs"])

        def num(v):
            return "" if v is None else "%.6g" % v
        for table, sizes, med, groups, *paired in sections:
            ratios = paired[0] if paired else None
            for s in sizes:
                for k in med:
                    w.writerow([table, k, s] + [num(v) for v in med[k][s]])
                for ours, peers in groups:
                    r = [ratio_of(ratios, med, ours, peers, s, i) for i in (0, 1, 2)]
                    w.writerow([table, "ratio:%s/%s" % (ours, "|".join(peers)), s] + [num(v) for v in r])


def write_runs_csv(path, sections):
    """Every run's value, from which the tables' medians and paired
    ratios can be worked out again: table, series, kind, size, run (from
    1), lat_us (latency) or gbs and mmsgs (streaming). Only the sections
    that carry their runs (a sixth element, measure's by_run)."""
    import csv
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["table", "series", "kind", "size", "run", "lat_us", "gbs", "mmsgs"])
        for table, _sizes, _med, _groups, *rest in sections:
            if len(rest) < 2:
                continue
            for (key, kind, size), runs in sorted(rest[1].items()):
                for r, v in sorted(runs.items()):
                    vals = ["%.6g" % v, "", ""] if kind == "latency" else ["", "%.6g" % v[0], "%.6g" % v[1]]
                    w.writerow([table, key, kind, size, r + 1] + vals)


def read_runs_csv(path):
    """{table: by_run} from a file write_runs_csv wrote (runs from 0
    again), so that a finished run's ratios can be worked out anew."""
    import csv
    out = {}
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            v = float(r["lat_us"]) if r["kind"] == "latency" else (float(r["gbs"]), float(r["mmsgs"]))
            out.setdefault(r["table"], {}).setdefault((r["series"], r["kind"], int(r["size"])), {})[int(r["run"]) - 1] = v
    return out


def read_runs_csvs(paths):
    """read_runs_csv of one file, or of several pooled: each file's runs
    are numbered on after the last file's, so that a paired ratio still
    pairs the values of one run."""
    if isinstance(paths, str):
        return read_runs_csv(paths)
    out, offset = {}, 0
    for path in paths:
        runs_here = 0
        for table, by_run in read_runs_csv(path).items():
            for key, runs in by_run.items():
                dst = out.setdefault(table, {}).setdefault(key, {})
                for r, v in runs.items():
                    dst[offset + r] = v
                    runs_here = max(runs_here, r + 1)
        offset += runs_here
    return out


def decide_lines(path):
    """The targets lines, with what the runs decide, of the loopback and
    veth tables of a finished run (its .runs.csv at `path`), or of several
    pooled (a list of paths)."""
    lines = []
    for table, by_run in sorted(read_runs_csvs(path).items()):
        if table == "loopback":
            peers = [k for k in LO_KEYS if not k.startswith("ours")]
            groups = [(k, peers) for k in ("ours", "ours_udp", "ours_tcp")]
        elif table == "veth":
            groups = [("ours", ["rxm"]), ("ours_loss", ["rxm_loss"])]
        else:
            continue
        keys = {k for k, _, _ in by_run}
        groups = [(o, [p for p in ps if p in keys]) for o, ps in groups if o in keys]
        groups = [(o, ps) for o, ps in groups if ps]
        sizes = sorted({s for _, _, s in by_run})
        lat = {k: {s: list(by_run.get((k, "latency", s), {}).values()) for s in sizes} for k in keys}
        stream = {k: {s: list(by_run.get((k, "streaming", s), {}).values()) for s in sizes} for k in keys}
        med = medians(sizes, lat, stream)
        ratios = paired_ratios(sizes, by_run, groups)
        runs = paired_runs(sizes, by_run, groups)
        for ours, peers in groups:
            lines.append("%s: %s" % (table, targets(sizes, med, ours, peers, ratios=ratios, runs=runs)))
    return lines


# True ratios power_lines asks about: level, and leads of 5 to 20%.
POWER_LEADS = (1.0, 0.95, 0.9, 0.85, 0.8)
# Fewer runs a size than this say nothing of their scatter.
POWER_MIN_RUNS = 5


def pass_chance(ratio_lists, lead, lower, trials=2000, seed=1):
    """The chance that one run of the benchmark meets a target at every
    size (the median of each size's paired ratios at or under 1.0 when
    `lower`, else at or over), were the true ratio `lead` at every size
    and did each run's ratio scatter around it as these did: each size's
    ratios, as logarithms less their median, pooled over the sizes; each
    trial draws as many runs per size as that size had, with replacement,
    and the sizes independently. (trials passed ÷ trials, scatter: the
    standard deviation of the pooled logarithms); None without ratios."""
    import math
    import random
    import statistics
    resid = []
    for rs in ratio_lists:
        logs = [math.log(r) for r in rs if r > 0]
        if logs:
            m = statistics.median(logs)
            resid += [v - m for v in logs]
    counts = [len(rs) for rs in ratio_lists if rs]
    if not resid or not counts:
        return None
    rng = random.Random(seed)
    shift = math.log(lead)
    passed = 0
    for _ in range(trials):
        ok = True
        for n in counts:
            med = statistics.median(rng.choice(resid) for _ in range(n)) + shift
            if (med > 0) if lower else (med < 0):
                ok = False
                break
        passed += ok
    return passed / trials, statistics.pstdev(resid)


def power_of(table, sizes, by_run, ours, peers, leads=POWER_LEADS, trials=2000):
    """Lines for `ours` against `peers` in one table's runs (`by_run`, as
    measure fills it): how the run's paired ratios (paired_runs) scatter,
    and the chance (pass_chance) that a run like it meets each target at
    every size, for a library whose true ratio were each of `leads`
    (latency; its inverse for streaming, from 64 KiB). None where a size
    has fewer than POWER_MIN_RUNS runs."""
    lines = []
    runs = paired_runs(sizes, by_run, [(ours, peers)])
    for what, idx, lower, lo_size in (("latency", 0, True, 0), ("streaming", 1, False, 65536)):
        lists = [rs for s in sizes if s >= lo_size and (rs := runs[(ours, s)][idx])]
        if not lists or min(len(rs) for rs in lists) < POWER_MIN_RUNS:
            continue
        got = [pass_chance(lists, lead if lower else 1 / lead, lower, trials) for lead in leads]
        lines.append("%s, %s against %s, %s at %d sizes (%s runs each): run-to-run scatter of the paired ratio "
                     "%.2f (standard deviation of its logarithm); chance that one run shows %s 1.0 at every "
                     "size, if the true ratio were, at every size, %s" % (
                         table, SHORT[ours], " / ".join(SHORT[p] for p in peers), what, len(lists),
                         "-".join(sorted({str(len(rs)) for rs in lists}, key=int)), got[0][1],
                         "≤" if lower else "≥",
                         ", ".join("%.2f: %.0f%%" % (lead if lower else 1 / lead, 100 * g[0])
                                   for lead, g in zip(leads, got))))
    return lines


def power_lines(path, leads=POWER_LEADS, trials=2000):
    """power_of for the loopback table's tcp and the veth table of a
    finished run (its .runs.csv at `path`), or of several pooled (a list
    of paths: the chance for a run with all their runs)."""
    lines = []
    for table, by_run in sorted(read_runs_csvs(path).items()):
        if table == "loopback":
            ours, peers = "ours_tcp", [k for k in LO_KEYS if not k.startswith("ours")]
        elif table == "veth":
            ours, peers = "ours", ["rxm"]
        else:
            continue
        keys = {k for k, _, _ in by_run}
        peers = [p for p in peers if p in keys]
        if ours in keys and peers:
            lines += power_of(table, sorted({s for _, _, s in by_run}), by_run, ours, peers, leads, trials)
    return lines


@contextlib.contextmanager
def own_loopback():
    """(path, where) for loopback cases: LOOPBACK, in a network namespace
    made afresh for the block (bench/netns.sh lo-fresh) and removed after
    it, or HOST_LOOPBACK where none can be made; `where` says which, for
    the report."""
    why = lo_missing()
    if not why:
        try:
            netns("lo-fresh")
        except RuntimeError as e:
            why = str(e)
    try:
        if why:
            yield HOST_LOOPBACK, "on the host's loopback (no namespace of its own: %s)" % why
        else:
            yield LOOPBACK, "in network namespace %s, made for this run (bench/netns.sh lo-fresh)" % LOOPBACK.server_ns
    finally:
        if not why:
            netns("lo-down")


# ---------------------------------------------------------------- floor

# Sizes of the floor comparison: where every series is bound by the
# kernel's per-message path rather than by copies.
FLOOR_SIZES = [8 << i for i in range(12)]


def floor_cmds(binary, size, port, turn_ns=0):
    """bench/tcp_floor.c's `bare` ping-pong (one connection, each side
    spinning on `recv`, no library) of pp_iters(size) round trips, each
    side spinning `turn_ns` between a receive and its answer: (server,
    client)."""
    args = [str(pp_iters(size)), "bare", str(size)] + ([str(turn_ns)] if turn_ns else [])
    return [binary, "server", str(port)] + args, [binary, "client", str(port)] + args


def floor_case(binary, size, ports, path, turn_ns=0):
    """floor_cmds' ping-pong on `path`: (one-way µs, None) or (None,
    (error, repro line))."""
    def cmds(port):
        return floor_cmds(binary, size, port, turn_ns)
    ok, out, err = bench.run_pair_on_port(ports, cmds, {}, timeout=LAT_TIMEOUT, server_ns=path.server_ns,
                                          client_ns=path.client_ns)
    line = " ".join(cmds(23500)[0]) + " & " + " ".join(cmds(23500)[1])
    if not ok:
        return None, (err, line)
    m = re.search(r"round trips, ([0-9.]+) us one-way", out)
    if not m:
        return None, ("no result line: %s" % bench.last_lines(out), line)
    return float(m.group(1)), None


def floor_lines(sizes, by_run):
    """The floor comparison's report: per size, the medians of our tcp,
    UCX tcp and the floor, and the paired ratios (median and the sign
    test's interval) ours ÷ UCX, floor ÷ UCX and ours ÷ floor; then what
    a run like it can show (power_of) for ours and for the floor."""
    def cell(a, b, s):
        rs = paired_runs([s], by_run, [(a, [b])])[(a, s)][0]
        if not rs:
            return "-"
        iv = median_interval(rs)
        return "%.3f (%s)" % (bench.median_or_none(rs), "%.2f-%.2f" % iv[:2] if iv else "too few runs")

    def med(k, s):
        v = bench.median_or_none(list(by_run.get((k, "latency", s), {}).values()))
        return "-" if v is None else "%.2f" % v
    rows = [[bench.human(s), med("ours_tcp", s), med("ucx", s), med("floor", s), cell("ours_tcp", "ucx", s),
             cell("floor", "ucx", s), cell("ours_tcp", "floor", s)] for s in sizes]
    out = md_table(["size", "ours tcp µs", "UCX tcp µs", "floor µs", "ours÷UCX", "floor÷UCX", "ours÷floor"], rows)
    out.append("")
    for k in ("ours_tcp", "floor"):
        out += ["- " + line for line in power_of("loopback", sizes, by_run, k, ["ucx"]) if "latency" in line]
    return out


def floor_run(repo, ours_lib, reps, out_csv, log, sizes=FLOOR_SIZES):
    """Our tcp, UCX tcp and bench/tcp_floor.c's bare ping-pong, latency at
    `sizes`, `reps` rotated runs on loopback (a namespace of its own when
    bench/netns.sh can make one). Writes the runs to `out_csv` (what
    `decide` and `power` read) and returns the report's lines."""
    binary, err = bench.build_c(os.path.join(repo, "bench", "tcp_floor.c"),
                                os.path.join(repo, "build", "bench", "tcp_floor"), [])
    if err:
        raise RuntimeError(err)
    by_run = {}
    with own_loopback() as (path, where):
        series = [make_series("ours_tcp", path, ours_lib), make_series("ucx", path, ours_lib),
                  Series("floor", path, "floor", None)]

        def case(se, kind, size, ports, binary_):
            if se.key == "floor":
                return floor_case(binary, size, ports, path)
            return run_case(se, kind, size, ports, binary_)
        _, _, fails = measure(series, sizes, reps, None, log, run_case=case, by_run=by_run, kinds=("latency",))
    write_runs_csv(out_csv, [("loopback", sizes, None, None, None, by_run)])
    head = ["One-way latency on 127.0.0.1 %s, %d rotated runs per case, server on core 0, client on core 1; "
            "paired ratios: median over runs (the sign test's interval of the median, %d%% or surer)."
            % (where, reps, round(100 * INTERVAL_CONFIDENCE)), ""]
    return head + floor_lines(sizes, by_run) + failures_md(fails)


# ---------------------------------------------------------------- calibration

# Turnarounds (ns) added to the floor by `calibrate`: from none to more
# than our tcp's (about 0.5 to 1 µs, `turnaround`).
CALIBRATE_TURNS = [0, 250, 500, 750, 1000]


def turn_key(turn_ns):
    """The series key of the floor with `turn_ns` added ("floor" for 0)."""
    return "floor" if not turn_ns else "floor+%d" % turn_ns


def fit_line(points):
    """(slope, intercept) of the least-squares line through (x, y)
    points, or None with fewer than two distinct x."""
    if len({x for x, _ in points}) < 2:
        return None
    mx = sum(x for x, _ in points) / len(points)
    my = sum(y for _, y in points) / len(points)
    slope = sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x, _ in points)
    return slope, my - slope * mx


def turn_at(turns, ratios):
    """The turnaround (ns) at which the floor's latency equals a series':
    `ratios[i]` is floor+turns[i] ÷ that series (paired medians, None
    where missing). A least-squares line through all of them (each is
    noisy; a line through two neighbours would follow their noise), solved
    for 1.0. None with fewer than two ratios or a line that does not rise;
    a turnaround outside the turns measured is an extrapolation."""
    line = fit_line([(t, r) for t, r in zip(turns, ratios) if r is not None])
    if line is None or line[0] <= 0:
        return None
    return (1.0 - line[1]) / line[0]


def calibrate_lines(size, turns, by_run, keys):
    """The calibration's report: per series (our tcp, UCX tcp, the floor
    with each turnaround), its median one-way latency and the paired ratio
    to our tcp (median over runs, sign test's interval); then, for our tcp
    and UCX, the turnaround added to the floor that matches it (turn_at),
    and what 100 ns of turnaround adds to the floor's latency (the same
    line's slope)."""
    def ratios(a, b):
        return paired_runs([size], by_run, [(a, [b])])[(a, size)][0]

    def med(k):
        return bench.median_or_none(list(by_run.get((k, "latency", size), {}).values()))
    rows = []
    for k in keys:
        rs = ratios(k, "ours_tcp") if k != "ours_tcp" else []
        iv = median_interval(rs) if rs else None
        cell = "-" if not rs else "%.3f (%s)" % (bench.median_or_none(rs), "%.2f-%.2f" % iv[:2] if iv else "too few runs")
        m = med(k)
        label = SHORT.get(k) or "tcp floor, %d ns turnaround" % int(k.split("+")[1])
        rows.append([label, "-" if m is None else "%.2f" % m, cell])
    out = md_table(["series", "one-way µs (median)", "÷ ours tcp (paired)"], rows)
    out.append("")
    floors = [turn_key(t) for t in turns]
    for k in ("ours_tcp", "ucx"):
        if k not in keys:
            continue
        rs = [bench.median_or_none(ratios(f, k)) for f in floors]
        t = turn_at(turns, rs)
        if all(r is None for r in rs):
            out.append("- %s: no run paired with the floor's." % SHORT[k])
        elif t is None:
            out.append("- %s: no turnaround matches it (the floor's latency did not rise with its turnaround)."
                       % SHORT[k])
        else:
            lo, hi = min(turns), max(turns)
            outside = "" if lo <= t <= hi else " (outside %d-%d ns: extrapolated)" % (lo, hi)
            out.append("- %s matches the floor with %.0f ns of turnaround per message on each side%s."
                       % (SHORT[k], t, outside))
    floor_meds = [(t, med(f)) for t, f in zip(turns, floors)]
    line = fit_line([(t, m) for t, m in floor_meds if m is not None])
    if line is not None:
        step = line[0] * 100
        ours = med("ours_tcp")
        share = "" if not ours else ", %.1f%% of our tcp's latency" % (100 * step / ours)
        out.append("- 100 ns of turnaround adds %.3f µs to the floor's one-way latency%s." % (step, share))
    return out


def calibrate_run(repo, ours_lib, reps, size, turns, out_csv, log):
    """Our tcp, UCX tcp and bench/tcp_floor.c's bare ping-pong with each
    of `turns` (ns) added between a receive and its answer, latency at
    `size`, `reps` rotated runs on loopback (a namespace of its own when
    bench/netns.sh can make one). Writes the runs to `out_csv` and returns
    the report's lines (calibrate_lines)."""
    import shutil
    binary, err = bench.build_c(os.path.join(repo, "bench", "tcp_floor.c"),
                                os.path.join(repo, "build", "bench", "tcp_floor"), [])
    if err:
        raise RuntimeError(err)
    turns = sorted(set(turns))
    keys = ["ours_tcp"] + (["ucx"] if shutil.which("ucx_perftest") else []) + [turn_key(t) for t in turns]
    by_run = {}
    with own_loopback() as (path, where):
        series = [make_series(k, path, ours_lib) if k in ("ours_tcp", "ucx") else Series(k, path, "floor", None)
                  for k in keys]
        turn_of = {turn_key(t): t for t in turns}

        def case(se, kind, size_, ports, binary_):
            if se.key in turn_of:
                return floor_case(binary, size_, ports, path, turn_of[se.key])
            return run_case(se, kind, size_, ports, binary_)
        _, _, fails = measure(series, [size], reps, None, log, run_case=case, by_run=by_run, kinds=("latency",))
    write_runs_csv(out_csv, [("loopback", [size], None, None, None, by_run)])
    head = ["One-way latency of %s messages on 127.0.0.1 %s, %d rotated runs per series, server on core 0, client "
            "on core 1; the floor (bench/tcp_floor.c bare) spins the given time between a receive and its answer, "
            "on both sides. Paired ratios: median over runs (the sign test's interval of the median, %d%% or surer)."
            % (bench.human(size), where, reps, round(100 * INTERVAL_CONFIDENCE)), ""]
    return head + calibrate_lines(size, turns, by_run, keys) + failures_md(fails)


# ---------------------------------------------------------------- turnaround

TURN_LINE = re.compile(r"turnaround pid \d+: (\d+), mean (\d+) ns, median (\d+) ns")


def parse_turnaround(text):
    """[(intervals, mean ns, median ns)], one per line bench/turnaround.c
    wrote (one per process that saw an interval)."""
    return [tuple(int(g) for g in m.groups()) for m in TURN_LINE.finditer(text)]


def turnaround_case(series, size, ports, shim, floor):
    """One latency ping-pong of `series` ("floor": bench/tcp_floor.c's
    bare one, binary `floor`) with bench/turnaround.c (`shim`) loaded in
    both processes: (both sides' parse_turnaround, None), or (None,
    (error, repro line))."""
    import tempfile
    fd, out = tempfile.mkstemp(prefix="turnaround.")
    os.close(fd)

    def cmds(port):
        if series.key == "floor":
            return floor_cmds(floor, size, port)
        if series.provider is None:
            return ucx_cmds(series, "tag_lat", size, port)
        return pingpong_cmds(series, size, port)

    def afresh(port):
        open(out, "w").close()  # a retried case starts with an empty file
        return cmds(port)
    env = {} if series.key == "floor" else series.env()
    env.update({"LD_PRELOAD": shim, "TURNAROUND_OUT": out})
    try:
        ok, _, err = bench.run_pair_on_port(ports, afresh, env, timeout=LAT_TIMEOUT, server_ns=series.path.server_ns,
                                            client_ns=series.path.client_ns)
        with open(out) as f:
            got = parse_turnaround(f.read())
    finally:
        os.unlink(out)
    line = "LD_PRELOAD=%s %s & %s" % (shim, " ".join(cmds(23500)[0]), " ".join(cmds(23500)[1]))
    if not ok:
        return None, (err, line)
    if len(got) != 2:
        return None, ("%d turnaround lines, not one from each side" % len(got), line)
    return got, None


def turnaround_lines(results, keys):
    """The turnaround report: per series, the medians and means of every
    process of every round (results: {key: [(intervals, mean, median)]})."""
    rows = []
    for k in keys:
        got = results.get(k, [])
        if not got:
            rows.append([SHORT[k], "-", "-", "-", "0"])
            continue
        meds, means = [g[2] for g in got], [g[1] for g in got]
        rows.append([SHORT[k], "%d" % bench.median_or_none(meds), "%d-%d" % (min(meds), max(meds)),
                     "%d-%d" % (min(means), max(means)), "%d" % len(got)])
    return md_table(["series", "median ns (median of processes)", "medians, ns", "means, ns", "processes"], rows)


def turnaround_run(repo, ours_lib, rounds, size, log):
    """Our tcp, UCX tcp, tcp;ofi_rxm and bench/tcp_floor.c's bare
    ping-pong at `size`, `rounds` rotated rounds on loopback (a namespace
    of its own when bench/netns.sh can make one), each with
    bench/turnaround.c in both processes: the report's lines."""
    import shutil
    outdir = os.path.join(repo, "build", "bench")
    shim, err = bench.build_c(os.path.join(repo, "bench", "turnaround.c"), os.path.join(outdir, "turnaround.so"),
                              ["-shared", "-fPIC", "-ldl"])
    floor, err2 = bench.build_c(os.path.join(repo, "bench", "tcp_floor.c"), os.path.join(outdir, "tcp_floor"), [])
    if err or err2:
        raise RuntimeError(err or err2)
    keys = ["ours_tcp"] + (["ucx"] if shutil.which("ucx_perftest") else []) + ["rxm", "floor"]
    results, fails = {k: [] for k in keys}, []
    ports = bench.Ports()
    with own_loopback() as (path, where):
        series = [Series("floor", path, "floor", None) if k == "floor" else make_series(k, path, ours_lib) for k in keys]
        for r in range(rounds):
            for se in rotated(series, r):
                got, e = turnaround_case(se, size, ports, shim, floor)
                if e:
                    fails.append((se.key, "latency", size, r + 1) + tuple(e))
                else:
                    results[se.key] += got
                log(".")
        log("\n")
    head = ["Turnaround (bench/turnaround.c: a receive that returned data to the next send, in user space), "
            "%s ping-pongs on 127.0.0.1 %s, %d rotated rounds, server on core 0, client on core 1:"
            % (bench.human(size), where, rounds), ""]
    return head + turnaround_lines(results, keys) + failures_md(fails)


def write_phase_csv(path, sections):
    """Every probe of the sections that carry a PhaseProbe (a seventh
    element): table, kind, size, run (from 1), try (from 1), before and
    after (GB/s; empty where a probe failed), kept (1: the group's values
    are that try's)."""
    import csv

    def num(v):
        return "" if v is None else "%.4g" % v
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["table", "kind", "size", "run", "try", "before_gbs", "after_gbs", "kept"])
        for table, _sizes, _med, _groups, *rest in sections:
            if len(rest) < 3 or rest[2] is None:
                continue
            for kind, size, rep, attempt, before, after, kept in rest[2].readings:
                w.writerow([table, kind, size, rep + 1, attempt + 1, num(before), num(after), int(kept)])


def write_svg(path, lo, veth, note):
    """lo, veth: (sizes, med) or None. Latency and bandwidth panels for
    each."""
    w = 980
    blocks = [(t, b) for t, b in (("loopback", lo), ("veth, no loss and 1% loss", veth)) if b]
    h = 380 * len(blocks) + 80
    parts = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
             'font-family="sans-serif" viewBox="0 0 %d %d">' % (w, h, w, h),
             '<rect width="100%" height="100%" fill="white"/>']
    keys = []
    for i, (title, (sizes, med)) in enumerate(blocks):
        y = i * 380
        lat = {k: [(s, med[k][s][0]) for s in sizes] for k in med}
        bw = {k: [(s, med[k][s][1]) for s in sizes] for k in med}
        dashed = [k for k in med if k.endswith("_loss")]
        parts += bench.panel(0, y, w // 2, 370, "%s: one-way latency (lower is better)" % title, "µs",
                             sizes, lat, COLORS, dashed)
        parts += bench.panel(w // 2, y, w // 2, 370, "%s: streaming, window %d" % (title, NET_WINDOW),
                             "GB/s", sizes, bw, COLORS, dashed)
        keys += [k for k in med if k not in keys]
    for i, k in enumerate(keys):  # three to a row
        x, ly = 70 + (i % 3) * 300, h - 62 + (i // 3) * 20
        parts.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="3"%s/>'
                     % (x, ly, x + 24, ly, COLORS[k], ' stroke-dasharray="6,3"' if k.endswith("_loss") else ""))
        parts.append('<text x="%d" y="%d" font-size="12">%s</text>' % (x + 30, ly + 4, bench.svg_escape(LABELS[k])))
    parts.append('<text x="70" y="%d" font-size="10" fill="#555">%s</text>' % (h - 10, bench.svg_escape(note)))
    parts.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(parts) + "\n")


# ---------------------------------------------------------------- MPI

def parse_mpi(out):
    """{("pingpong"|"allreduce", size): µs} from mpi_net's lines."""
    res = {}
    for line in out.splitlines():
        f = line.split()
        if len(f) == 4 and f[0] in ("pingpong", "allreduce"):
            try:
                res[(f[0], int(f[1]))] = float(f[3])
            except ValueError:
                pass
    return res


def mpi_command(repo, exe, pp, ar):
    venv = os.environ.get("MPICH_VENV", os.path.join(repo, ".venv"))
    return (bench.netns_prefix(VETH.client_ns) +
            [os.path.join(venv, "bin", "mpiexec"), "-launcher", "ssh", "-launcher-exec", NSEXEC,
             "-iface", VETH.iface, "-hosts", "10.78.0.1,10.78.0.2", "-ppn", "1", "-n", "2",
             "sh", "-c", 'exec taskset -c "$PMI_RANK" "$0" "$@"', exe,
             ",".join(map(str, pp)), ",".join(map(str, ar))])


def mpi_env(lib, ours_lib):
    env = {"MPIR_CVAR_CH4_NETMOD": "ofi", "MPIR_CVAR_NOLOCAL": "1"}
    if lib == "ours":
        env.update({"LD_LIBRARY_PATH": ours_lib, "FI_PROVIDER": "rudp", "FI_RUDP_IFACE": VETH.iface})
    else:
        env.update({"FI_PROVIDER": "tcp", "FI_TCP_IFACE": VETH.iface})
    return env


def run_mpi_once(cmd, env, timeout=MPI_TIMEOUT):
    """(stdout, None) or (None, error). The whole process group is killed
    on timeout (mpiexec, its proxies and ranks)."""
    full = dict(os.environ)
    full.pop("LD_LIBRARY_PATH", None)
    full.update(env)
    p = subprocess.Popen(cmd, env=full, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True)
    try:
        out = p.communicate(timeout=timeout)[0]
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out = p.communicate()[0]
        return None, "timed out after %d s (killed): %s" % (timeout, bench.last_lines(out, 3))
    if p.returncode != 0:
        return None, "exit %d: %s" % (p.returncode, bench.last_lines(out, 3))
    return out, None


def measure_mpi(repo, ours_lib, reps, log, quick=False):
    """{"ours"|"wheel": {(kind, size): [µs]}}, failures [(lib, rep, error,
    repro)], and the sizes."""
    import mpi_oversub
    outdir = os.path.join(repo, "build", "bench")
    os.makedirs(outdir, exist_ok=True)
    exe = os.path.join(outdir, "mpi_net")
    cc = os.path.join(mpi_oversub.venv_dir(repo), "bin", "mpicc")
    r = subprocess.run([cc, "-O2", "-Wall", "-Wextra", "-Werror", "-o", exe,
                        os.path.join(repo, "bench", "mpi_net.c")], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("mpicc failed: " + r.stderr.strip()[-400:])
    pp = [8, 65536, 1 << 20] if quick else MPI_PP_SIZES
    ar = [8, 65536] if quick else MPI_AR_SIZES
    cmd = mpi_command(repo, exe, pp, ar)
    res = {"ours": {}, "wheel": {}}
    failures = []
    for rep in range(reps):
        for lib in (("ours", "wheel") if rep % 2 == 0 else ("wheel", "ours")):
            log("  mpi %s run %d/%d\n" % (lib, rep + 1, reps))
            env = mpi_env(lib, ours_lib)
            out, err = run_mpi_once(cmd, env)
            got = parse_mpi(out or "")
            if err is None:
                missing = [k for k in [("pingpong", s) for s in pp] + [("allreduce", s) for s in ar]
                           if k not in got]
                if missing:
                    err = "no result for %s %s" % (missing[0][0], bench.human(missing[0][1]))
            for k, v in got.items():
                res[lib].setdefault(k, []).append(v)
            if err:
                line = "bench/netns.sh up && bench/netns.sh loss off && env %s %s" % (
                    " ".join("%s=%s" % kv for kv in sorted(env.items())), " ".join(shlex.quote(c) for c in cmd))
                failures.append((lib, rep + 1, err, line))
    return res, failures, pp, ar


def mpi_markdown(res, failures, pp, ar, reps):
    out = ["MPI between the namespaces (bench/mpi_net.c, MPICH wheel, 2 ranks: one in rfbn-a on core 0, "
           "one in rfbn-b on core 1; MPIR_CVAR_CH4_NETMOD=ofi MPIR_CVAR_NOLOCAL=1; ours: FI_PROVIDER=rudp "
           "on our libfabric.so.1; wheel: its own libfabric, FI_PROVIDER=tcp (tcp;ofi_rxm); no loss; "
           "median of %d run%s, alternating; µs, lower is better)" % (reps, "s" if reps > 1 else ""), ""]
    for kind, sizes, what in (("pingpong", pp, "MPI_Send/MPI_Recv ping-pong, one-way µs"),
                              ("allreduce", ar, "MPI_Allreduce (MPI_SUM, doubles), µs per call")):
        out += [what, ""]
        rows = []
        for s in sizes:
            o = bench.median_or_none(res["ours"].get((kind, s), []))
            w = bench.median_or_none(res["wheel"].get((kind, s), []))
            rows.append([bench.human(s), bench.fmt(o), bench.fmt(w), bench.fmt(bench.ratio(o, [w], True), 2)])
        out += md_table(["size", "ours rudp", "wheel tcp", "ours÷wheel"], rows) + [""]
    if failures:
        out += ["Failed MPI runs (left out of the medians):", ""]
        out += ["- %s run %d: %s  \n  repeat: `%s`" % f for f in failures]
        out.append("")
    return "\n".join(out)


# ---------------------------------------------------------------- main

def uptime():
    try:
        with open("/proc/loadavg") as f:
            return "load average %s" % " ".join(f.read().split()[:3])
    except OSError:
        return "load average unknown"


def lo_missing():
    """Why the loopback runs cannot have a namespace of their own, or None."""
    import shutil
    if os.geteuid() != 0:
        return "not root"
    if not shutil.which("ip"):
        return "ip (apt-get install iproute2)"
    return None


def veth_missing():
    """Why the namespaces cannot be used here, or None."""
    import shutil
    if os.geteuid() != 0:
        return "root (ip netns, nft)"
    for tool, pkg in (("ip", "iproute2"), ("nft", "nftables"), ("ethtool", "ethtool")):
        if not shutil.which(tool):
            return "%s (apt-get install %s)" % (tool, pkg)
    return None


def netns(*args):
    r = subprocess.run([NETNS] + list(args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        raise RuntimeError("netns.sh %s: %s" % (" ".join(args), bench.last_lines(r.stdout)))
    return r.stdout


def run(repo, ours_lib, ours_err, sizes, reps, parts, log, quick=False):
    """Measures the parts asked for ("lo", "veth", "mpi") and returns
    (markdown, csv sections, svg blocks (lo, veth))."""
    import shutil
    text = []
    sections = []
    lo_block = None
    binary, err = bench.build_stream(repo, os.path.join(repo, "build", "bench"))
    if err:
        return "Network: not measured: %s\n" % err, [], (None, None)
    if not shutil.which("fi_pingpong"):
        return ("Network: not measured: needs fi_pingpong (%s)\n" % bench.PEER_INSTALL["debian"][1]), [], (None, None)
    lo_keys = [k for k in LO_KEYS if not (k == "ucx" and not shutil.which("ucx_perftest"))]
    if ours_err:
        text.append("ours: not measured: %s\n" % ours_err)
    drop = (lambda keys: [k for k in keys if not k.startswith("ours")]) if ours_err else (lambda keys: list(keys))

    if "lo" in parts:
        keys = drop(lo_keys)
        by_run = {}
        probe_bin, probe_err = build_probe(repo, os.path.join(repo, "build", "bench"))
        with own_loopback() as (path, where):
            series = [make_series(k, path, ours_lib) for k in keys]
            t0, load0 = time.time(), uptime()
            log("network, loopback %s: %s\n" % (where, ", ".join(keys)))
            probe = PhaseProbe(probe_bin, path.server_ns, bench.Ports()) if probe_bin else None
            lat, stream, fails = measure(series, sizes, reps, binary, log, by_run=by_run, probe=probe)
        med = medians(sizes, lat, stream)
        for k in lo_keys:
            med.setdefault(k, {s: (None, None, None) for s in sizes})
        peers = [k for k in lo_keys if not k.startswith("ours")]
        groups = [(k, peers) for k in ("ours", "ours_udp", "ours_tcp") if k in lo_keys]
        ratios = paired_ratios(sizes, by_run, groups)
        each_run = paired_ratios(sizes, by_run, groups, each_run_best=True)
        runs = paired_runs(sizes, by_run, groups)
        text += ["## Loopback: rudp and our tcp vs tcp;ofi_rxm, udp;ofi_rxd, UCX tcp", "",
                 "On one host rudp's peers meet in shared memory (column ours); column ours UDP is rudp "
                 "with FI_RUDP_ENABLE_SHM=0, through UDP on 127.0.0.1.", "",
                 "127.0.0.1 %s, server on core 0, client on core 1; %d run%s per case, %.0f s, %s at the start, "
                 "%s at the end." % (where, reps, "s" if reps > 1 else "", time.time() - t0, load0, uptime()), "",
                 "One-way latency, µs (median of runs; lower is better; ratio = median over runs of ours ÷ "
                 "the best peer, the one with the best median, in the same run, target ≤ 1.0)", ""]
        text += lat_table(sizes, med, groups, ratios)
        text += ["", "Streaming, window %d (median of runs; higher is better; ratio = median over runs of ours ÷ "
                 "the best peer, the one with the best median, in the same run, target ≥ 1.0 from 64 KiB)"
                 % NET_WINDOW, ""]
        text += stream_table(sizes, med, groups, ratios)
        for k, _ in groups:
            text += ["", targets(sizes, med, k, peers, ratios=ratios, each_run=each_run, runs=runs)]
        if "ours_tcp" in keys and reps >= POWER_MIN_RUNS:
            text += ["", "What a run like this one can show (`python3 bench/net.py power`):"]
            text += ["- " + line for line in power_of("loopback", sizes, by_run, "ours_tcp", peers)]
        text += ["", probe.summary() if probe else "Phase gate: off (%s)." % probe_err]
        text += failures_md(fails) + [""]
        sections.append(("loopback", sizes, med, groups, ratios, by_run, probe))
        lo_block = (sizes, med)

    need_ns = "veth" in parts or "mpi" in parts
    why = veth_missing() if need_ns else None
    if need_ns and not why:
        try:
            netns("up")
            netns("loss", "off")
        except RuntimeError as e:
            why = str(e)
    try:
        veth_block = veth_and_mpi(repo, ours_lib, ours_err, sizes, reps, parts, log, quick, why, binary,
                                  drop, text, sections)
    finally:
        if need_ns and not why:
            netns("down")
    return "\n".join(text) + "\n", sections, (lo_block, veth_block)


def veth_and_mpi(repo, ours_lib, ours_err, sizes, reps, parts, log, quick, why, binary, drop, text, sections):
    """The veth tables and the MPI section (appended to `text` and
    `sections`); returns the veth block for the plot, or None."""
    veth_block = None
    if "veth" in parts:
        if why:
            text += ["## veth between two namespaces: not measured: needs %s" % why, ""]
        else:
            keys = drop(VETH_KEYS)
            series = [make_series(k, VETH, ours_lib) for k in keys]
            loss = Loss()
            t0, load0 = time.time(), uptime()
            log("network, veth, no loss and %d%% loss: %s\n" % (LOSS_PCT, ", ".join(keys)))
            by_run = {}
            try:
                lat, stream, fails = measure(series, sizes, reps, binary, log, loss, by_run=by_run)
            finally:
                netns("loss", "off")
            med = medians(sizes, lat, stream)
            for k in VETH_KEYS:
                med.setdefault(k, {s: (None, None, None) for s in sizes})
            groups = [("ours", ["rxm"]), ("ours_loss", ["rxm_loss"])]
            ratios = paired_ratios(sizes, by_run, groups)
            runs = paired_runs(sizes, by_run, groups)
            text += ["## veth between two namespaces, no loss and %d%% loss: rudp vs tcp;ofi_rxm" % LOSS_PCT, "",
                     "Client in rfbn-a (10.78.0.1, core 1), server in rfbn-b (10.78.0.2, core 0), veth rfbn0, "
                     "MTU 1500, tso/gso/gro off; loss: bench/netns.sh loss %d (in rfbn-b: UDP packets and TCP "
                     "segments with payload, each dropped with probability %d%%); the four columns alternate "
                     "size by size; %d run%s per case, %.0f s, %s at the start, %s at the end."
                     % (LOSS_PCT, LOSS_PCT, reps, "s" if reps > 1 else "", time.time() - t0, load0, uptime()), "",
                     counters_line(loss.totals), "",
                     "One-way latency, µs (median of runs; lower is better; ratio = median over runs of ours ÷ "
                     "tcp;ofi_rxm under the same loss in the same run, target ≤ 1.0)", ""]
            text += lat_table(sizes, med, groups, ratios)
            text += ["", "Streaming, window %d (median of runs; higher is better; ratio = median over runs of "
                     "ours ÷ tcp;ofi_rxm under the same loss in the same run, target ≥ 1.0 from 64 KiB)"
                     % NET_WINDOW, ""]
            text += stream_table(sizes, med, groups, ratios)
            text += ["", targets(sizes, med, "ours", ["rxm"], ratios=ratios, runs=runs), "",
                     targets(sizes, med, "ours_loss", ["rxm_loss"], ratios=ratios, runs=runs)]
            text += failures_md(fails) + [""]
            sections.append(("veth", sizes, med, groups, ratios, by_run))
            veth_block = (sizes, med)
    if "mpi" in parts:
        import mpi_oversub
        why_mpi = why or mpi_oversub.missing(repo) or ours_err
        if why_mpi:
            text += ["## MPI between the namespaces: not measured: needs %s" % why_mpi, ""]
        else:
            log("network, MPI\n")
            t0, load0 = time.time(), uptime()
            try:
                res, fails, pp, ar = measure_mpi(repo, ours_lib, reps, log, quick)
                text += ["## MPI between the namespaces", "",
                         "%.0f s, %s at the start, %s at the end." % (time.time() - t0, load0, uptime()), "",
                         mpi_markdown(res, fails, pp, ar, reps)]
                med = {lib: {(kind, s): bench.median_or_none(v) for (kind, s), v in res[lib].items()}
                       for lib in res}
                for kind, szs in (("pingpong", pp), ("allreduce", ar)):
                    m = {lib: {s: (med[lib].get((kind, s)), None, None) for s in szs} for lib in med}
                    sections.append(("mpi_" + kind, szs, m, [("ours", ["wheel"])]))
            except RuntimeError as e:
                text += ["## MPI between the namespaces: not measured: %s" % e, ""]
    return veth_block


if __name__ == "__main__":
    import sys
    usage = ("usage: python3 bench/net.py decide|power bench/results/<name>.net.runs.csv\n"
             "       python3 bench/net.py floor [--reps N] [--ours-libdir DIR] bench/results/<name>.floor.runs.csv\n"
             "       python3 bench/net.py turnaround [--rounds N] [--size BYTES] [--ours-libdir DIR]\n"
             "       python3 bench/net.py calibrate [--reps N] [--size BYTES] [--turns NS,NS,..] [--ours-libdir DIR] "
             "bench/results/<name>.calibrate.runs.csv")
    if len(sys.argv) >= 3 and sys.argv[1] in ("decide", "power"):
        # Several files: their runs pooled, as one run of them all.
        paths = sys.argv[2] if len(sys.argv) == 3 else sys.argv[2:]
        print("\n\n".join((decide_lines if sys.argv[1] == "decide" else power_lines)(paths)))
    elif len(sys.argv) >= 3 and sys.argv[1] == "floor":
        import argparse
        ap = argparse.ArgumentParser(prog="bench/net.py floor")
        ap.add_argument("--reps", type=int, default=9)
        ap.add_argument("--ours-libdir", default="build/lib")
        ap.add_argument("out")
        a = ap.parse_args(sys.argv[2:])
        repo = os.path.dirname(HERE)
        print("\n".join(floor_run(repo, os.path.abspath(a.ours_libdir), a.reps, a.out,
                                  lambda t: (sys.stderr.write(t), sys.stderr.flush()))))
    elif len(sys.argv) >= 3 and sys.argv[1] == "calibrate":
        import argparse
        ap = argparse.ArgumentParser(prog="bench/net.py calibrate")
        # Fewer runs leave the floor's steps of 250 ns inside the noise.
        ap.add_argument("--reps", type=int, default=60)
        ap.add_argument("--size", type=int, default=64)
        ap.add_argument("--turns", default=",".join(str(t) for t in CALIBRATE_TURNS))
        ap.add_argument("--ours-libdir", default="build/lib")
        ap.add_argument("out")
        a = ap.parse_args(sys.argv[2:])
        try:
            turns = [int(t) for t in a.turns.split(",")]
        except ValueError:
            sys.exit("bench/net.py calibrate: --turns takes nanoseconds separated by commas")
        if len(set(turns)) < 2 or min(turns) < 0:
            sys.exit("bench/net.py calibrate: --turns needs two or more different turnarounds of 0 ns or more")
        repo = os.path.dirname(HERE)
        print("\n".join(calibrate_run(repo, os.path.abspath(a.ours_libdir), a.reps, a.size, turns, a.out,
                                      lambda t: (sys.stderr.write(t), sys.stderr.flush()))))
    elif len(sys.argv) >= 2 and sys.argv[1] == "turnaround":
        import argparse
        ap = argparse.ArgumentParser(prog="bench/net.py turnaround")
        ap.add_argument("--rounds", type=int, default=3)
        ap.add_argument("--size", type=int, default=64)
        ap.add_argument("--ours-libdir", default="build/lib")
        a = ap.parse_args(sys.argv[2:])
        repo = os.path.dirname(HERE)
        print("\n".join(turnaround_run(repo, os.path.abspath(a.ours_libdir), a.rounds, a.size,
                                       lambda t: (sys.stderr.write(t), sys.stderr.flush()))))
    else:
        sys.exit(usage)
