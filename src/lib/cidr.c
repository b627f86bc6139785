#include "lib/cidr.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const uint8_t v4_mapped_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

tk_ip tk_ip_unmapped(const tk_ip *ip)
{
    tk_ip out = *ip;
    if (ip->family == 6 && memcmp(ip->b, v4_mapped_prefix, 12) == 0) {
        memset(&out, 0, sizeof out);
        out.family = 4;
        memcpy(out.b, ip->b + 12, 4);
    }
    return out;
}

static void mask_to(tk_ip *ip, unsigned len)
{
    unsigned bytes = ip->family == 4 ? 4 : 16;
    for (unsigned i = 0; i < 16; i++) {
        unsigned bit = i * 8;
        if (i >= bytes || bit >= len)
            ip->b[i] = 0;
        else if (bit + 8 > len)
            ip->b[i] &= (uint8_t)(0xff << (8 - (len - bit)));
    }
}

void tk_cidr_format(const tk_cidr *c, char *out, size_t outlen)
{
    char a[48];
    tk_ip_format(&c->net, a, sizeof a);
    snprintf(out, outlen, "%s/%u", a, c->len);
}

tk_status tk_cidr_parse(const char *s, size_t n, tk_cidr *out, char *err, size_t errlen)
{
    char shown[72], buf[80];
    tk_str_snip(shown, sizeof shown, s, n);
    memset(out, 0, sizeof *out);
    if (n == 0 || n >= sizeof buf) {
        snprintf(err, errlen, "\"%s\": not an address or a CIDR prefix", shown);
        return TK_EINVAL;
    }
    memcpy(buf, s, n);
    buf[n] = '\0';
    if (memchr(buf, '\0', n)) {
        snprintf(err, errlen, "\"%s\": not an address or a CIDR prefix", shown);
        return TK_EINVAL;
    }
    char *slash = strchr(buf, '/');
    if (slash)
        *slash = '\0';
    char *addr = buf;
    size_t al = strlen(addr);
    if (al >= 2 && addr[0] == '[' && addr[al - 1] == ']') {
        addr[al - 1] = '\0';
        addr++;
    }
    tk_ip ip;
    if (!tk_ip_parse(addr, &ip)) {
        snprintf(err, errlen,
                 "\"%s\": not an address or a CIDR prefix (write a.b.c.d, a.b.c.d/len or an "
                 "IPv6 address or prefix)",
                 shown);
        return TK_EINVAL;
    }
    /* an IPv4-mapped prefix (::ffff:10.0.0.0/104) is the IPv4 prefix it maps */
    tk_ip v4 = tk_ip_unmapped(&ip);
    unsigned min = 0, max = ip.family == 4 ? 32 : 128;
    if (v4.family != ip.family)
        min = 96;
    int64_t len = max;
    if (slash && tk_parse_i64(slash + 1, min, max, &len) != TK_OK) {
        snprintf(err, errlen, "\"%s\": the prefix length must be a number from %u to %u", shown,
                 min, max);
        return TK_EINVAL;
    }
    if (v4.family != ip.family) {
        ip = v4;
        len -= 96;
    }
    tk_ip masked = ip;
    mask_to(&masked, (unsigned)len);
    if (memcmp(masked.b, ip.b, sizeof ip.b) != 0) {
        char m[48];
        tk_ip_format(&masked, m, sizeof m);
        snprintf(err, errlen, "\"%s\": host bits are set (did you mean %s/%u?)", shown, m,
                 (unsigned)len);
        return TK_EINVAL;
    }
    out->net = ip;
    out->len = (unsigned)len;
    return TK_OK;
}

