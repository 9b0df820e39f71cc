#!/usr/bin/env bash
# Gateway CPU per call over https beside http, from one run: conf/bench.json
# served twice (clear text, then transport_http's TLS with a P-256 certificate
# this script makes with the openssl command), each pinned to the gateway
# core and loaded by wrk (keep-alive connections, the stateless tools/call
# mcpg-load sends) on the other core. A third run asks for "Connection: close"
# over https, so every call pays a full handshake (the cost of clients that do
# not keep connections). CPU per call = Δ(utime+stime) of the gateway / calls.
#
# wrk, not mcpg-load: mcpg-load speaks no TLS, and both sides must be measured
# by the same client. wrk does not judge answers: one call per target is
# checked with curl first, and wrk's non-2xx count must be 0.
#
#   bench/tls.sh [--duration S] [--warmup S] [--connections N] [--json FILE]
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
MCPG=$ROOT/build/bin/mcpg
CONFIG=$ROOT/conf/bench.json
GW_CPU=0 LOAD_CPU=1
PORT=18090 TLS_PORT=18091
DURATION=10 WARMUP=2 CONNECTIONS=64
JSON_OUT=""
ME=tls
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

usage() {
    cat <<EOF
usage: $0 [options]
  --duration S      measured seconds per target (default $DURATION)
  --warmup S        seconds of load before each, not counted (default $WARMUP)
  --connections N   wrk connections (default $CONNECTIONS)
  --port P / --tls-port P   (defaults $PORT / $TLS_PORT)
  --gw-cpu N / --load-cpu N (defaults $GW_CPU / $LOAD_CPU)
  --mcpg PATH  --config PATH
  --json FILE       append one JSON line per target
EOF
}

while [ $# -gt 0 ]; do
    case $1 in
    --duration) DURATION=$2; shift ;;
    --warmup) WARMUP=$2; shift ;;
    --connections|-c) CONNECTIONS=$2; shift ;;
    --port) PORT=$2; shift ;;
    --tls-port) TLS_PORT=$2; shift ;;
    --gw-cpu) GW_CPU=$2; shift ;;
    --load-cpu) LOAD_CPU=$2; shift ;;
    --mcpg) MCPG=$2; shift ;;
    --config) CONFIG=$2; shift ;;
    --json) JSON_OUT=$2; shift ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
    esac
    shift
done

command -v wrk >/dev/null || die "no wrk (scripts/install-deps.sh installs it)"
command -v openssl >/dev/null || die "no openssl command"
command -v curl >/dev/null || die "no curl"
CLK_TCK=$(getconf CLK_TCK)
TMP=$(mktemp -d /tmp/mcpg-tls.XXXXXX)
PLAIN_PID="" TLS_PID=""
cleanup() {
    stop_pid "$PLAIN_PID"
    stop_pid "$TLS_PID"
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- certificates and the https manifest ----
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$TMP/ca.key" \
    -out "$TMP/ca.pem" -days 2 -subj "/CN=bench CA" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$TMP/server.key" \
    -out "$TMP/server.csr" -subj "/CN=localhost" 2>/dev/null
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >"$TMP/server.ext"
openssl x509 -req -in "$TMP/server.csr" -CA "$TMP/ca.pem" -CAkey "$TMP/ca.key" -set_serial 1 \
    -days 2 -extfile "$TMP/server.ext" -out "$TMP/server.pem" 2>/dev/null
python3 - "$CONFIG" "$TMP" >"$TMP/bench-tls.json" <<'EOF'
import json, sys
m = json.load(open(sys.argv[1]))
m["gateway"].setdefault("server", {}).update(
    {"tls_cert_file": sys.argv[2] + "/server.pem", "tls_key_file": sys.argv[2] + "/server.key"})
json.dump(m, sys.stdout)
EOF

# ---- the call, as mcpg-load sends it ----
BODY='{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hello"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"wrk","version":"4"}}}}'
HEADERS=(-H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream'
         -H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: tools/call' -H 'Mcp-Name: echo')
cat >"$TMP/call.lua" <<EOF
wrk.method = "POST"
wrk.body = '$BODY'
EOF

check_answer() { # URL: one call answered with the echo
    local a
    a=$(curl -sS --cacert "$TMP/ca.pem" "${HEADERS[@]}" -d "$BODY" "$1") || die "curl $1 failed"
    case $a in *'"text":"Echo: hello"'*) ;; *) die "unexpected answer from $1: $a" ;; esac
}

