/* lib/audit: the hash chain's rules (see audit_chain.h). */
#define _GNU_SOURCE /* memrchr */
#include "audit_chain.h"

#include <mcpg/sdk.h>

#include <errno.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct audit_hasher {
    EVP_MD *md; /* fetched once: EVP_Digest with a name looks it up per call */
    EVP_MD_CTX *ctx;
};

audit_hasher *audit_hasher_new(void) {
    audit_hasher *h = calloc(1, sizeof *h);
    if (!h) return NULL;
    h->md = EVP_MD_fetch(NULL, "SHA256", NULL);
    h->ctx = EVP_MD_CTX_new();
    if (!h->md || !h->ctx) {
        audit_hasher_free(h);
        return NULL;
    }
    return h;
}

void audit_hasher_free(audit_hasher *h) {
    if (!h) return;
    EVP_MD_CTX_free(h->ctx);
    EVP_MD_free(h->md);
    free(h);
}

int audit_hash_line(audit_hasher *h, const char *line, size_t n, uint8_t out[AUDIT_HASH_LEN]) {
    unsigned len = 0;
    if (EVP_DigestInit_ex2(h->ctx, h->md, NULL) != 1 || EVP_DigestUpdate(h->ctx, line, n) != 1 ||
        EVP_DigestFinal_ex(h->ctx, out, &len) != 1 || len != AUDIT_HASH_LEN)
        return -1;
    return 0;
}

void audit_hash_hex(const uint8_t hash[AUDIT_HASH_LEN], char out[2 * AUDIT_HASH_LEN + 1]) {
    mcpg_hex(hash, AUDIT_HASH_LEN, out);
    out[2 * AUDIT_HASH_LEN] = '\0';
}

#define PREFIX_HEAD "{\"line\":"
#define PREFIX_PREV ",\"prev\":\""

static size_t put_u64(char *p, uint64_t v) {
    char tmp[20];
    size_t n = 0;
    do tmp[n++] = (char)('0' + v % 10);
    while ((v /= 10) != 0);
    for (size_t i = 0; i < n; i++) p[i] = tmp[n - 1 - i];
    return n;
}

size_t audit_chain_line(audit_hasher *h, audit_chain_head *head, char *dst, const char *body,
                        size_t body_len) {
    char *p = dst;
    memcpy(p, PREFIX_HEAD, sizeof PREFIX_HEAD - 1);
    p += sizeof PREFIX_HEAD - 1;
    p += put_u64(p, head->line + 1);
    memcpy(p, PREFIX_PREV, sizeof PREFIX_PREV - 1);
    p += sizeof PREFIX_PREV - 1;
    char hex[2 * AUDIT_HASH_LEN + 1];
    audit_hash_hex(head->hash, hex);
    memcpy(p, hex, 2 * AUDIT_HASH_LEN);
    p += 2 * AUDIT_HASH_LEN;
    *p++ = '"';
    *p++ = ',';
    /* the body's members after its '{' ("ts" first), its '}' and '\n' */
    memcpy(p, body + 1, body_len - 1);
    p += body_len - 1;
    size_t n = (size_t)(p - dst);
    uint8_t hash[AUDIT_HASH_LEN];
    if (audit_hash_line(h, dst, n - 1, hash) != 0) return 0;
    head->line++;
    memcpy(head->hash, hash, AUDIT_HASH_LEN);
    return n;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1; /* upper case is not the chain's spelling: a changed line */
}

int audit_chain_parse(const char *line, size_t n, uint64_t *line_no, uint8_t prev[AUDIT_HASH_LEN]) {
    size_t i = sizeof PREFIX_HEAD - 1;
    if (n < i || memcmp(line, PREFIX_HEAD, i) != 0) return 0;
    /* 1..20 digits, no leading zero, no overflow */
    uint64_t v = 0;
    size_t d0 = i;
    while (i < n && line[i] >= '0' && line[i] <= '9') {
        unsigned dig = (unsigned)(line[i] - '0');
        if (v > (UINT64_MAX - dig) / 10) return 0;
        v = v * 10 + dig;
        i++;
    }
    if (i == d0 || (line[d0] == '0' && i - d0 > 1) || v == 0) return 0;
    size_t k = sizeof PREFIX_PREV - 1;
    if (n - i < k + 2 * AUDIT_HASH_LEN + 2 || memcmp(line + i, PREFIX_PREV, k) != 0) return 0;
    i += k;
    for (size_t b = 0; b < AUDIT_HASH_LEN; b++) {
        int hi = hexval(line[i + 2 * b]), lo = hexval(line[i + 2 * b + 1]);
        if (hi < 0 || lo < 0) return 0;
        prev[b] = (uint8_t)(hi << 4 | lo);
    }
    i += 2 * AUDIT_HASH_LEN;
    if (line[i] != '"' || line[i + 1] != ',') return 0;
    *line_no = v;
    return 1;
}

/* ---- the end of a file ---- */

/* The offset of the last '\n' before `end`, or -1 when there is none; -2 on
 * a read error. */
static off_t last_newline_before(int fd, off_t end) {
    char buf[4096];
    while (end > 0) {
        size_t want = end > (off_t)sizeof buf ? sizeof buf : (size_t)end;
        off_t at = end - (off_t)want;
        ssize_t got = pread(fd, buf, want, at);
        if (got < 0 && errno == EINTR) continue;
        if (got != (ssize_t)want) {
            if (got >= 0) errno = EIO; /* the file shrank under us */
            return -2;
        }
        char *nl = memrchr(buf, '\n', want);
        if (nl) return at + (nl - buf);
        end = at;
    }
    return -1;
}

