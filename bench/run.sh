#!/bin/sh
# Benchmark of the shm and rudp providers against Debian's libfabric and UCX.
# Builds our library (make build) unless RFABRIC_BENCH_NOBUILD=1, then runs
# bench/bench.py with the given arguments (see bench/bench.py --help).
# When the build fails, the peers are still measured and our column reads n/a.
set -u
cd "$(dirname "$0")/.." || exit 1
if [ "${RFABRIC_BENCH_NOBUILD:-0}" = 1 ]; then
	exec python3 bench/bench.py "$@"
fi
if ${MAKE:-make} build >build-bench.log 2>&1; then
	rm -f build-bench.log
	exec python3 bench/bench.py "$@"
fi
echo "make build failed (see build-bench.log); measuring the peers only" >&2
exec python3 bench/bench.py --ours-error "make build failed, see build-bench.log" "$@"
