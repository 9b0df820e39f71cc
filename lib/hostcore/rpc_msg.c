/* The JSON-RPC messages a call sends its client before its outcome, and
 * the client's replies: framed and read one way for the kernel and the
 * fake host (declared in handshake.h). */
#include "handshake.h"

#include <mcpg/sdk.h>
#include <string.h>

int mcpg__rpc_frame(mcpg_buf *b, const char *id, const char *method, const char *params,
                    size_t plen) {
    int rc = mcpg_buf_puts(b, "{\"jsonrpc\":\"2.0\",");
    if (id) {
        rc |= mcpg_buf_puts(b, "\"id\":\"");
        rc |= mcpg_buf_puts(b, id); /* minted ids: no character to escape */
        rc |= mcpg_buf_puts(b, "\",");
    }
    rc |= mcpg_buf_puts(b, "\"method\":");
    rc |= mcpg_buf_append_json_string(b, method, strlen(method));
    if (params && plen) {
        rc |= mcpg_buf_puts(b, ",\"params\":");
        rc |= mcpg_buf_append(b, params, plen);
    }
    rc |= mcpg_buf_puts(b, "}");
    return rc ? MCPG_ENOMEM : 0;
}

void mcpg__rpc_reply(const char *body, size_t n, mcpg_reply *r, char *msg, size_t msgcap) {
    mcpg_json_span v, e;
    *r = (mcpg_reply){.size = sizeof *r};
    if (mcpg_json_object_get(body, n, "result", &v) == 1) {
        r->result_json = v.p;
        r->result_len = v.n;
        return;
    }
    r->is_error = 1;
    r->error_message = msg;
    msg[0] = '\0';
    if (mcpg_json_object_get(body, n, "error", &e) != 1 || e.type != MCPG_JSON_OBJECT) return;
    if (mcpg_json_object_get(e.p, e.n, "code", &v) == 1) mcpg_json_int64(&v, &r->error_code);
    if (mcpg_json_object_get(e.p, e.n, "message", &v) == 1 && v.type == MCPG_JSON_STRING)
        mcpg_json_string_decode(&v, msg, msgcap, NULL);
    if (mcpg_json_object_get(e.p, e.n, "data", &v) == 1) {
        r->error_data = v.p;
        r->error_data_len = v.n;
    }
}
