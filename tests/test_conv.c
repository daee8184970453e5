/* CPU convolution and max pooling (NHWC, HWIO): forwards against double-precision
 * references; every backward against central finite differences of those references, at
 * every level and under the single nondeterministic controls; the max-pool tie and NaN
 * rules; bits independent of the thread count; the forced-order negative controls
 * (`reduction: unordered` and `atomics: float` change bits with the order, `fixed` and
 * `fixed_point` do not); a whole LeNet against a double-precision reference; shape
 * validation. */
#include <math.h>
#include <stdint.h>

#include "determinism/fixed_point.h"
#include "determinism/reduce.h"
#include "nets/backend.h"
#include "nets/cpu/conv_dnnl.h"
#include "nets/model.h"
#include "tests/check.h"
#include "tests/op_helpers.h"

static void to_double(double *d, const float *f, int64_t n)
{
    for (int64_t i = 0; i < n; i++) d[i] = f[i];
}
/* Fill with NaN bits, so an op that leaves an element unwritten is caught. */
static void poison(void *p, size_t bytes) { memset(p, 0xff, bytes); }

static float *falloc(int64_t n) { return malloc((size_t)n * sizeof(float)); }
static double *dalloc(int64_t n) { return malloc((size_t)n * sizeof(double)); }

/* Portable with one control switched to its nondeterministic value. */
static struct dt_policy portable_with(int reduction_unordered, int atomics_float)
{
    struct dt_policy p = level(DT_LEVEL_PORTABLE);
    if (reduction_unordered) p.reduction = DT_REDUCTION_UNORDERED;
    if (atomics_float) p.atomics = DT_ATOMICS_FLOAT;
    DT_ASSERT(dt_policy_auto_name(&p));
    return p;
}

/* The three levels, then portable+atomics=float, portable+reduction=unordered and
 * portable+math=exact (the im2col products exact in integers). */
enum { N_GRAD_POLICIES = DT_LEVEL_COUNT + 3 };
static void grad_policies(struct dt_policy out[N_GRAD_POLICIES])
{
    for (int l = 0; l < DT_LEVEL_COUNT; l++) out[l] = level((enum dt_level)l);
    out[DT_LEVEL_COUNT] = portable_with(0, 1);
    out[DT_LEVEL_COUNT + 1] = portable_with(1, 0);
    out[DT_LEVEL_COUNT + 2] = level(DT_LEVEL_PORTABLE);
    out[DT_LEVEL_COUNT + 2].math = DT_MATH_EXACT;
    DT_ASSERT(dt_policy_auto_name(&out[DT_LEVEL_COUNT + 2]));
}

/* Number of elements whose bits differ. */
static int64_t bits_differ(const float *a, const float *b, int64_t n)
{
    int64_t d = 0;
    for (int64_t i = 0; i < n; i++) d += memcmp(&a[i], &b[i], sizeof(float)) != 0;
    return d;
}

/* ---- double-precision references ------------------------------------------------------ */

/* Direct loops, zero padding: y[b,oh,ow,k] = bias[k] + sum x[b,ih,iw,c] w[kh,kw,c,k]. */
static void conv_ref(double *y, const double *x, const double *w, const double *bias,
                     const struct dt_conv2d_shape *s)
{
    for (int64_t b = 0; b < s->B; b++)
        for (int64_t oh = 0; oh < s->OH; oh++)
            for (int64_t ow = 0; ow < s->OW; ow++)
                for (int64_t k = 0; k < s->K_out; k++) {
                    double acc = bias[k];
                    for (int64_t kh = 0; kh < s->KH; kh++) {
                        int64_t ih = oh * s->stride - s->pad + kh;
                        if (ih < 0 || ih >= s->H) continue;
                        for (int64_t kw = 0; kw < s->KW; kw++) {
                            int64_t iw = ow * s->stride - s->pad + kw;
                            if (iw < 0 || iw >= s->W) continue;
                            for (int64_t c = 0; c < s->C; c++)
                                acc += x[((b * s->H + ih) * s->W + iw) * s->C + c] *
                                       w[((kh * s->KW + kw) * s->C + c) * s->K_out + k];
                        }
                    }
                    y[((b * s->OH + oh) * s->OW + ow) * s->K_out + k] = acc;
                }
}

/* Max over the in-image cells of each window in (kh, kw) order: the first maximum wins
 * (a later equal value does not replace it), a NaN wins and ends the scan; padding cells
 * are skipped. argmax (optional) = ih * W + iw. */
static void pool_ref(double *y, int32_t *argmax, const double *x, const struct dt_pool2d_shape *s)
{
    for (int64_t b = 0; b < s->B; b++)
        for (int64_t oh = 0; oh < s->OH; oh++)
            for (int64_t ow = 0; ow < s->OW; ow++)
                for (int64_t c = 0; c < s->C; c++) {
                    int found = 0;
                    double best = 0;
                    int64_t arg = -1;
                    for (int64_t kh = 0; kh < s->K; kh++) {
                        int64_t ih = oh * s->stride - s->pad + kh;
                        if (ih < 0 || ih >= s->H) continue;
                        for (int64_t kw = 0; kw < s->K; kw++) {
                            int64_t iw = ow * s->stride - s->pad + kw;
                            if (iw < 0 || iw >= s->W) continue;
                            double v = x[((b * s->H + ih) * s->W + iw) * s->C + c];
                            if (!found || isnan(v) || v > best) {
                                best = v;
                                arg = ih * s->W + iw;
                                found = 1;
                            }
                            if (isnan(best)) goto done;
                        }
                    }
                done:
                    DT_ASSERT(found);
                    int64_t o = ((b * s->OH + oh) * s->OW + ow) * s->C + c;
                    y[o] = best;
                    if (argmax) argmax[o] = (int32_t)arg;
                }
}

/* The subgradient the rule defines: every dy term to its window's first maximum. */
static void pool_backward_ref(double *dx, const double *dy, const int32_t *argmax,
                              const struct dt_pool2d_shape *s)
{
    const int64_t n_img = s->H * s->W * s->C, n_out = s->OH * s->OW * s->C;
    memset(dx, 0, (size_t)(s->B * n_img) * sizeof(double));
    for (int64_t b = 0; b < s->B; b++)
        for (int64_t i = 0; i < n_out; i++)
            dx[b * n_img + argmax[b * n_out + i] * s->C + i % s->C] += dy[b * n_out + i];
}

/* ---- geometries ------------------------------------------------------------------------ */

static const struct conv_geom conv_geoms[] = {
    {3, 7, 6, 2, 5, 3, 3, 1, 1}, /* 3x3 same padding */
    {2, 8, 7, 2, 3, 3, 3, 2, 0}, /* stride 2, no padding; last row/column unused */
    {2, 9, 9, 1, 6, 5, 5, 1, 2}, /* LeNet's first layer on a small image */
    {2, 5, 4, 3, 4, 1, 1, 1, 0}, /* 1x1 */
    {2, 6, 5, 3, 4, 3, 2, 1, 1}, /* C = 3, KH != KW */
    {2, 9, 8, 2, 3, 3, 3, 2, 1}, /* stride 2 with padding */
    {2, 2, 2, 2, 3, 3, 3, 1, 1}, /* kernel larger than the image (fits with padding) */
};
enum { N_CONV_GEOMS = sizeof conv_geoms / sizeof conv_geoms[0] };

static void print_conv(const struct dt_conv2d_shape *s)
{
    fprintf(stderr,
            "conv B=%lld H=%lld W=%lld C=%lld K_out=%lld KH=%lld KW=%lld stride=%lld "
            "pad=%lld -> %lldx%lld\n",
            (long long)s->B, (long long)s->H, (long long)s->W, (long long)s->C, (long long)s->K_out,
            (long long)s->KH, (long long)s->KW, (long long)s->stride, (long long)s->pad,
            (long long)s->OH, (long long)s->OW);
}

static const struct pool_geom pool_geoms[] = {
    {2, 8, 6, 3, 2, 2, 0}, /* 2x2 stride 2, even sizes */
    {2, 7, 9, 3, 2, 2, 0}, /* odd sizes: last row/column dropped */
    {2, 8, 8, 3, 3, 2, 1}, /* overlapping 3x3 stride 2 pad 1, even */
    {2, 7, 9, 2, 3, 2, 1}, /* the same, odd */
    {2, 6, 7, 2, 3, 1, 0}, /* heavily overlapping */
    {2, 7, 8, 2, 3, 1, 0},
    {2, 5, 4, 2, 3, 1, 2},  /* pad 2: border windows hold a single image row/column */
    {2, 7, 9, 19, 3, 2, 1}, /* 19 channels: the CPU's block of 16 at once, then 3 alone */
};
enum { N_POOL_GEOMS = sizeof pool_geoms / sizeof pool_geoms[0] };

static void print_pool(const struct dt_pool2d_shape *s)
{
    fprintf(stderr,
            "maxpool B=%lld H=%lld W=%lld C=%lld K=%lld stride=%lld pad=%lld -> %lldx%lld\n",
            (long long)s->B, (long long)s->H, (long long)s->W, (long long)s->C, (long long)s->K,
            (long long)s->stride, (long long)s->pad, (long long)s->OH, (long long)s->OW);
}

/* Distinct values, half of them negative (so a zero padding cell would win if padding
 * took part): a random permutation of 0..n-1, shifted and scaled. Gap 1/n. */
static void fill_distinct(float *x, int64_t n)
{
    int64_t *perm = malloc((size_t)n * sizeof *perm);
    for (int64_t i = 0; i < n; i++) perm[i] = i;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)((urand() + 1.0) * 0.5 * (double)(i + 1));
        if (j > i) j = i;
        int64_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (int64_t i = 0; i < n; i++) x[i] = (float)((double)(perm[i] - n / 2) / (double)n);
    free(perm);
}

/* ---- convolution: forward and gradients ------------------------------------------------ */

