#!/usr/bin/env bash
# A fleet of gateways sharing a coordinator store, two scenarios:
#
#   scale  tools/call of backend_mock's echo from 64 connections spread over
#          1, 2 and 4 gateways, on each store (memory: one gateway alone, the
#          same-run baseline; redis: one redis-server; nats: one JetStream
#          node, replicas 1), both wires (stateless 2026-07-28; legacy
#          2025-11-25 with sessions, each connection's calls on one replica,
#          and, with 2 or more gateways, each call on the next replica), with
#          the default and the tuned settings (conf/bench-tuned.json's three:
#          unary_json_fast_path, no access log, inline dispatch). Per row:
#          calls/s, p50/p99, gateway CPU per call (all gateways' utime+stime
#          over the calls), cores per gateway, the store's cores and its
#          operations per call (NATS: /varz in_msgs+out_msgs; Redis: INFO
#          commandstats calls), resident memory per gateway, the machine's steal.
#   churn  16 clients each open a legacy session on one replica, its GET
#          stream on the next replica and DELETE it on the first; the stream
#          must end (mcpg-load --churn): sessions ended/s, stream end p50/p99
#          after the DELETE's answer, stuck streams (not ended in 5 s: must be
#          0), the driver's own CPU; one gateway alone, then 1, 2 and 4 on
#          Redis and on NATS.
#   (listen: bench/listen.py, `bench/run listen`)
#
# The manifests are conf/fleet-redis.json and conf/fleet-nats.json, derived
# here (jq) for each row: the settings (default: all three off, as the
# reference's default rows; tuned: all three on), and for "memory" the same
# manifest on cluster.kind single_node (coordinator_memory). NATS R3 is not
# run: coordinator_nats refuses replicated buckets on nats-server before
# 2.9.21 (lost compare-and-set updates), and this machine has 2.9.10.
#
# Placement (printed): every gateway on --gw-cpus (a list: gateway i on entry
# i % n; default "0", all of them on core 0), mcpg-load and the store on
# --load-cpu / --store-cpu (default 1). On a 2-core machine the gateways share
# one core whatever their number: the rows are what a fleet costs per call on
# the same CPU, not what it adds in capacity.
#
#   bench/fleet.sh                                  scale, every row, 3 rounds of 5 s each
#   bench/fleet.sh --scenario churn --duration 10
#   bench/fleet.sh --stores "redis" --gateways "1 4" --wires legacy --settings default --duration 3
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LOAD=$ROOT/build/bin/mcpg-load
MCPG=$ROOT/build/bin/mcpg
NATS_SERVER=${NATS_SERVER:-/usr/sbin/nats-server}
SCENARIO=scale
STORES="memory redis nats" GATEWAYS="1 2 4" WIRES="stateless legacy" SETTINGS="default tuned"
GW_CPUS="0" LOAD_CPU=1 STORE_CPU=1
DURATION=5 ROUNDS=3 WARMUP=2 CONNECTIONS=64 CHURN_CLIENTS=16 STUCK_AFTER=5
PORT_BASE=18580
JSON_OUT=""
ME=fleet
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"

usage() {
    cat <<USAGE
usage: $0 [options]
  --scenario S         scale (default) or churn
  --stores "A B"       of memory redis nats (default "$STORES"; memory runs one gateway only)
  --gateways "1 2 4"   fleet sizes on redis and nats (default "$GATEWAYS")
  --wires "A B"        scale: of stateless legacy (default "$WIRES"; legacy adds its by-call row
                       on 2 or more gateways)
  --settings "A B"     scale: of default tuned (default "$SETTINGS")
  --duration S         measured seconds per round (default $DURATION)
  --rounds N           measured runs per row, back to back on the same fleet; the row is their
                       median (stuck streams and errors: their sum) (default $ROUNDS)
  --warmup S           seconds of load before each row's first round, in a separate mcpg-load (default $WARMUP)
  --connections N      scale: connections over the fleet (default $CONNECTIONS)
  --clients N          churn: clients (default $CHURN_CLIENTS)
  --stuck-after S      churn: a stream not ended S s after the DELETE's answer is stuck (default $STUCK_AFTER)
  --gw-cpus "L ..."    cores of gateway i = entry i % n, each a taskset list (default "$GW_CPUS")
  --load-cpu N         mcpg-load's core (default $LOAD_CPU)   --store-cpu N   the store's (default $STORE_CPU)
  --port-base P        gateway ports P.. (default $PORT_BASE)
  --json FILE          append one JSON line per row
USAGE
}

