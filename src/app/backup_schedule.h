/*
 * backup_schedule.h — BACKUP_SCHEDULE's grammar ("off", "HH:MM" every day at
 * that local time, or an interval of at least 1s): the setting's check and when
 * the next backup is due. Apart from backup.c so that the settings table can
 * check the value without reaching into backups.
 */
#ifndef APP_BACKUP_SCHEDULE_H
#define APP_BACKUP_SCHEDULE_H

#include <stddef.h>
#include <time.h>

/* BACKUP_SCHEDULE's check (a tk_setting check): "off", "HH:MM" or a duration
 * of at least 1s. */
int app_backup_check_schedule(const char *v, char *msg, size_t msglen);

/* When the next scheduled backup is due after `now`: for "HH:MM" the next such
 * local time strictly after now; for an interval, now + interval. 0 when the
 * schedule is "off" (or bad). */
time_t app_backup_next(const char *schedule, time_t now);

#endif
