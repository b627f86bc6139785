#include "lib/ssrf.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

#include "lib/arena.h"
#include "lib/cond.h"
#include "lib/log.h"
#include "lib/tktime.h"

#define MAX_ENTRIES   4096
#define MAX_ABANDONED TK_SSRF_MAX_ABANDONED

const char *tk_ssrf_code_str(tk_ssrf_code c)
{
    switch (c) {
    case TK_SSRF_OK:
        return "ok";
    case TK_SSRF_BAD_URL:
        return "bad_url";
    case TK_SSRF_BAD_SCHEME:
        return "bad_scheme";
    case TK_SSRF_USERINFO:
        return "userinfo";
    case TK_SSRF_BAD_PORT:
        return "bad_port";
    case TK_SSRF_DENIED_HOST:
        return "denied_host";
    case TK_SSRF_BLOCKED_ADDRESS:
        return "blocked_address";
    case TK_SSRF_DNS_FAILED:
        return "dns_failed";
    case TK_SSRF_REDIRECT_BLOCKED:
        return "redirect_blocked";
    case TK_SSRF_TOO_MANY_REDIRECTS:
        return "too_many_redirects";
    case TK_SSRF_TOO_LARGE:
        return "too_large";
    case TK_SSRF_TIMEOUT:
        return "timeout";
    case TK_SSRF_FETCH_FAILED:
        return "fetch_failed";
    case TK_SSRF_CANCELLED:
        return "cancelled";
    }
    return "unknown";
}

/* ------------------------------------------------------------------------- */
/* The built-in address rules                                                */
/* ------------------------------------------------------------------------- */

struct range {
    uint8_t len;      /* prefix length */
    uint8_t net[16];  /* network bytes (4 used for IPv4) */
    const char *cidr; /* shown in reasons */
    const char *what;
    const char *note; /* appended after ": " when set */
};

#define META "a cloud metadata service"

/* First match wins: specific entries come before the ranges that contain them. */
static const struct range v4_rules[] = {
    {32, {0, 0, 0, 0}, "0.0.0.0/32", "unspecified", NULL},
    {8, {0}, "0.0.0.0/8", "\"this network\"", NULL},
    {8, {10}, "10.0.0.0/8", "private", "RFC 1918"},
    {32,
     {100, 100, 100, 200},
     "100.64.0.0/10",
     "CGNAT shared address space",
     META " (Alibaba Cloud, 100.100.100.200)"},
    {10, {100, 64}, "100.64.0.0/10", "CGNAT shared address space", NULL},
    {8, {127}, "127.0.0.0/8", "loopback", NULL},
    {32,
     {169, 254, 169, 254},
     "169.254.0.0/16",
     "link-local",
     META " (AWS, GCP, Azure, OpenStack, DigitalOcean, Oracle: 169.254.169.254)"},
    {32,
     {169, 254, 170, 2},
     "169.254.0.0/16",
     "link-local",
     META " (AWS ECS task metadata, 169.254.170.2)"},
    {32,
     {169, 254, 170, 23},
     "169.254.0.0/16",
     "link-local",
     META " (AWS EKS pod identity, 169.254.170.23)"},
    {16, {169, 254}, "169.254.0.0/16", "link-local", NULL},
    {12, {172, 16}, "172.16.0.0/12", "private", "RFC 1918"},
    {32,
     {192, 0, 0, 192},
     "192.0.0.0/24",
     "IETF protocol assignments",
     META " (Oracle Cloud, 192.0.0.192)"},
    {24, {192, 0, 0}, "192.0.0.0/24", "IETF protocol assignments", NULL},
    {24, {192, 0, 2}, "192.0.2.0/24", "documentation", "TEST-NET-1"},
    {24, {192, 31, 196}, "192.31.196.0/24", "AS112 DNS sink service", NULL},
    {24, {192, 52, 193}, "192.52.193.0/24", "AMT relay anycast", NULL},
    {24, {192, 88, 99}, "192.88.99.0/24", "the deprecated 6to4 relay anycast range", NULL},
    {16, {192, 168}, "192.168.0.0/16", "private", "RFC 1918"},
    {24, {192, 175, 48}, "192.175.48.0/24", "AS112 DNS sink service (direct delegation)", NULL},
    {15, {198, 18}, "198.18.0.0/15", "benchmarking", NULL},
    {24, {198, 51, 100}, "198.51.100.0/24", "documentation", "TEST-NET-2"},
    {24, {203, 0, 113}, "203.0.113.0/24", "documentation", "TEST-NET-3"},
    {4, {224}, "224.0.0.0/4", "multicast", NULL},
    {32, {255, 255, 255, 255}, "255.255.255.255/32", "broadcast", NULL},
    {4, {240}, "240.0.0.0/4", "reserved", NULL},
};

/*
 * IPv6. 2001::/23 is the IETF protocol assignments block: not globally
 * reachable as a whole. Some assignments inside it are marked globally
 * reachable by IANA (anycast for PCP/TURN/DNS-SD, AMT relays, AS112, the
 * ORCHIDv2 and DET identifiers), but none of them serves web content, so the
 * whole block is refused (fail closed); SSRF_ALLOW admits a part when an
 * install needs it. Teredo (2001::/32) is decoded before these rules and
 * admitted only when both IPv4 addresses it carries are public.
 */
