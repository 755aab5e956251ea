#!/bin/sh
# Build tests/c/shm_atomic_mt.c against our headers (-Wall -Wextra -Werror,
# ASan and UBSan) and run it on the library in LIBDIR: one target process
# with several FI_PROGRESS_AUTO endpoints, several initiator processes with
# several endpoints and threads each, FI_THREAD_SAFE, all running atomics on
# the same words; the final values must be exact. Run with CMA allowed and
# with FI_SHM_CMA=0.
set -eu
lib=$(cd "${1:?usage: shm_atomic_mt.sh LIBDIR}" && pwd)
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cc -std=gnu11 -Wall -Wextra -Werror -Iinclude -fsanitize=address,undefined -fno-sanitize-recover=all \
	-o "$tmp/shm_atomic_mt" tests/c/shm_atomic_mt.c -L"$lib" -l:libfabric.so.1 -Wl,-rpath,"$lib" -lpthread -lm
for cma in auto 0; do
	echo "--- FI_SHM_CMA=$cma"
	if [ "$cma" = auto ]; then unset FI_SHM_CMA; else export FI_SHM_CMA=$cma; fi
	ASAN_OPTIONS=detect_leaks=1 timeout 300 "$tmp/shm_atomic_mt"
done
