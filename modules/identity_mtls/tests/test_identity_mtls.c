/* identity_mtls through the SDK's fake host: the built .so, loaded as the
 * kernel would. Usage: test_identity_mtls path/to/identity_mtls.so
 *
 * The TLS facts a transport would hand the call are the test's
 * (mcpg_fakehost_call_set_tls): the principal
 * from the subject CN or a SAN (in principal_from's order), the map and the
 * defaults, require and mapped_only, the claims, config errors by key path,
 * a certificate naming two principals (two CNs, two SANs of the type) or
 * one with a NUL refused and logged at a bounded rate, and a kernel
 * without TLS facts (ABI 1.1). */
#define _GNU_SOURCE
#include <mcpg/check.h>
#include <mcpg/fakehost.h>

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

static const char *so_path;
static mcpg_fakehost *fh;
static const mcpg_module *desc;

static mcpg_tls_info tls_of(const char *subject, const char *sans, int verified) {
    return (mcpg_tls_info){.size = sizeof(mcpg_tls_info),
                           .client_verified = (uint32_t)verified,
                           .version = "TLSv1.3",
                           .cipher = "TLS_AES_128_GCM_SHA256",
                           .cert_subject = subject,
                           .cert_issuer = "CN=Test CA",
                           .cert_sans_json = sans ? sans : "[]",
                           .cert_sha256 = "ab01ab01ab01ab01ab01ab01ab01ab01ab01ab01ab01ab01ab01ab01ab01ab01"};
}

static mcpg_instance *load(const char *config) {
    return mcpg_fakehost_load_file_or_exit(fh, so_path, "mtls", config);
}

typedef struct outcome {
    int status;
    int64_t code;
    int http;
    char principal[128], tenant[64], roles[128], method[16], claims[512];
} outcome;

static void copy(char *dst, size_t cap, const char *s) {
    snprintf(dst, cap, "%s", s ? s : "");
}

static outcome authenticate(mcpg_instance *inst, const mcpg_tls_info *tls) {
    const mcpg_host *h = mcpg_fakehost_host(fh);
    mcpg_call *c = mcpg_fakehost_call_new(fh, "tools/call", "echo", "{}", "1");
    MCPG_REQUIRE(c, "call_new");
    mcpg_fakehost_call_set_tls(c, tls); /* as the transport would: NULL is clear text */
    outcome o = {0};
    o.status = mcpg_fakehost_run(fh, inst, c, 1000);
    copy(o.principal, sizeof o.principal, h->call_principal(c));
    copy(o.tenant, sizeof o.tenant, h->call_tenant(c));
    if (MCPG_HOST_HAS(h, call_role_count)) {
        for (uint32_t i = 0; i < h->call_role_count(c); i++) {
            size_t n = strlen(o.roles);
            snprintf(o.roles + n, sizeof o.roles - n, "%s%s", i ? "," : "", h->call_role(c, i));
        }
    } else {
        copy(o.roles, sizeof o.roles, h->call_roles(c));
    }
    if (MCPG_HOST_HAS(h, call_auth_method)) copy(o.method, sizeof o.method, h->call_auth_method(c));
    if (MCPG_HOST_HAS(h, call_claims)) {
        size_t n = 0;
        const char *cl = h->call_claims(c, &n);
        snprintf(o.claims, sizeof o.claims, "%.*s", cl ? (int)n : 0, cl ? cl : "");
    }
    mcpg_call_outcome out = {0};
    mcpg_fakehost_outcome(c, &out);
    o.code = out.is_error ? out.error_code : 0;
    o.http = out.http_status;
    mcpg_fakehost_call_free(fh, c);
    return o;
}

static void expect_identity(const outcome *o, const char *what, const char *principal,
                            const char *tenant, const char *roles) {
    MCPG_CHECK(o->status == MCPG_CONTINUE && o->code == 0, "%s: status %d code %lld", what,
               o->status, (long long)o->code);
    MCPG_CHECK(strcmp(o->principal, principal) == 0, "%s: principal '%s', expected '%s'", what,
               o->principal, principal);
    MCPG_CHECK(strcmp(o->tenant, tenant) == 0, "%s: tenant '%s', expected '%s'", what, o->tenant,
               tenant);
    MCPG_CHECK(strcmp(o->roles, roles) == 0, "%s: roles '%s', expected '%s'", what, o->roles,
               roles);
    if (MCPG_HOST_HAS(mcpg_fakehost_host(fh), call_identify))
        MCPG_CHECK(strcmp(o->method, "mtls") == 0, "%s: method '%s'", what, o->method);
}

