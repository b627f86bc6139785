/* The native runtime's parts that need no root: the child's payloads, the
 * cgroup layer against fake hierarchies (v1 and v2), the seccomp program, the
 * image lookup, and sandbox records. */
#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>

#include "lib/json.h"
#include "sandboxd/cgroup.h"
#include "sandboxd/image.h"
#include "sandboxd/native_child.h"
#include "sandboxd/sandbox.h"
#include "sandboxd/seccomp.h"
#include "tk_test.h"

TEST(payload_round_trip)
{
    tk_buf b;
    tk_buf_init(&b, SBX_NATIVE_CHILD_MAX_MSG);
    const char *env[] = {"A=1", "B=two words", NULL};
    const char *argv[] = {"tail", "-f", "/dev/null", NULL};
    CHECK(sbx_native_child_payload(&b, 'G', env, argv) == TK_OK);
    CHECK(b.data[0] == 'G');
    char *e[8], *a[8];
    CHECK(sbx_native_child_payload_parse(b.data + 1, b.len - 1, e, a, 7) == TK_OK);
    CHECK_STR(e[0], "A=1");
    CHECK_STR(e[1], "B=two words");
    CHECK(e[2] == NULL);
    CHECK_STR(a[0], "tail");
    CHECK_STR(a[2], "/dev/null");
    CHECK(a[3] == NULL);
    /* truncated and oversized payloads are refused */
    CHECK(sbx_native_child_payload_parse(b.data + 1, b.len - 3, e, a, 7) == TK_EINVAL);
    CHECK(sbx_native_child_payload_parse(b.data + 1, 4, e, a, 7) == TK_EINVAL);
    CHECK(sbx_native_child_payload_parse(b.data + 1, b.len - 1, e, a, 1) == TK_ETOOBIG);
    tk_buf_reset(&b);
    CHECK(sbx_native_child_payload(&b, 'C', NULL, NULL) == TK_OK);
    CHECK(sbx_native_child_payload_parse(b.data + 1, b.len - 1, e, a, 7) == TK_OK);
    CHECK(e[0] == NULL && a[0] == NULL);
    /* a payload past the cap */
    tk_buf big;
    tk_buf_init(&big, 1 << 20);
    char *huge = malloc(70000);
    memset(huge, 'x', 69999);
    huge[69999] = '\0';
    const char *henv[] = {huge, NULL};
    CHECK(sbx_native_child_payload(&big, 'G', henv, NULL) == TK_ETOOBIG);
    free(huge);
    tk_buf_free(&big);
    tk_buf_free(&b);
}

static char root[128];

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(p);
}

