/* Launch geometry for the .cu files of the CUDA backend (CUDA C only): every launcher takes
 * the backend's struct dt_cuda_launch (its stream, threads per block and grid cap; in the
 * backend's context, nets/cuda/cuda.h). Every kernel loops grid-stride over its work
 * items, so any block and grid size computes the same items the same way; tests force
 * several through dt_cuda_set_launch. */
#ifndef DT_CUDA_LAUNCH_CUH
#define DT_CUDA_LAUNCH_CUH

#include <cuda_runtime.h>
#include <stdint.h>

#include "nets/cuda/cuda.h" /* struct dt_cuda_launch: the backend's stream and geometry */

/* Blocks for `items` work items at L's block size, at least 1, at most L's cap. */
static inline unsigned dt_cuda_grid(const struct dt_cuda_launch *L, int64_t items)
{
    int64_t blocks = (items + L->block_threads - 1) / L->block_threads;
    int64_t cap = L->max_blocks > 0 ? L->max_blocks : 65535;
    if (blocks > cap) blocks = cap;
    return (unsigned)(blocks > 0 ? blocks : 1);
}

/* Every kernel launch of the backend: counted in L's counts (dt_backend_launch_counts), then
 * made with the configuration given, as `kernel<<<config>>>(arguments)` would be:
 *     DT_LAUNCH(L, my_kernel, dt_cuda_grid(L, n), L->block_threads, 0, L->stream)(y, x, n);
 * (a statement; the count never skips the launch). */
static inline bool dt_cuda_count_kernel(const struct dt_cuda_launch *L)
{
    L->counts->kernels++;
    return false;
}
#define DT_LAUNCH(L, kernel, ...)                                                                  \
    if (dt_cuda_count_kernel(L)) {                                                                 \
    } else kernel<<<__VA_ARGS__>>>

/* cudaMemsetAsync on stream s, counted in L's counts (a launch on the stream). */
static inline cudaError_t dt_cuda_memset_async(const struct dt_cuda_launch *L, void *p, int value,
                                               size_t bytes, dt_cuda_stream s)
{
    L->counts->memsets++;
    return cudaMemsetAsync(p, value, bytes, (cudaStream_t)s);
}

/* for (i = first item of this thread; i < n; i += whole grid) */
#define DT_GRID_STRIDE(i, n)                                                                       \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n);                      \
         i += (int64_t)gridDim.x * blockDim.x)

#endif
