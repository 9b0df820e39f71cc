/* Where coordinator_redis connects: its url parsed once, at validate and at
 * create, by the same code.
 *
 *   redis://[[user]:password@]IP[:PORT][/DB]   (IPv4, or IPv6 in brackets)
 *   unix:///path/to/redis.sock[?db=N]
 *
 * A host name is refused: hiredis 0.14.1 resolves names with a blocking
 * getaddrinfo on the calling thread, which would be a loop thread here.
 * rediss:// is refused: hiredis 0.14.1 has no TLS. */
#ifndef RD_URL_H
#define RD_URL_H

#include <stddef.h>

#define RD_PATH_MAX 108 /* sun_path */
#define RD_SECRET_MAX 512

typedef struct rd_url {
    int is_unix;
    char ip[64];
    int port;
    char path[RD_PATH_MAX];
    int db;
    char password[RD_SECRET_MAX]; /* from the url; empty when none */
} rd_url;

/* 0, or -1 with why (a sentence, NUL-terminated) filled. */
int rd_url_parse(const char *url, rd_url *out, char *why, size_t why_cap);

#endif
