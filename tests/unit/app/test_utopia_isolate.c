/* The isolated extractor: PDF through pdftotext and DOCX through this binary
 * re-executed as the helper, both contained (isolate.h). Malformed files and
 * zip bombs must be refused without harming this process. */
#include <fcntl.h>
#include <zlib.h>

#include "app/utopia/docx.h"
#include "app/utopia/extract.h"
#include "app/utopia/isolate.h"
#include "app/utopia/local.h"
#include "tk_test.h"

/* ---- a tiny zip writer (one or two entries, deflated or stored) ---- */

static void put16(tk_buf *b, unsigned v)
{
    unsigned char c[2] = {(unsigned char)v, (unsigned char)(v >> 8)};
    tk_buf_append(b, c, 2);
}
static void put32(tk_buf *b, unsigned long v)
{
    unsigned char c[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 24)};
    tk_buf_append(b, c, 4);
}

/* Deflates `reps` copies of `unit` (raw deflate) without holding them all. */
static void deflate_repeated(const char *unit, size_t ulen, size_t reps, const char *head,
                             const char *tail, tk_buf *out, unsigned long *crc, size_t *usize)
{
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    TK_ASSERT(deflateInit2(&zs, 9, Z_DEFLATED, -MAX_WBITS, 9, Z_DEFAULT_STRATEGY) == Z_OK);
    unsigned char obuf[65536];
    *crc = crc32(0, NULL, 0);
    *usize = 0;
    for (size_t r = 0; r < reps + 2; r++) {
        const char *p = r == 0 ? head : r == reps + 1 ? tail : unit;
        size_t n = r == 0 ? strlen(head) : r == reps + 1 ? strlen(tail) : ulen;
        *crc = crc32(*crc, (const Bytef *)p, (uInt)n);
        *usize += n;
        zs.next_in = (Bytef *)p;
        zs.avail_in = (uInt)n;
        int flush = r == reps + 1 ? Z_FINISH : Z_NO_FLUSH;
        do {
            zs.next_out = obuf;
            zs.avail_out = sizeof obuf;
            deflate(&zs, flush);
            tk_buf_append(out, obuf, sizeof obuf - zs.avail_out);
        } while (zs.avail_out == 0);
    }
    deflateEnd(&zs);
}

/* A zip with word/document.xml; declared_usize 0 means the true size. */
static void make_docx(tk_buf *zip, const char *unit, size_t reps, const char *head,
                      const char *tail, size_t declared_usize)
{
    tk_buf data;
    tk_buf_init(&data, (size_t)1 << 28);
    unsigned long crc;
    size_t usize;
    deflate_repeated(unit, strlen(unit), reps, head, tail, &data, &crc, &usize);
    if (declared_usize)
        usize = declared_usize;
    const char *name = "word/document.xml";
    tk_buf_init(zip, (size_t)1 << 28);
    put32(zip, 0x04034b50), put16(zip, 20), put16(zip, 0), put16(zip, 8), put16(zip, 0);
    put16(zip, 0), put32(zip, crc), put32(zip, data.len), put32(zip, usize);
    put16(zip, (unsigned)strlen(name)), put16(zip, 0);
    tk_buf_append_str(zip, name);
    tk_buf_append(zip, data.data, data.len);
    size_t cd = zip->len;
    put32(zip, 0x02014b50), put16(zip, 20), put16(zip, 20), put16(zip, 0), put16(zip, 8);
    put16(zip, 0), put16(zip, 0), put32(zip, crc), put32(zip, data.len), put32(zip, usize);
    put16(zip, (unsigned)strlen(name)), put16(zip, 0), put16(zip, 0), put16(zip, 0);
    put16(zip, 0), put32(zip, 0), put32(zip, 0);
    tk_buf_append_str(zip, name);
    size_t cdlen = zip->len - cd;
    put32(zip, 0x06054b50), put16(zip, 0), put16(zip, 0), put16(zip, 1), put16(zip, 1);
    put32(zip, cdlen), put32(zip, cd), put16(zip, 0);
    tk_buf_free(&data);
}

static const char *DOC_HEAD =
    "<?xml version=\"1.0\"?><w:document xmlns:w=\"x\"><w:body>"
    "<w:p><w:pPr><w:pStyle w:val=\"Heading1\"/></w:pPr><w:r><w:t>Quarterly report</w:t></w:r></w:p>"
    "<w:p><w:r><w:t xml:space=\"preserve\">Revenue grew by </w:t></w:r><w:r><w:t>12 &amp; "
    "more</w:t></w:r></w:p>"
    "<w:tbl><w:tr><w:tc><w:p><w:r><w:t>Region</w:t></w:r></w:p></w:tc><w:tc><w:p><w:r><w:t>North"
    "</w:t></w:r></w:p></w:tc></w:tr></w:tbl>";
