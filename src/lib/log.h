/*
 * log.h — one structured line per event, to stderr.
 *
 *   2026-12-01T05:40:04.123Z info tusko http req=0190... method=GET path=/healthz status=200
 *
 * The format string yields key=value pairs; by convention the first is msg="...".
 * Control characters in the line (newlines from user input, say) are escaped, so
 * one event is always one line. LOG_FORMAT=json writes a JSON object instead.
 * LOG_LEVEL (debug, info, warn, error; default info) filters. Thread-safe.
 */
#ifndef TK_LOG_H
#define TK_LOG_H

#include <stddef.h>

#include "lib/common.h"

enum { TK_LOG_DEBUG = 0, TK_LOG_INFO, TK_LOG_WARN, TK_LOG_ERROR };

/* Sets the program name and reads LOG_LEVEL and LOG_FORMAT. */
void tk_log_init(const char *program);

/* Checks LOG_LEVEL (debug, info, warn, error; any case) and LOG_FORMAT (text,
 * json). TK_OK when both are unset or valid; else TK_EINVAL with a message
 * naming the variable. tk_prog_init refuses to start on it. */
tk_status tk_log_check_env(char *err, size_t errlen);
void tk_log_set_level(int level);
int tk_log_enabled(int level);
/* The request id of the calling thread, shown as req=; NULL clears it. */
void tk_log_set_request_id(const char *id);

void tk_log(int level, const char *component, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define tk_debug(comp, ...) tk_log(TK_LOG_DEBUG, comp, __VA_ARGS__)
#define tk_info(comp, ...)  tk_log(TK_LOG_INFO, comp, __VA_ARGS__)
#define tk_warn(comp, ...)  tk_log(TK_LOG_WARN, comp, __VA_ARGS__)
#define tk_error(comp, ...) tk_log(TK_LOG_ERROR, comp, __VA_ARGS__)

#endif
