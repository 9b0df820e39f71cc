/* limits: concurrency caps, rate limits and budgets (MCPG_KIND_LIMITS).
 *
 * acquire() runs for tools/call only (the kernel's rule). Each configured
 * limit whose globs match the call is taken in order; the first refusal
 * gives back what the call already took and answers DENY with JSON-RPC
 * -32029, HTTP 429 and Retry-After. A `local` limit is one CAS step on a
 * counter shared by every loop (lim_math.h, lim_table.h); a `global` one is
 * one atomic coordinator op (put_if_absent / rate_take / incr), answered
 * asynchronously: acquire returns PENDING and the op's callback resumes it.
 * Refusals of global limits are remembered on the local counter (a cap for
 * 20 ms, a rate until a call fits, a budget up to 1 s within its window),
 * so a refused caller costs no coordinator op while the answer holds. */
#include <mcpg/sdk.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lim_math.h"
#include "lim_rules.h"
#include "lim_table.h"

#define LIM_RPC_LIMITED (-32029) /* implementation-defined server-error range */
#define LIM_KEY_MAX 1024
#define LIM_CAP_MEMORY_US 20000
#define LIM_BUDGET_MEMORY_US 1000000
#define LIM_FOREVER_RETRY_S 3600

typedef struct lim_cfg {
    const char *limits;
    int64_t max_keys;
    int64_t slot_ttl_ms;
    const char *on_coordinator_error;
} lim_cfg;

static const mcpg_config_field lim_fields[] = {
    MCPG_CFG_JSON_FIELD(lim_cfg, limits, "limits", NULL,
                        "array of {name, match {tools, principals, tenants}, key [tool, "
                        "principal, tenant, session], scope local|global, and one of "
                        "concurrency: N, rate {per_minute|per_second, burst}, budget {calls, "
                        "window_s}}"),
    MCPG_CFG_INT_FIELD(lim_cfg, max_keys, "max_keys", "65536", 16, 16777216,
                       "counters kept (limit x key); a call needing one more is refused (503)"),
    MCPG_CFG_INT_FIELD(lim_cfg, slot_ttl_ms, "slot_ttl_ms", "300000", 1000, 86400000,
                       "global caps: a slot key's TTL, so a dead gateway's slots expire"),
    MCPG_CFG_ENUM_FIELD(lim_cfg, on_coordinator_error, "on_coordinator_error", "\"refuse\"",
                        "refuse|admit",
                        "a global limit the coordinator cannot judge (down, timed out): refuse "
                        "the call (503, fail closed) or admit it unlimited by that limit (fail "
                        "open: counted, logged)"),
    MCPG_CONFIG_END};

typedef struct lim_mod {
    const mcpg_host *host;
    mcpg_instance *self;
    const lim_cfg *cfg;
    lim_set set;
    lim_table table;
    _Atomic int coordinator_logged;
    /* what refusals cost, logged at destroy: coordinator ops asked, refusals */
    _Atomic uint64_t coord_ops, refusals, refusals_from_memory;
    _Atomic uint64_t admitted_unjudged; /* on_coordinator_error admit */
    int admit_unjudged;
    /* the order limits are judged in: caps, then budgets, then rates (each
     * in config order), so what a refusal must undo is cheapest to undo */
    uint32_t order[LIM_MAX_LIMITS];
} lim_mod;

/* What a call holds: concurrency slots, local and (global) the slot key. */
typedef struct lim_hold {
    lim_entry *e;
    int32_t slot; /* the global slot key's index, -1: local only */
} lim_hold;

/* A rate or budget token a call took: undone if a later limit refuses it. */
typedef struct lim_spent {
    lim_entry *e;
    uint64_t window; /* budgets: the window index it counted into */
} lim_spent;

/* A call's way through the limits; on the heap once it waits for the
 * coordinator or holds a slot (then it is the call's slot until release). */
typedef struct lim_clocks {
    int64_t mono, wall; /* us */
} lim_clocks;

