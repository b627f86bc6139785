/*
 * fuzz_html_text — the HTML-to-text reducer (src/app/tools/html_text.c) on
 * untrusted pages, and the UTF-8 sanitiser web_fetch uses for text and JSON.
 *
 * Input: byte 0 picks the caps and the charset (small caps exercise the
 * truncation paths), the rest is the page. Invariants on every run:
 *   - the title, the text and every link's text are valid UTF-8 without NUL
 *     or control characters other than tab and newline (and CR outside pre);
 *   - the text fits max_text; the title HTML_TEXT_TITLE_MAX; a link's text
 *     HTML_TEXT_LINK_TEXT_MAX; at most max_links links, each URL distinct,
 *     an http(s) URL that normalises to itself;
 *   - a link's marker offset is inside the text, and "[N]" ends there;
 *   - reducing twice gives the same result (no hidden state).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/tools/html_text.h"
#include "lib/log.h"
#include "lib/url.h"

#define FUZZ_ASSERT(e)                                                                             \
    do {                                                                                           \
        if (!(e)) {                                                                                \
            fprintf(stderr, "invariant failed: %s (%s:%d)\n", #e, __FILE__, __LINE__);             \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* Valid UTF-8 (shortest forms, no surrogates) without NUL or C0/C1 controls
 * other than tab, LF and CR. */
static int clean_utf8(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        unsigned c = p[i];
        if (c < 0x80) {
            if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7F)
                return 0;
            i++;
            continue;
        }
        size_t k;
        uint32_t v, min;
        if ((c & 0xE0) == 0xC0)
            k = 1, v = c & 0x1F, min = 0x80;
        else if ((c & 0xF0) == 0xE0)
            k = 2, v = c & 0x0F, min = 0x800;
        else if ((c & 0xF8) == 0xF0)
            k = 3, v = c & 0x07, min = 0x10000;
        else
            return 0;
        for (size_t j = 1; j <= k; j++) {
            if (i + j >= n || (p[i + j] & 0xC0) != 0x80)
                return 0;
            v = (v << 6) | (p[i + j] & 0x3F);
        }
        if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF) || (v >= 0x80 && v < 0xA0))
            return 0;
        i += k + 1;
    }
    return 1;
}

static int initialised;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!initialised) {
        tk_log_init("fuzz_html_text");
        tk_log_set_level(TK_LOG_ERROR);
        initialised = 1;
    }
    if (size < 1)
        return 0;
    uint8_t sel = data[0];
    const char *html = (const char *)data + 1;
    size_t len = size - 1;

    static const char *const charsets[] = {NULL, "utf-8", "windows-1252", "ISO-8859-1"};
    html_text_opts o = {.max_text = (sel & 1) ? 64 + (sel >> 4) * 37 : 0,
                        .max_links = (sel & 2) ? 1 + (sel >> 5) : 0,
                        .charset = charsets[(sel >> 2) & 3]};
    size_t max_text = o.max_text ? o.max_text : HTML_TEXT_MAX_TEXT;
    size_t max_links = o.max_links ? o.max_links : HTML_TEXT_MAX_LINKS;

    tk_arena *a = tk_arena_new(0);
    tk_url base;
    const char *b = "https://example.com/dir/page.html?q=1";
    FUZZ_ASSERT(tk_url_parse(a, b, strlen(b), &base, NULL) == TK_OK);

    html_text_doc d, d2;
    html_text_reduce(html, len, (sel & 0x80) ? NULL : &base, &o, &d);
    FUZZ_ASSERT(d.title && d.text);
    FUZZ_ASSERT(strlen(d.text) == d.text_len);
    FUZZ_ASSERT(d.text_len <= max_text);
    FUZZ_ASSERT(clean_utf8(d.text, d.text_len));
    FUZZ_ASSERT(strlen(d.title) <= HTML_TEXT_TITLE_MAX);
    FUZZ_ASSERT(clean_utf8(d.title, strlen(d.title)));
    FUZZ_ASSERT(!strchr(d.title, '\n') && !strchr(d.title, '\t'));
    FUZZ_ASSERT(d.nlinks <= max_links);
    for (size_t i = 0; i < d.nlinks; i++) {
        const html_link *l = &d.links[i];
        FUZZ_ASSERT(l->url && l->text);
        FUZZ_ASSERT(strlen(l->text) <= HTML_TEXT_LINK_TEXT_MAX);
        FUZZ_ASSERT(clean_utf8(l->text, strlen(l->text)));
        tk_url u;
        FUZZ_ASSERT(tk_url_parse(a, l->url, strlen(l->url), &u, NULL) == TK_OK);
        FUZZ_ASSERT(strcmp(u.href, l->url) == 0);
        for (size_t j = 0; j < i; j++)
            FUZZ_ASSERT(strcmp(d.links[j].url, l->url) != 0);
        if (l->at != SIZE_MAX) {
            char m[32];
            int k = snprintf(m, sizeof m, "[%zu]", i + 1);
            FUZZ_ASSERT(l->at <= d.text_len && l->at >= (size_t)k);
            FUZZ_ASSERT(memcmp(d.text + l->at - (size_t)k, m, (size_t)k) == 0);
        }
    }

    html_text_reduce(html, len, (sel & 0x80) ? NULL : &base, &o, &d2);
    FUZZ_ASSERT(d2.text_len == d.text_len && memcmp(d2.text, d.text, d.text_len) == 0);
    FUZZ_ASSERT(strcmp(d2.title, d.title) == 0 && d2.nlinks == d.nlinks);
    html_text_doc_free(&d2);
    html_text_doc_free(&d);

    /* the sanitiser alone: valid output, stops only at the cap */
    tk_buf t;
    tk_buf_init(&t, (sel & 1) ? 50 : 1u << 22);
    size_t used = html_text_utf8(html, len, (sel >> 3) & 1, &t);
    FUZZ_ASSERT(used <= len);
    FUZZ_ASSERT(used == len || (sel & 1));
    FUZZ_ASSERT(clean_utf8(tk_buf_cstr(&t), t.len));
    tk_buf_free(&t);
    tk_arena_free(a);
    return 0;
}
