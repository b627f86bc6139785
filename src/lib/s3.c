#include "lib/s3.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdarg.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "lib/buf.h"
#include "lib/httpc.h"

#define EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define URL_MAX      (TK_S3_KEY_MAX * 3 + 2048)

struct tk_s3 {
    char *scheme;   /* "http" or "https" */
    char *hostport; /* host[:port] */
    char *base;     /* "" or "/path" without a trailing '/' */
    char *bucket;
    char *sigv4;   /* aws:amz:<region>:s3 */
    char *userpwd; /* access:secret, only for libcurl's signer */
    int path_style;
    int64_t part_size, multipart_min;
    int max_attempts;
    long timeout_ms, retry_pause_ms;
};

static void set_err(tk_s3_result *r, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_err(tk_s3_result *r, const char *code, const char *fmt, ...)
{
    snprintf(r->code, sizeof r->code, "%s", code);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->message, sizeof r->message, fmt, ap);
    va_end(ap);
}

static int valid_bucket(const char *b)
{
    size_t n = strlen(b);
    if (n < 3 || n > 63)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = b[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.'))
            return 0;
    }
    return 1;
}

static int valid_region(const char *s)
{
    if (!*s || strlen(s) > 64)
        return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '-' || *s == '_'))
            return 0;
    return 1;
}

tk_s3 *tk_s3_new(const tk_s3_config *c, char *err, size_t errlen)
{
    if (!c->endpoint || !c->region || !c->bucket || !c->access_key || !c->secret_key) {
        snprintf(err, errlen, "the endpoint, region, bucket and both keys are needed");
        return NULL;
    }
    const char *rest;
    const char *scheme;
    if (strncmp(c->endpoint, "http://", 7) == 0) {
        scheme = "http";
        rest = c->endpoint + 7;
    } else if (strncmp(c->endpoint, "https://", 8) == 0) {
        scheme = "https";
        rest = c->endpoint + 8;
    } else {
        snprintf(err, errlen, "the endpoint is not an http(s) URL");
        return NULL;
    }
    size_t hl = strcspn(rest, "/?#");
    if (hl == 0 || strchr(rest, '?') || strchr(rest, '#') || strchr(rest, '@')) {
        snprintf(err, errlen, "the endpoint needs a host and no query, fragment or user");
        return NULL;
    }
    if (!valid_bucket(c->bucket)) {
        snprintf(err, errlen, "\"%s\" is not a bucket name (3-63 of a-z 0-9 . -)", c->bucket);
        return NULL;
    }
    if (!valid_region(c->region)) {
        snprintf(err, errlen, "\"%s\" is not a region name", c->region);
        return NULL;
    }
    if (!*c->access_key || strchr(c->access_key, ':')) {
        snprintf(err, errlen, "the access key id is empty or has a ':'");
        return NULL;
    }
    if (c->part_size < TK_S3_MIN_PART || c->part_size > (5ll << 30)) {
        snprintf(err, errlen, "the part size is not from 5 MiB to 5 GiB");
        return NULL;
    }
    tk_s3 *s = tk_calloc(1, sizeof *s);
    s->scheme = tk_strdup(scheme);
    s->hostport = tk_strndup(rest, hl);
    s->base = tk_strdup(rest + hl);
    size_t bl = strlen(s->base);
    while (bl > 0 && s->base[bl - 1] == '/')
        s->base[--bl] = 0;
    s->bucket = tk_strdup(c->bucket);
    s->sigv4 = tk_asprintf("aws:amz:%s:s3", c->region);
    s->userpwd = tk_asprintf("%s:%s", c->access_key, c->secret_key);
    s->path_style = c->path_style;
    s->part_size = c->part_size;
    s->multipart_min = c->multipart_min > 0 ? c->multipart_min : (64ll << 20);
    s->max_attempts = c->max_attempts > 0 ? c->max_attempts : 1;
    s->timeout_ms = c->timeout_ms;
    s->retry_pause_ms = c->retry_pause_ms > 0 ? c->retry_pause_ms : 200;
    tk_httpc_global_init();
    return s;
}

void tk_s3_free(tk_s3 *s)
{
    if (!s)
        return;
    free(s->scheme);
    free(s->hostport);
    free(s->base);
    free(s->bucket);
    free(s->sigv4);
    if (s->userpwd) {
        explicit_bzero(s->userpwd, strlen(s->userpwd));
        free(s->userpwd);
    }
    free(s);
}

/* ---------------- encoding, hashing ---------------- */

tk_status tk_s3_encode(const char *s, int keep_slash, char *out, size_t outlen)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        int plain = (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
                    (*p >= '0' && *p <= '9') || *p == '-' || *p == '_' || *p == '.' || *p == '~' ||
                    (keep_slash && *p == '/');
        if (o + (plain ? 1 : 3) >= outlen)
            return TK_ETOOBIG;
        if (plain) {
            out[o++] = (char)*p;
        } else {
            out[o++] = '%';
            out[o++] = hex[*p >> 4];
            out[o++] = hex[*p & 15];
        }
    }
    if (o >= outlen)
        return TK_ETOOBIG;
    out[o] = 0;
    return TK_OK;
}

