/* CSV files of a result folder, written as they grow: created with their header line (or
 * opened to append to a resumed replica's file), flushed after each row group so that a
 * killed run leaves whole rows (docs/DESIGN.md "Faults"). Through dt_out_fopen
 * (harness/record/outdir.h): nothing outside the claimed folder is written. */
#ifndef DT_RECORD_CSV_H
#define DT_RECORD_CSV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/status.h"

/* Create dir/name (path written to path[0, size)) with its header line, flushed; or, with
 * `append`, open the existing file to add rows. */
enum dt_status dt_csv_create(FILE **f, char *path, size_t size, const char *dir, const char *name,
                             const char *header, bool append, struct dt_error *err);
/* Flush f; a failed write names the file. */
enum dt_status dt_csv_flush(FILE *f, const char *path, struct dt_error *err);

/* ---- reading: one reader for the result folder's CSV files ------------------------------ */

#define DT_CSV_MAX_FIELDS 24 /* summary.csv has 22 */

struct dt_csv_reader {
    FILE *f;
    const char *path;
    int64_t line;
    char *buf;
    size_t cap;
    bool eol;   /* the last line read ended with a newline (a line without one was cut) */
    bool empty; /* dt_csv_open(empty_ok): no complete header line */
    char *field[DT_CSV_MAX_FIELDS];
};

/* Open `path` (a regular file) and check its header line. *exists = false (and DT_OK)
 * when there is no such file: every reader treats a missing file as "not available".
 * empty_ok: a file with no complete header (zero bytes, or a header cut short by a killed
 * writer) gives c->empty and DT_OK. */
enum dt_status dt_csv_open(struct dt_csv_reader *c, const char *path, const char *header,
                           bool empty_ok, bool *exists, struct dt_error *err);
/* The next non-empty row, split into exactly `want` fields (c->field); *row = false at end of
 * file. A row with another count is DT_ERR_DATA naming file:line. A last row without its end
 * of line (cut short by a killed writer) is not returned: *row = false with c->eol false,
 * so the caller can say the file was cut. */
enum dt_status dt_csv_next(struct dt_csv_reader *c, int want, bool *row, struct dt_error *err);
void dt_csv_close(struct dt_csv_reader *c);
/* DT_ERR_DATA "<path>:<line>: <message>", the file's bytes in it made safe to print. */
enum dt_status dt_csv_fail(const struct dt_csv_reader *c, struct dt_error *err, const char *fmt,
                           ...) __attribute__((format(printf, 3, 4)));

#endif
