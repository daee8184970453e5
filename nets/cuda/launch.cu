/* The CUDA backend's launch geometry (nets/cuda/launch.cuh): threads per block and the
 * grid cap every launch reads, and the test hook that sets them. Every kernel loops
 * grid-stride, so no result depends on them. */
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
