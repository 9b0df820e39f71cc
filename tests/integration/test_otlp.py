#!/usr/bin/python3
"""Request traces over OTLP/HTTP (telemetry_otlp, docs/observability.md), read by a
collector written for the test in Node.js (tests/otlp/collector.js) that decodes each
POST with the OpenTelemetry project's own protobuf definitions:
a tools/call with the client's traceparent is a server span in the client's trace, its
parent the client's span, with a child span per stage that ran and a client span for
backend_mcp's upstream request whose id is the parent id the upstream received; the
attributes the conventions name; parent-based sampling (ratio 0 traces no root request,
a sampled parent still is, an unsampled one is not and its traceparent goes on
unchanged); one trace across two gateways; a collector answering 503 is tried again
until it takes the batch; a full queue drops new spans and counts them; a collector that is down costs no call and its drops are
counted in /metrics; the JSON encoding, and the caller named only when
include_enduser says so; a legacy session's id on its calls' spans; backend_http's request as a client span (a
configured traceparent header keeps winning)."""
import json
import os
import re
import select
import socket
import subprocess
import sys
import threading
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway import (IO_TIMEOUT, Context, Gateway, _child_setup, base_manifest,  # noqa: E402
                     build_request, check, check_eq, expect_result, fail, free_port,
                     http_get, new_apikey, parse_args, rpc_body, run_cli, run_tests, send_one, stateless_headers,
                     stop_process, wait_for)
from test_backend_mcp import Fake, fake_port, session, wait_tool  # noqa: E402
from test_legacy_wire import answer, request  # noqa: E402
from restlib import RecordingUpstream  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN = "00f067aa0ba902b7"
SERVER, CLIENT, INTERNAL = 2, 3, 1


class Collector:
    """node collector.js: its port, what it decoded."""

    def __init__(self, ctx, source, refuse_first=0):
        folder = os.path.join(source, "tests", "otlp")
        if not os.path.isdir(os.path.join(folder, "node_modules")):
            fail("no %s/node_modules: scripts/install-deps.sh runs npm ci there" % folder)
        self.proc = subprocess.Popen(["node", "collector.js", "--refuse-first", str(refuse_first)],
                                     cwd=folder, stdout=subprocess.PIPE, preexec_fn=_child_setup)
        ready, _, _ = select.select([self.proc.stdout], [], [], IO_TIMEOUT)
        line = self.proc.stdout.readline().decode() if ready else ""
        m = re.match(r"port (\d+)", line)
        if not m:
            self.stop()
            fail("the collector did not say its port: %r" % line)
        self.port = int(m.group(1))
        self.endpoint = "http://127.0.0.1:%d/v1/traces" % self.port

    def state(self):
        with urllib.request.urlopen("http://127.0.0.1:%d/spans" % self.port, timeout=IO_TIMEOUT) as r:
            return json.loads(r.read())

    def spans(self):
        return self.state()["spans"]

    def trace(self, trace_id, n, what):
        """The trace's spans once at least n have come."""
        return wait_for(lambda: (lambda s: s if len(s) >= n else None)(
            [x for x in self.spans() if x["traceId"] == trace_id]), 15, what)

    def stop(self):
        stop_process(self.proc)


