/* telemetry_otlp through the SDK's fake host: --check refuses an https
 * endpoint and a batch larger than the queue, naming the key; the policy op
 * hands the kernel the config's ratio and enduser flag; and one span, handed
 * to export_spans, reaches a collector socket the test holds as exactly the
 * protobuf bytes written out below by hand from the OTLP messages (a
 * two-byte varint, fixed64 times, a fixed32 with a two-byte tag, a status).
 * Usage: test_telemetry_otlp path/to/telemetry_otlp.so */
#include <mcpg/check.h>
#include <mcpg/fakehost.h>
#include <mcpg/sdk.h>

#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

static mcpg_fakehost *fh;
static const mcpg_module *desc;

static void test_check(void) {
    MCPG_CHECK(mcpg_fakehost_check(fh, desc, "{\"endpoint\":\"https://c.example/v1/traces\"}") ==
                   MCPG_ECONFIG && strstr(mcpg_fakehost_report_text(fh), "endpoint") &&
                   strstr(mcpg_fakehost_report_text(fh), "https is not supported"),
               "https refused naming endpoint: %s", mcpg_fakehost_report_text(fh));
    MCPG_CHECK(mcpg_fakehost_check(fh, desc, "{\"endpoint\":\"http://127.0.0.1:1/v1/traces\","
                                             "\"queue_spans\":4,\"batch_spans\":8}") == MCPG_ECONFIG &&
                   strstr(mcpg_fakehost_report_text(fh), "batch_spans"),
               "a batch larger than the queue refused: %s", mcpg_fakehost_report_text(fh));
}

/* A listening socket on 127.0.0.1, any free port. */
static int listen_on(int *port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    MCPG_REQUIRE(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && listen(fd, 4) == 0 &&
                     getsockname(fd, (struct sockaddr *)&a, &len) == 0,
                 "listen on 127.0.0.1");
    *port = ntohs(a.sin_port);
    return fd;
}

/* One request from the exporter: its head into head, its body into body
 * (by Content-Length); the body's length. Waits at most 10 s (SO_RCVTIMEO). */
