/* Traces: per replica, <out>/<policy>/replica-<k>/trace.csv ("step,loss,model_<kind>")
 * and, with hash.per_tensor, tensors.csv ("step,tensor,<kind>"): written and read here,
 * compared in harness/analyze/compare.h. The digest column's name is the digest kind
 * (hash.digest: sha256 or tree), so a trace file alone says what its digests are; files
 * from before it say "model_digest" (and tensors.csv "sha256" whatever the kind): their kind
 * is read from the run.json beside them. Rows are flushed as they are written, so an
 * interrupted run leaves a valid prefix.
 * Data path (docs/DESIGN.md): harness/hash -> harness/trace -> harness/compare. */
#ifndef DT_TRACE_H
#define DT_TRACE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "core/status.h"
#include "harness/record/hash.h"
#include "harness/setup/config.h"

/* the header of a trace written before the kind was named (either kind) */
#define DT_TRACE_HEADER_LEGACY "step,loss,model_digest"

/* trace.csv's and tensors.csv's header for a digest kind */
const char *dt_trace_header(enum dt_hash_digest kind);
const char *dt_tensors_header(enum dt_hash_digest kind);
/* "sha256" or "tree" */
const char *dt_digest_kind_name(enum dt_hash_digest kind);

/* The digest kind of a trace (a file, or a folder holding trace.csv): from its header, else
 * (a legacy header) from the replica's run.json beside it ("hash_digest"); -1 when neither
 * says (a legacy trace file alone, or an unreadable one). */
int dt_trace_digest_kind(const char *path);

struct dt_trace_writer {
    FILE *trace, *tensors; /* tensors is NULL without per-tensor digests */
    char trace_path[1100], tensors_path[1100];
};

/* Create (truncate) trace.csv, and tensors.csv when per_tensor, in `dir`, their headers
 * naming the digest kind. */
enum dt_status dt_trace_open(struct dt_trace_writer *t, const char *dir, bool per_tensor,
                             enum dt_hash_digest kind, struct dt_error *err);
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
