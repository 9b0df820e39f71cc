/* mcpg-events-load's pure pieces (no sockets): signing, request text, the
 * reading of a stream message, the sequence judge. See events.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "events.h"

#define PROTOCOL_VERSION "2026-07-28"

int ev_secret_key(const char *secret, unsigned char key[EV_KEY_MAX]) {
    if (strncmp(secret, "whsec_", 6) != 0) return -1;
    const char *b64 = secret + 6;
    size_t n = strlen(b64);
    if (n == 0 || n % 4 || n > 4 * ((EV_KEY_MAX + 2) / 3)) return -1;
    unsigned char buf[EV_KEY_MAX + 3];
    int len = EVP_DecodeBlock(buf, (const unsigned char *)b64, (int)n);
    if (len < 0) return -1;
    /* EVP_DecodeBlock counts the padding as zero bytes */
    if (b64[n - 1] == '=') len--;
    if (b64[n - 2] == '=') len--;
    if (len < 1 || len > (int)EV_KEY_MAX) return -1;
    memcpy(key, buf, (size_t)len);
    return len;
}

size_t ev_sign(const unsigned char *key, size_t keylen, const char *id, size_t idlen, const char *ts, size_t tslen,
               const char *body, size_t blen, char *out) {
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int maclen = 0;
    size_t mlen = idlen + 1 + tslen + 1 + blen;
    char stack[4096], *msg = mlen <= sizeof stack ? stack : malloc(mlen);
    if (!msg) return out[0] = '\0', 0;
    memcpy(msg, id, idlen);
    msg[idlen] = '.';
    memcpy(msg + idlen + 1, ts, tslen);
    msg[idlen + 1 + tslen] = '.';
    memcpy(msg + idlen + tslen + 2, body, blen);
    HMAC(EVP_sha256(), key, (int)keylen, (const unsigned char *)msg, mlen, mac, &maclen);
    if (msg != stack) free(msg);
    memcpy(out, "v1,", 3);
    int n = EVP_EncodeBlock((unsigned char *)out + 3, mac, (int)maclen);
    out[3 + n] = '\0';
    return 3 + (size_t)n;
}

size_t ev_post_format(char *dst, const char *host_port, const char *source, const char *type, const char *run,
                      const unsigned char *key, size_t keylen, unsigned p, uint64_t n, uint64_t t_us, uint64_t ts_s) {
    char body[512], id[96], ts[24], sig[EV_SIG_MAX];
    int idlen = snprintf(id, sizeof id, "p%u-%llu-%s", p, (unsigned long long)n, run);
    if (idlen < 0 || (size_t)idlen >= sizeof id) return 0;
    int blen = snprintf(body, sizeof body, "{\"name\":\"%s\",\"id\":\"%s\",\"data\":{\"p\":%u,\"n\":%llu,\"t\":%llu}}",
                        type, id, p, (unsigned long long)n, (unsigned long long)t_us);
    int tslen = snprintf(ts, sizeof ts, "%llu", (unsigned long long)ts_s);
    if (blen < 0 || (size_t)blen >= sizeof body) return 0;
    ev_sign(key, keylen, id, (size_t)idlen, ts, (size_t)tslen, body, (size_t)blen, sig);
    int len = snprintf(dst, EV_POST_MAX,
                       "POST /webhooks/events/%s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
                       "webhook-id: %s\r\nwebhook-timestamp: %s\r\nwebhook-signature: %s\r\n"
                       "Content-Length: %d\r\n\r\n%s",
                       source, host_port, id, ts, sig, blen, body);
    return len < 0 || (size_t)len >= EV_POST_MAX ? 0 : (size_t)len;
}

