/* The liberal date parser on what a model might send: no crash, and whatever
 * it accepts formats and parses back to the same instant. */
#include <stdint.h>
#include <string.h>

#include "app/utopia/dates.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char s[128];
    if (size >= sizeof s)
        size = sizeof s - 1;
    memcpy(s, data, size);
    s[size] = 0;
    int64_t ms, ms2;
    const char *prec, *prec2;
    char err[160], out[48];
    if (utopia_date_parse(s, 1796101200000LL, &ms, &prec, err, sizeof err) != TK_OK) {
        if (!err[0])
            __builtin_trap(); /* a refusal always says why */
        return 0;
    }
    utopia_date_format(ms, prec, out, sizeof out);
    if (utopia_date_parse(out, 1796101200000LL, &ms2, &prec2, err, sizeof err) != TK_OK ||
        ms2 != ms)
        __builtin_trap();
    return 0;
}
