#!/usr/bin/python3
"""The kernel refuses bad modules at start, with one line naming the file and
what is wrong, and never listens; it loads valid fixture modules and serves
them: one built like any module today, and one whose every table is its ABI
1.0 size (fixture_v1_0.c), as a module built before the structs grew is.

Each fixture (built by tests/abi/CMakeLists.txt) is copied with transport_http.so
into a private module folder that the manifest names as gateway.module_dir; the
manifest has one backend instance of the fixture."""
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
from gateway import (Context, Gateway, _child_setup, call_tool, check, check_eq,  # noqa: E402
                     expect_result, fail, free_port, parse_args, port_is_listening,
                     abi_version, http_get, run_cli, run_tests, sanitizer_lines, send_one,
                     stateless_request, STOP_TIMEOUT)

# fixture -> the parts its one refusal line must contain (the agreed forms:
#   mcpg: FILE.so: ABI major 2, this kernel is 1: rebuild the module against ABI 1.x
#   mcpg: FILE.so: built for ABI 1.99, this kernel is 1.<minor> (minor too new)
#   mcpg: FILE.so: no symbol mcpg_module_entry (not an mcpg module)
#   mcpg: FILE.so: mandatory op backend.call_tool is missing
#   mcpg: FILE.so: bad magic 0x... (expected 0x6d637067)
#   mcpg: FILE.so: config field "limit" (offset 0, 8 bytes) lies outside config_size 4)
REFUSED = {
    "abi_wrong_major": ["ABI major 2", "this kernel is 1", "ABI 1.x"],
    "abi_newer_minor": ["ABI 1.99", "this kernel is {abi}", "minor too new"],
    "abi_no_entry": ["no symbol mcpg_module_entry", "not an mcpg module"],
    "abi_missing_op": ["mandatory op backend.call_tool is missing"],
    "abi_bad_magic": ["bad magic 0x12345678", "expected 0x6d637067"],
    "abi_config_overflow": ['config field "limit"', "outside config_size 4"],
}


def refused_grown(source):
    """abi_grown_minor.so (tests/abi/growth) was built against the ABI grown by
    one minor: today's kernel refuses it, naming both versions."""
    major, minor = abi_version(source)
    return ["built for ABI %d.%d" % (major, minor + 1), "this kernel is %d.%d" % (major, minor),
            "minor too new"]


def exported_symbols(path):
    """Defined dynamic symbols of a .so (nm -D), or None without binutils."""
    nm = shutil.which("nm")
    if not nm:
        return None
    out = subprocess.run([nm, "-D", "--defined-only", path], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, check=True).stdout.decode()
    syms = []
    for ln in out.splitlines():
        parts = ln.split()
        if len(parts) >= 3 and parts[1] in "TtDdBbRrVvWwi":
            syms.append(parts[2])
    return syms


