/* Markdown to HTML (app/markdown.c) on any bytes. Invariant: the output holds
 * only the tags and attributes cmark's renderer makes for Markdown itself, and
 * every href is an http(s) or mailto URL — nothing the input could smuggle in
 * as markup, script or an event handler. */
#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "app/markdown.h"

static const char *const tags[] = {"p",      "h1",  "h2", "h3",         "h4",    "h5",    "h6",
                                   "ul",     "ol",  "li", "blockquote", "pre",   "code",  "em",
                                   "strong", "del", "a",  "br",         "hr",    "table", "thead",
                                   "tbody",  "tr",  "th", "td",         "input", NULL};
static const char *const attrs[] = {"href",     "class", "align", "checked",
                                    "disabled", "type",  "start", NULL};

static int in(const char *const *list, const char *s, size_t n)
{
    for (; *list; list++)
        if (strlen(*list) == n && strncasecmp(*list, s, n) == 0)
            return 1;
    return 0;
}

static void check(const char *h)
{
    for (const char *p = strchr(h, '<'); p; p = strchr(p + 1, '<')) {
        const char *q = p + 1;
        if (*q == '/')
            q++;
        size_t n = 0;
        while (isalnum((unsigned char)q[n]))
            n++;
        if (!in(tags, q, n))
            __builtin_trap();
        const char *end = strchr(q, '>');
        if (!end)
            __builtin_trap();
        for (const char *a = q + n; a < end;) {
            while (a < end && (*a == ' ' || *a == '/'))
                a++;
            if (a >= end)
                break;
            size_t an = 0;
            while (a + an < end && (isalpha((unsigned char)a[an]) || a[an] == '-'))
                an++;
            if (an == 0 || !in(attrs, a, an) || a[an] != '=' || a[an + 1] != '"')
                __builtin_trap();
            const char *v = a + an + 2, *ve = strchr(v, '"');
            if (!ve || ve > end)
                __builtin_trap();
            if (an == 4 && strncmp(a, "href", 4) == 0 && strncasecmp(v, "http://", 7) != 0 &&
                strncasecmp(v, "https://", 8) != 0 && strncasecmp(v, "mailto:", 7) != 0)
                __builtin_trap();
            a = ve + 1;
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 64 * 1024)
        return 0;
    char *h = app_markdown_html((const char *)data, size);
    check(h);
    free(h);
    return 0;
}
