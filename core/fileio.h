/* Reading inputs safely: every file detrain reads back (config, checkpoint.bin,
 * config.json, trace.csv, tensors.csv, the report's CSVs, the dataset) must be a regular
 * file, is checked with fstat before a byte is read (a FIFO, /dev/zero or a folder is
 * refused at once, naming the file and what it is) and is read with a bound taken from
 * its size; and bytes taken from a file are escaped before they reach a terminal. */
#ifndef DT_FILEIO_H
#define DT_FILEIO_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

#include "core/status.h"

/* What a file of this st_mode is, for messages: "a FIFO (named pipe)", "a folder", "a
 * character device", "a symbolic link" (from lstat), "a regular file"... */
const char *dt_file_kind(mode_t mode);

/* Does something exist at `path` (stat follows links)? Is it a folder? */
bool dt_path_exists(const char *path);
bool dt_is_dir(const char *path);
/* Do two paths name the same file or folder? Resolved when both exist, else compared as
 * text. */
bool dt_same_path(const char *a, const char *b);
/* `path` made absolute and canonical whether or not it exists: the longest part of it that
 * exists resolved (links followed, as opening it would), the rest appended with "." and ".."
 * taken as written. False when it does not fit `size` or nothing of it can be resolved. */
bool dt_resolve_path(const char *path, char *out, size_t size);

/* Open `path` for reading when it is a regular file (a symbolic link to one is fine): it
 * is opened non-blocking, so a FIFO cannot hang the open, checked with fstat and then
 * made blocking. `what` names the file's role in messages ("the config", "a checkpoint").
 * On DT_OK *fd is open and *size (optional) is its st_size; otherwise *fd is -1 and the
 * error (DT_ERR_IO) names the file, what it is and what to do. */
enum dt_status dt_open_regular(int *fd, const char *path, const char *what, int64_t *size,
                               struct dt_error *err);

/* dt_open_regular as a stdio stream for line-by-line readers: a regular file ends, so
 * reading it to the end is bounded by its size. */
enum dt_status dt_fopen_regular(FILE **f, const char *path, const char *what, struct dt_error *err);

/* Up to n bytes from fd (retrying interrupted and short reads); *got says how many were
 * read (fewer at end of file). DT_ERR_IO names `path` when a read fails. */
enum dt_status dt_read_fd(int fd, void *buf, size_t n, size_t *got, const char *path,
                          struct dt_error *err);

/* A whole regular file into a malloc'ed buffer with a NUL added (the caller frees *data):
 * refused (DT_ERR_DATA) when st_size is above max_bytes, and never more than st_size bytes
 * are read. */
enum dt_status dt_read_regular_file(char **data, size_t *len, const char *path, const char *what,
                                    size_t max_bytes, struct dt_error *err);

/* Bytes from a file, made safe to print inside a message: printable ASCII and well-formed
 * UTF-8 text stay as they are, a backslash becomes "\\" and every other byte (control
 * bytes such as ESC, bytes that are not UTF-8, C1 controls and bidirectional overrides)
 * becomes "\xHH". The text is cut to fit `size` (NUL included) and to at most max_in input
 * bytes, "..." marking a cut. Returns out. */
const char *dt_escape_bytes(char *out, size_t size, const void *data, size_t n, size_t max_in);

/* dt_escape_bytes of a NUL-terminated string, at most DT_ESCAPE_MAX_IN bytes of it. */
#define DT_ESCAPE_MAX_IN 120
const char *dt_escape_str(char *out, size_t size, const char *s);

/* A path for a terminal: dt_escape_bytes of the whole of it (not cut at DT_ESCAPE_MAX_IN,
 * only to fit `size`). Returns out. */
const char *dt_escape_path(char *out, size_t size, const char *path);

/* A message for a terminal: control bytes other than newline and tab, and bytes that are
 * not UTF-8 text, escaped as "\xHH" in place of being written raw; backslashes are kept,
 * so text already escaped with dt_escape_bytes reads the same. */
void dt_sanitize_message(char *out, size_t size, const char *msg);

#endif
