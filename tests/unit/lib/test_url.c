/* Unit tests for src/lib/url.c: parsing and normalisation, no network. */
#include <string.h>

#include "lib/url.h"
#include "tk_test.h"

struct norm_case {
    const char *in;
    const char *href; /* NULL: refused with fault */
    tk_url_fault fault;
};

static const struct norm_case norm_cases[] = {
    /* case, default ports, trailing dots, empty ports */
    {"http://example.com", "http://example.com/"},
    {"HTTP://EXAMPLE.COM/", "http://example.com/"},
    {"hTtPs://Example.Com:443/", "https://example.com/"},
    {"http://example.com:80/", "http://example.com/"},
    {"http://example.com:443/", "http://example.com:443/"},
    {"https://example.com:80/", "https://example.com:80/"},
    {"http://example.com:0080/x", "http://example.com/x"},
    {"http://example.com:/x", "http://example.com/x"},
    {"http://example.com./", "http://example.com/"},
    {"  http://example.com/  ", "http://example.com/"},
    {"http://example.com?q", "http://example.com/?q"},
    {"http://example.com#frag", "http://example.com/"},
    {"http://example.com/a#b?c", "http://example.com/a"},
    {"http://ex%41mple.com/", "http://example.com/"},
    {"http://a_b.example/", "http://a_b.example/"},
    /* IPv4 notations */
    {"http://127.0.0.1/", "http://127.0.0.1/"},
    {"http://2130706433/", "http://127.0.0.1/"},
    {"http://0177.0.0.1/", "http://127.0.0.1/"},
    {"http://0x7f.1/", "http://127.0.0.1/"},
    {"http://0x7F000001/", "http://127.0.0.1/"},
    {"http://0X7f.0X0.0x0.0x1/", "http://127.0.0.1/"},
    {"http://127.1/", "http://127.0.0.1/"},
    {"http://127.0.1/", "http://127.0.0.1/"},
    {"http://017700000001/", "http://127.0.0.1/"},
    {"http://127.0.0.1./", "http://127.0.0.1/"},
    {"http://0/", "http://0.0.0.0/"},
    {"http://0x/", "http://0.0.0.0/"},
    {"http://%31%32%37.0.0.1/", "http://127.0.0.1/"},
    {"http://4294967295/", "http://255.255.255.255/"},
    {"http://1.2.65535/", "http://1.2.255.255/"},
    {"http://169.254.43518/", "http://169.254.169.254/"},
    /* IDNA */
    {"http://bücher.example/", "http://xn--bcher-kva.example/"},
    {"http://B%C3%BCcher.example/", "http://xn--bcher-kva.example/"},
    {"http://faß.de/", "http://xn--fa-hia.de/"},
    {"http://ＥＸＡＭＰＬＥ.com/", "http://example.com/"},
    {"http://example。com/", "http://example.com/"},
    {"http://１２７．０．０．１/", "http://127.0.0.1/"},
    {"http://①②⑦.0.0.1/", "http://127.0.0.1/"},
    {"http://ｌｏｃａｌｈｏｓｔ/", "http://localhost/"},
    /* IPv6 */
    {"http://[::1]/", "http://[::1]/"},
    {"http://[0:0:0:0:0:0:0:1]:8080/", "http://[::1]:8080/"},
    {"http://[::FFFF:127.0.0.1]/", "http://[::ffff:7f00:1]/"},
    {"http://[2001:DB8:0:0:1:0:0:1]/", "http://[2001:db8::1:0:0:1]/"},
    {"http://[2001:db8::]/", "http://[2001:db8::]/"},
    {"http://[fe80::1]:443/", "http://[fe80::1]:443/"},
    {"http://[1:0:0:2:0:0:0:3]/", "http://[1:0:0:2::3]/"},
    {"http://[1:2:3:4:5:6:7:8]/", "http://[1:2:3:4:5:6:7:8]/"},
    {"http://[1:0:3:4:5:6:7:8]/", "http://[1:0:3:4:5:6:7:8]/"},
    /* paths and queries */
    {"http://h/a/./b/../c", "http://h/a/c"},
    {"http://h/a/b/..", "http://h/a/"},
    {"http://h/../../x", "http://h/x"},
    {"http://h/a/%2e%2E/b", "http://h/b"},
    {"http://h/a/.%2e/b", "http://h/b"},
    {"http://h/a//b/", "http://h/a//b/"},
    {"http://h/a b", "http://h/a%20b"},
    {"http://h/a\"<>`{}|^\\", "http://h/a%22%3C%3E%60%7B%7D%7C%5E%5C"},
    {"http://h/%zz", "http://h/%25zz"},
    {"http://h/%41", "http://h/%41"},
    {"http://h/é?é", "http://h/%C3%A9?%C3%A9"},
    {"http://h/?a=1&b=/x?y", "http://h/?a=1&b=/x?y"},
    {"http://h/?", "http://h/?"},
    {"http://h", "http://h/"},
    /* refused */
    {"", NULL, TK_URL_EBAD},
    {"example.com", NULL, TK_URL_EBAD},
    {"//example.com/", NULL, TK_URL_EBAD},
    {"file:///etc/passwd", NULL, TK_URL_ESCHEME},
    {"gopher://example.com/", NULL, TK_URL_ESCHEME},
    {"ftp://example.com/", NULL, TK_URL_ESCHEME},
    {"javascript:alert(1)", NULL, TK_URL_ESCHEME},
    {"data:text/html,hi", NULL, TK_URL_ESCHEME},
    {"ws://example.com/", NULL, TK_URL_ESCHEME},
    {"http:example.com", NULL, TK_URL_EBAD},
    {"http:/example.com", NULL, TK_URL_EBAD},
    {"http:\\\\example.com\\", NULL, TK_URL_EBAD},
    {"http://example.com\\@127.0.0.1/", NULL, TK_URL_EBAD},
    {"http://user@example.com/", NULL, TK_URL_EUSERINFO},
    {"http://user:pw@example.com/", NULL, TK_URL_EUSERINFO},
    {"http://@example.com/", NULL, TK_URL_EUSERINFO},
    {"http://example.com:0/", NULL, TK_URL_EPORT},
    {"http://example.com:65536/", NULL, TK_URL_EPORT},
    {"http://example.com:99999999999999999999/", NULL, TK_URL_EPORT},
    {"http://example.com:8a/", NULL, TK_URL_EBAD},
    {"http://example.com:-1/", NULL, TK_URL_EBAD},
    {"http://example.com:80:80/", NULL, TK_URL_EBAD},
    {"http:///", NULL, TK_URL_EBAD},
    {"http://:80/", NULL, TK_URL_EBAD},
    {"http://./", NULL, TK_URL_EBAD},
    {"http://a..b/", NULL, TK_URL_EBAD},
    {"http://.a/", NULL, TK_URL_EBAD},
    {"http://a../", NULL, TK_URL_EBAD},
    {"http://a b/", NULL, TK_URL_EBAD},
    {"http://a%20b/", NULL, TK_URL_EBAD},
    {"http://a%00b/", NULL, TK_URL_EBAD},
    {"http://a%zzb/", NULL, TK_URL_EBAD},
    {"http://a%2/", NULL, TK_URL_EBAD},
    {"http://exa%40mple.com/", NULL, TK_URL_EBAD},
    {"http://ex%2fample.com/", NULL, TK_URL_EBAD},
    {"http://exam\tple.com/", NULL, TK_URL_EBAD},
    {"http://example.com/\r\nHost: x", NULL, TK_URL_EBAD},
    {"http://1.2.3.4.5/", NULL, TK_URL_EBAD},
    {"http://256.0.0.1/", NULL, TK_URL_EBAD},
    {"http://1.256.0.1/", NULL, TK_URL_EBAD},
    {"http://1.2.3.256/", NULL, TK_URL_EBAD},
    {"http://4294967296/", NULL, TK_URL_EBAD},
    {"http://99999999999999999999999/", NULL, TK_URL_EBAD},
    {"http://0x100000000/", NULL, TK_URL_EBAD},
    {"http://1.0x1000000/", NULL, TK_URL_EBAD},
    {"http://example.0x/", NULL, TK_URL_EBAD},
    {"http://08.0.0.1/", NULL, TK_URL_EBAD},
    {"http://0x1g.0.0.1/", NULL, TK_URL_EBAD},
    {"http://example.123/", NULL, TK_URL_EBAD},
    {"http://example.0x7f/", NULL, TK_URL_EBAD},
    {"http://[::1/", NULL, TK_URL_EBAD},
    {"http://::1/", NULL, TK_URL_EBAD},
    {"http://[::1]x/", NULL, TK_URL_EBAD},
    {"http://[fe80::1%25eth0]/", NULL, TK_URL_EBAD},
    {"http://[fe80::1%eth0]/", NULL, TK_URL_EBAD},
    {"http://[::g]/", NULL, TK_URL_EBAD},
    {"http://[v1.fe]/", NULL, TK_URL_EBAD},
    {"http://[]/", NULL, TK_URL_EBAD},
    {"http://☃.net/", NULL, TK_URL_EBAD},
    {"http://xn--zz-.com%FF/", NULL, TK_URL_EBAD},
    {"http://%ff%fe.com/", NULL, TK_URL_EBAD},
    {"http://ex%EF%BC%8Fample.com/", NULL, TK_URL_EBAD}, /* full-width solidus */
    {"http://ex%EF%BC%A0ample.com/", NULL, TK_URL_EBAD}, /* full-width commercial at */
    {"http://a*b.com/", NULL, TK_URL_EBAD},
};

