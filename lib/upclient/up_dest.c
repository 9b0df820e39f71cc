/* upclient: where a request made on a client's behalf may go.
 *
 * A gateway that fetches a URL a client chose (a webhook callback) must not
 * become the client's way into what only the gateway can reach: itself,
 * the machine it runs on, the private network behind it. A destination is
 * judged by the address actually connected to, after resolution (a name
 * can point anywhere), and the upclient connects to the address it
 * resolved once, so what was judged is what is reached. */
#include "up_internal.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* One IPv4 address (host order): why it is not public, or NULL. */
static const char *v4_class(uint32_t a) {
    uint8_t b0 = (uint8_t)(a >> 24), b1 = (uint8_t)(a >> 16);
    if (a == 0) return "an unspecified address";
    if (b0 == 0) return "a reserved address (0.0.0.0/8)";
    if (b0 == 127) return "a loopback address";
    if (b0 == 10 || (b0 == 172 && (b1 & 0xf0) == 16) || (b0 == 192 && b1 == 168)) return "a private address";
    if (b0 == 100 && (b1 & 0xc0) == 64) return "a shared (carrier-grade NAT) address (100.64.0.0/10)";
    if (b0 == 169 && b1 == 254) return "a link-local address";
    if (b0 == 192 && b1 == 0 && (uint8_t)(a >> 8) == 0) return "a reserved address (192.0.0.0/24)";
    if (b0 == 198 && (b1 & 0xfe) == 18) return "a reserved address (198.18.0.0/15)";
    if (b0 >= 224 && b0 <= 239) return "a multicast address";
    if (b0 >= 240) return a == 0xffffffffu ? "the broadcast address" : "a reserved address (240.0.0.0/4)";
    return NULL;
}

static const char *v6_class(const struct in6_addr *a) {
    const uint8_t *b = a->s6_addr;
    static const uint8_t zero[16];
    if (!memcmp(b, zero, 16)) return "an unspecified address";
    if (!memcmp(b, zero, 15) && b[15] == 1) return "a loopback address";
    /* an IPv4 address inside IPv6: judged as that address */
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    static const uint8_t nat64[12] = {0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0};
    if (!memcmp(b, mapped, 12) || !memcmp(b, nat64, 12) || !memcmp(b, zero, 12)) {
        uint32_t v4 = (uint32_t)b[12] << 24 | (uint32_t)b[13] << 16 | (uint32_t)b[14] << 8 | b[15];
        return v4_class(v4);
    }
    if (b[0] == 0xff) return "a multicast address";
    if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80) return "a link-local address";
    if (b[0] == 0xfe && (b[1] & 0xc0) == 0xc0) return "a site-local address";
    if ((b[0] & 0xfe) == 0xfc) return "a unique-local address";
    if (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0x0d && b[3] == 0xb8) return "a documentation address";
    return NULL;
}

/* The address is one of this machine's own (any interface, up or not). */
static int is_own_address(const struct sockaddr *sa) {
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) != 0) return 0;
    int own = 0;
    for (struct ifaddrs *i = ifs; i && !own; i = i->ifa_next) {
        const struct sockaddr *x = i->ifa_addr;
        if (!x || x->sa_family != sa->sa_family) continue;
        if (x->sa_family == AF_INET)
            own = ((const struct sockaddr_in *)x)->sin_addr.s_addr ==
                  ((const struct sockaddr_in *)sa)->sin_addr.s_addr;
        else if (x->sa_family == AF_INET6)
            own = !memcmp(&((const struct sockaddr_in6 *)x)->sin6_addr,
                          &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
    }
    freeifaddrs(ifs);
    return own;
}

const char *up_addr_not_public(const struct sockaddr *sa) {
    const char *why = NULL;
    if (sa->sa_family == AF_INET)
        why = v4_class(ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr));
    else if (sa->sa_family == AF_INET6)
        why = v6_class(&((const struct sockaddr_in6 *)sa)->sin6_addr);
    else
        return "not an IP address";
    if (!why && is_own_address(sa)) why = "an address of this machine";
    return why;
}

