/*
 * files.h — the /files and /directories endpoints of the execd API, every path
 * confined to the workspace (see fs.h and docs/EXECD.md).
 */
#ifndef EXECD_FILES_H
#define EXECD_FILES_H

#include "lib/httpd.h"

void execd_files_info(tk_req *r, void *ud);        /* GET /files/info?path=... */
void execd_files_delete(tk_req *r, void *ud);      /* DELETE /files?path=... */
void execd_files_permissions(tk_req *r, void *ud); /* POST /files/permissions */
void execd_files_mv(tk_req *r, void *ud);          /* POST /files/mv */
void execd_files_search(tk_req *r, void *ud);      /* GET /files/search */
void execd_files_replace(tk_req *r, void *ud);     /* POST /files/replace */
void execd_files_download(tk_req *r, void *ud);    /* GET /files/download */

void execd_dirs_list(tk_req *r, void *ud);   /* GET /directories/list */
void execd_dirs_make(tk_req *r, void *ud);   /* POST /directories */
void execd_dirs_remove(tk_req *r, void *ud); /* DELETE /directories?path=... */

/* POST /files/upload: the body streams through execd_upload_body (a TK_ROUTE
 * on_body), each file written to a temporary file beside its target and
 * renamed into place when its part ends; the handler answers at the end. */
int execd_upload_body(tk_req *r, const char *data, size_t len, void *ud);
void execd_upload_done(tk_req *r, void *ud);

#endif
