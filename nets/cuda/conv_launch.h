/* Private to the CUDA convolution and pooling ops: the extern "C" launchers of
 * nets/cuda/conv.cu (each returns 0 or the launch's cudaError_t). Included by C and CUDA
 * sources. The per-element work is nets/conv_elem.h's. */
#ifndef DT_CUDA_CONV_LAUNCH_H
#define DT_CUDA_CONV_LAUNCH_H

#include <stdint.h>

#include "nets/backend.h"
#include "nets/cuda/cuda.h"
#include "nets/cuda/dense_loss.h" /* struct dt_cuda_fixed_record, dt_cuda_fixed_scan */

#ifdef __cplusplus
extern "C" {
#endif

/* cols (rows, Kp) = the patches of x: dt_conv_patch_elem per element. */
int dt_cuda_im2col(float *cols, const float *x, const struct dt_conv2d_shape *s,
                   const struct dt_cuda_launch *L);
/* col2im, atomics fixed_point: one thread per cell, exact sums at the shift for max |dcols|
 * (from rec, filled by dt_cuda_fixed_scan; on the device) and KH*KW terms; nothing written when rec
 * has a bad term. */
int dt_cuda_col2im_fixed(float *dx, struct dt_cuda_fixed_record *rec, const float *dcols,
                         const struct dt_conv2d_shape *s, const struct dt_cuda_launch *L);
/* col2im, atomics float: every in-image patch element added into a zeroed dx by float
 * atomicAdd, in arrival order (nondeterministic). */
int dt_cuda_col2im_atomic(float *dx, const float *dcols, const struct dt_conv2d_shape *s,
                          const struct dt_cuda_launch *L);
/* col2im in a forced order (test hook): rank[row] = the row's place in the CPU's drawn
 * permutation (device memory). */
int dt_cuda_col2im_ranked(float *dx, const float *dcols, const int64_t *rank,
                          const struct dt_conv2d_shape *s, const struct dt_cuda_launch *L);
/* rank[perm[t]] = t for t in [0, n) (perm, rank: device memory). */
int dt_cuda_invert_permutation(int64_t *rank, const int64_t *perm, int64_t n,
                               const struct dt_cuda_launch *L);

/* y and argmax: dt_maxpool_out per output element. */
int dt_cuda_maxpool_forward(float *y, int32_t *argmax, const float *x,
                            const struct dt_pool2d_shape *s, const struct dt_cuda_launch *L);
/* Max-pool backward, K <= stride: each cell its one term or +0. */
int dt_cuda_maxpool_backward_direct(float *dx, const float *dy, const int32_t *argmax,
                                    const struct dt_pool2d_shape *s,
                                    const struct dt_cuda_launch *L);
/* atomics fixed_point: exact per-cell sums at the shift for max |dy| (rec) and
 * ceil(K/stride)^2 terms. */
int dt_cuda_maxpool_backward_fixed(float *dx, struct dt_cuda_fixed_record *rec, const float *dy,
                                   const int32_t *argmax, const struct dt_pool2d_shape *s,
                                   const struct dt_cuda_launch *L);
/* atomics float: each term added to its argmax cell of a zeroed dx by atomicAdd. */
int dt_cuda_maxpool_backward_atomic(float *dx, const float *dy, const int32_t *argmax,
                                    const struct dt_pool2d_shape *s,
                                    const struct dt_cuda_launch *L);
/* Forced order (test hook): rank[position] from the CPU's drawn permutation. */
int dt_cuda_maxpool_backward_ranked(float *dx, const float *dy, const int32_t *argmax,
                                    const int64_t *rank, const struct dt_pool2d_shape *s,
                                    const struct dt_cuda_launch *L);

/* dst (cols, rows) = src (rows, cols) transposed: exact copies (HWIO <-> KRSC weights). */
int dt_cuda_transpose(float *dst, const float *src, int64_t rows, int64_t cols,
                      const struct dt_cuda_launch *L);

#ifdef __cplusplus
}
#endif

#endif
