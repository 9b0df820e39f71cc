/* identity_apikey through the SDK's fake host: the built .so, loaded as the
 * kernel would. Usage: test_identity_apikey path/to/identity_apikey.so
 *
 * Accepted keys in both headers, refused keys (401, challenge, nothing of the
 * key in the answer or the log), calls without a key and with a JWT passed
 * on, the header choice, the keys file's errors at validate (file, entry,
 * field), a reload that swaps the table and one that keeps it, and an ABI 1.1
 * host (no call_identify: the comma-separated roles of call_set_identity). */
#define _GNU_SOURCE
#include <mcpg/check.h>
#include <mcpg/fakehost.h>

#include <dlfcn.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *so_path;
static mcpg_fakehost *fh;
static const mcpg_module *desc;
static char dir[] = "/tmp/test-idkey-XXXXXX";
static char keys_path[256];

#define KEY_ALICE "mcpg_alice-key-0123456789abcdefghijklmnopqrstuv"
#define KEY_BOB "mcpg_bob-key-ZYXWVUTSRQPONMLKJIHGFEDCBA9876"
#define KEY_CAROL "mcpg_carol-key-new-after-rotation-000111222"
#define KEY_WRONG "mcpg_not-a-key-anyone-has-SECRETSECRETSECRET"
#define JWT "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhbGljZSJ9.c2lnbmF0dXJl"

static void sha256_hex(const char *key, char out[65]) {
    unsigned char h[32];
    unsigned int n = 0;
    MCPG_REQUIRE(EVP_Digest(key, strlen(key), h, &n, EVP_sha256(), NULL) && n == 32, "sha256");
    for (int i = 0; i < 32; i++) sprintf(out + 2 * i, "%02x", h[i]);
}

static void write_file(const char *path, const char *text) {
    MCPG_REQUIRE(mcpg_fakehost_write_file(path, text) == 0, "write %s", path);
    chmod(path, 0600);
}

/* The keys file with alice (tenant, two roles) and bob (neither), or, with
 * rotate, carol instead of alice. */
static void write_keys(int rotate) {
    char a[65], b[65];
    sha256_hex(rotate ? KEY_CAROL : KEY_ALICE, a);
    sha256_hex(KEY_BOB, b);
    char text[1024];
    snprintf(text, sizeof text,
             "[\n  {\"sha256\": \"%s\", \"principal\": \"%s\", \"tenant\": \"acme\",\n"
             "   \"roles\": [\"reader\", \"writer\"], \"comment\": \"laptop\"},\n"
             "  {\"sha256\": \"%s\", \"principal\": \"bob\"}\n]\n",
             a, rotate ? "carol" : "alice", b);
    write_file(keys_path, text);
}

static mcpg_instance *load(const char *extra) {
    char cfg[512];
    snprintf(cfg, sizeof cfg, "{\"keys_file\":\"%s\"%s%s}", keys_path, extra ? "," : "",
             extra ? extra : "");
    return mcpg_fakehost_load_file_or_exit(fh, so_path, "keys", cfg);
}

/* ------------------------------------------------------------------ */
/* one call through authenticate                                       */

typedef struct outcome {
    int status;
    int64_t code;
    char message[256];
    int http;
    char challenge[128];
    char principal[64], tenant[64], roles[128], method[16];
    char result[256];
} outcome;

static void copy(char *dst, size_t cap, const char *s) {
    snprintf(dst, cap, "%s", s ? s : "");
}

/* Roles as "a,b" from whichever slots the host has. */
static void roles_of(const mcpg_host *h, mcpg_call *op, char *dst, size_t cap) {
    if (!MCPG_HOST_HAS(h, call_role_count)) {
        copy(dst, cap, h->call_roles(op));
        return;
    }
    dst[0] = '\0';
    for (uint32_t i = 0; i < h->call_role_count(op); i++) {
        size_t n = strlen(dst);
        snprintf(dst + n, cap - n, "%s%s", i ? "," : "", h->call_role(op, i));
    }
}

