#!/bin/sh
# Build tests/c/shm_sendrecv.c against our headers (-Wall -Wextra -Werror,
# ASan and UBSan) and run it (two processes over the shm provider) on the
# library in LIBDIR.
set -eu
lib=$(cd "${1:?usage: shm_sendrecv.sh LIBDIR}" && pwd)
cd "$(dirname "$0")/../.."
. tests/c/check_mode.sh
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cc -std=c11 -Wall -Wextra -Werror -Iinclude $SAN_CFLAGS \
	-o "$tmp/shm_sendrecv" tests/c/shm_sendrecv.c -L"$lib" -l:libfabric.so.1 -Wl,-rpath,"$lib"
rf_run 120 "$tmp/shm_sendrecv"
