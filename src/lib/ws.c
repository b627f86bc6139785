/* RFC 6455 framing: the accept key, the frame reader, frame headers. See ws.h. */
#include "lib/ws.h"

#include <openssl/sha.h>
#include <sodium.h>
#include <string.h>

#include "lib/utf8.h"

#define WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

int tk_ws_accept_key(const char *key, char out[29])
{
    unsigned char raw[18];
    size_t n = 0;
    if (!key || strlen(key) != 24 ||
        sodium_base642bin(raw, sizeof raw, key, 24, NULL, &n, NULL,
                          sodium_base64_VARIANT_ORIGINAL) != 0 ||
        n != 16)
        return -1;
    char cat[24 + sizeof WS_GUID];
    memcpy(cat, key, 24);
    memcpy(cat + 24, WS_GUID, sizeof WS_GUID);
    unsigned char h[SHA_DIGEST_LENGTH];
    SHA1((const unsigned char *)cat, 24 + sizeof WS_GUID - 1, h);
    sodium_bin2base64(out, 29, h, sizeof h, sodium_base64_VARIANT_ORIGINAL);
    return 0;
}

void tk_ws_reader_init(tk_ws_reader *r, int server, size_t max_frame, size_t max_message)
{
    memset(r, 0, sizeof *r);
    r->server = server;
    r->max_frame = max_frame;
    r->max_message = max_message;
    tk_buf_init(&r->in, max_frame + TK_WS_MAX_HEADER);
    tk_buf_init(&r->msg, max_message);
}

void tk_ws_reader_free(tk_ws_reader *r)
{
    tk_buf_free(&r->in);
    tk_buf_free(&r->msg);
}

void tk_ws_mask(void *data, size_t len, const unsigned char key[4], size_t offset)
{
    unsigned char *p = data;
    for (size_t i = 0; i < len; i++)
        p[i] ^= key[(i + offset) & 3];
}

static int close_code_ok(unsigned code)
{
    return (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) ||
           (code >= 3000 && code <= 4999);
}

/* One whole frame at p (its header parsed): payload unmasked in place. */
static int frame(tk_ws_reader *r, int fin, int op, char *pl, size_t len, tk_ws_msg_fn on_msg,
                 void *ud)
{
    if (op >= 0x8) {
        if (op == TK_WS_CLOSE) {
            if (len == 1)
                return TK_WS_CLOSE_PROTOCOL;
            if (len >= 2) {
                unsigned code = ((unsigned)(unsigned char)pl[0] << 8) | (unsigned char)pl[1];
                if (!close_code_ok(code))
                    return TK_WS_CLOSE_PROTOCOL;
                if (!tk_utf8_valid(pl + 2, len - 2))
                    return TK_WS_CLOSE_INVALID_DATA;
            }
            r->closed = 1;
        }
        return on_msg(ud, op, pl, len);
    }
    if (op == TK_WS_CONT) {
        if (!r->msg_op)
            return TK_WS_CLOSE_PROTOCOL; /* nothing to continue */
    } else {
        if (r->msg_op)
            return TK_WS_CLOSE_PROTOCOL; /* a new message inside one */
        if (fin) {
            if (len > r->max_message)
                return TK_WS_CLOSE_TOO_BIG;
            if (op == TK_WS_TEXT && !tk_utf8_valid(pl, len))
                return TK_WS_CLOSE_INVALID_DATA;
            return on_msg(ud, op, pl, len);
        }
        r->msg_op = op;
        tk_buf_reset(&r->msg);
    }
    if (r->msg.len + len > r->max_message || tk_buf_append(&r->msg, pl, len) != TK_OK)
        return TK_WS_CLOSE_TOO_BIG;
    if (!fin)
        return 0;
    int mop = r->msg_op;
    r->msg_op = 0;
    if (mop == TK_WS_TEXT && !tk_utf8_valid(r->msg.data, r->msg.len))
        return TK_WS_CLOSE_INVALID_DATA;
    int rc = on_msg(ud, mop, r->msg.data ? r->msg.data : "", r->msg.len);
    tk_buf_reset(&r->msg);
    return rc;
}

/* Parses one frame at the start of r->in: 1 and *used when it is whole,
 * 0 when more bytes are needed, or -code. */