/* headers: "name: value" pairs, NULL-terminated. */
static outcome authenticate(mcpg_instance *inst, const char *const *headers) {
    const mcpg_host *h = mcpg_fakehost_host(fh);
    mcpg_call *c = mcpg_fakehost_call_new(fh, "tools/call", "echo", "{}", "1");
    MCPG_REQUIRE(c, "call_new");
    for (const char *const *hd = headers; hd && *hd; hd += 2)
        MCPG_REQUIRE(mcpg_fakehost_call_set_header(c, hd[0], hd[1]) == 0, "header %s", hd[0]);
    mcpg_fakehost_call_set_peer(c, "192.0.2.7:4242");
    outcome o = {0};
    o.status = mcpg_fakehost_run(fh, inst, c, 1000);
    copy(o.principal, sizeof o.principal, h->call_principal(c));
    copy(o.tenant, sizeof o.tenant, h->call_tenant(c));
    roles_of(h, c, o.roles, sizeof o.roles);
    if (MCPG_HOST_HAS(h, call_auth_method))
        copy(o.method, sizeof o.method, h->call_auth_method(c));
    mcpg_call_outcome out = {0};
    mcpg_fakehost_outcome(c, &out);
    o.code = out.is_error ? out.error_code : 0;
    copy(o.message, sizeof o.message, out.is_error ? out.error_message : NULL);
    o.http = out.http_status;
    if (MCPG_HAS_FIELD(&out, www_authenticate))
        copy(o.challenge, sizeof o.challenge, out.www_authenticate);
    copy(o.result, sizeof o.result, out.is_error ? NULL : mcpg_fakehost_result(c));
    mcpg_fakehost_call_free(fh, c);
    return o;
}

static int host_has_challenges(void) {
    return MCPG_HOST_HAS(mcpg_fakehost_host(fh), call_set_challenge);
}

static void expect_identity(const outcome *o, const char *what, const char *principal,
                            const char *tenant, const char *roles) {
    MCPG_CHECK(o->status == MCPG_CONTINUE && o->code == 0, "%s: status %d code %lld (%s)",
               what, o->status, (long long)o->code, o->message);
    MCPG_CHECK(strcmp(o->principal, principal) == 0, "%s: principal '%s', expected '%s'",
               what, o->principal, principal);
    MCPG_CHECK(strcmp(o->tenant, tenant) == 0, "%s: tenant '%s', expected '%s'", what,
               o->tenant, tenant);
    MCPG_CHECK(strcmp(o->roles, roles) == 0, "%s: roles '%s', expected '%s'", what, o->roles,
               roles);
    if (MCPG_HOST_HAS(mcpg_fakehost_host(fh), call_identify))
        MCPG_CHECK(strcmp(o->method, "apikey") == 0, "%s: method '%s'", what, o->method);
}

static void expect_passed(const outcome *o, const char *what) {
    MCPG_CHECK(o->status == MCPG_CONTINUE && o->code == 0, "%s: status %d code %lld", what,
               o->status, (long long)o->code);
    MCPG_CHECK(o->principal[0] == '\0', "%s: no identity expected, got '%s'", what,
               o->principal);
}

static void expect_refused(const outcome *o, const char *what, const char *key) {
    MCPG_CHECK(o->status == MCPG_DENY, "%s: status %d, expected DENY", what, o->status);
    MCPG_CHECK(o->code == -32001, "%s: code %lld", what, (long long)o->code);
    MCPG_CHECK(o->http == 401, "%s: HTTP %d", what, o->http);
    MCPG_CHECK(o->principal[0] == '\0', "%s: identity '%s' set on a refusal", what, o->principal);
    MCPG_CHECK(!strstr(o->message, key), "%s: the message echoes the key: %s", what, o->message);
    MCPG_CHECK(!mcpg_fakehost_log_contains(fh, key), "%s: the log holds the key:\n%s", what,
               mcpg_fakehost_log_text(fh));
    if (host_has_challenges())
        MCPG_CHECK(strcmp(o->challenge, "Bearer realm=\"mcpg\", error=\"invalid_token\"") == 0,
                   "%s: challenge '%s'", what, o->challenge);
}

/* ------------------------------------------------------------------ */