static const char *DOC_TAIL = "</w:body></w:document>";

static long rss_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "VmRSS:", 6) == 0)
            kb = strtol(line + 6, NULL, 10);
    if (f)
        fclose(f);
    return kb;
}

static utopia_local_config cfg = {.limits = {.timeout_ms = 15000, .cpu_seconds = 10}};

static tk_status run_extract(utopia_format fmt, const void *data, size_t len, utopia_blocks *b,
                             char *err, size_t errlen)
{
    utopia_extractor x;
    utopia_local_extractor(&x, &cfg);
    utopia_blocks_init(b, 1 << 20);
    return utopia_extract(fmt, data, len, &x, b, err, errlen);
}

TEST(docx_extracted_in_the_helper)
{
    tk_buf zip;
    make_docx(&zip, "<w:p><w:r><w:t>Body text.</w:t></w:r></w:p>", 3, DOC_HEAD, DOC_TAIL, 0);
    utopia_blocks b;
    char err[256];
    tk_status st = run_extract(UTOPIA_FMT_DOCX, zip.data, zip.len, &b, err, sizeof err);
    if (st != TK_OK)
        TK_TEST_FAIL("extract: %s (%s)", tk_status_str(st), err);
    CHECK_INT(b.n, ==, 6);
    CHECK(b.v[0].kind == UTOPIA_BLOCK_HEADING && b.v[0].level == 1);
    CHECK_STR(b.v[0].text, "Quarterly report");
    CHECK_STR(b.v[1].text, "Revenue grew by 12 & more");
    CHECK_STR(b.v[2].text, "Region | North |");
    CHECK_STR(b.v[3].text, "Body text.");
    utopia_blocks_free(&b);
    tk_buf_free(&zip);
}

TEST(docx_zip_bomb_honest_header_refused)
{
    /* 200 MB of paragraphs, declared as such: past the 64 MiB cap */
    tk_buf zip;
    make_docx(&zip, "<w:p><w:r><w:t>aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa</w:t></w:r></w:p>", 4000000,
              DOC_HEAD, DOC_TAIL, 0);
    CHECK_INT(zip.len, <, 2 << 20);
    long before = rss_kb();
    utopia_blocks b;
    char err[256];
    tk_status st = run_extract(UTOPIA_FMT_DOCX, zip.data, zip.len, &b, err, sizeof err);
    CHECK(st == TK_EINVAL);
    CHECK(strstr(err, "declares") != NULL);
    CHECK_INT(b.n, ==, 0);
    CHECK_INT(rss_kb() - before, <, 8 * 1024);
    utopia_blocks_free(&b);
    tk_buf_free(&zip);
}

TEST(docx_zip_bomb_lying_header_refused)
{
    /* 200 MB that claims to be 900 KB: caught while inflating, in the helper */
    tk_buf zip;
    make_docx(&zip, "<w:p><w:r><w:t>aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa</w:t></w:r></w:p>", 4000000,
              DOC_HEAD, DOC_TAIL, 900000);
    long before = rss_kb();
    utopia_blocks b;
    char err[256];
    tk_status st = run_extract(UTOPIA_FMT_DOCX, zip.data, zip.len, &b, err, sizeof err);
    CHECK(st == TK_EINVAL);
    CHECK(strstr(err, "more than") != NULL);
    CHECK_INT(rss_kb() - before, <, 8 * 1024);
    utopia_blocks_free(&b);
    tk_buf_free(&zip);
}

TEST(docx_high_ratio_refused_and_in_process_checks)
{
    /* 40 MB declared, under the size cap, but 1000:1 */
    tk_buf zip;
    make_docx(&zip, "<w:p><w:r><w:t>bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb</w:t></w:r></w:p>", 800000,
              DOC_HEAD, DOC_TAIL, 0);
    char *data;
    size_t dl;
    char err[256];
    CHECK(utopia_zip_find(zip.data, zip.len, "word/document.xml", (size_t)64 << 20, &data, &dl, err,
                          sizeof err) == TK_EINVAL);
    CHECK(strstr(err, "zip bomb") != NULL);
    tk_buf_free(&zip);
    /* garbage, truncated and empty zips */
    CHECK(utopia_zip_find("PK\3\4garbage", 11, "word/document.xml", 1 << 20, &data, &dl, err,
                          sizeof err) == TK_EINVAL);
    make_docx(&zip, "<w:p/>", 1, DOC_HEAD, DOC_TAIL, 0);
    CHECK(utopia_zip_find(zip.data, zip.len - 30, "word/document.xml", 1 << 20, &data, &dl, err,
                          sizeof err) == TK_EINVAL);
    CHECK(utopia_zip_find(zip.data, zip.len, "word/other.xml", 1 << 20, &data, &dl, err,
                          sizeof err) == TK_EINVAL);
    /* a flipped byte in the deflate stream */
    zip.data[60] ^= 0x55;
    tk_status st = utopia_zip_find(zip.data, zip.len, "word/document.xml", 1 << 20, &data, &dl, err,
                                   sizeof err);
    if (st == TK_OK)
        free(data);
    tk_buf_free(&zip);
}

