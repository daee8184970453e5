/* Convolution and max pooling on the CUDA backend, detrain's own kernels and
 * their host functions. Data path (docs/DESIGN.md): nets/backend -> nets/cuda/conv_choose.c
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

#include "determinism/fixed_point.h"
#include "determinism/streams.h" /* dt_forced_permutation: the drawn orders */
#include "nets/conv_elem.h"
#include "nets/cuda/dense_loss.h"
#include "nets/cuda/launch.cuh"

/* ---- kernels and their launchers ---------------------------------------------------------- */

/* Kernels of the CUDA backend's own convolution and max pooling (`conv_algo: own`; the
 * ops below): im2col, the col2im and max-pool scatters as per-cell gathers
 * under `atomics` (nets/conv_elem.h), the atomicAdd scatters of `atomics: float`, and
 * a transpose for cuDNN's weight layout. Every kernel loops grid-stride, so no result
 * depends on the grid or block size except the atomicAdd scatters (arrival order). Every
 * kernel carries __launch_bounds__(1024), so the 1024-thread blocks dt_cuda_set_launch
 * allows always launch (the forced-order gathers need it: 72 registers unbounded). */

/* A failed memset is reported here, not again by the next launch. */
static int zero(float *p, int64_t n, const struct dt_cuda_launch *L)
{
    cudaError_t e = dt_cuda_memset_async(L, p, 0, (size_t)n * sizeof(float), L->stream);
    if (e != cudaSuccess) (void)cudaGetLastError();
    return (int)e;
}

static __global__ void __launch_bounds__(1024)
    im2col_kernel(float *cols, const float *x, struct dt_conv2d_shape s)
{
    const int64_t Kp = s.KH * s.KW * s.C;
    DT_GRID_STRIDE(i, s.B * s.OH * s.OW * Kp)
    cols[i] = dt_conv_patch_elem(x, &s, i / Kp, i % Kp);
}

static __global__ void __launch_bounds__(1024)
    col2im_fixed_kernel(float *dx, struct dt_cuda_fixed_record *rec, const float *dcols,
                        struct dt_conv2d_shape s)
{
    if (rec->first_bad != DT_CUDA_NO_INDEX) return;
    const int shift = dt_fixed_shift_for(dt_bits_float(rec->max_bits), s.KH * s.KW);
    DT_GRID_STRIDE(i, s.B * s.H * s.W * s.C)
    {
        bool bad = false;
        dx[i] = dt_col2im_cell_fixed(dcols, &s, i, shift, &bad);
        if (bad) atomicExch(&rec->bad_term, 1u);
    }
}

/* atomics float: one thread per patch element; in-image elements added to their cell. */
static __global__ void __launch_bounds__(1024)
    col2im_atomic_kernel(float *dx, const float *dcols, struct dt_conv2d_shape s)
{
    const int64_t Kp = s.KH * s.KW * s.C, P = s.OH * s.OW;
    DT_GRID_STRIDE(i, s.B * P * Kp)
    {
        const int64_t r = i / Kp, k = i % Kp;
        const int64_t b = r / P, oh = r % P / s.OW, ow = r % s.OW;
        const int64_t kh = k / (s.KW * s.C), kw = k / s.C % s.KW, c = k % s.C;
        const int64_t ih = oh * s.stride - s.pad + kh, iw = ow * s.stride - s.pad + kw;
        if (ih < 0 || ih >= s.H || iw < 0 || iw >= s.W) continue;
        atomicAdd(&dx[((b * s.H + ih) * s.W + iw) * s.C + c], dcols[i]);
    }
}

/* The ranked gathers are bounded to 1024 threads per block, the most the launch hook
 * allows: unbounded they take more than the 64 registers per thread that leaves (72 on
 * sm_90, 80 on sm_100; maxpool's 69 on sm_80), and such a launch fails. */
