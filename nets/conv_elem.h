/* Per-element work of the own convolution and max-pooling ops (`conv_algo: own`), shared by
 * the CUDA kernels (nets/cuda/conv.cu), the CPU's max-pool forward (nets/cpu/pool.c: the
 * first-maximum rule, one function on both devices) and the host unit tests
 * (tests/test_cuda_conv.c), which run these functions in several emulated launch orders and
 * compare them bit for bit with the CPU backend (nets/cpu/conv.c, nets/cpu/pool.c). The CPU's
 * im2col copies whole runs of a row at once (memcpy), the same cells dt_conv_patch_elem names.
 *
 * The CPU scatters (col2im, max-pool backward) become gathers here: one GPU thread per
 * input cell visits the terms that cell receives. Under `atomics: fixed_point` the terms
 * are exact int64 fixed point at the CPU's one per-tensor shift, so their sum -- in any
 * order -- is the CPU's, and so is the one rounding. The forced-order test hook adds a
 * cell's float terms in the order the CPU's drawn permutation would have added them: a
 * cell receives at most one term from each patch row (or output position), so visiting
 * its terms by rank reproduces the CPU's serial scatter exactly. (`atomics: float` is a
 * real scatter by atomicAdd in conv.cu: nondeterministic by design.) */
#ifndef DT_CONV_ELEM_H
#define DT_CONV_ELEM_H

#include <stdbool.h>
#include <stdint.h>

#include "core/hd.h"
#include "determinism/fixed_point.h"
#include "nets/backend.h"

/* ---- convolution: im2col and its transpose (col2im) ---------------------------------- */

/* Element k of patch row r (rows = B*OH*OW, Kp = KH*KW*C, k = (kh*KW + kw)*C + c): the
 * input cell under it, or 0 outside the image -- the CPU's im2col, a copy. */
static inline DT_HD float dt_conv_patch_elem(const float *x, const struct dt_conv2d_shape *s,
                                             int64_t r, int64_t k)
{
    const int64_t P = s->OH * s->OW;
    const int64_t b = r / P, oh = r % P / s->OW, ow = r % s->OW;
    const int64_t kh = k / (s->KW * s->C), kw = k / s->C % s->KW, c = k % s->C;
    const int64_t ih = oh * s->stride - s->pad + kh, iw = ow * s->stride - s->pad + kw;
    if (ih < 0 || ih >= s->H || iw < 0 || iw >= s->W) return 0.0f;
    return x[((b * s->H + ih) * s->W + iw) * s->C + c];
}

/* The output positions o in [0, O) whose window (o*stride - pad .. + K - 1) covers input
 * index i: [*lo, *hi). */
static inline DT_HD void dt_window_range(int64_t i, int64_t K, int64_t stride, int64_t pad,
                                         int64_t O, int64_t *lo, int64_t *hi)
{
    /* o*stride - pad <= i  and  i <= o*stride - pad + K - 1 */
    const int64_t t_hi = i + pad, t_lo = i + pad - K + 1;
    int64_t a = t_lo <= 0 ? 0 : (t_lo + stride - 1) / stride;
    int64_t b = t_hi < 0 ? 0 : t_hi / stride + 1;
    *lo = a;
    *hi = b < O ? b : O;
}

/* Visit the terms input cell i = ((b*H + ih)*W + iw)*C + c receives in col2im: fn(term
 * index in dcols (row*Kp + element), row) for each (kh, kw) whose patch covers it, in
 * (oh, ow) ascending order. A macro so that host and device share one loop. */
#define DT_COL2IM_TERMS(s, i, ROW, IDX, BODY)                                                      \
    do {                                                                                           \
        const int64_t c_ = (i) % (s)->C, iw_ = (i) / (s)->C % (s)->W;                              \
        const int64_t ih_ = (i) / ((s)->C * (s)->W) % (s)->H;                                      \
        const int64_t b_ = (i) / ((s)->C * (s)->W * (s)->H);                                       \
        int64_t oh_lo_, oh_hi_, ow_lo_, ow_hi_;                                                    \
        dt_window_range(ih_, (s)->KH, (s)->stride, (s)->pad, (s)->OH, &oh_lo_, &oh_hi_);           \
        dt_window_range(iw_, (s)->KW, (s)->stride, (s)->pad, (s)->OW, &ow_lo_, &ow_hi_);           \
        for (int64_t oh_ = oh_lo_; oh_ < oh_hi_; oh_++)                                            \
            for (int64_t ow_ = ow_lo_; ow_ < ow_hi_; ow_++) {                                      \
                const int64_t kh_ = ih_ + (s)->pad - oh_ * (s)->stride;                            \
                const int64_t kw_ = iw_ + (s)->pad - ow_ * (s)->stride;                            \
                const int64_t ROW = (b_ * (s)->OH + oh_) * (s)->OW + ow_;                          \
                const int64_t IDX =                                                                \
                    ROW * (s)->KH * (s)->KW * (s)->C + (kh_ * (s)->KW + kw_) * (s)->C + c_;        \
                BODY                                                                               \
            }                                                                                      \
    } while (0)

