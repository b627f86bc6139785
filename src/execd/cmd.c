#include "execd/cmd.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "execd/env.h"
#include "execd/events.h"
#include "execd/execd.h"
#include "execd/lines.h"
#include "execd/proc.h"
#include "execd/sink.h"
#include "lib/cond.h"
#include "lib/id.h"
#include "lib/json.h"
#include "lib/log.h"
#include "lib/tktime.h"

#define KEEP_FINISHED   256         /* finished commands kept for status queries */
#define READ_CHUNK      (64u << 10) /* bytes read from a pipe at once */
#define LINE_CAP        (64u << 10) /* longest stdout/stderr event text */
#define PARTIAL_IDLE_MS 200         /* a partial line is sent after this much quiet */
#define PING_MS         3000        /* upstream's keep-alive interval */
#define FINAL_DRAIN_MS  30000       /* how long the last events wait for a slow client */

typedef struct execd_cmd {
    char id[40];
    char *content;
    int background;
    int64_t started_ms, finished_ms, start_mono;
    /* guarded by g_lock */
    int running;
    int exit_code;
    char *error;
    int interrupt_req;
    int refs;
    execd_proc *proc;
    int ctl; /* eventfd: wakes the pump */
    /* background output ring */
    char *ring;
    size_t ring_cap;
    uint64_t total; /* bytes ever written */
    struct execd_cmd *next;
} execd_cmd;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cond = PTHREAD_COND_INITIALIZER;
static execd_cmd *g_cmds; /* newest first */
static size_t g_running, g_pumps, g_finished;
static int g_shutting;

static void cmd_unref_locked(execd_cmd *c)
{
    if (--c->refs > 0)
        return;
    free(c->content);
    free(c->error);
    free(c->ring);
    if (c->ctl >= 0)
        close(c->ctl);
    execd_proc_release(c->proc);
    free(c);
}

/* Drops the oldest finished commands beyond KEEP_FINISHED. */
static void trim_finished_locked(void)
{
    while (g_finished > KEEP_FINISHED) {
        execd_cmd **pp = &g_cmds, **last = NULL;
        for (; *pp; pp = &(*pp)->next)
            if (!(*pp)->running)
                last = pp;
        if (!last)
            return;
        execd_cmd *c = *last;
        *last = c->next;
        g_finished--;
        cmd_unref_locked(c);
    }
}

static execd_cmd *find_locked(const char *id)
{
    for (execd_cmd *c = g_cmds; c; c = c->next)
        if (strcmp(c->id, id) == 0)
            return c;
    return NULL;
}

static void ring_write(execd_cmd *c, const char *d, size_t n)
{
    if (!c->ring_cap)
        return;
    pthread_mutex_lock(&g_lock);
    if (n >= c->ring_cap) {
        d += n - c->ring_cap;
        c->total += n - c->ring_cap;
        n = c->ring_cap;
    }
    size_t pos = (size_t)(c->total % c->ring_cap);
    size_t first = TK_MIN(n, c->ring_cap - pos);
    memcpy(c->ring + pos, d, first);
    memcpy(c->ring, d + first, n - first);
    c->total += n;
    pthread_mutex_unlock(&g_lock);
}

static void wake(int fd)
{
    uint64_t one = 1;
    ssize_t w = write(fd, &one, sizeof one);
    (void)w;
}

/* ---------- the pump ---------- */

typedef struct {
    execd_cmd *c;
    int out, err;     /* pipe read ends, -1 once at EOF */
    execd_sink *sink; /* foreground only */
    execd_lines lo, le;
    int64_t timeout_ms;
    int64_t deadline, kill_at, next_ping;
    int timed_out, sent_term, client_gone;
} pump;

struct line_ctx {
    pump *p;
    const char *type;
};

static void on_line(void *ud, const char *text, size_t len)
{
    struct line_ctx *lc = ud;
    execd_ev_text(execd_sink_buf(lc->p->sink), lc->type, text, len);
}

