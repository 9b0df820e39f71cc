#!/usr/bin/env python3
"""What the gateway judges is what runs: a differential test over both wires.

A gateway with three backends serving a tool each: backend_mcp in front of a
recording upstream (fake_mcp_upstream.py --record: every message it received)
as up_echo, backend_mock as echo (its answer shows the message it read), and
backend_http as rest_echo, POSTing {message, k} to a recording REST endpoint.
A policy lets anyone call both, with a guard on the message (lower case
letters and spaces only), and the audit file records every call.

Many variants of one tools/call are sent on the stateless wire and on a
legacy session, each tagged by a unique arguments.k the variants never
touch: duplicate members at every level (params, arguments, nested objects
and arrays, name, _meta, the envelope; plain and escaped spellings, either
order), escapes, a NUL in the name, members the method does not define (a
uri beside the name), case, prefixes, wrong types, plus a generated batch of
nested arguments with duplicates planted at random depths. For each:

  * refused: it reached no backend (no upstream message carries its tag; the
    mock's call count grows only by the admitted echo calls);
  * admitted: the audited tool and arguments are what the backend received,
    compared as JSON values (the upstream's recorded params, the upstream
    name being the audited one without its prefix; the mock's echo of the
    message; the REST endpoint's body), and no upstream message carries a
    member tools/call does not define.
"""

import json
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway import (META, Conn, Context, Gateway, base_manifest, build_request, call_tool,  # noqa: E402
                     check, check_eq, parse_args, read_audit, run_tests, stateless_headers,
                     wait_for)
from restlib import RecordingUpstream  # noqa: E402
from test_backend_mcp import FAKE, Fake, wait_tool  # noqa: E402
from test_legacy_wire import answer, initialize  # noqa: E402

GUARD = "[a-z ]*"  # the message's guard: "EVIL" breaks it
TOOL_CALL_MEMBERS = {"name", "arguments", "_meta", "task", "requestState", "inputResponses"}


def manifest(ctx, fake, audit_path, rest_port):
    m = base_manifest(audit_path=audit_path, mock_config={"stats_tool": True})
    m["modules"].append({"name": "up", "module": "backend_mcp", "inline_dispatch": True,
                         "config": {"command": sys.executable, "args": fake.argv()}})
    m["modules"].append({"name": "rest", "module": "backend_http", "config": {"tools": [
        {"name": "rest_echo", "method": "POST", "url": "http://127.0.0.1:%d/echo" % rest_port,
         "body": {"message": "{message}", "k": "{k}"},
         "input_schema": {"type": "object", "properties": {"message": {"type": "string"},
                                                           "k": {"type": "string"}},
                          "required": ["message", "k"]}}]}})
    m["modules"].append({"name": "rules", "module": "policy_rules", "config": {
        "rules": [{"id": "anyone", "anonymous": True,
                   "tools": ["echo", "up_echo", "rest_echo", "mock_stats"],
                   "arguments": [{"pointer": "/message", "regex": GUARD}]}]}})
    m["gateway"]["anonymous"] = True
    m["pipeline"]["policy"] = ["rules"]
    m["bindings"] = [{"backend": "mock"}, {"backend": "up", "prefix": "up"}, {"backend": "rest"}]
    return m


# ---- the variants: (label, name as the client calls it, params members as raw JSON text) ----

def variants(tool, tag):
    """Raw params members (no braces) for one tool. T is the tag member."""
    t = '"k":"%s"' % tag
    n = json.dumps(tool)
    esc_name = '"' + "".join("\\u%04x" % ord(ch) if ch in "eo" else ch for ch in tool) + '"'
    return [
        ("plain", '"name":%s,"arguments":{"message":"ok",%s}' % (n, t)),
        ("dup argument, guarded value last",
         '"name":%s,"arguments":{"message":"ok","message":"EVIL",%s}' % (n, t)),
        ("dup argument, guarded value first",
         '"name":%s,"arguments":{"message":"EVIL","message":"ok",%s}' % (n, t)),
        ("dup argument, escaped spelling",
         '"name":%s,"arguments":{"message":"ok","mess\\u0061ge":"EVIL",%s}' % (n, t)),
        ("dup arguments object",
         '"name":%s,"arguments":{"message":"ok",%s},"arguments":{"message":"EVIL",%s}' % (n, t, t)),
        ("dup name", '"name":%s,"name":"up_other","arguments":{"message":"ok",%s}' % (n, t)),
        ("dup name, escaped spelling",
         '"name":%s,"n\\u0061me":"up_other","arguments":{"message":"ok",%s}' % (n, t)),
        ("nested dup", '"name":%s,"arguments":{"message":"ok",%s,"o":{"a":1,"a":2}}' % (n, t)),
        ("dup inside an array",
         '"name":%s,"arguments":{"message":"ok",%s,"l":[{"x":1},{"y":1,"y":2}]}' % (n, t)),
        ("dup _meta member",
         '"name":%s,"arguments":{"message":"ok",%s},"_meta":{"progressToken":"a","progressToken":"b"}'
         % (n, t)),
        ("escaped name", '"name":%s,"arguments":{"message":"ok",%s}' % (esc_name, t)),
        ("escaped argument value", '"name":%s,"arguments":{"message":"o\\u006b",%s}' % (n, t)),
        ("NUL in the name", '"name":"%s\\u0000/../x","arguments":{"message":"ok",%s}' % (tool, t)),
        ("NUL in an argument", '"name":%s,"arguments":{"message":"ok\\u0000EVIL",%s}' % (n, t)),
        ("NUL in an argument name",
         '"name":%s,"arguments":{"message":"ok","message\\u0000":"EVIL",%s}' % (n, t)),
        ("a uri beside the name", '"name":%s,"uri":"file:///etc/passwd","arguments":{"message":"ok",%s}'
         % (n, t)),
        ("a member tools/call does not define",
         '"name":%s,"arguments":{"message":"ok",%s},"extra":{"name":"up_other"}' % (n, t)),
        ("name in another case", '"name":%s,"arguments":{"message":"ok",%s}' % (json.dumps(tool.upper()), t)),
        ("arguments not an object", '"name":%s,"arguments":[{"message":"ok",%s}]' % (n, t)),
        ("name not a string", '"name":[%s],"arguments":{"message":"ok",%s}' % (n, t)),
        ("guard broken", '"name":%s,"arguments":{"message":"EVIL",%s}' % (n, t)),
    ]


