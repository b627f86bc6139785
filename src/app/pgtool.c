#include "app/pgtool.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sodium.h>

#include "app/app.h"
#include "lib/pg.h"

extern char **environ;

int app_pgtool_server_major(PGconn *c)
{
    PGresult *r =
        tk_pg_query(c, "SELECT current_setting('server_version_num')::int / 10000", 0, NULL);
    int v = tk_pg_ok(r) ? atoi(PQgetvalue(r, 0, 0)) : -1;
    PQclear(r);
    return v;
}

/* The environment of a tool: ours without any PG* variable, then the
 * connection's parameters from DATABASE_URL as their PG* variables. */
static char **tool_env(void)
{
    size_t n = 0;
    for (char **e = environ; *e; e++)
        n++;
    char *perr = NULL;
    PQconninfoOption *opts = PQconninfoParse(app_get()->cfg->database_url, &perr);
    if (perr)
        PQfreemem(perr);
    size_t nopt = 0;
    for (PQconninfoOption *o = opts; o && o->keyword; o++)
        nopt++;
    char **env = tk_calloc(n + nopt + 1, sizeof *env);
    size_t k = 0;
    for (char **e = environ; *e; e++)
        if (strncmp(*e, "PG", 2) != 0)
            env[k++] = tk_strdup(*e);
    for (PQconninfoOption *o = opts; o && o->keyword; o++)
        if (o->envvar && o->val && *o->val)
            env[k++] = tk_asprintf("%s=%s", o->envvar, o->val);
    env[k] = NULL;
    PQconninfoFree(opts);
    return env;
}

static void env_free(char **env)
{
    for (char **e = env; *e; e++) {
        if (strncmp(*e, "PGPASSWORD=", 11) == 0)
            sodium_memzero(*e, strlen(*e));
        free(*e);
    }
    free(env);
}

int app_pgtool_run(char *const argv[], int out_fd, tk_buf *errout)
{
    int ep[2];
    if (pipe2(ep, O_CLOEXEC) != 0)
        return -1;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    if (out_fd >= 0)
        posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
    else
        posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, ep[1], 2);
    /* default signals: tusko blocks SIGINT/SIGTERM and ignores SIGPIPE */
    posix_spawnattr_t at;
    posix_spawnattr_init(&at);
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setsigmask(&at, &none);
    posix_spawnattr_setsigdefault(&at, &all);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    char **env = tool_env();
    pid_t pid;
    int rc = strchr(argv[0], '/') ? posix_spawn(&pid, argv[0], &fa, &at, argv, env)
                                  : posix_spawnp(&pid, argv[0], &fa, &at, argv, env);
    env_free(env);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    close(ep[1]);
    if (rc != 0) {
        close(ep[0]);
        if (errout)
            tk_buf_printf(errout, "cannot run %s: %s", argv[0], strerror(rc));
        return -1;
    }
    char buf[4096];
    ssize_t k;
    while ((k = read(ep[0], buf, sizeof buf)) != 0) {
        if (k < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (errout)
            (void)tk_buf_append(errout, buf, (size_t)k); /* past the cap: dropped */
    }
    close(ep[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -1;
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (errout)
        tk_buf_printf(errout, "%s%s was killed by signal %d", errout->len ? "; " : "", argv[0],
                      WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

tk_status app_pgtool_find(const char *name, int server_major, char *out, size_t outlen,
                          char *version, size_t vlen, char *err, size_t errlen)
{
    const char *bindir = app_get()->cfg->pg_bindir;
    char guess[256];
    snprintf(guess, sizeof guess, "/usr/lib/postgresql/%d/bin/%s", server_major, name);
    if (bindir)
        snprintf(out, outlen, "%s/%s", bindir, name);
    else if (access(guess, X_OK) == 0)
        snprintf(out, outlen, "%s", guess);
    else
        snprintf(out, outlen, "%s", name);
    /* "pg_dump (PostgreSQL) 15.14 (Debian 15.14-0+deb12u1)" */
    char tmpl[] = "/tmp/tusko-pgtool-XXXXXX";
    int fd = mkstemp(tmpl);
    if (fd < 0) {
        snprintf(err, errlen, "cannot make a temporary file: %s", strerror(errno));
        return TK_ERROR;
    }
    unlink(tmpl);
    char *argv[] = {out, "--version", NULL};
    tk_buf e;
    tk_buf_init(&e, 8192);
    int rc = app_pgtool_run(argv, fd, &e);
    char line[200] = "";
    ssize_t k = pread(fd, line, sizeof line - 1, 0);
    close(fd);
    line[k > 0 ? k : 0] = '\0';
    line[strcspn(line, "\n")] = '\0';
    if (rc != 0) {
        snprintf(err, errlen, "cannot run %s%s (%.200s); set PG_BINDIR to the folder of %s", out,
                 bindir ? "" : " (PG_BINDIR is unset)", tk_buf_cstr(&e), name);
        tk_buf_free(&e);
        return TK_ERROR;
    }
    tk_buf_free(&e);
    snprintf(version, vlen, "%s", line);
    const char *v = strstr(line, ") ");
    int major = v ? atoi(v + 2) : 0;
    if (major < server_major) {
        snprintf(err, errlen,
                 "%s is version %d (\"%s\") but the server is %d: %s must be the server's "
                 "version or newer; set PG_BINDIR to the folder of a newer one",
                 out, major, line, server_major, name);
        return TK_EINVAL;
    }
    return TK_OK;
}

tk_status app_sha256_file(const char *path, char hex[65], uint64_t *size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return TK_ERROR;
    crypto_hash_sha256_state st;
    crypto_hash_sha256_init(&st);
    unsigned char buf[65536];
    ssize_t k;
    uint64_t n = 0;
    while ((k = read(fd, buf, sizeof buf)) != 0) {
        if (k < 0) {
            if (errno == EINTR)
                continue;
            int e = errno;
            close(fd);
            errno = e;
            return TK_ERROR;
        }
        crypto_hash_sha256_update(&st, buf, (size_t)k);
        n += (uint64_t)k;
    }
    close(fd);
    unsigned char h[32];
    crypto_hash_sha256_final(&st, h);
    sodium_bin2hex(hex, 65, h, sizeof h);
    *size = n;
    return TK_OK;
}