/* Reads what one pipe has. Returns 0 at EOF (fd closed), 1 otherwise. */
static int pump_read(pump *p, int *fd, int is_err, size_t budget)
{
    char buf[READ_CHUNK];
    size_t got = 0;
    while (got < budget) {
        ssize_t n = read(*fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return 1; /* EAGAIN */
        if (n == 0) {
            close(*fd);
            *fd = -1;
            return 0;
        }
        got += (size_t)n;
        if (p->sink) {
            struct line_ctx lc = {p, is_err ? "stderr" : "stdout"};
            execd_lines_feed(is_err ? &p->le : &p->lo, buf, (size_t)n, on_line, &lc);
        } else {
            ring_write(p->c, buf, (size_t)n);
        }
        if (p->sink)
            break; /* one chunk, then let the client catch up */
    }
    return 1;
}

static void pump_flush_partials(pump *p, int force)
{
    if (!p->sink)
        return;
    int64_t now = tk_mono_ms();
    struct line_ctx lo = {p, "stdout"}, le = {p, "stderr"};
    int64_t d = execd_lines_due(&p->lo, PARTIAL_IDLE_MS);
    if (d >= 0 && (force || now >= d))
        execd_lines_flush(&p->lo, on_line, &lo);
    d = execd_lines_due(&p->le, PARTIAL_IDLE_MS);
    if (d >= 0 && (force || now >= d))
        execd_lines_flush(&p->le, on_line, &le);
}

static int64_t min_due(int64_t a, int64_t b)
{
    if (a < 0)
        return b;
    if (b < 0)
        return a;
    return a < b ? a : b;
}

static void finish(pump *p, int status)
{
    execd_cmd *c = p->c;
    char desc[128];
    execd_proc_describe(status, desc, sizeof desc);
    int code = execd_proc_exit_code(status);
    int ok = code == 0 && !p->timed_out;
    pthread_mutex_lock(&g_lock);
    c->running = 0;
    c->exit_code = code;
    c->finished_ms = tk_now_ms();
    if (!ok) {
        free(c->error);
        if (p->timed_out)
            c->error = tk_asprintf("%s (timed out after %lld ms)", desc, (long long)p->timeout_ms);
        else
            c->error = tk_strdup(desc);
    }
    g_running--;
    g_finished++;
    trim_finished_locked();
    pthread_mutex_unlock(&g_lock);
    tk_info("cmd", "msg=\"command finished\" id=%s status=\"%s\" timed_out=%d ms=%lld", c->id, desc,
            p->timed_out, (long long)(tk_mono_ms() - c->start_mono));
    if (!p->sink)
        return;
    tk_buf *b = execd_sink_buf(p->sink);
    if (ok) {
        execd_ev_complete(b, tk_mono_ms() - c->start_mono);
    } else {
        char ev[32];
        snprintf(ev, sizeof ev, "%d", code);
        json_t *tb = json_array();
        json_array_append_new(tb, json_string(desc));
        if (p->timed_out) {
            char t[96];
            snprintf(t, sizeof t, "timed out after %lld ms", (long long)p->timeout_ms);
            json_array_append_new(tb, json_string(t));
        }
        execd_ev_error(b, "CommandExecError", ev, tb);
    }
}

static void *pump_main(void *arg)
{
    pump *p = arg;
    execd_cmd *c = p->c;
    int64_t grace = execd_cfg.kill_grace_ms;
    if (p->sink) {
        execd_ev_text(execd_sink_buf(p->sink), "init", c->id, strlen(c->id));
        execd_sink_flush(p->sink);
    }
    int status = 0;
    for (;;) {
        int64_t now = tk_mono_ms();
        int blocked = p->sink && execd_sink_pending(p->sink) > 0;
        struct pollfd fds[5];
        int nf = 0, i_ctl, i_sink = -1, i_out = -1, i_err = -1;
        i_ctl = nf;
        fds[nf++] = (struct pollfd){.fd = c->ctl, .events = POLLIN};
        fds[nf++] = (struct pollfd){.fd = execd_proc_exit_fd(c->proc), .events = POLLIN};
        if (p->sink) {
            i_sink = nf;
            fds[nf++] = (struct pollfd){.fd = execd_sink_fd(p->sink), .events = POLLIN};
        }
        if (!blocked && p->out >= 0) {
            i_out = nf;
            fds[nf++] = (struct pollfd){.fd = p->out, .events = POLLIN};
        }
        if (!blocked && p->err >= 0) {
            i_err = nf;
            fds[nf++] = (struct pollfd){.fd = p->err, .events = POLLIN};
        }
        int64_t due = -1;
        if (!p->timed_out)
            due = min_due(due, p->deadline);
        due = min_due(due, p->kill_at);
        if (p->sink) {
            due = min_due(due, p->next_ping);
            if (!blocked) {
                due = min_due(due, execd_lines_due(&p->lo, PARTIAL_IDLE_MS));
                due = min_due(due, execd_lines_due(&p->le, PARTIAL_IDLE_MS));
            }
        }
        int wait = due < 0 ? -1 : (int)TK_MAX(0, TK_MIN(due - now, 60000));
        int n = poll(fds, (nfds_t)nf, wait);
        if (n < 0 && errno != EINTR) {
            tk_error("cmd", "msg=\"poll failed\" id=%s err=\"%s\"", c->id, strerror(errno));
            tk_sleep_ms(10);
        }
        now = tk_mono_ms();
        if (fds[i_ctl].revents & POLLIN) {
            uint64_t v;
            ssize_t r = read(c->ctl, &v, sizeof v);
            (void)r;
        }
        pthread_mutex_lock(&g_lock);
        int want_int = c->interrupt_req, shutting = g_shutting;
        pthread_mutex_unlock(&g_lock);
        if (want_int && !p->sent_term) {
            p->sent_term = 1;
            execd_proc_kill_group_on_exit(c->proc);
            execd_proc_kill_group(c->proc, SIGTERM);
            p->kill_at = now + grace;
            tk_info("cmd", "msg=\"interrupting\" id=%s", c->id);
        }
        if (shutting)
            execd_proc_kill_group(c->proc, SIGKILL);
        if (i_sink >= 0 && (fds[i_sink].revents & POLLIN))
            execd_sink_ack(p->sink);
        if (p->sink && !p->client_gone && execd_sink_gone(p->sink)) {
            /* As upstream: a foreground command ends with its request. */
            p->client_gone = 1;
            execd_proc_kill_group_on_exit(c->proc);
            execd_proc_kill_group(c->proc, SIGKILL);
            tk_info("cmd", "msg=\"client went away; command killed\" id=%s", c->id);
        }
        if (i_out >= 0 && (fds[i_out].revents & (POLLIN | POLLHUP | POLLERR)))
            pump_read(p, &p->out, 0, READ_CHUNK * 4);
        if (i_err >= 0 && (fds[i_err].revents & (POLLIN | POLLHUP | POLLERR)))
            pump_read(p, &p->err, 1, READ_CHUNK * 4);
        if (!p->timed_out && p->deadline >= 0 && now >= p->deadline) {
            p->timed_out = 1;
            execd_proc_kill_group_on_exit(c->proc);
            execd_proc_kill_group(c->proc, SIGKILL);
            tk_info("cmd", "msg=\"command timed out; killed\" id=%s timeout_ms=%lld", c->id,
                    (long long)p->timeout_ms);
        }
        if (p->kill_at >= 0 && now >= p->kill_at) {
            execd_proc_kill_group(c->proc, SIGKILL);
            p->kill_at = -1;
        }
        if (p->sink) {
            if (!blocked)
                pump_flush_partials(p, 0);
            if (now >= p->next_ping) {
                execd_ev_text(execd_sink_buf(p->sink), "ping", "pong", 4);
                p->next_ping = now + PING_MS;
            }
            execd_sink_flush(p->sink);
        }
        if (execd_proc_status(c->proc, &status))
            break;
    }
    /* The leader is gone: take what its pipes still hold (descendants may keep
     * them open; take only what is there now). */
    if (p->out >= 0)
        pump_read(p, &p->out, 0, 1u << 20);
    if (p->err >= 0)
        pump_read(p, &p->err, 1, 1u << 20);
    if (p->sink) {
        /* a foreground pump reads one chunk per call; loop for the rest */
        for (int k = 0; k < 16 && (p->out >= 0 || p->err >= 0); k++) {
            size_t before = execd_sink_pending(p->sink);
            if (p->out >= 0)
                pump_read(p, &p->out, 0, READ_CHUNK);
            if (p->err >= 0)
                pump_read(p, &p->err, 1, READ_CHUNK);
            if (execd_sink_pending(p->sink) == before)
                break;
        }
    }
    pump_flush_partials(p, 1);
    finish(p, status);
    /* Ended: what only a running command uses goes now. A finished command is
     * kept for status queries (KEEP_FINISHED of them), and held two
     * descriptors each until trimmed: hundreds of fds, and every doubling of
     * the descriptor table of a multi-threaded process waits for an RCU grace
     * period inside whichever open() crossed 64, 128, 256... */
    pthread_mutex_lock(&g_lock);
    execd_proc *proc = c->proc;
    int ctl = c->ctl;
    c->proc = NULL;
    c->ctl = -1;
    pthread_mutex_unlock(&g_lock);
    execd_proc_release(proc);
    if (ctl >= 0)
        close(ctl);
    if (p->sink) {
        pthread_mutex_lock(&g_lock);
        int shutting = g_shutting;
        pthread_mutex_unlock(&g_lock);
        execd_sink_drain(p->sink, shutting ? 1000 : FINAL_DRAIN_MS);
        execd_sink_end(p->sink);
        execd_lines_free(&p->lo);
        execd_lines_free(&p->le);
    }
    if (p->out >= 0)
        close(p->out);
    if (p->err >= 0)
        close(p->err);
    free(p);
    pthread_mutex_lock(&g_lock);
    g_pumps--;
    pthread_cond_broadcast(&g_cond);
    cmd_unref_locked(c);
    pthread_mutex_unlock(&g_lock);
    return NULL;
}

/* ---------- HTTP ---------- */

static const char *shell_path(void)
{
    return access("/bin/bash", X_OK) == 0 ? "/bin/bash" : "/bin/sh";
}

static int parse_id(json_t *j, const char *key, int *set, uint32_t *out, char *err, size_t errlen)
{
    json_t *v = json_object_get(j, key);
    *set = 0;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 4294967294LL) {
        snprintf(err, errlen, "%s must be an integer between 0 and 4294967294", key);
        return -1;
    }
    *set = 1;
    *out = (uint32_t)json_integer_value(v);
    return 0;
}

