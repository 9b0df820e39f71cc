#!/usr/bin/env bash
# Latency against offered load: the gateway's capacity measured closed-loop,
# then open-loop runs (mcpg-load --rate: calls due on a fixed schedule,
# latency counted from each call's due time, coordinated omission corrected)
# at fractions of it, lowest first. Printed per rate: offered and served
# calls/s, p50/p99/p99.9, the most calls that waited for a connection, and
# gateway CPU per call; then p99 at half the capacity and the first offered
# rate whose p99 passed 2 ms (interpolated between the two rates around it).
#
#   bench/openloop.sh                              conf/bench.json (durable audit)
#   bench/openloop.sh --config conf/bench-tuned.json --fractions "0.25 0.5 0.75"
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LOAD=$ROOT/build/bin/mcpg-load
MCPG=$ROOT/build/bin/mcpg
GW_CPU=0 LOAD_CPU=1
PORT=18580
CONFIG=$ROOT/conf/bench.json
DURATION=5 WARMUP=2 CONNECTIONS=64
FRACTIONS="0.1 0.25 0.5 0.6 0.7 0.8 0.9 1.0"
CROSS_US=2000
JSON_OUT="" TOOL=echo MESSAGE=hello
ME=openloop
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

usage() {
    cat <<USAGE
usage: $0 [options]
  --config FILE        the gateway's manifest (default conf/bench.json)
  --duration S         measured seconds per rate (default $DURATION)
  --warmup S           seconds at the rate before each window (default $WARMUP)
  --connections N      most calls in flight (default $CONNECTIONS)
  --fractions "A B"    offered rates as fractions of the capacity (default "$FRACTIONS")
  --capacity R         skip the closed-loop run: take R calls/s as the capacity
  --port P  --gw-cpu N  --load-cpu N
  --json FILE          append one JSON line per run
USAGE
}

CAPACITY=""
own_opt() {
    case $1 in
    --fractions) FRACTIONS=$2 ;;
    --capacity) CAPACITY=$2 ;;
    *) return 1 ;;
    esac
}
parse_options "config duration warmup connections port gw-cpu load-cpu json" "$@"

[ -x "$LOAD" ] || die "no $LOAD: build it (make build)"
[ -f "$CONFIG" ] || die "no manifest $CONFIG"
CLK_TCK=$(getconf CLK_TCK)
TMP=$(mktemp -d /tmp/mcpg-openloop.XXXXXX)
GW_PID=""
cleanup() { stop_pid "$GW_PID"; rm -rf "$TMP"; }
trap cleanup EXIT
trap 'exit 130' INT TERM
progress() { echo "$ME: $*" >&2; }

start_gateway gw "$CONFIG" "$PORT"
GW_PID=$STARTED_PID
URL=http://127.0.0.1:$PORT/mcp
LOADARGS=(--url "$URL" -c "$CONNECTIONS" --tool "$TOOL" --message "$MESSAGE" --expect "Echo: $MESSAGE" -q)

# run [--rate R]: warm-up then the window, the gateway's CPU read around the
# window; prints the JSON line with cpu_us_per_call added.
run() {
    taskset -c "$LOAD_CPU" "$LOAD" "${LOADARGS[@]}" "$@" -w 0 -d "$WARMUP" >/dev/null 2>"$TMP/warm.err" ||
        { cat "$TMP/warm.err" >&2; die "errors during the warm-up ($*)"; }
    local t0 t1 out
    t0=$(ticks_of "$GW_PID")
    out=$(taskset -c "$LOAD_CPU" "$LOAD" "${LOADARGS[@]}" "$@" -w 0 -d "$DURATION" --json 2>"$TMP/run.err") ||
        { cat "$TMP/run.err" >&2; die "errors in the run ($*)"; }
    t1=$(ticks_of "$GW_PID")
    local cpu
    cpu=$(awk -v dt=$((${t1% *} - ${t0% *})) -v hz="$CLK_TCK" -v ok="$(json_num "$out" ok)" \
        'BEGIN { printf "%.2f", (ok > 0 ? dt * 1e6 / hz / ok : 0) }')
    echo "${out%\}},\"cpu_us_per_call\":$cpu,\"config\":\"$(basename "$CONFIG")\"}"
}

if [ -z "$CAPACITY" ]; then
    progress "capacity: closed loop, $CONNECTIONS connections, ${DURATION} s ($(basename "$CONFIG"))"
    out=$(run)
    CAPACITY=$(json_num "$out" calls_per_s)
    [ -z "$JSON_OUT" ] || echo "${out%\}},\"target\":\"closed-loop\"}" >>"$JSON_OUT"
fi
progress "capacity $CAPACITY calls/s; open loop at fractions: $FRACTIONS"

ROW="%8s %10s %10s %9s %9s %9s %8s %11s\n"
printf "$ROW" fraction offered/s served/s p50_us p99_us p999_us backlog cpu_us/call
results=()
for f in $FRACTIONS; do
    rate=$(awk -v c="$CAPACITY" -v f="$f" 'BEGIN { printf "%.0f", c * f }')
    progress "offered $rate calls/s (${f} of capacity)"
    out=$(run --rate "$rate")
    [ -z "$JSON_OUT" ] || echo "${out%\}},\"target\":\"open-loop\",\"fraction\":$f}" >>"$JSON_OUT"
    p99=$(json_num "$out" p99_us)
    printf "$ROW" "$f" "$rate" "$(json_num "$out" calls_per_s)" "$(json_num "$out" p50_us)" "$p99" \
        "$(json_num "$out" p999_us)" "$(json_num "$out" max_backlog)" "$(json_num "$out" cpu_us_per_call)"
    results+=("$f $rate $p99")
done

echo
printf '%s\n' "${results[@]}" | awk -v cap="$CAPACITY" -v lim="$CROSS_US" '
    { f[NR] = $1; r[NR] = $2; p[NR] = $3 }
    END {
        for (i = 1; i <= NR; i++) if (f[i] == 0.5) printf "p99 at half the capacity (%.0f calls/s): %.0f us\n", r[i], p[i]
        for (i = 1; i <= NR; i++) if (p[i] > lim) {
            if (i == 1) { printf "p99 passed %d us already at %.0f calls/s\n", lim, r[i]; exit }
            x = r[i-1] + (r[i] - r[i-1]) * (lim - p[i-1]) / (p[i] - p[i-1])
            printf "p99 crosses %d us at about %.0f calls/s (%.0f%% of capacity), between %.0f and %.0f\n",
                   lim, x, 100 * x / cap, r[i-1], r[i]
            exit
        }
        printf "p99 stayed under %d us up to %.0f calls/s\n", lim, r[NR]
    }'
