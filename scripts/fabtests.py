#!/usr/bin/env python3
"""Run a fabtests build on one libfabric library, one test at a time.

fabtests is the test suite of upstream libfabric. This project does not ship
it: build it yourself (docs/TESTING.md says how) and point this script at the
prefix you installed it into. The test lists are read from that build's own
runfabtests.sh, so the sets are exactly the ones upstream runs.

Every test runs as upstream's runner runs it (a unit test alone; otherwise a
server, then a client that names it), with the library chosen through
LD_LIBRARY_PATH. Each process gets a session of its own and, when its time is
up, only that session is killed: no other process on the machine is touched.

  scripts/fabtests.py run --fabtests PREFIX --lib LIBDIR [--sets unit,functional,short,standard]
                          [--prov shm] [--timeout 120] [--only REGEX] --out RESULTS.tsv
  scripts/fabtests.py table NAME=RESULTS.tsv ... [--notes NOTES.tsv]   (Markdown table on stdout)

A results file has one line per test: set, test command, result (pass, fail,
notrun, timeout), seconds, and the last line either process printed.
Notes files: test command, tab, note.
"""

import argparse
import errno
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time

SETS = ("unit", "functional", "short", "standard")
NEGATIVE = "neg_unit"
HOST = "127.0.0.1"


def read_lists(runfabtests):
    """Arrays named <set>_tests in runfabtests.sh, as lists of strings."""
    text = open(runfabtests, encoding="utf-8").read()
    lists = {}
    for m in re.finditer(r"^(\w+)_tests=\((.*?)^\)", text, re.S | re.M):
        lists[m.group(1)] = re.findall(r'^\s*"([^"]+)"', m.group(2), re.M)
    return lists


def start(cmd, env, out):
    return subprocess.Popen(shlex.split(cmd), env=env, stdout=out, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True)


def stop(proc):
    """Kill the session this runner started for proc, and reap proc."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait()


def wait(proc, deadline):
    try:
        return proc.wait(timeout=max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        stop(proc)
        return None


def last_line(path):
    with open(path, "rb") as f:
        lines = [l.strip() for l in f.read().decode(errors="replace").splitlines() if l.strip()]
    return lines[-1][:200] if lines else ""


def verdict(codes, negative=False):
    """Upstream runner's reading of exit codes (non-strict mode)."""
    if any(c is None for c in codes):
        return "timeout"
    if negative:
        return "pass" if codes[0] == errno.ENODATA else "fail"
    for skip in (errno.ENODATA, errno.ENOSYS):
        if all(c == skip for c in codes):
            return "notrun"
    return "pass" if all(c == 0 for c in codes) else "fail"


def run_unit(bindir, test, prov, env, timeout, log, negative):
    cmd = test.replace("GOOD_ADDR", HOST).replace("SERVER_ADDR", HOST)
    cmd = f"{bindir}/{cmd} -p {shlex.quote(prov)}"
    with open(log, "wb") as out:
        proc = start(cmd, env, out)
        code = wait(proc, time.monotonic() + timeout)
    return verdict([code], negative), last_line(log)


def run_pair(bindir, test, prov, env, timeout, log):
    cmd = f"{bindir}/{test} -p {shlex.quote(prov)}"
    deadline = time.monotonic() + timeout
    slog, clog = log + ".server", log + ".client"
    with open(slog, "wb") as sout, open(clog, "wb") as cout:
        server = start(f"{cmd} -s {HOST}", env, sout)
        time.sleep(1)
        client = start(f"{cmd} -s {HOST} {HOST}", env, cout)
        c = wait(client, deadline)
        if c is not None and c != 0:
            # As upstream's runner: a failed client leaves the server 2 s,
            # then the server is killed and the pair has failed.
            s = wait(server, min(deadline, time.monotonic() + 2))
            s = -signal.SIGKILL if s is None else s
        else:
            s = wait(server, deadline)
    note = last_line(clog) or last_line(slog)
    if c != 0 or s != 0:
        note = f"server {s}, client {c}: " + (last_line(clog) if c != 0 else last_line(slog))
    return verdict([s, c]), note


