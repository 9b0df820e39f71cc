#!/usr/bin/python3
"""The audit disk full or failing, under audit_file (fsync on), on one running gateway.

The fault comes from faultfs.so (tests/integration/faultfs.c, built by CMake), preloaded
into the gateway: while a control file exists, writes to files in the audit folder fail
with ENOSPC or EIO, or fdatasync fails with EIO, or a write is torn (half its bytes go
out, then ENOSPC). No root, no mount, no real full disk. For each fault in turn:
  * calls under the fault are refused: HTTP 503, JSON-RPC -32000 "audit write failed",
    Retry-After: 1 (the backend never runs for a call whose "allowed" is not on disk);
  * calls from four threads run through the fault's start and end: every call whose
    answer was a result has its allowed and completed lines on disk, in that order;
  * the fault removed, calls are served again by the same process (no restart), and
    the log says writes succeed again, once (and said the failure a few times, not once
    per failed batch);
and at the end the file ends with a whole line, holds no event twice, and `mcpg audit
verify` finds the chain intact (what a failed batch wrote was taken back out)."""
import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway import (Context, Gateway, audit_verify, base_manifest, call_tool,  # noqa: E402
                     check, check_eq, echo_load, expect_error, expect_result, parse_args,
                     read_audit, run_tests, wait_for)

ALLOWED = "mcpg.tool.call.allowed"
COMPLETED = "mcpg.tool.call.completed"
FAULTS = ["enospc", "eio", "eio-sync", "torn"]
THREADS = 4
REFUSED_CALLS = 8      # sequential calls made while a fault holds
RACE_SECONDS = 0.6     # load on each side of a fault's start and end


