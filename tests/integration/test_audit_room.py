#!/usr/bin/python3
"""The room audit_file writes ahead of its live file, seen by an operator.

While the gateway runs, the live audit file ends in room (spaces written
ahead, preallocate_bytes) so that a batch's sync flushes its lines only.
  * the room is there while it runs, and a clean stop cuts it off;
  * `mcpg audit cat` prints exactly the file's lines, `mcpg audit tail -n`
    the last ones, never the room;
  * `mcpg audit tail -f` prints each new line once, in the file's order,
    across a rotation (where plain `tail -f` waits for a growth that the
    room means never comes);
  * preallocate_bytes 0: no room at any time.
"""
import json
import os
import subprocess
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway import (Context, Gateway, audit_files, base_manifest, check,  # noqa: E402
                     check_eq, echo_load, parse_args, read_audit, run_cli, run_tests, stop_process,
                     wait_for)


def room_of(path):
    with open(path, "rb") as f:
        data = f.read()
    return len(data) - len(data.rstrip(b" "))


def lines_of(path):
    with open(path, "rb") as f:
        data = f.read().rstrip(b" ")
    return [ln for ln in data.decode().split("\n") if ln]


def main():
    args = parse_args()
    ctx = Context(args)
    audit = ctx.path("audit.jsonl")
    m = base_manifest(audit_path=audit)
    m["modules"][-1]["config"].update({"rotate_bytes": 65536, "rotate_keep": 100})
    box = {}

    def t_room_while_running():
        gw = Gateway(ctx, manifest=m, name="room").start()
        box["gw"] = gw
        acked, failed = echo_load(gw.port, [range(1, 41)])
        check_eq((len(acked), failed), (40, []), "calls")
        wait_for(lambda: room_of(audit) > 0, 10, "room written ahead of the live file")
        check(len(read_audit(audit)) == 80, "80 events before the room")

    def t_cat_and_tail():
        rc, out, err = run_cli(ctx, ["audit", "cat", audit])
        check_eq(rc, 0, "audit cat's exit (%s)" % err)
        check_eq(out.splitlines(), lines_of(audit), "audit cat prints the lines, no room")
        rc, out, err = run_cli(ctx, ["audit", "tail", "-n", "3", audit])
        check_eq((rc, out.splitlines()), (0, lines_of(audit)[-3:]), "audit tail -n 3")
        rc, out, err = run_cli(ctx, ["audit", "tail", "-n", "x", audit])
        check(rc == 2 and "-n x" in err, "a bad count is named: %r" % err)

    def t_tail_follows_across_rotation():
        gw = box["gw"]
        before = len(audit_files(audit))
        last = lines_of(audit)[-1]
        follower = subprocess.Popen([ctx.bin, "audit", "tail", "-n", "1", "-f", audit],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        seen = []
        reader = threading.Thread(target=lambda: seen.extend(iter(follower.stdout.readline, "")))
        reader.start()
        try:
            # its first line, the file's last, says it is in place: the calls come after
            wait_for(lambda: len(seen) >= 1, 15, "the follower printing the file's last line")
            check_eq(seen.pop(0).rstrip("\n"), last, "tail -n 1 -f's first line")
            ids = list(range(1000, 1400))
            acked, failed = echo_load(gw.port, [ids])
            check_eq((len(acked), failed), (400, []), "calls while following")
            wait_for(lambda: len(seen) >= 800, 15, "the follower printing 800 lines")
            check(len(audit_files(audit)) > before, "the file rotated while followed")
            events = [(r["id"], r["event"]) for r in map(json.loads, seen)]
            check_eq(len(set(events)), 800, "each new line printed once")
            check_eq([i for i, _ in events[::2]], ids, "in the calls' order")
        finally:
            stop_process(follower)
            reader.join(10)

    def t_stop_cuts_room():
        box.pop("gw").stop()
        check_eq(room_of(audit), 0, "room after a clean stop")
        with open(audit, "rb") as f:
            check(f.read().endswith(b"}\n"), "the file ends with its last line")

    def t_no_room_when_off():
        path = ctx.path("noroom.jsonl")
        m2 = base_manifest(audit_path=path)
        m2["modules"][-1]["config"]["preallocate_bytes"] = 0
        with Gateway(ctx, manifest=m2, name="noroom") as gw:
            acked, failed = echo_load(gw.port, [range(1, 21)])
            check_eq((len(acked), failed), (20, []), "calls")
            check_eq(room_of(path), 0, "room with preallocate_bytes 0")
            check_eq(len(read_audit(path)), 40, "the events")

    tests = [("room written ahead while it runs", t_room_while_running),
             ("mcpg audit cat and tail -n print the lines only", t_cat_and_tail),
             ("mcpg audit tail -f follows the live file across a rotation",
              t_tail_follows_across_rotation),
             ("a clean stop cuts the room off", t_stop_cuts_room),
             ("preallocate_bytes 0: no room", t_no_room_when_off)]
    try:
        return run_tests(tests, ctx)
    finally:
        if "gw" in box:
            box["gw"].stop()


if __name__ == "__main__":
    sys.exit(main())
