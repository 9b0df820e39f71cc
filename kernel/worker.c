/* Workers: one libuv loop per thread, each with its own SO_REUSEPORT
 * listening sockets, sharing nothing on the hot path. The kernel owns the
 * listening sockets (they never move at reload); each accepted connection is
 * handed to the transport instance of the worker's current generation. */
#define _GNU_SOURCE
#include "kernel.h"

#include <errno.h>
#include <netdb.h>
#include <sched.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static __thread mcpg_worker *current_worker;

mcpg_worker *worker_self(void) { return current_worker; }

/* Resolve "host:port" ("[::1]:8787", ":8787") for a listener. */
static struct addrinfo *listen_address(const char *hostport, char *err, size_t errcap) {
    char host[256];
    const char *colon = strrchr(hostport, ':');
    size_t hl = (size_t)(colon - hostport);
    if (hl >= sizeof host) hl = sizeof host - 1;
    memcpy(host, hostport, hl);
    host[hl] = '\0';
    if (host[0] == '[' && hl > 1 && host[hl - 1] == ']') { /* [::1]:8787 */
        memmove(host, host + 1, hl - 2);
        host[hl - 2] = '\0';
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    int rc = getaddrinfo(host[0] ? host : NULL, colon + 1, &hints, &ai);
    if (rc) {
        snprintf(err, errcap, "%s: %s", hostport, gai_strerror(rc));
        return NULL;
    }
    return ai;
}

/* SO_REUSEPORT lets every loop have its own listener on one address, but it
 * would also let this gateway join a port another process (of the same
 * user) already listens on, and silently take part of its traffic. So the
 * address is first bound once without it: that bind fails while anyone
 * listens there. (Only SO_REUSEADDR, so connections of an earlier run in
 * TIME_WAIT do not count as "in use".) A socket that was bound and closed
 * without listening leaves nothing behind. */
static int probe_free(const struct addrinfo *ai, const char *hostport, char *err,
                      size_t errcap) {
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(err, errcap, "cannot listen on %s: %s", hostport, strerror(errno));
        return -1;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    int rc = bind(fd, ai->ai_addr, ai->ai_addrlen);
    int e = errno;
    close(fd);
    if (rc == 0) return 0;
    if (e == EADDRINUSE)
        snprintf(err, errcap, "cannot listen on %s: address already in use (another gateway or "
                 "program listens there)", hostport);
    else
        snprintf(err, errcap, "cannot listen on %s: %s", hostport, strerror(e));
    return -1;
}

static bool port_is_any(const struct addrinfo *ai) {
    if (ai->ai_family == AF_INET) return ((struct sockaddr_in *)ai->ai_addr)->sin_port == 0;
    if (ai->ai_family == AF_INET6) return ((struct sockaddr_in6 *)ai->ai_addr)->sin6_port == 0;
    return false;
}

/* One loop's listener on hostport; `first` for the first loop's, which
 * proves the address is free before any SO_REUSEPORT socket binds it. */
static int open_listener(const char *hostport, bool first, char *err, size_t errcap) {
    struct addrinfo *ai = listen_address(hostport, err, errcap);
    if (!ai) return -1;
    if (first && !port_is_any(ai) && probe_free(ai, hostport, err, errcap) != 0) {
        freeaddrinfo(ai);
        return -1;
    }
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd >= 0) {
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
    }
    if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 4096) != 0) {
        snprintf(err, errcap, "cannot listen on %s: %s", hostport, strerror(errno));
        if (fd >= 0) close(fd);
        fd = -1;
    }
    freeaddrinfo(ai);
    return fd;
}

/* "default = CPUs" means the CPUs this process may run on: a gateway pinned
 * with taskset to one core runs one loop, not one per core of the machine. */
static uint32_t usable_cpus(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return (uint32_t)CPU_COUNT(&set);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    return cpus > 0 ? (uint32_t)cpus : 1;
}

/* One loop's socket on one address. Its memory goes in the poll handle's
 * close callback, so a reload can drop it while the loop runs. */
