/*
 * browser.h — the browser lane's tools: browser_navigate, browser_read,
 * browser_click, browser_type, browser_scroll, browser_screenshot and
 * browser_actions, on the chat's own browser (app/browser/browser.h). A
 * navigation (browser_navigate, or browser_actions with a navigate step) gets
 * the browser from browser_get_or_create (getOrCreateBrowser: the first one of
 * a chat creates it, a browser_spawn event and span report it, the per-user
 * quota refuses with a 429 error event); every other call uses
 * browser_get_existing and never creates one. Screenshots are stored as the
 * user's downloads and shown to the user; the model is told what was taken.
 */
#ifndef APP_TOOLS_BROWSER_H
#define APP_TOOLS_BROWSER_H

void tools_browser_register(void);

#endif