static void test_accepts(void) {
    mcpg_instance *inst = load(NULL);
    outcome o = authenticate(inst, (const char *const[]){"x-api-key", KEY_ALICE, NULL});
    expect_identity(&o, "X-API-Key alice", "alice", "acme", "reader,writer");
    o = authenticate(inst, (const char *const[]){"authorization", "Bearer " KEY_BOB, NULL});
    expect_identity(&o, "Bearer bob", "bob", "", "");
    o = authenticate(inst, (const char *const[]){"authorization", "bearer   " KEY_ALICE "  ", NULL});
    expect_identity(&o, "bearer, spaces around", "alice", "acme", "reader,writer");
    o = authenticate(inst, (const char *const[]){"x-api-key", " " KEY_BOB "\t", NULL});
    expect_identity(&o, "X-API-Key with blanks", "bob", "", "");
    MCPG_CHECK(mcpg_fakehost_unload(fh, inst) == 0, "unload");
}

static void test_refuses(void) {
    mcpg_fakehost_log_clear(fh);
    mcpg_instance *inst = load(NULL);
    outcome o = authenticate(inst, (const char *const[]){"x-api-key", KEY_WRONG, NULL});
    expect_refused(&o, "X-API-Key wrong", KEY_WRONG);
    MCPG_CHECK(mcpg_fakehost_log_contains(fh, "refused an API key in X-API-Key from 192.0.2.7:4242"),
               "the refusal is logged:\n%s", mcpg_fakehost_log_text(fh));
    o = authenticate(inst, (const char *const[]){"authorization", "Bearer " KEY_WRONG, NULL});
    expect_refused(&o, "Bearer wrong", KEY_WRONG);
    /* a key that is a prefix of a real one, and one a byte longer */
    o = authenticate(inst, (const char *const[]){"x-api-key", "mcpg_alice", NULL});
    expect_refused(&o, "prefix of a key", "mcpg_alice");
    o = authenticate(inst, (const char *const[]){"x-api-key", KEY_ALICE "x", NULL});
    expect_refused(&o, "key plus a byte", KEY_ALICE "x");
    /* X-API-Key is read first: a wrong one is refused even beside a good Bearer */
    o = authenticate(inst, (const char *const[]){"x-api-key", KEY_WRONG, "authorization",
                                                 "Bearer " KEY_ALICE, NULL});
    expect_refused(&o, "wrong X-API-Key beside a good Bearer", KEY_WRONG);
    MCPG_CHECK(mcpg_fakehost_unload(fh, inst) == 0, "unload");
}

static void test_passes(void) {
    mcpg_instance *inst = load(NULL);
    outcome o = authenticate(inst, NULL);
    /* (the challenge a pass sets shows only in the kernel's anonymous 401:
     * tests/integration/test_identity.py) */
    expect_passed(&o, "no header");
    o = authenticate(inst, (const char *const[]){"authorization", "Bearer " JWT, NULL});
    expect_passed(&o, "a JWT-shaped Bearer");
    o = authenticate(inst, (const char *const[]){"authorization",
                                                 "Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.", NULL});
    expect_passed(&o, "a JWS without a signature (identity_jwt refuses alg none)");
    o = authenticate(inst, (const char *const[]){"authorization", "Bearer eyJa.b.c.d.e", NULL});
    expect_passed(&o, "a JWE-shaped Bearer");
    o = authenticate(inst, (const char *const[]){"authorization", "Bearer abc.def.ghi", NULL});
    expect_refused(&o, "dots without a JOSE header: a key", "abc.def.ghi");
    o = authenticate(inst, (const char *const[]){"authorization", "Bearer eyJa..c", NULL});
    expect_refused(&o, "a JWS with an empty payload: a key", "eyJa..c");
    o = authenticate(inst, (const char *const[]){"authorization", "Basic YWxpY2U6cHc=", NULL});
    expect_passed(&o, "Basic credentials");
    o = authenticate(inst, (const char *const[]){"authorization", "Bearer", "x-api-key", "",
                                                 NULL});
    expect_passed(&o, "empty Bearer and X-API-Key");
    MCPG_CHECK(mcpg_fakehost_unload(fh, inst) == 0, "unload");

    /* the JWT is a key to refuse once skip_jwt_shaped is off; another realm */
    inst = load("\"skip_jwt_shaped\":false,\"challenge_anonymous\":false,\"realm\":\"tools\"");
    o = authenticate(inst, (const char *const[]){"authorization", "Bearer " JWT, NULL});
    MCPG_CHECK(o.status == MCPG_DENY && o.http == 401, "JWT as key: status %d http %d", o.status,
               o.http);
    if (host_has_challenges())
        MCPG_CHECK(strcmp(o.challenge, "Bearer realm=\"tools\", error=\"invalid_token\"") == 0,
                   "realm in the challenge: '%s'", o.challenge);
    o = authenticate(inst, NULL);
    expect_passed(&o, "no header, challenge_anonymous off");
    MCPG_CHECK(mcpg_fakehost_unload(fh, inst) == 0, "unload");
}

