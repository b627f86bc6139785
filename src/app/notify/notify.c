/* Telegram notifications: the poller, the sender, linking, the API (see notify.h). */
#include "app/notify/notify.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <sodium.h>

#include "app/agent/bus.h"
#include "app/app.h"
#include "app/auth/auth.h"
#include "app/auth/secret.h"
#include "app/notify/telegram.h"
#include "app/ratelimit.h"
#include "lib/buf.h"
#include "lib/id.h"
#include "lib/json.h"
#include "lib/log.h"
#include "lib/pg.h"
#include "lib/tktime.h"

#define POLLER_LOCK_SQL "SELECT pg_try_advisory_lock(hashtextextended('tusko:telegram_poller', 0))"
#define SENDER_LOCK_SQL "SELECT pg_try_advisory_lock(hashtextextended('tusko:telegram_sender', 0))"
#define PACE_CHATS      32

static struct {
    pthread_t poller, sender;
    int wakefd;
    volatile int stopping;
    int running;
    pthread_mutex_t mu;
    char bot[64]; /* getMe's username, "" until known */
} N = {.wakefd = -1, .mu = PTHREAD_MUTEX_INITIALIZER};

static const notify_config *cfg(void)
{
    return &app_get()->cfg->notify;
}

/* Updates come by webhook (TELEGRAM_WEBHOOK_SECRET set), not by polling. */
static int webhook_mode(void)
{
    return cfg()->webhook_secret && *cfg()->webhook_secret;
}

int notify_enabled(void)
{
    return cfg()->token && *cfg()->token;
}

static int enabled(void)
{
    return notify_enabled();
}

/* Waits ms, or until stopping, a wake-up, or c's socket (may be NULL) has data. */
static void wait_ms(PGconn *c, int ms)
{
    struct pollfd pf[2] = {{.fd = N.wakefd, .events = POLLIN},
                           {.fd = c ? PQsocket(c) : -1, .events = POLLIN}};
    int64_t end = tk_mono_ms() + ms;
    while (!N.stopping) {
        int64_t left = end - tk_mono_ms();
        if (left <= 0)
            return;
        int rc = poll(pf, c ? 2 : 1, (int)left);
        if (rc < 0 && errno != EINTR)
            return;
        if (rc > 0) {
            if (pf[0].revents & POLLIN) {
                uint64_t v;
                ssize_t n = read(N.wakefd, &v, sizeof v);
                (void)n;
            }
            if (c && (pf[1].revents & POLLIN) && PQconsumeInput(c)) {
                PGnotify *nt;
                while ((nt = PQnotifies(c)))
                    PQfreemem(nt);
            }
            return;
        }
    }
}

static int try_lock(PGconn *c, const char *sql)
{
    PGresult *r = tk_pg_query(c, sql, 0, NULL);
    int ok = tk_pg_ok(r) && PQntuples(r) == 1 && strcmp(PQgetvalue(r, 0, 0), "t") == 0;
    PQclear(r);
    return ok;
}

/* The bot's username (getMe, once): 1 and out, or 0 when it cannot be had. */
static int bot_name(char *out, size_t outlen)
{
    pthread_mutex_lock(&N.mu);
    int have = N.bot[0] != 0;
    if (have)
        snprintf(out, outlen, "%s", N.bot);
    pthread_mutex_unlock(&N.mu);
    if (have)
        return 1;
    notify_telegram_answer a;
    char err[256];
    if (notify_telegram_call(cfg()->api_url, cfg()->token, "getMe", NULL, 10000, &N.stopping, &a,
                             err, sizeof err) != TK_OK ||
        !a.ok) {
        tk_warn("telegram", "msg=\"getMe failed\" error=\"%s\"",
                a.description[0] ? a.description : err);
        notify_telegram_answer_free(&a);
        return 0;
    }
    const char *u = json_is_object(a.result) ? tk_json_str(a.result, "username") : NULL;
    size_t n = u ? strlen(u) : 0;
    int ok = n >= 1 && n <= 32;
    for (size_t i = 0; ok && i < n; i++)
        ok = (u[i] >= 'a' && u[i] <= 'z') || (u[i] >= 'A' && u[i] <= 'Z') ||
             (u[i] >= '0' && u[i] <= '9') || u[i] == '_';
    if (ok) {
        pthread_mutex_lock(&N.mu);
        snprintf(N.bot, sizeof N.bot, "%s", u);
        snprintf(out, outlen, "%s", u);
        pthread_mutex_unlock(&N.mu);
    } else
        tk_warn("telegram", "msg=\"getMe answered no usable username\"");
    notify_telegram_answer_free(&a);
    return ok;
}

