#!/usr/bin/env python3
"""Transparent UDP relay that reorders, duplicates and drops datagrams.

Runs in the router namespace made by `netns.sh up --relay SPEC`. nftables
TPROXY there hands every UDP datagram between the two hosts' subnets to
this process (IPv4 and IPv6 listeners with IP_TRANSPARENT; the original
destination comes from IP_ORIGDSTADDR / IPV6_ORIGDSTADDR). Each datagram
is sent on to its original destination from a transparent socket bound to
its original source address and port, so neither end sees the relay: the
addresses the applications exchange in-band stay valid.

SPEC (comma-separated key=value, all optional):
  reorder=P  percent of datagrams held back for a random time in (0, delay]
             while the ones after them go on at once
  dup=P      percent of datagrams sent twice (the copy after a random time
             in [0, delay])
  drop=P     percent of datagrams dropped
  delay=MS   the window in milliseconds (default 5)
  seed=N     random seed (default: from the clock; the log prints it)
`none` or an empty SPEC relays everything unchanged.

Counters (rx, tx, dropped, reordered, duplicated, errors, and the highest
number of datagrams held at once) are written to --stats once a second and
at exit, as one line of key=value.
"""
import argparse
import heapq
import os
import random
import selectors
import signal
import socket
import struct
import sys
import time

SOL_IP = 0
SOL_IPV6 = 41
IP_TRANSPARENT = 19
IP_RECVORIGDSTADDR = 20  # also the cmsg type IP_ORIGDSTADDR
IPV6_TRANSPARENT = 75
IPV6_RECVORIGDSTADDR = 74
SO_RCVBUFFORCE = 33
SO_SNDBUFFORCE = 32
MAX_SENDERS = 4096
BUF = 4 << 20


def parse_spec(text):
    spec = {"reorder": 0.0, "dup": 0.0, "drop": 0.0, "delay": 5.0, "seed": None}
    text = (text or "").strip()
    if text in ("", "none"):
        return spec
    for item in text.split(","):
        if "=" not in item:
            raise ValueError(f"'{item}' is not key=value")
        key, val = (s.strip() for s in item.split("=", 1))
        if key not in spec:
            raise ValueError(f"unknown key '{key}' (reorder, dup, drop, delay, seed)")
        if key == "seed":
            spec[key] = int(val)
            continue
        num = float(val)
        if key in ("reorder", "dup", "drop") and not 0 <= num <= 100:
            raise ValueError(f"{key}={val}: a percentage 0..100")
        if key == "delay" and not 0 < num <= 10000:
            raise ValueError(f"delay={val}: milliseconds, 0 < delay <= 10000")
        spec[key] = num
    return spec


def force_buf(sock):
    for opt, fallback in ((SO_RCVBUFFORCE, socket.SO_RCVBUF), (SO_SNDBUFFORCE, socket.SO_SNDBUF)):
        try:
            sock.setsockopt(socket.SOL_SOCKET, opt, BUF)
        except OSError:
            sock.setsockopt(socket.SOL_SOCKET, fallback, BUF)


