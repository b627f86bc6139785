/* The string hash (see hash.h). */
#include "lib/hash.h"

uint32_t tk_hash_fnv1a(const char *s)
{
    uint32_t h = 2166136261u;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        h = (h ^ *p) * 16777619u;
    return h;
}
