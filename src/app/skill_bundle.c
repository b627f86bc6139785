/* An uploaded skill checked before it is stored, and a skill written as a
 * .skill zip. See skill_bundle.h. */
#include "app/skill_bundle.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "lib/skillmd.h"
#include "lib/utf8.h"

static uint32_t rd16(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8;
}

static uint32_t rd32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        snprintf(err, errsz, __VA_ARGS__);                                                         \
        goto fail;                                                                                 \
    } while (0)

/* 1 when name[0..n) is a path we store: relative, no "", "." or ".."
 * component, no backslash, no control character, UTF-8. why says what not. */
static int path_ok(const char *s, size_t n, char *why, size_t whysz)
{
    if (n == 0) {
        snprintf(why, whysz, "an empty name");
        return 0;
    }
    if (n > SKILL_BUNDLE_PATH_MAX) {
        snprintf(why, whysz, "a name longer than %d bytes", SKILL_BUNDLE_PATH_MAX);
        return 0;
    }
    if (!tk_utf8_valid(s, n)) {
        snprintf(why, whysz, "a name that is not UTF-8");
        return 0;
    }
    if (s[0] == '/') {
        snprintf(why, whysz, "an absolute path \"%.*s\"", (int)(n > 100 ? 100 : n), s);
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\\') {
            snprintf(why, whysz, "a backslash in \"%.*s\"", (int)(n > 100 ? 100 : n), s);
            return 0;
        }
        if (c < 0x20 || c == 0x7f) {
            snprintf(why, whysz, "a control character in a name");
            return 0;
        }
    }
    if (n >= 2 && s[1] == ':') {
        snprintf(why, whysz, "a drive letter in \"%.*s\"", (int)(n > 100 ? 100 : n), s);
        return 0;
    }
    /* components (a trailing '/' marks a folder and is allowed) */
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && s[i] != '/')
            continue;
        size_t len = i - start;
        if (i == n && len == 0 && n > 0 && s[n - 1] == '/')
            break;
        if (len == 0 || (len == 1 && s[start] == '.') ||
            (len == 2 && s[start] == '.' && s[start + 1] == '.')) {
            snprintf(why, whysz, "\"%.*s\" has a \"%.*s\" component", (int)(n > 100 ? 100 : n), s,
                     (int)len, s + start);
            return 0;
        }
        if (len > 255) {
            snprintf(why, whysz, "a name component longer than 255 bytes");
            return 0;
        }
        start = i + 1;
    }
    return 1;
}

/* Left out of an upload: macOS's resource forks and folder settings. */
static int ignored(const char *s, size_t n)
{
    if (n >= 9 && memcmp(s, "__MACOSX/", 9) == 0)
        return 1;
    const char *base = s;
    for (size_t i = 0; i < n; i++)
        if (s[i] == '/')
            base = s + i + 1;
    return (size_t)(s + n - base) == 9 && memcmp(base, ".DS_Store", 9) == 0;
}

typedef struct {
    char *path;
    unsigned char *data;
    size_t size;
} entry;

static void entries_free(entry *e, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(e[i].path);
        free(e[i].data);
    }
    free(e);
}

static int entry_cmp(const void *a, const void *b)
{
    return strcmp(((const entry *)a)->path, ((const entry *)b)->path);
}

/* The files of a zip (folders dropped), every check of skill_bundle.h but the
 * layout. */
