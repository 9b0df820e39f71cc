/* Kernel unit test: defects of the call path, each driven to where it
 * showed, with fixture modules that misbehave on purpose (fx_bugs, fx_sink,
 * fx_limit). Each scenario runs on a generation of its own, published to
 * worker 0 for the scenario, and must leave it with no call pinning it. */
#include "probe.h"

#include <mcpg/check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *modules_dir;
static char dir[] = "/tmp/mcpg-defects-XXXXXX";
static char notes[600]; /* where the fixtures write what happened */

/* A manifest of one worker with `modules` (a JSON array's inside) and
 * `pipeline` (an object's inside). */
static const char *manifest_text(const char *modules, const char *pipeline) {
    static char text[4096];
    snprintf(text, sizeof text,
             "{\"gateway\":{\"workers\":1,\"module_dir\":\"%s\",\"log_level\":\"error\","
             "\"pool\":{\"threads\":2,\"queue\":8},\"server\":{\"access_log\":false}},"
             "\"modules\":[%s],\"pipeline\":{%s}}",
             modules_dir, modules, pipeline);
    return text;
}

typedef struct scenario {
    generation *g;
    manifest *m;
} scenario;

static void publish(void *arg) { kernel.workers[0].gen = arg; }

static bool scenario_begin(scenario *s, const char *name, const char *modules,
                           const char *pipeline) {
    unlink(notes);
    s->g = kernel_generation(dir, name, manifest_text(modules, pipeline), modules_dir, &s->m);
    if (s->g) probe_on_loop(publish, s->g);
    return s->g != NULL;
}

/* How long a test waits for a fact it polls (a call let go, a fixture's
 * note): far beyond any backend's nap here, reached only when it fails. */
#define POLL_MS 20000

/* Wait until no call pins the scenario's generation: a call whose backend's
 * answer went astray never lets go of it (at reload it would never retire). */
static bool generation_released(generation *g, int wait_ms) {
    for (uint64_t until = mono_us() + (uint64_t)wait_ms * 1000;
         atomic_load(&g->refs) != 0 && mono_us() < until;)
        usleep(10000);
    return atomic_load(&g->refs) == 0;
}

/* Wait until the notes hold a line with needle (a fact a fixture wrote). */
static bool noted(const char *needle, int wait_ms) {
    for (uint64_t until = mono_us() + (uint64_t)wait_ms * 1000;
         count_lines(notes, needle, NULL) <= 0 && mono_us() < until;)
        usleep(1000);
    return count_lines(notes, needle, NULL) > 0;
}

static void scenario_end(scenario *s) {
    probe_on_loop(publish, kernel.gen);
    MCPG_CHECK(generation_released(s->g, POLL_MS), "%ld call(s) still pin the generation",
               (long)atomic_load(&s->g->refs));
    generation_stop(s->g);
    generation_free(s->g);
    manifest_free(s->m);
}

#define BUGS(extra) "{\"name\":\"bugs\",\"module\":\"fx_bugs\"" extra ",\"config\":{\"path\":\"%s\"}}"

static char mods[2048];

static const char *with_notes(const char *fmt) {
    snprintf(mods, sizeof mods, fmt, notes, notes, notes);
    return mods;
}

/* 1. An audit sink that answers DENY without an error: the call fails as
 * the gateway's own failure, never an empty success. */
static void audit_deny_without_error(void) {
    scenario s;
    MCPG_REQUIRE(scenario_begin(&s, "silent.json",
                                "{\"name\":\"mock\",\"module\":\"backend_mock\"},"
                                "{\"name\":\"sink\",\"module\":\"fx_sink\","
                                "\"config\":{\"mode\":\"deny_silent\"}}",
                                "\"audit\":[\"sink\"]"),
                 "generation");
    probe p;
    probe_run(&p, "tools/call", "echo", "{\"message\":\"hi\"}", "1", NULL);
    MCPG_CHECK(p.is_error && p.code == -32000 && p.http == 503,
               "silent audit DENY: is_error %d code %lld http %d (%s)", p.is_error,
               (long long)p.code, p.http, p.text);
    MCPG_CHECK(strstr(p.text, "sink") != NULL, "the error names the sink: %s", p.text);
    scenario_end(&s);
}