own_opt() {
    case $1 in
    --scenario) SCENARIO=$2 ;;
    --stores) STORES=$2 ;;
    --gateways) GATEWAYS=$2 ;;
    --wires) WIRES=$2 ;;
    --settings) SETTINGS=$2 ;;
    --clients) CHURN_CLIENTS=$2 ;;
    --stuck-after) STUCK_AFTER=$2 ;;
    --gw-cpus) GW_CPUS=$2 ;;
    --store-cpu) STORE_CPU=$2 ;;
    *) return 1 ;;
    esac
}
parse_options "duration warmup rounds connections port-base gw-cpu load-cpu json" "$@"
case $SCENARIO in
scale|churn) ;;
listen) die "the listen scenario is bench/listen.py (bench/run listen)" ;;
*) usage >&2; exit 2 ;;
esac

[ -x "$LOAD" ] || die "no $LOAD: build it (make build)"
[ -x "$MCPG" ] || die "no $MCPG: build it (make build)"
command -v jq >/dev/null || die "jq is needed to derive the manifests"
command -v curl >/dev/null || die "curl is needed to read nats-server's /varz"
CLK_TCK=$(getconf CLK_TCK)
TMP=$(mktemp -d /tmp/mcpg-fleet.XXXXXX)
read -r -a GW_CPU_LIST <<<"$GW_CPUS"
GW_PIDS=() STORE_PID="" STORE_KIND="" STORE_PORT="" STORE_MON=""

stop_fleet() {
    local pid
    for pid in "${GW_PIDS[@]}"; do stop_pid "$pid"; done
    GW_PIDS=()
}
stop_store() { stop_pid "$STORE_PID"; STORE_PID=""; }
cleanup() { stop_fleet; stop_store; rm -rf "$TMP"; }
trap cleanup EXIT
trap 'exit 130' INT TERM
progress() { echo "$ME: $*" >&2; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# ---- the store: started fresh for every fleet, on STORE_CPU, stopped by pid ----
start_store() { # memory | redis | nats
    STORE_KIND=$1
    [ "$1" != memory ] || return 0
    STORE_PORT=$(free_port)
    mkdir -p "$TMP/store"
    rm -rf "$TMP/store/"*
    if [ "$1" = redis ]; then
        command -v redis-server >/dev/null || die "no redis-server"
        taskset -c "$STORE_CPU" redis-server --bind 127.0.0.1 --port "$STORE_PORT" --save '' --appendonly no \
            --dir "$TMP/store" --logfile "$TMP/store/redis.log" &
        STORE_PID=$!
        for _ in $(seq 250); do redis-cli -p "$STORE_PORT" ping >/dev/null 2>&1 && return 0; sleep 0.02; done
        die "redis-server did not answer"
    fi
    [ -x "$NATS_SERVER" ] || die "no $NATS_SERVER"
    STORE_MON=$(free_port)
    taskset -c "$STORE_CPU" "$NATS_SERVER" -js -sd "$TMP/store/js" -a 127.0.0.1 -p "$STORE_PORT" \
        -m "$STORE_MON" -n fleet -l "$TMP/store/nats.log" &
    STORE_PID=$!
    for _ in $(seq 250); do curl -sf "http://127.0.0.1:$STORE_MON/healthz" >/dev/null && return 0; sleep 0.02; done
    die "nats-server did not become healthy"
}

# store_ops: what the store has done so far (NATS messages in and out; Redis
# commands, INFO itself left out); "-" for memory.
store_ops() {
    case $STORE_KIND in
    redis) redis-cli -p "$STORE_PORT" info commandstats |
        awk -F'[:=,]' '/^cmdstat_/ && $1 != "cmdstat_info" { n += $3 } END { print n + 0 }' ;;
    nats) curl -sf "http://127.0.0.1:$STORE_MON/varz" | jq '.in_msgs + .out_msgs' ;;
    *) echo - ;;
    esac
}
store_ticks() { if [ -n "$STORE_PID" ]; then ticks_of "$STORE_PID" | cut -d' ' -f1; else echo 0; fi; }
# "steal total busy" ticks of the whole machine (busy: user nice system irq softirq)
steal_ticks() { awk '$1 == "cpu" { t = 0; for (i = 2; i <= NF; i++) t += $i; print $9, t, $2 + $3 + $4 + $7 + $8 }' /proc/stat; }
# machine STEAL0 STEAL1 OURS_TICKS LOAD_PCT SECS: "steal% others%": others is the
# machine's busy time that was none of ours (gateways, store, mcpg-load), as
# a share of all its cores: other jobs on a shared machine
machine() {
    awk -v a="$1" -v b="$2" -v ours="$3" -v lp="$4" -v t="$5" -v hz="$CLK_TCK" -v nc="$(nproc)" 'BEGIN {
        split(a, x, " "); split(b, y, " "); tt = y[2] - x[2]; busy = y[3] - x[3]
        oth = t > 0 ? 100 * ((busy - ours) / hz - lp / 100 * t) / (t * nc) : 0; if (oth < 0) oth = 0
        printf "%.1f %.1f", (tt > 0 ? 100 * (y[1] - x[1]) / tt : 0), oth }'
}

