#!/usr/bin/python3
"""The tool label of mcpg_tool_calls_total is bounded: its values are tool names, and
those come from backends (an upstream MCP server names its tools and renames them
whenever it lists again). With gateway.metrics.max_tools 5 and backend_mock offering 12
tools, GET /metrics shows 5 tools with series of their own, "(other)" and "(unknown)",
and the calls of the other 7 are counted under tool="(other)". A reload that swaps in 12
new names (a rebuilt catalog, as after an upstream's list change) adds none: the names
that have series keep them, every new one is "(other)", and the log said once why. A
reload that changes max_tools is refused (the cells are made at start), naming the key.
kernel_metrics_tools drives 100 000 names through the same path."""
import json
import os
import re
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway import (Context, Conn, Gateway, base_manifest, build_request,  # noqa: E402
                     call_tool, check, check_eq, expect_result, parse_args, run_tests,
                     wait_for)

CAP = 5
SAMPLE = re.compile(r'^mcpg_tool_calls_total\{tool="([^"]*)",outcome="([a-z]+)"\} (\S+)$')


def manifest(first, n, cap=CAP):
    m = base_manifest(tools=[{"name": "t%03d" % i} for i in range(first, first + n)],
                      gateway={"metrics": {"max_tools": cap}})
    m["modules"].append({"name": "prom", "module": "metrics_prometheus"})
    return m


def tool_samples(port):
    """{(tool, outcome): value} of mcpg_tool_calls_total."""
    with Conn(port) as c:
        c.send(build_request(port, "GET", "/metrics"))
        r = c.read_response()
    check_eq(r.status, 200, "GET /metrics")
    out = {}
    for line in r.body.decode().splitlines():
        mt = SAMPLE.match(line)
        if mt:
            out[(mt.group(1), mt.group(2))] = float(mt.group(3))
    return out


def by_tool(samples):
    """{tool: ok count}."""
    return {t: v for (t, o), v in samples.items() if o == "ok"}


def main():
    ctx = Context(parse_args())

    def call_all(port, first, n, id0):
        for i in range(first, first + n):
            r, rpc = call_tool(port, "t%03d" % i, {"message": "x"}, id=id0 + i)
            expect_result(r, rpc, id0 + i, "t%03d" % i)

    def reload(gw, m, refused=False):
        with open(gw.config, "w") as f:
            json.dump(m, f)
        done = "reload refused" if refused else "retired"
        n = gw.stderr().count(done)
        gw.signal(signal.SIGHUP)
        wait_for(lambda: gw.stderr().count(done) > n, 20, "the reload (%r in the log)" % done)

    def t_cap():
        with Gateway(ctx, manifest=manifest(0, 12), name="cap") as gw:
            call_all(gw.port, 0, 12, 1000)
            counts = by_tool(tool_samples(gw.port))
            named = sorted(t for t in counts if not t.startswith("("))
            check_eq(len(named), CAP, "tools with series of their own: %r" % named)
            check_eq(sorted(t for t in counts if t.startswith("(")), ["(other)", "(unknown)"],
                     "the two fixed values")
            check_eq(sum(counts[t] for t in named), CAP, "one call each for the named tools")
            check_eq(counts["(other)"], 12 - CAP, "the other tools' calls")
            check_eq(len(tool_samples(gw.port)), (CAP + 2) * 4,
                     "samples: (cap + 2) tools x 4 outcomes")
            check_eq(gw.stderr().count("gateway.metrics.max_tools"), 1,
                     "the cap was logged once:\n%s" % gw.stderr_tail())

            # 12 new names, twice over: the rebuilt catalogs add no series
            for round_, first in enumerate((100, 200)):
                reload(gw, manifest(first, 12))
                call_all(gw.port, first, 12, 10000 * (round_ + 1))
                counts = by_tool(tool_samples(gw.port))
                check_eq(sorted(t for t in counts if not t.startswith("(")), named,
                         "after a rebuild with new names: the same named tools")
                check_eq(counts["(other)"], 12 - CAP + 12 * (round_ + 1),
                         "every new name's call is (other)")
            check_eq(gw.stderr().count("gateway.metrics.max_tools"), 1,
                     "still logged once, not at each rebuild")

            # the cap is fixed at start
            reload(gw, manifest(200, 12, cap=CAP + 1), refused=True)
            check([ln for ln in gw.stderr().splitlines() if "reload refused" in ln
                   and "gateway.metrics.max_tools: a reload cannot change" in ln],
                  "the refusal names gateway.metrics.max_tools:\n%s" % gw.stderr_tail())
            check_eq(len(tool_samples(gw.port)), (CAP + 2) * 4, "series unchanged")

    return run_tests([("at most max_tools tool names get series; the rest is (other)", t_cap)],
                     ctx)


if __name__ == "__main__":
    sys.exit(main())