static size_t read_request(int lfd, char *head, size_t head_cap, unsigned char *body, size_t cap) {
    int c = accept(lfd, NULL, NULL);
    MCPG_REQUIRE(c >= 0, "the exporter connected");
    struct timeval tv = {.tv_sec = 10};
    setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char buf[8192];
    size_t got = 0;
    char *end = NULL;
    while (!end) {
        ssize_t r = recv(c, buf + got, sizeof buf - 1 - got, 0);
        MCPG_REQUIRE(r > 0, "the request's head");
        got += (size_t)r;
        buf[got] = '\0';
        end = strstr(buf, "\r\n\r\n");
    }
    snprintf(head, head_cap, "%.*s", (int)(end - buf), buf);
    const char *cl = strcasestr(head, "content-length:");
    size_t n = cl ? strtoul(cl + 15, NULL, 10) : 0, have = got - (size_t)(end + 4 - buf);
    MCPG_REQUIRE(n <= cap && have <= n, "a body of %zu bytes", n);
    memcpy(body, end + 4, have);
    while (have < n) {
        ssize_t r = recv(c, body + have, n - have, 0);
        MCPG_REQUIRE(r > 0, "the request's body");
        have += (size_t)r;
    }
    static const char ok[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    MCPG_CHECK(send(c, ok, sizeof ok - 1, 0) == (ssize_t)(sizeof ok - 1), "answer 200");
    close(c);
    return n;
}

/* ExportTraceServiceRequest { resource_spans { resource { service.name = "svc" },
 * scope_spans { scope { name "mcpg" }, spans: the one below } } }, by hand. */
static const unsigned char EXPECTED[] = {
    0x0a, 0x79,                                 /* 1: ResourceSpans, 121 bytes */
    0x0a, 0x17,                                 /*  1: Resource, 23 */
    0x0a, 0x15,                                 /*   1: KeyValue, 21 */
    0x0a, 0x0c, 's', 'e', 'r', 'v', 'i', 'c', 'e', '.', 'n', 'a', 'm', 'e',
    0x12, 0x05, 0x0a, 0x03, 's', 'v', 'c',      /*    2: AnyValue { 1: "svc" } */
    0x12, 0x5e,                                 /*  2: ScopeSpans, 94 */
    0x0a, 0x06, 0x0a, 0x04, 'm', 'c', 'p', 'g', /*   1: scope { 1: "mcpg" } */
    0x12, 0x54,                                 /*   2: Span, 84 */
    0x0a, 0x10, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, /* 1: trace_id */
    0x12, 0x08, 0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8,         /* 2: span_id */
    0x2a, 0x01, 'n',                            /* 5: name (no parent: a root) */
    0x30, 0x02,                                 /* 6: kind SERVER */
    0x39, 1, 0, 0, 0, 0, 0, 0, 0,               /* 7: start, fixed64 */
    0x41, 2, 0, 0, 0, 0, 0, 0, 0,               /* 8: end, fixed64 */
    0x4a, 0x08, 0x0a, 0x01, 'k', 0x12, 0x03, 0x0a, 0x01, 'v',   /* 9: k = "v" */
    0x4a, 0x08, 0x0a, 0x01, 'i', 0x12, 0x03, 0x18, 0xac, 0x02,  /* 9: i = 300 (varint) */
    0x7a, 0x05, 0x12, 0x01, 'm', 0x18, 0x02,    /* 15: Status { message "m", code ERROR } */
    0x85, 0x01, 1, 0, 0, 0,                     /* 16: flags, fixed32 (tag 133: two bytes) */
};

static void test_export(void) {
    int port, lfd = listen_on(&port);
    char cfg[256];
    snprintf(cfg, sizeof cfg,
             "{\"endpoint\":\"http://127.0.0.1:%d/v1/traces\",\"service_name\":\"svc\","
             "\"batch_spans\":1,\"flush_ms\":10,\"sample_ratio\":0.25,\"include_enduser\":true}",
             port);
    mcpg_instance *inst = NULL;
    MCPG_REQUIRE(mcpg_fakehost_load(fh, desc, "otel", cfg, &inst) == 0, "load: %s",
                 mcpg_fakehost_report_text(fh));
    const mcpg_telemetry_ops *ops = desc->ops;
    void *state = mcpg_fakehost_state(inst);
    mcpg_trace_policy p = {.size = sizeof p, .sample_ratio = 1.0};
    ops->policy(state, &p);
    MCPG_CHECK(p.sample_ratio == 0.25 && p.flags == MCPG_TRACE_ENDUSER, "policy: %g, flags %u",
               p.sample_ratio, p.flags);

    const mcpg_span_attr attrs[] = {
        {.key = "k", .type = MCPG_ATTR_STRING, .str = "v", .len = 1},
        {.key = "i", .type = MCPG_ATTR_INT, .num = 300}};
    mcpg_span s = {.size = sizeof s, .kind = MCPG_SPAN_SERVER,
                   .trace_id = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
                   .span_id = {0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8}, .flags = 1,
                   .status = MCPG_SPAN_ERROR, .name = "n", .status_message = "m", .start_ns = 1,
                   .end_ns = 2, .attrs = attrs, .n_attrs = 2};
    const mcpg_span *one[] = {&s};
    ops->export_spans(state, one, 1);

    char head[2048];
    unsigned char body[1024];
    size_t n = read_request(lfd, head, sizeof head, body, sizeof body);
    MCPG_CHECK(strncmp(head, "POST /v1/traces HTTP/1.1\r\n", 26) == 0, "the request line: %s", head);
    MCPG_CHECK(strcasestr(head, "\r\ncontent-type: application/x-protobuf"), "protobuf: %s", head);
    MCPG_CHECK(n == sizeof EXPECTED && memcmp(body, EXPECTED, n) == 0,
               "the body is the hand-written ExportTraceServiceRequest (%zu bytes, want %zu)", n,
               sizeof EXPECTED);
    MCPG_CHECK(mcpg_fakehost_unload(fh, inst) == 0, "unload");
    close(lfd);
}

int main(int argc, char **argv) {
    MCPG_REQUIRE(argc == 2, "usage: test_telemetry_otlp path/to/telemetry_otlp.so");
    signal(SIGPIPE, SIG_IGN); /* as the gateway does */
    void *image = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    mcpg_module_entry_fn entry = image ? (mcpg_module_entry_fn)dlsym(image, MCPG_ENTRY_SYMBOL) : NULL;
    desc = entry ? entry(MCPG_ABI_MAJOR, MCPG_ABI_MINOR) : NULL;
    MCPG_REQUIRE(desc && desc->kind == MCPG_KIND_TELEMETRY, "%s: a telemetry module", argv[1]);
    fh = mcpg_fakehost_new();
    MCPG_REQUIRE(fh, "mcpg_fakehost_new");
    mcpg_fakehost_set_quiet(fh, 1);
    test_check();
    test_export();
    int problems = mcpg_fakehost_free(fh);
    MCPG_CHECK(problems == 0, "fake host: %d problem(s)", problems);
    dlclose(image);
    return MCPG_CHECK_EXIT("telemetry_otlp");
}
