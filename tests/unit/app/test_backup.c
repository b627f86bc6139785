/* The backup schedule (BACKUP_SCHEDULE) and the names pruning keeps to. */
#include "app/backup.h"
#include "app/backup_schedule.h"
#include "lib/common.h"
#include "tk_test.h"

static time_t local(int y, int mo, int d, int h, int mi, int s)
{
    struct tm t = {.tm_year = y - 1900,
                   .tm_mon = mo - 1,
                   .tm_mday = d,
                   .tm_hour = h,
                   .tm_min = mi,
                   .tm_sec = s,
                   .tm_isdst = -1};
    return mktime(&t);
}

TEST(backup_schedule_values)
{
    char m[200];
    CHECK_INT(app_backup_check_schedule("03:00", m, sizeof m), ==, 0);
    CHECK_INT(app_backup_check_schedule("3:05", m, sizeof m), ==, 0);
    CHECK_INT(app_backup_check_schedule("23:59", m, sizeof m), ==, 0);
    CHECK_INT(app_backup_check_schedule("6h", m, sizeof m), ==, 0);
    CHECK_INT(app_backup_check_schedule("off", m, sizeof m), ==, 0);
    const char *bad[] = {"24:00",   "03:60", "3:5", "03:00:00", "",
                         "nightly", "500ms", "-1h", "03:0x"};
    for (size_t i = 0; i < TK_ARRAY_LEN(bad); i++) {
        CHECK_INT(app_backup_check_schedule(bad[i], m, sizeof m), ==, 1);
        CHECK(strstr(m, "is not HH:MM") != NULL);
    }
}

TEST(backup_next_time)
{
    setenv("TZ", "Europe/Lisbon", 1);
    tzset();
    time_t now = local(2026, 6, 1, 2, 59, 0);
    CHECK_INT(app_backup_next("03:00", now), ==, local(2026, 6, 1, 3, 0, 0));
    /* at 03:00 exactly, the next is tomorrow's */
    now = local(2026, 6, 1, 3, 0, 0);
    CHECK_INT(app_backup_next("03:00", now), ==, local(2026, 6, 2, 3, 0, 0));
    /* across a month's end */
    now = local(2026, 6, 30, 23, 0, 0);
    CHECK_INT(app_backup_next("22:30", now), ==, local(2026, 7, 1, 22, 30, 0));
    /* the day clocks go forward (Lisbon, 29 March 2026, 01:00 -> 02:00):
     * 01:30 does not exist that day; mktime normalises it to a real instant
     * after now */
    now = local(2026, 3, 29, 0, 30, 0);
    time_t t = app_backup_next("01:30", now);
    CHECK(t > now && t - now <= 2 * 3600);
    CHECK_INT(app_backup_next("6h", 1000), ==, 1000 + 6 * 3600);
    CHECK_INT(app_backup_next("off", 1000), ==, 0);
}

TEST(backup_scheduled_names)
{
    CHECK(app_backup_is_scheduled_name("tusko-20261201T030000Z.tar"));
    CHECK(!app_backup_is_scheduled_name("tusko-20261201T030000Z.tar.partial"));
    CHECK(!app_backup_is_scheduled_name("mine.tar"));
    CHECK(!app_backup_is_scheduled_name("tusko-2026120xT030000Z.tar"));
    CHECK(!app_backup_is_scheduled_name(".tusko-backup-abc"));
}

TEST_MAIN()
