/* The names identity_mtls takes from a certificate: the subject's CN from
 * RFC 2253 text (escapes, multi-valued RDNs, quoted and BER values) and a
 * subjectAltName of one type from the transport's JSON array; a second name
 * of the kind (two CNs, two SANs of the type) is ambiguous, a name with a
 * NUL or another control character malformed, and neither gives a name. */
#include <mcpg/check.h>

#include <string.h>

#include "../mtls_names.h"

#define NONE ((const char *)0)
static const char AMBIGUOUS[] = "(ambiguous)", MALFORMED[] = "(malformed)";

static mtls_found want_of(const char *expected) {
    if (expected == AMBIGUOUS) return MTLS_AMBIGUOUS;
    if (expected == MALFORMED) return MTLS_MALFORMED;
    return expected ? MTLS_FOUND : MTLS_NONE;
}

/* expected: the name, NONE, AMBIGUOUS or MALFORMED; dst is "" unless found */
static void cn_is(const char *subject, const char *expected) {
    char out[64] = "untouched";
    mtls_found got = mtls_subject_cn(subject, out, sizeof out), want = want_of(expected);
    if (want == MTLS_FOUND)
        MCPG_CHECK(got == MTLS_FOUND && strcmp(out, expected) == 0,
                   "CN of %s: got %d '%s', expected '%s'", subject ? subject : "(null)", got,
                   out, expected);
    else
        MCPG_CHECK(got == want && out[0] == '\0', "CN of %s: got %d '%s', expected %d",
                   subject ? subject : "(null)", got, out, want);
}

static void san_is(const char *sans, const char *type, const char *expected) {
    char out[64] = "untouched";
    mtls_found got = mtls_san(sans, type, out, sizeof out), want = want_of(expected);
    if (want == MTLS_FOUND)
        MCPG_CHECK(got == MTLS_FOUND && strcmp(out, expected) == 0,
                   "%s of %s: got %d '%s', expected '%s'", type, sans, got, out, expected);
    else
        MCPG_CHECK(got == want && out[0] == '\0', "%s of %s: got %d '%s', expected %d", type,
                   sans ? sans : "(null)", got, out, want);
}

