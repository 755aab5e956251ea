#!/bin/bash
# MPICH (the PyPI wheel, ch4 device, ofi netmod) over the shm provider:
# tests/mpi/p2p_coll_rma.c on 4 ranks, twice; then tests/mpi/mcs_lock.c (an
# MCS lock on one-sided atomics) on 3 ranks of ours beside busy processes.
#   control  the wheel's own bundled libfabric (nothing changed)
#   ours     LIBDIR/libfabric.so.1, put first through LD_LIBRARY_PATH
#
# libmpi.so.12 needs libfabric.so.1 and carries RUNPATH $ORIGIN:$ORIGIN/mpich,
# where the wheel keeps its own copy. The loader searches LD_LIBRARY_PATH
# before RUNPATH, so setting it is enough; each run checks, with
# LD_DEBUG=libs, which file every rank actually initialised.
#
# MPIR_CVAR_NOLOCAL=1 keeps MPICH from using its own shared-memory path
# between ranks of one node, so every message goes through libfabric;
# MPIR_CVAR_DEBUG_SUMMARY=1 makes rank 0 print the provider it chose, which
# must be shm. Hydra needs no flag to run as root.
#
# With --dl DLDIR the second run is instead
#   dl       the wheel's own libfabric (upstream 2.5), nothing of ours but
#            our shm as a DL provider (DLDIR/librfshm-fi.so, FI_PROVIDER_PATH),
#            chosen with FI_PROVIDER=rfshm
#
# Usage: tests/mpi/run_mpich.sh LIBDIR
#        tests/mpi/run_mpich.sh --dl DLDIR
#   MPICH_VENV   the venv holding the wheel (default: .venv in the repo root)
#   MPI_TIMEOUT  seconds allowed per run (default 300)
#   OURS_PROV    the provider of the runs on ours (default shm; rudp runs the
#                network provider over loopback)
#   CONTROL_PROV the provider of the control run on the wheel's libfabric
#                (default shm; tcp beside OURS_PROV=rudp)
# Prints "N passed, N failed" over both runs; exits non-zero on a failure.
#
# /dev/shm: run as root, the script runs itself again in a mount namespace
# of its own with a fresh tmpfs on /dev/shm (tests/mpi/private_shm.sh), as
# tests/mpi/run_soak.sh does. The wheel's upstream shm provider leaves its
# files behind when a rank dies (its truncation run below crashes): seen on
# a machine with 511 such files left by earlier runs, where two control
# ranks were given pids that named two, and the run crashed.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/tests/mpi/private_shm.sh"
private_shm MPICH_IN_NAMESPACE "$root/tests/mpi/run_mpich.sh" "$@"
[ -n "${MPICH_IN_NAMESPACE:-}" ] && echo "--- /dev/shm: a tmpfs of this run's own mount namespace"
. "$root/tests/c/rudp_paths.sh"
dl=""
if [ "${1:-}" = --dl ]; then
	dl=$(cd "${2:?usage: run_mpich.sh --dl DLDIR}" && pwd) || { echo "0 passed, 1 failed"; exit 1; }
	lib=$dl
else
	lib=$(cd "${1:?usage: run_mpich.sh LIBDIR}" && pwd) || { echo "0 passed, 1 failed"; exit 1; }
fi
venv=${MPICH_VENV:-$root/.venv}
limit=${MPI_TIMEOUT:-300}
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "PASS $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; }
finish() { echo "mpich: $pass passed, $fail failed"; [ "$fail" -eq 0 ]; exit $?; }

if [ -n "$dl" ]; then
	[ -e "$dl/librfshm-fi.so" ] || { bad "no librfshm-fi.so in $dl (make dl)"; finish; }
else
	[ -e "$lib/libfabric.so.1" ] || { bad "no libfabric.so.1 in $lib"; finish; }
fi
for t in mpicc mpiexec; do
	[ -x "$venv/bin/$t" ] || { bad "no $venv/bin/$t (python3 -m venv .venv && .venv/bin/pip install mpich)"; finish; }
