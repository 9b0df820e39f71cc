/* mcpg-events-load: MCP Events pushed to events/stream readers, fed by
 * producers posting signed webhooks (docs/events.md, bench/README.md).
 *
 * It reuses mcpg-load's pieces (bench/load): the HTTP framing (resp.c, and
 * load_chunks_take for a chunked body that stays open), the SSE event
 * splitter (sse.c's load_sse_next), the JSON member scanner (rpc.c's
 * load_json_member) and the latency histogram (hist.c). Here:
 *   pure.c   what can be tested without sockets: the Standard Webhooks
 *            signature, the post and stream requests, a stream message's
 *            reading, the per-producer sequence judge
 *   main.c   options, the streams, the producers, phases, the report
 */
#ifndef MCPG_EVENTS_LOAD_H
#define MCPG_EVENTS_LOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../load/load.h"

/* ---- Standard Webhooks ---- */
#define EV_KEY_MAX 64u  /* the secret's key: 16-64 bytes (docs/events.md) */
#define EV_SIG_MAX 64u  /* "v1," + base64 of 32 bytes (44) */

/* The key of "whsec_<base64>": its length, or -1 when the text is not that. */
int ev_secret_key(const char *secret, unsigned char key[EV_KEY_MAX]);
/* "v1," + base64(HMAC-SHA256(key, id "." ts "." body)) into out (EV_SIG_MAX
 * bytes, NUL-terminated); returns its length. */
size_t ev_sign(const unsigned char *key, size_t keylen, const char *id, size_t idlen, const char *ts, size_t tslen,
               const char *body, size_t blen, char *out);

/* ---- requests ---- */
#define EV_POST_MAX 2048u
/* POST /webhooks/events/{source} for event n of producer p, sent at t_us (wall
 * clock, µs) and signed at ts_s (seconds): returns its length (0 when over
 * EV_POST_MAX). The event id (and webhook-id) is "p<p>-<n>-<run>": run tells
 * one run's events from another's, which the gateway would drop as copies
 * (an id is remembered for dedup_ms). The body is
 * {"name":type,"id":"p<p>-<n>-<run>","data":{"p":p,"n":n,"t":t_us}}. */
size_t ev_post_format(char *dst, const char *host_port, const char *source, const char *type, const char *run,
                      const unsigned char *key, size_t keylen, unsigned p, uint64_t n, uint64_t t_us, uint64_t ts_s);
#define EV_STREAM_REQ_MAX 2048u
/* POST /mcp, stateless wire, events/stream {name, cursor} (cursor: raw JSON,
 * NULL for null). Returns its length (0 when over EV_STREAM_REQ_MAX). */
size_t ev_stream_format(char *dst, const char *host_port, const char *type, uint64_t id, const char *cursor,
                        size_t cursor_len);

/* ---- what a stream carries ---- */
typedef enum { EV_MSG_OTHER, EV_MSG_ACTIVE, EV_MSG_EVENT, EV_MSG_HEARTBEAT, EV_MSG_ERROR, EV_MSG_BAD } ev_msg_kind;
typedef struct {
    ev_msg_kind kind;
    const char *cursor; /* params.cursor's raw JSON (a string keeps its quotes); NULL when absent */
    size_t cursor_len;
    bool has_pn;        /* an event whose data has our p, n and t */
    int64_t p, n, t;
    const char *name;   /* params.name (without quotes), events only */
    size_t name_len;
} ev_msg;
/* Read one SSE event's data (a JSON-RPC message). */
void ev_msg_read(const char *json, size_t len, ev_msg *m);

/* ---- the per-producer sequence judge: one per (stream, producer) ----
 * Event n of a producer must come after n - 1, exactly once. */
typedef struct {
    int64_t last; /* the highest n heard; -1 before the first */
} ev_seq;
typedef enum {
    EV_SEQ_NEXT, /* last + 1 */
    EV_SEQ_GAP,  /* past last + 1: the ones between were lost (counted in *lost) */
    EV_SEQ_DUP,  /* == last */
    EV_SEQ_BACK, /* below last: reordered (or a late copy) */
} ev_seq_verdict;
void ev_seq_init(ev_seq *s);
ev_seq_verdict ev_seq_judge(ev_seq *s, int64_t n, uint64_t *lost);

#endif
