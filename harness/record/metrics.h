/* Divergence and overhead metrics shared by run, report and bench (issue 6): prediction
 * churn, weight distances, log-spaced snapshot steps and a bootstrap interval for a
 * ratio of medians. Pure functions of their inputs (the bootstrap draws from a seeded
 * counter-based stream), so reports rebuild byte for byte. */
#ifndef DT_METRICS_H
#define DT_METRICS_H

#include <stdbool.h>
#include <stdint.h>

/* Fraction of the n examples on which two replicas' predicted classes differ
 * (disagreement, not agreement). NaN when n == 0. */
double dt_churn(const uint8_t *pred_a, const uint8_t *pred_b, int64_t n);

/* sqrt(sum (a_i - b_i)^2) and sqrt(sum a_i^2), accumulated in double in index order. */
double dt_l2_distance(const float *a, const float *b, int64_t n);
double dt_l2_norm(const float *a, int64_t n);

/* Up to `count` distinct steps in [1, steps], spaced evenly in log(step), always including
 * 1 and `steps`, ascending, written to out; returns how many (fewer when steps is small).
 * Where replicas keep weight snapshots for drift curves. */
int dt_log_spaced_steps(int64_t steps, int count, int64_t *out);

/* Median of b over median of a with a percentile bootstrap 95% interval. The samples are
 * pairs (a[i], b[i]) taken side by side (alternated steps), so pairs are resampled
 * together, `resamples` times, with indices drawn from the stream `seed`. inconclusive =
 * the interval contains 1.0. n >= 1. */
struct dt_ratio_ci {
    double ratio, lo, hi;
    bool inconclusive;
};
void dt_bootstrap_median_ratio(const double *a, const double *b, int64_t n, int resamples,
                               uint64_t seed, struct dt_ratio_ci *out);

#endif
