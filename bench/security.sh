#!/usr/bin/env bash
# What identity, policy, redaction, audit and TLS cost a call, from one run:
# the same backend_mock echo behind gateways that differ in those alone,
# measured in alternation (the order rotated each round), medians and the
# ratio of each to the bare gateway printed. Targets:
#   bare         conf/bench.json without its audit sink: no identity, no policy
#   audit        conf/bench.json: audit_file (fsync on), the arguments redacted
#   secured      identity_apikey (an X-API-Key on every call) + policy_rules (the ten
#                rules of conf/policy-example.json) + redaction + audit_file
#   tls          bare over HTTPS         tls-secured   secured over HTTPS
# (the last two when mcpg-load and transport_http speak TLS). CPU per call is
# Δ(utime+stime) of the gateway over good calls. See bench/README.md.
#
#   bench/security.sh                       3 rounds of 5 s
#   bench/security.sh --rounds 5 --json security.jsonl
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LOAD=$ROOT/build/bin/mcpg-load
MCPG=$ROOT/build/bin/mcpg
MODULES=$ROOT/build/modules
GW_CPU=0 LOAD_CPU=1
PORT_BASE=18380
DURATION=5 WARMUP=2 CONNECTIONS=64 ROUNDS=3
TOOL=echo MESSAGE=hello JSON_OUT=""
LOAD_EXTRA=()
ME=security
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

usage() {
    cat <<USAGE
usage: $0 [options] [-- mcpg-load options]
  --rounds N           rounds; each measures every target once (default $ROUNDS)
  --duration S         measured seconds per run (default $DURATION)
  --warmup S           seconds of load before each run (default $WARMUP)
  --connections N      (default $CONNECTIONS)
  --targets "A B"      which targets, the first the baseline (default: all this build can run)
  --port-base P        ports P.. (default $PORT_BASE)
  --gw-cpu N  --load-cpu N   cores (default $GW_CPU and $LOAD_CPU)
  --json FILE          append one JSON line per run, then one summary line per target
USAGE
}

WANT=""
own_opt() {
    case $1 in
    --targets) WANT=$2 ;;
    *) return 1 ;;
    esac
}
parse_options "rounds duration warmup connections port-base gw-cpu load-cpu json load-args" "$@"

[ -x "$LOAD" ] || die "no $LOAD: build it (cmake --build build --target mcpg-load)"
command -v jq >/dev/null || die "jq is needed to derive the manifests"
CLK_TCK=$(getconf CLK_TCK)
TMP=$(mktemp -d /tmp/mcpg-security.XXXXXX)
RUNS_FILE=$TMP/runs.txt
STARTED=()
cleanup() {
    local pid
    for pid in "${STARTED[@]+"${STARTED[@]}"}"; do stop_pid "$pid"; done
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
progress() { echo "$ME: $*" >&2; }

# ---- what this build can run ----
have_module() { [ -f "$MODULES/$1.so" ]; }
ALL=(bare audit)
if have_module identity_apikey && have_module policy_rules; then ALL+=(secured); fi
if "$LOAD" --help 2>&1 | grep -q -- '--ca-file' && "$MCPG" --help-module transport_http 2>&1 | grep -q tls_cert_file; then
    ALL+=(tls)
    case " ${ALL[*]} " in *" secured "*) ALL+=(tls-secured) ;; esac
fi
read -r -a TARGETS <<<"${WANT:-${ALL[*]}}"
for t in "${TARGETS[@]}"; do
    case " ${ALL[*]} " in *" $t "*) ;; *) die "target $t cannot run in this build (can: ${ALL[*]})" ;; esac
done

# ---- the manifests, derived from conf/bench.json ----
BASE=$ROOT/conf/bench.json
jq '.pipeline.audit = [] | .modules |= map(select(.module != "audit_file"))
    | .description = "bare, derived by bench/security.sh"' "$BASE" >"$TMP/bare.json"
jq '.description = "audit, derived by bench/security.sh"' "$BASE" >"$TMP/audit.json"

