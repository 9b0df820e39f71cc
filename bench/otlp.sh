#!/usr/bin/env bash
# What request traces cost, from one run: conf/bench.json with tracing off,
# and with telemetry_otlp at sample_ratio 1 and 0.01 exporting to
# bench/otlp-sink.py on a local port. First instructions per call of the
# whole gateway (bench/instructions.sh: callgrind, counted not timed, so a
# busy machine does not move it), then CPU per call beside nginx
# (bench/cpu-per-call.sh --start --nginx), the three manifests alternated
# round by round so that they share the machine's noise; the medians last.
# Figures and manifests: docs/observability.md.
#
#   bench/otlp.sh [--rounds N] [--duration S] [--calls N]   (defaults 3, 4, 2000)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ROUNDS=3 DURATION=4 CALLS=2000 SINK_PORT=${SINK_PORT:-14318}
while [ $# -gt 0 ]; do
    case $1 in
    --rounds) ROUNDS=$2; shift 2 ;;
    --duration) DURATION=$2; shift 2 ;;
    --calls) CALLS=$2; shift 2 ;;
    *) echo "usage: $0 [--rounds N] [--duration S] [--calls N]" >&2; exit 2 ;;
    esac
done
WORK=$(mktemp -d /tmp/mcpg-otlp-bench.XXXXXX)
"$ROOT/bench/otlp-sink.py" "$SINK_PORT" >"$WORK/sink.out" 2>&1 &
SINK=$!
trap 'kill "$SINK" 2>/dev/null; wait "$SINK" 2>/dev/null; cat "$WORK/sink.out"; rm -rf "$WORK"' EXIT

# conf/bench.json, with a telemetry_otlp instance at ratio $1 (none for "off")
manifest() {
    python3 - "$ROOT/conf/bench.json" "$1" "$SINK_PORT" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
if sys.argv[2] != "off":
    m["modules"].append({"name": "otel", "module": "telemetry_otlp", "config": {
        "endpoint": "http://127.0.0.1:%s/v1/traces" % sys.argv[3],
        "sample_ratio": float(sys.argv[2])}})
print(json.dumps(m, indent=2))
PY
}

RATIOS="off 1 0.01"
for ratio in $RATIOS; do
    manifest "$ratio" >"$WORK/bench-$ratio.json"
    echo "== instructions, tracing $ratio"
    "$ROOT/bench/instructions.sh" --config "$WORK/bench-$ratio.json" --calls "$CALLS" --top 0 |
        grep "instructions per call:"
done
for round in $(seq "$ROUNDS"); do
    for ratio in $RATIOS; do
        echo "== CPU, round $round, tracing $ratio"
        "$ROOT/bench/cpu-per-call.sh" --start --nginx --config "$WORK/bench-$ratio.json" \
            --rounds 1 --duration "$DURATION" | tee "$WORK/cpu-$ratio-$round.out" | grep -E "^(mcpg|nginx) "
    done
done
# one round's "mcpg nginx ratio" from cpu-per-call.sh's median lines
round_figures() {
    awk '$2 == "median" && $1 == "mcpg" { m = $6 } $2 == "median" && $1 == "nginx" { n = $6 }
         END { printf "%s %s %.3f\n", m, n, m / n }' "$1"
}
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
echo "== medians of $ROUNDS rounds: CPU per call (us) and the per-round ratio mcpg/nginx"
for ratio in $RATIOS; do
    for round in $(seq "$ROUNDS"); do round_figures "$WORK/cpu-$ratio-$round.out"; done >"$WORK/fig-$ratio"
    printf 'tracing %-5s mcpg %6s  nginx %6s  ratio %sx\n' "$ratio" \
        "$(cut -d' ' -f1 "$WORK/fig-$ratio" | median)" "$(cut -d' ' -f2 "$WORK/fig-$ratio" | median)" \
        "$(cut -d' ' -f3 "$WORK/fig-$ratio" | median)"
done
