#!/bin/sh
# Build tests/c/shm_getinfo_addr.c against our headers (-Wall -Wextra -Werror,
# ASan and UBSan) and run it (fi_getinfo's node/service addresses on shm,
# a server and a client that find each other through them) on LIBDIR.
set -eu
lib=$(cd "${1:?usage: shm_getinfo_addr.sh LIBDIR}" && pwd)
cd "$(dirname "$0")/../.."
. tests/c/check_mode.sh
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cc -std=c11 -Wall -Wextra -Werror -Iinclude $SAN_CFLAGS \
	-o "$tmp/shm_getinfo_addr" tests/c/shm_getinfo_addr.c -L"$lib" -l:libfabric.so.1 -Wl,-rpath,"$lib"
rf_run 120 "$tmp/shm_getinfo_addr"
