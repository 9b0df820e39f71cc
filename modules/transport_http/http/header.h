/* transport_http: what the http layer hands the wires about a request's
 * headers, and the room a request keeps for the name they decode. Pure
 * types: the wires' checks compile with this alone (tests, fuzzers). */
#ifndef TH_HEADER_H
#define TH_HEADER_H

#include <stddef.h>

/* One request header as the parser saw it (first occurrence). */
typedef struct th_hval {
    const char *p;
    size_t n;
    int present;
    int dup; /* the header occurred more than once */
} th_hval;

/* A request's name buffer (th_req.name_buf): tool names longer than this
 * (decoded) are refused with -32602. */
#define TH_NAME_MAX 256

/* A virtual server's name as a request keeps it (th_req.server): the
 * manifest's servers[].name is at most this long. */
#define TH_SERVER_NAME_MAX 64

#endif