KEY=mcpg-bench-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')
secured_manifest() { # one API key (tenant acme, role reader); echo is allowed by the second rule
    local hash; hash=$(printf %s "$KEY" | sha256sum | cut -d' ' -f1)
    printf '[{"sha256":"%s","principal":"svc-bench","tenant":"acme","roles":["reader"]}]\n' "$hash" \
        >"$TMP/keys.json"
    jq --slurpfile ex "$ROOT/conf/policy-example.json" --arg keys "$TMP/keys.json" '
        .modules += [{name: "keys", module: "identity_apikey", config: {keys_file: $keys}},
                     ($ex[0].modules[] | select(.module == "policy_rules"))]
        | .pipeline.identity = ["keys"] | .pipeline.policy = ["rules"]
        | .description = "secured, derived by bench/security.sh"' "$BASE" >"$TMP/secured.json"
}
tls_manifest() { # SRC DEST: SRC over HTTPS with a certificate made here
    [ -f "$TMP/cert.pem" ] || openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
        -keyout "$TMP/key.pem" -out "$TMP/cert.pem" -days 1 -subj /CN=127.0.0.1 \
        -addext subjectAltName=IP:127.0.0.1 >/dev/null 2>&1 || die "openssl could not make a certificate"
    jq --arg c "$TMP/cert.pem" --arg k "$TMP/key.pem" \
        '.gateway.server.tls_cert_file = $c | .gateway.server.tls_key_file = $k
         | .description = "over TLS: " + .description' "$1" >"$2"
}
case " ${TARGETS[*]} " in *secured*) secured_manifest ;; esac
case " ${TARGETS[*]} " in *" tls "*) tls_manifest "$TMP/bare.json" "$TMP/tls.json" ;; esac
case " ${TARGETS[*]} " in *" tls-secured "*) tls_manifest "$TMP/secured.json" "$TMP/tls-secured.json" ;; esac

declare -A T_PORT T_PID
port=$PORT_BASE
for t in "${TARGETS[@]}"; do
    start_gateway "$t" "$TMP/$t.json" "$port"
    STARTED+=("$STARTED_PID"); T_PID[$t]=$STARTED_PID; T_PORT[$t]=$port
    port=$((port + 1))
done

# run_target T: one measured run of T, with the key and the TLS trust it needs.
run_target() {
    local t=$1 saved=("${LOAD_EXTRA[@]+"${LOAD_EXTRA[@]}"}") rc=0
    case $t in *secured) LOAD_EXTRA+=(--header "X-API-Key: $KEY") ;; esac
    case $t in tls*) LOAD_EXTRA+=(--ca-file "$TMP/cert.pem" --url "https://127.0.0.1:${T_PORT[$t]}/mcp") ;; esac
    measure "$t" "${T_PID[$t]}" "${T_PORT[$t]}" --wire stateless --expect "Echo: $MESSAGE" || rc=$?
    LOAD_EXTRA=("${saved[@]+"${saved[@]}"}")
    return "$rc"
}

progress "targets: ${TARGETS[*]}; gateway on core $GW_CPU, mcpg-load on core $LOAD_CPU"
failed=0 n_t=${#TARGETS[@]} total=$((ROUNDS * ${#TARGETS[@]})) done_runs=0
print_header
for ROUND in $(seq "$ROUNDS"); do
    for i in $(seq 0 $((n_t - 1))); do
        t=${TARGETS[$(( (i + ROUND - 1) % n_t ))]}
        done_runs=$((done_runs + 1))
        progress "round $ROUND/$ROUNDS, run $done_runs/$total: $t"
        run_target "$t" || failed=1
    done
done

# ---- medians and the ratio to the first target ----
SUM="%-12s %10s %8s %8s %11s %8s %9s %9s %7s %6s %s\n"
echo
echo "medians over the clean runs of $ROUNDS round(s) (all runs when none was clean):"
printf "$SUM" target calls/s p50_us p99_us cpu_us/call vs_${TARGETS[0]} VmHWM_kB VmRSS_kB threads steal% runs
fig() { local v; v=$(median "$1" "$2"); awk -v v="${v%% *}" -v f="${3:-%.0f}" 'BEGIN { printf f "\n", v }'; }
base=$(fig "${TARGETS[0]}" 2 %.2f)
for t in "${TARGETS[@]}"; do
    cpu=$(fig "$t" 2 %.2f)
    vs=$(awk -v c="$cpu" -v b="$base" 'BEGIN { printf "%.2fx", (b > 0 ? c / b : 0) }')
    c=$(clean_runs "$t")
    printf "$SUM" "$t" "$(fig "$t" 4 %.1f)" "$(fig "$t" 5 %.1f)" "$(fig "$t" 6 %.1f)" "$cpu" "$vs" \
        "$(fig "$t" 7)" "$(fig "$t" 8)" "$(fig "$t" 9)" "$(fig "$t" 11 %.1f)" "$c of $ROUNDS clean"
    [ -z "$JSON_OUT" ] || printf '{"bench":"security-summary","target":"%s","baseline":"%s","rounds":%s,"clean_runs":%s,"calls_per_s":%s,"p50_us":%s,"p99_us":%s,"cpu_us_per_call":%s,"ratio_to_baseline":%s}\n' \
        "$t" "${TARGETS[0]}" "$ROUNDS" "$c" "$(fig "$t" 4 %.1f)" "$(fig "$t" 5 %.1f)" "$(fig "$t" 6 %.1f)" \
        "$cpu" "${vs%x}" >>"$JSON_OUT"
done
[ "$failed" = 0 ] || echo "$ME: some runs had errors: see above" >&2
exit "$failed"
