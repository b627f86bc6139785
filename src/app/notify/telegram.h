/*
 * telegram.h — the Telegram Bot API as tusko uses it (docs/NOTIFY.md): its
 * answers parsed (untrusted: every field checked, the body capped), text made
 * ready for sendMessage (HTML-escaped, split into parts Telegram takes), and
 * the calls (getMe, getUpdates, sendMessage) over lib/httpc. The bot token
 * sits in every URL: it is never logged, and every message this file makes
 * has it replaced by "<token>".
 */
#ifndef APP_NOTIFY_TELEGRAM_H
#define APP_NOTIFY_TELEGRAM_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/buf.h"
#include "lib/common.h"

/* The longest text of one message (Telegram counts UTF-16 code units). */
#define NOTIFY_TELEGRAM_TEXT_MAX 4096
/* An answer's body at most (getUpdates with 100 updates stays far below). */
#define NOTIFY_TELEGRAM_ANSWER_MAX (4u << 20)

/* A Bot API answer: {ok, result} or {ok:false, error_code, description,
 * parameters: {retry_after, migrate_to_chat_id}}. */
typedef struct {
    int ok;
    long error_code; /* the answer's, else the HTTP status */
    char description[256];
    int64_t retry_after; /* seconds; 0 when absent */
    json_t *result;      /* owned; NULL when absent */
} notify_telegram_answer;

/* Parses an answer's body (status: the HTTP status, used when the body has no
 * error_code). TK_OK, or TK_EINVAL when it is not a Bot API answer (out then
 * says so in description). Free with notify_telegram_answer_free. */
tk_status notify_telegram_parse_answer(const char *body, size_t len, long status,
                                       notify_telegram_answer *out);
void notify_telegram_answer_free(notify_telegram_answer *a);

/* One update of getUpdates that tusko acts on: a text message in a chat. */
typedef struct {
    int64_t update_id;
    int64_t chat_id;      /* 0: not a message with a chat */
    int private_chat;     /* chat.type == "private" */
    const char *text;     /* borrowed from the result; NULL when none */
    const char *username; /* from.username, may be NULL */
} notify_telegram_update;

/* The i-th update of a getUpdates result array: TK_OK, TK_EINVAL when the
 * element has no integer update_id (skipped by the caller). */
tk_status notify_telegram_update_at(const json_t *result, size_t i, notify_telegram_update *out);

/* Appends s with & < > escaped for parse_mode HTML. */
tk_status notify_telegram_escape(tk_buf *out, const char *s, size_t len);

/* Splits text into parts whose escaped form is at most max UTF-16 code units
 * (NOTIFY_TELEGRAM_TEXT_MAX), cutting at a paragraph break ("\n\n") when
 * there is one in the part, else at a line break, else at a space, else
 * between two code points; in order. Returns the count; parts[i] are heap
 * strings of the raw (unescaped) text; *parts is heap. Invalid UTF-8 bytes
 * count as one unit each. */
size_t notify_telegram_split(const char *text, size_t max, char ***parts);
void notify_telegram_parts_free(char **parts, size_t n);

/* Replaces every occurrence of token in s (in place) with "<token>". */
void notify_telegram_redact(char *s, size_t cap, const char *token);

/* The calls: base is TELEGRAM_API_URL, token the bot's. On TK_OK *a is the
 * parsed answer (check a->ok); else err (redacted) says what failed. cancel
 * (may be NULL) non-zero aborts the call (TK_ECLOSED). */
tk_status notify_telegram_call(const char *base, const char *token, const char *method,
                               json_t *body, long timeout_ms, const volatile int *cancel,
                               notify_telegram_answer *a, char *err, size_t errlen);

#endif
