#include "lib/arena.h"

#include <stdalign.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/common.h"

#define ARENA_CHUNK 4096

struct chunk {
    struct chunk *next;
    size_t used, size;
    alignas(max_align_t) unsigned char data[];
};

struct cleanup {
    struct cleanup *next;
    tk_cleanup_fn fn;
    void *data;
};

struct tk_arena {
    struct chunk *chunks;
    struct cleanup *cleanups;
    size_t used, max;
};

tk_arena *tk_arena_new(size_t max_bytes)
{
    tk_arena *a = tk_calloc(1, sizeof *a);
    a->max = max_bytes;
    return a;
}

void tk_arena_free(tk_arena *a)
{
    if (!a)
        return;
    for (struct cleanup *c = a->cleanups; c;) {
        struct cleanup *next = c->next;
        c->fn(c->data);
        free(c);
        c = next;
    }
    for (struct chunk *c = a->chunks; c;) {
        struct chunk *next = c->next;
        free(c);
        c = next;
    }
    free(a);
}

static size_t align_up(size_t n)
{
    size_t al = alignof(max_align_t);
    return (n + al - 1) & ~(al - 1);
}

void *tk_arena_alloc(tk_arena *a, size_t n)
{
    if (n > SIZE_MAX / 2)
        return NULL;
    n = align_up(n ? n : 1);
    if (a->max && (n > a->max || a->used > a->max - n))
        return NULL;
    struct chunk *c = a->chunks;
    if (!c || c->size - c->used < n) {
        size_t size = n > ARENA_CHUNK / 2 ? n : ARENA_CHUNK;
        struct chunk *nc = tk_malloc(sizeof *nc + size);
        nc->used = 0;
        nc->size = size;
        if (c && n > ARENA_CHUNK / 2) {
            /* A large block gets its own chunk behind the current one, so the
             * current chunk's free space stays usable. */
            nc->next = c->next;
            c->next = nc;
        } else {
            nc->next = c;
            a->chunks = nc;
        }
        c = nc;
    }
    void *p = c->data + c->used;
    c->used += n;
    a->used += n;
    memset(p, 0, n);
    return p;
}

void *tk_arena_xalloc(tk_arena *a, size_t n)
{
    void *p = tk_arena_alloc(a, n);
    if (!p)
        tk_oom();
    return p;
}

char *tk_arena_strndup(tk_arena *a, const char *s, size_t n)
{
    char *p = tk_arena_alloc(a, n + 1);
    if (!p)
        return NULL;
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

char *tk_arena_strdup(tk_arena *a, const char *s)
{
    return s ? tk_arena_strndup(a, s, strlen(s)) : NULL;
}

char *tk_arena_printf(tk_arena *a, const char *fmt, ...)
{
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *p = NULL;
    if (n >= 0 && (p = tk_arena_alloc(a, (size_t)n + 1)) != NULL)
        vsnprintf(p, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    return p;
}

void tk_arena_cleanup_add(tk_arena *a, tk_cleanup_fn fn, void *data)
{
    struct cleanup *c = tk_malloc(sizeof *c);
    c->fn = fn;
    c->data = data;
    c->next = a->cleanups;
    a->cleanups = c;
}

size_t tk_arena_used(const tk_arena *a)
{
    return a->used;
}
