#!/usr/bin/python3
"""docs/compliance.md stays true to the tree: every requirement row is well
formed (an id, the requirement, its section, the revision, a known status,
what proves it), ids are unique, a row said to hold names the test that
proves it, every ctest name the page cites is a test this build registers,
and the summary counts are the rows' own. Run by ctest as docs_compliance."""
import argparse
import collections
import re
import subprocess
import sys

STATUSES = ("held (untested)", "held", "partly", "not yet", "not applicable")
# the prefixes of ctest names (a cited name that starts so must be registered)
TEST_NAME = re.compile(r"^(integration_|conformance_|kernel_|module\.|transport_http\.|lib\.|"
                       r"abi_|fuzz\.|proxy_|clients_|unit\.|outoftree_)[A-Za-z0-9_.\-]+$")
ROW = re.compile(r"^\| ([A-Z]\d+) \|")


def status_of(cell):
    for s in STATUSES:
        if cell.startswith(s):
            return s
    return None


def registered(ctest, build):
    out = subprocess.run([ctest, "-N"], cwd=build, capture_output=True, text=True,
                         check=True).stdout
    return set(re.findall(r"Test\s+#\d+: (\S+)", out))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--page", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--ctest", default="ctest")
    args = ap.parse_args()
    names = registered(args.ctest, args.build)
    problems, counts, ids = [], collections.Counter(), set()
    summary = {}
    with open(args.page, encoding="utf-8") as f:
        lines = f.read().split("\n")
    in_summary = False
    for n, line in enumerate(lines, 1):
        if line.startswith("## Summary"):
            in_summary = True
        m = ROW.match(line)
        if m:
            cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
            rid = m.group(1)
            if len(cells) != 6:
                problems.append("line %d (%s): %d cells, not 6" % (n, rid, len(cells)))
                continue
            if rid in ids:
                problems.append("line %d: %s listed twice" % (n, rid))
            ids.add(rid)
            st = status_of(cells[4])
            if st is None:
                problems.append("line %d (%s): unknown status %r" % (n, rid, cells[4][:40]))
                continue
            counts[st] += 1
            cited = re.findall(r"`([^`]+)`", cells[5])
            tests = [c for c in cited if TEST_NAME.match(c)]
            for t in tests:
                if t not in names:
                    problems.append("line %d (%s): cites %s, which this build does not register"
                                    % (n, rid, t))
            if st == "held" and not tests:
                problems.append("line %d (%s): held, but no test named" % (n, rid))
        elif in_summary:
            s = re.match(r"^\| (held \(untested\)|held|partly|not yet|not applicable) \| (\d+) \|$",
                         line)
            if s:
                summary[s.group(1)] = int(s.group(2))
    for st in STATUSES:
        if summary.get(st, 0) != counts.get(st, 0):
            problems.append("summary says %d %s, the rows %d" % (summary.get(st, 0), st,
                                                               counts.get(st, 0)))
    print("%d rows: %s" % (sum(counts.values()),
                           ", ".join("%d %s" % (counts[s], s) for s in STATUSES)))
    for p in problems:
        print("FAIL " + p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
