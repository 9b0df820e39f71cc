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
#   bench/cpu-per-call.sh --start --nginx --counts also syscalls, context switches
#                                                  and fdatasyncs per call (perf)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LOAD=$ROOT/build/bin/mcpg-load
MCPG=$ROOT/build/bin/mcpg
CONFIG=$ROOT/conf/bench.json
GW_CPU=0 LOAD_CPU=1
PORT=18080 NGINX_PORT=18081
DURATION=10 WARMUP=2 CONNECTIONS=64 ROUNDS=1
TOOL=echo MESSAGE=hello
GW_PID="" START=0 NGINX=0 COUNTS=0 BODY_FILE="" JSON_OUT=""
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
  --counts             after the CPU rounds, one more window per target with perf stat
                       attached: syscalls, context switches (and for mcpg fdatasyncs and
                       audit events per sync) per call; needs perf and tracepoint access
EOF
}

own_opt() {
    case $1 in
    --start) START=1; flag ;;
    --pid) GW_PID=$2 ;;
    --nginx) NGINX=1; flag ;;
    --counts) COUNTS=1; flag ;;
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

# ---- the counts pass (--counts) ----
# A tracepoint costs the traced process CPU, so the CPU figures come from the
# rounds without perf, and these from one more window per target with perf
# stat attached to the whole process (all its threads) just around it.
COUNT_EVENTS=raw_syscalls:sys_enter,context-switches
SYNC_EVENT=syscalls:sys_enter_fdatasync
count_row() { printf '%-7s %10s %9s %14s %11s %15s %12s %13s\n' "$@"; }

# perf_can PID EVENTS: perf is installed and may count EVENTS on PID; else
# says why (on stderr) and fails.
perf_can() {
    command -v perf >/dev/null || { echo "$ME: --counts: no perf (apt-get install linux-perf)" >&2; return 1; }
    perf stat -x, -e "$2" -p "$1" -o /dev/null -- true 2>"$TMP/perf.err" && return 0
    echo "$ME: --counts: perf may not count $2 on pid $1 (run as root, or lower" \
        "/proc/sys/kernel/perf_event_paranoid and make tracefs readable): $(head -n1 "$TMP/perf.err")" >&2
    return 1
}

# perf_say CTL_FD ACK_FD enable|disable: switch perf's counting, and wait for its ack
perf_say() {
    local reply=""
    echo "$3" >&"$1"
    read -r -t 10 -u "$2" reply && [ "$reply" = ack ]
}

# perf_count CSV EVENT: EVENT's count in perf stat's CSV output (0 when not counted)
perf_count() { awk -F, -v e="$2" '$3 == e { n = $1 ~ /^[0-9]+$/ ? $1 : 0 } END { print n + 0 }' "$1"; }

# audit_batches PORT: "events batches" written by the gateway's audit sinks so
# far, from their metrics (GET /metrics); fails when the gateway serves none.
audit_batches() {
    local page
    page=$(exec 3<>"/dev/tcp/127.0.0.1/$1" && printf 'GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3 &&
        timeout 5 cat <&3) 2>/dev/null || return 1
    awk '/^mcpg_audit_batch_events_sum[{ ]/ { s += $NF } /^mcpg_audit_batch_events_count[{ ]/ { c += $NF; n++ }
        END { if (!n) exit 1; print s, c }' <<<"$page"
}

# counted LABEL PID PORT EVENTS [mcpg-load flags]: one load window with perf
# stat counting EVENTS on PID just around it; prints mcpg-load's JSON line,
# the counts in TMP/perf.LABEL.csv.
counted() {
    local label=$1 pid=$2 port=$3 events=$4; shift 4
    local ctl=$TMP/perf.ctl ack=$TMP/perf.ack ctl_fd ack_fd perf_pid out rc=0
    rm -f "$ctl" "$ack"; mkfifo "$ctl" "$ack"
    perf stat -x, -e "$events" -p "$pid" -D -1 --control "fifo:$ctl,$ack" -o "$TMP/perf.$label.csv" \
        2>"$TMP/perf.err" &
    perf_pid=$!
    exec {ctl_fd}<>"$ctl" {ack_fd}<>"$ack"
    if perf_say "$ctl_fd" "$ack_fd" enable; then
        out=$(taskset -c "$LOAD_CPU" "$LOAD" --url "http://127.0.0.1:$port/mcp" -c "$CONNECTIONS" --tool "$TOOL" \
            --message "$MESSAGE" -q "$@" "${LOAD_EXTRA[@]}" -w 0 -d "$DURATION" --json 2>"$TMP/run.err") || rc=$?
        perf_say "$ctl_fd" "$ack_fd" disable || rc=1
    else
        cat "$TMP/perf.err" >&2; rc=1
    fi
    kill -INT "$perf_pid" 2>/dev/null; wait "$perf_pid" || true
    exec {ctl_fd}>&- {ack_fd}>&-
    [ "$rc" = 0 ] || { cat "$TMP/run.err" >&2; echo "$ME: $label: the counted window failed" >&2; return 1; }
    echo "$out"
}