/* Removes a test's scratch tree. */
static void rm_tree(const char *dir)
{
    nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void mkfake(const char *rel)
{
    char p[256];
    snprintf(p, sizeof p, "%s/%s", root, rel);
    mkdir(p, 0755);
}

static const char *rd(const char *path)
{
    static char buf[256];
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return NULL;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    buf[n > 0 ? n : 0] = '\0';
    return buf;
}

static void write_mountinfo(const char *mi, int v2)
{
    FILE *f = fopen(mi, "w");
    if (v2) {
        fprintf(f, "30 1 0:26 / %s/unified rw,nosuid shared:4 - cgroup2 cgroup2 rw\n", root);
    } else {
        const char *c[] = {"memory", "pids", "cpu", "freezer"};
        for (int i = 0; i < 4; i++)
            fprintf(f,
                    "%d 25 0:%d / %s/%s rw,nosuid,nodev,noexec shared:%d - cgroup cgroup rw,%s\n",
                    40 + i, 31 + i, root, c[i], 10 + i, c[i]);
        fprintf(f, "50 25 0:40 / %s/cpuacct rw - cgroup cgroup rw,cpuacct\n", root);
    }
    fclose(f);
}

TEST(cgroup_v1_fake_hierarchy)
{
    snprintf(root, sizeof root, "/tmp/sbx-cg-test-%d", getpid());
    mkdir(root, 0755);
    mkfake("memory");
    mkfake("pids");
    mkfake("cpu");
    mkfake("freezer");
    char mi[256], err[512], p[512];
    snprintf(mi, sizeof mi, "%s/mountinfo", root);
    write_mountinfo(mi, 0);
    sbx_cgroups *cg = sbx_cgroup_open("tusko-sandboxd.test", mi, err, sizeof err);
    CHECK(cg != NULL);
    CHECK_INT(sbx_cgroup_version(cg), ==, 1);
    sbx_limits l = {.memory_bytes = 256LL << 20, .cpu_millis = 500, .pids = 64};
    CHECK(sbx_cgroup_create(cg, "s1", &l, err, sizeof err) == TK_OK);
    snprintf(p, sizeof p, "%s/memory/tusko-sandboxd.test/s1/memory.limit_in_bytes", root);
    CHECK_STR(rd(p), "268435456");
    snprintf(p, sizeof p, "%s/pids/tusko-sandboxd.test/s1/pids.max", root);
    CHECK_STR(rd(p), "64");
    snprintf(p, sizeof p, "%s/cpu/tusko-sandboxd.test/s1/cpu.cfs_quota_us", root);
    CHECK_STR(rd(p), "50000");
    CHECK(sbx_cgroup_freeze(cg, "s1", 1, 100, err, sizeof err) == TK_OK);
    CHECK_INT(sbx_cgroup_frozen(cg, "s1"), ==, 1);
    CHECK(sbx_cgroup_freeze(cg, "s1", 0, 100, err, sizeof err) == TK_OK);
    CHECK_INT(sbx_cgroup_frozen(cg, "s1"), ==, 0);
    CHECK(sbx_cgroup_attach(cg, "s1", 4242, err, sizeof err) == TK_OK);
    snprintf(p, sizeof p, "%s/freezer/tusko-sandboxd.test/s1/cgroup.procs", root);
    CHECK_STR(rd(p), "4242");
    /* a group left in one hierarchy only (a crash mid-create) is still listed */
    mkfake("memory/tusko-sandboxd.test/s2");
    char **names;
    size_t n = sbx_cgroup_list(cg, &names);
    CHECK_INT(n, ==, 2);
    sbx_cgroup_list_free(names, n);
    sbx_cgroup_close(cg);
    rm_tree(root);
}

TEST(cgroup_v2_fake_hierarchy)
{
    snprintf(root, sizeof root, "/tmp/sbx-cg2-test-%d", getpid());
    mkdir(root, 0755);
    mkfake("unified");
    char mi[256], err[512], p[512];
    snprintf(mi, sizeof mi, "%s/unified/cgroup.controllers", root);
    FILE *f = fopen(mi, "w");
    fputs("cpuset cpu io memory pids\n", f);
    fclose(f);
    snprintf(mi, sizeof mi, "%s/mountinfo", root);
    write_mountinfo(mi, 1);
    sbx_cgroups *cg = sbx_cgroup_open("tusko-sandboxd.test", mi, err, sizeof err);
    CHECK(cg != NULL);
    CHECK_INT(sbx_cgroup_version(cg), ==, 2);
    snprintf(p, sizeof p, "%s/unified/tusko-sandboxd.test/cgroup.subtree_control", root);
    CHECK_STR(rd(p), "+memory +pids +cpu");
    sbx_limits l = {.memory_bytes = 1LL << 30, .cpu_millis = 1500, .pids = 100};
    CHECK(sbx_cgroup_create(cg, "s1", &l, err, sizeof err) == TK_OK);
    snprintf(p, sizeof p, "%s/unified/tusko-sandboxd.test/s1/memory.max", root);
    CHECK_STR(rd(p), "1073741824");
    snprintf(p, sizeof p, "%s/unified/tusko-sandboxd.test/s1/pids.max", root);
    CHECK_STR(rd(p), "100");
    snprintf(p, sizeof p, "%s/unified/tusko-sandboxd.test/s1/cpu.max", root);
    CHECK_STR(rd(p), "150000 100000");
    CHECK(sbx_cgroup_freeze(cg, "s1", 1, 100, err, sizeof err) == TK_OK);
    snprintf(p, sizeof p, "%s/unified/tusko-sandboxd.test/s1/cgroup.freeze", root);
    CHECK_STR(rd(p), "1");
    sbx_cgroup_close(cg);
    rm_tree(root);
}

TEST(cgroup_missing_controllers_is_a_clear_error)
{
    snprintf(root, sizeof root, "/tmp/sbx-cg3-test-%d", getpid());
    mkdir(root, 0755);
    char mi[256], err[512];
    snprintf(mi, sizeof mi, "%s/mountinfo", root);
    FILE *f = fopen(mi, "w");
    fprintf(f, "40 25 0:31 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n");
    fclose(f);
    CHECK(sbx_cgroup_open("g", mi, err, sizeof err) == NULL);
    CHECK(strstr(err, "pids") != NULL);
    CHECK(strstr(err, "freezer") != NULL);
    rm_tree(root);
}

TEST(seccomp_program_builds_and_checks_the_arch_first)
{
    struct sock_fprog prog;
    char err[256];
    CHECK(sbx_seccomp_build(&prog, err, sizeof err) == TK_OK);
    CHECK_INT(prog.len, >, 20);
    /* libseccomp's first instructions load the arch and compare it */
    CHECK(prog.filter[0].code == (BPF_LD | BPF_W | BPF_ABS));
    CHECK_INT(prog.filter[0].k, ==, 4); /* offsetof(struct seccomp_data, arch) */
    sbx_seccomp_free(&prog);
    int n = 0;
    for (const char *const *d = sbx_seccomp_denied; *d; d++)
        n++;
    CHECK_INT(n, >, 40);
}

TEST(image_lookup)
{
    char dir[128], p[256], err[512];
    snprintf(dir, sizeof dir, "/tmp/sbx-img-test-%d", getpid());
    mkdir(dir, 0755);
    sbx_image img;
    CHECK(sbx_image_find(dir, &img, err, sizeof err) == TK_EINVAL);
    CHECK(strstr(err, "build.sh") != NULL);
    snprintf(p, sizeof p, "%s/rootfs", dir);
    mkdir(p, 0755);
    const char *sub[] = {"workspace", "opt", "opt/tusko", "opt/tusko/bin", "proc", "dev",
                         "tmp",       "run", "bin"};
    for (size_t i = 0; i < TK_ARRAY_LEN(sub); i++) {
        snprintf(p, sizeof p, "%s/rootfs/%s", dir, sub[i]);
        mkdir(p, 0755);
    }
    snprintf(p, sizeof p, "%s/rootfs/bin/sh", dir);
    close(open(p, O_CREAT | O_WRONLY, 0755));
    snprintf(p, sizeof p, "%s/image.json", dir);
    FILE *f = fopen(p, "w");
    fputs("{\"name\":\"tusko-sandbox\",\"hash\":\"abc123def456\"}", f);
    fclose(f);
    CHECK(sbx_image_find(dir, &img, err, sizeof err) == TK_OK);
    CHECK_STR(img.hash, "abc123def456");
    CHECK(strstr(img.rootfs, "/rootfs") != NULL);
    CHECK(sbx_image_uri_matches(&img, "tusko-sandbox"));
    CHECK(sbx_image_uri_matches(&img, "tusko-sandbox:latest"));
    CHECK(sbx_image_uri_matches(&img, "tusko-sandbox:abc123def456"));
    CHECK(!sbx_image_uri_matches(&img, "tusko-sandbox:other"));
    CHECK(!sbx_image_uri_matches(&img, "tusko-sandboxx"));
    CHECK(!sbx_image_uri_matches(&img, "python:3.11"));
    /* the root given directly finds image.json beside it */
    snprintf(p, sizeof p, "%s/rootfs", dir);
    CHECK(sbx_image_find(p, &img, err, sizeof err) == TK_OK);
    CHECK_STR(img.hash, "abc123def456");
    CHECK(sbx_image_find("/nonexistent/x", &img, err, sizeof err) == TK_ENOENT);
    rm_tree(dir);
}

TEST(sandbox_record_round_trip)
{
    sbx_sandbox s;
    memset(&s, 0, sizeof s);
    snprintf(s.id, sizeof s.id, "0190f3a2-7c1e-4abc-9def-0123456789ab");
    snprintf(s.token, sizeof s.token, "tok");
    snprintf(s.image, sizeof s.image, "tusko-sandbox");
    sbx_sandbox_set_state(&s, SBX_PAUSED, "user_pause", NULL);
    s.created_ms = 1000;
    s.expires_ms = 5000;
    s.limits = (sbx_limits){.memory_bytes = 1 << 28, .cpu_millis = 500, .pids = 64};
    s.metadata = tk_json_obj("owner", json_string("u1"), NULL);
    s.entrypoint = json_pack("[ss]", "tail", "-f");
    s.env = tk_json_obj("A", json_string("1"), NULL);
    json_t *rec = sbx_sandbox_record(&s, tk_json_obj("pid", json_integer(7), NULL));
    sbx_sandbox t;
    memset(&t, 0, sizeof t);
    const json_t *rt;
    int pooled;
    CHECK(sbx_sandbox_from_record(&t, rec, &rt, &pooled) == TK_OK);
    CHECK_STR(t.id, s.id);
    CHECK(t.state == SBX_PAUSED);
    CHECK_INT(pooled, ==, 0);
    CHECK_INT(t.expires_ms, ==, 5000);
    CHECK_INT(t.limits.pids, ==, 64);
    CHECK_STR(tk_json_str(t.metadata, "owner"), "u1");
    CHECK_INT(tk_json_int_or(rt, "pid", 0), ==, 7);
    json_t *api = sbx_sandbox_json(&t, 1);
    CHECK_STR(tk_json_str(json_object_get(api, "status"), "state"), "Paused");
    CHECK(json_object_get(api, "expiresAt") != NULL);
    CHECK_STR(tk_json_str(json_object_get(api, "image"), "uri"), "tusko-sandbox");
    json_t *small = sbx_sandbox_json(&t, 0);
    CHECK(json_object_get(small, "image") == NULL);
    json_decref(api);
    json_decref(small);
    /* broken records are refused */
    json_t *bad = tk_json_obj("id", json_string("x"), NULL);
    sbx_sandbox u;
    memset(&u, 0, sizeof u);
    CHECK(sbx_sandbox_from_record(&u, bad, &rt, &pooled) == TK_EINVAL);
    sbx_sandbox_clear(&u);
    json_decref(bad);
    json_decref(rec);
    sbx_sandbox_clear(&s);
    sbx_sandbox_clear(&t);
    sbx_state st;
    CHECK(sbx_sandbox_state_parse("running", &st) == TK_OK && st == SBX_RUNNING);
    CHECK(sbx_sandbox_state_parse("Pooled", &st) == TK_EINVAL);
    CHECK(sbx_sandbox_state_parse("nope", &st) == TK_EINVAL);
}

TEST_MAIN()
