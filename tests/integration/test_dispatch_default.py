#!/usr/bin/python3
"""Where a backend's calls run by default. backend_mock declares that its call ops
never block (MCPG_MOD_NEVER_BLOCKS), so with conf/bench.json's shape (its entry has no
"inline_dispatch" key) a tools/call runs on the loop: while a call waits on the mock's
latency, the worker pool holds no job (mcpg_pool_jobs in GET /metrics). With
"inline_dispatch": false the same call is a pool job while it waits; with true it is
on the loop again. `mcpg --help-module` and `mcpg modules --json` say which default a
module has."""
import json
import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway import (Conn, Context, Gateway, call_tool, check, check_eq,  # noqa: E402
                     expect_result, parse_args, pool_metrics, run_cli, run_tests, tool_call_request,
                     wait_for)

LATENCY_MS = 5000  # long enough to be seen waiting, short enough to wait out


def bench_manifest(ctx, name, inline=None):
    """conf/bench.json with the test's audit file, a slow echo beside its echo, the
    mock's call counters, and a metrics exporter for the pool's jobs."""
    with open(os.path.join(ctx.source, "conf", "bench.json")) as f:
        m = json.load(f)
    mock = m["modules"][0]
    check_eq(mock["module"], "backend_mock", "conf/bench.json's first module")
    check("inline_dispatch" not in mock, "conf/bench.json sets no inline_dispatch")
    mock["config"]["tools"].append({"name": "slow", "latency_ms": LATENCY_MS})
    mock["config"]["stats_tool"] = True
    if inline is not None:
        mock["inline_dispatch"] = inline
    m["modules"][1]["config"]["path"] = ctx.path(name + ".audit.jsonl")
    m["modules"].append({"name": "prom", "module": "metrics_prometheus",
                         "config": {"process": False}})
    return m


def mock_in_flight(port, id):
    """The slow tool's calls in flight in the mock (its mock_stats tool)."""
    r, rpc = call_tool(port, "mock_stats", {}, id=id)
    stats = json.loads(expect_result(r, rpc, id, "mock_stats")["content"][0]["text"])
    return stats["tools"]["slow"]["in_flight"]


def send_slow(port, out):
    """The slow call on its own connection, from a thread: out["status"] once answered."""
    def run():
        with Conn(port, timeout=LATENCY_MS / 1000.0 + 30) as c:
            c.send(tool_call_request(port, "slow", {"message": "hi"}, id="slow"))
            out["status"] = c.read_response().status
    t = threading.Thread(target=run)
    t.start()
    return t


def pool_jobs_while_waiting(ctx, name, inline):
    """mcpg_pool_jobs seen while the slow call waits in the mock; the call answered."""
    with Gateway(ctx, manifest=bench_manifest(ctx, name, inline), name=name) as gw:
        out = {}
        t = send_slow(gw.port, out)
        wait_for(lambda: mock_in_flight(gw.port, "stats") == 1, 15, "the slow call in the mock")
        jobs = pool_metrics(gw.port)
        t.join(LATENCY_MS / 1000.0 + 30)
        check_eq(out.get("status"), 200, "the slow call's answer")
        return jobs


def main():
    args = parse_args()
    ctx = Context(args)

    def t_no_key_on_loop():
        jobs = pool_jobs_while_waiting(ctx, "nokey", None)
        check_eq((jobs["running"], jobs["queued"]), (0, 0),
                 "pool jobs (running, queued) while a call of a never-blocking backend "
                 "without inline_dispatch waits")

    def t_false_on_pool():
        jobs = pool_jobs_while_waiting(ctx, "false", False)
        check(jobs["running"] >= 1, "a pool job runs while the call of a backend with "
              "\"inline_dispatch\": false waits: %r" % jobs)

    def t_true_on_loop():
        jobs = pool_jobs_while_waiting(ctx, "true", True)
        check_eq((jobs["running"], jobs["queued"]), (0, 0), "pool jobs with inline_dispatch true")

    def t_help_says_so():
        rc, out, _ = run_cli(ctx, ["--help-module", "backend_mock"])
        check_eq(rc, 0, "--help-module backend_mock")
        check("runs on the loop by default (never blocks)" in out, "backend_mock's help: %r" % out)
        rc, out, _ = run_cli(ctx, ["--help-module", "backend_ffi"])
        check("runs on the pool by default" in out, "backend_ffi's help: %r" % out)
        rc, out, _ = run_cli(ctx, ["modules", "--json", "--module-dir", args.modules])
        rows = {r["name"]: r for r in (json.loads(ln) for ln in out.splitlines() if ln.strip())}
        check_eq(rows["backend_mock"].get("dispatch"), "loop", "backend_mock's dispatch")
        check_eq(rows["backend_ffi"].get("dispatch"), "pool", "backend_ffi's dispatch")
        check("dispatch" not in rows["audit_file"], "an audit sink has no dispatch")

    return run_tests([
        ("never blocks, no inline_dispatch key: the call runs on the loop", t_no_key_on_loop),
        ("never blocks, \"inline_dispatch\": false: the call runs on the pool", t_false_on_pool),
        ("never blocks, \"inline_dispatch\": true: on the loop", t_true_on_loop),
        ("--help-module and modules --json name the default", t_help_says_so),
    ], ctx)


if __name__ == "__main__":
    sys.exit(main())
