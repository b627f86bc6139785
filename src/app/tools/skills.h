/*
 * tools/skills.h — the skill tools (docs/SKILLS.md):
 *   fast lane     list_skills, activate_skill, read_skill_file: read the
 *                 registry and the store, never start a sandbox;
 *   sandbox lane  run_skill_script: copies the skill's files into
 *                 /workspace/.skills/<name>/ the first time (again when its
 *                 digest changed), then runs one of its scripts.
 * Offered only when the user has a skill enabled (agent_tool.needs_skills:
 * the turn leaves them out otherwise).
 */
#ifndef APP_TOOLS_SKILLS_H
#define APP_TOOLS_SKILLS_H

void tools_skills_register(void);

#endif
