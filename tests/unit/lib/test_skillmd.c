/* SKILL.md front matter: the YAML subset and every rule of the format. */
#include <stdlib.h>
#include <string.h>

#include "lib/skillmd.h"
#include "tk_test.h"

static char err[512];

static tk_status parse(const char *s, const char *folder, tk_skill_md *md)
{
    return tk_skillmd_parse(s, strlen(s), folder, md, err, sizeof err);
}

/* the text fails with an error containing want, and nothing is left filled */
static void refused(const char *s, const char *folder, const char *want)
{
    tk_skill_md md;
    if (parse(s, folder, &md) != TK_EINVAL)
        TK_TEST_FAIL("accepted: %s", s);
    if (!strstr(err, want))
        TK_TEST_FAIL("error \"%s\" lacks \"%s\" for: %s", err, want, s);
    CHECK(md.name == NULL && md.description == NULL && md.n_warnings == 0);
}

TEST(skillmd_minimal_and_body)
{
    tk_skill_md md;
    const char *s =
        "---\nname: pdf-tools\ndescription: Fill PDF forms. Use when asked to.\n---\n# Body\n";
    CHECK(parse(s, "pdf-tools", &md) == TK_OK);
    CHECK_STR(md.name, "pdf-tools");
    CHECK_STR(md.description, "Fill PDF forms. Use when asked to.");
    CHECK_STR(s + md.body_off, "# Body\n");
    CHECK(md.license == NULL && md.compatibility == NULL && md.allowed_tools == NULL);
    CHECK_INT(md.n_metadata, ==, 0);
    CHECK_INT(md.n_warnings, ==, 0);
    tk_skillmd_free(&md);
    /* CRLF line ends, the closing fence at the end of the file, no folder to compare */
    s = "---\r\nname: a\r\ndescription: d\r\n---";
    CHECK(parse(s, NULL, &md) == TK_OK);
    CHECK_STR(md.name, "a");
    CHECK_STR(md.description, "d");
    CHECK_INT(md.body_off, ==, strlen(s));
    tk_skillmd_free(&md);
}

TEST(skillmd_all_keys)
{
    tk_skill_md md;
    const char *s = "---\n"
                    "# a comment\n"
                    "name: data-report   # trailing comment\n"
                    "description: >-\n"
                    "  Builds a report\n"
                    "  from data.\n"
                    "\n"
                    "  Use when asked.\n"
                    "license: Apache-2.0\n"
                    "compatibility: 'needs python3, it''s fine'\n"
                    "metadata:\n"
                    "  author: \"Ann \\u00e9\"\n"
                    "  version: '1.0'\n"
                    "allowed-tools: exec read_file\n"
                    "---\n"
                    "body";
    CHECK(parse(s, "data-report", &md) == TK_OK);
    CHECK_STR(md.name, "data-report");
    CHECK_STR(md.description, "Builds a report from data.\nUse when asked.");
    CHECK_STR(md.license, "Apache-2.0");
    CHECK_STR(md.compatibility, "needs python3, it's fine");
    CHECK_INT(md.n_metadata, ==, 2);
    CHECK_STR(md.metadata[0].key, "author");
    CHECK_STR(md.metadata[0].value, "Ann \xc3\xa9");
    CHECK_STR(md.metadata[1].key, "version");
    CHECK_STR(md.metadata[1].value, "1.0");
    CHECK_STR(md.allowed_tools, "exec read_file");
    CHECK_STR(s + md.body_off, "body");
    tk_skillmd_free(&md);
}

TEST(skillmd_block_scalars_and_lists)
{
    tk_skill_md md;
    CHECK(parse("---\nname: x\ndescription: |\n  line one\n    indented\n  line two\n---\n", "x",
                &md) == TK_OK);
    CHECK_STR(md.description, "line one\n  indented\nline two\n");
    tk_skillmd_free(&md);
    CHECK(parse("---\nname: x\ndescription: plain\n  continued\n   here\n---\n", "x", &md) ==
          TK_OK);
    CHECK_STR(md.description, "plain continued here");
    tk_skillmd_free(&md);
    CHECK(parse("---\nname: x\ndescription: d\nallowed-tools:\n  - exec\n  - \"read_file\"\n---\n",
                "x", &md) == TK_OK);
    CHECK_STR(md.allowed_tools, "exec read_file");
    tk_skillmd_free(&md);
}

