/*
 * tusko-execd — the daemon inside every sandbox (OpenSandbox execd API).
 *
 * Start-up is kept short (the sandbox service waits for the listening line):
 * settings, the workspace root fd, the reaper, the HTTP server. Python kernels
 * start only when a code context is asked for.
 */
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <stdio.h>
#include <string.h>

#include "execd/cmd.h"
#include "execd/code.h"
#include "execd/execd.h"
#include "execd/files.h"
#include "execd/fs.h"
#include "execd/metrics.h"
#include "execd/proc.h"
#include "execd/session.h"
#include "lib/execd_port.h"
#include "lib/httpd.h"
#include "lib/json.h"
#include "lib/log.h"
#include "lib/prog.h"

execd_config execd_cfg;

static char *opt_listen, *opt_workspace, *opt_root, *opt_confine, *opt_token, *opt_python;

static int check_confine(const char *v, char *err, size_t errlen)
{
    if (strcmp(v, "none") == 0 || strcmp(v, "workspace") == 0)
        return 0;
    snprintf(err, errlen, "must be none or workspace");
    return -1;
}

static tk_setting settings[] = {
    {"EXECD_LISTEN", "listen", TK_SET_STR, "0.0.0.0:" TK_EXECD_PORT_STR,
     "address to serve on (host:port or unix:/path)", .out = &opt_listen,
     .check = tk_config_check_listen},
    {"EXECD_WORKSPACE", "workspace", TK_SET_STR, "/workspace",
     "where commands start and what relative paths are relative to", .out = &opt_workspace},
    {"EXECD_ROOT", "root", TK_SET_STR, "/",
     "every request path must lie beneath it (the sandbox's own filesystem view)",
     .out = &opt_root},
    {"EXECD_CONFINE", "confine", TK_SET_STR, "none",
     "none: any path beneath EXECD_ROOT; workspace: every path confined to EXECD_WORKSPACE",
     .out = &opt_confine, .check = check_confine},
    {"EXECD_ACCESS_TOKEN", "access-token", TK_SET_STR, NULL,
     "when set, every request must carry it in X-EXECD-ACCESS-TOKEN (else 401)",
     .flags = TK_SET_SECRET, .out = &opt_token},
    {"EXECD_PYTHON", "python", TK_SET_STR, "/usr/bin/python3",
     "interpreter that runs the Jupyter kernel of code contexts", .out = &opt_python},
    {"EXECD_MAX_COMMANDS", "max-commands", TK_SET_INT, "32",
     "commands running at once (foreground and background); more answer 429", .min = 1, .max = 4096,
     .out = &execd_cfg.max_commands},
    {"EXECD_MAX_SESSIONS", "max-sessions", TK_SET_INT, "16", "live bash sessions; more answer 429",
     .min = 1, .max = 1024, .out = &execd_cfg.max_sessions},
    {"EXECD_MAX_CONTEXTS", "max-contexts", TK_SET_INT, "4",
     "live code contexts (each a Python kernel); more answer 429", .min = 1, .max = 256,
     .out = &execd_cfg.max_contexts},
    {"EXECD_MAX_UPLOAD_BYTES", "max-upload-bytes", TK_SET_INT, "1073741824",
     "largest upload request body; larger answer 413", .min = 1024, .max = INT64_MAX,
     .out = &execd_cfg.max_upload},
    {"EXECD_MAX_LOG_BYTES", "max-log-bytes", TK_SET_INT, "1048576",
     "output kept per background command (oldest dropped first)", .min = 1024, .max = 1 << 30,
     .out = &execd_cfg.max_log},
    {"EXECD_KILL_GRACE", "kill-grace", TK_SET_DURATION, "2s",
     "after an interrupt's SIGTERM, how long before SIGKILL", .min = 0, .max = 600000,
     .out = &execd_cfg.kill_grace_ms},
    {"EXECD_KERNEL_START_TIMEOUT", "kernel-start-timeout", TK_SET_DURATION, "60s",
     "how long a new Python kernel may take to answer", .min = 1000, .max = 600000,
     .out = &execd_cfg.kernel_start_ms},
};

static const tk_prog prog = {
    .name = "tusko-execd",
    .summary = "the daemon inside every sandbox (OpenSandbox execd API)",
    .settings = settings,
    .nsettings = TK_ARRAY_LEN(settings),
};

static int auth(tk_req *r, void *ud)
{
    const char *want = ud;
    if (!want)
        return 0;
    if (tk_str_eq_ct(tk_req_header(r, "X-EXECD-ACCESS-TOKEN"), want))
        return 0;
    tk_respond_error(r, 401, "UNAUTHORIZED",
                     "Unauthorized: invalid or missing header X-EXECD-ACCESS-TOKEN");
    return 1;
}

