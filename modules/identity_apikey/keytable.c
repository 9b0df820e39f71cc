/* The keys file, read into one immutable block, and the constant-time lookup.
 *
 * Loading runs on the main thread (validate, create, reloaded) and may block
 * on the file; the lookup runs on loop threads and touches only memory. */
#include "keytable.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const known_fields[] = {"sha256", "principal", "tenant",
                                           "roles",  "comment",   "created"};
#define N_KNOWN (sizeof known_fields / sizeof known_fields[0])

typedef struct loader {
    const char *path;
    keytable_err_fn err;
    void *ctx;
    int errors;
    size_t string_bytes; /* what the strings of every entry need, NULs included */
    size_t n_roles;      /* roles over every entry */
} loader;

static void problem(loader *l, const char *fmt, ...) MCPG_PRINTF(2, 3);
static void problem(loader *l, const char *fmt, ...) {
    if (++l->errors > KEYTABLE_MAX_ERRORS) return;
    char msg[640];
    int n = snprintf(msg, sizeof msg, "%s: ", l->path);
    if (n < 0 || (size_t)n >= sizeof msg) n = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
    va_end(ap);
    l->err(l->ctx, msg);
}

/* ------------------------------------------------------------------ */
/* checking one entry                                                  */

static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* 1 when s is 64 hex digits; the bytes go to out (may be NULL). */
static int parse_hash(const char *s, size_t n, uint8_t out[KEYTABLE_HASH_LEN]) {
    if (n != 2 * KEYTABLE_HASH_LEN) return 0;
    for (size_t i = 0; i < KEYTABLE_HASH_LEN; i++) {
        int hi = hex_digit(s[2 * i]), lo = hex_digit(s[2 * i + 1]);
        if (hi < 0 || lo < 0) return 0;
        if (out) out[i] = (uint8_t)(hi << 4 | lo);
    }
    return 1;
}

static int has_control(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) return 1;
    return 0;
}

/* A name-like string: 1..max bytes, no control characters. Returns its
 * length, or 0 after reporting what is wrong with [i].field. */
static size_t check_name(loader *l, size_t i, const char *field, const json_t *v, size_t max) {
    if (!json_is_string(v)) {
        problem(l, "[%zu].%s: must be a string", i, field);
        return 0;
    }
    size_t n = json_string_length(v);
    const char *s = json_string_value(v);
    if (n == 0 || n > max)
        problem(l, "[%zu].%s: must be 1 to %zu bytes (it has %zu)", i, field, max, n);
    else if (has_control(s, n))
        problem(l, "[%zu].%s: must not hold control characters", i, field);
    else
        return n;
    return 0;
}

static void check_roles(loader *l, size_t i, const json_t *roles) {
    if (!json_is_array(roles)) {
        problem(l, "[%zu].roles: must be an array of strings", i);
        return;
    }
    size_t k;
    const json_t *r;
    if (json_array_size(roles) > KEYTABLE_MAX_ROLES)
        problem(l, "[%zu].roles: at most %d roles (it has %zu)", i, KEYTABLE_MAX_ROLES,
                json_array_size(roles));
    json_array_foreach(roles, k, r) {
        char field[48];
        snprintf(field, sizeof field, "roles[%zu]", k);
        size_t n = check_name(l, i, field, r, KEYTABLE_MAX_ROLE);
        if (n && memchr(json_string_value(r), ',', n)) {
            /* a 1.0 host gets the roles as one comma-separated list */
            problem(l, "[%zu].%s: must not hold a comma", i, field);
            continue;
        }
        l->string_bytes += 2 * (n + 1); /* the role, and again in roles_csv */
        l->n_roles++;
    }
}

static void check_unknown_fields(loader *l, size_t i, const json_t *e) {
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)e, key, v) {
        int known = 0;
        for (size_t k = 0; k < N_KNOWN; k++) known |= strcmp(key, known_fields[k]) == 0;
        if (known) continue;
        if (!strcmp(key, "key") || !strcmp(key, "api_key") || !strcmp(key, "secret"))
            problem(l, "[%zu].%s: the file holds each key's sha256, never the key itself "
                       "(scripts/mcpg-apikey prints an entry)", i, key);
        else
            problem(l, "[%zu].%.64s: unknown field (known: sha256, principal, tenant, roles, "
                       "comment, created)", i, key);
    }
}

