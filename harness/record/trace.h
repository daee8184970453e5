/* Traces: per replica, <out>/<policy>/replica-<k>/trace.csv ("step,loss,model_digest")
 * and, with hash.per_tensor, tensors.csv ("step,tensor,sha256"): written and read here,
 * compared in harness/analyze/compare.h. Rows are flushed as they are written, so an
 * interrupted run leaves a valid prefix.
 * Data path (docs/DESIGN.md): harness/hash -> harness/trace -> harness/compare. */
#ifndef DT_TRACE_H
#define DT_TRACE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "core/status.h"
#include "harness/record/hash.h"

#define DT_TRACE_HEADER "step,loss,model_digest"
#define DT_TENSORS_HEADER "step,tensor,sha256"

struct dt_trace_writer {
    FILE *trace, *tensors; /* tensors is NULL without per-tensor digests */
    char trace_path[1100], tensors_path[1100];
};

/* Create (truncate) trace.csv, and tensors.csv when per_tensor, in `dir`. */
enum dt_status dt_trace_open(struct dt_trace_writer *t, const char *dir, bool per_tensor,
                             struct dt_error *err);
/* One row; `loss` NaN is written as an empty field (step 0 has no loss). Flushed. */
enum dt_status dt_trace_write_row(struct dt_trace_writer *t, int64_t step, float loss,
                                  const char *digest_hex, struct dt_error *err);
enum dt_status dt_trace_write_tensor(struct dt_trace_writer *t, int64_t step, const char *name,
                                     const char *digest_hex, struct dt_error *err);
/* Flush the per-tensor rows of a step (called once per hashed step). */
enum dt_status dt_trace_flush(struct dt_trace_writer *t, struct dt_error *err);
enum dt_status dt_trace_close(struct dt_trace_writer *t, struct dt_error *err);

/* ---- reading ---------------------------------------------------------------------------- */

struct dt_trace_row {
    int64_t step;
    char loss[40];
    char digest[DT_DIGEST_HEX];
};

/* A trace argument resolved: a file, or a folder holding trace.csv. */
void dt_trace_file_path(char *out, size_t size, const char *path);
/* Read a trace.csv fully; errors name the file and line. `path` may also be a folder
 * holding trace.csv. A last row without its end of line (cut short by a killed writer) is
 * left out, as if absent; so is one of tensors.csv in dt_trace_read_tensors. */
enum dt_status dt_trace_read(struct dt_trace_row **rows, int64_t *n, const char *path,
                             struct dt_error *err);
/* tensors.csv beside a trace: the (name, digest) rows of `step`, in file order (at most
 * max); -1 with the reason in `why` (and *absent when there is no such file) when it cannot
 * be read. */
int dt_trace_read_tensors(const char *trace_arg, int64_t step, char names[][64],
                          char digests[][DT_DIGEST_HEX], int max, struct dt_error *why,
                          bool *absent);

#endif
