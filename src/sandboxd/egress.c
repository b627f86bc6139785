#include "sandboxd/egress.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define STR_(x)   #x
#define STR(x)    STR_(x)
#define PROXY_URL "http://127.0.0.1:" STR(SBX_EGRESS_PORT)

const char *const sbx_egress_env[] = {
    "HTTP_PROXY=" PROXY_URL,
    "HTTPS_PROXY=" PROXY_URL,
    "http_proxy=" PROXY_URL,
    "https_proxy=" PROXY_URL,
    "NO_PROXY=localhost,127.0.0.1,::1",
    "no_proxy=localhost,127.0.0.1,::1",
    NULL,
};

typedef struct {
    pid_t pid;
    int port;
    int fd;
    char err[256];
} listen_job;

static void *listen_main(void *arg)
{
    listen_job *j = arg;
    char p[64];
    snprintf(p, sizeof p, "/proc/%d/ns/net", (int)j->pid);
    int ns = open(p, O_RDONLY | O_CLOEXEC);
    if (ns < 0) {
        snprintf(j->err, sizeof j->err, "open %s: %s", p, strerror(errno));
        return NULL;
    }
    /* this thread only: it ends right after */
    if (setns(ns, CLONE_NEWNET) != 0) {
        snprintf(j->err, sizeof j->err, "setns into %s: %s", p, strerror(errno));
        close(ns);
        return NULL;
    }
    close(ns);
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0) {
        snprintf(j->err, sizeof j->err, "socket: %s", strerror(errno));
        return NULL;
    }
    int one = 1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)j->port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(s, (struct sockaddr *)&a, sizeof a) != 0 || listen(s, 128) != 0) {
        snprintf(j->err, sizeof j->err, "listen on 127.0.0.1:%d in the sandbox: %s", j->port,
                 strerror(errno));
        close(s);
        return NULL;
    }
    j->fd = s;
    return NULL;
}

int sbx_egress_listen_in(pid_t pid, int port, char *err, size_t errlen)
{
    listen_job j = {.pid = pid, .port = port, .fd = -1};
    pthread_t th;
    int rc = pthread_create(&th, NULL, listen_main, &j);
    if (rc != 0) {
        snprintf(err, errlen, "egress: pthread_create: %s", strerror(rc));
        return -1;
    }
    pthread_join(th, NULL);
    if (j.fd < 0)
        snprintf(err, errlen, "egress: %s", j.err);
    return j.fd;
}

tk_egress_listener *sbx_egress_attach(tk_egress *e, const tk_egress_caps *caps, pid_t pid,
                                      const char *id, char *err, size_t errlen)
{
    int fd = sbx_egress_listen_in(pid, SBX_EGRESS_PORT, err, errlen);
    if (fd < 0)
        return NULL;
    char tag[64];
    snprintf(tag, sizeof tag, "sandbox %s", id);
    tk_egress_listener *l = tk_egress_add_listener(e, fd, tag, caps);
    if (!l)
        snprintf(err, errlen, "egress: the proxy is stopping");
    return l;
}
