#!/usr/bin/env bash
# ctest mcpg_events_load_mock (~17 s): mcpg-events-load against bench/events/mock.py,
# a stand-in for the gateway's events side, once clean and once per fault; each
# run's JSON line must show what the fault does (refusals counted by status,
# copies, a dropped stream reopened from its cursor with nothing lost, a
# reordering). The mock is started and stopped by pid, on a free port.
set -euo pipefail
LOAD=${1:?usage: test-mock.sh path/to/mcpg-events-load}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TMP=$(mktemp -d)
MOCK=""
trap '[ -z "$MOCK" ] || kill "$MOCK" 2>/dev/null || true; rm -rf "$TMP"' EXIT
SECRET=whsec_$(head -c 24 /dev/urandom | base64)
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

run() { # FAULT CHECK (a Python expression on r, the JSON line)
    local fault=$1 check=$2 port rc=0
    port=$(free_port)
    python3 "$HERE/mock.py" "$port" "$SECRET" ${fault:+--fault "$fault"} 2>"$TMP/mock.err" &
    MOCK=$!
    for _ in $(seq 50); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
    MCPG_EVENTS_SECRET=$SECRET timeout 60 "$LOAD" --url "http://127.0.0.1:$port" --streams 6 --rate 250 \
        --duration 1.5 --warmup 0.5 -q >"$TMP/out.json" 2>"$TMP/err" || rc=$?
    kill "$MOCK" 2>/dev/null || true
    wait "$MOCK" 2>/dev/null || true
    MOCK=""
    if ! python3 -c "import json,sys; r=json.load(open(sys.argv[1])); r['rc']=$rc; sys.exit(0 if ($check) else 1)" \
        "$TMP/out.json"; then
        echo "FAIL ${fault:-clean}: $check" >&2
        cat "$TMP/out.json" "$TMP/err" "$TMP/mock.err" >&2
        exit 1
    fi
    echo "ok ${fault:-clean}"
}

base="r['producers'] == 3 and r['accepted'] > 200 and r['deliveries_expected'] == 6 * r['accepted']"
run "" "r['rc'] == 0 and $base and r['deliveries_within_3s'] == r['deliveries_expected'] and r['lost'] + r['duplicated'] + r['reordered'] + r['refused'] == 0"
run refuse-every-10th "r['rc'] == 0 and $base and r['refused'] > 0 and r['refused_by'].get('503') == r['refused'] and r['deliveries_within_3s'] == r['deliveries_expected'] and r['lost'] == 0"
run dup-every-50th "r['rc'] == 1 and $base and r['duplicated'] > 0 and r['lost'] == 0 and r['reordered'] == 0"
run drop-stream-once "r['rc'] == 0 and $base and r['stream_reopens'] == 1 and r['lost'] + r['duplicated'] + r['reordered'] == 0 and r['deliveries_within_3s'] == r['deliveries_expected']"
run swap-every-30th "r['rc'] == 1 and $base and r['reordered'] > 0 and r['lost'] > 0 and r['duplicated'] == 0"
