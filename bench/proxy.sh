#!/usr/bin/env bash
# What proxying one MCP call costs the gateway, from one run: an upstream
# (an mcpg with backend_mock's echo) and three measured servers in front of
# nothing or of it, called on the stateless wire:
#   direct      mcpg answering echo with backend_mock in process (no upstream)
#   proxy       mcpg with backend_mcp passing echo to the upstream
#   nginx       nginx proxying the same POST to the same upstream (keep-alive)
# and a pair in front of a stdio MCP server (bench/stdio_echo.py, one per
# front, on the upstream's core), called on the legacy (session) wire, the
# one mcp-proxy serves to mcpg-load:
#   mcpg-stdio  mcpg with backend_mcp running the stdio server (`command`)
#   mcp-proxy   the npm package mcp-proxy (pinned in bench/peers, installed
#               there with npm ci when missing) running the same server
# CPU per call is Δ(utime+stime) of the measured process only (nginx: its
# worker; the pair: the front, not its stdio child, whose CPU per call is
# shown apart) over good calls; the upstream's CPU is not in it. The targets
# alternate for --rounds rounds; medians and the ratios to nginx, to direct
# and within the pair are printed. See bench/README.md.
#
#   bench/proxy.sh                                 3 rounds of 5 s
#   bench/proxy.sh --rounds 5 --json proxy.jsonl
#   bench/proxy.sh --no-mcp-proxy                  no node: the pair is mcpg-stdio alone
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LOAD=$ROOT/build/bin/mcpg-load
MCPG=$ROOT/build/bin/mcpg
CONFIG=$ROOT/conf/bench.json
GW_CPU=0 LOAD_CPU=1 UP_CPU=""
PORT_BASE=18280
DURATION=5 WARMUP=2 CONNECTIONS=64 ROUNDS=3
TOOL=echo MESSAGE=hello
UP_WIRE=stateless KEEPALIVE="" JSON_OUT=""
LOAD_EXTRA=()
PEERS=$ROOT/bench/peers MCP_PROXY=1 MCP_PROXY_FLAGS=()
ME=proxy
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

usage() {
    cat <<EOF
usage: $0 [options] [-- mcpg-load options]
  --rounds N           rounds; each measures every target once (default $ROUNDS)
  --duration S         measured seconds per run (default $DURATION; keep it <= 10)
  --warmup S           seconds of load before each run, in a separate mcpg-load (default $WARMUP)
  --connections N      (default $CONNECTIONS)   --message TEXT
  --config PATH        the measured gateways' manifest (default conf/bench.json): direct is it
                       with its backend_mock inline; proxy is it with backend_mcp in the mock's place
  --upstream-wire W    backend_mcp's wire toward the upstream: stateless|legacy|auto (default $UP_WIRE)
  --nginx-keepalive N  idle upstream connections nginx keeps (default: --connections, so none
                       is closed and reopened under a closed loop of that many calls)
  --port-base P        ports P..P+5: upstream, direct, proxy, nginx, mcpg-stdio, mcp-proxy
                       (default $PORT_BASE)
  --no-mcp-proxy       leave mcp-proxy out (no node/npm needed); mcpg-stdio is still measured
  --mcp-proxy-flag F   one more flag for mcp-proxy (repeatable), e.g. --no-eventStore
  --gw-cpu N           the measured server's core (default $GW_CPU)
  --load-cpu N         mcpg-load's core (default $LOAD_CPU)
  --upstream-cpu N     the upstream's core (default: the load's)
  --mcpg PATH  --load PATH    binaries to use
  --json FILE          append one JSON line per run, then one summary line per target
EOF
}

own_opt() {
    case $1 in
    --upstream-wire) UP_WIRE=$2 ;;
    --nginx-keepalive) KEEPALIVE=$2 ;;
    --upstream-cpu) UP_CPU=$2 ;;
    --no-mcp-proxy) MCP_PROXY=0; flag ;;
    --mcp-proxy-flag) MCP_PROXY_FLAGS+=("$2") ;;
    *) return 1 ;;
    esac
}
parse_options "rounds duration warmup connections message config port-base gw-cpu load-cpu mcpg load json load-args" "$@"

