/* The skill tools: list_skills, activate_skill, read_skill_file (fast lane)
 * and run_skill_script (sandbox lane). See tools/skills.h. */
#include "app/tools/skills.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/agent/tools.h"
#include "app/app.h"
#include "app/sandbox/execd.h"
#include "app/sandbox/sandbox.h"
#include "app/skills.h"
#include "app/tools/sandbox_tool.h"
#include "lib/json.h"
#include "lib/tktime.h"

#define SCRIPT_ARGS_MAX 32
#define SCRIPT_ARG_MAX  512

/* The calling user's enabled skills (blocking); an empty set when the store
 * failed (the error says so). */
static skills_set *user_skills(agent_call *call, agent_result *out)
{
    PGconn *c = app_db_acquire();
    skills_set *s = c ? skills_for_user(c, agent_call_user(call), 0) : NULL;
    if (c)
        app_db_release(c);
    if (!s) {
        agent_result_error(out, "the skills could not be loaded (the database did not answer)");
        s = tk_calloc(1, sizeof *s);
        s->n = (size_t)-1; /* marks the failure for named() */
    }
    return s;
}

/* The files' data of sk (a user's skill is loaded from the store). */
static int with_data(skills_set *s, const skills_skill *sk, agent_result *out)
{
    if (sk->builtin || sk->owns_data)
        return 1;
    PGconn *c = app_db_acquire();
    tk_status st = c ? skills_load_files(c, s, sk) : TK_ERROR;
    if (c)
        app_db_release(c);
    if (st != TK_OK)
        agent_result_error(out,
                           "the skill's files could not be loaded (the database did not answer)");
    return st == TK_OK;
}

/* The skill named by args' "name", or NULL with out filled. */
static const skills_skill *named(skills_set *s, const json_t *args, agent_result *out)
{
    if (s->n == (size_t)-1) {
        s->n = 0;
        return NULL; /* out says why */
    }
    const char *name = tk_json_str(args, "name");
    if (!name || !*name) {
        agent_result_error(out, "\"name\" is required");
        return NULL;
    }
    const skills_skill *sk = skills_set_find(s, name);
    if (!sk) {
        tk_buf b;
        tk_buf_init(&b, 1u << 16);
        for (size_t i = 0; i < s->n; i++)
            tk_buf_printf(&b, "%s%s", i ? ", " : "", s->v[i]->name);
        agent_result_error(out, "no enabled skill is called \"%.64s\" (enabled: %s)", name,
                           s->n ? tk_buf_cstr(&b) : "none");
        tk_buf_free(&b);
    }
    return sk;
}

static void run_list_skills(agent_call *call, const json_t *args, agent_result *out)
{
    (void)args;
    skills_set *s = user_skills(call, out);
    if (s->n == (size_t)-1) {
        skills_set_free(s);
        return;
    }
    tk_buf b;
    tk_buf_init(&b, 4u << 20);
    if (s->n == 0)
        tk_buf_append_str(&b, "No skill is enabled.");
    json_t *list = json_array();
    for (size_t i = 0; i < s->n; i++) {
        tk_buf_printf(&b, "- %s: %s\n", s->v[i]->name, s->v[i]->description);
        json_array_append_new(list, tk_json_obj("name", json_string(s->v[i]->name), "description",
                                                json_string(s->v[i]->description), NULL));
    }
    agent_result_take(out, tk_buf_steal(&b, NULL), 0);
    out->data = tk_json_obj("skills", list, NULL);
    skills_set_free(s);
}

static void run_activate_skill(agent_call *call, const json_t *args, agent_result *out)
{
    int64_t t0 = tk_now_ms(), m0 = tk_mono_ns();
    skills_set *s = user_skills(call, out);
    const skills_skill *sk = named(s, args, out);
    if (sk) {
        agent_result_take(out, skills_activation(sk, tk_json_str(args, "arguments")), 0);
        json_t *attrs =
            tk_json_obj("skill", json_string(sk->name), "version", json_integer(sk->version),
                        "digest", json_string(sk->digest), "builtin", json_boolean(sk->builtin),
                        "files", json_integer((json_int_t)sk->nfiles), NULL);
        agent_span_record(agent_call_trace(call), agent_call_span_id(call), "skill", sk->name, t0,
                          (double)(tk_mono_ns() - m0) / 1e6, "ok", json_deep_copy(attrs));
        agent_call_set_attrs(call, attrs);
        out->data = tk_json_obj("skill", json_string(sk->name), "version",
                                json_integer(sk->version), "digest", json_string(sk->digest), NULL);
    }
    skills_set_free(s);
}

