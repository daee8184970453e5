/* reduction: exact on the CUDA backend: the exact sum of the shard partials
 * as kernels on the backend's stream (below), one launch per tensor and
 * stage, no host wait. The per-shard batch reductions themselves are the plain ops called
 * once per shard by nets/dispatch.c. */
#include "determinism/fixed_point.h"
#include "nets/cuda/cuda.h"
#include "nets/cuda/launch.cuh"

/* ---- kernels and their launchers ---------------------------------------------------------- */

/* reduction: exact on the CUDA backend: kernels of the exact sum of the canonical shards'
 * gradient partials (nets/backend.h, dt_exact_*), everything on the device: the int64
 * accumulator lives there and no gradient byte crosses to the host.
 *   max       grid-stride per-thread maxima of |bits|, merged by atomicMax in the block,
 *             then on the tensor's word (max is order-free: any grid gives the same word);
 *   sum / to_fixed / round
 *             one thread per element: dt_fixed_sum_strided over its slots at the shift
 *             dt_fixed_shift_for gives for the tensor's max, then dt_fixed_to_float once
 *             -- integer arithmetic only, the CPU backend's bits (tests emulate it). */

/* max_bits (zeroed by the launcher) = max over p[0, count) of |bits|: a thread's, the
 * block's in shared memory, one atomic a block (the grid has a thread an element: one atomic
 * a thread queued millions on a tensor's word for the GPU-scale GPT, results/nvidia-h200) */
static __global__ void __launch_bounds__(1024)
    exact_max_kernel(uint32_t *max_bits, const float *p, int64_t count)
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
static __global__ void __launch_bounds__(1024)
    exact_sum_kernel(float *p, int64_t *acc, const uint32_t *max_bits, int64_t n, int64_t slots,
                     int64_t shards, int mode)
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

static int dt_cuda_exact_max_launch(uint32_t *max_bits, const float *p, int64_t count,
                                    const struct dt_cuda_launch *L)
{
    const dt_cuda_stream s = L->stream;
    cudaError_t e = dt_cuda_memset_async(L, max_bits, 0, sizeof *max_bits, s);
    if (e != cudaSuccess) return (int)e;
    DT_LAUNCH(L, dt_work(4.0 * (double)count, DT_W_OPS_SCAN * (double)count), exact_max_kernel,
              dt_cuda_grid(L, count), L->block_threads, 0, s)
    (max_bits, p, count);
    return DT_LAUNCHED(L);
}

/* mode 0: sum and round into p; 1: int64 sums into acc; 2: acc rounded into p */
static int dt_cuda_exact_sum_launch(float *p, int64_t *acc, const uint32_t *max_bits, int64_t n,
                                    int64_t slots, int64_t shards, int mode,
                                    const struct dt_cuda_launch *L)
{
    const dt_cuda_stream s = L->stream;
    /* mode 0: the slots' partials read, each term to int64 at the shift, one rounding into
     * slot 0; 1: the int64 sums written; 2: they are read and rounded */
    const double elems = (double)n, terms = (double)slots * elems;
    const struct dt_op_cost w =
        mode == 0   ? dt_work(4.0 * (terms + elems),
                              DT_W_OPS_FIXED_TERM * terms + DT_W_OPS_FIXED_ROUND * elems)
        : mode == 1 ? dt_work(4.0 * terms + 8.0 * elems, DT_W_OPS_FIXED_TERM * terms)
                    : dt_work(12.0 * elems, DT_W_OPS_FIXED_ROUND * elems);
    DT_LAUNCH(L, w, exact_sum_kernel, dt_cuda_grid(L, n), L->block_threads, 0, s)
    (p, acc, max_bits, n, slots, shards, mode);
    return DT_LAUNCHED(L);
}

/* ---- the ops (declared from their rows of nets/op_list.h in nets/cuda/cuda.h) ----------- */

extern "C" enum dt_status dt_cuda_exact_max(struct dt_backend *be, uint32_t *max_bits,
                                            const float *pack, const struct dt_exact_layout *L)
{
    for (int i = 0; i < L->tensors; i++) {
        int rc = dt_cuda_exact_max_launch(max_bits + i, pack + L->slots * L->first[i],
                                          L->slots * L->n[i], &dt_cuda(be)->launch);
        if (rc) return dt_cuda_launched(be, rc, "exact_max");
    }
    return DT_OK;
}

static enum dt_status exact_sums(struct dt_backend *be, float *pack, int64_t *acc,
                                 const uint32_t *max_bits, const struct dt_exact_layout *L,
                                 int mode)
{
    for (int i = 0; i < L->tensors; i++) {
        int rc = dt_cuda_exact_sum_launch(pack + L->slots * L->first[i],
                                          acc ? acc + L->first[i] : NULL, max_bits + i, L->n[i],
                                          L->slots, L->shards, mode, &dt_cuda(be)->launch);
        if (rc) return dt_cuda_launched(be, rc, "exact_sum");
    }
    return DT_OK;
}

/* the maxima (an output of exact_sum), then the sums: two launches a tensor */
extern "C" enum dt_status dt_cuda_exact_sum(struct dt_backend *be, float *pack, uint32_t *max_bits,
                                            const struct dt_exact_layout *L)
{
    enum dt_status st = dt_cuda_exact_max(be, max_bits, pack, L);
    return st == DT_OK ? exact_sums(be, pack, NULL, max_bits, L, 0) : st;
}

extern "C" enum dt_status dt_cuda_exact_to_fixed(struct dt_backend *be, int64_t *acc,
                                                 const float *pack, const uint32_t *max_bits,
                                                 const struct dt_exact_layout *L)
{
    return exact_sums(be, (float *)pack, acc, max_bits, L, 1);
}

extern "C" enum dt_status dt_cuda_exact_round(struct dt_backend *be, float *pack,
                                              const int64_t *acc, const uint32_t *max_bits,
                                              const struct dt_exact_layout *L)
{
    return exact_sums(be, pack, (int64_t *)acc, max_bits, L, 2);
}