DT_TEST(conv2d_forward_matches_double)
{
    for (int gi = 0; gi < N_CONV_GEOMS; gi++) {
        struct dt_conv2d_shape s = conv_shape(&conv_geoms[gi]);
        const int64_t nx = conv_nx(&s), nw = conv_nw(&s), ny = conv_ny(&s);
        float *x = falloc(nx), *w = falloc(nw), *bias = falloc(s.K_out), *y = falloc(ny);
        double *xd = dalloc(nx), *wd = dalloc(nw), *bd = dalloc(s.K_out), *ref = dalloc(ny);
        fill(x, nx, 1.0);
        fill(w, nw, 0.5);
        fill(bias, s.K_out, 0.1);
        to_double(xd, x, nx);
        to_double(wd, w, nw);
        to_double(bd, bias, s.K_out);
        conv_ref(ref, xd, wd, bd, &s);
        print_conv(&s);
        for (int l = 0; l < DT_LEVEL_COUNT; l++) {
            struct dt_backend *be = cpu(2);
            struct dt_policy pol = level((enum dt_level)l);
            poison(y, (size_t)ny * sizeof *y);
            CHECK(dt_conv2d_forward(be, y, x, w, bias, &s, &pol) == DT_OK);
            fprintf(stderr, "  level %s\n", pol.name);
            check_close("conv forward", y, ref, ny, 1e-5, 1e-4);
            dt_backend_destroy(be);
        }
        free(x), free(w), free(bias), free(y), free(xd), free(wd), free(bd), free(ref);
    }
}

/* Patch element k = (kh, kw, c) of output row r = (b, oh, ow): x there, or 0 outside. */
static float patch_at(const float *x, const struct dt_conv2d_shape *s, int64_t r, int64_t k)
{
    const int64_t b = r / (s->OH * s->OW), oh = r / s->OW % s->OH, ow = r % s->OW;
    const int64_t kh = k / (s->KW * s->C), kw = k / s->C % s->KW, c = k % s->C;
    const int64_t ih = oh * s->stride - s->pad + kh, iw = ow * s->stride - s->pad + kw;
    if (ih < 0 || ih >= s->H || iw < 0 || iw >= s->W) return 0.0f;
    return x[((b * s->H + ih) * s->W + iw) * s->C + c];
}

/* The ordered forward's bits, written out serially here: y = (sum over (kh, kw, c)
 * ascending of x * w, from +0, out-of-image cells 0) + bias, each product and each add one
 * float rounding. Every level whose math is `portable` (not fast, not exact) gives these
 * bits on 1 and 2 threads, whichever kernel conv.c takes for the shape (the direct tiles
 * for stride 1, im2col and the ordered product otherwise), on shapes that cut the tiles
 * (OW and the padded rows not multiples of 16, K_out not a multiple of 6). */
static void conv_ordered_def(float *y, const float *x, const float *w, const float *bias,
                             const struct dt_conv2d_shape *s)
{
    const int64_t rows = s->B * s->OH * s->OW, Kp = s->KH * s->KW * s->C, K = s->K_out;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t o = 0; o < K; o++) {
            float acc = 0.0f;
            for (int64_t k = 0; k < Kp; k++) acc = acc + patch_at(x, s, r, k) * w[k * K + o];
            y[r * K + o] = acc + bias[o];
        }
}

/* The CPU op's bits against its definition (conv_*_def) at every level `takes` admits, on
 * 1 and 2 threads, over the shared geometries and `more`; inputs a (x, or dy for
 * backward-data) and b (w, or dy for the weight gradient). */
enum conv_op { CONV_FORWARD, CONV_WGRAD, CONV_DX };
static void conv_wgrad_fixed_def(float *dw, const float *x, const float *dy,
                                 const struct dt_conv2d_shape *s);
static void conv_dx_fixed_def(float *dx, const float *dy, const float *w,
                              const struct dt_conv2d_shape *s);
static bool conv_op_takes(enum conv_op op, const struct dt_policy *pol)
{
    if (dt_math_fast(pol)) /* an order asked of the weight gradient: the same bits */
        return op == CONV_WGRAD && dt_reduction_ordered(pol) && !dt_reduction_library(pol, false);
    if (op == CONV_FORWARD) return !dt_math_exact(pol);
    return op == CONV_WGRAD ? dt_reduction_ordered(pol) : dt_atomics_exact(pol);
}

static void check_conv_bits(enum conv_op op, const struct conv_geom *more, int n_more)
{
    int checked = 0;
    for (int gi = 0; gi < N_CONV_GEOMS + n_more; gi++) {
        struct dt_conv2d_shape s =
            conv_shape(gi < N_CONV_GEOMS ? &conv_geoms[gi] : &more[gi - N_CONV_GEOMS]);
        const int64_t nx = conv_nx(&s), nw = conv_nw(&s), ny = conv_ny(&s);
        const int64_t na = op == CONV_DX ? ny : nx, nb = op == CONV_WGRAD ? ny : nw;
        const int64_t nout = op == CONV_FORWARD ? ny : op == CONV_WGRAD ? nw : nx;
        float *a = falloc(na), *b = falloc(nb), *bias = falloc(s.K_out), *out = falloc(nout);
        float *def = falloc(nout);
        fill(a, na, 1.0);
        fill(b, nb, 0.5);
        fill(bias, s.K_out, 0.1);
        if (op == CONV_FORWARD) conv_ordered_def(def, a, b, bias, &s);
        else if (op == CONV_WGRAD) conv_wgrad_fixed_def(def, a, b, &s);
        else conv_dx_fixed_def(def, a, b, &s);
        print_conv(&s);
        for (int l = 0; l <= DT_LEVEL_COUNT; l++) /* + 1: fast with reduction: fixed */
            for (int threads = 1; threads <= 2; threads++) {
                struct dt_policy pol = level(l < DT_LEVEL_COUNT ? (enum dt_level)l : DT_LEVEL_FAST);
                if (l == DT_LEVEL_COUNT) {
                    pol.reduction = DT_REDUCTION_FIXED;
                    DT_ASSERT(dt_policy_auto_name(&pol));
                }
                if (!conv_op_takes(op, &pol)) continue;
                struct dt_backend *be = cpu(threads);
                poison(out, (size_t)nout * sizeof *out);
                CHECK((op == CONV_FORWARD ? dt_conv2d_forward(be, out, a, b, bias, &s, &pol)
                       : op == CONV_WGRAD
                           ? dt_conv2d_backward_weight(be, out, a, b, &s, &pol)
                           : dt_conv2d_backward_data(be, out, a, b, &s, &pol)) == DT_OK);
                int64_t differ = 0;
                for (int64_t i = 0; i < nout; i++)
                    differ += memcmp(&out[i], &def[i], sizeof *out) != 0;
                if (differ)
                    fprintf(stderr, "  %s, %d threads: %lld differ\n", pol.name, threads,
                            (long long)differ);
                CHECK_INT_EQ(differ, 0);
                checked++;
                dt_backend_destroy(be);
            }
        free(a), free(b), free(bias), free(out), free(def);
    }
    CHECK(checked >= 2 * (N_CONV_GEOMS + n_more));
}

DT_TEST(conv2d_forward_ordered_bits)
{
    static const struct conv_geom more[] = {
        {3, 28, 28, 1, 6, 5, 5, 1, 2},  /* LeNet's first layer */
        {2, 14, 14, 6, 16, 5, 5, 1, 0}, /* its second */
        {2, 11, 13, 5, 13, 3, 3, 1, 1}, /* 3x3 same, odd sizes, K_out = 6 + 6 + 1 */
        {2, 14, 14, 3, 20, 3, 3, 1, 1}, /* many channels on a grid the tiles fill */
        {2, 9, 7, 3, 24, 3, 3, 2, 1},   /* window tiles: 16 + 8 outputs, 20 positions */
    };
    check_conv_bits(CONV_FORWARD, more, 5);
}

/* The fixed reduction's weight gradient written out serially: per canonical chunk of
 * DT_REDUCE_CHUNK output rows (b, oh, ow), from +0, patch * dy over the chunk's rows in
 * order; the chunks' partials through reduce.h's tree. `reduction: fixed` (portable and
 * run_to_run) gives these bits on 1 and 2 threads, whichever form conv.c takes (few
 * outputs: the patches built chunk by chunk; else the transposed patches). */
static void conv_wgrad_fixed_def(float *dw, const float *x, const float *dy,
                                 const struct dt_conv2d_shape *s)
{
    const int64_t rows = s->B * s->OH * s->OW, Kp = s->KH * s->KW * s->C, K = s->K_out;
    const int64_t m = dt_reduce_chunks(rows);
    float *p = falloc(m * Kp * K);
    for (int64_t c = 0; c < m; c++)
        for (int64_t k = 0; k < Kp; k++)
            for (int64_t o = 0; o < K; o++) {
                float acc = 0.0f;
                for (int64_t r = c * DT_REDUCE_CHUNK; r < rows && r < (c + 1) * DT_REDUCE_CHUNK;
                     r++)
                    acc = acc + patch_at(x, s, r, k) * dy[r * K + o];
                p[c * Kp * K + k * K + o] = acc;
            }
    dt_reduce_tree_vectors(p, m, Kp * K, Kp * K);
    memcpy(dw, p, (size_t)(Kp * K) * sizeof *dw);
    free(p);
}

DT_TEST(conv2d_backward_weight_fixed_bits)
{
    static const struct conv_geom more[] = {
        {3, 28, 28, 1, 6, 5, 5, 1, 2},  /* LeNet's first layer: chunks cross images */
        {2, 14, 14, 6, 16, 5, 5, 1, 0}, /* its second: the transposed form */
        {2, 9, 7, 3, 5, 3, 3, 2, 1},    /* stride 2, few outputs, a short last chunk */
        {2, 9, 7, 3, 24, 3, 3, 2, 1},   /* lanes over outputs: 16 + 8 of them, tiles across
                                           runs of 9, a short last tile */
        {16, 28, 28, 1, 6, 5, 5, 1, 2}, /* 392 chunks, 3 tiles: 13 blocks of 32 on 2 threads,
                                           the last of 8 */
        {40, 20, 20, 2, 7, 3, 3, 1, 1}, /* 500 chunks in 16 blocks, the last of 20; 6 + 1
                                           outputs, a pair with one tile */
    };
    /* the last two take the split into blocks of chunks on 2 threads (on 1, the whole run) */
    CHECK_INT_EQ(dt_cpu_chunk_block(392, 3, 2), 32);
    CHECK_INT_EQ(dt_cpu_chunk_block(500, 4, 2), 32);
    CHECK_INT_EQ(dt_cpu_chunk_block(74, 3, 2), 0); /* LeNet's first at batch 3: too few */
    check_conv_bits(CONV_WGRAD, more, 6);
}

/* `atomics: fixed_point`'s input gradient written out serially: every patch element's
 * gradient dpatch[r, k] = (from +0, dy[r, o] * w[k, o] over o ascending), one scale for the
 * tensor from max |dpatch| and KH * KW terms a cell, each cell the exact sum of its terms'
 * fixed-point values rounded once (fixed_point.h's scalar functions). Every level with
 * `atomics: fixed_point` and math not fast gives these bits on 1 and 2 threads. */
