#!/bin/bash
# The whole test suite, from a clean clone: installs what it needs (Debian
# packages, a Python venv with the MPICH wheel, cbindgen), builds the
# library, then runs every check and prints one summary line.
# Usage: scripts/test.sh        (the README's test command; .ci/run calls it)
set -u
cd "$(dirname "$0")/.."
root=$(pwd)
export CARGO_TERM_COLOR=never
log=build/test-logs
mkdir -p "$log"

step() { echo; echo "=== $*"; }

# ---------- install ----------
step "install test dependencies"
pkgs="libfabric-bin libfabric-dev libfabric1 ucx-utils libibverbs1 ibverbs-providers rdma-core
      valgrind pkg-config gcc g++ make python3-venv binutils iproute2"
missing=""
for p in $pkgs; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
	SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
	$SUDO apt-get update -qq >/dev/null
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >"$log/apt.log" 2>&1 \
		|| { echo "apt-get install failed:"; tail -20 "$log/apt.log"; exit 1; }
fi
if [ ! -x .venv/bin/python ]; then
	python3 -m venv .venv || { echo "python venv failed"; exit 1; }
fi
if ! .venv/bin/python -c 'import importlib.metadata as m; m.version("mpich")' >/dev/null 2>&1; then
	.venv/bin/pip install -q mpich >"$log/pip.log" 2>&1 || { echo "pip install mpich failed"; tail "$log/pip.log"; exit 1; }
fi
mpich_lib=$(.venv/bin/python - <<'PY'
import importlib.metadata as m, pathlib
d = m.distribution("mpich")
for f in d.files or []:
    if f.name == "libmpi.so.12":
        print(pathlib.Path(d.locate_file(f)).resolve().parent); break
PY
)
command -v cbindgen >/dev/null || [ -x "$HOME/.cargo/bin/cbindgen" ] || cargo install -q cbindgen --version 0.29.4 >"$log/cbindgen.log" 2>&1
export PATH="$HOME/.cargo/bin:$PATH"

# ---------- build ----------
step "build"
make -s build >"$log/build.log" 2>&1 || { echo "build failed:"; tail -30 "$log/build.log"; exit 1; }
lib=$root/build/lib

# ---------- run ----------
passed=0 failed=0 failed_names=""
run() { # name, command...
	local name=$1; shift
	step "$name"
	if "$@" >"$log/$name.log" 2>&1; then
		passed=$((passed + 1)); tail -3 "$log/$name.log"; echo "--- $name: ok"
	else
		failed=$((failed + 1)); failed_names="$failed_names $name"
		tail -40 "$log/$name.log"; echo "--- $name: FAILED"
	fi
}

run cargo-tests cargo test -j2 --workspace
run exports-header sh -c 'cbindgen --config cbindgen.toml --crate rfabric-capi --output build/exports.h 2>/dev/null && diff -u include/rfabric/exports.h build/exports.h && tests/abi/check_exports.sh'
run header-abi tests/abi/check_headers.sh
run header-oracle tests/abi/oracle_debian.sh
run wrappers tests/c/run_wrappers.sh
run symbols tests/symbols/check_symbols.sh build/lib/libfabric.so.1
run compat-abi-valgrind make -s check-compat-c
run tostr-diff tests/c/tostr_diff.sh "$lib"
run bad-input tests/c/bad_input.sh "$lib"
run bad-input-table tests/c/bad_input_table.sh "$lib"
run shm-sendrecv tests/c/shm_sendrecv.sh "$lib"
run xpu tests/xpu/run.sh "$lib"
run shm-msg-features tests/c/shm_msg_features.sh "$lib"
run shm-rma tests/c/shm_rma.sh "$lib"
run shm-setname tests/c/shm_setname.sh "$lib"
run shm-getinfo-addr tests/c/shm_getinfo_addr.sh "$lib"
run shm-peer-errors tests/c/shm_peer_errors.sh "$lib"
run log-params tests/c/log_params.sh "$lib"
run sanitizers env CFLAGS_EXTRA="-fsanitize=address,undefined -fno-sanitize-recover=all" tests/c/log_params.sh "$lib"
run dl-providers tests/dl/run.sh "$lib"
run mpich-bindings tests/clients/mpich_bindings.sh "$lib" "$mpich_lib"
run mpich-4ranks env MPI_TIMEOUT=300 tests/mpi/run_mpich.sh "$lib"
run install-pkgconfig make -s check-install
[ -x tests/tools/fi_info_diff.sh ] && run fi-info tests/tools/fi_info_diff.sh "$lib"
[ -x tests/clients/fi_pingpong.sh ] && run fi-pingpong tests/clients/fi_pingpong.sh "$lib"

echo
[ -n "$failed_names" ] && echo "failed:$failed_names"
echo "rfabric test suite: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
