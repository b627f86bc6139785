#include "lib/url.h"

#include <arpa/inet.h>
#include <idn2.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/buf.h"

/* Longest raw host accepted before decoding (percent-escapes and UTF-8 make a
 * 253-byte name longer than 253 bytes on the wire). */
#define HOST_RAW_MAX 4096

static int is_alpha(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static int is_digit(int c)
{
    return c >= '0' && c <= '9';
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static int to_lower(int c)
{
    return c >= 'A' && c <= 'Z' ? c + 32 : c;
}

static int is_space(int c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

/* A short, printable copy of untrusted input for a reason text. */
static void snip(char *out, size_t outlen, const char *s, size_t len)
{
    size_t max = 48, j = 0;
    for (size_t i = 0; i < len && i < max && j + 1 < outlen; i++) {
        unsigned char c = (unsigned char)s[i];
        out[j++] = (c > 0x20 && c < 0x7f && c != '"') ? (char)c : '?';
    }
    if (len > max && j + 4 < outlen) {
        memcpy(out + j, "...", 3);
        j += 3;
    }
    out[j] = '\0';
}

__attribute__((format(printf, 3, 4))) static void fail(tk_url_err *e, tk_url_fault f,
                                                       const char *fmt, ...)
{
    e->fault = f;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->reason, sizeof e->reason, fmt, ap);
    va_end(ap);
}

/* --- addresses --- */

void tk_ip_format(const tk_ip *ip, char *out, size_t outlen)
{
    if (!outlen)
        return;
    if (ip->family == 4) {
        snprintf(out, outlen, "%u.%u.%u.%u", ip->b[0], ip->b[1], ip->b[2], ip->b[3]);
        return;
    }
    if (ip->family != 6) {
        snprintf(out, outlen, "?");
        return;
    }
    unsigned g[8];
    for (int i = 0; i < 8; i++)
        g[i] = (unsigned)ip->b[2 * i] << 8 | ip->b[2 * i + 1];
    /* RFC 5952: compress the longest run of two or more zero groups (the first on a tie). */
    int best = -1, bestlen = 0;
    for (int i = 0; i < 8;) {
        if (g[i] != 0) {
            i++;
            continue;
        }
        int j = i;
        while (j < 8 && g[j] == 0)
            j++;
        if (j - i > bestlen && j - i >= 2) {
            best = i;
            bestlen = j - i;
        }
        i = j;
    }
    char tmp[48];
    size_t n = 0;
    for (int i = 0; i < 8; i++) {
        if (i == best) {
            n += (size_t)snprintf(tmp + n, sizeof tmp - n, "::");
            i += bestlen - 1;
            continue;
        }
        if (n > 0 && tmp[n - 1] != ':')
            tmp[n++] = ':';
        n += (size_t)snprintf(tmp + n, sizeof tmp - n, "%x", g[i]);
    }
    tmp[n] = '\0';
    snprintf(out, outlen, "%s", tmp);
}

int tk_ip_parse(const char *s, tk_ip *ip)
{
    memset(ip, 0, sizeof *ip);
    if (!s)
        return 0;
    if (inet_pton(AF_INET, s, ip->b) == 1) {
        ip->family = 4;
        return 1;
    }
    if (inet_pton(AF_INET6, s, ip->b) == 1) {
        ip->family = 6;
        return 1;
    }
    memset(ip, 0, sizeof *ip);
    return 0;
}

/* One part of an IPv4 address as the WHATWG "IPv4 number parser" reads it:
 * 0x.. hex, 0.. octal, else decimal. Returns 0 when it is not a number or
 * exceeds 32 bits. */
static int v4_number(const char *p, size_t n, uint64_t *out)
{
    if (n == 0)
        return 0;
    unsigned radix = 10;
    if (n >= 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
        radix = 16;
        p += 2;
        n -= 2;
    } else if (n >= 2 && p[0] == '0') {
        radix = 8;
        p++;
        n--;
    }
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        int d = hexval((unsigned char)p[i]);
        if (d < 0 || (unsigned)d >= radix)
            return 0;
        v = v * radix + (unsigned)d;
        if (v > 0xffffffffu)
            return 0;
    }
    *out = v;
    return 1;
}

/* Parses a host of 1-4 dot-separated numbers (no empty parts). */
static int v4_parse(const char *s, size_t n, uint8_t out[4])
{
    uint64_t part[4];
    size_t cnt = 0, start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && s[i] != '.')
            continue;
        if (cnt == 4 || !v4_number(s + start, i - start, &part[cnt]))
            return 0;
        cnt++;
        start = i + 1;
    }
    for (size_t i = 0; i + 1 < cnt; i++)
        if (part[i] > 255)
            return 0;
    if (part[cnt - 1] >= (1ull << (8 * (5 - cnt))))
        return 0;
    uint64_t v = part[cnt - 1];
    for (size_t i = 0; i + 1 < cnt; i++)
        v += part[i] << (8 * (3 - i));
    out[0] = (uint8_t)(v >> 24);
    out[1] = (uint8_t)(v >> 16);
    out[2] = (uint8_t)(v >> 8);
    out[3] = (uint8_t)v;
    return 1;
}

