/* Task ids that only their owner can use.
 *
 * A backend names a task "<instance>.<its id>" and the kernel routes
 * tasks/get, tasks/result, tasks/cancel and tasks/update by the part before
 * the dot. A backend does not know who asked, so by itself anyone holding an
 * id could read or cancel another principal's task. The kernel therefore
 * seals every task id a client is shown, "<instance>.<its id>~<seal>", where
 * the seal is an HMAC-SHA256 (first 16 bytes, hex) of the caller's owner
 * (host->call_owner: principal and tenant, or "" without identity) and the
 * id, under the gateway's task key. A request naming a task is routed by
 * the id without its seal, and once identity has run, a seal that is not
 * the caller's makes the task unknown: the same answer as an id nobody made.
 *
 * The key: SHA-256 of the secret in the environment variable that
 * gateway.secret_env names (every replica of a fleet sets the same, so a
 * task made through one replica is used through any), else random, drawn
 * once per process (ids outlive reloads, not restarts). */
#define _GNU_SOURCE
#include "call_internal.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <pthread.h>
#include <string.h>
#include <sys/random.h>

#define SEAL_HEX 32 /* 16 bytes */
#define KEY_LEN 32

static unsigned char g_key[KEY_LEN];
static pthread_once_t g_random_once = PTHREAD_ONCE_INIT;
static bool g_key_set;
static pthread_mutex_t g_key_lock = PTHREAD_MUTEX_INITIALIZER;

static void random_key(void) {
    unsigned char k[KEY_LEN];
    size_t got = 0;
    while (got < sizeof k) {
        ssize_t n = getrandom(k + got, sizeof k - got, 0);
        if (n > 0) got += (size_t)n;
    }
    pthread_mutex_lock(&g_key_lock);
    if (!g_key_set) memcpy(g_key, k, sizeof k);
    g_key_set = true;
    pthread_mutex_unlock(&g_key_lock);
}

void task_seal_configure(const char *secret, size_t n) {
    if (secret && n) {
        unsigned char md[KEY_LEN];
        unsigned int mdn = 0;
        EVP_Digest(secret, n, md, &mdn, EVP_sha256(), NULL);
        pthread_mutex_lock(&g_key_lock);
        memcpy(g_key, md, sizeof md);
        g_key_set = true;
        pthread_mutex_unlock(&g_key_lock);
        return;
    }
    pthread_once(&g_random_once, random_key);
}

void task_seal_key(unsigned char key[KEY_LEN]) {
    pthread_once(&g_random_once, random_key); /* a key even if nothing configured one */
    pthread_mutex_lock(&g_key_lock);
    memcpy(key, g_key, KEY_LEN);
    pthread_mutex_unlock(&g_key_lock);
}

int seal_length_append(mcpg_buf *b, uint64_t n) {
    unsigned char be[8];
    for (int i = 7; i >= 0; i--, n >>= 8) be[i] = (unsigned char)(n & 0xff);
    return mcpg_buf_append(b, (const char *)be, sizeof be);
}

int seal_field_append(mcpg_buf *b, const char *p, size_t n) {
    return seal_length_append(b, n) || mcpg_buf_append(b, p, n);
}

/* The seal of id for owner on a server ("" for /mcp), as SEAL_HEX hex
 * digits (out: SEAL_HEX + 1). A virtual server's name is a field of its own,
 * so a task is its server's; /mcp's seals are as they were before servers
 * (ids a fleet handed out stay good across an upgrade). */
static void seal_of(const char *owner, size_t on, const char *server, const char *id, size_t n,
                    char *out) {
    pthread_once(&g_random_once, random_key); /* a key even if nothing configured one */
    unsigned char key[KEY_LEN], mac[EVP_MAX_MD_SIZE];
    pthread_mutex_lock(&g_key_lock);
    memcpy(key, g_key, sizeof key);
    pthread_mutex_unlock(&g_key_lock);
    unsigned int mn = 0;
    mcpg_buf msg = {0}; /* each field after its length: no owner can pass for another */
    bool ok = !seal_field_append(&msg, owner, on) && !seal_field_append(&msg, id, n) &&
              (!server[0] || !seal_field_append(&msg, server, strlen(server))) &&
              HMAC(EVP_sha256(), key, sizeof key, (const unsigned char *)msg.data, msg.len, mac, &mn);
    mcpg_buf_free(&msg);
    if (!ok) memset(mac, 0, sizeof mac); /* seals nothing a caller could have: refused */
    mcpg_hex(mac, SEAL_HEX / 2, out);
    out[SEAL_HEX] = '\0';
}

