#!/usr/bin/python3
"""Nothing acknowledged is lost: SIGKILL under load.

A gateway with audit_file (fsync on, rotating every 256 kB) serves echo calls
with unique JSON-RPC ids from six threads, each on its own connection; the
test SIGKILLs it mid-run, on purpose (Gateway.kill), once the audit holds
enough completed calls across a few rotated files (however long that takes).
Then:
  * every call whose answer arrived has both its allowed and its completed
    event in the rotated set, allowed first;
  * `mcpg audit verify` over the set exits 0 (a line the kill cut short is
    reported as a torn end, not a break);
  * a new gateway on the same file starts (cutting a torn end, if any),
    serves more calls and stops; the chain verifies again, one chain from
    line 1 across the crash.
The kill lands inside a preallocated segment: the live file holds room
written ahead of its lines (audit_file's preallocate_bytes, on by default),
checked right after the kill; the restart writes over that room, and its
clean stop cuts the rest off.
"""
import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway import (Context, Gateway, audit_files, audit_verify, base_manifest,  # noqa: E402
                     check, check_eq, echo_load, parse_args, read_audit, run_tests, wait_for)

ALLOWED = "mcpg.tool.call.allowed"
COMPLETED = "mcpg.tool.call.completed"
THREADS = 6
ACKED_MIN = 100  # answered calls before the kill, at least
MIN_FILES = 3  # the kill comes after two rotations at least
LOAD_DEADLINE = 60  # seconds for the load to get there: a hang, not a speed


def room_of(path):
    """Bytes of room audit_file wrote ahead at the file's end (spaces)."""
    with open(path, "rb") as f:
        data = f.read()
    return len(data) - len(data.rstrip(b" "))


def main():
    args = parse_args()
    ctx = Context(args)
    audit = ctx.path("audit.jsonl")
    m = base_manifest(audit_path=audit)
    m["modules"][-1]["config"].update({"fsync": True, "rotate_bytes": 262144,
                                       "rotate_keep": 1000})
    state = {}

    def t_kill_under_load():
        gw = Gateway(ctx, manifest=m, name="killed").start()
        ids = [range(t * 1000000, (t + 1) * 1000000) for t in range(THREADS)]
        result = {}
        load = threading.Thread(target=lambda: result.update(
            zip(("acked", "failed"), echo_load(gw.port, ids))))
        load.start()

        def ready():
            if not load.is_alive():  # it failed: judged below
                return True
            files = audit_files(audit)
            # the kill is meant to land inside room written ahead: a live file
            # just rotated in may have none yet, so wait until it has
            if len(files) < MIN_FILES or room_of(audit) == 0:
                return False
            seen = set()  # ids: a file read as it was being rotated counts once
            for f in files:
                seen.update(r.get("id") for r in read_audit(f) if r.get("event") == COMPLETED)
            # Each thread has one call at a time: of the calls with a completed
            # event, all but at most THREADS (one a thread) were answered already.
            return len(seen) >= ACKED_MIN + THREADS
        try:
            wait_for(ready, LOAD_DEADLINE, "%d audit files and %d completed calls in them"
                     % (MIN_FILES, ACKED_MIN + THREADS), interval=0.05)
        except BaseException:
            gw.kill()
            load.join(60)
            raise
        rc = gw.kill()
        load.join(60)
        state["room"] = room_of(audit)
        check(state["room"] > 0, "the live file had room written ahead when it was killed")
        check(not load.is_alive(), "the load ended with the gateway")
        check_eq(rc, -9, "the gateway's end")
        check_eq(result["failed"], [], "calls answered with an error before the kill")
        check(len(result["acked"]) >= ACKED_MIN, "calls answered before the kill: %d"
              % len(result["acked"]))
        state["acked"] = result["acked"]
        sys.stdout.write("%d calls answered before SIGKILL, %d audit files, %d bytes of room "
                         "in the live one\n"
                         % (len(result["acked"]), len(audit_files(audit)), state["room"]))

    def t_nothing_acknowledged_lost():
        events = {}
        for f in audit_files(audit):
            for i, r in enumerate(read_audit(f)):
                events.setdefault(r.get("id"), []).append(r["event"])
        missing = [i for i in state["acked"] if events.get(i) != [ALLOWED, COMPLETED]]
        check(not missing, "%d answered calls without allowed then completed on disk, e.g. %r"
              % (len(missing), [(i, events.get(i)) for i in missing[:5]]))

    def t_verify_after_kill():
        rc, out = audit_verify(ctx, audit_files(audit))
        check(rc == 0, "verify after SIGKILL: exit %d\n%s" % (rc, out))
        check(out.startswith("intact: lines 1.."), out)
        sys.stdout.write(out)

    def t_restart_continues():
        with Gateway(ctx, manifest=m, name="restarted") as gw:
            acked, failed = echo_load(gw.port, [[9000000 + i for i in range(50)]])
            check_eq((len(acked), failed), (50, []), "calls after the restart")
        rc, out = audit_verify(ctx, audit_files(audit))
        check(rc == 0, "verify after the restart: exit %d\n%s" % (rc, out))
        check(out.startswith("intact: lines 1..") and "torn" not in out, out)
        check_eq(room_of(audit), 0, "room left in the file after the restart's clean stop")
        events = [r for f in audit_files(audit) for r in read_audit(f)]
        check_eq(sum(1 for r in events if r.get("id", 0) >= 9000000), 100,
                 "events of the calls after the restart")

    tests = [
        ("SIGKILL under load", t_kill_under_load),
        ("every answered call has allowed and completed on disk", t_nothing_acknowledged_lost),
        ("mcpg audit verify passes after SIGKILL", t_verify_after_kill),
        ("a restart continues the chain", t_restart_continues),
    ]
    return run_tests(tests, ctx)


if __name__ == "__main__":
    sys.exit(main())
