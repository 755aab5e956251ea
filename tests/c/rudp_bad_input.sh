#!/bin/sh
# Build tests/c/rudp_bad_input.c against our headers (-Wall -Wextra
# -Werror, ASan and UBSan) and run it on the library in LIBDIR over loopback
# (FI_RUDP_IFACE=lo): bad calls, remote errors, and datagrams forged from
# plain UDP sockets, counted by the endpoint (its FI_LOG_LEVEL=info close
# line, which the program reads from its own stderr).
# PROV=tcp runs it on the tcp provider (forged TCP connections instead of
# datagrams).
set -eu
prov=${PROV:-rudp}
P=$(echo "$prov" | tr a-z A-Z)
lib=$(cd "${1:?usage: rudp_bad_input.sh LIBDIR}" && pwd)
cd "$(dirname "$0")/../.."
. tests/c/check_mode.sh
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cc -std=gnu11 -Wall -Wextra -Werror -Iinclude $SAN_CFLAGS \
	-o "$tmp/rudp_bad_input" tests/c/rudp_bad_input.c -L"$lib" -l:libfabric.so.1 -Wl,-rpath,"$lib"
(export RF_PROV="$prov" "FI_${P}_IFACE=lo"; rf_run 60 "$tmp/rudp_bad_input")
