/* app/skill_bundle: an uploaded skill checked before it is stored. Each
 * hostile archive of the rules (traversal, absolute paths, backslashes,
 * symlinks, devices, duplicates, too many entries, a file or the whole over
 * its cap, a bomb that inflates past what it declares, encryption, unknown
 * methods, bad CRCs, local headers naming another file, several top folders,
 * no SKILL.md, a SKILL.md that is not UTF-8 or breaks the format) is refused
 * with its rule; good ones (root layout, one top folder, a SKILL.md alone)
 * parse, and their export parses again to the same digest. */
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "app/skill_bundle.h"
#include "tk_test.h"

/* ---- a small zip writer of our own, able to write what a good one never does */

typedef struct {
    const char *name;
    const char *data; /* NULL: "" */
    size_t len;       /* 0: strlen(data) */
    int deflate;
    uint32_t mode; /* Unix mode (type and permissions); 0: none (made by DOS) */
    long declared; /* > 0: the uncompressed size written instead of the real one */
    int bad_crc, encrypted, method;
    const char *local_name; /* the local header's name when it differs */
} zent;

static void w16(tk_buf *b, uint32_t v)
{
    unsigned char p[2] = {(unsigned char)v, (unsigned char)(v >> 8)};
    tk_buf_append(b, p, 2);
}
static void w32(tk_buf *b, uint32_t v)
{
    unsigned char p[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 24)};
    tk_buf_append(b, p, 4);
}

