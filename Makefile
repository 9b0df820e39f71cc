# mcpg: the two commands are `make run` and `make test` (see README.md).
#
#   make build   Release build in build/ (build/bin/mcpg, build/modules/*.so)
#   make run     install what is missing, build, start the gateway on conf/mcpg.json
#   make test    install what is missing, Release build + every test, then an
#                ASan+UBSan (gcc, Debug) build in build-asan/ + every test again
#   make bench   install what is missing, build, run the benchmarks (bench/README.md):
#                bench/run.sh when it exists, else bench/cpu-per-call.sh --start --nginx;
#                extra options go in BENCH_ARGS="..."
#   make report  RESULTS="bench/results-*.jsonl": docs/benchmarks-report.md and its charts
#                from results files (bench/report; more options in REPORT_ARGS="...")
#   make clean   remove build/ and build-asan/

SHELL := /bin/bash
.DEFAULT_GOAL := build

BUILD_DIR      := build
ASAN_BUILD_DIR := build-asan
CONFIG         ?= conf/mcpg.json
# Tests are independent (free ports, own temp dirs): run two at a time.
CTEST_JOBS     ?= 2
CTEST_FLAGS    := --output-on-failure --no-tests=error -j$(CTEST_JOBS)

SAN_ENV := ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

.PHONY: deps build build-asan run test test-release test-asan bench report clean

deps:
	@bash scripts/install-deps.sh

build:
	cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Release
	cmake --build $(BUILD_DIR)

build-asan:
	cmake -S . -B $(ASAN_BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=Debug \
	      -DMCPG_SANITIZE=ON -DCMAKE_C_COMPILER=gcc
	cmake --build $(ASAN_BUILD_DIR)

run:
	@$(MAKE) --no-print-directory deps
	@$(MAKE) --no-print-directory build
	exec $(BUILD_DIR)/bin/mcpg --config $(CONFIG)

test-release:
	@$(MAKE) --no-print-directory build
	cd $(BUILD_DIR) && ctest $(CTEST_FLAGS)

test-asan:
	@$(MAKE) --no-print-directory build-asan
	cd $(ASAN_BUILD_DIR) && $(SAN_ENV) ctest $(CTEST_FLAGS)

test:
	@$(MAKE) --no-print-directory deps
	@$(MAKE) --no-print-directory test-release
	@$(MAKE) --no-print-directory test-asan

bench:
	@$(MAKE) --no-print-directory deps
	@$(MAKE) --no-print-directory build
	@if [ -f bench/run.sh ]; then exec bash bench/run.sh $(BENCH_ARGS); \
	 else exec bash bench/cpu-per-call.sh --start --nginx $(BENCH_ARGS); fi

report:
	@[ -n "$(RESULTS)" ] || { echo 'usage: make report RESULTS="bench/results-....jsonl" [REPORT_ARGS="..."]' >&2; exit 2; }
	python3 bench/report $(RESULTS) $(REPORT_ARGS)

clean:
	rm -rf $(BUILD_DIR) $(ASAN_BUILD_DIR)