static void check_entry(loader *l, size_t i, const json_t *e) {
    if (!json_is_object(e)) {
        problem(l, "[%zu]: must be an object {\"sha256\": ..., \"principal\": ...}", i);
        return;
    }
    check_unknown_fields(l, i, e);
    const json_t *hash = json_object_get(e, "sha256");
    /* The value is never printed: it may be a key pasted in by mistake. */
    if (!hash)
        problem(l, "[%zu].sha256: is required", i);
    else if (!json_is_string(hash) ||
             !parse_hash(json_string_value(hash), json_string_length(hash), NULL))
        problem(l, "[%zu].sha256: must be the key's SHA-256 as 64 hex digits", i);
    const json_t *principal = json_object_get(e, "principal");
    if (!principal)
        problem(l, "[%zu].principal: is required", i);
    else
        l->string_bytes += check_name(l, i, "principal", principal, KEYTABLE_MAX_NAME) + 1;
    const json_t *tenant = json_object_get(e, "tenant");
    if (tenant && !json_is_null(tenant))
        l->string_bytes += check_name(l, i, "tenant", tenant, KEYTABLE_MAX_NAME) + 1;
    const json_t *roles = json_object_get(e, "roles");
    if (roles) check_roles(l, i, roles);
    static const char *const notes[] = {"comment", "created"};
    for (size_t k = 0; k < 2; k++) {
        const json_t *v = json_object_get(e, notes[k]);
        if (v && !json_is_string(v)) problem(l, "[%zu].%s: must be a string", i, notes[k]);
    }
}

/* ------------------------------------------------------------------ */
/* duplicates: the same hash twice is a mistake (which principal wins?) */

typedef struct hash_at {
    uint8_t hash[KEYTABLE_HASH_LEN];
    size_t index;
} hash_at;

static int hash_at_cmp(const void *a, const void *b) {
    const hash_at *x = a, *y = b;
    int c = memcmp(x->hash, y->hash, KEYTABLE_HASH_LEN);
    return c ? c : (x->index > y->index) - (x->index < y->index);
}

static int check_duplicates(loader *l, const json_t *arr) {
    size_t n = json_array_size(arr);
    hash_at *h = malloc(n ? n * sizeof *h : 1);
    if (!h) return MCPG_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        const json_t *s = json_object_get(json_array_get(arr, i), "sha256");
        parse_hash(json_string_value(s), json_string_length(s), h[i].hash);
        h[i].index = i;
    }
    qsort(h, n, sizeof *h, hash_at_cmp);
    for (size_t i = 1; i < n; i++)
        if (!memcmp(h[i].hash, h[i - 1].hash, KEYTABLE_HASH_LEN))
            problem(l, "[%zu].sha256: the same key as [%zu]", h[i].index, h[i - 1].index);
    free(h);
    return 0;
}

/* ------------------------------------------------------------------ */
/* reading the file                                                    */

/* jansson's messages may quote the text near the error ("near 'abc'"):
 * cut that, so a key pasted into the file by mistake never reaches a log. */
static void report_parse_error(loader *l, const json_error_t *e) {
    char text[JSON_ERROR_TEXT_LENGTH];
    snprintf(text, sizeof text, "%s", e->text);
    char *near = strstr(text, " near '");
    if (near) *near = '\0';
    problem(l, "line %d column %d: not valid JSON: %s", e->line, e->column, text);
}

static json_t *read_file(loader *l) {
    int fd = open(l->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        problem(l, "cannot open: %s", strerror(errno));
        return NULL;
    }
    struct stat st;
    json_t *root = NULL;
    if (fstat(fd, &st) != 0) {
        problem(l, "cannot stat: %s", strerror(errno));
    } else if (!S_ISREG(st.st_mode)) {
        problem(l, "not a regular file");
    } else if ((uint64_t)st.st_size > KEYTABLE_MAX_FILE_BYTES) {
        problem(l, "%lld bytes, more than the %u a keys file may have", (long long)st.st_size,
                KEYTABLE_MAX_FILE_BYTES);
    } else {
        json_error_t e;
        root = json_loadfd(fd, JSON_REJECT_DUPLICATES, &e);
        if (!root) report_parse_error(l, &e);
    }
    close(fd);
    return root;
}

