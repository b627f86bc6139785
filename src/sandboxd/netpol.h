/*
 * netpol.h — a sandbox's own egress rules (OpenSandbox's `networkPolicy` and
 * the egress API's /policy), applied by the egress proxy after the outbound
 * fetch checks: a rule can narrow what the operator's checks admit, never widen
 * it (a refused address stays refused whatever the policy says).
 *
 * A policy is a default action and an ordered list of rules; the first rule
 * that matches decides. A target is a host name ("pypi.org"), a wildcard
 * ("*.example.com": any name below example.com, not example.com itself), an
 * address or a CIDR ("10.1.0.0/16", "::1"). An address rule matches when the
 * request's host is that literal address or, for a name, when every address it
 * resolved to lies in it (allow) or any does (deny). Names are compared
 * lower-cased, without a final dot.
 *
 * No policy (null or {} at create): the operator's checks alone. Otherwise a
 * missing defaultAction is "deny", as the spec says.
 */
#ifndef SBX_NETPOL_H
#define SBX_NETPOL_H

#include <jansson.h>
#include <stddef.h>

#include "lib/cidr.h"
#include "lib/common.h"

#define SBX_NETPOL_MAX_RULES  256
#define SBX_NETPOL_TARGET_MAX 253

typedef struct {
    int allow;
    int is_addr; /* cidr holds the address or prefix */
    tk_cidr cidr;
    char target[SBX_NETPOL_TARGET_MAX + 1]; /* normalised, as shown */
} sbx_netpol_rule;

typedef struct {
    int default_allow;
    size_t n;
    sbx_netpol_rule r[SBX_NETPOL_MAX_RULES];
} sbx_netpol;

/* One rule object {action, target}: TK_EINVAL with a message naming what. */
tk_status sbx_netpol_rule_parse(const json_t *j, sbx_netpol_rule *out, char *msg, size_t msglen);

/* A create request's networkPolicy: *out NULL for none (null, absent or {}),
 * else a new policy (free()). TK_EINVAL with a message. */
tk_status sbx_netpol_parse(const json_t *np, sbx_netpol **out, char *msg, size_t msglen);

/* PATCH: rules (a non-empty array) go first, the first of a target winning;
 * existing rules with those targets are dropped. Nothing changes on TK_EINVAL. */
tk_status sbx_netpol_patch(sbx_netpol *p, const json_t *rules, char *msg, size_t msglen);

/* DELETE: removes the rules whose target is one of targets (a non-empty array
 * of strings); unknown targets are ignored. */
tk_status sbx_netpol_delete(sbx_netpol *p, const json_t *targets, char *msg, size_t msglen);

/* Whether the policy admits host (normalised, brackets removed for IPv6) that
 * resolved to addrs; on a refusal why names the rule or the default. */
int sbx_netpol_admits(const sbx_netpol *p, const char *host, const tk_ip *addrs, size_t naddrs,
                      char *why, size_t whylen);

/* {defaultAction, egress: [{action, target}]} */
json_t *sbx_netpol_json(const sbx_netpol *p);

#endif