TEST(skillmd_unknown_keys_kept_with_warnings)
{
    tk_skill_md md;
    CHECK(
        parse("---\nname: x\ndescription: d\nuser-invocable: false\ntriggers:\n  - a\n  - b\n---\n",
              "x", &md) == TK_OK);
    CHECK_INT(md.n_extra, ==, 2);
    CHECK_STR(md.extra[0].key, "user-invocable");
    CHECK_STR(md.extra[0].value, "false");
    CHECK_STR(md.extra[1].key, "triggers");
    CHECK_STR(md.extra[1].value, "  - a\n  - b");
    CHECK_INT(md.n_warnings, ==, 2);
    CHECK(strstr(md.warnings[0], "\"user-invocable\"") != NULL);
    CHECK(strstr(md.warnings[1], "\"triggers\"") != NULL);
    tk_skillmd_free(&md);
}

TEST(skillmd_name_rule)
{
    CHECK(tk_skillmd_name_valid("a", 1));
    CHECK(tk_skillmd_name_valid("a-b-9", 5));
    char n64[65], n65[66];
    memset(n64, 'a', 64);
    n64[64] = '\0';
    memset(n65, 'a', 65);
    n65[65] = '\0';
    CHECK(tk_skillmd_name_valid(n64, 64));
    CHECK(!tk_skillmd_name_valid(n65, 65));
    CHECK(!tk_skillmd_name_valid("", 0));
    CHECK(!tk_skillmd_name_valid("-a", 2));
    CHECK(!tk_skillmd_name_valid("a-", 2));
    CHECK(!tk_skillmd_name_valid("a--b", 4));
    CHECK(!tk_skillmd_name_valid("Abc", 3));
    CHECK(!tk_skillmd_name_valid("a_b", 3));
    CHECK(!tk_skillmd_name_valid("a b", 3));
    CHECK(!tk_skillmd_name_valid("\xc3\xa9", 2));
    char buf[256];
    tk_skill_md md;
    snprintf(buf, sizeof buf, "---\nname: %s\ndescription: d\n---\n", n64);
    CHECK(parse(buf, n64, &md) == TK_OK);
    tk_skillmd_free(&md);
    snprintf(buf, sizeof buf, "---\nname: %s\ndescription: d\n---\n", n65);
    refused(buf, NULL, "name: 1-64 characters");
    refused("---\nname: a--b\ndescription: d\n---\n", NULL, "single hyphens");
    refused("---\nname: -ab\ndescription: d\n---\n", NULL, "name:");
    refused("---\nname: Ab\ndescription: d\n---\n", NULL, "name:");
    refused("---\nname: ab\ndescription: d\n---\n", "abc", "must equal the folder's name");
    refused("---\nname: ''\ndescription: d\n---\n", NULL, "name: must not be empty");
    refused("---\ndescription: d\n---\n", NULL, "name: is required");
    refused("---\nname:\n  a: b\ndescription: d\n---\n", NULL, "name: must be a string");
}

TEST(skillmd_description_rule)
{
    char buf[4096];
    tk_skill_md md;
    /* 1024 characters of two bytes each pass: the limit counts characters */
    size_t k = 0;
    for (int i = 0; i < 512; i++) {
        buf[k++] = (char)0xc3;
        buf[k++] = (char)0xa9;
    }
    buf[k] = '\0';
    char text[4096];
    snprintf(text, sizeof text, "---\nname: a\ndescription: %s%s\n---\n", buf, buf);
    CHECK(parse(text, "a", &md) == TK_OK);
    tk_skillmd_free(&md);
    snprintf(text, sizeof text, "---\nname: a\ndescription: %s%sx\n---\n", buf, buf);
    refused(text, "a", "description: at most 1024 characters (this one has 1025)");
    refused("---\nname: a\ndescription: ''\n---\n", NULL, "description: must not be empty");
    refused("---\nname: a\ndescription:\n---\n", NULL, "description: must be a string");
    refused("---\nname: a\n---\n", NULL, "description: is required");
}