typedef struct lim_walk {
    lim_mod *m;
    mcpg_call *call;
    uint32_t next;      /* the position in m->order of the next limit to look at */
    uint32_t n_held, n_spent;
    uint32_t tries;     /* global caps: slot keys tried */
    uint32_t trying;    /* global caps: the slot key asked for */
    lim_entry *cur;     /* the entry of the limit being taken */
    uint64_t window;    /* global budgets: the window index asked for */
    lim_clocks asked;   /* global rates: when the coordinator was asked (it judges at asked.wall) */
    int on_heap;
    lim_hold held[LIM_MAX_LIMITS];
    lim_spent spent[LIM_MAX_LIMITS];
} lim_walk;

/* ---- keys ---- */

static const char *or_empty(const char *s) { return s ? s : ""; }

static const char *tool_of(const mcpg_host *h, mcpg_call *call) {
    const char *n = MCPG_HOST_HAS(h, call_client_name) ? h->call_client_name(call)
                                                       : h->call_target(call);
    return or_empty(n);
}

/* The counter's key: the chosen parts, each ended by 0x1f. 0, or -1 when it
 * would not fit. */
static int key_of(const lim_mod *m, const lim_def *d, mcpg_call *call, char *buf, size_t *n) {
    const mcpg_host *h = m->host;
    size_t len = 0;
    for (uint32_t bit = 1; bit <= LIM_KEY_SESSION; bit <<= 1) {
        if (!(d->key_parts & bit)) continue;
        const char *s = "";
        size_t sl = 0;
        if (bit == LIM_KEY_TOOL) s = tool_of(h, call);
        else if (bit == LIM_KEY_PRINCIPAL) s = or_empty(h->call_principal(call));
        else if (bit == LIM_KEY_TENANT) s = or_empty(h->call_tenant(call));
        else if (MCPG_HOST_HAS(h, call_session)) s = h->call_session(call, &sl);
        if (bit != LIM_KEY_SESSION || !s) sl = s ? strlen(s) : 0;
        if (len + sl + 1 >= LIM_KEY_MAX) return -1;
        memcpy(buf + len, s ? s : "", sl);
        len += sl;
        buf[len++] = 0x1f;
    }
    buf[len] = 0;
    *n = len;
    return 0;
}

/* "limits/<name>/<key>[/<suffix>]" for the coordinator. */
static size_t coord_key(const lim_def *d, const lim_entry *e, const char *suffix, char *out,
                        size_t cap) {
    int n = snprintf(out, cap, "limits/%s/%s%s%s", d->name, e->key, suffix ? "/" : "",
                     suffix ? suffix : "");
    return n < 0 || (size_t)n >= cap ? 0 : (size_t)n;
}

/* ---- refusals ---- */

static uint32_t seconds_up(int64_t us) {
    int64_t s = (us + 999999) / 1000000;
    return s < 1 ? 1 : s > 86400 ? 86400 : (uint32_t)s;
}

static const char *const type_words[] = {"concurrency cap", "rate limit", "budget"};

static mcpg_status refuse(lim_mod *m, mcpg_call *call, const lim_def *d, int64_t retry_us) {
    const mcpg_host *h = m->host;
    char msg[200], data[160];
    uint32_t s = seconds_up(retry_us);
    atomic_fetch_add_explicit(&m->refusals, 1, memory_order_relaxed);
    snprintf(msg, sizeof msg, "limit \"%s\" reached (%s): retry in %u s", d->name,
             type_words[d->type], s);
    snprintf(data, sizeof data, "{\"limit\":\"%s\",\"type\":\"%s\",\"retry_after_s\":%u}",
             d->name, d->type == LIM_CONCURRENCY ? "concurrency" : d->type == LIM_RATE ? "rate"
                                                                                        : "budget",
             s);
    h->call_error(call, LIM_RPC_LIMITED, msg, data);
    h->call_set_http(call, 429, s);
    return MCPG_DENY;
}

static mcpg_status fail(lim_mod *m, mcpg_call *call, const lim_def *d, const char *why) {
    char msg[200];
    snprintf(msg, sizeof msg, "limit \"%s\" cannot be judged: %s", d->name, why);
    m->host->call_error(call, MCPG_RPC_SERVER_ERROR, msg, NULL);
    m->host->call_set_http(call, 503, 1);
    return MCPG_DENY;
}

/* The coordinator answered an error for a global limit: fail closed (503),
 * or with on_coordinator_error "admit" let the call go on unlimited by it,
 * counted and logged (the first time, then once per 1000). */
