#define _GNU_SOURCE /* explicit_bzero */
/* Identities copied into one block: the struct, the role pointers, then
 * every string. One allocation per identified call, freed with free(). */
#include "ident.h"

#include "mcpg/sdk.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Bytes of s as the inside of a JSON string. */
static size_t json_escaped_len(const char *s) {
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        n += (*p == '"' || *p == '\\') ? 2 : *p < 0x20 ? 6 : 1;
    return n;
}

static char *json_escape_into(char *d, const char *s) {
    static const char hex[] = "0123456789abcdef";
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') {
            *d++ = '\\';
            *d++ = (char)*p;
        } else if (*p < 0x20) {
            memcpy(d, "\\u00", 4);
            d[4] = hex[*p >> 4];
            d[5] = hex[*p & 15];
            d += 6;
        } else {
            *d++ = (char)*p;
        }
    }
    return d;
}

static size_t opt_len(const char *s) { return s ? strlen(s) + 1 : 0; }

/* Copy s to *cur and move it on; NULL stays NULL. */
static const char *place(char **cur, const char *s, size_t n) {
    if (!s) return NULL;
    char *d = *cur;
    memcpy(d, s, n);
    d[n] = '\0';
    *cur = d + n + 1;
    return d;
}

static bool claims_ok(const mcpg_identity *id) {
    if (!id->claims_json) return true;
    size_t i = 0;
    while (i < id->claims_len && strchr(" \t\r\n", id->claims_json[i])) i++;
    return i < id->claims_len && id->claims_json[i] == '{' &&
           mcpg_json_validate(id->claims_json, id->claims_len) == 0;
}

/* The bearer token an identity module of ABI 1.11 or later verified. */
static const char *bearer_of(const mcpg_identity *id, size_t *len) {
    bool has = MCPG_HAS_FIELD(id, bearer_len) && id->bearer && id->bearer_len;
    *len = has ? id->bearer_len : 0;
    return has ? id->bearer : NULL;
}

int mcpg_ident_make(const mcpg_identity *id, mcpg_ident **out) {
    *out = NULL;
    if (!id || !id->principal || !claims_ok(id)) return MCPG_EINVAL;
    size_t bearer_len;
    const char *bearer = bearer_of(id, &bearer_len);
    size_t strs = opt_len(id->principal) + opt_len(id->tenant) + opt_len(id->method) +
                  (id->claims_json ? id->claims_len + 1 : 0) + (bearer ? bearer_len + 1 : 0);
    size_t csv = 0, json = 2;
    for (uint32_t i = 0; i < id->n_roles; i++) {
        if (!id->roles[i]) return MCPG_EINVAL;
        csv += strlen(id->roles[i]) + 1;
        json += json_escaped_len(id->roles[i]) + 3;
    }
    size_t head = sizeof(mcpg_ident) + id->n_roles * sizeof(char *);
    /* the roles, then the same bytes again as the csv, then the JSON */
    mcpg_ident *c = malloc(head + strs + 2 * csv + json + 1);
    if (!c) return MCPG_ENOMEM;
    const char **roles = (const char **)(c + 1);
    char *cur = (char *)c + head;
    c->principal = place(&cur, id->principal, strlen(id->principal));
    c->tenant = place(&cur, id->tenant, id->tenant ? strlen(id->tenant) : 0);
    c->method = place(&cur, id->method, id->method ? strlen(id->method) : 0);
    c->claims = place(&cur, id->claims_json, id->claims_len);
    c->claims_len = id->claims_json ? id->claims_len : 0;
    c->bearer = place(&cur, bearer, bearer_len);
    c->bearer_len = bearer_len;
    c->n_roles = id->n_roles;
    c->roles = roles;
    c->roles_csv = c->roles_json = NULL;
    if (id->n_roles) {
        char *s = cur;
        for (uint32_t i = 0; i < id->n_roles; i++) {
            size_t n = strlen(id->roles[i]);
            roles[i] = place(&cur, id->roles[i], n);
        }
        /* the roles laid out NUL-separated are the csv with commas put in */
        char *csv_s = cur;
        memcpy(csv_s, s, (size_t)(cur - s));
        for (char *p = csv_s; p < csv_s + (cur - s) - 1; p++)
            if (*p == '\0') *p = ',';
        c->roles_csv = csv_s;
        cur = csv_s + (cur - s);
        char *j = cur;
        *j++ = '[';
        for (uint32_t i = 0; i < id->n_roles; i++) {
            if (i) *j++ = ',';
            *j++ = '"';
            j = json_escape_into(j, id->roles[i]);
            *j++ = '"';
        }
        *j++ = ']';
        *j = '\0';
        c->roles_json = cur;
    }
    *out = c;
    return 0;
}

int mcpg_ident_make_csv(const char *principal, const char *tenant, const char *roles_csv,
                        mcpg_ident **out) {
    enum { MAX_ROLES = 64 };
    const char *roles[MAX_ROLES];
    char *copy = roles_csv ? strdup(roles_csv) : NULL;
    if (roles_csv && !copy) return MCPG_ENOMEM;
    uint32_t n = 0;
    for (char *save = NULL, *t = copy ? strtok_r(copy, ",", &save) : NULL; t && n < MAX_ROLES;
         t = strtok_r(NULL, ",", &save)) {
        while (*t == ' ' || *t == '\t') t++;
        char *e = t + strlen(t);
        while (e > t && (e[-1] == ' ' || e[-1] == '\t')) *--e = '\0';
        if (*t) roles[n++] = t;
    }
    mcpg_identity id = {.size = sizeof id, .principal = principal, .tenant = tenant,
                        .roles = roles, .n_roles = n};
    int rc = mcpg_ident_make(&id, out);
    free(copy);
    return rc;
}

void mcpg_ident_free(mcpg_ident *id) {
    if (id && id->bearer) explicit_bzero((char *)id->bearer, id->bearer_len);
    free(id);
}

int mcpg_ident_bearer(const mcpg_ident *id, const char **token, size_t *token_len,
                      const char **claims, size_t *claims_len) {
    bool has = id && id->bearer;
    if (token) *token = has ? id->bearer : NULL;
    if (token_len) *token_len = has ? id->bearer_len : 0;
    if (claims) *claims = has ? id->claims : NULL;
    if (claims_len) *claims_len = has && id->claims ? id->claims_len : 0;
    return has ? 0 : MCPG_ENOENT;
}

int mcpg_ident_has_role(const mcpg_ident *id, const char *role) {
    if (!id || !role) return 0;
    for (uint32_t i = 0; i < id->n_roles; i++)
        if (strcmp(id->roles[i], role) == 0) return 1;
    return 0;
}