static void conv_dx_fixed_def(float *dx, const float *dy, const float *w,
                              const struct dt_conv2d_shape *s)
{
    const int64_t rows = s->B * s->OH * s->OW, Kp = s->KH * s->KW * s->C, K = s->K_out;
    float *dp = falloc(rows * Kp), max_abs = 0.0f;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t k = 0; k < Kp; k++) {
            float acc = 0.0f;
            for (int64_t o = 0; o < K; o++) acc = acc + dy[r * K + o] * w[k * K + o];
            dp[r * Kp + k] = acc;
            if (fabsf(acc) > max_abs) max_abs = fabsf(acc);
        }
    const int shift = dt_fixed_shift_for(max_abs, s->KH * s->KW);
    const int64_t nx = s->B * s->H * s->W * s->C;
    int64_t *acc = calloc((size_t)nx, sizeof *acc);
    for (int64_t r = 0; r < rows; r++) {
        const int64_t b = r / (s->OH * s->OW), oh = r / s->OW % s->OH, ow = r % s->OW;
        for (int64_t k = 0; k < Kp; k++) {
            const int64_t kh = k / (s->KW * s->C), kw = k / s->C % s->KW, c = k % s->C;
            const int64_t ih = oh * s->stride - s->pad + kh, iw = ow * s->stride - s->pad + kw;
            if (ih < 0 || ih >= s->H || iw < 0 || iw >= s->W) continue;
            int64_t q = 0;
            DT_ASSERT(dt_fixed_from_float(&q, dp[r * Kp + k], shift));
            acc[((b * s->H + ih) * s->W + iw) * s->C + c] += q;
        }
    }
    for (int64_t i = 0; i < nx; i++) dx[i] = dt_fixed_to_float(acc[i], shift);
    free(dp), free(acc);
}

DT_TEST(conv2d_backward_data_fixed_bits)
{
    static const struct conv_geom more[] = {
        {3, 14, 14, 6, 16, 5, 5, 1, 0}, /* LeNet's second layer */
        {2, 9, 7, 5, 5, 3, 3, 2, 1},    /* stride 2 with padding, runs of 5 channels */
    };
    check_conv_bits(CONV_DX, more, 2);
}

/* The oneDNN path of `fast` (nets/cpu/conv_dnnl.c), called directly so that a silent fall
 * back to conv.c cannot pass for it: built with oneDNN, each op runs under `fast` and
 * matches the double reference (forward; backward against the same finite differences
 * as the gradcheck below, through conv_ref); under run_to_run, portable and a forced order
 * it declines (DT_ERR_UNSUPPORTED), leaving the output as it was; under `fast` with an
 * ordered reduction it declines the weight gradient alone, with exact atomics backward-data
 * alone. Without oneDNN every call declines. */
static void conv_fd(double *grad, double *v, int64_t n, const double *x, const double *w,
                    const double *bias, const float *r, double *y, const struct dt_conv2d_shape *s);
DT_TEST(conv_onednn_path)
{
    const bool built = dt_cpu_dnnl_built();
    fprintf(stderr, "oneDNN %s\n",
            built ? "built in: its path checked" : "not built: every call declines");
    for (int gi = 0; gi < N_CONV_GEOMS; gi++) {
        struct dt_conv2d_shape s = conv_shape(&conv_geoms[gi]);
        const int64_t nx = conv_nx(&s), nw = conv_nw(&s), ny = conv_ny(&s);
        float *x = falloc(nx), *w = falloc(nw), *bias = falloc(s.K_out), *y = falloc(ny);
        float *r = falloc(ny), *gx = falloc(nx), *gw = falloc(nw);
        double *xd = dalloc(nx), *wd = dalloc(nw), *bd = dalloc(s.K_out), *ref = dalloc(ny);
        double *fx = dalloc(nx), *fw = dalloc(nw), *yy = dalloc(ny);
        fill(x, nx, 1.0);
        fill(w, nw, 0.5);
        fill(bias, s.K_out, 0.1);
        fill(r, ny, 1.0);
        to_double(xd, x, nx);
        to_double(wd, w, nw);
        to_double(bd, bias, s.K_out);
        conv_ref(ref, xd, wd, bd, &s);
        conv_fd(fx, xd, nx, xd, wd, bd, r, yy, &s);
        conv_fd(fw, wd, nw, xd, wd, bd, r, yy, &s);
        print_conv(&s);
        struct dt_backend *be = cpu(2);
        struct dt_policy fast = level(DT_LEVEL_FAST);
        enum dt_status want = built ? DT_OK : DT_ERR_UNSUPPORTED;
        poison(y, (size_t)ny * sizeof *y);
        poison(gx, (size_t)nx * sizeof *gx);
        poison(gw, (size_t)nw * sizeof *gw);
        CHECK_INT_EQ(dt_cpu_dnnl_conv_forward(be, y, x, w, bias, &s, &fast), want);
        CHECK_INT_EQ(dt_cpu_dnnl_conv_backward_data(be, gx, r, w, &s, &fast), want);
        CHECK_INT_EQ(dt_cpu_dnnl_conv_backward_weight(be, gw, x, r, &s, &fast), want);
        if (built) {
            check_close("oneDNN conv forward", y, ref, ny, 1e-5, 1e-4);
            check_close("oneDNN conv dL/dx", gx, fx, nx, 1e-5, 1e-4);
            check_close("oneDNN conv dL/dw", gw, fw, nw, 1e-5, 1e-4);
        }
        /* portable (conv_algo own, math portable) declines every op, touching nothing */
        struct dt_policy port = level(DT_LEVEL_PORTABLE);
        float *y2 = falloc(ny), *gw2 = falloc(nw), *gx2 = falloc(nx);
        poison(y2, (size_t)ny * sizeof *y2);
        CHECK_INT_EQ(dt_cpu_dnnl_conv_forward(be, y2, x, w, bias, &s, &port), DT_ERR_UNSUPPORTED);
        CHECK_INT_EQ(dt_cpu_dnnl_conv_backward_data(be, gx2, r, w, &s, &port), DT_ERR_UNSUPPORTED);
        CHECK_INT_EQ(dt_cpu_dnnl_conv_backward_weight(be, gw2, x, r, &s, &port),
                     DT_ERR_UNSUPPORTED);
        int64_t touched = 0; /* declined: y2 still holds the poison, every byte 0xff */
        for (int64_t i = 0; i < ny; i++) {
            uint32_t bits;
            memcpy(&bits, &y2[i], sizeof bits);
            touched += bits != 0xffffffffu;
        }
        CHECK_INT_EQ(touched, 0);
        /* run_to_run (conv_algo deterministic, reduction pinned, atomics fixed_point): the
         * forward and the weight gradient are oneDNN's -- fast's bits, the same at every
         * call on this thread count -- and backward-data, where the scatter-adds are,
         * detrain's own */
        struct dt_policy r2r = level(DT_LEVEL_RUN_TO_RUN);
        CHECK_INT_EQ(dt_cpu_dnnl_conv_backward_data(be, gx2, r, w, &s, &r2r), DT_ERR_UNSUPPORTED);
        for (int call = 0; built && call < 2; call++) {
            poison(y2, (size_t)ny * sizeof *y2);
            poison(gw2, (size_t)nw * sizeof *gw2);
            CHECK_INT_EQ(dt_cpu_dnnl_conv_forward(be, y2, x, w, bias, &s, &r2r), DT_OK);
            CHECK_INT_EQ(dt_cpu_dnnl_conv_backward_weight(be, gw2, x, r, &s, &r2r), DT_OK);
            CHECK(memcmp(y2, y, (size_t)ny * sizeof *y) == 0);
            CHECK(memcmp(gw2, gw, (size_t)nw * sizeof *gw) == 0);
        }
        if (!built) {
            CHECK_INT_EQ(dt_cpu_dnnl_conv_forward(be, y2, x, w, bias, &s, &r2r),
                         DT_ERR_UNSUPPORTED);
            CHECK_INT_EQ(dt_cpu_dnnl_conv_backward_weight(be, gw2, x, r, &s, &r2r),
                         DT_ERR_UNSUPPORTED);
        }
        /* the ablations of run_to_run that leave the library: conv_algo own (every op) and
         * an ordered reduction that is not pinned (the weight gradient) */
        struct dt_policy own = r2r, fixed = r2r;
        own.conv_algo = DT_CONV_ALGO_OWN;
        fixed.reduction = DT_REDUCTION_FIXED;
        CHECK_INT_EQ(dt_cpu_dnnl_conv_forward(be, y2, x, w, bias, &s, &own), DT_ERR_UNSUPPORTED);
        CHECK_INT_EQ(dt_cpu_dnnl_conv_backward_weight(be, gw2, x, r, &s, &own), DT_ERR_UNSUPPORTED);
        CHECK_INT_EQ(dt_cpu_dnnl_conv_forward(be, y2, x, w, bias, &s, &fixed), want);
        CHECK_INT_EQ(dt_cpu_dnnl_conv_backward_weight(be, gw2, x, r, &s, &fixed),
                     DT_ERR_UNSUPPORTED);
        free(y2), free(gw2), free(gx2);
        /* a single-control ablation of fast leaves oneDNN only the op that control acts
         * on: an ordered reduction the weight gradient (the batch sum), exact atomics
         * backward-data (detrain's scatter-adds); the forward stays the library's */
        for (int ab = 0; ab < 2; ab++) {
            struct dt_policy pol = fast;
            if (ab == 0) pol.reduction = DT_REDUCTION_FIXED;
            else pol.atomics = DT_ATOMICS_FIXED_POINT;
            CHECK_INT_EQ(dt_cpu_dnnl_conv_forward(be, y, x, w, bias, &s, &pol), want);
            CHECK_INT_EQ(dt_cpu_dnnl_conv_backward_data(be, gx, r, w, &s, &pol),
                         ab == 0 ? want : DT_ERR_UNSUPPORTED);
            CHECK_INT_EQ(dt_cpu_dnnl_conv_backward_weight(be, gw, x, r, &s, &pol),
                         ab == 1 ? want : DT_ERR_UNSUPPORTED);
        }
        CHECK_INT_EQ(dt_backend_set_forced_order(be, 7), DT_OK);
        CHECK_INT_EQ(dt_cpu_dnnl_conv_forward(be, y, x, w, bias, &s, &fast), DT_ERR_UNSUPPORTED);
        dt_backend_destroy(be);
        free(x), free(w), free(bias), free(y), free(r), free(gx), free(gw);
        free(xd), free(wd), free(bd), free(ref), free(fx), free(fw), free(yy);
    }
}

