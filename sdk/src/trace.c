/* W3C Trace Context: the traceparent header a gateway records and passes on.
 *
 * "vv-<32 hex trace-id>-<16 hex parent-id>-<2 hex flags>", lowercase hex.
 * Version ff is invalid; an all-zero trace-id or parent-id is invalid.
 * Version 00 is exactly 55 bytes; a later version may append "-..." fields,
 * which a receiver that knows only 00 reads past. A header that is not
 * valid is ignored (neither recorded nor passed on), as the specification
 * asks of a receiver. */
#include <mcpg/sdk.h>

#include <stdbool.h>

static bool lower_hex(const char *s, size_t n, bool *all_zero) {
    *all_zero = true;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
        if (c != '0') *all_zero = false;
    }
    return true;
}

int mcpg_traceparent_valid(const char *s, size_t n) {
    bool zero;
    if (!s || n < 55 || s[2] != '-' || s[35] != '-' || s[52] != '-') return 0;
    if (!lower_hex(s, 2, &zero) || (s[0] == 'f' && s[1] == 'f')) return 0;
    bool v00 = s[0] == '0' && s[1] == '0';
    if (v00 ? n != 55 : (n > 55 && s[55] != '-')) return 0;
    if (!lower_hex(s + 3, 32, &zero) || zero) return 0;
    if (!lower_hex(s + 36, 16, &zero) || zero) return 0;
    return lower_hex(s + 53, 2, &zero) ? 1 : 0;
}

/* tracestate travels beside a valid traceparent: printable ASCII, bounded. */
int mcpg_tracestate_valid(const char *s, size_t n) {
    if (!s || !n || n > 512) return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e) return 0;
    return 1;
}
