/* Bot API answers as a server (or anything in between) may send them: no
 * crash, a parsed answer's fields in range, every update of a result read
 * without trusting its shape; and text split for sendMessage: parts never
 * empty, each within the limit once escaped, in order (each part found in the
 * input after the previous one). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "app/notify/telegram.h"

/* The escaped size of s in UTF-16 units: & is 5, < and > 4, a valid 4-byte
 * sequence 2, any other valid sequence 1, a byte of no valid sequence 1. */
static size_t units(const char *str)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t u = 0, n = strlen(str);
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        size_t want = c >= 0xF0 && c < 0xF8   ? 4
                      : c >= 0xE0 && c < 0xF0 ? 3
                      : c >= 0xC0 && c < 0xE0 ? 2
                                              : 1;
        int valid = want > 1 && i + want <= n;
        for (size_t k = 1; valid && k < want; k++)
            valid = (s[i + k] & 0xC0) == 0x80;
        if (!valid)
            want = 1;
        u += c == '&' ? 5 : (c == '<' || c == '>') ? 4 : want == 4 ? 2 : 1;
        i += want;
    }
    return u;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    notify_telegram_answer a;
    if (notify_telegram_parse_answer((const char *)data, size, 200, &a) == TK_OK) {
        if (a.retry_after < 0 || a.retry_after > 86400 || a.error_code < 0)
            __builtin_trap();
        if (a.ok && json_is_array(a.result))
            for (size_t i = 0; i < json_array_size(a.result); i++) {
                notify_telegram_update u;
                if (notify_telegram_update_at(a.result, i, &u) == TK_OK && u.update_id < 0)
                    __builtin_trap();
            }
    }
    notify_telegram_answer_free(&a);

    char *text = malloc(size + 1);
    memcpy(text, data, size);
    text[size] = 0;
    size_t max = 8 + (size ? data[0] % 64 : 0);
    char **parts;
    size_t n = notify_telegram_split(text, max, &parts);
    const char *at = text;
    for (size_t i = 0; i < n; i++) {
        if (!parts[i][0] || units(parts[i]) > max)
            __builtin_trap();
        const char *f = strstr(at, parts[i]);
        if (!f)
            __builtin_trap();
        at = f + strlen(parts[i]);
    }
    notify_telegram_parts_free(parts, n);
    free(text);
    return 0;
}