static const struct range v6_rules[] = {
    {48,
     {0x00, 0x64, 0xff, 0x9b, 0x00, 0x01},
     "64:ff9b:1::/48",
     "local-use NAT64",
     "RFC 8215; its address layout is the operator's, so the IPv4 inside cannot be checked"},
    {32,
     {0x20, 0x01, 0x00, 0x01},
     "2001:1::/32",
     "IETF protocol assignments (2001::/23)",
     "PCP, TURN and DNS-SD anycast"},
    {48, {0x20, 0x01, 0x00, 0x02}, "2001:2::/48", "benchmarking", NULL},
    {32, {0x20, 0x01, 0x00, 0x03}, "2001:3::/32", "AMT relay anycast", NULL},
    {48, {0x20, 0x01, 0x00, 0x04, 0x01, 0x12}, "2001:4:112::/48", "AS112 DNS sink service", NULL},
    {28, {0x20, 0x01, 0x00, 0x10}, "2001:10::/28", "ORCHID (deprecated)", NULL},
    {28, {0x20, 0x01, 0x00, 0x20}, "2001:20::/28", "ORCHIDv2 identifiers", NULL},
    {28, {0x20, 0x01, 0x00, 0x30}, "2001:30::/28", "drone remote ID identifiers (DETs)", NULL},
    {23, {0x20, 0x01}, "2001::/23", "IETF protocol assignments", NULL},
    {32, {0x20, 0x01, 0x0d, 0xb8}, "2001:db8::/32", "documentation", NULL},
    {48,
     {0x26, 0x20, 0x00, 0x4f, 0x80, 0x00},
     "2620:4f:8000::/48",
     "AS112 DNS sink service (direct delegation)",
     NULL},
    {20, {0x3f, 0xff}, "3fff::/20", "documentation", NULL},
    {64, {0x01, 0x00}, "100::/64", "discard-only", NULL},
    {64, {0x01, 0x00, 0, 0, 0, 0, 0, 0x01}, "100:0:0:1::/64", "the dummy IPv6 prefix", NULL},
    {16, {0x5f, 0x00}, "5f00::/16", "SRv6 SIDs", NULL},
    {128,
     {0xfd, 0x00, 0x0e, 0xc2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, 0x54},
     "fc00::/7",
     "unique-local",
     META " (AWS EC2 over IPv6, fd00:ec2::254)"},
    {7, {0xfc}, "fc00::/7", "unique-local", NULL},
    {10, {0xfe, 0x80}, "fe80::/10", "link-local", NULL},
    {10, {0xfe, 0xc0}, "fec0::/10", "site-local (deprecated)", NULL},
    {8, {0xff}, "ff00::/8", "multicast", NULL},
};

static int ip_eq(const tk_ip *a, const tk_ip *b)
{
    return a->family == b->family && memcmp(a->b, b->b, a->family == 4 ? 4 : 16) == 0;
}

static int prefix_match(const uint8_t *a, const uint8_t *net, unsigned len)
{
    unsigned full = len / 8, rem = len % 8;
    if (memcmp(a, net, full) != 0)
        return 0;
    if (rem) {
        uint8_t m = (uint8_t)(0xff << (8 - rem));
        return (a[full] & m) == (net[full] & m);
    }
    return 1;
}

static void range_phrase(const struct range *r, char *why, size_t whylen)
{
    snprintf(why, whylen, "%s (%s)%s%s", r->what, r->cidr, r->note ? ": " : "",
             r->note ? r->note : "");
}

static int v4_blocked(const uint8_t b[4], char *why, size_t whylen)
{
    for (size_t i = 0; i < TK_ARRAY_LEN(v4_rules); i++) {
        if (prefix_match(b, v4_rules[i].net, v4_rules[i].len)) {
            range_phrase(&v4_rules[i], why, whylen);
            return 1;
        }
    }
    return 0;
}

static const uint8_t pfx_mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
static const uint8_t pfx_zero[12] = {0};
static const uint8_t pfx_nat64[12] = {0, 0x64, 0xff, 0x9b};

/* An IPv4 address carried by an IPv6 form, and how to name it. */
struct embedded {
    uint8_t v4[4];
    const char *form; /* "IPv4-mapped IPv6 (::ffff:0:0/96)" */
    const char *role; /* "", "client ", "server " */
};

/* Fills up to 2 embedded IPv4 addresses; returns how many. */
static int embedded_v4(const tk_ip *ip, struct embedded out[2])
{
    const uint8_t *b = ip->b;
    if (ip->family != 6)
        return 0;
    if (memcmp(b, pfx_mapped, 12) == 0) {
        memcpy(out[0].v4, b + 12, 4);
        out[0].form = "IPv4-mapped IPv6 (::ffff:0:0/96)";
        out[0].role = "";
        return 1;
    }
    if (memcmp(b, pfx_zero, 12) == 0) {
        memcpy(out[0].v4, b + 12, 4);
        out[0].form = "IPv4-compatible IPv6 (::/96, deprecated)";
        out[0].role = "";
        return 1;
    }
    if (memcmp(b, pfx_nat64, 12) == 0) {
        memcpy(out[0].v4, b + 12, 4);
        out[0].form = "NAT64 (64:ff9b::/96)";
        out[0].role = "";
        return 1;
    }
    if (b[0] == 0x20 && b[1] == 0x02) {
        memcpy(out[0].v4, b + 2, 4);
        out[0].form = "6to4 (2002::/16)";
        out[0].role = "";
        return 1;
    }
    if (b[0] == 0x20 && b[1] == 0x01 && b[2] == 0 && b[3] == 0) {
        for (int i = 0; i < 4; i++)
            out[0].v4[i] = (uint8_t)(b[12 + i] ^ 0xff);
        out[0].form = "Teredo (2001::/32)";
        out[0].role = "client ";
        memcpy(out[1].v4, b + 4, 4);
        out[1].form = "Teredo (2001::/32)";
        out[1].role = "server ";
        return 2;
    }
    return 0;
}

