/* Launch geometry shared by the .cu files of the CUDA backend (CUDA C only). Every kernel
 * loops grid-stride over its work items, so any block and grid size computes the same
 * items the same way; tests force several through dt_cuda_set_launch (nets/cuda/cuda.h). */
#ifndef DT_CUDA_LAUNCH_CUH
#define DT_CUDA_LAUNCH_CUH

#include <cuda_runtime.h>
#include <stdint.h>

/* Current threads per block and grid cap (defined in nets/cuda/launch.cu). */
extern int dt_cuda_block_threads;
extern int dt_cuda_max_blocks;

/* Blocks for `items` work items at the current block size, at least 1, at most the cap. */
static inline unsigned dt_cuda_grid_for(int64_t items)
{
    int64_t blocks = (items + dt_cuda_block_threads - 1) / dt_cuda_block_threads;
    int64_t cap = dt_cuda_max_blocks > 0 ? dt_cuda_max_blocks : 65535;
    if (blocks > cap) blocks = cap;
    return (unsigned)(blocks > 0 ? blocks : 1);
}

/* for (i = first item of this thread; i < n; i += whole grid) */
#define DT_GRID_STRIDE(i, n)                                                                       \
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < (n);                      \
         i += (int64_t)gridDim.x * blockDim.x)

#endif
