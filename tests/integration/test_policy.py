#!/usr/bin/python3
"""policy_rules on the real gateway: a policy matrix of six callers (five principals and an
anonymous one) x four tools x
allowed and refused arguments, on the stateless (2026-07-28) wire and on legacy (2025-11-25)
sessions; tools/list, prompts/list, resources/list and resources/templates/list showing each
principal only what it may use; prompts/get and resources/read judged; a denial is JSON-RPC
-32003 on the legacy wire, -32600 on the 2026-07-28 one (HTTP 403 where the answer is one JSON body) whose message names the class of refusal
and never the rule, and is audited as mcpg.tool.call.denied; `mcpg --check` on the shipped
example policy and on a broken one.

Identities come from identity_testheader (X-Test-Principal, X-Test-Tenant, X-Test-Roles), a
test-only module built into build/test-modules, never into build/modules."""
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway import (REFUSED_2026, Conn, Context, Gateway, build_request, check, check_eq, parse_args,  # noqa: E402
                     read_audit, rpc_body, run_cli, run_tests, send_one, stateless_headers,
                     wait_for)
from test_legacy_wire import answer, request, rpc  # noqa: E402

TOOLS = ["echo", "search", "db_query", "admin_reset"]
PROMPTS = ["ev_test_simple_prompt", "ev_test_prompt_with_arguments"]
RESOURCES = ["test://static-text", "test://static-binary", "test://watched-resource"]
TEMPLATES = ["test://template/{id}/data"]

RULES = [
    {"id": "admins", "roles": "admin", "tools": "*", "prompts": "*", "resources": "*"},
    {"id": "acme-echo", "tenant": "acme", "roles": "reader", "tools": "echo"},
    {"id": "acme-search", "tenant": "acme", "roles": ["reader", "analyst-*"], "tools": "search",
     "arguments": [{"pointer": "/q", "regex": "[a-z ]+", "required": True},
                   {"pointer": "/limit", "min": 1, "max": 50}]},
    {"id": "acme-content", "tenant": "acme", "roles": "reader",
     "prompts": "ev_test_simple_prompt", "resources": "test://static-*"},
    {"id": "bob-echo", "principal": "bob", "tools": "echo",
     "arguments": [{"pointer": "/message", "max_length": 10}]},
    {"id": "bob-db", "principal": "bob", "tools": "db_query",
     "arguments": [{"pointer": "/table", "enum": ["users", "orders"]}]},
    {"id": "bob-templates", "principal": "bob", "resources": "test://template/*"},
    {"id": "ops-reset", "roles": "ops", "tools": "admin_reset",
     "arguments": [{"pointer": "/force", "enum": [False]}]},
    {"id": "services", "principal": "svc-*", "prompts": "ev_*"},
    {"id": "public", "anonymous": True, "tools": "echo",
     "arguments": [{"pointer": "/message", "max_length": 10}]},
]

# principal -> (tenant, roles)
PRINCIPALS = {
    "ann": ("any", "ops,admin"),
    "rita": ("acme", "reader"),
    "bob": (None, None),
    "olga": ("globex", "ops"),
    "zed": ("acme", "guest"),
    "(anonymous)": (None, None),  # no X-Test-Principal: gateway.anonymous lets it through
}

# tool -> (arguments allowed by its guards, arguments refused by them)
ARGS = {
    "echo": ({"message": "hi"}, {"message": "a message far too long"}),
    "search": ({"message": "x", "q": "cats", "limit": 5},
               {"message": "x", "q": "cats", "limit": 99}),
    "db_query": ({"message": "x", "table": "users"}, {"message": "x", "table": "secrets"}),
    "admin_reset": ({"message": "x", "force": False}, {"message": "x", "force": True}),
}

NO = ("no_rule", None)


def ok():
    return ("ok", None)


def guard(ptr):
    return ("guard", ptr)


