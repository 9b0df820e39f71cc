#!/usr/bin/python3
"""The worker pool seen from a client (backend_mock with latency_ms on the pool):
  * timeouts under concurrency: calls whose backend outlives modules[].timeout_ms are
    answered at the timeout (not when the backend returns), audited as failed, and a
    SIGTERM right after them exits 0 (the drain waits for the backends still running);
  * a full pool queue answers 503 with Retry-After, and the refused calls are audited;
  * a client that closes its connection while its call is on the pool does not disturb
    the gateway: a running call still completes (and is audited), a queued one is
    failed without running the backend, and the gateway serves on;
  * SIGTERM with slow calls in flight and a drain deadline that passes: exit 0 and no
    sanitizer report (pool threads finishing after the loops stopped)."""
import os
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway import (Conn, Context, Gateway, audit_id, audit_name, base_manifest,  # noqa: E402
                     call_tool, check, check_eq, expect_error, expect_result, parse_args,
                     read_audit, run_tests, tool_call_request, wait_for)

ECHO = {"content": [{"type": "text", "text": "Echo: hi"}], "resultType": "complete"}


def pool_manifest(audit, latency_ms, timeout_ms=None, threads=4, queue=64, gateway=None):
    gw = {"pool": {"threads": threads, "queue": queue}}
    gw.update(gateway or {})
    m = base_manifest(audit_path=audit, tools=[{"name": "echo"},
                                               {"name": "slow", "latency_ms": latency_ms}],
                      gateway=gw)
    if timeout_ms is not None:
        m["modules"][0]["timeout_ms"] = timeout_ms
    return m


def concurrent_calls(port, tool, ids):
    """One connection per id, all sent at once; returns {id: (Response, seconds)}."""
    out = {}
    errors = {}

    def client(i):
        try:
            with Conn(port) as c:
                t = time.monotonic()
                c.send(tool_call_request(port, tool, {"message": "hi"}, id=i))
                r = c.read_response()
                out[i] = (r, time.monotonic() - t)
        except Exception as e:  # reported below
            errors[i] = repr(e)

    threads = [threading.Thread(target=client, args=(i,)) for i in ids]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    check(not any(t.is_alive() for t in threads), "a client is still waiting")
    check_eq(errors, {}, "client errors")
    return out


def events(audit, name):
    return [audit_id(r) for r in read_audit(audit) if audit_name(r) == name]