static int is_sep(char c)
{
    return c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

tk_status tk_cidr_list_parse(const char *s, tk_cidr_list *out, char *err, size_t errlen)
{
    out->v = NULL;
    out->n = 0;
    if (!s)
        return TK_OK;
    size_t cap = 0;
    const char *p = s;
    for (;;) {
        while (*p && is_sep(*p))
            p++;
        if (!*p)
            break;
        const char *e = p;
        while (*e && !is_sep(*e))
            e++;
        if (out->n == TK_CIDR_LIST_MAX) {
            snprintf(err, errlen, "more than %d entries", TK_CIDR_LIST_MAX);
            tk_cidr_list_free(out);
            return TK_EINVAL;
        }
        if (out->n == cap) {
            cap = cap ? cap * 2 : 8;
            out->v = tk_realloc(out->v, cap * sizeof *out->v);
        }
        if (tk_cidr_parse(p, (size_t)(e - p), &out->v[out->n], err, errlen) != TK_OK) {
            tk_cidr_list_free(out);
            return TK_EINVAL;
        }
        out->n++;
        p = e;
    }
    return TK_OK;
}

void tk_cidr_list_free(tk_cidr_list *l)
{
    free(l->v);
    l->v = NULL;
    l->n = 0;
}

int tk_cidr_match(const tk_cidr *c, const tk_ip *ip)
{
    tk_ip a = tk_ip_unmapped(ip);
    if (a.family != c->net.family)
        return 0;
    mask_to(&a, c->len);
    return memcmp(a.b, c->net.b, sizeof a.b) == 0;
}

int tk_cidr_list_match(const tk_cidr_list *l, const tk_ip *ip)
{
    for (size_t i = 0; l && i < l->n; i++)
        if (tk_cidr_match(&l->v[i], ip))
            return 1;
    return 0;
}

static int all_digits(const char *s, size_t n)
{
    if (n == 0 || n > 5)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return 0;
    return 1;
}

int tk_xff_entry_parse(const char *s, size_t n, tk_ip *ip)
{
    memset(ip, 0, sizeof *ip);
    while (n && (*s == ' ' || *s == '\t')) {
        s++;
        n--;
    }
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        n--;
    char buf[64];
    if (n == 0 || n >= sizeof buf || memchr(s, '\0', n))
        return 0;
    if (s[0] == '[') {
        const char *rb = memchr(s, ']', n);
        if (!rb)
            return 0;
        size_t after = n - (size_t)(rb - s) - 1;
        if (after && !(rb[1] == ':' && all_digits(rb + 2, after - 1)))
            return 0;
        size_t al = (size_t)(rb - s) - 1;
        memcpy(buf, s + 1, al);
        buf[al] = '\0';
        return tk_ip_parse(buf, ip) && ip->family == 6;
    }
    const char *colon = memchr(s, ':', n);
    if (colon) {
        const char *last = colon;
        for (const char *c = colon + 1; c < s + n; c++)
            if (*c == ':')
                last = c;
        /* one colon: an IPv4 address and a port; more: a bare IPv6 address */
        if (last == colon) {
            if (!all_digits(colon + 1, n - (size_t)(colon - s) - 1))
                return 0;
            n = (size_t)(colon - s);
            memcpy(buf, s, n);
            buf[n] = '\0';
            return tk_ip_parse(buf, ip) && ip->family == 4;
        }
    }
    memcpy(buf, s, n);
    buf[n] = '\0';
    return tk_ip_parse(buf, ip);
}

int tk_forwarded_client(const tk_ip *peer, const char *xff, size_t len, const tk_cidr_list *trusted,
                        tk_ip *client)
{
    *client = tk_ip_unmapped(peer);
    if (!xff || !len || !tk_cidr_list_match(trusted, peer))
        return 0;
    int believed = 0;
    size_t end = len;
    while (end > 0 && believed < TK_XFF_MAX_HOPS) {
        size_t start = end;
        while (start > 0 && xff[start - 1] != ',')
            start--;
        tk_ip hop;
        if (!tk_xff_entry_parse(xff + start, end - start, &hop))
            break;
        *client = tk_ip_unmapped(&hop);
        believed++;
        if (!tk_cidr_list_match(trusted, &hop))
            break;
        if (start == 0)
            break;
        end = start - 1;
    }
    return believed;
}
