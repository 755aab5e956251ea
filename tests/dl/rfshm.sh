#!/bin/sh
# Our shm provider built as a DL provider (librfshm-fi.so, provider name
# rfshm), loaded through FI_PROVIDER_PATH by another libfabric.
#
# Usage:
#   tests/dl/rfshm.sh debian DLDIR
#       Debian's libfabric1 (upstream 1.17, fi_info shape FABRIC_1.3) with
#       Debian's own fi_info and fi_pingpong, nothing of ours but DLDIR: no
#       LD_LIBRARY_PATH (the loader's record shows which libraries start).
#   tests/dl/rfshm.sh ours DLDIR LIBDIR NOBUILTIN_LIBDIR
#       our libfabric.so.1 with its built-in shm (LIBDIR), and one built
#       with no built-in provider (NOBUILTIN_LIBDIR), both with Debian's
#       fi_info and fi_pingpong.
# Prints one line per check and "N passed, N failed"; exits non-zero on a
# failure.
set -u
mode=${1:?usage: rfshm.sh debian|ours DLDIR [LIBDIR NOBUILTIN_LIBDIR]}
dl=$(cd "${2:?usage: rfshm.sh debian|ours DLDIR ...}" && pwd) || exit 1
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
. "$(dirname "$0")/../free_port.sh"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "PASS $1"; }
bad() { fail=$((fail + 1)); echo "FAIL $1"; }
finish() { echo "rfshm ($mode): $pass passed, $fail failed"; [ "$fail" -eq 0 ]; exit $?; }
[ -f "$dl/librfshm-fi.so" ] || { bad "no $dl/librfshm-fi.so (make dl)"; finish; }
for t in fi_info fi_pingpong; do
	command -v $t >/dev/null || { bad "$t not installed (Debian package libfabric-bin)"; finish; }
done
export FI_PROVIDER_PATH=$dl
unset FI_PROVIDER FI_LOG_LEVEL FI_LOG_PROV

# on LIBDIR CMD...: CMD with libfabric.so.1 from LIBDIR ("-": the system's).
on() {
	l=$1; shift
	if [ "$l" = - ]; then env -u LD_LIBRARY_PATH "$@"; else env LD_LIBRARY_PATH="$l" "$@"; fi
}

# pair LIBDIR NAME ENV ARGS...: Debian's fi_pingpong, server and client, on
# provider rfshm with ARGS and ENV (VAR=value); both must exit 0 and print
# the same size table. A failed pair is run once more (a port taken
# meanwhile, or another suite's processes in /dev/shm); the second counts.
pair() {
	l=$1 name=$2 envset=$3; shift 3
	pair_once "$l" "$envset" "$@" || pair_once "$l" "$envset" "$@"
	rows_c=$(grep -cE '^[0-9.]+[kmg]? +[0-9.]+[kmg]? +=[0-9.]+[kmg]? ' "$tmp/cli")
	rows_s=$(grep -cE '^[0-9.]+[kmg]? +[0-9.]+[kmg]? +=[0-9.]+[kmg]? ' "$tmp/srv")
	if [ $crc -eq 0 ] && [ $src -eq 0 ] && [ "$rows_c" -gt 0 ] && [ "$rows_c" -eq "$rows_s" ]; then
		ok "fi_pingpong -p rfshm -e rdm $*: $name ($rows_c sizes, both sides exit 0; last: $(grep -E '^[0-9]' "$tmp/cli" | tail -n 1 | tr -s ' '))"
	else
		bad "fi_pingpong -p rfshm -e rdm $*: $name (client rc=$crc, server rc=$src, rows $rows_c/$rows_s)"
		sed 's/^/  client: /' "$tmp/cli" | tail -n 5; sed 's/^/  server: /' "$tmp/srv" | tail -n 5
	fi
}
pair_once() {
	l=$1 envset=$2; shift 2
	port=$(free_port)
	on "$l" env "$envset" timeout 120 fi_pingpong -p rfshm -e rdm -B "$port" "$@" >"$tmp/srv" 2>&1 &
	spid=$!
	sleep 0.3
	on "$l" env "$envset" timeout 120 fi_pingpong -p rfshm -e rdm -P "$port" "$@" 127.0.0.1 >"$tmp/cli" 2>&1
	crc=$?
	wait "$spid"; src=$?
	[ $crc -eq 0 ] && [ $src -eq 0 ]
}

