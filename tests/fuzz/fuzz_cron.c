/* Cron expressions as a user or a model sends them: no crash, a refusal
 * always says which field, and an accepted expression's fire times in a zone
 * with a DST switch strictly increase. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/cron.h"
#include "lib/tz.h"

static tk_tz *zone;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char s[TK_CRON_EXPR_MAX + 8];
    if (size >= sizeof s)
        size = sizeof s - 1;
    memcpy(s, data, size);
    s[size] = 0;
    if (!zone) {
        char err[128];
        if (tk_tz_load("Australia/Lord_Howe", &zone, err, sizeof err) != TK_OK)
            abort();
    }
    tk_cron c;
    char err[160];
    if (tk_cron_parse(s, &c, err, sizeof err) != TK_OK) {
        if (!strchr(err, ':'))
            __builtin_trap(); /* "field: why" */
        return 0;
    }
    int64_t t = 1790000000, n;
    for (int i = 0; i < 3 && tk_cron_next(&c, zone, t, &n); i++) {
        if (n <= t || (!c.once && n % 60 != 0))
            __builtin_trap();
        t = n;
    }
    return 0;
}
