#!/bin/sh
# XPU tests.
#   tests/xpu/run.sh LIBDIR
# 1. the device functions of <rdma/fi_xpu_device.h> (C, -Werror, strict
#    C11) against the Rust host side: cargo test -p rfabric-xpu-harness;
# 2. fi_xpu_ctx (xpu_ctx.c), two processes exchanging tagged messages from
#    XPU kernels (xpu_shm.c), and the EXAMPLE of fi_xpu(3) call for call on
#    two endpoints sending both ways, in every export order and with both
#    spellings of an XPU object (xpu_example.c), through the library in
#    LIBDIR, built against our headers with -Wall -Wextra -Werror under ASan
#    and UBSan.
set -eu
lib=$(cd "${1:?usage: run.sh LIBDIR}" && pwd)
cd "$(dirname "$0")/../.."
. tests/c/check_mode.sh
cargo test -j1 -q -p rfabric-core --lib xpu
cargo test -j1 -q -p rfabric-xpu-harness
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cc -std=c11 -Wall -Wextra -Werror -Iinclude $SAN_CFLAGS \
	-o "$tmp/xpu_ctx" tests/xpu/xpu_ctx.c -L"$lib" -l:libfabric.so.1 -Wl,-rpath,"$lib"
rf_run 120 "$tmp/xpu_ctx"
cc -std=c11 -Wall -Wextra -Werror -Iinclude -pthread $SAN_CFLAGS \
	-o "$tmp/xpu_shm" tests/xpu/xpu_shm.c -L"$lib" -l:libfabric.so.1 -Wl,-rpath,"$lib"
rf_run 120 "$tmp/xpu_shm"
cc -std=c11 -Wall -Wextra -Werror -Iinclude -pthread $SAN_CFLAGS \
	-o "$tmp/xpu_example" tests/xpu/xpu_example.c -L"$lib" -l:libfabric.so.1 -Wl,-rpath,"$lib"
rf_run 120 "$tmp/xpu_example"
