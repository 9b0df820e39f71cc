#!/usr/bin/env bash
# CPU per call on both MCP wires, from one run: the stateless 2026-07-28 wire,
# the legacy 2025-11-25 wire answering as SSE (the default), the legacy wire
# with gateway.server.unary_json_fast_path on, and nginx answering the same
# body statically as the same-run baseline. Each gateway is its own process
# pinned to the gateway core (only the measured one is busy; an idle gateway
# costs no CPU), mcpg-load runs on the other core, and the targets alternate
# for --rounds rounds; medians and the ratios to stateless are printed with
# the wires' goals (fast path within 10 %, SSE within 30 %).
# See bench/README.md.
#
#   bench/wires.sh                                  3 rounds of 5 s
#   bench/wires.sh --rounds 5 --duration 10 --json results.jsonl
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LOAD=$ROOT/build/bin/mcpg-load
MCPG=$ROOT/build/bin/mcpg
CONFIG=$ROOT/conf/bench.json
GW_CPU=0 LOAD_CPU=1
PORT_BASE=18180
DURATION=5 WARMUP=2 CONNECTIONS=64 ROUNDS=3
TOOL=echo MESSAGE=hello
NGINX=1 JSON_OUT=""
LOAD_EXTRA=()
ME=wires
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

usage() {
    cat <<EOF
usage: $0 [options] [-- mcpg-load options]
  --rounds N           rounds; each measures every target once (default $ROUNDS)
  --duration S         measured seconds per run (default $DURATION)
  --warmup S           seconds of load before each run, in a separate mcpg-load (default $WARMUP)
  --connections N      (default $CONNECTIONS)   --tool NAME (default $TOOL)   --message TEXT
  --config PATH        the stateless gateway's manifest (default conf/bench.json); the two
                       legacy ones are derived from it with unary_json_fast_path false / true
  --no-nginx           skip the nginx baseline
  --port-base P        ports P..P+3: stateless, legacy-sse, legacy-fast, nginx (default $PORT_BASE)
  --gw-cpu N / --load-cpu N   cores (default $GW_CPU / $LOAD_CPU)
  --mcpg PATH  --load PATH    binaries to use
  --json FILE          append one JSON line per run, then one summary line per target
EOF
}

own_opt() {
    case $1 in
    --no-nginx) NGINX=0; flag ;;
    *) return 1 ;;
    esac
}
parse_options "rounds duration warmup connections tool message config port-base gw-cpu load-cpu mcpg load json load-args" "$@"

[ -x "$LOAD" ] || die "no $LOAD: build it (cmake --build build --target mcpg-load)"
command -v jq >/dev/null || die "jq is needed to derive the fast-path manifest"
[ "$NGINX" = 0 ] || command -v nginx >/dev/null || die "no nginx (or pass --no-nginx)"
CLK_TCK=$(getconf CLK_TCK)
TMP=$(mktemp -d /tmp/mcpg-wires.XXXXXX)
RUNS_FILE=$TMP/runs.txt
STARTED=() NGINX_MASTER=""

