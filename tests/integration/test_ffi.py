#!/usr/bin/python3
"""backend_ffi through the real gateway: the embedded default manifest
(conf/mcpg.json) passes `mcpg --check` and its libm functions answer; libc
and libm functions of every supported parameter type (each integer width,
float, double, bool, string, output buffers as text and base64, output
arrays), arrays of every element type (the fixture library the module's
tests build, libffi_fixture.so), on the pool and inline; wrong types,
missing arguments, out-of-range integers of each width, too-long arrays;
a missing library or symbol and a bad buffer are --check errors naming
their key; a result JSON cannot hold (NaN, an infinity; the return value or
an output array's element) is a tool error saying so, on both wires."""
import base64
import json
import os
import socket
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gateway import (Context, Gateway, base_manifest, check, check_eq, parse_args,  # noqa: E402
                     run_cli, run_tests, send_one, stateless_request, strip_server_info,
                     tool_call_request)

import test_legacy_wire as legacy_wire  # noqa: E402

LIBC, LIBM = "libc.so.6", "libm.so.6"
WIDTHS = {"int8": (-128, 127), "int16": (-32768, 32767), "int32": (-2**31, 2**31 - 1),
          "int64": (-2**63, 2**63 - 1), "uint8": (0, 255), "uint16": (0, 65535),
          "uint32": (0, 2**32 - 1), "uint64": (0, 2**64 - 1)}
ELEMENTS = {"i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64", "u8": "uint8",
            "u16": "uint16", "u32": "uint32", "u64": "uint64", "f": "float", "d": "double"}


def session_caller(port):
    """tools/call on one legacy (2025-11-25) session: fn(tool, args) -> its result."""
    _, sid = legacy_wire.initialize(port)
    ids = iter(range(100, 10000))

    def call(tool, args):
        body = legacy_wire.rpc("tools/call", {"name": tool, "arguments": args}, id=next(ids))
        rpc = legacy_wire.answer(legacy_wire.request(port, body=body, session=sid))
        check("result" in rpc, "%s %r on a session: a result: %r" % (tool, args, rpc))
        return rpc["result"]
    return call


def fn(name, lib, sym, returns, *params):
    return {"name": name, "library": lib, "symbol": sym, "returns": returns,
            "params": list(params)}


def p(name, typ, **more):
    d = {"name": name, "type": typ}
    d.update(more)
    return d


def functions(fixture):
    fns = [
        fn("sqrt", LIBM, "sqrt", "double", p("x", "double")),
        fn("fabsf", LIBM, "fabsf", "float", p("x", "float")),
        fn("ldexp", LIBM, "ldexp", "double", p("x", "double"), p("e", "int32")),
        fn("strlen", LIBC, "strlen", "uint64", p("s", "string")),
        fn("strtoull", LIBC, "strtoull", "uint64", p("s", "string"), p("end", "uint64"),
           p("base", "int32")),
        fn("getenv", LIBC, "getenv", "string", p("name", "string")),
        fn("nonzero", LIBC, "abs", "bool", p("b", "bool")),
        fn("hostname", LIBC, "gethostname", "int32", p("name", "buffer", size=256),
           p("len", "uint64", size_of="name")),
        fn("realpath", LIBC, "realpath", "string", p("path", "string"),
           p("resolved", "buffer", size=4096)),
        fn("memset", LIBC, "memset", "void", p("bytes", "buffer", size=6, encoding="base64"),
           p("c", "int32"), p("n", "uint16", size_of="bytes")),
        fn("sincos", LIBM, "sincos", "void", p("x", "double"),
           p("sin", "array", of="double", length=1), p("cos", "array", of="double", length=1)),
        fn("frexp", LIBM, "frexp", "double", p("x", "double"),
           p("exp", "array", of="int32", length=1)),
        fn("fill", fixture, "ffx_fill", "int32", p("bytes", "buffer", size=300, encoding="base64"),
           p("n", "uint16", size_of="bytes")),
        fn("square", fixture, "ffx_square_d", "void",
           p("xs", "array", of="double", max_length=4, inout=True),
           p("n", "uint8", length_of="xs")),
        fn("logf", LIBM, "logf", "float", p("x", "float")),
    ]
    # one identity per integer width: abs and labs of an in-range value
    # answer it unchanged when it is at least 0
    for w in WIDTHS:
        sym = "labs" if w in ("int64", "uint32", "uint64") else "abs"
        fns.append(fn("id_" + w, LIBC, sym, w, p("n", w)))
    for t, of in ELEMENTS.items():
        fns.append(fn("sum_" + t, fixture, "ffx_sum_" + t, "double", p("xs", "array", of=of),
                      p("n", "uint64", length_of="xs")))
        fns.append(fn("flip_" + t, fixture, "ffx_flip_" + t, "void",
                      p("xs", "array", of=of, max_length=4, inout=True),
                      p("n", "uint8", length_of="xs")))
    return fns


