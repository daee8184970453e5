/* `detrain bench`: step throughput of an experiment's first policy and the share of step
 * time spent hashing, measured side by side in one process (no timed tests). */
#ifndef DT_BENCH_H
#define DT_BENCH_H

#include <stdbool.h>

#include "harness/config.h"

struct dt_bench_options {
    int64_t steps;  /* measured steps (after warm-up) */
    int64_t warmup; /* unmeasured steps */
    /* optional: append "experiment,policy,what,base_ms,policy_ms,ratio" rows; the "step"
     * rows add ",ci_lo,ci_hi,conclusive|inconclusive" (paired bootstrap, 95%) */
    const char *csv_path;
    bool baseline_first;  /* overhead against the config's first policy instead of fast */
};

enum dt_status dt_bench_run(const struct dt_experiment *exp, const struct dt_bench_options *opt,
                            struct dt_error *err);

#endif
