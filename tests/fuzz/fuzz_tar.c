/* The tar reader (what tusko restore reads), fed arbitrary bytes: every entry
 * it accepts has a non-empty NUL-terminated name and yields exactly its size. */
#include <stdint.h>
#include <string.h>

#include "lib/tar.h"

struct mem {
    const uint8_t *p;
    size_t n, at;
};

static ssize_t mem_read(void *ud, void *buf, size_t n)
{
    struct mem *m = ud;
    size_t k = m->n - m->at < n ? m->n - m->at : n;
    /* short reads too: at most 700 bytes at a time */
    if (k > 700)
        k = 700;
    memcpy(buf, m->p + m->at, k);
    m->at += k;
    return (ssize_t)k;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct mem m = {data, size, 0};
    tk_tar_reader r;
    tk_tar_reader_init(&r, mem_read, &m);
    tk_tar_entry e;
    for (int i = 0; i < 64 && tk_tar_next(&r, &e) == TK_OK; i++) {
        size_t len = strlen(e.name);
        if (len == 0 || len > TK_TAR_NAME_MAX)
            __builtin_trap();
        char buf[512];
        uint64_t got = 0;
        ssize_t k;
        while ((k = tk_tar_read(&r, buf, sizeof buf)) > 0)
            got += (uint64_t)k;
        if (k == 0 && got != e.size)
            __builtin_trap();
        if (k < 0)
            break;
    }
    return 0;
}
