/* transport_http: the fleet's resource news (webhook.h). Each loop of each
 * replica subscribes once to TH_NEWS_SUBJECT and tells its own listening
 * clients, through the same th_news a backend's news reaches. The replica
 * that took the webhook hears its message back like every other and
 * delivers only then, so nobody is told twice.
 *
 * A backend's own news (host->resource_updated) do not come this way: each
 * replica runs its own backends, and an upstream that changes tells each
 * replica's backend_mcp through that replica's own upstream subscription,
 * so fanning those out would tell every client once per replica. */
#include "wire/wire.h"

#include <string.h>

/* The message: lines "u <uri>" (notifications/resources/updated) and "l"
 * (notifications/resources/list_changed); anything else is skipped, so a
 * newer replica can add kinds an older one ignores. */
static void on_news(void *arg, const char *subject, const char *data, size_t len) {
    th_worker_state *ws = arg;
    (void)subject; /* one subject per subscription */
    for (size_t i = 0; i < len;) {
        const char *nl = memchr(data + i, '\n', len - i);
        size_t end = nl ? (size_t)(nl - data) : len;
        if (data[i] == 'u' && end > i + 2 && data[i + 1] == ' ')
            th_news(ws, "notifications/resources/updated", data + i + 2, end - i - 2);
        else if (data[i] == 'l' && end == i + 1)
            th_news(ws, "notifications/resources/list_changed", NULL, 0);
        i = end + 1;
    }
}

int th_news_worker_start(th_worker_state *ws) {
    th_mod *m = ws->mod;
    if (!m->co_ops) return MCPG_EUNAVAIL;
    return m->co_ops->subscribe(m->co, ws->w, TH_NEWS_SUBJECT, on_news, ws, &ws->news_sub);
}

void th_news_worker_stop(th_worker_state *ws) {
    th_mod *m = ws->mod;
    if (m->co_ops && ws->news_sub) m->co_ops->unsubscribe(m->co, ws->news_sub);
    ws->news_sub = NULL;
}
