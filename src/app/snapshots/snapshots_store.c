#include "app/snapshots/snapshots_store.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int snapshots_store_check_path_style(const char *v, char *msg, size_t msglen)
{
    if (strcmp(v, "auto") == 0 || strcmp(v, "true") == 0 || strcmp(v, "false") == 0)
        return 0;
    snprintf(msg, msglen, "\"%s\" is not auto, true or false", v);
    return 1;
}

static int is_aws(const char *endpoint)
{
    const char *h = strstr(endpoint, "://");
    h = h ? h + 3 : endpoint;
    size_t n = strcspn(h, ":/");
    const char *suf = "amazonaws.com";
    size_t sl = strlen(suf);
    return n >= sl && strncmp(h + n - sl, suf, sl) == 0;
}

tk_s3 *snapshots_store_open(const snapshots_config *c, tk_status *why, char *err, size_t errlen)
{
    if (!c->endpoint || !*c->endpoint) {
        *why = TK_ENOENT;
        snprintf(err, errlen, "S3_ENDPOINT is not set");
        return NULL;
    }
    *why = TK_EINVAL;
    if (!c->bucket || !c->access_key || !c->secret_key) {
        snprintf(err, errlen, "S3_ENDPOINT is set but %s is not",
                 !c->bucket       ? "S3_BUCKET"
                 : !c->access_key ? "S3_ACCESS_KEY_ID"
                                  : "S3_SECRET_ACCESS_KEY");
        return NULL;
    }
    int path_style = strcmp(c->path_style ? c->path_style : "auto", "auto") == 0
                         ? !is_aws(c->endpoint)
                         : strcmp(c->path_style, "true") == 0;
    tk_s3_config sc = {
        .endpoint = c->endpoint,
        .region = c->region ? c->region : "us-east-1",
        .bucket = c->bucket,
        .access_key = c->access_key,
        .secret_key = c->secret_key,
        .path_style = path_style,
        .part_size = c->part_mib << 20,
        .multipart_min = c->multipart_mib << 20,
        .max_attempts = (int)c->max_attempts,
        .timeout_ms = (long)c->timeout_ms,
    };
    char e[256];
    tk_s3 *s3 = tk_s3_new(&sc, e, sizeof e);
    if (!s3)
        snprintf(err, errlen, "the S3 settings: %s", e);
    return s3;
}

static const char *prefix_of(const snapshots_config *c)
{
    return c->prefix ? c->prefix : "";
}

tk_status snapshots_store_check(tk_s3 *s3, const snapshots_config *c, char *err, size_t errlen)
{
    tk_s3_list l;
    tk_s3_result r;
    char p[TK_S3_KEY_MAX + 2];
    snprintf(p, sizeof p, "%s%s", prefix_of(c), *prefix_of(c) ? "/" : "");
    tk_status st = tk_s3_list_objects(s3, p, NULL, 1, &l, &r);
    if (st == TK_OK)
        tk_s3_list_free(&l);
    else
        snprintf(err, errlen, "ListObjectsV2 of bucket %s: %s (HTTP %ld): %s", c->bucket, r.code,
                 r.status, r.message);
    return st;
}

