/*
 * code.h — code contexts: POST /code/context, GET /code/contexts,
 * GET|DELETE /code/contexts/{id}, DELETE /code/contexts?language=, POST /code,
 * interrupt.
 *
 * A context is one Python kernel (kernel.h), started when the context is
 * created — never at execd's start-up. POST /code with a context id runs in
 * it; with only {"language":"python"} it runs in that language's default
 * context (created on first use); with no language at all the code runs as a
 * shell command, as upstream does. A context whose kernel died is restarted on
 * its next execution, which then says so on stderr (its earlier state is gone).
 */
#ifndef EXECD_CODE_H
#define EXECD_CODE_H

#include "lib/httpd.h"

void execd_code_create(tk_req *r, void *ud);      /* POST /code/context */
void execd_code_list(tk_req *r, void *ud);        /* GET /code/contexts */
void execd_code_delete_lang(tk_req *r, void *ud); /* DELETE /code/contexts?language= */
void execd_code_get(tk_req *r, void *ud);         /* GET /code/contexts/{context_id} */
void execd_code_delete(tk_req *r, void *ud);      /* DELETE /code/contexts/{context_id} */
void execd_code_run(tk_req *r, void *ud);         /* POST /code */

/* Interrupts the execution running in context id. 1: interrupted; -1: the
 * context is idle; 0: no such context. */
int execd_code_interrupt(const char *id);

size_t execd_code_count(void);

/* Stops every kernel. */
void execd_code_shutdown(void);

#endif
