/* Address prefixes and the client address behind trusted proxies. */
#include "lib/cidr.h"
#include "tk_test.h"

static tk_ip ip_of(const char *s)
{
    tk_ip ip;
    if (!tk_ip_parse(s, &ip))
        TK_TEST_FAIL("bad test address %s", s);
    return ip;
}

TEST(cidr_parse_entries_and_refusals)
{
    tk_cidr c;
    char err[256], out[64];
    CHECK(tk_cidr_parse("10.0.0.0/8", 10, &c, err, sizeof err) == TK_OK);
    tk_cidr_format(&c, out, sizeof out);
    CHECK_STR(out, "10.0.0.0/8");
    CHECK(tk_cidr_parse("10.0.0.7", 8, &c, err, sizeof err) == TK_OK);
    CHECK_INT(c.len, ==, 32);
    CHECK(tk_cidr_parse("[fd00::]/8", 10, &c, err, sizeof err) == TK_OK);
    tk_cidr_format(&c, out, sizeof out);
    CHECK_STR(out, "fd00::/8");
    CHECK(tk_cidr_parse("::ffff:10.0.0.0/104", 19, &c, err, sizeof err) == TK_OK);
    CHECK_INT(c.net.family, ==, 4); /* a mapped prefix is its IPv4 one */
    CHECK(tk_cidr_parse("10.0.0.1/8", 10, &c, err, sizeof err) == TK_EINVAL);
    CHECK_STR(err, "\"10.0.0.1/8\": host bits are set (did you mean 10.0.0.0/8?)");
    CHECK(tk_cidr_parse("10.0.0.0/33", 11, &c, err, sizeof err) == TK_EINVAL);
    CHECK(strstr(err, "from 0 to 32") != NULL);
    CHECK(tk_cidr_parse("example.com", 11, &c, err, sizeof err) == TK_EINVAL);
    CHECK(tk_cidr_parse("10.0.0.0/", 9, &c, err, sizeof err) == TK_EINVAL);
    CHECK(tk_cidr_parse("10.0.0.0/8x", 11, &c, err, sizeof err) == TK_EINVAL);
    CHECK(tk_cidr_parse("010.0.0.0/8", 11, &c, err, sizeof err) == TK_EINVAL);
    CHECK(tk_cidr_parse("", 0, &c, err, sizeof err) == TK_EINVAL);
}

TEST(cidr_list_parse_and_match)
{
    tk_cidr_list l;
    char err[256];
    CHECK(tk_cidr_list_parse("10.0.0.0/8, 192.168.1.5 ,fd00::/8\t::1", &l, err, sizeof err) ==
          TK_OK);
    CHECK_INT(l.n, ==, 4);
    tk_ip a = ip_of("10.200.3.4"), b = ip_of("11.0.0.1"), m = ip_of("::ffff:10.1.1.1"),
          d = ip_of("fd12::1"), e = ip_of("::1"), f = ip_of("::2"), g = ip_of("192.168.1.5");
    CHECK(tk_cidr_list_match(&l, &a));
    CHECK(!tk_cidr_list_match(&l, &b));
    CHECK(tk_cidr_list_match(&l, &m));
    CHECK(tk_cidr_list_match(&l, &d));
    CHECK(tk_cidr_list_match(&l, &e));
    CHECK(!tk_cidr_list_match(&l, &f));
    CHECK(tk_cidr_list_match(&l, &g));
    tk_cidr_list_free(&l);
    CHECK(tk_cidr_list_parse("", &l, err, sizeof err) == TK_OK);
    CHECK_INT(l.n, ==, 0);
    CHECK(!tk_cidr_list_match(&l, &a));
    CHECK(tk_cidr_list_parse(NULL, &l, err, sizeof err) == TK_OK);
    CHECK(tk_cidr_list_parse("0.0.0.0/0", &l, err, sizeof err) == TK_OK);
    CHECK(tk_cidr_list_match(&l, &b));
    CHECK(!tk_cidr_list_match(&l, &d)); /* families apart */
    tk_cidr_list_free(&l);
    CHECK(tk_cidr_list_parse("10.0.0.0/8,10.0.0.1/8", &l, err, sizeof err) == TK_EINVAL);
    CHECK(l.n == 0 && l.v == NULL);
    CHECK(strstr(err, "10.0.0.1/8") != NULL);
    char many[4096] = "";
    for (int i = 0; i <= TK_CIDR_LIST_MAX; i++)
        snprintf(many + strlen(many), sizeof many - strlen(many), "10.0.%d.%d,", i / 256, i % 256);
    CHECK(tk_cidr_list_parse(many, &l, err, sizeof err) == TK_EINVAL);
}

