#!/usr/bin/python3
"""Bindings shape what clients see: a prefix with its separator, renames (applied
before the prefix) and description overrides for tools; a rename or description for a
name the backend does not offer, or a rename to an invalid name, refuses the start
with the error naming the key."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway import (Context, Gateway, base_manifest, call_tool, check, check_eq,  # noqa: E402
                     expect_error, expect_result, free_port, parse_args, run_cli, run_tests,
                     send_one, stateless_request)


def main():
    args = parse_args()
    ctx = Context(args)

    def manifest(binding):
        m = base_manifest(tools=[{"name": "echo", "description": "the mock's own"},
                                 {"name": "other"}])
        m["bindings"] = [dict({"backend": "mock"}, **binding)]
        return m

    def t_rename_and_describe():
        m = manifest({"prefix": "m", "separator": "-", "rename": {"echo": "say"},
                      "describe": {"echo": "Says it back."}})
        with Gateway(ctx, manifest=m, name="bindings") as gw:
            r = send_one(gw.port, stateless_request(gw.port, "tools/list", {}))
            tools = {t["name"]: t for t in expect_result(r, r.rpc(), 1, "tools/list")["tools"]}
            check_eq(sorted(tools), ["m-other", "m-say"], "names: renamed, then prefixed")
            check_eq(tools["m-say"].get("description"), "Says it back.", "description override")
            r, rpc = call_tool(gw.port, "m-say", {"message": "hi"}, id=2)
            text = expect_result(r, rpc, 2, "the renamed tool")["content"][0]["text"]
            check_eq(text, "Echo: hi", "the backend got its own name")
            r, rpc = call_tool(gw.port, "m-echo", {"message": "hi"}, id=3)
            expect_error(r, 200, -32602, "the old name is gone", id=3)

    def refused(binding, key, words):
        path = ctx.write_manifest(manifest(binding))
        rc, out, err = run_cli(ctx, ["--config", path, "--listen", "127.0.0.1:%d" % free_port()],
                               timeout=60)
        text = out + err
        check(rc != 0, "a start with %r exited %d" % (binding, rc))
        check(key in text and all(w in text for w in words),
              "the error names %s (%r): %s" % (key, words, text[-600:]))

    def t_unknown_name():
        refused({"rename": {"nope": "x"}}, "bindings[0].rename.nope", ["offers no tool", "nope"])
        refused({"describe": {"nope": "x"}}, "bindings[0].describe.nope", ["offers no tool"])
        refused({"allow": ["other"], "rename": {"echo": "say"}}, "bindings[0].rename.echo",
                ["offers no tool"])

    def t_invalid_rename():
        path = ctx.write_manifest(manifest({"rename": {"echo": "has space"}}))
        rc, out, err = run_cli(ctx, ["--check", "--config", path])
        check_eq(rc, 2, "--check exit code (%s)" % (out + err))
        check("bindings[0].rename.echo" in out + err, "the key path: %s" % (out + err))

    def t_resource_lists():
        m = base_manifest()
        m["modules"].append({"name": "every", "module": "backend_everything", "config": {}})
        m["bindings"] = [{"backend": "mock"},
                         {"backend": "every", "deny_resources": ["test://static-binary"],
                          "allow": ["test_simple_text"]}]
        with Gateway(ctx, manifest=m, name="bindings-res") as gw:
            r = send_one(gw.port, stateless_request(gw.port, "resources/list", {}))
            uris = sorted(x["uri"] for x in expect_result(r, r.rpc(), 1, "resources/list")["resources"])
            check("test://static-text" in uris, "an undenied resource stays: %r" % uris)
            check("test://static-binary" not in uris, "deny_resources hides it: %r" % uris)
            r = send_one(gw.port, stateless_request(gw.port, "resources/read",
                                                    {"uri": "test://static-binary"}, id=2,
                                                    name="test://static-binary"))
            expect_error(r, 200, -32602, "a denied resource cannot be read", id=2)
            r = send_one(gw.port, stateless_request(gw.port, "tools/list", {}, id=3))
            names = sorted(t["name"] for t in expect_result(r, r.rpc(), 3, "tools/list")["tools"])
            check_eq(names, ["echo", "test_simple_text"], "allow keeps tools only; resources apart")
        m["bindings"][1] = {"backend": "every", "allow_resources": ["test://template/{id}/data"]}
        with Gateway(ctx, manifest=m, name="bindings-res2") as gw:
            r = send_one(gw.port, stateless_request(gw.port, "resources/list", {}))
            got = expect_result(r, r.rpc(), 1, "resources/list")["resources"]
            check_eq(got, [], "allow_resources with only a template lists no resource")
            r = send_one(gw.port, stateless_request(gw.port, "resources/templates/list", {}))
            t = expect_result(r, r.rpc(), 1, "templates")["resourceTemplates"]
            check_eq([x["uriTemplate"] for x in t], ["test://template/{id}/data"],
                     "the allowed template stays")

    return run_tests([
        ("allow_resources/deny_resources filter resources and templates by URI",
         t_resource_lists),
        ("rename before the prefix, description override, the old name gone", t_rename_and_describe),
        ("a rename or description for a name not offered refuses the start", t_unknown_name),
        ("a rename to an invalid name is a --check error", t_invalid_rename),
    ], ctx)


if __name__ == "__main__":
    sys.exit(main())
