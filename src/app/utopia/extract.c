/*
 * extract.c — format detection and the in-process extractors (text, Markdown,
 * CSV, JSON; HTML is in html.c), and the hand-off of PDF and DOCX to an
 * isolated extractor.
 */
#include "app/utopia/extract.h"

#include <cmark-gfm-core-extensions.h>
#include <cmark-gfm.h>
#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lib/json.h"

static const struct {
    const char *mime;
    utopia_format fmt;
} mimes[] = {
    {"text/plain", UTOPIA_FMT_TEXT},
    {"text/markdown", UTOPIA_FMT_MARKDOWN},
    {"text/x-markdown", UTOPIA_FMT_MARKDOWN},
    {"text/html", UTOPIA_FMT_HTML},
    {"application/xhtml+xml", UTOPIA_FMT_HTML},
    {"text/csv", UTOPIA_FMT_CSV},
    {"text/tab-separated-values", UTOPIA_FMT_CSV},
    {"application/json", UTOPIA_FMT_JSON},
    {"text/json", UTOPIA_FMT_JSON},
    {"application/pdf", UTOPIA_FMT_PDF},
    {"application/vnd.openxmlformats-officedocument.wordprocessingml.document", UTOPIA_FMT_DOCX},
};

static const struct {
    const char *ext;
    utopia_format fmt;
} exts[] = {
    {"txt", UTOPIA_FMT_TEXT},          {"text", UTOPIA_FMT_TEXT}, {"md", UTOPIA_FMT_MARKDOWN},
    {"markdown", UTOPIA_FMT_MARKDOWN}, {"html", UTOPIA_FMT_HTML}, {"htm", UTOPIA_FMT_HTML},
    {"csv", UTOPIA_FMT_CSV},           {"tsv", UTOPIA_FMT_CSV},   {"json", UTOPIA_FMT_JSON},
    {"pdf", UTOPIA_FMT_PDF},           {"docx", UTOPIA_FMT_DOCX},
};

utopia_format utopia_format_detect(const char *mime, const char *filename, const void *data,
                                   size_t len)
{
    const unsigned char *d = data;
    /* magic numbers of the binary formats win over any claim: a "text/plain"
     * PDF must still go to the isolated extractor */
    if (len >= 5 && memcmp(d, "%PDF-", 5) == 0)
        return UTOPIA_FMT_PDF;
    int zip = len >= 4 && memcmp(d, "PK\3\4", 4) == 0;
    if (mime && *mime) {
        size_t ml = strcspn(mime, "; \t");
        for (size_t i = 0; i < TK_ARRAY_LEN(mimes); i++) {
            if (strlen(mimes[i].mime) == ml && strncasecmp(mime, mimes[i].mime, ml) == 0) {
                if (zip && mimes[i].fmt != UTOPIA_FMT_DOCX)
                    return UTOPIA_FMT_UNKNOWN; /* a zip claiming to be text */
                return mimes[i].fmt;
            }
        }
    }
    if (filename) {
        const char *dot = strrchr(filename, '.');
        if (dot) {
            for (size_t i = 0; i < TK_ARRAY_LEN(exts); i++) {
                if (strcasecmp(dot + 1, exts[i].ext) == 0) {
                    if (zip && exts[i].fmt != UTOPIA_FMT_DOCX)
                        return UTOPIA_FMT_UNKNOWN;
                    return exts[i].fmt;
                }
            }
        }
    }
    if (zip)
        return UTOPIA_FMT_DOCX; /* the only zip format we take */
    size_t i = 0;
    while (i < len && i < 512 && isspace(d[i]))
        i++;
    if (i < len && len - i >= 5 &&
        (strncasecmp((const char *)d + i, "<!doc", 5) == 0 ||
         strncasecmp((const char *)d + i, "<html", 5) == 0))
        return UTOPIA_FMT_HTML;
    if (i < len && (d[i] == '{' || d[i] == '['))
        return UTOPIA_FMT_JSON;
    /* text when the start has no NUL */
    if (memchr(d, 0, TK_MIN(len, (size_t)4096)) == NULL)
        return UTOPIA_FMT_TEXT;
    return UTOPIA_FMT_UNKNOWN;
}

const char *utopia_format_name(utopia_format f)
{
    switch (f) {
    case UTOPIA_FMT_TEXT:
        return "text";
    case UTOPIA_FMT_MARKDOWN:
        return "markdown";
    case UTOPIA_FMT_HTML:
        return "html";
    case UTOPIA_FMT_CSV:
        return "csv";
    case UTOPIA_FMT_JSON:
        return "json";
    case UTOPIA_FMT_PDF:
        return "pdf";
    case UTOPIA_FMT_DOCX:
        return "docx";
    default:
        return "unknown";
    }
}