static void hex_of(const unsigned char *d, size_t n, char *out)
{
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = hex[d[i] >> 4];
        out[2 * i + 1] = hex[d[i] & 15];
    }
    out[2 * n] = 0;
}

void tk_s3_sha256_hex(const void *data, size_t len, char out[65])
{
    unsigned char d[32];
    unsigned int dl = 0;
    EVP_Digest(data, len, d, &dl, EVP_sha256(), NULL);
    hex_of(d, 32, out);
}

/* The SHA-256 of len bytes of fd at off. */
static tk_status sha256_fd(int fd, int64_t off, int64_t len, char out[65])
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    if (!ctx)
        tk_oom();
    EVP_DigestInit_ex(ctx, EVP_sha256(), NULL);
    char buf[1 << 16];
    tk_status st = TK_OK;
    while (len > 0) {
        ssize_t n = pread(fd, buf, (size_t)TK_MIN((int64_t)sizeof buf, len), off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            st = TK_ERROR;
            break;
        }
        EVP_DigestUpdate(ctx, buf, (size_t)n);
        off += n;
        len -= n;
    }
    unsigned char d[32];
    unsigned int dl = 0;
    EVP_DigestFinal_ex(ctx, d, &dl);
    EVP_MD_CTX_free(ctx);
    hex_of(d, 32, out);
    return st;
}

/* ---------------- XML (answers from the store: untrusted) ---------------- */

/* Finds <name ...>inner</name> (or <name/>) at or after *pos; TK_ENOENT if none. */
static tk_status xml_find(const char *x, size_t len, size_t *pos, const char *name, size_t *is,
                          size_t *il)
{
    size_t nl = strlen(name);
    size_t p = *pos;
    while (p < len) {
        const char *lt = memchr(x + p, '<', len - p);
        if (!lt)
            return TK_ENOENT;
        size_t at = (size_t)(lt - x);
        if (at + 1 + nl < len && memcmp(x + at + 1, name, nl) == 0) {
            char c = x[at + 1 + nl];
            if (c == '>' || c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '/') {
                const char *gt = memchr(x + at + 1 + nl, '>', len - (at + 1 + nl));
                if (!gt)
                    return TK_EINVAL;
                size_t open_end = (size_t)(gt - x) + 1;
                if (gt[-1] == '/') { /* <name/> */
                    *is = open_end;
                    *il = 0;
                    *pos = open_end;
                    return TK_OK;
                }
                /* the matching close tag (S3's answers never nest a name in itself) */
                size_t q = open_end;
                for (;;) {
                    const char *c2 = q < len ? memchr(x + q, '<', len - q) : NULL;
                    if (!c2)
                        return TK_EINVAL;
                    size_t ca = (size_t)(c2 - x);
                    if (ca + 2 + nl < len && x[ca + 1] == '/' &&
                        memcmp(x + ca + 2, name, nl) == 0 && x[ca + 2 + nl] == '>') {
                        *is = open_end;
                        *il = ca - open_end;
                        *pos = ca + 3 + nl;
                        return TK_OK;
                    }
                    q = ca + 1;
                }
            }
        }
        p = at + 1;
    }
    return TK_ENOENT;
}

