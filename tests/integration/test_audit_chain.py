#!/usr/bin/python3
"""The audit trail's hash chain, on files the real gateway wrote.

One gateway with two audit sinks at once: audit_file (rotating every 32 kB,
every rotated file kept) and audit_stdout. Calls to echo from four threads:
  * every call whose answer arrived has its allowed and completed events in
    the rotated set, the set spans many files, and `mcpg audit verify` over it
    (oldest first) exits 0: the chain runs across every rotation;
  * the events carry the ABI 1.2 fields (gateway_id, args, traceparent; peer
    when the transport reports it);
  * the stdout sink wrote the same events: each of its lines is the file's
    line without the chain fields (one formatter);
  * reloads under load, each starting a new audit_file instance on the same
    file while the old one still records its calls: one chain, intact;
  * copies of the files edited in each way make `mcpg audit verify` exit 1
    naming the right file and line: a field changed, a line deleted, two lines
    swapped, a line inserted, the first line of a rotated file edited, a
    rotated file left out; a file given out of order is named too.
"""
import json
import os
import re
import shutil
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "reload"))
from gateway import (Context, Gateway, audit_files, audit_verify, base_manifest,  # noqa: E402
                     build_request, check, check_eq, echo_load, parse_args, read_audit,
                     rpc_body, run_cli, run_tests, send_one, stateless_headers, wait_for)
from test_reload import TOKEN, reload_ok  # noqa: E402

ALLOWED = "mcpg.tool.call.allowed"
COMPLETED = "mcpg.tool.call.completed"
THREADS, PER_THREAD = 4, 250
TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def lines_of(path):
    with open(path, "rb") as f:
        return f.read().split(b"\n")[:-1]


def write_lines(path, lines):
    with open(path, "wb") as f:
        f.write(b"".join(ln + b"\n" for ln in lines))


