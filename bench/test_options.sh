#!/usr/bin/env bash
# The scenarios' one option parser (parse_options in bench/lib.sh): shared
# options set their variables, a scenario's own options and flags are read by
# its own_opt, a shared option it did not list is refused, a missing value is
# an error, and "--" hands the rest to mcpg-load only where that was asked.
set -euo pipefail
LIB=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/lib.sh
failed=0

# parse SHARED ARGS...: the variables after parsing, or "exit N" when the
# parser ended the scenario.
parse() {
    (
        ME=selftest LOAD_EXTRA=() START=0 GW_PID="" CONNECTIONS="" JSON_OUT="" PORT=""
        # shellcheck source=bench/lib.sh
        . "$LIB"
        usage() { echo "usage: selftest"; }
        own_opt() {
            case $1 in
            --start) START=1; flag ;;
            --pid) GW_PID=$2 ;;
            *) return 1 ;;
            esac
        }
        parse_options "$@"
        echo "start=$START pid=$GW_PID conns=$CONNECTIONS json=$JSON_OUT port=$PORT extra=${LOAD_EXTRA[*]}"
    ) 2>/dev/null || echo "exit $?"
}

expect() { # WANT SHARED ARGS...
    local want=$1 got; shift
    got=$(parse "$@" | tail -n1)
    [ "$got" = "$want" ] || { echo "FAIL: parse_options \"$*\": got \"$got\", want \"$want\""; failed=1; }
}

expect "start=0 pid= conns=8 json=out.jsonl port= extra=" "connections json" --connections 8 --json out.jsonl
expect "start=0 pid= conns=8 json= port= extra=" "connections" -c 8
expect "start=1 pid=42 conns= json= port=9 extra=" "port" --start --pid 42 --port 9
expect "start=1 pid= conns= json= port= extra=" "" --start
expect "exit 2" "connections" --port 9
expect "exit 2" "connections" --bogus
expect "exit 2" "connections" --connections
expect "exit 2" "" --pid
expect "start=0 pid= conns= json= port= extra=-w 0 --sse" "load-args" -- -w 0 --sse
expect "exit 2" "json" -- -w 0
expect "usage: selftest" "json" --help

[ "$failed" = 0 ] && echo "bench options: all passed"
exit "$failed"
