#include "app/cli.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "app/account.h"
#include "app/app.h"
#include "app/auth/password.h"
#include "app/auth/tokens.h"
#include "app/users.h"
#include "lib/buf.h"
#include "lib/ssrf.h"
#include "lib/url.h"

/* Parses "--name value" / "--name=value" / bare "--flag" options. */
struct opt {
    const char *name;
    int takes_value;
    const char *value; /* set when given; "" for a bare flag */
};

static int parse_opts(const char *cmd, int argc, char **argv, struct opt *opts, size_t nopts)
{
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2) != 0) {
            fprintf(stderr, "tusko %s: unexpected argument \"%s\"\n", cmd, a);
            return 2;
        }
        const char *eq = strchr(a + 2, '=');
        size_t len = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
        struct opt *o = NULL;
        for (size_t k = 0; k < nopts; k++)
            if (strlen(opts[k].name) == len && strncmp(opts[k].name, a + 2, len) == 0)
                o = &opts[k];
        if (!o) {
            fprintf(stderr, "tusko %s: unknown option %.*s\n", cmd, (int)len + 2, a);
            return 2;
        }
        if (!o->takes_value) {
            o->value = "";
        } else if (eq) {
            o->value = eq + 1;
        } else if (i + 1 < argc) {
            o->value = argv[++i];
        } else {
            fprintf(stderr, "tusko %s: --%s needs a value\n", cmd, o->name);
            return 2;
        }
    }
    return 0;
}

/* Reads a password from stdin: the first line, without its line ending. */
static int read_password(char *out, size_t outlen)
{
    tk_buf b;
    tk_buf_init(&b, APP_PASSWORD_MAX + 2);
    char chunk[512];
    ssize_t n;
    int too_long = 0;
    while ((n = read(0, chunk, sizeof chunk)) > 0) {
        if (tk_buf_append(&b, chunk, (size_t)n) != TK_OK) {
            too_long = 1;
            break;
        }
        if (memchr(chunk, '\n', (size_t)n))
            break;
    }
    const char *s = tk_buf_cstr(&b);
    size_t len = strcspn(s, "\r\n");
    int rc = 0;
    if (too_long || len > APP_PASSWORD_MAX || len >= outlen) {
        fprintf(stderr, "tusko user add: the password is over %d bytes\n", APP_PASSWORD_MAX);
        rc = 1;
    } else if (len < APP_PASSWORD_MIN) {
        fprintf(stderr, "tusko user add: the password must be at least %d characters (got %zu)\n",
                APP_PASSWORD_MIN, len);
        rc = 1;
    } else {
        memcpy(out, s, len);
        out[len] = '\0';
    }
    if (b.data)
        sodium_memzero(b.data, b.size);
    tk_buf_free(&b);
    return rc;
}

static int user_add(int argc, char **argv)
{
    struct opt opts[] = {
        {"email", 1, NULL}, {"name", 1, NULL}, {"password-stdin", 0, NULL}, {"admin", 0, NULL}};
    int rc = parse_opts("user add", argc, argv, opts, TK_ARRAY_LEN(opts));
    if (rc)
        return rc;
    char email[256];
    if (!opts[0].value) {
        fprintf(stderr, "tusko user add: --email is required "
                        "(tusko user add --email E --password-stdin)\n");
        return 2;
    }
    if (app_email_normalize(opts[0].value, email, sizeof email) != TK_OK) {
        fprintf(stderr, "tusko user add: \"%s\" is not an email address\n", opts[0].value);
        return 2;
    }
    char hash[crypto_pwhash_STRBYTES] = "";
    if (opts[2].value) {
        char pw[APP_PASSWORD_MAX + 1];
        if (read_password(pw, sizeof pw) != 0)
            return 1;
        tk_status st = app_password_hash(pw, hash);
        sodium_memzero(pw, sizeof pw);
        if (st != TK_OK) {
            fprintf(stderr, "tusko user add: cannot hash the password\n");
            return 1;
        }
    }
    PGconn *c = app_db_acquire();
    if (!c) {
        fprintf(stderr, "tusko user add: no database connection\n");
        return 1;
    }
    char id[TK_UUID_LEN];
    int admin = 0;
    tk_status st = app_user_create(c, email, hash[0] ? hash : NULL, opts[1].value,
                                   opts[3].value != NULL, &admin, id);
    app_db_release(c);
    if (st == TK_EDENIED) {
        fprintf(stderr, "tusko user add: a user with email %s already exists\n", email);
        return 1;
    }
    if (st != TK_OK) {
        fprintf(stderr, "tusko user add: the database refused the new user (see the log)\n");
        return 1;
    }
    printf("%s\n", id);
    fprintf(stderr, "tusko: user %s created (%s), %s%s\n", email, id, admin ? "an admin" : "a user",
            hash[0] ? "" : "; it has no password (sign in through OIDC or use an API token)");
    return 0;
}