def main():
    args = parse_args()
    ctx = Context(args)

    def t_timeouts():
        audit = ctx.path("timeouts.jsonl")
        # 6 calls on 4 threads: 4 time out while running, 2 while queued
        gw = Gateway(ctx, manifest=pool_manifest(audit, latency_ms=1500, timeout_ms=150),
                     name="timeouts")
        with gw:
            ids = ["t-%d" % i for i in range(6)]
            got = concurrent_calls(gw.port, "slow", ids)
            for i in ids:
                r, took = got[i]
                err = expect_error(r, 200, -32000, "call %s" % i, id=i)
                check("timed out" in err["message"], "call %s: %r" % (i, err))
                check(took < 1.0, "call %s answered after %.2fs: the timeout is 0.15s and "
                      "the backend takes 1.5s" % (i, took))
            failed = events(audit, "mcpg.tool.call.failed")
            for i in ids:
                check_eq(failed.count(i), 1, "failed events for %s" % i)
            # The backends still sleep; the gateway must wait for them (not crash
            # when they return to a stopped loop) and exit 0.
            t0 = time.monotonic()
            gw.stop()
            print("stopped %.2fs after SIGTERM with timed-out backends running"
                  % (time.monotonic() - t0))

    def t_queue_full():
        audit = ctx.path("full.jsonl")
        gw = Gateway(ctx, manifest=pool_manifest(audit, latency_ms=600, threads=1, queue=1,
                                                 gateway={"workers": 1}),
                     name="queue-full")
        with gw:
            ids = ["q-%d" % i for i in range(6)]
            got = concurrent_calls(gw.port, "slow", ids)
            ok = [i for i in ids if got[i][0].status == 200]
            busy = [i for i in ids if got[i][0].status == 503]
            check_eq(sorted(ok + busy), sorted(ids), "every call is answered 200 or 503")
            check(1 <= len(ok) <= 2 and len(busy) >= 4,
                  "1 thread + a queue of 1: expected 1-2 answers and the rest 503, got "
                  "%d ok, %d busy" % (len(ok), len(busy)))
            for i in busy:
                r = got[i][0]
                expect_error(r, 503, -32000, "refused call %s" % i, id=i)
                check_eq(r.header("retry-after"), "1", "Retry-After on %s" % i)
            for i in ok:
                check_eq(expect_result(got[i][0], got[i][0].rpc(), i, "call %s" % i),
                         ECHO, "answer to %s" % i)
            wait_for(lambda: all(i in events(audit, "mcpg.tool.call.failed") for i in busy),
                     5, "failed events for the refused calls")
            # the pool is usable again
            r, rpc = call_tool(gw.port, "echo", {"message": "hi"}, id="after")
            check_eq(expect_result(r, rpc, "after", "call after the burst"), ECHO, "result")

    def t_client_gone():
        audit = ctx.path("gone.jsonl")
        gw = Gateway(ctx, manifest=pool_manifest(audit, latency_ms=400, threads=1,
                                                 gateway={"workers": 1}),
                     name="client-gone")
        with gw:
            # "running" takes the only pool thread; "queued" waits behind it
            running, queued = Conn(gw.port), Conn(gw.port)
            running.send(tool_call_request(gw.port, "slow", {"message": "hi"}, id="running"))
            wait_for(lambda: "running" in events(audit, "mcpg.tool.call.allowed"), 5,
                     "the first call to be on the pool")
            queued.send(tool_call_request(gw.port, "slow", {"message": "hi"}, id="queued"))
            wait_for(lambda: "queued" in events(audit, "mcpg.tool.call.allowed"), 5,
                     "the second call to be queued")
            t0 = time.monotonic()
            running.close()
            queued.close()
            # both clients are gone: the running call completes, the queued one is
            # dropped without running the backend (0.4s more of a pool thread)
            wait_for(lambda: "queued" in events(audit, "mcpg.tool.call.failed"), 5,
                     "the abandoned queued call to be failed")
            took = time.monotonic() - t0
            # "allowed" is written before the pool thread picks the call up: on a busy
            # machine the first call may also still be queued when its client leaves,
            # and is then failed as cancelled too. Either way it has an outcome.
            ran = "running" in events(audit, "mcpg.tool.call.completed")
            cancelled = [r for r in read_audit(audit) if audit_id(r) == "running"
                         and audit_name(r) == "mcpg.tool.call.failed"
                         and "cancelled" in r.get("error_message", "")]
            check(ran or cancelled, "the abandoned first call completes, or is failed "
                  "as cancelled if it never reached the backend")
            rec = [r for r in read_audit(audit) if audit_id(r) == "queued"
                   and audit_name(r) == "mcpg.tool.call.failed"][0]
            check("cancelled" in rec.get("error_message", ""), "queued call: %r" % rec)
            check(took < 0.7, "the queued call was failed %.2fs after its client left: "
                  "did its backend run?" % took)
            r, rpc = call_tool(gw.port, "echo", {"message": "hi"}, id="next")
            check_eq(expect_result(r, rpc, "next", "call after both clients left"),
                     ECHO, "result")

    def t_drain_deadline():
        audit = ctx.path("deadline.jsonl")
        m = pool_manifest(audit, latency_ms=1500, threads=2,
                          gateway={"drain_timeout_ms": 100})
        # Past the deadline connections and calls are cut short; the gateway still
        # frees them at exit (LeakSanitizer watches in the sanitizer build).
        gw = Gateway(ctx, manifest=m, name="deadline")
        with gw:
            conns = []
            for i in range(4):  # 2 running, 2 queued
                c = Conn(gw.port)
                c.send(tool_call_request(gw.port, "slow", {"message": "hi"}, id=i))
                conns.append(c)
            wait_for(lambda: len(events(audit, "mcpg.tool.call.allowed")) == 4, 5,
                     "4 calls to be on the pool")
            gw.signal(signal.SIGTERM)
            t0 = time.monotonic()
            rc = gw.wait_exit()
            waited = time.monotonic() - t0
            for c in conns:
                c.close()
            gw.check_sanitizers()
            check_eq(rc, 0, "exit code after the drain deadline\n" + gw.stderr_tail())
            check(waited < 5, "took %.2fs to exit (queued calls must not be run)" % waited)
            failed = events(audit, "mcpg.tool.call.failed")
            check_eq(len(failed), 4, "a failed event for each call cut short: %r" % failed)
            print("exited %.2fs after SIGTERM" % waited)

    def t_hung_backend():
        audit = ctx.path("hung.jsonl")
        # no per-call timeout that would free the pool thread: the backend "hangs"
        m = pool_manifest(audit, latency_ms=3600000, timeout_ms=86400000, threads=1,
                          gateway={"drain_timeout_ms": 200})
        gw = Gateway(ctx, manifest=m, name="hung")
        with gw:
            c = Conn(gw.port)
            c.send(tool_call_request(gw.port, "slow", {"message": "hi"}, id="hung"))
            wait_for(lambda: len(events(audit, "mcpg.tool.call.allowed")) == 1, 5,
                     "the call to be on the pool")
            gw.signal(signal.SIGTERM)
            t0 = time.monotonic()
            rc = gw.wait_exit()
            waited = time.monotonic() - t0
            c.close()
            check_eq(rc, 0, "exit code with a hung backend\n" + gw.stderr_tail())
            check(waited < 5, "took %.2fs to exit with a hung backend" % waited)
            check("still running" in gw.stderr(), "the hung backend is logged")
            check_eq(len(events(audit, "mcpg.tool.call.allowed")), 1, "allowed event kept")
            check_eq(len(events(audit, "mcpg.tool.call.failed")), 1,
                     "the hung call is audited as failed")
            print("exited %.2fs after SIGTERM" % waited)

    tests = [
        ("pool timeouts under concurrency: answered at the timeout, audited, clean stop",
         t_timeouts),
        ("pool queue full: 503 + Retry-After, audited", t_queue_full),
        ("client gone while its call is on the pool", t_client_gone),
        ("SIGTERM past the drain deadline with slow calls on the pool: exit 0", t_drain_deadline),
        ("SIGTERM with a backend that never returns: exit 0 within the grace", t_hung_backend),
    ]
    return run_tests(tests, ctx)


if __name__ == "__main__":
    sys.exit(main())
