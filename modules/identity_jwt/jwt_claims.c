/* identity_jwt: claims judged and mapped (see jwt_claims.h). */
#define _GNU_SOURCE
#include "jwt_claims.h"

#include <mcpg/sdk.h>

#include <stdlib.h>
#include <string.h>

#define SEGMENT_MAX 256

int jwt_claim_find(const char *claims, size_t n, const char *name, mcpg_json_span *v) {
    if (mcpg_json_object_get_trusted(claims, n, name, v) == 1) return 1;
    if (!strchr(name, '.')) return 0;
    mcpg_json_span cur = {claims, n, MCPG_JSON_OBJECT, 0};
    for (const char *seg = name;;) {
        size_t len = strcspn(seg, ".");
        char key[SEGMENT_MAX];
        if (len == 0 || len >= sizeof key || cur.type != MCPG_JSON_OBJECT) return 0;
        memcpy(key, seg, len);
        key[len] = '\0';
        if (mcpg_json_object_get_trusted(cur.p, cur.n, key, &cur) != 1) return 0;
        if (!seg[len]) break;
        seg += len + 1;
    }
    *v = cur;
    return 1;
}

/* A NumericDate: seconds since the epoch, an integer or not. 0, or -1. */
static int numeric_date(const mcpg_json_span *v, int64_t *out) {
    if (v->type != MCPG_JSON_NUMBER) return -1;
    if (mcpg_json_int64(v, out) == 0) return 0;
    char text[48];
    if (v->n >= sizeof text) return -1;
    memcpy(text, v->p, v->n);
    text[v->n] = '\0';
    double d = strtod(text, NULL);
    if (!(d > -9007199254740992.0 && d < 9007199254740992.0)) return -1; /* 2^53, or NaN */
    int64_t i = (int64_t)d;
    *out = d < (double)i ? i - 1 : i; /* floor */
    return 0;
}

/* 1 when claim `name` is present (its date in *out), 0 absent, -1 not a number. */
static int date_claim(const char *claims, size_t n, const char *name, int64_t *out) {
    mcpg_json_span v;
    if (mcpg_json_object_get_trusted(claims, n, name, &v) != 1) return 0;
    return numeric_date(&v, out) == 0 ? 1 : -1;
}

static jwt_verdict check_times(const jwt_rules *r, const char *claims, size_t n, int64_t now,
                               int64_t *exp) {
    int64_t nbf, iat;
    int has_exp = date_claim(claims, n, "exp", exp);
    int has_nbf = date_claim(claims, n, "nbf", &nbf);
    int has_iat = date_claim(claims, n, "iat", &iat);
    if (has_exp < 0 || has_nbf < 0 || has_iat < 0) return JWT_BAD_TIME;
    if (!has_exp) return JWT_NO_EXP;
    if (now >= *exp + r->skew_s) return JWT_EXPIRED;
    if (has_nbf && now + r->skew_s < nbf) return JWT_NOT_YET_VALID;
    if (has_iat && iat > now + r->skew_s) return JWT_ISSUED_IN_FUTURE;
    return JWT_OK;
}

static int string_is(const mcpg_json_span *v, const char *want) {
    return v->type == MCPG_JSON_STRING && mcpg_json_string_eq(v, want, strlen(want)) == 1;
}

static int audience_ok(const mcpg_json_span *aud, const char *want) {
    if (aud->type != MCPG_JSON_ARRAY) return string_is(aud, want);
    mcpg_json_span el;
    size_t it = 0;
    while (mcpg_json_array_next(aud->p, aud->n, &it, &el) == 1)
        if (string_is(&el, want)) return 1;
    return 0;
}

/* ---- mapping ------------------------------------------------------------- */

typedef struct text_cursor {
    jwt_mapped *m;
    size_t used;
} text_cursor;

/* A copy of a string span in the mapped text: NULL when it does not fit. */
static const char *keep(text_cursor *c, const mcpg_json_span *v) {
    size_t len;
    char *dst = c->m->text + c->used;
    if (mcpg_json_string_decode(v, dst, sizeof c->m->text - c->used, &len) != 0) return NULL;
    if (memchr(dst, '\0', len)) return NULL; /* an escaped NUL would cut the name short */
    c->used += len + 1;
    return dst;
}

static int add_role(text_cursor *c, const char *role) {
    if (!role) return -1;
    if (!*role) return 0;
    if (c->m->n_roles == JWT_ROLES_MAX) return -1;
    c->m->roles[c->m->n_roles++] = role;
    return 0;
}

/* "read write admin": the OAuth scope form, split on spaces in place. */
static int split_roles(text_cursor *c, char *s) {
    for (char *tok = strtok_r(s, " ", &s); tok; tok = strtok_r(NULL, " ", &s))
        if (add_role(c, tok)) return -1;
    return 0;
}

static jwt_verdict map_roles(const jwt_rules *r, const char *claims, size_t n, text_cursor *c) {
    mcpg_json_span v, el;
    if (!r->roles_claim || !jwt_claim_find(claims, n, r->roles_claim, &v)) return JWT_OK;
    if (v.type == MCPG_JSON_STRING) {
        char *s = (char *)keep(c, &v);
        return s && split_roles(c, s) == 0 ? JWT_OK : JWT_ROLES;
    }
    if (v.type != MCPG_JSON_ARRAY) return JWT_ROLES;
    size_t it = 0;
    while (mcpg_json_array_next(v.p, v.n, &it, &el) == 1)
        if (el.type != MCPG_JSON_STRING || add_role(c, keep(c, &el))) return JWT_ROLES;
    return JWT_OK;
}

static jwt_verdict map_identity(const jwt_rules *r, const char *claims, size_t n,
                                jwt_mapped *out) {
    text_cursor c = {out, 0};
    mcpg_json_span v;
    if (!jwt_claim_find(claims, n, r->principal_claim, &v) || v.type != MCPG_JSON_STRING ||
        !(out->principal = keep(&c, &v)) || !*out->principal)
        return JWT_PRINCIPAL;
    if (r->tenant_claim && jwt_claim_find(claims, n, r->tenant_claim, &v) &&
        (v.type != MCPG_JSON_STRING || !(out->tenant = keep(&c, &v))))
        return JWT_TENANT;
    return map_roles(r, claims, n, &c);
}

jwt_verdict jwt_claims_check(const jwt_rules *r, const char *claims, size_t n, int64_t now_s,
                             jwt_mapped *out) {
    out->principal = out->tenant = NULL;
    out->n_roles = 0;
    jwt_verdict t = check_times(r, claims, n, now_s, &out->exp);
    if (t != JWT_OK) return t;
    mcpg_json_span v;
    if (mcpg_json_object_get_trusted(claims, n, "iss", &v) != 1 || !string_is(&v, r->issuer))
        return JWT_ISSUER;
    if (mcpg_json_object_get_trusted(claims, n, "aud", &v) != 1 || !audience_ok(&v, r->audience))
        return JWT_AUDIENCE;
    return map_identity(r, claims, n, out);
}
