/*
 * page.h — what browserd does on a session's page over CDP: go to a URL,
 * read it (HTML, markdown, text, links, metadata, an outline of its
 * accessibility tree with @eN references), act on it (click, type, scroll)
 * and capture it (JPEG/PNG screenshot, PDF).
 *
 * Each function runs under the session's action lock (brd_session_lock) taken
 * by the caller. Results are capped (BRD_PAGE_* below); a page is untrusted,
 * so what it gives back is checked for shape and size before use.
 */
#ifndef BRD_PAGE_H
#define BRD_PAGE_H

#include <jansson.h>
#include <stdint.h>

#include "browserd/session.h"
#include "lib/buf.h"
#include "lib/common.h"

#define BRD_PAGE_MAX_URL     8192
#define BRD_PAGE_MAX_TEXT    (4u << 20) /* html, markdown or text of one page */
#define BRD_PAGE_MAX_LINKS   2000
#define BRD_PAGE_MAX_OUTLINE (48u << 10)
#define BRD_PAGE_MAX_IMAGE   (32u << 20)
#define BRD_PAGE_MAX_HEIGHT  16384 /* a full-page screenshot's height */
#define BRD_PAGE_NAV_TIMEOUT 30000

/* The schemes a page may be sent to: http, https, data, and about:blank.
 * TK_EDENIED with err otherwise (file:, chrome:, javascript:, ...). */
tk_status brd_page_check_url(const char *url, char *err, size_t errlen);

/* Goes to url and waits for its load. *info: {url, title, status}. */
tk_status brd_page_goto(brd_session *s, const char *url, int64_t timeout_ms, json_t **info,
                        char *err, size_t errlen);
/* {url, title} of what the page shows now. */
tk_status brd_page_info(brd_session *s, json_t **info, char *err, size_t errlen);

enum { BRD_PAGE_HTML = 1, BRD_PAGE_MARKDOWN = 2 };
/* Steel's scrape of the current page: {content:{html?,markdown?}, links,
 * metadata} (metadata.statusCode is left to the caller). */
tk_status brd_page_scrape(brd_session *s, unsigned formats, json_t **out, char *err, size_t errlen);
/* The page's readable text (innerText), at most max_chars characters. */
tk_status brd_page_text(brd_session *s, size_t max_chars, char **text, char *err, size_t errlen);
/* An outline of the accessibility tree: one line a node worth naming,
 * "- role "name"" with [@eN] on what can be clicked or typed into; the
 * session's refs are replaced. */
tk_status brd_page_outline(brd_session *s, char **text, char *err, size_t errlen);
/* Turns an outline of nodes (Accessibility.getFullAXTree's) into text and
 * refs (malloc'd backend node ids); exposed for the fuzz target. */
char *brd_page_outline_of(const json_t *nodes, int64_t **refs, size_t *nrefs);

tk_status brd_page_click(brd_session *s, const char *ref, char *err, size_t errlen);
tk_status brd_page_type(brd_session *s, const char *ref, const char *text, int submit, char *err,
                        size_t errlen);
/* direction up|down|left|right, amount in pixels (0: most of a screen). */
tk_status brd_page_scroll(brd_session *s, const char *direction, int amount, char *err,
                          size_t errlen);

/* The decoded image (jpeg or png) into out. */
tk_status brd_page_screenshot(brd_session *s, const char *format, int full_page, tk_buf *out,
                              char *err, size_t errlen);
tk_status brd_page_pdf(brd_session *s, tk_buf *out, char *err, size_t errlen);

#endif
