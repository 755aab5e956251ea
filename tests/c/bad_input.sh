#!/bin/sh
# Build tests/c/bad_input.c against our headers (-Wall -Wextra -Werror) with
# ASan and UBSan, and run it on the library in LIBDIR.
set -eu
lib=$(cd "${1:?usage: bad_input.sh LIBDIR}" && pwd)
cd "$(dirname "$0")/../.."
. tests/c/check_mode.sh
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cc -std=c11 -Wall -Wextra -Werror -Iinclude $SAN_CFLAGS \
	-o "$tmp/bad_input" tests/c/bad_input.c -L"$lib" -l:libfabric.so.1 -Wl,-rpath,"$lib"
rf_run 120 "$tmp/bad_input"
