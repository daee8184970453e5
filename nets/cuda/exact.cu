/* reduction: exact on the CUDA backend: kernels of the exact sum of the canonical shards'
 * gradient partials (nets/backend.h, dt_exact_*), everything on the device: the int64
 * accumulator lives there and no gradient byte crosses to the host.
 *   max       grid-stride per-thread maxima of |bits|, merged by atomicMax in the block,
 *             then on the tensor's word (max is order-free: any grid gives the same word);
 *   sum / to_fixed / round
 *             one thread per element: dt_fixed_sum_strided over its slots at the shift
 *             dt_fixed_shift_for gives for the tensor's max, then dt_fixed_to_float once
 *             -- integer arithmetic only, the CPU backend's bits (tests emulate it). */
#include "determinism/fixed_point.h"
#include "nets/cuda/cuda.h"
#include "nets/cuda/launch.cuh"

/* max_bits (zeroed by the launcher) = max over p[0, count) of |bits|: a thread's, the
 * block's in shared memory, one atomic a block (the grid has a thread an element: one atomic
 * a thread queued millions on a tensor's word for the GPU-scale GPT, results/nvidia-h200) */
static __global__ void exact_max_kernel(uint32_t *max_bits, const float *p, int64_t count)
{
    __shared__ unsigned int block_max;
    if (threadIdx.x == 0) block_max = 0;
    __syncthreads();
    uint32_t m = 0;
    DT_GRID_STRIDE(i, count)
    {
        uint32_t b = __float_as_uint(p[i]) & 0x7fffffffu;
        m = b > m ? b : m;
    }
    if (m) atomicMax(&block_max, m);
    __syncthreads();
    if (threadIdx.x == 0 && block_max) atomicMax(max_bits, block_max);
}

/* mode 0: p[e] = the exact sum rounded; mode 1: acc[e] = the int64 sum; mode 2: p[e] =
 * acc[e] rounded. A tensor with a non-finite max is left alone (the caller names it). */
static __global__ void exact_sum_kernel(float *p, int64_t *acc, const uint32_t *max_bits, int64_t n,
                                        int64_t slots, int64_t shards, int mode)
{
    const uint32_t mb = *max_bits;
    if (mb >= 0x7f800000u) return;
    const int shift = dt_fixed_shift_for(__uint_as_float(mb), shards);
    DT_GRID_STRIDE(e, n)
    {
        if (mode == 2) {
            p[e] = dt_fixed_to_float(acc[e], shift);
            continue;
        }
        const int64_t a = dt_fixed_sum_strided(p + e, n, slots, shift);
        if (mode == 1) acc[e] = a;
        else p[e] = dt_fixed_to_float(a, shift);
    }
}

extern "C" int dt_cuda_exact_max_launch(uint32_t *max_bits, const float *p, int64_t count,
                                        const struct dt_cuda_launch *L)
{
    const dt_cuda_stream s = L->stream;
    cudaError_t e = cudaMemsetAsync(max_bits, 0, sizeof *max_bits, s);
    if (e != cudaSuccess) return (int)e;
    exact_max_kernel<<<dt_cuda_grid(L, count), L->block_threads, 0, s>>>(max_bits, p, count);
    return (int)cudaGetLastError();
}

extern "C" int dt_cuda_exact_sum_launch(float *p, int64_t *acc, const uint32_t *max_bits, int64_t n,
                                        int64_t slots, int64_t shards, int mode,
                                        const struct dt_cuda_launch *L)
{
    const dt_cuda_stream s = L->stream;
    exact_sum_kernel<<<dt_cuda_grid(L, n), L->block_threads, 0, s>>>(p, acc, max_bits, n, slots,
                                                                     shards, mode);
    return (int)cudaGetLastError();
}