/* ---------------------------------------------------------------- the poller */

static void reply(PGconn *c, int64_t chat, const char *text)
{
    char cs[24];
    snprintf(cs, sizeof cs, "%lld", (long long)chat);
    const char *p[] = {cs, text};
    tk_pg_exec(c, "INSERT INTO telegram_outbox (chat_id, text) VALUES ($1::bigint, $2)", 2, p);
}

static int code_like(const char *s)
{
    size_t n = strlen(s);
    if (n < 16 || n > 64)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
              (s[i] >= '0' && s[i] <= '9') || s[i] == '-' || s[i] == '_'))
            return 0;
    return 1;
}

/* "a***@example.com" */
static void mask_email(const char *e, char *out, size_t outlen)
{
    const char *at = e ? strchr(e, '@') : NULL;
    if (!e || !*e || !at || at == e)
        snprintf(out, outlen, "your account");
    else
        snprintf(out, outlen, "%c***%s", e[0], at);
}

static void on_update(PGconn *c, const notify_telegram_update *u)
{
    if (!u->chat_id || !u->text)
        return;
    char text[256];
    snprintf(text, sizeof text, "%s", u->text);
    char *t = text;
    while (*t == ' ' || *t == '\n')
        t++;
    for (size_t n = strlen(t); n && (t[n - 1] == ' ' || t[n - 1] == '\n'); n--)
        t[n - 1] = 0;
    if (!u->private_chat) {
        if (strncmp(t, "/start", 6) == 0)
            reply(c, u->chat_id, "Link me in a private chat with the bot, not in a group.");
        return;
    }
    char cs[24];
    snprintf(cs, sizeof cs, "%lld", (long long)u->chat_id);
    if (strcmp(t, "/stop") == 0 || strncmp(t, "/stop@", 6) == 0) {
        const char *p[] = {cs};
        PGresult *r = tk_pg_query(c, "DELETE FROM telegram_links WHERE chat_id = $1::bigint", 1, p);
        int n = tk_pg_ok(r) ? (int)strtol(PQcmdTuples(r), NULL, 10) : 0;
        PQclear(r);
        reply(c, u->chat_id,
              n ? "Unlinked: this chat gets no more notifications from Tusko."
                : "This chat is not linked to a Tusko account.");
        tk_info("telegram", "msg=\"unlinked by /stop\" chat=%s links=%d", cs, n);
        return;
    }
    const char *code = t;
    if (strncmp(t, "/start", 6) == 0) {
        code = t + 6;
        if (*code == '@')
            code += strcspn(code, " ");
        while (*code == ' ')
            code++;
    }
    if (!*code || !code_like(code)) {
        reply(c, u->chat_id,
              "Send the code Tusko shows you (Settings, Telegram: Link) to get your "
              "notifications here.");
        return;
    }
    char key[64];
    int64_t retry = 0;
    snprintf(key, sizeof key, "tg_try:%s", cs);
    if (app_ratelimit_take_key(c, key, NOTIFY_TRIES_PER_HOUR, 3600 * 1000, &retry) == TK_EDENIED) {
        char msg[128];
        snprintf(msg, sizeof msg, "Too many codes tried from this chat; try again in %lld minutes.",
                 (long long)(retry / 60000 + 1));
        reply(c, u->chat_id, msg);
        return;
    }
    char hash[APP_HASH_HEX + 1];
    app_sha256_hex(code, strlen(code), hash);
    const char *p[] = {hash, cs, u->username};
    PGresult *r =
        tk_pg_query(c, "SELECT email, linked FROM tusko_telegram_link($1, $2::bigint, $3)", 3, p);
    int linked = tk_pg_ok(r) && PQntuples(r) == 1 && strcmp(PQgetvalue(r, 0, 1), "t") == 0;
    char masked[300], msg[512];
    mask_email(linked && !PQgetisnull(r, 0, 0) ? PQgetvalue(r, 0, 0) : NULL, masked, sizeof masked);
    PQclear(r);
    if (linked) {
        snprintf(msg, sizeof msg,
                 "Linked to the Tusko account %s. Your schedules' notifications come here; send "
                 "/stop to unlink.",
                 masked);
        tk_info("telegram", "msg=\"chat linked\" chat=%s", cs);
    } else
        snprintf(msg, sizeof msg,
                 "That code is wrong, already used or expired. Ask Tusko for a new one.");
    reply(c, u->chat_id, msg);
}