# ---- the gateways ----
manifest() { # STORE SETTINGS OUT
    local src=$ROOT/conf/fleet-redis.json
    [ "$1" != nats ] || src=$ROOT/conf/fleet-nats.json
    jq --arg store "$1" --arg settings "$2" '
        (if $settings == "tuned" then .gateway.server = {unary_json_fast_path: true, access_log: false}
         else .gateway.server = {unary_json_fast_path: false, access_log: true} end)
        | (.modules[] | select(.module == "backend_mock")).inline_dispatch = ($settings == "tuned")
        | (if $store == "memory" then .cluster = {kind: "single_node"} | .modules |= map(select(.name != "cluster"))
           else . end)
        | .gateway.log_level = "warn"
        | .description = "derived by bench/fleet.sh: " + $store + ", " + $settings + " settings"' \
        "$src" >"$3" || die "cannot derive a manifest from $src"
}

gw_cpu_of() { echo "${GW_CPU_LIST[$(( $1 % ${#GW_CPU_LIST[@]} ))]}"; }

start_fleet() { # STORE N SETTINGS
    local store=$1 n=$2 settings=$3 i port
    start_store "$store"
    manifest "$store" "$settings" "$TMP/manifest.json"
    URLS=()
    for i in $(seq 0 $((n - 1))); do
        port=$((PORT_BASE + i))
        MCPG_REDIS_URL=redis://127.0.0.1:$STORE_PORT MCPG_NATS_URL=nats://127.0.0.1:$STORE_PORT \
            MCPG_NATS_BUCKET=fleet start_gateway "gw$i" "$TMP/manifest.json" "$port" "$(gw_cpu_of "$i")"
        GW_PIDS+=("$STARTED_PID")
        URLS+=(--url "http://127.0.0.1:$port/mcp")
    done
}

gw_ticks() { local pid t=0; for pid in "${GW_PIDS[@]}"; do t=$((t + $(ticks_of "$pid" | cut -d' ' -f1))); done; echo $t; }
gw_rss() { # "mean max" resident kB over the gateways
    local pid; for pid in "${GW_PIDS[@]}"; do status_kb "$pid" VmRSS; done |
        awk '{ s += $1; if ($1 > m) m = $1 } END { printf "%.0f %d\n", s / NR, m }'
}
gw_alive() { local pid; for pid in "${GW_PIDS[@]}"; do kill -0 "$pid" 2>/dev/null || die "gateway $pid died"; done; }

