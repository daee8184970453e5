/* The activations on the CUDA backend: each op's host function (declared from its row of
 * nets/op_list.h in nets/cuda/cuda.h) beside its kernel, the formulas those of
 * nets/activation_elem.h that the CPU ops call. Each thread owns element i (grid-stride
 * loop), so the result is independent of grid and block size: the CPU's bits at every policy. */
#include "nets/activation_elem.h"
#include "nets/cuda/cuda.h"
#include "nets/cuda/launch.cuh"

static __global__ void relu_forward_kernel(float *y, const float *x, int64_t n)
{
    DT_GRID_STRIDE(i, n)
    y[i] = dt_relu(x[i]);
}

static __global__ void relu_backward_kernel(float *dx, const float *dy, const float *y, int64_t n)
{
    DT_GRID_STRIDE(i, n)
    dx[i] = dt_relu_grad(y[i], dy[i]);
}

/* portable at every policy: elementwise. */
extern "C" enum dt_status dt_cuda_relu_forward(struct dt_backend *be, float *y, const float *x,
                                               int64_t n, const struct dt_policy *pol)
{
    const struct dt_cuda_launch *L = &dt_cuda(be)->launch;
    relu_forward_kernel<<<dt_cuda_grid(L, n), L->block_threads, 0, L->stream>>>(y, x, n);
    return dt_cuda_launched(be, (int)cudaGetLastError(), "relu_forward");
}

extern "C" enum dt_status dt_cuda_relu_backward(struct dt_backend *be, float *dx, const float *dy,
                                                const float *y, int64_t n,
                                                const struct dt_policy *pol)
{
    const struct dt_cuda_launch *L = &dt_cuda(be)->launch;
    relu_backward_kernel<<<dt_cuda_grid(L, n), L->block_threads, 0, L->stream>>>(dx, dy, y, n);
    return dt_cuda_launched(be, (int)cudaGetLastError(), "relu_backward");
}
