#!/usr/bin/python3
"""What backend_command's programs are trusted with, through the real gateway.

The gateway runs with secrets in its environment: the admin token
(gateway.server.admin_token_env), a resource webhook secret
(resource_webhooks.*.secret_env), an events source secret (events.sources.*.secret_env)
and a backend credential one tool reads with {"from_env": ...}. A tool running
/usr/bin/env must see none of them, nor any other variable of the gateway's but PATH
and the locale and time zone (LANG, LC_ALL, LC_CTYPE, TZ); a tool naming a variable in
inherit_env sees that one too, and the tool reading the credential through env sees
it under its own name. A caller's value that would begin an argv element with '-'
(grep's "-r", "--file=...") is refused with -32602 naming the argument unless the
template has "--" before it, and then reaches grep as a pattern. An inherit_env name
that is not a variable name fails --check naming its key path."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway import (Context, Gateway, base_manifest, call_tool, check, check_eq,  # noqa: E402
                     parse_args, run_cli, run_tests)
from eventslib import events_manifest  # noqa: E402
from webhooklib import new_secret  # noqa: E402

ALLOWED = {"PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ"}
SHARED = "MCPG_TEST_CMD_SHARED"


def secrets():
    """The gateway's secret variables, by name, each with a value unlike any other."""
    return {
        "MCPG_TEST_CMD_ADMIN": "admin-" + os.urandom(12).hex(),
        "MCPG_TEST_CMD_WEBHOOK": new_secret(),
        "MCPG_TEST_CMD_EVENTS": new_secret(),
        "MCPG_TEST_CMD_BACKEND_KEY": "key-" + os.urandom(12).hex(),
    }


def manifest(sample):
    m = base_manifest(server={
        "admin_token_env": "MCPG_TEST_CMD_ADMIN",
        "resource_webhooks": {"notes": {"secret_env": "MCPG_TEST_CMD_WEBHOOK",
                                        "uri_prefixes": ["mock://notes/"]}}})
    m["events"] = events_manifest("MCPG_TEST_CMD_EVENTS")
    m["modules"].append({"name": "cmd", "module": "backend_command", "config": {"tools": [
        {"name": "env", "command": "/usr/bin/env"},
        {"name": "env_inherit", "command": "/usr/bin/env", "inherit_env": [SHARED]},
        {"name": "env_key", "command": "/usr/bin/env",
         "env": {"API_KEY": {"from_env": "MCPG_TEST_CMD_BACKEND_KEY"}}},
        {"name": "grep", "command": "grep", "args": ["-c", "{pattern}", sample]},
        {"name": "grep_ended", "command": "grep", "args": ["-c", "--", "{pattern}", sample]},
    ]}})
    m["bindings"].append({"backend": "cmd"})
    return m


def tool_text(port, tool, args, what):
    r, rpc = call_tool(port, tool, args)
    check_eq(r.status, 200, "%s: HTTP status (%r)" % (what, r.body[:300]))
    res = rpc.get("result")
    check(res is not None and not res.get("isError"), "%s: a plain result: %r" % (what, rpc))
    return res["content"][0]["text"]


def env_of(text):
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def main():
    ctx = Context(parse_args())
    sample = ctx.path("sample.txt")
    with open(sample, "w") as f:
        f.write("a -r b\nplain\n")
    secret = secrets()
    env = dict(secret)
    env[SHARED] = "shared-value"
    env["HOME"] = "/home/gateway-user"   # present in the gateway, not passed on
    gw = Gateway(ctx, manifest=manifest(sample), env=env, name="command-env").start()
    p = gw.port

    def t_minimal_env():
        text = tool_text(p, "env", {}, "env")
        got = env_of(text)
        check_eq(got.get("PATH"), os.environ.get("PATH") or "/usr/local/bin:/usr/bin:/bin",
                 "the program's PATH is the gateway's")
        check(set(got) <= ALLOWED, "only %s reach the program, got %s"
              % (sorted(ALLOWED), sorted(set(got) - ALLOWED)))
        for name, value in secret.items():
            check(value not in text and name not in text,
                  "%s (or its value) reached the program: %r" % (name, text))
        check(SHARED not in text and "HOME=" not in text, "nothing inherited unasked: %r" % text)

    def t_inherit_env():
        got = env_of(tool_text(p, "env_inherit", {}, "env_inherit"))
        check_eq(got.get(SHARED), "shared-value", "inherit_env passes the named variable")
        check(set(got) <= ALLOWED | {SHARED}, "and only it: %s" % sorted(got))

    def t_env_from_env():
        text = tool_text(p, "env_key", {}, "env_key")
        got = env_of(text)
        check_eq(got.get("API_KEY"), secret["MCPG_TEST_CMD_BACKEND_KEY"],
                 "env's from_env value, under the tool's own name")
        check(set(got) <= ALLOWED | {"API_KEY"}, "and nothing else: %s" % sorted(got))
        for name in ("MCPG_TEST_CMD_ADMIN", "MCPG_TEST_CMD_WEBHOOK", "MCPG_TEST_CMD_EVENTS"):
            check(secret[name] not in text, "%s reached the program" % name)

    def t_option_refused():
        for value in ("-r", "--file=/etc/passwd", "-"):
            r, rpc = call_tool(p, "grep", {"pattern": value})
            err = rpc.get("error") or {}
            check_eq(err.get("code"), -32602, "pattern %r: refused (%r)" % (value, rpc))
            msg = err.get("message", "")
            check("'pattern' starts with '-'" in msg and "grep would read as an option" in msg
                  and '"--"' in msg, "pattern %r: the message says why: %r" % (value, msg))
        check_eq(tool_text(p, "grep", {"pattern": "plain"}, "grep plain"), "1\n",
                 "a pattern without '-' runs")

    def t_option_after_dashes():
        check_eq(tool_text(p, "grep_ended", {"pattern": "-r"}, "grep -- -r"), "1\n",
                 "after \"--\", '-r' is grep's pattern")

    def t_check_inherit_name():
        bad = manifest(sample)
        bad["modules"][-1]["config"]["tools"][1]["inherit_env"] = [SHARED, "NOT-A-NAME"]
        rc, _, err = run_cli(ctx, ["--check", "--config", ctx.write_manifest(bad, "bad.json")],
                             env=env)
        check_eq(rc, 2, "a bad inherit_env name fails --check (%s)" % err)
        where = "modules[%d].config.tools[1].inherit_env[1]" % (len(bad["modules"]) - 1)
        check(where in err and "^[A-Za-z_][A-Za-z0-9_]*$" in err, "names %s: %r" % (where, err))

    def t_stop():
        gw.stop()

    return run_tests([
        ("the program's environment is minimal", t_minimal_env),
        ("inherit_env passes the variables it names", t_inherit_env),
        ("env's from_env reaches only its tool", t_env_from_env),
        ("a value read as an option is refused", t_option_refused),
        ("after \"--\" it is an argument", t_option_after_dashes),
        ("--check names a bad inherit_env entry", t_check_inherit_name),
        ("the gateway stops cleanly", t_stop),
    ], ctx)


if __name__ == "__main__":
    sys.exit(main())
