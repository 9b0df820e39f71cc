#!/usr/bin/env bash
# bench/run SCENARIO... (or bench/run.sh): run benchmark scenarios one after the other, each
# printing its table (and progress lines) and appending its JSON lines to one
# results file. Every scenario starts what it needs on free loopback ports,
# pins the measured server and the load to separate cores, and stops all it
# started. `make bench` runs this with BENCH_ARGS as the scenarios.
#
#   scale     both MCP wires, default and tuned manifests, beside nginx (wires.sh)
#   cpu       CPU per call of the embedded bench manifest beside nginx (cpu-per-call.sh)
#   proxy     a call proxied through backend_mcp beside in process, nginx and mcp-proxy (npm) (proxy.sh)
#   reload    steady state beside code swapped and reloaded every 200 ms (reload.sh)
#   security  identity, policy, redaction, audit and TLS beside a bare gateway (security.sh)
#   tls       CPU per call over https beside http, and with a handshake per call (tls.sh)
#   memtime   three bursts of 512 connections with idle time after each: memory over time (memtime.sh)
#   backend_latency  backends of 0/5/50/200 ms at 10/50/100 connections, inline and on the pool (backend-latency.sh)
#   micro     in process: instructions and allocations per call through the kernel and a dlopened backend (micro.sh)
#   openloop  latency against offered load at fractions of the capacity, conf/bench.json (openloop.sh)
#   kv        the coordinator store alone: each op on memory and Redis from 1 and 64 tasks (kv.sh)
#   governed  the limited tools of conf/governed.json, 64 connections, 30 s each, local and global (governed.sh)
#   watch     sessions on every replica hear polled resources change; one gateway killed halfway (watch.py)
#   soak      minutes of churn (calls, sessions, upstream kills, reloads): memory, fds, threads flat (soak.sh)
#   fleet     scale across a fleet: 1, 2, 4 gateways on memory/Redis/NATS R1, both wires, default and tuned (fleet.sh)
#   churn     legacy sessions opened on one replica, streamed on the next, ended: stream end time, stuck streams (fleet.sh)
#   listen    64 sessions hear 20 webhook changes a second posted through the replicas in turn (listen.py)
#   events    MCP Events into 64 push streams at 100-1600 events/s, one gateway alone and fleets on Redis/NATS (events.py)
#
#   bench/run.sh                      every scenario
#   bench/run.sh proxy reload         those two
#   RESULTS=out.jsonl bench/run.sh    where the JSON lines go (default bench/results-<UTC>.jsonl)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RESULTS=${RESULTS:-$ROOT/bench/results-$(date -u +%Y%m%dT%H%M%SZ).jsonl}
ALL=(scale cpu micro proxy reload security tls openloop memtime backend_latency governed kv watch fleet churn listen events soak)

run_one() {
    case $1 in
    scale) bash "$ROOT/bench/wires.sh" --json "$RESULTS" ;;
    cpu) bash "$ROOT/bench/cpu-per-call.sh" --start --nginx --json "$RESULTS" ;;
    proxy) bash "$ROOT/bench/proxy.sh" --json "$RESULTS" ;;
    reload) bash "$ROOT/bench/reload.sh" --json "$RESULTS" ;;
    security) bash "$ROOT/bench/security.sh" --json "$RESULTS" ;;
    tls) bash "$ROOT/bench/tls.sh" --json "$RESULTS" ;;
    memtime) bash "$ROOT/bench/memtime.sh" --json "$RESULTS" ;;
    backend_latency) bash "$ROOT/bench/backend-latency.sh" --json "$RESULTS" ;;
    watch) python3 "$ROOT/bench/watch.py" --json "$RESULTS" ;;
    micro) bash "$ROOT/bench/micro.sh" --json "$RESULTS" ;;
    openloop) bash "$ROOT/bench/openloop.sh" --json "$RESULTS" ;;
    governed) bash "$ROOT/bench/governed.sh" --json "$RESULTS" ;;
    kv) bash "$ROOT/bench/kv.sh" ;;
    fleet) bash "$ROOT/bench/fleet.sh" --scenario scale --json "$RESULTS" ;;
    churn) bash "$ROOT/bench/fleet.sh" --scenario churn --json "$RESULTS" ;;
    listen) python3 "$ROOT/bench/listen.py" --json "$RESULTS" ;;
    events) python3 "$ROOT/bench/events.py" --json "$RESULTS" ;;
    soak) bash "$ROOT/bench/soak.sh" "${SOAK_SECONDS:-300}" ;;
    *) echo "bench/run.sh: unknown scenario \"$1\" (one of: ${ALL[*]})" >&2; return 2 ;;
    esac
}

scenarios=("$@")
[ ${#scenarios[@]} -gt 0 ] || scenarios=("${ALL[@]}")
for s in "${scenarios[@]}"; do
    case " ${ALL[*]} " in *" $s "*) ;; *) echo "bench/run.sh: unknown scenario \"$s\" (one of: ${ALL[*]})" >&2; exit 2 ;; esac
done
failed=0 n=0
for s in "${scenarios[@]}"; do
    n=$((n + 1))
    echo "bench/run.sh: scenario $n/${#scenarios[@]}: $s ($(date -u +%H:%M:%S) UTC)" >&2
    run_one "$s" || { echo "bench/run.sh: $s failed" >&2; failed=1; }
done
echo "bench/run.sh: results appended to $RESULTS" >&2
exit "$failed"
