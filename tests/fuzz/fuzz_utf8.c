/* lib/utf8 against two independent oracles: the well-formed byte sequences of
 * the Unicode Standard (Table 3-7, written as byte ranges) for every decode,
 * and jansson's own UTF-8 check for whole strings. Then the cuts: never longer
 * than asked, never inside a sequence, and agreeing with the counts. */
#include <jansson.h>
#include <stdint.h>
#include <string.h>

#include "../unit/lib/utf8_oracle.h"
#include "lib/utf8.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *s = (const char *)data;
    /* every position: decode agrees with the table; a decoded character
     * encodes back to the same bytes */
    int valid = 1;
    long count = 0;
    for (size_t i = 0; i < size; i++) {
        uint32_t cp;
        size_t k = tk_utf8_decode(s + i, size - i, &cp);
        if (k != utf8_oracle(data + i, size - i))
            __builtin_trap();
        if (k) {
            char e[4];
            if (tk_utf8_encode(cp, e) != k || memcmp(e, s + i, k) != 0)
                __builtin_trap();
        }
    }
    for (size_t i = 0; i < size;) {
        size_t k = utf8_oracle(data + i, size - i);
        if (!k) {
            valid = 0;
            break;
        }
        i += k;
        count++;
    }
    if (tk_utf8_valid(s, size) != valid || tk_utf8_count(s, size) != (valid ? count : -1))
        __builtin_trap();
    json_t *j = json_stringn(s, size);
    if ((j != NULL) != valid)
        __builtin_trap();
    json_decref(j);

    /* whole: what it keeps ends at no cut-short sequence; valid text stays
     * valid once the held-back bytes are dropped */
    size_t w = tk_utf8_whole(s, size);
    if (w > size || size - w > 3)
        __builtin_trap();
    if (valid && w != size)
        __builtin_trap();

    size_t chars = tk_utf8_chars(s, size), total = 0;
    size_t max = size ? data[0] % (size + 2) : 0;
    size_t c = tk_utf8_cut(s, size, max);
    if (c > size || (c > max && c != size) || (c < size && c > 0 && (data[c] & 0xC0) == 0x80))
        __builtin_trap();
    if (valid && !tk_utf8_valid(s, c))
        __builtin_trap();
    size_t cc = tk_utf8_cut_chars(s, size, max, &total);
    if (total != chars || cc > size || tk_utf8_chars(s, cc) != (max < chars ? max : chars))
        __builtin_trap();
    if (cc != tk_utf8_cut_chars(s, size, max, NULL))
        __builtin_trap();
    if (valid && !tk_utf8_valid(s, cc))
        __builtin_trap();
    return 0;
}
