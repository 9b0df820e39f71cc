#!/usr/bin/python3
"""Signals and how the manifest is found:
  * SIGINT, like SIGTERM, exits 0;
  * SIGTERM with calls in flight (backend_mock latency_ms 3000, on the pool; the
    signal goes once the backend's mock_stats says it holds all of them): every one of
    them gets its complete answer, then exit 0, and the audit file has their
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
from gateway import (START_TIMEOUT, Conn, Context, Gateway, TestFailure, audit_id,  # noqa: E402
                     audit_name, base_manifest, call_tool, check, check_eq, expect_result,
                     fail, free_port, http_get, parse_args, read_audit, run_tests,
                     tool_call_request, wait_for)

ECHO = {"content": [{"type": "text", "text": "Echo: hi"}], "resultType": "complete"}
LATENCY_MS = 3000
IN_FLIGHT = 4


def mock_stats(port, id):
    r, rpc = call_tool(port, "mock_stats", {}, id=id)
    return json.loads(expect_result(r, rpc, id, "mock_stats")["content"][0]["text"])


def main():
    args = parse_args()
    ctx = Context(args)

    def t_drain():
        audit = ctx.path("drain-audit.jsonl")
        m = base_manifest(audit_path=audit, tools=[{"name": "echo", "latency_ms": LATENCY_MS}],
                          mock_config={"stats_tool": True},
                          gateway={"pool": {"threads": 8, "queue": 64}})
        m["modules"][0]["inline_dispatch"] = False  # the calls in flight on the pool
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

            # In flight = in the backend, as the backend itself says (mock_stats runs
            # on a pool thread of its own: 8 threads, 4 calls).
            seen = {}

            def all_in_backend():
                seen.update(mock_stats(gw.port, "stats")["tools"]["echo"])
                return seen["in_flight"] == IN_FLIGHT
            wait_for(all_in_backend, 30, "%d calls in the backend at once" % IN_FLIGHT)
            done_before = [i for i in ids if i in names("mcpg.tool.call.completed")]
            gw.signal(signal.SIGTERM)
            t_sig = time.monotonic()
            # the backend held all of them; each one that had not completed when the
            # signal went is one the drain must finish (all of them, short of a stall
            # of latency_ms between these two lines)
            check(len(done_before) < IN_FLIGHT,
                  "every call completed before SIGTERM: nothing to drain (%r)" % done_before)
        finally:
            for t in threads:
                t.join(LATENCY_MS / 1000.0 + 30)
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
        print("drained %d calls (%d completed before the signal), exit %.2fs after SIGTERM"
              % (IN_FLIGHT - len(done_before), len(done_before), waited))

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
        gw, port_a, port_b = start_on_env_ports()
        try:
            st, _, _ = http_get(port_b, "/healthz")
            check_eq(st, 200, "GET /healthz on the ${VAR:-default} listener %d" % port_b)
            for port in (port_a, port_b):
                r, rpc = call_tool(port, "echo", {"message": "hi"}, id=port)
                check_eq(expect_result(r, rpc, port, "call on port %d" % port), ECHO, "result")
        except BaseException:
            gw.__exit__(*sys.exc_info())  # stops it by pid, reports a second problem
            raise
        gw.__exit__(None, None, None)

    def start_on_env_ports(attempts=5):
        """A gateway whose two listen ports come from the manifest (${VAR} and
        ${VAR:-default}), started. The ports are picked free here and bound by the
        gateway a moment later, so another test may take one first: the gateway then
        exits with "in use" and is started again on two other ports. Started means
        its own log says it listens on both (a /healthz answer on port_a alone could
        come from whoever took the port)."""
        os.environ.pop("MCPG_TEST_PORT_B_UNSET", None)
        for attempt in range(attempts):
            port_a, port_b = free_port(), free_port()
            while port_b == port_a:
                port_b = free_port()
            m = base_manifest()
            m["gateway"]["listen"] = ["127.0.0.1:${MCPG_TEST_PORT_A:-notaport}",
                                      "127.0.0.1:${MCPG_TEST_PORT_B_UNSET:-%d}" % port_b]
            text = json.dumps(m, indent=2)
            env = {"MCPG_TEST_PORT_A": str(port_a)}
            gw = Gateway(ctx, manifest=text, listen=False, health_port=port_a, env=env,
                         name="envexpand")
            last = attempt == attempts - 1
            try:
                gw.start()
            except TestFailure:
                if not last and "in use" in gw.stderr().lower():
                    continue  # it exited: lost a port to another test
                raise
            listening = ["127.0.0.1:%d/mcp" % p for p in (port_a, port_b)]
            wait_for(lambda: gw.proc.poll() is not None
                     or all(s in gw.stderr() for s in listening),
                     START_TIMEOUT, "the gateway to log that it listens on %d and %d"
                     % (port_a, port_b))
            if gw.proc.poll() is None:
                return gw, port_a, port_b
            rc = gw.wait_exit()
            if last or "in use" not in gw.stderr().lower():
                fail("%s exited with %d after /healthz answered on %d:\n%s"
                     % (gw.name, rc, port_a, gw.stderr_tail()))
        fail("unreachable")

    tests = [
        ("SIGTERM drains in-flight calls, exit 0, audited", t_drain),
        ("SIGINT -> exit 0", t_sigint),
        ("MCPG_CONFIG instead of --config", t_env_config),
        ("${VAR} and ${VAR:-default} in the manifest", t_env_expansion),
    ]
    return run_tests(tests, ctx)


if __name__ == "__main__":
    sys.exit(main())