typedef struct listener {
    uv_poll_t poll;
    int fd;
    bool polling;   /* the handle is initialised on the loop */
    char addr[200];
} listener;

static listener *listener_new(const char *addr, int fd) {
    listener *l = calloc(1, sizeof *l);
    if (!l) return NULL;
    l->fd = fd;
    snprintf(l->addr, sizeof l->addr, "%s", addr);
    return l;
}

static void listener_freed(uv_handle_t *h) { free(h); /* the poll is the listener's first member */ }

/* On the loop (or before it runs, when never polled). */
static void listener_close(listener *l) {
    close(l->fd);
    if (!l->polling) {
        free(l);
        return;
    }
    uv_poll_stop(&l->poll);
    uv_close((uv_handle_t *)&l->poll, listener_freed);
}

/* Bind every listener for every worker up front, so a busy port fails the
 * start with a clear message before any thread runs. */
int workers_bind(manifest *m, errlist *errs) {
    uint32_t n = m->workers > 0 ? (uint32_t)m->workers : usable_cpus();
    if (n > MCPG_MAX_WORKERS) n = MCPG_MAX_WORKERS;
    kernel.workers = calloc(n, sizeof *kernel.workers);
    kernel.n_workers = n;
    for (uint32_t i = 0; i < n; i++) {
        mcpg_worker *w = &kernel.workers[i];
        w->index = i;
        for (size_t l = 0; l < m->n_listen && l < 16; l++) {
            char e[512];
            int fd = open_listener(m->listen[l], i == 0, e, sizeof e);
            listener *li = fd >= 0 ? listener_new(m->listen[l], fd) : NULL;
            if (!li) {
                if (fd >= 0) close(fd);
                errlist_add(errs, m->path, "gateway.listen", "%s", fd < 0 ? e : "out of memory");
                return -1;
            }
            w->listeners[w->n_listen++] = li;
        }
    }
    return 0;
}

/* ---- listeners a reload changes ---- */

static listener *(*pending_listeners)[16]; /* per worker, until each loop applies */
static size_t pending_n;

static listener *listener_of(mcpg_worker *w, const char *addr) {
    for (size_t l = 0; l < w->n_listen; l++)
        if (strcmp(w->listeners[l]->addr, addr) == 0) return w->listeners[l];
    return NULL;
}

int workers_listen_prepare(char **listen, size_t n, errlist *errs, const char *file) {
    if (n > 16) n = 16;
    pending_listeners = calloc(kernel.n_workers, sizeof *pending_listeners);
    pending_n = n;
    if (!pending_listeners) return -1;
    for (uint32_t i = 0; i < kernel.n_workers; i++) {
        mcpg_worker *w = &kernel.workers[i];
        for (size_t a = 0; a < n; a++) {
            listener *kept = listener_of(w, listen[a]);
            if (kept) {
                pending_listeners[i][a] = kept;
                continue;
            }
            char e[512];
            int fd = open_listener(listen[a], i == 0, e, sizeof e);
            pending_listeners[i][a] = fd >= 0 ? listener_new(listen[a], fd) : NULL;
            if (!pending_listeners[i][a]) {
                if (fd >= 0) close(fd);
                errlist_add(errs, file, "gateway.listen", "%s", fd < 0 ? e : "out of memory");
                workers_listen_abandon();
                return -1;
            }
        }
    }
    return 0;
}

/* Close what was opened for a reload that did not happen. */
void workers_listen_abandon(void) {
    for (uint32_t i = 0; pending_listeners && i < kernel.n_workers; i++)
        for (size_t a = 0; a < pending_n; a++) {
            listener *l = pending_listeners[i][a];
            if (l && !listener_of(&kernel.workers[i], l->addr)) listener_close(l);
        }
    free(pending_listeners);
    pending_listeners = NULL;
    pending_n = 0;
}

static void on_accept(uv_poll_t *p, int status, int events);