static int put_utf8(char *out, size_t outlen, size_t *o, unsigned long cp)
{
    char b[4];
    int n;
    if (cp == 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return -1;
    if (cp < 0x80) {
        b[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        b[0] = (char)(0xC0 | (cp >> 6));
        b[1] = (char)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        b[0] = (char)(0xE0 | (cp >> 12));
        b[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        b[2] = (char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        b[0] = (char)(0xF0 | (cp >> 18));
        b[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        b[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        b[3] = (char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    if (*o + (size_t)n >= outlen)
        return -2;
    memcpy(out + *o, b, (size_t)n);
    *o += (size_t)n;
    return 0;
}

/* Decodes XML character data (entities) into out. */
static tk_status xml_decode(const char *s, size_t n, char *out, size_t outlen)
{
    size_t o = 0;
    if (outlen == 0)
        return TK_ETOOBIG;
    for (size_t i = 0; i < n;) {
        char c = s[i];
        if (c == '<' || c == 0)
            return TK_EINVAL;
        if (c != '&') {
            if (o + 1 >= outlen)
                return TK_ETOOBIG;
            out[o++] = c;
            i++;
            continue;
        }
        const char *semi = memchr(s + i, ';', TK_MIN(n - i, (size_t)12));
        if (!semi)
            return TK_EINVAL;
        size_t el = (size_t)(semi - (s + i)) - 1; /* between & and ; */
        const char *e = s + i + 1;
        unsigned long cp = 0;
        if (el == 3 && memcmp(e, "amp", 3) == 0)
            cp = '&';
        else if (el == 2 && memcmp(e, "lt", 2) == 0)
            cp = '<';
        else if (el == 2 && memcmp(e, "gt", 2) == 0)
            cp = '>';
        else if (el == 4 && memcmp(e, "quot", 4) == 0)
            cp = '"';
        else if (el == 4 && memcmp(e, "apos", 4) == 0)
            cp = '\'';
        else if (el >= 2 && e[0] == '#') {
            int hexa = e[1] == 'x';
            size_t k = hexa ? 2 : 1;
            if (k >= el)
                return TK_EINVAL;
            for (; k < el; k++) {
                char d = e[k];
                int v;
                if (d >= '0' && d <= '9')
                    v = d - '0';
                else if (hexa && d >= 'a' && d <= 'f')
                    v = d - 'a' + 10;
                else if (hexa && d >= 'A' && d <= 'F')
                    v = d - 'A' + 10;
                else
                    return TK_EINVAL;
                cp = cp * (hexa ? 16 : 10) + (unsigned long)v;
                if (cp > 0x10FFFF)
                    return TK_EINVAL;
            }
        } else {
            return TK_EINVAL;
        }
        int pr = put_utf8(out, outlen, &o, cp);
        if (pr == -1)
            return TK_EINVAL;
        if (pr == -2)
            return TK_ETOOBIG;
        i += el + 2;
    }
    out[o] = 0;
    return TK_OK;
}

tk_status tk_s3_xml_text(const char *xml, size_t len, const char *name, char *out, size_t outlen)
{
    size_t pos = 0, is, il;
    tk_status st = xml_find(xml, len, &pos, name, &is, &il);
    if (st != TK_OK)
        return st;
    return xml_decode(xml + is, il, out, outlen);
}

/* The decoded text of <name> as a heap string (NULL when absent or bad). */
static char *xml_dup(const char *x, size_t len, const char *name, size_t max)
{
    char *b = tk_malloc(max + 1);
    if (tk_s3_xml_text(x, len, name, b, max + 1) != TK_OK) {
        free(b);
        return NULL;
    }
    return b;
}

static int xml_bool(const char *x, size_t len, const char *name)
{
    char b[8];
    return tk_s3_xml_text(x, len, name, b, sizeof b) == TK_OK && strcmp(b, "true") == 0;
}

tk_status tk_s3_parse_error(const char *xml, size_t len, char *code, size_t codelen, char *message,
                            size_t msglen)
{
    size_t pos = 0, is, il;
    tk_status st = xml_find(xml, len, &pos, "Error", &is, &il);
    if (st != TK_OK)
        return st;
    if (tk_s3_xml_text(xml + is, il, "Code", code, codelen) != TK_OK)
        return TK_EINVAL;
    if (tk_s3_xml_text(xml + is, il, "Message", message, msglen) != TK_OK && msglen)
        message[0] = 0;
    return TK_OK;
}

tk_status tk_s3_parse_list(const char *xml, size_t len, tk_s3_list *out)
{
    memset(out, 0, sizeof *out);
    size_t pos = 0, is, il;
    if (xml_find(xml, len, &pos, "ListBucketResult", &is, &il) != TK_OK)
        return TK_EINVAL;
    const char *b = xml + is;
    size_t cap = 0, p = 0, cs, cl;
    tk_status st;
    while ((st = xml_find(b, il, &p, "Contents", &cs, &cl)) == TK_OK) {
        char *key = xml_dup(b + cs, cl, "Key", TK_S3_KEY_MAX);
        char size[24];
        int64_t sz = 0;
        if (!key || tk_s3_xml_text(b + cs, cl, "Size", size, sizeof size) != TK_OK ||
            tk_parse_i64(size, 0, INT64_MAX, &sz) != TK_OK) {
            free(key);
            tk_s3_list_free(out);
            return TK_EINVAL;
        }
        if (out->n == cap) {
            cap = cap ? cap * 2 : 16;
            out->items = tk_realloc(out->items, cap * sizeof *out->items);
        }
        tk_s3_object *o = &out->items[out->n++];
        memset(o, 0, sizeof *o);
        o->key = key;
        o->size = sz;
        if (tk_s3_xml_text(b + cs, cl, "LastModified", o->last_modified, sizeof o->last_modified) !=
            TK_OK)
            o->last_modified[0] = 0;
    }
    if (st != TK_ENOENT) {
        tk_s3_list_free(out);
        return TK_EINVAL;
    }
    /* IsTruncated and the token sit after the Contents in AWS's answers, before
     * them in some others: look outside the Contents elements only */
    out->truncated = xml_bool(b, il, "IsTruncated");
    out->next_token = xml_dup(b, il, "NextContinuationToken", 4096);
    if (out->truncated && !out->next_token) {
        tk_s3_list_free(out);
        return TK_EINVAL;
    }
    return TK_OK;
}

void tk_s3_list_free(tk_s3_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->items[i].key);
    free(l->items);
    free(l->next_token);
    memset(l, 0, sizeof *l);
}

tk_status tk_s3_parse_uploads(const char *xml, size_t len, tk_s3_uploads *out)
{
    memset(out, 0, sizeof *out);
    size_t pos = 0, is, il;
    if (xml_find(xml, len, &pos, "ListMultipartUploadsResult", &is, &il) != TK_OK)
        return TK_EINVAL;
    const char *b = xml + is;
    size_t cap = 0, p = 0, us, ul;
    tk_status st;
    while ((st = xml_find(b, il, &p, "Upload", &us, &ul)) == TK_OK) {
        char *key = xml_dup(b + us, ul, "Key", TK_S3_KEY_MAX);
        char *id = xml_dup(b + us, ul, "UploadId", 1024);
        if (!key || !id) {
            free(key);
            free(id);
            tk_s3_uploads_free(out);
            return TK_EINVAL;
        }
        if (out->n == cap) {
            cap = cap ? cap * 2 : 16;
            out->items = tk_realloc(out->items, cap * sizeof *out->items);
        }
        tk_s3_upload *u = &out->items[out->n++];
        memset(u, 0, sizeof *u);
        u->key = key;
        u->upload_id = id;
        if (tk_s3_xml_text(b + us, ul, "Initiated", u->initiated, sizeof u->initiated) != TK_OK)
            u->initiated[0] = 0;
    }
    if (st != TK_ENOENT) {
        tk_s3_uploads_free(out);
        return TK_EINVAL;
    }
    out->truncated = xml_bool(b, il, "IsTruncated");
    out->next_key_marker = xml_dup(b, il, "NextKeyMarker", TK_S3_KEY_MAX);
    out->next_upload_id_marker = xml_dup(b, il, "NextUploadIdMarker", 1024);
    return TK_OK;
}

void tk_s3_uploads_free(tk_s3_uploads *u)
{
    for (size_t i = 0; i < u->n; i++) {
        free(u->items[i].key);
        free(u->items[i].upload_id);
    }
    free(u->items);
    free(u->next_key_marker);
    free(u->next_upload_id_marker);
    memset(u, 0, sizeof *u);
}

/* ---------------- requests ---------------- */

typedef struct {
    const char *method;
    char url[URL_MAX];
    struct curl_slist *headers; /* the caller's extra headers */
    /* the body: a buffer, or len bytes of fd at off */
    const char *mem;
    int fd;
    int64_t off, len;
    int has_body;
    char sha[65];
    /* the answer: streamed to on_data when 2xx, else buffered (capped) */
    int (*on_data)(const char *data, size_t len, void *ud);
    void *ud;
    int64_t max_bytes;
    /* filled */
    tk_buf body;
    char etag[128];
    char meta_sha[65];
    int64_t got;  /* bytes handed to on_data */
    int too_big;  /* a cap was hit */
    int stopped;  /* on_data asked to stop */
    int64_t sent; /* body bytes read by curl in this try */
    CURL *c;
} s3_req;

static int key_ok(const char *key)
{
    size_t n = strlen(key);
    return n > 0 && n <= TK_S3_KEY_MAX && key[0] != '/';
}

/* url = the object's (key may be NULL: the bucket) + canonical query (already
 * sorted and encoded by the caller). */
static tk_status build_url(tk_s3 *s, const char *key, const char *query, char *url, size_t n)
{
    char ek[TK_S3_KEY_MAX * 3 + 1] = "";
    if (key && tk_s3_encode(key, 1, ek, sizeof ek) != TK_OK)
        return TK_EINVAL;
    int w;
    if (s->path_style)
        w = snprintf(url, n, "%s://%s%s/%s%s%s%s%s", s->scheme, s->hostport, s->base, s->bucket,
                     key ? "/" : "", ek, query ? "?" : "", query ? query : "");
    else
        w = snprintf(url, n, "%s://%s.%s%s/%s%s%s", s->scheme, s->bucket, s->hostport, s->base, ek,
                     query ? "?" : "", query ? query : "");
    return w > 0 && (size_t)w < n ? TK_OK : TK_ETOOBIG;
}

static size_t read_cb(char *buf, size_t size, size_t nitems, void *ud)
{
    s3_req *q = ud;
    size_t want = size * nitems;
    int64_t left = q->len - q->sent;
    if (left <= 0)
        return 0;
    if ((int64_t)want > left)
        want = (size_t)left;
    if (q->mem) {
        memcpy(buf, q->mem + q->sent, want);
        q->sent += (int64_t)want;
        return want;
    }
    for (;;) {
        ssize_t n = pread(q->fd, buf, want, q->off + q->sent);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return CURL_READFUNC_ABORT;
        q->sent += n;
        return (size_t)n;
    }
}

static size_t write_cb(char *data, size_t size, size_t nmemb, void *ud)
{
    s3_req *q = ud;
    size_t n = size * nmemb;
    long status = 0;
    curl_easy_getinfo(q->c, CURLINFO_RESPONSE_CODE, &status);
    if (q->on_data && status >= 200 && status < 300) {
        if (q->max_bytes > 0 && q->got + (int64_t)n > q->max_bytes) {
            q->too_big = 1;
            return 0;
        }
        q->got += (int64_t)n;
        if (q->on_data(data, n, q->ud) != 0) {
            q->stopped = 1;
            return 0;
        }
        return n;
    }
    if (tk_buf_append(&q->body, data, n) != TK_OK) {
        q->too_big = 1;
        return 0;
    }
    return n;
}

/* Copies a header's value (trimmed) if line is "name: value". */
static void header_value(const char *line, size_t n, const char *name, char *out, size_t outlen)
{
    size_t nl = strlen(name);
    if (n <= nl + 1 || strncasecmp(line, name, nl) != 0 || line[nl] != ':')
        return;
    const char *v = line + nl + 1;
    size_t vl = n - nl - 1;
    while (vl && (*v == ' ' || *v == '\t')) {
        v++;
        vl--;
    }
    while (vl && (v[vl - 1] == '\r' || v[vl - 1] == '\n' || v[vl - 1] == ' '))
        vl--;
    if (vl < outlen) {
        memcpy(out, v, vl);
        out[vl] = 0;
    }
}

static size_t header_cb(char *data, size_t size, size_t nmemb, void *ud)
{
    s3_req *q = ud;
    size_t n = size * nmemb;
    if (n >= 5 && strncmp(data, "HTTP/", 5) == 0) { /* a new response (after a 100) */
        q->etag[0] = 0;
        q->meta_sha[0] = 0;
    }
    header_value(data, n, "ETag", q->etag, sizeof q->etag);
    header_value(data, n, "x-amz-meta-sha256", q->meta_sha, sizeof q->meta_sha);
    return n;
}

static void pause_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* One call, retried on 5xx and network errors. */
static tk_status s3_do(tk_s3 *s, s3_req *q, tk_s3_result *r)
{
    if (!q->has_body)
        memcpy(q->sha, EMPTY_SHA256, sizeof q->sha);
    char shah[100];
    snprintf(shah, sizeof shah, "x-amz-content-sha256: %s", q->sha);
    struct curl_slist *hl = NULL;
    for (struct curl_slist *h = q->headers; h; h = h->next)
        hl = curl_slist_append(hl, h->data);
    hl = curl_slist_append(hl, shah);
    hl = curl_slist_append(hl, "Expect:");
    if (!hl)
        tk_oom();
    tk_status st = TK_ERROR;
    long pause = s->retry_pause_ms;
    for (int attempt = 1; attempt <= s->max_attempts; attempt++) {
        r->attempts++;
        tk_buf_free(&q->body);
        tk_buf_init(&q->body, TK_S3_XML_MAX);
        q->etag[0] = q->meta_sha[0] = 0;
        q->sent = 0;
        q->too_big = q->stopped = 0;
        CURL *c = curl_easy_init();
        if (!c)
            tk_oom();
        q->c = c;
        curl_easy_setopt(c, CURLOPT_URL, q->url);
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
        curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
        curl_easy_setopt(c, CURLOPT_AWS_SIGV4, s->sigv4);
        curl_easy_setopt(c, CURLOPT_USERPWD, s->userpwd);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, write_cb);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, q);
        curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, header_cb);
        curl_easy_setopt(c, CURLOPT_HEADERDATA, q);
        curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
        /* a stalled transfer ends: under 1 byte/s for 60 s */
        curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
        curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 60L);
        if (s->timeout_ms > 0)
            curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, s->timeout_ms);
        const char *m = q->method;
        if (strcmp(m, "PUT") == 0) {
            curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
            curl_easy_setopt(c, CURLOPT_READFUNCTION, read_cb);
            curl_easy_setopt(c, CURLOPT_READDATA, q);
            curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)q->len);
        } else if (strcmp(m, "POST") == 0) {
            curl_easy_setopt(c, CURLOPT_POST, 1L);
            curl_easy_setopt(c, CURLOPT_POSTFIELDS, q->mem ? q->mem : "");
            curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)q->len);
        } else if (strcmp(m, "HEAD") == 0) {
            curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
        } else if (strcmp(m, "DELETE") == 0) {
            curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "DELETE");
        }
        CURLcode cc = curl_easy_perform(c);
        long status = 0;
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        curl_easy_cleanup(c);
        q->c = NULL;
        r->status = status;
        int retry = 0;
        if (q->stopped) {
            set_err(r, "Stopped", "the transfer was stopped by its reader");
            st = TK_AGAIN;
        } else if (q->too_big) {
            set_err(r, "TooBig", "the answer is larger than its cap");
            st = TK_ETOOBIG;
        } else if (cc != CURLE_OK) {
            set_err(r, "NetworkError", "%s", curl_easy_strerror(cc));
            st = cc == CURLE_OPERATION_TIMEDOUT ? TK_ETIMEOUT : TK_ERROR;
            retry = 1;
        } else if (status >= 200 && status < 300) {
            /* CompleteMultipartUpload may answer 200 with an <Error> */
            if (q->body.len && tk_s3_parse_error(q->body.data, q->body.len, r->code, sizeof r->code,
                                                 r->message, sizeof r->message) == TK_OK) {
                st = TK_ERROR;
                retry = 1;
            } else {
                r->code[0] = r->message[0] = 0;
                snprintf(r->etag, sizeof r->etag, "%s", q->etag);
                st = TK_OK;
            }
        } else {
            if (!q->body.len ||
                tk_s3_parse_error(q->body.data, q->body.len, r->code, sizeof r->code, r->message,
                                  sizeof r->message) != TK_OK)
                set_err(r, status == 404 ? "NoSuchKey" : "HTTPError", "HTTP status %ld", status);
            st = status == 404 ? TK_ENOENT : TK_ERROR;
            retry = status >= 500;
        }
        if (!retry || attempt == s->max_attempts || q->got > 0)
            break;
        pause_ms(pause);
        pause = TK_MIN(pause * 2, 10000L);
    }
    curl_slist_free_all(hl);
    return st;
}

