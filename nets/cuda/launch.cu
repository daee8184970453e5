/* The test hook that sets a CUDA backend's launch geometry (struct dt_cuda_launch,
 * nets/cuda/cuda.h): threads per block and the grid cap its launches read. Every kernel
 * loops grid-stride, so no result depends on them. */
#include "nets/cuda/cuda.h"
#include "nets/cuda/launch.cuh"

extern "C" void dt_cuda_set_launch(struct dt_backend *be, int block_threads, int max_blocks)
{
    /* 1024 threads is CUDA's limit per block; every kernel launched with this knob declares
     * __launch_bounds__(1024), so ptxas keeps it within 64 registers a thread and a block of
     * 1024 fits (house.bounds; the counts: results/cpu/ptxas/sm_90.txt). */
    struct dt_cuda_launch *L = &dt_cuda(be)->launch;
    L->block_threads = block_threads > 0 ? (block_threads < 1024 ? block_threads : 1024) : 256;
    L->max_blocks = max_blocks > 0 ? max_blocks : 0;
}

extern "C" void dt_cuda_set_block_size(struct dt_backend *be, int threads)
{
    dt_cuda_set_launch(be, threads, dt_cuda(be)->launch.max_blocks);
}