/* On w's loop: the new sockets accept first, then the dropped ones close. */
void workers_listen_apply(mcpg_worker *w) {
    if (!pending_listeners || w->draining) return;
    listener **next = pending_listeners[w->index];
    for (size_t a = 0; a < pending_n; a++) {
        listener *l = next[a];
        if (l->polling) continue;
        uv_poll_init_socket(&w->loop, &l->poll, l->fd);
        l->poll.data = w;
        l->polling = true;
        uv_poll_start(&l->poll, UV_READABLE, on_accept);
    }
    for (size_t l = 0; l < w->n_listen; l++) {
        bool kept = false;
        for (size_t a = 0; a < pending_n && !kept; a++) kept = next[a] == w->listeners[l];
        if (!kept) listener_close(w->listeners[l]);
    }
    memcpy(w->listeners, next, pending_n * sizeof *next);
    w->n_listen = pending_n;
}

/* Once every loop applied them. */
void workers_listen_done(void) {
    free(pending_listeners);
    pending_listeners = NULL;
    pending_n = 0;
}

static void keep_awake_local(uv_idle_t *h) { (void)h; }

/* Other threads' posts: a stack they push on with one compare-and-swap and
 * the loop takes whole with one exchange, without a lock. A lock here was
 * taken by the audit writer once per event it resumed, and a writer
 * preempted while holding it (by the loop it had just woken, on the same
 * core) made the loop sleep on it: a futex wait and two context switches. */
#define POSTS_CLOSED ((mcpg_post *)1)

/* The stack as taken (newest first), turned back into the order posted. */
static mcpg_post *posts_in_order(mcpg_post *p) {
    mcpg_post *in_order = NULL;
    while (p) {
        mcpg_post *next = p->next;
        p->next = in_order;
        in_order = p;
        p = next;
    }
    return in_order;
}

static void run_post_list(mcpg_post *p) {
    while (p) {
        mcpg_post *next = p->next; /* fn may reuse the node */
        p->next = NULL;
        p->fn(p->arg);
        p = next;
    }
}

static void run_posts(mcpg_worker *w) {
    /* only this loop closes the stack (stop_on_loop), so the check cannot
     * go stale before the exchange; taking a closed stack would reopen it */
    if (atomic_load(&w->posts) == POSTS_CLOSED) return;
    run_post_list(posts_in_order(atomic_exchange(&w->posts, NULL)));
}

static void on_wake(uv_async_t *a) { run_posts(a->data); }

/* Posts made on the loop's own thread (a backend answering from one of
 * its callbacks there) run later in the same loop turn, after the poll,
 * without the wake-up's two system calls; the idle handle keeps the next
 * poll from blocking when one is made after the check. They keep their
 * order among themselves; posts from other threads come by the wake-up. */
static void run_local_posts(uv_check_t *h) {
    mcpg_worker *w = h->data;
    mcpg_post *p = w->local_head;
    w->local_head = w->local_tail = NULL;
    uv_check_stop(&w->local_flush);
    uv_idle_stop(&w->local_awake);
    while (p) {
        mcpg_post *next = p->next; /* fn may reuse the node */
        p->next = NULL;
        p->fn(p->arg);
        p = next;
    }
}

static int post_local(mcpg_worker *w, mcpg_post *node) {
    if (w->stopped) return MCPG_ESTATE;
    node->next = NULL;
    if (w->local_tail) {
        w->local_tail->next = node;
    } else {
        w->local_head = node;
        uv_check_start(&w->local_flush, run_local_posts);
        uv_idle_start(&w->local_awake, keep_awake_local);
    }
    w->local_tail = node;
    return 0;
}

int worker_post(mcpg_worker *w, mcpg_post *node) {
    if (current_worker == w) return post_local(w, node);
    /* counted in `senders` from before the push, so that stop_on_loop,
     * having closed the stack, can wait out a send still on its way before
     * it closes the handle: a send to a closed loop writes to a closed, or
     * reused, fd */
    atomic_fetch_add(&w->senders, 1);
    mcpg_post *head = atomic_load(&w->posts);
    do {
        if (head == POSTS_CLOSED) {
            atomic_fetch_sub(&w->senders, 1);
            return MCPG_ESTATE;
        }
        node->next = head;
    } while (!atomic_compare_exchange_weak(&w->posts, &head, node));
    /* one wake-up per batch: later posts ride on the pending one */
    if (head == NULL) uv_async_send(&w->wake);
    atomic_fetch_sub(&w->senders, 1);
    return 0;
}

