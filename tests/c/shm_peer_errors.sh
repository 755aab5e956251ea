#!/bin/sh
# Build tests/c/shm_peer_errors.c against our headers (-Wall -Wextra -Werror,
# ASan and UBSan) and run it on the library in LIBDIR twice: CMA allowed,
# then bounce buffers only (FI_SHM_CMA=0). Two processes each time:
# FI_SOURCE_ERR address data, FI_DELIVERY_COMPLETE ordering, peer death.
set -eu
lib=$(cd "${1:?usage: shm_peer_errors.sh LIBDIR}" && pwd)
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cc -std=c11 -Wall -Wextra -Werror -Iinclude -fsanitize=address,undefined -fno-sanitize-recover=all \
	-o "$tmp/shm_peer_errors" tests/c/shm_peer_errors.c -L"$lib" -l:libfabric.so.1 -Wl,-rpath,"$lib"
echo "--- CMA allowed"
ASAN_OPTIONS=detect_leaks=1 timeout 300 "$tmp/shm_peer_errors"
echo "--- FI_SHM_CMA=0"
FI_SHM_CMA=0 ASAN_OPTIONS=detect_leaks=1 timeout 300 "$tmp/shm_peer_errors"