/* L = sum r .* conv(x, w, bias), in double. */
static double conv_loss_ref(const double *x, const double *w, const double *bias, const float *r,
                            double *y, const struct dt_conv2d_shape *s)
{
    conv_ref(y, x, w, bias, s);
    double L = 0;
    for (int64_t i = 0; i < conv_ny(s); i++) L += (double)r[i] * y[i];
    return L;
}

/* Central differences of conv_loss_ref w.r.t. every element of v (one of x, w, bias). */
static void conv_fd(double *grad, double *v, int64_t n, const double *x, const double *w,
                    const double *bias, const float *r, double *y, const struct dt_conv2d_shape *s)
{
    const double h = 1e-3; /* L is linear in each argument: the difference is exact */
    for (int64_t i = 0; i < n; i++) {
        double keep = v[i];
        v[i] = keep + h;
        double lp = conv_loss_ref(x, w, bias, r, y, s);
        v[i] = keep - h;
        double lm = conv_loss_ref(x, w, bias, r, y, s);
        v[i] = keep;
        grad[i] = (lp - lm) / (2 * h);
    }
}

DT_TEST(conv2d_backward_gradcheck)
{
    struct dt_policy pols[N_GRAD_POLICIES];
    grad_policies(pols);
    for (int gi = 0; gi < N_CONV_GEOMS; gi++) {
        struct dt_conv2d_shape s = conv_shape(&conv_geoms[gi]);
        const int64_t nx = conv_nx(&s), nw = conv_nw(&s), ny = conv_ny(&s), K = s.K_out;
        const int64_t rows = s.B * s.OH * s.OW;
        float *x = falloc(nx), *w = falloc(nw), *bias = falloc(K), *r = falloc(ny);
        float *gx = falloc(nx), *gw = falloc(nw), *gb = falloc(K);
        double *xd = dalloc(nx), *wd = dalloc(nw), *bd = dalloc(K), *y = dalloc(ny);
        double *fx = dalloc(nx), *fw = dalloc(nw), *fb = dalloc(K);
        fill(x, nx, 1.0);
        fill(w, nw, 0.5);
        fill(bias, K, 0.1);
        fill(r, ny, 1.0);
        to_double(xd, x, nx);
        to_double(wd, w, nw);
        to_double(bd, bias, K);
        conv_fd(fx, xd, nx, xd, wd, bd, r, y, &s);
        conv_fd(fw, wd, nw, xd, wd, bd, r, y, &s);
        conv_fd(fb, bd, K, xd, wd, bd, r, y, &s);
        print_conv(&s);
        for (int p = 0; p < N_GRAD_POLICIES; p++) {
            const int threads[] = {1, 3};
            for (int t = 0; t < 2; t++) {
                struct dt_backend *be = cpu(threads[t]);
                poison(gx, (size_t)nx * sizeof *gx);
                poison(gw, (size_t)nw * sizeof *gw);
                poison(gb, (size_t)K * sizeof *gb);
                CHECK(dt_conv2d_backward_data(be, gx, r, w, &s, &pols[p]) == DT_OK);
                CHECK(dt_conv2d_backward_weight(be, gw, x, r, &s, &pols[p]) == DT_OK);
                CHECK(dt_bias_backward(be, gb, r, rows, K, &pols[p]) == DT_OK);
                fprintf(stderr, "  policy %s, %d threads\n", pols[p].name, threads[t]);
                check_close("conv dL/dx", gx, fx, nx, 1e-5, 1e-4);
                check_close("conv dL/dw", gw, fw, nw, 1e-5, 1e-4);
                check_close("conv dL/dbias", gb, fb, K, 1e-5, 1e-4);
                dt_backend_destroy(be);
            }
        }
        free(x), free(w), free(bias), free(r), free(gx), free(gw), free(gb);
        free(xd), free(wd), free(bd), free(y), free(fx), free(fw), free(fb);
    }
}

/* ---- max pooling ------------------------------------------------------------------------ */

DT_TEST(maxpool_forward_matches_reference)
{
    for (int gi = 0; gi < N_POOL_GEOMS; gi++) {
        struct dt_pool2d_shape s = pool_shape(&pool_geoms[gi]);
        const int64_t nx = pool_nx(&s), ny = pool_ny(&s);
        float *x = falloc(nx), *y = falloc(ny);
        int32_t *am = malloc((size_t)ny * sizeof *am), *ram = malloc((size_t)ny * sizeof *ram);
        double *xd = dalloc(nx), *ref = dalloc(ny);
        fill_distinct(x, nx);
        to_double(xd, x, nx);
        pool_ref(ref, ram, xd, &s);
        print_pool(&s);
        for (int l = 0; l < DT_LEVEL_COUNT; l++) {
            const int threads[] = {1, 3};
            for (int t = 0; t < 2; t++) {
                struct dt_backend *be = cpu(threads[t]);
                struct dt_policy pol = level((enum dt_level)l);
                poison(y, (size_t)ny * sizeof *y);
                poison(am, (size_t)ny * sizeof *am);
                CHECK(dt_maxpool2d_forward(be, y, am, x, &s, &pol) == DT_OK);
                for (int64_t i = 0; i < ny; i++)
                    if ((double)y[i] != ref[i] || am[i] != ram[i]) {
                        fprintf(stderr,
                                "level %s, %d threads: y[%lld] = %.9g argmax %d, "
                                "reference %.9g argmax %d\n",
                                pol.name, threads[t], (long long)i, (double)y[i], am[i], ref[i],
                                ram[i]);
                        dt_check_failures_++;
                        break;
                    }
                dt_backend_destroy(be);
            }
        }
        free(x), free(y), free(am), free(ram), free(xd), free(ref);
    }
}

/* L = sum r .* maxpool(x), in double. */
static double pool_loss_ref(const double *x, const float *r, double *y,
                            const struct dt_pool2d_shape *s)
{
    pool_ref(y, NULL, x, s);
    double L = 0;
    for (int64_t i = 0; i < pool_ny(s); i++) L += (double)r[i] * y[i];
    return L;
}

DT_TEST(maxpool_backward_gradcheck)
{
    const struct dt_policy pols[] = {level(DT_LEVEL_FAST), level(DT_LEVEL_RUN_TO_RUN),
                                     level(DT_LEVEL_PORTABLE), portable_with(0, 1)};
    for (int gi = 0; gi < N_POOL_GEOMS; gi++) {
        struct dt_pool2d_shape s = pool_shape(&pool_geoms[gi]);
        const int64_t nx = pool_nx(&s), ny = pool_ny(&s);
        float *x = falloc(nx), *y = falloc(ny), *r = falloc(ny), *gx = falloc(nx);
        int32_t *am = malloc((size_t)ny * sizeof *am);
        double *xd = dalloc(nx), *yd = dalloc(ny), *fd = dalloc(nx);
        fill_distinct(x, nx); /* gap 1/nx >= 2e-3, far above h */
        fill(r, ny, 1.0);
        to_double(xd, x, nx);
        const double h = 1e-6;
        for (int64_t i = 0; i < nx; i++) {
            double keep = xd[i];
            xd[i] = keep + h;
            double lp = pool_loss_ref(xd, r, yd, &s);
            xd[i] = keep - h;
            double lm = pool_loss_ref(xd, r, yd, &s);
            xd[i] = keep;
            fd[i] = (lp - lm) / (2 * h);
        }
        print_pool(&s);
        for (size_t p = 0; p < sizeof pols / sizeof pols[0]; p++) {
            const int threads[] = {1, 3};
            for (int t = 0; t < 2; t++) {
                struct dt_backend *be = cpu(threads[t]);
                CHECK(dt_maxpool2d_forward(be, y, am, x, &s, &pols[p]) == DT_OK);
                poison(gx, (size_t)nx * sizeof *gx);
                CHECK(dt_maxpool2d_backward(be, gx, r, x, y, am, &s, &pols[p]) == DT_OK);
                fprintf(stderr, "  policy %s, %d threads\n", pols[p].name, threads[t]);
                check_close("maxpool dL/dx", gx, fd, nx, 1e-6, 1e-5);
                dt_backend_destroy(be);
            }
        }
        free(x), free(y), free(r), free(gx), free(am), free(xd), free(yd), free(fd);
    }
}

/* Forward and backward of one tie/NaN pattern against the rule, exactly. dy values are
 * multiples of 1/256 below 4 in magnitude, so every sum of them is exact in float: the
 * expected dx is exact for every control and order. */
static void pool_rule_case(const char *what, const float *x, const struct dt_pool2d_shape *s)
{
    const int64_t nx = pool_nx(s), ny = pool_ny(s);
    float *y = falloc(ny), *dy = falloc(ny), *dx = falloc(nx);
    int32_t *am = malloc((size_t)ny * sizeof *am), *ram = malloc((size_t)ny * sizeof *ram);
    double *xd = dalloc(nx), *ref = dalloc(ny), *dyd = dalloc(ny), *rdx = dalloc(nx);
    for (int64_t i = 0; i < ny; i++) dy[i] = (float)floor(urand() * 1000.0) / 256.0f;
    to_double(xd, x, nx);
    to_double(dyd, dy, ny);
    pool_ref(ref, ram, xd, s);
    pool_backward_ref(rdx, dyd, ram, s);
    fprintf(stderr, "%s: ", what);
    print_pool(s);
    const struct dt_policy pols[] = {level(DT_LEVEL_FAST), level(DT_LEVEL_PORTABLE)};
    for (int p = 0; p < 2; p++) {
        const int threads[] = {1, 3};
        for (int t = 0; t < 2; t++) {
            struct dt_backend *be = cpu(threads[t]);
            poison(y, (size_t)ny * sizeof *y);
            poison(am, (size_t)ny * sizeof *am);
            CHECK(dt_maxpool2d_forward(be, y, am, x, s, &pols[p]) == DT_OK);
            for (int64_t i = 0; i < ny; i++) {
                float want = (float)ref[i];
                /* bits: a NaN must be NaN; -0 and +0 must be the first one seen */
                bool same = isnan(want) ? isnan(y[i]) : memcmp(&y[i], &want, sizeof want) == 0;
                if (!same || am[i] != ram[i]) {
                    fprintf(stderr,
                            "  %s, %d threads: y[%lld] = %a argmax %d, rule gives %a "
                            "argmax %d\n",
                            pols[p].name, threads[t], (long long)i, (double)y[i], am[i],
                            (double)want, ram[i]);
                    dt_check_failures_++;
                    break;
                }
            }
            poison(dx, (size_t)nx * sizeof *dx);
            CHECK(dt_maxpool2d_backward(be, dx, dy, x, y, am, s, &pols[p]) == DT_OK);
            for (int64_t i = 0; i < nx; i++)
                if (!((double)dx[i] == rdx[i])) {
                    fprintf(stderr, "  %s, %d threads: dx[%lld] = %.9g, rule gives %.9g\n",
                            pols[p].name, threads[t], (long long)i, (double)dx[i], rdx[i]);
                    dt_check_failures_++;
                    break;
                }
            dt_backend_destroy(be);
        }
    }
    free(y), free(dy), free(dx), free(am), free(ram), free(xd), free(ref), free(dyd), free(rdx);
}

