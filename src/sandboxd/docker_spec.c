#include "sandboxd/env.h"
#include "sandboxd/docker_spec.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "lib/buf.h"
#include "lib/json.h"
#include "lib/tktime.h"
#include "sandboxd/egress.h"
#include "sandboxd/seccomp.h"

/* set -e: a failed read (the service went away before the claim) or a missing
 * env file ends the container instead of starting execd half configured. The
 * entrypoint's child waits on run/entry, opened (read-write, so without waiting
 * for a writer) before execd runs and the service closes run/ to the sandbox;
 * it then runs without execd's settings, its parent execd once the shell execs. */
const char sbx_docker_spec_init_script[] =
    "set -e\n"
    "d=" SBX_DOCKER_SPEC_RUN "\n"
    "if [ -p $d/" SBX_DOCKER_SPEC_FIFO " ]; then read -r go < $d/" SBX_DOCKER_SPEC_FIFO "; fi\n"
    ". $d/" SBX_DOCKER_SPEC_ENVFILE "\n"
    "if [ $# -gt 0 ]; then\n"
    "  exec 3<>$d/" SBX_DOCKER_SPEC_ENTRY "\n"
    "  (read -r go <&3; exec 3<&-; exec env -u EXECD_ACCESS_TOKEN -u EXECD_LISTEN -u "
    "EXECD_WORKSPACE \"$@\") &\n"
    "  exec 3<&-\n"
    "fi\n"
    "exec " SBX_DOCKER_SPEC_EXECD "\n";

static const char *const base_env[] = {
    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "HOME=/workspace",
    "LANG=C.UTF-8",
    "USER=sandbox",
    "LOGNAME=sandbox",
    "SHELL=/bin/bash",
};

/* Docker's defaults (moby oci/defaults.go) plus /sys as a whole, which the
 * native runtime does not show either. */
static const char *const masked_paths[] = {
    "/sys",
    "/proc/asound",
    "/proc/acpi",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/proc/sched_debug",
    "/proc/scsi",
    "/sys/firmware",
};
static const char *const readonly_paths[] = {
    "/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger",
};

static json_t *str_array(const char *const *v, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, json_string(v[i]));
    return a;
}

json_t *sbx_docker_spec_limits(const sbx_limits *l)
{
    return tk_json_obj("Memory", json_integer(l->memory_bytes), "MemorySwap",
                       json_integer(l->memory_bytes), "NanoCpus",
                       json_integer(l->cpu_millis * 1000000), "PidsLimit", json_integer(l->pids),
                       NULL);
}

static json_t *labels_json(const sbx_docker_spec *c)
{
    const sbx_spec *sp = c->spec;
    char created[40], expires[40] = "";
    tk_time_rfc3339(c->created_ms, created, sizeof created);
    if (sp->expires_ms > 0)
        tk_time_rfc3339(sp->expires_ms, expires, sizeof expires);
    json_t *l = tk_json_obj(
        SBX_DOCKER_SPEC_LABEL_SERVICE, json_string(c->service_tag), SBX_DOCKER_SPEC_LABEL_ID,
        json_string(sp->id), SBX_DOCKER_SPEC_LABEL_ROLE,
        json_string(sp->pooled ? "pool" : "sandbox"), SBX_DOCKER_SPEC_LABEL_CREATED,
        json_string(created), SBX_DOCKER_SPEC_LABEL_EXPIRES, json_string(expires), NULL);
    if (json_is_object(sp->metadata)) {
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)sp->metadata, k, v)
        {
            if (!json_is_string(v))
                continue;
            char key[512];
            snprintf(key, sizeof key, "%s%s", SBX_DOCKER_SPEC_LABEL_META, k);
            json_object_set_new(l, key, json_string(json_string_value(v)));
        }
    }
    return l;
}

