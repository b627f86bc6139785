/* lib/id: UUIDv4/v7 and tokens. */
#include <string.h>

#include "lib/id.h"
#include "lib/tktime.h"
#include "tk_test.h"

TEST(uuids)
{
    char a[TK_UUID_LEN], b[TK_UUID_LEN];
    tk_uuid4(a);
    tk_uuid4(b);
    CHECK(tk_uuid_valid(a) && tk_uuid_valid(b));
    CHECK(strcmp(a, b) != 0);
    CHECK(a[14] == '4');
    CHECK(strchr("89ab", a[19]) != NULL);
    tk_uuid7(a);
    tk_sleep_ms(2);
    tk_uuid7(b);
    CHECK(a[14] == '7');
    CHECK(strcmp(a, b) < 0); /* time-ordered */
    CHECK(!tk_uuid_valid("not-a-uuid"));
    CHECK(!tk_uuid_valid("0190a0a0-0000-7000-8000-00000000000g"));
    char tok[65];
    tk_token_hex(tok, 32);
    CHECK_INT(strlen(tok), ==, 64);
}

TEST_MAIN()
