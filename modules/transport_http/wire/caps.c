/* transport_http: the capabilities both wires advertise (server/discover on
 * the 2026-07-28 wire, initialize on the legacy one), from one builder so
 * the two never disagree, and from what the gateway serves now: a client
 * that reads "prompts" here may call prompts/list and find some. */
#include "wire/wire.h"

#include <string.h>

/* What the bindings serve (ABI 1.7; a virtual server's own, 1.12), and what
 * this transport adds: resource webhooks announce updates (so subscriptions
 * are worth making) and, when a source may say so, list changes. A kernel
 * without the slot: everything, as before it could say. */
static uint32_t offered(const th_mod *m, const th_req *r) {
    const mcpg_host *h = m->host;
    uint32_t bits = MCPG_OFFER_TOOLS | MCPG_OFFER_RESOURCES | MCPG_OFFER_PROMPTS |
                    MCPG_OFFER_COMPLETIONS | MCPG_OFFER_SUBSCRIBE | MCPG_OFFER_LIST_CHANGED;
    if (r->server_len && MCPG_HOST_HAS(h, server_offers))
        bits = h->server_offers(r->ws->w, r->server, r->server_len);
    else if (MCPG_HOST_HAS(h, offers))
        bits = h->offers();
    return bits | m->wh_offers;
}

static int kind(const mcpg_host *h, mcpg_buf *b, int *first, const char *name, const char *members) {
    int rc = h->buf_printf(b, "%s\"%s\":{%s}", *first ? "" : ",", name, members);
    *first = 0;
    return rc;
}

int th_caps_append(const th_mod *m, const th_req *r, mcpg_buf *b, int legacy) {
    const mcpg_host *h = m->host;
    uint32_t bits = offered(m, r);
    const char *lc = (bits & MCPG_OFFER_LIST_CHANGED) ? "\"listChanged\":true" : "";
    int tasks = MCPG_HOST_HAS(h, tasks_offered) && h->tasks_offered();
    int events = MCPG_HOST_HAS(h, events_offered) && h->events_offered();
    int first = 1;
    int rc = h->buf_append(b, "{", 1);
    if (bits & MCPG_OFFER_TOOLS) rc |= kind(h, b, &first, "tools", lc);
    if (bits & MCPG_OFFER_RESOURCES) {
        char res[64];
        int sub = (bits & MCPG_OFFER_SUBSCRIBE) != 0;
        snprintf(res, sizeof res, "%s%s%s", sub ? "\"subscribe\":true" : "", sub && *lc ? "," : "", lc);
        rc |= kind(h, b, &first, "resources", res);
    }
    if (bits & MCPG_OFFER_PROMPTS) rc |= kind(h, b, &first, "prompts", lc);
    /* the gateway relays a backend's notifications/message on both wires */
    rc |= kind(h, b, &first, "logging", "");
    if (bits & MCPG_OFFER_COMPLETIONS) rc |= kind(h, b, &first, "completions", "");
    if (legacy) {
        if (tasks) rc |= kind(h, b, &first, "tasks", "\"list\":{},\"cancel\":{},\"requests\":{\"tools\":{\"call\":{}}}");
        if (events) rc |= kind(h, b, &first, "events", "\"listChanged\":false");
    } else if (tasks || events) {
        rc |= h->buf_printf(b, ",\"extensions\":{%s%s%s}", tasks ? "\"io.modelcontextprotocol/tasks\":{}" : "",
                            tasks && events ? "," : "",
                            events ? "\"io.modelcontextprotocol/events\":{\"listChanged\":false}" : "");
    }
    rc |= h->buf_append(b, "}", 1);
    return rc ? MCPG_ENOMEM : 0;
}

/* {"name":...,"version":...} for the gateway's name now, or NULL (no memory). */
static th_info *info_new(const mcpg_host *h, th_info *older) {
    const char *name = MCPG_HOST_HAS(h, gateway_name) ? h->gateway_name() : "mcpg";
    const char *version = h->gateway_version();
    mcpg_buf b = {0};
    int rc = h->buf_append(&b, "{\"name\":", 8);
    rc |= h->buf_append_json_string(&b, name, strlen(name));
    rc |= h->buf_append(&b, ",\"version\":", 11);
    rc |= h->buf_append_json_string(&b, version ? version : "", version ? strlen(version) : 0);
    rc |= h->buf_append(&b, "}", 1);
    th_info *in = rc ? NULL : h->alloc(sizeof *in + b.len + 1);
    if (in) {
        in->older = older;
        in->len = b.len;
        memcpy(in->json, b.data, b.len);
        in->json[b.len] = '\0';
    }
    h->buf_free(&b);
    return in;
}

int th_server_info_build(th_mod *m) {
    const mcpg_host *h = m->host;
    th_info *cur = atomic_load(&m->info);
    th_info *in = info_new(h, cur);
    if (!in) return MCPG_ENOMEM;
    if (cur && cur->len == in->len && !memcmp(cur->json, in->json, in->len)) {
        h->free(in); /* the same name: the newest stays */
        return 0;
    }
    atomic_store(&m->info, in);
    return 0;
}

th_piece th_server_info(const th_mod *m) {
    th_info *in = atomic_load(&m->info);
    return in ? (th_piece){in->json, in->len} : (th_piece){"{}", 2};
}

void th_server_info_free(th_mod *m) {
    for (th_info *in = atomic_exchange(&m->info, NULL), *older; in; in = older) {
        older = in->older;
        m->host->free(in);
    }
}
