#include "execd/session.h"

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
#include "execd/fs.h"
#include "execd/lines.h"
#include "execd/proc.h"
#include "execd/sink.h"
#include "lib/cond.h"
#include "lib/id.h"
#include "lib/json.h"
#include "lib/log.h"
#include "lib/tktime.h"

#define READ_CHUNK      (64u << 10)
#define LINE_CAP        (64u << 10)
#define PARTIAL_IDLE_MS 200
#define PING_MS         3000
#define STATUS_MAX      (2u << 20) /* the fd 4 report: exit status and state snapshot */
#define INBAND_GRACE_MS 2000       /* after the status, how long to wait for the sentinels */
#define FINAL_DRAIN_MS  30000

/* Fixed text, the only thing execd ever writes to the shell's stdin. Helpers
 * are called through `builtin` so that user functions cannot shadow them. */
static const char BOOTSTRAP[] =
    "__tusko_pre() { IFS= builtin read -r -d '' __tusko_d <&3 && "
    "IFS= builtin read -r -d '' __tusko_cmd <&3 || builtin return 99; "
    "if builtin test -n \"$__tusko_d\"; then builtin cd -- \"$__tusko_d\" || "
    "{ builtin unset __tusko_d; builtin return 1; }; fi; builtin unset __tusko_d; }\n"
    "__tusko_post() { { __tusko_x=$-; builtin set +xv; } 2>/dev/null; "
    "builtin local __tusko_rc=$1 __tusko_s; builtin unset __tusko_cmd; "
    "IFS= builtin read -r -d '' __tusko_s <&3; "
    "{ builtin printf '%s\\0%s\\0' \"$__tusko_rc\" \"$PWD\"; builtin export -p; "
    "builtin printf '\\0'; builtin declare -f; builtin printf '\\0'; } >&4; "
    "builtin printf '%s\\n' \"$__tusko_s\"; builtin printf '%s\\n' \"$__tusko_s\" >&2; "
    "case $__tusko_x in *x*) builtin set -x ;; esac; builtin return \"$__tusko_rc\"; }\n";

/* One run: cwd, command and sentinel come NUL-terminated on fd 3. */
static const char RUN_LINE[] = "__tusko_pre && builtin eval -- \"$__tusko_cmd\" 3<&- 4>&- "
                               "</dev/null; __tusko_post \"$?\"\n";

/* After a restart: exported variables, functions and cwd on fd 3. */
static const char RESTORE_LINE[] =
    "{ IFS= builtin read -r -d '' __tusko_r <&3 && builtin eval -- \"$__tusko_r\"; } 2>/dev/null; "
    "{ IFS= builtin read -r -d '' __tusko_r <&3 && builtin eval -- \"$__tusko_r\"; } 2>/dev/null; "
    "{ IFS= builtin read -r -d '' __tusko_r <&3 && builtin cd -- \"$__tusko_r\"; } 2>/dev/null; "
    "builtin unset __tusko_r\n";

typedef struct run {
    execd_sink *sink;
    char *cmd;
    char *cwd; /* absolute, already confined; NULL: stay */
    char sent[48];
    size_t sentlen;
    int64_t timeout_ms, deadline, start_mono, next_ping, status_at;
    int started, got_out, got_err, got_status, rc;
    int killed; /* 1: interrupt, 2: timeout, 3: deleted */
    execd_lines lo, le;
    tk_buf co, ce; /* bytes not yet known not to start the sentinel */
} run;

typedef struct sess {
    char id[TK_UUID_LEN];
    int refs;
    int deleted;
    int interrupt_req;
    int broken; /* the shell could not be restarted */
    int wake;
    run *pending; /* handed over by a request, taken by the thread */
    /* thread-owned from here */
    run *cur;
    execd_proc *proc;
    int in_w, ctl_w, out_r, err_r, st_r;
    tk_buf tx_in, tx_ctl;
    tk_buf st;
    size_t st_nuls;
    int st_overflow;
    char *snap_env, *snap_funcs, *snap_pwd;
    int64_t started_ms;
    struct sess *next;
} sess;

