/*
 * notify.h — Telegram notifications (docs/NOTIFY.md): linking a user to a
 * private chat with one-time codes, the poller (getUpdates, one instance at a
 * time by an advisory lock, the offset in Postgres) that reads /start CODE,
 * bare codes and /stop, and the sender (one instance at a time) that drains
 * telegram_outbox: HTML-escaped parts of at most 4,096 characters in order,
 * paced per chat, 429 waiting retry_after, 5xx and network errors backing
 * off, 403 marking the link inactive, a refused entity resent once as plain
 * text. Schedule outcomes reach the outbox through a trigger
 * (sql/0071_telegram.sql). Without TELEGRAM_BOT_TOKEN nothing starts and the
 * API says the feature is off. With TELEGRAM_WEBHOOK_SECRET updates come by
 * webhook (POST /api/notify/telegram/webhook, setWebhook at start) instead of
 * the poller.
 */
#ifndef APP_NOTIFY_H
#define APP_NOTIFY_H

#include <stddef.h>

#include "lib/common.h"
#include "lib/httpd.h"

/* A link code's life and how many one user may ask for per hour. */
#define NOTIFY_CODE_TTL_S     600
#define NOTIFY_CODES_PER_HOUR 5
/* Wrong codes one chat may send per hour (then it is told to wait). */
#define NOTIFY_TRIES_PER_HOUR 10
/* Sends to one chat at most one a second; a failing message is retried this
 * many times (backing off 2, 4, ... s) before it is given up. */
#define NOTIFY_ATTEMPTS_MAX 10

/* Whether TELEGRAM_BOT_TOKEN is set (the feature is on). */
int notify_enabled(void);

/* Checks the settings before anything starts: TK_EINVAL with err for a
 * TELEGRAM_WEBHOOK_SECRET of bad characters or without TUSKO_PUBLIC_URL. */
tk_status notify_check(char *err, size_t errlen);

/* Starts the poller and the sender when TELEGRAM_BOT_TOKEN is set. */
tk_status notify_start(char *err, size_t errlen);
void notify_stop(void);

extern const tk_route notify_routes[];
extern const size_t notify_nroutes;

#endif
