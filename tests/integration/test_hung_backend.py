#!/usr/bin/python3
"""A backend that hangs, inline and on the pool (backend_mock with latency_ms far past
modules[].timeout_ms). test_pool.py has the pool's timeouts under concurrency, a full
queue and a hung backend at SIGTERM; this adds:
  * inline: calls to a backend that does not answer are answered at the timeout
    (-32000 "timed out", audited as failed) while the loop serves other calls, and the
    backend is told to stop (its calls in flight go back to 0);
  * the pool with its threads stuck on timed-out work: the callers were answered, but
    the stuck calls still hold the pool's threads and queue (threads 2 + queue 2), so new
    calls get 503 with Retry-After instead of piling up; once the stuck work ends the
    pool serves again by itself, and the timed-out calls that were still queued never
    reach the backend."""
import json
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway import (Conn, Context, Gateway, TestFailure, audit_id, audit_name,  # noqa: E402
                     base_manifest, call_tool, check, check_eq, expect_error, expect_result,
                     fail, http_get, parse_args, pool_metrics, read_audit, run_tests,
                     strip_server_info, tool_call_request, wait_for)

TIMEOUT_MS = 300
HANG_MS = 3600000   # inline: never, as far as the test is concerned
STUCK_MS = 10000    # pool: long past the timeout, but it ends
BUSY_PROBES = 10    # calls tried while the pool is stuck
ECHO = {"content": [{"type": "text", "text": "Echo: hi"}], "resultType": "complete"}


def manifest(audit, inline, latency_ms, gateway=None):
    m = base_manifest(audit_path=audit, tools=[{"name": "echo"},
                                               {"name": "hang", "latency_ms": latency_ms}],
                      mock_config={"stats_tool": True}, gateway=gateway)
    m["modules"][0].update({"inline_dispatch": inline, "timeout_ms": TIMEOUT_MS})
    return m


def events(audit, name):
    return [audit_id(r) for r in read_audit(audit) if audit_name(r) == name]


def pool_jobs(port):
    """mcpg_pool_jobs from GET /metrics: {"queued": n, "running": n}."""
    m = pool_metrics(port)
    return {"queued": m["queued"], "running": m["running"]}


def wait_pool(port, what, want):
    seen = [None]

    def ok():
        seen[0] = pool_jobs(port)
        return seen[0] == want
    try:
        wait_for(ok, 15, what)
    except TestFailure:
        fail("%s: the pool stayed %r, not %r" % (what, seen[0], want))


def stats(port, id):
    r, rpc = call_tool(port, "mock_stats", {}, id=id)
    return json.loads(expect_result(r, rpc, id, "mock_stats")["content"][0]["text"])


def send_async(port, tool, id, out):
    """Send a call on its own connection from a thread; out[id] = (Response, seconds
    from the send to the answer, monotonic time of the answer)."""
    def run():
        with Conn(port) as c:
            t0 = time.monotonic()
            c.send(tool_call_request(port, tool, {"message": "hi"}, id=id))
            r = c.read_response()
            now = time.monotonic()
            out[id] = (r, now - t0, now)
    t = threading.Thread(target=run)
    t.start()
    return t


def expect_timed_out(out, id, backend_done):
    """The call was answered with the timeout error, and before backend_done (a
    monotonic time before which its backend, or the one it waited behind, cannot
    have returned): answered at the timeout, not when the backend returned."""
    check(id in out, "call %s answered" % id)
    r, took, at = out[id]
    err = expect_error(r, 200, -32000, "call %s" % id, id=id)
    check("timed out after %d ms" % TIMEOUT_MS in err["message"], "call %s: %r" % (id, err))
    check(at < backend_done, "call %s answered after %.2fs, not before its backend could "
          "return" % (id, took))
    return took