static mcpg_status unjudged(lim_mod *m, mcpg_call *call, const lim_def *d, int status) {
    if (!m->admit_unjudged) return fail(m, call, d, "coordinator error");
    uint64_t n = atomic_fetch_add(&m->admitted_unjudged, 1);
    if (n % 1000 == 0)
        m->host->log(m->self, MCPG_LOG_WARN, "limit \"%s\": the coordinator answered %s; "
                     "admitted unlimited (on_coordinator_error admit; %llu so far)", d->name,
                     m->host->errname(status), (unsigned long long)n + 1);
    return MCPG_CONTINUE;
}

/* Both clocks at one instant, the monotonic one read first. A coordinator
 * judges and answers in wall time (replicas share no monotonic clock); a
 * refusal is remembered in monotonic time. Carried from one to the other
 * through a pair read mono-then-wall, a deadline can only come early, never
 * late, whatever happens between the two reads (a preempted thread): a
 * memory that came late would refuse a call the store would admit. */
static lim_clocks clocks_now(const mcpg_host *h) {
    lim_clocks c;
    c.mono = (int64_t)h->mono_us();
    c.wall = h->wall_us();
    return c;
}

/* Remember a refusal of a global limit until `until` (mono us). */
static void remember(lim_entry *e, int64_t until) {
    int64_t was = atomic_load_explicit(&e->refused_until, memory_order_relaxed);
    while (was < until && !atomic_compare_exchange_weak(&e->refused_until, &was, until)) {
    }
}

/* The gateway's coordinator, asked for on the loop thread at each use (a
 * carried-over instance serves the generation that replaced its own): create()
 * proved one exists, so NULL here (and a log line) is a kernel mistake, and
 * the call is refused rather than let through unjudged. */
static const mcpg_coordinator_ops *coordinator_for(lim_mod *m, const lim_def *d, void **inst) {
    const mcpg_host *h = m->host;
    const mcpg_coordinator_ops *ops = MCPG_HOST_HAS(h, coordinator) ? h->coordinator(inst) : NULL;
    const char *why = !ops ? "the gateway has no coordinator (cluster.kind)"
                      : d->type == LIM_RATE && !MCPG_HAS(ops, rate_take)
                          ? "the coordinator has no rate_take (ABI 1.3)"
                          : NULL;
    if (!why) return ops;
    if (!atomic_exchange(&m->coordinator_logged, 1))
        h->log(m->self, MCPG_LOG_ERROR, "limit \"%s\" is global and %s: its calls are refused",
               d->name, why);
    return NULL;
}

/* ---- giving back ---- */

/* The slot key is gone (or had expired): only now may a call of this
 * gateway take the local slot again, else it could find every key still
 * present and be refused while the cap has room. */
static void del_done(void *arg, int status, const mcpg_coord_value *v) {
    (void)status, (void)v;
    lim_conc_give(&((lim_entry *)arg)->counter);
}

static void give_back(lim_walk *w) {
    lim_mod *m = w->m;
    for (uint32_t i = 0; i < w->n_held; i++) {
        lim_hold *hd = &w->held[i];
        void *ci = NULL;
        const mcpg_coordinator_ops *co =
            hd->slot >= 0 ? coordinator_for(m, &m->set.v[hd->e->limit], &ci) : NULL;
        if (co) {
            char idx[16], key[LIM_KEY_MAX + 96];
            snprintf(idx, sizeof idx, "%d", hd->slot);
            size_t kn = coord_key(&m->set.v[hd->e->limit], hd->e, idx, key, sizeof key);
            /* the next taker tries the key given back first */
            atomic_store(&hd->e->next_slot, (uint32_t)hd->slot);
            if (kn && co->del(ci, m->host->call_worker(w->call), key, kn, del_done, hd->e) == 0)
                continue; /* the local slot goes back in del_done */
            m->host->log(m->self, MCPG_LOG_WARN, "slot %s not given back (expires by TTL)", key);
        }
        lim_conc_give(&hd->e->counter);
    }
    w->n_held = 0;
}

static void refund_done(void *arg, int status, const mcpg_coord_value *v) {
    (void)arg, (void)status, (void)v;
}

/* A later limit refused the call: the rate and budget tokens it took are
 * undone, so a refused call costs no limit anything. A global rate's token
 * cannot be (the coordinator has no op for it); rates are judged last, so
 * only another rate refusing the same call leaves one spent. */
