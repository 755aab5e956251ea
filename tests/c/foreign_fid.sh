#!/bin/sh
# Build tests/c/foreign_fid.c against our headers (-Wall -Wextra -Werror) with
# ASan and UBSan, and run it on the library in LIBDIR.
set -eu
lib=$(cd "${1:?usage: foreign_fid.sh LIBDIR}" && pwd)
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cc -std=c11 -Wall -Wextra -Werror -Iinclude -fsanitize=address,undefined -fno-sanitize-recover=all \
	-o "$tmp/foreign_fid" tests/c/foreign_fid.c -L"$lib" -l:libfabric.so.1 -Wl,-rpath,"$lib"
FI_TCP_IFACE=lo ASAN_OPTIONS=detect_leaks=1 "$tmp/foreign_fid"
