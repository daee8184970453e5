/* The experiment summary: per policy, replicas, distinct final digests, first divergent
 * step, test accuracy mean/std and median step time; <out>/summary.csv and a table on
 * stdout. Data path (DESIGN.md): harness/trace -> harness/compare + report. */
#ifndef DT_SUMMARY_H
#define DT_SUMMARY_H

#include "harness/config.h"
#include "harness/train.h"

#define DT_SUMMARY_HEADER \
    "policy,replicas,distinct_final_digests,first_divergent_step,test_acc_mean,test_acc_std," \
    "step_ms_median,hash_ms_median,completed,step_ms_vs_fast"

/* results[] holds n results in policy-major order (policy p, replica r at
 * p * exp->replicas + r); n may be short when the run was interrupted. */
enum dt_status dt_summary_write(const char *out_dir, const struct dt_experiment *exp,
                                const struct dt_replica_result *results, int n,
                                struct dt_error *err);

#endif
