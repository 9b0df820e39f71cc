#!/usr/bin/python3
"""The private runtime folder: a gateway keeps its module copies in $TMPDIR/mcpg-<pid>-*,
removes it when it stops, and at start sweeps the folders of gateways that are gone
(killed before they could clean up) while leaving those of running processes alone."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway import (Context, Gateway, base_manifest, call_tool, check, check_eq,  # noqa: E402
                     expect_result, parse_args, run_tests)


def dead_pid():
    pid = 4000000
    while os.path.exists("/proc/%d" % pid):
        pid += 1
    return pid


def main():
    args = parse_args()
    ctx = Context(args)

    def t_sweep():
        tmp = ctx.path("tmpdir")
        os.makedirs(tmp, exist_ok=True)
        stale = os.path.join(tmp, "mcpg-%d-abcdef" % dead_pid())
        alive = os.path.join(tmp, "mcpg-%d-ghijkl" % os.getpid())
        keep = os.path.join(tmp, "mcpg-%d-mnopqr" % dead_pid())
        for d in (stale, alive, keep):
            os.makedirs(d)
            open(os.path.join(d, "backend_mock.0123456789abcdef.so"), "w").close()
        open(os.path.join(keep, "notes.txt"), "w").close()  # not a module copy: keep it
        with Gateway(ctx, manifest=base_manifest(), env={"TMPDIR": tmp}, name="rt") as gw:
            mine = [e for e in os.listdir(tmp) if e.startswith("mcpg-%d-" % gw.proc.pid)]
            check_eq(len(mine), 1, "the gateway's own runtime folder in %r" % os.listdir(tmp))
            check(any(f.endswith(".so") for f in os.listdir(os.path.join(tmp, mine[0]))),
                  "module copies in the runtime folder")
            r, rpc = call_tool(gw.port, "echo", {"message": "hi"}, id=1)
            expect_result(r, rpc, 1, "a call")
        check(not os.path.exists(stale), "the folder of a gone gateway is swept")
        check(os.path.exists(alive), "the folder of a running process is left alone")
        check(os.path.exists(os.path.join(keep, "notes.txt")), "a folder with other files is kept")
        left = [e for e in os.listdir(tmp) if e.startswith("mcpg-") and e not in
                (os.path.basename(alive), os.path.basename(keep))]
        check_eq(left, [], "the gateway removed its own folder when it stopped")

    def t_crashed_kept_bounded():
        """The folders of crashed gateways keep their copies (a core file names them), the
        five newest crashes only: a gateway crashing in a loop does not fill the disk."""
        tmp = ctx.path("crashes")
        os.makedirs(tmp, exist_ok=True)
        dirs = []
        for i in range(7):
            d = os.path.join(tmp, "mcpg-%d-crash%d" % (dead_pid() + i, i))
            os.makedirs(d)
            open(os.path.join(d, "backend_mock.0123456789abcdef.so"), "w").close()
            crash = os.path.join(d, "crash.txt")
            with open(crash, "w") as f:
                f.write("mcpg: fatal SIGSEGV\n")
            os.utime(crash, (1700000000 + 60 * i, 1700000000 + 60 * i))  # i-th crash, in order
            dirs.append(d)
        with Gateway(ctx, manifest=base_manifest(), env={"TMPDIR": tmp}, name="rt-crash"):
            pass
        for i, d in enumerate(dirs):
            copies = [f for f in os.listdir(d) if f.endswith(".so")]
            check(os.path.exists(os.path.join(d, "crash.txt")), "crash %d: crash.txt kept" % i)
            if i < 2:
                check_eq(copies, [], "crash %d (older than the five newest): copies removed" % i)
            else:
                check_eq(len(copies), 1, "crash %d (one of the five newest): copies kept" % i)

    return run_tests([("runtime folder: own copies, removed at stop, stale ones swept", t_sweep),
                      ("crashed folders: the five newest keep their copies",
                       t_crashed_kept_bounded)], ctx)


if __name__ == "__main__":
    sys.exit(main())
