#!/usr/bin/python3
"""Signals and how the manifest is found:
  * SIGINT, like SIGTERM, exits 0;
  * SIGTERM with calls in flight (backend_mock latency_ms 300): every one of them
    gets its complete answer, then exit 0, and the audit file has their
    completed events;
  * MCPG_CONFIG names the manifest instead of --config;
  * ${VAR} and ${VAR:-default} expansion (the listen ports come from the
    environment)."""
import json
import os
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway import (Conn, Context, Gateway, base_manifest, call_tool, check,  # noqa: E402
                     check_eq, expect_result, free_port, http_get, parse_args, read_audit,
                     audit_id, audit_name, run_tests, tool_call_request, wait_for)

ECHO = {"content": [{"type": "text", "text": "Echo: hi"}], "resultType": "complete"}
LATENCY_MS = 300
IN_FLIGHT = 4


def main():
    args = parse_args()
    ctx = Context(args)

    def t_drain():
        audit = ctx.path("drain-audit.jsonl")
        m = base_manifest(audit_path=audit, tools=[{"name": "echo", "latency_ms": LATENCY_MS}],
                          gateway={"pool": {"threads": 8, "queue": 64}})
        gw = Gateway(ctx, manifest=m, name="drain")
        with gw:  # stops the gateway by pid if anything below fails early
            drain(gw, audit)

    def drain(gw, audit):
        ids = ["drain-%d" % i for i in range(IN_FLIGHT)]
        results = {}
        errors = {}

        def client(rpc_id):
            try:
                with Conn(gw.port) as c:
                    c.send(tool_call_request(gw.port, "echo", {"message": "hi"}, id=rpc_id))
                    r = c.read_response()
                    results[rpc_id] = expect_result(r, r.rpc(), rpc_id, "call %s" % rpc_id)
            except Exception as e:  # reported below
                errors[rpc_id] = repr(e)

        threads = [threading.Thread(target=client, args=(i,)) for i in ids]
        try:
            for t in threads:
                t.start()

            def names(name):
                return [audit_id(r) for r in read_audit(audit) if audit_name(r) == name]

            # In flight = audited as allowed (that happens before the backend runs).
            wait_for(lambda: all(i in names("mcpg.tool.call.allowed") for i in ids), 10,
                     "%d calls to be allowed" % IN_FLIGHT)
            done_before = [i for i in ids if i in names("mcpg.tool.call.completed")]
            gw.signal(signal.SIGTERM)
            t_sig = time.monotonic()
            check(not done_before,
                  "calls %r had completed before SIGTERM: latency_ms not applied?" % done_before)
        finally:
            for t in threads:
                t.join(30)
        check(not any(t.is_alive() for t in threads), "a client is still waiting")
        rc = gw.wait_exit()
        waited = time.monotonic() - t_sig
        gw.check_sanitizers()
        check_eq(errors, {}, "client errors during the drain")
        for i in ids:
            check_eq(results.get(i), ECHO, "answer to %s" % i)
        check_eq(rc, 0, "exit code after SIGTERM with calls in flight\n" + gw.stderr_tail())
        completed = [audit_id(r) for r in read_audit(audit)
                     if audit_name(r) == "mcpg.tool.call.completed"]
        for i in ids:
            check_eq(completed.count(i), 1, "completed events for %s" % i)
        print("drained %d calls, exit %.2fs after SIGTERM" % (IN_FLIGHT, waited))

    def t_sigint():
        gw = Gateway(ctx, manifest=base_manifest(), name="sigint")
        with gw:
            r, rpc = call_tool(gw.port, "echo", {"message": "hi"}, id=1)
            check_eq(expect_result(r, rpc, 1, "call before SIGINT"), ECHO, "result")
            gw.signal(signal.SIGINT)
            rc = gw.wait_exit()
            gw.check_sanitizers()
            check_eq(rc, 0, "exit code after SIGINT\n" + gw.stderr_tail())

    def t_env_config():
        gw = Gateway(ctx, manifest=base_manifest(), use_env_config=True, name="envconfig")
        with gw:
            r, rpc = call_tool(gw.port, "echo", {"message": "hi"}, id=1)
            check_eq(expect_result(r, rpc, 1, "call with MCPG_CONFIG"), ECHO, "result")

    def t_env_expansion():
        port_a, port_b = free_port(), free_port()
        while port_b == port_a:
            port_b = free_port()
        m = base_manifest()
        m["gateway"]["listen"] = ["127.0.0.1:${MCPG_TEST_PORT_A:-notaport}",
                                  "127.0.0.1:${MCPG_TEST_PORT_B_UNSET:-%d}" % port_b]
        text = json.dumps(m, indent=2)
        env = {"MCPG_TEST_PORT_A": str(port_a)}
        os.environ.pop("MCPG_TEST_PORT_B_UNSET", None)
        gw = Gateway(ctx, manifest=text, listen=False, health_port=port_a, env=env,
                     name="envexpand")
        with gw:
            st, _, _ = http_get(port_b, "/healthz")
            check_eq(st, 200, "GET /healthz on the ${VAR:-default} listener %d" % port_b)
            for port in (port_a, port_b):
                r, rpc = call_tool(port, "echo", {"message": "hi"}, id=port)
                check_eq(expect_result(r, rpc, port, "call on port %d" % port), ECHO, "result")

    tests = [
        ("SIGTERM drains in-flight calls, exit 0, audited", t_drain),
        ("SIGINT -> exit 0", t_sigint),
        ("MCPG_CONFIG instead of --config", t_env_config),
        ("${VAR} and ${VAR:-default} in the manifest", t_env_expansion),
    ]
    return run_tests(tests, ctx)


if __name__ == "__main__":
    sys.exit(main())
