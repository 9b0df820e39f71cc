/* limits through the SDK's fake host: the built limits.so judging calls,
 * with the built coordinator_memory.so as the gateway's coordinator.
 * Usage: test_limits_fakehost path/to/limits.so path/to/coordinator_memory.so
 *
 * Two limits instances with the same config stand for two gateways sharing
 * one coordinator ("gw_a", "gw_b"). What is shown:
 *  - a global cap of 2: two calls acquire, a third is refused (-32029, the
 *    limit's name, 429 with Retry-After); the other gateway is refused too;
 *    a release lets the next call in, on either gateway;
 *  - a crashed holder: gw_a takes both slots and is destroyed without a
 *    release (a dead gateway); gw_b is refused while the slot keys live and
 *    admitted once their TTL (slot_ttl_ms 1000) has passed, in real time;
 *  - a global budget and a global rate (incr, rate_take) admit exactly their
 *    count across the two gateways; a gateway's later refusals are answered
 *    from memory, without the coordinator;
 *  - local limits: answered at once, exact, no coordinator op; a call refused
 *    by a later limit gives back the cap slot it took before;
 *  - a global limit with no coordinator is refused at create, naming it;
 *  - a call a later limit refuses gives back the budget it took. */
#define _GNU_SOURCE
#include <mcpg/check.h>
#include <mcpg/fakehost.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RPC_LIMITED (-32029)
#define WAIT_MS 2000

static const char *lim_so, *coord_so;
static mcpg_fakehost *fh;
static mcpg_instance *coord;

/* The global limits both gateways run. slot_ttl_ms is the smallest the
 * schema takes, so the crashed holder's slots expire within the test. */
static const char global_cfg[] =
    "{\"slot_ttl_ms\":1000,\"limits\":["
    "{\"name\":\"fleet_cap\",\"match\":{\"tools\":\"capped\"},\"scope\":\"global\","
    "\"concurrency\":2},"
    "{\"name\":\"fleet_budget\",\"match\":{\"tools\":\"budgeted\"},\"scope\":\"global\","
    "\"budget\":{\"calls\":5}},"
    "{\"name\":\"fleet_rate\",\"match\":{\"tools\":\"rated\"},\"scope\":\"global\","
    "\"rate\":{\"per_minute\":1,\"burst\":3}}]}";

