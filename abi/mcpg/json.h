/** @file
 * mcpg ABI: the non-allocating JSON scanner's types.
 *
 * The scanner reads JSON text in place: a span points into the caller's bytes
 * and is valid as long as they are. The functions are in the host table
 * (host->json_*) and, with the same names prefixed mcpg_, in the SDK library.
 */
#ifndef MCPG_JSON_H
#define MCPG_JSON_H

#include <stddef.h>
#include <stdint.h>

/** The type of a JSON value (mcpg_json_span.type). */
typedef enum mcpg_json_type {
    MCPG_JSON_NONE = 0,   /**< no value (a span not filled in) */
    MCPG_JSON_OBJECT = 1, /**< an object */
    MCPG_JSON_ARRAY = 2,  /**< an array */
    MCPG_JSON_STRING = 3, /**< a string */
    MCPG_JSON_NUMBER = 4, /**< a number */
    MCPG_JSON_TRUE = 5,   /**< true */
    MCPG_JSON_FALSE = 6,  /**< false */
    MCPG_JSON_NULL = 7    /**< null */
} mcpg_json_type;

/** One JSON value inside a text. For a string, p/n is the raw text between the
 * quotes (escapes not decoded) and `escaped` says whether it holds a backslash;
 * for every other type p/n is the whole value's text. */
typedef struct mcpg_json_span {
    const char *p;    /**< the value's first byte (a string: the byte after its opening quote) */
    size_t n;         /**< its length in bytes */
    uint32_t type;    /**< mcpg_json_type */
    uint32_t escaped; /**< strings: 1 when decoding is needed */
} mcpg_json_span;

/** Nesting deeper than this is refused as malformed. */
#define MCPG_JSON_MAX_DEPTH 64

#endif
