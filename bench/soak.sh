#!/usr/bin/env bash
# bench/soak.sh [SECONDS]: the soak of tests/integration/test_soak.py run for
# minutes (default 300 s) on the Release build: both wires' calls, legacy
# sessions opened and ended, a stdio upstream SIGKILLed every 4 s, a reload
# every second; a line a second with resident memory, open fds, threads and
# the counts so far; at the end the idle, warm and settled figures, and the
# verdict (fds and threads back to idle, memory within its bound).
#
#   bench/soak.sh [SECONDS]        (or --seconds SECONDS, as bench/run.sh passes it)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SECONDS_WANTED=300
ME=soak
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

usage() { sed -n 2,9p "$0"; }
own_opt() {
    case $1 in
    --seconds) SECONDS_WANTED=$2 ;;
    *) return 1 ;;
    esac
}
if [[ ${1:-} =~ ^[0-9]+$ ]]; then SECONDS_WANTED=$1; shift; fi
parse_options "" "$@"
[ -x "$ROOT/build/bin/mcpg" ] || { echo "bench/soak.sh: build first (make build)" >&2; exit 2; }
MCPG_SOAK_SECONDS=$SECONDS_WANTED exec python3 "$ROOT/tests/integration/test_soak.py" \
    --bin "$ROOT/build/bin/mcpg" --modules "$ROOT/build/modules" --source "$ROOT"
