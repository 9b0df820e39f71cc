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

die() { echo "cpu-per-call: $*" >&2; exit 2; }

while [ $# -gt 0 ]; do
    case $1 in
    --start) START=1 ;;
    --pid) GW_PID=$2; shift ;;
    --nginx) NGINX=1 ;;
    --port) PORT=$2; shift ;;
    --nginx-port) NGINX_PORT=$2; shift ;;
    --duration) DURATION=$2; shift ;;
    --warmup) WARMUP=$2; shift ;;
    --connections|-c) CONNECTIONS=$2; shift ;;
    --tool) TOOL=$2; shift ;;
    --message) MESSAGE=$2; shift ;;
    --rounds) ROUNDS=$2; shift ;;
    --gw-cpu) GW_CPU=$2; shift ;;
    --load-cpu) LOAD_CPU=$2; shift ;;
    --mcpg) MCPG=$2; shift ;;
    --config) CONFIG=$2; shift ;;
    --load) LOAD=$2; shift ;;
    --body) BODY_FILE=$2; shift ;;
    --json) JSON_OUT=$2; shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; LOAD_EXTRA=("$@"); break ;;
    *) usage >&2; exit 2 ;;
    esac
    shift
done

[ -x "$LOAD" ] || die "no $LOAD: build it (cmake --build build --target mcpg-load)"
[ "$START" = 1 ] && [ -n "$GW_PID" ] && die "--start and --pid exclude each other"
[ "$START" = 1 ] || [ -n "$GW_PID" ] || [ "$NGINX" = 1 ] || { usage >&2; exit 2; }
CLK_TCK=$(getconf CLK_TCK)
TMP=$(mktemp -d /tmp/mcpg-cpu.XXXXXX)
STARTED_GW="" NGINX_MASTER=""

