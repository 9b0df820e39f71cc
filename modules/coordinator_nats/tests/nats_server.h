/* Real nats-server processes for tests and the store bench: started in a
 * temp folder on free loopback ports, ready once /healthz says ok, stopped
 * by pid. NATS_SERVER names the binary (default /usr/sbin/nats-server). */
#ifndef NATS_SERVER_H
#define NATS_SERVER_H

#include <sys/types.h>

typedef struct nats_node {
    pid_t pid;
    int port, http_port, route_port;
    char dir[512];
    char url[64];
} nats_node;

/* 0 when the binary exists. */
int nats_server_available(void);
/* A single JetStream node in a fresh folder under base; port 0 = a free one. */
int nats_node_start(nats_node *n, const char *base, const char *name, int port);
/* The same with clients required to present this token. */
int nats_node_start_token(nats_node *n, const char *base, const char *name, const char *token);
/* Start it again on its own port and store (after nats_node_kill). */
int nats_node_restart(nats_node *n);
/* SIGKILL, wait. */
void nats_node_kill(nats_node *n);
/* SIGTERM, wait (SIGKILL after 5 s). */
void nats_node_stop(nats_node *n);
/* Three nodes as one JetStream cluster; url gets all three. */
int nats_cluster_start(nats_node n[3], const char *base, char *urls, size_t cap);
/* GET path on the monitoring port: the body in out (NUL-terminated). */
int nats_http_get(int port, const char *path, char *out, size_t cap);
/* A fresh temp folder (mkdtemp) and its removal. */
int nats_tmpdir(char *out, size_t cap);
void nats_rmdir(const char *dir);

#endif
