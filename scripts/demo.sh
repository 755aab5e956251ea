#!/bin/sh
# What `make demo` shows once it has installed into PREFIX: the providers
# the installed fi_info lists (the built-in shm and the DL provider rfshm
# from PREFIX/lib/libfabric/), shm's entry, then two-process shm transfers
# on the installed library: one-way latency and streaming bandwidth by
# size. Debian's libfabric and UCX are measured beside ours when they are
# installed; without them only ours is shown, with how to get them.
#
# Usage: scripts/demo.sh PREFIX
set -eu
cd "$(dirname "$0")/.."
prefix=$(cd "${1:?usage: demo.sh PREFIX}" && pwd)
lib=$prefix/lib
echo "== $prefix/bin/fi_info -l"
LD_LIBRARY_PATH=$lib "$prefix/bin/fi_info" -l
echo "== $prefix/bin/fi_info -p shm"
LD_LIBRARY_PATH=$lib "$prefix/bin/fi_info" -p shm
echo "== two-process shm transfers (bench/bench.py --quick)"
exec python3 bench/bench.py --quick --no-write --ours-libdir "$lib"