static void test_header_choice(void) {
    mcpg_instance *inst = load("\"headers\":\"x-api-key\"");
    outcome o = authenticate(inst, (const char *const[]){"authorization", "Bearer " KEY_ALICE,
                                                         NULL});
    expect_passed(&o, "headers x-api-key: Authorization not read");
    o = authenticate(inst, (const char *const[]){"x-api-key", KEY_ALICE, NULL});
    expect_identity(&o, "headers x-api-key", "alice", "acme", "reader,writer");
    MCPG_CHECK(mcpg_fakehost_unload(fh, inst) == 0, "unload");

    inst = load("\"headers\":\"authorization\"");
    o = authenticate(inst, (const char *const[]){"x-api-key", KEY_WRONG, NULL});
    expect_passed(&o, "headers authorization: X-API-Key not read");
    o = authenticate(inst, (const char *const[]){"authorization", "Bearer " KEY_BOB, NULL});
    expect_identity(&o, "headers authorization", "bob", "", "");
    MCPG_CHECK(mcpg_fakehost_unload(fh, inst) == 0, "unload");
}

/* ------------------------------------------------------------------ */
/* reload                                                              */

static void reloaded(mcpg_instance *inst) {
    MCPG_REQUIRE(mcpg_fakehost_reloaded(fh, inst) == 0, "the module has a reloaded op");
    mcpg_fakehost_run_for(fh, 20); /* the loop passes: the old table is freed */
}

static void test_reload(void) {
    write_keys(0);
    mcpg_instance *inst = load(NULL);
    write_keys(1); /* carol replaces alice */
    outcome o = authenticate(inst, (const char *const[]){"x-api-key", KEY_ALICE, NULL});
    expect_identity(&o, "before the reload", "alice", "acme", "reader,writer");
    reloaded(inst);
    o = authenticate(inst, (const char *const[]){"x-api-key", KEY_ALICE, NULL});
    expect_refused(&o, "alice's key after the reload", KEY_ALICE);
    o = authenticate(inst, (const char *const[]){"x-api-key", KEY_CAROL, NULL});
    expect_identity(&o, "carol's key after the reload", "carol", "acme", "reader,writer");

    /* a broken file keeps the table, and the log says which file and why */
    mcpg_fakehost_log_clear(fh);
    write_file(keys_path, "[{\"sha256\": \"abc\", \"principal\": \"x\"}]");
    reloaded(inst);
    MCPG_CHECK(mcpg_fakehost_log_contains(fh, "[0].sha256: must be"),
               "the bad entry is logged:\n%s", mcpg_fakehost_log_text(fh));
    MCPG_CHECK(mcpg_fakehost_log_contains(fh, "keeping its 2 key(s)"),
               "the old keys are kept:\n%s", mcpg_fakehost_log_text(fh));
    o = authenticate(inst, (const char *const[]){"x-api-key", KEY_CAROL, NULL});
    expect_identity(&o, "after a failed reload", "carol", "acme", "reader,writer");
    unlink(keys_path);
    reloaded(inst);
    o = authenticate(inst, (const char *const[]){"x-api-key", KEY_BOB, NULL});
    expect_identity(&o, "after a reload of a missing file", "bob", "", "");

    /* many reloads in a row, each retiring the table before */
    for (int i = 0; i < 50; i++) {
        write_keys(i & 1);
        MCPG_CHECK(mcpg_fakehost_reloaded(fh, inst) == 0, "reload %d", i);
    }
    mcpg_fakehost_run_for(fh, 20);
    o = authenticate(inst, (const char *const[]){"x-api-key", KEY_CAROL, NULL});
    expect_identity(&o, "after 50 reloads", "carol", "acme", "reader,writer");
    MCPG_CHECK(mcpg_fakehost_unload(fh, inst) == 0, "unload");
    write_keys(0);
}

/* ------------------------------------------------------------------ */
/* the file's errors, as --check reports them                          */

