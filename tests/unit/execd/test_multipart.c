/* execd/multipart: the streaming multipart/form-data parser. */
#include <string.h>

#include "execd/multipart.h"
#include "tk_test.h"

struct rec {
    int parts;
    char names[8][64];
    char files[8][64];
    char body[8][256];
    size_t blen[8];
    int open;
};

static int b(void *ud, const execd_mp_part *p, char *err, size_t errlen)
{
    struct rec *r = ud;
    if (r->open || r->parts >= 8)
        return 1;
    snprintf(r->names[r->parts], 64, "%s", p->name);
    snprintf(r->files[r->parts], 64, "%s", p->filename);
    r->open = 1;
    return 0;
}

static int d(void *ud, const char *data, size_t n, char *err, size_t errlen)
{
    struct rec *r = ud;
    size_t i = (size_t)r->parts;
    if (r->blen[i] + n >= sizeof r->body[i])
        return 1;
    memcpy(r->body[i] + r->blen[i], data, n);
    r->blen[i] += n;
    return 0;
}

static int e(void *ud, char *err, size_t errlen)
{
    struct rec *r = ud;
    r->open = 0;
    r->parts++;
    return 0;
}

static tk_status parse(const char *boundary, const char *body, size_t len, size_t chunk,
                       struct rec *r, char *err)
{
    memset(r, 0, sizeof *r);
    execd_mp_cb cb = {b, d, e};
    execd_mp m;
    execd_mp_init(&m, boundary, &cb, r);
    tk_status st = TK_OK;
    for (size_t i = 0; i < len && st == TK_OK; i += chunk)
        st = execd_mp_feed(&m, body + i, len - i < chunk ? len - i : chunk, err, 256);
    if (st == TK_OK)
        st = execd_mp_finish(&m, err, 256);
    execd_mp_free(&m);
    return st;
}

static const char BODY[] =
    "preamble is ignored\r\n"
    "--XyZ\r\n"
    "Content-Disposition: form-data; name=\"metadata\"; filename=\"metadata\"\r\n"
    "Content-Type: application/json\r\n"
    "\r\n"
    "{\"path\":\"a.txt\"}\r\n"
    "--XyZ  \r\n"
    "content-disposition: form-data; name=file; filename=\"we\\\"ird.bin\"\r\n"
    "\r\n"
    "a--XyZ\n--XyZ\r--XyZ\r\n-XyZ\r\n\r\n"
    "\r\n"
    "--XyZ\r\n"
    "Content-Disposition: form-data; name=\"empty\"\r\n"
    "\r\n"
    "\r\n"
    "--XyZ--\r\n"
    "epilogue \r\n--XyZ junk";

TEST(parses_parts_whatever_the_chunking)
{
    const char want[] = "a--XyZ\n--XyZ\r--XyZ\r\n-XyZ\r\n\r\n";
    size_t chunks[] = {1, 2, 3, 7, 64, 4096};
    for (size_t c = 0; c < TK_ARRAY_LEN(chunks); c++) {
        struct rec r;
        char err[256] = "";
        if (parse("XyZ", BODY, sizeof BODY - 1, chunks[c], &r, err) != TK_OK)
            TK_TEST_FAIL("chunk %zu: %s", chunks[c], err);
        CHECK_INT(r.parts, ==, 3);
        CHECK_STR(r.names[0], "metadata");
        CHECK_STR(r.files[0], "metadata");
        CHECK_INT(r.blen[0], ==, 16);
        CHECK(memcmp(r.body[0], "{\"path\":\"a.txt\"}", 16) == 0);
        CHECK_STR(r.names[1], "file");
        CHECK_STR(r.files[1], "we\"ird.bin");
        /* "--XyZ" not preceded by CRLF is data, as are bare CRs and LFs */
        CHECK_INT(r.blen[1], ==, sizeof want - 1);
        CHECK(memcmp(r.body[1], want, sizeof want - 1) == 0);
        CHECK_STR(r.names[2], "empty");
        CHECK_INT(r.blen[2], ==, 0);
    }
}

