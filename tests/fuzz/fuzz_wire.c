/* Fuzzer: what a POST /mcp says once its HTTP framing is done, on both
 * wires. The stateless 2026-07-28 checks (th_mcp_check: the JSON-RPC
 * envelope, _meta, and the MCP-Protocol-Version / Mcp-Method / Mcp-Name
 * headers against the body), the legacy wire's message reader
 * (th_lmsg_parse), the Last-Event-ID parser (th_event_id_parse), and the
 * Host/Origin rules on the header values.
 *
 * Input: header lines "name: value\n" up to an empty line, then the body.
 * A name given twice is a duplicate, as the transport reports it. */
#include "fuzz.h"

#include "http/hygiene.h"
#include "wire/legacy_parse.h"
#include "wire/mcp_stateless.h"

#include <mcpg/fakehost.h>
#include <string.h>

static const mcpg_host *g_host;

typedef struct wire_input {
    th_mcp_headers hd;
    th_hval session_id, last_event_id, host, origin;
    const char *body;
    size_t body_len;
} wire_input;

static void set_value(th_hval *v, const char *p, size_t n) {
    if (v->present) {
        v->dup = 1; /* the transport keeps the first and flags the rest */
        return;
    }
    while (n && (*p == ' ' || *p == '\t')) p++, n--;
    while (n && (p[n - 1] == ' ' || p[n - 1] == '\t' || p[n - 1] == '\r')) n--;
    *v = (th_hval){.p = p, .n = n, .present = 1};
}

static th_hval *header_slot(wire_input *w, const char *name, size_t n) {
    static const struct { const char *name; size_t off; } k_slots[] = {
        {"content-type", offsetof(wire_input, hd.content_type)},
        {"accept", offsetof(wire_input, hd.accept)},
        {"mcp-protocol-version", offsetof(wire_input, hd.protocol_version)},
        {"mcp-method", offsetof(wire_input, hd.method)},
        {"mcp-name", offsetof(wire_input, hd.name)},
        {"mcp-session-id", offsetof(wire_input, session_id)},
        {"last-event-id", offsetof(wire_input, last_event_id)},
        {"host", offsetof(wire_input, host)},
        {"origin", offsetof(wire_input, origin)},
    };
    for (size_t i = 0; i < sizeof k_slots / sizeof *k_slots; i++)
        if (strlen(k_slots[i].name) == n && !strncasecmp(k_slots[i].name, name, n))
            return (th_hval *)((char *)w + k_slots[i].off);
    return NULL;
}

static void split_input(wire_input *w, const char *p, size_t n) {
    memset(w, 0, sizeof *w);
    while (n) {
        const char *nl = memchr(p, '\n', n);
        size_t len = nl ? (size_t)(nl - p) : n, line = nl ? len + 1 : len;
        if (len == 0 || (len == 1 && p[0] == '\r')) {
            p += line, n -= line;
            break;
        }
        const char *colon = memchr(p, ':', len);
        th_hval *slot = colon ? header_slot(w, p, (size_t)(colon - p)) : NULL;
        if (slot) set_value(slot, colon + 1, len - (size_t)(colon + 1 - p));
        p += line, n -= line;
    }
    w->body = p;
    w->body_len = n;
}

/* ---- the verdict's promises --------------------------------------------------- */

static int within(th_piece s, const char *base, size_t n) {
    return s.p >= base && s.p + s.n <= base + n;
}

static int is_json(th_piece s) { return s.p && g_host->json_validate(s.p, s.n) == 0; }

/* th_header_matches against a decoded value: 1 or 0, -1 when the value
 * would need JSON escaping to be a span (not compared). */
static int header_equals(const mcpg_host *h, const th_hval *hv, th_piece decoded) {
    if (memchr(decoded.p, '"', decoded.n) || memchr(decoded.p, '\\', decoded.n)) return -1;
    for (size_t i = 0; i < decoded.n; i++)
        if ((unsigned char)decoded.p[i] < 0x20) return -1;
    mcpg_json_span s = {.p = decoded.p, .n = decoded.n, .type = MCPG_JSON_STRING};
    return th_header_matches(h, hv->p, hv->n, &s);
}

static void check_error(const th_mcp_verdict *v) {
    FZ_CHECK(v->http_status >= 400 && v->http_status < 600, "status %d", v->http_status);
    FZ_CHECK(v->code < 0, "code %lld", (long long)v->code);
    FZ_CHECK(v->message.n >= 2 && v->message.p[0] == '"' && v->message.p[v->message.n - 1] == '"' &&
                 is_json(v->message),
             "message %.*s", (int)v->message.n, v->message.p);
    FZ_CHECK(v->ndata <= 3, "%zu data pieces", v->ndata);
}

