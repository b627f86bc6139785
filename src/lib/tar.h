/*
 * tar.h — the POSIX ustar archive format, enough for tusko's backups: regular
 * files only, written and read as a stream.
 *
 * Writing: one header per file, then its bytes, padded to 512; two zero blocks
 * end the archive. Names up to 255 bytes (ustar's prefix + name split at a
 * '/'); sizes over 8 GiB in GNU's base-256 form.
 *
 *   tk_tar_writer w; tk_tar_writer_init(&w, fd);
 *   tk_tar_begin(&w, "manifest.json", len, 0600, time(NULL));
 *   tk_tar_write(&w, data, len);      // exactly `len` bytes in all, any pieces
 *   tk_tar_end(&w);                   // padding
 *   tk_tar_finish(&w);                // the end blocks
 *
 * Reading (the archive is input from outside: every header is checked —
 * checksum, octal or base-256 fields, type, a NUL-free name — and anything
 * else is refused):
 *
 *   tk_tar_reader r; tk_tar_reader_init(&r, read_fn, ud);
 *   tk_tar_entry e;
 *   while ((st = tk_tar_next(&r, &e)) == TK_OK) { ... tk_tar_read(&r, buf, n) ... }
 *   // st == TK_ENOENT at the end blocks; TK_EINVAL with r.err for a bad archive
 */
#ifndef TK_TAR_H
#define TK_TAR_H

#include <stdint.h>
#include <sys/types.h>

#include "lib/common.h"

#define TK_TAR_NAME_MAX 255

typedef struct {
    int fd;
    uint64_t left; /* bytes of the current entry still to write */
    uint64_t size;
    int err; /* errno of the first failed write, else 0 */
} tk_tar_writer;

void tk_tar_writer_init(tk_tar_writer *w, int fd);
/* TK_EINVAL for a name that is empty, too long, or cannot be split. */
tk_status tk_tar_begin(tk_tar_writer *w, const char *name, uint64_t size, unsigned mode,
                       int64_t mtime);
/* TK_EINVAL when more than the entry's size is written; TK_ERROR (w->err). */
tk_status tk_tar_write(tk_tar_writer *w, const void *data, size_t n);
/* TK_EINVAL when less than the entry's size was written. */
tk_status tk_tar_end(tk_tar_writer *w);
tk_status tk_tar_finish(tk_tar_writer *w);

/* read up to n bytes: >0 bytes read, 0 at the end, <0 an error */
typedef ssize_t (*tk_tar_read_fn)(void *ud, void *buf, size_t n);

typedef struct {
    char name[TK_TAR_NAME_MAX + 1];
    uint64_t size;
    unsigned mode;
    int64_t mtime;
} tk_tar_entry;

typedef struct {
    tk_tar_read_fn read;
    void *ud;
    uint64_t left; /* of the current entry's data */
    uint64_t pad;  /* padding after it */
    uint64_t offset;
    char err[160];
} tk_tar_reader;

void tk_tar_reader_init(tk_tar_reader *r, tk_tar_read_fn read, void *ud);
/* The next entry (the rest of the current one is skipped): TK_OK, TK_ENOENT at
 * the end of the archive, TK_EINVAL (r->err says what and at which offset) for
 * anything but a well-formed regular file, a truncated archive included. */
tk_status tk_tar_next(tk_tar_reader *r, tk_tar_entry *e);
/* Up to n bytes of the current entry: the count, 0 at its end, -1 when the
 * archive is cut short or cannot be read (r->err). */
ssize_t tk_tar_read(tk_tar_reader *r, void *buf, size_t n);

/* A tk_tar_read_fn over a file descriptor (ud is a pointer to the int). */
ssize_t tk_tar_read_fd(void *ud, void *buf, size_t n);

#endif