static void req_init(s3_req *q, const char *method)
{
    memset(q, 0, sizeof *q);
    q->method = method;
    q->fd = -1;
    tk_buf_init(&q->body, TK_S3_XML_MAX);
}

static void req_free(s3_req *q)
{
    tk_buf_free(&q->body);
    curl_slist_free_all(q->headers);
}

static tk_status add_header(s3_req *q, const char *name, const char *value)
{
    /* no CR/LF may reach the request (header injection) */
    if (strpbrk(name, "\r\n:") || strpbrk(value, "\r\n"))
        return TK_EINVAL;
    char *h = tk_asprintf("%s: %s", name, value);
    struct curl_slist *n = curl_slist_append(q->headers, h);
    free(h);
    if (!n)
        tk_oom();
    q->headers = n;
    return TK_OK;
}

static tk_status add_meta(s3_req *q, const char *content_type, const char *const *meta)
{
    if (content_type && add_header(q, "Content-Type", content_type) != TK_OK)
        return TK_EINVAL;
    for (const char *const *m = meta; m && *m; m++) {
        const char *colon = strchr(*m, ':');
        if (!colon || colon == *m || colon - *m > 100)
            return TK_EINVAL;
        char name[128];
        snprintf(name, sizeof name, "x-amz-meta-%.*s", (int)(colon - *m), *m);
        const char *v = colon + 1;
        while (*v == ' ')
            v++;
        if (add_header(q, name, v) != TK_OK)
            return TK_EINVAL;
    }
    return TK_OK;
}

