/* The kernel's redaction (redact.c) on its own: each rule, texts that need
 * decoding, shapes kept, bad rules reported with their key path. */
#include "mcpg/check.h"
#include "kernel.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

static redactor *compile(const char *redact_json, const char *audit_json, errlist *errs) {
    json_t *r = redact_json ? json_loads(redact_json, 0, NULL) : NULL;
    json_t *a = audit_json ? json_loads(audit_json, 0, NULL) : NULL;
    redactor *out = redactor_compile(r, a, "m.json", errs);
    json_decref(r);
    json_decref(a);
    return out;
}

/* in through r must give exactly want. */
static void expect(const redactor *r, const char *in, const char *want) {
    mcpg_buf out = {0};
    int rc = redact_json(r, in, strlen(in), &out);
    MCPG_CHECK(rc == 0 && out.data && strcmp(out.data, want) == 0, "%s\n  gave %s\n  want %s", in,
               out.data ? out.data : "(nothing)", want);
    MCPG_CHECK(rc != 0 || mcpg_json_validate(out.data, out.len) == 0, "not JSON: %s", out.data);
    mcpg_buf_free(&out);
}

int main(void) {
    errlist errs = {0};
    redactor *dflt = compile(NULL, NULL, &errs);
    MCPG_CHECK(errs.count == 0, "defaults compile");
    expect(dflt, "{\"a\":1,\"b\":[true,null,\"x\"]}", "{\"a\":1,\"b\":[true,null,\"x\"]}");
    expect(dflt, "{\"Password\":{\"deep\":1},\"API_KEY\":\"k\"}",
           "{\"Password\":\"[REDACTED]\",\"API_KEY\":\"[REDACTED]\"}");
    expect(dflt, "{\"h\":\"Bearer abc.def-123 rest\"}", "{\"h\":\"[REDACTED] rest\"}");
    expect(dflt, "[\"eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.\"]", "[\"[REDACTED]\"]");
    /* an escaped string is decoded, searched and written back escaped */
    expect(dflt, "{\"m\":\"line\\n eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.sig \\\"q\\\"\"}",
           "{\"m\":\"line\\n [REDACTED] \\\"q\\\"\"}");
    expect(dflt, "\"plain\"", "\"plain\"");
    /* an Authorization scheme with any legal whitespace after it */
    expect(dflt, "{\"h\":\"Bearer  two-spaces\"}", "{\"h\":\"[REDACTED]\"}");
    expect(dflt, "{\"h\":\"bearer\\tTAB123\"}", "{\"h\":\"[REDACTED]\"}");
    /* Basic credentials (base64 of user:pass), and prose that is not one */
    expect(dflt, "{\"h\":\"Basic dXNlcjpwYXNz x\"}", "{\"h\":\"[REDACTED] x\"}");
    expect(dflt, "{\"h\":\"basic   YWxhZGRpbjpvcGVuc2VzYW1l\"}", "{\"h\":\"[REDACTED]\"}");
    expect(dflt, "{\"h\":\"basic usage\"}", "{\"h\":\"basic usage\"}");
    /* the credential member spellings in use, each folded to one name */
    static const char *const spellings[] = {
        "api-key", "api_key", "apiKey", "API.KEY", "x-api-key", "X_Api_Key", "access-token",
        "access_token", "accessToken", "client_secret", "clientSecret", "client-secret",
        "private_key", "privateKey", "refresh_token", "id_token", "auth_token", "session-token",
        "secret_key", "access_key", "api_secret", "passphrase", "pwd", "credentials", "Cookie",
        "Set-Cookie", "Proxy-Authorization", "signature"};
    for (size_t i = 0; i < sizeof spellings / sizeof *spellings; i++) {
        char in[128], want[128];
        snprintf(in, sizeof in, "{\"%s\":\"v\",\"keep\":\"v\"}", spellings[i]);
        snprintf(want, sizeof want, "{\"%s\":\"[REDACTED]\",\"keep\":\"v\"}", spellings[i]);
        expect(dflt, in, want);
    }
    /* credentials inside URLs: userinfo, and query parameters named like a key */
    expect(dflt, "{\"u\":\"https://alice:s3cret@example.com/x\"}",
           "{\"u\":\"https://[REDACTED]@example.com/x\"}");
    expect(dflt, "{\"u\":\"https://example.com/cb?access_token=abc&page=2\"}",
           "{\"u\":\"https://example.com/cb?access_token=[REDACTED]&page=2\"}");
    expect(dflt, "{\"u\":\"https://x.test/a?q=1&api-key=K1#frag\"}",
           "{\"u\":\"https://x.test/a?q=1&api-key=[REDACTED]#frag\"}");
    expect(dflt, "{\"u\":\"https://x.test/a?page=2&sort=asc\"}",
           "{\"u\":\"https://x.test/a?page=2&sort=asc\"}");
    mcpg_buf out = {0};
    MCPG_CHECK(redact_json(dflt, "{\"a\":", 5, &out) == MCPG_EPROTO && out.len == 0,
               "malformed JSON is refused and nothing written");
    MCPG_CHECK(redact_hash("{}", 2, &out) == 0 &&
                   strstr(out.data, "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"),
               "hashed arguments: sha256 of the text: %s", out.data);
    mcpg_buf_free(&out);
    redactor_free(dflt);

    redactor *r = compile("{\"keys\":[\"ssn\"],\"pointers\":[\"/a~1b/0\",\"/x/*/y\"],"
                          "\"patterns\":[\"[0-9]{4}-[0-9]{4}\"]}",
                          "{\"arguments\":\"hashed\"}", &errs);
    MCPG_CHECK(errs.count == 0 && redactor_args_mode(r) == AUDIT_ARGS_HASHED, "custom rules");
    expect(r, "{\"password\":\"p\",\"ssn\":\"1\"}", "{\"password\":\"p\",\"ssn\":\"[REDACTED]\"}");
    expect(r, "{\"a/b\":[1,2],\"x\":[{\"y\":3,\"z\":4},{\"y\":[5]}]}",
           "{\"a/b\":[\"[REDACTED]\",2],\"x\":[{\"y\":\"[REDACTED]\",\"z\":4},{\"y\":\"[REDACTED]\"}]}");
    expect(r, "{\"c\":\"card 1234-5678 and 8765-4321.\"}", "{\"c\":\"card [REDACTED] and [REDACTED].\"}");
    redactor_free(r);

    errlist bad = {0};
    redactor_free(compile("{\"pointers\":[\"nope\"],\"patterns\":[\"(\"],\"kyes\":[]}",
                          "{\"arguments\":\"shown\"}", &bad));
    MCPG_CHECK(bad.count == 4, "four errors, each with its key path: %zu", bad.count);
    errlist_print(&bad);
    errlist_free(&bad);
    return MCPG_CHECK_EXIT("test_redact");
}