# (principal, tool) -> (outcome with the good arguments, outcome with the bad ones)
EXPECTED = {
    ("ann", "echo"): (ok(), ok()), ("ann", "search"): (ok(), ok()),
    ("ann", "db_query"): (ok(), ok()), ("ann", "admin_reset"): (ok(), ok()),
    ("rita", "echo"): (ok(), ok()), ("rita", "search"): (ok(), guard("/limit")),
    ("rita", "db_query"): (NO, NO), ("rita", "admin_reset"): (NO, NO),
    ("bob", "echo"): (ok(), guard("/message")), ("bob", "search"): (NO, NO),
    ("bob", "db_query"): (ok(), guard("/table")), ("bob", "admin_reset"): (NO, NO),
    ("olga", "echo"): (NO, NO), ("olga", "search"): (NO, NO),
    ("olga", "db_query"): (NO, NO), ("olga", "admin_reset"): (ok(), guard("/force")),
    ("zed", "echo"): (NO, NO), ("zed", "search"): (NO, NO),
    ("zed", "db_query"): (NO, NO), ("zed", "admin_reset"): (NO, NO),
    ("(anonymous)", "echo"): (ok(), guard("/message")), ("(anonymous)", "search"): (NO, NO),
    ("(anonymous)", "db_query"): (NO, NO), ("(anonymous)", "admin_reset"): (NO, NO),
}

VISIBLE = {
    "ann": (TOOLS, PROMPTS, RESOURCES, TEMPLATES),
    "rita": (["echo", "search"], ["ev_test_simple_prompt"],
             ["test://static-text", "test://static-binary"], []),
    "bob": (["echo", "db_query"], [], [], TEMPLATES),
    "olga": (["admin_reset"], [], [], []),
    "zed": ([], [], [], []),
    "(anonymous)": (["echo"], [], [], []),
}


def identity(principal):
    if principal == "(anonymous)":
        return []
    tenant, roles = PRINCIPALS[principal]
    h = [("X-Test-Principal", principal)]
    if tenant:
        h.append(("X-Test-Tenant", tenant))
    if roles:
        h.append(("X-Test-Roles", roles))
    return h


def module_dir(ctx, test_modules):
    d = ctx.path("modules")
    os.makedirs(d, exist_ok=True)
    for m in ("transport_http", "coordinator_memory", "backend_mock", "backend_everything",
              "audit_file", "policy_rules"):
        src = os.path.join(ctx.modules, m + ".so")
        check(os.path.exists(src), "%s is missing (build the tree)" % src)
        shutil.copy(src, d)
    src = os.path.join(test_modules, "identity_testheader.so")
    check(os.path.exists(src), "%s is missing (build modules/policy_rules/tests)" % src)
    shutil.copy(src, d)
    return d


def manifest(mdir, audit_path, fast_path=False):
    return {
        "gateway": {"module_dir": mdir, "anonymous": True,
                    "server": {"unary_json_fast_path": fast_path}},
        "cluster": {"kind": "single_node"},
        "modules": [
            {"name": "who", "module": "identity_testheader"},
            {"name": "rules", "module": "policy_rules", "config": {"rules": RULES}},
            {"name": "mock", "module": "backend_mock",
             "config": {"tools": [{"name": t} for t in TOOLS]}},
            {"name": "everything", "module": "backend_everything"},
            {"name": "audit", "module": "audit_file", "config": {"path": audit_path}},
        ],
        "pipeline": {"identity": ["who"], "policy": ["rules"], "limits": [], "audit": ["audit"]},
        "bindings": [
            {"backend": "mock"},
            {"backend": "everything", "prefix": "ev", "allow": [p[3:] for p in PROMPTS]},
        ],
    }


# ---- the two wires ----

class Stateless:
    name = "stateless"

    def __init__(self, port):
        self.port = port
        self.n = 0

    def call(self, principal, method, params, name=None):
        self.n += 1
        raw = build_request(self.port, headers=stateless_headers(method, name) + identity(principal),
                            body=rpc_body(method, params, id=self.n))
        r = send_one(self.port, raw)
        return r, r.rpc()