done
# the wheel's own libfabric, next to libmpi.so.12
wheel_fab=$(cd "$venv/lib/mpich" 2>/dev/null && pwd)/libfabric.so.1
[ -e "$wheel_fab" ] || { bad "the wheel has no bundled $wheel_fab"; finish; }

out=$root/build/tests
logs=$root/build/test-logs
mkdir -p "$out" "$logs"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
prog=$out/p2p_coll_rma
if "$venv/bin/mpicc" -O2 -Wall -Wextra -Werror -o "$prog" "$root/tests/mpi/p2p_coll_rma.c" 2>"$tmp/cc"; then
	ok "p2p_coll_rma.c builds with the wheel's mpicc, -Wall -Wextra -Werror"
else
	bad "p2p_coll_rma.c does not build:"; sed 's/^/  /' "$tmp/cc"; finish
fi

# mpirun NAME LOG ARGS...: the program on 4 ranks through ofi/$PROV (shm
# unless the caller exported another), with the caller's extra environment
# (exported before the call) and a time limit.
mpirun() {
	local log=$1; shift
	MPIR_CVAR_CH4_NETMOD=ofi MPIR_CVAR_NOLOCAL=1 FI_PROVIDER=${PROV:-shm} \
		timeout -k 10 "$limit" "$venv/bin/mpiexec" -n 4 "$prog" "$@" >"$log" 2>&1
}

# which_fab PREFIX: the libfabric.so.1 files initialised by the rank
# processes whose LD_DEBUG output went to PREFIX.<pid>, one line each.
which_fab() {
	cat "$1".* 2>/dev/null | sed -n 's/.*calling init: \(.*libfabric\.so\.1\)$/\1/p' | sort | uniq -c
}

# run NAME EXPECTED_LIB [LD_LIBRARY_PATH [PROVIDER DLDIR]]
run() {
	local name=$1 want=$2 llp=${3:-} prov=${4:-shm} pdir=${5:-} log=$logs/mpich-$1.log rc
	echo "--- $name: libfabric from $want, provider $prov${pdir:+ from $pdir}"
	(
		[ -n "$llp" ] && export LD_LIBRARY_PATH=$llp
		[ -n "$pdir" ] && export FI_PROVIDER_PATH=$pdir
		export LD_DEBUG=libs LD_DEBUG_OUTPUT=$tmp/ld.$name MPIR_CVAR_DEBUG_SUMMARY=1 FI_LOG_LEVEL=warn PROV=$prov
		# rudp's close lines tell which path carried the traffic
		[ "$prov" = rudp ] && export FI_LOG_LEVEL=info
		mpirun "$log"
	)
	rc=$?
	loaded=$(which_fab "$tmp/ld.$name")
	nwant=$(echo "$loaded" | awk -v w="$want" '$2 == w {print $1}')
	nother=$(echo "$loaded" | awk -v w="$want" 'NF == 2 && $2 != w' | wc -l)
	# a rank killed early (another rank's abort) may leave no record, so
	# at least one rank and no rank with another copy
	if [ "${nwant:-0}" -ge 1 ] && [ "$nother" -eq 0 ]; then
		ok "$name: ${nwant} of 4 ranks initialised $want, none another copy"
	else
		bad "$name: ranks loaded: $(echo $loaded)"
	fi
	if [ -n "$pdir" ]; then
		nprov=$(cat "$tmp/ld.$name".* 2>/dev/null | grep -c "calling init: $pdir/lib$prov-fi.so$")
		if [ "$nprov" -ge 1 ]; then
			ok "$name: $nprov of 4 ranks initialised $pdir/lib$prov-fi.so"
		else
			bad "$name: no rank initialised $pdir/lib$prov-fi.so"
		fi
	fi
	if grep -q "^libfabric provider: $prov\( \|$\)" "$log"; then
		ok "$name: MPICH chose the ofi netmod with provider $prov: $(grep -m1 '^libfabric provider:' "$log")"
	else
		bad "$name: no 'libfabric provider: $prov' in the debug summary"
	fi
	if [ "$prov" = rudp ]; then
		# ranks of one host: through shared memory unless it is turned off
		set -- $(rudp_sent "$log")
		case ${FI_RUDP_ENABLE_SHM:-1} in
		0|no|false|off) want_path=udp ;;
		*) want_path=shm ;;
		esac
		if [ "$3" -gt 0 ] && { { [ $want_path = shm ] && [ "$1" -eq 0 ] && [ "$2" -gt 0 ]; } || { [ $want_path = udp ] && [ "$1" -gt 0 ] && [ "$2" -eq 0 ]; }; }; then
			ok "$name: rudp between the ranks through $want_path: $2 shared-memory packets, $1 UDP datagrams ($3 endpoints closed)"
		else
			bad "$name: rudp between the ranks not through $want_path: $2 shared-memory packets, $1 UDP datagrams ($3 endpoints closed)"
		fi
	fi
	summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$log" | tail -1)
	last=$(grep '^== ' "$log" | tail -1)
	if [ $rc -eq 0 ] && [ -n "$summary" ] && [ "${summary#* passed, }" = "0 failed" ] && [ "${summary%% *}" -gt 0 ]; then
		ok "$name: p2p_coll_rma on 4 ranks: $summary"
		eval "count_$name=${summary%% *}"
	else
		case $rc in
		124|137) why="timed out after ${limit}s" ;;
		*) why="exit status $rc" ;;
		esac
		bad "$name: p2p_coll_rma $why; last section '${last#== }'; ${summary:-no summary}"
		[ -s "$log" ] || echo "  (the run left no output)"
		grep -E ' FAIL |: request [0-9]+ \(|Fatal error|OFI call|<warn>|<crit>|Abort' "$log" | sed 's/Abort([0-9]*)/Abort(..)/' | sort | uniq -c | sort -rn | head -n 15 | sed 's/^/  /'
		echo "  (full output: $log)"
	fi
}

