/* What the bestiary fixtures share: each serves one tool whose answer is a
 * short text describing the instance's state, so a test can tell which
 * instance (and which build) serves after a reload. */
#ifndef BEAST_H
#define BEAST_H

#include <mcpg/sdk.h>
#include <string.h>

static inline int beast_list_one(const mcpg_host *host, mcpg_buf *out, const char *tool) {
    return host->buf_printf(out,
                            "[{\"name\":\"%s\",\"description\":\"a bestiary fixture's state\","
                            "\"inputSchema\":{\"type\":\"object\"}}]",
                            tool);
}

static inline mcpg_status beast_answer(const mcpg_host *host, mcpg_call *call, const char *tool,
                                       const char *text) {
    if (strcmp(host->call_target(call), tool) != 0)
        return mcpg_result_errorf(host, call, MCPG_RPC_INVALID_PARAMS, "unknown tool");
    return mcpg_result_text(host, call, text, strlen(text), 0);
}

#endif