const char *utopia_format_mime(utopia_format f)
{
    switch (f) {
    case UTOPIA_FMT_TEXT:
        return "text/plain";
    case UTOPIA_FMT_MARKDOWN:
        return "text/markdown";
    case UTOPIA_FMT_HTML:
        return "text/html";
    case UTOPIA_FMT_CSV:
        return "text/csv";
    case UTOPIA_FMT_JSON:
        return "application/json";
    case UTOPIA_FMT_PDF:
        return "application/pdf";
    case UTOPIA_FMT_DOCX:
        return "application/vnd.openxmlformats-officedocument.wordprocessingml.document";
    default:
        return "application/octet-stream";
    }
}

int utopia_format_untrusted(utopia_format f)
{
    return f == UTOPIA_FMT_PDF || f == UTOPIA_FMT_DOCX;
}

/* ---- plain text: paragraphs at blank lines, page breaks at form feeds ---- */

tk_status utopia_extract_text(const char *s, size_t len, utopia_blocks *out)
{
    size_t para = 0, i = 0;
    tk_status st = TK_OK;
    while (i <= len && st == TK_OK) {
        if (i == len || s[i] == '\f') {
            st = utopia_blocks_add(out, UTOPIA_BLOCK_PARA, 0, s + para, i - para);
            if (st == TK_OK && i < len)
                st = utopia_blocks_add(out, UTOPIA_BLOCK_PAGE, 0, "", 0);
            para = ++i;
            continue;
        }
        if (s[i] == '\n') {
            /* a line holding only blanks ends the paragraph */
            size_t j = i + 1;
            while (j < len && (s[j] == ' ' || s[j] == '\t' || s[j] == '\r'))
                j++;
            if (j < len && s[j] == '\n') {
                st = utopia_blocks_add(out, UTOPIA_BLOCK_PARA, 0, s + para, i - para);
                para = i = j + 1;
                continue;
            }
        }
        i++;
    }
    return st;
}

/* ---- Markdown, through cmark-gfm (tables included) ---- */

static pthread_once_t cmark_once = PTHREAD_ONCE_INIT;
static void cmark_init(void)
{
    cmark_gfm_core_extensions_ensure_registered();
}

tk_status utopia_extract_markdown(const char *s, size_t len, utopia_blocks *out)
{
    pthread_once(&cmark_once, cmark_init);
    cmark_parser *p = cmark_parser_new(CMARK_OPT_DEFAULT);
    cmark_syntax_extension *table = cmark_find_syntax_extension("table");
    if (table)
        cmark_parser_attach_syntax_extension(p, table);
    cmark_parser_feed(p, s, len);
    cmark_node *doc = cmark_parser_finish(p);
    tk_status st = TK_OK;
    tk_buf cur;
    tk_buf_init(&cur, out->max_bytes ? out->max_bytes : (size_t)1 << 30);
    int active = 0, level = 0;
    utopia_block_kind kind = UTOPIA_BLOCK_PARA;
    cmark_iter *it = cmark_iter_new(doc);
    cmark_event_type ev;
    while (st == TK_OK && (ev = cmark_iter_next(it)) != CMARK_EVENT_DONE) {
        cmark_node *n = cmark_iter_get_node(it);
        cmark_node_type t = cmark_node_get_type(n);
        const char *tname = cmark_node_get_type_string(n);
        int is_row =
            tname && (strcmp(tname, "table_row") == 0 || strcmp(tname, "table_header") == 0);
        int is_cell = tname && strcmp(tname, "table_cell") == 0;
        int container = t == CMARK_NODE_PARAGRAPH || t == CMARK_NODE_HEADING || is_row;
        if (container && ev == CMARK_EVENT_ENTER && !active) {
            active = 1;
            kind = t == CMARK_NODE_HEADING ? UTOPIA_BLOCK_HEADING : UTOPIA_BLOCK_PARA;
            level = t == CMARK_NODE_HEADING ? cmark_node_get_heading_level(n) : 0;
            tk_buf_reset(&cur);
            continue;
        }
        if (container && ev == CMARK_EVENT_EXIT && active) {
            active = 0;
            st = utopia_blocks_add(out, kind, level, tk_buf_cstr(&cur), cur.len);
            continue;
        }
        if (ev == CMARK_EVENT_EXIT)
            continue;
        switch (t) {
        case CMARK_NODE_TEXT:
        case CMARK_NODE_CODE:
            if (active) {
                const char *lit = cmark_node_get_literal(n);
                if (lit)
                    st = tk_buf_append_str(&cur, lit);
            }
            break;
        case CMARK_NODE_SOFTBREAK:
            if (active)
                st = tk_buf_append_byte(&cur, ' ');
            break;
        case CMARK_NODE_LINEBREAK:
            if (active)
                st = tk_buf_append_byte(&cur, '\n');
            break;
        case CMARK_NODE_CODE_BLOCK: {
            const char *lit = cmark_node_get_literal(n);
            if (lit)
                st = utopia_blocks_add(out, UTOPIA_BLOCK_PARA, 0, lit, strlen(lit));
            break;
        }
        case CMARK_NODE_HTML_BLOCK: {
            const char *lit = cmark_node_get_literal(n);
            if (lit)
                st = utopia_extract_html(lit, strlen(lit), out);
            break;
        }
        default:
            if (is_cell && active && cur.len > 0)
                st = tk_buf_append_str(&cur, " | ");
            break;
        }
    }
    cmark_iter_free(it);
    cmark_node_free(doc);
    cmark_parser_free(p);
    tk_buf_free(&cur);
    return st;
}

