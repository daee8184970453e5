/* The overhead protocol of `detrain run`, after the replicas: every policy whose controls
 * differ from the fast level's is alternated with fast step by step on one model
 * (dt_bench_alternate, harness/run/bench.h), report.overhead_warmup pairs first, then
 * report.overhead_samples timed pairs per policy into <out>/overhead.csv; `detrain report`
 * turns them into a median ratio with a bootstrap interval (docs/DESIGN.md "Overhead"). */
#ifndef DT_RUN_OVERHEAD_H
#define DT_RUN_OVERHEAD_H

#include <stdbool.h>

#include "core/status.h"
#include "harness/setup/config.h"
#include "harness/setup/data.h"
#include "nets/backend.h"

struct dt_dist;

/* Measure on `be` with the training split (train_set: its copy in backend memory, or
 * NULL); rank 0 writes out_dir/overhead.csv (a header alone when there is nothing to
 * measure); a stop signal ends it between steps, the unfinished policy's samples dropped. */
enum dt_status dt_overhead_measure(const struct dt_experiment *exp, const char *out_dir, bool quiet,
                                   const struct dt_dist *dist, struct dt_backend *be,
                                   const struct dt_split *train,
                                   const struct dt_resident *train_set, struct dt_error *err);

#endif
