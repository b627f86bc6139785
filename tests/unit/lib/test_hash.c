/* lib/hash: FNV-1a (32 bits) against the published test vectors. */
#include "lib/hash.h"
#include "tk_test.h"

TEST(hash_fnv1a_known_vectors)
{
    CHECK_INT(tk_hash_fnv1a(""), ==, 0x811c9dc5u);
    CHECK_INT(tk_hash_fnv1a("a"), ==, 0xe40c292cu);
    CHECK_INT(tk_hash_fnv1a("foobar"), ==, 0xbf9cf968u);
    /* bytes past 0x7f are hashed as unsigned */
    CHECK_INT(tk_hash_fnv1a("\xff"), ==, (0x811c9dc5u ^ 0xffu) * 16777619u);
}

TEST_MAIN()
