/* coordinator_nats: coordinator keys as NATS KV keys, and subjects.
 *
 * A KV key may hold only [-/_=.a-zA-Z0-9] with no empty `.` token, while a
 * coordinator key is any bytes. Every other byte (and `=` itself) is stored
 * as `=XX` (two upper-case hex digits), and so is a `.` that would start an
 * empty token: at the start, after another `.`, or at the end of a key. The
 * escape is per byte, so a key's stored form starts with its prefix's stored
 * form and a scan can compare stored forms; only a key that ends in `.` is
 * not found by a scan of exactly itself. */
#include "cn.h"

#include <string.h>

static int plain(unsigned char ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '-' || ch == '_' || ch == '/';
}

/* A `.` at i passes when it separates two non-empty tokens (a prefix may
 * also end in one: the scan's token boundary). */
static int dot_passes(const char *key, size_t klen, size_t i, int as_prefix) {
    if (i == 0 || key[i - 1] == '.') return 0;
    return i + 1 < klen || as_prefix;
}

size_t cn_key_encoded_len(const char *key, size_t klen, int as_prefix) {
    size_t n = 0;
    for (size_t i = 0; i < klen; i++) {
        unsigned char ch = (unsigned char)key[i];
        n += plain(ch) || (ch == '.' && dot_passes(key, klen, i, as_prefix)) ? 1 : 3;
    }
    return n;
}

void cn_key_encode(const char *key, size_t klen, char *out, int as_prefix) {
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (size_t i = 0; i < klen; i++) {
        unsigned char ch = (unsigned char)key[i];
        if (plain(ch) || (ch == '.' && dot_passes(key, klen, i, as_prefix))) {
            out[o++] = (char)ch;
            continue;
        }
        out[o++] = '=';
        out[o++] = hex[ch >> 4];
        out[o++] = hex[ch & 15];
    }
    out[o] = '\0';
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* The coordinator key of a stored key (out holds n + 1 bytes). */
size_t cn_key_decode(const char *enc, size_t n, char *out) {
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        int hi, lo;
        if (enc[i] == '=' && i + 2 < n && (hi = hexval(enc[i + 1])) >= 0 &&
            (lo = hexval(enc[i + 2])) >= 0) {
            out[o++] = (char)(hi << 4 | lo);
            i += 2;
        } else {
            out[o++] = enc[i];
        }
    }
    out[o] = '\0';
    return o;
}

/* The watch subject for a scan: the stored prefix up to its last `.`, then
 * `>` (the server filters whole tokens; the rest is compared here). out
 * holds n + 2 bytes. */
void cn_watch_filter(const char *enc_prefix, size_t n, char *out) {
    size_t cut = 0;
    for (size_t i = 0; i < n; i++)
        if (enc_prefix[i] == '.') cut = i + 1;
    memcpy(out, enc_prefix, cut);
    out[cut] = '>';
    out[cut + 1] = '\0';
}

/* `.`-separated tokens without spaces or control bytes; with wildcards, `*`
 * as a whole token and `>` as the whole last one. */
int cn_subject_valid(const char *s, size_t n, int wildcards) {
    if (!s || n == 0 || n > 1024) return 0;
    size_t tok = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i == n || s[i] == '.') {
            size_t len = i - tok;
            if (len == 0) return 0;
            const char *t = s + tok;
            int wild = len == 1 && (t[0] == '*' || t[0] == '>');
            if (wild && (!wildcards || (t[0] == '>' && i != n))) return 0;
            tok = i + 1;
            continue;
        }
        unsigned char ch = (unsigned char)s[i];
        if (ch <= ' ' || ch == 0x7f) return 0;
        if ((ch == '*' || ch == '>') && !(i == tok && (i + 1 == n || s[i + 1] == '.')))
            return 0;
    }
    return 1;
}