/* Keeps *c connected (LISTENing on listen, when given) and this instance
 * holding lock_sql's advisory lock: 1 when both hold, 0 after waiting a while
 * (no database, or another instance holds the lock). */
static int hold(PGconn **c, int *locked, const char *what, const char *listen, const char *lock_sql)
{
    if (!*c || PQstatus(*c) != CONNECTION_OK) {
        if (*c)
            PQfinish(*c);
        *locked = 0;
        *c = agent_bus_connect(what);
        if (*c && listen && tk_pg_exec(*c, listen, 0, NULL) != TK_OK) {
            PQfinish(*c);
            *c = NULL;
        }
        if (!*c) {
            wait_ms(NULL, 1000);
            return 0;
        }
    }
    if (!*locked && !(*locked = try_lock(*c, lock_sql))) {
        wait_ms(NULL, 5000); /* another instance has it */
        return 0;
    }
    return 1;
}

static void *poller_main(void *arg)
{
    (void)arg;
    PGconn *c = NULL;
    int locked = 0;
    /* every instance learns the bot's name once, so GET /api/notify/telegram
     * can show it before anyone asks for a link code (a failure is logged;
     * asking for a code tries again) */
    char bot[64];
    (void)bot_name(bot, sizeof bot);
    if (webhook_mode()) {
        /* Telegram posts the updates to us: tell it where, with the secret,
         * until it takes it (every instance does, with the same answer) */
        char *url = tk_asprintf("%s/api/notify/telegram/webhook", app_get()->cfg->public_url);
        while (!N.stopping) {
            notify_telegram_answer a;
            char err[256];
            json_t *body = tk_json_obj("url", json_string(url), "secret_token",
                                       json_string(cfg()->webhook_secret), "allowed_updates",
                                       json_pack("[s]", "message"), NULL);
            tk_status st = notify_telegram_call(cfg()->api_url, cfg()->token, "setWebhook", body,
                                                15000, &N.stopping, &a, err, sizeof err);
            int ok = st == TK_OK && a.ok;
            if (!ok && !N.stopping)
                tk_warn("telegram", "msg=\"setWebhook failed; trying again in 30 s\" error=\"%s\"",
                        st == TK_OK ? a.description : err);
            else if (ok)
                tk_info("telegram", "msg=\"webhook set\" url=%s", url);
            notify_telegram_answer_free(&a);
            if (ok)
                break;
            wait_ms(NULL, 30000);
        }
        free(url);
        return NULL;
    }
    while (!N.stopping) {
        if (!hold(&c, &locked, "telegram poller", NULL, POLLER_LOCK_SQL))
            continue;
        PGresult *r =
            tk_pg_query(c, "SELECT update_offset FROM telegram_state WHERE id = 1", 0, NULL);
        long long offset =
            tk_pg_ok(r) && PQntuples(r) == 1 ? strtoll(PQgetvalue(r, 0, 0), NULL, 10) : 0;
        PQclear(r);
        notify_telegram_answer a;
        char err[256];
        long secs = (long)(cfg()->poll_timeout_ms / 1000);
        json_t *body = tk_json_obj("offset", json_integer(offset), "timeout", json_integer(secs),
                                   "allowed_updates", json_pack("[s]", "message"), NULL);
        tk_status st =
            notify_telegram_call(cfg()->api_url, cfg()->token, "getUpdates", body,
                                 cfg()->poll_timeout_ms + 15000, &N.stopping, &a, err, sizeof err);
        if (N.stopping) {
            notify_telegram_answer_free(&a);
            break;
        }
        if (st != TK_OK || !a.ok) {
            long code = st == TK_OK ? a.error_code : 0;
            tk_warn("telegram", "msg=\"getUpdates failed\" status=%ld error=\"%s\"%s", code,
                    st == TK_OK ? a.description : err,
                    code == 409
                        ? " hint=\"a webhook is set for this bot: delete it (deleteWebhook) "
                          "or use another bot\""
                        : "");
            notify_telegram_answer_free(&a);
            wait_ms(NULL, code == 409 ? 30000 : code == 401 || code == 404 ? 60000 : 5000);
            continue;
        }
        long long next = offset;
        for (size_t i = 0; json_is_array(a.result) && i < json_array_size(a.result); i++) {
            notify_telegram_update u;
            if (notify_telegram_update_at(a.result, i, &u) != TK_OK)
                continue;
            on_update(c, &u);
            if (u.update_id + 1 > next)
                next = u.update_id + 1;
        }
        notify_telegram_answer_free(&a);
        if (next != offset) {
            char ns[24];
            snprintf(ns, sizeof ns, "%lld", next);
            const char *p[] = {ns};
            tk_pg_exec(c, "UPDATE telegram_state SET update_offset = $1::bigint WHERE id = 1", 1,
                       p);
        }
    }
    if (c)
        PQfinish(c);
    return NULL;
}

