#!/usr/bin/env bash
# What reloading costs the calls in flight, from one run: the same gateway
# measured in steady state and while its backend_mock code is swapped and
# reloaded every --every-ms (POST /admin/reload, the file alternating
# between build/modules/backend_mock.so and the test build that answers
# "Echo v2: "), alternated for --rounds rounds. Per run: calls/s, p50/p99,
# CPU per call (Δ utime+stime of the gateway over good calls), memory,
# threads; then the reloads' publish times (the kernel's own figure, from
# the answers) and the time from SIGHUP to the "serves" log line.
#
#   bench/reload.sh                     3 rounds of 5 s, a reload every 200 ms
#   bench/reload.sh --every-ms 50 --json reload.jsonl
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LOAD=$ROOT/build/bin/mcpg-load
MCPG=$ROOT/build/bin/mcpg
V2=$ROOT/build/tests/reload/v2/backend_mock.so
GW_CPU=0 LOAD_CPU=1
PORT=18380
DURATION=5 WARMUP=1 CONNECTIONS=32 ROUNDS=3 EVERY_MS=200
TOOL=echo MESSAGE=hello JSON_OUT=""
LOAD_EXTRA=()
ME=reload
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

usage() { sed -n 2,13p "$0"; }
own_opt() {
    case $1 in
    --every-ms) EVERY_MS=$2 ;;
    *) return 1 ;;
    esac
}
parse_options "rounds duration connections port mcpg json" "$@"
[ -f "$V2" ] || die "no $V2: build the tests first (make build)"
command -v curl >/dev/null || die "curl is needed"

CLK_TCK=$(getconf CLK_TCK)
TMP=$(mktemp -d /tmp/mcpg-reload.XXXXXX)
RUNS_FILE=$TMP/runs.txt
GW=""
RELOADER=""
cleanup() {
    [ -z "$RELOADER" ] || stop_pid "$RELOADER"
    stop_pid "$GW"
    [ -n "${KEEP_TMP:-}" ] || rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
progress() { echo "$ME: $*" >&2; }

# A module folder of our own: the build's modules, backend_mock a file we swap.
mkdir "$TMP/modules"
for f in "$ROOT"/build/modules/*.so; do ln -s "$f" "$TMP/modules/"; done
rm "$TMP/modules/backend_mock.so"
cp "$ROOT/build/modules/backend_mock.so" "$TMP/modules/backend_mock.so"
cat >"$TMP/m.json" <<EOF
{ "description": "bench/reload.sh",
  "gateway": { "listen": ["127.0.0.1:$PORT"], "workers": 1, "module_dir": "$TMP/modules",
               "log_level": "info", "server": { "access_log": false, "admin_token_env": "BENCH_ADMIN" } },
  "cluster": { "kind": "single_node" },
  "modules": [ { "name": "mock", "module": "backend_mock", "inline_dispatch": true,
                 "config": { "tools": [ { "name": "echo" } ] } } ] }
EOF
export BENCH_ADMIN=bench-token
taskset -c "$GW_CPU" "$MCPG" --config "$TMP/m.json" >"$TMP/gw.log" 2>&1 &
GW=$!
wait_port "$GW" "$PORT" || { cat "$TMP/gw.log" >&2; die "the gateway did not start"; }

# The reloader: swap the file, reload, note the publish time; until killed.
reloader() {
    set +e # a refused or slow reload is counted, never the end of the reloader
    local i=0 src
    while :; do
        if (( i % 2 )); then src=$ROOT/build/modules/backend_mock.so; else src=$V2; fi
        cp "$src" "$TMP/modules/.swap" && mv "$TMP/modules/.swap" "$TMP/modules/backend_mock.so"
        curl -s -m 5 -X POST -H "Authorization: Bearer $BENCH_ADMIN" \
            "http://127.0.0.1:$PORT/admin/reload" >"$TMP/answer.json"
        if grep -q '"published_ms"' "$TMP/answer.json"; then
            grep -o '"published_ms":[0-9.]*' "$TMP/answer.json" | cut -d: -f2 >>"$TMP/published.txt"
        else
            cat "$TMP/answer.json" >>"$TMP/refused.txt"; echo >>"$TMP/refused.txt"
        fi
        i=$((i + 1))
        sleep "$(awk -v m="$EVERY_MS" 'BEGIN { printf "%.3f", m / 1000 }')"
    done
}
window_hook() { # start|end LABEL
    [ "$2" = reloading ] || return 0
    if [ "$1" = start ]; then
        reloader & RELOADER=$!
    else
        stop_pid "$RELOADER"; RELOADER=""
    fi
}
WINDOW_HOOK=window_hook

progress "placement: the gateway (1 loop) on core $GW_CPU, mcpg-load and the reloader on core $LOAD_CPU; a reload every $EVERY_MS ms"
print_header
failed=0
for ROUND in $(seq "$ROUNDS"); do
    for n in steady reloading; do
        progress "round $ROUND/$ROUNDS: $n (measure ${DURATION} s)"
        measure "$n" "$GW" "$PORT" --wire stateless || failed=1
    done
done

# SIGHUP to publish: the signal's log line to the "serves" line, five times.
for _ in 1 2 3 4 5; do
    before=$(grep -c 'reload: generation' "$TMP/gw.log" || true)
    kill -HUP "$GW"
    for _ in $(seq 100); do
        [ "$(grep -c 'reload: generation .* serves' "$TMP/gw.log" || true)" -gt "$before" ] && break
        sleep 0.02
    done
    sleep 0.3
done
python3 - "$TMP/gw.log" >"$TMP/sighup.txt" <<'PY'
import json, sys
from datetime import datetime
t = None
for line in open(sys.argv[1]):
    try:
        r = json.loads(line)
    except ValueError:
        continue
    ts = datetime.strptime(r["ts"], "%Y-%m-%dT%H:%M:%S.%fZ").timestamp()
    if r["msg"].startswith("SIGHUP: reloading"):
        t = ts
    elif t is not None and " serves (after " in r["msg"]:
        print("%.2f" % ((ts - t) * 1000))
        t = None
PY

echo
echo "medians over $ROUNDS round(s) ('$ME: warning' lines above flag runs whose core was not the gateway's alone):"
printf "%-10s %10s %8s %8s %11s %9s %8s\n" target calls/s p50_us p99_us cpu_us/call VmRSS_kB threads
for n in steady reloading; do
    printf "%-10s %10.0f %8.0f %8.0f %11.2f %9s %8s\n" "$n" "$(median "$n" 4 | cut -d' ' -f1)" \
        "$(median "$n" 5 | cut -d' ' -f1)" "$(median "$n" 6 | cut -d' ' -f1)" \
        "$(median "$n" 2 | cut -d' ' -f1)" "$(median "$n" 8 | cut -d' ' -f1)" "$(median "$n" 9 | cut -d' ' -f1)"
done
stat() { sort -g "$1" | awk '{v[NR]=$1} END { if (NR) printf "%d, median %.1f ms, max %.1f ms", NR, (NR % 2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2), v[NR]; else printf "none" }'; }
echo "reloads during the load: $(stat "$TMP/published.txt") (request read to every loop serving);" \
     "answered otherwise: $(grep -c . "$TMP/refused.txt" 2>/dev/null || echo 0)"
echo "SIGHUP to the new generation serving: $(stat "$TMP/sighup.txt")"
errors=$(grep -c '"level":"error"' "$TMP/gw.log" || true)
echo "gateway errors logged: $errors; images pinned: $(grep -o 'images pinned so far: [0-9]*' "$TMP/gw.log" | tail -n1 | awk '{print $NF}')"
exit "$failed"
