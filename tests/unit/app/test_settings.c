/* settings: the character count the system prompt and titles are checked with. */
#include "app/settings.h"
#include "tk_test.h"

TEST(utf8_chars)
{
    CHECK_INT(app_utf8_chars("", 0), ==, 0);
    CHECK_INT(app_utf8_chars("abc", 3), ==, 3);
    CHECK_INT(app_utf8_chars("\xc3\xa9t\xc3\xa9", 5), ==, 3);
    CHECK_INT(app_utf8_chars("\xe6\x97\xa5", 3), ==, 1);
    CHECK_INT(app_utf8_chars("\xf0\x9f\x98\x80", 4), ==, 1);
    CHECK_INT(app_utf8_chars("\xc3", 1), ==, -1);             /* cut */
    CHECK_INT(app_utf8_chars("\xe6\x97", 2), ==, -1);         /* cut */
    CHECK_INT(app_utf8_chars("\xc0\xaf", 2), ==, -1);         /* overlong */
    CHECK_INT(app_utf8_chars("\xed\xa0\x80", 3), ==, -1);     /* surrogate */
    CHECK_INT(app_utf8_chars("\xf4\x90\x80\x80", 4), ==, -1); /* past U+10FFFF */
    CHECK_INT(app_utf8_chars("\xff", 1), ==, -1);
    CHECK_INT(app_utf8_chars("\x80", 1), ==, -1);
    CHECK_INT(app_utf8_chars("a\xc3(", 3), ==, -1);
}

TEST_MAIN()
