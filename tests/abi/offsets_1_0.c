/* The ABI 1.0 layouts of the structs that cross the module boundary beside
 * the ops tables (the host table, the call desc, the call outcome), frozen
 * as they were when 1.0 shipped, and every member's offset pinned to the live
 * headers. A slot inserted, moved or retyped in the 1.0 part of a live struct
 * stops this file compiling; slots appended after it (later minors) do not.
 * (The descriptor, lifecycle, backend ops and config entry are frozen the
 * same way in fixture_v1_0.c.) Compile-time only: main() does nothing. */
#include <mcpg/abi.h>

#include <stddef.h>

typedef struct host_1_0 {
    uint32_t size;
    uint32_t version;
    uint16_t abi_major, abi_minor;
    uint32_t reserved0;
    const char *(*strerror)(int err);
    const char *(*errname)(int err);
    void *(*alloc)(size_t n);
    void *(*calloc)(size_t count, size_t n);
    void *(*realloc)(void *p, size_t n);
    void (*free)(void *p);
    void (*log)(mcpg_instance *self, int level, const char *fmt, ...) MCPG_PRINTF(3, 4);
    int (*log_enabled)(mcpg_instance *self, int level);
    void (*report_error)(mcpg_report *rep, const char *key_path, const char *fmt, ...)
        MCPG_PRINTF(3, 4);
    const char *(*instance_name)(mcpg_instance *self);
    const char *(*gateway_version)(void);
    uint32_t (*worker_count)(void);
    mcpg_worker *(*worker_at)(uint32_t index);
    mcpg_worker *(*worker_current)(void);
    uint32_t (*worker_index)(mcpg_worker *w);
    void *(*worker_uv_loop)(mcpg_worker *w);
    int (*worker_post)(mcpg_worker *w, mcpg_post *node);
    uint64_t (*mono_us)(void);
    int64_t (*wall_us)(void);
    int (*timer_start)(mcpg_instance *self, mcpg_worker *w, uint64_t timeout_ms,
                       uint64_t repeat_ms, void (*cb)(void *arg), void *arg,
                       mcpg_timer **timer_out);
    void (*timer_stop)(mcpg_timer *timer);
    int (*work_submit)(mcpg_instance *self, mcpg_worker *w, uint64_t timeout_ms,
                       void (*work)(void *arg), void (*done)(void *arg, int status),
                       void *arg);
    int (*buf_reserve)(mcpg_buf *b, size_t extra);
    int (*buf_append)(mcpg_buf *b, const void *p, size_t n);
    int (*buf_printf)(mcpg_buf *b, const char *fmt, ...) MCPG_PRINTF(2, 3);
    int (*buf_append_json_string)(mcpg_buf *b, const char *s, size_t n);
    void (*buf_free)(mcpg_buf *b);
    int (*json_validate)(const char *s, size_t n);
    int (*json_object_get)(const char *obj, size_t n, const char *key,
                           mcpg_json_span *out);
    int (*json_object_next)(const char *obj, size_t n, size_t *iter,
                            mcpg_json_span *key, mcpg_json_span *val);
    int (*json_array_next)(const char *arr, size_t n, size_t *iter, mcpg_json_span *val);
    int (*json_string_eq)(const mcpg_json_span *s, const char *lit, size_t n);
    int (*json_string_decode)(const mcpg_json_span *s, char *dst, size_t cap,
                              size_t *len_out);
    int (*json_int64)(const mcpg_json_span *s, int64_t *out);
    int (*call_submit)(mcpg_worker *w, const mcpg_call_desc *desc, mcpg_call **call_out);
    void (*call_cancel)(mcpg_call *call);
    void (*call_outcome)(mcpg_call *call, mcpg_call_outcome *out);
    void (*call_release)(mcpg_call *call);
    mcpg_worker *(*call_worker)(mcpg_call *call);
    uint32_t (*call_method)(mcpg_call *call);
    uint32_t (*call_wire)(mcpg_call *call);
    const char *(*call_target)(mcpg_call *call);
    const char *(*call_args)(mcpg_call *call, size_t *len_out);
    const char *(*call_params)(mcpg_call *call, size_t *len_out);
    const char *(*call_id)(mcpg_call *call, size_t *len_out);
    const char *(*call_header)(mcpg_call *call, const char *lname, size_t *len_out);
    void **(*call_slot)(mcpg_call *call, mcpg_instance *self);
    int (*call_set_identity)(mcpg_call *call, const char *principal, const char *tenant,
                             const char *roles);
    const char *(*call_principal)(mcpg_call *call);
    const char *(*call_tenant)(mcpg_call *call);
    const char *(*call_roles)(mcpg_call *call);
    int (*call_result)(mcpg_call *call, const char *json, size_t len);
    mcpg_buf *(*call_result_buf)(mcpg_call *call);
    int (*call_error)(mcpg_call *call, int64_t code, const char *message,
                      const char *data_json);
    void (*call_set_http)(mcpg_call *call, int http_status, uint32_t retry_after_s);
    void (*call_resume)(mcpg_call *call, mcpg_status status);
    int (*call_cancelled)(mcpg_call *call);
    const char *(*gateway_name)(void);
} host_1_0;