static tk_status prepare(tk_s3 *s, s3_req *q, const char *method, const char *key,
                         const char *query, tk_s3_result *r)
{
    memset(r, 0, sizeof *r);
    req_init(q, method);
    if (key && !key_ok(key)) {
        set_err(r, "InvalidKey", "the key is empty, too long or starts with '/'");
        return TK_EINVAL;
    }
    if (build_url(s, key, query, q->url, sizeof q->url) != TK_OK) {
        set_err(r, "InvalidKey", "the URL would be too long");
        return TK_EINVAL;
    }
    return TK_OK;
}

tk_status tk_s3_put(tk_s3 *s, const char *key, const void *data, size_t len,
                    const char *content_type, const char *const *meta, tk_s3_result *r)
{
    s3_req q;
    tk_status st = prepare(s, &q, "PUT", key, NULL, r);
    if (st == TK_OK && add_meta(&q, content_type, meta) != TK_OK) {
        set_err(r, "InvalidMetadata", "a metadata header is malformed");
        st = TK_EINVAL;
    }
    if (st == TK_OK) {
        q.mem = data ? data : "";
        q.len = (int64_t)len;
        q.has_body = 1;
        tk_s3_sha256_hex(q.mem, len, q.sha);
        st = s3_do(s, &q, r);
    }
    req_free(&q);
    return st;
}

