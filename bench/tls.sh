#!/usr/bin/env bash
# Gateway CPU per call over https beside http, from one run: conf/bench.json
# served twice (clear text, and transport_http's TLS with a P-256 certificate
# this script makes with the openssl command), each pinned to the gateway
# core and loaded by mcpg-load on the other (keep-alive connections, every
# answer checked). A third target asks for "Connection: close" over https, so
# every call pays a full handshake (clients that keep no connection). CPU per
# call = Δ(utime+stime) of the gateway / good calls (bench/lib.sh measure).
#
#   bench/tls.sh [--duration S] [--warmup S] [--connections N] [--rounds N] [--json FILE]
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LOAD=$ROOT/build/bin/mcpg-load
MCPG=$ROOT/build/bin/mcpg
CONFIG=$ROOT/conf/bench.json
GW_CPU=0 LOAD_CPU=1
PORT=18090 TLS_PORT=18091
DURATION=10 WARMUP=2 CONNECTIONS=64 ROUNDS=1
TOOL=echo MESSAGE=hello
JSON_OUT=""
LOAD_EXTRA=()
ME=tls
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

usage() {
    cat <<EOF
usage: $0 [options]
  --duration S      measured seconds per run (default $DURATION)
  --warmup S        seconds of load before each run, not counted (default $WARMUP)
  --connections N   (default $CONNECTIONS)   --rounds N: alternate the targets N times, medians (default $ROUNDS)
  --port P / --tls-port P   (defaults $PORT / $TLS_PORT)
  --gw-cpu N / --load-cpu N (defaults $GW_CPU / $LOAD_CPU)
  --mcpg PATH  --config PATH  --load PATH
  --json FILE       append one JSON line per run
EOF
}

own_opt() {
    case $1 in
    --tls-port) TLS_PORT=$2 ;;
    *) return 1 ;;
    esac
}
parse_options "duration warmup connections rounds port gw-cpu load-cpu mcpg config load json" "$@"

[ -x "$LOAD" ] || die "no $LOAD: build it (cmake --build build --target mcpg-load)"
"$LOAD" --help 2>&1 | grep -q -- --ca-file || die "$LOAD speaks no TLS"
command -v openssl >/dev/null || die "no openssl command"
CLK_TCK=$(getconf CLK_TCK)
TMP=$(mktemp -d /tmp/mcpg-tls.XXXXXX)
RUNS_FILE=$TMP/runs.txt
PLAIN_PID="" TLS_PID=""
cleanup() {
    stop_pid "$PLAIN_PID"
    stop_pid "$TLS_PID"
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- a CA, a certificate for 127.0.0.1, the https manifest ----
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
m["description"] = "over TLS: " + m.get("description", "")
json.dump(m, sys.stdout)
EOF

start_gateway http "$CONFIG" "$PORT"
PLAIN_PID=$STARTED_PID
start_gateway https "$TMP/bench-tls.json" "$TLS_PORT"
TLS_PID=$STARTED_PID

HTTPS=(--ca-file "$TMP/ca.pem" --url "https://127.0.0.1:$TLS_PORT/mcp")
print_header
failed=0
# one gateway under load at a time: the other idles on the core (other% says so)
for ROUND in $(seq "$ROUNDS"); do
    measure http "$PLAIN_PID" "$PORT" --expect "Echo: $MESSAGE" || failed=1
    measure https "$TLS_PID" "$TLS_PORT" --expect "Echo: $MESSAGE" "${HTTPS[@]}" || failed=1
    measure https-close "$TLS_PID" "$TLS_PORT" --expect "Echo: $MESSAGE" "${HTTPS[@]}" \
        --header "Connection: close" || failed=1
done
for t in http https https-close; do
    m=$(median $t); [ -n "$m" ] && printf '%-12s median CPU per call %s us over %s run(s)\n' "$t" "${m%% *}" "${m#* }"
done
h=$(median http) s=$(median https) c=$(median https-close)
awk -v h="${h%% *}" -v s="${s%% *}" -v c="${c%% *}" 'BEGIN { if (h > 0)
    printf "https / http CPU per call: %.2fx (+%.2f us); a handshake per call: %.2fx\n", s / h, s - h, c / h }'
exit "$failed"
