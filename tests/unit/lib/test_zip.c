/* lib/zip: what the writer makes, Python's zipfile reads to the byte (CRCs
 * checked, names, sizes, times, deflated and stored entries), also in its
 * ZIP64 form (the threshold lowered so small files need it); bad names and
 * wrong sizes are refused. */
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/zip.h"
#include "tk_test.h"

static char dir[64];

static void tmp(void)
{
    snprintf(dir, sizeof dir, "/tmp/tk-zip-XXXXXX");
    CHECK(mkdtemp(dir) != NULL);
}

/* python3 checks the archive: every entry's CRC (testzip), then the listed
 * expectations "name=size" against what it reads; ZIP64=1 also wants the
 * ZIP64 end records (zipfile reads them only when present). */
static int py_check(const char *zip, const char *expect, int zip64)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "python3 - '%s' '%s' %d <<'PY'\n"
             "import sys, zipfile, hashlib\n"
             "path, expect, z64 = sys.argv[1], sys.argv[2], sys.argv[3] == '1'\n"
             "z = zipfile.ZipFile(path)\n"
             "assert z.testzip() is None, 'a CRC is wrong'\n"
             "want = [e.split('=') for e in expect.split(',')]\n"
             "names = [i.filename for i in z.infolist()]\n"
             "assert names == [w[0] for w in want], names\n"
             "for (n, size), i in zip(want, z.infolist()):\n"
             "    data = z.read(n)\n"
             "    assert len(data) == int(size) == i.file_size, (n, len(data), size)\n"
             "    assert i.flag_bits & 0x800, 'utf-8 flag'\n"
             "    assert i.date_time == (2023, 11, 14, 22, 13, 20), i.date_time\n"
             "    if n.startswith('text'): assert data == b'tusko ' * (len(data) // 6), n\n"
             "    if not z64 and n.startswith('text') and len(data) > 1000: assert i.compress_type "
             "== 8 and "
             "i.compress_size < len(data) // 10, (i.compress_type, i.compress_size)\n"
             "raw = open(path, 'rb').read()\n"
             "assert (b'PK\\x06\\x06' in raw) == z64, 'zip64 end record'\n"
             "PY",
             zip, expect, zip64);
    return system(cmd);
}

/* Info-ZIP's unzip (scripts/deps.sh) agrees: each entry's CRC, and the local
 * headers match the central directory's (it warns, and fails, when not). */
static int unzip_test(const char *zip)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "unzip -tq '%s' 2>&1 | tee /dev/stderr | grep -q '^No errors detected'", zip);
    return system(cmd);
}

static void put(tk_zip_writer *w, const char *name, const char *data, size_t n)
{
    CHECK(tk_zip_begin(w, name, n, 1700000000) == TK_OK);
    /* in uneven pieces */
    for (size_t i = 0; i < n;) {
        size_t k = n - i < 777 ? n - i : 777;
        CHECK(tk_zip_write(w, data + i, k) == TK_OK);
        i += k;
    }
    CHECK(tk_zip_end(w) == TK_OK);
}

static char *text(size_t n)
{
    char *t = malloc(n + 1);
    for (size_t i = 0; i < n; i++)
        t[i] = "tusko "[i % 6];
    t[n] = 0;
    return t;
}

static void write_sample(const char *path)
{
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    CHECK(fd >= 0);
    tk_zip_writer w;
    tk_zip_writer_init(&w, fd);
    char *t = text(600000);
    char rnd[5000];
    for (size_t i = 0; i < sizeof rnd; i++)
        rnd[i] = (char)((i * 2654435761u) >> 13);
    put(&w, "text.txt", t, 600000);
    put(&w, "empty", "", 0);
    put(&w, "data/downloads/r\xc3\xa9sum\xc3\xa9.bin", rnd, sizeof rnd);
    put(&w, "text-small", t, 12);
    put(&w, "manifest.json", "{\"x\":1}\n", 8);
    CHECK(tk_zip_finish(&w) == TK_OK);
    CHECK_INT(w.err, ==, 0);
    tk_zip_writer_free(&w);
    close(fd);
    free(t);
}

#define EXPECT                                                                                     \
    "text.txt=600000,empty=0,data/downloads/résumé.bin=5000,text-small=12,manifest.json=8"

TEST(zip_written_is_read_by_python_zipfile)
{
    tmp();
    char path[128];
    snprintf(path, sizeof path, "%s/a.zip", dir);
    write_sample(path);
    CHECK_INT(py_check(path, EXPECT, 0), ==, 0);
    CHECK_INT(unzip_test(path), ==, 0);
}

TEST(zip64_fields_when_sizes_and_offsets_pass_the_line)
{
    tmp();
    char path[128];
    snprintf(path, sizeof path, "%s/z64.zip", dir);
    uint64_t old = tk_zip_zip64_at;
    tk_zip_zip64_at = 4000; /* text.txt, résumé.bin and every later offset pass it */
    write_sample(path);
    tk_zip_zip64_at = old;
    CHECK_INT(py_check(path, EXPECT, 1), ==, 0);
    CHECK_INT(unzip_test(path), ==, 0);
}

TEST(zip_refuses_bad_names_and_wrong_sizes)
{
    char path[] = "/tmp/tk-zip-bad-XXXXXX";
    int fd = mkstemp(path);
    tk_zip_writer w;
    tk_zip_writer_init(&w, fd);
    const char *bad[] = {"", "/abs", "a/../b", "..", "a/./b", "dir/", "a\\b", "a//b", NULL};
    for (int i = 0; bad[i]; i++)
        CHECK(tk_zip_begin(&w, bad[i], 1, 0) == TK_EINVAL);
    char longn[TK_ZIP_NAME_MAX + 2];
    memset(longn, 'n', sizeof longn - 1);
    longn[sizeof longn - 1] = 0;
    CHECK(tk_zip_begin(&w, longn, 1, 0) == TK_EINVAL);
    CHECK(tk_zip_begin(&w, "ab", 2, 0) == TK_OK);
    CHECK(tk_zip_begin(&w, "again", 1, 0) == TK_EINVAL); /* one open at a time */
    CHECK(tk_zip_write(&w, "abc", 3) == TK_EINVAL);      /* more than its size */
    CHECK(tk_zip_write(&w, "a", 1) == TK_OK);
    CHECK(tk_zip_end(&w) == TK_EINVAL); /* less than its size */
    CHECK(tk_zip_finish(&w) == TK_EINVAL);
    CHECK(tk_zip_write(&w, "b", 1) == TK_OK);
    CHECK(tk_zip_end(&w) == TK_OK);
    CHECK(tk_zip_write(&w, "c", 1) == TK_EINVAL); /* none open */
    CHECK(tk_zip_finish(&w) == TK_OK);
    tk_zip_writer_free(&w);
    close(fd);
    /* a failed write is an error that sticks: a read-only descriptor */
    fd = open(path, O_RDONLY);
    tk_zip_writer_init(&w, fd);
    CHECK(tk_zip_begin(&w, "x", 1, 0) == TK_ERROR);
    CHECK(w.err != 0);
    CHECK(tk_zip_finish(&w) == TK_ERROR);
    tk_zip_writer_free(&w);
    close(fd);
    unlink(path);
}

TEST_MAIN()
