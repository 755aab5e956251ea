#!/bin/sh
# Build tests/c/rudp_peer_death.c against our headers (-Wall -Wextra
# -Werror, ASan and UBSan) and run it on the library in LIBDIR over loopback
# (FI_RUDP_IFACE=lo) with FI_RUDP_PEER_TIMEOUT_MS=500: peers (the same
# program, exec'd) killed with work outstanding, one restarted at its old
# address, a third one alive throughout. PEER_DEATH_SLACK_MS (default 5000;
# 20000 under valgrind) is how late past the timeout an error may come.
# PROV=tcp runs the same cases on the tcp provider (FI_TCP_*), where a
# killed peer's connections fail at once (errors from the kill on).
# rudp runs twice: local peers through shared memory (the default), then
# through UDP (FI_RUDP_ENABLE_SHM=0).
set -eu
prov=${PROV:-rudp}
P=$(echo "$prov" | tr a-z A-Z)
lib=$(cd "${1:?usage: rudp_peer_death.sh LIBDIR}" && pwd)
cd "$(dirname "$0")/../.."
. tests/c/check_mode.sh
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cc -std=gnu11 -Wall -Wextra -Werror -Iinclude $SAN_CFLAGS \
	-o "$tmp/rudp_peer_death" tests/c/rudp_peer_death.c -L"$lib" -l:libfabric.so.1 -Wl,-rpath,"$lib"
if [ "$RF_CHECK" = valgrind ]; then
	export PEER_DEATH_SLACK_MS=${PEER_DEATH_SLACK_MS:-20000}
fi
if [ "$prov" != rudp ]; then
	(export RF_PROV="$prov" "FI_${P}_IFACE=lo" "FI_${P}_PEER_TIMEOUT_MS=500"; rf_run 90 "$tmp/rudp_peer_death")
	exit 0
fi
echo "--- shared memory"
(export RF_PROV=rudp FI_RUDP_IFACE=lo FI_RUDP_PEER_TIMEOUT_MS=500; rf_run 90 "$tmp/rudp_peer_death")
echo "--- FI_RUDP_ENABLE_SHM=0"
(export RF_PROV=rudp FI_RUDP_ENABLE_SHM=0 FI_RUDP_IFACE=lo FI_RUDP_PEER_TIMEOUT_MS=500; rf_run 90 "$tmp/rudp_peer_death")
