/* backend_zlib: a backend over a C library, zlib (zlib1g on Debian).
 *
 * Two tools:
 *   crc32          {"text":"hello"}  -> "907060870"   (zlib's crc32, decimal:
 *                                        the same number as Python's zlib.crc32)
 *   compress_ratio {"text":"aaaa..."}  -> "1000 -> 17 bytes (ratio 0.017)"
 *                                       (deflate at `level`, how well it packs)
 *
 * What it shows: linking a library into a module (LIBRARIES in
 * mcpg_add_module: the gateway never links zlib, the module brings it), and
 * doing a library's work on the pool. zlib's functions keep no global state
 * (a z_stream per call), so call_tool, which runs on pool threads, needs no
 * lock. It does not declare MCPG_MOD_INLINE_SAFE: deflating a megabyte takes
 * milliseconds, too long for a loop thread that serves other clients.
 */
#include <mcpg/sdk.h>

#include <stdio.h>
#include <string.h>
#include <zlib.h>

typedef struct zlib_config {
    int64_t level, max_bytes;
} zlib_config;

static const mcpg_config_field zlib_fields[] = {
    MCPG_CFG_INT_FIELD(zlib_config, level, "level", "6", 1, 9,
                       "deflate's level for compress_ratio: 1 fastest, 9 smallest"),
    MCPG_CFG_INT_FIELD(zlib_config, max_bytes, "max_bytes", "1048576", 1, 16777216,
                       "the longest text accepted, in bytes"),
    MCPG_CONFIG_END};

typedef struct zlib_backend {
    const mcpg_host *host;
    const zlib_config *cfg;
} zlib_backend;

static int zlib_create(const mcpg_host *host, mcpg_instance *self, const void *config, void **out) {
    zlib_backend *z = host->calloc(1, sizeof *z);
    if (!z) return MCPG_ENOMEM;
    *z = (zlib_backend){.host = host, .cfg = config};
    *out = z;
    return 0;
}

static void zlib_destroy(void *instance) {
    zlib_backend *z = instance;
    z->host->free(z);
}

static int zlib_list_tools(void *instance, mcpg_buf *out) {
    static const char tools[] =
        "[{\"name\":\"crc32\",\"description\":\"zlib's CRC-32 of the text's UTF-8 bytes\","
        "\"inputSchema\":{\"type\":\"object\",\"properties\":{\"text\":{\"type\":\"string\"}},"
        "\"required\":[\"text\"]}},"
        "{\"name\":\"compress_ratio\",\"description\":\"how well deflate compresses the text\","
        "\"inputSchema\":{\"type\":\"object\",\"properties\":{\"text\":{\"type\":\"string\"}},"
        "\"required\":[\"text\"]}}]";
    return mcpg_buf_append(out, tools, sizeof tools - 1);
}

/* The decoded "text" argument, allocated (host->free it); NULL with the call's
 * error set. */
static char *text_arg(zlib_backend *z, mcpg_call *call, size_t *len) {
    const mcpg_host *h = z->host;
    size_t alen;
    const char *args = h->call_args(call, &alen);
    mcpg_json_span v;
    if (mcpg_json_object_get(args, alen, "text", &v) != 1 || v.type != MCPG_JSON_STRING) {
        mcpg_result_errorf(h, call, MCPG_RPC_INVALID_PARAMS, "\"text\" must be a string");
        return NULL;
    }
    size_t cap = (size_t)z->cfg->max_bytes + 1;
    size_t room = v.n < cap ? v.n + 1 : cap; /* decoded is never longer than raw */
    char *text = h->alloc(room);
    if (!text) {
        mcpg_result_errorf(h, call, MCPG_RPC_INTERNAL_ERROR, "out of memory");
        return NULL;
    }
    if (mcpg_json_string_decode(&v, text, room, len) != 0) {
        mcpg_result_errorf(h, call, MCPG_RPC_INVALID_PARAMS,
                           "\"text\" is longer than %lld "
                           "bytes (max_bytes)",
                           (long long)z->cfg->max_bytes);
        h->free(text);
        return NULL;
    }
    return text;
}

static mcpg_status tool_crc32(zlib_backend *z, mcpg_call *call, const char *text, size_t n) {
    char out[16];
    /* crc32 takes uInt lengths; max_bytes keeps n well inside one. */
    unsigned long crc = crc32(crc32(0L, Z_NULL, 0), (const Bytef *)text, (uInt)n);
    int len = snprintf(out, sizeof out, "%lu", crc);
    return mcpg_result_text(z->host, call, out, (size_t)len, 0);
}

static mcpg_status tool_ratio(zlib_backend *z, mcpg_call *call, const char *text, size_t n) {
    const mcpg_host *h = z->host;
    uLongf packed = compressBound((uLong)n);
    Bytef *buf = h->alloc(packed);
    if (!buf) return mcpg_result_errorf(h, call, MCPG_RPC_INTERNAL_ERROR, "out of memory");
    int zrc = compress2(buf, &packed, (const Bytef *)text, (uLong)n, (int)z->cfg->level);
    h->free(buf);
    if (zrc != Z_OK) /* the tool ran and failed: a result with isError, not a protocol error */
        return mcpg_result_text(h, call, zError(zrc), strlen(zError(zrc)), 1);
    char out[96];
    int len = snprintf(out, sizeof out, "%zu -> %lu bytes (ratio %.3f)", n, (unsigned long)packed,
                       n ? (double)packed / (double)n : 0.0);
    return mcpg_result_text(h, call, out, (size_t)len, 0);
}

/* On a pool thread, several at once: it only reads the instance. */
static mcpg_status zlib_call_tool(void *instance, mcpg_call *call) {
    zlib_backend *z = instance;
    const char *tool = z->host->call_target(call);
    int crc = tool && !strcmp(tool, "crc32");
    if (!crc && !(tool && !strcmp(tool, "compress_ratio")))
        return mcpg_result_errorf(z->host, call, MCPG_RPC_INVALID_PARAMS, "Unknown tool");
    size_t n;
    char *text = text_arg(z, call, &n);
    if (!text) return MCPG_DENY;
    mcpg_status st = crc ? tool_crc32(z, call, text, n) : tool_ratio(z, call, text, n);
    z->host->free(text);
    return st;
}

static const mcpg_lifecycle_ops zlib_lifecycle = {MCPG_OPS_HEAD(mcpg_lifecycle_ops),
                                                  .create = zlib_create, .destroy = zlib_destroy};
static const mcpg_backend_ops zlib_ops = {
    MCPG_OPS_HEAD(mcpg_backend_ops), .list_tools = zlib_list_tools, .call_tool = zlib_call_tool};
MCPG_MODULE_DEFINE(MCPG_KIND_BACKEND, "backend_zlib", "1.0.0",
                   .description = "crc32 and compress_ratio tools over zlib", .config = zlib_fields,
                   .config_size = sizeof(zlib_config), .lifecycle = &zlib_lifecycle,
                   .ops = &zlib_ops);