static tk_status put_single_fd(tk_s3 *s, const char *key, int fd, int64_t size, const char *sha,
                               const char *content_type, const char *const *meta, tk_s3_result *r)
{
    s3_req q;
    tk_status st = prepare(s, &q, "PUT", key, NULL, r);
    if (st == TK_OK && add_meta(&q, content_type, meta) != TK_OK) {
        set_err(r, "InvalidMetadata", "a metadata header is malformed");
        st = TK_EINVAL;
    }
    if (st == TK_OK) {
        q.fd = fd;
        q.off = 0;
        q.len = size;
        q.has_body = 1;
        if (sha && strlen(sha) == 64)
            memcpy(q.sha, sha, 65);
        else if (sha256_fd(fd, 0, size, q.sha) != TK_OK) {
            set_err(r, "ReadError", "cannot read the file to upload");
            st = TK_ERROR;
        }
        if (st == TK_OK)
            st = s3_do(s, &q, r);
    }
    req_free(&q);
    return st;
}

tk_status tk_s3_multipart_create(tk_s3 *s, const char *key, const char *content_type,
                                 const char *const *meta, char *upload_id, size_t idlen,
                                 tk_s3_result *r)
{
    s3_req q;
    tk_status st = prepare(s, &q, "POST", key, "uploads=", r);
    if (st == TK_OK && add_meta(&q, content_type, meta) != TK_OK) {
        set_err(r, "InvalidMetadata", "a metadata header is malformed");
        st = TK_EINVAL;
    }
    if (st == TK_OK)
        st = s3_do(s, &q, r);
    if (st == TK_OK) {
        tk_status ps = tk_s3_xml_text(q.body.data ? q.body.data : "", q.body.len, "UploadId",
                                      upload_id, idlen);
        if (ps != TK_OK || !*upload_id) {
            set_err(r, "BadAnswer", "the store's answer has no UploadId");
            st = TK_ERROR;
        }
    }
    req_free(&q);
    return st;
}