class HeldCollector:
    """A collector on a loopback socket that keeps its first POST unanswered until
    release(), then answers every POST 200: the exporter's thread waits on it
    meanwhile, and the queue fills behind it."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.endpoint = "http://127.0.0.1:%d/v1/traces" % self.sock.getsockname()[1]
        self.accepted = threading.Event()
        self.released = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _answer(self, conn):
        with conn:
            conn.settimeout(IO_TIMEOUT)
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            head, body = data.split(b"\r\n\r\n", 1)
            n = int(re.search(rb"(?i)content-length: (\d+)", head).group(1))
            while len(body) < n:
                body += conn.recv(65536)
            self.accepted.set()
            self.released.wait(IO_TIMEOUT)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return  # closed by stop()
            self._answer(conn)

    def release(self):
        self.released.set()

    def stop(self):
        self.released.set()
        self.sock.shutdown(socket.SHUT_RDWR)  # wakes the accept() (close alone does not)
        self.sock.close()
        self.thread.join(IO_TIMEOUT)
        check(not self.thread.is_alive(), "the held collector's thread ended")


def otlp_module(endpoint, **cfg):
    c = {"endpoint": endpoint, "flush_ms": 20, "batch_spans": 64}
    c.update(cfg)
    return {"name": "otel", "module": "telemetry_otlp", "config": c}


def gateway_manifest(ctx, endpoint, upstream_url, **cfg):
    """echo (backend_mock), up_* (backend_mcp at upstream_url), an audit sink, and
    telemetry_otlp exporting to endpoint."""
    m = base_manifest(audit_path=ctx.path(ctx.unique("audit") + ".jsonl"))
    m["modules"].append({"name": "up", "module": "backend_mcp", "config": {"url": upstream_url}})
    m["modules"].append(otlp_module(endpoint, **cfg))
    m["bindings"] = [{"backend": "mock"}, {"backend": "up", "prefix": "up"}]
    return m


def traced_call(port, tool, arguments, id, traceparent=None, tracestate=None, extra=()):
    body = rpc_body("tools/call", {"name": tool, "arguments": arguments}, id=id)
    hdrs = stateless_headers("tools/call", tool) + list(extra)
    if traceparent:
        hdrs.append(("traceparent", traceparent))
    if tracestate:
        hdrs.append(("tracestate", tracestate))
    r = send_one(port, build_request(port, headers=hdrs, body=body))
    return r, r.rpc()


def by_kind(spans, kind):
    return [s for s in spans if s["kind"] == kind]


def upstream_traceparent(fake, message):
    recs = [x for x in fake.records()
            if x.get("msg", {}).get("params", {}).get("arguments", {}).get("message") == message]
    check(recs, "the upstream got the call with message %r" % message)
    return recs[-1]["headers"].get("traceparent"), recs[-1]["headers"].get("tracestate")


def main():
    args = parse_args()
    ctx = Context(args)
    procs = []
    gws = []

    def start(manifest, name):
        g = Gateway(ctx, manifest=manifest, name=name).start()
        gws.append(g)
        return g

    def collector(refuse_first=0):
        c = Collector(ctx, args.source, refuse_first)
        procs.append(c)
        return c

    def http_fake(tag):
        fake = Fake(ctx, tag)
        pf = ctx.path(tag + ".port")
        procs.append(subprocess.Popen([sys.executable] + fake.argv("--http", "0", "--port-file", pf),
                                      preexec_fn=_child_setup))
        return fake, "http://127.0.0.1:%d/mcp" % fake_port(pf)

    def t_client_trace():
        col = collector()
        fake, url = http_fake("up1")
        gw = start(gateway_manifest(ctx, col.endpoint, url), "traced")
        wait_tool(gw.port, "up_echo")
        tp = "00-%s-%s-01" % (TRACE, CLIENT_SPAN)
        r, rpc = traced_call(gw.port, "up_echo", {"message": "m1"}, 7, tp, "vendor=v1")
        expect_result(r, rpc, 7, "up_echo")
        spans = col.trace(TRACE, 5, "the call's server, stage and client spans")
        servers = by_kind(spans, SERVER)
        check_eq(len(servers), 1, "one server span: %r" % spans)
        srv = servers[0]
        check_eq(srv["parentSpanId"], CLIENT_SPAN, "the server span's parent is the client's span")
        check_eq(srv["name"], "tools/call up_echo", "the server span's name")
        check_eq(srv["traceState"], "vendor=v1", "the client's tracestate goes with its trace")
        check_eq(srv["service"], "mcpg", "the resource's service.name")
        check_eq(srv["encoding"], "protobuf", "protobuf by default")
        a = srv["attributes"]
        check_eq(a.get("mcp.method.name"), "tools/call", "mcp.method.name")
        check_eq(a.get("gen_ai.tool.name"), "up_echo", "gen_ai.tool.name")
        check_eq(a.get("jsonrpc.request.id"), "7", "jsonrpc.request.id")
        check_eq(a.get("mcpg.backend"), "up", "the backend instance")
        check("enduser.id" not in a and "rpc.jsonrpc.error_code" not in a,
              "no caller without include_enduser, no error on success: %r" % a)
        stages = {s["name"]: s for s in by_kind(spans, INTERNAL)}
        check_eq(sorted(stages), ["audit allowed", "audit outcome", "backend up"],
                 "a span for each stage that ran")
        for s in stages.values():
            check_eq(s["parentSpanId"], srv["spanId"], "%s is a child of the server span" % s["name"])
            check(int(srv["start"]) <= int(s["start"]) <= int(s["end"]) <= int(srv["end"]),
                  "%s lies within the server span: %r %r" % (s["name"], s, srv))
        order = sorted(stages.values(), key=lambda s: int(s["start"]))
        check_eq([s["name"] for s in order], ["audit allowed", "backend up", "audit outcome"],
                 "the stages in the pipeline's order")
        clients = by_kind(spans, CLIENT)
        check_eq(len(clients), 1, "one client span for the upstream request")
        cl = clients[0]
        check_eq(cl["parentSpanId"], stages["backend up"]["spanId"],
                 "the client span is a child of the backend stage's")
        check_eq(cl["name"], "tools/call echo", "the client span is named for the upstream's tool")
        check_eq(cl["attributes"].get("http.response.status_code"), 200, "the upstream's status")
        got_tp, got_ts = upstream_traceparent(fake, "m1")
        check_eq(got_tp, "00-%s-%s-01" % (TRACE, cl["spanId"]),
                 "the upstream's traceparent names the client span")
        check_eq(got_ts, "vendor=v1", "tracestate goes on to the upstream")
        # an error: the JSON-RPC code as the conventions carry it
        r, rpc = traced_call(gw.port, "nope", {}, 8, "00-%s-%s-01" % ("a" * 32, CLIENT_SPAN))
        check("error" in rpc, "an unknown tool is an error: %r" % rpc)
        err = by_kind(col.trace("a" * 32, 1, "the failed call's spans"), SERVER)[0]
        check_eq(err["attributes"].get("rpc.jsonrpc.error_code"), -32602, "rpc.jsonrpc.error_code")
        check_eq(err["attributes"].get("error.type"), "-32602", "error.type")
        check_eq(err["status"]["code"], 2, "an error's span status")
        # a tool that answers isError: the request succeeded, the tool failed
        r, rpc = traced_call(gw.port, "up_rich", {"is_error": True}, 9,
                             "00-%s-%s-01" % ("b" * 32, CLIENT_SPAN))
        expect_result(r, rpc, 9, "up_rich")
        tool_err = by_kind(col.trace("b" * 32, 1, "the failed tool's spans"), SERVER)[0]
        check_eq(tool_err["attributes"].get("error.type"), "tool_error", "isError: error.type")
        check("rpc.jsonrpc.error_code" not in tool_err["attributes"], "no JSON-RPC error code")
        check_eq(tool_err["status"]["code"], 2, "isError: the span's status is an error")

    def t_sampling():
        col = collector()
        fake, url = http_fake("up2")
        gw = start(gateway_manifest(ctx, col.endpoint, url, sample_ratio=0.0), "ratio0")
        wait_tool(gw.port, "up_echo")
        unsampled = "00-%s-%s-00" % ("b" * 32, CLIENT_SPAN)
        for i, tp in enumerate([None, unsampled]):
            r, rpc = traced_call(gw.port, "up_echo", {"message": "s%d" % i}, 20 + i, tp)
            expect_result(r, rpc, 20 + i, "an untraced call")
        got_tp, _ = upstream_traceparent(fake, "s1")
        check_eq(got_tp, unsampled, "an unsampled parent goes on to the upstream unchanged")
        sampled = "c" * 32
        r, rpc = traced_call(gw.port, "up_echo", {"message": "s2"}, 22,
                             "00-%s-%s-01" % (sampled, CLIENT_SPAN))
        expect_result(r, rpc, 22, "a call with a sampled parent")
        col.trace(sampled, 5, "a sampled parent's spans at ratio 0")
        # one queue, in order: what the earlier calls produced has arrived by now
        ids = sorted({s["attributes"].get("jsonrpc.request.id") for s in by_kind(col.spans(), SERVER)})
        check_eq(ids, ["22"], "only the sampled parent's call was traced")

    def t_two_gateways():
        col = collector()
        b = start({"gateway": {}, "cluster": {"kind": "single_node"},
                   "modules": [{"name": "mock", "module": "backend_mock",
                                "config": {"tools": [{"name": "echo"}]}},
                               otlp_module(col.endpoint, service_name="gw-b")],
                   "pipeline": {"identity": [], "policy": [], "limits": [], "audit": []},
                   "bindings": [{"backend": "mock"}]}, "gw-b")
        a = start(gateway_manifest(ctx, col.endpoint, "http://127.0.0.1:%d/mcp" % b.port,
                                   service_name="gw-a"), "gw-a")
        wait_tool(a.port, "up_echo")
        trace = "d" * 32
        r, rpc = traced_call(a.port, "up_echo", {"message": "hop"}, 30,
                             "00-%s-%s-01" % (trace, CLIENT_SPAN))
        expect_result(r, rpc, 30, "a call through two gateways")
        spans = col.trace(trace, 7, "both gateways' spans in one trace")
        a_client = [s for s in by_kind(spans, CLIENT) if s["service"] == "gw-a"]
        b_server = [s for s in by_kind(spans, SERVER) if s["service"] == "gw-b"]
        check(len(a_client) == 1 and len(b_server) == 1, "A's client span, B's server span: %r" % spans)
        check_eq(b_server[0]["parentSpanId"], a_client[0]["spanId"],
                 "B's server span is a child of A's client span")
        check_eq(b_server[0]["name"], "tools/call echo", "B serves the upstream's own name")

    def series(port, pattern):
        st, _, body = http_get(port, "/metrics")
        check_eq(st, 200, "GET /metrics")
        m = re.search(r"^%s (\d+)$" % pattern, body.decode(), re.M)
        return int(m.group(1)) if m else 0

    def dropped(port, reason):
        return series(port, r'mcpg_otlp_spans_dropped_total\{reason="%s"\}' % reason)

    def exported_with_metrics(endpoint, **cfg):
        m = base_manifest()
        m["modules"].append(otlp_module(endpoint, **cfg))
        m["modules"].append({"name": "metrics", "module": "metrics_prometheus"})
        return m

    def t_retries():
        col = collector(refuse_first=2)
        gw = start(exported_with_metrics(col.endpoint, max_attempts=3, backoff_ms=10), "retries")
        trace = "f" * 32
        r, rpc = traced_call(gw.port, "echo", {"message": "r"}, 60, "00-%s-%s-01" % (trace, CLIENT_SPAN))
        expect_result(r, rpc, 60, "a call while the collector answers 503")
        col.trace(trace, 2, "the spans, on the third attempt")
        check_eq(col.state()["refused"], 2, "two attempts were answered 503")
        wait_for(lambda: series(gw.port, "mcpg_otlp_spans_exported_total") == 2, 15,
                 "the two spans counted as exported")
        check_eq(dropped(gw.port, "export_failed"), 0, "nothing dropped")

    def t_one_connection():
        """POST after POST on one connection to the collector, while it keeps it open."""
        col = collector()
        gw = start(exported_with_metrics(col.endpoint), "keepalive")
        for i in range(5):
            trace = ("%x" % (i + 1)) * 32
            r, rpc = traced_call(gw.port, "echo", {"message": "k"}, 70 + i,
                                 "00-%s-%s-01" % (trace, CLIENT_SPAN))
            expect_result(r, rpc, 70 + i, "a traced call")
            col.trace(trace, 2, "the call's spans, a POST of their own")
        st = col.state()
        check(st["posts"] >= 5, "a POST a call: %r" % st["posts"])
        check_eq(st["postConnections"], 1, "every POST on one connection")

    def t_queue_full():
        held = HeldCollector()
        procs.append(held)
        gw = start(exported_with_metrics(held.endpoint, queue_spans=2, batch_spans=1,
                                         timeout_ms=30000), "full")
        # each call is two spans (the server's, the backend's); the first POST is held
        r, rpc = traced_call(gw.port, "echo", {"message": "q"}, 80)
        expect_result(r, rpc, 80, "the first call")
        check(held.accepted.wait(IO_TIMEOUT), "the exporter's first POST reached the collector")
        for i in (81, 82):  # one span still queued: room for one more, then none
            r, rpc = traced_call(gw.port, "echo", {"message": "q"}, i)
            expect_result(r, rpc, i, "a call while the exporter waits (its spans dropped)")
        check_eq(dropped(gw.port, "queue_full"), 3, "the spans the full queue turned away")
        check_eq(series(gw.port, "mcpg_otlp_spans_exported_total"), 0, "nothing taken yet")
        held.release()
        wait_for(lambda: series(gw.port, "mcpg_otlp_spans_exported_total") == 3, 15,
                 "the held span and the two queued ones exported once the collector answers")

    def t_collector_down():
        closed = "http://127.0.0.1:%d/v1/traces" % free_port()  # nothing listens there
        gw = start(exported_with_metrics(closed, max_attempts=2, backoff_ms=10), "down")
        for i in range(5):
            r, rpc = traced_call(gw.port, "echo", {"message": "x"}, 40 + i)
            expect_result(r, rpc, 40 + i, "a call while the collector is down")
        # each call: its server span and its backend's stage span
        wait_for(lambda: dropped(gw.port, "export_failed") >= 10, 15,
                 "the five calls' ten spans counted as dropped in /metrics")
        check_eq(dropped(gw.port, "queue_full"), 0, "the queue had room")

    def t_json_enduser():
        col = collector()
        key = new_apikey(ctx, "alice", "--tenant", "acme")
        m = base_manifest()
        m["modules"].append({"name": "keys", "module": "identity_apikey",
                             "config": {"keys_file": ctx.path("keys.json")}})
        m["modules"].append(otlp_module(col.endpoint, encoding="json", service_name="gw-json",
                                        include_enduser=True))
        m["modules"].append({"name": "rules", "module": "policy_rules", "config": {
            "rules": [{"id": "acme", "tenant": "acme", "tools": "*"}]}})
        m["modules"].append({"name": "caps", "module": "limits", "config": {"limits": [
            {"name": "echo", "match": {"tools": "echo"}, "key": ["tool"], "scope": "local",
             "concurrency": 8}]}})
        m["pipeline"]["identity"] = ["keys"]
        m["pipeline"]["policy"] = ["rules"]
        m["pipeline"]["limits"] = ["caps"]
        gw = start(m, "json")
        trace = "e" * 32
        r, rpc = traced_call(gw.port, "echo", {"message": "j"}, 50, "00-%s-%s-01" % (trace, CLIENT_SPAN),
                             extra=[("X-API-Key", key)])
        expect_result(r, rpc, 50, "a call exported as JSON")
        spans = col.trace(trace, 5, "the JSON-encoded spans")
        srv = by_kind(spans, SERVER)[0]
        check_eq(srv["encoding"], "json", "the body was OTLP/JSON")
        check_eq(srv["parentSpanId"], CLIENT_SPAN, "ids in hex")
        check_eq(srv["attributes"].get("gen_ai.tool.name"), "echo", "attributes")
        check_eq(srv["service"], "gw-json", "service_name")
        check_eq(srv["attributes"].get("enduser.id"), "alice", "include_enduser: the principal")
        check_eq(srv["attributes"].get("mcpg.tenant.id"), "acme", "include_enduser: the tenant")
        stages = sorted(by_kind(spans, INTERNAL), key=lambda s: int(s["start"]))
        check_eq([s["name"] for s in stages], ["identity", "policy", "limits", "backend mock"],
                 "identity, policy, limits and the backend ran, in order (no audit sink here)")

    def t_check_errors():
        m = base_manifest()
        m["modules"].append(otlp_module("https://collector.example/v1/traces"))
        rc, out, err = run_cli(ctx, ["--check", "--config", ctx.write_manifest(m)])
        check(rc != 0 and "modules[1].config.endpoint" in out + err
              and "https is not supported" in out + err,
              "an https endpoint is refused naming the key: %r" % (out + err))
        m = base_manifest()
        m["modules"] += [otlp_module("http://127.0.0.1:1/v1/traces"),
                         dict(otlp_module("http://127.0.0.1:1/v1/traces"), name="otel2")]
        rc, out, err = run_cli(ctx, ["--check", "--config", ctx.write_manifest(m)])
        check(rc != 0 and "modules[2].module" in out + err
              and "second telemetry instance" in out + err,
              "a second telemetry instance is refused naming its entry: %r" % (out + err))

    def t_legacy_session():
        col = collector()
        m = base_manifest()
        m["modules"].append(otlp_module(col.endpoint))
        gw = start(m, "legacy")
        sid = session(gw.port)
        r = request(gw.port, body={"jsonrpc": "2.0", "id": 70, "method": "tools/call",
                                   "params": {"name": "echo", "arguments": {"message": "l"}}},
                    session=sid)
        check_eq(answer(r)["result"]["content"][0]["text"], "Echo: l", "a call on a session")
        srv = wait_for(lambda: [s for s in by_kind(col.spans(), SERVER)
                                if s["attributes"].get("jsonrpc.request.id") == "70"], 15,
                       "the session call's server span")[0]
        check_eq(srv["parentSpanId"], "", "no traceparent: the root of a new trace")
        check_eq(srv["attributes"].get("mcp.session.id"), sid, "mcp.session.id")
        names = sorted({s["name"] for s in by_kind(col.spans(), SERVER)})
        check_eq(names, ["initialize", "tools/call echo"],
                 "MCP requests only: the transport's own session checks make no span")

    def t_backend_http():
        col = collector()
        rest = RecordingUpstream()
        procs.append(rest)
        base = "http://127.0.0.1:%d" % rest.port
        m = base_manifest()
        m["modules"].append({"name": "rest", "module": "backend_http", "config": {"tools": [
            {"name": "item", "method": "GET", "url": base + "/item"},
            {"name": "pinned", "method": "GET", "url": base + "/pinned",
             "headers": {"traceparent": "00-%s-%s-01" % ("1" * 32, "2" * 16)}}]}})
        m["modules"].append(otlp_module(col.endpoint))
        m["bindings"] = [{"backend": "mock"}, {"backend": "rest"}]
        gw = start(m, "rest")
        trace = "9" * 32
        for i, tool in enumerate(["item", "pinned"]):
            r, rpc = traced_call(gw.port, tool, {}, 90 + i, "00-%s-%s-01" % (trace, CLIENT_SPAN))
            expect_result(r, rpc, 90 + i, tool)
        spans = col.trace(trace, 5, "both REST calls' spans")
        got = {x["target"]: dict((k.lower(), v) for k, v in x["headers"]) for x in rest.since(0)}
        clients = {s["parentSpanId"]: s for s in by_kind(spans, CLIENT)}
        stage = [s for s in by_kind(spans, INTERNAL) if s["name"] == "backend rest"]
        check_eq(len(stage), 2, "a backend stage span for each call")
        item = [clients[s["spanId"]] for s in stage if s["spanId"] in clients]
        check(item, "a client span under a backend stage: %r" % spans)
        check_eq(item[0]["name"], "GET", "named for the HTTP method")
        check_eq(item[0]["attributes"].get("http.response.status_code"), 200, "the status")
        check_eq(got["/item"].get("traceparent"), "00-%s-%s-01" % (trace, item[0]["spanId"]),
                 "the REST request names the client span")
        check_eq(got["/pinned"].get("traceparent"), "00-%s-%s-01" % ("1" * 32, "2" * 16),
                 "a configured traceparent header still wins")

    def stopping_all(fn):
        """fn, then every process it started stopped by pid: gateways first (their
        exporters flush at stop), then collectors and upstreams."""
        def run():
            try:
                fn()
            finally:
                while gws:
                    gws.pop().stop()
                while procs:
                    p = procs.pop()
                    if isinstance(p, RecordingUpstream):
                        p.close()
                    elif isinstance(p, (Collector, HeldCollector)):
                        p.stop()
                    else:
                        stop_process(p)
        return run

    tests = [("--check: the endpoint, one telemetry instance", t_check_errors),
             ("client trace, stages, upstream span", t_client_trace),
             ("parent-based sampling", t_sampling),
             ("one trace across two gateways", t_two_gateways),
             ("503, then the collector takes the batch", t_retries),
             ("one kept connection to the collector", t_one_connection),
             ("a full queue drops new spans", t_queue_full),
             ("collector down", t_collector_down),
             ("JSON encoding, the caller named", t_json_enduser),
             ("a legacy session's call", t_legacy_session),
             ("backend_http's request as a client span", t_backend_http)]
    return run_tests([(name, stopping_all(fn)) for name, fn in tests], ctx)


if __name__ == "__main__":
    sys.exit(main())
