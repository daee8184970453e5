/* The gather of a training batch from the resident set (nets/backend.h, dt_backend_gather):
 * one thread per element of x, then per label; each element is dt_gather_elem
 * (nets/gather_hd.h), the rule the host's batch follows, so the bits are the host's for
 * any grid (tests/test_data.c emulates it on the host). */
#include "nets/cuda/cuda.h"
#include "nets/cuda/launch.cuh"
#include "nets/gather_hd.h"

static __global__ void __launch_bounds__(1024)
    gather_kernel(float *x, int32_t *labels, const uint8_t *pixels, const float *values,
                  const uint8_t *set_labels, const int64_t *idx, int64_t B, int64_t dim,
                  int64_t stride)
{
    DT_GRID_STRIDE(e, B * dim)
    x[e] = dt_gather_elem(pixels, values, idx, dim, stride, e);
    DT_GRID_STRIDE(b, B)
    labels[b] = set_labels[idx[b]];
}

extern "C" int dt_cuda_gather_launch(float *x, int32_t *labels, const uint8_t *pixels,
                                     const float *values, const uint8_t *set_labels,
                                     const int64_t *idx, int64_t B, int64_t dim, int64_t stride,
                                     const struct dt_cuda_launch *L)
{
    const dt_cuda_stream s = L->stream;
    DT_LAUNCH(L, dt_work(4.0 * (double)B * (double)dim * 2.0 + 9.0 * (double)B, 0.0), gather_kernel,
              dt_cuda_grid(L, B * dim), L->block_threads, 0, s)
    (x, labels, pixels, values, set_labels, idx, B, dim, stride);
    return DT_LAUNCHED(L);
}