static tk_status zip_entries(const unsigned char *z, size_t len, entry **out, size_t *nout,
                             char *err, size_t errsz)
{
    entry *es = NULL;
    size_t ne = 0;
    *out = NULL;
    *nout = 0;
    if (len < 22)
        FAIL("not a zip file (too short)");
    size_t eocd = (size_t)-1;
    size_t lowest = len > 65557 ? len - 65557 : 0;
    for (size_t i = len - 22 + 1; i-- > lowest;)
        if (rd32(z + i) == 0x06054b50) {
            eocd = i;
            break;
        }
    if (eocd == (size_t)-1)
        FAIL("not a zip file (no end of central directory)");
    uint32_t disk = rd16(z + eocd + 4), cddisk = rd16(z + eocd + 6), here = rd16(z + eocd + 8),
             total = rd16(z + eocd + 10), cdsize = rd32(z + eocd + 12), cdoff = rd32(z + eocd + 16);
    if (total == 0xFFFF || cdsize == 0xFFFFFFFFu || cdoff == 0xFFFFFFFFu)
        FAIL("zip64 archives are not accepted");
    if (disk != 0 || cddisk != 0 || here != total)
        FAIL("multi-part zip archives are not accepted");
    if (total > SKILL_BUNDLE_ENTRIES_MAX)
        FAIL("the zip has %u entries (at most %d)", total, SKILL_BUNDLE_ENTRIES_MAX);
    if ((size_t)cdoff > eocd || (size_t)cdsize > eocd - cdoff)
        FAIL("the zip's central directory lies outside the file");
    es = tk_calloc((size_t)total + 1, sizeof *es);
    /* two passes: every header checked and the sizes summed before anything
     * is inflated */
    for (int pass = 0; pass < 2; pass++) {
        size_t p = cdoff, end = (size_t)cdoff + cdsize;
        uint64_t declared = 0;
        for (uint32_t i = 0; i < total; i++) {
            if (end - p < 46 || rd32(z + p) != 0x02014b50)
                FAIL("malformed zip central directory (entry %u)", i + 1);
            uint32_t made = rd16(z + p + 4), flags = rd16(z + p + 8), method = rd16(z + p + 10),
                     crc = rd32(z + p + 16), csize = rd32(z + p + 20), usize = rd32(z + p + 24),
                     nl = rd16(z + p + 28), xl = rd16(z + p + 30), cl = rd16(z + p + 32),
                     ext = rd32(z + p + 38), loff = rd32(z + p + 42);
            if (end - p - 46 < (size_t)nl + xl + cl)
                FAIL("malformed zip central directory (entry %u)", i + 1);
            const char *name = (const char *)z + p + 46;
            int show = (int)(nl > 100 ? 100 : nl);
            p += 46 + (size_t)nl + xl + cl;
            char why[200];
            if (memchr(name, 0, nl))
                FAIL("entry %u: a NUL byte in its name", i + 1);
            if (!path_ok(name, nl, why, sizeof why))
                FAIL("entry %u: %s", i + 1, why);
            int is_dir = name[nl - 1] == '/';
            if ((made >> 8) == 3) { /* Unix: the mode is in the high half */
                uint32_t type = (ext >> 16) & 0170000;
                if (type == 0120000)
                    FAIL("\"%.*s\" is a symlink (not accepted)", show, name);
                if (type != 0 && type != 0100000 && type != 0040000)
                    FAIL("\"%.*s\" is not a regular file or a folder", show, name);
                if ((type == 0040000) != is_dir && type != 0)
                    FAIL("\"%.*s\": its mode and its name disagree on being a folder", show, name);
            }
            if (flags & 1)
                FAIL("\"%.*s\" is encrypted (not accepted)", show, name);
            if (method != 0 && method != 8)
                FAIL("\"%.*s\": compression method %u (only stored and deflate)", show, name,
                     method);
            if (is_dir) {
                if (usize != 0 || csize != 0)
                    FAIL("the folder entry \"%.*s\" has data", show, name);
                continue;
            }
            if (usize > SKILL_BUNDLE_FILE_MAX)
                FAIL("\"%.*s\" is %u bytes unpacked (a file may have at most %zu)", show, name,
                     usize, SKILL_BUNDLE_FILE_MAX);
            declared += usize;
            if (declared > SKILL_BUNDLE_TOTAL_MAX)
                FAIL("the zip unpacks to more than %zu bytes (at most %zu)", SKILL_BUNDLE_TOTAL_MAX,
                     SKILL_BUNDLE_TOTAL_MAX);
            if (method == 0 && csize != usize)
                FAIL("\"%.*s\": a stored entry whose sizes differ", show, name);
            if ((size_t)loff > len || len - loff < 30 || rd32(z + loff) != 0x04034b50)
                FAIL("\"%.*s\": its local header lies outside the file", show, name);
            uint32_t lnl = rd16(z + loff + 26), lxl = rd16(z + loff + 28);
            if (len - loff - 30 < (size_t)lnl + lxl || lnl != nl ||
                memcmp(z + loff + 30, name, nl) != 0)
                FAIL("\"%.*s\": its local header names another file", show, name);
            size_t dataoff = (size_t)loff + 30 + lnl + lxl;
            if (len - dataoff < csize)
                FAIL("\"%.*s\": its data lies outside the file", show, name);
            if (pass == 0)
                continue;
            unsigned char *data = tk_malloc((size_t)usize + 1);
            if (method == 0) {
                memcpy(data, z + dataoff, usize);
            } else {
                z_stream zs;
                memset(&zs, 0, sizeof zs);
                if (inflateInit2(&zs, -MAX_WBITS) != Z_OK) {
                    free(data);
                    FAIL("inflateInit failed");
                }
                unsigned char spare[1];
                zs.next_in = (Bytef *)(z + dataoff);
                zs.avail_in = csize;
                /* one byte of room past the declared size: more is refused */
                zs.next_out = usize ? data : spare;
                zs.avail_out = usize ? usize + 1 : 1;
                int rc = inflate(&zs, Z_FINISH);
                size_t got = (usize ? (size_t)usize + 1 : 1) - zs.avail_out;
                inflateEnd(&zs);
                if (rc != Z_STREAM_END || got != usize) {
                    free(data);
                    FAIL("\"%.*s\" does not inflate to the %u bytes it declares (a zip bomb?)",
                         show, name, usize);
                }
            }
            data[usize] = 0;
            if ((uint32_t)crc32(0L, data, usize) != crc) {
                free(data);
                FAIL("\"%.*s\": the CRC does not match (a corrupt zip)", show, name);
            }
            if (ignored(name, nl)) {
                free(data);
                continue;
            }
            es[ne++] = (entry){.path = tk_strndup(name, nl), .data = data, .size = usize};
        }
    }
    *out = es;
    *nout = ne;
    return TK_OK;
fail:
    entries_free(es, ne);
    return TK_EINVAL;
}

