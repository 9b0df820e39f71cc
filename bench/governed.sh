#!/usr/bin/env bash
# The governed scenario: conf/governed.json's three limited tools, each alone,
# 64 connections calling it as fast as they can for 30 s, a refused call sent
# again at once (mcpg-load's closed loop: a 429 is an answer, the connection's
# next call follows it). Each (scope, tool) run has a gateway of its own, so a
# rate or a budget starts fresh and the limits instance's closing count
# (refusals, those answered from memory, coordinator ops) is that run's alone.
# Beside it, in the same session: the same manifest's unlimited `echo`, for the
# CPU of a call with the same audit and no limit (the "bare" figure).
#
# Printed per run: admitted, refused, calls judged per second (refusals
# included), admitted per second, the mock's own maximum in flight (capped),
# gateway CPU per admitted call and per judged call, coordinator ops per
# refusal; then what the limit promises beside what was admitted.
#
#   bench/governed.sh                       local and global, 30 s per tool
#   bench/governed.sh --duration 10 --scopes local --json governed.jsonl
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LOAD=$ROOT/build/bin/mcpg-load
MCPG=$ROOT/build/bin/mcpg
GW_CPU=0 LOAD_CPU=1
PORT_BASE=18480
DURATION=30 CONNECTIONS=64 BARE_SECONDS=10
SCOPES="local global" TOOLS="capped rated budgeted"
JSON_OUT=""
ME=governed
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

usage() {
    cat <<USAGE
usage: $0 [options]
  --duration S         seconds per limited tool (default $DURATION: the reference's scenario)
  --bare-seconds S     seconds of the unlimited echo (default $BARE_SECONDS)
  --connections N      (default $CONNECTIONS)
  --scopes "A B"       local, global or both (default "$SCOPES")
  --tools "A B"        of capped rated budgeted (default all)
  --port-base P        ports P.. (default $PORT_BASE)
  --gw-cpu N  --load-cpu N   cores (default $GW_CPU and $LOAD_CPU)
  --json FILE          append one JSON line per run
USAGE
}

own_opt() {
    case $1 in
    --bare-seconds) BARE_SECONDS=$2 ;;
    --scopes) SCOPES=$2 ;;
    --tools) TOOLS=$2 ;;
    *) return 1 ;;
    esac
}
parse_options "duration connections port-base gw-cpu load-cpu json" "$@"

[ -x "$LOAD" ] || die "no $LOAD: build it (make build)"
command -v jq >/dev/null || die "jq is needed to derive the manifests"
command -v curl >/dev/null || die "curl is needed to read mock_stats"
CLK_TCK=$(getconf CLK_TCK)
TMP=$(mktemp -d /tmp/mcpg-governed.XXXXXX)
GW_PID=""
cleanup() { stop_pid "$GW_PID"; rm -rf "$TMP"; }
trap cleanup EXIT
trap 'exit 130' INT TERM
progress() { echo "$ME: $*" >&2; }

# manifest SCOPE: conf/governed.json with every limit in SCOPE, info logs (the
# limits instance's closing count) and an unlimited echo beside the three.
manifest() {
    jq --arg s "$1" '
        (.modules[] | select(.module == "limits") | .config.limits[]).scope = $s
        | (.modules[] | select(.module == "backend_mock") | .config.tools) += [{name: "echo"}]
        | .gateway.log_level = "info" | .gateway.server = {access_log: false}
        | .description = "governed, " + $s + " scope, derived by bench/governed.sh"' \
        "$ROOT/conf/governed.json" >"$TMP/governed-$1.json"
}

mock_stats() { # PORT TOOL: "max_in_flight calls" of TOOL as the mock counted them
    curl -s "http://127.0.0.1:$1/mcp" -H 'Content-Type: application/json' \
        -H 'Accept: application/json, text/event-stream' -H 'MCP-Protocol-Version: 2026-07-28' \
        -H 'Mcp-Method: tools/call' -H 'Mcp-Name: mock_stats' \
        -d '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"mock_stats","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}' |
        jq -r --arg t "$2" '.result.content[0].text | fromjson | .tools[$t] | "\(.max_in_flight) \(.calls)"'
}

# closing_count LOG: "refusals remembered ops" from the limits instance's last line
closing_count() {
    sed -n 's/.*refusals: \([0-9]*\) (\([0-9]*\) answered from memory); coordinator ops to judge calls: \([0-9]*\).*/\1 \2 \3/p' \
        "$1" | tail -n1
}

