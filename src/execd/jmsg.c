#include "execd/jmsg.h"

#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/id.h"
#include "lib/json.h"
#include "lib/tktime.h"

static const char DELIM[] = "<IDS|MSG>";

void execd_jmsg_sign(const char *key, size_t keylen, const char *const *parts, const size_t *lens,
                     size_t n, char out[65])
{
    unsigned char mac[32];
    size_t maclen = 0;
    EVP_MAC *alg = EVP_MAC_fetch(NULL, "HMAC", NULL);
    EVP_MAC_CTX *ctx = alg ? EVP_MAC_CTX_new(alg) : NULL;
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0),
        OSSL_PARAM_construct_end(),
    };
    if (!ctx || !EVP_MAC_init(ctx, (const unsigned char *)key, keylen, params))
        tk_panic(__FILE__, __LINE__, "HMAC-SHA256 unavailable");
    for (size_t i = 0; i < n; i++)
        EVP_MAC_update(ctx, (const unsigned char *)parts[i], lens[i]);
    if (!EVP_MAC_final(ctx, mac, &maclen, sizeof mac) || maclen != sizeof mac)
        tk_panic(__FILE__, __LINE__, "HMAC-SHA256 final");
    EVP_MAC_CTX_free(ctx);
    EVP_MAC_free(alg);
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < sizeof mac; i++) {
        out[2 * i] = hex[mac[i] >> 4];
        out[2 * i + 1] = hex[mac[i] & 15];
    }
    out[64] = '\0';
}

void execd_jmsg_build(execd_jmsg_out *m, const char *key, const char *session, const char *msg_type,
                      json_t *content)
{
    memset(m, 0, sizeof *m);
    tk_uuid4(m->msg_id);
    char date[40];
    tk_time_rfc3339(tk_now_ms(), date, sizeof date);
    json_t *h =
        tk_json_obj("msg_id", json_string(m->msg_id), "username", json_string("tusko-execd"),
                    "session", json_string(session), "date", json_string(date), "msg_type",
                    json_string(msg_type), "version", json_string("5.3"), NULL);
    json_t *parts[4] = {h, json_object(), json_object(), content ? content : json_object()};
    for (int i = 0; i < 4; i++) {
        m->part[i] = tk_json_dumps(parts[i]);
        m->len[i] = strlen(m->part[i]);
        json_decref(parts[i]);
    }
    execd_jmsg_sign(key, strlen(key), (const char *const *)m->part, m->len, 4, m->sig);
}

void execd_jmsg_out_free(execd_jmsg_out *m)
{
    for (int i = 0; i < 4; i++)
        free(m->part[i]);
    memset(m, 0, sizeof *m);
}

static int ct_eq(const char *a, size_t al, const char *b, size_t bl)
{
    unsigned char d = (unsigned char)(al != bl);
    size_t n = al < bl ? al : bl;
    for (size_t i = 0; i < n; i++)
        d |= (unsigned char)(a[i] ^ b[i]);
    return d == 0;
}

tk_status execd_jmsg_decode(const char *key, size_t keylen, const execd_frame *frames, size_t n,
                            execd_jmsg *m, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    size_t d = 0;
    while (d < n && !(frames[d].len == sizeof DELIM - 1 &&
                      memcmp(frames[d].data, DELIM, sizeof DELIM - 1) == 0))
        d++;
    if (d >= n || n - d < 6) {
        snprintf(err, errlen, "not a Jupyter message (no delimiter or too few frames)");
        return TK_EINVAL;
    }
    const execd_frame *sig = &frames[d + 1];
    const char *parts[4];
    size_t lens[4];
    for (int i = 0; i < 4; i++) {
        parts[i] = frames[d + 2 + i].data;
        lens[i] = frames[d + 2 + i].len;
        if (lens[i] > EXECD_JMSG_MAX) {
            snprintf(err, errlen, "message part of %zu bytes is over the limit", lens[i]);
            return TK_EINVAL;
        }
    }
    char want[65];
    execd_jmsg_sign(key, keylen, parts, lens, 4, want);
    if (!ct_eq(sig->data, sig->len, want, 64)) {
        snprintf(err, errlen, "bad message signature");
        return TK_EINVAL;
    }
    json_t **dst[4] = {&m->header, &m->parent, &m->metadata, &m->content};
    for (int i = 0; i < 4; i++) {
        char perr[200];
        json_t *j = tk_json_parse(parts[i], lens[i], EXECD_JMSG_MAX, perr, sizeof perr);
        if (!j || !json_is_object(j)) {
            if (j)
                json_decref(j);
            snprintf(err, errlen, "message part %d is not a JSON object%s%s", i, j ? "" : ": ",
                     j ? "" : perr);
            execd_jmsg_free(m);
            return TK_EINVAL;
        }
        *dst[i] = j;
    }
    m->msg_type = tk_json_str_or(m->header, "msg_type", "");
    m->parent_id = tk_json_str_or(m->parent, "msg_id", "");
    return TK_OK;
}

void execd_jmsg_free(execd_jmsg *m)
{
    json_t *all[4] = {m->header, m->parent, m->metadata, m->content};
    for (int i = 0; i < 4; i++)
        if (all[i])
            json_decref(all[i]);
    memset(m, 0, sizeof *m);
}