const struct sockaddr *up_target_addr(const up_target *t) {
    return (const struct sockaddr *)&t->addr;
}

void up_addr_text(const struct sockaddr *sa, char *out, size_t cap) {
    char ip[INET6_ADDRSTRLEN] = "?";
    if (sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, ip, sizeof ip);
    else if (sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, ip, sizeof ip);
    snprintf(out, cap, "%s", ip);
}

/* "a.b.c.d", "a.b.c.d/n", "v6", "v6/n": 1 when sa is inside; 0 not; -1 when
 * the text is not a CIDR block. */
int up_addr_in_cidr(const struct sockaddr *sa, const char *cidr) {
    char ip[INET6_ADDRSTRLEN + 1];
    const char *slash = strchr(cidr, '/');
    size_t n = slash ? (size_t)(slash - cidr) : strlen(cidr);
    if (n >= sizeof ip) return -1;
    memcpy(ip, cidr, n);
    ip[n] = '\0';
    uint8_t net[16], addr[16];
    int fam = inet_pton(AF_INET, ip, net) == 1 ? AF_INET : inet_pton(AF_INET6, ip, net) == 1 ? AF_INET6 : 0;
    if (!fam) return -1;
    int bits = fam == AF_INET ? 32 : 128, len = bits;
    if (slash) {
        char *end = NULL;
        long v = strtol(slash + 1, &end, 10);
        if (!slash[1] || *end || v < 0 || v > bits) return -1;
        len = (int)v;
    }
    if (sa->sa_family != fam) return 0;
    if (fam == AF_INET) memcpy(addr, &((const struct sockaddr_in *)sa)->sin_addr, 4);
    else memcpy(addr, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
    for (int i = 0; i < len; i++) {
        uint8_t m = (uint8_t)(0x80 >> (i % 8));
        if ((addr[i / 8] & m) != (net[i / 8] & m)) return 0;
    }
    return 1;
}

/* An allow entry names host (a name, compared without case) or holds the
 * address (a CIDR block). */
static int allowed(const char *host, const struct sockaddr *sa, const char *const *allow, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (host && !strcasecmp(allow[i], host)) return 1;
        if (sa && up_addr_in_cidr(sa, allow[i]) == 1) return 1;
    }
    return 0;
}

int up_dest_check_url(const char *url, const char *const *allow, size_t n_allow, char *err,
                      size_t errcap) {
    up_url u;
    if (up__url_parse(url, &u, err, errcap)) return -1;
    if (allowed(u.host, NULL, allow, n_allow)) return 0;
    size_t hl = strlen(u.host);
    if (!strcasecmp(u.host, "localhost") ||
        (hl > 10 && !strcasecmp(u.host + hl - 10, ".localhost"))) {
        snprintf(err, errcap, "%.200s: names this machine (%s)", url, u.host);
        return -1;
    }
    struct sockaddr_storage ss = {0};
    struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, u.host, &v4->sin_addr) == 1) ss.ss_family = AF_INET;
    else if (inet_pton(AF_INET6, u.host, &v6->sin6_addr) == 1) ss.ss_family = AF_INET6;
    else return 0; /* a name: judged once it is resolved (up_dest_check_target) */
    return up_dest_check_addr(url, (const struct sockaddr *)&ss, allow, n_allow, err, errcap);
}

int up_dest_check_addr(const char *url, const struct sockaddr *sa, const char *const *allow,
                       size_t n_allow, char *err, size_t errcap) {
    if (allowed(NULL, sa, allow, n_allow)) return 0;
    const char *why = up_addr_not_public(sa);
    if (!why) return 0;
    char ip[64];
    up_addr_text(sa, ip, sizeof ip);
    snprintf(err, errcap, "%.200s: goes to %s, %s", url, ip, why);
    return -1;
}

int up_dest_check_target(const up_target *t, const char *url, const char *const *allow,
                         size_t n_allow, char *err, size_t errcap) {
    up_url u;
    if (up__url_parse(url, &u, err, errcap)) return -1;
    if (allowed(u.host, NULL, allow, n_allow)) return 0;
    return up_dest_check_addr(url, up_target_addr(t), allow, n_allow, err, errcap);
}
