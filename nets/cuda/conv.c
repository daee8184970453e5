/* Convolution and max pooling on the CUDA backend, detrain's own kernels (host side; kernels
 * in nets/cuda/conv.cu). Data path (docs/DESIGN.md): nets/backend -> nets/cuda/conv_choose.c
 * (the `conv_algo` control picks the implementation) -> here (own) or nets/cuda/cudnn_conv.c
 * (cuDNN, which falls back to here); the other controls act inside it:
 *
 *   own            detrain's kernels, op for op the CPU backend's (nets/cpu/conv.c, pool.c):
 *                  forward          im2col, then dt_cuda_dense_forward (`math`: ordered at
 *                                   portable, the CPU's bits; cuBLAS otherwise);
 *                  backward-weight  im2col, then dt_cuda_dense_backward_weight (`reduction`:
 *                                   canonical chunks and the fixed tree, or atomicAdd);
 *                  backward-data    dt_cuda_dense_backward_data into patch gradients, then
 *                                   col2im under `atomics`: fixed_point -> a per-cell gather
 *                                   of exact int64 terms at the CPU's per-tensor shift (the
 *                                   CPU's bits, no atomics); float -> atomicAdd per term;
 *                  max pooling      forward: the CPU's first-maximum rule per output;
 *                                   backward like col2im (and a direct copy when windows
 *                                   do not overlap, as on the CPU).
 *   autotune       cuDNN, the algorithm chosen by timing (cudnnFind*), TF32 allowed;
 *   deterministic  cuDNN, only algorithms cuDNN reports deterministic, chosen by heuristic
 *                  with FP32 (FMA) math; max-pool backward CUDNN_POOLING_MAX_DETERMINISTIC.
 *                  Under both cuDNN modes max-pool forward stays detrain's kernel (no
 *                  arithmetic: the same bits everywhere) and the bias add is its own.
 * The fixed-point scatters read one small record back (non-finite input), one wait each,
 * or at the step's end when checks are deferred (status.c). */
#include <cuda_runtime_api.h>
#include <stdio.h>

#include "determinism/streams.h" /* dt_forced_permutation: the drawn orders */
#include "nets/cuda/conv_launch.h"
#include "nets/cuda/dense_loss.h"

static int64_t conv_rows(const struct dt_conv2d_shape *s) { return s->B * s->OH * s->OW; }
static int64_t conv_patch(const struct dt_conv2d_shape *s) { return s->KH * s->KW * s->C; }

static float *patches(struct dt_backend *be, const struct dt_conv2d_shape *s)
{
    return dt_cuda_scratch(be, DT_CUDA_SLOT_CONV_COLS,
                           (size_t)(conv_rows(s) * conv_patch(s)) * sizeof(float));
}

/* The rank of every item in the CPU's drawn permutation of n items for `salt` (test hook),
 * on the device. Synchronises (the pinned upload buffer is reused). */
static const int64_t *forced_rank_on_device(struct dt_backend *be, int64_t n, uint64_t salt)
{
    struct dt_cuda_ctx *c = dt_cuda(be);
    const size_t bytes = (size_t)n * sizeof(int64_t);
    int64_t *h = dt_cuda_host_scratch(be, DT_CUDA_SLOT_CONV_SMALL, bytes);
    int64_t *perm = dt_cuda_scratch(be, DT_CUDA_SLOT_CONV_SMALL, bytes);
    int64_t *rank = dt_cuda_scratch(be, DT_CUDA_SLOT_CONV_RANK, bytes);
    dt_forced_permutation(h, n, c->forced_order, salt);
    DT_CUDA_CHECK(cudaMemcpyAsync(perm, h, bytes, cudaMemcpyHostToDevice, (cudaStream_t)c->stream));
    if (dt_cuda_launched(be, dt_cuda_invert_permutation(rank, perm, n, &dt_cuda(be)->launch),
                         "forced order"))
        return NULL;
    dt_cuda_sync(be);
    return rank;
}

