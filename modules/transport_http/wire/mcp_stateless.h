/* transport_http: the 2026-07-28 stateless wire's checks on one POST /mcp.
 *
 * Pure: no I/O and no allocation. The body is read in place with the host's
 * JSON scanner; every span in the verdict points into the body (or into
 * name_buf, or at static text) and is valid as long as they are. */
#ifndef TH_MCP_STATELESS_H
#define TH_MCP_STATELESS_H

#include "http/header.h"
#include "http/response.h"


typedef struct th_mcp_headers {
    th_hval content_type, accept, protocol_version, method, name;
} th_mcp_headers;

typedef enum th_mcp_action {
    TH_MCP_ERROR = 0,    /* answer the JSON-RPC error in the verdict */
    TH_MCP_ACCEPTED = 1, /* a notification: 202, empty body */
    TH_MCP_DISCOVER = 2, /* server/discover: the transport answers */
    TH_MCP_SUBMIT = 3,   /* hand the call to the kernel */
    TH_MCP_LISTEN = 4    /* subscriptions/listen: the transport keeps a stream */
} th_mcp_action;

typedef struct th_mcp_verdict {
    th_mcp_action action;
    int http_status;     /* for TH_MCP_ERROR */
    int64_t code;        /* JSON-RPC error code */
    th_piece message;    /* JSON string token, quotes included */
    th_piece data[3];    /* raw JSON of error.data, in pieces */
    size_t ndata;
    th_piece id;         /* raw JSON id, or "null" */
    uint32_t method;     /* mcpg_method (SUBMIT) */
    th_piece method_name;/* canonical method name (static, NUL-terminated) */
    unsigned stamp;      /* TH_STAMP_* for the result */
    th_piece name;       /* params.name, decoded (tools/call) */
    th_piece params;     /* raw params object, or {NULL,0} */
    th_piece args;       /* raw params.arguments object, or {NULL,0} */
    th_piece caps;       /* raw _meta clientCapabilities object */
    th_piece version;    /* the protocol version (static text) */
    th_piece listen;     /* LISTEN: raw params.notifications object, or {NULL,0} */
    int8_t log_level;    /* _meta logLevel (index in the levels), or TH_LOG_NONE */
    int legacy;          /* ERROR for want of the 2026 envelope: a legacy-wire request */
} th_mcp_verdict;

/* Logging levels, least to most severe (debug 0 ... emergency 7); -1 when
 * p is not one. TH_LOG_NONE: above every level (no notifications/message). */
#define TH_LOG_NONE 8
int th_log_level_of(const char *p, size_t n);

/* Check one request; fills *v. name_buf (TH_NAME_MAX bytes) receives
 * params.name when it must be decoded (it holds escapes). */
void th_mcp_check(const mcpg_host *h, const th_mcp_headers *hd, const char *body, size_t n,
                  char *name_buf, th_mcp_verdict *v);

/* Does params (raw object text, may be NULL) carry the 2026-07-28 _meta
 * protocol version? The wire a POST speaks is decided by it. */
int th_meta_has_version(const mcpg_host *h, const char *params, size_t n);

/* Header grammar helpers, exposed for the unit test. */
int th_accept_allows_json(const char *p, size_t n);
int th_accept_allows_sse(const char *p, size_t n);
int th_content_type_is_json(const char *p, size_t n);
/* Does header value hv equal the decoded JSON string s? Accepts the
 * "=?base64?...?=" form the spec allows for values that are not header-safe. */
int th_header_matches(const mcpg_host *h, const char *hv, size_t hn, const mcpg_json_span *s);

#endif
