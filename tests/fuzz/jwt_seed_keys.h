/* The public keys (a JWKS) the seed tokens in corpus/fuzz_jwt were signed
 * with, made once by identity_jwt's jwt_mint (keygen RS256, ES256, EdDSA);
 * their private halves were not kept. fuzz_jwt verifies tokens against it
 * until an input brings a JWKS of its own. */
#ifndef MCPG_FUZZ_JWT_SEED_KEYS_H
#define MCPG_FUZZ_JWT_SEED_KEYS_H

static const char k_seed_jwks[] =
    "{\"keys\":[{\"kty\":\"RSA\",\"n\":\"pcxt2EYLqEi_fd1ZXC9ltbe1f0P77g9YXT6OcLGjZ74XOahachly22SHF-nUs4E"
    "RbI4mUC90qZKIjMCGtWgrCZgdljw_an5zYqCUkheLfMSxvWez9CwZw9IxOOMm2_huK1BDF0nlUxEbKUiXRIqQKapxy"
    "fbGMAbGPhXFQPO4CyRY-8XBLtA50kRL1cFXPgaxiO1FUMJPHI6IqfJ7B_Zisk_cKXAeDWbr1ISFnMjy7CmDSKfvQdg"
    "6c41-ukyR65KboWFkShCDvdbabFB9vy7S0689Ji4ozH0ulmRq9r6iOk2IYGKTtNBntPn3G_UARwsypYqisg5ofFy5o"
    "Mc_SGl4UQ\",\"e\":\"AQAB\",\"use\":\"sig\",\"alg\":\"RS256\",\"kid\":\"rs-1\"},{\"kty\":\"EC\",\"crv\":\"P-256\",\"x"
    "\":\"1R9BlOWwOUGLOMr-Y2g-gbb9lIoYDRJ2wsvFqodJN6w\",\"y\":\"hLP-rD3IeSN2ZLX3bqXNoms79aB6CD51QdEIg"
    "jrUGiM\",\"use\":\"sig\",\"alg\":\"ES256\",\"kid\":\"es-1\"},{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"x\":\"rro8NFCv"
    "VQO3a-fRhAkviCJaqcl8CvHAfmqXs9EO0Sc\",\"use\":\"sig\",\"alg\":\"EdDSA\",\"kid\":\"ed-1\"}]}";

#endif
