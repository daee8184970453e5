/* Reading and comparing traces (`detrain compare`, the summary's first divergent step). */
#ifndef DT_COMPARE_H
#define DT_COMPARE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"
#include "harness/hash.h"
#include "harness/trace.h"

struct dt_trace_row {
    int64_t step;
    char loss[40];
    char digest[DT_DIGEST_HEX];
};

/* Read a trace.csv fully; errors name the file and line. `path` may also be a folder
 * holding trace.csv. */
enum dt_status dt_trace_read(struct dt_trace_row **rows, int64_t *n, const char *path,
                             struct dt_error *err);

struct dt_trace_diff {
    bool diverged;
    int64_t first_step;  /* first step whose model digest differs; -1 when none */
    int64_t common_rows; /* rows compared */
    int64_t rows_a, rows_b;
    char tensor[64]; /* first differing tensor at first_step, when both have tensors.csv */
    char digest_a[DT_DIGEST_HEX], digest_b[DT_DIGEST_HEX];
};

/* Compare two traces step by step. A trace that ends early (the other goes on with equal
 * digests) counts as diverged with first_step = the first step the shorter one lacks.
 * Traces hashed at different steps are an error (DT_ERR_DATA). */
enum dt_status dt_trace_compare(struct dt_trace_diff *diff, const char *path_a,
                                const char *path_b, struct dt_error *err);

#endif
