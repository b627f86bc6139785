/*
 * plan.h — plan_task {goal, milestones[3..5]} | {update: [{milestone, status,
 * note?}]}: the turn's plan, a fast-lane tool run before the other calls of an
 * answer (order -10). The plan is kept with the chat (plan_load/plan_save in
 * plan.c) and shown to the user as plan / plan_update events.
 */
#ifndef APP_TOOLS_PLAN_H
#define APP_TOOLS_PLAN_H

void agent_plan_tools_register(void);

#endif
