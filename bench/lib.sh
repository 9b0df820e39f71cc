# shellcheck shell=bash
# Shared by the bench/*.sh scenarios (sourced, not run): their one option
# parser, the /proc readers, starting the gateway and nginx pinned to a core,
# and one measured run (warm-up, then the window whose CPU is counted). See
# bench/README.md for the method and the columns.
#
# The measuring scenarios set: ROOT LOAD MCPG GW_CPU LOAD_CPU DURATION WARMUP
# CONNECTIONS TOOL MESSAGE TMP CLK_TCK JSON_OUT, the array LOAD_EXTRA, and ME
# (their name, for messages); ROUND (optional) goes into the JSON lines;
# WINDOW_HOOK (optional) names a function measure() calls with "start LABEL"
# and "end LABEL" around the measured window.

die() { echo "$ME: $*" >&2; exit 2; }

# ---- options ----
# One option loop for every scenario, so a shared option is spelled and read
# the same way everywhere; a scenario lists the shared options it takes (it
# refuses the others, as before) and reads only its own in own_opt.
#
# parse_options "SHARED" "$@": SHARED names the shared options this scenario
# takes, without their dashes (see shared_opt), plus "load-args" when what
# follows "--" goes on to mcpg-load (into LOAD_EXTRA). -h/--help prints the
# scenario's usage. The scenario may define own_opt OPTION VALUE: it sets
# what OPTION sets and returns 0, or returns 1 when OPTION is not its own; an
# option that takes no value calls flag, so VALUE stays on the command line.
parse_options() {
    local shared=" $1 "; shift
    local opt name
    while [ $# -gt 0 ]; do
        opt=$1
        case $opt in
        -h|--help) usage; exit 0 ;;
        --) [[ $shared == *" load-args "* ]] || unknown_option "$opt"; shift; LOAD_EXTRA=("$@"); return 0 ;;
        -c) name=connections ;;
        --?*) name=${opt#--} ;;
        *) name="" ;;
        esac
        OPT_VALUES=1
        if declare -F own_opt >/dev/null && own_opt "$opt" "${2:-}"; then :
        elif [ -n "$name" ] && [[ $shared == *" $name "* ]]; then shared_opt "$name" "${2:-}" || unknown_option "$opt"
        else unknown_option "$opt"
        fi
        [ "$OPT_VALUES" = 0 ] || [ $# -ge 2 ] || die "$opt needs a value (see --help)"
        shift $((1 + OPT_VALUES))
    done
}
flag() { OPT_VALUES=0; } # in own_opt: this option takes no value
unknown_option() { echo "$ME: unknown option $1" >&2; usage >&2; exit 2; }

# shared_opt NAME VALUE: what the shared option --NAME sets (-c is
# --connections); 1 when NAME is not a shared option.
shared_opt() {
    case $1 in
    mcpg) MCPG=$2 ;;               # the gateway binary
    load) LOAD=$2 ;;               # the load generator (mcpg-load)
    config) CONFIG=$2 ;;           # the manifest the gateway runs
    duration) DURATION=$2 ;;       # seconds of each measured run
    warmup) WARMUP=$2 ;;           # seconds of load before it, not counted
    rounds) ROUNDS=$2 ;;           # how many times each target is measured
    connections) CONNECTIONS=$2 ;; # concurrent connections of the load
    port) PORT=$2 ;;               # the gateway's port
    port-base) PORT_BASE=$2 ;;     # the first of the ports it takes
    gw-cpu) GW_CPU=$2 ;;           # the core of the measured server
    load-cpu) LOAD_CPU=$2 ;;       # the core of the load
    json) JSON_OUT=$2 ;;           # the file the JSON lines are appended to
    tool) TOOL=$2 ;;               # the tool called
    message) MESSAGE=$2 ;;         # its message argument
    *) return 1 ;;
    esac
}

# ---- stopping: only what we started, by pid ----
stop_pid() {
    local pid=$1 sig=${2:-TERM}
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
    kill -"$sig" "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
}

