#!/usr/bin/python3
"""`mcpg modules`: what a module folder holds.

  * the default folder (beside the binary) lists every real module (each
    modules/*/ folder of the source tree) with its kind, ABI, version and
    description, in aligned columns, and no test fixture (fx_*)
  * a folder holding files that are no loadable module (junk, a shared library
    that is no mcpg module, a module built for a newer ABI, one whose file name
    is not its own name) gets one line naming each with why, and the real
    module in it is still listed; the loader's copies (<name>.<hash>.so) are not
  * --config lists the manifest's gateway.module_dir, resolved from its folder
  * a folder that does not exist: exit 2 and a line naming it
  * mcpg --help names the command"""
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway import (Context, abi_version, check, check_eq, parse_args, run_cli,  # noqa: E402
                     run_tests)


def real_modules(source):
    root = os.path.join(source, "modules")
    return sorted(d for d in os.listdir(root)
                  if os.path.exists(os.path.join(root, d, "CMakeLists.txt")))


def expected_kind(name):
    """Every module's name starts with its kind (events and limits are it)."""
    return name.split("_")[0]


def listing(ctx, argv):
    """rc and the --json rows of `mcpg modules argv`, by name."""
    rc, out, err = run_cli(ctx, ["modules", "--json"] + argv)
    check_eq(rc, 0, "mcpg modules %s exit code (stderr: %s)" % (" ".join(argv), err))
    rows = [json.loads(ln) for ln in out.splitlines() if ln.strip()]
    return {r["name"]: r for r in rows}


def shared_library_not_mcpg():
    """A real shared library that exports no mcpg entry point: the libm this
    interpreter has mapped."""
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1]
            if os.path.basename(path).startswith("libm.so"):
                return path
    raise AssertionError("no libm mapped in this process")


def main():
    args = parse_args(lambda ap: ap.add_argument("--abi-fixtures", required=True,
                                                 help="build/tests/abi/fixtures"))
    ctx = Context(args)
    major, minor = abi_version(args.source)

    def t_default_folder_lists_every_real_module():
        rows = listing(ctx, [])
        for name in real_modules(args.source):
            check(name in rows, "%s missing from the default listing: %s" % (name, sorted(rows)))
            r = rows[name]
            check("error" not in r, "%s is not loadable: %s" % (name, r.get("error")))
            check_eq(r["kind"], expected_kind(name), name + "'s kind")
            got_major, got_minor = (int(x) for x in r["abi"].split("."))
            check(got_major == major and got_minor <= minor,
                  "%s built for ABI %s, the kernel is %d.%d" % (name, r["abi"], major, minor))
            check(r["version"] and r["description"], "%s: a version and a description: %r" % (name, r))
        fixtures = [n for n in rows if n.startswith("fx_")]
        check(not fixtures, "test fixtures in the folder users see: %s" % fixtures)

    def t_text_columns_align():
        rc, out, err = run_cli(ctx, ["modules"])
        check_eq(rc, 0, "exit code (stderr: %s)" % err)
        lines = out.splitlines()
        check(lines[0].split()[:4] == ["NAME", "KIND", "ABI", "VERSION"], "header: %r" % lines[0])
        kind_col = lines[0].index("KIND")
        for name in real_modules(args.source):
            line = [ln for ln in lines if ln.split()[0] == name]
            check(len(line) == 1, "one line for %s in:\n%s" % (name, out))
            check_eq(line[0][kind_col:].split()[0], expected_kind(name), name + "'s kind column")
        check("fx_" not in out, "a fixture listed:\n" + out)

    def t_files_that_are_no_module_are_named_with_why():
        d = ctx.path("mixed")
        os.makedirs(d)
        shutil.copy(os.path.join(args.modules, "backend_mock.so"), d)
        shutil.copy(os.path.join(args.modules, "backend_mock.so"),
                    os.path.join(d, "backend_mock.0123456789abcdef.so"))
        with open(os.path.join(d, "junk.so"), "wb") as f:
            f.write(b"this is no shared object\n" * 40)
        shutil.copy(shared_library_not_mcpg(), os.path.join(d, "plainlib.so"))
        shutil.copy(os.path.join(args.abi_fixtures, "abi_newer_minor.so"), d)
        shutil.copy(os.path.join(args.modules, "audit_stdout.so"), os.path.join(d, "renamed.so"))
        rows = listing(ctx, ["--module-dir", d])
        check_eq(sorted(rows), ["abi_newer_minor", "backend_mock", "junk", "plainlib", "renamed"],
                 "the files listed (the loader's copy left out)")
        check_eq(rows["backend_mock"]["kind"], "backend", "the real module among them")
        why = {n: rows[n].get("error", "") for n in rows}
        check("dlopen failed" in why["junk"], "junk.so: %r" % why["junk"])
        check("not an mcpg module" in why["plainlib"], "plainlib.so: %r" % why["plainlib"])
        check("minor too new" in why["abi_newer_minor"], "abi_newer_minor.so: %r"
              % why["abi_newer_minor"])
        check('declares name "audit_stdout"' in why["renamed"], "renamed.so: %r" % why["renamed"])
        rc, out, err = run_cli(ctx, ["modules", "--module-dir", d])
        check_eq(rc, 0, "exit code of the text listing (stderr: %s)" % err)
        for name in ("junk", "plainlib", "abi_newer_minor", "renamed"):
            line = [ln for ln in out.splitlines() if ln.startswith(name + " ")]
            check(len(line) == 1 and "not a loadable module: " in line[0]
                  and os.path.join(d, name + ".so") in line[0],
                  "a line naming %s.so with why in:\n%s" % (name, out))

    def t_config_names_the_folder():
        d = ctx.path("cfg")
        os.makedirs(os.path.join(d, "mods"))
        shutil.copy(os.path.join(args.modules, "backend_mock.so"), os.path.join(d, "mods"))
        manifest = os.path.join(d, "m.json")
        with open(manifest, "w") as f:
            json.dump({"gateway": {"module_dir": "mods"}, "modules": []}, f)
        rows = listing(ctx, ["--config", manifest])
        check_eq(sorted(rows), ["backend_mock"], "the manifest's module_dir, from its folder")

    def t_missing_folder_exits_2():
        missing = ctx.path("no-such-folder")
        rc, out, err = run_cli(ctx, ["modules", "--module-dir", missing])
        check_eq(rc, 2, "exit code for a missing folder")
        check(missing in err, "the folder named: %r" % err)

    def t_help_names_the_command():
        rc, out, err = run_cli(ctx, ["--help"])
        check_eq(rc, 0, "--help exit code")
        check("mcpg modules" in out, "--help names mcpg modules:\n" + out)

    return run_tests([
        ("the default folder lists every real module, no fixture",
         t_default_folder_lists_every_real_module),
        ("the text listing: one aligned line per module", t_text_columns_align),
        ("files that are no module: a line each, with why", t_files_that_are_no_module_are_named_with_why),
        ("--config: the manifest's gateway.module_dir", t_config_names_the_folder),
        ("a folder that does not exist: exit 2", t_missing_folder_exits_2),
        ("mcpg --help names the command", t_help_names_the_command),
    ], ctx)


if __name__ == "__main__":
    sys.exit(main())
