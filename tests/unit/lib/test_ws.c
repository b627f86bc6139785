/* lib/ws: RFC 6455's own examples (the accept key, section 5.7's frames), the
 * frames fed byte by byte, fragments joined, and each rule and cap refused
 * with its close code. */
#include <stdlib.h>
#include <string.h>

#include "lib/ws.h"
#include "tk_test.h"

typedef struct {
    int n;
    int op[8];
    char data[8][70000];
    size_t len[8];
} got_t;

static int collect(void *ud, int op, const char *d, size_t len)
{
    got_t *g = ud;
    if (g->n >= 8 || len > sizeof g->data[0])
        return -1;
    g->op[g->n] = op;
    memcpy(g->data[g->n], d, len);
    g->len[g->n++] = len;
    return 0;
}

/* Feeds bytes whole and byte by byte (the same result both ways). */
static int feed(int server, const void *b, size_t n, got_t *g, size_t max_frame, size_t max_msg)
{
    tk_ws_reader r;
    tk_ws_reader_init(&r, server, max_frame, max_msg);
    memset(g, 0, sizeof *g);
    int rc = tk_ws_reader_feed(&r, b, n, collect, g);
    tk_ws_reader_free(&r);
    got_t *g2 = malloc(sizeof *g2);
    memset(g2, 0, sizeof *g2);
    tk_ws_reader_init(&r, server, max_frame, max_msg);
    int rc2 = 0;
    for (size_t i = 0; i < n && !rc2; i++)
        rc2 = tk_ws_reader_feed(&r, (const char *)b + i, 1, collect, g2);
    tk_ws_reader_free(&r);
    int same = rc == rc2 && g->n == g2->n;
    for (int i = 0; same && i < g->n; i++)
        same = g->len[i] == g2->len[i] && memcmp(g->data[i], g2->data[i], g->len[i]) == 0;
    free(g2);
    return same ? rc : -99;
}