/* ---- CSV (RFC 4180, liberal): one paragraph a row, "column: value; ..." ---- */

#define CSV_MAX_COLS 1024

static char csv_delimiter(const char *s, size_t len)
{
    size_t counts[3] = {0, 0, 0};
    const char cand[3] = {',', ';', '\t'};
    int q = 0;
    for (size_t i = 0; i < len && i < 65536; i++) {
        if (s[i] == '"')
            q = !q;
        else if (!q && s[i] == '\n')
            break;
        else if (!q)
            for (int k = 0; k < 3; k++)
                counts[k] += s[i] == cand[k];
    }
    int best = 0;
    for (int k = 1; k < 3; k++)
        if (counts[k] > counts[best])
            best = k;
    return cand[best];
}

typedef struct {
    char **v;
    size_t n;
} csv_row;

static void csv_row_free(csv_row *r)
{
    for (size_t i = 0; i < r->n; i++)
        free(r->v[i]);
    free(r->v);
    r->v = NULL;
    r->n = 0;
}

/* Reads one record starting at *pos. Returns 0 at the end of input. */
static int csv_next(const char *s, size_t len, size_t *pos, char delim, csv_row *row,
                    size_t maxfield, tk_status *st)
{
    size_t i = *pos;
    if (i >= len)
        return 0;
    tk_buf f;
    tk_buf_init(&f, maxfield);
    row->v = tk_calloc(CSV_MAX_COLS, sizeof *row->v);
    row->n = 0;
    int q = 0, done = 0;
    while (!done) {
        if (i >= len) {
            done = 1;
        } else if (q) {
            if (s[i] == '"' && i + 1 < len && s[i + 1] == '"') {
                *st = tk_buf_append_byte(&f, '"');
                i += 2;
                continue;
            }
            if (s[i] == '"')
                q = 0;
            else
                *st = tk_buf_append_byte(&f, s[i]);
            i++;
            if (*st != TK_OK)
                break;
            continue;
        } else if (s[i] == '"' && f.len == 0) {
            q = 1;
            i++;
            continue;
        } else if (s[i] == delim || s[i] == '\n' ||
                   (s[i] == '\r' && i + 1 < len && s[i + 1] == '\n')) {
            /* end of a field */
        } else {
            *st = tk_buf_append_byte(&f, s[i]);
            i++;
            if (*st != TK_OK)
                break;
            continue;
        }
        if (row->n < CSV_MAX_COLS)
            row->v[row->n++] = tk_buf_steal(&f, NULL);
        else
            tk_buf_reset(&f);
        if (i < len && s[i] == delim) {
            i++;
            continue;
        }
        if (i < len && s[i] == '\r')
            i++;
        if (i < len && s[i] == '\n')
            i++;
        done = 1;
    }
    tk_buf_free(&f);
    *pos = i;
    return 1;
}

