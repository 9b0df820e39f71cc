/* lib/audit: the event formatter. Hand-written rather than snprintf: it runs
 * once per event on a loop thread, and the calibration shows printf-family
 * formatting is a visible share of a call's user time. The caller sizes dst
 * with audit_line_bound, so no step checks space. */
#include "audit_format.h"

#include <mcpg/sdk.h>
#include <string.h>

#define LIT(p, s) (memcpy((p), (s), sizeof(s) - 1), (p) + sizeof(s) - 1)

/* "00".."99": two digits per lookup instead of two divisions. */
static const char digits2[] = "00010203040506070809101112131415161718192021222324252627282930"
                              "31323334353637383940414243444546474849505152535455565758596061"
                              "62636465666768697071727374757677787980818283848586878889909192"
                              "93949596979899";

static char *put_2(char *p, unsigned v) {
    memcpy(p, digits2 + 2 * v, 2);
    return p + 2;
}

static char *put_u64(char *p, uint64_t v) {
    char tmp[20];
    int n = 20;
    while (v >= 100) {
        n -= 2;
        memcpy(tmp + n, digits2 + 2 * (v % 100), 2);
        v /= 100;
    }
    if (v >= 10) {
        n -= 2;
        memcpy(tmp + n, digits2 + 2 * v, 2);
    } else {
        tmp[--n] = (char)('0' + v);
    }
    memcpy(p, tmp + n, (size_t)(20 - n));
    return p + 20 - n;
}

static char *put_i64(char *p, int64_t v) {
    if (v >= 0) return put_u64(p, (uint64_t)v);
    *p++ = '-';
    return put_u64(p, (uint64_t)0 - (uint64_t)v); /* INT64_MIN safe */
}

static char *put_str(char *p, const char *s, size_t n) {
    *p++ = '"';
    p += mcpg_json_escape(p, s, n);
    *p++ = '"';
    return p;
}

/* Days since 1970-01-01 to a proleptic Gregorian date (400-year eras of
 * 146097 days, March-based years so the leap day falls at the end). */
static void civil_from_days(int64_t z, int64_t *y, unsigned *m, unsigned *d) {
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    unsigned doe = (unsigned)(z - era * 146097);
    unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    unsigned mp = (5 * doy + 2) / 153;
    *d = doy - (153 * mp + 2) / 5 + 1;
    *m = mp < 10 ? mp + 3 : mp - 9;
    *y = (int64_t)yoe + era * 400 + (*m <= 2);
}

size_t audit_format_ts(char *dst, int64_t time_us) {
    if (time_us < 0) time_us = 0;                         /* before 1970: a broken clock */
    if (time_us > 253402300799999999LL) time_us = 253402300799999999LL; /* keep 4 digits */
    uint64_t us = (uint64_t)time_us, secs = us / 1000000;
    unsigned sod = (unsigned)(secs % 86400), m, d, frac = (unsigned)(us % 1000000);
    int64_t y;
    civil_from_days((int64_t)(secs / 86400), &y, &m, &d);
    char *p = dst;
    p = put_2(p, (unsigned)y / 100);
    p = put_2(p, (unsigned)y % 100);
    *p++ = '-';
    p = put_2(p, m);
    *p++ = '-';
    p = put_2(p, d);
    *p++ = 'T';
    p = put_2(p, sod / 3600);
    *p++ = ':';
    p = put_2(p, sod / 60 % 60);
    *p++ = ':';
    p = put_2(p, sod % 60);
    *p++ = '.';
    p = put_2(p, frac / 10000);
    p = put_2(p, frac / 100 % 100);
    p = put_2(p, frac % 100);
    *p++ = 'Z';
    return (size_t)(p - dst);
}

static audit_text text_of(const char *s) { return (audit_text){s, s ? strlen(s) : 0}; }

/* A 1.2 (or later) string of the event, or absent when the kernel's event is older. */
#define TEXT_12(ev, f) (MCPG_HAS_FIELD(ev, f) ? text_of((ev)->f) : (audit_text){NULL, 0})
#define RAW_12(ev, f, len)                                                                    \
    (MCPG_HAS_FIELD(ev, len) && (ev)->f ? (audit_text){(ev)->f, (ev)->len} : (audit_text){NULL, 0})

/* Escaping grows a byte to at most 6 ("\u00XX", "\ufffd"); +32 for the key. */
#define STR_BOUND(n) (6 * (n) + 2 + 32)

size_t audit_line_bound(const mcpg_audit_event *ev, audit_lens *l) {
    *l = (audit_lens){.name = text_of(ev->name),
                      .method = text_of(ev->method),
                      .tool = text_of(ev->tool),
                      .backend = text_of(ev->backend),
                      .principal = text_of(ev->principal),
                      .tenant = text_of(ev->tenant),
                      .session = text_of(ev->session),
                      .error_message = text_of(ev->error_message),
                      .roles = TEXT_12(ev, roles_json),
                      .auth_method = TEXT_12(ev, auth_method),
                      .peer = TEXT_12(ev, peer),
                      .denied_stage = TEXT_12(ev, denied_stage),
                      .denied_by = TEXT_12(ev, denied_by),
                      .args = RAW_12(ev, args_json, args_len),
                      .result = RAW_12(ev, result_json, result_len),
                      .traceparent = TEXT_12(ev, traceparent),
                      .gateway_id = TEXT_12(ev, gateway_id),
                      .server = TEXT_12(ev, server)};
    const audit_text *all = &l->name;
    size_t text = ev->id_json ? ev->id_len : 0, count = sizeof *l / sizeof *all;
    for (size_t i = 0; i < count; i++) text += all[i].n;
    return 512 /* fixed keys, numbers, timestamp, wire */ + STR_BOUND(text) + 20 * 34;
}

