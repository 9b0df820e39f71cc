#!/usr/bin/env bash
# End-to-end test of mcpg-load against bench/mock_mcp.py: a clean run exits 0,
# and each injected fault is counted under its own kind and exits 1.
# usage: test-mock.sh PATH/TO/mcpg-load
set -uo pipefail
LOAD=$1
MOCK=$(dirname "$0")/../mock_mcp.py
passed=0 failed=0
MOCK_PID=""
trap '[ -n "$MOCK_PID" ] && kill "$MOCK_PID" 2>/dev/null' EXIT

start_mock() { # fault args...; sets PORT and MOCK_PID
    exec 3< <(exec python3 "$MOCK" --port 0 "$@")
    MOCK_PID=$!
    # the mock prints its port once it listens; a loaded machine can take a
    # while to start Python (a bound on a broken start, not on speed)
    read -r -t 120 PORT <&3 || { echo "mock did not start within 120 s"; exit 1; }
}
stop_mock() { kill "$MOCK_PID" 2>/dev/null; wait "$MOCK_PID" 2>/dev/null; exec 3<&-; MOCK_PID=""; }

# name want_rc want_key [mock args] -- a run of 600 calls on 4 connections;
# want_key is KEY (its count must be > 0) or KEY=N (exactly N);
# LOAD_WIRE picks mcpg-load's wire
LOAD_WIRE=stateless
check() {
    local name=$1 want_rc=$2 key=$3; shift 3
    start_mock "$@"
    local out rc
    out=$("$LOAD" --url "http://127.0.0.1:$PORT/mcp" --wire "$LOAD_WIRE" -c 4 -w 0 --max-calls 600 \
        --timeout 0.5 --expect hello --json -q 2>/dev/null)
    rc=$?
    stop_mock
    local want=""
    case $key in *=*) want=${key#*=}; key=${key%%=*} ;; esac
    local n; n=$(sed -n "s/.*\"$key\":\([0-9]*\).*/\1/p" <<<"$out")
    local good=0
    if [ -n "$want" ]; then [ "${n:-x}" = "$want" ] && good=1; else [ "${n:-0}" -gt 0 ] && good=1; fi
    if [ "$rc" = "$want_rc" ] && [ "$good" = 1 ]; then
        passed=$((passed + 1)); echo "ok   $name ($key=$n, exit $rc)"
    else
        failed=$((failed + 1)); echo "FAIL $name: exit $rc (want $want_rc), $key=${n:-?}: $out"
    fi
}

check clean 0 ok
check bad-id 1 err_mismatch --fault bad-id --every 50
check rpc-error 1 err_rpc_error --fault rpc-error --every 50
check tool-error 1 err_tool_error --fault tool-error --every 50
check status-500 1 err_http_status --fault status-500 --every 50
check chunked 1 err_protocol --fault chunked --every 50
check drop 1 err_socket --fault drop --every 50
check close 0 reconnects --fault close --every 50
check stall 1 err_timeout --fault stall --every 150
# the session wire: SSE (chunked) and JSON answers, faults inside SSE, a lost session
LOAD_WIRE=legacy
check legacy-sse 0 ok --wire legacy
check legacy-sse-counted 0 ok_sse=600 --wire legacy
check legacy-json 0 ok --wire legacy-json
check legacy-json-counted 0 ok_sse=0 --wire legacy-json
check legacy-sse-bad-id 1 err_mismatch --wire legacy --fault bad-id --every 50
check legacy-sse-tool-error 1 err_tool_error --wire legacy --fault tool-error --every 50
check legacy-forget 1 err_http_status --wire legacy --fault forget --every 50

# Open loop: calls leave on the schedule, never more than it made due (rate x
# window + 1, whatever the server's speed); a stall shows in the latency of
# the calls due during it, counted from when they were due.
LOAD_WIRE=stateless
open_loop() { # connections rate [mock args]: a 1 s window at the rate
    local conns=$1 rate=$2; shift 2
    start_mock "$@"
    OUT=$("$LOAD" --url "http://127.0.0.1:$PORT/mcp" -c "$conns" -w 0 -d 1 --rate "$rate" --timeout 5 \
        --expect hello --json -q 2>/dev/null)
    stop_mock
}
verdict() { # name condition-text ok?
    if [ "$3" = 1 ]; then passed=$((passed + 1)); echo "ok   $1 ($2)"
    else failed=$((failed + 1)); echo "FAIL $1: $2: $OUT"; fi
}
num() { sed -n "s/.*\"$1\":\([0-9.]*\).*/\1/p" <<<"$OUT"; }
open_loop 4 200
calls=$(num calls); secs=$(num duration_s)
# never more than the schedule made due, whatever the machine; at least one
# (how close it comes to the schedule depends on the machine: not judged)
verdict open-loop-rate "$calls calls in ${secs} s at 200/s" \
    "$(awk -v c="${calls:-0}" -v s="${secs:-0}" 'BEGIN { print (c >= 1 && c <= 200 * s + 1) ? 1 : 0 }')"
# One connection, every 100th answer 0.2 s late: the ~40 calls due during each
# stall wait for the connection and are counted from their due times (0 to
# 195 ms late), so p90 is ~150 ms; a closed loop would report well under 1 ms.
open_loop 1 200 --fault delay --every 100 --delay 0.2
p90=$(num p90_us)
verdict open-loop-corrected "p90 ${p90} us with 0.2 s stalls every 100 calls" \
    "$(awk -v p="${p90:-0}" 'BEGIN { print (p >= 50000 ? 1 : 0) }')"
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
