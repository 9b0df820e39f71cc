#!/usr/bin/env bash
# What `make test` runs: each stage in turn (release, asan, fuzz), every one
# of them even when an earlier one failed, so that one run tells everything;
# at the end one line per stage: tests run, passed, failed and its time.
# Exit status 0 only when every stage passed.
#
#   scripts/test-stages.sh [STAGE...]     (default: release asan fuzz)
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

stages=("$@")
[ ${#stages[@]} -gt 0 ] || stages=(release asan fuzz)
logdir=$(mktemp -d /tmp/mcpg-test.XXXXXX)
lines=()
status=0

# "N tests failed out of M" from ctest's closing lines
ctest_counts() {
  local log="$1" run failed
  run=$(sed -n 's/.*tests passed, \([0-9]*\) tests failed out of \([0-9]*\).*/\2/p' "$log" | tail -1)
  failed=$(sed -n 's/.*tests passed, \([0-9]*\) tests failed out of \([0-9]*\).*/\1/p' "$log" | tail -1)
  echo "${run:-0} ${failed:-0}"
}

# "fuzz: N fuzzers, ..." when all passed; else the failed list
fuzz_counts() {
  local log="$1" run failed
  run=$(grep -c '^fuzz: [a-z_]* for ' "$log")
  failed=$(sed -n 's/^fuzz: failed: //p' "$log" | wc -w)
  echo "${run:-0} ${failed:-0}"
}

for stage in "${stages[@]}"; do
  log="$logdir/$stage.log"
  start=$(date +%s)
  case "$stage" in
    release) target=test-release; counter=ctest_counts ;;
    asan)    target=test-asan;    counter=ctest_counts ;;
    fuzz)    target=test-fuzz;    counter=fuzz_counts ;;
    *) echo "test-stages: no stage '$stage' (release, asan, fuzz)" >&2; exit 2 ;;
  esac
  make --no-print-directory "$target" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  secs=$(($(date +%s) - start))
  read -r run failed < <($counter "$log")
  if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then
    verdict="FAILED before its tests ran to the end (build error?), exit $rc"
  elif [ "$rc" -ne 0 ]; then
    verdict="FAILED"
  else
    verdict="ok"
  fi
  [ "$rc" -eq 0 ] || status=1
  lines+=("$(printf 'test: %-8s %4d run, %4d passed, %3d failed, %4d s  %s' "$stage" "$run" \
    $((run - failed)) "$failed" "$secs" "$verdict")")
done

echo
echo "test: summary (logs in $logdir)"
printf '%s\n' "${lines[@]}"
exit $status
