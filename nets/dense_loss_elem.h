/* Per-element arithmetic of the dense layer and softmax cross-entropy, shared by the CUDA
 * kernels (nets/cuda/dense.cu, nets/cuda/loss.cu), the CPU backend (nets/cpu/loss.c: the
 * softmax cross-entropy row and its gradient are these functions) and the host unit tests
 * (tests/test_cuda_dense.c), which compare them bit for bit with the CPU backend: the only
 * check of the portable kernels' arithmetic that runs without a GPU.
 * Every function does exactly the CPU reference's operations in the CPU's order
 * (nets/cpu/dense.c, nets/cpu/loss.c): sums start from +0 and add terms in index order,
 * a product and a sum are two roundings (explicit _rn intrinsics on the device). */
#ifndef DT_DENSE_LOSS_ELEM_H
#define DT_DENSE_LOSS_ELEM_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/hd.h"
#include "determinism/portable_math.h"

/* ---- dense layer ---------------------------------------------------------------------- */

/* acc + a*b in two roundings: one step of every ordered sum (the CPU's c = c + a * b under
 * -ffp-contract=off). */
static inline DT_HDI float dt_dense_mac(float acc, float a, float b)
{
    return dt_rn_add(acc, dt_rn_mul(a, b));
}

/* Element e of m partials stored `stride` floats apart, added from +0 in the order perm
 * gives (the forced-order test hook of `reduction: unordered` and `atomics: float`). */
static inline DT_HD float dt_sum_in_order(const float *p, const int64_t *perm, int64_t m,
                                          int64_t stride, int64_t e)
{
    float acc = 0.0f;
    for (int64_t t = 0; t < m; t++) acc = dt_rn_add(acc, p[perm[t] * stride + e]);
    return acc;
}

/* ---- softmax cross-entropy ------------------------------------------------------------ */

static inline DT_HD float dt_softmax_log(float x, bool portable)
{
    return portable ? dt_log_portable(x) : logf(x);
}

/* One row of softmax cross-entropy: m = the first maximum of z (strict >) at *arg;
 * p[c] = exp(z[c] - m), s = their sum ascending from +0; p[c] = p[c] / s; returns
 * log(s) - (z[y] - m). portable: detrain's exp/log (the same bits everywhere), else the
 * platform's expf/logf. z, p are (C); y in [0, C). */
static inline DT_HD float dt_softmax_xent_row(float *p, int64_t *arg, const float *z, int32_t y,
                                              int64_t C, bool portable)
{
    float m = z[0];
    int64_t a = 0;
    for (int64_t c = 1; c < C; c++)
        if (z[c] > m) {
            m = z[c];
            a = c;
        }
    /* the exps apart from their serial sum, and the two exps apart, so that on the CPU the
     * exp loop vectorises (nets/cpu/loss.c); the same operations, the same bits */
    if (portable)
        for (int64_t c = 0; c < C; c++) p[c] = dt_exp_portable(dt_rn_sub(z[c], m));
    else
        for (int64_t c = 0; c < C; c++) p[c] = expf(dt_rn_sub(z[c], m));
    float s = 0.0f;
    for (int64_t c = 0; c < C; c++) s = dt_rn_add(s, p[c]);
    for (int64_t c = 0; c < C; c++) p[c] = dt_rn_div(p[c], s);
    *arg = a;
    return dt_rn_sub(dt_softmax_log(s, portable), dt_rn_sub(z[y], m));
}

/* dlogits = (p - onehot) * inv_b, inv_b = 1.0f / (float)B rounded once by the caller. */
static inline DT_HDI float dt_softmax_xent_grad_elem(float p, bool is_label, float inv_b)
{
    return dt_rn_mul(dt_rn_sub(p, is_label ? 1.0f : 0.0f), inv_b);
}

#endif
