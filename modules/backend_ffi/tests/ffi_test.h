/* Helpers the backend_ffi tests share: load the module on the SDK's fake
 * host, call a tool, compare its answer or its error. Header-only: each
 * test is one file, and MCPG_CHECK counts failures per file. */
#ifndef BACKEND_FFI_TEST_H
#define BACKEND_FFI_TEST_H

#define _GNU_SOURCE
#include <mcpg/check.h>
#include <mcpg/fakehost.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *so_path;
static mcpg_fakehost *fh;

#define P(n, t) "{\"name\":\"" n "\",\"type\":\"" t "\"}"
#define FN(name, lib, sym, ret, params)                                                      \
    "{\"name\":\"" name "\",\"library\":\"" lib "\",\"symbol\":\"" sym "\",\"returns\":\"" ret \
    "\",\"params\":[" params "]}"

static mcpg_instance *load(const char *cfg) {
    mcpg_instance *inst = NULL;
    int rc = mcpg_fakehost_load_file(fh, so_path, "ffi", cfg, &inst);
    MCPG_REQUIRE(rc == 0, "load failed: %d\n%s", rc, mcpg_fakehost_report_text(fh));
    return inst;
}

/* Call a tool; on success return the result object (decref it), else NULL
 * with *code and msg (cap 256) holding the error. */
static json_t *call(mcpg_instance *inst, const char *tool, const char *args, int64_t *code,
                    char *msg) {
    mcpg_call *c = mcpg_fakehost_call_new(fh, "tools/call", tool, args, "1");
    MCPG_REQUIRE(c, "call_new");
    int st = mcpg_fakehost_run(fh, inst, c, 5000);
    json_t *o = NULL;
    *code = mcpg_fakehost_error_code(c);
    msg[0] = '\0';
    if (st == MCPG_CONTINUE) { /* uint64 values exceed jansson's integers: reals */
        o = json_loads(mcpg_fakehost_result(c), JSON_DECODE_INT_AS_REAL, NULL);
        MCPG_REQUIRE(o, "result is JSON: %s", mcpg_fakehost_result(c));
    } else {
        MCPG_CHECK(st == MCPG_DENY, "%s: status %d", tool, st);
        const char *m = mcpg_fakehost_error_message(c);
        snprintf(msg, 256, "%s", m ? m : "");
    }
    mcpg_fakehost_call_free(fh, c);
    return o;
}

/* The call succeeds, its text is `text` and its structuredContent (or,
 * with member, that member of it) is the JSON `value`. */
static void expect_in(mcpg_instance *inst, const char *tool, const char *args, const char *text,
                      const char *member, const char *value) {
    int64_t code;
    char msg[256];
    json_t *o = call(inst, tool, args, &code, msg);
    MCPG_CHECK(o, "%s %.120s: error %lld %s", tool, args, (long long)code, msg);
    if (!o) return;
    json_t *item = json_array_get(json_object_get(o, "content"), 0);
    const char *got = json_string_value(json_object_get(item, "text"));
    MCPG_CHECK(got && strcmp(got, text) == 0, "%s %.120s: text [%s], want [%s]", tool, args,
               got ? got : "(none)", text);
    json_t *want = json_loads(value, JSON_DECODE_ANY | JSON_DECODE_INT_AS_REAL, NULL);
    json_t *res = json_object_get(o, "structuredContent");
    if (member) res = json_object_get(res, member);
    MCPG_CHECK(want && res && json_equal(want, res),
               "%s %.120s: structured content differs from %s", tool, args, value);
    json_decref(want);
    json_decref(o);
}

/* structuredContent.result is `value`, the text `text` (no outputs). */
static inline void expect(mcpg_instance *inst, const char *tool, const char *args,
                          const char *text, const char *value) {
    expect_in(inst, tool, args, text, "result", value);
}

/* With outputs: the text is the structured content's JSON, `sc`. */
static inline void expect_out(mcpg_instance *inst, const char *tool, const char *args,
                              const char *sc) {
    expect_in(inst, tool, args, sc, NULL, sc);
}

static void expect_error(mcpg_instance *inst, const char *tool, const char *args,
                         const char *want) {
    int64_t code;
    char msg[256];
    json_t *o = call(inst, tool, args, &code, msg);
    MCPG_CHECK(!o && code == -32602 && strcmp(msg, want) == 0,
               "%s %.120s: got %lld [%s], want -32602 [%s]", tool, args, (long long)code, msg,
               want);
    json_decref(o);
}

/* The config is refused and the report names the key. */
static void expect_config_error(const char *cfg, const char *want) {
    mcpg_instance *inst = NULL;
    int rc = mcpg_fakehost_load_file(fh, so_path, "ffi", cfg, &inst);
    const char *rep = mcpg_fakehost_report_text(fh);
    MCPG_CHECK(rc != 0 && rep && strstr(rep, want), "config %s: rc %d, report [%s], want [%s]",
               cfg, rc, rep ? rep : "", want);
    if (rc == 0) mcpg_fakehost_unload(fh, inst);
}

#endif
