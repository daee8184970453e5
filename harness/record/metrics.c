/* Divergence and overhead metrics (harness/record/metrics.h). */
#include "harness/record/metrics.h"

#include <math.h>
#include <stdlib.h>

#include "core/util.h"
#include "determinism/streams.h"

double dt_churn(const uint8_t *pred_a, const uint8_t *pred_b, int64_t n)
{
    if (n <= 0) return NAN;
    int64_t differ = 0;
    for (int64_t i = 0; i < n; i++) differ += pred_a[i] != pred_b[i];
    return (double)differ / (double)n;
}

double dt_l2_distance(const float *a, const float *b, int64_t n)
{
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)a[i] - (double)b[i];
        s += d * d;
    }
    return sqrt(s);
}

double dt_l2_norm(const float *a, int64_t n)
{
    double s = 0.0;
    for (int64_t i = 0; i < n; i++) s += (double)a[i] * (double)a[i];
    return sqrt(s);
}

int dt_log_spaced_steps(int64_t steps, int count, int64_t *out)
{
    if (steps < 1 || count < 1) return 0;
    if (count == 1) {
        out[0] = steps;
        return 1;
    }
    int k = 0;
    const double top = log((double)steps);
    for (int i = 0; i < count; i++) {
        int64_t s = i == count - 1 ? steps : (int64_t)llround(exp(top * i / (count - 1)));
        if (s < 1) s = 1;
        if (s > steps) s = steps;
        if (k == 0 || s > out[k - 1]) out[k++] = s;
    }
    return k;
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* The q-quantile of sorted v (linear interpolation between order statistics). */
static double quantile_sorted(const double *v, int64_t n, double q)
{
    double pos = q * (double)(n - 1);
    int64_t i = (int64_t)floor(pos);
    if (i >= n - 1) return v[n - 1];
    double f = pos - (double)i;
    return v[i] + f * (v[i + 1] - v[i]);
}

void dt_bootstrap_median_ratio(const double *a, const double *b, int64_t n, int resamples,
                               uint64_t seed, struct dt_ratio_ci *out)
{
    DT_ASSERT(n >= 1 && resamples >= 1);
    out->ratio = dt_median(b, n) / dt_median(a, n);
    double *ra = dt_xmalloc((size_t)n * sizeof *ra), *rb = dt_xmalloc((size_t)n * sizeof *rb);
    double *ratios = dt_xmalloc((size_t)resamples * sizeof *ratios);
    const uint64_t key = dt_stream_key(seed, 0, 0x6f7665726865ULL /* "overhe" */, 0, 0);
    uint64_t draw = 0;
    for (int r = 0; r < resamples; r++) {
        for (int64_t i = 0; i < n; i++) {
            int64_t j = (int64_t)dt_stream_below(key, draw++, (uint64_t)n);
            ra[i] = a[j];
            rb[i] = b[j];
        }
        ratios[r] = dt_median(rb, n) / dt_median(ra, n);
    }
    qsort(ratios, (size_t)resamples, sizeof *ratios, cmp_double);
    out->lo = quantile_sorted(ratios, resamples, 0.025);
    out->hi = quantile_sorted(ratios, resamples, 0.975);
    out->inconclusive = out->lo <= 1.0 && out->hi >= 1.0;
    free(ra);
    free(rb);
    free(ratios);
}