promise() { # TOOL: what the limit promises over the window
    case $1 in
    capped) echo "<= 8 in flight, ~80/s" ;;
    rated) awk -v d="$DURATION" 'BEGIN { n = 10 + int(d * 10); printf "%d over [t0, t0+%gs], %d half-open", n, d, n - 1 }' ;;
    budgeted) echo "1000" ;;
    echo) echo "(no limit)" ;;
    esac
}

ROW="%-7s %-9s %9s %9s %10s %11s %6s %12s %11s %10s  %s\n"
rows=()
# one_run SCOPE TOOL SECONDS: a fresh gateway, the load, its figures.
one_run() {
    local scope=$1 tool=$2 secs=$3 port=$((PORT_BASE)) out t0 t1 rc=0
    start_gateway "$scope-$tool" "$TMP/governed-$scope.json" "$port"
    GW_PID=$STARTED_PID
    local args=(--url "http://127.0.0.1:$port/mcp" -c "$CONNECTIONS" --tool "$tool" --message hello
                --expect "Echo: " -w 0 -q)
    # Only the unlimited echo warms up: a limited tool's first second is part of its scenario.
    [ "$tool" != echo ] || taskset -c "$LOAD_CPU" "$LOAD" "${args[@]}" -d 2 >/dev/null 2>&1 ||
        die "$scope echo: errors during the warm-up"
    t0=$(ticks_of "$GW_PID")
    out=$(taskset -c "$LOAD_CPU" "$LOAD" "${args[@]}" -d "$secs" --json 2>"$TMP/run.err") || rc=$?
    t1=$(ticks_of "$GW_PID")
    local ok refused other secs_m inflight="-"
    ok=$(json_num "$out" ok); refused=$(json_num "$out" err_http_status); secs_m=$(json_num "$out" duration_s)
    other=$(( $(json_num "$out" errors) - refused ))
    if [ "$other" -gt 0 ] || { [ "$rc" != 0 ] && [ "$refused" = 0 ]; }; then
        cat "$TMP/run.err" >&2; die "$scope $tool: $other errors that are not refusals"
    fi
    [ "$tool" != capped ] || inflight=$(mock_stats "$port" capped | cut -d' ' -f1)
    stop_pid "$GW_PID"; GW_PID=""
    local count remembered=0 ops=0 n_ref=0
    count=$(closing_count "$TMP/$scope-$tool.log")
    [ -z "$count" ] || read -r n_ref remembered ops <<<"$count"
    local fig
    fig=$(awk -v dt=$((${t1% *} - ${t0% *})) -v hz="$CLK_TCK" -v ok="$ok" -v rf="$refused" -v s="$secs_m" \
        -v ops="$ops" -v nr="$n_ref" 'BEGIN {
        us = dt * 1e6 / hz
        printf "%.0f %.1f %.2f %.2f %s", (ok + rf) / s, ok / s, (ok ? us / ok : 0), (ok + rf ? us / (ok + rf) : 0),
               (nr ? sprintf("%.4f", ops / nr) : "-") }')
    set -- $fig
    local line
    line=$(printf "$ROW" "$scope" "$tool" "$ok" "$refused" "$1" "$2" "$inflight" "$3" "$4" "$5" "$(promise "$tool")")
    rows+=("$line")
    printf '%s\n' "$line"
    [ -z "$JSON_OUT" ] || printf '{"bench":"governed","scope":"%s","tool":"%s","connections":%s,"duration_s":%s,"admitted":%s,"refused":%s,"judged_per_s":%s,"admitted_per_s":%s,"max_in_flight":"%s","cpu_us_per_admitted":%s,"cpu_us_per_judged":%s,"refusals_logged":%s,"refusals_from_memory":%s,"coordinator_ops":%s}\n' \
        "$scope" "$tool" "$CONNECTIONS" "$secs_m" "$ok" "$refused" "$1" "$2" "$inflight" "$3" "$4" "$n_ref" \
        "$remembered" "$ops" >>"$JSON_OUT"
}

progress "gateway on core $GW_CPU, mcpg-load on core $LOAD_CPU, $CONNECTIONS connections, ${DURATION} s per tool"
printf "$ROW" scope tool admitted refused judged/s admitted/s max_if cpu_us/adm cpu_us/jdg ops/refusal promise
for scope in $SCOPES; do
    manifest "$scope"
    progress "$scope: echo (no limit), ${BARE_SECONDS} s"
    one_run "$scope" echo "$BARE_SECONDS"
    for tool in $TOOLS; do
        progress "$scope: $tool, ${DURATION} s"
        one_run "$scope" "$tool" "$DURATION"
    done
done
echo
echo "all runs:"
printf "$ROW" scope tool admitted refused judged/s admitted/s max_if cpu_us/adm cpu_us/jdg ops/refusal promise
printf '%s\n' "${rows[@]}"
