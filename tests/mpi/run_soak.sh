#!/bin/bash
# The MPICH soak: tests/mpi/soak.c on 4 ranks of the MPICH wheel for
# SECONDS, every message and one-sided result checked, each rank's VmRSS and
# descriptor count flat after warm-up, no /dev/shm entry left behind.
#   ours     LIBDIR/libfabric.so.1, put first through LD_LIBRARY_PATH
#   control  (with --control, first) the wheel's own bundled libfabric
# Both through MPIR_CVAR_CH4_NETMOD=ofi MPIR_CVAR_NOLOCAL=1 FI_PROVIDER=shm,
# as tests/mpi/run_mpich.sh runs them; every rank prints the libfabric.so.1
# that holds its fi_getinfo, and MPICH must report provider shm.
#
# /dev/shm: run as root, the script runs itself again in a mount namespace
# of its own with a fresh tmpfs on /dev/shm (what /tmp/privshm.sh-style
# wrappers do), so other jobs' files neither count nor get in the way, and
# every entry there after a run is a leftover. Where that is not possible
# (not root, no unshare) it compares the listings before and after each run
# and counts as leftovers the new entries that name a rank's pid
# (rfabric-shm.PID.*, upstream shm's PID:*) or MPICH's own mpich_shm_*;
# other new entries are listed as someone else's.
#
# Usage: tests/mpi/run_soak.sh [--control] LIBDIR [SECONDS]
#   SECONDS      default $SOAK_SECONDS, else 600
#   MPICH_VENV   the venv holding the wheel (default: .venv in the repo root)
#   SOAK_SEED    replay a seed (see soak.c for the other SOAK_* settings)
# Prints "soak: N passed, N failed"; exits non-zero on a failure. Logs:
# build/test-logs/soak-ours.log, soak-control.log.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
self=$root/tests/mpi/run_soak.sh

. "$root/tests/mpi/private_shm.sh"
private_shm SOAK_IN_NAMESPACE "$self" "$@"

control=""
[ "${1:-}" = --control ] && { control=1; shift; }
lib=$(cd "${1:?usage: run_soak.sh [--control] LIBDIR [SECONDS]}" && pwd) || { echo "soak: 0 passed, 1 failed"; exit 1; }
seconds=${2:-${SOAK_SECONDS:-600}}
venv=${MPICH_VENV:-$root/.venv}
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "PASS $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; }
finish() { echo "soak: $pass passed, $fail failed"; [ "$fail" -eq 0 ]; exit $?; }

if [ -n "${SOAK_IN_NAMESPACE:-}" ]; then
	echo "--- /dev/shm: a tmpfs of this run's own mount namespace"
	private=1
else
	echo "--- /dev/shm: shared with other processes (not root or no unshare); counting new entries by pid"
	private=""
fi
[ -e "$lib/libfabric.so.1" ] || { bad "no libfabric.so.1 in $lib"; finish; }
for t in mpicc mpiexec; do
	[ -x "$venv/bin/$t" ] || { bad "no $venv/bin/$t (python3 -m venv .venv && .venv/bin/pip install mpich)"; finish; }
done
wheel_fab=$(cd "$venv/lib/mpich" 2>/dev/null && pwd)/libfabric.so.1
[ -e "$wheel_fab" ] || { bad "the wheel has no bundled $wheel_fab"; finish; }

out=$root/build/tests
logs=$root/build/test-logs
mkdir -p "$out" "$logs"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
prog=$out/soak
if "$venv/bin/mpicc" -O2 -Wall -Wextra -Werror -o "$prog" "$root/tests/mpi/soak.c" 2>"$tmp/cc"; then
	ok "soak.c builds with the wheel's mpicc, -Wall -Wextra -Werror"
else
	bad "soak.c does not build:"; sed 's/^/  /' "$tmp/cc"; finish
fi