static __global__ void __launch_bounds__(1024)
    col2im_ranked_kernel(float *dx, const float *dcols, const int64_t *rank,
                         struct dt_conv2d_shape s)
{
    DT_GRID_STRIDE(i, s.B * s.H * s.W * s.C)
    dx[i] = dt_col2im_cell_ranked(dcols, &s, i, rank);
}

static __global__ void __launch_bounds__(1024)
    invert_permutation_kernel(int64_t *rank, const int64_t *perm, int64_t n)
{
    DT_GRID_STRIDE(t, n)
    rank[perm[t]] = t;
}

static __global__ void __launch_bounds__(1024)
    maxpool_forward_kernel(float *y, int32_t *argmax, const float *x, struct dt_pool2d_shape s)
{
    DT_GRID_STRIDE(o, s.B * s.OH * s.OW * s.C)
    y[o] = dt_maxpool_out(x, &s, o, &argmax[o]);
}

/* Average pooling: a thread an output, dt_avgpool_out; backward a thread an input cell,
 * dt_avgpool_cell (a gather: no atomics at any level). */
static __global__ void __launch_bounds__(1024)
    avgpool_forward_kernel(float *y, const float *x, struct dt_pool2d_shape s)
{
    DT_GRID_STRIDE(o, s.B * s.OH * s.OW * s.C)
    y[o] = dt_avgpool_out(x, &s, o);
}

static __global__ void __launch_bounds__(1024)
    avgpool_backward_kernel(float *dx, const float *dy, struct dt_pool2d_shape s)
{
    DT_GRID_STRIDE(i, s.B * s.H * s.W * s.C)
    dx[i] = dt_avgpool_cell(dy, &s, i);
}

/* Global average pooling: a thread an output (b, c), dt_gap_elem; backward a thread an input
 * element, dt_gap_grad_elem. */
static __global__ void __launch_bounds__(1024)
    gap_forward_kernel(float *y, const float *x, int64_t B, int64_t HW, int64_t C)
{
    DT_GRID_STRIDE(o, B * C)
    y[o] = dt_gap_elem(x + (o / C) * HW * C, HW, C, o % C);
}

static __global__ void __launch_bounds__(1024)
    gap_backward_kernel(float *dx, const float *dy, int64_t B, int64_t HW, int64_t C)
{
    DT_GRID_STRIDE(i, B * HW * C)
    dx[i] = dt_gap_grad_elem(dy[(i / (HW * C)) * C + i % C], HW);
}

static __global__ void __launch_bounds__(1024)
    maxpool_direct_kernel(float *dx, const float *dy, const int32_t *argmax,
                          struct dt_pool2d_shape s)
{
    DT_GRID_STRIDE(i, s.B * s.H * s.W * s.C)
    dx[i] = dt_maxpool_cell_direct(dy, argmax, &s, i);
}

static __global__ void __launch_bounds__(1024)
    maxpool_fixed_kernel(float *dx, struct dt_cuda_fixed_record *rec, const float *dy,
                         const int32_t *argmax, struct dt_pool2d_shape s)
{
    if (rec->first_bad != DT_CUDA_NO_INDEX) return;
    const int64_t per_axis = (s.K + s.stride - 1) / s.stride;
    const int shift = dt_fixed_shift_for(dt_bits_float(rec->max_bits), per_axis * per_axis);
    DT_GRID_STRIDE(i, s.B * s.H * s.W * s.C)
    {
        bool bad = false;
        dx[i] = dt_maxpool_cell_fixed(dy, argmax, &s, i, shift, &bad);
        if (bad) atomicExch(&rec->bad_term, 1u);
    }
}

static __global__ void __launch_bounds__(1024)
    maxpool_atomic_kernel(float *dx, const float *dy, const int32_t *argmax,
                          struct dt_pool2d_shape s)
{
    DT_GRID_STRIDE(o, s.B * s.OH * s.OW * s.C)
    {
        const int64_t c = o % s.C, b = o / (s.C * s.OW * s.OH);
        atomicAdd(&dx[(b * s.H * s.W + argmax[o]) * s.C + c], dy[o]);
    }
}

