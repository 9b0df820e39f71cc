#!/usr/bin/env bash
# bench/soak.sh [SECONDS]: the soak of tests/integration/test_soak.py run for
# minutes (default 300 s) on the Release build: both wires' calls, legacy
# sessions opened and ended, a stdio upstream SIGKILLed every 4 s, a reload
# every second; a line a second with resident memory, open fds, threads and
# the counts so far; at the end the idle, warm and settled figures, and the
# verdict (fds and threads back to idle, memory within its bound).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SECONDS_WANTED=${1:-300}
[ -x "$ROOT/build/bin/mcpg" ] || { echo "bench/soak.sh: build first (make build)" >&2; exit 2; }
MCPG_SOAK_SECONDS=$SECONDS_WANTED exec python3 "$ROOT/tests/integration/test_soak.py" \
    --bin "$ROOT/build/bin/mcpg" --modules "$ROOT/build/modules" --source "$ROOT"
