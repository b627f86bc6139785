#include "app/auth/secret.h"

#include <sodium.h>
#include <string.h>

#include "lib/common.h"
#include "lib/id.h"

void app_secret_new(char out[APP_SECRET_HEX + 1])
{
    tk_token_hex(out, APP_SECRET_BYTES);
}

void app_sha256(const void *data, size_t len, unsigned char out[32])
{
    crypto_hash_sha256(out, data, len);
}

void app_sha256_hex(const void *data, size_t len, char out[APP_HASH_HEX + 1])
{
    unsigned char h[32];
    app_sha256(data, len, h);
    sodium_bin2hex(out, APP_HASH_HEX + 1, h, sizeof h);
}

int app_is_hex(const char *s, size_t n)
{
    if (!s)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
            return 0;
    }
    return s[n] == '\0';
}

int app_token_wellformed(const char *s)
{
    return s && strncmp(s, APP_TOKEN_PREFIX, 4) == 0 && app_is_hex(s + 4, APP_SECRET_HEX);
}

void app_b64url(const unsigned char *in, size_t len, char *out, size_t outlen)
{
    TK_ASSERT(outlen >= sodium_base64_ENCODED_LEN(len, sodium_base64_VARIANT_URLSAFE_NO_PADDING));
    sodium_bin2base64(out, outlen, in, len, sodium_base64_VARIANT_URLSAFE_NO_PADDING);
}
