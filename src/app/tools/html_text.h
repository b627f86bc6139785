/*
 * html_text.h — readable text out of an untrusted HTML page: web_fetch's
 * result, Utopia's HTML documents (src/app/utopia/html.c), the browser's "read
 * the page" later.
 *
 * A tolerant single-pass tokenizer with a small open-element stack, not a DOM.
 * What comes out:
 *   - the <title> (whitespace collapsed), apart from the text;
 *   - the main text: when the page has a <main> (or role="main") only what is
 *     inside it, else the whole body; in both cases without script, style,
 *     noscript, template, iframe, svg, math, canvas, object, select, textarea,
 *     button, nav, aside, form, the page's header and footer (a header or footer
 *     inside article/section/main is kept: it holds the article's headline),
 *     elements with role navigation/banner/contentinfo/complementary/search/menu,
 *     and elements marked hidden or aria-hidden="true";
 *   - headings as "# ", "## "...; paragraphs and blocks separated by a blank
 *     line; list items as "- " or "1. " (nested lists indented); table rows one
 *     a line with cells joined by " | "; pre as a ``` fenced block, verbatim;
 *   - every link a numbered marker after its text ("the docs [3]"), and the
 *     links as a list: absolute URLs resolved against the page's URL (or its
 *     <base href>) with tk_url_resolve, normalised, each URL numbered once;
 *     links that are not http(s) (mailto:, javascript:, "#top") are dropped.
 * Character references are decoded (named, decimal, hex; the HTML rules for
 * NUL, surrogates and the windows-1252 range); the output is always valid
 * UTF-8: the input is read as UTF-8 (invalid bytes become U+FFFD) unless the
 * charset (Content-Type, else <meta charset>) says windows-1252 / ISO-8859-1 /
 * ASCII, which are read as windows-1252.
 *
 * If the main text comes out empty (a <main> that scripts fill, a page inside
 * one <form>), it is made again from the whole body, then with only the
 * script/style/hidden rules. At most three passes; each is linear in the input.
 *
 * Caps: the text stops at max_text bytes (truncated is set); at most max_links
 * links are numbered (links_more counts the rest); the title at
 * HTML_TEXT_TITLE_MAX bytes, a link's text at HTML_TEXT_LINK_TEXT_MAX, the
 * element stack at HTML_TEXT_MAX_DEPTH (deeper elements are not tracked).
 * Memory is the output's caps plus the stack. Pure and thread-safe.
 */
#ifndef APP_TOOLS_HTML_TEXT_H
#define APP_TOOLS_HTML_TEXT_H

#include <stddef.h>

#include "lib/buf.h"
#include "lib/url.h"

#define HTML_TEXT_MAX_TEXT      (1u << 20) /* default max_text */
#define HTML_TEXT_MAX_LINKS     200        /* default max_links */
#define HTML_TEXT_TITLE_MAX     512
#define HTML_TEXT_LINK_TEXT_MAX 120
#define HTML_TEXT_MAX_DEPTH     512

typedef struct {
    size_t max_text;     /* bytes of text at most; 0: HTML_TEXT_MAX_TEXT */
    size_t max_links;    /* links numbered at most; 0: HTML_TEXT_MAX_LINKS */
    const char *charset; /* from the Content-Type; NULL: <meta charset>, else UTF-8 */
    int no_links;        /* links are plain text: no markers, no list */
} html_text_opts;

typedef struct {
    char *url;  /* absolute and normalised (heap) */
    char *text; /* the text of its first anchor, collapsed (heap; may be "") */
    size_t at;  /* offset in the text just past its first marker "[N]" */
} html_link;

/* Free with html_text_doc_free. Every string is valid UTF-8. */
typedef struct {
    char *title; /* heap; "" when the page has none */
    char *text;  /* heap; "" when nothing readable */
    size_t text_len;
    int truncated;    /* the text stopped at max_text */
    html_link *links; /* link N is links[N - 1] */
    size_t nlinks;
    size_t links_more; /* anchors to further URLs, not numbered (max_links) */
    int main_only;     /* the text is the page's <main> only */
} html_text_doc;

/*
 * Reduces len bytes of HTML (no NUL needed). base is the page's URL (links are
 * resolved against it; NULL: only absolute links are kept). opts may be NULL.
 * Never fails: garbage in gives little text out.
 */
void html_text_reduce(const char *html, size_t len, const tk_url *base, const html_text_opts *opts,
                      html_text_doc *out);
void html_text_doc_free(html_text_doc *d);

/* Whether a charset label is read as windows-1252 (windows-1252, iso-8859-1,
 * latin1, us-ascii, ascii and their aliases; case-insensitive). */
int html_text_charset_is_1252(const char *charset);

/*
 * Appends len bytes of text to out as valid UTF-8: as UTF-8 with invalid
 * sequences replaced by U+FFFD, or (cp1252) as windows-1252. NUL and control
 * characters other than tab, newline and carriage return are dropped. Stops
 * before a character that would not fit under out's cap; returns the bytes of
 * input consumed (len when all of it fit).
 */
size_t html_text_utf8(const char *s, size_t len, int cp1252, tk_buf *out);

#endif
