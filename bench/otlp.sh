#!/usr/bin/env bash
# What request traces cost: CPU per call (bench/cpu-per-call.sh --start
# --nginx) of conf/bench.json with tracing off, and with telemetry_otlp at
# sample_ratio 1 and 0.01, exporting to bench/otlp-sink.py on a local port,
# from one run. Figures and manifests: docs/observability.md.
#
#   bench/otlp.sh [--rounds N] [--duration S]     (defaults 3 and 4)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ROUNDS=3 DURATION=4 SINK_PORT=${SINK_PORT:-14318}
while [ $# -gt 0 ]; do
    case $1 in
    --rounds) ROUNDS=$2; shift 2 ;;
    --duration) DURATION=$2; shift 2 ;;
    *) echo "usage: $0 [--rounds N] [--duration S]" >&2; exit 2 ;;
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

for ratio in off 1 0.01; do
    manifest "$ratio" >"$WORK/bench-$ratio.json"
    echo "== tracing: $ratio"
    "$ROOT/bench/cpu-per-call.sh" --start --nginx --config "$WORK/bench-$ratio.json" \
        --rounds "$ROUNDS" --duration "$DURATION"
done
