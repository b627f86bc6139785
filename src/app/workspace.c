#include "app/workspace.h"

#include <stdio.h>
#include <string.h>

tk_status agent_ws_path(const char *in, size_t len, char *out, size_t outlen, char *err,
                        size_t errlen)
{
    if (!in || len == 0) {
        snprintf(err, errlen, "the path is empty");
        return TK_EINVAL;
    }
    if (memchr(in, 0, len)) {
        snprintf(err, errlen, "the path contains a NUL byte");
        return TK_EINVAL;
    }
    if (len > AGENT_WS_PATH_MAX) {
        snprintf(err, errlen, "the path is longer than %d bytes", AGENT_WS_PATH_MAX);
        return TK_EINVAL;
    }
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)in[i];
        if (c < 0x20 || c == 0x7f) {
            snprintf(err, errlen, "the path contains a control character");
            return TK_EINVAL;
        }
    }
    if (in[0] == '~') {
        snprintf(err, errlen, "\"~\" is not expanded: give a path under %s", AGENT_WS_ROOT);
        return TK_EINVAL;
    }
    const char *rest = in;
    size_t rlen = len;
    size_t root = strlen(AGENT_WS_ROOT);
    if (in[0] == '/') {
        if (len < root || memcmp(in, AGENT_WS_ROOT, root) != 0 || (len > root && in[root] != '/')) {
            snprintf(err, errlen, "absolute paths must be inside %s", AGENT_WS_ROOT);
            return TK_EINVAL;
        }
        rest = in + root;
        rlen = len - root;
    }
    /* rebuild segment by segment */
    size_t o = 0;
    if (outlen < root + 2) {
        snprintf(err, errlen, "the path is too long");
        return TK_EINVAL;
    }
    memcpy(out, AGENT_WS_ROOT, root);
    o = root;
    size_t i = 0;
    while (i < rlen) {
        while (i < rlen && rest[i] == '/')
            i++;
        size_t s = i;
        while (i < rlen && rest[i] != '/')
            i++;
        size_t n = i - s;
        if (n == 0 || (n == 1 && rest[s] == '.'))
            continue;
        if (n == 2 && rest[s] == '.' && rest[s + 1] == '.') {
            snprintf(err, errlen, "\"..\" is not allowed in a path");
            return TK_EINVAL;
        }
        if (o + 1 + n + 1 > outlen) {
            snprintf(err, errlen, "the path is too long");
            return TK_EINVAL;
        }
        out[o++] = '/';
        memcpy(out + o, rest + s, n);
        o += n;
    }
    out[o] = 0;
    return TK_OK;
}