static void refund(lim_walk *w) {
    lim_mod *m = w->m;
    for (uint32_t i = 0; i < w->n_spent; i++) {
        lim_spent *sp = &w->spent[i];
        const lim_def *d = &m->set.v[sp->e->limit];
        if (!d->global) {
            if (d->type == LIM_RATE) lim_rate_give(&sp->e->counter, d->interval_us);
            else lim_budget_give(&sp->e->budget, sp->window);
            continue;
        }
        void *ci = NULL;
        const mcpg_coordinator_ops *co = coordinator_for(m, d, &ci);
        char idx[24], key[LIM_KEY_MAX + 96];
        snprintf(idx, sizeof idx, "%llu", (unsigned long long)sp->window);
        size_t kn = coord_key(d, sp->e, idx, key, sizeof key);
        if (co && kn)
            co->incr(ci, m->host->call_worker(w->call), key, kn, -1, (uint64_t)(d->window_us / 1000),
                     refund_done, NULL);
    }
    w->n_spent = 0;
}

/* Everything the call took goes back: it was refused. */
static void undo(lim_walk *w) {
    give_back(w);
    refund(w);
}

/* ---- local limits ---- */

/* A refused budget's Retry-After: the rest of its window (a budget forever:
 * LIM_FOREVER_RETRY_S), whether the coordinator or memory refused it. */
static int64_t budget_retry_us(const mcpg_host *h, const lim_def *d) {
    int64_t left = lim_budget_window_left(h->wall_us(), d->window_us);
    return left ? left : LIM_FOREVER_RETRY_S * 1000000LL;
}

static mcpg_status take_local(lim_walk *w, const lim_def *d, lim_entry *e) {
    lim_mod *m = w->m;
    const mcpg_host *h = m->host;
    if (d->type == LIM_CONCURRENCY) {
        if (!lim_conc_take(&e->counter, d->n)) return refuse(m, w->call, d, 0);
        w->held[w->n_held++] = (lim_hold){e, -1};
        return MCPG_CONTINUE;
    }
    if (d->type == LIM_RATE) {
        int64_t wait = lim_rate_take(&e->counter, (int64_t)h->mono_us(), d->interval_us, d->burst);
        if (wait) return refuse(m, w->call, d, wait);
        w->spent[w->n_spent++] = (lim_spent){e, 0};
        return MCPG_CONTINUE;
    }
    int64_t now = h->wall_us();
    if (lim_budget_take(&e->budget, now, d->window_us, d->n)) {
        w->spent[w->n_spent++] = (lim_spent){e, lim_budget_window(now, d->window_us)};
        return MCPG_CONTINUE;
    }
    return refuse(m, w->call, d, budget_retry_us(h, d));
}

/* ---- global limits ---- */

static mcpg_status walk_on(lim_walk **wp);
static void walk_finish(lim_walk *w, mcpg_status st);

static lim_walk *to_heap(lim_walk *w) {
    if (w->on_heap) return w;
    lim_walk *hw = malloc(sizeof *hw);
    if (!hw) return NULL;
    *hw = *w;
    hw->on_heap = 1;
    return hw;
}

static const lim_def *current_def(lim_walk *w) { return &w->m->set.v[w->cur->limit]; }

/* A coordinator answer: the limit is taken (CONTINUE), refused or failed
 * (DENY); either way the walk goes on or ends. */
static void op_answered(lim_walk *w, mcpg_status st) {
    if (st == MCPG_CONTINUE) {
        w->next++;
        st = walk_on(&w);
    } else {
        undo(w);
    }
    if (st != MCPG_PENDING) walk_finish(w, st);
}

static int try_slot(lim_walk *w);

static void slot_done(void *arg, int status, const mcpg_coord_value *v) {
    (void)v;
    lim_walk *w = arg;
    const lim_def *d = current_def(w);
    lim_entry *e = w->cur;
    if (status == 0) {
        w->held[w->n_held - 1].slot = (int32_t)w->trying;
        atomic_store(&e->next_slot, (w->trying + 1) % (uint32_t)d->n);
        return op_answered(w, MCPG_CONTINUE);
    }
    if (status == MCPG_EEXIST && ++w->tries < (uint32_t)d->n) {
        w->trying = (w->trying + 1) % (uint32_t)d->n;
        if (try_slot(w) == 0) return;
    }
    /* the local slot taken first goes back with the others */
    if (status == MCPG_EEXIST) {
        remember(e, (int64_t)w->m->host->mono_us() + LIM_CAP_MEMORY_US);
        op_answered(w, refuse(w->m, w->call, d, 0));
    } else {
        /* admitted unjudged: the local slot is held, no slot key (slot -1) */
        op_answered(w, unjudged(w->m, w->call, d, status));
    }
}

