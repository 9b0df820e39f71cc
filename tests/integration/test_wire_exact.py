#!/usr/bin/python3
"""What a client reads on each wire is what the gateway does, on the real gateway:

  * identity: with identity_apikey and no key, server/discover and subscriptions/listen
    (list changes only, and with resources) are refused 401 with the stage's challenge,
    like tools/call; with a key they are answered;
  * codes: on the 2026-07-28 wire the refusal's code is -32600 (that revision lets no
    implementation send the legacy -32000..-32019 range); the legacy wire keeps -32001;
  * the MCP-Protocol-Version header is required with the 2026-07-28 envelope (400 -32020);
  * server/discover and initialize advertise the same capabilities, from what the
    bindings serve: tools only for a tools-only mock, resources (subscribe) and
    completions once the mock serves resources; logging always;
  * every 2026-07-28 result carries the gateway's serverInfo in _meta (gateway.name).
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway import (Context, Conn, Gateway, base_manifest, build_request, check,  # noqa: E402
                     check_eq, expect_error, expect_result, new_apikey, parse_args, rpc_body,
                     run_tests, send_one, stateless_headers)
from test_legacy_wire import answer, head_of, read_stream, request  # noqa: E402

CHALLENGE = 'Bearer realm="mcpg"'
INFO_KEY = "io.modelcontextprotocol/serverInfo"
GW_NAME = "exact-gw"


def post(port, method, params=None, id=1, name=None, headers=(), version="2026-07-28"):
    h = stateless_headers(method, name, version=version) + list(headers)
    return send_one(port, build_request(port, headers=h, body=rpc_body(method, params, id=id)))


def listen_raw(port, notifications, headers=(), id="sub-1"):
    body = rpc_body("subscriptions/listen", {"notifications": notifications}, id=id)
    return build_request(port, headers=stateless_headers("subscriptions/listen") + list(headers),
                         body=body)


def initialize(port, headers=()):
    return request(port, body={"jsonrpc": "2.0", "id": 1, "method": "initialize",
                               "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                                          "clientInfo": {"name": "t", "version": "1"}}},
                   extra=list(headers))


def main():
    args = parse_args()
    ctx = Context(args)
    key = new_apikey(ctx, "alice")
    with_key = [("X-API-Key", key)]

    def manifest(identity=True, resources=False):
        m = base_manifest(gateway={"name": GW_NAME},
                          mock_config={"resources": [{"uri": "mock://a", "name": "a",
                                                      "text": "A"}]} if resources else None)
        if identity:
            m["modules"].append({"name": "keys", "module": "identity_apikey",
                                 "config": {"keys_file": ctx.path("keys.json")}})
            m["pipeline"]["identity"] = ["keys"]
        return m

    gw = Gateway(ctx, manifest=manifest(), name="exact").start()
    p = gw.port

    def refused(r, what, id):
        err = expect_error(r, 401, -32600, what, id=id)
        check_eq(r.header("www-authenticate"), CHALLENGE, what + ": WWW-Authenticate")
        return err

    def t_discover_needs_identity():
        refused(post(p, "server/discover", id=1), "server/discover without a key", 1)
        r = post(p, "server/discover", id=2, headers=with_key)
        res = expect_result(r, r.rpc(), 2, "server/discover with a key")
        check("2026-07-28" in res["supportedVersions"], "supportedVersions: %r" % res)

    def t_listen_needs_identity():
        for what, notif in (("list changes", {"toolsListChanged": True}),
                            ("resources", {"resourceSubscriptions": ["mock://a"]})):
            refused(send_one(p, listen_raw(p, notif)), "listen for %s without a key" % what,
                    "sub-1")
        with Conn(p) as c:
            c.send(listen_raw(p, {"toolsListChanged": True}, headers=with_key))
            status, head = head_of(c)
            check_eq(status, 200, "listen with a key (%s)" % head)
            text, _ = read_stream(c, until="notifications/subscriptions/acknowledged")
            check("acknowledged" in text, "the listen is acknowledged: %r" % text)

    def t_codes_per_wire():
        r = post(p, "tools/call", {"name": "echo", "arguments": {"message": "x"}}, id=3,
                 name="echo")
        refused(r, "tools/call without a key", 3)
        r = initialize(p)
        err = expect_error(r, 401, -32001, "legacy initialize without a key", id=1)
        check("Unauthenticated" in err["message"], "the kernel's refusal: %r" % err)

    def t_version_header_required():
        r = post(p, "tools/list", id=4, headers=with_key, version=None)
        err = expect_error(r, 400, -32020, "the 2026 envelope without MCP-Protocol-Version", id=4)
        check("MCP-Protocol-Version" in err["message"], "the message names the header: %r" % err)

    def t_server_info_everywhere():
        r = post(p, "tools/call", {"name": "echo", "arguments": {"message": "x"}}, id=5,
                 name="echo", headers=with_key)
        expect_result(r, r.rpc(), 5, "tools/call")
        res = r.rpc()["result"]  # whole: expect_result leaves serverInfo out
        info = (res.get("_meta") or {}).get(INFO_KEY) or {}
        check_eq(info.get("name"), GW_NAME, "tools/call: _meta serverInfo.name")
        r = post(p, "tools/list", id=6, headers=with_key)
        expect_result(r, r.rpc(), 6, "tools/list")
        res = r.rpc()["result"]
        check_eq((res.get("_meta") or {}).get(INFO_KEY, {}).get("name"), GW_NAME,
                 "tools/list: _meta serverInfo.name")

    def caps_of(port, headers):
        r = post(port, "server/discover", id=7, headers=headers)
        discover = expect_result(r, r.rpc(), 7, "server/discover")["capabilities"]
        init = answer(initialize(port, headers))["result"]["capabilities"]
        return discover, init

    def t_caps_follow_bindings():
        discover, init = caps_of(p, with_key)
        check_eq(discover, init, "discover and initialize advertise the same")
        check_eq(sorted(discover), ["logging", "tools"], "a tools-only mock: %r" % discover)
        with Gateway(ctx, manifest=manifest(identity=False, resources=True), name="res") as rg:
            discover, init = caps_of(rg.port, [])
            check_eq(discover, init, "with resources: discover and initialize agree")
            check(discover.get("resources", {}).get("subscribe") is True,
                  "resources served, subscriptions taken: %r" % discover)
            check("logging" in discover and "tools" in discover, "%r" % discover)
            check("prompts" not in discover, "no prompts are served: %r" % discover)

    return run_tests([
        ("server/discover passes identity", t_discover_needs_identity),
        ("subscriptions/listen passes identity", t_listen_needs_identity),
        ("401 codes: -32600 on 2026-07-28, -32001 on the legacy wire", t_codes_per_wire),
        ("MCP-Protocol-Version is required with the envelope", t_version_header_required),
        ("every 2026-07-28 result names the gateway", t_server_info_everywhere),
        ("capabilities follow what the bindings serve, on both wires", t_caps_follow_bindings),
    ], ctx)


if __name__ == "__main__":
    sys.exit(main())