int tk_ssrf_addr_blocked(const tk_ip *ip, char *why, size_t whylen)
{
    char sub[200], v4s[16];
    if (ip->family == 4)
        return v4_blocked(ip->b, why, whylen);
    if (ip->family != 6) {
        snprintf(why, whylen, "not an IP address");
        return 1;
    }
    const uint8_t *b = ip->b;
    static const uint8_t zero[16], one[16] = {[15] = 1};
    if (memcmp(b, zero, 16) == 0) {
        snprintf(why, whylen, "unspecified (::/128)");
        return 1;
    }
    if (memcmp(b, one, 16) == 0) {
        snprintf(why, whylen, "loopback (::1/128)");
        return 1;
    }
    struct embedded e[2];
    int ne = embedded_v4(ip, e);
    int always = ne > 0 && (memcmp(b, pfx_mapped, 12) == 0 || memcmp(b, pfx_zero, 12) == 0);
    for (int i = 0; i < ne; i++) {
        tk_ip v4 = {.family = 4};
        memcpy(v4.b, e[i].v4, 4);
        tk_ip_format(&v4, v4s, sizeof v4s);
        if (v4_blocked(e[i].v4, sub, sizeof sub)) {
            snprintf(why, whylen, "%s for %s%s, which is %s", e[i].form, e[i].role, v4s, sub);
            return 1;
        }
        if (always) {
            snprintf(why, whylen, "%s for %s (use the IPv4 address itself)", e[i].form, v4s);
            return 1;
        }
    }
    if (ne > 0 && memcmp(b, pfx_nat64, 12) == 0)
        return 0; /* 64:ff9b::/96 carrying a public address */
    if (ne > 0 && b[0] == 0x20 && b[1] == 0x01 && b[2] == 0 && b[3] == 0)
        return 0; /* Teredo carrying two public addresses */
    for (size_t i = 0; i < TK_ARRAY_LEN(v6_rules); i++) {
        if (prefix_match(b, v6_rules[i].net, v6_rules[i].len)) {
            range_phrase(&v6_rules[i], why, whylen);
            return 1;
        }
    }
    if ((b[0] & 0xe0) != 0x20) {
        snprintf(why, whylen, "reserved (outside 2000::/3, the global unicast space)");
        return 1;
    }
    return 0;
}

/* ------------------------------------------------------------------------- */
/* Operator lists                                                            */
/* ------------------------------------------------------------------------- */

enum { ENT_NAME = 1, ENT_SUFFIX, ENT_NET };

struct tk_ssrf_entry {
    int kind;
    char name[TK_HOST_MAX + 1]; /* ENT_NAME: the host; ENT_SUFFIX: below this */
    tk_ip net;                  /* ENT_NET */
    unsigned len;
    int port;                    /* 0: any port; else only this one */
    char text[TK_HOST_MAX + 16]; /* normalised, for reasons */
};

/* Appends ":port" to an entry's text ("[...]:port" when the text has a colon). */
static void entry_text_port(tk_ssrf_entry *e)
{
    if (!e->port)
        return;
    char t[sizeof e->text];
    snprintf(t, sizeof t, "%s", e->text);
    snprintf(e->text, sizeof e->text, strchr(t, ':') ? "[%s]:%d" : "%s:%d", t, e->port);
}

/* Splits a trailing ":port" off buf ("host:port", "a.b.c.d:port", "[v6]:port",
 * "cidr:port"; a bare IPv6 address has no port). 1 and *port set when there is
 * one, 0 when none, -1 when it is not a port. */
static int split_port(char *buf, int *port)
{
    char *colon = NULL;
    if (buf[0] == '[') {
        char *close = strchr(buf, ']');
        if (!close || close[1] != ':')
            return 0; /* "[v6]" or "[v6]/len": no port */
        colon = close + 1;
        memmove(buf, buf + 1, (size_t)(close - buf) - 1); /* drop the brackets */
        buf[close - buf - 1] = '\0';
        char *ps = colon + 1;
        int64_t v;
        if (!*ps || ps[0] == '+' || ps[0] == '-' || tk_parse_i64(ps, 1, 65535, &v) != TK_OK)
            return -1;
        *port = (int)v;
        return 1;
    }
    colon = strchr(buf, ':');
    if (!colon || strchr(colon + 1, ':'))
        return 0;
    int64_t v;
    const char *ps = colon + 1;
    if (!*ps || ps[0] == '+' || ps[0] == '-' || tk_parse_i64(ps, 1, 65535, &v) != TK_OK)
        return -1;
    *colon = '\0';
    *port = (int)v;
    return 1;
}

