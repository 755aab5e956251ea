#!/bin/sh
# The prototypes cbindgen writes from capi's Rust entry points must agree
# with the declarations in our public headers: compiled after the headers, a
# differing signature is a "conflicting types" error.
set -eu
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/t.c" <<'C'
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/providers/fi_prov.h>
#include <rdma/providers/fi_log.h>
#include <rfabric/exports.h>
int main(void) { return 0; }
C
gcc -std=c11 -Wall -Wextra -Werror -Iinclude -c -o "$tmp/t.o" "$tmp/t.c"
# Every public function the headers declare and the library exports must be
# among the generated prototypes (the internal rf_* versioned ones aside).
for f in fi_getparams fi_freeparams fi_log_enabled fi_log_ready fi_param_get fi_strerror fi_tostr fi_tostr_r fi_version fi_open fi_fabric2; do
	grep -qE "[ *]$f\\(" include/rfabric/exports.h || { echo "missing prototype: $f"; exit 1; }
done
echo "exports header: 1 passed, 0 failed"
