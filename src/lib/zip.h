/*
 * zip.h — a zip archive writer (PKWARE APPNOTE 6.3), enough for a user's
 * export: regular files, streamed into a seekable file descriptor, each
 * deflated (stored when deflating would not help), ZIP64 where an entry, an
 * offset or the count needs it.
 *
 *   tk_zip_writer w; tk_zip_writer_init(&w, fd);
 *   tk_zip_begin(&w, "manifest.json", len, time(NULL));
 *   tk_zip_write(&w, data, len);   // exactly `len` bytes in all, any pieces
 *   tk_zip_end(&w);                // sizes and CRC-32 written back into its header
 *   tk_zip_finish(&w);             // the central directory
 *   tk_zip_writer_free(&w);
 *
 * An entry's compressed size and CRC are known only once its bytes are
 * written, so its local header is written first with room for them and
 * patched afterwards with pwrite (hence a seekable fd: a regular file, empty
 * when given, as offsets count from its start). No
 * data descriptors, so every reader can stream the archive. Names are UTF-8
 * (the language encoding flag is set), 1 to TK_ZIP_NAME_MAX bytes, relative,
 * without "..", NUL or backslashes. Times are stored in MS-DOS form (UTC, two
 * seconds apart) and as an extended timestamp (0x5455).
 */
#ifndef TK_ZIP_H
#define TK_ZIP_H

#include <stddef.h>
#include <stdint.h>
#include <zlib.h>

#include "lib/common.h"

#define TK_ZIP_NAME_MAX 1024

typedef struct tk_zip_dirent tk_zip_dirent;

typedef struct {
    int fd;
    uint64_t off; /* bytes written so far: the next header's offset */
    tk_zip_dirent *dir;
    size_t n, cap;
    /* the entry being written */
    int open;
    uint64_t left; /* bytes of it still to come */
    z_stream zs;
    int deflating;
    int err; /* errno of the first failed write (0: none, or ENOMEM) */
} tk_zip_writer;

/* Entries and offsets from this size on use ZIP64 fields (0xFFFFFFFF; tests
 * lower it to exercise ZIP64 with small files). */
extern uint64_t tk_zip_zip64_at;

void tk_zip_writer_init(tk_zip_writer *w, int fd);
/* TK_EINVAL for a bad name or while an entry is open; TK_ERROR (w->err). */
tk_status tk_zip_begin(tk_zip_writer *w, const char *name, uint64_t size, int64_t mtime);
/* TK_EINVAL when more than the entry's size is written; TK_ERROR (w->err). */
tk_status tk_zip_write(tk_zip_writer *w, const void *data, size_t n);
/* TK_EINVAL when less than the entry's size was written; TK_ERROR (w->err). */
tk_status tk_zip_end(tk_zip_writer *w);
/* The central directory and its end records. TK_EINVAL while an entry is open. */
tk_status tk_zip_finish(tk_zip_writer *w);
void tk_zip_writer_free(tk_zip_writer *w);

#endif