/* WHATWG "ends in a number": the last label is all digits, or a 0x hex number. */
static int ends_in_number(const char *s, size_t n)
{
    size_t i = n;
    while (i > 0 && s[i - 1] != '.')
        i--;
    const char *last = s + i;
    size_t ln = n - i;
    if (ln == 0)
        return 0;
    size_t k = 0;
    while (k < ln && is_digit((unsigned char)last[k]))
        k++;
    if (k == ln)
        return 1;
    if (ln < 2 || last[0] != '0' || (last[1] != 'x' && last[1] != 'X'))
        return 0;
    for (k = 2; k < ln; k++)
        if (hexval((unsigned char)last[k]) < 0)
            return 0;
    return 1; /* a hex number, however large: it must then parse as IPv4 */
}

static int host_char_ok(int c)
{
    return (c >= 'a' && c <= 'z') || is_digit(c) || c == '-' || c == '_' || c == '.';
}

static tk_status host_v6(const char *s, size_t len, tk_host *h, tk_url_err *err)
{
    char tmp[64];
    const char *in = s + 1;
    size_t il = len - 2;
    if (memchr(in, '%', il)) {
        fail(err, TK_URL_EBAD, "IPv6 zone identifiers (\"%%...\" in brackets) are refused");
        return TK_EINVAL;
    }
    char shown[64];
    snip(shown, sizeof shown, in, il);
    if (il == 0 || il >= sizeof tmp) {
        fail(err, TK_URL_EBAD, "\"[%s]\" is not a valid IPv6 address", shown);
        return TK_EINVAL;
    }
    memcpy(tmp, in, il);
    tmp[il] = '\0';
    if (inet_pton(AF_INET6, tmp, h->ip.b) != 1) {
        fail(err, TK_URL_EBAD, "\"[%s]\" is not a valid IPv6 address", shown);
        return TK_EINVAL;
    }
    h->type = TK_HOST_IPV6;
    h->ip.family = 6;
    tk_ip_format(&h->ip, h->text, sizeof h->text);
    return TK_OK;
}