static void write_raw(tk_stream *s, tk_buf *b)
{
    if (b->len)
        tk_stream_write(s, b->data, b->len);
    tk_buf_reset(b);
}

static void start(tk_req *r, const char *command, size_t clen, int background, int64_t timeout,
                  int set_uid, uint32_t uid, int set_gid, uint32_t gid, char **envp, int cwd_fd);

void execd_cmd_run(tk_req *r, void *ud)
{
    json_t *j = tk_req_json(r, 0);
    if (!j)
        return;
    char err[600];
    if (!json_is_object(j)) {
        tk_respond_error(r, 400, "INVALID_REQUEST_BODY", "the body must be a JSON object");
        return;
    }
    size_t clen;
    const char *command = execd_json_cstr(json_object_get(j, "command"), &clen);
    if (!command || clen == 0) {
        tk_respond_error(r, 400, "INVALID_REQUEST_BODY",
                         "command is required: a non-empty string without NUL bytes");
        return;
    }
    json_t *bg = json_object_get(j, "background");
    if (bg && !json_is_boolean(bg) && !json_is_null(bg)) {
        tk_respond_error(r, 400, "INVALID_REQUEST_BODY", "background must be a boolean");
        return;
    }
    int background = json_is_true(bg);
    int64_t timeout = 0;
    json_t *tv = json_object_get(j, "timeout");
    if (tv && !json_is_null(tv)) {
        if (!json_is_integer(tv) || json_integer_value(tv) < 0) {
            tk_respond_error(r, 400, "INVALID_REQUEST_BODY",
                             "timeout must be a non-negative integer (milliseconds)");
            return;
        }
        timeout = json_integer_value(tv);
    }
    int set_uid, set_gid;
    uint32_t uid = 0, gid = 0;
    if (parse_id(j, "uid", &set_uid, &uid, err, sizeof err) ||
        parse_id(j, "gid", &set_gid, &gid, err, sizeof err)) {
        tk_respond_error(r, 400, "INVALID_REQUEST_BODY", "%s", err);
        return;
    }
    if (set_gid && !set_uid) {
        tk_respond_error(r, 400, "INVALID_REQUEST_BODY", "uid is required when gid is provided");
        return;
    }
    char **envp = NULL;
    if (execd_env_build(json_object_get(j, "envs"), &envp, err, sizeof err) != TK_OK) {
        tk_respond_error(r, 400, "INVALID_REQUEST_BODY", "%s", err);
        return;
    }
    int cwd_fd = -1;
    int http = execd_workdir_open(json_object_get(j, "cwd"), &cwd_fd, 0, err, sizeof err);
    if (http) {
        execd_env_free(envp);
        tk_respond_error(r, http, "INVALID_REQUEST_BODY", "%s", err);
        return;
    }
    start(r, command, clen, background, timeout, set_uid, uid, set_gid, gid, envp, cwd_fd);
}