/* The user named by --email: 0 with uid, else the exit code (message given). */
static int user_by_email(const char *cmd, const char *given, char uid[TK_UUID_LEN])
{
    char email[256];
    if (!given || app_email_normalize(given, email, sizeof email) != TK_OK) {
        fprintf(stderr, "tusko %s: --email E (an existing user's email) is required\n", cmd);
        return 2;
    }
    PGconn *c = app_db_acquire();
    if (!c) {
        fprintf(stderr, "tusko %s: no database connection\n", cmd);
        return 1;
    }
    tk_status st = app_user_find_email(c, email, uid, NULL);
    app_db_release(c);
    if (st == TK_ENOENT)
        fprintf(stderr, "tusko %s: no user with email %s\n", cmd, email);
    else if (st != TK_OK)
        fprintf(stderr, "tusko %s: the database did not answer\n", cmd);
    return st == TK_OK ? 0 : 1;
}

/* tusko user export --email E --out FILE: the archive GET /api/me/export gives */
static int user_export(int argc, char **argv)
{
    struct opt opts[] = {{"email", 1, NULL}, {"out", 1, NULL}};
    int rc = parse_opts("user export", argc, argv, opts, TK_ARRAY_LEN(opts));
    if (rc)
        return rc;
    if (!opts[1].value || !*opts[1].value) {
        fprintf(stderr, "usage: tusko user export --email E --out FILE\n");
        return 2;
    }
    char uid[TK_UUID_LEN];
    if ((rc = user_by_email("user export", opts[0].value, uid)) != 0)
        return rc;
    const char *out = opts[1].value;
    char *partial = tk_asprintf("%s.partial", out);
    int fd = open(partial, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        fprintf(stderr, "tusko user export: cannot create %s: %s\n", partial, strerror(errno));
        free(partial);
        return 1;
    }
    PGconn *c = app_db_acquire();
    char err[512] = "no database connection";
    tk_status st = c ? app_account_export(c, uid, fd, err, sizeof err) : TK_ERROR;
    if (c)
        app_db_release(c);
    if (st == TK_OK && (fsync(fd) != 0 || close(fd) != 0)) {
        snprintf(err, sizeof err, "cannot write %s: %s", partial, strerror(errno));
        st = TK_ERROR;
        fd = -1;
    } else if (st != TK_OK) {
        close(fd);
    }
    if (st == TK_OK && rename(partial, out) != 0) {
        snprintf(err, sizeof err, "cannot rename %s to %s: %s", partial, out, strerror(errno));
        st = TK_ERROR;
    }
    if (st != TK_OK) {
        unlink(partial);
        fprintf(stderr, "tusko user export: %s\n", err);
    } else {
        printf("%s\n", out);
    }
    free(partial);
    return st == TK_OK ? 0 : 1;
}

/* tusko user delete --email E --yes: what DELETE /api/me does, as an operator */
static int user_delete(int argc, char **argv)
{
    struct opt opts[] = {{"email", 1, NULL}, {"yes", 0, NULL}};
    int rc = parse_opts("user delete", argc, argv, opts, TK_ARRAY_LEN(opts));
    if (rc)
        return rc;
    if (!opts[1].value) {
        fprintf(stderr, "tusko user delete: this removes the account and everything of it for "
                        "good; add --yes to go on\n");
        return 2;
    }
    char uid[TK_UUID_LEN];
    if ((rc = user_by_email("user delete", opts[0].value, uid)) != 0)
        return rc;
    PGconn *c = app_db_acquire();
    if (!c) {
        fprintf(stderr, "tusko user delete: no database connection\n");
        return 1;
    }
    json_t *answer = NULL;
    char err[600];
    tk_status st = app_account_delete(c, uid, "cli", &answer, err, sizeof err);
    app_db_release(c);
    if (st != TK_OK) {
        fprintf(stderr, "tusko user delete: %s\n", err);
        return 1;
    }
    char *text = json_dumps(answer, JSON_SORT_KEYS);
    printf("%s\n", text ? text : "{}");
    free(text);
    json_decref(answer);
    return 0;
}