json_t *sbx_docker_spec_container(const sbx_docker_spec *c)
{
    const sbx_spec *sp = c->spec;
    char tmpfs_tmp[96], tmpfs_run[96], uid[32];
    snprintf(tmpfs_tmp, sizeof tmpfs_tmp, "rw,nosuid,nodev,size=%lld,mode=1777",
             (long long)c->tmp_bytes);
    snprintf(tmpfs_run, sizeof tmpfs_run, "rw,nosuid,nodev,noexec,size=%d,mode=0755", 1 << 20);
    snprintf(uid, sizeof uid, "%d:%d", SBX_DOCKER_SPEC_UID, SBX_DOCKER_SPEC_UID);
    char *seccomp = tk_asprintf("seccomp=%s", c->seccomp_json);

    json_t *mounts = json_array();
    json_array_append_new(mounts, tk_json_obj("Type", json_string("volume"), "Source",
                                              json_string(c->volume), "Target",
                                              json_string("/workspace"), "VolumeOptions",
                                              tk_json_obj("NoCopy", json_true(), NULL), NULL));
    json_array_append_new(mounts, tk_json_obj("Type", json_string("bind"), "Source",
                                              json_string(c->execd_path), "Target",
                                              json_string(SBX_DOCKER_SPEC_EXECD), "ReadOnly",
                                              json_true(), NULL));
    json_array_append_new(mounts, tk_json_obj("Type", json_string("bind"), "Source",
                                              json_string(c->run_dir), "Target",
                                              json_string(SBX_DOCKER_SPEC_RUN), NULL));
    /* the request's volumes (sandboxd/volume.h): host paths as non-recursive
     * binds, named volumes as Docker volumes of their owner */
    for (size_t i = 0; sp->volumes && i < sp->volumes->n; i++) {
        const sbx_volume *v = &sp->volumes->v[i];
        json_t *m;
        if (v->named && !v->host[0]) {
            char name[160];
            sbx_volume_docker_name(sp->volumes->owner, v->claim, name, sizeof name);
            json_t *vo = tk_json_obj("NoCopy", json_true(), NULL);
            if (v->sub[0])
                json_object_set_new(vo, "Subpath", json_string(v->sub));
            m = tk_json_obj("Type", json_string("volume"), "Source", json_string(name),
                            "VolumeOptions", vo, NULL);
        } else { /* a host folder, or a named volume's subPath on an engine before API 1.45 */
            m = tk_json_obj("Type", json_string("bind"), "Source", json_string(v->host),
                            "BindOptions", tk_json_obj("NonRecursive", json_true(), NULL), NULL);
        }
        json_object_set_new(m, "Target", json_string(v->target));
        json_object_set_new(m, "ReadOnly", json_boolean(v->ro));
        json_array_append_new(mounts, m);
    }
    json_t *ulimits = json_array();
    json_array_append_new(ulimits, tk_json_obj("Name", json_string("core"), "Soft", json_integer(0),
                                               "Hard", json_integer(0), NULL));
    json_array_append_new(ulimits,
                          tk_json_obj("Name", json_string("nofile"), "Soft", json_integer(8192),
                                      "Hard", json_integer(8192), NULL));
    json_array_append_new(ulimits,
                          tk_json_obj("Name", json_string("memlock"), "Soft", json_integer(65536),
                                      "Hard", json_integer(65536), NULL));
    json_t *sec = json_array();
    json_array_append_new(sec, json_string("no-new-privileges"));
    json_array_append_new(sec, json_string(seccomp));
    free(seccomp);

    json_t *hc = sbx_docker_spec_limits(&sp->limits);
    json_object_set_new(hc, "NetworkMode", json_string("none"));
    json_object_set_new(hc, "ReadonlyRootfs", json_true());
    json_object_set_new(hc, "CapDrop", str_array((const char *const[]){"ALL"}, 1));
    json_object_set_new(hc, "SecurityOpt", sec);
    json_object_set_new(hc, "Privileged", json_false());
    json_object_set_new(hc, "IpcMode", json_string("private"));
    json_object_set_new(hc, "CgroupnsMode", json_string("private"));
    json_object_set_new(hc, "Mounts", mounts);
    json_object_set_new(
        hc, "Tmpfs",
        tk_json_obj("/tmp", json_string(tmpfs_tmp), "/run", json_string(tmpfs_run), NULL));
    json_object_set_new(hc, "MaskedPaths", str_array(masked_paths, TK_ARRAY_LEN(masked_paths)));
    json_object_set_new(hc, "ReadonlyPaths",
                        str_array(readonly_paths, TK_ARRAY_LEN(readonly_paths)));
    json_object_set_new(hc, "Ulimits", ulimits);
    json_object_set_new(hc, "Init", json_false());
    json_object_set_new(hc, "AutoRemove", json_false());
    json_object_set_new(hc, "RestartPolicy", tk_json_obj("Name", json_string("no"), NULL));
    json_object_set_new(
        hc, "LogConfig",
        tk_json_obj("Type", json_string("json-file"), "Config",
                    tk_json_obj("max-size", json_string("1m"), "max-file", json_string("1"), NULL),
                    NULL));

    json_t *env = str_array(base_env, TK_ARRAY_LEN(base_env));
    for (size_t i = 0; c->egress && sbx_egress_env[i]; i++)
        json_array_append_new(env, json_string(sbx_egress_env[i]));
    json_t *entry = json_array();
    json_array_append_new(entry, json_string("/bin/sh"));
    json_array_append_new(entry, json_string("-c"));
    json_array_append_new(entry, json_string(sbx_docker_spec_init_script));
    json_array_append_new(entry, json_string("tusko-init"));
    return tk_json_obj("Image", json_string(c->image), "Entrypoint", entry, "Cmd", json_array(),
                       "Env", env, "User", json_string(uid), "WorkingDir",
                       json_string("/workspace"), "Hostname", json_string("sandbox"), "Labels",
                       labels_json(c), "AttachStdin", json_false(), "AttachStdout", json_false(),
                       "AttachStderr", json_false(), "OpenStdin", json_false(), "Tty", json_false(),
                       "NetworkDisabled", json_true(), "StopSignal", json_string("SIGKILL"),
                       "HostConfig", hc, NULL);
}

