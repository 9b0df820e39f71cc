/* Fuzzer: the custom headers of the 2026-07-28 wire (sdk/src/param_headers.c).
 *
 * The input is three parts split at NUL bytes: an inputSchema's text, a
 * call's arguments and a header value. Checked: any bytes survive the
 * header encoding and come back whole from its decoding, and what is sent
 * is a header-safe value (visible ASCII, inner spaces and tabs, no white
 * space at either end); the annotations read from a schema are well formed
 * (a token name, its "mcp-param-" key lower-cased, a path, a type); for each
 * of them, the value a client would send for the arguments is the one the
 * check accepts, and arguments without the value need no header. So the
 * gateway never refuses what it would itself send upstream, nor sends what
 * an upstream would refuse. */
#define _GNU_SOURCE
#include "fuzz.h"

#include <mcpg/sdk.h>
#include <string.h>

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    return 0;
}

/* The next part of the input, up to a NUL (or its end). */
static fz_input next_part(fz_input *in) {
    const uint8_t *nul = memchr(in->p, 0, in->n);
    size_t len = nul ? (size_t)(nul - in->p) : in->n;
    fz_input part = {in->p, len};
    in->p += nul ? len + 1 : len;
    in->n -= nul ? len + 1 : len;
    return part;
}

static void check_round_trip(const char *v, size_t n) {
    mcpg_buf enc = {0};
    FZ_CHECK(mcpg_header_value_encode(v, n, &enc) == 0, "encode failed");
    for (size_t i = 0; i < enc.len; i++) {
        unsigned char c = (unsigned char)enc.data[i];
        FZ_CHECK((c >= 0x21 && c <= 0x7e) || ((c == ' ' || c == '\t') && i && i + 1 < enc.len),
                 "byte %zu of the sent value is not header-safe: 0x%02x", i, c);
    }
    char *buf = malloc(enc.len + 1);
    const char *out = NULL;
    size_t out_len = 0;
    FZ_CHECK(buf && mcpg_header_value_decode(enc.data ? enc.data : "", enc.len, buf, enc.len + 1,
                                             &out, &out_len) == 0,
             "the value sent does not decode");
    FZ_CHECK(out_len == n && (n == 0 || memcmp(out, v, n) == 0),
             "a value does not come back whole (%zu bytes, %zu back)", n, out_len);
    free(buf);
    mcpg_buf_free(&enc);
}

static void check_annotation(const mcpg_param_header *p, const char *args, size_t an) {
    size_t nl = strlen(p->name);
    FZ_CHECK(nl > 0 && strlen(p->lname) == 10 + nl && !strncmp(p->lname, "mcp-param-", 10),
             "annotation name %s / key %s", p->name, p->lname);
    for (size_t i = 0; i < nl; i++)
        FZ_CHECK(p->lname[10 + i] == (char)(p->name[i] >= 'A' && p->name[i] <= 'Z'
                                                ? p->name[i] + 32 : p->name[i]),
                 "the key is not the name lower-cased: %s", p->lname);
    FZ_CHECK(p->depth >= 1 && p->type >= MCPG_PARAM_STRING && p->type <= MCPG_PARAM_BOOLEAN,
             "depth %zu type %d", p->depth, p->type);
    mcpg_json_span val;
    if (mcpg_param_header_arg(p, args, an, &val) != 1) {
        FZ_CHECK(mcpg_param_header_check(p, args, an, NULL, 0) == MCPG_PARAM_OK,
                 "no value, yet a header is expected for %s", p->name);
        return;
    }
    mcpg_buf sent = {0};
    int rc = mcpg_param_header_value(p, args, an, &sent);
    FZ_CHECK(rc >= 0, "building the header failed: %d", rc);
    if (rc == 1)
        FZ_CHECK(mcpg_param_header_check(p, args, an, sent.data ? sent.data : "", sent.len) ==
                     MCPG_PARAM_OK,
                 "the gateway refuses the %s it sends: %.*s", p->name, (int)sent.len,
                 sent.data ? sent.data : "");
    mcpg_buf_free(&sent);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz_input in = {data, size};
    fz_input schema = next_part(&in), args = next_part(&in), value = next_part(&in);
    check_round_trip((const char *)value.p, value.n);
    mcpg_param_headers ph = {0};
    char why[200];
    /* the parsers take text whose end they are told; the schema reader and
     * the argument reader validate what they walk */
    if (mcpg_json_validate((const char *)args.p, args.n) < 0) args.n = 0;
    if (mcpg_param_headers_parse((const char *)schema.p, schema.n, &ph, why, sizeof why) == 0) {
        for (size_t i = 0; i < ph.n; i++)
            check_annotation(&ph.v[i], args.n ? (const char *)args.p : "{}", args.n ? args.n : 2);
    }
    mcpg_param_headers_free(&ph);
    return 0;
}