/* A request the gateway takes on: its headers agree with its body. */
static void check_taken(const wire_input *w, const th_mcp_verdict *v, const char *name_buf) {
    const th_mcp_headers *hd = &w->hd;
    FZ_CHECK(hd->content_type.present && !hd->content_type.dup, "taken without one Content-Type");
    if (v->action == TH_MCP_ACCEPTED) return; /* a notification: nothing more is read */
    FZ_CHECK(hd->method.present && !hd->method.dup, "taken without one Mcp-Method");
    FZ_CHECK(v->version.n == sizeof TH_PROTOCOL_VERSION - 1 && !memcmp(v->version.p, TH_PROTOCOL_VERSION, v->version.n),
             "version %.*s", (int)v->version.n, v->version.p);
    FZ_CHECK(!hd->protocol_version.present || !hd->protocol_version.dup, "two MCP-Protocol-Version headers");
    FZ_CHECK(is_json(v->id) && (within(v->id, w->body, w->body_len) || !memcmp(v->id.p, "null", 4)),
             "id %.*s", (int)v->id.n, v->id.p);
    FZ_CHECK(v->caps.p && within(v->caps, w->body, w->body_len) && v->caps.p[0] == '{', "caps");
    if (v->params.p) FZ_CHECK(within(v->params, w->body, w->body_len) && is_json(v->params), "params");
    if (v->args.p) FZ_CHECK(within(v->args, w->body, w->body_len) && v->args.p[0] == '{', "arguments");
    FZ_CHECK(v->log_level >= 0 && v->log_level <= TH_LOG_NONE, "log level %d", v->log_level);
    if (v->action == TH_MCP_SUBMIT || v->action == TH_MCP_DISCOVER || v->action == TH_MCP_LISTEN) {
        FZ_CHECK(v->method_name.p && v->method_name.p[v->method_name.n] == '\0', "method name");
        FZ_CHECK(header_equals(g_host, &hd->method, v->method_name) != 0,
                 "Mcp-Method %.*s taken for %s", (int)hd->method.n, hd->method.p, v->method_name.p);
    }
    if (v->name.p) {
        FZ_CHECK(v->name.n < TH_NAME_MAX, "name of %zu bytes", v->name.n);
        FZ_CHECK(within(v->name, w->body, w->body_len) || within(v->name, name_buf, TH_NAME_MAX), "name");
        FZ_CHECK(hd->name.present && !hd->name.dup, "a name taken without one Mcp-Name");
        FZ_CHECK(header_equals(g_host, &hd->name, v->name) != 0, "Mcp-Name %.*s for name %.*s",
                 (int)hd->name.n, hd->name.p, (int)v->name.n, v->name.p);
    }
    if (v->method == MCPG_METHOD_TOOLS_CALL) FZ_CHECK(v->name.p, "tools/call taken without a name");
}

static void check_stateless(const wire_input *w) {
    static char name_buf[TH_NAME_MAX];
    th_mcp_verdict v;
    th_mcp_check(g_host, &w->hd, w->body, w->body_len, name_buf, &v);
    FZ_CHECK(v.action >= TH_MCP_ERROR && v.action <= TH_MCP_LISTEN, "action %d", v.action);
    if (v.action == TH_MCP_ERROR) check_error(&v);
    else check_taken(w, &v, name_buf);
    /* the wire is chosen by the _meta version: a body that has it is never legacy */
    if (v.params.p) FZ_CHECK(th_meta_has_version(g_host, v.params.p, v.params.n), "taken without _meta");
}

static void check_span(const mcpg_json_span *s, const char *body, size_t n) {
    FZ_CHECK(s->p >= body && s->p + s->n <= body + n, "a member outside the body");
}

static void check_legacy(const wire_input *w) {
    th_lmsg m;
    int rc = th_lmsg_parse(g_host, w->body, w->body_len, &m);
    FZ_CHECK(rc >= -1 && rc <= 1, "rc %d", rc);
    if (rc == 0) FZ_CHECK(m.has == 0, "members of a non-object");
    if (rc != 1) return; /* -1: the caller answers a parse error, whatever was seen */
    const mcpg_json_span *spans[] = {&m.id, &m.method, &m.params, &m.result, &m.error};
    for (int i = 0; i < 5; i++)
        if (m.has & (1u << i)) check_span(spans[i], w->body, w->body_len);
}

static void check_event_id(const th_hval *v) {
    if (!v->present) return;
    th_event_ref ref;
    if (!th_event_id_parse(v->p, v->n, &ref)) return;
    size_t underscores = 0;
    for (size_t i = 0; i < v->n; i++) {
        FZ_CHECK((v->p[i] >= '0' && v->p[i] <= '9') || v->p[i] == '_', "byte 0x%02x in an event id",
                 (unsigned char)v->p[i]);
        underscores += v->p[i] == '_';
    }
    FZ_CHECK(underscores == 3, "%zu separators", underscores);
    char again[48];
    int k = snprintf(again, sizeof again, "%u_%u_%u_%u", ref.replica, ref.worker, ref.no, ref.seq);
    th_event_ref back;
    FZ_CHECK(th_event_id_parse(again, (size_t)k, &back) && back.replica == ref.replica &&
                 back.worker == ref.worker && back.no == ref.no && back.seq == ref.seq,
             "%s does not read back", again);
}

/* Host and Origin with the defaults of a loopback listener: whatever is
 * allowed there names a loopback host. */
static void check_hygiene(const wire_input *w) {
    th_names none = {0};
    if (w->host.present && th_host_allowed(&none, 1, w->host.p, w->host.n))
        FZ_CHECK(!strncasecmp(w->host.p, "localhost", 9) || !strncmp(w->host.p, "127.0.0.1", 9) ||
                     !strncmp(w->host.p, "[::1]", 5),
                 "Host %.*s allowed on loopback", (int)w->host.n, w->host.p);
    if (w->origin.present) (void)th_origin_allowed(&none, 1, w->origin.p, w->origin.n);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    g_host = mcpg_fakehost_host(mcpg_fakehost_new());
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* a private copy: no span may reach past the input's end */
    char *copy = malloc(size ? size : 1);
    memcpy(copy, data, size);
    wire_input w;
    split_input(&w, copy, size);
    check_stateless(&w);
    check_legacy(&w);
    check_event_id(&w.last_event_id);
    check_hygiene(&w);
    free(copy);
    return 0;
}
