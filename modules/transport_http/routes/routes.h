/* transport_http's routes: what a request's path and method lead to
 * (router.c), and the routes beside /mcp: admin, metrics, readyz, webhooks.
 * The top layer: it calls the wires and the http layer, nothing calls it but
 * the http layer's th_route (declared in http/http.h) and transport_http.c. */
#ifndef TH_ROUTES_H
#define TH_ROUTES_H

#include "routes/webhook.h"
#include "wire/wire.h"

/* metrics.c: the transport's gauges (connections, streams, sessions) */
void th_metrics_register(th_mod *m);

/* admin.c: POST /admin/reload */
int th_admin_init(th_mod *m);
int th_admin_enabled(const th_mod *m);
void th_admin_reload(th_conn *c, th_req *r);

void th_readyz(th_conn *c, th_req *r, const char *url, size_t n); /* GET /readyz (readyz.c) */
void th_metrics(th_conn *c, th_req *r); /* GET /metrics (metrics.c) */

#endif
