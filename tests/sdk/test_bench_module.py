#!/usr/bin/python3
"""mcpg-bench-module: one op of a module, per call, beside a null module's.

Runs it on backend_mock's echo and on the fx_policy fixture, 200 calls each:
the table's and the JSON's shape, instructions (the hardware counter when the
kernel gives one, else --callgrind) above zero and above the baseline's, and
refusals that say what is wrong: an unknown tool, a denied call, a config key,
a file that is not a module.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

CALLS = "200"
TIMEOUT = 300


class TestFailure(Exception):
    pass


def check(cond, msg):
    if not cond:
        raise TestFailure(msg)


def bench(args, *extra):
    argv = [args.bench] + list(extra)
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=TIMEOUT)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def bench_ok(args, *extra):
    rc, out, err = bench(args, *extra)
    check(rc == 0, "%s exited %d: %s" % (" ".join(extra), rc, err))
    return out


def check_figures(fig, what):
    for key in ("instructions", "wall_ns", "cpu_ns", "allocs"):
        check(key in fig, "%s: no %s in %r" % (what, key, fig))
    check(fig["wall_ns"] > 0 and fig["cpu_ns"] > 0, "%s: times not above 0: %r" % (what, fig))
    check(fig["allocs"] >= 0, "%s: negative allocations: %r" % (what, fig))


def check_instructions(rep, what):
    m, b = rep["module_per_call"]["instructions"], rep["baseline_per_call"]["instructions"]
    check(b is not None and b > 0, "%s: baseline instructions %r" % (what, b))
    check(m is not None and m > b, "%s: module's instructions %r not above the baseline's %r"
          % (what, m, b))
    check(abs(rep["added_per_call"]["instructions"] - (m - b)) < 1, "%s: added is not module - baseline"
          % what)


def measured(args, what, *extra):
    """The JSON report, with instructions from perf or, without it, callgrind."""
    rep = json.loads(bench_ok(args, *(list(extra) + ["-n", CALLS, "--json"])))
    check(rep["calls"] == int(CALLS), "%s: calls %r" % (what, rep["calls"]))
    for part in ("module_per_call", "baseline_per_call"):
        check_figures(rep[part], "%s %s" % (what, part))
    check("added_per_call" in rep, "%s: no added_per_call in %r" % (what, rep))
    if rep.get("instructions_source"):
        check_instructions(rep, what)
        return rep
    check(rep.get("instructions_unavailable"), "%s: no instructions and no reason: %r" % (what, rep))
    rep = json.loads(bench_ok(args, *(list(extra) + ["-n", CALLS, "--json", "--callgrind"])))
    check(rep.get("instructions_source") == "callgrind", "%s: %r" % (what, rep))
    check_instructions(rep, what + " (callgrind)")
    return rep


def test_backend_mock_echo(args):
    rep = measured(args, "backend_mock echo", os.path.join(args.modules, "backend_mock.so"),
                   "--tool", "echo", "--args", '{"message":"hi"}')
    check(rep["module"] == "backend_mock" and rep["kind"] == "backend" and rep["op"] == "tools/call",
          "names: %r" % rep)
    check(rep["module_per_call"]["allocs"] > rep["baseline_per_call"]["allocs"],
          "echo allocates nothing beyond the null op: %r" % rep)


def test_fixture_policy(args):
    rep = measured(args, "fx_policy", os.path.join(args.test_modules, "fx_policy.so"),
                   "--tool", "echo")
    check(rep["kind"] == "policy" and rep["op"] == "check", "names: %r" % rep)


def test_table(args):
    out = bench_ok(args, os.path.join(args.modules, "backend_mock.so"), "--args",
                   '{"message":"hi"}', "-n", CALLS)
    lines = out.splitlines()
    check(lines[0].startswith('backend_mock (backend ') and "200 calls" in lines[0], out)
    check(lines[1].split() == ["per", "call", "instructions", "wall_ns", "cpu_ns", "allocs"], out)
    for i, name in ((2, "backend_mock"), (3, "baseline (null op)"), (4, "module adds")):
        check(lines[i].startswith(name) and len(lines[i][20:].split()) == 4, out)
    check(lines[5].startswith("instructions: "), out)


def test_refusals(args):
    mock = os.path.join(args.modules, "backend_mock.so")
    rc, _, err = bench(args, mock, "--tool", "no_such_tool", "-n", CALLS)
    check(rc != 0 and 'tools/call of "no_such_tool" failed' in err and "no_such_tool" in err.split(":", 2)[2],
          "unknown tool: exit %d, %r" % (rc, err))
    rc, _, err = bench(args, os.path.join(args.test_modules, "fx_policy.so"), "--tool", "secret_x")
    check(rc != 0 and 'check of "secret_x" failed' in err, "denied call: exit %d, %r" % (rc, err))
    rc, _, err = bench(args, mock, "--config", '{"no_such_key":1}')
    check(rc != 0 and "no_such_key" in err, "config key: exit %d, %r" % (rc, err))
    with tempfile.TemporaryDirectory() as tmp:
        text = os.path.join(tmp, "text.so")
        with open(text, "w") as f:
            f.write("not a module\n")
        rc, _, err = bench(args, text)
        check(rc != 0 and text in err and "not a loadable module" in err, "text file: %d %r" % (rc, err))
    rc, _, err = bench(args, "libm.so.6")
    check(rc != 0 and "libm.so.6: not an mcpg module (it exports no mcpg_module_entry)" in err,
          "a library that is not a module: exit %d, %r" % (rc, err))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", required=True, help="build/bin/mcpg-bench-module")
    ap.add_argument("--modules", required=True, help="build/modules")
    ap.add_argument("--test-modules", required=True, help="build/test-modules (fx_policy.so)")
    args = ap.parse_args()
    failed = 0
    for fn in (test_backend_mock_echo, test_fixture_policy, test_table, test_refusals):
        try:
            fn(args)
            print("PASS %s" % fn.__name__)
        except (TestFailure, subprocess.TimeoutExpired, ValueError, KeyError) as e:
            failed += 1
            print("FAIL %s: %s" % (fn.__name__, e))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
