/*
 * exec.h — execute_command {command, timeout_s?} (a persistent bash session in
 * /workspace) and execute_code {code, timeout_s?} (a persistent Jupyter
 * kernel), sandbox lane, changes_files; the output streams as tool_output
 * events, the result says the exit code or the error, timeouts are
 * TUSKO_COMMAND_TIMEOUT at most.
 */
#ifndef APP_TOOLS_EXEC_H
#define APP_TOOLS_EXEC_H

void agent_exec_tools_register(void);

#endif
