#include "app/weburl.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

tk_status app_url_parse(const char *url, app_url *out)
{
    memset(out, 0, sizeof *out);
    if (!url)
        return TK_EINVAL;
    size_t sl;
    if (strncasecmp(url, "https://", 8) == 0) {
        snprintf(out->scheme, sizeof out->scheme, "https");
        sl = 8;
        out->port = 443;
    } else if (strncasecmp(url, "http://", 7) == 0) {
        snprintf(out->scheme, sizeof out->scheme, "http");
        sl = 7;
        out->port = 80;
    } else {
        return TK_EINVAL;
    }
    const char *a = url + sl;
    size_t alen = strcspn(a, "/?#");
    out->path = a + alen;
    if (alen == 0 || memchr(a, '@', alen))
        return TK_EINVAL;
    const char *port = NULL;
    size_t hlen;
    if (a[0] == '[') {
        const char *rb = memchr(a, ']', alen);
        if (!rb)
            return TK_EINVAL;
        hlen = (size_t)(rb - a) + 1;
        if (hlen < alen) {
            if (a[hlen] != ':')
                return TK_EINVAL;
            port = a + hlen + 1;
        }
    } else {
        const char *c = memchr(a, ':', alen);
        hlen = c ? (size_t)(c - a) : alen;
        if (c)
            port = c + 1;
    }
    if (hlen == 0 || hlen >= sizeof out->host)
        return TK_EINVAL;
    for (size_t i = 0; i < hlen; i++) {
        unsigned char ch = (unsigned char)a[i];
        if (ch <= 0x20 || ch >= 0x7f || ch == '\\')
            return TK_EINVAL;
        out->host[i] = (char)tolower(ch);
    }
    out->host[hlen] = '\0';
    if (port) {
        size_t plen = (size_t)(a + alen - port);
        if (plen == 0 || plen > 5)
            return TK_EINVAL;
        int p = 0;
        for (size_t i = 0; i < plen; i++) {
            if (!isdigit((unsigned char)port[i]))
                return TK_EINVAL;
            p = p * 10 + (port[i] - '0');
        }
        if (p < 1 || p > 65535)
            return TK_EINVAL;
        out->port = p;
    }
    return TK_OK;
}

void app_url_format_origin(const app_url *u, char *out, size_t outlen)
{
    int def = (strcmp(u->scheme, "https") == 0 && u->port == 443) ||
              (strcmp(u->scheme, "http") == 0 && u->port == 80);
    if (def)
        snprintf(out, outlen, "%s://%s", u->scheme, u->host);
    else
        snprintf(out, outlen, "%s://%s:%d", u->scheme, u->host, u->port);
}

tk_status app_url_origin(const char *url, char *out, size_t outlen)
{
    app_url u;
    if (app_url_parse(url, &u) != TK_OK)
        return TK_EINVAL;
    app_url_format_origin(&u, out, outlen);
    return TK_OK;
}

int app_url_is_https(const char *url)
{
    app_url u;
    return app_url_parse(url, &u) == TK_OK && strcmp(u.scheme, "https") == 0;
}

int app_url_is_loopback_http(const char *url)
{
    app_url u;
    if (app_url_parse(url, &u) != TK_OK || strcmp(u.scheme, "http") != 0)
        return 0;
    if (strcmp(u.host, "localhost") == 0 || strcmp(u.host, "[::1]") == 0)
        return 1;
    /* 127.d.d.d with decimal octets only (no odd numeric notations) */
    unsigned a, b, c, d;
    char tail;
    if (sscanf(u.host, "%3u.%3u.%3u.%3u%c", &a, &b, &c, &d, &tail) == 4 && a == 127 && b < 256 &&
        c < 256 && d < 256) {
        for (const char *p = u.host; *p; p++)
            if (!isdigit((unsigned char)*p) && *p != '.')
                return 0;
        return 1;
    }
    return 0;
}
