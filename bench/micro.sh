#!/usr/bin/env bash
# In process, counted not timed: instructions and allocations per call of a
# tools/call through the kernel and the dlopened backend (inline, on the pool,
# with an audit sink) beside the same echo work called directly
# (bench/micro/boundary.c). Instructions are callgrind's, from two runs of
# different lengths (N1 and N2 calls: the difference cancels start-up and
# shutdown), so they do not depend on the machine's load; allocations are
# counted by the program itself over all threads. Beside the call, its
# parts alone, one operation at a time: the transport's parser on each
# request kind of both wires (st-* the 2026-07-28 stateless wire, lg-* the
# 2025-11-25 legacy one; bench/micro/wire.c), redacting a call's arguments
# for audit and the policy decision (bench/micro/parts.c), and a call with a
# one-rule policy_rules in its policy stage (policy, beside inline).
#
#   bench/micro.sh                       every variant
#   bench/micro.sh --variants "direct inline" --json micro.jsonl
#   bench/micro.sh --variants "st-call lg-call redact policy-decide"
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=$ROOT/build/bin/mcpg-micro-boundary
MODULES=$ROOT/build/modules
CALL_VARIANTS="direct inline pool audit policy"
PARSE_VARIANTS="st-discover st-list st-call st-read st-prompt st-notify st-batch"
PARSE_VARIANTS+=" lg-initialize lg-list lg-call lg-read lg-prompt lg-notify lg-batch"
PART_VARIANTS="redact redact-secret redact-rules redact-hash policy-decide"
VARIANTS="$CALL_VARIANTS $PARSE_VARIANTS $PART_VARIANTS"
N1=2000 N2=12000
JSON_OUT=""
ME=micro
GW_CPU=0 LOAD_CPU=1
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

usage() { echo "usage: $0 [--variants \"$VARIANTS\"] [--calls N] [--json FILE]"; }
own_opt() {
    case $1 in
    --variants) VARIANTS=$2 ;;
    --calls) N2=$2 ;;
    *) return 1 ;;
    esac
}
parse_options "gw-cpu load-cpu json" "$@"
[ -x "$BIN" ] || die "no $BIN: build it (make build)"
command -v valgrind >/dev/null || die "valgrind is needed (apt-get install valgrind)"
TMP=$(mktemp -d /tmp/mcpg-micro.XXXXXX)
trap 'rm -rf "$TMP"' EXIT

# instructions VARIANT N: callgrind's total Ir of one run of N calls
instructions() {
    valgrind --tool=callgrind --callgrind-out-file="$TMP/cg.out" "$BIN" "$1" "$2" "$MODULES" \
        >"$TMP/out.txt" 2>"$TMP/err.txt" || { cat "$TMP/err.txt" >&2; die "$1: the run failed"; }
    sed -n 's/^summary: *\([0-9]*\).*/\1/p; s/^totals: *\([0-9]*\).*/\1/p' "$TMP/cg.out" | head -n1
}

ROW="%-14s %14s %16s %12s\n"
# an op: a call through the kernel, or one operation of a part
printf "$ROW" variant instr/op allocs/op ns/op
base=""
for v in $VARIANTS; do
    echo "$ME: $v: callgrind at $N1 and $N2 calls" >&2
    i1=$(instructions "$v" "$N1"); i2=$(instructions "$v" "$N2")
    per=$(( (i2 - i1) / (N2 - N1) ))
    native=$("$BIN" "$v" "$N2" "$MODULES" 2>/dev/null | tail -n1)
    printf "$ROW" "$v" "$per" "$(json_num "$native" allocs_per_call)" "$(json_num "$native" ns_per_call)"
    [ -n "$base" ] || base=$per
    [ -z "$JSON_OUT" ] || echo "${native%\}},\"instructions_per_call\":$per}" >>"$JSON_OUT"
done
