"""More MPI ranks than cores: bench/mpi_oversub.c under the MPICH wheel, on
our library and on the wheel's own libfabric (both with provider shm).

Each run starts `mpiexec -n RANKS` pinned with taskset to two CPUs, with
MPIR_CVAR_CH4_NETMOD=ofi and MPIR_CVAR_NOLOCAL=1 so every message goes
through libfabric. The two libraries alternate run by run, so a change in
the machine's load hits both. Reported per phase: the median of the runs'
times; for the whole run: the median wall time and the median CPU time
(user and system) of all the processes, from the children's rusage.

Used by bench.py (its last table); also runs alone:
    python3 bench/mpi_oversub.py [--reps N] [--ranks 3,4] [--ours-libdir DIR]
"""

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time

CPUS = 2
RUN_TIMEOUT = 300


def venv_dir(repo):
    return os.environ.get("MPICH_VENV", os.path.join(repo, ".venv"))


def missing(repo):
    """Why this benchmark cannot run here, or None."""
    venv = venv_dir(repo)
    for tool in ("mpicc", "mpiexec"):
        if not os.access(os.path.join(venv, "bin", tool), os.X_OK):
            return "the MPICH wheel in %s (python3 -m venv .venv && .venv/bin/pip install mpich)" % venv
    if not os.path.exists(os.path.join(venv, "lib", "mpich", "libfabric.so.1")):
        return "the wheel's bundled libfabric.so.1 in %s/lib/mpich" % venv
    if len(os.sched_getaffinity(0)) < CPUS:
        return "%d CPUs" % CPUS
    return None


def build(repo, outdir):
    os.makedirs(outdir, exist_ok=True)
    exe = os.path.join(outdir, "mpi_oversub")
    cc = os.path.join(venv_dir(repo), "bin", "mpicc")
    r = subprocess.run([cc, "-O2", "-Wall", "-Wextra", "-Werror", "-o", exe,
                        os.path.join(repo, "bench", "mpi_oversub.c")],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("mpicc failed: " + r.stderr.strip()[-400:])
    return exe


def parse(out):
    """{phase: seconds} from the program's 'phase NAME SECONDS' lines."""
    phases = {}
    for line in out.splitlines():
        f = line.split()
        if len(f) == 3 and f[0] == "phase":
            phases[f[1]] = float(f[2])
    if "total" not in phases:
        raise ValueError("no 'phase total' line")
    return phases


def run_once(repo, exe, ranks, libdir, scale):
    """One run: ({phase: s}, wall s, user s, sys s). libdir None = the
    wheel's own libfabric."""
    env = dict(os.environ, MPIR_CVAR_CH4_NETMOD="ofi", MPIR_CVAR_NOLOCAL="1", FI_PROVIDER="shm")
    env.pop("LD_LIBRARY_PATH", None)
    if libdir:
        env["LD_LIBRARY_PATH"] = libdir
    cpus = ",".join(str(c) for c in sorted(os.sched_getaffinity(0))[:CPUS])
    cmd = ["taskset", "-c", cpus, os.path.join(venv_dir(repo), "bin", "mpiexec"),
           "-n", str(ranks), exe, str(scale)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if r.returncode != 0:
        raise RuntimeError("exit %d: %s" % (r.returncode, (r.stderr or r.stdout).strip()[-300:]))
    return parse(r.stdout), wall, after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime


def measure(repo, ours_libdir, ranks_list, reps, scale, log):
    """{ranks: {lib: [runs]}} and errors; lib in ("ours", "wheel")."""
    exe = build(repo, os.path.join(repo, "build", "bench"))
    results, errors = {}, []
    for ranks in ranks_list:
        results[ranks] = {"ours": [], "wheel": []}
        for rep in range(reps):
            order = ("ours", "wheel") if rep % 2 == 0 else ("wheel", "ours")
            for lib in order:
                log("mpi %d ranks on %d CPUs, %s, run %d/%d\n" % (ranks, CPUS, lib, rep + 1, reps))
                try:
                    results[ranks][lib].append(
                        run_once(repo, exe, ranks, ours_libdir if lib == "ours" else None, scale))
                except (RuntimeError, ValueError, subprocess.TimeoutExpired) as e:
                    errors.append("mpi %d ranks, %s, run %d: %s" % (ranks, lib, rep + 1, e))
    return results, errors


def summarize(runs):
    """Medians of a list of runs: ({phase: s}, wall, user, sys), or None."""
    if not runs:
        return None
    phases = {}
    for p in runs[0][0]:
        vals = [r[0][p] for r in runs if p in r[0]]
        phases[p] = statistics.median(vals)
    return (phases, statistics.median(r[1] for r in runs), statistics.median(r[2] for r in runs),
            statistics.median(r[3] for r in runs))


def fmt(v, digits=3):
    return "n/a" if v is None else "%.*f" % (digits, v)


def markdown(results, errors, reps, scale):
    out = ["More ranks than cores: bench/mpi_oversub.c (scale %d) under the MPICH wheel, "
           "ranks pinned to %d CPUs, provider shm; ours against the wheel's own libfabric; "
           "median of %d run%s each, alternating; seconds, lower is better; "
           "ratio = ours ÷ wheel, target ≤ 1.0" % (scale, CPUS, reps, "s" if reps > 1 else ""), ""]
    for ranks, by_lib in results.items():
        ours, wheel = summarize(by_lib["ours"]), summarize(by_lib["wheel"])
        out.append("%d ranks on %d CPUs" % (ranks, CPUS))
        out.append("")
        out.append("| phase | ours s | wheel s | ours÷wheel |")
        out.append("|---|---:|---:|---:|")
        names = list((ours or wheel or ({},))[0].keys())
        rows = [(p, ours[0].get(p) if ours else None, wheel[0].get(p) if wheel else None) for p in names]
        if ours or wheel:
            rows.append(("wall (mpiexec)", ours[1] if ours else None, wheel[1] if wheel else None))
            rows.append(("CPU user", ours[2] if ours else None, wheel[2] if wheel else None))
            rows.append(("CPU system", ours[3] if ours else None, wheel[3] if wheel else None))
        for name, o, w in rows:
            ratio = o / w if o is not None and w else None
            out.append("| %s | %s | %s | %s |" % (name, fmt(o), fmt(w), fmt(ratio, 2)))
        out.append("")
    if errors:
        out.append("Failed runs (left out of the medians):")
        out.append("")
        out += ["- " + e for e in errors]
        out.append("")
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--ranks", default="3,4", help="comma-separated rank counts (3,4)")
    ap.add_argument("--scale", type=int, default=1, help="multiplies every phase's iterations")
    ap.add_argument("--ours-libdir", default="build/lib")
    args = ap.parse_args()
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    why = missing(repo)
    if why:
        print("not measured: needs " + why, file=sys.stderr)
        return 1
    ranks = [int(x) for x in args.ranks.split(",")]
    results, errors = measure(repo, os.path.abspath(args.ours_libdir), ranks, args.reps, args.scale,
                              lambda s: (sys.stderr.write(s), sys.stderr.flush()))
    sys.stdout.write(markdown(results, errors, args.reps, args.scale))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
