/* models: the allowlist (TUSKO_MODELS) parsed, refused, looked up. */
#include <string.h>

#include "app/models.h"
#include "tk_test.h"

TEST(models_parse_and_find)
{
    char err[256];
    app_model_list *l;
    CHECK(app_models_parse("openai:gpt-4o-mini, anthropic:claude-sonnet-4,openai:llama3:8b,", &l,
                           err, sizeof err) == TK_OK);
    CHECK_INT(app_models_list_count(l), ==, 3);
    const app_model *m = app_models_list_at(l, 2);
    CHECK_STR(m->id, "openai:llama3:8b");
    CHECK_STR(m->provider, "openai");
    CHECK_STR(m->model, "llama3:8b");
    CHECK_INT(m->kind, ==, APP_PROVIDER_OPENAI);
    CHECK_INT(app_models_list_at(l, 1)->kind, ==, APP_PROVIDER_ANTHROPIC);
    CHECK(app_models_list_find(l, "anthropic:claude-sonnet-4") == app_models_list_at(l, 1));
    CHECK(app_models_list_find(l, "claude-sonnet-4") == app_models_list_at(l, 1));
    CHECK(app_models_list_find(l, "openai:claude-sonnet-4") == NULL);
    CHECK(app_models_list_find(l, "gpt-4") == NULL);
    CHECK(app_models_list_find(l, "") == NULL);
    CHECK(app_models_list_find(l, NULL) == NULL);
    CHECK(app_models_list_at(l, 3) == NULL);
    app_models_free(l);
    /* a bare name two providers share is ambiguous */
    CHECK(app_models_parse("openai:m,anthropic:m", &l, err, sizeof err) == TK_OK);
    CHECK(app_models_list_find(l, "m") == NULL);
    CHECK(app_models_list_find(l, "anthropic:m") != NULL);
    app_models_free(l);
    CHECK(app_models_parse("", &l, err, sizeof err) == TK_OK);
    CHECK_INT(app_models_list_count(l), ==, 0);
    app_models_free(l);
    CHECK(app_models_parse(NULL, &l, err, sizeof err) == TK_OK);
    app_models_free(l);
}

TEST(models_parse_refuses)
{
    const char *bad[] = {"gpt-4o",
                         "openai:",
                         ":gpt",
                         "mistral:large",
                         "openai:a,,openai:b",
                         "openai:a,openai:a",
                         "openai:a b",
                         ",",
                         "openai:a\"b",
                         "OpenAI:gpt",
                         NULL};
    char err[256];
    for (int i = 0; bad[i]; i++) {
        app_model_list *l = NULL;
        if (app_models_parse(bad[i], &l, err, sizeof err) == TK_OK)
            TK_TEST_FAIL("accepted \"%s\"", bad[i]);
        CHECK(l == NULL);
        CHECK(err[0] != 0);
    }
    char big[300] = "openai:";
    memset(big + 7, 'm', 250);
    big[257] = 0;
    app_model_list *l = NULL;
    CHECK(app_models_parse(big, &l, err, sizeof err) != TK_OK);
}

TEST_MAIN()
