#!/bin/sh
# Build tests/c/rudp_features.c against our headers (-Wall -Wextra -Werror,
# ASan and UBSan) and run it on the library in LIBDIR over loopback
# (FI_RUDP_IFACE=lo), two processes, twice:
#   1. datagrams as large as loopback takes (one packet holds ~64 KiB),
#      FI_MR_VIRT_ADDR;
#   2. FI_RUDP_MTU=1472 and FI_RUDP_MEDIUM_MAX=16384 (messages of many
#      packets, the long protocol from 16 KiB), offset addressing with
#      application keys (RUDP_MR=offset).
# rudp: both with the peers on shared memory (the default for local peers): the
# endpoints' close lines (FI_LOG_LEVEL=info) must show every packet went
# through shared memory and no datagram through UDP, and run 1 that long
# messages were read from the senders' memory (none with FI_RUDP_SHM_READ=0,
# run once more); then run 1 again with
# FI_RUDP_ENABLE_SHM=0: datagrams through UDP, no shared-memory path; and
# with FI_RUDP_UNEXPECTED_MAX=2 over shared memory: receivers refuse
# packets for lack of room (counted in the close lines), which come again.
# PROV=tcp runs the same cases on the tcp provider (FI_TCP_IFACE=lo; the
# second run with FI_TCP_MAX_PACKET=1472 and FI_TCP_MEDIUM_MAX=16384).
set -eu
prov=${PROV:-rudp}
P=$(echo "$prov" | tr a-z A-Z)
lib=$(cd "${1:?usage: rudp_features.sh LIBDIR}" && pwd)
cd "$(dirname "$0")/../.."
. tests/c/check_mode.sh
. tests/c/rudp_paths.sh
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cc -std=gnu11 -Wall -Wextra -Werror -Iinclude $SAN_CFLAGS \
	-o "$tmp/rudp_features" tests/c/rudp_features.c -L"$lib" -l:libfabric.so.1 -Wl,-rpath,"$lib"
export RF_PROV=$prov "FI_${P}_IFACE=lo"
if [ "$prov" != rudp ]; then
	small="FI_TCP_MAX_PACKET=1472"
	echo "--- $prov: loopback, largest packets, FI_MR_VIRT_ADDR"
	RUDP_MR=virt rf_run 120 "$tmp/rudp_features"
	echo "--- $prov: $small FI_${P}_MEDIUM_MAX=16384, offsets"
	(export "$small" "FI_${P}_MEDIUM_MAX=16384" RUDP_MR=offset; rf_run 120 "$tmp/rudp_features")
	exit 0
fi
export FI_LOG_LEVEL=info
# run NAME EXPECT (shm or udp) ENV...: the program with ENV, its library
# log in $tmp/NAME.log, checked for the path that carried the traffic.
run() {
	name=$1 expect=$2; shift 2
	(export "$@"; rf_run 120 "$tmp/rudp_features" 2>"$tmp/$name.log") || { tail -40 "$tmp/$name.log"; exit 1; }
	set -- $(rudp_sent "$tmp/$name.log")
	echo "$name: $3 endpoints closed, $1 UDP datagrams, $2 shared-memory packets"
	case $expect in
	shm) [ "$3" -gt 0 ] && [ "$1" -eq 0 ] && [ "$2" -gt 0 ] ;;
	udp) [ "$3" -gt 0 ] && [ "$1" -gt 0 ] && [ "$2" -eq 0 ] && ! grep -q ' closed: shared memory: ' "$tmp/$name.log" ;;
	esac || { echo "FAIL: $name: expected the traffic through $expect"; exit 1; }
}
echo "--- loopback datagrams, FI_MR_VIRT_ADDR"
run virt shm RUDP_MR=virt
echo "--- FI_RUDP_MTU=1472 FI_RUDP_MEDIUM_MAX=16384, offsets"
run offset shm FI_RUDP_MTU=1472 FI_RUDP_MEDIUM_MAX=16384 RUDP_MR=offset
n=$(rudp_reads "$tmp/virt.log")
echo "virt: $n long messages read from their senders' memory"
[ "$n" -gt 0 ] || { echo "FAIL: no long message was read from its sender's memory"; exit 1; }
echo "--- FI_RUDP_SHM_READ=0, shared memory, FI_MR_VIRT_ADDR"
run noread shm FI_RUDP_SHM_READ=0 RUDP_MR=virt
n=$(rudp_reads "$tmp/noread.log")
echo "noread: $n long messages read from their senders' memory"
[ "$n" -eq 0 ] || { echo "FAIL: FI_RUDP_SHM_READ=0, yet $n long messages were read"; exit 1; }
echo "--- FI_RUDP_ENABLE_SHM=0, loopback datagrams, FI_MR_VIRT_ADDR"
run udp udp FI_RUDP_ENABLE_SHM=0 RUDP_MR=virt
echo "--- FI_RUDP_UNEXPECTED_MAX=2, shared memory, FI_MR_VIRT_ADDR"
run refuse shm FI_RUDP_UNEXPECTED_MAX=2 RUDP_MR=virt
n=$(rudp_shm_refused "$tmp/refuse.log")
echo "refuse: $n packets refused for lack of room on the shared-memory path"
[ "$n" -gt 0 ] || { echo "FAIL: no packet was refused"; exit 1; }
