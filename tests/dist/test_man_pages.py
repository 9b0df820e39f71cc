#!/usr/bin/python3
"""The manual pages mcpg(1), mcpg-apikey(1), mcpg-load(1), mcpg-bench-module(1) and
mcpg.json(5) (dist/man/, as the build fills in the version):

  * groff, with every warning on, has nothing to say about any;
  * they name this build's version;
  * they cannot drift from the programs: every option, command and variable `mcpg --help`
    prints is in mcpg(1), every option `mcpg-apikey --help`, `mcpg-load --help` and
    `mcpg-bench-module --help` print is in their pages; every setting `mcpg --help-module gateway` and
    `mcpg --help-module cluster` list is in mcpg.json(5), by its full name
    (gateway.pool.threads), and every gateway.* setting the pages name is one of those.
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from distlib import MAN_PAGES, man_page, parse_args, run  # noqa: E402
from gateway import Context, check, check_eq, run_tests  # noqa: E402


def rendered(path):
    """The page as plain text: no bold or underline, no hyphenation, long lines."""
    rc, out = run(["groff", "-man", "-Tascii", "-P-c", "-P-b", "-P-u", "-rHY=0", "-rLL=300n",
                   path])
    check_eq(rc, 0, "groff on %s" % path)
    return out


def options_offered(help_text):
    """The --long and -s short options a usage text names."""
    return set(re.findall(r"(?<![\w-])--?[a-z][a-z-]*", help_text))


def usage_words(help_text):
    """What mcpg --help offers: its options, its commands (the words after "mcpg" up to
    the first option or argument) and the variables it names."""
    options = options_offered(help_text)
    commands = set()
    for line in help_text.splitlines():
        m = re.match(r"^\s*(?:usage:)?\s*mcpg((?:\s+[a-z][a-z-]*)+)", line)
        if m:
            commands.add("mcpg" + " ".join([""] + m.group(1).split()))
    variables = set(re.findall(r"\b[A-Z][A-Z0-9]*_[A-Z0-9_]+\b", help_text))
    return options | commands | variables


def settings_listed(help_text):
    """gateway.name, gateway.pool.threads, cluster.kind, ... from --help-module's sections."""
    names, section = [], None
    for line in help_text.splitlines():
        m = re.match(r"^settings \(([\w.]+)\):$", line)
        if m:
            section = m.group(1)
            continue
        m = re.match(r"^  (\w+) \(", line)
        if m and section:
            names.append(section + "." + m.group(1))
    return names


def contains(text, name):
    return re.search(r"(?<![\w.-])%s(?![\w-])" % re.escape(name), text) is not None


def main():
    args = parse_args()
    ctx = Context(args)
    pages = {name: man_page(args, name) for _, name in MAN_PAGES}

    def check_named(page, help_argv, words, expected):
        """Every word of a tool's --help (which holds at least the expected ones) is in its
        page."""
        check(expected <= words, "%s read as expected: %r" % (" ".join(help_argv), sorted(words)))
        text = rendered(pages[page])
        missing = sorted(w for w in words if not contains(text, w))
        check(not missing, "%s offers what %s does not name: %s"
              % (" ".join(help_argv), page, missing))

    def help_of(argv):
        rc, out = run(argv)
        check_eq(rc, 0, " ".join(argv))
        return out

    def t_groff_quiet():
        for name, path in pages.items():
            rc, out = run(["groff", "-man", "-Tutf8", "-ww", "-z", path])
            check(rc == 0 and not out, "groff -ww on %s: exit %d\n%s" % (name, rc, out))

    def t_version():
        rc, out = run([args.bin, "--version"])
        version = re.match(r"mcpg (\S+) ", out)
        check(rc == 0 and version, "mcpg --version: %r" % out)
        for name, path in pages.items():
            with open(path) as f:
                th = next(line for line in f if line.startswith(".TH "))
            check('"mcpg %s"' % version.group(1) in th, "%s's .TH names %s: %s"
                  % (name, version.group(1), th))

    def t_usage_in_mcpg_1():
        argv = [args.bin, "--help"]
        check_named("mcpg.1", argv, usage_words(help_of(argv)), {"--config", "mcpg audit verify"})

    def t_options_in_mcpg_apikey_1():
        argv = [sys.executable, os.path.join(args.source, "scripts", "mcpg-apikey"), "--help"]
        check_named("mcpg-apikey.1", argv, options_offered(help_of(argv)), {"--add", "--hash"})

    def t_options_in_mcpg_load_1():
        argv = [os.path.join(args.build, "bin", "mcpg-load"), "--help"]
        check_named("mcpg-load.1", argv, options_offered(help_of(argv)), {"--url", "-c"})

    def t_options_in_mcpg_bench_module_1():
        argv = [os.path.join(args.build, "bin", "mcpg-bench-module"), "--help"]
        check_named("mcpg-bench-module.1", argv, options_offered(help_of(argv)),
                    {"--tool", "--callgrind"})

    def t_settings_in_mcpg_json_5():
        text = rendered(pages["mcpg.json.5"])
        listed = []
        for module in ("gateway", "cluster"):
            rc, out = run([args.bin, "--help-module", module])
            check_eq(rc, 0, "mcpg --help-module %s" % module)
            listed += settings_listed(out)
        check("gateway.drain_timeout_ms" in listed and "cluster.kind" in listed,
              "the settings read as expected: %r" % listed)
        missing = [n for n in listed if not contains(text, n)]
        check(not missing, "settings mcpg.json(5) does not name: %s" % missing)
        known = {n.split(".")[1] for n in listed if n.startswith("gateway.")}
        for name, path in pages.items():
            named = set(re.findall(r"(?<![\w.])gateway\.(\w+)", rendered(path)))
            unknown = sorted(named - known)
            check(not unknown, "%s names settings the gateway does not have: %s"
                  % (name, ["gateway." + u for u in unknown]))

    return run_tests([
        ("groff -ww: no warning", t_groff_quiet),
        ("the pages name this build's version", t_version),
        ("every option and command of mcpg --help is in mcpg(1)", t_usage_in_mcpg_1),
        ("every option of mcpg-apikey --help is in mcpg-apikey(1)", t_options_in_mcpg_apikey_1),
        ("every option of mcpg-load --help is in mcpg-load(1)", t_options_in_mcpg_load_1),
        ("every option of mcpg-bench-module --help is in mcpg-bench-module(1)",
         t_options_in_mcpg_bench_module_1),
        ("every gateway and cluster setting is in mcpg.json(5), and no other",
         t_settings_in_mcpg_json_5),
    ], ctx)


if __name__ == "__main__":
    sys.exit(main())
