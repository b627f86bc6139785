#include "sandboxd/cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/tktime.h"

enum { CG_MEMORY, CG_PIDS, CG_CPU, CG_FREEZER, CG_N };
static const char *const cg_names[CG_N] = {"memory", "pids", "cpu", "freezer"};

struct sbx_cgroups {
    int version;
    char group[128];
    char mount[CG_N][256]; /* v1: one per controller; v2: mount[0] */
    char desc[128];
};

int sbx_cgroup_version(const sbx_cgroups *cg)
{
    return cg->version;
}

const char *sbx_cgroup_describe(const sbx_cgroups *cg)
{
    return cg->desc;
}

static tk_status write_file(const char *path, const char *value, char *err, size_t errlen)
{
    int fd = open(path, O_WRONLY | O_CLOEXEC | O_TRUNC);
    if (fd < 0 && errno == ENOENT) /* a fake hierarchy in tests: plain files */
        fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_TRUNC, 0644);
    if (fd < 0) {
        snprintf(err, errlen, "open %s: %s", path, strerror(errno));
        return TK_ERROR;
    }
    size_t n = strlen(value);
    ssize_t w = write(fd, value, n);
    int e = errno;
    close(fd);
    if (w != (ssize_t)n) {
        snprintf(err, errlen, "write \"%s\" to %s: %s", value, path,
                 w < 0 ? strerror(e) : "short write");
        return TK_ERROR;
    }
    return TK_OK;
}

