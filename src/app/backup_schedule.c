/* BACKUP_SCHEDULE's grammar: when the next scheduled backup is due. See
 * backup_schedule.h. */
#include "app/backup_schedule.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/tktime.h"

static int parse_hhmm(const char *v, int *h, int *m)
{
    if (!isdigit((unsigned char)v[0]))
        return -1;
    char *end;
    long hh = strtol(v, &end, 10);
    if (*end != ':' || end - v > 2 || !isdigit((unsigned char)end[1]) ||
        !isdigit((unsigned char)end[2]) || end[3] != '\0')
        return -1;
    long mm = strtol(end + 1, NULL, 10);
    if (hh > 23 || mm > 59)
        return -1;
    *h = (int)hh;
    *m = (int)mm;
    return 0;
}

int app_backup_check_schedule(const char *v, char *msg, size_t msglen)
{
    int h, m;
    int64_t ms;
    if (strcmp(v, "off") == 0 || parse_hhmm(v, &h, &m) == 0)
        return 0;
    if (tk_parse_duration(v, &ms) == TK_OK && ms >= 1000)
        return 0;
    snprintf(msg, msglen,
             "\"%s\" is not HH:MM (every day at that local time), an interval of 1s or more "
             "(6h, 30m) or off",
             v);
    return 1;
}

time_t app_backup_next(const char *schedule, time_t now)
{
    int h, m;
    int64_t ms;
    if (parse_hhmm(schedule, &h, &m) == 0) {
        struct tm t;
        localtime_r(&now, &t);
        for (int day = 0; day < 3; day++) {
            struct tm c = t;
            c.tm_mday += day;
            c.tm_hour = h;
            c.tm_min = m;
            c.tm_sec = 0;
            c.tm_isdst = -1;
            time_t at = mktime(&c);
            if (at > now)
                return at;
        }
        return 0;
    }
    if (strcmp(schedule, "off") != 0 && tk_parse_duration(schedule, &ms) == TK_OK && ms >= 1000)
        return now + (time_t)(ms / 1000);
    return 0;
}
