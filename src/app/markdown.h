/*
 * markdown.h — model and user text to safe HTML, with cmark-gfm (GitHub's C
 * implementation of CommonMark) and its GFM extensions: tables, autolinks,
 * strikethrough, task lists.
 *
 * Safe by construction, not by filtering the output:
 *   - cmark's safe mode (no CMARK_OPT_UNSAFE) is on;
 *   - raw HTML (blocks and inline) becomes literal text, so "<script>" shows
 *     as the characters the model wrote and is never parsed as markup;
 *   - a link whose target is not an absolute http:, https: or mailto: URL
 *     (javascript:, data:, vbscript:, relative paths...) is unlinked: its text
 *     stays, the target goes;
 *   - an image becomes a link to it (http/https only) labelled "image: alt":
 *     the browser never fetches a URL the model chose (no tracking pixels, no
 *     exfiltration through image URLs), and the CSP allows no foreign images.
 * Single newlines are line breaks (models write them that way). Fenced code
 * gets class="language-<info>" for the client's highlighter.
 *
 * POST /api/markdown  {"text": "..."} → {"html": "..."}
 *                     {"texts": ["...", ...]} → {"html": ["...", ...]}
 * (authenticated; at most 1 MiB in all.)
 */
#ifndef APP_MARKDOWN_H
#define APP_MARKDOWN_H

#include <stddef.h>

#include "lib/httpd.h"

/* Renders len bytes of Markdown (any bytes: invalid UTF-8 is replaced).
 * Returns a heap string (free() it); never NULL (aborts on OOM). */
char *app_markdown_html(const char *md, size_t len);

/* Non-zero when url is an absolute http:, https: or mailto: URL (the only
 * link targets kept). */
int app_markdown_url_ok(const char *url);

extern const tk_route app_markdown_routes[];
extern const size_t app_markdown_nroutes;

#endif