tk_status tk_url_host_parse(const char *s, size_t len, tk_host *h, tk_url_err *err)
{
    tk_url_err dummy;
    if (!err)
        err = &dummy;
    err->fault = TK_URL_OK;
    err->reason[0] = '\0';
    memset(h, 0, sizeof *h);
    char shown[64];
    if (!s || len == 0) {
        fail(err, TK_URL_EBAD, "the host is empty");
        return TK_EINVAL;
    }
    if (s[0] == '[' || s[len - 1] == ']') {
        if (len < 2 || s[0] != '[' || s[len - 1] != ']') {
            fail(err, TK_URL_EBAD, "unbalanced brackets in the host");
            return TK_EINVAL;
        }
        return host_v6(s, len, h, err);
    }
    if (len > HOST_RAW_MAX) {
        fail(err, TK_URL_EBAD, "the host is longer than %d bytes", HOST_RAW_MAX);
        return TK_EINVAL;
    }

    /* Percent-decode. */
    char dec[HOST_RAW_MAX + 1];
    size_t n = 0;
    int nonascii = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '%') {
            int hi = i + 2 < len ? hexval((unsigned char)s[i + 1]) : -1;
            int lo = i + 2 < len ? hexval((unsigned char)s[i + 2]) : -1;
            if (hi < 0 || lo < 0) {
                fail(err, TK_URL_EBAD, "bad percent-escape in the host");
                return TK_EINVAL;
            }
            c = (unsigned char)(hi * 16 + lo);
            i += 2;
        }
        if (c == 0 || c < 0x20 || c == 0x7f) {
            fail(err, TK_URL_EBAD, "the host contains a control character");
            return TK_EINVAL;
        }
        if (c >= 0x80)
            nonascii = 1;
        dec[n++] = (char)c;
    }
    dec[n] = '\0';

    /* IDNA: Unicode to punycode (also folds full-width forms and case). */
    char name[HOST_RAW_MAX + 1];
    if (nonascii) {
        char *o = NULL;
        int rc = idn2_lookup_u8((const uint8_t *)dec, (uint8_t **)&o,
                                IDN2_NFC_INPUT | IDN2_NONTRANSITIONAL);
        if (rc != IDN2_OK || !o || strlen(o) > HOST_RAW_MAX) {
            fail(err, TK_URL_EBAD, "the host is not a valid internationalised domain name (%s)",
                 rc != IDN2_OK ? idn2_strerror(rc) : "too long");
            idn2_free(o);
            return TK_EINVAL;
        }
        n = strlen(o);
        memcpy(name, o, n + 1);
        idn2_free(o);
    } else {
        memcpy(name, dec, n + 1);
    }
    for (size_t i = 0; i < n; i++)
        name[i] = (char)to_lower((unsigned char)name[i]);

    if (n > 0 && name[n - 1] == '.')
        name[--n] = '\0';
    if (n == 0) {
        fail(err, TK_URL_EBAD, "the host is empty");
        return TK_EINVAL;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)name[i];
        if (!host_char_ok(c)) {
            snip(shown, sizeof shown, name, n);
            if (c > 0x20 && c < 0x7f)
                fail(err, TK_URL_EBAD, "the host \"%s\" contains '%c', which is not allowed", shown,
                     c);
            else
                fail(err, TK_URL_EBAD, "the host \"%s\" contains byte 0x%02x, which is not allowed",
                     shown, c);
            return TK_EINVAL;
        }
    }
    size_t label = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && name[i] != '.') {
            label++;
            continue;
        }
        if (label == 0) {
            fail(err, TK_URL_EBAD, "the host has an empty label (\"..\" or a leading dot)");
            return TK_EINVAL;
        }
        if (label > 63) {
            fail(err, TK_URL_EBAD, "a label of the host is longer than 63 bytes");
            return TK_EINVAL;
        }
        label = 0;
    }
    if (ends_in_number(name, n)) {
        if (!v4_parse(name, n, h->ip.b)) {
            snip(shown, sizeof shown, name, n);
            fail(err, TK_URL_EBAD, "the host \"%s\" ends in a number but is not an IPv4 address",
                 shown);
            return TK_EINVAL;
        }
        h->type = TK_HOST_IPV4;
        h->ip.family = 4;
        tk_ip_format(&h->ip, h->text, sizeof h->text);
        return TK_OK;
    }
    if (n > TK_HOST_MAX) {
        fail(err, TK_URL_EBAD, "the host name is longer than %d bytes", TK_HOST_MAX);
        return TK_EINVAL;
    }
    memcpy(h->text, name, n + 1);
    h->type = TK_HOST_NAME;
    return TK_OK;
}

/* --- paths and queries --- */

static int must_encode(unsigned char c)
{
    return c <= 0x20 || c >= 0x7f || c == '"' || c == '<' || c == '>' || c == '\\' || c == '^' ||
           c == '`' || c == '{' || c == '|' || c == '}';
}

/* Appends s with bytes that may not appear raw percent-encoded; valid escapes
 * are kept as written, a stray '%' becomes "%25". */
