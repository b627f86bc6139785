#include "lib/prog.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/json.h"
#include "lib/log.h"

static sigset_t prog_sigs;

static void usage(const tk_prog *p, FILE *f)
{
    fprintf(f, "%s %s — %s\n\nUsage: %s %s\n", p->name, TUSKO_VERSION, p->summary, p->name,
            p->usage ? p->usage : "[options]");
    if (p->commands)
        fprintf(f, "\n%s", p->commands);
    fprintf(f, "\nSettings (environment variable, or the flag beside it):\n");
    tk_config_usage(f, p->settings, p->nsettings);
    fprintf(f, "  %-24s %-28s %s\n  %-24s %-28s %s\n", "--help", "", "print this help and exit",
            "--version", "", "print the version and exit");
}

void tk_prog_init(const tk_prog *p, int argc, char **argv, int *argi)
{
    sigemptyset(&prog_sigs);
    sigaddset(&prog_sigs, SIGINT);
    sigaddset(&prog_sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &prog_sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    tk_log_init(p->name);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(p, stdout);
            exit(0);
        }
        if (strcmp(argv[i], "--version") == 0) {
            printf("%s %s\n", p->name, TUSKO_VERSION);
            exit(0);
        }
    }
    char err[512];
    if (tk_log_check_env(err, sizeof err) != TK_OK) {
        fprintf(stderr, "%s: %s\n", p->name, err);
        exit(2);
    }
    int a = argi ? *argi : 1;
    if (tk_config_load(p->settings, p->nsettings, argc, argv, &a, err, sizeof err) != TK_OK) {
        fprintf(stderr, "%s: %s\n", p->name, err);
        exit(2);
    }
    if (argi)
        *argi = a;
}

int tk_prog_wait(void)
{
    int sig = 0;
    sigwait(&prog_sigs, &sig);
    return sig;
}

void tk_prog_healthz(tk_req *req, void *ud)
{
    const tk_prog *p = ud;
    tk_respond_json(req, 200,
                    tk_json_obj("status", json_string("ok"), "program", json_string(p->name),
                                "version", json_string(TUSKO_VERSION), NULL));
}