static void ping(tk_req *r, void *ud)
{
    tk_respond_empty(r, 200);
}

static json_t *confine_state(void)
{
    return tk_json_obj("confine", json_string(execd_cfg.confined ? "workspace" : "none"), "root",
                       json_string(execd_fs_root()->root), NULL);
}

/* GET /confine: what paths are resolved beneath now. */
static void confine_get(tk_req *r, void *ud)
{
    tk_respond_json(r, 200, confine_state());
}

/* POST /confine {"confine": "workspace"} — ours, not upstream's: from now on
 * every path of the command, session and file APIs is confined to the
 * workspace. One way: nothing clears it for the life of this execd (tusko's own
 * sandboxes ask for it at creation; "none" is refused). */
static void confine_set(tk_req *r, void *ud)
{
    json_t *b = tk_req_json(r, 0);
    if (!b)
        return;
    const char *to = tk_json_str(b, "confine");
    if (!to || strcmp(to, "workspace") != 0) {
        tk_respond_error(r, 400, "INVALID_REQUEST_BODY",
                         "the body must be {\"confine\": \"workspace\"} (confinement is never "
                         "lifted once set)");
        return;
    }
    if (!execd_cfg.confined)
        tk_info("main", "msg=\"paths confined to the workspace\" workspace=%s", execd_cfg.ws.root);
    execd_cfg.confined = 1;
    tk_respond_json(r, 200, confine_state());
}

/* DELETE /command?id= and DELETE /code?id= — as upstream, either interrupts
 * whatever the id names: a command, a bash session's run, a code context. */
static void interrupt_any(tk_req *r, void *ud)
{
    const char *id = tk_req_query(r, "id");
    if (!id || !*id) {
        tk_respond_error(r, 400, "MISSING_QUERY", "missing query parameter 'id'");
        return;
    }
    int k = execd_cmd_interrupt(id);
    if (k == -1) {
        tk_respond_error(r, 400, "NOT_RUNNING", "command %s is not running", id);
        return;
    }
    if (k == 0)
        k = execd_session_interrupt(id);
    if (k == 0)
        k = execd_code_interrupt(id);
    if (k == 0) {
        tk_respond_error(r, 404, "NOT_FOUND", "no command, session or context has the id %s", id);
        return;
    }
    tk_respond_empty(r, 200); /* an idle session or context: nothing to do */
}

