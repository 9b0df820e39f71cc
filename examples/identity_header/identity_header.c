/* identity_header: who is calling, as told by a trusted proxy in front.
 *
 * A reverse proxy that has already authenticated the user (an SSO gateway,
 * an OAuth2 proxy, a service mesh sidecar) passes who it let in as plain
 * request headers:
 *
 *   X-User: ann          -> the principal (required)
 *   X-Tenant: acme       -> the tenant (optional)
 *   X-Role: reader       -> one role, also the claim "role" (optional)
 *
 * A call without X-User is refused with HTTP 401, JSON-RPC -32001 and a
 * WWW-Authenticate challenge, so the client knows it must go through the
 * proxy.
 *
 * !!! TRUST: these headers prove nothing by themselves. Anyone who can reach
 * !!! the gateway directly can send "X-User: admin". Use this module ONLY when
 * !!! the gateway listens where nothing but the proxy can reach it (loopback,
 * !!! a private network), and the proxy REMOVES any X-User/X-Tenant/X-Role a
 * !!! client sent before it sets its own.
 */
#include <mcpg/sdk.h>

#include <stdio.h>
#include <string.h>

/* ---- configuration: which headers, and the realm of the challenge ---- */
typedef struct header_config {
    const char *user_header, *tenant_header, *role_header, *realm;
} header_config;

static const mcpg_config_field header_fields[] = {
    MCPG_CFG_STRING_FIELD(header_config, user_header, "user_header", "\"X-User\"",
                          "the header naming the principal (required on every call)"),
    MCPG_CFG_STRING_FIELD(header_config, tenant_header, "tenant_header", "\"X-Tenant\"",
                          "the header naming the tenant (optional)"),
    MCPG_CFG_STRING_FIELD(header_config, role_header, "role_header", "\"X-Role\"",
                          "the header naming one role, also set as the claim \"role\""),
    MCPG_CFG_STRING_FIELD(header_config, realm, "realm", "\"mcpg\"",
                          "the realm of the WWW-Authenticate challenge"),
    MCPG_CONFIG_END};

/* Header names are matched lower-case (host->call_header wants that), so the
 * instance keeps lower-cased copies made once in create(). */
#define NAME_MAX_LEN 64
#define VALUE_MAX_LEN 128

typedef struct header_identity {
    const mcpg_host *host;
    char user[NAME_MAX_LEN + 1], tenant[NAME_MAX_LEN + 1], role[NAME_MAX_LEN + 1];
    char challenge[160];
} header_identity;

static int lower_copy(char *dst, const char *src) {
    size_t n = strlen(src);
    if (n == 0 || n > NAME_MAX_LEN) return -1;
    for (size_t i = 0; i <= n; i++)
        dst[i] = (char)(src[i] >= 'A' && src[i] <= 'Z' ? src[i] + 32 : src[i]);
    return 0;
}

/* validate() runs for `mcpg --check` too: say which key is wrong. */
static int header_validate(const mcpg_host *host, const void *config, mcpg_report *rep) {
    const header_config *c = config;
    const char *keys[] = {"user_header", "tenant_header", "role_header"};
    const char *vals[] = {c->user_header, c->tenant_header, c->role_header};
    char scratch[NAME_MAX_LEN + 1];
    int bad = 0;
    for (int i = 0; i < 3; i++)
        if (lower_copy(scratch, vals[i]) != 0) {
            host->report_error(rep, keys[i], "must be a header name of 1 to %d bytes",
                               NAME_MAX_LEN);
            bad = 1;
        }
    if (strlen(c->realm) > 64 || strchr(c->realm, '"')) {
        host->report_error(rep, "realm", "must be at most 64 bytes, without '\"'");
        bad = 1;
    }
    return bad ? MCPG_ECONFIG : 0;
}

static int header_create(const mcpg_host *host, mcpg_instance *self, const void *config,
                         void **out) {
    const header_config *c = config;
    header_identity *h = host->calloc(1, sizeof *h);
    if (!h) return MCPG_ENOMEM;
    h->host = host;
    lower_copy(h->user, c->user_header); /* validate() has checked them */
    lower_copy(h->tenant, c->tenant_header);
    lower_copy(h->role, c->role_header);
    snprintf(h->challenge, sizeof h->challenge, "Trusted-Proxy realm=\"%s\"", c->realm);
    *out = h;
    return 0;
}