static void sleep_until_ms(uint64_t t) {
    uint64_t now = mcpg_fakehost_now_ms();
    if (now >= t) return;
    struct timespec ts = {.tv_sec = (time_t)((t - now) / 1000),
                          .tv_nsec = (long)((t - now) % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static mcpg_instance *load(const char *so, const char *name, const char *cfg) {
    return mcpg_fakehost_load_file_or_exit(fh, so, name, cfg);
}

/* One tools/call judged by a limits instance: *first is what acquire
 * answered at once (PENDING when it asked the coordinator), the return the
 * call, its final status in *final. */
typedef struct judged {
    mcpg_call *call;
    int first, final;
} judged;

static judged judge(mcpg_instance *lim, const char *tool) {
    judged j = {mcpg_fakehost_call_new(fh, "tools/call", tool, "{\"message\":\"m\"}", "1"), 0, 0};
    MCPG_REQUIRE(j.call, "call_new");
    j.first = mcpg_fakehost_dispatch(fh, lim, j.call);
    j.final = mcpg_fakehost_wait(fh, j.call, WAIT_MS);
    return j;
}

static void done(judged *j) {
    mcpg_fakehost_call_free(fh, j->call);
    j->call = NULL;
}

/* Give the call's limits back, then turn the loop so a global cap's slot
 * key is deleted (the local slot returns only once the delete is answered). */
static void release(mcpg_instance *lim, judged *j) {
    mcpg_fakehost_release(fh, lim, j->call);
    mcpg_fakehost_run_for(fh, 5);
    done(j);
}

/* A refusal of the limit `name`: -32029 naming it, data with its type and
 * retry_after_s, 429 with Retry-After in [lo, hi] seconds. */
static void expect_refused(const judged *j, const char *name, const char *type, uint32_t lo,
                           uint32_t hi, const char *what) {
    mcpg_call_outcome o = {.size = sizeof o};
    mcpg_fakehost_outcome(j->call, &o);
    char want_msg[96], want_type[64], want_limit[96];
    snprintf(want_msg, sizeof want_msg, "limit \"%s\" reached", name);
    snprintf(want_type, sizeof want_type, "\"type\":\"%s\"", type);
    snprintf(want_limit, sizeof want_limit, "\"limit\":\"%s\"", name);
    MCPG_CHECK(j->final == MCPG_DENY, "%s: status %d", what, j->final);
    MCPG_CHECK(o.is_error && o.error_code == RPC_LIMITED, "%s: code %lld", what,
               (long long)o.error_code);
    MCPG_CHECK(o.error_message && strstr(o.error_message, want_msg), "%s: message %s", what,
               o.error_message ? o.error_message : "(none)");
    MCPG_CHECK(o.error_data && strstr(o.error_data, want_limit) && strstr(o.error_data, want_type) &&
                   strstr(o.error_data, "\"retry_after_s\":"),
               "%s: data %s", what, o.error_data ? o.error_data : "(none)");
    MCPG_CHECK(o.http_status == 429 && o.retry_after_s >= lo && o.retry_after_s <= hi,
               "%s: HTTP %d, Retry-After %u (wanted 429, %u..%u)", what, o.http_status,
               o.retry_after_s, lo, hi);
}

static void expect_admitted(const judged *j, int first, const char *what) {
    MCPG_CHECK(j->final == MCPG_CONTINUE, "%s: status %d (%s)", what, j->final,
               mcpg_fakehost_error_message(j->call) ? mcpg_fakehost_error_message(j->call) : "");
    MCPG_CHECK(j->first == first, "%s: acquire answered %d at once, wanted %d", what, j->first,
               first);
}

/* ---- a global cap ---------------------------------------------------------- */

/* A call of "capped" on gateway gw, refused by fleet_cap (Retry-After 1 s).
 * Returns what acquire answered at once. */
static int cap_refused(mcpg_instance *gw, const char *what) {
    judged j = judge(gw, "capped");
    expect_refused(&j, "fleet_cap", "concurrency", 1, 1, what);
    done(&j);
    return j.first;
}

static void test_global_cap(mcpg_instance *a, mcpg_instance *b) {
    judged a1 = judge(a, "capped"), a2 = judge(a, "capped");
    expect_admitted(&a1, MCPG_PENDING, "cap: the 1st call (a slot key asked for)");
    expect_admitted(&a2, MCPG_PENDING, "cap: the 2nd call");
    MCPG_CHECK(cap_refused(a, "cap: the 3rd call") == MCPG_DENY,
               "cap: gw_a refuses its 3rd at once (both held here)");
    MCPG_CHECK(cap_refused(b, "cap: the other gateway's call") == MCPG_PENDING,
               "cap: gw_b asked the coordinator");

    release(a, &a1);
    judged a4 = judge(a, "capped");
    expect_admitted(&a4, MCPG_PENDING, "cap: a release lets the next call in");
    cap_refused(a, "cap: full again");

    /* gw_b remembers its refusal for 20 ms; then a release on gw_a lets
     * gw_b in */
    release(a, &a2);
    mcpg_fakehost_run_for(fh, 30);
    judged b2 = judge(b, "capped");
    expect_admitted(&b2, MCPG_PENDING, "cap: a release on gw_a lets gw_b in");
    cap_refused(b, "cap: gw_a 1 + gw_b 1 = 2 held");
    release(b, &b2);
    release(a, &a4);
}

/* ---- a crashed holder -------------------------------------------------------- */

/* gw_a takes both slots and dies holding them. Its calls' slots still point
 * at what it allocated for them: a dead process takes that memory with it,
 * here the test frees it once the instance is gone. */
static void test_crashed_holder(mcpg_instance *a, mcpg_instance *b) {
    const mcpg_host *h = mcpg_fakehost_host(fh);
    uint64_t t_before = mcpg_fakehost_now_ms();
    judged a1 = judge(a, "capped"), a2 = judge(a, "capped");
    uint64_t t_taken = mcpg_fakehost_now_ms();
    expect_admitted(&a1, MCPG_PENDING, "crash: gw_a's 1st slot");
    expect_admitted(&a2, MCPG_PENDING, "crash: gw_a's 2nd slot");
    void **s1 = h->call_slot(a1.call, a), **s2 = h->call_slot(a2.call, a);
    MCPG_REQUIRE(s1 && s2 && *s1 && *s2, "crash: the admitted calls hold something");
    void *held1 = *s1, *held2 = *s2;
    *s1 = *s2 = NULL;
    MCPG_CHECK(mcpg_fakehost_unload(fh, a) == 0, "crash: gw_a destroyed without a release");
    free(held1);
    free(held2);
    done(&a1);
    done(&a2);

    /* the slot keys were put at or after t_before: alive until t_before + 1 s */
    MCPG_CHECK(cap_refused(b, "crash: gw_b while the slots live") == MCPG_PENDING,
               "crash: refused by the coordinator's keys");
    sleep_until_ms(t_before + 800);
    judged b2 = judge(b, "capped");
    uint64_t t_b2 = mcpg_fakehost_now_ms();
    if (t_b2 < t_before + 1000) /* a slow turn past the TTL proves nothing either way */
        expect_refused(&b2, "fleet_cap", "concurrency", 1, 1, "crash: gw_b at 0.8 s");
    done(&b2);

    /* put by t_taken: gone by t_taken + 1 s */
    sleep_until_ms(t_taken + 1100);
    judged b3 = judge(b, "capped"), b4 = judge(b, "capped");
    printf("crashed holder: gw_b admitted %llu ms after the slots were taken (TTL 1000 ms)\n",
           (unsigned long long)(mcpg_fakehost_now_ms() - t_taken));
    expect_admitted(&b3, MCPG_PENDING, "crash: gw_b once the TTL has passed");
    expect_admitted(&b4, MCPG_PENDING, "crash: and the dead gateway's 2nd slot too");
    cap_refused(b, "crash: still a cap of 2");
    release(b, &b3);
    release(b, &b4);
}

/* ---- a global budget and a global rate -------------------------------------- */

typedef struct retry_range {
    uint32_t lo, hi;
} retry_range;

/* Calls alternate between the gateways; exactly `want` are admitted. A
 * gateway's first refusal comes from the coordinator (Retry-After in
 * `asked`), its later ones from memory (acquire answers DENY at once, no
 * coordinator op; Retry-After in `remembered`). */
static void exact_across(mcpg_instance *a, mcpg_instance *b, const char *tool, const char *name,
                         const char *type, int want, retry_range asked, retry_range remembered) {
    mcpg_instance *gw[2] = {a, b};
    int admitted = 0, refused_seen[2] = {0, 0}, from_memory = 0;
    for (int i = 0; i < 4 * want; i++) {
        int g = i % 2;
        judged j = judge(gw[g], tool);
        if (j.final == MCPG_CONTINUE) {
            admitted++;
            MCPG_CHECK(j.first == MCPG_PENDING, "%s: admitted by the coordinator", tool);
        } else {
            int at_once = j.first == MCPG_DENY;
            MCPG_CHECK(at_once == (refused_seen[g] > 0),
                       "%s: gateway %d's refusal %d answered %s", tool, g, refused_seen[g] + 1,
                       at_once ? "from memory" : "by the coordinator");
            retry_range r = at_once ? remembered : asked;
            expect_refused(&j, name, type, r.lo, r.hi, tool);
            from_memory += at_once;
            refused_seen[g]++;
        }
        done(&j);
    }
    printf("%s: %d admitted of %d over two gateways; %d refusals, %d of them from memory\n",
           tool, admitted, 4 * want, refused_seen[0] + refused_seen[1], from_memory);
    MCPG_CHECK(admitted == want, "%s: %d admitted, wanted exactly %d", tool, admitted, want);
}

static void test_global_budget_and_rate(mcpg_instance *a, mcpg_instance *b) {
    /* a budget of forever: Retry-After 3600, whether the coordinator or the
     * gateway's memory of a refusal answers */
    exact_across(a, b, "budgeted", "fleet_budget", "budget", 5, (retry_range){3600, 3600},
                 (retry_range){3600, 3600});
    /* 1 per minute, burst 3: 3 at once, the next in about 60 s (from memory
     * too: a rate is remembered until a call fits) */
    exact_across(a, b, "rated", "fleet_rate", "rate", 3, (retry_range){55, 60},
                 (retry_range){55, 60});
}

/* ---- no coordinator ------------------------------------------------------------ */

static void test_no_coordinator(void) {
    mcpg_fakehost_set_coordinator(fh, NULL);
    mcpg_instance *inst = NULL;
    int rc = mcpg_fakehost_load_file(fh, lim_so, "gw_none", global_cfg, &inst);
    MCPG_CHECK(rc != 0 && !inst, "no coordinator: a global limit is refused at create (%d)", rc);
    MCPG_CHECK(mcpg_fakehost_log_contains(fh, "is global and the gateway has no coordinator"),
               "no coordinator: the limit named:\n%s", mcpg_fakehost_log_text(fh));
    MCPG_CHECK(mcpg_fakehost_set_coordinator(fh, coord) == 0, "the coordinator back");
}

/* ---- a refused call costs no limit anything ------------------------------------ */

/* A budget of 2 on "br" and "bonly", and a rate of 1 per minute (burst 1) on
 * "br" only. Budgets are judged before rates, so each "br" the rate refuses
 * took a budget token first: it must be given back, or the budget would be
 * spent by calls that never ran. */
static void test_refunds(const char *scope) {
    char cfg[512];
    snprintf(cfg, sizeof cfg,
             "{\"limits\":["
             "{\"name\":\"r1\",\"match\":{\"tools\":\"br\"},\"scope\":\"%s\","
             "\"rate\":{\"per_minute\":1,\"burst\":1}},"
             "{\"name\":\"b2\",\"match\":{\"tools\":[\"br\",\"bonly\"]},\"scope\":\"%s\","
             "\"key\":[],\"budget\":{\"calls\":2}}]}",
             scope, scope);
    mcpg_instance *inst = load(lim_so, scope[0] == 'g' ? "refund_g" : "refund_l", cfg);
    judged j = judge(inst, "br");
    expect_admitted(&j, j.first, "refunds: the first br");
    done(&j);
    for (int i = 0; i < 4; i++) {
        judged r = judge(inst, "br");
        expect_refused(&r, "r1", "rate", 55, 60, "refunds: br refused by the rate");
        done(&r);
    }
    judged k = judge(inst, "bonly");
    expect_admitted(&k, k.first, "refunds: the budget's 2nd call (the refused br gave theirs back)");
    done(&k);
    judged x = judge(inst, "bonly");
    expect_refused(&x, "b2", "budget", 3600, 3600, "refunds: the budget's 3rd");
    done(&x);
    MCPG_CHECK(mcpg_fakehost_unload(fh, inst) == 0, "unload %s", scope);
}

/* ---- local limits -------------------------------------------------------------- */

static const char local_cfg[] =
    "{\"limits\":["
    "{\"name\":\"one_at_a_time\",\"key\":[],\"concurrency\":1},"
    "{\"name\":\"three_only\",\"match\":{\"tools\":\"both\"},\"budget\":{\"calls\":3}},"
    "{\"name\":\"loc_rate\",\"match\":{\"tools\":\"rated\"},"
    "\"rate\":{\"per_minute\":1,\"burst\":4}}]}";

static void test_local(void) {
    mcpg_instance *loc = load(lim_so, "loc", local_cfg);
    /* the cap (every tool, one counter): answered at once, no coordinator */
    judged x1 = judge(loc, "other");
    expect_admitted(&x1, MCPG_CONTINUE, "local: the cap's one slot, at once");
    judged x2 = judge(loc, "both");
    expect_refused(&x2, "one_at_a_time", "concurrency", 1, 1, "local: the cap's 2nd");
    MCPG_CHECK(x2.first == MCPG_DENY, "local: refused at once");
    done(&x2);
    release(loc, &x1);

    /* the budget of 3 on "both", behind the cap: a call the budget refuses
     * gives back the cap slot it took first */
    for (int i = 0; i < 3; i++) {
        judged j = judge(loc, "both");
        expect_admitted(&j, MCPG_CONTINUE, "local: the budget");
        release(loc, &j);
    }
    judged x3 = judge(loc, "both");
    expect_refused(&x3, "three_only", "budget", 3600, 3600, "local: the budget's 4th");
    done(&x3);
    judged x4 = judge(loc, "other");
    expect_admitted(&x4, MCPG_CONTINUE, "local: the refused call gave the cap slot back");
    release(loc, &x4);

    /* a rate of 1/min, burst 4: exactly 4 (one at a time, the cap allows) */
    int admitted = 0;
    for (int i = 0; i < 12; i++) {
        judged j = judge(loc, "rated");
        if (j.final == MCPG_CONTINUE) {
            admitted++;
            release(loc, &j);
            continue;
        }
        expect_refused(&j, "loc_rate", "rate", 55, 60, "local: the rate");
        done(&j);
    }
    MCPG_CHECK(admitted == 4, "local rate: %d admitted, wanted exactly 4", admitted);

    mcpg_fakehost_log_clear(fh);
    MCPG_CHECK(mcpg_fakehost_unload(fh, loc) == 0, "unload loc");
    MCPG_CHECK(mcpg_fakehost_log_contains(
                   fh, "[limits:limits:loc] info: refusals: 10 (0 answered from memory); "
                       "coordinator ops to judge calls: 0"),
               "local limits ask the coordinator nothing:\n%s", mcpg_fakehost_log_text(fh));
}

int main(int argc, char **argv) {
    MCPG_REQUIRE(argc == 3, "usage: test_limits_fakehost limits.so coordinator_memory.so");
    lim_so = argv[1];
    coord_so = argv[2];
    fh = mcpg_fakehost_new();
    MCPG_REQUIRE(fh, "mcpg_fakehost_new");
    mcpg_fakehost_set_quiet(fh, getenv("MCPG_TEST_VERBOSE") == NULL);

    coord = load(coord_so, "coord", NULL);
    MCPG_REQUIRE(mcpg_fakehost_set_coordinator(fh, coord) == 0, "set_coordinator");
    mcpg_instance *a = load(lim_so, "gw_a", global_cfg), *b = load(lim_so, "gw_b", global_cfg);

    test_global_cap(a, b);
    test_global_budget_and_rate(a, b);
    test_no_coordinator();
    test_refunds("local");
    test_refunds("global");
    test_local();
    test_crashed_holder(a, b); /* unloads gw_a */

    MCPG_CHECK(mcpg_fakehost_unload(fh, b) == 0, "unload gw_b");
    MCPG_CHECK(mcpg_fakehost_unload(fh, coord) == 0, "unload the coordinator");
    int problems = mcpg_fakehost_free(fh);
    MCPG_CHECK(problems == 0, "fake host: %d problem(s)", problems);
    return MCPG_CHECK_EXIT("test_limits_fakehost");
}
