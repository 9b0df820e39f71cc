/* One write on a libuv stream, tried inline first: on loopback a small
 * request nearly always goes out at once, with no callback to wait for. */
#include "load.h"

int load_write(uv_stream_t *s, uv_write_t *req, const char *p, size_t len, uv_write_cb cb) {
    uv_buf_t b = uv_buf_init((char *)p, (unsigned)len);
    int n = uv_try_write(s, &b, 1);
    if (n == (int)len) return 0;
    if (n < 0 && n != UV_EAGAIN) return n;
    size_t done = n > 0 ? (size_t)n : 0;
    b = uv_buf_init((char *)p + done, (unsigned)(len - done));
    int rc = uv_write(req, s, &b, 1, cb);
    return rc < 0 ? rc : 1;
}
