/* execd's pure parts: Jupyter message signing and decoding, the line splitter,
 * event framing and UTF-8 cleaning. */
#include <string.h>

#include "execd/events.h"
#include "execd/jmsg.h"
#include "execd/lines.h"
#include "lib/json.h"
#include "tk_test.h"

TEST(hmac_sha256_matches_rfc4231)
{
    /* RFC 4231 test case 2 */
    const char *parts[] = {"what do ya ", "want for nothing?"};
    size_t lens[] = {11, 17};
    char out[65];
    execd_jmsg_sign("Jefe", 4, parts, lens, 2, out);
    CHECK_STR(out, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

static size_t frames_of(execd_jmsg_out *m, execd_frame *f, const char *topic)
{
    size_t n = 0;
    if (topic)
        f[n++] = (execd_frame){topic, strlen(topic)};
    f[n++] = (execd_frame){"<IDS|MSG>", 9};
    f[n++] = (execd_frame){m->sig, 64};
    for (int i = 0; i < 4; i++)
        f[n++] = (execd_frame){m->part[i], m->len[i]};
    return n;
}

TEST(jmsg_round_trip_and_tamper)
{
    execd_jmsg_out o;
    execd_jmsg_build(&o, "k3y", "sess-1", "execute_request",
                     tk_json_obj("code", json_string("1+1"), NULL));
    execd_frame f[8];
    size_t n = frames_of(&o, f, "kernel.abc.status");
    execd_jmsg m;
    char err[256];
    CHECK_INT(execd_jmsg_decode("k3y", 3, f, n, &m, err, sizeof err), ==, TK_OK);
    CHECK_STR(m.msg_type, "execute_request");
    CHECK_STR(tk_json_str(m.header, "session"), "sess-1");
    CHECK_STR(tk_json_str(m.header, "version"), "5.3");
    CHECK_STR(tk_json_str(m.header, "msg_id"), o.msg_id);
    CHECK_STR(tk_json_str(m.content, "code"), "1+1");
    CHECK_STR(m.parent_id, "");
    execd_jmsg_free(&m);
    /* wrong key */
    CHECK_INT(execd_jmsg_decode("other", 5, f, n, &m, err, sizeof err), ==, TK_EINVAL);
    CHECK(strstr(err, "signature"));
    /* tampered content */
    char *c = strdup(o.part[3]);
    c[2] ^= 1;
    f[n - 1] = (execd_frame){c, strlen(c)};
    CHECK_INT(execd_jmsg_decode("k3y", 3, f, n, &m, err, sizeof err), ==, TK_EINVAL);
    free(c);
    /* missing frames and delimiter */
    CHECK_INT(execd_jmsg_decode("k3y", 3, f, 4, &m, err, sizeof err), ==, TK_EINVAL);
    execd_frame nodelim[] = {{"x", 1}, {"y", 1}};
    CHECK_INT(execd_jmsg_decode("k3y", 3, nodelim, 2, &m, err, sizeof err), ==, TK_EINVAL);
    execd_jmsg_out_free(&o);
}

TEST(jmsg_refuses_signed_non_objects)
{
    const char *parts[] = {"[]", "{}", "{}", "{}"};
    size_t lens[] = {2, 2, 2, 2};
    char sig[65];
    execd_jmsg_sign("k", 1, parts, lens, 4, sig);
    execd_frame f[] = {{"<IDS|MSG>", 9}, {sig, 64}, {"[]", 2}, {"{}", 2}, {"{}", 2}, {"{}", 2}};
    execd_jmsg m;
    char err[256];
    CHECK_INT(execd_jmsg_decode("k", 1, f, 6, &m, err, sizeof err), ==, TK_EINVAL);
}

struct got {
    char lines[32][128];
    int n;
};

static void collect(void *ud, const char *t, size_t len)
{
    struct got *g = ud;
    if (g->n < 32)
        snprintf(g->lines[g->n++], 128, "%.*s", (int)len, t);
}

TEST(lines_split_like_upstream)
{
    execd_lines l;
    execd_lines_init(&l, 1024);
    struct got g = {0};
    const char *in = "a\nb\r\nc\rd\n\n\r\n";
    /* fed one byte at a time: boundaries must not matter */
    for (size_t i = 0; in[i]; i++)
        execd_lines_feed(&l, in + i, 1, collect, &g);
    execd_lines_feed(&l, "tail", 4, collect, &g);
    CHECK_INT(g.n, ==, 6);
    CHECK_STR(g.lines[0], "a");
    CHECK_STR(g.lines[1], "b");
    CHECK_STR(g.lines[2], "c");
    CHECK_STR(g.lines[3], "d");
    CHECK_STR(g.lines[4], "\n");
    CHECK_STR(g.lines[5], "\n");
    CHECK(execd_lines_due(&l, 100) >= 0);
    execd_lines_flush(&l, collect, &g);
    CHECK_STR(g.lines[6], "tail");
    CHECK(execd_lines_due(&l, 100) < 0);
    execd_lines_free(&l);
}

TEST(lines_cut_long_lines_on_utf8_boundaries)
{
    execd_lines l;
    execd_lines_init(&l, 16);
    struct got g = {0};
    /* 15 ASCII bytes then a 2-byte character straddling the cap */
    execd_lines_feed(&l, "aaaaaaaaaaaaaaa\xc3\xa9zz\n", 20, collect, &g);
    CHECK_INT(g.n, ==, 2);
    CHECK_STR(g.lines[0], "aaaaaaaaaaaaaaa");
    CHECK_STR(g.lines[1], "\xc3\xa9zz");
    execd_lines_free(&l);
}

TEST(events_are_upstream_framed_and_clean_utf8)
{
    tk_buf b;
    tk_buf_init(&b, 1 << 16);
    CHECK_INT(execd_ev_text(&b, "stdout",
                            "x\xff"
                            "y",
                            3),
              ==, TK_OK);
    const char *s = tk_buf_cstr(&b);
    CHECK(strncmp(s, "{\"type\":\"stdout\",\"text\":\"x\xef\xbf\xbdy\",\"timestamp\":", 44) == 0);
    CHECK(b.len > 2 && s[b.len - 1] == '\n' && s[b.len - 2] == '\n');
    tk_buf_reset(&b);
    CHECK_INT(execd_ev_error(&b, "CommandExecError", "7", NULL), ==, TK_OK);
    char err[128];
    json_t *j = tk_json_parse(b.data, b.len - 2, 1 << 16, err, sizeof err);
    CHECK(j != NULL);
    json_t *e = json_object_get(j, "error");
    CHECK_STR(tk_json_str(e, "ename"), "CommandExecError");
    CHECK_STR(tk_json_str(e, "evalue"), "7");
    CHECK_INT(json_array_size(json_object_get(e, "traceback")), ==, 1);
    json_decref(j);
    /* the cap is honoured: nothing partial is left behind */
    tk_buf small;
    tk_buf_init(&small, 20);
    CHECK_INT(execd_ev_text(&small, "stdout", "0123456789012345678901234567890", 31), ==,
              TK_ETOOBIG);
    CHECK_INT(small.len, ==, 0);
    tk_buf_free(&small);
    tk_buf_free(&b);
}

static void check_json_text(const char *in, size_t n, const char *want)
{
    json_t *j = execd_json_text(in, n);
    CHECK(json_is_string(j));
    CHECK_INT(json_string_length(j), ==, strlen(want));
    CHECK_MEM(json_string_value(j), want, strlen(want));
    json_decref(j);
}

TEST(json_text_keeps_valid_text_and_replaces_each_invalid_byte)
{
    json_t *j = execd_json_text("a\0b", 3);
    CHECK_INT(json_string_length(j), ==, 3); /* NUL is valid JSON (\\u0000) */
    json_decref(j);
    check_json_text("caf\xc3\xa9", 5, "caf\xc3\xa9");
    /* every byte that starts no valid sequence becomes one U+FFFD */
    check_json_text("a\xff"
                    "b",
                    3,
                    "a\xef\xbf\xbd"
                    "b");
    check_json_text("\xe2\x82", 2, "\xef\xbf\xbd\xef\xbf\xbd");                 /* cut short */
    check_json_text("\xc0\xaf", 2, "\xef\xbf\xbd\xef\xbf\xbd");                 /* overlong */
    check_json_text("\xed\xa0\x80", 3, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"); /* surrogate */
    check_json_text("\xf4\x90\x80\x80!", 5,
                    "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd!"); /* > U+10FFFF */
    /* once cleaning, a NUL is replaced too; valid sequences around it are kept */
    check_json_text("\xc3\xa9\0\xff", 4, "\xc3\xa9\xef\xbf\xbd\xef\xbf\xbd");
}

TEST_MAIN()
