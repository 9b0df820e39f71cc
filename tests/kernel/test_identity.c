/* ABI 1.2 through the kernel: the identity chain and anonymous calls, the
 * policy stage seeing the client's name and roles, lists filtered per
 * caller by visible(), every method's refusal audited with its stage and
 * instance, and what audit events carry (roles, peer, traceparent,
 * gateway.id, redacted arguments and results). Fixtures: fx_identity (the
 * x-test-user header), fx_policy, fx_trail (every event field to a file). */
#include "mcpg/check.h"
#include "probe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The gateway of the test (kernel_up writes it to a file). */
static const char *manifest_text(const char *modules_dir, const char *trail) {
    static char text[4096];
    snprintf(text, sizeof text,
             "{\"gateway\":{\"workers\":1,\"module_dir\":\"%s\",\"log_level\":\"error\","
             "\"id\":\"gw-test\",\"server\":{\"access_log\":false},"
             "\"audit\":{\"results\":true},"
             "\"redact\":{\"pointers\":[\"/card/number\",\"/list/*/pin\"],"
             "\"patterns\":[\"sk-[A-Za-z0-9]{8,}\"]}},"
             "\"modules\":["
             "{\"name\":\"who\",\"module\":\"fx_identity\"},"
             "{\"name\":\"rules\",\"module\":\"fx_policy\"},"
             "{\"name\":\"mock\",\"module\":\"backend_mock\",\"inline_dispatch\":true,"
             "\"config\":{\"tools\":[{\"name\":\"echo\"},{\"name\":\"secret_echo\"}]}},"
             "{\"name\":\"trail\",\"module\":\"fx_trail\",\"config\":{\"path\":\"%s\"}}],"
             "\"pipeline\":{\"identity\":[\"who\"],\"policy\":[\"rules\"],\"audit\":[\"trail\"]},"
             "\"bindings\":[{\"backend\":\"mock\",\"prefix\":\"m\"}]}",
             modules_dir, trail);
    return text;
}

/* The one line of the trail holding every needle (NULL ends them), or "". */
static const char *trail_line(const char *path, const char *n1, const char *n2, const char *n3) {
    static char line[8192];
    FILE *f = fopen(path, "r");
    while (f && fgets(line, sizeof line, f))
        if (strstr(line, n1) && (!n2 || strstr(line, n2)) && (!n3 || strstr(line, n3))) {
            fclose(f);
            return line;
        }
    if (f) fclose(f);
    return "";
}

static void lists(void) {
    probe p;
    probe_run(&p, "tools/list", NULL, NULL, "1", "alice");
    MCPG_CHECK(!p.is_error && strstr(p.text, "\"m_echo\"") && !strstr(p.text, "secret"),
               "alice's tools/list hides the secret tool: %s", p.text);
    probe_run(&p, "tools/list", NULL, NULL, "2", "root");
    MCPG_CHECK(!p.is_error && strstr(p.text, "\"m_echo\"") && strstr(p.text, "\"m_secret_echo\""),
               "root (role admin) sees both: %s", p.text);
    probe_run(&p, "tools/list", NULL, NULL, "3", "mallory");
    MCPG_CHECK(p.is_error && p.code == MCPG_RPC_FORBIDDEN && p.http == 403,
               "mallory's list refused by check(): %lld %d", (long long)p.code, p.http);
}

static void calls(void) {
    probe p;
    probe_run(&p, "tools/call", "m_secret_echo", "{\"message\":\"x\"}", "10", "alice");
    MCPG_CHECK(p.is_error && p.code == MCPG_RPC_FORBIDDEN,
               "policy saw the client's name m_secret_echo and refused: %s", p.text);
    probe_run(&p, "tools/call", "m_secret_echo", "{\"message\":\"x\"}", "11", "root");
    MCPG_CHECK(!p.is_error && strstr(p.text, "Echo: x"), "root may: %s", p.text);
    probe_run(&p, "tools/call", "m_echo", "{}", "12", NULL);
    MCPG_CHECK(p.is_error && p.code == MCPG_RPC_UNAUTHENTICATED && p.http == 401,
               "anonymous refused: %lld %d %s", (long long)p.code, p.http, p.text);
}

