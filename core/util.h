/* Small host utilities shared by the harness: folders, files, clocks, statistics. */
#ifndef DT_UTIL_H
#define DT_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

/* mkdir -p; the error names the path that could not be made. */
enum dt_status dt_mkdir_p(const char *path, struct dt_error *err);

/* Check that `dir` accepts a new file (create, write, remove a probe file). */
enum dt_status dt_dir_check_writable(const char *dir, struct dt_error *err);

/* Write parts[0..n_parts) one after another to `path` atomically: temporary file in the
 * same folder, fsync, rename (no temporary file is left on failure). */
enum dt_status dt_write_parts_atomic(const char *path, const void *const *parts,
                                     const size_t *sizes, int n_parts, struct dt_error *err);
/* Write `bytes` to `path` atomically: temporary file in the same folder, fsync, rename. */
enum dt_status dt_write_file_atomic(const char *path, const void *data, size_t bytes,
                                    struct dt_error *err);

/* Monotonic clock in seconds. */
double dt_now_s(void);

/* Current UTC time as ISO 8601 "2026-11-21T08:00:00Z". */
void dt_utc_iso8601(char *buf, size_t size);

/* Median of n doubles (copies; does not reorder `v`). n == 0 gives NaN. */
double dt_median(const double *v, int64_t n);

/* Write `s` as a JSON string literal (with quotes) into a malloc'ed buffer appender. */
struct dt_strbuf {
    char *data;
    size_t len, cap;
};
void dt_strbuf_printf(struct dt_strbuf *sb, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void dt_strbuf_json_string(struct dt_strbuf *sb, const char *s);
void dt_strbuf_free(struct dt_strbuf *sb);

#endif