/* ---------------------------------------------------------------- the sender */

static struct {
    int64_t chat, at_ms;
} pace[PACE_CHATS];

/* At most one message a second to one chat. */
static void pace_wait(int64_t chat)
{
    size_t slot = (size_t)((uint64_t)chat % PACE_CHATS);
    if (pace[slot].chat == chat) {
        int64_t left = pace[slot].at_ms + 1000 - tk_mono_ms();
        if (left > 0)
            wait_ms(NULL, (int)left);
    }
    pace[slot].chat = chat;
    pace[slot].at_ms = tk_mono_ms();
}

typedef enum { SEND_OK, SEND_RETRY, SEND_FAILED, SEND_BLOCKED } send_result;

/* Sends one part (HTML; a refused entity once more as plain text; 429 waits). */
static send_result send_part(int64_t chat, const char *part, char *why, size_t whylen)
{
    int plain = 0;
    for (int tries = 0; tries < 8 && !N.stopping; tries++) {
        tk_buf esc;
        tk_buf_init(&esc, 64 * 1024);
        if (!plain)
            notify_telegram_escape(&esc, part, strlen(part));
        json_t *body = tk_json_obj(
            "chat_id", json_integer(chat), "text", json_string(plain ? part : tk_buf_cstr(&esc)),
            "link_preview_options", json_pack("{s:b}", "is_disabled", 1), NULL);
        if (!plain)
            json_object_set_new(body, "parse_mode", json_string("HTML"));
        tk_buf_free(&esc);
        pace_wait(chat);
        notify_telegram_answer a;
        tk_status st = notify_telegram_call(cfg()->api_url, cfg()->token, "sendMessage", body,
                                            30000, &N.stopping, &a, why, whylen);
        if (st != TK_OK) {
            notify_telegram_answer_free(&a);
            return SEND_RETRY;
        }
        long code = a.error_code;
        snprintf(why, whylen, "%ld %s", code, a.description);
        int64_t retry_after = a.retry_after;
        int ok = a.ok;
        notify_telegram_answer_free(&a);
        if (ok)
            return SEND_OK;
        if (code == 429) {
            tk_warn("telegram", "msg=\"sendMessage rate limited\" retry_after=%lld",
                    (long long)retry_after);
            wait_ms(NULL, (int)((retry_after > 0 ? retry_after : 1) * 1000));
            continue;
        }
        if (code == 403)
            return SEND_BLOCKED;
        if (code == 400 && !plain && strstr(why, "can't parse entities")) {
            plain = 1;
            continue;
        }
        if (code >= 500 || code == 0)
            return SEND_RETRY;
        return SEND_FAILED;
    }
    return SEND_RETRY;
}

