/*
 * execd_port.h — the port execd serves on inside a sandbox (OpenSandbox's
 * convention: the lifecycle API's endpoints/44772). One definition for the
 * three programs that must agree on it: tusko-execd listens there by default,
 * tusko-sandboxd's proxy serves only it, and the sandbox client asks the
 * lifecycle server for its endpoint.
 */
#ifndef TK_EXECD_PORT_H
#define TK_EXECD_PORT_H

#define TK_EXECD_PORT 44772
/* The same number as a string literal ("44772"), for default addresses. */
#define TK_EXECD_PORT_STR      TK_EXECD_PORT_STR_(TK_EXECD_PORT)
#define TK_EXECD_PORT_STR_(n)  TK_EXECD_PORT_STR__(n)
#define TK_EXECD_PORT_STR__(n) #n

#endif
