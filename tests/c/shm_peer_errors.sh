#!/bin/sh
# Build tests/c/shm_peer_errors.c against our headers (-Wall -Wextra -Werror,
# ASan and UBSan) and run it on the library in LIBDIR twice: cross-memory
# attach (FI_SHM_CMA=1), then bounce buffers only (FI_SHM_CMA=0). Each is
# set: unset, the provider chooses by how fast CMA is on the machine, and
# the test must know which path its rendezvous sends take. Two processes each time:
# FI_SOURCE_ERR address data, FI_DELIVERY_COMPLETE ordering, peer death.
set -eu
lib=$(cd "${1:?usage: shm_peer_errors.sh LIBDIR}" && pwd)
cd "$(dirname "$0")/../.."
. tests/c/check_mode.sh
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cc -std=c11 -Wall -Wextra -Werror -Iinclude $SAN_CFLAGS \
	-o "$tmp/shm_peer_errors" tests/c/shm_peer_errors.c -L"$lib" -l:libfabric.so.1 -Wl,-rpath,"$lib"
echo "--- FI_SHM_CMA=1"
FI_SHM_CMA=1 rf_run 300 "$tmp/shm_peer_errors"
echo "--- FI_SHM_CMA=0"
FI_SHM_CMA=0 rf_run 300 "$tmp/shm_peer_errors"