# ---- the reference's figures (its published benchmark page; NATS rows are R3, three nodes) ----
reference() { # STORE N SETTINGS WIRE -> "calls/s cpu_us ops" or "- - -"
    case $1:$2:$3:$4 in
    memory:1:default:stateless) echo "4801 338 -" ;; memory:1:default:legacy) echo "3811 432 -" ;;
    memory:1:tuned:stateless) echo "7718 251 -" ;; memory:1:tuned:legacy) echo "7727 258 -" ;;
    nats:1:default:stateless) echo "4695 338 0.04" ;; nats:2:default:stateless) echo "7798 377 0.03" ;;
    nats:4:default:stateless) echo "9773 441 0.02" ;; nats:1:default:legacy) echo "2153 718 7.6" ;;
    nats:2:default:legacy) echo "2756 855 5.8" ;; nats:4:default:legacy-call) echo "2745 952 6.2" ;;
    nats:1:tuned:stateless) echo "7791 256 0.02" ;; nats:2:tuned:stateless) echo "14146 272 0.01" ;;
    nats:4:tuned:stateless) echo "14772 354 0.01" ;; nats:1:tuned:legacy) echo "7537 265 0.02" ;;
    nats:2:tuned:legacy) echo "13772 280 0.02" ;; nats:4:tuned:legacy) echo "14872 350 0.02" ;;
    nats:2:tuned:legacy-call) echo "11949 - -" ;; nats:4:tuned:legacy-call) echo "14114 - -" ;;
    redis:1:default:stateless) echo "4968 335 -" ;; redis:1:default:legacy) echo "2765 681 -" ;;
    redis:4:default:stateless) echo "10090 432 -" ;; redis:4:default:legacy) echo "7796 800 -" ;;
    redis:4:default:legacy-call) echo "6101 835 -" ;; redis:1:tuned:stateless) echo "8388 238 -" ;;
    redis:1:tuned:legacy) echo "8037 248 -" ;; redis:4:tuned:stateless) echo "14816 354 -" ;;
    redis:4:tuned:legacy) echo "14815 353 -" ;; redis:4:tuned:legacy-call) echo "14356 359 -" ;;
    *) echo "- - -" ;;
    esac
}
reference_churn() { # STORE N -> "sessions/s p50_ms p99_ms"
    case $1:$2 in
    memory:1) echo "3291 0.6 1.5" ;; nats:1) echo "311-361 9.5-11.3 207-220" ;; nats:4) echo "362 18 46" ;;
    redis:1) echo "770 4.8 8.3" ;; redis:4) echo "1366 2.2 6.2" ;; *) echo "- - -" ;;
    esac
}

# ---- the rows ----
fleets() { # "store n" lines, in order
    local s n
    for s in $STORES; do
        if [ "$s" = memory ]; then echo "memory 1"; continue; fi
        for n in $GATEWAYS; do echo "$s $n"; done
    done
}

# window WARMUP_S LABEL MCPG-LOAD-ARGS...: a warm-up mcpg-load of WARMUP_S
# (discarded; none when 0), then the measured one with the gateways', the
# store's and the machine's counters read just before and just after it.
# Sets OUT (its JSON line), DG and DS (gateway and store ticks), O0/O1
# (store ops), ST0/ST1 (steal_ticks).
window() {
    local wu=$1 label=$2 rc=0; shift 2
    if [ "$wu" != 0 ]; then
        taskset -c "$LOAD_CPU" "$LOAD" "$@" -w 0 -d "$wu" >/dev/null 2>"$TMP/warmup.err" ||
            { cat "$TMP/warmup.err" >&2; echo "$ME: $label: errors during the warm-up" >&2; FAILED=1; }
    fi
    local g0 s0 g1 s1
    g0=$(gw_ticks); s0=$(store_ticks); O0=$(store_ops); ST0=$(steal_ticks)
    OUT=$(taskset -c "$LOAD_CPU" "$LOAD" "$@" -w 0 -d "$DURATION" --json 2>"$TMP/run.err") || rc=$?
    g1=$(gw_ticks); s1=$(store_ticks); O1=$(store_ops); ST1=$(steal_ticks)
    gw_alive
    [ "$rc" = 0 ] || { cat "$TMP/run.err" >&2; echo "$ME: $label: mcpg-load exited $rc (errors or stuck streams)" >&2; FAILED=1; }
    DG=$((g1 - g0)) DS=$((s1 - s0))
}

