/* identity_jwt: strict base64url decoding (see jwt_b64.h). */
#include "jwt_b64.h"

#include <stdint.h>

/* 0..63 for the alphabet, 64 for anything else */
static unsigned sextet(unsigned char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '-') return 62;
    if (c == '_') return 63;
    return 64;
}

int jwt_b64url_alphabet(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (sextet((unsigned char)s[i]) == 64) return 0;
    return 1;
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