/* ---- pool jobs, handed over once per loop turn ----
 * The check handle runs right after the poll phase, where most jobs are
 * deferred (reads, posts). A job deferred elsewhere, e.g. by a transport
 * parsing held-back pipelined requests in its prepare callback, would wait
 * in a blocking poll for some unrelated event: the idle handle, active
 * while jobs wait, keeps that poll from blocking. */

static void keep_awake(uv_idle_t *h) { (void)h; }

static void flush_jobs(uv_check_t *h) {
    mcpg_worker *w = h->data;
    pool_job *jobs = w->jobs_head;
    w->jobs_head = w->jobs_tail = NULL;
    uv_check_stop(h);
    uv_idle_stop(&w->jobs_awake);
    pool_job *refused = pool_submit_many(jobs);
    while (refused) {
        pool_job *next = refused->next;
        refused->next = NULL;
        refused->refused(refused);
        refused = next;
    }
}

void worker_defer_job(mcpg_worker *w, pool_job *job) {
    job->next = NULL;
    if (w->jobs_tail) w->jobs_tail->next = job;
    else {
        w->jobs_head = job;
        uv_check_start(&w->jobs_flush, flush_jobs);
        uv_idle_start(&w->jobs_awake, keep_awake);
    }
    w->jobs_tail = job;
}


/* Out of file descriptors (or memory), the pending connection stays in the
 * backlog and the listener stays readable: polling on would spin this loop
 * and flood the log. Stop listening for a moment instead. */
#define ACCEPT_PAUSE_MS 100

static void accept_resume(uv_timer_t *t) {
    mcpg_worker *w = t->data;
    for (size_t l = 0; l < w->n_listen; l++) /* n_listen is 0 once draining */
        uv_poll_start(&w->listeners[l]->poll, UV_READABLE, on_accept);
}

static void accept_pause(mcpg_worker *w, int err) {
    klog(MCPG_LOG_WARN, "kernel", "accept: %s: not accepting for %d ms", strerror(err),
         ACCEPT_PAUSE_MS);
    for (size_t l = 0; l < w->n_listen; l++) uv_poll_stop(&w->listeners[l]->poll);
    uv_timer_start(&w->accept_timer, accept_resume, ACCEPT_PAUSE_MS, 0);
}

static void on_accept(uv_poll_t *p, int status, int events) {
    mcpg_worker *w = p->data;
    if (status < 0 || w->draining) return;
    int lfd = ((listener *)p)->fd;
    for (int i = 0; i < 64; i++) {
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            int err = errno;
            if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM)
                accept_pause(w, err);
            else if (err != EAGAIN && err != EWOULDBLOCK && err != EINTR &&
                     err != ECONNABORTED)
                klog(MCPG_LOG_WARN, "kernel", "accept: %s", strerror(err));
            return;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        mcpg_instance *t = w->gen->transport;
        const mcpg_transport_ops *ops = t->desc->ops;
        if (ops->conn_adopt(t->state, w, fd) != 0) close(fd);
    }
}

static void worker_main(void *arg) {
    mcpg_worker *w = arg;
    current_worker = w;
    metrics_thread_row((int)w->index); /* this loop's own cells */
    char name[16]; /* top -H shows who spends what */
    snprintf(name, sizeof name, "mcpg-loop-%u", w->index);
    pthread_setname_np(pthread_self(), name);
    crash_thread_init();
    uv_run(&w->loop, UV_RUN_DEFAULT);
    crash_thread_end();
}

/* Each instance's per-loop set-up, then the listeners: nothing is accepted
 * on a loop before every instance is ready on it. */