/* fixed_point: dx[i] = the one rounding of the exact sum of cell i's terms at `shift`
 * (the CPU's: max |dcols| over the whole tensor, KH*KW terms per cell). *bad is set when
 * a term fails to convert, which the shift's bound rules out. */
static inline DT_HD float dt_col2im_cell_fixed(const float *dcols, const struct dt_conv2d_shape *s,
                                               int64_t i, int shift, bool *bad)
{
    uint64_t sum = 0; /* |sum| < 2^63 by the shift's bound: wrap-free two's complement */
    DT_COL2IM_TERMS(s, i, row, idx, {
        (void)row;
        int64_t q = 0;
        if (!dt_fixed_from_float(&q, dcols[idx], shift)) *bad = true;
        sum += (uint64_t)q;
    });
    return dt_fixed_to_float((int64_t)sum, shift);
}

/* Forced order (test hook): +0 plus cell i's terms in increasing rank[row] -- the order in
 * which the CPU's serial scatter over the drawn permutation of rows adds them. */
static inline DT_HD float dt_col2im_cell_ranked(const float *dcols, const struct dt_conv2d_shape *s,
                                                int64_t i, const int64_t *rank)
{
    float acc = 0.0f;
    int64_t prev = -1;
    for (;;) { /* next term by rank: at most KH*KW terms, so a quadratic scan is fine */
        int64_t best = -1, best_idx = 0;
        DT_COL2IM_TERMS(s, i, row, idx, {
            const int64_t rk = rank[row];
            if (rk > prev && (best < 0 || rk < best)) {
                best = rk;
                best_idx = idx;
            }
        });
        if (best < 0) return acc;
        acc = dt_rn_add(acc, dcols[best_idx]);
        prev = best;
    }
}

/* ---- max pooling ----------------------------------------------------------------------- */

/* The window at (ih0, iw0) of channel c in one NHWC image: its first maximum in (kh, kw)
 * order (a later equal value does not replace it; a NaN wins and ends the scan), *argmax =
 * ih*W + iw -- the rule of both devices (the CPU's loops call it per output element, the
 * CUDA kernel through dt_maxpool_out). pad < K, so the window holds an image cell. */
/* One cell of the scan: v (at `cell`) replaces the best so far when it is larger or a NaN,
 * unless a NaN already won (done); a NaN ends the scan. The rule as two expressions that
 * hold for scalars (flags 0/1) and for GCC vectors (masks 0/-1: nets/cpu/pool.c's scan of 8
 * channels at once), so both forms are this one. */
#define DT_MAXPOOL_TAKES(best, done, v) (((done) == 0) & (((v) > (best)) | ((v) != (v))))
#define DT_MAXPOOL_ENDS(v) ((v) != (v))
static inline DT_HD void dt_maxpool_take(float *best, int32_t *best_cell, int32_t *done, float v,
                                         int32_t cell)
{
    const int32_t take = DT_MAXPOOL_TAKES(*best, *done, v);
    *best = take ? v : *best;
    *best_cell = take ? cell : *best_cell;
    *done = *done | DT_MAXPOOL_ENDS(v);
}

/* The window's image cells [kh0, kh1) x [kw0, kw1) of the window at (ih0, iw0). */
static inline DT_HD void dt_maxpool_bounds(const struct dt_pool2d_shape *s, int64_t ih0,
                                           int64_t iw0, int64_t *kh0, int64_t *kh1, int64_t *kw0,
                                           int64_t *kw1)
{
    *kh0 = ih0 < 0 ? -ih0 : 0, *kh1 = ih0 + s->K > s->H ? s->H - ih0 : s->K;
    *kw0 = iw0 < 0 ? -iw0 : 0, *kw1 = iw0 + s->K > s->W ? s->W - iw0 : s->K;
}