void skill_bundle_free(skill_bundle *b)
{
    free(b->description);
    free(b->skill_md);
    for (size_t i = 0; i < b->nfiles; i++) {
        free(b->files[i].path);
        free((void *)b->files[i].data);
    }
    free(b->files);
    json_decref(b->warnings);
    memset(b, 0, sizeof *b);
}

/* Fills b from SKILL.md's text (owned by b from here) and the other files. */
static tk_status finish(skill_bundle *b, char *md, size_t md_len, const char *folder, entry *es,
                        size_t ne, char *err, size_t errsz)
{
    tk_skill_md m;
    char why[300];
    if (tk_skillmd_parse(md, md_len, folder, &m, why, sizeof why) != TK_OK) {
        snprintf(err, errsz, "SKILL.md: %s", why);
        free(md);
        entries_free(es, ne);
        return TK_EINVAL;
    }
    snprintf(b->name, sizeof b->name, "%s", m.name);
    b->description = tk_strdup(m.description);
    b->warnings = json_array();
    for (size_t i = 0; i < m.n_warnings; i++)
        json_array_append_new(b->warnings, json_string(m.warnings[i]));
    tk_skillmd_free(&m);
    b->skill_md = md;
    b->skill_md_len = md_len;
    b->files = tk_calloc(ne + 1, sizeof *b->files);
    b->bytes = md_len;
    for (size_t i = 0; i < ne; i++) {
        b->files[i] = (skills_file_ref){.path = es[i].path, .data = es[i].data, .size = es[i].size};
        b->bytes += es[i].size;
    }
    b->nfiles = ne;
    free(es);
    skills_digest(b->skill_md, b->skill_md_len, b->files, b->nfiles, b->digest);
    return TK_OK;
}