static tk_status upload_query(const char *upload_id, int part_no, char *out, size_t n)
{
    char eid[3 * 1024 + 1];
    if (tk_s3_encode(upload_id, 0, eid, sizeof eid) != TK_OK)
        return TK_EINVAL;
    int w = part_no > 0 ? snprintf(out, n, "partNumber=%d&uploadId=%s", part_no, eid)
                        : snprintf(out, n, "uploadId=%s", eid);
    return w > 0 && (size_t)w < n ? TK_OK : TK_ETOOBIG;
}

tk_status tk_s3_multipart_part(tk_s3 *s, const char *key, const char *upload_id, int part_no,
                               int fd, int64_t off, int64_t len, tk_s3_result *r)
{
    char query[4096];
    if (part_no < 1 || part_no > TK_S3_MAX_PARTS ||
        upload_query(upload_id, part_no, query, sizeof query) != TK_OK) {
        memset(r, 0, sizeof *r);
        set_err(r, "InvalidArgument", "bad part number or upload id");
        return TK_EINVAL;
    }
    s3_req q;
    tk_status st = prepare(s, &q, "PUT", key, query, r);
    if (st == TK_OK) {
        q.fd = fd;
        q.off = off;
        q.len = len;
        q.has_body = 1;
        if (sha256_fd(fd, off, len, q.sha) != TK_OK) {
            set_err(r, "ReadError", "cannot read the part to upload");
            st = TK_ERROR;
        } else {
            st = s3_do(s, &q, r);
        }
        if (st == TK_OK && !r->etag[0]) {
            set_err(r, "BadAnswer", "the store's answer to a part has no ETag");
            st = TK_ERROR;
        }
    }
    req_free(&q);
    return st;
}

tk_status tk_s3_multipart_complete(tk_s3 *s, const char *key, const char *upload_id,
                                   char *const *etags, int nparts, tk_s3_result *r)
{
    char query[4096];
    if (upload_query(upload_id, 0, query, sizeof query) != TK_OK) {
        memset(r, 0, sizeof *r);
        set_err(r, "InvalidArgument", "bad upload id");
        return TK_EINVAL;
    }
    s3_req q;
    tk_status st = prepare(s, &q, "POST", key, query, r);
    if (st != TK_OK) {
        req_free(&q);
        return st;
    }
    tk_buf x;
    tk_buf_init(&x, (size_t)nparts * 256 + 256);
    tk_buf_append_str(&x, "<CompleteMultipartUpload>");
    for (int i = 0; i < nparts; i++) {
        tk_buf_printf(&x, "<Part><PartNumber>%d</PartNumber><ETag>", i + 1);
        for (const char *e = etags[i]; *e; e++) {
            if (*e == '&')
                tk_buf_append_str(&x, "&amp;");
            else if (*e == '<')
                tk_buf_append_str(&x, "&lt;");
            else if (*e == '>')
                tk_buf_append_str(&x, "&gt;");
            else
                tk_buf_append_byte(&x, *e);
        }
        tk_buf_append_str(&x, "</ETag></Part>");
    }
    if (tk_buf_append_str(&x, "</CompleteMultipartUpload>") != TK_OK) {
        set_err(r, "InvalidArgument", "the part list is too long");
        st = TK_ETOOBIG;
    }
    if (st == TK_OK) {
        add_header(&q, "Content-Type", "application/xml");
        q.mem = x.data;
        q.len = (int64_t)x.len;
        q.has_body = 1;
        tk_s3_sha256_hex(x.data, x.len, q.sha);
        st = s3_do(s, &q, r);
        if (st == TK_OK && q.body.len &&
            tk_s3_xml_text(q.body.data, q.body.len, "ETag", r->etag, sizeof r->etag) != TK_OK)
            r->etag[0] = 0;
    }
    tk_buf_free(&x);
    req_free(&q);
    return st;
}

tk_status tk_s3_multipart_abort(tk_s3 *s, const char *key, const char *upload_id, tk_s3_result *r)
{
    char query[4096];
    if (upload_query(upload_id, 0, query, sizeof query) != TK_OK) {
        memset(r, 0, sizeof *r);
        set_err(r, "InvalidArgument", "bad upload id");
        return TK_EINVAL;
    }
    s3_req q;
    tk_status st = prepare(s, &q, "DELETE", key, query, r);
    if (st == TK_OK)
        st = s3_do(s, &q, r);
    req_free(&q);
    return st;
}

tk_status tk_s3_put_fd(tk_s3 *s, const char *key, int fd, int64_t size, const char *sha256_hex,
                       const char *content_type, const char *const *meta, tk_s3_result *r)
{
    if (size < s->multipart_min)
        return put_single_fd(s, key, fd, size, sha256_hex, content_type, meta, r);
    int64_t part = s->part_size;
    if ((size + part - 1) / part > TK_S3_MAX_PARTS) /* grow the parts, whole MiB */
        part = (((size + TK_S3_MAX_PARTS - 1) / TK_S3_MAX_PARTS + (1 << 20) - 1) >> 20) << 20;
    int nparts = (int)((size + part - 1) / part);
    char upload_id[1025];
    tk_status st =
        tk_s3_multipart_create(s, key, content_type, meta, upload_id, sizeof upload_id, r);
    if (st != TK_OK)
        return st;
    int attempts = r->attempts;
    char **etags = tk_calloc((size_t)nparts, sizeof *etags);
    for (int i = 0; i < nparts && st == TK_OK; i++) {
        int64_t off = (int64_t)i * part;
        st = tk_s3_multipart_part(s, key, upload_id, i + 1, fd, off, TK_MIN(part, size - off), r);
        attempts += r->attempts;
        if (st == TK_OK)
            etags[i] = tk_strdup(r->etag);
    }
    if (st == TK_OK) {
        st = tk_s3_multipart_complete(s, key, upload_id, etags, nparts, r);
        attempts += r->attempts;
    }
    if (st != TK_OK) {
        tk_s3_result ar;
        tk_s3_multipart_abort(s, key, upload_id, &ar); /* best effort; r keeps the cause */
        attempts += ar.attempts;
    }
    r->attempts = attempts;
    for (int i = 0; i < nparts; i++)
        free(etags[i]);
    free(etags);
    return st;
}

