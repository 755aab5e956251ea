#!/bin/sh
# The peer-death campaign: build tests/c/shm_peer_death.c against our
# headers (-Wall -Wextra -Werror, ASan and UBSan) and run it on the library
# in LIBDIR three times:
#   1. every case, cross-memory attach (FI_SHM_CMA=1: unset, the provider
#      chooses by how fast CMA is on the machine, and the cases must know);
#   2. every case, bounce buffers only (FI_SHM_CMA=0);
#   3. FI_SHM_PEER_CHECK_MS=3000 on the cases whose errors come from the
#      liveness checks: no error before 3 s, every error within 3 s plus
#      the slack (the setting is honoured).
# PEER_DEATH_REPS repetitions per case (default 2; make check-peer-death
# runs 20), PEER_DEATH_CASES a comma-separated list of cases for runs 1 and
# 2 (default: every case). ASan's quarantine is kept at 4 MiB so that VmRSS
# over the repetitions measures the library, not the quarantine filling.
set -eu
lib=$(cd "${1:?usage: shm_peer_death.sh LIBDIR}" && pwd)
cd "$(dirname "$0")/../.."
. tests/c/check_mode.sh
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cc -std=c11 -Wall -Wextra -Werror -Iinclude $SAN_CFLAGS \
	-o "$tmp/shm_peer_death" tests/c/shm_peer_death.c -L"$lib" -l:libfabric.so.1 -Wl,-rpath,"$lib" -lpthread
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:quarantine_size_mb=4}
cma_cases=${PEER_DEATH_CASES:-}
if [ "$RF_CHECK" = valgrind ]; then
	export PEER_DEATH_SLACK_MS=${PEER_DEATH_SLACK_MS:-20000}
	# valgrind runs one thread at a time: a watcher thread cannot see a
	# cross-memory copy under way, so with CMA only the stages reached
	# without one (bounce buffers: all of them)
	cma_cases=${cma_cases:-eager-ring-full,eager-blocked,eager-stream,rts-unmatched,rts-dead,rma-idle,atomics-cut,target-replies-queued,backlog}
fi
limit=$((300 + 60 * ${PEER_DEATH_REPS:-2}))
echo "--- FI_SHM_CMA=1"
FI_SHM_CMA=1 PEER_DEATH_CASES=$cma_cases rf_run $limit "$tmp/shm_peer_death"
echo "--- FI_SHM_CMA=0"
FI_SHM_CMA=0 rf_run $limit "$tmp/shm_peer_death"
echo "--- FI_SHM_PEER_CHECK_MS=3000"
FI_SHM_CMA=1 FI_SHM_PEER_CHECK_MS=3000 PEER_DEATH_REPS=1 PEER_DEATH_CASES=eager-ring-full,rts-unmatched,rma-idle,backlog \
	rf_run 300 "$tmp/shm_peer_death"