# count_target LABEL PID PORT [mcpg-load flags]: one counted window, one row.
# For the gateway also fdatasyncs (the durable audit's syncs) and audit
# events per sync: derived from 2 events per call (intent and outcome), and
# per batch from the sinks' own metrics when the gateway serves /metrics.
count_target() {
    local label=$1 pid=$2 port=$3; shift 3
    local events=$COUNT_EVENTS sync=0 b0="" b1="" out
    [ "$label" = nginx ] || { events+=,$SYNC_EVENT; sync=1; b0=$(audit_batches "$port") || b0=""; }
    out=$(counted "$label" "$pid" "$port" "$events" "$@") || return 1
    [ "$sync" = 0 ] || { b1=$(audit_batches "$port") || b1=""; }
    local csv=$TMP/perf.$label.csv fig
    fig=$(awk -v ok="$(json_num "$out" ok)" -v sc="$(perf_count "$csv" raw_syscalls:sys_enter)" \
        -v cs="$(perf_count "$csv" context-switches)" -v fs="$(perf_count "$csv" "$SYNC_EVENT")" -v sync="$sync" \
        -v b0="$b0" -v b1="$b1" 'BEGIN {
        split(b0, a); split(b1, b); de = b[1] - a[1]; db = b[2] - a[2]
        if (ok <= 0) ok = 1
        per_fs = sync ? sprintf("%.3f", fs / ok) : "-"
        per_sync = (sync && fs > 0) ? sprintf("%.2f", 2 * ok / fs) : "-"
        per_batch = (b0 != "" && b1 != "" && db > 0) ? sprintf("%.2f", de / db) : "-"
        print sprintf("%.2f %.3f", sc / ok, cs / ok), per_fs, per_sync, per_batch }')
    local per_sc per_cs per_fs per_sync per_batch
    read -r per_sc per_cs per_fs per_sync per_batch <<<"$fig"
    count_row "$label" "$(json_num "$out" calls_per_s)" "$(json_num "$out" ok)" "$per_sc" "$per_cs" "$per_fs" \
        "$per_sync" "$per_batch"
    [ -z "$JSON_OUT" ] || printf '%s,"target":"%s-counts","syscalls_per_call":%s,"ctx_switches_per_call":%s,"fdatasync_per_call":"%s","audit_events_per_sync_derived":"%s","audit_events_per_batch":"%s"}\n' \
        "${out%\}}" "$label" "$per_sc" "$per_cs" "$per_fs" "$per_sync" "$per_batch" >>"$JSON_OUT"
}

count_pass() {
    local pid=${GW_PID:-$NGINX_WORKER} events=$COUNT_EVENTS
    [ -z "$GW_PID" ] || events+=,$SYNC_EVENT
    echo
    echo "counts per call: one more window per target, perf stat attached (the CPU figures above are from the rounds without it)"
    perf_can "$pid" "$events" || { echo "counts: not measured (perf missing or not permitted, see above)"; return 1; }
    count_row target calls/s calls syscalls/call ctxsw/call fdatasync/call events/sync events/batch
    local rc=0
    if [ "$NGINX" = 1 ]; then count_target nginx "$NGINX_WORKER" "$NGINX_PORT" --no-id-check || rc=1; fi
    if [ -n "$GW_PID" ]; then count_target mcpg "$GW_PID" "$PORT" || rc=1; fi
    echo "events/sync: derived, 2 audit events per call (intent, outcome) / fdatasyncs of the window"
    echo "events/batch: the audit sinks' own count (mcpg_audit_batch_events), when the gateway serves /metrics (metrics_prometheus), else -"
    return "$rc"
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
if [ "$COUNTS" = 1 ]; then count_pass || failed=1; fi
exit "$failed"
