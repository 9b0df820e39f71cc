/* The fake host's virtual servers (ABI 1.12): the ones a test declares
 * (mcpg_fakehost_add_server), found by host->server_find as the kernel
 * finds a manifest's servers[]; and the server each desc handed to
 * host->call_submit named, for the test to read. */
#include "fakehost_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct fh_server {
    fh_server *next;
    char *name, *path, *host, *info_json, *instructions;
};

/* What one server_find gave out: its strings live until the posts run on a
 * later loop turn, so a transport that keeps them past its callback reads
 * freed memory (what a sanitizer build reports), as it could with the
 * kernel after a reload. */
struct fh_view_copy {
    fh_view_copy *next;
    char text[];
};

static void server_free(fh_server *s) {
    free(s->name);
    free(s->path);
    free(s->host);
    free(s->info_json);
    free(s->instructions);
    free(s);
}

static int info_ok(const char *json) {
    return !json || (json[0] == '{' && mcpg_json_validate(json, strlen(json)) == 0);
}

int mcpg_fakehost_add_server(mcpg_fakehost *fh, const char *name, const char *path,
                             const char *host, const char *info_json, const char *instructions) {
    if (!fh || !name || !mcpg_server_name_valid(name, strlen(name)) || (path && path[0] != '/') ||
        !info_ok(info_json))
        return MCPG_EINVAL;
    char def[80];
    snprintf(def, sizeof def, "/mcp/%s", name);
    fh_server *s = calloc(1, sizeof *s);
    if (!s) return MCPG_ENOMEM;
    s->name = fh_dup_or_null(name);
    s->path = fh_dup_or_null(path ? path : def);
    s->host = fh_dup_or_null(host);
    s->info_json = fh_dup_or_null(info_json);
    s->instructions = fh_dup_or_null(instructions);
    if (!s->name || !s->path || (host && !s->host) || (info_json && !s->info_json) ||
        (instructions && !s->instructions)) {
        server_free(s);
        return MCPG_ENOMEM;
    }
    pthread_mutex_lock(&fh->lock);
    fh_server **pp = &fh->servers; /* kept in the order declared */
    while (*pp) pp = &(*pp)->next;
    *pp = s;
    pthread_mutex_unlock(&fh->lock);
    return 0;
}

static int host_matches(const fh_server *s, const char *host, size_t hn) {
    if (!s->host) return 1;
    size_t k = host ? mcpg_host_name_len(host, hn) : 0;
    return k && strlen(s->host) == k && !strncasecmp(s->host, host, k);
}

/* The server at path for host: one bound to that host before one for any. */
static const fh_server *server_at(const mcpg_fakehost *fh, const char *path, size_t n,
                                  const char *host, size_t hn) {
    const fh_server *any = NULL;
    for (const fh_server *s = fh->servers; s; s = s->next) {
        if (strlen(s->path) != n || memcmp(s->path, path, n) || !host_matches(s, host, hn))
            continue;
        if (s->host) return s;
        if (!any) any = s;
    }
    return any;
}

static void view_copies_free(void *arg) {
    mcpg_fakehost *fh = arg;
    fh->view_post_pending = 0;
    for (fh_view_copy *v = fh->view_copies, *next; v; v = next) {
        next = v->next;
        free(v);
    }
    fh->view_copies = NULL;
}

/* s's strings copied into one block the next posts free; into out (as far
 * as out->size reaches: a transport built on older headers). */
static int view_give(mcpg_fakehost *fh, const fh_server *s, mcpg_server_view *out) {
    const char *src[5] = {s->name, s->path, s->host, s->info_json, s->instructions};
    const char *dst[5] = {0};
    size_t total = 0;
    for (int i = 0; i < 5; i++) total += src[i] ? strlen(src[i]) + 1 : 0;
    fh_view_copy *v = malloc(sizeof *v + total);
    if (!v) return MCPG_ENOMEM;
    char *p = v->text;
    for (int i = 0; i < 5; i++) {
        if (!src[i]) continue;
        size_t k = strlen(src[i]) + 1;
        memcpy(p, src[i], k);
        dst[i] = p;
        p += k;
    }
    v->next = fh->view_copies; /* loop thread only, as the post that frees it */
    fh->view_copies = v;
    mcpg_server_view all = {.size = out->size, .name = dst[0], .path = dst[1], .host = dst[2],
                            .info_json = dst[3], .instructions = dst[4]};
    size_t n = out->size < sizeof all ? out->size : sizeof all;
    memcpy(out, &all, n);
    return 0;
}

static int host_server_find(mcpg_worker *w, const char *path, size_t n, const char *host,
                            size_t hn, mcpg_server_view *out) {
    mcpg_fakehost *fh = fh_the;
    int rc = fh_loop_only(fh, w, "host->server_find");
    if (rc) return rc;
    if (!path || !out || out->size < offsetof(mcpg_server_view, name) + sizeof out->name)
        return MCPG_EINVAL;
    pthread_mutex_lock(&fh->lock);
    const fh_server *s = server_at(fh, path, n, host, hn);
    rc = s ? view_give(fh, s, out) : MCPG_ENOENT;
    pthread_mutex_unlock(&fh->lock);
    if (!rc && !fh->view_post_pending) { /* fh_post takes the lock itself */
        fh->view_post = (mcpg_post){.fn = view_copies_free, .arg = fh};
        fh->view_post_pending = fh_post(&fh->worker, &fh->view_post) == 0;
    }
    return rc;
}

void fh_server_slots(mcpg_host *h) { h->server_find = host_server_find; }

void fh_servers_free(mcpg_fakehost *fh) {
    view_copies_free(fh);
    for (fh_server *s = fh->servers, *next; s; s = next) {
        next = s->next;
        server_free(s);
    }
    fh->servers = NULL;
}

/* ---- the server calls named ------------------------------------------------------ */

void fh_server_note(mcpg_fakehost *fh, const char *server) {
    pthread_mutex_lock(&fh->lock);
    fh->last_server_set = 1;
    snprintf(fh->last_server, sizeof fh->last_server, "%s", server ? server : "");
    pthread_mutex_unlock(&fh->lock);
}

int mcpg_fakehost_last_server(mcpg_fakehost *fh, char *out, size_t cap) {
    pthread_mutex_lock(&fh->lock);
    int rc = !fh->last_server_set ? -1 : fh->last_server[0] != '\0';
    if (out && cap) snprintf(out, cap, "%s", fh->last_server);
    pthread_mutex_unlock(&fh->lock);
    return rc;
}

const char *mcpg_fakehost_call_server(mcpg_call *call) {
    fh_call *c = fh_call_of(call, "mcpg_fakehost_call_server");
    return c ? c->server : NULL;
}