static __global__ void __launch_bounds__(1024)
    maxpool_ranked_kernel(float *dx, const float *dy, const int32_t *argmax, const int64_t *rank,
                          struct dt_pool2d_shape s)
{
    DT_GRID_STRIDE(i, s.B * s.H * s.W * s.C)
    dx[i] = dt_maxpool_cell_ranked(dy, argmax, &s, i, rank);
}

static __global__ void __launch_bounds__(1024)
    transpose_kernel(float *dst, const float *src, int64_t rows, int64_t cols)
{
    DT_GRID_STRIDE(i, rows * cols) /* i walks dst (cols, rows) */
    dst[i] = src[(i % rows) * cols + i / rows];
}

/* ---- launchers -------------------------------------------------------------------------- */

#define GRID(n) dt_cuda_grid(L, n), L->block_threads, 0, st

/* Sizes for the launches' work (nets/cuda/work.h): a convolution's input cells and its
 * patches (rows x KH KW C); a pooling's input cells and outputs. */
static double w_cells(const struct dt_conv2d_shape *s)
{
    return (double)s->B * (double)s->H * (double)s->W * (double)s->C;
}
static double w_cols(const struct dt_conv2d_shape *s)
{
    return (double)s->B * (double)s->OH * (double)s->OW * (double)s->KH * (double)s->KW *
           (double)s->C;
}
static double w_pool_cells(const struct dt_pool2d_shape *s)
{
    return (double)s->B * (double)s->H * (double)s->W * (double)s->C;
}
static double w_pool_outs(const struct dt_pool2d_shape *s)
{
    return (double)s->B * (double)s->OH * (double)s->OW * (double)s->C;
}

static int dt_cuda_im2col(float *cols, const float *x, const struct dt_conv2d_shape *s,
                          const struct dt_cuda_launch *L)
{
    const dt_cuda_stream st = L->stream;
    DT_LAUNCH(L, dt_work(4.0 * (w_cells(s) + w_cols(s)), 0.0), im2col_kernel,
              GRID(s->B * s->OH * s->OW * s->KH * s->KW * s->C))
    (cols, x, *s);
    return DT_LAUNCHED(L);
}

static int dt_cuda_col2im_fixed(float *dx, struct dt_cuda_fixed_record *rec, const float *dcols,
                                const struct dt_conv2d_shape *s, const struct dt_cuda_launch *L)
{
    const dt_cuda_stream st = L->stream;
    DT_LAUNCH(L,
              dt_work(4.0 * (w_cols(s) + w_cells(s)),
                      DT_W_OPS_FIXED_TERM * w_cols(s) + DT_W_OPS_FIXED_ROUND * w_cells(s)),
              col2im_fixed_kernel, GRID(s->B * s->H * s->W * s->C))
    (dx, rec, dcols, *s);
    return DT_LAUNCHED(L);
}

static int dt_cuda_col2im_atomic(float *dx, const float *dcols, const struct dt_conv2d_shape *s,
                                 const struct dt_cuda_launch *L)
{
    const dt_cuda_stream st = L->stream;
    int e = zero(dx, s->B * s->H * s->W * s->C, L);
    if (e) return e;
    DT_LAUNCH(L, dt_work(4.0 * (w_cols(s) + 2.0 * w_cells(s)), w_cols(s)), col2im_atomic_kernel,
              GRID(s->B * s->OH * s->OW * s->KH * s->KW * s->C))
    (dx, dcols, *s);
    return DT_LAUNCHED(L);
}

static int dt_cuda_col2im_ranked(float *dx, const float *dcols, const int64_t *rank,
                                 const struct dt_conv2d_shape *s, const struct dt_cuda_launch *L)
{
    const dt_cuda_stream st = L->stream;
    DT_LAUNCH(L, dt_work(4.0 * (w_cols(s) + 2.0 * w_cells(s)), w_cols(s)), col2im_ranked_kernel,
              GRID(s->B * s->H * s->W * s->C))
    (dx, dcols, rank, *s);
    return DT_LAUNCHED(L);
}

