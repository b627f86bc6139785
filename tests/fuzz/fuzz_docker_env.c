/* The docker runtime's env file (docker_spec.h): a request's env and
 * entrypoint become shell code that the container's init sources, so every
 * word must come back exactly as it went in and nothing may fall outside the
 * quotes. The input is split at 0x01 into strings: "NAME=value" entries up to
 * the first empty one, then the entrypoint's words. The file is read back with
 * the rules of POSIX sh for the only forms it may hold:
 *   export NAME=<word>\n      set -- <word> <word>...\n
 * where a word is '...' and \' pieces; anything else traps. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/buf.h"
#include "sandboxd/env.h"
#include "sandboxd/limits.h"
#include "sandboxd/docker_spec.h"

#define MAXS 64

/* One shell word at *p: '...' and \' pieces. Appends it to out; NULL when the
 * text there is not such a word. */
static const char *word(const char *p, tk_buf *out)
{
    int any = 0;
    for (;;) {
        if (*p == '\'') {
            const char *e = strchr(p + 1, '\'');
            if (!e)
                return NULL;
            tk_buf_append(out, p + 1, (size_t)(e - p - 1));
            p = e + 1;
            any = 1;
        } else if (p[0] == '\\' && p[1] == '\'') {
            tk_buf_append(out, "'", 1);
            p += 2;
            any = 1;
        } else {
            return any ? p : NULL;
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *in = malloc(size + 1);
    memcpy(in, data, size);
    in[size] = '\0';
    const char *env[MAXS + 1], *argv[MAXS + 1];
    size_t ne = 0, na = 0;
    int in_argv = 0;
    for (char *s = in, *e;; s = e + 1) {
        e = strchr(s, '\x01');
        if (e)
            *e = '\0';
        if (!in_argv && *s == '\0')
            in_argv = 1;
        else if (!in_argv && ne < MAXS)
            env[ne++] = s;
        else if (in_argv && na < MAXS)
            argv[na++] = s;
        if (!e)
            break;
    }
    env[ne] = NULL;
    argv[na] = NULL;

    char *f = sbx_docker_spec_env_file("tok", env, argv);
    /* what must come back: execd's three settings, then the valid env entries */
    const char *want_names[MAXS + 4], *want_values[MAXS + 4];
    size_t nw = 0;
    want_names[nw] = "EXECD_LISTEN";
    want_values[nw++] = "unix:" SBX_DOCKER_SPEC_RUN "/" SBX_DOCKER_SPEC_SOCK;
    want_names[nw] = "EXECD_WORKSPACE";
    want_values[nw++] = "/workspace";
    want_names[nw] = "EXECD_ACCESS_TOKEN";
    want_values[nw++] = "tok";
    char names[MAXS][256];
    for (size_t i = 0; i < ne; i++) {
        const char *eq = strchr(env[i], '=');
        if (!eq || eq == env[i] || (size_t)(eq - env[i]) > 255)
            continue;
        size_t k = nw - 3;
        memcpy(names[k], env[i], (size_t)(eq - env[i]));
        names[k][eq - env[i]] = '\0';
        if (!sbx_env_name_valid(names[k]) || strncmp(names[k], "EXECD_", 6) == 0)
            continue;
        want_names[nw] = names[k];
        want_values[nw++] = eq + 1;
    }

    const char *p = f;
    tk_buf w;
    tk_buf_init(&w, (size_t)64 << 20);
    for (size_t i = 0; i < nw; i++) {
        size_t nl = strlen(want_names[i]);
        if (strncmp(p, "export ", 7) != 0 || strncmp(p + 7, want_names[i], nl) != 0 ||
            p[7 + nl] != '=')
            __builtin_trap();
        tk_buf_reset(&w);
        p = word(p + 8 + nl, &w);
        if (!p || *p != '\n' || strcmp(tk_buf_cstr(&w), want_values[i]) != 0)
            __builtin_trap();
        p++;
    }
    if (na) {
        if (strncmp(p, "set --", 6) != 0)
            __builtin_trap();
        p += 6;
        for (size_t i = 0; i < na; i++) {
            if (*p != ' ')
                __builtin_trap();
            tk_buf_reset(&w);
            p = word(p + 1, &w);
            if (!p || strcmp(tk_buf_cstr(&w), argv[i]) != 0)
                __builtin_trap();
        }
        if (*p++ != '\n')
            __builtin_trap();
    }
    if (*p != '\0')
        __builtin_trap();
    tk_buf_free(&w);
    free(f);
    free(in);
    return 0;
}