HDR_TLS="%-12s %10s %9s %9s %12s %6s %9s\n"
# run LABEL PID URL [wrk -H ...]: warm-up, then the measured window.
run() {
    local label=$1 pid=$2 url=$3; shift 3
    local wrk_args=(-t 1 -c "$CONNECTIONS" -s "$TMP/call.lua" "${HEADERS[@]}" "$@" --latency)
    if [ "$WARMUP" != 0 ]; then
        taskset -c "$LOAD_CPU" wrk "${wrk_args[@]}" -d "${WARMUP}s" "$url" >/dev/null
    fi
    local t0 t1 out n secs bad
    t0=$(ticks_of "$pid")
    out=$(taskset -c "$LOAD_CPU" wrk "${wrk_args[@]}" -d "${DURATION}s" "$url")
    t1=$(ticks_of "$pid")
    n=$(sed -n 's/^ *\([0-9]*\) requests in \([0-9.]*\)\(m*s\).*/\1/p' <<<"$out")
    secs=$(sed -n 's/^ *[0-9]* requests in \([0-9.]*\)s.*/\1/p' <<<"$out")
    bad=$(sed -n 's/^ *Non-2xx or 3xx responses: *\([0-9]*\).*/\1/p' <<<"$out")
    local p50 p99
    p50=$(awk '$1 == "50%" { print $2 }' <<<"$out"); p99=$(awk '$1 == "99%" { print $2 }' <<<"$out")
    [ -n "$n" ] && [ "$n" -gt 0 ] || { echo "$out" >&2; die "$label: wrk reported no requests"; }
    [ -z "$bad" ] || [ "$bad" = 0 ] || { echo "$out" >&2; die "$label: $bad answers were not 2xx"; }
    local dt=$((${t1% *} - ${t0% *})) dsys=$((${t1#* } - ${t0#* }))
    local fig
    fig=$(awk -v dt="$dt" -v ds="$dsys" -v hz="$CLK_TCK" -v n="$n" -v s="${secs:-$DURATION}" 'BEGIN {
        printf "%.2f %.0f %.0f", dt * 1e6 / hz / n, n / s, (dt > 0 ? 100 * ds / dt : 0) }')
    set -- $fig
    printf "$HDR_TLS" "$label" "$2" "$p50" "$p99" "$1" "$3%" "$(status_kb "$pid" VmHWM)"
    echo "$label $1" >>"$TMP/figures"
    if [ -n "$JSON_OUT" ]; then
        printf '{"bench":"tls","target":"%s","calls":%s,"duration_s":%s,"calls_per_s":%s,"p50":"%s","p99":"%s","connections":%s,"cpu_ticks":%s,"clk_tck":%s,"cpu_us_per_call":%s,"cpu_sys_pct":%s,"vm_hwm_kb":%s}\n' \
            "$label" "$n" "${secs:-$DURATION}" "$2" "$p50" "$p99" "$CONNECTIONS" "$dt" "$CLK_TCK" "$1" "$3" \
            "$(status_kb "$pid" VmHWM)" >>"$JSON_OUT"
    fi
}

start_gateway http "$CONFIG" "$PORT"
PLAIN_PID=$STARTED_PID
start_gateway https "$TMP/bench-tls.json" "$TLS_PORT"
TLS_PID=$STARTED_PID
check_answer "http://127.0.0.1:$PORT/mcp"
check_answer "https://127.0.0.1:$TLS_PORT/mcp"

printf "$HDR_TLS" target calls/s p50 p99 cpu_us/call sys% VmHWM_kB
# one gateway on the core at a time: the other idles (its CPU is not counted)
run http "$PLAIN_PID" "http://127.0.0.1:$PORT/mcp"
run https "$TLS_PID" "https://127.0.0.1:$TLS_PORT/mcp"
run https-close "$TLS_PID" "https://127.0.0.1:$TLS_PORT/mcp" -H 'Connection: close'
awk '{ v[$1] = $2 } END {
    if (v["http"] > 0) printf "https / http CPU per call: %.2fx (+%.2f us); with a handshake per call: %.2fx\n",
        v["https"] / v["http"], v["https"] - v["http"], v["https-close"] / v["http"] }' "$TMP/figures"
