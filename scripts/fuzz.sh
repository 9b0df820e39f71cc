#!/usr/bin/env bash
# Run every fuzzer of build-fuzz/ (docs/fuzzing.md) for SECONDS each, one
# after the other (the machine's cores are shared), and print what each did.
#
#   scripts/fuzz.sh [--build DIR] SECONDS [FUZZER...]
#
# Each fuzzer starts from its seeds (tests/fuzz/corpus/<name>) and its
# regressions (tests/fuzz/regressions/<name>), read only; what it finds new
# goes to DIR/corpus/<name>, a crash to DIR/crashes/<name>/. Exit 1 when any
# fuzzer crashed or broke an invariant (its input is named), else 0.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=build-fuzz
if [ "${1:-}" = "--build" ]; then BUILD=$2; shift 2; fi
SECONDS_EACH=${1:?usage: scripts/fuzz.sh [--build DIR] SECONDS [FUZZER...]}
shift
FUZZERS=("$@")
if [ "${#FUZZERS[@]}" -eq 0 ]; then
  FUZZERS=(fuzz_http fuzz_wire fuzz_upstream fuzz_manifest fuzz_jwt fuzz_ffi_args fuzz_judge
           fuzz_param_headers)
fi

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

failed=()
for f in "${FUZZERS[@]}"; do
  exe=$BUILD/fuzz/$f
  [ -x "$exe" ] || { echo "fuzz: $exe is missing (make build-fuzz)" >&2; exit 1; }
  work=$BUILD/corpus/$f crashes=$BUILD/crashes/$f
  mkdir -p "$work" "$crashes"
  opts=()
  [ -f "tests/fuzz/dict/$f.dict" ] && opts+=(-dict="tests/fuzz/dict/$f.dict")
  seeds=("tests/fuzz/corpus/$f")
  [ -d "tests/fuzz/regressions/$f" ] && seeds+=("tests/fuzz/regressions/$f")
  log=$BUILD/$f.log
  echo "fuzz: $f for ${SECONDS_EACH}s"
  set +e
  "$exe" -max_total_time="$SECONDS_EACH" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
         -artifact_prefix="$crashes/" "${opts[@]}" "$work" "${seeds[@]}" > "$log" 2>&1
  rc=$?
  set -e
  # the last status line (executions, cov: and ft:) and the final stats
  { grep -E '^#[0-9]+' "$log" | tail -1
    grep -E '^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)' "$log"; } |
    sed "s/^/fuzz: $f: /" || true
  if [ $rc -ne 0 ]; then
    { grep -E 'invariant broken|ERROR: |SUMMARY|Test unit written|exiting' "$log" | head -5; } |
      sed "s/^/fuzz: $f: /" || true
    echo "fuzz: $f FAILED (exit $rc); full output in $log" >&2
    failed+=("$f")
  fi
done

if [ "${#failed[@]}" -gt 0 ]; then
  echo "fuzz: failed: ${failed[*]}" >&2
  exit 1
fi
echo "fuzz: ${#FUZZERS[@]} fuzzers, ${SECONDS_EACH}s each, no crash"
