/*
 * Unit tests for src/lib/ssrf.c: the address rules, the policy, the check and
 * the checked fetch.
 *
 * No test sends a packet to any address but loopback: invented names go through
 * a fake resolver (no DNS query leaves the machine), public addresses are only
 * checked, and every fetch runs with a connect hook that refuses (and counts)
 * any address that is not 127.0.0.1 or ::1, so even a bug could not reach out.
 * The fetch tests talk to small HTTP servers started on 127.0.0.1 in the test.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>

#include "lib/log.h"
#include "lib/ssrf.h"
#include "lib/tktime.h"
#include "tk_test.h"

/* ------------------------------------------------------------------------- */
/* A fake resolver and a connect hook                                        */
/* ------------------------------------------------------------------------- */

struct fake_name {
    const char *name;
    const char *addrs[4];
    tk_status st;
};

static const struct fake_name fake_names[] = {
    {"public.test", {"93.184.215.14"}},
    {"public6.test", {"2606:4700:4700::1111"}},
    {"dual.test", {"93.184.215.14", "2606:4700:4700::1111"}},
    {"example.test", {"93.184.215.16"}},
    {"xn--bcher-kva.test", {"93.184.215.15"}},
    {"localhost", {"127.0.0.1", "::1"}},
    {"loop.test", {"127.0.0.1"}},
    {"loop6.test", {"::1"}},
    {"mixed.test", {"93.184.215.14", "127.0.0.1"}},
    {"mixed6.test", {"2606:4700:4700::1111", "fe80::1"}},
    {"mixedlate.test", {"93.184.215.14", "93.184.215.15", "8.8.8.8", "10.0.0.1"}},
    {"meta.test", {"169.254.169.254"}},
    {"private.test", {"192.168.1.10"}},
    {"cgnat.test", {"100.64.1.1"}},
    {"mapped.test", {"::ffff:127.0.0.1"}},
    {"nat64bad.test", {"64:ff9b::a00:1"}},
    {"ula.test", {"fd12:3456::1"}},
    {"zero.test", {"0.0.0.0"}},
    {"empty.test", {NULL}},
    {"servfail.test", {NULL}, TK_ERROR},
    /* for the operator lists */
    {"intranet.test", {"10.1.0.7"}},
    {"app.corp.test", {"172.16.5.5"}},
    {"deep.app.corp.test", {"172.16.5.9"}},
    {"corp.test", {"172.16.5.6"}},
    {"bad.public.test", {"93.184.215.20"}},
    {"x.evil.test", {"93.184.215.21"}},
    {"dnsdeny.test", {"8.8.4.4"}},
    {"intranet-zero.test", {"0.0.0.0"}},
};

/* "stall.test" blocks until stall_release() (a resolver that does not answer). */
static pthread_mutex_t stall_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t stall_cv = PTHREAD_COND_INITIALIZER;
static int stall_released;

static void stall_release(void)
{
    pthread_mutex_lock(&stall_mu);
    stall_released = 1;
    pthread_cond_broadcast(&stall_cv);
    pthread_mutex_unlock(&stall_mu);
}

/* Waits (the runner's per-test timeout is the bound) until every abandoned
 * lookup has returned and freed what it held. */
static void wait_abandoned_lookups_end(void)
{
    while (tk_ssrf_abandoned_lookups() > 0)
        tk_sleep_ms(10);
}

struct fake {
    atomic_int calls;
    atomic_int rebind_calls;
    const char *rebind_name; /* answers public first, loopback after */
    int rebind_loopback_first;
};

static tk_status fake_resolve(void *ud, const char *host, tk_ip *out, size_t max, size_t *n,
                              char *err, size_t errlen)
{
    struct fake *f = ud;
    atomic_fetch_add(&f->calls, 1);
    *n = 0;
    if (f->rebind_name && strcmp(host, f->rebind_name) == 0) {
        int k = atomic_fetch_add(&f->rebind_calls, 1);
        int loop = f->rebind_loopback_first ? k == 0 : k > 0;
        CHECK(tk_ip_parse(loop ? "127.0.0.1" : "93.184.215.14", &out[0]));
        *n = 1;
        return TK_OK;
    }
    if (strcmp(host, "stall.test") == 0) {
        pthread_mutex_lock(&stall_mu);
        while (!stall_released)
            pthread_cond_wait(&stall_cv, &stall_mu);
        pthread_mutex_unlock(&stall_mu);
        CHECK(tk_ip_parse("93.184.215.14", &out[0]));
        *n = 1;
        return TK_OK;
    }
    if (strcmp(host, "many.test") == 0) {
        for (size_t i = 0; i < max; i++) {
            char a[32];
            snprintf(a, sizeof a, "93.184.%zu.%zu", i / 200, i % 200 + 1);
            CHECK(tk_ip_parse(a, &out[i]));
        }
        *n = max;
        snprintf(err, errlen, "more than %zu addresses", max);
        return TK_ETOOBIG;
    }
    for (size_t i = 0; i < TK_ARRAY_LEN(fake_names); i++) {
        const struct fake_name *e = &fake_names[i];
        if (strcmp(e->name, host) != 0)
            continue;
        if (e->st != TK_OK) {
            snprintf(err, errlen, "server failure");
            return e->st;
        }
        for (size_t k = 0; k < 4 && e->addrs[k] && *n < max; k++)
            CHECK(tk_ip_parse(e->addrs[k], &out[(*n)++]));
        return TK_OK;
    }
    snprintf(err, errlen, "no such name");
    return TK_ENOENT;
}

struct hook {
    atomic_int attempts; /* every connect the fetch tried */
    atomic_int refused;  /* of which refused here (not loopback) */
    char seen[8][48];
};

static int connect_hook(void *ud, const tk_ip *ip, int port)
{
    struct hook *h = ud;
    int k = atomic_fetch_add(&h->attempts, 1);
    if (k < 8)
        tk_ip_format(ip, h->seen[k], sizeof h->seen[k]);
    static const uint8_t v6_loopback[16] = {[15] = 1};
    int loopback =
        (ip->family == 4 && ip->b[0] == 127 && ip->b[1] == 0 && ip->b[2] == 0 && ip->b[3] == 1) ||
        (ip->family == 6 && memcmp(ip->b, v6_loopback, 16) == 0);
    if (!loopback) {
        atomic_fetch_add(&h->refused, 1);
        return 1; /* never let a test reach anything but loopback */
    }
    return 0;
}

static struct fake fake;
static struct hook hook;

static void test_policy(tk_ssrf_policy *p)
{
    tk_log_set_level(TK_LOG_WARN); /* refusals are logged at info */
    tk_ssrf_policy_init(p);
    p->resolve = fake_resolve;
    p->resolve_ud = &fake;
    p->on_connect = connect_hook;
    p->connect_ud = &hook;
}

/* ------------------------------------------------------------------------- */
/* The table: every notation and range, each with its verdict and code       */
/* ------------------------------------------------------------------------- */

struct url_case {
    const char *url;
    tk_ssrf_code code;
    const char *why; /* a piece the reason must contain, or NULL */
};

#define OK  TK_SSRF_OK
#define BLK TK_SSRF_BLOCKED_ADDRESS

