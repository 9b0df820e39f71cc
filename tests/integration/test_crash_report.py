#!/usr/bin/python3
"""A crash names its module: a tool of fx_crash dereferences NULL.

  * the gateway dies by SIGSEGV (the default action: a core file can be made)
  * stderr has one line naming the signal, the module, the instance, the
    image (the loader's copy) and the offset, with the addr2line command
    that turns the offset into the fixture's function (checked when
    binutils is installed)
  * the runtime folder holding that image is left behind with crash.txt (the
    same line), and the next gateway's sweep keeps it"""
import os
import re
import shutil
import signal
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway import (Context, Gateway, call_tool, check, check_eq, parse_args,  # noqa: E402
                     run_cli, run_tests, with_fixtures)

LINE = re.compile(r"^mcpg: fatal SIGSEGV \(fault address 0x0\) in module fx_crash "
                  r"\(instances: boom\), image (\S+), offset (0x[0-9a-f]+): "
                  r"addr2line -f -e (\S+) (0x[0-9a-f]+)$")


def crash_manifest(ctx):
    return with_fixtures(ctx, {
        "cluster": {"kind": "single_node"},
        "modules": [{"name": "boom", "module": "fx_crash"}],
        "pipeline": {"identity": [], "policy": [], "limits": [], "audit": []},
        "bindings": [{"backend": "boom"}],
    })


def main():
    args = parse_args()
    ctx = Context(args)

    def t_crash_names_module():
        tmp = ctx.path("tmpdir")
        os.makedirs(tmp)
        gw = Gateway(ctx, manifest=crash_manifest(ctx), env={"TMPDIR": tmp}, name="crash")
        gw.start()
        try:
            try:
                call_tool(gw.port, "fx_crash_now", {}, id=1)
            except (ConnectionError, OSError, ValueError):
                pass  # the process died under the call: no answer is the point
            rc = gw.wait_exit()
        finally:
            if gw.proc.poll() is None:
                gw.kill()
        check_eq(rc, -signal.SIGSEGV, "the gateway's exit status (%s)" % gw.stderr_tail())
        lines = [ln for ln in gw.stderr().splitlines() if ln.startswith("mcpg: fatal")]
        check_eq(len(lines), 1, "crash lines in stderr: %r" % lines)
        m = LINE.match(lines[0])
        check(m is not None, "the crash line names module, instance, image, offset: %r" % lines[0])
        image, offset = m.group(1), m.group(2)
        check_eq((m.group(3), m.group(4)), (image, offset), "the addr2line command's file, offset")
        folder = os.path.dirname(image)
        check(os.path.basename(image).startswith("fx_crash.") and
              folder.startswith(os.path.join(tmp, "mcpg-%d-" % gw.proc.pid)),
              "the image is the loader's copy in the runtime folder: %s" % image)
        check(os.path.exists(image), "the image the core names is left behind: %s" % image)
        with open(os.path.join(folder, "crash.txt")) as f:
            check_eq(f.read().strip(), lines[0], "crash.txt in the runtime folder")
        rc, _, err = run_cli(ctx, ["--check", "--config", gw.config], env={"TMPDIR": tmp})
        check_eq(rc, 0, "--check after the crash (%s)" % err)
        check(os.path.exists(image), "the next start's sweep keeps a crashed gateway's folder")
        if shutil.which("addr2line"):
            out = subprocess.run(["addr2line", "-f", "-e", image, offset], capture_output=True,
                                 text=True, timeout=30).stdout
            check_eq(out.splitlines()[0], "fx_crash_fault", "addr2line on the offset")
        shutil.rmtree(folder)

    return run_tests([("a crash in a module names the module, its image and the offset",
                       t_crash_names_module)], ctx)


if __name__ == "__main__":
    sys.exit(main())