# ---- /proc readers ----
ticks_of() { # "utime+stime stime" of a whole process (all its threads); comm may hold spaces
    local s; s=$(<"/proc/$1/stat"); s=${s##*) }
    set -- $s; echo $(( ${12} + ${13} )) "${13}"
}
status_kb() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status"; }
core_ticks() { # "busy steal" ticks of one core
    awk -v c="cpu$1" '$1 == c { print $2 + $3 + $4 + $7 + $8, $9 }' /proc/stat
}
json_num() { sed -n "s/.*\"$2\":\([-0-9.e]*\).*/\1/p" <<<"$1"; }

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
wait_port() { # pid port [tenths]: the process listens, or it died / took too long (default 10 s)
    for _ in $(seq "${3:-100}"); do
        kill -0 "$1" 2>/dev/null || return 1
        port_busy "$2" && return 0
        sleep 0.1
    done
    return 1
}

# ---- what we start ----
# start_gateway NAME CONFIG PORT [CPU]: runs mcpg on CPU (default GW_CPU)
# with its audit log and output in TMP/NAME.*; sets STARTED_PID.
start_gateway() {
    local name=$1 config=$2 port=$3 cpu=${4:-$GW_CPU}
    port_busy "$port" && die "port $port is in use"
    [ -x "$MCPG" ] || die "no $MCPG (the gateway is not built yet)"
    # The audit log goes to the scratch dir: a shared /tmp file would mix runs.
    MCPG_AUDIT_FILE=$TMP/$name.audit.jsonl \
        taskset -c "$cpu" "$MCPG" --config "$config" --listen "127.0.0.1:$port" >"$TMP/$name.log" 2>&1 &
    STARTED_PID=$!
    wait_port "$STARTED_PID" "$port" || { cat "$TMP/$name.log" >&2; die "gateway $name did not start"; }
}

# nginx's return string is single-quoted: escape \ and ', and refuse $,
# which nginx would expand as a variable.
nginx_quote() {
    local b; b=$(<"$1")
    case $b in *'$'*) die "the body contains '\$', which nginx's return would expand" ;; esac
    b=${b//\\/\\\\}; b=${b//\'/\\\'}
    printf "'%s'" "$b"
}

# start_nginx PORT BODY_FILE: one worker on GW_CPU answering BODY_FILE
# statically; sets NGINX_MASTER and NGINX_WORKER.
start_nginx() {
    local port=$1 body=$2
    launch_nginx "$port" "" "default_type application/json;
            return 200 $(nginx_quote "$body");"
}

# start_nginx_proxy PORT UPSTREAM_PORT KEEPALIVE: one worker on GW_CPU
# passing POST /mcp to 127.0.0.1:UPSTREAM_PORT over HTTP/1.1 connections it
# keeps (at most KEEPALIVE idle ones); sets NGINX_MASTER and NGINX_WORKER.
start_nginx_proxy() {
    local port=$1 up=$2 keep=$3
    launch_nginx "$port" "upstream u {
        server 127.0.0.1:$up;
        keepalive $keep;
        keepalive_requests 1000000000;
        keepalive_timeout 300s;
    }" "proxy_pass http://u;
            proxy_http_version 1.1;
            proxy_set_header Connection \"\";
            proxy_set_header Host 127.0.0.1:$up;"
}