_Static_assert(offsetof(mcpg_host, size) == offsetof(host_1_0, size), "mcpg_host.size moved");
_Static_assert(offsetof(mcpg_host, version) == offsetof(host_1_0, version), "mcpg_host.version moved");
_Static_assert(offsetof(mcpg_host, abi_major) == offsetof(host_1_0, abi_major), "mcpg_host.abi_major moved");
_Static_assert(offsetof(mcpg_host, abi_minor) == offsetof(host_1_0, abi_minor), "mcpg_host.abi_minor moved");
_Static_assert(offsetof(mcpg_host, reserved0) == offsetof(host_1_0, reserved0), "mcpg_host.reserved0 moved");
_Static_assert(offsetof(mcpg_host, strerror) == offsetof(host_1_0, strerror), "mcpg_host.strerror moved");
_Static_assert(offsetof(mcpg_host, errname) == offsetof(host_1_0, errname), "mcpg_host.errname moved");
_Static_assert(offsetof(mcpg_host, alloc) == offsetof(host_1_0, alloc), "mcpg_host.alloc moved");
_Static_assert(offsetof(mcpg_host, calloc) == offsetof(host_1_0, calloc), "mcpg_host.calloc moved");
_Static_assert(offsetof(mcpg_host, realloc) == offsetof(host_1_0, realloc), "mcpg_host.realloc moved");
_Static_assert(offsetof(mcpg_host, free) == offsetof(host_1_0, free), "mcpg_host.free moved");
_Static_assert(offsetof(mcpg_host, log) == offsetof(host_1_0, log), "mcpg_host.log moved");
_Static_assert(offsetof(mcpg_host, log_enabled) == offsetof(host_1_0, log_enabled), "mcpg_host.log_enabled moved");
_Static_assert(offsetof(mcpg_host, report_error) == offsetof(host_1_0, report_error), "mcpg_host.report_error moved");
_Static_assert(offsetof(mcpg_host, instance_name) == offsetof(host_1_0, instance_name), "mcpg_host.instance_name moved");
_Static_assert(offsetof(mcpg_host, gateway_version) == offsetof(host_1_0, gateway_version), "mcpg_host.gateway_version moved");
_Static_assert(offsetof(mcpg_host, worker_count) == offsetof(host_1_0, worker_count), "mcpg_host.worker_count moved");
_Static_assert(offsetof(mcpg_host, worker_at) == offsetof(host_1_0, worker_at), "mcpg_host.worker_at moved");
_Static_assert(offsetof(mcpg_host, worker_current) == offsetof(host_1_0, worker_current), "mcpg_host.worker_current moved");
_Static_assert(offsetof(mcpg_host, worker_index) == offsetof(host_1_0, worker_index), "mcpg_host.worker_index moved");
_Static_assert(offsetof(mcpg_host, worker_uv_loop) == offsetof(host_1_0, worker_uv_loop), "mcpg_host.worker_uv_loop moved");
_Static_assert(offsetof(mcpg_host, worker_post) == offsetof(host_1_0, worker_post), "mcpg_host.worker_post moved");
_Static_assert(offsetof(mcpg_host, mono_us) == offsetof(host_1_0, mono_us), "mcpg_host.mono_us moved");
_Static_assert(offsetof(mcpg_host, wall_us) == offsetof(host_1_0, wall_us), "mcpg_host.wall_us moved");
_Static_assert(offsetof(mcpg_host, timer_start) == offsetof(host_1_0, timer_start), "mcpg_host.timer_start moved");
_Static_assert(offsetof(mcpg_host, timer_stop) == offsetof(host_1_0, timer_stop), "mcpg_host.timer_stop moved");
_Static_assert(offsetof(mcpg_host, work_submit) == offsetof(host_1_0, work_submit), "mcpg_host.work_submit moved");
_Static_assert(offsetof(mcpg_host, buf_reserve) == offsetof(host_1_0, buf_reserve), "mcpg_host.buf_reserve moved");
_Static_assert(offsetof(mcpg_host, buf_append) == offsetof(host_1_0, buf_append), "mcpg_host.buf_append moved");
_Static_assert(offsetof(mcpg_host, buf_printf) == offsetof(host_1_0, buf_printf), "mcpg_host.buf_printf moved");
_Static_assert(offsetof(mcpg_host, buf_append_json_string) == offsetof(host_1_0, buf_append_json_string), "mcpg_host.buf_append_json_string moved");
_Static_assert(offsetof(mcpg_host, buf_free) == offsetof(host_1_0, buf_free), "mcpg_host.buf_free moved");
_Static_assert(offsetof(mcpg_host, json_validate) == offsetof(host_1_0, json_validate), "mcpg_host.json_validate moved");
_Static_assert(offsetof(mcpg_host, json_object_get) == offsetof(host_1_0, json_object_get), "mcpg_host.json_object_get moved");
_Static_assert(offsetof(mcpg_host, json_object_next) == offsetof(host_1_0, json_object_next), "mcpg_host.json_object_next moved");
_Static_assert(offsetof(mcpg_host, json_array_next) == offsetof(host_1_0, json_array_next), "mcpg_host.json_array_next moved");
_Static_assert(offsetof(mcpg_host, json_string_eq) == offsetof(host_1_0, json_string_eq), "mcpg_host.json_string_eq moved");
_Static_assert(offsetof(mcpg_host, json_string_decode) == offsetof(host_1_0, json_string_decode), "mcpg_host.json_string_decode moved");
_Static_assert(offsetof(mcpg_host, json_int64) == offsetof(host_1_0, json_int64), "mcpg_host.json_int64 moved");
_Static_assert(offsetof(mcpg_host, call_submit) == offsetof(host_1_0, call_submit), "mcpg_host.call_submit moved");
_Static_assert(offsetof(mcpg_host, call_cancel) == offsetof(host_1_0, call_cancel), "mcpg_host.call_cancel moved");
_Static_assert(offsetof(mcpg_host, call_outcome) == offsetof(host_1_0, call_outcome), "mcpg_host.call_outcome moved");
_Static_assert(offsetof(mcpg_host, call_release) == offsetof(host_1_0, call_release), "mcpg_host.call_release moved");
_Static_assert(offsetof(mcpg_host, call_worker) == offsetof(host_1_0, call_worker), "mcpg_host.call_worker moved");
_Static_assert(offsetof(mcpg_host, call_method) == offsetof(host_1_0, call_method), "mcpg_host.call_method moved");
_Static_assert(offsetof(mcpg_host, call_wire) == offsetof(host_1_0, call_wire), "mcpg_host.call_wire moved");
_Static_assert(offsetof(mcpg_host, call_target) == offsetof(host_1_0, call_target), "mcpg_host.call_target moved");
_Static_assert(offsetof(mcpg_host, call_args) == offsetof(host_1_0, call_args), "mcpg_host.call_args moved");
_Static_assert(offsetof(mcpg_host, call_params) == offsetof(host_1_0, call_params), "mcpg_host.call_params moved");
_Static_assert(offsetof(mcpg_host, call_id) == offsetof(host_1_0, call_id), "mcpg_host.call_id moved");
_Static_assert(offsetof(mcpg_host, call_header) == offsetof(host_1_0, call_header), "mcpg_host.call_header moved");
_Static_assert(offsetof(mcpg_host, call_slot) == offsetof(host_1_0, call_slot), "mcpg_host.call_slot moved");
_Static_assert(offsetof(mcpg_host, call_set_identity) == offsetof(host_1_0, call_set_identity), "mcpg_host.call_set_identity moved");
_Static_assert(offsetof(mcpg_host, call_principal) == offsetof(host_1_0, call_principal), "mcpg_host.call_principal moved");
_Static_assert(offsetof(mcpg_host, call_tenant) == offsetof(host_1_0, call_tenant), "mcpg_host.call_tenant moved");
_Static_assert(offsetof(mcpg_host, call_roles) == offsetof(host_1_0, call_roles), "mcpg_host.call_roles moved");
_Static_assert(offsetof(mcpg_host, call_result) == offsetof(host_1_0, call_result), "mcpg_host.call_result moved");
_Static_assert(offsetof(mcpg_host, call_result_buf) == offsetof(host_1_0, call_result_buf), "mcpg_host.call_result_buf moved");
_Static_assert(offsetof(mcpg_host, call_error) == offsetof(host_1_0, call_error), "mcpg_host.call_error moved");
_Static_assert(offsetof(mcpg_host, call_set_http) == offsetof(host_1_0, call_set_http), "mcpg_host.call_set_http moved");
_Static_assert(offsetof(mcpg_host, call_resume) == offsetof(host_1_0, call_resume), "mcpg_host.call_resume moved");
_Static_assert(offsetof(mcpg_host, call_cancelled) == offsetof(host_1_0, call_cancelled), "mcpg_host.call_cancelled moved");
_Static_assert(offsetof(mcpg_host, gateway_name) == offsetof(host_1_0, gateway_name), "mcpg_host.gateway_name moved");

