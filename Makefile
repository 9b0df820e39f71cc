# mcpg: the two commands are `make run` and `make test` (see README.md).
#
#   make build   Release build in build/ (build/bin/mcpg, build/modules/*.so)
#   make run     install what the gateway needs (no Node.js: make deps-run), build
#                only the gateway and its modules (target gateway, no tests), start
#                it on conf/mcpg.json
#   make test    install what is missing, Release build + every test, then an
#                ASan+UBSan (gcc, Debug) build in build-asan/ + every test again,
#                then each fuzzer for FUZZ_TEST_SECONDS (make test-fuzz); every
#                stage runs, and the end is one summary line per stage
#   make test-stress  both builds' suites 10 times each beside a busy core, to
#                find tests that fail by chance (scripts/test-stress.sh)
#   make bench   install what is missing, build, run the benchmarks (bench/README.md):
#                bench/run.sh when it exists, else bench/cpu-per-call.sh --start --nginx;
#                extra options go in BENCH_ARGS="..."
#   make report  RESULTS="bench/results-*.jsonl": docs/benchmarks/report.md and its charts
#                from results files (bench/report; more options in REPORT_ARGS="...")
#   make fuzz    install what is missing, build the libFuzzer fuzzers (clang) in
#                build-fuzz/ and run each for FUZZ_SECONDS (docs/fuzzing.md)
#   make install Release build in build/ for PREFIX (default /usr/local), then
#                `cmake --install` into $(DESTDIR)$(PREFIX): bin/mcpg, mcpg-load,
#                mcpg-apikey; lib/mcpg/modules/; the SDK; share/mcpg/conf/
#                (make install PREFIX=/opt/mcpg DESTDIR=/tmp/root)
#   make deb     build/mcpg_<version>-1_<arch>.deb from a Release build in
#                build-deb/ (packaging/deb/build.sh), then lintian on it
#   make sdk-reference  the SDK reference (doxygen; docs/sdk/Doxyfile) from the
#                public headers into build/sdk-reference/: html/index.html, man/man3/
#   make clean   remove build/, build-asan/, build-fuzz/ and build-deb/

SHELL := /bin/bash
.DEFAULT_GOAL := build

BUILD_DIR      := build
ASAN_BUILD_DIR := build-asan
FUZZ_BUILD_DIR := build-fuzz
DEB_BUILD_DIR  := build-deb
PREFIX         ?= /usr/local
DESTDIR        ?=
# seconds each fuzzer runs: `make fuzz`, and the short run `make test` ends with
FUZZ_SECONDS      ?= 300
FUZZ_TEST_SECONDS ?= 10
CONFIG         ?= conf/mcpg.json
# Tests are independent (free ports, own temp dirs): run two at a time.
CTEST_JOBS     ?= 2
CTEST_FLAGS    := --output-on-failure --no-tests=error -j$(CTEST_JOBS)

SAN_ENV := ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

.PHONY: deps deps-run build build-asan build-fuzz run install deb test test-release test-asan test-fuzz test-stress fuzz bench report sdk-reference clean

# deps: everything `make test` needs; deps-run: only what `make run` needs.
deps:
	@bash scripts/install-deps.sh

deps-run:
	@bash scripts/install-deps.sh --run

# MCPG_TESTS is set both ways explicitly: `make run` turns the tests off in the
# build tree (configuring them needs python3), `make build` turns them back on.
build:
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Release -DMCPG_TESTS=ON
	cmake --build $(BUILD_DIR)

build-asan:
	cmake -S . -B $(ASAN_BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Debug \
	      -DMCPG_SANITIZE=ON -DCMAKE_C_COMPILER=gcc
	cmake --build $(ASAN_BUILD_DIR)

# Only the fuzzers and what they link are built here (target `fuzzers`).
build-fuzz:
	cmake -S . -B $(FUZZ_BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	      -DMCPG_FUZZ=ON -DCMAKE_C_COMPILER=clang
	cmake --build $(FUZZ_BUILD_DIR) --target fuzzers

run:
	@$(MAKE) --no-print-directory deps-run
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Release -DMCPG_TESTS=OFF
	cmake --build $(BUILD_DIR) --target gateway
	exec $(BUILD_DIR)/bin/mcpg --config $(CONFIG)

# Like run, no tests: what is installed needs none to build.
install:
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Release -DMCPG_TESTS=OFF \
	      -DCMAKE_INSTALL_PREFIX=$(PREFIX)
	cmake --build $(BUILD_DIR)
	DESTDIR="$(DESTDIR)" cmake --install $(BUILD_DIR)

# lintian's errors fail the target; its warnings are printed. (`make deps`
# installs lintian with the rest of what the tests need.)
deb:
	@command -v lintian >/dev/null || { echo "make deb: lintian is missing (make deps installs it)" >&2; exit 1; }
	deb=$$(bash packaging/deb/build.sh --build $(DEB_BUILD_DIR) --out $(BUILD_DIR)) && \
	  lintian --fail-on error "$$deb" && echo "$$deb"

test-release:
	@$(MAKE) --no-print-directory build
	cd $(BUILD_DIR) && ctest $(CTEST_FLAGS)

test-asan:
	@$(MAKE) --no-print-directory build-asan
	cd $(ASAN_BUILD_DIR) && $(SAN_ENV) ctest $(CTEST_FLAGS)

# Every fuzzer for FUZZ_TEST_SECONDS: any crash or broken invariant fails.
test-fuzz:
	@$(MAKE) --no-print-directory build-fuzz
	bash scripts/fuzz.sh --build $(FUZZ_BUILD_DIR) $(FUZZ_TEST_SECONDS)

# Every stage runs even after one failed; the end is one line per stage.
test:
	@$(MAKE) --no-print-directory deps
	@bash scripts/test-stages.sh release asan fuzz

# The suite again and again beside a busy core, both builds, to find tests
# that fail by chance (scripts/test-stress.sh; STRESS_ARGS="--runs 3 build").
STRESS_ARGS ?=
test-stress:
	@$(MAKE) --no-print-directory deps
	@$(MAKE) --no-print-directory build
	@$(MAKE) --no-print-directory build-asan
	bash scripts/test-stress.sh $(STRESS_ARGS)

fuzz:
	@$(MAKE) --no-print-directory deps
	@$(MAKE) --no-print-directory build-fuzz
	bash scripts/fuzz.sh --build $(FUZZ_BUILD_DIR) $(FUZZ_SECONDS)

bench:
	@$(MAKE) --no-print-directory deps
	@$(MAKE) --no-print-directory build
	@if [ -f bench/run.sh ]; then exec bash bench/run.sh $(BENCH_ARGS); \
	 else exec bash bench/cpu-per-call.sh --start --nginx $(BENCH_ARGS); fi

report:
	@[ -n "$(RESULTS)" ] || { echo 'usage: make report RESULTS="bench/results-....jsonl" [REPORT_ARGS="..."]' >&2; exit 2; }
	python3 bench/report $(RESULTS) $(REPORT_ARGS)

# Configures build/ as `make build` does, then only the reference target.
sdk-reference:
	@command -v doxygen >/dev/null || { echo "make sdk-reference: doxygen is missing (make deps installs it)" >&2; exit 1; }
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Release -DMCPG_TESTS=ON
	cmake --build $(BUILD_DIR) --target sdk_reference

clean:
	rm -rf $(BUILD_DIR) $(ASAN_BUILD_DIR) $(FUZZ_BUILD_DIR) $(DEB_BUILD_DIR)
