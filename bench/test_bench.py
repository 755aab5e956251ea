"""Unit tests of bench.py's parsers, formatting and ratios (no timing, no
processes). Run: python3 -m unittest discover -s bench -p 'test_*.py'"""
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402

PP_OUT = """bytes   #sent   #ack     total       time     MB/sec    usec/xfer   Mxfers/sec
6k      100     =100     1.1m        0.00s   2322.87       2.64       0.38
"""

UCX_OUT = """iterations,50.0_percentile_lat,avg_lat,overall_lat,avg_bw,overall_bw,avg_mr,overall_mr
2000,0.098,13.501,13.501,4629.43,4629.43,74071,74071
"""

STREAM_OUT = """bytes      msgs     seconds    GB/s       Mmsg/s
8          5000     0.003520   0.011364   1.4204
4194304    128      0.045693   11.749     0.0028012
"""


class Parsers(unittest.TestCase):
    def test_pingpong_size_suffixes(self):
        self.assertEqual(bench.pp_size("8"), 8)
        self.assertEqual(bench.pp_size("6k"), 6144)
        self.assertEqual(bench.pp_size("4m"), 4 << 20)

    def test_pingpong_latency_from_rate(self):
        v = bench.parse_pingpong(PP_OUT, 6144)
        self.assertAlmostEqual(v, 6144 / 2322.87, places=6)
        self.assertAlmostEqual(v, 2.64, delta=0.01)

    def test_pingpong_wrong_size_or_garbage(self):
        with self.assertRaises(ValueError):
            bench.parse_pingpong(PP_OUT, 8192)
        with self.assertRaises(ValueError):
            bench.parse_pingpong("fi_getinfo(): -61 No data available\n", 8)

    def test_pingpong_inconsistent_rate_falls_back(self):
        out = PP_OUT.replace("2322.87", "9999.99")
        self.assertEqual(bench.parse_pingpong(out, 6144), 2.64)

    def test_ucx(self):
        r = bench.parse_ucx(UCX_OUT)
        self.assertEqual(r["overall_lat"], 13.501)
        self.assertEqual(r["overall_mr"], 74071)
        with self.assertRaises(ValueError):
            bench.parse_ucx("[1] ucp_ep.c error: Destination is unreachable\n")
        with self.assertRaises(ValueError):
            bench.parse_ucx(UCX_OUT.splitlines()[0] + "\n1,2\n")

    def test_stream(self):
        r = bench.parse_stream(STREAM_OUT)
        self.assertEqual(sorted(r), [8, 4194304])
        self.assertEqual(r[4194304], (11.749, 0.0028012))
        self.assertEqual(bench.parse_stream("error\n"), {})


class Report(unittest.TestCase):
    def test_fmt(self):
        self.assertEqual(bench.fmt(None), "n/a")
        self.assertEqual(bench.fmt(0.000812), "0.000812")
        self.assertEqual(bench.fmt(12.34), "12.3")
        self.assertEqual(bench.fmt(1506.7), "1507")
        self.assertEqual(bench.fmt(0.8, 2), "0.80")

    def test_ratio(self):
        self.assertEqual(bench.ratio(2.0, [4.0, 1.0], True), 2.0)
        self.assertEqual(bench.ratio(2.0, [4.0, 1.0], False), 0.5)
        self.assertEqual(bench.ratio(2.0, [None, 4.0], False), 0.5)
        self.assertIsNone(bench.ratio(None, [1.0], True))
        self.assertIsNone(bench.ratio(1.0, [None, None], True))

    def test_rows_median_and_missing_series(self):
        lat = {"ours": {}, "debian": {8: [3.0, 1.0, 2.0]}, "ucx": {8: [4.0]}}
        stream = {"ours": {}, "debian": {8: [(1.0, 2.0)]}, "ucx": {8: [(3.0, 1.0)]}}
        (r,) = bench.build_rows([8], lat, stream)
        self.assertEqual(r["lat_debian"], 2.0)
        self.assertIsNone(r["lat_ours"])
        self.assertIsNone(r["lat_ratio"])
        text = bench.markdown([r], ["ours: not built"], {"date": "d", "cpu": "c", "reps": "r", "command": "x"})
        self.assertIn("| 8 B | n/a | 2.00 | 4.00 | n/a |", text)
        self.assertIn("- ours: not built", text)

    def test_stream_latency(self):
        out = "bytes      iters    usec\n8          20000    0.412\n65536      2048     9.5\n"
        self.assertEqual(bench.parse_stream_latency(out), {8: 0.412, 65536: 9.5})
        self.assertEqual(bench.parse_stream_latency("garbage\n"), {})

    def test_ours_alone_without_peers(self):
        """No peer installed: our columns only, no ratios, and how to get
        each peer."""
        lat = {"ours": {8: [1.0]}, "debian": {}, "ucx": {}}
        stream = {"ours": {8: [(0.5, 2.0)]}, "debian": {}, "ucx": {}}
        rows = bench.build_rows([8], lat, stream)
        absent = {"debian": bench.PEER_INSTALL["debian"], "ucx": bench.PEER_INSTALL["ucx"]}
        text = bench.markdown(rows, [], {"date": "d", "cpu": "c", "reps": "r", "command": "x"}, ["ours"], absent)
        self.assertIn("| size | ours |\n|---:|---:|\n| 8 B | 1.00 |", text)
        self.assertIn("| size | ours GB/s | ours Mmsg/s |\n|---:|---:|---:|\n| 8 B | 0.500 | 2.00 |", text)
        self.assertNotIn("Debian |", text)
        self.assertNotIn("÷", text)
        self.assertIn("sudo apt-get install libfabric1 libfabric-bin libfabric-dev", text)
        self.assertIn("sudo apt-get install ucx-utils", text)
        # One peer back: its columns and the ratio return.
        text = bench.markdown(rows, [], {"date": "d", "cpu": "c", "reps": "r", "command": "x"},
                              ["ours", "ucx"], {"debian": absent["debian"]})
        self.assertIn("| size | ours | UCX | ours÷best |", text)
        self.assertNotIn("ucx-utils", text)

    def test_ours_latency_without_fi_pingpong(self):
        seen = []

        def stream_lat(binary, libdir, size, ports):
            seen.append((binary, libdir, size))
            return 0.5, None

        def stream(binary, libdir, sizes, ports):
            return {s: (1.0, 1.0) for s in sizes}, None

        saved = bench.stream_latency_case, bench.stream_case
        bench.stream_latency_case, bench.stream_case = stream_lat, stream
        try:
            lat, st, errors = bench.measure([8, 16], 1, {"ours": "ours"}, "fi_stream", lambda _: None,
                                            ["ours"], {}, "fi_stream-ours")
        finally:
            bench.stream_latency_case, bench.stream_case = saved
        self.assertEqual(seen, [("fi_stream-ours", "ours", 8), ("fi_stream-ours", "ours", 16)])
        self.assertEqual(lat["ours"], {8: [0.5], 16: [0.5]})
        self.assertEqual(errors, [])

    def test_failed_case_leaves_out_one_run(self):
        """A case that fails costs that run of that size only; a series
        that keeps failing is given up."""
        calls = {"debian": 0}

        def pingpong(libdir, size, ports):
            if libdir == "deb":
                calls["debian"] += 1
                if size == 16 and calls["debian"] == 2:
                    return None, "fi_pingpong 16 B: ctrl/read: no data"
            return (1.0 if libdir == "ours" else 2.0), None

        def ucx(test, size, ports):
            return None, "ucx_perftest %s: not installed" % test

        def stream(binary, libdir, sizes, ports):
            return {s: (float(s), 1.0) for s in sizes}, None

        saved = bench.pingpong_case, bench.ucx_case, bench.stream_case
        bench.pingpong_case, bench.ucx_case, bench.stream_case = pingpong, ucx, stream
        try:
            lat, st, errors = bench.measure([8, 16], 3, {"ours": "ours", "debian": "deb"}, "fi_stream", lambda _: None)
        finally:
            bench.pingpong_case, bench.ucx_case, bench.stream_case = saved
        self.assertEqual(lat["ours"], {8: [1.0] * 3, 16: [1.0] * 3})
        self.assertEqual(lat["debian"], {8: [2.0] * 3, 16: [2.0] * 2})
        self.assertEqual(st["debian"][16], [(16.0, 1.0)] * 3)
        self.assertEqual(lat["ucx"], {8: [], 16: []})
        self.assertEqual(len(errors), 3)
        self.assertIn("debian latency: 1 failed case; first: fi_pingpong 16 B", errors[0])
        self.assertIn("ucx latency: 3 failed cases (series given up)", errors[1])
        self.assertIn("ucx streaming: 3 failed cases (series given up)", errors[2])

    def test_svg_and_csv_written(self):
        lat = {"ours": {8: [1.0], 16: [1.5]}, "debian": {8: [2.0], 16: [2.5]}, "ucx": {}}
        stream = {"ours": {8: [(0.1, 5.0)], 16: [(0.2, 5.0)]}, "debian": {}, "ucx": {}}
        rows = bench.build_rows([8, 16], lat, stream)
        with tempfile.TemporaryDirectory() as d:
            bench.write_svg(os.path.join(d, "p.svg"), rows, "note <&>")
            svg = open(os.path.join(d, "p.svg")).read()
            self.assertTrue(svg.startswith("<svg") and svg.rstrip().endswith("</svg>"))
            self.assertIn("note &lt;&amp;&gt;", svg)
            self.assertEqual(svg.count("<path"), 3)  # two latency series, one bandwidth
            self.assertIn("(not measured)", svg)     # UCX has no data here
            bench.write_csv(os.path.join(d, "r.csv"), rows)
            lines = open(os.path.join(d, "r.csv")).read().splitlines()
            self.assertEqual(lines[0].split(",")[0], "size")
            self.assertEqual(len(lines), 3)
            self.assertTrue(lines[1].startswith("8,1,2,,0.5,"))


