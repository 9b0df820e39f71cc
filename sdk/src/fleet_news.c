/* The fleet's resource news (MCPG_FLEET_NEWS_SUBJECT, abi/mcpg/kinds.h):
 * one writer of its lines for the kernel (a watched resource) and the
 * transport (a resource webhook). */
#include <mcpg/sdk.h>

int mcpg_fleet_news_updated(mcpg_buf *b, const char *uri, size_t n) {
    return mcpg_buf_append(b, "u ", 2) || mcpg_buf_append(b, uri, n) || mcpg_buf_append(b, "\n", 1)
               ? MCPG_ENOMEM
               : 0;
}

int mcpg_fleet_news_list_changed(mcpg_buf *b) {
    return mcpg_buf_append(b, "l\n", 2) ? MCPG_ENOMEM : 0;
}
