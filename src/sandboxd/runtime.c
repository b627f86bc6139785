/*
 * runtime.c — the runtimes of this build, choosing one, and what every runtime
 * does the same way with an instance (runtime.h).
 */
#include "sandboxd/runtime.h"

#include <stdio.h>
#include <string.h>

const sbx_runtime_kind *const sbx_runtime_kinds[] = {&sbx_runtime_native, &sbx_runtime_docker,
                                                     &sbx_runtime_k8s, NULL};

sbx_runtime *sbx_runtime_open(const char *name, const sbx_runtime_config *cfg, char *err,
                              size_t errlen)
{
    if (!name)
        return sbx_runtime_kinds[0]->open(cfg, err, errlen);
    char have[128] = "";
    size_t off = 0;
    for (const sbx_runtime_kind *const *k = sbx_runtime_kinds; *k; k++) {
        if (strcmp(name, (*k)->name) == 0)
            return (*k)->open(cfg, err, errlen);
        off += (size_t)snprintf(have + off, sizeof have - off, "%s%s", off ? ", " : "", (*k)->name);
        if (off >= sizeof have)
            off = sizeof have - 1;
    }
    snprintf(err, errlen, "SANDBOX_RUNTIME=%s is not available (this build has: %s)", name, have);
    return NULL;
}

tk_status sbx_runtime_settings_from_env(char *err, size_t errlen)
{
    static char prog[] = "tusko-sandboxd";
    char *noargs[] = {prog, NULL};
    for (const sbx_runtime_kind *const *k = sbx_runtime_kinds; *k; k++) {
        int argi = 1;
        if ((*k)->nsettings &&
            tk_config_load((*k)->settings, (*k)->nsettings, 1, noargs, &argi, err, errlen) != TK_OK)
            return TK_EINVAL;
    }
    return TK_OK;
}

void sbx_runtime_destroy(sbx_runtime *rt, sbx_instance *in)
{
    if (!in)
        return;
    rt->ops->teardown(rt, in);
    rt->ops->release(in);
}

void sbx_runtime_forget(sbx_runtime *rt, sbx_instance *in)
{
    if (in)
        rt->ops->release(in);
}

const char *sbx_runtime_execd_socket(const sbx_instance *in)
{
    return in->sock;
}

void sbx_runtime_execd_endpoint(const sbx_instance *in, char *out, size_t outlen)
{
    if (in->tcp[0])
        snprintf(out, outlen, "tcp:%s", in->tcp);
    else
        snprintf(out, outlen, "%s", in->sock);
}