static tk_status encode_into(tk_buf *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        tk_status st;
        if (c == '%') {
            if (i + 2 < n && hexval((unsigned char)s[i + 1]) >= 0 &&
                hexval((unsigned char)s[i + 2]) >= 0)
                st = tk_buf_append_byte(b, '%');
            else
                st = tk_buf_append(b, "%25", 3);
        } else if (must_encode(c)) {
            char e[3] = {'%', hex[c >> 4], hex[c & 15]};
            st = tk_buf_append(b, e, 3);
        } else {
            st = tk_buf_append_byte(b, (char)c);
        }
        if (st != TK_OK)
            return st;
    }
    return TK_OK;
}

static int seg_is(const char *s, size_t n, const char *form)
{
    size_t fl = strlen(form);
    if (n != fl)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (to_lower((unsigned char)s[i]) != form[i])
            return 0;
    return 1;
}

static int is_dot(const char *s, size_t n)
{
    return seg_is(s, n, ".") || seg_is(s, n, "%2e");
}

static int is_dotdot(const char *s, size_t n)
{
    return seg_is(s, n, "..") || seg_is(s, n, ".%2e") || seg_is(s, n, "%2e.") ||
           seg_is(s, n, "%2e%2e");
}

/* Appends the path (raw, empty or starting with '/') with dot segments removed. */
static tk_status path_into(tk_buf *b, const char *p, size_t n)
{
    if (n == 0)
        return tk_buf_append_byte(b, '/');
    size_t nseg = 1;
    for (size_t i = 0; i < n; i++)
        nseg += p[i] == '/';
    size_t *offs = tk_malloc(nseg * sizeof *offs);
    size_t depth = 0, base = b->len;
    tk_status st = TK_OK;
    size_t start = 1; /* p[0] is '/' */
    for (;;) {
        const char *e = start <= n ? memchr(p + start, '/', n - start) : NULL;
        size_t end = e ? (size_t)(e - p) : n;
        const char *seg = p + start;
        size_t sl = end - start;
        int last = end == n;
        if (is_dot(seg, sl) || is_dotdot(seg, sl)) {
            if (is_dotdot(seg, sl) && depth > 0) {
                depth--;
                b->len = offs[depth];
                b->data[b->len] = '\0';
            }
            if (last) {
                offs[depth++] = b->len;
                st = tk_buf_append_byte(b, '/');
            }
        } else {
            offs[depth++] = b->len;
            st = tk_buf_append_byte(b, '/');
            if (st == TK_OK)
                st = encode_into(b, seg, sl);
        }
        if (st != TK_OK || last)
            break;
        start = end + 1;
    }
    if (st == TK_OK && b->len == base)
        st = tk_buf_append_byte(b, '/');
    free(offs);
    return st;
}

/* --- URLs --- */

static int scheme_len(const char *s, size_t len)
{
    if (len == 0 || !is_alpha((unsigned char)s[0]))
        return -1;
    size_t i = 1;
    while (i < len && (is_alpha((unsigned char)s[i]) || is_digit((unsigned char)s[i]) ||
                       s[i] == '+' || s[i] == '-' || s[i] == '.'))
        i++;
    if (i == len || s[i] != ':')
        return -1;
    return (int)i;
}

static void trim(const char **s, size_t *len)
{
    while (*len && is_space((unsigned char)(*s)[0])) {
        (*s)++;
        (*len)--;
    }
    while (*len && is_space((unsigned char)(*s)[*len - 1]))
        (*len)--;
}