DT_TEST(maxpool_ties)
{
    const struct pool_geom geoms[] = {{2, 7, 8, 2, 3, 2, 1},  {2, 6, 7, 2, 3, 1, 0},
                                      {2, 6, 6, 2, 2, 2, 0},  {1, 5, 5, 1, 3, 1, 2},
                                      {2, 7, 8, 18, 3, 2, 1}, {1, 5, 5, 17, 3, 1, 2}};
    for (int gi = 0; gi < 6; gi++) {
        struct dt_pool2d_shape s = pool_shape(&geoms[gi]);
        const int64_t nx = pool_nx(&s);
        float *x = falloc(nx);
        /* constant image: every window's winner is its first in-image cell */
        for (int64_t i = 0; i < nx; i++) x[i] = 0.5f;
        pool_rule_case("constant", x, &s);
        for (int64_t i = 0; i < nx; i++) x[i] = -0.25f; /* negative: padding must not win */
        pool_rule_case("constant negative", x, &s);
        /* many ties */
        for (int64_t i = 0; i < nx; i++) x[i] = (float)floor((urand() + 1.0) * 1.5) - 1.0f;
        pool_rule_case("values in {-1, 0, 1}", x, &s);
        /* ties at overlap positions: equal maxima on every odd row and column (the cells
         * shared by neighbouring stride-2 windows), smaller values elsewhere */
        for (int64_t b = 0; b < s.B; b++)
            for (int64_t h = 0; h < s.H; h++)
                for (int64_t w = 0; w < s.W; w++)
                    for (int64_t c = 0; c < s.C; c++)
                        x[((b * s.H + h) * s.W + w) * s.C + c] =
                            (h % 2 == 1 || w % 2 == 1) ? 2.0f : (float)urand();
        pool_rule_case("equal maxima on the overlaps", x, &s);
        /* signed zeros: -0 and +0 compare equal, so the first one seen is kept */
        for (int64_t i = 0; i < nx; i++) x[i] = urand() < 0 ? -0.0f : 0.0f;
        pool_rule_case("signed zeros", x, &s);
        free(x);
    }
    /* NaNs: a NaN wins its window, ends the scan (a later larger value or NaN does not
     * replace it) and wins from the first cell too. */
    {
        /* 18 channels: 0 and 1 in the CPU's first block of 8, 17 in its third */
        struct dt_pool2d_shape s = pool_shape(&(struct pool_geom){1, 7, 7, 18, 3, 2, 1});
        const int64_t nx = pool_nx(&s);
        float *x = falloc(nx);
        fill_distinct(x, nx);
        const float nan = NAN;
        const int64_t C = s.C;
        x[(1 * 7 + 1) * C + 0] = nan;  /* (1,1): shared by four windows, channel 0 */
        x[(1 * 7 + 2) * C + 0] = 10.f; /* larger value after it in scan order */
        x[(4 * 7 + 4) * C + 1] = nan;  /* channel 1: two NaNs, the first wins */
        x[(4 * 7 + 5) * C + 1] = nan;
        x[(0 * 7 + 0) * C + 1] = nan;  /* first in-image cell of window (0,0) */
        x[(1 * 7 + 1) * C + 17] = nan; /* channel 17, past the block, as channel 0 */
        x[(1 * 7 + 2) * C + 17] = 10.f;
        pool_rule_case("NaN", x, &s);
        /* the rule check above compares against pool_ref; state the NaN cases directly */
        struct dt_backend *be = cpu(2);
        struct dt_policy pol = level(DT_LEVEL_PORTABLE);
        float *y = falloc(pool_ny(&s));
        int32_t *am = malloc((size_t)pool_ny(&s) * sizeof *am);
        CHECK(dt_maxpool2d_forward(be, y, am, x, &s, &pol) == DT_OK);
        /* window (oh=1, ow=1) covers rows/cols 1..3: channel 0 NaN at (1,1) */
        CHECK(isnan(y[(1 * s.OW + 1) * C + 0]));
        CHECK_INT_EQ(am[(1 * s.OW + 1) * C + 0], 1 * 7 + 1);
        CHECK(isnan(y[(1 * s.OW + 1) * C + 17]));
        CHECK_INT_EQ(am[(1 * s.OW + 1) * C + 17], 1 * 7 + 1);
        /* window (0,0) covers rows/cols 0..1 in the image: channel 1 NaN at (0,0) */
        CHECK(isnan(y[0 * C + 1]));
        CHECK_INT_EQ(am[0 * C + 1], 0);
        /* window (2,2) covers rows/cols 3..5: channel 1 NaNs at (4,4) then (4,5) */
        CHECK(isnan(y[(2 * s.OW + 2) * C + 1]));
        CHECK_INT_EQ(am[(2 * s.OW + 2) * C + 1], 4 * 7 + 4);
        free(y), free(am), free(x);
        dt_backend_destroy(be);
    }
}

/* ---- thread-count independence --------------------------------------------------------- */

/* B*OH*OW = 1296 rows: 40 full canonical chunks of 32 and a short one. */
enum { TB = 9, TH = 12, TW = 12, TC = 4, TK = 8 };

struct conv_pool_run {
    float y[TB * TH * TW * TK], dx[TB * TH * TW * TC], dw[3 * 3 * TC * TK], db[TK];
    float py[TB * 6 * 6 * TK], pdx[TB * TH * TW * TK];
    int32_t pam[TB * 6 * 6 * TK];
};

static struct dt_conv2d_shape tshape(void)
{
    return conv_shape(&(struct conv_geom){TB, TH, TW, TC, TK, 3, 3, 1, 1});
}
static struct dt_pool2d_shape tpool(void)
{
    return pool_shape(&(struct pool_geom){TB, TH, TW, TK, 3, 2, 1});
}

static void conv_pool_all(struct conv_pool_run *o, int threads, const struct dt_policy *pol,
                          const float *x, const float *w, const float *bias, const float *r,
                          const float *pr)
{
    struct dt_backend *be = cpu(threads);
    struct dt_conv2d_shape s = tshape();
    struct dt_pool2d_shape ps = tpool();
    DT_ASSERT(ps.OH == 6 && ps.OW == 6);
    DT_ASSERT(dt_conv2d_forward(be, o->y, x, w, bias, &s, pol) == DT_OK);
    DT_ASSERT(dt_conv2d_backward_data(be, o->dx, r, w, &s, pol) == DT_OK);
    DT_ASSERT(dt_conv2d_backward_weight(be, o->dw, x, r, &s, pol) == DT_OK);
    DT_ASSERT(dt_bias_backward(be, o->db, r, s.B * s.OH * s.OW, s.K_out, pol) == DT_OK);
    DT_ASSERT(dt_maxpool2d_forward(be, o->py, o->pam, o->y, &ps, pol) == DT_OK);
    DT_ASSERT(dt_maxpool2d_backward(be, o->pdx, pr, o->y, o->py, o->pam, &ps, pol) == DT_OK);
    dt_backend_destroy(be);
}

DT_TEST(conv_pool_thread_count_independent)
{
    static float x[TB * TH * TW * TC], w[3 * 3 * TC * TK], bias[TK], r[TB * TH * TW * TK];
    static float pr[TB * 6 * 6 * TK];
    static struct conv_pool_run one, many;
    fill(x, TB * TH * TW * TC, 1.0);
    fill(w, 3 * 3 * TC * TK, 0.3);
    fill(bias, TK, 0.1);
    fill(r, TB * TH * TW * TK, 1.0);
    fill(pr, TB * 6 * 6 * TK, 1.0);
    /* portable, and run_to_run's own kernels with reduction: fixed (run_to_run itself takes
     * the libraries' products, whose bits may follow the thread count: its promise is one
     * machine and one count, controls.pinned_forced_orders) */
    const enum dt_level levels[] = {DT_LEVEL_PORTABLE, DT_LEVEL_RUN_TO_RUN};
    for (int l = 0; l < 2; l++) {
        struct dt_policy pol = level(levels[l]);
        if (levels[l] == DT_LEVEL_RUN_TO_RUN) {
            pol.reduction = DT_REDUCTION_FIXED;
            pol.math = DT_MATH_STRICT;
            DT_ASSERT(dt_policy_auto_name(&pol));
        }
        conv_pool_all(&one, 1, &pol, x, w, bias, r, pr);
        const int counts[] = {2, 3, 4, 8};
        for (int t = 0; t < 4; t++) {
            conv_pool_all(&many, counts[t], &pol, x, w, bias, r, pr);
            const struct {
                const char *name;
                const void *a, *b;
                size_t n;
            } parts[] = {{"conv forward", one.y, many.y, sizeof one.y},
                         {"conv backward-data", one.dx, many.dx, sizeof one.dx},
                         {"conv backward-weight", one.dw, many.dw, sizeof one.dw},
                         {"conv bias gradient", one.db, many.db, sizeof one.db},
                         {"maxpool forward", one.py, many.py, sizeof one.py},
                         {"maxpool argmax", one.pam, many.pam, sizeof one.pam},
                         {"maxpool backward", one.pdx, many.pdx, sizeof one.pdx}};
            for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
                if (memcmp(parts[i].a, parts[i].b, parts[i].n) != 0) {
                    fprintf(stderr, "%s: %s with %d threads differs from 1 thread\n", pol.name,
                            parts[i].name, counts[t]);
                    dt_check_failures_++;
                }
        }
    }
}

/* ---- forced-order negative controls ------------------------------------------------------ */