static void begin_on_loop(void *arg) {
    mcpg_worker *w = arg;
    generation *g = w->gen;
    for (size_t i = 0; i < g->n_instances; i++) {
        const mcpg_lifecycle_ops *lc = g->instances[i]->desc->lifecycle;
        if (MCPG_HAS(lc, worker_start)) lc->worker_start(g->instances[i]->state, w);
    }
    for (size_t l = 0; l < w->n_listen; l++)
        uv_poll_start(&w->listeners[l]->poll, UV_READABLE, on_accept);
    if (w->index == 0) watch_adopt(w, g); /* the watches live on loop 0 */
    if (w->index == 0) pins_fleet_adopt(w, g); /* and the fleet's pins */
}

/* The worker's housekeeping, four times a second: requests to clients that
 * were never answered; and once a second, memory a burst left behind. */
static void on_asks_timer(uv_timer_t *t) {
    mcpg_worker *w = t->data;
    asks_expire(w);
    if (++w->housekeeping_ticks % 4 == 0) calls_give_back(w);
}

static mcpg_post begin_posts[MCPG_MAX_WORKERS];

/* libuv opens one descriptor per loop (its reserve for EMFILE) the first time
 * a stream is made on it. Made here, a loop's descriptors are fixed from its
 * start: a loop that takes its first connection an hour later would otherwise
 * show as a descriptor leak to whoever counts /proc/PID/fd. */
static void reserve_loop_fd(mcpg_worker *w) {
    uv_tcp_init(&w->loop, &w->fd_reserve);
    uv_close((uv_handle_t *)&w->fd_reserve, NULL);
}

int workers_start(void) {
    for (uint32_t i = 0; i < kernel.n_workers; i++) {
        mcpg_worker *w = &kernel.workers[i];
        uv_loop_init(&w->loop);
        atomic_init(&w->posts, NULL);
        uv_async_init(&w->loop, &w->wake, on_wake);
        w->wake.data = w;
        w->gen = kernel.gen;
        uv_timer_init(&w->loop, &w->drain_timer);
        w->drain_timer.data = w;
        uv_timer_init(&w->loop, &w->pool_deadline_timer);
        w->pool_deadline_timer.data = w;
        uv_timer_init(&w->loop, &w->asks_timer);
        w->asks_timer.data = w;
        uv_timer_start(&w->asks_timer, on_asks_timer, 250, 250);
        uv_unref((uv_handle_t *)&w->asks_timer); /* never what keeps a loop alive */
        uv_check_init(&w->loop, &w->jobs_flush);
        w->jobs_flush.data = w;
        uv_idle_init(&w->loop, &w->jobs_awake);
        w->jobs_awake.data = w;
        uv_check_init(&w->loop, &w->local_flush);
        w->local_flush.data = w;
        uv_idle_init(&w->loop, &w->local_awake);
        w->local_awake.data = w;
        uv_timer_init(&w->loop, &w->accept_timer);
        w->accept_timer.data = w;
        reserve_loop_fd(w);
        for (size_t l = 0; l < w->n_listen; l++) {
            listener *li = w->listeners[l];
            uv_poll_init_socket(&w->loop, &li->poll, li->fd);
            li->poll.data = w;
            li->polling = true;
        }
        begin_posts[i].fn = begin_on_loop;
        begin_posts[i].arg = w;
        worker_post(w, &begin_posts[i]); /* the first thing the loop runs */
    }
    for (uint32_t i = 0; i < kernel.n_workers; i++)
        if (uv_thread_create(&kernel.workers[i].thread, worker_main, &kernel.workers[i]) != 0) return -1;
    return 0;
}

/* ---- drain: stop accepting, let in-flight calls finish ---- */


/* Idle: no call in flight, no connection, and no call still held by a
 * backend on the pool (pool_deadlines: a call that timed out was answered,
 * but its backend runs on and will post back to this loop). */
static void check_drained(uv_timer_t *t) {
    mcpg_worker *w = t->data;
    mcpg_instance *tr = w->gen->transport;
    const mcpg_transport_ops *ops = tr->desc->ops;
    if (atomic_load(&w->calls_in_flight) == 0 && !w->pool_deadlines &&
        ops->conn_count(tr->state, w) == 0)
        atomic_store(&w->drained, 1);
}