/* Sends the oldest due message: 1 one was handled, 0 none due, -1 error. */
static int send_one(PGconn *c)
{
    PGresult *r = tk_pg_query(c,
                              "SELECT o.id, o.text, coalesce(o.chat_id, l.chat_id), o.attempts, "
                              "o.parts_sent FROM telegram_outbox o LEFT JOIN telegram_links l ON "
                              "o.chat_id IS NULL AND l.user_id = o.user_id AND l.active WHERE "
                              "o.status = 'queued' AND o.not_before <= now() ORDER BY o.id LIMIT 1",
                              0, NULL);
    if (!tk_pg_ok(r)) {
        PQclear(r);
        return -1;
    }
    if (PQntuples(r) == 0) {
        PQclear(r);
        return 0;
    }
    char id[24];
    snprintf(id, sizeof id, "%s", PQgetvalue(r, 0, 0));
    char *text = tk_strdup(PQgetvalue(r, 0, 1));
    int nochat = PQgetisnull(r, 0, 2);
    int64_t chat = nochat ? 0 : strtoll(PQgetvalue(r, 0, 2), NULL, 10);
    int attempts = atoi(PQgetvalue(r, 0, 3)), done = atoi(PQgetvalue(r, 0, 4));
    PQclear(r);
    const char *p1[] = {id};
    if (nochat) {
        tk_pg_exec(c,
                   "UPDATE telegram_outbox SET status = 'failed', error = 'no active linked chat' "
                   "WHERE id = $1",
                   1, p1);
        free(text);
        return 1;
    }
    char **parts;
    size_t n = notify_telegram_split(text, NOTIFY_TELEGRAM_TEXT_MAX, &parts);
    free(text);
    send_result res = SEND_OK;
    char why[300] = "";
    for (size_t i = (size_t)done; i < n && res == SEND_OK && !N.stopping; i++) {
        res = send_part(chat, parts[i], why, sizeof why);
        if (res == SEND_OK) {
            char k[16];
            snprintf(k, sizeof k, "%zu", i + 1);
            const char *p[] = {id, k};
            tk_pg_exec(c, "UPDATE telegram_outbox SET parts_sent = $2::int WHERE id = $1", 2, p);
        }
    }
    notify_telegram_parts_free(parts, n);
    if (N.stopping && res == SEND_OK)
        res = SEND_RETRY;
    char cs[24], att[16], back[48];
    snprintf(cs, sizeof cs, "%lld", (long long)chat);
    snprintf(att, sizeof att, "%d", attempts + 1);
    snprintf(back, sizeof back, "%d seconds", 2 << (attempts < 12 ? attempts : 12));
    if (res == SEND_OK) {
        tk_pg_exec(c, "UPDATE telegram_outbox SET status = 'sent', sent_at = now() WHERE id = $1",
                   1, p1);
    } else if (res == SEND_BLOCKED) {
        const char *p[] = {id, cs, why};
        tk_pg_exec(
            c,
            "WITH l AS (UPDATE telegram_links SET active = false, inactive_reason = $3 WHERE "
            "chat_id = $2::bigint) UPDATE telegram_outbox SET status = 'failed', error = $3 "
            "WHERE id = $1",
            3, p);
        tk_warn("telegram", "msg=\"the bot was blocked: link marked inactive\" chat=%s", cs);
    } else if (res == SEND_FAILED || attempts + 1 >= NOTIFY_ATTEMPTS_MAX) {
        const char *p[] = {id, why, att};
        tk_pg_exec(c,
                   "UPDATE telegram_outbox SET status = 'failed', error = $2, attempts = $3::int "
                   "WHERE id = $1",
                   3, p);
        tk_warn("telegram", "msg=\"message given up\" id=%s error=\"%s\"", id, why);
    } else {
        const char *p[] = {id, why, att, back};
        tk_pg_exec(
            c,
            "UPDATE telegram_outbox SET error = $2, attempts = $3::int, not_before = now() + "
            "$4::interval WHERE id = $1",
            4, p);
    }
    return 1;
}

static int next_due_ms(PGconn *c)
{
    PGresult *r =
        tk_pg_query(c,
                    "SELECT ceil(extract(epoch FROM min(not_before) - now()) * 1000)::bigint "
                    "FROM telegram_outbox WHERE status = 'queued'",
                    0, NULL);
    int ms = 30000;
    if (tk_pg_ok(r) && PQntuples(r) == 1 && !PQgetisnull(r, 0, 0)) {
        long long v = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
        ms = v < 0 ? 0 : v > 30000 ? 30000 : (int)v + 5;
    }
    PQclear(r);
    return ms;
}