class Legacy:
    name = "legacy"

    def __init__(self, port):
        self.port = port
        self.n = 0
        self.sessions = {}

    def session(self, principal):
        if principal not in self.sessions:
            r = request(self.port, body=rpc("initialize", {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "policy-test", "version": "1"}}),
                version=None, extra=identity(principal))
            check_eq(r.status, 200, "initialize (%r)" % r.body[:200])
            sid = r.header("mcp-session-id")
            request(self.port, body={"jsonrpc": "2.0", "method": "notifications/initialized"},
                    session=sid, extra=identity(principal))
            self.sessions[principal] = sid
        return self.sessions[principal]

    def call(self, principal, method, params, name=None):
        self.n += 1
        r = request(self.port, body=rpc(method, params, id=self.n),
                    session=self.session(principal), extra=identity(principal))
        return r, answer(r)


def expect_denied(wire, r, msg, what, stateless_status=403):
    check("error" in msg, "%s: expected a denial, got %r" % (what, msg))
    err = msg["error"]
    # each wire's code for a refusal (REFUSED_2026 on the 2026-07-28 wire)
    check_eq(err.get("code"), REFUSED_2026 if wire.name == "stateless" else -32003, what + ": code")
    check(err.get("message", "").startswith("denied by policy: "), "%s: %r" % (what, err))
    if wire.name == "stateless" or r.content_type() == "application/json":
        check_eq(r.status, stateless_status, what + ": HTTP status")
    for rule in RULES:  # never a rule's name, pattern or values
        check(rule["id"] not in err["message"], "%s names rule %s: %r" % (what, rule["id"], err))
    check("[a-z ]+" not in json.dumps(err) and "users" not in json.dumps(err),
          "%s leaks a guard's pattern or values: %r" % (what, err))
    return err


def matrix(wire):
    """Every principal x tool x (good, bad) arguments; returns the denials seen."""
    denied = []
    for (principal, tool), outcomes in sorted(EXPECTED.items()):
        for args, (outcome, ptr) in zip(ARGS[tool], outcomes):
            what = "%s: %s calls %s(%s)" % (wire.name, principal, tool, json.dumps(args))
            r, msg = wire.call(principal, "tools/call", {"name": tool, "arguments": args},
                               name=tool)
            if outcome == "ok":
                check("result" in msg, "%s: expected a result, got %r" % (what, msg))
                text = msg["result"]["content"][0]["text"]
                check_eq(text, "Echo: " + args["message"], what + ": the tool ran")
                continue
            err = expect_denied(wire, r, msg, what)
            if outcome == "no_rule":
                check_eq(err["message"], "denied by policy: no rule allows tool \"%s\" for this "
                         "principal" % tool, what + ": message")
                check_eq(err.get("data"), {"reason": "no_rule", "kind": "tool", "name": tool},
                         what + ": data")
            else:
                check_eq(err["message"], "denied by policy: argument guard failed at %s" % ptr,
                         what + ": message")
                check_eq(err.get("data"), {"reason": "argument_guard", "pointer": ptr},
                         what + ": data")
            denied.append((principal, tool, msg.get("id")))
    return denied


def names(items, key):
    return sorted(i[key] for i in items)


def lists(wire):
    for principal, (tools, prompts, resources, templates) in sorted(VISIBLE.items()):
        for method, field, key, want in (("tools/list", "tools", "name", tools),
                                         ("prompts/list", "prompts", "name", prompts),
                                         ("resources/list", "resources", "uri", resources),
                                         ("resources/templates/list", "resourceTemplates",
                                          "uriTemplate", templates)):
            r, msg = wire.call(principal, method, {})
            what = "%s: %s as %s" % (wire.name, method, principal)
            check("result" in msg, "%s: %r" % (what, msg))
            check_eq(names(msg["result"][field], key), sorted(want), what)