if __name__ == "__main__":
    unittest.main()


class PortChoice(unittest.TestCase):
    def test_ports_skip_sockets_in_use(self):
        import socket
        with socket.socket() as a:
            a.bind(("127.0.0.1", 0))
            a.listen(1)
            busy = a.getsockname()[1]
            self.assertIn(busy, bench.ports_in_use())
            p = bench.Ports(low=busy, high=busy + 1)
            p.next = busy - 1
            # busy is the next candidate but is skipped.
            self.assertEqual(p.take(), busy + 1)

    def test_ports_below_ephemeral_range(self):
        p = bench.Ports()
        for _ in range(50):
            self.assertLess(p.take(), bench.ephemeral_low())

    def test_port_clash_recognised(self):
        self.assertTrue(bench.port_clash("server did not start: bind(): util/pingpong.c:460 , ret=-98 (Address already in use)"))
        self.assertFalse(bench.port_clash("fi_getinfo(): -61 No data available"))
        self.assertFalse(bench.port_clash(None))



class Oversub(unittest.TestCase):
    OUT = "phase pingpong_8B 0.25\nphase rma_fetch_add_8B 1.5\nrank 0 says hi\nphase total 1.75\n"

    def test_parse_phases(self):
        import mpi_oversub
        self.assertEqual(mpi_oversub.parse(self.OUT),
                         {"pingpong_8B": 0.25, "rma_fetch_add_8B": 1.5, "total": 1.75})
        with self.assertRaises(ValueError):
            mpi_oversub.parse("phase pingpong_8B 0.25\n")

    def test_medians_and_ratios(self):
        import mpi_oversub
        runs = lambda *ts: [({"a": t, "total": 2 * t}, 3 * t, t, t / 2) for t in ts]
        results = {3: {"ours": runs(1.0, 3.0, 2.0), "wheel": runs(4.0, 4.0, 8.0)}}
        text = mpi_oversub.markdown(results, ["mpi 3 ranks, wheel, run 9: exit 1"], 3, 1)
        self.assertIn("| a | 2.000 | 4.000 | 0.50 |", text)
        self.assertIn("| total | 4.000 | 8.000 | 0.50 |", text)
        self.assertIn("| CPU system | 1.000 | 2.000 | 0.50 |", text)
        self.assertIn("- mpi 3 ranks, wheel, run 9: exit 1", text)

    def test_no_runs_reads_na(self):
        import mpi_oversub
        text = mpi_oversub.markdown({4: {"ours": [], "wheel": [({"total": 1.0}, 1.0, 1.0, 1.0)]}}, [], 1, 1)
        self.assertIn("| total | n/a | 1.000 | n/a |", text)