# providers LIBDIR: the names fi_info -l lists, one per line.
providers() { on "$1" fi_info -l 2>/dev/null | sed -n 's/^\([^ ].*\):$/\1/p'; }
# entries LIBDIR ENV...: the "provider: NAME" lines of fi_info run with
# ENV (VAR=value), as NAMExCOUNT.
entries() { l=$1; shift; on "$l" env "$@" fi_info 2>/dev/null | sed -n 's/^provider: //p' | sort | uniq -c | awk '{print $2 "x" $1}' | tr '\n' ' '; }

# the transfers and settings every host must carry
common() { # LIBDIR
	pair "$1" "all sizes, data check" FI_LOG_LEVEL=warn -S all -c
	pair "$1" "tagged, all sizes, data check" FI_LOG_LEVEL=warn -m tagged -S all -c
	pair "$1" "64 bytes, 1000 iterations" FI_LOG_LEVEL=warn -S 64 -I 1000 -c
	pair "$1" "bounce buffers (FI_RFSHM_CMA=0), all sizes" FI_RFSHM_CMA=0 -S all -c
	# settings through the host's parameters and logging
	"$root/tests/c/shm_settings.sh" "$1" rfshm >"$tmp/settings" 2>&1
	src=$?
	sed -n 's/^\(PASS\|FAIL\) /settings: /p' "$tmp/settings" | while read -r line; do echo "  $line"; done
	if [ $src -eq 0 ]; then ok "settings FI_RFSHM_*: $(tail -n 1 "$tmp/settings")"; else bad "settings FI_RFSHM_*: $(tail -n 1 "$tmp/settings")"; fi
	# logging: the host's FI_LOG_LEVEL and FI_LOG_PROV decide about our
	# lines. An MSG endpoint asked of an RDM-only provider: the matching
	# rules log why at info level. (The host applies FI_LOG_PROV once the
	# provider is registered, so the line from fi_prov_ini itself stays.)
	on "$1" env FI_LOG_LEVEL=info fi_info -p rfshm -t FI_EP_MSG >/dev/null 2>"$tmp/log"
	on "$1" env FI_LOG_LEVEL=info FI_LOG_PROV=^rfshm fi_info -p rfshm -t FI_EP_MSG >/dev/null 2>"$tmp/log_filtered"
	on "$1" env FI_LOG_LEVEL=warn fi_info -p rfshm -t FI_EP_MSG >/dev/null 2>"$tmp/log_warn"
	if grep -a -q '::rfshm:core:init():[0-9]*<info> DL provider rfshm ready' "$tmp/log" \
		&& grep -a -q ':rfshm:core:.*<info> ep_attr->type: requested FI_EP_MSG, supported FI_EP_RDM' "$tmp/log" \
		&& ! grep -a -q ':rfshm:core:.*ep_attr->type' "$tmp/log_filtered" \
		&& ! grep -a -q ':rfshm:' "$tmp/log_warn"; then
		ok "log lines through the host: $(grep -a -m1 ':rfshm:core:.*ep_attr->type' "$tmp/log" | sed 's/^libfabric:[0-9]*:[0-9]*:/libfabric:PID:TIME:/'); none at FI_LOG_LEVEL=warn or with FI_LOG_PROV=^rfshm"
	else
		bad "log lines of rfshm not under the host's FI_LOG_LEVEL/FI_LOG_PROV"; grep -a rfshm "$tmp/log" | head -n 3
	fi
	# the host names the entries: prov_name rfshm, never doubled
	on "$1" fi_info -p rfshm -v >"$tmp/v" 2>&1
	if grep -q '^ *prov_name: rfshm$' "$tmp/v" && ! grep -q 'prov_name: rfshm;' "$tmp/v"; then
		ok "fi_info -p rfshm -v: prov_name: rfshm, $(grep -m1 'api_version' "$tmp/v" | tr -s ' ')"
	else
		bad "fi_info -p rfshm -v: prov_name wrong: $(grep prov_name "$tmp/v" | head -n 2)"
	fi
}