static pthread_mutex_t s_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t s_cond = PTHREAD_COND_INITIALIZER;
static sess *s_head;
static size_t s_count, s_threads;
static int s_shutting;

static void wake(int fd)
{
    uint64_t one = 1;
    ssize_t w = write(fd, &one, sizeof one);
    (void)w;
}

static void closefd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

static void run_free(run *r)
{
    if (!r)
        return;
    free(r->cmd);
    free(r->cwd);
    execd_lines_free(&r->lo);
    execd_lines_free(&r->le);
    tk_buf_free(&r->co);
    tk_buf_free(&r->ce);
    free(r);
}

static void sess_unref_locked(sess *s)
{
    if (--s->refs > 0)
        return;
    run_free(s->pending);
    closefd(&s->wake);
    free(s);
}

static sess *find_locked(const char *id)
{
    for (sess *s = s_head; s; s = s->next)
        if (!s->deleted && strcmp(s->id, id) == 0)
            return s;
    return NULL;
}

/* ---------- the shell ---------- */

static void shell_close(sess *s)
{
    execd_proc_release(s->proc);
    s->proc = NULL;
    closefd(&s->in_w);
    closefd(&s->ctl_w);
    closefd(&s->out_r);
    closefd(&s->err_r);
    closefd(&s->st_r);
    tk_buf_reset(&s->tx_in);
    tk_buf_reset(&s->tx_ctl);
    tk_buf_reset(&s->st);
    s->st_nuls = 0;
    s->st_overflow = 0;
}

/* Starts bash in cwd_fd (or the workspace root), restoring the last snapshot
 * when there is one. */
static tk_status shell_start(sess *s, int cwd_fd, char *err, size_t errlen)
{
    int in[2] = {-1, -1}, ctl[2] = {-1, -1}, out[2] = {-1, -1}, er[2] = {-1, -1}, st[2] = {-1, -1};
    char **envp = NULL;
    tk_status rc = TK_ERROR;
    if (pipe2(in, O_CLOEXEC) || pipe2(ctl, O_CLOEXEC) || pipe2(out, O_CLOEXEC) ||
        pipe2(er, O_CLOEXEC) || pipe2(st, O_CLOEXEC)) {
        snprintf(err, errlen, "pipe: %s", strerror(errno));
        goto out;
    }
    if (execd_env_build(NULL, &envp, err, errlen) != TK_OK)
        goto out;
    char *argv[] = {"bash", "--noprofile", "--norc", NULL};
    int root = -1;
    if (cwd_fd < 0) {
        char why[256];
        if (tk_pathsafe_open(&execd_cfg.ws, "", O_PATH | O_DIRECTORY, 0, 0, &root, why,
                             sizeof why) != TK_OK) {
            snprintf(err, errlen, "%s", why);
            goto out;
        }
    }
    execd_spawn_opts so = {
        .path = access("/bin/bash", X_OK) == 0 ? "/bin/bash" : "/usr/bin/bash",
        .argv = argv,
        .envp = envp,
        .cwd_fd = cwd_fd >= 0 ? cwd_fd : root,
        .stdin_fd = in[0],
        .stdout_fd = out[1],
        .stderr_fd = er[1],
        .extra_fds = {ctl[0], st[1]},
        .nextra = 2,
    };
    s->proc = execd_proc_spawn(&so, err, errlen);
    if (root >= 0)
        close(root);
    if (!s->proc)
        goto out;
    s->in_w = in[1];
    s->ctl_w = ctl[1];
    s->out_r = out[0];
    s->err_r = er[0];
    s->st_r = st[0];
    in[1] = ctl[1] = out[0] = er[0] = st[0] = -1;
    fcntl(s->in_w, F_SETFL, O_NONBLOCK);
    fcntl(s->ctl_w, F_SETFL, O_NONBLOCK);
    fcntl(s->out_r, F_SETFL, O_NONBLOCK);
    fcntl(s->err_r, F_SETFL, O_NONBLOCK);
    fcntl(s->st_r, F_SETFL, O_NONBLOCK);
    tk_buf_append(&s->tx_in, BOOTSTRAP, sizeof BOOTSTRAP - 1);
    if (s->snap_pwd) {
        tk_buf_append(&s->tx_in, RESTORE_LINE, sizeof RESTORE_LINE - 1);
        tk_buf_append(&s->tx_ctl, s->snap_env, strlen(s->snap_env) + 1);
        tk_buf_append(&s->tx_ctl, s->snap_funcs, strlen(s->snap_funcs) + 1);
        tk_buf_append(&s->tx_ctl, s->snap_pwd, strlen(s->snap_pwd) + 1);
    }
    rc = TK_OK;
out:
    execd_env_free(envp);
    int *fds[] = {&in[0],  &in[1], &ctl[0], &ctl[1], &out[0],
                  &out[1], &er[0], &er[1],  &st[0],  &st[1]};
    for (size_t i = 0; i < TK_ARRAY_LEN(fds); i++)
        closefd(fds[i]);
    return rc;
}

