/* A sandbox's own egress rules (sandboxd/netpol.c): parsing, first match,
 * wildcards, addresses and CIDRs, PATCH priority and DELETE. */
#include <stdlib.h>
#include <string.h>

#include "lib/json.h"
#include "sandboxd/netpol.h"
#include "tk_test.h"

static json_t *J(const char *s)
{
    char err[128];
    return tk_json_parse(s, strlen(s), 1 << 16, err, sizeof err);
}

static sbx_netpol *P(const char *s)
{
    json_t *j = J(s);
    sbx_netpol *p = NULL;
    char msg[256];
    CHECK(sbx_netpol_parse(j, &p, msg, sizeof msg) == TK_OK);
    json_decref(j);
    return p;
}

static tk_ip ip(const char *s)
{
    tk_cidr c;
    char err[64];
    CHECK(tk_cidr_parse(s, strlen(s), &c, err, sizeof err) == TK_OK);
    return c.net;
}

static int admits(const sbx_netpol *p, const char *host, const char *a1, const char *a2)
{
    tk_ip a[2];
    size_t n = 0;
    if (a1)
        a[n++] = ip(a1);
    if (a2)
        a[n++] = ip(a2);
    char why[256] = "";
    int ok = sbx_netpol_admits(p, host, a, n, why, sizeof why);
    if (!ok)
        CHECK(strstr(why, "network policy denies") != NULL);
    return ok;
}

TEST(none_for_null_and_empty)
{
    sbx_netpol *p = (sbx_netpol *)1;
    char msg[256];
    CHECK(sbx_netpol_parse(NULL, &p, msg, sizeof msg) == TK_OK && p == NULL);
    json_t *e = J("{}");
    CHECK(sbx_netpol_parse(e, &p, msg, sizeof msg) == TK_OK && p == NULL);
    json_decref(e);
    p = P("{\"egress\":[]}"); /* no defaultAction: deny */
    CHECK(p && !p->default_allow);
    free(p);
}

TEST(refusals_name_the_rule)
{
    const char *bad[] = {
        "[]",
        "{\"defaultAction\":\"maybe\"}",
        "{\"egress\":{}}",
        "{\"other\":1}",
        "{\"egress\":[{\"action\":\"allow\"}]}",
        "{\"egress\":[{\"action\":\"permit\",\"target\":\"a.com\"}]}",
        "{\"egress\":[{\"action\":\"allow\",\"target\":\"a.com\",\"x\":1}]}",
        "{\"egress\":[{\"action\":\"allow\",\"target\":\"bad host\"}]}",
        "{\"egress\":[{\"action\":\"allow\",\"target\":\"*.\"}]}",
        "{\"egress\":[{\"action\":\"allow\",\"target\":\"a..com\"}]}",
        "{\"egress\":[{\"action\":\"allow\",\"target\":\"-a.com\"}]}",
        "{\"egress\":[{\"action\":\"allow\",\"target\":\"a*.com\"}]}",
        "{\"egress\":[{\"action\":\"allow\",\"target\":\"10.0.0.0/33\"}]}",
        "{\"egress\":[{\"action\":\"allow\",\"target\":\"\"}]}",
    };
    for (size_t i = 0; i < TK_ARRAY_LEN(bad); i++) {
        json_t *j = J(bad[i]);
        sbx_netpol *p = NULL;
        char msg[256] = "";
        CHECK(sbx_netpol_parse(j, &p, msg, sizeof msg) == TK_EINVAL);
        CHECK(p == NULL && msg[0]);
        json_decref(j);
    }
}