static void expect_passed(const outcome *o, const char *what) {
    MCPG_CHECK(o->status == MCPG_CONTINUE && o->code == 0 && o->principal[0] == '\0',
               "%s: status %d code %lld principal '%s'", what, o->status, (long long)o->code,
               o->principal);
}

static void expect_refused(const outcome *o, const char *what) {
    MCPG_CHECK(o->status == MCPG_DENY && o->code == -32001 && o->http == 401,
               "%s: status %d code %lld http %d", what, o->status, (long long)o->code, o->http);
    MCPG_CHECK(o->principal[0] == '\0', "%s: identity '%s' on a refusal", what, o->principal);
}

/* ------------------------------------------------------------------ */

static void test_subject_cn(void) {
    mcpg_instance *inst = load(NULL);
    mcpg_tls_info alice = tls_of("CN=alice,O=Acme", "[\"URI:spiffe://acme/alice\"]", 1);
    outcome o = authenticate(inst, &alice);
    expect_identity(&o, "subject CN", "alice", "", "");
    if (MCPG_HOST_HAS(mcpg_fakehost_host(fh), call_claims)) {
        MCPG_CHECK(strstr(o.claims, "\"cert_sha256\":\"ab01") != NULL &&
                       strstr(o.claims, "\"cert_subject\":\"CN=alice,O=Acme\"") != NULL &&
                       strstr(o.claims, "\"cert_sans\":[\"URI:spiffe://acme/alice\"]") != NULL &&
                       strstr(o.claims, "\"principal_from\":\"subject_cn\"") != NULL,
                   "claims: %s", o.claims);
    }
    /* nothing verified: pass on */
    expect_passed((o = authenticate(inst, NULL), &o), "clear text");
    mcpg_tls_info unverified = tls_of("CN=mallory", NULL, 0);
    expect_passed((o = authenticate(inst, &unverified), &o), "certificate not verified");
    mcpg_tls_info no_cn = tls_of("O=Acme", NULL, 1);
    expect_passed((o = authenticate(inst, &no_cn), &o), "no CN");
    /* a transport that knows only the first fields of mcpg_tls_info */
    mcpg_tls_info small = alice;
    small.size = (uint32_t)offsetof(mcpg_tls_info, cert_subject);
    expect_passed((o = authenticate(inst, &small), &o), "tls info without the cert fields");
    MCPG_CHECK(mcpg_fakehost_unload(fh, inst) == 0, "unload");
}

static void test_require(void) {
    mcpg_instance *inst = load("{\"require\":true}");
    outcome o = authenticate(inst, NULL);
    expect_refused(&o, "require, clear text");
    mcpg_tls_info unverified = tls_of("CN=mallory", NULL, 0);
    o = authenticate(inst, &unverified);
    expect_refused(&o, "require, not verified");
    mcpg_tls_info no_cn = tls_of("O=Acme", NULL, 1);
    o = authenticate(inst, &no_cn);
    expect_refused(&o, "require, no name");
    mcpg_tls_info bob = tls_of("CN=bob", NULL, 1);
    o = authenticate(inst, &bob);
    expect_identity(&o, "require, verified", "bob", "", "");
    MCPG_CHECK(mcpg_fakehost_unload(fh, inst) == 0, "unload");
}

static void test_sources_and_map(void) {
    mcpg_instance *inst = load(
        "{\"principal_from\":[\"san_uri\",\"san_email\",\"subject_cn\"],"
        "\"tenant\":\"public\",\"roles\":[\"guest\"],"
        "\"map\":{\"spiffe://acme/billing\":{\"tenant\":\"acme\",\"roles\":[\"reader\",\"writer\"]},"
        "\"ops@acme.example\":{\"roles\":[\"admin\"]},"
        "\"carol\":{\"tenant\":\"beta\"},"
        "\"dave\":{\"roles\":[]}}}");
    mcpg_tls_info svc = tls_of("CN=billing,O=Acme",
                               "[\"DNS:billing.acme.example\",\"URI:spiffe://acme/billing\"]", 1);
    outcome o = authenticate(inst, &svc);
    expect_identity(&o, "URI SAN first, mapped", "spiffe://acme/billing", "acme", "reader,writer");
    mcpg_tls_info ops = tls_of("CN=ops", "[\"email:ops@acme.example\"]", 1);
    o = authenticate(inst, &ops);
    expect_identity(&o, "email SAN, map gives roles only", "ops@acme.example", "public", "admin");
    mcpg_tls_info carol = tls_of("CN=carol", "[\"DNS:carol.example\"]", 1);
    o = authenticate(inst, &carol);
    expect_identity(&o, "CN after the SANs, map gives tenant only", "carol", "beta", "guest");
    mcpg_tls_info dave = tls_of("CN=dave", NULL, 1);
    o = authenticate(inst, &dave);
    expect_identity(&o, "map gives no roles", "dave", "public", "");
    mcpg_tls_info eve = tls_of("CN=eve", NULL, 1);
    o = authenticate(inst, &eve);
    expect_identity(&o, "unmapped: the defaults", "eve", "public", "guest");
    MCPG_CHECK(mcpg_fakehost_unload(fh, inst) == 0, "unload");

    inst = load("{\"principal_from\":\"san_dns\",\"mapped_only\":true,"
                "\"map\":{\"a.example\":{\"tenant\":\"t\"}}}");
    mcpg_tls_info a = tls_of("CN=x", "[\"DNS:a.example\"]", 1);
    o = authenticate(inst, &a);
    expect_identity(&o, "mapped_only, mapped", "a.example", "t", "");
    mcpg_tls_info b = tls_of("CN=x", "[\"DNS:b.example\"]", 1);
    o = authenticate(inst, &b);
    expect_refused(&o, "mapped_only, not mapped");
    o = authenticate(inst, NULL);
    expect_passed(&o, "mapped_only without require: clear text passes");
    MCPG_CHECK(mcpg_fakehost_unload(fh, inst) == 0, "unload");
}

