/*
 * html.c — text out of HTML: a tolerant single-pass tokenizer, not a DOM.
 *
 * Keeps headings (h1–h6, and the <title>), turns block elements into paragraph
 * breaks and table cells into " | ", decodes character references, and drops
 * everything inside script, style, noscript, template, svg, math, iframe,
 * object and comments. Never recurses; memory is the output's cap.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "app/utopia/extract.h"

static const char *const raw_skip[] = {"script", "style",  "noscript", "template", "svg",
                                       "math",   "iframe", "object",   "textarea", "select"};
static const char *const blocks[] = {
    "p",       "div",     "br",       "li",      "ul",     "ol",     "tr",         "table",
    "section", "article", "header",   "footer",  "nav",    "aside",  "blockquote", "pre",
    "hr",      "dl",      "dt",       "dd",      "form",   "main",   "figure",     "figcaption",
    "address", "details", "summary",  "caption", "body",   "html",   "head",       "tbody",
    "thead",   "tfoot",   "fieldset", "legend",  "center", "option", "noscript"};

static int in_list(const char *name, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(name, list[i]) == 0)
            return 1;
    return 0;
}

static const struct {
    const char *name;
    const char *utf8;
} entities[] = {
    {"amp", "&"},
    {"lt", "<"},
    {"gt", ">"},
    {"quot", "\""},
    {"apos", "'"},
    {"nbsp", " "},
    {"copy", "\xC2\xA9"},
    {"reg", "\xC2\xAE"},
    {"mdash", "\xE2\x80\x94"},
    {"ndash", "\xE2\x80\x93"},
    {"hellip", "\xE2\x80\xA6"},
    {"lsquo", "\xE2\x80\x98"},
    {"rsquo", "\xE2\x80\x99"},
    {"ldquo", "\xE2\x80\x9C"},
    {"rdquo", "\xE2\x80\x9D"},
    {"bull", "\xE2\x80\xA2"},
    {"middot", "\xC2\xB7"},
    {"eacute", "\xC3\xA9"},
    {"egrave", "\xC3\xA8"},
    {"uuml", "\xC3\xBC"},
    {"ouml", "\xC3\xB6"},
    {"auml", "\xC3\xA4"},
    {"szlig", "\xC3\x9F"},
    {"euro", "\xE2\x82\xAC"},
    {"pound", "\xC2\xA3"},
    {"deg", "\xC2\xB0"},
    {"times", "\xC3\x97"},
};

static size_t utf8_encode(unsigned long cp, char out[4])
{
    if (cp == 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        cp = 0xFFFD;
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Decodes a character reference at s[0] == '&'. Returns the bytes consumed (0:
 * not a reference, take the '&' literally) and the text in out/outlen. */
static size_t entity(const char *s, size_t len, char out[8], size_t *outlen)
{
    size_t i = 1;
    if (i < len && s[i] == '#') {
        i++;
        int hex = i < len && (s[i] == 'x' || s[i] == 'X');
        if (hex)
            i++;
        unsigned long cp = 0;
        size_t digits = 0;
        for (; i < len && digits < 8; i++, digits++) {
            char c = s[i];
            int d = c >= '0' && c <= '9'          ? c - '0'
                    : hex && c >= 'a' && c <= 'f' ? c - 'a' + 10
                    : hex && c >= 'A' && c <= 'F' ? c - 'A' + 10
                                                  : -1;
            if (d < 0)
                break;
            cp = cp * (hex ? 16 : 10) + (unsigned long)d;
        }
        if (digits == 0)
            return 0;
        if (i < len && s[i] == ';')
            i++;
        *outlen = utf8_encode(cp, out);
        return i;
    }
    size_t n = 0;
    while (i + n < len && n < 10 &&
           ((s[i + n] >= 'a' && s[i + n] <= 'z') || (s[i + n] >= 'A' && s[i + n] <= 'Z')))
        n++;
    if (n == 0 || i + n >= len || s[i + n] != ';')
        return 0;
    for (size_t k = 0; k < TK_ARRAY_LEN(entities); k++) {
        if (strlen(entities[k].name) == n && strncmp(s + i, entities[k].name, n) == 0) {
            *outlen = strlen(entities[k].utf8);
            memcpy(out, entities[k].utf8, *outlen);
            return i + n + 1;
        }
    }
    return 0;
}

/* Finds the end of "</name" (case-insensitive) from s[i], past its '>'. */
static size_t skip_raw(const char *s, size_t len, size_t i, const char *name)
{
    size_t nl = strlen(name);
    for (; i + 2 + nl <= len; i++) {
        if (s[i] == '<' && s[i + 1] == '/' && strncasecmp(s + i + 2, name, nl) == 0) {
            const char *gt = memchr(s + i, '>', len - i);
            return gt ? (size_t)(gt - s) + 1 : len;
        }
    }
    return len;
}