static void header_destroy(void *instance) {
    header_identity *h = instance;
    h->host->free(h);
}

/* A header's value copied into dst as a C string: 1 when present, 0 when
 * absent or empty, -1 when too long or holding a byte that has no place in a
 * name (a control character, a quote, a backslash, a comma). */
static int header_value(const mcpg_host *host, mcpg_call *call, const char *lname, char *dst) {
    size_t n = 0;
    const char *v = host->call_header(call, lname, &n);
    if (!v || n == 0) return 0;
    if (n > VALUE_MAX_LEN) return -1;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)v[i] < 0x21 || strchr("\"\\,\x7f", v[i])) return -1;
    memcpy(dst, v, n);
    dst[n] = '\0';
    return 1;
}

/* 401 with a challenge: the client learns it must come through the proxy. */
static mcpg_status refuse(header_identity *h, mcpg_call *call, const char *why) {
    const mcpg_host *host = h->host;
    host->call_error(call, MCPG_RPC_UNAUTHENTICATED, why, NULL);
    host->call_set_http(call, 401, 0);
    if (MCPG_HOST_HAS(host, call_set_challenge)) host->call_set_challenge(call, h->challenge);
    return MCPG_DENY;
}

/* Runs on the call's loop thread for every request: read three headers and
 * answer at once (an identity op must not block). */
static mcpg_status header_authenticate(void *instance, mcpg_call *call) {
    header_identity *h = instance;
    const mcpg_host *host = h->host;
    char user[VALUE_MAX_LEN + 1], tenant[VALUE_MAX_LEN + 1], role[VALUE_MAX_LEN + 1];
    char claims[VALUE_MAX_LEN * 6 + 16];
    int has_user = header_value(host, call, h->user, user);
    int has_tenant = header_value(host, call, h->tenant, tenant);
    int has_role = header_value(host, call, h->role, role);
    if (has_user == 0) return refuse(h, call, "Unauthenticated: no user header from the proxy");
    if (has_user < 0 || has_tenant < 0 || has_role < 0)
        return refuse(h, call, "Unauthenticated: a malformed identity header");

    /* The claims are a JSON object the policy stage may read; role holds no
     * quote, backslash or control byte (header_value): no escaping needed. */
    snprintf(claims, sizeof claims, has_role ? "{\"role\":\"%s\"}" : "{}", role);
    const char *roles[1] = {role};
    mcpg_identity id = {.size = sizeof id,
                        .principal = user,
                        .tenant = has_tenant ? tenant : NULL,
                        .roles = roles,
                        .n_roles = has_role ? 1 : 0,
                        .claims_json = claims,
                        .claims_len = strlen(claims),
                        .method = "header"};
    if (!MCPG_HOST_HAS(host, call_identify)) /* an ABI 1.0 kernel: no claims */
        return host->call_set_identity(call, user, id.tenant, has_role ? role : NULL) == 0
                   ? MCPG_CONTINUE
                   : mcpg_result_errorf(host, call, MCPG_RPC_INTERNAL_ERROR,
                                        "identity: the caller could not be recorded");
    int rc = host->call_identify(call, &id); /* MCPG_EINVAL: claims that are not JSON */
    if (rc != 0)
        return mcpg_result_errorf(host, call, MCPG_RPC_INTERNAL_ERROR,
                                  "identity: the caller could not be recorded (%s)",
                                  host->errname(rc));
    return MCPG_CONTINUE;
}

static const mcpg_lifecycle_ops header_lifecycle = {
    MCPG_OPS_HEAD(mcpg_lifecycle_ops), .validate = header_validate, .create = header_create,
    .destroy = header_destroy};
static const mcpg_identity_ops header_ops = {MCPG_OPS_HEAD(mcpg_identity_ops),
                                             .authenticate = header_authenticate};
MCPG_MODULE_DEFINE(MCPG_KIND_IDENTITY, "identity_header", "1.0.0",
                   .description = "who calls, from headers a trusted proxy sets (X-User, "
                                  "X-Tenant, X-Role); only behind a proxy that strips them",
                   .config = header_fields, .config_size = sizeof(header_config),
                   .lifecycle = &header_lifecycle, .ops = &header_ops);
