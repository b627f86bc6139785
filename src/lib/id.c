#include "lib/id.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include "lib/common.h"
#include "lib/tktime.h"

void tk_random_bytes(void *buf, size_t n)
{
    unsigned char *p = buf;
    while (n > 0) {
        ssize_t r = getrandom(p, n, 0);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            tk_panic(__FILE__, __LINE__, "getrandom failed");
        }
        p += r;
        n -= (size_t)r;
    }
}

static void format_uuid(const unsigned char b[16], char out[TK_UUID_LEN])
{
    static const char hex[] = "0123456789abcdef";
    int j = 0;
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            out[j++] = '-';
        out[j++] = hex[b[i] >> 4];
        out[j++] = hex[b[i] & 15];
    }
    out[j] = '\0';
}

void tk_uuid4(char out[TK_UUID_LEN])
{
    unsigned char b[16];
    tk_random_bytes(b, sizeof b);
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
    format_uuid(b, out);
}

void tk_uuid7(char out[TK_UUID_LEN])
{
    unsigned char b[16];
    tk_random_bytes(b, sizeof b);
    uint64_t ms = (uint64_t)tk_now_ms();
    for (int i = 0; i < 6; i++)
        b[i] = (unsigned char)(ms >> (40 - 8 * i));
    b[6] = (unsigned char)((b[6] & 0x0f) | 0x70);
    b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);
    format_uuid(b, out);
}

int tk_uuid_valid(const char *s)
{
    if (!s || strlen(s) != 36)
        return 0;
    for (int i = 0; i < 36; i++) {
        char c = s[i];
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (c != '-')
                return 0;
        } else if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) {
            return 0;
        }
    }
    return 1;
}

void tk_token_hex(char *out, size_t nbytes)
{
    static const char hex[] = "0123456789abcdef";
    unsigned char b[64];
    size_t j = 0;
    while (nbytes > 0) {
        size_t n = nbytes < sizeof b ? nbytes : sizeof b;
        tk_random_bytes(b, n);
        for (size_t i = 0; i < n; i++) {
            out[j++] = hex[b[i] >> 4];
            out[j++] = hex[b[i] & 15];
        }
        nbytes -= n;
    }
    out[j] = '\0';
}
