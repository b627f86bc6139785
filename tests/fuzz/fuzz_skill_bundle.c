/* An uploaded skill (a zip or a SKILL.md). An accepted one keeps to every
 * limit, its paths are safe, its digest is its files', and its export parses
 * again to the same files and digest; a refused one leaves nothing behind and
 * says why. Seeds: tests/fuzz/corpus/fuzz_skill_bundle (good zips). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "app/skill_bundle.h"

static int path_safe(const char *p)
{
    if (!*p || p[0] == '/' || strchr(p, '\\') || strlen(p) > SKILL_BUNDLE_PATH_MAX)
        return 0;
    for (const char *c = p;;) {
        const char *e = strchr(c, '/');
        size_t n = e ? (size_t)(e - c) : strlen(c);
        if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
            return 0;
        if (!e)
            return 1;
        c = e + 1;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    skill_bundle b;
    char err[512] = "";
    if (skill_bundle_parse(data, size, &b, err, sizeof err) != TK_OK) {
        if (b.skill_md || b.files || b.warnings || !err[0])
            __builtin_trap();
        return 0;
    }
    if (b.nfiles >= SKILL_BUNDLE_ENTRIES_MAX || b.bytes > SKILL_BUNDLE_TOTAL_MAX ||
        !tk_skillmd_name_valid(b.name, strlen(b.name)))
        __builtin_trap();
    size_t bytes = b.skill_md_len;
    for (size_t i = 0; i < b.nfiles; i++) {
        if (!path_safe(b.files[i].path) || b.files[i].size > SKILL_BUNDLE_FILE_MAX)
            __builtin_trap();
        if (i && strcmp(b.files[i - 1].path, b.files[i].path) >= 0)
            __builtin_trap(); /* sorted, no duplicate */
        bytes += b.files[i].size;
    }
    if (bytes != b.bytes)
        __builtin_trap();
    char d[SKILLS_DIGEST_HEX];
    skills_digest(b.skill_md, b.skill_md_len, b.files, b.nfiles, d);
    if (strcmp(d, b.digest) != 0)
        __builtin_trap();
    tk_buf z;
    tk_buf_init(&z, (size_t)1 << 30);
    if (skill_bundle_zip(b.name, b.skill_md, b.skill_md_len, b.files, b.nfiles, &z) != TK_OK)
        __builtin_trap();
    skill_bundle again;
    if (skill_bundle_parse(z.data, z.len, &again, err, sizeof err) != TK_OK ||
        strcmp(again.digest, b.digest) != 0 || again.nfiles != b.nfiles)
        __builtin_trap();
    skill_bundle_free(&again);
    tk_buf_free(&z);
    skill_bundle_free(&b);
    return 0;
}
