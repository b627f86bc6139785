/*
 * notify_tools.h — the fast-lane tool notify_user {text}: one message of a
 * turn to its user's linked Telegram chat, queued in telegram_outbox (the
 * sender delivers it as any other). Offered to the turn's own run only, and
 * only when TELEGRAM_BOT_TOKEN is set; never starts a sandbox.
 */
#ifndef APP_NOTIFY_TOOLS_H
#define APP_NOTIFY_TOOLS_H

/* The most characters one notify_user message may have (split into parts of
 * at most 4,096 when sent). */
#define NOTIFY_USER_TEXT_MAX 16000

void notify_tools_register(void);

#endif
