/* Batch normalisation's ops (nets/op_list.h, batchnorm_*; nets/batchnorm_elem.h): the
 * forward against a double-precision reference and, bit for bit, against the fixed order
 * it promises; the backward against central differences of the double reference (input,
 * gamma and beta); the same bits at every level and thread count; the CUDA kernels' order
 * (a block per channel, the in-place strided tree) emulated on the host against the CPU op;
 * the running statistics group by group. */
#include <math.h>
#include <stdint.h>

#include "determinism/reduce.h"
#include "nets/backend.h"
#include "nets/batchnorm_elem.h"
#include "tests/check.h"
#include "tests/op_helpers.h"

static float *falloc(int64_t n) { return malloc((size_t)n * sizeof(float)); }
static double *dalloc(int64_t n) { return malloc((size_t)n * sizeof(double)); }

/* Row counts: one short chunk, exactly one, several with a short last, a power of two. */
static const int64_t row_counts[] = {7, 32, 161, 256};
enum { N_ROWS = 4, BC = 5 };
static const float EPS = 1e-5f;

/* y = (x - mean) / sqrt(var + eps) gamma + beta over n rows of C, in double; mean, var out. */
static void bn_ref(double *y, double *mean, double *var, const double *x, const double *gamma,
                   const double *beta, int64_t n, int64_t C)
{
    for (int64_t c = 0; c < C; c++) {
        double s = 0, q = 0;
        for (int64_t r = 0; r < n; r++) s += x[r * C + c];
        const double mu = s / (double)n;
        for (int64_t r = 0; r < n; r++) q += (x[r * C + c] - mu) * (x[r * C + c] - mu);
        const double v = q / (double)n, rs = 1.0 / sqrt(v + (double)EPS);
        for (int64_t r = 0; r < n; r++)
            y[r * C + c] = (x[r * C + c] - mu) * rs * gamma[c] + beta[c];
        if (mean) mean[c] = mu;
        if (var) var[c] = v;
    }
}

/* L = sum w .* bn(x) in double. */
static double bn_loss(const double *x, const double *gamma, const double *beta, const float *w,
                      double *y, int64_t n, int64_t C)
{
    bn_ref(y, NULL, NULL, x, gamma, beta, n, C);
    double L = 0;
    for (int64_t i = 0; i < n * C; i++) L += (double)w[i] * y[i];
    return L;
}

static void to_double(double *d, const float *f, int64_t n)
{
    for (int64_t i = 0; i < n; i++) d[i] = f[i];
}

/* The inputs of one case: x with a channel offset (so the mean matters), gamma, beta. */
static void inputs(float *x, float *gamma, float *beta, int64_t n)
{
    for (int64_t r = 0; r < n; r++)
        for (int64_t c = 0; c < BC; c++) x[r * BC + c] = (float)(urand() * (1 + c) + 0.5 * c);
    fill(gamma, BC, 1.0);
    fill(beta, BC, 1.0);
}