def nested(rng, depth, tag, plant):
    """A random arguments value; plant: put one duplicate somewhere in it."""
    if plant and depth <= 1:
        return '{"d":1,"d":2}' if rng.random() < 0.5 else '{"d":1,"\\u0064":2}'
    if depth == 0 or (not plant and rng.random() < 0.3):
        return rng.choice(['1', '"s"', 'true', 'null', '[]', '{}', '"\\u00e9"'])
    if rng.random() < 0.5:
        items = [nested(rng, depth - 1, tag, False) for _ in range(rng.randint(1, 3))]
        if plant:
            items[rng.randrange(len(items))] = nested(rng, depth - 1, tag, True)
        return "[" + ",".join(items) + "]"
    keys = ["k%d" % i for i in range(rng.randint(1, 4))]
    members = ['"%s":%s' % (k, nested(rng, depth - 1, tag, False)) for k in keys]
    if plant:
        if rng.random() < 0.5:
            k = rng.choice(keys)
            spelled = k if rng.random() < 0.5 else "\\u006b" + k[1:]
            members.insert(rng.randrange(len(members) + 1), '"%s":%s' % (spelled, nested(rng, 1, tag, False)))
        else:
            i = rng.randrange(len(members))
            members[i] = '"%s":%s' % (keys[i], nested(rng, depth - 1, tag, True))
    return "{" + ",".join(members) + "}"


def generated(tool, tag, rng):
    n = json.dumps(tool)
    plant = rng.random() < 0.5
    value = nested(rng, 4, tag, plant)
    return ("generated%s" % (" (a duplicate planted)" if plant else ""),
            '"name":%s,"arguments":{"message":"ok","k":"%s","g":%s}' % (n, tag, value))


# ---- sending one ----

def stateless_raw(port, tool, members, id):
    meta = json.dumps(META, separators=(",", ":"))
    body = '{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{%s,"_meta":%s}}' % (id, members, meta)
    if '"_meta":{"progressToken"' in members:  # that variant brings its own, merged by hand
        body = body.replace('"_meta":{"progressToken":"a","progressToken":"b"},', "")
        body = body.replace('"_meta":{', '"_meta":{"progressToken":"a","progressToken":"b",', 1)
    with Conn(port) as c:
        c.send(build_request(port, headers=stateless_headers("tools/call", tool), body=body))
        r = c.read_response()
    return r.rpc()


def legacy_raw(port, sid, members, id):
    body = '{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{%s}}' % (id, members)
    data = body.encode()
    head = ["POST /mcp HTTP/1.1", "Host: localhost:%d" % port,
            "Accept: application/json, text/event-stream", "Content-Type: application/json",
            "Content-Length: %d" % len(data), "Mcp-Session-Id: %s" % sid,
            "MCP-Protocol-Version: 2025-11-25"]
    with Conn(port) as c:
        c.send(("\r\n".join(head) + "\r\n\r\n").encode() + data)
        r = c.read_response()
    return answer(r)


