/* transport_http: virtual servers (the manifest's servers[], ABI 1.12) as
 * the wires see them. The router finds the server a request's path names
 * (host->server_find) and keeps here what the request needs of it later:
 * its name, which every call the request submits carries (desc.server), and
 * its serverInfo and instructions, which the answers the wires write
 * themselves carry. What server_find gives lasts one loop callback; a
 * request may be answered turns later (a session parked on the store, a
 * call's outcome), so all of it is copied. */
#include "wire/wire.h"

#include <string.h>

int th_req_server_keep(const mcpg_host *h, th_req *r, const mcpg_server_view *v) {
    size_t n = v->name ? strlen(v->name) : 0;
    size_t in = v->info_json ? strlen(v->info_json) : 0;
    if (!n || n > TH_SERVER_NAME_MAX) return MCPG_EINVAL;
    mcpg_buf *b = &r->server_text;
    b->len = 0;
    /* serverInfo's JSON, NUL (printed with %s), then the instructions as a
     * JSON string: escaped once here, not at each answer */
    int rc = h->buf_append(b, in ? v->info_json : "", in);
    rc |= h->buf_append(b, "", 1);
    size_t at = b->len;
    if (v->instructions) {
        rc |= h->buf_append_json_string(b, v->instructions, strlen(v->instructions));
        rc |= h->buf_append(b, "", 1);
    }
    if (rc) return MCPG_ENOMEM;
    memcpy(r->server, v->name, n + 1);
    r->server_len = (uint8_t)n;
    r->server_info_len = (uint32_t)in;
    r->server_instr_len = v->instructions ? (uint32_t)(b->len - 1 - at) : 0;
    return 0;
}

th_piece th_req_server_info(const th_mod *m, const th_req *r) {
    if (!r->server_info_len) return th_server_info(m);
    return (th_piece){r->server_text.data, r->server_info_len};
}

th_piece th_req_instructions(const th_req *r) {
    if (!r->server_instr_len) return (th_piece){NULL, 0};
    return (th_piece){r->server_text.data + r->server_info_len + 1, r->server_instr_len};
}

int th_req_same_server(const th_req *r, const char *server) {
    return !strcmp(r->server, server);
}
