/* audit_syslog: audit events to the system log, one JSON line each.
 *
 * Each event becomes a syslog message (RFC 3164, what glibc's syslog() sends)
 *   <PRI>Mmm dd hh:mm:ss IDENT[PID]: {"event":"mcpg.tool.call.completed",...}
 * sent to the local syslog daemon's datagram socket (`socket`, /dev/log by
 * default) with the facility from the config; the daemon adds the host name.
 *
 * Why not openlog()/syslog()? They keep their ident, facility and socket in
 * the C library's globals, shared by the whole process: two instances (or the
 * old and new generation during a reload) would overwrite each other's
 * settings. Each instance here owns its socket instead.
 *
 * NOT DURABLE (no MCPG_MOD_DURABLE): emit() hands the datagram to the kernel
 * and answers at once. A syslog daemon that is down, slow (its socket buffer
 * full: the send would block) or that drops under load loses the event, and
 * the call goes on. The losses are counted and logged. Pair it with
 * audit_file when every event must be kept.
 */
#include <mcpg/sdk.h>

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <syslog.h> /* LOG_* facility and priority values only */
#include <time.h>
#include <unistd.h>

typedef struct syslog_config {
    const char *socket, *facility, *ident;
} syslog_config;

static const mcpg_config_field syslog_fields[] = {
    MCPG_CFG_STRING_FIELD(syslog_config, socket, "socket", "\"/dev/log\"",
                          "the syslog daemon's unix datagram socket"),
    MCPG_CFG_ENUM_FIELD(syslog_config, facility, "facility", "\"auth\"",
                        "auth|authpriv|daemon|user|local0|local1|local2|local3|local4|local5|"
                        "local6|local7",
                        "the syslog facility of every message"),
    MCPG_CFG_STRING_FIELD(syslog_config, ident, "ident", "\"mcpg\"",
                          "the program name in each message"),
    MCPG_CONFIG_END};

static const struct {
    const char *name;
    int value;
} facilities[] = {{"auth", LOG_AUTH},     {"authpriv", LOG_AUTHPRIV}, {"daemon", LOG_DAEMON},
                  {"user", LOG_USER},     {"local0", LOG_LOCAL0},     {"local1", LOG_LOCAL1},
                  {"local2", LOG_LOCAL2}, {"local3", LOG_LOCAL3},     {"local4", LOG_LOCAL4},
                  {"local5", LOG_LOCAL5}, {"local6", LOG_LOCAL6},     {"local7", LOG_LOCAL7}};

typedef struct syslog_sink {
    const mcpg_host *host;
    mcpg_instance *self;
    const syslog_config *cfg;
    int facility;
    int fd; /* a datagram socket; send() on it is thread-safe */
    struct sockaddr_un to;
    atomic_ullong lost; /* events the daemon did not take */
} syslog_sink;

static int syslog_validate(const mcpg_host *host, const void *config, mcpg_report *rep) {
    const syslog_config *c = config;
    int bad = 0;
    if (strlen(c->socket) >= sizeof(((struct sockaddr_un *)0)->sun_path) || c->socket[0] != '/') {
        host->report_error(rep, "socket", "must be an absolute path shorter than %zu bytes",
                           sizeof(((struct sockaddr_un *)0)->sun_path));
        bad = 1;
    }
    if (!c->ident[0] || strlen(c->ident) > 32 || strpbrk(c->ident, " :[]")) {
        host->report_error(rep, "ident", "must be 1 to 32 bytes without spaces, ':' or brackets");
        bad = 1;
    }
    return bad ? MCPG_ECONFIG : 0;
}

static int syslog_create(const mcpg_host *host, mcpg_instance *self, const void *config,
                         void **out) {
    const syslog_config *c = config;
    syslog_sink *s = host->calloc(1, sizeof *s);
    if (!s) return MCPG_ENOMEM;
    *s = (syslog_sink){.host = host, .self = self, .cfg = c, .to.sun_family = AF_UNIX};
    for (size_t i = 0; i < sizeof facilities / sizeof facilities[0]; i++)
        if (!strcmp(facilities[i].name, c->facility)) s->facility = facilities[i].value;
    snprintf(s->to.sun_path, sizeof s->to.sun_path, "%s", c->socket);
    /* Unconnected: each send names the socket, so a daemon that restarts
     * (a new socket at the same path) is reached again without reconnecting. */
    s->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s->fd < 0) {
        host->log(self, MCPG_LOG_ERROR, "socket for %s: %s", c->socket, strerror(errno));
        host->free(s);
        return MCPG_EIO;
    }
    *out = s;
    return 0;
}

