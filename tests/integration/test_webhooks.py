#!/usr/bin/python3
"""POST /webhooks/resources/{source} on one node: every answer the route gives (202,
400 naming the field, 401 naming the header, 403, 404, 405, 413, 503 with
Retry-After; 202 "duplicate" for a webhook-id seen before), and what a webhook reaches: a legacy session subscribed with
resources/subscribe, its GET stream open, and a stateless subscriptions/listen stream
each hear notifications/resources/updated exactly once per webhook, for the uris they
subscribed to and no other; a refused webhook changes nothing; a list change reaches
the streams that asked for list changes. Also the manifests: conf/webhooks.json checks
with no variable set (the source is then off) and a secret of the wrong form fails
--check naming the key."""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway import (Context, Gateway, base_manifest, check, check_eq, parse_args,  # noqa: E402
                     run_cli, run_tests, send_one, stateless_request, wait_for)
from webhooklib import (LIST_CHANGED, UPDATED, legacy_listener, new_secret,  # noqa: E402
                        post_webhook, stateless_listener, wait_counts, webhook_raw)

NOTES = "mock://notes/today"
OTHER = "mock://notes/other"
VAR = "MCPG_TEST_WEBHOOK_SECRET"
OFF_VAR = "MCPG_TEST_WEBHOOK_UNSET"
N = 5


def manifest(coordinator=None):
    m = base_manifest(mock_config={"resources": [
        {"uri": NOTES, "text": "today"}, {"uri": OTHER, "text": "other"}]},
        server={"resource_webhooks": {
            "notes": {"secret_env": VAR, "uri_prefixes": ["mock://notes/"],
                      "list_changed": True},
            "narrow": {"secret_env": VAR, "uri_prefixes": [OTHER]},
            "off": {"secret_env": OFF_VAR, "uri_prefixes": ["mock://"]}}})
    if coordinator:
        m["modules"].append(coordinator)
    return m


