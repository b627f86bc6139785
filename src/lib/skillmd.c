/* SKILL.md front matter: a YAML subset and the rules of the format. */
#include "lib/skillmd.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/buf.h"
#include "lib/utf8.h"

typedef struct {
    const char *p; /* without the line break */
    size_t n;
    size_t no; /* 1-based line number in the file */
} line_t;

enum { V_NULL, V_SCALAR, V_MAP, V_LIST };

typedef struct {
    int type;
    char *scalar;    /* V_SCALAR */
    tk_skill_kv *kv; /* V_MAP */
    char **items;    /* V_LIST */
    size_t n;        /* entries of kv or items */
    char *raw;       /* the lines under the key as written (V_MAP, V_LIST) */
} value_t;

typedef struct {
    char *err;
    size_t errsz;
    int failed;
} ctx_t;

__attribute__((format(printf, 2, 3))) static void fail(ctx_t *c, const char *fmt, ...)
{
    if (c->failed)
        return;
    c->failed = 1;
    if (c->errsz == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, c->errsz, fmt, ap);
    va_end(ap);
}

static void value_free(value_t *v)
{
    free(v->scalar);
    for (size_t i = 0; i < v->n; i++) {
        if (v->kv) {
            free(v->kv[i].key);
            free(v->kv[i].value);
        }
        if (v->items)
            free(v->items[i]);
    }
    free(v->kv);
    free(v->items);
    free(v->raw);
    memset(v, 0, sizeof *v);
}

int tk_skillmd_name_valid(const char *s, size_t n)
{
    if (n == 0 || n > TK_SKILL_NAME_MAX || s[0] == '-' || s[n - 1] == '-')
        return 0;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (ch == '-') {
            if (s[i + 1] == '-')
                return 0;
        } else if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9'))) {
            return 0;
        }
    }
    return 1;
}

static size_t indent_of(const line_t *l)
{
    size_t i = 0;
    while (i < l->n && l->p[i] == ' ')
        i++;
    return i;
}

static int is_blank(const line_t *l)
{
    for (size_t i = 0; i < l->n; i++)
        if (l->p[i] != ' ')
            return 0;
    return 1;
}

/* blank or a comment line */
static int is_skippable(const line_t *l)
{
    size_t i = indent_of(l);
    return i == l->n || l->p[i] == '#';
}

static int has_tab_indent(const line_t *l)
{
    for (size_t i = 0; i < l->n; i++) {
        if (l->p[i] == '\t')
            return 1;
        if (l->p[i] != ' ')
            return 0;
    }
    return 0;
}

static void rtrim(const char *p, size_t *n)
{
    while (*n > 0 && p[*n - 1] == ' ')
        (*n)--;
}

/* Cut a trailing " #comment" off a plain scalar or after a quoted one. */
static size_t cut_comment(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] == '#' && (i == 0 || p[i - 1] == ' '))
            return i;
    return n;
}