static int is_sep(int c)
{
    return c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static tk_status parse_entry_body(char *buf, size_t n, const char *shown, tk_ssrf_entry *e,
                                  char *err, size_t errlen);

static tk_status parse_entry(const char *tok, size_t n, tk_ssrf_entry *e, char *err, size_t errlen)
{
    char shown[96], buf[600];
    tk_str_snip(shown, sizeof shown, tok, n);
    memset(e, 0, sizeof *e);
    if (n >= sizeof buf) {
        snprintf(err, errlen, "\"%s\": too long", shown);
        return TK_EINVAL;
    }
    memcpy(buf, tok, n);
    buf[n] = '\0';
    int port = 0;
    if (split_port(buf, &port) < 0) {
        snprintf(err, errlen, "\"%s\": the port must be a number from 1 to 65535", shown);
        return TK_EINVAL;
    }
    tk_status st = parse_entry_body(buf, strlen(buf), shown, e, err, errlen);
    if (st == TK_OK && port) {
        e->port = port;
        entry_text_port(e);
    }
    return st;
}

static tk_status parse_entry_body(char *buf, size_t n, const char *shown, tk_ssrf_entry *e,
                                  char *err, size_t errlen)
{
    tk_url_err ue;
    tk_host h;

    char *slash = strchr(buf, '/');
    if (slash) {
        *slash = '\0';
        char *addr = buf;
        size_t al = strlen(addr);
        if (al >= 2 && addr[0] == '[' && addr[al - 1] == ']') {
            addr[al - 1] = '\0';
            addr++;
        }
        int64_t len;
        if (!tk_ip_parse(addr, &e->net)) {
            snprintf(err, errlen, "\"%s\": not a CIDR prefix (write a.b.c.d/len or an IPv6 prefix)",
                     shown);
            return TK_EINVAL;
        }
        int max = e->net.family == 4 ? 32 : 128;
        if (tk_parse_i64(slash + 1, 0, max, &len) != TK_OK) {
            snprintf(err, errlen, "\"%s\": the prefix length must be a number from 0 to %d", shown,
                     max);
            return TK_EINVAL;
        }
        e->len = (unsigned)len;
        tk_ip masked = e->net;
        int bytes = max / 8;
        for (int i = 0; i < bytes; i++) {
            int bit = i * 8;
            if (bit >= (int)e->len)
                masked.b[i] = 0;
            else if (bit + 8 > (int)e->len)
                masked.b[i] &= (uint8_t)(0xff << (8 - (e->len - (unsigned)bit)));
        }
        if (memcmp(masked.b, e->net.b, 16) != 0) {
            char m[48];
            tk_ip_format(&masked, m, sizeof m);
            snprintf(err, errlen, "\"%s\": host bits are set (did you mean %s/%u?)", shown, m,
                     e->len);
            return TK_EINVAL;
        }
        e->kind = ENT_NET;
        char a[48];
        tk_ip_format(&e->net, a, sizeof a);
        snprintf(e->text, sizeof e->text, "%s/%u", a, e->len);
        return TK_OK;
    }
    if (n >= 2 && buf[0] == '*' && buf[1] == '.') {
        if (tk_url_host_parse(buf + 2, n - 2, &h, &ue) != TK_OK) {
            snprintf(err, errlen, "\"%s\": %s", shown, ue.reason);
            return TK_EINVAL;
        }
        if (h.type != TK_HOST_NAME) {
            snprintf(err, errlen, "\"%s\": a wildcard applies to names, not addresses", shown);
            return TK_EINVAL;
        }
        e->kind = ENT_SUFFIX;
        snprintf(e->name, sizeof e->name, "%s", h.text);
        snprintf(e->text, sizeof e->text, "*.%s", h.text);
        return TK_OK;
    }
    if (strchr(buf, '*')) {
        snprintf(err, errlen,
                 "\"%s\": a wildcard must be the whole first label (\"*.example.com\")", shown);
        return TK_EINVAL;
    }
    if (strchr(buf, ':') && tk_ip_parse(buf, &e->net)) {
        /* A bare IPv6 address. */
    } else {
        if (strchr(buf, ':') && buf[0] != '[') {
            snprintf(err, errlen, "\"%s\": not a host, an address or a CIDR prefix", shown);
            return TK_EINVAL;
        }
        if (tk_url_host_parse(buf, n, &h, &ue) != TK_OK) {
            snprintf(err, errlen, "\"%s\": %s", shown, ue.reason);
            return TK_EINVAL;
        }
        if (h.type == TK_HOST_NAME) {
            e->kind = ENT_NAME;
            snprintf(e->name, sizeof e->name, "%s", h.text);
            snprintf(e->text, sizeof e->text, "%s", h.text);
            return TK_OK;
        }
        e->net = h.ip;
    }
    e->kind = ENT_NET;
    e->len = e->net.family == 4 ? 32 : 128;
    char a[48];
    tk_ip_format(&e->net, a, sizeof a);
    snprintf(e->text, sizeof e->text, "%s/%u", a, e->len);
    return TK_OK;
}

static tk_status add_list(tk_ssrf_entry **list, size_t *count, const char *s, char *err,
                          size_t errlen)
{
    if (!s)
        return TK_OK;
    const char *p = s;
    while (*p) {
        while (*p && is_sep((unsigned char)*p))
            p++;
        if (!*p)
            break;
        const char *start = p;
        while (*p && !is_sep((unsigned char)*p))
            p++;
        if (*count >= MAX_ENTRIES) {
            snprintf(err, errlen, "more than %d entries", MAX_ENTRIES);
            return TK_EINVAL;
        }
        tk_ssrf_entry e;
        if (parse_entry(start, (size_t)(p - start), &e, err, errlen) != TK_OK)
            return TK_EINVAL;
        *list = tk_realloc(*list, (*count + 1) * sizeof **list);
        (*list)[(*count)++] = e;
    }
    return TK_OK;
}

void tk_ssrf_policy_init(tk_ssrf_policy *p)
{
    memset(p, 0, sizeof *p);
    p->max_bytes = TK_SSRF_DEFAULT_MAX_BYTES;
    p->timeout_ms = TK_SSRF_DEFAULT_TIMEOUT_MS;
    p->max_redirects = TK_SSRF_DEFAULT_MAX_REDIRECTS;
    p->allow_setting = "SSRF_ALLOW";
    p->deny_setting = "SSRF_DENY";
    p->ports_setting = "SSRF_ALLOWED_PORTS";
}

void tk_ssrf_policy_free(tk_ssrf_policy *p)
{
    free(p->allow);
    free(p->deny);
    tk_ssrf_policy_init(p);
}

tk_status tk_ssrf_policy_allow(tk_ssrf_policy *p, const char *list, char *err, size_t errlen)
{
    return add_list(&p->allow, &p->nallow, list, err, errlen);
}

tk_status tk_ssrf_policy_deny(tk_ssrf_policy *p, const char *list, char *err, size_t errlen)
{
    return add_list(&p->deny, &p->ndeny, list, err, errlen);
}

tk_status tk_ssrf_policy_allow_ports(tk_ssrf_policy *p, const char *list, char *err, size_t errlen)
{
    const char *s = list ? list : "";
    while (*s) {
        while (*s && is_sep((unsigned char)*s))
            s++;
        if (!*s)
            break;
        const char *start = s;
        while (*s && !is_sep((unsigned char)*s))
            s++;
        char tok[16], shown[96];
        size_t n = (size_t)(s - start);
        tk_str_snip(shown, sizeof shown, start, n);
        int64_t v;
        if (n >= sizeof tok) {
            snprintf(err, errlen, "\"%s\" is not a port (1-65535)", shown);
            return TK_EINVAL;
        }
        memcpy(tok, start, n);
        tok[n] = '\0';
        if (tok[0] == '+' || tok[0] == '-' || tk_parse_i64(tok, 1, 65535, &v) != TK_OK) {
            snprintf(err, errlen, "\"%s\" is not a port (1-65535)", shown);
            return TK_EINVAL;
        }
        int dup = v == 80 || v == 443;
        for (size_t i = 0; i < p->nports && !dup; i++)
            dup = p->ports[i] == v;
        if (dup)
            continue;
        if (p->nports >= TK_SSRF_MAX_PORTS) {
            snprintf(err, errlen, "more than %d ports", TK_SSRF_MAX_PORTS);
            return TK_EINVAL;
        }
        p->ports[p->nports++] = (uint16_t)v;
    }
    return TK_OK;
}

/* Bytes with an optional binary suffix: 2097152, 512K, 2M, 1G (also KB/KiB...). */
int tk_ssrf_parse_size(const char *s, uint64_t *out)
{
    uint64_t v = 0;
    size_t i = 0;
    if (!s || !(s[0] >= '0' && s[0] <= '9'))
        return 0;
    for (; s[i] >= '0' && s[i] <= '9'; i++) {
        v = v * 10 + (uint64_t)(s[i] - '0');
        if (v > (1ull << 40))
            return 0;
    }
    const char *suf = s + i;
    uint64_t mul = 1;
    static const struct {
        const char *s;
        uint64_t m;
    } sufs[] = {{"", 1},          {"b", 1},        {"k", 1 << 10},  {"kb", 1 << 10},
                {"kib", 1 << 10}, {"m", 1 << 20},  {"mb", 1 << 20}, {"mib", 1 << 20},
                {"g", 1 << 30},   {"gb", 1 << 30}, {"gib", 1 << 30}};
    size_t k = 0;
    for (; k < TK_ARRAY_LEN(sufs); k++)
        if (strcasecmp(suf, sufs[k].s) == 0)
            break;
    if (k == TK_ARRAY_LEN(sufs))
        return 0;
    mul = sufs[k].m;
    *out = v * mul;
    return 1;
}

tk_status tk_ssrf_policy_from_env(tk_ssrf_policy *p, char *err, size_t errlen)
{
    tk_ssrf_policy_init(p);
    char e[320];
    const char *v;
    static const char *const lists[] = {"SSRF_ALLOW", "SSRF_DENY", "SSRF_ALLOWED_PORTS"};
    for (size_t i = 0; i < TK_ARRAY_LEN(lists); i++) {
        v = getenv(lists[i]);
        if (!v || !*v)
            continue;
        tk_status st = i == 0   ? tk_ssrf_policy_allow(p, v, e, sizeof e)
                       : i == 1 ? tk_ssrf_policy_deny(p, v, e, sizeof e)
                                : tk_ssrf_policy_allow_ports(p, v, e, sizeof e);
        if (st != TK_OK) {
            snprintf(err, errlen, "%s: %s", lists[i], e);
            goto fail;
        }
    }
    char shown[96];
    v = getenv("FETCH_MAX_BYTES");
    if (v && *v) {
        uint64_t n;
        if (!tk_ssrf_parse_size(v, &n) || n < 1 || n > (1u << 30)) {
            tk_str_snip(shown, sizeof shown, v, strlen(v));
            snprintf(err, errlen,
                     "FETCH_MAX_BYTES: \"%s\" is not a size from 1 byte to 1G (e.g. 2097152, "
                     "512K, 2M)",
                     shown);
            goto fail;
        }
        p->max_bytes = (size_t)n;
    }
    v = getenv("FETCH_TIMEOUT");
    if (v && *v) {
        int64_t ms;
        if (tk_parse_duration(v, &ms) != TK_OK || ms < 100 || ms > 10 * 60 * 1000) {
            tk_str_snip(shown, sizeof shown, v, strlen(v));
            snprintf(err, errlen,
                     "FETCH_TIMEOUT: \"%s\" is not a duration from 100ms to 10m (e.g. 15s)", shown);
            goto fail;
        }
        p->timeout_ms = (long)ms;
    }
    v = getenv("FETCH_MAX_REDIRECTS");
    if (v && *v) {
        int64_t n;
        if (tk_parse_i64(v, 0, TK_SSRF_MAX_REDIRECTS, &n) != TK_OK) {
            tk_str_snip(shown, sizeof shown, v, strlen(v));
            snprintf(err, errlen, "FETCH_MAX_REDIRECTS: \"%s\" is not a number from 0 to %d", shown,
                     TK_SSRF_MAX_REDIRECTS);
            goto fail;
        }
        p->max_redirects = (int)n;
    }
    return TK_OK;
fail:
    tk_ssrf_policy_free(p);
    return TK_EINVAL;
}

/* Entries for a port: those without a port and those with this one; a
 * negative port (-port) asks for entries naming exactly that port. */
static int port_matches(const tk_ssrf_entry *e, int port)
{
    return port < 0 ? e->port == -port : e->port == 0 || e->port == port;
}

static const tk_ssrf_entry *match_name(const tk_ssrf_entry *list, size_t n, const char *host,
                                       int port)
{
    size_t hl = strlen(host);
    for (size_t i = 0; i < n; i++) {
        const tk_ssrf_entry *e = &list[i];
        if (!port_matches(e, port))
            continue;
        if (e->kind == ENT_NAME && strcmp(e->name, host) == 0)
            return e;
        if (e->kind == ENT_SUFFIX) {
            size_t sl = strlen(e->name);
            if (hl > sl + 1 && host[hl - sl - 1] == '.' && strcmp(host + hl - sl, e->name) == 0)
                return e;
        }
    }
    return NULL;
}

static const tk_ssrf_entry *match_ip(const tk_ssrf_entry *list, size_t n, const tk_ip *ip, int port)
{
    for (size_t i = 0; i < n; i++) {
        const tk_ssrf_entry *e = &list[i];
        if (port_matches(e, port) && e->kind == ENT_NET && e->net.family == ip->family &&
            prefix_match(ip->b, e->net.b, e->len))
            return e;
    }
    return NULL;
}

/* ------------------------------------------------------------------------- */
/* The check                                                                 */
/* ------------------------------------------------------------------------- */

static tk_status sys_resolve(void *ud, const char *host, tk_ip *out, size_t max, size_t *n,
                             char *err, size_t errlen)
{
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    *n = 0;
    int rc = getaddrinfo(host, NULL, &hints, &res);
    if (rc != 0) {
        char eb[128];
        snprintf(err, errlen, "%s",
                 rc == EAI_SYSTEM ? strerror_r(errno, eb, sizeof eb) : gai_strerror(rc));
        return rc == EAI_NONAME || rc == EAI_NODATA ? TK_ENOENT : TK_ERROR;
    }
    tk_status st = TK_OK;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        tk_ip ip;
        memset(&ip, 0, sizeof ip);
        if (ai->ai_family == AF_INET && ai->ai_addrlen >= sizeof(struct sockaddr_in)) {
            struct sockaddr_in sin;
            memcpy(&sin, ai->ai_addr, sizeof sin);
            ip.family = 4;
            memcpy(ip.b, &sin.sin_addr, 4);
        } else if (ai->ai_family == AF_INET6 && ai->ai_addrlen >= sizeof(struct sockaddr_in6)) {
            struct sockaddr_in6 sin6;
            memcpy(&sin6, ai->ai_addr, sizeof sin6);
            ip.family = 6;
            memcpy(ip.b, &sin6.sin6_addr, 16);
        } else {
            continue;
        }
        int dup = 0;
        for (size_t i = 0; i < *n && !dup; i++)
            dup = ip_eq(&out[i], &ip);
        if (dup)
            continue;
        if (*n == max) {
            snprintf(err, errlen, "more than %zu addresses", max);
            st = TK_ETOOBIG;
            break;
        }
        out[(*n)++] = ip;
    }
    freeaddrinfo(res);
    return st;
}