def main():
    args = parse_args()
    ctx = Context(args)
    fake = Fake(ctx, "judged")
    audit_path = ctx.path("audit.jsonl")
    rest = RecordingUpstream()
    gw = Gateway(ctx, manifest=manifest(ctx, fake, audit_path, rest.port), name="gateway-judged")
    sent = []  # (wire, tool, label, tag, members, answer)
    rng = random.Random(int(os.environ.get("MCPG_JUDGED_SEED", "20261206")))

    def mock_calls():
        r, rpc = call_tool(gw.port, "mock_stats", {})
        return json.loads(rpc["result"]["content"][0]["text"])["tools"]["echo"]["calls"]

    def t_start():
        gw.start()
        wait_tool(gw.port, "up_echo")

    def t_send():
        sid = initialize(gw.port)[1]
        before = mock_calls()
        k = 0
        for wire in ("stateless", "legacy"):
            for tool in ("up_echo", "echo", "rest_echo"):
                cases = variants(tool, "TAG")
                cases += [generated(tool, "TAG", rng) for _ in range(40)]
                for label, members in cases:
                    k += 1
                    tag = "%s-%d" % (wire, k)
                    members = members.replace("TAG", tag)
                    out = (stateless_raw(gw.port, tool, members, k) if wire == "stateless"
                           else legacy_raw(gw.port, sid, members, k))
                    sent.append((wire, tool, label, tag, members, out))
        admitted_echo = sum(1 for s in sent if s[1] == "echo" and "result" in s[5])
        check_eq(mock_calls() - before, admitted_echo, "calls the mock ran (admitted echo calls)")
        refused = sum(1 for s in sent if "error" in s[5])
        print("%d variants sent, %d admitted, %d refused" % (len(sent), len(sent) - refused, refused))
        check(refused and len(sent) - refused, "both admitted and refused variants")

    def t_property():
        def upstream_by_tag():
            out = {}
            for m in fake.msgs():
                if m.get("method") != "tools/call":
                    continue
                tag = ((m.get("params") or {}).get("arguments") or {}).get("k")
                out.setdefault(tag, []).append(m["params"])
            return out

        admitted_up = [s for s in sent if s[1] == "up_echo" and "result" in s[5]]
        wait_for(lambda: all(s[3] in upstream_by_tag() for s in admitted_up), 20,
                 "the upstream to have recorded every admitted call")
        up = upstream_by_tag()
        audit = {}
        wait_for(lambda: sum(1 for e in read_audit(audit_path)
                             if e.get("event") == "mcpg.tool.call.allowed") >= len(
                                 [s for s in sent if "result" in s[5]]),
                 20, "every admitted call audited")
        for e in read_audit(audit_path):
            if e.get("event") == "mcpg.tool.call.allowed":
                audit.setdefault((e.get("args") or {}).get("k"), []).append(e)
        for wire, tool, label, tag, members, out in sent:
            what = "%s %s %s (%s)" % (wire, tool, label, members[:160])
            if "error" in out:
                check(tag not in up, "%s: refused (%r) yet reached the upstream" % (what, out["error"]))
                check(not [b for b in rest.bodies() if b.get("k") == tag],
                      "%s: refused yet reached the REST endpoint" % what)
                continue
            check_eq(len(audit.get(tag, [])), 1, "%s: audited once" % what)
            ev = audit[tag][0]
            check_eq(ev.get("tool"), tool, "%s: the audited tool" % what)
            if tool == "rest_echo":
                got = [b for b in rest.bodies() if b.get("k") == tag]
                check_eq(len(got), 1, "%s: the REST endpoint received it once" % what)
                check_eq(got[0], {"message": ev["args"]["message"], "k": tag},
                         "%s: the body the REST endpoint got = the audited arguments" % what)
            elif tool == "up_echo":
                got = up.get(tag, [])
                check_eq(len(got), 1, "%s: the upstream received it once" % what)
                params = got[0]
                check_eq(params.get("name"), "echo", "%s: the name the upstream ran" % what)
                check_eq(params.get("arguments"), ev.get("args"),
                         "%s: the arguments the upstream ran = the audited ones" % what)
                extra = set(params) - TOOL_CALL_MEMBERS
                check(not extra, "%s: members forwarded that tools/call does not define: %s"
                      % (what, extra))
            else:
                text = out["result"]["content"][0]["text"]
                check_eq(text, "Echo: " + ev["args"]["message"],
                         "%s: the message the mock ran = the audited one" % what)
            check(json.loads('{' + members + '}') is not None, "the variant is JSON")

    def t_expected_refusals():
        """The variants whose refusal is the point, by label, on both wires and tools."""
        must_refuse = ["dup argument, guarded value last", "dup argument, guarded value first",
                       "dup argument, escaped spelling", "dup arguments object", "dup name",
                       "dup name, escaped spelling", "nested dup", "dup inside an array",
                       "dup _meta member", "NUL in the name", "name in another case",
                       "arguments not an object", "name not a string", "guard broken",
                       "NUL in an argument", "NUL in an argument name",
                       "generated (a duplicate planted)"]
        must_admit = ["plain", "escaped name", "escaped argument value", "a uri beside the name",
                      "a member tools/call does not define", "generated"]
        for wire, tool, label, tag, members, out in sent:
            if label in must_refuse:
                check("error" in out, "%s %s %s: admitted (%r)" % (wire, tool, label, out))
            elif label in must_admit:
                check("result" in out, "%s %s %s: refused (%r)" % (wire, tool, label, out))

    def t_stop():
        gw.stop()
        rest.close()

    try:
        return run_tests([("the gateway starts with its three backends", t_start),
                          ("every variant sent on both wires", t_send),
                          ("admitted = what ran; refused = reached nothing", t_property),
                          ("each attack refused, each honest spelling admitted", t_expected_refusals),
                          ("the gateway stops", t_stop)], ctx)
    finally:
        if gw.proc is not None and gw.proc.poll() is None:
            gw.stop()


if __name__ == "__main__":
    sys.exit(main())