static int dt_cuda_invert_permutation(int64_t *rank, const int64_t *perm, int64_t n,
                                      const struct dt_cuda_launch *L)
{
    const dt_cuda_stream st = L->stream;
    DT_LAUNCH(L, dt_work(16.0 * (double)n, 0.0), invert_permutation_kernel, GRID(n))(rank, perm, n);
    return DT_LAUNCHED(L);
}

static int dt_cuda_maxpool_forward(float *y, int32_t *argmax, const float *x,
                                   const struct dt_pool2d_shape *s, const struct dt_cuda_launch *L)
{
    const dt_cuda_stream st = L->stream;
    DT_LAUNCH(L,
              dt_work(4.0 * (w_pool_cells(s) + 2.0 * w_pool_outs(s)),
                      w_pool_outs(s) * (double)s->K * (double)s->K),
              maxpool_forward_kernel, GRID(s->B * s->OH * s->OW * s->C))
    (y, argmax, x, *s);
    return DT_LAUNCHED(L);
}

static int dt_cuda_maxpool_backward_direct(float *dx, const float *dy, const int32_t *argmax,
                                           const struct dt_pool2d_shape *s,
                                           const struct dt_cuda_launch *L)
{
    const dt_cuda_stream st = L->stream;
    DT_LAUNCH(L, dt_work(4.0 * (2.0 * w_pool_outs(s) + w_pool_cells(s)), 0.0),
              maxpool_direct_kernel, GRID(s->B * s->H * s->W * s->C))
    (dx, dy, argmax, *s);
    return DT_LAUNCHED(L);
}

static int dt_cuda_maxpool_backward_fixed(float *dx, struct dt_cuda_fixed_record *rec,
                                          const float *dy, const int32_t *argmax,
                                          const struct dt_pool2d_shape *s,
                                          const struct dt_cuda_launch *L)
{
    const dt_cuda_stream st = L->stream;
    DT_LAUNCH(
        L,
        dt_work(4.0 * (2.0 * w_pool_outs(s) + w_pool_cells(s)),
                DT_W_OPS_FIXED_TERM * w_pool_outs(s) + DT_W_OPS_FIXED_ROUND * w_pool_cells(s)),
        maxpool_fixed_kernel, GRID(s->B * s->H * s->W * s->C))
    (dx, rec, dy, argmax, *s);
    return DT_LAUNCHED(L);
}

static int dt_cuda_maxpool_backward_atomic(float *dx, const float *dy, const int32_t *argmax,
                                           const struct dt_pool2d_shape *s,
                                           const struct dt_cuda_launch *L)
{
    const dt_cuda_stream st = L->stream;
    int e = zero(dx, s->B * s->H * s->W * s->C, L);
    if (e) return e;
    DT_LAUNCH(L, dt_work(4.0 * (2.0 * w_pool_outs(s) + 2.0 * w_pool_cells(s)), w_pool_outs(s)),
              maxpool_atomic_kernel, GRID(s->B * s->OH * s->OW * s->C))
    (dx, dy, argmax, *s);
    return DT_LAUNCHED(L);
}

static int dt_cuda_maxpool_backward_ranked(float *dx, const float *dy, const int32_t *argmax,
                                           const int64_t *rank, const struct dt_pool2d_shape *s,
                                           const struct dt_cuda_launch *L)
{
    const dt_cuda_stream st = L->stream;
    DT_LAUNCH(L, dt_work(4.0 * (2.0 * w_pool_outs(s) + 2.0 * w_pool_cells(s)), w_pool_outs(s)),
              maxpool_ranked_kernel, GRID(s->B * s->H * s->W * s->C))
    (dx, dy, argmax, rank, *s);
    return DT_LAUNCHED(L);
}

extern "C" int dt_cuda_transpose(float *dst, const float *src, int64_t rows, int64_t cols,
                                 const struct dt_cuda_launch *L)
{
    const dt_cuda_stream st = L->stream;
    DT_LAUNCH(L, dt_work(8.0 * (double)rows * (double)cols, 0.0), transpose_kernel,
              GRID(rows * cols))
    (dst, src, rows, cols);
    return DT_LAUNCHED(L);
}

