/* TZif bytes: every count and offset checked, no crash, offsets stay in range. */
#include <stdint.h>

#include "lib/tz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tk_tz *tz;
    if (tk_tz_parse(data, size, &tz) != TK_OK)
        return 0;
    for (int64_t u = -4000000000LL; u < 8000000000LL; u += 123456789) {
        int32_t off = tk_tz_offset(tz, u);
        if (off < -26 * 3600 || off > 26 * 3600)
            __builtin_trap();
        int64_t first;
        (void)tk_tz_local_to_utc(tz, u, &first);
    }
    tk_tz_free(tz);
    return 0;
}
