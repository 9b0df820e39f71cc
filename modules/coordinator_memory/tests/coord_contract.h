/* The coordinator contract (abi/mcpg/kinds.h, mcpg_coordinator_ops), checked
 * through a loaded instance in the SDK's fake host: the same checks for
 * coordinator_memory and coordinator_redis, so both are held to one
 * contract. Each store's own test adds what only it has (bounds, sweeps,
 * reconnects).
 *
 * Every answer must come on a later turn of the loop, never inside the op:
 * each check looks at the callback's record right after the op returned,
 * then turns the loop until it runs, once. */
#ifndef COORD_CONTRACT_H
#define COORD_CONTRACT_H

#include <mcpg/check.h>
#include <mcpg/fakehost.h>

#include <stddef.h>
#include <stdint.h>

typedef struct contract {
    mcpg_fakehost *fh;
    const mcpg_coordinator_ops *ops;
    mcpg_worker *w;
    void *st; /* the instance's state */
} contract;

typedef struct answer {
    int calls;
    int status;
    char data[256];
    size_t len;
    int has_data;
    uint64_t revision;
    int64_t number;
    int each; /* scan_prefix: keys reported, as "key@1" (revision > 0) */
    char keys[512];
} answer;

/* Messages as they arrive: their data appended to seq, in order. */
typedef struct contract_inbox {
    int n;
    char last[64];
    char seq[2048];
    const contract *c;
    mcpg_coord_sub *self_sub; /* unsubscribe from inside the callback after `stop_at` */
    int stop_at;
} contract_inbox;

/* dlopen a coordinator module file and check its descriptor; exits the test
 * when it cannot. *dl is for dlclose. */
const mcpg_module *contract_open(const char *so_path, void **dl);

/* An instance of mod named "coord" with config (NULL: {}); exits the test
 * when it does not load. */
mcpg_instance *contract_load(mcpg_fakehost *fh, const mcpg_module *mod, const char *config);

void contract_on_answer(void *arg, int status, const mcpg_coord_value *v);
void contract_on_msg(void *arg, const char *subject, const char *data, size_t len);
/* The op returned rc; no callback yet; then exactly one, within 5 s. */
answer *contract_settle(const contract *c, int rc, answer *a, const char *what);

answer contract_get(const contract *c, const char *key);
answer contract_put(const contract *c, const char *key, const char *val, uint64_t ttl);
answer contract_incr(const contract *c, const char *key, int64_t d, uint64_t ttl);
answer contract_pia(const contract *c, const char *key, const char *val, uint64_t ttl);
answer contract_del(const contract *c, const char *key);

/* Each part alone; contract_all runs them all. Keys and subjects start
 * with "ct." / "ct/": a store shared with other tests keeps them apart. */
void contract_kv(const contract *c);
void contract_scan(const contract *c);
void contract_refusals(const contract *c);
void contract_off_loop(const contract *c);
void contract_ttl(const contract *c);
void contract_put_if_absent_race(const contract *c);
void contract_rate_take(const contract *c);
void contract_pubsub(const contract *c);
void contract_order(const contract *c); /* 200 mixed ops answered in their order */
void contract_all(const contract *c);

#endif
