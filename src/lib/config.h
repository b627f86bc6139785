/*
 * config.h — typed settings from the environment (and matching command-line flags).
 *
 * A program declares its settings as a table and loads them once at start-up:
 *
 *   static char *listen; static int64_t pool;
 *   static tk_setting settings[] = {
 *       {"SANDBOXD_LISTEN", "listen", TK_SET_STR, "127.0.0.1:8081", "address to serve on",
 *        .out = &listen},
 *       {"SANDBOX_WARM_POOL_SIZE", "warm-pool-size", TK_SET_INT, "2", "ready sandboxes",
 *        .min = 0, .max = 64, .out = &pool},
 *   };
 *   if (tk_config_load(settings, TK_ARRAY_LEN(settings), argc, argv, &argi, err, sizeof err))
 *       { fprintf(stderr, "%s\n", err); exit(2); }
 *
 * A flag given as --listen=X or --listen X overrides the variable. Every bad value
 * is reported with the variable's name. Settings marked TK_SET_FAIL_CLOSED have no
 * default: when missing their `out` stays NULL and the feature they guard stays off
 * (never a fallback). TK_SET_REQUIRED makes a missing value an error.
 * TK_SET_SECRET values are never printed.
 */
#ifndef TK_CONFIG_H
#define TK_CONFIG_H

#include <stdint.h>
#include <stdio.h>

#include "lib/common.h"

typedef enum {
    TK_SET_STR,      /* out: char ** (heap string, or NULL when unset) */
    TK_SET_INT,      /* out: int64_t * ; min/max checked */
    TK_SET_BOOL,     /* out: int * ; true/false/1/0/yes/no/on/off */
    TK_SET_DURATION, /* out: int64_t * in ms; "30m", "45s", "500ms"; min/max in ms */
} tk_setting_type;

enum {
    TK_SET_REQUIRED = 1 << 0,
    TK_SET_FAIL_CLOSED = 1 << 1,
    TK_SET_SECRET = 1 << 2,
};

typedef struct {
    const char *env;
    const char *flag; /* without the leading "--"; NULL for env only */
    tk_setting_type type;
    const char *def; /* default as text; NULL for none */
    const char *help;
    int64_t min, max; /* for INT and DURATION; both 0 means unchecked */
    unsigned flags;
    void *out;
    /* Optional check of a string value once loaded: returns non-zero with a
     * message (without the variable's name, which is prefixed) to refuse it. */
    int (*check)(const char *value, char *msg, size_t msglen);
    /* Filled by tk_config_load: where the value came from ("default", "env", "flag"). */
    const char *source;
} tk_setting;

/*
 * Loads every setting. Command-line flags start at argv[*argi] (pass 1 normally);
 * on return *argi is the first argument that is not a known flag (a subcommand).
 * An unknown "--flag" is an error. Returns TK_OK or TK_EINVAL with a message in err.
 */
tk_status tk_config_load(tk_setting *s, size_t n, int argc, char **argv, int *argi, char *err,
                         size_t errlen);

/* Prints one line per setting: flag, variable, default, help. */
void tk_config_usage(FILE *f, const tk_setting *s, size_t n);

/* Frees the strings tk_config_load allocated. */
void tk_config_free(tk_setting *s, size_t n);

/* A check for listen addresses (host:port, [v6]:port, unix:/path). */
int tk_config_check_listen(const char *value, char *msg, size_t msglen);
/* A check for http(s) URLs. */
int tk_config_check_url(const char *value, char *msg, size_t msglen);

/* Parses a boolean word. */
tk_status tk_config_parse_bool(const char *v, int *out);

#endif