/* put_if_absent of the slot key w->trying. 0 when asked. */
static int try_slot(lim_walk *w) {
    lim_mod *m = w->m;
    const lim_def *d = current_def(w);
    char idx[16], key[LIM_KEY_MAX + 96];
    snprintf(idx, sizeof idx, "%u", w->trying);
    size_t kn = coord_key(d, w->cur, idx, key, sizeof key);
    void *ci = NULL;
    const mcpg_coordinator_ops *co = kn ? coordinator_for(m, d, &ci) : NULL;
    if (!co) return -1;
    atomic_fetch_add_explicit(&m->coord_ops, 1, memory_order_relaxed);
    return co->put_if_absent(ci, m->host->call_worker(w->call), key, kn, "1", 1,
                             (uint64_t)m->cfg->slot_ttl_ms, slot_done, w);
}

static void rate_done(void *arg, int status, const mcpg_coord_value *v) {
    lim_walk *w = arg;
    const lim_def *d = current_def(w);
    if (status == 0) return op_answered(w, MCPG_CONTINUE);
    if (status != MCPG_EAGAIN) return op_answered(w, unjudged(w->m, w->call, d, status));
    const mcpg_host *h = w->m->host;
    /* v->number: when the bucket has a token again (wall); judged at asked.wall */
    remember(w->cur, w->asked.mono + (v->number - w->asked.wall));
    int64_t wait = v->number - h->wall_us();
    if (wait < 1) wait = 1;
    op_answered(w, refuse(w->m, w->call, d, wait));
}

static void budget_done(void *arg, int status, const mcpg_coord_value *v) {
    lim_walk *w = arg;
    const lim_def *d = current_def(w);
    if (status != 0) return op_answered(w, unjudged(w->m, w->call, d, status));
    if (v->number <= d->n) {
        w->spent[w->n_spent++] = (lim_spent){w->cur, w->window};
        return op_answered(w, MCPG_CONTINUE);
    }
    const mcpg_host *h = w->m->host;
    lim_clocks now = clocks_now(h);
    int64_t left = lim_budget_window_left(now.wall, d->window_us);
    int64_t memory = left && left < LIM_BUDGET_MEMORY_US ? left : LIM_BUDGET_MEMORY_US;
    remember(w->cur, now.mono + memory);
    op_answered(w, refuse(w->m, w->call, d, budget_retry_us(h, d)));
}

/* Ask the coordinator; the walk is on the heap from here on. */
static mcpg_status take_global(lim_walk **wp, const lim_def *d, lim_entry *e) {
    lim_walk *w = *wp;
    lim_mod *m = w->m;
    const mcpg_host *h = m->host;
    int64_t refused = atomic_load_explicit(&e->refused_until, memory_order_relaxed);
    int64_t mono = (int64_t)h->mono_us();
    if (refused > mono) {
        atomic_fetch_add_explicit(&m->refusals_from_memory, 1, memory_order_relaxed);
        return refuse(m, w->call, d, d->type == LIM_BUDGET ? budget_retry_us(h, d) : refused - mono);
    }
    void *ci = NULL;
    const mcpg_coordinator_ops *co = coordinator_for(m, d, &ci);
    if (!co) return fail(m, w->call, d, "no coordinator can judge it (see the log)");
    if (d->type == LIM_CONCURRENCY) {
        if (!lim_conc_take(&e->counter, d->n)) return refuse(m, w->call, d, 0);
        w->held[w->n_held++] = (lim_hold){e, -1};
    }
    if (!(w = to_heap(w))) return fail(m, (*wp)->call, d, "out of memory");
    *wp = w;
    w->cur = e;
    w->tries = 0;
    mcpg_worker *wk = h->call_worker(w->call);
    char key[LIM_KEY_MAX + 96], idx[24];
    int rc;
    if (d->type == LIM_CONCURRENCY) {
        w->trying = atomic_load(&e->next_slot) % (uint32_t)d->n;
        rc = try_slot(w);
    } else if (d->type == LIM_RATE) {
        atomic_fetch_add_explicit(&m->coord_ops, 1, memory_order_relaxed);
        size_t kn = coord_key(d, e, NULL, key, sizeof key);
        w->asked = clocks_now(h);
        rc = kn ? co->rate_take(ci, wk, key, kn, w->asked.wall, d->interval_us,
                                      d->interval_us * d->burst, rate_done, w)
                : -1;
    } else {
        w->window = lim_budget_window(h->wall_us(), d->window_us);
        snprintf(idx, sizeof idx, "%llu", (unsigned long long)w->window);
        size_t kn = coord_key(d, e, idx, key, sizeof key);
        uint64_t ttl = (uint64_t)(d->window_us / 1000);
        atomic_fetch_add_explicit(&m->coord_ops, 1, memory_order_relaxed);
        rc = kn ? co->incr(ci, wk, key, kn, 1, ttl, budget_done, w) : -1;
    }
    return rc < 0 ? fail(m, w->call, d, "the coordinator refused the op") : MCPG_PENDING;
}