/* ---------- a run ---------- */

struct line_ctx {
    run *r;
    const char *type;
};

static void on_line(void *ud, const char *text, size_t len)
{
    struct line_ctx *lc = ud;
    execd_ev_text(execd_sink_buf(lc->r->sink), lc->type, text, len);
}

/* Feeds output of one pipe during a run: everything before the sentinel is
 * output; the sentinel (and its newline) ends the run's output on that pipe. */
static void run_output(run *r, int is_err, const char *d, size_t n)
{
    int *got = is_err ? &r->got_err : &r->got_out;
    if (*got)
        return; /* after the sentinel: a background job's; dropped */
    tk_buf *c = is_err ? &r->ce : &r->co;
    execd_lines *l = is_err ? &r->le : &r->lo;
    struct line_ctx lc = {r, is_err ? "stderr" : "stdout"};
    while (n > 0) {
        size_t take = TK_MIN(n, (size_t)READ_CHUNK);
        tk_buf_append(c, d, take);
        d += take;
        n -= take;
        char *hit = memmem(c->data, c->len, r->sent, r->sentlen);
        if (hit) {
            size_t pre = (size_t)(hit - c->data);
            execd_lines_feed(l, c->data, pre, on_line, &lc);
            *got = 1;
            tk_buf_reset(c);
            return;
        }
        /* Keep only a tail that may still begin the sentinel. */
        size_t keep_from = c->len;
        size_t from = c->len > r->sentlen ? c->len - r->sentlen + 1 : 0;
        for (size_t i = from; i < c->len; i++) {
            if (memcmp(c->data + i, r->sent, c->len - i) == 0) {
                keep_from = i;
                break;
            }
        }
        execd_lines_feed(l, c->data, keep_from, on_line, &lc);
        tk_buf_consume(c, keep_from);
    }
}

static void run_begin(sess *s, run *r)
{
    r->started = 1;
    r->start_mono = tk_mono_ms();
    r->deadline = r->timeout_ms > 0 ? r->start_mono + r->timeout_ms : -1;
    r->next_ping = r->start_mono + PING_MS;
    char tok[33];
    tk_token_hex(tok, 16);
    r->sentlen = (size_t)snprintf(r->sent, sizeof r->sent, "__TUSKO_END_%s__", tok);
    execd_ev_text(execd_sink_buf(r->sink), "init", s->id, strlen(s->id));
    execd_sink_flush(r->sink);
    tk_buf_append(&s->tx_in, RUN_LINE, sizeof RUN_LINE - 1);
    const char *cwd = r->cwd ? r->cwd : "";
    tk_buf_append(&s->tx_ctl, cwd, strlen(cwd) + 1);
    tk_buf_append(&s->tx_ctl, r->cmd, strlen(r->cmd) + 1);
    tk_buf_append(&s->tx_ctl, r->sent, r->sentlen + 1);
}

/* Sends the last event and ends the response. status: the shell's wait status
 * when it died during the run, else -1. */
