/** @file
 * mcpg ABI: error codes.
 *
 * Negative errno-style codes, one X-macro list. Append only: a code's value never
 * changes once released. Functions that return int return 0 (or a count) on
 * success and one of these on failure. A call that takes a callback and fails
 * never calls that callback.
 *
 * JSON-RPC/MCP failures are not these codes: they travel as {code, message, data}
 * through mcpg_host.call_error().
 */
#ifndef MCPG_ERRORS_H
#define MCPG_ERRORS_H

/** The error codes, as X(name, value, text): the code MCPG_ followed by name has the
 * value and mcpg_strerror() returns the text. Append only.
 *
 *      name          value   text */
#define MCPG_ERRNO_MAP(X)                                                        \
    X(EINVAL,        -1,  "invalid argument")                                    \
    X(ENOMEM,        -2,  "out of memory")                                       \
    X(ENOENT,        -3,  "no such entry")                                       \
    X(EEXIST,        -4,  "already exists")                                      \
    X(EAGAIN,        -5,  "resource temporarily unavailable (queue full)")       \
    X(ETIMEDOUT,     -6,  "timed out")                                           \
    X(ECANCELED,     -7,  "cancelled")                                           \
    X(EIO,           -8,  "input/output error")                                  \
    X(ENOTSUP,       -9,  "operation not supported")                             \
    X(EABI,          -10, "ABI mismatch")                                        \
    X(ECONFIG,       -11, "invalid configuration")                               \
    X(ESTATE,        -12, "operation not valid in this state")                   \
    X(ERANGE,        -13, "value out of range")                                  \
    X(EPROTO,        -14, "protocol error")                                      \
    X(ECONFLICT,     -15, "compare-and-set conflict")                            \
    X(EUNAVAIL,      -16, "service unavailable")

/** The error codes: MCPG_OK and one code (MCPG_ followed by the name) for each row of
 * MCPG_ERRNO_MAP (MCPG_EINVAL, MCPG_ENOMEM, ...). */
typedef enum mcpg_errno {
#define MCPG__ERR_ENUM(name, value, text) MCPG_##name = value,
    MCPG_ERRNO_MAP(MCPG__ERR_ENUM)
#undef MCPG__ERR_ENUM
    MCPG_OK = 0 /**< success */
} mcpg_errno;

/* Both are provided by the host table (mcpg_host.strerror / .errname) and by the
 * SDK library; they return static strings, never NULL ("unknown error"). */

#endif
