/* backend_mcp: what an upstream says outside any call. On the session wire
 * that comes on the GET stream (link_http) or stdout, and resources are
 * watched with resources/subscribe. On the stateless wire there is no
 * session: the gateway keeps one subscriptions/listen request open,
 * asking for every list change and the resources clients subscribed to;
 * when that set changes the listen is replaced, and when it ends it is
 * opened again. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "upstream.h"

#define LISTEN_AGAIN_MS 1000

static void listen_open(upstream *up) {
    if (up->state != UP_READY || up->wire != WIRE_STATELESS || up->listen) return;
    up_request *r = up_request_new(up, UR_LISTEN);
    if (!r) return;
    mcpg_buf p = {0};
    mcpg_buf_puts(&p, "{\"notifications\":{\"toolsListChanged\":true,\"promptsListChanged\":true,"
                      "\"resourcesListChanged\":true,\"resourceSubscriptions\":[");
    for (size_t i = 0; i < up->n_subs; i++) {
        if (i) mcpg_buf_puts(&p, ",");
        mcpg_buf_append_json_string(&p, up->subs[i], strlen(up->subs[i]));
    }
    mcpg_buf_puts(&p, "]}}");
    up->listen = r;
    if (!p.data || up_send_request(up, r, "subscriptions/listen", p.data) != 0) {
        up->listen = NULL;
        up_request_free(up, r);
    }
    mcpg_buf_free(&p);
}

static void on_listen_timer(uv_timer_t *t) { listen_open(t->data); }

void listen_ready(upstream *up) { listen_open(up); }

/* The listen ended (answered, or its stream failed): open it again soon. */
void listen_ended(upstream *up, up_request *r) {
    if (!r || up->listen == r) up->listen = NULL;
    if (up->state == UP_READY) uv_timer_start(&up->listen_timer, on_listen_timer, LISTEN_AGAIN_MS, 0);
}

void listen_forget(upstream *up) {
    up->listen = NULL;
    uv_timer_stop(&up->listen_timer);
}

static void replace_listen(upstream *up) {
    up_request *old = up->listen;
    up->listen = NULL;
    if (old) {
        if (up->link->ops->abandon) up->link->ops->abandon(up->link, old);
        up_request_free(up, old);
    }
    listen_open(up);
}

static bool subs_remove(upstream *up, const char *uri) {
    for (size_t i = 0; i < up->n_subs; i++)
        if (strcmp(up->subs[i], uri) == 0) {
            free(up->subs[i]);
            up->subs[i] = up->subs[--up->n_subs];
            return true;
        }
    return false;
}

static bool subs_add(upstream *up, const char *uri) {
    for (size_t i = 0; i < up->n_subs; i++)
        if (strcmp(up->subs[i], uri) == 0) return false;
    char **v = realloc(up->subs, (up->n_subs + 1) * sizeof *v);
    char *copy = strdup(uri);
    if (!v || !copy) {
        free(copy);
        if (v) up->subs = v;
        return false;
    }
    up->subs = v;
    up->subs[up->n_subs++] = copy;
    return true;
}

/* The session wire: resources/subscribe (or unsubscribe) for uri. */
static void send_subscribe(upstream *up, const char *uri, int on) {
    mcpg_buf p = {0};
    mcpg_buf_puts(&p, "{\"uri\":");
    mcpg_buf_append_json_string(&p, uri, strlen(uri));
    mcpg_buf_puts(&p, "}");
    up_request *r = p.data ? up_request_new(up, UR_SUBSCRIBE) : NULL;
    if (r && up_send_request(up, r, on ? "resources/subscribe" : "resources/unsubscribe", p.data))
        up_request_free(up, r);
    mcpg_buf_free(&p);
}

void listen_subscribe(upstream *up, const char *uri, int on) {
    bool changed = on ? subs_add(up, uri) : subs_remove(up, uri);
    if (up->wire == WIRE_STATELESS) {
        if (changed) replace_listen(up);
        return;
    }
    if (up->state != UP_READY) return; /* subscribed again when it is (listen_resubscribe) */
    send_subscribe(up, uri, on);
}

/* A new session knows nothing of the old one's subscriptions. */
void listen_resubscribe(upstream *up) {
    if (up->wire == WIRE_STATELESS) return; /* the listen carries them */
    for (size_t i = 0; i < up->n_subs; i++) send_subscribe(up, up->subs[i], 1);
}

void listen_free(upstream *up) {
    for (size_t i = 0; i < up->n_subs; i++) free(up->subs[i]);
    free(up->subs);
    up->subs = NULL;
    up->n_subs = 0;
}