typedef struct {
    utopia_blocks *out;
    tk_buf cur;
    int heading; /* 0, or the level of the heading being collected */
    int pre;
} html_state;

static tk_status flush(html_state *h)
{
    tk_status st = TK_OK;
    if (h->cur.len)
        st = utopia_blocks_add(h->out, h->heading ? UTOPIA_BLOCK_HEADING : UTOPIA_BLOCK_PARA,
                               h->heading, h->cur.data, h->cur.len);
    tk_buf_reset(&h->cur);
    return st;
}

tk_status utopia_extract_html(const char *s, size_t len, utopia_blocks *out)
{
    html_state h = {.out = out};
    tk_buf_init(&h.cur, out->max_bytes ? out->max_bytes : (size_t)1 << 30);
    tk_status st = TK_OK;
    size_t i = 0;
    while (i < len && st == TK_OK) {
        char c = s[i];
        if (c == '<') {
            if (len - i >= 4 && memcmp(s + i, "<!--", 4) == 0) {
                const char *end = memmem(s + i + 4, len - i - 4, "-->", 3);
                i = end ? (size_t)(end - s) + 3 : len;
                continue;
            }
            size_t j = i + 1;
            int closing = j < len && s[j] == '/';
            if (closing)
                j++;
            if (j < len && (s[j] == '!' || s[j] == '?')) {
                const char *gt = memchr(s + j, '>', len - j);
                i = gt ? (size_t)(gt - s) + 1 : len;
                continue;
            }
            char name[16];
            size_t nl = 0;
            while (j < len && ((s[j] >= 'a' && s[j] <= 'z') || (s[j] >= 'A' && s[j] <= 'Z') ||
                               (s[j] >= '0' && s[j] <= '9'))) {
                if (nl < sizeof name - 1)
                    name[nl++] = (char)(s[j] | 0x20);
                j++;
            }
            name[nl] = 0;
            if (nl == 0) { /* a lone '<' is text */
                st = tk_buf_append_byte(&h.cur, '<');
                i++;
                continue;
            }
            /* to the end of the tag, honouring quoted attribute values */
            char q = 0;
            int selfclose = 0;
            for (; j < len; j++) {
                if (q) {
                    if (s[j] == q)
                        q = 0;
                } else if (s[j] == '"' || s[j] == '\'') {
                    q = s[j];
                } else if (s[j] == '>') {
                    selfclose = j > 0 && s[j - 1] == '/';
                    break;
                }
            }
            i = j < len ? j + 1 : len;
            if (!closing && !selfclose && in_list(name, raw_skip, TK_ARRAY_LEN(raw_skip))) {
                i = skip_raw(s, len, i, name);
                continue;
            }
            if (strcmp(name, "title") == 0 && !closing) {
                st = flush(&h);
                h.heading = 1;
                continue;
            }
            if (strcmp(name, "title") == 0 && closing) {
                st = flush(&h);
                h.heading = 0;
                continue;
            }
            if (nl == 2 && name[0] == 'h' && name[1] >= '1' && name[1] <= '6') {
                st = flush(&h);
                h.heading = closing ? 0 : name[1] - '0';
                continue;
            }
            if (strcmp(name, "td") == 0 || strcmp(name, "th") == 0) {
                if (!closing && h.cur.len)
                    st = tk_buf_append_str(&h.cur, " | ");
                continue;
            }
            if (strcmp(name, "br") == 0) {
                st = tk_buf_append_byte(&h.cur, h.heading ? ' ' : '\n');
                continue;
            }
            if (in_list(name, blocks, TK_ARRAY_LEN(blocks))) {
                if (strcmp(name, "pre") == 0)
                    h.pre = !closing;
                if (!h.heading)
                    st = flush(&h);
                continue;
            }
            /* inline elements: a space keeps words of adjacent cells apart */
            if (strcmp(name, "span") && strcmp(name, "a") && strcmp(name, "b") &&
                strcmp(name, "i") && strcmp(name, "em") && strcmp(name, "strong") &&
                strcmp(name, "code") && strcmp(name, "sup") && strcmp(name, "sub") &&
                strcmp(name, "small") && strcmp(name, "u") && strcmp(name, "mark"))
                st = tk_buf_append_byte(&h.cur, ' ');
            continue;
        }
        if (c == '&') {
            char e[8];
            size_t el = 0, used = entity(s + i, len - i, e, &el);
            if (used) {
                st = tk_buf_append(&h.cur, e, el);
                i += used;
                continue;
            }
        }
        if ((c == '\n' || c == '\r') && !h.pre)
            c = ' ';
        st = tk_buf_append_byte(&h.cur, c);
        i++;
    }
    if (st == TK_OK)
        st = flush(&h);
    tk_buf_free(&h.cur);
    return st;
}