def items(wire):
    """prompts/get and resources/read: allowed and denied."""
    r, msg = wire.call("rita", "prompts/get", {"name": "ev_test_simple_prompt"},
                       name="ev_test_simple_prompt")
    check("result" in msg, "%s: rita gets her prompt: %r" % (wire.name, msg))
    r, msg = wire.call("rita", "prompts/get", {"name": "ev_test_prompt_with_arguments",
                                               "arguments": {"arg1": "a", "arg2": "b"}},
                       name="ev_test_prompt_with_arguments")
    err = expect_denied(wire, r, msg, wire.name + ": rita, another prompt")
    check("prompt \"ev_test_prompt_with_arguments\"" in err["message"], repr(err))
    r, msg = wire.call("rita", "resources/read", {"uri": "test://static-text"},
                       name="test://static-text")
    check("result" in msg, "%s: rita reads static-text: %r" % (wire.name, msg))
    r, msg = wire.call("rita", "resources/read", {"uri": "test://watched-resource"},
                       name="test://watched-resource")
    expect_denied(wire, r, msg, wire.name + ": rita, the watched resource")
    r, msg = wire.call("bob", "resources/read", {"uri": "test://template/7/data"},
                       name="test://template/7/data")
    check("result" in msg, "%s: bob reads through the template: %r" % (wire.name, msg))
    r, msg = wire.call("zed", "tools/call", {"name": "no_such_tool", "arguments": {}},
                       name="no_such_tool")
    err = expect_denied(wire, r, msg, wire.name + ": an unknown tool, for a caller with no rule")
    check("no_such_tool" in err["message"], "the name the client sent: %r" % err)


def subscriptions(wire):
    """legacy resources/subscribe passes identity and policy (a uri the caller may not read
    cannot be watched); unsubscribe needs no leave."""
    r, msg = wire.call("rita", "resources/subscribe", {"uri": "test://static-text"})
    check_eq(msg.get("result"), {}, "%s: rita subscribes to what she may read" % wire.name)
    r, msg = wire.call("rita", "resources/subscribe", {"uri": "test://watched-resource"})
    expect_denied(wire, r, msg, wire.name + ": rita subscribing to the watched resource")
    r, msg = wire.call("rita", "resources/unsubscribe", {"uri": "test://static-text"})
    check_eq(msg.get("result"), {}, "%s: and gives it up" % wire.name)
    r, msg = wire.call("zed", "resources/subscribe", {"uri": "test://static-text"})
    expect_denied(wire, r, msg, wire.name + ": a caller with no rule")


def listen_ack(port, principal, uris):
    """A stateless subscriptions/listen asking for uris: its acknowledgement's
    params (the stream is then closed), or the refusal's JSON-RPC error."""
    body = rpc_body("subscriptions/listen",
                    {"notifications": {"resourceSubscriptions": uris}}, id="s1")
    raw = build_request(port, headers=stateless_headers("subscriptions/listen") +
                        identity(principal), body=body)
    with Conn(port) as c:
        c.send(raw)
        got = b""
        while True:
            got += c.sock.recv(65536)
            head, _, rest = got.partition(b"\r\n\r\n")
            if b"text/event-stream" in head:
                for ln in rest.split(b"\n"):
                    if b"subscriptions/acknowledged" in ln and ln.rstrip().endswith(b"}"):
                        return json.loads(ln.split(b"data: ", 1)[1])["params"]["notifications"]
            elif rest.rstrip().endswith(b"}"):
                return json.loads(rest)["error"]


def stateless_subscriptions(port):
    """A stateless listen subscribes only the uris policy shows the caller; a caller no
    rule admits is refused."""
    ack = listen_ack(port, "rita", ["test://static-text", "test://watched-resource"])
    check_eq(ack.get("resourceSubscriptions"), ["test://static-text"],
             "rita's listen: the watched resource left out (%r)" % ack)
    ack = listen_ack(port, "ann", ["test://static-text", "test://watched-resource"])
    check_eq(sorted(ack.get("resourceSubscriptions", [])),
             ["test://static-text", "test://watched-resource"], "an admin watches both")
    err = listen_ack(port, "zed", ["test://static-text"])
    check_eq(err.get("code"), REFUSED_2026, "a caller no rule admits: refused (%r)" % err)


