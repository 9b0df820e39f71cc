#!/usr/bin/python3
"""backend_ffi in the embedded default manifest (conf/mcpg.json): it passes
`mcpg --check`, a libm function answers through the real gateway, and a
missing symbol is a --check error naming its key."""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway import (Context, Gateway, check, check_eq, parse_args, run_cli,  # noqa: E402
                     run_tests, send_one, stateless_request, tool_call_request)


def main():
    ctx = Context(parse_args())
    conf = os.path.join(ctx.source, "conf", "mcpg.json")
    env = {"MCPG_AUDIT_FILE": ctx.path("ffi-audit.jsonl")}

    def t_check():
        rc, out, err = run_cli(ctx, ["--check", "--config", conf], env=env)
        check_eq(rc, 0, "mcpg --check conf/mcpg.json (stderr %r)" % err)

    def t_missing_symbol():
        with open(conf) as f:
            m = json.load(f)
        fns = [x for x in m["modules"] if x["module"] == "backend_ffi"][0]["config"]["functions"]
        fns[0]["symbol"] = "no_such_function"
        idx = [x["module"] for x in m["modules"]].index("backend_ffi")
        path = ctx.write_manifest(m)
        rc, out, err = run_cli(ctx, ["--check", "--config", path], env=env)
        check(rc != 0, "a missing symbol must fail --check")
        want = 'modules[%d].config.functions[0].symbol: no symbol "no_such_function" in libm.so.6' % idx
        check(want in err + out, "the error names the key: %r" % (err + out))

    def t_call_sqrt():
        with Gateway(ctx, config=conf, env=env, name="ffi") as gw:
            r = send_one(gw.port, stateless_request(gw.port, "tools/list"))
            names = [t["name"] for t in r.rpc()["result"]["tools"]]
            for n in ("echo", "sqrt", "pow", "cos"):
                check(n in names, "tools/list offers %s: %r" % (n, names))
            r = send_one(gw.port, tool_call_request(gw.port, "sqrt", {"x": 9}))
            res = dict(r.rpc().get("result") or {})
            res.pop("resultType", None)  # the stateless wire's own member
            check_eq(res, {"content": [{"type": "text", "text": "3"}],
                           "structuredContent": {"result": 3}}, "sqrt(9)")
            r = send_one(gw.port, tool_call_request(gw.port, "pow", {"x": "2", "y": 3}))
            err = r.rpc().get("error") or {}
            check_eq(err.get("code"), -32602, "pow with a string argument: %r" % r.rpc())

    return run_tests([("mcpg --check conf/mcpg.json", t_check),
                      ("a missing symbol is a --check error naming its key", t_missing_symbol),
                      ("tools/call sqrt through the gateway", t_call_sqrt)], ctx)


if __name__ == "__main__":
    sys.exit(main())
