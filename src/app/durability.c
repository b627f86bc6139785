#include "app/durability.h"

#include <stdio.h>
#include <string.h>

#include "lib/log.h"
#include "lib/pg.h"

int app_durability_unsafe(PGconn *c, char *out, size_t outlen)
{
    /* synchronous_commit: "off" acknowledges commits before they are on disk;
     * "local", "remote_write", "on" and "remote_apply" all flush locally */
    PGresult *r = tk_pg_query(c,
                              "SELECT name, setting FROM pg_settings"
                              " WHERE (name IN ('fsync', 'full_page_writes') AND setting = 'off')"
                              "    OR (name = 'synchronous_commit' AND setting = 'off')"
                              " ORDER BY name",
                              0, NULL);
    if (!tk_pg_ok(r)) {
        snprintf(out, outlen, "reading pg_settings failed");
        PQclear(r);
        return -1;
    }
    size_t used = 0;
    out[0] = '\0';
    int n = PQntuples(r);
    for (int i = 0; i < n; i++) {
        int w = snprintf(out + used, used < outlen ? outlen - used : 0, "%s%s=%s", i ? " " : "",
                         PQgetvalue(r, i, 0), PQgetvalue(r, i, 1));
        if (w > 0)
            used += (size_t)w;
    }
    PQclear(r);
    return n;
}

void app_durability_check(PGconn *c)
{
    char s[160];
    int n = app_durability_unsafe(c, s, sizeof s);
    if (n < 0)
        tk_warn("db", "msg=\"could not check the database's durability settings\" error=\"%s\"", s);
    else if (n > 0)
        tk_warn("db",
                "msg=\"the database runs with unsafe settings: a crash of its machine or a "
                "power cut can lose acknowledged messages or corrupt the database\" %s "
                "hint=\"turn them on (Postgres's defaults); see docs/OPERATIONS.md\"",
                s);
    else
        tk_info("db", "msg=\"durable settings: fsync, synchronous_commit and full_page_writes "
                      "are on\"");
}