TEST(url_normalises_table)
{
    tk_arena *a = tk_arena_new(0);
    for (size_t i = 0; i < TK_ARRAY_LEN(norm_cases); i++) {
        const struct norm_case *c = &norm_cases[i];
        tk_url u;
        tk_url_err e;
        tk_status st = tk_url_parse(a, c->in, strlen(c->in), &u, &e);
        if (c->href) {
            if (st != TK_OK)
                TK_TEST_FAIL("%s: refused (%s), expected %s", c->in, e.reason, c->href);
            if (strcmp(u.href, c->href) != 0)
                TK_TEST_FAIL("%s: got %s, expected %s", c->in, u.href, c->href);
            /* normalising again is stable */
            tk_url u2;
            CHECK_INT(tk_url_parse(a, u.href, strlen(u.href), &u2, &e), ==, TK_OK);
            CHECK_STR(u2.href, u.href);
        } else {
            if (st == TK_OK)
                TK_TEST_FAIL("%s: accepted as %s, expected fault %d", c->in, u.href, c->fault);
            if (e.fault != c->fault)
                TK_TEST_FAIL("%s: fault %d (%s), expected %d", c->in, e.fault, e.reason, c->fault);
            CHECK(e.reason[0] != '\0');
        }
    }
    tk_arena_free(a);
}