static void run_end(sess *s, run *r, int status)
{
    execd_lines_flush(&r->lo, on_line, &(struct line_ctx){r, "stdout"});
    execd_lines_flush(&r->le, on_line, &(struct line_ctx){r, "stderr"});
    tk_buf *b = execd_sink_buf(r->sink);
    int64_t ms = tk_mono_ms() - r->start_mono;
    if (status < 0 && r->rc == 0) {
        execd_ev_complete(b, ms);
    } else {
        char desc[160], ev[32];
        int code;
        if (status >= 0) {
            execd_proc_describe(status, desc, sizeof desc);
            code = execd_proc_exit_code(status);
        } else {
            code = r->rc;
            snprintf(desc, sizeof desc, "exit status %d", code);
        }
        snprintf(ev, sizeof ev, "%d", code);
        json_t *tb = json_array();
        json_array_append_new(tb, json_string(desc));
        if (r->killed == 2) {
            char t[96];
            snprintf(t, sizeof t, "timed out after %lld ms", (long long)r->timeout_ms);
            json_array_append_new(tb, json_string(t));
        } else if (r->killed == 1) {
            json_array_append_new(tb, json_string("interrupted"));
        } else if (r->killed == 3) {
            json_array_append_new(tb, json_string("the session was deleted"));
        }
        if (status >= 0 && r->killed != 3)
            json_array_append_new(
                tb, json_string("the session's shell ended and was restarted from its "
                                "last state (working directory, exported variables, "
                                "functions)"));
        execd_ev_error(b, "CommandExecError", ev, tb);
    }
    tk_info("session", "msg=\"run finished\" session=%s rc=%d killed=%d ms=%lld", s->id,
            status >= 0 ? execd_proc_exit_code(status) : r->rc, r->killed, (long long)ms);
    execd_sink_drain(r->sink, s_shutting ? 1000 : FINAL_DRAIN_MS);
    execd_sink_end(r->sink);
    r->sink = NULL;
}

/* The fd 4 report: rc \0 pwd \0 export -p \0 declare -f \0 */
static void status_input(sess *s, const char *d, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (!s->st_overflow && tk_buf_append_byte(&s->st, d[i]) != TK_OK)
            s->st_overflow = 1;
        if (d[i] == '\0' && ++s->st_nuls == 4) {
            const char *p = tk_buf_cstr(&s->st);
            int64_t rc = 1;
            if (tk_parse_i64(p, -1000000, 1000000, &rc) != TK_OK)
                rc = 1;
            if (!s->st_overflow) {
                const char *pwd = p + strlen(p) + 1;
                const char *env = pwd + strlen(pwd) + 1;
                const char *fn = env + strlen(env) + 1;
                free(s->snap_pwd);
                free(s->snap_env);
                free(s->snap_funcs);
                s->snap_pwd = tk_strdup(pwd);
                s->snap_env = tk_strdup(env);
                s->snap_funcs = tk_strdup(fn);
            }
            if (s->cur && s->cur->started && !s->cur->got_status) {
                s->cur->got_status = 1;
                s->cur->rc = (int)rc;
                s->cur->status_at = tk_mono_ms();
            }
            tk_buf_reset(&s->st);
            s->st_nuls = 0;
            s->st_overflow = 0;
        }
    }
}