static inline DT_HD float dt_maxpool_window(const float *img, const struct dt_pool2d_shape *s,
                                            int64_t c, int64_t ih0, int64_t iw0, int32_t *argmax)
{
    const int64_t C = s->C;
    int64_t kh0, kh1, kw0, kw1;
    dt_maxpool_bounds(s, ih0, iw0, &kh0, &kh1, &kw0, &kw1);
    int32_t best_cell = (int32_t)((ih0 + kh0) * s->W + iw0 + kw0);
    float best = img[best_cell * C + c];
    int32_t done = 0;
    for (int64_t kh = kh0; kh < kh1; kh++)
        for (int64_t kw = kw0; kw < kw1; kw++) {
            const int64_t cell = (ih0 + kh) * s->W + iw0 + kw;
            dt_maxpool_take(&best, &best_cell, &done, img[cell * C + c], (int32_t)cell);
        }
    *argmax = best_cell;
    return best;
}

/* Average pooling, output element o = ((b*OH + oh)*OW + ow)*C + c: its window's cells in
 * (kh, kw) order summed from +0 (padding cells count as zeros: the divisor is K^2 always,
 * PyTorch's count_include_pad), one rounding an add, then one division by K^2. */
static inline DT_HD float dt_avgpool_out(const float *x, const struct dt_pool2d_shape *s, int64_t o)
{
    const int64_t C = s->C, c = o % C, ow = o / C % s->OW, oh = o / (C * s->OW) % s->OH;
    const int64_t b = o / (C * s->OW * s->OH);
    const float *img = x + b * s->H * s->W * C;
    const int64_t ih0 = oh * s->stride - s->pad, iw0 = ow * s->stride - s->pad;
    float sum = 0.0f;
    for (int64_t kh = 0; kh < s->K; kh++) {
        const int64_t ih = ih0 + kh;
        if (ih < 0 || ih >= s->H) continue;
        for (int64_t kw = 0; kw < s->K; kw++) {
            const int64_t iw = iw0 + kw;
            if (iw >= 0 && iw < s->W) sum = dt_rn_add(sum, img[(ih * s->W + iw) * C + c]);
        }
    }
    return sum / (float)(s->K * s->K);
}

/* Its gradient at input cell i = ((b*H + ih)*W + iw)*C + c: the output gradients of every
 * window that covers the cell, in (oh, ow) order from +0, divided by K^2 -- a gather, not a
 * scatter: the same bits at every level, with overlapping windows or without. */
static inline DT_HD float dt_avgpool_cell(const float *dy, const struct dt_pool2d_shape *s,
                                          int64_t i)
{
    const int64_t C = s->C, c = i % C, iw = i / C % s->W, ih = i / (C * s->W) % s->H;
    const int64_t b = i / (C * s->W * s->H);
    int64_t oh_lo, oh_hi, ow_lo, ow_hi;
    dt_window_range(ih, s->K, s->stride, s->pad, s->OH, &oh_lo, &oh_hi);
    dt_window_range(iw, s->K, s->stride, s->pad, s->OW, &ow_lo, &ow_hi);
    float sum = 0.0f;
    for (int64_t oh = oh_lo; oh < oh_hi; oh++)
        for (int64_t ow = ow_lo; ow < ow_hi; ow++)
            sum = dt_rn_add(sum, dy[((b * s->OH + oh) * s->OW + ow) * C + c]);
    return sum / (float)(s->K * s->K);
}

/* Global average pooling of channel c of one NHWC image of HW pixels: the sum from +0 in
 * pixel order, one rounding an add, then one division by HW (exact in float below 2^24
 * pixels) -- the CPU's loop and the CUDA kernel both call it. */
static inline DT_HD float dt_gap_elem(const float *img, int64_t HW, int64_t C, int64_t c)
{
    float sum = 0.0f;
    for (int64_t p = 0; p < HW; p++) sum = dt_rn_add(sum, img[p * C + c]);
    return sum / (float)HW;
}

/* Its gradient: each pixel's share of the channel's output gradient. */
static inline DT_HD float dt_gap_grad_elem(float dy, int64_t HW) { return dy / (float)HW; }