static void run_read_skill_file(agent_call *call, const json_t *args, agent_result *out)
{
    skills_set *s = user_skills(call, out);
    const skills_skill *sk = named(s, args, out);
    if (sk) {
        const char *path = tk_json_str(args, "path");
        const skills_file_ref *f = path ? skills_file(sk, path) : NULL;
        if (f && !with_data(s, sk, out)) {
            /* out says why */
        } else if (!path || !*path) {
            agent_result_error(out, "\"path\" is required");
        } else if (!f) {
            agent_result_error(out,
                               "the skill %s has no file \"%.200s\" (activate_skill lists its "
                               "files; paths are relative to the skill's folder)",
                               sk->name, path);
        } else if (memchr(f->data, 0, f->size)) {
            agent_result_error(out,
                               "%s is a binary file (%zu bytes): run_skill_script copies it into "
                               "/workspace/.skills/%s/",
                               f->path, f->size, sk->name);
        } else {
            agent_result_take(out, tk_strndup((const char *)f->data, f->size), 0);
            agent_call_set_attrs(call, tk_json_obj("skill", json_string(sk->name), "path",
                                                   json_string(f->path), NULL));
        }
    }
    skills_set_free(s);
}

/* ---------------------------------------------------------------- scripts */

/* 1 when s is one word of the characters a script's argument may use: no
 * shell meaning, no quoting needed. */
