#!/bin/sh
# rfabric-ibverbs' hand-written #[repr(C)] types and constants against
# rdma-core's real headers: a C program generated from the crate's own
# records (ibverbs_layout c) is compiled against <infiniband/verbs.h> and
# <infiniband/efadv.h> and <rdma/rdma_cma.h> and must print what Rust prints (ibverbs_layout
# rust): the size and alignment of every type, the offset and size of
# every field, the value of every constant. Any difference fails.
#
# Without the headers (Debian: libibverbs-dev, librdmacm-dev) this fails, unless
# RFABRIC_TEST_IBVERBS_SKIP_LAYOUT=1 says skipping is fine (then: SKIP,
# exit 0).
#
# Usage: tests/ibverbs/layout.sh        (CC: the C compiler, default cc)
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
cc=${CC:-cc}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

command -v ${cc%% *} >/dev/null || { echo "FAIL layout: no C compiler ($cc)"; exit 1; }
printf '#include <infiniband/verbs.h>\n#include <infiniband/efadv.h>\n#include <rdma/rdma_cma.h>\n' >"$tmp/probe.c"
if ! $cc -E "$tmp/probe.c" >/dev/null 2>"$tmp/probe.err"; then
	# Skipping is for headers that are not there, not for a broken compiler.
	if [ "${RFABRIC_TEST_IBVERBS_SKIP_LAYOUT:-}" = 1 ] \
		&& grep -q -e 'infiniband/[a-z]*\.h.*No such file' -e 'rdma/rdma_cma\.h.*No such file' "$tmp/probe.err"; then
		echo "SKIP layout: no rdma-core headers ($(head -1 "$tmp/probe.err"))"
		exit 0
	fi
	echo "FAIL layout: rdma-core's headers are missing (Debian: apt-get install libibverbs-dev librdmacm-dev;"
	echo "     RFABRIC_TEST_IBVERBS_SKIP_LAYOUT=1 skips instead):"
	sed 's/^/     /' "$tmp/probe.err"
	exit 1
fi

cd "$root" || exit 1
run() { cargo run -q -p rfabric-ibverbs --example ibverbs_layout -- "$1"; }
run c >"$tmp/layout.c" || { echo "FAIL layout: building ibverbs_layout"; exit 1; }
run rust >"$tmp/rust.txt" || { echo "FAIL layout: ibverbs_layout rust"; exit 1; }
$cc -std=gnu11 -Wall -Werror -o "$tmp/layout" "$tmp/layout.c" 2>"$tmp/cc.err" \
	|| { echo "FAIL layout: the generated C program does not compile:"; cat "$tmp/cc.err"; exit 1; }
"$tmp/layout" >"$tmp/c.txt" || { echo "FAIL layout: the C program failed"; exit 1; }

types=$(grep -c '^type ' "$tmp/rust.txt")
fields=$(grep -c '^field ' "$tmp/rust.txt")
consts=$(grep -c '^const ' "$tmp/rust.txt")
if diff -u --label C "$tmp/c.txt" --label Rust "$tmp/rust.txt" >"$tmp/diff"; then
	echo "PASS layout: $types types, $fields fields, $consts constants as in rdma-core's headers"
else
	echo "FAIL layout: Rust and rdma-core's headers differ (- C, + Rust):"
	cat "$tmp/diff"
	exit 1
fi
