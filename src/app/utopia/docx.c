/*
 * docx.c — the zip reader with zip-bomb checks, and WordprocessingML to blocks.
 * Runs in the isolated helper only (see docx.h).
 */
#include "app/utopia/docx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "lib/utf8.h"

#define ZIP_MAX_ENTRIES 10000
#define ZIP_MAX_RATIO   100
#define ZIP_RATIO_FREE  ((size_t)1 << 20) /* entries this small may compress better */

static uint32_t rd16(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8;
}
static uint32_t rd32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

tk_status utopia_zip_find(const void *zip, size_t len, const char *name, size_t max_xml,
                          char **data, size_t *datalen, char *err, size_t errlen)
{
    const unsigned char *z = zip;
    *data = NULL;
    *datalen = 0;
    if (len < 22) {
        snprintf(err, errlen, "not a zip file (too short)");
        return TK_EINVAL;
    }
    /* the end-of-central-directory record, within the last 64 KiB + 22 bytes */
    size_t eocd = (size_t)-1;
    size_t lowest = len > 65557 ? len - 65557 : 0;
    for (size_t i = len - 22 + 1; i-- > lowest;) {
        if (rd32(z + i) == 0x06054b50) {
            eocd = i;
            break;
        }
    }
    if (eocd == (size_t)-1) {
        snprintf(err, errlen, "not a zip file (no end of central directory)");
        return TK_EINVAL;
    }
    uint32_t nentries = rd16(z + eocd + 10), cdsize = rd32(z + eocd + 12),
             cdoff = rd32(z + eocd + 16);
    if (nentries == 0xFFFF || cdsize == 0xFFFFFFFFu || cdoff == 0xFFFFFFFFu) {
        snprintf(err, errlen, "zip64 archives are not accepted");
        return TK_EINVAL;
    }
    if (nentries > ZIP_MAX_ENTRIES) {
        snprintf(err, errlen, "the zip has %u entries (at most %d are accepted)", nentries,
                 ZIP_MAX_ENTRIES);
        return TK_EINVAL;
    }
    if ((size_t)cdoff > eocd || (size_t)cdsize > eocd - cdoff) {
        snprintf(err, errlen, "the zip's central directory lies outside the file");
        return TK_EINVAL;
    }
    size_t p = cdoff, end = (size_t)cdoff + cdsize;
    uint64_t total = 0;
    const unsigned char *found = NULL;
    for (uint32_t i = 0; i < nentries; i++) {
        if (end - p < 46 || rd32(z + p) != 0x02014b50) {
            snprintf(err, errlen, "malformed zip central directory (entry %u)", i);
            return TK_EINVAL;
        }
        size_t nl = rd16(z + p + 28), xl = rd16(z + p + 30), cl = rd16(z + p + 32);
        if (end - p - 46 < nl + xl + cl) {
            snprintf(err, errlen, "malformed zip central directory (entry %u)", i);
            return TK_EINVAL;
        }
        total += rd32(z + p + 24);
        if (nl == strlen(name) && memcmp(z + p + 46, name, nl) == 0)
            found = z + p;
        p += 46 + nl + xl + cl;
    }
    if (total > (uint64_t)max_xml * 16) {
        snprintf(err, errlen,
                 "the zip declares %llu bytes uncompressed in all, past the cap of %llu (a zip "
                 "bomb?)",
                 (unsigned long long)total, (unsigned long long)max_xml * 16);
        return TK_EINVAL;
    }
    if (!found) {
        snprintf(err, errlen, "the zip has no %s", name);
        return TK_EINVAL;
    }
    uint32_t flags = rd16(found + 8), method = rd16(found + 10), csize = rd32(found + 20),
             usize = rd32(found + 24), loff = rd32(found + 42);
    if (flags & 1) {
        snprintf(err, errlen, "encrypted documents are not accepted");
        return TK_EINVAL;
    }
    if (method != 0 && method != 8) {
        snprintf(err, errlen, "unsupported zip compression method %u", method);
        return TK_EINVAL;
    }
    if (usize > max_xml) {
        snprintf(err, errlen, "%s declares %u bytes, past the cap of %zu", name, usize, max_xml);
        return TK_EINVAL;
    }
    if (method == 8 && usize > ZIP_RATIO_FREE &&
        (uint64_t)usize > (uint64_t)csize * ZIP_MAX_RATIO) {
        snprintf(err, errlen, "%s would expand %u bytes to %u (more than %d times: a zip bomb?)",
                 name, csize, usize, ZIP_MAX_RATIO);
        return TK_EINVAL;
    }
    if (method == 0 && csize != usize) {
        snprintf(err, errlen, "stored zip entry with differing sizes");
        return TK_EINVAL;
    }
    if ((size_t)loff > len || len - loff < 30 || rd32(z + loff) != 0x04034b50) {
        snprintf(err, errlen, "the zip entry's local header lies outside the file");
        return TK_EINVAL;
    }
    size_t dataoff = (size_t)loff + 30 + rd16(z + loff + 26) + rd16(z + loff + 28);
    if (dataoff > len || len - dataoff < csize) {
        snprintf(err, errlen, "the zip entry's data lies outside the file");
        return TK_EINVAL;
    }
    char *outbuf = tk_malloc((size_t)usize + 1);
    if (method == 0) {
        memcpy(outbuf, z + dataoff, usize);
    } else {
        z_stream zs;
        memset(&zs, 0, sizeof zs);
        if (inflateInit2(&zs, -MAX_WBITS) != Z_OK) {
            free(outbuf);
            snprintf(err, errlen, "inflateInit failed");
            return TK_ERROR;
        }
        zs.next_in = (Bytef *)(z + dataoff);
        zs.avail_in = csize;
        zs.next_out = (Bytef *)outbuf;
        zs.avail_out = usize;
        int rc = inflate(&zs, Z_FINISH);
        size_t got = (size_t)usize - zs.avail_out;
        inflateEnd(&zs);
        if (rc != Z_STREAM_END && zs.avail_out == 0) {
            free(outbuf);
            snprintf(err, errlen, "%s inflates to more than the %u bytes it declares (a zip bomb?)",
                     name, usize);
            return TK_EINVAL;
        }
        if (rc != Z_STREAM_END || got != usize) {
            free(outbuf);
            snprintf(err, errlen, "%s is corrupt (%s)", name,
                     rc == Z_STREAM_END ? "size mismatch"
                     : zs.msg           ? zs.msg
                                        : zError(rc));
            return TK_EINVAL;
        }
    }
    outbuf[usize] = 0;
    *data = outbuf;
    *datalen = usize;
    return TK_OK;
}

