#!/bin/sh
# Build tests/c/tcp_msg.c against our headers (-Wall -Wextra -Werror, ASan
# and UBSan) and run it on the library in LIBDIR over loopback
# (FI_TCP_IFACE=lo): the tcp provider's FI_EP_MSG endpoints, connection
# management and bad input, in one process.
set -eu
lib=$(cd "${1:?usage: tcp_msg.sh LIBDIR}" && pwd)
cd "$(dirname "$0")/../.."
. tests/c/check_mode.sh
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cc -std=gnu11 -Wall -Wextra -Werror -Iinclude $SAN_CFLAGS \
	-o "$tmp/tcp_msg" tests/c/tcp_msg.c -L"$lib" -l:libfabric.so.1 -Wl,-rpath,"$lib"
FI_TCP_IFACE=lo rf_run 120 "$tmp/tcp_msg"