/* Arguments with a card number (pointer), a pin in a list (wildcard), a
 * password (member name), an API key (pattern) and a JWT (shape). */
static const char SECRET_ARGS[] =
    "{\"message\":\"token eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJhIn0.c2lnbmF0dXJl and "
    "sk-ABCDEFGH12345678 here\",\"card\":{\"number\":4111111111111111,\"exp\":\"12/30\"},"
    "\"list\":[{\"pin\":\"1234\"},{\"pin\":\"5678\",\"ok\":1}],\"password\":\"hunter2\"}";

static void audit_fields(const char *trail) {
    probe p;
    probe_start(&p, "tools/call", "m_echo", 6, SECRET_ARGS, "20", "root");
    p.desc.peer = "127.0.0.1:4242";
    p.desc.peer_len = strlen(p.desc.peer);
    probe_wait(&p);
    MCPG_CHECK(!p.is_error, "root's echo: %s", p.text);
    const char *done = trail_line(trail, "event=mcpg.tool.call.completed", "id=20 ", NULL);
    MCPG_CHECK(strstr(done, "principal=root ") && strstr(done, "roles=[\"admin\",\"ops\"]") &&
                   strstr(done, "auth=fixture") && strstr(done, "peer=127.0.0.1:4242") &&
                   strstr(done, "gateway_id=gw-test") && strstr(done, "tool=m_echo "),
               "completed event's identity and connection: %s", done);
    static const char *const planted[] = {"eyJhbGciOiJSUzI1NiJ9", "sk-ABCDEFGH12345678",
                                          "4111111111111111", "1234", "5678", "hunter2"};
    for (size_t i = 0; i < sizeof planted / sizeof *planted; i++)
        MCPG_CHECK(!strstr(done, planted[i]), "secret %s reached the sink: %s", planted[i], done);
    MCPG_CHECK(strstr(done, "\"exp\":\"12/30\"") && strstr(done, "\"ok\":1") &&
                   strstr(done, "token [REDACTED] and [REDACTED] here"),
               "what is not secret stays, and stays JSON: %s", done);
    MCPG_CHECK(strstr(done, "result={\"content\""), "results shown when asked: %s", done);

    const char *denied = trail_line(trail, "event=mcpg.tool.call.denied", "id=3 ", NULL);
    MCPG_CHECK(strstr(denied, "method=tools/list") && strstr(denied, "denied_stage=policy") &&
                   strstr(denied, "denied_by=rules"),
               "a list's refusal is audited with stage and instance: %s", denied);
    denied = trail_line(trail, "event=mcpg.tool.call.denied", "id=12 ", NULL);
    MCPG_CHECK(strstr(denied, "denied_stage=identity") && strstr(denied, "denied_by=-") &&
                   strstr(denied, "principal=- "),
               "the kernel's anonymous refusal is audited: %s", denied);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_identity MODULES_DIR\n");
        return 2;
    }
    char dir[] = "/tmp/mcpg-identity-XXXXXX";
    if (!mkdtemp(dir)) return 2;
    char trail[600];
    snprintf(trail, sizeof trail, "%s/trail.txt", dir);
    MCPG_REQUIRE(kernel_up(dir, "identity.json", manifest_text(argv[1], trail), argv[1]),
                 "the test's gateway did not start");

    lists();
    calls();
    audit_fields(trail);

    kernel_down();
    unlink(trail);
    char path[700];
    snprintf(path, sizeof path, "%s/identity.json", dir);
    unlink(path);
    rmdir(dir);
    return MCPG_CHECK_EXIT("test_identity");
}
