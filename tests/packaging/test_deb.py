#!/usr/bin/python3
"""`make deb`'s package: packaging/deb/build.sh, then lintian, then the
package unpacked (never installed on this machine) and its gateway run.

The package is built from this test's build when that is a plain Release
build for prefix /usr, else (as a rule: `make build` is for /usr/local) from
a Release build of its own in a temp folder. lintian must
report no error, nor a warning of the tags named in LINTIAN_TAGS_THAT_FAIL (every program
in usr/bin has its manual page). Its control fields must name the project's version, this
machine's architecture and the libraries the gateway links; its files must be
the gateway, its tools and exactly the modules under modules/, stripped, with
the copyright and changelog Debian asks for, the systemd unit starting
/usr/bin/mcpg, the manual pages, and /etc/mcpg/mcpg.json as a conffile. Unpacked with dpkg-deb -x, its
gateway serves the packaged example manifest with no gateway.module_dir:
binary in usr/bin, modules in usr/lib/mcpg/modules.
"""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from installed import (check_gateway_files, check_sdk_files, product_modules,  # noqa: E402
                       run, serve_example_manifest, start)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
from gateway import check, check_eq, run_tests  # noqa: E402


# lintian warnings that fail the test as errors do: what the package is known to satisfy
LINTIAN_TAGS_THAT_FAIL = ("no-manual-page",)


def extra_args(ap):
    ap.add_argument("--build", required=True, help="this test's build tree")


def cache_value(build, key):
    with open(os.path.join(build, "CMakeCache.txt")) as f:
        m = re.search(r"(?m)^%s:[A-Z]*=(.*)$" % re.escape(key), f.read())
    return m.group(1) if m else ""


def build_to_package(ctx, build):
    """This test's build when a package may be made of it (Release, not
    sanitized, prefix /usr), else a temp folder build.sh configures itself."""
    plain = cache_value(build, "MCPG_SANITIZE").upper() not in ("ON", "1", "TRUE", "YES")
    if (cache_value(build, "CMAKE_BUILD_TYPE") == "Release" and plain
            and cache_value(build, "CMAKE_INSTALL_PREFIX") == "/usr"):
        return build
    return ctx.path("deb-build")


def project_version(source):
    with open(os.path.join(source, "CMakeLists.txt")) as f:
        return re.search(r"(?m)^project\(mcpg VERSION ([0-9.]+)", f.read()).group(1)


def lintian_tag(line):
    """The tag of a lintian line: "W: mcpg: no-manual-page [usr/bin/x]" -> no-manual-page."""
    parts = line.split(": ", 2)
    return parts[2].split()[0] if len(parts) == 3 and parts[2] else ""


def main():
    args, ctx, root, usr = start(extra_args)
    deb = {}

    def t_build():
        out = run(["bash", os.path.join(ctx.source, "packaging", "deb", "build.sh"),
                   "--build", build_to_package(ctx, os.path.abspath(args.build)),
                   "--out", ctx.path("out")], "packaging/deb/build.sh",
                  env={"CMAKE_BUILD_PARALLEL_LEVEL": "2"})
        deb["path"] = out.strip().splitlines()[-1]
        check(deb["path"].endswith(".deb") and os.path.isfile(deb["path"]),
              "build.sh's last line is not the .deb it made:\n" + out[-2000:])

    def t_lintian():
        p = subprocess.run(["lintian", "--fail-on", "error", deb["path"]],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600)
        out = p.stdout.decode("utf-8", "replace")
        sys.stdout.write(out)
        errors = [ln for ln in out.splitlines() if ln.startswith("E: ")
                  or (ln.startswith("W: ") and lintian_tag(ln) in LINTIAN_TAGS_THAT_FAIL)]
        check(p.returncode == 0 and not errors, "lintian (exit %d) reports:\n%s"
              % (p.returncode, "\n".join(errors) or out))

    def field(name):
        return run(["dpkg-deb", "-f", deb["path"], name], "dpkg-deb -f " + name).strip()

    def t_control():
        arch = run(["dpkg", "--print-architecture"], "dpkg --print-architecture").strip()
        check_eq(field("Package"), "mcpg", "Package")
        check_eq(field("Version"), project_version(ctx.source) + "-1", "Version")
        check_eq(field("Architecture"), arch, "Architecture")
        depends = field("Depends")
        for lib in ("libc6", "libuv1", "libjansson4", "libssl3"):
            check(re.search(r"(^|, )%s\b" % lib, depends), "Depends lacks %s: %s" % (lib, depends))

    def t_files():
        run(["dpkg-deb", "-x", deb["path"], root], "dpkg-deb -x")
        check_gateway_files(usr, product_modules(ctx.source, ctx.modules))
        check_sdk_files(usr)
        for f in ("usr/share/doc/mcpg/copyright", "usr/share/doc/mcpg/changelog.Debian.gz",
                  "usr/lib/systemd/system/mcpg.service", "usr/share/man/man1/mcpg.1.gz",
                  "usr/share/man/man1/mcpg-apikey.1.gz", "usr/share/man/man1/mcpg-load.1.gz",
                  "etc/mcpg/mcpg.json"):
            check(os.path.isfile(os.path.join(root, f)), "not packaged: " + f)
        with open(os.path.join(root, "usr/lib/systemd/system/mcpg.service")) as f:
            check("/usr/bin/mcpg " in f.read(), "the unit does not start /usr/bin/mcpg")
        ctrl = ctx.path("DEBIAN")
        run(["dpkg-deb", "-e", deb["path"], ctrl], "dpkg-deb -e")
        with open(os.path.join(ctrl, "conffiles")) as f:
            check_eq(f.read().split(), ["/etc/mcpg/mcpg.json"], "conffiles")
        for f in ("bin/mcpg", "lib/mcpg/modules/transport_http.so"):
            sections = run(["readelf", "-S", "--wide", os.path.join(usr, f)], "readelf " + f)
            check(".symtab" not in sections, "not stripped: usr/" + f)

    def t_serve():
        serve_example_manifest(ctx, usr)

    tests = [("make deb's script builds the package", t_build),
             ("lintian reports no error, and no program without a manual page", t_lintian),
             ("control: package, version, architecture, depends", t_control),
             ("the package's files", t_files),
             ("the unpacked gateway serves with its packaged modules", t_serve)]
    return run_tests(tests, ctx)


if __name__ == "__main__":
    sys.exit(main())
