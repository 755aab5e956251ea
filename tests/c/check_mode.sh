# Sourced by the C test scripts (tests/c/*.sh, tests/xpu/run.sh): how their
# programs are built and run.
#   RF_CHECK=asan (default)  built with ASan and UBSan, run with leak checking
#   RF_CHECK=valgrind        built without sanitizers (-g), every run under
#                            valgrind memcheck, forked children included: any
#                            memory error or a definite leak in any process
#                            fails the run. Time limits are multiplied by
#                            RF_VALGRIND_SLOWDOWN (default 10). With
#                            RF_VALGRIND_LOG=FILE, one line per run is
#                            appended to FILE (processes, clean ones, status).
# Provides $SAN_CFLAGS (for cc) and rf_run SECONDS PROGRAM [ARGS...].

RF_CHECK=${RF_CHECK:-asan}
case $RF_CHECK in
asan) SAN_CFLAGS="-fsanitize=address,undefined -fno-sanitize-recover=all" ;;
valgrind) SAN_CFLAGS="-g" ;;
*) echo "RF_CHECK must be asan or valgrind, not '$RF_CHECK'" >&2; exit 2 ;;
esac

rf_run() {
	rf_secs=$1; shift
	if [ "$RF_CHECK" != valgrind ]; then
		ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} timeout "$rf_secs" "$@"
		return
	fi
	rf_vg=$(mktemp -d "${TMPDIR:-/tmp}/vg.XXXXXX")
	rf_rc=0
	timeout $((rf_secs * ${RF_VALGRIND_SLOWDOWN:-10})) valgrind --error-exitcode=9 --leak-check=full \
		--show-possibly-lost=no --errors-for-leak-kinds=definite --child-silent-after-fork=no \
		--log-file="$rf_vg/%p.log" "$@" || rf_rc=$?
	# One log per process. A process killed by a signal (a test's victim)
	# has no summary; every other one must report no error.
	rf_bad=0
	for rf_f in "$rf_vg"/*.log; do
		[ -e "$rf_f" ] || continue
		if grep -q 'ERROR SUMMARY: [1-9]' "$rf_f"; then
			echo "valgrind: errors in process $(basename "$rf_f" .log):" >&2
			cat "$rf_f" >&2
			rf_bad=1
		fi
	done
	if [ -n "${RF_VALGRIND_LOG:-}" ]; then
		echo "$*: $(ls "$rf_vg" | wc -l) process(es), $(grep -l 'ERROR SUMMARY: 0 errors' "$rf_vg"/*.log 2>/dev/null | wc -l) with a clean summary, status $rf_rc" \
			>>"$RF_VALGRIND_LOG"
	fi
	rm -rf "$rf_vg"
	[ "$rf_rc" -eq 0 ] && [ "$rf_bad" -eq 0 ]
}