tk_status skill_bundle_parse(const void *data, size_t len, skill_bundle *out, char *err,
                             size_t errsz)
{
    memset(out, 0, sizeof *out);
    const unsigned char *z = data;
    if (len > SKILL_BUNDLE_UPLOAD_MAX) {
        snprintf(err, errsz, "the upload is %zu bytes (at most %zu)", len, SKILL_BUNDLE_UPLOAD_MAX);
        return TK_EINVAL;
    }
    if (len < 4 || memcmp(z, "PK\3\4", 4) != 0) {
        if (len > SKILL_BUNDLE_FILE_MAX) {
            snprintf(err, errsz, "SKILL.md is %zu bytes (a file may have at most %zu)", len,
                     SKILL_BUNDLE_FILE_MAX);
            return TK_EINVAL;
        }
        /* a SKILL.md on its own */
        return finish(out, tk_strndup(data, len), len, NULL, NULL, 0, err, errsz);
    }
    entry *es;
    size_t ne;
    if (zip_entries(z, len, &es, &ne, err, errsz) != TK_OK)
        return TK_EINVAL;
    /* the layout: SKILL.md at the root, or everything in one top folder */
    const char *folder = NULL;
    size_t flen = 0;
    int at_root = 0;
    for (size_t i = 0; i < ne; i++)
        if (strcmp(es[i].path, "SKILL.md") == 0)
            at_root = 1;
    if (!at_root && ne > 0) {
        const char *slash = strchr(es[0].path, '/');
        if (slash) {
            folder = es[0].path;
            flen = (size_t)(slash - es[0].path);
        }
        for (size_t i = 0; folder && i < ne; i++)
            if (strncmp(es[i].path, folder, flen) != 0 || es[i].path[flen] != '/') {
                snprintf(err, errsz,
                         "\"%.100s\" lies outside the folder \"%.*s/\" (a skill is one folder "
                         "with SKILL.md in it)",
                         es[i].path, (int)flen, folder);
                entries_free(es, ne);
                return TK_EINVAL;
            }
    }
    char fname[TK_SKILL_NAME_MAX + 2] = "";
    if (folder) {
        if (flen >= sizeof fname) {
            snprintf(err, errsz, "the top folder's name is longer than %d characters",
                     TK_SKILL_NAME_MAX);
            entries_free(es, ne);
            return TK_EINVAL;
        }
        memcpy(fname, folder, flen);
        fname[flen] = 0;
        for (size_t i = 0; i < ne; i++) /* strip "<folder>/" */
            memmove(es[i].path, es[i].path + flen + 1, strlen(es[i].path + flen + 1) + 1);
    }
    qsort(es, ne, sizeof *es, entry_cmp);
    for (size_t i = 0; i + 1 < ne; i++) {
        size_t a = strlen(es[i].path);
        if (strcmp(es[i].path, es[i + 1].path) == 0) {
            snprintf(err, errsz, "\"%.100s\" is in the zip twice", es[i].path);
            entries_free(es, ne);
            return TK_EINVAL;
        }
        if (strncmp(es[i].path, es[i + 1].path, a) == 0 && es[i + 1].path[a] == '/') {
            snprintf(err, errsz, "\"%.100s\" is both a file and a folder", es[i].path);
            entries_free(es, ne);
            return TK_EINVAL;
        }
    }
    size_t md = ne;
    for (size_t i = 0; i < ne; i++)
        if (strcmp(es[i].path, "SKILL.md") == 0)
            md = i;
    if (md == ne) {
        snprintf(err, errsz, "no SKILL.md at the zip's root or in its one top folder");
        entries_free(es, ne);
        return TK_EINVAL;
    }
    char *text = (char *)es[md].data;
    size_t tlen = es[md].size;
    free(es[md].path);
    memmove(es + md, es + md + 1, (ne - md - 1) * sizeof *es);
    ne--;
    return finish(out, text, tlen, folder ? fname : NULL, es, ne, err, errsz);
}

/* ---------------------------------------------------------------- writing */

