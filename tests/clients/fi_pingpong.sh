#!/bin/sh
# Run the distribution's fi_pingpong (built against upstream libfabric)
# unchanged on our library: an RDM pair over the shm provider (or, with
# PROV=rudp or PROV=tcp, over that provider on loopback; with PROV=tcp also
# FI_EP_MSG pairs), message sends of
# every size (-S all),
# with data verification (-c). The pair finds each other through a TCP
# socket on loopback, on a free control port below the ephemeral range.
#
# Usage: [PROV=rudp|tcp] tests/clients/fi_pingpong.sh LIBDIR
# Prints one line per case and "N passed, N failed"; exits non-zero on a
# failure. Skips (exit 0) when fi_pingpong is not installed.
# RF_CHECK=valgrind runs both sides under valgrind memcheck
# (tests/c/check_mode.sh): a memory error or a definite leak fails the case.
set -u
prov=${PROV:-shm}
lib=$(cd "${1:?usage: fi_pingpong.sh LIBDIR}" && pwd)
. "$(dirname "$0")/../c/check_mode.sh"
# A short pause after the server listens (longer under valgrind).
delay=0.1; [ "$RF_CHECK" = valgrind ] && delay=1
[ -e "$lib/libfabric.so.1" ] || { echo "no libfabric.so.1 in $lib"; echo "0 passed, 1 failed"; exit 1; }
pp=$(command -v fi_pingpong) || { echo "fi_pingpong not installed: skipped"; exit 0; }
. "$(dirname "$0")/../free_port.sh"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
pass=0; fail=0

# run NAME ENV MINROWS ARGS...: server and client with ARGS and the
# environment setting ENV (VAR=value); both must exit 0 and print the size
# table (header plus at least MINROWS rows, the same number on both).
run() {
	name=$1; envset=$2; want_rows=$3; shift 3
	run_once "$@"
	# A port taken between the check and the server's bind is the
	# machine's, not the library's: once more on another port.
	if [ $src -ne 0 ] && grep -q 'Address already in use' "$tmp/srv"; then
		echo "  (the server's port $port was taken: once more on another)"
		run_once "$@"
	fi
	rows_c=$(grep -cE '^[0-9.]+[kmg]? +[0-9.]+[kmg]? +=[0-9.]+[kmg]? ' "$tmp/cli")
	rows_s=$(grep -cE '^[0-9.]+[kmg]? +[0-9.]+[kmg]? +=[0-9.]+[kmg]? ' "$tmp/srv")
	if [ $crc -eq 0 ] && [ $src -eq 0 ] && grep -q '^bytes' "$tmp/cli" && grep -q '^bytes' "$tmp/srv" \
		&& [ "$rows_c" -gt 0 ] && [ "$rows_c" -eq "$rows_s" ] && [ "$rows_c" -ge "$want_rows" ]; then
		echo "PASS $name ($rows_c sizes)"; pass=$((pass + 1))
	else
		echo "FAIL $name (client rc=$crc, server rc=$src, rows $rows_c/$rows_s)"
		sed 's/^/  client: /' "$tmp/cli" | tail -n 5; sed 's/^/  server: /' "$tmp/srv" | tail -n 5
		fail=$((fail + 1))
	fi
}

# run_once ARGS...: one server and client pair (sets port, crc, src).
run_once() {
	port=$(free_port)
	(export "$envset" LD_LIBRARY_PATH="$lib"; rf_run 60 "$pp" -p "$prov" -e rdm -B "$port" "$@") >"$tmp/srv" 2>&1 &
	spid=$!
	# The client connects once: wait until the server listens (a fixed
	# pause was too short on a loaded machine), at most 20 s.
	for _ in $(seq 200); do
		ss -Hltn "sport = :$port" 2>/dev/null | grep -q . && break
		kill -0 "$spid" 2>/dev/null || break
		sleep 0.1
	done
	sleep $delay
	(export "$envset" LD_LIBRARY_PATH="$lib"; rf_run 60 "$pp" -p "$prov" -e rdm -P "$port" "$@" 127.0.0.1) >"$tmp/cli" 2>&1
	crc=$?
	wait "$spid"; src=$?
}

if [ "$prov" = rudp ]; then
	# -S all: 0 bytes to 6 MiB: one packet, medium (several packets) and
	# RTS/CTS messages; on loopback (FI_RUDP_IFACE=lo), then with the
	# datagram size of an Ethernet path.
	export FI_RUDP_IFACE=lo
	run "rudp: all sizes, data check" FI_LOG_LEVEL=warn 40 -S all -c
	run "rudp: tagged, all sizes, data check" FI_LOG_LEVEL=warn 40 -m tagged -S all -c
	run "rudp: all sizes, 1472-byte datagrams, data check" FI_RUDP_MTU=1472 40 -S all -c
	run "rudp: 64 bytes, 1000 iterations, data check" FI_LOG_LEVEL=warn 1 -S 64 -I 1000 -c
	# The later -e wins: FI_EP_DGRAM, sizes up to the datagram size.
	run "rudp: dgram, all sizes that fit a datagram, data check" FI_LOG_LEVEL=warn 30 -e dgram -S all -c
	echo "$pass passed, $fail failed"
	[ $fail -eq 0 ]
	exit
fi

if [ "$prov" = tcp ]; then
	# -S all: one packet, medium and RTS/CTS messages over connections
	# made on demand, on loopback (FI_TCP_IFACE=lo); then small packets.
	export FI_TCP_IFACE=lo
	run "tcp: all sizes, data check" FI_LOG_LEVEL=warn 40 -S all -c
	run "tcp: tagged, all sizes, data check" FI_LOG_LEVEL=warn 40 -m tagged -S all -c
	run "tcp: all sizes, 1472-byte packets, data check" FI_TCP_MAX_PACKET=1472 40 -S all -c
	run "tcp: 64 bytes, 1000 iterations, data check" FI_LOG_LEVEL=warn 1 -S 64 -I 1000 -c
	# The later -e wins: FI_EP_MSG pairs (passive endpoint, fi_connect,
	# fi_accept), messages of many 64 KiB segments from 64 KiB on.
	run "tcp msg: all sizes, data check" FI_LOG_LEVEL=warn 40 -e msg -S all -c
	run "tcp msg: 64 bytes, 1000 iterations, data check" FI_LOG_LEVEL=warn 1 -e msg -S 64 -I 1000 -c
	run "tcp msg: 1 MiB, data check" FI_LOG_LEVEL=warn 1 -e msg -S 1048576 -I 20 -c
	echo "$pass passed, $fail failed"
	[ $fail -eq 0 ]
	exit
fi

# -S all: 0 bytes to 6 MiB (46 sizes), eager and rendezvous paths.
run "all sizes, data check" FI_LOG_LEVEL=warn 40 -S all -c
run "64 bytes, 1000 iterations, data check" FI_LOG_LEVEL=warn 1 -S 64 -I 1000 -c
run "1 MiB, data check" FI_LOG_LEVEL=warn 1 -S 1048576 -I 20 -c
run "tagged, all sizes, data check" FI_LOG_LEVEL=warn 40 -m tagged -S all -c
# Bounce buffers instead of cross-memory attach.
run "all sizes, bounce buffers, data check" FI_SHM_CMA=0 40 -S all -c

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