TEST(ws_accept_key_rfc_example)
{
    char out[29];
    CHECK_INT(tk_ws_accept_key("dGhlIHNhbXBsZSBub25jZQ==", out), ==, 0);
    CHECK_STR(out, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    CHECK_INT(tk_ws_accept_key("dGhlIHNhbXBsZSBub25jZQ", out), ==, -1);
    CHECK_INT(tk_ws_accept_key("dGhlIHNhbXBsZSBub25jZXg=", out), ==, -1); /* 17 bytes */
    CHECK_INT(tk_ws_accept_key("not base64 at all!!!!!==", out), ==, -1);
    CHECK_INT(tk_ws_accept_key(NULL, out), ==, -1);
}

TEST(ws_rfc_frames)
{
    got_t *g = malloc(sizeof *g);
    /* a single-frame unmasked text message (from a server) */
    const unsigned char a[] = {0x81, 0x05, 'H', 'e', 'l', 'l', 'o'};
    CHECK_INT(feed(0, a, sizeof a, g, 1024, 4096), ==, 0);
    CHECK_INT(g->n, ==, 1);
    CHECK_INT(g->op[0], ==, TK_WS_TEXT);
    CHECK_MEM(g->data[0], "Hello", 5);
    /* the same, masked (from a client) */
    const unsigned char b[] = {0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58};
    CHECK_INT(feed(1, b, sizeof b, g, 1024, 4096), ==, 0);
    CHECK_INT(g->n, ==, 1);
    CHECK_MEM(g->data[0], "Hello", 5);
    /* a fragmented text message, with a ping between its fragments */
    const unsigned char c[] = {0x01, 0x03, 'H',  'e',  'l', 0x89, 0x02,
                               'h',  'i',  0x80, 0x02, 'l', 'o'};
    CHECK_INT(feed(0, c, sizeof c, g, 1024, 4096), ==, 0);
    CHECK_INT(g->n, ==, 2);
    CHECK_INT(g->op[0], ==, TK_WS_PING);
    CHECK_MEM(g->data[0], "hi", 2);
    CHECK_INT(g->op[1], ==, TK_WS_TEXT);
    CHECK_INT(g->len[1], ==, 5);
    CHECK_MEM(g->data[1], "Hello", 5);
    /* 256 bytes binary (16-bit length) and 65536 bytes (64-bit length) */
    unsigned char *d = calloc(1, 10 + 65536);
    d[0] = 0x82, d[1] = 0x7e, d[2] = 0x01, d[3] = 0x00;
    memset(d + 4, 'x', 256);
    CHECK_INT(feed(0, d, 4 + 256, g, 70000, 70000), ==, 0);
    CHECK_INT(g->n, ==, 1);
    CHECK_INT(g->op[0], ==, TK_WS_BINARY);
    CHECK_INT(g->len[0], ==, 256);
    memset(d, 0, 10);
    d[0] = 0x82, d[1] = 0x7f, d[7] = 0x01; /* 0x10000 */
    memset(d + 10, 'y', 65536);
    CHECK_INT(feed(0, d, 10 + 65536, g, 70000, 70000), ==, 0);
    CHECK_INT(g->len[0], ==, 65536);
    CHECK(g->data[0][65535] == 'y');
    free(d);
    /* a close with a code and a reason; what follows is ignored */
    const unsigned char e[] = {0x88, 0x04, 0x03, 0xe8, 'o', 'k', 0x81, 0x01, 'x'};
    CHECK_INT(feed(0, e, sizeof e, g, 1024, 4096), ==, 0);
    CHECK_INT(g->n, ==, 1);
    CHECK_INT(g->op[0], ==, TK_WS_CLOSE);
    CHECK_INT(g->len[0], ==, 4);
    free(g);
}

TEST(ws_refusals)
{
    got_t *g = malloc(sizeof *g);
    struct {
        int server;
        unsigned char b[16];
        size_t n;
        int code;
    } cases[] = {
        {1,
         {0x81, 0x05, 'H', 'e', 'l', 'l', 'o'},
         7,
         TK_WS_CLOSE_PROTOCOL},                                           /* unmasked to a server */
        {0, {0x81, 0x81, 1, 2, 3, 4, 'a'}, 7, TK_WS_CLOSE_PROTOCOL},      /* masked to a client */
        {0, {0xc1, 0x01, 'a'}, 3, TK_WS_CLOSE_PROTOCOL},                  /* RSV1 */
        {0, {0x83, 0x01, 'a'}, 3, TK_WS_CLOSE_PROTOCOL},                  /* opcode 3 */
        {0, {0x8b, 0x00}, 2, TK_WS_CLOSE_PROTOCOL},                       /* opcode 0xB */
        {0, {0x09, 0x00}, 2, TK_WS_CLOSE_PROTOCOL},                       /* a fragmented ping */
        {0, {0x89, 0x7e, 0x00, 0x7e}, 4, TK_WS_CLOSE_PROTOCOL},           /* a ping over 125 */
        {0, {0x80, 0x01, 'a'}, 3, TK_WS_CLOSE_PROTOCOL},                  /* nothing to continue */
        {0, {0x01, 0x01, 'a', 0x81, 0x01, 'b'}, 6, TK_WS_CLOSE_PROTOCOL}, /* a message in one */
        {0, {0x82, 0x7e, 0x00, 0x05}, 4, TK_WS_CLOSE_PROTOCOL},           /* 16-bit form for 5 */
        {0,
         {0x82, 0x7f, 0, 0, 0, 0, 0, 0, 0x01, 0x00},
         10,
         TK_WS_CLOSE_PROTOCOL},                                                 /* 64-bit for 256 */
        {0, {0x82, 0x7f, 0x80, 0, 0, 0, 0, 1, 0, 0}, 10, TK_WS_CLOSE_PROTOCOL}, /* top bit set */
        {0, {0x81, 0x02, 0xc3, 0x28}, 4, TK_WS_CLOSE_INVALID_DATA},             /* bad UTF-8 */
        {0, {0x88, 0x01, 0x03}, 3, TK_WS_CLOSE_PROTOCOL},                 /* a close of one byte */
        {0, {0x88, 0x02, 0x03, 0xed}, 4, TK_WS_CLOSE_PROTOCOL},           /* code 1005 */
        {0, {0x88, 0x03, 0x03, 0xe8, 0xff}, 5, TK_WS_CLOSE_INVALID_DATA}, /* bad reason */
        {0, {0x82, 0x7e, 0x04, 0x01}, 4, TK_WS_CLOSE_TOO_BIG},            /* 1025 > max_frame */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int rc = feed(cases[i].server, cases[i].b, cases[i].n, g, 1024, 2048);
        if (rc != cases[i].code)
            TK_TEST_FAIL("case %zu: %d, expected %d", i, rc, cases[i].code);
    }
    /* the message cap: three fragments of 1000 over a cap of 2048 */
    unsigned char m[3 * 1004];
    for (int f = 0; f < 3; f++) {
        unsigned char *p = m + f * 1004;
        p[0] = (unsigned char)((f == 2 ? 0x80 : 0) | (f == 0 ? TK_WS_BINARY : 0));
        p[1] = 0x7e, p[2] = 0x03, p[3] = 0xe8;
        memset(p + 4, 'z', 1000);
    }
    CHECK_INT(feed(0, m, sizeof m, g, 1024, 2048), ==, TK_WS_CLOSE_TOO_BIG);
    CHECK_INT(g->n, ==, 0);
    CHECK_INT(feed(0, m, sizeof m, g, 1024, 3000), ==, 0);
    CHECK_INT(g->n, ==, 1);
    CHECK_INT(g->len[0], ==, 3000);
    free(g);
}

TEST(ws_header_round_trip)
{
    const unsigned char key[4] = {1, 2, 3, 4};
    size_t sizes[] = {0, 5, 125, 126, 65535, 65536};
    got_t *g = malloc(sizeof *g);
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n = sizes[i];
        unsigned char *f = malloc(TK_WS_MAX_HEADER + n + 1);
        size_t h = tk_ws_header(f, 1, TK_WS_BINARY, n, key);
        CHECK_INT(h, ==, (size_t)(n < 126 ? 6 : n < 65536 ? 8 : 14));
        for (size_t k = 0; k < n; k++)
            f[h + k] = (unsigned char)(k * 7);
        tk_ws_mask(f + h, n, key, 0);
        CHECK_INT(feed(1, f, h + n, g, 70000, 70000), ==, 0);
        CHECK_INT(g->n, ==, 1);
        CHECK_INT(g->len[0], ==, n);
        for (size_t k = 0; k < n; k++)
            if ((unsigned char)g->data[0][k] != (unsigned char)(k * 7)) {
                TK_TEST_FAIL("byte %zu of %zu", k, n);
                break;
            }
        free(f);
    }
    char cp[125];
    CHECK_INT(tk_ws_close_payload(cp, 1009, "too big"), ==, 9);
    CHECK_MEM(cp, "\x03\xf1too big", 9);
    char lng[300];
    memset(lng, 'a', sizeof lng - 1);
    lng[sizeof lng - 1] = 0;
    CHECK_INT(tk_ws_close_payload(cp, 1000, lng), ==, 125);
    free(g);
}

TEST_MAIN()
