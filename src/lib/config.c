#include "lib/config.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lib/httpd.h"
#include "lib/tktime.h"

tk_status tk_config_parse_bool(const char *v, int *out)
{
    static const char *const yes[] = {"1", "true", "yes", "on"};
    static const char *const no[] = {"0", "false", "no", "off"};
    for (size_t i = 0; i < TK_ARRAY_LEN(yes); i++) {
        if (strcasecmp(v, yes[i]) == 0) {
            *out = 1;
            return TK_OK;
        }
        if (strcasecmp(v, no[i]) == 0) {
            *out = 0;
            return TK_OK;
        }
    }
    return TK_EINVAL;
}

static tk_status apply(tk_setting *s, const char *v, char *err, size_t errlen)
{
    switch (s->type) {
    case TK_SET_STR: {
        char **out = s->out;
        free(*out);
        *out = v ? tk_strdup(v) : NULL;
        return TK_OK;
    }
    case TK_SET_INT: {
        int64_t x;
        int64_t min = s->min, max = s->max;
        if (min == 0 && max == 0) {
            min = INT64_MIN;
            max = INT64_MAX;
        }
        if (tk_parse_i64(v, min, max, &x) != TK_OK) {
            if (s->min == 0 && s->max == 0)
                snprintf(err, errlen, "%s: \"%s\" is not an integer", s->env, v);
            else
                snprintf(err, errlen, "%s: \"%s\" is not an integer from %lld to %lld", s->env, v,
                         (long long)s->min, (long long)s->max);
            return TK_EINVAL;
        }
        *(int64_t *)s->out = x;
        return TK_OK;
    }
    case TK_SET_BOOL: {
        int b;
        if (tk_config_parse_bool(v, &b) != TK_OK) {
            snprintf(err, errlen, "%s: \"%s\" is not a boolean (use true or false)", s->env, v);
            return TK_EINVAL;
        }
        *(int *)s->out = b;
        return TK_OK;
    }
    case TK_SET_DURATION: {
        int64_t ms;
        if (tk_parse_duration(v, &ms) != TK_OK) {
            snprintf(err, errlen, "%s: \"%s\" is not a duration (e.g. 30m, 45s, 500ms)", s->env, v);
            return TK_EINVAL;
        }
        if ((s->min || s->max) && (ms < s->min || ms > s->max)) {
            char a[32], b[32];
            tk_format_duration(s->min, a, sizeof a);
            tk_format_duration(s->max, b, sizeof b);
            snprintf(err, errlen, "%s: \"%s\" is out of range (%s to %s)", s->env, v, a, b);
            return TK_EINVAL;
        }
        *(int64_t *)s->out = ms;
        return TK_OK;
    }
    }
    return TK_EINVAL;
}

static tk_setting *find_flag(tk_setting *s, size_t n, const char *name, size_t len)
{
    for (size_t i = 0; i < n; i++)
        if (s[i].flag && strlen(s[i].flag) == len && strncmp(s[i].flag, name, len) == 0)
            return &s[i];
    return NULL;
}

tk_status tk_config_load(tk_setting *s, size_t n, int argc, char **argv, int *argi, char *err,
                         size_t errlen)
{
    err[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        const char *v = getenv(s[i].env);
        s[i].source = "default";
        if (v && *v) {
            s[i].source = "env";
        } else {
            v = s[i].def;
        }
        if (s[i].type == TK_SET_STR || v) {
            if (apply(&s[i], v, err, errlen) != TK_OK)
                return TK_EINVAL;
        }
    }
    int a = argi ? *argi : argc;
    while (a < argc) {
        const char *arg = argv[a];
        if (strncmp(arg, "--", 2) != 0 || arg[2] == '\0')
            break;
        const char *name = arg + 2;
        const char *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        tk_setting *st = find_flag(s, n, name, len);
        if (!st) {
            snprintf(err, errlen, "unknown option --%.*s (see --help)", (int)len, name);
            return TK_EINVAL;
        }
        const char *v;
        if (eq) {
            v = eq + 1;
        } else if (st->type == TK_SET_BOOL) {
            v = "true";
        } else if (a + 1 < argc) {
            v = argv[++a];
        } else {
            snprintf(err, errlen, "option --%s needs a value", st->flag);
            return TK_EINVAL;
        }
        if (apply(st, v, err, errlen) != TK_OK)
            return TK_EINVAL;
        st->source = "flag";
        a++;
    }
    if (argi)
        *argi = a;
    for (size_t i = 0; i < n; i++) {
        if (s[i].check && s[i].type == TK_SET_STR && *(char **)s[i].out) {
            char msg[256] = "";
            if (s[i].check(*(char **)s[i].out, msg, sizeof msg) != 0) {
                snprintf(err, errlen, "%s: \"%s\" %s", s[i].env,
                         (s[i].flags & TK_SET_SECRET) ? "(secret)" : *(char **)s[i].out, msg);
                return TK_EINVAL;
            }
        }
    }
    for (size_t i = 0; i < n; i++) {
        if ((s[i].flags & TK_SET_REQUIRED) && s[i].type == TK_SET_STR && !*(char **)s[i].out) {
            snprintf(err, errlen, "%s is required but not set", s[i].env);
            return TK_EINVAL;
        }
    }
    return TK_OK;
}

void tk_config_usage(FILE *f, const tk_setting *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char flag[64] = "";
        if (s[i].flag)
            snprintf(flag, sizeof flag, "--%s", s[i].flag);
        const char *def = s[i].def ? s[i].def : "";
        if (s[i].flags & TK_SET_SECRET && s[i].def)
            def = "(secret)";
        fprintf(f, "  %-24s %-28s %s", flag, s[i].env, s[i].help ? s[i].help : "");
        if (*def)
            fprintf(f, " [default: %s]", def);
        else if (s[i].flags & TK_SET_FAIL_CLOSED)
            fprintf(f, " [unset: feature off]");
        else if (s[i].flags & TK_SET_REQUIRED)
            fprintf(f, " [required]");
        fputc('\n', f);
    }
}

void tk_config_free(tk_setting *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (s[i].type == TK_SET_STR) {
            char **out = s[i].out;
            free(*out);
            *out = NULL;
        }
    }
}

int tk_config_check_listen(const char *value, char *msg, size_t msglen)
{
    char host[128], path[108];
    int port, fd;
    tk_status fs = tk_listen_fd(value, &fd);
    if (fs == TK_OK)
        return 0;
    if (fs == TK_EINVAL ||
        tk_listen_parse(value, host, sizeof host, &port, path, sizeof path) != TK_OK) {
        snprintf(msg, msglen,
                 "is not a listen address (use host:port, [v6]:port, unix:/path or fd:N)");
        return 1;
    }
    return 0;
}

int tk_config_check_url(const char *value, char *msg, size_t msglen)
{
    if (strncmp(value, "http://", 7) != 0 && strncmp(value, "https://", 8) != 0) {
        snprintf(msg, msglen, "is not an http:// or https:// URL");
        return 1;
    }
    return 0;
}