run control "$wheel_fab" "" "${CONTROL_PROV:-shm}"
if [ -n "$dl" ]; then
	second=dl
	run dl "$wheel_fab" "" rfshm "$dl"
else
	second=ours
	run ours "$lib/libfabric.so.1" "$lib" "${OURS_PROV:-shm}"
fi
eval "count_second=\${count_$second:-}"
if [ -n "${count_control:-}" ] && [ -n "$count_second" ]; then
	[ "$count_control" -eq "$count_second" ] && ok "both runs made the same $count_second checks" \
		|| bad "control made $count_control checks, $second $count_second"
fi

# When run (2) failed, one rank alone shows why fi_getinfo refused (the
# matching rules log each refusal at info level).
if [ -z "$dl" ] && [ -z "${count_ours:-}" ]; then
	echo "--- ours: fi_getinfo refusals seen by one rank (FI_LOG_LEVEL=info)"
	LD_LIBRARY_PATH=$lib FI_LOG_LEVEL=info MPIR_CVAR_CH4_NETMOD=ofi MPIR_CVAR_NOLOCAL=1 FI_PROVIDER=${OURS_PROV:-shm} \
		timeout -k 5 30 "$venv/bin/mpiexec" -n 1 "$prog" >"$tmp/diag" 2>&1
	grep -E '<(info|warn)>.*(requested|unsupported|cannot|refus|fail)|OFI call' "$tmp/diag" | sed 's/^libfabric:[0-9]*:[0-9]*::/  /' | sort -u | head -n 20
fi

