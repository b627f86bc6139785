#include "app/web.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/headers.h"
#include "lib/embed.h"

extern const struct tk_embed_file tk_embed_web[];

#define TT_POLICY "tusko-html"

static const struct {
    const char *ext, *type;
} types[] = {
    {".html", "text/html; charset=utf-8"},
    {".js", "text/javascript; charset=utf-8"},
    {".mjs", "text/javascript; charset=utf-8"},
    {".css", "text/css; charset=utf-8"},
    {".svg", "image/svg+xml"},
    {".png", "image/png"},
    {".ico", "image/x-icon"},
    {".json", "application/json"},
    {".webmanifest", "application/manifest+json"},
    {".woff2", "font/woff2"},
    {".txt", "text/plain; charset=utf-8"},
    {".md", "text/plain; charset=utf-8"},
};

const char *app_web_content_type(const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; i < TK_ARRAY_LEN(types); i++) {
        size_t e = strlen(types[i].ext);
        if (n > e && strcmp(name + n - e, types[i].ext) == 0)
            return types[i].type;
    }
    /* LICENSE files and anything else: text, never sniffed (nosniff) */
    return "text/plain; charset=utf-8";
}

int app_web_name_ok(const char *name)
{
    if (!name || !name[0] || name[0] == '/' || strlen(name) > 200)
        return 0;
    for (const char *p = name; *p; p++) {
        char c = *p;
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '.' || c == '_' || c == '-' || c == '/';
        if (!ok)
            return 0;
        if (c == '/' && p[1] == '/')
            return 0;
        if (c == '.' && p[1] == '.')
            return 0;
    }
    return name[strlen(name) - 1] != '/';
}

int app_web_etag_match(const char *inm, const char *etag)
{
    if (!inm)
        return 0;
    size_t el = strlen(etag);
    const char *p = inm;
    while (*p) {
        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        if (!*p)
            break;
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t'))
            n--;
        if (n == 1 && p[0] == '*')
            return 1;
        const char *v = p;
        if (n > 2 && v[0] == 'W' && v[1] == '/') { /* weak comparison for If-None-Match */
            v += 2;
            n -= 2;
        }
        if (n == el && memcmp(v, etag, el) == 0)
            return 1;
        p = end ? end + 1 : p + strlen(p);
    }
    return 0;
}

/* ---------- per-file ETags and the page's CSP, computed once ---------- */

static size_t nfiles;
static char (*etags)[24];
static char page_csp[1024];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void init_once(void)
{
    for (const struct tk_embed_file *f = tk_embed_web; f->name; f++)
        nfiles++;
    etags = tk_calloc(nfiles ? nfiles : 1, sizeof *etags);
    for (size_t i = 0; i < nfiles; i++) {
        uint64_t h = 0xcbf29ce484222325ull;
        for (size_t k = 0; k < tk_embed_web[i].size; k++) {
            h ^= tk_embed_web[i].data[k];
            h *= 0x100000001b3ull;
        }
        snprintf(etags[i], sizeof etags[i], "\"%016llx\"", (unsigned long long)h);
    }
    const char *base = "default-src 'self'";
    for (const char *const *hd = app_security_headers; hd[0] && hd[1]; hd += 2)
        if (strcmp(hd[0], "Content-Security-Policy") == 0)
            base = hd[1];
    snprintf(page_csp, sizeof page_csp,
             "%s; require-trusted-types-for 'script'; trusted-types " TT_POLICY, base);
}

static void serve(tk_req *r, const char *name)
{
    pthread_once(&once, init_once);
    const struct tk_embed_file *f =
        app_web_name_ok(name) ? tk_embed_find(tk_embed_web, name) : NULL;
    if (!f) {
        tk_respond_error(r, 404, "NOT_FOUND", "no such file");
        return;
    }
    const char *etag = etags[f - tk_embed_web];
    const char *type = app_web_content_type(name);
    tk_respond_header(r, "ETag", etag);
    tk_respond_header(r, "Cache-Control", "no-cache");
    if (strncmp(type, "text/html", 9) == 0)
        tk_respond_header(r, "Content-Security-Policy", page_csp);
    if (app_web_etag_match(tk_req_header(r, "If-None-Match"), etag)) {
        tk_respond(r, 304, NULL, "", 0);
        return;
    }
    tk_respond(r, 200, type, f->data, f->size);
}

static void h_index(tk_req *r, void *ud)
{
    serve(r, "index.html");
}

static void h_asset(tk_req *r, void *ud)
{
    const char *rest = tk_req_rest(r); /* "/css/app.css" */
    serve(r, rest[0] == '/' ? rest + 1 : rest);
}

/* The web UI's pages (the paths of web/js/main.js's VIEWS) all serve
 * index.html, whose router shows the view; a new view adds its path here. */
const tk_route app_web_routes[] = {
    {"GET", "/", h_index, NULL, TK_ROUTE_PUBLIC},
    {"GET", "/c/{id}", h_index, NULL, TK_ROUTE_PUBLIC},
    {"GET", "/memory", h_index, NULL, TK_ROUTE_PUBLIC},
    {"GET", "/schedules", h_index, NULL, TK_ROUTE_PUBLIC},
    {"GET", "/settings", h_index, NULL, TK_ROUTE_PUBLIC},
    {"GET", "/admin", h_index, NULL, TK_ROUTE_PUBLIC},
    {"GET", "/assets/*", h_asset, NULL, TK_ROUTE_PUBLIC},
};
const size_t app_web_nroutes = TK_ARRAY_LEN(app_web_routes);
