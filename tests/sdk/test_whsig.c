/* Standard Webhooks signatures (sdk/src/whsig.c, mcpg/whsig.h).
 *
 *   test_whsig                       the fixed vectors and refusals below
 *   test_whsig sign WHSEC ID TS      prints the signature of stdin's bytes
 *   test_whsig verify WHSEC ID TS SIG NOW TOL
 *                                    prints "ok" or the refusal, for stdin
 * The two modes are driven by whsig_vectors.py, which checks random inputs
 * against Python's hmac module (an implementation independent of ours).
 *
 * The fixed expected signatures were computed with Python 3's hmac module:
 *   base64.b64encode(hmac.new(key, id + b"." + ts + b"." + body,
 *                             hashlib.sha256).digest())
 * The first is also the specification's own example (the Standard Webhooks
 * reference libraries' tests use it). */
#include <mcpg/whsig.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fails;

#define CHECK(cond)                                                           \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
            fails++;                                                          \
        }                                                                     \
    } while (0)

static size_t key_of(const char *whsec, unsigned char key[MCPG_WHSIG_KEY_MAX]) {
    size_t n = 0;
    int rc = mcpg_whsig_secret_decode(whsec, strlen(whsec), key, MCPG_WHSIG_KEY_MAX, &n);
    if (rc) {
        fprintf(stderr, "cannot decode %s: %d\n", whsec, rc);
        exit(2);
    }
    return n;
}

static const char *verify_s(const unsigned char *k, size_t kn, const char *id, const char *ts,
                            const char *sig, const char *body, int64_t now, int64_t tol) {
    return mcpg_whsig_verify(k, kn, id, id ? strlen(id) : 0, ts, ts ? strlen(ts) : 0, sig,
                             sig ? strlen(sig) : 0, body, strlen(body), now, tol);
}

static int same(const char *got, const char *want) {
    if (got == want) return 1;
    if (got && want && !strcmp(got, want)) return 1;
    fprintf(stderr, "  got  %s\n  want %s\n", got ? got : "(NULL)", want ? want : "(NULL)");
    return 0;
}

static void test_decode(void) {
    unsigned char key[MCPG_WHSIG_KEY_MAX];
    size_t n = 99;
    const char *spec = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    CHECK(mcpg_whsig_secret_decode(spec, strlen(spec), key, sizeof key, &n) == 0 && n == 24);
    /* Not NUL-terminated: only n bytes are read. */
    char buf[64];
    memcpy(buf, spec, strlen(spec));
    memset(buf + strlen(spec), 'A', sizeof buf - strlen(spec));
    CHECK(mcpg_whsig_secret_decode(buf, strlen(spec), key, sizeof key, &n) == 0 && n == 24);
    /* 16 bytes, padded and not: the same key. */
    unsigned char a[MCPG_WHSIG_KEY_MAX], b[MCPG_WHSIG_KEY_MAX];
    CHECK(key_of("whsec_ZGVmZ2hpamtsbW5vcHFycw==", a) == 16);
    CHECK(key_of("whsec_ZGVmZ2hpamtsbW5vcHFycw", b) == 16);
    CHECK(!memcmp(a, b, 16) && !memcmp(a, "defghijklmnopqrs", 16));
    /* 64 bytes, the most. */
    CHECK(key_of("whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4vMDEyMzQ1"
                 "Njc4OTo7PD0+Pw==", a) == 64);
    CHECK(a[0] == 0 && a[63] == 63);

    struct { const char *s; int rc; } bad[] = {
        {"", MCPG_EINVAL},
        {"whsec_", MCPG_EINVAL},
        {"whsec", MCPG_EINVAL},
        {"WHSEC_ZGVmZ2hpamtsbW5vcHFycw==", MCPG_EINVAL},
        {"ZGVmZ2hpamtsbW5vcHFycw==", MCPG_EINVAL},
        {"whsec_ZGVmZ2hpamtsbW5vcHFyc!==", MCPG_EINVAL},
        {"whsec_Z", MCPG_EINVAL},                          /* one char is no byte */
        {"whsec_ZGVmZ2hpamtsbW5vcHFy", MCPG_ERANGE},       /* 15 bytes */
        {"whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4vMDEyMzQ1"
         "Njc4OTo7PD0+P0A=", MCPG_ERANGE},                 /* 65 bytes */
        {"whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
         "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", MCPG_ERANGE}, /* far too long */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        n = 99;
        int rc = mcpg_whsig_secret_decode(bad[i].s, strlen(bad[i].s), key, sizeof key, &n);
        if (rc != bad[i].rc) fprintf(stderr, "  %s: %d, want %d\n", bad[i].s, rc, bad[i].rc);
        CHECK(rc == bad[i].rc);
        CHECK(n == 99); /* *key_len untouched on error */
    }
    /* A key larger than the caller's room. */
    CHECK(mcpg_whsig_secret_decode(spec, strlen(spec), key, 23, &n) == MCPG_ERANGE);
    CHECK(mcpg_whsig_secret_decode(NULL, 0, key, sizeof key, &n) == MCPG_EINVAL);
}

