/* The workspace path resolver: the lexical rules, and resolution beneath a real
 * root that holds symlinks to /etc, to its parent and inside itself. Whatever
 * the input, a path accepted by tk_pathsafe_rel is normalised, and every fd that
 * tk_pathsafe_open / tk_pathsafe_open_parent hands out is beneath the root;
 * tk_pathsafe_check agrees with it, and its strict mode admits no "..". */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <ftw.h>
#include <unistd.h>

#include "lib/pathsafe.h"

static tk_pathsafe ws;
static char real_root[4096];
static char top[64];

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
    return remove(p);
}

static void cleanup(void)
{
    nftw(top, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    char tmpl[] = "/tmp/tk-fuzz-path-XXXXXX";
    if (!mkdtemp(tmpl))
        abort();
    snprintf(top, sizeof top, "%s", tmpl);
    atexit(cleanup);
    char p[512];
    snprintf(p, sizeof p, "%s/ws", tmpl);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/ws/a", tmpl);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/ws/a/b", tmpl);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/ws/etc", tmpl);
    if (symlink("/etc", p) != 0)
        abort();
    snprintf(p, sizeof p, "%s/ws/up", tmpl);
    if (symlink("..", p) != 0)
        abort();
    snprintf(p, sizeof p, "%s/ws/in", tmpl);
    if (symlink("a/b", p) != 0)
        abort();
    snprintf(p, sizeof p, "%s/ws/f", tmpl);
    int fd = open(p, O_WRONLY | O_CREAT, 0644);
    close(fd);
    snprintf(p, sizeof p, "%s/ws", tmpl);
    char err[256];
    if (tk_pathsafe_init(&ws, p, err, sizeof err) != TK_OK)
        abort();
    if (!realpath(p, real_root))
        abort();
    return 0;
}

static void beneath(int fd)
{
    char link[64], target[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n < 0)
        __builtin_trap();
    target[n] = '\0';
    size_t rl = strlen(real_root);
    if (strncmp(target, real_root, rl) != 0 || (target[rl] != '\0' && target[rl] != '/'))
        __builtin_trap(); /* an fd outside the workspace */
    close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char rel[TK_PATHSAFE_PATH_MAX], again[TK_PATHSAFE_PATH_MAX], why[512];
    char abs[TK_PATHSAFE_PATH_MAX + 400], sabs[TK_PATHSAFE_PATH_MAX + 400];
    tk_status rst =
        tk_pathsafe_rel(&ws, (const char *)data, size, rel, sizeof rel, why, sizeof why);
    /* the check against the root as a string: the same verdict and path as
     * tk_pathsafe_rel when the root is its own realpath; strict accepts a
     * subset, with the same result, never a ".." */
    tk_status cst =
        tk_pathsafe_check(ws.root, (const char *)data, size, 0, abs, sizeof abs, why, sizeof why);
    if (cst != rst && !ws.real[0]) /* the root is its own realpath */
        __builtin_trap();
    if (cst == TK_OK && rst == TK_OK) {
        char want[sizeof abs];
        tk_pathsafe_display(&ws, rel, want, sizeof want);
        if (strcmp(abs, want) != 0)
            __builtin_trap();
    }
    if (tk_pathsafe_check(ws.root, (const char *)data, size, TK_PATHSAFE_STRICT, sabs, sizeof sabs,
                          why, sizeof why) == TK_OK) {
        if (cst != TK_OK || strcmp(sabs, abs) != 0)
            __builtin_trap();                 /* strict admits only what the plain check admits */
        for (size_t i = 0; i + 1 < size; i++) /* no ".." component in the input */
            if (data[i] == '.' && data[i + 1] == '.' && (i == 0 || data[i - 1] == '/') &&
                (i + 2 == size || data[i + 2] == '/'))
                __builtin_trap();
    }
    if (rst != TK_OK)
        return 0;
    size_t n = strlen(rel);
    if (n > TK_PATHSAFE_PATH_MAX || rel[0] == '/' || (n && rel[n - 1] == '/') || strstr(rel, "//"))
        __builtin_trap();
    /* no "." or ".." component, none longer than 255 bytes */
    for (const char *c = rel; *c;) {
        const char *e = strchr(c, '/');
        size_t l = e ? (size_t)(e - c) : strlen(c);
        if (l == 0 || l > TK_PATHSAFE_NAME_MAX || (l == 1 && c[0] == '.') ||
            (l == 2 && c[0] == '.' && c[1] == '.'))
            __builtin_trap();
        c += l + (e ? 1 : 0);
    }
    if (strpbrk(rel, "\\$") || memchr(rel, '\0', n))
        __builtin_trap();
    /* normalising is idempotent ("" is the root, written ".") */
    if (tk_pathsafe_rel(&ws, n ? rel : ".", n ? n : 1, again, sizeof again, why, sizeof why) !=
            TK_OK ||
        strcmp(rel, again) != 0)
        __builtin_trap();
    int fd;
    if (tk_pathsafe_open(&ws, rel, O_PATH, 0, 0, &fd, why, sizeof why) == TK_OK)
        beneath(fd);
    if (tk_pathsafe_open(&ws, rel, O_PATH, 0, TK_PATHSAFE_FOLLOW, &fd, why, sizeof why) == TK_OK)
        beneath(fd);
    char leaf[TK_PATHSAFE_NAME_MAX + 1];
    if (tk_pathsafe_open_parent(&ws, rel, 0, &fd, leaf, sizeof leaf, why, sizeof why) == TK_OK) {
        if (strchr(leaf, '/') || !leaf[0])
            __builtin_trap();
        beneath(fd);
    }
    tk_pathsafe_force_walk(1);
    if (tk_pathsafe_open(&ws, rel, O_PATH, 0, TK_PATHSAFE_FOLLOW, &fd, why, sizeof why) == TK_OK)
        beneath(fd);
    tk_pathsafe_force_walk(0);
    return 0;
}