/* ------------------------------------------------------------------ */
/* building the table: one block, laid out as
 *   keytable | entries[n] | role pointers[n_roles] | hashes[n] | strings */

typedef struct filler {
    char *s; /* next free string byte */
    const char **role;
} filler;

static const char *put_string(filler *f, const json_t *v) {
    size_t n = json_string_length(v);
    char *out = f->s;
    memcpy(out, json_string_value(v), n);
    out[n] = '\0';
    f->s += n + 1;
    return out;
}

static void fill_roles(filler *f, keytable_entry *e, const json_t *roles) {
    size_t k;
    const json_t *r;
    e->roles = f->role;
    json_array_foreach(roles, k, r) *f->role++ = put_string(f, r);
    e->n_roles = (uint32_t)json_array_size(roles);
    if (!e->n_roles) return;
    char *csv = f->s;
    for (uint32_t k2 = 0; k2 < e->n_roles; k2++) {
        size_t n = strlen(e->roles[k2]);
        memcpy(f->s, e->roles[k2], n);
        f->s += n;
        *f->s++ = k2 + 1 < e->n_roles ? ',' : '\0';
    }
    e->roles_csv = csv;
}

static keytable *build(const mcpg_host *h, const loader *l, const json_t *arr) {
    size_t n = json_array_size(arr);
    size_t size = sizeof(keytable) + n * sizeof(keytable_entry) +
                  l->n_roles * sizeof(const char *) + n * KEYTABLE_HASH_LEN + l->string_bytes;
    keytable *t = h->calloc(1, size);
    if (!t) return NULL;
    keytable_entry *entries = (keytable_entry *)(t + 1);
    filler f = {.role = (const char **)(entries + n)};
    uint8_t (*hashes)[KEYTABLE_HASH_LEN] = (void *)(f.role + l->n_roles);
    f.s = (char *)(hashes + n);
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(arr, i);
        const json_t *hash = json_object_get(e, "sha256");
        parse_hash(json_string_value(hash), json_string_length(hash), hashes[i]);
        entries[i].principal = put_string(&f, json_object_get(e, "principal"));
        const json_t *tenant = json_object_get(e, "tenant");
        if (tenant && !json_is_null(tenant)) entries[i].tenant = put_string(&f, tenant);
        const json_t *roles = json_object_get(e, "roles");
        if (roles) fill_roles(&f, &entries[i], roles);
    }
    t->n = n;
    t->hashes = (const uint8_t(*)[KEYTABLE_HASH_LEN])hashes;
    t->entries = entries;
    return t;
}

int keytable_load(const mcpg_host *h, const char *path, keytable **out, keytable_err_fn err,
                  void *ctx) {
    loader l = {.path = path, .err = err, .ctx = ctx};
    *out = NULL;
    json_t *root = read_file(&l);
    if (root && !json_is_array(root))
        problem(&l, "must be a JSON array of entries {\"sha256\": ..., \"principal\": ...}");
    else if (root) {
        size_t i;
        const json_t *e;
        json_array_foreach(root, i, e) check_entry(&l, i, e);
    }
    int rc = 0;
    if (root && !l.errors) rc = check_duplicates(&l, root);
    if (!rc && !l.errors && !(*out = build(h, &l, root))) rc = MCPG_ENOMEM;
    if (l.errors > KEYTABLE_MAX_ERRORS) {
        int more = l.errors - KEYTABLE_MAX_ERRORS;
        l.errors = 0; /* let this last line through */
        problem(&l, "%d more problem(s) not shown", more);
    }
    json_decref(root);
    if (rc) return rc;
    return *out ? 0 : MCPG_ECONFIG;
}

void keytable_free(const mcpg_host *h, keytable *t) {
    h->free(t);
}

long keytable_find(const keytable *t, const uint8_t hash[KEYTABLE_HASH_LEN]) {
    /* All ones while nothing matched; a match replaces it with its index
     * through a mask, so there is no branch on what the comparison found. */
    size_t found = (size_t)-1;
    for (size_t i = 0; i < t->n; i++) {
        size_t same = (size_t)0 - (size_t)(CRYPTO_memcmp(hash, t->hashes[i], KEYTABLE_HASH_LEN) == 0);
        found = (found & ~same) | (i & same);
    }
    return found == (size_t)-1 ? -1 : (long)found;
}
