/*
 * cli.h — the administrative commands: `tusko user add`, `tusko token create`.
 * Each returns the process exit status (0 success, 1 failure, 2 bad usage) and
 * prints what the operator needs: results on stdout, errors on stderr.
 */
#ifndef APP_CLI_H
#define APP_CLI_H

/* argv[0] is the subcommand's first word ("add", "create"). */
int app_cli_user(int argc, char **argv);
int app_cli_token(int argc, char **argv);

#endif