def main():
    args = parse_args()
    ctx = Context(args)
    secret = new_secret()
    env = {VAR: secret}
    os.environ.pop(OFF_VAR, None)
    gw = Gateway(ctx, manifest=manifest(), env=env, name="webhooks").start()
    p = gw.port
    conf = os.path.join(args.source, "conf")

    def expect(r, body, status, needle, what):
        check_eq(r.status, status, "%s: status (%r)" % (what, body))
        if needle:
            check(body and needle in body.get("error", ""), "%s: says %r: %r" % (what, needle, body))

    def t_check():
        rc, out, err = run_cli(ctx, ["--check", "--config", os.path.join(conf, "webhooks.json")],
                               unset=["MCPG_WEBHOOK_SECRET"])
        check_eq(rc, 0, "conf/webhooks.json checks with no secret set (%s)" % err)
        rc, _, err = run_cli(ctx, ["--check", "--config", os.path.join(conf, "webhooks.json")],
                             env={"MCPG_WEBHOOK_SECRET": "not-a-secret"})
        check_eq(rc, 2, "a secret of the wrong form fails --check")
        check("gateway.server.resource_webhooks.notes.secret_env: MCPG_WEBHOOK_SECRET does not "
              "hold a Standard Webhooks secret" in err, "the key is named: %r" % err)
        rc, _, err = run_cli(ctx, ["--check", "--config", os.path.join(conf, "mcpg.json")],
                             unset=["MCPG_WEBHOOK_SECRET"])
        check_eq(rc, 0, "conf/mcpg.json still checks (%s)" % err)
        bad = manifest()
        bad["gateway"]["server"]["resource_webhooks"]["notes"]["uri_prefixs"] = []
        del bad["gateway"]["server"]["resource_webhooks"]["narrow"]["uri_prefixes"]
        rc, _, err = run_cli(ctx, ["--check", "--config", ctx.write_manifest(bad, "bad.json")],
                             env=env)
        check_eq(rc, 2, "a bad source fails --check")
        check("resource_webhooks.notes.uri_prefixs: unknown key" in err and
              "resource_webhooks.narrow.uri_prefixes: is required" in err, "named: %r" % err)

    def t_not_found_and_method():
        r, b = post_webhook(p, "nope", {"uri": NOTES}, secret)
        expect(r, b, 404, "no such webhook source", "an unknown source")
        r, b = post_webhook(p, "off", {"uri": NOTES}, secret)
        expect(r, b, 404, "no such webhook source", "a source whose secret variable is unset")
        check("resource webhook source off is off: %s" % OFF_VAR in gw.stderr(), "logged at start")
        r, b = post_webhook(p, "notes", {"uri": NOTES}, secret, method="GET")
        expect(r, b, 405, "use POST", "GET")
        check_eq(r.header("allow"), "POST", "Allow")

    def t_too_large():
        body = json.dumps({"uri": NOTES, "pad": "x" * 70000}).encode()
        r, b = post_webhook(p, "notes", body, secret)
        expect(r, b, 413, "larger than 65536", "a 70 kB body")

    def t_unauthorized():
        cases = [
            (dict(drop=("webhook-id",)), "webhook-id: missing"),
            (dict(drop=("webhook-timestamp",)), "webhook-timestamp: missing"),
            (dict(ts="12x"), "webhook-timestamp: missing or not an integer"),
            (dict(ts=int(time.time()) - 301), "webhook-timestamp: more than 300 s"),
            (dict(drop=("webhook-signature",)), "webhook-signature: missing"),
            (dict(sig="v1,AAAA"), "webhook-signature: no v1 signature matches"),
            (dict(sig="v2," + "A" * 44), "webhook-signature: no v1 signature matches"),
        ]
        for kw, needle in cases:
            r, b = post_webhook(p, "notes", {"uri": NOTES}, secret, **kw)
            expect(r, b, 401, needle, "401 %r" % (kw,))
        # 301 s ahead: of the gateway's clock only when it read the same second as the test
        # (a second ticking over in between makes it 300 s, within the tolerance): asked
        # again when the second ticked over and the post was taken
        for _ in range(10):
            sent = int(time.time())
            r, b = post_webhook(p, "notes", {"uri": NOTES}, secret, ts=sent + 301)
            if r.status == 401 or int(time.time()) == sent:
                break
        expect(r, b, 401, "webhook-timestamp: more than 300 s", "401 301 s ahead")
        r, b = post_webhook(p, "notes", {"uri": NOTES}, new_secret())
        expect(r, b, 401, "no v1 signature matches", "signed with another secret")
        # the body changed after signing
        raw = webhook_raw(p, "notes", {"uri": NOTES}, secret)
        raw = raw.replace(b'"uri":"mock://notes/today"', b'"uri":"mock://notes/todaX"')
        r = send_one(p, raw)
        expect(r, json.loads(r.body), 401, "no v1 signature matches", "a tampered body")
        # several signatures: one good among them is enough (key rotation)
        from webhooklib import signature
        body = b'{"uri":"mock://notes/today"}'
        ts = str(int(time.time()))
        good = signature(secret, "rot-1", ts, body)
        r, b = post_webhook(p, "notes", body, wid="rot-1", ts=ts, sig="v1,bad= " + good)
        expect(r, b, 202, None, "a good signature after a bad one")

    def t_bad_request():
        cases = [
            (b"not json", "body: expected a JSON object"),
            ([NOTES], "body: expected a JSON object"),
            ({}, "body: expected uri, uris or"),
            ({"uri": 7}, "uri: expected a string"),
            ({"uri": ""}, "uri: expected a uri of 1 to 1023 bytes"),
            ({"uri": "mock://notes/a\nb"}, "uri: control characters"),
            ({"uris": []}, "uris: expected a non-empty array"),
            ({"uris": "x"}, "uris: expected an array"),
            ({"uris": [NOTES, 3]}, "uris[1]: expected a string"),
            ({"uris": [NOTES] * 65}, "uris: at most 64"),
            ({"uri": NOTES, "uris": [NOTES]}, "uri, uris: give one of them"),
            ({"list_changed": "yes"}, "list_changed: expected a boolean"),
            ({"list_changed": False}, "body: expected uri, uris or"),
            ({"uri": NOTES, "extra": 1}, "extra: unknown field"),
        ]
        for body, needle in cases:
            r, b = post_webhook(p, "notes", body, secret)
            expect(r, b, 400, needle, "400 %r" % (body,))

    def t_forbidden():
        r, b = post_webhook(p, "notes", {"uri": "mock://elsewhere/x"}, secret)
        expect(r, b, 403, 'uri: "mock://elsewhere/x" is outside the uri_prefixes', "outside")
        r, b = post_webhook(p, "notes", {"uris": [NOTES, "file:///etc/passwd"]}, secret)
        expect(r, b, 403, "uris[1]:", "the second uri outside")
        r, b = post_webhook(p, "narrow", {"uri": NOTES}, secret)
        expect(r, b, 403, "outside the uri_prefixes", "a source narrower than the uri")
        r, b = post_webhook(p, "narrow", {"list_changed": True}, secret)
        expect(r, b, 403, "list_changed: source narrow may not", "a list change it may not make")

    def t_exactly_once():
        legacy = legacy_listener(p, [NOTES], "legacy")
        listen = stateless_listener(p, [NOTES], name="listen")
        other = stateless_listener(p, [OTHER], name="other")
        try:
            for i in range(N):
                r, b = post_webhook(p, "notes", {"uri": NOTES}, secret)
                expect(r, b, 202, None, "webhook %d" % i)
                check_eq(b, {"status": "accepted"}, "the 202's body")
                # refused ones in between change nothing
                r, _ = post_webhook(p, "notes", {"uri": NOTES}, new_secret())
                check_eq(r.status, 401, "a bad signature")
                r, _ = post_webhook(p, "notes", {"uri": "mock://elsewhere/x"}, secret)
                check_eq(r.status, 403, "outside")
            wait_counts({(legacy, NOTES): N, (listen, NOTES): N}, 10)
            # The news reach each stream in the order they were published, so anything extra
            # a webhook caused would reach a stream before what the next webhook causes: each
            # count below is checked once a later webhook's notification has come.
            # A webhook naming both uris: each hears its own, once
            r, b = post_webhook(p, "notes", {"uris": [NOTES, OTHER]}, secret)
            expect(r, b, 202, None, "two uris")
            wait_counts({(legacy, NOTES): N + 1, (listen, NOTES): N + 1, (other, OTHER): 1}, 10)
            for lst in (legacy, listen):
                check_eq(len(lst.notes(UPDATED, NOTES)), N + 1,
                         "%s: told once per webhook (N, then the two-uri one)" % lst.label)
                check_eq(lst.uris(), [NOTES], "%s: only the uri it subscribed to" % lst.label)
            check_eq(len(other.notes(UPDATED)), 1,
                     "a listener on another uri heard nothing of the N before its own")
            msg = [m for _, m in listen.msgs if m.get("method") == UPDATED][0]
            check_eq(msg["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], "listen",
                     "a listen's notification carries its subscription id")
            # the same webhook-id again (a sender's retry): 202 "duplicate", told to nobody
            r, b = post_webhook(p, "notes", {"uri": NOTES}, secret, wid="retried-1")
            check_eq((r.status, b), (202, {"status": "accepted"}), "the first delivery")
            r, b = post_webhook(p, "notes", {"uri": NOTES}, secret, wid="retried-1")
            check_eq((r.status, b), (202, {"status": "duplicate"}), "the retry")
            # then one more webhook naming both uris, the last: what came before it is all in
            r, b = post_webhook(p, "notes", {"uris": [NOTES, OTHER]}, secret)
            expect(r, b, 202, None, "the last webhook")
            wait_counts({(legacy, NOTES): N + 3, (listen, NOTES): N + 3, (other, OTHER): 2}, 10)
            check_eq(len(listen.notes(UPDATED, NOTES)), N + 3, "listen: the retried one once")
            check_eq(len(legacy.notes(UPDATED, NOTES)), N + 3, "legacy: the retried one once")
            check_eq(len(other.notes(UPDATED, OTHER)), 2, "other: the two-uri webhook once")
            check_eq(other.uris(), [OTHER], "other: only the uri it subscribed to")
            for lst in (legacy, listen, other):
                check(lst.error is None, "%s: %r" % (lst.label, lst.error))
        finally:
            for lst in (legacy, listen, other):
                lst.close()

    def t_list_changed():
        legacy = legacy_listener(p, [], "legacy-lists")
        lists = stateless_listener(p, [], list_changed=True, name="lists")
        quiet = stateless_listener(p, [NOTES], name="quiet")
        try:
            r, b = post_webhook(p, "notes", {"list_changed": True}, secret)
            expect(r, b, 202, None, "a list change")
            # then a second list change and an update of NOTES: the news reach each stream in
            # the order published, so once these have come, all the first one caused is in
            r, b = post_webhook(p, "notes", {"list_changed": True}, secret)
            expect(r, b, 202, None, "a second list change")
            r, b = post_webhook(p, "notes", {"uri": NOTES}, secret)
            expect(r, b, 202, None, "an update after them")
            wait_for(lambda: (len(lists.notes(LIST_CHANGED)) >= 2 and
                              len(legacy.notes(LIST_CHANGED)) >= 2 and quiet.notes(UPDATED, NOTES)),
                     10, "the list changes and the update")
            check_eq(len(lists.notes(LIST_CHANGED)), 2, "the listen that asked: once per change")
            check_eq(len(legacy.notes(LIST_CHANGED)), 2, "a legacy GET stream: once per change")
            check_eq(len(quiet.notes(LIST_CHANGED)), 0, "a listen that did not ask: nothing")
            # resources/list is still served (a webhook's list change does not touch the catalog)
            r = send_one(p, stateless_request(p, "resources/list", {}))
            uris = sorted(x["uri"] for x in r.rpc()["result"]["resources"])
            check_eq(uris, [OTHER, NOTES], "resources/list")
            r = send_one(p, stateless_request(p, "resources/read", {"uri": NOTES}, name=NOTES))
            contents = r.rpc()["result"]["contents"]
            check_eq(contents, [{"uri": NOTES, "mimeType": "text/plain", "text": "today"}],
                     "resources/read of a mock resource")
        finally:
            for lst in (legacy, lists, quiet):
                lst.close()

    def t_unavailable():
        # a coordinator that cannot take the message: 503 with Retry-After, nobody told
        cm = {"name": "cluster", "module": "coordinator_memory",
              "config": {"max_message_bytes": 8}}
        g2 = Gateway(ctx, manifest=manifest(cm), env=env, name="webhooks-full").start()
        try:
            listen = stateless_listener(g2.port, [NOTES], list_changed=True, name="full")
            r, b = post_webhook(g2.port, "notes", {"uri": NOTES}, secret)
            expect(r, b, 503, "the coordinator", "a message the store refuses")
            check_eq(r.header("retry-after"), "1", "Retry-After")
            # the claim on its webhook-id was dropped: a retry is tried again, not a duplicate
            for _ in range(2):
                r, b = post_webhook(g2.port, "notes", {"uri": NOTES}, secret, wid="refused-1")
                expect(r, b, 503, "the coordinator refused the news", "the same id again")
            # a list change's news ("l\n", 2 bytes) fit in max_message_bytes: once it has
            # come, whatever was published before it has too
            r, b = post_webhook(g2.port, "notes", {"list_changed": True}, secret)
            expect(r, b, 202, None, "a list change (its news fit)")
            wait_for(lambda: listen.notes(LIST_CHANGED), 10, "the list change told")
            check_eq(len(listen.notes(UPDATED)), 0, "nobody told")
            listen.close()
        finally:
            g2.stop()

    def t_stop():
        gw.stop()

    return run_tests([
        ("the manifests: --check with no secret, a bad secret named", t_check),
        ("404 for an unknown or disabled source, 405 for GET", t_not_found_and_method),
        ("413 for a body over 64 KiB", t_too_large),
        ("401 naming the header: id, timestamp, signature", t_unauthorized),
        ("400 naming the field", t_bad_request),
        ("403 for a uri or list change the source may not announce", t_forbidden),
        ("each subscriber hears each webhook once, only its uris", t_exactly_once),
        ("a list change reaches the streams that asked for it", t_list_changed),
        ("503 + Retry-After when the coordinator cannot take it", t_unavailable),
        ("the gateway stops cleanly", t_stop),
    ], ctx)


if __name__ == "__main__":
    sys.exit(main())