TEST(url_parts)
{
    tk_arena *a = tk_arena_new(0);
    tk_url u;
    CHECK_INT(tk_url_parse(a, "https://[::1]:8443/a/b?x=1#f", 28, &u, NULL), ==, TK_OK);
    CHECK_STR(u.scheme, "https");
    CHECK_INT(u.host.type, ==, TK_HOST_IPV6);
    CHECK_STR(u.host.text, "::1");
    CHECK_INT(u.port, ==, 8443);
    CHECK_STR(u.path, "/a/b?x=1");
    CHECK_STR(u.origin, "https://[::1]:8443");
    CHECK_INT(u.host.ip.family, ==, 6);
    CHECK_INT(u.host.ip.b[15], ==, 1);

    CHECK_INT(tk_url_parse(a, "http://0x7f.1", 13, &u, NULL), ==, TK_OK);
    CHECK_INT(u.host.type, ==, TK_HOST_IPV4);
    CHECK_INT(u.host.ip.family, ==, 4);
    CHECK_MEM(u.host.ip.b, "\x7f\0\0\x01", 4);
    CHECK_INT(u.port, ==, 80);

    CHECK_INT(tk_url_parse(a, "http://Example.COM", 18, &u, NULL), ==, TK_OK);
    CHECK_INT(u.host.type, ==, TK_HOST_NAME);
    CHECK_STR(u.host.text, "example.com");
    CHECK_STR(u.path, "/");
    tk_arena_free(a);
}