/* ---- the ops (declared from their rows of nets/op_list.h in nets/cuda/cuda.h) ----------- */

static int64_t conv_rows(const struct dt_conv2d_shape *s) { return s->B * s->OH * s->OW; }
static int64_t conv_patch(const struct dt_conv2d_shape *s) { return s->KH * s->KW * s->C; }

static float *patches(struct dt_backend *be, const struct dt_conv2d_shape *s)
{
    return (float *)dt_cuda_scratch(be, DT_CUDA_SLOT_CONV_COLS,
                                    (size_t)(conv_rows(s) * conv_patch(s)) * sizeof(float));
}

/* The rank of every item in the CPU's drawn permutation of n items for `salt` (test hook),
 * on the device. Synchronises (the pinned upload buffer is reused). */
static const int64_t *forced_rank_on_device(struct dt_backend *be, int64_t n, uint64_t salt)
{
    struct dt_cuda_ctx *c = dt_cuda(be);
    const size_t bytes = (size_t)n * sizeof(int64_t);
    int64_t *h = (int64_t *)dt_cuda_host_scratch(be, DT_CUDA_SLOT_CONV_SMALL, bytes);
    int64_t *perm = (int64_t *)dt_cuda_scratch(be, DT_CUDA_SLOT_CONV_SMALL, bytes);
    int64_t *rank = (int64_t *)dt_cuda_scratch(be, DT_CUDA_SLOT_CONV_RANK, bytes);
    dt_forced_permutation(h, n, c->forced_order, salt);
    DT_CUDA_CHECK(cudaMemcpyAsync(perm, h, bytes, cudaMemcpyHostToDevice, (cudaStream_t)c->stream));
    if (dt_cuda_launched(be, dt_cuda_invert_permutation(rank, perm, n, &dt_cuda(be)->launch),
                         "forced order"))
        return NULL;
    dt_cuda_sync(be);
    return rank;
}

/* ---- convolution -------------------------------------------------------------------------- */

extern "C" enum dt_status dt_cuda_own_conv2d_forward(struct dt_backend *be, float *y,
                                                     const float *x, const float *w,
                                                     const float *bias,
                                                     const struct dt_conv2d_shape *s,
                                                     const struct dt_policy *pol)
{
    float *cols = patches(be, s);
    DT_FORWARD_IF_ERROR(dt_cuda_launched(be, dt_cuda_im2col(cols, x, s, &dt_cuda(be)->launch),
                                         "conv2d_forward im2col"));
    return dt_cuda_dense_forward(be, y, cols, w, bias, conv_rows(s), conv_patch(s), s->K_out, pol);
}

extern "C" enum dt_status dt_cuda_own_conv2d_backward_weight(struct dt_backend *be, float *dw,
                                                             const float *x, const float *dy,
                                                             const struct dt_conv2d_shape *s,
                                                             const struct dt_policy *pol)
{
    float *cols = patches(be, s);
    DT_FORWARD_IF_ERROR(dt_cuda_launched(be, dt_cuda_im2col(cols, x, s, &dt_cuda(be)->launch),
                                         "conv2d_backward_weight im2col"));
    return dt_cuda_dense_backward_weight(be, dw, cols, dy, conv_rows(s), conv_patch(s), s->K_out,
                                         pol);
}

/* reduction: exact with shards set, own kernels at portable: im2col of the whole batch, then
 * every shard's weight-gradient partials in one launch (dense.cu, the shards' rows times the
 * output positions) -- the bits of a call per shard. Otherwise DT_ERR_UNSUPPORTED: a call
 * per shard (nets/dispatch.c). */