/* Output element o = ((b*OH + oh)*OW + ow)*C + c: dt_maxpool_window of its window. */
static inline DT_HD float dt_maxpool_out(const float *x, const struct dt_pool2d_shape *s, int64_t o,
                                         int32_t *argmax)
{
    const int64_t C = s->C, c = o % C, ow = o / C % s->OW, oh = o / (C * s->OW) % s->OH;
    const int64_t b = o / (C * s->OW * s->OH);
    return dt_maxpool_window(x + b * s->H * s->W * C, s, c, oh * s->stride - s->pad,
                             ow * s->stride - s->pad, argmax);
}

/* Visit the max-pool backward terms input cell i = ((b*H + ih)*W + iw)*C + c receives:
 * every output element whose window covers the cell and whose argmax is the cell, as
 * (output position p = (b*OH + oh)*OW + ow, output element index OUT). */
#define DT_POOL_TERMS(s, argmax, i, POS, OUT, BODY)                                                \
    do {                                                                                           \
        const int64_t c_ = (i) % (s)->C, iw_ = (i) / (s)->C % (s)->W;                              \
        const int64_t ih_ = (i) / ((s)->C * (s)->W) % (s)->H;                                      \
        const int64_t b_ = (i) / ((s)->C * (s)->W * (s)->H);                                       \
        const int32_t cell_ = (int32_t)(ih_ * (s)->W + iw_);                                       \
        int64_t oh_lo_, oh_hi_, ow_lo_, ow_hi_;                                                    \
        dt_window_range(ih_, (s)->K, (s)->stride, (s)->pad, (s)->OH, &oh_lo_, &oh_hi_);            \
        dt_window_range(iw_, (s)->K, (s)->stride, (s)->pad, (s)->OW, &ow_lo_, &ow_hi_);            \
        for (int64_t oh_ = oh_lo_; oh_ < oh_hi_; oh_++)                                            \
            for (int64_t ow_ = ow_lo_; ow_ < ow_hi_; ow_++) {                                      \
                const int64_t POS = (b_ * (s)->OH + oh_) * (s)->OW + ow_;                          \
                const int64_t OUT = POS * (s)->C + c_;                                             \
                if ((argmax)[OUT] != cell_) continue;                                              \
                BODY                                                                               \
            }                                                                                      \
    } while (0)

/* Windows that do not overlap (K <= stride): the cell's one term, or +0 -- the CPU's
 * direct assignment (a -0 term stays -0). */
static inline DT_HD float dt_maxpool_cell_direct(const float *dy, const int32_t *argmax,
                                                 const struct dt_pool2d_shape *s, int64_t i)
{
    float v = 0.0f;
    DT_POOL_TERMS(s, argmax, i, pos, out, {
        (void)pos;
        v = dy[out];
    });
    return v;
}

/* fixed_point: the one rounding of the exact sum of the cell's terms at `shift` (max |dy|
 * over the tensor, ceil(K/stride)^2 terms per cell: the CPU's). */
static inline DT_HD float dt_maxpool_cell_fixed(const float *dy, const int32_t *argmax,
                                                const struct dt_pool2d_shape *s, int64_t i,
                                                int shift, bool *bad)
{
    uint64_t sum = 0;
    DT_POOL_TERMS(s, argmax, i, pos, out, {
        (void)pos;
        int64_t q = 0;
        if (!dt_fixed_from_float(&q, dy[out], shift)) *bad = true;
        sum += (uint64_t)q;
    });
    return dt_fixed_to_float((int64_t)sum, shift);
}

/* Forced order (test hook): +0 plus the cell's terms in increasing rank[position]. */
static inline DT_HD float dt_maxpool_cell_ranked(const float *dy, const int32_t *argmax,
                                                 const struct dt_pool2d_shape *s, int64_t i,
                                                 const int64_t *rank)
{
    float acc = 0.0f;
    int64_t prev = -1;
    for (;;) {
        int64_t best = -1, best_out = 0;
        DT_POOL_TERMS(s, argmax, i, pos, out, {
            const int64_t rk = rank[pos];
            if (rk > prev && (best < 0 || rk < best)) {
                best = rk;
                best_out = out;
            }
        });
        if (best < 0) return acc;
        acc = dt_rn_add(acc, dy[best_out]);
        prev = best;
    }
}

#endif
