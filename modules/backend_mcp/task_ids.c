#define _GNU_SOURCE
/* backend_mcp: task ids seen by clients are "<instance>.<upstream's id>"
 * (the kernel routes tasks/get, tasks/result... by the part before the
 * dot); the upstream knows only its own. Toward the client every "taskId"
 * string member, wherever it sits (a CreateTaskResult, a task's status, a
 * related-task _meta on a question), gets the prefix. Toward the upstream
 * the kernel has already taken it off (call_target). */
#include <string.h>

#include "upstream.h"

static void copy_value(upstream *up, const mcpg_json_span *v, mcpg_buf *out);

static void copy_raw(const mcpg_json_span *v, mcpg_buf *out) {
    if (v->type == MCPG_JSON_STRING) mcpg_buf_append(out, v->p - 1, v->n + 2);
    else mcpg_buf_append(out, v->p, v->n);
}

static void copy_object(upstream *up, const mcpg_json_span *o, mcpg_buf *out) {
    size_t it = 0;
    mcpg_json_span k, v;
    bool first = true;
    mcpg_buf_append(out, "{", 1);
    while (mcpg_json_object_next(o->p, o->n, &it, &k, &v) == 1) {
        if (!first) mcpg_buf_append(out, ",", 1);
        first = false;
        copy_raw(&k, out);
        mcpg_buf_append(out, ":", 1);
        if (v.type == MCPG_JSON_STRING && mcpg_json_string_eq(&k, "taskId", 6)) {
            mcpg_buf_append(out, "\"", 1);
            mcpg_buf_puts(out, up->name);
            mcpg_buf_append(out, ".", 1);
            mcpg_buf_append(out, v.p, v.n); /* still escaped: copied as it came */
            mcpg_buf_append(out, "\"", 1);
        } else {
            copy_value(up, &v, out);
        }
    }
    mcpg_buf_append(out, "}", 1);
}

static void copy_value(upstream *up, const mcpg_json_span *v, mcpg_buf *out) {
    if (v->type == MCPG_JSON_OBJECT) {
        copy_object(up, v, out);
    } else if (v->type == MCPG_JSON_ARRAY) {
        size_t it = 0;
        mcpg_json_span e;
        mcpg_buf_append(out, "[", 1);
        for (bool first = true; mcpg_json_array_next(v->p, v->n, &it, &e) == 1; first = false) {
            if (!first) mcpg_buf_append(out, ",", 1);
            copy_value(up, &e, out);
        }
        mcpg_buf_append(out, "]", 1);
    } else {
        copy_raw(v, out);
    }
}

bool task_ids_present(const char *json, size_t n) {
    return json && memmem(json, n, "\"taskId\"", 8) != NULL;
}

int task_ids_for_client(upstream *up, const char *obj, size_t n, mcpg_buf *out) {
    mcpg_json_span v = {.p = obj, .n = n, .type = MCPG_JSON_OBJECT};
    out->len = 0;
    copy_object(up, &v, out);
    return out->data ? 0 : MCPG_ENOMEM;
}
