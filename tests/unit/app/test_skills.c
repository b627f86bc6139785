/* app/skills: the built-in skills compiled into the binary (each parses with
 * the strict rules, names reserved), a broken table refused with the file and
 * the rule, the files a skill lists and nothing else, the digest, the
 * catalogue's budget, the activation text and "/name args". */
#include <string.h>

#include "app/skills.h"
#include "lib/embed.h"
#include "tk_test.h"

static const char *const BUILTINS[] = {"code-review", "financial-model", "presentation",
                                       "security-audit", "word-report"};

static void init_builtins(void)
{
    char err[512] = "";
    tk_status st = skills_init(err, sizeof err);
    if (st != TK_OK)
        fprintf(stderr, "skills_init: %s\n", err);
    CHECK_INT(st, ==, TK_OK);
}

TEST(the_five_builtins_parse_and_are_reserved)
{
    init_builtins();
    CHECK_INT(skills_builtin_count(), ==, 5);
    for (size_t i = 0; i < 5; i++) {
        const skills_skill *sk = skills_builtin_at(i);
        CHECK_STR(sk->name, BUILTINS[i]); /* in the table's (sorted) order */
        CHECK(skills_name_reserved(BUILTINS[i]));
        CHECK(sk->builtin && sk->enabled && sk->version == 1);
        CHECK(strlen(sk->description) > 80); /* says what it does and when */
        CHECK(strlen(sk->body) > 500);       /* real instructions */
        CHECK(strncmp(sk->body, "---", 3) != 0);
        CHECK(strstr(sk->skill_md, "\n---\n") != NULL);
        CHECK_INT(strlen(sk->digest), ==, 64);
        /* each ships a script, and the body names the scripts it has */
        int scripts = 0;
        for (size_t k = 0; k < sk->nfiles; k++) {
            CHECK(strcmp(sk->files[k].path, "SKILL.md") != 0);
            if (strncmp(sk->files[k].path, "scripts/", 8) == 0) {
                scripts++;
                CHECK(strstr(sk->body, sk->files[k].path) != NULL);
            }
            if (k)
                CHECK(strcmp(sk->files[k - 1].path, sk->files[k].path) < 0);
        }
        CHECK(scripts >= 1);
    }
    CHECK(!skills_name_reserved("my-skill"));
    CHECK(skills_builtin_find("presentation") == skills_builtin_at(2));
    CHECK(skills_builtin_find("nope") == NULL);
}

TEST(files_only_by_their_listed_path)
{
    init_builtins();
    const skills_skill *sk = skills_builtin_find("presentation");
    const skills_file_ref *f = skills_file(sk, "references/deck-schema.md");
    CHECK(f != NULL && f->size > 100);
    CHECK(skills_file(sk, "./references/deck-schema.md") == f);
    const char *refused[] = {"SKILL.md",
                             "../financial-model/SKILL.md",
                             "references/../references/deck-schema.md",
                             "/references/deck-schema.md",
                             "references//deck-schema.md",
                             "references\\deck-schema.md",
                             "references",
                             "",
                             "/etc/passwd",
                             "scripts/build_deck.js/"};
    for (size_t i = 0; i < TK_ARRAY_LEN(refused); i++)
        CHECK(skills_file(sk, refused[i]) == NULL);
}

static const struct tk_embed_file *table_of(const char *const *names, const char *const *texts,
                                            size_t n, struct tk_embed_file *out)
{
    for (size_t i = 0; i < n; i++)
        out[i] =
            (struct tk_embed_file){names[i], (const unsigned char *)texts[i], strlen(texts[i])};
    out[n] = (struct tk_embed_file){0, 0, 0};
    return out;
}

#define MD(name, extra) "---\nname: " name "\ndescription: Does a thing.\n" extra "---\n# Body\n"