TEST(first_match_wildcards_and_default)
{
    sbx_netpol *p = P("{\"defaultAction\":\"deny\",\"egress\":["
                      "{\"action\":\"deny\",\"target\":\"bad.example.com\"},"
                      "{\"action\":\"allow\",\"target\":\"*.Example.COM.\"},"
                      "{\"action\":\"allow\",\"target\":\"pypi.org\"}]}");
    CHECK(admits(p, "pypi.org", "1.2.3.4", NULL));
    CHECK(admits(p, "PyPI.org.", "1.2.3.4", NULL));
    CHECK(!admits(p, "www.pypi.org", "1.2.3.4", NULL));
    CHECK(admits(p, "a.example.com", "1.2.3.4", NULL));
    CHECK(admits(p, "a.b.example.com", "1.2.3.4", NULL));
    CHECK(!admits(p, "example.com", "1.2.3.4", NULL)); /* the wildcard is for names below */
    CHECK(!admits(p, "bad.example.com", "1.2.3.4", NULL));
    CHECK(!admits(p, "notexample.com", "1.2.3.4", NULL));
    CHECK(!admits(p, "github.com", "1.2.3.4", NULL));
    json_t *j = sbx_netpol_json(p);
    char *s = tk_json_dumps(j);
    CHECK_STR(s, "{\"defaultAction\":\"deny\",\"egress\":[{\"action\":\"deny\",\"target\":\"bad."
                 "example.com\"},{\"action\":\"allow\",\"target\":\"*.example.com\"},{\"action\":"
                 "\"allow\",\"target\":\"pypi.org\"}]}");
    free(s);
    json_decref(j);
    free(p);
}

TEST(addresses_and_cidrs)
{
    sbx_netpol *p = P("{\"defaultAction\":\"allow\",\"egress\":["
                      "{\"action\":\"deny\",\"target\":\"10.0.0.0/8\"},"
                      "{\"action\":\"allow\",\"target\":\"192.168.1.0/24\"},"
                      "{\"action\":\"deny\",\"target\":\"192.168.0.0/16\"},"
                      "{\"action\":\"deny\",\"target\":\"::1\"}]}");
    CHECK(!admits(p, "10.1.2.3", "10.1.2.3", NULL));       /* a literal in the CIDR */
    CHECK(!admits(p, "name.test", "8.8.8.8", "10.0.0.1")); /* deny: any address */
    CHECK(admits(p, "name.test", "192.168.1.5", NULL));
    /* allow needs every address inside: one outside falls through to the deny */
    CHECK(!admits(p, "name.test", "192.168.1.5", "192.168.2.5"));
    CHECK(!admits(p, "::1", "::1", NULL));
    CHECK(admits(p, "8.8.8.8", "8.8.8.8", NULL)); /* the default */
    free(p);
}

TEST(patch_puts_new_rules_first_and_first_of_a_target_wins)
{
    sbx_netpol *p = P("{\"defaultAction\":\"deny\",\"egress\":["
                      "{\"action\":\"allow\",\"target\":\"pypi.org\"},"
                      "{\"action\":\"allow\",\"target\":\"a.com\"}]}");
    json_t *patch = J("[{\"action\":\"allow\",\"target\":\"www.github.com\"},"
                      "{\"action\":\"deny\",\"target\":\"pypi.org\"},"
                      "{\"action\":\"allow\",\"target\":\"pypi.org\"}]");
    char msg[256];
    CHECK(sbx_netpol_patch(p, patch, msg, sizeof msg) == TK_OK);
    json_decref(patch);
    CHECK_INT(p->n, ==, 3);
    CHECK_STR(p->r[0].target, "www.github.com");
    CHECK_STR(p->r[1].target, "pypi.org");
    CHECK(!p->r[1].allow);
    CHECK_STR(p->r[2].target, "a.com");
    CHECK(!admits(p, "pypi.org", "1.1.1.1", NULL));
    CHECK(admits(p, "www.github.com", "1.1.1.1", NULL));
    /* a bad rule changes nothing */
    json_t *bad = J("[{\"action\":\"allow\",\"target\":\"ok.com\"},{\"action\":\"x\"}]");
    CHECK(sbx_netpol_patch(p, bad, msg, sizeof msg) == TK_EINVAL);
    json_decref(bad);
    CHECK_INT(p->n, ==, 3);
    json_t *empty = J("[]");
    CHECK(sbx_netpol_patch(p, empty, msg, sizeof msg) == TK_EINVAL);
    /* delete by target, unknown ones ignored, spelled as a rule would be */
    json_t *del = J("[\"PyPI.org\",\"not-there.com\"]");
    CHECK(sbx_netpol_delete(p, del, msg, sizeof msg) == TK_OK);
    json_decref(del);
    CHECK_INT(p->n, ==, 2);
    CHECK(!admits(p, "pypi.org", "1.1.1.1", NULL)); /* the default again */
    CHECK(sbx_netpol_delete(p, empty, msg, sizeof msg) == TK_EINVAL);
    json_decref(empty);
    free(p);
}

TEST_MAIN()
