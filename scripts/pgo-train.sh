#!/bin/sh
# The training runs behind pgo/ (make pgo-profile): the workloads whose
# counts steer the profile-guided build of libfabric.so.1. Each is a pair
# of processes on 127.0.0.1 through the C API: Debian's fi_pingpong (every
# size from 1 B to 8 MiB, untagged and tagged, RDM and tcp's MSG) and
# bench/fi_stream (a window of 16 sends, four sizes) on shm, rudp (through
# shared memory, its default on one host, and through UDP) and tcp, then
# fi_info. Paths that cannot run here (verbs, efa) take no part; the
# profile is merged sparse, so they are compiled as without one.
#
# Usage: scripts/pgo-train.sh LIBDIR
#   LIBDIR holds the instrumented libfabric.so.1; LLVM_PROFILE_FILE names
#   where its counts go. Run as root, it runs in a network namespace of its
#   own (unshare --net), so its fixed ports meet nothing else.
set -eu
lib=$1
root=$(cd "$(dirname "$0")/.." && pwd)
if [ "$(id -u)" = 0 ] && [ -z "${RF_PGO_NETNS:-}" ] && unshare --net true 2>/dev/null; then
	exec unshare --net sh -c 'ip link set lo up && RF_PGO_NETNS=1 exec "$0" "$@"' "$0" "$@"
fi
command -v fi_pingpong >/dev/null || { echo "pgo-train.sh: needs fi_pingpong (apt-get install libfabric-bin)" >&2; exit 1; }
out=$root/build/pgo
mkdir -p "$out"
${CC:-cc} -O2 -I"$root/include" -o "$out/fi_stream" "$root/bench/fi_stream.c" -L"$lib" -l:libfabric.so.1

export LD_LIBRARY_PATH=$lib FI_TCP_IFACE=lo FI_RUDP_IFACE=lo
port=30100
failed=0

# pair SERVER-ARGS... -- CLIENT-ARGS...: both sides of one run on $port;
# the server starts first, the client retries inside its own connect.
pair() {
	srv=""
	while [ "$1" != "--" ]; do srv="$srv $1"; shift; done
	shift
	# shellcheck disable=SC2086
	timeout 120 $srv >/dev/null 2>&1 &
	spid=$!
	sleep 0.3
	if ! timeout 120 "$@" >/dev/null 2>&1; then
		echo "pgo-train.sh: failed: $*" >&2
		failed=1
	fi
	wait "$spid" || { echo "pgo-train.sh: server failed:$srv" >&2; failed=1; }
}

pingpong() { # PROVIDER EP MODE ITERS [ENV=V]
	e=${5:-RF_PGO=1}
	port=$((port + 1))
	pair env "$e" fi_pingpong -p "$1" -e "$2" -m "$3" -I "$4" -B "$port" -- env "$e" fi_pingpong -p "$1" -e "$2" -m "$3" -I "$4" -P "$port" 127.0.0.1
}
pingpong tcp rdm msg 3000
pingpong tcp rdm tagged 3000
pingpong tcp msg msg 2000
pingpong shm rdm msg 3000
pingpong shm rdm tagged 3000
pingpong rudp rdm msg 2000
pingpong rudp rdm tagged 2000
pingpong rudp rdm msg 1000 FI_RUDP_ENABLE_SHM=0

for prov in tcp rudp shm; do
	for size in 8 4096 65536 1048576; do
		port=$((port + 1))
		pair "$out/fi_stream" -p "$prov" -w 16 -n 2000 -b 33554432 -S "$size" -P "$port" -- \
			"$out/fi_stream" -p "$prov" -w 16 -n 2000 -b 33554432 -S "$size" -P "$port" 127.0.0.1
	done
done
fi_info >/dev/null
exit $failed
