"""A fleet's store for a test or a bench script: redis-server or a JetStream
nats-server started on free ports in ctx's temp folder (stopped by pid with
.stop()), with what a gateway needs to reach it."""

from test_fleet_nats import NatsServer  # noqa: E402
from test_fleet_redis import Redis  # noqa: E402


def start_store(ctx, store, name):
    """(server, coordinator instance for a manifest, env for the shipped
    conf/fleet-<store>.json) for store "redis" or "nats"; `name` keeps the
    keys (Redis prefix, NATS bucket) of one use apart from another's."""
    if store == "redis":
        srv = Redis(ctx)
        srv.start()
        url = "redis://127.0.0.1:%d" % srv.port
        return (srv, {"name": "cluster", "module": "coordinator_redis",
                      "config": {"url": url, "key_prefix": name + ":"}},
                {"MCPG_REDIS_URL": url, "MCPG_REDIS_PREFIX": name + ":"})
    if store == "nats":
        srv = NatsServer(ctx)
        srv.start()
        return (srv, {"name": "cluster", "module": "coordinator_nats",
                      "config": {"url": srv.url, "bucket": name}},
                {"MCPG_NATS_URL": srv.url, "MCPG_NATS_BUCKET": name})
    raise ValueError("no such store: %r" % store)


def stop_all(gateways, servers):
    """Kill the gateways still running (a script's way out, also on error),
    then stop the stores."""
    for g in gateways:
        if g.proc is not None and g.proc.poll() is None:
            g.kill()
    for s in servers:
        s.stop()
