/* Private to the CUDA backend: the launchers of nets/cuda/bnn.cu, included by both sides
 * so a declaration and its extern "C" definition cannot drift apart unnoticed. */
#ifndef DT_CUDA_BNN_LAUNCH_H
#define DT_CUDA_BNN_LAUNCH_H

#include "nets/cuda/cuda.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Launchers of nets/cuda/bnn.cu (extern "C"): 0 or the launch's cudaError_t.
 * Pointers are device memory; the Philox stream is passed to the kernel by value. */
int dt_cuda_eps_philox_launch(float *eps, int64_t n, const struct dt_philox_stream *s,
                              const struct dt_cuda_launch *L);
int dt_cuda_eps_lfsr_seed_launch(struct dt_xoro *lanes, int64_t P, uint64_t seed, uint32_t step,
                                 uint32_t member, uint32_t sample, const struct dt_cuda_launch *L);
int dt_cuda_eps_lfsr_launch(float *eps, int64_t n, struct dt_xoro *lanes, int64_t P, bool backward,
                            int64_t skip_lane, const struct dt_cuda_launch *L);
int dt_cuda_bnn_sigma_launch(float *sigma, float *dsigma, const float *rho, int64_t n,
                             bool portable, const struct dt_cuda_launch *L);
int dt_cuda_bnn_sample_launch(float *w, const float *mu, const float *sigma, const float *eps,
                              int64_t n, const struct dt_cuda_launch *L);
int dt_cuda_bnn_accumulate_launch(float *gmu, float *grho, const float *g, const float *eps,
                                  const float *dsigma, int64_t n, bool first,
                                  const struct dt_cuda_launch *L);
int dt_cuda_bnn_finish_launch(float *gmu, float *grho, const float *mu, const float *sigma,
                              const float *dsigma, int64_t n, float inv_s, float klw, float ipv,
                              const struct dt_cuda_launch *L);

#ifdef __cplusplus
}
#endif

#endif
