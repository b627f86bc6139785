/* users: email addresses normalised. */
#include <string.h>

#include "app/users.h"
#include "tk_test.h"

TEST(email_normalize)
{
    char e[256];
    CHECK(app_email_normalize("  Alice@Example.COM ", e, sizeof e) == TK_OK);
    CHECK_STR(e, "alice@example.com");
    const char *bad[] = {"", "alice", "@x", "x@", "a@b@c", "a b@c", "a\n@b", "a<@b", "a\"@b", NULL};
    for (int i = 0; bad[i]; i++)
        if (app_email_normalize(bad[i], e, sizeof e) == TK_OK)
            TK_TEST_FAIL("accepted \"%s\"", bad[i]);
    char longer[300];
    memset(longer, 'a', 260);
    memcpy(longer + 250, "@x.com", 7);
    CHECK(app_email_normalize(longer, e, sizeof e) != TK_OK);
    CHECK(app_email_normalize(NULL, e, sizeof e) != TK_OK);
}

TEST_MAIN()
