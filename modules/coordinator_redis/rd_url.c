/* coordinator_redis: the url (see rd_url.h). */
#include "rd_url.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAIL(...) (snprintf(why, why_cap, __VA_ARGS__), -1)

/* A decimal number in [lo, hi] spanning exactly s[0..n). */
static int parse_bounded(const char *s, size_t n, long lo, long hi, long *out) {
    if (n == 0 || n > 10) return -1;
    long v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        v = v * 10 + (s[i] - '0');
    }
    if (v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

static int parse_unix(const char *rest, rd_url *out, char *why, size_t why_cap) {
    const char *q = strchr(rest, '?');
    size_t plen = q ? (size_t)(q - rest) : strlen(rest);
    if (plen == 0 || rest[0] != '/') return FAIL("unix:// needs an absolute path (unix:///run/redis.sock)");
    if (plen >= sizeof out->path) return FAIL("the socket path is longer than %zu bytes", sizeof out->path - 1);
    memcpy(out->path, rest, plen);
    out->path[plen] = '\0';
    out->is_unix = 1;
    if (!q) return 0;
    long db;
    if (strncmp(q, "?db=", 4) != 0 || parse_bounded(q + 4, strlen(q + 4), 0, 65535, &db))
        return FAIL("a unix url takes only ?db=N after the path");
    out->db = (int)db;
    return 0;
}

/* userinfo before '@': "[user]:password" (the user is not sent: AUTH with
 * the password alone, which is what Redis before ACLs knows). */
static int take_password(const char *s, size_t n, rd_url *out, char *why, size_t why_cap) {
    const char *colon = memchr(s, ':', n);
    if (!colon) return FAIL("the url's credentials must be \":password@\"");
    size_t plen = n - (size_t)(colon + 1 - s);
    if (plen >= sizeof out->password) return FAIL("the url's password is too long");
    memcpy(out->password, colon + 1, plen);
    out->password[plen] = '\0';
    return 0;
}

static int take_host(const char *s, size_t n, rd_url *out, char *why, size_t why_cap) {
    const char *port = NULL;
    char host[64];
    size_t hlen;
    if (n && s[0] == '[') {
        const char *close = memchr(s, ']', n);
        if (!close) return FAIL("an IPv6 address needs its closing ']'");
        hlen = (size_t)(close - s - 1);
        if (hlen >= sizeof host) return FAIL("the address is too long");
        memcpy(host, s + 1, hlen);
        if (close + 1 < s + n) {
            if (close[1] != ':') return FAIL("expected ':' and a port after ']'");
            port = close + 2;
        }
    } else {
        const char *colon = memchr(s, ':', n);
        hlen = colon ? (size_t)(colon - s) : n;
        if (hlen >= sizeof host) return FAIL("the host is too long");
        memcpy(host, s, hlen);
        port = colon ? colon + 1 : NULL;
    }
    host[hlen] = '\0';
    unsigned char bin[16];
    if (inet_pton(AF_INET, host, bin) != 1 && inet_pton(AF_INET6, host, bin) != 1)
        return FAIL("host \"%s\" is not an IP address: give one (e.g. 127.0.0.1), since "
                    "hiredis 0.14.1 would resolve a name with a blocking call on the loop",
                    host);
    memcpy(out->ip, host, hlen + 1);
    out->port = 6379;
    long p;
    if (port && parse_bounded(port, (size_t)(s + n - port), 1, 65535, &p))
        return FAIL("the port must be a number from 1 to 65535");
    if (port) out->port = (int)p;
    return 0;
}

static int parse_tcp(const char *rest, rd_url *out, char *why, size_t why_cap) {
    const char *slash = strchr(rest, '/');
    size_t alen = slash ? (size_t)(slash - rest) : strlen(rest);
    const char *at = memchr(rest, '@', alen);
    if (at && take_password(rest, (size_t)(at - rest), out, why, why_cap)) return -1;
    const char *host = at ? at + 1 : rest;
    if (take_host(host, (size_t)(rest + alen - host), out, why, why_cap)) return -1;
    long db = 0;
    if (slash && slash[1] && parse_bounded(slash + 1, strlen(slash + 1), 0, 65535, &db))
        return FAIL("the path must be a database number (redis://IP:PORT/0)");
    out->db = (int)db;
    return 0;
}

int rd_url_parse(const char *url, rd_url *out, char *why, size_t why_cap) {
    memset(out, 0, sizeof *out);
    if (!url || !*url) return FAIL("is empty");
    if (strncmp(url, "rediss://", 9) == 0)
        return FAIL("rediss:// (TLS) is not available: hiredis 0.14.1, the version Debian 12 "
                    "ships, has no TLS; reach Redis on loopback, a unix socket or a tunnel");
    if (strncmp(url, "unix://", 7) == 0) return parse_unix(url + 7, out, why, why_cap);
    if (strncmp(url, "redis://", 8) == 0) return parse_tcp(url + 8, out, why, why_cap);
    return FAIL("must start with redis:// or unix://");
}
