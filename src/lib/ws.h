/*
 * ws.h — RFC 6455 WebSocket framing: the handshake's accept key, a streaming
 * frame reader with caps, and frame headers for writing. No extensions
 * (permessage-deflate is not offered, so RSV bits are refused).
 *
 *   tk_ws_reader r;
 *   tk_ws_reader_init(&r, 1, 1 << 20, 16 << 20);   // a server: frames must be masked
 *   int code = tk_ws_reader_feed(&r, bytes, n, on_msg, ud);
 *   if (code) -> send a close frame with code (1002, 1007, 1009) and drop the peer
 *   tk_ws_reader_free(&r);
 *
 * on_msg gets each whole message (fragments joined; text checked as UTF-8)
 * and each control frame (ping, pong, close with its payload), in order; a
 * non-zero return stops the feed and is returned. Every byte a peer sends is
 * bounded: a frame's payload by max_frame, a message by max_message, the
 * reader's buffer by max_frame + 14.
 */
#ifndef TK_WS_H
#define TK_WS_H

#include <stddef.h>
#include <stdint.h>

#include "lib/buf.h"

enum {
    TK_WS_CONT = 0x0,
    TK_WS_TEXT = 0x1,
    TK_WS_BINARY = 0x2,
    TK_WS_CLOSE = 0x8,
    TK_WS_PING = 0x9,
    TK_WS_PONG = 0xA,
};

/* Close codes the reader answers. */
enum {
    TK_WS_CLOSE_NORMAL = 1000,
    TK_WS_CLOSE_PROTOCOL = 1002,
    TK_WS_CLOSE_INVALID_DATA = 1007,
    TK_WS_CLOSE_TOO_BIG = 1009,
};

#define TK_WS_MAX_HEADER 14

/* The Sec-WebSocket-Accept value for a Sec-WebSocket-Key: 0 and out filled
 * (28 characters and a NUL), -1 when the key is not base64 of 16 bytes. */
int tk_ws_accept_key(const char *key, char out[29]);

typedef int (*tk_ws_msg_fn)(void *ud, int opcode, const char *data, size_t len);

typedef struct {
    int server;         /* 1: the peer is a client, its frames must be masked */
    size_t max_frame;   /* payload of one frame at most */
    size_t max_message; /* a message (its fragments joined) at most */
    tk_buf in;          /* bytes of a frame not yet whole */
    tk_buf msg;         /* fragments of the message under way */
    int msg_op;         /* its opcode; 0: none under way */
    int closed;         /* a close frame was read: nothing more is taken */
} tk_ws_reader;

void tk_ws_reader_init(tk_ws_reader *r, int server, size_t max_frame, size_t max_message);
void tk_ws_reader_free(tk_ws_reader *r);
/* Takes n bytes: 0 while all is well; a close code (TK_WS_CLOSE_*) when the
 * peer broke the protocol or a cap (the reader then takes nothing more); or
 * what on_msg returned. Bytes after a close frame are ignored. */
int tk_ws_reader_feed(tk_ws_reader *r, const void *data, size_t n, tk_ws_msg_fn on_msg, void *ud);

/* A frame header for a payload of len bytes: writes at most TK_WS_MAX_HEADER
 * bytes into out and returns how many. mask: NULL (a server's frames) or the
 * 4-byte key, which the caller then applies with tk_ws_mask. */
size_t tk_ws_header(unsigned char out[TK_WS_MAX_HEADER], int fin, int opcode, uint64_t len,
                    const unsigned char *mask);
/* XORs data with the key, as if it started at offset of the payload. */
void tk_ws_mask(void *data, size_t len, const unsigned char key[4], size_t offset);

/* A close frame's payload: the code (big-endian) and a reason cut to fit 123
 * bytes (at a character). Returns its length (at most 125). */
size_t tk_ws_close_payload(char out[125], int code, const char *reason);

#endif
