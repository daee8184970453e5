/* Elementwise kernels of the CUDA backend: ReLU forward/backward and SGD with momentum.
 * Each thread owns element i (grid-stride loop), so the result is independent of grid and
 * block size; with --fmad=false (CMakeLists.txt) a*b+c stays two roundings, matching the
 * CPU backend's bits at every policy. */
#include "nets/cuda/cuda.h"

#include <cuda_runtime.h>

static int block_size = 256;

extern "C" void dt_cuda_set_block_size(int threads) { block_size = threads > 0 ? threads : 256; }

static unsigned grid_for(int64_t n)
{
    int64_t blocks = (n + block_size - 1) / block_size;
    return (unsigned)(blocks < 65535 ? (blocks > 0 ? blocks : 1) : 65535);
}

/* portable: y[i] = x[i] > 0 ? x[i] : 0 (NaN gives 0, as on the CPU). */
__global__ void relu_forward_kernel(float *y, const float *x, int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

/* portable: dx[i] = y[i] > 0 ? dy[i] : 0 (subgradient 0 at 0). */
__global__ void relu_backward_kernel(float *dx, const float *dy, const float *y, int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x)
        dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

/* portable: g' = g + wd*w; v = mom*v + g'; w = w - lr*v -- the CPU's order, each product
 * and sum rounded on its own. */
__global__ void sgd_update_kernel(float *w, float *v, const float *g, int64_t n, float lr,
                                  float mom, float wd)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        float gi = __fadd_rn(g[i], __fmul_rn(wd, w[i]));
        float vi = __fadd_rn(__fmul_rn(mom, v[i]), gi);
        v[i] = vi;
        w[i] = __fsub_rn(w[i], __fmul_rn(lr, vi));
    }
}

extern "C" int dt_cuda_relu_forward(float *y, const float *x, int64_t n, dt_cuda_stream s)
{
    relu_forward_kernel<<<grid_for(n), block_size, 0, s>>>(y, x, n);
    return (int)cudaGetLastError();
}

extern "C" int dt_cuda_relu_backward(float *dx, const float *dy, const float *y, int64_t n,
                                     dt_cuda_stream s)
{
    relu_backward_kernel<<<grid_for(n), block_size, 0, s>>>(dx, dy, y, n);
    return (int)cudaGetLastError();
}

extern "C" int dt_cuda_sgd_update(float *w, float *v, const float *g, int64_t n, float lr,
                                  float momentum, float weight_decay, dt_cuda_stream s)
{
    sgd_update_kernel<<<grid_for(n), block_size, 0, s>>>(w, v, g, n, lr, momentum, weight_decay);
    return (int)cudaGetLastError();
}
