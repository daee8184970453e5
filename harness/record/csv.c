/* CSV files of a result folder (harness/record/csv.h). */
#include "harness/record/csv.h"

#include <errno.h>
#include <string.h>

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
