/* lib/tar: what the writer makes, GNU tar reads (and the other way round);
 * names up to 255 bytes; every kind of bad archive is refused with a reason. */
#include <fcntl.h>
#include <sys/stat.h>

#include "lib/tar.h"
#include "tk_test.h"

static char dir[64];

static void tmp(void)
{
    snprintf(dir, sizeof dir, "/tmp/tk-tar-XXXXXX");
    CHECK(mkdtemp(dir) != NULL);
}

static int sh(const char *fmt, const char *a)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, fmt, a, a, a);
    return system(cmd);
}

static void put(tk_tar_writer *w, const char *name, const char *data)
{
    CHECK(tk_tar_begin(w, name, strlen(data), 0644, 1700000000) == TK_OK);
    CHECK(tk_tar_write(w, data, strlen(data)) == TK_OK);
    CHECK(tk_tar_end(w) == TK_OK);
}

static char long_name[300];

TEST(tar_written_is_read_by_gnu_tar_and_by_us)
{
    tmp();
    char path[128];
    snprintf(path, sizeof path, "%s/a.tar", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    tk_tar_writer w;
    tk_tar_writer_init(&w, fd);
    put(&w, "manifest.json", "{\"x\":1}\n");
    put(&w, "data/skills/a/SKILL.md", "");
    /* 240 bytes: a prefix and a name */
    memset(long_name, 'n', 240);
    memcpy(long_name, "data/skills/", 12);
    long_name[150] = '/';
    long_name[240] = '\0';
    put(&w, long_name, "long");
    /* an exact block, and more than one */
    char big[1300];
    memset(big, 'b', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    put(&w, "big", big);
    CHECK(tk_tar_finish(&w) == TK_OK);
    close(fd);
    CHECK_INT(
        sh("cd %s && tar -xf a.tar && test -f manifest.json && test -f data/skills/a/SKILL.md "
           "&& test $(stat -c %%s big) = 1299",
           dir),
        ==, 0);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "cd %s && test \"$(cat '%s')\" = long", dir, long_name);
    CHECK_INT(system(cmd), ==, 0);

    fd = open(path, O_RDONLY);
    tk_tar_reader r;
    tk_tar_reader_init(&r, tk_tar_read_fd, &fd);
    tk_tar_entry e;
    CHECK(tk_tar_next(&r, &e) == TK_OK);
    CHECK_STR(e.name, "manifest.json");
    CHECK_INT(e.size, ==, 8);
    CHECK_INT(e.mode, ==, 0644);
    CHECK_INT(e.mtime, ==, 1700000000);
    char buf[2000];
    CHECK_INT(tk_tar_read(&r, buf, sizeof buf), ==, 8);
    CHECK_MEM(buf, "{\"x\":1}\n", 8);
    CHECK_INT(tk_tar_read(&r, buf, sizeof buf), ==, 0);
    CHECK(tk_tar_next(&r, &e) == TK_OK);
    CHECK_STR(e.name, "data/skills/a/SKILL.md");
    CHECK_INT(e.size, ==, 0);
    CHECK(tk_tar_next(&r, &e) == TK_OK); /* unread data is skipped */
    CHECK_STR(e.name, long_name);
    CHECK(tk_tar_next(&r, &e) == TK_OK);
    CHECK_STR(e.name, "big");
    size_t got = 0;
    ssize_t k;
    while ((k = tk_tar_read(&r, buf + got, 100)) > 0)
        got += (size_t)k;
    CHECK_INT(got, ==, 1299);
    CHECK(tk_tar_next(&r, &e) == TK_ENOENT);
    close(fd);
    sh("rm -rf %s", dir);
}

TEST(tar_made_by_gnu_tar_is_read)
{
    tmp();
    CHECK_INT(
        sh("cd %s && mkdir -p d && printf hello > d/f && tar --format=ustar -cf g.tar d/f", dir),
        ==, 0);
    char path[128];
    snprintf(path, sizeof path, "%s/g.tar", dir);
    int fd = open(path, O_RDONLY);
    tk_tar_reader r;
    tk_tar_reader_init(&r, tk_tar_read_fd, &fd);
    tk_tar_entry e;
    CHECK(tk_tar_next(&r, &e) == TK_OK);
    CHECK_STR(e.name, "d/f");
    char buf[16];
    CHECK_INT(tk_tar_read(&r, buf, sizeof buf), ==, 5);
    CHECK(tk_tar_next(&r, &e) == TK_ENOENT);
    close(fd);
    /* a directory entry (GNU tar makes one for d/) is refused */
    CHECK_INT(sh("cd %s && tar --format=ustar -cf dir.tar d", dir), ==, 0);
    snprintf(path, sizeof path, "%s/dir.tar", dir);
    fd = open(path, O_RDONLY);
    tk_tar_reader_init(&r, tk_tar_read_fd, &fd);
    CHECK(tk_tar_next(&r, &e) == TK_EINVAL);
    CHECK(strstr(r.err, "not a regular file") != NULL);
    close(fd);
    sh("rm -rf %s", dir);
}

/* a reader over memory */
struct mem {
    const unsigned char *p;
    size_t n, at;
};
static ssize_t mem_read(void *ud, void *buf, size_t n)
{
    struct mem *m = ud;
    size_t k = m->n - m->at < n ? m->n - m->at : n;
    memcpy(buf, m->p + m->at, k);
    m->at += k;
    return (ssize_t)k;
}

static unsigned char arc[4096];
static size_t arc_len;

static void make_one(void)
{
    tmp();
    char path[128];
    snprintf(path, sizeof path, "%s/one.tar", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    tk_tar_writer w;
    tk_tar_writer_init(&w, fd);
    put(&w, "f", "hello");
    CHECK(tk_tar_finish(&w) == TK_OK);
    arc_len = (size_t)pread(fd, arc, sizeof arc, 0);
    close(fd);
    sh("rm -rf %s", dir);
    CHECK_INT(arc_len, ==, 2048);
}

static tk_status first(unsigned char *a, size_t n, char *err, size_t errlen)
{
    struct mem m = {a, n, 0};
    tk_tar_reader r;
    tk_tar_reader_init(&r, mem_read, &m);
    tk_tar_entry e;
    tk_status st = tk_tar_next(&r, &e);
    if (st == TK_OK) {
        char buf[16];
        if (tk_tar_read(&r, buf, sizeof buf) < 0)
            st = TK_ERROR;
        else
            st = tk_tar_next(&r, &e) == TK_ENOENT ? TK_OK : TK_EINVAL;
    }
    snprintf(err, errlen, "%s", r.err);
    return st;
}

TEST(tar_bad_archives_are_refused_with_a_reason)
{
    make_one();
    char err[200];
    unsigned char a[4096];
    memcpy(a, arc, arc_len);
    CHECK(first(a, arc_len, err, sizeof err) == TK_OK);
    /* a flipped byte in the header */
    memcpy(a, arc, arc_len);
    a[0] ^= 1;
    CHECK(first(a, arc_len, err, sizeof err) == TK_EINVAL);
    CHECK(strstr(err, "checksum") != NULL);
    /* cut in the data, in the header, before the end blocks */
    CHECK(first(arc, 600, err, sizeof err) != TK_OK);
    CHECK(strstr(err, "cut short") != NULL);
    CHECK(first(arc, 100, err, sizeof err) == TK_EINVAL);
    CHECK(strstr(err, "cut short") != NULL);
    CHECK(first(arc, 1024, err, sizeof err) == TK_EINVAL);
    CHECK(strstr(err, "end blocks") != NULL);
    /* a symlink: type '2' (checksum mended) */
    memcpy(a, arc, arc_len);
    a[156] = '2';
    unsigned sum = 0;
    memset(a + 148, ' ', 8);
    for (int i = 0; i < 512; i++)
        sum += a[i];
    snprintf((char *)a + 148, 8, "%06o", sum);
    CHECK(first(a, arc_len, err, sizeof err) == TK_EINVAL);
    CHECK(strstr(err, "not a regular file") != NULL);
    /* a size that is not octal */
    memcpy(a, arc, arc_len);
    a[124] = '9';
    sum = 0;
    memset(a + 148, ' ', 8);
    for (int i = 0; i < 512; i++)
        sum += a[i];
    snprintf((char *)a + 148, 8, "%06o", sum);
    CHECK(first(a, arc_len, err, sizeof err) == TK_EINVAL);
    CHECK(strstr(err, "malformed size") != NULL);
}

TEST(tar_writer_refuses_what_it_cannot_write)
{
    tk_tar_writer w;
    int fd = open("/dev/null", O_WRONLY);
    tk_tar_writer_init(&w, fd);
    char n[300];
    memset(n, 'x', 256);
    n[256] = '\0';
    CHECK(tk_tar_begin(&w, n, 1, 0600, 0) == TK_EINVAL); /* over 255 */
    n[200] = '\0';
    CHECK(tk_tar_begin(&w, n, 1, 0600, 0) == TK_EINVAL); /* no '/' to split at */
    CHECK(tk_tar_begin(&w, "", 1, 0600, 0) == TK_EINVAL);
    CHECK(tk_tar_begin(&w, "f", 3, 0600, 0) == TK_OK);
    CHECK(tk_tar_write(&w, "abcd", 4) == TK_EINVAL); /* more than its size */
    CHECK(tk_tar_write(&w, "ab", 2) == TK_OK);
    CHECK(tk_tar_end(&w) == TK_EINVAL); /* less than its size */
    CHECK(tk_tar_write(&w, "c", 1) == TK_OK);
    CHECK(tk_tar_end(&w) == TK_OK);
    close(fd);
    /* a size over 8 GiB goes base-256, and is read back */
    char path[] = "/tmp/tk-tar-huge-XXXXXX";
    fd = mkstemp(path);
    tk_tar_writer_init(&w, fd);
    CHECK(tk_tar_begin(&w, "huge", 10ULL << 30, 0600, 0) == TK_OK);
    lseek(fd, 0, SEEK_SET);
    tk_tar_reader r;
    tk_tar_reader_init(&r, tk_tar_read_fd, &fd);
    tk_tar_entry e;
    CHECK(tk_tar_next(&r, &e) == TK_OK);
    CHECK_INT(e.size, ==, 10LL << 30);
    close(fd);
    unlink(path);
}

TEST_MAIN()
