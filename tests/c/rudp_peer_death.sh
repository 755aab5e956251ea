#!/bin/sh
# Build tests/c/rudp_peer_death.c against our headers (-Wall -Wextra
# -Werror, ASan and UBSan) and run it on the library in LIBDIR over loopback
# (FI_RUDP_IFACE=lo) with FI_RUDP_PEER_TIMEOUT_MS=500: peers (the same
# program, exec'd) killed with work outstanding, one restarted at its old
# address, a third one alive throughout. PEER_DEATH_SLACK_MS (default 5000;
# 20000 under valgrind) is how late past the timeout an error may come.
# Twice: local peers through shared memory (the default), then through UDP
# (FI_RUDP_ENABLE_SHM=0).
set -eu
lib=$(cd "${1:?usage: rudp_peer_death.sh LIBDIR}" && pwd)
cd "$(dirname "$0")/../.."
. tests/c/check_mode.sh
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cc -std=gnu11 -Wall -Wextra -Werror -Iinclude $SAN_CFLAGS \
	-o "$tmp/rudp_peer_death" tests/c/rudp_peer_death.c -L"$lib" -l:libfabric.so.1 -Wl,-rpath,"$lib"
if [ "$RF_CHECK" = valgrind ]; then
	export PEER_DEATH_SLACK_MS=${PEER_DEATH_SLACK_MS:-20000}
fi
echo "--- shared memory"
FI_RUDP_IFACE=lo FI_RUDP_PEER_TIMEOUT_MS=500 rf_run 90 "$tmp/rudp_peer_death"
echo "--- FI_RUDP_ENABLE_SHM=0"
FI_RUDP_ENABLE_SHM=0 FI_RUDP_IFACE=lo FI_RUDP_PEER_TIMEOUT_MS=500 rf_run 90 "$tmp/rudp_peer_death"