TEST(url_refuses_embedded_nul_by_length)
{
    tk_arena *a = tk_arena_new(0);
    tk_url u;
    tk_url_err e;
    CHECK_INT(tk_url_parse(a, "http://a\0.evil/", 15, &u, &e), ==, TK_EINVAL);
    CHECK_INT(e.fault, ==, TK_URL_EBAD);
    CHECK_INT(tk_url_parse(a, NULL, 0, &u, &e), ==, TK_EINVAL);
    tk_arena_free(a);
}

TEST(url_length_caps)
{
    tk_arena *a = tk_arena_new(0);
    tk_url u;
    tk_url_err e;
    size_t n = TK_URL_MAX + 10;
    char *s = tk_malloc(n + 1);
    memcpy(s, "http://h/", 9);
    memset(s + 9, 'a', n - 9);
    s[n] = '\0';
    CHECK_INT(tk_url_parse(a, s, n, &u, &e), ==, TK_ETOOBIG);
    CHECK_INT(e.fault, ==, TK_URL_EBAD);
    /* fits raw, too long once encoded */
    n = TK_URL_MAX - 10;
    memset(s + 9, ' ', n - 9);
    s[n - 1] = 'x';
    CHECK_INT(tk_url_parse(a, s, n, &u, &e), ==, TK_ETOOBIG);
    /* a 254-byte name and a 64-byte label */
    char host[300];
    memset(host, 'a', sizeof host);
    for (int i = 60; i < 254; i += 61)
        host[i] = '.';
    char url[400];
    snprintf(url, sizeof url, "http://%.254s/", host);
    CHECK_INT(tk_url_parse(a, url, strlen(url), &u, &e), ==, TK_EINVAL);
    snprintf(url, sizeof url, "http://%.253s/", host);
    CHECK_INT(tk_url_parse(a, url, strlen(url), &u, &e), ==, TK_OK);
    memset(host, 'b', 64);
    snprintf(url, sizeof url, "http://%.64s.com/", host);
    CHECK_INT(tk_url_parse(a, url, strlen(url), &u, &e), ==, TK_EINVAL);
    snprintf(url, sizeof url, "http://%.63s.com/", host);
    CHECK_INT(tk_url_parse(a, url, strlen(url), &u, &e), ==, TK_OK);
    free(s);
    tk_arena_free(a);
}

TEST(url_arena_cap_is_not_a_crash)
{
    tk_arena *a = tk_arena_new(16);
    tk_url u;
    tk_url_err e;
    const char *s = "http://example.com/a/long/enough/path";
    CHECK_INT(tk_url_parse(a, s, strlen(s), &u, &e), ==, TK_ETOOBIG);
    tk_arena_free(a);
}

struct resolve_case {
    const char *base, *ref, *want;
};

