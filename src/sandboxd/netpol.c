#include "sandboxd/netpol.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/json.h"

/* A host name (or "*." + one) lower-cased into out: labels of [a-z0-9-], not
 * starting or ending with '-', 1..63 bytes; at most 253 in all. */
static int name_norm(const char *s, size_t n, char *out)
{
    if (n && s[n - 1] == '.')
        n--;
    size_t i = 0, o = 0;
    if (n >= 2 && s[0] == '*' && s[1] == '.') {
        out[o++] = '*';
        out[o++] = '.';
        i = 2;
    }
    if (i >= n || n > SBX_NETPOL_TARGET_MAX)
        return -1;
    size_t label = 0;
    for (; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '.') {
            if (label == 0 || out[o - 1] == '-')
                return -1;
            label = 0;
            out[o++] = '.';
            continue;
        }
        c = (unsigned char)tolower(c);
        if (!(isalnum(c) || (c == '-' && label > 0)) || c >= 0x80 || ++label > 63)
            return -1;
        out[o++] = (char)c;
    }
    if (label == 0 || out[o - 1] == '-')
        return -1;
    out[o] = '\0';
    return 0;
}

tk_status sbx_netpol_rule_parse(const json_t *j, sbx_netpol_rule *out, char *msg, size_t msglen)
{
    memset(out, 0, sizeof *out);
    const char *act = json_is_object(j) ? tk_json_str(j, "action") : NULL;
    json_t *tv = json_is_object(j) ? json_object_get(j, "target") : NULL;
    if (!act || (strcmp(act, "allow") != 0 && strcmp(act, "deny") != 0)) {
        snprintf(msg, msglen, "a rule needs action allow or deny");
        return TK_EINVAL;
    }
    if (json_object_size(j) != 2) {
        snprintf(msg, msglen, "a rule has exactly action and target");
        return TK_EINVAL;
    }
    if (!json_is_string(tv) || json_string_length(tv) == 0 ||
        json_string_length(tv) > SBX_NETPOL_TARGET_MAX ||
        strlen(json_string_value(tv)) != json_string_length(tv)) {
        snprintf(msg, msglen, "a rule's target is a host name, *.domain, address or CIDR");
        return TK_EINVAL;
    }
    out->allow = act[0] == 'a';
    const char *t = json_string_value(tv);
    size_t n = json_string_length(tv);
    char err[160];
    if (strspn(t, "0123456789abcdefABCDEF:./") == n && (strchr(t, ':') || strchr(t, '.')) &&
        tk_cidr_parse(t, n, &out->cidr, err, sizeof err) == TK_OK) {
        out->is_addr = 1;
        tk_cidr_format(&out->cidr, out->target, sizeof out->target);
        return TK_OK;
    }
    if (name_norm(t, n, out->target) != 0) {
        snprintf(msg, msglen, "target \"%.80s\" is not a host name, *.domain, address or CIDR", t);
        return TK_EINVAL;
    }
    return TK_OK;
}

tk_status sbx_netpol_parse(const json_t *np, sbx_netpol **out, char *msg, size_t msglen)
{
    *out = NULL;
    if (!np || json_is_null(np) || (json_is_object(np) && json_object_size(np) == 0))
        return TK_OK;
    if (!json_is_object(np)) {
        snprintf(msg, msglen, "networkPolicy must be an object");
        return TK_EINVAL;
    }
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)np, k, v)
    {
        if (strcmp(k, "defaultAction") != 0 && strcmp(k, "egress") != 0) {
            snprintf(msg, msglen, "networkPolicy.%.40s is not a policy field", k);
            return TK_EINVAL;
        }
    }
    json_t *da = json_object_get(np, "defaultAction");
    if (da && !json_is_null(da) &&
        (!json_is_string(da) ||
         (strcmp(json_string_value(da), "allow") && strcmp(json_string_value(da), "deny")))) {
        snprintf(msg, msglen, "networkPolicy.defaultAction must be allow or deny");
        return TK_EINVAL;
    }
    json_t *eg = json_object_get(np, "egress");
    if (eg && !json_is_null(eg) && !json_is_array(eg)) {
        snprintf(msg, msglen, "networkPolicy.egress must be an array");
        return TK_EINVAL;
    }
    if (json_array_size(eg) > SBX_NETPOL_MAX_RULES) {
        snprintf(msg, msglen, "networkPolicy.egress: at most %d rules", SBX_NETPOL_MAX_RULES);
        return TK_EINVAL;
    }
    sbx_netpol *p = calloc(1, sizeof *p);
    if (!p) {
        snprintf(msg, msglen, "out of memory");
        return TK_ERROR;
    }
    p->default_allow = da && json_is_string(da) && strcmp(json_string_value(da), "allow") == 0;
    size_t i;
    json_array_foreach(eg, i, v)
    {
        char m[200];
        if (sbx_netpol_rule_parse(v, &p->r[p->n], m, sizeof m) != TK_OK) {
            snprintf(msg, msglen, "networkPolicy.egress[%zu]: %s", i, m);
            free(p);
            return TK_EINVAL;
        }
        p->n++;
    }
    *out = p;
    return TK_OK;
}

static int has_target(const sbx_netpol_rule *r, size_t n, const char *t)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(r[i].target, t) == 0)
            return 1;
    return 0;
}

