/* The tests' HTTP server and certificates (see testsrv.h). Blocking I/O on
 * its own threads: it is the far end, not code under test. */
#define _GNU_SOURCE
#include "testsrv.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_CONNS 64

typedef struct sconn {
    tsrv *s;
    int fd;
    SSL *ssl;
    pthread_t th;
} sconn;

struct tsrv {
    int lfd, port;
    SSL_CTX *tls;
    pthread_t th;
    atomic_int stop, accepted, requests, closed, close_after, released;
    pthread_mutex_t lock;
    sconn *conns[MAX_CONNS];
    int nconns;
};

static void nap(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static ssize_t c_read(sconn *c, char *p, size_t n) {
    if (c->ssl) return SSL_read(c->ssl, p, (int)n);
    return recv(c->fd, p, n, 0);
}

static int c_write(sconn *c, const char *p) {
    size_t n = strlen(p);
    if (c->ssl) return SSL_write(c->ssl, p, (int)n) == (int)n ? 0 : -1;
    return send(c->fd, p, n, MSG_NOSIGNAL) == (ssize_t)n ? 0 : -1;
}

/* the answer for path; 1: close the connection after it */
static int answer(sconn *c, const char *path) {
    tsrv *s = c->s;
    if (strcmp(path, "/stream") == 0) {
        c_write(c, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                   "Transfer-Encoding: chunked\r\n\r\n5\r\npart1\r\n");
        for (int i = 0; i < 300 && !atomic_load(&s->released) && !atomic_load(&s->stop); i++) nap(10);
        atomic_store(&s->released, 0);
        return c_write(c, "5\r\npart2\r\n0\r\n\r\n") ? 1 : 0;
    }
    if (strcmp(path, "/chunked") == 0)
        return c_write(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                          "5\r\nhello\r\n1\r\n \r\n5\r\nworld\r\n0\r\n\r\n") ? 1 : 0;
    if (strcmp(path, "/close") == 0) {
        c_write(c, "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nuntil-close");
        return 1;
    }
    if (strcmp(path, "/slow") == 0) {
        struct pollfd pf = {.fd = c->fd, .events = POLLIN};
        while (!atomic_load(&s->stop) && poll(&pf, 1, 20) == 0) {}
        return 1;
    }
    if (strcmp(path, "/garbage") == 0) {
        c_write(c, "HELLO THERE\r\n\r\n");
        return 1;
    }
    if (strcmp(path, "/hold") == 0) {
        nap(150);
        return c_write(c, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nheld") ? 1 : 0;
    }
    return c_write(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Test: yes\r\n"
                      "Content-Length: 11\r\n\r\n{\"ok\":true}") ? 1 : 0;
}

/* One request's head and body read; its path in path. 0, or -1 at the end. */
static int read_request(sconn *c, char *buf, size_t cap, size_t *have, char *path) {
    for (;;) {
        char *end = memmem(buf, *have, "\r\n\r\n", 4);
        if (end) {
            size_t hl = (size_t)(end - buf) + 4, bl = 0;
            char *cl = strcasestr(buf, "\r\nContent-Length:");
            if (cl && cl < end) bl = (size_t)atoi(cl + 17);
            if (*have >= hl + bl) {
                sscanf(buf, "%*s %255s", path);
                memmove(buf, buf + hl + bl, *have - hl - bl);
                *have -= hl + bl;
                return 0;
            }
        }
        if (*have + 1 >= cap) return -1;
        ssize_t n = c_read(c, buf + *have, cap - 1 - *have);
        if (n <= 0) return -1;
        *have += (size_t)n;
        buf[*have] = '\0';
    }
}

/* Our side is shut: wait for the client to close its end (what it sends
 * meanwhile is dropped), so tsrv_closed tells the test the client saw it. */
static void drain(sconn *c) {
    char scratch[4096];
    struct pollfd pf = {.fd = c->fd, .events = POLLIN};
    while (!atomic_load(&c->s->stop)) {
        int rc = poll(&pf, 1, 20);
        if (rc < 0 || (rc > 0 && recv(c->fd, scratch, sizeof scratch, 0) <= 0)) return;
    }
}

static void serve(sconn *c) {
    tsrv *s = c->s;
    char buf[16384], path[256];
    size_t have = 0;
    while (!atomic_load(&s->stop) && read_request(c, buf, sizeof buf, &have, path) == 0) {
        atomic_fetch_add(&s->requests, 1);
        /* read before answering: the test changes it only once it has seen
         * an answer, so each answer goes out under the setting meant for it */
        int close_after = atomic_load(&s->close_after);
        if (answer(c, path) || close_after) return;
    }
}

static void *conn_main(void *arg) {
    sconn *c = arg;
    if (c->s->tls && (c->ssl = SSL_new(c->s->tls))) SSL_set_fd(c->ssl, c->fd);
    int ok = !c->s->tls || (c->ssl && SSL_accept(c->ssl) == 1); /* no: e.g. the client refused the certificate */
    if (ok) serve(c);
    if (ok && c->ssl) SSL_shutdown(c->ssl);
    shutdown(c->fd, SHUT_WR);
    drain(c);
    atomic_fetch_add(&c->s->closed, 1);
    return NULL;
}

static void *accept_main(void *arg) {
    tsrv *s = arg;
    while (!atomic_load(&s->stop)) {
        struct pollfd pf = {.fd = s->lfd, .events = POLLIN};
        if (poll(&pf, 1, 20) <= 0) continue;
        int fd = accept(s->lfd, NULL, NULL);
        if (fd < 0) continue;
        pthread_mutex_lock(&s->lock);
        sconn *c = s->nconns < MAX_CONNS ? calloc(1, sizeof *c) : NULL;
        if (c) {
            *c = (sconn){.s = s, .fd = fd};
            atomic_fetch_add(&s->accepted, 1); /* before its answer can be seen */
            if (pthread_create(&c->th, NULL, conn_main, c) == 0) {
                s->conns[s->nconns++] = c;
            } else {
                atomic_fetch_sub(&s->accepted, 1);
                free(c);
                c = NULL;
            }
        }
        pthread_mutex_unlock(&s->lock);
        if (!c) close(fd);
    }
    return NULL;
}

tsrv *tsrv_start(SSL_CTX *tls) {
    tsrv *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->tls = tls;
    pthread_mutex_init(&s->lock, NULL);
    s->lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    int one = 1;
    setsockopt(s->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (s->lfd < 0 || bind(s->lfd, (struct sockaddr *)&a, sizeof a) || listen(s->lfd, 64) ||
        getsockname(s->lfd, (struct sockaddr *)&a, &al) ||
        pthread_create(&s->th, NULL, accept_main, s)) {
        if (s->lfd >= 0) close(s->lfd);
        free(s);
        return NULL;
    }
    s->port = ntohs(a.sin_port);
    return s;
}

int tsrv_port(const tsrv *s) { return s->port; }
int tsrv_accepted(const tsrv *s) { return atomic_load(&s->accepted); }
int tsrv_requests(const tsrv *s) { return atomic_load(&s->requests); }
int tsrv_closed(const tsrv *s) { return atomic_load(&s->closed); }
void tsrv_close_after(tsrv *s, int on) { atomic_store(&s->close_after, on); }
void tsrv_release(tsrv *s) { atomic_store(&s->released, 1); }

void tsrv_stop(tsrv *s) {
    atomic_store(&s->stop, 1);
    pthread_join(s->th, NULL);
    for (int i = 0; i < s->nconns; i++) shutdown(s->conns[i]->fd, SHUT_RDWR);
    for (int i = 0; i < s->nconns; i++) {
        sconn *c = s->conns[i];
        pthread_join(c->th, NULL);
        SSL_free(c->ssl);
        close(c->fd);
        free(c);
    }
    close(s->lfd);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

int tsrv_dead_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    int ok = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
             getsockname(fd, (struct sockaddr *)&a, &al) == 0;
    if (fd >= 0) close(fd);
    return ok ? ntohs(a.sin_port) : -1;
}

/* ------------------------------------------------------------------ */
/* certificates                                                        */

static int run(const tcerts *c, const char *cmd) {
    char line[1024];
    snprintf(line, sizeof line, "cd %s && %s >/dev/null 2>&1", c->dir, cmd);
    return system(line) == 0 ? 0 : -1;
}

int tcerts_make(tcerts *c) {
    snprintf(c->dir, sizeof c->dir, "/tmp/upc-certs-XXXXXX");
    if (!mkdtemp(c->dir)) return -1;
    snprintf(c->ca, sizeof c->ca, "%s/ca.pem", c->dir);
    snprintf(c->cert, sizeof c->cert, "%s/srv.pem", c->dir);
    snprintf(c->key, sizeof c->key, "%s/srv.key", c->dir);
    static const char *const steps[] = {
        "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 "
        "-keyout ca.key -out ca.pem -subj /CN=mcpg-test-ca "
        "-addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign",
        "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
        "-keyout srv.key -out srv.csr -subj /CN=localhost",
        "openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 "
        "-extfile ext.cnf -out srv.pem",
    };
    char ext[128];
    snprintf(ext, sizeof ext, "%s/ext.cnf", c->dir);
    FILE *f = fopen(ext, "w");
    if (!f) return -1;
    fputs("subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n"
          "extendedKeyUsage=serverAuth\n", f);
    fclose(f);
    for (size_t i = 0; i < sizeof steps / sizeof *steps; i++)
        if (run(c, steps[i])) return -1;
    return 0;
}

void tcerts_remove(const tcerts *c) {
    static const char *const files[] = {"ca.key", "ca.pem", "ca.srl", "srv.key", "srv.csr",
                                        "srv.pem", "ext.cnf"};
    char p[160];
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        snprintf(p, sizeof p, "%s/%s", c->dir, files[i]);
        unlink(p);
    }
    rmdir(c->dir);
}

SSL_CTX *tcerts_server_ctx(const tcerts *c) {
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (ctx && SSL_CTX_use_certificate_chain_file(ctx, c->cert) == 1 &&
        SSL_CTX_use_PrivateKey_file(ctx, c->key, SSL_FILETYPE_PEM) == 1)
        return ctx;
    SSL_CTX_free(ctx);
    return NULL;
}
