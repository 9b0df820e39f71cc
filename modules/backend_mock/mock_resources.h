/* backend_mock: static resources from the "resources" config (internal to
 * the module). They never change by themselves: a test announces a change
 * from outside (POST /webhooks/resources/{source}), and the mock serves the
 * uri so clients can list it, read it and subscribe to it. */
#ifndef MOCK_RESOURCES_H
#define MOCK_RESOURCES_H

#include <mcpg/abi.h>

#define MOCK_URI_MAX 1023 /* the transport's subscription lists hold uris up to this */

typedef struct mock_resource {
    char *uri;       /* decoded, host-allocated */
    mcpg_buf read;   /* the resources/read result, built once */
} mock_resource;

typedef struct mock_resource_set {
    mock_resource *items;
    size_t n;
    mcpg_buf list;   /* the resources/list array, built once ("[]" with none) */
} mock_resource_set;

/* Parse the resources JSON (an array text, or NULL: none) into *set (free
 * it with mock_resources_free even on error). Problems go to rep when set,
 * else to the log of self, at paths like "resources[0].uri"; returns how
 * many. */
int mock_resources_parse(const mcpg_host *h, const char *json, mcpg_report *rep,
                         mcpg_instance *self, mock_resource_set *set);
void mock_resources_free(const mcpg_host *h, mock_resource_set *set);
const mock_resource *mock_resources_find(const mock_resource_set *set, const char *uri);

#endif
