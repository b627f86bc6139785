#include "lib/embed.h"

#include <string.h>

const struct tk_embed_file *tk_embed_find(const struct tk_embed_file *table, const char *name)
{
    for (const struct tk_embed_file *f = table; f && f->name; f++)
        if (strcmp(f->name, name) == 0)
            return f;
    return NULL;
}
