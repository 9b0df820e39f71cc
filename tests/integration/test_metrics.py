#!/usr/bin/python3
"""GET /metrics on the real gateway, with metrics_prometheus: calls of a few tools on the
stateless (2026-07-28) wire and on legacy (2025-11-25) sessions, then the exposition
parsed: mcpg_calls_total by method, wire and outcome and mcpg_tool_calls_total by tool
and outcome equal what was sent (a call the limits stage refused counted as denied, an
unknown tool as an error), both latency histograms count every call that had one, the
audit sink's series count its events, the coordinator's count the session's ops; a reload that carries the instances over keeps
every counter and is counted, one that replaces the audit instance starts its series at
0, a refused one is counted as refused; worker, pool and control threads are named by
role, each role's CPU time in the exposition; the route's 405, 403 and HEAD; no metrics instance, no /metrics (404); two metrics
instances refused by --check; --help-module metrics_prometheus."""
import json
import os
import re
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "reload"))
from gateway import (Context, Conn, Gateway, base_manifest, build_request,  # noqa: E402
                     call_tool, check, check_eq, parse_args, run_cli, run_tests,
                     stateless_request, send_one, wait_for)
from test_legacy_wire import answer, initialize, request, rpc  # noqa: E402
from test_reload import TOKEN, post_reload, reload_ok  # noqa: E402

ctx = Context(parse_args())
WORKERS = 2
POOL_THREADS = 4
SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)",?')


def manifest(queue_max=65536, metrics=True):
    m = base_manifest(audit_path=ctx.path("audit.jsonl"),
                      tools=[{"name": "echo"}, {"name": "other"}, {"name": "limited"}],
                      gateway={"workers": WORKERS, "pool": {"threads": POOL_THREADS}},
                      server={"admin_token_env": "MCPG_TEST_ADMIN"})
    m["modules"][-1]["config"]["queue_max"] = queue_max
    m["modules"].append({"name": "limits", "module": "limits", "config": {"limits": [
        {"name": "two", "match": {"tools": "limited"}, "budget": {"calls": 2}}]}})
    m["pipeline"]["limits"] = ["limits"]
    if metrics:
        m["modules"].append({"name": "prom", "module": "metrics_prometheus"})
    return m


def write_manifest(m):
    path = ctx.path("metrics.json")
    ctx.write_manifest(m, "metrics.json.tmp")
    os.replace(path + ".tmp", path)
    return path