tk_status tk_s3_get(tk_s3 *s, const char *key, int64_t max_bytes,
                    int (*on_data)(const char *data, size_t len, void *ud), void *ud,
                    char *meta_sha256, tk_s3_result *r)
{
    s3_req q;
    tk_status st = prepare(s, &q, "GET", key, NULL, r);
    if (st == TK_OK) {
        q.on_data = on_data;
        q.ud = ud;
        q.max_bytes = max_bytes;
        st = s3_do(s, &q, r);
        if (meta_sha256)
            snprintf(meta_sha256, 65, "%s", st == TK_OK ? q.meta_sha : "");
    }
    req_free(&q);
    return st;
}

tk_status tk_s3_delete(tk_s3 *s, const char *key, tk_s3_result *r)
{
    s3_req q;
    tk_status st = prepare(s, &q, "DELETE", key, NULL, r);
    if (st == TK_OK)
        st = s3_do(s, &q, r);
    req_free(&q);
    return st == TK_ENOENT ? TK_OK : st; /* gone already is gone */
}

/* Appends "&name=value" (encoded; the first without '&') to a query in canonical order:
 * the callers pass parameters sorted by name. */
static tk_status q_add(char *q, size_t n, const char *name, const char *value)
{
    char ev[3 * 4096 + 1];
    if (tk_s3_encode(value, 0, ev, sizeof ev) != TK_OK)
        return TK_ETOOBIG;
    size_t l = strlen(q);
    int w = snprintf(q + l, n - l, "%s%s=%s", l ? "&" : "", name, ev);
    return w > 0 && (size_t)w < n - l ? TK_OK : TK_ETOOBIG;
}

tk_status tk_s3_list_objects(tk_s3 *s, const char *prefix, const char *token, int max_keys,
                             tk_s3_list *out, tk_s3_result *r)
{
    memset(out, 0, sizeof *out);
    char query[16384] = "", mk[16];
    snprintf(mk, sizeof mk, "%d", max_keys < 1 || max_keys > 1000 ? 1000 : max_keys);
    int qs = 0;
    if (token)
        qs |= q_add(query, sizeof query, "continuation-token", token);
    qs |= q_add(query, sizeof query, "list-type", "2");
    qs |= q_add(query, sizeof query, "max-keys", mk);
    if (prefix && *prefix)
        qs |= q_add(query, sizeof query, "prefix", prefix);
    s3_req q;
    tk_status st = prepare(s, &q, "GET", NULL, query, r);
    if (st == TK_OK && qs != TK_OK) {
        set_err(r, "InvalidArgument", "the prefix or token is too long");
        st = TK_EINVAL;
    }
    if (st == TK_OK)
        st = s3_do(s, &q, r);
    if (st == TK_OK && tk_s3_parse_list(q.body.data ? q.body.data : "", q.body.len, out) != TK_OK) {
        set_err(r, "BadAnswer", "the store's listing is not a ListBucketResult");
        st = TK_ERROR;
    }
    req_free(&q);
    return st;
}

tk_status tk_s3_list_uploads(tk_s3 *s, const char *prefix, const char *key_marker,
                             const char *upload_id_marker, tk_s3_uploads *out, tk_s3_result *r)
{
    memset(out, 0, sizeof *out);
    char query[16384] = "";
    int qs = 0;
    if (key_marker)
        qs |= q_add(query, sizeof query, "key-marker", key_marker);
    if (prefix && *prefix)
        qs |= q_add(query, sizeof query, "prefix", prefix);
    if (upload_id_marker)
        qs |= q_add(query, sizeof query, "upload-id-marker", upload_id_marker);
    qs |= q_add(query, sizeof query, "uploads", "");
    s3_req q;
    tk_status st = prepare(s, &q, "GET", NULL, query, r);
    if (st == TK_OK && qs != TK_OK) {
        set_err(r, "InvalidArgument", "the prefix or marker is too long");
        st = TK_EINVAL;
    }
    if (st == TK_OK)
        st = s3_do(s, &q, r);
    if (st == TK_OK &&
        tk_s3_parse_uploads(q.body.data ? q.body.data : "", q.body.len, out) != TK_OK) {
        set_err(r, "BadAnswer", "the store's answer is not a ListMultipartUploadsResult");
        st = TK_ERROR;
    }
    req_free(&q);
    return st;
}
