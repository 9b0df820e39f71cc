#!/usr/bin/env bash
# The gateway against its backend's latency: backend_mock tools that answer
# after 0, 5, 50 and 200 ms, each driven by 10, 50 and 100 connections, on
# conf/bench.json's settings (audit on). Two dispatches of the same mock:
#   inline  the wait is a loop timer (a backend that does its I/O without
#           blocking: backend_mcp, backend_http)
#   pool    the wait blocks a pool thread (a blocking backend on the bounded
#           pool: gateway.pool.threads of them serve at once)
# Printed per run: calls/s, p50/p99, and the gateway's share of p50 (p50 less
# the backend's own time).
#
#   bench/backend-latency.sh                                   every cell, 5 s each
#   bench/backend-latency.sh --latencies "0 50" --connections "10 100" --dispatch inline
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LOAD=$ROOT/build/bin/mcpg-load
MCPG=$ROOT/build/bin/mcpg
GW_CPU=0 LOAD_CPU=1
PORT_BASE=18780
DURATION=5 WARMUP=1
LATENCIES="0 5 50 200" CONNECTIONS="10 50 100" DISPATCH="inline pool"
JSON_OUT=""
ME=backend-latency
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

usage() {
    cat <<USAGE
usage: $0 [options]
  --latencies "A B"    backend latencies in ms (default "$LATENCIES")
  --connections "A B"  connection counts (default "$CONNECTIONS")
  --dispatch "A B"     inline, pool or both (default "$DISPATCH")
  --duration S  --warmup S   per run (default $DURATION and $WARMUP)
  --port-base P  --gw-cpu N  --load-cpu N
  --json FILE          append one JSON line per run
USAGE
}

own_opt() {
    case $1 in
    --latencies) LATENCIES=$2 ;;
    --dispatch) DISPATCH=$2 ;;
    *) return 1 ;;
    esac
}
parse_options "connections duration warmup port-base gw-cpu load-cpu json" "$@"

[ -x "$LOAD" ] || die "no $LOAD: build it (make build)"
command -v jq >/dev/null || die "jq is needed to derive the manifests"
TMP=$(mktemp -d /tmp/mcpg-backend-latency.XXXXXX)
STARTED=()
cleanup() { local p; for p in "${STARTED[@]+"${STARTED[@]}"}"; do stop_pid "$p"; done; rm -rf "$TMP"; }
trap cleanup EXIT
trap 'exit 130' INT TERM
progress() { echo "$ME: $*" >&2; }

# manifest DISPATCH: conf/bench.json's mock offering lat<ms> for each latency
manifest() {
    local tools
    tools=$(for l in $LATENCIES; do printf '{"name":"lat%s","latency_ms":%s}\n' "$l" "$l"; done | jq -s .)
    jq --argjson tools "$tools" --argjson inline "$([ "$1" = inline ] && echo true || echo false)" '
        (.modules[] | select(.module == "backend_mock")) |= (.config.tools = $tools | .inline_dispatch = $inline)
        | .description = "backend latency, derived by bench/backend-latency.sh"' \
        "$ROOT/conf/bench.json" >"$TMP/$1.json"
}

ROW="%-7s %8s %6s %10s %10s %10s %14s\n"
printf "$ROW" dispatch backend conns calls/s p50_us p99_us gateway_p50_us
port=$PORT_BASE
for d in $DISPATCH; do
    manifest "$d"
    start_gateway "$d" "$TMP/$d.json" "$port"
    STARTED+=("$STARTED_PID")
    for l in $LATENCIES; do
        for c in $CONNECTIONS; do
            progress "$d, backend ${l} ms, $c connections"
            out=$(taskset -c "$LOAD_CPU" "$LOAD" --url "http://127.0.0.1:$port/mcp" -c "$c" --tool "lat$l" \
                --expect "Echo: hello" -w "$WARMUP" -d "$DURATION" --timeout 30 -q --json 2>"$TMP/run.err") ||
                { cat "$TMP/run.err" >&2; die "$d lat$l c$c: errors"; }
            p50=$(json_num "$out" p50_us)
            share=$(awk -v p="$p50" -v l="$l" 'BEGIN { printf "%.0f", p - l * 1000 }')
            printf "$ROW" "$d" "${l} ms" "$c" "$(json_num "$out" calls_per_s)" "$p50" "$(json_num "$out" p99_us)" "$share"
            [ -z "$JSON_OUT" ] || echo "${out%\}},\"target\":\"backend-latency\",\"dispatch\":\"$d\",\"backend_ms\":$l,\"gateway_p50_us\":$share}" >>"$JSON_OUT"
        done
    done
    stop_pid "$STARTED_PID"
    port=$((port + 1))
done