static ssize_t read_file(const char *path, char *buf, size_t len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t got = 0;
    while (got + 1 < len) {
        ssize_t r = read(fd, buf + got, len - 1 - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    buf[got] = '\0';
    return (ssize_t)got;
}

/* mountinfo: "id parent maj:min root mountpoint opts [optional...] - fstype source superopts". */
static void parse_mountinfo(sbx_cgroups *cg, const char *path, char v2mount[256])
{
    FILE *f = fopen(path, "re");
    v2mount[0] = '\0';
    if (!f)
        return;
    char line[4096];
    while (fgets(line, sizeof line, f)) {
        char *tok[64];
        int nt = 0;
        char *p = line;
        while (*p && nt < 64) {
            while (*p == ' ' || *p == '\n')
                *p++ = '\0';
            if (!*p)
                break;
            tok[nt++] = p;
            while (*p && *p != ' ' && *p != '\n')
                p++;
        }
        int dash = -1;
        for (int i = 6; i < nt; i++)
            if (strcmp(tok[i], "-") == 0) {
                dash = i;
                break;
            }
        if (nt < 5 || dash < 0 || dash + 3 >= nt)
            continue;
        const char *mp = tok[4], *fstype = tok[dash + 1], *super = tok[dash + 3];
        if (strcmp(fstype, "cgroup2") == 0) {
            if (!v2mount[0])
                snprintf(v2mount, 256, "%s", mp);
        } else if (strcmp(fstype, "cgroup") == 0) {
            char opts[1024];
            snprintf(opts, sizeof opts, ",%s,", super);
            for (int c = 0; c < CG_N; c++) {
                char want[32];
                snprintf(want, sizeof want, ",%s,", cg_names[c]);
                if (strstr(opts, want) && !cg->mount[c][0])
                    snprintf(cg->mount[c], sizeof cg->mount[c], "%s", mp);
            }
        }
    }
    fclose(f);
}

static int ctrl_count(const sbx_cgroups *cg);

static void dir_of(const sbx_cgroups *cg, int c, const char *name, char *out, size_t outlen)
{
    const char *m = cg->version == 2 ? cg->mount[0] : cg->mount[c];
    if (name)
        snprintf(out, outlen, "%s/%s/%s", m, cg->group, name);
    else
        snprintf(out, outlen, "%s/%s", m, cg->group);
}

tk_status sbx_cgroup_path(const sbx_cgroups *cg, const char *ctrl, const char *name,
                          const char *file, char *out, size_t outlen)
{
    int c = -1;
    for (int i = 0; i < CG_N; i++)
        if (strcmp(ctrl, cg_names[i]) == 0)
            c = i;
    if (c < 0)
        return TK_EINVAL;
    char d[512];
    dir_of(cg, c, name, d, sizeof d);
    snprintf(out, outlen, "%s/%s", d, file);
    return TK_OK;
}

static int ctrl_count(const sbx_cgroups *cg)
{
    return cg->version == 2 ? 1 : CG_N;
}

sbx_cgroups *sbx_cgroup_open(const char *group, const char *mountinfo, char *err, size_t errlen)
{
    sbx_cgroups *cg = tk_calloc(1, sizeof *cg);
    snprintf(cg->group, sizeof cg->group, "%s", group);
    char v2[256];
    parse_mountinfo(cg, mountinfo ? mountinfo : "/proc/self/mountinfo", v2);
    int have_v1 = 1;
    for (int c = 0; c < CG_N; c++)
        if (!cg->mount[c][0])
            have_v1 = 0;
    if (have_v1) {
        cg->version = 1;
        snprintf(cg->desc, sizeof cg->desc, "v1 (memory,pids,cpu,freezer)");
        for (int c = 0; c < CG_N; c++) {
            char d[512];
            dir_of(cg, c, NULL, d, sizeof d);
            if (mkdir(d, 0755) < 0 && errno != EEXIST) {
                snprintf(err, errlen, "cgroup v1: mkdir %s: %s", d, strerror(errno));
                goto fail;
            }
        }
        return cg;
    }
    if (!v2[0]) {
        snprintf(err, errlen,
                 "no usable cgroups: need cgroup v1 hierarchies for memory, pids, cpu and freezer "
                 "(missing:%s%s%s%s) or a cgroup2 mount",
                 cg->mount[CG_MEMORY][0] ? "" : " memory", cg->mount[CG_PIDS][0] ? "" : " pids",
                 cg->mount[CG_CPU][0] ? "" : " cpu", cg->mount[CG_FREEZER][0] ? "" : " freezer");
        goto fail;
    }
    cg->version = 2;
    snprintf(cg->mount[0], sizeof cg->mount[0], "%s", v2);
    snprintf(cg->desc, sizeof cg->desc, "v2 (%s)", v2);
    char p[512], have[512];
    snprintf(p, sizeof p, "%s/cgroup.controllers", v2);
    if (read_file(p, have, sizeof have) < 0 || !strstr(have, "memory") || !strstr(have, "pids")) {
        snprintf(err, errlen,
                 "cgroup v2 at %s: the memory and pids controllers are not available (%s)", v2, p);
        goto fail;
    }
    char d[512];
    dir_of(cg, 0, NULL, d, sizeof d);
    if (mkdir(d, 0755) < 0 && errno != EEXIST) {
        snprintf(err, errlen, "cgroup v2: mkdir %s: %s", d, strerror(errno));
        goto fail;
    }
    const char *ctl = strstr(have, "cpu") ? "+memory +pids +cpu" : "+memory +pids";
    snprintf(p, sizeof p, "%s/cgroup.subtree_control", v2);
    char e2[256];
    write_file(p, ctl, e2, sizeof e2); /* may already be on, or be refused at the real root */
    snprintf(p, sizeof p, "%s/cgroup.subtree_control", d);
    if (write_file(p, ctl, err, errlen) != TK_OK)
        goto fail;
    return cg;
fail:
    free(cg);
    return NULL;
}

void sbx_cgroup_close(sbx_cgroups *cg)
{
    if (!cg)
        return;
    /* the parent group goes when no sandbox is left in it (rmdir refuses otherwise) */
    for (int c = 0; c < ctrl_count(cg); c++) {
        char d[512];
        dir_of(cg, c, NULL, d, sizeof d);
        rmdir(d);
    }
    free(cg);
}

static tk_status set_in(const sbx_cgroups *cg, int c, const char *name, const char *file,
                        const char *value, char *err, size_t errlen)
{
    char d[512], p[600];
    dir_of(cg, c, name, d, sizeof d);
    snprintf(p, sizeof p, "%s/%s", d, file);
    return write_file(p, value, err, errlen);
}

static int exists_in(const sbx_cgroups *cg, int c, const char *name, const char *file)
{
    char d[512], p[600];
    dir_of(cg, c, name, d, sizeof d);
    snprintf(p, sizeof p, "%s/%s", d, file);
    return access(p, F_OK) == 0;
}

tk_status sbx_cgroup_set_limits(sbx_cgroups *cg, const char *name, const sbx_limits *l, char *err,
                                size_t errlen)
{
    char v[64];
    if (cg->version == 1) {
        snprintf(v, sizeof v, "%lld", (long long)l->memory_bytes);
        /* memsw must stay >= limit: raise limit_in_bytes first when growing */
        if (set_in(cg, CG_MEMORY, name, "memory.limit_in_bytes", v, err, errlen) != TK_OK) {
            if (!exists_in(cg, CG_MEMORY, name, "memory.memsw.limit_in_bytes") ||
                set_in(cg, CG_MEMORY, name, "memory.memsw.limit_in_bytes", v, err, errlen) !=
                    TK_OK ||
                set_in(cg, CG_MEMORY, name, "memory.limit_in_bytes", v, err, errlen) != TK_OK)
                return TK_ERROR;
        }
        if (exists_in(cg, CG_MEMORY, name, "memory.memsw.limit_in_bytes") &&
            set_in(cg, CG_MEMORY, name, "memory.memsw.limit_in_bytes", v, err, errlen) != TK_OK)
            return TK_ERROR;
        snprintf(v, sizeof v, "%lld", (long long)l->pids);
        if (set_in(cg, CG_PIDS, name, "pids.max", v, err, errlen) != TK_OK)
            return TK_ERROR;
        if (set_in(cg, CG_CPU, name, "cpu.cfs_period_us", "100000", err, errlen) != TK_OK)
            return TK_ERROR;
        snprintf(v, sizeof v, "%lld", (long long)(l->cpu_millis > 0 ? l->cpu_millis * 100 : -1));
        return set_in(cg, CG_CPU, name, "cpu.cfs_quota_us", v, err, errlen);
    }
    snprintf(v, sizeof v, "%lld", (long long)l->memory_bytes);
    if (set_in(cg, 0, name, "memory.max", v, err, errlen) != TK_OK)
        return TK_ERROR;
    if (exists_in(cg, 0, name, "memory.swap.max"))
        set_in(cg, 0, name, "memory.swap.max", "0", err, errlen);
    snprintf(v, sizeof v, "%lld", (long long)l->pids);
    if (set_in(cg, 0, name, "pids.max", v, err, errlen) != TK_OK)
        return TK_ERROR;
    if (l->cpu_millis > 0)
        snprintf(v, sizeof v, "%lld 100000", (long long)(l->cpu_millis * 100));
    else
        snprintf(v, sizeof v, "max 100000");
    if (exists_in(cg, 0, name, "cpu.max") || access(cg->mount[0], W_OK) == 0)
        return set_in(cg, 0, name, "cpu.max", v, err, errlen);
    return TK_OK;
}

tk_status sbx_cgroup_create(sbx_cgroups *cg, const char *name, const sbx_limits *l, char *err,
                            size_t errlen)
{
    for (int c = 0; c < ctrl_count(cg); c++) {
        char d[512];
        dir_of(cg, c, name, d, sizeof d);
        if (mkdir(d, 0755) < 0 && errno != EEXIST) {
            snprintf(err, errlen, "mkdir %s: %s", d, strerror(errno));
            return TK_ERROR;
        }
    }
    return sbx_cgroup_set_limits(cg, name, l, err, errlen);
}

int sbx_cgroup_open_dir(const sbx_cgroups *cg, const char *name)
{
    if (cg->version != 2)
        return -1;
    char d[512];
    dir_of(cg, 0, name, d, sizeof d);
    return open(d, O_PATH | O_DIRECTORY | O_CLOEXEC);
}

tk_status sbx_cgroup_attach(sbx_cgroups *cg, const char *name, pid_t pid, char *err, size_t errlen)
{
    char v[32];
    snprintf(v, sizeof v, "%d", (int)pid);
    for (int c = 0; c < ctrl_count(cg); c++)
        if (set_in(cg, c, name, "cgroup.procs", v, err, errlen) != TK_OK)
            return TK_ERROR;
    return TK_OK;
}

int sbx_cgroup_frozen(sbx_cgroups *cg, const char *name)
{
    char d[512], p[600], buf[256];
    if (cg->version == 1) {
        dir_of(cg, CG_FREEZER, name, d, sizeof d);
        snprintf(p, sizeof p, "%s/freezer.state", d);
        if (read_file(p, buf, sizeof buf) < 0)
            return -1;
        return strncmp(buf, "FROZEN", 6) == 0;
    }
    dir_of(cg, 0, name, d, sizeof d);
    snprintf(p, sizeof p, "%s/cgroup.events", d);
    if (read_file(p, buf, sizeof buf) < 0)
        return -1;
    return strstr(buf, "frozen 1") != NULL;
}

tk_status sbx_cgroup_freeze(sbx_cgroups *cg, const char *name, int frozen, long timeout_ms,
                            char *err, size_t errlen)
{
    tk_status st;
    if (cg->version == 1)
        st = set_in(cg, CG_FREEZER, name, "freezer.state", frozen ? "FROZEN" : "THAWED", err,
                    errlen);
    else
        st = set_in(cg, 0, name, "cgroup.freeze", frozen ? "1" : "0", err, errlen);
    if (st != TK_OK)
        return st;
    int64_t deadline = tk_mono_ms() + timeout_ms;
    long sleep_us = 100;
    for (;;) {
        int f = sbx_cgroup_frozen(cg, name);
        if (cg->version == 2 && f < 0) /* fake hierarchies in tests have no events file */
            return TK_OK;
        if (f == frozen)
            return TK_OK;
        if (tk_mono_ms() > deadline) {
            snprintf(err, errlen, "cgroup %s did not become %s within %ld ms", name,
                     frozen ? "frozen" : "thawed", timeout_ms);
            return TK_ETIMEOUT;
        }
        usleep((useconds_t)sleep_us);
        if (sleep_us < 5000)
            sleep_us *= 2;
    }
}

/* Calls fn(pid) for each pid in the group's cgroup.procs (pids hierarchy on v1). */
static long each_pid(sbx_cgroups *cg, const char *name, void (*fn)(pid_t))
{
    char d[512], p[600];
    dir_of(cg, cg->version == 1 ? CG_PIDS : 0, name, d, sizeof d);
    snprintf(p, sizeof p, "%s/cgroup.procs", d);
    FILE *f = fopen(p, "re");
    if (!f)
        return -1;
    long n = 0;
    char line[64];
    while (fgets(line, sizeof line, f)) {
        int64_t pid;
        line[strcspn(line, "\n")] = '\0';
        if (tk_parse_i64(line, 1, 1 << 30, &pid) == TK_OK) {
            n++;
            if (fn)
                fn((pid_t)pid);
        }
    }
    fclose(f);
    return n;
}

long sbx_cgroup_count(sbx_cgroups *cg, const char *name)
{
    return each_pid(cg, name, NULL);
}

static void kill_one(pid_t pid)
{
    kill(pid, SIGKILL);
}

void sbx_cgroup_kill_all(sbx_cgroups *cg, const char *name)
{
    char err[256];
    if (cg->version == 2 && exists_in(cg, 0, name, "cgroup.kill")) {
        set_in(cg, 0, name, "cgroup.kill", "1", err, sizeof err);
    } else {
        /* freeze first so nothing forks between reading the list and killing */
        if (cg->version == 1)
            set_in(cg, CG_FREEZER, name, "freezer.state", "FROZEN", err, sizeof err);
        else
            set_in(cg, 0, name, "cgroup.freeze", "1", err, sizeof err);
        each_pid(cg, name, kill_one);
    }
    if (cg->version == 1)
        set_in(cg, CG_FREEZER, name, "freezer.state", "THAWED", err, sizeof err);
    else
        set_in(cg, 0, name, "cgroup.freeze", "0", err, sizeof err);
}

tk_status sbx_cgroup_remove(sbx_cgroups *cg, const char *name, long timeout_ms, char *err,
                            size_t errlen)
{
    int64_t deadline = tk_mono_ms() + timeout_ms;
    long sleep_us = 100;
    for (;;) {
        long n = sbx_cgroup_count(cg, name);
        if (n <= 0)
            break;
        sbx_cgroup_kill_all(cg, name);
        if (tk_mono_ms() > deadline) {
            snprintf(err, errlen, "cgroup %s still has %ld processes after %ld ms", name, n,
                     timeout_ms);
            return TK_ETIMEOUT;
        }
        usleep((useconds_t)sleep_us);
        if (sleep_us < 10000)
            sleep_us *= 2;
    }
    tk_status st = TK_OK;
    for (int c = 0; c < ctrl_count(cg); c++) {
        char d[512];
        dir_of(cg, c, name, d, sizeof d);
        for (int tries = 0;; tries++) {
            if (rmdir(d) == 0 || errno == ENOENT)
                break;
            if (errno == ENOTEMPTY || errno == EEXIST) {
                /* a fake hierarchy (tests) holds plain files */
                DIR *dd = opendir(d);
                struct dirent *de;
                int had_files = 0;
                while (dd && (de = readdir(dd)) != NULL) {
                    if (de->d_name[0] == '.')
                        continue;
                    char p[800];
                    snprintf(p, sizeof p, "%s/%s", d, de->d_name);
                    if (unlink(p) == 0)
                        had_files = 1;
                }
                if (dd)
                    closedir(dd);
                if (had_files)
                    continue;
            }
            if (errno == EBUSY && tries < 200) { /* the last task is still exiting */
                usleep(1000);
                continue;
            }
            snprintf(err, errlen, "rmdir %s: %s", d, strerror(errno));
            st = TK_ERROR;
            break;
        }
    }
    return st;
}

size_t sbx_cgroup_list(sbx_cgroups *cg, char ***names)
{
    char d[512];
    dir_of(cg, cg->version == 1 ? CG_PIDS : 0, NULL, d, sizeof d);
    *names = NULL;
    DIR *dd = opendir(d);
    if (!dd)
        return 0;
    size_t n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(dd)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        char p[800];
        struct stat sb;
        snprintf(p, sizeof p, "%s/%s", d, de->d_name);
        if (stat(p, &sb) < 0 || !S_ISDIR(sb.st_mode))
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            *names = tk_realloc(*names, cap * sizeof **names);
        }
        (*names)[n++] = tk_strdup(de->d_name);
    }
    closedir(dd);
    /* v1: a group may be left in another hierarchy only (a crash mid-create) */
    if (cg->version == 1) {
        for (int c = 0; c < CG_N; c++) {
            if (c == CG_PIDS)
                continue;
            dir_of(cg, c, NULL, d, sizeof d);
            dd = opendir(d);
            while (dd && (de = readdir(dd)) != NULL) {
                if (de->d_name[0] == '.' || de->d_type != DT_DIR)
                    continue;
                int seen = 0;
                for (size_t i = 0; i < n; i++)
                    if (strcmp((*names)[i], de->d_name) == 0)
                        seen = 1;
                if (seen)
                    continue;
                if (n == cap) {
                    cap = cap ? cap * 2 : 16;
                    *names = tk_realloc(*names, cap * sizeof **names);
                }
                (*names)[n++] = tk_strdup(de->d_name);
            }
            if (dd)
                closedir(dd);
        }
    }
    return n;
}

void sbx_cgroup_list_free(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}
