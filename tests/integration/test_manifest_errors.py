#!/usr/bin/python3
"""`mcpg --check` on broken manifests: exit 2 and exactly the expected
`FILE: path.to.key: message` lines (one per error, all errors reported), each
${VAR} error at the key whose value holds it; warnings as
`FILE: key: warning: what` lines with exit 0; a manifest --check passes
starts, one it fails does not start and says the same. Also: --check on the
shipped manifests exits 0, and --version prints the version and the ABI
version."""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway import (Context, Gateway, Skip, abi_version, base_manifest, call_tool, check,  # noqa: E402
                     check_eq, expect_result, parse_args, run_cli, run_tests)


def main():
    args = parse_args()
    ctx = Context(args)
    audit = ctx.path("audit.jsonl")

    def check_manifest(manifest, expected, prefixes=(), env=None, env_unset=()):
        """expected: exact lines (after 'FILE: '); prefixes: lines that must start so."""
        path = ctx.write_manifest(manifest)
        rc, out, err = run_cli(ctx, ["--check", "--config", path], env=env, unset=env_unset)
        text = out + err
        lines = [ln for ln in text.splitlines() if ln.startswith(path + ": ")]
        got = [ln[len(path) + 2:] for ln in lines]
        check_eq(rc, 2, "exit code of --check (output:\n%s)" % text)
        want = len(expected) + len(prefixes)
        check(len(got) == want,
              "expected %d error line(s) starting %r, got %d:\n%s"
              % (want, path + ": ", len(got), text))
        for exp in expected:
            check(exp in got, "missing line %r\nin output:\n%s" % (path + ": " + exp, text))
        rest = [g for g in got if g not in expected]
        for pre in prefixes:
            match = [g for g in rest if g.startswith(pre)]
            check(match, "missing a line starting %r\nin output:\n%s" % (path + ": " + pre, text))
            rest.remove(match[0])

    def good():
        return base_manifest(audit_path=audit)

    def case(mutate, expected=(), prefixes=(), **kw):
        def t():
            m = good()
            mutate(m)
            check_manifest(m, list(expected), list(prefixes), **kw)
        return t

    def t_invalid_json():
        check_manifest('{\n  "gateway": {\n    "workers": 1,\n  }\n}\n', [],
                       ["(root): invalid JSON at line"])

    def m_gatway(m):
        m["gatway"] = m.pop("gateway")

    def m_workers(m):
        m["gateway"]["workers"] = -1

    def m_listen(m):
        m["gateway"]["listen"] = ["nohostport"]

    def m_no_module(m):
        m["modules"] = [{"name": "mock", "module": "backend_nope"}]
        m["pipeline"]["audit"] = []
        m["bindings"] = []

    def m_dup(m):
        m["modules"].insert(1, {"name": "mock", "module": "backend_mock",
                                "config": {"tools": [{"name": "echo2"}]}})

    def m_bad_name(m):
        m["modules"][0]["name"] = "a b"
        m["bindings"] = []

    def m_config_key(m):
        m["modules"][0]["config"] = {"tols": []}

    def m_access_log(m):
        m["gateway"]["server"] = {"access_log": "yes"}

    def m_pipe_undefined(m):
        m["pipeline"]["audit"] = ["nope"]

    def m_pipe_kind(m):
        m["pipeline"]["audit"] = ["mock"]

    def m_binding(m):
        m["bindings"] = [{"backend": "x"}]

    def m_unset_env(m):
        m["gateway"]["name"] = "${UNSET_VAR}"

    def m_unset_env_twice(m):
        m["description"] = "audits to ${UNSET_VAR}/a.jsonl"
        m["modules"][1]["config"]["path"] = "${UNSET_VAR}/a.jsonl"
        m["gateway"]["listen"] = ["${UNSET_VAR}"]

    def m_unterminated(m):
        m["gateway"]["name"] = "${OOPS"

    def m_bad_var_name(m):
        m["gateway"]["name"] = "${A B}"

    def m_module_typo(m):
        m["modules"][0]["module"] = "backend_mokc"

    def m_module_dir(m):
        m["gateway"]["module_dir"] = "mods"

    def t_module_dir():
        m = good()
        m_module_dir(m)
        path = ctx.write_manifest(m)
        mods = os.path.join(os.path.dirname(path), "mods")
        check(not os.path.exists(mods), "%s must not exist for this case" % mods)
        check_manifest(m, ['gateway.module_dir: "mods" (resolved to %s): no such folder' % mods])

    def m_audit_folder(m):
        m["modules"][1]["config"]["path"] = ctx.path("missing-folder/a.jsonl")

    def t_audit_folder_start():
        """A start with the manifest --check refused prints the same line; one
        --check passes (the folder made) starts and audits a call."""
        m = good()
        m_audit_folder(m)
        line = "modules[1].config.path: folder %s does not exist" % ctx.path("missing-folder")
        check_manifest(m, [line])
        path = ctx.write_manifest(m)
        rc, out, err = run_cli(ctx, ["--config", path, "--listen", "127.0.0.1:1"])
        check_eq(rc, 2, "exit code of a start --check refuses (output:\n%s)" % (out + err))
        check(path + ": " + line in (out + err).splitlines(),
              "the start says %r:\n%s" % (line, out + err))
        os.mkdir(ctx.path("missing-folder"))
        rc, out, err = run_cli(ctx, ["--check", "--config", path])
        check_eq(rc, 0, "--check once the folder exists (output:\n%s)" % (out + err))
        with Gateway(ctx, manifest=m, name="checked") as gw:
            r, rpc = call_tool(gw.port, "echo", {"message": "hi"}, id=1)
            expect_result(r, rpc, 1, "a call to the gateway --check passed")
        with open(ctx.path("missing-folder/a.jsonl")) as f:
            check('"echo"' in f.read(), "the call is in the audit file")

    def t_warning_lines():
        """A warning is a FILE: key: warning: line, no JSON log line; exit 0."""
        m = good()
        m["gateway"]["listen"] = ["0.0.0.0:18787"]
        path = ctx.write_manifest(m)
        rc, out, err = run_cli(ctx, ["--check", "--config", path])
        text = out + err
        check_eq(rc, 0, "--check with a warning only (output:\n%s)" % text)
        want = ("%s: gateway.listen[0]: warning: listening on 0.0.0.0:18787 beyond loopback with "
                "no identity stage: anyone who can reach it may call every tool (add identity "
                "modules to pipeline.identity)" % path)
        check_eq(text.splitlines(), [want], "the only output line")
        path = os.path.join(ctx.source, "conf", "events.json")  # a module's warning at create()
        rc, out, err = run_cli(ctx, ["--check", "--config", path], unset=["MCPG_EVENTS_SECRET"])
        want = ('%s: events: warning: source "bench": MCPG_EVENTS_SECRET is unset: it is off (404)'
                % path)
        check_eq((rc, (out + err).splitlines()), (0, [want]), "--check conf/events.json")

    def m_nats(m):
        m["cluster"] = {"kind": "nats"}

    def m_three(m):
        m["gateway"]["workers"] = -1
        m["gateway"]["listen"] = ["nohostport"]
        m["gateway"]["server"] = {"access_log": "yes"}

    def m_nats_memory(m):
        m["cluster"] = {"kind": "nats"}
        m["modules"].append({"name": "cluster", "module": "coordinator_memory"})

    def t_nats():
        if not os.path.exists(os.path.join(ctx.modules, "coordinator_nats.so")):
            case(m_nats, ['cluster.kind: "nats" needs the coordinator_nats module, '
                          'which this build does not have'])()
            return
        case(m_nats, ['cluster.kind: "nats" needs a coordinator_nats instance in modules '
                      '(its config says where the store is)'])()
        case(m_nats_memory, ['cluster.kind: "nats" needs its coordinator to be coordinator_nats, '
                             'not "coordinator_memory" (instance "cluster")'])()

    def shipped(name):
        def t():
            path = os.path.join(ctx.source, "conf", name)
            check(os.path.exists(path), "%s is missing" % path)
            rc, out, err = run_cli(ctx, ["--check", "--config", path])
            check_eq(rc, 0, "--check %s exit code (output:\n%s)" % (name, out + err))
        return t

    def t_version():
        rc, out, err = run_cli(ctx, ["--version"])
        check_eq(rc, 0, "--version exit code")
        text = out + err
        with open(os.path.join(ctx.source, "CMakeLists.txt")) as f:
            m = re.search(r"project\(\s*mcpg\s+VERSION\s+([0-9][0-9.]*)", f.read())
        check(m, "no project VERSION in CMakeLists.txt")
        check(m.group(1) in text, "--version must print %s: %r" % (m.group(1), text))
        abi = "ABI %d.%d" % abi_version(ctx.source)
        check(abi in text, "--version must print %r: %r" % (abi, text))

    def m_listen_empty(m):
        m["gateway"]["listen"] = []

    def m_tool_name(m):
        m["modules"][0]["config"]["tools"] = [{"name": "x" * 60}]
        m["bindings"] = [{"backend": "mock", "prefix": "averylongprefix"}]

    def m_watch(m):
        m["bindings"] = [{"backend": "mock", "watch": {"resources": ["mock://x"], "intervall_ms": 5}}]
        m["gateway"]["watch"] = {"shards": 0}

    def m_pool(m):
        m["gateway"]["pool"] = {"threads": 0, "queu": 8}

    def m_cluster_kind(m):
        m["cluster"] = {"kind": "etcd"}

    def t_help_module():
        rc, out, err = run_cli(ctx, ["--help-module", "backend_mock"])
        check_eq(rc, 0, "--help-module backend_mock exit code (%s)" % err)
        check("backend module, ABI %d.%d" % abi_version(ctx.source) in out,
              "kind and the ABI it was built for in: %r" % out)
        check("tools (JSON" in out and "stats_tool (boolean, default false)" in out,
              "config keys from the schema in: %r" % out)
        rc, out, err = run_cli(ctx, ["--help-module", "transport_http"])
        check("config (gateway.server)" in out and 'access_log (JSON, default "auto")' in out,
              "the transport's keys are gateway.server's: %r" % out)
        rc, out, err = run_cli(ctx, ["--help-module", "backend_nope"])
        check_eq(rc, 2, "--help-module of a missing module")
        check('no module "backend_nope"' in err, "names the missing module: %r" % err)

    def t_help_settings():
        rc, out, err = run_cli(ctx, ["--help-module", "gateway"])
        check_eq(rc, 0, "--help-module gateway exit code (%s)" % err)
        for line in ["settings (gateway):", "workers (integer, 0..256, default 0)",
                     'log_level (one of error|warn|info|debug, default "info")',
                     "settings (gateway.pool):", "threads (integer, 1..256, default 4)",
                     "settings (gateway.metrics):", "max_tools (integer, 0..16384, default 1000)"]:
            check(line in out, "%r in the gateway's settings: %r" % (line, out))
        check("settings (cluster)" not in out, "gateway's settings only: %r" % out)
        rc, out, err = run_cli(ctx, ["--help-module", "cluster"])
        check_eq(rc, 0, "--help-module cluster exit code (%s)" % err)
        check('kind (one of single_node|nats|redis, default "single_node")' in out,
              "cluster.kind with its values and default: %r" % out)

    tests = [
        ("invalid JSON", t_invalid_json),
        ("gateway.listen empty", case(m_listen_empty, ["gateway.listen: needs at least one HOST:PORT"])),
        ("a binding that makes a tool name too long",
         case(m_tool_name, ['bindings[0]: tool "%s" would be named "averylongprefix_%s", which '
                            'does not match ^[a-zA-Z0-9_-]{1,64}$' % ("x" * 60, "x" * 60)])),
        ("--help-module", t_help_module),
        ("--help-module gateway and cluster: the gateway's own settings", t_help_settings),
        ("gateway.pool: unknown key and bounds (its own schema)",
         case(m_pool, ['gateway.pool.queu: unknown key (did you mean "queue"?)',
                       "gateway.pool.threads: must be between 1 and 256"])),
        ("cluster.kind outside its values", case(m_cluster_kind, [
            "cluster.kind: must be one of: single_node, nats, redis"])),
        ("unknown top-level key (did you mean)",
         case(m_gatway, ['gatway: unknown key (did you mean "gateway"?)'])),
        ("gateway.workers out of range", case(m_workers, ["gateway.workers: must be between 0 and 256"])),
        ("gateway.listen without a port", case(m_listen, ["gateway.listen[0]: expected HOST:PORT"])),
        ("unknown module file",
         case(m_no_module, [], ['modules[0].module: no module "backend_nope" in '])),
        ("duplicate instance name",
         case(m_dup, ['modules[1].name: duplicate instance name "mock"'])),
        ("bad instance name",
         case(m_bad_name, ["modules[0].name: must match ^[a-zA-Z0-9_-]{1,64}$"])),
        ("unknown module config key (did you mean)",
         case(m_config_key, ['modules[0].config.tols: unknown key (did you mean "tools"?)'])),
        ("wrong type in the transport's config",
         case(m_access_log, ["gateway.server.access_log: must be true, false or \"auto\""])),
        ("pipeline names an undefined instance",
         case(m_pipe_undefined, ['pipeline.audit[0]: no instance named "nope"'])),
        ("pipeline stage with an instance of the wrong kind",
         case(m_pipe_kind, ['pipeline.audit[0]: instance "mock" is a backend, not an audit module'])),
        ("binding to an unknown backend",
         case(m_binding, ['bindings[0].backend: no instance named "x"'])),
        ("a binding's watch and gateway.watch",
         case(m_watch, ['bindings[0].watch.intervall_ms: unknown key (did you mean "interval_ms"?)',
                        "bindings[0].watch.interval_ms: is required",
                        "gateway.watch.shards: must be between 1 and 1024"])),
        ("unset environment variable",
         case(m_unset_env, ["gateway.name: environment variable UNSET_VAR is not set "
                            "(use ${UNSET_VAR:-default})"], env_unset=["UNSET_VAR"])),
        ("unset variable: once per key that holds it, not in description",
         case(m_unset_env_twice,
              ["modules[1].config.path: environment variable UNSET_VAR is not set "
               "(use ${UNSET_VAR:-default})",
               "gateway.listen[0]: environment variable UNSET_VAR is not set "
               "(use ${UNSET_VAR:-default})"], env_unset=["UNSET_VAR"])),
        ("unterminated ${",
         case(m_unterminated, ['gateway.name: unterminated ${ (no closing }) in "${OOPS"'])),
        ("a variable name with a space",
         case(m_bad_var_name, ['gateway.name: bad variable name "A B" in ${A B} (a name is '
                               'letters, digits and _, not starting with a digit)'],
              env={"A B": "x"})),
        ("unknown module (did you mean)",
         case(m_module_typo, ['modules[0].module: no module "backend_mokc" in %s (did you mean '
                              '"backend_mock"?)' % os.path.realpath(ctx.modules)])),
        ("gateway.module_dir as written and resolved", t_module_dir),
        ("audit path in a missing folder: --check and the start agree", t_audit_folder_start),
        ("--check warnings are FILE: key: warning: lines", t_warning_lines),
        ("cluster.kind nats needs a coordinator_nats instance", t_nats),
        ("three errors, three lines",
         case(m_three, ["gateway.workers: must be between 0 and 256",
                        "gateway.listen[0]: expected HOST:PORT",
                        "gateway.server.access_log: must be true, false or \"auto\""])),
        ("--check conf/mcpg.json", shipped("mcpg.json")),
        ("--check conf/bench.json", shipped("bench.json")),
        ("--check conf/bench-tuned.json", shipped("bench-tuned.json")),
        ("--version", t_version),
    ]
    return run_tests(tests, ctx)


if __name__ == "__main__":
    sys.exit(main())
