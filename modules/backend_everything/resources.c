/* Resources: two static ones (text and binary), the watched one that
 * changes when test_update_watched_resource runs (each change is announced
 * with host->resource_updated, so subscribers hear of it), and the template
 * test://template/{id}/data. test://nonexistent-resource-for-conformance-
 * testing is deliberately not offered: reading an unknown uri is -32602
 * "Resource not found" with data.uri (the kernel answers it before a
 * backend is picked; the backend says the same if asked). */
#include "everything.h"

#include <stdio.h>
#include <string.h>

#define STATIC_TEXT "test://static-text"
#define STATIC_BINARY "test://static-binary"
#define WATCHED "test://watched-resource"
#define TEMPLATE_HEAD "test://template/"
#define TEMPLATE_TAIL "/data"

int ev_list_resources(ev *e, mcpg_buf *out) {
    return e->host->buf_printf(
        out,
        "[{\"uri\":\"" STATIC_TEXT "\",\"name\":\"static-text\",\"title\":\"Static Text "
        "Resource\",\"description\":\"A static text resource for testing\",\"mimeType\":"
        "\"text/plain\"},"
        "{\"uri\":\"" STATIC_BINARY "\",\"name\":\"static-binary\",\"title\":\"Static Binary "
        "Resource\",\"description\":\"A static binary resource (image) for testing\","
        "\"mimeType\":\"image/png\"},"
        "{\"uri\":\"" WATCHED "\",\"name\":\"watched-resource\",\"title\":\"Watched "
        "Resource\",\"description\":\"A resource that changes when "
        "test_update_watched_resource runs\",\"mimeType\":\"text/plain\"}]");
}

int ev_list_templates(ev *e, mcpg_buf *out) {
    return e->host->buf_printf(
        out, "[{\"uriTemplate\":\"" TEMPLATE_HEAD "{id}" TEMPLATE_TAIL "\",\"name\":\"template\","
             "\"title\":\"Resource Template\",\"description\":\"A resource template with "
             "parameter substitution\",\"mimeType\":\"application/json\"}]");
}

/* {"contents":[{"uri":U,"mimeType":M,"text"|"blob":V}]}, V escaped. */
static mcpg_status contents(ev *e, mcpg_call *call, const char *uri, const char *mime,
                            const char *field, const char *value) {
    const mcpg_host *h = e->host;
    mcpg_buf *b = h->call_result_buf(call);
    int rc = h->buf_printf(b, "{\"contents\":[{\"uri\":");
    rc = rc ? rc : h->buf_append_json_string(b, uri, strlen(uri));
    rc = rc ? rc : h->buf_printf(b, ",\"mimeType\":\"%s\",\"%s\":", mime, field);
    rc = rc ? rc : h->buf_append_json_string(b, value, strlen(value));
    rc = rc ? rc : h->buf_printf(b, "}]}");
    return rc ? mcpg_result_errorf(h, call, MCPG_RPC_INTERNAL_ERROR, "out of memory")
              : MCPG_CONTINUE;
}

/* The {id} of a uri of the template: 1 and id set, or 0. */
static int template_id(const char *uri, char *id, size_t cap) {
    size_t hl = strlen(TEMPLATE_HEAD), tl = strlen(TEMPLATE_TAIL), n = strlen(uri);
    if (n <= hl + tl || strncmp(uri, TEMPLATE_HEAD, hl) != 0 ||
        strcmp(uri + n - tl, TEMPLATE_TAIL) != 0)
        return 0;
    size_t idn = n - hl - tl;
    if (idn >= cap || memchr(uri + hl, '/', idn)) return 0;
    memcpy(id, uri + hl, idn);
    id[idn] = '\0';
    return 1;
}

static mcpg_status not_found(ev *e, mcpg_call *call, const char *uri) {
    const mcpg_host *h = e->host;
    mcpg_buf data = {0};
    int rc = h->buf_printf(&data, "{\"uri\":");
    rc = rc ? rc : h->buf_append_json_string(&data, uri, strlen(uri));
    rc = rc ? rc : h->buf_printf(&data, "}");
    h->call_error(call, MCPG_RPC_INVALID_PARAMS, "Resource not found", rc ? NULL : data.data);
    h->buf_free(&data);
    return MCPG_DENY;
}

mcpg_status ev_read_resource(ev *e, mcpg_call *call) {
    const char *uri = e->host->call_target(call);
    char id[128], text[512];
    if (!uri) uri = "";
    if (!strcmp(uri, STATIC_TEXT))
        return contents(e, call, uri, "text/plain", "text",
                        "This is the content of the static text resource.");
    if (!strcmp(uri, STATIC_BINARY)) return contents(e, call, uri, "image/png", "blob", EV_PNG_BASE64);
    if (!strcmp(uri, WATCHED)) {
        unsigned v = atomic_load(&e->watched_version);
        if (v) snprintf(text, sizeof text, "Watched resource content (update %u)", v);
        else snprintf(text, sizeof text, "Watched resource content");
        return contents(e, call, uri, "text/plain", "text", text);
    }
    if (template_id(uri, id, sizeof id)) {
        /* the text is itself JSON: {"id":..,"templateTest":true,"data":"Data for ID: .."} */
        mcpg_buf j = {0};
        const mcpg_host *h = e->host;
        int rc = h->buf_printf(&j, "{\"id\":");
        rc = rc ? rc : h->buf_append_json_string(&j, id, strlen(id));
        rc = rc ? rc : h->buf_printf(&j, ",\"templateTest\":true,\"data\":");
        snprintf(text, sizeof text, "Data for ID: %s", id);
        rc = rc ? rc : h->buf_append_json_string(&j, text, strlen(text));
        rc = rc ? rc : h->buf_printf(&j, "}");
        mcpg_status st = rc ? mcpg_result_errorf(h, call, MCPG_RPC_INTERNAL_ERROR, "out of memory")
                            : contents(e, call, uri, "application/json", "text", j.data);
        h->buf_free(&j);
        return st;
    }
    return not_found(e, call, uri);
}

void ev_watched_update(ev *e) {
    atomic_fetch_add(&e->watched_version, 1);
    if (MCPG_HOST_HAS(e->host, resource_updated))
        e->host->resource_updated(e->self, WATCHED, strlen(WATCHED));
}