static int read_exact(int fd, char *dst, size_t n, off_t at) {
    while (n > 0) {
        ssize_t got = pread(fd, dst, n, at);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) {
            if (got == 0) errno = EIO;
            return -1;
        }
        dst += got;
        n -= (size_t)got;
        at += got;
    }
    return 0;
}

/* The whole line [from, to) (no '\n'): its chain fields and hash. */
static int tail_line(int fd, audit_hasher *h, off_t from, off_t to, audit_tail *out) {
    size_t n = (size_t)(to - from);
    char *line = malloc(n ? n : 1);
    if (!line) {
        errno = ENOMEM;
        return -1;
    }
    int rc = read_exact(fd, line, n, from);
    uint8_t prev[AUDIT_HASH_LEN];
    if (rc == 0 && audit_chain_parse(line, n, &out->head.line, prev)) {
        out->kind = AUDIT_TAIL_CHAINED;
        if (audit_hash_line(h, line, n, out->head.hash) != 0) {
            errno = EIO;
            rc = -1;
        }
    } else if (rc == 0) {
        out->kind = AUDIT_TAIL_UNCHAINED;
    }
    free(line);
    return rc;
}

off_t audit_content_end(int fd, off_t size) {
    char buf[65536];
    off_t end = size;
    while (end > 0) {
        size_t want = end > (off_t)sizeof buf ? sizeof buf : (size_t)end;
        off_t at = end - (off_t)want;
        if (read_exact(fd, buf, want, at) != 0) return -1;
        for (size_t i = want; i-- > 0;)
            if (buf[i] != AUDIT_ROOM_BYTE) return at + (off_t)i + 1;
        end = at;
    }
    return 0;
}

/* The last whole line before `end`: where the next line goes and, when it
 * is a chain line, the chain's head. */
static int last_line(int fd, audit_hasher *h, off_t end, audit_tail *out) {
    off_t last = last_newline_before(fd, end);
    if (last == -2) return -1;
    if (last < 0) return 0; /* no whole line: the bytes there (if any) are torn */
    out->whole = last + 1;
    off_t before = last_newline_before(fd, last);
    if (before == -2) return -1;
    return tail_line(fd, h, before + 1, last, out);
}

#define AUDIT_PAGE 4096

/* Does [from, to) of the file (buf holds it from file offset `base`) hold a
 * whole page of room: a page of a batch that never reached the disk? */
static int holds_room_page(const char *buf, off_t base, off_t from, off_t to) {
    for (off_t a = from - from % AUDIT_PAGE; a + AUDIT_PAGE <= to; a += AUDIT_PAGE) {
        if (a < base) continue;
        const char *p = buf + (a - base);
        size_t k = 0;
        while (k < AUDIT_PAGE && p[k] == AUDIT_ROOM_BYTE) k++;
        if (k == AUDIT_PAGE) return 1;
    }
    return 0;
}

/* Walk the chain through buf (the file's bytes [base, base+n)) from its first
 * line start. When a line that does not continue the chain is followed by a
 * page of room, the chain's end is that line's start: out is moved back to
 * it. Lines that break the chain without such a page are left as they are
 * (another writer's line: verify names it). 0, or -1 with errno. */
static int walk_window(audit_hasher *h, const char *buf, off_t base, size_t n, audit_tail *out) {
    size_t p = 0;
    if (base > 0) {
        const char *nl = memchr(buf, '\n', n);
        if (!nl) return 0;
        p = (size_t)(nl - buf) + 1;
    }
    audit_chain_head head = {0};
    int have = 0;
    while (p < n) {
        const char *line = buf + p, *nl = memchr(line, '\n', n - p);
        size_t len = nl ? (size_t)(nl - line) : n - p;
        uint64_t no;
        uint8_t prev[AUDIT_HASH_LEN];
        int continues = nl && audit_chain_parse(line, len, &no, prev) &&
                        (!have || (no == head.line + 1 && !memcmp(prev, head.hash, AUDIT_HASH_LEN)));
        if (!continues) {
            if (have && holds_room_page(buf, base, base + (off_t)p, base + (off_t)n)) {
                out->kind = AUDIT_TAIL_CHAINED;
                out->head = head;
                out->whole = base + (off_t)p;
            }
            return 0;
        }
        if (audit_hash_line(h, line, len, head.hash) != 0) {
            errno = EIO;
            return -1;
        }
        head.line = no;
        have = 1;
        p += len + 1;
    }
    return 0;
}

static int check_window(int fd, audit_hasher *h, off_t window, audit_tail *out) {
    off_t base = out->size > window ? out->size - window : 0;
    size_t n = (size_t)(out->size - base);
    char *buf = malloc(n ? n : 1);
    if (!buf) {
        errno = ENOMEM;
        return -1;
    }
    int rc = read_exact(fd, buf, n, base);
    if (rc == 0) rc = walk_window(h, buf, base, n, out);
    free(buf);
    return rc;
}

int audit_chain_read_tail(int fd, audit_hasher *h, off_t window, audit_tail *out) {
    struct stat st;
    *out = (audit_tail){.kind = AUDIT_TAIL_EMPTY};
    if (fstat(fd, &st) != 0) return -1;
    out->file_size = st.st_size;
    out->size = audit_content_end(fd, st.st_size);
    if (out->size < 0) return -1;
    if (last_line(fd, h, out->size, out) != 0) return -1;
    if (window <= 0) return 0;
    return check_window(fd, h, window, out);
}
