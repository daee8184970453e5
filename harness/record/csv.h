/* CSV files of a result folder, written as they grow: created with their header line (or
 * opened to append to a resumed replica's file), flushed after each row group so that a
 * killed run leaves whole rows (docs/DESIGN.md "Faults"). Through dt_out_fopen
 * (harness/record/outdir.h): nothing outside the claimed folder is written. */
#ifndef DT_RECORD_CSV_H
#define DT_RECORD_CSV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "core/status.h"

/* Create dir/name (path written to path[0, size)) with its header line, flushed; or, with
 * `append`, open the existing file to add rows. */
enum dt_status dt_csv_create(FILE **f, char *path, size_t size, const char *dir, const char *name,
                             const char *header, bool append, struct dt_error *err);
/* Flush f; a failed write names the file. */
enum dt_status dt_csv_flush(FILE *f, const char *path, struct dt_error *err);

#endif
