#!/usr/bin/env bash
# Where a call's instructions go on each wire, counted exactly (callgrind
# counts user-space instructions, the same on any machine, unlike CPU time):
# the gateway runs under valgrind --tool=callgrind, mcpg-load sends --small
# calls then --large calls, each batch dumped apart, and the difference of
# the two batches divided by the difference of their sizes is the cost of
# one call: start-up, session handshakes and warm-up cancel out. Then, per
# function, what legacy-sse and legacy-fast spend beyond stateless.
# Syscalls per call are counted by strace -c attached after a warm-up (kernel time is
# not in callgrind's figures). See bench/README.md.
#
#   bench/profile-wires.sh                    stateless, legacy-sse, legacy-fast
#   bench/profile-wires.sh --top 25 --keep DIR
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LOAD=$ROOT/build/bin/mcpg-load
MCPG=$ROOT/build/bin/mcpg
CONFIG=$ROOT/conf/bench.json
PORT=18280 CONNECTIONS=4 SMALL=500 LARGE=2500 TOP=15 KEEP=""
TOOL=echo MESSAGE=hello
ME=profile-wires
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

usage() {
    cat <<EOF
usage: $0 [options]
  --small N / --large N  the two measured batches of calls (default $SMALL / $LARGE)
  --connections N        (default $CONNECTIONS)
  --top K                functions shown per difference (default $TOP)
  --config PATH          manifest (default conf/bench.json; the fast path is derived from it)
  --port P               (default $PORT)   --mcpg PATH   --load PATH
  --keep DIR             keep the callgrind and strace outputs in DIR
EOF
}

own_opt() {
    case $1 in
    --small) SMALL=$2 ;;
    --large) LARGE=$2 ;;
    --top) TOP=$2 ;;
    --keep) KEEP=$2 ;;
    *) return 1 ;;
    esac
}
parse_options "connections config port mcpg load" "$@"
[ "$LARGE" -gt "$SMALL" ] || die "--large must exceed --small"
for t in valgrind callgrind_control callgrind_annotate strace jq; do
    command -v $t >/dev/null || die "$t is needed"