def main():
    args = parse_args()
    ctx = Context(args)

    def t_inline():
        audit = ctx.path("inline.jsonl")
        with Gateway(ctx, manifest=manifest(audit, True, HANG_MS), name="inline") as gw:
            out = {}
            ids = ["h-%d" % i for i in range(4)]
            t0 = time.monotonic()
            threads = [send_async(gw.port, "hang", i, out) for i in ids]
            wait_for(lambda: len(events(audit, "mcpg.tool.call.allowed")) == 4, 15,
                     "the hanging calls admitted")
            # the loop is not held by them
            r, rpc = call_tool(gw.port, "echo", {"message": "hi"}, id="meanwhile")
            check_eq(expect_result(r, rpc, "meanwhile", "echo meanwhile"), ECHO, "echo")
            for t in threads:
                t.join(30)
            took = [expect_timed_out(out, i, t0 + HANG_MS / 1000.0) for i in ids]
            failed = events(audit, "mcpg.tool.call.failed")
            for i in ids:
                check_eq(failed.count(i), 1, "failed events for %s" % i)
            # told to stop: the backend holds nothing for the abandoned calls
            wait_for(lambda: stats(gw.port, "s")["tools"]["hang"]["in_flight"] == 0, 15,
                     "the hanging calls gone from the backend")
            print("inline: answered at the timeout in %.2f..%.2f s" % (min(took), max(took)))

    def t_pool_stuck():
        audit = ctx.path("pool.jsonl")
        m = manifest(audit, False, STUCK_MS,
                     gateway={"workers": 1, "pool": {"threads": 2, "queue": 2}})
        # GET /metrics (mcpg_pool_jobs) shows what holds the pool; the loop serves it
        # while the pool is full
        m["modules"].append({"name": "prom", "module": "metrics_prometheus",
                             "config": {"process": False}})
        with Gateway(ctx, manifest=m, name="pool") as gw:
            port = gw.port
            out, threads = {}, []
            # Every backend below starts after this and sleeps STUCK_MS: until
            # t0 + STUCK_MS the pool is surely held, whatever the machine's speed.
            t0 = time.monotonic()
            # two calls take both threads, then two wait in the queue
            for batch, want in ((["run-0", "run-1"], {"running": 2, "queued": 0}),
                                (["queued-0", "queued-1"], {"running": 2, "queued": 2})):
                threads += [send_async(port, "hang", i, out) for i in batch]
                wait_pool(port, "%r on the pool" % batch, want)
            for t in threads:
                t.join(30)
            for i in out:
                # answered at the timeout: before the running backends could return,
                # and so before the queued calls could have had a thread
                expect_timed_out(out, i, t0 + STUCK_MS / 1000.0)
            # answered, but their work still holds the threads and the queue: refused.
            # A call answered before t0 + STUCK_MS was refused while the pool was
            # surely held; the first one answered later ends the probing.
            refused = 0
            while True:
                i = "busy-%d" % refused
                r, rpc = call_tool(port, "echo", {"message": "hi"}, id=i)
                if time.monotonic() - t0 >= STUCK_MS / 1000.0:
                    check(r.status in (200, 503), "call %s: %d" % (i, r.status))
                    if r.status == 503:
                        refused += 1
                    break
                expect_error(r, 503, -32000, "call %s while the pool is stuck" % i, id=i)
                check_eq(r.header("retry-after"), "1", "Retry-After on %s" % i)
                refused += 1
                if refused >= BUSY_PROBES:
                    break
                time.sleep(0.05)  # pacing between probes, not a wait for anything
            check(refused >= 1, "calls refused while stuck: %d" % refused)
            # the stuck work ends: served again, no restart

            def served():
                r, rpc = call_tool(port, "echo", {"message": "hi"}, id="back")
                return r.status == 200 and strip_server_info(rpc.get("result")) == ECHO
            wait_for(served, STUCK_MS / 1000.0 + 20, "the pool serving again", interval=0.1)
            back = time.monotonic() - t0
            st = stats(port, "s")["tools"]["hang"]
            check_eq(st["calls"], 2, "calls that reached the backend (the queued ones "
                     "timed out and were never run)")
            check(st["max_in_flight"] <= 2, "at most the pool's threads at once: %r" % st)
            failed = events(audit, "mcpg.tool.call.failed")
            for i in list(out) + ["busy-%d" % k for k in range(refused)]:
                check_eq(failed.count(i), 1, "failed events for %s" % i)
            print("pool: %d calls refused 503 while stuck; served again %.2f s after the "
                  "stuck calls were sent (their work took %d ms)" % (refused, back, STUCK_MS))

    return run_tests([
        ("inline backend that hangs: answered at the timeout, the loop free, told to stop",
         t_inline),
        ("pool threads stuck on timed-out work: 503 at the bound, then served again",
         t_pool_stuck),
    ], ctx)


if __name__ == "__main__":
    sys.exit(main())