/* The id is inserted as raw JSON (it is the client's own id text, already
 * validated by the kernel), unless it could break the one-line format: then
 * it is kept as a string so the line stays valid. */
static char *put_id(char *p, const char *id, size_t n) {
    if (!id || !n) return p; /* a notification has no id: omitted like any null */
    p = LIT(p, ",\"id\":");
    int raw = 1;
    for (size_t i = 0; i < n && raw; i++)
        if ((unsigned char)id[i] < 0x20) raw = 0;
    if (raw) {
        memcpy(p, id, n);
        return p + n;
    }
    return put_str(p, id, n);
}

static char *put_opt(char *p, const char *key, size_t klen, audit_text t) {
    if (!t.s) return p;
    memcpy(p, key, klen);
    return put_str(p + klen, t.s, t.n);
}
#define OPT(p, key, t) put_opt((p), key, sizeof(key) - 1, (t))

/* A JSON value the kernel hands over as text (roles, arguments, result),
 * inserted as it is: valid JSON can hold a byte below 0x20 only as
 * whitespace between tokens, and those become spaces so the line stays one
 * line. Text that is not one valid JSON value is kept as a string instead,
 * so the line stays valid JSON whatever it is given. */
static char *put_raw(char *p, const char *key, size_t klen, audit_text t) {
    if (!t.s) return p;
    memcpy(p, key, klen);
    p += klen;
    if (mcpg_json_validate(t.s, t.n) != 0) return put_str(p, t.s, t.n);
    for (size_t i = 0; i < t.n; i++) {
        unsigned char c = (unsigned char)t.s[i];
        *p++ = c < 0x20 ? ' ' : (char)c;
    }
    return p;
}
#define RAW(p, key, t) put_raw((p), key, sizeof(key) - 1, (t))

static int ends_with(audit_text t, const char *suffix, size_t k) {
    return t.s && t.n >= k && memcmp(t.s + t.n - k, suffix, k) == 0;
}

static audit_text wire_name(uint32_t wire) {
    switch (wire) {
    case MCPG_WIRE_STATELESS: return (audit_text){"2026-07-28", 10};
    case MCPG_WIRE_LEGACY: return (audit_text){"2025-11-25", 10};
    default: return (audit_text){NULL, 0};
    }
}

static char *put_outcome(char *p, const mcpg_audit_event *ev, const audit_lens *l) {
    if (ev->error_code) {
        p = LIT(p, ",\"error_code\":");
        p = put_i64(p, ev->error_code);
    }
    p = OPT(p, ",\"error_message\":", l->error_message);
    if (ends_with(l->name, ".completed", 10) || ends_with(l->name, ".failed", 7)) {
        p = LIT(p, ",\"latency_us\":");
        p = put_u64(p, ev->latency_us);
        p = LIT(p, ",\"backend_us\":");
        p = put_u64(p, ev->backend_us);
    }
    return p;
}

/* Who called and from where. */
static char *put_caller(char *p, const audit_lens *l) {
    p = OPT(p, ",\"principal\":", l->principal);
    p = OPT(p, ",\"tenant\":", l->tenant);
    p = RAW(p, ",\"roles\":", l->roles);
    p = OPT(p, ",\"auth_method\":", l->auth_method);
    p = OPT(p, ",\"session\":", l->session);
    p = OPT(p, ",\"peer\":", l->peer);
    return p;
}

size_t audit_format_line(char *dst, const mcpg_audit_event *ev, const audit_lens *l) {
    char *p = dst;
    p = LIT(p, "{\"ts\":\"");
    p += audit_format_ts(p, ev->time_us);
    p = LIT(p, "\",\"event\":");
    p = put_str(p, l->name.s ? l->name.s : "", l->name.n);
    p = LIT(p, ",\"seq\":");
    p = put_u64(p, ev->seq);
    p = put_id(p, ev->id_json, ev->id_len);
    p = OPT(p, ",\"method\":", l->method);
    p = OPT(p, ",\"tool\":", l->tool);
    p = OPT(p, ",\"backend\":", l->backend);
    p = OPT(p, ",\"server\":", l->server);
    p = put_caller(p, l);
    p = OPT(p, ",\"wire\":", wire_name(ev->wire));
    p = LIT(p, ",\"generation\":");
    p = put_u64(p, ev->generation);
    p = OPT(p, ",\"gateway_id\":", l->gateway_id);
    p = OPT(p, ",\"traceparent\":", l->traceparent);
    p = OPT(p, ",\"denied_stage\":", l->denied_stage);
    p = OPT(p, ",\"denied_by\":", l->denied_by);
    p = RAW(p, ",\"args\":", l->args);
    p = put_outcome(p, ev, l);
    p = RAW(p, ",\"result\":", l->result);
    p = LIT(p, "}\n");
    return (size_t)(p - dst);
}