static void conv_bwd(float *dw, float *dx, int threads, uint64_t seed, const struct dt_policy *pol,
                     const float *x, const float *w, const float *r)
{
    struct dt_backend *be = cpu(threads);
    DT_ASSERT(dt_backend_set_forced_order(be, seed) == DT_OK);
    struct dt_conv2d_shape s = tshape();
    if (dw) DT_ASSERT(dt_conv2d_backward_weight(be, dw, x, r, &s, pol) == DT_OK);
    if (dx) DT_ASSERT(dt_conv2d_backward_data(be, dx, r, w, &s, pol) == DT_OK);
    dt_backend_destroy(be);
}

/* (a) backward-weight: `reduction`. (b) backward-data (col2im): `atomics`. */
DT_TEST(conv_forced_orders)
{
    static float x[TB * TH * TW * TC], w[3 * 3 * TC * TK], r[TB * TH * TW * TK];
    fill(x, TB * TH * TW * TC, 1.0);
    fill(w, 3 * 3 * TC * TK, 0.3);
    fill(r, TB * TH * TW * TK, 1.0);
    enum { NW = 3 * 3 * TC * TK, NX = TB * TH * TW * TC };
    static float a[NX], b[NX], c[NX];

    struct dt_policy unordered = portable_with(1, 0), fixed = level(DT_LEVEL_PORTABLE);
    conv_bwd(a, NULL, 2, 1, &unordered, x, w, r);
    conv_bwd(b, NULL, 2, 2, &unordered, x, w, r);
    conv_bwd(c, NULL, 2, 1, &unordered, x, w, r);
    int64_t d = bits_differ(a, b, NW);
    fprintf(stderr,
            "backward-weight, reduction unordered, forced orders 1 vs 2: %lld of %d "
            "elements differ\n",
            (long long)d, (int)NW);
    CHECK(d > 0);
    CHECK_INT_EQ(bits_differ(a, c, NW), 0); /* the same order twice: the same bits */
    conv_bwd(a, NULL, 2, 1, &fixed, x, w, r);
    conv_bwd(b, NULL, 2, 2, &fixed, x, w, r);
    CHECK_INT_EQ(bits_differ(a, b, NW), 0);
    conv_bwd(b, NULL, 2, 0, &fixed, x, w, r);
    conv_bwd(c, NULL, 3, 0, &fixed, x, w, r);
    CHECK_INT_EQ(bits_differ(a, b, NW), 0);
    CHECK_INT_EQ(bits_differ(b, c, NW), 0);

    struct dt_policy afloat = portable_with(0, 1);
    conv_bwd(NULL, a, 2, 1, &afloat, x, w, r);
    conv_bwd(NULL, b, 2, 2, &afloat, x, w, r);
    conv_bwd(NULL, c, 2, 1, &afloat, x, w, r);
    d = bits_differ(a, b, NX);
    fprintf(stderr,
            "backward-data, atomics float, forced orders 1 vs 2: %lld of %d elements "
            "differ\n",
            (long long)d, (int)NX);
    CHECK(d > 0);
    CHECK_INT_EQ(bits_differ(a, c, NX), 0);
    conv_bwd(NULL, a, 2, 1, &fixed, x, w, r);
    conv_bwd(NULL, b, 2, 2, &fixed, x, w, r);
    CHECK_INT_EQ(bits_differ(a, b, NX), 0);
    conv_bwd(NULL, b, 2, 0, &fixed, x, w, r);
    conv_bwd(NULL, c, 3, 0, &fixed, x, w, r);
    CHECK_INT_EQ(bits_differ(a, b, NX), 0);
    CHECK_INT_EQ(bits_differ(b, c, NX), 0);
}

enum { FB = 4, FH = 16, FW = 16, FC = 4 };

static void pool_bwd(float *dx, int threads, uint64_t seed, const struct dt_policy *pol,
                     const float *dy, const float *x, const float *y, const int32_t *am,
                     const struct dt_pool2d_shape *s)
{
    struct dt_backend *be = cpu(threads);
    DT_ASSERT(dt_backend_set_forced_order(be, seed) == DT_OK);
    poison(dx, (size_t)pool_nx(s) * sizeof *dx);
    DT_ASSERT(dt_maxpool2d_backward(be, dx, dy, x, y, am, s, pol) == DT_OK);
    dt_backend_destroy(be);
}

/* (c) maxpool backward: overlapping windows under `atomics`; without overlap, no control
 * and no order changes a bit. */
DT_TEST(maxpool_forced_orders)
{
    enum { NX = FB * FH * FW * FC };
    static float x[NX], a[NX], b[NX], c[NX], dy[NX];
    static int32_t am[NX];
    static double dyd[NX], rdx[NX];
    /* a grid of bumps: a high cell on every (h, w) = (1, 1) mod 4 -- the cells shared by
     * two stride-2 windows per axis -- over small noise, so each bump is the maximum of
     * four overlapping windows */
    for (int64_t bi = 0; bi < FB; bi++)
        for (int64_t h = 0; h < FH; h++)
            for (int64_t w = 0; w < FW; w++)
                for (int64_t ch = 0; ch < FC; ch++)
                    x[((bi * FH + h) * FW + w) * FC + ch] =
                        (float)(0.5 * urand()) + (h % 4 == 1 && w % 4 == 1 ? 4.0f : 0.0f);
    struct dt_policy afloat = portable_with(0, 1), fixed = level(DT_LEVEL_PORTABLE);
    {
        struct dt_pool2d_shape s = pool_shape(&(struct pool_geom){FB, FH, FW, FC, 3, 2, 1});
        const int64_t ny = pool_ny(&s);
        struct dt_backend *be = cpu(2);
        float *y = falloc(ny);
        CHECK(dt_maxpool2d_forward(be, y, am, x, &s, &fixed) == DT_OK);
        dt_backend_destroy(be);
        fill(dy, ny, 1.0);
        /* cells that receive two or more terms */
        static int hits[NX];
        memset(hits, 0, sizeof hits);
        const int64_t n_img = FH * FW * FC, n_out = s.OH * s.OW * FC;
        for (int64_t i = 0; i < ny; i++) hits[i / n_out * n_img + am[i] * FC + i % FC]++;
        int64_t multi = 0;
        for (int64_t i = 0; i < NX; i++) multi += hits[i] >= 2;
        fprintf(stderr, "maxpool 3x3/2 pad 1: %lld of %d cells win two or more windows\n",
                (long long)multi, (int)NX);
        CHECK(multi >= 100);

        pool_bwd(a, 2, 1, &afloat, dy, x, y, am, &s);
        pool_bwd(b, 2, 2, &afloat, dy, x, y, am, &s);
        pool_bwd(c, 2, 1, &afloat, dy, x, y, am, &s);
        int64_t d = bits_differ(a, b, NX);
        fprintf(stderr,
                "maxpool backward, atomics float, forced orders 1 vs 2: %lld of %d "
                "elements differ\n",
                (long long)d, (int)NX);
        CHECK(d > 0);
        CHECK_INT_EQ(bits_differ(a, c, NX), 0);
        pool_bwd(a, 2, 1, &fixed, dy, x, y, am, &s);
        pool_bwd(b, 2, 2, &fixed, dy, x, y, am, &s);
        CHECK_INT_EQ(bits_differ(a, b, NX), 0);
        pool_bwd(b, 2, 0, &fixed, dy, x, y, am, &s);
        pool_bwd(c, 3, 0, &fixed, dy, x, y, am, &s);
        CHECK_INT_EQ(bits_differ(a, b, NX), 0);
        CHECK_INT_EQ(bits_differ(b, c, NX), 0);
        free(y);
    }
    {
        /* 2x2 stride 2: one term per cell; every seed, control and thread count agree,
         * and equal the direct assignment */
        struct dt_pool2d_shape s = pool_shape(&(struct pool_geom){FB, FH, FW, FC, 2, 2, 0});
        const int64_t ny = pool_ny(&s);
        struct dt_backend *be = cpu(2);
        float *y = falloc(ny);
        CHECK(dt_maxpool2d_forward(be, y, am, x, &s, &fixed) == DT_OK);
        dt_backend_destroy(be);
        fill(dy, ny, 1.0);
        to_double(dyd, dy, ny);
        pool_backward_ref(rdx, dyd, am, &s);
        for (int64_t i = 0; i < NX; i++) c[i] = (float)rdx[i];
        const struct dt_policy *pols[] = {&afloat, &fixed};
        const uint64_t seeds[] = {0, 1, 2};
        const int threads[] = {1, 3};
        for (int p = 0; p < 2; p++)
            for (int si = 0; si < 3; si++)
                for (int t = 0; t < 2; t++) {
                    pool_bwd(a, threads[t], seeds[si], pols[p], dy, x, y, am, &s);
                    int64_t d = bits_differ(a, c, NX);
                    if (d) {
                        fprintf(stderr,
                                "maxpool 2x2/2 backward, %s, seed %d, %d threads: %lld "
                                "elements differ from the direct assignment\n",
                                pols[p]->name, (int)seeds[si], threads[t], (long long)d);
                        dt_check_failures_++;
                    }
                }
        free(y);
    }
}

/* ---- LeNet: the composition, against a double-precision reference --------------------- */

enum { LB = 2, LHW = 28, LCLS = 10, LPARAMS = 10 };

struct lenet_ref {
    bool overlap;
    struct dt_conv2d_shape c0, c1;
    struct dt_pool2d_shape p0, p1;
    double *a0, *q0, *a1, *q1; /* conv0 (post-ReLU), pool0, conv1 (post-ReLU), pool1 */
};

static void lenet_ref_init(struct lenet_ref *n, bool overlap)
{
    const int64_t pk = overlap ? 3 : 2, pp = overlap ? 1 : 0;
    n->overlap = overlap;
    n->c0 = conv_shape(&(struct conv_geom){LB, LHW, LHW, 1, 6, 5, 5, 1, 2});
    n->p0 = pool_shape(&(struct pool_geom){LB, n->c0.OH, n->c0.OW, 6, pk, 2, pp});
    n->c1 = conv_shape(&(struct conv_geom){LB, n->p0.OH, n->p0.OW, 6, 16, 5, 5, 1, 0});
    n->p1 = pool_shape(&(struct pool_geom){LB, n->c1.OH, n->c1.OW, 16, pk, 2, pp});
    DT_ASSERT(n->p1.OH * n->p1.OW * n->p1.C == 400);
    n->a0 = dalloc(conv_ny(&n->c0));
    n->q0 = dalloc(pool_ny(&n->p0));
    n->a1 = dalloc(conv_ny(&n->c1));
    n->q1 = dalloc(pool_ny(&n->p1));
}

