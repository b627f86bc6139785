/*
 * workspace.h — path safety for everything the agent writes or reads in a
 * sandbox: paths are confined to /workspace. Relative paths are taken under
 * /workspace; absolute ones must be inside it. The rules are lib/pathsafe's
 * own (tk_pathsafe_check, strict: every "..", NUL bytes, control characters,
 * invalid UTF-8, backslashes, "~", "$", percent-escapes, over-long names and
 * paths are refused, with the rule named), the same execd applies again in
 * the sandbox, so whatever execd would refuse is refused here first with the
 * same message; "." and repeated slashes are normalised. The result is only
 * ever sent as a JSON string or URL-encoded query value, never into a shell
 * line; execd confines paths again (and resolves symlinks beneath the root).
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
