/* The coordinator contract (abi/mcpg/kinds.h, mcpg_coordinator_ops) as
 * checks any coordinator module must pass through the SDK's fake host.
 * Written store-neutral, so every coordinator's test can run the same
 * checks on an instance it loaded: the store-specific tests (a server
 * killed, replication, sweeps) stay in each module's own test.
 *
 * Each check takes the instance's state (mcpg_fakehost_state) and the
 * context; it asserts with MCPG_CHECK and leaves its keys behind (use a
 * fresh instance or bucket per run). */
#ifndef COORD_CONTRACT_H
#define COORD_CONTRACT_H

#include <mcpg/check.h>
#include <mcpg/fakehost.h>

typedef struct coord_ctx {
    mcpg_fakehost *fh;
    const mcpg_coordinator_ops *ops;
    mcpg_worker *w;
    int answer_ms;  /* how long one answer may take */
    int ttl_ms;     /* a TTL that expires within a check; expiry is waited for at 2x */
    int remote;     /* 1: publish cannot say how many subscribers it reached */
} coord_ctx;

typedef struct coord_answer {
    int calls, status, has_data, each;
    char data[256];
    size_t len;
    uint64_t revision;
    int64_t number;
    char keys[512];
} coord_answer;

void coord_on_answer(void *arg, int status, const mcpg_coord_value *v);
int coord_answered(void *arg);
/* The op returned rc: no callback yet, then exactly one within answer_ms. */
coord_answer *coord_settle(const coord_ctx *x, int rc, coord_answer *a, const char *what);

coord_answer coord_get(const coord_ctx *x, void *st, const char *key);
coord_answer coord_put(const coord_ctx *x, void *st, const char *key, const char *val, uint64_t ttl);
coord_answer coord_incr(const coord_ctx *x, void *st, const char *key, int64_t d, uint64_t ttl);
coord_answer coord_pia(const coord_ctx *x, void *st, const char *key, const char *val, uint64_t ttl);
coord_answer coord_cas(const coord_ctx *x, void *st, const char *key, uint64_t rev, const char *val);
coord_answer coord_del(const coord_ctx *x, void *st, const char *key);
coord_answer coord_rate(const coord_ctx *x, void *st, const char *key, int64_t now_us,
                        int64_t interval_us, int64_t burst_us);

void contract_kv(const coord_ctx *x, void *st);
void contract_refused(const coord_ctx *x, void *st);
void contract_off_loop(const coord_ctx *x, void *st);
void contract_ttl(const coord_ctx *x, void *st);
void contract_put_if_absent_race(const coord_ctx *x, void *st);
void contract_rate(const coord_ctx *x, void *st);
void contract_pubsub(const coord_ctx *x, void *st);
void contract_order(const coord_ctx *x, void *st);

#endif
