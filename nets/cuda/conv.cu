/* Kernels of the CUDA backend's own convolution and max pooling (`conv_algo: own`; host
 * side: nets/cuda/conv.c): im2col, the col2im and max-pool scatters as per-cell gathers
 * under `atomics` (nets/conv_elem.h), the atomicAdd scatters of `atomics: float`, and
 * a transpose for cuDNN's weight layout. Every kernel loops grid-stride, so no result
 * depends on the grid or block size except the atomicAdd scatters (arrival order). Every
 * kernel carries __launch_bounds__(1024), so the 1024-thread blocks dt_cuda_set_launch
 * allows always launch (the forced-order gathers need it: 72 registers unbounded). */
#include "determinism/fixed_point.h"
#include "nets/conv_elem.h"
#include "nets/cuda/conv_launch.h"
#include "nets/cuda/launch.cuh"

static int launched(void) { return (int)cudaGetLastError(); }

/* A failed memset is reported here, not again by the next launch. */
static int zero(float *p, int64_t n, cudaStream_t st)
{
    cudaError_t e = cudaMemsetAsync(p, 0, (size_t)n * sizeof(float), st);
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

extern "C" int dt_cuda_im2col(float *cols, const float *x, const struct dt_conv2d_shape *s,
                              const struct dt_cuda_launch *L)
{
    const dt_cuda_stream st = L->stream;
    im2col_kernel<<<GRID(s->B * s->OH * s->OW * s->KH * s->KW * s->C)>>>(cols, x, *s);
    return launched();
}

extern "C" int dt_cuda_col2im_fixed(float *dx, struct dt_cuda_fixed_record *rec, const float *dcols,
                                    const struct dt_conv2d_shape *s, const struct dt_cuda_launch *L)
{
    const dt_cuda_stream st = L->stream;
    col2im_fixed_kernel<<<GRID(s->B * s->H * s->W * s->C)>>>(dx, rec, dcols, *s);
    return launched();
}

extern "C" int dt_cuda_col2im_atomic(float *dx, const float *dcols, const struct dt_conv2d_shape *s,
                                     const struct dt_cuda_launch *L)
{
    const dt_cuda_stream st = L->stream;
    int e = zero(dx, s->B * s->H * s->W * s->C, st);
    if (e) return e;
    col2im_atomic_kernel<<<GRID(s->B * s->OH * s->OW * s->KH * s->KW * s->C)>>>(dx, dcols, *s);
    return launched();
}

extern "C" int dt_cuda_col2im_ranked(float *dx, const float *dcols, const int64_t *rank,
                                     const struct dt_conv2d_shape *s,
                                     const struct dt_cuda_launch *L)
{
    const dt_cuda_stream st = L->stream;
    col2im_ranked_kernel<<<GRID(s->B * s->H * s->W * s->C)>>>(dx, dcols, rank, *s);
    return launched();
}

extern "C" int dt_cuda_invert_permutation(int64_t *rank, const int64_t *perm, int64_t n,
                                          const struct dt_cuda_launch *L)
{
    const dt_cuda_stream st = L->stream;
    invert_permutation_kernel<<<GRID(n)>>>(rank, perm, n);
    return launched();
}

extern "C" int dt_cuda_maxpool_forward(float *y, int32_t *argmax, const float *x,
                                       const struct dt_pool2d_shape *s,
                                       const struct dt_cuda_launch *L)
{
    const dt_cuda_stream st = L->stream;
    maxpool_forward_kernel<<<GRID(s->B * s->OH * s->OW * s->C)>>>(y, argmax, x, *s);
    return launched();
}

extern "C" int dt_cuda_maxpool_backward_direct(float *dx, const float *dy, const int32_t *argmax,
                                               const struct dt_pool2d_shape *s,
                                               const struct dt_cuda_launch *L)
{
    const dt_cuda_stream st = L->stream;
    maxpool_direct_kernel<<<GRID(s->B * s->H * s->W * s->C)>>>(dx, dy, argmax, *s);
    return launched();
}

extern "C" int dt_cuda_maxpool_backward_fixed(float *dx, struct dt_cuda_fixed_record *rec,
                                              const float *dy, const int32_t *argmax,
                                              const struct dt_pool2d_shape *s,
                                              const struct dt_cuda_launch *L)
{
    const dt_cuda_stream st = L->stream;
    maxpool_fixed_kernel<<<GRID(s->B * s->H * s->W * s->C)>>>(dx, rec, dy, argmax, *s);
    return launched();
}

extern "C" int dt_cuda_maxpool_backward_atomic(float *dx, const float *dy, const int32_t *argmax,
                                               const struct dt_pool2d_shape *s,
                                               const struct dt_cuda_launch *L)
{
    const dt_cuda_stream st = L->stream;
    int e = zero(dx, s->B * s->H * s->W * s->C, st);
    if (e) return e;
    maxpool_atomic_kernel<<<GRID(s->B * s->OH * s->OW * s->C)>>>(dx, dy, argmax, *s);
    return launched();
}

extern "C" int dt_cuda_maxpool_backward_ranked(float *dx, const float *dy, const int32_t *argmax,
                                               const int64_t *rank, const struct dt_pool2d_shape *s,
                                               const struct dt_cuda_launch *L)
{
    const dt_cuda_stream st = L->stream;
    maxpool_ranked_kernel<<<GRID(s->B * s->H * s->W * s->C)>>>(dx, dy, argmax, rank, *s);
    return launched();
}

extern "C" int dt_cuda_transpose(float *dst, const float *src, int64_t rows, int64_t cols,
                                 const struct dt_cuda_launch *L)
{
    const dt_cuda_stream st = L->stream;
    transpose_kernel<<<GRID(rows * cols)>>>(dst, src, rows, cols);
    return launched();
}