def scrape(port):
    """{(name, ((label, value), ...)): float} and the response."""
    with Conn(port) as c:
        c.send(build_request(port, "GET", "/metrics"))
        r = c.read_response()
    check_eq(r.status, 200, "GET /metrics (%r)" % r.body[:200])
    samples, types = {}, {}
    for line in r.body.decode().splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            check(name not in types, "one # TYPE line for %s" % name)
            types[name] = kind
            continue
        if not line or line.startswith("#"):
            continue
        mt = SAMPLE.match(line)
        check(mt, "a sample line: %r" % line)
        labels = tuple((k, v.replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\"))
                       for k, v in LABEL.findall(mt.group(3) or ""))
        key = (mt.group(1), labels)
        check(key not in samples, "one sample for %r" % (key,))
        samples[key] = float(mt.group(4))
    return samples, types, r


def value(samples, name, **labels):
    want = set(labels.items())
    got = [v for (n, ls), v in samples.items() if n == name and want <= set(ls)]
    check(got, "no sample %s%r" % (name, labels))
    return sum(got)


def calls(samples, **labels):
    return value(samples, "mcpg_calls_total", **labels)


def check_histogram(samples, name):
    """Cumulative buckets, +Inf equal to _count; the count."""
    buckets = sorted(((float(dict(ls)["le"]), v) for (n, ls), v in samples.items()
                      if n == name + "_bucket"), key=lambda b: b[0])
    check(buckets and buckets[-1][0] == float("inf"), "%s has a +Inf bucket" % name)
    counts = [v for _, v in buckets]
    check(counts == sorted(counts), "%s buckets are cumulative: %r" % (name, counts))
    count = value(samples, name + "_count")
    check_eq(counts[-1], count, name + ": +Inf bucket == _count")
    return count


def stateless_call(port, tool, id):
    r, msg = call_tool(port, tool, {"message": "m%d" % id}, id=id)
    return r, msg


def send_traffic(port):
    """What the calls were: {(method, wire, outcome): n} and {(tool, outcome): n}."""
    for i in range(5):
        r, msg = stateless_call(port, "echo", 100 + i)
        check("result" in msg, "echo: %r" % msg)
    for i in range(3):
        stateless_call(port, "other", 200 + i)
    for i in range(4):  # a budget of 2: the last two are refused by the limits stage
        r, msg = stateless_call(port, "limited", 300 + i)
        check(("result" in msg) == (i < 2), "limited call %d: %r" % (i, msg))
    r, msg = stateless_call(port, "nosuch", 400)
    check("error" in msg, "an unknown tool is an error: %r" % msg)
    for i in range(2):
        r = send_one(port, stateless_request(port, "tools/list", id=500 + i))
        check_eq(r.status, 200, "tools/list")
    _, sid = initialize(port)
    for i in range(4):
        r = request(port, body=rpc("tools/call", {"name": "echo", "arguments": {"message": "s"}},
                                   id=600 + i), session=sid)
        check("result" in answer(r), "legacy echo: %r" % r.body[:200])
    r = request(port, body=rpc("tools/list", id=700), session=sid)
    check("result" in answer(r), "legacy tools/list")
    by_call = {("tools/call", "stateless", "ok"): 10, ("tools/call", "stateless", "denied"): 2,
               ("tools/call", "stateless", "error"): 1, ("tools/list", "stateless", "ok"): 2,
               ("tools/call", "legacy", "ok"): 4, ("tools/list", "legacy", "ok"): 1}
    by_tool = {("echo", "ok"): 9, ("other", "ok"): 3, ("limited", "ok"): 2,
               ("limited", "denied"): 2, ("(unknown)", "error"): 1}
    return by_call, by_tool


def check_counts(samples, by_call, by_tool):
    for (method, wire, outcome), n in by_call.items():
        check_eq(calls(samples, method=method, wire=wire, outcome=outcome), n,
                 "calls %s %s %s" % (method, wire, outcome))
    total = sum(by_call.values())
    check_eq(calls(samples), total, "every call counted once, in one series")
    for (tool, outcome), n in by_tool.items():
        check_eq(value(samples, "mcpg_tool_calls_total", tool=tool, outcome=outcome), n,
                 "tool calls %s %s" % (tool, outcome))
    check_eq(value(samples, "mcpg_tool_calls_total"), sum(by_tool.values()), "tool calls in all")
    check_eq(check_histogram(samples, "mcpg_call_overhead_seconds"), total,
             "overhead observed for every call")
    admitted = sum(n for (t, o), n in by_tool.items() if o == "ok")
    check_eq(check_histogram(samples, "mcpg_backend_seconds"), admitted,
             "backend time observed for every call a backend answered")
    check(value(samples, "mcpg_call_overhead_seconds_sum") > 0, "overhead is not 0")


def check_coordinator(samples):
    """The legacy session went through the coordinator: its ops counted, each (but
    subscribe, which has no callback) with its latency."""
    check(value(samples, "mcpg_coordinator_ops_total", coordinator="cluster", op="put_if_absent",
                status="ok") >= 1, "the session's record made in the coordinator")
    ops = sum(v for (n, ls), v in samples.items() if n == "mcpg_coordinator_ops_total"
              and dict(ls)["op"] != "subscribe")
    check_eq(value(samples, "mcpg_coordinator_op_seconds_count", coordinator="cluster"), ops,
             "a latency for every coordinator op")
    check(value(samples, "mcpg_coordinator_store", coordinator="cluster", what="keys") >= 1,
          "the store holds the session")


# allowed + completed for each admitted call, denied for each refused one
def audit_events(by_tool):
    admitted = sum(n for (t, o), n in by_tool.items() if o == "ok")
    return 2 * admitted + sum(n for (t, o), n in by_tool.items() if o == "denied")


def audit_written(port, n):
    """The audit sink's counters, once its writer has counted n events."""
    return wait_for(lambda: (lambda s: s if value(s, "mcpg_audit_events_total", sink="audit") == n
                             else None)(scrape(port)[0]), 10, "%d audit events counted" % n)


def t_counts_and_threads():
    path = write_manifest(manifest())
    with Gateway(ctx, config=path, env={"MCPG_TEST_ADMIN": TOKEN}) as gw:
        samples, types, r = scrape(gw.port)
        check_eq(r.header("content-type"), "text/plain; version=0.0.4; charset=utf-8",
                 "Content-Type")
        check_eq(calls(samples), 0, "no call yet")
        by_call, by_tool = send_traffic(gw.port)
        events = audit_events(by_tool)
        samples = audit_written(gw.port, events)
        check_counts(samples, by_call, by_tool)
        check_eq(types.get("mcpg_calls_total"), "counter", "# TYPE of mcpg_calls_total")
        check_eq(types.get("mcpg_call_overhead_seconds"), "histogram", "# TYPE of overhead")
        check_eq(value(samples, "mcpg_calls_in_flight"), 0, "nothing in flight")
        check_eq(value(samples, "mcpg_generation"), 1, "generation")
        check_eq(value(samples, "mcpg_pool_jobs", state="queued"), 0, "pool queue empty")
        check_eq(value(samples, "mcpg_pool_refused_total"), 0, "pool refused nothing")
        check_eq(value(samples, "mcpg_pinned_images"), 0, "nothing pinned")
        check_eq(check_histogram(samples, "mcpg_audit_batch_events"),
                 value(samples, "mcpg_audit_write_seconds_count"), "a write per batch")
        check_eq(value(samples, "mcpg_audit_batch_events_sum"), events, "events over batches")
        check_eq(value(samples, "mcpg_audit_queue_events", sink="audit"), 0, "audit queue empty")
        check_eq(value(samples, "mcpg_audit_refused_total", sink="audit"), 0, "audit refused none")
        check_coordinator(samples)
        names = []
        for tid in os.listdir("/proc/%d/task" % gw.proc.pid):
            with open("/proc/%d/task/%s/comm" % (gw.proc.pid, tid)) as f:
                names.append(f.read().strip())
        for want in (["mcpg-main", "mcpg-audit"] + ["mcpg-loop-%d" % i for i in range(WORKERS)]
                     + ["mcpg-pool-%d" % i for i in range(POOL_THREADS)]):
            check(want in names, "a thread named %s: %r" % (want, sorted(names)))
            check(value(samples, "mcpg_thread_cpu_seconds_total", thread=want) >= 0,
                  "CPU time of %s in the exposition" % want)
        check(value(samples, "process_open_fds") > 0 and
              value(samples, "process_resident_memory_bytes") > 0, "the process's lines")
        t_reloads(gw, path, by_call, by_tool, events)


def t_reloads(gw, path, by_call, by_tool, events):
    """Carried over: every counter kept; the audit instance replaced: its series from 0;
    a refused reload counted as such."""
    ans = reload_ok(gw.port)
    check("audit" in ans["carried"] and "prom" in ans["carried"], "all carried: %r" % ans)
    samples = scrape(gw.port)[0]
    check_counts(samples, by_call, by_tool)
    check_eq(value(samples, "mcpg_audit_events_total", sink="audit"), events,
             "the carried audit instance's counter kept")
    check_eq(value(samples, "mcpg_reloads_total", result="ok"), 1, "a reload counted")
    check_eq(value(samples, "mcpg_generation"), 2, "generation after the reload")
    write_manifest(manifest(queue_max=1000))
    ans = reload_ok(gw.port)
    check("audit" in ans["started"] and "audit" in ans["stopping"], "audit replaced: %r" % ans)
    samples = scrape(gw.port)[0]
    check_eq(value(samples, "mcpg_audit_events_total", sink="audit"), 0,
             "the new audit instance's series start at 0")
    check_eq(calls(samples), sum(by_call.values()), "the kernel's counters kept")
    r, msg = stateless_call(gw.port, "echo", 800)
    check("result" in msg, "echo after the reload")
    samples = audit_written(gw.port, 2)
    check_eq(calls(samples, method="tools/call", wire="stateless", outcome="ok"), 11,
             "counting goes on")
    with open(path, "w") as f:
        f.write("{ not json")
    r = wait_for(lambda: (lambda a: a if a.status != 409 else None)(post_reload(gw.port)), 20,
                 "the last reload to retire")
    check_eq(r.status, 400, "a broken manifest is refused")
    samples = scrape(gw.port)[0]
    check_eq(value(samples, "mcpg_reloads_total", result="refused"), 1, "a refused reload")
    check_eq(value(samples, "mcpg_reloads_total", result="ok"), 2, "two that served")
    write_manifest(manifest(queue_max=1000))  # the gateway stops on a valid manifest


def t_route():
    with Gateway(ctx, manifest(), env={"MCPG_TEST_ADMIN": TOKEN}) as gw:
        with Conn(gw.port) as c:
            c.send(build_request(gw.port, "POST", "/metrics", body=b"{}"))
            r = c.read_response()
        check_eq(r.status, 405, "POST /metrics")
        check_eq(r.header("allow"), "GET, HEAD", "Allow")
        with Conn(gw.port) as c:
            c.send(b"GET /metrics HTTP/1.1\r\nHost: evil.example\r\n\r\n")
            r = c.read_response()
        check_eq(r.status, 403, "a Host not allowed")
        with Conn(gw.port) as c:
            c.send(build_request(gw.port, "HEAD", "/metrics"))
            r = c.read_response(head_request=True)
        check_eq(r.status, 200, "HEAD /metrics")
        check_eq(r.body, b"", "HEAD: no body")
        check(int(r.header("content-length")) > 0, "HEAD: the GET's length")


def t_no_module():
    with Gateway(ctx, manifest(metrics=False), env={"MCPG_TEST_ADMIN": TOKEN}) as gw:
        with Conn(gw.port) as c:
            c.send(build_request(gw.port, "GET", "/metrics"))
            r = c.read_response()
        check_eq(r.status, 404, "no metrics instance: 404")
        check("no metrics instance" in json.loads(r.body)["error"]["message"], r.body)


def t_check():
    m = manifest()
    m["modules"].append({"name": "prom2", "module": "metrics_prometheus"})
    path = ctx.write_manifest(m)
    rc, out, err = run_cli(ctx, ["--check", "--config", path])
    check_eq(rc, 2, "two metrics instances: exit")
    check("modules[%d].module" % (len(m["modules"]) - 1) in err and "second metrics instance" in err,
          err)
    rc, out, err = run_cli(ctx, ["--check", "--config", ctx.write_manifest(manifest())])
    check_eq(rc, 0, "one metrics instance checks: %s" % err)
    rc, out, err = run_cli(ctx, ["--help-module", "metrics_prometheus"])
    check_eq(rc, 0, "--help-module")
    check("metrics" in out and "Prometheus" in out, out)


def t_transport_gauges():
    """Connections, long-lived streams and sessions open, each up and back down."""
    with Gateway(ctx, config=write_manifest(manifest())) as gw:
        def gauges():
            samples, _, _ = scrape(gw.port)
            return (value(samples, "mcpg_http_connections"), value(samples, "mcpg_http_streams"),
                    value(samples, "mcpg_sessions"))
        # the start's health probe may still be closing (closing connections count):
        # at rest the one open connection is the scrape's own
        seen = {}

        def at_rest():  # the baseline is the scrape that saw it: a next one may meet this one closing
            seen["g"] = gauges()
            return seen["g"][0] == 1
        wait_for(at_rest, 10, "only the scrape's connection open")
        conns0, streams0, sessions0 = seen["g"]
        check_eq((streams0, sessions0), (0, 0), "streams and sessions before any")
        _, sid = initialize(gw.port)
        held = [Conn(gw.port) for _ in range(3)]  # idle keep-alive connections
        stream = Conn(gw.port)
        request(gw.port, method="GET", session=sid, accept="text/event-stream", conn=stream)
        wait_for(lambda: gauges()[1] == 1, 10, "the GET stream counted")
        conns, streams, sessions = gauges()
        check_eq(sessions, 1, "the session counted")
        check(conns >= conns0 + 4, "4 more connections: %d -> %d" % (conns0, conns))
        for c in held + [stream]:
            c.sock.close()
        r = request(gw.port, method="DELETE", session=sid)
        check(r.status in (200, 204), "DELETE: %d" % r.status)
        wait_for(lambda: gauges() == (conns0, 0, 0), 10,
                 "connections, streams and sessions back (%r)" % (gauges(),))


if __name__ == "__main__":
    sys.exit(run_tests([
        ("calls counted by method, tool, outcome and wire; threads named; reloads", t_counts_and_threads),
        ("the transport's gauges: connections, streams, sessions up and back down", t_transport_gauges),
        ("the route: 405, 403 off the allowed hosts, HEAD", t_route),
        ("no metrics instance: 404", t_no_module),
        ("--check and --help-module", t_check),
    ], ctx))
