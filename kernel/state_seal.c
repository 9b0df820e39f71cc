/* requestState that only its caller, retrying the same request, brings back.
 *
 * A result of type input_required carries a requestState the client echoes
 * on its retry. Whoever minted it (a backend, or an upstream behind
 * backend_mcp) cannot tell who brings it back nor whether the retry is the
 * request it was minted for. So the kernel seals every requestState a
 * client is shown, "<state>~<expiry>~<seal>": an HMAC-SHA256 (first 16
 * bytes, hex) of the caller's owner, the method, its target (tool or prompt
 * name, resource uri), the arguments, the expiry (Unix seconds,
 * gateway.request_state_ttl_ms after it was shown) and the state. On a retry, once identity has
 * run, the seal is checked and taken off: the backend sees its own state, or
 * the call is answered -32602 as for an unknown requestState (the same
 * answer whether another caller, other arguments or a changed token).
 *
 * The key is derived from the task key (task_seal.c), so a fleet sharing
 * gateway.secret_env accepts on any replica what one replica sealed. The
 * arguments are compared without the JSON whitespace between tokens, so a
 * client re-serializing them compactly or pretty still matches; their member
 * order must stay. */
#define _GNU_SOURCE
#include "call_internal.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <string.h>
#include <time.h>

#define SEAL_HEX 32
#define KEY_LEN 32

static bool carries_state(uint32_t method) {
    return method == MCPG_METHOD_TOOLS_CALL || method == MCPG_METHOD_PROMPTS_GET ||
           method == MCPG_METHOD_RESOURCES_READ;
}

/* JSON text without the whitespace outside strings. */
static int append_compact(mcpg_buf *b, const char *p, size_t n) {
    bool in_str = false, esc = false;
    size_t from = 0;
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        char ch = p[i];
        if (in_str) {
            if (esc) esc = false;
            else if (ch == '\\') esc = true;
            else if (ch == '"') in_str = false;
            continue;
        }
        if (ch == '"') in_str = true;
        if (ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r') {
            rc |= mcpg_buf_append(b, p + from, i - from);
            from = i + 1;
        }
    }
    return rc | mcpg_buf_append(b, p + from, n - from);
}

/* The arguments without their whitespace, as a field: the length is written
 * once the compact text is known. */
static int append_compact_field(mcpg_buf *b, const char *p, size_t n) {
    size_t at = b->len;
    if (seal_length_append(b, 0) || append_compact(b, p, n)) return -1;
    uint64_t len = b->len - at - 8;
    for (int i = 7; i >= 0; i--, len >>= 8) b->data[at + (size_t)i] = (char)(len & 0xff);
    return 0;
}

/* The seal of state (decoded) for c's caller and request. */
/* A virtual server's name as one more field (none for /mcp): a requestState
 * is good only on the server that gave it. */
static int server_field_append(mcpg_buf *msg, mcpg_call *c) {
    const char *server = call_server_name(c);
    return server[0] ? seal_field_append(msg, server, strlen(server)) : 0;
}

static int seal_of(mcpg_call *c, const char *state, size_t n, uint64_t expiry,
                   char out[SEAL_HEX + 1]) {
    unsigned char key[KEY_LEN], sub[EVP_MAX_MD_SIZE], mac[EVP_MAX_MD_SIZE];
    unsigned int sn = 0, mn = 0;
    static const char label[] = "mcpg requestState";
    task_seal_key(key);
    if (!HMAC(EVP_sha256(), key, sizeof key, (const unsigned char *)label, sizeof label - 1, sub,
              &sn))
        return -1;
    size_t on = 0;
    const char *owner = call_owner_of(c, &on);
    const char *method = mcpg_method_name(c->method);
    /* the name as the client knows it: a pool call's desc no longer holds it */
    const char *target = call_client_name_of(c);
    mcpg_buf msg = {0}; /* each field after its length: no field can pass for another */
    const char *args = c->d.args_json ? c->d.args_json : "{}";
    size_t args_len = c->d.args_json ? c->d.args_len : 2;
    int rc = !owner || seal_field_append(&msg, owner, on) ||
             seal_field_append(&msg, method, strlen(method)) ||
             seal_field_append(&msg, target ? target : "", target ? strlen(target) : 0) ||
             append_compact_field(&msg, args, args_len) || seal_length_append(&msg, expiry) ||
             seal_field_append(&msg, state, n) || server_field_append(&msg, c);
    if (!rc && !HMAC(EVP_sha256(), sub, sn, (const unsigned char *)msg.data, msg.len, mac, &mn))
        rc = -1;
    mcpg_buf_free(&msg);
    OPENSSL_cleanse(key, sizeof key);
    OPENSSL_cleanse(sub, sizeof sub);
    if (rc) return -1;
    mcpg_hex(mac, SEAL_HEX / 2, out);
    out[SEAL_HEX] = '\0';
    return 0;
}

