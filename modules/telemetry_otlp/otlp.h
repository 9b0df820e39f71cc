/* telemetry_otlp: what its three files share.
 *   telemetry_otlp.c  the module: config, the bounded span queue, metrics
 *   otlp_encode.c     a span as OTLP protobuf or OTLP/JSON, and the request
 *                     around a batch of them
 *   otlp_http.c       the exporter's thread: batches, POSTs, retries */
#ifndef TELEMETRY_OTLP_H
#define TELEMETRY_OTLP_H

#include <mcpg/sdk.h>

#include <pthread.h>
#include <stdbool.h>

typedef struct otlp_cfg {
    const char *endpoint;
    const char *encoding;
    const char *service_name;
    double sample_ratio;
    int include_enduser;
    int64_t queue_spans, batch_spans, flush_ms, max_attempts, backoff_ms, timeout_ms;
} otlp_cfg;

/* An endpoint split: http only (https is not spoken yet). */
typedef struct otlp_url {
    char host[256], port[8], path[512];
} otlp_url;

/* "http://host[:port]/path" into u: 0, or -1 with why in err. */
int otlp_url_parse(const char *s, otlp_url *u, char *err, size_t errcap);

/* One span, encoded for the queue: a Span message's bytes (protobuf) or a
 * span object's text (json). */
typedef struct otlp_blob {
    size_t len;
    char data[];
} otlp_blob;

enum { OTLP_DROP_QUEUE_FULL, OTLP_DROP_EXPORT_FAILED, OTLP_DROP_REASONS };

typedef struct otlp {
    const mcpg_host *host;
    mcpg_instance *self;
    const otlp_cfg *cfg;
    bool json;
    otlp_url url;
    mcpg_metric *exported, *dropped; /* dropped: one series per OTLP_DROP_* */
    pthread_t thread;
    bool thread_started;
    int conn;                       /* the exporter thread's connection to the collector, or -1 */
    /* ---- under mu ---- */
    pthread_mutex_t mu;
    pthread_cond_t wake;
    otlp_blob **ring;               /* queue_spans slots */
    size_t head, count;
    bool stopping;
} otlp;

/* otlp_encode.c */
otlp_blob *otlp_encode_span(const mcpg_span *s, bool json);
/* The request for n queued spans into out: 0 or MCPG_ENOMEM. */
int otlp_encode_request(const otlp *o, otlp_blob *const *spans, size_t n, mcpg_buf *out);

/* otlp_http.c */
void *otlp_thread(void *arg);
void otlp_count_dropped(otlp *o, int reason, size_t n);
/* Free every queued span: how many there were. Under mu (or alone). */
size_t otlp_queue_clear(otlp *o);

#endif
