/* The object store's XML answers (errors, ListObjectsV2 and
 * ListMultipartUploads pages, an UploadId): no crash, no leak, and what is
 * accepted holds: every key non-empty, at most TK_S3_KEY_MAX bytes, NUL-free;
 * a truncated listing has its continuation token. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/s3.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > TK_S3_XML_MAX)
        return 0;
    const char *x = (const char *)data;
    char code[64], msg[256], id[1025];
    if (tk_s3_parse_error(x, size, code, sizeof code, msg, sizeof msg) == TK_OK &&
        strlen(code) >= sizeof code)
        __builtin_trap();
    if (tk_s3_xml_text(x, size, "UploadId", id, sizeof id) == TK_OK && strlen(id) >= sizeof id)
        __builtin_trap();
    tk_s3_list l;
    if (tk_s3_parse_list(x, size, &l) == TK_OK) {
        for (size_t i = 0; i < l.n; i++)
            if (!l.items[i].key || strlen(l.items[i].key) > TK_S3_KEY_MAX || l.items[i].size < 0)
                __builtin_trap();
        if (l.truncated && !l.next_token)
            __builtin_trap();
        tk_s3_list_free(&l);
    }
    tk_s3_uploads u;
    if (tk_s3_parse_uploads(x, size, &u) == TK_OK) {
        for (size_t i = 0; i < u.n; i++)
            if (!u.items[i].key || !u.items[i].upload_id)
                __builtin_trap();
        tk_s3_uploads_free(&u);
    }
    return 0;
}
