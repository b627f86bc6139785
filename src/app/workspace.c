/* Agent paths: lib/pathsafe's lexical rules against /workspace (see workspace.h). */
#include "app/workspace.h"

#include "lib/pathsafe.h"

tk_status agent_ws_path(const char *in, size_t len, char *out, size_t outlen, char *err,
                        size_t errlen)
{
    tk_status st = tk_pathsafe_check(AGENT_WS_ROOT, in ? in : "", in ? len : 0, TK_PATHSAFE_STRICT,
                                     out, outlen, err, errlen);
    return st == TK_OK ? TK_OK : TK_EINVAL;
}