static void drain_fd(sess *s, int *fd, int which)
{
    char buf[READ_CHUNK];
    for (int k = 0; k < 16; k++) {
        ssize_t n = read(*fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return;
        if (n == 0) {
            closefd(fd);
            return;
        }
        if (which == 2)
            status_input(s, buf, (size_t)n);
        else if (s->cur && s->cur->started)
            run_output(s->cur, which, buf, (size_t)n);
        if (s->cur && s->cur->sink && execd_sink_pending(s->cur->sink) > 0)
            return; /* let the client catch up */
    }
}

static void push(int *fd, tk_buf *b)
{
    while (*fd >= 0 && b->len > 0) {
        ssize_t n = write(*fd, b->data, b->len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        if (n < 0) {
            closefd(fd); /* the shell is gone; its exit is reported */
            tk_buf_reset(b);
            return;
        }
        tk_buf_consume(b, (size_t)n);
    }
}

static int64_t min_due(int64_t a, int64_t b)
{
    if (a < 0)
        return b;
    if (b < 0)
        return a;
    return a < b ? a : b;
}

static void *sess_main(void *arg)
{
    sess *s = arg;
    for (;;) {
        /* take a new run */
        pthread_mutex_lock(&s_lock);
        if (!s->cur && s->pending) {
            s->cur = s->pending;
            s->pending = NULL;
        }
        int deleted = s->deleted || s_shutting;
        int intr = s->interrupt_req;
        s->interrupt_req = 0;
        pthread_mutex_unlock(&s_lock);
        run *r = s->cur;
        if (r && !r->started && s->proc)
            run_begin(s, r);
        int64_t now = tk_mono_ms();
        if (r && r->started && !r->killed) {
            if (deleted)
                r->killed = 3;
            else if (intr)
                r->killed = 1;
            else if (r->deadline >= 0 && now >= r->deadline)
                r->killed = 2;
            if (r->killed) {
                tk_info("session", "msg=\"killing the session's shell\" session=%s reason=%s",
                        s->id,
                        r->killed == 1   ? "interrupt"
                        : r->killed == 2 ? "timeout"
                                         : "delete");
                execd_proc_kill_group_on_exit(s->proc);
                execd_proc_kill_group(s->proc, SIGKILL);
            }
        } else if (deleted && s->proc) {
            execd_proc_kill_group_on_exit(s->proc);
            execd_proc_kill_group(s->proc, SIGKILL);
        }
        if (r && r->started && r->got_status &&
            ((r->got_out && r->got_err) || now >= r->status_at + INBAND_GRACE_MS)) {
            /* the slot is free before the last event goes out (see kernel.c) */
            pthread_mutex_lock(&s_lock);
            s->cur = NULL;
            pthread_mutex_unlock(&s_lock);
            run_end(s, r, -1);
            run_free(r);
            continue;
        }
        if (r && r->sink && execd_sink_gone(r->sink) && !r->killed) {
            /* as for commands: the client has gone, so has its run */
            r->killed = 1;
            execd_proc_kill_group_on_exit(s->proc);
            execd_proc_kill_group(s->proc, SIGKILL);
        }

        struct pollfd fds[9];
        int nf = 0;
        int blocked = r && r->sink && execd_sink_pending(r->sink) > 0;
        int i_wake = nf;
        fds[nf++] = (struct pollfd){.fd = s->wake, .events = POLLIN};
        int i_exit = -1, i_out = -1, i_err = -1, i_st = -1, i_in = -1, i_ctl = -1, i_sink = -1;
        if (s->proc) {
            i_exit = nf;
            fds[nf++] = (struct pollfd){.fd = execd_proc_exit_fd(s->proc), .events = POLLIN};
        }
        if (!blocked && s->out_r >= 0) {
            i_out = nf;
            fds[nf++] = (struct pollfd){.fd = s->out_r, .events = POLLIN};
        }
        if (!blocked && s->err_r >= 0) {
            i_err = nf;
            fds[nf++] = (struct pollfd){.fd = s->err_r, .events = POLLIN};
        }
        if (s->st_r >= 0) {
            i_st = nf;
            fds[nf++] = (struct pollfd){.fd = s->st_r, .events = POLLIN};
        }
        if (s->in_w >= 0 && s->tx_in.len) {
            i_in = nf;
            fds[nf++] = (struct pollfd){.fd = s->in_w, .events = POLLOUT};
        }
        if (s->ctl_w >= 0 && s->tx_ctl.len) {
            i_ctl = nf;
            fds[nf++] = (struct pollfd){.fd = s->ctl_w, .events = POLLOUT};
        }
        if (r && r->sink) {
            i_sink = nf;
            fds[nf++] = (struct pollfd){.fd = execd_sink_fd(r->sink), .events = POLLIN};
        }
        int64_t due = -1;
        if (r && r->started) {
            if (!r->killed)
                due = min_due(due, r->deadline);
            due = min_due(due, r->next_ping);
            if (r->got_status)
                due = min_due(due, r->status_at + INBAND_GRACE_MS);
            if (!blocked) {
                due = min_due(due, execd_lines_due(&r->lo, PARTIAL_IDLE_MS));
                due = min_due(due, execd_lines_due(&r->le, PARTIAL_IDLE_MS));
            }
        }
        int wait = due < 0 ? 1000 : (int)TK_MAX(0, TK_MIN(due - now, 1000));
        if (poll(fds, (nfds_t)nf, wait) < 0 && errno != EINTR)
            tk_sleep_ms(10);
        if (fds[i_wake].revents & POLLIN) {
            uint64_t v;
            ssize_t rd = read(s->wake, &v, sizeof v);
            (void)rd;
        }
        if (i_sink >= 0 && (fds[i_sink].revents & POLLIN))
            execd_sink_ack(r->sink);
        if (i_in >= 0 && fds[i_in].revents)
            push(&s->in_w, &s->tx_in);
        if (i_ctl >= 0 && fds[i_ctl].revents)
            push(&s->ctl_w, &s->tx_ctl);
        if (i_out >= 0 && fds[i_out].revents)
            drain_fd(s, &s->out_r, 0);
        if (i_err >= 0 && fds[i_err].revents)
            drain_fd(s, &s->err_r, 1);
        if (i_st >= 0 && fds[i_st].revents)
            drain_fd(s, &s->st_r, 2);
        if (r && r->started && r->sink) {
            now = tk_mono_ms();
            if (!blocked) {
                struct line_ctx lo = {r, "stdout"}, le = {r, "stderr"};
                int64_t d = execd_lines_due(&r->lo, PARTIAL_IDLE_MS);
                if (d >= 0 && now >= d)
                    execd_lines_flush(&r->lo, on_line, &lo);
                d = execd_lines_due(&r->le, PARTIAL_IDLE_MS);
                if (d >= 0 && now >= d)
                    execd_lines_flush(&r->le, on_line, &le);
            }
            if (now >= r->next_ping) {
                execd_ev_text(execd_sink_buf(r->sink), "ping", "pong", 4);
                r->next_ping = now + PING_MS;
            }
            execd_sink_flush(r->sink);
        }
        int status;
        if (s->proc && i_exit >= 0 && execd_proc_status(s->proc, &status)) {
            /* The shell ended: finish the run, then start a new shell (unless
             * the session is going away). */
            if (s->out_r >= 0)
                drain_fd(s, &s->out_r, 0);
            if (s->err_r >= 0)
                drain_fd(s, &s->err_r, 1);
            if (s->st_r >= 0)
                drain_fd(s, &s->st_r, 2);
            if (r && r->started) {
                pthread_mutex_lock(&s_lock);
                s->cur = NULL;
                pthread_mutex_unlock(&s_lock);
                if (r->got_status && !r->killed)
                    run_end(s, r, -1);
                else
                    run_end(s, r, status);
                run_free(r);
            }
            shell_close(s);
            pthread_mutex_lock(&s_lock);
            deleted = s->deleted || s_shutting;
            pthread_mutex_unlock(&s_lock);
            if (deleted)
                break;
            char err[512];
            if (shell_start(s, -1, err, sizeof err) != TK_OK) {
                tk_error("session", "msg=\"cannot restart the shell\" session=%s err=\"%s\"", s->id,
                         err);
                pthread_mutex_lock(&s_lock);
                s->broken = 1;
                pthread_mutex_unlock(&s_lock);
                break;
            }
            tk_info("session", "msg=\"shell restarted\" session=%s pid=%d", s->id,
                    (int)execd_proc_pid(s->proc));
        }
    }
    /* Going away: end any run still waiting, free the shell's state. */
    if (s->proc) {
        execd_proc_kill_group(s->proc, SIGKILL);
        shell_close(s);
    }
    pthread_mutex_lock(&s_lock);
    run *rs[2] = {s->cur, s->pending};
    s->cur = s->pending = NULL;
    pthread_mutex_unlock(&s_lock);
    for (int i = 0; i < 2; i++) {
        run *x = rs[i];
        if (!x)
            continue;
        if (x->sink) {
            if (!x->started) {
                x->start_mono = tk_mono_ms();
                execd_ev_text(execd_sink_buf(x->sink), "init", s->id, strlen(s->id));
            }
            x->killed = 3;
            run_end(s, x, 9);
        }
        run_free(x);
    }
    tk_buf_free(&s->tx_in);
    tk_buf_free(&s->tx_ctl);
    tk_buf_free(&s->st);
    free(s->snap_env);
    free(s->snap_funcs);
    free(s->snap_pwd);
    pthread_mutex_lock(&s_lock);
    s_threads--;
    pthread_cond_broadcast(&s_cond);
    sess_unref_locked(s);
    pthread_mutex_unlock(&s_lock);
    return NULL;
}

/* ---------- HTTP ---------- */

void execd_session_create(tk_req *r, void *ud)
{
    json_t *j = tk_req_json(r, 1);
    if (!j && tk_req_responded(r))
        return;
    if (j && !json_is_object(j)) {
        tk_respond_error(r, 400, "INVALID_REQUEST_BODY", "the body must be a JSON object");
        return;
    }
    char err[600];
    int cwd_fd = -1;
    json_t *cwd = j ? json_object_get(j, "cwd") : NULL;
    int http = execd_workdir_open(cwd, &cwd_fd, 1, err, sizeof err);
    if (http) {
        tk_respond_error(r, http, "INVALID_REQUEST_BODY", "%s", err);
        return;
    }
    pthread_mutex_lock(&s_lock);
    if (s_shutting || (int64_t)s_count >= execd_cfg.max_sessions) {
        size_t n = s_count;
        pthread_mutex_unlock(&s_lock);
        close(cwd_fd);
        tk_respond_error(r, 429, "TOO_MANY_SESSIONS",
                         "%zu bash sessions are open, the limit (EXECD_MAX_SESSIONS) is %lld; "
                         "delete one first",
                         n, (long long)execd_cfg.max_sessions);
        return;
    }
    s_count++;
    pthread_mutex_unlock(&s_lock);

    sess *s = tk_calloc(1, sizeof *s);
    tk_uuid4(s->id);
    s->in_w = s->ctl_w = s->out_r = s->err_r = s->st_r = -1;
    s->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    tk_buf_init(&s->tx_in, TK_CAP_STREAM);
    tk_buf_init(&s->tx_ctl, TK_CAP_STREAM);
    tk_buf_init(&s->st, STATUS_MAX);
    s->started_ms = tk_now_ms();
    tk_status st = s->wake >= 0 ? shell_start(s, cwd_fd, err, sizeof err) : TK_ERROR;
    close(cwd_fd);
    if (st != TK_OK) {
        if (s->wake < 0)
            snprintf(err, sizeof err, "eventfd: %s", strerror(errno));
        tk_buf_free(&s->tx_in);
        tk_buf_free(&s->tx_ctl);
        tk_buf_free(&s->st);
        closefd(&s->wake);
        free(s);
        pthread_mutex_lock(&s_lock);
        s_count--;
        pthread_mutex_unlock(&s_lock);
        tk_respond_error(r, 500, "RUNTIME_ERROR", "failed to start bash: %s", err);
        return;
    }
    pthread_mutex_lock(&s_lock);
    s->refs = 2; /* the registry's and the thread's */
    s->next = s_head;
    s_head = s;
    s_threads++;
    pthread_mutex_unlock(&s_lock);
    pthread_t t;
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &a, sess_main, s) != 0)
        tk_panic(__FILE__, __LINE__, "pthread_create(session)");
    pthread_attr_destroy(&a);
    tk_info("session", "msg=\"session created\" session=%s pid=%d", s->id,
            (int)execd_proc_pid(s->proc));
    tk_respond_json(r, 200, tk_json_obj("session_id", json_string(s->id), NULL));
}