[ -x "$LOAD" ] || die "no $LOAD: build it (cmake --build build --target mcpg-load)"
command -v jq >/dev/null || die "jq is needed to derive the manifests"
command -v nginx >/dev/null || die "no nginx: it is the baseline"
command -v python3 >/dev/null || die "no python3: it runs the stdio server (bench/stdio_echo.py)"
TASKSET=$(command -v taskset) || die "no taskset"
if [ "$MCP_PROXY" = 1 ]; then
    command -v node >/dev/null && command -v npm >/dev/null ||
        die "no node/npm for mcp-proxy: install them, or leave it out with --no-mcp-proxy"
fi
case $UP_WIRE in stateless|legacy|auto) ;; *) die "--upstream-wire: stateless, legacy or auto" ;; esac
UP_CPU=${UP_CPU:-$LOAD_CPU} KEEPALIVE=${KEEPALIVE:-$CONNECTIONS}
CLK_TCK=$(getconf CLK_TCK)
TMP=$(mktemp -d /tmp/mcpg-proxy.XXXXXX)
RUNS_FILE=$TMP/runs.txt
STARTED=() NGINX_MASTER="" CHILDREN=()
UP_PORT=$PORT_BASE

cleanup() {
    local pid
    for pid in "${STARTED[@]}"; do stop_pid "$pid"; done
    stop_pid "$NGINX_MASTER" QUIT # graceful: the master stops its worker
    # the stdio servers end with their front's pipe; any that did not, by pid
    for pid in "${CHILDREN[@]}"; do stop_pid "$pid"; done
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

progress() { echo "$ME: $*" >&2; }

# ---- the manifests, all derived from --config ----
# The upstream: only backend_mock's echo, inline, no audit, and its access
# log on: one line per request is how the script counts what it served.
jq '{description: "the upstream of bench/proxy.sh",
     gateway: {listen: .gateway.listen, log_level: "warn", server: {access_log: true}},
     cluster: {kind: "single_node"},
     modules: [{name: "mock", module: "backend_mock", inline_dispatch: true,
                config: {tools: [{name: "echo"}]}}]}' "$CONFIG" >"$TMP/upstream.json" ||
    die "cannot derive the upstream's manifest from $CONFIG"