tk_status utopia_extract_csv(const char *s, size_t len, utopia_blocks *out, char *err,
                             size_t errlen)
{
    char delim = csv_delimiter(s, len);
    size_t pos = 0, maxfield = out->max_bytes ? out->max_bytes : (size_t)1 << 24;
    csv_row header = {0}, row = {0};
    tk_status st = TK_OK;
    tk_buf line;
    tk_buf_init(&line, maxfield);
    if (!csv_next(s, len, &pos, delim, &header, maxfield, &st) || st != TK_OK)
        goto out;
    while (st == TK_OK && csv_next(s, len, &pos, delim, &row, maxfield, &st)) {
        if (st != TK_OK)
            break;
        tk_buf_reset(&line);
        int any = 0;
        for (size_t c = 0; c < row.n && st == TK_OK; c++) {
            if (!row.v[c][0])
                continue;
            const char *h = c < header.n && header.v[c][0] ? header.v[c] : NULL;
            if (any)
                st = tk_buf_append_str(&line, "; ");
            if (st == TK_OK && h)
                st = tk_buf_printf(&line, "%s: %s", h, row.v[c]);
            else if (st == TK_OK)
                st = tk_buf_printf(&line, "column %zu: %s", c + 1, row.v[c]);
            any = 1;
        }
        if (st == TK_OK && any)
            st = utopia_blocks_add(out, UTOPIA_BLOCK_PARA, 0, line.data, line.len);
        csv_row_free(&row);
    }
    if (st == TK_OK && out->n == 0 && header.n > 0) {
        /* a single line: keep it as text */
        tk_buf_reset(&line);
        for (size_t c = 0; c < header.n && st == TK_OK; c++)
            st = tk_buf_printf(&line, "%s%s", c ? "; " : "", header.v[c]);
        if (st == TK_OK)
            st = utopia_blocks_add(out, UTOPIA_BLOCK_PARA, 0, tk_buf_cstr(&line), line.len);
    }
out:
    if (st == TK_ETOOBIG)
        snprintf(err, errlen, "the CSV file's text is larger than the cap");
    csv_row_free(&header);
    csv_row_free(&row);
    tk_buf_free(&line);
    return st;
}

/* ---- JSON: "path: value" lines; each top-level element or member a block ---- */

static tk_status json_path_child(tk_buf *path, size_t base, const char *key, size_t idx,
                                 int is_index)
{
    path->len = base;
    if (path->data)
        path->data[base] = 0;
    if (is_index)
        return tk_buf_printf(path, "[%zu]", idx);
    return tk_buf_printf(path, "%s%s", base ? "." : "", key);
}

static tk_status json_flatten(const json_t *v, tk_buf *path, tk_buf *lines)
{
    tk_status st = TK_OK;
    size_t base = path->len;
    if (json_is_object(v)) {
        const char *k;
        json_t *c;
        json_object_foreach((json_t *)v, k, c)
        {
            if ((st = json_path_child(path, base, k, 0, 0)) != TK_OK ||
                (st = json_flatten(c, path, lines)) != TK_OK)
                break;
        }
    } else if (json_is_array(v)) {
        size_t i;
        json_t *c;
        json_array_foreach(v, i, c)
        {
            if ((st = json_path_child(path, base, NULL, i, 1)) != TK_OK ||
                (st = json_flatten(c, path, lines)) != TK_OK)
                break;
        }
    } else {
        const char *p = tk_buf_cstr(path);
        if (*p)
            st = tk_buf_printf(lines, "%s: ", p);
        if (st != TK_OK) {
        } else if (json_is_string(v))
            st = tk_buf_append(lines, json_string_value(v), json_string_length(v));
        else if (json_is_integer(v))
            st = tk_buf_printf(lines, "%lld", (long long)json_integer_value(v));
        else if (json_is_real(v))
            st = tk_buf_printf(lines, "%.17g", json_real_value(v));
        else
            st = tk_buf_append_str(lines, json_is_true(v)    ? "true"
                                          : json_is_false(v) ? "false"
                                                             : "null");
        if (st == TK_OK)
            st = tk_buf_append_byte(lines, '\n');
    }
    path->len = base;
    if (path->data)
        path->data[base] = 0;
    return st;
}

