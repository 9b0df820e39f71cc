/* upclient: URLs, targets (resolved once, off the loops) and error names. */
#define _GNU_SOURCE
#include "up_internal.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int up__is_ip(const char *host) {
    unsigned char buf[sizeof(struct in6_addr)];
    return inet_pton(AF_INET, host, buf) == 1 || inet_pton(AF_INET6, host, buf) == 1;
}

static int bad(char *err, size_t cap, const char *url, const char *why) {
    snprintf(err, cap, "%.200s: %s", url, why);
    return -1;
}

/* host[:port] of an authority; an IPv6 literal in brackets. */
static int parse_authority(const char *url, const char *a, size_t n, up_url *u, char *err,
                           size_t cap) {
    const char *port = NULL;
    if (n && a[0] == '[') {
        const char *close = memchr(a, ']', n);
        if (!close || close == a + 1) return bad(err, cap, url, "bad IPv6 address");
        if ((size_t)(close - a - 1) > UP_HOST_MAX) return bad(err, cap, url, "host too long");
        memcpy(u->host, a + 1, (size_t)(close - a - 1));
        u->host[close - a - 1] = '\0';
        if (close + 1 < a + n && close[1] != ':') return bad(err, cap, url, "bad IPv6 address");
        if (close + 1 < a + n) port = close + 2;
    } else {
        const char *colon = memchr(a, ':', n);
        size_t hl = colon ? (size_t)(colon - a) : n;
        if (hl == 0) return bad(err, cap, url, "no host");
        if (hl > UP_HOST_MAX) return bad(err, cap, url, "host too long");
        memcpy(u->host, a, hl);
        u->host[hl] = '\0';
        if (colon) port = colon + 1;
    }
    strcpy(u->port, u->tls ? "443" : "80");
    if (port) {
        size_t pl = (size_t)(a + n - port);
        long v = pl ? strtol(port, NULL, 10) : 0;
        if (pl == 0 || pl > 5 || strspn(port, "0123456789") < pl || v < 1 || v > 65535)
            return bad(err, cap, url, "bad port");
        memcpy(u->port, port, pl);
        u->port[pl] = '\0';
    }
    return 0;
}

int up__url_parse(const char *url, up_url *u, char *err, size_t cap) {
    memset(u, 0, sizeof *u);
    const char *a;
    if (strncasecmp(url, "http://", 7) == 0) {
        a = url + 7;
    } else if (strncasecmp(url, "https://", 8) == 0) {
        a = url + 8;
        u->tls = 1;
    } else {
        return bad(err, cap, url, "expected an http:// or https:// URL");
    }
    size_t n = strcspn(a, "/?#");
    const char *at = memchr(a, '@', n);
    if (at) { /* the message shows the URL without its user information: a password */
        char shown[512];
        snprintf(shown, sizeof shown, "%.*s[REDACTED]%.400s", (int)(a - url), url, at);
        return bad(err, cap, shown, "user information is not supported");
    }
    if (strpbrk(url, " \t\r\n")) return bad(err, cap, url, "white space in the URL");
    if (a[n] == '#' || strchr(a + n, '#')) return bad(err, cap, url, "a fragment has no place here");
    if (parse_authority(url, a, n, u, err, cap)) return -1;
    u->authority = a;
    u->authority_len = n;
    u->path = a + n;
    return 0;
}

int up_url_check(const char *url, char *err, size_t errcap) {
    up_url u;
    return up__url_parse(url, &u, err, errcap);
}

static int resolve(up_target *t, const up_url *u, const char *url, char *err, size_t cap) {
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
    int rc = getaddrinfo(u->host, u->port, &hints, &ai);
    if (rc != 0 || !ai) {
        snprintf(err, cap, "%.200s: cannot resolve host \"%s\": %s", url, u->host,
                 rc ? gai_strerror(rc) : "no address");
        return -1;
    }
    memcpy(&t->addr, ai->ai_addr, ai->ai_addrlen);
    freeaddrinfo(ai);
    return 0;
}

up_target *up_target_new(const char *url, const up_tls_opts *tls, uint64_t connect_timeout_ms,
                         char *err, size_t errcap) {
    up_url u;
    if (up__url_parse(url, &u, err, errcap)) return NULL;
    up_target *t = calloc(1, sizeof *t);
    if (!t) {
        bad(err, errcap, url, "out of memory");
        return NULL;
    }
    t->tls = u.tls;
    t->connect_timeout_ms = connect_timeout_ms;
    t->authority = strndup(u.authority, u.authority_len);
    t->path = *u.path == '/' ? strdup(u.path) : *u.path ? NULL : strdup("/");
    if (!t->path && *u.path == '?' && (t->path = malloc(strlen(u.path) + 2)))
        sprintf(t->path, "/%s", u.path);
    const char *name = tls && tls->server_name ? tls->server_name : u.host;
    t->name = strdup(name);
    t->name_is_ip = up__is_ip(name);
    t->insecure = tls && tls->insecure;
    if (!t->authority || !t->path || !t->name) {
        bad(err, errcap, url, "out of memory");
    } else if (resolve(t, &u, url, err, errcap) == 0 &&
               (!t->tls || (t->ctx = up__tls_ctx_new(url, tls, err, errcap)))) {
        return t;
    }
    up_target_free(t);
    return NULL;
}

void up_target_free(up_target *t) {
    if (!t) return;
    SSL_CTX_free(t->ctx);
    free(t->authority);
    free(t->path);
    free(t->name);
    free(t);
}

const char *up_target_path(const up_target *t) { return t->path; }
const char *up_target_authority(const up_target *t) { return t->authority; }
int up_target_is_tls(const up_target *t) { return t->tls; }

const char *up_strerror(int err) {
    switch (err) {
    case 0: return "success";
    case UP_EFULL: return "too many requests waiting for a connection";
    case UP_ETLS: return "TLS handshake or certificate verification failed";
    case UP_EPROTO: return "the upstream's answer is not valid HTTP/1.1";
    case UP_ECLOSED: return "the upstream closed the connection before the answer ended";
    case UP_ECANCEL: return "request cancelled";
    default: return uv_strerror(err);
    }
}

const up_header *up_header_find(const up_header *h, size_t n, const char *name) {
    size_t len = strlen(name);
    for (size_t i = 0; i < n; i++)
        if (h[i].name_len == len && strncasecmp(h[i].name, name, len) == 0) return &h[i];
    return NULL;
}
