#!/usr/bin/python3
"""Reload while serving: POST /admin/reload (token from the variable
gateway.server.admin_token_env names) and SIGHUP re-read the manifest; a module file
whose content changed is loaded anew and its instances replace the old ones, the rest
are carried over; calls under load never fail and switch to the new code right after
each publish; afterwards one image of the module is mapped; every bad reload leaves the
old generation serving; a legacy session lives across reloads (its GET stream until
gateway.reload_drain_ms after each: test_reload_retire.py)."""
import json
import os
import re
import shutil
import signal
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
from gateway import (Conn, replace_file, Context, Gateway, TestFailure, call_tool, check,  # noqa: E402
                     check_eq, free_port, parse_args, run_tests, wait_for)
from test_legacy_wire import initialize, read_stream, request, rpc  # noqa: E402

TOKEN = "reload-test-token"


def post_reload(port, token=TOKEN, method="POST"):
    lines = ["%s /admin/reload HTTP/1.1" % method, "Host: localhost:%d" % port,
             "Content-Length: 0"]
    if token is not None:
        lines.append("Authorization: Bearer %s" % token)
    with Conn(port) as c:
        c.send(("\r\n".join(lines) + "\r\n\r\n").encode())
        return c.read_response()


def reload_answer(port, timeout=20.0):
    """POST /admin/reload until it is not "in progress" (409); the answer."""
    deadline = time.monotonic() + timeout
    while True:
        r = post_reload(port)
        if r.status != 409 or time.monotonic() > deadline:
            return r
        time.sleep(0.02)


def reload_ok(port, timeout=20.0):
    """POST /admin/reload until it is not "in progress" (409); the 200 answer."""
    r = reload_answer(port, timeout)
    check_eq(r.status, 200, "reload answered (%r)" % r.body[:400])
    return json.loads(r.body)


def wait_all_retired(gw, timeout=20):
    """Until every generation a reload replaced has retired (its log line): a reload
    no longer waits for the generation before it to retire."""
    def done():
        text = gw.stderr()
        return (len(re.findall(r"reload: generation \d+ retired", text)) ==
                len(re.findall(r"reload: generation \d+ serves", text)))
    wait_for(done, timeout, "every replaced generation retired")


def listens_on(pid, port):
    """Whether process pid holds a socket listening on TCP port (its fds against
    /proc/net/tcp): what the gateway itself does, whoever else may bind the port."""
    inodes = set()
    with open("/proc/net/tcp") as f:
        next(f)
        for ln in f:
            parts = ln.split()
            if parts[3] == "0A" and int(parts[1].split(":")[1], 16) == port:
                inodes.add("socket:[%s]" % parts[9])
    if not inodes:
        return False
    fds = "/proc/%d/fd" % pid
    for fd in os.listdir(fds):
        try:
            if os.readlink(os.path.join(fds, fd)) in inodes:
                return True
        except OSError:  # closed meanwhile
            pass
    return False


def echo_text(port, id=1, message="hi"):
    r, rpc_ = call_tool(port, "echo", {"message": message}, id=id)
    check("result" in rpc_, "echo answered: %r" % rpc_)
    return rpc_["result"]["content"][0]["text"]