/* 2a. A pool backend that answered PENDING resumes while a synchronous
 * sink's emit of the timeout runs: its resume is its own. The timeout (50 ms)
 * comes well before the resume (1000 ms), which comes well before the sink's
 * emit, begun at the timeout, ends (3000 ms later). */
static void backend_resume_during_sync_sink(void) {
    scenario s;
    MCPG_REQUIRE(scenario_begin(&s, "sync.json",
                                with_notes(BUGS(",\"timeout_ms\":50") ","
                                           "{\"name\":\"sink\",\"module\":\"fx_sink\","
                                           "\"config\":{\"mode\":\"block\",\"delay_ms\":3000}}"),
                                "\"audit\":[\"sink\"]"),
                 "generation");
    probe p;
    probe_run(&p, "tools/call", "pend", "{\"ms\":1000}", "2", NULL);
    MCPG_CHECK(p.is_error && strstr(p.text, "timed out"), "timeout answered: %s", p.text);
    MCPG_CHECK(count_lines(notes, "resumed_us=", NULL) == 1, "the backend resumed");
    scenario_end(&s); /* the backend's own answer must have released the call */
}

/* 2b. The same with a sink that answers PENDING: the client's answer waits
 * for the sink's record, not for whichever resume comes first (the same
 * times as 2a: the backend resumes while the sink's record is pending). */
static void backend_resume_during_async_sink(void) {
    scenario s;
    MCPG_REQUIRE(scenario_begin(&s, "async.json",
                                with_notes(BUGS(",\"timeout_ms\":50") ","
                                           "{\"name\":\"sink\",\"module\":\"fx_sink\","
                                           "\"config\":{\"mode\":\"async\",\"delay_ms\":3000,"
                                           "\"path\":\"%s\"}}"),
                                "\"audit\":[\"sink\"]"),
                 "generation");
    probe p;
    probe_run(&p, "tools/call", "pend", "{\"ms\":1000}", "3", NULL);
    MCPG_CHECK(count_lines(notes, "resumed_us=", NULL) == 1, "the backend resumed first");
    long long durable = file_number(notes, "durable_us");
    MCPG_CHECK(durable > 0 && (long long)p.t_done >= durable,
               "answered at %llu us, the sink's record durable at %lld us",
               (unsigned long long)p.t_done, durable);
    scenario_end(&s);
}

/* 2c. A sink that resumes twice: its extra resume comes while the next
 * sink's record is pending, and must not finish that op; the client's
 * answer still waits for the second sink's record. */
static void extra_resume_of_another_sink(void) {
    scenario s;
    MCPG_REQUIRE(scenario_begin(&s, "twice.json",
                                with_notes("{\"name\":\"mock\",\"module\":\"backend_mock\"},"
                                           "{\"name\":\"twice\",\"module\":\"fx_sink\","
                                           "\"config\":{\"mode\":\"twice\",\"delay_ms\":50}},"
                                           "{\"name\":\"sink\",\"module\":\"fx_sink\","
                                           "\"config\":{\"mode\":\"async\",\"delay_ms\":1000,"
                                           "\"path\":\"%s\"}}"),
                                "\"audit\":[\"twice\",\"sink\"]"),
                 "generation");
    probe p;
    probe_run(&p, "tools/call", "echo", "{\"message\":\"hi\"}", "4", NULL);
    long long durable = file_number(notes, "durable_us");
    MCPG_CHECK(!p.is_error && durable > 0 && (long long)p.t_done >= durable,
               "answered at %llu us (%s), the second sink's record durable at %lld us",
               (unsigned long long)p.t_done, p.text, durable);
    scenario_end(&s);
}

/* 3a. Cancel reaches a pool backend whose op is pending. */
static void cancel_on_loop(void *arg) {
    probe *p = arg;
    if (p->call) call_cancel(p->call);
}