/* ---- WordprocessingML ---- */

/* The value of attribute `attr` (e.g. "w:val") in a tag's attribute text. */
static int attr_val(const char *a, size_t alen, const char *attr, char *out, size_t outlen)
{
    size_t al = strlen(attr);
    for (size_t i = 0; i + al + 2 <= alen; i++) {
        if (memcmp(a + i, attr, al) == 0 && a[i + al] == '=' &&
            (a[i + al + 1] == '"' || a[i + al + 1] == '\'') &&
            (i == 0 || a[i - 1] == ' ' || a[i - 1] == '\t' || a[i - 1] == '\n')) {
            char q = a[i + al + 1];
            size_t j = i + al + 2, n = 0;
            while (j < alen && a[j] != q && n < outlen - 1)
                out[n++] = a[j++];
            out[n] = 0;
            return 1;
        }
    }
    return 0;
}

static tk_status xml_text(tk_buf *b, const char *s, size_t n)
{
    tk_status st = TK_OK;
    for (size_t i = 0; i < n && st == TK_OK; i++) {
        if (s[i] != '&') {
            st = tk_buf_append_byte(b, s[i]);
            continue;
        }
        const char *semi = memchr(s + i, ';', TK_MIN(n - i, (size_t)12));
        if (!semi) {
            st = tk_buf_append_byte(b, '&');
            continue;
        }
        size_t el = (size_t)(semi - (s + i)) - 1;
        const char *e = s + i + 1;
        const char *rep = NULL;
        char u[5] = {0};
        if (el == 2 && memcmp(e, "lt", 2) == 0)
            rep = "<";
        else if (el == 2 && memcmp(e, "gt", 2) == 0)
            rep = ">";
        else if (el == 3 && memcmp(e, "amp", 3) == 0)
            rep = "&";
        else if (el == 4 && memcmp(e, "quot", 4) == 0)
            rep = "\"";
        else if (el == 4 && memcmp(e, "apos", 4) == 0)
            rep = "'";
        else if (el >= 2 && e[0] == '#') {
            unsigned long cp = 0;
            int hex = e[1] == 'x' || e[1] == 'X';
            for (size_t k = hex ? 2 : 1; k < el; k++) {
                char c = e[k];
                int d = c >= '0' && c <= '9'          ? c - '0'
                        : hex && c >= 'a' && c <= 'f' ? c - 'a' + 10
                        : hex && c >= 'A' && c <= 'F' ? c - 'A' + 10
                                                      : -1;
                if (d < 0 || cp > 0x10FFFF) {
                    cp = 0xFFFD;
                    break;
                }
                cp = cp * (hex ? 16 : 10) + (unsigned long)d;
            }
            if (cp == 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
                cp = 0xFFFD;
            tk_utf8_encode((uint32_t)cp, u); /* u[4] stays the NUL */
            rep = u;
        }
        if (!rep) {
            st = tk_buf_append_byte(b, '&');
            continue;
        }
        st = tk_buf_append_str(b, rep);
        i += el + 1;
    }
    return st;
}

tk_status utopia_docx_xml_to_blocks(const char *x, size_t len, utopia_blocks *out)
{
    tk_buf para, row;
    size_t cap = out->max_bytes ? out->max_bytes : (size_t)1 << 30;
    tk_buf_init(&para, cap);
    tk_buf_init(&row, cap);
    int in_t = 0, level = 0, in_row = 0;
    tk_status st = TK_OK;
    size_t i = 0;
    while (i < len && st == TK_OK) {
        const char *lt = memchr(x + i, '<', len - i);
        size_t textend = lt ? (size_t)(lt - x) : len;
        if (in_t && textend > i)
            st = xml_text(in_row ? &row : &para, x + i, textend - i);
        if (!lt || st != TK_OK)
            break;
        size_t j = textend + 1;
        if (len - j >= 3 && memcmp(x + j, "!--", 3) == 0) {
            const char *e = memmem(x + j, len - j, "-->", 3);
            i = e ? (size_t)(e - x) + 3 : len;
            continue;
        }
        int closing = j < len && x[j] == '/';
        if (closing)
            j++;
        size_t ns = j;
        while (j < len && x[j] != ' ' && x[j] != '>' && x[j] != '/' && x[j] != '\t' &&
               x[j] != '\n' && x[j] != '\r')
            j++;
        const char *name = x + ns;
        size_t nl = j - ns;
        size_t as = j;
        char q = 0;
        while (j < len && (q || x[j] != '>')) {
            if (q && x[j] == q)
                q = 0;
            else if (!q && (x[j] == '"' || x[j] == '\''))
                q = x[j];
            j++;
        }
        if (j >= len)
            break;
        int selfclose = j > as && x[j - 1] == '/';
        const char *attrs = x + as;
        size_t alen = j - as;
        i = j + 1;
        /* local name: after the prefix */
        const char *colon = memchr(name, ':', nl);
        if (colon) {
            nl -= (size_t)(colon + 1 - name);
            name = colon + 1;
        }
#define IS(s) (nl == sizeof(s) - 1 && memcmp(name, s, nl) == 0)
        tk_buf *cur = in_row ? &row : &para;
        if (IS("p")) {
            if (!closing && !selfclose && !in_row) {
                tk_buf_reset(&para);
                level = 0;
            } else if (closing && !in_row) {
                st = utopia_blocks_add(out, level ? UTOPIA_BLOCK_HEADING : UTOPIA_BLOCK_PARA, level,
                                       tk_buf_cstr(&para), para.len);
                tk_buf_reset(&para);
                level = 0;
            } else if (closing && in_row) {
                st = tk_buf_append_byte(&row, ' ');
            }
        } else if (IS("pStyle") && !closing) {
            char v[64];
            if (attr_val(attrs, alen, "w:val", v, sizeof v)) {
                if (strncmp(v, "Heading", 7) == 0 && v[7] >= '1' && v[7] <= '6' && !v[8])
                    level = v[7] - '0';
                else if (strcmp(v, "Title") == 0)
                    level = 1;
            }
        } else if (IS("outlineLvl") && !closing && !level) {
            char v[16];
            if (attr_val(attrs, alen, "w:val", v, sizeof v) && v[0] >= '0' && v[0] <= '5' && !v[1])
                level = v[0] - '0' + 1;
        } else if (IS("t")) {
            in_t = !closing && !selfclose;
        } else if (IS("tab") && !closing) {
            st = tk_buf_append_byte(cur, '\t');
        } else if ((IS("br") || IS("cr")) && !closing) {
            st = tk_buf_append_byte(cur, '\n');
        } else if (IS("tr")) {
            if (!closing && !selfclose) {
                if (in_row++ == 0)
                    tk_buf_reset(&row);
            } else if (closing && in_row > 0 && --in_row == 0) {
                st = utopia_blocks_add(out, UTOPIA_BLOCK_PARA, 0, tk_buf_cstr(&row), row.len);
                tk_buf_reset(&row);
            }
        } else if (IS("tc") && closing && in_row) {
            st = tk_buf_append_str(&row, " | ");
        }
#undef IS
    }
    if (st == TK_OK && para.len)
        st = utopia_blocks_add(out, UTOPIA_BLOCK_PARA, 0, para.data, para.len);
    tk_buf_free(&para);
    tk_buf_free(&row);
    return st;
}

tk_status utopia_docx_extract(const void *zip, size_t len, size_t max_xml, utopia_blocks *out,
                              char *err, size_t errlen)
{
    char *xml = NULL;
    size_t xl = 0;
    tk_status st = utopia_zip_find(zip, len, "word/document.xml", max_xml, &xml, &xl, err, errlen);
    if (st != TK_OK)
        return st;
    st = utopia_docx_xml_to_blocks(xml, xl, out);
    if (st == TK_ETOOBIG)
        snprintf(err, errlen, "the document's text is larger than the cap");
    free(xml);
    return st;
}
