#include "sandboxd/env.h"

#include <ctype.h>
#include <string.h>

int sbx_env_name_valid(const char *s)
{
    if (!s || !*s || strlen(s) > 255)
        return 0;
    if (!(isalpha((unsigned char)s[0]) || s[0] == '_'))
        return 0;
    for (const char *p = s; *p; p++)
        if (!(isalnum((unsigned char)*p) || *p == '_'))
            return 0;
    return 1;
}