def main():
    args = parse_args()
    ctx = Context(args)
    mdir = module_dir(ctx, ctx.test_modules)
    audit_path = ctx.path("audit.jsonl")
    gw = Gateway(ctx, manifest(mdir, audit_path), name="policy").start()
    fast = Gateway(ctx, manifest(mdir, ctx.path("audit-fast.jsonl"), fast_path=True),
                   name="policy-fast").start()
    denials = []

    def t_matrix_stateless():
        denials.extend(matrix(Stateless(gw.port)))

    def t_matrix_legacy():
        matrix(Legacy(gw.port))

    def t_matrix_legacy_fast():
        matrix(Legacy(fast.port))

    def t_lists_stateless():
        lists(Stateless(gw.port))

    def t_lists_legacy():
        lists(Legacy(gw.port))

    def t_items():
        items(Stateless(gw.port))
        items(Legacy(gw.port))

    def t_audited():
        def denied_events():
            return [e for e in read_audit(audit_path) if e.get("event") == "mcpg.tool.call.denied"]
        wait_for(lambda: len(denied_events()) >= len(denials), 10, "the denials in the audit")
        events = denied_events()
        for principal, tool, rid in denials:
            who = None if principal == "(anonymous)" else principal
            ev = [e for e in events if e.get("principal") == who and e.get("tool") == tool
                  and e.get("id") == rid]
            check(ev, "no mcpg.tool.call.denied for %s calling %s (id %r) in %r"
                  % (principal, tool, rid, events[-3:]))
            check_eq(ev[0].get("error_code"), -32003, "the audited code")
            # audit_file writes the 1.2 fields once the audit work lands
            if "denied_stage" in ev[0]:
                check_eq(ev[0]["denied_stage"], "policy", "denied_stage")
            if "denied_by" in ev[0]:
                check_eq(ev[0]["denied_by"], "rules", "denied_by")

    def t_check_example():
        conf = os.path.join(ctx.source, "conf", "policy-example.json")
        rc, out, err = run_cli(ctx, ["--check", "--config", conf])
        check_eq(rc, 0, "mcpg --check %s (stderr %s)" % (conf, err))

    def t_check_broken():
        m = manifest(mdir, ctx.path("never.jsonl"))
        m["modules"][1]["config"] = {"rules": [
            {"tols": "echo"},
            {"tools": "echo", "arguments": [{"pointer": "limit", "max": 1}]}]}
        path = ctx.write_manifest(m, "broken-policy.json")
        rc, out, err = run_cli(ctx, ["--check", "--config", path])
        check_eq(rc, 2, "--check exit code (stderr %s)" % err)
        for needle in ("modules[1].config.rules[0].tols: unknown key (did you mean \"tools\"?)",
                       "modules[1].config.rules[1].arguments[0].pointer: a JSON pointer"):
            check(needle in err, "%r not in:\n%s" % (needle, err))

    def t_subscriptions():
        subscriptions(Legacy(gw.port))
        subscriptions(Legacy(fast.port))
        stateless_subscriptions(gw.port)

    def t_stop():
        gw.stop()
        fast.stop()

    return run_tests([
        ("stateless: 6 callers x 4 tools x allowed/refused arguments", t_matrix_stateless),
        ("legacy sessions (SSE answers): the same matrix", t_matrix_legacy),
        ("legacy sessions (unary_json_fast_path): the same matrix", t_matrix_legacy_fast),
        ("stateless: each principal's tools, prompts, resources and templates", t_lists_stateless),
        ("legacy: the same lists", t_lists_legacy),
        ("prompts/get and resources/read on both wires", t_items),
        ("every denied tool call is audited as mcpg.tool.call.denied", t_audited),
        ("subscriptions judged by policy: legacy subscribe, a stateless listen's uris",
         t_subscriptions),
        ("mcpg --check accepts conf/policy-example.json", t_check_example),
        ("mcpg --check names a broken policy's keys", t_check_broken),
        ("both gateways stop cleanly", t_stop),
    ], ctx)


if __name__ == "__main__":
    sys.exit(main())