# Truncation of messages over the inline size (--only-truncation: 1100 B
# and 1 MiB into 1 KiB). Counted for our library only: the wheel's bundled
# upstream shm provider (2.5.1) crashes or hangs on it, shown for reference.
for name in control $second; do
	log=$logs/mpich-$name-trunc.log
	(
		[ $name = control ] && export PROV=${CONTROL_PROV:-shm}
		[ $name = ours ] && export LD_LIBRARY_PATH=$lib PROV=${OURS_PROV:-shm}
		[ $name = dl ] && export FI_PROVIDER_PATH=$dl PROV=rfshm
		export FI_LOG_LEVEL=warn limit=60
		mpirun "$log" --only-truncation
	)
	rc=$?
	summary=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$log" | tail -1)
	if [ $rc -eq 0 ] && [ "${summary#* passed, }" = "0 failed" ]; then
		res="passes ($summary)"
	else
		res="fails (exit status $rc; ${summary:-no summary}; $(grep -m1 -E 'FAIL|<warn>' "$log" | cut -c1-120))"
	fi
	if [ $name = control ]; then
		echo "INFO control: truncation over the inline size $res"
	elif [ $rc -eq 0 ] && [ "${summary#* passed, }" = "0 failed" ]; then
		ok "$name: truncation over the inline size $res"
	else
		bad "$name: truncation over the inline size $res"
	fi
done
# An MCS lock on MPI one-sided atomics (tests/mpi/mcs_lock.c), 3 ranks on
# our provider, with one busy process per core beside them: the ranks spin
# on their own window memory while their predecessor hands the lock over.
# Mutual exclusion is checked by a counter; a hang shows as the time limit.
# With --dl the ranks load the wheel's libfabric and our rfshm from DLDIR
# (the library's own shm is upstream's, which this test does not judge).
mcs=$out/mcs_lock
if "$venv/bin/mpicc" -O2 -Wall -Wextra -Werror -o "$mcs" "$root/tests/mpi/mcs_lock.c" 2>"$tmp/cc"; then
	busy=""
	for _ in $(seq "$(nproc)"); do
		timeout "$limit" sh -c 'while :; do :; done' & busy="$busy $!"
	done
	log=$logs/mpich-mcs-lock.log
	(
		if [ -n "$dl" ]; then
			export FI_PROVIDER_PATH=$dl FI_PROVIDER=rfshm
		else
			export LD_LIBRARY_PATH=$lib FI_PROVIDER=${OURS_PROV:-shm}
		fi
		export LD_DEBUG=libs LD_DEBUG_OUTPUT=$tmp/ld.mcs
		MPIR_CVAR_CH4_NETMOD=ofi MPIR_CVAR_NOLOCAL=1 MPIR_CVAR_DEBUG_SUMMARY=1 FI_LOG_LEVEL=warn \
			timeout -k 10 "$limit" "$venv/bin/mpiexec" -n 3 "$mcs" "${MCS_ITERS:-500}" >"$log" 2>&1
	)
	rc=$?
	kill $busy 2>/dev/null; wait $busy 2>/dev/null
	if [ -n "$dl" ]; then
		want_prov=rfshm want_so=$dl/librfshm-fi.so
	else
		want_prov=${OURS_PROV:-shm} want_so=$lib/libfabric.so.1
	fi
	# the ranks must have run on ours: a rank that initialised our file,
	# and MPICH's summary naming the provider
	nours=$(cat "$tmp/ld.mcs".* 2>/dev/null | grep -c "calling init: $want_so$")
	summary=$(grep -E '^mcs_lock: [0-9]+ passed, [0-9]+ failed$' "$log" | tail -1)
	if [ "$nours" -lt 1 ] || ! grep -q "^libfabric provider: $want_prov\( \|$\)" "$log"; then
		bad "${second}: MCS lock did not run on $want_so with provider $want_prov ($nours ranks initialised it; $(grep -m1 '^libfabric provider:' "$log"); exit status $rc; full output: $log)"
	elif [ $rc -eq 0 ] && [ "$summary" = "mcs_lock: 1 passed, 0 failed" ]; then
		ok "${second}: MCS lock on one-sided atomics through $want_prov, 3 ranks beside $(nproc) busy processes: $(grep -m1 acquisitions "$log")"
	else
		bad "${second}: MCS lock under load through $want_prov: exit status $rc; ${summary:-no summary} (full output: $log)"
	fi
else
	bad "mcs_lock.c does not build:"; sed 's/^/  /' "$tmp/cc"
fi
finish