TEST(cidr_xff_entries)
{
    tk_ip ip;
    char s[64];
    CHECK(tk_xff_entry_parse(" 203.0.113.9 ", 13, &ip));
    tk_ip_format(&ip, s, sizeof s);
    CHECK_STR(s, "203.0.113.9");
    CHECK(tk_xff_entry_parse("203.0.113.9:443", 15, &ip));
    CHECK(tk_xff_entry_parse("2001:db8::1", 11, &ip));
    CHECK_INT(ip.family, ==, 6);
    CHECK(tk_xff_entry_parse("[2001:db8::1]", 13, &ip));
    CHECK(tk_xff_entry_parse("[2001:db8::1]:8080", 18, &ip));
    CHECK(!tk_xff_entry_parse("[2001:db8::1]x", 14, &ip));
    CHECK(!tk_xff_entry_parse("[203.0.113.9]", 13, &ip));
    CHECK(!tk_xff_entry_parse("203.0.113.9:", 12, &ip));
    CHECK(!tk_xff_entry_parse("203.0.113.9:port", 16, &ip));
    CHECK(!tk_xff_entry_parse("unknown", 7, &ip));
    CHECK(!tk_xff_entry_parse("_hidden", 7, &ip));
    CHECK(!tk_xff_entry_parse("", 0, &ip));
    CHECK(!tk_xff_entry_parse("1.2.3.4\0", 8, &ip));
}

static const char *client_of(const char *peer, const char *xff, const tk_cidr_list *t, int *n)
{
    static char out[64];
    tk_ip p = ip_of(peer), c;
    *n = tk_forwarded_client(&p, xff, xff ? strlen(xff) : 0, t, &c);
    tk_ip_format(&c, out, sizeof out);
    return out;
}

TEST(cidr_forwarded_client_walk)
{
    tk_cidr_list t;
    char err[128];
    CHECK(tk_cidr_list_parse("127.0.0.1 10.0.0.0/8", &t, err, sizeof err) == TK_OK);
    int n;
    /* an untrusted peer: the header is not read */
    CHECK_STR(client_of("192.0.2.1", "203.0.113.9", &t, &n), "192.0.2.1");
    CHECK_INT(n, ==, 0);
    /* a trusted peer without a header */
    CHECK_STR(client_of("127.0.0.1", NULL, &t, &n), "127.0.0.1");
    CHECK_INT(n, ==, 0);
    /* the rightmost untrusted entry; what the client wrote left of it is not believed */
    CHECK_STR(client_of("127.0.0.1", "1.1.1.1, 203.0.113.9, 10.0.0.2", &t, &n), "203.0.113.9");
    CHECK_INT(n, ==, 2);
    /* a spoofed trusted-looking entry left of the client changes nothing */
    CHECK_STR(client_of("127.0.0.1", "10.9.9.9, 203.0.113.9", &t, &n), "203.0.113.9");
    /* garbage: the last trusted hop */
    CHECK_STR(client_of("127.0.0.1", "203.0.113.9, bogus, 10.0.0.2", &t, &n), "10.0.0.2");
    CHECK_STR(client_of("127.0.0.1", "203.0.113.9,", &t, &n), "127.0.0.1");
    CHECK_INT(n, ==, 0);
    /* all trusted: the leftmost */
    CHECK_STR(client_of("127.0.0.1", "10.0.0.3,10.0.0.2", &t, &n), "10.0.0.3");
    /* ports and a mapped peer */
    CHECK_STR(client_of("::ffff:127.0.0.1", "[2001:db8::5]:1234", &t, &n), "2001:db8::5");
    /* a long chain of trusted hops is walked only so far */
    char chain[2048] = "203.0.113.9";
    for (int i = 0; i < TK_XFF_MAX_HOPS + 5; i++)
        strcat(chain, ",10.0.0.1");
    CHECK_STR(client_of("127.0.0.1", chain, &t, &n), "10.0.0.1");
    CHECK_INT(n, ==, TK_XFF_MAX_HOPS);
    tk_cidr_list_free(&t);
}

TEST_MAIN()
