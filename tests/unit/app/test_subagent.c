/* Subagents' pure parts: role names, each role's tool set (the Researcher's
 * fast lane with web_fetch by name, the Coder's sandbox lane, the Reviewer's
 * reads only), the cap of the answer the parent gets, and tools offered by
 * depth (agent_tool.offered_at). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/agent/run.h"
#include "app/tools/exec.h"
#include "app/tools/files.h"
#include "app/tools/memory.h"
#include "app/tools/plan.h"
#include "app/tools/subagent.h"
#include "lib/json.h"
#include "tk_test.h"

static int has(const char **list, const char *name)
{
    for (; *list; list++)
        if (strcmp(*list, name) == 0)
            return 1;
    return 0;
}

static size_t count(const char **list)
{
    size_t n = 0;
    while (list[n])
        n++;
    return n;
}

/* Checks every name of a NULL-terminated list is in the tool set. */
static int has_all(const char **list, const char *const *names)
{
    for (; *names; names++)
        if (!has(list, *names)) {
            fprintf(stderr, "missing: %s\n", *names);
            return 0;
        }
    return 1;
}

static int starts(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

static void registry(void)
{
    agent_plan_tools_register();
    agent_files_tools_register();
    agent_exec_tools_register();
    agent_memory_tools_register();
}

TEST(role_names)
{
    CHECK_INT(agent_subagent_role("researcher"), ==, 0);
    CHECK_INT(agent_subagent_role("Coder"), ==, 1);
    CHECK_INT(agent_subagent_role("REVIEWER"), ==, 2);
    CHECK_INT(agent_subagent_role("boss"), ==, -1);
    CHECK_INT(agent_subagent_role(""), ==, -1);
    CHECK_INT(agent_subagent_role(NULL), ==, -1);
}

TEST(researcher_has_the_fast_lane_and_web_fetch_by_name)
{
    registry();
    const char **t = agent_subagent_tools(0);
    CHECK(
        has_all(t, (const char *const[]){"search_chunks", "recall_facts", "remember", "list_files",
                                         "preview", "web_fetch", "delegate_subagent", NULL}));
    CHECK(!has(t, "plan_task"));
    CHECK(!has(t, "write_file"));
    CHECK(!has(t, "read_file"));
    CHECK(!has(t, "execute_command"));
    CHECK(!has(t, "execute_code"));
    free(t);
}

TEST(coder_has_the_sandbox_lane)
{
    registry();
    const char **t = agent_subagent_tools(1);
    CHECK(has_all(t, (const char *const[]){"write_file", "read_file", "execute_command",
                                           "execute_code", "list_files", "preview", "search_chunks",
                                           NULL}));
    CHECK(!has(t, "plan_task"));
    CHECK(!has(t, "remember"));
    free(t);
}

TEST(reviewer_only_reads)
{
    registry();
    const char **t = agent_subagent_tools(2);
    CHECK_INT(count(t), ==, 4u);
    CHECK(has_all(
        t, (const char *const[]){"list_files", "preview", "read_file", "search_chunks", NULL}));
    CHECK(!has(t, "delegate_subagent"));
    free(t);
}

TEST(cap_keeps_short_text_and_cuts_long_text_at_a_character)
{
    char *s = agent_subagent_cap("short answer", 100, "researcher");
    CHECK_STR(s, "short answer");
    free(s);
    s = agent_subagent_cap("abcdefghij", 4, "coder");
    CHECK(starts(s, "abcd\n[... the coder's answer was 10 characters; the first 4 are shown"));
    free(s);
    /* three two-byte characters, two kept: never half a character */
    s = agent_subagent_cap("\xc3\xa9\xc3\xa9\xc3\xa9", 2, "reviewer");
    CHECK(starts(s, "\xc3\xa9\xc3\xa9\n[..."));
    CHECK(strstr(s, "was 3 characters") != NULL);
    free(s);
}

static int shallow_only(int depth)
{
    return depth < 1;
}

static void run_nothing(agent_call *c, const json_t *a, agent_result *o)
{
    (void)c;
    (void)a;
    agent_result_text(o, "x");
}

static const agent_tool shallow = {.name = "shallow_tool",
                                   .lane = AGENT_LANE_FAST,
                                   .parallel = 1,
                                   .parameters = "{\"type\":\"object\"}",
                                   .run = run_nothing,
                                   .offered_at = shallow_only};

static int offers(json_t *offered, const char *name)
{
    size_t i;
    json_t *t;
    int found = 0;
    json_array_foreach(offered, i, t) found |= strcmp(tk_json_str_or(t, "name", ""), name) == 0;
    json_decref(offered);
    return found;
}

TEST(offered_by_depth)
{
    agent_tools_register(&shallow);
    CHECK(offers(agent_tools_offered(NULL), "shallow_tool"));
    CHECK(offers(agent_tools_offered_at(NULL, 0), "shallow_tool"));
    CHECK(!offers(agent_tools_offered_at(NULL, 1), "shallow_tool"));
    const char *const allow[] = {"shallow_tool", NULL};
    CHECK(!offers(agent_tools_offered_at(allow, 2), "shallow_tool"));
    CHECK(offers(agent_tools_offered_at(allow, 0), "shallow_tool"));
}

TEST_MAIN()