static const struct url_case url_cases[] = {
    /* schemes */
    {"file:///etc/passwd", TK_SSRF_BAD_SCHEME, "\"file:\""},
    {"file://localhost/etc/passwd", TK_SSRF_BAD_SCHEME},
    {"FILE:///etc/passwd", TK_SSRF_BAD_SCHEME, "\"file:\""},
    {"gopher://127.0.0.1:70/_HELO", TK_SSRF_BAD_SCHEME, "gopher"},
    {"ftp://public.test/", TK_SSRF_BAD_SCHEME},
    {"javascript:alert(1)", TK_SSRF_BAD_SCHEME},
    {"data:text/plain,hi", TK_SSRF_BAD_SCHEME},
    {"dict://127.0.0.1:11211/stats", TK_SSRF_BAD_SCHEME},
    {"ldap://127.0.0.1/", TK_SSRF_BAD_SCHEME},
    {"ws://public.test/", TK_SSRF_BAD_SCHEME},
    {"wss://public.test/", TK_SSRF_BAD_SCHEME},
    {"sftp://public.test/", TK_SSRF_BAD_SCHEME},
    {"tftp://public.test/x", TK_SSRF_BAD_SCHEME},
    {"jar:http://public.test/x!/", TK_SSRF_BAD_SCHEME},
    {"netdoc:///etc/passwd", TK_SSRF_BAD_SCHEME},
    {"mailto:a@public.test", TK_SSRF_BAD_SCHEME},
    {"localhost:80/", TK_SSRF_BAD_SCHEME},
    /* userinfo */
    {"http://user@public.test/", TK_SSRF_USERINFO, "user name or password"},
    {"http://user:pass@public.test/", TK_SSRF_USERINFO},
    {"http://:@public.test/", TK_SSRF_USERINFO},
    {"http://public.test@127.0.0.1/", TK_SSRF_USERINFO},
    {"http://127.0.0.1@public.test/", TK_SSRF_USERINFO},
    {"https://a%40b@public.test/", TK_SSRF_USERINFO},
    {"http://public.test:80@169.254.169.254/", TK_SSRF_USERINFO},
    /* ports */
    {"http://public.test:8080/", TK_SSRF_BAD_PORT, "port 8080 is not allowed"},
    {"http://public.test:22/", TK_SSRF_BAD_PORT},
    {"http://public.test:6379/", TK_SSRF_BAD_PORT},
    {"http://public.test:25/", TK_SSRF_BAD_PORT},
    {"http://public.test:0/", TK_SSRF_BAD_PORT},
    {"http://public.test:65536/", TK_SSRF_BAD_PORT},
    {"http://93.184.215.14:8443/", TK_SSRF_BAD_PORT},
    {"http://[2606:4700:4700::1111]:3306/", TK_SSRF_BAD_PORT},
    {"http://127.0.0.1:8080/", TK_SSRF_BAD_PORT},
    {"https://public.test:80/", OK},
    {"http://public.test:443/", OK},
    /* malformed */
    {"", TK_SSRF_BAD_URL},
    {"public.test", TK_SSRF_BAD_URL},
    {"//public.test/", TK_SSRF_BAD_URL},
    {"http:/public.test", TK_SSRF_BAD_URL},
    {"http:\\\\public.test\\", TK_SSRF_BAD_URL},
    {"http://", TK_SSRF_BAD_URL},
    {"http://public.test:80:80/", TK_SSRF_BAD_URL},
    {"http://public.test:8o/", TK_SSRF_BAD_URL},
    {"http://[::1", TK_SSRF_BAD_URL},
    {"http://[fe80::1%25eth0]/", TK_SSRF_BAD_URL, "zone"},
    {"http://[fe80::1%eth0]:80/", TK_SSRF_BAD_URL, "zone"},
    {"http://1.2.3.4.5/", TK_SSRF_BAD_URL},
    {"http://256.256.256.256/", TK_SSRF_BAD_URL},
    {"http://0x100000000/", TK_SSRF_BAD_URL},
    {"http://exa mple.test/", TK_SSRF_BAD_URL},
    {"http://a..test/", TK_SSRF_BAD_URL},
    {"http://public.test\\@127.0.0.1/", TK_SSRF_BAD_URL},
    {"http://%zz.test/", TK_SSRF_BAD_URL},
    {"http://ex%00.test/", TK_SSRF_BAD_URL},
    {"http://public.test/\r\nX: y", TK_SSRF_BAD_URL},
    {"http://☃.test/", TK_SSRF_BAD_URL},
    {"http://public.test%2f@127.0.0.1/", TK_SSRF_USERINFO},
    {"http://127.0.0.1%2fpublic.test/", TK_SSRF_BAD_URL},
    {"http://public.test..:80/", TK_SSRF_BAD_URL},
    /* IPv4 ranges */
    {"http://0.0.0.0/", BLK, "0.0.0.0 is unspecified"},
    {"http://0.1.2.3/", BLK, "\"this network\" (0.0.0.0/8)"},
    {"http://10.0.0.1/", BLK, "10.0.0.1 is private (10.0.0.0/8)"},
    {"http://10.255.255.255/", BLK, "private"},
    {"http://100.64.0.1/", BLK, "CGNAT"},
    {"http://100.127.255.254/", BLK, "100.64.0.0/10"},
    {"http://100.100.100.200/", BLK, "Alibaba"},
    {"http://127.0.0.1/", BLK, "127.0.0.1 is loopback (127.0.0.0/8)"},
    {"http://127.255.255.254/", BLK, "loopback"},
    {"http://169.254.169.254/latest/meta-data/", BLK, "metadata"},
    {"http://169.254.170.2/v2/credentials", BLK, "ECS"},
    {"http://169.254.1.1/", BLK, "link-local (169.254.0.0/16)"},
    {"http://172.16.0.1/", BLK, "private (172.16.0.0/12)"},
    {"http://172.31.255.255/", BLK, "private"},
    {"http://192.0.0.1/", BLK, "192.0.0.0/24"},
    {"http://192.0.0.192/", BLK, "Oracle"},
    {"http://192.0.2.1/", BLK, "documentation (192.0.2.0/24)"},
    {"http://192.88.99.1/", BLK, "6to4 relay"},
    {"http://192.168.0.1/", BLK, "private (192.168.0.0/16)"},
    {"http://192.168.255.255/", BLK, "private"},
    {"http://198.18.0.1/", BLK, "benchmarking (198.18.0.0/15)"},
    {"http://198.19.255.255/", BLK, "benchmarking"},
    {"http://198.51.100.1/", BLK, "documentation (198.51.100.0/24)"},
    {"http://192.0.0.9/", BLK, "IETF protocol assignments (192.0.0.0/24)"},
    {"http://192.0.0.170/", BLK, "192.0.0.0/24"},
    {"http://192.31.196.1/", BLK, "AS112 DNS sink service (192.31.196.0/24)"},
    {"http://192.52.193.1/", BLK, "AMT relay anycast (192.52.193.0/24)"},
    {"http://192.175.48.1/", BLK, "AS112 DNS sink service (direct delegation) (192.175.48.0/24)"},
    {"http://192.31.195.255/", OK},
    {"http://192.52.194.0/", OK},
    {"http://192.175.49.0/", OK},
    {"http://[::ffff:192.31.196.1]/", BLK, "AS112"},
    {"http://[64:ff9b::192.52.193.1]/", BLK, "NAT64 (64:ff9b::/96) for 192.52.193.1, which is AMT"},
    {"http://203.0.113.1/", BLK, "documentation (203.0.113.0/24)"},
    {"http://224.0.0.1/", BLK, "multicast (224.0.0.0/4)"},
    {"http://239.255.255.250/", BLK, "multicast"},
    {"http://240.0.0.1/", BLK, "reserved (240.0.0.0/4)"},
    {"http://255.255.255.254/", BLK, "reserved"},
    {"http://255.255.255.255/", BLK, "broadcast"},
    /* IPv4 boundaries that are public */
    {"http://9.255.255.255/", OK},
    {"http://11.0.0.0/", OK},
    {"http://100.63.255.255/", OK},
    {"http://100.128.0.0/", OK},
    {"http://126.255.255.255/", OK},
    {"http://128.0.0.1/", OK},
    {"http://169.253.255.255/", OK},
    {"http://169.255.0.1/", OK},
    {"http://172.15.255.255/", OK},
    {"http://172.32.0.0/", OK},
    {"http://192.0.1.1/", OK},
    {"http://192.0.3.1/", OK},
    {"http://192.167.255.255/", OK},
    {"http://192.169.0.0/", OK},
    {"http://198.17.255.255/", OK},
    {"http://198.20.0.0/", OK},
    {"http://198.51.99.1/", OK},
    {"http://203.0.112.1/", OK},
    {"http://223.255.255.255/", OK},
    {"http://8.8.8.8/", OK},
    {"https://1.1.1.1/dns-query", OK},
    {"http://93.184.215.14/", OK},
    /* odd IPv4 notations, normalised before the check */
    {"http://2130706433/", BLK, "127.0.0.1 is loopback"},
    {"http://0177.0.0.1/", BLK, "127.0.0.1 is loopback"},
    {"http://0x7f.1/", BLK, "127.0.0.1 is loopback"},
    {"http://0x7f000001/", BLK, "127.0.0.1 is loopback"},
    {"http://127.1/", BLK, "127.0.0.1 is loopback"},
    {"http://127.0.1/", BLK, "127.0.0.1 is loopback"},
    {"http://017700000001/", BLK, "127.0.0.1 is loopback"},
    {"http://0x7f.0x0.0x0.0x1/", BLK, "127.0.0.1 is loopback"},
    {"http://0177.1/", BLK, "127.0.0.1 is loopback"},
    {"http://127.0.0.1./", BLK, "127.0.0.1 is loopback"},
    {"http://127.000.000.001/", BLK, "127.0.0.1 is loopback"},
    {"http://%31%32%37.0.0.1/", BLK, "127.0.0.1 is loopback"},
    {"http://１２７．０．０．１/", BLK, "127.0.0.1 is loopback"},
    {"http://0/", BLK, "unspecified"},
    {"http://0x0/", BLK, "unspecified"},
    {"http://3232235521/", BLK, "192.168.0.1 is private"},
    {"http://0xa9fea9fe/", BLK, "169.254.169.254 is link-local"},
    {"http://169.254.43518/", BLK, "169.254.169.254 is link-local"},
    {"http://0251.0376.0251.0376/", BLK, "169.254.169.254"},
    {"http://2852039166/latest/", BLK, "169.254.169.254"},
    {"http://167772161/", BLK, "10.0.0.1 is private"},
    {"http://0xA.1/", BLK, "10.0.0.1 is private"},
    {"http://134744072/", OK},
    {"http://0x8080808/", OK},
    {"http://010.010.010.010/", OK},
    {"http://8.8.2056/", OK},
    /* IPv6 */
    {"http://[::]/", BLK, "unspecified"},
    {"http://[::1]/", BLK, "::1 is loopback (::1/128)"},
    {"http://[0:0:0:0:0:0:0:1]/", BLK, "loopback"},
    {"http://[::ffff:127.0.0.1]/", BLK,
     "IPv4-mapped IPv6 (::ffff:0:0/96) for 127.0.0.1, which is loopback"},
    {"http://[::ffff:7f00:1]/", BLK, "for 127.0.0.1"},
    {"http://[::ffff:10.0.0.1]/", BLK, "private"},
    {"http://[::ffff:169.254.169.254]/", BLK, "metadata"},
    {"http://[::ffff:8.8.8.8]/", BLK, "IPv4-mapped IPv6 (::ffff:0:0/96) for 8.8.8.8"},
    {"http://[::127.0.0.1]/", BLK, "IPv4-compatible"},
    {"http://[::8.8.8.8]/", BLK, "IPv4-compatible"},
    {"http://[::2]/", BLK, "IPv4-compatible"},
    {"http://[64:ff9b::127.0.0.1]/", BLK, "NAT64 (64:ff9b::/96) for 127.0.0.1, which is loopback"},
    {"http://[64:ff9b::a9fe:a9fe]/", BLK, "metadata"},
    {"http://[64:ff9b::10.0.0.1]/", BLK, "private"},
    /* local-use NAT64 (RFC 8215): refused as a whole, whatever layout or IPv4 */
    {"http://[64:ff9b:1::7f00:1]/", BLK, "local-use NAT64 (64:ff9b:1::/48)"},
    {"http://[64:ff9b:1::808:808]/", BLK, "local-use NAT64 (64:ff9b:1::/48)"},
    {"http://[64:ff9b:1:7f:0:100::]/", BLK, "local-use NAT64"}, /* /64 layout: 127.0.0.1 */
    {"http://[64:ff9b:1:a00:1::]/", BLK, "local-use NAT64"},    /* /48 layout: 10.0.0.1 */
    {"http://[64:ff9b:1:ffff:ffff:ffff:ffff:ffff]/", BLK, "local-use NAT64"},
    {"http://[64:ff9b:2::808:808]/", BLK, "outside 2000::/3"},
    {"http://[2002:7f00:1::]/", BLK, "6to4 (2002::/16) for 127.0.0.1"},
    {"http://[2002:a9fe:a9fe::1]/", BLK, "6to4"},
    {"http://[2002:c0a8:1::]/", BLK, "192.168.0.1"},
    {"http://[2001:0:4136:e378:8000:63bf:80ff:fffe]/", BLK,
     "Teredo (2001::/32) for client 127.0.0.1"},
    {"http://[2001:0:4136:e378:8000:63bf:f5ff:fffe]/", BLK, "client 10.0.0.1"},
    {"http://[2001:0:7f00:1:8000:0:f7f7:f7f7]/", BLK, "server 127.0.0.1"},
    {"http://[fc00::1]/", BLK, "unique-local (fc00::/7)"},
    {"http://[fd00::1]/", BLK, "unique-local"},
    {"http://[fd00:ec2::254]/", BLK, "AWS EC2"},
    {"http://[fe80::1]/", BLK, "link-local (fe80::/10)"},
    {"http://[febf::1]/", BLK, "link-local"},
    {"http://[fec0::1]/", BLK, "site-local"},
    {"http://[ff02::1]/", BLK, "multicast (ff00::/8)"},
    {"http://[ff05::1:3]/", BLK, "multicast"},
    {"http://[2001:db8::1]/", BLK, "documentation (2001:db8::/32)"},
    {"http://[3fff::1]/", BLK, "documentation (3fff::/20)"},
    {"http://[100::1]/", BLK, "discard-only"},
    {"http://[2001:2::1]/", BLK, "benchmarking (2001:2::/48)"},
    {"http://[2001:10::1]/", BLK, "ORCHID (deprecated) (2001:10::/28)"},
    /* the rest of 2001::/23, IETF protocol assignments */
    {"http://[2001:1::1]/", BLK, "IETF protocol assignments (2001::/23) (2001:1::/32)"},
    {"http://[2001:1::2]/", BLK, "2001:1::/32"},
    {"http://[2001:2:0:ffff::1]/", BLK, "benchmarking"},
    {"http://[2001:3::1]/", BLK, "AMT relay anycast (2001:3::/32)"},
    {"http://[2001:4:112::1]/", BLK, "AS112 DNS sink service (2001:4:112::/48)"},
    {"http://[2001:4::1]/", BLK, "IETF protocol assignments (2001::/23)"},
    {"http://[2001:1f::1]/", BLK, "ORCHID (deprecated)"},
    {"http://[2001:20::1]/", BLK, "ORCHIDv2 identifiers (2001:20::/28)"},
    {"http://[2001:2f:ffff::1]/", BLK, "ORCHIDv2"},
    {"http://[2001:30::1]/", BLK, "DETs) (2001:30::/28)"},
    {"http://[2001:100::1]/", BLK, "IETF protocol assignments (2001::/23)"},
    {"http://[2001:1ff:ffff::1]/", BLK, "IETF protocol assignments (2001::/23)"},
    {"http://[2001:200::1]/", OK}, /* just past 2001::/23 */
    {"http://[2620:4f:8000::1]/", BLK, "AS112 DNS sink service (direct delegation)"},
    {"http://[2620:4f:8001::1]/", OK},
    {"http://[100:0:0:1::1]/", BLK, "the dummy IPv6 prefix (100:0:0:1::/64)"},
    {"http://[5f00::1]/", BLK, "SRv6"},
    {"http://[4000::1]/", BLK, "outside 2000::/3"},
    {"http://[1::]/", BLK, "reserved"},
    {"http://[2606:4700:4700::1111]/", OK},
    {"http://[2001:4860:4860::8888]:443/", OK},
    {"http://[64:ff9b::8.8.8.8]/", OK},
    {"http://[64:ff9b::808:808]/", OK},
    {"http://[2002:808:808::1]/", OK},
    {"http://[2001:0:4136:e378:8000:0:f7f7:f7f7]/", OK},
    {"http://[2a00:1450:4001::1]/", OK},
    {"http://[3000::1]/", OK},
    /* names (fake resolver) */
    {"http://public.test/", OK},
    {"https://public6.test/", OK},
    {"http://dual.test/", OK},
    {"http://localhost/", BLK, "localhost resolves to 127.0.0.1, which is loopback"},
    {"http://LOCALHOST./", BLK, "loopback"},
    {"http://ｌｏｃａｌｈｏｓｔ/", BLK, "loopback"},
    {"http://loop.test/", BLK, "loop.test resolves to 127.0.0.1"},
    {"http://loop6.test/", BLK, "resolves to ::1, which is loopback (::1/128)"},
    {"http://mixed.test/", BLK, "one of its 2 addresses"},
    {"http://mixed6.test/", BLK, "fe80::1"},
    {"http://mixedlate.test/", BLK, "10.0.0.1"},
    {"http://meta.test/", BLK, "metadata"},
    {"http://private.test/", BLK, "private"},
    {"http://cgnat.test/", BLK, "CGNAT"},
    {"http://mapped.test/", BLK, "IPv4-mapped"},
    {"http://nat64bad.test/", BLK, "NAT64"},
    {"http://ula.test/", BLK, "unique-local"},
    {"http://zero.test/", BLK, "unspecified"},
    {"http://many.test/", TK_SSRF_DNS_FAILED, "more than 64 addresses"},
    {"http://empty.test/", TK_SSRF_DNS_FAILED, "no address"},
    {"http://nx.test/", TK_SSRF_DNS_FAILED, "nx.test"},
    {"http://servfail.test/", TK_SSRF_DNS_FAILED, "server failure"},
    {"http://bücher.test/", OK},
    {"http://B%C3%BCcher.test/", OK},
    {"http://ＥＸＡＭＰＬＥ.test/", OK},
    {"http://example。test/", OK},
    {"http://example.test./", OK},
    {"http://EXAMPLE.TEST/", OK},
    {"https://PUBLIC.TEST.:443/x", OK},
    {"http://%70ublic.test/", OK},
    {"http://public.test/path/../../etc/passwd?x=1#y", OK},
};

