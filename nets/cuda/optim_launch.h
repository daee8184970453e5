/* Private to the CUDA backend: the launchers of nets/cuda/optim.cu (the optimizers' kernels),
 * included by both sides so a declaration and its extern "C" definition cannot drift apart.
 * Each returns 0 or the launch's cudaError_t; pointers are device memory. */
#ifndef DT_CUDA_OPTIM_LAUNCH_H
#define DT_CUDA_OPTIM_LAUNCH_H

#include "nets/cuda/dense_loss.h" /* struct dt_cuda_fixed_record */
#include "nets/optim_elem.h"      /* struct dt_adamw_step */

#ifdef __cplusplus
extern "C" {
#endif

/* Elementwise: dt_sgd_elem, dt_adamw_elem, g *= dt_clip_coef(*norm_sq). */
int dt_cuda_sgd_update_launch(float *w, float *v, const float *g, int64_t n, float lr,
                              float momentum, float weight_decay, const struct dt_cuda_launch *L);
int dt_cuda_adamw_launch(float *w, float *m, float *v, const float *g, int64_t n,
                         const struct dt_adamw_step *st, const struct dt_cuda_launch *L);
int dt_cuda_clip_scale_launch(float *g, int64_t n, const float *norm_sq, float max_norm,
                              const struct dt_cuda_launch *L);
/* The clipping norm's pieces. chunks: part[c] = the squares of g's chunk c (`chunk`
 * elements) summed in index order. add_in_order: *dst = *dst + sum, one thread (fixed:
 * the tensors' sums in tensor order). atomic: the chunk sums added to *dst by atomicAdd.
 * exact: init zeroes acc and the record; max takes g's max |x| into it (and the first
 * non-finite element); sum adds g's squares at the shift of (max^2, total) into acc;
 * finish writes *dst (NaN after a non-finite element, +Inf when max^2 overflows). */
int dt_cuda_norm_chunks(float *part, const float *g, int64_t n, int64_t chunk,
                        const struct dt_cuda_launch *L);
int dt_cuda_norm_add_in_order(float *dst, const float *sum, const struct dt_cuda_launch *L);
int dt_cuda_norm_atomic(float *dst, const float *g, int64_t n, int64_t chunk,
                        const struct dt_cuda_launch *L);
int dt_cuda_norm_exact_init(unsigned long long *acc, struct dt_cuda_fixed_record *rec,
                            const struct dt_cuda_launch *L);
int dt_cuda_norm_exact_max(struct dt_cuda_fixed_record *rec, const float *g, int64_t n,
                           const struct dt_cuda_launch *L);
int dt_cuda_norm_exact_sum(unsigned long long *acc, const struct dt_cuda_fixed_record *rec,
                           const float *g, int64_t n, int64_t total,
                           const struct dt_cuda_launch *L);
int dt_cuda_norm_exact_finish(float *dst, const unsigned long long *acc,
                              const struct dt_cuda_fixed_record *rec, int64_t total,
                              const struct dt_cuda_launch *L);

#ifdef __cplusplus
}
#endif

#endif
