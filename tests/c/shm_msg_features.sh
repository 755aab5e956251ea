#!/bin/sh
# Build tests/c/shm_msg_features.c against our headers (-Wall -Wextra
# -Werror, ASan and UBSan) and run it on the library in LIBDIR: two
# processes over the shm provider, then one-process thread, progress and
# registration checks, then a peer killed mid-transfer.
set -eu
lib=$(cd "${1:?usage: shm_msg_features.sh LIBDIR}" && pwd)
cd "$(dirname "$0")/../.."
. tests/c/check_mode.sh
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cc -std=c11 -Wall -Wextra -Werror -Iinclude $SAN_CFLAGS \
	-o "$tmp/shm_msg_features" tests/c/shm_msg_features.c -L"$lib" -l:libfabric.so.1 -Wl,-rpath,"$lib" -lpthread
rf_run 180 "$tmp/shm_msg_features"