static void cancel_pool_pending(void) {
    scenario s;
    MCPG_REQUIRE(scenario_begin(&s, "cancel-pool.json", with_notes(BUGS(",\"timeout_ms\":30000")),
                                "\"audit\":[]"),
                 "generation");
    probe p;
    /* the backend's op waits, still running on its pool thread, until the
     * call says cancelled, then answers PENDING; it resumes 3 s later: the
     * one cancel below came while the op ran, and must reach the backend
     * once the op is pending (it used to be lost: a cancel reached only an
     * op already pending) */
    probe_start(&p, "tools/call", "pend", 4, "{\"ms\":3000,\"wait_cancel\":true}", "4", NULL);
    probe_submit(&p);
    MCPG_CHECK(noted("running_id=4\n", POLL_MS), "the pool backend took the call");
    probe_on_loop(cancel_on_loop, &p);
    MCPG_CHECK(noted("cancel_after_resume=", POLL_MS), "the cancel reached the backend");
    probe_join(&p);
    MCPG_CHECK(count_lines(notes, "cancel_after_resume=0", NULL) == 1,
               "cancel reached the pending pool backend once, before its resume (%d)",
               count_lines(notes, "cancel_after_resume=", NULL));
    scenario_end(&s);
}

/* 3d. A transport that lets go of a call before its complete() (a bug) is
 * refused: the call is still running (its backend pending on the pool), and
 * recycling it there would hand its object to the next request while the
 * backend and the stages still write to it. The call goes on and answers. */
static void release_on_loop(void *arg) {
    probe *p = arg;
    if (p->call) call_release(p->call);
}

static void early_release_refused(void) {
    scenario s;
    MCPG_REQUIRE(scenario_begin(&s, "early-release.json", with_notes(BUGS(",\"timeout_ms\":30000")),
                                "\"audit\":[]"),
                 "generation");
    probe p;
    probe_start(&p, "tools/call", "pend", 4, "{\"ms\":300}", "7", NULL);
    probe_submit(&p);
    MCPG_CHECK(noted("pended_id=7\n", POLL_MS), "the pool backend took the call");
    probe_on_loop(release_on_loop, &p);
    probe_join(&p);
    MCPG_CHECK(!p.is_error && strstr(p.text, "resumed"),
               "the call answered what its backend said after the early release: %s", p.text);
    scenario_end(&s);
}

/* 3b. Cancel never reaches an inline backend that has already resumed (its
 * answer is on its way to the loop, held back here by a busy loop turn). */
static void wait_then_cancel(void *arg) {
    /* the loop stays busy until the backend's thread has resumed: its
     * call_resume returned, the answer waits for this loop turn to end */
    MCPG_CHECK(noted("resume_returned_id=5\n", POLL_MS), "the inline backend resumed");
    cancel_on_loop(arg);
}

static void cancel_inline_after_resume(void) {
    scenario s;
    MCPG_REQUIRE(scenario_begin(&s, "cancel-inline.json",
                                with_notes(BUGS(",\"inline_dispatch\":true")), "\"audit\":[]"),
                 "generation");
    probe p;
    probe_start(&p, "tools/call", "pend", 4, "{\"ms\":20}", "5", NULL);
    /* the loop takes posts in their order: the call is submitted (inline, it
     * answers PENDING inside call_submit) before wait_then_cancel runs */
    probe_submit(&p);
    probe_on_loop(wait_then_cancel, &p);
    probe_join(&p);
    MCPG_CHECK(!p.is_error, "the resumed call answered: %s", p.text);
    MCPG_CHECK(count_lines(notes, "cancel_after_resume=", NULL) == 0,
               "cancel delivered after the backend resumed");
    scenario_end(&s);
}

/* 3c. An inline backend has a deadline too: one that answered PENDING and
 * resumes only after its timeout_ms gets the call answered at the deadline,
 * is told to cancel, and its late resume is taken quietly (the call stays
 * its own until then). */