/* ---- the walk ---- */

/* Take every matching limit from w->next on: CONTINUE (all taken), DENY
 * (refused: what was taken is given back), PENDING (w is on the heap and a
 * coordinator callback goes on). */
static mcpg_status walk_on(lim_walk **wp) {
    lim_walk *w = *wp;
    lim_mod *m = w->m;
    const mcpg_host *h = m->host;
    char key[LIM_KEY_MAX];
    const char *tool = tool_of(h, w->call), *principal = or_empty(h->call_principal(w->call)),
               *tenant = or_empty(h->call_tenant(w->call));
    for (; w->next < m->set.n; w->next++) {
        uint32_t limit = m->order[w->next];
        const lim_def *d = &m->set.v[limit];
        if (!lim_matches(d, tool, principal, tenant)) continue;
        size_t kn;
        lim_entry *e = key_of(m, d, w->call, key, &kn) == 0
                           ? lim_table_get(&m->table, limit, key, kn)
                           : NULL;
        mcpg_status st = !e ? fail(m, w->call, d, "too many keys (max_keys)")
                         : d->global ? take_global(wp, d, e)
                                     : take_local(w, d, e);
        w = *wp; /* take_global may have moved it to the heap */
        if (st == MCPG_PENDING) return st;
        if (st == MCPG_DENY) {
            undo(w);
            return st;
        }
    }
    return MCPG_CONTINUE;
}

/* The walk ended after a PENDING: keep what it holds for release(). */
static void walk_finish(lim_walk *w, mcpg_status st) {
    mcpg_call *call = w->call;
    const mcpg_host *h = w->m->host;
    void **slot = h->call_slot(call, w->m->self);
    if (st == MCPG_CONTINUE && w->n_held && slot) *slot = w;
    else free(w);
    h->call_resume(call, st);
}

static mcpg_status lim_acquire(void *instance, mcpg_call *call) {
    lim_mod *m = instance;
    lim_walk stack = {.m = m, .call = call}, *w = &stack;
    mcpg_status st = walk_on(&w);
    if (st == MCPG_PENDING) return st;
    if (w != &stack) { /* moved to the heap, then the coordinator refused the op */
        free(w);
        return st;
    }
    if (st != MCPG_CONTINUE || !w->n_held) return st;
    void **slot = m->host->call_slot(call, m->self);
    lim_walk *keep = slot ? to_heap(w) : NULL;
    if (!keep) {
        undo(w);
        return fail(m, call, &m->set.v[w->held[0].e->limit], "out of memory");
    }
    *slot = keep;
    return MCPG_CONTINUE;
}

static void lim_release(void *instance, mcpg_call *call) {
    lim_mod *m = instance;
    void **slot = m->host->call_slot(call, m->self);
    if (!slot || !*slot) return;
    lim_walk *w = *slot;
    *slot = NULL;
    give_back(w);
    free(w);
}

/* ---- lifecycle ---- */