DT_TEST(forward_matches_reference_and_order)
{
    for (int k = 0; k < N_ROWS; k++) {
        const int64_t n = row_counts[k], m = dt_reduce_chunks(n);
        float *x = falloc(n * BC), *y = falloc(n * BC), *y0 = falloc(n * BC), gamma[BC], beta[BC];
        float mean[BC], var[BC], mean0[BC], var0[BC];
        double *xd = dalloc(n * BC), *yd = dalloc(n * BC), gd[BC], bd[BC], md[BC], vd[BC];
        inputs(x, gamma, beta, n);
        to_double(xd, x, n * BC), to_double(gd, gamma, BC), to_double(bd, beta, BC);
        bn_ref(yd, md, vd, xd, gd, bd, n, BC);
        /* the promised order, written out per channel: the chunk partials, the tree, / n */
        float *p = falloc(m), want_mean[BC], want_var[BC];
        for (int64_t c = 0; c < BC; c++) {
            for (int64_t j = 0; j < m; j++) p[j] = dt_bn_chunk_sum(x, n, BC, j, c, 0.0f, false);
            dt_reduce_tree_vectors(p, m, 1, 1);
            want_mean[c] = p[0] / (float)n;
            for (int64_t j = 0; j < m; j++)
                p[j] = dt_bn_chunk_sum(x, n, BC, j, c, want_mean[c], true);
            dt_reduce_tree_vectors(p, m, 1, 1);
            want_var[c] = p[0] / (float)n;
        }
        fprintf(stderr, "%lld rows\n", (long long)n);
        bool first = true;
        for (int l = 0; l < DT_LEVEL_COUNT; l++)
            for (int threads = 1; threads <= 3; threads += 2) {
                struct dt_backend *be = cpu(threads);
                const struct dt_policy pol = level((enum dt_level)l);
                memset(y, 0xff, (size_t)(n * BC) * sizeof *y);
                CHECK_INT_EQ(
                    dt_batchnorm_forward(be, y, mean, var, x, gamma, beta, n, BC, EPS, &pol),
                    DT_OK);
                CHECK(memcmp(mean, want_mean, sizeof mean) == 0);
                CHECK(memcmp(var, want_var, sizeof var) == 0);
                check_close("batchnorm y", y, yd, n * BC, 1e-5, 1e-5);
                check_close("batchnorm mean", mean, md, BC, 1e-6, 1e-6);
                check_close("batchnorm var", var, vd, BC, 1e-6, 1e-5);
                if (first) {
                    memcpy(y0, y, (size_t)(n * BC) * sizeof *y);
                    memcpy(mean0, mean, sizeof mean), memcpy(var0, var, sizeof var);
                    first = false;
                } else { /* every level and thread count: the same bits */
                    CHECK(memcmp(y0, y, (size_t)(n * BC) * sizeof *y) == 0);
                }
                dt_backend_destroy(be);
            }
        free(x), free(y), free(y0), free(xd), free(yd), free(p);
    }
}

DT_TEST(backward_gradcheck)
{
    for (int k = 0; k < N_ROWS; k++) {
        const int64_t n = row_counts[k];
        float *x = falloc(n * BC), *w = falloc(n * BC), *y = falloc(n * BC), gamma[BC], beta[BC];
        float *dx = falloc(n * BC), *gx = falloc(n * BC), *dx0 = falloc(n * BC), mean[BC], var[BC];
        double *xd = dalloc(n * BC), *yd = dalloc(n * BC), *fdx = dalloc(n * BC), gd[BC], bd[BC];
        double fdg[BC], fdb[BC];
        inputs(x, gamma, beta, n);
        fill(w, n * BC, 1.0);
        to_double(xd, x, n * BC), to_double(gd, gamma, BC), to_double(bd, beta, BC);
        const double h = 1e-6;
        double *vs[3] = {xd, gd, bd}, *fds[3] = {fdx, fdg, fdb};
        const int64_t ns[3] = {n * BC, BC, BC};
        for (int t = 0; t < 3; t++)
            for (int64_t i = 0; i < ns[t]; i++) {
                const double keep = vs[t][i];
                vs[t][i] = keep + h;
                const double lp = bn_loss(xd, gd, bd, w, yd, n, BC);
                vs[t][i] = keep - h;
                const double lm = bn_loss(xd, gd, bd, w, yd, n, BC);
                vs[t][i] = keep;
                fds[t][i] = (lp - lm) / (2 * h);
            }
        fprintf(stderr, "%lld rows\n", (long long)n);
        for (int l = 0; l < DT_LEVEL_COUNT; l++)
            for (int threads = 1; threads <= 3; threads += 2) {
                struct dt_backend *be = cpu(threads);
                const struct dt_policy pol = level((enum dt_level)l);
                CHECK_INT_EQ(
                    dt_batchnorm_forward(be, y, mean, var, x, gamma, beta, n, BC, EPS, &pol),
                    DT_OK);
                memset(dx, 0xff, (size_t)(n * BC) * sizeof *dx);
                CHECK_INT_EQ(
                    dt_batchnorm_backward(be, dx, gx, w, x, mean, var, gamma, n, BC, EPS, &pol),
                    DT_OK);
                float dg[BC] = {0}, db[BC] = {0};
                double dgd[BC] = {0}, dbd[BC] = {0};
                for (int64_t i = 0; i < n * BC; i++) dgd[i % BC] += gx[i], dbd[i % BC] += w[i];
                for (int c = 0; c < BC; c++) dg[c] = (float)dgd[c], db[c] = (float)dbd[c];
                /* dx sums to ~0 per channel: compare against the largest magnitude */
                double scale = 0;
                for (int64_t i = 0; i < n * BC; i++) scale = fmax(scale, fabs(fdx[i]));
                check_close("batchnorm dL/dx", dx, fdx, n * BC, 2e-5 * scale + 1e-6, 1e-4);
                check_close("batchnorm dL/dgamma", dg, fdg, BC, 1e-5, 1e-4);
                check_close("batchnorm dL/dbeta", db, fdb, BC, 1e-5, 1e-4);
                if (l == 0 && threads == 1) memcpy(dx0, dx, (size_t)(n * BC) * sizeof *dx);
                else CHECK(memcmp(dx0, dx, (size_t)(n * BC) * sizeof *dx) == 0);
                dt_backend_destroy(be);
            }
        free(x), free(w), free(y), free(dx), free(gx), free(dx0), free(xd), free(yd), free(fdx);
    }
}

