#!/bin/sh
# Build tests/c/shm_truncate.c against our headers (-Wall -Wextra -Werror,
# ASan and UBSan) and run it on the library in LIBDIR twice: cross-memory
# attach (FI_SHM_CMA=1), then bounce buffers only (FI_SHM_CMA=0); each set,
# as unset the provider chooses by how fast CMA is on the machine. Three processes each time: two
# exchanging messages while a third of the same user truncates every
# rfabric object it can open; nobody may die of SIGBUS.
set -eu
lib=$(cd "${1:?usage: shm_truncate.sh LIBDIR}" && pwd)
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cc -std=c11 -Wall -Wextra -Werror -Iinclude -fsanitize=address,undefined -fno-sanitize-recover=all \
	-o "$tmp/shm_truncate" tests/c/shm_truncate.c -L"$lib" -l:libfabric.so.1 -Wl,-rpath,"$lib"
echo "--- FI_SHM_CMA=1"
FI_SHM_CMA=1 ASAN_OPTIONS=detect_leaks=1 timeout 300 "$tmp/shm_truncate"
echo "--- FI_SHM_CMA=0"
FI_SHM_CMA=0 ASAN_OPTIONS=detect_leaks=1 timeout 300 "$tmp/shm_truncate"
