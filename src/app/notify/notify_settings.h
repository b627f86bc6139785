/*
 * notify_settings.h — Telegram's settings (TELEGRAM_*, docs/NOTIFY.md): the
 * struct they fill and the rows for the program's settings table.
 */
#ifndef APP_NOTIFY_SETTINGS_H
#define APP_NOTIFY_SETTINGS_H

#include <stdint.h>

#include "lib/config.h"

typedef struct {
    char *token;             /* TELEGRAM_BOT_TOKEN; NULL: Telegram is off */
    char *api_url;           /* TELEGRAM_API_URL */
    int64_t poll_timeout_ms; /* TELEGRAM_POLL_TIMEOUT: getUpdates' long poll */
    char *webhook_secret;    /* TELEGRAM_WEBHOOK_SECRET; NULL: long polling */
} notify_config;

/* clang-format off */
#define NOTIFY_SETTINGS(c)                                                                         \
    {"TELEGRAM_BOT_TOKEN", NULL, TK_SET_STR, NULL,                                                 \
     "the Telegram bot's token (from @BotFather); unset: Telegram notifications are off",         \
     .flags = TK_SET_SECRET, .out = &(c).token},                                                   \
    {"TELEGRAM_API_URL", "telegram-api-url", TK_SET_STR, "https://api.telegram.org",              \
     "the Bot API server", .out = &(c).api_url, .check = tk_config_check_url},                     \
    {"TELEGRAM_POLL_TIMEOUT", "telegram-poll-timeout", TK_SET_DURATION, "25s",                     \
     "how long one getUpdates call waits for updates (long polling)", .min = 1000,                 \
     .max = 50 * 1000, .out = &(c).poll_timeout_ms},                                               \
    {"TELEGRAM_WEBHOOK_SECRET", NULL, TK_SET_STR, NULL,                                            \
     "set: updates come by webhook to TUSKO_PUBLIC_URL/api/notify/telegram/webhook, each checked " \
     "for this secret (1-256 of A-Z a-z 0-9 _ -); unset: long polling",                            \
     .flags = TK_SET_SECRET, .out = &(c).webhook_secret}
/* clang-format on */

#endif
