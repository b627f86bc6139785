#include "lib/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lib/buf.h"
#include "lib/tktime.h"

static const char *log_program = "tusko";
static int log_level = TK_LOG_INFO;
static int log_json;
static _Thread_local char log_reqid[64];
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

static const char *const level_names[] = {"debug", "info", "warn", "error"};

/* The level a LOG_LEVEL value names (any case), or -1. */
static int level_named(const char *s)
{
    for (int i = 0; i < 4; i++)
        if (strcasecmp(s, level_names[i]) == 0)
            return i;
    return -1;
}

void tk_log_init(const char *program)
{
    log_program = program;
    const char *lv = getenv("LOG_LEVEL");
    if (lv && level_named(lv) >= 0)
        log_level = level_named(lv);
    const char *fmt = getenv("LOG_FORMAT");
    log_json = fmt && strcasecmp(fmt, "json") == 0;
}

tk_status tk_log_check_env(char *err, size_t errlen)
{
    const char *lv = getenv("LOG_LEVEL");
    if (lv && *lv && level_named(lv) < 0) {
        snprintf(err, errlen, "LOG_LEVEL: \"%.64s\" is not one of debug, info, warn, error", lv);
        return TK_EINVAL;
    }
    const char *fmt = getenv("LOG_FORMAT");
    if (fmt && *fmt && strcasecmp(fmt, "json") != 0 && strcasecmp(fmt, "text") != 0) {
        snprintf(err, errlen, "LOG_FORMAT: \"%.64s\" is not text or json", fmt);
        return TK_EINVAL;
    }
    return TK_OK;
}

void tk_log_set_level(int level)
{
    log_level = level;
}

int tk_log_enabled(int level)
{
    return level >= log_level;
}

void tk_log_set_request_id(const char *id)
{
    if (!id)
        log_reqid[0] = '\0';
    else
        snprintf(log_reqid, sizeof log_reqid, "%s", id);
}

/* Appends s, escaping control characters (and, in JSON, quotes and backslashes). */
static void append_escaped(tk_buf *b, const char *s, int json)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '\n')
            tk_buf_append_str(b, "\\n");
        else if (*p == '\r')
            tk_buf_append_str(b, "\\r");
        else if (*p == '\t')
            tk_buf_append_str(b, "\\t");
        else if (*p < 0x20 || *p == 0x7f)
            tk_buf_printf(b, "\\u%04x", *p);
        else if (json && (*p == '"' || *p == '\\')) {
            tk_buf_append_byte(b, '\\');
            tk_buf_append_byte(b, (char)*p);
        } else
            tk_buf_append_byte(b, (char)*p);
    }
}

void tk_log(int level, const char *component, const char *fmt, ...)
{
    if (level < log_level)
        return;
    if (level < 0 || level > TK_LOG_ERROR)
        level = TK_LOG_ERROR;
    char msg[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    char ts[40];
    tk_time_rfc3339(tk_now_ms(), ts, sizeof ts);

    /* room for msg with every byte escaped (6 bytes each) and the fields, so no
     * append below can fail and every line ends with its newline */
    tk_buf line;
    tk_buf_init(&line, TK_CAP_LOG_LINE);
    if (log_json) {
        tk_buf_printf(&line, "{\"ts\":\"%s\",\"level\":\"%s\",\"prog\":\"%s\",\"comp\":\"", ts,
                      level_names[level], log_program);
        append_escaped(&line, component, 1);
        tk_buf_append_str(&line, "\"");
        if (log_reqid[0]) {
            tk_buf_append_str(&line, ",\"req\":\"");
            append_escaped(&line, log_reqid, 1);
            tk_buf_append_str(&line, "\"");
        }
        tk_buf_append_str(&line, ",\"event\":\"");
        append_escaped(&line, msg, 1);
        tk_buf_append_str(&line, "\"}\n");
    } else {
        tk_buf_printf(&line, "%s %s %s %s ", ts, level_names[level], log_program, component);
        if (log_reqid[0]) {
            tk_buf_append_str(&line, "req=");
            append_escaped(&line, log_reqid, 0);
            tk_buf_append_byte(&line, ' ');
        }
        append_escaped(&line, msg, 0);
        tk_buf_append_byte(&line, '\n');
    }
    pthread_mutex_lock(&log_lock);
    fwrite(line.data, 1, line.len, stderr);
    fflush(stderr);
    pthread_mutex_unlock(&log_lock);
    tk_buf_free(&line);
}
