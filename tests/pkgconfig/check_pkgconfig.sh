#!/bin/sh
# Check an installed prefix: pkg-config answers, and a C program built with
# its flags links against libfabric.so and runs.
# Usage: tests/pkgconfig/check_pkgconfig.sh PREFIX
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
prefix=$(cd "${1:?usage: $0 PREFIX}" && pwd)
CC=${CC:-cc}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
flags=$(pkg-config --cflags --libs libfabric)
echo "pkg-config: $flags"
[ "$(pkg-config --modversion libfabric)" = "${RFABRIC_VERSION:-2.8.0}" ] || { echo "FAIL: modversion"; exit 1; }
case "$flags" in *"-I$prefix/include"*"-L$prefix/lib"*"-lfabric"*) ;; *) echo "FAIL: flags"; exit 1 ;; esac
# shellcheck disable=SC2086
"$CC" -o "$tmp/smoke" "$root/tests/pkgconfig/smoke.c" $flags
LD_LIBRARY_PATH="$prefix/lib" "$tmp/smoke"
echo "pkg-config check passed"
