/* The docker runtime's parts that need no engine: what it asks the engine for
 * (container, volume, limits, seccomp profile, exec, env file — the env file is
 * sourced by a real /bin/sh), DOCKER_HOST parsing and query encoding; and the
 * client and the runtime's start-up against a fake engine on a unix socket
 * (errors when there is none, an old API, a missing image, and the image import
 * streaming a tar of the root filesystem). */
#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "lib/httpd.h"
#include "lib/json.h"
#include "sandboxd/docker.h"
#include "sandboxd/runtime.h"
#include "sandboxd/docker_spec.h"
#include "sandboxd/seccomp.h"
#include "tk_test.h"

static const sbx_limits LIM = {.memory_bytes = 256 << 20, .cpu_millis = 500, .pids = 64};

static json_t *container(int pooled, json_t *meta)
{
    static sbx_spec sp;
    memset(&sp, 0, sizeof sp);
    sp.id = "0a1b2c3d-0000-4000-8000-000000000001";
    sp.execd_token = "tok";
    sp.limits = LIM;
    sp.pooled = pooled;
    sp.metadata = meta;
    sp.expires_ms = pooled ? 0 : 1796107329000LL;
    sbx_docker_spec c = {.image = "tusko-sandbox:abc",
                         .service_tag = "c0ffee00",
                         .execd_path = "/build/tusko-execd",
                         .run_dir = "/state/sandboxes/x/run",
                         .volume = "tusko-ws-x",
                         .tmp_bytes = 32 << 20,
                         .seccomp_json = "{\"defaultAction\":\"SCMP_ACT_ALLOW\"}",
                         .created_ms = 1796107000000LL,
                         .spec = &sp};
    return sbx_docker_spec_container(&c);
}

static int has_string(const json_t *arr, const char *s)
{
    size_t i;
    json_t *v;
    json_array_foreach(arr, i,
                       v) if (json_is_string(v) && strcmp(json_string_value(v), s) == 0) return 1;
    return 0;
}

TEST(container_isolation_settings)
{
    json_t *j = container(0, NULL);
    json_t *hc = json_object_get(j, "HostConfig");
    CHECK_STR(tk_json_str(hc, "NetworkMode"), "none");
    CHECK(json_is_true(json_object_get(hc, "ReadonlyRootfs")));
    CHECK(json_is_false(json_object_get(hc, "Privileged")));
    CHECK(json_array_size(json_object_get(hc, "CapDrop")) == 1);
    CHECK(has_string(json_object_get(hc, "CapDrop"), "ALL"));
    CHECK(json_object_get(hc, "CapAdd") == NULL);
    json_t *so = json_object_get(hc, "SecurityOpt");
    CHECK(has_string(so, "no-new-privileges"));
    CHECK(has_string(so, "seccomp={\"defaultAction\":\"SCMP_ACT_ALLOW\"}"));
    CHECK_STR(tk_json_str(hc, "IpcMode"), "private");
    CHECK_STR(tk_json_str(hc, "CgroupnsMode"), "private");
    CHECK(has_string(json_object_get(hc, "MaskedPaths"), "/sys"));
    CHECK(has_string(json_object_get(hc, "MaskedPaths"), "/proc/kcore"));
    CHECK(has_string(json_object_get(hc, "ReadonlyPaths"), "/proc/sys"));
    CHECK_STR(tk_json_str(json_object_get(hc, "RestartPolicy"), "Name"), "no");
    /* a bounded log */
    CHECK_STR(tk_json_str(json_object_get(json_object_get(hc, "LogConfig"), "Config"), "max-size"),
              "1m");
    /* the sandbox user, the init script, no network */
    CHECK_STR(tk_json_str(j, "User"), "1000:1000");
    CHECK_STR(tk_json_str(j, "Hostname"), "sandbox");
    json_t *ep = json_object_get(j, "Entrypoint");
    CHECK_STR(json_string_value(json_array_get(ep, 0)), "/bin/sh");
    CHECK_STR(json_string_value(json_array_get(ep, 2)), sbx_docker_spec_init_script);
    CHECK(strstr(sbx_docker_spec_init_script, "exec /opt/tusko/bin/tusko-execd") != NULL);
    /* the token is never in the container's configuration (it is in run/env) */
    char *all = tk_json_dumps(j);
    CHECK(strstr(all, "EXECD_ACCESS_TOKEN=") == NULL);
    CHECK(strstr(all, "\"tok\"") == NULL);
    free(all);
    json_decref(j);
}

