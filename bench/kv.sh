#!/usr/bin/env bash
# The coordinator store alone (bench/kv/kv_bench.c): each coordinator module
# in one loop of the SDK's fake host, without the gateway, on a fresh store
# per module: KEYS keys of 256-byte values (1 000 of them under one prefix),
# then each op alone for SECONDS from 1 and 64 tasks (a prefix pass from 1
# and 16); p50 and ops/s, printed beside the reference product's figures
# (Redis column of docs: get 100 us / 143 500/s, incr 117 us / 90 200/s,
# a prefix pass 3.7 ms). redis-server runs on a free port in a temp folder,
# without persistence, stopped by its pid.
#
#   bench/kv.sh [--seconds S] [--keys N] [--stores "memory redis"]
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=$ROOT/build/bin/mcpg-kv-bench
MODULES=$ROOT/build/modules
SECONDS_EACH=5 KEYS=100000 STORES="memory redis"
ME=kv
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

usage() { sed -n 2,11p "$0"; }
own_opt() {
    case $1 in
    --seconds) SECONDS_EACH=$2 ;;
    --keys) KEYS=$2 ;;
    --stores) STORES=$2 ;;
    *) return 1 ;;
    esac
}
parse_options "" "$@"
[ -x "$BIN" ] || { echo "kv: no $BIN: build it (make build)" >&2; exit 1; }
TMP=$(mktemp -d /tmp/mcpg-kv.XXXXXX)
REDIS_PID=""
cleanup() {
    [ -n "$REDIS_PID" ] && kill "$REDIS_PID" 2>/dev/null && wait "$REDIS_PID" 2>/dev/null
    rm -rf "$TMP"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# reference figures (p50 at 1 task, per second at 64), Redis column
reference() {
    case $1 in
    get) echo "100 143500" ;; get_missing) echo "97 239900" ;; put) echo "119 73200" ;;
    incr) echo "117 90200" ;; put_if_absent) echo "125 65600" ;; delete) echo "109 111300" ;;
    prefix) echo "3700 559" ;; *) echo "- -" ;;
    esac
}

run_store() { # NAME MODULE CONFIG
    echo "== $1 ($KEYS keys, ${SECONDS_EACH}s per row)"
    "$BIN" "$MODULES/$2.so" "$3" "$SECONDS_EACH" "$KEYS" 1000 256 > "$TMP/$1.txt"
    printf '%-13s %4s %10s %11s | %14s %14s\n' op conc p50_us ops_per_s "ref p50 @1" "ref /s @64"
    tail -n +2 "$TMP/$1.txt" | while read -r op conc p50 ops ok; do
        read -r rp50 rops < <(reference "$op")
        if [ "$conc" = 1 ]; then printf '%-13s %4s %10s %11s | %14s %14s\n' "$op" "$conc" "$p50" "$ops" "$rp50" ""
        else printf '%-13s %4s %10s %11s | %14s %14s\n' "$op" "$conc" "$p50" "$ops" "" "$rops"; fi
    done
}

for store in $STORES; do
    case $store in
    memory) run_store memory coordinator_memory '{}' ;;
    redis)
        command -v redis-server >/dev/null || { echo "kv: no redis-server" >&2; continue; }
        PORT=$(free_port)
        redis-server --bind 127.0.0.1 --port "$PORT" --save '' --appendonly no --dir "$TMP" \
            --logfile "$TMP/redis.log" &
        REDIS_PID=$!
        for _ in $(seq 200); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.02; done
        run_store redis coordinator_redis "{\"url\":\"redis://127.0.0.1:$PORT\"}"
        echo "redis memory: $(redis-cli -p "$PORT" info memory | grep '^used_memory_human' | tr -d '\r')"
        kill "$REDIS_PID"; wait "$REDIS_PID" 2>/dev/null || true; REDIS_PID=""
        ;;
    *) echo "kv: unknown store $store" >&2 ;;
    esac
done
