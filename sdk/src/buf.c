/* Growable byte buffers. Always NUL-terminated after a successful append, so
 * a buffer of text can be handed to C string functions directly. */
#include <mcpg/sdk.h>

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int mcpg_buf_reserve(mcpg_buf *b, size_t extra) {
    /* No object is larger than PTRDIFF_MAX, so a bigger size is out of
     * memory, answered before any arithmetic can wrap. Unchecked, len +
     * extra + 1 wrapped (reserve(SIZE_MAX) answered 0 and left data NULL for
     * the caller to write into) and the doubling wrapped cap to 0 and never
     * ended (reserve(SIZE_MAX / 2 + 2) hung the loop thread). */
    const size_t max = (size_t)PTRDIFF_MAX;
    if (b->len >= max || extra > max - 1 - b->len) return MCPG_ENOMEM;
    size_t need = b->len + extra + 1; /* room for the terminator */
    if (need <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need) cap = cap > max / 2 ? need : cap * 2;
    char *p = realloc(b->data, cap);
    if (!p) return MCPG_ENOMEM;
    p[b->len] = '\0'; /* the ABI: data is NUL-terminated after any buf_* call */
    b->data = p;
    b->cap = cap;
    return 0;
}

int mcpg_buf_append(mcpg_buf *b, const void *p, size_t n) {
    if (mcpg_buf_reserve(b, n)) return MCPG_ENOMEM;
    if (n) memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

int mcpg_buf_printf(mcpg_buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char small[256];
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) return MCPG_EINVAL;
    if ((size_t)n < sizeof small) return mcpg_buf_append(b, small, (size_t)n);
    if (mcpg_buf_reserve(b, (size_t)n)) return MCPG_ENOMEM;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return 0;
}

int mcpg_buf_append_json_string(mcpg_buf *b, const char *s, size_t n) {
    /* n * 6 + 2 must not wrap into a small reservation */
    if (n > (SIZE_MAX - 2) / 6 || mcpg_buf_reserve(b, n * 6 + 2)) return MCPG_ENOMEM;
    char *d = b->data + b->len;
    *d++ = '"';
    d += mcpg_json_escape(d, s, n);
    *d++ = '"';
    b->len = (size_t)(d - b->data);
    b->data[b->len] = '\0';
    return 0;
}

void mcpg_buf_free(mcpg_buf *b) {
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

void mcpg_hex(const void *bytes, size_t n, char *out) {
    static const char digits[] = "0123456789abcdef";
    const unsigned char *b = bytes;
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[b[i] >> 4];
        out[2 * i + 1] = digits[b[i] & 15];
    }
}