static int count_in_log(const char *needle) {
    int n = 0;
    for (const char *p = mcpg_fakehost_log_text(fh); (p = strstr(p, needle)); p++) n++;
    return n;
}

/* A certificate naming two principals, or one that is not one clean string,
 * is refused (not passed on, not mapped by a later source), with a reason in
 * the log at most once a second. */
static void test_ambiguous_names(void) {
    mcpg_instance *inst = load("{\"map\":{\"alice\":{\"tenant\":\"acme\"},"
                               "\"admin\":{\"roles\":[\"admin\"]}}}");
    mcpg_fakehost_log_clear(fh);
    static const char *const refused[] = {
        "CN=alice,CN=admin", "CN=admin,CN=alice", "CN=alice+CN=admin,O=Acme",
        "CN=alice,O=Acme,2.5.4.3=admin", "CN=alice,CN=alice",
        "CN=admin\\00.evil.example,O=Acme", /* OpenSSL's text for a CN with a NUL in it */
        "CN=a\\0Ab", "CN=#0c05616c696365"};
    uint64_t t0 = mcpg_fakehost_now_ms();
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        mcpg_tls_info t = tls_of(refused[i], NULL, 1);
        outcome o = authenticate(inst, &t);
        expect_refused(&o, refused[i]);
    }
    uint64_t elapsed_s = (mcpg_fakehost_now_ms() - t0) / 1000;
    MCPG_CHECK(mcpg_fakehost_log_contains(fh, "more than one CN in its subject") &&
                   mcpg_fakehost_log_contains(fh, "sha256 ab01ab01"),
               "the first refusal says why and names the certificate:\n%s",
               mcpg_fakehost_log_text(fh));
    int lines = count_in_log("refused a client certificate");
    MCPG_CHECK(lines >= 1 && (uint64_t)lines <= 1 + elapsed_s,
               "%d log lines for refusals over %llu s (at most one a second)", lines,
               (unsigned long long)elapsed_s);
    MCPG_CHECK(!mcpg_fakehost_log_contains(fh, "CN=alice"), "no subject text in the log:\n%s",
               mcpg_fakehost_log_text(fh));
    mcpg_tls_info alice = tls_of("CN=alice,O=Acme", NULL, 1);
    outcome o = authenticate(inst, &alice);
    expect_identity(&o, "one CN still maps", "alice", "acme", "");
    MCPG_CHECK(mcpg_fakehost_unload(fh, inst) == 0, "unload");

    /* the source that finds two names ends the search */
    inst = load("{\"principal_from\":[\"subject_cn\",\"san_uri\"]}");
    mcpg_tls_info two_cns = tls_of("CN=alice,CN=admin", "[\"URI:spiffe://acme/alice\"]", 1);
    expect_refused((o = authenticate(inst, &two_cns), &o), "two CNs, a URI after them");
    mcpg_tls_info no_cn = tls_of("O=Acme", "[\"URI:spiffe://acme/alice\"]", 1);
    expect_identity((o = authenticate(inst, &no_cn), &o), "no CN: the URI", "spiffe://acme/alice",
                    "", "");
    MCPG_CHECK(mcpg_fakehost_unload(fh, inst) == 0, "unload");

    /* SANs: two of the type, or one with a NUL, refuse; the CN after is not read */
    inst = load("{\"principal_from\":[\"san_uri\",\"subject_cn\"]}");
    mcpg_tls_info two_uris =
        tls_of("CN=carol", "[\"URI:spiffe://acme/alice\",\"URI:spiffe://acme/admin\"]", 1);
    expect_refused((o = authenticate(inst, &two_uris), &o), "two URI SANs");
    mcpg_tls_info nul_uri = tls_of("CN=carol", "[\"URI:spiffe://acme/alice\\u0000.evil\"]", 1);
    expect_refused((o = authenticate(inst, &nul_uri), &o), "a URI SAN with a NUL");
    mcpg_tls_info uri_two_cns = tls_of("CN=alice,CN=admin", "[\"URI:spiffe://acme/alice\"]", 1);
    expect_identity((o = authenticate(inst, &uri_two_cns), &o),
                    "one URI first: the subject is not the principal's source",
                    "spiffe://acme/alice", "", "");
    MCPG_CHECK(mcpg_fakehost_unload(fh, inst) == 0, "unload");
}