static void *sender_main(void *arg)
{
    (void)arg;
    PGconn *c = NULL;
    int locked = 0;
    while (!N.stopping) {
        if (!hold(&c, &locked, "telegram sender", "LISTEN tusko_telegram", SENDER_LOCK_SQL))
            continue;
        int k = 0;
        while (!N.stopping && k < 100 && send_one(c) == 1)
            k++;
        if (N.stopping)
            break;
        int w = k >= 100 ? 0 : next_due_ms(c);
        if (PQconsumeInput(c)) {
            PGnotify *nt;
            int got = 0;
            while ((nt = PQnotifies(c))) {
                PQfreemem(nt);
                got = 1;
            }
            if (got)
                w = 0;
        }
        if (w)
            wait_ms(c, w);
    }
    if (c)
        PQfinish(c);
    return NULL;
}

tk_status notify_check(char *err, size_t errlen)
{
    if (!enabled())
        return TK_OK;
    if (webhook_mode()) {
        const char *w = cfg()->webhook_secret;
        size_t n = strlen(w);
        int ok = n >= 1 && n <= 256;
        for (size_t i = 0; ok && i < n; i++)
            ok = (w[i] >= 'A' && w[i] <= 'Z') || (w[i] >= 'a' && w[i] <= 'z') ||
                 (w[i] >= '0' && w[i] <= '9') || w[i] == '_' || w[i] == '-';
        if (!ok) {
            snprintf(err, errlen,
                     "TELEGRAM_WEBHOOK_SECRET must be 1 to 256 characters of A-Z a-z 0-9 _ -");
            return TK_EINVAL;
        }
        if (!app_get()->cfg->public_url) {
            snprintf(err, errlen,
                     "TELEGRAM_WEBHOOK_SECRET is set but TUSKO_PUBLIC_URL is not: Telegram needs "
                     "the public URL to post updates to (<TUSKO_PUBLIC_URL>/api/notify/telegram/"
                     "webhook)");
            return TK_EINVAL;
        }
    }
    return TK_OK;
}

tk_status notify_start(char *err, size_t errlen)
{
    if (!enabled()) {
        tk_info("telegram",
                "msg=\"Telegram notifications are off\" hint=\"set TELEGRAM_BOT_TOKEN\"");
        return TK_OK;
    }
    N.wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (N.wakefd < 0) {
        snprintf(err, errlen, "eventfd: %s", strerror(errno));
        return TK_ERROR;
    }
    N.stopping = 0;
    if (pthread_create(&N.poller, NULL, poller_main, NULL) != 0) {
        snprintf(err, errlen, "cannot start the Telegram poller");
        return TK_ERROR;
    }
    if (pthread_create(&N.sender, NULL, sender_main, NULL) != 0) {
        N.stopping = 1;
        pthread_join(N.poller, NULL);
        snprintf(err, errlen, "cannot start the Telegram sender");
        return TK_ERROR;
    }
    pthread_setname_np(N.poller, "tg-poll");
    pthread_setname_np(N.sender, "tg-send");
    N.running = 1;
    tk_info("telegram", "msg=\"Telegram notifications on\" updates=%s",
            webhook_mode() ? "webhook" : "long polling");
    return TK_OK;
}

void notify_stop(void)
{
    if (!N.running)
        return;
    N.stopping = 1;
    for (int i = 0; i < 2; i++) {
        uint64_t one = 1;
        ssize_t n = write(N.wakefd, &one, sizeof one);
        (void)n;
    }
    pthread_join(N.poller, NULL);
    pthread_join(N.sender, NULL);
    N.running = 0;
    close(N.wakefd);
    N.wakefd = -1;
}

/* ---------------------------------------------------------------- the API */

static PGconn *db(tk_req *r)
{
    PGconn *c = app_db_acquire();
    if (!c)
        app_respond_db_unavailable(r);
    return c;
}

static int off(tk_req *r)
{
    if (enabled())
        return 0;
    tk_respond_error(
        r, 503, "TELEGRAM_OFF",
        "Telegram notifications are off on this server (TELEGRAM_BOT_TOKEN is not set)");
    return 1;
}