TEST(skillmd_optional_keys_rules)
{
    char c501[502], text[1024];
    memset(c501, 'c', 501);
    c501[501] = '\0';
    tk_skill_md md;
    snprintf(text, sizeof text, "---\nname: a\ndescription: d\ncompatibility: %.500s\n---\n", c501);
    CHECK(parse(text, "a", &md) == TK_OK);
    CHECK_INT(strlen(md.compatibility), ==, 500);
    tk_skillmd_free(&md);
    snprintf(text, sizeof text, "---\nname: a\ndescription: d\ncompatibility: %s\n---\n", c501);
    refused(text, NULL, "compatibility: at most 500 characters");
    refused("---\nname: a\ndescription: d\ncompatibility: \"\"\n---\n", NULL,
            "compatibility: must not be empty");
    refused("---\nname: a\ndescription: d\nmetadata: x\n---\n", NULL, "metadata: must be a map");
    refused("---\nname: a\ndescription: d\nmetadata:\n  - x\n---\n", NULL,
            "metadata: must be a map");
    refused("---\nname: a\ndescription: d\nmetadata:\n  a:\n    b: c\n---\n", NULL,
            "must be a string on its line");
    refused("---\nname: a\ndescription: d\nmetadata:\n  a: b\n  a: c\n---\n", NULL,
            "\"a\" appears twice");
    refused("---\nname: a\ndescription: d\nlicense:\n  - MIT\n---\n", NULL,
            "license: must be a string");
    refused("---\nname: a\ndescription: d\nallowed-tools:\n  k: v\n---\n", NULL,
            "allowed-tools: must be a string");
}

TEST(skillmd_yaml_subset_refusals)
{
    refused("name: a\ndescription: d\n", NULL, "must start with a line \"---\"");
    refused("\xef\xbb\xbf---\nname: a\ndescription: d\n---\n", NULL, "must start with");
    refused("---\nname: a\ndescription: d\n", NULL, "not closed");
    refused("---\nname: a\ndescription: \xff\n---\n", NULL, "not valid UTF-8");
    refused("---\nname: a\n\tdescription: d\n---\n", NULL, "tabs");
    refused("---\n  name: a\ndescription: d\n---\n", NULL, "unexpected indentation");
    refused("---\nname: a\n  description: d\n---\n", NULL, "': '");
    refused("---\nname: a\nname: b\ndescription: d\n---\n", NULL, "\"name\" appears twice");
    refused("---\nname: a\ndescription: [a, b]\n---\n", NULL, "flow collections");
    refused("---\nname: a\ndescription: {a: b}\n---\n", NULL, "flow collections");
    refused("---\nname: &x a\ndescription: d\n---\n", NULL, "anchors and aliases");
    refused("---\nname: a\ndescription: *x\n---\n", NULL, "anchors and aliases");
    refused("---\nname: a\ndescription: !!str d\n---\n", NULL, "tags");
    refused("---\nname: a\ndescription: use when: asked\n---\n", NULL, "': '");
    refused("---\nname: a\ndescription: \"open\n---\n", NULL, "not closed on its line");
    refused("---\nname: a\ndescription: 'a' b\n---\n", NULL, "text after the closing quote");
    refused("---\nname: a\ndescription: \"\\q\"\n---\n", NULL, "unknown escape");
    refused("---\nname: a\ndescription: \"\\u0000\"\n---\n", NULL, "not a character");
    refused("---\nname: a\ndescription: \"\\ud800\"\n---\n", NULL, "not a character");
    refused("---\nname: a\njust text\n---\n", NULL, "expected `key: value`");
    refused("---\nname: a\nkey:value\n---\n", NULL, "expected `key: value`");
    refused("---\nname: a\ndescription: |x\n  d\n---\n", NULL, "block header");
    refused("---\nname: a\nmetadata:\n  a: b\n  - c\n---\n", NULL, "mixed");
    refused("---\nname: a\nmetadata:\n  a: b\n    c: d\n---\n", NULL, "one level of nesting");
    refused("---\nname: a\ndescription: d\rx\n---\n", NULL, "carriage return");
    const char nul[] = "---\nname: a\0\ndescription: d\n---\n";
    tk_skill_md md;
    CHECK(tk_skillmd_parse(nul, sizeof nul - 1, NULL, &md, err, sizeof err) == TK_EINVAL);
    CHECK(strstr(err, "NUL") != NULL);
}

TEST(skillmd_front_matter_cap)
{
    size_t n = TK_SKILL_FRONT_MAX + 200;
    char *s = malloc(n + 64);
    strcpy(s, "---\nname: a\ndescription: d\n");
    size_t k = strlen(s);
    while (k < n) {
        memcpy(s + k, "# pad\n", 6);
        k += 6;
    }
    strcpy(s + k, "---\n");
    refused(s, NULL, "over 65536 bytes");
    free(s);
}

TEST_MAIN()