static void syslog_destroy(void *instance) {
    syslog_sink *s = instance;
    close(s->fd);
    s->host->free(s);
}

/* The event as one JSON object: what a log search wants to filter on. */
static int format_event(const mcpg_host *h, mcpg_buf *b, const mcpg_audit_event *ev) {
    const char *keys[] = {"event", "tool", "backend", "principal", "tenant", "error"};
    const char *vals[] = {ev->name,      ev->tool,   ev->backend,
                          ev->principal, ev->tenant, ev->error_message};
    int rc = h->buf_printf(b, "{\"seq\":%llu", (unsigned long long)ev->seq);
    for (size_t i = 0; i < sizeof keys / sizeof keys[0] && rc == 0; i++)
        if (vals[i]) {
            rc = h->buf_printf(b, ",\"%s\":", keys[i]);
            if (rc == 0) rc = h->buf_append_json_string(b, vals[i], strlen(vals[i]));
        }
    if (rc == 0)
        rc = h->buf_printf(b, ",\"code\":%lld,\"latency_us\":%llu}", (long long)ev->error_code,
                           (unsigned long long)ev->latency_us);
    return rc;
}

/* Losses are logged on the first and then every 100th, never once per event. */
static void count_lost(syslog_sink *s, int err) {
    unsigned long long n = atomic_fetch_add(&s->lost, 1) + 1;
    if (n == 1 || n % 100 == 0)
        s->host->log(s->self, MCPG_LOG_WARN, "syslog socket %s: %s; %llu events lost so far",
                     s->cfg->socket, strerror(err), n);
}

/* On the call's loop thread: must not block, hence the non-blocking socket. */
static mcpg_status syslog_emit(void *instance, mcpg_call *call, const mcpg_audit_event *ev) {
    syslog_sink *s = instance;
    const mcpg_host *h = s->host;
    mcpg_buf b = {0};
    char stamp[32];
    time_t secs = (time_t)(ev->time_us / 1000000);
    struct tm tm;
    localtime_r(&secs, &tm);
    strftime(stamp, sizeof stamp, "%b %e %H:%M:%S", &tm);
    /* An allowed call is routine; a denied or failed one deserves a look. */
    int severity =
        strstr(ev->name, ".denied") || strstr(ev->name, ".failed") ? LOG_WARNING : LOG_INFO;
    int rc = h->buf_printf(&b, "<%d>%s %s[%d]: ", s->facility | severity, stamp, s->cfg->ident,
                           (int)getpid());
    if (rc == 0) rc = format_event(h, &b, ev);
    int err = rc != 0 ? ENOMEM : 0;
    if (rc == 0 &&
        sendto(s->fd, b.data, b.len, MSG_NOSIGNAL, (struct sockaddr *)&s->to, sizeof s->to) < 0)
        err = errno; /* EAGAIN: the daemon is behind; ENOENT, ECONNREFUSED: not running */
    h->buf_free(&b);
    if (err) count_lost(s, err);
    return MCPG_CONTINUE; /* not durable: the call never waits for, or fails on, syslog */
}

static const mcpg_lifecycle_ops syslog_lifecycle = {
    MCPG_OPS_HEAD(mcpg_lifecycle_ops), .validate = syslog_validate, .create = syslog_create,
    .destroy = syslog_destroy};
static const mcpg_audit_ops syslog_ops = {MCPG_OPS_HEAD(mcpg_audit_ops), .emit = syslog_emit};
MCPG_MODULE_DEFINE(MCPG_KIND_AUDIT, "audit_syslog", "1.0.0",
                   .description = "audit events to syslog as JSON; NOT durable: an event the "
                                  "daemon does not take is lost (counted, logged)",
                   .flags = 0, /* deliberately not MCPG_MOD_DURABLE */
                   .config = syslog_fields, .config_size = sizeof(syslog_config),
                   .lifecycle = &syslog_lifecycle, .ops = &syslog_ops);