static void inline_backend_deadline(void) {
    scenario s;
    MCPG_REQUIRE(scenario_begin(&s, "inline-deadline.json",
                                with_notes(BUGS(",\"inline_dispatch\":true,\"timeout_ms\":50")),
                                "\"audit\":[]"),
                 "generation");
    probe p;
    /* deadline 50 ms, resume at 3000 ms: an answer within 1500 ms came at
     * the deadline */
    probe_run(&p, "tools/call", "pend", "{\"ms\":3000}", "9", NULL);
    MCPG_CHECK(p.is_error && p.code == -32000 && strstr(p.text, "timed out after 50 ms"),
               "inline timeout answered: %lld %s", (long long)p.code, p.text);
    MCPG_CHECK(probe_elapsed_ms(&p) < 1500,
               "answered at the deadline (50 ms), not at the resume (3000 ms): %llu ms",
               (unsigned long long)probe_elapsed_ms(&p));
    MCPG_CHECK(count_lines(notes, "cancel_after_resume=0", NULL) == 1,
               "the pending inline backend was told to cancel");
    MCPG_CHECK(generation_released(s.g, POLL_MS), "its late resume let the call go");
    MCPG_CHECK(count_lines(notes, "resumed_us=", NULL) == 1, "the backend did resume, late");
    scenario_end(&s);
}

/* 4. A pool backend that timed out holds its limits until it really ends. */
static void limits_held_until_backend_ends(void) {
    scenario s;
    MCPG_REQUIRE(scenario_begin(&s, "limits.json",
                                with_notes(BUGS(",\"timeout_ms\":50") ","
                                           "{\"name\":\"cap\",\"module\":\"fx_limit\","
                                           "\"config\":{\"path\":\"%s\"}}"),
                                "\"limits\":[\"cap\"],\"audit\":[]"),
                 "generation");
    probe p;
    /* timeout 50 ms, the backend blocks 2000 ms: it times out for sure */
    probe_run(&p, "tools/call", "block", "{\"ms\":2000}", "6", NULL);
    MCPG_CHECK(p.is_error && strstr(p.text, "timed out"), "timeout answered: %s", p.text);
    MCPG_CHECK(generation_released(s.g, POLL_MS), "the call ended");
    long long ended = file_number(notes, "backend_end_us");
    long long released = file_number(notes, "release_us");
    MCPG_CHECK(ended > 0 && released >= ended,
               "limits released at %lld us, the backend ended at %lld us", released, ended);
    MCPG_CHECK(count_lines(notes, "release_us=", NULL) == 1, "released once");
    scenario_end(&s);
}

/* 5. A call handle kept past its call cannot act on the next call that
 * reuses the call object. */
static void stale_handle_refused(void) {
    scenario s;
    MCPG_REQUIRE(scenario_begin(&s, "stale.json",
                                with_notes(BUGS(",\"inline_dispatch\":true")), "\"audit\":[]"),
                 "generation");
    probe p;
    probe_run(&p, "tools/call", "keep", "{}", "7", NULL);
    MCPG_CHECK(!p.is_error, "keep: %s", p.text);
    probe_run(&p, "tools/call", "misuse", "{}", "8", NULL);
    MCPG_CHECK(!p.is_error && strstr(p.text, "mine"),
               "the next call was hijacked through a stale handle: %s", p.text);
    MCPG_CHECK(file_number(notes, "misuse_rc") != 0,
               "call_error on a stale handle answered %lld", file_number(notes, "misuse_rc"));
    scenario_end(&s);
}

/* 5b. A backend calling the transport's slots (call_outcome, call_cancel,
 * call_release) on its own call is refused: nothing filled, the call not
 * cancelled, the transport's reference not dropped under it (the call
 * answers normally and lets go of its generation once). */
static void transport_slots_refused(void) {
    scenario s;
    MCPG_REQUIRE(scenario_begin(&s, "transport.json", with_notes(BUGS("")), "\"audit\":[]"),
                 "generation");
    probe p;
    probe_run(&p, "tools/call", "transport", "{}", "9", NULL);
    MCPG_CHECK(!p.is_error && strstr(p.text, "played"), "the call answers: %s", p.text);
    MCPG_CHECK(file_number(notes, "outcome_size") == 0,
               "call_outcome with a backend's handle filled %lld bytes",
               file_number(notes, "outcome_size"));
    MCPG_CHECK(file_number(notes, "cancelled") == 0,
               "call_cancel with a backend's handle cancelled the call (%lld)",
               file_number(notes, "cancelled"));
    scenario_end(&s);
}

/* 6. At stop, module work still queued gets done(MCPG_ECANCELED) on its
 * loop, work_submit off the loop is refused, and a timer a module left
 * running is closed and freed (ASan's leak check sees it). */
static atomic_int works_cancelled, works_other, works_started;