static void h_status(tk_req *r, void *ud)
{
    (void)ud;
    PGconn *c = db(r);
    if (!c)
        return;
    const char *p[] = {app_req_user(r)->id};
    PGresult *res = tk_pg_query(c,
                                "SELECT jsonb_build_object('username', username, 'active', active, "
                                "'inactive_reason', inactive_reason, 'linked_at', linked_at)::text "
                                "FROM telegram_links WHERE user_id = $1",
                                1, p);
    app_db_release(c);
    if (!tk_pg_ok(res)) {
        PQclear(res);
        app_respond_db_unavailable(r);
        return;
    }
    json_t *link = PQntuples(res) ? json_loads(PQgetvalue(res, 0, 0), 0, NULL) : NULL;
    PQclear(res);
    char bot[64] = "";
    pthread_mutex_lock(&N.mu);
    snprintf(bot, sizeof bot, "%s", N.bot);
    pthread_mutex_unlock(&N.mu);
    tk_respond_json(r, 200,
                    tk_json_obj("enabled", json_boolean(enabled()), "bot",
                                bot[0] ? json_string(bot) : json_null(), "link",
                                link ? link : json_null(), NULL));
}

static void h_link(tk_req *r, void *ud)
{
    (void)ud;
    if (off(r))
        return;
    char bot[64];
    if (!bot_name(bot, sizeof bot)) {
        tk_respond_error(r, 502, "TELEGRAM_UNAVAILABLE",
                         "the Telegram Bot API did not answer getMe; try again later");
        return;
    }
    PGconn *c = db(r);
    if (!c)
        return;
    const char *uid = app_req_user(r)->id;
    char key[64];
    int64_t retry = 0;
    snprintf(key, sizeof key, "tg_link:%s", uid);
    tk_status st = app_ratelimit_take_key(c, key, NOTIFY_CODES_PER_HOUR, 3600 * 1000, &retry);
    if (st != TK_OK) {
        app_db_release(c);
        if (st == TK_EDENIED)
            app_ratelimit_respond(r, (int)(retry / 1000 + 1));
        else
            app_respond_db_unavailable(r);
        return;
    }
    unsigned char raw[16];
    tk_random_bytes(raw, sizeof raw);
    char code[32], hash[APP_HASH_HEX + 1], ttl[32];
    app_b64url(raw, sizeof raw, code, sizeof code);
    app_sha256_hex(code, strlen(code), hash);
    snprintf(ttl, sizeof ttl, "%d seconds", NOTIFY_CODE_TTL_S);
    const char *p[] = {hash, uid, ttl};
    PGresult *res = tk_pg_query(c,
                                "INSERT INTO telegram_link_codes (code_hash, user_id, expires_at) "
                                "VALUES ($1, $2, now() + $3::interval) RETURNING "
                                "to_jsonb(expires_at)::text",
                                3, p);
    app_db_release(c);
    if (!tk_pg_ok(res) || PQntuples(res) != 1) {
        PQclear(res);
        app_respond_db_unavailable(r);
        return;
    }
    char link[160];
    snprintf(link, sizeof link, "https://t.me/%s?start=%s", bot, code);
    tk_respond_json(r, 201,
                    tk_json_obj("code", json_string(code), "link", json_string(link), "bot",
                                json_string(bot), "expires_at",
                                json_loads(PQgetvalue(res, 0, 0), JSON_DECODE_ANY, NULL), NULL));
    PQclear(res);
}

static void h_unlink(tk_req *r, void *ud)
{
    (void)ud;
    PGconn *c = db(r);
    if (!c)
        return;
    const char *p[] = {app_req_user(r)->id};
    PGresult *res = tk_pg_query(c, "DELETE FROM telegram_links WHERE user_id = $1", 1, p);
    app_db_release(c);
    int ok = tk_pg_ok(res), n = ok ? (int)strtol(PQcmdTuples(res), NULL, 10) : 0;
    PQclear(res);
    if (!ok)
        app_respond_db_unavailable(r);
    else if (!n)
        tk_respond_error(r, 404, "NOT_LINKED", "no Telegram chat is linked");
    else
        tk_respond_empty(r, 204);
}