tk_status sbx_netpol_patch(sbx_netpol *p, const json_t *rules, char *msg, size_t msglen)
{
    if (!json_is_array(rules) || json_array_size(rules) == 0 ||
        json_array_size(rules) > SBX_NETPOL_MAX_RULES) {
        snprintf(msg, msglen, "the body is an array of 1 to %d rules {action, target}",
                 SBX_NETPOL_MAX_RULES);
        return TK_EINVAL;
    }
    sbx_netpol *next = calloc(1, sizeof *next);
    if (!next) {
        snprintf(msg, msglen, "out of memory");
        return TK_ERROR;
    }
    next->default_allow = p->default_allow;
    size_t i;
    json_t *v;
    json_array_foreach(rules, i, v)
    {
        sbx_netpol_rule r;
        char m[200];
        if (sbx_netpol_rule_parse(v, &r, m, sizeof m) != TK_OK) {
            snprintf(msg, msglen, "rule %zu: %s", i, m);
            free(next);
            return TK_EINVAL;
        }
        if (!has_target(next->r, next->n, r.target))
            next->r[next->n++] = r;
    }
    for (i = 0; i < p->n; i++) {
        if (has_target(next->r, next->n, p->r[i].target))
            continue;
        if (next->n >= SBX_NETPOL_MAX_RULES) {
            snprintf(msg, msglen, "a policy holds at most %d rules", SBX_NETPOL_MAX_RULES);
            free(next);
            return TK_EINVAL;
        }
        next->r[next->n++] = p->r[i];
    }
    memcpy(p, next, sizeof *p);
    free(next);
    return TK_OK;
}

tk_status sbx_netpol_delete(sbx_netpol *p, const json_t *targets, char *msg, size_t msglen)
{
    if (!json_is_array(targets) || json_array_size(targets) == 0) {
        snprintf(msg, msglen, "the body is a non-empty array of targets");
        return TK_EINVAL;
    }
    size_t i;
    json_t *v;
    json_array_foreach(targets, i, v)
    {
        if (!json_is_string(v)) {
            snprintf(msg, msglen, "target %zu is not a string", i);
            return TK_EINVAL;
        }
    }
    json_array_foreach(targets, i, v)
    {
        /* the target as a rule would store it */
        json_t *probe = tk_json_obj("action", json_string("deny"), "target", json_incref(v), NULL);
        sbx_netpol_rule r;
        char m[200];
        int ok = sbx_netpol_rule_parse(probe, &r, m, sizeof m) == TK_OK;
        json_decref(probe);
        if (!ok)
            continue;
        size_t o = 0;
        for (size_t k = 0; k < p->n; k++)
            if (strcmp(p->r[k].target, r.target) != 0)
                p->r[o++] = p->r[k];
        p->n = o;
    }
    return TK_OK;
}

static int rule_matches(const sbx_netpol_rule *r, const char *host, int host_is_addr,
                        const tk_ip *addrs, size_t naddrs)
{
    if (r->is_addr) {
        if (naddrs == 0)
            return 0;
        size_t in = 0;
        for (size_t i = 0; i < naddrs; i++) {
            tk_ip u = tk_ip_unmapped(&addrs[i]);
            in += tk_cidr_match(&r->cidr, &u) ? 1 : 0;
        }
        if (host_is_addr)
            return in > 0;
        return r->allow ? in == naddrs : in > 0;
    }
    if (host_is_addr)
        return 0;
    if (r->target[0] == '*') {
        const char *suffix = r->target + 1; /* ".example.com" */
        size_t hl = strlen(host), sl = strlen(suffix);
        return hl > sl && strcmp(host + hl - sl, suffix) == 0;
    }
    return strcmp(host, r->target) == 0;
}

int sbx_netpol_admits(const sbx_netpol *p, const char *host, const tk_ip *addrs, size_t naddrs,
                      char *why, size_t whylen)
{
    char h[SBX_NETPOL_TARGET_MAX + 2];
    size_t hl = strlen(host);
    if (hl && host[hl - 1] == '.')
        hl--;
    if (hl > SBX_NETPOL_TARGET_MAX)
        hl = SBX_NETPOL_TARGET_MAX;
    for (size_t i = 0; i < hl; i++)
        h[i] = (char)tolower((unsigned char)host[i]);
    h[hl] = '\0';
    tk_cidr c;
    char err[64];
    int host_is_addr = tk_cidr_parse(h, hl, &c, err, sizeof err) == TK_OK;
    for (size_t i = 0; i < p->n; i++) {
        if (!rule_matches(&p->r[i], h, host_is_addr, addrs, naddrs))
            continue;
        if (!p->r[i].allow)
            snprintf(why, whylen, "the sandbox's network policy denies %s (rule %s)", h,
                     p->r[i].target);
        return p->r[i].allow;
    }
    if (!p->default_allow)
        snprintf(why, whylen, "the sandbox's network policy denies %s (no rule allows it)", h);
    return p->default_allow;
}

json_t *sbx_netpol_json(const sbx_netpol *p)
{
    json_t *eg = json_array();
    for (size_t i = 0; i < p->n; i++)
        json_array_append_new(eg,
                              tk_json_obj("action", json_string(p->r[i].allow ? "allow" : "deny"),
                                          "target", json_string(p->r[i].target), NULL));
    return tk_json_obj("defaultAction", json_string(p->default_allow ? "allow" : "deny"), "egress",
                       eg, NULL);
}
