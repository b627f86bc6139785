#include "execd/kernel.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include "execd/env.h"
#include "execd/events.h"
#include "execd/execd.h"
#include "execd/jmsg.h"
#include "execd/proc.h"
#include "lib/cond.h"
#include "lib/id.h"
#include "lib/json.h"
#include "lib/log.h"
#include "lib/tktime.h"

#define MAX_FRAMES     64
#define MAX_MSG_BYTES  (128u << 20) /* all frames of one message */
#define STDERR_TAIL    4096
#define PING_MS        3000
#define FINAL_DRAIN_MS 30000
#define INFO_RETRY_MS  250

enum { K_STARTING, K_READY, K_DEAD };

typedef struct kexec {
    execd_sink *sink;
    char *code;
    size_t len;
    char init_text[64];
    char msg_id[40];
    int64_t start_mono, next_ping, count;
    int sent, got_idle, got_reply, error_sent, count_sent, dropped, abandoned;
} kexec;

struct execd_kernel {
    char tag[40];
    char key[65];
    char session[TK_UUID_LEN];
    char base[160]; /* ipc path prefix; endpoints are base-<port> */
    char conn_file[200];
    execd_proc *proc;
    int err_r; /* the kernel's own stdout+stderr */
    char tail[STDERR_TAIL];
    size_t tail_len;
    int wake;
    pthread_t thread;
    /* guarded by lock */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int state;
    int stopping;
    int interrupt_req;
    char reason[600];
    kexec *pending, *cur;
};

static pthread_once_t zonce = PTHREAD_ONCE_INIT;
static void *zctx;
static pthread_mutex_t dir_lock = PTHREAD_MUTEX_INITIALIZER;
static char run_dir[96];

static void zinit(void)
{
    zctx = zmq_ctx_new();
    if (!zctx)
        tk_panic(__FILE__, __LINE__, "zmq_ctx_new");
}

static int runtime_dir(char *err, size_t errlen)
{
    pthread_mutex_lock(&dir_lock);
    if (!run_dir[0]) {
        const char *t = getenv("TMPDIR");
        char tmpl[96];
        snprintf(tmpl, sizeof tmpl, "%s/tusko-execd-XXXXXX",
                 t && *t && strlen(t) < 40 ? t : "/tmp");
        if (!mkdtemp(tmpl)) {
            pthread_mutex_unlock(&dir_lock);
            snprintf(err, errlen, "mkdtemp %s: %s", tmpl, strerror(errno));
            return -1;
        }
        snprintf(run_dir, sizeof run_dir, "%s", tmpl);
    }
    pthread_mutex_unlock(&dir_lock);
    return 0;
}

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
    (void)sb;
    (void)flag;
    (void)f;
    return remove(p) == 0 || errno == ENOENT ? 0 : -1;
}

void execd_kernel_cleanup(void)
{
    pthread_mutex_lock(&dir_lock);
    /* FTW_PHYS: a symlink a kernel left there is removed, never followed */
    if (run_dir[0] && nftw(run_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS) != 0 && errno != ENOENT)
        tk_warn("kernel", "msg=\"cannot remove the runtime directory\" dir=%s err=\"%s\"", run_dir,
                strerror(errno));
    run_dir[0] = '\0';
    pthread_mutex_unlock(&dir_lock);
}

static void wake(int fd)
{
    uint64_t one = 1;
    ssize_t w = write(fd, &one, sizeof one);
    (void)w;
}

static void kexec_free(kexec *x)
{
    if (!x)
        return;
    free(x->code);
    free(x);
}

/* ---------- sockets ---------- */

typedef struct {
    void *shell, *iopub, *control;
} ksocks;

static void *zsock(int type, const char *endpoint)
{
    void *s = zmq_socket(zctx, type);
    if (!s)
        return NULL;
    int zero = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    if (type == ZMQ_SUB)
        zmq_setsockopt(s, ZMQ_SUBSCRIBE, "", 0);
    if (zmq_connect(s, endpoint) != 0) {
        zmq_close(s);
        return NULL;
    }
    return s;
}