# per_round FIELDS...: the figures of the last window as one line of FIELDS
# (mcpg-load's JSON keys, plus cpu = gateway CPU per unit, each = cores per
# gateway, sc = store cores, ops = store ops per unit, steal, others, rss,
# rssmax) with UNIT (ok or sessions_ended) counting the units; N gateways.
per_round() {
    local unit=$1 n=$2; shift 2
    local k v line="" cnt secs lcpu
    cnt=$(json_num "$OUT" "$unit"); secs=$(json_num "$OUT" duration_s); lcpu=$(json_num "$OUT" loadgen_cpu_pct)
    local m rss; m=$(machine "$ST0" "$ST1" $((DG + DS)) "${lcpu:-0}" "${secs:-0}"); rss=$(gw_rss)
    local fig
    fig=$(awk -v g="$DG" -v s="$DS" -v hz="$CLK_TCK" -v ok="${cnt:-0}" -v t="${secs:-0}" -v n="$n" \
        -v o0="$O0" -v o1="$O1" 'BEGIN {
        cpu = ok > 0 ? g * 1e6 / hz / ok : 0
        each = t > 0 ? g / hz / t / n : 0; sc = t > 0 ? s / hz / t : 0
        ops = (o0 == "-" || ok == 0) ? "-" : sprintf("%.3f", (o1 - o0) / ok)
        printf "%.2f %.3f %.3f %s", cpu, each, sc, ops }')
    local cpu each sc ops steal others
    read -r cpu each sc ops <<<"$fig"; read -r steal others <<<"$m"
    for k in "$@"; do
        case $k in
        cpu) v=$cpu ;; each) v=$each ;; sc) v=$sc ;; ops) v=$ops ;; steal) v=$steal ;; others) v=$others ;;
        rss) v=${rss% *} ;; rssmax) v=${rss#* } ;;
        *) v=$(json_num "$OUT" "$k"); v=${v:-0} ;;
        esac
        line+="$v "
    done
    echo "$line"
}

# medians FILE: the median of each column of FILE's lines ("-" stays "-");
# columns named in SUMS (1-based numbers) are summed instead (stuck, errors)
medians() {
    awk -v sums=" ${SUMS:-} " '{ for (i = 1; i <= NF; i++) v[i, NR] = $i; nf = NF }
        END { for (i = 1; i <= nf; i++) {
                if (v[i, 1] == "-") { printf "- "; continue }
                if (index(sums, " " i " ")) { t = 0; for (r = 1; r <= NR; r++) t += v[i, r]; printf "%s ", t; continue }
                for (r = 1; r <= NR; r++) a[r] = v[i, r] + 0
                for (x = 2; x <= NR; x++) { y = a[x]; for (j = x - 1; j >= 1 && a[j] > y; j--) a[j + 1] = a[j]; a[j + 1] = y }
                printf "%s ", (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2) }
              print "" }' "$1"
}
store_ops_kind() { case $1 in nats) echo nats_msgs ;; redis) echo redis_cmds ;; *) echo none ;; esac; }
nul() { [ "$1" = - ] && echo null || echo "$1"; }

SROW="%-7s %3s %-8s %-12s %9.1f %8.0f %8.0f %8.1f %8.2f %11.2f %8s %7s %6.1f %7.1f %5s | %8s %7s %7s\n"
SHDR=$(sed 's/%\([0-9]*\)\.[0-9]f/%\1s/g' <<<"$SROW")"\n"
SUMMARY=()
SCALE_FIELDS=(calls_per_s p50_us p99_us cpu each sc ops rss rssmax steal others loadgen_cpu_pct ok errors ok_sse duration_s)
scale_row() { # STORE N SETTINGS WIRE(stateless|legacy|legacy-call)
    local store=$1 n=$2 settings=$3 wire=$4 flags=() round
    case $wire in
    stateless) flags=(--wire stateless) ;; legacy) flags=(--wire legacy) ;; legacy-call) flags=(--wire legacy --spread call) ;;
    esac
    : >"$TMP/rounds"
    for round in $(seq "$ROUNDS"); do
        # the fleet stays up between rounds: only the first warms it
        window "$( [ "$round" = 1 ] && echo "$WARMUP" || echo 0)" "$store $n $settings $wire round $round" \
            "${URLS[@]}" -c "$CONNECTIONS" --tool echo --message hello --expect "Echo: hello" -q "${flags[@]}"
        per_round ok "$n" "${SCALE_FIELDS[@]}" >>"$TMP/rounds"
    done
    local cps p50 p99 cpu each sc ops rss rssmax steal others lcpu ok errs sse secs
    read -r cps p50 p99 cpu each sc ops rss rssmax steal others lcpu ok errs sse secs < <(SUMS="13 14 15" medians "$TMP/rounds")
    local rcps rcpu rops; read -r rcps rcpu rops < <(reference "$store" "$n" "$settings" "$wire")
    local line ops_txt=$ops
    [ "$ops" = - ] || ops_txt=$(printf '%.2f' "$ops")
    line=$(printf "$SROW" "$store" "$n" "$settings" "$wire" "$cps" "$p50" "$p99" "$cpu" "$each" "$sc" "$ops_txt" \
        "$((rss / 1024))" "$steal" "$others" "$(printf '%.0f' "$lcpu")%" "$rcps" "$rcpu" "$rops")
    SUMMARY+=("$line"); printf '%s\n' "$line"
    [ -z "$JSON_OUT" ] || printf '{"bench":"fleet-scale","store":"%s","replicas":%s,"gateways":%s,"settings":"%s","wire":"%s","spread":"%s","connections":%s,"rounds":%s,"duration_s":%s,"ok":%s,"errors":%s,"calls_per_s":%s,"p50_us":%s,"p99_us":%s,"gw_cpu_us_per_call":%s,"gw_cores_each":%s,"store_cores":%s,"store_ops_per_call":%s,"store_ops":"%s","gw_rss_kb_mean":%s,"gw_rss_kb_max":%s,"steal_pct":%s,"others_pct":%s,"loadgen_cpu_pct":%s,"ok_sse":%s,"gw_cpus":"%s","load_cpu":"%s","store_cpu":"%s"}\n' \
        "$store" "$( [ "$store" = memory ] && echo null || echo 1)" "$n" "$settings" "${wire%-call}" \
        "$( [ "$wire" = legacy-call ] && echo call || echo connection)" "$CONNECTIONS" "$ROUNDS" "$secs" "$ok" \
        "$errs" "$cps" "$p50" "$p99" "$cpu" "$each" "$sc" "$(nul "$ops")" "$(store_ops_kind "$store")" \
        "$rss" "$rssmax" "$steal" "$others" "$lcpu" "$sse" "$GW_CPUS" "$LOAD_CPU" "$STORE_CPU" >>"$JSON_OUT"
}

