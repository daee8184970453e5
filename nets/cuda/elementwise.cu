/* Elementwise kernels of the CUDA backend: ReLU forward and backward (the optimizers: optim.cu).
 * Each thread owns element i (grid-stride loop), so the result is independent of grid and
 * block size; with --fmad=false (CMakeLists.txt) a*b+c stays two roundings, matching the
 * CPU backend's bits at every policy. */
#include "nets/cuda/cuda.h"
#include "nets/cuda/launch.cuh"

int dt_cuda_block_threads = 256;
int dt_cuda_max_blocks = 0;

extern "C" void dt_cuda_set_launch(int block_threads, int max_blocks)
{
    /* 1024 threads is CUDA's limit per block; every kernel fits it (at most 64 registers
     * per thread: the forced-order gathers of nets/cuda/conv.cu carry __launch_bounds__). */
    dt_cuda_block_threads = block_threads > 0 ? (block_threads < 1024 ? block_threads : 1024) : 256;
    dt_cuda_max_blocks = max_blocks > 0 ? max_blocks : 0;
}

extern "C" void dt_cuda_set_block_size(int threads)
{
    dt_cuda_set_launch(threads, dt_cuda_max_blocks);
}

/* portable: y[i] = x[i] > 0 ? x[i] : 0 (NaN gives 0, as on the CPU). */
static __global__ void relu_forward_kernel(float *y, const float *x, int64_t n)
{
    DT_GRID_STRIDE(i, n)
    y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

/* portable: dx[i] = y[i] > 0 ? dy[i] : 0 (subgradient 0 at 0). */
static __global__ void relu_backward_kernel(float *dx, const float *dy, const float *y, int64_t n)
{
    DT_GRID_STRIDE(i, n)
    dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

extern "C" int dt_cuda_relu_forward(float *y, const float *x, int64_t n, dt_cuda_stream s)
{
    relu_forward_kernel<<<dt_cuda_grid_for(n), dt_cuda_block_threads, 0, s>>>(y, x, n);
    return (int)cudaGetLastError();
}

extern "C" int dt_cuda_relu_backward(float *dx, const float *dy, const float *y, int64_t n,
                                     dt_cuda_stream s)
{
    relu_backward_kernel<<<dt_cuda_grid_for(n), dt_cuda_block_threads, 0, s>>>(dx, dy, y, n);
    return (int)cudaGetLastError();
}
