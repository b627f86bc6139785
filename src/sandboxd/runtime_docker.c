/*
 * runtime_docker.c — the docker runtime: each sandbox is a container made
 * through the Docker Engine API (docker.h), from the sandbox image
 * imported as tusko-sandbox:<recipe hash>. What the container is and may do is
 * in docker_spec.h; this file is the sequence of calls.
 *
 * start(), in order (any failure undoes what was done, by destroy()):
 *   dir        <state>/sandboxes/<id>/run, owned by the sandbox user (execd binds
 *              its socket there); for a pool member the FIFO run/claim, else
 *              run/env (execd's settings, token, the request's env and
 *              entrypoint) and the FIFO run/entry
 *   volume     tusko-ws-<id>: a tmpfs of SANDBOX_WORKSPACE_SIZE for /workspace
 *   create     the container tusko-<id>, labelled (see docker_spec.h)
 *   start      and its process (State.Pid, watched with a pidfd when this
 *              service shares the engine's pid namespace)
 *   ready      a pool member: its init has the FIFO open (it waits for a claim);
 *              otherwise: execd accepts on run/execd.sock, then the folder is
 *              handed back to root (0700: the sandbox can no longer write into a
 *              host folder) and run/env removed (it holds the token)
 *   entrypoint "go" on the FIFO run/entry: the init's child runs the request's
 *              entrypoint (argv in run/env)
 * claim(): run/env written, "go" on the FIFO run/claim, the limits by POST
 * /containers/{id}/update meanwhile, then ready and entrypoint as above.
 *
 * Restarts: save() keeps the container id and process; attach() finds the
 * container again by its labels (io.tusko.sandbox.id and the service's tag),
 * and sweep() removes every container, volume and run folder labelled with this
 * service's tag whose sandbox the service does not know.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/buf.h"
#include "lib/json.h"
#include "lib/log.h"
#include "lib/query.h"
#include "lib/tktime.h"
#include "sandboxd/docker.h"
#include "sandboxd/docker_image.h"
#include "sandboxd/egress.h"
#include "sandboxd/image.h"
#include "sandboxd/runtime.h"
#include "sandboxd/docker_spec.h"

/* How long a container may take to get execd listening (ASan builds are slow). */
#define DK_READY_MS 30000
#define DK_CALL_MS  60000

typedef struct {
    sbx_docker *dk;
    char state_dir[PATH_MAX];
    /* where the run folders go when <state>/sandboxes/<id>/run/execd.sock would
     * not fit a unix socket path: /run/tusko-sandboxd.<tag>/ (0700), as the
     * native runtime does; "" otherwise */
    char short_dir[64];
    char tag[24];
    char image[256];
    char image_id[80];
    char execd_path[PATH_MAX];
    int64_t ws_bytes, tmp_bytes;
    char *seccomp;
    size_t seccomp_rules;
    char version[32], api[16];
    char desc[1024];
    tk_egress *egress; /* SANDBOX_NETWORK=proxy; NULL: none */
    tk_egress_caps egress_caps;
} docker_rt;

typedef struct {
    sbx_instance base; /* id, sock */
    char cid[80];      /* the container's id; "" until created */
    char vol[64];
    char dir[PATH_MAX];
    char run[PATH_MAX];
    pid_t pid;
    int pidfd;   /* -1: not in our pid namespace; alive() asks the engine */
    int fifo_fd; /* a pool member's claim FIFO (write end), -1 otherwise */
    int exited;
    int64_t next_check_ms;
    tk_egress *eg;              /* the proxy serving it */
    tk_egress_listener *egress; /* its listener there, or NULL */
} docker_inst;

static docker_rt *RT(sbx_runtime *rt)
{
    return rt->impl;
}

static docker_inst *DI(sbx_instance *in)
{
    return (docker_inst *)in;
}

/* ---------- small helpers ---------- */

/* A call whose answer must have one of the statuses ok[0..]; else err says what
 * failed with the engine's message. *out (may be NULL) gets the answer. */
static tk_status dk(docker_rt *r, const char *what, const char *method, const char *path,
                    json_t *body, const long *ok, json_t **out, char *err, size_t errlen)
{
    long status;
    json_t *j = NULL;
    if (out)
        *out = NULL;
    char e[768];
    tk_status st = sbx_docker_call(r->dk, method, path, body, DK_CALL_MS, &status, &j, e, sizeof e);
    if (st != TK_OK) {
        snprintf(err, errlen, "%s: %s", what, e);
        return st;
    }
    for (const long *o = ok; *o; o++) {
        if (status == *o) {
            if (out)
                *out = j;
            else
                json_decref(j);
            return TK_OK;
        }
    }
    snprintf(err, errlen, "%s: the engine answered %ld: %s", what, status,
             sbx_docker_message(j, "(no message)"));
    json_decref(j);
    return status == 404 ? TK_ENOENT : TK_ERROR;
}

static const long OK_200[] = {200, 0}, OK_201[] = {201, 0}, OK_204[] = {204, 304, 0},
                  OK_GONE[] = {204, 404, 0};

