#!/usr/bin/env bash
# bench/run.sh: the one entry point of the benchmarks (bench/run is the same).
# Each scenario starts what it needs on free loopback ports, pins the measured
# server and the load to separate cores, stops all it started, prints its
# table (and progress lines) and appends its JSON lines to one results file.
#
#   bench/run.sh list                     the scenarios and what each measures
#   bench/run.sh                          every scenario, one after the other
#   bench/run.sh proxy reload             those two
#   bench/run.sh SCENARIO [options]       one, with options of its script (its --help)
#   RESULTS=out.jsonl bench/run.sh ...    where the JSON lines go (default bench/results-<UTC>.jsonl)
#   SOAK_SECONDS=600 bench/run.sh soak    the soak's length (default 300 s)
#
# `make bench` runs this with BENCH_ARGS as the arguments.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ME=bench/run.sh

# The scenarios, in the order a full run takes them: name | the script and
# the options the scenario fixes | what it measures. A scenario's JSON lines
# go to RESULTS through its script's --json, except where none are written.
scenario_table() {
    cat <<TABLE
scale           | wires.sh                        | both MCP wires, default and tuned manifests, beside nginx
cpu             | cpu-per-call.sh --start --nginx | CPU per call of the embedded bench manifest beside nginx
micro           | micro.sh                        | in process: instructions and allocations per call through the kernel and a dlopened backend
proxy           | proxy.sh                        | a call proxied through backend_mcp beside in process, nginx and mcp-proxy (npm)
reload          | reload.sh                       | steady state beside code swapped and reloaded every 200 ms
security        | security.sh                     | identity, policy, redaction, audit and TLS beside a bare gateway
tls             | tls.sh                          | CPU per call over https beside http, and with a handshake per call
openloop        | openloop.sh                     | latency against offered load at fractions of the capacity, conf/bench.json
memtime         | memtime.sh                      | three bursts of 512 connections with idle time after each: memory over time
backend_latency | backend-latency.sh              | backends of 0/5/50/200 ms at 10/50/100 connections, inline and on the pool
governed        | governed.sh                     | the limited tools of conf/governed.json, 64 connections, 30 s each, local and global
kv              | kv.sh                           | the coordinator store alone: each op on memory and Redis from 1 and 64 tasks (no JSON lines)
watch           | watch.py                        | sessions on every replica hear polled resources change; one gateway killed halfway
fleet           | fleet.sh --scenario scale       | scale across a fleet: 1, 2, 4 gateways on memory/Redis/NATS R1, both wires, default and tuned
churn           | fleet.sh --scenario churn       | legacy sessions opened on one replica, streamed on the next, ended: stream end time, stuck streams
listen          | listen.py                       | 64 sessions hear 20 webhook changes a second posted through the replicas in turn
events          | events.py                       | MCP Events into 64 push streams at 100-1600 events/s, one gateway alone and fleets on Redis/NATS
soak            | soak.sh --seconds ${SOAK_SECONDS:-300} | minutes of churn (calls, sessions, upstream kills, reloads): memory, fds, threads flat (no JSON lines)
TABLE
}
WRITES_NO_RESULTS=" kv soak "

field() { # NAME COLUMN: one column of NAME's row, trimmed
    scenario_table | awk -F'|' -v n="$1" -v c="$2" '{ gsub(/^ +| +$/, "", $1) } $1 == n { gsub(/^ +| +$/, "", $c); print $c }'
}
all_names() { scenario_table | awk -F'|' '{ gsub(/ /, "", $1); print $1 }'; }
known() { [ -n "$1" ] && all_names | grep -qx -- "$1"; }

list() {
    scenario_table | awk -F'|' '{ gsub(/^ +| +$/, "", $1); gsub(/^ +| +$/, "", $2); gsub(/^ +| +$/, "", $3)
        printf "  %-16s %s\n  %-16s (%s)\n", $1, $3, "", "bench/" $2 }'
}

# run_one NAME [options]: NAME's script with the scenario's fixed options,
# RESULTS as its JSON file, then the caller's options (a later option wins).
run_one() {
    local name=$1; shift
    local command interpreter script
    read -r -a command <<<"$(field "$name" 2)"
    script=$ROOT/bench/${command[0]}
    case $script in *.py) interpreter=python3 ;; *) interpreter=bash ;; esac
    local results=(--json "$RESULTS")
    [[ $WRITES_NO_RESULTS == *" $name "* ]] && results=()
    "$interpreter" "$script" "${command[@]:1}" "${results[@]}" "$@"
}

unknown() { echo "$ME: unknown scenario \"$1\" (bench/run.sh list shows them)" >&2; exit 2; }

case ${1:-} in
list) list; exit 0 ;;
-h|--help|help) sed -n '2,14p' "$0"; exit 0 ;;
esac

RESULTS=${RESULTS:-$ROOT/bench/results-$(date -u +%Y%m%dT%H%M%SZ).jsonl}

# One scenario followed by options: run it with them.
if [ $# -ge 2 ] && [[ $2 == -* ]]; then
    known "$1" || unknown "$1"
    status=0
    run_one "$@" || status=$?
    echo "$ME: results appended to $RESULTS" >&2
    exit "$status"
fi

scenarios=("$@")
[ ${#scenarios[@]} -gt 0 ] || mapfile -t scenarios < <(all_names)
for s in "${scenarios[@]}"; do known "$s" || unknown "$s"; done
failed=0 n=0
for s in "${scenarios[@]}"; do
    n=$((n + 1))
    echo "$ME: scenario $n/${#scenarios[@]}: $s ($(date -u +%H:%M:%S) UTC)" >&2
    run_one "$s" || { echo "$ME: $s failed" >&2; failed=1; }
done
echo "$ME: results appended to $RESULTS" >&2
exit "$failed"