def cmd_run(args):
    bindir = os.path.join(args.fabtests, "bin")
    lists = read_lists(os.path.join(bindir, "runfabtests.sh"))
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = args.lib + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    env["PATH"] = bindir + ":" + env.get("PATH", "")
    only = re.compile(args.only) if args.only else None
    logdir = tempfile.mkdtemp(prefix="fabtests.")
    counts = {}
    with open(args.out, "w", encoding="utf-8") as out:
        for name in args.sets.split(","):
            tests = [(name, t, False) for t in lists.get(name, [])]
            if name == "unit":
                tests += [(NEGATIVE, t, True) for t in lists.get(NEGATIVE, [])]
            if not tests:
                sys.exit(f"no {name}_tests in {bindir}/runfabtests.sh")
            for i, (set_name, test, negative) in enumerate(tests):
                if only and not only.search(test):
                    continue
                log = os.path.join(logdir, f"{set_name}.{i}")
                t0 = time.monotonic()
                if name == "unit":
                    result, note = run_unit(bindir, test, args.prov, env, args.timeout, log, negative)
                else:
                    result, note = run_pair(bindir, test, args.prov, env, args.timeout, log)
                secs = time.monotonic() - t0
                counts[result] = counts.get(result, 0) + 1
                note = note.replace("\t", " ")
                out.write(f"{set_name}\t{test}\t{result}\t{secs:.1f}\t{note}\n")
                out.flush()
                print(f"{result:8} {secs:6.1f}s  {set_name:10} {test}", flush=True)
    print(f"logs in {logdir}")
    print(", ".join(f"{n} {r}" for r, n in sorted(counts.items())))


def load(path):
    rows = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) >= 3:
                rows[(parts[0], parts[1])] = parts[2]
    return rows


def cmd_table(args):
    named = []
    for spec in args.results:
        name, _, path = spec.partition("=")
        named.append((name, load(path)))
    notes = {}
    if args.notes:
        with open(args.notes, encoding="utf-8") as f:
            for line in f:
                if line.strip() and not line.startswith("#"):
                    test, _, note = line.rstrip("\n").partition("\t")
                    notes[test] = note
    keys = []
    for _, rows in named:
        keys += [k for k in rows if k not in keys]
    print("| set | test | " + " | ".join(n for n, _ in named) + " | note |")
    print("| --- | --- | " + " | ".join("---" for _ in named) + " | --- |")
    regress = 0
    for key in keys:
        results = [rows.get(key, "-") for _, rows in named]
        print(f"| {key[0]} | `{key[1]}` | " + " | ".join(results) + f" | {notes.get(key[1], '')} |")
    for i in range(0, len(named) - 1, 2):
        for key in keys:
            if named[i][1].get(key) == "pass" and named[i + 1][1].get(key) != "pass":
                regress += 1
                print(f"<!-- passes on {named[i][0]}, not on {named[i + 1][0]}: {key[1]} -->")
    print(f"\n{regress} tests pass on the first library of a pair and not on the second")
    return 1 if regress else 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--fabtests", required=True, help="prefix a fabtests build was installed into")
    r.add_argument("--lib", required=True, help="directory holding the libfabric.so.1 to test")
    r.add_argument("--sets", default=",".join(SETS))
    r.add_argument("--prov", default="shm")
    r.add_argument("--timeout", type=float, default=120.0, help="seconds per test")
    r.add_argument("--only", help="run only tests matching this regular expression")
    r.add_argument("--out", required=True)
    t = sub.add_parser("table")
    t.add_argument("results", nargs="+", help="NAME=RESULTS.tsv; pairs (reference, ours) are compared")
    t.add_argument("--notes")
    args = p.parse_args()
    if args.cmd == "run":
        cmd_run(args)
        return 0
    return cmd_table(args)


if __name__ == "__main__":
    sys.exit(main())
