/*
 * egress.h — a sandbox's checked way out (SANDBOX_NETWORK=proxy). The sandbox
 * lives in a network namespace holding only loopback; sandboxd makes a
 * listening socket on 127.0.0.1:SBX_EGRESS_PORT inside that namespace and has
 * lib/egress serve it from the host's, so every connection the sandbox makes
 * to the outside is a proxy request that the outbound fetch checks admit or
 * refuse. The sandbox gets HTTP_PROXY/HTTPS_PROXY (and the lower-case forms)
 * pointing there; direct connections have no route and names no resolver.
 */
#ifndef SBX_EGRESS_H
#define SBX_EGRESS_H

#include <stddef.h>
#include <sys/types.h>

#include "lib/common.h"
#include "lib/egress.h"

/* The proxy's port on the sandbox's loopback. */
#define SBX_EGRESS_PORT 3128

/* The environment a sandbox gets with the proxy, NULL-terminated (static). */
extern const char *const sbx_egress_env[];

/* A listening TCP socket on 127.0.0.1:port inside the network namespace of
 * process pid (made on a short-lived thread that joins that namespace, so this
 * process's own namespace never changes). Returns the fd, or -1 with err. */
int sbx_egress_listen_in(pid_t pid, int port, char *err, size_t errlen);

/* Sandbox id's way out: the listener on SBX_EGRESS_PORT made in the namespace
 * of pid and served by e with caps ("sandbox <id>" in its logs). NULL with err.
 * Let go of it with tk_egress_remove_listener. */
tk_egress_listener *sbx_egress_attach(tk_egress *e, const tk_egress_caps *caps, pid_t pid,
                                      const char *id, char *err, size_t errlen);

#endif