static void lenet_ref_free(struct lenet_ref *n)
{
    free(n->a0), free(n->q0), free(n->a1), free(n->q1);
}

static void relu_d(double *v, int64_t n)
{
    for (int64_t i = 0; i < n; i++) v[i] = v[i] > 0 ? v[i] : 0;
}

/* (B, in) . (in, out) + bias, optional ReLU. */
static void dense_d(double *y, const double *x, const double *w, const double *bias, int64_t in,
                    int64_t out, bool relu)
{
    for (int64_t b = 0; b < LB; b++)
        for (int64_t o = 0; o < out; o++) {
            double s = bias[o];
            for (int64_t k = 0; k < in; k++) s += x[b * in + k] * w[k * out + o];
            y[b * out + o] = relu && s < 0 ? 0 : s;
        }
}

/* Mean softmax cross-entropy of the LeNet in double; p[] in the model's parameter order. */
static double lenet_loss_ref(struct lenet_ref *n, double *const p[LPARAMS], const double *x,
                             const int32_t *lab)
{
    conv_ref(n->a0, x, p[0], p[1], &n->c0);
    relu_d(n->a0, conv_ny(&n->c0));
    pool_ref(n->q0, NULL, n->a0, &n->p0);
    conv_ref(n->a1, n->q0, p[2], p[3], &n->c1);
    relu_d(n->a1, conv_ny(&n->c1));
    pool_ref(n->q1, NULL, n->a1, &n->p1); /* NHWC: already the (B, 400) (h, w, c) matrix */
    double h0[LB * 120], h1[LB * 84], z[LB * LCLS];
    dense_d(h0, n->q1, p[4], p[5], 400, 120, true);
    dense_d(h1, h0, p[6], p[7], 120, 84, true);
    dense_d(z, h1, p[8], p[9], 84, LCLS, false);
    double total = 0;
    for (int b = 0; b < LB; b++) {
        double m = z[b * LCLS];
        for (int c = 1; c < LCLS; c++) m = z[b * LCLS + c] > m ? z[b * LCLS + c] : m;
        double s = 0;
        for (int c = 0; c < LCLS; c++) s += exp(z[b * LCLS + c] - m);
        total += log(s) - (z[b * LCLS + lab[b]] - m);
    }
    return total / LB;
}

/* Tolerance: |g - fd| <= 2e-6 + 1e-3 |fd|, tighter than the usual 1e-4 / 2e-3 because the
 * gradients here are O(0.01..0.7): an absolute 1e-4 would pass a dense2.weight gradient
 * that is 1% wrong. The float model and the double reference differ by float rounding
 * (observed max |g - fd| <= 6e-7 over every sampled element, both pool variants); the
 * central difference (h = 1e-6 on a loss of ~1.5 in double) is good to ~1e-9. A wrong
 * index, sign, window or missing term is orders of magnitude above. */
static void lenet_gradcheck(bool overlap)
{
    struct dt_backend *be = cpu(2);
    struct dt_policy pol = level(DT_LEVEL_PORTABLE);
    struct dt_model *m = NULL;
    struct dt_error err;
    CHECK(dt_lenet_create(&m, be, LHW, LHW, overlap, LCLS, LB, &err) == DT_OK);
    if (!m) return;
    CHECK_INT_EQ(m->n_params, LPARAMS);
    dt_model_init(m, 7, 0);
    static float x[LB * LHW * LHW];
    int32_t lab[LB] = {3, 7};
    for (int i = 0; i < LB * LHW * LHW; i++) x[i] = (float)(0.5 * (urand() + 1.0));
    dt_backend_upload(be, m->x, x, sizeof x);
    dt_backend_upload(be, m->labels, lab, sizeof lab);
    float loss;
    struct dt_pass pass;
    CHECK(dt_model_forward(m, LB, &pol, &pass) == DT_OK);
    CHECK(dt_softmax_xent_forward(be, m->probs, &loss, NULL, m->logits, m->labels, LB, LCLS,
                                  &pol) == DT_OK);
    CHECK(dt_softmax_xent_backward(be, m->dlogits, m->probs, m->labels, LB, LCLS, LB, &pol) ==
          DT_OK);
    CHECK(m->ops->backward(m, LB, &pass, &pol) == DT_OK);

    struct lenet_ref n;
    lenet_ref_init(&n, overlap);
    double *p[LPARAMS];
    float *g[LPARAMS];
    static const int64_t want_n[LPARAMS] = {150, 6, 2400, 16, 48000, 120, 10080, 84, 840, 10};
    for (int i = 0; i < LPARAMS; i++) {
        const int64_t k = m->params[i].n;
        CHECK_INT_EQ(k, want_n[i]);
        float *wf = falloc(k);
        g[i] = falloc(k);
        p[i] = dalloc(k);
        dt_backend_download(be, wf, m->params[i].w, (size_t)k * sizeof(float));
        dt_backend_download(be, g[i], m->params[i].g, (size_t)k * sizeof(float));
        to_double(p[i], wf, k);
        free(wf);
    }
    double xd[LB * LHW * LHW];
    to_double(xd, x, LB * LHW * LHW);
    const double lref = lenet_loss_ref(&n, p, xd, lab);
    fprintf(stderr, "lenet overlap=%d: loss %.9g, reference %.12g\n", (int)overlap, (double)loss,
            lref);
    CHECK_NEAR(loss, lref, 2e-5 * (1 + fabs(lref)));

    const double h = 1e-6;
    /* Per tensor: 20 evenly spaced interior indices plus the first and last (every element
     * of a tensor of at most 22), then the TOP indices of largest |g| not yet taken: with
     * B = 2 many ReLU units are dead, so evenly spaced samples of a dense weight can be
     * mostly zeros. */
    enum { SAMPLES = 22, TOP = 8 };
    for (int i = 0; i < LPARAMS; i++) {
        const int64_t k = m->params[i].n;
        double worst = 0, gmax = 0;
        int64_t idxs[SAMPLES + TOP], n_idx = 0, sampled = 0, nonzero = 0;
        for (int j = 0; j < SAMPLES && j < k; j++) {
            const int64_t idx = k <= SAMPLES ? j : (int64_t)j * (k - 1) / (SAMPLES - 1);
            if (n_idx == 0 || idxs[n_idx - 1] != idx) idxs[n_idx++] = idx;
        }
        for (int t = 0; t < TOP; t++) {
            int64_t best = -1;
            for (int64_t e = 0; e < k; e++) {
                bool taken = false;
                for (int64_t q = 0; q < n_idx && !taken; q++) taken = idxs[q] == e;
                if (!taken && (best < 0 || fabsf(g[i][e]) > fabsf(g[i][best]))) best = e;
            }
            if (best < 0) break;
            idxs[n_idx++] = best;
        }
        for (int64_t q = 0; q < n_idx; q++) {
            const int64_t idx = idxs[q];
            double keep = p[i][idx];
            p[i][idx] = keep + h;
            double lp = lenet_loss_ref(&n, p, xd, lab);
            p[i][idx] = keep - h;
            double lm = lenet_loss_ref(&n, p, xd, lab);
            p[i][idx] = keep;
            const double fd = (lp - lm) / (2 * h), got = g[i][idx];
            const double diff = fabs(got - fd);
            sampled++;
            nonzero += fd != 0;
            if (diff > worst) worst = diff;
            if (fabs(fd) > gmax) gmax = fabs(fd);
            if (!(diff <= 2e-6 + 1e-3 * fabs(fd))) {
                fprintf(stderr, "  %s[%lld]: backward %.9g, finite difference %.9g (diff %.3g)\n",
                        m->params[i].name, (long long)idx, got, fd, diff);
                dt_check_failures_++;
            }
        }
        fprintf(stderr, "  %-14s %2lld samples (%2lld nonzero), max |fd| %.3g, max |g - fd| %.3g\n",
                m->params[i].name, (long long)sampled, (long long)nonzero, gmax, worst);
    }
    for (int i = 0; i < LPARAMS; i++) free(p[i]), free(g[i]);
    lenet_ref_free(&n);
    dt_model_destroy(m);
    dt_backend_destroy(be);
}

DT_TEST(lenet_backward_gradcheck)
{
    lenet_gradcheck(false);
    lenet_gradcheck(true);
}

/* ---- shape validation ------------------------------------------------------------------ */

static void conv_bad(struct dt_conv2d_shape s, const char *wanted)
{
    struct dt_error err;
    memset(&err, 0, sizeof err);
    CHECK_INT_EQ(dt_conv2d_shape_init(&s, &err), DT_ERR_CONFIG);
    CHECK(err.msg[0] != '\0');
    CHECK_CONTAINS(err.msg, wanted);
}

static void pool_bad(struct dt_pool2d_shape s, const char *wanted)
{
    struct dt_error err;
    memset(&err, 0, sizeof err);
    CHECK_INT_EQ(dt_pool2d_shape_init(&s, &err), DT_ERR_CONFIG);
    CHECK(err.msg[0] != '\0');
    CHECK_CONTAINS(err.msg, wanted);
}