case $mode in
debian)
	sys=/usr/lib/x86_64-linux-gnu/libfabric.so.1
	[ -e "$sys" ] || { bad "no $sys (Debian package libfabric1)"; finish; }
	env -u LD_LIBRARY_PATH LD_DEBUG=libs fi_info -l >/dev/null 2>"$tmp/ld"
	inits=$(sed -n 's/.*calling init: \(.*\(libfabric\.so\.1\|-fi\.so\)\)$/\1/p' "$tmp/ld" | sort -u)
	if echo "$inits" | grep -q '^/.*/x86_64-linux-gnu/libfabric\.so\.1$' && echo "$inits" | grep -qx "$dl/librfshm-fi.so" \
		&& [ "$(echo "$inits" | grep -c 'libfabric\.so\.1$')" -eq 1 ]; then
		ok "Debian's fi_info starts Debian's libfabric.so.1 and our librfshm-fi.so only: $(echo $inits)"
	else
		bad "libraries started: $(echo $inits)"
	fi
	if providers - | grep -qx rfshm && providers - | grep -qx shm; then
		ok "Debian's fi_info -l lists rfshm ($(on - fi_info -l | grep -A1 '^rfshm:' | tail -n 1 | tr -s ' ')) beside upstream's shm"
	else
		bad "fi_info -l: $(providers - | tr '\n' ' ')"
	fi
	e=$(entries - FI_PROVIDER=rfshm)
	case $e in rfshm*) [ "$(echo "$e" | wc -w)" -eq 1 ] && ok "FI_PROVIDER=rfshm: only ours: $e" || bad "FI_PROVIDER=rfshm: $e" ;; *) bad "FI_PROVIDER=rfshm: $e" ;; esac
	e=$(entries - FI_PROVIDER=shm)
	v=$(env -u LD_LIBRARY_PATH FI_PROVIDER=shm fi_info -v 2>/dev/null | sed -n 's/^ *prov_version: //p' | sort -u | tr '\n' ' ')
	case $e in shmx*) [ "$(echo "$e" | wc -w)" -eq 1 ] && ok "FI_PROVIDER=shm: upstream's own: $e(prov_version $v)" || bad "FI_PROVIDER=shm: $e" ;; *) bad "FI_PROVIDER=shm: $e" ;; esac
	common -
	;;
ours)
	lib=$(cd "${3:?usage: rfshm.sh ours DLDIR LIBDIR NOBUILTIN_LIBDIR}" && pwd) || exit 1
	nob=$(cd "${4:?usage: rfshm.sh ours DLDIR LIBDIR NOBUILTIN_LIBDIR}" && pwd) || exit 1
	# No built-in provider, no DL provider: fi_info runs, fi_getinfo has nothing.
	out=$(on "$nob" env -u FI_PROVIDER_PATH FI_PROVIDER_PATH=/nonexistent fi_info 2>&1); rc=$?
	if [ $rc -eq 61 ] && [ "$out" = "fi_getinfo: -61" ]; then
		ok "no built-in provider, none loaded: fi_info exits 61 (fi_getinfo: -FI_ENODATA)"
	else
		bad "no built-in provider: fi_info rc=$rc: $out"
	fi
	# DLDIR holds every DL provider built (make dl): those and nothing else.
	want=$(ls "$dl" | sed -n 's/^lib\(.*\)-fi\.so$/\1/p' | sort | tr '\n' ' ')
	if [ "$(providers "$nob" | sort | tr '\n' ' ')" = "$want" ]; then
		ok "no built-in provider, FI_PROVIDER_PATH: fi_info -l lists the DL providers alone ($want)"
	else
		bad "no built-in provider: fi_info -l: $(providers "$nob" | tr '\n' ' ')"
	fi
	common "$nob"
	# With the built-in shm beside it: both listed, each picked by its name.
	if providers "$lib" | grep -qx shm && providers "$lib" | grep -qx rfshm; then
		ok "built-in shm and DL rfshm both listed"
	else
		bad "fi_info -l: $(providers "$lib" | tr '\n' ' ')"
	fi
	e=$(entries "$lib" FI_PROVIDER=rfshm); f=$(entries "$lib" FI_PROVIDER=shm)
	case "$e|$f" in rfshmx*" |"shmx*" ") ok "FI_PROVIDER picks either: rfshm: $e; shm: $f" ;; *) bad "FI_PROVIDER=rfshm: $e; =shm: $f" ;; esac
	pair "$lib" "beside the built-in shm, all sizes" FI_LOG_LEVEL=warn -S all -c
	;;
*) bad "unknown mode $mode" ;;
esac
finish