static void expect_config_error(const char *config, const char *needle) {
    int rc = mcpg_fakehost_check(fh, desc, config);
    const char *rep = mcpg_fakehost_report_text(fh);
    MCPG_CHECK(rc == MCPG_ECONFIG && strstr(rep, needle) != NULL,
               "check %s: rc %d, report lacks '%s':\n%s", config, rc, needle, rep);
}

static void test_config_errors(void) {
    expect_config_error("{\"principal_from\":\"cn\"}",
                        "principal_from: must be one of subject_cn, san_uri, san_dns, san_email");
    expect_config_error("{\"principal_from\":[\"san_uri\",\"san_url\"]}", "principal_from[1]: must be one of");
    expect_config_error("{\"principal_from\":[\"san_uri\",\"san_uri\"]}",
                        "principal_from[1]: \"san_uri\" is listed twice");
    expect_config_error("{\"principal_from\":[]}", "principal_from: must be one of");
    expect_config_error("{\"map\":[]}", "map: must be an object");
    expect_config_error("{\"map\":{\"alice\":{\"tennant\":\"x\"}}}",
                        "map.alice.tennant: unknown key (did you mean \"tenant\"?)");
    expect_config_error("{\"map\":{\"alice\":{\"roles\":[\"a,b\"]}}}",
                        "map.alice.roles[0]: must not hold a comma");
    expect_config_error("{\"map\":{\"alice\":{\"tenant\":7}}}", "map.alice.tenant: must be a string");
    expect_config_error("{\"map\":{\"alice\":[]}}", "map.alice: must be an object");
    expect_config_error("{\"map\":{\"\":{}}}", "map.: a principal must be");
    expect_config_error("{\"roles\":\"admin\"}", "roles: must be an array");
    expect_config_error("{\"roles\":[\"\"]}", "roles[0]: must be a string of 1 to");
    expect_config_error("{\"tenant\":\"\"}", "tenant: must be a string of 1 to");
    MCPG_CHECK(mcpg_fakehost_check(fh, desc, "{\"map\":null,\"principal_from\":[\"subject_cn\"]}") == 0,
               "a null map checks:\n%s", mcpg_fakehost_report_text(fh));
}

/* An ABI 1.1 kernel has no TLS facts: nothing is verified. */
static void test_old_host(void) {
    mcpg_host *h = mcpg_fakehost_host(fh);
    uint32_t size = h->size;
    h->size = (uint32_t)offsetof(mcpg_host, call_peer);
    mcpg_fakehost_log_clear(fh);
    mcpg_instance *inst = load("{\"require\":true}");
    MCPG_CHECK(mcpg_fakehost_log_contains(fh, "gives no TLS facts"), "a warning at create:\n%s",
               mcpg_fakehost_log_text(fh));
    mcpg_tls_info alice = tls_of("CN=alice", NULL, 1);
    outcome o = authenticate(inst, &alice);
    expect_refused(&o, "1.1 host, require");
    MCPG_CHECK(mcpg_fakehost_unload(fh, inst) == 0, "unload");
    h->size = size;
}

int main(int argc, char **argv) {
    MCPG_REQUIRE(argc == 2, "usage: test_identity_mtls path/to/identity_mtls.so");
    so_path = argv[1];
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

    test_subject_cn();
    test_require();
    test_sources_and_map();
    test_ambiguous_names();
    test_config_errors();
    test_old_host();

    int problems = mcpg_fakehost_free(fh);
    MCPG_CHECK(problems == 0, "fake host: %d problem(s)", problems);
    dlclose(dl);
    return MCPG_CHECK_EXIT("test_identity_mtls");
}