class Net(unittest.TestCase):
    """bench/net.py: the network tables' parsers, case commands, loss
    bookkeeping, measuring loop (with a fake case runner) and reports."""

    def setUp(self):
        import net
        self.net = net

    def floor_tools(self, d):
        """bench/tcp_floor.c and bench/turnaround.c (with -Werror) built
        into `d`: (floor, shim). Skips the test without a C compiler."""
        import shutil
        if not shutil.which("cc"):
            self.skipTest("no C compiler")
        net = self.net
        floor, err = net.bench.build_c(os.path.join(net.HERE, "tcp_floor.c"), os.path.join(d, "tcp_floor"), [])
        self.assertIsNone(err)
        shim, err = net.bench.build_c(os.path.join(net.HERE, "turnaround.c"), os.path.join(d, "turnaround.so"),
                                      ["-Werror", "-shared", "-fPIC", "-ldl"])
        self.assertIsNone(err)
        return floor, shim

    def floor_pair(self, floor, shim, args):
        """The floor's server and client with `args` after the port, both
        under the turnaround shim `shim`: (the client's completed process,
        the server's stderr)."""
        import subprocess
        import time
        net = self.net
        port = net.bench.Ports().take()
        env = dict(os.environ, LD_PRELOAD=shim)
        srv = subprocess.Popen([floor, "server", str(port)] + args, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            for _ in range(200):
                if net.bench.listening(port):
                    break
                time.sleep(0.01)
            cli = subprocess.run([floor, "client", str(port)] + args, env=env,
                                 capture_output=True, text=True, timeout=60)
            return cli, srv.communicate(timeout=60)[1]
        finally:
            srv.kill()

    def test_parse_counters(self):
        c = self.net.parse_counters("udp_seen 324807 udp_drop 3263 tcp_seen 3 tcp_drop 0 \n")
        self.assertEqual(c, {"udp_seen": 324807, "udp_drop": 3263, "tcp_seen": 3, "tcp_drop": 0})
        self.assertEqual(self.net.parse_counters("no loss rules\n"), {})
        line = self.net.counters_line({"udp_seen": 1000, "udp_drop": 10, "tcp_seen": 0, "tcp_drop": 0})
        self.assertIn("UDP packets 10 of 1000 (1.00%)", line)
        self.assertIn("TCP segments with payload 0 of 0 (0.00%)", line)

    def test_parse_mpi(self):
        out = ("pingpong 8 2000 57.020\npingpong 65536 256 480.354\n[proxy] noise\n"
               "allreduce 8 2000 68.625\nallreduce x 1 2\n")
        self.assertEqual(self.net.parse_mpi(out), {("pingpong", 8): 57.02, ("pingpong", 65536): 480.354,
                                                   ("allreduce", 8): 68.625})

    def test_series_env_and_commands(self):
        net = self.net
        ours = net.make_series("ours_loss", net.VETH, "/lib/ours")
        self.assertEqual((ours.provider, ours.loss), ("rudp", 1))
        self.assertEqual(ours.env(), {"LD_LIBRARY_PATH": "/lib/ours", "FI_RUDP_IFACE": "rfbn0"})
        rxm = net.make_series("rxm", net.LOOPBACK, "/lib/ours")
        self.assertEqual(rxm.env()["FI_TCP_IFACE"], "lo")
        self.assertEqual(net.make_series("rxd", net.LOOPBACK, "x").env()["FI_UDP_IFACE"], "lo")
        self.assertEqual(net.make_series("ucx", net.LOOPBACK, "x").env(),
                         {"UCX_TLS": "tcp,self", "UCX_NET_DEVICES": "lo"})
        srv, cli = net.stream_cmds("fi_stream", ours, 65536, 4000)
        self.assertEqual(srv[-2:], ["-s", "10.78.0.2"])
        self.assertEqual(cli[-1], "10.78.0.2")
        srv, cli = net.stream_cmds("fi_stream", rxm, 8, 4000)
        self.assertNotIn("-s", srv)
        self.assertEqual(cli[-1], "127.0.0.1")
        self.assertIn("tcp;ofi_rxm", cli)
        srv, cli = net.pingpong_cmds(rxm, 1 << 20, 4000)
        self.assertEqual(cli[-3:], ["-P", "4000", "127.0.0.1"])
        self.assertEqual(cli[cli.index("-I") + 1], str(net.pp_iters(1 << 20)))
        line = net.repro(ours, *net.stream_cmds("fi_stream", ours, 8, 23500))
        self.assertTrue(line.startswith("bench/netns.sh up && bench/netns.sh loss 1 && ip netns exec rfbn-b env "))
        self.assertIn("ip netns exec rfbn-a env FI_RUDP_IFACE=rfbn0 LD_LIBRARY_PATH=/lib/ours timeout 120 taskset -c 1", line)
        line = net.repro(rxm, *net.pingpong_cmds(rxm, 8, 23500))
        self.assertIn("'tcp;ofi_rxm'", line)
        # Loopback runs in its own namespace, both sides in it.
        self.assertTrue(line.startswith("bench/netns.sh lo-fresh && ip netns exec rfbn-lo env "))
        self.assertIn("; ip netns exec rfbn-lo env ", line)
        host = net.make_series("rxm", net.HOST_LOOPBACK, "/lib/ours")
        self.assertTrue(net.repro(host, *net.pingpong_cmds(host, 8, 23500)).startswith("env "))

    def test_iterations(self):
        net = self.net
        self.assertEqual(net.pp_iters(8), 20000)
        self.assertEqual(net.pp_iters(4096), 16384)
        self.assertEqual(net.pp_iters(65536), 1024)
        self.assertEqual(net.pp_iters(4 << 20), 200)
        # under loss at most 2000 (a drop costs TCP 200 ms or more)
        self.assertEqual(net.pp_iters(8, loss=True), 2000)
        self.assertEqual(net.pp_iters(65536, loss=True), 1024)
        lossy = net.make_series("rxm_loss", net.VETH, "/lib/ours")
        srv, cli = net.pingpong_cmds(lossy, 8, 4000)
        self.assertEqual(cli[cli.index("-I") + 1], "2000")
        clean = net.make_series("rxm", net.VETH, "/lib/ours")
        srv, cli = net.pingpong_cmds(clean, 8, 4000)
        self.assertEqual(cli[cli.index("-I") + 1], "20000")
        self.assertEqual(net.stream_count(8), 20000)
        self.assertEqual(net.stream_count(4 << 20), 64)
        self.assertEqual(net.stream_count(4 << 20, 32 << 20), 2 * net.NET_WINDOW)
        # fi_stream and ucx_perftest are given the same bytes: 256 MiB,
        # 32 MiB with loss
        lo = net.make_series("ours_tcp", net.LOOPBACK, "/lib/ours")
        lossy = net.make_series("rxm_loss", net.VETH, "/lib/ours")
        for se, nbytes in ((lo, 256 << 20), (lossy, 32 << 20)):
            srv, cli = net.stream_cmds("fi_stream", se, 1 << 20, 4000)
            self.assertEqual(cli[cli.index("-b") + 1], str(nbytes))
        ucx = net.make_series("ucx", net.LOOPBACK, "x")
        srv, cli = net.ucx_cmds(ucx, "tag_bw", 1 << 20, 4000)
        self.assertEqual(cli[cli.index("-n") + 1], "256")

    def test_each_run_starts_its_turn_at_the_next_series(self):
        net = self.net
        self.assertEqual(net.rotated("abc", 0), ["a", "b", "c"])
        self.assertEqual(net.rotated("abc", 1), ["b", "c", "a"])
        self.assertEqual(net.rotated("abc", 5), ["c", "a", "b"])
        self.assertEqual(net.rotated([], 3), [])
        series = [net.make_series(k, net.LOOPBACK, "ours") for k in ("ours", "rxm", "ucx")]
        seen = []

        def case(se, kind, size, ports, binary):
            seen.append((se.key, kind, size))
            return (2.0 if kind == "latency" else (1.0, 3.0)), None

        net.measure(series, [8, 16], 3, "fi_stream", lambda _: None, None, case)
        firsts = [seen[i][0] for i in range(0, len(seen), 3)]
        # two kinds by two sizes in each run, each run led by the next series
        self.assertEqual(firsts, ["ours"] * 4 + ["rxm"] * 4 + ["ucx"] * 4)
        self.assertEqual(seen[12:15], [("rxm", "latency", 8), ("ucx", "latency", 8), ("ours", "latency", 8)])

    def test_loss_set_only_on_change_and_counted(self):
        calls = []

        class R:
            def __init__(self, out):
                self.returncode, self.stdout = 0, out

        def run(cmd, **kw):
            calls.append(cmd[1:])
            return R("udp_seen 100 udp_drop 1 tcp_seen 50 tcp_drop 2" if cmd[1] == "counters" else "")

        loss = self.net.Loss(run)
        for pct in (0, 0, 1, 1, 0, 1, 0):
            loss.set(pct)
        self.assertEqual(calls, [["loss", "off"], ["loss", "1"], ["counters"], ["loss", "off"],
                                 ["loss", "1"], ["counters"], ["loss", "off"]])
        self.assertEqual(loss.totals, {"udp_seen": 200, "udp_drop": 2, "tcp_seen": 100, "tcp_drop": 4})

    def test_measure_failures_and_give_up(self):
        net = self.net
        series = [net.make_series(k, net.VETH, "ours") for k in ("ours", "rxm", "ours_loss")]
        seen = []

        def case(se, kind, size, ports, binary):
            seen.append((se.key, kind, size))
            if se.key == "ours" and kind == "streaming" and size == 16:
                return None, ("client timed out after 90 s (killed)", "repeat-me")
            if se.key == "ours_loss" and kind == "latency":
                return None, ("exit 1", "again")
            return (2.0 if kind == "latency" else (1.0, 3.0)), None

        class FakeLoss:
            def __init__(self):
                self.states = []

            def set(self, pct):
                self.states.append(pct)

        saved = net.GIVE_UP_AFTER
        net.GIVE_UP_AFTER = 2
        fl = FakeLoss()
        try:
            lat, st, fails = net.measure(series, [8, 16, 32], 2, "fi_stream", lambda _: None, fl, case)
        finally:
            net.GIVE_UP_AFTER = saved
        self.assertEqual(lat["ours"], {8: [2.0, 2.0], 16: [2.0, 2.0], 32: [2.0, 2.0]})
        self.assertEqual(st["ours"], {8: [(1.0, 3.0)] * 2, 16: [], 32: [(1.0, 3.0)] * 2})
        # ours streaming 16 B failed in run 1 and is not tried in run 2
        self.assertEqual(seen.count(("ours", "streaming", 16)), 1)
        # ours_loss latency failed at 8 and 16 B: given up before 32 B
        self.assertNotIn(("ours_loss", "latency", 32), seen)
        self.assertEqual(lat["ours_loss"], {8: [], 16: [], 32: []})
        self.assertEqual(st["ours_loss"][32], [(1.0, 3.0)] * 2)
        self.assertEqual([f[:4] for f in fails], [("ours_loss", "latency", 8, 1), ("ours_loss", "latency", 16, 1),
                                                  ("ours", "streaming", 16, 1)])
        self.assertEqual(fails[2][4:], ("client timed out after 90 s (killed)", "repeat-me"))
        self.assertIn(1, fl.states)
        self.assertEqual(fl.states[-1], 0)

    def test_measure_only_the_kinds_asked_for(self):
        net = self.net
        seen = []

        def case(se, kind, size, ports, binary):
            seen.append((se.key, kind))
            return 3.0, None
        series = [net.make_series("ours_tcp", net.HOST_LOOPBACK, "ours"), net.Series("floor", net.HOST_LOOPBACK, "floor", None)]
        by_run = {}
        lat, st, fails = net.measure(series, [8, 16], 3, None, lambda _: None, run_case=case, by_run=by_run,
                                     kinds=("latency",))
        self.assertEqual(set(seen), {("ours_tcp", "latency"), ("floor", "latency")})
        self.assertEqual(len(seen), 12)
        self.assertEqual(lat["floor"], {8: [3.0] * 3, 16: [3.0] * 3})
        self.assertEqual(st["floor"], {8: [], 16: []})
        self.assertEqual(by_run[("floor", "latency", 16)], {0: 3.0, 1: 3.0, 2: 3.0})

    def test_floor_case_runs_the_floor_program(self):
        net = self.net
        with tempfile.TemporaryDirectory() as d:
            binary, _ = self.floor_tools(d)
            saved = net.pp_iters
            net.pp_iters = lambda size, loss=False: 200
            try:
                v, err = net.floor_case(binary, 64, net.bench.Ports(), net.HOST_LOOPBACK)
                bad, why = net.floor_case(os.path.join(d, "missing"), 64, net.bench.Ports(), net.HOST_LOOPBACK)
            finally:
                net.pp_iters = saved
        self.assertIsNone(err)
        self.assertTrue(0 < v < 10000, v)
        self.assertIsNone(bad)
        self.assertIn("missing server", why[1])

    def test_turnaround_counts_each_answer_of_a_ping_pong(self):
        with tempfile.TemporaryDirectory() as d:
            floor, shim = self.floor_tools(d)
            cli, srv_err = self.floor_pair(floor, shim, ["300", "bare", "64"])
        self.assertEqual(cli.returncode, 0, cli.stderr)
        self.assertIn("300 round trips", cli.stdout)
        # The server answers each of the 300 messages; the client sends
        # after each answer but the last.
        self.assertRegex(srv_err, r"turnaround pid \d+: 300, mean \d+ ns, median \d+ ns")
        self.assertRegex(cli.stderr, r"turnaround pid \d+: 299, mean \d+ ns, median \d+ ns")

    def test_turnaround_case_collects_both_sides_through_a_file(self):
        net = self.net
        text = ("noise\nturnaround pid 12: 20000, mean 845 ns, median 670 ns\n"
                "turnaround pid 13: 19999, mean 60 ns, median 50 ns\nturnaround pid x: 1\n")
        self.assertEqual(net.parse_turnaround(text), [(20000, 845, 670), (19999, 60, 50)])
        with tempfile.TemporaryDirectory() as d:
            floor, shim = self.floor_tools(d)
            se = net.Series("floor", net.HOST_LOOPBACK, "floor", None)
            before = {f for f in os.listdir(tempfile.gettempdir()) if f.startswith("turnaround.")}
            saved = net.pp_iters
            net.pp_iters = lambda size, loss=False: 200
            try:
                got, err = net.turnaround_case(se, 64, net.bench.Ports(), shim, floor)
                bad, why = net.turnaround_case(se, 64, net.bench.Ports(), shim, os.path.join(d, "missing"))
            finally:
                net.pp_iters = saved
        # The file both sides wrote to is gone.
        self.assertEqual({f for f in os.listdir(tempfile.gettempdir()) if f.startswith("turnaround.")}, before)
        self.assertIsNone(err)
        self.assertEqual(sorted(g[0] for g in got), [199, 200])
        self.assertTrue(all(0 < g[2] < 100000 for g in got), got)
        self.assertIsNone(bad)
        self.assertIn("LD_PRELOAD=", why[1])
        lines = net.turnaround_lines({"floor": got, "ours_tcp": []}, ["ours_tcp", "floor"])
        self.assertEqual(lines[2], "| ours tcp | - | - | - | 0 |")
        self.assertTrue(lines[3].startswith("| tcp floor | "), lines[3])
        self.assertTrue(lines[3].endswith(" | 2 |"), lines[3])
        table = net.turnaround_lines({"ucx": [(10, 300, 250), (10, 400, 310), (10, 200, 160)]}, ["ucx"])
        self.assertEqual(table[2], "| UCX tcp | 250 | 160-310 | 200-400 | 3 |")

    def test_the_floor_spins_its_turnaround_between_a_receive_and_the_answer(self):
        net = self.net
        self.assertEqual(net.floor_cmds("/f", 64, 7)[0][-2:], ["bare", "64"])
        self.assertEqual(net.floor_cmds("/f", 64, 7, 500)[1][-3:], ["bare", "64", "500"])
        with tempfile.TemporaryDirectory() as d:
            floor, shim = self.floor_tools(d)
            cli, srv_err = self.floor_pair(floor, shim, ["200", "bare", "64", "20000"])
        self.assertEqual(cli.returncode, 0, cli.stderr)
        self.assertIn("turnaround added", cli.stdout)
        # Every interval from a receive to the next send holds the spin of
        # 20 µs: no median under 19.5 µs (the shim's clock reads are its
        # own, a few ns apart from the spin's), on either side.
        got = net.parse_turnaround(srv_err + cli.stderr)
        self.assertEqual(sorted(g[0] for g in got), [199, 200])
        self.assertTrue(all(g[2] >= 19500 for g in got), got)

    def test_turn_at_finds_where_the_floor_meets_a_series(self):
        net = self.net
        self.assertAlmostEqual(net.turn_at([0, 250, 500], [0.9, 0.98, 1.06]), 312.5)
        self.assertAlmostEqual(net.turn_at([0, 250, 500], [0.9, 1.0, 1.1]), 250)
        self.assertAlmostEqual(net.turn_at([0, 250, 500], [0.9, None, 1.1]), 250)
        # Noisy ratios: the line through all three, not the two neighbours
        # around 1.0 (which would say 375).
        self.assertAlmostEqual(net.turn_at([0, 250, 500], [0.9, 0.95, 1.05]), 3250 / 9)
        # Beyond the turns measured: extrapolated along the line.
        self.assertAlmostEqual(net.turn_at([0, 250, 500], [0.8, 0.9, 1.0 - 1 / 30]), 1750 / 3)
        # A floor that does not get slower with its turnaround says nothing.
        self.assertIsNone(net.turn_at([0, 250, 500], [1.1, 1.0, 0.9]))
        self.assertIsNone(net.turn_at([0, 250, 500], [1.0, 1.0, 1.0]))
        self.assertIsNone(net.turn_at([0, 250], [None, 0.9]))
        self.assertIsNone(net.turn_at([250, 250], [0.9, 1.1]))

    def test_calibrate_lines_match_ours_and_ucx_to_a_turnaround(self):
        net = self.net
        by_run = {}
        for r in range(9):
            by_run.setdefault(("ours_tcp", "latency", 64), {})[r] = 10.0
            by_run.setdefault(("ucx", "latency", 64), {})[r] = 10.5
            by_run.setdefault(("floor", "latency", 64), {})[r] = 9.0
            by_run.setdefault(("floor+500", "latency", 64), {})[r] = 9.5
            by_run.setdefault(("floor+1000", "latency", 64), {})[r] = 10.0 + 0.01 * r
        keys = ["ours_tcp", "ucx", "floor", "floor+500", "floor+1000"]
        lines = net.calibrate_lines(64, [0, 500, 1000], by_run, keys)
        self.assertEqual(lines[0], "| series | one-way µs (median) | ÷ ours tcp (paired) |")
        self.assertEqual(lines[2], "| ours tcp | 10.00 | - |")
        self.assertEqual(lines[3], "| UCX tcp | 10.50 | 1.050 (1.05-1.05) |")
        self.assertEqual(lines[4], "| tcp floor | 9.00 | 0.900 (0.90-0.90) |")
        self.assertEqual(lines[5], "| tcp floor, 500 ns turnaround | 9.50 | 0.950 (0.95-0.95) |")
        self.assertTrue(lines[6].startswith("| tcp floor, 1000 ns turnaround | 10.04 | 1.004 ("), lines[6])
        notes = [x for x in lines if x.startswith("- ")]
        # Ours: on the line through 0.9, 0.95 and 1.004; UCX: beyond the
        # turns measured.
        self.assertEqual(notes[0], "- ours tcp matches the floor with 968 ns of turnaround per message on each side.")
        self.assertEqual(notes[1], "- UCX tcp matches the floor with 1449 ns of turnaround per message on each side "
                                   "(outside 0-1000 ns: extrapolated).")
        self.assertEqual(notes[2], "- 100 ns of turnaround adds 0.104 µs to the floor's one-way latency, 1.0% of "
                                   "our tcp's latency.")
        # Without UCX's series, no line for it.
        lines = net.calibrate_lines(64, [0, 500, 1000], by_run, ["ours_tcp", "floor", "floor+500", "floor+1000"])
        self.assertEqual(len([x for x in lines if x.startswith("- ")]), 2)
        # UCX listed but never measured; a floor that got faster with its
        # turnaround (noise) matches nothing.
        flat = {k: v for k, v in by_run.items() if k[0] != "ucx"}
        flat[("floor+1000", "latency", 64)] = {r: 8.9 for r in range(9)}
        notes = [x for x in net.calibrate_lines(64, [0, 500, 1000], flat, keys) if x.startswith("- ")]
        self.assertEqual(notes[0], "- ours tcp: no turnaround matches it (the floor's latency did not rise with "
                                   "its turnaround).")
        self.assertEqual(notes[1], "- UCX tcp: no run paired with the floor's.")

    def test_floor_lines_pair_ours_ucx_and_the_floor(self):
        net = self.net
        by_run = {}
        for r in range(9):
            by_run.setdefault(("ucx", "latency", 8), {})[r] = 10.0
            by_run.setdefault(("floor", "latency", 8), {})[r] = 8.0 + 0.1 * r
            by_run.setdefault(("ours_tcp", "latency", 8), {})[r] = 9.0
        lines = net.floor_lines([8], by_run)
        self.assertEqual(lines[0], "| size | ours tcp µs | UCX tcp µs | floor µs | ours÷UCX | floor÷UCX | ours÷floor |")
        self.assertEqual(lines[2], "| 8 B | 9.00 | 10.00 | 8.40 | 0.900 (0.90-0.90) | 0.840 (0.81-0.87) | "
                                   "1.071 (1.03-1.11) |")
        power = [x for x in lines if x.startswith("- ")]
        self.assertEqual(len(power), 2)
        self.assertIn("ours tcp against UCX tcp, latency at 1 sizes (9 runs each)", power[0])
        self.assertIn("tcp floor against UCX tcp", power[1])
        self.assertEqual(net.floor_lines([8], {})[2], "| 8 B | - | - | - | - | - | - |")
        # Four runs say nothing of their scatter: no chance lines.
        few = {k: {r: v for r, v in runs.items() if r < 4} for k, runs in by_run.items()}
        self.assertEqual([x for x in net.floor_lines([8], few) if x.startswith("- ")], [])

    def test_tables_ratios_targets(self):
        net = self.net
        sizes = [8, 65536]
        lat = {"ours": {8: [1.0, 3.0, 2.0], 65536: [10.0]}, "rxm": {8: [4.0], 65536: [5.0]},
               "rxd": {8: [8.0], 65536: []}, "ucx": {8: [], 65536: []}}
        stream = {"ours": {8: [(0.1, 12.0)], 65536: [(2.0, 0.03)]}, "rxm": {8: [(0.2, 25.0)], 65536: [(1.0, 0.015)]},
                  "rxd": {8: [], 65536: [(4.0, 0.06)]}, "ucx": {8: [], 65536: []}}
        med = net.medians(sizes, lat, stream)
        self.assertEqual(med["ours"][8], (2.0, 0.1, 12.0))
        groups = [("ours", ["rxm", "rxd", "ucx"])]
        text = "\n".join(net.lat_table(sizes, med, groups))
        self.assertIn("| size | ours | tcp;rxm | udp;rxd | UCX tcp | ours÷best |", text)
        self.assertIn("| 8 B | 2.00 | 4.00 | 8.00 | n/a | 0.50 |", text)
        self.assertIn("| 64 KiB | 10.0 | 5.00 | n/a | n/a | 2.0 |", text)
        text = "\n".join(net.stream_table(sizes, med, groups))
        self.assertIn("| 64 KiB | 2.00 | 1.00 | 4.00 | n/a | 0.50 | 0.0300 | 0.0150 | 0.0600 | n/a | 0.50 |", text)
        t = net.targets(sizes, med, "ours", ["rxm", "rxd", "ucx"])
        self.assertIn("latency ≤ 1.0× at every size: not met (missed at: 64 KiB)", t)
        self.assertIn("streaming ≥ 1.0× from 64 KiB: not met (missed at: 64 KiB)", t)
        two = net.lat_table(sizes, {"ours": med["ours"], "rxm": med["rxm"]}, [("ours", ["rxm"])])
        self.assertIn("| size | ours | tcp;rxm | ours÷tcp;rxm |", two[0])
        md = "\n".join(net.failures_md([("ours", "streaming", 131072, 2, "client exit 2", "cmd x")]))
        self.assertIn("- ours streaming 128 KiB (run 2): client exit 2  \n  repeat: `cmd x`", md)

    def test_paired_ratios_cancel_a_slow_run(self):
        net = self.net
        series = [net.make_series(k, net.LOOPBACK, "ours") for k in ("ours_tcp", "rxm", "ucx")]
        # Run 1 is slow for every series (a phase of the machine); in two
        # of three runs ours is 0.9 of UCX, the best peer. The medians of
        # runs say 13.2 against 12 (1.1), the paired ratio 0.9.
        lat_of = {"ours_tcp": [9.0, 18.0, 13.2], "rxm": [15.0, 30.0, 15.0], "ucx": [10.0, 20.0, 12.0]}
        bw_of = {"ours_tcp": [2.0, 1.0, 3.0], "rxm": [1.0, 0.5, 1.5], "ucx": [4.0, 0.4, 2.0]}

        calls = {}

        def case(se, kind, size, ports, binary):
            r = calls[(se.key, kind, size)] = calls.get((se.key, kind, size), -1) + 1
            if se.key == "rxm" and size == 16:
                return None, ("exit 1", "again")
            if kind == "latency":
                return lat_of[se.key][r], None
            return (bw_of[se.key][r], 1.0), None

        by_run = {}
        lat, stream, fails = net.measure(series, [8, 16], 3, "fi_stream", lambda _: None, None, case, by_run=by_run)
        self.assertEqual(by_run[("ours_tcp", "latency", 8)], {0: 9.0, 1: 18.0, 2: 13.2})
        self.assertNotIn(("rxm", "latency", 16), by_run)
        groups = [("ours_tcp", ["rxm", "ucx"])]
        ratios = net.paired_ratios([8, 16], by_run, groups)
        self.assertAlmostEqual(ratios[("ours_tcp", 8)][0], 0.9)
        # streaming: the best peer of each run is the fastest (4, 0.5, 2)
        self.assertAlmostEqual(ratios[("ours_tcp", 8)][1], 1.5)
        # a failed peer leaves the other peers of the run
        self.assertAlmostEqual(ratios[("ours_tcp", 16)][0], 0.9)
        med = net.medians([8, 16], lat, stream)
        self.assertAlmostEqual(net.ratio_of(None, med, "ours_tcp", ["rxm", "ucx"], 8, 0), 13.2 / 12.0)
        self.assertAlmostEqual(net.ratio_of(ratios, med, "ours_tcp", ["rxm", "ucx"], 8, 0), 0.9)
        text = "\n".join(net.lat_table([8, 16], med, groups, ratios))
        self.assertIn("| 8 B | 13.2 | 15.0 | 12.0 | 0.90 |", text)
        self.assertIn("latency ≤ 1.0× at every size: met", net.targets([8, 16], med, "ours_tcp", ["rxm", "ucx"], ratios=ratios))
        # without a peer in any run there is no ratio, and the target is missed
        self.assertEqual(net.paired_ratios([8], {("ours", "latency", 8): {0: 1.0}}, [("ours", ["rxm"])])[("ours", 8)],
                         (None, None, None))
        with tempfile.TemporaryDirectory() as d:
            net.write_csv(os.path.join(d, "n.csv"), [("loopback", [8, 16], med, groups, ratios)])
            with open(os.path.join(d, "n.csv")) as f:
                self.assertIn("loopback,ratio:ours_tcp/rxm|ucx,8,0.9,", f.read())

    def test_median_interval_is_the_sign_tests(self):
        net = self.net
        # n = 9: the 2nd and 8th of the sorted values hold the median with
        # probability 1 - 2 * (1 + 9) / 512; the 3rd and 7th only 0.82.
        lo, hi, cov = net.median_interval([9, 1, 8, 2, 7, 3, 6, 4, 5])
        self.assertEqual((lo, hi), (2, 8))
        self.assertAlmostEqual(cov, 1 - 20 / 512)
        # n = 5: only the smallest and the largest (1 - 2 / 32)
        self.assertEqual(net.median_interval([5, 4, 3, 2, 1])[:2], (1, 5))
        # n = 4: no interval reaches 0.9 (the widest holds with 0.875)
        self.assertIsNone(net.median_interval([1, 2, 3, 4]))
        self.assertIsNone(net.median_interval([]))
        self.assertEqual(net.median_interval([1, 2, 3, 4], confidence=0.8)[:2], (1, 4))

    def test_targets_say_what_the_runs_decide(self):
        net = self.net
        groups = [("ours_tcp", ["ucx"])]
        sizes = [8, 16, 32, 65536]
        # ours ÷ UCX, run by run: at 8 B under 1.0 in every run; at 16 B
        # over 1.0 in every run; at 32 B on both sides; at 64 KiB
        # streaming over 1.0 in every run and latency in too few runs.
        lat = {8: [0.9, 0.95, 0.8, 0.97, 0.9, 0.92, 0.99], 16: [1.1, 1.05, 1.2, 1.01, 1.1, 1.3, 1.02],
               32: [0.8, 1.2, 0.9, 1.1, 1.0, 0.85, 1.15], 65536: [0.5, 0.6, 0.7]}
        bw = {s: [1.2] * 7 for s in sizes}
        by_run = {}
        for s in sizes:
            by_run[("ucx", "latency", s)] = {r: 10.0 for r in range(7)}
            by_run[("ours_tcp", "latency", s)] = {r: 10.0 * v for r, v in enumerate(lat[s])}
            by_run[("ucx", "streaming", s)] = {r: (1.0, 1.0) for r in range(7)}
            by_run[("ours_tcp", "streaming", s)] = {r: (v, v) for r, v in enumerate(bw[s])}
        runs = net.paired_runs(sizes, by_run, groups)
        self.assertEqual(len(runs[("ours_tcp", 8)][0]), 7)
        self.assertEqual(net.decided(sizes, runs, "ours_tcp", 0, True), ([8], [16], [32, 65536]))
        self.assertEqual(net.decided(sizes, runs, "ours_tcp", 1, False, 65536), ([65536], [], []))
        ratios = net.paired_ratios(sizes, by_run, groups)
        self.assertAlmostEqual(ratios[("ours_tcp", 16)][0], 1.1)
        med = net.medians(sizes, {k: {s: [] for s in sizes} for k in ("ours_tcp", "ucx")},
                          {k: {s: [] for s in sizes} for k in ("ours_tcp", "ucx")})
        line = net.targets(sizes, med, "ours_tcp", ["ucx"], ratios=ratios, runs=runs)
        self.assertIn("latency ≤ 1.0× at every size: not met (missed at: 16 B)", line)
        self.assertIn("latency under 1.0 at 1 of 4 sizes, on the wrong side at 16 B, undecided at "
                      "32 B 0.80-1.20, 64 KiB too few runs", line)
        self.assertIn("streaming over 1.0 at 1 of 1 sizes, on the wrong side at none, undecided at none.", line)
        self.assertNotIn("What the runs decide", net.targets(sizes, med, "ours_tcp", ["ucx"], ratios=ratios))
        # A finished run's file gives the same line again.
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "n.runs.csv")
            net.write_runs_csv(path, [("loopback", sizes, med, groups, ratios, by_run)])
            back = net.read_runs_csv(path)["loopback"]
            self.assertEqual({k: sorted(v) for k, v in back.items()}, {k: sorted(v) for k, v in by_run.items()})
            self.assertAlmostEqual(back[("ours_tcp", "latency", 16)][2], 12.0)
            self.assertEqual(back[("ours_tcp", "streaming", 8)][6], (1.2, 1.2))
            again = net.decide_lines(path)
            # Split in two files (runs 1-3 and 4-7, numbered from 1 in
            # each), pooled they are the whole run again.
            parts = []
            for k, keep in enumerate((range(0, 3), range(3, 7))):
                part = {key: {r - keep[0]: v for r, v in runs.items() if r in keep} for key, runs in by_run.items()}
                parts.append(os.path.join(d, "p%d.runs.csv" % k))
                net.write_runs_csv(parts[-1], [("loopback", sizes, med, groups, ratios, part)])
            pooled = net.read_runs_csvs(parts)["loopback"]
            self.assertEqual(pooled, back)
            self.assertEqual(net.decide_lines(parts), again)
            self.assertNotEqual(net.decide_lines(parts[:1]), again)
        self.assertEqual(len(again), 1)
        self.assertIn("loopback: Targets (ours tcp against UCX tcp): latency ≤ 1.0× at every size: not met "
                      "(missed at: 16 B)", again[0])
        self.assertIn("on the wrong side at 16 B, undecided at 32 B 0.80-1.20, 64 KiB too few runs", again[0])

    def test_pass_chance_is_the_chance_that_every_size_lands_on_the_right_side(self):
        import math
        net = self.net
        # Without scatter a run lands where the true ratio is.
        still = [[1.3] * 9, [0.7] * 9]
        self.assertEqual(net.pass_chance(still, 0.99, True), (1.0, 0.0))
        self.assertEqual(net.pass_chance(still, 1.01, True)[0], 0.0)
        self.assertEqual(net.pass_chance(still, 1.01, False)[0], 1.0)
        self.assertEqual(net.pass_chance(still, 0.99, False)[0], 0.0)
        # Each size scatters evenly from -0.2 to 0.2 in its logarithm around
        # its own median. One size: a median of 9 draws lands at or under
        # the true ratio about as often as over it (5 of the 9 are ≤ 0).
        one = [math.exp(-0.2 + 0.05 * i) for i in range(9)]
        chance, sd = net.pass_chance([one], 1.0, True)
        self.assertAlmostEqual(sd, math.sqrt(0.15 / 9))
        self.assertTrue(0.5 < chance < 0.8, chance)
        # Five sizes at once: far less often, more often with a lead.
        many = [[2 * r for r in one]] * 5
        level = net.pass_chance(many, 1.0, True)[0]
        self.assertLess(level, chance / 3)
        lead10 = net.pass_chance(many, 0.9, True)[0]
        self.assertLess(level, lead10)
        self.assertLess(lead10, 1.0)
        # A lead larger than any scatter always shows.
        self.assertEqual(net.pass_chance(many, 0.8, True)[0], 1.0)
        self.assertEqual(net.pass_chance(many, 1.25, False)[0], 1.0)
        self.assertIsNone(net.pass_chance([[], []], 1.0, True))
        # From a finished run's file: the loopback table's tcp against UCX.
        by_run = {}
        for s in (8, 16):
            by_run[("ucx", "latency", s)] = {r: 10.0 for r in range(9)}
            by_run[("ours_tcp", "latency", s)] = {r: 10.0 * v for r, v in enumerate(one)}
            by_run[("ucx", "streaming", s)] = {r: (1.0, 1.0) for r in range(9)}
            by_run[("ours_tcp", "streaming", s)] = {r: (v, v) for r, v in enumerate(one)}
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "n.runs.csv")
            net.write_runs_csv(path, [("loopback", [8, 16], None, None, None, by_run)])
            lines = net.power_lines(path, leads=(1.0, 0.8))
        self.assertEqual(len(lines), 1)
        self.assertIn("loopback, ours tcp against UCX tcp, latency at 2 sizes (9 runs each): run-to-run scatter of "
                      "the paired ratio 0.13", lines[0])
        self.assertIn("1.00: %.0f%%, 0.80: 100%%" % (100 * net.pass_chance([one, one], 1.0, True)[0]), lines[0])

    def test_phase_gate_measures_a_group_again_after_a_slow_probe(self):
        net = self.net
        readings = iter([10, 10, 10, 10, 4, 3, 9, 2, None, 10, 10, 10])
        probes = []

        class R:
            def __init__(self, v):
                self.returncode = 1 if v is None else 0
                self.stdout = "" if v is None else "1048576 64 0.010000 %.3f\n" % v

        def run(cmd, **kw):
            probes.append(cmd)
            return R(next(readings))

        class Ports:
            def take(self):
                return 23999

        probe = net.PhaseProbe("/x/tcp_stream_floor", "rfbn-lo", Ports(), run)
        calls = []

        def case(se, kind, size, ports, binary):
            calls.append((se.key, kind, size))
            n = float(len(calls))
            return (n if kind == "latency" else (n, 1.0)), None

        series = [net.make_series(k, net.LOOPBACK, "ours") for k in ("ours_tcp", "rxm")]
        by_run = {}
        log = []
        lat, stream, fails = net.measure(series, [8, 16], 1, "fi_stream", log.append, None, case, by_run=by_run,
                                         probe=probe)
        self.assertEqual(probes[0], ["ip", "netns", "exec", "rfbn-lo", "/x/tcp_stream_floor", "1048576",
                                     str(64 << 20), "69", "23999"])
        # 8 B latency ran twice (the probe after the first try read 4 of a
        # best 10); the values are the second try's, which waited for a
        # probe that was not slow (3, then 9)
        self.assertEqual(calls[:4], [("ours_tcp", "latency", 8), ("rxm", "latency", 8)] * 2)
        self.assertEqual(lat["ours_tcp"][8], [3.0])
        self.assertEqual(by_run[("rxm", "latency", 8)], {0: 4.0})
        self.assertEqual(len(calls), 10)
        self.assertIn("~", "".join(log))
        self.assertEqual(probe.readings[:3], [("latency", 8, 0, 0, 10.0, 4.0, False),
                                              ("latency", 8, 0, 1, 9.0, 2.0, True),
                                              ("latency", 16, 0, 0, None, 10.0, True)])
        # the 8 B group kept its second try although its probe after read
        # slow again (2); the 16 B group waited for a probe, which failed:
        # a failed probe holds nothing back
        self.assertFalse(probe.slow(None))
        self.assertFalse(probe.slow(5.0))
        self.assertTrue(probe.slow(4.9))
        self.assertEqual(probe.readings[3], ("streaming", 8, 0, 0, 10.0, 10.0, True))
        self.assertEqual(probe.best, 10.0)
        text = probe.summary()
        self.assertIn("1 of 4 groups were", text)
        self.assertIn("1 kept a slow reading", text)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "p.csv")
            net.write_phase_csv(path, [("loopback", [8, 16], {}, [], {}, by_run, probe), ("veth", [8], {}, [])])
            with open(path) as f:
                rows = f.read().splitlines()
        self.assertEqual(rows[0], "table,kind,size,run,try,before_gbs,after_gbs,kept")
        self.assertEqual(rows[1:4], ["loopback,latency,8,1,1,10,4,0", "loopback,latency,8,1,2,9,2,1",
                                     "loopback,latency,16,1,1,,10,1"])
        self.assertEqual(len(rows), 6)

    def test_best_peer_is_the_one_with_the_best_median(self):
        net = self.net
        groups = [("ours_tcp", ["rxm", "ucx"])]
        # Ours level with two peers that take turns at being fastest: UCX
        # has the best median (10.3 µs), and ours ÷ UCX run by run is
        # 0.95, 1.04, 0.97. The best of each run (9.5, 9.6, 10.3) beats
        # ours in two runs of three.
        lat_of = {"ours_tcp": [10.0, 10.0, 10.0], "rxm": [9.5, 10.5, 10.4], "ucx": [10.5, 9.6, 10.3]}
        bw_of = {"ours_tcp": [5.0, 5.0, 5.0], "rxm": [5.2, 4.8, 4.9], "ucx": [4.7, 5.3, 4.95]}
        by_run = {}
        for k in lat_of:
            by_run[(k, "latency", 8)] = dict(enumerate(lat_of[k]))
            by_run[(k, "streaming", 8)] = {r: (v, v / 8) for r, v in enumerate(bw_of[k])}
        ratios = net.paired_ratios([8], by_run, groups)
        each = net.paired_ratios([8], by_run, groups, each_run_best=True)
        self.assertAlmostEqual(ratios[("ours_tcp", 8)][0], 10.0 / 10.3)
        self.assertAlmostEqual(each[("ours_tcp", 8)][0], 10.0 / 9.6)
        # streaming: UCX's median 4.95 is best; 5 / 4.95 against 5 / 5.2
        self.assertAlmostEqual(ratios[("ours_tcp", 8)][1], 5.0 / 4.95)
        self.assertAlmostEqual(each[("ours_tcp", 8)][1], 5.0 / 5.2)
        med = net.medians([8], {k: {8: v} for k, v in lat_of.items()},
                          {k: {8: [(x, x / 8) for x in v]} for k, v in bw_of.items()})
        line = net.targets([8], med, "ours_tcp", ["rxm", "ucx"], from_size=8, ratios=ratios, each_run=each)
        self.assertIn("latency ≤ 1.0× at every size: met", line)
        self.assertIn("streaming ≥ 1.0× from 8 B: met", line)
        self.assertIn("Against the best peer of each run instead: latency missed at 8 B; streaming missed at 8 B.", line)
        # a peer that shares no run with ours is not the best peer
        by_run[("ucx", "latency", 8)] = {5: 1.0}
        self.assertAlmostEqual(net.paired_ratios([8], by_run, groups)[("ours_tcp", 8)][0], 10.0 / 10.4)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "n.runs.csv")
            net.write_runs_csv(path, [("loopback", [8], med, groups, ratios, by_run), ("mpi", [8], med, groups)])
            with open(path) as f:
                rows = f.read().splitlines()
        self.assertEqual(rows[0], "table,series,kind,size,run,lat_us,gbs,mmsgs")
        self.assertIn("loopback,ours_tcp,latency,8,3,10,,", rows)
        self.assertIn("loopback,ucx,streaming,8,2,,5.3,0.6625", rows)
        # three runs of each series and kind, but UCX latency's one
        self.assertEqual(len(rows), 1 + 5 * 3 + 1)

    def test_mpi_markdown(self):
        res = {"ours": {("pingpong", 8): [40.0, 50.0, 60.0], ("allreduce", 8): [10.0]},
               "wheel": {("pingpong", 8): [100.0], ("allreduce", 8): [5.0]}}
        text = self.net.mpi_markdown(res, [("ours", 2, "exit 1: boom", "env X=1 mpiexec")], [8], [8], 3)
        self.assertIn("| 8 B | 50.0 | 100 | 0.50 |", text)
        self.assertIn("| 8 B | 10.0 | 5.00 | 2.0 |", text)
        self.assertIn("- ours run 2: exit 1: boom  \n  repeat: `env X=1 mpiexec`", text)

    def test_csv_and_svg(self):
        net = self.net
        sizes = [8, 16]
        med = {"ours": {8: (1.0, 0.5, 2.0), 16: (None, None, None)}, "rxm": {8: (2.0, 1.0, 1.0), 16: (3.0, 1.0, 1.0)}}
        with tempfile.TemporaryDirectory() as d:
            net.write_csv(os.path.join(d, "n.csv"), [("veth", sizes, med, [("ours", ["rxm"])])])
            with open(os.path.join(d, "n.csv")) as f:
                lines = f.read().splitlines()
            self.assertEqual(lines[0], "table,series,size,lat_us,gbs,mmsgs")
            self.assertIn("veth,ours,8,1,0.5,2", lines)
            self.assertIn("veth,ours,16,,,", lines)
            self.assertIn("veth,ratio:ours/rxm,8,0.5,0.5,2", lines)
            net.write_svg(os.path.join(d, "n.svg"), (sizes, med), None, "note")
            with open(os.path.join(d, "n.svg")) as f:
                svg = f.read()
            self.assertTrue(svg.startswith("<svg") and svg.rstrip().endswith("</svg>"))
            self.assertIn("loopback: one-way latency", svg)
            self.assertNotIn("veth", svg)


class Namespaces(unittest.TestCase):
    def test_netns_prefix(self):
        self.assertEqual(bench.netns_prefix(None), [])
        self.assertEqual(bench.netns_prefix("rfbn-a"), ["ip", "netns", "exec", "rfbn-a"])

    def test_tcp_sockets_of_a_process(self):
        import socket
        with socket.socket() as a:
            a.bind(("127.0.0.1", 0))
            a.listen(1)
            port = a.getsockname()[1]
            self.assertTrue(bench.listening(port, os.getpid()))
            self.assertTrue(bench.listening(port))