TEST(a_delimiter_is_crlf_dash_dash_boundary_then_crlf_or_dash_dash)
{
    struct rec r;
    char err[256] = "";
    const char ok[] = "--b\r\n"
                      "Content-Disposition: form-data; name=\"file\"\r\n\r\n"
                      "a--b\r\nb\r-\n--bX\r\n--b--";
    CHECK_INT(parse("b", ok, sizeof ok - 1, 1, &r, err), ==, TK_OK);
    CHECK_INT(r.blen[0], ==, 14);
    CHECK(memcmp(r.body[0], "a--b\r\nb\r-\n--bX", 14) == 0);
    /* the boundary may not occur in the data: "\r\n--b" followed by anything but
     * CRLF (after optional padding) or "--" is an error */
    const char bad[] = "--b\r\n"
                       "Content-Disposition: form-data; name=\"file\"\r\n\r\n"
                       "x\r\n--bX\r\n--b--";
    CHECK_INT(parse("b", bad, sizeof bad - 1, 1, &r, err), ==, TK_EINVAL);
    CHECK(strstr(err, "not followed by CRLF"));
}

TEST(refuses_malformed_bodies)
{
    struct rec r;
    char err[256];
    struct {
        const char *body, *msg;
    } bad[] = {
        {"no boundary at all", "no multipart boundary"},
        {"--b\r\nContent-Disposition: form-data; name=\"x\"\r\n\r\nunterminated", "closing"},
        {"--b\r\nContent-Type: text/plain\r\n\r\nx\r\n--b--", "no Content-Disposition"},
        {"--b\r\nContent-Disposition: attachment\r\n\r\nx\r\n--b--", "not form-data"},
        {"--b\r\nContent-Disposition: form-data; name=\"x\r\n\r\nx\r\n--b--", "malformed"},
        {"--b\r\nno colon here\r\n\r\nx\r\n--b--", "malformed part header"},
    };
    for (size_t i = 0; i < TK_ARRAY_LEN(bad); i++) {
        err[0] = '\0';
        CHECK(parse("b", bad[i].body, strlen(bad[i].body), 5, &r, err) != TK_OK);
        if (!strstr(err, bad[i].msg))
            TK_TEST_FAIL("case %zu: \"%s\" lacks \"%s\"", i, err, bad[i].msg);
    }
    /* headers larger than the cap */
    static char big[EXECD_MP_HEADER_MAX + 200];
    int n = snprintf(big, sizeof big, "--b\r\nContent-Disposition: form-data; name=\"x\"\r\nX: ");
    memset(big + n, 'a', sizeof big - (size_t)n - 1);
    big[sizeof big - 1] = '\0';
    CHECK(parse("b", big, strlen(big), 100, &r, err) != TK_OK);
    CHECK(strstr(err, "larger than 8192"));
}

TEST(boundary_from_content_type)
{
    char out[80];
    CHECK_INT(execd_mp_boundary("multipart/form-data; boundary=abc123", out, sizeof out), ==,
              TK_OK);
    CHECK_STR(out, "abc123");
    CHECK_INT(
        execd_mp_boundary("Multipart/Form-Data;charset=utf-8; boundary=\"a b:c\"", out, sizeof out),
        ==, TK_OK);
    CHECK_STR(out, "a b:c");
    CHECK_INT(execd_mp_boundary("multipart/form-data", out, sizeof out), ==, TK_EINVAL);
    CHECK_INT(execd_mp_boundary("text/plain; boundary=x", out, sizeof out), ==, TK_EINVAL);
    CHECK_INT(execd_mp_boundary("multipart/form-data; boundary=", out, sizeof out), ==, TK_EINVAL);
    CHECK_INT(execd_mp_boundary("multipart/form-data; boundary=a\x01", out, sizeof out), ==,
              TK_EINVAL);
    char longb[200] = "multipart/form-data; boundary=";
    memset(longb + strlen(longb), 'x', 80);
    CHECK_INT(execd_mp_boundary(longb, out, sizeof out), ==, TK_EINVAL);
    CHECK_INT(execd_mp_boundary(NULL, out, sizeof out), ==, TK_EINVAL);
}

TEST_MAIN()
