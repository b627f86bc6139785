#include "app/auth/cookie.h"

#include <stdio.h>
#include <string.h>

static int is_ws(char c)
{
    return c == ' ' || c == '\t';
}

const char *app_cookie_get(tk_arena *a, const char *header, const char *name)
{
    if (!header || !name || !*name)
        return NULL;
    size_t hlen = strnlen(header, APP_COOKIE_HEADER_MAX + 1);
    if (hlen > APP_COOKIE_HEADER_MAX)
        return NULL;
    size_t nlen = strlen(name);
    const char *p = header, *end = header + hlen;
    while (p < end) {
        const char *semi = memchr(p, ';', (size_t)(end - p));
        const char *pe = semi ? semi : end;
        while (p < pe && is_ws(*p))
            p++;
        const char *eq = memchr(p, '=', (size_t)(pe - p));
        if (eq) {
            const char *ne = eq;
            while (ne > p && is_ws(ne[-1]))
                ne--;
            if ((size_t)(ne - p) == nlen && memcmp(p, name, nlen) == 0) {
                const char *v = eq + 1, *ve = pe;
                while (v < ve && is_ws(*v))
                    v++;
                while (ve > v && is_ws(ve[-1]))
                    ve--;
                if (ve - v >= 2 && v[0] == '"' && ve[-1] == '"') {
                    v++;
                    ve--;
                }
                return tk_arena_strndup(a, v, (size_t)(ve - v));
            }
        }
        if (!semi)
            break;
        p = semi + 1;
    }
    return NULL;
}

static int token_safe(const char *s)
{
    if (!s)
        return 0;
    for (; *s; s++) {
        char c = *s;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_' || c == '.'))
            return 0;
    }
    return 1;
}

char *app_cookie_format(tk_arena *a, const app_cookie *c)
{
    TK_ASSERT(token_safe(c->name) && c->name[0]);
    TK_ASSERT(token_safe(c->value));
    char age[48] = "";
    if (c->max_age_s >= 0)
        snprintf(age, sizeof age, "; Max-Age=%lld", c->max_age_s);
    return tk_arena_printf(a, "%s=%s; Path=%s%s%s%s; SameSite=%s", c->name, c->value,
                           c->path ? c->path : "/", age, c->http_only ? "; HttpOnly" : "",
                           c->secure ? "; Secure" : "", c->same_site ? c->same_site : "Lax");
}
