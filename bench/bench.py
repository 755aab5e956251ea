#!/usr/bin/env python3
"""Side-by-side benchmark of the shm provider (ours, Debian's libfabric, UCX) and of rudp.

Run from the repository root (``make bench`` does that). Python standard
library only. Installs nothing: our library is always measured; each peer
whose tools are missing is left out, and the output says how to install it.

Measurements, each process pinned to its own core with taskset (0 and 1):
  latency    fi_pingpong -p shm -e rdm, the same binary on both libraries
             (only LD_LIBRARY_PATH changes); ucx_perftest -t tag_lat with
             UCX_TLS=posix,self. Without fi_pingpong (Debian's libfabric-bin)
             ours is measured with bench/fi_stream -l, a ping-pong of the same
             iteration counts. One-way latency = half a round trip, mean
             over the iterations of a run; the table shows the median of runs.
  streaming  bench/fi_stream (a window of sends in flight, receives pre-posted)
             on both libraries (built against the upstream headers of
             libfabric-dev when they are installed, else against ours, and
             then run on ours only); ucx_perftest -t tag_bw with the same
             window (-O) and message count. GB/s (10^9 bytes) and Mmsg/s;
             median of runs.

  more ranks than cores  bench/mpi_oversub.py: MPI workloads under the MPICH
             wheel with 3 and 4 ranks pinned to two CPUs, on ours and on the
             wheel's own libfabric (needs the wheel in .venv; see that file).
             --no-mpi leaves it out, --mpi-only runs it alone.

  network    bench/net.py: our rudp provider against Debian's tcp;ofi_rxm and
             udp;ofi_rxd and UCX over TCP on loopback; against tcp;ofi_rxm
             between two network namespaces without and with 1% loss; MPI
             (the MPICH wheel) between the namespaces. See that file.
             --no-net leaves it out, --net-only runs it alone,
             --net-parts lo,veth,mpi chooses its parts.

Outputs: a Markdown table on stdout and in bench/results/<date>.md, the same
numbers in bench/results/<date>.csv, and the plot docs/perf-shm.svg; for the
network: bench/results/<date>.net.{md,csv,runs.csv,phase.csv} and docs/perf-net.svg.

When our library cannot run a case, its cell reads "n/a" and the error is
listed under the table; the peers are still measured.

RFABRIC_BENCH_DEBIAN_LIBDIR (default /usr/lib/x86_64-linux-gnu) and
RFABRIC_BENCH_UPSTREAM_INCLUDE (default /usr/include) say where Debian's
library and upstream's headers are; the tools are found through PATH.
"""

import argparse
import csv
import datetime
import math
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import time

import mpi_oversub

DEBIAN_LIBDIR = os.environ.get("RFABRIC_BENCH_DEBIAN_LIBDIR", "/usr/lib/x86_64-linux-gnu")
DEBIAN_LIB = DEBIAN_LIBDIR + "/libfabric.so.1"
UPSTREAM_INCLUDE = os.environ.get("RFABRIC_BENCH_UPSTREAM_INCLUDE", "/usr/include")
# How to get each peer: (what it needs, the command).
PEER_INSTALL = {
    "debian": ("Debian's libfabric1 with fi_pingpong (libfabric-bin); streaming also needs "
               "its headers (libfabric-dev)",
               "sudo apt-get install libfabric1 libfabric-bin libfabric-dev"),
    "ucx": ("ucx_perftest (ucx-utils)", "sudo apt-get install ucx-utils"),
}
SERVER_CORE, CLIENT_CORE = "0", "1"
WINDOW = 64
RUN_TIMEOUT = 60

SERIES = ("ours", "debian", "ucx")
LABELS = {"ours": "ours (rfabric shm)", "debian": "Debian libfabric 1.17 shm",
          "ucx": "UCX 1.13 posix"}
COLORS = {"ours": "#d62728", "debian": "#1f77b4", "ucx": "#2ca02c"}


def all_sizes():
    sizes = [1 << k for k in range(3, 23)]  # 8 B .. 4 MiB
    sizes.append(6 * 1024)
    return sorted(sizes)


def quick_sizes():
    return [8, 6 * 1024, 64 * 1024, 4 << 20]


def human(size):
    if size >= 1 << 20 and size % (1 << 20) == 0:
        return "%d MiB" % (size >> 20)
    if size >= 1 << 10 and size % (1 << 10) == 0:
        return "%d KiB" % (size >> 10)
    return "%d B" % size


