/* backend_http: the instance's upstreams (one per distinct scheme://host:port
 * of its tools, resolved once at create) and, per loop, a keep-alive pool
 * of connections to each. */
#ifndef HTTP_UPSTREAM_H
#define HTTP_UPSTREAM_H

#include <upclient.h>

#include "http_config.h"

#define HTTP_MAX_CONNS_DEFAULT 64
#define HTTP_MAX_CONNS_MAX 4096
#define HTTP_IDLE_MAX 8      /* idle connections kept per upstream and loop */
#define HTTP_QUEUE_MAX 1024  /* calls waiting for a connection, per upstream and loop */

typedef struct http_tls_cfg {
    int insecure;
    const char *ca_file, *cert_file, *key_file; /* NULL: unset */
} http_tls_cfg;

typedef struct http_upstreams http_upstreams;

/* validate(): the TLS keys' files readable and consistent; problems with
 * the keys' names. */
void http_tls_check(mcpg_config_problems *c, const http_tls_cfg *tls);

/* create() (off the loops): resolve each tool's origin, build the TLS
 * contexts, set each tool's upstream index. NULL with the problem logged
 * under the tool's url. */
http_upstreams *http_upstreams_new(mcpg_config_problems *c, http_tool_set *set,
                                   const http_tls_cfg *tls, unsigned max_conns);
/* On loop's thread: that loop's pool for upstream i (made on first use);
 * NULL when out of memory. */
up_pool *http_upstreams_pool(http_upstreams *u, void *loop, size_t i);
const char *http_upstream_authority(const http_upstreams *u, size_t i);
/* On loop's thread: close that loop's pools (calls in flight end). */
void http_upstreams_worker_stop(http_upstreams *u, void *loop);
/* Once no loop runs. */
void http_upstreams_free(http_upstreams *u);

#endif