def mapped_images(pid, stem):
    """Distinct files named <stem>.<hash>.so mapped in the process."""
    seen = set()
    with open("/proc/%d/maps" % pid) as f:
        for line in f:
            path = line.split()[-1] if len(line.split()) >= 6 else ""
            if os.path.basename(path).startswith(stem + "."):
                seen.add(path)
    return seen


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def main():
    args = parse_args(lambda ap: ap.add_argument("--v2", required=True))
    ctx = Context(args)
    # a module folder of our own: the build's modules, backend_mock a copy we swap
    mods = ctx.path("modules")
    os.makedirs(mods)
    for name in os.listdir(args.modules):
        if name.endswith(".so") and name != "backend_mock.so":
            os.symlink(os.path.join(args.modules, name), os.path.join(mods, name))
    v1 = os.path.join(args.modules, "backend_mock.so")

    def install(src):
        tmp = os.path.join(mods, ".backend_mock.so.tmp")
        shutil.copyfile(src, tmp)
        os.rename(tmp, os.path.join(mods, "backend_mock.so"))

    install(v1)

    def manifest(tools=("echo",), extra_modules=(), audit=False):
        m = {
            "gateway": {"module_dir": mods, "server": {"admin_token_env": "MCPG_TEST_ADMIN"},
                        "workers": 2},
            "cluster": {"kind": "single_node"},
            "modules": [{"name": "mock", "module": "backend_mock",
                         "config": {"tools": [{"name": t} for t in tools]}}] + list(extra_modules),
            "pipeline": {"audit": ["audit"] if audit else []},
        }
        return m

    path = ctx.write_manifest(manifest(), "reload.json")
    gw = Gateway(ctx, config=path, env={"MCPG_TEST_ADMIN": TOKEN}, name="reload").start()
    p = gw.port

    def rewrite(m):
        replace_file(path, m)

    def t_admin_route():
        r = post_reload(p, token=None)
        check_eq(r.status, 401, "no token: 401 (%r)" % r.body[:200])
        check("bearer" in (r.header("www-authenticate") or "").lower(), "WWW-Authenticate")
        r = post_reload(p, token="wrong")
        check_eq(r.status, 401, "a wrong token: 401")
        r = post_reload(p, method="GET")
        check_eq(r.status, 405, "GET: 405")
        ans = reload_ok(p)
        check(ans["generation"] > ans["previous"], "a new generation: %r" % ans)
        check_eq(ans["started"], [], "nothing changed: nothing started")
        check("mock" in ans["carried"] and "http" in ans["carried"], "all carried: %r" % ans)
        check_eq(echo_text(p), "Echo: hi", "still serving")

    def t_config_change():
        rewrite(manifest(tools=("echo", "echo2")))
        ans = reload_ok(p)
        check_eq(ans["started"], ["mock"], "the changed instance started anew: %r" % ans)
        check_eq(ans["stopping"], ["mock"], "its predecessor stops: %r" % ans)
        r, rpc_ = call_tool(p, "echo2", {"message": "x"}, id=5)
        check("result" in rpc_, "the new tool answers: %r" % rpc_)
        rewrite(manifest())
        reload_ok(p)

    def t_swap_under_load():
        stop = threading.Event()
        stats = {"ok": 0, "failed": [], "last": {}}
        lock = threading.Lock()

        def load(k):
            n = 0
            while not stop.is_set():
                n += 1
                try:
                    r, rpc_ = call_tool(p, "echo", {"message": "m"}, id=n)
                    text = rpc_["result"]["content"][0]["text"]
                    with lock:
                        stats["ok"] += 1
                        stats["last"][k] = text
                except Exception as e:  # noqa: BLE001 — every failure is counted and shown
                    with lock:
                        stats["failed"].append(repr(e)[:200])
                time.sleep(0.002)

        def answered():
            with lock:
                return stats["ok"]

        def load_moves(what):
            """Until every load thread has had one more call answered (or failed):
            the load runs around each reload, however slow the machine."""
            with lock:
                n0 = stats["ok"] + len(stats["failed"])
            wait_for(lambda: answered() + len(stats["failed"]) >= n0 + len(threads), 30,
                     "load calls answered %s" % what)

        threads = [threading.Thread(target=load, args=(k,)) for k in range(3)]
        for t in threads:
            t.start()
        rss0 = rss_kb(gw.proc.pid)
        publish_ms = []
        slowest = 0.0
        try:
            wait_for(lambda: len(stats["last"]) == len(threads), 30,
                     "every load thread answered once")
            for i in range(10):
                src, want = (args.v2, "Echo v2: hi") if i % 2 == 0 else (v1, "Echo: hi")
                install(src)
                t0 = time.monotonic()
                ans = reload_ok(p)
                publish_ms.append(ans["published_ms"])
                check_eq(ans["started"], ["mock"], "swap %d: the module's instance anew" % i)
                check_eq(echo_text(p, id=1000 + i), want, "swap %d: the new code serves" % i)
                slowest = max(slowest, time.monotonic() - t0)
                load_moves("after swap %d" % i)
            for i in range(10):
                ans = reload_ok(p)
                check_eq(ans["started"], [], "unchanged reload %d starts nothing" % i)
                load_moves("after unchanged reload %d" % i)
        finally:
            stop.set()
            for t in threads:
                t.join(10)
        check_eq(stats["failed"], [], "no call failed across 20 reloads (%d answered)" % stats["ok"])
        # the last retire done: exactly one image of backend_mock is mapped
        deadline = time.monotonic() + 20
        while len(mapped_images(gw.proc.pid, "backend_mock")) != 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        imgs = mapped_images(gw.proc.pid, "backend_mock")
        check_eq(len(imgs), 1, "one backend_mock image mapped: %r" % sorted(imgs))
        rss1 = rss_kb(gw.proc.pid)
        check(rss1 < rss0 + 30 * 1024, "resident memory %d kB -> %d kB" % (rss0, rss1))
        sys.stdout.write("  %d calls, 0 failed; publish %s ms; slowest swap %.2f s; rss %d -> %d kB\n"
                         % (stats["ok"], sorted(publish_ms), slowest, rss0, rss1))

    def refused(m_text, words, what):
        replace_file(path, m_text)
        r = reload_answer(p)
        check_eq(r.status, 400, "%s: refused (%r)" % (what, r.body[:300]))
        errs = json.loads(r.body)["errors"]
        text = " ".join(errs)
        check(all(w in text for w in words), "%s: the errors say %r: %r" % (what, words, errs))
        check_eq(echo_text(p, id=77), "Echo: hi", "%s: the old generation serves on" % what)

    def t_bad_reloads():
        install(v1)
        rewrite(manifest())
        reload_ok(p)
        refused("{\"gateway\": ", ["invalid JSON"], "a syntax error")
        m = manifest()
        m["modules"].append({"name": "x", "module": "backend_nosuch"})
        refused(m, ["backend_nosuch"], "an unknown module")
        bogus = os.path.join(mods, "backend_bogus.so")
        with open(bogus, "wb") as f:
            f.write(b"not an ELF file at all")
        m = manifest()
        m["modules"].append({"name": "x", "module": "backend_bogus"})
        refused(m, ["backend_bogus", "dlopen"], "a file that is not a module")
        m = manifest()
        m["modules"].append({"name": "math", "module": "backend_ffi", "config": {"functions": [
            {"name": "f", "library": "libnosuch.so.9", "symbol": "f", "returns": "double",
             "params": []}]}})
        refused(m, ["libnosuch"], "a config its module refuses")
        m = manifest(audit=True)
        m["modules"].append({"name": "audit", "module": "audit_file",
                             "config": {"path": "/nonexistent-dir/x/audit.jsonl"}})
        refused(m, ["config.path: folder /nonexistent-dir/x does not exist"],
                "a file in a missing folder")
        dangling = ctx.path("dangling-audit.jsonl")  # its folder exists; opening it fails
        if not os.path.islink(dangling):
            os.symlink("/nonexistent-dir/x/audit.jsonl", dangling)
        m["modules"][-1]["config"]["path"] = dangling
        refused(m, ["could not start"], "an instance whose start fails")
        m = manifest()
        m["gateway"]["workers"] = 3
        refused(m, ["gateway.workers"], "a change a reload cannot make")
        rewrite(manifest())
        reload_ok(p)
        check("reload refused" in gw.stderr(), "refusals are logged")

    def t_session_across_reload():
        _, sid = initialize(p)
        request(p, body={"jsonrpc": "2.0", "method": "notifications/initialized"}, session=sid)
        with Conn(p) as g:
            request(p, "GET", session=sid, accept="text/event-stream", conn=g)
            head = g._read_until(b"\r\n\r\n").decode()
            check(head.startswith("HTTP/1.1 200"), "the GET stream opens: %r" % head)
            install(args.v2)
            reload_ok(p)
            r = request(p, body=rpc("tools/call", {"name": "echo", "arguments": {"message": "s"}},
                                    id=9), session=sid)
            check_eq(r.status, 200, "a call on the session after the reload")
            check("Echo v2: s" in r.body.decode(), "served by the new code: %r" % r.body[:300])
            # the stream still carries news: a list change after the next reload
            rewrite(manifest(tools=("echo", "echo3")))
            reload_ok(p)
            install(v1)
            rewrite(manifest())
            reload_ok(p)

    def t_sighup():
        rewrite(manifest(tools=("echo", "echo4")))
        # a SIGHUP while another reload is being built is skipped (logged): sent
        # again until one reload is published
        served = re.compile(r"reload: generation \d+ serves")
        skipped = "SIGHUP: a reload is in progress; this one is skipped"
        deadline = time.monotonic() + 30
        while True:
            text = gw.stderr()
            n_served, n_skipped = len(served.findall(text)), text.count(skipped)
            gw.signal(signal.SIGHUP)
            wait_for(lambda: len(served.findall(gw.stderr())) > n_served
                     or gw.stderr().count(skipped) > n_skipped, 20,
                     "the SIGHUP's reload published or skipped")
            if len(served.findall(gw.stderr())) > n_served:
                break
            check(time.monotonic() < deadline, "every SIGHUP skipped for 30 s")
            time.sleep(0.05)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            r, rpc_ = call_tool(p, "echo4", {"message": "x"}, id=8)
            if "result" in rpc_:
                break
            time.sleep(0.05)
        check("result" in rpc_, "SIGHUP reloaded: echo4 answers (%r)" % rpc_)

    def t_listen_change():
        # Ports are picked just before use and picked again if another process took
        # one meanwhile ("address already in use"); that the gateway lets go of an
        # address is judged by its own sockets, not by whether anybody listens there.
        for attempt in range(3):
            a = free_port()
            lpath = ctx.write_manifest(dict(manifest(), gateway=dict(
                manifest()["gateway"], listen=["127.0.0.1:%d" % a])), "listen.json")
            lg = Gateway(ctx, config=lpath, env={"MCPG_TEST_ADMIN": TOKEN}, listen=False,
                         health_port=a, name="listen")
            try:
                lg.start()
                break
            except TestFailure:
                if attempt == 2 or "in use" not in lg.stderr().lower():
                    raise
        try:
            check_eq(echo_text(a), "Echo: hi", "served on the first address")
            check(listens_on(lg.proc.pid, a), "the gateway listens on the first address")
            m = json.load(open(lpath))
            for attempt in range(3):
                b = free_port()
                m["gateway"]["listen"] = ["127.0.0.1:%d" % a, "127.0.0.1:%d" % b]
                with open(lpath, "w") as f:
                    json.dump(m, f)
                r = reload_answer(a)
                if r.status == 400 and b"in use" in r.body and attempt < 2:
                    continue  # b was taken since it was picked
                check_eq(r.status, 200, "reload answered (%r)" % r.body[:400])
                break
            check_eq(json.loads(r.body)["started"], [], "a listen change alone starts no instance")
            check_eq(echo_text(b, id=2), "Echo: hi", "the added address serves")
            check_eq(echo_text(a, id=3), "Echo: hi", "the kept address still serves")
            m["gateway"]["listen"] = ["127.0.0.1:%d" % b]
            with open(lpath, "w") as f:
                json.dump(m, f)
            reload_ok(b)
            wait_for(lambda: not listens_on(lg.proc.pid, a), 10,
                     "the gateway to stop listening on the dropped address")
            check_eq(echo_text(b, id=4), "Echo: hi", "the remaining address serves")
            busy = Gateway(ctx, manifest=manifest(), name="busy").start()
            r = post_reload(busy.port)
            check_eq(r.status, 404, "no admin token in its environment: no admin route")
            m["gateway"]["listen"] = ["127.0.0.1:%d" % b, "127.0.0.1:%d" % busy.port]
            with open(lpath, "w") as f:
                json.dump(m, f)
            r = reload_answer(b)
            check_eq(r.status, 400, "a busy address refuses the reload (%r)" % r.body[:300])
            check("address already in use" in r.body.decode(), "the error says why: %r" % r.body)
            check_eq(echo_text(b, id=5), "Echo: hi", "still served after the refusal")
            busy.stop()
        finally:
            lg.stop()

    def t_transport_change_refused():
        """The transport owns the connections and their streams: a reload that would
        replace it (gateway.server changed) is refused naming the key; nothing changes."""
        m = manifest()
        m["gateway"]["server"]["access_log"] = False
        refused(m, ["gateway.server", "restart"], "a transport setting changed")
        rewrite(manifest())
        reload_ok(p)

    def t_stop():
        gw.stop()

    return run_tests([
        ("POST /admin/reload: 401 without the token, 405 for GET, 200 with what changed",
         t_admin_route),
        ("a config change: that instance anew, the rest carried", t_config_change),
        ("module code swapped under load, 10 times each way, and 10 unchanged reloads",
         t_swap_under_load),
        ("bad reloads leave the old generation serving", t_bad_reloads),
        ("a legacy session and its GET stream across reloads", t_session_across_reload),
        ("SIGHUP reloads", t_sighup),
        ("a reload that would replace the transport is refused", t_transport_change_refused),
        ("listen addresses added and dropped by a reload; a busy one refused", t_listen_change),
        ("the gateway stops cleanly", t_stop),
    ], ctx)


if __name__ == "__main__":
    sys.exit(main())