size_t task_seal_split(const char *id, size_t n, char *seal) {
    const char *t = n > SEAL_HEX ? id + n - SEAL_HEX - 1 : NULL;
    if (!t || *t != '~') return 0;
    for (size_t i = 0; i < SEAL_HEX; i++) {
        char ch = t[1 + i];
        if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'))) return 0;
    }
    memcpy(seal, t + 1, SEAL_HEX);
    seal[SEAL_HEX] = '\0';
    return (size_t)(t - id);
}

bool task_seal_matches(mcpg_call *c, const char *id, size_t n, const char *seal) {
    size_t on = 0;
    const char *owner = call_owner_of(c, &on);
    if (!owner) return false;
    char want[SEAL_HEX + 1];
    seal_of(owner, on, call_server_name(c), id, n, want);
    return CRYPTO_memcmp(want, seal, SEAL_HEX) == 0;
}

/* ---- sealing what a client is shown ---- */

/* "taskId" as a member name somewhere in json. Looked for by its 'I' (rare
 * in JSON text: memchr's pace), not by memmem, which costs more than the
 * rest of this check on every result. */
static bool has_task_ids(const char *json, size_t n) {
    if (!json) return false;
    for (const char *p = memchr(json, 'I', n); p; p = memchr(p + 1, 'I', n - (size_t)(p + 1 - json)))
        if (p - json >= 5 && json + n - p >= 3 && !memcmp(p - 5, "\"task", 5) && !memcmp(p, "Id\"", 3))
            return true;
    return false;
}

static int seal_value(mcpg_call *c, const mcpg_json_span *v, mcpg_buf *out);

static int seal_string(mcpg_call *c, const mcpg_json_span *v, mcpg_buf *out) {
    char id[512];
    size_t n = 0;
    if (v->n >= sizeof id || mcpg_json_string_decode(v, id, sizeof id, &n) != 0)
        return mcpg_buf_append(out, v->p - 1, v->n + 2); /* no id the kernel routes: as it is */
    size_t on = 0;
    const char *owner = call_owner_of(c, &on);
    if (!owner) return MCPG_ENOMEM;
    char seal[SEAL_HEX + 1];
    seal_of(owner, on, call_server_name(c), id, n, seal);
    int rc = mcpg_buf_append(out, "\"", 1);
    rc |= mcpg_buf_append(out, v->p, v->n); /* still escaped as it came */
    rc |= mcpg_buf_append(out, "~", 1);
    rc |= mcpg_buf_append(out, seal, SEAL_HEX);
    return rc | mcpg_buf_append(out, "\"", 1);
}

static int seal_object(mcpg_call *c, const mcpg_json_span *o, mcpg_buf *out) {
    size_t it = 0;
    mcpg_json_span k, v;
    int rc = mcpg_buf_append(out, "{", 1);
    for (bool first = true; !rc && mcpg_json_object_next_trusted(o->p, o->n, &it, &k, &v) == 1;
         first = false) {
        if (!first) rc |= mcpg_buf_append(out, ",", 1);
        rc |= mcpg_buf_append(out, k.p - 1, k.n + 2);
        rc |= mcpg_buf_append(out, ":", 1);
        if (v.type == MCPG_JSON_STRING && mcpg_json_string_eq(&k, "taskId", 6) == 1)
            rc |= seal_string(c, &v, out);
        else
            rc |= seal_value(c, &v, out);
    }
    return rc | mcpg_buf_append(out, "}", 1);
}

static int seal_value(mcpg_call *c, const mcpg_json_span *v, mcpg_buf *out) {
    if (v->type == MCPG_JSON_OBJECT) return seal_object(c, v, out);
    if (v->type != MCPG_JSON_ARRAY) {
        if (v->type == MCPG_JSON_STRING) return mcpg_buf_append(out, v->p - 1, v->n + 2);
        return mcpg_buf_append(out, v->p, v->n);
    }
    size_t it = 0;
    mcpg_json_span e;
    int rc = mcpg_buf_append(out, "[", 1);
    for (bool first = true; !rc && mcpg_json_array_next(v->p, v->n, &it, &e) == 1; first = false) {
        if (!first) rc |= mcpg_buf_append(out, ",", 1);
        rc |= seal_value(c, &e, out);
    }
    return rc | mcpg_buf_append(out, "]", 1);
}

int task_seal_json(mcpg_call *c, const char *json, size_t n, mcpg_buf *out) {
    if (!has_task_ids(json, n)) return 1;
    size_t pos = 0;
    mcpg_json_span v;
    if (mcpg_json_value(json, n, &pos, &v) != 1) return 1; /* not JSON: nothing the kernel reads */
    out->len = 0;
    return seal_value(c, &v, out) ? MCPG_ENOMEM : 0;
}
