#!/bin/sh
# Build tests/c/shm_setname.c against our headers (-Wall -Wextra -Werror,
# ASan and UBSan) and run it (fi_setname: names between two processes, bad
# names, names in use, a killed owner's name) on the library in LIBDIR.
set -eu
lib=$(cd "${1:?usage: shm_setname.sh LIBDIR}" && pwd)
cd "$(dirname "$0")/../.."
. tests/c/check_mode.sh
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cc -std=c11 -Wall -Wextra -Werror -Iinclude $SAN_CFLAGS \
	-o "$tmp/shm_setname" tests/c/shm_setname.c -L"$lib" -l:libfabric.so.1 -Wl,-rpath,"$lib"
rf_run 120 "$tmp/shm_setname"