void execd_session_run(tk_req *r, void *ud)
{
    const char *id = tk_req_param(r, "sessionId");
    json_t *j = tk_req_json(r, 0);
    if (!j)
        return;
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
    char err[600];
    char *cwd = NULL;
    json_t *cv = json_object_get(j, "cwd");
    if (cv && !json_is_null(cv)) {
        int fd;
        int http = execd_workdir_open(cv, &fd, 0, err, sizeof err);
        if (http) {
            tk_respond_error(r, http, "INVALID_REQUEST_BODY", "%s", err);
            return;
        }
        close(fd);
        char rel[TK_PATHSAFE_PATH_MAX], why[256], disp[TK_PATHSAFE_PATH_MAX + 8];
        execd_fs_path_rel(json_string_value(cv), json_string_length(cv), rel, sizeof rel, why,
                          sizeof why);
        tk_pathsafe_display(execd_fs_root(), rel, disp, sizeof disp);
        cwd = tk_strdup(disp);
    }
    pthread_mutex_lock(&s_lock);
    sess *s = id ? find_locked(id) : NULL;
    if (!s) {
        pthread_mutex_unlock(&s_lock);
        free(cwd);
        tk_respond_error(r, 404, "SESSION_NOT_FOUND", "no such bash session: %s", id ? id : "");
        return;
    }
    if (s->broken) {
        pthread_mutex_unlock(&s_lock);
        free(cwd);
        tk_respond_error(r, 500, "RUNTIME_ERROR",
                         "the session's shell could not be restarted; delete the session");
        return;
    }
    if (s->pending || s->cur) {
        pthread_mutex_unlock(&s_lock);
        free(cwd);
        tk_respond_error(r, 409, "SESSION_BUSY",
                         "session %s is already running a command; wait for it or interrupt it "
                         "(DELETE /command?id=%s)",
                         id, id);
        return;
    }
    run *rn = tk_calloc(1, sizeof *rn);
    rn->cmd = tk_strndup(command, clen);
    rn->cwd = cwd;
    rn->timeout_ms = timeout;
    execd_lines_init(&rn->lo, LINE_CAP);
    execd_lines_init(&rn->le, LINE_CAP);
    tk_buf_init(&rn->co, READ_CHUNK + 64);
    tk_buf_init(&rn->ce, READ_CHUNK + 64);
    rn->sink = execd_sink_new(tk_respond_sse(r));
    s->pending = rn;
    wake(s->wake);
    pthread_mutex_unlock(&s_lock);
}

