/*
 * web_fetch.h — the web_fetch tool (fast lane: it runs in the chat server and
 * never needs a sandbox).
 *
 *   web_fetch {url, max_chars?}
 *
 * Fetches the URL through the outbound fetch check (tk_ssrf_fetch, with the
 * process's policy app_get()->ssrf, built once at start-up from SSRF_ALLOW,
 * SSRF_DENY, SSRF_ALLOWED_PORTS and FETCH_*), then answers readable text:
 *   - HTML (text/html, application/xhtml+xml): the page reduced by html_text.h
 *     (title, main text, numbered links resolved against the final URL);
 *   - JSON (application/json, text/json, +json): pretty-printed (as it came
 *     when it does not parse);
 *   - text (text/ types, XML, JavaScript, YAML...): as it is;
 *   - anything else: its type and size, not its bytes.
 * The text is cut at max_chars characters (at most WEB_FETCH_MAX_CHARS, the
 * default) with a note saying so; the links listed are those the shown text
 * refers to. The result starts with the final URL, the status, the content
 * type and the redirect hops. A refusal (the SSRF code and reason) and a
 * failed fetch are ordinary results marked as errors, never an exception: the
 * turn goes on and the model reads why. A status of 400 or more is an error
 * result too (with the page's text).
 *
 * The tool's span (and tool_end event) carries url, code, status, bytes, plus
 * final_url, content_type, redirects and cause when there are any.
 */
#ifndef APP_TOOLS_WEB_FETCH_H
#define APP_TOOLS_WEB_FETCH_H

#include <jansson.h>
#include <stddef.h>

#include "app/agent/tools.h"
#include "lib/ssrf.h"

#define WEB_FETCH_MIN_CHARS 100 /* a smaller max_chars is raised to this */

/* Registers web_fetch (app_agent_start calls it). */
void web_fetch_register(void);

/*
 * Shapes the outcome of tk_ssrf_fetch(url) (st and *r) into the tool's result:
 * out gets the text, the error flag and the data shown to the user; *attrs
 * (new object) the span attributes. max_chars caps the text; cap_name names
 * what set it in the note ("max_chars" or "WEB_FETCH_MAX_CHARS"). Pure: no
 * network, no globals (for tests).
 */
void web_fetch_shape(const char *url, tk_status st, const tk_ssrf_result *r, size_t max_chars,
                     const char *cap_name, agent_result *out, json_t **attrs);

#endif
