/* transport_http: the MCP spec's HTTP security rules on /mcp (the Streamable
 * HTTP transport's security warning on Origin validation): Host and Origin against allow-lists, so a
 * page that rebinds a DNS name to a local gateway cannot reach it.
 *
 * Pure: no I/O. The lists are parsed once at create from the config's JSON
 * text and are read-only afterwards, so every loop reads them unlocked. */
#ifndef TH_HYGIENE_H
#define TH_HYGIENE_H

#include <mcpg/abi.h>
#include <stddef.h>

typedef struct th_names {
    int set;       /* the key was configured (else the default applies) */
    int any;       /* "*" is in the list */
    size_t n;
    char **v;      /* lower-cased, NUL-terminated */
} th_names;

/* Parse a JSON array of strings (the config's text, NULL = not set). 0,
 * MCPG_EINVAL (not an array of non-empty strings), MCPG_ENOMEM. */
int th_names_parse(const mcpg_host *h, const char *json, th_names *out);
void th_names_free(const mcpg_host *h, th_names *names);

/* Host header value (host[:port]). Configured: an entry equal to the whole
 * value, or to its host part (any port), or "*". Not configured: on a
 * loopback connection only localhost, 127.0.0.1 and [::1] (any port);
 * elsewhere any host. */
int th_host_allowed(const th_names *allowed, int loopback, const char *v, size_t n);

/* Origin header value (scheme://host[:port], or "null"). Configured: an
 * entry equal to it (case-insensitive), or "*". Not configured: on a
 * loopback connection only http(s) origins on a loopback name; elsewhere
 * none (allowed_origins must name them). A request without Origin is not
 * checked (not a browser). */
int th_origin_allowed(const th_names *allowed, int loopback, const char *v, size_t n);

#endif