int app_cli_user(int argc, char **argv)
{
    if (argc >= 1 && strcmp(argv[0], "add") == 0)
        return user_add(argc - 1, argv + 1);
    if (argc >= 1 && strcmp(argv[0], "export") == 0)
        return user_export(argc - 1, argv + 1);
    if (argc >= 1 && strcmp(argv[0], "delete") == 0)
        return user_delete(argc - 1, argv + 1);
    fprintf(stderr, "usage: tusko user add --email E [--name N] [--password-stdin] [--admin]\n"
                    "       tusko user export --email E --out FILE\n"
                    "       tusko user delete --email E --yes\n");
    return 2;
}

static int token_create(int argc, char **argv)
{
    struct opt opts[] = {{"email", 1, NULL}, {"name", 1, NULL}};
    int rc = parse_opts("token create", argc, argv, opts, TK_ARRAY_LEN(opts));
    if (rc)
        return rc;
    char email[256];
    if (!opts[0].value || app_email_normalize(opts[0].value, email, sizeof email) != TK_OK) {
        fprintf(stderr, "tusko token create: --email E (an existing user's email) is required\n");
        return 2;
    }
    PGconn *c = app_db_acquire();
    if (!c) {
        fprintf(stderr, "tusko token create: no database connection\n");
        return 1;
    }
    char uid[TK_UUID_LEN], tok[APP_TOKEN_LEN + 1];
    tk_status st = app_user_find_email(c, email, uid, NULL);
    if (st == TK_OK)
        st = app_token_create(c, uid, opts[1].value ? opts[1].value : "cli", tok);
    app_db_release(c);
    if (st == TK_ENOENT) {
        fprintf(stderr, "tusko token create: no user with email %s (tusko user add first)\n",
                email);
        return 1;
    }
    if (st != TK_OK) {
        fprintf(stderr, "tusko token create: the database refused the token (see the log)\n");
        return 1;
    }
    printf("%s\n", tok);
    return 0;
}

int app_cli_token(int argc, char **argv)
{
    if (argc >= 1 && strcmp(argv[0], "create") == 0)
        return token_create(argc - 1, argv + 1);
    fprintf(stderr, "usage: tusko token create --email E [--name N]\n");
    return 2;
}

int app_cli_check_url(int argc, char **argv)
{
    if (argc != 1 || strncmp(argv[0], "--", 2) == 0) {
        fprintf(stderr, "usage: tusko check-url URL\n");
        return 2;
    }
    tk_ssrf_policy p;
    char err[512];
    if (tk_ssrf_policy_from_env(&p, err, sizeof err) != TK_OK) {
        fprintf(stderr, "tusko check-url: %s\n", err);
        return 2;
    }
    tk_ssrf_target t;
    tk_status st = tk_ssrf_check(&p, argv[0], &t);
    char line[TK_SSRF_REASON_MAX + TK_URL_MAX + 64];
    tk_ssrf_target_describe(&t, line, sizeof line);
    printf("%s\n", line);
    if (st == TK_OK) {
        for (size_t i = 0; i < t.naddrs; i++) {
            char a[48];
            tk_ip_format(&t.addrs[i], a, sizeof a);
            printf("  connect to %s%s%s port %d\n", t.addrs[i].family == 6 ? "[" : "", a,
                   t.addrs[i].family == 6 ? "]" : "", t.port);
        }
        if (t.by_allowlist)
            printf("  admitted by the operator allowlist (SSRF_ALLOW)\n");
    }
    tk_ssrf_target_free(&t);
    tk_ssrf_policy_free(&p);
    return st == TK_OK ? 0 : 1;
}