static int host_is_literal(const char *url)
{
    const char *p = strstr(url, "://");
    if (!p)
        return 0;
    p += 3;
    return *p == '[' || (*p >= '0' && *p <= '9');
}

TEST(ssrf_url_table_check)
{
    CHECK_INT(TK_ARRAY_LEN(url_cases), >=, 150);
    tk_ssrf_policy p;
    test_policy(&p);
    int n_ok = 0, n_refused = 0;
    for (size_t i = 0; i < TK_ARRAY_LEN(url_cases); i++) {
        const struct url_case *c = &url_cases[i];
        tk_ssrf_target t;
        int before = atomic_load(&fake.calls);
        tk_status st = tk_ssrf_check(&p, c->url, &t);
        int calls = atomic_load(&fake.calls) - before;
        if (t.code != c->code)
            TK_TEST_FAIL("%s: got %s (%s), expected %s", c->url, tk_ssrf_code_str(t.code), t.reason,
                         tk_ssrf_code_str(c->code));
        if (c->why && !strstr(t.reason, c->why))
            TK_TEST_FAIL("%s: reason \"%s\" lacks \"%s\"", c->url, t.reason, c->why);
        CHECK(t.reason[0] != '\0');
        if (c->code == OK) {
            CHECK_INT(st, ==, TK_OK);
            CHECK(t.naddrs > 0);
            CHECK(t.url != NULL);
            n_ok++;
        } else {
            CHECK(st == TK_EDENIED || (st == TK_ENOENT && c->code == TK_SSRF_DNS_FAILED));
            CHECK_INT(t.naddrs, ==, 0);
            n_refused++;
        }
        /* resolved at most once; never for an IP literal */
        CHECK_INT(calls, <=, 1);
        if (t.url && t.host_type != TK_HOST_NAME)
            CHECK_INT(calls, ==, 0);
        if (host_is_literal(c->url) && calls != 0)
            TK_TEST_FAIL("%s: an IP literal was resolved", c->url);
        tk_ssrf_target_free(&t);
    }
    printf("    %d URLs: %d admitted, %d refused\n", n_ok + n_refused, n_ok, n_refused);
    CHECK_INT(atomic_load(&hook.attempts), ==, 0);
    tk_ssrf_policy_free(&p);
}

/* Decided before any packet: every refused URL, fetched, is refused with the
 * same code and no connect() is ever attempted. */
TEST(ssrf_url_table_refused_fetch_never_connects)
{
    tk_ssrf_policy p;
    test_policy(&p);
    int n = 0;
    for (size_t i = 0; i < TK_ARRAY_LEN(url_cases); i++) {
        const struct url_case *c = &url_cases[i];
        if (c->code == OK)
            continue; /* public addresses are only checked, never fetched */
        tk_ssrf_result r;
        tk_status st = tk_ssrf_fetch(&p, c->url, NULL, &r);
        if (r.code != c->code)
            TK_TEST_FAIL("%s: fetch got %s (%s), expected %s", c->url, tk_ssrf_code_str(r.code),
                         r.reason, tk_ssrf_code_str(c->code));
        CHECK(st != TK_OK);
        CHECK_INT(r.nhops, ==, 0);
        CHECK_INT(r.status, ==, 0);
        CHECK_INT(r.body.len, ==, 0);
        tk_ssrf_result_free(&r);
        n++;
    }
    CHECK_INT(n, >=, 100);
    CHECK_INT(atomic_load(&hook.attempts), ==, 0);
    tk_ssrf_policy_free(&p);
}

/* ------------------------------------------------------------------------- */
/* Operator lists                                                            */
/* ------------------------------------------------------------------------- */

static const struct url_case list_cases[] = {
    {"http://intranet.test/", OK, "SSRF_ALLOW entry intranet.test"},
    {"http://INTRANET.TEST./", OK},
    {"http://app.corp.test/", OK, "*.corp.test"},
    {"http://deep.app.corp.test/", OK},
    {"http://corp.test/", BLK, "private"},
    {"http://10.1.2.3/", OK, "10.1.0.0/16"},
    {"http://10.1.255.255/", OK},
    {"http://10.2.0.1/", BLK, "private"},
    {"http://10.1.9.9/", TK_SSRF_DENIED_HOST, "SSRF_DENY entry 10.1.9.0/24"},
    {"http://0x7f.1/", OK, "127.0.0.1/32"},
    {"http://127.0.0.2/", BLK},
    {"http://[::ffff:127.0.0.1]/", BLK, "IPv4-mapped"},
    {"http://[fd00::5]/", OK, "fd00::/64"},
    {"http://[64:ff9b:1::a00:1]/", OK, "SSRF_ALLOW entry 64:ff9b:1::/48"},
    {"http://[64:ff9b:1:7f:0:100::]/", OK, "64:ff9b:1::/48"},
    {"http://[2001:3::1]/", BLK, "AMT"},
    {"http://[fd00:0:0:1::5]/", BLK},
    {"http://bad.public.test/", TK_SSRF_DENIED_HOST, "bad.public.test is in the operator denylist"},
    {"http://public.test/", OK},
    {"http://x.evil.test/", TK_SSRF_DENIED_HOST, "*.evil.test"},
    {"http://dnsdeny.test/", TK_SSRF_DENIED_HOST, "dnsdeny.test resolves to 8.8.4.4"},
    {"http://8.8.4.4/", TK_SSRF_DENIED_HOST},
    {"http://[::ffff:8.8.4.4]/", TK_SSRF_DENIED_HOST},
    {"http://[64:ff9b::8.8.4.4]/", TK_SSRF_DENIED_HOST},
    {"http://[2002:808:404::]/", TK_SSRF_DENIED_HOST},
    {"http://8.8.8.8/", OK},
    {"http://intranet-zero.test/", BLK, "unspecified"},
    {"http://intranet.test:8080/", TK_SSRF_BAD_PORT},
    {"http://intranet.test:8443/", OK},
    {"http://u@intranet.test/", TK_SSRF_USERINFO},
};

TEST(ssrf_operator_lists)
{
    tk_ssrf_policy p;
    test_policy(&p);
    char err[256];
    CHECK_INT(tk_ssrf_policy_allow(&p,
                                   "intranet.test, *.corp.test 10.1.0.0/16,127.0.0.1 fd00::/64 "
                                   "intranet-zero.test 64:ff9b:1::/48",
                                   err, sizeof err),
              ==, TK_OK);
    CHECK_INT(tk_ssrf_policy_deny(&p, "bad.public.test,*.evil.test,8.8.4.0/24,10.1.9.0/24", err,
                                  sizeof err),
              ==, TK_OK);
    CHECK_INT(tk_ssrf_policy_allow_ports(&p, "8443", err, sizeof err), ==, TK_OK);
    CHECK_INT(p.nallow, ==, 7);
    CHECK_INT(p.ndeny, ==, 4);
    for (size_t i = 0; i < TK_ARRAY_LEN(list_cases); i++) {
        const struct url_case *c = &list_cases[i];
        tk_ssrf_target t;
        tk_ssrf_check(&p, c->url, &t);
        if (t.code != c->code)
            TK_TEST_FAIL("%s: got %s (%s), expected %s", c->url, tk_ssrf_code_str(t.code), t.reason,
                         tk_ssrf_code_str(c->code));
        if (c->why && !strstr(t.reason, c->why))
            TK_TEST_FAIL("%s: reason \"%s\" lacks \"%s\"", c->url, t.reason, c->why);
        tk_ssrf_target_free(&t);
    }
    tk_ssrf_target t;
    CHECK_INT(tk_ssrf_check(&p, "http://intranet.test/", &t), ==, TK_OK);
    CHECK(t.by_allowlist);
    tk_ssrf_target_free(&t);
    CHECK_INT(tk_ssrf_check(&p, "http://public.test/", &t), ==, TK_OK);
    CHECK(!t.by_allowlist);
    tk_ssrf_target_free(&t);
    tk_ssrf_policy_free(&p);
    CHECK_INT(p.nallow, ==, 0);
}

/* Entries with a port apply to that port only; an allowlist entry with a port
 * also admits that port (nothing else does beyond 80, 443 and the extra ports). */
TEST(ssrf_entries_with_a_port)
{
    tk_ssrf_policy p;
    test_policy(&p);
    char err[256];
    CHECK_INT(tk_ssrf_policy_allow(&p,
                                   "127.0.0.1:8123 [::1]:8123 example.test:8443 10.9.0.0/16:9000",
                                   err, sizeof err),
              ==, TK_OK);
    CHECK_INT(tk_ssrf_policy_deny(&p, "public.test:8080", err, sizeof err), ==, TK_OK);
    CHECK_INT(tk_ssrf_policy_allow_ports(&p, "8080", err, sizeof err), ==, TK_OK);
    p.allow_setting = "EGRESS_ALLOW";
    static const struct url_case cases[] = {
        {"http://127.0.0.1:8123/", OK, "EGRESS_ALLOW entry 127.0.0.1/32:8123"},
        {"http://[::1]:8123/", OK, "[::1/128]:8123"},
        {"http://127.0.0.1:8124/", TK_SSRF_BAD_PORT,
         "port 8124 is not allowed (allowed: 80, 443, 8080; see SSRF_ALLOWED_PORTS)"},
        {"http://127.0.0.1/", TK_SSRF_BLOCKED_ADDRESS, "loopback"}, /* the entry is for 8123 only */
        {"http://127.0.0.2:8123/", TK_SSRF_BLOCKED_ADDRESS, "loopback"},
        {"http://93.184.215.14:8123/", TK_SSRF_BAD_PORT, "not in an allowlist entry for port 8123"},
        {"http://localhost:8123/", OK, "127.0.0.1/32:8123"},
        {"http://example.test:8443/", OK, "example.test:8443"},
        {"http://example.test/", OK, "public"},
        {"http://10.9.1.2:9000/", OK, "10.9.0.0/16:9000"},
        {"http://10.9.1.2/", TK_SSRF_BLOCKED_ADDRESS, "private"},
        {"http://public.test:8080/", TK_SSRF_DENIED_HOST, "public.test:8080"},
        {"http://public.test/", OK, NULL},
    };
    for (size_t i = 0; i < TK_ARRAY_LEN(cases); i++) {
        tk_ssrf_target t;
        tk_ssrf_check(&p, cases[i].url, &t);
        if (t.code != cases[i].code)
            TK_TEST_FAIL("%s: got %s (%s), expected %s", cases[i].url, tk_ssrf_code_str(t.code),
                         t.reason, tk_ssrf_code_str(cases[i].code));
        if (cases[i].why && !strstr(t.reason, cases[i].why))
            TK_TEST_FAIL("%s: reason \"%s\" lacks \"%s\"", cases[i].url, t.reason, cases[i].why);
        tk_ssrf_target_free(&t);
    }
    /* the pin check before connect applies the same rule */
    tk_ssrf_target t;
    CHECK_INT(tk_ssrf_check_host(&p, "127.0.0.1", 8123, &t), ==, TK_OK);
    tk_ip ip;
    CHECK(tk_ip_parse("127.0.0.1", &ip));
    CHECK(tk_ssrf_target_admits(&p, &t, &ip, 8123));
    CHECK(!tk_ssrf_target_admits(&p, &t, &ip, 8124));
    tk_ssrf_target_free(&t);
    tk_ssrf_policy_free(&p);
}