TEST(url_resolves_references)
{
    static const struct resolve_case cases[] = {
        {"http://a/b/c/d;p?q", "g", "http://a/b/c/g"},
        {"http://a/b/c/d;p?q", "./g", "http://a/b/c/g"},
        {"http://a/b/c/d;p?q", "g/", "http://a/b/c/g/"},
        {"http://a/b/c/d;p?q", "/g", "http://a/g"},
        {"http://a/b/c/d;p?q", "//g", "http://g/"},
        {"https://a/b/c/d;p?q", "//g:8080/x", "https://g:8080/x"},
        {"http://a/b/c/d;p?q", "?y", "http://a/b/c/d;p?y"},
        {"http://a/b/c/d;p?q", "g?y", "http://a/b/c/g?y"},
        {"http://a/b/c/d;p?q", "#s", "http://a/b/c/d;p?q"},
        {"http://a/b/c/d;p?q", "", "http://a/b/c/d;p?q"},
        {"http://a/b/c/d;p?q", "..", "http://a/b/"},
        {"http://a/b/c/d;p?q", "../../../g", "http://a/g"},
        {"http://a/b/c/d;p?q", "HTTPS://B/x", "https://b/x"},
        {"http://a:8080/x", "/y", "http://a:8080/y"},
        {"http://a/x", "http://169.254.169.254/latest", "http://169.254.169.254/latest"},
        {"http://a/x", "//0x7f.1/", "http://127.0.0.1/"},
        {"http://a/x", "/\\evil.com", "http://a/%5Cevil.com"},
        {"http://[::1]:81/x/y", "z", "http://[::1]:81/x/z"},
    };
    tk_arena *a = tk_arena_new(0);
    for (size_t i = 0; i < TK_ARRAY_LEN(cases); i++) {
        tk_url base, out;
        tk_url_err e;
        CHECK_INT(tk_url_parse(a, cases[i].base, strlen(cases[i].base), &base, &e), ==, TK_OK);
        tk_status st = tk_url_resolve(a, &base, cases[i].ref, strlen(cases[i].ref), &out, &e);
        if (st != TK_OK)
            TK_TEST_FAIL("%s + %s: %s", cases[i].base, cases[i].ref, e.reason);
        if (strcmp(out.href, cases[i].want) != 0)
            TK_TEST_FAIL("%s + %s: got %s, want %s", cases[i].base, cases[i].ref, out.href,
                         cases[i].want);
    }
    tk_url base, out;
    tk_url_err e;
    CHECK_INT(tk_url_parse(a, "http://a/", 9, &base, &e), ==, TK_OK);
    CHECK_INT(tk_url_resolve(a, &base, "file:///etc/passwd", 18, &out, &e), ==, TK_EINVAL);
    CHECK_INT(e.fault, ==, TK_URL_ESCHEME);
    CHECK_INT(tk_url_resolve(a, &base, "//u@h/", 6, &out, &e), ==, TK_EINVAL);
    CHECK_INT(e.fault, ==, TK_URL_EUSERINFO);
    tk_arena_free(a);
}

TEST(url_host_parse_alone)
{
    tk_host h;
    tk_url_err e;
    CHECK_INT(tk_url_host_parse("Intranet.Example.COM.", 21, &h, &e), ==, TK_OK);
    CHECK_STR(h.text, "intranet.example.com");
    CHECK_INT(tk_url_host_parse("[::1]", 5, &h, &e), ==, TK_OK);
    CHECK_INT(h.type, ==, TK_HOST_IPV6);
    CHECK_INT(tk_url_host_parse("0x7f.1", 6, &h, &e), ==, TK_OK);
    CHECK_STR(h.text, "127.0.0.1");
    CHECK_INT(tk_url_host_parse("", 0, &h, &e), ==, TK_EINVAL);
    CHECK_INT(tk_url_host_parse("a]", 2, &h, &e), ==, TK_EINVAL);
    CHECK_INT(tk_url_host_parse("[::1", 4, &h, &e), ==, TK_EINVAL);
}

TEST(url_ip_format_rfc5952)
{
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"::", "::"},
        {"::1", "::1"},
        {"1::", "1::"},
        {"2001:db8:0:0:1:0:0:1", "2001:db8::1:0:0:1"},
        {"2001:0db8:0000:0000:0000:0000:0002:0001", "2001:db8::2:1"},
        {"2001:db8:0:1:1:1:1:1", "2001:db8:0:1:1:1:1:1"},
        {"::ffff:1.2.3.4", "::ffff:102:304"},
        {"64:ff9b::7f00:1", "64:ff9b::7f00:1"},
        {"10.0.0.1", "10.0.0.1"},
    };
    for (size_t i = 0; i < TK_ARRAY_LEN(cases); i++) {
        tk_ip ip;
        char out[48];
        CHECK(tk_ip_parse(cases[i].in, &ip));
        tk_ip_format(&ip, out, sizeof out);
        CHECK_STR(out, cases[i].out);
    }
    tk_ip ip;
    CHECK(!tk_ip_parse("127.1", &ip));
    CHECK(!tk_ip_parse("fe80::1%eth0", &ip));
    CHECK(!tk_ip_parse("[::1]", &ip));
    CHECK(!tk_ip_parse(NULL, &ip));
}

TEST_MAIN()
