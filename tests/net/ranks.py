#!/usr/bin/env python3
"""Watch the MPI ranks of a launcher: where they run, which libfabric they map.

  ranks.py --root PID --exe PROGRAM [--out FILE]

While process PID (mpiexec/mpirun, or a `timeout` above it) lives, every
descendant whose executable is PROGRAM is looked at about 20 times a second:
its network namespace (the name under /run/netns, by inode) and the
libfabric files in /proc/PID/maps (libfabric.so* and *-fi.so DL
providers). Ranks started on the other host are descendants too: the launch
agent (tests/net/nsexec) runs them under the launcher's process tree.
At the end one line per rank seen:
  pid=1234 ns=rfa libs=/path/libfabric.so.1,...
(libs=- when the process was gone before its libraries were seen).
"""
import argparse
import os
import sys
import time


def netns_names():
    names = {}
    for d in ("/run/netns", "/var/run/netns"):
        try:
            for n in os.listdir(d):
                try:
                    names[os.stat(os.path.join(d, n)).st_ino] = n
                except OSError:
                    pass
        except OSError:
            pass
    return names


def children_map():
    kids = {}
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open(f"/proc/{p}/stat") as f:
                st = f.read()
        except OSError:
            continue
        # the command may hold spaces and parentheses: ppid follows the last ')'
        ppid = int(st[st.rindex(")") + 2:].split()[1])
        kids.setdefault(ppid, []).append(int(p))
    return kids


def descendants(root, kids):
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        for c in kids.get(p, ()):
            out.append(c)
            todo.append(c)
    return out


def fabric_libs(pid):
    libs = set()
    try:
        with open(f"/proc/{pid}/maps") as f:
            for line in f:
                parts = line.split(None, 5)
                if len(parts) == 6:
                    path = parts[5].strip()
                    base = os.path.basename(path)
                    if base.startswith("libfabric.so") or base.endswith("-fi.so"):
                        libs.add(path)
    except OSError:
        pass
    return libs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", type=int, required=True)
    ap.add_argument("--exe", required=True)
    ap.add_argument("--out", default="-")
    a = ap.parse_args()
    exe = os.path.realpath(a.exe)
    names = netns_names()
    seen = {}  # pid -> [ns, libs]
    while os.path.exists(f"/proc/{a.root}"):
        kids = children_map()
        for pid in descendants(a.root, kids):
            try:
                if os.path.realpath(f"/proc/{pid}/exe") != exe:
                    continue
                ino = os.stat(f"/proc/{pid}/ns/net").st_ino
            except OSError:
                continue
            rec = seen.setdefault(pid, [names.get(ino, f"net:[{ino}]"), set()])
            rec[1] |= fabric_libs(pid)
        time.sleep(0.05)
    lines = [f"pid={pid} ns={ns} libs={','.join(sorted(libs)) or '-'}" for pid, (ns, libs) in sorted(seen.items())]
    text = "\n".join(lines) + ("\n" if lines else "")
    if a.out == "-":
        sys.stdout.write(text)
    else:
        with open(a.out, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