extern "C" enum dt_status dt_cuda_conv2d_backward_weight_shards(struct dt_backend *be, float *dw,
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

extern "C" enum dt_status dt_cuda_own_conv2d_backward_data(struct dt_backend *be, float *dx,
                                                           const float *dy, const float *w,
                                                           const struct dt_conv2d_shape *s,
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
extern "C" enum dt_status dt_cuda_maxpool2d_forward(struct dt_backend *be, float *y,
                                                    int32_t *argmax, const float *x,
                                                    const struct dt_pool2d_shape *s,
                                                    const struct dt_policy *pol)
{
    return dt_cuda_launched(be, dt_cuda_maxpool_forward(y, argmax, x, s, &dt_cuda(be)->launch),
                            "maxpool2d_forward");
}

/* ---- average pooling: every level the CPU's rule and bits -------------------------------- */

extern "C" enum dt_status dt_cuda_avgpool2d_forward(struct dt_backend *be, float *y, const float *x,
                                                    const struct dt_pool2d_shape *s,
                                                    const struct dt_policy *pol)
{
    const struct dt_cuda_launch *L = &dt_cuda(be)->launch;
    const dt_cuda_stream st = L->stream;
    DT_LAUNCH(L,
              dt_work(4.0 * (w_pool_cells(s) + w_pool_outs(s)),
                      w_pool_outs(s) * (double)(s->K * s->K + 4)),
              avgpool_forward_kernel, GRID(s->B * s->OH * s->OW * s->C))
    (y, x, *s);
    return dt_cuda_launched(be, DT_LAUNCHED(L), "avgpool2d_forward");
}

extern "C" enum dt_status dt_cuda_avgpool2d_backward(struct dt_backend *be, float *dx,
                                                     const float *dy,
                                                     const struct dt_pool2d_shape *s,
                                                     const struct dt_policy *pol)
{
    const struct dt_cuda_launch *L = &dt_cuda(be)->launch;
    const dt_cuda_stream st = L->stream;
    const double terms = (double)((s->K + s->stride - 1) / s->stride);
    DT_LAUNCH(L,
              dt_work(4.0 * (w_pool_cells(s) * (1.0 + terms * terms)),
                      w_pool_cells(s) * (terms * terms + 4.0)),
              avgpool_backward_kernel, GRID(s->B * s->H * s->W * s->C))
    (dx, dy, *s);
    return dt_cuda_launched(be, DT_LAUNCHED(L), "avgpool2d_backward");
}

/* ---- global average pooling: every level the CPU's rule and bits ----------------------- */

extern "C" enum dt_status dt_cuda_global_avgpool_forward(struct dt_backend *be, float *y,
                                                         const float *x, int64_t B, int64_t HW,
                                                         int64_t C, const struct dt_policy *pol)
{
    const struct dt_cuda_launch *L = &dt_cuda(be)->launch;
    const dt_cuda_stream st = L->stream;
    DT_LAUNCH(L, dt_work(4.0 * (double)(B * C) * (double)(HW + 1), (double)(B * C * (HW + 4))),
              gap_forward_kernel, GRID(B * C))
    (y, x, B, HW, C);
    return dt_cuda_launched(be, DT_LAUNCHED(L), "global_avgpool_forward");
}

extern "C" enum dt_status dt_cuda_global_avgpool_backward(struct dt_backend *be, float *dx,
                                                          const float *dy, int64_t B, int64_t HW,
                                                          int64_t C, const struct dt_policy *pol)
{
    const struct dt_cuda_launch *L = &dt_cuda(be)->launch;
    const dt_cuda_stream st = L->stream;
    DT_LAUNCH(L, dt_work(4.0 * (double)(B * C) * (double)(HW + 1), (double)(B * HW * C) * 4.0),
              gap_backward_kernel, GRID(B * HW * C))
    (dx, dy, B, HW, C);
    return dt_cuda_launched(be, DT_LAUNCHED(L), "global_avgpool_backward");
}

extern "C" enum dt_status dt_cuda_own_maxpool2d_backward(struct dt_backend *be, float *dx,
                                                         const float *dy, const float *x,
                                                         const float *y, const int32_t *argmax,
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
