/*
 * common.h — status codes and small macros shared by every module.
 *
 * Functions that can fail on bad input, the network or the database return a
 * tk_status (TK_OK is 0). Out-of-memory and broken invariants abort: see tk_oom()
 * and TK_ASSERT().
 */
#ifndef TK_COMMON_H
#define TK_COMMON_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
    TK_OK = 0,
    TK_ERROR = -1,    /* generic failure; the caller has or logs details */
    TK_AGAIN = -2,    /* not now: would block, try again later */
    TK_ETOOBIG = -3,  /* a hard size cap would be exceeded */
    TK_EINVAL = -4,   /* malformed input */
    TK_ENOENT = -5,   /* no such thing */
    TK_ECLOSED = -6,  /* the peer or stream has gone */
    TK_ETIMEOUT = -7, /* a deadline passed */
    TK_EDENIED = -8,  /* refused by a policy */
} tk_status;

const char *tk_status_str(tk_status s);

/* Prints a message and aborts: memory is exhausted. */
_Noreturn void tk_oom(void);
_Noreturn void tk_panic(const char *file, int line, const char *expr);

#define TK_ASSERT(e)    ((e) ? (void)0 : tk_panic(__FILE__, __LINE__, #e))
#define TK_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define TK_MIN(a, b)    ((a) < (b) ? (a) : (b))
#define TK_MAX(a, b)    ((a) > (b) ? (a) : (b))

/* Allocation wrappers that never return NULL. */
void *tk_malloc(size_t n);
void *tk_calloc(size_t n, size_t size);
void *tk_realloc(void *p, size_t n);
char *tk_strdup(const char *s);
char *tk_strndup(const char *s, size_t n);
/* printf into a new heap string. */
char *tk_asprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Constant-time comparison of two strings (length leaks, content does not).
 * Returns 1 when equal. NULL never equals anything. */
int tk_str_eq_ct(const char *a, const char *b);

/* A short printable quote of untrusted text for a message: at most 80 bytes of
 * s[0..len), every byte outside '!'..'~' and '"' shown as '?', "..." when cut. */
void tk_str_snip(char *out, size_t outlen, const char *s, size_t len);

/* Parses a base-10 integer in [min, max] with nothing after it. */
tk_status tk_parse_i64(const char *s, int64_t min, int64_t max, int64_t *out);

/* Grows this process's descriptor table to hold at least n descriptors (capped
 * at RLIMIT_NOFILE). The kernel grows it by doubling, and in a multi-threaded
 * process every growth waits for an RCU grace period (1-15 ms measured) inside
 * whichever open(), accept() or socket() crossed 64, 128, 256...; done once
 * before any thread exists it costs a few KiB and no waiting. Best effort:
 * returns the table's guaranteed size (0 when nothing could be done). */
int tk_fd_table_reserve(int n);

/* Code that runs in a CLONE_VM child sharing the parent's memory is kept out of
 * AddressSanitizer's instrumentation. */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TK_NO_ASAN __attribute__((no_sanitize("address")))
#endif
#endif
#ifndef TK_NO_ASAN
#define TK_NO_ASAN
#endif

/* In a child about to exec: every signal's disposition back to the default,
 * with raw system calls. libc's sigaction() refuses the two signals glibc keeps
 * for itself (32 and 33, and an SIG_IGN inherited on them — GNU make sets one —
 * would reach the program), and in a CLONE_VM child it may be a sanitizer's
 * interceptor that keeps state in the memory shared with the parent. */
void tk_child_default_signals(void);

#endif
