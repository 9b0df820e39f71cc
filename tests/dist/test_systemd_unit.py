#!/usr/bin/python3
"""dist/systemd/mcpg.service, as the build configures it (docs/systemd.md):

  * it runs the installed binary on the installed manifest, as a Type=notify service
    reloaded by SIGHUP, given longer to stop than the gateway's default drain;
  * systemd-analyze verify says nothing about it (on a copy whose ExecStart is this
    build's binary, with this build's manual pages for its Documentation=), and
    systemd-analyze security rates its exposure low;
  * what it sets up works: the gateway started as the unit starts it (TMPDIR in the
    runtime folder, the state folder as its working folder, the shipped manifest) keeps
    its module copies in the runtime folder and its audit file in the state folder;
  * cmake --install puts the unit, the manual pages and the manifest where systemd and man
    look, and a second install keeps a manifest the administrator changed;
  * for a prefix under /opt the manifest goes to /etc/opt/mcpg (the package's own folder
    there, as the FHS has it), and the unit runs the gateway on that same file.
The unit is not started under systemd here: the tests do not run as PID 1's guests.
"""
import gzip
import json
import os
import re
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from distlib import MAN_PAGES, man_page, parse_args, run  # noqa: E402
from gateway import (Context, Gateway, call_tool, check, check_eq, fail,  # noqa: E402
                     run_tests, wait_for)

# After gateway.drain_timeout_ms the exit may take: the forced close of what is left
# (0.5 s) and a backend call still running (1 s), in kernel/main.c.
EXIT_AFTER_DRAIN_MS = 1500


def unit_path(args):
    return os.path.join(args.build, "dist", "mcpg.service")


def unit_settings(text):
    """{key: [values]} of the [Service] and [Unit] lines (comments skipped)."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"^([A-Za-z]+)=(.*)$", line)
        if m:
            out.setdefault(m.group(1), []).append(m.group(2))
    return out


def one(settings, key):
    check(len(settings.get(key, [])) == 1, "the unit sets %s once: %r" % (key, settings.get(key)))
    return settings[key][0]


def gateway_default(args, key):
    """A gateway setting's default, as mcpg --help-module gateway prints it."""
    rc, out = run([args.bin, "--help-module", "gateway"])
    check_eq(rc, 0, "mcpg --help-module gateway")
    m = re.search(r"(?m)^  %s \(integer, [^)]*default (\d+)\)" % re.escape(key), out)
    check(m, "no default for %s in:\n%s" % (key, out))
    return int(m.group(1))


def seconds(value):
    m = re.fullmatch(r"(\d+)(s|min)?", value)
    check(m, "a time in seconds or minutes: %r" % value)
    return int(m.group(1)) * (60 if m.group(2) == "min" else 1)


def config_dir(sysconfdir):
    """Where the manifest goes: SYSCONFDIR/mcpg, but SYSCONFDIR itself when it is a prefix's
    own folder under /etc/opt (GNUInstallDirs makes /opt/mcpg's /etc/opt/mcpg)."""
    return sysconfdir if sysconfdir.startswith("/etc/opt/") else os.path.join(sysconfdir, "mcpg")


def files_named(root, name):
    return [os.path.join(d, name) for d, _, files in os.walk(root) if name in files]


def man_tree(args, root):
    """A MANPATH holding this build's pages, so verify finds the unit's Documentation=."""
    for section, name in MAN_PAGES:
        folder = os.path.join(root, "man" + section)
        os.makedirs(folder, exist_ok=True)
        shutil.copy(man_page(args, name), folder)
    return root