# Iteration counts: enough for a stable mean, small enough that the whole
# run stays within a few minutes on a 2-core machine.
def pingpong_iters(size):
    return max(50, min(20000, (128 << 20) // size))


def stream_count(size):
    return max(2 * WINDOW, min(100000, (256 << 20) // size))


# ---------------------------------------------------------------- processes

def tcp_sockets(pid=None):
    """(local port, state) of every TCP socket, IPv4 and IPv6, from
    /proc/net/tcp* (of the network namespace of process `pid` when given);
    state "0A" is LISTEN."""
    base = "/proc/net" if pid is None else "/proc/%d/net" % pid
    for table in (base + "/tcp", base + "/tcp6"):
        try:
            with open(table) as f:
                next(f)
                for line in f:
                    parts = line.split()
                    if len(parts) > 3 and ":" in parts[1]:
                        yield int(parts[1].rsplit(":", 1)[1], 16), parts[3]
        except (OSError, ValueError, StopIteration):
            pass


def ports_in_use():
    """Local TCP ports of every socket in any state (listening, connected,
    TIME_WAIT)."""
    return {port for port, _ in tcp_sockets()}


def ephemeral_low():
    """Lowest port the kernel hands to connecting sockets."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


class Ports:
    """Control ports for the test programs: below the ephemeral range (a
    client's port left in TIME_WAIT cannot be one of ours) and not used by
    any socket at the moment they are handed out."""

    def __init__(self, low=10000, high=None):
        self.low = low
        self.high = max(low + 100, min(high or 60000, ephemeral_low() - 1))
        self.next = random.randint(self.low, self.high)

    def take(self):
        used = ports_in_use()
        for _ in range(self.high - self.low + 1):
            self.next += 1
            if self.next > self.high:
                self.next = self.low
            if self.next not in used:
                return self.next
        return self.next


# A server that could not bind its port (a race with another program):
# the case is run again on another port rather than failing the series.
PORT_RETRIES = 3
# Any other failure: the case is tried once more before that run of it is
# counted as failed (a peer's program fails once in a while, e.g. Debian's
# fi_pingpong with "ctrl/read: no data or remote connection closed").
CASE_TRIES = 2


def port_clash(err):
    return err is not None and ("Address already in use" in err or "ret=-98" in err)


def run_pair_on_port(ports, commands, env, **where):
    """run_pair on a fresh port; `commands(port)` gives (server, client).
    A server that could not bind is tried again on another port, and any
    other failure once more (but not a client that ran out of time: a hang
    costs one timeout, not two). `where`: run_pair's keyword arguments."""
    failures = 0
    for _ in range(PORT_RETRIES + CASE_TRIES):
        port = ports.take()
        server, client = commands(port)
        ok, out, err = run_pair(server, client, env, port, **where)
        if ok:
            break
        if err.startswith("client timed out"):
            break
        if not port_clash(err):
            failures += 1
            if failures >= CASE_TRIES:
                break
    return ok, out, err


def listening(port, pid=None):
    """True once some socket listens on TCP port `port` (IPv4 or IPv6), in
    the network namespace of process `pid` when given."""
    return any(p == port and state == "0A" for p, state in tcp_sockets(pid))


def netns_prefix(ns):
    """The command prefix that runs a program in network namespace `ns`
    (none for None: the caller's namespace)."""
    return ["ip", "netns", "exec", ns] if ns else []


def run_pair(server_cmd, client_cmd, env, port, timeout=RUN_TIMEOUT, server_ns=None, client_ns=None):
    """Start the server on core 0, wait for its port, run the client on
    core 1; each in its network namespace when given (`ip netns exec`
    execs the program, so the server's pid tells where it listens). The
    client is killed after `timeout` seconds, the server 10 s after the
    client is done (at once when the client timed out). Returns (ok,
    client_stdout, error_text)."""
    full_env = dict(os.environ)
    full_env.update(env)
    srv = subprocess.Popen(netns_prefix(server_ns) + ["taskset", "-c", SERVER_CORE] + server_cmd,
                           env=full_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 10
    while not listening(port, srv.pid if server_ns else None):
        if srv.poll() is not None or time.time() > deadline:
            out = srv.communicate()[0] if srv.poll() is not None else ""
            if srv.poll() is None:
                srv.kill()
                out = srv.communicate()[0]
            return False, "", "server did not start: " + last_lines(out)
        time.sleep(0.01)
    timed_out = False
    try:
        cli = subprocess.run(netns_prefix(client_ns) + ["taskset", "-c", CLIENT_CORE] + client_cmd,
                             env=full_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, timeout=timeout)
        cli_out, cli_rc = cli.stdout, cli.returncode
    except subprocess.TimeoutExpired as e:
        out = e.stdout or ""
        cli_out, cli_rc, timed_out = out if isinstance(out, str) else out.decode(errors="replace"), 124, True
    try:
        srv_out = srv.communicate(timeout=1 if timed_out else 10)[0]
    except subprocess.TimeoutExpired:
        srv.kill()
        srv_out = srv.communicate()[0]
    if timed_out:
        detail = last_lines(cli_out) or last_lines(srv_out)
        return False, cli_out, "client timed out after %g s (killed), server %s%s" % (
            timeout, "killed" if srv.returncode in (-9, 137) else "exit %s" % srv.returncode,
            ": " + detail if detail else "")
    if cli_rc != 0 or srv.returncode != 0:
        what = "client exit %d, server exit %s" % (cli_rc, srv.returncode)
        detail = last_lines(cli_out) or last_lines(srv_out)
        return False, cli_out, what + (": " + detail if detail else "")
    return True, cli_out, ""


def last_lines(text, n=2):
    lines = [l.strip() for l in (text or "").splitlines() if l.strip()]
    return " | ".join(lines[-n:])


# ---------------------------------------------------------------- parsers

PP_ROW = re.compile(r"^(\d+[kmg]?)\s+\S+\s+=\S+\s+\S+\s+[\d.]+s\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$")


def pp_size(token):
    """fi_pingpong writes sizes as 8, 6k, 1m (binary multiples)."""
    mult = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}.get(token[-1], 1)
    return int(token.rstrip("kmg")) * mult


def parse_pingpong(out, size):
    """fi_pingpong prints: bytes #sent #ack total time MB/sec usec/xfer
    Mxfers/sec, where usec/xfer is half a round trip. MB/sec (10^6 bytes)
    has more significant digits, so latency = bytes / MB/sec when it can."""
    for line in out.splitlines():
        m = PP_ROW.match(line.strip())
        if m and pp_size(m.group(1)) == size:
            mbps, usec = float(m.group(2)), float(m.group(3))
            if mbps > 0 and abs(size / mbps - usec) <= 0.006 + 0.01 * usec:
                return size / mbps
            return usec
    raise ValueError("no result row for %d bytes in fi_pingpong output" % size)


def parse_ucx(out):
    """ucx_perftest -f -v prints a CSV header and one line of final numbers:
    iterations, p50 latency, avg latency, overall latency (usec, one way for
    tag_lat), avg bw, overall bw (MB/s, 2^20 bytes), avg and overall msg/s."""
    lines = [l.strip() for l in out.splitlines() if l.strip()]
    for i, line in enumerate(lines):
        if line.startswith("iterations,") and i + 1 < len(lines):
            keys = line.split(",")
            vals = lines[i + 1].split(",")
            if len(vals) == len(keys):
                return dict(zip(keys, (float(v) for v in vals)))
    raise ValueError("no CSV result in ucx_perftest output: " + last_lines(out))


STREAM_ROW = re.compile(r"^(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.eE+-]+)\s+([\d.eE+-]+)\s*$")


def parse_stream(out):
    res = {}
    for line in out.splitlines():
        m = STREAM_ROW.match(line.strip())
        if m:
            res[int(m.group(1))] = (float(m.group(4)), float(m.group(5)))
    return res


# ---------------------------------------------------------------- measurements

def pingpong_case(libdir, size, ports):
    """One fi_pingpong run: (one-way usec, None) or (None, error)."""
    base = ["fi_pingpong", "-p", "shm", "-e", "rdm", "-S", str(size),
            "-I", str(pingpong_iters(size))]
    ok, out, err = run_pair_on_port(
        ports, lambda port: (base + ["-B", str(port)], base + ["-P", str(port), "127.0.0.1"]),
        {"LD_LIBRARY_PATH": libdir})
    if not ok:
        return None, "fi_pingpong %s: %s" % (human(size), err)
    try:
        return parse_pingpong(out, size), None
    except ValueError as e:
        return None, str(e)


LAT_ROW = re.compile(r"^(\d+)\s+(\d+)\s+([\d.]+)\s*$")


def parse_stream_latency(out):
    """fi_stream -l prints: bytes, iterations, one-way usec."""
    res = {}
    for line in out.splitlines():
        m = LAT_ROW.match(line.strip())
        if m:
            res[int(m.group(1))] = float(m.group(3))
    return res


def stream_latency_case(binary, libdir, size, ports):
    """Our latency without fi_pingpong: fi_stream -l, the same iteration
    count as pingpong_iters. (one-way usec, None) or (None, error)."""
    base = [binary, "-l", "-p", "shm", "-n", "20000", "-b", str(128 << 20), "-S", str(size), "-P"]
    ok, out, err = run_pair_on_port(
        ports, lambda port: (base + [str(port)], base + [str(port), "127.0.0.1"]),
        {"LD_LIBRARY_PATH": libdir})
    if not ok:
        return None, "fi_stream -l %s: %s" % (human(size), err)
    v = parse_stream_latency(out).get(size)
    if v is None:
        return None, "fi_stream -l: no result for %s" % human(size)
    return v, None


def stream_case(binary, libdir, sizes, ports):
    """One fi_stream run over all sizes: ({size: (GB/s, Mmsg/s)}, None) or
    (None, error)."""
    base = [binary, "-p", "shm", "-w", str(WINDOW), "-n", "100000",
            "-b", str(256 << 20), "-S", ",".join(str(s) for s in sizes), "-P"]
    ok, out, err = run_pair_on_port(
        ports, lambda port: (base + [str(port)], base + [str(port), "127.0.0.1"]),
        {"LD_LIBRARY_PATH": libdir})
    if not ok:
        return None, "fi_stream: " + err
    rows = parse_stream(out)
    for s in sizes:
        if s not in rows:
            return None, "fi_stream: no result for %s" % human(s)
    return rows, None


UCX_ENV = {"UCX_TLS": "posix,self"}


def ucx_case(test, size, ports):
    """One ucx_perftest run: (parsed final numbers, None) or (None, error)."""
    n = pingpong_iters(size) if test == "tag_lat" else stream_count(size)
    args = ["-t", test, "-s", str(size), "-n", str(n), "-w", str(max(10, n // 10)), "-f", "-v"]
    if test == "tag_bw":
        args += ["-O", str(WINDOW)]
    ok, out, err = run_pair_on_port(
        ports, lambda port: (["ucx_perftest", "-p", str(port)],
                             ["ucx_perftest", "127.0.0.1", "-p", str(port)] + args),
        UCX_ENV)
    if not ok:
        return None, "ucx_perftest %s %s: %s" % (test, human(size), err)
    try:
        return parse_ucx(out), None
    except ValueError as e:
        return None, str(e)


# A series whose cases failed this many times (each after CASE_TRIES tries)
# is not run again: its program is broken, not unlucky.
GIVE_UP_AFTER = 3


def measure(sizes, reps, libdirs, binary, log, series=SERIES, binaries=None, ours_latency=None):
    """Runs every case `reps` times. The three series alternate size by size
    and run by run, so a change in the machine's load touches all of them
    alike. Returns lat {series: {size: [usec]}}, stream {series: {size:
    [(GB/s, Mmsg/s)]}} and a list of error lines. A case that fails leaves
    out that run of that case only (its size is reported from the other
    runs); a series with GIVE_UP_AFTER failed cases is not run again.
    `binaries` gives a series its own fi_stream (default `binary`; None: not
    built for it); `ours_latency`, when set, is the fi_stream binary that
    measures our latency instead of fi_pingpong."""
    binaries = binaries or {}
    ports = Ports()
    lat = {k: {s: [] for s in sizes} for k in SERIES}
    stream = {k: {s: [] for s in sizes} for k in SERIES}
    lat_fail = {k: [] for k in SERIES}
    stream_fail = {k: [] for k in SERIES}
    for rep in range(reps):
        log("run %d/%d: latency" % (rep + 1, reps))
        for s in sizes:
            for k in series:
                if len(lat_fail[k]) >= GIVE_UP_AFTER:
                    continue
                if k == "ucx":
                    r, e = ucx_case("tag_lat", s, ports)
                    v = r["overall_lat"] if r else None
                elif k == "ours" and ours_latency:
                    v, e = stream_latency_case(ours_latency, libdirs[k], s, ports)
                else:
                    v, e = pingpong_case(libdirs[k], s, ports)
                if e:
                    lat_fail[k].append(e)
                else:
                    lat[k][s].append(v)
            log(".")
        log(" streaming")
        for k in series:
            if len(stream_fail[k]) >= GIVE_UP_AFTER:
                continue
            if k == "ucx":
                for s in sizes:
                    if len(stream_fail[k]) >= GIVE_UP_AFTER:
                        break
                    r, e = ucx_case("tag_bw", s, ports)
                    if e:
                        stream_fail[k].append(e)
                    else:
                        stream[k][s].append((r["overall_bw"] * (1 << 20) / 1e9, r["overall_mr"] / 1e6))
            elif binaries.get(k, binary) is None:
                stream_fail[k] += ["fi_stream was not built"] * GIVE_UP_AFTER
            else:
                rows, e = stream_case(binaries.get(k, binary), libdirs[k], sizes, ports)
                if e:
                    stream_fail[k].append(e)
                else:
                    for s in sizes:
                        stream[k][s].append(rows[s])
            log(".")
        log("\n")
    errors = []
    for k in SERIES:
        for what, fails in (("latency", lat_fail[k]), ("streaming", stream_fail[k])):
            if fails:
                errors.append("%s %s: %d failed case%s%s; first: %s" % (
                    k, what, len(fails), "" if len(fails) == 1 else "s",
                    " (series given up)" if len(fails) >= GIVE_UP_AFTER else "", fails[0]))
    return lat, stream, errors


def median_or_none(vals):
    return statistics.median(vals) if vals else None


# ---------------------------------------------------------------- reporting

def fmt(v, digits=3):
    """`digits` significant digits, no exponent."""
    if v is None:
        return "n/a"
    if v == 0:
        return "0"
    decimals = max(0, digits - 1 - int(math.floor(math.log10(abs(v)))))
    return "%.*f" % (decimals, v)


def ratio(ours, peers, lower_is_better):
    peers = [p for p in peers if p is not None]
    if ours is None or not peers:
        return None
    best = min(peers) if lower_is_better else max(peers)
    return ours / best if best > 0 else None


def build_rows(sizes, lat, stream):
    rows = []
    for s in sizes:
        r = {"size": s}
        for k in SERIES:
            r["lat_" + k] = median_or_none(lat[k].get(s, []))
            pairs = stream[k].get(s, [])
            r["bw_" + k] = median_or_none([p[0] for p in pairs])
            r["mr_" + k] = median_or_none([p[1] for p in pairs])
        r["lat_ratio"] = ratio(r["lat_ours"], [r["lat_debian"], r["lat_ucx"]], True)
        r["bw_ratio"] = ratio(r["bw_ours"], [r["bw_debian"], r["bw_ucx"]], False)
        r["mr_ratio"] = ratio(r["mr_ours"], [r["mr_debian"], r["mr_ucx"]], False)
        rows.append(r)
    return rows


SHORT = {"ours": "ours", "debian": "Debian", "ucx": "UCX"}


def markdown(rows, errors, meta, series=SERIES, absent=None):
    """The tables, with a column for each of `series` (ours always comes
    first; the ratio columns only when a peer is there). `absent`: {peer:
    (what it needs, how to install)} for the peers left out."""
    series = ["ours"] + [k for k in series if k != "ours"]
    peers = len(series) > 1
    out = []
    out.append("Run %s on %s; %s; command: `%s`" % (meta["date"], meta["cpu"], meta["reps"], meta["command"]))
    out.append("")
    if peers:
        out.append("One-way latency, µs (median of runs; lower is better; ratio = ours ÷ best peer, target ≤ 1.0)")
    else:
        out.append("One-way latency, µs (median of runs; lower is better)")
    out.append("")
    head = ["size"] + [SHORT[k] for k in series] + (["ours÷best"] if peers else [])
    out.append("| " + " | ".join(head) + " |")
    out.append("|" + "---:|" * len(head))
    for r in rows:
        cells = [human(r["size"])] + [fmt(r["lat_" + k]) for k in series]
        if peers:
            cells.append(fmt(r["lat_ratio"], 2))
        out.append("| " + " | ".join(cells) + " |")
    out.append("")
    if peers:
        out.append("Streaming, window %d (median of runs; higher is better; ratio = ours ÷ best peer, "
                   "target ≥ 1.0 from 64 KiB)" % WINDOW)
    else:
        out.append("Streaming, window %d (median of runs; higher is better)" % WINDOW)
    out.append("")
    head = (["size"] + ["%s GB/s" % SHORT[k] for k in series] + (["ours÷best"] if peers else [])
            + ["%s Mmsg/s" % SHORT[k] for k in series] + (["ours÷best"] if peers else []))
    out.append("| " + " | ".join(head) + " |")
    out.append("|" + "---:|" * len(head))
    for r in rows:
        cells = [human(r["size"])] + [fmt(r["bw_" + k]) for k in series]
        if peers:
            cells.append(fmt(r["bw_ratio"], 2))
        cells += [fmt(r["mr_" + k]) for k in series]
        if peers:
            cells.append(fmt(r["mr_ratio"], 2))
        out.append("| " + " | ".join(cells) + " |")
    if absent:
        out.append("")
        out.append("Not measured (not installed here); each adds its columns once installed:")
        out.append("")
        for k in SERIES:
            if k in absent:
                need, how = absent[k]
                out.append("- %s: needs %s: `%s`" % (LABELS[k], need, how))
    if errors:
        out.append("")
        out.append("Failed runs (left out of the medians above):")
        out.append("")
        for e in errors:
            out.append("- " + e)
    return "\n".join(out) + "\n"


CSV_FIELDS = ["size",
              "lat_us_ours", "lat_us_debian", "lat_us_ucx", "lat_ratio",
              "bw_gbs_ours", "bw_gbs_debian", "bw_gbs_ucx", "bw_ratio",
              "mr_mmsgs_ours", "mr_mmsgs_debian", "mr_mmsgs_ucx", "mr_ratio"]


def write_csv(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(CSV_FIELDS)
        for r in rows:
            vals = [r["size"]]
            for m in ("lat", "bw", "mr"):
                for k in SERIES:
                    vals.append(r[m + "_" + k])
                vals.append(r[m + "_ratio"])
            w.writerow(["" if v is None else ("%.6g" % v if isinstance(v, float) else v)
                        for v in vals])


# ---------------------------------------------------------------- SVG

def svg_escape(s):
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def log_ticks(lo, hi):
    ticks = []
    e = math.floor(math.log10(lo))
    while 10 ** e <= hi * 1.0001:
        for m in (1, 2, 5):
            v = m * 10 ** e
            if lo <= v <= hi * 1.0001:
                ticks.append(v)
        e += 1
    return ticks


def tick_label(v):
    if v >= 1:
        return "%g" % v
    return ("%.3f" % v).rstrip("0")


def panel(x0, y0, w, h, title, ylabel, sizes, series, colors=None, dashed=()):
    """One log-log panel; series: {name: [(size, value or None)]}, drawn in
    colors[name] (default COLORS), dashed for the names in `dashed`."""
    colors = colors or COLORS
    parts = []
    vals = [v for pts in series.values() for _, v in pts if v is not None and v > 0]
    pl, pr, pt, pb = 62, 12, 28, 44
    iw, ih = w - pl - pr, h - pt - pb
    parts.append('<text x="%d" y="%d" font-size="14" font-weight="bold">%s</text>'
                 % (x0 + pl, y0 + 18, svg_escape(title)))
    parts.append('<rect x="%d" y="%d" width="%d" height="%d" fill="none" stroke="#444"/>'
                 % (x0 + pl, y0 + pt, iw, ih))
    xs_lo, xs_hi = math.log2(min(sizes)), math.log2(max(sizes))

    def px(s):
        return x0 + pl + (math.log2(s) - xs_lo) / (xs_hi - xs_lo) * iw

    for s in sizes:
        if s & (s - 1) == 0 and int(math.log2(s)) % 2 == 1:
            x = px(s)
            parts.append('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/>'
                         % (x, y0 + pt, x, y0 + pt + ih))
            parts.append('<text x="%.1f" y="%d" font-size="10" text-anchor="middle">%s</text>'
                         % (x, y0 + pt + ih + 14, svg_escape(human(s).replace(" ", ""))))
    parts.append('<text x="%d" y="%d" font-size="11" text-anchor="middle">message size</text>'
                 % (x0 + pl + iw // 2, y0 + pt + ih + 32))
    parts.append('<text x="%d" y="%d" font-size="11" text-anchor="middle" '
                 'transform="rotate(-90 %d %d)">%s</text>'
                 % (x0 + 14, y0 + pt + ih // 2, x0 + 14, y0 + pt + ih // 2, svg_escape(ylabel)))
    if not vals:
        parts.append('<text x="%d" y="%d" font-size="12" text-anchor="middle">no data</text>'
                     % (x0 + pl + iw // 2, y0 + pt + ih // 2))
        return parts
    lo, hi = min(vals), max(vals)
    lo = 10 ** math.floor(math.log10(lo))
    hi = 10 ** math.ceil(math.log10(hi))
    ly_lo, ly_hi = math.log10(lo), math.log10(hi)

    def py(v):
        return y0 + pt + ih - (math.log10(v) - ly_lo) / (ly_hi - ly_lo) * ih

    for t in log_ticks(lo, hi):
        y = py(t)
        parts.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#eee"/>'
                     % (x0 + pl, y, x0 + pl + iw, y))
        parts.append('<text x="%d" y="%.1f" font-size="10" text-anchor="end">%s</text>'
                     % (x0 + pl - 4, y + 3, tick_label(t)))
    for k, pts in series.items():
        good = [(s, v) for s, v in pts if v is not None and v > 0]
        if not good:
            continue
        path = " ".join("%s%.1f,%.1f" % ("M" if i == 0 else "L", px(s), py(v))
                        for i, (s, v) in enumerate(good))
        parts.append('<path d="%s" fill="none" stroke="%s" stroke-width="2"%s/>'
                     % (path, colors[k], ' stroke-dasharray="6,3"' if k in dashed else ""))
        for s, v in good:
            parts.append('<circle cx="%.1f" cy="%.1f" r="2.5" fill="%s"/>' % (px(s), py(v), colors[k]))
    return parts


def write_svg(path, rows, note):
    sizes = [r["size"] for r in rows]
    w, h = 980, 420
    parts = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" '
             'font-family="sans-serif" viewBox="0 0 %d %d">' % (w, h, w, h),
             '<rect width="100%" height="100%" fill="white"/>']
    lat = {k: [(r["size"], r["lat_" + k]) for r in rows] for k in SERIES}
    bw = {k: [(r["size"], r["bw_" + k]) for r in rows] for k in SERIES}
    parts += panel(0, 0, w // 2, h - 50, "One-way latency (lower is better)", "µs", sizes, lat)
    parts += panel(w // 2, 0, w // 2, h - 50, "Streaming bandwidth, window %d (higher is better)"
                   % WINDOW, "GB/s", sizes, bw)
    x = 70
    for k in SERIES:
        missing = all(r["lat_" + k] is None and r["bw_" + k] is None for r in rows)
        label = LABELS[k] + (" (not measured)" if missing else "")
        parts.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="3"/>'
                     % (x, h - 30, x + 24, h - 30, COLORS[k]))
        parts.append('<text x="%d" y="%d" font-size="12">%s</text>' % (x + 30, h - 26, svg_escape(label)))
        x += 290
    parts.append('<text x="70" y="%d" font-size="10" fill="#555">%s</text>' % (h - 8, svg_escape(note)))
    parts.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(parts) + "\n")


# ---------------------------------------------------------------- main

def cpu_summary():
    try:
        out = subprocess.run(["lscpu"], stdout=subprocess.PIPE, text=True).stdout
    except OSError:
        return "unknown CPU"
    info = {}
    for line in out.splitlines():
        if ":" in line:
            k, v = line.split(":", 1)
            info[k.strip()] = v.strip()
    return "%s, %s CPUs%s" % (info.get("Model name", "?"), info.get("CPU(s)", "?"),
                              ", " + info["Hypervisor vendor"] + " guest" if "Hypervisor vendor" in info else "")


def git_rev(repo):
    try:
        r = subprocess.run(["git", "-C", repo, "describe", "--always", "--dirty"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        return r.stdout.strip() or "unknown commit"
    except OSError:
        return "unknown commit"


def check_tools():
    """What is missing: (for our own series, {peer: (what it needs, how to
    install)} for each peer that cannot run)."""
    missing = []
    if not shutil.which("taskset"):
        missing.append("util-linux (taskset)")
    if not shutil.which("cc"):
        missing.append("a C compiler (cc)")
    absent = {}
    if not shutil.which("fi_pingpong") or not os.path.exists(DEBIAN_LIB):
        absent["debian"] = PEER_INSTALL["debian"]
    if not shutil.which("ucx_perftest"):
        absent["ucx"] = PEER_INSTALL["ucx"]
    return missing, absent


def upstream_headers():
    return os.path.exists(os.path.join(UPSTREAM_INCLUDE, "rdma", "fabric.h"))


def build_stream(repo, outdir, ours_libdir=None):
    """bench/fi_stream built against upstream's headers and Debian's library
    (it then runs on both libraries), or, with `ours_libdir`, against our
    headers and library (it runs on ours only)."""
    src = os.path.join(repo, "bench", "fi_stream.c")
    if ours_libdir:
        binary = os.path.join(outdir, "fi_stream-ours")
        flags = ["-I" + os.path.join(repo, "include"), "-L" + ours_libdir]
    else:
        binary = os.path.join(outdir, "fi_stream")
        flags = ["-I" + UPSTREAM_INCLUDE, "-L" + DEBIAN_LIBDIR]
    return build_c(src, binary, flags + ["-l:libfabric.so.1"])


def build_c(src, binary, flags):
    """`binary` built from the C file `src` (unless it is newer already):
    (binary, None), or (None, why)."""
    if os.path.exists(binary) and os.path.getmtime(binary) >= os.path.getmtime(src):
        return binary, None
    os.makedirs(os.path.dirname(binary), exist_ok=True)
    cmd = ["cc", "-O2", "-Wall", "-o", binary, src] + flags
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        return None, "building %s failed: %s" % (os.path.basename(src), last_lines(r.stdout, 4))
    return binary, None


def oversub_section(repo, ours_lib, ours_err, reps, args, log):
    """The Markdown of bench/mpi_oversub.py's runs, or a line saying why
    they were left out; None with --no-mpi."""
    if args.no_mpi:
        return None
    why = ours_err or mpi_oversub.missing(repo)
    if why:
        return "More ranks than cores: not measured: needs %s\n" % why
    try:
        ranks = [3] if args.quick else [3, 4]
        results, errs = mpi_oversub.measure(repo, ours_lib, ranks, reps, 1, log)
    except RuntimeError as e:
        return "More ranks than cores: not measured: %s\n" % e
    return mpi_oversub.markdown(results, errs, reps, 1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5, help="runs per case; the median is reported (5)")
    ap.add_argument("--quick", action="store_true", help="4 sizes, 1 run: a smoke test of the script")
    ap.add_argument("--sizes", help="comma-separated sizes in bytes instead of the default list")
    ap.add_argument("--ours-libdir", default="build/lib", help="directory of our libfabric.so.1")
    ap.add_argument("--ours-error", help="do not run ours; show this reason instead")
    ap.add_argument("--no-write", action="store_true", help="print only; write no result files or plot")
    ap.add_argument("--no-mpi", action="store_true", help="leave out the MPI runs with more ranks than cores")
    ap.add_argument("--mpi-only", action="store_true", help="only the MPI runs with more ranks than cores")
    ap.add_argument("--net-only", action="store_true",
                    help="only the network tables (rudp against tcp;ofi_rxm, udp;ofi_rxd, UCX tcp)")
    ap.add_argument("--no-net", action="store_true", help="leave out the network tables")
    ap.add_argument("--net-reps", type=int, default=5, help="runs per network case; the median is reported (5)")
    ap.add_argument("--net-parts", default="lo,veth,mpi",
                    help="which network parts: lo (loopback), veth (namespaces, no loss and 1%% loss), "
                    "mpi (MPICH between the namespaces); comma-separated (lo,veth,mpi)")
    args = ap.parse_args()

    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    os.chdir(repo)
    missing, absent = check_tools()
    if missing:
        print("missing: " + ", ".join(missing), file=sys.stderr)
        print("install with: sudo apt-get install util-linux gcc", file=sys.stderr)
        return 1
    for k in SERIES:
        if k in absent:
            print("%s: not measured: needs %s (%s)" % (LABELS[k], absent[k][0], absent[k][1]),
                  file=sys.stderr)
    if args.reps < 1:
        print("--reps must be at least 1", file=sys.stderr)
        return 1
    import net
    sizes = quick_sizes() if args.quick else all_sizes()
    net_sizes = net.quick_sizes() if args.quick else net.all_sizes()
    if args.sizes:
        try:
            sizes = sorted({int(x) for x in args.sizes.split(",")})
        except ValueError:
            print("bad --sizes %r" % args.sizes, file=sys.stderr)
            return 1
        if not sizes or sizes[0] < 1:
            print("sizes must be positive", file=sys.stderr)
            return 1
        net_sizes = sizes
    net_parts = [p for p in args.net_parts.split(",") if p]
    if any(p not in ("lo", "veth", "mpi") for p in net_parts):
        print("bad --net-parts %r (lo, veth, mpi)" % args.net_parts, file=sys.stderr)
        return 1
    reps = 1 if args.quick else args.reps
    net_reps = 1 if args.quick else args.net_reps
    if net_reps < 1:
        print("--net-reps must be at least 1", file=sys.stderr)
        return 1

    def log(s):
        sys.stderr.write(s)
        sys.stderr.flush()

    errors = []
    ours_lib = os.path.abspath(args.ours_libdir)
    ours_err = args.ours_error
    if not ours_err and not os.path.exists(os.path.join(ours_lib, "libfabric.so.1")):
        ours_err = "no %s/libfabric.so.1 (run make build)" % args.ours_libdir
    if args.net_only:
        return net_section(repo, ours_lib, ours_err, net_sizes, net_reps, net_parts, args, log)
    if args.mpi_only:
        text = oversub_section(repo, ours_lib, ours_err, reps, args, log) or ""
        text = "Run %s on %s; ours at %s; command: `%s`\n\n%s" % (
            datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), cpu_summary(), git_rev(repo),
            " ".join(["python3", "bench/bench.py"] + sys.argv[1:]), text)
        sys.stdout.write(text)
        if not args.no_write:
            os.makedirs(os.path.join("bench", "results"), exist_ok=True)
            path = os.path.join("bench", "results", datetime.datetime.now().strftime("%Y-%m-%d") + ".mpi.md")
            with open(path, "w") as f:
                f.write("# More MPI ranks than cores\n\n" + text)
            print("\nwrote " + path)
        return 0
    outdir = os.path.join(repo, "build", "bench")
    binaries = {}
    if upstream_headers() and "debian" not in absent:
        binary, err = build_stream(repo, outdir)
    else:
        # Without upstream's headers (or Debian's library) fi_stream is built
        # on ours and runs on ours only.
        binary, err = build_stream(repo, outdir, ours_lib)
        binaries["debian"] = None
    ours_latency = None
    if not shutil.which("fi_pingpong"):
        ours_latency, lerr = build_stream(repo, outdir, ours_lib)
        err = err or lerr

    t0 = time.time()
    libdirs = {"ours": ours_lib, "debian": DEBIAN_LIBDIR}
    shown = [k for k in SERIES if k not in absent]
    run_series = list(shown)
    if ours_err:
        errors.append("ours: " + ours_err)
        run_series.remove("ours")
    if err:
        errors.append("streaming: " + err)
    lat, stream, errs = measure(sizes, reps, libdirs, binary, log, run_series, binaries, ours_latency)
    errors += errs

    date = datetime.datetime.now().strftime("%Y-%m-%d")
    meta = {"date": date, "cpu": cpu_summary() + "; ours at " + git_rev(repo),
            "reps": "%d run%s per case, %.0f s in all" % (reps, "s" if reps > 1 else "", time.time() - t0),
            "command": " ".join(["python3", "bench/bench.py"] + sys.argv[1:])}
    if ours_latency:
        meta["reps"] += "; ours' latency by bench/fi_stream -l (no fi_pingpong here)"
    rows = build_rows(sizes, lat, stream)
    text = markdown(rows, errors, meta, shown, absent)
    mpi_text = oversub_section(repo, ours_lib, ours_err, reps, args, log)
    if mpi_text:
        text += "\n" + mpi_text
    sys.stdout.write(text)
    if not args.no_write:
        os.makedirs(os.path.join("bench", "results"), exist_ok=True)
        os.makedirs("docs", exist_ok=True)
        base = os.path.join("bench", "results", date)
        with open(base + ".md", "w") as f:
            f.write("# shm benchmark, %s\n\n" % date)
            f.write(text)
        write_csv(base + ".csv", rows)
        write_svg(os.path.join("docs", "perf-shm.svg"), rows,
                  "%s; %s; %s" % (date, meta["cpu"], meta["reps"]))
        print("\nwrote %s.md, %s.csv, docs/perf-shm.svg" % (base, base))
    if not args.no_net:
        print()
        return net_section(repo, ours_lib, ours_err, net_sizes, net_reps, net_parts, args, log)
    return 0


def net_section(repo, ours_lib, ours_err, sizes, reps, parts, args, log):
    """The network tables (bench/net.py): printed, and written to
    bench/results/<date>.net.{md,csv,runs.csv,phase.csv} and docs/perf-net.svg."""
    import net
    t0 = time.time()
    date = datetime.datetime.now().strftime("%Y-%m-%d")
    head = "Run %s on %s; ours at %s (%s); command: `%s`; %s at the start\n\n" % (
        datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), cpu_summary(), git_rev(repo), ours_lib,
        " ".join(["python3", "bench/bench.py"] + sys.argv[1:]), net.uptime())
    body, sections, (lo, veth) = net.run(repo, ours_lib, ours_err, sizes, reps, parts, log, args.quick)
    text = head + body + "\nAll network parts: %.0f s.\n" % (time.time() - t0)
    sys.stdout.write(text)
    if not args.no_write:
        os.makedirs(os.path.join("bench", "results"), exist_ok=True)
        base = os.path.join("bench", "results", date + ".net")
        with open(base + ".md", "w") as f:
            f.write("# Network benchmark, %s\n\n" % date + text)
        net.write_csv(base + ".csv", sections)
        net.write_runs_csv(base + ".runs.csv", sections)
        net.write_phase_csv(base + ".phase.csv", sections)
        wrote = "%s.md, %s.csv, %s.runs.csv, %s.phase.csv" % (base, base, base, base)
        if lo or veth:
            os.makedirs("docs", exist_ok=True)
            net.write_svg(os.path.join("docs", "perf-net.svg"), lo, veth,
                          "%s; %s; %d run%s per case, medians" % (date, cpu_summary(), reps, "s" if reps > 1 else ""))
            wrote += ", docs/perf-net.svg"
        print("\nwrote " + wrote)
    return 0


if __name__ == "__main__":
    sys.exit(main())