/*
 * A lookup bounded by a deadline. The resolver runs on a detached helper
 * thread; the caller waits for it until the deadline. The lookup is shared by
 * the two (refs): whoever lets go last frees it, so a caller that stops
 * waiting leaves the helper a valid place to write its answer, which is then
 * thrown away. Abandoned lookups are counted; past MAX_ABANDONED a new one is
 * refused at once instead of adding threads behind a resolver that is stuck.
 */
struct lookup {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done, refs, abandoned;
    tk_ssrf_resolve_fn fn;
    void *ud;
    char host[TK_HOST_MAX + 1];
    tk_ip addrs[TK_SSRF_MAX_ADDRS];
    size_t n;
    tk_status st;
    char err[200];
};

static atomic_int abandoned_lookups;

int tk_ssrf_abandoned_lookups(void)
{
    return atomic_load(&abandoned_lookups);
}

static void lookup_free(struct lookup *l)
{
    pthread_cond_destroy(&l->cv);
    pthread_mutex_destroy(&l->mu);
    free(l);
}

static void *lookup_main(void *arg)
{
    struct lookup *l = arg;
    size_t n = 0;
    l->err[0] = '\0';
    /* Only this thread writes addrs, n, st and err until done is set. */
    tk_status st = l->fn(l->ud, l->host, l->addrs, TK_SSRF_MAX_ADDRS, &n, l->err, sizeof l->err);
    pthread_mutex_lock(&l->mu);
    l->n = n > TK_SSRF_MAX_ADDRS ? TK_SSRF_MAX_ADDRS : n;
    l->st = st;
    l->done = 1;
    int last = --l->refs == 0, abandoned = l->abandoned;
    pthread_cond_signal(&l->cv);
    pthread_mutex_unlock(&l->mu);
    if (last) {
        if (abandoned) {
            tk_debug("ssrf", "msg=\"abandoned lookup finished\" host=%s", l->host);
            atomic_fetch_sub(&abandoned_lookups, 1);
        }
        lookup_free(l);
    }
    return NULL;
}