# launch_nginx PORT HTTP_EXTRA LOCATION: what both share: one worker, no
# access log, keep-alive without a request limit, location = /mcp doing
# LOCATION.
launch_nginx() {
    local port=$1 extra=$2 location=$3
    port_busy "$port" && die "port $port is in use"
    mkdir -p "$TMP/nginx"
    cat >"$TMP/nginx/nginx.conf" <<EOF
worker_processes 1;
pid $TMP/nginx/nginx.pid;
error_log $TMP/nginx/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $TMP/nginx/body;
    proxy_temp_path $TMP/nginx/proxy;
    keepalive_requests 1000000000;   # the default 1000 would force reconnects into the measure
    keepalive_timeout 300s;
    $extra
    server {
        listen 127.0.0.1:$port;
        location = /mcp {
            $location
        }
    }
}
EOF
    taskset -c "$GW_CPU" nginx -p "$TMP/nginx" -c "$TMP/nginx/nginx.conf" -e "$TMP/nginx/error.log" \
        -g 'daemon off;' >"$TMP/nginx/out.log" 2>&1 &
    NGINX_MASTER=$!
    wait_port "$NGINX_MASTER" "$port" || { cat "$TMP/nginx/"*.log >&2; die "nginx did not start"; }
    NGINX_WORKER=$(tr ' ' '\n' <"/proc/$NGINX_MASTER/task/$NGINX_MASTER/children" | head -n1)
    [ -n "$NGINX_WORKER" ] || die "no nginx worker"
}

# gateway_answer PORT OUT [mcpg-load flags]: the gateway's own answer to one
# call, so nginx can serve exactly those bytes. Fails when there is none.
gateway_answer() {
    local port=$1 out=$2; shift 2
    taskset -c "$LOAD_CPU" "$LOAD" --url "http://127.0.0.1:$port/mcp" -c 1 -w 0 --max-calls 1 -q --print-answer \
        --tool "$TOOL" --message "$MESSAGE" "$@" >"$out" 2>/dev/null
}
echo_answer() { # a plain stateless echo answer, when no gateway gives one
    printf '{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"%s"}],"resultType":"complete"}}\n' \
        "$MESSAGE"
}

# ---- one measured run ----
# The per-run line; RUNS_FILE gets one record per run for the medians:
#   label cpu_us clean calls_per_s p50 p99 hwm rss threads other steal ok ok_sse util load sys round
RUNS_FILE=""
HDR="%-11s %10s %8s %8s %11s %5s %5s %5s %9s %9s %7s %7s %6s %5s\n"
print_header() {
    printf "$HDR" target calls/s p50_us p99_us cpu_us/call sys% util load% VmHWM_kB VmRSS_kB threads other% steal% sse%
}

