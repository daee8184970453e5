/* CSV files of a result folder (harness/record/csv.h). */
#include "harness/record/csv.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <string.h>

#include "core/fileio.h"
#include "core/util.h"
#include "harness/record/outdir.h"

enum dt_status dt_csv_create(FILE **f, char *path, size_t size, const char *dir, const char *name,
                             const char *header, bool append, struct dt_error *err)
{
    snprintf(path, size, "%s/%s", dir, name);
    *f = dt_out_fopen(path, append, err);
    if (!*f) return DT_ERR_IO;
    if (!append && fprintf(*f, "%s\n", header) < 0) {
        fclose(*f);
        *f = NULL;
        return dt_error_set(err, DT_ERR_IO, "%s: write failed: %s", path, strerror(errno));
    }
    enum dt_status st = dt_csv_flush(*f, path, err);
    if (st != DT_OK) {
        fclose(*f);
        *f = NULL;
    }
    return st;
}

enum dt_status dt_csv_flush(FILE *f, const char *path, struct dt_error *err)
{
    if (fflush(f) != 0 || ferror(f))
        return dt_error_set(err, DT_ERR_IO, "%s: write failed: %s", path, strerror(errno));
    return DT_OK;
}

/* ---- reading (harness/record/csv.h) ------------------------------------------------------ */

enum dt_status dt_csv_fail(const struct dt_csv_reader *c, struct dt_error *err, const char *fmt,
                           ...)
{
    char msg[400], safe[800];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    dt_sanitize_message(safe, sizeof safe, msg); /* it echoes the file's bytes */
    return dt_error_set(err, DT_ERR_DATA, "%s:%" PRId64 ": %s", c->path, c->line, safe);
}

static int csv_getline(struct dt_csv_reader *c)
{
    ssize_t n = getline(&c->buf, &c->cap, c->f);
    if (n < 0) return 0;
    c->line++;
    c->eol = c->buf[n - 1] == '\n';
    while (n > 0 && (c->buf[n - 1] == '\n' || c->buf[n - 1] == '\r')) c->buf[--n] = '\0';
    return 1;
}

/* Open `path` (a regular file) and check its header line. *exists = false (and DT_OK)
 * when there is no such file: every reader treats a missing file as "not available".
 * empty_ok: a file with no complete header (zero bytes, or a header cut short by a killed
 * writer) gives c->empty and DT_OK. */
enum dt_status dt_csv_open(struct dt_csv_reader *c, const char *path, const char *header,
                           bool empty_ok, bool *exists, struct dt_error *err)
{
    memset(c, 0, sizeof *c);
    c->path = path;
    *exists = dt_path_exists(path);
    if (!*exists) return DT_OK;
    DT_FORWARD_IF_ERROR(dt_fopen_regular(&c->f, path, "a CSV file", err));
    if (!csv_getline(c)) {
        if (ferror(c->f))
            return dt_error_set(err, DT_ERR_IO, "%s: read failed: %s", path, strerror(errno));
        if (empty_ok) return c->empty = true, DT_OK;
        return dt_error_set(err, DT_ERR_DATA, "%s: empty file (no header)", path);
    }
    if (empty_ok && !c->eol && strncmp(header, c->buf, strlen(c->buf)) == 0)
        return c->empty = true, DT_OK;
    if (strcmp(c->buf, header) != 0)
        return dt_csv_fail(c, err, "unexpected header '%s' (expected '%s')", c->buf, header);
    return DT_OK;
}

/* The next non-empty row, split into exactly `want` fields; *row = false at end of file. */
enum dt_status dt_csv_next(struct dt_csv_reader *c, int want, bool *row, struct dt_error *err)
{
    *row = false;
    do {
        if (!csv_getline(c)) {
            if (ferror(c->f))
                return dt_error_set(err, DT_ERR_IO, "%s: read failed: %s", c->path,
                                    strerror(errno));
            return DT_OK;
        }
        if (!c->eol) return DT_OK; /* a last row cut by a kill: absent (c->eol says so) */
    } while (c->buf[0] == '\0');
    int n = 0;
    for (char *p = c->buf;; p++) {
        if (n < DT_CSV_MAX_FIELDS) c->field[n] = p;
        n++;
        p = strchr(p, ',');
        if (!p) break;
        *p = '\0';
    }
    if (n != want) return dt_csv_fail(c, err, "expected %d fields, found %d", want, n);
    *row = true;
    return DT_OK;
}

void dt_csv_close(struct dt_csv_reader *c)
{
    if (c->f) fclose(c->f);
    free(c->buf);
    memset(c, 0, sizeof *c);
}