/* A minimal one-page PDF with text (pdftotext rebuilds the missing xref). */
static const char PDF[] =
    "%PDF-1.4\n"
    "1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\n"
    "2 0 obj << /Type /Pages /Kids [3 0 R] /Count 1 >> endobj\n"
    "3 0 obj << /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
    "/Resources << /Font << /F1 5 0 R >> >> >> endobj\n"
    "4 0 obj << /Length 60 >> stream\n"
    "BT /F1 18 Tf 72 700 Td (Utopia remembers everything) Tj ET\n"
    "endstream endobj\n"
    "5 0 obj << /Type /Font /Subtype /Type1 /BaseFont /Helvetica >> endobj\n"
    "trailer << /Root 1 0 R >>\n%%EOF\n";

TEST(pdf_extracted_by_pdftotext_contained)
{
    utopia_blocks b;
    char err[256];
    tk_status st = run_extract(UTOPIA_FMT_PDF, PDF, sizeof PDF - 1, &b, err, sizeof err);
    if (st != TK_OK)
        TK_TEST_FAIL("extract: %s (%s)", tk_status_str(st), err);
    int found = 0;
    for (size_t i = 0; i < b.n; i++)
        found |=
            b.v[i].kind == UTOPIA_BLOCK_PARA && strstr(b.v[i].text, "Utopia remembers") != NULL;
    CHECK(found);
    utopia_blocks_free(&b);
}

TEST(pdf_malformed_refused)
{
    static const char bad[] = "%PDF-1.7\n1 0 obj << /Type /Catalog /Pages 99 0 R >>\n"
                              "stream\n\xff\xfe\x00garbage garbage\nendstream\ntrailer <<>>\n";
    long before = rss_kb();
    utopia_blocks b;
    char err[256];
    tk_status st = run_extract(UTOPIA_FMT_PDF, bad, sizeof bad - 1, &b, err, sizeof err);
    CHECK(st == TK_EINVAL);
    CHECK(strstr(err, "PDF could not be read") != NULL);
    CHECK_INT(b.n, ==, 0);
    CHECK_INT(rss_kb() - before, <, 4 * 1024);
    utopia_blocks_free(&b);
    /* random bytes after the magic number */
    unsigned char junk[20000];
    memcpy(junk, "%PDF-1.5\n", 9);
    for (size_t i = 9; i < sizeof junk; i++)
        junk[i] = (unsigned char)(i * 2654435761u >> 13);
    st = run_extract(UTOPIA_FMT_PDF, junk, sizeof junk, &b, err, sizeof err);
    CHECK(st != TK_OK);
    utopia_blocks_free(&b);
}

TEST(untrusted_formats_refused_without_an_extractor)
{
    utopia_blocks b;
    utopia_blocks_init(&b, 1 << 20);
    char err[256];
    CHECK(utopia_extract(UTOPIA_FMT_PDF, PDF, sizeof PDF - 1, NULL, &b, err, sizeof err) ==
          TK_EDENIED);
    utopia_blocks_free(&b);
}

/* ---- the containment itself, with python3 as the "extractor" ---- */

static tk_status py(const char *code, tk_buf *out, utopia_isolate_result *res, int64_t timeout)
{
    char *argv[] = {"python3", "-S", "-c", (char *)code, NULL};
    utopia_isolate_limits lim = {.timeout_ms = timeout, .cpu_seconds = 5};
    char err[256];
    tk_buf_init(out, 1 << 16);
    return utopia_isolate_run("/usr/bin/python3", argv, NULL, 0, &lim, out, res, err, sizeof err);
}