static int write_file(const char *path, const char *data, mode_t mode, char *err, size_t errlen)
{
    char tmp[PATH_MAX + 8];
    snprintf(tmp, sizeof tmp, "%s.new", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        snprintf(err, errlen, "dir: create %s: %s", tmp, strerror(errno));
        return -1;
    }
    size_t len = strlen(data), off = 0;
    while (off < len) {
        ssize_t w = write(fd, data + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            snprintf(err, errlen, "dir: write %s: %s", tmp, strerror(errno));
            close(fd);
            unlink(tmp);
            return -1;
        }
        off += (size_t)w;
    }
    if (fchmod(fd, mode) != 0 || close(fd) != 0 || rename(tmp, path) != 0) {
        snprintf(err, errlen, "dir: %s: %s", path, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* Removes <run>/ and what it holds (sockets, the FIFO, env files). */
static void remove_run_dir(const char *run)
{
    DIR *d = opendir(run);
    if (d) {
        struct dirent *de;
        while ((de = readdir(d)) != NULL) {
            if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                continue;
            unlinkat(dirfd(d), de->d_name, 0);
        }
        closedir(d);
    }
    rmdir(run);
}

static void sleep_us(long us)
{
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* ---------- the container's process ---------- */

/* Non-zero when /proc/<pid>/cgroup names the container: State.Pid is a pid of
 * our namespace (not so when this service runs in a container of its own). */
static int pid_is_container(pid_t pid, const char *cid)
{
    char p[64], buf[4096];
    snprintf(p, sizeof p, "/proc/%d/cgroup", (int)pid);
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    return strstr(buf, cid) != NULL;
}

/* Reads State.Pid (and status) of the container; watches it with a pidfd. */
static tk_status watch_process(docker_rt *r, docker_inst *in, char *state, size_t statelen,
                               char *err, size_t errlen)
{
    char path[160];
    snprintf(path, sizeof path, "/containers/%s/json", in->cid);
    json_t *j;
    tk_status st = dk(r, "inspect", "GET", path, NULL, OK_200, &j, err, errlen);
    if (st != TK_OK)
        return st;
    json_t *s = json_object_get(j, "State");
    int64_t pid = tk_json_int_or(s, "Pid", 0);
    if (state)
        snprintf(state, statelen, "%s", tk_json_str_or(s, "Status", "?"));
    json_decref(j);
    if (in->pidfd >= 0) {
        close(in->pidfd);
        in->pidfd = -1;
    }
    in->pid = (pid_t)pid;
    if (pid > 0 && pid_is_container((pid_t)pid, in->cid)) {
        in->pidfd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
        /* the pid may have been reused between inspect and open: check again */
        if (in->pidfd >= 0 && !pid_is_container((pid_t)pid, in->cid)) {
            close(in->pidfd);
            in->pidfd = -1;
            in->exited = 1;
        }
    }
    return TK_OK;
}

static int process_exited(docker_inst *in)
{
    if (in->pidfd < 0)
        return 0;
    struct pollfd pf = {in->pidfd, POLLIN, 0};
    return poll(&pf, 1, 0) > 0;
}

/* The last lines the container wrote (its log), for an error message. */
static void container_log_tail(docker_rt *r, docker_inst *in, char *out, size_t outlen)
{
    out[0] = '\0';
    char path[200], e[256];
    snprintf(path, sizeof path, "/containers/%s/logs?stdout=1&stderr=1&tail=4", in->cid);
    long status;
    json_t *j = NULL;
    /* the log is a multiplexed stream, not JSON: sbx_docker_call makes it a message */
    if (sbx_docker_call(r->dk, "GET", path, NULL, 5000, &status, &j, e, sizeof e) != TK_OK ||
        status != 200) {
        json_decref(j);
        return;
    }
    const char *m = tk_json_str_or(j, "message", "");
    size_t k = 0;
    for (const unsigned char *p = (const unsigned char *)m; *p && k + 1 < outlen; p++)
        if (*p >= 0x20 && *p < 0x7f && *p != '"')
            out[k++] = (char)*p;
    out[k] = '\0';
    json_decref(j);
}

/* What to say when the container is gone while we wait for it. */
static void exited_error(docker_rt *r, docker_inst *in, const char *step, char *err, size_t errlen)
{
    char path[160], e[256], log[200];
    snprintf(path, sizeof path, "/containers/%s/json", in->cid);
    json_t *j = NULL;
    int64_t code = -1;
    if (dk(r, "inspect", "GET", path, NULL, OK_200, &j, e, sizeof e) == TK_OK)
        code = tk_json_int_or(json_object_get(j, "State"), "ExitCode", -1);
    json_decref(j);
    container_log_tail(r, in, log, sizeof log);
    snprintf(err, errlen, "%s: the container %.12s exited (code %lld)%s%s", step, in->cid,
             (long long)code, log[0] ? "; its last output: " : "", log);
}

/* ---------- readiness ---------- */

static int socket_accepts(const char *path)
{
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    snprintf(sun.sun_path, sizeof sun.sun_path, "%s", path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    int ok = connect(fd, (struct sockaddr *)&sun, sizeof sun) == 0;
    close(fd);
    return ok;
}

/* Waits until cond(in) holds, the container exits, or the deadline passes. */
static tk_status wait_for(docker_rt *r, docker_inst *in, int (*cond)(docker_inst *),
                          const char *step, char *err, size_t errlen)
{
    int64_t t0 = tk_mono_ms();
    long us = 500;
    int64_t next_inspect = t0 + 1000;
    for (;;) {
        if (cond(in))
            return TK_OK;
        int64_t now = tk_mono_ms();
        int gone = process_exited(in);
        if (!gone && in->pidfd < 0 && now >= next_inspect) {
            char state[32], e[256];
            if (watch_process(r, in, state, sizeof state, e, sizeof e) == TK_OK &&
                strcmp(state, "running") != 0)
                gone = 1;
            next_inspect = now + 500;
        }
        if (gone) {
            if (cond(in))
                return TK_OK;
            exited_error(r, in, step, err, errlen);
            return TK_ERROR;
        }
        if (now - t0 > DK_READY_MS) {
            snprintf(err, errlen, "%s: the container %.12s was not ready within %d ms", step,
                     in->cid, DK_READY_MS);
            return TK_ETIMEOUT;
        }
        sleep_us(us);
        if (us < 5000)
            us += 250;
    }
}

static int execd_listening(docker_inst *in)
{
    return socket_accepts(in->base.sock);
}

/* The init has opened the FIFO for reading: it waits for the claim. */
static int init_waiting(docker_inst *in)
{
    if (in->fifo_fd >= 0)
        return 1;
    char p[PATH_MAX + 16];
    snprintf(p, sizeof p, "%s/" SBX_DOCKER_SPEC_FIFO, in->run);
    in->fifo_fd = open(p, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    return in->fifo_fd >= 0;
}

/* execd listens: hand the folder back to root and drop the env file. */
static tk_status lock_run_dir(docker_inst *in, char *err, size_t errlen)
{
    char p[PATH_MAX + 16];
    if (chown(in->run, 0, 0) != 0 || chmod(in->run, 0700) != 0) {
        snprintf(err, errlen, "ready: lock %s: %s", in->run, strerror(errno));
        return TK_ERROR;
    }
    snprintf(p, sizeof p, "%s/" SBX_DOCKER_SPEC_ENVFILE, in->run);
    unlink(p);
    snprintf(p, sizeof p, "%s/" SBX_DOCKER_SPEC_FIFO, in->run);
    unlink(p);
    return TK_OK;
}

/* run/env (execd's settings, the request's env and entrypoint) and, with an
 * entrypoint, the FIFO run/entry its child waits on. */
static tk_status write_request(docker_inst *in, const sbx_spec *spec, char *err, size_t errlen)
{
    char p[PATH_MAX + 16];
    if (spec->entrypoint && spec->entrypoint[0]) {
        /* the init opens it read-write (so it does not wait for a writer) */
        snprintf(p, sizeof p, "%s/" SBX_DOCKER_SPEC_ENTRY, in->run);
        if (mkfifo(p, 0600) != 0 || chown(p, SBX_DOCKER_SPEC_UID, SBX_DOCKER_SPEC_UID) != 0) {
            snprintf(err, errlen, "dir: mkfifo %s: %s", p, strerror(errno));
            return TK_ERROR;
        }
    }
    snprintf(p, sizeof p, "%s/" SBX_DOCKER_SPEC_ENVFILE, in->run);
    char *env = sbx_docker_spec_env_file(spec->execd_token, spec->env, spec->entrypoint);
    int rc = write_file(p, env, 0644, err, errlen);
    free(env);
    return rc == 0 ? TK_OK : TK_ERROR;
}

/* Tells the entrypoint's child to run it (once run/ is closed to the sandbox).
 * A failure is logged, not fatal: nor does the native runtime fail a sandbox
 * whose entrypoint fails. */
static void start_entrypoint(docker_inst *in, const sbx_spec *spec)
{
    if (!spec->entrypoint || !spec->entrypoint[0])
        return;
    char p[PATH_MAX + 16];
    snprintf(p, sizeof p, "%s/" SBX_DOCKER_SPEC_ENTRY, in->run);
    int fd = -1;
    for (int i = 0; i < 2000 && fd < 0; i++) {
        fd = open(p, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0 && errno != ENXIO)
            break;
        if (fd < 0)
            sleep_us(1000);
    }
    ssize_t w = fd >= 0 ? write(fd, "go\n", 3) : -1;
    if (w != 3)
        tk_warn("docker", "msg=\"cannot start the entrypoint\" id=%s step=%s error=\"%s\"",
                in->base.id, fd < 0 ? "open run/entry" : "write run/entry", strerror(errno));
    if (fd >= 0)
        close(fd);
    unlink(p);
}

/* ---------- the ops ---------- */

static void instance_paths(docker_rt *r, docker_inst *in, const char *id)
{
    snprintf(in->base.id, sizeof in->base.id, "%s", id);
    snprintf(in->dir, sizeof in->dir, "%s/sandboxes/%s", r->state_dir, id);
    if (r->short_dir[0])
        snprintf(in->run, sizeof in->run, "%s/%s", r->short_dir, id);
    else
        snprintf(in->run, sizeof in->run, "%s/run", in->dir);
    snprintf(in->base.sock, sizeof in->base.sock, "%.*s/" SBX_DOCKER_SPEC_SOCK,
             (int)(sizeof in->base.sock - sizeof("/" SBX_DOCKER_SPEC_SOCK)), in->run);
    snprintf(in->vol, sizeof in->vol, "tusko-ws-%s", id);
}

static docker_inst *instance_new(docker_rt *r, const char *id)
{
    docker_inst *in = tk_calloc(1, sizeof *in);
    in->pidfd = -1;
    in->fifo_fd = -1;
    instance_paths(r, in, id);
    return in;
}

static void instance_free(docker_inst *in)
{
    if (in->egress) /* forgotten, not torn down: its way out goes all the same */
        tk_egress_remove_listener(in->eg, in->egress);
    if (in->pidfd >= 0)
        close(in->pidfd);
    if (in->fifo_fd >= 0)
        close(in->fifo_fd);
    free(in);
}

/* SANDBOX_NETWORK=proxy: the proxy listener in the container's network
 * namespace (NetworkMode none: only lo), made through its process, so only when
 * this service sees the engine's processes (the same pid namespace); otherwise
 * the container keeps no network at all, which fails closed. */
static tk_status attach_egress(docker_rt *r, docker_inst *in, char *err, size_t errlen)
{
    if (!r->egress)
        return TK_OK;
    if (in->pidfd < 0) {
        tk_warn("docker",
                "msg=\"no egress proxy for this sandbox: its process is not in this service's pid "
                "namespace; it has no network\" id=%s",
                in->base.id);
        return TK_OK;
    }
    in->eg = r->egress;
    in->egress = sbx_egress_attach(r->egress, &r->egress_caps, in->pid, in->base.id, err, errlen);
    return in->egress ? TK_OK : TK_ERROR;
}

/* Removes the container, its volume and its run folder; quiet about what is gone. */
static void teardown(docker_rt *r, docker_inst *in)
{
    char path[200], err[768];
    if (in->fifo_fd >= 0) {
        close(in->fifo_fd);
        in->fifo_fd = -1;
    }
    if (in->egress) {
        tk_egress_remove_listener(in->eg, in->egress);
        in->egress = NULL;
    }
    snprintf(path, sizeof path, "/containers/%s?force=1&v=1", in->cid[0] ? in->cid : "");
    if (!in->cid[0])
        snprintf(path, sizeof path, "/containers/tusko-%s?force=1&v=1", in->base.id);
    if (dk(r, "remove the container", "DELETE", path, NULL, OK_GONE, NULL, err, sizeof err) !=
        TK_OK)
        tk_error("docker", "msg=\"cannot remove a sandbox's container\" id=%s error=\"%s\"",
                 in->base.id, err);
    snprintf(path, sizeof path, "/volumes/%s?force=1", in->vol);
    for (int i = 0;; i++) {
        long status;
        json_t *j = NULL;
        tk_status st =
            sbx_docker_call(r->dk, "DELETE", path, NULL, DK_CALL_MS, &status, &j, err, sizeof err);
        if (st == TK_OK && status == 409 && i < 50) {
            /* still in use while the engine finishes removing the container */
            json_decref(j);
            sleep_us(20000);
            continue;
        }
        if (st != TK_OK || (status != 204 && status != 404))
            tk_error("docker",
                     "msg=\"cannot remove a sandbox's volume\" id=%s volume=%s "
                     "status=%ld error=\"%s\"",
                     in->base.id, in->vol, status, st != TK_OK ? err : sbx_docker_message(j, "?"));
        json_decref(j);
        break;
    }
    remove_run_dir(in->run);
    in->exited = 1;
}

static int api_at_least(const char *api, int major, int minor);

/* A named volume (sandboxd/volume.h) as a Docker volume: created when missing
 * (labelled with its owner and claim, not with the service: the sweep of a
 * sandbox's own volumes never takes it); an engine on this host shows its
 * folder, which is given to the sandbox user when still root's and empty, and
 * where a subPath is made (never through a symlink). */
static tk_status named_volume(docker_rt *r, const sbx_volumes *vs, sbx_volume *v, struct stat *id,
                              char *err, size_t errlen)
{
    char name[160];
    sbx_volume_docker_name(vs->owner, v->claim, name, sizeof name);
    json_t *j = NULL;
    json_t *body = tk_json_obj("Name", json_string(name), "Labels",
                               tk_json_obj("io.tusko.volume.owner", json_string(vs->owner),
                                           "io.tusko.volume.claim", json_string(v->claim), NULL),
                               NULL);
    if (dk(r, "volume", "POST", "/volumes/create", body, OK_201, &j, err, errlen) != TK_OK)
        return TK_ERROR;
    const char *mp = tk_json_str(j, "Mountpoint");
    char mp_copy[PATH_MAX];
    snprintf(mp_copy, sizeof mp_copy, "%s", mp ? mp : "");
    int fd = mp ? open(mp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
    json_decref(j);
    if (fd < 0) {
        if (v->sub[0]) {
            snprintf(err, errlen,
                     "volume %s: the engine's folder of %s is not on this host, so "
                     "subPath cannot be made",
                     v->name, name);
            return TK_ERROR;
        }
        return TK_OK; /* a remote engine: the volume as the engine made it */
    }
    struct stat st;
    int dfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    int empty = 1;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            empty = 0;
    if (d)
        closedir(d);
    else if (dfd >= 0)
        close(dfd);
    if (fstat(fd, &st) == 0 && st.st_uid == 0 && empty)
        if (fchownat(fd, "", SBX_DOCKER_SPEC_UID, SBX_DOCKER_SPEC_UID, AT_EMPTY_PATH) != 0)
            tk_warn("docker", "msg=\"cannot give a named volume to the sandbox user\" volume=%s",
                    name);
    if (v->sub[0]) {
        int s = sbx_volume_mkdirs(fd, v->sub, SBX_DOCKER_SPEC_UID, err, errlen);
        if (s < 0) {
            close(fd);
            return TK_ERROR;
        }
        /* engines before API 1.45 have no VolumeOptions.Subpath: the folder is
         * bound instead, and checked once the container runs (docker_start) */
        if (!api_at_least(r->api, 1, 45)) {
            if (fstat(s, id) != 0 || (size_t)snprintf(v->host, sizeof v->host, "%s/%s", mp_copy,
                                                      v->sub) >= sizeof v->host) {
                close(s);
                close(fd);
                snprintf(err, errlen, "volume %s: cannot bind its subPath", v->name);
                return TK_ERROR;
            }
        }
        close(s);
    }
    close(fd);
    return TK_OK;
}

static tk_status docker_delete_volume(sbx_runtime *rt, const char *owner, const char *claim,
                                      char *err, size_t errlen)
{
    char name[160], path[256];
    sbx_volume_docker_name(owner, claim, name, sizeof name);
    snprintf(path, sizeof path, "/volumes/%s", name);
    long status = 0;
    json_t *j = NULL;
    tk_status st =
        sbx_docker_call(RT(rt)->dk, "DELETE", path, NULL, DK_CALL_MS, &status, &j, err, errlen);
    json_decref(j);
    if (st != TK_OK)
        return st;
    if (status == 204)
        return TK_OK;
    snprintf(err, errlen, "the engine answered %ld for volume %s", status, name);
    return status == 404 ? TK_ENOENT : status == 409 ? TK_EDENIED : TK_ERROR;
}

static tk_status docker_start(sbx_runtime *rt, const sbx_spec *spec, sbx_instance **out, char *err,
                              size_t errlen)
{
    docker_rt *r = RT(rt);
    *out = NULL;
    docker_inst *in = instance_new(r, spec->id);
    char path[256], fifo[PATH_MAX + 16];
    json_t *j = NULL;
    sbx_spec sp2 = *spec;
    sbx_volumes *vols = NULL;
    struct stat vol_ids[SBX_VOLUMES_MAX];

    /* dir */
    if (mkdir(in->dir, 0700) < 0 && errno != EEXIST) {
        snprintf(err, errlen, "dir: mkdir %s: %s", in->dir, strerror(errno));
        goto fail;
    }
    if ((mkdir(in->run, 0700) < 0 && errno != EEXIST) ||
        chown(in->run, SBX_DOCKER_SPEC_UID, SBX_DOCKER_SPEC_UID) != 0 ||
        chmod(in->run, 0700) != 0) {
        snprintf(err, errlen, "dir: %s: %s", in->run, strerror(errno));
        goto fail;
    }
    if (spec->pooled) {
        snprintf(fifo, sizeof fifo, "%s/" SBX_DOCKER_SPEC_FIFO, in->run);
        if (mkfifo(fifo, 0600) != 0 || chmod(fifo, 0644) != 0) {
            snprintf(err, errlen, "dir: mkfifo %s: %s", fifo, strerror(errno));
            goto fail;
        }
    } else if (write_request(in, spec, err, errlen) != TK_OK) {
        goto fail;
    }
    /* named volumes: made when missing, the folder (and subPath) the sandbox user's */
    if (spec->volumes) {
        vols = tk_malloc(sizeof *vols);
        memcpy(vols, spec->volumes, sizeof *vols);
        sp2.volumes = vols;
        spec = &sp2;
    }
    for (size_t i = 0; vols && i < vols->n; i++)
        if (vols->v[i].named &&
            named_volume(r, vols, &vols->v[i], &vol_ids[i], err, errlen) != TK_OK)
            goto fail;
    /* volume */
    if (dk(r, "volume", "POST", "/volumes/create",
           sbx_docker_spec_volume(in->vol, r->tag, in->base.id, r->ws_bytes), OK_201, NULL, err,
           errlen) != TK_OK)
        goto fail;
    /* create */
    sbx_docker_spec c = {.image = r->image,
                         .service_tag = r->tag,
                         .execd_path = r->execd_path,
                         .run_dir = in->run,
                         .volume = in->vol,
                         .tmp_bytes = r->tmp_bytes,
                         .seccomp_json = r->seccomp,
                         .created_ms = tk_now_ms(),
                         .spec = spec,
                         .egress = r->egress != NULL};
    snprintf(path, sizeof path, "/containers/create?name=tusko-%s", in->base.id);
    if (dk(r, "create", "POST", path, sbx_docker_spec_container(&c), OK_201, &j, err, errlen) !=
        TK_OK)
        goto fail;
    snprintf(in->cid, sizeof in->cid, "%s", tk_json_str_or(j, "Id", ""));
    json_decref(j);
    j = NULL;
    if (!in->cid[0]) {
        snprintf(err, errlen, "create: the engine's answer has no container Id");
        goto fail;
    }
    /* start */
    snprintf(path, sizeof path, "/containers/%s/start", in->cid);
    if (dk(r, "start", "POST", path, NULL, OK_204, NULL, err, errlen) != TK_OK)
        goto fail;
    if (watch_process(r, in, NULL, 0, err, errlen) != TK_OK ||
        attach_egress(r, in, err, errlen) != TK_OK)
        goto fail;
    /* a subPath bound by its host path: what the container got must be the very
     * folder checked (a symlink swapped in meanwhile is caught here, before any
     * code of the user's runs) */
    for (size_t i = 0; vols && i < vols->n; i++) {
        if (!vols->v[i].named || !vols->v[i].host[0])
            continue;
        char in_root[PATH_MAX + 64];
        struct stat got;
        snprintf(in_root, sizeof in_root, "/proc/%d/root%s", (int)in->pid, vols->v[i].target);
        if (in->pid <= 0 || stat(in_root, &got) != 0 || got.st_dev != vol_ids[i].st_dev ||
            got.st_ino != vol_ids[i].st_ino) {
            snprintf(err, errlen, "volume %s: the mounted folder is not the subPath checked",
                     vols->v[i].name);
            goto fail;
        }
    }
    /* ready */
    if (spec->pooled) {
        if (wait_for(r, in, init_waiting, "ready", err, errlen) != TK_OK)
            goto fail;
    } else {
        if (wait_for(r, in, execd_listening, "ready", err, errlen) != TK_OK ||
            lock_run_dir(in, err, errlen) != TK_OK)
            goto fail;
        start_entrypoint(in, spec);
    }
    *out = &in->base;
    free(vols);
    return TK_OK;
fail:
    json_decref(j);
    free(vols);
    teardown(r, in);
    instance_free(in);
    return TK_ERROR;
}

static tk_status docker_claim(sbx_runtime *rt, sbx_instance *inst, const sbx_spec *spec, char *err,
                              size_t errlen)
{
    docker_inst *in = DI(inst);
    docker_rt *r = RT(rt);
    char path[200];
    if (in->fifo_fd < 0) {
        snprintf(err, errlen, "claim: the container %.12s is not waiting for a claim", in->cid);
        return TK_ERROR;
    }
    if (write_request(in, spec, err, errlen) != TK_OK)
        return TK_ERROR;
    /* go: execd starts while the engine applies the limits (nothing of the
     * request runs before both are done) */
    ssize_t w;
    do
        w = write(in->fifo_fd, "go\n", 3);
    while (w < 0 && errno == EINTR);
    int e = errno;
    close(in->fifo_fd);
    in->fifo_fd = -1;
    if (w != 3) {
        snprintf(err, errlen, "claim: write the FIFO: %s", w < 0 ? strerror(e) : "short write");
        return TK_ERROR;
    }
    snprintf(path, sizeof path, "/containers/%s/update", in->cid);
    if (dk(r, "claim: limits", "POST", path, sbx_docker_spec_limits(&spec->limits), OK_200, NULL,
           err, errlen) != TK_OK)
        return TK_ERROR;
    if (wait_for(r, in, execd_listening, "claim", err, errlen) != TK_OK ||
        lock_run_dir(in, err, errlen) != TK_OK)
        return TK_ERROR;
    start_entrypoint(in, spec);
    return TK_OK;
}

static tk_status pause_resume(docker_rt *r, docker_inst *in, int pause, char *err, size_t errlen)
{
    char path[200];
    snprintf(path, sizeof path, "/containers/%s/%s", in->cid, pause ? "pause" : "unpause");
    return dk(r, pause ? "pause" : "resume", "POST", path, NULL, OK_204, NULL, err, errlen);
}

static tk_status docker_pause(sbx_runtime *rt, sbx_instance *in, char *err, size_t errlen)
{
    return pause_resume(RT(rt), DI(in), 1, err, errlen);
}

static tk_status docker_resume(sbx_runtime *rt, sbx_instance *in, char *err, size_t errlen)
{
    return pause_resume(RT(rt), DI(in), 0, err, errlen);
}

static void docker_teardown(sbx_runtime *rt, sbx_instance *in)
{
    teardown(RT(rt), DI(in));
}

static void docker_release(sbx_instance *in)
{
    instance_free(DI(in));
}

static int docker_alive(sbx_runtime *rt, sbx_instance *inst)
{
    docker_inst *in = DI(inst);
    if (in->exited)
        return 0;
    if (in->pidfd >= 0) {
        if (process_exited(in)) {
            in->exited = 1;
            return 0;
        }
        return 1;
    }
    /* not our pid namespace: ask the engine, at most every 2 s */
    int64_t now = tk_mono_ms();
    if (now < in->next_check_ms)
        return 1;
    in->next_check_ms = now + 2000;
    char path[160], err[256];
    snprintf(path, sizeof path, "/containers/%s/json", in->cid);
    json_t *j = NULL;
    long status = 0;
    /* a short timeout: the reaper calls this with the service's lock held */
    tk_status st =
        sbx_docker_call(RT(rt)->dk, "GET", path, NULL, 2000, &status, &j, err, sizeof err);
    if (st == TK_OK && status == 404) {
        json_decref(j);
        in->exited = 1;
        return 0;
    }
    if (st != TK_OK || status != 200) {
        json_decref(j);
        return 1; /* the engine is busy or restarting: not a verdict */
    }
    const char *s = tk_json_str_or(json_object_get(j, "State"), "Status", "");
    int live = strcmp(s, "running") == 0 || strcmp(s, "paused") == 0;
    json_decref(j);
    if (!live)
        in->exited = 1;
    return live;
}

static json_t *docker_save(sbx_instance *inst)
{
    docker_inst *in = DI(inst);
    return tk_json_obj("container", json_string(in->cid), "pid", json_integer(in->pid), "socket",
                       json_string(in->base.sock), NULL);
}

/* The containers labelled with this service's tag (and id when given). */
static json_t *list_labelled(docker_rt *r, const char *id, char *err, size_t errlen)
{
    char l1[64], l2[96];
    snprintf(l1, sizeof l1, SBX_DOCKER_SPEC_LABEL_SERVICE "=%s", r->tag);
    snprintf(l2, sizeof l2, SBX_DOCKER_SPEC_LABEL_ID "=%s", id ? id : "");
    const char *labels[] = {l1, l2};
    char *f = sbx_docker_label_filter(labels, id ? 2 : 1);
    char *path = tk_asprintf("/containers/json?all=1&filters=%s", f);
    free(f);
    json_t *j = NULL;
    tk_status st = dk(r, "list containers", "GET", path, NULL, OK_200, &j, err, errlen);
    free(path);
    if (st != TK_OK)
        return NULL;
    if (!json_is_array(j)) {
        json_decref(j);
        snprintf(err, errlen, "list containers: the answer is not a list");
        return NULL;
    }
    return j;
}

static tk_status docker_attach(sbx_runtime *rt, const char *id, const json_t *saved, int paused,
                               sbx_instance **out, char *err, size_t errlen)
{
    docker_rt *r = RT(rt);
    *out = NULL;
    json_t *list = list_labelled(r, id, err, errlen);
    if (!list)
        return TK_ERROR;
    if (json_array_size(list) == 0) {
        snprintf(err, errlen, "attach: no container is labelled " SBX_DOCKER_SPEC_LABEL_ID "=%s",
                 id);
        json_decref(list);
        return TK_ENOENT;
    }
    json_t *c = json_array_get(list, 0);
    const char *state = tk_json_str_or(c, "State", "?");
    const char *saved_cid = tk_json_str(saved, "container");
    docker_inst *in = instance_new(r, id);
    snprintf(in->cid, sizeof in->cid, "%s", tk_json_str_or(c, "Id", ""));
    /* the socket where it was made (the state dir's length decides where) */
    const char *saved_sock = tk_json_str(saved, "socket");
    const char *slash = saved_sock ? strrchr(saved_sock, '/') : NULL;
    if (slash && strlen(saved_sock) < sizeof in->base.sock &&
        strcmp(slash, "/" SBX_DOCKER_SPEC_SOCK) == 0) {
        snprintf(in->base.sock, sizeof in->base.sock, "%s", saved_sock);
        snprintf(in->run, sizeof in->run, "%.*s", (int)(slash - saved_sock), saved_sock);
    }
    tk_status st = TK_OK;
    if (saved_cid && strcmp(saved_cid, in->cid) != 0)
        tk_warn("docker",
                "msg=\"the container labelled with a sandbox is not the one recorded; using the "
                "labelled one\" id=%s recorded=%.12s labelled=%.12s",
                id, saved_cid, in->cid);
    if (strcmp(state, "running") != 0 && strcmp(state, "paused") != 0) {
        snprintf(err, errlen, "attach: the container %.12s is %s", in->cid, state);
        st = TK_ENOENT;
    }
    int is_paused = strcmp(state, "paused") == 0;
    json_decref(list);
    struct stat sb;
    if (st == TK_OK && (lstat(in->base.sock, &sb) != 0 || !S_ISSOCK(sb.st_mode))) {
        snprintf(err, errlen, "attach: %s is gone", in->base.sock);
        st = TK_ENOENT;
    }
    if (st == TK_OK)
        st = watch_process(r, in, NULL, 0, err, errlen);
    char eerr[300];
    if (st == TK_OK && attach_egress(r, in, eerr, sizeof eerr) != TK_OK)
        tk_error("docker",
                 "msg=\"no egress for a sandbox found after a restart\" id=%s error=\"%s\"", id,
                 eerr);
    if (st == TK_OK && is_paused != paused) {
        char e2[256];
        if (pause_resume(r, in, paused, e2, sizeof e2) != TK_OK)
            tk_warn("docker", "msg=\"cannot restore the paused state\" id=%s error=\"%s\"", id, e2);
    }
    if (st != TK_OK) {
        instance_free(in);
        return st;
    }
    *out = &in->base;
    return TK_OK;
}

static int kept(const char *id, const char *const *keep, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (id && strcmp(id, keep[i]) == 0)
            return 1;
    return 0;
}

static void docker_sweep(sbx_runtime *rt, const char *const *keep, size_t n)
{
    docker_rt *r = RT(rt);
    char err[768];
    json_t *list = list_labelled(r, NULL, err, sizeof err);
    size_t i;
    json_t *c;
    json_array_foreach(list, i, c)
    {
        const char *id = tk_json_str(json_object_get(c, "Labels"), SBX_DOCKER_SPEC_LABEL_ID);
        if (kept(id, keep, n) || !id || !sbx_docker_spec_id_ok(id))
            continue;
        tk_info("docker", "msg=\"removing a leftover container\" id=%s container=%.12s", id,
                tk_json_str_or(c, "Id", "?"));
        docker_inst *in = instance_new(r, id);
        snprintf(in->cid, sizeof in->cid, "%s", tk_json_str_or(c, "Id", ""));
        teardown(r, in);
        instance_free(in);
    }
    json_decref(list);
    if (!list)
        tk_error("docker", "msg=\"cannot list leftover containers\" error=\"%s\"", err);
    /* volumes whose container was never made or is gone */
    char l1[64];
    snprintf(l1, sizeof l1, SBX_DOCKER_SPEC_LABEL_SERVICE "=%s", r->tag);
    const char *labels[] = {l1};
    char *f = sbx_docker_label_filter(labels, 1);
    char *path = tk_asprintf("/volumes?filters=%s", f);
    free(f);
    json_t *v = NULL;
    if (dk(r, "list volumes", "GET", path, NULL, OK_200, &v, err, sizeof err) == TK_OK) {
        json_array_foreach(json_object_get(v, "Volumes"), i, c)
        {
            const char *id = tk_json_str(json_object_get(c, "Labels"), SBX_DOCKER_SPEC_LABEL_ID);
            const char *name = tk_json_str(c, "Name");
            if (!id || !name || kept(id, keep, n) || !sbx_docker_spec_id_ok(id))
                continue;
            tk_info("docker", "msg=\"removing a leftover volume\" id=%s volume=%s", id, name);
            tk_buf vp;
            tk_buf_init(&vp, strlen(name) * 3 + 16); /* room for all of it */
            tk_buf_append_str(&vp, "/volumes/");
            tk_percent_append(&vp, name, NULL);
            tk_buf_append_str(&vp, "?force=1");
            if (dk(r, "remove a volume", "DELETE", tk_buf_cstr(&vp), NULL, OK_GONE, NULL, err,
                   sizeof err) != TK_OK)
                tk_error("docker", "msg=\"cannot remove a leftover volume\" error=\"%s\"", err);
            tk_buf_free(&vp);
        }
    } else {
        tk_error("docker", "msg=\"cannot list leftover volumes\" error=\"%s\"", err);
    }
    json_decref(v);
    free(path);
    /* run folders of sandboxes the service does not know */
    char sdir[PATH_MAX + 16];
    snprintf(sdir, sizeof sdir, "%s/sandboxes", r->state_dir);
    DIR *d = opendir(sdir);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.' || kept(de->d_name, keep, n))
            continue;
        docker_inst tmp;
        memset(&tmp, 0, sizeof tmp);
        instance_paths(r, &tmp, de->d_name);
        struct stat sb;
        if (lstat(tmp.run, &sb) == 0 && S_ISDIR(sb.st_mode))
            remove_run_dir(tmp.run);
        rmdir(tmp.dir); /* only when empty: a record is the service's business */
    }
    closedir(d);
    if (!r->short_dir[0] || !(d = opendir(r->short_dir)))
        return;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.' || kept(de->d_name, keep, n) || !sbx_docker_spec_id_ok(de->d_name))
            continue;
        char run[PATH_MAX];
        snprintf(run, sizeof run, "%s/%s", r->short_dir, de->d_name);
        remove_run_dir(run);
    }
    closedir(d);
}

static const char *docker_describe(sbx_runtime *rt)
{
    return RT(rt)->desc;
}

static void docker_free(sbx_runtime *rt)
{
    if (!rt)
        return;
    docker_rt *r = RT(rt);
    if (r->short_dir[0])
        rmdir(r->short_dir); /* only when no sandbox is left */
    sbx_docker_free(r->dk);
    free(r->seccomp);
    free(r);
    free(rt);
}

static const sbx_runtime_ops docker_ops = {
    .name = "docker",
    .start = docker_start,
    .claim = docker_claim,
    .pause = docker_pause,
    .resume = docker_resume,
    .teardown = docker_teardown,
    .release = docker_release,
    .alive = docker_alive,
    .save = docker_save,
    .attach = docker_attach,
    .sweep = docker_sweep,
    .describe = docker_describe,
    .free = docker_free,
    .delete_volume = docker_delete_volume,
};

/* ---------- open ---------- */

static unsigned long long fnv1a(const char *s)
{
    unsigned long long h = 1469598103934665603ULL;
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ULL;
    }
    return h;
}

static int api_at_least(const char *api, int major, int minor)
{
    int a = 0, b = 0;
    if (sscanf(api, "%d.%d", &a, &b) != 2)
        return 0;
    return a > major || (a == major && b >= minor);
}

static char *opt_host, *opt_image;

static tk_setting docker_settings[] = {
    {"DOCKER_HOST", "docker-host", TK_SET_STR, SBX_DOCKER_DEFAULT_HOST,
     "docker runtime: the engine's unix socket", .out = &opt_host},
    {"SANDBOX_DOCKER_IMAGE", "docker-image", TK_SET_STR, NULL,
     "docker runtime: an image to use as it is (default: import SANDBOX_IMAGE_DIR as "
     "tusko-sandbox:<recipe hash> when missing)",
     .out = &opt_image},
};

static sbx_runtime *docker_open(const sbx_runtime_config *cfg, char *err, size_t errlen)
{
    docker_rt *r = tk_calloc(1, sizeof *r);
    char e[768];
    snprintf(r->state_dir, sizeof r->state_dir, "%s", cfg->state_dir);
    r->ws_bytes = cfg->workspace_bytes;
    r->tmp_bytes = cfg->tmp_bytes;
    r->egress = cfg->egress;
    r->egress_caps = cfg->egress_caps;
    if (geteuid() != 0) {
        snprintf(err, errlen,
                 "the docker runtime needs root (it hands each sandbox's socket folder to the "
                 "sandbox user and back); run tusko-sandboxd as root");
        goto fail;
    }
    snprintf(r->tag, sizeof r->tag, "%08llx", fnv1a(r->state_dir) & 0xffffffffULL);
    /* <state>/sandboxes/<uuid>/run/execd.sock must fit a unix socket path */
    if (strlen(r->state_dir) + strlen("/sandboxes/") + 36 + strlen("/run/" SBX_DOCKER_SPEC_SOCK) >=
        sizeof(((struct sockaddr_un *)0)->sun_path)) {
        snprintf(r->short_dir, sizeof r->short_dir, "/run/tusko-sandboxd.%s", r->tag);
        if ((mkdir(r->short_dir, 0700) < 0 && errno != EEXIST) || chmod(r->short_dir, 0700) != 0) {
            snprintf(err, errlen,
                     "mkdir %s (for execd sockets: the state dir's path is too long for them): %s",
                     r->short_dir, strerror(errno));
            r->short_dir[0] = '\0';
            goto fail;
        }
    }
    if (!realpath(cfg->execd_path, r->execd_path) || access(r->execd_path, X_OK) != 0) {
        snprintf(err, errlen,
                 "SANDBOX_EXECD_PATH: no executable tusko-execd at %s (build it with make)",
                 cfg->execd_path);
        goto fail;
    }
    r->dk = sbx_docker_new(opt_host, err, errlen);
    if (!r->dk)
        goto fail;
    if (sbx_docker_version(r->dk, r->version, sizeof r->version, r->api, sizeof r->api, err,
                           errlen) != TK_OK)
        goto fail;
    if (!api_at_least(r->api, 1, 41)) {
        snprintf(err, errlen,
                 "the Docker engine at %s speaks API %s (engine %s); the docker runtime needs API "
                 "1.41 or later (Docker 20.10)",
                 sbx_docker_host(r->dk), r->api, r->version);
        goto fail;
    }
    json_t *prof = sbx_docker_spec_seccomp(err, errlen);
    if (!prof)
        goto fail;
    r->seccomp_rules = json_array_size(json_object_get(prof, "syscalls"));
    r->seccomp = tk_json_dumps(prof);
    json_decref(prof);
    if (sbx_docker_image_ensure(r->dk, opt_image, cfg->image_dir, r->image, sizeof r->image,
                                r->image_id, sizeof r->image_id, e, sizeof e) != TK_OK) {
        snprintf(err, errlen, "%s", e);
        goto fail;
    }
    snprintf(r->desc, sizeof r->desc,
             "docker engine=%s api=%s host=%s image=%s (%.19s) service_tag=%s network=%s "
             "seccomp=deny-list(%zu rules) caps=none readonly_root=1 user=%d execd=%s sockets=%s",
             r->version, r->api, sbx_docker_host(r->dk), r->image, r->image_id, r->tag,
             r->egress ? "proxy" : "none", r->seccomp_rules, SBX_DOCKER_SPEC_UID, r->execd_path,
             r->short_dir[0] ? r->short_dir : "<state>/sandboxes/<id>/run");
    sbx_runtime *rt = tk_calloc(1, sizeof *rt);
    rt->ops = &docker_ops;
    rt->impl = r;
    return rt;
fail:
    if (r->short_dir[0])
        rmdir(r->short_dir);
    sbx_docker_free(r->dk);
    free(r->seccomp);
    free(r);
    return NULL;
}

const sbx_runtime_kind sbx_runtime_docker = {
    .name = "docker",
    .settings = docker_settings,
    .nsettings = TK_ARRAY_LEN(docker_settings),
    .open = docker_open,
};