/* A work that runs until the loop has stopped: the loop cancels the queued
 * works once it no longer takes posts, so a done() of this one, posted after,
 * never runs (bounded: a kernel that never cancels fails the count). */
static void work_nap(void *arg) {
    (void)arg;
    atomic_fetch_add(&works_started, 1);
    for (uint64_t until = mono_us() + POLL_MS * 1000ull;
         atomic_load(&works_cancelled) < 2 && mono_us() < until;)
        usleep(1000);
}

static void work_done(void *arg, int status) {
    (void)arg;
    if (worker_self() == &kernel.workers[0] && status == MCPG_ECANCELED)
        atomic_fetch_add(&works_cancelled, 1);
    else
        atomic_fetch_add(&works_other, 1);
}

static void never(void *arg) { (void)arg; }

static mcpg_instance *base_mock(void) {
    for (size_t i = 0; i < kernel.gen->n_instances; i++)
        if (strcmp(kernel.gen->instances[i]->name, "mock") == 0) return kernel.gen->instances[i];
    return NULL;
}

static int submitted_on_loop;

static void submit_works_and_leave_a_timer(void *arg) {
    mcpg_instance *inst = arg;
    for (int i = 0; i < 4; i++)
        if (HOST.work_submit(inst, &kernel.workers[0], 0, work_nap, work_done, NULL) == 0)
            submitted_on_loop++;
    mcpg_timer *t;
    MCPG_CHECK(HOST.timer_start(inst, &kernel.workers[0], 60000, 60000, never, NULL, &t) == 0,
               "timer");
}

static void stop_with_work_and_timers(void) {
    mcpg_instance *inst = base_mock();
    MCPG_REQUIRE(inst, "the base generation's mock");
    int rc = HOST.work_submit(inst, &kernel.workers[0], 0, work_nap, work_done, NULL);
    MCPG_CHECK(rc == MCPG_ESTATE, "work_submit off the loop answered %d", rc);
    probe_on_loop(submit_works_and_leave_a_timer, inst);
    MCPG_CHECK(submitted_on_loop == 4 && atomic_load(&inst->work_in_flight) == 4,
               "4 works submitted (%d), counted on the instance (%d)", submitted_on_loop,
               atomic_load(&inst->work_in_flight));
    /* the pool's 2 threads take 2 of them; 2 stay queued */
    for (uint64_t until = mono_us() + POLL_MS * 1000ull;
         atomic_load(&works_started) < 2 && mono_us() < until;)
        usleep(1000);
    MCPG_CHECK(atomic_load(&works_started) == 2, "the pool's 2 threads took 2 works: %d",
               atomic_load(&works_started));
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_defects MODULES_DIR\n");
        return 2;
    }
    modules_dir = argv[1];
    if (!mkdtemp(dir)) return 2;
    snprintf(notes, sizeof notes, "%s/notes.txt", dir);
    MCPG_REQUIRE(kernel_up(dir, "base.json",
                           manifest_text("{\"name\":\"mock\",\"module\":\"backend_mock\"}", ""),
                           modules_dir),
                 "kernel");
    audit_deny_without_error();
    backend_resume_during_sync_sink();
    backend_resume_during_async_sink();
    extra_resume_of_another_sink();
    cancel_pool_pending();
    early_release_refused();
    cancel_inline_after_resume();
    inline_backend_deadline();
    limits_held_until_backend_ends();
    stale_handle_refused();
    transport_slots_refused();
    stop_with_work_and_timers();
    mcpg_instance *mock = base_mock();
    kernel_down_keep_gen();
    MCPG_CHECK(atomic_load(&works_cancelled) == 2 && atomic_load(&works_other) == 0,
               "done(ECANCELED) on the loop for the queued works: %d (other answers: %d)",
               atomic_load(&works_cancelled), atomic_load(&works_other));
    MCPG_CHECK(atomic_load(&mock->work_in_flight) == 0 && atomic_load(&mock->live_timers) == 0,
               "the instance is quiet: %d work(s), %d timer(s)",
               atomic_load(&mock->work_in_flight), atomic_load(&mock->live_timers));
    kernel_free_gen();
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return MCPG_CHECK_EXIT("test_defects");
}