CROW="%-7s %3s %11.1f %8.2f %8.2f %9s %6s %6s %10.0f %11.2f %8s %6s %6.1f %7.1f | %8s %9s %8s\n"
CHDR=$(sed 's/%\([0-9]*\)\.[0-9]f/%\1s/g' <<<"$CROW")"\n"
CHURN_FIELDS=(sessions_per_s end_p50_us end_p99_us cpu sc ops loadgen_cpu_pct steal others ended_before_answer stuck errors
              sessions_ended duration_s)
churn_row() { # STORE N
    local store=$1 n=$2 round
    : >"$TMP/rounds"
    for round in $(seq "$ROUNDS"); do
        window "$( [ "$round" = 1 ] && echo "$WARMUP" || echo 0)" "churn $store $n round $round" \
            "${URLS[@]}" -c "$CHURN_CLIENTS" --wire legacy --churn --stuck-after "$STUCK_AFTER" -q
        per_round sessions_ended "$n" "${CHURN_FIELDS[@]}" >>"$TMP/rounds"
    done
    local per p50 p99 cpu sc ops lcpu steal others first stuck errs ended secs
    read -r per p50 p99 cpu sc ops lcpu steal others first stuck errs ended secs < <(SUMS="10 11 12 13" medians "$TMP/rounds")
    local rs r50 r99; read -r rs r50 r99 < <(reference_churn "$store" "$n")
    local line ops_txt=$ops
    [ "$ops" = - ] || ops_txt=$(printf '%.1f' "$ops")
    line=$(printf "$CROW" "$store" "$n" "$per" "$(awk -v v="$p50" 'BEGIN { print v / 1000 }')" \
        "$(awk -v v="$p99" 'BEGIN { print v / 1000 }')" "$first" "$stuck" "$errs" "$cpu" "$sc" "$ops_txt" \
        "$(printf '%.0f' "$lcpu")%" "$steal" "$others" "$rs" "$r50" "$r99")
    SUMMARY+=("$line"); printf '%s\n' "$line"
    [ -z "$JSON_OUT" ] || printf '{"bench":"fleet-churn","store":"%s","replicas":%s,"gateways":%s,"clients":%s,"rounds":%s,"duration_s":%s,"sessions_ended":%s,"sessions_per_s":%s,"end_p50_us":%s,"end_p99_us":%s,"ended_before_answer":%s,"stuck":%s,"stuck_after_s":%s,"errors":%s,"gw_cpu_us_per_session":%s,"store_cores":%s,"store_ops_per_session":%s,"store_ops":"%s","loadgen_cpu_pct":%s,"steal_pct":%s,"others_pct":%s,"gw_cpus":"%s","load_cpu":"%s","store_cpu":"%s"}\n' \
        "$store" "$( [ "$store" = memory ] && echo null || echo 1)" "$n" "$CHURN_CLIENTS" "$ROUNDS" "$secs" "$ended" \
        "$per" "$p50" "$p99" "$first" "$stuck" "$STUCK_AFTER" "$errs" "$cpu" "$sc" "$(nul "$ops")" \
        "$(store_ops_kind "$store")" "$lcpu" "$steal" "$others" "$GW_CPUS" "$LOAD_CPU" "$STORE_CPU" >>"$JSON_OUT"
}