static void expect_check(const char *file_text, const char *needle) {
    char cfg[300];
    if (file_text) write_file(keys_path, file_text);
    snprintf(cfg, sizeof cfg, "{\"keys_file\":\"%s\"}", keys_path);
    int rc = mcpg_fakehost_check(fh, desc, cfg);
    const char *rep = mcpg_fakehost_report_text(fh);
    MCPG_CHECK(rc == MCPG_ECONFIG, "check of %s: rc %d", file_text ? file_text : "(none)", rc);
    MCPG_CHECK(strstr(rep, needle) != NULL, "report lacks '%s':\n%s", needle, rep);
    MCPG_CHECK(strstr(rep, "keys_file: ") != NULL && strstr(rep, keys_path) != NULL,
               "report names the key and the file:\n%s", rep);
}

static void test_file_errors(void) {
    char h[65], row[600];
    sha256_hex(KEY_ALICE, h);
    unlink(keys_path);
    expect_check(NULL, "cannot open: No such file or directory");
    expect_check("{\"sha256\": 1}", ": must be a JSON array");
    expect_check("[{\"sha256\": \"" KEY_WRONG "\"", "line 1 column");
    MCPG_CHECK(!strstr(mcpg_fakehost_report_text(fh), KEY_WRONG),
               "a parse error does not quote the file:\n%s", mcpg_fakehost_report_text(fh));
    expect_check("[{\"sha256\": \"" KEY_WRONG "\", \"principal\": \"a\"}]",
                 "[0].sha256: must be the key's SHA-256 as 64 hex digits");
    MCPG_CHECK(!strstr(mcpg_fakehost_report_text(fh), KEY_WRONG),
               "a bad sha256 is not printed:\n%s", mcpg_fakehost_report_text(fh));
    snprintf(row, sizeof row, "[{\"sha256\": \"%s\", \"principal\": \"a\"}, 7]", h);
    expect_check(row, "[1]: must be an object");
    snprintf(row, sizeof row, "[{\"sha256\": \"%s\"}]", h);
    expect_check(row, "[0].principal: is required");
    snprintf(row, sizeof row, "[{\"principal\": \"a\"}]");
    expect_check(row, "[0].sha256: is required");
    snprintf(row, sizeof row, "[{\"sha256\": \"%s\", \"principal\": \"a\", \"tennant\": \"x\"}]", h);
    expect_check(row, "[0].tennant: unknown field");
    snprintf(row, sizeof row, "[{\"sha256\": \"%s\", \"principal\": \"a\", \"key\": \"k\"}]", h);
    expect_check(row, "[0].key: the file holds each key's sha256, never the key itself");
    snprintf(row, sizeof row, "[{\"sha256\": \"%s\", \"principal\": \"a\", \"roles\": \"r\"}]", h);
    expect_check(row, "[0].roles: must be an array of strings");
    snprintf(row, sizeof row,
             "[{\"sha256\": \"%s\", \"principal\": \"a\", \"roles\": [\"r\", \"a,b\"]}]", h);
    expect_check(row, "[0].roles[1]: must not hold a comma");
    snprintf(row, sizeof row, "[{\"sha256\": \"%s\", \"principal\": \"\"}]", h);
    expect_check(row, "[0].principal: must be 1 to 256 bytes");
    snprintf(row, sizeof row, "[{\"sha256\": \"%s\", \"principal\": \"a\\nb\"}]", h);
    expect_check(row, "[0].principal: must not hold control characters");
    snprintf(row, sizeof row, "[{\"sha256\": \"%s\", \"principal\": \"a\", \"tenant\": 3}]", h);
    expect_check(row, "[0].tenant: must be a string");
    snprintf(row, sizeof row,
             "[{\"sha256\": \"%s\", \"principal\": \"a\"}, {\"sha256\": \"%s\", "
             "\"principal\": \"b\"}]", h, h);
    expect_check(row, "[1].sha256: the same key as [0]");
    /* every problem at once, not the first only */
    expect_check("[{\"principal\": 1}, {\"sha256\": \"x\"}]", "[1].principal: is required");
    MCPG_CHECK(mcpg_fakehost_report_count(fh) == 4, "four problems:\n%s",
               mcpg_fakehost_report_text(fh));

    write_keys(0);
    char cfg[300];
    snprintf(cfg, sizeof cfg, "{\"keys_file\":\"%s\",\"realm\":\"a\\\"b\"}", keys_path);
    MCPG_CHECK(mcpg_fakehost_check(fh, desc, cfg) == MCPG_ECONFIG &&
                   strstr(mcpg_fakehost_report_text(fh), "realm: must be printable ASCII"),
               "a quote in the realm:\n%s", mcpg_fakehost_report_text(fh));
    MCPG_CHECK(mcpg_fakehost_check(fh, desc, "{}") == MCPG_ECONFIG &&
                   strstr(mcpg_fakehost_report_text(fh), "keys_file"),
               "keys_file is required:\n%s", mcpg_fakehost_report_text(fh));
    snprintf(cfg, sizeof cfg, "{\"keys_file\":\"%s\",\"headers\":\"cookie\"}", keys_path);
    MCPG_CHECK(mcpg_fakehost_check(fh, desc, cfg) == MCPG_ECONFIG, "headers is an enum");
    snprintf(cfg, sizeof cfg, "{\"keys_file\":\"%s\"}", keys_path);
    MCPG_CHECK(mcpg_fakehost_check(fh, desc, cfg) == 0, "a good file checks:\n%s",
               mcpg_fakehost_report_text(fh));

    /* create refuses a bad file too (a start without --check first) */
    write_file(keys_path, "[1]");
    mcpg_instance *inst = NULL;
    MCPG_CHECK(mcpg_fakehost_load_file(fh, so_path, "keys", cfg, &inst) != 0,
               "load with a bad file is refused");
    write_keys(0);
}

