/* Trace files: writing them during training and reading/comparing them afterwards. */
#include "harness/record/trace.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "harness/record/csv.h"
#include "harness/record/outdir.h"

enum dt_status dt_trace_open(struct dt_trace_writer *t, const char *dir, bool per_tensor,
                             struct dt_error *err)
{
    memset(t, 0, sizeof *t);
    DT_FORWARD_IF_ERROR(dt_csv_create(&t->trace, t->trace_path, sizeof t->trace_path, dir,
                                      "trace.csv", DT_TRACE_HEADER, false, err));
    if (per_tensor)
        DT_FORWARD_IF_ERROR(dt_csv_create(&t->tensors, t->tensors_path, sizeof t->tensors_path, dir,
                                          "tensors.csv", DT_TENSORS_HEADER, false, err));
    return DT_OK;
}

static enum dt_status check_stream(FILE *f, const char *path, struct dt_error *err)
{
    if (ferror(f))
        return dt_error_set(err, DT_ERR_IO, "%s: write failed: %s", path,
                            errno ? strerror(errno) : "stream error");
    return DT_OK;
}

enum dt_status dt_trace_write_row(struct dt_trace_writer *t, int64_t step, float loss,
                                  const char *digest_hex, struct dt_error *err)
{
    if (isnan(loss) && step == 0) fprintf(t->trace, "%" PRId64 ",,%s\n", step, digest_hex);
    else fprintf(t->trace, "%" PRId64 ",%.9g,%s\n", step, (double)loss, digest_hex);
    if (fflush(t->trace) != 0)
        return dt_error_set(err, DT_ERR_IO, "%s: write failed: %s", t->trace_path, strerror(errno));
    return check_stream(t->trace, t->trace_path, err);
}

enum dt_status dt_trace_write_tensor(struct dt_trace_writer *t, int64_t step, const char *name,
                                     const char *digest_hex, struct dt_error *err)
{
    if (!t->tensors) return DT_OK;
    fprintf(t->tensors, "%" PRId64 ",%s,%s\n", step, name, digest_hex);
    return check_stream(t->tensors, t->tensors_path, err);
}

enum dt_status dt_trace_flush(struct dt_trace_writer *t, struct dt_error *err)
{
    if (t->tensors && fflush(t->tensors) != 0)
        return dt_error_set(err, DT_ERR_IO, "%s: write failed: %s", t->tensors_path,
                            strerror(errno));
    return DT_OK;
}

enum dt_status dt_trace_close(struct dt_trace_writer *t, struct dt_error *err)
{
    enum dt_status st = DT_OK;
    if (t->trace && fclose(t->trace) != 0)
        st = dt_error_set(err, DT_ERR_IO, "%s: close failed: %s", t->trace_path, strerror(errno));
    if (t->tensors && fclose(t->tensors) != 0 && st == DT_OK)
        st = dt_error_set(err, DT_ERR_IO, "%s: close failed: %s", t->tensors_path, strerror(errno));
    t->trace = t->tensors = NULL;
    return st;
}
