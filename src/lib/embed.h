/*
 * embed.h — files compiled into a binary by scripts/embed.sh (migrations, web
 * assets, built-in skills). Each table ends with an entry whose name is NULL.
 * The data is NUL-terminated past `size` so text files can be used as C strings.
 */
#ifndef TK_EMBED_H
#define TK_EMBED_H

#include <stddef.h>

struct tk_embed_file {
    const char *name;
    const unsigned char *data;
    size_t size;
};

/* Finds `name` in `table`; NULL when absent. */
const struct tk_embed_file *tk_embed_find(const struct tk_embed_file *table, const char *name);

#endif
