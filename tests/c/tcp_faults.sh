#!/bin/sh
# Build tests/c/tcp_faults.c against our headers (-Wall -Wextra -Werror,
# ASan and UBSan) and run it on the library in LIBDIR over loopback
# (FI_TCP_IFACE=lo) with FI_TCP_PEER_TIMEOUT_MS=500: both sides connecting
# at once, a stalled peer, a peer killed mid-transfer and, as root inside a
# private network namespace (unshare -n, its own loopback and nftables
# rules), connections reset by an injected TCP reset and a half-open
# connection (every segment dropped). Without root, unshare or nft the
# nftables cases are left out and the run fails unless
# TCP_FAULTS_NO_NFT=1 allows it. PEER_DEATH_SLACK_MS (default 5000; 20000
# under valgrind) is how late past the timeout an error may come.
set -eu
lib=$(cd "${1:?usage: tcp_faults.sh LIBDIR}" && pwd)
cd "$(dirname "$0")/../.."
. tests/c/check_mode.sh
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cc -std=gnu11 -Wall -Wextra -Werror -Iinclude $SAN_CFLAGS \
	-o "$tmp/tcp_faults" tests/c/tcp_faults.c -L"$lib" -l:libfabric.so.1 -Wl,-rpath,"$lib"
if [ "$RF_CHECK" = valgrind ]; then
	export PEER_DEATH_SLACK_MS=${PEER_DEATH_SLACK_MS:-20000}
fi
export FI_TCP_IFACE=lo FI_TCP_PEER_TIMEOUT_MS=500
if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null && command -v nft >/dev/null; then
	# A network namespace of our own: its loopback, its rules.
	export RESET_CASES=1 RF_CHECK SAN_CFLAGS
	unshare -n sh -c 'ip link set lo up && . tests/c/check_mode.sh && rf_run 180 "$1"' sh "$tmp/tcp_faults"
else
	[ "${TCP_FAULTS_NO_NFT:-0}" = 1 ] || { echo "tcp_faults: the reset cases need root, unshare and nft (TCP_FAULTS_NO_NFT=1 runs without them)"; exit 1; }
	rf_run 180 "$tmp/tcp_faults"
fi