static int write_all(void *ud_fd, const char *d, size_t n)
{
    int fd = *(int *)ud_fd;
    while (n) {
        ssize_t w = write(fd, d, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return 1;
        d += w;
        n -= (size_t)w;
    }
    return 0;
}

static int on_data_fd(const char *d, size_t n, void *ud)
{
    return write_all(ud, d, n);
}

static int fail(const char *what, const tk_s3_result *r)
{
    fprintf(stderr, "tusko s3 %s: %s (HTTP %ld): %s\n", what, r->code[0] ? r->code : "Error",
            r->status, r->message);
    return 1;
}

int snapshots_store_cli(int argc, char **argv, const snapshots_config *c)
{
    const char *usage = "usage: tusko s3 check | ls [PREFIX] | put KEY FILE | get KEY FILE |"
                        " rm KEY | uploads [PREFIX] | abort KEY UPLOAD_ID\n";
    if (argc < 1) {
        fputs(usage, stderr);
        return 2;
    }
    char err[512];
    tk_status why;
    tk_s3 *s3 = snapshots_store_open(c, &why, err, sizeof err);
    if (!s3) {
        fprintf(stderr, "tusko s3: %s\n", err);
        return 2;
    }
    const char *cmd = argv[0];
    int rc = 0;
    tk_s3_result r;
    if (strcmp(cmd, "check") == 0 && argc == 1) {
        if (snapshots_store_check(s3, c, err, sizeof err) == TK_OK)
            printf("ok: bucket %s answers\n", c->bucket);
        else {
            fprintf(stderr, "tusko s3 check: %s\n", err);
            rc = 1;
        }
    } else if (strcmp(cmd, "ls") == 0 && argc <= 2) {
        char *token = NULL;
        do {
            tk_s3_list l;
            if (tk_s3_list_objects(s3, argc == 2 ? argv[1] : NULL, token, 1000, &l, &r) != TK_OK) {
                rc = fail("ls", &r);
                break;
            }
            for (size_t i = 0; i < l.n; i++)
                printf("%lld\t%s\t%s\n", (long long)l.items[i].size, l.items[i].last_modified,
                       l.items[i].key);
            free(token);
            token = l.truncated && l.next_token ? tk_strdup(l.next_token) : NULL;
            tk_s3_list_free(&l);
        } while (token);
        free(token);
    } else if (strcmp(cmd, "put") == 0 && argc == 3) {
        int fd = open(argv[2], O_RDONLY | O_CLOEXEC);
        struct stat sb;
        if (fd < 0 || fstat(fd, &sb) != 0) {
            fprintf(stderr, "tusko s3 put: %s: %s\n", argv[2], strerror(errno));
            rc = 1;
        } else if (tk_s3_put_fd(s3, argv[1], fd, sb.st_size, NULL, "application/octet-stream", NULL,
                                &r) != TK_OK) {
            rc = fail("put", &r);
        } else {
            printf("put %s %lld bytes etag %s attempts %d\n", argv[1], (long long)sb.st_size,
                   r.etag, r.attempts);
        }
        if (fd >= 0)
            close(fd);
    } else if (strcmp(cmd, "get") == 0 && argc == 3) {
        int fd = strcmp(argv[2], "-") == 0
                     ? 1
                     : open(argv[2], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd < 0) {
            fprintf(stderr, "tusko s3 get: %s: %s\n", argv[2], strerror(errno));
            rc = 1;
        } else {
            char sha[65];
            if (tk_s3_get(s3, argv[1], 0, on_data_fd, &fd, sha, &r) != TK_OK)
                rc = fail("get", &r);
            else if (fd != 1)
                printf("got %s sha256-meta %s\n", argv[1], sha[0] ? sha : "-");
            if (fd != 1)
                close(fd);
        }
    } else if (strcmp(cmd, "rm") == 0 && argc == 2) {
        if (tk_s3_delete(s3, argv[1], &r) != TK_OK)
            rc = fail("rm", &r);
    } else if (strcmp(cmd, "uploads") == 0 && argc <= 2) {
        tk_s3_uploads u;
        if (tk_s3_list_uploads(s3, argc == 2 ? argv[1] : NULL, NULL, NULL, &u, &r) != TK_OK) {
            rc = fail("uploads", &r);
        } else {
            for (size_t i = 0; i < u.n; i++)
                printf("%s\t%s\t%s\n", u.items[i].initiated, u.items[i].upload_id, u.items[i].key);
            tk_s3_uploads_free(&u);
        }
    } else if (strcmp(cmd, "abort") == 0 && argc == 3) {
        if (tk_s3_multipart_abort(s3, argv[1], argv[2], &r) != TK_OK)
            rc = fail("abort", &r);
    } else {
        fputs(usage, stderr);
        rc = 2;
    }
    tk_s3_free(s3);
    return rc;
}