done
TMP=$(mktemp -d /tmp/mcpg-prof.XXXXXX)
GW=""
cleanup() {
    stop_pid "$GW"
    if [ -n "$KEEP" ]; then mkdir -p "$KEEP" && cp -r "$TMP"/. "$KEEP"/; fi
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
progress() { echo "$ME: $*" >&2; }

jq '.gateway.server.unary_json_fast_path = true' "$CONFIG" >"$TMP/fast.json"

# calls N WIRE: N calls, every answer checked, on CONNECTIONS connections
calls() {
    "$LOAD" --url "http://127.0.0.1:$PORT/mcp" --wire "$2" -c "$CONNECTIONS" -w 0 --max-calls "$1" \
        --tool "$TOOL" --message "$MESSAGE" --timeout 60 -q >/dev/null 2>"$TMP/load.err" ||
        { cat "$TMP/load.err" >&2; die "mcpg-load failed"; }
}

# start_under NAME CONFIG TOOL...: the gateway run by a tool that execs it
# in its own process (valgrind); sets GW.
start_under() {
    local name=$1 config=$2; shift 2
    port_busy "$PORT" && die "port $PORT is in use"
    MCPG_AUDIT_FILE=$TMP/$name.audit.jsonl "$@" "$MCPG" --config "$config" --listen "127.0.0.1:$PORT" \
        >"$TMP/$name.log" 2>&1 &
    GW=$!
    for _ in $(seq 600); do port_busy "$PORT" && return 0; kill -0 "$GW" || break; sleep 0.1; done
    cat "$TMP/$name.log" >&2; die "$name: the gateway did not start"
}

# self cost per function of one callgrind part: "Ir function[object]" lines,
# keyed by the name alone: the SDK's helpers are linked into each module,
# and callgrind names one copy's object for all of them (unnamed code keeps
# its object, without the folder and load-time hash). Functions that never returned
# while the part was recorded (the thread entries: clone, start_thread,
# worker_main) show the unreturned calls beneath them as their own cost,
# counted again: lines of half the part's total or more are left out.
self_costs() {
    local total; total=$(part_total "$1")
    callgrind_annotate --inclusive=no --threshold=100 "$1" 2>/dev/null |
        awk -v total="$total" '/^ *[0-9,]+ +\(/ && !/PROGRAM TOTALS/ { ir = $1; gsub(",", "", ir); $1 = ""; $2 = ""
             if (ir + 0 >= total / 2) next
             fn = $0; sub(/^ +/, "", fn); sub(/^.*:/, "", fn); gsub(/ \[/, "[", fn)
             sub(/\[.*\//, "[", fn); sub(/\.[0-9a-f]+\.so/, ".so", fn)
             if (fn !~ /^0x/) sub(/\[.*/, "", fn)
             print ir, fn }' |
        awk '{ c[$2] += $1 } END { for (f in c) print c[f], f }'
}
part_total() { sed -n 's/^summary: *\([0-9]*\).*/\1/p' "$1" | head -n1; }

# profile NAME CONFIG WIRE: Ir per call, self cost per call by function
profile() {
    local name=$1 config=$2 wire=$3
    progress "$name: gateway under callgrind ($wire wire), $SMALL then $LARGE calls"
    start_under "$name" "$config" valgrind --tool=callgrind --callgrind-out-file="$TMP/$name.cg.%p"
    calls 200 "$wire" # warm: free lists, first-touch pages
    callgrind_control -z "$GW" >/dev/null
    calls "$SMALL" "$wire"; callgrind_control -d "$GW" >/dev/null
    calls "$LARGE" "$wire"; callgrind_control -d "$GW" >/dev/null
    stop_pid "$GW"; GW=""
    local p1 p2
    p1=$(ls "$TMP/$name".cg.*.1); p2=$(ls "$TMP/$name".cg.*.2)
    self_costs "$p1" >"$TMP/$name.small"; self_costs "$p2" >"$TMP/$name.large"
    # per call, per function: (large - small) / (LARGE - SMALL)
    awk -v d=$((LARGE - SMALL)) 'NR == FNR { s[$2] += $1; next } { l[$2] += $1 }
        END { for (f in l) printf "%.1f %s\n", (l[f] - s[f]) / d, f
              for (f in s) if (!(f in l)) printf "%.1f %s\n", -s[f] / d, f }' \
        "$TMP/$name.small" "$TMP/$name.large" | LC_ALL=C sort -k2 >"$TMP/$name.percall"
    echo $(( ($(part_total "$p2") - $(part_total "$p1")) / (LARGE - SMALL) )) >"$TMP/$name.ir"

    progress "$name: strace -c attached after warm-up, $LARGE calls"
    GW_CPU=0 start_gateway "$name-strace" "$config" "$PORT"; GW=$STARTED_PID
    calls 200 "$wire"
    strace -f -c -p "$GW" -o "$TMP/$name.strace" 2>/dev/null &
    local st=$!
    sleep 1 # attached to every thread
    calls "$LARGE" "$wire"
    kill -INT "$st"; wait "$st" || true
    stop_pid "$GW"; GW=""
    awk -v n="$LARGE" '$NF == "total" { printf "%.2f\n", $4 / n }' "$TMP/$name.strace" >"$TMP/$name.sys"
}

profile stateless "$CONFIG" stateless
profile legacy-sse "$CONFIG" legacy
profile legacy-fast "$TMP/fast.json" legacy

base=$(<"$TMP/stateless.ir")
echo
printf '%-12s %14s %13s %16s\n' target instr/call vs_stateless syscalls/call
for n in stateless legacy-sse legacy-fast; do
    printf '%-12s %14s %12.2fx %16s\n' "$n" "$(<"$TMP/$n.ir")" \
        "$(awk -v a="$(<"$TMP/$n.ir")" -v b="$base" 'BEGIN { print a / b }')" "$(<"$TMP/$n.sys")"
done
# deltas N: per function, N's cost per call, stateless's, and the difference
deltas() {
    LC_ALL=C join -1 2 -2 2 -a 1 -a 2 -e 0 -o 0,1.1,2.1 "$TMP/$1.percall" "$TMP/stateless.percall" |
        awk '{ printf "%10.1f %10.1f %10.1f  %s\n", $2 - $3, $2, $3, $1 }'
}
for n in legacy-sse legacy-fast; do
    echo
    echo "$n: the $TOP functions that cost the most instructions per call beyond stateless (self cost)"
    printf '%10s %10s %10s  %s\n' delta "$n" stateless function
    deltas "$n" | sort -gr | sed -n "1,${TOP}p"
    echo "... and the $TOP that cost the least beside stateless"
    deltas "$n" | sort -g | sed -n "1,${TOP}p"
done
echo
echo "stateless: the $TOP costliest functions per call (self cost)"
sort -gr "$TMP/stateless.percall" | sed -n "1,${TOP}p" | awk '{ printf "%10.1f  %s\n", $1, $2 }'
