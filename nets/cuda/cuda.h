/* Private to the CUDA backend: its context, the error check every CUDA call goes through,
 * and the extern "C" launchers of the kernels in the .cu files (one op family per file).
 * Host code stays C; kernels are CUDA C. Data path (DESIGN.md): nets/backend -> here. */
#ifndef DT_CUDA_H
#define DT_CUDA_H

#include <stdint.h>

#include "nets/backend_impl.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Launchers return 0, or the cudaError_t of the launch (checked by the caller with the
 * op's name). Every launch goes to the backend's stream. */
typedef struct CUstream_st *dt_cuda_stream;

/* portable: elementwise (index i only); the same operations, in the same order, as
 * nets/cpu/activation.c and nets/cpu/sgd.c, compiled without FMA contraction. */
int dt_cuda_relu_forward(float *y, const float *x, int64_t n, dt_cuda_stream s);
int dt_cuda_relu_backward(float *dx, const float *dy, const float *y, int64_t n,
                          dt_cuda_stream s);
int dt_cuda_sgd_update(float *w, float *v, const float *g, int64_t n, float lr, float momentum,
                       float weight_decay, dt_cuda_stream s);
/* Grid-size hook for tests: elementwise launches use this many threads per block (0 =
 * the default 256), so a test can show the result does not depend on it. */
void dt_cuda_set_block_size(int threads);

#ifdef __cplusplus
}
#endif

#endif