/* ---- convolution -------------------------------------------------------------------------- */

enum dt_status dt_cuda_own_conv2d_forward(struct dt_backend *be, float *y, const float *x,
                                          const float *w, const float *bias,
                                          const struct dt_conv2d_shape *s,
                                          const struct dt_policy *pol)
{
    float *cols = patches(be, s);
    DT_FORWARD_IF_ERROR(dt_cuda_launched(be, dt_cuda_im2col(cols, x, s, &dt_cuda(be)->launch),
                                         "conv2d_forward im2col"));
    return dt_cuda_dense_forward(be, y, cols, w, bias, conv_rows(s), conv_patch(s), s->K_out, pol);
}

enum dt_status dt_cuda_own_conv2d_backward_weight(struct dt_backend *be, float *dw, const float *x,
                                                  const float *dy, const struct dt_conv2d_shape *s,
                                                  const struct dt_policy *pol)
{
    float *cols = patches(be, s);
    DT_FORWARD_IF_ERROR(dt_cuda_launched(be, dt_cuda_im2col(cols, x, s, &dt_cuda(be)->launch),
                                         "conv2d_backward_weight im2col"));
    return dt_cuda_dense_backward_weight(be, dw, cols, dy, conv_rows(s), conv_patch(s), s->K_out,
                                         pol);
}

/* reduction: exact with shards set, own kernels at portable: im2col of the whole batch, then
 * every shard's weight-gradient partials in one launch (dense.c, the shards' rows times the
 * output positions) -- the bits of a call per shard. Otherwise DT_ERR_UNSUPPORTED: a call
 * per shard (nets/dispatch.c). */
enum dt_status dt_cuda_conv2d_backward_weight_shards(struct dt_backend *be, float *dw,
                                                     const float *x, const float *dy,
                                                     const struct dt_conv2d_shape *s,
                                                     const struct dt_policy *pol)
{
    const struct dt_shards *sh = &be->shards; /* a shard's rows: its examples' positions */
    const int64_t widest = dt_cuda_widest_shard(sh->row, sh->count, s->OH * s->OW);
    if (dt_conv_algo_library(pol) || !dt_cuda(be)->one_pass || !dt_math_portable(pol) ||
        dt_math_exact(pol) || !dt_cuda_wgrad_one_launch_fits(sh->count, widest))
        return DT_ERR_UNSUPPORTED;
    float *cols = patches(be, s);
    DT_FORWARD_IF_ERROR(dt_cuda_launched(be, dt_cuda_im2col(cols, x, s, &dt_cuda(be)->launch),
                                         "conv2d_backward_weight im2col"));
    return dt_cuda_dense_backward_weight_shards(be, dw, cols, dy, conv_rows(s), conv_patch(s),
                                                s->K_out, pol);
}

enum dt_status dt_cuda_own_conv2d_backward_data(struct dt_backend *be, float *dx, const float *dy,
                                                const float *w, const struct dt_conv2d_shape *s,
                                                const struct dt_policy *pol)
{
    struct dt_cuda_ctx *c = dt_cuda(be);
    const int64_t rows = conv_rows(s), Kp = conv_patch(s);
    float *dcols = patches(be, s);
    DT_FORWARD_IF_ERROR(dt_cuda_dense_backward_data(be, dcols, dy, w, rows, Kp, s->K_out, pol));
    if (dt_atomics_exact(pol)) {
        bool deferred = false;
        struct dt_cuda_fixed_record *rec =
            dt_cuda_check_record(be, DT_CUDA_CHECK_SCATTER, "conv2d backward-data", Kp,
                                 DT_CUDA_SLOT_CONV_SMALL, &deferred);
        DT_FORWARD_IF_ERROR(
            dt_cuda_launched(be, dt_cuda_fixed_scan(rec, dcols, rows * Kp, &dt_cuda(be)->launch),
                             "conv2d_backward_data scan"));
        DT_FORWARD_IF_ERROR(
            dt_cuda_launched(be, dt_cuda_col2im_fixed(dx, rec, dcols, s, &dt_cuda(be)->launch),
                             "conv2d_backward_data col2im"));
        if (deferred) return DT_OK;
        return dt_cuda_check_now(be, rec, DT_CUDA_CHECK_SCATTER, "conv2d backward-data", Kp,
                                 DT_CUDA_SLOT_CONV_SMALL);
    }
    if (c->forced_order) {
        const int64_t *rank = forced_rank_on_device(be, rows, DT_FORCED_SUMMANDS);
        if (!rank) return DT_ERR_INTERNAL;
        return dt_cuda_launched(be, dt_cuda_col2im_ranked(dx, dcols, rank, s, &dt_cuda(be)->launch),
                                "conv2d_backward_data col2im forced");
    }
    return dt_cuda_launched(be, dt_cuda_col2im_atomic(dx, dcols, s, &dt_cuda(be)->launch),
                            "conv2d_backward_data col2im atomic");
}