TEST(container_limits_mounts_tmpfs)
{
    json_t *j = container(0, NULL);
    json_t *hc = json_object_get(j, "HostConfig");
    CHECK_INT(tk_json_int_or(hc, "Memory", 0), ==, 256 << 20);
    CHECK_INT(tk_json_int_or(hc, "MemorySwap", 0), ==, 256 << 20);
    CHECK_INT(tk_json_int_or(hc, "NanoCpus", 0), ==, 500000000);
    CHECK_INT(tk_json_int_or(hc, "PidsLimit", 0), ==, 64);
    json_t *m = json_object_get(hc, "Mounts");
    CHECK(json_array_size(m) == 3);
    json_t *ws = json_array_get(m, 0), *ex = json_array_get(m, 1), *run = json_array_get(m, 2);
    CHECK_STR(tk_json_str(ws, "Type"), "volume");
    CHECK_STR(tk_json_str(ws, "Source"), "tusko-ws-x");
    CHECK_STR(tk_json_str(ws, "Target"), "/workspace");
    CHECK_STR(tk_json_str(ex, "Type"), "bind");
    CHECK_STR(tk_json_str(ex, "Source"), "/build/tusko-execd");
    CHECK_STR(tk_json_str(ex, "Target"), "/opt/tusko/bin/tusko-execd");
    CHECK(json_is_true(json_object_get(ex, "ReadOnly")));
    CHECK_STR(tk_json_str(run, "Source"), "/state/sandboxes/x/run");
    CHECK_STR(tk_json_str(run, "Target"), "/run/tusko");
    json_t *t = json_object_get(hc, "Tmpfs");
    CHECK(strstr(tk_json_str(t, "/tmp"), "size=33554432") != NULL);
    CHECK(strstr(tk_json_str(t, "/tmp"), "mode=1777") != NULL);
    CHECK(tk_json_str(t, "/run") != NULL);
    /* rlimits as the native runtime sets them */
    json_t *ul = json_object_get(hc, "Ulimits");
    CHECK(json_array_size(ul) == 3);
    CHECK_STR(tk_json_str(json_array_get(ul, 0), "Name"), "core");
    CHECK_INT(tk_json_int_or(json_array_get(ul, 0), "Hard", -1), ==, 0);
    json_decref(j);
    /* the limits of an update: 1 core, no swap */
    sbx_limits one = {.memory_bytes = 1 << 30, .cpu_millis = 1000, .pids = 512};
    json_t *u = sbx_docker_spec_limits(&one);
    CHECK_INT(tk_json_int_or(u, "NanoCpus", 0), ==, 1000000000);
    CHECK_INT(tk_json_int_or(u, "MemorySwap", 0), ==, 1 << 30);
    CHECK(json_object_size(u) == 4);
    json_decref(u);
}

TEST(container_labels)
{
    json_t *meta =
        tk_json_obj("owner", json_string("u1"), "tusko.io/session", json_string("s-9"), NULL);
    json_t *j = container(0, meta);
    json_t *l = json_object_get(j, "Labels");
    CHECK_STR(tk_json_str(l, SBX_DOCKER_SPEC_LABEL_SERVICE), "c0ffee00");
    CHECK_STR(tk_json_str(l, SBX_DOCKER_SPEC_LABEL_ID), "0a1b2c3d-0000-4000-8000-000000000001");
    CHECK_STR(tk_json_str(l, SBX_DOCKER_SPEC_LABEL_ROLE), "sandbox");
    CHECK_STR(tk_json_str(l, SBX_DOCKER_SPEC_LABEL_EXPIRES), "2026-12-01T06:42:09.000Z");
    CHECK_STR(tk_json_str(l, SBX_DOCKER_SPEC_LABEL_CREATED), "2026-12-01T06:36:40.000Z");
    CHECK_STR(tk_json_str(l, "io.tusko.meta.owner"), "u1");
    CHECK_STR(tk_json_str(l, "io.tusko.meta.tusko.io/session"), "s-9");
    json_decref(j);
    j = container(1, NULL);
    l = json_object_get(j, "Labels");
    CHECK_STR(tk_json_str(l, SBX_DOCKER_SPEC_LABEL_ROLE), "pool");
    CHECK_STR(tk_json_str(l, SBX_DOCKER_SPEC_LABEL_EXPIRES), "");
    json_decref(j);
    json_decref(meta);
}