typedef struct call_desc_1_0 {
    uint32_t size;
    uint32_t wire;
    const char *method;
    size_t method_len;
    const char *name;
    size_t name_len;
    const char *params_json;
    size_t params_len;
    const char *args_json;
    size_t args_len;
    const char *id_json;
    size_t id_len;
    const char *session_id;
    size_t session_id_len;
    void *transport_ctx;
    mcpg_header_fn header;
    void (*complete)(void *transport_ctx, mcpg_call *call);
} call_desc_1_0;

_Static_assert(offsetof(mcpg_call_desc, size) == offsetof(call_desc_1_0, size), "mcpg_call_desc.size moved");
_Static_assert(offsetof(mcpg_call_desc, wire) == offsetof(call_desc_1_0, wire), "mcpg_call_desc.wire moved");
_Static_assert(offsetof(mcpg_call_desc, method) == offsetof(call_desc_1_0, method), "mcpg_call_desc.method moved");
_Static_assert(offsetof(mcpg_call_desc, method_len) == offsetof(call_desc_1_0, method_len), "mcpg_call_desc.method_len moved");
_Static_assert(offsetof(mcpg_call_desc, name) == offsetof(call_desc_1_0, name), "mcpg_call_desc.name moved");
_Static_assert(offsetof(mcpg_call_desc, name_len) == offsetof(call_desc_1_0, name_len), "mcpg_call_desc.name_len moved");
_Static_assert(offsetof(mcpg_call_desc, params_json) == offsetof(call_desc_1_0, params_json), "mcpg_call_desc.params_json moved");
_Static_assert(offsetof(mcpg_call_desc, params_len) == offsetof(call_desc_1_0, params_len), "mcpg_call_desc.params_len moved");
_Static_assert(offsetof(mcpg_call_desc, args_json) == offsetof(call_desc_1_0, args_json), "mcpg_call_desc.args_json moved");
_Static_assert(offsetof(mcpg_call_desc, args_len) == offsetof(call_desc_1_0, args_len), "mcpg_call_desc.args_len moved");
_Static_assert(offsetof(mcpg_call_desc, id_json) == offsetof(call_desc_1_0, id_json), "mcpg_call_desc.id_json moved");
_Static_assert(offsetof(mcpg_call_desc, id_len) == offsetof(call_desc_1_0, id_len), "mcpg_call_desc.id_len moved");
_Static_assert(offsetof(mcpg_call_desc, session_id) == offsetof(call_desc_1_0, session_id), "mcpg_call_desc.session_id moved");
_Static_assert(offsetof(mcpg_call_desc, session_id_len) == offsetof(call_desc_1_0, session_id_len), "mcpg_call_desc.session_id_len moved");
_Static_assert(offsetof(mcpg_call_desc, transport_ctx) == offsetof(call_desc_1_0, transport_ctx), "mcpg_call_desc.transport_ctx moved");
_Static_assert(offsetof(mcpg_call_desc, header) == offsetof(call_desc_1_0, header), "mcpg_call_desc.header moved");
_Static_assert(offsetof(mcpg_call_desc, complete) == offsetof(call_desc_1_0, complete), "mcpg_call_desc.complete moved");