/* ---- max pooling -------------------------------------------------------------------------- */

/* Every level: no arithmetic, the CPU's rule and bits (cuDNN's forward would give the same
 * maxima but no argmax for the own backward). */
enum dt_status dt_cuda_maxpool2d_forward(struct dt_backend *be, float *y, int32_t *argmax,
                                         const float *x, const struct dt_pool2d_shape *s,
                                         const struct dt_policy *pol)
{
    return dt_cuda_launched(be, dt_cuda_maxpool_forward(y, argmax, x, s, &dt_cuda(be)->launch),
                            "maxpool2d_forward");
}

enum dt_status dt_cuda_own_maxpool2d_backward(struct dt_backend *be, float *dx, const float *dy,
                                              const float *x, const float *y, const int32_t *argmax,
                                              const struct dt_pool2d_shape *s,
                                              const struct dt_policy *pol)
{
    struct dt_cuda_ctx *c = dt_cuda(be);
    if (s->K <= s->stride)
        return dt_cuda_launched(
            be, dt_cuda_maxpool_backward_direct(dx, dy, argmax, s, &dt_cuda(be)->launch),
            "maxpool2d_backward");
    if (dt_atomics_exact(pol)) {
        bool deferred = false;
        struct dt_cuda_fixed_record *rec = dt_cuda_check_record(
            be, DT_CUDA_CHECK_SCATTER, "maxpool2d backward", 0, DT_CUDA_SLOT_CONV_SMALL, &deferred);
        DT_FORWARD_IF_ERROR(dt_cuda_launched(
            be, dt_cuda_fixed_scan(rec, dy, s->B * s->OH * s->OW * s->C, &dt_cuda(be)->launch),
            "maxpool2d_backward scan"));
        DT_FORWARD_IF_ERROR(dt_cuda_launched(
            be, dt_cuda_maxpool_backward_fixed(dx, rec, dy, argmax, s, &dt_cuda(be)->launch),
            "maxpool2d_backward fixed point"));
        if (deferred) return DT_OK;
        return dt_cuda_check_now(be, rec, DT_CUDA_CHECK_SCATTER, "maxpool2d backward", 0,
                                 DT_CUDA_SLOT_CONV_SMALL);
    }
    if (c->forced_order) {
        const int64_t *rank = forced_rank_on_device(be, s->B * s->OH * s->OW, DT_FORCED_POSITIONS);
        if (!rank) return DT_ERR_INTERNAL;
        return dt_cuda_launched(
            be, dt_cuda_maxpool_backward_ranked(dx, dy, argmax, rank, s, &dt_cuda(be)->launch),
            "maxpool2d_backward forced");
    }
    return dt_cuda_launched(
        be, dt_cuda_maxpool_backward_atomic(dx, dy, argmax, s, &dt_cuda(be)->launch),
        "maxpool2d_backward atomic");
}
