#!/usr/bin/env bash
# Memory over time: one gateway, three bursts of load with idle time after
# each (stateless, stateless again, the legacy wire with a session per
# connection), its resident memory, threads and open descriptors sampled
# every half second throughout. Printed per burst: calls/s, memory before,
# peak and after the idle time, and the ratio of after to the first idle
# figure; the samples go to the JSON file (one line each) for the report's
# chart.
#
#   bench/memtime.sh                                  conf/bench.json, 512 connections
#   bench/memtime.sh --config conf/bench-tuned.json --burst 10 --idle 20
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LOAD=$ROOT/build/bin/mcpg-load
MCPG=$ROOT/build/bin/mcpg
GW_CPU=0 LOAD_CPU=1
PORT=18680
CONFIG=$ROOT/conf/bench.json
BURST=30 IDLE=30 CONNECTIONS=512 SAMPLE=0.5
JSON_OUT=""
ME=memtime
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

usage() {
    cat <<USAGE
usage: $0 [options]
  --config FILE        the gateway's manifest (default conf/bench.json)
  --burst S            seconds of each burst (default $BURST)
  --idle S             seconds without load after each (default $IDLE)
  --connections N      connections (and, on the legacy wire, sessions) of a burst (default $CONNECTIONS)
  --port P  --gw-cpu N  --load-cpu N
  --json FILE          append the samples and one summary line per burst
USAGE
}

own_opt() {
    case $1 in
    --burst) BURST=$2 ;;
    --idle) IDLE=$2 ;;
    *) return 1 ;;
    esac
}
parse_options "config connections port gw-cpu load-cpu json" "$@"

[ -x "$LOAD" ] || die "no $LOAD: build it (make build)"
[ -f "$CONFIG" ] || die "no manifest $CONFIG"
TMP=$(mktemp -d /tmp/mcpg-memtime.XXXXXX)
GW_PID="" SAMPLER=""
cleanup() { stop_pid "$SAMPLER"; stop_pid "$GW_PID"; rm -rf "$TMP"; }
trap cleanup EXIT
trap 'exit 130' INT TERM
progress() { echo "$ME: $*" >&2; }

start_gateway gw "$CONFIG" "$PORT"
GW_PID=$STARTED_PID
T0=$(date +%s.%N)

# "seconds rss_kb threads fds" of the gateway, every SAMPLE seconds, until it ends
sample_forever() {
    while kill -0 "$GW_PID" 2>/dev/null; do
        local rss thr fds now
        rss=$(status_kb "$GW_PID" VmRSS) thr=$(status_kb "$GW_PID" Threads)
        fds=$(ls "/proc/$GW_PID/fd" 2>/dev/null | wc -l)
        now=$(date +%s.%N)
        echo "$(awk -v a="$now" -v b="$T0" 'BEGIN { printf "%.2f", a - b }') $rss $thr $fds"
        sleep "$SAMPLE"
    done
}
sample_forever >"$TMP/samples.txt" &
SAMPLER=$!

now_s() { awk -v a="$(date +%s.%N)" -v b="$T0" 'BEGIN { printf "%.2f", a - b }'; }
# the samples' figure (column 2: rss) between two times: max or last
rss_between() { awk -v a="$1" -v b="$2" -v how="$3" '$1 >= a && $1 <= b { v = (how == "max" ? (v > $2 ? v : $2) : $2) } END { print v + 0 }' "$TMP/samples.txt"; }

idle_for() { progress "idle ${1} s"; sleep "$1"; }

ROW="%-16s %10s %12s %10s %12s %9s %8s\n"
rows=()
IDLE_BASE=""
# burst NAME [mcpg-load flags]: a burst, then the idle time; its figures
burst() {
    local name=$1; shift
    local before t_start t_end t_idle_end out peak after
    before=$(status_kb "$GW_PID" VmRSS)
    [ -n "$IDLE_BASE" ] || IDLE_BASE=$before
    t_start=$(now_s)
    progress "burst $name: $CONNECTIONS connections, ${BURST} s"
    out=$(taskset -c "$LOAD_CPU" "$LOAD" --url "http://127.0.0.1:$PORT/mcp" -c "$CONNECTIONS" -w 0 -d "$BURST" \
        --expect "Echo: hello" -q --json "$@" 2>"$TMP/run.err") ||
        { cat "$TMP/run.err" >&2; die "burst $name: errors"; }
    t_end=$(now_s)
    idle_for "$IDLE"
    t_idle_end=$(now_s)
    peak=$(rss_between "$t_start" "$t_end" max)
    after=$(status_kb "$GW_PID" VmRSS)
    local line
    line=$(printf "$ROW" "$name" "$(json_num "$out" calls_per_s)" "$before" "$peak" "$after" \
        "$(awk -v a="$after" -v b="$IDLE_BASE" 'BEGIN { printf "%.2fx", a / b }')" "$(status_kb "$GW_PID" Threads)")
    rows+=("$line")
    printf '%s\n' "$line"
    [ -z "$JSON_OUT" ] || printf '{"bench":"memtime","config":"%s","burst":"%s","connections":%s,"burst_s":%s,"idle_s":%s,"calls_per_s":%s,"rss_before_kb":%s,"rss_peak_kb":%s,"rss_after_kb":%s,"rss_idle_base_kb":%s,"threads_after":%s,"t_start_s":%s,"t_end_s":%s,"t_idle_end_s":%s}\n' \
        "$(basename "$CONFIG")" "$name" "$CONNECTIONS" "$BURST" "$IDLE" "$(json_num "$out" calls_per_s)" "$before" \
        "$peak" "$after" "$IDLE_BASE" "$(status_kb "$GW_PID" Threads)" "$t_start" "$t_end" "$t_idle_end" >>"$JSON_OUT"
}

# The idle base is a gateway that has served: a first call warms what is
# made once (the catalog's answers, the loops' buffers, the audit file), and
# that is not what a burst should be judged against.
idle_for 3
PRISTINE=$(status_kb "$GW_PID" VmRSS)
progress "warm-up: 64 connections, 1 s"
taskset -c "$LOAD_CPU" "$LOAD" --url "http://127.0.0.1:$PORT/mcp" -c 64 -w 0 -d 1 -q >/dev/null 2>&1 ||
    die "the warm-up had errors"
idle_for 3
printf "$ROW" burst calls/s rss_before_kB peak_kB after_idle_kB vs_idle threads
burst stateless
burst stateless-again
burst legacy --wire legacy
echo
echo "$(basename "$CONFIG"): ${PRISTINE} kB before any call; idle base (warm) ${IDLE_BASE} kB"
printf "$ROW" burst calls/s rss_before_kB peak_kB after_idle_kB vs_idle threads
printf '%s\n' "${rows[@]}"
if [ -n "$JSON_OUT" ]; then
    awk -v c="$(basename "$CONFIG")" '{ printf "{\"bench\":\"memtime-sample\",\"config\":\"%s\",\"t_s\":%s,\"rss_kb\":%s,\"threads\":%s,\"fds\":%s}\n", c, $1, $2, $3, $4 }' \
        "$TMP/samples.txt" >>"$JSON_OUT"
fi
