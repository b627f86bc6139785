/*
 * workspace.h — path safety for everything the agent writes or reads in a
 * sandbox: paths are confined to /workspace. Relative paths are taken under
 * /workspace; absolute ones must be inside it. NUL bytes, control characters,
 * ".." segments, "~" and over-long paths are refused (with the rule named), and
 * "." and repeated slashes are normalised. The result is only ever sent as a
 * JSON string or URL-encoded query value, never into a shell line; execd
 * confines paths again (and resolves symlinks beneath the root).
 */
#ifndef APP_WORKSPACE_H
#define APP_WORKSPACE_H

#include <stddef.h>

#include "lib/common.h"

#define AGENT_WS_ROOT     "/workspace"
#define AGENT_WS_PATH_MAX 4096

/* in has len bytes (it may contain a NUL, which is refused). out gets the
 * absolute normalised path. TK_EINVAL with a message in err otherwise. */
tk_status agent_ws_path(const char *in, size_t len, char *out, size_t outlen, char *err,
                        size_t errlen);

#endif