static void wr16(tk_buf *b, uint32_t v)
{
    unsigned char p[2] = {(unsigned char)v, (unsigned char)(v >> 8)};
    tk_buf_append(b, p, 2);
}

static void wr32(tk_buf *b, uint32_t v)
{
    unsigned char p[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 24)};
    tk_buf_append(b, p, 4);
}

tk_status skill_bundle_zip(const char *name, const char *skill_md, size_t md_len,
                           const skills_file_ref *files, size_t n, tk_buf *out)
{
    size_t total = n + 1;
    uint32_t *offs = tk_calloc(total, sizeof *offs), *crcs = tk_calloc(total, sizeof *crcs);
    char **paths = tk_calloc(total, sizeof *paths);
    const unsigned char **datas = tk_calloc(total, sizeof *datas);
    size_t *sizes = tk_calloc(total, sizeof *sizes);
    paths[0] = tk_asprintf("%s/SKILL.md", name);
    datas[0] = (const unsigned char *)skill_md;
    sizes[0] = md_len;
    for (size_t i = 0; i < n; i++) {
        paths[i + 1] = tk_asprintf("%s/%s", name, files[i].path);
        datas[i + 1] = files[i].data;
        sizes[i + 1] = files[i].size;
    }
    tk_status st = TK_OK;
    for (size_t i = 0; i < total && st == TK_OK; i++) {
        if (out->len > 0xFFFFFFF0u || sizes[i] > 0xFFFFFFF0u) {
            st = TK_ETOOBIG;
            break;
        }
        offs[i] = (uint32_t)out->len;
        crcs[i] = (uint32_t)crc32(0L, datas[i], (uInt)sizes[i]);
        wr32(out, 0x04034b50);
        wr16(out, 10);     /* version needed */
        wr16(out, 0x0800); /* UTF-8 names */
        wr16(out, 0);      /* stored */
        wr16(out, 0);      /* time */
        wr16(out, 0x21);   /* date: 1980-01-01 */
        wr32(out, crcs[i]);
        wr32(out, (uint32_t)sizes[i]);
        wr32(out, (uint32_t)sizes[i]);
        wr16(out, (uint32_t)strlen(paths[i]));
        wr16(out, 0);
        tk_buf_append_str(out, paths[i]);
        if (tk_buf_append(out, datas[i], sizes[i]) != TK_OK)
            st = TK_ETOOBIG;
    }
    size_t cd = out->len;
    for (size_t i = 0; i < total && st == TK_OK; i++) {
        wr32(out, 0x02014b50);
        wr16(out, 0x031E); /* made by: Unix, 3.0 */
        wr16(out, 10);
        wr16(out, 0x0800);
        wr16(out, 0);
        wr16(out, 0);
        wr16(out, 0x21);
        wr32(out, crcs[i]);
        wr32(out, (uint32_t)sizes[i]);
        wr32(out, (uint32_t)sizes[i]);
        wr16(out, (uint32_t)strlen(paths[i]));
        wr16(out, 0);
        wr16(out, 0);
        wr16(out, 0);
        wr16(out, 0);
        int exec = strncmp(paths[i] + strlen(name) + 1, "scripts/", 8) == 0;
        wr32(out, (uint32_t)(exec ? 0100755 : 0100644) << 16);
        wr32(out, offs[i]);
        if (tk_buf_append_str(out, paths[i]) != TK_OK)
            st = TK_ETOOBIG;
    }
    if (st == TK_OK) {
        size_t cdlen = out->len - cd;
        wr32(out, 0x06054b50);
        wr16(out, 0);
        wr16(out, 0);
        wr16(out, (uint32_t)total);
        wr16(out, (uint32_t)total);
        wr32(out, (uint32_t)cdlen);
        wr32(out, (uint32_t)cd);
        if (tk_buf_append(out, "\0\0", 2) != TK_OK)
            st = TK_ETOOBIG;
    }
    for (size_t i = 0; i < total; i++)
        free(paths[i]);
    free(paths);
    free(datas);
    free(sizes);
    free(offs);
    free(crcs);
    return st;
}