# soak NAME EXPECTED_LIB [LD_LIBRARY_PATH]
soak() {
	local name=$1 want=$2 llp=${3:-} log=$logs/soak-$1.log rc
	echo "--- $name: libfabric from $want, $seconds s"
	ls -A /dev/shm | sort >"$tmp/shm-before"
	(
		[ -n "$llp" ] && export LD_LIBRARY_PATH=$llp
		# MPICH's active messages (which its one-sided operations use)
		# arrive in NUM_AM_BUFFERS FI_MULTI_RECV buffers of
		# MULTIRECV_BUFFER_SIZE, 8 x 2 MiB by default, which the provider
		# fills front to back: their pages are touched for the first time
		# over thousands of rounds, about 1.4 KiB a round on either
		# library, VmRSS rising until all 16 MiB are in (a high-water mark,
		# not a leak). 8 x 64 KiB are all touched within the first minute,
		# and the buffers are released and reposted 32 times as often.
		export MPIR_CVAR_CH4_OFI_NUM_AM_BUFFERS=${MPIR_CVAR_CH4_OFI_NUM_AM_BUFFERS:-8}
		export MPIR_CVAR_CH4_OFI_MULTIRECV_BUFFER_SIZE=${MPIR_CVAR_CH4_OFI_MULTIRECV_BUFFER_SIZE:-65536}
		# a round may take SOAK_ROUND_LIMIT (120 s) before a rank reports
		# a hang; start-up and the end of the run take seconds
		MPIR_CVAR_CH4_NETMOD=ofi MPIR_CVAR_NOLOCAL=1 FI_PROVIDER=shm MPIR_CVAR_DEBUG_SUMMARY=1 FI_LOG_LEVEL=warn \
			timeout -k 10 $((seconds + 240)) "$venv/bin/mpiexec" -n 4 "$prog" "$seconds" >"$log" 2>&1
	)
	rc=$?
	ls -A /dev/shm | sort >"$tmp/shm-after"
	grep -E '^(soak|rank [0-9]+: pid )' "$log" | head -n 60 | sed 's/^/  /'

	local libs nwant
	libs=$(sed -n 's/^rank [0-9]*: pid [0-9]*, seed [0-9]*, libfabric //p' "$log" | sort | uniq -c)
	nwant=$(echo "$libs" | awk -v w="$want" '$2 == w {print $1}')
	if [ "${nwant:-0}" -eq 4 ] && [ "$(echo "$libs" | wc -l)" -eq 1 ]; then
		ok "$name: the 4 ranks use $want"
	else
		bad "$name: the ranks use: $(echo $libs)"
	fi
	if grep -q '^libfabric provider: shm\( \|$\)' "$log"; then
		ok "$name: MPICH chose the ofi netmod with provider shm"
	else
		bad "$name: no 'libfabric provider: shm' in the debug summary"
	fi
	summary=$(grep -E '^soak: (PASS|FAIL) ' "$log" | tail -1)
	if [ $rc -eq 0 ] && [ "${summary#soak: PASS }" != "$summary" ]; then
		ok "$name: ${summary#soak: }"
	else
		case $rc in
		124|137) why="killed after $((seconds + 240)) s" ;;
		3) why="a rank saw no progress for a round's time limit" ;;
		*) why="exit status $rc" ;;
		esac
		bad "$name: $why; ${summary:-no summary} (full output: $log)"
	fi
	# entries created during the run and still there
	comm -13 "$tmp/shm-before" "$tmp/shm-after" >"$tmp/shm-new"
	local pids left other
	pids=$(sed -n 's/^rank [0-9]*: pid \([0-9]*\),.*/\1/p' "$log" | tr '\n' ' ')
	if [ -n "$private" ]; then
		left=$(cat "$tmp/shm-new")
		other=""
	else
		left="" other=""
		while read -r e; do
			[ -n "$e" ] || continue
			mine=""
			for p in $pids; do
				case $e in rfabric-shm.$p.*|$p:*) mine=1 ;; esac
			done
			case $e in mpich_shm_*) mine=1 ;; esac
			if [ -n "$mine" ]; then left="$left $e"; else other="$other $e"; fi
		done <"$tmp/shm-new"
	fi
	[ -n "$other" ] && echo "INFO $name: new /dev/shm entries of other processes:$(echo $other | head -c 300)"
	if [ -z "$(echo $left)" ]; then
		ok "$name: /dev/shm: $(wc -l <"$tmp/shm-before") entries before, $(wc -l <"$tmp/shm-after") after, none of the run's left behind"
	else
		bad "$name: /dev/shm entries left behind: $(echo $left | head -c 300)"
	fi
}

[ -n "$control" ] && soak control "$wheel_fab"
soak ours "$lib/libfabric.so.1" "$lib"
finish
