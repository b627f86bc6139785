/* The DOCX reader (zip central directory, bomb checks, inflate, WordprocessingML)
 * as the isolated helper runs it, on arbitrary bytes: no crash, the cap holds. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "app/utopia/docx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    utopia_blocks b;
    utopia_blocks_init(&b, 1 << 16);
    char err[256];
    (void)utopia_docx_extract(data, size, 1 << 20, &b, err, sizeof err);
    if (b.bytes > b.max_bytes)
        __builtin_trap();
    utopia_blocks_free(&b);
    /* the XML walker on its own */
    utopia_blocks_init(&b, 1 << 16);
    (void)utopia_docx_xml_to_blocks((const char *)data, size, &b);
    utopia_blocks_free(&b);
    return 0;
}