static void test_sign(void) {
    unsigned char key[MCPG_WHSIG_KEY_MAX];
    char out[MCPG_WHSIG_SIG_MAX];
    size_t kn = key_of("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", key);
    const char *id = "msg_p5jXN8AQM9LWM0D4loKWxJek", *ts = "1614265330", *body = "{\"test\": 2432232314}";
    CHECK(mcpg_whsig_sign(key, kn, id, strlen(id), ts, strlen(ts), body, strlen(body), out) == 0);
    CHECK(same(out, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="));
    CHECK(strlen(out) == MCPG_WHSIG_SIG_MAX - 1);

    /* 64-byte key, a 64 KiB body (the transport's largest). */
    kn = key_of("whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4vMDEyMzQ1"
                "Njc4OTo7PD0+Pw==", key);
    static char big[65536];
    for (size_t i = 0; i < sizeof big; i++) big[i] = (char)((i * 7 + 3) & 0xff);
    CHECK(mcpg_whsig_sign(key, kn, "msg_big", 7, "1700000000", 10, big, sizeof big, out) == 0);
    CHECK(same(out, "v1,n60IVYJLbYkaG2838SIOjZzbswsGlC0JE5I2z0PHBfI="));

    /* 16-byte key, an empty body (NULL allowed when its length is 0). */
    kn = key_of("whsec_ZGVmZ2hpamtsbW5vcHFycw", key);
    CHECK(mcpg_whsig_sign(key, kn, "a", 1, "0", 1, NULL, 0, out) == 0);
    CHECK(same(out, "v1,yWuDbvrIop7Xyrlt26NRQu8nWrwTPHEwLifSoIevp80="));
    CHECK(mcpg_whsig_sign(key, kn, "a", 1, "0", 1, "", 0, out) == 0);
    CHECK(same(out, "v1,yWuDbvrIop7Xyrlt26NRQu8nWrwTPHEwLifSoIevp80="));

    CHECK(mcpg_whsig_sign(NULL, 16, "a", 1, "0", 1, "", 0, out) == MCPG_EINVAL && !out[0]);
    CHECK(mcpg_whsig_sign(key, kn, NULL, 0, "0", 1, "", 0, out) == MCPG_EINVAL);
    CHECK(mcpg_whsig_sign(key, kn, "a", 1, "0", 1, NULL, 3, out) == MCPG_EINVAL);
}

static void test_verify(void) {
    unsigned char key[MCPG_WHSIG_KEY_MAX], other[MCPG_WHSIG_KEY_MAX];
    size_t kn = key_of("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", key);
    size_t on = key_of("whsec_ZGVmZ2hpamtsbW5vcHFycw==", other);
    const char *id = "msg_p5jXN8AQM9LWM0D4loKWxJek", *ts = "1614265330", *body = "{\"test\": 2432232314}";
    const char *good = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";
    int64_t now = 1614265330, tol = MCPG_WHSIG_TOLERANCE_S;
    const char *nomatch = "webhook-signature: no v1 signature matches";
    const char *far = "webhook-timestamp: more than 300 s from the gateway's clock";

    CHECK(same(verify_s(key, kn, id, ts, good, body, now, tol), NULL));
    /* Rotation: the right one among others, in any place. */
    CHECK(same(verify_s(key, kn, id, ts, "v1,AAAA v2,x " "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
                        body, now, tol), NULL));
    CHECK(same(verify_s(key, kn, id, ts, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE= v1,AAAA",
                        body, now, tol), NULL));
    /* The clock: exactly the tolerance either way passes, one more does not. */
    CHECK(same(verify_s(key, kn, id, ts, good, body, now + 300, tol), NULL));
    CHECK(same(verify_s(key, kn, id, ts, good, body, now - 300, tol), NULL));
    CHECK(same(verify_s(key, kn, id, ts, good, body, now + 301, tol), far));
    CHECK(same(verify_s(key, kn, id, ts, good, body, now - 301, tol), far));
    CHECK(same(verify_s(key, kn, id, ts, good, body, now + 11, 10),
               "webhook-timestamp: too far from the gateway's clock"));
    /* Each header at fault, in order. */
    CHECK(same(verify_s(key, kn, NULL, ts, good, body, now, tol), "webhook-id: missing"));
    CHECK(same(verify_s(key, kn, "", ts, good, body, now, tol), "webhook-id: missing"));
    CHECK(same(verify_s(key, kn, NULL, NULL, NULL, body, now, tol), "webhook-id: missing"));
    const char *badts = "webhook-timestamp: missing or not an integer";
    CHECK(same(verify_s(key, kn, id, NULL, good, body, now, tol), badts));
    CHECK(same(verify_s(key, kn, id, "", good, body, now, tol), badts));
    CHECK(same(verify_s(key, kn, id, "12x", good, body, now, tol), badts));
    CHECK(same(verify_s(key, kn, id, "-1614265330", good, body, now, tol), badts));
    CHECK(same(verify_s(key, kn, id, " 1614265330", good, body, now, tol), badts));
    CHECK(same(verify_s(key, kn, id, "1234567890123456789", good, body, now, tol), badts));
    CHECK(same(verify_s(key, kn, id, ts, NULL, body, now, tol), "webhook-signature: missing"));
    CHECK(same(verify_s(key, kn, id, ts, "", body, now, tol), "webhook-signature: missing"));
    /* Not a match: another key, another body, id or timestamp, another
     * version, a truncated or extended value. */
    CHECK(same(verify_s(other, on, id, ts, good, body, now, tol), nomatch));
    CHECK(same(verify_s(key, kn, id, ts, good, "{\"test\": 2432232315}", now, tol), nomatch));
    CHECK(same(verify_s(key, kn, "msg_other", ts, good, body, now, tol), nomatch));
    CHECK(same(verify_s(key, kn, id, "1614265331", good, body, now, tol), nomatch));
    CHECK(same(verify_s(key, kn, id, ts, "v2,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", body, now, tol), nomatch));
    CHECK(same(verify_s(key, kn, id, ts, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE", body, now, tol), nomatch));
    CHECK(same(verify_s(key, kn, id, ts, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE==", body, now, tol), nomatch));
    CHECK(same(verify_s(key, kn, id, ts, "g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", body, now, tol), nomatch));
    /* Lengths are honoured: a longer buffer past idn/tsn/sign/bn is not read. */
    char sigbuf[128];
    snprintf(sigbuf, sizeof sigbuf, "%sXYZ", good);
    CHECK(same(mcpg_whsig_verify(key, kn, "msg_p5jXN8AQM9LWM0D4loKWxJekQQ", strlen(id), "1614265330999", 10,
                                 sigbuf, strlen(good), "{\"test\": 2432232314}!!", strlen(body), now, tol),
               NULL));
}

/* ---- the modes whsig_vectors.py drives ------------------------------------- */

static char *read_stdin(size_t *n) {
    size_t cap = 1 << 16, len = 0;
    char *b = malloc(cap);
    size_t got;
    while (b && (got = fread(b + len, 1, cap - len, stdin)) > 0) {
        len += got;
        if (len == cap) b = realloc(b, cap *= 2);
    }
    if (!b) exit(2);
    *n = len;
    return b;
}

static int cli(int argc, char **argv) {
    unsigned char key[MCPG_WHSIG_KEY_MAX];
    size_t kn = 0, bn;
    int rc = mcpg_whsig_secret_decode(argv[2], strlen(argv[2]), key, sizeof key, &kn);
    if (rc) {
        printf("decode %d\n", rc);
        return 0;
    }
    char *body = read_stdin(&bn);
    const char *id = argv[3], *ts = argv[4];
    if (!strcmp(argv[1], "sign")) {
        char out[MCPG_WHSIG_SIG_MAX];
        rc = mcpg_whsig_sign(key, kn, id, strlen(id), ts, strlen(ts), body, bn, out);
        if (rc) printf("sign %d\n", rc);
        else printf("%s\n", out);
    } else {
        if (argc != 8) return 2;
        const char *why = mcpg_whsig_verify(key, kn, id, strlen(id), ts, strlen(ts), argv[5],
                                            strlen(argv[5]), body, bn, strtoll(argv[6], NULL, 10),
                                            strtoll(argv[7], NULL, 10));
        printf("%s\n", why ? why : "ok");
    }
    free(body);
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 5 && (!strcmp(argv[1], "sign") || !strcmp(argv[1], "verify"))) return cli(argc, argv);
    if (argc != 1) {
        fprintf(stderr, "usage: test_whsig [sign WHSEC ID TS | verify WHSEC ID TS SIG NOW TOL] < body\n");
        return 2;
    }
    test_decode();
    test_sign();
    test_verify();
    if (fails) fprintf(stderr, "%d check(s) failed\n", fails);
    else printf("whsig: all checks passed\n");
    return fails ? 1 : 0;
}