DT_TEST(shape_errors)
{
    const struct dt_conv2d_shape c = {
        .B = 2, .H = 28, .W = 28, .C = 1, .K_out = 6, .KH = 5, .KW = 5, .stride = 1, .pad = 2};
    struct dt_conv2d_shape t = c;
    struct dt_error err;
    CHECK_INT_EQ(dt_conv2d_shape_init(&t, &err), DT_OK);
    CHECK_INT_EQ(t.OH, 28);
    CHECK_INT_EQ(t.OW, 28);
    t = c, t.H = 14, t.W = 14, t.C = 6, t.K_out = 16, t.pad = 0;
    CHECK_INT_EQ(dt_conv2d_shape_init(&t, &err), DT_OK);
    CHECK_INT_EQ(t.OH, 10);
    CHECK_INT_EQ(t.OW, 10);
    t = c, t.H = 7, t.W = 8, t.KH = 3, t.KW = 2, t.stride = 2, t.pad = 0;
    CHECK_INT_EQ(dt_conv2d_shape_init(&t, &err), DT_OK);
    CHECK_INT_EQ(t.OH, 3); /* (7 - 3) / 2 + 1 */
    CHECK_INT_EQ(t.OW, 4); /* (8 - 2) / 2 + 1 */
    t = c, t.H = 3, t.W = 1, t.KH = 5, t.KW = 3, t.pad = 1;
    CHECK_INT_EQ(dt_conv2d_shape_init(&t, &err), DT_OK); /* exactly the padded size */
    CHECK_INT_EQ(t.OH, 1);
    CHECK_INT_EQ(t.OW, 1);

    t = c, t.pad = 5;
    conv_bad(t, "padding");
    t = c, t.KW = 2, t.pad = 2; /* pad >= KW only */
    conv_bad(t, "padding");
    t = c, t.H = 2, t.pad = 1; /* 5 > 2 + 2 */
    conv_bad(t, "does not fit");
    t = c, t.W = 3, t.pad = 0;
    conv_bad(t, "width");
    t = c, t.B = 0;
    conv_bad(t, "batch");
    t = c, t.C = 0;
    conv_bad(t, "channels");
    t = c, t.K_out = 0;
    conv_bad(t, "out channels");
    t = c, t.H = 0;
    conv_bad(t, "height");
    t = c, t.W = 0;
    conv_bad(t, "width");
    t = c, t.KH = 0;
    conv_bad(t, "kernel 0");
    t = c, t.stride = 0;
    conv_bad(t, "stride 0");
    t = c, t.pad = -1;
    conv_bad(t, "padding -1");

    const struct dt_pool2d_shape p = {
        .B = 2, .H = 28, .W = 28, .C = 6, .K = 3, .stride = 2, .pad = 1};
    struct dt_pool2d_shape u = p;
    CHECK_INT_EQ(dt_pool2d_shape_init(&u, &err), DT_OK);
    CHECK_INT_EQ(u.OH, 14);
    CHECK_INT_EQ(u.OW, 14);
    u = p, u.H = 10, u.W = 10;
    CHECK_INT_EQ(dt_pool2d_shape_init(&u, &err), DT_OK);
    CHECK_INT_EQ(u.OH, 5);
    CHECK_INT_EQ(u.OW, 5);
    u = p, u.K = 2, u.pad = 0;
    CHECK_INT_EQ(dt_pool2d_shape_init(&u, &err), DT_OK);
    CHECK_INT_EQ(u.OH, 14);
    u = p, u.H = 7, u.W = 9, u.K = 2, u.pad = 0;
    CHECK_INT_EQ(dt_pool2d_shape_init(&u, &err), DT_OK);
    CHECK_INT_EQ(u.OH, 3);
    CHECK_INT_EQ(u.OW, 4);

    u = p, u.pad = 3;
    pool_bad(u, "padding");
    u = p, u.H = 1, u.pad = 0; /* 3 > 1 */
    pool_bad(u, "does not fit");
    u = p, u.B = 0;
    pool_bad(u, "batch");
    u = p, u.C = 0;
    pool_bad(u, "channels");
    u = p, u.W = 0;
    pool_bad(u, "width");
    u = p, u.K = 0, u.pad = 0;
    pool_bad(u, "kernel 0");
    u = p, u.stride = 0;
    pool_bad(u, "stride 0");

    /* LeNet on images too small for its layers */
    struct dt_backend *be = cpu(1);
    struct dt_model *m = NULL;
    memset(&err, 0, sizeof err);
    CHECK_INT_EQ(dt_lenet_create(&m, be, 8, 8, false, 10, 2, &err), DT_ERR_CONFIG);
    CHECK(m == NULL);
    CHECK_CONTAINS(err.msg, "8x8");
    dt_backend_destroy(be);
}

/* A pooling op's forward (y from x) and backward (gx from r) against double references at
 * every level and 1 or 3 threads, and the same bits throughout (no control acts on it). */
typedef enum dt_status (*pooling_run_fn)(struct dt_backend *be, float *y, float *gx, const float *x,
                                         const float *r, const void *shape,
                                         const struct dt_policy *pol);
static void pooling_levels(const char *what, pooling_run_fn run, const void *shape, const float *x,
                           const float *r, int64_t nx, int64_t ny, const double *yref,
                           const double *gref, double gtol)
{
    const struct dt_policy pols[] = {level(DT_LEVEL_FAST), level(DT_LEVEL_RUN_TO_RUN),
                                     level(DT_LEVEL_PORTABLE)};
    float *y = falloc(ny), *gx = falloc(nx), *y0 = falloc(ny), *g0 = falloc(nx);
    for (size_t p = 0; p < sizeof pols / sizeof pols[0]; p++)
        for (int threads = 1; threads <= 3; threads += 2) {
            struct dt_backend *be = cpu(threads);
            poison(y, (size_t)ny * sizeof *y);
            poison(gx, (size_t)nx * sizeof *gx);
            CHECK(run(be, y, gx, x, r, shape, &pols[p]) == DT_OK);
            fprintf(stderr, "  %s, policy %s, %d threads\n", what, pols[p].name, threads);
            check_close("forward", y, yref, ny, 1e-6, 1e-5);
            check_close("dL/dx", gx, gref, nx, gtol, 1e-5);
            if (p == 0 && threads == 1) {
                memcpy(y0, y, (size_t)ny * sizeof *y);
                memcpy(g0, gx, (size_t)nx * sizeof *gx);
            }
            CHECK(memcmp(y0, y, (size_t)ny * sizeof *y) == 0);
            CHECK(memcmp(g0, gx, (size_t)nx * sizeof *gx) == 0);
            dt_backend_destroy(be);
        }
    free(y), free(gx), free(y0), free(g0);
}

static enum dt_status run_avgpool(struct dt_backend *be, float *y, float *gx, const float *x,
                                  const float *r, const void *shape, const struct dt_policy *pol)
{
    DT_FORWARD_IF_ERROR(dt_avgpool2d_forward(be, y, x, shape, pol));
    return dt_avgpool2d_backward(be, gx, r, shape, pol);
}

static enum dt_status run_gap(struct dt_backend *be, float *y, float *gx, const float *x,
                              const float *r, const void *shape, const struct dt_policy *pol)
{
    const int64_t *d = shape; /* images, pixels, channels */
    DT_FORWARD_IF_ERROR(dt_global_avgpool_forward(be, y, x, d[0], d[1], d[2], pol));
    return dt_global_avgpool_backward(be, gx, r, d[0], d[1], d[2], pol);
}

/* Average pooling against double precision on every pooling geometry (overlapping and
 * padded windows among them): the forward's means (padding counts as zeros, / K^2) and the
 * backward against dL/dx of L = sum r .* avgpool(x), which is linear in x -- each cell the
 * sum of r over the windows covering it, / K^2 -- at every level and 1 or 3 threads, the
 * same bits throughout (a gather: no control acts). */
DT_TEST(avgpool_gradcheck)
{
    for (int gi = 0; gi < N_POOL_GEOMS; gi++) {
        struct dt_pool2d_shape s = pool_shape(&pool_geoms[gi]);
        const int64_t nx = pool_nx(&s), ny = pool_ny(&s), K2 = s.K * s.K;
        float *x = falloc(nx), *r = falloc(ny);
        double *yref = dalloc(ny), *gref = dalloc(nx);
        fill_distinct(x, nx);
        for (int64_t i = 0; i < ny; i++) r[i] = (float)((i * 5) % 11) - 4.5f;
        for (int64_t i = 0; i < nx; i++) gref[i] = 0;
        for (int64_t b = 0; b < s.B; b++)
            for (int64_t oh = 0; oh < s.OH; oh++)
                for (int64_t ow = 0; ow < s.OW; ow++)
                    for (int64_t c = 0; c < s.C; c++) {
                        const int64_t o = ((b * s.OH + oh) * s.OW + ow) * s.C + c;
                        double sum = 0;
                        for (int64_t kh = 0; kh < s.K; kh++)
                            for (int64_t kw = 0; kw < s.K; kw++) {
                                const int64_t ih = oh * s.stride - s.pad + kh,
                                              iw = ow * s.stride - s.pad + kw;
                                if (ih < 0 || ih >= s.H || iw < 0 || iw >= s.W) continue;
                                const int64_t i = ((b * s.H + ih) * s.W + iw) * s.C + c;
                                sum += x[i];
                                gref[i] += (double)r[o] / (double)K2;
                            }
                        yref[o] = sum / (double)K2;
                    }
        pooling_levels("avgpool", run_avgpool, &s, x, r, nx, ny, yref, gref, 1e-6);
        free(x), free(r), free(yref), free(gref);
    }
}

/* Global average pooling against double precision: the forward's means, and the backward
 * against finite differences of L = sum r .* gap(x) -- at every level and thread count, the
 * same bits (no control acts on it). */
DT_TEST(global_avgpool_gradcheck)
{
    enum { GB = 3, HW = 7 * 7, GC = 5 };
    const int64_t nx = GB * HW * GC, ny = GB * GC;
    float *x = falloc(nx), *r = falloc(ny);
    double *ref = dalloc(ny), *fd = dalloc(nx);
    fill_distinct(x, nx);
    for (int64_t i = 0; i < ny; i++) r[i] = (float)(i % 7) - 2.5f;
    for (int64_t b = 0; b < GB; b++)
        for (int64_t c = 0; c < GC; c++) {
            double sum = 0;
            for (int64_t p = 0; p < HW; p++) sum += x[(b * HW + p) * GC + c];
            ref[b * GC + c] = sum / HW;
        }
    for (int64_t i = 0; i < nx; i++) /* L is linear in x: dL/dx = r[b, c] / HW exactly */
        fd[i] = (double)r[(i / (HW * GC)) * GC + i % GC] / HW;
    const int64_t dims[3] = {GB, HW, GC};
    pooling_levels("global avgpool", run_gap, dims, x, r, nx, ny, ref, fd, 1e-7);
    free(x), free(r), free(ref), free(fd);
}

DT_TEST_MAIN(DT_CASE(conv2d_forward_matches_double), DT_CASE(conv2d_forward_ordered_bits),
             DT_CASE(conv2d_backward_weight_fixed_bits), DT_CASE(conv2d_backward_data_fixed_bits),
             DT_CASE(conv_onednn_path), DT_CASE(global_avgpool_gradcheck),
             DT_CASE(avgpool_gradcheck), DT_CASE(conv2d_backward_gradcheck),
             DT_CASE(maxpool_forward_matches_reference), DT_CASE(maxpool_backward_gradcheck),
             DT_CASE(maxpool_ties), DT_CASE(conv_pool_thread_count_independent),
             DT_CASE(conv_forced_orders), DT_CASE(maxpool_forced_orders),
             DT_CASE(lenet_backward_gradcheck), DT_CASE(shape_errors))