def main():
    def extra(ap):
        ap.add_argument("--fixtures", required=True, help="folder with the fixture .so files")
    args = parse_args(extra)
    ctx = Context(args)
    fixtures = os.path.abspath(args.fixtures)

    def module_dir_with(fixture):
        d = ctx.path(ctx.unique("mods-" + fixture))
        os.makedirs(d)
        src = os.path.join(fixtures, fixture + ".so")
        check(os.path.exists(src), "fixture %s is missing (build tests/abi)" % src)
        shutil.copy(src, d)
        transport = os.path.join(ctx.modules, "transport_http.so")
        check(os.path.exists(transport), "%s is missing" % transport)
        shutil.copy(transport, d)
        return d

    def manifest_for(fixture, module_dir, config=None):
        instance = {"name": "fx", "module": fixture}
        if config is not None:
            instance["config"] = config
        return {
            "gateway": {"module_dir": module_dir, "workers": 1},
            "cluster": {"kind": "single_node"},
            "modules": [instance],
            "pipeline": {"identity": [], "policy": [], "limits": [], "audit": []},
            "bindings": [{"backend": "fx"}],
        }

    def refused(fixture, parts):
        def t():
            mdir = module_dir_with(fixture)
            path = ctx.write_manifest(manifest_for(fixture, mdir), fixture + ".json")
            port = free_port()
            errp = ctx.path(fixture + ".stderr")
            with open(errp, "wb") as err:
                p = subprocess.Popen([ctx.bin, "--config", path, "--listen",
                                      "127.0.0.1:%d" % port], stdout=subprocess.DEVNULL,
                                     stderr=err, preexec_fn=_child_setup, cwd=ctx.tmp)
                listened = False
                deadline = time.monotonic() + STOP_TIMEOUT
                try:
                    # Probe the port until it exits: a refused module must never
                    # get as far as accepting connections.
                    while p.poll() is None and time.monotonic() < deadline:
                        if port_is_listening(port, timeout=0.2):
                            listened = True
                        time.sleep(0.02)
                finally:
                    if p.poll() is None:
                        p.kill()
                        p.wait()
                        fail("gateway with %s.so still running after %ss; killed"
                             % (fixture, STOP_TIMEOUT))
            with open(errp, "rb") as f:
                text = f.read().decode("utf-8", "replace")
            check(not sanitizer_lines(text), "sanitizer report:\n" + text)
            check(p.returncode != 0, "gateway with %s.so exited 0; it must refuse to start\n%s"
                  % (fixture, text))
            check(not listened, "gateway with %s.so accepted connections on %d before refusing"
                  % (fixture, port))
            check(not port_is_listening(port), "port %d still listening" % port)
            so = fixture + ".so"
            lines = [ln for ln in text.splitlines() if so in ln]
            check_eq(len(lines), 1, "lines naming %s on stderr (stderr:\n%s)" % (so, text))
            line = lines[0]
            # Key parts, not the whole line: "<...>/FILE.so: <what>" with the numbers
            # or the op name in <what> (the prefix before the path may vary).
            check(("/" + so + ": ") in line or line.startswith(so + ": "),
                  "the line must name the file as '.../%s: ': %r" % (so, line))
            what = line.split(so + ": ", 1)[1]
            abi = "%d.%d" % abi_version(ctx.source)
            for part in (p.format(abi=abi) for p in parts):
                check(part in what, "the line must say %r after the file name: %r" % (part, line))
            # --check refuses the same manifest (exit 2) and names the file too.
            rc, out, err = run_cli(ctx, ["--check", "--config", path])
            check_eq(rc, 2, "--check exit code with %s (output:\n%s)" % (so, out + err))
            check(so in out + err, "--check must name %s: %r" % (so, out + err))
        return t

    def t_fixtures_are_what_they_claim():
        syms = exported_symbols(os.path.join(fixtures, "abi_no_entry.so"))
        if syms is None:
            print("note: nm not found, fixture symbol check skipped")
            return
        check("mcpg_module_entry" not in syms, "abi_no_entry.so exports mcpg_module_entry")
        for f in ("abi_wrong_major", "abi_newer_minor", "abi_missing_op", "abi_bad_magic",
                  "abi_config_overflow", "abi_good", "abi_v1_0", "abi_metrics_v1_0",
                  "abi_grown_minor"):
            syms = exported_symbols(os.path.join(fixtures, f + ".so"))
            check("mcpg_module_entry" in syms, "%s.so must export mcpg_module_entry" % f)
        syms = [s for s in exported_symbols(os.path.join(fixtures, "abi_good.so"))
                if not s.startswith("_")]
        check_eq(syms, ["mcpg_module_entry"], "abi_good.so exports")

    def t_good_module_loads():
        mdir = module_dir_with("abi_good")
        gw = Gateway(ctx, manifest=manifest_for("abi_good", mdir), name="abi_good")
        with gw:
            r = send_one(gw.port, stateless_request(gw.port, "tools/list", {}, id=1))
            result = expect_result(r, r.rpc(), 1, "tools/list")
            names = [t.get("name") for t in result.get("tools", [])]
            check_eq(names, ["fixture_ping"], "tools of the abi_good fixture")
            r, rpc = call_tool(gw.port, "fixture_ping", {}, id=2)
            result = expect_result(r, rpc, 2, "tools/call fixture_ping")
            check_eq(result.get("content"), [{"type": "text", "text": "pong"}],
                     "fixture_ping content")

    def t_v1_0_module_loads():
        mdir = module_dir_with("abi_v1_0")
        manifest = manifest_for("abi_v1_0", mdir, config={"limit": 3, "ratio": 0.75})
        gw = Gateway(ctx, manifest=manifest, name="abi_v1_0")
        with gw:
            r = send_one(gw.port, stateless_request(gw.port, "tools/list", {}, id=1))
            result = expect_result(r, r.rpc(), 1, "tools/list")
            names = [t.get("name") for t in result.get("tools", [])]
            check_eq(names, ["v1_ping"], "tools of the abi_v1_0 fixture")
            r, rpc = call_tool(gw.port, "v1_ping", {}, id=2)
            result = expect_result(r, rpc, 2, "tools/call v1_ping")
            check_eq(result.get("content"), [{"type": "text", "text": "limit=3 ratio=0.75"}],
                     "v1_ping content (its config, read at the 1.0 stride)")

    def t_metrics_v1_0_served():
        mdir = module_dir_with("abi_metrics_v1_0")
        manifest = manifest_for("abi_metrics_v1_0", mdir)
        del manifest["bindings"]
        gw = Gateway(ctx, manifest=manifest, name="abi_metrics_v1_0")
        with gw:
            status, headers, body = http_get(gw.port, "/metrics")
            check_eq(status, 200, "GET /metrics from a 1.0-sized metrics module")
            check_eq(dict(headers).get("content-type"), "text/plain; version=0.0.4; charset=utf-8",
                     "the default media type: the kernel did not read content_type")
            check_eq(body, b"# TYPE abi_v1_0_renders counter\nabi_v1_0_renders 1\n", "its text")

    def t_v1_0_double_bounds():
        mdir = module_dir_with("abi_v1_0")
        manifest = manifest_for("abi_v1_0", mdir, config={"ratio": 2.6})
        path = ctx.write_manifest(manifest, "abi_v1_0_bounds.json")
        rc, out, err = run_cli(ctx, ["--check", "--config", path])
        check_eq(rc, 2, "--check exit code (output:\n%s)" % (out + err))
        check("config.ratio: must be between 0.5 and 2.5" in out + err,
              "--check must give the double bounds: %r" % (out + err))

    tests = [("fixtures export what they claim", t_fixtures_are_what_they_claim)]
    refusals = dict(REFUSED, abi_grown_minor=refused_grown(ctx.source))
    for fixture, parts in refusals.items():
        tests.append(("refuses %s.so" % fixture, refused(fixture, parts)))
    tests.append(("loads and serves abi_good.so", t_good_module_loads))
    tests.append(("loads and serves abi_v1_0.so (1.0-sized tables)", t_v1_0_module_loads))
    tests.append(("abi_v1_0.so: DOUBLE bounds 0.5..2.5", t_v1_0_double_bounds))
    tests.append(("serves /metrics from abi_metrics_v1_0.so (1.0-sized metrics ops)",
                  t_metrics_v1_0_served))
    return run_tests(tests, ctx)


if __name__ == "__main__":
    sys.exit(main())