static void build(tk_buf *out, const zent *es, size_t n)
{
    tk_buf_init(out, 1u << 30);
    uint32_t *off = calloc(n + 1, sizeof *off), *crc = calloc(n + 1, sizeof *crc),
             *cs = calloc(n + 1, sizeof *cs), *us = calloc(n + 1, sizeof *us);
    unsigned char **comp = calloc(n + 1, sizeof *comp);
    for (size_t i = 0; i < n; i++) {
        const zent *e = &es[i];
        const char *d = e->data ? e->data : "";
        size_t len = e->len ? e->len : strlen(d);
        crc[i] = (uint32_t)crc32(0, (const Bytef *)d, (uInt)len) ^ (e->bad_crc ? 1u : 0u);
        us[i] = e->declared > 0 ? (uint32_t)e->declared : (uint32_t)len;
        if (e->deflate) {
            uLongf cap = compressBound(len) + 64;
            unsigned char *tmp = malloc(cap);
            z_stream zs = {0};
            deflateInit2(&zs, 9, Z_DEFLATED, -MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
            zs.next_in = (Bytef *)d;
            zs.avail_in = (uInt)len;
            zs.next_out = tmp;
            zs.avail_out = (uInt)cap;
            deflate(&zs, Z_FINISH);
            cs[i] = (uint32_t)(cap - zs.avail_out);
            deflateEnd(&zs);
            comp[i] = tmp;
        } else {
            cs[i] = (uint32_t)len;
            comp[i] = malloc(len + 1);
            memcpy(comp[i], d, len);
        }
        const char *ln = e->local_name ? e->local_name : e->name;
        off[i] = (uint32_t)out->len;
        w32(out, 0x04034b50);
        w16(out, 20);
        w16(out, e->encrypted ? 1 : 0);
        w16(out, e->method ? (uint32_t)e->method : e->deflate ? 8 : 0);
        w16(out, 0);
        w16(out, 0x21);
        w32(out, crc[i]);
        w32(out, cs[i]);
        w32(out, us[i]);
        w16(out, (uint32_t)strlen(ln));
        w16(out, 0);
        tk_buf_append_str(out, ln);
        tk_buf_append(out, comp[i], cs[i]);
    }
    size_t cd = out->len;
    for (size_t i = 0; i < n; i++) {
        const zent *e = &es[i];
        w32(out, 0x02014b50);
        w16(out, e->mode ? 0x0314 : 0x0014);
        w16(out, 20);
        w16(out, e->encrypted ? 1 : 0);
        w16(out, e->method ? (uint32_t)e->method : e->deflate ? 8 : 0);
        w16(out, 0);
        w16(out, 0x21);
        w32(out, crc[i]);
        w32(out, cs[i]);
        w32(out, us[i]);
        w16(out, (uint32_t)strlen(e->name));
        w16(out, 0);
        w16(out, 0);
        w16(out, 0);
        w16(out, 0);
        w32(out, e->mode << 16);
        w32(out, off[i]);
        tk_buf_append_str(out, e->name);
        free(comp[i]);
    }
    size_t cdlen = out->len - cd;
    w32(out, 0x06054b50);
    w16(out, 0);
    w16(out, 0);
    w16(out, (uint32_t)n);
    w16(out, (uint32_t)n);
    w32(out, (uint32_t)cdlen);
    w32(out, (uint32_t)cd);
    w16(out, 0);
    free(off);
    free(crc);
    free(cs);
    free(us);
    free(comp);
}

#define MD(name) "---\nname: " name "\ndescription: Checks things in a test.\n---\n# Do it\n"
#define REG      0100644
#define Z(...)   ((zent){__VA_ARGS__})

static char err[512];

/* The zip of es refused, its error containing want. */
static void refused(const zent *es, size_t n, const char *want)
{
    tk_buf b;
    build(&b, es, n);
    skill_bundle sb;
    err[0] = 0;
    tk_status st = skill_bundle_parse(b.data, b.len, &sb, err, sizeof err);
    if (st == TK_OK || !strstr(err, want))
        fprintf(stderr, "  wanted \"%s\", got %s: \"%s\"\n", want, st == TK_OK ? "OK" : "refused",
                err);
    CHECK_INT(st, ==, TK_EINVAL);
    CHECK(strstr(err, want) != NULL);
    CHECK(sb.skill_md == NULL && sb.nfiles == 0);
    if (st == TK_OK)
        skill_bundle_free(&sb);
    tk_buf_free(&b);
}

TEST(good_layouts_parse_and_export_round_trips)
{
    /* one top folder, with folder entries, macOS litter and deflate */
    zent good[] = {
        Z(.name = "my-skill/", .mode = 040755),
        Z(.name = "my-skill/SKILL.md", .data = MD("my-skill"), .mode = REG, .deflate = 1),
        Z(.name = "my-skill/scripts/run.py", .data = "print('hi')\n", .mode = 0100755),
        Z(.name = "my-skill/references/a.md", .data = "# A\n", .deflate = 1),
        Z(.name = "__MACOSX/my-skill/._SKILL.md", .data = "junk"),
        Z(.name = "my-skill/.DS_Store", .data = "junk"),
    };
    tk_buf b;
    build(&b, good, TK_ARRAY_LEN(good));
    skill_bundle sb;
    CHECK_INT(skill_bundle_parse(b.data, b.len, &sb, err, sizeof err), ==, TK_OK);
    CHECK_STR(sb.name, "my-skill");
    CHECK_STR(sb.description, "Checks things in a test.");
    CHECK_INT(sb.nfiles, ==, 2);
    CHECK_STR(sb.files[0].path, "references/a.md");
    CHECK_STR(sb.files[1].path, "scripts/run.py");
    CHECK_MEM(sb.files[1].data, "print('hi')\n", 12);
    CHECK_INT(sb.bytes, ==, strlen(MD("my-skill")) + 12 + 4);
    CHECK_INT(strlen(sb.digest), ==, 64);
    CHECK_INT(json_array_size(sb.warnings), ==, 0);
    /* the export parses to the same digest */
    tk_buf z;
    tk_buf_init(&z, 1u << 30);
    CHECK_INT(skill_bundle_zip(sb.name, sb.skill_md, sb.skill_md_len, sb.files, sb.nfiles, &z), ==,
              TK_OK);
    skill_bundle again;
    CHECK_INT(skill_bundle_parse(z.data, z.len, &again, err, sizeof err), ==, TK_OK);
    CHECK_STR(again.digest, sb.digest);
    CHECK_INT(again.nfiles, ==, 2);
    skill_bundle_free(&again);
    tk_buf_free(&z);

    /* the same skill at the zip's root, in another order: the same digest */
    zent root[] = {
        Z(.name = "scripts/run.py", .data = "print('hi')\n"),
        Z(.name = "SKILL.md", .data = MD("my-skill")),
        Z(.name = "references/a.md", .data = "# A\n"),
    };
    tk_buf b2;
    build(&b2, root, TK_ARRAY_LEN(root));
    skill_bundle sr;
    CHECK_INT(skill_bundle_parse(b2.data, b2.len, &sr, err, sizeof err), ==, TK_OK);
    CHECK_STR(sr.digest, sb.digest);
    skill_bundle_free(&sr);
    /* a byte changed: another digest */
    root[0].data = "print('ho')\n";
    tk_buf_free(&b2);
    build(&b2, root, TK_ARRAY_LEN(root));
    CHECK_INT(skill_bundle_parse(b2.data, b2.len, &sr, err, sizeof err), ==, TK_OK);
    CHECK(strcmp(sr.digest, sb.digest) != 0);
    skill_bundle_free(&sr);
    tk_buf_free(&b2);
    skill_bundle_free(&sb);
    tk_buf_free(&b);

    /* a SKILL.md on its own, an extra key kept with a warning */
    const char *md = "---\nname: solo\ndescription: Alone.\ntriggers: x\n---\nBody\n";
    CHECK_INT(skill_bundle_parse(md, strlen(md), &sb, err, sizeof err), ==, TK_OK);
    CHECK_STR(sb.name, "solo");
    CHECK_INT(sb.nfiles, ==, 0);
    CHECK_INT(json_array_size(sb.warnings), ==, 1);
    CHECK(strstr(json_string_value(json_array_get(sb.warnings, 0)), "triggers") != NULL);
    skill_bundle_free(&sb);
}

TEST(hostile_names_refused)
{
    const char *ok = MD("s");
#define ONE(nm, want)                                                                              \
    do {                                                                                           \
        zent e[] = {Z(.name = "SKILL.md", .data = ok), Z(.name = nm, .data = "x")};                \
        refused(e, 2, want);                                                                       \
    } while (0)
    ONE("../evil.sh", "\"..\" component");
    ONE("scripts/../../evil.sh", "\"..\" component");
    ONE("/etc/cron.d/evil", "absolute path");
    ONE("scripts\\evil.bat", "backslash");
    ONE("C:/evil", "drive letter");
    ONE("a//b", "\"\" component");
    ONE("./a", "\".\" component");
    ONE("a\x01", "control character");
    ONE("bad\xff\xfe", "not UTF-8");
#undef ONE
    /* duplicates, and a name both a file and a folder */
    zent dup[] = {Z(.name = "SKILL.md", .data = ok), Z(.name = "a.md", .data = "1"),
                  Z(.name = "a.md", .data = "2")};
    refused(dup, 3, "\"a.md\" is in the zip twice");
    zent dup2[] = {Z(.name = "s/SKILL.md", .data = ok), Z(.name = "s/SKILL.md", .data = ok)};
    refused(dup2, 2, "twice");
    zent ff[] = {Z(.name = "SKILL.md", .data = ok), Z(.name = "a", .data = "1"),
                 Z(.name = "a/b", .data = "2")};
    refused(ff, 3, "both a file and a folder");
    /* the local header naming another file than the directory */
    zent ln[] = {Z(.name = "SKILL.md", .data = ok),
                 Z(.name = "notes.md", .data = "x", .local_name = "../x.sh")};
    refused(ln, 2, "local header names another file");
}

TEST(hostile_entries_refused)
{
    const char *ok = MD("s");
    zent sym[] = {Z(.name = "SKILL.md", .data = ok),
                  Z(.name = "link", .data = "/etc/passwd", .mode = 0120777)};
    refused(sym, 2, "\"link\" is a symlink");
    zent fifo[] = {Z(.name = "SKILL.md", .data = ok), Z(.name = "p", .mode = 0010644)};
    refused(fifo, 2, "not a regular file or a folder");
    zent enc[] = {Z(.name = "SKILL.md", .data = ok), Z(.name = "x", .data = "x", .encrypted = 1)};
    refused(enc, 2, "encrypted");
    zent bz[] = {Z(.name = "SKILL.md", .data = ok), Z(.name = "x", .data = "x", .method = 12)};
    refused(bz, 2, "compression method 12");
    zent crc[] = {Z(.name = "SKILL.md", .data = ok), Z(.name = "x", .data = "x", .bad_crc = 1)};
    refused(crc, 2, "CRC does not match");
    /* a bomb: 2 MiB of zeros declared as 1 KiB */
    char *zeros = calloc(1, 2u << 20);
    zent bomb[] = {
        Z(.name = "SKILL.md", .data = ok),
        Z(.name = "big", .data = zeros, .len = 2u << 20, .deflate = 1, .declared = 1024)};
    refused(bomb, 2, "does not inflate to the 1024 bytes it declares");
    /* one file over 10 MiB (declared: refused before inflating) */
    zent big[] = {Z(.name = "SKILL.md", .data = ok), Z(.name = "big", .data = zeros, .len = 1024,
                                                       .deflate = 1, .declared = (10 << 20) + 1)};
    refused(big, 2, "a file may have at most 10485760");
    /* more than 100 MiB in all, each file within its cap: refused before any
     * is inflated */
    zent many[12];
    many[0] = Z(.name = "SKILL.md", .data = ok);
    char names[11][8];
    for (int i = 0; i < 11; i++) {
        snprintf(names[i], sizeof names[i], "f%02d", i);
        many[i + 1] =
            Z(.name = names[i], .data = zeros, .len = 1024, .deflate = 1, .declared = 10 << 20);
    }
    refused(many, 12, "unpacks to more than 104857600 bytes");
    free(zeros);
    /* 1,001 entries */
    zent *lots = calloc(1001, sizeof *lots);
    char(*ln)[12] = calloc(1001, 12);
    lots[0] = Z(.name = "SKILL.md", .data = ok);
    for (int i = 1; i < 1001; i++) {
        snprintf(ln[i], 12, "r/%04d", i);
        lots[i] = Z(.name = ln[i], .data = "x");
    }
    refused(lots, 1001, "the zip has 1001 entries (at most 1000)");
    /* exactly 1,000 pass */
    tk_buf b;
    build(&b, lots, 1000);
    skill_bundle sb;
    CHECK_INT(skill_bundle_parse(b.data, b.len, &sb, err, sizeof err), ==, TK_OK);
    CHECK_INT(sb.nfiles, ==, 999);
    skill_bundle_free(&sb);
    tk_buf_free(&b);
    free(lots);
    free(ln);
}

TEST(layout_and_skill_md_refused)
{
    zent none[] = {Z(.name = "README.md", .data = "x")};
    refused(none, 1, "no SKILL.md");
    zent two[] = {Z(.name = "a/SKILL.md", .data = MD("a")), Z(.name = "b/x.md", .data = "x")};
    refused(two, 2, "\"b/x.md\" lies outside the folder \"a/\"");
    zent deep[] = {Z(.name = "a/b/SKILL.md", .data = MD("b"))};
    refused(deep, 1, "no SKILL.md");
    zent named[] = {Z(.name = "other/SKILL.md", .data = MD("my-skill"))};
    refused(named, 1, "SKILL.md:");
    zent latin1[] = {Z(.name = "SKILL.md", .data = "---\nname: s\ndescription: caf\xe9\n---\n")};
    refused(latin1, 1, "SKILL.md:");
    zent nofm[] = {Z(.name = "SKILL.md", .data = "# just markdown\n")};
    refused(nofm, 1, "SKILL.md:");
    /* a SKILL.md on its own that breaks the format, and an upload too big */
    skill_bundle sb;
    const char *bad = "---\nname: Bad_Name\ndescription: x\n---\n";
    CHECK_INT(skill_bundle_parse(bad, strlen(bad), &sb, err, sizeof err), ==, TK_EINVAL);
    CHECK(strstr(err, "name") != NULL);
    char *huge = calloc(1, SKILL_BUNDLE_UPLOAD_MAX + 1);
    memcpy(huge, "PK\3\4", 4);
    CHECK_INT(skill_bundle_parse(huge, SKILL_BUNDLE_UPLOAD_MAX + 1, &sb, err, sizeof err), ==,
              TK_EINVAL);
    CHECK(strstr(err, "at most 20971520") != NULL);
    free(huge);
    /* not a zip though it starts like one */
    CHECK_INT(skill_bundle_parse("PK\3\4junk", 8, &sb, err, sizeof err), ==, TK_EINVAL);
    CHECK(strstr(err, "not a zip") != NULL);
}

TEST_MAIN()
