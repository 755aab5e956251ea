#!/bin/sh
# Build tests/c/rudp_features.c against our headers (-Wall -Wextra -Werror,
# ASan and UBSan) and run it on the library in LIBDIR over loopback
# (FI_RUDP_IFACE=lo), two processes, twice:
#   1. datagrams as large as loopback takes (one packet holds ~64 KiB),
#      FI_MR_VIRT_ADDR;
#   2. FI_RUDP_MTU=1472 and FI_RUDP_MEDIUM_MAX=16384 (messages of many
#      packets, the long protocol from 16 KiB), offset addressing with
#      application keys (RUDP_MR=offset).
# PROV=tcp runs the same cases on the tcp provider (FI_TCP_IFACE=lo; the
# second run with FI_TCP_MAX_PACKET=1472 and FI_TCP_MEDIUM_MAX=16384).
set -eu
prov=${PROV:-rudp}
P=$(echo "$prov" | tr a-z A-Z)
lib=$(cd "${1:?usage: rudp_features.sh LIBDIR}" && pwd)
cd "$(dirname "$0")/../.."
. tests/c/check_mode.sh
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cc -std=gnu11 -Wall -Wextra -Werror -Iinclude $SAN_CFLAGS \
	-o "$tmp/rudp_features" tests/c/rudp_features.c -L"$lib" -l:libfabric.so.1 -Wl,-rpath,"$lib"
export RF_PROV=$prov "FI_${P}_IFACE=lo"
small="FI_RUDP_MTU=1472"; [ "$prov" = tcp ] && small="FI_TCP_MAX_PACKET=1472"
echo "--- $prov: loopback, largest packets, FI_MR_VIRT_ADDR"
RUDP_MR=virt rf_run 120 "$tmp/rudp_features"
echo "--- $prov: $small FI_${P}_MEDIUM_MAX=16384, offsets"
(export "$small" "FI_${P}_MEDIUM_MAX=16384" RUDP_MR=offset; rf_run 120 "$tmp/rudp_features")