void execd_cmd_run_code(tk_req *r, const char *command, size_t len)
{
    char **envp = NULL;
    char err[256];
    int cwd_fd = -1;
    if (execd_env_build(NULL, &envp, err, sizeof err) != TK_OK ||
        execd_workdir_open(NULL, &cwd_fd, 0, err, sizeof err) != 0) {
        execd_env_free(envp);
        tk_respond_error(r, 500, "RUNTIME_ERROR", "%s", err);
        return;
    }
    start(r, command, len, 0, 0, 0, 0, 0, 0, envp, cwd_fd);
}

/* Takes envp and cwd_fd. */
static void start(tk_req *r, const char *command, size_t clen, int background, int64_t timeout,
                  int set_uid, uint32_t uid, int set_gid, uint32_t gid, char **envp, int cwd_fd)
{
    char err[600];
    pthread_mutex_lock(&g_lock);
    if (g_shutting || (int64_t)g_running >= execd_cfg.max_commands) {
        size_t running = g_running;
        pthread_mutex_unlock(&g_lock);
        close(cwd_fd);
        execd_env_free(envp);
        tk_respond_error(r, 429, "TOO_MANY_COMMANDS",
                         "%zu commands are running, the limit (EXECD_MAX_COMMANDS) is %lld; wait "
                         "for one to finish or interrupt one",
                         running, (long long)execd_cfg.max_commands);
        return;
    }
    g_running++;
    pthread_mutex_unlock(&g_lock);

    execd_cmd *c = tk_calloc(1, sizeof *c);
    tk_token_hex(c->id, 16); /* upstream's form: a uuid without dashes */
    c->content = tk_strndup(command, clen);
    c->background = background;
    c->started_ms = tk_now_ms();
    c->start_mono = tk_mono_ms();
    c->running = 1;
    c->refs = 1; /* the registry's */
    c->ctl = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (background) {
        c->ring_cap = (size_t)execd_cfg.max_log;
        c->ring = tk_malloc(c->ring_cap ? c->ring_cap : 1);
    }

    int po[2] = {-1, -1}, pe[2] = {-1, -1};
    int ok = c->ctl >= 0 && pipe2(po, O_CLOEXEC) == 0 && (background || pipe2(pe, O_CLOEXEC) == 0);
    execd_proc *proc = NULL;
    if (!ok) {
        snprintf(err, sizeof err, "cannot create pipes: %s", strerror(errno));
    } else {
        char *argv[] = {"bash", "-c", c->content, NULL};
        execd_spawn_opts so = {
            .path = shell_path(),
            .argv = argv,
            .envp = envp,
            .cwd_fd = cwd_fd,
            .stdin_fd = -1,
            .stdout_fd = po[1],
            .stderr_fd = background ? po[1] : pe[1],
            .set_uid = set_uid,
            .set_gid = set_gid,
            .uid = uid,
            .gid = gid,
        };
        proc = execd_proc_spawn(&so, err, sizeof err);
    }
    close(cwd_fd);
    execd_env_free(envp);
    if (po[1] >= 0)
        close(po[1]);
    if (pe[1] >= 0)
        close(pe[1]);

    if (!proc) {
        /* As upstream: the stream opens with init, then the error. */
        if (po[0] >= 0)
            close(po[0]);
        if (pe[0] >= 0)
            close(pe[0]);
        pthread_mutex_lock(&g_lock);
        c->running = 0;
        c->exit_code = 127;
        c->error = tk_strdup(err);
        if (c->ctl >= 0)
            close(c->ctl);
        c->ctl = -1;
        c->finished_ms = tk_now_ms();
        c->next = g_cmds;
        g_cmds = c;
        g_running--;
        g_finished++;
        trim_finished_locked();
        pthread_mutex_unlock(&g_lock);
        tk_warn("cmd", "msg=\"command did not start\" id=%s err=\"%s\"", c->id, err);
        if (background) {
            tk_respond_error(r, 500, "RUNTIME_ERROR", "failed to start the command: %s", err);
            return;
        }
        tk_stream *s = tk_respond_sse(r);
        tk_buf b;
        tk_buf_init(&b, TK_CAP_MESSAGE);
        execd_ev_text(&b, "init", c->id, strlen(c->id));
        execd_ev_error(&b, "CommandExecError", err, NULL);
        write_raw(s, &b);
        tk_buf_free(&b);
        tk_stream_close(s);
        return;
    }
    c->proc = proc;
    fcntl(po[0], F_SETFL, O_NONBLOCK);
    if (pe[0] >= 0)
        fcntl(pe[0], F_SETFL, O_NONBLOCK);

    pump *p = tk_calloc(1, sizeof *p);
    p->c = c;
    p->out = po[0];
    p->err = pe[0];
    p->timeout_ms = timeout;
    p->deadline = timeout > 0 ? c->start_mono + timeout : -1;
    p->kill_at = -1;
    p->next_ping = c->start_mono + PING_MS;
    tk_stream *s = tk_respond_sse(r);
    if (!background) {
        p->sink = execd_sink_new(s);
        execd_lines_init(&p->lo, LINE_CAP);
        execd_lines_init(&p->le, LINE_CAP);
    }
    pthread_mutex_lock(&g_lock);
    c->next = g_cmds;
    g_cmds = c;
    c->refs++; /* the pump's */
    g_pumps++;
    pthread_mutex_unlock(&g_lock);
    tk_info("cmd", "msg=\"command started\" id=%s pid=%d background=%d bytes=%zu timeout_ms=%lld",
            c->id, (int)execd_proc_pid(proc), background, clen, (long long)timeout);

    pthread_t t;
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &a, pump_main, p) != 0)
        tk_panic(__FILE__, __LINE__, "pthread_create(pump)");
    pthread_attr_destroy(&a);

    if (background) {
        /* As upstream: init, then complete at once; the command goes on. */
        tk_buf b;
        tk_buf_init(&b, TK_CAP_SMALL);
        execd_ev_text(&b, "init", c->id, strlen(c->id));
        execd_ev_complete(&b, tk_mono_ms() - c->start_mono);
        write_raw(s, &b);
        tk_buf_free(&b);
        tk_stream_close(s);
    }
}

