/* The names identity_mtls takes from a certificate: the subject's CN from
 * RFC 2253 text (escapes, multi-valued RDNs, quoted and BER values) and a
 * subjectAltName of one type from the transport's JSON array. */
#include <mcpg/check.h>

#include <string.h>

#include "../mtls_names.h"

static void cn_is(const char *subject, const char *expected) {
    char out[64] = "untouched";
    int got = mtls_subject_cn(subject, out, sizeof out);
    if (expected)
        MCPG_CHECK(got && strcmp(out, expected) == 0, "CN of %s: got %d '%s', expected '%s'",
                   subject ? subject : "(null)", got, out, expected);
    else
        MCPG_CHECK(!got, "CN of %s: expected none, got '%s'", subject ? subject : "(null)", out);
}

static void san_is(const char *sans, const char *type, const char *expected) {
    char out[64];
    int got = mtls_san(sans, type, out, sizeof out);
    if (expected)
        MCPG_CHECK(got && strcmp(out, expected) == 0, "%s of %s: got %d '%s', expected '%s'",
                   type, sans, got, got ? out : "", expected);
    else
        MCPG_CHECK(!got, "%s of %s: expected none, got '%s'", type, sans, out);
}

int main(void) {
    cn_is("CN=alice,O=Acme", "alice");
    cn_is("O=Acme,CN=bob", "bob");
    cn_is("CN=alice,CN=users,DC=example", "alice"); /* the most specific comes first */
    cn_is("cn=lower", "lower");
    cn_is("2.5.4.3=by-oid,O=x", "by-oid");
    cn_is("CN=alice\\, jr.,O=x", "alice, jr.");
    cn_is("CN=a\\+b+UID=7,O=x", "a+b");
    cn_is("UID=7+CN=carol,O=x", "carol");
    cn_is("O=x\\,y,CN=z", "z");
    cn_is("O=x\\2Cy,CN=z", "z");
    cn_is("CN=\\C3\\A9mile", "\xc3\xa9mile"); /* OpenSSL's escaped UTF-8 */
    cn_is("CN=  spaced  ,O=x", "spaced");
    cn_is("CN=trail\\ ,O=x", "trail ");
    cn_is("CN=\\ lead", " lead");
    cn_is("CN=\"quoted, name\",O=x", "quoted, name");
    cn_is("O=#04024869,CN=after-ber", "after-ber");
    cn_is("CN=#04024869", NULL);
    cn_is("O=Acme", NULL);
    cn_is("CN=,O=x", NULL);
    cn_is("CN=a\\00b", NULL);
    cn_is("CN=a\\0Ab", NULL);
    cn_is("CN=bad\\q", NULL);
    cn_is("CN=\"open", NULL);
    cn_is("CN", NULL);
    cn_is("=x,CN=y", NULL);
    cn_is("", NULL);
    cn_is(NULL, NULL);
    cn_is("CN=0123456789012345678901234567890123456789012345678901234567890123", NULL);
    cn_is("CN=012345678901234567890123456789012345678901234567890123456789012", /* 63 */
          "012345678901234567890123456789012345678901234567890123456789012");

    const char *all = "[\"DNS:a.example\",\"URI:spiffe://t/x\",\"email:a@b.example\","
                      "\"IP:10.0.0.1\",\"DNS:second.example\"]";
    san_is(all, "URI", "spiffe://t/x");
    san_is(all, "DNS", "a.example");
    san_is(all, "email", "a@b.example");
    san_is(all, "uri", "spiffe://t/x");
    san_is("[\"DNS:\",\"DNS:b.example\"]", "DNS", "b.example"); /* an empty one is skipped */
    san_is("[\"URI:a\\/b\"]", "URI", "a/b");
    san_is("[\"URI:a\\u0000b\"]", "URI", NULL);
    san_is("[\"URIX:a\"]", "URI", NULL);
    san_is("[\"DNS:a.example\"]", "URI", NULL);
    san_is("[]", "DNS", NULL);
    san_is("[", "DNS", NULL);
    san_is("[1, \"DNS:n\"]", "DNS", "n");
    san_is("[\"DNS:0123456789012345678901234567890123456789012345678901234567890123456789\","
           "\"DNS:short\"]", "DNS", "short");
    return MCPG_CHECK_EXIT("test_mtls_names");
}