static int append_utf8(tk_buf *b, unsigned long cp)
{
    char out[4];
    if (cp == 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    size_t k = tk_utf8_encode((uint32_t)cp, out);
    return k > 0 && tk_buf_append(b, out, k) == TK_OK;
}

static int hexval(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* A scalar that sits on one line: p[0..n) starts at the first character of
 * the value. Returns a heap string or NULL (fail called). */
static char *scalar_line(ctx_t *c, const char *p, size_t n, size_t lineno, const char *what)
{
    tk_buf b;
    tk_buf_init(&b, TK_SKILL_FRONT_MAX);
    if (n > 0 && (p[0] == '\'' || p[0] == '"')) {
        char q = p[0];
        size_t i = 1;
        int closed = 0;
        while (i < n) {
            char ch = p[i];
            if (q == '\'' && ch == '\'') {
                if (i + 1 < n && p[i + 1] == '\'') {
                    tk_buf_append_byte(&b, '\'');
                    i += 2;
                    continue;
                }
                closed = 1;
                i++;
                break;
            }
            if (q == '"' && ch == '"') {
                closed = 1;
                i++;
                break;
            }
            if (q == '"' && ch == '\\') {
                if (i + 1 >= n) {
                    fail(c, "line %zu: %s: a backslash ends the line inside a quoted value", lineno,
                         what);
                    goto bad;
                }
                char e = p[i + 1];
                i += 2;
                const char *simple = strchr("\"\\/ntr0", e);
                if (e != '\0' && simple) {
                    static const char to[] = "\"\\/\n\t\r";
                    if (e == '0') {
                        fail(c, "line %zu: %s: a NUL escape (\\0) is not accepted", lineno, what);
                        goto bad;
                    }
                    tk_buf_append_byte(&b, to[simple - "\"\\/ntr0"]);
                    continue;
                }
                int len = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
                if (len == 0 || i + (size_t)len > n) {
                    fail(c, "line %zu: %s: unknown escape \\%c in a double-quoted value", lineno,
                         what, e);
                    goto bad;
                }
                unsigned long cp = 0;
                for (int k = 0; k < len; k++) {
                    int h = hexval(p[i + (size_t)k]);
                    if (h < 0) {
                        fail(c, "line %zu: %s: bad hex digits in the escape \\%c", lineno, what, e);
                        goto bad;
                    }
                    cp = cp * 16 + (unsigned long)h;
                }
                i += (size_t)len;
                if (!append_utf8(&b, cp)) {
                    fail(c, "line %zu: %s: the escape \\%c is not a character", lineno, what, e);
                    goto bad;
                }
                continue;
            }
            tk_buf_append_byte(&b, ch);
            i++;
        }
        if (!closed) {
            fail(c, "line %zu: %s: the quoted value is not closed on its line", lineno, what);
            goto bad;
        }
        size_t rest = n - i;
        const char *r = p + i;
        size_t k = 0;
        while (k < rest && r[k] == ' ')
            k++;
        if (k < rest && !(r[k] == '#' && k > 0)) {
            fail(c, "line %zu: %s: text after the closing quote", lineno, what);
            goto bad;
        }
    } else {
        if (n > 0 && strchr("[]{}&*!|>%@`,", p[0])) {
            if (p[0] == '[' || p[0] == '{')
                fail(c, "line %zu: %s: flow collections ([...] {...}) are not accepted", lineno,
                     what);
            else if (p[0] == '&' || p[0] == '*')
                fail(c, "line %zu: %s: anchors and aliases are not accepted", lineno, what);
            else if (p[0] == '!')
                fail(c, "line %zu: %s: tags are not accepted", lineno, what);
            else
                fail(c, "line %zu: %s: a plain value may not start with '%c' (quote it)", lineno,
                     what, p[0]);
            goto bad;
        }
        if (n > 0 && (p[0] == '-' || p[0] == '?' || p[0] == ':') && (n == 1 || p[1] == ' ')) {
            fail(c, "line %zu: %s: a plain value may not start with '%c ' (quote it)", lineno, what,
                 p[0]);
            goto bad;
        }
        n = cut_comment(p, n);
        rtrim(p, &n);
        for (size_t i = 0; i < n; i++)
            if (p[i] == ':' && (i + 1 == n || p[i + 1] == ' ')) {
                fail(c,
                     "line %zu: %s: a plain value may not contain ': ' or end with ':' (quote it)",
                     lineno, what);
                goto bad;
            }
        tk_buf_append(&b, p, n);
    }
    return tk_buf_steal(&b, NULL);
bad:
    tk_buf_free(&b);
    return NULL;
}

/* Lines under a key from lines[*i] on: blank, comment or indented more than
 * 0. Stops at the first non-blank line at column 0. Returns the count. */
static size_t child_lines(const line_t *lines, size_t nl, size_t from)
{
    size_t k = from;
    while (k < nl && (is_blank(&lines[k]) || indent_of(&lines[k]) > 0 ||
                      (lines[k].n > 0 && lines[k].p[0] == '#')))
        k++;
    /* trailing blank and comment lines do not belong to the value */
    while (k > from && is_skippable(&lines[k - 1]))
        k--;
    return k - from;
}

static char *raw_of(const line_t *lines, size_t from, size_t cnt)
{
    tk_buf b;
    tk_buf_init(&b, TK_SKILL_FRONT_MAX);
    for (size_t k = 0; k < cnt; k++) {
        if (k)
            tk_buf_append_byte(&b, '\n');
        tk_buf_append(&b, lines[from + k].p, lines[from + k].n);
    }
    return tk_buf_steal(&b, NULL);
}

static char *block_scalar(ctx_t *c, const char *hdr, size_t hn, const line_t *lines, size_t from,
                          size_t cnt, const char *what)
{
    size_t lineno = from ? lines[from - 1].no : 0;
    int folded = hdr[0] == '>';
    int chomp = 0; /* 0 clip, -1 strip, 1 keep */
    size_t i = 1;
    if (i < hn && (hdr[i] == '-' || hdr[i] == '+')) {
        chomp = hdr[i] == '-' ? -1 : 1;
        i++;
    }
    while (i < hn && hdr[i] == ' ')
        i++;
    if (i < hn && !(hdr[i] == '#' && hdr[i - 1] == ' ')) {
        fail(c, "line %zu: %s: only |, |-, |+, >, >- and >+ are accepted as a block header", lineno,
             what);
        return NULL;
    }
    /* the block's lines, blank ones included, end before trailing blanks */
    size_t all = from;
    size_t ind = 0;
    for (size_t k = 0; k < cnt; k++)
        if (!is_blank(&lines[from + k])) {
            ind = indent_of(&lines[from + k]);
            break;
        }
    tk_buf b;
    tk_buf_init(&b, TK_SKILL_FRONT_MAX);
    size_t pending_nl = 0;
    int have = 0, prev_more = 0;
    for (size_t k = 0; k < cnt; k++) {
        const line_t *l = &lines[all + k];
        if (is_blank(l)) {
            pending_nl++;
            continue;
        }
        if (indent_of(l) < ind) {
            fail(c, "line %zu: %s: a line of the block is indented less than its first line", l->no,
                 what);
            tk_buf_free(&b);
            return NULL;
        }
        const char *t = l->p + ind;
        size_t tn = l->n - ind;
        int more = tn > 0 && t[0] == ' ';
        if (have) {
            if (!folded || more || prev_more) {
                for (size_t j = 0; j < pending_nl + 1; j++)
                    tk_buf_append_byte(&b, '\n');
            } else if (pending_nl == 0) {
                tk_buf_append_byte(&b, ' ');
            } else {
                for (size_t j = 0; j < pending_nl; j++)
                    tk_buf_append_byte(&b, '\n');
            }
        }
        pending_nl = 0;
        tk_buf_append(&b, t, tn);
        have = 1;
        prev_more = more;
    }
    /* the block's trailing blank lines were dropped by child_lines; the
     * final line break is clipped, stripped or kept */
    if (have && chomp >= 0)
        tk_buf_append_byte(&b, '\n');
    if (have && chomp > 0)
        for (size_t j = 0; j < pending_nl; j++)
            tk_buf_append_byte(&b, '\n');
    if (b.len > TK_SKILL_FRONT_MAX - 1) {
        tk_buf_free(&b);
        fail(c, "%s: the value is too long", what);
        return NULL;
    }
    return tk_buf_steal(&b, NULL);
}

/* A plain scalar continued on indented lines: fold them with spaces. */
static char *plain_multi(ctx_t *c, const char *p, size_t n, const line_t *lines, size_t from,
                         size_t cnt, const char *what)
{
    char *first = scalar_line(c, p, n, from ? lines[from - 1].no : 0, what);
    if (!first)
        return NULL;
    if (cnt == 0)
        return first;
    if (p[0] == '\'' || p[0] == '"') {
        free(first);
        fail(c, "line %zu: %s: a quoted value must end on its own line", lines[from].no, what);
        return NULL;
    }
    tk_buf b;
    tk_buf_init(&b, TK_SKILL_FRONT_MAX);
    tk_buf_append_str(&b, first);
    free(first);
    size_t pending = 0;
    for (size_t k = 0; k < cnt; k++) {
        const line_t *l = &lines[from + k];
        if (is_blank(l)) {
            pending++;
            continue;
        }
        size_t in = indent_of(l);
        if (l->p[in] == '#') {
            fail(c, "line %zu: %s: a comment inside a value", l->no, what);
            tk_buf_free(&b);
            return NULL;
        }
        const char *t = l->p + in;
        size_t tn = cut_comment(t, l->n - in);
        rtrim(t, &tn);
        for (size_t i = 0; i < tn; i++)
            if (t[i] == ':' && (i + 1 == tn || t[i + 1] == ' ')) {
                fail(c, "line %zu: %s: a plain value may not contain ': ' (quote it)", l->no, what);
                tk_buf_free(&b);
                return NULL;
            }
        if (pending)
            for (size_t j = 0; j < pending; j++)
                tk_buf_append_byte(&b, '\n');
        else
            tk_buf_append_byte(&b, ' ');
        pending = 0;
        if (tk_buf_append(&b, t, tn) != TK_OK) {
            fail(c, "%s: the value is too long", what);
            tk_buf_free(&b);
            return NULL;
        }
    }
    return tk_buf_steal(&b, NULL);
}

static int parse_children(ctx_t *c, const line_t *lines, size_t from, size_t cnt, const char *key,
                          value_t *v)
{
    size_t ind = 0, first = cnt;
    for (size_t k = 0; k < cnt; k++)
        if (!is_skippable(&lines[from + k])) {
            first = k;
            ind = indent_of(&lines[from + k]);
            break;
        }
    if (first == cnt) {
        v->type = V_NULL;
        return 1;
    }
    const line_t *fl = &lines[from + first];
    int list = fl->p[ind] == '-' && (fl->n == ind + 1 || fl->p[ind + 1] == ' ');
    v->type = list ? V_LIST : V_MAP;
    v->raw = raw_of(lines, from, cnt);
    for (size_t k = first; k < cnt; k++) {
        const line_t *l = &lines[from + k];
        if (is_skippable(l))
            continue;
        if (indent_of(l) != ind) {
            fail(c,
                 "line %zu: %s: only one level of nesting is accepted (a value under %s is "
                 "indented differently)",
                 l->no, key, key);
            return 0;
        }
        if (v->n >= TK_SKILL_ENTRIES_MAX) {
            fail(c, "line %zu: %s: more than %d entries", l->no, key, TK_SKILL_ENTRIES_MAX);
            return 0;
        }
        const char *t = l->p + ind;
        size_t tn = l->n - ind;
        if (list) {
            if (!(t[0] == '-' && (tn == 1 || t[1] == ' '))) {
                fail(c, "line %zu: %s: a list and a map are mixed", l->no, key);
                return 0;
            }
            size_t j = 1;
            while (j < tn && t[j] == ' ')
                j++;
            char *item = scalar_line(c, t + j, tn - j, l->no, key);
            if (!item)
                return 0;
            v->items = tk_realloc(v->items, (v->n + 1) * sizeof *v->items);
            v->items[v->n++] = item;
            continue;
        }
        size_t j = 0;
        int quoted = t[0] == '"' || t[0] == '\'';
        char *mk = NULL;
        if (quoted) {
            size_t e = 1;
            while (e < tn && t[e] != t[0])
                e++;
            if (e >= tn) {
                fail(c, "line %zu: %s: the quoted key is not closed", l->no, key);
                return 0;
            }
            mk = scalar_line(c, t, e + 1, l->no, key);
            if (!mk)
                return 0;
            j = e + 1;
        } else {
            if (t[0] == '-' && (tn == 1 || t[1] == ' ')) {
                fail(c, "line %zu: %s: a list and a map are mixed", l->no, key);
                return 0;
            }
            while (j < tn && t[j] != ':')
                j++;
            size_t kn = j;
            rtrim(t, &kn);
            if (kn == 0 || j >= tn) {
                fail(c, "line %zu: %s: expected `key: value` under %s", l->no, key, key);
                return 0;
            }
            mk = scalar_line(c, t, kn, l->no, key);
            if (!mk)
                return 0;
        }
        if (j >= tn || t[j] != ':' || (j + 1 < tn && t[j + 1] != ' ')) {
            free(mk);
            fail(c, "line %zu: %s: expected `key: value` under %s", l->no, key, key);
            return 0;
        }
        j++;
        while (j < tn && t[j] == ' ')
            j++;
        size_t vn = cut_comment(t + j, tn - j);
        rtrim(t + j, &vn);
        if (vn == 0 || t[j] == '|' || t[j] == '>') {
            free(mk);
            fail(c, "line %zu: %s: every value under %s must be a string on its line", l->no, key,
                 key);
            return 0;
        }
        char *mv = scalar_line(c, t + j, tn - j, l->no, key);
        if (!mv) {
            free(mk);
            return 0;
        }
        for (size_t q = 0; q < v->n; q++)
            if (strcmp(v->kv[q].key, mk) == 0) {
                fail(c, "line %zu: %s: the key \"%s\" appears twice", l->no, key, mk);
                free(mk);
                free(mv);
                return 0;
            }
        v->kv = tk_realloc(v->kv, (v->n + 1) * sizeof *v->kv);
        v->kv[v->n].key = mk;
        v->kv[v->n].value = mv;
        v->n++;
    }
    return 1;
}

static const char *const KNOWN[] = {"name",          "description", "license",
                                    "compatibility", "metadata",    "allowed-tools"};

static int known_index(const char *k)
{
    for (size_t i = 0; i < TK_ARRAY_LEN(KNOWN); i++)
        if (strcmp(KNOWN[i], k) == 0)
            return (int)i;
    return -1;
}

static void warn(tk_skill_md *md, char *w)
{
    md->warnings = tk_realloc(md->warnings, (md->n_warnings + 1) * sizeof *md->warnings);
    md->warnings[md->n_warnings++] = w;
}

static int want_string(ctx_t *c, value_t *v, const char *key, char **dst, size_t maxc)
{
    if (v->type != V_SCALAR) {
        fail(c, "%s: must be a string", key);
        return 0;
    }
    long chars = tk_utf8_count(v->scalar, strlen(v->scalar));
    size_t b = 0, e = strlen(v->scalar);
    while (b < e && (v->scalar[b] == ' ' || v->scalar[b] == '\n'))
        b++;
    if (b == e) {
        fail(c, "%s: must not be empty", key);
        return 0;
    }
    if (maxc && chars > (long)maxc) {
        fail(c, "%s: at most %zu characters (this one has %ld)", key, maxc, chars);
        return 0;
    }
    *dst = v->scalar;
    v->scalar = NULL;
    return 1;
}

static int apply_key(ctx_t *c, tk_skill_md *md, const char *key, value_t *v)
{
    int ki = known_index(key);
    switch (ki) {
    case 0:
        if (!want_string(c, v, "name", &md->name, 0))
            return 0;
        if (!tk_skillmd_name_valid(md->name, strlen(md->name))) {
            fail(c,
                 "name: 1-%d characters of a-z, 0-9 and single hyphens, not first or last (got "
                 "\"%.80s\")",
                 TK_SKILL_NAME_MAX, md->name);
            return 0;
        }
        return 1;
    case 1:
        return want_string(c, v, "description", &md->description, TK_SKILL_DESCRIPTION_MAX);
    case 2:
        return want_string(c, v, "license", &md->license, 0);
    case 3:
        return want_string(c, v, "compatibility", &md->compatibility, TK_SKILL_COMPAT_MAX);
    case 4:
        if (v->type != V_MAP) {
            fail(c, "metadata: must be a map of string keys to string values");
            return 0;
        }
        md->metadata = v->kv;
        md->n_metadata = v->n;
        v->kv = NULL;
        v->n = 0;
        return 1;
    case 5:
        if (v->type == V_LIST) {
            tk_buf b;
            tk_buf_init(&b, TK_SKILL_FRONT_MAX);
            for (size_t i = 0; i < v->n; i++) {
                if (strchr(v->items[i], ' ') || v->items[i][0] == '\0') {
                    tk_buf_free(&b);
                    fail(c, "allowed-tools: a listed tool must be one word");
                    return 0;
                }
                if (i)
                    tk_buf_append_byte(&b, ' ');
                tk_buf_append_str(&b, v->items[i]);
            }
            if (v->n == 0) {
                tk_buf_free(&b);
                fail(c, "allowed-tools: must not be empty");
                return 0;
            }
            md->allowed_tools = tk_buf_steal(&b, NULL);
            return 1;
        }
        return want_string(c, v, "allowed-tools", &md->allowed_tools, 0);
    default:
        break;
    }
    md->extra = tk_realloc(md->extra, (md->n_extra + 1) * sizeof *md->extra);
    md->extra[md->n_extra].key = tk_strdup(key);
    if (v->type == V_SCALAR) {
        md->extra[md->n_extra].value = v->scalar;
        v->scalar = NULL;
    } else if (v->raw) {
        md->extra[md->n_extra].value = v->raw;
        v->raw = NULL;
    } else {
        md->extra[md->n_extra].value = tk_strdup("");
    }
    md->n_extra++;
    warn(md, tk_asprintf("unknown key \"%s\" kept (not part of the SKILL.md format)", key));
    return 1;
}

void tk_skillmd_free(tk_skill_md *md)
{
    if (!md)
        return;
    free(md->name);
    free(md->description);
    free(md->license);
    free(md->compatibility);
    free(md->allowed_tools);
    for (size_t i = 0; i < md->n_metadata; i++) {
        free(md->metadata[i].key);
        free(md->metadata[i].value);
    }
    free(md->metadata);
    for (size_t i = 0; i < md->n_extra; i++) {
        free(md->extra[i].key);
        free(md->extra[i].value);
    }
    free(md->extra);
    for (size_t i = 0; i < md->n_warnings; i++)
        free(md->warnings[i]);
    free(md->warnings);
    memset(md, 0, sizeof *md);
}

static int is_fence(const char *p, size_t n)
{
    if (n < 3 || memcmp(p, "---", 3) != 0)
        return 0;
    for (size_t i = 3; i < n; i++)
        if (p[i] != ' ')
            return 0;
    return 1;
}

tk_status tk_skillmd_parse(const char *s, size_t n, const char *folder, tk_skill_md *out, char *err,
                           size_t errsz)
{
    memset(out, 0, sizeof *out);
    ctx_t c = {err, errsz, 0};
    if (errsz)
        err[0] = '\0';
    line_t *lines = NULL;
    size_t nl = 0;
    if (memchr(s, '\0', n)) {
        fail(&c, "SKILL.md: contains a NUL byte");
        goto done;
    }
    if (!tk_utf8_valid(s, n)) {
        fail(&c, "SKILL.md: is not valid UTF-8");
        goto done;
    }
    /* the first line is the fence */
    size_t pos = 0;
    const char *eol = memchr(s, '\n', n);
    size_t l0 = eol ? (size_t)(eol - s) : n;
    size_t l0n = l0 && s[l0 - 1] == '\r' ? l0 - 1 : l0;
    if (!eol || l0n != 3 || memcmp(s, "---", 3) != 0) {
        fail(&c, "SKILL.md: must start with a line \"---\" opening the front matter");
        goto done;
    }
    pos = l0 + 1;
    size_t lineno = 2, body = 0;
    int closed = 0;
    while (pos <= n) {
        const char *p = s + pos;
        const char *e = memchr(p, '\n', n - pos);
        size_t len = e ? (size_t)(e - p) : n - pos;
        size_t ln = len && p[len - 1] == '\r' ? len - 1 : len;
        if (is_fence(p, ln)) {
            closed = 1;
            body = e ? pos + len + 1 : n;
            break;
        }
        if (pos - (l0 + 1) > TK_SKILL_FRONT_MAX) {
            fail(&c, "SKILL.md: the front matter is over %d bytes", TK_SKILL_FRONT_MAX);
            goto done;
        }
        if (memchr(p, '\r', ln)) {
            fail(&c, "line %zu: a carriage return inside a line", lineno);
            goto done;
        }
        lines = tk_realloc(lines, (nl + 1) * sizeof *lines);
        lines[nl++] = (line_t){p, ln, lineno};
        lineno++;
        if (!e)
            break;
        pos += len + 1;
    }
    if (!closed) {
        fail(&c, "SKILL.md: the front matter is not closed by a line \"---\"");
        goto done;
    }
    char **seen = NULL;
    size_t nseen = 0;
    for (size_t i = 0; i < nl && !c.failed;) {
        const line_t *l = &lines[i];
        if (has_tab_indent(l)) {
            fail(&c, "line %zu: tabs are not accepted for indentation", l->no);
            break;
        }
        if (is_skippable(l)) {
            i++;
            continue;
        }
        if (indent_of(l) > 0) {
            fail(&c, "line %zu: unexpected indentation (a top-level key starts in column 1)",
                 l->no);
            break;
        }
        size_t k = 0;
        while (k < l->n &&
               (l->p[k] == '-' || l->p[k] == '_' || l->p[k] == '.' ||
                (l->p[k] >= 'a' && l->p[k] <= 'z') || (l->p[k] >= 'A' && l->p[k] <= 'Z') ||
                (l->p[k] >= '0' && l->p[k] <= '9')))
            k++;
        if (k == 0 || k >= l->n || l->p[k] != ':' || (k + 1 < l->n && l->p[k + 1] != ' ')) {
            fail(&c, "line %zu: expected `key: value` (a key of letters, digits, '-', '_' or '.')",
                 l->no);
            break;
        }
        char *key = tk_strndup(l->p, k);
        for (size_t q = 0; q < nseen; q++)
            if (strcmp(seen[q], key) == 0) {
                fail(&c, "line %zu: the key \"%s\" appears twice", l->no, key);
                break;
            }
        if (c.failed) {
            free(key);
            break;
        }
        if (nseen >= TK_SKILL_ENTRIES_MAX) {
            fail(&c, "line %zu: more than %d keys", l->no, TK_SKILL_ENTRIES_MAX);
            free(key);
            break;
        }
        seen = tk_realloc(seen, (nseen + 1) * sizeof *seen);
        seen[nseen++] = key;
        size_t j = k + 1;
        while (j < l->n && l->p[j] == ' ')
            j++;
        const char *r = l->p + j;
        size_t rn = l->n - j;
        size_t cnt = child_lines(lines, nl, i + 1);
        for (size_t q = i + 1; q < i + 1 + cnt; q++)
            if (has_tab_indent(&lines[q])) {
                fail(&c, "line %zu: tabs are not accepted for indentation", lines[q].no);
                break;
            }
        if (c.failed)
            break;
        value_t v = {0};
        size_t cut = cut_comment(r, rn);
        int ok = 1;
        if (rn == 0 || cut == 0) {
            ok = parse_children(&c, lines, i + 1, cnt, key, &v);
        } else if (r[0] == '|' || r[0] == '>') {
            v.type = V_SCALAR;
            v.scalar = block_scalar(&c, r, rn, lines, i + 1, cnt, key);
            ok = v.scalar != NULL;
        } else {
            v.type = V_SCALAR;
            v.scalar = plain_multi(&c, r, rn, lines, i + 1, cnt, key);
            ok = v.scalar != NULL;
        }
        if (ok)
            ok = apply_key(&c, out, key, &v);
        value_free(&v);
        if (!ok)
            break;
        i += 1 + cnt;
    }
    for (size_t q = 0; q < nseen; q++)
        free(seen[q]);
    free(seen);
    if (c.failed)
        goto done;
    if (!out->name) {
        fail(&c, "name: is required");
        goto done;
    }
    if (!out->description) {
        fail(&c, "description: is required");
        goto done;
    }
    if (folder && strcmp(folder, out->name) != 0) {
        fail(&c, "name: \"%s\" must equal the folder's name \"%.80s\"", out->name, folder);
        goto done;
    }
    out->body_off = body;
done:
    free(lines);
    if (c.failed) {
        tk_skillmd_free(out);
        return TK_EINVAL;
    }
    return TK_OK;
}