def sanitizer_runtime(binary):
    """The libasan the binary links (it must come first in LD_PRELOAD), or None."""
    try:
        out = subprocess.run(["ldd", binary], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    for ln in out.splitlines():
        name, _, rest = ln.strip().partition(" => ")
        if name.startswith("libasan.so"):
            return rest.split(" (")[0].strip()
    return None


def lines_size(path):
    """The bytes of the file's lines: its size less the room audit_file
    writes ahead of them (spaces)."""
    with open(path, "rb") as f:
        return len(f.read().rstrip(b" "))


def main():
    args = parse_args()
    ctx = Context(args)
    shim = os.path.join(os.path.dirname(args.modules), "tests", "integration", "faultfs.so")
    disk = ctx.path("disk")
    os.makedirs(disk)
    audit = os.path.join(disk, "audit.jsonl")
    control = ctx.path("fault")
    state = {"acked": [], "refused_at_allowed": [], "next": 1, "faults_done": 0}
    gw_box = {}

    def set_fault(word):
        if word is None:
            if os.path.exists(control):
                os.unlink(control)
            return
        with open(control + ".tmp", "w") as f:
            f.write(word + "\n")
        os.rename(control + ".tmp", control)

    def ids(n):
        first = state["next"]
        state["next"] += n
        return list(range(first, first + n))

    def t_start():
        check(os.path.exists(shim), "faultfs.so not built at %s (target faultfs)" % shim)
        preload = [shim]
        asan = sanitizer_runtime(args.bin)
        if asan:
            preload.insert(0, asan)  # the sanitizer's runtime must be the first object
        m = base_manifest(audit_path=audit, gateway={"workers": 2})
        m["modules"][-1]["config"]["fsync"] = True
        env = {"LD_PRELOAD": " ".join(preload), "MCPG_FAULT_PATH": disk + "/",
               "MCPG_FAULT_CONTROL": control}
        gw_box["gw"] = Gateway(ctx, manifest=m, env=env, name="disk").start()
        acked, failed = echo_load(gw_box["gw"].port, [ids(20)])
        check_eq((len(acked), failed), (20, []), "calls before any fault")
        state["acked"] += acked

    def load_across(port, change, what):
        """Echo calls from THREADS threads for RACE_SECONDS on each side of change();
        the ones answered with a result are kept to be found on disk later. Every
        other answer must be the 503 of a failed audit write."""
        stop = threading.Event()
        box = {}
        load = threading.Thread(target=lambda: box.update(r=echo_load(
            port, [ids(100000) for _ in range(THREADS)], stop=stop)))
        load.start()
        time.sleep(RACE_SECONDS)
        change()
        time.sleep(RACE_SECONDS)
        stop.set()
        load.join(30)
        check(not load.is_alive(), "the load threads ended")
        acked, failed = box["r"]
        state["acked"] += acked
        for i, status, body in failed:
            check_eq(status, 503, "call %d around the %s (%r)" % (i, what, body))
        return acked, failed

    def fault_case(word):
        def t():
            gw = gw_box["gw"]
            port = gw.port
            succeeded_before = gw.stderr().count("succeed again")
            # load across the fault's start
            load_across(port, lambda: set_fault(word), "start of " + word)
            # while the fault holds: every call refused, fail closed, and the file
            # exactly as it was (a torn write, a write whose sync failed: taken back)
            size = lines_size(audit)
            for i in ids(REFUSED_CALLS):
                r, rpc = call_tool(port, "echo", {"message": "hi"}, id=i)
                err = expect_error(r, 503, -32000, "call %d under %s" % (i, word), id=i)
                check_eq(err["message"], "audit write failed", "the refusal's message")
                check_eq(r.header("retry-after"), "1", "Retry-After under %s" % word)
                state["refused_at_allowed"].append(i)
            check_eq(lines_size(audit), size, "the size of the file's lines after %d calls refused "
                     "under %s" % (REFUSED_CALLS, word))
            # load across the fault's end
            acked, failed = load_across(port, lambda: set_fault(None), "end of " + word)
            # recovered, same process
            check(gw.proc.poll() is None, "the gateway still runs")
            i = ids(1)[0]
            r, rpc = call_tool(port, "echo", {"message": "hi"}, id=i)
            expect_result(r, rpc, i, "a call after the %s fault ended" % word)
            state["acked"].append(i)
            wait_for(lambda: gw.stderr().count("succeed again") == succeeded_before + 1, 5,
                     "the log saying writes succeed again")
            # thousands of failed batches, a few lines: a failing disk does not flood the log
            state["faults_done"] += 1
            errors = [ln for ln in gw.stderr().splitlines() if "failing the calls closed" in ln]
            check(1 <= len(errors) <= 2 * state["faults_done"],
                  "%d error lines after %d faults" % (len(errors), state["faults_done"]))
            sys.stdout.write("%s: around its end %d answered, %d refused; %d error lines in "
                             "the log so far\n" % (word, len(acked), len(failed), len(errors)))
        return t

    def t_nothing_acknowledged_lost():
        gw_box["gw"].stop()
        events = {}
        for r in read_audit(audit):
            events.setdefault(r.get("id"), []).append(r["event"])
        missing = [i for i in state["acked"] if events.get(i) != [ALLOWED, COMPLETED]]
        check(not missing, "%d answered calls without allowed then completed on disk, e.g. %r"
              % (len(missing), [(i, events.get(i)) for i in missing[:5]]))
        on_disk = [i for i in state["refused_at_allowed"] if i in events]
        check_eq(on_disk, [], "calls refused under a fault whose events are on disk")
        twice = [i for i, evs in events.items() if len(evs) != len(set(evs))]
        check_eq(twice, [], "ids with an event written twice")
        sys.stdout.write("%d calls answered with a result, all on disk; %d refused\n"
                         % (len(state["acked"]), len(state["refused_at_allowed"])))

    def t_verify():
        with open(audit, "rb") as f:
            data = f.read()
        check(data.endswith(b"\n"), "the file ends with a whole line: %r" % data[-80:])
        rc, out = audit_verify(ctx, [audit])
        check(rc == 0, "mcpg audit verify: exit %d\n%s" % (rc, out))
        check(out.startswith("intact: lines 1..") and "torn" not in out, out)
        sys.stdout.write(out)

    tests = [("start with faultfs preloaded; calls before any fault", t_start)]
    tests += [("%s: refused with 503 + Retry-After, recovered without a restart" % w,
               fault_case(w)) for w in FAULTS]
    tests += [("every answered call has allowed and completed on disk",
               t_nothing_acknowledged_lost),
              ("the file ends whole and verifies", t_verify)]
    try:
        return run_tests(tests, ctx)
    finally:
        set_fault(None)


if __name__ == "__main__":
    sys.exit(main())