static void h_test(tk_req *r, void *ud)
{
    (void)ud;
    if (off(r))
        return;
    PGconn *c = db(r);
    if (!c)
        return;
    const char *p[] = {app_req_user(r)->id};
    PGresult *res = tk_pg_query(c,
                                "INSERT INTO telegram_outbox (user_id, text) SELECT $1, 'A test "
                                "message from Tusko: your notifications arrive here.' WHERE EXISTS "
                                "(SELECT 1 FROM telegram_links WHERE user_id = $1 AND active) "
                                "RETURNING id",
                                1, p);
    app_db_release(c);
    int ok = tk_pg_ok(res), n = ok ? PQntuples(res) : 0;
    PQclear(res);
    if (!ok)
        app_respond_db_unavailable(r);
    else if (!n)
        tk_respond_error(r, 409, "NOT_LINKED", "no active Telegram chat is linked");
    else
        tk_respond_json(r, 202, tk_json_obj("queued", json_true(), NULL));
}

/* POST /api/notify/telegram/webhook: one Update from Telegram (public: the
 * secret header is its credential, compared in constant time). An update at
 * or past the stored offset is handled once (the offset moves past it in the
 * same statement), so Telegram's redeliveries change nothing. */
static void h_webhook(tk_req *r, void *ud)
{
    (void)ud;
    if (!enabled() || !webhook_mode()) {
        tk_respond_error(r, 404, "NOT_FOUND", "no such route");
        return;
    }
    const char *got = tk_req_header(r, "X-Telegram-Bot-Api-Secret-Token");
    const char *want = cfg()->webhook_secret;
    size_t gl = got ? strlen(got) : 0, wl = strlen(want);
    if (!got || gl != wl || sodium_memcmp(got, want, wl) != 0) {
        tk_warn("telegram", "msg=\"webhook call without the secret refused\"");
        tk_respond_error(r, 401, "UNAUTHORIZED", "the webhook secret is missing or wrong");
        return;
    }
    size_t len = 0;
    const char *body = tk_req_body(r, &len);
    json_error_t je;
    json_t *up = body && len ? json_loadb(body, len, 0, &je) : NULL;
    json_t *arr = json_is_object(up) ? json_pack("[O]", up) : NULL;
    notify_telegram_update u;
    if (!arr || notify_telegram_update_at(arr, 0, &u) != TK_OK) {
        json_decref(arr);
        json_decref(up);
        tk_respond_error(r, 400, "INVALID_UPDATE",
                         "not a Telegram Update (an object with update_id)");
        return;
    }
    PGconn *c = db(r);
    if (!c) {
        json_decref(arr);
        json_decref(up);
        return;
    }
    char id[24];
    snprintf(id, sizeof id, "%lld", (long long)u.update_id);
    const char *p[] = {id};
    PGresult *res = tk_pg_query(c,
                                "UPDATE telegram_state SET update_offset = $1::bigint + 1 WHERE "
                                "id = 1 AND update_offset <= $1::bigint RETURNING 1",
                                1, p);
    int fresh = tk_pg_ok(res) && PQntuples(res) == 1;
    int failed = !tk_pg_ok(res);
    PQclear(res);
    if (fresh)
        on_update(c, &u);
    app_db_release(c);
    json_decref(arr);
    json_decref(up);
    if (failed) {
        app_respond_db_unavailable(r); /* Telegram delivers it again */
        return;
    }
    tk_respond(r, 200, "application/json", "{}", 2);
}

const tk_route notify_routes[] = {
    {"POST", "/api/notify/telegram/webhook", h_webhook, NULL, TK_ROUTE_PUBLIC | TK_ROUTE_BLOCKING,
     64u << 10},
    {"GET", "/api/notify/telegram", h_status, NULL, TK_ROUTE_BLOCKING},
    {"POST", "/api/notify/telegram/link", h_link, NULL, TK_ROUTE_BLOCKING, 1024},
    {"DELETE", "/api/notify/telegram/link", h_unlink, NULL, TK_ROUTE_BLOCKING},
    {"POST", "/api/notify/telegram/test", h_test, NULL, TK_ROUTE_BLOCKING, 1024},
};
const size_t notify_nroutes = TK_ARRAY_LEN(notify_routes);