TEST(volume_is_a_sized_tmpfs_of_the_sandbox_user)
{
    json_t *v = sbx_docker_spec_volume("tusko-ws-x", "c0ffee00", "x", 64 << 20);
    CHECK_STR(tk_json_str(v, "Name"), "tusko-ws-x");
    CHECK_STR(tk_json_str(v, "Driver"), "local");
    json_t *o = json_object_get(v, "DriverOpts");
    CHECK_STR(tk_json_str(o, "type"), "tmpfs");
    CHECK(strstr(tk_json_str(o, "o"), "size=67108864") != NULL);
    CHECK(strstr(tk_json_str(o, "o"), "uid=1000,gid=1000") != NULL);
    CHECK_STR(tk_json_str(json_object_get(v, "Labels"), SBX_DOCKER_SPEC_LABEL_ID), "x");
    json_decref(v);
}

TEST(seccomp_profile_matches_the_native_deny_list)
{
    char err[256];
    json_t *p = sbx_docker_spec_seccomp(err, sizeof err);
    CHECK(p != NULL);
    CHECK_STR(tk_json_str(p, "defaultAction"), "SCMP_ACT_ALLOW");
    json_t *arch = json_object_get(p, "architectures");
#if defined(__x86_64__)
    CHECK(has_string(arch, "SCMP_ARCH_X86_64"));
    CHECK(has_string(arch, "SCMP_ARCH_X86")); /* compat ABIs get the same rules */
#endif
    json_t *rules = json_object_get(p, "syscalls");
    json_t *deny = json_array_get(rules, 0);
    for (size_t i = 0; sbx_seccomp_denied[i]; i++)
        CHECK(has_string(json_object_get(deny, "names"), sbx_seccomp_denied[i]));
    CHECK_STR(tk_json_str(deny, "action"), "SCMP_ACT_ERRNO");
    CHECK_INT(tk_json_int_or(deny, "errnoRet", 0), ==, 1);
    int clones = 0, clone3 = 0, packet = 0;
    size_t i;
    json_t *r;
    json_array_foreach(rules, i, r)
    {
        json_t *names = json_object_get(r, "names");
        json_t *a0 = json_array_get(json_object_get(r, "args"), 0);
        if (has_string(names, "clone")) {
            CHECK_STR(tk_json_str(a0, "op"), "SCMP_CMP_MASKED_EQ");
            CHECK(tk_json_int_or(a0, "value", 0) == tk_json_int_or(a0, "valueTwo", 1));
            clones++;
        }
        if (has_string(names, "clone3")) {
            CHECK_INT(tk_json_int_or(r, "errnoRet", 0), ==, 38);
            clone3++;
        }
        if (has_string(names, "socket")) {
            CHECK_INT(tk_json_int_or(a0, "value", 0), ==, 17 /* AF_PACKET */);
            packet++;
        }
    }
    CHECK_INT(clones, ==, 8);
    CHECK_INT(clone3, ==, 1);
    CHECK_INT(packet, ==, 1);
    /* "ptrace" is refused (Docker's own default profile allows it) */
    CHECK(has_string(json_object_get(deny, "names"), "ptrace"));
    json_decref(p);
}

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
    (void)sb;
    (void)flag;
    (void)f;
    return remove(p);
}