/* The CUDA kernels' order on the host: a channel's partials one by one (dt_bn_chunk_sum, as
 * a thread of its block computes them), the in-place strided tree (dt_reduce_tree_strided,
 * the block's levels) -- the CPU op's bits, which sums every channel at once, row by row, and
 * runs the compacted tree. And the strided tree alone equals the compacted one for every
 * count up to 600. */
DT_TEST(cuda_order_emulated)
{
    float a[600], b[600];
    for (int64_t m = 1; m <= 600; m++) {
        fill(a, m, 1000.0);
        memcpy(b, a, (size_t)m * sizeof *a);
        dt_reduce_tree_vectors(a, m, 1, 1);
        dt_reduce_tree_strided(b, m);
        if (memcmp(&a[0], &b[0], sizeof a[0]) != 0) {
            fprintf(stderr, "strided tree of %lld items: %.9g, compacted %.9g\n", (long long)m,
                    (double)b[0], (double)a[0]);
            dt_check_failures_++;
            break;
        }
    }
    const int64_t n = 1000, m = dt_reduce_chunks(n);
    float *x = falloc(n * BC), *dy = falloc(n * BC), *y = falloc(n * BC), *p = falloc(2 * m);
    float *dx = falloc(n * BC), *gx = falloc(n * BC), gamma[BC], beta[BC], mean[BC], var[BC];
    inputs(x, gamma, beta, n);
    fill(dy, n * BC, 1.0);
    struct dt_backend *be = cpu(2);
    const struct dt_policy pol = level(DT_LEVEL_PORTABLE);
    CHECK_INT_EQ(dt_batchnorm_forward(be, y, mean, var, x, gamma, beta, n, BC, EPS, &pol), DT_OK);
    CHECK_INT_EQ(dt_batchnorm_backward(be, dx, gx, dy, x, mean, var, gamma, n, BC, EPS, &pol),
                 DT_OK);
    for (int64_t c = 0; c < BC; c++) {
        for (int64_t j = 0; j < m; j++) p[j] = dt_bn_chunk_sum(x, n, BC, j, c, 0.0f, false);
        dt_reduce_tree_strided(p, m);
        const float mu = dt_bn_per_row(p[0], n);
        for (int64_t j = 0; j < m; j++) p[j] = dt_bn_chunk_sum(x, n, BC, j, c, mu, true);
        dt_reduce_tree_strided(p, m);
        const float v = dt_bn_per_row(p[0], n), rstd = dt_bn_rstd(v, EPS);
        CHECK(memcmp(&mu, &mean[c], sizeof mu) == 0 && memcmp(&v, &var[c], sizeof v) == 0);
        for (int64_t j = 0; j < m; j++)
            dt_bn_chunk_grad_sums(&p[j], &p[m + j], dy, x, n, BC, j, c, mu, rstd);
        dt_reduce_tree_strided(p, m);
        dt_reduce_tree_strided(p + m, m);
        const float A = dt_bn_per_row(p[0], n), Bs = dt_bn_per_row(p[m], n);
        for (int64_t r = 0; r < n; r++) {
            const int64_t i = r * BC + c;
            const float xhat = dt_bn_xhat(x[i], mu, rstd);
            const float want = dt_bn_grad(dy[i], xhat, dt_bn_grad_scale(gamma[c], rstd), A, Bs);
            const float out = dt_bn_out(x[i], mu, rstd, gamma[c], beta[c]);
            if (memcmp(&want, &dx[i], sizeof want) != 0 || memcmp(&out, &y[i], sizeof out) != 0) {
                fprintf(stderr, "row %lld channel %lld: the emulation differs from the CPU op\n",
                        (long long)r, (long long)c);
                dt_check_failures_++;
                r = n;
            }
        }
    }
    dt_backend_destroy(be);
    free(x), free(dy), free(y), free(p), free(dx), free(gx);
}