static int ksend(execd_kernel *k, void *sock, const char *msg_type, json_t *content,
                 char *msg_id_out)
{
    execd_jmsg_out m;
    execd_jmsg_build(&m, k->key, k->session, msg_type, content);
    int rc = 0;
    if (zmq_send(sock, "<IDS|MSG>", 9, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0 ||
        zmq_send(sock, m.sig, 64, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0)
        rc = -1;
    for (int i = 0; i < 4 && rc == 0; i++)
        if (zmq_send(sock, m.part[i], m.len[i], (i < 3 ? ZMQ_SNDMORE : 0) | ZMQ_DONTWAIT) < 0)
            rc = -1;
    if (msg_id_out)
        snprintf(msg_id_out, 40, "%s", m.msg_id);
    execd_jmsg_out_free(&m);
    return rc;
}

/* Receives one multipart message (non-blocking). 1: decoded into m; 0: none
 * waiting; -1: a malformed or unsigned one was dropped. */
static int krecv(execd_kernel *k, void *sock, execd_jmsg *m)
{
    zmq_msg_t parts[MAX_FRAMES];
    size_t n = 0, total = 0;
    int more = 1, bad = 0;
    while (more) {
        zmq_msg_t tmp;
        zmq_msg_t *dst = n < MAX_FRAMES ? &parts[n] : &tmp;
        zmq_msg_init(dst);
        if (zmq_msg_recv(dst, sock, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(dst);
            if (n == 0)
                return 0;
            bad = 1;
            break;
        }
        total += zmq_msg_size(dst);
        more = zmq_msg_more(dst);
        if (dst == &tmp || total > MAX_MSG_BYTES) {
            bad = 1;
            if (dst == &tmp)
                zmq_msg_close(&tmp);
            else
                n++;
            continue;
        }
        n++;
    }
    int rc = -1;
    if (!bad) {
        execd_frame fr[MAX_FRAMES];
        for (size_t i = 0; i < n; i++)
            fr[i] = (execd_frame){zmq_msg_data(&parts[i]), zmq_msg_size(&parts[i])};
        char err[200];
        if (execd_jmsg_decode(k->key, strlen(k->key), fr, n, m, err, sizeof err) == TK_OK)
            rc = 1;
        else
            tk_warn("kernel", "msg=\"dropped a message from the kernel\" kernel=%s err=\"%s\"",
                    k->tag, err);
    } else {
        tk_warn("kernel", "msg=\"dropped an oversized message from the kernel\" kernel=%s", k->tag);
    }
    for (size_t i = 0; i < n; i++)
        zmq_msg_close(&parts[i]);
    return rc;
}

/* ---------- events ---------- */

static void emit_status(kexec *x, tk_status st)
{
    if (st == TK_ETOOBIG)
        x->dropped = 1;
}

/* A MIME bundle as upstream sends it: text/plain also as "text". */
static json_t *bundle(json_t *data)
{
    json_t *out = json_object();
    if (!json_is_object(data))
        return out;
    const char *mime;
    json_t *v;
    json_object_foreach(data, mime, v)
    {
        json_object_set(out, mime, v);
        if (strcmp(mime, "text/plain") == 0)
            json_object_set(out, "text", v);
    }
    return out;
}

/* The string lines of a kernel's traceback. */
static json_t *traceback(json_t *src)
{
    json_t *tb = json_array();
    if (!json_is_array(src))
        return tb;
    for (size_t i = 0; i < json_array_size(src); i++) {
        json_t *line = json_array_get(src, i);
        if (json_is_string(line))
            json_array_append(tb, line);
    }
    return tb;
}

static void on_iopub(execd_kernel *k, kexec *x, execd_jmsg *m)
{
    if (!x || !x->sent || strcmp(m->parent_id, x->msg_id) != 0)
        return;
    tk_buf *b = execd_sink_buf(x->sink);
    const char *t = m->msg_type;
    json_t *c = m->content;
    if (strcmp(t, "status") == 0) {
        if (strcmp(tk_json_str_or(c, "execution_state", ""), "idle") == 0)
            x->got_idle = 1;
    } else if (strcmp(t, "execute_input") == 0) {
        x->count = tk_json_int_or(c, "execution_count", x->count);
    } else if (strcmp(t, "stream") == 0) {
        const char *name = tk_json_str_or(c, "name", "stdout");
        json_t *text = json_object_get(c, "text");
        if (json_is_string(text) && json_string_length(text) > 0)
            emit_status(x, execd_ev_text(b, strcmp(name, "stderr") == 0 ? "stderr" : "stdout",
                                         json_string_value(text), json_string_length(text)));
    } else if (strcmp(t, "execute_result") == 0) {
        x->count = tk_json_int_or(c, "execution_count", x->count);
        if (x->count > 0 && !x->count_sent) {
            emit_status(x, execd_ev_count(b, x->count));
            x->count_sent = 1;
        }
        emit_status(x, execd_ev_result(b, bundle(json_object_get(c, "data"))));
    } else if (strcmp(t, "display_data") == 0 || strcmp(t, "update_display_data") == 0) {
        emit_status(x, execd_ev_result(b, bundle(json_object_get(c, "data"))));
    } else if (strcmp(t, "error") == 0) {
        json_t *tb = traceback(json_object_get(c, "traceback"));
        emit_status(x, execd_ev_text(b, "status", "error", 5));
        emit_status(x, execd_ev_error(b, tk_json_str_or(c, "ename", "Error"),
                                      tk_json_str_or(c, "evalue", ""), tb));
        x->error_sent = 1;
    }
}

static void on_reply(execd_kernel *k, kexec *x, execd_jmsg *m)
{
    if (!x || !x->sent || strcmp(m->parent_id, x->msg_id) != 0 ||
        strcmp(m->msg_type, "execute_reply") != 0)
        return;
    x->got_reply = 1;
    x->count = tk_json_int_or(m->content, "execution_count", x->count);
    const char *status = tk_json_str_or(m->content, "status", "ok");
    if (strcmp(status, "ok") != 0 && !x->error_sent) {
        tk_buf *b = execd_sink_buf(x->sink);
        json_t *tb = traceback(json_object_get(m->content, "traceback"));
        const char *en = strcmp(status, "aborted") == 0 ? "ExecutionAborted" : "Error";
        emit_status(x, execd_ev_error(b, tk_json_str_or(m->content, "ename", en),
                                      tk_json_str_or(m->content, "evalue", status), tb));
        x->error_sent = 1;
    }
}

/* Ends an execution's response. how: NULL when the kernel finished it. */
static void kexec_end(execd_kernel *k, kexec *x, const char *died)
{
    tk_buf *b = execd_sink_buf(x->sink);
    if (x->dropped)
        execd_ev_text(b, "stderr", "[execd: output was dropped: the client read too slowly]\n", 57);
    if (died) {
        json_t *tb = json_array();
        json_array_append_new(tb, execd_json_text(died, strlen(died)));
        execd_ev_error(b, "DeadKernelError", died, tb);
    } else if (!x->error_sent) {
        if (x->count > 0 && !x->count_sent)
            execd_ev_count(b, x->count);
        execd_ev_complete(b, tk_mono_ms() - x->start_mono);
    }
    tk_info("kernel", "msg=\"execution finished\" kernel=%s count=%lld error=%d died=%d ms=%lld",
            k->tag, (long long)x->count, x->error_sent, died != NULL,
            (long long)(tk_mono_ms() - x->start_mono));
    execd_sink_drain(x->sink, FINAL_DRAIN_MS);
    execd_sink_end(x->sink);
    x->sink = NULL;
}

static void read_tail(execd_kernel *k)
{
    char buf[4096];
    for (int i = 0; i < 8; i++) {
        ssize_t n = read(k->err_r, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (n == 0) {
                close(k->err_r);
                k->err_r = -1;
            }
            return;
        }
        size_t m = (size_t)n;
        if (m >= STDERR_TAIL) {
            memcpy(k->tail, buf + m - STDERR_TAIL, STDERR_TAIL);
            k->tail_len = STDERR_TAIL;
        } else {
            size_t keep = TK_MIN(k->tail_len, STDERR_TAIL - m);
            memmove(k->tail, k->tail + k->tail_len - keep, keep);
            memcpy(k->tail + keep, buf, m);
            k->tail_len = keep + m;
        }
    }
}

/* The last line(s) of the kernel's stderr, for error messages. */
static void tail_text(execd_kernel *k, char *out, size_t outlen)
{
    size_t n = k->tail_len;
    while (n && (k->tail[n - 1] == '\n' || k->tail[n - 1] == '\r'))
        n--;
    size_t start = n > 400 ? n - 400 : 0;
    snprintf(out, outlen, "%.*s", (int)(n - start), k->tail + start);
    for (char *c = out; *c; c++)
        if (*c == '\n' || *c == '\r' || *c == '"')
            *c = *c == '"' ? '\'' : ' ';
}

/* ---------- the thread ---------- */

static void set_state(execd_kernel *k, int st, const char *reason)
{
    pthread_mutex_lock(&k->lock);
    k->state = st;
    if (reason)
        snprintf(k->reason, sizeof k->reason, "%s", reason);
    pthread_cond_broadcast(&k->cond);
    pthread_mutex_unlock(&k->lock);
}

static void *kernel_main(void *arg)
{
    execd_kernel *k = arg;
    char ep[200];
    ksocks z = {0};
    snprintf(ep, sizeof ep, "ipc://%s-1", k->base);
    z.shell = zsock(ZMQ_DEALER, ep);
    snprintf(ep, sizeof ep, "ipc://%s-2", k->base);
    z.iopub = zsock(ZMQ_SUB, ep);
    snprintf(ep, sizeof ep, "ipc://%s-4", k->base);
    z.control = zsock(ZMQ_DEALER, ep);
    if (!z.shell || !z.iopub || !z.control)
        set_state(k, K_DEAD, "cannot create the ZeroMQ sockets");
    int64_t next_info = 0;
    int info_reply = 0, info_iopub = 0;
    char info_id[40] = "";
    for (;;) {
        pthread_mutex_lock(&k->lock);
        int state = k->state, stopping = k->stopping, intr = k->interrupt_req;
        k->interrupt_req = 0;
        if (!k->cur && k->pending && state == K_READY) {
            k->cur = k->pending;
            k->pending = NULL;
        }
        kexec *x = k->cur;
        pthread_mutex_unlock(&k->lock);
        if (stopping || state == K_DEAD)
            break;
        int64_t now = tk_mono_ms();
        if (state == K_STARTING && now >= next_info) {
            ksend(k, z.shell, "kernel_info_request", NULL, info_id);
            next_info = now + INFO_RETRY_MS;
        }
        if (x && !x->sent) {
            json_t *content = json_object();
            json_object_set_new(content, "code", json_stringn(x->code, x->len));
            json_object_set_new(content, "silent", json_false());
            json_object_set_new(content, "store_history", json_true());
            json_object_set_new(content, "user_expressions", json_object());
            json_object_set_new(content, "allow_stdin", json_false());
            json_object_set_new(content, "stop_on_error", json_true());
            x->start_mono = now;
            x->next_ping = now + PING_MS;
            execd_ev_text(execd_sink_buf(x->sink), "init", x->init_text, strlen(x->init_text));
            if (ksend(k, z.shell, "execute_request", content, x->msg_id) != 0)
                tk_warn("kernel", "msg=\"execute_request not sent\" kernel=%s err=\"%s\"", k->tag,
                        zmq_strerror(zmq_errno()));
            x->sent = 1;
        }
        if (intr && x) {
            execd_proc_kill_group(k->proc, SIGINT);
            tk_info("kernel", "msg=\"interrupt sent\" kernel=%s", k->tag);
        }
        zmq_pollitem_t it[7];
        int n = 0;
        it[n++] = (zmq_pollitem_t){.socket = z.shell, .events = ZMQ_POLLIN};
        it[n++] = (zmq_pollitem_t){.socket = z.iopub, .events = ZMQ_POLLIN};
        it[n++] = (zmq_pollitem_t){.socket = z.control, .events = ZMQ_POLLIN};
        it[n++] = (zmq_pollitem_t){.fd = k->wake, .events = ZMQ_POLLIN};
        it[n++] = (zmq_pollitem_t){.fd = execd_proc_exit_fd(k->proc), .events = ZMQ_POLLIN};
        int i_err = -1, i_sink = -1;
        if (k->err_r >= 0) {
            i_err = n;
            it[n++] = (zmq_pollitem_t){.fd = k->err_r, .events = ZMQ_POLLIN};
        }
        if (x && x->sink) {
            i_sink = n;
            it[n++] = (zmq_pollitem_t){.fd = execd_sink_fd(x->sink), .events = ZMQ_POLLIN};
        }
        long wait = 1000;
        if (state == K_STARTING)
            wait = TK_MAX(0, next_info - now);
        if (x && x->sent)
            wait = TK_MIN(wait, TK_MAX(0, x->next_ping - now));
        if (zmq_poll(it, n, wait) < 0 && zmq_errno() != EINTR)
            tk_sleep_ms(10);
        if (it[3].revents & ZMQ_POLLIN) {
            uint64_t v;
            ssize_t r = read(k->wake, &v, sizeof v);
            (void)r;
        }
        if (i_err >= 0 && it[i_err].revents)
            read_tail(k);
        if (i_sink >= 0 && (it[i_sink].revents & ZMQ_POLLIN))
            execd_sink_ack(x->sink);
        execd_jmsg m;
        for (int i = 0; i < 256; i++) {
            int r = krecv(k, z.shell, &m);
            if (r == 0)
                break;
            if (r < 0)
                continue;
            if (state == K_STARTING && strcmp(m.msg_type, "kernel_info_reply") == 0)
                info_reply = 1;
            else
                on_reply(k, x, &m);
            execd_jmsg_free(&m);
        }
        for (int i = 0; i < 1024; i++) {
            int r = krecv(k, z.iopub, &m);
            if (r == 0)
                break;
            if (r < 0)
                continue;
            if (state == K_STARTING && strcmp(m.parent_id, info_id) == 0)
                info_iopub = 1;
            if (state == K_STARTING && strcmp(m.msg_type, "status") == 0 && m.parent_id[0])
                info_iopub = 1; /* any status for one of our requests: iopub is connected */
            on_iopub(k, x, &m);
            execd_jmsg_free(&m);
        }
        for (int i = 0; i < 64; i++) {
            int r = krecv(k, z.control, &m);
            if (r == 0)
                break;
            if (r > 0)
                execd_jmsg_free(&m);
        }
        if (state == K_STARTING && info_reply && info_iopub) {
            set_state(k, K_READY, NULL);
            k->tail_len = 0; /* start-up chatter is not news later */
            tk_info("kernel", "msg=\"kernel ready\" kernel=%s pid=%d", k->tag,
                    (int)execd_proc_pid(k->proc));
        }
        int status;
        if (execd_proc_status(k->proc, &status)) {
            if (k->err_r >= 0)
                read_tail(k);
            char desc[128], tail[512], why[600];
            execd_proc_describe(status, desc, sizeof desc);
            tail_text(k, tail, sizeof tail);
            snprintf(why, sizeof why, "the kernel exited (%s)%s%s", desc, tail[0] ? ": " : "",
                     tail);
            tk_warn("kernel", "msg=\"kernel died\" kernel=%s why=\"%s\"", k->tag, why);
            set_state(k, K_DEAD, why);
            continue;
        }
        if (x && x->sent && x->sink) {
            now = tk_mono_ms();
            if (now >= x->next_ping) {
                execd_ev_text(execd_sink_buf(x->sink), "ping", "pong", 4);
                x->next_ping = now + PING_MS;
            }
            if (x->got_idle && x->got_reply) {
                /* Free the slot before the last event goes out: a client that
                 * sends its next request the moment this one ends must not find
                 * the context busy. */
                pthread_mutex_lock(&k->lock);
                k->cur = NULL;
                pthread_mutex_unlock(&k->lock);
                kexec_end(k, x, NULL);
                kexec_free(x);
                continue;
            }
            execd_sink_flush(x->sink);
            if (execd_sink_gone(x->sink) && !x->abandoned) {
                /* as upstream: the client has gone, so interrupt the kernel */
                x->abandoned = 1;
                execd_proc_kill_group(k->proc, SIGINT);
            }
        }
    }
    /* Leaving: the kernel is dead or being stopped. */
    execd_proc_kill_group(k->proc, SIGKILL);
    pthread_mutex_lock(&k->lock);
    kexec *rs[2] = {k->cur, k->pending};
    k->cur = k->pending = NULL;
    const char *why = k->reason[0] ? k->reason : "the kernel was stopped";
    char reason[600];
    snprintf(reason, sizeof reason, "%s", why);
    pthread_mutex_unlock(&k->lock);
    for (int i = 0; i < 2; i++) {
        if (!rs[i])
            continue;
        if (rs[i]->sink) {
            if (!rs[i]->sent) {
                rs[i]->start_mono = tk_mono_ms();
                execd_ev_text(execd_sink_buf(rs[i]->sink), "init", rs[i]->init_text,
                              strlen(rs[i]->init_text));
            }
            kexec_end(k, rs[i], reason);
        }
        kexec_free(rs[i]);
    }
    if (z.shell)
        zmq_close(z.shell);
    if (z.iopub)
        zmq_close(z.iopub);
    if (z.control)
        zmq_close(z.control);
    return NULL;
}

/* ---------- the API ---------- */

static void unlink_files(execd_kernel *k)
{
    char p[220];
    unlink(k->conn_file);
    for (int i = 1; i <= 5; i++) {
        snprintf(p, sizeof p, "%s-%d", k->base, i);
        unlink(p);
    }
}

static void kernel_free(execd_kernel *k)
{
    unlink_files(k);
    execd_proc_release(k->proc);
    if (k->err_r >= 0)
        close(k->err_r);
    if (k->wake >= 0)
        close(k->wake);
    pthread_mutex_destroy(&k->lock);
    pthread_cond_destroy(&k->cond);
    free(k);
}

execd_kernel *execd_kernel_start(const char *tag, char *err, size_t errlen)
{
    pthread_once(&zonce, zinit);
    if (runtime_dir(err, errlen) != 0)
        return NULL;
    execd_kernel *k = tk_calloc(1, sizeof *k);
    snprintf(k->tag, sizeof k->tag, "%s", tag);
    tk_token_hex(k->key, 32);
    tk_uuid4(k->session);
    static unsigned gen;
    unsigned g = __atomic_add_fetch(&gen, 1, __ATOMIC_RELAXED);
    snprintf(k->base, sizeof k->base, "%s/%.32s-%u", run_dir, tag, g);
    snprintf(k->conn_file, sizeof k->conn_file, "%s.json", k->base);
    k->err_r = -1;
    k->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    pthread_mutex_init(&k->lock, NULL);
    pthread_cond_init(&k->cond, NULL);
    k->state = K_STARTING;

    json_t *conn = tk_json_obj(
        "transport", json_string("ipc"), "ip", json_string(k->base), "shell_port", json_integer(1),
        "iopub_port", json_integer(2), "stdin_port", json_integer(3), "control_port",
        json_integer(4), "hb_port", json_integer(5), "key", json_string(k->key), "signature_scheme",
        json_string("hmac-sha256"), "kernel_name", json_string("python3"), NULL);
    char *text = tk_json_dumps(conn);
    json_decref(conn);
    int fd = open(k->conn_file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    ssize_t w = fd >= 0 ? write(fd, text, strlen(text)) : -1;
    int werr = errno;
    free(text);
    if (fd >= 0)
        close(fd);
    if (w < 0 || k->wake < 0) {
        snprintf(err, errlen, "cannot write the connection file %s: %s", k->conn_file,
                 strerror(werr));
        kernel_free(k);
        return NULL;
    }
    int ep[2];
    if (pipe2(ep, O_CLOEXEC) < 0) {
        snprintf(err, errlen, "pipe: %s", strerror(errno));
        kernel_free(k);
        return NULL;
    }
    /* IPython's profile and matplotlib's cache go to the private directory, not
     * to $HOME (which in a sandbox is the workspace the user sees). */
    char ipy[160], mpl[160];
    snprintf(ipy, sizeof ipy, "%s/ipython", run_dir);
    snprintf(mpl, sizeof mpl, "%s/matplotlib", run_dir);
    json_t *extra = tk_json_obj("PYTHONUNBUFFERED", json_string("1"), NULL);
    if (!getenv("IPYTHONDIR"))
        json_object_set_new(extra, "IPYTHONDIR", json_string(ipy));
    if (!getenv("MPLCONFIGDIR"))
        json_object_set_new(extra, "MPLCONFIGDIR", json_string(mpl));
    char **envp = NULL;
    execd_env_build(extra, &envp, err, errlen);
    json_decref(extra);
    int root = -1;
    char why[256];
    tk_pathsafe_open(&execd_cfg.ws, "", O_PATH | O_DIRECTORY, 0, 0, &root, why, sizeof why);
    char *argv[] = {(char *)execd_cfg.python, "-m", "ipykernel_launcher", "-f", k->conn_file,
                    "--colors=NoColor",       NULL};
    execd_spawn_opts so = {
        .path = execd_cfg.python,
        .argv = argv,
        .envp = envp,
        .cwd_fd = root,
        .stdin_fd = -1,
        .stdout_fd = ep[1],
        .stderr_fd = ep[1],
    };
    k->proc = execd_proc_spawn(&so, err, errlen);
    if (root >= 0)
        close(root);
    execd_env_free(envp);
    close(ep[1]);
    k->err_r = ep[0];
    fcntl(k->err_r, F_SETFL, O_NONBLOCK);
    if (!k->proc) {
        kernel_free(k);
        return NULL;
    }
    if (pthread_create(&k->thread, NULL, kernel_main, k) != 0)
        tk_panic(__FILE__, __LINE__, "pthread_create(kernel)");
    /* Wait until it answers. */
    int64_t ms = execd_cfg.kernel_start_ms > 0 ? execd_cfg.kernel_start_ms : 60000;
    int64_t until = tk_mono_ms() + ms;
    pthread_mutex_lock(&k->lock);
    while (k->state == K_STARTING && tk_cond_wait_until(&k->cond, &k->lock, until) == 0)
        ;
    int state = k->state;
    char reason[600];
    snprintf(reason, sizeof reason, "%s", k->reason);
    pthread_mutex_unlock(&k->lock);
    if (state != K_READY) {
        if (state == K_STARTING)
            snprintf(err, errlen,
                     "the kernel did not answer within %lld ms (%s -m ipykernel_launcher)",
                     (long long)ms, execd_cfg.python);
        else
            snprintf(err, errlen,
                     "the kernel did not start: %s (is python3-ipykernel installed "
                     "for %s?)",
                     reason, execd_cfg.python);
        execd_kernel_stop(k);
        return NULL;
    }
    return k;
}

int execd_kernel_execute(execd_kernel *k, const char *code, size_t len, execd_sink *sink,
                         const char *init_text)
{
    pthread_mutex_lock(&k->lock);
    int rc = 0;
    if (k->state == K_DEAD || k->stopping) {
        rc = -2;
    } else if (k->cur || k->pending) {
        rc = -1;
    } else {
        kexec *x = tk_calloc(1, sizeof *x);
        x->code = tk_strndup(code, len);
        x->len = len;
        x->sink = sink;
        snprintf(x->init_text, sizeof x->init_text, "%s", init_text);
        k->pending = x;
        wake(k->wake);
    }
    pthread_mutex_unlock(&k->lock);
    return rc;
}

int execd_kernel_interrupt(execd_kernel *k)
{
    pthread_mutex_lock(&k->lock);
    int running = k->cur != NULL || k->pending != NULL;
    if (running) {
        k->interrupt_req = 1;
        wake(k->wake);
    }
    pthread_mutex_unlock(&k->lock);
    return running;
}

int execd_kernel_alive(execd_kernel *k, char *reason, size_t reasonlen)
{
    pthread_mutex_lock(&k->lock);
    int alive = k->state != K_DEAD;
    if (reason)
        snprintf(reason, reasonlen, "%s", k->reason);
    pthread_mutex_unlock(&k->lock);
    return alive;
}

int execd_kernel_busy(execd_kernel *k)
{
    pthread_mutex_lock(&k->lock);
    int b = k->cur != NULL || k->pending != NULL;
    pthread_mutex_unlock(&k->lock);
    return b;
}

void execd_kernel_stop(execd_kernel *k)
{
    if (!k)
        return;
    pthread_mutex_lock(&k->lock);
    k->stopping = 1;
    if (!k->reason[0])
        snprintf(k->reason, sizeof k->reason, "the context was deleted");
    pthread_mutex_unlock(&k->lock);
    execd_proc_kill_group(k->proc, SIGKILL);
    wake(k->wake);
    pthread_join(k->thread, NULL);
    kernel_free(k);
}
