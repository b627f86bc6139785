/*
 * arena.h — a memory pool for one request or one turn, freed in one call.
 *
 * Allocations come from chunks and are never freed one by one. Cleanup hooks
 * (for fds, curl handles, PGresults...) run in reverse order of registration
 * when the arena is freed, as nginx's ngx_pool_cleanup_add.
 * An arena may carry a cap on the bytes it hands out: past it, tk_arena_alloc
 * returns NULL (tk_arena_xalloc aborts instead, for internal sizes).
 */
#ifndef TK_ARENA_H
#define TK_ARENA_H

#include <stdarg.h>
#include <stddef.h>

typedef struct tk_arena tk_arena;
typedef void (*tk_cleanup_fn)(void *data);

/* max_bytes 0 means no cap. */
tk_arena *tk_arena_new(size_t max_bytes);
/* Runs the cleanup hooks, then frees every allocation and the arena itself. */
void tk_arena_free(tk_arena *a);

/* Zeroed memory aligned for any type; NULL past the arena's cap. */
void *tk_arena_alloc(tk_arena *a, size_t n);
/* Same, but aborts past the cap (for sizes the program controls). */
void *tk_arena_xalloc(tk_arena *a, size_t n);
char *tk_arena_strdup(tk_arena *a, const char *s);
char *tk_arena_strndup(tk_arena *a, const char *s, size_t n);
char *tk_arena_printf(tk_arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Registers fn(data) to run when the arena is freed. */
void tk_arena_cleanup_add(tk_arena *a, tk_cleanup_fn fn, void *data);

/* Bytes handed out so far. */
size_t tk_arena_used(const tk_arena *a);

#endif