TEST(ssrf_list_syntax_errors)
{
    static const struct {
        const char *list, *want;
    } bad[] = {
        {"10.1.2.3/16", "host bits are set (did you mean 10.1.0.0/16?)"},
        {"10.0.0.0/33", "prefix length"},
        {"10.0.0.0/", "prefix length"},
        {"10.0.0.0/x", "prefix length"},
        {"10.1/16", "not a CIDR prefix"},
        {"fd00::1/8", "did you mean fd00::/8?"},
        {"intranet.test:0", "the port must be a number"},
        {"intranet.test:x", "the port must be a number"},
        {"[::1]:65536", "the port must be a number"},
        {"a*b.test", "wildcard"},
        {"*", "wildcard"},
        {"*.10.0.0.1", "names, not addresses"},
        {"a..b", "empty label"},
        {"ex ample", NULL}, /* two entries: fine */
        {"☃.test", "internationalised"},
        {"[fe80::1%eth0]", "zone"},
    };
    for (size_t i = 0; i < TK_ARRAY_LEN(bad); i++) {
        tk_ssrf_policy p;
        tk_ssrf_policy_init(&p);
        char err[256] = "";
        tk_status st = tk_ssrf_policy_allow(&p, bad[i].list, err, sizeof err);
        if (!bad[i].want) {
            CHECK_INT(st, ==, TK_OK);
        } else {
            if (st != TK_EINVAL)
                TK_TEST_FAIL("\"%s\" accepted", bad[i].list);
            if (!strstr(err, bad[i].want))
                TK_TEST_FAIL("\"%s\": error \"%s\" lacks \"%s\"", bad[i].list, err, bad[i].want);
        }
        tk_ssrf_policy_free(&p);
    }
    tk_ssrf_policy p;
    tk_ssrf_policy_init(&p);
    char err[256];
    CHECK_INT(tk_ssrf_policy_allow_ports(&p, "0", err, sizeof err), ==, TK_EINVAL);
    CHECK(strstr(err, "\"0\" is not a port"));
    CHECK_INT(tk_ssrf_policy_allow_ports(&p, "65536", err, sizeof err), ==, TK_EINVAL);
    CHECK_INT(tk_ssrf_policy_allow_ports(&p, "+80", err, sizeof err), ==, TK_EINVAL);
    CHECK_INT(tk_ssrf_policy_allow_ports(&p, "8080,x", err, sizeof err), ==, TK_EINVAL);
    CHECK_INT(tk_ssrf_policy_allow_ports(&p, "8081 8081,80,443 ,", err, sizeof err), ==, TK_OK);
    CHECK_INT(p.nports, ==, 2); /* 8080 from the failed list, 8081 once */
    tk_ssrf_policy_free(&p);
}

TEST(ssrf_policy_from_env)
{
    tk_ssrf_policy p;
    char err[256];
    unsetenv("SSRF_ALLOW");
    unsetenv("SSRF_DENY");
    unsetenv("SSRF_ALLOWED_PORTS");
    unsetenv("FETCH_MAX_BYTES");
    unsetenv("FETCH_TIMEOUT");
    unsetenv("FETCH_MAX_REDIRECTS");
    CHECK_INT(tk_ssrf_policy_from_env(&p, err, sizeof err), ==, TK_OK);
    CHECK_INT(p.max_bytes, ==, 2u << 20);
    CHECK_INT(p.timeout_ms, ==, 15000);
    CHECK_INT(p.max_redirects, ==, 5);
    CHECK_INT(p.nallow + p.ndeny + p.nports, ==, 0);
    tk_ssrf_policy_free(&p);

    setenv("SSRF_ALLOW", "intranet.example.com,10.1.0.0/16,*.corp.example", 1);
    setenv("SSRF_DENY", "169.254.0.0/16", 1);
    setenv("SSRF_ALLOWED_PORTS", "8080,8443", 1);
    setenv("FETCH_MAX_BYTES", "512K", 1);
    setenv("FETCH_TIMEOUT", "2s", 1);
    setenv("FETCH_MAX_REDIRECTS", "0", 1);
    CHECK_INT(tk_ssrf_policy_from_env(&p, err, sizeof err), ==, TK_OK);
    CHECK_INT(p.nallow, ==, 3);
    CHECK_INT(p.ndeny, ==, 1);
    CHECK_INT(p.nports, ==, 2);
    CHECK_INT(p.ports[1], ==, 8443);
    CHECK_INT(p.max_bytes, ==, 512 * 1024);
    CHECK_INT(p.timeout_ms, ==, 2000);
    CHECK_INT(p.max_redirects, ==, 0);
    tk_ssrf_policy_free(&p);

    static const struct {
        const char *var, *val, *want;
    } bad[] = {
        {"SSRF_ALLOW", "10.1.2.3/16", "SSRF_ALLOW: \"10.1.2.3/16\": host bits are set"},
        {"SSRF_DENY", "a*b", "SSRF_DENY: \"a*b\""},
        {"SSRF_ALLOWED_PORTS", "http", "SSRF_ALLOWED_PORTS: \"http\" is not a port"},
        {"FETCH_MAX_BYTES", "lots", "FETCH_MAX_BYTES: \"lots\""},
        {"FETCH_MAX_BYTES", "0", "FETCH_MAX_BYTES"},
        {"FETCH_MAX_BYTES", "2T", "FETCH_MAX_BYTES"},
        {"FETCH_TIMEOUT", "soon", "FETCH_TIMEOUT: \"soon\" is not a duration"},
        {"FETCH_TIMEOUT", "1h", "FETCH_TIMEOUT"},
        {"FETCH_MAX_REDIRECTS", "21", "FETCH_MAX_REDIRECTS: \"21\" is not a number from 0 to 20"},
        {"FETCH_MAX_REDIRECTS", "-1", "FETCH_MAX_REDIRECTS"},
    };
    for (size_t i = 0; i < TK_ARRAY_LEN(bad); i++) {
        unsetenv("SSRF_ALLOW");
        unsetenv("SSRF_DENY");
        unsetenv("SSRF_ALLOWED_PORTS");
        unsetenv("FETCH_MAX_BYTES");
        unsetenv("FETCH_TIMEOUT");
        unsetenv("FETCH_MAX_REDIRECTS");
        setenv(bad[i].var, bad[i].val, 1);
        err[0] = '\0';
        CHECK_INT(tk_ssrf_policy_from_env(&p, err, sizeof err), ==, TK_EINVAL);
        if (!strstr(err, bad[i].want))
            TK_TEST_FAIL("%s=%s: error \"%s\" lacks \"%s\"", bad[i].var, bad[i].val, err,
                         bad[i].want);
        CHECK_INT(p.nallow + p.ndeny, ==, 0); /* left empty */
        tk_ssrf_policy_free(&p);
    }
}

/* ------------------------------------------------------------------------- */
/* Small pieces                                                              */
/* ------------------------------------------------------------------------- */

TEST(ssrf_addr_rules_direct)
{
    char why[256];
    tk_ip ip;
    CHECK(tk_ip_parse("127.0.0.1", &ip));
    CHECK(tk_ssrf_addr_blocked(&ip, why, sizeof why));
    CHECK_STR(why, "loopback (127.0.0.0/8)");
    CHECK(tk_ip_parse("8.8.8.8", &ip));
    CHECK(!tk_ssrf_addr_blocked(&ip, why, sizeof why));
    CHECK(tk_ip_parse("2001:0:4136:e378:8000:63bf:80ff:fffe", &ip));
    CHECK(tk_ssrf_addr_blocked(&ip, why, sizeof why));
    CHECK(strstr(why, "client 127.0.0.1"));
    memset(&ip, 0, sizeof ip);
    ip.family = 5;
    CHECK(tk_ssrf_addr_blocked(&ip, why, sizeof why));
    /* a tiny buffer is fine */
    CHECK(tk_ip_parse("::ffff:127.0.0.1", &ip));
    CHECK(tk_ssrf_addr_blocked(&ip, why, 4));
    CHECK_INT(strlen(why), ==, 3);
}

TEST(ssrf_codes_have_names)
{
    static const char *const names[] = {
        "ok",          "bad_url",         "bad_scheme",   "userinfo",         "bad_port",
        "denied_host", "blocked_address", "dns_failed",   "redirect_blocked", "too_many_redirects",
        "too_large",   "timeout",         "fetch_failed", "cancelled"};
    for (int c = TK_SSRF_OK; c <= TK_SSRF_CANCELLED; c++)
        CHECK_STR(tk_ssrf_code_str((tk_ssrf_code)c), names[c]);
}

TEST(ssrf_check_host_for_proxies)
{
    tk_ssrf_policy p;
    test_policy(&p);
    tk_ssrf_target t;
    CHECK_INT(tk_ssrf_check_host(&p, "169.254.169.254", 80, &t), ==, TK_EDENIED);
    CHECK_INT(t.code, ==, BLK);
    CHECK(t.url == NULL);
    tk_ssrf_target_free(&t);
    CHECK_INT(tk_ssrf_check_host(&p, "Public.Test.", 443, &t), ==, TK_OK);
    CHECK_STR(t.host, "public.test");
    CHECK_INT(t.naddrs, ==, 1);
    tk_ssrf_target_free(&t);
    CHECK_INT(tk_ssrf_check_host(&p, "[::1]", 443, &t), ==, TK_EDENIED);
    tk_ssrf_target_free(&t);
    CHECK_INT(tk_ssrf_check_host(&p, "public.test", 0, &t), ==, TK_EDENIED);
    CHECK_INT(t.code, ==, TK_SSRF_BAD_PORT);
    tk_ssrf_target_free(&t);
    CHECK_INT(tk_ssrf_check_host(&p, "public.test", 22, &t), ==, TK_EDENIED);
    CHECK_INT(t.code, ==, TK_SSRF_BAD_PORT);
    tk_ssrf_target_free(&t);
    CHECK_INT(tk_ssrf_check_host(&p, "", 80, &t), ==, TK_EDENIED);
    CHECK_INT(t.code, ==, TK_SSRF_BAD_URL);
    tk_ssrf_target_free(&t);
    CHECK_INT(tk_ssrf_check_host(&p, NULL, 80, &t), ==, TK_EDENIED);
    tk_ssrf_target_free(&t);
    tk_ssrf_policy_free(&p);
}

/* What an egress proxy does: check host:port, connect only to the pinned
 * addresses, and verify each right before connect(). */
TEST(ssrf_pinned_addresses_for_proxies)
{
    tk_ssrf_policy p;
    test_policy(&p);
    char err[256];
    CHECK_INT(tk_ssrf_policy_allow(&p, "intranet.test", err, sizeof err), ==, TK_OK);
    tk_ssrf_target t;
    CHECK_INT(tk_ssrf_check_host(&p, "dual.test", 443, &t), ==, TK_OK);
    CHECK_INT(t.naddrs, ==, 2);
    tk_ip v4, v6, other, loop;
    CHECK(tk_ip_parse("93.184.215.14", &v4));
    CHECK(tk_ip_parse("2606:4700:4700::1111", &v6));
    CHECK(tk_ip_parse("93.184.215.16", &other));
    CHECK(tk_ip_parse("127.0.0.1", &loop));
    CHECK(tk_ssrf_target_admits(&p, &t, &v4, 443));
    CHECK(tk_ssrf_target_admits(&p, &t, &v6, 443));
    CHECK(!tk_ssrf_target_admits(&p, &t, &v4, 80));     /* not the port checked */
    CHECK(!tk_ssrf_target_admits(&p, &t, &other, 443)); /* public, but not pinned */
    CHECK(!tk_ssrf_target_admits(&p, &t, &loop, 443));
    tk_ssrf_target_free(&t);
    /* an allowlisted name: its private address is admitted, and only it */
    CHECK_INT(tk_ssrf_check_host(&p, "intranet.test", 80, &t), ==, TK_OK);
    CHECK(t.by_allowlist);
    tk_ip intra;
    CHECK(tk_ip_parse("10.1.0.7", &intra));
    CHECK(tk_ssrf_target_admits(&p, &t, &intra, 80));
    CHECK(!tk_ssrf_target_admits(&p, &t, &loop, 80));
    tk_ssrf_target_free(&t);
    /* a refused target admits nothing, even the address it resolved to */
    CHECK_INT(tk_ssrf_check_host(&p, "mixed.test", 443, &t), ==, TK_EDENIED);
    CHECK_INT(t.code, ==, BLK);
    CHECK_INT(t.naddrs, ==, 0);
    CHECK(!tk_ssrf_target_admits(&p, &t, &v4, 443));
    tk_ssrf_target_free(&t);
    /* a pinned address the policy now refuses (denied since the check) */
    CHECK_INT(tk_ssrf_check_host(&p, "public.test", 443, &t), ==, TK_OK);
    CHECK(tk_ssrf_target_admits(&p, &t, &v4, 443));
    CHECK_INT(tk_ssrf_policy_deny(&p, "93.184.215.0/24", err, sizeof err), ==, TK_OK);
    CHECK(!tk_ssrf_target_admits(&p, &t, &v4, 443));
    tk_ssrf_target_free(&t);
    tk_ssrf_policy_free(&p);
}

