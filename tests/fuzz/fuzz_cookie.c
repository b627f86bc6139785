/* tusko's header-level parsers: the Cookie header, Origin/URL parsing, email
 * addresses, the model allowlist, UTF-8 character counting. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "app/auth/cookie.h"
#include "app/models.h"
#include "app/settings.h"
#include "app/users.h"
#include "app/weburl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    memcpy(s, data, size);
    s[size] = 0;
    tk_arena *a = tk_arena_new(1 << 20);
    const char *names[] = {"tusko_session", "__Host-tusko_session", "x", "a"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *v = app_cookie_get(a, s, names[i]);
        /* a value is never longer than the header it came from */
        if (v && strlen(v) > strlen(s))
            __builtin_trap();
    }
    app_url u;
    if (app_url_parse(s, &u) == TK_OK) {
        char o[600], o2[600];
        app_url_format_origin(&u, o, sizeof o);
        /* an origin is a fixed point: parsing it again gives it back */
        if (app_url_origin(o, o2, sizeof o2) != TK_OK || strcmp(o, o2) != 0)
            __builtin_trap();
        if (u.port < 1 || u.port > 65535)
            __builtin_trap();
    }
    (void)app_url_is_loopback_http(s);
    char e[256];
    if (app_email_normalize(s, e, sizeof e) == TK_OK) {
        char e2[256];
        if (app_email_normalize(e, e2, sizeof e2) != TK_OK || strcmp(e, e2) != 0)
            __builtin_trap();
    }
    char err[256];
    app_model_list *l = NULL;
    if (app_models_parse(s, &l, err, sizeof err) == TK_OK) {
        for (size_t i = 0; i < app_models_list_count(l); i++) {
            const app_model *m = app_models_list_at(l, i);
            if (app_models_list_find(l, m->id) != m)
                __builtin_trap();
        }
    }
    app_models_free(l);
    tk_arena_free(a);
    free(s);
    return 0;
}
