/* Result builders: the few shapes every backend answers with, written into
 * the call's own buffer through the host table (the SDK links no kernel). */
#include <mcpg/sdk.h>

#include <stdarg.h>
#include <stdio.h>

mcpg_status mcpg_result_text(const mcpg_host *host, mcpg_call *call, const char *text,
                             size_t n, int is_error) {
    static const char head[] = "{\"content\":[{\"type\":\"text\",\"text\":";
    static const char tail[] = "}]}", tail_error[] = "}],\"isError\":true}";
    mcpg_buf *out = host->call_result_buf(call);
    int rc = !out || host->buf_append(out, head, sizeof head - 1) ||
             host->buf_append_json_string(out, text, n) ||
             (is_error ? host->buf_append(out, tail_error, sizeof tail_error - 1)
                       : host->buf_append(out, tail, sizeof tail - 1));
    if (!rc) return MCPG_CONTINUE;
    host->call_error(call, MCPG_RPC_INTERNAL_ERROR, "out of memory", NULL);
    return MCPG_DENY;
}

mcpg_status mcpg_result_input_required(const mcpg_host *host, mcpg_call *call,
                                       const char *requests_json, size_t requests_len,
                                       const char *state, size_t state_len) {
    int typed = MCPG_HOST_HAS(host, call_set_result_type);
    mcpg_buf *out = host->call_result_buf(call);
    int rc = !out || host->buf_append(out, "{\"inputRequests\":", 17) ||
             host->buf_append(out, requests_json, requests_len);
    if (!rc && state)
        rc = host->buf_append(out, ",\"requestState\":", 16) ||
             host->buf_append_json_string(out, state, state_len);
    if (!rc && !typed) rc = host->buf_append(out, ",\"resultType\":\"input_required\"", 30);
    if (!rc) rc = host->buf_append(out, "}", 1);
    if (rc) {
        host->call_error(call, MCPG_RPC_INTERNAL_ERROR, "out of memory", NULL);
        return MCPG_DENY;
    }
    if (typed) host->call_set_result_type(call, MCPG_RESULT_INPUT_REQUIRED);
    return MCPG_CONTINUE;
}

mcpg_status mcpg_result_task(const mcpg_host *host, mcpg_call *call, const char *task_json,
                             size_t task_len) {
    int typed = MCPG_HOST_HAS(host, call_set_result_type);
    size_t end = task_len;
    while (end > 0 && task_json[end - 1] != '}') end--;
    if (task_len == 0 || task_json[0] != '{' || end < 2) {
        host->call_error(call, MCPG_RPC_INTERNAL_ERROR, "a task result must be an object", NULL);
        return MCPG_DENY;
    }
    int stamp = !typed && host->call_wire(call) == MCPG_WIRE_STATELESS;
    mcpg_buf *out = host->call_result_buf(call);
    int rc;
    if (!stamp) {
        rc = !out || host->buf_append(out, task_json, task_len);
    } else { /* ,"resultType":"task" before the closing brace */
        size_t body = end - 1; /* up to the '}' */
        int empty = 1;
        for (size_t i = 1; i < body && empty; i++)
            empty = task_json[i] == ' ' || task_json[i] == '\n' || task_json[i] == '\t';
        rc = !out || host->buf_append(out, task_json, body) ||
             host->buf_append(out, empty ? "\"resultType\":\"task\"}" : ",\"resultType\":\"task\"}",
                              empty ? 20 : 21);
    }
    if (rc) {
        host->call_error(call, MCPG_RPC_INTERNAL_ERROR, "out of memory", NULL);
        return MCPG_DENY;
    }
    if (typed) host->call_set_result_type(call, MCPG_RESULT_TASK);
    return MCPG_CONTINUE;
}

mcpg_status mcpg_result_errorf(const mcpg_host *host, mcpg_call *call, int64_t code,
                               const char *fmt, ...) {
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    host->call_error(call, code, msg, NULL);
    return MCPG_DENY;
}