TEST(ssrf_check_until_bounds_the_lookup_by_its_deadline)
{
    tk_ssrf_policy p;
    test_policy(&p);
    tk_ssrf_target t;
    CHECK_INT(tk_ssrf_check_until(&p, "https://public.test/", tk_mono_ms() + 5000, 5000, &t), ==,
              TK_OK);
    CHECK_STR(t.url, "https://public.test/");
    tk_ssrf_target_free(&t);
    /* a deadline already past: the lookup is not waited for */
    CHECK_INT(tk_ssrf_check_until(&p, "https://stall.test/", tk_mono_ms() - 1, 1234, &t), ==,
              TK_ETIMEOUT);
    CHECK_INT(t.code, ==, TK_SSRF_TIMEOUT);
    CHECK(strstr(t.reason, "stall.test could not be resolved within 1234 ms") != NULL);
    tk_ssrf_target_free(&t);
    stall_release();
    wait_abandoned_lookups_end();
    /* literals need no lookup, whatever the deadline */
    CHECK_INT(tk_ssrf_check_until(&p, "http://8.8.8.8/", 0, 1, &t), ==, TK_OK);
    tk_ssrf_target_free(&t);
    CHECK_INT(tk_ssrf_url_fault_code(TK_URL_ESCHEME), ==, TK_SSRF_BAD_SCHEME);
    CHECK_INT(tk_ssrf_url_fault_code(TK_URL_EUSERINFO), ==, TK_SSRF_USERINFO);
    CHECK_INT(tk_ssrf_url_fault_code(TK_URL_EPORT), ==, TK_SSRF_BAD_PORT);
    CHECK_INT(tk_ssrf_url_fault_code(TK_URL_EBAD), ==, TK_SSRF_BAD_URL);
    tk_ssrf_policy_free(&p);
}

TEST(ssrf_describe_for_operators)
{
    tk_ssrf_policy p;
    test_policy(&p);
    tk_ssrf_target t;
    char line[600];
    tk_ssrf_check(&p, "http://0x7f.1/", &t);
    tk_ssrf_target_describe(&t, line, sizeof line);
    CHECK_STR(line, "refused blocked_address: 127.0.0.1 is loopback (127.0.0.0/8)");
    tk_ssrf_target_free(&t);
    tk_ssrf_check(&p, "http://Public.Test/x", &t);
    tk_ssrf_target_describe(&t, line, sizeof line);
    CHECK_STR(line,
              "allowed http://public.test/x (allowed: public.test -> 93.184.215.14 (public))");
    tk_ssrf_target_free(&t);
    tk_ssrf_check(&p, NULL, &t);
    CHECK_INT(t.code, ==, TK_SSRF_BAD_URL);
    tk_ssrf_target_free(&t);
    tk_ssrf_policy_free(&p);
}

struct thread_arg {
    tk_ssrf_policy *p;
    int bad;
};

static void *checker(void *arg)
{
    struct thread_arg *ta = arg;
    for (int k = 0; k < 20; k++) {
        for (size_t i = 0; i < TK_ARRAY_LEN(url_cases); i++) {
            tk_ssrf_target t;
            tk_ssrf_check(ta->p, url_cases[i].url, &t);
            if (t.code != url_cases[i].code)
                ta->bad++;
            tk_ssrf_target_free(&t);
        }
    }
    return NULL;
}

TEST(ssrf_check_is_thread_safe)
{
    tk_ssrf_policy p;
    test_policy(&p);
    pthread_t th[6];
    struct thread_arg ta[6];
    for (int i = 0; i < 6; i++) {
        ta[i].p = &p;
        ta[i].bad = 0;
        CHECK_INT(pthread_create(&th[i], NULL, checker, &ta[i]), ==, 0);
    }
    for (int i = 0; i < 6; i++) {
        pthread_join(th[i], NULL);
        CHECK_INT(ta[i].bad, ==, 0);
    }
    tk_ssrf_policy_free(&p);
}

/* ------------------------------------------------------------------------- */
/* A tiny HTTP server on 127.0.0.1                                           */
/* ------------------------------------------------------------------------- */

#define MAX_CONNS 64

struct srv {
    int fd, port;
    pthread_t th;
    atomic_int stop;
    atomic_int accepts;
    pthread_mutex_t mu;
    int nreq;
    char paths[64][128];
    char last_headers[4096];
    int blocked_port, b_port; /* targets for redirects */
    pthread_t conns[MAX_CONNS];
    int nconns;
};

struct conn {
    struct srv *s;
    int fd;
};

static char big_body[1 << 20];

static void send_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n > 0) {
        ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
        if (w <= 0)
            return;
        c += w;
        n -= (size_t)w;
    }
}

static void reply(int fd, const char *status, const char *extra, const char *ctype,
                  const void *body, size_t len, int head)
{
    char h[1024];
    int n = snprintf(h, sizeof h,
                     "HTTP/1.1 %s\r\n%sContent-Type: %s\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n",
                     status, extra ? extra : "", ctype, len);
    send_all(fd, h, (size_t)n);
    if (!head)
        send_all(fd, body, len);
}

static void redirect(int fd, const char *status, const char *location)
{
    char extra[512];
    snprintf(extra, sizeof extra, "Location: %s\r\n", location);
    reply(fd, status, extra, "text/html", "<a>moved</a>", 12, 0);
}

static void *conn_main(void *arg)
{
    struct conn *c = arg;
    struct srv *s = c->s;
    char req[8192];
    size_t n = 0;
    while (n < sizeof req - 1) {
        ssize_t r = recv(c->fd, req + n, sizeof req - 1 - n, 0);
        if (r <= 0)
            break;
        n += (size_t)r;
        req[n] = '\0';
        if (strstr(req, "\r\n\r\n"))
            break;
    }
    req[n] = '\0';
    char method[16] = "", path[128] = "";
    sscanf(req, "%15s %127s", method, path);
    pthread_mutex_lock(&s->mu);
    if (s->nreq < 64)
        snprintf(s->paths[s->nreq], sizeof s->paths[0], "%s", path);
    s->nreq++;
    snprintf(s->last_headers, sizeof s->last_headers, "%s", req);
    pthread_mutex_unlock(&s->mu);
    int head = strcmp(method, "HEAD") == 0;
    char loc[256];
    if (strcmp(path, "/hello") == 0) {
        static const char body[] = "hello from the test server\n";
        reply(c->fd, "200 OK", NULL, "text/plain; charset=utf-8", body, sizeof body - 1, head);
    } else if (strcmp(path, "/page") == 0) {
        static const char body[] = "<html><title>t</title><p>hi</p></html>";
        reply(c->fd, "200 OK", NULL, "text/html; charset=utf-8", body, sizeof body - 1, head);
    } else if (strcmp(path, "/to-hello") == 0) {
        redirect(c->fd, "302 Found", "/hello");
    } else if (strcmp(path, "/to-other") == 0) {
        snprintf(loc, sizeof loc, "http://127.0.0.1:%d/hello", s->blocked_port);
        redirect(c->fd, "302 Found", loc);
    } else if (strcmp(path, "/to-meta") == 0) {
        redirect(c->fd, "302 Found", "http://169.254.169.254/latest/meta-data/");
    } else if (strcmp(path, "/to-metadec") == 0) {
        redirect(c->fd, "301 Moved Permanently", "http://2852039166/latest/meta-data/");
    } else if (strcmp(path, "/loop") == 0) {
        redirect(c->fd, "302 Found", "/loop");
    } else if (strncmp(path, "/chain/", 7) == 0) {
        int k = (int)strtol(path + 7, NULL, 10);
        if (k <= 0) {
            reply(c->fd, "200 OK", NULL, "text/plain", "done", 4, head);
        } else {
            snprintf(loc, sizeof loc, "/chain/%d", k - 1);
            redirect(c->fd, "307 Temporary Redirect", loc);
        }
    } else if (strcmp(path, "/to-file") == 0) {
        redirect(c->fd, "302 Found", "file:///etc/passwd");
    } else if (strcmp(path, "/to-userinfo") == 0) {
        snprintf(loc, sizeof loc, "http://u:p@127.0.0.1:%d/hello", s->port);
        redirect(c->fd, "307 Temporary Redirect", loc);
    } else if (strcmp(path, "/to-mapped") == 0) {
        snprintf(loc, sizeof loc, "http://[::ffff:127.0.0.1]:%d/hello", s->port);
        redirect(c->fd, "308 Permanent Redirect", loc);
    } else if (strcmp(path, "/to-garbage") == 0) {
        redirect(c->fd, "302 Found", "http://[::1/");
    } else if (strcmp(path, "/to-b") == 0) {
        snprintf(loc, sizeof loc, "http://127.0.0.1:%d/echo", s->b_port);
        redirect(c->fd, "303 See Other", loc);
    } else if (strcmp(path, "/to-stall") == 0) {
        redirect(c->fd, "302 Found", "http://stall.test/");
    } else if (strcmp(path, "/to-slow") == 0) {
        redirect(c->fd, "302 Found", "/slow");
    } else if (strcmp(path, "/to-self-echo") == 0) {
        redirect(c->fd, "302 Found", "/echo");
    } else if (strcmp(path, "/echo") == 0) {
        reply(c->fd, "200 OK", NULL, "text/plain", "echo", 4, head);
    } else if (strcmp(path, "/no-location") == 0) {
        reply(c->fd, "302 Found", NULL, "text/plain", "nowhere", 7, head);
    } else if (strcmp(path, "/big") == 0) {
        reply(c->fd, "200 OK", NULL, "application/octet-stream", big_body, sizeof big_body, head);
    } else if (strcmp(path, "/big-nolen") == 0) {
        static const char h[] = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                                "Connection: close\r\n\r\n";
        send_all(c->fd, h, sizeof h - 1);
        send_all(c->fd, big_body, sizeof big_body);
    } else if (strcmp(path, "/slow") == 0) {
        /* Headers and 4 of 10 body bytes, then nothing until the server stops:
         * only the fetch's time cap can end this fetch (without it the test
         * hangs and the runner's per-test timeout fails it). */
        static const char h[] = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                                "Content-Length: 10\r\nConnection: close\r\n\r\nslow";
        send_all(c->fd, h, sizeof h - 1);
        while (!atomic_load(&s->stop))
            tk_sleep_ms(20);
    } else if (strcmp(path, "/silent") == 0) {
        /* The request is read, no byte of an answer is ever sent. */
        while (!atomic_load(&s->stop))
            tk_sleep_ms(20);
    } else {
        reply(c->fd, "404 Not Found", NULL, "text/plain", "no", 2, head);
    }
    shutdown(c->fd, SHUT_WR);
    /* drain so the client sees a clean close */
    struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
    while (poll(&pfd, 1, 200) > 0 && recv(c->fd, req, sizeof req, 0) > 0)
        ;
    close(c->fd);
    free(c);
    return NULL;
}

static void *srv_main(void *arg)
{
    struct srv *s = arg;
    while (!atomic_load(&s->stop)) {
        struct pollfd pfd = {.fd = s->fd, .events = POLLIN};
        if (poll(&pfd, 1, 50) <= 0)
            continue;
        int fd = accept(s->fd, NULL, NULL);
        if (fd < 0)
            continue;
        atomic_fetch_add(&s->accepts, 1);
        struct conn *c = tk_malloc(sizeof *c);
        c->s = s;
        c->fd = fd;
        pthread_mutex_lock(&s->mu);
        int ok =
            s->nconns < MAX_CONNS && pthread_create(&s->conns[s->nconns], NULL, conn_main, c) == 0;
        if (ok)
            s->nconns++;
        pthread_mutex_unlock(&s->mu);
        if (!ok) {
            close(fd);
            free(c);
        }
    }
    return NULL;
}