typedef struct call_outcome_1_0 {
    uint32_t size;
    int is_error;
    const char *result;
    size_t result_len;
    int64_t error_code;
    const char *error_message;
    const char *error_data;
    size_t error_data_len;
    int http_status;
    uint32_t retry_after_s;
} call_outcome_1_0;

_Static_assert(offsetof(mcpg_call_outcome, size) == offsetof(call_outcome_1_0, size), "mcpg_call_outcome.size moved");
_Static_assert(offsetof(mcpg_call_outcome, is_error) == offsetof(call_outcome_1_0, is_error), "mcpg_call_outcome.is_error moved");
_Static_assert(offsetof(mcpg_call_outcome, result) == offsetof(call_outcome_1_0, result), "mcpg_call_outcome.result moved");
_Static_assert(offsetof(mcpg_call_outcome, result_len) == offsetof(call_outcome_1_0, result_len), "mcpg_call_outcome.result_len moved");
_Static_assert(offsetof(mcpg_call_outcome, error_code) == offsetof(call_outcome_1_0, error_code), "mcpg_call_outcome.error_code moved");
_Static_assert(offsetof(mcpg_call_outcome, error_message) == offsetof(call_outcome_1_0, error_message), "mcpg_call_outcome.error_message moved");
_Static_assert(offsetof(mcpg_call_outcome, error_data) == offsetof(call_outcome_1_0, error_data), "mcpg_call_outcome.error_data moved");
_Static_assert(offsetof(mcpg_call_outcome, error_data_len) == offsetof(call_outcome_1_0, error_data_len), "mcpg_call_outcome.error_data_len moved");
_Static_assert(offsetof(mcpg_call_outcome, http_status) == offsetof(call_outcome_1_0, http_status), "mcpg_call_outcome.http_status moved");
_Static_assert(offsetof(mcpg_call_outcome, retry_after_s) == offsetof(call_outcome_1_0, retry_after_s), "mcpg_call_outcome.retry_after_s moved");

#define END_OF(type, last) (offsetof(type, last) + sizeof(((type *)0)->last))
_Static_assert(END_OF(host_1_0, gateway_name) == MCPG_HOST_SIZE_1_0, "host 1.0 size");
_Static_assert(END_OF(call_desc_1_0, complete) == MCPG_CALL_DESC_SIZE_1_0, "call desc 1.0 size");
_Static_assert(END_OF(call_outcome_1_0, retry_after_s) == MCPG_CALL_OUTCOME_SIZE_1_0,
               "call outcome 1.0 size");

int main(void) { return 0; }
