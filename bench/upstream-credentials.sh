#!/usr/bin/env bash
# What a brokered upstream credential costs a call, from one run: the same
# backend_http tool (a GET to nginx answering {"ok":true} on the other
# core), every call identified by identity_jwt, once with a static
# Authorization header from the manifest and once with credentials mode
# exchange, whose token (one caller, so one exchange, then the cache) comes
# from a token endpoint on a local port (bench/token-endpoint.py). CPU per
# call by bench/cpu-per-call.sh --start, the two manifests alternated round
# by round so that they share the machine's noise; the medians last.
# Figures and manifests: docs/upstream-credentials.md.
#
#   bench/upstream-credentials.sh [--rounds N] [--duration S]   (defaults 3, 4)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ROUNDS=3 DURATION=4 UP_PORT=${UP_PORT:-18093} TOKEN_PORT=${TOKEN_PORT:-18094}
while [ $# -gt 0 ]; do
    case $1 in
    --rounds) ROUNDS=$2; shift 2 ;;
    --duration) DURATION=$2; shift 2 ;;
    *) echo "usage: $0 [--rounds N] [--duration S]" >&2; exit 2 ;;
    esac
done
WORK=$(mktemp -d /tmp/mcpg-upcred-bench.XXXXXX)
PIDS=()
stop() {
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap stop EXIT

# the upstream: nginx on the load's core, one static answer
cat >"$WORK/nginx.conf" <<EOF
worker_processes 1;
pid $WORK/nginx.pid;
error_log $WORK/nginx.err;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path $WORK; proxy_temp_path $WORK; fastcgi_temp_path $WORK;
    uwsgi_temp_path $WORK; scgi_temp_path $WORK;
    server {
        listen 127.0.0.1:$UP_PORT;
        keepalive_requests 1000000;
        location / { default_type application/json; return 200 '{"ok":true}'; }
    }
}
EOF
taskset -c 1 nginx -c "$WORK/nginx.conf" -p "$WORK" -g 'daemon off;' &
PIDS+=($!)
"$ROOT/bench/token-endpoint.py" "$TOKEN_PORT" &
PIDS+=($!)

# a caller's key, its JWKS and a token that lives longer than the run
"$ROOT/build/bin/jwt_mint" keygen ES256 "$WORK/issuer.pem" k1 >"$WORK/jwk.json"
python3 -c 'import json,sys; print(json.dumps({"keys": [json.load(open(sys.argv[1]))]}))' \
    "$WORK/jwk.json" >"$WORK/jwks.json"
NOW=$(date +%s)
TOKEN=$("$ROOT/build/bin/jwt_mint" token ES256 "$WORK/issuer.pem" '{"alg":"ES256","kid":"k1"}' \
    "{\"iss\":\"https://issuer.example\",\"aud\":\"https://gw.example/mcp\",\"sub\":\"bench\",\"exp\":$((NOW + 3600))}")

# $1: static or exchange
manifest() {
    python3 - "$1" "$WORK/jwks.json" "$UP_PORT" "$TOKEN_PORT" <<'PY'
import json, sys
mode, jwks, up, tok = sys.argv[1:]
tool = {"name": "echo", "method": "GET", "url": "http://127.0.0.1:%s/echo" % up,
        "query": {"m": "{message}"}}
cfg = {"tools": [tool], "max_conns": 64}
if mode == "static":
    tool["headers"] = {"Authorization": "Bearer a-static-token-from-the-manifest"}
else:
    cfg["credentials"] = {"mode": "exchange", "token_url": "http://127.0.0.1:%s/token" % tok,
                          "client_id": "mcpg", "client_secret_env": "BENCH_CLIENT_SECRET",
                          "audience": "https://reports.example", "scope": "reports:read"}
print(json.dumps({
    "gateway": {"listen": ["127.0.0.1:8787"], "log_level": "warn"},
    "cluster": {"kind": "single_node"},
    "modules": [
        {"name": "jwt", "module": "identity_jwt",
         "config": {"issuer": "https://issuer.example", "audience": "https://gw.example/mcp",
                    "jwks_file": jwks}},
        {"name": "rest", "module": "backend_http", "config": cfg}],
    "pipeline": {"identity": ["jwt"]},
    "bindings": [{"backend": "rest"}]}, indent=2))
PY
}

export BENCH_CLIENT_SECRET=bench-secret
MODES="static exchange"
for mode in $MODES; do manifest "$mode" >"$WORK/$mode.json"; done
for round in $(seq "$ROUNDS"); do
    for mode in $MODES; do
        echo "== CPU, round $round, $mode"
        "$ROOT/bench/cpu-per-call.sh" --start --config "$WORK/$mode.json" --rounds 1 \
            --duration "$DURATION" -- --header "Authorization: Bearer $TOKEN" |
            tee "$WORK/cpu-$mode-$round.out" | grep -E "^(mcpg|cpu-per-call: warning)|calls/s"
    done
done
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
echo "== medians of $ROUNDS rounds: gateway CPU per call (us), calls/s, other load on its core (%)"
for mode in $MODES; do
    for round in $(seq "$ROUNDS"); do
        awk '$1 == "mcpg" && $2 ~ /^[0-9.]+$/ { print $5, $2, $12 }' "$WORK/cpu-$mode-$round.out"
    done >"$WORK/fig-$mode"
    printf '%-8s cpu/call %6s us  calls/s %8s  other %5s%%\n' "$mode" \
        "$(cut -d' ' -f1 "$WORK/fig-$mode" | median)" "$(cut -d' ' -f2 "$WORK/fig-$mode" | median)" \
        "$(cut -d' ' -f3 "$WORK/fig-$mode" | median)"
done