/* Running statistics: each group moves them in order, the variance unbiased by its own rows;
 * against the recurrence in double. Inference is the forward's formula on given statistics. */
DT_TEST(running_and_inference)
{
    enum { G = 3, BATCH = 10, PER = 4 };
    float mean[G * 2 * BC], var[G * 2 * BC], rm[BC], rv[BC];
    fill(mean, G * 2 * BC, 1.0);
    fill(var, G * 2 * BC, 1.0);
    for (int i = 0; i < G * 2 * BC; i++) var[i] = fabsf(var[i]);
    double wm[BC], wv[BC];
    for (int c = 0; c < BC; c++) rm[c] = 0.0f, rv[c] = 1.0f, wm[c] = 0, wv[c] = 1;
    const int64_t rows[G] = {3 * PER, 3 * PER, 4 * PER}; /* 10 examples in 3 groups */
    for (int g = 0; g < G; g++)
        for (int c = 0; c < BC; c++) {
            wm[c] = 0.9 * wm[c] + 0.1 * mean[g * 2 * BC + c];
            wv[c] = 0.9 * wv[c] +
                    0.1 * var[g * 2 * BC + BC + c] * (double)rows[g] / (double)(rows[g] - 1);
        }
    struct dt_backend *be = cpu(1);
    const struct dt_policy pol = level(DT_LEVEL_PORTABLE);
    CHECK_INT_EQ(
        dt_batchnorm_running(be, rm, rv, mean, var + BC, G, 2 * BC, BC, BATCH, PER, 0.1f, &pol),
        DT_OK);
    check_close("running mean", rm, wm, BC, 1e-6, 1e-5);
    check_close("running var", rv, wv, BC, 1e-6, 1e-5);
    /* inference on the running statistics: the forward's out formula per element */
    float x[3 * BC], y[3 * BC], gamma[BC], beta[BC];
    fill(x, 3 * BC, 2.0), fill(gamma, BC, 1.0), fill(beta, BC, 1.0);
    CHECK_INT_EQ(dt_batchnorm_inference(be, y, x, rm, rv, gamma, beta, 3, BC, EPS, &pol), DT_OK);
    for (int i = 0; i < 3 * BC; i++) {
        const int c = i % BC;
        const double want =
            ((double)x[i] - rm[c]) / sqrt((double)rv[c] + (double)EPS) * (double)gamma[c] +
            (double)beta[c];
        CHECK(fabs(y[i] - want) <= 1e-5 * (1 + fabs(want)));
    }
    dt_backend_destroy(be);
}

DT_TEST_MAIN(DT_CASE(forward_matches_reference_and_order), DT_CASE(backward_gradcheck),
             DT_CASE(cuda_order_emulated), DT_CASE(running_and_inference))
