/* `detrain report DIR`: the divergence and overhead report of an experiment folder,
 * rebuilt from what is on disk (config.json, traces, metrics, times, predictions,
 * snapshots, overhead.csv; harness/record/layout.h). The same folder always gives the same
 * bytes in report.md, summary.csv, cells.csv and drift.csv (no absolute paths, times or
 * host names in them), so a copied folder reproduces them exactly.
 *
 * Per cell (vary setting x policy, N replicas):
 *   distinct final digests; first divergent step (earliest over replica pairs, -1 = never)
 *   and first divergent tensor (from tensors.csv); test accuracy mean and sample std;
 *   pairwise prediction churn (share of test examples on which two replicas' predicted
 *   classes differ); pairwise L2 distance of the final weights, absolute and relative
 *   (distance / mean of the two weight norms); per-class accuracy spread (sample std of
 *   each class's accuracy across replicas: mean and max over classes); drift: mean
 *   pairwise L2 at each snapshot step; median step and hash time (times.csv).
 * Per policy (overhead.csv): median of policy_ms over median of fast_ms with a paired
 * bootstrap 95% interval (2000 resamples, seed 0), "inconclusive" when it holds 1.0.
 *
 * Files written into DIR:
 *   summary.csv  one row per cell (DT_REPORT_SUMMARY_HEADER)
 *   cells.csv    one row per cell and replica pair (DT_REPORT_CELLS_HEADER)
 *   drift.csv    one row per cell, replica pair and snapshot step (DT_REPORT_DRIFT_HEADER)
 *   report.md    tables, plus the plots embedded when gnuplot made them
 *   plots/       drift-<policy>.{svg,png} (one line per vary setting, log-log),
 *                accuracy.{svg,png} (accuracy of every replica per cell, mean +- std),
 *                overhead.{svg,png} (ratio bars with intervals), and the .gp/.dat inputs.
 * Empty numeric fields mean "not available" (e.g. one replica has no pairs). */
#ifndef DT_REPORT_H
#define DT_REPORT_H

#include <stdbool.h>
#include <stdint.h>

#include "core/status.h"

#define DT_REPORT_SUMMARY_HEADER                                                                   \
    "cell,vary,policy,replicas,completed,distinct_final_digests,first_divergent_step,"             \
    "first_divergent_tensor,test_acc_mean,test_acc_std,churn_mean,churn_max,l2_mean,"              \
    "l2_rel_mean,class_acc_std_mean,class_acc_std_max,step_ms_median,hash_ms_median,"              \
    "overhead_ratio,overhead_ci_lo,overhead_ci_hi,overhead_verdict"
#define DT_REPORT_CELLS_HEADER                                                                     \
    "cell,vary,policy,replica_a,replica_b,identical_final,first_divergent_step,"                   \
    "first_divergent_tensor,churn,l2,l2_rel,test_acc_a,test_acc_b"
#define DT_REPORT_DRIFT_HEADER "cell,vary,policy,step,replica_a,replica_b,l2,l2_rel"

struct dt_report_options {
    bool print_summary; /* the per-cell table on stdout */
    /* gnuplot binary: NULL = $DETRAIN_GNUPLOT if set, else "gnuplot" on PATH; "" or
     * "none" = no plots (report.md says so in one line, and so does stderr unless quiet) */
    const char *gnuplot;
    bool quiet;
};

/* Build the report of the experiment folder `dir`. Errors name the file at fault
 * (missing config.json, a malformed CSV line, a snapshot whose digest does not match its
 * trace). Replicas that failed or were interrupted are counted, and left out of the
 * metrics that need a completed run. */
enum dt_status dt_report_build(const char *dir, const struct dt_report_options *opt,
                               struct dt_error *err);

/* One row of summary.csv read back (dt_report_read_summary): what a matrix report
 * (harness/matrix.h) puts side by side. */
struct dt_report_summary_row {
    char cell[256], vary[64], policy[64];
    int replicas, completed;
    int distinct;       /* distinct final digests; -1 = not available (none completed) */
    bool has_first;     /* first_step is known (some pair of replicas was compared) */
    int64_t first_step; /* earliest divergent step; -1 = the replicas never differ */
    char first_tensor[64];
    double step_ms;             /* median step time; NaN = not available */
    double hash_ms;             /* median hash time of a hashed step; NaN = n/a */
    double acc_mean, acc_std;   /* test accuracy over the completed replicas; NaN = n/a */
    double churn_mean;          /* mean pairwise prediction churn; NaN = n/a */
    double class_std_mean;      /* mean over classes of the per-class accuracy's spread */
    double ratio, ci_lo, ci_hi; /* overhead vs fast and its 95% interval; NaN = n/a */
    char verdict[16];           /* baseline, conclusive, inconclusive, or "" */
};

/* Read DIR/summary.csv as dt_report_build writes it (header DT_REPORT_SUMMARY_HEADER):
 * *rows is malloc'ed (the caller frees it), one per cell in file order. Errors name the
 * file and line (DT_ERR_IO when it is missing, DT_ERR_DATA when malformed). */
enum dt_status dt_report_read_summary(const char *dir, struct dt_report_summary_row **rows,
                                      int *n_rows, struct dt_error *err);

#endif
