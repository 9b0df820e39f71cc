#!/usr/bin/env bash
# User-space instructions per call of the whole gateway, counted not timed
# (callgrind: no hardware counters needed, all threads): the gateway started
# under callgrind, N calls sent by mcpg-load, stopped cleanly (SIGTERM, so
# callgrind writes its file); again with 2N calls; instructions per call =
# (Ir(2N) - Ir(N)) / N, so start-up, connection set-up and shutdown cancel.
# Then the 15 functions with the most instructions per call in that
# difference. --mcpg given twice compares two builds in one run.
#
#   bench/instructions.sh                                   build/bin/mcpg, conf/bench.json
#   bench/instructions.sh --mcpg old/bin/mcpg --mcpg build/bin/mcpg --calls 5000
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LOAD=$ROOT/build/bin/mcpg-load
MCP_PATH=/mcp
CONFIG=$ROOT/conf/bench.json
GW_CPU=0 LOAD_CPU=1
PORT=18680 CONNECTIONS=64 CALLS=20000 TOP=15
TOOL=echo MESSAGE=hello JSON_OUT=""
BUILDS=()
ME=instructions
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

usage() {
    cat <<USAGE
usage: $0 [options]
  --mcpg PATH          the gateway binary (default build/bin/mcpg); twice: compare two builds
  --config FILE        the manifest (default conf/bench.json)
  --calls N            N: the runs send N and 2N calls (default $CALLS)
  --top K              functions listed per build (default $TOP)
  --path PATH          the endpoint the load calls (default /mcp; /mcp/<name> for a virtual server)
  --connections N      (default $CONNECTIONS)  --tool NAME  --message TEXT
  --port P  --gw-cpu N  --load-cpu N  --load PATH
  --json FILE          append one JSON line per build
USAGE
}
own_opt() {
    case $1 in
    --mcpg) BUILDS+=("$2") ;;
    --calls) CALLS=$2 ;;
    --top) TOP=$2 ;;
    --path) MCP_PATH=$2 ;;
    *) return 1 ;;
    esac
}
parse_options "config connections port gw-cpu load-cpu load tool message json" "$@"
[ ${#BUILDS[@]} -gt 0 ] || BUILDS=("$ROOT/build/bin/mcpg")
[ ${#BUILDS[@]} -le 2 ] || die "--mcpg: at most two builds"
[ -x "$LOAD" ] || die "no $LOAD: build it (cmake --build build --target mcpg-load)"
[ -f "$CONFIG" ] || die "no manifest $CONFIG"
for t in valgrind callgrind_annotate; do command -v "$t" >/dev/null || die "no $t: valgrind is needed (apt-get install valgrind)"; done
for b in "${BUILDS[@]}"; do [ -x "$b" ] || die "--mcpg $b: no such program"; done
TMP=$(mktemp -d /tmp/mcpg-instructions.XXXXXX)
GW_PID=""
cleanup() { stop_pid "$GW_PID" KILL; rm -rf "$TMP"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

# stop_and_wait PID: SIGTERM, the gateway's clean stop, then wait for the
# exit that makes callgrind write its file
stop_and_wait() {
    kill -TERM "$1"
    for _ in $(seq 1200); do kill -0 "$1" 2>/dev/null || return 0; sleep 0.1; done
    return 1
}

# profile BIN CALLS OUT: one run of the gateway BIN under callgrind with
# CALLS calls; its profile in OUT, its total Ir on stdout
profile() {
    local bin=$1 calls=$2 out=$3
    port_busy "$PORT" && die "port $PORT is in use"
    MCPG_AUDIT_FILE=$TMP/audit.jsonl taskset -c "$GW_CPU" valgrind --tool=callgrind --callgrind-out-file="$out" \
        "$bin" --config "$CONFIG" --listen "127.0.0.1:$PORT" >"$TMP/gw.log" 2>&1 &
    GW_PID=$!
    # under callgrind it starts tens of times slower than natively: up to 60 s
    wait_port "$GW_PID" "$PORT" 600 || { tail -n 20 "$TMP/gw.log" >&2; die "$bin did not start under callgrind"; }
    taskset -c "$LOAD_CPU" "$LOAD" --url "http://127.0.0.1:$PORT$MCP_PATH" -c "$CONNECTIONS" --tool "$TOOL" \
        --message "$MESSAGE" -q -w 0 -d 3600 --max-calls "$calls" >"$TMP/load.out" 2>&1 ||
        { cat "$TMP/load.out" >&2; die "$bin: errors in the load of $calls calls"; }
    stop_and_wait "$GW_PID" || die "$bin did not stop within 120 s of SIGTERM"
    wait "$GW_PID" || { tail -n 20 "$TMP/gw.log" >&2; die "$bin exited with an error"; }
    GW_PID=""
    rm -f "$TMP"/audit.jsonl*
    awk '/^(summary|totals):/ { print $2; exit }' "$out"
}

# by_function PROFILE: "Ir function" per function, self cost. Keyed by name:
# the SDK's helpers are linked into the binary and into each module, and
# callgrind gives one copy all their cost, naming either object. An address
# without a symbol gets its object, named without the hash of a module's copy.
by_function() {
    callgrind_annotate --threshold=100 "$1" 2>/dev/null | awk '
        /^ *[0-9,]+ +\([ 0-9.]+%\) +/ && !/PROGRAM TOTALS/ {
            ir = $1; gsub(/,/, "", ir)
            rest = $0; sub(/^ *[0-9,]+ +\([ 0-9.]+%\) +/, "", rest)
            obj = ""; if (match(rest, / \[[^]]*\]$/)) { obj = substr(rest, RSTART + 2, RLENGTH - 3); rest = substr(rest, 1, RSTART - 1) }
            fn = rest; sub(/^.*:/, "", fn)
            sub(/^.*\//, "", obj); sub(/\.[0-9a-f]+\.so$/, ".so", obj)
            print ir, (fn ~ /^0x/ ? fn " (" obj ")" : fn)
        }'
}

# top_functions ONE TWO N: the functions with the most Ir per call in the
# difference of the two profiles (TWO ran N more calls than ONE)
top_functions() {
    { by_function "$1" | sed 's/^/- /'; by_function "$2" | sed 's/^/+ /'; } | awk -v n="$3" '
        { key = $3; for (i = 4; i <= NF; i++) key = key " " $i; d[key] += ($1 == "+" ? $2 : -$2) }
        END { for (k in d) printf "%.1f\t%s\n", d[k] / n, k }' | sort -t$'\t' -k1,1 -g -r | awk -v n="$TOP" 'NR <= n' # reads all: no SIGPIPE
}

# measure_build BIN: prints "instructions per call" of BIN and its top functions
measure_build() {
    local bin=$1 ir1 ir2 per
    echo "$ME: $bin: callgrind, $CALLS calls then $((2 * CALLS))" >&2
    ir1=$(profile "$bin" "$CALLS" "$TMP/one.cg")
    ir2=$(profile "$bin" $((2 * CALLS)) "$TMP/two.cg")
    per=$(( (ir2 - ir1) / CALLS ))
    echo "$bin"
    printf '  instructions per call: %s   (Ir %s at %s calls, %s at %s)\n' "$per" "$ir1" "$CALLS" "$ir2" $((2 * CALLS))
    printf '  top %s functions, instructions per call (self):\n' "$TOP"
    top_functions "$TMP/one.cg" "$TMP/two.cg" "$CALLS" | awk -F'\t' '{ printf "  %10.1f  %s\n", $1, $2 }'
    [ -z "$JSON_OUT" ] || printf '{"bench":"instructions","mcpg":"%s","config":"%s","calls":%s,"instructions_per_call":%s}\n' \
        "$bin" "$(basename "$CONFIG")" "$CALLS" "$per" >>"$JSON_OUT"
    PER_CALL+=("$per")
}

PER_CALL=()
echo "instructions per call, user space, all threads (callgrind): $(basename "$CONFIG"), $CONNECTIONS connections"
for b in "${BUILDS[@]}"; do measure_build "$b"; done
if [ ${#BUILDS[@]} = 2 ]; then
    awk -v a="${PER_CALL[0]}" -v b="${PER_CALL[1]}" -v na="${BUILDS[0]}" -v nb="${BUILDS[1]}" \
        'BEGIN { if (a > 0) printf "second / first: %.3f  (%s / %s)\n", b / a, nb, na }'
fi
