#!/usr/bin/env python3
"""What the network benchmark's ratio cells read for a library that is
exactly level with its peers: ours and two peers whose values in each run
are drawn from one distribution (normal, mean 1, a relative spread of
SPREAD), RUNS runs per cell, TRIALS cells. Two readings of "ours ÷ the
best peer" (bench/net.py, paired_ratios):

  each run's best   the median over runs of ours ÷ the best of the peers'
                    values in that run (the benchmark before c92004c);
  best median       the median over runs of ours ÷ the peer whose median
                    over the runs is best (since c92004c).

For each it prints the median cell and how often a cell meets a "≥ 1.0"
target (a rate; for a latency cell's "≤ 1.0" the picture is the same).

    python3 bench/ratio_bias.py [TRIALS]
"""

import random
import statistics
import sys


def cell(rng, runs, spread):
    ours = [rng.gauss(1.0, spread) for _ in range(runs)]
    peers = [[rng.gauss(1.0, spread) for _ in range(runs)] for _ in range(2)]
    each_run = statistics.median(ours[r] / max(p[r] for p in peers) for r in range(runs))
    best = max(peers, key=statistics.median)
    best_median = statistics.median(ours[r] / best[r] for r in range(runs))
    return each_run, best_median


def main():
    trials = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    rng = random.Random(1)
    print("| spread | runs | each run's best: median, meets ≥ 1.0 | best median: median, meets ≥ 1.0 |")
    print("|---:|---:|---:|---:|")
    for spread in (0.04, 0.08):
        for runs in (5, 9):
            cells = [cell(rng, runs, spread) for _ in range(trials)]
            a = [c[0] for c in cells]
            b = [c[1] for c in cells]
            print("| %d%% | %d | %.3f, %.0f%% | %.3f, %.0f%% |" % (
                spread * 100, runs, statistics.median(a), 100.0 * sum(x >= 1 for x in a) / trials,
                statistics.median(b), 100.0 * sum(x >= 1 for x in b) / trials))


if __name__ == "__main__":
    main()
