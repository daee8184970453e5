/* Batch normalisation's arithmetic, one place for the CPU ops (nets/cpu/norm.c), the CUDA
 * kernels (nets/cuda/norm.cu) and the tests (nets/op_list.h, batchnorm_*).
 *
 * x is (rows, C), NHWC flattened: a channel's statistics are over the rows of one group --
 * a canonical shard of the batch (nets/net.c) -- and every sum over them is the fixed order
 * of determinism/reduce.h: chunks of DT_REDUCE_CHUNK rows, each summed from +0 in row order,
 * the chunk partials combined by the pairwise tree. The order depends on the rows alone, so
 * the bits do not follow the thread count, the grid or the device; each product and quotient
 * is rounded on its own (dt_rn_*: no contraction into a fused multiply-add).
 *
 *   forward    mean = sum x / n;  var = sum (x - mean)^2 / n (biased, two passes);
 *              rstd = 1 / sqrt(var + eps);  y = (x - mean) rstd gamma + beta
 *   backward   xhat = (x - mean) rstd;  a = sum dy / n;  b = sum dy xhat / n;
 *              dx = gamma rstd ((dy - a) - xhat b);  gx = dy xhat (gamma's terms)
 *   running    r = (1 - momentum) r + momentum s, group after group in order; the
 *              variance's s the group's unbiased one, var n / (n - 1) */
#ifndef DT_BATCHNORM_ELEM_H
#define DT_BATCHNORM_ELEM_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/hd.h"
#include "determinism/reduce.h"

#define DT_BN_EPS 1e-5f     /* PyTorch's default */
#define DT_BN_MOMENTUM 0.1f /* PyTorch's default */

/* The rows [r0, r1) of chunk c of n rows. */
static inline DT_HD int64_t dt_bn_chunk_end(int64_t c, int64_t n)
{
    const int64_t e = (c + 1) * DT_REDUCE_CHUNK;
    return e < n ? e : n;
}

static inline DT_HD float dt_bn_xhat(float x, float mean, float rstd)
{
    return dt_rn_mul(x - mean, rstd);
}

/* A statistic's term: x itself (the mean's sum) or (x - mean)^2 (the variance's). */
static inline DT_HD float dt_bn_term(float x, float mean, bool sq)
{
    return sq ? dt_rn_mul(x - mean, x - mean) : x;
}

/* Chunk c's partial of channel ch: its terms summed from +0 in row order (the CPU runs the
 * same loop for every channel at once, row by row). */
static inline DT_HD float dt_bn_chunk_sum(const float *x, int64_t n, int64_t C, int64_t c,
                                          int64_t ch, float mean, bool sq)
{
    float s = 0.0f;
    for (int64_t r = c * DT_REDUCE_CHUNK; r < dt_bn_chunk_end(c, n); r++)
        s += dt_bn_term(x[r * C + ch], mean, sq);
    return s;
}

/* gamma's term of one element (gx), the gradient sums' second term: dy xhat. */
static inline DT_HD float dt_bn_gamma_term(float dy, float xhat) { return dt_rn_mul(dy, xhat); }

static inline DT_HD float dt_bn_grad_term(float dy, float x, float mean, float rstd)
{
    return dt_bn_gamma_term(dy, dt_bn_xhat(x, mean, rstd));
}

/* Chunk c's partials of channel ch's sum dy (*a) and sum dy xhat (*b). */
static inline DT_HD void dt_bn_chunk_grad_sums(float *a, float *b, const float *dy, const float *x,
                                               int64_t n, int64_t C, int64_t c, int64_t ch,
                                               float mean, float rstd)
{
    float sa = 0.0f, sb = 0.0f;
    for (int64_t r = c * DT_REDUCE_CHUNK; r < dt_bn_chunk_end(c, n); r++) {
        const float g = dy[r * C + ch];
        sa += g;
        sb += dt_bn_grad_term(g, x[r * C + ch], mean, rstd);
    }
    *a = sa;
    *b = sb;
}

/* A channel's sum (the tree's result) over n rows divided by n: a mean or the variance. */
static inline DT_HD float dt_bn_per_row(float sum, int64_t n) { return dt_rn_div(sum, (float)n); }

static inline DT_HD float dt_bn_rstd(float var, float eps)
{
    return dt_rn_div(1.0f, sqrtf(var + eps)); /* sqrtf correctly rounded on both devices */
}

static inline DT_HD float dt_bn_out(float x, float mean, float rstd, float gamma, float beta)
{
    return dt_rn_mul(dt_bn_xhat(x, mean, rstd), gamma) + beta;
}

/* A channel's factor of the input gradient: gamma rstd. */
static inline DT_HD float dt_bn_grad_scale(float gamma, float rstd)
{
    return dt_rn_mul(gamma, rstd);
}

/* The input gradient of one element; k the channel's dt_bn_grad_scale, a and b its sums
 * divided by n. */
static inline DT_HD float dt_bn_grad(float dy, float xhat, float k, float a, float b)
{
    return dt_rn_mul(k, (dy - a) - dt_rn_mul(xhat, b));
}

/* Rows of group g of `groups` over a batch of `batch` examples of per_example rows each:
 * the canonical cut of nets/step.h (batch and groups below 2^31: the product fits). */
static inline DT_HD int64_t dt_bn_group_rows(int64_t g, int64_t groups, int64_t batch,
                                             int64_t per_example)
{
    return ((g + 1) * batch / groups - g * batch / groups) * per_example;
}

/* One group's move of a running statistic: r' = (1 - momentum) r + momentum s. */
static inline DT_HD float dt_bn_running(float r, float s, float momentum)
{
    return dt_rn_mul(1.0f - momentum, r) + dt_rn_mul(momentum, s);
}

/* The unbiased variance of n > 1 rows from the biased one (n / (n - 1) rounded once). */
static inline DT_HD float dt_bn_unbiased(float var, int64_t n)
{
    return n > 1 ? dt_rn_mul(var, (float)((double)n / (double)(n - 1))) : var;
}

#endif
