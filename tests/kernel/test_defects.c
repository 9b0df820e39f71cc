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

static void publish(void *arg) { K.workers[0].gen = arg; }

static bool scenario_begin(scenario *s, const char *name, const char *modules,
                           const char *pipeline) {
    unlink(notes);
    s->g = kernel_generation(dir, name, manifest_text(modules, pipeline), modules_dir, &s->m);
    if (s->g) probe_on_loop(publish, s->g);
    return s->g != NULL;
}

/* Wait until no call pins the scenario's generation: a call whose backend's
 * answer went astray never lets go of it (at reload it would never retire). */
static bool generation_released(generation *g, int wait_ms) {
    for (int i = 0; i < wait_ms / 10 && atomic_load(&g->refs) != 0; i++) usleep(10000);
    return atomic_load(&g->refs) == 0;
}

static void scenario_end(scenario *s) {
    probe_on_loop(publish, K.gen);
    MCPG_CHECK(generation_released(s->g, 3000), "%ld call(s) still pin the generation",
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
 * sink's emit of the timeout runs: its resume is its own. */
static void backend_resume_during_sync_sink(void) {
    scenario s;
    MCPG_REQUIRE(scenario_begin(&s, "sync.json",
                                with_notes(BUGS(",\"timeout_ms\":50") ","
                                           "{\"name\":\"sink\",\"module\":\"fx_sink\","
                                           "\"config\":{\"mode\":\"block\",\"delay_ms\":200}}"),
                                "\"audit\":[\"sink\"]"),
                 "generation");
    probe p;
    probe_run(&p, "tools/call", "pend", "{\"ms\":100}", "2", NULL);
    MCPG_CHECK(p.is_error && strstr(p.text, "timed out"), "timeout answered: %s", p.text);
    MCPG_CHECK(count_lines(notes, "resumed_us=", NULL) == 1, "the backend resumed");
    scenario_end(&s); /* the backend's own answer must have released the call */
}

/* 2b. The same with a sink that answers PENDING: the client's answer waits
 * for the sink's record, not for whichever resume comes first. */
static void backend_resume_during_async_sink(void) {
    scenario s;
    MCPG_REQUIRE(scenario_begin(&s, "async.json",
                                with_notes(BUGS(",\"timeout_ms\":50") ","
                                           "{\"name\":\"sink\",\"module\":\"fx_sink\","
                                           "\"config\":{\"mode\":\"async\",\"delay_ms\":200,"
                                           "\"path\":\"%s\"}}"),
                                "\"audit\":[\"sink\"]"),
                 "generation");
    probe p;
    probe_run(&p, "tools/call", "pend", "{\"ms\":100}", "3", NULL);
    long long durable = file_number(notes, "durable_us");
    MCPG_CHECK(durable > 0 && (long long)p.t_done >= durable,
               "answered at %llu us, the sink's record durable at %lld us",
               (unsigned long long)p.t_done, durable);
    scenario_end(&s);
}

/* 3a. Cancel reaches a pool backend whose op is pending. */
static void cancel_on_loop(void *arg) {
    probe *p = arg;
    if (p->call) call_cancel(p->call);
}

static void cancel_pool_pending(void) {
    scenario s;
    MCPG_REQUIRE(scenario_begin(&s, "cancel-pool.json", with_notes(BUGS(",\"timeout_ms\":3000")),
                                "\"audit\":[]"),
                 "generation");
    probe p;
    probe_start(&p, "tools/call", "pend", 4, "{\"ms\":300}", "4", NULL);
    probe_submit(&p);
    usleep(100 * 1000); /* the op has returned PENDING long before */
    probe_on_loop(cancel_on_loop, &p);
    probe_join(&p);
    MCPG_CHECK(count_lines(notes, "cancel_after_resume=0", NULL) == 1,
               "cancel reached the pending pool backend once (%d)",
               count_lines(notes, "cancel_after_resume=", NULL));
    scenario_end(&s);
}

/* 3b. Cancel never reaches an inline backend that has already resumed (its
 * answer is on its way to the loop, held back here by a busy loop turn). */
static void wait_then_cancel(void *arg) {
    usleep(150 * 1000); /* the backend's thread resumes meanwhile */
    cancel_on_loop(arg);
}

static void cancel_inline_after_resume(void) {
    scenario s;
    MCPG_REQUIRE(scenario_begin(&s, "cancel-inline.json",
                                with_notes(BUGS(",\"inline_dispatch\":true")), "\"audit\":[]"),
                 "generation");
    probe p;
    probe_start(&p, "tools/call", "pend", 4, "{\"ms\":20}", "5", NULL);
    probe_submit(&p);
    usleep(5 * 1000);
    probe_on_loop(wait_then_cancel, &p);
    probe_join(&p);
    MCPG_CHECK(!p.is_error, "the resumed call answered: %s", p.text);
    MCPG_CHECK(count_lines(notes, "cancel_after_resume=", NULL) == 0,
               "cancel delivered after the backend resumed");
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
    probe_run(&p, "tools/call", "block", "{\"ms\":200}", "6", NULL);
    MCPG_CHECK(p.is_error && strstr(p.text, "timed out"), "timeout answered: %s", p.text);
    MCPG_CHECK(generation_released(s.g, 3000), "the call ended");
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
    cancel_pool_pending();
    cancel_inline_after_resume();
    limits_held_until_backend_ends();
    stale_handle_refused();
    kernel_down();
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return MCPG_CHECK_EXIT("test_defects");
}
