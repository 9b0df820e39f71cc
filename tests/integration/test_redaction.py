#!/usr/bin/env python3
"""Credentials never reach an audit sink or a log.

Secrets are planted where a careless gateway would leak them: the API key in
X-API-Key and in Authorization: Bearer, a JWT-shaped token in a Bearer header
that no module accepts, a wrong key, and in the arguments a password (a member
name), a card number (a configured pointer), a live key (a configured
pattern) and a JWT inside a sentence. backend_mock's echo puts the message in
the result, which gateway.audit.results shows. Two sinks (audit_file and
audit_stdout), the access log and debug logging are on. Afterwards no planted
secret may appear in the audit file, on stdout or on stderr, while the events
themselves are there (the calls, their principal, the redaction marks, the
traceparent), so the test cannot pass by recording nothing.
"""

import hashlib
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway import (Context, Gateway, build_request, check, check_eq,  # noqa: E402
                     parse_args, read_audit, rpc_body, run_tests, send_one,
                     stateless_headers)

KEY = "mcpg-test-key-0c1d2e3f4a5b6c7d8e9f"
JWT = ("eyJhbGciOiJSUzI1NiIsImtpZCI6ImsxIn0.eyJzdWIiOiJib2IiLCJleHAiOjQxMDI0NDQ4MDB9."
       "c2lnbmF0dXJlLXNlY3JldC1ieXRlcw")
LIVE = "sk-live-9f8e7d6c5b4a39281706"
PASSWORD = "hunter2-correct-horse"
CARD = "4111111111111111"
WRONG = "mcpg-wrong-key-77aa88bb99cc"
TRACE = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
SECRETS = (KEY, JWT, JWT.split(".")[2], LIVE, PASSWORD, CARD, WRONG)


def main():
    ctx = Context(parse_args())
    audit = ctx.path("audit.jsonl")
    keys = ctx.path("keys.json")
    with open(keys, "w") as f:
        json.dump([{"sha256": hashlib.sha256(KEY.encode()).hexdigest(),
                    "principal": "carol", "tenant": "acme", "roles": ["reader"]}], f)
    manifest = {
        "gateway": {"log_level": "debug", "anonymous": False,
                    "server": {"access_log": True},
                    "audit": {"results": True},
                    "redact": {"pointers": ["/card"], "patterns": ["sk-live-[A-Za-z0-9]+"]}},
        "cluster": {"kind": "single_node"},
        "modules": [
            {"name": "keys", "module": "identity_apikey", "config": {"keys_file": keys}},
            {"name": "mock", "module": "backend_mock", "config": {"tools": [{"name": "echo"}]}},
            {"name": "file", "module": "audit_file", "config": {"path": audit}},
            {"name": "out", "module": "audit_stdout"},
        ],
        "pipeline": {"identity": ["keys"], "audit": ["file", "out"]},
    }
    gw = Gateway(ctx, manifest=manifest, name="redaction")
    answers = {}

    def call(id, headers, arguments):
        body = rpc_body("tools/call", {"name": "echo", "arguments": arguments}, id=id)
        raw = build_request(gw.port, headers=stateless_headers("tools/call", "echo") + headers,
                            body=body)
        r = send_one(gw.port, raw)
        answers[id] = r
        return r

    def t_calls():
        args = {"message": "use %s then %s" % (JWT, LIVE), "password": PASSWORD,
                "card": CARD, "note": "kept"}
        r = call(1, [("X-API-Key", KEY), ("traceparent", TRACE)], args)
        check_eq(r.status, 200, "the key in X-API-Key is accepted")
        check(JWT in r.body.decode(), "the client itself gets its echo back unredacted")
        check_eq(call(2, [("Authorization", "Bearer " + KEY)], args).status, 200,
                 "the key as a Bearer token is accepted")
        check_eq(call(3, [("Authorization", "Bearer " + JWT)], {"message": "x"}).status, 401,
                 "a JWT nobody verifies is anonymous: 401")
        check_eq(call(4, [("X-API-Key", WRONG)], {"message": "x"}).status, 401,
                 "a wrong key: 401")

    def t_nothing_leaked():
        texts = {"audit file": open(audit).read(), "stdout": gw.stdout(), "stderr": gw.stderr()}
        for where, text in texts.items():
            for s in SECRETS:
                check(s not in text, "%s holds the secret %s..." % (where, s[:12]))
        events = read_audit(audit)
        done = [e for e in events if e["event"] == "mcpg.tool.call.completed" and e.get("id") == 1]
        check_eq(len(done), 1, "the completed event of call 1")
        e = done[0]
        check_eq(e.get("principal"), "carol", "its principal")
        check_eq(e.get("traceparent"), TRACE, "its traceparent")
        check_eq(e["args"].get("password"), "[REDACTED]", "a password member")
        check_eq(e["args"].get("card"), "[REDACTED]", "a configured pointer")
        check_eq(e["args"].get("note"), "kept", "what is no secret")
        check_eq(e["args"].get("message"), "use [REDACTED] then [REDACTED]",
                 "a JWT and a pattern inside a sentence")
        check("[REDACTED]" in json.dumps(e.get("result")), "the result is shown, redacted")
        denied = [e for e in events if e["event"] == "mcpg.tool.call.denied"]
        check_eq(sorted(e.get("id") for e in denied), [3, 4], "both refusals audited")
        check(texts["stdout"].count("mcpg.tool.call.completed") == 2, "the stdout sink wrote too")
        check('"path":"/mcp"' in texts["stderr"], "the access log ran")

    gw.start()
    sys.exit(run_tests([("secrets planted in headers, arguments and results", t_calls),
                        ("the gateway stops cleanly", gw.stop),
                        ("no secret in any sink or log", t_nothing_leaked)], ctx))


if __name__ == "__main__":
    main()
