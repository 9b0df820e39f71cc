/* identity_jwt: strict base64url decoding (see jwt_b64.h). */
#include "jwt_b64.h"

#include <stdint.h>

/* 0..63 for the alphabet, 64 for anything else */
#define X64 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64
static const unsigned char SEXTET[256] = {
    X64, X64,
    64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 64, 62, 64, 64,     /* '-' */
    52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 64, 64, 64, 64, 64, 64,     /* 0-9 */
    64, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14,               /* A-O */
    15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 64, 64, 64, 64, 63,     /* P-Z, '_' */
    64, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40,     /* a-o */
    41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 64, 64, 64, 64, 64,     /* p-z */
    X64, X64, X64, X64, X64, X64, X64, X64};

static unsigned sextet(unsigned char c) {
    return SEXTET[c];
}

size_t jwt_b64url_span(const char *s, size_t n) {
    size_t i = 0;
    while (i < n && SEXTET[(unsigned char)s[i]] != 64) i++;
    return i;
}

int jwt_b64url_decode(const char *s, size_t n, unsigned char *out, size_t cap, size_t *out_len) {
    size_t rem = n % 4;
    if (rem == 1) return -1; /* 6 bits cannot end a byte */
    size_t need = n / 4 * 3 + (rem ? rem - 1 : 0);
    if (need > cap) return -1;
    uint32_t acc = 0;
    unsigned bits = 0;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned v = sextet((unsigned char)s[i]);
        if (v == 64) return -1;
        acc = (acc << 6) | v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (unsigned char)(acc >> bits);
            acc &= (1u << bits) - 1;
        }
    }
    if (acc != 0) return -1; /* leftover bits must be zero: one encoding per value */
    *out_len = o;
    return 0;
}
