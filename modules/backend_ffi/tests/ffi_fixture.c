/* A small library for backend_ffi's tests: libc has few functions that take
 * arrays of numbers, so these do, one pair per element type:
 *   double ffx_sum_<t>(const T *xs, size_t n)   the sum, as a double
 *   void ffx_flip_<t>(T *xs, size_t n)          ~x for integers, -x for floats
 * one that fills a buffer with bytes no text can carry, and one whose
 * output can overflow (squares in place: 1e200 becomes +infinity). */
#include <stddef.h>
#include <stdint.h>

#define FFX_EXPORT __attribute__((visibility("default")))

#define FFX_PAIR(suffix, T, FLIP)                                              \
    FFX_EXPORT double ffx_sum_##suffix(const T *xs, size_t n);                 \
    FFX_EXPORT double ffx_sum_##suffix(const T *xs, size_t n) {                \
        double s = 0;                                                          \
        for (size_t i = 0; i < n; i++) s += (double)xs[i];                     \
        return s;                                                              \
    }                                                                          \
    FFX_EXPORT void ffx_flip_##suffix(T *xs, size_t n);                        \
    FFX_EXPORT void ffx_flip_##suffix(T *xs, size_t n) {                       \
        for (size_t i = 0; i < n; i++) xs[i] = (T)(FLIP xs[i]);                \
    }

FFX_PAIR(i8, int8_t, ~)
FFX_PAIR(i16, int16_t, ~)
FFX_PAIR(i32, int32_t, ~)
FFX_PAIR(i64, int64_t, ~)
FFX_PAIR(u8, uint8_t, ~)
FFX_PAIR(u16, uint16_t, ~)
FFX_PAIR(u32, uint32_t, ~)
FFX_PAIR(u64, uint64_t, ~)
FFX_PAIR(f, float, -)
FFX_PAIR(d, double, -)

/* buf[i] = 255 - i (so a NUL at 255 and invalid UTF-8 before it); returns
 * how many bytes it wrote. */
FFX_EXPORT int32_t ffx_fill(uint8_t *buf, uint16_t n);
FFX_EXPORT int32_t ffx_fill(uint8_t *buf, uint16_t n) {
    for (uint16_t i = 0; i < n; i++) buf[i] = (uint8_t)(255 - i);
    return n;
}

FFX_EXPORT void ffx_square_d(double *xs, size_t n);
FFX_EXPORT void ffx_square_d(double *xs, size_t n) {
    for (size_t i = 0; i < n; i++) xs[i] *= xs[i];
}