static void srv_start_on(struct srv *s, int v6)
{
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->mu, NULL);
    s->fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(s->fd >= 0);
    if (v6) {
        struct sockaddr_in6 sin6 = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
        CHECK_INT(bind(s->fd, (struct sockaddr *)&sin6, sizeof sin6), ==, 0);
        socklen_t sl = sizeof sin6;
        CHECK_INT(getsockname(s->fd, (struct sockaddr *)&sin6, &sl), ==, 0);
        s->port = ntohs(sin6.sin6_port);
    } else {
        struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = 0};
        sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        CHECK_INT(bind(s->fd, (struct sockaddr *)&sin, sizeof sin), ==, 0);
        socklen_t sl = sizeof sin;
        CHECK_INT(getsockname(s->fd, (struct sockaddr *)&sin, &sl), ==, 0);
        s->port = ntohs(sin.sin_port);
    }
    CHECK_INT(listen(s->fd, 64), ==, 0);
    CHECK_INT(pthread_create(&s->th, NULL, srv_main, s), ==, 0);
}

static void srv_start(struct srv *s)
{
    srv_start_on(s, 0);
}

static void srv_stop(struct srv *s)
{
    atomic_store(&s->stop, 1);
    pthread_join(s->th, NULL);
    for (int i = 0; i < s->nconns; i++)
        pthread_join(s->conns[i], NULL);
    close(s->fd);
    pthread_mutex_destroy(&s->mu);
}

static int srv_hits(struct srv *s, const char *path)
{
    int n = 0;
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < s->nreq && i < 64; i++)
        n += strcmp(s->paths[i], path) == 0;
    pthread_mutex_unlock(&s->mu);
    return n;
}

/* Server A (allowlisted), B (a second allowlisted origin), C (port not allowed). */
static struct srv A, B, C;
static tk_ssrf_policy fp;

static void fetch_setup(void)
{
    for (size_t i = 0; i < sizeof big_body; i++)
        big_body[i] = (char)('a' + i % 26);
    srv_start(&A);
    srv_start(&B);
    srv_start(&C);
    A.blocked_port = C.port;
    A.b_port = B.port;
    test_policy(&fp);
    char err[256], ports[32];
    CHECK_INT(tk_ssrf_policy_allow(&fp, "127.0.0.1", err, sizeof err), ==, TK_OK);
    snprintf(ports, sizeof ports, "%d,%d", A.port, B.port);
    CHECK_INT(tk_ssrf_policy_allow_ports(&fp, ports, err, sizeof err), ==, TK_OK);
}

static void fetch_teardown(void)
{
    srv_stop(&A);
    srv_stop(&B);
    srv_stop(&C);
    CHECK_INT(atomic_load(&C.accepts), ==, 0); /* the refused port was never reached */
    CHECK_INT(atomic_load(&hook.refused), ==, 0);
    tk_ssrf_policy_free(&fp);
}

static char *a_url(const char *path)
{
    return tk_asprintf("http://127.0.0.1:%d%s", A.port, path);
}

static tk_status fetch_a(const char *path, const tk_ssrf_fetch_opts *o, tk_ssrf_result *r)
{
    char *u = a_url(path);
    tk_status st = tk_ssrf_fetch(&fp, u, o, r);
    free(u);
    return st;
}

/* ------------------------------------------------------------------------- */
/* Fetch tests                                                               */
/* ------------------------------------------------------------------------- */

TEST(fetch_allowlisted_loopback_server)
{
    fetch_setup();
    tk_ssrf_result r;
    CHECK_INT(fetch_a("/hello", NULL, &r), ==, TK_OK);
    CHECK_INT(r.code, ==, TK_SSRF_OK);
    CHECK_INT(r.status, ==, 200);
    CHECK_STR(tk_buf_cstr(&r.body), "hello from the test server\n");
    CHECK_STR(r.content_type, "text/plain; charset=utf-8");
    CHECK_INT(r.truncated, ==, 0);
    CHECK_INT(r.nhops, ==, 1);
    CHECK_STR(r.hops[0].address, "127.0.0.1");
    CHECK_INT(r.hops[0].status, ==, 200);
    char *u = a_url("/hello");
    CHECK_STR(r.final_url, u);
    free(u);
    tk_ssrf_result_free(&r);

    CHECK_INT(fetch_a("/page", NULL, &r), ==, TK_OK);
    CHECK_STR(r.content_type, "text/html; charset=utf-8");
    CHECK(strstr(tk_buf_cstr(&r.body), "<title>t</title>"));
    tk_ssrf_result_free(&r);

    CHECK_INT(fetch_a("/nothing-here", NULL, &r), ==, TK_OK); /* a 404 is a response */
    CHECK_INT(r.status, ==, 404);
    tk_ssrf_result_free(&r);

    tk_ssrf_fetch_opts o = {.method = "HEAD"};
    CHECK_INT(fetch_a("/hello", &o, &r), ==, TK_OK);
    CHECK_INT(r.status, ==, 200);
    CHECK_INT(r.body.len, ==, 0);
    tk_ssrf_result_free(&r);

    CHECK_INT(atomic_load(&hook.attempts), ==, 4);
    CHECK_INT(atomic_load(&A.accepts), ==, 4);
    fetch_teardown();
}

TEST(fetch_loopback_refused_without_the_allowlist)
{
    fetch_setup();
    tk_ssrf_policy p;
    test_policy(&p);
    char err[128], ports[16];
    snprintf(ports, sizeof ports, "%d", A.port);
    CHECK_INT(tk_ssrf_policy_allow_ports(&p, ports, err, sizeof err), ==, TK_OK);
    char *u = a_url("/hello");
    tk_ssrf_result r;
    CHECK_INT(tk_ssrf_fetch(&p, u, NULL, &r), ==, TK_EDENIED);
    CHECK_INT(r.code, ==, BLK);
    CHECK(strstr(r.reason, "127.0.0.1 is loopback (127.0.0.0/8)"));
    CHECK_STR(r.final_url, u);
    tk_ssrf_result_free(&r);
    free(u);
    /* and the port is checked before the address */
    u = tk_asprintf("http://127.0.0.1:%d/hello", B.port);
    CHECK_INT(tk_ssrf_fetch(&p, u, NULL, &r), ==, TK_EDENIED);
    CHECK_INT(r.code, ==, TK_SSRF_BAD_PORT);
    tk_ssrf_result_free(&r);
    free(u);
    tk_ssrf_policy_free(&p);
    CHECK_INT(atomic_load(&hook.attempts), ==, 0);
    CHECK_INT(atomic_load(&A.accepts), ==, 0);
    fetch_teardown();
}

/* localhost through the system resolver (/etc/hosts): refused, no connect. */
TEST(fetch_localhost_system_resolver)
{
    fetch_setup();
    tk_ssrf_policy p;
    test_policy(&p);
    p.resolve = NULL; /* the system resolver */
    p.on_connect = connect_hook;
    p.connect_ud = &hook;
    char err[128], ports[16];
    snprintf(ports, sizeof ports, "%d", A.port);
    CHECK_INT(tk_ssrf_policy_allow_ports(&p, ports, err, sizeof err), ==, TK_OK);
    char *u = tk_asprintf("http://localhost:%d/hello", A.port);
    tk_ssrf_result r;
    CHECK_INT(tk_ssrf_fetch(&p, u, NULL, &r), ==, TK_EDENIED);
    CHECK_INT(r.code, ==, BLK);
    CHECK(strstr(r.reason, "localhost resolves to"));
    CHECK(strstr(r.reason, "loopback"));
    tk_ssrf_result_free(&r);
    free(u);
    tk_ssrf_policy_free(&p);
    CHECK_INT(atomic_load(&hook.attempts), ==, 0);
    CHECK_INT(atomic_load(&A.accepts), ==, 0);
    fetch_teardown();
}

/* A name answering a public and a loopback address is refused as a whole, even
 * with the loopback address's port open and allowlisted. */
TEST(fetch_mixed_answer_refused_as_a_whole)
{
    fetch_setup();
    char *u = tk_asprintf("http://mixed.test:%d/hello", A.port);
    tk_ssrf_policy p;
    test_policy(&p);
    char err[128], ports[16];
    snprintf(ports, sizeof ports, "%d", A.port);
    CHECK_INT(tk_ssrf_policy_allow_ports(&p, ports, err, sizeof err), ==, TK_OK);
    tk_ssrf_result r;
    CHECK_INT(tk_ssrf_fetch(&p, u, NULL, &r), ==, TK_EDENIED);
    CHECK_INT(r.code, ==, BLK);
    CHECK(strstr(r.reason, "mixed.test resolves to 127.0.0.1"));
    tk_ssrf_result_free(&r);
    free(u);
    tk_ssrf_policy_free(&p);
    CHECK_INT(atomic_load(&hook.attempts), ==, 0);
    CHECK_INT(atomic_load(&A.accepts), ==, 0);
    fetch_teardown();
}

/*
 * Rebinding: the name is "localhost" (so that curl, were it to resolve on its
 * own, would find 127.0.0.1 where server A listens). The resolver answers a
 * public address first and loopback after. The fetch must resolve once and try
 * only the pinned public address (which the hook refuses, so nothing leaves).
 */
TEST(fetch_rebinding_connects_only_to_the_pinned_address)
{
    fetch_setup();
    tk_ssrf_policy p;
    test_policy(&p);
    fake.rebind_name = "localhost";
    char err[128], ports[16];
    snprintf(ports, sizeof ports, "%d", A.port);
    CHECK_INT(tk_ssrf_policy_allow_ports(&p, ports, err, sizeof err), ==, TK_OK);
    char *u = tk_asprintf("http://localhost:%d/hello", A.port);
    tk_ssrf_result r;
    tk_status st = tk_ssrf_fetch(&p, u, NULL, &r);
    CHECK(st != TK_OK);
    CHECK_INT(r.code, ==, TK_SSRF_FETCH_FAILED);
    CHECK(strstr(r.reason, "connect hook refused 93.184.215.14"));
    CHECK_INT(atomic_load(&fake.rebind_calls), ==, 1);
    CHECK_INT(atomic_load(&hook.attempts), ==, 1);
    CHECK_STR(hook.seen[0], "93.184.215.14");
    CHECK_INT(atomic_load(&A.accepts), ==, 0); /* loopback never reached */
    tk_ssrf_result_free(&r);

    /* answering loopback first: refused by the check, no connect at all */
    fake.rebind_loopback_first = 1;
    atomic_store(&fake.rebind_calls, 0);
    CHECK_INT(tk_ssrf_fetch(&p, u, NULL, &r), ==, TK_EDENIED);
    CHECK_INT(r.code, ==, BLK);
    CHECK_INT(atomic_load(&hook.attempts), ==, 1);
    CHECK_INT(atomic_load(&A.accepts), ==, 0);
    tk_ssrf_result_free(&r);
    free(u);
    tk_ssrf_policy_free(&p);
    atomic_store(&hook.refused, 0); /* the refusal above was the point */
    fetch_teardown();
}

/* An allowlisted name resolving to loopback is pinned too: the fetch reaches
 * the pinned 127.0.0.1 server. */
TEST(fetch_pins_allowlisted_name)
{
    fetch_setup();
    tk_ssrf_policy p;
    test_policy(&p);
    char err[128], ports[16];
    snprintf(ports, sizeof ports, "%d", A.port);
    CHECK_INT(tk_ssrf_policy_allow_ports(&p, ports, err, sizeof err), ==, TK_OK);
    CHECK_INT(tk_ssrf_policy_allow(&p, "loop.test", err, sizeof err), ==, TK_OK);
    char *u = tk_asprintf("http://loop.test:%d/hello", A.port);
    tk_ssrf_result r;
    CHECK_INT(tk_ssrf_fetch(&p, u, NULL, &r), ==, TK_OK);
    CHECK_INT(r.status, ==, 200);
    CHECK_STR(r.hops[0].address, "127.0.0.1");
    CHECK(strstr(A.last_headers, "Host: loop.test:"));
    tk_ssrf_result_free(&r);
    free(u);
    tk_ssrf_policy_free(&p);
    CHECK_INT(atomic_load(&fake.calls), ==, 1);
    fetch_teardown();
}

