/* Every value a replica folder records per step, compared with another replica folder's
 * (`detrain reproduce`, harness/analyze/reproduce.h): what a result promises at `portable`
 * is not only its model digests but every number computed from the same bits.
 *
 * Compared, for each row the recorded side (a) holds:
 *   trace.csv        the loss of every hashed step (the digests: dt_trace_compare);
 *   tensors.csv      every (step, tensor, digest) row, in order;
 *   metrics.csv      every evaluation row (test_loss, test_acc, test_ece, ...), by step;
 *   run.json         final_model_digest, steps_completed, test_loss, test_accuracy,
 *                    test_ece (of a completed replica);
 *   predictions.csv, sample.txt   byte for byte.
 * Not compared: times.csv (timings), algos.csv (which library algorithm ran: a property of
 * the machine), the experiment's reports (summary.csv, report.md: derived from the above
 * and from timings).
 * Numbers are compared as the values they print (strtod; "nan" equals "nan"), so a result
 * whose file formats a value with other digits of the same float still agrees. */
#ifndef DT_VALUES_H
#define DT_VALUES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/status.h"

struct dt_values_diff {
    bool differs;   /* a value the recorded side holds is another here */
    int64_t step;   /* its step (-1: a value of no step, run.json's or a file's) */
    char what[400]; /* "loss at step 17: 0.4821 recorded, 0.4822 here" */
    int n_compared; /* values compared, for the verdict line */
};

/* Compare every value `rec` (the recorded replica folder) holds with `now`'s (its rerun).
 * `upto`: rows of steps past it are not compared (a rerun stopped there); -1: all. Errors:
 * a file of `rec` that cannot be read or is malformed (DT_ERR_DATA / DT_ERR_IO, naming it). */
enum dt_status dt_values_compare(struct dt_values_diff *d, const char *rec, const char *now,
                                 int64_t upto, struct dt_error *err);

#endif
