/*
 * cli.h — the administrative commands: `tusko user add`, `tusko token create`,
 * `tusko check-url`.
 * Each returns the process exit status (0 success, 1 failure, 2 bad usage) and
 * prints what the operator needs: results on stdout, errors on stderr.
 */
#ifndef APP_CLI_H
#define APP_CLI_H

/* argv[0] is the subcommand's first word ("add", "create"). */
int app_cli_user(int argc, char **argv);
int app_cli_token(int argc, char **argv);

/*
 * `tusko check-url URL`: the outbound fetch check (guardrail 4) for one URL,
 * with the policy of the SSRF_* settings, without fetching it (only a DNS
 * query for a host name). Prints "allowed ..." and the addresses a fetch would
 * connect to (exit 0), or "refused <code>: <reason>" (exit 1); a bad setting or
 * usage exits 2. argv[0] is the URL. Needs no database.
 */
int app_cli_check_url(int argc, char **argv);

#endif
