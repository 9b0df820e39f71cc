#!/usr/bin/env bash
# mcpg-fsync-latency BIN DIR: a few real syncs in DIR give both series with
# ordered quantiles and CPU time; it leaves no file behind, refuses a folder
# it cannot write (naming it) and a bad option.
set -euo pipefail
BIN=$1 DIR=$2
failed=0
fail() { echo "FAIL: $*"; failed=1; }

before=$(find "$DIR" -maxdepth 1 -name 'mcpg-fsync-latency.*' | wc -l)
out=$("$BIN" --rounds 20 --json "$DIR")
for s in append overwrite; do
    line=$(grep "\"target\":\"fsync-$s\"" <<<"$out") || { fail "no $s line in: $out"; continue; }
    awk -v l="$line" 'BEGIN {
        n = split(l, kv, /[,{}]/)
        for (i = 1; i <= n; i++) if (split(kv[i], p, ":") == 2) { gsub(/"/, "", p[1]); v[p[1]] = p[2] + 0 }
        ok = v["rounds"] == 20 && v["p50_us"] > 0 && v["p50_us"] <= v["p99_us"] && v["p99_us"] <= v["max_us"] &&
             v["mean_us"] > 0 && v["cpu_us_per_sync"] >= 0
        exit !ok }' || fail "$s figures out of order: $line"
done
after=$(find "$DIR" -maxdepth 1 -name 'mcpg-fsync-latency.*' | wc -l)
[ "$after" = "$before" ] || fail "it left a file in $DIR"

err=$("$BIN" --rounds 2 "$DIR/no-such-folder" 2>&1 >/dev/null) && fail "a missing folder was accepted"
[[ $err == *"$DIR/no-such-folder"* ]] || fail "the error does not name the folder: $err"
"$BIN" --bogus >/dev/null 2>&1 && fail "an unknown option was accepted"
[ "$failed" = 0 ] && echo "fsync latency: all passed"
exit "$failed"