json_t *sbx_docker_spec_volume(const char *name, const char *service_tag, const char *id,
                               int64_t bytes)
{
    char o[128];
    snprintf(o, sizeof o, "size=%lld,uid=%d,gid=%d,mode=0755,nosuid,nodev", (long long)bytes,
             SBX_DOCKER_SPEC_UID, SBX_DOCKER_SPEC_UID);
    return tk_json_obj("Name", json_string(name), "Driver", json_string("local"), "DriverOpts",
                       tk_json_obj("type", json_string("tmpfs"), "device", json_string("tmpfs"),
                                   "o", json_string(o), NULL),
                       "Labels",
                       tk_json_obj(SBX_DOCKER_SPEC_LABEL_SERVICE, json_string(service_tag),
                                   SBX_DOCKER_SPEC_LABEL_ID, json_string(id), NULL),
                       NULL);
}

static json_t *rule(const char *const *names, size_t n, int errno_ret, json_t *args)
{
    return tk_json_obj("names", str_array(names, n), "action", json_string("SCMP_ACT_ERRNO"),
                       "errnoRet", json_integer(errno_ret), "args", args ? args : json_array(),
                       NULL);
}

json_t *sbx_docker_spec_seccomp(char *err, size_t errlen)
{
    json_t *arches = json_array();
#if defined(__x86_64__)
    json_array_append_new(arches, json_string("SCMP_ARCH_X86_64"));
    json_array_append_new(arches, json_string("SCMP_ARCH_X86"));
    json_array_append_new(arches, json_string("SCMP_ARCH_X32"));
#elif defined(__aarch64__)
    json_array_append_new(arches, json_string("SCMP_ARCH_AARCH64"));
    json_array_append_new(arches, json_string("SCMP_ARCH_ARM"));
#else
    json_decref(arches);
    snprintf(err, errlen, "seccomp: the docker runtime supports x86_64 and aarch64 only");
    return NULL;
#endif
    (void)err;
    (void)errlen;
    size_t n = 0;
    while (sbx_seccomp_denied[n])
        n++;
    json_t *rules = json_array();
    json_array_append_new(rules, rule((const char *const *)sbx_seccomp_denied, n, 1, NULL));
    /* clone with any namespace flag; one rule per flag (a rule's args are ANDed) */
    static const uint64_t ns_flags[] = {CLONE_NEWNS,     CLONE_NEWUTS, CLONE_NEWIPC,
                                        CLONE_NEWUSER,   CLONE_NEWPID, CLONE_NEWNET,
                                        CLONE_NEWCGROUP, 0x00000080ULL /* CLONE_NEWTIME */};
    for (size_t i = 0; i < TK_ARRAY_LEN(ns_flags); i++) {
        json_t *args = json_array();
        json_array_append_new(args, tk_json_obj("index", json_integer(0), "value",
                                                json_integer((json_int_t)ns_flags[i]), "valueTwo",
                                                json_integer((json_int_t)ns_flags[i]), "op",
                                                json_string("SCMP_CMP_MASKED_EQ"), NULL));
        json_array_append_new(rules, rule((const char *const[]){"clone"}, 1, 1, args));
    }
    json_array_append_new(rules, rule((const char *const[]){"clone3"}, 1, 38 /* ENOSYS */, NULL));
    json_t *pk = json_array();
    json_array_append_new(pk,
                          tk_json_obj("index", json_integer(0), "value", json_integer(AF_PACKET),
                                      "op", json_string("SCMP_CMP_EQ"), NULL));
    json_array_append_new(rules, rule((const char *const[]){"socket"}, 1, 1, pk));
    return tk_json_obj("defaultAction", json_string("SCMP_ACT_ALLOW"), "architectures", arches,
                       "syscalls", rules, NULL);
}