def main():
    ctx = Context(parse_args())
    conf = os.path.join(ctx.source, "conf", "mcpg.json")
    env = {"MCPG_AUDIT_FILE": ctx.path("ffi-audit.jsonl")}
    fixture = os.path.join(ctx.modules, "backend_ffi", "tests", "libffi_fixture.so")
    check(os.path.exists(fixture), "the fixture library is built: %s" % fixture)

    def manifest(inline=False, fns=None):
        m = base_manifest()
        m["modules"].append({"name": "ffi", "module": "backend_ffi", "inline_dispatch": inline,
                             "config": {"functions": fns or functions(fixture)}})
        m["bindings"].append({"backend": "ffi"})
        return m

    def check_errors_of(m, wants):
        path = ctx.write_manifest(m)
        rc, out, err = run_cli(ctx, ["--check", "--config", path], env=env)
        check(rc != 0, "--check must fail for %r" % wants)
        for want in wants:
            check(want in err + out, "the error names the key: want %r in %r" % (want, err + out))
        return err + out

    def t_check():
        rc, out, err = run_cli(ctx, ["--check", "--config", conf], env=env)
        check_eq(rc, 0, "mcpg --check conf/mcpg.json (stderr %r)" % err)
        path = ctx.write_manifest(manifest())
        rc, out, err = run_cli(ctx, ["--check", "--config", path], env=env)
        check_eq(rc, 0, "mcpg --check of every type (stderr %r)" % err)

    def t_missing_symbol():
        with open(conf) as f:
            m = json.load(f)
        fns = [x for x in m["modules"] if x["module"] == "backend_ffi"][0]["config"]["functions"]
        fns[0]["symbol"] = "no_such_function"
        idx = [x["module"] for x in m["modules"]].index("backend_ffi")
        check_errors_of(m, ['modules[%d].config.functions[0].symbol: no symbol '
                            '"no_such_function" in libm.so.6' % idx])

    def t_config_errors():
        fns = functions(fixture)
        fns[1]["library"] = "libnope.so.9"
        fns[7]["params"][0].pop("size")
        fns[9]["params"][2]["type"] = "uint8"  # fine: 6 bytes fit
        fns[12]["params"][1]["type"] = "uint8"  # 300 bytes do not
        report = check_errors_of(manifest(fns=fns), [
            'modules[1].config.functions[1].library: cannot load "libnope.so.9"',
            "modules[1].config.functions[7].params[0].size: is required for buffer",
            'modules[1].config.functions[12].params[1].type: uint8 cannot hold 300, the most '
            'bytes of "bytes" can take'])
        check("functions[9]" not in report, "a size that fits is no error: %r" % report)

    def t_default_manifest():
        with Gateway(ctx, config=conf, env=env, name="ffi") as gw:
            r = send_one(gw.port, stateless_request(gw.port, "tools/list"))
            names = [t["name"] for t in r.rpc()["result"]["tools"]]
            for n in ("echo", "sqrt", "pow", "cos"):
                check(n in names, "tools/list offers %s: %r" % (n, names))
            r = send_one(gw.port, tool_call_request(gw.port, "sqrt", {"x": 9}))
            res = dict(strip_server_info(r.rpc().get("result") or {}, "sqrt(9)"))
            res.pop("resultType", None)  # the stateless wire's own member
            check_eq(res, {"content": [{"type": "text", "text": "3"}],
                           "structuredContent": {"result": 3}}, "sqrt(9)")
            r = send_one(gw.port, tool_call_request(gw.port, "pow", {"x": 10, "y": 2}))
            check_eq(r.rpc()["result"]["content"][0]["text"], "100", "pow(10, 2): all its digits")
            r = send_one(gw.port, tool_call_request(gw.port, "pow", {"x": "2", "y": 3}))
            err = r.rpc().get("error") or {}
            check_eq(err.get("code"), -32602, "pow with a string argument: %r" % r.rpc())

    def calls(inline):
        def call(gw, tool, args):
            rpc = send_one(gw.port, tool_call_request(gw.port, tool, args)).rpc()
            check("result" in rpc, "%s %r: %r" % (tool, args, rpc))
            res = rpc["result"]
            check(not res.get("isError"), "%s %r: %r" % (tool, args, res))
            sc = res["structuredContent"]
            text = res["content"][0]["text"]
            if len(sc) > 1:  # with outputs, the text is the structured content
                check_eq(json.loads(text), sc, "%s: text and structuredContent" % tool)
            return sc

        def t():
            with Gateway(ctx, manifest=manifest(inline), env={"MCPG_FFI_VALUE": "v\u00e9"},
                         name="ffi-types") as gw:
                check_eq(call(gw, "sqrt", {"x": 2}), {"result": 2 ** 0.5}, "sqrt(2)")
                check_eq(call(gw, "fabsf", {"x": -2.5}), {"result": 2.5}, "fabsf")
                check_eq(call(gw, "ldexp", {"x": 1.5, "e": 4}), {"result": 24}, "ldexp")
                check_eq(call(gw, "strlen", {"s": "h\u00e9llo"}), {"result": 6}, "strlen")
                check_eq(call(gw, "strtoull", {"s": "ffffffffffffffff", "end": 0, "base": 16}),
                         {"result": 2 ** 64 - 1}, "strtoull")
                check_eq(call(gw, "getenv", {"name": "MCPG_FFI_VALUE"}), {"result": "v\u00e9"},
                         "getenv")
                check_eq(call(gw, "getenv", {"name": "MCPG_FFI_UNSET"}), {"result": None},
                         "getenv of an unset variable")
                check_eq(call(gw, "nonzero", {"b": True}), {"result": True}, "bool")
                for w, (lo, hi) in WIDTHS.items():
                    n = min(hi, 2 ** 63 - 1)  # labs of uint64's max would be labs(-1)
                    check_eq(call(gw, "id_" + w, {"n": n}), {"result": n}, "%s %d" % (w, n))
                check_eq(call(gw, "id_int8", {"n": -128}), {"result": -128}, "abs(-128) as int8")
                check_eq(call(gw, "hostname", {}), {"result": 0, "name": socket.gethostname()},
                         "gethostname")
                check_eq(call(gw, "realpath", {"path": "/usr/./lib/.."}),
                         {"result": "/usr", "resolved": "/usr"}, "realpath")
                check_eq(call(gw, "memset", {"c": 0x2a}),
                         {"result": None, "bytes": base64.b64encode(b"*" * 6).decode()}, "memset")
                check_eq(call(gw, "sincos", {"x": 0}), {"result": None, "sin": [0], "cos": [1]},
                         "sincos")
                check_eq(call(gw, "frexp", {"x": 8}), {"result": 0.5, "exp": [4]}, "frexp")
                sc = call(gw, "fill", {})
                check_eq(base64.b64decode(sc["bytes"]), bytes((255 - i) % 256 for i in range(300)),
                         "300 bytes as base64")
                check_eq(sc["result"], 300, "fill's count")
                for t, of in ELEMENTS.items():
                    if of in WIDTHS:
                        lo, hi = WIDTHS[of]
                        xs, want = [lo, hi, 0], [~lo, ~hi, -1]
                        if lo == 0:  # unsigned: ~x is max - x
                            want = [hi - lo, 0, hi]
                    else:
                        xs, want = [1.5, -0.25, 0], [-1.5, 0.25, 0]
                    check_eq(call(gw, "flip_" + t, {"xs": xs}), {"result": None, "xs": want},
                             "flip_%s" % t)
                    check_eq(call(gw, "sum_" + t, {"xs": [1, 2, 3]}), {"result": 6}, "sum_%s" % t)
                check_eq(call(gw, "sum_d", {"xs": []}), {"result": 0}, "an empty array")
                check_eq(call(gw, "sum_u8", {"xs": [1] * 65536}), {"result": 65536},
                         "65536 elements")
        return t

    def tool_error(gw, tool, args, legacy=None):
        """The isError result's one text, on the stateless wire or a session."""
        if legacy:
            res = legacy(tool, args)
        else:
            rpc = send_one(gw.port, tool_call_request(gw.port, tool, args)).rpc()
            check("result" in rpc, "%s %r: a result, not a protocol error: %r" % (tool, args, rpc))
            res = rpc["result"]
        check(res.get("isError") is True, "%s %r: isError: %r" % (tool, args, res))
        check("structuredContent" not in res, "%s %r: no value to give: %r" % (tool, args, res))
        check_eq(len(res["content"]), 1, "%s %r: one content item" % (tool, args))
        return res["content"][0]["text"]

    NO_JSON = "which no JSON number can hold"
    POLE = "(an overflow, or a pole of the function)"

    def t_nonfinite_default_manifest():
        with Gateway(ctx, config=conf, env=env, name="ffi-nan") as gw:
            for legacy in (None, session_caller(gw.port)):
                wire = "legacy" if legacy else "stateless"
                check_eq(tool_error(gw, "sqrt", {"x": -1}, legacy),
                         "sqrt(-1): the result is not a number (NaN), " + NO_JSON, "sqrt(-1) " + wire)
                check_eq(tool_error(gw, "pow", {"x": 10, "y": 400}, legacy),
                         "pow(10, 400): the result is +infinity %s, %s" % (POLE, NO_JSON),
                         "pow(10, 400) " + wire)

    def t_nonfinite_types():
        with Gateway(ctx, manifest=manifest(), name="ffi-inf") as gw:
            check_eq(tool_error(gw, "logf", {"x": 0}),
                     "logf(0): the result is -infinity %s, %s" % (POLE, NO_JSON), "logf(0)")
            check_eq(tool_error(gw, "sum_d", {"xs": [1e308, 1e308]}),
                     "sum_d([...]): the result is +infinity %s, %s" % (POLE, NO_JSON), "sum_d")
            check_eq(tool_error(gw, "square", {"xs": [2, -1e200, 1e200]}),
                     "square([...]): xs[1] is +infinity %s, %s" % (POLE, NO_JSON),
                     "an output array's element")
            rpc = send_one(gw.port, tool_call_request(gw.port, "square", {"xs": [2, -3]})).rpc()
            check_eq(rpc.get("result", {}).get("structuredContent"), {"result": None, "xs": [4, 9]},
                     "square of finite numbers answers as ever")

    def t_bad_arguments():
        with Gateway(ctx, manifest=manifest(), name="ffi-bad") as gw:
            def bad(tool, args, want):
                rpc = send_one(gw.port, tool_call_request(gw.port, tool, args)).rpc()
                err = rpc.get("error") or {}
                check_eq((err.get("code"), err.get("message")), (-32602, want),
                         "%s %r" % (tool, args))
            ip = "Invalid params: "
            bad("sqrt", {"x": "9"}, ip + 'argument "x": expected a number')
            bad("sqrt", {}, ip + 'missing argument "x"')
            bad("ldexp", {"x": 1}, ip + 'missing argument "e"')
            bad("ldexp", {"x": 1, "e": 1.5}, ip + 'argument "e": expected an integer from '
                '-2147483648 to 2147483647')
            bad("fabsf", {"x": 1e39}, ip + 'argument "x": expected a number within the range '
                'of float')
            bad("strlen", {"s": 5}, ip + 'argument "s": expected a string')
            bad("strlen", {"s": "a\u0000b"}, ip + 'argument "s": expected a string without NUL '
                'characters')
            bad("nonzero", {"b": 1}, ip + 'argument "b": expected a boolean')
            bad("hostname", {"len": 3}, ip + 'unknown argument "len"')
            bad("realpath", {"path": "/", "resolved": ""}, ip + 'unknown argument "resolved"')
            for w, (lo, hi) in WIDTHS.items():
                want = ip + 'argument "n": expected an integer from %d to %d' % (lo, hi)
                bad("id_" + w, {"n": lo - 1}, want)
                bad("id_" + w, {"n": hi + 1}, want)
                bad("id_" + w, {"n": "1"}, want)
            for t, of in ELEMENTS.items():
                if of in WIDTHS:
                    lo, hi = WIDTHS[of]
                    want = 'expected an integer from %d to %d' % (lo, hi)
                    bad("sum_" + t, {"xs": [0, hi + 1]}, ip + 'argument "xs[1]": ' + want)
                    bad("sum_" + t, {"xs": [lo - 1]}, ip + 'argument "xs[0]": ' + want)
                bad("sum_" + t, {"xs": 1}, ip + 'argument "xs": expected an array of ' + of)
                bad("sum_" + t, {"xs": [1, "2"]}, ip + 'argument "xs[1]": expected ' +
                    ("a number" if of in ("float", "double") else
                     "an integer from %d to %d" % WIDTHS[of]))
                bad("flip_" + t, {"xs": [0] * 5}, ip + 'argument "xs": expected at most 4 items')
            bad("sum_u8", {"xs": [1] * 65537}, ip + 'argument "xs": expected at most 65536 items')
            bad("sum_d", {"xs": [1], "n": 1}, ip + 'unknown argument "n"')

    def t_schema():
        with Gateway(ctx, manifest=manifest(), name="ffi-schema") as gw:
            r = send_one(gw.port, stateless_request(gw.port, "tools/list"))
            tools = {t["name"]: t["inputSchema"] for t in r.rpc()["result"]["tools"]}
            check_eq(tools["flip_u16"]["properties"],
                     {"xs": {"type": "array", "maxItems": 4,
                             "items": {"type": "integer", "minimum": 0, "maximum": 65535}}},
                     "an in-out array's schema")
            check_eq(tools["flip_u16"]["required"], ["xs"], "xs is required, n is filled in")
            check_eq(tools["hostname"]["properties"], {}, "a buffer is not an argument")
            check_eq(tools["realpath"]["required"], ["path"], "realpath takes a path")

    return run_tests([("mcpg --check conf/mcpg.json and a manifest of every type", t_check),
                      ("a missing symbol is a --check error naming its key", t_missing_symbol),
                      ("a missing library and bad buffers are --check errors", t_config_errors),
                      ("the default manifest's libm functions answer", t_default_manifest),
                      ("sqrt(-1), pow(10, 400): tool errors saying why, on both wires",
                       t_nonfinite_default_manifest),
                      ("NaN and infinities of floats, sums and outputs: tool errors",
                       t_nonfinite_types),
                      ("every type, on the pool", calls(False)),
                      ("every type, inline", calls(True)),
                      ("wrong types, missing arguments, out of range, too long",
                       t_bad_arguments),
                      ("the inputSchema of arrays and buffers", t_schema)], ctx)


if __name__ == "__main__":
    sys.exit(main())