static int parse_one(tk_ws_reader *r, size_t *used, tk_ws_msg_fn on_msg, void *ud, int *rc)
{
    const unsigned char *p = (const unsigned char *)r->in.data;
    size_t have = r->in.len;
    if (have < 2)
        return 0;
    int fin = p[0] >> 7, op = p[0] & 0x0f, masked = p[1] >> 7;
    if (p[0] & 0x70)
        return -TK_WS_CLOSE_PROTOCOL; /* RSV bits: no extension was agreed */
    if (op != TK_WS_CONT && op != TK_WS_TEXT && op != TK_WS_BINARY && op != TK_WS_CLOSE &&
        op != TK_WS_PING && op != TK_WS_PONG)
        return -TK_WS_CLOSE_PROTOCOL;
    if (masked != r->server)
        return -TK_WS_CLOSE_PROTOCOL; /* clients mask, servers do not */
    uint64_t len = p[1] & 0x7f;
    size_t h = 2;
    if (op >= 0x8 && (!fin || len > 125))
        return -TK_WS_CLOSE_PROTOCOL;
    if (len == 126) {
        if (have < 4)
            return 0;
        len = ((uint64_t)p[2] << 8) | p[3];
        if (len < 126)
            return -TK_WS_CLOSE_PROTOCOL; /* not the shortest form */
        h = 4;
    } else if (len == 127) {
        if (have < 10)
            return 0;
        if (p[2] & 0x80)
            return -TK_WS_CLOSE_PROTOCOL;
        len = 0;
        for (int i = 2; i < 10; i++)
            len = (len << 8) | p[i];
        if (len < 65536)
            return -TK_WS_CLOSE_PROTOCOL;
        h = 10;
    }
    if (len > r->max_frame)
        return -TK_WS_CLOSE_TOO_BIG;
    if (masked)
        h += 4;
    if (have < h + len)
        return 0;
    char *pl = r->in.data + h;
    if (masked)
        tk_ws_mask(pl, (size_t)len, p + h - 4, 0);
    *used = h + (size_t)len;
    *rc = frame(r, fin, op, pl, (size_t)len, on_msg, ud);
    return 1;
}

int tk_ws_reader_feed(tk_ws_reader *r, const void *data, size_t n, tk_ws_msg_fn on_msg, void *ud)
{
    const char *d = data;
    while (n > 0 && !r->closed) {
        /* take at most what may complete the frame under way, so the buffer
         * stays within max_frame + a header */
        size_t room = r->in.max - r->in.len;
        size_t take = n < room ? n : room;
        if (take == 0)
            return TK_WS_CLOSE_TOO_BIG;
        if (tk_buf_append(&r->in, d, take) != TK_OK)
            return TK_WS_CLOSE_TOO_BIG;
        d += take;
        n -= take;
        for (;;) {
            size_t used = 0;
            int rc = 0;
            int got = parse_one(r, &used, on_msg, ud, &rc);
            if (got < 0) {
                r->closed = 1;
                return -got;
            }
            if (got == 0)
                break;
            tk_buf_consume(&r->in, used);
            if (rc)
                return rc;
            if (r->closed)
                return 0;
        }
    }
    return 0;
}

size_t tk_ws_header(unsigned char out[TK_WS_MAX_HEADER], int fin, int opcode, uint64_t len,
                    const unsigned char *mask)
{
    size_t h = 0;
    out[h++] = (unsigned char)((fin ? 0x80 : 0) | (opcode & 0x0f));
    unsigned char m = mask ? 0x80 : 0;
    if (len < 126) {
        out[h++] = (unsigned char)(m | len);
    } else if (len <= 0xffff) {
        out[h++] = m | 126;
        out[h++] = (unsigned char)(len >> 8);
        out[h++] = (unsigned char)len;
    } else {
        out[h++] = m | 127;
        for (int i = 7; i >= 0; i--)
            out[h++] = (unsigned char)(len >> (8 * i));
    }
    if (mask) {
        memcpy(out + h, mask, 4);
        h += 4;
    }
    return h;
}

size_t tk_ws_close_payload(char out[125], int code, const char *reason)
{
    out[0] = (char)((code >> 8) & 0xff);
    out[1] = (char)(code & 0xff);
    size_t n = reason ? strlen(reason) : 0;
    n = tk_utf8_cut(reason ? reason : "", n, 123);
    if (n)
        memcpy(out + 2, reason, n);
    return 2 + n;
}
