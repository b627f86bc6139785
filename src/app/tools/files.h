/*
 * files.h — the workspace's files as the model sees them: list_files and
 * preview (fast lane: the files API of app/files.h, never a new sandbox),
 * read_file (sandbox lane, an existing sandbox only) and write_file (sandbox
 * lane: getOrCreateOpenSandbox; changes_files). Paths are confined to
 * /workspace (app/workspace.h) before anything is sent.
 */
#ifndef APP_TOOLS_FILES_H
#define APP_TOOLS_FILES_H

void agent_files_tools_register(void);

#endif
