/* Normalisation on the CUDA backend: LayerNorm's kernels, their launchers and the op's host
 * functions (declared from their rows of nets/op_list.h in nets/cuda/cuda.h). A warp per row,
 * the lane functions of nets/gpt_elem.h that the CPU ops call (dt_layernorm_row,
 * dt_layernorm_row_grad), the lane partials combined by the shuffle butterfly
 * (dt_lanes_combine's value): the CPU's bits at every policy, for any grid. */
#include "nets/batchnorm_elem.h"
#include "nets/cuda/cuda.h"
#include "nets/cuda/launch.cuh"
#include "nets/gpt_elem.h"

#define THREADS L->block_threads
#define LAUNCHED return DT_LAUNCHED(L)

/* LayerNorm: a warp per row (rows grid-stride over the grid's warps; blocks of
 * LN_BLOCK threads, whole warps), lane j the row's elements j, j + 32, ...; each sum's lane
 * partials combined by the xor butterfly, whose value every lane gets: dt_lanes_combine's,
 * the CPU's bits. */
#define LN_BLOCK 128

static __device__ float warp_combine(float v)
{
    for (int off = DT_GPT_LN_LANES / 2; off >= 1; off /= 2)
        v = v + __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

static __global__ void __launch_bounds__(LN_BLOCK)
    layernorm_forward_kernel(float *y, float *mean, float *rstd, const float *x, const float *gamma,
                             const float *beta, int64_t rows, int64_t D)
{
    const int lane = threadIdx.x % DT_GPT_LN_LANES;
    const int64_t warps = (int64_t)gridDim.x * (blockDim.x / DT_GPT_LN_LANES);
    for (int64_t r =
             blockIdx.x * (int64_t)(blockDim.x / DT_GPT_LN_LANES) + threadIdx.x / DT_GPT_LN_LANES;
         r < rows; r += warps) {
        const float *xr = x + r * D;
        const float m = dt_ln_mean(warp_combine(dt_ln_lane_sum(xr, D, lane)), D);
        const float rs = dt_ln_rstd(warp_combine(dt_ln_lane_sqdev(xr, m, D, lane)), D);
        dt_ln_lane_out(y + r * D, xr, gamma, beta, m, rs, D, lane);
        if (lane == 0) {
            mean[r] = m;
            rstd[r] = rs;
        }
    }
}

static __global__ void __launch_bounds__(LN_BLOCK)
    layernorm_backward_kernel(float *dx, float *gx, const float *dy, const float *x,
                              const float *mean, const float *rstd, const float *gamma,
                              int64_t rows, int64_t D, bool accumulate)
{
    const int lane = threadIdx.x % DT_GPT_LN_LANES;
    const int64_t warps = (int64_t)gridDim.x * (blockDim.x / DT_GPT_LN_LANES);
    for (int64_t r =
             blockIdx.x * (int64_t)(blockDim.x / DT_GPT_LN_LANES) + threadIdx.x / DT_GPT_LN_LANES;
         r < rows; r += warps) {
        float s1, s2;
        dt_ln_lane_grad_sums(&s1, &s2, dy + r * D, x + r * D, mean[r], rstd[r], gamma, D, lane);
        const float m1 = dt_rn_div(warp_combine(s1), (float)D);
        const float m2 = dt_rn_div(warp_combine(s2), (float)D);
        dt_ln_lane_grad_out(dx + r * D, gx + r * D, dy + r * D, x + r * D, mean[r], rstd[r], gamma,
                            m1, m2, D, lane, accumulate);
    }
}

/* Blocks of LN_BLOCK threads for a warp per row, at most L's cap. */
static unsigned ln_grid(const struct dt_cuda_launch *L, int64_t rows)
{
    const int64_t per_block = LN_BLOCK / DT_GPT_LN_LANES,
                  cap = L->max_blocks > 0 ? L->max_blocks : 65535;
    int64_t blocks = (rows + per_block - 1) / per_block;
    if (blocks > cap) blocks = cap;
    return (unsigned)(blocks > 0 ? blocks : 1);
}
static int layernorm_forward_launch(float *y, float *mean, float *rstd, const float *x,
                                    const float *gamma, const float *beta, int64_t rows, int64_t D,
                                    const struct dt_cuda_launch *L)
{
    const dt_cuda_stream s = L->stream;
    /* a warp a row: dt_layernorm_row's lanes, the butterfly's 5 shuffles a sum (two sums) */
    const double r = (double)rows, d = (double)D;
    DT_LAUNCH(L,
              dt_work(4.0 * (2.0 * r * d + 2.0 * d + 2.0 * r),
                      r * (8.0 * d + 3.0 * DT_W_DIV + 2.0 + 2.0 * 5.0 * DT_GPT_LN_LANES)),
              layernorm_forward_kernel, ln_grid(L, rows), LN_BLOCK, 0, s)
    (y, mean, rstd, x, gamma, beta, rows, D);
    LAUNCHED;
}

static int layernorm_backward_launch(float *dx, float *gx, const float *dy, const float *x,
                                     const float *mean, const float *rstd, const float *gamma,
                                     int64_t rows, int64_t D, bool accumulate,
                                     const struct dt_cuda_launch *L)
{
    const dt_cuda_stream s = L->stream;
    /* dt_layernorm_row_grad's lanes, two butterflies; dx read too when accumulating */
    const double r = (double)rows, d = (double)D, acc = accumulate ? 1.0 : 0.0;
    DT_LAUNCH(L,
              dt_work(4.0 * ((4.0 + acc) * r * d + d + 2.0 * r),
                      r * ((14.0 + acc) * d + 2.0 * DT_W_DIV + 2.0 * 5.0 * DT_GPT_LN_LANES)),
              layernorm_backward_kernel, ln_grid(L, rows), LN_BLOCK, 0, s)
    (dx, gx, dy, x, mean, rstd, gamma, rows, D, accumulate);
    LAUNCHED;
}
/* portable: per row (dt_layernorm_row). */
extern "C" enum dt_status dt_cuda_layernorm_forward(struct dt_backend *be, float *y, float *mean,
                                                    float *rstd, const float *x, const float *gamma,
                                                    const float *beta, int64_t rows, int64_t D,
                                                    const struct dt_policy *pol)
{
    return dt_cuda_launched(
        be, layernorm_forward_launch(y, mean, rstd, x, gamma, beta, rows, D, &dt_cuda(be)->launch),
        "layernorm_forward");
}

/* portable: per row (dt_layernorm_row_grad). */
extern "C" enum dt_status dt_cuda_layernorm_backward(struct dt_backend *be, float *dx, float *gx,
                                                     const float *dy, const float *x,
                                                     const float *mean, const float *rstd,
                                                     const float *gamma, int64_t rows, int64_t D,
                                                     bool accumulate, const struct dt_policy *pol)
{
    return dt_cuda_launched(be,
                            layernorm_backward_launch(dx, gx, dy, x, mean, rstd, gamma, rows, D,
                                                      accumulate, &dt_cuda(be)->launch),
                            "layernorm_backward");
}

/* ---- batch normalisation (nets/batchnorm_elem.h) -------------------------------------------
 * The statistics: a block per channel (grid-stride over the channels); its threads take the
 * channel's chunks (dt_bn_chunk_sum, the CPU's order per channel), each partial in global
 * scratch at p[chunk]; then the fixed tree over them in place (dt_reduce_tree_strided: the
 * values of dt_reduce_tree_vectors's compacted levels), a barrier between levels. The
 * elementwise kernels loop grid-stride. */
#define BN_BLOCK 256

/* The fixed tree over the m partials at p (the block's threads; dt_reduce_tree_strided's
 * levels, a barrier between them); the sum lands in p[0]. */
static __device__ void bn_block_tree(float *p, int64_t m)
{
    for (int64_t s = 1, count = m; count > 1; s *= 2, count = (count + 1) / 2) {
        for (int64_t j = threadIdx.x; j < count / 2; j += blockDim.x) dt_reduce_tree_pair(p, s, j);
        __syncthreads();
    }
}

/* One statistic of channel ch over n rows (m chunks) into p[0], its partials at p. */
static __device__ float bn_block_statistic(float *p, const float *x, int64_t n, int64_t m,
                                           int64_t C, int64_t ch, float mean, bool sq)
{
    for (int64_t c = threadIdx.x; c < m; c += blockDim.x)
        p[c] = dt_bn_chunk_sum(x, n, C, c, ch, mean, sq);
    __syncthreads();
    bn_block_tree(p, m);
    const float v = dt_bn_per_row(p[0], n);
    __syncthreads(); /* every thread has read p[0] before the next use of p */
    return v;
}

static __global__ void __launch_bounds__(BN_BLOCK)
    bn_stats_kernel(float *mean, float *var, float *rstd, float *scratch, const float *x, int64_t n,
                    int64_t C, float eps)
{
    const int64_t m = dt_reduce_chunks(n);
    for (int64_t ch = blockIdx.x; ch < C; ch += gridDim.x) {
        float *p = scratch + ch * m;
        const float mu = bn_block_statistic(p, x, n, m, C, ch, 0.0f, false);
        const float v = bn_block_statistic(p, x, n, m, C, ch, mu, true);
        if (threadIdx.x == 0) {
            mean[ch] = mu;
            var[ch] = v;
            rstd[ch] = dt_bn_rstd(v, eps);
        }
    }
}

static __global__ void __launch_bounds__(1024)
    bn_out_kernel(float *y, const float *x, const float *mean, const float *rstd,
                  const float *gamma, const float *beta, int64_t n, int64_t C)
{
    DT_GRID_STRIDE(i, n * C)
    {
        const int64_t ch = i % C;
        y[i] = dt_bn_out(x[i], mean[ch], rstd[ch], gamma[ch], beta[ch]);
    }
}

/* evaluation: rstd from the running variance per element (the same function, the same bits) */
static __global__ void __launch_bounds__(1024)
    bn_inference_kernel(float *y, const float *x, const float *mean, const float *var,
                        const float *gamma, const float *beta, int64_t n, int64_t C, float eps)
{
    DT_GRID_STRIDE(i, n * C)
    {
        const int64_t ch = i % C;
        y[i] = dt_bn_out(x[i], mean[ch], dt_bn_rstd(var[ch], eps), gamma[ch], beta[ch]);
    }
}

/* backward's sums: per channel a = sum dy / n, b = sum dy xhat / n (ab[ch], ab[C + ch]) and
 * rstd; the two partial arrays at scratch + 2 ch m */
static __global__ void __launch_bounds__(BN_BLOCK)
    bn_grad_sums_kernel(float *ab, float *rstd_out, float *scratch, const float *dy, const float *x,
                        const float *mean, const float *var, int64_t n, int64_t C, float eps)
{
    const int64_t m = dt_reduce_chunks(n);
    for (int64_t ch = blockIdx.x; ch < C; ch += gridDim.x) {
        float *pa = scratch + 2 * ch * m, *pb = pa + m;
        const float mu = mean[ch], rstd = dt_bn_rstd(var[ch], eps);
        for (int64_t c = threadIdx.x; c < m; c += blockDim.x)
            dt_bn_chunk_grad_sums(&pa[c], &pb[c], dy, x, n, C, c, ch, mu, rstd);
        __syncthreads();
        bn_block_tree(pa, m);
        bn_block_tree(pb, m);
        if (threadIdx.x == 0) {
            ab[ch] = dt_bn_per_row(pa[0], n);
            ab[C + ch] = dt_bn_per_row(pb[0], n);
            rstd_out[ch] = rstd;
        }
        __syncthreads();
    }
}

static __global__ void __launch_bounds__(1024)
    bn_grad_kernel(float *dx, float *gx, const float *dy, const float *x, const float *mean,
                   const float *rstd, const float *gamma, const float *ab, int64_t n, int64_t C)
{
    DT_GRID_STRIDE(i, n * C)
    {
        const int64_t ch = i % C;
        const float xhat = dt_bn_xhat(x[i], mean[ch], rstd[ch]);
        dx[i] = dt_bn_grad(dy[i], xhat, dt_bn_grad_scale(gamma[ch], rstd[ch]), ab[ch], ab[C + ch]);
        gx[i] = dt_bn_gamma_term(dy[i], xhat);
    }
}

static __global__ void __launch_bounds__(1024)
    bn_running_kernel(float *rmean, float *rvar, const float *mean, const float *var,
                      int64_t groups, int64_t stride, int64_t C, int64_t batch, int64_t per_example,
                      float momentum)
{
    DT_GRID_STRIDE(ch, C)
    {
        float rm = rmean[ch], rv = rvar[ch];
        for (int64_t g = 0; g < groups; g++) {
            const int64_t n = dt_bn_group_rows(g, groups, batch, per_example);
            rm = dt_bn_running(rm, mean[g * stride + ch], momentum);
            rv = dt_bn_running(rv, dt_bn_unbiased(var[g * stride + ch], n), momentum);
        }
        rmean[ch] = rm;
        rvar[ch] = rv;
    }
}

/* Blocks for a block per channel, at most L's cap. */
static unsigned bn_channel_grid(const struct dt_cuda_launch *L, int64_t C)
{
    const int64_t cap = L->max_blocks > 0 ? L->max_blocks : 65535;
    return (unsigned)(C < cap ? C : cap);
}

static int bn_forward_launch(float *y, float *mean, float *var, float *scratch, const float *x,
                             const float *gamma, const float *beta, int64_t n, int64_t C, float eps,
                             const struct dt_cuda_launch *L)
{
    const dt_cuda_stream s = L->stream;
    const double e = (double)n * (double)C, m = (double)dt_reduce_chunks(n) * (double)C;
    /* x read twice, the partials written and the tree's levels (about 2 m) read and written */
    DT_LAUNCH(L, dt_work(4.0 * (2.0 * e + 6.0 * m + 3.0 * (double)C), 4.0 * e + 2.0 * m),
              bn_stats_kernel, bn_channel_grid(L, C), BN_BLOCK, 0, s)
    (mean, var, scratch + dt_reduce_chunks(n) * C, scratch, x, n, C, eps);
    if (DT_LAUNCHED(L)) return DT_LAUNCHED(L);
    DT_LAUNCH(L, dt_work(4.0 * (2.0 * e + 4.0 * (double)C), 4.0 * e), bn_out_kernel,
              dt_cuda_grid(L, n * C), L->block_threads, 0, s)
    (y, x, mean, scratch + dt_reduce_chunks(n) * C, gamma, beta, n, C);
    LAUNCHED;
}

static int bn_backward_launch(float *dx, float *gx, float *scratch, const float *dy, const float *x,
                              const float *mean, const float *var, const float *gamma, int64_t n,
                              int64_t C, float eps, const struct dt_cuda_launch *L)
{
    const dt_cuda_stream s = L->stream;
    const int64_t mc = dt_reduce_chunks(n) * C;
    const double e = (double)n * (double)C, m = (double)mc;
    float *ab = scratch + 2 * mc, *rstd = ab + 2 * C;
    DT_LAUNCH(L, dt_work(4.0 * (2.0 * e + 12.0 * m + 5.0 * (double)C), 5.0 * e + 4.0 * m),
              bn_grad_sums_kernel, bn_channel_grid(L, C), BN_BLOCK, 0, s)
    (ab, rstd, scratch, dy, x, mean, var, n, C, eps);
    if (DT_LAUNCHED(L)) return DT_LAUNCHED(L);
    DT_LAUNCH(L, dt_work(4.0 * (4.0 * e + 5.0 * (double)C), 8.0 * e), bn_grad_kernel,
              dt_cuda_grid(L, n * C), L->block_threads, 0, s)
    (dx, gx, dy, x, mean, rstd, gamma, ab, n, C);
    LAUNCHED;
}

static int bn_inference_launch(float *y, const float *x, const float *mean, const float *var,
                               const float *gamma, const float *beta, int64_t n, int64_t C,
                               float eps, const struct dt_cuda_launch *L)
{
    const dt_cuda_stream s = L->stream;
    const double e = (double)n * (double)C;
    DT_LAUNCH(L, dt_work(4.0 * (2.0 * e + 4.0 * (double)C), e * (4.0 + DT_W_DIV)),
              bn_inference_kernel, dt_cuda_grid(L, n * C), L->block_threads, 0, s)
    (y, x, mean, var, gamma, beta, n, C, eps);
    LAUNCHED;
}

static int bn_running_launch(float *rmean, float *rvar, const float *mean, const float *var,
                             int64_t groups, int64_t stride, int64_t C, int64_t batch,
                             int64_t per_example, float momentum, const struct dt_cuda_launch *L)
{
    const dt_cuda_stream s = L->stream;
    const double g = (double)groups * (double)C;
    DT_LAUNCH(L, dt_work(4.0 * (2.0 * g + 4.0 * (double)C), 8.0 * g), bn_running_kernel,
              dt_cuda_grid(L, C), L->block_threads, 0, s)
    (rmean, rvar, mean, var, groups, stride, C, batch, per_example, momentum);
    LAUNCHED;
}

/* The own kernels at every policy: the CPU's bits (nets/batchnorm_elem.h's order). */
extern "C" enum dt_status dt_cuda_batchnorm_forward(struct dt_backend *be, float *y, float *mean,
                                                    float *var, const float *x, const float *gamma,
                                                    const float *beta, int64_t rows, int64_t C,
                                                    float eps, const struct dt_policy *pol)
{
    float *scratch =
        (float *)dt_cuda_scratch(be, 0, (size_t)((dt_reduce_chunks(rows) + 1) * C) * sizeof(float));
    return dt_cuda_launched(be,
                            bn_forward_launch(y, mean, var, scratch, x, gamma, beta, rows, C, eps,
                                              &dt_cuda(be)->launch),
                            "batchnorm_forward");
}

extern "C" enum dt_status dt_cuda_batchnorm_backward(struct dt_backend *be, float *dx, float *gx,
                                                     const float *dy, const float *x,
                                                     const float *mean, const float *var,
                                                     const float *gamma, int64_t rows, int64_t C,
                                                     float eps, const struct dt_policy *pol)
{
    float *scratch = (float *)dt_cuda_scratch(
        be, 0, (size_t)((2 * dt_reduce_chunks(rows) + 3) * C) * sizeof(float));
    return dt_cuda_launched(be,
                            bn_backward_launch(dx, gx, scratch, dy, x, mean, var, gamma, rows, C,
                                               eps, &dt_cuda(be)->launch),
                            "batchnorm_backward");
}

extern "C" enum dt_status dt_cuda_batchnorm_inference(struct dt_backend *be, float *y,
                                                      const float *x, const float *mean,
                                                      const float *var, const float *gamma,
                                                      const float *beta, int64_t rows, int64_t C,
                                                      float eps, const struct dt_policy *pol)
{
    return dt_cuda_launched(
        be, bn_inference_launch(y, x, mean, var, gamma, beta, rows, C, eps, &dt_cuda(be)->launch),
        "batchnorm_inference");
}

extern "C" enum dt_status dt_cuda_batchnorm_running(struct dt_backend *be, float *rmean,
                                                    float *rvar, const float *mean,
                                                    const float *var, int64_t groups,
                                                    int64_t stride, int64_t C, int64_t batch,
                                                    int64_t per_example, float momentum,
                                                    const struct dt_policy *pol)
{
    return dt_cuda_launched(be,
                            bn_running_launch(rmean, rvar, mean, var, groups, stride, C, batch,
                                              per_example, momentum, &dt_cuda(be)->launch),
                            "batchnorm_running");
}