static void drain_on_loop(void *arg) {
    mcpg_worker *w = arg;
    if (w->draining) calls_give_up_backends(w); /* the second, forced drain */
    w->draining = true;
    uv_timer_stop(&w->accept_timer);
    for (size_t l = 0; l < w->n_listen; l++) listener_close(w->listeners[l]);
    w->n_listen = 0;
    mcpg_instance *tr = w->gen->transport;
    const mcpg_transport_ops *ops = tr->desc->ops;
    ops->drain(tr->state, w);
    uv_timer_start(&w->drain_timer, check_drained, 0, 10);
}

/* One set of post nodes per drain: the second (forced) drain must not
 * re-post a node that a stuck loop has not run yet. */
static mcpg_post drain_posts[2][MCPG_MAX_WORKERS];
static unsigned drains;

void workers_drain(void) {
    if (drains >= 2) return;
    mcpg_post *nodes = drain_posts[drains++];
    for (uint32_t i = 0; i < kernel.n_workers; i++) {
        nodes[i].fn = drain_on_loop;
        nodes[i].arg = &kernel.workers[i];
        worker_post(&kernel.workers[i], &nodes[i]);
    }
}

bool workers_idle(void) {
    for (uint32_t i = 0; i < kernel.n_workers; i++)
        if (!atomic_load(&kernel.workers[i].drained)) return false;
    return true;
}

/* ---- stop: close every handle, end the loops, join the threads ---- */

static void close_any(uv_handle_t *h, void *arg) {
    (void)arg;
    if (!uv_is_closing(h)) uv_close(h, NULL);
}

static void stop_on_loop(void *arg) {
    mcpg_worker *w = arg;
    w->stopped = true;
    mcpg_post *last = atomic_exchange(&w->posts, POSTS_CLOSED);
    while (atomic_load(&w->senders)) sched_yield(); /* a wake-up still on its way */
    run_post_list(posts_in_order(last)); /* whatever raced in before the door closed */
    if (w->local_head) run_local_posts(&w->local_flush);
    if (w->index == 0) watch_stop(w); /* while the coordinator still takes ops: leases go back */
    if (w->index == 0) pins_fleet_stop(w);
    module_work_cancel_queued(w); /* done(MCPG_ECANCELED), before the instances stop */
    calls_free_worker(w);
    /* instances close what they keep on this loop, in reverse order; the
     * walk then closes what is left (the kernel's own handles) */
    generation *g = w->gen;
    for (size_t i = g->n_instances; i-- > 0;) {
        const mcpg_lifecycle_ops *lc = g->instances[i]->desc->lifecycle;
        if (MCPG_HAS(lc, worker_stop)) lc->worker_stop(g->instances[i]->state, w);
    }
    reload_worker_stopping(w); /* a generation still retiring: what leaves */
    timers_close_left(w); /* module bugs: logged, closed and freed */
    uv_walk(&w->loop, close_any, NULL);
}

static mcpg_post stop_posts[MCPG_MAX_WORKERS];

/* Ends the loops and joins their threads. The worker structs stay: pool and
 * module threads may still post to them (worker_post then fails with
 * MCPG_ESTATE) until the pool is stopped and the instances too; then
 * workers_free. */
void workers_stop(void) {
    for (uint32_t i = 0; i < kernel.n_workers; i++) {
        stop_posts[i].fn = stop_on_loop;
        stop_posts[i].arg = &kernel.workers[i];
        worker_post(&kernel.workers[i], &stop_posts[i]);
    }
    for (uint32_t i = 0; i < kernel.n_workers; i++) {
        mcpg_worker *w = &kernel.workers[i];
        uv_thread_join(&w->thread);
        if (uv_loop_close(&w->loop) != 0)
            klog(MCPG_LOG_WARN, "kernel", "worker %u: loop closed with handles still open", i);
    }
}

void workers_free(void) {
    for (uint32_t i = 0; i < kernel.n_workers; i++) {
        calls_free_abandoned(&kernel.workers[i]);
        module_work_free_left(&kernel.workers[i]);
        asks_free(&kernel.workers[i]);
    }
    watch_free_left();
    free(kernel.workers);
    kernel.workers = NULL;
    kernel.n_workers = 0;
    drains = 0;
}