def main():
    args = parse_args()
    ctx = Context(args)
    with open(unit_path(args)) as f:
        text = f.read()
    settings = unit_settings(text)

    def t_what_it_runs():
        check_eq(one(settings, "Type"), "notify", "Type")
        check_eq(one(settings, "NotifyAccess"), "main", "NotifyAccess")
        check_eq(one(settings, "ExecStart"), "%s/mcpg --config %s/mcpg.json"
                 % (args.bindir, config_dir(args.sysconfdir)), "ExecStart")
        check_eq(one(settings, "ExecReload"), "/bin/kill -HUP $MAINPID", "ExecReload")
        drain = gateway_default(args, "drain_timeout_ms")
        stop = seconds(one(settings, "TimeoutStopSec"))
        check(stop * 1000 > drain + EXIT_AFTER_DRAIN_MS,
              "TimeoutStopSec %d s leaves the drain (%d ms) and the exit after it time" % (stop, drain))
        check(not re.search(r"@[A-Z_]+@", text), "every @VAR@ filled in:\n%s" % text)

    def t_verify():
        copy = ctx.path("mcpg.service")
        with open(copy, "w") as f:
            f.write(re.sub(r"(?m)^ExecStart=\S+", "ExecStart=" + args.bin, text))
        env = {"MANPATH": man_tree(args, ctx.path("man")), "SYSTEMD_LOG_COLOR": "0"}
        rc, out = run(["systemd-analyze", "verify", copy], env=env)
        about = [line for line in out.splitlines() if "mcpg" in line]
        check(rc == 0 and not about, "systemd-analyze verify: exit %d\n%s" % (rc, out))
        rc, out = run(["systemd-analyze", "security", "--offline=yes", "--threshold=25",
                       "--no-pager", copy], env=env)
        check(rc == 0, "systemd-analyze security: exposure above 2.5 (exit %d)\n%s"
              % (rc, out[-2000:]))

    def t_runs_as_the_unit_sets_it_up():
        runtime_root = ctx.path("run")  # %t
        env = {}
        for assignment in settings.get("Environment", []):
            key, value = assignment.split("=", 1)
            env[key] = value.replace("%t", runtime_root)
        runtime = os.path.join(runtime_root, one(settings, "RuntimeDirectory"))
        check_eq(env.get("TMPDIR"), runtime, "TMPDIR is the unit's runtime folder")
        os.makedirs(runtime, mode=0o700)
        check_eq(one(settings, "WorkingDirectory"),
                 "/var/lib/" + one(settings, "StateDirectory"), "WorkingDirectory")
        manifest = os.path.join(args.source, "conf", "mcpg.json")  # what is installed
        # the gateway's working folder (Gateway: the test's folder) stands for the state one
        with Gateway(ctx, config=manifest, name="unit", env=env) as gw:
            r, out = call_tool(gw.port, "echo", {"message": "hi"})
            check_eq(r.status, 200, "a call (%r)" % out)
            copies = [d for d in os.listdir(runtime) if d.startswith("mcpg-%d-" % gw.proc.pid)]
            check_eq(len(copies), 1, "one folder of copies in the runtime folder: %r"
                     % os.listdir(runtime))
            check(any(n.endswith(".so") for n in os.listdir(os.path.join(runtime, copies[0]))),
                  "the module copies in %s" % copies[0])
            audit = ctx.path("mcpg-audit.jsonl")
            wait_for(lambda: os.path.exists(audit) and os.path.getsize(audit) > 0, 20,
                     "the audit file in the working folder")
        check_eq(os.listdir(runtime), [], "the runtime folder after the stop")

    def t_install():
        root = ctx.path("destdir")
        rc, out = run(["cmake", "--install", args.build], env={"DESTDIR": root})
        check_eq(rc, 0, "cmake --install:\n%s" % out[-3000:])
        under = lambda p: root + p  # noqa: E731
        unit = under(os.path.join(args.prefix, "lib/systemd/system/mcpg.service"))
        with open(unit) as f:
            check_eq(f.read(), text, "the installed unit")
        for section, name in MAN_PAGES:
            page = under(os.path.join(args.prefix, "share/man/man%s/%s.gz" % (section, name)))
            with gzip.open(page, "rt") as f, open(man_page(args, name)) as g:
                check_eq(f.read(), g.read(), "the installed %s" % name)
            with open(page, "rb") as f:
                head = f.read(10)
            check(head[3] & 0x08 == 0 and head[4:8] == b"\0\0\0\0",
                  "%s compressed without a name or a time (gzip -n)" % name)
        conf = under(os.path.join(config_dir(args.sysconfdir), "mcpg.json"))
        with open(conf) as f, open(os.path.join(args.source, "conf", "mcpg.json")) as g:
            check_eq(json.load(f), json.load(g), "the installed manifest")
        with open(conf, "w") as f:
            f.write('{"gateway": {"name": "changed here"}}\n')
        rc, out = run(["cmake", "--install", args.build], env={"DESTDIR": root})
        check_eq(rc, 0, "a second cmake --install")
        with open(conf) as f:
            if "changed here" not in f.read():
                fail("a second install replaced the administrator's %s" % conf)

    def t_install_under_opt():
        # configured only: dist's install needs nothing built but the manual pages
        build, root = ctx.path("opt-build"), ctx.path("opt-destdir")
        for argv in (["cmake", "-S", args.source, "-B", build, "-G", "Ninja",
                      "-DCMAKE_INSTALL_PREFIX=/opt/mcpg", "-DMCPG_TESTS=OFF"],
                     ["cmake", "--build", build, "--target", "man_pages"]):
            rc, out = run(argv)
            check_eq(rc, 0, "%s:\n%s" % (" ".join(argv), out[-3000:]))
        rc, out = run(["cmake", "-P", os.path.join(build, "dist", "cmake_install.cmake")],
                      env={"DESTDIR": root})
        check_eq(rc, 0, "dist's install for /opt/mcpg:\n%s" % out[-3000:])
        check_eq(files_named(root, "mcpg.json"), [root + "/etc/opt/mcpg/mcpg.json"],
                 "the manifests installed for /opt/mcpg")
        with open(root + "/opt/mcpg/lib/systemd/system/mcpg.service") as f:
            installed = unit_settings(f.read())
        check_eq(one(installed, "ExecStart"), "/opt/mcpg/bin/mcpg --config /etc/opt/mcpg/mcpg.json",
                 "the /opt/mcpg unit's ExecStart")
        check_eq(one(installed, "EnvironmentFile"), "-/etc/opt/mcpg/mcpg.env",
                 "the /opt/mcpg unit's EnvironmentFile")

    return run_tests([
        ("the unit runs the installed gateway as a notify service", t_what_it_runs),
        ("systemd-analyze verify and security", t_verify),
        ("the gateway as the unit sets it up: copies in the runtime folder, audit in the state one",
         t_runs_as_the_unit_sets_it_up),
        ("cmake --install: unit, manual pages, manifest (kept once changed)", t_install),
        ("prefix /opt/mcpg: the manifest in /etc/opt/mcpg, where the unit looks",
         t_install_under_opt),
    ], ctx)


if __name__ == "__main__":
    sys.exit(main())
