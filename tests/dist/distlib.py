"""What the dist/ tests share: their command line (gateway.py's, and where the build is
and what it installs to) and running a tool to see all it says."""
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import gateway  # noqa: E402


def parse_args():
    def extra(ap):
        ap.add_argument("--build", required=True, help="the build folder")
        ap.add_argument("--prefix", required=True, help="CMAKE_INSTALL_PREFIX")
        ap.add_argument("--bindir", required=True, help="CMAKE_INSTALL_FULL_BINDIR")
        ap.add_argument("--sysconfdir", required=True, help="CMAKE_INSTALL_FULL_SYSCONFDIR")
    return gateway.parse_args(extra)


def run(argv, env=None, timeout=120):
    """(exit status, stdout and stderr together) of argv."""
    full = dict(os.environ)
    full.update(env or {})
    p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=full,
                       timeout=timeout)
    return p.returncode, p.stdout.decode("utf-8", "replace")


def man_page(args, name):
    """The configured page (version filled in) the build made from dist/man/."""
    return os.path.join(args.build, "dist", "man", name)


# (section, page) of every manual page dist/ installs
MAN_PAGES = [("1", "mcpg.1"), ("1", "mcpg-apikey.1"), ("1", "mcpg-load.1"), ("1", "mcpg-bench-module.1"), ("5", "mcpg.json.5")]
