#!/usr/bin/python3
"""The bad-module bestiary under reload (tests/abi/bestiary): modules that
misbehave, or own threads, or fail to come up, while the gateway reloads.

  abi_bad_timer   leaves a repeating timer running: a reload away from it
                  publishes, the retire logs the live timer and keeps the
                  image mapped (pinned), the gateway serves on and stops cleanly
  abi_thread_mod  a thread started in start(), joined in stop(): replaced by
                  a reload (its file swapped for other content), its thread is
                  gone and its old image unmapped
  abi_fail_create / abi_fail_start
                  create (start) fails when config "fail" is true: the reload
                  is refused naming the instance, the old generation serves,
                  and no thread or mapping is left behind
  abi_v1_0        built against the 1.0 headers: carried across reloads and
                  swapped by a config change, tripwires never hit

One gateway (2 loops) with its own module folder: symlinks to the fixtures,
copies of abi_thread_mod.so and abi_v1_0.so the test swaps. What comes and
goes is added by a reload, not in the manifest the gateway starts with."""
import json
import os
import shutil
import signal
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
sys.path.insert(0, os.path.join(HERE, "..", "reload"))
from gateway import (Context, replace_file, Gateway, call_tool, check, check_eq, parse_args,  # noqa: E402
                     run_tests, sanitizer_lines, wait_for)
from test_reload import TOKEN, mapped_images, post_reload, reload_ok, wait_all_retired  # noqa: E402

FIXTURES = ("abi_bad_timer", "abi_fail_create", "abi_fail_start")
THREAD_NAME = "abi-thread-mod"


def logged(text, src, words):
    """The first JSON log line from src whose msg holds words, or None."""
    for line in text.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if rec.get("src") == src and words in rec.get("msg", ""):
            return rec["msg"]
    return None


def tool_text(port, tool, id=1):
    r, rpc = call_tool(port, tool, {}, id=id)
    check("result" in rpc, "%s answered: %r" % (tool, rpc))
    return rpc["result"]["content"][0]["text"]


def threads(pid):
    """{tid: name} of the process's threads."""
    out = {}
    for tid in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/comm" % (pid, tid)) as f:
                out[tid] = f.read().strip()
        except OSError:  # the thread ended while we looked
            pass
    return out


def named_threads(pid, name=THREAD_NAME):
    return sorted(t for t, n in threads(pid).items() if n == name)


def mapped_modules(pid):
    """Every <name>.<hash>.so runtime copy the process maps."""
    seen = set()
    with open("/proc/%d/maps" % pid) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and parts[-1].endswith(".so") and "/runtime" in parts[-1]:
                seen.add(parts[-1])
    return seen