# direct and proxy differ in the backend alone: both dispatched inline.
jq '.modules |= map(if .module == "backend_mock" then .inline_dispatch = true else . end)
    | .description = "direct, derived by bench/proxy.sh from: " + (.description // "")' \
    "$CONFIG" >"$TMP/direct.json" || die "cannot derive a manifest from $CONFIG"
jq --arg url "http://127.0.0.1:$UP_PORT/mcp" --arg wire "$UP_WIRE" \
    '(.modules | map(.module) | index("backend_mock")) as $i
    | if $i == null then error("no backend_mock module to replace") else . end
    | .modules[$i] = {name: .modules[$i].name, module: "backend_mcp", inline_dispatch: true,
                      config: {url: $url, wire: $wire}}
    | .gateway.log_level = "info"
    | .description = "proxy, derived by bench/proxy.sh from: " + (.description // "")' \
    "$CONFIG" >"$TMP/proxy.json" || die "cannot derive the proxy manifest from $CONFIG (it needs a backend_mock module)"
# mcpg-stdio: the same again, backend_mcp running the stdio server instead,
# pinned by taskset to the upstream's core (taskset execs it: one process).
STDIO_ECHO=$ROOT/bench/stdio_echo.py
stdio_argv() { printf '%s\n' -c "$UP_CPU" python3 "$STDIO_ECHO" --count-file "$TMP/$1.count"; }
jq --arg cmd "$TASKSET" --argjson argv "$(stdio_argv mcpg-stdio | jq -R . | jq -s .)" \
    '(.modules | map(.module) | index("backend_mock")) as $i
    | .modules[$i] = {name: .modules[$i].name, module: "backend_mcp", inline_dispatch: true,
                      config: {command: $cmd, args: $argv, wire: "legacy"}}
    | .gateway.log_level = "info"
    | .description = "mcpg-stdio, derived by bench/proxy.sh from: " + (.description // "")' \
    "$CONFIG" >"$TMP/mcpg-stdio.json" ||
    die "cannot derive the mcpg-stdio manifest from $CONFIG"

# ---- what the upstream served: its access log's good POSTs ----
upstream_served() { grep -c '"path":"/mcp","status":200' "$TMP/upstream.log" || true; }
# ... or, for the pair, the calls its stdio server counted (and its pid).
stdio_served() { local p c; read -r p c <"$TMP/$1.count"; echo $((10#$c)); }
stdio_pid() { local p c; read -r p c <"$TMP/$1.count"; echo "$p"; }
declare -A UP_SERVED CHILD_PID
UP_BEFORE=0 CHILD_T0=0
window_hook() { # start|end LABEL
    local t
    if [ -n "${CHILD_PID[$2]:-}" ]; then
        sleep 0.1 # the stdio server writes its count within 50 ms of its last call
        t=$(ticks_of "${CHILD_PID[$2]}"); t=${t% *}
        if [ "$1" = start ]; then UP_BEFORE=$(stdio_served "$2") CHILD_T0=$t; return; fi
        UP_SERVED[$2]=$(( $(stdio_served "$2") - UP_BEFORE ))
        echo "$2 $((t - CHILD_T0))" >>"$TMP/child.txt"
        return
    fi
    if [ "$1" = start ]; then UP_BEFORE=$(upstream_served); return; fi
    sleep 0.2 # the access log is written once per loop turn
    UP_SERVED[$2]=$(( $(upstream_served) - UP_BEFORE ))
}
WINDOW_HOOK=window_hook

# child_us NAME last|median: the stdio server's CPU per good call of NAME's
# last run, or the median over its runs ("-" for a target with none).
child_us() {
    awk -v t="$1" -v w="$2" -v hz="$CLK_TCK" 'NR == FNR { if ($1 == t) c[++n] = $2; next } $1 == t { o[++m] = $12 }
        END { if (!n) { print "-"; exit }
              for (i = 1; i <= n && i <= m; i++) v[i] = o[i] > 0 ? c[i] * 1e6 / hz / o[i] : 0
              if (w == "last") { printf "%.2f\n", v[n]; exit }
              for (i = 2; i <= n; i++) { x = v[i]; for (q = i - 1; q >= 1 && v[q] > x; q--) v[q + 1] = v[q]; v[q + 1] = x }
              printf "%.2f\n", n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2 }' \
        "$TMP/child.txt" "$RUNS_FILE" 2>/dev/null || echo -
}

# upstream_check LABEL: the upstream served the calls (proxied targets) or
# none (direct): within the calls in flight at either end of the window.
upstream_check() {
    local n=$1 served=${UP_SERVED[$1]} ok
    ok=$(awk -v t="$n" '$1 == t { v = $12 } END { print v + 0 }' "$RUNS_FILE")
    echo "$n $served" >>"$TMP/served.txt"
    if [ "$n" = direct ]; then
        [ "$served" = 0 ] && return 0
        echo "$ME: direct: the upstream served $served requests, expected none" >&2; return 1
    fi
    awk -v s="$served" -v o="$ok" -v c="$CONNECTIONS" 'BEGIN { d = s - o; exit !(o > 0 && d <= 2 * c && d >= -2 * c) }' &&
        return 0
    echo "$ME: $n: the upstream served $served requests for $ok good calls" >&2
    return 1
}

# ---- start: the upstream, then the measured servers ----
progress "placement: measured server on core $GW_CPU alone; mcpg-load on core $LOAD_CPU; upstream and stdio servers on core $UP_CPU"
start_gateway upstream "$TMP/upstream.json" "$UP_PORT" "$UP_CPU"; STARTED+=("$STARTED_PID")
start_gateway direct "$TMP/direct.json" $((PORT_BASE + 1)); STARTED+=("$STARTED_PID"); DIRECT_PID=$STARTED_PID
start_gateway proxy "$TMP/proxy.json" $((PORT_BASE + 2)); STARTED+=("$STARTED_PID"); PROXY_PID=$STARTED_PID
# backend_mcp negotiates after the start: wait until a call goes through.
for _ in $(seq 50); do gateway_answer $((PORT_BASE + 2)) "$TMP/proxy-answer.json" && break; sleep 0.1; done
[ -s "$TMP/proxy-answer.json" ] || { cat "$TMP/proxy.log" >&2; die "no call went through backend_mcp"; }
ready=$(grep -o 'upstream ready over [^"]*' "$TMP/proxy.log" | head -n1)
progress "backend_mcp: ${ready:-no readiness line in its log}"
if [ "$UP_WIRE" = stateless ] && [[ $ready != *"stateless wire"* ]]; then die "backend_mcp did not take the stateless wire"; fi
start_nginx_proxy $((PORT_BASE + 3)) "$UP_PORT" "$KEEPALIVE"
gateway_answer $((PORT_BASE + 3)) "$TMP/nginx-answer.json" || { cat "$TMP/nginx/"*.log >&2; die "nginx did not proxy a call"; }

TARGETS=(direct proxy nginx)
declare -A T_PORT=([direct]=$((PORT_BASE + 1)) [proxy]=$((PORT_BASE + 2)) [nginx]=$((PORT_BASE + 3)))
declare -A T_PID=([direct]=$DIRECT_PID [proxy]=$PROXY_PID [nginx]=$NGINX_WORKER)
declare -A T_WIRE=([direct]=stateless [proxy]=stateless [nginx]=stateless)

# ---- the stdio pair: each front runs its own copy of bench/stdio_echo.py ----
# stdio_child NAME FRONT_PID: the stdio server's pid from its count file, once
# it is there, checked to be FRONT_PID's child.
stdio_child() {
    local name=$1 front=$2 pid="" ppid s
    for _ in $(seq 100); do [ -s "$TMP/$name.count" ] && pid=$(stdio_pid "$name") && [ -n "$pid" ] && break; sleep 0.1; done
    [ -n "$pid" ] || die "$name: its stdio server never started"
    s=$(<"/proc/$pid/stat"); s=${s##*) }; ppid=$(cut -d' ' -f2 <<<"$s")
    [ "$ppid" = "$front" ] || die "$name: stdio server $pid is not $front's child (its parent: $ppid)"
    CHILD_PID[$name]=$pid; CHILDREN+=("$pid")
}
start_gateway mcpg-stdio "$TMP/mcpg-stdio.json" $((PORT_BASE + 4)); STARTED+=("$STARTED_PID"); STDIO_PID=$STARTED_PID
for _ in $(seq 50); do gateway_answer $((PORT_BASE + 4)) "$TMP/mcpg-stdio-answer.json" --wire legacy && break; sleep 0.1; done
[ -s "$TMP/mcpg-stdio-answer.json" ] || { cat "$TMP/mcpg-stdio.log" >&2; die "no call went through backend_mcp to the stdio server"; }
stdio_child mcpg-stdio "$STDIO_PID"
stdio_ready=$(grep -o 'upstream ready over [^"]*' "$TMP/mcpg-stdio.log" | head -n1)
progress "mcpg-stdio: backend_mcp ${stdio_ready:-no readiness line in its log}; stdio server pid ${CHILD_PID[mcpg-stdio]}"
TARGETS+=(mcpg-stdio); T_PORT[mcpg-stdio]=$((PORT_BASE + 4)); T_PID[mcpg-stdio]=$STDIO_PID; T_WIRE[mcpg-stdio]=legacy

MCP_PROXY_VERSION=-
if [ "$MCP_PROXY" = 1 ]; then
    want=$(jq -r '.dependencies["mcp-proxy"]' "$PEERS/package.json")
    have=$(jq -r .version "$PEERS/node_modules/mcp-proxy/package.json" 2>/dev/null || true)
    if [ "$have" != "$want" ]; then
        progress "installing mcp-proxy $want into bench/peers (npm ci, from its package-lock.json)"
        (cd "$PEERS" && npm ci --no-audit --no-fund --ignore-scripts) >"$TMP/npm.log" 2>&1 ||
            { cat "$TMP/npm.log" >&2; die "npm ci in $PEERS failed"; }
    fi
    MCP_PROXY_VERSION=$want
    port=$((PORT_BASE + 5))
    port_busy "$port" && die "port $port is in use"
    # defaults but the address and one transport (the stream endpoint, /mcp)
    mapfile -t mp_argv < <(stdio_argv mcp-proxy)
    taskset -c "$GW_CPU" node "$PEERS/node_modules/mcp-proxy/dist/bin/mcp-proxy.mjs" \
        --host 127.0.0.1 --port "$port" --server stream "${MCP_PROXY_FLAGS[@]}" \
        -- "$TASKSET" "${mp_argv[@]}" >"$TMP/mcp-proxy.log" 2>&1 &
    STARTED+=($!); MP_PID=$!
    wait_port "$MP_PID" "$port" || { cat "$TMP/mcp-proxy.log" >&2; die "mcp-proxy did not start"; }
    stdio_child mcp-proxy "$MP_PID"
    gateway_answer "$port" "$TMP/mcp-proxy-answer.json" --wire legacy ||
        { cat "$TMP/mcp-proxy.log" >&2; die "no call went through mcp-proxy"; }
    progress "mcp-proxy $MCP_PROXY_VERSION: node pid $MP_PID, stdio server pid ${CHILD_PID[mcp-proxy]}${MCP_PROXY_FLAGS[*]:+; flags ${MCP_PROXY_FLAGS[*]}}"
    TARGETS+=(mcp-proxy); T_PORT[mcp-proxy]=$port; T_PID[mcp-proxy]=$MP_PID; T_WIRE[mcp-proxy]=legacy
fi
NT=${#TARGETS[@]}

# ---- the rounds: every target once per round, the order rotated ----
failed=0
total=$(( ROUNDS * ${#TARGETS[@]} )) done_runs=0
print_header
for ROUND in $(seq "$ROUNDS"); do
    for i in $(seq 0 $((NT - 1))); do
        n=${TARGETS[$(( (i + ROUND - 1) % NT ))]}
        done_runs=$((done_runs + 1))
        progress "round $ROUND/$ROUNDS, run $done_runs/$total: $n (warm-up ${WARMUP} s, measure ${DURATION} s)"
        expect=(); [ "${T_WIRE[$n]}" = stateless ] || expect=(--expect "$MESSAGE")
        measure "$n" "${T_PID[$n]}" "${T_PORT[$n]}" --wire "${T_WIRE[$n]}" "${expect[@]}" || failed=1
        upstream_check "$n" || failed=1
        if [ -n "${CHILD_PID[$n]:-}" ]; then
            progress "$n: its stdio server (not in cpu_us/call above): $(child_us "$n" last) us/call"
        fi
    done
done

# ---- medians and ratios ----
SUM="%-10s %-9s %10s %8s %8s %11s %5s %9s %10s %9s %12s %9s %9s %9s %7s %6s %6s %s\n"
echo
echo "placement: measured server on core $GW_CPU alone, mcpg-load on core $LOAD_CPU, upstream and stdio servers on core $UP_CPU;"
echo "backend_mcp toward the upstream: ${ready:-?}; nginx: 1 worker, keepalive $KEEPALIVE"
echo "the stdio pair (bench/stdio_echo.py, client wire legacy): mcpg-stdio's backend_mcp ${stdio_ready:-?};"
if [ "$MCP_PROXY" = 1 ]; then
    echo "mcp-proxy $MCP_PROXY_VERSION (node $(node --version)), --server stream${MCP_PROXY_FLAGS[*]:+ ${MCP_PROXY_FLAGS[*]}}, its own 2025 handshake to the stdio server;"
else
    echo "mcp-proxy left out (--no-mcp-proxy);"
fi
echo "cpu_us/call counts the front process only (node for mcp-proxy); stdio_us is its stdio server's, apart"
echo "medians over the clean runs of $ROUNDS round(s) (all runs when none was clean):"
printf "$SUM" target wire calls/s p50_us p99_us cpu_us/call sys% vs_nginx vs_direct vs_pair upstream/ok stdio_us \
    VmHWM_kB VmRSS_kB threads other% steal% runs
fig() { local v; v=$(median "$1" "$2"); awk -v v="${v%% *}" -v f="${3:-%.0f}" 'BEGIN { printf f "\n", v }'; }
served_ratio() { # the median over runs of what the upstream served per good call
    awk -v t="$1" 'NR == FNR { if ($1 == t) s[++n] = $2; next } $1 == t { o[++m] = $12 }
        END { for (i = 1; i <= n && i <= m; i++) v[i] = o[i] > 0 ? s[i] / o[i] : 0
              for (i = 2; i <= n; i++) { x = v[i]; for (q = i - 1; q >= 1 && v[q] > x; q--) v[q + 1] = v[q]; v[q + 1] = x }
              if (n) printf "%.3f\n", n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2; else print "-" }' \
        "$TMP/served.txt" "$RUNS_FILE"
}
ngx=$(fig nginx 2 %.2f) dir=$(fig direct 2 %.2f) pair=$(fig mcpg-stdio 2 %.2f)
for n in "${TARGETS[@]}"; do
    cpu=$(fig "$n" 2 %.2f)
    f() { fig "$n" "$@"; }
    c=$(clean_runs "$n"); runs="$c of $ROUNDS clean"; [ "$c" -gt 0 ] || runs="NONE of $ROUNDS clean"
    read -r vn vd < <(awk -v c="$cpu" -v g="$ngx" -v d="$dir" \
        'BEGIN { printf "%.2fx %.2fx\n", (g > 0 ? c / g : 0), (d > 0 ? c / d : 0) }')
    vp=-; [ -z "${CHILD_PID[$n]:-}" ] || vp=$(awk -v c="$cpu" -v p="$pair" 'BEGIN { printf "%.2fx\n", (p > 0 ? c / p : 0) }')
    sr=$(served_ratio "$n") su=$(child_us "$n" median)
    printf "$SUM" "$n" "${T_WIRE[$n]}" "$(f 4 %.1f)" "$(f 5 %.1f)" "$(f 6 %.1f)" "$cpu" "$(f 16)%" "$vn" "$vd" "$vp" "$sr" "$su" \
        "$(f 7)" "$(f 8)" "$(f 9)" "$(f 10 %.1f)" "$(f 11 %.1f)" "$runs"
    if [ -n "$JSON_OUT" ]; then
        printf '{"bench":"proxy-summary","target":"%s","rounds":%s,"clean_runs":%s,"calls_per_s":%s,"p50_us":%s,"p99_us":%s,' \
            "$n" "$ROUNDS" "$c" "$(f 4 %.1f)" "$(f 5 %.1f)" "$(f 6 %.1f)" >>"$JSON_OUT"
        printf '"cpu_us_per_call":%s,"ratio_to_nginx":%s,"ratio_to_direct":%s,"upstream_served_per_call":%s,' \
            "$cpu" "${vn%x}" "${vd%x}" "$([ "$sr" = - ] && echo null || echo "$sr")" >>"$JSON_OUT"
        printf '"vm_hwm_kb":%s,"vm_rss_kb":%s,"threads":%s,"core_other_pct":%s,"core_steal_pct":%s,"cpu_sys_pct":%s,' \
            "$(f 7)" "$(f 8)" "$(f 9)" "$(f 10 %.1f)" "$(f 11 %.1f)" "$(f 16)" >>"$JSON_OUT"
        printf '"client_wire":"%s","ratio_to_mcpg_stdio":%s,"stdio_child_cpu_us_per_call":%s,' "${T_WIRE[$n]}" \
            "$([ "$vp" = - ] && echo null || echo "${vp%x}")" "$([ "$su" = - ] && echo null || echo "$su")" >>"$JSON_OUT"
        [ "$n" != mcp-proxy ] || printf '"version":"%s",' "$MCP_PROXY_VERSION" >>"$JSON_OUT"
        printf '"gw_cpu":%s,"load_cpu":%s,"upstream_cpu":%s}\n' "$GW_CPU" "$LOAD_CPU" "$UP_CPU" >>"$JSON_OUT"
    fi
done
[ "$failed" = 0 ] || echo "$ME: some runs had errors, or the upstream (or stdio server) did not serve the proxied calls: see above" >&2
exit "$failed"
