/* jwt_mint: keys and tokens for the identity_jwt integration test.
 *
 *   jwt_mint keygen ALG KEY.pem [KID]     a new private key in KEY.pem; its
 *                                         public JWK on stdout
 *   jwt_mint token ALG KEY.pem HEADER CLAIMS
 *                                         header.payload.signature of the two
 *                                         JSON texts, signed with KEY.pem
 *
 * ALG is RS256, ES256 or EdDSA. Exit 0, or 1 with a message on stderr. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/pem.h>

#include "jwt_testkeys.h"

static int usage(void) {
    fprintf(stderr, "usage: jwt_mint keygen ALG KEY.pem [KID]\n"
                    "       jwt_mint token ALG KEY.pem HEADER_JSON CLAIMS_JSON\n");
    return 1;
}

static int keygen(const char *alg, const char *path, const char *kid) {
    EVP_PKEY *key = tk_keygen(alg);
    FILE *f = key ? fopen(path, "w") : NULL;
    int ok = f && PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL) == 1;
    if (f) fclose(f);
    char *jwk = ok ? tk_jwk(key, alg, kid) : NULL;
    if (jwk) printf("%s\n", jwk);
    else fprintf(stderr, "jwt_mint: cannot make a %s key in %s\n", alg, path);
    free(jwk);
    EVP_PKEY_free(key);
    return jwk ? 0 : 1;
}

static int token(const char *alg, const char *path, const char *header, const char *claims) {
    FILE *f = fopen(path, "r");
    EVP_PKEY *key = f ? PEM_read_PrivateKey(f, NULL, NULL, NULL) : NULL;
    if (f) fclose(f);
    char *tok = key ? tk_token(key, alg, header, claims) : NULL;
    if (tok) printf("%s\n", tok);
    else fprintf(stderr, "jwt_mint: cannot sign with %s as %s\n", path, alg);
    free(tok);
    EVP_PKEY_free(key);
    return tok ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc >= 4 && argc <= 5 && strcmp(argv[1], "keygen") == 0)
        return keygen(argv[2], argv[3], argc == 5 ? argv[4] : NULL);
    if (argc == 6 && strcmp(argv[1], "token") == 0)
        return token(argv[2], argv[3], argv[4], argv[5]);
    return usage();
}