TEST(isolate_child_has_no_network_files_or_processes)
{
    tk_buf out;
    utopia_isolate_result res;
    /* sockets of any family are refused */
    CHECK(py("import socket; socket.socket(socket.AF_INET)", &out, &res, 10000) == TK_ERROR);
    CHECK(strstr(res.stderr_head, "PermissionError") != NULL);
    tk_buf_free(&out);
    CHECK(py("import socket; socket.socket(socket.AF_UNIX)", &out, &res, 10000) == TK_ERROR);
    tk_buf_free(&out);
    /* the network namespace has no interface but lo (so /proc/net/dev lists only lo) */
    CHECK(py("print(open('/proc/self/net/dev').read())", &out, &res, 10000) == TK_OK);
    CHECK(strstr(tk_buf_cstr(&out), "lo:") != NULL);
    CHECK(strstr(tk_buf_cstr(&out), "eth") == NULL);
    tk_buf_free(&out);
    /* files outside the allowed system paths cannot be read, none can be written */
    char path[64];
    snprintf(path, sizeof path, "/tmp/utopia-secret-%d", getpid());
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    fputs("secret", f);
    fclose(f);
    char code[256];
    snprintf(code, sizeof code, "print(open('%s').read())", path);
    CHECK(py(code, &out, &res, 10000) == TK_ERROR);
    CHECK(strstr(res.stderr_head, "PermissionError") != NULL);
    CHECK(strstr(tk_buf_cstr(&out), "secret") == NULL);
    tk_buf_free(&out);
    unlink(path);
    CHECK(py("open('/tmp/utopia-written', 'w')", &out, &res, 10000) == TK_ERROR);
    CHECK(access("/tmp/utopia-written", F_OK) != 0);
    tk_buf_free(&out);
    CHECK(py("print(open('/proc/1/environ').read())", &out, &res, 10000) == TK_ERROR);
    tk_buf_free(&out);
    /* no processes, no signals to this one */
    CHECK(py("import os; os.fork()", &out, &res, 10000) == TK_ERROR);
    tk_buf_free(&out);
    snprintf(code, sizeof code, "import os; os.kill(%d, 0)", getpid());
    CHECK(py(code, &out, &res, 10000) == TK_ERROR);
    CHECK(strstr(res.stderr_head, "PermissionError") != NULL);
    tk_buf_free(&out);
    /* and what is allowed works */
    CHECK(py("import sys; sys.stdout.write('ok')", &out, &res, 10000) == TK_OK);
    CHECK_STR(tk_buf_cstr(&out), "ok");
    tk_buf_free(&out);
}

TEST(isolate_kills_at_the_deadline_and_the_output_cap)
{
    tk_buf out;
    utopia_isolate_result res;
    CHECK(py("while True: pass", &out, &res, 300) == TK_ETIMEOUT);
    CHECK(res.timed_out);
    tk_buf_free(&out);
    CHECK(py("import sys\nwhile True: sys.stdout.write('x' * 65536)", &out, &res, 10000) ==
          TK_ETOOBIG);
    CHECK(res.output_capped);
    CHECK_INT(out.len, <=, 1 << 16);
    tk_buf_free(&out);
    /* memory: an address-space limit (plain build) */
    char *argv[] = {"python3", "-S", "-c", "x = bytearray(900 * 1024 * 1024)", NULL};
    utopia_isolate_limits lim = {.timeout_ms = 10000, .memory_bytes = 256 << 20};
    char err[256];
    tk_buf_init(&out, 1 << 16);
    tk_status st =
        utopia_isolate_run("/usr/bin/python3", argv, NULL, 0, &lim, &out, &res, err, sizeof err);
    CHECK(st == TK_ERROR);
    tk_buf_free(&out);
}

TEST(isolate_feeds_large_input_while_reading_output)
{
    /* 4 MB through cat-like python: stdin and stdout pumped together */
    size_t n = 4 << 20;
    char *in = tk_malloc(n);
    for (size_t i = 0; i < n; i++)
        in[i] = (char)('a' + i % 26);
    char *argv[] = {"python3", "-S", "-c",
                    "import sys\nwhile True:\n b = sys.stdin.buffer.read(65536)\n if not b: "
                    "break\n sys.stdout.buffer.write(b)",
                    NULL};
    tk_buf out;
    tk_buf_init(&out, 8 << 20);
    utopia_isolate_result res;
    char err[256];
    CHECK(utopia_isolate_run("/usr/bin/python3", argv, in, n, NULL, &out, &res, err, sizeof err) ==
          TK_OK);
    CHECK_INT(out.len, ==, n);
    CHECK(memcmp(out.data, in, n) == 0);
    tk_buf_free(&out);
    free(in);
}

TEST_MAIN()
