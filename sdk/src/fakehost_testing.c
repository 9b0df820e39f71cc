/* What every module's unit test would otherwise write for itself around the
 * fake host (declared in mcpg/fakehost.h): loading or ending the test, one
 * tools/call to its end, the text of its answer, a clock, a file. */
#include "fakehost_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Nothing is left to test without the instance: say why, and end. */
static mcpg_instance *loaded_or_exit(mcpg_fakehost *fh, int rc, mcpg_instance *inst,
                                     const char *instance_name, const char *config_json) {
    if (rc == 0) return inst;
    fprintf(stderr, "load %s failed: %d\nconfig: %s\n%s%s", instance_name, rc,
            config_json ? config_json : "(none)", mcpg_fakehost_report_text(fh),
            mcpg_fakehost_log_text(fh));
    exit(1);
}

mcpg_instance *mcpg_fakehost_load_file_or_exit(mcpg_fakehost *fh, const char *so_path,
                                               const char *instance_name, const char *config_json) {
    mcpg_instance *inst = NULL;
    int rc = mcpg_fakehost_load_file(fh, so_path, instance_name, config_json, &inst);
    return loaded_or_exit(fh, rc, inst, instance_name, config_json);
}

mcpg_instance *mcpg_fakehost_load_or_exit(mcpg_fakehost *fh, const mcpg_module *m,
                                          const char *instance_name, const char *config_json) {
    mcpg_instance *inst = NULL;
    int rc = mcpg_fakehost_load(fh, m, instance_name, config_json, &inst);
    return loaded_or_exit(fh, rc, inst, instance_name, config_json);
}

/* The answer of a finished call: its result's text, or NULL with its error. */
static char *answer_of(mcpg_fakehost *fh, mcpg_call *c, int st, const char *tool, int64_t *code,
                       char *msg, size_t msgcap) {
    const char *error = mcpg_fakehost_error_message(c);
    *code = mcpg_fakehost_error_code(c);
    if (msg && msgcap) snprintf(msg, msgcap, "%s", error ? error : "");
    if (st == MCPG_DENY) return NULL;
    const char *result = mcpg_fakehost_result(c);
    if (st != MCPG_CONTINUE || !result) {
        fh_fail(fh, "tools/call %s: ended with status %d, neither a result nor an error", tool, st);
        return NULL;
    }
    if (mcpg_json_validate(result, strlen(result)) != 0) {
        fh_fail(fh, "tools/call %s: the result is not JSON: %s", tool, result);
        return NULL;
    }
    return strdup(result);
}

char *mcpg_fakehost_call_tool(mcpg_fakehost *fh, mcpg_instance *inst, const char *tool,
                              const char *args_json, uint64_t timeout_ms, int64_t *code, char *msg,
                              size_t msgcap) {
    *code = 0;
    if (msg && msgcap) msg[0] = '\0';
    mcpg_call *c = mcpg_fakehost_call_new(fh, "tools/call", tool, args_json, "1");
    if (!c) {
        fh_fail(fh, "tools/call %s: no call (arguments not a JSON object, or out of memory)", tool);
        return NULL;
    }
    int st = mcpg_fakehost_run(fh, inst, c, timeout_ms);
    char *result = answer_of(fh, c, st, tool, code, msg, msgcap);
    mcpg_fakehost_call_free(fh, c);
    return result;
}

/* A string member of obj, decoded and malloc'd; NULL when not a string. */
static char *string_member(const mcpg_json_span *obj, const char *key) {
    mcpg_json_span v;
    size_t len;
    if (mcpg_json_object_get(obj->p, obj->n, key, &v) != 1 || v.type != MCPG_JSON_STRING) return NULL;
    char *s = malloc(v.n + 1); /* decoding never lengthens a string */
    if (s && mcpg_json_string_decode(&v, s, v.n + 1, &len) != 0) {
        free(s);
        return NULL;
    }
    return s;
}

char *mcpg_fakehost_result_text(const char *result_json, int *is_error) {
    size_t n = strlen(result_json), it = 0;
    mcpg_json_span content, item, flag;
    if (is_error)
        *is_error = mcpg_json_object_get(result_json, n, "isError", &flag) == 1 &&
                    flag.type == MCPG_JSON_TRUE;
    if (mcpg_json_object_get(result_json, n, "content", &content) != 1 ||
        mcpg_json_array_next(content.p, content.n, &it, &item) != 1 || item.type != MCPG_JSON_OBJECT)
        return NULL;
    char *type = string_member(&item, "type");
    int is_text = type && strcmp(type, "text") == 0;
    free(type);
    return is_text ? string_member(&item, "text") : NULL;
}

static struct timespec monotonic_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts;
}

uint64_t mcpg_fakehost_now_ms(void) {
    struct timespec ts = monotonic_now();
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

double mcpg_fakehost_now_s(void) {
    struct timespec ts = monotonic_now();
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void mcpg_fakehost_sleep_ms(unsigned ms) {
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    } /* a signal cut it short: sleep what is left */
}

int mcpg_fakehost_write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    int wrote = fputs(text, f) >= 0;
    return fclose(f) == 0 && wrote ? 0 : -1;
}