static int decode(const mcpg_json_span *v, mcpg_buf *out) {
    out->len = 0;
    size_t len = 0;
    if (mcpg_buf_reserve(out, v->n + 1) || mcpg_json_string_decode(v, out->data, v->n + 1, &len))
        return -1;
    out->len = len;
    return 0;
}

/* The wall clock in whole seconds, read exactly: time() may answer from a
 * coarse clock that lags the real one by a tick, and a token's last second
 * would then be accepted after it ended. */
static uint64_t wall_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec;
}

/* When a requestState shown now lapses (Unix seconds): gateway.request_state_ttl_ms
 * from now. Wall time, so that any replica of a fleet judges it alike. */
static uint64_t expiry_of(const mcpg_call *c) {
    int64_t ttl_ms = c->gen && c->gen->m ? c->gen->m->request_state_ttl_ms : 600000;
    return wall_seconds() + (uint64_t)((ttl_ms + 999) / 1000);
}

/* A shown token "<state>~<expiry>~<seal>": the state's length and the
 * expiry; false when it has not that shape (the state itself may hold '~':
 * the token is read from its end). */
static bool split_token(const char *t, size_t len, size_t *state_len, uint64_t *expiry) {
    if (len < SEAL_HEX + 3 || t[len - SEAL_HEX - 1] != '~') return false;
    size_t end = len - SEAL_HEX - 1, i = end;
    uint64_t e = 0;
    while (i > 0 && t[i - 1] >= '0' && t[i - 1] <= '9') i--;
    if (i == end || end - i > 19 || i == 0 || t[i - 1] != '~') return false;
    for (size_t j = i; j < end; j++) e = e * 10 + (uint64_t)(t[j] - '0');
    *state_len = i - 1;
    *expiry = e;
    return true;
}

/* ---- sealing what a client is shown ---- */

static int sealed_copy(mcpg_call *c, const mcpg_json_span *res, mcpg_buf *out) {
    size_t it = 0;
    mcpg_json_span k, v;
    mcpg_buf plain = {0};
    int rc = mcpg_buf_append(out, "{", 1);
    for (bool first = true; !rc && mcpg_json_object_next_trusted(res->p, res->n, &it, &k, &v) == 1;
         first = false) {
        if (!first) rc |= mcpg_buf_append(out, ",", 1);
        rc |= mcpg_buf_append(out, k.p - 1, k.n + 2);
        rc |= mcpg_buf_append(out, ":", 1);
        if (v.type != MCPG_JSON_STRING || mcpg_json_string_eq(&k, "requestState", 12) != 1) {
            rc |= mcpg_buf_append(out, v.type == MCPG_JSON_STRING ? v.p - 1 : v.p,
                                  v.type == MCPG_JSON_STRING ? v.n + 2 : v.n);
            continue;
        }
        char seal[SEAL_HEX + 1], tail[24];
        uint64_t expiry = expiry_of(c);
        rc |= decode(&v, &plain) || seal_of(c, plain.data, plain.len, expiry, seal);
        rc |= mcpg_buf_append(out, v.p - 1, v.n + 1); /* still escaped as it came */
        snprintf(tail, sizeof tail, "~%llu~", (unsigned long long)expiry);
        rc |= mcpg_buf_puts(out, tail) | mcpg_buf_append(out, seal, SEAL_HEX);
        rc |= mcpg_buf_append(out, "\"", 1);
    }
    mcpg_buf_free(&plain);
    return rc | mcpg_buf_append(out, "}", 1);
}

