#!/usr/bin/python3
"""MCP Events on one node with a file-backed coordinator (cluster.path: coordinator_memory's
journal, docs/events.md): 200 events posted, the gateway SIGKILLed right after the last
202, started again on the same journal: events/poll from the first cursor returns every
accepted id once, in order, and the log goes on from there. A torn journal tail (the file
cut by a few bytes while the gateway is stopped) starts with a warning naming the file and
the offset, and loses at most that record; a bad record before the end refuses the start.
--check names cluster.path for a directory that cannot hold the journal; a second gateway
on the same journal is refused (it is locked), while --check beside a running one is not."""
import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway import (Context, Gateway, base_manifest, check, check_eq, parse_args,  # noqa: E402
                     run_cli, run_tests, wait_for)
from eventslib import events_manifest, poll, post_ok  # noqa: E402
from webhooklib import new_secret  # noqa: E402

VAR = "MCPG_TEST_EVENTS_SECRET"
N = 200


def manifest(journal):
    m = base_manifest()
    m["cluster"] = {"kind": "single_node", "path": journal}
    m["events"] = events_manifest(VAR)
    return m


def poll_all(port, name, cursor):
    """Every event after cursor, page by page (a gateway that has just started may answer
    503 / an error until its reader knows where the log is: asked again)."""
    ids, deadline = [], time.time() + 15
    while True:
        r, rpc = poll(port, name, cursor, max_events=100)
        if r.status != 200 or "result" not in (rpc or {}):
            check(time.time() < deadline, "events/poll keeps failing: %r %r" % (r.status, r.body[:200]))
            time.sleep(0.1)
            continue
        res = rpc["result"]
        ids += [e["eventId"] for e in res["events"]]
        cursor = res["cursor"]
        if not res["hasMore"]:
            return ids, cursor, res


def poll_until(port, name, cursor, n=None, last_id=None, timeout=15.0):
    """poll_all until it has n events (or its last is last_id): a row accepted into the
    inbox reaches the log when the inbox's mover gets to it (after a restart, once the
    journal is replayed and the mover has its lease)."""
    deadline = time.time() + timeout
    while True:
        ids, last, res = poll_all(port, name, cursor)
        if (n is not None and len(ids) >= n) or (last_id is not None and ids[-1:] == [last_id]):
            return ids, last, res
        if time.time() > deadline:
            return ids, last, res
        time.sleep(0.1)


def main():
    args = parse_args()
    ctx = Context(args)
    secret = new_secret()
    env = {VAR: secret}
    journal = ctx.path("coord.journal")
    m = manifest(journal)
    state = {}

    def event(i):
        return {"name": "order.created", "id": "evt-%d" % i, "data": {"n": i}}

    def t_kill_after_202():
        gw = Gateway(ctx, manifest=m, env=env, name="durable-a").start()
        # "now" (503 until the new replica has read where the log is: asked again)
        events, first, _ = poll_all(gw.port, "order.created", None)
        check_eq(events, [], "a poll from null: no events")
        accepted = [post_ok(gw.port, "shop", event(i), secret, "post %d" % i)["eventId"]
                    for i in range(N)]
        check_eq(gw.kill(), -signal.SIGKILL, "SIGKILLed right after the last 202")
        check(os.path.getsize(journal) > 0, "the journal is on disk")
        gw = Gateway(ctx, manifest=m, env=env, name="durable-b").start()
        ids, cursor, res = poll_until(gw.port, "order.created", first, N)
        check(not res["truncated"], "from the first cursor: not truncated")
        check_eq(len(ids), len(set(ids)), "each id once")
        check_eq(ids, accepted, "all %d accepted ids, in order, after a SIGKILL" % N)
        nxt = post_ok(gw.port, "shop", event(N), secret, "after the restart")["eventId"]
        more, _, _ = poll_until(gw.port, "order.created", cursor, 1)
        check_eq(more, [nxt], "the log goes on after the replayed rows")
        gw.stop()
        state["ids"] = accepted + [nxt]
        state["first"] = first

    def t_torn_tail():
        size = os.path.getsize(journal)
        os.truncate(journal, size - 3)
        gw = Gateway(ctx, manifest=m, env=env, name="durable-torn").start()
        needle = "journal %s: torn last record at offset" % journal
        wait_for(lambda: needle in gw.stderr(), 10, "a torn tail is a warning naming the file and "
                 "the offset: %r" % needle)
        # the mover admits the inbox in slot order: once an event posted now is in the log,
        # every row the journal kept before it is too (n events would be a timeout's wait
        # when the torn record was the last event)
        sentinel = post_ok(gw.port, "shop", event(N + 1), secret, "after the torn start")["eventId"]
        ids, _, _ = poll_until(gw.port, "order.created", state["first"], last_id=sentinel)
        check_eq(ids[-1:], [sentinel], "the log goes on after a torn tail")
        ids, want = ids[:-1], state["ids"]
        check(ids == want or ids == want[:-1],
              "at most the torn record lost: %d of %d, last %r" % (len(ids), len(want), ids[-1:]))
        gw.stop()

    def t_bad_record():
        with open(journal, "r+b") as f:
            f.seek(200)
            b = f.read(1)
            f.seek(200)
            f.write(bytes([b[0] ^ 0xff]))
        gw = Gateway(ctx, manifest=m, env=env, name="durable-bad")
        gw._spawn()
        rc = gw.wait_exit(15)
        err = gw.stderr()
        check(rc != 0, "a bad record before the end refuses the start (exit %r)" % rc)
        check("journal %s: bad record at offset 200" % journal in err or
              "journal %s: bad record at offset" % journal in err,
              "... naming the file and the offset: %r" % err[-800:])
        os.unlink(journal)

    def t_check_and_lock():
        bad = manifest(ctx.path("no/such/dir/coord.journal"))
        rc, _, err = run_cli(ctx, ["--check", "--config", ctx.write_manifest(bad)], env=env)
        check(rc == 2 and "cluster.path" in err, "--check names cluster.path: %r" % err)
        fleet = manifest(journal)
        fleet["cluster"]["kind"] = "redis"
        rc, _, err = run_cli(ctx, ["--check", "--config", ctx.write_manifest(fleet)], env=env)
        check(rc == 2 and "cluster.path" in err, "cluster.path with a fleet kind: %r" % err)
        declared = manifest(journal)
        declared["modules"].append({"name": "c", "module": "coordinator_memory"})
        rc, _, err = run_cli(ctx, ["--check", "--config", ctx.write_manifest(declared)], env=env)
        check(rc == 2 and "cluster.path" in err and "config.path" in err,
              "cluster.path beside a declared coordinator: %r" % err)
        with Gateway(ctx, manifest=m, env=env, name="durable-lock") as g:
            rc, _, err = run_cli(ctx, ["--check", "--config", ctx.write_manifest(m)], env=env)
            check_eq(rc, 0, "--check beside a running gateway on the journal (%r)" % err)
            other = Gateway(ctx, manifest=m, env=env, name="durable-second")
            other._spawn()
            rc = other.wait_exit(15)
            check(rc != 0 and "in use" in other.stderr(),
                  "a second gateway on the same journal is refused: %r" % other.stderr()[-400:])
            check(g.proc.poll() is None, "the first one serves on")

    tests = [t_kill_after_202, t_torn_tail, t_bad_record, t_check_and_lock]
    return run_tests([(t.__name__[2:], t) for t in tests], ctx)


if __name__ == "__main__":
    sys.exit(main())
