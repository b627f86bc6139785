/*
 * env.h — the rule for the environment variable names a create request gives
 * a sandbox. A pure function over an untrusted string.
 */
#ifndef SBX_ENV_H
#define SBX_ENV_H

/* An environment variable name: [A-Za-z_][A-Za-z0-9_]*, at most 255 bytes. */
int sbx_env_name_valid(const char *s);

#endif