int execd_cmd_interrupt(const char *id)
{
    pthread_mutex_lock(&g_lock);
    execd_cmd *c = find_locked(id);
    int r = 0;
    if (c) {
        r = c->running ? 1 : -1;
        if (c->running) {
            c->interrupt_req = 1;
            wake(c->ctl);
        }
    }
    pthread_mutex_unlock(&g_lock);
    return r;
}

static json_t *status_json_locked(const execd_cmd *c)
{
    char t[40];
    json_t *o = json_object();
    json_object_set_new(o, "id", json_string(c->id));
    json_object_set_new(o, "content", execd_json_text(c->content, strlen(c->content)));
    json_object_set_new(o, "running", json_boolean(c->running));
    if (!c->running)
        json_object_set_new(o, "exit_code", json_integer(c->exit_code));
    if (c->error && *c->error)
        json_object_set_new(o, "error", json_string(c->error));
    tk_time_rfc3339(c->started_ms, t, sizeof t);
    json_object_set_new(o, "started_at", json_string(t));
    if (!c->running) {
        tk_time_rfc3339(c->finished_ms, t, sizeof t);
        json_object_set_new(o, "finished_at", json_string(t));
    }
    return o;
}

void execd_cmd_status(tk_req *r, void *ud)
{
    const char *id = tk_req_param(r, "id");
    pthread_mutex_lock(&g_lock);
    execd_cmd *c = id ? find_locked(id) : NULL;
    json_t *o = c ? status_json_locked(c) : NULL;
    pthread_mutex_unlock(&g_lock);
    if (!o) {
        tk_respond_error(r, 404, "COMMAND_NOT_FOUND", "command not found: %s", id ? id : "");
        return;
    }
    tk_respond_json(r, 200, o);
}

