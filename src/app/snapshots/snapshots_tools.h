/*
 * snapshots_tools.h — the fast-lane tool snapshot_workspace {}: a snapshot of
 * the chat's workspace to the S3 store now (snapshots_api_take). It reads the
 * sandbox through getExistingOpenSandbox and so never starts one: with no
 * sandbox it says there is nothing to snapshot. Offered while snapshots are on.
 */
#ifndef APP_SNAPSHOTS_TOOLS_H
#define APP_SNAPSHOTS_TOOLS_H

void snapshots_tools_register(void);

#endif