# ---- cleanup: stop only what this script started, by pid ----
stop_pid() {
    local pid=$1 sig=${2:-TERM}
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
    kill -"$sig" "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
}
cleanup() {
    stop_pid "$STARTED_GW"
    stop_pid "$NGINX_MASTER" QUIT # graceful: the master stops its worker
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- /proc readers ----
ticks_of() { # utime+stime of a whole process (all its threads); comm may hold spaces
    local s; s=$(<"/proc/$1/stat"); s=${s##*) }
    set -- $s; echo $(( ${12} + ${13} ))
}
status_kb() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status"; }
core_ticks() { # "busy steal" ticks of one core
    awk -v c="cpu$1" '$1 == c { print $2 + $3 + $4 + $7 + $8, $9 }' /proc/stat
}
json_num() { sed -n "s/.*\"$2\":\([-0-9.e]*\).*/\1/p" <<<"$1"; }

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
wait_port() { # pid port: the process listens, or it died / took too long
    for _ in $(seq 100); do
        kill -0 "$1" 2>/dev/null || return 1
        port_busy "$2" && return 0
        sleep 0.1
    done
    return 1
}

# ---- what we start ----
start_gateway() {
    port_busy "$PORT" && die "port $PORT is in use"
    [ -x "$MCPG" ] || die "no $MCPG (the gateway is not built yet)"
    # The audit log goes to the scratch dir: a shared /tmp file would mix runs.
    MCPG_AUDIT_FILE=${MCPG_AUDIT_FILE:-$TMP/audit.jsonl} \
        taskset -c "$GW_CPU" "$MCPG" --config "$CONFIG" --listen "127.0.0.1:$PORT" >"$TMP/mcpg.log" 2>&1 &
    STARTED_GW=$! GW_PID=$!
    wait_port "$GW_PID" "$PORT" || { cat "$TMP/mcpg.log" >&2; die "the gateway did not start"; }
}

# nginx's return string is single-quoted: escape \ and ', and refuse $,
# which nginx would expand as a variable.
nginx_quote() {
    local b; b=$(<"$1")
    case $b in *'$'*) die "the body contains '\$', which nginx's return would expand" ;; esac
    b=${b//\\/\\\\}; b=${b//\'/\\\'}
    printf "'%s'" "$b"
}

start_nginx() {
    port_busy "$NGINX_PORT" && die "port $NGINX_PORT is in use"
    mkdir -p "$TMP/nginx"
    cat >"$TMP/nginx/nginx.conf" <<EOF
worker_processes 1;
pid $TMP/nginx/nginx.pid;
error_log $TMP/nginx/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $TMP/nginx/body;
    keepalive_requests 1000000000;   # the default 1000 would force reconnects into the measure
    keepalive_timeout 300s;
    server {
        listen 127.0.0.1:$NGINX_PORT;
        location = /mcp {
            default_type application/json;
            return 200 $(nginx_quote "$TMP/body.json");
        }
    }
}
EOF
    taskset -c "$GW_CPU" nginx -p "$TMP/nginx" -c "$TMP/nginx/nginx.conf" -e "$TMP/nginx/error.log" \
        -g 'daemon off;' >"$TMP/nginx/out.log" 2>&1 &
    NGINX_MASTER=$!
    wait_port "$NGINX_MASTER" "$NGINX_PORT" || { cat "$TMP/nginx/"*.log >&2; die "nginx did not start"; }
    NGINX_WORKER=$(tr ' ' '\n' <"/proc/$NGINX_MASTER/task/$NGINX_MASTER/children" | head -n1)
    [ -n "$NGINX_WORKER" ] || die "no nginx worker"
}

# The answer nginx serves: given, else the gateway's own, else a plain echo answer.
prepare_body() {
    if [ -n "$BODY_FILE" ]; then cp "$BODY_FILE" "$TMP/body.json"; return; fi
    if [ -n "$GW_PID" ] && taskset -c "$LOAD_CPU" "$LOAD" --url "http://127.0.0.1:$PORT/mcp" -c 1 -w 0 \
        --max-calls 1 -q --print-answer --tool "$TOOL" --message "$MESSAGE" >"$TMP/body.json" 2>/dev/null; then
        return
    fi
    printf '{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"%s"}],"resultType":"complete"}}\n' \
        "$MESSAGE" >"$TMP/body.json"
}

# ---- one measured run: label pid port [mcpg-load flags] ----
HDR="%-6s %10s %8s %8s %11s %5s %5s %9s %9s %7s %7s %6s\n"
printf "$HDR" target calls/s p50_us p99_us cpu_us/call util load% VmHWM_kB VmRSS_kB threads other% steal%
measure() {
    local label=$1 pid=$2 port=$3; shift 3
    local url="http://127.0.0.1:$port/mcp" out
    local args=(--url "$url" -c "$CONNECTIONS" --tool "$TOOL" --message "$MESSAGE" -q "$@" "${LOAD_EXTRA[@]}")
    if [ "$WARMUP" != 0 ]; then
        taskset -c "$LOAD_CPU" "$LOAD" "${args[@]}" -w 0 -d "$WARMUP" >/dev/null 2>"$TMP/warmup.err" ||
            { cat "$TMP/warmup.err" >&2; die "$label: errors during warm-up"; }
    fi
    local t0 c0 t1 c1 rc=0
    t0=$(ticks_of "$pid"); c0=$(core_ticks "$GW_CPU")
    out=$(taskset -c "$LOAD_CPU" "$LOAD" "${args[@]}" -w 0 -d "$DURATION" --json 2>"$TMP/run.err") || rc=$?
    t1=$(ticks_of "$pid"); c1=$(core_ticks "$GW_CPU")
    [ "$rc" = 0 ] || { cat "$TMP/run.err" >&2; echo "cpu-per-call: $label: mcpg-load exited $rc" >&2; }
    report "$label" "$pid" "$out" $((t1 - t0)) $c0 $c1
    return "$rc"
}

# Derive the CPU figures; other% is work on the gateway core that was not the
# measured process (another process, or nginx's master): it should be ~0.
report() {
    local label=$1 pid=$2 out=$3 dt=$4 b0=$5 s0=$6 b1=$7 s1=$8
    local ok secs cps p50 p99 lcpu hwm rss thr
    ok=$(json_num "$out" ok); secs=$(json_num "$out" duration_s); cps=$(json_num "$out" calls_per_s)
    p50=$(json_num "$out" p50_us); p99=$(json_num "$out" p99_us); lcpu=$(json_num "$out" loadgen_cpu_pct)
    hwm=$(status_kb "$pid" VmHWM); rss=$(status_kb "$pid" VmRSS); thr=$(status_kb "$pid" Threads)
    local fig
    fig=$(awk -v dt="$dt" -v hz="$CLK_TCK" -v ok="$ok" -v s="$secs" -v db=$((b1 - b0)) -v ds=$((s1 - s0)) 'BEGIN {
        cpu = ok > 0 ? dt * 1e6 / hz / ok : 0; util = s > 0 ? 100 * dt / hz / s : 0
        other = s > 0 ? 100 * (db - dt) / hz / s : 0; if (other < 0) other = 0
        steal = s > 0 ? 100 * ds / hz / s : 0
        printf "%.2f %.0f %.1f %.1f", cpu, util, other, steal }')
    set -- $fig
    printf "$HDR" "$label" "$cps" "$p50" "$p99" "$1" "$2%" "${lcpu%.*}%" "$hwm" "$rss" "$thr" "$3" "$4"
    local clean=1
    if awk -v o="$3" -v st="$4" 'BEGIN { exit !(o > 5 || st > 5) }'; then
        clean=0
        echo "cpu-per-call: warning: core $GW_CPU was not ours alone (other ${3}%, steal ${4}%): do not trust this run" >&2
    fi
    echo "$label $1 $clean" >>"$TMP/cpu.txt"
    if [ -n "$JSON_OUT" ]; then
        printf '%s,"target":"%s","cpu_ticks":%s,"clk_tck":%s,"cpu_us_per_call":%s,"cpu_util_pct":%s,' \
            "${out%\}}" "$label" "$dt" "$CLK_TCK" "$1" "$2" >>"$JSON_OUT"
        printf '"vm_hwm_kb":%s,"vm_rss_kb":%s,"threads":%s,"core_other_pct":%s,"core_steal_pct":%s}\n' \
            "$hwm" "$rss" "$thr" "$3" "$4" >>"$JSON_OUT"
    fi
}

# Median CPU per call of a target over its clean runs (over all when none was
# clean), then how many runs that median is of.
median() {
    local only_clean=1
    [ "$(clean_runs "$1")" -gt 0 ] || only_clean=0
    awk -v t="$1" -v c="$only_clean" '$1 == t && (!c || $3 == 1) {print $2}' "$TMP/cpu.txt" 2>/dev/null |
        sort -g | awk '{v[NR]=$1} END { if (NR) print (NR % 2 ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2), NR }'
}
clean_runs() { awk -v t="$1" '$1 == t && $3 == 1' "$TMP/cpu.txt" 2>/dev/null | wc -l; }

# ---- the run ----
if [ "$START" = 1 ]; then start_gateway; fi
if [ -n "$GW_PID" ]; then
    kill -0 "$GW_PID" 2>/dev/null || die "no process $GW_PID"
    aff=$(taskset -pc "$GW_PID" | sed 's/.*: //')
    [ "$aff" = "$GW_CPU" ] || echo "cpu-per-call: note: pid $GW_PID may run on cores '$aff', not only $GW_CPU" >&2
fi
if [ "$NGINX" = 1 ]; then prepare_body; start_nginx; fi

failed=0
for _ in $(seq "$ROUNDS"); do
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