void execd_cmd_logs(tk_req *r, void *ud)
{
    const char *id = tk_req_param(r, "id");
    const char *cur = tk_req_query(r, "cursor");
    int64_t cursor = 0;
    if (cur && *cur && tk_parse_i64(cur, 0, INT64_MAX, &cursor) != TK_OK) {
        tk_respond_error(r, 400, "INVALID_REQUEST_BODY",
                         "cursor must be a non-negative integer (a byte offset)");
        return;
    }
    pthread_mutex_lock(&g_lock);
    execd_cmd *c = id ? find_locked(id) : NULL;
    if (!c) {
        pthread_mutex_unlock(&g_lock);
        tk_respond_error(r, 404, "COMMAND_NOT_FOUND", "command not found: %s", id ? id : "");
        return;
    }
    if (!c->background) {
        pthread_mutex_unlock(&g_lock);
        tk_respond_error(r, 400, "INVALID_REQUEST_BODY",
                         "command %s is not running in background; its output was streamed", id);
        return;
    }
    uint64_t kept = TK_MIN(c->total, (uint64_t)c->ring_cap);
    uint64_t head = c->total - kept;
    uint64_t from = (uint64_t)cursor < head ? head : (uint64_t)cursor;
    if (from > c->total)
        from = c->total;
    size_t n = (size_t)(c->total - from);
    char *out = tk_malloc(n + 1);
    for (size_t i = 0; i < n;) {
        size_t pos = (size_t)((from + i) % c->ring_cap);
        size_t k = TK_MIN(n - i, c->ring_cap - pos);
        memcpy(out + i, c->ring + pos, k);
        i += k;
    }
    uint64_t total = c->total;
    pthread_mutex_unlock(&g_lock);
    char v[32];
    snprintf(v, sizeof v, "%llu", (unsigned long long)total);
    tk_respond_header(r, "EXECD-COMMANDS-TAIL-CURSOR", v);
    snprintf(v, sizeof v, "%llu", (unsigned long long)head);
    tk_respond_header(r, "EXECD-COMMANDS-HEAD-CURSOR", v);
    if ((uint64_t)cursor < head) {
        snprintf(v, sizeof v, "%llu", (unsigned long long)(head - (uint64_t)cursor));
        tk_respond_header(r, "EXECD-COMMANDS-DROPPED-BYTES", v);
    }
    tk_respond(r, 200, "text/plain; charset=utf-8", out, n);
    free(out);
}

size_t execd_cmd_running(void)
{
    pthread_mutex_lock(&g_lock);
    size_t n = g_running;
    pthread_mutex_unlock(&g_lock);
    return n;
}

void execd_cmd_shutdown(int timeout_ms)
{
    pthread_mutex_lock(&g_lock);
    g_shutting = 1;
    for (execd_cmd *c = g_cmds; c; c = c->next)
        if (c->running && c->ctl >= 0)
            wake(c->ctl);
    int64_t until = tk_mono_ms() + timeout_ms;
    while (g_pumps > 0 && tk_cond_wait_until(&g_cond, &g_lock, until) == 0)
        ;
    /* Free what is left (finished commands); pumps still running keep theirs. */
    while (g_cmds && g_pumps == 0) {
        execd_cmd *c = g_cmds;
        g_cmds = c->next;
        cmd_unref_locked(c);
    }
    pthread_mutex_unlock(&g_lock);
}
