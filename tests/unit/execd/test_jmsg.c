/* jmsg: the Jupyter wire protocol, signed with HMAC-SHA256. */
#include <string.h>

#include "execd/jmsg.h"
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

TEST_MAIN()
