/*
 * users.h — accounts in the users table.
 */
#ifndef APP_USERS_H
#define APP_USERS_H

#include <libpq-fe.h>
#include <stddef.h>

#include "lib/common.h"
#include "lib/id.h"

/* Lower-cases and trims an email address into out; TK_EINVAL when it does not
 * look like one (no '@', spaces or control characters, over 254 bytes). */
tk_status app_email_normalize(const char *in, char *out, size_t outlen);

/* Creates a user; password_hash and email may be NULL. The account is an admin
 * when want_admin or when no admin exists yet (the first account of an install,
 * sql/0160_roles.sql); *is_admin (when not NULL) says which. TK_EDENIED when
 * the email is taken; TK_ERROR on a database error. id gets the new user's id. */
tk_status app_user_create(PGconn *c, const char *email, const char *password_hash, const char *name,
                          int want_admin, int *is_admin, char id[TK_UUID_LEN]);

/* TK_OK for an enabled account, TK_EDENIED a disabled one, TK_ENOENT, TK_ERROR. */
tk_status app_users_disabled(PGconn *c, const char *user_id);

/* Sets the role of a user: TK_OK, TK_ENOENT no such user, TK_ERROR. */
tk_status app_users_set_admin(PGconn *c, const char *user_id, int admin);

/* Finds a user by (normalized) email: TK_OK with id and, when wanted, the
 * password hash (heap, may be NULL: no local sign-in); TK_ENOENT; TK_ERROR. */
tk_status app_user_find_email(PGconn *c, const char *email, char id[TK_UUID_LEN],
                              char **password_hash);

#endif