int state_seal_result(mcpg_call *c) {
    mcpg_json_span res, st;
    size_t pos = 0;
    if (c->result_type != MCPG_RESULT_INPUT_REQUIRED || !c->result.len ||
        mcpg_json_value(c->result.data, c->result.len, &pos, &res) != 1 ||
        res.type != MCPG_JSON_OBJECT ||
        mcpg_json_object_get(res.p, res.n, "requestState", &st) != 1)
        return 0;
    mcpg_buf out = {0};
    if (sealed_copy(c, &res, &out)) {
        mcpg_buf_free(&out);
        return MCPG_ENOMEM;
    }
    mcpg_buf_free(&c->result);
    c->result = out;
    return 0;
}

/* ---- a retry ---- */

/* params with requestState's value replaced by the unsealed one. */
static int unsealed_params(mcpg_call *c, const char *state, size_t n) {
    const char *p = c->d.params_json;
    size_t pn = c->d.params_len, it = 0;
    mcpg_json_span k, v;
    mcpg_buf *b = &c->state_params;
    b->len = 0;
    int rc = mcpg_buf_append(b, "{", 1);
    for (bool first = true; !rc && mcpg_json_object_next_trusted(p, pn, &it, &k, &v) == 1;
         first = false) {
        if (!first) rc |= mcpg_buf_append(b, ",", 1);
        rc |= mcpg_buf_append(b, k.p - 1, k.n + 2) | mcpg_buf_append(b, ":", 1);
        if (mcpg_json_string_eq(&k, "requestState", 12) == 1)
            rc |= mcpg_buf_append_json_string(b, state, n);
        else if (v.type == MCPG_JSON_STRING)
            rc |= mcpg_buf_append(b, v.p - 1, v.n + 2);
        else
            rc |= mcpg_buf_append(b, v.p, v.n);
    }
    rc |= mcpg_buf_append(b, "}", 1);
    if (rc) return -1;
    c->d.params_json = b->data;
    c->d.params_len = b->len;
    return 0;
}

/* params.requestState: params were judged whole (judge.c), so the walk
 * trusts them; the judge said whether the member is there at all. */
static bool request_state_of(const mcpg_call *c, mcpg_json_span *v) {
    size_t it = 0;
    mcpg_json_span k;
    while (mcpg_json_object_next_trusted(c->d.params_json, c->d.params_len, &it, &k, v) == 1)
        if (mcpg_json_string_eq(&k, "requestState", 12) == 1) return true;
    return false;
}

bool state_seal_check(mcpg_call *c) {
    mcpg_json_span v;
    if (!c->has_request_state || !carries_state(c->method) || !c->d.params_json ||
        !request_state_of(c, &v))
        return true;
    mcpg_buf plain = {0};
    char want[SEAL_HEX + 1];
    size_t n = 0;
    uint64_t expiry = 0;
    bool ok = v.type == MCPG_JSON_STRING && decode(&v, &plain) == 0 &&
              split_token(plain.data, plain.len, &n, &expiry);
    ok = ok && seal_of(c, plain.data, n, expiry, want) == 0 &&
         CRYPTO_memcmp(want, plain.data + plain.len - SEAL_HEX, SEAL_HEX) == 0 &&
         wall_seconds() <= expiry && unsealed_params(c, plain.data, n) == 0;
    mcpg_buf_free(&plain);
    if (!ok)
        call_set_error(c, MCPG_RPC_INVALID_PARAMS, 400,
                       "Invalid params: requestState is unknown or expired");
    return ok;
}
