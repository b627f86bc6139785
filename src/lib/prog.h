/*
 * prog.h — what every program's main() does the same way: --help and --version,
 * settings from the environment, signals, and a /healthz route.
 */
#ifndef TK_PROG_H
#define TK_PROG_H

#include "lib/config.h"
#include "lib/httpd.h"

typedef struct {
    const char *name;     /* "tusko-execd" */
    const char *summary;  /* one line for --help */
    const char *usage;    /* e.g. "[options]" or "<command> [options]" */
    const char *commands; /* extra --help text listing subcommands; may be NULL */
    tk_setting *settings;
    size_t nsettings;
} tk_prog;

/*
 * Blocks SIGINT/SIGTERM/SIGPIPE for every thread (call first, before any thread
 * starts), initialises logging, handles --help and --version (exiting), and loads
 * the settings (exiting with status 2 and a message naming the variable on a bad
 * value). On return *argi is the index of the first non-option argument.
 */
void tk_prog_init(const tk_prog *p, int argc, char **argv, int *argi);

/* Waits for SIGINT or SIGTERM; returns the signal number. */
int tk_prog_wait(void);

/* GET /healthz: {"status":"ok","program":...,"version":...}. ud is the tk_prog. */
void tk_prog_healthz(tk_req *req, void *ud);

#endif