FAILED=0
progress "gateways on cores \"$GW_CPUS\" (gateway i on entry i % n), mcpg-load on $LOAD_CPU, the store on $STORE_CPU;" \
    "$(nproc) cores here: $( [ "$(nproc)" -le 2 ] && echo "ratios on a small machine, not capacity" || echo "see --gw-cpus")"
progress "NATS R3 is not run: coordinator_nats refuses replicas 3 on nats-server before 2.9.21 ($("$NATS_SERVER" --version 2>/dev/null || echo "no nats-server") here)"
mapfile -t FLEETS < <(fleets)
if [ "$SCENARIO" = scale ]; then
    total=0
    for f in "${FLEETS[@]}"; do
        for _ in $SETTINGS; do for w in $WIRES; do
            total=$((total + 1)); [ "$w" = legacy ] && [ "${f#* }" -gt 1 ] && total=$((total + 1))
        done; done
    done
    row=0
    printf "$SHDR" store gws settings wire calls/s p50_us p99_us cpu_us/c cores/gw store_cores ops/call rss_MiB steal% others% load% \
        ref_c/s ref_cpu ref_ops
    for f in "${FLEETS[@]}"; do
        read -r store n <<<"$f"
        for settings in $SETTINGS; do
            start_fleet "$store" "$n" "$settings"
            for w in $WIRES; do
                rows=("$w"); [ "$w" = legacy ] && [ "$n" -gt 1 ] && rows+=(legacy-call)
                for r in "${rows[@]}"; do
                    row=$((row + 1))
                    progress "row $row/$total: $store, $n gateway(s), $settings, $r (warm-up ${WARMUP} s, then ${ROUNDS} rounds of ${DURATION} s)"
                    scale_row "$store" "$n" "$settings" "$r"
                done
            done
            stop_fleet; stop_store
        done
    done
    echo
    echo "fleet scale: medians of ${ROUNDS} rounds of ${DURATION} s per row, $CONNECTIONS connections over the gateways; ops/call: NATS messages (in+out) or Redis commands; ref: the reference product (NATS R3, 2 cores per gateway)"
    printf "$SHDR" store gws settings wire calls/s p50_us p99_us cpu_us/c cores/gw store_cores ops/call rss_MiB steal% others% load% \
        ref_c/s ref_cpu ref_ops
else
    total=${#FLEETS[@]} row=0
    printf "$CHDR" store gws sessions/s p50_ms p99_ms ended_1st stuck errors cpu_us/ses store_cores ops/ses load% steal% others% \
        ref_s/s ref_p50 ref_p99
    for f in "${FLEETS[@]}"; do
        read -r store n <<<"$f"
        row=$((row + 1))
        progress "churn $row/$total: $store, $n gateway(s), $CHURN_CLIENTS clients (warm-up ${WARMUP} s, then ${ROUNDS} rounds of ${DURATION} s)"
        start_fleet "$store" "$n" default
        churn_row "$store" "$n"
        stop_fleet; stop_store
    done
    echo
    echo "fleet churn: $CHURN_CLIENTS clients, medians of ${ROUNDS} rounds of ${DURATION} s per row (stuck, errors: sums); stream end after the DELETE's answer (ended_1st: streams that ended before it); cpu_us/ses: gateway CPU per session; ops/ses: store ops per session; load%: the driver's own CPU"
    printf "$CHDR" store gws sessions/s p50_ms p99_ms ended_1st stuck errors cpu_us/ses store_cores ops/ses load% steal% others% \
        ref_s/s ref_p50 ref_p99
fi
printf '%s\n' "${SUMMARY[@]}"
exit "$FAILED"
