#!/usr/bin/env python3
"""Instructions per message of a ping-pong's server, counted by callgrind.

    python3 bench/instr.py [--ours-libdir build/lib] [--sizes 8,2048] [--peers]

Latency on a shared 2-core guest moves with the machine's phases (see
docs/PERFORMANCE.md); the user-space instructions a library spends per
message do not. This counts them for the server side of a loopback
ping-pong: Debian's fi_pingpong over our tcp provider, and with --peers
the same program over Debian's tcp;ofi_rxm and ucx_perftest's tag_lat over
UCX tcp. The server runs under `valgrind --tool=callgrind` twice, with
SHORT and LONG round trips, and the difference divided by LONG - SHORT
leaves out start-up and tear-down. Columns: the whole process, and the
part in the library (libfabric.so and what it loads, UCX's libraries),
that is all but the C library (copies, system call stubs), the loader
and the program.

Needs valgrind (apt-get install valgrind); runs in a private network
namespace when it may make one (root), else on the host's loopback.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402

SHORT, LONG = 2000, 12000
LINE = re.compile(r"^\s*([0-9,]+)\s+(\S.*)$")
# Objects that are not the library: the C library, the loader, the
# program itself and valgrind's preload. Lines without an object are
# code inlined into the library from Rust's standard library.
NOT_LIBRARY = re.compile(r"\[(/\S*/(libc|ld-linux[^/]*|libgcc_s|libm)\.so[^/\]]*|/usr/bin/[^\]]+|/usr/libexec/valgrind/[^\]]+)\]\s*$")


def counts(out):
    """(whole process, in the library) from a callgrind file."""
    ann = subprocess.run(["callgrind_annotate", "--auto=no", "--threshold=100", out], capture_output=True, text=True, check=True).stdout
    return split_counts(ann)


def split_counts(ann):
    """(whole process, in the library) from callgrind_annotate's function list."""
    total = own = 0
    for line in ann.splitlines():
        m = LINE.match(line)
        if not m:
            continue
        n = int(m.group(1).replace(",", ""))
        if "PROGRAM TOTALS" in line:
            total = n
        elif not NOT_LIBRARY.search(line):
            own += n
    return total, own


def count_run(kind, size, iters, libdir, workdir, ports):
    """One ping-pong of `iters` round trips with its server under callgrind
    (bench.run_pair: server on core 0, client on core 1); its counts."""
    port = ports.take()
    out = os.path.join(workdir, "cg.%s.%d.%d" % (kind, size, iters))
    vg = ["valgrind", "--tool=callgrind", "--dump-instr=no", "--callgrind-out-file=" + out]
    if kind == "ucx":
        env = {"UCX_TLS": "tcp,self", "UCX_NET_DEVICES": "lo"}
        srv = ["ucx_perftest", "-p", str(port)]
        cli = ["ucx_perftest", "127.0.0.1", "-p", str(port), "-t", "tag_lat", "-s", str(size), "-n", str(iters), "-w", "0"]
    else:
        prov = "tcp" if kind == "ours" else "tcp;ofi_rxm"
        env = {"LD_LIBRARY_PATH": libdir, "FI_TCP_IFACE": "lo"}
        base = ["fi_pingpong", "-p", prov, "-e", "rdm", "-S", str(size), "-I", str(iters)]
        srv = base + ["-B", str(port)]
        cli = base + ["-P", str(port), "127.0.0.1"]
    ok, _, err = bench.run_pair(vg + srv, cli, env, port, timeout=600)
    if not ok or not os.path.exists(out):
        raise RuntimeError("%s %d B, %d round trips: %s" % (kind, size, iters, err or "no callgrind output"))
    return counts(out)


def per_message(kind, size, libdir, workdir, tries, ports):
    """The fewest instructions per message over `tries` pairs of runs. The
    client runs at full speed and the server under valgrind, so most
    rounds find a message waiting; the rounds that find none (polls that
    come up empty) vary in number from run to run and only add."""
    best = None
    for _ in range(tries):
        t1, o1 = count_run(kind, size, SHORT, libdir, workdir, ports)
        t2, o2 = count_run(kind, size, LONG, libdir, workdir, ports)
        n = LONG - SHORT
        got = ((t2 - t1) / n, (o2 - o1) / n)
        if best is None or got[0] < best[0]:
            best = got
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ours-libdir", default="build/lib")
    ap.add_argument("--sizes", default="8,2048")
    ap.add_argument("--peers", action="store_true", help="also Debian's tcp;ofi_rxm and UCX tcp")
    ap.add_argument("--tries", type=int, default=3, help="pairs of runs per case; the fewest counts")
    ap.add_argument("--in-netns", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    for tool in ("valgrind", "callgrind_annotate", "fi_pingpong"):
        if not shutil.which(tool):
            sys.exit("instr.py: needs %s (apt-get install valgrind libfabric-bin)" % tool)
    if not a.in_netns and os.geteuid() == 0 and shutil.which("unshare"):
        # A private loopback: nothing else's traffic, no port clashes.
        cmd = ["unshare", "--net", "sh", "-c", 'ip link set lo up && exec "$@"', "sh", sys.executable, os.path.abspath(__file__), "--in-netns"] + sys.argv[1:]
        sys.exit(subprocess.call(cmd))
    if not os.path.exists(os.path.join(a.ours_libdir, "libfabric.so.1")):
        # fi_pingpong would load the system's libfabric instead, and count it.
        sys.exit("instr.py: no libfabric.so.1 in %s (make build)" % a.ours_libdir)
    kinds = ["ours"] + (["rxm"] + (["ucx"] if shutil.which("ucx_perftest") else []) if a.peers else [])
    libdirs = {"ours": os.path.abspath(a.ours_libdir), "rxm": "/usr/lib/x86_64-linux-gnu", "ucx": ""}
    names = {"ours": "ours tcp", "rxm": "Debian tcp;ofi_rxm", "ucx": "UCX tcp"}
    print("Server instructions per message received and answered (callgrind, %d - %d round trips, fewest of %d)" % (LONG, SHORT, a.tries))
    print("| size | library | whole process | in the library |")
    print("|---:|---|---:|---:|")
    ports = bench.Ports()
    with tempfile.TemporaryDirectory(prefix="rf-instr.") as wd:
        for size in [int(x) for x in a.sizes.split(",")]:
            for k in kinds:
                total, own = per_message(k, size, libdirs[k], wd, a.tries, ports)
                print("| %d B | %s | %.0f | %.0f |" % (size, names[k], total, own), flush=True)


if __name__ == "__main__":
    main()