void execd_session_delete(tk_req *r, void *ud)
{
    const char *id = tk_req_param(r, "sessionId");
    pthread_mutex_lock(&s_lock);
    sess *s = id ? find_locked(id) : NULL;
    if (s) {
        s->deleted = 1;
        s_count--;
        sess **pp = &s_head;
        while (*pp != s)
            pp = &(*pp)->next;
        *pp = s->next;
        wake(s->wake);
        sess_unref_locked(s);
    }
    pthread_mutex_unlock(&s_lock);
    if (!s) {
        tk_respond_error(r, 404, "SESSION_NOT_FOUND", "no such bash session: %s", id ? id : "");
        return;
    }
    tk_info("session", "msg=\"session deleted\" session=%s", id);
    tk_respond_empty(r, 200);
}

int execd_session_interrupt(const char *id)
{
    pthread_mutex_lock(&s_lock);
    sess *s = find_locked(id);
    int k = 0;
    if (s) {
        if (s->cur || s->pending) {
            s->interrupt_req = 1;
            wake(s->wake);
            k = 1;
        } else {
            k = -1;
        }
    }
    pthread_mutex_unlock(&s_lock);
    return k;
}

size_t execd_session_count(void)
{
    pthread_mutex_lock(&s_lock);
    size_t n = s_count;
    pthread_mutex_unlock(&s_lock);
    return n;
}

void execd_session_shutdown(int timeout_ms)
{
    pthread_mutex_lock(&s_lock);
    s_shutting = 1;
    while (s_head) {
        sess *s = s_head;
        s_head = s->next;
        s->deleted = 1;
        s_count--;
        wake(s->wake);
        sess_unref_locked(s);
    }
    int64_t until = tk_mono_ms() + ((int64_t)timeout_ms / 1000 + 1) * 1000;
    while (s_threads > 0 && tk_cond_wait_until(&s_cond, &s_lock, until) == 0)
        ;
    pthread_mutex_unlock(&s_lock);
}