/* An ABI 1.1 kernel: no call_identify, no challenge; identity through
 * call_set_identity with the roles comma-separated. */
static void test_old_host(void) {
    mcpg_host *h = mcpg_fakehost_host(fh);
    uint32_t size = h->size;
    h->size = (uint32_t)offsetof(mcpg_host, call_peer);
    mcpg_instance *inst = load(NULL);
    outcome o = authenticate(inst, (const char *const[]){"x-api-key", KEY_ALICE, NULL});
    expect_identity(&o, "1.1 host", "alice", "acme", "reader,writer");
    o = authenticate(inst, (const char *const[]){"x-api-key", KEY_WRONG, NULL});
    MCPG_CHECK(o.status == MCPG_DENY && o.code == -32001 && o.http == 401,
               "1.1 host refuses: %d %lld %d", o.status, (long long)o.code, o.http);
    MCPG_CHECK(mcpg_fakehost_unload(fh, inst) == 0, "unload");
    h->size = size;
}

int main(int argc, char **argv) {
    MCPG_REQUIRE(argc == 2, "usage: test_identity_apikey path/to/identity_apikey.so");
    so_path = argv[1];
    MCPG_REQUIRE(mkdtemp(dir), "mkdtemp");
    snprintf(keys_path, sizeof keys_path, "%s/keys.json", dir);
    void *dl = dlopen(so_path, RTLD_NOW | RTLD_LOCAL);
    MCPG_REQUIRE(dl, "dlopen %s: %s", so_path, dlerror());
    mcpg_module_entry_fn entry;
    void *sym = dlsym(dl, MCPG_ENTRY_SYMBOL);
    memcpy(&entry, &sym, sizeof entry);
    MCPG_REQUIRE(entry, "entry symbol");
    desc = entry(MCPG_ABI_MAJOR, MCPG_ABI_MINOR);

    fh = mcpg_fakehost_new();
    MCPG_REQUIRE(fh, "mcpg_fakehost_new");
    mcpg_fakehost_set_quiet(fh, 1);
    write_keys(0);
    MCPG_REQUIRE(MCPG_HOST_HAS(mcpg_fakehost_host(fh), call_identify) &&
                     MCPG_HOST_HAS(mcpg_fakehost_host(fh), call_set_challenge),
                 "the fake host serves ABI 1.2");

    test_accepts();
    test_refuses();
    test_passes();
    test_header_choice();
    test_reload();
    test_file_errors();
    test_old_host();

    int problems = mcpg_fakehost_free(fh);
    MCPG_CHECK(problems == 0, "fake host: %d problem(s)", problems);
    dlclose(dl);
    unlink(keys_path);
    rmdir(dir);
    return MCPG_CHECK_EXIT("test_identity_apikey");
}