int main(void) {
    cn_is("CN=alice,O=Acme", "alice");
    cn_is("O=Acme,CN=bob", "bob");
    cn_is("cn=lower", "lower");
    cn_is("commonName=long-form", "long-form");
    cn_is("2.5.4.3=by-oid,O=x", "by-oid");
    cn_is("CN=alice\\, jr.,O=x", "alice, jr.");
    cn_is("CN=a\\+b+UID=7,O=x", "a+b");
    cn_is("UID=7+CN=carol,O=x", "carol");
    cn_is("O=x\\,y,CN=z", "z");
    cn_is("O=x\\2Cy,CN=z", "z");
    cn_is("O=x\\2CCN=y,CN=z", "z"); /* an escaped comma does not start a CN */
    cn_is("CN=\\C3\\A9mile", "\xc3\xa9mile"); /* OpenSSL's escaped UTF-8 */
    cn_is("CN=  spaced  ,O=x", "spaced");
    cn_is("CN=trail\\ ,O=x", "trail ");
    cn_is("CN=\\ lead", " lead");
    cn_is("CN=\"quoted, name\",O=x", "quoted, name");
    cn_is("CN=\"x\"CN=y", MALFORMED); /* text after a closing quote */
    cn_is("O=#04024869,CN=after-ber", "after-ber");
    cn_is("O=Acme", NONE);
    cn_is("", NONE);
    cn_is(NULL, NONE);
    /* two CNs, in every place and spelling: which one is "the" CN would be
     * the certificate maker's choice */
    cn_is("CN=alice,CN=admin", AMBIGUOUS);
    cn_is("CN=admin,CN=alice", AMBIGUOUS);
    cn_is("CN=alice,CN=users,DC=example", AMBIGUOUS);
    cn_is("CN=alice+CN=admin,O=x", AMBIGUOUS);
    cn_is("UID=7+CN=alice,O=x,cn=admin", AMBIGUOUS);
    cn_is("CN=alice,2.5.4.3=admin", AMBIGUOUS);
    cn_is("CN=alice,commonName=admin", AMBIGUOUS);
    cn_is("CN=alice,O=Acme,CN=alice", AMBIGUOUS); /* even the same name twice */
    cn_is("CN=alice,CN=#04024869", AMBIGUOUS);
    cn_is("CN=a\\00b,CN=admin", AMBIGUOUS);
    /* one CN that is not one clean string */
    cn_is("CN=a\\00b", MALFORMED); /* an ASN.1 string with a NUL inside */
    cn_is("CN=admin\\00.evil.example,O=x", MALFORMED);
    cn_is("CN=a\\0Ab", MALFORMED);
    cn_is("CN=a\\7Fb", MALFORMED);
    cn_is("CN=#04024869", MALFORMED);
    cn_is("CN=,O=x", MALFORMED);
    cn_is("CN=bad\\q", MALFORMED);
    cn_is("CN=\"open", MALFORMED);
    cn_is("CN", MALFORMED);
    cn_is("=x,CN=y", MALFORMED);
    cn_is("O=bad\\q,CN=y", MALFORMED); /* cannot tell what follows */
    cn_is("CN=0123456789012345678901234567890123456789012345678901234567890123", MALFORMED);
    cn_is("CN=012345678901234567890123456789012345678901234567890123456789012", /* 63 */
          "012345678901234567890123456789012345678901234567890123456789012");

    const char *all = "[\"DNS:a.example\",\"URI:spiffe://t/x\",\"email:a@b.example\","
                      "\"IP:10.0.0.1\"]";
    san_is(all, "URI", "spiffe://t/x");
    san_is(all, "DNS", "a.example");
    san_is(all, "email", "a@b.example");
    san_is(all, "uri", "spiffe://t/x");
    san_is("[\"URI:a\\/b\"]", "URI", "a/b");
    san_is("[\"URIX:a\"]", "URI", NONE);
    san_is("[\"DNS:a.example\"]", "URI", NONE);
    san_is("[]", "DNS", NONE);
    san_is(NULL, "DNS", NONE);
    san_is("[1, \"DNS:n\"]", "DNS", "n");
    /* two of the type, wherever they are: two principals */
    san_is("[\"URI:spiffe://t/alice\",\"URI:spiffe://t/admin\"]", "URI", AMBIGUOUS);
    san_is("[\"URI:spiffe://t/admin\",\"DNS:x\",\"uri:spiffe://t/alice\"]", "URI", AMBIGUOUS);
    san_is("[\"DNS:a.example\",\"DNS:a.example\"]", "DNS", AMBIGUOUS);
    san_is("[\"DNS:\",\"DNS:b.example\"]", "DNS", AMBIGUOUS);
    san_is("[\"DNS:0123456789012345678901234567890123456789012345678901234567890123456789\","
           "\"DNS:short\"]", "DNS", AMBIGUOUS); /* one too long for dst still counts */
    san_is("[\"email:a@b.example\",\"DNS:a\",\"DNS:b\"]", "email", "a@b.example");
    /* one of the type that is not one clean IA5 string */
    san_is("[\"URI:a\\u0000b\"]", "URI", MALFORMED);
    san_is("[\"URI:spiffe://t/alice\\u0000.evil\"]", "URI", MALFORMED);
    san_is("[\"DNS:a b\"]", "DNS", MALFORMED);
    san_is("[\"DNS:a\\ufffdb\"]", "DNS", MALFORMED); /* the transport's stand-in for a bad byte */
    san_is("[\"DNS:\\u00e9.example\"]", "DNS", MALFORMED);
    san_is("[\"DNS:\"]", "DNS", MALFORMED);
    san_is("[\"DNS:0123456789012345678901234567890123456789012345678901234567890123456789\"]",
           "DNS", MALFORMED);
    san_is("[", "DNS", MALFORMED);
    san_is("[\"DNS:a\",", "DNS", MALFORMED);
    return MCPG_CHECK_EXIT("test_mtls_names");
}