tk_status utopia_extract_json(const char *s, size_t len, utopia_blocks *out, char *err,
                              size_t errlen)
{
    char jerr[160];
    json_t *j = tk_json_parse(s, len, len + 1, jerr, sizeof jerr);
    if (!j) {
        snprintf(err, errlen, "not valid JSON: %s", jerr);
        return TK_EINVAL;
    }
    size_t cap = out->max_bytes ? out->max_bytes : (size_t)1 << 30;
    tk_buf path, lines;
    tk_buf_init(&path, cap);
    tk_buf_init(&lines, cap);
    tk_status st = TK_OK;
    if (json_is_array(j)) {
        size_t i;
        json_t *c;
        json_array_foreach(j, i, c)
        {
            tk_buf_reset(&lines);
            tk_buf_reset(&path);
            if ((st = tk_buf_printf(&path, "[%zu]", i)) != TK_OK ||
                (st = json_flatten(c, &path, &lines)) != TK_OK ||
                (st = utopia_blocks_add(out, UTOPIA_BLOCK_PARA, 0, tk_buf_cstr(&lines),
                                        lines.len)) != TK_OK)
                break;
        }
    } else if (json_is_object(j)) {
        const char *k;
        json_t *c;
        tk_buf scalars;
        tk_buf_init(&scalars, cap);
        json_object_foreach(j, k, c)
        {
            tk_buf_reset(&path);
            if ((st = tk_buf_append_str(&path, k)) != TK_OK)
                break;
            if (!json_is_object(c) && !json_is_array(c)) {
                if ((st = json_flatten(c, &path, &scalars)) != TK_OK)
                    break;
                continue;
            }
            if ((st = utopia_blocks_add(out, UTOPIA_BLOCK_HEADING, 1, k, strlen(k))) != TK_OK)
                break;
            size_t i;
            json_t *e;
            if (json_is_array(c)) {
                json_array_foreach(c, i, e)
                {
                    tk_buf_reset(&lines);
                    path.len = strlen(k);
                    path.data[path.len] = 0;
                    if ((st = tk_buf_printf(&path, "[%zu]", i)) != TK_OK ||
                        (st = json_flatten(e, &path, &lines)) != TK_OK ||
                        (st = utopia_blocks_add(out, UTOPIA_BLOCK_PARA, 0, tk_buf_cstr(&lines),
                                                lines.len)) != TK_OK)
                        break;
                }
            } else {
                tk_buf_reset(&lines);
                if ((st = json_flatten(c, &path, &lines)) == TK_OK)
                    st = utopia_blocks_add(out, UTOPIA_BLOCK_PARA, 0, tk_buf_cstr(&lines),
                                           lines.len);
            }
            if (st != TK_OK)
                break;
        }
        if (st == TK_OK && scalars.len)
            st = utopia_blocks_add(out, UTOPIA_BLOCK_PARA, 0, scalars.data, scalars.len);
        tk_buf_free(&scalars);
    } else {
        st = json_flatten(j, &path, &lines);
        if (st == TK_OK)
            st = utopia_blocks_add(out, UTOPIA_BLOCK_PARA, 0, tk_buf_cstr(&lines), lines.len);
    }
    if (st == TK_ETOOBIG)
        snprintf(err, errlen, "the JSON file's text is larger than the cap");
    tk_buf_free(&path);
    tk_buf_free(&lines);
    json_decref(j);
    return st;
}

/* ---- dispatch ---- */

tk_status utopia_extract(utopia_format fmt, const void *data, size_t len, const utopia_extractor *x,
                         utopia_blocks *out, char *err, size_t errlen)
{
    const char *s = data;
    tk_status st;
    snprintf(err, errlen, "%s", "");
    switch (fmt) {
    case UTOPIA_FMT_TEXT:
        st = utopia_extract_text(s, len, out);
        break;
    case UTOPIA_FMT_MARKDOWN:
        st = utopia_extract_markdown(s, len, out);
        break;
    case UTOPIA_FMT_HTML:
        st = utopia_extract_html(s, len, out);
        break;
    case UTOPIA_FMT_CSV:
        return utopia_extract_csv(s, len, out, err, errlen);
    case UTOPIA_FMT_JSON:
        return utopia_extract_json(s, len, out, err, errlen);
    case UTOPIA_FMT_PDF:
    case UTOPIA_FMT_DOCX: {
        if (!x || !x->run) {
            snprintf(err, errlen, "%s files need an isolated extractor, and none is configured",
                     utopia_format_name(fmt));
            return TK_EDENIED;
        }
        tk_buf b;
        tk_buf_init(&b, out->max_bytes ? out->max_bytes * 2 : (size_t)1 << 26);
        st = x->run(x, fmt, data, len, &b, err, errlen);
        if (st == TK_OK) {
            st = utopia_blocks_parse(out, tk_buf_cstr(&b), b.len);
            if (st == TK_EINVAL)
                snprintf(err, errlen, "the %s extractor wrote malformed output",
                         utopia_format_name(fmt));
        }
        tk_buf_free(&b);
        break;
    }
    default:
        snprintf(err, errlen, "unsupported file type");
        return TK_EINVAL;
    }
    if (st == TK_ETOOBIG && !*err)
        snprintf(err, errlen, "the document's text is larger than the cap");
    return st;
}