static int lim_validate(const mcpg_host *host, const void *config, mcpg_report *rep) {
    const lim_cfg *c = config;
    mcpg_config_problems p = {host, rep, NULL, 0};
    lim_set s;
    lim_set_parse(&s, c->limits, &p);
    lim_set_free(&s);
    return p.errors ? MCPG_ECONFIG : 0;
}

/* At create: a coordinator the kernel already shows that cannot serve a
 * global rate refuses the config. */
/* A global limit needs the gateway's coordinator (and a global rate its
 * rate_take): refused at create(), where the kernel already shows the
 * coordinator the new generation will serve with. */
static int coordinator_ok(lim_mod *m) {
    const mcpg_host *h = m->host;
    void *inst = NULL;
    const mcpg_coordinator_ops *ops = MCPG_HOST_HAS(h, coordinator) ? h->coordinator(&inst) : NULL;
    for (uint32_t i = 0; i < m->set.n; i++) {
        const lim_def *d = &m->set.v[i];
        const char *why = !d->global ? NULL
                          : !ops     ? "the gateway has no coordinator (cluster.kind)"
                          : d->type == LIM_RATE && !MCPG_HAS(ops, rate_take)
                              ? "the gateway's coordinator has no rate_take (ABI 1.3)"
                              : NULL;
        if (why) {
            h->log(m->self, MCPG_LOG_ERROR, "limits[%u] (\"%s\") is global and %s", i, d->name, why);
            return 0;
        }
    }
    return 1;
}

static void judging_order(lim_mod *m) {
    static const lim_type by[] = {LIM_CONCURRENCY, LIM_BUDGET, LIM_RATE};
    uint32_t k = 0;
    for (size_t t = 0; t < sizeof by / sizeof by[0]; t++)
        for (uint32_t i = 0; i < m->set.n; i++)
            if (m->set.v[i].type == by[t]) m->order[k++] = i;
}

static void lim_destroy(void *instance) {
    lim_mod *m = instance;
    if (m->table.slots)
        m->host->log(m->self, MCPG_LOG_INFO,
                     "refusals: %llu (%llu answered from memory); coordinator ops to judge calls: %llu"
                     "; admitted unjudged: %llu",
                     (unsigned long long)atomic_load(&m->refusals),
                     (unsigned long long)atomic_load(&m->refusals_from_memory),
                     (unsigned long long)atomic_load(&m->coord_ops),
                     (unsigned long long)atomic_load(&m->admitted_unjudged));
    lim_table_fini(&m->table);
    lim_set_free(&m->set);
    free(m);
}

static int lim_create(const mcpg_host *host, mcpg_instance *self, const void *config,
                      void **out) {
    lim_mod *m = calloc(1, sizeof *m);
    if (!m) return MCPG_ENOMEM;
    m->host = host;
    m->self = self;
    m->cfg = config;
    m->admit_unjudged = strcmp(m->cfg->on_coordinator_error, "admit") == 0;
    mcpg_config_problems p = {host, NULL, self, 0};
    if (lim_set_parse(&m->set, m->cfg->limits, &p) != 0 || !coordinator_ok(m)) {
        lim_destroy(m);
        return MCPG_ECONFIG;
    }
    judging_order(m);
    if (lim_table_init(&m->table, (size_t)m->cfg->max_keys) != 0) {
        lim_destroy(m);
        return MCPG_ENOMEM;
    }
    host->log(self, MCPG_LOG_INFO, "%u limit(s)", m->set.n);
    *out = m;
    return 0;
}

static const mcpg_lifecycle_ops lim_lifecycle = {
    MCPG_OPS_HEAD(mcpg_lifecycle_ops),
    .validate = lim_validate,
    .create = lim_create,
    .destroy = lim_destroy,
};

static const mcpg_limits_ops lim_ops = {
    MCPG_OPS_HEAD(mcpg_limits_ops),
    .acquire = lim_acquire,
    .release = lim_release,
};

MCPG_MODULE_DEFINE(MCPG_KIND_LIMITS, "limits", "1.0.0",
                   .description = "concurrency caps, rate limits and budgets, per gateway "
                                  "(atomics) or per fleet (the coordinator's atomic ops)",
                   .config = lim_fields, .config_size = sizeof(lim_cfg),
                   .lifecycle = &lim_lifecycle, .ops = &lim_ops);