size_t ev_stream_format(char *dst, const char *host_port, const char *type, uint64_t id, const char *cursor,
                        size_t cursor_len) {
    char body[1024];
    int blen = snprintf(body, sizeof body,
                        "{\"jsonrpc\":\"2.0\",\"id\":%llu,\"method\":\"events/stream\",\"params\":{\"name\":\"%s\","
                        "\"cursor\":%.*s,\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"" PROTOCOL_VERSION
                        "\",\"io.modelcontextprotocol/clientCapabilities\":{},"
                        "\"io.modelcontextprotocol/clientInfo\":{\"name\":\"mcpg-events-load\",\"version\":\"0.1\"}}}}",
                        (unsigned long long)id, type, cursor ? (int)cursor_len : 4, cursor ? cursor : "null");
    if (blen < 0 || (size_t)blen >= sizeof body) return 0;
    int len = snprintf(dst, EV_STREAM_REQ_MAX,
                       "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
                       "Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: " PROTOCOL_VERSION "\r\n"
                       "Mcp-Method: events/stream\r\nMcp-Name: %s\r\nContent-Length: %d\r\n\r\n%s",
                       host_port, type, blen, body);
    return len < 0 || (size_t)len >= EV_STREAM_REQ_MAX ? 0 : (size_t)len;
}

/* A JSON integer's text (no fraction, no exponent). */
static bool int_of(const char *v, size_t n, int64_t *out) {
    size_t i = 0;
    bool neg = n && v[0] == '-';
    if (neg) i++;
    if (i == n || n - i > 18) return false;
    int64_t x = 0;
    for (; i < n; i++) {
        if (v[i] < '0' || v[i] > '9') return false;
        x = x * 10 + (v[i] - '0');
    }
    *out = neg ? -x : x;
    return true;
}

static bool is(const char *v, size_t n, const char *want) { return n == strlen(want) && memcmp(v, want, n) == 0; }

void ev_msg_read(const char *json, size_t len, ev_msg *m) {
    static const char *const top_keys[] = {"error", "method", "params"};
    static const char *const params_keys[] = {"cursor", "name", "data"};
    static const char *const data_keys[] = {"p", "n", "t"};
    load_json_value top[3], pa[3], d[3];
    memset(m, 0, sizeof *m);
    if (load_json_members(json, len, top_keys, 3, top) < 0) {
        m->kind = EV_MSG_BAD;
        return;
    }
    if (top[0].v) {
        m->kind = EV_MSG_ERROR;
        return;
    }
    if (!top[1].v) return; /* EV_MSG_OTHER: a result (the stream's end) or something else */
    if (is(top[1].v, top[1].len, "\"notifications/events/active\"")) m->kind = EV_MSG_ACTIVE;
    else if (is(top[1].v, top[1].len, "\"notifications/events/event\"")) m->kind = EV_MSG_EVENT;
    else if (is(top[1].v, top[1].len, "\"notifications/events/heartbeat\"")) m->kind = EV_MSG_HEARTBEAT;
    else return;
    if (!top[2].v || top[2].v[0] != '{' || load_json_members(top[2].v, top[2].len, params_keys, 3, pa) < 0) {
        m->kind = EV_MSG_BAD;
        return;
    }
    if (pa[0].v) m->cursor = pa[0].v, m->cursor_len = pa[0].len;
    if (m->kind != EV_MSG_EVENT) return;
    if (pa[1].v && pa[1].len >= 2 && pa[1].v[0] == '"') m->name = pa[1].v + 1, m->name_len = pa[1].len - 2;
    if (!pa[2].v || pa[2].v[0] != '{' || load_json_members(pa[2].v, pa[2].len, data_keys, 3, d) < 3) return;
    int64_t p, n, t;
    if (int_of(d[0].v, d[0].len, &p) && int_of(d[1].v, d[1].len, &n) && int_of(d[2].v, d[2].len, &t)) {
        m->has_pn = true;
        m->p = p, m->n = n, m->t = t;
    }
}

void ev_seq_init(ev_seq *s) { s->last = -1; }

ev_seq_verdict ev_seq_judge(ev_seq *s, int64_t n, uint64_t *lost) {
    if (n == s->last + 1) {
        s->last = n;
        return EV_SEQ_NEXT;
    }
    if (n > s->last) {
        *lost += (uint64_t)(n - s->last - 1);
        s->last = n;
        return EV_SEQ_GAP;
    }
    return n == s->last ? EV_SEQ_DUP : EV_SEQ_BACK;
}
