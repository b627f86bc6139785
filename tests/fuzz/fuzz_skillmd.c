/* SKILL.md front matter. Input: a SKILL.md. An accepted one satisfies every
 * rule of the format; a refused one leaves nothing behind. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "lib/skillmd.h"
#include "lib/utf8.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *s = (const char *)data;
    tk_skill_md md;
    char err[256];
    if (tk_skillmd_parse(s, size, NULL, &md, err, sizeof err) == TK_OK) {
        if (!md.name || !tk_skillmd_name_valid(md.name, strlen(md.name)) || !md.description ||
            md.body_off > size)
            __builtin_trap();
        long d = tk_utf8_count(md.description, strlen(md.description));
        if (d < 1 || d > TK_SKILL_DESCRIPTION_MAX)
            __builtin_trap();
        if (md.compatibility) {
            long c = tk_utf8_count(md.compatibility, strlen(md.compatibility));
            if (c < 1 || c > TK_SKILL_COMPAT_MAX)
                __builtin_trap();
        }
        if (md.n_warnings != md.n_extra || md.n_metadata > TK_SKILL_ENTRIES_MAX)
            __builtin_trap();
        /* the folder's name is checked */
        tk_skill_md again;
        if (tk_skillmd_parse(s, size, md.name, &again, err, sizeof err) != TK_OK)
            __builtin_trap();
        tk_skillmd_free(&again);
        char other[TK_SKILL_NAME_MAX + 2];
        snprintf(other, sizeof other, "%sx", md.name);
        if (tk_skillmd_parse(s, size, other, &again, err, sizeof err) != TK_EINVAL ||
            again.name != NULL)
            __builtin_trap();
        tk_skillmd_free(&md);
    } else if (md.name || md.description || md.warnings || md.extra || md.metadata ||
               err[0] == '\0') {
        __builtin_trap();
    }
    return 0;
}
