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
    sanitizer report (pool threads finishing after the loops stopped).

No case judges speed: what is on the pool is read from GET /metrics (mcpg_pool_jobs,
docs/metrics.md) and from the backend itself (backend_mock's mock_stats), and a bound
on when an answer came is the backend's own latency: an answer that came before the
backend could have returned did not wait for it."""
import json
import os
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway import (Conn, Context, Gateway, TestFailure, audit_id, audit_name,  # noqa: E402
                     base_manifest, call_tool, check, check_eq, expect_error, expect_result,
                     fail, http_get, parse_args, pool_metrics, read_audit, run_tests,
                     tool_call_request, wait_for)

ECHO = {"content": [{"type": "text", "text": "Echo: hi"}], "resultType": "complete"}
# Backend latencies: long next to what the test does meanwhile (a few requests),
# so a call is still on the pool while the test looks; no bound below is tighter.
TIMEOUTS_LATENCY_MS = 4000
FULL_LATENCY_MS = 3000
GONE_LATENCY_MS = 3000
GAVE_UP = "did not answer before the gateway stopped"  # kernel/dispatch.c, the forced drain


def pool_manifest(audit, latency_ms, timeout_ms=None, threads=4, queue=64, gateway=None,
                  metrics=False, stats=False):
    gw = {"pool": {"threads": threads, "queue": queue}}
    gw.update(gateway or {})
    m = base_manifest(audit_path=audit, tools=[{"name": "echo"},
                                               {"name": "slow", "latency_ms": latency_ms}],
                      mock_config={"stats_tool": True} if stats else None, gateway=gw)
    m["modules"][0]["inline_dispatch"] = False  # backend_mock never blocks: the pool on request
    if timeout_ms is not None:
        m["modules"][0]["timeout_ms"] = timeout_ms
    if metrics:  # GET /metrics, served by the loop: readable while the pool is full
        m["modules"].append({"name": "prom", "module": "metrics_prometheus",
                             "config": {"process": False}})
    return m


def wait_pool(port, what, **want):
    """Wait until GET /metrics shows the pool as `want` (e.g. running=1, queued=0)."""
    seen = [None]

    def ok():
        seen[0] = pool_metrics(port)
        return all(seen[0][k] == v for k, v in want.items())
    try:
        wait_for(ok, 15, what)
    except TestFailure:
        fail("%s: the pool stayed %r" % (what, seen[0]))


def mock_stats(port, id):
    r, rpc = call_tool(port, "mock_stats", {}, id=id)
    return json.loads(expect_result(r, rpc, id, "mock_stats")["content"][0]["text"])


def start_calls(port, tool, ids, out, errors):
    """One connection per id, each sent from a thread of its own; out[id] =
    (Response, seconds from before the send to the answer, monotonic time of the
    answer). Returns the threads."""
    def client(i):
        try:
            with Conn(port) as c:
                t = time.monotonic()
                c.send(tool_call_request(port, tool, {"message": "hi"}, id=i))
                r = c.read_response()
                now = time.monotonic()
                out[i] = (r, now - t, now)
        except Exception as e:  # reported by join_calls
            errors[i] = repr(e)

    threads = [threading.Thread(target=client, args=(i,)) for i in ids]
    for t in threads:
        t.start()
    return threads


def join_calls(threads, errors, timeout=60):
    for t in threads:
        t.join(timeout)
    check(not any(t.is_alive() for t in threads), "a client is still waiting")
    check_eq(errors, {}, "client errors")


def concurrent_calls(port, tool, ids):
    """One connection per id, all sent at once; returns {id: (Response, seconds, at)}."""
    out, errors = {}, {}
    join_calls(start_calls(port, tool, ids, out, errors), errors)
    return out


def events(audit, name):
    return [audit_id(r) for r in read_audit(audit) if audit_name(r) == name]


def main():
    args = parse_args()
    ctx = Context(args)

    def t_timeouts():
        audit = ctx.path("timeouts.jsonl")
        # 6 calls on 4 threads: 4 time out while running, 2 while queued
        gw = Gateway(ctx, manifest=pool_manifest(audit, latency_ms=TIMEOUTS_LATENCY_MS,
                                                 timeout_ms=150),
                     name="timeouts")
        with gw:
            ids = ["t-%d" % i for i in range(6)]
            got = concurrent_calls(gw.port, "slow", ids)
            for i in ids:
                r, took, _ = got[i]
                err = expect_error(r, 200, -32000, "call %s" % i, id=i)
                check("timed out" in err["message"], "call %s: %r" % (i, err))
                # Its backend started after the send and sleeps latency_ms: an answer
                # sooner than that did not wait for the backend.
                check(took < TIMEOUTS_LATENCY_MS / 1000.0,
                      "call %s answered after %.2fs, not before its backend (%d ms) could "
                      "return: the timeout is 150 ms" % (i, took, TIMEOUTS_LATENCY_MS))
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
        gw = Gateway(ctx, manifest=pool_manifest(audit, latency_ms=FULL_LATENCY_MS, threads=1,
                                                 queue=1, gateway={"workers": 1},
                                                 metrics=True),
                     name="queue-full")
        with gw:
            port = gw.port
            out, errors = {}, {}
            # q-0 takes the only thread, q-1 the only place in the queue: seen on
            # /metrics. q-0 holds the thread latency_ms from its start, so the pool
            # stays full that long; the four calls sent now find it full.
            threads = start_calls(port, "slow", ["q-0"], out, errors)
            wait_pool(port, "q-0 running on the only thread", running=1, queued=0)
            threads += start_calls(port, "slow", ["q-1"], out, errors)
            wait_pool(port, "q-1 in the queue", running=1, queued=1, refused=0)
            late = ["q-%d" % i for i in range(2, 6)]
            threads += start_calls(port, "slow", late, out, errors)
            join_calls(threads, errors, timeout=FULL_LATENCY_MS / 1000.0 * 2 + 30)
            for i in ("q-0", "q-1"):
                r = out[i][0]
                check_eq(expect_result(r, r.rpc(), i, "call %s (thread, queue)" % i), ECHO,
                         "answer to %s" % i)
            for i in late:
                r, took, _ = out[i]
                check(r.status == 503, "call %s sent while the pool was full: %d after %.2fs "
                      "(%r)" % (i, r.status, took, r.body[:200]))
                expect_error(r, 503, -32000, "refused call %s" % i, id=i)
                check_eq(r.header("retry-after"), "1", "Retry-After on %s" % i)
            wait_for(lambda: all(i in events(audit, "mcpg.tool.call.failed") for i in late),
                     10, "failed events for the refused calls")
            check_eq(pool_metrics(port)["refused"], len(late), "mcpg_pool_refused_total")
            # the pool is usable again
            r, rpc = call_tool(port, "echo", {"message": "hi"}, id="after")
            check_eq(expect_result(r, rpc, "after", "call after the burst"), ECHO, "result")

    def t_client_gone():
        audit = ctx.path("gone.jsonl")
        gw = Gateway(ctx, manifest=pool_manifest(audit, latency_ms=GONE_LATENCY_MS, threads=1,
                                                 gateway={"workers": 1}, metrics=True,
                                                 stats=True),
                     name="client-gone")
        with gw:
            port = gw.port
            # "running" takes the only pool thread; "queued" waits behind it
            running, queued = Conn(port), Conn(port)
            running.send(tool_call_request(port, "slow", {"message": "hi"}, id="running"))
            wait_pool(port, "the first call on the only pool thread", running=1, queued=0)
            queued.send(tool_call_request(port, "slow", {"message": "hi"}, id="queued"))
            wait_pool(port, "the second call in the queue", running=1, queued=1)
            running.close()
            queued.close()
            # both clients are gone: the running call completes, the queued one is
            # dropped without running the backend
            bound = GONE_LATENCY_MS / 1000.0 + 15
            wait_for(lambda: "queued" in events(audit, "mcpg.tool.call.failed"), bound,
                     "the abandoned queued call to be failed")

            def outcome_of_running():
                ran = "running" in events(audit, "mcpg.tool.call.completed")
                cancelled = [r for r in read_audit(audit) if audit_id(r) == "running"
                             and audit_name(r) == "mcpg.tool.call.failed"
                             and "cancelled" in r.get("error_message", "")]
                return (ran, bool(cancelled)) if ran or cancelled else None
            # The pool thread took the first call (/metrics said running 1), but it
            # runs at a background priority: on a busy machine it may see its client
            # gone before it calls the backend, and then fails it as cancelled.
            ran, _ = wait_for(outcome_of_running, bound, "an outcome for the first call")
            rec = [r for r in read_audit(audit) if audit_id(r) == "queued"
                   and audit_name(r) == "mcpg.tool.call.failed"][0]
            check("cancelled" in rec.get("error_message", ""), "queued call: %r" % rec)
            # What the backend saw: the first call if it completed, never the queued one
            st = mock_stats(port, "stats")["tools"]["slow"]
            check_eq((st["calls"], st["in_flight"]), (1 if ran else 0, 0),
                     "backend calls of slow (calls, in_flight) with the first call %s: did "
                     "the queued call's backend run?" % ("completed" if ran else "cancelled"))
            r, rpc = call_tool(port, "echo", {"message": "hi"}, id="next")
            check_eq(expect_result(r, rpc, "next", "call after both clients left"),
                     ECHO, "result")

    def t_drain_deadline():
        audit = ctx.path("deadline.jsonl")
        m = pool_manifest(audit, latency_ms=1500, threads=2,
                          gateway={"drain_timeout_ms": 100}, metrics=True)
        # Past the deadline connections and calls are cut short; the gateway still
        # frees them at exit (LeakSanitizer watches in the sanitizer build).
        gw = Gateway(ctx, manifest=m, name="deadline")
        with gw:
            conns = []
            ids = list(range(4))
            for i in ids:  # 2 running, 2 queued
                c = Conn(gw.port)
                c.send(tool_call_request(gw.port, "slow", {"message": "hi"}, id=i))
                conns.append(c)
            wait_pool(gw.port, "2 calls running and 2 queued", running=2, queued=2)
            gw.signal(signal.SIGTERM)
            t0 = time.monotonic()
            rc = gw.wait_exit()
            waited = time.monotonic() - t0
            for c in conns:
                c.close()
            gw.check_sanitizers()
            check_eq(rc, 0, "exit code after the drain deadline\n" + gw.stderr_tail())
            # The deadline ended the drain (not the calls finishing: the queued two
            # would need twice the backend's latency), and every call has exactly one
            # outcome; those the deadline cut short say so.
            check("drain deadline passed" in gw.stderr(),
                  "the drain deadline passed with calls in flight\n" + gw.stderr_tail())
            outcomes = {}
            for r in read_audit(audit):
                if audit_name(r) in ("mcpg.tool.call.completed", "mcpg.tool.call.failed"):
                    outcomes.setdefault(audit_id(r), []).append(r)
            check_eq(sorted(outcomes), ids, "calls with an outcome")
            cut = 0
            for i in ids:
                check_eq(len(outcomes[i]), 1, "outcomes of call %d" % i)
                r = outcomes[i][0]
                if audit_name(r) == "mcpg.tool.call.failed":
                    check(GAVE_UP in r.get("error_message", ""), "call %d: %r" % (i, r))
                    cut += 1
            check(cut >= 2, "calls cut short by the deadline: %d (the queued two at least)"
                  % cut)
            print("exited %.2fs after SIGTERM, %d calls cut short" % (waited, cut))

    def t_hung_backend():
        audit = ctx.path("hung.jsonl")
        # no per-call timeout that would free the pool thread: the backend "hangs"
        m = pool_manifest(audit, latency_ms=3600000, timeout_ms=86400000, threads=1,
                          gateway={"drain_timeout_ms": 200})
        gw = Gateway(ctx, manifest=m, name="hung")
        with gw:
            c = Conn(gw.port)
            c.send(tool_call_request(gw.port, "slow", {"message": "hi"}, id="hung"))
            wait_for(lambda: len(events(audit, "mcpg.tool.call.allowed")) == 1, 10,
                     "the call to be on the pool")
            gw.signal(signal.SIGTERM)
            t0 = time.monotonic()
            # Exiting at all proves it: the backend would hold the exit for an hour,
            # and wait_exit gives up (and fails) long before that.
            rc = gw.wait_exit()
            waited = time.monotonic() - t0
            c.close()
            check_eq(rc, 0, "exit code with a hung backend\n" + gw.stderr_tail())
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