tk_status tk_url_parse(tk_arena *a, const char *s, size_t len, tk_url *u, tk_url_err *err)
{
    tk_url_err dummy;
    if (!err)
        err = &dummy;
    err->fault = TK_URL_OK;
    err->reason[0] = '\0';
    memset(u, 0, sizeof *u);
    char shown[64];
    if (!s) {
        fail(err, TK_URL_EBAD, "no URL");
        return TK_EINVAL;
    }
    if (len > TK_URL_MAX) {
        fail(err, TK_URL_EBAD, "the URL is longer than %d bytes", TK_URL_MAX);
        return TK_ETOOBIG;
    }
    trim(&s, &len);
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f) {
            fail(err, TK_URL_EBAD, "the URL contains a control character (byte 0x%02x)", c);
            return TK_EINVAL;
        }
    }
    int sl = scheme_len(s, len);
    if (sl < 0) {
        snip(shown, sizeof shown, s, len);
        fail(err, TK_URL_EBAD, "\"%s\" is not an absolute URL (no scheme)", shown);
        return TK_EINVAL;
    }
    char scheme[8] = "";
    if (sl <= 5) {
        for (int i = 0; i < sl; i++)
            scheme[i] = (char)to_lower((unsigned char)s[i]);
        scheme[sl] = '\0';
    }
    if (strcmp(scheme, "http") == 0) {
        u->scheme = "http";
    } else if (strcmp(scheme, "https") == 0) {
        u->scheme = "https";
    } else {
        snip(shown, sizeof shown, s, (size_t)sl);
        for (char *p = shown; *p; p++)
            *p = (char)to_lower((unsigned char)*p);
        fail(err, TK_URL_ESCHEME, "the scheme \"%s:\" is not allowed (only http and https)", shown);
        return TK_EINVAL;
    }
    size_t i = (size_t)sl + 1;
    if (len - i < 2 || s[i] != '/' || s[i + 1] != '/') {
        fail(err, TK_URL_EBAD, "\"%s:\" must be followed by \"//\" and a host", u->scheme);
        return TK_EINVAL;
    }
    i += 2;
    size_t as = i;
    while (i < len && s[i] != '/' && s[i] != '?' && s[i] != '#')
        i++;
    size_t ae = i;
    const char *hp = s + as;
    size_t hl = ae - as;
    if (memchr(hp, '\\', hl)) {
        fail(err, TK_URL_EBAD, "a backslash in the host part is refused");
        return TK_EINVAL;
    }
    if (memchr(hp, '@', hl)) {
        fail(err, TK_URL_EUSERINFO, "a user name or password in the URL (\"...@\") is refused");
        return TK_EINVAL;
    }

    /* host[:port] */
    size_t hostlen = hl;
    const char *portp = NULL;
    size_t portl = 0;
    if (hl && hp[0] == '[') {
        const char *rb = memchr(hp, ']', hl);
        if (!rb) {
            fail(err, TK_URL_EBAD, "unclosed \"[\" in the host");
            return TK_EINVAL;
        }
        hostlen = (size_t)(rb - hp) + 1;
        if (hostlen < hl) {
            if (hp[hostlen] != ':') {
                fail(err, TK_URL_EBAD, "unexpected text after \"]\" in the host");
                return TK_EINVAL;
            }
            portp = hp + hostlen + 1;
            portl = hl - hostlen - 1;
        }
    } else {
        const char *colon = memchr(hp, ':', hl);
        if (colon) {
            hostlen = (size_t)(colon - hp);
            portp = colon + 1;
            portl = hl - hostlen - 1;
            if (memchr(portp, ':', portl)) {
                fail(err, TK_URL_EBAD,
                     "more than one \":\" in the host (IPv6 addresses go in brackets)");
                return TK_EINVAL;
            }
        }
    }
    int defport = strcmp(u->scheme, "https") == 0 ? 443 : 80;
    u->port = defport;
    if (portp && portl) {
        unsigned long v = 0;
        for (size_t k = 0; k < portl; k++) {
            if (!is_digit((unsigned char)portp[k])) {
                snip(shown, sizeof shown, portp, portl);
                fail(err, TK_URL_EBAD, "the port \"%s\" is not a number", shown);
                return TK_EINVAL;
            }
            if (v < 1000000)
                v = v * 10 + (unsigned long)(portp[k] - '0');
        }
        if (v == 0 || v > 65535) {
            snip(shown, sizeof shown, portp, portl);
            fail(err, TK_URL_EPORT, "the port %s is out of range (1-65535)", shown);
            return TK_EINVAL;
        }
        u->port = (int)v;
    }
    if (hostlen == 0) {
        fail(err, TK_URL_EBAD, "the URL has no host");
        return TK_EINVAL;
    }
    tk_status st = tk_url_host_parse(hp, hostlen, &u->host, err);
    if (st != TK_OK)
        return st;

    /* path[?query][#fragment] */
    size_t ps = ae, pe = ae;
    while (pe < len && s[pe] != '?' && s[pe] != '#')
        pe++;
    size_t qs = pe, qe = pe;
    int has_query = pe < len && s[pe] == '?';
    if (has_query) {
        qs = pe + 1;
        qe = qs;
        while (qe < len && s[qe] != '#')
            qe++;
    }

    tk_buf b;
    tk_buf_init(&b, TK_URL_MAX);
    st = tk_buf_printf(&b, "%s://%s%s%s", u->scheme, u->host.type == TK_HOST_IPV6 ? "[" : "",
                       u->host.text, u->host.type == TK_HOST_IPV6 ? "]" : "");
    if (st == TK_OK && u->port != defport)
        st = tk_buf_printf(&b, ":%d", u->port);
    size_t olen = b.len;
    if (st == TK_OK)
        st = path_into(&b, s + ps, pe - ps);
    if (st == TK_OK && has_query) {
        st = tk_buf_append_byte(&b, '?');
        if (st == TK_OK)
            st = encode_into(&b, s + qs, qe - qs);
    }
    if (st != TK_OK) {
        tk_buf_free(&b);
        fail(err, TK_URL_EBAD, "the URL is longer than %d bytes once normalised", TK_URL_MAX);
        return TK_ETOOBIG;
    }
    char *href = tk_arena_strndup(a, b.data, b.len);
    char *origin = href ? tk_arena_strndup(a, b.data, olen) : NULL;
    tk_buf_free(&b);
    if (!href || !origin) {
        fail(err, TK_URL_EBAD, "out of room for the URL");
        return TK_ETOOBIG;
    }
    u->href = href;
    u->origin = origin;
    u->path = href + olen;
    return TK_OK;
}

