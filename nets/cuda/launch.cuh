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
#include "nets/cuda/work.h" /* what a launch costs: dt_work, dt_cuda_note */

/* Blocks for `items` work items at L's block size, at least 1, at most L's cap. */
static inline unsigned dt_cuda_grid(const struct dt_cuda_launch *L, int64_t items)
{
    int64_t blocks = (items + L->block_threads - 1) / L->block_threads;
    int64_t cap = L->max_blocks > 0 ? L->max_blocks : 65535;
    if (blocks > cap) blocks = cap;
    return (unsigned)(blocks > 0 ? blocks : 1);
}

/* Every kernel launch of the backend, with W the work it does (struct dt_op_cost, nets/cuda/
 * work.h): counted in L's counts (dt_backend_launch_counts), then made with the configuration
 * given, as `kernel<<<config>>>(arguments)` would be --
 *     DT_LAUNCH(L, dt_work(8.0 * n, n), my_kernel, dt_cuda_grid(L, n), L->block_threads, 0,
 *               L->stream)(y, x, n);
 * -- or, when L records (a recording backend: no device), W added to the record and nothing
 * launched. A statement; DT_LAUNCHED(L) is the launcher's result after it. */
static inline bool dt_cuda_launch_note(const struct dt_cuda_launch *L, struct dt_op_cost w)
{
    L->counts->kernels++;
    return dt_cuda_note(L, w);
}
#define DT_LAUNCH(L, W, kernel, ...)                                                               \
    if (dt_cuda_launch_note((L), (W))) {                                                           \
    } else kernel<<<__VA_ARGS__>>>
/* A launcher's result: 0 or the launch's cudaError_t (0 when recording). */
#define DT_LAUNCHED(L) ((L)->record ? 0 : (int)cudaGetLastError())

/* cudaMemsetAsync on stream s, counted in L's counts (a launch on the stream); when L
 * records, its bytes added and nothing done. */
static inline cudaError_t dt_cuda_memset_async(const struct dt_cuda_launch *L, void *p, int value,
                                               size_t bytes, dt_cuda_stream s)
{
    L->counts->memsets++;
    if (dt_cuda_note(L, dt_work((double)bytes, 0.0))) return cudaSuccess;
    return cudaMemsetAsync(p, value, bytes, (cudaStream_t)s);
}

/* for (i = first item of this thread; i < n; i += whole grid) */
#define DT_GRID_STRIDE(i, n)                                                                       \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n);                      \
         i += (int64_t)gridDim.x * blockDim.x)

#endif