/* IPv6: an allowlisted ::1 server, by literal and through a pinned name. */
TEST(fetch_ipv6_loopback_pinned)
{
    fetch_setup();
    struct srv s6;
    srv_start_on(&s6, 1);
    tk_ssrf_policy p;
    test_policy(&p);
    char err[128], ports[16];
    snprintf(ports, sizeof ports, "%d", s6.port);
    CHECK_INT(tk_ssrf_policy_allow_ports(&p, ports, err, sizeof err), ==, TK_OK);
    char *lit = tk_asprintf("http://[0:0::1]:%d/hello", s6.port);
    char *name = tk_asprintf("http://loop6.test:%d/hello", s6.port);
    tk_ssrf_result r;
    CHECK_INT(tk_ssrf_fetch(&p, lit, NULL, &r), ==, TK_EDENIED); /* not yet allowlisted */
    CHECK_INT(r.code, ==, BLK);
    tk_ssrf_result_free(&r);
    CHECK_INT(tk_ssrf_policy_allow(&p, "::1", err, sizeof err), ==, TK_OK);
    CHECK_INT(tk_ssrf_fetch(&p, lit, NULL, &r), ==, TK_OK);
    CHECK_INT(r.status, ==, 200);
    CHECK_STR(r.hops[0].address, "::1");
    CHECK(strstr(r.final_url, "http://[::1]:"));
    tk_ssrf_result_free(&r);
    CHECK_INT(tk_ssrf_fetch(&p, name, NULL, &r), ==, TK_OK);
    CHECK_INT(r.status, ==, 200);
    CHECK_STR(tk_buf_cstr(&r.body), "hello from the test server\n");
    CHECK_STR(r.hops[0].address, "::1");
    tk_ssrf_result_free(&r);
    CHECK_INT(atomic_load(&hook.attempts), ==, 2);
    CHECK_INT(atomic_load(&s6.accepts), ==, 2);
    free(lit);
    free(name);
    tk_ssrf_policy_free(&p);
    srv_stop(&s6);
    fetch_teardown();
}

TEST(fetch_follows_a_checked_redirect)
{
    fetch_setup();
    tk_ssrf_result r;
    CHECK_INT(fetch_a("/to-hello", NULL, &r), ==, TK_OK);
    CHECK_INT(r.status, ==, 200);
    CHECK_STR(tk_buf_cstr(&r.body), "hello from the test server\n");
    CHECK_INT(r.nhops, ==, 2);
    CHECK_INT(r.hops[0].status, ==, 302);
    CHECK_INT(r.hops[1].status, ==, 200);
    char *u = a_url("/hello");
    CHECK_STR(r.final_url, u);
    CHECK_STR(r.hops[1].url, u);
    free(u);
    tk_ssrf_result_free(&r);

    CHECK_INT(fetch_a("/chain/3", NULL, &r), ==, TK_OK);
    CHECK_STR(tk_buf_cstr(&r.body), "done");
    CHECK_INT(r.nhops, ==, 4);
    tk_ssrf_result_free(&r);

    /* a 3xx without Location is the answer */
    CHECK_INT(fetch_a("/no-location", NULL, &r), ==, TK_OK);
    CHECK_INT(r.status, ==, 302);
    CHECK_STR(tk_buf_cstr(&r.body), "nowhere");
    tk_ssrf_result_free(&r);
    fetch_teardown();
}

static int redirect_status_ok(long s)
{
    return s == 301 || s == 302 || s == 303 || s == 307 || s == 308;
}

struct redirect_case {
    const char *path;
    tk_ssrf_code cause;
    const char *why;
};

TEST(fetch_refuses_redirects_to_refused_targets)
{
    fetch_setup();
    static const struct redirect_case cases[] = {
        {"/to-other", TK_SSRF_BAD_PORT, "is not allowed"},
        {"/to-meta", TK_SSRF_BLOCKED_ADDRESS, "169.254.169.254 is link-local"},
        {"/to-metadec", TK_SSRF_BLOCKED_ADDRESS, "metadata"},
        {"/to-file", TK_SSRF_BAD_SCHEME, "file:"},
        {"/to-userinfo", TK_SSRF_USERINFO, "user name"},
        {"/to-mapped", TK_SSRF_BLOCKED_ADDRESS, "IPv4-mapped"},
        {"/to-garbage", TK_SSRF_BAD_URL, "unclosed"},
    };
    for (size_t i = 0; i < TK_ARRAY_LEN(cases); i++) {
        tk_ssrf_result r;
        int before = atomic_load(&hook.attempts);
        CHECK_INT(fetch_a(cases[i].path, NULL, &r), ==, TK_EDENIED);
        if (r.code != TK_SSRF_REDIRECT_BLOCKED || r.cause != cases[i].cause)
            TK_TEST_FAIL("%s: got %s/%s (%s)", cases[i].path, tk_ssrf_code_str(r.code),
                         tk_ssrf_code_str(r.cause), r.reason);
        if (!strstr(r.reason, cases[i].why))
            TK_TEST_FAIL("%s: reason \"%s\" lacks \"%s\"", cases[i].path, r.reason, cases[i].why);
        CHECK(strstr(r.reason, "the redirect from"));
        CHECK_INT(r.nhops, ==, 1);
        CHECK(redirect_status_ok(r.status));
        CHECK_INT(r.body.len, ==, 0);
        CHECK_INT(atomic_load(&hook.attempts) - before, ==, 1); /* only the first hop */
        tk_ssrf_result_free(&r);
    }
    fetch_teardown();
}

TEST(fetch_redirect_limit)
{
    fetch_setup();
    tk_ssrf_result r;
    CHECK_INT(fetch_a("/loop", NULL, &r), ==, TK_EDENIED);
    CHECK_INT(r.code, ==, TK_SSRF_TOO_MANY_REDIRECTS);
    CHECK(strstr(r.reason, "more than 5 redirects"));
    CHECK_INT(r.nhops, ==, 6);
    CHECK_INT(srv_hits(&A, "/loop"), ==, 6);
    tk_ssrf_result_free(&r);

    tk_ssrf_fetch_opts o = {.max_redirects = 2};
    CHECK_INT(fetch_a("/chain/3", &o, &r), ==, TK_EDENIED);
    CHECK_INT(r.code, ==, TK_SSRF_TOO_MANY_REDIRECTS);
    CHECK_INT(r.nhops, ==, 3);
    tk_ssrf_result_free(&r);
    CHECK_INT(fetch_a("/chain/2", &o, &r), ==, TK_OK);
    tk_ssrf_result_free(&r);

    o.max_redirects = TK_SSRF_NO_REDIRECTS;
    CHECK_INT(fetch_a("/to-hello", &o, &r), ==, TK_EDENIED);
    CHECK_INT(r.code, ==, TK_SSRF_TOO_MANY_REDIRECTS);
    CHECK_INT(r.nhops, ==, 1);
    tk_ssrf_result_free(&r);
    fetch_teardown();
}

/* Caller headers go to the first origin only; Host is never taken from them. */
TEST(fetch_headers_stay_with_their_origin)
{
    fetch_setup();
    static const char *const hdrs[] = {"X-Secret: s3cret", "Host: internal.example",
                                       " HOST\t: internal2.example", NULL};
    tk_ssrf_fetch_opts o = {.headers = hdrs};
    tk_ssrf_result r;
    CHECK_INT(fetch_a("/to-self-echo", &o, &r), ==, TK_OK);
    CHECK_STR(tk_buf_cstr(&r.body), "echo");
    CHECK(strstr(A.last_headers, "X-Secret: s3cret"));
    CHECK(!strstr(A.last_headers, "internal.example"));
    CHECK(!strstr(A.last_headers, "internal2.example"));
    tk_ssrf_result_free(&r);

    CHECK_INT(fetch_a("/to-b", &o, &r), ==, TK_OK);
    CHECK_STR(tk_buf_cstr(&r.body), "echo");
    CHECK_INT(r.nhops, ==, 2);
    CHECK_INT(srv_hits(&B, "/echo"), ==, 1);
    CHECK(strstr(B.last_headers, "GET /echo"));
    CHECK(!strstr(B.last_headers, "X-Secret"));
    tk_ssrf_result_free(&r);
    fetch_teardown();
}

TEST(fetch_body_cap)
{
    fetch_setup();
    tk_ssrf_result r;
    tk_ssrf_fetch_opts o = {.max_bytes = 64 * 1024};
    CHECK_INT(fetch_a("/big", &o, &r), ==, TK_ETOOBIG);
    CHECK_INT(r.code, ==, TK_SSRF_TOO_LARGE);
    CHECK(strstr(r.reason, "larger than 65536 bytes"));
    CHECK_INT(r.body.len, ==, 0);
    tk_ssrf_result_free(&r);

    CHECK_INT(fetch_a("/big-nolen", &o, &r), ==, TK_ETOOBIG);
    CHECK_INT(r.code, ==, TK_SSRF_TOO_LARGE);
    tk_ssrf_result_free(&r);

    o.allow_truncation = 1;
    CHECK_INT(fetch_a("/big", &o, &r), ==, TK_OK);
    CHECK_INT(r.code, ==, TK_SSRF_OK);
    CHECK_INT(r.truncated, ==, 1);
    CHECK_INT(r.body.len, ==, 64 * 1024);
    CHECK_MEM(r.body.data, big_body, 64 * 1024);
    CHECK_INT(r.status, ==, 200);
    tk_ssrf_result_free(&r);

    CHECK_INT(fetch_a("/big-nolen", &o, &r), ==, TK_OK);
    CHECK_INT(r.truncated, ==, 1);
    CHECK_INT(r.body.len, ==, 64 * 1024);
    tk_ssrf_result_free(&r);

    /* HEAD: the size of a body never sent does not matter */
    tk_ssrf_fetch_opts head = {.method = "HEAD", .max_bytes = 1024};
    CHECK_INT(fetch_a("/big", &head, &r), ==, TK_OK);
    CHECK_INT(r.status, ==, 200);
    CHECK_INT(r.body.len, ==, 0);
    tk_ssrf_result_free(&r);

    /* the default cap (2 MiB) takes the whole 1 MiB */
    CHECK_INT(fetch_a("/big", NULL, &r), ==, TK_OK);
    CHECK_INT(r.truncated, ==, 0);
    CHECK_INT(r.body.len, ==, sizeof big_body);
    tk_ssrf_result_free(&r);

    /* the policy's cap applies when the options give none */
    fp.max_bytes = 1000;
    CHECK_INT(fetch_a("/big", NULL, &r), ==, TK_ETOOBIG);
    tk_ssrf_result_free(&r);
    fetch_teardown();
}

/*
 * The time cap, by outcome (no clock is read here): /slow sends its headers and
 * part of the body, then stalls until the server stops; /silent never answers.
 * The policy's timeout is set far beyond the runner's per-test timeout, so only
 * the per-fetch cap can end these fetches; the reason names the limit applied.
 */
TEST(fetch_time_cap)
{
    fetch_setup();
    fp.timeout_ms = 10L * 60 * 1000;
    tk_ssrf_result r;
    tk_ssrf_fetch_opts o = {.timeout_ms = 400};
    CHECK_INT(fetch_a("/slow", &o, &r), ==, TK_ETIMEOUT);
    CHECK_INT(r.code, ==, TK_SSRF_TIMEOUT);
    CHECK(strstr(r.reason, "no complete response"));
    CHECK(strstr(r.reason, "within 400 ms"));
    CHECK_INT(r.nhops, ==, 1);
    CHECK_INT(r.hops[0].status, ==, 200); /* the answer had begun: cut mid-body */
    CHECK_STR(r.hops[0].address, "127.0.0.1");
    CHECK_INT(r.body.len, ==, 0); /* nothing of a cut answer is handed back */
    CHECK_INT(r.truncated, ==, 0);
    tk_ssrf_result_free(&r);

    CHECK_INT(fetch_a("/silent", &o, &r), ==, TK_ETIMEOUT);
    CHECK_INT(r.code, ==, TK_SSRF_TIMEOUT);
    CHECK(strstr(r.reason, "within 400 ms"));
    CHECK_INT(r.nhops, ==, 1);
    CHECK_INT(r.status, ==, 0); /* no status line arrived */
    CHECK_INT(r.body.len, ==, 0);
    tk_ssrf_result_free(&r);

    /* without a per-fetch value the policy's timeout applies */
    fp.timeout_ms = 300;
    CHECK_INT(fetch_a("/slow", NULL, &r), ==, TK_ETIMEOUT);
    CHECK_INT(r.code, ==, TK_SSRF_TIMEOUT);
    CHECK(strstr(r.reason, "within 300 ms"));
    CHECK_INT(r.body.len, ==, 0);
    tk_ssrf_result_free(&r);

    /* the cap covers every hop: a redirect to /slow is cut too */
    CHECK_INT(fetch_a("/to-slow", &o, &r), ==, TK_ETIMEOUT);
    CHECK_INT(r.code, ==, TK_SSRF_TIMEOUT);
    CHECK_INT(r.nhops, ==, 2);
    CHECK_INT(r.hops[0].status, ==, 302);
    CHECK_INT(r.body.len, ==, 0);
    tk_ssrf_result_free(&r);
    CHECK_INT(srv_hits(&A, "/slow"), ==, 3);
    fetch_teardown();
}

