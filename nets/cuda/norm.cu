/* Normalisation on the CUDA backend: LayerNorm's kernels, their launchers and the op's host
 * functions (declared from their rows of nets/op_list.h in nets/cuda/cuda.h). A warp per row,
 * the lane functions of nets/gpt_elem.h that the CPU ops call (dt_layernorm_row,
 * dt_layernorm_row_grad), the lane partials combined by the shuffle butterfly
 * (dt_lanes_combine's value): the CPU's bits at every policy, for any grid. */
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
