#!/bin/sh
# Build a test libfabric.so.1 from the capi static library and run
# tests/c/log_params.c against it in each of its modes.
# Usage: tests/c/log_params.sh [LIBDIR]   (from the repository root)
# With LIBDIR, the versioned library in it is tested; without, a debug build
# is linked here. CFLAGS_EXTRA adds flags (the sanitizer run uses it).
# RF_CHECK=valgrind runs every case under valgrind (tests/c/check_mode.sh).
set -eu
. "$(dirname "$0")/check_mode.sh"
[ "$RF_CHECK" = valgrind ] && CFLAGS_EXTRA="${CFLAGS_EXTRA:-} $SAN_CFLAGS"
out=$(mktemp -d "${TMPDIR:-/tmp}/lp.XXXXXX")
trap 'rm -rf "$out"' EXIT
if [ $# -ge 1 ]; then
   lib=$(cd "$1" && pwd)
else
   lib=$out
   cargo build -j1 -p rfabric-capi
   cc -shared -o "$out/libfabric.so.1" \
      -Wl,--whole-archive target/debug/librfabric_capi.a -Wl,--no-whole-archive \
      -Wl,-soname,libfabric.so.1 -lpthread -ldl -lm
fi
cc -std=gnu11 -Wall -Wextra -Werror -Iinclude ${CFLAGS_EXTRA:-} -o "$out/log_params" tests/c/log_params.c \
   -L"$lib" -l:libfabric.so.1 -Wl,-rpath,"$lib"

unset FI_LOG_LEVEL FI_LOG_PROV FI_LOG_SUBSYS FI_LOG_INTERVAL FI_LOG_LOCATION FI_LOG_LOCATION_MODE || true
rf_run 60 "$out/log_params" params
rf_run 60 "$out/log_params" nolog
FI_LOG_LEVEL=info FI_LOG_PROV=^hidden FI_LOG_SUBSYS=^cq FI_LOG_INTERVAL=100000 \
    rf_run 60 "$out/log_params" log

dir=$(mktemp -d)
FI_LOG_LEVEL=WARN FI_LOG_LOCATION="$dir" rf_run 60 "$out/log_params" location 2>"$dir/stderr"
f=$(ls "$dir"/ofi_*.log)
grep -q ':testprov:mr:locfn():3<warn> to file$' "$f" || { echo "FAIL: log file content"; cat "$f"; exit 1; }
[ "$(stat -c %a "$f")" = 600 ] || { echo "FAIL: log file mode"; exit 1; }
[ ! -s "$dir/stderr" ] || { echo "FAIL: stderr not empty with FI_LOG_LOCATION"; exit 1; }
# An existing file is never overwritten: the line goes to stderr with a warning.
FI_LOG_LEVEL=warn FI_LOG_LOCATION="$f" rf_run 60 "$out/log_params" location 2>"$dir/stderr2" >/dev/null
grep -q 'Could not initialize log location' "$dir/stderr2" || { echo "FAIL: no fallback warning"; exit 1; }
grep -q '<warn> to file$' "$dir/stderr2" || { echo "FAIL: fallback line"; exit 1; }
rm -rf "$dir"
echo "log_params: all passed"