/*
 * A resolver that does not answer cannot hold a check past its time limit: the
 * check gives up at the deadline (timeout), the lookup goes on alone and its
 * late answer is dropped. The policy's timeout is far past the runner's
 * per-test timeout, so a lookup not bounded by the fetch's own limit hangs the
 * test and fails it.
 */
TEST(fetch_lookup_bounded_by_the_time_limit)
{
    tk_ssrf_policy p;
    test_policy(&p);
    p.timeout_ms = 10L * 60 * 1000;
    tk_ssrf_fetch_opts o = {.timeout_ms = 250};
    tk_ssrf_result r;
    CHECK_INT(tk_ssrf_fetch(&p, "http://stall.test/", &o, &r), ==, TK_ETIMEOUT);
    CHECK_INT(r.code, ==, TK_SSRF_TIMEOUT);
    if (!strstr(r.reason, "stall.test could not be resolved within 250 ms"))
        TK_TEST_FAIL("reason: %s", r.reason);
    CHECK_INT(r.nhops, ==, 0);
    CHECK_INT(r.status, ==, 0);
    CHECK_STR(r.final_url, "http://stall.test/");
    tk_ssrf_result_free(&r);
    CHECK_INT(tk_ssrf_abandoned_lookups(), ==, 1);

    /* tk_ssrf_check alone: bounded by the policy's timeout */
    p.timeout_ms = 200;
    tk_ssrf_target t;
    CHECK_INT(tk_ssrf_check(&p, "http://stall.test/", &t), ==, TK_ETIMEOUT);
    CHECK_INT(t.code, ==, TK_SSRF_TIMEOUT);
    CHECK(strstr(t.reason, "within 200 ms"));
    CHECK_INT(t.naddrs, ==, 0);
    tk_ssrf_target_free(&t);
    CHECK_INT(tk_ssrf_check_host(&p, "stall.test", 443, &t), ==, TK_ETIMEOUT);
    CHECK_INT(t.code, ==, TK_SSRF_TIMEOUT);
    tk_ssrf_target_free(&t);
    CHECK_INT(tk_ssrf_abandoned_lookups(), ==, 3);

    /* the late answers are dropped; afterwards the name resolves at once */
    stall_release();
    wait_abandoned_lookups_end();
    CHECK_INT(tk_ssrf_check(&p, "http://stall.test/", &t), ==, TK_OK);
    CHECK_INT(t.naddrs, ==, 1);
    tk_ssrf_target_free(&t);
    CHECK_INT(atomic_load(&hook.attempts), ==, 0);
    tk_ssrf_policy_free(&p);
}

/* A redirect to a name whose lookup does not end: timeout, not a refusal. */
TEST(fetch_redirect_lookup_bounded_by_the_remaining_time)
{
    fetch_setup();
    fp.timeout_ms = 10L * 60 * 1000;
    tk_ssrf_fetch_opts o = {.timeout_ms = 400};
    tk_ssrf_result r;
    CHECK_INT(fetch_a("/to-stall", &o, &r), ==, TK_ETIMEOUT);
    CHECK_INT(r.code, ==, TK_SSRF_TIMEOUT);
    CHECK(strstr(r.reason, "stall.test could not be resolved within 400 ms"));
    CHECK_INT(r.nhops, ==, 1);
    CHECK_INT(r.hops[0].status, ==, 302);
    char *u = a_url("/to-stall");
    CHECK_STR(r.final_url, u); /* the last URL requested */
    free(u);
    CHECK_INT(r.body.len, ==, 0);
    tk_ssrf_result_free(&r);
    stall_release();
    wait_abandoned_lookups_end();
    fetch_teardown();
}

/* Behind a resolver that is stuck, lookups are not piled up without end. */
TEST(ssrf_abandoned_lookups_are_capped)
{
    tk_ssrf_policy p;
    test_policy(&p);
    p.timeout_ms = 20;
    tk_ssrf_target t;
    int calls = atomic_load(&fake.calls);
    for (int i = 0; i < TK_SSRF_MAX_ABANDONED; i++) {
        CHECK_INT(tk_ssrf_check(&p, "http://stall.test/", &t), ==, TK_ETIMEOUT);
        tk_ssrf_target_free(&t);
    }
    CHECK_INT(tk_ssrf_abandoned_lookups(), ==, TK_SSRF_MAX_ABANDONED);
    CHECK_INT(tk_ssrf_check(&p, "http://public.test/", &t), ==, TK_ENOENT);
    CHECK_INT(t.code, ==, TK_SSRF_DNS_FAILED);
    CHECK(strstr(t.reason, "earlier lookups are still unanswered"));
    tk_ssrf_target_free(&t);
    /* IP literals need no lookup */
    CHECK_INT(tk_ssrf_check(&p, "http://8.8.8.8/", &t), ==, TK_OK);
    tk_ssrf_target_free(&t);
    stall_release();
    wait_abandoned_lookups_end();
    /* the resolver was asked for stall.test each time, never for public.test */
    CHECK_INT(atomic_load(&fake.calls), ==, calls + TK_SSRF_MAX_ABANDONED);
    CHECK_INT(tk_ssrf_check(&p, "http://public.test/", &t), ==, TK_OK);
    tk_ssrf_target_free(&t);
    tk_ssrf_policy_free(&p);
}

/* A DNS server on 127.0.0.1:53 that counts queries and never answers. */
struct dns_stub {
    int fd;
    pthread_t th;
    atomic_int stop, queries;
};

static void *dns_stub_main(void *arg)
{
    struct dns_stub *d = arg;
    char pkt[1500];
    while (!atomic_load(&d->stop)) {
        struct pollfd pfd = {.fd = d->fd, .events = POLLIN};
        if (poll(&pfd, 1, 20) > 0 && recv(d->fd, pkt, sizeof pkt, 0) > 0)
            atomic_fetch_add(&d->queries, 1);
    }
    return NULL;
}

/*
 * The real path: getaddrinfo against a name server that never answers. The
 * test process moves into a network namespace of its own (only lo, so no
 * packet can leave the machine) and a mount namespace where /etc/resolv.conf
 * names the stub on 127.0.0.1. Its own timeout (2s) is longer than the fetch's
 * (300 ms): an unbounded lookup would end with dns_failed, a bounded one ends
 * with timeout.
 */
TEST(fetch_silent_name_server_times_out)
{
    if (unshare(CLONE_NEWNET | CLONE_NEWNS) != 0)
        TK_TEST_FAIL("unshare(CLONE_NEWNET|CLONE_NEWNS): %s (this test needs root)",
                     strerror(errno));
    CHECK_INT(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), ==, 0);
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    CHECK(s >= 0);
    struct ifreq ifr;
    memset(&ifr, 0, sizeof ifr);
    snprintf(ifr.ifr_name, sizeof ifr.ifr_name, "lo");
    CHECK_INT(ioctl(s, SIOCGIFFLAGS, &ifr), ==, 0);
    ifr.ifr_flags |= IFF_UP;
    CHECK_INT(ioctl(s, SIOCSIFFLAGS, &ifr), ==, 0);
    close(s);

    char conf[] = "/tmp/tk-test-resolv-XXXXXX";
    int fd = mkstemp(conf);
    CHECK(fd >= 0);
    static const char text[] = "nameserver 127.0.0.1\noptions timeout:2 attempts:1\n";
    CHECK_INT(write(fd, text, sizeof text - 1), ==, sizeof text - 1);
    close(fd);
    int mounted = mount(conf, "/etc/resolv.conf", NULL, MS_BIND, NULL);
    unlink(conf);
    CHECK_INT(mounted, ==, 0);

    struct dns_stub d;
    memset(&d, 0, sizeof d);
    d.fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    CHECK(d.fd >= 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(53)};
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK_INT(bind(d.fd, (struct sockaddr *)&sin, sizeof sin), ==, 0);
    CHECK_INT(pthread_create(&d.th, NULL, dns_stub_main, &d), ==, 0);

    tk_ssrf_policy p;
    test_policy(&p);
    p.resolve = NULL; /* getaddrinfo */
    p.timeout_ms = 10L * 60 * 1000;
    tk_ssrf_fetch_opts o = {.timeout_ms = 300};
    tk_ssrf_result r;
    CHECK_INT(tk_ssrf_fetch(&p, "http://never-answers.test/", &o, &r), ==, TK_ETIMEOUT);
    if (r.code != TK_SSRF_TIMEOUT)
        TK_TEST_FAIL("got %s (%s)", tk_ssrf_code_str(r.code), r.reason);
    CHECK(strstr(r.reason, "never-answers.test could not be resolved within 300 ms"));
    CHECK_INT(r.nhops, ==, 0);
    tk_ssrf_result_free(&r);
    CHECK_INT(atomic_load(&hook.attempts), ==, 0);

    /* the abandoned getaddrinfo ends on its own (its 2s timeout) and frees */
    wait_abandoned_lookups_end();
    CHECK_INT(atomic_load(&d.queries), >=, 1); /* the query went to the stub */
    atomic_store(&d.stop, 1);
    pthread_join(d.th, NULL);
    close(d.fd);
    tk_ssrf_policy_free(&p);
}

TEST(fetch_cancel_and_methods)
{
    fetch_setup();
    tk_ssrf_result r;
    volatile int cancel = 1;
    tk_ssrf_fetch_opts o = {.cancel = &cancel};
    CHECK_INT(fetch_a("/slow", &o, &r), ==, TK_ECLOSED);
    CHECK_INT(r.code, ==, TK_SSRF_CANCELLED);
    tk_ssrf_result_free(&r);

    static const char *const crlf[] = {"X-A: 1\r\nHost: evil", NULL};
    tk_ssrf_fetch_opts inj = {.headers = crlf};
    CHECK_INT(fetch_a("/hello", &inj, &r), ==, TK_EINVAL);
    CHECK_INT(r.nhops, ==, 0);
    tk_ssrf_result_free(&r);

    tk_ssrf_fetch_opts post = {.method = "POST"};
    CHECK_INT(fetch_a("/hello", &post, &r), ==, TK_EINVAL);
    CHECK_INT(r.code, ==, TK_SSRF_FETCH_FAILED);
    CHECK_INT(r.nhops, ==, 0);
    tk_ssrf_result_free(&r);
    fetch_teardown();
}

TEST(fetch_connection_refused_is_fetch_failed)
{
    fetch_setup();
    /* a port that was just free: bind, read it, close */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET};
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK_INT(bind(fd, (struct sockaddr *)&sin, sizeof sin), ==, 0);
    socklen_t sl = sizeof sin;
    getsockname(fd, (struct sockaddr *)&sin, &sl);
    int port = ntohs(sin.sin_port);
    close(fd);
    char ports[16], err[64];
    snprintf(ports, sizeof ports, "%d", port);
    CHECK_INT(tk_ssrf_policy_allow_ports(&fp, ports, err, sizeof err), ==, TK_OK);
    char *u = tk_asprintf("http://127.0.0.1:%d/", port);
    tk_ssrf_result r;
    CHECK_INT(tk_ssrf_fetch(&fp, u, NULL, &r), ==, TK_ERROR);
    CHECK_INT(r.code, ==, TK_SSRF_FETCH_FAILED);
    CHECK_INT(r.nhops, ==, 1);
    tk_ssrf_result_free(&r);
    free(u);
    fetch_teardown();
}

TEST_MAIN()
