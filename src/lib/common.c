#include "lib/common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

const char *tk_status_str(tk_status s)
{
    switch (s) {
    case TK_OK:
        return "ok";
    case TK_ERROR:
        return "error";
    case TK_AGAIN:
        return "try again";
    case TK_ETOOBIG:
        return "too big";
    case TK_EINVAL:
        return "invalid";
    case TK_ENOENT:
        return "not found";
    case TK_ECLOSED:
        return "closed";
    case TK_ETIMEOUT:
        return "timed out";
    case TK_EDENIED:
        return "denied";
    }
    return "unknown";
}

void tk_oom(void)
{
    static const char msg[] = "fatal: out of memory\n";
    fwrite(msg, 1, sizeof msg - 1, stderr);
    abort();
}

void tk_panic(const char *file, int line, const char *expr)
{
    fprintf(stderr, "fatal: %s:%d: assertion failed: %s\n", file, line, expr);
    abort();
}

void *tk_malloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        tk_oom();
    return p;
}

void *tk_calloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p)
        tk_oom();
    return p;
}

void *tk_realloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q)
        tk_oom();
    return q;
}

char *tk_strdup(const char *s)
{
    return tk_strndup(s, strlen(s));
}

char *tk_strndup(const char *s, size_t n)
{
    char *p = tk_malloc(n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

char *tk_asprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *out = NULL;
    int n = vasprintf(&out, fmt, ap);
    va_end(ap);
    if (n < 0)
        tk_oom();
    return out;
}

int tk_str_eq_ct(const char *a, const char *b)
{
    if (!a || !b)
        return 0;
    size_t la = strlen(a), lb = strlen(b);
    unsigned char diff = (unsigned char)(la != lb);
    size_t n = la < lb ? la : lb;
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned char)(a[i] ^ b[i]);
    return diff == 0;
}

tk_status tk_parse_i64(const char *s, int64_t min, int64_t max, int64_t *out)
{
    if (!s || !*s)
        return TK_EINVAL;
    errno = 0;
    char *end = NULL;
    long long v = strtoll(s, &end, 10);
    if (errno || *end || end == s)
        return TK_EINVAL;
    if (v < min || v > max)
        return TK_EINVAL;
    *out = v;
    return TK_OK;
}

int tk_fd_table_reserve(int n)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        (rlim_t)n > rl.rlim_cur)
        n = (int)rl.rlim_cur;
    int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    int got = fd + 1;
    if (n > fd + 1) {
        int hi = fcntl(fd, F_DUPFD_CLOEXEC, n - 1);
        if (hi >= 0) {
            got = hi + 1;
            close(hi);
        }
    }
    close(fd);
    return got;
}

/* the kernel's struct sigaction (rt_sigaction takes its mask size) */
struct k_sigaction {
    void *handler;
    unsigned long flags;
    void *restorer;
    uint64_t mask;
};

TK_NO_ASAN void tk_child_default_signals(void)
{
    struct k_sigaction dfl = {0};
    for (int s = 1; s < 65; s++)
        if (s != SIGKILL && s != SIGSTOP)
            syscall(SYS_rt_sigaction, s, &dfl, NULL, sizeof(uint64_t));
}

void tk_str_snip(char *out, size_t outlen, const char *s, size_t len)
{
    size_t j = 0;
    for (size_t i = 0; i < len && i < 80 && j + 1 < outlen; i++) {
        unsigned char c = (unsigned char)s[i];
        out[j++] = (c > 0x20 && c < 0x7f && c != '"') ? (char)c : '?';
    }
    if (len > 80 && j + 4 < outlen) {
        memcpy(out + j, "...", 3);
        j += 3;
    }
    out[j] = '\0';
}
