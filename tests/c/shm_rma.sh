#!/bin/sh
# Build tests/c/shm_rma.c against our headers (-Wall -Wextra -Werror, ASan
# and UBSan) and run it (target and initiator processes over the shm
# provider) on the library in LIBDIR, in four configurations: CMA allowed or
# off (FI_SHM_CMA=0), virtual addresses with provider keys or offsets with
# application keys.
set -eu
lib=$(cd "${1:?usage: shm_rma.sh LIBDIR}" && pwd)
cd "$(dirname "$0")/../.."
. tests/c/check_mode.sh
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cc -std=gnu11 -Wall -Wextra -Werror -Iinclude $SAN_CFLAGS \
	-o "$tmp/shm_rma" tests/c/shm_rma.c -L"$lib" -l:libfabric.so.1 -Wl,-rpath,"$lib" -lm
for cma in auto 0; do
	for mr in virt offset; do
		echo "--- FI_SHM_CMA=$cma RMA_MR=$mr"
		if [ "$cma" = auto ]; then unset FI_SHM_CMA; else export FI_SHM_CMA=$cma; fi
		RMA_MR=$mr rf_run 300 "$tmp/shm_rma"
	done
done