/* Like a resolver call, plus TK_ETIMEOUT when deadline_ms (tk_mono_ms) passes
 * first. */
static tk_status bounded_resolve(tk_ssrf_resolve_fn fn, void *ud, const char *host, tk_ip *out,
                                 size_t *n, char *err, size_t errlen, int64_t deadline_ms)
{
    *n = 0;
    if (atomic_load(&abandoned_lookups) >= MAX_ABANDONED) {
        snprintf(err, errlen,
                 "%d earlier lookups are still unanswered: the resolver is not answering; not "
                 "asked again until they end",
                 MAX_ABANDONED);
        return TK_ERROR;
    }
    struct lookup *l = tk_malloc(sizeof *l);
    memset(l, 0, sizeof *l);
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv, NULL);
    l->fn = fn;
    l->ud = ud;
    l->refs = 2;
    snprintf(l->host, sizeof l->host, "%s", host);

    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* the helper takes no signals */
    pthread_t th;
    int rc = pthread_create(&th, &attr, lookup_main, l);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        char eb[128];
        snprintf(err, errlen, "could not start the lookup: %s", strerror_r(rc, eb, sizeof eb));
        lookup_free(l);
        return TK_ERROR;
    }

    pthread_mutex_lock(&l->mu);
    while (!l->done && tk_cond_wait_until(&l->cv, &l->mu, deadline_ms) == 0)
        ;
    tk_status st;
    if (l->done) {
        memcpy(out, l->addrs, l->n * sizeof *out);
        *n = l->n;
        snprintf(err, errlen, "%s", l->err);
        st = l->st;
    } else {
        /* Let go: the helper frees the lookup when the resolver returns. */
        l->abandoned = 1;
        atomic_fetch_add(&abandoned_lookups, 1);
        snprintf(err, errlen, "no answer from the resolver in time");
        st = TK_ETIMEOUT;
    }
    int last = --l->refs == 0;
    pthread_mutex_unlock(&l->mu);
    if (last)
        lookup_free(l);
    return st;
}

static int port_allowed(const tk_ssrf_policy *p, int port)
{
    if (port == 80 || port == 443)
        return 1;
    for (size_t i = 0; i < p->nports; i++)
        if (p->ports[i] == port)
            return 1;
    return 0;
}

