/*
 * kernel.h — one Jupyter kernel (Debian's ipykernel), spoken to over ZeroMQ.
 *
 * The kernel is `EXECD_PYTHON -m ipykernel_launcher -f <connection file>`, in
 * the workspace, in its own process group, with the ipc transport (unix
 * sockets in a private 0700 directory, never a network port) and a random
 * HMAC-SHA256 key. One thread per kernel owns its sockets (shell and control
 * DEALERs, an iopub SUB) and turns the iopub messages of an execution into
 * ServerStreamEvents:
 *
 *   stream            → stdout / stderr (the text as the kernel sent it)
 *   execute_result    → execution_count, then result (the MIME bundle)
 *   display_data      → result (e.g. a matplotlib figure as image/png)
 *   error             → status "error", then error {ename, evalue, traceback}
 *   idle + reply      → execution_count (if not sent yet), execution_complete
 *
 * Interrupt is SIGINT to the kernel's process group (as jupyter_client does).
 * A kernel that dies is noticed by the reaper and reported on the running
 * execution as an error DeadKernelError.
 */
#ifndef EXECD_KERNEL_H
#define EXECD_KERNEL_H

#include <stddef.h>

#include "execd/sink.h"

typedef struct execd_kernel execd_kernel;

/* Starts a kernel and waits until it answers a kernel_info_request (at most
 * EXECD_KERNEL_START_TIMEOUT). NULL with a message (including the tail of the
 * kernel's stderr) on failure. */
execd_kernel *execd_kernel_start(const char *tag, char *err, size_t errlen);

/* Hands an execution to the kernel's thread, which sends every event to sink
 * and ends it. 0: queued; -1: the kernel is busy; -2: the kernel has died.
 * On failure the sink is the caller's still. */
int execd_kernel_execute(execd_kernel *k, const char *code, size_t len, execd_sink *sink,
                         const char *init_text);

/* SIGINT to the kernel's process group. 1 when an execution was running. */
int execd_kernel_interrupt(execd_kernel *k);

/* Non-zero while the kernel process lives. reason gets why it ended. */
int execd_kernel_alive(execd_kernel *k, char *reason, size_t reasonlen);
int execd_kernel_busy(execd_kernel *k);

/* Kills the kernel, ends any execution (error event), stops the thread, frees. */
void execd_kernel_stop(execd_kernel *k);

/* Removes the private runtime directory (after every kernel has stopped). */
void execd_kernel_cleanup(void);

#endif