int main(int argc, char **argv)
{
    int argi = 1;
    tk_prog_init(&prog, argc, argv, &argi);
    if (argi < argc) {
        fprintf(stderr, "tusko-execd: unexpected argument \"%s\" (see --help)\n", argv[argi]);
        return 2;
    }
    char err[512];
    if (tk_pathsafe_init(&execd_cfg.ws, opt_workspace, err, sizeof err) != TK_OK) {
        fprintf(stderr, "tusko-execd: EXECD_WORKSPACE: %s\n", err);
        return 2;
    }
    if (tk_pathsafe_init(&execd_cfg.root, opt_root, err, sizeof err) != TK_OK) {
        fprintf(stderr, "tusko-execd: EXECD_ROOT: %s\n", err);
        return 2;
    }
    {
        char rel[TK_PATHSAFE_PATH_MAX], why[256];
        if (tk_pathsafe_rel(&execd_cfg.root, execd_cfg.ws.root, strlen(execd_cfg.ws.root), rel,
                            sizeof rel, why, sizeof why) != TK_OK) {
            fprintf(stderr, "tusko-execd: EXECD_WORKSPACE %s is not beneath EXECD_ROOT %s\n",
                    execd_cfg.ws.root, execd_cfg.root.root);
            return 2;
        }
    }
    execd_cfg.confined = strcmp(opt_confine, "workspace") == 0;
    execd_cfg.python = opt_python;
    if (opt_token && !*opt_token) {
        fprintf(stderr, "tusko-execd: EXECD_ACCESS_TOKEN is set but empty\n");
        return 2;
    }
    /* Code in the sandbox may run as execd's own user: keep it from reading the
     * token out of /proc/<execd>/environ or attaching to execd (not dumpable:
     * /proc/<pid>/{environ,mem} are root's and ptrace by the same user fails).
     * The token also leaves the environment block itself. */
    if (prctl(PR_SET_DUMPABLE, 0) != 0)
        tk_warn("main", "msg=\"cannot clear the dumpable flag\"");
    char *tok = getenv("EXECD_ACCESS_TOKEN");
    if (tok)
        memset(tok, 'x', strlen(tok));
    execd_proc_init();
    execd_metrics_init();

    tk_route routes[] = {
        {"GET", "/healthz", tk_prog_healthz, (void *)&prog, TK_ROUTE_PUBLIC | TK_ROUTE_QUIET},
        {"GET", "/ping", ping, NULL, TK_ROUTE_QUIET},
        {"GET", "/confine", confine_get, NULL, 0},
        {"POST", "/confine", confine_set, NULL, 0},
        {"POST", "/command", execd_cmd_run, NULL, TK_ROUTE_BLOCKING},
        {"DELETE", "/command", interrupt_any, NULL, 0},
        {"GET", "/command/status/{id}", execd_cmd_status, NULL, 0},
        {"GET", "/command/{id}/logs", execd_cmd_logs, NULL, 0},
        {"POST", "/session", execd_session_create, NULL, TK_ROUTE_BLOCKING},
        {"POST", "/session/{sessionId}/run", execd_session_run, NULL, TK_ROUTE_BLOCKING},
        {"DELETE", "/session/{sessionId}", execd_session_delete, NULL, 0},
        {"POST", "/code/context", execd_code_create, NULL, TK_ROUTE_BLOCKING},
        {"GET", "/code/contexts", execd_code_list, NULL, 0},
        {"DELETE", "/code/contexts", execd_code_delete_lang, NULL, TK_ROUTE_BLOCKING},
        {"GET", "/code/contexts/{context_id}", execd_code_get, NULL, 0},
        {"DELETE", "/code/contexts/{context_id}", execd_code_delete, NULL, TK_ROUTE_BLOCKING},
        {"POST", "/code", execd_code_run, NULL, TK_ROUTE_BLOCKING},
        {"DELETE", "/code", interrupt_any, NULL, 0},
        {"GET", "/files/info", execd_files_info, NULL, TK_ROUTE_BLOCKING},
        {"DELETE", "/files", execd_files_delete, NULL, TK_ROUTE_BLOCKING},
        {"POST", "/files/permissions", execd_files_permissions, NULL, TK_ROUTE_BLOCKING},
        {"POST", "/files/mv", execd_files_mv, NULL, TK_ROUTE_BLOCKING},
        {"GET", "/files/search", execd_files_search, NULL, TK_ROUTE_BLOCKING},
        {"POST", "/files/replace", execd_files_replace, NULL, TK_ROUTE_BLOCKING},
        {"GET", "/files/download", execd_files_download, NULL, TK_ROUTE_BLOCKING},
        {"POST", "/files/upload", execd_upload_done, NULL, 0, (size_t)execd_cfg.max_upload,
         execd_upload_body},
        {"GET", "/directories/list", execd_dirs_list, NULL, TK_ROUTE_BLOCKING},
        {"POST", "/directories", execd_dirs_make, NULL, TK_ROUTE_BLOCKING},
        {"DELETE", "/directories", execd_dirs_remove, NULL, TK_ROUTE_BLOCKING},
        {"GET", "/metrics", execd_metrics_get, NULL, TK_ROUTE_BLOCKING | TK_ROUTE_QUIET},
        {"GET", "/metrics/watch", execd_metrics_watch, NULL, 0},
    };
    tk_httpd_config hc = {
        .listen = opt_listen,
        .name = "http",
        .auth = auth,
        .ud = opt_token,
        .workers = 32,
    };
    tk_prog_http_config(&hc);
    tk_httpd *h = tk_httpd_start(&hc, routes, TK_ARRAY_LEN(routes), err, sizeof err);
    if (!h) {
        fprintf(stderr, "tusko-execd: %s\n", err);
        return 1;
    }
    tk_info("main", "msg=\"listening\" url=%s workspace=%s root=%s confine=%s auth=%s",
            tk_httpd_url(h), execd_cfg.ws.root, execd_cfg.root.root, opt_confine,
            opt_token ? "token" : "none");
    int sig = tk_prog_wait();
    tk_info("main", "msg=\"stopping\" signal=%d", sig);
    execd_cmd_shutdown(5000);
    execd_session_shutdown(5000);
    execd_code_shutdown();
    execd_metrics_shutdown();
    tk_httpd_stop(h);
    tk_pathsafe_close(&execd_cfg.ws);
    tk_pathsafe_close(&execd_cfg.root);
    tk_config_free(settings, TK_ARRAY_LEN(settings));
    return 0;
}