/* The port rule: 0 when the port is allowed for the host (80, 443, the extra
 * ports, or an allowlist name entry with this very port); 1 when only
 * allowlist address entries with this very port can admit it (each address
 * must match one); -1 when nothing can. */
static int port_rule(const tk_ssrf_policy *p, const char *host, tk_host_type type, int port)
{
    if (port_allowed(p, port))
        return 0;
    if (type == TK_HOST_NAME && match_name(p->allow, p->nallow, host, -port))
        return 0;
    for (size_t i = 0; i < p->nallow; i++)
        if (p->allow[i].kind == ENT_NET && p->allow[i].port == port)
            return 1;
    return -1;
}

/* One address against the policy: fills why ("loopback (127.0.0.0/8)", to follow
 * "<addr> is ") and sets *listed when an allowlist entry admitted it. */
static tk_ssrf_code check_addr(const tk_ssrf_policy *p, const tk_ip *ip, int port,
                               const tk_ssrf_entry *name_allowed, char *why, size_t whylen,
                               int *listed)
{
    *listed = 0;
    const tk_ssrf_entry *e = match_ip(p->deny, p->ndeny, ip, port);
    struct embedded emb[2];
    int ne = embedded_v4(ip, emb);
    for (int i = 0; !e && i < ne; i++) {
        tk_ip v4 = {.family = 4};
        memcpy(v4.b, emb[i].v4, 4);
        e = match_ip(p->deny, p->ndeny, &v4, port);
    }
    if (e) {
        snprintf(why, whylen, "in the operator denylist (%s entry %s)", p->deny_setting, e->text);
        return TK_SSRF_DENIED_HOST;
    }
    static const uint8_t zero[16];
    if (memcmp(ip->b, zero, ip->family == 4 ? 4 : 16) == 0) {
        snprintf(why, whylen, "unspecified (%s), never a valid target",
                 ip->family == 4 ? "0.0.0.0/32" : "::/128");
        return TK_SSRF_BLOCKED_ADDRESS;
    }
    if (name_allowed) {
        snprintf(why, whylen, "admitted by the operator allowlist (%s entry %s)", p->allow_setting,
                 name_allowed->text);
        *listed = 1;
        return TK_SSRF_OK;
    }
    e = match_ip(p->allow, p->nallow, ip, port);
    if (e) {
        snprintf(why, whylen, "admitted by the operator allowlist (%s entry %s)", p->allow_setting,
                 e->text);
        *listed = 1;
        return TK_SSRF_OK;
    }
    if (tk_ssrf_addr_blocked(ip, why, whylen))
        return TK_SSRF_BLOCKED_ADDRESS;
    snprintf(why, whylen, "a public address");
    return TK_SSRF_OK;
}

static tk_status refuse(tk_ssrf_target *t, tk_ssrf_code code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static tk_status refuse(tk_ssrf_target *t, tk_ssrf_code code, const char *fmt, ...)
{
    t->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->reason, sizeof t->reason, fmt, ap);
    va_end(ap);
    t->naddrs = 0;
    tk_debug("ssrf", "msg=\"refused\" code=%s host=%s port=%d", tk_ssrf_code_str(code),
             t->host[0] ? t->host : "-", t->port);
    return code == TK_SSRF_DNS_FAILED ? TK_ENOENT
           : code == TK_SSRF_TIMEOUT  ? TK_ETIMEOUT
                                      : TK_EDENIED;
}

/* How long a check may take: until deadline_ms (tk_mono_ms); limit_ms is the
 * time limit it comes from, for reasons. */
struct bound {
    int64_t deadline_ms;
    long limit_ms;
};

static struct bound policy_bound(const tk_ssrf_policy *p)
{
    long limit = p->timeout_ms > 0 ? p->timeout_ms : TK_SSRF_DEFAULT_TIMEOUT_MS;
    return (struct bound){tk_mono_ms() + limit, limit};
}