/* Sources the env file in a real /bin/sh and returns what it prints. */
static void source_env(const char *file, const char *print, char *out, size_t outlen)
{
    int pfd[2];
    CHECK(pipe(pfd) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(pfd[1], 1);
        char script[512];
        snprintf(script, sizeof script, ". %s; %s", file, print);
        char *argv[] = {"sh", "-c", script, NULL};
        char *envp[] = {"PATH=/usr/bin:/bin", NULL};
        execve("/bin/sh", argv, envp);
        _exit(127);
    }
    close(pfd[1]);
    size_t n = 0;
    ssize_t r;
    while (n + 1 < outlen && (r = read(pfd[0], out + n, outlen - 1 - n)) > 0)
        n += (size_t)r;
    out[n] = '\0';
    close(pfd[0]);
    int st;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

TEST(env_file_quotes_every_value_for_the_shell)
{
    const char *env[] = {"PLAIN=hello",
                         "QUOTE=it's \"quoted\"",
                         "SUBST=$(touch /tmp/sbx-docker-pwned) `id` ${HOME} \\n",
                         "NL=line1\nline2",
                         "EMPTY=",
                         "EXECD_ACCESS_TOKEN=stolen", /* a request cannot set execd's */
                         "BAD-NAME=x",
                         "=novalue",
                         NULL};
    const char *argv[] = {"printf", "%s|", "it's", "$(x)", NULL};
    char *f = sbx_docker_spec_env_file("t0k3n", env, argv);
    CHECK(strstr(f, "BAD-NAME") == NULL);
    CHECK(strstr(f, "stolen") == NULL);
    char path[] = "/tmp/sbx-docker-env-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    CHECK(write(fd, f, strlen(f)) == (ssize_t)strlen(f));
    close(fd);
    free(f);
    unlink("/tmp/sbx-docker-pwned");
    char out[2048];
    source_env(
        path,
        "printf '%s|' \"$EXECD_LISTEN\" \"$EXECD_WORKSPACE\" \"$EXECD_ACCESS_TOKEN\" "
        "\"$PLAIN\" \"$QUOTE\" \"$SUBST\" \"$NL\" \"${EMPTY-unset}\"; env | grep -c '^PLAIN='; "
        "\"$@\"",
        out, sizeof out);
    unlink(path);
    CHECK_STR(out, "unix:/run/tusko/execd.sock|/workspace|t0k3n|hello|it's \"quoted\"|"
                   "$(touch /tmp/sbx-docker-pwned) `id` ${HOME} \\n|line1\nline2||1\nit's|$(x)|");
    CHECK(access("/tmp/sbx-docker-pwned", F_OK) != 0);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return NULL;
    char buf[4096];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return tk_strdup(buf);
}

static int wait_file(const char *path)
{
    for (int i = 0; i < 5000; i++) {
        struct stat sb;
        if (stat(path, &sb) == 0 && sb.st_size > 0)
            return 1;
        usleep(1000);
    }
    return 0;
}

/* The container's init script under a real /bin/sh, in a folder standing in
 * for /run/tusko and with a stub for execd: a pool member waits for the claim,
 * execd gets its settings and the request's env, and the entrypoint starts only
 * when run/entry says so, without execd's settings. */
TEST(init_script_claim_then_entrypoint)
{
    char d[] = "/tmp/sbx-docker-init-XXXXXX";
    CHECK(mkdtemp(d) != NULL);
    char p[256];
    snprintf(p, sizeof p, "%s/claim", d);
    CHECK(mkfifo(p, 0600) == 0);
    snprintf(p, sizeof p, "%s/entry", d);
    CHECK(mkfifo(p, 0600) == 0);
    char out[200], execd_out[200], stub[200];
    snprintf(out, sizeof out, "%s/out", d);
    snprintf(execd_out, sizeof execd_out, "%s/execd.out", d);
    snprintf(stub, sizeof stub, "%s/execd.sh", d);
    FILE *f = fopen(stub, "we");
    CHECK(f != NULL);
    fprintf(f, "#!/bin/sh\necho \"execd:$EXECD_ACCESS_TOKEN:$A:$#\" > %s\nexec sleep 20\n",
            execd_out);
    fclose(f);
    chmod(stub, 0755);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "echo \"entry:$A:${EXECD_ACCESS_TOKEN-none}:$1\" > %s", out);
    const char *env[] = {"A=1", NULL};
    const char *argv[] = {"sh", "-c", cmd, "x", "it's", NULL};
    char *ef = sbx_docker_spec_env_file("tok", env, argv);
    snprintf(p, sizeof p, "%s/env", d);
    f = fopen(p, "we");
    CHECK(f != NULL);
    fputs(ef, f);
    fclose(f);
    free(ef);
    /* the script, pointed at the stand-ins */
    tk_buf b;
    tk_buf_init(&b, 8192);
    const char *sc = sbx_docker_spec_init_script;
    const char *run = strstr(sc, "d=" SBX_DOCKER_SPEC_RUN),
               *ex = strstr(sc, "exec " SBX_DOCKER_SPEC_EXECD);
    CHECK(run && ex && run < ex);
    tk_buf_append(&b, sc, (size_t)(run - sc));
    tk_buf_printf(&b, "d=%s", d);
    const char *after_run = run + strlen("d=" SBX_DOCKER_SPEC_RUN);
    tk_buf_append(&b, after_run, (size_t)(ex - after_run));
    tk_buf_printf(&b, "exec %s\n", stub);
    pid_t pid = fork();
    if (pid == 0) {
        setpgid(0, 0);
        char *av[] = {"sh", "-c", (char *)tk_buf_cstr(&b), "tusko-init", NULL};
        char *ev[] = {"PATH=/usr/bin:/bin", NULL};
        execve("/bin/sh", av, ev);
        _exit(127);
    }
    tk_buf_free(&b);
    /* nothing runs before the claim */
    usleep(50 * 1000);
    CHECK(access(execd_out, F_OK) != 0);
    snprintf(p, sizeof p, "%s/claim", d);
    int fd = open(p, O_WRONLY);
    CHECK(fd >= 0 && write(fd, "go\n", 3) == 3);
    close(fd);
    CHECK(wait_file(execd_out));
    char *e = slurp(execd_out);
    CHECK_STR(e, "execd:tok:1:0\n");
    free(e);
    /* execd runs; the entrypoint waits for its word */
    CHECK(access(out, F_OK) != 0);
    snprintf(p, sizeof p, "%s/entry", d);
    fd = open(p, O_WRONLY | O_NONBLOCK);
    CHECK(fd >= 0); /* its child holds the FIFO open already */
    CHECK(write(fd, "go\n", 3) == 3);
    close(fd);
    CHECK(wait_file(out));
    e = slurp(out);
    CHECK_STR(e, "entry:1:none:it's\n");
    free(e);
    kill(-pid, SIGKILL);
    int st;
    waitpid(pid, &st, 0);
    nftw(d, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

TEST(sandbox_ids_from_labels_are_checked)
{
    CHECK(sbx_docker_spec_id_ok("0a1b2c3d-0000-4000-8000-000000000001"));
    CHECK(!sbx_docker_spec_id_ok(""));
    CHECK(!sbx_docker_spec_id_ok("../../etc"));
    CHECK(!sbx_docker_spec_id_ok("0A1B"));
    CHECK(!sbx_docker_spec_id_ok("a/b"));
}

TEST(docker_host_parsing)
{
    char err[512];
    sbx_docker *d = sbx_docker_new(NULL, err, sizeof err);
    CHECK(d != NULL);
    CHECK_STR(sbx_docker_socket(d), "/var/run/docker.sock");
    sbx_docker_free(d);
    d = sbx_docker_new("", err, sizeof err);
    CHECK_STR(sbx_docker_socket(d), "/var/run/docker.sock");
    sbx_docker_free(d);
    d = sbx_docker_new("unix:///run/x/docker.sock", err, sizeof err);
    CHECK_STR(sbx_docker_socket(d), "/run/x/docker.sock");
    CHECK_STR(sbx_docker_host(d), "unix:///run/x/docker.sock");
    sbx_docker_free(d);
    d = sbx_docker_new("unix:/a.sock", err, sizeof err);
    CHECK_STR(sbx_docker_socket(d), "/a.sock");
    sbx_docker_free(d);
    d = sbx_docker_new("/b.sock", err, sizeof err);
    CHECK_STR(sbx_docker_socket(d), "/b.sock");
    sbx_docker_free(d);
    CHECK(sbx_docker_new("tcp://10.0.0.1:2375", err, sizeof err) == NULL);
    CHECK(strstr(err, "only a local engine's unix socket") != NULL);
    CHECK(sbx_docker_new("unix://relative.sock", err, sizeof err) == NULL);
    CHECK(strstr(err, "absolute") != NULL);
    char longp[300];
    memset(longp, 'x', sizeof longp - 1);
    longp[0] = '/';
    longp[sizeof longp - 1] = '\0';
    CHECK(sbx_docker_new(longp, err, sizeof err) == NULL);
    CHECK(strstr(err, "too long") != NULL);
}

TEST(query_encoding)
{
    const char *labels[] = {"io.tusko.sandboxd=c0ffee00", "io.tusko.sandbox.id=x"};
    char *f = sbx_docker_label_filter(labels, 2);
    CHECK_STR(f, "%7B%22label%22%3A%5B%22io.tusko.sandboxd%3Dc0ffee00%22%2C%22io.tusko.sandbox.id%"
                 "3Dx%22%5D%7D");
    free(f);
}

/* ---------- a fake engine ---------- */

static tk_httpd *fake;
static char fake_sock[108];
static const char *fake_api = "1.41";
static int fake_has_image;
static int fake_import_error;
static size_t fake_tar_bytes;
static int fake_tar_ustar;
static char fake_import_query[1024];

static void h_version(tk_req *r, void *ud)
{
    (void)ud;
    tk_respond_json(
        r, 200,
        tk_json_obj("Version", json_string("20.10.99"), "ApiVersion", json_string(fake_api), NULL));
}

static void h_image(tk_req *r, void *ud)
{
    (void)ud;
    const char *name = tk_req_param(r, "name");
    if (fake_has_image && strcmp(name, "tusko-sandbox:f00dfeed1234") == 0)
        tk_respond_json(r, 200, tk_json_obj("Id", json_string("sha256:0123456789abcdef"), NULL));
    else
        tk_respond_json(r, 404, tk_json_obj("message", json_string("No such image"), NULL));
}

static void h_import(tk_req *r, void *ud)
{
    (void)ud;
    size_t len;
    const char *b = tk_req_body(r, &len);
    fake_tar_bytes = len;
    fake_tar_ustar = len > 262 && memcmp(b + 257, "ustar", 5) == 0;
    snprintf(fake_import_query, sizeof fake_import_query, "%s", tk_req_query_string(r));
    const char *ok = "{\"status\":\"sha256:0123\"}\n";
    const char *bad = "{\"status\":\"x\"}\n{\"errorDetail\":{\"message\":\"disk full\"},"
                      "\"error\":\"disk full\"}\n";
    if (!fake_import_error)
        fake_has_image = 1;
    tk_respond(r, 200, "application/json", fake_import_error ? bad : ok,
               strlen(fake_import_error ? bad : ok));
}

static void h_text(tk_req *r, void *ud)
{
    (void)ud;
    tk_respond(r, 404, "text/plain", "page not found\n", 15);
}

static tk_route fake_routes[] = {
    {"GET", "/version", h_version, NULL, TK_ROUTE_PUBLIC},
    {"GET", "/images/{name}/json", h_image, NULL, TK_ROUTE_PUBLIC},
    {"POST", "/images/create", h_import, NULL, TK_ROUTE_PUBLIC, 64 << 20},
    {"GET", "/text", h_text, NULL, TK_ROUTE_PUBLIC},
};

static void fake_start(void)
{
    snprintf(fake_sock, sizeof fake_sock, "/tmp/sbx-fake-docker-%d.sock", (int)getpid());
    unlink(fake_sock);
    char listen[128], err[256];
    snprintf(listen, sizeof listen, "unix:%s", fake_sock);
    tk_httpd_config c = {.listen = listen, .name = "fake-docker", .max_body = 64 << 20};
    fake = tk_httpd_start(&c, fake_routes, TK_ARRAY_LEN(fake_routes), err, sizeof err);
    CHECK(fake != NULL);
}

static void fake_stop(void)
{
    tk_httpd_stop(fake);
    unlink(fake_sock);
}

TEST(client_against_a_fake_engine)
{
    fake_start();
    char host[160], err[512], v[32], api[16];
    snprintf(host, sizeof host, "unix://%s", fake_sock);
    sbx_docker *d = sbx_docker_new(host, err, sizeof err);
    CHECK(sbx_docker_version(d, v, sizeof v, api, sizeof api, err, sizeof err) == TK_OK);
    CHECK_STR(v, "20.10.99");
    CHECK_STR(api, "1.41");
    long status;
    json_t *j;
    CHECK(sbx_docker_call(d, "GET", "/images/nope/json", NULL, 5000, &status, &j, err,
                          sizeof err) == TK_OK);
    CHECK_INT(status, ==, 404);
    CHECK_STR(sbx_docker_message(j, "?"), "No such image");
    json_decref(j);
    /* a plain-text answer becomes the message */
    CHECK(sbx_docker_call(d, "GET", "/text", NULL, 5000, &status, &j, err, sizeof err) == TK_OK);
    CHECK_STR(sbx_docker_message(j, "?"), "page not found");
    json_decref(j);
    CHECK_STR(sbx_docker_message(NULL, "fallback"), "fallback");
    sbx_docker_free(d);
    fake_stop();
}

TEST(client_says_when_no_engine_answers)
{
    char err[512];
    sbx_docker *d = sbx_docker_new("unix:///tmp/sbx-no-such-docker.sock", err, sizeof err);
    long status;
    json_t *j;
    CHECK(sbx_docker_call(d, "GET", "/version", NULL, 5000, &status, &j, err, sizeof err) ==
          TK_ERROR);
    CHECK(j == NULL);
    CHECK(strstr(err,
                 "no Docker engine answers at DOCKER_HOST=unix:///tmp/sbx-no-such-docker.sock") !=
          NULL);
    CHECK(strstr(err, "No such file or directory") != NULL);
    CHECK(strstr(err, "start dockerd") != NULL);
    sbx_docker_free(d);
}

/* A fake image folder as build.sh makes it (rootfs/ and image.json). */
static char img_dir[64];

static void make_image(void)
{
    snprintf(img_dir, sizeof img_dir, "/tmp/sbx-docker-img-XXXXXX");
    CHECK(mkdtemp(img_dir) != NULL);
    char p[256];
    static const char *const dirs[] = {
        "rootfs",      "rootfs/workspace", "rootfs/opt", "rootfs/opt/tusko", "rootfs/opt/tusko/bin",
        "rootfs/proc", "rootfs/dev",       "rootfs/tmp", "rootfs/run",       "rootfs/bin"};
    for (size_t i = 0; i < TK_ARRAY_LEN(dirs); i++) {
        snprintf(p, sizeof p, "%s/%s", img_dir, dirs[i]);
        CHECK(mkdir(p, 0755) == 0);
    }
    snprintf(p, sizeof p, "%s/rootfs/bin/sh", img_dir);
    int fd = open(p, O_WRONLY | O_CREAT, 0755);
    CHECK(fd >= 0 && write(fd, "#!x\n", 4) == 4);
    close(fd);
    snprintf(p, sizeof p, "%s/image.json", img_dir);
    fd = open(p, O_WRONLY | O_CREAT, 0644);
    const char *j = "{\"name\":\"tusko-sandbox\",\"hash\":\"f00dfeed1234\"}";
    CHECK(fd >= 0 && write(fd, j, strlen(j)) == (ssize_t)strlen(j));
    close(fd);
}

/* Opens the docker runtime at host: its settings are its own (DOCKER_HOST),
 * read from the environment as the program reads them. */
static sbx_runtime *open_docker(const sbx_runtime_config *cfg, const char *host, char *err,
                                size_t errlen)
{
    setenv("DOCKER_HOST", host, 1);
    if (sbx_runtime_settings_from_env(err, errlen) != TK_OK)
        return NULL;
    return sbx_runtime_open("docker", cfg, err, errlen);
}

static sbx_runtime *open_rt(const char *image_dir, char *err, size_t errlen)
{
    char host[160];
    snprintf(host, sizeof host, "unix://%s", fake_sock);
    sbx_runtime_config cfg = {.state_dir = "/tmp/sbx-docker-state",
                              .image_dir = image_dir,
                              .execd_path = "/bin/sh",
                              .workspace_bytes = 64 << 20,
                              .tmp_bytes = 32 << 20};
    return open_docker(&cfg, host, err, errlen);
}

TEST(runtime_open_errors_an_operator_can_act_on)
{
    if (geteuid() != 0) {
        printf("    (skipped: the docker runtime needs root)\n");
        return;
    }
    char err[1024];
    /* no engine at all */
    sbx_runtime_config cfg = {
        .state_dir = "/tmp/sbx-docker-state", .image_dir = "/nonexistent", .execd_path = "/bin/sh"};
    CHECK(open_docker(&cfg, "unix:///tmp/sbx-no-such-docker.sock", err, sizeof err) == NULL);
    CHECK(strstr(err, "no Docker engine answers") != NULL);
    CHECK(open_docker(&cfg, "tcp://127.0.0.1:2375", err, sizeof err) == NULL);
    CHECK(strstr(err, "unix socket") != NULL);
    fake_start();
    /* an engine too old */
    fake_api = "1.24";
    CHECK(open_rt("/nonexistent", err, sizeof err) == NULL);
    CHECK(strstr(err, "needs API 1.41") != NULL);
    fake_api = "1.41";
    /* no image in the engine and none to import */
    CHECK(open_rt("/nonexistent", err, sizeof err) == NULL);
    CHECK(strstr(err, "imports the sandbox image, but") != NULL);
    CHECK(strstr(err, "images/sandbox/build.sh") != NULL);
    /* the engine's import fails: its message is passed on */
    make_image();
    fake_has_image = 0;
    fake_import_error = 1;
    CHECK(open_rt(img_dir, err, sizeof err) == NULL);
    CHECK(strstr(err, "could not be imported into Docker as tusko-sandbox:f00dfeed1234") != NULL);
    CHECK(strstr(err, "disk full") != NULL);
    fake_stop();
    nftw(img_dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

TEST(runtime_imports_the_image_when_missing)
{
    if (geteuid() != 0) {
        printf("    (skipped: the docker runtime needs root)\n");
        return;
    }
    fake_start();
    make_image();
    fake_has_image = 0;
    fake_import_error = 0;
    char err[1024];
    sbx_runtime *rt = open_rt(img_dir, err, sizeof err);
    CHECK(rt != NULL);
    /* a tar of the rootfs was streamed, tagged by the recipe hash */
    CHECK(fake_tar_ustar);
    CHECK(fake_tar_bytes >= 10240);
    CHECK(strstr(fake_import_query, "fromSrc=-") != NULL);
    CHECK(strstr(fake_import_query, "repo=tusko-sandbox") != NULL);
    CHECK(strstr(fake_import_query, "tag=f00dfeed1234") != NULL);
    CHECK(strstr(fake_import_query, "changes=WORKDIR%20%2Fworkspace") != NULL);
    /* the whole query, to the letter */
    CHECK_STR(fake_import_query,
              "fromSrc=-&repo=tusko-sandbox&tag=f00dfeed1234&message=tusko-sandbox%20f00dfeed1234%"
              "20%28images%2Fsandbox%2Fbuild.sh%2C%20imported%20by%20tusko-sandboxd%29&changes="
              "ENV%20LANG%3DC.UTF-8&changes=ENV%20PATH%3D%2Fusr%2Flocal%2Fsbin%3A%2Fusr%2Flocal%"
              "2Fbin%3A%2Fusr%2Fsbin%3A%2Fusr%2Fbin%3A%2Fsbin%3A%2Fbin&changes=WORKDIR%20%"
              "2Fworkspace&changes=CMD%20%5B%22%2Fbin%2Fbash%22%5D");
    const char *d = rt->ops->describe(rt);
    CHECK(strstr(d, "image=tusko-sandbox:f00dfeed1234") != NULL);
    CHECK(strstr(d, "network=none") != NULL);
    rt->ops->free(rt);
    /* found the second time: no import */
    fake_tar_bytes = 0;
    rt = open_rt(img_dir, err, sizeof err);
    CHECK(rt != NULL);
    CHECK(fake_tar_bytes == 0);
    rt->ops->free(rt);
    /* a state folder too long for the sockets under it: they go to /run */
    char longstate[128];
    memset(longstate, 'a', sizeof longstate - 1);
    longstate[0] = '/';
    longstate[sizeof longstate - 1] = '\0';
    char host[160];
    snprintf(host, sizeof host, "unix://%s", fake_sock);
    sbx_runtime_config cfg = {
        .state_dir = longstate, .image_dir = img_dir, .execd_path = "/bin/sh"};
    rt = open_docker(&cfg, host, err, sizeof err);
    CHECK(rt != NULL);
    const char *sk = strstr(rt->ops->describe(rt), "sockets=/run/tusko-sandboxd.");
    CHECK(sk != NULL);
    char dir[64];
    snprintf(dir, sizeof dir, "%.28s", sk + 8);
    struct stat sb;
    CHECK(stat(dir, &sb) == 0 && (sb.st_mode & 0777) == 0700);
    rt->ops->free(rt);
    CHECK(stat(dir, &sb) != 0); /* removed with the runtime (it was empty) */
    fake_stop();
    nftw(img_dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

TEST_MAIN()