def main():
    def extra(ap):
        ap.add_argument("--fixtures", required=True, help="folder with the fixture .so files")
    args = parse_args(extra)
    ctx = Context(args)
    fixtures = os.path.abspath(args.fixtures)
    mods = ctx.path("modules")
    os.makedirs(mods)
    os.symlink(os.path.join(args.modules, "transport_http.so"),
               os.path.join(mods, "transport_http.so"))
    for f in FIXTURES + ("abi_good",):
        src = os.path.join(fixtures, f + ".so")
        check(os.path.exists(src), "fixture %s is missing (build tests/abi)" % src)
        os.symlink(src, os.path.join(mods, f + ".so"))
    thread_v1 = os.path.join(fixtures, "abi_thread_mod.so")
    thread_v2 = os.path.join(fixtures, "v2", "abi_thread_mod.so")

    def install(src, name, tail=b""):
        """name.so in the module folder becomes a copy of src (+ tail: other
        content, the same code)."""
        tmp = os.path.join(mods, "." + name + ".so.tmp")
        shutil.copyfile(src, tmp)
        with open(tmp, "ab") as f:
            f.write(tail)
        os.rename(tmp, os.path.join(mods, name + ".so"))

    install(thread_v1, "abi_thread_mod")
    install(os.path.join(fixtures, "abi_v1_0.so"), "abi_v1_0")

    def manifest(timer=False, thread=True, tag=1, fail_create=False, fail_start=False, limit=5,
                 extra_good=False):
        instances = []
        if timer:
            instances.append({"name": "bt", "module": "abi_bad_timer"})
        if thread:  # before fail_start: a refused start must stop what started before it
            instances.append({"name": "th", "module": "abi_thread_mod", "config": {"tag": tag}})
        instances += [
            {"name": "fc", "module": "abi_fail_create", "config": {"fail": fail_create}},
            {"name": "fs", "module": "abi_fail_start", "config": {"fail": fail_start}},
            {"name": "v1", "module": "abi_v1_0", "config": {"limit": limit, "ratio": 0.75}},
        ]
        if extra_good:  # an image the serving generation does not map
            instances.append({"name": "good", "module": "abi_good"})
        return {
            "gateway": {"module_dir": mods, "server": {"admin_token_env": "MCPG_TEST_ADMIN"},
                        "workers": 2},
            "cluster": {"kind": "single_node"},
            "modules": instances,
        }

    path = ctx.write_manifest(manifest(thread=False, limit=3), "bestiary.json")

    def rewrite(m):
        replace_file(path, m)

    gw = Gateway(ctx, config=path, env={"MCPG_TEST_ADMIN": TOKEN}, name="bestiary")

    def pid():
        return gw.proc.pid

    def ticks():
        return int(tool_text(gw.port, "timer_ticks").split("=")[1])

    def t_start():
        gw.start()
        p = gw.port
        check_eq(tool_text(p, "fail_create_ping"), "ok", "fail_create_ping")
        check_eq(tool_text(p, "fail_start_ping"), "ok", "fail_start_ping")
        check_eq(tool_text(p, "v1_ping"), "limit=3 ratio=0.75", "v1_ping")

    def t_v1_0_across_reloads():
        p = gw.port
        ans = reload_ok(p)
        check("v1" in ans["carried"] and ans["started"] == [],
              "an unchanged reload carries the 1.0 module: %r" % ans)
        check_eq(tool_text(p, "v1_ping"), "limit=3 ratio=0.75", "v1_ping after carrying")
        rewrite(manifest(thread=False, limit=5))
        ans = reload_ok(p)
        check_eq(ans["started"], ["v1"], "a config change starts the 1.0 module anew: %r" % ans)
        check_eq(ans["stopping"], ["v1"], "its predecessor stops: %r" % ans)
        check_eq(tool_text(p, "v1_ping"), "limit=5 ratio=0.75", "v1_ping after the swap")
        # its predecessor retires (stopped, destroyed) without the kernel
        # calling a slot past the 1.0 tables: a tripwire would abort the process
        wait_all_retired(gw)
        ans = reload_ok(p)
        check_eq(ans["started"], [], "the next reload, after the retire: %r" % ans)
        check(gw.proc.poll() is None, "the gateway runs")
        check("past the end of a 1.0 table" not in gw.stderr(), "no tripwire hit")

    def t_thread_mod_swapped():
        p = gw.port
        rewrite(manifest())
        ans = reload_ok(p)
        check_eq(ans["started"], ["th"], "a reload adds abi_thread_mod: %r" % ans)
        check(tool_text(p, "thread_count").startswith("variant=1 tag=1 "), "thread_count")
        check_eq(len(named_threads(pid())), 1, "one %s thread" % THREAD_NAME)
        old_tid = named_threads(pid())
        before = mapped_images(pid(), "abi_thread_mod")
        check_eq(len(before), 1, "one abi_thread_mod image mapped: %r" % sorted(before))
        n0 = tool_text(p, "thread_count")
        wait_for(lambda: tool_text(p, "thread_count") != n0, 5, "its thread counting")
        log0 = len(gw.stderr())
        install(thread_v2, "abi_thread_mod")
        ans = reload_ok(p)
        check_eq(ans["started"], ["th"], "the swapped module's instance anew: %r" % ans)
        check(tool_text(p, "thread_count").startswith("variant=2 "), "the new code serves")
        wait_for(lambda: len(named_threads(pid())) == 1 and named_threads(pid()) != old_tid, 10,
                 "the old %s thread joined, one new one running" % THREAD_NAME)
        wait_for(lambda: len(mapped_images(pid(), "abi_thread_mod")) == 1
                 and not mapped_images(pid(), "abi_thread_mod") & before, 10,
                 "the old abi_thread_mod image %r unmapped (mapped: %r)"
                 % (sorted(before), sorted(mapped_images(pid(), "abi_thread_mod"))))
        check(logged(gw.stderr()[log0:], "[backend:abi_thread_mod:th]", "thread joined after"),
              "the old instance's stop() joined its thread")

    def refused(m, words, what):
        p = gw.port
        wait_all_retired(gw)  # a baseline to compare with
        tids, maps = sorted(threads(pid())), mapped_modules(pid())
        rewrite(m)
        deadline = time.time() + 20
        while True:
            r = post_reload(p)
            if r.status != 409 or time.time() > deadline:
                break
            time.sleep(0.02)
        check_eq(r.status, 400, "%s: refused (%r)" % (what, r.body[:300]))
        errs = json.loads(r.body)["errors"]
        check(all(any(w in e for e in errs) for w in words),
              "%s: the errors say %r: %r" % (what, words, errs))
        check_eq(tool_text(p, "fail_create_ping"), "ok", "%s: the old generation serves" % what)
        check(tool_text(p, "thread_count").startswith("variant=2 tag=1 "),
              "%s: the old thread_mod instance serves" % what)
        wait_for(lambda: sorted(threads(pid())) == tids, 5,
                 "%s: the same threads as before (%r, now %r)" % (what, tids, threads(pid())))
        wait_for(lambda: mapped_modules(pid()) == maps, 5,
                 "%s: the same images mapped (%r, now %r)"
                 % (what, sorted(maps), sorted(mapped_modules(pid()))))
        rewrite(manifest())
        ans = reload_ok(p)
        check_eq(ans["started"], [], "%s: back to the serving manifest" % what)
        return errs

    def t_fail_create():
        refused(manifest(tag=2, fail_create=True, extra_good=True),
                ['.config: instance "fc" could not be created: service unavailable'], "create fails")

    def t_fail_start():
        log0 = len(gw.stderr())
        errs = refused(manifest(tag=3, fail_start=True, extra_good=True),
                       ["the instance could not start"], "start fails")
        log = gw.stderr()[log0:]
        check(logged(log, "[backend:abi_fail_start:fs]", "start failed: service unavailable"),
              "the log names the instance whose start failed:\n%s" % log)
        # the new thread_mod instance (tag 3) had started before fs failed
        check(logged(log, "[backend:abi_thread_mod:th]", "thread joined after"),
              "the new generation's started thread was joined:\n%s" % log)
        check(any("fs" in e.split(": ")[1:2] for e in errs),
              "the 400 for a failed start names the instance: %r" % errs)

    def t_initial_image_unmapped():
        p = gw.port
        before = mapped_images(pid(), "abi_v1_0")
        install(os.path.join(fixtures, "abi_v1_0.so"), "abi_v1_0", tail=b"\0" * 64)
        ans = reload_ok(p)
        check_eq(ans["started"], ["v1"], "other content: the 1.0 module loaded anew: %r" % ans)
        check_eq(tool_text(p, "v1_ping"), "limit=5 ratio=0.75", "v1_ping from the new image")
        wait_all_retired(gw)
        now = mapped_images(pid(), "abi_v1_0")
        check_eq(len(now - before), 1, "the new abi_v1_0 image mapped: %r" % sorted(now))
        check(not now & before,
              "the abi_v1_0 image the gateway started with is unmapped once its last "
              "instance left: %r" % sorted(now & before))

    def t_bad_timer_pinned():
        p = gw.port
        rewrite(manifest(timer=True))
        ans = reload_ok(p)
        check_eq(ans["started"], ["bt"], "a reload adds abi_bad_timer: %r" % ans)
        first = ticks()
        wait_for(lambda: ticks() > first + 4, 5, "abi_bad_timer's timers ticking")
        images = mapped_images(pid(), "abi_bad_timer")
        check_eq(len(images), 1, "one abi_bad_timer image: %r" % sorted(images))
        log0 = len(gw.stderr())
        rewrite(manifest())
        t0 = time.time()
        ans = reload_ok(p)
        check_eq(ans["stopping"], ["bt"], "the timer module leaves: %r" % ans)
        check_eq(tool_text(p, "fail_create_ping"), "ok", "serving after the publish")
        # the retire waits 5 s for the timers, then gives up on that generation
        wait_for(lambda: "images pinned so far: 1" in gw.stderr()[log0:], 15,
                 "the retire to give up and pin")
        log = gw.stderr()[log0:]
        check(logged(log, "[backend:abi_bad_timer:bt]",
                     "with 2 timer(s) and 0 piece(s) of work still live: its image stays "
                     "loaded (pinned)"),
              "the log names the instance and its two live timers (one per loop):\n%s" % log)
        check(logged(log, "kernel", "(left loaded: an instance would not go quiet)"),
              "the retire says the generation stays loaded")
        sys.stdout.write("  pinned %.1f s after the reload\n" % (time.time() - t0))
        check_eq(mapped_images(pid(), "abi_bad_timer"), images, "the pinned image stays mapped")
        check_eq(tool_text(p, "v1_ping"), "limit=5 ratio=0.75", "serving after the pin")
        ans = reload_ok(p)
        check_eq(ans["started"], [], "a later reload works: %r" % ans)
        check_eq(mapped_images(pid(), "abi_bad_timer"), images, "still mapped")
        # the stop comes while this reload's retire may still run: the
        # gateway must stop cleanly all the same

    def t_stop():
        # the pinned generation is freed at the stop: no leak report, exit 0
        gw.signal(signal.SIGTERM)
        rc = gw.wait_exit()
        log = gw.stderr()
        bad = sanitizer_lines(log)
        check(not bad, "sanitizer report on stderr:\n%s" % gw.stderr_tail(80))
        check_eq(rc, 0, "exit code (%s)" % gw.stderr_tail())
        check(logged(log, "[backend:abi_bad_timer:bt]", "left a timer running on worker"),
              "at the stop the kernel cancels the leaked timers, saying whose:\n%s"
              % gw.stderr_tail(20))

    return run_tests([
        ("the bestiary loads and serves", t_start),
        ("abi_v1_0 carried across a reload and swapped by a config change",
         t_v1_0_across_reloads),
        ("abi_thread_mod swapped: its thread joined, its old image unmapped",
         t_thread_mod_swapped),
        ("abi_fail_create: the reload is refused, nothing leaks", t_fail_create),
        ("abi_fail_start: the reload is refused, what started is stopped", t_fail_start),
        ("an image the gateway started with, replaced", t_initial_image_unmapped),
        ("abi_bad_timer retired: the live timer pins its image, the gateway serves on",
         t_bad_timer_pinned),
        ("the gateway stops cleanly", t_stop),
    ], ctx)


if __name__ == "__main__":
    sys.exit(main())
