#!/usr/bin/env bash
# Runs the whole test suite again and again under extra CPU load, to find tests
# that fail by chance (a race in the product, or a test that waits on time
# instead of on a condition). `make test-stress` calls it after building.
#
#   scripts/test-stress.sh [--runs N] [--load hog|suite|none] [--jobs J]
#                          [--log DIR] [BUILD_DIR...]
#
#   --runs N     runs of the suite per build directory (default 10)
#   --load hog   a busy loop pinned to CPU 0 beside every run (default)
#          suite the same suite run twice at once (two ctest processes)
#          none  no extra load
#   --jobs J     ctest -j (default 2, as `make test`)
#   --log DIR    where each run's ctest output is kept (default a temp folder)
#   BUILD_DIR    build folders to run (default: build build-asan)
#
# Exit status 0 only when no test failed in any run. The end of the output is a
# table: per build, the runs, the runs that failed, and each failing test with
# how many times it failed; each failure's output is in the log folder.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

runs=10 load=hog jobs=2 logdir=""
builds=()
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --load) load="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    --log) logdir="$2"; shift 2 ;;
    -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "test-stress: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) builds+=("$1"); shift ;;
  esac
done
[ ${#builds[@]} -gt 0 ] || builds=(build build-asan)
case "$load" in hog|suite|none) ;; *) echo "test-stress: --load is hog, suite or none, not '$load'" >&2; exit 2 ;; esac
[[ "$runs" =~ ^[0-9]+$ ]] && [ "$runs" -gt 0 ] || { echo "test-stress: --runs wants a positive count, not '$runs'" >&2; exit 2; }
for b in "${builds[@]}"; do
  [ -f "$b/CTestTestfile.cmake" ] || { echo "test-stress: $b is not a build folder (make build / make build-asan first)" >&2; exit 2; }
done
[ -n "$logdir" ] || logdir=$(mktemp -d /tmp/mcpg-stress.XXXXXX)
mkdir -p "$logdir"

san_env=(ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1)
hog_pid=""
stop_hog() { [ -z "$hog_pid" ] || { kill "$hog_pid" 2>/dev/null; wait "$hog_pid" 2>/dev/null; hog_pid=""; }; }
trap 'stop_hog; exit 130' INT TERM
trap stop_hog EXIT

# One ctest run; its failed tests are appended to $2 (one name per line).
run_suite() {
  local build="$1" failed="$2" out="$3"
  (cd "$build" && env "${san_env[@]}" ctest --output-on-failure -j"$jobs" >"$out" 2>&1)
  local rc=$?
  sed -n 's/^[[:space:]]*[0-9]\+ - \([^ ]*\) (.*/\1/p' "$out" >>"$failed"
  return $rc
}

declare -A fails_of_build
summary=()
for b in "${builds[@]}"; do
  : >"$logdir/$(basename "$b").failed"
  bad_runs=0
  for i in $(seq 1 "$runs"); do
    start=$(date +%s)
    out="$logdir/$(basename "$b").run$i"
    before=$(wc -l <"$logdir/$(basename "$b").failed")
    if [ "$load" = hog ]; then
      taskset -c 0 sh -c 'while :; do :; done' & hog_pid=$!
    fi
    if [ "$load" = suite ]; then
      run_suite "$b" "$logdir/$(basename "$b").failed" "$out.a" & p=$!
      run_suite "$b" "$logdir/$(basename "$b").failed" "$out.b"
      wait $p
    else
      run_suite "$b" "$logdir/$(basename "$b").failed" "$out"
    fi
    stop_hog
    after=$(wc -l <"$logdir/$(basename "$b").failed")
    new=$((after - before))
    [ $new -eq 0 ] || bad_runs=$((bad_runs + 1))
    printf 'test-stress: %s run %d/%d: %d failed, %ds%s\n' "$b" "$i" "$runs" "$new" $(($(date +%s) - start)) \
      "$([ $new -eq 0 ] || echo " ($(tail -n $new "$logdir/$(basename "$b").failed" | tr '\n' ' '))")"
  done
  fails_of_build[$b]=$bad_runs
  summary+=("$b")
done

echo
echo "test-stress: load=$load jobs=$jobs runs=$runs logs=$logdir"
total=0
for b in "${summary[@]}"; do
  printf '  %-12s %d runs, %d with a failure\n' "$b" "$runs" "${fails_of_build[$b]}"
  sort "$logdir/$(basename "$b").failed" | uniq -c | sort -rn | sed 's/^/      /'
  total=$((total + ${fails_of_build[$b]}))
done
[ $total -eq 0 ]
