/* transport_http: HTTP/1.1 responses and JSON-RPC bodies, assembled straight
 * into a connection's output buffer.
 *
 * A body is a short list of pieces (borrowed byte ranges) so its length is
 * known before the header is written: no scratch copy, no placeholder.
 * Pure: no I/O; grows buffers only through host->buf_*. */
#ifndef TH_RESPONSE_H
#define TH_RESPONSE_H

#include <mcpg/abi.h>
#include <stddef.h>
#include <stdint.h>

typedef struct th_piece {
    const char *p;
    size_t n;
} th_piece;

#define TH_LIT(s) ((th_piece){(s), sizeof(s) - 1})
#define TH_MAX_PIECES 20

/* The supported stateless protocol revision. */
#define TH_PROTOCOL_VERSION "2026-07-28"

typedef struct th_resp_head {
    int status;
    uint32_t retry_after_s; /* 0: no Retry-After */
    int close;              /* send Connection: close */
    int keep_alive_10;      /* an HTTP/1.0 client asked for keep-alive: say yes */
    int json;               /* Content-Type: application/json */
    const char *allow;      /* Allow header value, or NULL */
    const char *date;       /* Date header value, or NULL */
    int head_only;          /* a HEAD request: the headers of the answer, no body */
    const char *session;    /* Mcp-Session-Id value, or NULL */
    const char *www_authenticate; /* WWW-Authenticate value, or NULL */
    const char *content_type; /* Content-Type value when not json, or NULL */
} th_resp_head;

/* Append status line, headers and body pieces to out. Returns 0 or
 * MCPG_ENOMEM; *body_len_out (may be NULL) gets the body's length. */
int th_resp_append(const mcpg_host *h, mcpg_buf *out, const th_resp_head *hd,
                   const th_piece *body, size_t nbody, size_t *body_len_out);

/* The reason phrase for a status this transport sends. */
const char *th_status_reason(int status);

/* Write v in decimal into buf (>= 24 bytes); returns the length. */
size_t th_fmt_i64(char *buf, int64_t v);
size_t th_fmt_u64(char *buf, uint64_t v);

/* A JSON-RPC error body as pieces into out[TH_MAX_PIECES]: id is raw JSON
 * ("null" when unknown), message a complete JSON string token (quotes
 * included), data (ndata pieces, may be 0) raw JSON. codebuf (>= 24 bytes)
 * holds the formatted code and must outlive the pieces. Returns the count. */
size_t th_rpc_error_body(th_piece *out, th_piece id, char *codebuf, int64_t code,
                         th_piece message, const th_piece *data, size_t ndata);

/* Which members the transport stamps on a result (stateless wire). */
#define TH_STAMP_RESULT_TYPE 1u /* "resultType":"complete" */
#define TH_STAMP_CACHE 2u       /* "ttlMs":0,"cacheScope":"private" (list results) */
/* The result's type, when it is not "complete" (mcpg_call_outcome.result_type). */
#define TH_STAMP_INPUT_REQUIRED 4u /* "resultType":"input_required" */
#define TH_STAMP_TASK 8u           /* "resultType":"task" */

/* A JSON-RPC result body as pieces: the backend's result object with the
 * stamped members inserted before its final '}' (members it already has are
 * not added twice). With stamp and a server_info (a JSON object, or
 * {NULL,0}), _meta["io.modelcontextprotocol/serverInfo"] is that object,
 * whatever the result carried there (a proxied server's own). A result that
 * is not an object is passed unchanged. Returns the count. */
size_t th_rpc_result_body(const mcpg_host *h, th_piece *out, th_piece id, th_piece result,
                          unsigned stamp, th_piece server_info);

/* The JSON-RPC error code the 2026-07-28 wire sends for one the pipeline
 * answered with: that revision lets no implementation send codes of the
 * legacy -32000..-32019 range, so the stages' refusals (-32001
 * unauthenticated, -32003 forbidden) go out as -32600 Invalid Request, the
 * HTTP status (401, 403) and WWW-Authenticate saying why. Others as they are. */
int64_t th_stateless_code(int64_t code);

#endif