def main():
    args = parse_args()
    ctx = Context(args)
    audit = ctx.path("audit.jsonl")
    m = base_manifest(audit_path=audit, gateway={"id": "gw-chain-test"})
    anchor = ctx.path("anchor.json")
    m["modules"][-1]["config"].update({"rotate_bytes": 32768, "rotate_keep": 1000,
                                       "anchor_path": anchor})
    m["modules"].append({"name": "out", "module": "audit_stdout", "config": {}})
    m["pipeline"]["audit"] = ["audit", "out"]
    gw = Gateway(ctx, manifest=m, name="chain")
    state = {}

    def t_load():
        gw.start()
        ids = [[t * 100000 + i for i in range(PER_THREAD)] for t in range(THREADS)]
        acked, failed = echo_load(gw.port, ids)
        check_eq(failed, [], "calls that did not succeed")
        check_eq(len(acked), THREADS * PER_THREAD, "calls answered")
        body = rpc_body("tools/call", {"name": "echo", "arguments": {"message": "traced"}},
                        id="traced")
        headers = stateless_headers("tools/call", "echo") + [("traceparent", TRACEPARENT)]
        r = send_one(gw.port, build_request(gw.port, headers=headers, body=body))
        check_eq(r.status, 200, "a call with a traceparent")
        gw.stop()
        shutil.copyfile(anchor, ctx.path("anchor-after-load.json"))  # the head at the clean stop
        state["anchor"] = ctx.path("anchor-after-load.json")
        state["acked"] = acked
        files = audit_files(audit)
        check(len(files) >= 10, "rotation under load: %d files" % len(files))
        state["files"] = files

    def t_every_call_recorded():
        events = [r for f in state["files"] for r in read_audit(f)]
        by_id = {}
        for r in events:
            by_id.setdefault(r.get("id"), []).append(r["event"])
        for i in state["acked"]:
            check_eq(sorted(by_id.get(i, [])), [ALLOWED, COMPLETED], "events of id %d" % i)
        check_eq(len(events), 2 * len(state["acked"]) + 2, "events in the rotated set")
        traced = [r for r in events if r.get("id") == "traced"]
        check_eq([r.get("traceparent") for r in traced], [TRACEPARENT] * 2, "traceparent")
        check_eq(traced[0].get("args"), {"message": "traced"}, "args")
        r = events[0]
        check_eq(r.get("gateway_id"), "gw-chain-test", "gateway_id")
        # the transport may not report the peer yet; when it does, it is an address
        check("peer" not in r or re.match(r"^127\.0\.0\.1:\d+$", r["peer"]), "peer: %r" % r)
        check_eq(r.get("args"), {"message": "hi"}, "args")
        check_eq([r.get("line") for r in events], list(range(1, len(events) + 1)),
                 "line numbers in file order")

    def t_verify_intact():
        rc, out = audit_verify(ctx, state["files"])
        check(rc == 0, "verify of the rotated set: exit %d\n%s" % (rc, out))
        check("intact: lines 1..%d" % (2 * len(state["acked"]) + 2) in out, out)

    def t_stdout_sink():
        # Every sink gets the same event (seq, time, latency): byte for byte
        # the file's line without its chain members.
        out = [ln for ln in gw.stdout().split("\n") if ln]
        file_lines = {}
        for f in state["files"]:
            for ln in lines_of(f):
                body = b"{" + re.sub(rb'^\{"line":\d+,"prev":"[0-9a-f]{64}",', b"", ln)
                seq = json.loads(ln)["seq"]
                file_lines[seq] = body.decode()
        check_eq(len(out), len(file_lines), "lines on stdout")
        for ln in out:
            seq = json.loads(ln)["seq"]
            check_eq(ln, file_lines.get(seq), "the stdout line of seq %d" % seq)

    def t_reload_under_load():
        path = ctx.path("reload-audit.jsonl")
        manifest = ctx.path("reload.json")

        def write(queue_max):
            # calls take 20 ms: every reload finds some in flight on the old one
            mr = base_manifest(audit_path=path, gateway={"workers": 2},
                               tools=[{"name": "echo", "latency_ms": 20}])
            mr["gateway"]["server"] = {"admin_token_env": "MCPG_TEST_ADMIN"}
            mr["modules"][-1]["config"].update({"queue_max": queue_max, "rotate_bytes": 65536,
                                                "rotate_keep": 1000})
            ctx.write_manifest(mr, manifest + ".tmp")
            os.rename(manifest + ".tmp", manifest)

        def generations_seen():
            # the newest file holds the newest lines (a file being rotated reads as
            # missing or short for a moment: the next look sees it)
            return set(r["generation"] for r in read_audit(path))

        write(65536)
        with Gateway(ctx, config=manifest, env={"MCPG_TEST_ADMIN": TOKEN}, name="reload") as g:
            result = {}
            stop = threading.Event()
            # calls until told to stop, however long the reloads take
            ids = [range(500000 + t * 100000, 500000 + (t + 1) * 100000) for t in range(THREADS)]
            load = threading.Thread(target=lambda: result.update(
                zip(("acked", "failed"), echo_load(g.port, ids, stop=stop))))
            load.start()
            try:
                gen = wait_for(lambda: sorted(generations_seen())[:1], 30,
                               "the load's first events")[0]
                gens_live = [gen]
                for k in range(5):  # a changed config: a new audit instance each time
                    # the generation serving has recorded calls; then the next one
                    wait_for(lambda: gen in generations_seen(), 30,
                             "events of generation %d" % gen)
                    write(65535 - k)
                    ans = reload_ok(g.port)
                    check("audit" in ans.get("started", []) and
                          "audit" in ans.get("stopping", []),
                          "a new audit instance, the old one stopping: %r" % ans)
                    gen = ans["generation"]
                    gens_live.append(gen)
                wait_for(lambda: gen in generations_seen(), 30, "events of generation %d" % gen)
            finally:
                stop.set()
                load.join(60)
            check(not load.is_alive(), "the load ended when told to")
            check_eq(result["failed"], [], "calls that failed across reloads")
        files = audit_files(path)
        rc, out = audit_verify(ctx, files)
        check(rc == 0, "verify after five reloads under load: exit %d\n%s" % (rc, out))
        events = {}
        for f in files:
            for r in read_audit(f):
                events.setdefault(r.get("id"), []).append(r["event"])
        for i in result["acked"]:
            check_eq(events.get(i), [ALLOWED, COMPLETED], "events of id %d" % i)
        gens = [r["generation"] for f in files for r in read_audit(f)]
        check(set(gens_live) <= set(gens),
              "events of every generation that served (%r) in one chain: %r"
              % (gens_live, set(gens)))
        # Whether the old instance wrote after the new one had (the file truly
        # shared line by line) depends on timing: said, not asserted. The
        # chain verifying and every acknowledged call's two events are the test.
        back = sum(1 for a, b in zip(gens, gens[1:]) if b < a)
        print("    %d line(s) of an older generation after a newer one's" % back)

    def tampered(edit, files=None):
        """Copies of the set with `edit(copies)` applied; verify's answer."""
        d = ctx.path(ctx.unique("tamper"))
        os.mkdir(d)
        copies = []
        for f in state["files"]:
            copies.append(os.path.join(d, os.path.basename(f)))
            shutil.copyfile(f, copies[-1])
        edit(copies)
        rc, out = audit_verify(ctx, files(copies) if files else copies)
        return copies, rc, out

    def expect_break(copies, rc, out, path, line, what):
        check(rc == 1, "exit 1 expected, got %d:\n%s" % (rc, out))
        want = "%s:%d: %s:" % (path, line, what)
        check(out.startswith(want), "expected %r, got:\n%s" % (want, out))

    def target(copies):
        return copies[-2]  # the newest rotated file: full, and chained on both ends

    def in_target(change):
        """An edit of target()'s lines: change(lines) alters the list in place."""
        def edit(copies):
            ls = lines_of(target(copies))
            change(ls)
            write_lines(target(copies), ls)
        return edit

    def t_field_changed():
        def change(ls):
            check(b'"tool":"echo"' in ls[2], "line 3: %r" % ls[2])
            ls[2] = ls[2].replace(b'"tool":"echo"', b'"tool":"rm"')
        copies, rc, out = tampered(in_target(change))
        expect_break(copies, rc, out, target(copies), 3, "edited")

    def t_line_deleted():
        copies, rc, out = tampered(in_target(lambda ls: ls.pop(4)))
        expect_break(copies, rc, out, target(copies), 5, "deleted")

    def t_lines_swapped():
        def change(ls):
            ls[3], ls[4] = ls[4], ls[3]
        copies, rc, out = tampered(in_target(change))
        expect_break(copies, rc, out, target(copies), 4, "reordered")

    def t_line_inserted():
        # a copy of line 2 after line 6
        copies, rc, out = tampered(in_target(lambda ls: ls.insert(6, ls[1])))
        expect_break(copies, rc, out, target(copies), 7, "inserted")

    def t_first_line_of_rotated_file():
        def edit(copies):
            ls = lines_of(copies[1])
            rec = json.loads(ls[0])
            check_eq(rec["line"], len(lines_of(copies[0])) + 1, "continues the file before")
            ls[0] = ls[0].replace(b'"event":"mcpg.tool.call.', b'"event":"mcpg.tool.kall.')
            write_lines(copies[1], ls)
        copies, rc, out = tampered(edit)
        expect_break(copies, rc, out, copies[1], 1, "edited")

    def t_file_left_out():
        copies, rc, out = tampered(lambda c: None, files=lambda c: c[:2] + c[3:])
        expect_break(copies, rc, out, copies[3], 1, "deleted")

    def t_files_out_of_order():
        copies, rc, out = tampered(lambda c: None, files=lambda c: [c[1], c[0]] + c[2:])
        expect_break(copies, rc, out, copies[0], 1, "reordered")

    def verify_anchored(files):
        rc, out, err = run_cli(ctx, ["audit", "verify", "--anchor", state["anchor"]] + list(files))
        return rc, out + err

    def t_anchored_intact():
        rc, out = verify_anchored(state["files"])
        total = 2 * len(state["acked"]) + 2
        check(rc == 0 and "anchored: line %d " % total in out,
              "the set against the anchor written at the stop: exit %d\n%s" % (rc, out))

    def anchored_after(edit_newest):
        """Copies of the set with the newest file that holds lines changed: (plain
        verify, anchored verify). The live file is empty when the last write
        rotated it: then the lines to edit are in the one before."""
        def edit(copies):
            newest = [c for c in copies if os.path.getsize(c)][-1]
            ls = lines_of(newest)
            edit_newest(ls)
            write_lines(newest, ls)
        copies, rc, out = tampered(edit)
        return (rc, out), verify_anchored(copies)

    def t_tail_cut():
        plain, anchored = anchored_after(lambda ls: ls.__delitem__(slice(-3, None)))
        check_eq(plain[0], 0, "without an anchor, a cut tail reads as intact (%s)" % plain[1])
        check(anchored[0] == 1 and "cut short" in anchored[1],
              "with the anchor, the cut is found: exit %d\n%s" % anchored)

    def t_emptied():
        plain, anchored = anchored_after(lambda ls: ls.clear())
        check(anchored[0] == 1 and "cut short" in anchored[1],
              "an emptied newest file against the anchor: exit %d\n%s" % anchored)

    def t_last_line_edited():
        def change(ls):
            ls[-1] = ls[-1].replace(b'"event":"mcpg.tool.call.', b'"event":"mcpg.tool.kall.')
        plain, anchored = anchored_after(change)
        check_eq(plain[0], 0, "without an anchor, an edited last line reads as intact")
        check(anchored[0] == 1 and "not the anchored line" in anchored[1],
              "with the anchor, the edit is found: exit %d\n%s" % anchored)

    def t_unreadable():
        rc, out = audit_verify(ctx, [ctx.path("no-such-file.jsonl")])
        check(rc == 2 and "no-such-file.jsonl" in out, "exit %d: %s" % (rc, out))

    tests = [
        ("load through two sinks, audit_file rotating", t_load),
        ("every acknowledged call has allowed and completed, with 1.2 fields", t_every_call_recorded),
        ("mcpg audit verify: the rotated set is intact", t_verify_intact),
        ("verify --anchor: intact, and holding the anchored head", t_anchored_intact),
        ("a tail cut off: intact alone, cut short against the anchor", t_tail_cut),
        ("the newest file emptied: cut short against the anchor", t_emptied),
        ("the last line edited: found only against the anchor", t_last_line_edited),
        ("audit_stdout wrote the same events, same formatter", t_stdout_sink),
        ("reloads under load: two instances on one file, one chain", t_reload_under_load),
        ("a field changed -> edited, its line", t_field_changed),
        ("a line deleted -> deleted, where it was", t_line_deleted),
        ("two lines swapped -> reordered", t_lines_swapped),
        ("a line inserted -> inserted", t_line_inserted),
        ("the first line of a rotated file edited", t_first_line_of_rotated_file),
        ("a rotated file left out -> deleted", t_file_left_out),
        ("files given out of order -> reordered", t_files_out_of_order),
        ("an unreadable file -> exit 2", t_unreadable),
    ]
    return run_tests(tests, ctx)


if __name__ == "__main__":
    sys.exit(main())