tk_status tk_url_resolve(tk_arena *a, const tk_url *base, const char *ref, size_t len, tk_url *out,
                         tk_url_err *err)
{
    if (!ref)
        len = 0;
    const char *r = ref ? ref : "";
    trim(&r, &len);
    if (scheme_len(r, len) >= 0)
        return tk_url_parse(a, r, len, out, err);
    if (len > TK_URL_MAX) {
        if (err)
            fail(err, TK_URL_EBAD, "the URL is longer than %d bytes", TK_URL_MAX);
        memset(out, 0, sizeof *out);
        return TK_ETOOBIG;
    }
    tk_buf b;
    tk_buf_init(&b, 2 * TK_URL_MAX + 64);
    const char *bp = base->path;
    const char *q = strchr(bp, '?');
    size_t bpl = q ? (size_t)(q - bp) : strlen(bp);
    tk_status st;
    if (len >= 2 && r[0] == '/' && r[1] == '/') {
        st = tk_buf_printf(&b, "%s:%.*s", base->scheme, (int)len, r);
    } else if (len >= 1 && r[0] == '/') {
        st = tk_buf_printf(&b, "%s%.*s", base->origin, (int)len, r);
    } else if (len >= 1 && r[0] == '?') {
        st = tk_buf_printf(&b, "%s%.*s%.*s", base->origin, (int)bpl, bp, (int)len, r);
    } else if (len == 0 || r[0] == '#') {
        st = tk_buf_append_str(&b, base->href);
    } else {
        size_t dir = bpl;
        while (dir > 0 && bp[dir - 1] != '/')
            dir--;
        st = tk_buf_printf(&b, "%s%.*s%.*s", base->origin, (int)dir, bp, (int)len, r);
    }
    if (st != TK_OK) {
        tk_buf_free(&b);
        if (err)
            fail(err, TK_URL_EBAD, "the URL is longer than %d bytes", TK_URL_MAX);
        memset(out, 0, sizeof *out);
        return TK_ETOOBIG;
    }
    st = tk_url_parse(a, b.data, b.len, out, err);
    tk_buf_free(&b);
    return st;
}