cleanup() {
    local pid
    for pid in "${STARTED[@]}"; do stop_pid "$pid"; done
    stop_pid "$NGINX_MASTER" QUIT # graceful: the master stops its worker
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

progress() { echo "$ME: $*" >&2; }

# ---- the targets: name, port, pid, mcpg-load flags, answer form, goal ----
TARGETS=()
declare -A T_PORT T_PID T_FLAGS T_FORM T_GOAL
add_target() { # name port pid form goal flags...
    local n=$1; TARGETS+=("$n"); T_PORT[$n]=$2 T_PID[$n]=$3 T_FORM[$n]=$4 T_GOAL[$n]=$5; shift 5
    T_FLAGS[$n]="$*"
}

# derive ON|OFF FILE: --config with unary_json_fast_path set, so the SSE and
# fast-path targets differ in that one setting whatever --config says
derive() {
    jq --argjson on "$1" '.gateway.server.unary_json_fast_path = $on
        | .description = "derived by bench/wires.sh from: " + (.description // "")' \
        "$CONFIG" >"$2" || die "cannot derive a manifest from $CONFIG"
}
derive false "$TMP/sse.json"
derive true "$TMP/fast.json"

progress "starting the gateways on core $GW_CPU (manifest $CONFIG)"
start_gateway stateless "$CONFIG" "$PORT_BASE"; STARTED+=("$STARTED_PID")
add_target stateless "$PORT_BASE" "$STARTED_PID" json - --wire stateless
start_gateway legacy-sse "$TMP/sse.json" $((PORT_BASE + 1)); STARTED+=("$STARTED_PID")
add_target legacy-sse $((PORT_BASE + 1)) "$STARTED_PID" sse 1.30 --wire legacy
start_gateway legacy-fast "$TMP/fast.json" $((PORT_BASE + 2)); STARTED+=("$STARTED_PID")
add_target legacy-fast $((PORT_BASE + 2)) "$STARTED_PID" json 1.10 --wire legacy
if [ "$NGINX" = 1 ]; then
    gateway_answer "$PORT_BASE" "$TMP/body.json" || echo_answer >"$TMP/body.json"
    start_nginx $((PORT_BASE + 3)) "$TMP/body.json"
    add_target nginx $((PORT_BASE + 3)) "$NGINX_WORKER" json - --no-id-check
fi

# A run proves which answer form it measured: sse% must be 100 for SSE
# answers and 0 for JSON ones (else the fast path did not take, say).
check_form() {
    local n=$1 sse
    sse=$(awk -v t="$n" '$1 == t { v = $13 * 100 / ($12 ? $12 : 1) } END { printf "%.0f", v }' "$RUNS_FILE")
    case ${T_FORM[$n]}:$sse in sse:100|json:0) return 0 ;; esac
    echo "$ME: $n: $sse % of the answers came as SSE, expected ${T_FORM[$n]} answers only" >&2
    return 1
}

# ---- the rounds: every target once per round, the order rotated ----
failed=0
total=$(( ROUNDS * ${#TARGETS[@]} )) done_runs=0
print_header
for ROUND in $(seq "$ROUNDS"); do
    for i in $(seq 0 $(( ${#TARGETS[@]} - 1 ))); do
        n=${TARGETS[$(( (i + ROUND - 1) % ${#TARGETS[@]} ))]}
        done_runs=$((done_runs + 1))
        progress "round $ROUND/$ROUNDS, run $done_runs/$total: $n (warm-up ${WARMUP} s, measure ${DURATION} s)"
        # shellcheck disable=SC2086 # the flags are words
        measure "$n" "${T_PID[$n]}" "${T_PORT[$n]}" ${T_FLAGS[$n]} || failed=1
        check_form "$n" || failed=1
    done
done

# ---- medians and ratios ----
SUM="%-11s %10s %8s %8s %11s %5s %12s %7s %8s %14s %9s %9s %7s %6s %6s %s\n"
echo
echo "medians over the clean runs of $ROUNDS round(s) (all runs when none was clean):"
printf "$SUM" target calls/s p50_us p99_us cpu_us/call sys% vs_stateless paired vs_nginx goal VmHWM_kB VmRSS_kB threads other% steal% runs
# paired TARGET: the median over the rounds of TARGET's CPU per call over
# stateless's in the same round (a drift of the machine between rounds
# cancels); rounds where either run was unclean are left out unless no
# round was clean for both.
paired() {
    awk -v t="$1" '$1 == t { c[$17] = $2; k[$17] = $3 } $1 == "stateless" { s[$17] = $2; ks[$17] = $3 }
        END { for (r in c) if (r in s && s[r] > 0) { n++; v[n] = c[r] / s[r]; ok[n] = k[r] && ks[r]; m += ok[n] }
              j = 0; for (i = 1; i <= n; i++) if (!m || ok[i]) w[++j] = v[i]
              for (i = 2; i <= j; i++) { x = w[i]; for (q = i - 1; q >= 1 && w[q] > x; q--) w[q + 1] = w[q]; w[q + 1] = x }
              if (j) printf "%.2fx\n", j % 2 ? w[(j + 1) / 2] : (w[j / 2] + w[j / 2 + 1]) / 2; else print "-" }' "$RUNS_FILE"
}

# fig TARGET FIELD: the median of one field of lib.sh's run records
# rounded as FORMAT (default %.0f; a median of two runs is their mean)
fig() { local v; v=$(median "$1" "$2"); awk -v v="${v%% *}" -v f="${3:-%.0f}" 'BEGIN { printf f "\n", v }'; }
base=$(fig stateless 2 %.2f)
ngx=""; [ "$NGINX" = 1 ] && ngx=$(fig nginx 2 %.2f)
for n in "${TARGETS[@]}"; do
    cpu=$(fig "$n" 2 %.2f)
    f() { fig "$n" "$@"; }
    c=$(clean_runs "$n"); runs="$c of $ROUNDS clean"; [ "$c" -gt 0 ] || runs="NONE of $ROUNDS clean"
    read -r vs vn met < <(awk -v c="$cpu" -v b="$base" -v g="${ngx:-0}" -v goal="${T_GOAL[$n]}" 'BEGIN {
        vs = b > 0 ? c / b : 0; vn = g > 0 ? c / g : 0
        met = goal == "-" ? "-" : (vs <= goal ? "met" : "MISSED")
        printf "%.2fx %s %s\n", vs, (g > 0 ? sprintf("%.2fx", vn) : "-"), met }')
    goal=${T_GOAL[$n]}; [ "$goal" = - ] || goal="<=${goal}x:$met"
    printf "$SUM" "$n" "$(f 4 %.1f)" "$(f 5 %.1f)" "$(f 6 %.1f)" "$cpu" "$(f 16)%" "$vs" "$(paired "$n")" "$vn" "$goal" "$(f 7)" "$(f 8)" "$(f 9)" \
        "$(f 10 %.1f)" "$(f 11 %.1f)" "$runs"
    if [ -n "$JSON_OUT" ]; then
        printf '{"bench":"wires-summary","target":"%s","rounds":%s,"clean_runs":%s,"calls_per_s":%s,"p50_us":%s,"p99_us":%s,' \
            "$n" "$ROUNDS" "$c" "$(f 4 %.1f)" "$(f 5 %.1f)" "$(f 6 %.1f)" >>"$JSON_OUT"
        printf '"cpu_us_per_call":%s,"ratio_to_stateless":%s,"paired_ratio":%s,"goal_ratio":%s,"goal_met":%s,' \
            "$cpu" "${vs%x}" "$(p=$(paired "$n"); [ "$p" = - ] && echo null || echo "${p%x}")" "$( [ "${T_GOAL[$n]}" = - ] && echo null || echo "${T_GOAL[$n]}")" \
            "$(case $met in met) echo true ;; MISSED) echo false ;; *) echo null ;; esac)" >>"$JSON_OUT"
        printf '"vm_hwm_kb":%s,"vm_rss_kb":%s,"threads":%s,"core_other_pct":%s,"core_steal_pct":%s,"cpu_sys_pct":%s}\n' \
            "$(f 7)" "$(f 8)" "$(f 9)" "$(f 10 %.1f)" "$(f 11 %.1f)" "$(f 16)" >>"$JSON_OUT"
    fi
done
[ "$failed" = 0 ] || echo "$ME: some runs had errors or the wrong answer form: see above" >&2
exit "$failed"
