/* backend_mock: the tools array of the config (internal to the module). */
#ifndef MOCK_TOOLS_H
#define MOCK_TOOLS_H

#include <mcpg/abi.h>

#define MOCK_STATS_TOOL "mock_stats"
#define MOCK_NAME_MAX 64
#define MOCK_LATENCY_MAX_MS 3600000
#define MOCK_PAYLOAD_MAX (64 * 1024 * 1024)

typedef struct mock_tool {
    char name[MOCK_NAME_MAX + 1];
    char *description; /* decoded; host-allocated; NULL = the default text */
    int64_t latency_ms;
    int64_t payload_bytes;
    int fail;
} mock_tool;

typedef struct mock_tool_set {
    mock_tool *tools;
    size_t n, cap;
} mock_tool_set;

/* Parse and check the tools JSON (text of an array). Each problem goes to
 * host->report_error(rep, "tools[1].latency_ms", ...) when rep is set, else to
 * the log of `self`. Fills *set (free it with mock_tools_free even on error);
 * returns the number of problems. */
int mock_tools_parse(const mcpg_host *h, const char *json, int stats_tool, mcpg_report *rep,
                     mcpg_instance *self, mock_tool_set *set);
void mock_tools_free(const mcpg_host *h, mock_tool_set *set);
const mock_tool *mock_tools_find(const mock_tool_set *set, const char *name);

#endif