TEST(a_broken_builtin_is_refused_naming_file_and_rule)
{
    struct tk_embed_file t[4];
    char err[512];
    const char *n1[] = {"a-skill/SKILL.md"}, *x1[] = {MD("b-skill", "")};
    CHECK_INT(skills_init_table(table_of(n1, x1, 1, t), err, sizeof err), ==, TK_EINVAL);
    CHECK(strstr(err, "skills/a-skill/SKILL.md") != NULL);
    CHECK(strstr(err, "folder") != NULL);

    const char *x2[] = {MD("a-skill", "triggers: x\n")};
    CHECK_INT(skills_init_table(table_of(n1, x2, 1, t), err, sizeof err), ==, TK_EINVAL);
    CHECK(strstr(err, "triggers") != NULL);

    const char *n3[] = {"a-skill/SKILL.md", "c-skill/notes.md"}, *x3[] = {MD("a-skill", ""), "x"};
    CHECK_INT(skills_init_table(table_of(n3, x3, 2, t), err, sizeof err), ==, TK_EINVAL);
    CHECK(strstr(err, "skills/c-skill/notes.md: its folder has no SKILL.md") != NULL);

    const char *n4[] = {"loose.md"}, *x4[] = {"x"};
    CHECK_INT(skills_init_table(table_of(n4, x4, 1, t), err, sizeof err), ==, TK_EINVAL);

    /* a good one: the digest follows every byte and every path */
    const char *n5[] = {"a-skill/SKILL.md", "a-skill/scripts/x.py"},
               *x5[] = {MD("a-skill", ""), "print(1)\n"};
    CHECK_INT(skills_init_table(table_of(n5, x5, 2, t), err, sizeof err), ==, TK_OK);
    char d1[SKILLS_DIGEST_HEX];
    memcpy(d1, skills_builtin_at(0)->digest, sizeof d1);
    const char *x6[] = {MD("a-skill", ""), "print(2)\n"};
    CHECK_INT(skills_init_table(table_of(n5, x6, 2, t), err, sizeof err), ==, TK_OK);
    CHECK(strcmp(d1, skills_builtin_at(0)->digest) != 0);
    const char *n7[] = {"a-skill/SKILL.md", "a-skill/scripts/y.py"};
    CHECK_INT(skills_init_table(table_of(n7, x5, 2, t), err, sizeof err), ==, TK_OK);
    CHECK(strcmp(d1, skills_builtin_at(0)->digest) != 0);
    CHECK_INT(skills_init_table(table_of(n5, x5, 2, t), err, sizeof err), ==, TK_OK);
    CHECK_STR(skills_builtin_at(0)->digest, d1);
    CHECK_STR(skills_builtin_at(0)->body, "# Body\n");
    init_builtins();
}

TEST(catalogue_within_its_budget)
{
    init_builtins();
    skills_set *s = skills_for_user(NULL, NULL, 0);
    CHECK_INT(s->n, ==, 5);
    size_t shown = 0;
    char *all = skills_catalogue(s, 100000, &shown);
    CHECK_INT(shown, ==, 5);
    CHECK(strncmp(all, "<available_skills>\n<skill><name>code-review</name><description>", 63) ==
          0);
    CHECK(strstr(all, "</available_skills>") != NULL);
    for (size_t i = 0; i < 5; i++)
        CHECK(strstr(all, BUILTINS[i]) != NULL);
    /* no body in the catalogue */
    CHECK(strstr(all, skills_builtin_find("presentation")->body) == NULL);
    long full = (long)strlen(all);
    free(all);
    /* one character less than all five: four shown, within the budget */
    char *four = skills_catalogue(s, full - 1, &shown);
    CHECK_INT(shown, ==, 4);
    CHECK((long)strlen(four) <= full - 1);
    free(four);
    char *none = skills_catalogue(s, 40, &shown);
    CHECK_INT(shown, ==, 0);
    CHECK_STR(none, "");
    free(none);
    skills_set_free(s);
}

TEST(activation_and_invocation)
{
    init_builtins();
    skills_set *s = skills_for_user(NULL, NULL, 0);
    const skills_skill *sk = skills_builtin_find("security-audit");
    CHECK(strstr(sk->body, "$ARGUMENTS") != NULL);
    char *a = skills_activation(sk, "src/server.c");
    CHECK(strncmp(a, "<skill_content name=\"security-audit\" version=\"1\" digest=\"", 57) == 0);
    CHECK(strstr(a, sk->digest) != NULL);
    CHECK(strstr(a, "$ARGUMENTS") == NULL);
    CHECK(strstr(a, "asked to audit: \"src/server.c\".") != NULL);
    CHECK(strstr(a, "<file>scripts/scan.py</file>") != NULL);
    CHECK(strstr(a, "<file>references/checklist.md</file>") != NULL);
    /* the references are listed, not read */
    CHECK(strstr(a, "Entry points") == NULL);
    free(a);

    const char *args = NULL;
    CHECK(skills_invocation(s, "/code-review the diff in a.patch", &args) ==
          skills_builtin_find("code-review"));
    CHECK_STR(args, "the diff in a.patch");
    CHECK(skills_invocation(s, "/presentation", &args) == skills_builtin_find("presentation"));
    CHECK_STR(args, "");
    CHECK(skills_invocation(s, "/word-report\n  notes", &args) ==
          skills_builtin_find("word-report"));
    CHECK_STR(args, "notes");
    CHECK(skills_invocation(s, "/presentations x", &args) == NULL);
    CHECK(skills_invocation(s, " /presentation x", &args) == NULL);
    CHECK(skills_invocation(s, "/Presentation x", &args) == NULL);
    CHECK(skills_invocation(s, "please /presentation", &args) == NULL);
    CHECK(skills_invocation(s, "/", &args) == NULL);
    CHECK(skills_invocation(s, "/nope x", &args) == NULL);
    skills_set_free(s);
}

TEST_MAIN()