# measure LABEL PID PORT [mcpg-load flags]: a warm-up run (discarded), then
# the measured run with PID's CPU read just before and just after it.
measure() {
    local label=$1 pid=$2 port=$3; shift 3
    local url="http://127.0.0.1:$port/mcp" out
    local args=(--url "$url" -c "$CONNECTIONS" --tool "$TOOL" --message "$MESSAGE" -q "$@" "${LOAD_EXTRA[@]}")
    if [ "$WARMUP" != 0 ]; then
        taskset -c "$LOAD_CPU" "$LOAD" "${args[@]}" -w 0 -d "$WARMUP" >/dev/null 2>"$TMP/warmup.err" ||
            { cat "$TMP/warmup.err" >&2; die "$label: errors during warm-up"; }
    fi
    local t0 c0 t1 c1 rc=0
    [ -z "${WINDOW_HOOK:-}" ] || "$WINDOW_HOOK" start "$label"
    t0=$(ticks_of "$pid"); c0=$(core_ticks "$GW_CPU")
    out=$(taskset -c "$LOAD_CPU" "$LOAD" "${args[@]}" -w 0 -d "$DURATION" --json 2>"$TMP/run.err") || rc=$?
    kill -0 "$pid" 2>/dev/null || { cat "$TMP/run.err" >&2; die "$label: process $pid died during the run"; }
    t1=$(ticks_of "$pid"); c1=$(core_ticks "$GW_CPU")
    [ -z "${WINDOW_HOOK:-}" ] || "$WINDOW_HOOK" end "$label"
    [ "$rc" = 0 ] || { cat "$TMP/run.err" >&2; echo "$ME: $label: mcpg-load exited $rc" >&2; }
    report "$label" "$pid" "$out" $((${t1% *} - ${t0% *})) $((${t1#* } - ${t0#* })) $c0 $c1
    return "$rc"
}

# Derive the CPU figures; other% is work on the gateway core that was not the
# measured process (another process, or an idle one we started): it should be ~0.
report() {
    local label=$1 pid=$2 out=$3 dt=$4 dsys=$5 b0=$6 s0=$7 b1=$8 s1=$9
    local ok secs cps p50 p99 lcpu hwm rss thr sse
    ok=$(json_num "$out" ok); secs=$(json_num "$out" duration_s); cps=$(json_num "$out" calls_per_s)
    p50=$(json_num "$out" p50_us); p99=$(json_num "$out" p99_us); lcpu=$(json_num "$out" loadgen_cpu_pct)
    sse=$(json_num "$out" ok_sse)
    hwm=$(status_kb "$pid" VmHWM); rss=$(status_kb "$pid" VmRSS); thr=$(status_kb "$pid" Threads)
    local fig
    fig=$(awk -v dt="$dt" -v hz="$CLK_TCK" -v ok="${ok:-0}" -v s="${secs:-0}" -v db=$((b1 - b0)) -v ds=$((s1 - s0)) \
        -v sse="${sse:-0}" -v dsys="$dsys" 'BEGIN {
        cpu = ok > 0 ? dt * 1e6 / hz / ok : 0; util = s > 0 ? 100 * dt / hz / s : 0
        other = s > 0 ? 100 * (db - dt) / hz / s : 0; if (other < 0) other = 0
        steal = s > 0 ? 100 * ds / hz / s : 0
        printf "%.2f %.0f %.1f %.1f %.0f %.0f", cpu, util, other, steal, (ok > 0 ? 100 * sse / ok : 0),
               (dt > 0 ? 100 * dsys / dt : 0) }')
    set -- $fig
    printf "$HDR" "$label" "${cps:-0}" "${p50:-0}" "${p99:-0}" "$1" "$6%" "$2%" "${lcpu%.*}%" "$hwm" "$rss" "$thr" "$3" "$4" "$5"
    local clean=1
    if awk -v o="$3" -v st="$4" 'BEGIN { exit !(o > 5 || st > 5) }'; then
        clean=0
        echo "$ME: warning: core $GW_CPU was not $label's alone (other ${3}%, steal ${4}%): do not trust this run" >&2
    fi
    echo "$label $1 $clean ${cps:-0} ${p50:-0} ${p99:-0} $hwm $rss $thr $3 $4 ${ok:-0} ${sse:-0} $2 ${lcpu:-0} $6 ${ROUND:-1}" >>"$RUNS_FILE"
    if [ -n "$JSON_OUT" ] && [ -n "$out" ]; then
        printf '%s,"target":"%s","round":%s,"cpu_ticks":%s,"clk_tck":%s,"cpu_us_per_call":%s,"cpu_util_pct":%s,' \
            "${out%\}}" "$label" "${ROUND:-1}" "$dt" "$CLK_TCK" "$1" "$2" >>"$JSON_OUT"
        printf '"vm_hwm_kb":%s,"vm_rss_kb":%s,"threads":%s,"core_other_pct":%s,"core_steal_pct":%s,"cpu_sys_pct":%s}\n' \
            "$hwm" "$rss" "$thr" "$3" "$4" "$6" >>"$JSON_OUT"
    fi
}

# ---- medians over the runs of one target ----
clean_runs() { awk -v t="$1" '$1 == t && $3 == 1' "$RUNS_FILE" 2>/dev/null | wc -l; }
# median TARGET [FIELD]: the median of FIELD (default 2, CPU per call) over
# the target's clean runs (over all when none was clean), then how many runs.
median() {
    local f=${2:-2} only_clean=1
    [ "$(clean_runs "$1")" -gt 0 ] || only_clean=0
    awk -v t="$1" -v c="$only_clean" -v f="$f" '$1 == t && (!c || $3 == 1) {print $f}' "$RUNS_FILE" 2>/dev/null |
        sort -g | awk '{v[NR]=$1} END { if (NR) print (NR % 2 ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2), NR }'
}