def listener(family, port):
    s = socket.socket(family, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if family == socket.AF_INET:
        s.setsockopt(SOL_IP, IP_TRANSPARENT, 1)
        s.setsockopt(SOL_IP, IP_RECVORIGDSTADDR, 1)
        s.bind(("0.0.0.0", port))
    else:
        s.setsockopt(SOL_IPV6, socket.IPV6_V6ONLY, 1)
        s.setsockopt(SOL_IPV6, IPV6_TRANSPARENT, 1)
        s.setsockopt(SOL_IPV6, IPV6_RECVORIGDSTADDR, 1)
        s.bind(("::", port))
    force_buf(s)
    s.setblocking(False)
    return s


def orig_dst(family, ancdata):
    for level, typ, data in ancdata:
        if family == socket.AF_INET and level == SOL_IP and typ == IP_RECVORIGDSTADDR:
            port = struct.unpack_from("!H", data, 2)[0]
            return (socket.inet_ntop(socket.AF_INET, data[4:8]), port)
        if family == socket.AF_INET6 and level == SOL_IPV6 and typ == IPV6_RECVORIGDSTADDR:
            port = struct.unpack_from("!H", data, 2)[0]
            return (socket.inet_ntop(socket.AF_INET6, data[8:24]), port, 0, 0)
    return None


class Relay:
    def __init__(self, spec, port, stats_path):
        self.spec = spec
        self.rng = random.Random(spec["seed"])
        self.window = spec["delay"] / 1000.0
        self.stats_path = stats_path
        self.c = dict(rx=0, tx=0, dropped=0, reordered=0, duplicated=0, errors=0, held_max=0)
        self.senders = {}  # (family, src) -> socket, oldest first
        self.heap = []  # (time, seq, family, src, dst, data)
        self.seq = 0
        self.sel = selectors.DefaultSelector()
        for fam in (socket.AF_INET, socket.AF_INET6):
            self.sel.register(listener(fam, port), selectors.EVENT_READ, fam)
        self.running = True

    def sender(self, family, src):
        key = (family, src)
        s = self.senders.pop(key, None)
        if s is None:
            if len(self.senders) >= MAX_SENDERS:
                old = next(iter(self.senders))
                self.senders.pop(old).close()
            s = socket.socket(family, socket.SOCK_DGRAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET:
                s.setsockopt(SOL_IP, IP_TRANSPARENT, 1)
            else:
                s.setsockopt(SOL_IPV6, socket.IPV6_V6ONLY, 1)
                s.setsockopt(SOL_IPV6, IPV6_TRANSPARENT, 1)
            force_buf(s)
            s.bind(src)
        self.senders[key] = s  # most recently used last
        return s

    def send(self, family, src, dst, data):
        try:
            self.sender(family, src).sendto(data, dst)
            self.c["tx"] += 1
        except OSError as e:
            self.c["errors"] += 1
            if self.c["errors"] <= 20:
                print(f"relay: send {src} -> {dst} ({len(data)} B): {e}", flush=True)

    def hold(self, delay, family, src, dst, data):
        self.seq += 1
        heapq.heappush(self.heap, (time.monotonic() + delay, self.seq, family, src, dst, data))
        self.c["held_max"] = max(self.c["held_max"], len(self.heap))

    def on_datagram(self, family, src, dst, data):
        self.c["rx"] += 1
        sp = self.spec
        r = self.rng
        if sp["drop"] and r.random() * 100 < sp["drop"]:
            self.c["dropped"] += 1
            return
        if sp["reorder"] and r.random() * 100 < sp["reorder"]:
            self.c["reordered"] += 1
            self.hold(r.uniform(self.window / 10, self.window), family, src, dst, data)
        else:
            self.send(family, src, dst, data)
        if sp["dup"] and r.random() * 100 < sp["dup"]:
            self.c["duplicated"] += 1
            self.hold(r.uniform(0, self.window), family, src, dst, data)

    def write_stats(self):
        if not self.stats_path:
            return
        line = " ".join(f"{k}={v}" for k, v in self.c.items()) + "\n"
        tmp = self.stats_path + ".tmp"
        with open(tmp, "w") as f:
            f.write(line)
        os.replace(tmp, self.stats_path)

    def loop(self):
        next_stats = 0.0
        while self.running:
            now = time.monotonic()
            while self.heap and self.heap[0][0] <= now:
                _, _, fam, src, dst, data = heapq.heappop(self.heap)
                self.send(fam, src, dst, data)
            if now >= next_stats:
                self.write_stats()
                next_stats = now + 1.0
            timeout = next_stats - now
            if self.heap:
                timeout = min(timeout, max(0.0, self.heap[0][0] - now))
            for key, _ in self.sel.select(timeout):
                sock, fam = key.fileobj, key.data
                for _ in range(64):  # drain a burst, then look at the timers
                    try:
                        data, anc, _, src = sock.recvmsg(65536, 256)
                    except BlockingIOError:
                        break
                    except OSError as e:
                        self.c["errors"] += 1
                        print(f"relay: recvmsg: {e}", flush=True)
                        break
                    dst = orig_dst(fam, anc)
                    if dst is None:
                        self.c["errors"] += 1
                        continue
                    if fam == socket.AF_INET6:
                        src = (src[0], src[1], 0, 0)
                    self.on_datagram(fam, src, dst, data)
        # flush what is held, then the final counters
        while self.heap:
            _, _, fam, src, dst, data = heapq.heappop(self.heap)
            self.send(fam, src, dst, data)
        self.write_stats()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--port", type=int, default=7777, help="TPROXY port to listen on")
    ap.add_argument("--spec", default="none")
    ap.add_argument("--stats", default="", help="file for the counters")
    ap.add_argument("--pidfile", default="")
    ap.add_argument("--check-spec", metavar="SPEC", help="only check SPEC and exit")
    a = ap.parse_args()
    try:
        if a.check_spec is not None:
            parse_spec(a.check_spec)
            return 0
        spec = parse_spec(a.spec)
    except ValueError as e:
        print(f"udp_relay: bad spec: {e}", file=sys.stderr)
        return 2
    if spec["seed"] is None:
        spec["seed"] = int(time.time() * 1000) % 1000000
    relay = Relay(spec, a.port, a.stats)

    def stop(*_):
        relay.running = False

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    if a.pidfile:
        with open(a.pidfile, "w") as f:
            f.write(f"{os.getpid()}\n")
    print(f"relay: port {a.port}, spec {spec}", flush=True)
    relay.loop()
    print(f"relay: stopped: {relay.c}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
