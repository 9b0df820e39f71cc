#!/usr/bin/env bash
# What the durable audit costs a call's latency, beside the disk's own floor:
# the manifest's capacity measured closed-loop (bench/openloop.sh), then
# open-loop at half of it with the audit as the manifest has it (durable:
# fdatasync per batch), with its audit_file sinks set to "fsync": false, and
# with no audit at all; p50/p99/p99.9 of each beside the p50/p99 of one 4 KiB
# write + fdatasync in the audit file's folder (mcpg-fsync-latency), measured
# in the same run. A durable call cannot be faster than that sync.
#
#   bench/audit-floor.sh                          conf/bench.json
#   bench/audit-floor.sh --duration 10 --json floor.jsonl
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LOAD=$ROOT/build/bin/mcpg-load
PROBE=$ROOT/build/bin/mcpg-fsync-latency
CONFIG=$ROOT/conf/bench.json
GW_CPU=0 LOAD_CPU=1
PORT=18780 DURATION=5 WARMUP=2 CONNECTIONS=64
FRACTION=0.5 SYNC_ROUNDS=1000
CAPACITY="" JSON_OUT=""
ME=audit-floor
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

usage() {
    cat <<USAGE
usage: $0 [options]
  --config FILE        the manifest, with an audit_file sink (default conf/bench.json)
  --fraction F         the offered rate as a fraction of the capacity (default $FRACTION)
  --capacity R         skip the closed-loop run: take R calls/s as the capacity
  --sync-rounds N      rounds of the fdatasync probe (default $SYNC_ROUNDS)
  --duration S  --warmup S  --connections N  --port P  --gw-cpu N  --load-cpu N
  --json FILE          append openloop.sh's JSON lines (with "variant") and the probe's
USAGE
}
own_opt() {
    case $1 in
    --fraction) FRACTION=$2 ;;
    --capacity) CAPACITY=$2 ;;
    --sync-rounds) SYNC_ROUNDS=$2 ;;
    *) return 1 ;;
    esac
}
parse_options "config duration warmup connections port gw-cpu load-cpu json" "$@"
[ -f "$CONFIG" ] || die "no manifest $CONFIG"
[ -x "$PROBE" ] || die "no $PROBE: build it (cmake --build build --target mcpg-fsync-latency)"
command -v python3 >/dev/null || die "python3 is needed to write the variant manifests"
TMP=$(mktemp -d /tmp/mcpg-audit-floor.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
trap 'exit 130' INT TERM
progress() { echo "$ME: $*" >&2; }

# variant_manifest KIND OUT: the manifest with its audit_file sinks as they
# are (durable), with "fsync": false (nosync), or without audit (none)
variant_manifest() {
    python3 - "$CONFIG" "$1" "$2" <<'PY'
import json, sys
src, kind, out = sys.argv[1:]
m = json.load(open(src))
sinks = [e["name"] for e in m.get("modules", []) if e.get("module") == "audit_file"]
if not sinks:
    sys.exit(f"{src}: modules: no audit_file sink to vary")
for e in m["modules"]:
    if e["name"] in sinks and kind == "nosync":
        e.setdefault("config", {})["fsync"] = False
if kind == "none":
    m["modules"] = [e for e in m["modules"] if e["name"] not in sinks]
    stages = m.get("pipeline", {})
    stages["audit"] = [s for s in stages.get("audit", []) if s not in sinks]
    if not stages["audit"]:
        del stages["audit"]
json.dump(m, open(out, "w"), indent=2)
PY
}

# openloop CONFIG [openloop.sh options]: openloop.sh's JSON lines for CONFIG
openloop() {
    local config=$1; shift
    rm -f "$TMP/run.jsonl"
    "$ROOT/bench/openloop.sh" --config "$config" --fractions "$FRACTION" --duration "$DURATION" --warmup "$WARMUP" \
        --connections "$CONNECTIONS" --port "$PORT" --gw-cpu "$GW_CPU" --load-cpu "$LOAD_CPU" \
        --json "$TMP/run.jsonl" "$@" >"$TMP/openloop.out" 2>"$TMP/openloop.err" ||
        { cat "$TMP/openloop.out" "$TMP/openloop.err" >&2; die "openloop.sh failed on $config"; }
    cat "$TMP/run.jsonl"
}

table_row() { printf '%-8s %10s %10s %9s %9s %9s %11s\n' "$@"; }
# row VARIANT JSON_LINE
row() {
    table_row "$1" "$(printf '%.0f' "$(json_num "$2" rate)")" "$(json_num "$2" calls_per_s)" "$(json_num "$2" p50_us)" \
        "$(json_num "$2" p99_us)" "$(json_num "$2" p999_us)" "$(json_num "$2" cpu_us_per_call)"
}

# measure_variant KIND: one open-loop run of that variant at the offered rate
measure_variant() {
    local manifest=$TMP/$1.json lines line
    variant_manifest "$1" "$manifest"
    progress "$1: open loop at $RATE_NOTE"
    if [ -z "$CAPACITY" ]; then
        lines=$(openloop "$manifest")
        CAPACITY=$(json_num "$(grep '"target":"closed-loop"' <<<"$lines")" calls_per_s)
        RATE_NOTE="$FRACTION of $CAPACITY calls/s"
    else
        lines=$(openloop "$manifest" --capacity "$CAPACITY")
    fi
    line=$(grep '"target":"open-loop"' <<<"$lines")
    # a target of its own, so these lines are not taken for openloop.sh's
    local tagged=${line//\"target\":\"open-loop\"/\"target\":\"audit-floor\"}
    [ -z "$JSON_OUT" ] || echo "${tagged%\}},\"variant\":\"$1\"}" >>"$JSON_OUT"
    RESULTS+=("$(row "$1" "$line")")
}

RESULTS=()
RATE_NOTE="$FRACTION of the capacity (closed loop first, ${DURATION} s, durable audit)"
[ -z "$CAPACITY" ] || RATE_NOTE="$FRACTION of $CAPACITY calls/s"
measure_variant durable
AUDIT_DIR=/tmp # openloop.sh keeps the gateway's audit file in its scratch folder there
progress "fdatasync probe in $AUDIT_DIR, $SYNC_ROUNDS rounds"
PROBE_OUT=$("$PROBE" --rounds "$SYNC_ROUNDS" --json "$AUDIT_DIR")
measure_variant nosync
measure_variant none

echo "open loop at $FRACTION of the capacity ($CAPACITY calls/s closed loop), $(basename "$CONFIG"), ${DURATION} s each"
table_row variant offered/s served/s p50_us p99_us p999_us cpu_us/call
printf '%s\n' "${RESULTS[@]}"
echo "durable: the manifest's audit (fdatasync per batch); nosync: \"fsync\": false; none: no audit module"
echo
echo "the disk's floor: one 4 KiB write + fdatasync in $AUDIT_DIR ($SYNC_ROUNDS rounds each)"
grep -v '^{' <<<"$PROBE_OUT"
[ -z "$JSON_OUT" ] || grep '^{' <<<"$PROBE_OUT" >>"$JSON_OUT"
