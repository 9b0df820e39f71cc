#!/usr/bin/env bash
# Gateway CPU per call, measured the way docs/ and the roadmap quote it:
# the gateway pinned to one core, mcpg-load on the other, CPU per call =
# Δ(utime+stime) of the gateway process over the measured run / good calls.
# Optionally nginx answers the same body statically on the same core, and the
# two are printed side by side with their ratio (only ratios survive a noisy
# VM). See bench/README.md.
#
#   bench/cpu-per-call.sh --start --nginx          start mcpg and nginx, compare
#   bench/cpu-per-call.sh --pid 1234 --port 8080   a gateway already running
#   bench/cpu-per-call.sh --nginx                  nginx alone (tests mcpg-load)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LOAD=$ROOT/build/bin/mcpg-load
MCPG=$ROOT/build/bin/mcpg
CONFIG=$ROOT/conf/bench.json
GW_CPU=0 LOAD_CPU=1
PORT=18080 NGINX_PORT=18081
DURATION=10 WARMUP=2 CONNECTIONS=64 ROUNDS=1
TOOL=echo MESSAGE=hello
GW_PID="" START=0 NGINX=0 BODY_FILE="" JSON_OUT=""
LOAD_EXTRA=()
ME=cpu-per-call
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

usage() {
    cat <<EOF
usage: $0 [--start | --pid PID] [--nginx] [options] [-- mcpg-load options]
  --start              start $MCPG --config CONFIG --listen 127.0.0.1:PORT on the gateway core
  --pid PID            measure a running gateway listening on 127.0.0.1:PORT instead
  --nginx              also measure nginx serving the same answer statically on the gateway core
  --port P             gateway port (default $PORT); --nginx-port P (default $NGINX_PORT)
  --duration S         measured seconds per run (default $DURATION)
  --warmup S           seconds of load before each run, in a separate mcpg-load (default $WARMUP)
  --connections N      (default $CONNECTIONS)   --tool NAME (default $TOOL)   --message TEXT
  --rounds N           alternate nginx and gateway N times and report medians (default $ROUNDS)
  --gw-cpu N / --load-cpu N   cores (default $GW_CPU / $LOAD_CPU)
  --mcpg PATH  --config PATH  --load PATH    binaries and config to use
  --body FILE          nginx's answer (default: the gateway's own answer, else a built-in echo answer)
  --json FILE          append one JSON line per run (mcpg-load's figures plus the CPU ones)
EOF
}

own_opt() {
    case $1 in
    --start) START=1; flag ;;
    --pid) GW_PID=$2 ;;
    --nginx) NGINX=1; flag ;;
    --nginx-port) NGINX_PORT=$2 ;;
    --body) BODY_FILE=$2 ;;
    *) return 1 ;;
    esac
}
parse_options "port duration warmup connections tool message rounds gw-cpu load-cpu mcpg config load json load-args" "$@"

[ -x "$LOAD" ] || die "no $LOAD: build it (cmake --build build --target mcpg-load)"
[ "$START" = 1 ] && [ -n "$GW_PID" ] && die "--start and --pid exclude each other"
[ "$START" = 1 ] || [ -n "$GW_PID" ] || [ "$NGINX" = 1 ] || { usage >&2; exit 2; }
CLK_TCK=$(getconf CLK_TCK)
TMP=$(mktemp -d /tmp/mcpg-cpu.XXXXXX)
STARTED_GW="" NGINX_MASTER=""

RUNS_FILE=$TMP/runs.txt

cleanup() {
    stop_pid "$STARTED_GW"
    stop_pid "$NGINX_MASTER" QUIT # graceful: the master stops its worker
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The answer nginx serves: given, else the gateway's own, else a plain echo answer.
prepare_body() {
    if [ -n "$BODY_FILE" ]; then cp "$BODY_FILE" "$TMP/body.json"; return; fi
    if [ -n "$GW_PID" ] && gateway_answer "$PORT" "$TMP/body.json"; then return; fi
    echo_answer >"$TMP/body.json"
}

# ---- the run ----
if [ "$START" = 1 ]; then
    start_gateway mcpg "$CONFIG" "$PORT"
    STARTED_GW=$STARTED_PID GW_PID=$STARTED_PID
fi
if [ -n "$GW_PID" ]; then
    kill -0 "$GW_PID" 2>/dev/null || die "no process $GW_PID"
    aff=$(taskset -pc "$GW_PID" | sed 's/.*: //')
    [ "$aff" = "$GW_CPU" ] || echo "cpu-per-call: note: pid $GW_PID may run on cores '$aff', not only $GW_CPU" >&2
fi
if [ "$NGINX" = 1 ]; then prepare_body; start_nginx "$NGINX_PORT" "$TMP/body.json"; fi
print_header

failed=0
for ROUND in $(seq "$ROUNDS"); do
    if [ "$NGINX" = 1 ]; then measure nginx "$NGINX_WORKER" "$NGINX_PORT" --no-id-check || failed=1; fi
    if [ -n "$GW_PID" ]; then measure mcpg "$GW_PID" "$PORT" || failed=1; fi
done

if [ "$ROUNDS" -gt 1 ] || { [ "$NGINX" = 1 ] && [ -n "$GW_PID" ]; }; then
    ng=$(median nginx); gw=$(median mcpg)
    for t in nginx mcpg; do
        m=$(median $t); [ -n "$m" ] || continue
        c=$(clean_runs $t); note="of $c clean run(s)"; [ "$c" -gt 0 ] || note="of ${m#* } run(s), NONE CLEAN"
        printf '%-6s median CPU per call %s us, %s\n' "$t" "${m%% *}" "$note"
    done
    if [ -n "$ng" ] && [ -n "$gw" ]; then
        trust=""
        [ "$(clean_runs nginx)" -gt 0 ] && [ "$(clean_runs mcpg)" -gt 0 ] || trust=" (NOT TRUSTWORTHY: no clean run of one side)"
        awk -v g="${gw%% *}" -v n="${ng%% *}" -v t="$trust" \
            'BEGIN { if (n > 0) printf "mcpg / nginx CPU per call: %.2fx%s\n", g / n, t }'
    fi
fi
exit "$failed"