/* The check after parsing: port, lists, addresses. */
static tk_status check_parsed(const tk_ssrf_policy *p, const tk_host *h, int port,
                              tk_ssrf_target *t, struct bound b)
{
    snprintf(t->host, sizeof t->host, "%s", h->text);
    t->host_type = h->type;
    t->port = port;
    int prule = port_rule(p, h->text, h->type, port);
    if (prule < 0) {
        char list[TK_SSRF_MAX_PORTS * 7 + 16] = "80, 443";
        size_t n = strlen(list);
        for (size_t i = 0; i < p->nports && n < sizeof list - 8; i++)
            n += (size_t)snprintf(list + n, sizeof list - n, ", %u", p->ports[i]);
        return refuse(t, TK_SSRF_BAD_PORT, "port %d is not allowed (allowed: %s; see %s)", port,
                      list, p->ports_setting);
    }
    const tk_ssrf_entry *name_allowed = NULL;
    if (h->type == TK_HOST_NAME) {
        const tk_ssrf_entry *e = match_name(p->deny, p->ndeny, h->text, port);
        if (e)
            return refuse(t, TK_SSRF_DENIED_HOST, "%s is in the operator denylist (%s entry %s)",
                          h->text, p->deny_setting, e->text);
        name_allowed = match_name(p->allow, p->nallow, h->text, port);
        char rerr[200] = "";
        size_t n = 0;
        tk_ssrf_resolve_fn fn = p->resolve ? p->resolve : sys_resolve;
        tk_status st = bounded_resolve(fn, p->resolve_ud, h->text, t->addrs, &n, rerr, sizeof rerr,
                                       b.deadline_ms);
        if (st == TK_ETIMEOUT)
            return refuse(t, TK_SSRF_TIMEOUT,
                          "%s could not be resolved within %ld ms (the fetch's time limit): the "
                          "resolver did not answer in time",
                          h->text, b.limit_ms);
        if (st == TK_ETOOBIG)
            return refuse(t, TK_SSRF_DNS_FAILED, "%s has more than %d addresses", h->text,
                          TK_SSRF_MAX_ADDRS);
        if (st != TK_OK)
            return refuse(t, TK_SSRF_DNS_FAILED, "%s could not be resolved (%s)", h->text,
                          rerr[0] ? rerr : "no address");
        if (n == 0)
            return refuse(t, TK_SSRF_DNS_FAILED, "%s has no address", h->text);
        t->naddrs = n;
    } else {
        t->addrs[0] = h->ip;
        t->naddrs = 1;
    }
    char why[320], a[48], listed_why[320] = "";
    int listed_any = 0;
    for (size_t i = 0; i < t->naddrs; i++) {
        int listed;
        tk_ssrf_code c = check_addr(p, &t->addrs[i], port, name_allowed, why, sizeof why, &listed);
        if (c == TK_SSRF_OK && prule == 1 && !match_ip(p->allow, p->nallow, &t->addrs[i], -port)) {
            c = TK_SSRF_BAD_PORT;
            snprintf(why, sizeof why, "not in an allowlist entry for port %d (%s)", port,
                     p->allow_setting);
        }
        if (listed && !listed_any)
            snprintf(listed_why, sizeof listed_why, "%s", why);
        listed_any |= listed;
        if (c == TK_SSRF_OK)
            continue;
        tk_ip_format(&t->addrs[i], a, sizeof a);
        if (h->type != TK_HOST_NAME)
            return refuse(t, c, "%s is %s", a, why);
        if (t->naddrs > 1)
            return refuse(t, c,
                          "%s resolves to %s, which is %s (one of its %zu addresses; a name is "
                          "refused when any of them is)",
                          h->text, a, why, t->naddrs);
        return refuse(t, c, "%s resolves to %s, which is %s", h->text, a, why);
    }
    t->code = TK_SSRF_OK;
    t->by_allowlist = listed_any;
    size_t n = (size_t)snprintf(t->reason, sizeof t->reason, "allowed: %s ->", h->text);
    for (size_t i = 0; i < t->naddrs && n < sizeof t->reason - 60; i++) {
        tk_ip_format(&t->addrs[i], a, sizeof a);
        n += (size_t)snprintf(t->reason + n, sizeof t->reason - n, "%s%s", i ? ", " : " ", a);
    }
    if (n < sizeof t->reason)
        snprintf(t->reason + n, sizeof t->reason - n, " (%s)", listed_any ? listed_why : "public");
    return TK_OK;
}

tk_ssrf_code tk_ssrf_url_fault_code(tk_url_fault f)
{
    switch (f) {
    case TK_URL_ESCHEME:
        return TK_SSRF_BAD_SCHEME;
    case TK_URL_EUSERINFO:
        return TK_SSRF_USERINFO;
    case TK_URL_EPORT:
        return TK_SSRF_BAD_PORT;
    default:
        return TK_SSRF_BAD_URL;
    }
}

static tk_status check_url(const tk_ssrf_policy *p, const char *url, tk_ssrf_target *t,
                           struct bound b)
{
    memset(t, 0, sizeof *t);
    tk_arena *a = tk_arena_new(4 * TK_URL_MAX + 4096);
    tk_url u;
    tk_url_err ue;
    tk_status st;
    if (tk_url_parse(a, url, url ? strlen(url) : 0, &u, &ue) != TK_OK) {
        st = refuse(t, tk_ssrf_url_fault_code(ue.fault), "%s", ue.reason);
        goto out;
    }
    t->url = tk_strdup(u.href);
    st = check_parsed(p, &u.host, u.port, t, b);
out:
    tk_arena_free(a);
    return st;
}

tk_status tk_ssrf_check(const tk_ssrf_policy *p, const char *url, tk_ssrf_target *t)
{
    return check_url(p, url, t, policy_bound(p));
}

tk_status tk_ssrf_check_until(const tk_ssrf_policy *p, const char *url, int64_t deadline_ms,
                              long limit_ms, tk_ssrf_target *t)
{
    return check_url(p, url, t, (struct bound){deadline_ms, limit_ms});
}

tk_status tk_ssrf_check_host(const tk_ssrf_policy *p, const char *host, int port, tk_ssrf_target *t)
{
    memset(t, 0, sizeof *t);
    tk_host h;
    tk_url_err ue;
    if (tk_url_host_parse(host, host ? strlen(host) : 0, &h, &ue) != TK_OK)
        return refuse(t, TK_SSRF_BAD_URL, "%s", ue.reason);
    if (port < 1 || port > 65535) {
        snprintf(t->host, sizeof t->host, "%s", h.text);
        return refuse(t, TK_SSRF_BAD_PORT, "port %d is out of range (1-65535)", port);
    }
    return check_parsed(p, &h, port, t, policy_bound(p));
}

int tk_ssrf_target_admits(const tk_ssrf_policy *p, const tk_ssrf_target *t, const tk_ip *ip,
                          int port)
{
    if (t->code != TK_SSRF_OK || port != t->port)
        return 0;
    int pinned = 0;
    for (size_t i = 0; i < t->naddrs && !pinned; i++)
        pinned = ip_eq(&t->addrs[i], ip);
    if (!pinned)
        return 0;
    const tk_ssrf_entry *name_allowed =
        t->host_type == TK_HOST_NAME ? match_name(p->allow, p->nallow, t->host, port) : NULL;
    int prule = port_rule(p, t->host, t->host_type, port);
    if (prule < 0 || (prule == 1 && !match_ip(p->allow, p->nallow, ip, -port)))
        return 0;
    char why[320];
    int listed;
    return check_addr(p, ip, port, name_allowed, why, sizeof why, &listed) == TK_SSRF_OK;
}

void tk_ssrf_target_free(tk_ssrf_target *t)
{
    free(t->url);
    t->url = NULL;
}

void tk_ssrf_target_describe(const tk_ssrf_target *t, char *out, size_t outlen)
{
    if (t->code == TK_SSRF_OK)
        snprintf(out, outlen, "allowed %s (%s)", t->url ? t->url : t->host, t->reason);
    else
        snprintf(out, outlen, "refused %s: %s", tk_ssrf_code_str(t->code), t->reason);
}