static int arg_ok(const char *s)
{
    if (!*s || strlen(s) > SCRIPT_ARG_MAX)
        return 0;
    for (const char *p = s; *p; p++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./=:,+@%-", *p))
            return 0;
    return 1;
}

static const char *interpreter(const char *path)
{
    const char *dot = strrchr(path, '.');
    if (!dot)
        return NULL;
    if (strcmp(dot, ".py") == 0)
        return "python3";
    if (strcmp(dot, ".js") == 0 || strcmp(dot, ".mjs") == 0 || strcmp(dot, ".cjs") == 0)
        return "node";
    if (strcmp(dot, ".sh") == 0)
        return "bash";
    return NULL;
}

/* Copies sk's files into /workspace/.skills/<name>/ unless its .digest there
 * says they are. Returns 1 when copied now, 0 when already there, -1 on error
 * (err). */
static int materialise(sandbox_handle *h, const skills_skill *sk, char *err, size_t errlen)
{
    char path[512];
    snprintf(path, sizeof path, "/workspace/.skills/%s/.digest", sk->name);
    tk_buf have;
    tk_buf_init(&have, 128);
    char e[256];
    int same = sandbox_execd_read_file(h, path, 100, &have, e, sizeof e) == TK_OK &&
               strcmp(tk_buf_cstr(&have), sk->digest) == 0;
    tk_buf_free(&have);
    if (same)
        return 0;
    for (size_t i = 0; i < sk->nfiles; i++) {
        snprintf(path, sizeof path, "/workspace/.skills/%s/%s", sk->name, sk->files[i].path);
        if (sandbox_execd_write_file(h, path, sk->files[i].data, sk->files[i].size, err, errlen) !=
            TK_OK)
            return -1;
    }
    snprintf(path, sizeof path, "/workspace/.skills/%s/SKILL.md", sk->name);
    if (sandbox_execd_write_file(h, path, sk->skill_md, sk->skill_md_len, err, errlen) != TK_OK)
        return -1;
    snprintf(path, sizeof path, "/workspace/.skills/%s/.digest", sk->name);
    if (sandbox_execd_write_file(h, path, sk->digest, strlen(sk->digest), err, errlen) != TK_OK)
        return -1;
    return 1;
}

struct out_ctx {
    agent_call *call;
};

static void on_output(void *ud, const char *stream, const char *text, size_t len)
{
    struct out_ctx *x = ud;
    agent_call_output(x->call, stream, text, len);
}

static void run_skill_script(agent_call *call, const json_t *args, agent_result *out)
{
    skills_set *s = user_skills(call, out);
    const skills_skill *sk = named(s, args, out);
    if (!sk) {
        skills_set_free(s);
        return;
    }
    const char *script = tk_json_str(args, "script");
    const skills_file_ref *f = script ? skills_file(sk, script) : NULL;
    const char *interp = f ? interpreter(f->path) : NULL;
    json_t *jargs = json_object_get(args, "args");
    if (!script || !*script) {
        agent_result_error(out, "\"script\" is required");
    } else if (!f || strncmp(f->path, "scripts/", 8) != 0) {
        agent_result_error(out,
                           "the skill %s has no script \"%.200s\" (its scripts are under scripts/)",
                           sk->name, script);
    } else if (!interp || !arg_ok(f->path)) {
        agent_result_error(out, "%s is not a script this tool runs (.py, .js, .sh)", f->path);
    } else if (jargs && (!json_is_array(jargs) || json_array_size(jargs) > SCRIPT_ARGS_MAX)) {
        agent_result_error(out, "\"args\" must be a list of at most %d strings", SCRIPT_ARGS_MAX);
    } else {
        tk_buf cmd;
        tk_buf_init(&cmd, 64u << 10);
        tk_buf_printf(&cmd, "cd /workspace && %s /workspace/.skills/%s/%s", interp, sk->name,
                      f->path);
        size_t i;
        json_t *a;
        int bad = 0;
        json_array_foreach(jargs, i, a)
        {
            if (!json_is_string(a) || !arg_ok(json_string_value(a))) {
                agent_result_error(
                    out,
                    "argument %zu is not one word of letters, digits and _./=:,+@%%- "
                    "(at most %d characters): write other values to a file and "
                    "pass its path",
                    i + 1, SCRIPT_ARG_MAX);
                bad = 1;
                break;
            }
            tk_buf_printf(&cmd, " %s", json_string_value(a));
        }
        if (!bad && with_data(s, sk, out)) {
            sandbox_handle h;
            if (agent_tool_acquire_sandbox(call, "first skill script this session", &h, out)) {
                char err[512] = "";
                int copied = materialise(&h, sk, err, sizeof err);
                if (copied < 0) {
                    agent_result_error(out, "could not copy the skill %s into the sandbox: %s",
                                       sk->name, err);
                } else {
                    sandbox_execd_result r;
                    sandbox_execd_result_init(&r,
                                              (size_t)app_get()->cfg->tool_result_max * 4 + 4096);
                    struct out_ctx x = {.call = call};
                    tk_status st = sandbox_execd_run_command(
                        &h, tk_buf_cstr(&cmd), (long)app_get()->cfg->command_timeout_ms, on_output,
                        &x, &r);
                    agent_call_set_attrs(call, tk_json_obj("skill", json_string(sk->name), "script",
                                                           json_string(f->path), "copied",
                                                           json_boolean(copied == 1), "exit_code",
                                                           json_integer(r.exit_code), NULL));
                    if (st == TK_OK) {
                        tk_buf b;
                        tk_buf_init(&b, 64u << 20);
                        tk_buf_append_str(&b, agent_tool_replaced_note(&h));
                        if (copied == 1)
                            tk_buf_printf(&b, "(copied the skill into /workspace/.skills/%s/)\n",
                                          sk->name);
                        if (r.timed_out)
                            tk_buf_printf(&b, "timed out after %lld ms\n",
                                          (long long)r.duration_ms);
                        else
                            tk_buf_printf(&b, "exit code %d\n", r.exit_code);
                        tk_buf_append(&b, r.output.data ? r.output.data : "", r.output.len);
                        if (r.truncated)
                            tk_buf_append_str(&b, "\n[... output cut]");
                        agent_result_take(out, tk_buf_steal(&b, NULL),
                                          r.timed_out || r.exit_code != 0);
                    } else if (st == TK_ECLOSED) {
                        agent_result_error(out, "stopped: the turn was cancelled");
                    } else {
                        agent_result_error(out, "could not run it: %s", r.error);
                    }
                    sandbox_execd_result_free(&r);
                }
                sandbox_handle_free(&h);
            }
        }
        tk_buf_free(&cmd);
    }
    skills_set_free(s);
}

/* ---------------------------------------------------------------- the table */

static const agent_tool tools[] = {
    {.name = "list_skills",
     .lane = AGENT_LANE_FAST,
     .parallel = 1,
     .needs_skills = 1,
     .description = "List every skill the user has enabled (name and description), including "
                    "those the system prompt's catalogue had no room for.",
     .parameters = "{\"type\":\"object\",\"properties\":{}}",
     .run = run_list_skills},
    {.name = "activate_skill",
     .lane = AGENT_LANE_FAST,
     .parallel = 1,
     .needs_skills = 1,
     .description = "Load a skill's instructions (and the list of its files) before doing a task "
                    "it covers; then follow them.",
     .parameters = "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\","
                   "\"description\":\"the skill's name\"},\"arguments\":{\"type\":\"string\","
                   "\"description\":\"what the skill works on (replaces $ARGUMENTS)\"}},"
                   "\"required\":[\"name\"]}",
     .run = run_activate_skill},
    {.name = "read_skill_file",
     .lane = AGENT_LANE_FAST,
     .parallel = 1,
     .needs_skills = 1,
     .description = "Read one file of a skill (a reference, a template, a script's source) by "
                    "its path relative to the skill's folder, as activate_skill lists them.",
     .parameters = "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},"
                   "\"path\":{\"type\":\"string\"}},\"required\":[\"name\",\"path\"]}",
     .run = run_read_skill_file},
    {.name = "run_skill_script",
     .lane = AGENT_LANE_SANDBOX,
     .changes_files = 1,
     .needs_skills = 1,
     .description = "Run one of a skill's scripts in the chat's sandbox, in /workspace (the "
                    "skill is copied into /workspace/.skills/<name>/ the first time). Arguments "
                    "are single words (paths, numbers, options); put anything else in a file.",
     .parameters = "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},"
                   "\"script\":{\"type\":\"string\",\"description\":\"e.g. scripts/build.py\"},"
                   "\"args\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}}},"
                   "\"required\":[\"name\",\"script\"]}",
     .run = run_skill_script},
};

void tools_skills_register(void)
{
    agent_tools_register_table(tools, TK_ARRAY_LEN(tools));
}