static void quoted(tk_buf *b, const char *v)
{
    tk_buf_append(b, "'", 1);
    for (const char *p = v; *p; p++) {
        if (*p == '\'')
            tk_buf_append(b, "'\\''", 4);
        else
            tk_buf_append(b, p, 1);
    }
    tk_buf_append(b, "'", 1);
}

static void export_line(tk_buf *b, const char *name, size_t nlen, const char *value)
{
    tk_buf_printf(b, "export %.*s=", (int)nlen, name);
    quoted(b, value);
    tk_buf_append(b, "\n", 1);
}

char *sbx_docker_spec_env_file(const char *token, const char *const *env, const char *const *argv)
{
    tk_buf b;
    tk_buf_init(&b, TK_CAP_BATCH);
    export_line(&b, "EXECD_LISTEN", 12, "unix:" SBX_DOCKER_SPEC_RUN "/" SBX_DOCKER_SPEC_SOCK);
    export_line(&b, "EXECD_WORKSPACE", 15, "/workspace");
    export_line(&b, "EXECD_ACCESS_TOKEN", 18, token);
    for (size_t i = 0; env && env[i]; i++) {
        const char *eq = strchr(env[i], '=');
        if (!eq || eq == env[i] || (size_t)(eq - env[i]) > 255)
            continue;
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(eq - env[i]), env[i]);
        if (!sbx_env_name_valid(name) || strncmp(name, "EXECD_", 6) == 0)
            continue;
        export_line(&b, name, strlen(name), eq + 1);
    }
    if (argv && argv[0]) {
        tk_buf_append(&b, "set --", 6);
        for (size_t i = 0; argv[i]; i++) {
            tk_buf_append(&b, " ", 1);
            quoted(&b, argv[i]);
        }
        tk_buf_append(&b, "\n", 1);
    }
    char *s = tk_strdup(tk_buf_cstr(&b));
    tk_buf_free(&b);
    return s;
}

int sbx_docker_spec_id_ok(const char *id)
{
    size_t n = strlen(id);
    if (n == 0 || n >= SBX_ID_MAX)
        return 0;
    for (const char *p = id; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f') || *p == '-'))
            return 0;
    return 1;
}
